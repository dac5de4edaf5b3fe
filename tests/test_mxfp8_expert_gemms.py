"""MXFP8 routed-expert GEMMs at the measured MXFP8 / BF16 grouped-GEMM speed-up (cost.compute
MXFP8_GROUPED_GEMM_SPEEDUPS, engine/layer_compute.py expert_gemm_kwargs; docs/model.md#mxfp8-expert-gemms).

Source: hardware/measurements/grouped_gemm.yaml MARIN-7282 (one GB200, Transformer Engine 2.16's JAX grouped_dense,
one cuBLASLt grouped GEMM of 64 groups x 4096 rows, operands pre-quantized; marin-community/marin@97cf4ac0b
bench_te_grouped_gb200.json): BF16 1.3120 / 1.2984 ms, MXFP8 0.8242 / 0.8813 ms at (k, n) = (2560, 1280) and
(1280, 2560). The tests recompute the speed-up from the YAML's points, price an MXFP8 MoE layer's experts by hand
from the formula (t = t_BF16,isolated / (R x f_fp8), capped by the run's MXFP8 curve), and check that dense layers,
other recipes and other families do not move and that the cap keeps the physics floor.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy

# GB200's catalog curves (hardware/accelerators/gb200.yaml) and peaks, as printed there
GB200 = {"bf16_peak": 2500e12, "fp8_peak": 5000e12, "bw": 8.0e12, "mem": 0.85,
         "gm16": 0.550, "d16": 175.0, "gm8": 0.496, "d8": 113.0}
F16, F8 = 0.847, 0.813  # Blackwell's in-layer factors (cost.compute.BLACKWELL_IN_LAYER_GEMM_FACTOR)


def _marin_points() -> dict[tuple[str, int, int], float]:
    data = load_yaml(ROOT / "hardware" / "measurements" / "grouped_gemm.yaml")
    return {(p["prec"], int(p["k"]), int(p["n"])): float(p["tflops"]) for p in data["points"]
            if p.get("src") == "MARIN-7282"}


def test_speedup_from_the_yamls_points_by_hand() -> None:
    """Both arms time the same 2 x 262144 x k x n FLOPs, so the time ratio is the TFLOP/s ratio: 1.5919 and 1.4733,
    each within 4 % of their geometric mean 1.5314, the constant (rounded to 3 decimals)."""
    pts = _marin_points()
    assert len(pts) == 4
    ratios = [pts[("fp8", k, n)] / pts[("bf16", k, n)] for k, n in ((2560, 1280), (1280, 2560))]
    assert ratios == pytest.approx([1.3119675 / 0.8241750, 1.2983675 / 0.8812640], rel=1e-5)
    assert ratios == pytest.approx([1.5919, 1.4733], abs=1e-4)
    gm = math.sqrt(ratios[0] * ratios[1])
    assert gm == pytest.approx(1.5314, abs=1e-4)
    assert all(abs(r / gm - 1) < 0.04 for r in ratios)
    assert compute.MXFP8_GROUPED_GEMM_SPEEDUPS == {"blackwell": round(gm, 3)} == {"blackwell": 1.531}
    assert compute.mxfp8_grouped_gemm_speedup("blackwell", "mxfp8") == 1.531
    for fam, rec in (("blackwell", "nvfp4"), ("blackwell", "tensorwise"), ("blackwell", ""), ("hopper", "mxfp8")):
        assert compute.mxfp8_grouped_gemm_speedup(fam, rec) is None


def test_the_measured_shapes_price_at_the_measured_time() -> None:
    """At MARIN-7282's shape (64 x 4096 x 2560 x 1280) the isolated curves: BF16 1340.6 us (measured 1312.0 /
    1298.4), the MXFP8 dense curve 691.6 us (measured 824.2 / 881.3, 1.19 / 1.27x; 583.3 us before the FP8 / BF16
    bound, docs/model.md#fp8-bf16-ratio); the expert price BF16 / 1.531 = 875.6 us, within the two MXFP8 timings, and
    above the cap."""
    m, n, k, count = 4096.0, 1280.0, 2560.0, 64.0
    def iso(peak: float, gmax: float, d0: float) -> float:
        return count * 2 * m * n * k / (peak * gmax * m / (m + d0) * n / (n + d0) * k / (k + d0))
    bf16 = iso(GB200["bf16_peak"], GB200["gm16"] / F16, GB200["d16"])
    mx = iso(GB200["fp8_peak"], GB200["gm8"] / F8 * 0.951, GB200["d8"])
    assert (bf16 * 1e6, mx * 1e6) == pytest.approx((1340.6, 691.6), abs=0.6)
    expert = bf16 / 1.531
    assert 824.2e-6 < expert < 881.3e-6
    assert expert > mx


def _gb200_kw() -> dict[str, Any]:
    """GB200's mxfp8 run's GEMM keywords (the catalog fp8 curve x 0.951) for one micro-batch of 4 x 4096."""
    return dict(micro_batch=4, seq_len=4096, peak_flops=GB200["fp8_peak"], memory_bandwidth=GB200["bw"],
                gemm_max=GB200["gm8"] * 0.951, gemm_half_dim=GB200["d8"], memory_efficiency=GB200["mem"],
                elem_bytes=2.0, flash_attention=True)


def _expert_kw(r: float = 1.531) -> dict[str, float]:
    """The formula's expert curve: R x the BF16 peak, the catalog 16-bit gemm_max x f_fp8 / f_16, its d0."""
    return {"expert_peak_flops": GB200["bf16_peak"] * r, "expert_gemm_max": GB200["gm16"] * F8 / F16,
            "expert_gemm_half_dim": GB200["d16"]}


# Qwen3-30B-A3B: h 2048, 128 experts of width 768, top-8, gated; ep 16 (8 local experts), tp 1
QWEN = dict(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, vocab=151936, gated_mlp=True)


def test_mxfp8_moe_layers_expert_time_is_bf16_time_over_the_ratio_by_hand() -> None:
    """One Qwen3-30B MoE layer on a GB200: with the expert curve the forward GEMM time rises by exactly (the two
    routed GEMMs at t_BF16,isolated / (1.531 x 0.813)) - (the same GEMMs on the MXFP8 curve), each computed here from
    2 m n k / (peak x eff); the backward by twice that; the attention block and router do not move."""
    sh = shape(moe_experts=128, moe_top_k=8, moe_ffn_hidden=768, **QWEN)
    kw = _gb200_kw()
    base = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw)
    new = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw, **_expert_kw())
    T, E, ep, top, fe, h = 4 * 4096.0, 128.0, 16.0, 8.0, 768.0, 2048.0
    m, local = ep * T * top / E, E / ep
    assert (m, local) == (16384.0, 8.0)

    r = m + 64.0  # the rows computed: m is a multiple of the 128-row tile, so half a tile more (expert-tile-padding)

    def t(n: float, k: float, peak: float, gmax: float, d0: float) -> float:
        eff = gmax * r / (r + d0) * n / (n + d0) * k / (k + d0)
        assert (r * k + k * n + r * n) * 2.0 / (GB200["bw"] * GB200["mem"]) < 2 * r * n * k / (peak * eff)
        return local * 2 * r * n * k / (peak * eff)
    shapes = ((2 * fe, h), (h, fe))  # FC1 (gate + up), FC2
    bf16_iso = sum(t(n, k, GB200["bf16_peak"], GB200["gm16"] / F16, GB200["d16"]) for n, k in shapes)
    expert = bf16_iso / (1.531 * F8)
    mxfp8 = sum(t(n, k, GB200["fp8_peak"], GB200["gm8"] * 0.951, GB200["d8"]) for n, k in shapes)
    assert expert > mxfp8  # the cap does not bind at this shape
    assert expert / mxfp8 == pytest.approx(1.26, abs=0.01)  # 1.858 (curves) x 0.847 / 0.813 / 1.531
    assert float(new.forward_gemm - base.forward_gemm) == pytest.approx(expert - mxfp8, rel=1e-9)
    assert float(new.forward - base.forward) == pytest.approx(expert - mxfp8, rel=1e-9)
    assert float(new.backward - base.backward) == pytest.approx(2 * (expert - mxfp8), rel=1e-9)
    assert float(new.attention_core) == float(base.attention_core)
    assert float(new.forward_flops) == float(base.forward_flops)
    # the same as the in-layer BF16 curve's time x f_16 / f_fp8 / R (the formula's other reading)
    bf16_in_layer = sum(t(n, k, GB200["bf16_peak"], GB200["gm16"], GB200["d16"]) for n, k in shapes)
    assert expert == pytest.approx(bf16_in_layer * F16 / F8 / 1.531, rel=1e-12)


