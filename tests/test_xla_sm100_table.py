"""OpenXLA's sm_100 matmul table (gemm.yaml source XLA-SM100) and the B200 curves fitted to it.

Independent evidence: the header text, tensorflow/tensorflow@a305421c45a1ea5117c170b8d8a00a51f9dcee8f,
third_party/xla/xla/backends/gpu/cost_model/matmul_interpolator_data.h, kDefaultMatmulPTable, key "sm_100".
The values below were read off that text by hand; the expected times are 2 b m n k / value, worked out here,
never taken from the transcription script or the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost.compute import gemm_time, in_layer_gemm_factor
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import fit_compute_curves as fit  # noqa: E402
import transcribe_xla_matmul as tx  # noqa: E402

DOC = load_yaml(ROOT / "hardware" / "measurements" / "gemm.yaml")
XLA = [p for p in DOC["points"] if p["src"] == "XLA-SM100"]

#: (b, m, n, k, flops key) -> the value as written in the header (FLOP/s), and the kernel time in ns it encodes:
#: 2 b m n k 1e9 / value, e.g. 2 x 256^3 = 33,554,432 FLOP / 6,765,006,451,612 FLOP/s = 4,960.000 ns.
HEADER = {
    (1, 256, 256, 256, "bf16xbf16->bf16"): (6765006451612, 4960),
    (4, 4096, 4096, 4096, "bf16xbf16->bf16"): (1670467342710337, 329103),      # 549,755,813,888 FLOP
    (4, 4096, 4096, 4096, "f8e4m3fnxf8e4m3fn->bf16"): (3279676742061148, 167625),
    (2, 1024, 4096, 1024, "f8e4m3fnxf8e4m3fn->bf16"): (1380130879177378, 12448),  # 17,179,869,184 FLOP
    (2, 4096, 4096, 4096, "bf16xbf16->bf16"): (1466617794742374, 187423),
}
PREC = {"bf16xbf16->bf16": "bf16", "f8e4m3fnxf8e4m3fn->bf16": "fp8"}


def test_every_entry_transcribed_for_both_precisions() -> None:
    """375 entries (b in {1, 2, 4} x m, n, k in {256, ..., 4096}), each once for bf16 and once for fp8, all b200."""
    for prec in ("bf16", "fp8"):
        pts = [p for p in XLA if p["prec"] == prec]
        assert len(pts) == 375
        assert {(p["b"], p["m"], p["n"], p["k"]) for p in pts} == {
            (b, m, n, k) for b in (1, 2, 4) for m in (256, 512, 1024, 2048, 4096)
            for n in (256, 512, 1024, 2048, 4096) for k in (256, 512, 1024, 2048, 4096)}
    assert {p["acc"] for p in XLA} == {"b200"}
    assert "sm_100" in DOC["sources"]["XLA-SM100"]["where"]
    assert "a305421c45a1ea5117c170b8d8a00a51f9dcee8f" in DOC["sources"]["XLA-SM100"]["url"]


@pytest.mark.parametrize("key", sorted(HEADER))
def test_values_match_the_header_text(key: tuple) -> None:
    """A few entries checked by hand: the gemm.yaml point is the header's value in TFLOP/s (to its 0.01 rounding), the
    raw transcription holds the value digit for digit, and the value is a whole-nanosecond kernel time."""
    b, m, n, k, dtype = key
    value, ns = HEADER[key]
    assert 2 * b * m * n * k * 1e9 / value == pytest.approx(ns, abs=1e-3)
    (pt,) = [p for p in XLA if (p["b"], p["m"], p["n"], p["k"], p["prec"]) == (b, m, n, k, PREC[dtype])]
    assert pt["tflops"] == pytest.approx(value / 1e12, abs=0.005)
    (raw,) = [e for e in tx.read_raw(tx.RAW) if (e["b"], e["m"], e["n"], e["k"]) == (b, m, n, k)]
    assert raw[dtype] == value


def test_raw_transcription_passes_its_checks_and_matches_gemm_yaml() -> None:
    entries = tx.read_raw(tx.RAW)
    assert len(entries) == 375
    assert tx.validate(entries) == []
    assert sorted(tx.yaml_lines(entries, "b200", "XLA-SM100")) == sorted(
        f"  - {{acc: b200, prec: {p['prec']}, b: {p['b']}, m: {p['m']}, n: {p['n']}, k: {p['k']}, "
        f"tflops: {p['tflops']:.2f}, src: XLA-SM100}}" for p in XLA)


def test_whole_nanosecond_check_catches_a_miscopied_digit() -> None:
    """6,765,006,451,612 is 2 x 256^3 / 4,960 ns; change its fourth digit and no whole-ns time gives it."""
    assert tx.integer_ns(1, 256, 256, 256, 6765006451612) == 4960
    assert tx.integer_ns(1, 256, 256, 256, 6766006451612) is None
    assert tx.integer_ns(1, 256, 256, 256, 6765006451512) is None


def test_header_parser_reads_the_text_proto_layout(tmp_path: Path) -> None:
    """The --header path parses the file's own layout (two sm_100 entries as written, then another key)."""
    text = '''constexpr char kDefaultMatmulPTable[] = R"pb(
  entries {
    key: "sm_100"
    value {
      entries {
        b: 1
        m: 256
        n: 256
        k: 256
        flops { key: "bf16xbf16->bf16" value: 6765006451612 }
        flops { key: "f32xf32->f32" value: 5065584541062 }
        flops { key: "f8e4m3fnxf8e4m3fn->bf16" value: 6919866364198 }
        flops { key: "f8e4m3fnxf8e5m2->bf16" value: 5531558193208 }
        flops { key: "f8e5m2xf8e4m3fn->bf16" value: 6808935064935 }
      }
      entries {
        b: 1
        m: 256
        n: 512
        k: 256
        flops { key: "bf16xbf16->bf16" value: 13400332268370 }
        flops { key: "f32xf32->f32" value: 11552567395420 }
        flops { key: "f8e4m3fnxf8e4m3fn->bf16" value: 12404595933456 }
        flops { key: "f8e4m3fnxf8e5m2->bf16" value: 13148288401253 }
        flops { key: "f8e5m2xf8e4m3fn->bf16" value: 13107200000000 }
      }
    }
  }
  entries {
    key: "sm_90"
    value {
      entries {
        b: 1
        m: 256
        n: 256
        k: 256
        flops { key: "bf16xbf16->bf16" value: 6721641025641 }
      }
    }
  }
)pb";
'''
    path = tmp_path / "matmul_interpolator_data.h"
    path.write_text(text, encoding="utf-8")
    parsed = tx.read_header(path, "sm_100")
    assert parsed == tx.read_raw(tx.RAW)[:2]


