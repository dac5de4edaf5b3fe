"""FP8 attention in an NVFP4 run and the NVFP4 recipe's options (fp4a28; docs/model.md#fp8-attention-casts,
#nvfp4-recipe-options).

Transformer Engine release_v2.8 (the MLPerf v5.1 NeMo containers' TE_REVISION): with ``NVTE_DPA_FP8_RECIPE
Float8CurrentScaling`` an NVFP4 autocast's DotProductAttention runs Q, K, V, O, dO, dQKV in FP8 current scaling
(dot_product_attention.py L616-635). ``FusedAttnFunc`` ``torch.cat``s the separate Q, K, V (utils.py
combine_and_quantize), quantizes them (amax pass + cast), gets O back in BF16 (NVTE_DPA_FP8CS_O_in_F16), quantizes
dO in the backward and gets dQ, dK, dV in BF16. NVFP4BlockScaling's ``disable_*`` options: stochastic rounding off
drops the dY casts' SR factor; RHT and 2D quantization off keep the bytes (amax kernel + nvfp4_quantize_transpose)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError

GB200_RATE = 8e12 * 0.85  # gb200: 8 TB/s x the catalog's memory efficiency 0.85
CS = 1.199  # the tensorwise (Float8CurrentScaling) cast-kernel factor on Blackwell (TE-GEMMPROF-B300)
NVFP4 = 1.409  # the nvfp4 cast-kernel factor
SR = 6.4 / 4.5  # TE-PR2412: round-to-nearest / stochastic-rounding rate of the row- and column-wise NVFP4 cast


def _job(precision: str, recipe: str | None = None, mb: int = 1, **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": 8 * mb, "micro_batch": mb, "seq_len": 8192,
                             **training}
    if recipe is not None:
        tr_in["fp8_recipe"] = recipe
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72", model="llama3-8b", sets=[], training=tr_in,
                                   strategy={"dp": 8})
    j = build_job(cl, wl, trs, straggler_cv=0.0)
    return j, grid_from_strategy(stg, trs, 8, j)


def _f(x: Any) -> float:
    return float(np.ravel(x)[0])


def test_cast_bytes_by_hand() -> None:
    """Llama 3 8B (32 heads of 128, 8 KV heads), b 2, s 8192, tp 1: T = 16384 tokens; Q, K, V 16384 x (4096 + 1024 +
    1024) = 100,663,296 elements, copied (2 + 2 bytes) and cast (2 + 2 + 1); dO 16384 x 4096 = 67,108,864 elements,
    cast (5). At tp 2 / cp 2 a quarter."""
    j, _ = _job("fp4")
    copy, fwd, bwd = compute.fp8_attention_cast_bytes(j.shape, micro_batch=2, seq_len=8192)
    assert _f(copy) == 402_653_184.0
    assert _f(fwd) == 503_316_480.0
    assert _f(bwd) == 335_544_320.0
    quarter = compute.fp8_attention_cast_bytes(j.shape, micro_batch=2, seq_len=8192, tp=2, cp=2)
    assert [_f(x) for x in quarter] == [402_653_184.0 / 4, 503_316_480.0 / 4, 335_544_320.0 / 4]


def test_mla_cast_bytes_by_hand() -> None:
    """DeepSeek-V3's MLA core (128 heads, Q K head dim 192, V 128; K and V per head), b 1, s 4096: Q, K, V 4096 x
    (128 x 192 + 128 x 192 + 128 x 128) = 4096 x 65536 elements (copy 4, casts 5 bytes), dO 4096 x 128 x 128 (5)."""
    cl, wl, trs, _ = build_specs(cluster="gb200-nvl72", model="deepseek-v3", sets=[], strategy={},
                                 training={"precision": "fp4", "global_batch": 8, "micro_batch": 1, "seq_len": 4096})
    sh = build_job(cl, wl, trs, straggler_cv=0.0).shape
    got = [_f(x) for x in compute.fp8_attention_cast_bytes(sh, micro_batch=1, seq_len=4096)]
    assert got == [4096 * 65536 * 4.0, 4096 * 65536 * 5.0, 4096 * 16384 * 5.0]


def test_job_casts_by_hand() -> None:
    """The same layer at b 1 on a GB200: forward 201.3 MB of copy at 6.8 TB/s plus 251.7 MB of casts at 1.199 x it
    (29.6 + 44.4 = 74.0 us), backward 167.8 MB of dO casts at 1.199 x (29.6 us); no stochastic rounding (FP8)."""
    j, g = _job("fp4", fp8_attention=True)
    f, b = layer_compute.fp8_attention_casts(j, g)
    want_f = 201_326_592.0 / GB200_RATE + CS * 251_658_240.0 / GB200_RATE
    want_b = CS * 167_772_160.0 / GB200_RATE
    assert _f(f) == pytest.approx(want_f, rel=1e-12)
    assert _f(b) == pytest.approx(want_b, rel=1e-12)
    assert _f(f) == pytest.approx(74.0e-6, rel=2e-3) and _f(b) == pytest.approx(29.6e-6, rel=2e-3)


def test_layer_casts_gain_exactly_the_attention_casts() -> None:
    """fp8_cast_per_layer with FP8 attention = without + the Q, K, V and dO casts (the linears' NVFP4 casts are
    unchanged)."""
    on, g = _job("fp4", fp8_attention=True)
    off, _ = _job("fp4")
    f1, b1 = layer_compute.fp8_cast_per_layer(on, g, 0.0)
    f0, b0 = layer_compute.fp8_cast_per_layer(off, g, 0.0)
    af, ab = layer_compute.fp8_attention_casts(on, g)
    assert _f(f1 - f0) == pytest.approx(_f(af), rel=1e-9)
    assert _f(b1 - b0) == pytest.approx(_f(ab), rel=1e-9)


@pytest.mark.parametrize(("recipe", "priced"), [("tensorwise", True), ("mxfp8", False), ("delayed", False)])
def test_which_fp8_recipes_price_the_attention_casts(recipe: str, priced: bool) -> None:
    """A tensorwise autocast's FP8 attention runs the same current-scaling path; delayed (O and dQKV in FP8) and
    MXFP8 attention are not read: no casts priced."""
    j, g = _job("fp8", recipe, fp8_attention=True)
    f, b = layer_compute.fp8_attention_casts(j, g)
    assert (_f(f) > 0.0) is priced and (_f(b) > 0.0) is priced
    if priced:
        assert _f(b) == pytest.approx(CS * 167_772_160.0 / GB200_RATE, rel=1e-12)


def test_fp4_attention_core_takes_the_per_tensor_fp8_ratio() -> None:
    """An fp4 run's FP8 core is priced with the per-tensor FP8 SDPA's measured time (current scaling), not MXFP8's."""
    j, _ = _job("fp4", fp8_attention=True)
    assert j.fp8_attention_ratios == compute.FP8_ATTENTION_TIME_RATIOS["gb200"]["fp8"][128]


