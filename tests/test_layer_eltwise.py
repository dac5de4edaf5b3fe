"""strategy.layer_impl: a layer's memory-bound HBM bytes per token counted per implementation
(scalemodel.cost.compute.layer_eltwise_bytes, docs/model.md#layer-eltwise). Every expected value is the sum of an
op list written out here, one entry per kernel pass named in the implementation's code (bytes per token on one GPU,
e = 2 B elements, 1 B per dropout-mask element), not a copy of the function's closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.compute import layer_compute_time, layer_eltwise_bytes, memory_time
from scalemodel.cost.transformer import shape
from scalemodel.errors import InputError

E = 2.0


def _total(ops: list[tuple[str, float]]) -> float:
    return sum(b for _, b in ops)


def _llama8b(**kw: object) -> object:
    return shape(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128256, ffn_hidden=14336, gated_mlp=True,
                 dropout=False, **kw)


def test_megatron_te_llama3_8b_by_op_list() -> None:
    """Megatron-Core + TE, Llama 3 8B (GQA 32/8, RoPE, SwiGLU, no dropout, no biases), t 1: Q = 4096, K = V = 1024."""
    h, f, q, k, v = 4096.0, 14336.0, 4096.0, 1024.0, 1024.0
    fwd = [("input norm (TE LayerNormLinear): read x, write ln_out", 2 * E * h),
           ("bias-dropout-add (attention): read branch + residual, write", 3 * E * h),
           ("pre-MLP norm", 2 * E * h),
           ("bias-dropout-add (MLP)", 3 * E * h),
           ("fused RoPE on q and k: read, write", 2 * E * (q + k)),
           ("get_qkv_layout not_supported -> q, k, v .contiguous()", 2 * E * (q + k + v)),
           ("GQA query.reshape copy", 2 * E * q),
           ("bias_swiglu: read 2f, write f", 3 * E * f)]
    bwd = [("layernorm_bwd x 2: read dy and x, write dx", 2 * 3 * E * h),
           ("residual gradient accumulation x 2: read 2, write 1", 2 * 3 * E * h),
           ("fused RoPE backward", 2 * E * (q + k)),
           ("split backward: cat dq, dk, dv", 2 * E * (q + k + v)),
           ("swiglu_back: read dy (f) and the input (2f), write 2f", 5 * E * f)]
    got_f, got_b = layer_eltwise_bytes(_llama8b(), "megatron_te")
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    assert float(got_f) / (E * h) == pytest.approx(28.0) and float(got_b) / (E * h) == pytest.approx(35.0)


def test_megatron_te_gpt_sequence_parallel_by_op_list() -> None:
    """GPT-style (MHA, learned positions, biases, GELU, dropout 0.1), t 8 with sequence parallelism: the norms and
    residuals act on x = h / 8, the activation on f / 8; MHA without RoPE keeps TE's sbh3d layout (no copies)."""
    h, t = 12288.0, 8.0
    x, f = h / t, 4 * h / t
    sh = shape(layers=96, hidden=h, heads=96, vocab=51200, position_embeddings=2048, dropout=True)
    fwd = [("2 norms", 2 * 2 * E * x), ("2 bias-dropout-adds", 2 * 3 * E * x), ("2 dropout masks (1 B)", 2 * x),
           ("bias_gelu: read, write", 2 * E * f)]
    bwd = [("2 norm backwards", 2 * 3 * E * x), ("2 gradient accumulations", 2 * 3 * E * x),
           ("2 dropout backwards: read dy + mask, write", 2 * (2 * E + 1) * x),
           ("bias_gelu_back: read dy and the input, write", 3 * E * f), ("fc1 bias gradient sum_to: read", E * f)]
    got_f, got_b = layer_eltwise_bytes(sh, "megatron_te", tp=t, sequence_parallel=True)
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    # the old single count (4 eb X + 2 (3 eb + 1) X + 2 eb f/t, backward 2 x) has this forward, not this backward
    old = 4 * E * x + 2 * (3 * E + 1) * x + 2 * E * f
    assert float(got_f) == pytest.approx(old) and float(got_b) < 2 * old


def test_megatron_legacy_korthikanti_layer_by_op_list() -> None:
    """Megatron-LM's megatron/model (Korthikanti 2022's 22B layer: h 6144, a 64, t 8, no SP, biases, dropout)."""
    h, t = 6144.0, 8.0
    x, f, qkv, o = h, 4 * h / t, 3 * h / t, h / t
    sh = shape(layers=48, hidden=h, heads=64, vocab=51200, position_embeddings=2048, dropout=True)
    fwd = [("2 Apex LayerNorms", 2 * 2 * E * x), ("2 jit bias-dropout-adds", 2 * 3 * E * x), ("2 masks", 2 * x),
           ("context_layer.permute(2, 0, 1, 3).contiguous()", 2 * E * o), ("bias_gelu", 2 * E * f)]
    bwd = [("2 Apex LayerNorm backwards: gamma/beta kernel reads dy, x; grad-input kernel reads both, writes",
            2 * 5 * E * x),
           ("2 gradient accumulations", 2 * 3 * E * x), ("2 dropout backwards", 2 * (2 * E + 1) * x),
           ("split_tensor_along_last_dim backward: cat", 2 * E * qkv),
           ("QKV bias gradient (F.linear sum)", E * qkv), ("O and FC2 bias gradients (sum_to)", 2 * E * x),
           ("bias_gelu_back + fc1 bias sum", 4 * E * f)]
    got_f, got_b = layer_eltwise_bytes(sh, "megatron_legacy", tp=t)
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))


