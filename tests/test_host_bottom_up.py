"""The bottom-up count of a MoE layer's host issue time (hardware/measurements/host_overhead.yaml
``moe_layer_bottom_up``, ``evaluation_moe``; docs/model.md#host "Bottom-up check" and "CUDA graphs of part of the
layer"). Its total is not applied as H (H stays measured); its ratios scale H to a row's graph scope and local
experts (scalemodel/engine/host_floor.py, tests/test_host_floor_scope.py). These tests hold the record to the code
structure it was counted from and to the statements the docs make with it.

Counts are re-derived here from the loops of the code, not read back: per Transformer Engine GroupedLinear call
with n local experts and g compute streams (release_v2.9 grouped_linear.py, cast.cpp multi_tensor_quantize_impl,
gemm.cpp te_general_grouped_gemm, cublaslt_gemm.cu multi_stream_cublas_gemm) a forward issues n quantize kernels,
n GEMMs and 2 scale swizzles and a backward n quantize kernels, 2n GEMMs and 4 swizzles (one GEMM of each call is
already inside the module's published per-call time); each grouped GEMM makes 1 + 3g event calls."""

from __future__ import annotations

import copy

import pytest
from conftest import ROOT, load_yaml, script_module
from test_host_floor import HELD_OUT, held_out_case

HOST = ROOT / "hardware" / "measurements" / "host_overhead.yaml"
H_MEASURED_US = 512 * 4096 / 8 / 9299 / (64 * 48) * 1e6  # docs/model.md#host: the 25.11 source run, 9177 us

N_EXPERTS, STREAMS = 16, 4  # EP 8 of 128 experts; transformer_engine/common/util/multi_stream.cpp


def _doc() -> dict:  # type: ignore[type-arg]
    return load_yaml(HOST)


def test_counts_follow_the_code_loops() -> None:
    """Per MoE layer: two GroupedLinear calls (fc1, fc2) each pass; attention's three linear-type TE modules."""
    n, g = N_EXPERTS, STREAMS
    want = {
        ("attention", "fwd"): {"module": 3, "op": 5, "launch": 0, "event": 0, "basic": 0},
        ("attention", "bwd"): {"module": 3, "op": 5, "launch": 0, "event": 0, "basic": 0},
        ("moe", "fwd"): {"module": 2, "op": 11, "launch": 2 * (n + n + 2 - 1), "event": 2 * (1 + 3 * g),
                         "basic": 2 * 6 * n},
        ("moe", "bwd"): {"module": 2, "op": 11, "launch": 2 * (n + 2 * n + 4 - 1), "event": 2 * 2 * (1 + 3 * g),
                         "basic": 2 * 6 * n},
    }
    got = {(p["part"], p["pass"]): p["counts"] for p in _doc()["moe_layer_bottom_up"]["parts"]}
    assert got == want
    assert want[("moe", "fwd")]["launch"] + want[("moe", "bwd")]["launch"] == 168  # the docs' figure


def _total(costs: dict, i: int) -> float:  # type: ignore[type-arg]
    """Host microseconds of the layer with every class at its low (i = 0) or high (i = 1) cost."""
    parts = _doc()["moe_layer_bottom_up"]["parts"]
    return sum(c * costs[k]["value"][i] for p in parts for k, c in p["counts"].items())


def test_priced_total_by_hand_and_against_the_measured_H() -> None:
    """Low: 10 x 115 + 32 x 8.3 + 168 x 5 + 78 x 0.949 + 384 x 1 = 2713.6 us; high: 10 x 140 + 32 x 13.5 +
    168 x 10 + 78 x 1.094 + 384 = 3981.3 us; with 20 us a launch (HTA-LAUNCH's top) 3981.3 + 168 x 10 = 5661.3 us.
    The docs state 30 %, 43 % and 62 % of H, and that each launch would need 41-43 us to reach H."""
    costs = _doc()["moe_layer_bottom_up"]["costs_us"]
    lo, hi = _total(costs, 0), _total(costs, 1)
    assert lo == pytest.approx(10 * 115 + 32 * 8.3 + 168 * 5 + 78 * 0.949 + 384, rel=1e-12)
    assert lo == pytest.approx(2713.6, abs=0.1)
    assert hi == pytest.approx(3981.3, abs=0.1)
    top = hi + 168 * (20 - 10)
    assert [round(100 * t / H_MEASURED_US) for t in (lo, hi, top)] == [30, 43, 62]
    need = [(H_MEASURED_US - (t - 168 * costs["launch"]["value"][i])) / 168 for i, t in enumerate((lo, hi))]
    assert 40.5 < min(need) and max(need) < 43.5


