"""FP8 attention (training.fp8_attention): the cuDNN FP8 / MXFP8 SDPA backward of a sliding-window layer works
through the causal keys of the whole sequence (cost.compute.layer_compute_time ``fp8_attention``,
Shape.window_blind_keys; docs/model.md#fp8-attention)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost import transformer
from scalemodel.cost.compute import layer_compute_time
from scalemodel.errors import InputError  # a spec built in Python refuses as the API does (review25d)
from scalemodel.specs.training import TrainingSpec

GB200_BF16_PEAK = 2500e12  # hardware/accelerators/gb200.yaml, dense BF16

#: NVIDIA/cudnn-frontend@3929da2 benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/gpt_oss_20260424_100011.csv
#: (GB200, cuDNN 9.22, top_left causal with sliding window 128, b 2, 128 query / 128 KV heads, d 64, non-deterministic
#: backward): backward milliseconds by s.
MXFP8_BWD_MS = {2048: 0.642, 4096: 2.080, 8192: 7.427, 16384: 27.940}
BF16_BWD_MS = {2048: 0.237, 4096: 0.465, 8192: 0.911, 16384: 1.818}


def _bwd_curve() -> dict:  # type: ignore[type-arg]
    c = load_yaml(ROOT / "hardware" / "accelerators" / "gb200.yaml")
    return c["attention_efficiency"]["cudnn"]["bwd"]  # type: ignore[no-any-return]


def _hand_bwd_ms(s: int, keys: float, bh: int = 256, d: int = 64) -> float:
    """The fused backward written out: 2.5 x 2 s k (2 d) b h FLOPs over peak x attn_max x k/(k + k0) x d/(d + d0)."""
    c = _bwd_curve()
    eff = c["attn_max"] * keys / (keys + c["seq_half"]) * d / (d + c["head_half"])
    return 2.5 * 2.0 * s * keys * 2 * d * bh / (GB200_BF16_PEAK * eff) * 1e3


def _window_shape(window: int = 128, pattern: int = 0) -> transformer.Shape:
    return transformer.shape(layers=2, hidden=8192, heads=128, kv_heads=128, head_dim=64, ffn_hidden=8192,
                             vocab=1000, gated_mlp=True, sliding_window=window, sliding_window_pattern=pattern)


def test_window_blind_keys_are_the_causal_keys_of_the_whole_sequence() -> None:
    sh = _window_shape()
    assert float(sh.window_blind_keys(4096)) == pytest.approx(4097 / 2)
    # the window's own causal keys: 128 - 128 x 127 / (2 x 4096)
    assert float(sh.causal_keys(4096)) == pytest.approx(128 - 128 * 127 / 8192)
    no_window = _window_shape(window=0)
    assert float(no_window.window_blind_keys(4096)) == pytest.approx(float(no_window.causal_keys(4096)))
    bidir = transformer.shape(layers=2, hidden=1024, heads=16, vocab=1000, sliding_window=128, causal=False)
    assert float(bidir.window_blind_keys(512)) == 512.0


def _layer(sh: transformer.Shape, s: int, fp8: bool) -> float:
    c = load_yaml(ROOT / "hardware" / "accelerators" / "gb200.yaml")["attention_efficiency"]
    curve = {d: {k: float(c["cudnn"][d][k]) for k in ("attn_max", "seq_half", "head_half")} for d in ("fwd", "bwd")}
    lt = layer_compute_time(sh, micro_batch=2, seq_len=s, peak_flops=GB200_BF16_PEAK, memory_bandwidth=8e12,
                            gemm_max=0.623, gemm_half_dim=113.0, flash_attention=True,
                            attention_fwd=curve["fwd"], attention_bwd=curve["bwd"], fp8_attention=fp8)
    return float(lt.backward)


@pytest.mark.parametrize("s", [2048, 4096, 8192])
def test_fp8_backward_adds_the_window_blind_core_and_nothing_else(s: int) -> None:
    """All layers local (pattern 0), b 2 x 128 heads: the layer backward grows by exactly the fused backward over
    (s + 1)/2 keys minus the one over the window's keys, each computed by hand; forward unchanged."""
    sh = _window_shape()
    window_keys = 128 - 128 * 127 / (2 * s)
    expect_ms = _hand_bwd_ms(s, (s + 1) / 2) - _hand_bwd_ms(s, window_keys)
    assert (_layer(sh, s, True) - _layer(sh, s, False)) * 1e3 == pytest.approx(expect_ms, rel=1e-9)


