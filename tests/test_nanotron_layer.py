"""strategy.layer_impl nanotron: the memory-bound HBM bytes per token of nanotron's eager LlamaDecoderLayer
(scalemodel.cost.compute.layer_eltwise_bytes, docs/model.md#layer-eltwise, docs/model.md#nanotron). Each expected
value is the sum of an op list written out here, one entry per kernel pass or autograd copy named in
huggingface/nanotron@c2528430 src/nanotron/models/llama.py (training branch of CausalSelfAttention.forward,
GLUActivation, LlamaDecoderLayer._core_forward) and parallel/tensor_parallel/functional.py
(_RowLinearAsyncCommunication), not a copy of the function's closed form."""

from __future__ import annotations

import pytest

from scalemodel.cost.compute import layer_eltwise_bytes
from scalemodel.cost.transformer import shape

E = 2.0


def _total(ops: list[tuple[str, float]]) -> float:
    return sum(b for _, b in ops)


def test_nanotron_3b_mha_tp1_by_op_list() -> None:
    """The benchmark grid's 3.57B (h 3072, 24 heads = 24 KV heads, f 8192, RoPE, SwiGLU), t 1:
    Q = K = V = O = 3072, F = 8192 (one half of the fused gate_up output)."""
    h, f = 3072.0, 8192.0
    u = h  # Q = K = V = O
    fwd = [("input_layernorm: TritonRMSNorm reads x, writes y", 2 * E * h),
           ("attention residual add: read 2, write 1", 3 * E * h),
           ("post_attention_layernorm", 2 * E * h),
           ("MLP residual add", 3 * E * h),
           ("qkv.view(s,b,3,a,d).permute(2,1,0,3,4).contiguous(): read Q+K+V, write", 2 * E * 3 * u),
           ("torch.cat([k.unsqueeze(0), v.unsqueeze(0)]): read K+V, write", 2 * E * 2 * u),
           ("kv.permute(1,2,0,3,4).contiguous(): read K+V, write", 2 * E * 2 * u),
           ("flash rotary in place on q: read, write", 2 * E * u),
           ("flash rotary in place on kv's k: read, write", 2 * E * u),
           ("o_proj F.linear folds the transposed [s,b,O] input: copy", 2 * E * u),
           ("silu(gate): read F, write F", 2 * E * f),
           ("silu(gate) * up: read 2F, write F", 3 * E * f)]
    bwd = [("2 TritonRMSNorm backwards: read dy and x, write dx", 2 * 3 * E * h),
           ("2 residual gradient accumulations", 2 * 3 * E * h),
           ("MulBackward: grad * up (read 2F, write F)", 3 * E * f),
           ("MulBackward: grad * silu(gate)", 3 * E * f),
           ("silu_backward: read grad and gate, write", 3 * E * f),
           ("torch.split backward: cat the two halves (read 2F, write 2F)", 4 * E * f),
           ("async row linear backward: saved o_proj input .contiguous()", 2 * E * u),
           ("view(b,s,O) backward: reshape of the transposed gradient", 2 * E * u),
           ("torch.split(kv, 1, dim=2) backward: cat dk, dv", 2 * E * 2 * u),
           ("rotary backward in place on dq and dk", 2 * E * 2 * u),
           ("UnbindBackward: stack dq, dk, dv", 2 * E * 3 * u),
           ("view(s,b,3,a,d) backward: reshape of the permuted gradient", 2 * E * 3 * u)]
    sh = shape(layers=28, hidden=h, heads=24, vocab=131072, ffn_hidden=f, gated_mlp=True, dropout=False)
    got_f, got_b = layer_eltwise_bytes(sh, "nanotron")
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    # by hand: fwd 10 e h + 6 e h + 8 e h + 4 e h + 2 e h + 5 e f = 30 e h + 5 e f; bwd 12 e h + 13 e f + 4 e h
    # + 4 e h + 4 e h + 12 e h = 36 e h + 13 e f
    assert float(got_f) == pytest.approx(E * (30 * h + 5 * f))
    assert float(got_b) == pytest.approx(E * (36 * h + 13 * f))
    # more than Megatron-Core + TE on the same shape by fwd 4e(K+V) + 2e O + 2e F, bwd 2e(K+V) + 2e(Q+K+V)
    # + 4e O + 8e F
    te_f, te_b = layer_eltwise_bytes(sh, "megatron_te")
    assert float(got_f - te_f) == pytest.approx(E * (8 * u + 2 * u + 2 * f))
    assert float(got_b - te_b) == pytest.approx(E * (4 * u + 6 * u + 4 * u + 8 * f))


def test_nanotron_80b_gqa8_tp4_sequence_parallel_by_op_list() -> None:
    """80B with 8 KV heads (h 8192, 64 heads, f 28672), t 4 with SP: x = h/4, Q = O = 2048, K = V = 256,
    F = 7168. GQA takes torch.split + three transpose(0, 1).contiguous() (one layout copy forward) and its
    backward is the split's one cat (no unbind stack)."""
    h, t = 8192.0, 4.0
    x, q, k, v, o, f = h / t, 8192.0 / t, 1024.0 / t, 1024.0 / t, 8192.0 / t, 28672.0 / t
    fwd = [("2 norms on x", 2 * 2 * E * x), ("2 residual adds on x", 2 * 3 * E * x),
           ("split + q, k, v transpose(0,1).contiguous()", 2 * E * (q + k + v)),
           ("kv cat", 2 * E * (k + v)), ("kv permute contiguous", 2 * E * (k + v)),
           ("rotary q, k", 2 * E * (q + k)), ("o_proj input fold copy", 2 * E * o),
           ("silu, mul", 5 * E * f)]
    bwd = [("2 norm backwards", 2 * 3 * E * x), ("2 accumulations", 2 * 3 * E * x),
           ("act: two products, silu_backward, split's cat", 13 * E * f),
           ("row linear .contiguous() + view backward reshape", 2 * 2 * E * o),
           ("kv split backward cat", 2 * E * (k + v)), ("rotary backward", 2 * E * (q + k)),
           ("qkv split backward cat", 2 * E * (q + k + v))]
    sh = shape(layers=80, hidden=h, heads=64, kv_heads=8, vocab=131072, ffn_hidden=28672.0, gated_mlp=True,
               dropout=False)
    got_f, got_b = layer_eltwise_bytes(sh, "nanotron", tp=t, sequence_parallel=True)
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