def test_expert_and_forward_shares_stated_in_the_docs() -> None:
    """The expert path (everything after the router) 72-76 % of the count, its forward 32-33 %."""
    doc = _doc()["moe_layer_bottom_up"]
    costs, parts = doc["costs_us"], doc["parts"]
    for i in (0, 1):
        cost = {(p["part"], p["pass"]): sum(c * costs[k]["value"][i] for k, c in p["counts"].items()) for p in parts}
        total = sum(cost.values())
        moe = (cost[("moe", "fwd")] + cost[("moe", "bwd")]) / total
        assert 0.715 <= moe <= 0.756
        assert 0.319 <= cost[("moe", "fwd")] / total <= 0.329


def _validation():  # type: ignore[no-untyped-def]
    mod = script_module("validate_training")
    if not mod.NEW_CASES.is_file():
        pytest.skip("validation/training_cases.yaml not present")
    return mod, {c["id"]: c for c in load_yaml(mod.NEW_CASES)}


def test_no_floor_at_or_below_H_binds_on_the_b200_partial_graph_row(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """DGX-B200 Qwen3-30B-A3B 26.04 (attn + moe_router + moe_preprocess graphed, 16 local experts): its floor is the
    expert path's share of H (scalemodel/engine/host_floor.py: 1940.622 / 2713.622 = 0.7151 H, 6.56 ms), and its
    device time per layer was above H, so even the whole eager layer's H (more host work than this preset issues)
    changed nothing. Since moesp17 (the MoE permutes priced on the sequence-parallel shard, each dispatcher's own
    passes, docs/model.md#moe-rows) its device time per layer lay between the two: the preset's own floor still
    changed nothing, while the whole eager layer's H bound. Since mxfp8moe21 (the routed experts' MXFP8 GEMMs at the
    measured grouped-GEMM rate, docs/model.md#mxfp8-expert-gemms) its device time per layer is above the whole eager
    layer's H again, and neither floor bound. Since moe22 (the expert path issued after the synchronisation,
    docs/model.md#host-issue-order) the preset's own floor still changes nothing (0.3199 x 6.56 = 2.10 ms of expert
    issue against more device work before the expert path's last kernel), while the whole eager layer's H issues
    0.3199 x 9.18 = 2.94 ms there, more than that device work: the step was slower with it. Since bw22 (Blackwell's
    FP8 in-layer GEMM factor 0.846; 0.813 since h100cmp22's Hopper refit, docs/model.md#fp8-bf16-ratio) that device
    work is above 2.94 ms again: neither floor binds. Since moe31 (docs/model.md#host-refill) each synchronisation
    of this HybridEP row exposes its round trip and the launch after it, 6 + 5 us, whichever floor: the step is
    16 micro-batches x 48 MoE layers x 11 us = 8.448 ms longer than without a floor, and the two floors agree."""
    mod, cases = _validation()
    cid = "mb2604_b200_qwen3_30b_fp8mx"
    scaled = mod.predict_new_case(cases[cid])
    assert scaled.strategy.moe_layer_host_s == pytest.approx(H_MEASURED_US * 1e-6 * 1940.622 / 2713.622, rel=1e-9)
    kind = cases[cid]["framework"].pop("moe_host_sync")  # the row's field (validation/README.md): no floor
    assert kind == "attention_graphed"
    plain = mod.predict_new_case(cases[cid])
    assert plain.strategy.moe_layer_host_s == 0.0
    cases[cid]["framework"]["moe_host_sync"] = "alltoall"  # the floor with the attention eager
    floored = mod.predict_new_case(cases[cid])
    assert floored.strategy.moe_layer_host_s == pytest.approx(H_MEASURED_US * 1e-6, rel=1e-9)
    assert floored.predicted == pytest.approx(scaled.predicted, rel=1e-12)  # throughput: H does not bind either
    per_gpu = 512 * 4096 / 8  # tokens a GPU a step (GBS 512, s 4096, 8 GPUs)
    assert per_gpu / scaled.predicted - per_gpu / plain.predicted == pytest.approx(16 * 48 * 11e-6, rel=1e-9)


def test_graphing_attention_ab_is_device_bound_in_the_model(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Bridge docs/training/cuda-graphs.md (pull request 3868): Qwen3-30B-A3B, 16 H100, BF16, EP 16,
    all-to-all, no EP overlap, MBS 1, GBS 1024: eager 41.36 s a step, attn + moe_router + moe_preprocess graphed
    42.00 s. The two agree within 2 %, and the model's device time per layer for that layout exceeds H, so the
    floor does not bind: graphing attention (less host work) cannot shorten it, as measured."""
    assert abs(42.00 - 41.36) / 41.36 < 0.02
    mod, cases = _validation()
    case = copy.deepcopy(cases["mb2511_h100_qwen3_30b_fp8cs"])  # the architecture; parallelism replaced
    case["id"] = "heldout_pr3868"
    case["framework"] = {}  # the run's own settings (no EP overlap), not the architecture row's recipe
    for k in ("interleaved_stages_per_device", "pipeline_layout", "grad_accum"):
        case["parallelism"].pop(k, None)
    case["parallelism"].update(dict(tp=1, pp=1, ep=16, dp=16, gpus=16, global_batch_seqs=1024, microbatch=1))
    case["precision"] = "bf16"
    case["measured"] = {"tokens_per_s_per_gpu": 1024 * 4096 / 16 / 41.36}
    monkeypatch.setattr(mod, "LOSS_IMPL", {**mod.LOSS_IMPL, "heldout": mod.LOSS_IMPL["mb2511"]})
    device = mod.predict_new_case(case)
    case["framework"]["moe_host_sync"] = "alltoall"  # all-to-all, eager: the floor
    floored = mod.predict_new_case(case)
    assert floored.strategy.moe_layer_host_s > 0
    assert floored.predicted == pytest.approx(device.predicted, rel=1e-12)
    # the device step over its 64 x 48 layer passes (embedding, loss and optimizer included) is above H per layer
    step = 1024 * 4096 / 16 / device.predicted
    assert step / (64 * 48) > H_MEASURED_US * 1e-6


@pytest.mark.parametrize("label,hardware_of,precision,par,a2a,hybridep,measured", HELD_OUT)
def test_bottom_up_figure_misses_the_held_out_runs(monkeypatch, label, hardware_of, precision, par, a2a, hybridep,
                                                   measured) -> None:  # type: ignore[no-untyped-def]
    """Used as H, the bottom-up count at its high costs (3.98 ms) leaves every held-out run of
    tests/test_host_floor.py more than 30 % too fast, where the measured H predicts each within 10 %."""
    mod, cases = _validation()
    case = held_out_case(mod, cases, monkeypatch, label, hardware_of, precision, par, a2a, hybridep, measured)
    case["framework"]["moe_host_sync"] = "hybridep" if hybridep else "alltoall"  # the floor
    monkeypatch.setattr(mod, "MCORE_2511_MOE_LAYER_HOST_S", _total(_doc()["moe_layer_bottom_up"]["costs_us"], 1) * 1e-6)
    bottom_up = mod.predict_new_case(case)
    # attention eager and the local experts held at the source's 16 (scripts/validate_training.py host_floor_s):
    # the floor is the count itself
    assert bottom_up.strategy.moe_layer_host_s == pytest.approx(3.9813e-3, rel=1e-4)
    assert bottom_up.speed_error > 0.30, f"{label}: {bottom_up.speed_error:+.1%}"
