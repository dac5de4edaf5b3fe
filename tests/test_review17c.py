"""Review 17c: findings in the work merged in round 17 (moe17's fp32 / fp64 router compute).

Megatron-Core's ``RouterGatingLinearFunction`` (megatron/core/transformer/moe/moe_utils.py,
NVIDIA/Megatron-LM@9c5258f109 lines 1324-1404) casts the router's input to ``router_dtype``
(``inp.to(ctx.router_dtype)``) and the input gradient back (``.to(ctx.input_dtype)``); ``TopKRouter.gating``
(router.py lines 119-124) builds the router only in an MoE layer. Expected values below come from that code and the
accelerator datasheets in hardware/accelerators, not from the functions under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_yaml, script_module
from msgspec.structs import replace

from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy, transformer_shape
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec

H, E, S = 2048, 128, 4096


def _wl(experts: int = E) -> TransformerWorkload:
    return TransformerWorkload(name="moe", layers=4, hidden=H, heads=16, kv_heads=4, ffn_hidden=6144, gated_mlp=True,
                               vocab=32000, seq_len=S, tied_embeddings=False,
                               moe=MoESpec(experts=experts, top_k=8, ffn_hidden=768) if experts else None)


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
def test_fp32_router_in_a_32_bit_run_adds_nothing(precision: str) -> None:
    """In an fp32 / tf32 run the router's input is already fp32: ``inp.to(torch.float32)`` returns the tensor itself
    (no copy), the gradient's ``.to(input dtype)`` too, and the router's GEMMs are the ones the layer prices, so
    moe_router_dtype fp32 changes nothing. Before the fix the term priced the same GEMM twice at two peaks and added
    casts: -190 us a layer backward in an fp32 run on H100 (a negative time: the setting made the step faster) and
    +91 us in a tf32 run."""
    sh = transformer_shape(_wl())
    f, b = compute.router_dtype_times(sh, micro_batch=2, seq_len=S, router_bytes=4.0, router_peak_flops=494.7e12,
                                      peak_flops=67e12, memory_bandwidth=3.35e12, elem_bytes=4.0)
    assert float(np.ravel(f)[0]) == 0.0 and float(np.ravel(b)[0]) == 0.0
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision=precision, seq_len=S, moe_router_dtype="fp32",
                      moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), _wl(), tr)
    g = grid_from_strategy(StrategySpec(tp=1, dp=8, ep=8), tr, 8, job)
    with_router = layer_compute._compute_per_microbatch(job, g, np.asarray([4.0]))["total"]
    without = layer_compute._compute_per_microbatch(replace(job, router_bytes=0.0, router_peak_flops=0.0), g,
                                           np.asarray([4.0]))["total"]
    assert float(np.ravel(with_router)[0]) == float(np.ravel(without)[0])


def test_fp64_router_in_an_fp32_run_still_costs() -> None:
    """fp64 is wider than an fp32 run's activations: the casts (4 + 8 bytes an element of T h, by hand) and the FP64
    GEMMs remain, forward and backward."""
    sh = transformer_shape(_wl())
    bw = 3.35e12
    f, b = compute.router_dtype_times(sh, micro_batch=2, seq_len=S, router_bytes=8.0, router_peak_flops=67e12,
                                      peak_flops=494.7e12, memory_bandwidth=bw, memory_efficiency=1.0, elem_bytes=4.0)
    cast = (8 + 4) * 2 * S * H / bw  # inp.to(fp64): read 4, write 8 bytes an element of the 8192 x 2048 input
    assert float(np.ravel(f)[0]) > cast and float(np.ravel(b)[0]) > 2 * cast


def test_dense_model_with_a_router_dtype_is_not_refused() -> None:
    """A dense model has no router (TopKRouter is built only in an MoE layer), so moe_router_dtype prices nothing
    there; it was refused on an accelerator without a TF32 peak (tpu-v5p) because the peak was looked up before
    asking whether there is a router. An MoE model on that accelerator is still refused, one clear error."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="bf16", seq_len=S, moe_router_dtype="fp32")
    job = build_job(load_cluster("tpu-v5p-pod"), _wl(0), tr)
    assert job.router_peak_flops == 0.0
    with pytest.raises(InputError, match="training.moe_router_dtype"):
        build_job(load_cluster("tpu-v5p-pod"), _wl(), tr.model_copy(update={"moe_rank_imbalance": 1.0}))