def test_stochastic_rounding_off_by_hand() -> None:
    """gpt-style check on Llama 3 8B, one micro-batch of 8192 tokens: the backward casts are the linears' dY (QKV
    6144, proj 4096, FC1 2 x 14336, FC2 4096 per token) x 5.125 bytes at 1.409; with stochastic rounding (the default)
    x 6.4 / 4.5 more."""
    dy = 8192.0 * (6144 + 4096 + 2 * 14336 + 4096)
    off, g = _job("fp4", nvfp4_disable=["stochastic_rounding"])
    on, _ = _job("fp4")
    assert not off.nvfp4_stochastic_rounding and on.nvfp4_stochastic_rounding
    assert _f(layer_compute.fp8_cast_per_layer(off, g, 0.0)[1]) == pytest.approx(
        dy * 5.125 / GB200_RATE * NVFP4, rel=1e-9)
    assert _f(layer_compute.fp8_cast_per_layer(on, g, 0.0)[1]) == pytest.approx(
        dy * 5.125 / GB200_RATE * NVFP4 * SR, rel=1e-9)
    # the forward casts (inputs, weights) round to nearest either way
    assert _f(layer_compute.fp8_cast_per_layer(off, g, 0.0)[0]) == _f(layer_compute.fp8_cast_per_layer(on, g, 0.0)[0])