def test_shared_experts_keep_the_run_curve() -> None:
    """The same Qwen3-30B MoE layer with one shared expert (width 768, run on every token): the expert curve moves the
    layer by exactly the routed GEMMs' difference, by hand as above (2 x 16384 x 8 local experts), not the shared
    expert's (dense shapes, the run's MXFP8 curve)."""
    kw = _gb200_kw()
    fe, h, local = 768.0, 2048.0, 8.0
    m = 16384.0 + 64.0  # 16 x 4 x 4096 x 8 / 128 rows per local expert, a tile multiple: + half a 128-row tile

    def t(n: float, k: float, peak: float, gmax: float, d0: float) -> float:
        return local * 2 * m * n * k / (peak * gmax * m / (m + d0) * n / (n + d0) * k / (k + d0))
    shapes = ((2 * fe, h), (h, fe))
    routed = (sum(t(n, k, GB200["bf16_peak"], GB200["gm16"] / F16, GB200["d16"]) for n, k in shapes) / (1.531 * F8)
              - sum(t(n, k, GB200["fp8_peak"], GB200["gm8"] * 0.951, GB200["d8"]) for n, k in shapes))
    sh = shape(moe_experts=128, moe_top_k=8, moe_ffn_hidden=768, moe_shared_experts=1, **QWEN)
    base = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw)
    new = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw, **_expert_kw())
    assert float(base.forward_flops) == float(new.forward_flops)
    assert float(new.forward_gemm - base.forward_gemm) == pytest.approx(routed, rel=1e-9)
    assert float(new.backward - base.backward) == pytest.approx(2 * routed, rel=1e-9)