def test_fp32_router_on_a_gpu_without_tf32_uses_its_fp32_peak() -> None:
    """V100 has no TF32 cores; cuBLAS runs a CUBLAS_COMPUTE_32F_FAST_TF32 GEMM there as FP32: the router's backward
    GEMMs at the datasheet's FP32 15.7 TFLOP/s (hardware/accelerators/v100-sxm2-16g.yaml), not a refusal."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp16", seq_len=S, moe_router_dtype="fp32",
                      moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-1-v100"), _wl(), tr)
    assert job.router_peak_flops == pytest.approx(15.7e12)


def test_efa_sweeps_show_the_latency_on_every_ring_step() -> None:
    """docs/model.md#nanotron (review 17c): the published p5 all-gather sweeps (hardware/measurements/nccl.yaml
    p5efa_allgather_*) carry a latency on every one of a ring's p - 1 steps, not on its node crossings. By hand from the
    32 MiB points: (t - S (p-1)/p / 336 GB/s) / (p - 1) is 9.4-10.2 us at 2, 4, 8, 16 and 32 nodes, while per crossing
    the same excess runs from 146 us (2 nodes) to 84 us (32). The bare every-step fit of scripts/fit_efa_tier.py finds
    that per-step figure and fits no worse than the crossings-only form."""
    import importlib.util
    from pathlib import Path


    root = Path(__file__).resolve().parents[1]
    cases = load_yaml(root / "hardware" / "measurements" / "nccl.yaml")
    per_step, per_cross = [], []
    for c in (c for c in cases if c["id"].startswith("p5efa_allgather_")):
        p, s = c["ranks"], 2**25
        t = s * (p - 1) / p / (c["measured"]["busbw_GBps"][c["measured"]["msg_bytes"].index(s)] * 1e9)
        excess = t - s * (p - 1) / p / 336e9
        per_step.append(excess / (p - 1))
        per_cross.append(excess / (p // 8 - 1))
    assert 9.3e-6 < min(per_step) and max(per_step) < 10.3e-6
    assert max(per_cross) / min(per_cross) > 1.7
    spec = importlib.util.spec_from_file_location("fit_efa_tier", root / "scripts" / "fit_efa_tier.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    forms = mod.bare_forms()
    assert 8e-6 < forms["every_step"]["latency_s"] < 11e-6
    assert forms["every_step"]["median_abs_error"] <= forms["crossings"]["median_abs_error"]


def test_sensitivity_peak_moves_every_peak_a_job_prices_at() -> None:
    """sensitivity's "peak FLOP/s" is the accelerator's speed at every precision (engine/sensitivity.py
    _peaks_perturb). moe17 added Job.router_peak_flops (the fp32 router's TF32 GEMMs) outside PEAK_FIELDS, as
    Job.mxfp8_peak_flops was: a 2x faster chip left those GEMMs at the old speed while the 16-bit GEMM subtracted from
    the router's (cost.compute.router_dtype_times) got faster, so the router's added time grew with the peak."""
    from scalemodel.engine.job import Job
    from scalemodel.engine.sensitivity import PEAK_FIELDS, _peaks_perturb

    peaks = {f for f in Job.__struct_fields__ if f.endswith("peak_flops")}
    assert peaks == set(PEAK_FIELDS)
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="bf16", seq_len=S, moe_router_dtype="fp32",
                      moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), _wl(), tr)
    fast = _peaks_perturb(job, 2.0)
    assert fast.router_peak_flops == pytest.approx(2 * 494.7e12) and fast.peak_flops == pytest.approx(2 * 989.4e12)


def test_every_megatron_moe_recipe_row_sets_the_fp32_router() -> None:
    """Every examples/moe_recipes/*/*/*.yaml at NVIDIA/Megatron-LM@9c5258f109 sets ``moe_router_dtype: fp32`` (read one
    by one: the 18 YAMLs of deepseek_v3, deepseek_v4_flash, deepseek_v4_pro, qwen3_235b and qwen3_30b), and every
    mcrec26 row cites one of them, so every one sets framework.moe_router_dtype fp32 (the validator's former id set
    held 14 of the 18: the four left out are not expressed today, so no number moved, but would have been priced with
    a BF16 router once they were)."""

    mod = script_module("validate_training")
    cases = load_yaml(mod.NEW_CASES)
    rows = [c for c in cases if c["id"].startswith("mcrec26_")]
    assert len(rows) == 18
    assert all("examples/moe_recipes/" in str(c["source"]) for c in rows)
    assert all(c["framework"]["moe_router_dtype"] == "fp32" for c in rows)
