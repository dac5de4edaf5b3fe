"""MXFP8 GEMMs at their own measured rate (cost.compute.FP8_RECIPE_GEMM_FACTORS, engine/job.py build_job).

Source, read at NVIDIA/TransformerEngine@d0067d0da6 docs/examples/gemm_profiling/gemm_profiling.rst
(hardware/measurements/gemm.yaml TE-GEMMPROF-B300): one B300 SXM6 AC, the 12 GEMMs of one layer of a 5B config
(h 4096, f 16384, M 15872 tokens), ``--pre-quantize`` (GEMM kernels only), per-pass sums in ms:

    pass     FP8 current scaling   MXFP8
    fprop    2.158                 2.365
    dgrad    2.329                 2.397
    wgrad    2.325                 2.400
    layer    6.812                 7.161

The tests recompute the factor from these numbers, check the one-factor design against them, and check the step
model's mxfp8 run against a hand count of its fp8 GEMMs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import load_yaml
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy

FP8_CS = {"fprop": 2.158, "dgrad": 2.329, "wgrad": 2.325}
MXFP8 = {"fprop": 2.365, "dgrad": 2.397, "wgrad": 2.400}


def _job(cluster: str, precision: str, recipe: str | None = None) -> tuple[Any, Any]:
    training: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    cl, wl, tr, stg = build_specs(cluster=cluster, model="gpt-7.5b", sets=[], training=training, strategy={})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(stg, tr, 1, job)


def test_factor_from_the_guide_by_hand() -> None:
    """6.812 / 7.161 = 0.9513 (the page's per-layer totals; the passes add up to them within rounding)."""
    assert sum(FP8_CS.values()) == pytest.approx(6.812, abs=1e-9)
    assert sum(MXFP8.values()) == pytest.approx(7.162, abs=1e-9)  # 7.161 printed: per-pass values rounded
    assert 6.812 / 7.161 == pytest.approx(0.95126, abs=1e-5)
    assert compute.FP8_RECIPE_GEMM_FACTORS["blackwell"]["mxfp8"] == round(6.812 / 7.161, 3) == 0.951


def test_one_factor_fits_mxfp8s_passes_better_than_two() -> None:
    """The fp8 curve is symmetric in (m, n, k) and each pass's four GEMMs are permutations of the fprop shapes, so the
    curve prices the three passes alike: 6.812 / 3 each, fitted to the per-tensor total. The per-pass gap is the
    per-tensor kernel's (fprop 7-8 % faster than dgrad / wgrad; MXFP8's passes within 1.5 %). On that symmetric price,
    one factor puts every MXFP8 pass within 1 % of its measured time; per-direction factors (forward from fprop,
    backward from dgrad + wgrad) put fprop 5 % slow and the backward 2.4 % fast."""
    per_pass = 6.812 / 3
    r = compute.fp8_recipe_gemm_factor("blackwell", "mxfp8")
    for p in MXFP8:
        assert abs(per_pass / r / MXFP8[p] - 1) < 0.01
    r_fwd = FP8_CS["fprop"] / MXFP8["fprop"]
    r_bwd = (FP8_CS["dgrad"] + FP8_CS["wgrad"]) / (MXFP8["dgrad"] + MXFP8["wgrad"])
    assert (r_fwd, r_bwd) == pytest.approx((0.9125, 0.9702), abs=1e-4)
    assert per_pass / r_fwd / MXFP8["fprop"] - 1 == pytest.approx(0.052, abs=0.001)
    assert 2 * per_pass / r_bwd / (MXFP8["dgrad"] + MXFP8["wgrad"]) - 1 == pytest.approx(-0.024, abs=0.001)
    assert MXFP8["fprop"] / FP8_CS["fprop"] > 1.09 > 1.04 > max(MXFP8[p] / FP8_CS[p] for p in ("dgrad", "wgrad"))


@pytest.mark.parametrize("cluster", ["dgx-b200", "gb200-nvl72", "dgx-b300", "gb300-nvl72"])
def test_every_blackwell_part_prices_mxfp8_on_the_scaled_fp8_curve(cluster: str) -> None:
    """B300 measured, B200 / GB200 / GB300 borrow: an mxfp8 job's gemm_max is the fp8 curve's x 0.951; tensorwise and
    delayed keep the fp8 curve; the BF16 attention core and logits curves do not move."""
    mx, _ = _job(cluster, "fp8", "mxfp8")
    tw, _ = _job(cluster, "fp8", "tensorwise")
    dl, _ = _job(cluster, "fp8", "delayed")
    cl, _, _, _ = build_specs(cluster=cluster, model="gpt-7.5b", sets=[], training={"precision": "fp8"}, strategy={})
    gm = float(cl.accelerator.compute_efficiency.fp8.gemm_max)
    assert cl.accelerator.family == "blackwell"
    assert "FP8_RECIPE_GEMM_FACTORS" in cl.accelerator.compute_efficiency.fp8.source  # the YAML says so
    assert ("BORROWED here" in cl.accelerator.compute_efficiency.fp8.source) == (cluster != "dgx-b300")
    assert mx.gemm_max == pytest.approx(gm * 0.951, rel=1e-12)
    assert mx.fp8_recipe_gemm_factor == 0.951
    assert tw.gemm_max == dl.gemm_max == pytest.approx(gm, rel=1e-12)
    assert tw.fp8_recipe_gemm_factor == dl.fp8_recipe_gemm_factor == 1.0
    assert (mx.gemm_half_dim, mx.attention_gemm_max, mx.logits_gemm_max) == (
        tw.gemm_half_dim, tw.attention_gemm_max, tw.logits_gemm_max)


@pytest.mark.parametrize(("cluster", "precision", "recipe"), [
    ("dgx-h100", "fp8", "tensorwise"), ("dgx-h100", "fp8", None), ("dgx-b200", "bf16", None),
    ("hgx-h200", "fp8", "delayed")])
def test_other_runs_keep_their_curve(cluster: str, precision: str, recipe: str | None) -> None:
    job, _ = _job(cluster, precision, recipe)
    cl, _, _, _ = build_specs(cluster=cluster, model="gpt-7.5b", sets=[], training={"precision": precision},
                              strategy={})
    assert job.fp8_recipe_gemm_factor == 1.0
    assert job.gemm_max == pytest.approx(cl.accelerator.compute_efficiency.gemm(precision)[0], rel=1e-12)
    assert compute.fp8_recipe_gemm_factor("hopper", "mxfp8") == compute.fp8_recipe_gemm_factor("blackwell", "") == 1.0


def _hand_fp8_gemm_forward(job: Any, gemm_max: float) -> float:
    """One gpt-7.5b layer's forward weight GEMMs on one GPU (t 1), counted by hand from the shape:
    T x 3h x h (QKV, MHA), T x h x h (proj), T x f x h and T x h x f (MLP, not gated), each 2 m n k FLOPs at
    peak x gemm_max x prod(d / (d + d0)); all compute-bound (checked)."""
    sh = job.shape
    T, h, f = float(job.seq_len), float(sh.hidden), float(sh.ffn_hidden)
    assert int(sh.kv_heads) == int(sh.heads) and not bool(sh.gated_mlp)
    d0 = job.gemm_half_dim
    total = 0.0
    for m, n, k in ((T, 3 * h, h), (T, h, h), (T, f, h), (T, h, f)):
        eff = gemm_max * m / (m + d0) * n / (n + d0) * k / (k + d0)
        t = 2 * m * n * k / (job.peak_flops * eff)
        assert (m * k + k * n + m * n) * job.elem_bytes / (job.memory_bandwidth * job.memory_efficiency) < t
        total += t
    return total


def test_mxfp8_layer_slower_by_its_gemm_share_by_hand() -> None:
    """One B200, one layer, one micro-batch. The mxfp8 job against itself with the factor undone: the forward is
    slower by the layer's fp8 GEMM time x (1 / 0.951 - 1), the backward (its GEMMs twice the forward's) by twice
    that; the BF16 core, the casts and the memory-bound work do not move."""
    job, g = _job("dgx-b200", "fp8", "mxfp8")
    layers = np.ones(1)
    mx = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    undone = replace(job, gemm_max=job.gemm_max / 0.951, fp8_recipe_gemm_factor=1.0)
    per_tensor_rate = layer_compute._compute_per_microbatch(undone, g, layers, logits_on_stage=False)
    gemm_fp8 = _hand_fp8_gemm_forward(job, undone.gemm_max)
    extra = gemm_fp8 * (1 / 0.951 - 1)
    assert float((mx["forward"] - per_tensor_rate["forward"]).ravel()[0]) == pytest.approx(extra, rel=1e-9)
    assert float((mx["backward"] - per_tensor_rate["backward"]).ravel()[0]) == pytest.approx(2 * extra, rel=1e-9)
    assert float((mx["attention_core"] - per_tensor_rate["attention_core"]).ravel()[0]) == 0.0


def test_mxfp8_against_tensorwise_is_the_gemm_share_plus_the_casts() -> None:
    """The same B200 layer with tensorwise: mxfp8 - tensorwise = the GEMM share above + the recipes' cast bytes
    (cost.compute.fp8_quantize_bytes, hand-checked in tests/test_fp8_casts.py) at HBM speed, each recipe's times its
    measured Blackwell cast-kernel factor (1.282 mxfp8, 1.199 tensorwise: tests/test_cast_kernel_rate.py)."""
    mxj, g = _job("dgx-b200", "fp8", "mxfp8")
    twj, g_tw = _job("dgx-b200", "fp8", "tensorwise")
    layers = np.ones(1)
    mx = layer_compute._compute_per_microbatch(mxj, g, layers, logits_on_stage=False)
    tw = layer_compute._compute_per_microbatch(twj, g_tw, layers, logits_on_stage=False)
    extra = _hand_fp8_gemm_forward(twj, twj.gemm_max) * (1 / 0.951 - 1)
    kw = dict(micro_batch=1, seq_len=mxj.seq_len, transpose_copy=False)
    f_mx, b_mx, w_mx = compute.fp8_quantize_bytes(mxj.shape, recipe="mxfp8", **kw)
    f_tw, b_tw, w_tw = compute.fp8_quantize_bytes(twj.shape, recipe="tensorwise", **kw)
    bw = mxj.memory_bandwidth * mxj.memory_efficiency
    d_fwd = float((mx["forward"] - tw["forward"]).ravel()[0])
    d_bwd = float((mx["backward"] - tw["backward"]).ravel()[0])
    assert d_fwd == pytest.approx(extra + (1.282 * float(f_mx + w_mx) - 1.199 * float(f_tw + w_tw)) / bw, rel=1e-9)
    assert d_bwd == pytest.approx(2 * extra + (1.282 * float(b_mx) - 1.199 * float(b_tw)) / bw, rel=1e-9)
    # the GEMM share is what makes the mxfp8 layer slower: 5.1 % of its fp8 GEMM time, forward and backward
    assert extra / _hand_fp8_gemm_forward(twj, twj.gemm_max) == pytest.approx(0.0515, abs=1e-4)


def test_gemm_yaml_records_the_source_as_applied() -> None:
    """The measurement behind the factor is recorded with its provenance (hardware/measurements/gemm.yaml)."""
    root = Path(__file__).resolve().parents[1]
    src = load_yaml(root / "hardware" / "measurements" / "gemm.yaml")["sources"]
    te = src["TE-GEMMPROF-B300"]
    assert "d0067d0da6" in te["url"] and te["mxfp8"].startswith("APPLIED") and "6.812 / 7.161" in te["mxfp8"]
    assert all("not_used" in src[k] for k in ("FI-MXFP8-B200", "AO-TRAIN-B200"))
