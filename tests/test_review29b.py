"""review29b: the review of gb300_29's chip ratio (docs/model.md#blackwell-shape-audit) and gb300's memory capacity.
Values are recomputed from gemm.yaml's transcribed TFLOP/s and the catalog's curves by test_gb300_29's hand formula
(eff = gemm_max / in-layer factor x prod d/(d + d0), every side >= 4096), and the nvidia-smi totals are typed here from
NVIDIA/k8s-test-infra@5f8956ad tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-*.xml."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import ROOT, load_yaml
from test_gb300_29 import POINTS, _median_ratio

from scalemodel.cost.compute import in_layer_gemm_factor
from scalemodel.specs import load_accelerator

GEMM_SOURCES = load_yaml(ROOT / "hardware" / "measurements" / "gemm.yaml")["sources"]


def _ratios(src: str, acc: str, curve: str, prec: str) -> list[float]:
    """Per GEMM of ``src`` on ``acc`` with every side >= 4096: measured rate / ``curve``'s isolated rate there."""
    a, c = load_accelerator(acc, overrides=[]), load_accelerator(curve, overrides=[])
    gm, d0 = c.compute_efficiency.gemm(prec)  # type: ignore[union-attr]
    iso = gm / in_layer_gemm_factor(c.family, prec, c.name)
    return [p["tflops"] * 1e12 / (a.peak(prec) * iso * (p["m"] / (p["m"] + d0)) * (p["n"] / (p["n"] + d0))
                                  * (p["k"] / (p["k"] + d0)))
            for p in POINTS if p["src"] == src and p["acc"] == acc and min(p["m"], p["n"], p["k"]) >= 4096]


@pytest.mark.parametrize(("acc", "total_mib"), [("gb300", 284208), ("gb200", 189471), ("b200", 183359)])
def test_blackwell_memory_is_the_nvidia_smi_total(acc: str, total_mib: int) -> None:
    """hardware/README.md's convention: `memory` is nvidia-smi's device total. One commit of k8s-test-infra prints it
    for three catalog parts on one driver (580.173.02): GB300 284208 MiB (reserved 947), GB200 189471 (742), B200
    183359 (728); gb200 and b200 already held theirs, gb300 held 288 GiB = 294912 MiB (3.6 % high) until review29b."""
    assert load_accelerator(acc, overrides=[]).memory == total_mib * 2**20
    assert 294912 * 2**20 / (284208 * 2**20) == pytest.approx(1.0377, abs=1e-4)


def test_protocol_corrected_chip_ratios_agree_so_one_r_serves_both_precisions() -> None:
    """Each gb300 source over what its protocol reads on the siblings' own curves: torch.matmul 1.1768 / (AO-B200
    1.0180 x TE-GEMMPROF-B300 1.0235)^0.5 = 1.153 (16-bit), Azure cuBLASLt 1.1153 / AZ-GB200 0.9826 = 1.135 (FP8).
    They differ by 1.6 %, less than either source's own spread over its shapes (TLX740 1.13-1.18, AZ-GB300
    1.08-1.16), so the sources carry no precision effect a per-precision ratio could take; the geometric mean of the
    corrected ratios, 1.144, is within 0.3 % of the r the catalog applies (gb300 gemm_max / gb200's, both
    precisions)."""
    torch16 = _median_ratio("TLX740-GB300", "gb300", "gb200", "bf16") / np.sqrt(
        _median_ratio("AO-B200", "b200", "b200", "bf16") * _median_ratio("TE-GEMMPROF-B300", "b300", "b300", "bf16"))
    azure8 = _median_ratio("AZ-GB300", "gb300", "gb200", "fp8") / _median_ratio("AZ-GB200", "gb200", "gb200", "fp8")
    assert torch16 == pytest.approx(1.153, abs=0.002) and azure8 == pytest.approx(1.135, abs=0.002)
    spread = [max(r) / min(r) for r in (_ratios("TLX740-GB300", "gb300", "gb200", "bf16"),
                                        _ratios("AZ-GB300", "gb300", "gb200", "fp8"))]
    assert torch16 / azure8 < min(spread)
    c200 = load_accelerator("gb200", overrides=[]).compute_efficiency
    c300 = load_accelerator("gb300", overrides=[]).compute_efficiency
    assert c200 is not None and c300 is not None
    for prec in ("bf16", "fp8"):
        assert c300.gemm(prec)[0] / c200.gemm(prec)[0] == pytest.approx(np.sqrt(torch16 * azure8), rel=0.003)


def test_no_other_borrowing_part_has_a_gemm_source() -> None:
    """The rule's generality: every other part whose curves equal a sibling's in both precisions (the borrowings:
    h100-pcie and h800 on h100-sxm, mi350x on mi355x) has no GEMM point in gemm.yaml, so the chip-ratio rule (>= 2
    sources) cannot fire for it; gb300 is the one part with a chip ratio."""
    names = ["h100-sxm", "h100-pcie", "h800", "mi355x", "mi350x", "b200", "b300", "gb200", "mi300x", "mi325x"]
    curves = {}
    for n in names:
        c = load_accelerator(n, overrides=[]).compute_efficiency
        assert c is not None
        curves[n] = (c.gemm("bf16"), c.gemm("fp8"))
    donors = ("h100-sxm", "mi355x")
    borrowers = {n for n in names for m in names if n != m and curves[n] == curves[m] and n not in donors}
    assert borrowers == {"h100-pcie", "h800", "mi350x"}
    assert all(not [p for p in POINTS if p["acc"] == n] for n in borrowers)


def test_gb300_source_notes_quote_the_chip_ratio_curve_and_no_clock_lock() -> None:
    """gemm.yaml's AZ-GB300 and TLX740-GB300 notes print how each sweep runs against gb300's own (chip-ratio) curve,
    and TLX740's clocks stay unstated: triton #2023's harness locked 2070 MHz at a 500 W cap on a GB300 until it was
    fixed (2026-07-14), ~617 TFLOP/s, under half of every rate #740 printed (1596-1812), so #740 did not run under
    it."""
    az, tlx = GEMM_SOURCES["AZ-GB300"]["fit_false"], GEMM_SOURCES["TLX740-GB300"]["fit_false"]
    for note, pattern, ratios, tol in (
            (az, r"this sweep runs (\d\.\d+)-(\d\.\d+) x \(median (\d\.\d+)\)",
             _ratios("AZ-GB300", "gb300", "gb300", "fp8"), 0.0015),
            (tlx, r"they run (\d\.\d+)-(\d\.\d+) x at K >= 4096 \(median (\d\.\d+)\)",
             _ratios("TLX740-GB300", "gb300", "gb300", "bf16"), 0.006)):
        got = re.search(pattern, note)
        assert got, pattern
        for quoted, want in zip(got.groups(), (min(ratios), max(ratios), float(np.median(ratios))), strict=True):
            assert float(quoted) == pytest.approx(want, abs=tol)
    assert "keeps gb200's curves" not in az + tlx
    assert min(p["tflops"] for p in POINTS if p["src"] == "TLX740-GB300") > 2 * 617
    src = load_yaml(ROOT / "hardware" / "accelerators" / "gb300.yaml")["compute_efficiency"]["source"]
    assert "clocks locked" not in src and "clocks and power limit unstated" in src