def test_a_dense_layer_does_not_move() -> None:
    sh = shape(ffn_hidden=6144, **QWEN)
    kw = _gb200_kw()
    base = compute.layer_compute_time(sh, **kw)
    new = compute.layer_compute_time(sh, **kw, **_expert_kw())
    for f in ("forward", "backward", "recompute", "forward_gemm", "attention_core", "forward_flops"):
        assert float(getattr(new, f)) == float(getattr(base, f))


def test_the_cap_keeps_the_mxfp8_curve_and_the_physics_floor() -> None:
    """With an absurd speed-up (100x) the experts fall back to the run's MXFP8 curve, not below: the layer equals the
    one without the expert curve, and its GEMM time stays above the FLOPs at the fp8 peak."""
    sh = shape(moe_experts=128, moe_top_k=8, moe_ffn_hidden=768, **QWEN)
    kw = _gb200_kw()
    base = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw)
    fast = compute.layer_compute_time(sh, moe=True, ep=16, etp=1, **kw, **_expert_kw(100.0))
    for f in ("forward", "backward", "forward_gemm"):
        assert float(getattr(fast, f)) == float(getattr(base, f))
    assert float(fast.forward_gemm) >= float(fast.forward_flops) / GB200["fp8_peak"]
    # tiny experts (memory-bound): the expert curve's compute time cannot undercut the memory floor either
    tiny = shape(moe_experts=128, moe_top_k=1, moe_ffn_hidden=64, **QWEN)
    kw1 = dict(kw, micro_batch=1, seq_len=128)
    a = compute.layer_compute_time(tiny, moe=True, ep=1, etp=1, **kw1)
    b = compute.layer_compute_time(tiny, moe=True, ep=1, etp=1, **kw1, **_expert_kw(100.0))
    assert float(b.forward_gemm) == float(a.forward_gemm)


