"""CDNA3 FP8 / BF16 bound (amd29): mi300x's FP8 GEMMs priced no faster than its BF16 GEMMs x AMD's measured ratio.

Independent evidence, typed from the source: AMD's ROCm blog "Measuring Max-Achievable FLOPs - Part 2"
(ROCm/rocm-blogs, 2025-02-28; hardware/measurements/gemm.yaml AMD-MAF), Table 1, one hipBLASLt build
(ROCm/hipBLASLt@db8e93b4) and one protocol (hipblaslt-bench, about 1 s at the power limit): MI300X BF16 708 TFLOP/s at
4096 x 4864 x 32896 and FP8 (f8_fnuz) 1273 at 4096 x 3648 x 32896; MI325X BF16 843 and FP8 1519 at the same shapes.
The 16-bit level is LC-MI300X's torch.mm, 548.09 TFLOP/s at 4096^3 (gau-nernst/learn-cuda). Expected values are
computed here from those numbers and the curve's formula eff = gemm_max x prod d / (d + d0), not read from the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import load_yaml

from scalemodel.cost.compute import gemm_time, in_layer_gemm_factor
from scalemodel.specs import load_accelerator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import fit_compute_curves as fit  # noqa: E402

GEMM = load_yaml(ROOT / "hardware" / "measurements" / "gemm.yaml")

MAF_MI300X = {"bf16": 708.0, "fp8": 1273.0}  # AMD-MAF Table 1, TFLOP/s
MAF_MI325X = {"bf16": 843.0, "fp8": 1519.0}
PEAK_BF16, PEAK_FP8 = 1307.4, 2614.9  # [ROCM-MI300] dense, TFLOP/s
LC_4096 = 548.09  # LC-MI300X, torch.mm BF16 at 4096^3, TFLOP/s
D0 = 119.3  # mi300x's fp8 d0 (Azure's sweep, AZ-MI300X-2), which its 16-bit curve borrows
AZURE_FP8_LEVEL = 0.4335  # the unbounded fit of AZ-MI300X-2 (tests/test_amd27.py recomputes it)
IN_LAYER = 0.901  # Korthikanti et al. 2022 Table 4 on A100, borrowed by cdna3


def _maf(acc: str, prec: str) -> float:
    (p,) = [p for p in GEMM["points"] if p["src"] == "AMD-MAF" and p["acc"] == acc and p["prec"] == prec]
    return float(p["tflops"])


def test_maf_pair_as_published_and_the_same_on_both_power_limits() -> None:
    for prec in ("bf16", "fp8"):
        assert _maf("mi300x", prec) == MAF_MI300X[prec] and _maf("mi325x", prec) == MAF_MI325X[prec]
    r300 = MAF_MI300X["fp8"] / MAF_MI300X["bf16"]
    r325 = MAF_MI325X["fp8"] / MAF_MI325X["bf16"]
    assert r300 == pytest.approx(1.798, abs=5e-4) and r325 == pytest.approx(1.802, abs=5e-4)
    assert fit.FP8_OVER_16BIT["cdna3"][0] == pytest.approx(r300, rel=1e-12)


def test_mi300x_fp8_level_by_hand() -> None:
    """16-bit isolated level from the one fitted point, FP8 bound = it x 1.798 x peak ratio, then x 0.901 in layer."""
    g16 = LC_4096 / PEAK_BF16 / (4096 / (4096 + D0)) ** 3
    assert g16 == pytest.approx(0.457, abs=5e-4)
    g8 = g16 * (MAF_MI300X["fp8"] / MAF_MI300X["bf16"]) * PEAK_BF16 / PEAK_FP8
    assert g8 == pytest.approx(0.4109, abs=5e-4) and g8 < AZURE_FP8_LEVEL  # the bound binds: 0.4335 -> 0.411
    fits = fit.run()
    assert fits[("mi300x", "fp8")]["gemm_max"] == pytest.approx(g8, abs=5e-4)
    assert fits[("mi300x", "fp8")]["gemm_half_dim"] == pytest.approx(D0, abs=0.05)  # d0 kept
    ce = load_accelerator("mi300x").compute_efficiency
    assert ce.fp8 is not None
    assert ce.fp8.gemm_max == round(g8 * IN_LAYER, 2) == 0.37  # was 0.39 = round(0.4335 x 0.901, 2)
    assert in_layer_gemm_factor("cdna3", "fp8", "mi300x") == IN_LAYER


@pytest.mark.parametrize("shape", [(8192, 4096, 14336), (8192, 6144, 4096), (4096, 4096, 4096)])
def test_catalog_prices_mi300x_fp8_at_most_the_maf_ratio_faster(shape: tuple[int, int, int]) -> None:
    """At compute-bound training shapes (Llama 3 8B at 8192 tokens: MLP up, QKV; and 4096^3) the catalog's FP8 GEMM
    runs at most 1.798 x the catalog's BF16 GEMM (1.90 x before the bound), as the MAF pair measured."""
    acc = load_accelerator("mi300x")
    ce = acc.compute_efficiency
    assert ce.fp8 is not None
    m, n, k = shape

    def t(prec: str) -> float:
        c = ce.fp8 if prec == "fp8" else ce
        return float(gemm_time(m, n, k, 1.0, peak_flops=acc.peak(prec), memory_bandwidth=float(acc.memory_bandwidth),
                               gemm_max=c.gemm_max, gemm_half_dim=c.gemm_half_dim, memory_efficiency=ce.memory,
                               elem_bytes=1.0 if prec == "fp8" else 2.0))

    ratio = t("bf16") / t("fp8")
    assert ratio <= MAF_MI300X["fp8"] / MAF_MI300X["bf16"] + 0.01  # catalog rounding to 0.01
    assert ratio == pytest.approx(0.37 * PEAK_FP8 / (ce.gemm_max * PEAK_BF16), rel=1e-3)


def test_mi325x_fp8_not_bound() -> None:
    """mi325x's transferred FP8 curve (mi300x's unbounded 0.4335 x MAF's 1519 / 1273) against its own BF16 curve
    (HipKittens' torch.matmul, 0.600 under MAMF) makes FP8 1.72 x BF16: under 1.802, so the bound leaves it."""
    g8 = AZURE_FP8_LEVEL * MAF_MI325X["fp8"] / MAF_MI300X["fp8"]
    assert g8 == pytest.approx(0.517, abs=5e-4)
    ratio = g8 * PEAK_FP8 / (0.600 * PEAK_BF16)
    assert ratio == pytest.approx(1.724, abs=2e-3) and ratio < MAF_MI325X["fp8"] / MAF_MI325X["bf16"]
    fits = fit.run()
    assert fits[("mi325x", "fp8")]["gemm_max"] == pytest.approx(g8, abs=5e-4)
    assert fits[("mi325x", "fp8")]["ratio_bound"] > g8
    assert load_accelerator("mi325x").compute_efficiency.fp8.gemm_max == 0.47  # type: ignore[union-attr]
