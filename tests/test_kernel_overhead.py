"""scripts/fit_kernel_overhead.py against hardware/measurements/memory_kernels.yaml (Liger-Kernel's published
single-kernel timings): the fixed time per memory-bound kernel, re-derived here from the points by the closed-form
least-squares line and checked for physical sense (the slopes are HBM bandwidths under the datasheet peak)."""

from __future__ import annotations

import statistics
import sys

import pytest
from conftest import ROOT, load_yaml

from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import fit_kernel_overhead as fko  # noqa: E402

DOC = load_yaml(ROOT / "hardware" / "measurements" / "memory_kernels.yaml")


def _series(src: str | None = None) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(acc, kernel) -> [(bytes, seconds)]; Liger's points carry no src, our H200 run's carry src SM-H200."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for p in DOC["points"]:
        if src is not None and p.get("src", "LIGER-BENCH") != src:
            continue
        nbytes = p["rows"] * p["width"] * p["elem_bytes"] * p["passes"]
        out.setdefault((p["acc"], p["kernel"]), []).append((float(nbytes), p["ms"] * 1e-3))
    return out


def _line(pts: list[tuple[float, float]]) -> tuple[float, float]:
    """Closed-form least squares t = a + c x: c = Sxy / Sxx about the means, a = mean(t) - c mean(x)."""
    mx = statistics.fmean(x for x, _ in pts)
    mt = statistics.fmean(t for _, t in pts)
    c = sum((x - mx) * (t - mt) for x, t in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return mt - c * mx, c


def test_points_are_the_csv_rows() -> None:
    """Spot values typed from the CSV: H100 Liger RMSNorm at H 16384 (S 4096, B 1) 0.0950080 ms; A100 Liger
    RMSNorm at H 1024 (M 2048) 0.0136 ms; bytes of the first: 4096 x 16384 x 2 B x 2 passes = 268.4 MB."""
    h = next(p for p in DOC["points"] if p["acc"] == "h100-sxm" and p["kernel"] == "megatron_rms_norm"
             and p["width"] == 16384)
    assert h["ms"] == pytest.approx(0.095008, rel=1e-5)
    assert fko.point_bytes(h) == 4096 * 16384 * 2 * 2 == 268435456
    a = next(p for p in DOC["points"] if p["acc"] == "a100-sxm-80g" and p["kernel"] == "rms_norm"
             and p["width"] == 1024)
    assert a["ms"] == pytest.approx(0.0136, rel=1e-3)


def test_fit_matches_closed_form_and_the_stated_medians() -> None:
    """The script's per-series intercepts and slopes equal the closed-form line; the per-accelerator median t0 is
    7.02 us on H100 SXM (6.74 / 7.12 / 7.02) and 9.66 us on A100 (8.76 / 10.55)."""
    res = fko.run(DOC)
    for (acc, kernel), pts in _series().items():
        a, c = _line(pts)
        got = res[acc]["series"][kernel]
        assert got["t0_s"] == pytest.approx(a, rel=1e-6)
        assert got["bw_Bps"] == pytest.approx(1.0 / c, rel=1e-6)
    assert res["h100-sxm"]["t0_s"] == pytest.approx(7.02e-6, abs=0.01e-6)
    assert res["a100-sxm-80g"]["t0_s"] == pytest.approx(9.66e-6, abs=0.01e-6)


def test_lines_fit_and_are_physical() -> None:
    """Every point lies within 5 % of its series' line; every intercept is positive and under 15 us (a few
    microseconds of launch, ramp and tail, not a hidden size dependence); every slope is an HBM bandwidth below
    the datasheet peak and above half of it. (Liger's single Triton kernels; our H200 eager series below.)"""
    for (acc, _kernel), pts in _series("LIGER-BENCH").items():
        a, c = _line(pts)
        assert 0.0 < a < 15e-6
        peak = load_accelerator(acc, overrides=[]).memory_bandwidth
        assert 0.5 * peak < 1.0 / c < peak
        for x, t in pts:
            assert (a + c * x) == pytest.approx(t, rel=0.05)


def test_h200_eager_series_by_hand() -> None:
    """Our H200 run (SM-H200, PyTorch eager kernels replayed from a CUDA graph): LayerNorm over 262144 x 4096
    bf16 (1 GiB in, 1 GiB out) moves 262144 x 4096 elements x 2 B x 2 passes = 2^32 B, its time the median of the
    two runs' medians; every series' slope is an HBM bandwidth under the 4.8 TB/s datasheet peak; from 256 MiB per
    tensor up every kernel but softmax (torch's, 1.3 TB/s) moves at least 2.5 TB/s. Graph replay leaves no host
    launch gap, so the median intercept (1.8 us) sits far under Liger's do_bench figure on H100 (7.02 us, which
    includes launch-to-start)."""
    ln = next(p for p in DOC["points"] if p.get("src") == "SM-H200" and p["kernel"] == "layer_norm"
              and p["rows"] == 262144)
    assert fko.point_bytes(ln) == 262144 * 4096 * 2 * 2 == 2 * 2**31
    assert ln["ms"] == pytest.approx(sum(ln["runs_ms"]) / 2, abs=1e-6)
    series = _series("SM-H200")
    assert {k for _, k in series} == {"copy", "add", "gelu", "layer_norm", "rms_norm", "softmax", "cast_fp8",
                                      "adamw_fused_fp32"}
    for (acc, kernel), pts in series.items():
        assert acc == "h200-sxm"
        _, c = _line(pts)
        assert 1.0e12 < 1.0 / c < 4.8e12, kernel
        for x, t in pts:
            assert x / t < 4.8e12, (kernel, x)
            if x >= 2 * 256 * 2**20 and kernel != "softmax":
                assert x / t > 2.5e12, (kernel, x)
    assert 1e-6 < fko.run(DOC)["h200-sxm"]["t0_s"] < 3e-6
