"""Review of amd29's CDNA3 FP8 / BF16 bound, and the CDNA4 ratio it left unbounded (review29a).

Independent evidence, typed from the sources, never read from the engine:
- AMD ROCm blog "Measuring Max-Achievable FLOPs - Part 2" (ROCm/rocm-blogs@8e011952, unchanged at d957560c), Table 1
  and its footnote 4 (TFLOP/s, median engine clock in MHz), and the shapes of its Appendix B;
- HipKittens@f09e9685 hipblaslt-bench baselines on one MI355X: BF16 analysis/bf16_gemm/plot.py
  ``mi355x_baselines["hipblaslt"]`` (@55b9a0ae), FP8 analysis/fp8_gemm/mi350x/mi355x_fp8_gemm.json (@f3a07c06);
- the catalog's curve eff = gemm_max x prod d / (d + d0), recomputed here by hand.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
from conftest import load_yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import fit_compute_curves as fit  # noqa: E402

MODEL_MD = (ROOT / "docs" / "model.md").read_text()

# MAF Table 1 (TFLOP/s, median MHz) and footnote 4 (TFLOP/s, MHz) as printed
TABLE = {("mi300x", "fp16"): (654.0, 1115), ("mi300x", "bf16"): (708.0, 1207), ("mi300x", "fp8"): (1273.0, 1230),
         ("mi325x", "fp16"): (794.0, 1354), ("mi325x", "bf16"): (843.0, 1447), ("mi325x", "fp8"): (1519.0, 1464)}
FOOTNOTE = {("mi300x", "fp16"): (654.0, 1115), ("mi300x", "bf16"): (708.0, 1207), ("mi300x", "fp8"): (1223.6, 1273),
            ("mi325x", "fp16"): (777.8, 1354), ("mi325x", "bf16"): (840.8, 1447), ("mi325x", "fp8"): (1527.7, 1464)}
CUS = 304  # MI300X and MI325X, CDNA3
FLOP_PER_CU_CLOCK = {"fp16": 2048, "bf16": 2048, "fp8": 4096}  # 1307.4 / 2614.9 TFLOP/s at 2100 MHz on 304 CUs
PEAK_BF16_300, PEAK_FP8_300 = 1307.4, 2614.9
LC_4096 = 548.09  # LC-MI300X torch.mm BF16 at 4096^3
D0_300 = 119.3


def _section(anchor: str) -> str:
    """The text of docs/model.md from an anchor to the next anchor."""
    start = MODEL_MD.index(f'<a id="{anchor}"></a>')
    end = MODEL_MD.index("<a id=", start + 10)
    return MODEL_MD[start:end]


def _cdna3_text() -> str:
    """docs/model.md's CDNA3 bound section with its effect and the Table 1 / footnote check, up to the CDNA4 anchor."""
    return _section("cdna3-fp8-bf16-ratio")


def _per_clock(table: dict[tuple[str, str], tuple[float, int]], acc: str, prec: str) -> float:
    tflops, mhz = table[(acc, prec)]
    return tflops / (mhz * 1e6 * CUS * FLOP_PER_CU_CLOCK[prec] / 1e12)


def test_flop_per_cu_clock_matches_the_catalog_peaks() -> None:
    assert 2100e6 * CUS * 2048 / 1e12 == pytest.approx(PEAK_BF16_300, abs=0.05)
    assert 2100e6 * CUS * 4096 / 1e12 == pytest.approx(PEAK_FP8_300, abs=0.05)


def test_maf_table_not_its_footnote_by_the_per_clock_check() -> None:
    """The same kernel of the same build on the same die (MI300X at 750 W, MI325X at 1000 W) reaches the same fraction
    of its clock's peak: the table's FP8 cells agree (0.831 / 0.833), as its BF16 and FP16 cells do; the footnote's
    MI300X FP8 figure falls 7 % under its MI325X twin. The bound takes the table's 1273, not the footnote's 1223.6."""
    for prec in ("fp16", "bf16", "fp8"):
        a, b = _per_clock(TABLE, "mi300x", prec), _per_clock(TABLE, "mi325x", prec)
        assert abs(a / b - 1) < 0.01, prec
    assert _per_clock(TABLE, "mi300x", "fp8") == pytest.approx(0.831, abs=5e-4)
    assert _per_clock(TABLE, "mi325x", "fp8") == pytest.approx(0.833, abs=5e-4)
    fn = _per_clock(FOOTNOTE, "mi300x", "fp8")
    assert fn == pytest.approx(0.772, abs=5e-4) and fn / _per_clock(FOOTNOTE, "mi325x", "fp8") < 0.93
    assert fit.FP8_OVER_16BIT["cdna3"][0] == TABLE[("mi300x", "fp8")][0] / TABLE[("mi300x", "bf16")][0]
    text = _cdna3_text()  # the check is written down with the bound
    assert "1223.6" in text and "0.772" in text


