"""Mamba-2 (SSD) layers and hybrid patterns (scalemodel.cost.mamba): values worked out by hand from the formulas
of the module docstring and Megatron-LM's FLOP count, and the Nemotron 3 Nano parameter total its report publishes."""

import numpy as np
import pytest

from scalemodel.cost import mamba
from scalemodel.cost import transformer as tr
from scalemodel.errors import InputError

NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # Megatron-Bridge 17a381f95 nemotron_3_nano.py


def tiny():
    # h 4, H 2 heads of P 4 (d_in 8), N 2, G 1, K 4, Q 4
    return mamba.mamba_dims(hidden=4, heads=2, head_dim=4, state_dim=2, groups=1, conv_kernel=4, chunk_size=4)


def test_layer_counts_nano_pattern():
    c = mamba.layer_counts(NANO_PATTERN)
    # counted by eye: 23 M, 23 E, 6 *, no -; 52 layers (the recipe's num_layers)
    assert (c.mamba, c.moe, c.attention, c.mlp, c.layers) == (23, 23, 6, 0, 52)
    assert mamba.layer_counts("M-|M*").layers == 4  # a stage boundary is not a layer


@pytest.mark.parametrize("bad", ["M-G*", "MX", "", "|"])
def test_layer_counts_refuses_unknown_or_empty(bad):
    with pytest.raises(InputError):
        mamba.layer_counts(bad)


def test_dims_defaults_and_divisibility():
    md = mamba.mamba_dims(hidden=4096, head_dim=64)  # expand 2: d_in 8192, 128 heads
    assert float(md.heads) == 128 and float(md.d_inner) == 8192
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=4096, heads=128, groups=3)  # 128 % 3
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=4096, heads=128, groups=8, tp=16)  # 8 groups % 16
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=100, head_dim=64)  # 200 % 64


def test_mixer_params_by_hand():
    md = tiny()
    # in_proj 4 x (16 + 4 + 2) = 88; conv (4 + 1) x (8 + 4) = 60; dt_bias, A_log, D 6; norm 8; out_proj 32
    assert float(mamba.mamba_mixer_params(md)) == 88 + 60 + 6 + 8 + 32
    assert float(mamba.mamba_layer_params(md)) == 194 + 4


def nano():
    # Megatron-Bridge 17a381f95 src/megatron/bridge/recipes/nemotronh/nemotron_3_nano.py (MambaModelProvider);
    # vocab 131072 (the tokenizer of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, untied); shared expert 3712 = 2 x 1856
    sh = tr.shape(layers=52, hidden=2688, heads=32, kv_heads=2, head_dim=128, vocab=131072, ffn_hidden=1856,
                  moe_experts=128, moe_top_k=6, moe_ffn_hidden=1856, moe_shared_experts=2, gated_mlp=False,
                  tied_embeddings=False, biases=False)
    md = mamba.mamba_dims(hidden=2688, heads=64, head_dim=64, state_dim=128, groups=8)
    return sh, md


def test_nano_parameters_match_the_published_total():
    # Nemotron 3 Nano technical report (NVIDIA 2025, arXiv 2512.20848): 31.6 B total, 3.6 B active with embeddings
    sh, md = nano()
    c = mamba.layer_counts(NANO_PATTERN)
    assert float(mamba.hybrid_param_count(sh, c, md)) == pytest.approx(31.6e9, rel=0.003)
    assert float(mamba.hybrid_param_count(sh, c, md, active=True)) == pytest.approx(3.6e9, rel=0.01)


