"""Published grouped-GEMM (MoE expert GEMM) microbenchmarks beyond Transformer Engine's own H100 BF16 table, against the
model's price of each point (hardware/measurements/grouped_gemm.yaml; TE's multi-stream / CUTLASS points are checked in
tests/test_expert_quantize_kernels.py).

The price is worked out here by hand from the curve's formula, ``time = 2 m n k / (peak x gemm_max x m/(m+d0) x
n/(n+d0) x k/(k+d0))`` per group, on the isolated microbenchmark fit behind the catalog curve (catalog gemm_max / the
family's in-layer factor: a microbenchmark is one isolated call, not a layer) times the MXFP8 GEMM rate for mxfp8
points. The constants are written out and checked against the catalog, so a catalog change that moves a price fails
here first. Each band is the stated tolerance around the measured / priced ratio the yaml's ``evaluation`` records:

* DeepGEMM, H800, FP8 blockwise, one kernel (DEEPGEMM-README): the H100-SXM fp8 curve h800 borrows is within 6 %.
* DeepGEMM's k-grouped wgrad, H200, FP8 blockwise (DEEPGEMM-ISSUE107): 1.36-1.47x the h200-sxm curve's price.
* torch._scaled_grouped_mm, B200, MXFP8, one kernel (TORCHAO-MXFP8-B200): the B200 fp8 curve x 0.951 prices the
  forward and dgrad passes 10.7 % and 11.3 % faster than measured (measured / priced 1.12, 1.13), the 2D-2D wgrad
  pass 29 % faster (1.41). A recorded gap, not an agreement: PyTorch's kernel, not the cuBLAS one Transformer Engine
  runs, so nothing in the model is fitted to it (docs/model.md#expert-quantize-kernels).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from scalemodel.cost import compute
from scalemodel.specs import load_accelerator

ROOT = Path(__file__).resolve().parents[1]
DOC = yaml.safe_load((ROOT / "hardware" / "measurements" / "grouped_gemm.yaml").read_text())

#: (peak FP8 FLOP/s, isolated gemm_max, d0, recipe factor) by catalog accelerator, written out by hand:
#: h800 fp8 catalog 0.664 / Hopper's FP8 in-layer factor 0.936, d0 155; b200 fp8 catalog 0.714 / 0.936 (borrowed by
#: Blackwell), d0 366, MXFP8 rate 0.951 (TE-GEMMPROF-B300); h200-sxm fp8 catalog 0.626 / its own factor 0.992, d0 70.
CURVES = {"h800": (1979e12, 0.664 / 0.936, 155.0), "b200": (4500e12, 0.714 / 0.936, 366.0),
          "h200-sxm": (1979e12, 0.626 / 0.992, 70.0)}  # h200-sxm: its own sustained-basis fp8 curve and factor
MXFP8 = 0.951


def _points(src: str) -> list[dict]:  # type: ignore[type-arg]
    return [p for p in DOC["points"] if p["src"] == src]


def _priced_s(p: dict) -> float:  # type: ignore[type-arg]
    """By hand: the groups' summed time on the isolated curve at the (mean) per-group shape."""
    peak, gm, d0 = CURVES[p["acc"]]
    if p.get("recipe") == "mxfp8":
        gm *= MXFP8
    m, n, k, g = p["m"], p["n"], p["k"], p["groups"]
    eff = gm * m / (m + d0) * n / (n + d0) * k / (k + d0)
    return g * 2.0 * m * n * k / (peak * eff)


def _measured_s(p: dict) -> float:  # type: ignore[type-arg]
    return 2.0 * p["groups"] * p["m"] * p["n"] * p["k"] / (p["tflops"] * 1e12)


def test_hand_constants_are_the_catalogs() -> None:
    for name, (peak, gm, d0) in CURVES.items():
        acc = load_accelerator(name, overrides=[])
        gmax, half = acc.compute_efficiency.gemm("fp8")
        assert acc.peak("fp8") == peak
        assert gmax / compute.in_layer_gemm_factor(acc.family, "fp8", name) == pytest.approx(gm, rel=1e-12)
        assert half == d0
    assert compute.fp8_recipe_gemm_factor("blackwell", "mxfp8") == MXFP8


