"""Transformer Engine's quantization kernels on Blackwell at their measured rate (cost.compute.CAST_KERNEL_TIME_FACTORS,
engine.step._cast_seconds; docs/model.md#cast-kernel-rate).

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
from scalemodel.engine import step
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
    assert float(step._cast_seconds(mx, 1e9)) == pytest.approx(188.53e-6, rel=1e-4)
    assert float(step._cast_seconds(cs, 1e9)) == pytest.approx(176.32e-6, rel=1e-4)
    assert float(step._cast_seconds(dl, 1e9)) == pytest.approx(147.06e-6, rel=1e-4)
    assert float(step._cast_seconds(mx, -1e9)) == pytest.approx(-188.53e-6, rel=1e-4)
    np.testing.assert_allclose(step._cast_seconds(mx, np.array([0.0, 2e9])), [0.0, 377.06e-6], rtol=1e-4)


def test_hopper_casts_unchanged() -> None:
    """On an H100 the casts stay at the roofline: 1 GB at 3.35 TB/s x the catalog's memory efficiency."""
    job = _job("dgx-h100", "fp8", "tensorwise")
    expect = 1e9 / (job.memory_bandwidth * job.memory_efficiency)
    assert float(step._cast_seconds(job, 1e9)) == pytest.approx(expect, rel=1e-12)