def test_no_window_no_change() -> None:
    sh = _window_shape(window=0)
    assert _layer(sh, 4096, True) == _layer(sh, 4096, False)


def test_half_the_layers_local_moves_half() -> None:
    """GPT-OSS's pattern 2 (every 2nd layer global): the per-layer mean backward grows by half the all-local step."""
    s = 4096
    full = _layer(_window_shape(), s, True) - _layer(_window_shape(), s, False)
    half = _layer(_window_shape(pattern=2), s, True) - _layer(_window_shape(pattern=2), s, False)
    assert half == pytest.approx(0.5 * full, rel=1e-9)


def test_priced_fp8_backward_against_cudnn_gb200_sweep() -> None:
    """The published GB200 cuDNN 9.22 sweep of this shape: the MXFP8 backward at the training length (s 4096) is
    within 10 % of the window-blind pricing and more than twice the window pricing; its time grows as s^2 (x3.6 per
    doubling at s >= 4096, the pricing x3.2), the BF16 backward's as s (x2.0)."""
    s = 4096
    blind = _hand_bwd_ms(s, (s + 1) / 2)
    windowed = _hand_bwd_ms(s, 128 - 128 * 127 / (2 * s))
    assert blind == pytest.approx(MXFP8_BWD_MS[s], rel=0.10)
    assert MXFP8_BWD_MS[s] > 2.0 * windowed
    for a, b in ((4096, 8192), (8192, 16384)):
        measured = MXFP8_BWD_MS[b] / MXFP8_BWD_MS[a]
        priced = _hand_bwd_ms(b, (b + 1) / 2) / _hand_bwd_ms(a, (a + 1) / 2)
        assert 3.0 < priced < 4.0 and 3.0 < measured < 4.0
        assert math.isclose(BF16_BWD_MS[b] / BF16_BWD_MS[a], 2.0, rel_tol=0.03)
    # every length 2048-16384 within -25 % / +10 % of the window-blind pricing (the model is a little fast at long s)
    for length, ms in MXFP8_BWD_MS.items():
        ratio = _hand_bwd_ms(length, (length + 1) / 2) / ms
        assert 0.75 < ratio < 1.10, (length, ratio)


def test_fp8_attention_needs_fp8() -> None:
    with pytest.raises(InputError, match="fp8_attention: true needs precision fp8"):
        TrainingSpec(precision="bf16", fp8_attention=True)
    assert TrainingSpec(precision="fp8", fp8_attention=True).fp8_attention


def test_megatron_fp8_dot_product_attention_flag(tmp_path: Path) -> None:
    """--fp8-dot-product-attention sets training.fp8_attention with --fp8-format; without one it is listed unused."""
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "a.args"
    f.write_text("--fp8-format hybrid --fp8-recipe mxfp8 --fp8-dot-product-attention\n")
    assert read_strategy_file(f).training == {"precision": "fp8", "fp8_recipe": "mxfp8", "fp8_attention": True}
    f.write_text("--fp8-dot-product-attention\n")
    sf = read_strategy_file(f)
    assert "fp8_attention" not in sf.training and any("without --fp8-format" in u for u in sf.unused)

    for given in ("--fp8-dot-product-attention=true", "--fp8-dot-product-attention false"):
        f.write_text(f"--fp8-format hybrid {given}\n")  # a switch, as the forks' scripts pass it: no value
        with pytest.raises(InputError, match="a switch takes no value"):
            read_strategy_file(f)