def test_points_are_well_formed() -> None:
    """Every point names a stored source, a catalog accelerator, and says which library ran it."""
    impls = {"multi_stream", "cutlass", "deepgemm", "torch_scaled_grouped_mm"}
    for p in DOC["points"]:
        assert p["src"] in DOC["sources"]
        assert p["impl"] in impls
        load_accelerator(p["acc"], overrides=[])
        if p["impl"] in ("multi_stream", "cutlass"):
            assert p["te"] is not None
        else:
            assert p["te"] is None and p["lib"] and p["recipe"] in ("blockwise", "mxfp8")
            assert p["split"] in ("uniform", "jagged")


def test_jagged_split_prices_as_the_mean() -> None:
    """The torchao points split 131072 tokens over 8 groups at random (multiples of 32). On the curve each group's time
    is 2 n k (m_i + d0) / (peak gm f(n) f(k)), so the summed price is 2 n k (M + G d0) / (...) whatever the split:
    compute.gemm_time summed over a random split equals that closed form and G x the price at the mean."""
    peak, gm, d0 = CURVES["b200"]
    gm *= MXFP8
    n, k, total, groups = 2048, 7168, 131072, 8
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1024, total - 1023, 32), groups - 1))  # every group >= 1024 rows: compute-bound
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    assert sum(sizes) == total and min(sizes) >= 32
    kw = dict(peak_flops=peak, memory_bandwidth=7.7e12, gemm_max=gm, gemm_half_dim=d0, memory_efficiency=0.85,
              elem_bytes=1.0)
    summed = sum(float(compute.gemm_time(m, n, k, **kw)) for m in sizes)
    closed = 2.0 * n * k * (total + groups * d0) / (peak * gm * n / (n + d0) * k / (k + d0))
    assert summed == pytest.approx(closed, rel=1e-9)
    assert summed == pytest.approx(groups * float(compute.gemm_time(total / groups, n, k, **kw)), rel=1e-9)


@pytest.mark.parametrize("p", _points("DEEPGEMM-README"), ids=lambda p: f"g{p['groups']}-{p['m']}x{p['n']}x{p['k']}")
def test_deepgemm_h800_fp8_is_on_the_curve(p: dict) -> None:  # type: ignore[type-arg]
    """Measured / priced time 0.965 / 1.033 / 0.948 / 1.014: the curve gives 1299 / 1254 / 1276 / 1231 TFLOP/s against
    the published 1346 / 1214 / 1346 / 1214."""
    ratio = _measured_s(p) / _priced_s(p)
    assert ratio == pytest.approx(1.0, abs=0.06)


@pytest.mark.parametrize(("pass_", "lo", "hi"), [("fwd", 1.10, 1.14), ("dgrad", 1.10, 1.15), ("wgrad", 1.38, 1.44)])
def test_torchao_b200_mxfp8_runs_slower_than_priced(pass_: str, lo: float, hi: float) -> None:
    """B200 MXFP8 grouped GEMM (torch._scaled_grouped_mm, DeepSeek-V3 expert shapes, 8 groups of 16384 rows on
    average): measured / priced 1.119 forward, 1.127 dgrad, 1.409 wgrad on the isolated curve x 0.951; on the catalog
    (in-layer) curve, 0.936 lower, 1.048 / 1.055 / 1.319."""
    (p,) = [q for q in _points("TORCHAO-MXFP8-B200") if q["pass"] == pass_]
    ratio = _measured_s(p) / _priced_s(p)
    assert lo < ratio < hi
    assert 1.0 < ratio * 0.936 < hi * 0.936  # the catalog price is still faster than the measurement


@pytest.mark.parametrize("p", _points("DEEPGEMM-ISSUE107"), ids=lambda p: f"g{p['groups']}-{p['m']}x{p['n']}x{p['k']}")
def test_deepgemm_h200_fp8_wgrad_runs_slower_than_priced(p: dict) -> None:  # type: ignore[type-arg]
    """DeepGEMM's k-grouped FP8 wgrad kernel on an H200 (issue #107's own columns): measured / priced 1.471 / 1.444 /
    1.405 / 1.358 / 1.465 on h200-sxm's isolated fp8 curve, where the same library's forward (m-grouped) kernel sits on
    the H100 curve within 6 %. With torchao's B200 wgrad (1.41) the one pass found slower than the curve in two
    libraries on two generations; Transformer Engine runs its experts' wgrad as ordinary per-expert cuBLAS GEMMs, whose
    rate in a layer the in-layer factor carries (docs/model.md#expert-quantize-kernels)."""
    assert p["pass"] == "wgrad"
    ratio = _measured_s(p) / _priced_s(p)
    assert 1.33 < ratio < 1.50