def test_cdna3_bound_is_the_stricter_reading_and_the_docs_say_so() -> None:
    """Comparing both curves at both MAF shapes (one d0) holds the LEVEL ratio to 1.798; holding each curve to its own
    shape would allow 1.798 x s16 / s8 = 1.812 (FP8's n 3648 has the smaller shape factor). The code takes the former:
    0.8 % stricter, not gentler as amd29's text said. Both round to 0.37 in layer, so the catalog is the same."""
    s16 = 4864 / (4864 + D0_300)  # m and k are equal in the two shapes
    s8 = 3648 / (3648 + D0_300)
    assert s16 / s8 == pytest.approx(1.00798, abs=5e-5)
    ratio = TABLE[("mi300x", "fp8")][0] / TABLE[("mi300x", "bf16")][0]
    g16 = LC_4096 / PEAK_BF16_300 / (4096 / (4096 + D0_300)) ** 3
    level_reading = g16 * ratio * PEAK_BF16_300 / PEAK_FP8_300
    own_shape_reading = level_reading * s16 / s8
    assert level_reading == pytest.approx(0.4108, abs=2e-4) and own_shape_reading == pytest.approx(0.4141, abs=2e-4)
    fits = fit.run()
    assert fits[("mi300x", "fp8")]["gemm_max"] == pytest.approx(level_reading, rel=2e-3)
    assert fits[("mi300x", "fp8")]["gemm_max"] < own_shape_reading  # stricter
    assert round(level_reading * 0.901, 2) == round(own_shape_reading * 0.901, 2) == 0.37
    text = " ".join(_cdna3_text().split())
    assert "0.8 % stricter than holding each curve to its own shape" in text
    assert "gentler than holding" not in text
    src = " ".join((ROOT / "scripts" / "fit_compute_curves.py").read_text().replace("#:", " ").split())
    assert "0.8 % stricter than each curve at its own shape" in src and "0.8 % gentler" not in src


# HipKittens' hipblaslt-bench columns on one MI355X (TFLOP/s, square N^3), the closest CDNA4 candidate
HK_BF16 = {2048: 639.608, 4096: 1432.70, 8192: 1574.69, 16384: 1579.20}
HK_FP8 = {2048: 1172.69, 4096: 2748.78, 8192: 3233.19, 16384: 3293.23}
HK_BF16_8192_REVISIONS = (1379.180, 1605.690, 1584.420, 1574.69)  # 2025-10-19, 10-28, 10-29, 11-10
P16_355, P8_355 = 2516.58, 5033.16


def _eff(shape: tuple[int, int, int], gemm_max: float, d0: float) -> float:
    return gemm_max * math.prod(d / (d + d0) for d in shape)


def test_cdna4_curves_ratio_by_hand_and_unbounded() -> None:
    """mi355x's curves (16-bit 0.617 / d0 119.3, FP8 0.888 / d0 1040.7, isolated) price FP8 against BF16 by shape:
    1.59 x at 4096^3, 2.00 x at Llama 3 8B's MLP up, 2.88 x in the limit, over the 2.0 of the peaks; no cdna4 entry."""
    fits = fit.run()
    g16, d16 = fits[("mi355x", "16bit")]["gemm_max"], fits[("mi355x", "16bit")]["gemm_half_dim"]
    g8, d8 = fits[("mi355x", "fp8")]["gemm_max"], fits[("mi355x", "fp8")]["gemm_half_dim"]
    assert (round(g16, 3), round(d16, 1), round(g8, 3), round(d8, 1)) == (0.617, 119.3, 0.888, 1040.7)
    assert "ratio_bound" not in fits[("mi355x", "fp8")] and "cdna4" not in fit.FP8_OVER_16BIT

    def r(shape: tuple[int, int, int]) -> float:
        return _eff(shape, g8, d8) * P8_355 / (_eff(shape, g16, d16) * P16_355)

    assert r((4096, 4096, 4096)) == pytest.approx(1.59, abs=0.01)
    assert r((16384, 16384, 16384)) == pytest.approx(2.45, abs=0.01)
    assert r((8192, 4096, 14336)) == pytest.approx(2.00, abs=0.01)
    assert 2 * g8 / g16 == pytest.approx(2.88, abs=0.01) and 2 * g8 / g16 > P8_355 / P16_355
    for name in ("mi355x", "mi350x"):
        src = load_yaml(ROOT / "hardware" / "accelerators" / f"{name}.yaml")["compute_efficiency"]["fp8"]["source"]
        assert re.search(r"(?i)unbounded", src) and "cdna4-fp8-bf16-ratio" in src, name


