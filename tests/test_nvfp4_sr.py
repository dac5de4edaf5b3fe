"""Stochastic rounding of NVFP4's output-gradient casts (cost.compute.STOCHASTIC_ROUNDING_CAST_FACTORS,
engine.layer_compute._cast_seconds ``gradient``; docs/model.md#nvfp4-stochastic-rounding).

NVFP4BlockScaling rounds dY stochastically (``fp4_quant_bwd_grad``), inputs and weights to nearest (TE v2.16
common/recipe/__init__.py). TE pull request #2412 times its NVFP4 cast of BF16 on a B300, row- and column-wise: round
to nearest 6.4 TB/s, stochastic rounding 4.5 TB/s; the dY casts take 6.4 / 4.5 on top of the measured NVFP4 cast
factor (1.409)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute, pipeline_ranks
from scalemodel.engine.job import build_job, grid_from_strategy

SR = 6.4 / 4.5  # TE-PR2412, B300: RN / SR throughput of the row- and column-wise NVFP4 cast
GB200_RATE = 8e12 * 0.85  # gb200: 8 TB/s x the catalog's memory efficiency 0.85


def test_factor_from_the_pull_request() -> None:
    assert compute.stochastic_rounding_cast_factor("blackwell", "nvfp4") == pytest.approx(1.4222, abs=1e-4)
    assert compute.stochastic_rounding_cast_factor("blackwell", "nvfp4") == pytest.approx(SR, rel=1e-12)


@pytest.mark.parametrize(("family", "recipe"), [("blackwell", "mxfp8"), ("blackwell", "tensorwise"),
                                                ("blackwell", "delayed"), ("blackwell", ""), ("hopper", "nvfp4")])
def test_no_factor_without_stochastic_rounding(family: str, recipe: str) -> None:
    """MXFP8 and the per-tensor recipes round to nearest; NVFP4 exists on Blackwell only."""
    assert compute.stochastic_rounding_cast_factor(family, recipe) == 1.0


def _job(precision: str, recipe: str | None = None, **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": 8, "micro_batch": 1, **training}
    if recipe is not None:
        tr_in["fp8_recipe"] = recipe
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72", model="gpt-7.5b", sets=[], training=tr_in, strategy={})
    j = build_job(cl, wl, trs, straggler_cv=0.0)
    return j, grid_from_strategy(stg, trs, 8, j)


def test_cast_seconds_by_hand() -> None:
    """1 GB of NVFP4 gradient casts on a GB200: 1e9 / 6.8e12 x 1.409 x 1.4222 = 294.7 us; the same bytes of inputs
    207.2 us; MXFP8's gradient casts keep 1.282 (188.5 us)."""
    fp4, _ = _job("fp4")
    mx, _ = _job("fp8", "mxfp8")
    assert float(layer_compute._cast_seconds(fp4, 1e9, gradient=True)) == pytest.approx(
        1e9 / GB200_RATE * 1.409 * SR, rel=1e-12)
    assert float(layer_compute._cast_seconds(fp4, 1e9, gradient=True)) == pytest.approx(294.7e-6, rel=1e-3)
    assert float(layer_compute._cast_seconds(fp4, 1e9)) == pytest.approx(1e9 / GB200_RATE * 1.409, rel=1e-12)
    assert float(layer_compute._cast_seconds(mx, 1e9, gradient=True)) == pytest.approx(1e9 / GB200_RATE * 1.282,
                                                                                        rel=1e-12)


def test_a_layers_backward_casts_by_hand() -> None:
    """gpt-7.5b (h 4096, MHA, s 2048) on GB200, NVFP4, DP 8, one micro-batch a step: the backward quantizes the output
    gradient of each linear, QKV (3h), proj (h), FC1 (f, or 2f gated) and FC2 (h) per token, 2 x 2 + 2 x 0.5625 =
    5.125 bytes an element, at 1.409 x 1.4222 over 8 TB/s x 0.85; the forward's casts (inputs, weights) take no SR."""
    j, g = _job("fp4")
    sh = j.shape
    h, f = float(np.ravel(sh.hidden)[0]), float(np.ravel(sh.ffn_hidden)[0])
    up = 2.0 if bool(np.ravel(sh.gated_mlp)[0]) else 1.0
    assert float(np.ravel(pipeline_ranks.microbatches(g))[0]) == 1.0 and j.fp8_recipe == "nvfp4"
    T = 2048.0
    dy = T * (3 * h + h + up * f + h)
    want_b = dy * 5.125 / GB200_RATE * 1.409 * SR
    got_f, got_b = layer_compute.fp8_cast_per_layer(j, g, 0.0)
    assert float(np.ravel(got_b)[0]) == pytest.approx(want_b, rel=1e-9)
    # forward: X of QKV, proj, FC1, FC2 (T (h + h + h + f)) and the weights once (one micro-batch), round to nearest
    x = T * (h + h + h + f)
    w = h * 3 * h + h * h + up * h * f + f * h
    assert float(np.ravel(got_f)[0]) == pytest.approx((x + w) * 5.125 / GB200_RATE * 1.409, rel=1e-9)
