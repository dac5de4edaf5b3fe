"""gb300_29: gb300's GEMM curves are gb200's x one chip ratio (scripts/fit_compute_curves.py CHIP_RATIO,
docs/model.md#blackwell-shape-audit). The ratio is recomputed here by hand from gemm.yaml's transcribed TFLOP/s and
the catalog's gb200 / b200 / b300 curves, eff = gemm_max / in-layer factor x prod d/(d + d0) at the compute term
(every side >= 4096: t = 2 b m n k / (peak x eff)), not through the script's fitter."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost.compute import in_layer_gemm_factor
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import fit_compute_curves as fit  # noqa: E402

POINTS = load_yaml(ROOT / "hardware" / "measurements" / "gemm.yaml")["points"]


def _median_ratio(src: str, acc: str, curve: str, prec: str) -> float:
    """Median over ``src``'s GEMMs of ``acc`` with every side >= 4096 of measured rate / the rate ``curve``'s catalog
    curve (isolated basis) gives at ``acc``'s peak: time on the curve over the measured time."""
    a, c = load_accelerator(acc, overrides=[]), load_accelerator(curve, overrides=[])
    gm, d0 = c.compute_efficiency.gemm(prec)  # type: ignore[union-attr]
    iso = gm / in_layer_gemm_factor(c.family, prec, c.name)
    got = [p["tflops"] * 1e12 / (a.peak(prec) * iso * np.prod([x / (x + d0) for x in (p["m"], p["n"], p["k"])]))
           for p in POINTS if p["src"] == src and p["acc"] == acc and min(p["m"], p["n"], p["k"]) >= 4096]
    assert got, src
    return float(np.median(got))


def test_gb300_sources_lie_outside_what_the_same_protocols_read_on_the_siblings() -> None:
    """The rule's conditions: two GB300 sources of different protocols (tritonbench's torch.matmul, burst, 16-bit;
    Azure's cuBLASLt FP8 sweep, 10,000 warm-up calls), each median over gb200's curve outside the band the same
    protocol reads on the other Blackwell parts against their own curves (torch.matmul: AO-B200 on b200, TE's B300
    GEMM profiling on b300; Azure: AZ-GB200 on gb200), both above it."""
    tlx = _median_ratio("TLX740-GB300", "gb300", "gb200", "bf16")
    az = _median_ratio("AZ-GB300", "gb300", "gb200", "fp8")
    torch_band = [_median_ratio("AO-B200", "b200", "b200", "bf16"), _median_ratio("TE-GEMMPROF-B300", "b300", "b300",
                                                                                   "bf16")]
    azure_band = [_median_ratio("AZ-GB200", "gb200", "gb200", "fp8")]
    assert tlx == pytest.approx(1.177, abs=0.005) and az == pytest.approx(1.115, abs=0.005)
    assert max(torch_band) < 1.03 < 1.10 < tlx and max(azure_band) < 1.0 < 1.10 < az
    assert min(torch_band) > 0.97 and min(azure_band) > 0.97


def test_catalog_gb300_is_gb200_times_the_geometric_mean() -> None:
    """gb300's gemm_max / gb200's in both precisions is the geometric mean of the two medians (1.146, to the catalog's
    0.001 rounding of each gemm_max), d0 unchanged; the isolated 16-bit level 0.744 stays under B300's MAMF fraction
    1769.0 / 2250 = 0.786, the highest Blackwell one."""
    r = float(np.sqrt(_median_ratio("TLX740-GB300", "gb300", "gb200", "bf16")
                      * _median_ratio("AZ-GB300", "gb300", "gb200", "fp8")))
    assert r == pytest.approx(1.1456, abs=0.002)
    c200 = load_accelerator("gb200", overrides=[]).compute_efficiency
    a300 = load_accelerator("gb300", overrides=[])
    c300 = a300.compute_efficiency
    assert c200 is not None and c300 is not None
    for prec in ("bf16", "fp8"):
        (gm200, d200), (gm300, d300) = c200.gemm(prec), c300.gemm(prec)
        assert d300 == d200
        assert gm300 == pytest.approx(gm200 * r, abs=0.0015), prec
    iso16 = c300.gemm("bf16")[0] / in_layer_gemm_factor(a300.family, "bf16", a300.name)
    assert 0.74 < iso16 < 1769.0 / 2250


def test_on_its_own_curve_each_gb300_source_sits_where_the_siblings_do() -> None:
    """After the ratio each source reads on gb300's own curve what the same protocol reads on the siblings: the
    torch.matmul points 1.03 x (AO-B200 1.02, TE-B300 1.02), the Azure sweep 0.97 x (AZ-GB200 0.98)."""
    assert _median_ratio("TLX740-GB300", "gb300", "gb300", "bf16") == pytest.approx(1.027, abs=0.006)
    assert _median_ratio("AZ-GB300", "gb300", "gb300", "fp8") == pytest.approx(0.974, abs=0.006)


def test_chip_ratio_refuses_one_source_or_a_source_inside_the_band() -> None:
    """The rule stops rather than prices: one source alone, or a source whose median lies inside the band spanned by 1
    and its siblings' medians (AZ-GB300 / 1.12: 0.996, between AZ-GB200's 0.983 and 1), is no chip ratio (SystemExit),
    and the fits are left as they were."""
    fits = fit.run()
    before = dict(fits[("gb300", "16bit")])
    with pytest.raises(SystemExit, match="needs >= 2 sources"):
        fit.chip_ratio("gb300", "gb200", (("TLX740-GB300", "16bit"),), fits, load_yaml(fit.GEMM)["points"])
    inside = [dict(p, tflops=p["tflops"] / 1.12) if p["src"] == "AZ-GB300" else p
              for p in load_yaml(fit.GEMM)["points"]]
    with pytest.raises(SystemExit, match="inside its siblings' band"):
        fit.chip_ratio("gb300", "gb200", fit.CHIP_RATIO["gb300"][1], fits, inside)
    assert fits[("gb300", "16bit")]["gemm_max"] == before["gemm_max"]