def test_b200_curves_fitted_to_the_table() -> None:
    """b200 now fixes its own d0 from the table (no donor); 16-bit gemm_max falls under the MAMF fraction
    1745.0 / 2250 = 0.7756, fp8 sits on 3432.5 / 4500 = 0.7628; gb200 16-bit takes b200's 16-bit curve (its d0, and
    since bwcurve19 its level x the MAMF ratio (1822.0 / 2500) / (1745.0 / 2250): LEVEL_TRANSFER, the level rule)."""
    fits = fit.run()
    b16, b8, g16 = fits[("b200", "16bit")], fits[("b200", "fp8")], fits[("gb200", "16bit")]
    assert not b16["d0_borrowed"] and not b8["d0_borrowed"]
    assert b16["n"] == 109 and b8["n"] == 109  # 108 table entries >= 10 GFLOP + MAMF
    assert b16["gemm_max"] < 1745.0 / 2250 - 0.05
    # fp8 sat on 3432.5 / 4500 = 0.7628 (the MAMF bound) until gbfp8_21's FP8 / BF16 bound
    # (docs/model.md#fp8-bf16-ratio; checked by hand in tests/test_compute_curves.py) lowered it to 0.7134, d0 its own
    assert b8["mamf_cap"] == pytest.approx(3432.5 / 4500, abs=5e-4)
    assert b8["gemm_max"] == b8["ratio_bound"] == pytest.approx(0.7134, abs=5e-4)
    assert g16["gemm_half_dim"] == b16["gemm_half_dim"]
    assert fit.LEVEL_TRANSFER[("gb200", "16bit")] == (("b200", "16bit"), ("MAMF", "bf16"))
    assert g16["gemm_max"] == pytest.approx(b16["gemm_max"] * (1822.0 / 2500) / (1745.0 / 2250), rel=1e-6)


def _median_error(prec: str) -> float:
    """Median of (curve time / table time - 1) over the table's GEMMs of >= 50 GFLOP, isolated-GEMM curve."""
    a = load_accelerator("b200", overrides=[])
    gm, d0 = a.compute_efficiency.gemm(prec)  # type: ignore[union-attr]
    pts = [p for p in XLA if p["prec"] == prec and 2 * p["b"] * p["m"] * p["n"] * p["k"] >= 50e9]
    assert len(pts) == 34
    m, n, k, b = (np.array([float(p[c]) for p in pts]) for c in ("m", "n", "k", "b"))
    t_meas = 2 * b * m * n * k / (np.array([p["tflops"] for p in pts]) * 1e12)
    t = gemm_time(m, n, k, b, peak_flops=a.peak(prec), memory_bandwidth=a.memory_bandwidth,
                  gemm_max=gm / in_layer_gemm_factor(a.family, prec, a.name), gemm_half_dim=d0,
                  memory_efficiency=a.compute_efficiency.memory)  # type: ignore[union-attr]
    return float(np.median(t / t_meas - 1))


def test_b200_bf16_large_gemms_within_tolerance() -> None:
    """The table's 34 BF16 GEMMs of >= 50 GFLOP: the curve's times within 10 % on median (|error|)."""
    assert abs(_median_error("bf16")) < 0.10


def test_b200_fp8_curve_errs_slow_on_large_gemms() -> None:
    """FP8: the 10-GFLOP fit wants a large d0 (the table's mid-size FP8 GEMMs are slow) and its gemm_max is held at
    MAMF's fraction, since gbfp8_21 under it by the FP8 / BF16 bound (0.7134, docs/model.md#fp8-bf16-ratio), so the
    curve prices the table's >= 50 GFLOP GEMMs slower than measured (median 28.8 %; 20 % at the MAMF level): a
    conservative, not an optimistic, error. The table's sides stop at 4096; its same-shape FP8 / BF16 speed ratio
    (1.95 median where every side >= 2048) is the bound's, the d0 366 that fits its mid-size GEMMs is what prices
    them slow."""
    assert 0.15 < _median_error("fp8") < 0.30
