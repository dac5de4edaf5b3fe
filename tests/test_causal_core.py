"""Causal masking and the backward of the fused (flash) attention core, checked against hand counts.

- A fused kernel computes only the score blocks the causal mask leaves (FlashAttention-2, arXiv 2307.08691
  §3.1.1; the FlashAttention benchmark halves the causal FLOP count): query i (from 0) attends min(i + 1, w) keys.
- Its backward recomputes S = Q K^T and runs dV, dP, dQ, dK: five GEMMs against the forward's two, 2.5 x
  (FlashAttention-2 Algorithm 2; the benchmark counts 2.5 x the forward for the backward).
- Unfused attention (Megatron's softmax over the full score matrix) computes every entry: no change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.cost import compute, transformer
from scalemodel.engine.job import transformer_shape
from scalemodel.specs import load_workload


def _brute_mean_keys(s: int, w: int) -> float:
    return sum(min(i + 1, w) for i in range(s)) / s


@pytest.mark.parametrize(("s", "w"), [(7, 7), (7, 3), (8192, 8192), (8192, 4096), (10, 1)])
def test_causal_mean_keys_counts_the_unmasked_entries(s: int, w: int) -> None:
    assert float(transformer.causal_mean_keys(s, w)) == pytest.approx(_brute_mean_keys(s, w), rel=1e-12)


def test_causal_mean_keys_global_layer_by_hand() -> None:
    # 1 + 2 + ... + 8192 = 8192 x 8193 / 2 keys over 8192 queries: 4096.5
    assert float(transformer.causal_mean_keys(8192, 8192)) == 4096.5


def _shape(**kw: Any) -> transformer.Shape:
    base: dict[str, Any] = dict(layers=6, hidden=4096, heads=32, vocab=128000, kv_heads=8, ffn_hidden=14336,
                                gated_mlp=True)
    base.update(kw)
    return transformer.shape(**base)


def test_shape_causal_keys_mixes_local_and_global_layers() -> None:
    """6 layers, window 1024, every 3rd global: 2 global, 4 local (local fraction 2/3). s = 4096:
    global (4096 + 1)/2 = 2048.5; local 1024 - 1024 x 1023 / 8192 = 896.125; mean 2048.5/3 + 2 x 896.125/3."""
    sh = _shape(sliding_window=1024, sliding_window_pattern=3)
    assert float(sh.local_layer_fraction) == pytest.approx(2 / 3)
    local = _brute_mean_keys(4096, 1024)
    assert local == pytest.approx(896.125)
    assert float(sh.causal_keys(4096)) == pytest.approx(2048.5 / 3 + 2 * 896.125 / 3)


def test_bidirectional_shape_attends_every_key() -> None:
    sh = _shape(causal=False)
    assert float(sh.causal_keys(4096)) == float(sh.attended_keys(4096)) == 4096.0
    assert bool(_shape().causal)  # decoders are causal by default


H100 = dict(peak_flops=989.4e12, memory_bandwidth=3.35e12, gemm_max=0.72, gemm_half_dim=87.0, memory_efficiency=0.88)


def test_flash_core_of_a_causal_layer_by_hand() -> None:
    """Llama-3 8B layer, b 1, s 8192, t 1, on the h100-sxm 16-bit curve. Per head (32 heads): k = 4096.5 keys;
    both core GEMMs (8192 x 4096.5 x 128 and 8192 x 128 x 4096.5) at eff = 0.72 x 8192/8279 x 4096.5/4183.5
    x 128/215 = 0.41533; compute 2 x 2 x 8192 x 4096.5 x 128 x 32 = 5.4982e11 FLOP / (989.4e12 x eff) = 1.3380 ms, above
    the bytes 4 x 8192 x 128 x 2 B x 32 / (3.35e12 x 0.88) = 91 us."""
    s, d, heads = 8192, 128, 32
    k = 4096.5
    eff = 0.72 * (s / (s + 87.0)) * (k / (k + 87.0)) * (d / (d + 87.0))
    t_core = 4.0 * s * k * d * heads / (989.4e12 * eff)
    assert eff == pytest.approx(0.41533, rel=1e-4)
    assert t_core == pytest.approx(1.3380e-3, rel=1e-4)
    kw = dict(micro_batch=1, seq_len=s, flash_attention=True, **H100)
    causal = compute.layer_compute_time(_shape(), **kw)
    full = compute.layer_compute_time(_shape(causal=False), **kw)
    assert float(causal.attention_core) == pytest.approx(t_core, rel=1e-9)
    # the unmasked core: s keys, eff with 8192/8279 for the key side
    t_full = 4.0 * s * s * d * heads / (989.4e12 * 0.72 * (s / (s + 87.0)) ** 2 * (d / (d + 87.0)))
    assert float(full.attention_core) == pytest.approx(t_full, rel=1e-9)
    # everything but the core is unchanged; FLOPs keep the full (unmasked) count of the convention
    for part in ("forward_gemm", "forward_memory", "forward_flops"):
        assert float(getattr(causal, part)) == pytest.approx(float(getattr(full, part)), rel=1e-12)


def test_flash_backward_is_two_and_a_half_forward_cores() -> None:
    """backward = 2 x (GEMMs + core) + the memory-bound ops' own backward bytes (layer_eltwise_bytes, megatron_te)
    + 0.5 x core: the extra is the recomputed Q K^T of the kernel."""
    kw = dict(micro_batch=2, seq_len=4096, flash_attention=True, **H100)
    lt = compute.layer_compute_time(_shape(), **kw)
    fwd = float(lt.forward_gemm + lt.forward_memory + lt.attention_core)
    assert float(lt.forward) == pytest.approx(fwd, rel=1e-12)
    mem_b = float(compute.memory_time(2 * 4096 * compute.layer_eltwise_bytes(_shape())[1],
                                      memory_bandwidth=H100["memory_bandwidth"],
                                      memory_efficiency=H100["memory_efficiency"]))
    assert float(lt.backward) == pytest.approx(2.0 * float(lt.forward_gemm + lt.attention_core) + mem_b
                                               + 0.5 * float(lt.attention_core), rel=1e-12)
    assert compute.FLASH_BACKWARD_FLOP_RATIO == 2.5
    # selective recompute repeats the forward core only
    sel = compute.layer_compute_time(_shape(), recompute="selective", **kw)
    assert float(sel.recompute) == pytest.approx(float(lt.attention_core), rel=1e-12)


def test_unfused_core_ignores_the_mask() -> None:
    """Without a fused kernel the score matrix is computed in full: causal or not, same times, backward 2 x but for
    the memory-bound ops' own backward bytes (layer_eltwise_bytes)."""
    kw = dict(micro_batch=1, seq_len=2048, flash_attention=False, **H100)
    a = compute.layer_compute_time(_shape(), **kw)
    b = compute.layer_compute_time(_shape(causal=False), **kw)
    assert float(a.total) == pytest.approx(float(b.total), rel=1e-12)
    mem_b = float(compute.memory_time(2048 * compute.layer_eltwise_bytes(_shape())[1],
                                      memory_bandwidth=H100["memory_bandwidth"],
                                      memory_efficiency=H100["memory_efficiency"]))
    assert float(a.backward) == pytest.approx(2.0 * float(a.forward - a.forward_memory) + mem_b, rel=1e-12)