def test_hipkittens_pair_is_no_same_build_pair_and_a_level_bound_would_not_mend_the_curves() -> None:
    """The candidate's BF16 column moved 16 % between revisions, so its ratio depends on which revisions are paired;
    and a level-only bound on its time-weighted ratio would price 4096^3 FP8 under the candidate's own 4096^3 ratio,
    because the curves' mismatch is in d0."""
    lo, hi = min(HK_BF16_8192_REVISIONS), max(HK_BF16_8192_REVISIONS)
    assert hi / lo - 1 == pytest.approx(0.164, abs=1e-3)
    ratios = {n: HK_FP8[n] / HK_BF16[n] for n in HK_BF16}
    assert [round(ratios[n], 2) for n in sorted(ratios)] == [1.83, 1.92, 2.05, 2.09]
    sizes = (4096, 8192, 16384)
    t16 = sum(2 * n**3 / HK_BF16[n] for n in sizes)
    t8 = sum(2 * n**3 / HK_FP8[n] for n in sizes)
    pair = t16 / t8
    assert pair == pytest.approx(2.079, abs=1e-3)
    fits = fit.run()
    g16, d16 = fits[("mi355x", "16bit")]["gemm_max"], fits[("mi355x", "16bit")]["gemm_half_dim"]
    g8, d8 = fits[("mi355x", "fp8")]["gemm_max"], fits[("mi355x", "fp8")]["gemm_half_dim"]
    c16 = sum(2 * n**3 / (_eff((n, n, n), g16, d16) * P16_355) for n in sizes)
    c8 = sum(2 * n**3 / (_eff((n, n, n), g8, d8) * P8_355) for n in sizes)
    bound = g8 * c8 / (c16 / pair)
    assert bound == pytest.approx(0.775, abs=1e-3)
    at_4096 = _eff((4096,) * 3, bound, d8) * P8_355 / (_eff((4096,) * 3, g16, d16) * P16_355)
    assert at_4096 == pytest.approx(1.39, abs=0.01) and at_4096 < ratios[4096]
    text = " ".join(_section("cdna4-fp8-bf16-ratio").split())
    assert "0.888 -> 0.775" in text and "1.39 x" in text and "16 % swing" in text


def test_mi325x_fp8_source_says_the_cdna3_bound_checks_it() -> None:
    """mi325x is in the bound's family and the code computes its bound; its source says so, with the ratio by hand."""
    g8 = 0.4335 * TABLE[("mi325x", "fp8")][0] / TABLE[("mi300x", "fp8")][0]  # the transfer from the unbounded level
    ratio = g8 * PEAK_FP8_300 / (0.600 * PEAK_BF16_300)
    maf_ratio = TABLE[("mi300x", "fp8")][0] / TABLE[("mi300x", "bf16")][0]
    assert ratio == pytest.approx(1.72, abs=0.005) and ratio < maf_ratio
    src = load_yaml(ROOT / "hardware" / "accelerators" / "mi325x.yaml")["compute_efficiency"]["fp8"]["source"]
    assert "cdna3-fp8-bf16-ratio" in src and "1.72 x" in src and "does not bind" in src


def test_mi300x_unbounded_fp8_over_bf16_is_1_898() -> None:
    """Before the bound, mi300x's curves (FP8 Azure 0.4335, 16-bit LC 0.4569, one d0) made FP8 1.898 x BF16 at every
    compute-bound shape (the script prints 1.898), not the 1.895 amd29 wrote from rounded levels (0.433 / 0.457)."""
    g16 = LC_4096 / PEAK_BF16_300 / (4096 / (4096 + D0_300)) ** 3
    fits = fit.run()
    ratio_bound = fits[("mi300x", "fp8")]["ratio_bound"]
    maf = TABLE[("mi300x", "fp8")][0] / TABLE[("mi300x", "bf16")][0]
    unbounded = 0.4335 * PEAK_FP8_300 / (g16 * PEAK_BF16_300)
    assert unbounded == pytest.approx(1.898, abs=6e-4)
    assert ratio_bound * PEAK_FP8_300 / (g16 * PEAK_BF16_300) == pytest.approx(maf, rel=2e-3)
    for text in (_cdna3_text(), (ROOT / "scripts" / "fit_compute_curves.py").read_text(),
                 load_yaml(ROOT / "hardware" / "accelerators" / "mi300x.yaml")["compute_efficiency"]["fp8"]["source"]):
        flat = " ".join(text.split())
        assert "1.898 x BF16" in flat and "1.895" not in flat