def _job(cluster: str, model: str, precision: str, recipe: str | None) -> tuple[Any, Any]:
    training: dict[str, Any] = {"precision": precision, "global_batch": 8, "micro_batch": 1, "seq_len": 4096}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    cl, wl, tr, stg = build_specs(cluster=cluster, model=model, sets=["model.layers=4"], training=training,
                                  strategy={"ep": 8} if model == "deepseek-v3" else {})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(stg, tr, 8, job)


@pytest.mark.parametrize("cluster", ["dgx-b200", "gb200-nvl72", "dgx-b300", "gb300-nvl72"])
def test_every_blackwell_mxfp8_run_gets_the_expert_curve(cluster: str) -> None:
    job, _ = _job(cluster, "deepseek-v3", "fp8", "mxfp8")
    cl, _, _, _ = build_specs(cluster=cluster, model="deepseek-v3", sets=[], training={"precision": "bf16"},
                              strategy={})
    peak16 = float(cl.accelerator.peak("bf16"))
    gm16, d16 = cl.accelerator.compute_efficiency.gemm("bf16")
    assert layer_compute.expert_gemm_kwargs(job) == pytest.approx(
        {"expert_peak_flops": peak16 * 1.531, "expert_gemm_max": gm16 * F8 / F16, "expert_gemm_half_dim": d16},
        rel=1e-12)


@pytest.mark.parametrize(("cluster", "precision", "recipe"), [
    ("gb200-nvl72", "fp8", "tensorwise"), ("gb200-nvl72", "fp4", None), ("gb200-nvl72", "bf16", None),
    ("dgx-h100", "fp8", "tensorwise")])
def test_other_recipes_and_families_get_none(cluster: str, precision: str, recipe: str | None) -> None:
    job, _ = _job(cluster, "deepseek-v3", precision, recipe)
    assert job.fp8_recipe == {"fp4": "nvfp4", "bf16": ""}.get(precision, recipe)  # NVFP4 experts: no measurement
    assert layer_compute.expert_gemm_kwargs(job) == {}


def test_a_dense_mxfp8_run_does_not_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense mxfp8 model on a GB200: every piece of its per-micro-batch compute is the same with the speed-up
    table emptied."""
    job, g = _job("gb200-nvl72", "llama3-8b", "fp8", "mxfp8")
    layers = np.ones(1)
    with_r = layer_compute._compute_per_microbatch(job, g, layers)
    monkeypatch.setattr(compute, "MXFP8_GROUPED_GEMM_SPEEDUPS", {})
    assert layer_compute.expert_gemm_kwargs(job) == {}
    without = layer_compute._compute_per_microbatch(job, g, layers)
    for k, v in with_r.items():
        assert np.array_equal(np.asarray(v), np.asarray(without[k])), k


def test_an_mxfp8_moe_run_is_slower_by_its_expert_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-V3 (4 layers, its first dense) on a GB200: the MoE run's compute rises with the expert curve and
    falls back exactly when the table is emptied."""
    job, g = _job("gb200-nvl72", "deepseek-v3", "fp8", "mxfp8")
    layers = np.ones(1)
    with_r = layer_compute._compute_per_microbatch(job, g, layers)
    monkeypatch.setattr(compute, "MXFP8_GROUPED_GEMM_SPEEDUPS", {})
    without = layer_compute._compute_per_microbatch(job, g, layers)
    assert float(with_r["forward"].ravel()[0]) > float(without["forward"].ravel()[0])
    assert float(with_r["backward"].ravel()[0]) > float(without["backward"].ravel()[0])