def test_rht_and_2d_off_price_nothing() -> None:
    """TE release_v2.8 without RHT: nvte_compute_amax_with_config (read 2) + nvfp4_quantize_transpose (read 2, write
    both copies), 5.125 bytes an element as priced; 2D weight blocks off: the same kernel (its template flag). The
    step does not move."""
    a, g = _job("fp4", nvfp4_disable=["rht", "2d_quantization"])
    b, _ = _job("fp4")
    assert a.nvfp4_stochastic_rounding
    fa, ba = layer_compute.fp8_cast_per_layer(a, g, 0.0)
    fb, bb = layer_compute.fp8_cast_per_layer(b, g, 0.0)
    assert (_f(fa), _f(ba)) == (_f(fb), _f(bb))


@pytest.mark.parametrize(("training", "needle"), [
    ({"precision": "bf16", "fp8_attention": True}, "training.fp8_attention: true needs precision fp8 or fp4"),
    ({"precision": "fp8", "nvfp4_disable": ["rht"]}, "training.nvfp4_disable: ['rht'] needs precision fp4"),
    ({"precision": "bf16", "nvfp4_disable": ["stochastic_rounding"]}, "needs precision fp4"),
    ({"precision": "fp4", "nvfp4_disable": ["rht", "rht"]}, "names an option twice"),
    ({"precision": "fp4", "nvfp4_disable": ["dither"]}, "one of 'rht', 'stochastic_rounding' or '2d_quantization'"),
    ({"precision": "fp4", "nvfp4_disable": "rht"}, "training.nvfp4_disable"),
])
def test_nonsense_is_refused(training: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError) as err:
        build_specs(cluster="gb200-nvl72", model="llama3-8b", sets=[],
                    training={"global_batch": 8, "micro_batch": 1, **training}, strategy={})
    assert needle in str(err.value)


def test_fp4_with_fp8_attention_and_the_vanilla_recipe_is_taken() -> None:
    _, _, trs, _ = build_specs(cluster="gb200-nvl72", model="llama3-8b", sets=[], strategy={},
                               training={"global_batch": 8, "micro_batch": 1, "precision": "fp4",
                                         "fp8_attention": True,
                                         "nvfp4_disable": ["rht", "stochastic_rounding", "2d_quantization"]})
    assert trs.fp8_attention and trs.nvfp4_disable == ["rht", "stochastic_rounding", "2d_quantization"]


def test_tensorwise_fp8_attention_without_a_measured_core_is_priced_not_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """On an accelerator without a measured FP8 / BF16 core (mi300x) a tensorwise run's fp8_attention still prices its
    Q, K, V and dO casts, so it is not warned as unpriced and the step grows; a delayed-scaling run's is warned (its
    FP8 attention casts are not modelled) and does not move."""
    base = ["predict", "-c", "mi300x-8", "-m", "gpt-1.7b", "-n", "64", "--precision", "fp8", "--json"]
    for recipe, priced in (("tensorwise", True), ("delayed", False)):
        args = [*base, "--set", f"training.fp8_recipe={recipe}"]
        off = json.loads(cli(*args).out)
        r = cli(*args, "--set", "training.fp8_attention=true")
        assert r.code == 0, r.err
        on = json.loads(r.out)
        warned = any(w.startswith("training.fp8_attention = true is not priced") for w in on["warnings"])
        assert warned is not priced, on["warnings"]
        assert (on["step_time_s"] > off["step_time_s"]) is priced
