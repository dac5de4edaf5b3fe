"""data27's rows (validation/README.md "MLPerf Training v6.0 Hopper llama31 rows"): Cisco's MLPerf v6.0 llama31_8b runs
on 8 and 16 "Zeus" nodes of H100, which run NVIDIA's NeMo 2 implementation of v5.1, not the v6.0 Megatron-Bridge one
whose log-read settings the other mlpt60 row takes."""

from __future__ import annotations

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

ZEUS = ("mlpt60_h100_llama31_8b_64_tp2", "mlpt60_h100_llama31_8b_128_tp2")


@needs_new_cases
def test_zeus_rates_are_the_logged_step_spans() -> None:
    """tokens/s/GPU = GBS x 8192 / (milliseconds between two logged steps / steps between them) / GPUs, by hand from
    the MLLOG time_ms of result_1.txt (Richardyu114/training_results_v6.0@eabf23a0)."""
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    step_64 = (1778616794289 - 1778616707485) / 1000 / (3839 - 3591)  # 0.35002 s
    step_128 = ((1778847286705 - 1778847225165) + (1778847908003 - 1778847843637)) / 1000 / (
        (1727 - 1551) + (3455 - 3271))  # 0.34974 s
    for cid, gbs, step, gpus in ((ZEUS[0], 32, step_64, 64), (ZEUS[1], 64, step_128, 128)):
        assert cases[cid]["measured"]["step_time_s"] == pytest.approx(step, rel=2e-5)
        assert cases[cid]["measured"]["tokens_per_s_per_gpu"] == pytest.approx(gbs * 8192 / step / gpus, rel=1e-4)
        par = cases[cid]["parallelism"]
        assert (par["tp"], par["dp"] * par["tp"], par["global_batch_seqs"]) == (2, gpus, gbs)


@needs_new_cases
def test_zeus_rows_take_their_implementations_settings() -> None:
    """The NeMo 2 implementation's 128 Mi-element bucket (not the Megatron-Bridge log's 768e6 of the mlpt60 H200 row),
    NVLS off (config_common.sh NCCL_NVLS_ENABLE=0), FP8 parameter gather, TE loss, delayed FP8 (the model's default
    recipe), userbuffers TP overlap, and both rows compared."""
    mod = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    by_id = {r.id: r for r in mod.validate_all()[0]}
    for cid in ZEUS:
        opts = mod.megatron_options(cases[cid], "1", "fp8", 2.0)
        assert opts["bucket_size"] == 128 * 1024 * 1024 * 2.0 and opts["fp8_param_gather"]
        assert "tiers.nvlink.in_network_reduction=false" in mod.cluster_overrides(cases[cid], "dgx-h100")
        r = by_id[cid]
        assert r.training.fp8_recipe is None and not r.training.fp8_attention
        assert r.strategy.loss_impl == "te" and r.strategy.tp_comm_overlap and r.strategy.sequence_parallel
    h200 = mod.megatron_options(cases["mlpt60_h200_llama31_8b_16"], "1", "fp8", 2.0)
    assert h200["bucket_size"] == 768_000_000 * 2.0
    assert not any("in_network_reduction" in o for o in mod.cluster_overrides(cases["mlpt60_h200_llama31_8b_16"],
                                                                              "hgx-h200"))
