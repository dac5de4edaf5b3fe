"""hardware/measurements/layer_timing.yaml and scripts/fit_in_layer_factor.py.

The A100 row must give back IN_LAYER_GEMM_FACTOR from Korthikanti et al. 2022 Table 4 (the times typed from the
paper); one model time is recomputed by hand from the roofline formulas of scalemodel/cost/compute.py's
docstring; the all-reduce time from the nccl-tests table's two neighbouring rows.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost.compute import IN_LAYER_GEMM_FACTOR

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import fit_in_layer_factor as fl  # noqa: E402

DOC = fl.load()
KEYS = {"src", "row", "acc", "prec", "hidden", "heads", "ffn", "seq", "micro_batch", "tp", "sp", "flash", "causal",
        "recompute", "measured", "ms", "ar"}


def test_yaml_loads_and_is_sane() -> None:
    assert DOC["kind"] == "measurements" and DOC["what"] == "layer_timing"
    for name, src in DOC["sources"].items():
        assert src.get("cite") and src.get("status"), name
    for p in DOC["points"]:
        assert KEYS <= set(p), p
        assert p["src"] in DOC["sources"]
        assert p["prec"] in {"bf16", "fp16", "fp8"}
        assert p["measured"] in {"fwd", "bwd", "fwd+bwd"}
        assert p["recompute"] in {"none", "selective", "full"}
        assert 0.1 < p["ms"] < 1000 and p["hidden"] % p["heads"] == 0 and p["ar"] in (0, 2)
    # the TE guide's summary CSV repeats its .out 'Mean time' lines rounded to 0.01 ms
    te = {p["row"]: p["ms"] for p in DOC["points"] if p["src"] == "TE-GS-PT"}
    csv = {"Baseline PyTorch": 48.28, "TE Unfused": 49.34, "TE Unfused + TE Attention": 35.71,
           "TE Unfused + TE Attention + FP8": 23.41, "TE Fused + TE Attention + FP8": 22.96,
           "TE TransformerLayer + FP8": 21.67}
    assert set(te) == set(csv) and all(abs(te[k] - v) <= 0.005 for k, v in csv.items())


def test_a100_row_reproduces_the_documented_factor() -> None:
    """Least squares on ln time over the six Table 4 times, divided by the A100 microbenchmark fit (0.840)."""
    pts = [p for p in DOC["points"] if p["src"] == fl.REFERENCE]
    assert len(pts) == 6
    gm = fl.best_gemm_max(pts, DOC["sources"][fl.REFERENCE])
    iso = fl.isolated_curve("a100-sxm-80g", "fp16")["gemm_max"]
    assert gm == pytest.approx(0.75, abs=0.002)
    assert gm / iso == pytest.approx(IN_LAYER_GEMM_FACTOR, abs=0.002)


def test_allreduce_time_from_the_nccl_table_by_hand() -> None:
    """GPT-3 layer, b 1, s 2048: 2048 x 12288 x 2 B = 50.33 MB, between the Azure ND H100 v5 rows 33554432 B
    (295.53 GB/s) and 67108864 B (361.78 GB/s); log-log: 295.53 x (361.78/295.53)^(ln(50.33e6/33.55e6)/ln 2)."""
    msg = 2048 * 12288 * 2
    bw = 295.53 * (361.78 / 295.53) ** (math.log(msg / 33554432) / math.log(2))
    p = next(q for q in DOC["points"] if q["src"] == "FUSER-TE" and q["row"] == "tp-forward")
    expected = 2 * 2 * 7 / 8 * msg / (bw * 1e9)  # two all-reduces, 2(n-1)/n x bytes / busbw
    assert fl.comm_time(p, DOC["sources"]["FUSER-TE"]) == pytest.approx(expected, rel=1e-9)
    assert 0.50e-3 < expected < 0.56e-3


def _gemm(m: float, n: float, k: float, count: float, gm: float, d0: float, peak: float, bw: float) -> float:
    eff = gm * m / (m + d0) * n / (n + d0) * k / (k + d0)
    return max(2 * m * n * k * count / (peak * eff), (m * k + k * n + m * n) * 2 * count / bw)


def test_te_baseline_model_time_by_hand() -> None:
    """TE guide 'Baseline PyTorch' (h 4096, a 32, f 16384, s 2048, b 8, t 1, unfused attention) on H100 SXM at
    gemm_max 0.687, from the formulas of scalemodel/cost/compute.py's docstring: T = 16384 tokens; GEMMs QKV
    T x 12288 x 4096, O T x 4096 x 4096, FC1 T x 16384 x 4096, FC2 T x 4096 x 16384; core 256 heads of
    2048 x 2048 x 128 and 2048 x 128 x 2048; memory (4 eb + 2 (3 eb + 1)) T h + 2 eb T f + (4 eb + 1) 256 s^2
    bytes, eb 2; fwd+bwd = 3 x forward."""
    peak, bw = 989.4e12, 3.35e12 * 0.88  # catalog h100-sxm: dense BF16 peak; HBM3 x memory fraction 0.88
    gm, d0 = 0.687, 87.0
    T, h, f, s = 16384.0, 4096.0, 16384.0, 2048.0
    gemms = sum(_gemm(T, n, k, 1, gm, d0, peak, bw) for n, k in ((3 * h, h), (h, h), (f, h), (h, f)))
    core = _gemm(s, s, 128, 256, gm, d0, peak, bw) + _gemm(s, 128, s, 256, gm, d0, peak, bw)
    mem = ((4 * 2 + 2 * (3 * 2 + 1)) * T * h + 2 * 2 * T * f + (4 * 2 + 1) * 256 * s * s) / bw
    by_hand = 3 * (gemms + core + mem)
    p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == "Baseline PyTorch")
    model = float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], gm)[()])
    assert model == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(47.45e-3, rel=0.002)  # the script's printed model time at its fit


def test_te_guide_is_out_of_reach_of_an_h100_pcie() -> None:
    """The guide does not name the H100 SKU. On h100-pcie (756 TFLOP/s BF16, 2.0 TB/s) even gemm_max 1 runs the
    BF16 rows slower than published, so the fit has no solution (NaN): the timings came from an SXM-class part."""
    pts = [p for p in DOC["points"] if p["src"] == "TE-GS-PT" and p["prec"] == "bf16"]
    assert math.isnan(fl.best_gemm_max(pts, DOC["sources"]["TE-GS-PT"], acc="h100-pcie"))
    assert np.isfinite(fl.best_gemm_max(pts, DOC["sources"]["TE-GS-PT"]))


def test_fuser_nsys_gemm_kernels_by_hand() -> None:
    """PR #4844's nsys rows: the three 256x128 nvjet instances (min 109663, med 384733, max 401214 ns) sum to
    3 x the average 298536.7 ns; with the 192x192 bias kernel (288415 ns) the four forward GEMMs of the GPT-3 layer
    per GPU at t 8 (2 x 2048 x (4608 x 12288 + 12288 x 1536 + 6144 x 12288 + 12288 x 6144) = 927.7 GFLOP) take
    1.184 ms, 784 TFLOP/s: faster than the model's isolated H100 curve (1.244 ms), let alone its in-layer one."""
    ns = DOC["sources"]["FUSER-TE-NSYS"]["gemm_kernels_ns"]
    assert sum(ns[:3]) == pytest.approx(3 * 298536.7, abs=1)
    g = fl.gemm_kernels(DOC)
    assert g["flops"] == pytest.approx(2 * 2048 * (4608 * 12288 + 12288 * 1536 + 2 * 6144 * 12288))
    assert g["measured"] == pytest.approx(1.184025e-3, rel=1e-6)
    assert g["measured"] < g["isolated"] < g["in_layer"]
    assert g["in_layer"] / g["isolated"] == pytest.approx(1 / IN_LAYER_GEMM_FACTOR, rel=0.02)  # d0 terms ~1
