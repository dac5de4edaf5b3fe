"""The fixed time of the per-expert FP8 quantization kernels of an fp8 run's routed experts
(compute.fp8_expert_quantize_kernels x compute.KERNEL_FIXED_S): kernel counts worked out by hand from the code path the
function cites (Transformer Engine v2.9 GroupedLinear -> tex.split_quantize, which quantizes expert by expert unless
the recipe is delayed scaling: tensorwise runs compute_amax, compute_scale_from_amax and quantize per expert, MXFP8 one
quantize per expert), and the step's compute growing by them."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from conftest import ROOT, load_yaml
from grid_helpers import TINY_MOE

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

QWEN3_30B = shape(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144, vocab=151_936,
                  gated_mlp=True, moe_experts=128, moe_top_k=8, moe_ffn_hidden=768)



@pytest.mark.parametrize(("recipe", "ep", "want"), [
    # 128 experts over EP 8: 16 local, 15 beyond the one whole-tensor quantization a dense linear makes;
    # 2 tensors each way (X of FC1 and FC2 forward, dY of FC2 and FC1 backward)
    ("tensorwise", 8, 2 * 15 * 3),  # amax, scale, cast per expert
    ("mxfp8", 8, 2 * 15 * 1),  # one quantize (both copies + E8M0 scales) per expert
    ("delayed", 8, 0),  # one fused nvte_multi_cast_transpose for all experts, as a dense cast
    ("tensorwise", 32, 2 * 3 * 3),  # 4 local experts (Qwen3-235B at EP 32)
    ("tensorwise", 128, 0),  # one expert per GPU: the whole tensor, nothing split
])
def test_counts_by_hand(recipe: str, ep: int, want: int) -> None:
    f, b = compute.fp8_expert_quantize_kernels(recipe, QWEN3_30B, ep=ep)
    assert float(f) == want and float(b) == want


def test_dense_and_bad_recipe() -> None:
    dense = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000)
    f, b = compute.fp8_expert_quantize_kernels("tensorwise", dense, ep=1)
    assert float(f) == 0.0 and float(b) == 0.0
    with pytest.raises(InputError):
        compute.fp8_expert_quantize_kernels("custom", QWEN3_30B, ep=8)


def test_kernel_fixed_time_is_the_measured_cast_intercept() -> None:
    """KERNEL_FIXED_S is the t0 scripts/fit_kernel_overhead.py fits to the H200 cast_fp8 series of
    hardware/measurements/memory_kernels.yaml (SM-H200): 1.78 us to the printed precision."""
    spec = importlib.util.spec_from_file_location("fit_kernel_overhead", ROOT / "scripts" / "fit_kernel_overhead.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t0 = mod.run()["h200-sxm"]["series"]["cast_fp8"]["t0_s"]
    assert t0 == pytest.approx(compute.KERNEL_FIXED_S, abs=0.005e-6)


@pytest.mark.parametrize(("recipe", "per_expert"), [("tensorwise", 3), ("mxfp8", 1), ("delayed", 0)])
def test_predict_compute_grows_by_the_hand_values(recipe: str, per_expert: int) -> None:
    """8 GPUs, pp 1, one micro-batch per GPU: the step's compute grows by 3 MoE layers x (8 local experts - 1) x
    (2 directions x 2 tensors x quantize kernels per expert + 2 forward + 4 backward GEMM calls) x 1.78 us, against
    the same run with the fixed time zeroed."""
    cluster = load_cluster("dgx-b200" if recipe == "mxfp8" else "dgx-h100")
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8", fp8_recipe=recipe)
    st = StrategySpec(dp=8, ep=8)
    with_t0 = predict(cluster, TINY_MOE, 8, tr, st).breakdown_s["compute"]
    saved = compute.KERNEL_FIXED_S
    try:
        compute.KERNEL_FIXED_S = 0.0
        without = predict(cluster, TINY_MOE, 8, tr, st).breakdown_s["compute"]
    finally:
        compute.KERNEL_FIXED_S = saved
    want = 3 * 7 * (2 * 2 * per_expert + 2 + 4) * 1.78e-6  # + the 7 extra GEMM calls of FC1, FC2 fwd, dgrad, wgrad
    assert with_t0 - without == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert np.isfinite(with_t0)


def _grouped_points() -> list[dict]:  # type: ignore[type-arg]
    doc = load_yaml(ROOT / "hardware" / "measurements" / "grouped_gemm.yaml")
    return [p for p in doc["points"] if p["te"] == "2.7"]


def test_gemm_calls_by_hand() -> None:
    # 16 local experts: 15 calls beyond one per GEMM; FC1 and FC2 forward, their dgrad and wgrad backward
    f, b = compute.expert_gemm_calls(QWEN3_30B, ep=8)
    assert (float(f), float(b)) == (2 * 15, 4 * 15)
    f, b = compute.expert_gemm_calls(QWEN3_30B, ep=128)
    assert (float(f), float(b)) == (0.0, 0.0)


def test_published_grouped_gemm_is_the_curve_plus_the_fixed_time_per_call() -> None:
    """TE 2.7 general_grouped_gemm on H100 BF16 (hardware/measurements/grouped_gemm.yaml, TE pull request #2045):
    per call, the isolated H100 BF16 curve (the microbenchmark fit before the in-layer factor: gemm_max = MAMF 794.5 /
    989.4 TFLOP/s = 0.803, d0 87; catalog 0.680 = 0.803 x Hopper's 0.847) at the group's shape, plus 1.78 us for the
    multi-stream path; the CUTLASS single kernel needs no addition."""
    peak, gm, d0 = 989.4e12, 794.5 / 989.4, 87.0
    for p in _grouped_points():
        m, n, k, g = p["m"], p["n"], p["k"], p["groups"]
        eff = gm * m / (m + d0) * n / (n + d0) * k / (k + d0)  # by hand, the module docstring's curve
        per_call = 2.0 * m * n * k / (peak * eff)
        measured = 2.0 * g * m * n * k / (p["tflops"] * 1e12) / g
        if p["impl"] == "multi_stream":
            assert 1.05 < measured / per_call < 1.20  # the curve alone is 6-16 % fast
            assert (per_call + compute.KERNEL_FIXED_S) / measured == pytest.approx(1.0, abs=0.03)
        else:
            assert per_call / measured == pytest.approx(1.0, abs=0.035)  # 3.0-3.1 % fast
