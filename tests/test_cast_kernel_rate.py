"""Transformer Engine's quantization kernels on Blackwell at their measured rate (cost.compute.CAST_KERNEL_TIME_FACTORS,
engine.layer_compute._cast_seconds; docs/model.md#cast-kernel-rate).

Source, read at NVIDIA/TransformerEngine@d0067d0da6 docs/examples/gemm_profiling/gemm_profiling.rst and
benchmarks/gemm/benchmark_gemm.py (hardware/measurements/gemm.yaml TE-GEMMPROF-B300): one B300 SXM6 AC, the 12 GEMM
shapes (M, K, N) of one layer of a 5B config (h 4096, f 16384, QKV 12288, 15872 tokens), per-layer sums in ms of an
"autocast" run (te.Linear(K, N)(x) under te.autocast: x quantized both ways, the weight row-wise, then the GEMM) and
a "pre-quantized" run (tex.generic_gemm on operands quantized once):

    recipe                autocast   pre-quantized
    MXFP8                 8.984      7.161
    FP8 current scaling   9.147      6.812
    NVFP4                 6.453      3.764
    H200 NVL, current     20.285     16.785      (Hopper: the control)

The tests recount the cast bytes of the 12 shapes by hand (bytes an element written out here, not read from
fp8_quantize_bytes), recompute each factor, and check a job's cast seconds against the hand formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute, pipeline_ranks
from scalemodel.engine.job import build_job

M, H, FF, NQ = 15872, 4096, 16384, 12288
FPROP = [(M, H, NQ), (M, H, H), (M, H, FF), (M, FF, H)]
DGRAD = [(M, NQ, H), (M, H, H), (M, FF, H), (M, H, FF)]
WGRAD = [(H, M, NQ), (H, M, H), (H, M, FF), (FF, M, H)]
SHAPES = FPROP + DGRAD + WGRAD
X = sum(m * k for m, k, _ in SHAPES)  # te.Linear's input, M x K
W = sum(k * n for _, k, n in SHAPES)  # its weight, K x N
# the B300 SXM6 AC's bus: 15 of 16 HBM controllers, 7.5 TB/s (hardware/accelerators/b300.yaml), x 0.85
B300_RATE = 7.5e12 * 0.85


def _factor(x_bytes: float, w_bytes: float, autocast_ms: float, prequant_ms: float) -> float:
    priced_ms = (X * x_bytes + W * w_bytes) / B300_RATE * 1e3
    return (autocast_ms - prequant_ms) / priced_ms


def test_element_counts_by_hand() -> None:
    # X: fprop 3 x 15872 x 4096 + 15872 x 16384; dgrad 15872 x (12288 + 4096 + 16384 + 4096); wgrad as fprop's
    assert X == 3 * (3 * 15872 * 4096 + 15872 * 16384) - (3 * 15872 * 4096 + 15872 * 16384) + 15872 * 36864
    assert X == pytest.approx(1495.27e6, rel=1e-5)
    assert W == pytest.approx(987.76e6, rel=1e-5)


def test_mxfp8_factor_from_the_guide() -> None:
    """x row- and column-wise: read 2, write 2 x (1 + 1/32); the weight row-wise: read 2, write 1 + 1/32.
    9.069 GB at 6.375 TB/s = 1.423 ms against 8.984 - 7.161 = 1.823 ms."""
    r = _factor(2 + 2 * (1 + 1 / 32), 2 + 1 + 1 / 32, 8.984, 7.161)
    assert r == pytest.approx(1.282, abs=5e-4)
    assert compute.cast_kernel_time_factor("blackwell", "mxfp8") == 1.282


def test_tensorwise_factor_from_the_guide() -> None:
    """Current scaling on Blackwell (no transposed copy): amax read 2, read 2, write 1 for x and the weight.
    12.417 GB = 1.948 ms against 9.147 - 6.812 = 2.335 ms."""
    r = _factor(5.0, 5.0, 9.147, 6.812)
    assert r == pytest.approx(1.199, abs=5e-4)
    assert compute.cast_kernel_time_factor("blackwell", "tensorwise") == 1.199


def test_nvfp4_factor_from_the_guide() -> None:
    """x: amax read 2, read 2, two E2M1 copies of 0.5 + 1/16; the weight (2D scales, no RHT): 2 + 2 + 0.5625.
    12.170 GB = 1.909 ms against 6.453 - 3.764 = 2.689 ms."""
    r = _factor(4 + 2 * (0.5 + 1 / 16), 4 + 0.5 + 1 / 16, 6.453, 3.764)
    assert r == pytest.approx(1.409, abs=5e-4)
    assert compute.cast_kernel_time_factor("blackwell", "nvfp4") == 1.409


def test_hopper_control_is_one() -> None:
    """H200 NVL current scaling with Hopper's transposed copy (x 6 bytes an element, the weight row-wise 5) at
    4.8 TB/s x 0.849: 3.413 ms priced against 3.500 measured, 1.025: no factor on Hopper."""
    priced_ms = (X * 6 + W * 5) / (4.8e12 * 0.849) * 1e3
    assert (20.285 - 16.785) / priced_ms == pytest.approx(1.025, abs=1e-3)
    assert compute.cast_kernel_time_factor("hopper", "tensorwise") == 1.0
    assert compute.cast_kernel_time_factor("hopper", "delayed") == 1.0


def test_on_the_catalogs_8_tbps_the_factors_would_be_higher() -> None:
    """Priced at b300's catalog 8 TB/s (the 16-controller figure) the same differences read 1.367 / 1.279 / 1.502:
    the 15-of-16 bus accounts for 8 / 7.5 = 1.0667 of them, which the full-bus B200 / GB200 / GB300 do not have."""
    for x_b, w_b, a, p, f in [(2 + 2 * (1 + 1 / 32), 2 + 1 + 1 / 32, 8.984, 7.161, 1.367),
                              (5.0, 5.0, 9.147, 6.812, 1.279),
                              (4 + 2 * 0.5625, 4.5625, 6.453, 3.764, 1.502)]:
        assert _factor(x_b, w_b, a, p) * 8.0 / 7.5 == pytest.approx(f, abs=5e-4)


def test_delayed_scaling_reads_no_factor() -> None:
    """Delayed scaling (3 bytes an element, amax fused) has no pre-quantized run of its own; against current scaling's
    pre-quantized GEMMs (the same per-tensor cuBLASLt call) 7.802 - 6.812 = 0.990 ms over 1.168 ms priced: 0.85,
    under 1, so none is applied."""
    assert _factor(3.0, 3.0, 7.802, 6.812) == pytest.approx(0.847, abs=1e-3)
    assert compute.cast_kernel_time_factor("blackwell", "delayed") == 1.0


def test_unmeasured_recipes_keep_one() -> None:
    assert compute.cast_kernel_time_factor("blackwell", "delayed") == 1.0
    assert compute.cast_kernel_time_factor("blackwell", "") == 1.0
    assert compute.cast_kernel_time_factor("ampere", "mxfp8") == 1.0


def _job(cluster: str, precision: str, recipe: str | None = None) -> Any:
    training: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    cl, wl, tr, _ = build_specs(cluster=cluster, model="gpt-7.5b", sets=[], training=training, strategy={})
    return build_job(cl, wl, tr, straggler_cv=0.0)


def test_cast_seconds_by_hand() -> None:
    """1 GB of cast traffic on a GB200 (8 TB/s x 0.85): 1e9 / 6.8e12 x 1.282 = 188.53 us with MXFP8, x 1.199 =
    176.32 us with current scaling, 147.06 us with delayed scaling; the sign of a saving is kept."""
    mx = _job("gb200-nvl72", "fp8", "mxfp8")
    cs = _job("gb200-nvl72", "fp8", "tensorwise")
    dl = _job("gb200-nvl72", "fp8", "delayed")
    assert float(layer_compute._cast_seconds(mx, 1e9)) == pytest.approx(188.53e-6, rel=1e-4)
    assert float(layer_compute._cast_seconds(cs, 1e9)) == pytest.approx(176.32e-6, rel=1e-4)
    assert float(layer_compute._cast_seconds(dl, 1e9)) == pytest.approx(147.06e-6, rel=1e-4)
    assert float(layer_compute._cast_seconds(mx, -1e9)) == pytest.approx(-188.53e-6, rel=1e-4)
    np.testing.assert_allclose(layer_compute._cast_seconds(mx, np.array([0.0, 2e9])), [0.0, 377.06e-6], rtol=1e-4)


def test_hopper_casts_unchanged() -> None:
    """On an H100 the casts stay at the roofline: 1 GB at 3.35 TB/s x the catalog's memory efficiency."""
    job = _job("dgx-h100", "fp8", "tensorwise")
    expect = 1e9 / (job.memory_bandwidth * job.memory_efficiency)
    assert float(layer_compute._cast_seconds(job, 1e9)) == pytest.approx(expect, rel=1e-12)