def test_llmfoundry_mpt_by_op_list() -> None:
    """llm-foundry MPTBlock, eager (MPT 7B: h 4096, a 32, f 16384, biases by the yaml's no_bias default False,
    resid_pdrop 0): LPLayerNorm, eager adds, nn.GELU; the output's pad_input is attention_unpad's, not counted."""
    h, f = 4096.0, 16384.0
    sh = shape(layers=32, hidden=h, heads=32, vocab=50368, position_embeddings=2048, dropout=False, biases=True)
    fwd = [("2 F.layer_norm", 2 * 2 * E * h), ("2 residual adds", 2 * 3 * E * h), ("GELU", 2 * E * f)]
    bwd = [("2 layer_norm backwards (dX kernel + GammaBeta kernel)", 2 * 5 * E * h),
           ("2 gradient accumulations", 2 * 3 * E * h), ("qkv.split backward: cat", 2 * E * 3 * h),
           ("bias gradients: Wqkv 3h, out_proj h, up f, down h", E * (3 * h + h + f + h)),
           ("gelu_backward: read dy and x, write", 3 * E * f)]
    got_f, got_b = layer_eltwise_bytes(sh, "llmfoundry")
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    eager_f, eager_b = layer_eltwise_bytes(sh, "eager")  # the plain eager layer adds the output's transpose copy
    assert float(eager_f) - float(got_f) == pytest.approx(2 * E * h) and float(eager_b) == float(got_b)


def test_torchtitan_llama3_8b_by_op_list() -> None:
    """torchtitan, torch.compile'd TransformerBlock (Llama 3 8B, GQA 32/8: repeat_kv materialises K and V at 32
    heads, K_r = V_r = 4096)."""
    h, f, q, k, v, kr, vr, o = 4096.0, 14336.0, 4096.0, 1024.0, 1024.0, 4096.0, 4096.0, 4096.0
    fwd = [("attention_norm: read x, write", 2 * E * h),
           ("h = x + attn fused with ffn_norm: read x, attn; write h, norm", 4 * E * h),
           ("out = h + ffn", 3 * E * h),
           ("RoPE of xq: read, write", 2 * E * q), ("RoPE of xk fused with repeat_kv: read K, write K_r", E * (k + kr)),
           ("repeat_kv of xv", E * (v + vr)),
           ("output.transpose(1, 2).contiguous(): SDPA wrote [b, s, a, d], a no-op clone", 0 * E * o),
           ("silu(w1 x) * w3 x", 3 * E * f)]
    bwd = [("ffn_norm dx: read dw1, dw3, h, residual grad; write dh", 5 * E * h),
           ("ffn_norm dweight: read dw1, dw3, h", 3 * E * h),
           ("attention_norm dx: read dq, dk, dv, x, residual grad; write dx", 6 * E * h),
           ("attention_norm dweight: read dq, dk, dv, x", 4 * E * h),
           ("RoPE backward of q", 2 * E * q), ("repeat/RoPE backward of k: read K_r, write K", E * (kr + k)),
           ("repeat backward of v", E * (vr + v)), ("SwiGLU backward: read dy, a, b; write da, db", 5 * E * f)]
    got_f, got_b = layer_eltwise_bytes(_llama8b(), "torchtitan")
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    xf, xb = layer_eltwise_bytes(_llama8b(), "xla")  # no repeats, no output copy: RoPE read + write of q and k
    assert float(xf) == pytest.approx(9 * E * h + 2 * E * (q + k) + 3 * E * f)
    assert float(xb) == pytest.approx(18 * E * h + 2 * E * (q + k) + 5 * E * f)


def test_moe_layer_leaves_the_activation_to_the_experts() -> None:
    """mlp=False (an MoE layer): no dense activation; everything else as the dense layer."""
    sh = _llama8b()
    for impl in ("megatron_te", "megatron_legacy", "eager", "llmfoundry", "torchtitan", "xla"):
        df, db = layer_eltwise_bytes(sh, impl)
        mf, mb = layer_eltwise_bytes(sh, impl, mlp=False)
        fwd_act = {"megatron_legacy": 5, "eager": 5, "llmfoundry": 5}.get(impl, 3) * E * 14336
        assert float(df - mf) == pytest.approx(fwd_act)
        assert float(db - mb) > 0


def test_vectorised_over_implementations_and_bad_label() -> None:
    sh = _llama8b()
    labels = np.array(["megatron_te", "torchtitan", "xla"])
    f, b = layer_eltwise_bytes(sh, labels)
    for i, lab in enumerate(labels):
        sf, sb = layer_eltwise_bytes(sh, str(lab))
        assert f[i] == pytest.approx(float(sf)) and b[i] == pytest.approx(float(sb))
    with pytest.raises(InputError):
        layer_eltwise_bytes(sh, "deepspeed_magic")