def test_unfused_softmax_and_dropout_bytes_by_hand() -> None:
    """The unfused core's memory-bound passes over the b (a/t) s x s scores (b 1, s 2048, 32 heads: 134,217,728
    scores): the softmax reads the scores and writes the probabilities (2 x 2 bytes); attention dropout, where the
    model has it, reads and writes them again and writes its 1-byte mask (5 bytes); without dropout (p = 0: ATen's
    dropout returns its input) nothing more. Forward and the core's recompute: once; backward: twice."""
    kw = dict(micro_batch=1, seq_len=2048, flash_attention=False, **H100)
    scores = 32 * 2048 * 2048
    hbm = H100["memory_bandwidth"] * H100["memory_efficiency"]
    core_attn = transformer.RECOMPUTE_MODULES["core_attn"]
    plain = compute.layer_compute_time(_shape(dropout=False), **kw, recompute="selective", recompute_modules=core_attn)
    drop = compute.layer_compute_time(_shape(dropout=True), **kw, recompute="selective", recompute_modules=core_attn)
    gemms = float(plain.attention_core) - 4 * scores / hbm  # the two score GEMMs, alike with and without dropout
    assert gemms > 0
    assert float(drop.attention_core) == pytest.approx(gemms + 9 * scores / hbm, rel=1e-12)
    assert float(plain.recompute) == pytest.approx(float(plain.attention_core), rel=1e-12)
    # the dropout's passes and the two dropout masks of the layer's own residual paths (layer_eltwise_bytes)
    own_f, own_b = (a - b for a, b in zip(compute.layer_eltwise_bytes(_shape(dropout=True)),
                                          compute.layer_eltwise_bytes(_shape(dropout=False)), strict=True))
    assert float(drop.forward - plain.forward) == pytest.approx((5 * scores + 2048 * float(own_f)) / hbm, rel=1e-9)
    assert float(drop.backward - plain.backward) == pytest.approx((10 * scores + 2048 * float(own_b)) / hbm, rel=1e-9)


def test_causal_halves_the_core_roughly() -> None:
    """At long sequences the causal core costs about half the unmasked one (s x k GEMMs, k ~ s/2; the key-side
    efficiency factor k/(k + d0) is a little lower): between 0.5 and 0.51 at s = 8192 on the H100 curve."""
    kw = dict(micro_batch=1, seq_len=8192, flash_attention=True, **H100)
    r = float(compute.layer_compute_time(_shape(), **kw).attention_core) / float(
        compute.layer_compute_time(_shape(causal=False), **kw).attention_core)
    assert 0.5 < r < 0.51
    assert np.isfinite(r)


def test_bert_is_bidirectional_and_decoders_causal() -> None:
    assert bool(transformer_shape(load_workload("bert-large")).causal) is False
    assert bool(transformer_shape(load_workload("llama3-8b")).causal) is True