def test_expert_shape_note_prices_by_hand() -> None:
    """docs/model.md, 'MXFP8 GEMM rate at expert shapes' (review22a: its MXFP8 prices had stayed at the fp8 levels
    before gbfp8_21's FP8 / BF16 bound, 6.905 ms and 1.345 ms, and bw22 scaled the stale 1.345 to 1.488; repriced on
    the merge of bw22 with h100cmp22's Hopper factors 0.847 / 0.900, Blackwell's FP8 0.813). By hand,
    2 m n k / (peak x gemm_max x prod d / (d + d0)), every GEMM compute-bound, the curve symmetric in (m, n, k) so
    dgrad and wgrad price as fprop: (1) Transformer Engine's 12 GEMMs of a 5B layer (M 15872, h 4096, f 16384) on
    b300's isolated curves (catalog / 0.847, 175; catalog / 0.813 x the MXFP8 rate 0.951, 366): 13.014 ms BF16,
    7.109 ms MXFP8, against the measured 12.758 / 7.161 (+2.0 %, -0.7 %), MXFP8 / BF16 1.83 priced, 1.78 measured;
    (2) Qwen3-30B's six expert GEMMs a layer pass on GB200 (m 16384 rows per expert, 8 local experts, FC1 n 1536 k
    2048, FC2 n 2048 k 768) on the in-layer curves: 3.410 ms BF16, 1.836 ms MXFP8, 1.86x (with Hopper's FP8 factor
    0.900 in place of Blackwell's 0.813: 1.658 ms, 2.06x; 3.380 / 1.764 ms, 1.92x at bw22's 0.855 / 0.846 and
    1.595 ms, 2.12x with Hopper's 0.936 before bw22; the 1.858 'curves' of the layer test above)."""
    b300 = {"bf16_peak": 2250e12, "fp8_peak": 4500e12, "gm16": 0.593, "d16": 175.0, "gm8": 0.588, "d8": 366.0}
    ce = build_specs(cluster="dgx-b300", model="gpt-7.5b", sets=[], training={}, strategy={})[0].accelerator
    assert (ce.compute_efficiency.gemm("bf16"), ce.compute_efficiency.gemm("fp8")) == (  # b300.yaml, as printed
        (b300["gm16"], b300["d16"]), (b300["gm8"], b300["d8"]))

    def ms(gemms: Any, peak: float, gmax: float, d0: float, count: float = 1.0) -> float:
        return 1e3 * 3 * count * sum(2 * m * n * k / (peak * gmax * m / (m + d0) * n / (n + d0) * k / (k + d0))
                                     for m, n, k in gemms)
    te = ((15872, 12288, 4096), (15872, 4096, 4096), (15872, 16384, 4096), (15872, 4096, 16384))
    bf16 = ms(te, b300["bf16_peak"], b300["gm16"] / F16, b300["d16"])
    mx = ms(te, b300["fp8_peak"], b300["gm8"] / F8 * 0.951, b300["d8"])
    assert (bf16, mx) == (pytest.approx(13.014, abs=0.001), pytest.approx(7.109, abs=0.001))
    assert (bf16 / 12.758 - 1, mx / 7.161 - 1) == (pytest.approx(0.020, abs=5e-4), pytest.approx(-0.007, abs=5e-4))
    assert (round(bf16 / mx, 2), round(12.758 / 7.161, 2)) == (1.83, 1.78)
    qwen = ((16384, 1536, 2048), (16384, 2048, 768))
    q16 = ms(qwen, GB200["bf16_peak"], GB200["gm16"], GB200["d16"], 8)
    q8 = ms(qwen, GB200["fp8_peak"], GB200["gm8"] * 0.951, GB200["d8"], 8)
    assert (q16, q8, q16 / q8) == (pytest.approx(3.410, abs=0.001), pytest.approx(1.836, abs=0.001),
                                   pytest.approx(1.86, abs=0.005))
    q8_hopper = ms(qwen, GB200["fp8_peak"], GB200["gm8"] / F8 * 0.900 * 0.951, GB200["d8"], 8)
    assert (q8_hopper, q16 / q8_hopper) == (pytest.approx(1.658, abs=0.001), pytest.approx(2.06, abs=0.005))
    doc = " ".join((ROOT / "docs" / "model.md").read_text(encoding="utf-8").split())
    note = doc.split("MXFP8 GEMM rate at expert shapes", 1)[1][:1500]
    for text in ("13.014 ms BF16 and 7.109 ms MXFP8", "+2.0 % and -0.7 %", "1.83 priced against 1.78 measured",
                 "3.410 ms BF16 and 1.836 ms MXFP8 a layer pass, 1.86x", "1.658 ms, 2.06x"):
        assert text in note, text