def test_projection_flops_match_megatron_when_d_inner_is_2h():
    # Nemotron-H widths h 4096, 128 heads of 64 (d_in = 8192 = 2h), N 128, G 8: Megatron-LM training.py
    # mamba_layer_flops per token: in_proj 2 h (2 d_in + 2 G N + H) = 2*4096*(16384+2048+128) = 152,043,520,
    # out_proj 2 d_in h = 67,108,864, scan 7 d_in N = 7,340,032
    md = mamba.mamba_dims(hidden=4096, heads=128, head_dim=64, state_dim=128, groups=8)
    assert float(mamba.mamba_projection_flops(md, 1)) == 152_043_520 + 67_108_864
    assert float(mamba.megatron_mamba_flops(md, 1)) == 152_043_520 + 67_108_864 + 7_340_032


def test_ssd_flops_by_hand():
    md = tiny()
    # forward per token: H (2QP + 4NP) + G 2QN = 2 (32 + 32) + 16 = 144;
    # backward: H (4QP + 10NP) + G 6QN = 2 (64 + 80) + 48 = 336
    assert float(mamba.ssd_flops(md, 1)) == 144
    assert float(mamba.ssd_flops(md, 10, backward=True)) == 3360
    # conv: 2 K (d_in + 2GN) = 2 * 4 * 12 = 96 per token
    assert float(mamba.mamba_conv_flops(md, 1)) == 96


def test_hybrid_forward_flops_small_pattern_by_hand():
    md = tiny()
    sh = tr.shape(layers=4, hidden=4, heads=2, kv_heads=1, vocab=10, ffn_hidden=8, moe_experts=4, moe_top_k=2,
                  gated_mlp=False, biases=False)
    s = 3
    # M: projections 2*3*4*(22 + 8) = 720, conv 3*96 = 288, SSD 3*144 = 432 -> 1440
    # *: QKV 4 x (4 + 2*2) = 32, O 16 -> 2*3*48 = 288; core 2 s s a (d + d) = 2*3*3*2*4 = 144 -> 432
    # -: 2*3*2*4*8 = 384;  E: 2*3*(2*2*4*8 + 4*4) = 864;  logits 2*3*4*10 = 240
    got = mamba.hybrid_forward_flops(sh, mamba.layer_counts("M*-E"), md, s)
    assert float(got) == 1440 + 432 + 384 + 864 + 240


def test_layer_time_bounds_and_broadcast():
    sh, md = nano()
    kw = dict(micro_batch=2, seq_len=8192, peak_flops=989e12, memory_bandwidth=3.35e12, gemm_max=0.75,
              gemm_half_dim=96.0)
    lt = mamba.mamba_layer_time(md, **kw, tp=np.array([1.0, 2.0, 4.0]))
    # never faster than the FLOPs at peak, nor the bytes at full bandwidth
    assert np.all(lt.forward >= lt.forward_flops / 989e12)
    assert np.all(lt.forward_memory > 0)
    # FLOPs on a rank: the layer's / t (H and G split, h whole)
    full = float(mamba.mamba_forward_flops(md, 2 * 8192))
    assert lt.forward_flops == pytest.approx(full / np.array([1.0, 2.0, 4.0]))
    assert np.all(np.diff(lt.total) < 0)  # more TP, less time per rank
    rec = mamba.mamba_layer_time(md, **kw, recompute="full")
    assert float(rec.recompute) == pytest.approx(float(rec.forward))
    assert float(mamba.mamba_layer_time(md, **kw, recompute="selective").recompute) == 0.0


def test_activation_bytes_by_hand():
    md = tiny()
    # s b = 3 tokens, h 4: replicated (2 + 2) * 12 = 48; split 3 * (2*22 + 4*8 + 2*8) = 3 * 92 = 276
    assert float(mamba.mamba_activation_bytes(md, micro_batch=1, seq_len=3)) == 48 + 276
    # tp 2 with sequence parallelism: all / 2; full recompute keeps the input 2 s b h (/t with SP)
    assert float(mamba.mamba_activation_bytes(md, micro_batch=1, seq_len=3, tp=2, sequence_parallel=True)) == 162
    assert float(mamba.mamba_activation_bytes(md, micro_batch=1, seq_len=3, recompute="full")) == 24