# --- review18d: the part the guide timed, and modules at their own recipe ----------------------------------------


def test_b300_casts_reproduce_the_guide_on_its_own_catalog_bus() -> None:
    """The guide ran on a B300 SXM6 AC, the catalog's b300 part, whose memory-bound work the catalog prices on the
    16-controller 8 TB/s x 0.85. Its casts must take the guide's differences over the bytes priced that way: MXFP8
    1.823 ms over 9.069 GB at 6.8 TB/s (1.334 ms) = 1.367, current scaling 2.335 / 1.826 = 1.279, NVFP4 2.689 /
    1.790 = 1.502 (the full-bus 1.282 / 1.199 / 1.409 belong to B200 / GB200 / GB300, which have the whole bus)."""
    rate = 8.0e12 * 0.85
    cases = [("fp8", "mxfp8", X * (2 + 2 * (1 + 1 / 32)) + W * (2 + 1 + 1 / 32), 8.984 - 7.161),
             ("fp8", "tensorwise", (X + W) * 5.0, 9.147 - 6.812),
             ("fp4", None, X * (4 + 2 * 0.5625) + W * 4.5625, 6.453 - 3.764)]
    for precision, recipe, nbytes, measured_ms in cases:
        job = _job("dgx-b300", precision, recipe)
        assert job.accelerator == "b300"
        assert job.memory_bandwidth * job.memory_efficiency == pytest.approx(rate)
        # the guide's own per-layer cast time, priced through the step's cast function on the part it ran on
        assert float(layer_compute._cast_seconds(job, nbytes)) == pytest.approx(measured_ms * 1e-3, rel=1e-3)
    # B200 (full bus, 7.7 TB/s x 0.85) keeps the full-bus factor: 1 GB of MXFP8 casts 1e9 / 6.545e12 x 1.282
    b200 = _job("dgx-b200", "fp8", "mxfp8")
    assert float(layer_compute._cast_seconds(b200, 1e9)) == pytest.approx(1e9 / (7.7e12 * 0.85) * 1.282, rel=1e-9)