def test_layer_time_prices_the_counts_forward_and_backward() -> None:
    """layer_compute_time: forward memory = T x the forward bytes; backward = 2 x (forward - memory) + T x the
    backward bytes (+ the flash core's own backward), both at bandwidth x efficiency."""
    sh = _llama8b()
    b, s, bw, me = 1, 8192, 4.8e12, 0.85
    kw = dict(micro_batch=b, seq_len=s, peak_flops=989e12, memory_bandwidth=bw, memory_efficiency=me)
    for impl in ("megatron_te", "torchtitan"):
        lt = layer_compute_time(sh, layer_impl=impl, **kw)
        fb, bb = layer_eltwise_bytes(sh, impl)
        T = b * s
        assert float(lt.forward_memory) == pytest.approx(T * float(fb) / (bw * me))
        mem_b = float(memory_time(T * float(bb), memory_bandwidth=bw, memory_efficiency=me))
        assert float(lt.backward) == pytest.approx(2 * float(lt.forward - lt.forward_memory) + mem_b)


def test_megatron_te_squared_relu_nemotron4_15b_by_op_list() -> None:
    """Nemotron-4 15B (GQA 48/8, d 128, RoPE, squared ReLU f = 24576, no biases, no dropout), t 1, Megatron-Core +
    TE: torch.pow(F.relu(x), 2) runs unfused (Megatron-Core's MLP fuses only GeLU and SwiGLU)."""
    h, f, q, k, v = 6144.0, 24576.0, 6144.0, 1024.0, 1024.0
    sh = shape(layers=32, hidden=h, heads=48, kv_heads=8, vocab=256000, ffn_hidden=f, biases=False, dropout=False,
               squared_relu=True)
    fwd = [("2 norms", 2 * 2 * E * h), ("2 bias-dropout-adds", 2 * 3 * E * h),
           ("fused RoPE on q and k", 2 * E * (q + k)), ("q, k, v .contiguous()", 2 * E * (q + k + v)),
           ("GQA query.reshape copy", 2 * E * q),
           ("relu: read, write", 2 * E * f), ("pow(., 2): read, write", 2 * E * f)]
    bwd = [("2 norm backwards", 2 * 3 * E * h), ("2 gradient accumulations", 2 * 3 * E * h),
           ("fused RoPE backward", 2 * E * (q + k)), ("split backward cat", 2 * E * (q + k + v)),
           ("pow_backward: self.pow(1) copy, read + write", 2 * E * f),
           ("pow_backward: 2 x that, read + write", 2 * E * f),
           ("pow_backward: grad x that, read 2, write 1", 3 * E * f),
           ("relu threshold_backward: read grad + result, write", 3 * E * f)]
    got_f, got_b = layer_eltwise_bytes(sh, "megatron_te")
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    # against GeLU on the same shape: + 2e f forward, + 7e f backward (gelu_backward without biases is 3e f)
    gelu_f, gelu_b = layer_eltwise_bytes(shape(layers=32, hidden=h, heads=48, kv_heads=8, vocab=256000,
                                               ffn_hidden=f, biases=False, dropout=False), "megatron_te")
    assert float(got_f - gelu_f) == pytest.approx(2 * E * f) and float(got_b - gelu_b) == pytest.approx(7 * E * f)
    # the compiled and XLA implementations fuse the activation: no change there; a gated MLP ignores the flag
    for impl in ("torchtitan", "xla"):
        a = layer_eltwise_bytes(sh, impl)
        b = layer_eltwise_bytes(shape(layers=32, hidden=h, heads=48, kv_heads=8, vocab=256000, ffn_hidden=f,
                                      biases=False, dropout=False), impl)
        assert float(a[0]) == pytest.approx(float(b[0])) and float(a[1]) == pytest.approx(float(b[1]))
    gated = [layer_eltwise_bytes(_llama8b(squared_relu=s), "megatron_te") for s in (True, False)]
    assert float(gated[0][0]) == float(gated[1][0]) and float(gated[0][1]) == float(gated[1][1])


def test_eager_squared_relu_by_op_list() -> None:
    """PyTorch eager (and llm-foundry): relu + pow forward 4e f, backward 10e f, in place of GELU's 2e f / 3e f."""
    sh_sq = shape(layers=4, hidden=1024, heads=8, vocab=32000, biases=False, dropout=False, squared_relu=True)
    sh_ge = shape(layers=4, hidden=1024, heads=8, vocab=32000, biases=False, dropout=False)
    f = 4096.0
    for impl in ("eager", "llmfoundry", "megatron_legacy"):
        a, b = layer_eltwise_bytes(sh_sq, impl), layer_eltwise_bytes(sh_ge, impl)
        assert float(a[0] - b[0]) == pytest.approx((4 - 2) * E * f)
        assert float(a[1] - b[1]) == pytest.approx((10 - 3) * E * f)