def _mixed(model: str, strategy: dict[str, Any], **training: Any) -> tuple[Any, Any]:
    from scalemodel.engine.job import grid_from_strategy
    tr_in: dict[str, Any] = {"precision": "fp4", "global_batch": 8, "micro_batch": 1, **training}
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72", model=model, sets=[], training=tr_in, strategy=strategy)
    j = build_job(cl, wl, trs, straggler_cv=0.0)
    return j, grid_from_strategy(stg, trs, 8, j)


def test_an_mxfp8_attention_block_in_an_nvfp4_run_takes_mxfp8s_factor() -> None:
    """gpt-7.5b (h 4096, MHA, s 2048) on GB200, an NVFP4 run (8 GPUs, DP 8, one micro-batch a step), the attention
    projections at MXFP8 against the same block in BF16 (no cast): the forward adds the block's MXFP8 casts, the
    inputs of QKV and proj (2 x T h) and the two weights (h x 3h + h x h), 2 + 2 (1 + 1/32) bytes an element, run by
    TE's MXFP8 quantization kernels: 1.282 x their price at 8 TB/s x 0.85, not NVFP4's 1.409."""
    T, h = 2048.0, 4096.0
    nbytes = (2 + 2 * (1 + 1 / 32)) * (2 * T * h + h * 3 * h + h * h)
    j0, g0 = _mixed("gpt-7.5b", {}, module_precision={"attention_proj": "bf16"})
    j1, g1 = _mixed("gpt-7.5b", {}, module_precision={"attention_proj": "mxfp8"})
    assert j1.fp8_recipe == "nvfp4" and float(np.ravel(pipeline_ranks.microbatches(g1))[0]) == 1.0
    got = layer_compute.fp8_cast_per_layer(j1, g1, 0.0)[0] - layer_compute.fp8_cast_per_layer(j0, g0, 0.0)[0]
    assert float(np.ravel(got)[0]) == pytest.approx(nbytes / (8e12 * 0.85) * 1.282, rel=1e-9)


def test_an_mxfp8_mamba_out_proj_in_an_nvfp4_run_takes_mxfp8s_factor() -> None:
    """nemotron-3-super (h 4096, Mamba d_inner 128 x 64 = 8192, s 8192) on GB200, NVFP4 run, EP 8, one micro-batch:
    out_proj at MXFP8 (its te_quant.cfg) against the run's NVFP4 out_proj. Each Mamba layer's forward swaps the
    out_proj casts of its input (T d_in) and weight (h d_in): NVFP4 2 x 2 + 2 x 0.5625 bytes an element at 1.409
    for MXFP8 2 + 2 x 1.03125 at 1.282, over (mamba layers / layers) of the mean layer."""
    T, h, d_in = 8192.0, 4096.0, 8192.0
    n = T * d_in + h * d_in
    j0, g0 = _mixed("nemotron-3-super", {"ep": 8})
    j1, g1 = _mixed("nemotron-3-super", {"ep": 8}, module_precision={"mamba_out_proj": "mxfp8"})
    hy, L = j0.shape.hybrid, float(j0.shape.layers)
    assert float(np.ravel(pipeline_ranks.microbatches(g0))[0]) == 1.0
    want = hy.mamba / L * n * ((2 + 2 * (1 + 1 / 32)) * 1.282 - (4 + 2 * 0.5625) * 1.409) / (8e12 * 0.85)
    got = layer_compute.fp8_cast_per_layer(j1, g1, 0.0)[0] - layer_compute.fp8_cast_per_layer(j0, g0, 0.0)[0]
    assert float(np.ravel(got)[0]) == pytest.approx(want, rel=1e-9)
