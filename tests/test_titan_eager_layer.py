"""strategy.layer_impl torchtitan_eager / torchtitan_eager_fused_rmsnorm / fms: a Llama block without torch.compile
(docs/model.md#layer-eltwise). Every expected value is the sum of an op list written out here, one entry per ATen
kernel the block's eager code runs (bytes per token on one GPU, bf16 e = 2 B, fp32 4 B), read from
pytorch/torchtitan@1ea476e9f (= 9dec370 for these ops) torchtitan/models/llama/model.py, models/norms.py and
foundation-model-stack@f29e546d fms/modules/layernorm.py, positions.py, attention.py, feedforward.py; autograd's
backward formulas from PyTorch's derivatives.yaml (mul, pow, mean, _to_copy, expand, sum)."""

from __future__ import annotations

import pytest

from scalemodel.cost.compute import layer_eltwise_bytes
from scalemodel.cost.transformer import shape

E, F32 = 2.0, 4.0


def _total(ops: list[tuple[str, float]]) -> float:
    return sum(b for _, b in ops)


# torchtitan's RMSNorm.forward: self._norm(x.float()).type_as(x) * self.weight, _norm = x * rsqrt(x.pow(2).mean(-1)
# + eps): per element of x (the per-row rsqrt and the per-column weight are not counted)
RMS_FWD = [("x.float(): read bf16, write fp32", E + F32), ("pow(2): read, write fp32", 2 * F32),
           ("mean(-1): read", F32), ("x * rsqrt: read, write fp32", 2 * F32),
           ("type_as(x): read fp32, write bf16", F32 + E), ("* weight: read, write bf16", 2 * E)]
RMS_BWD = [("MulBackward (weight): grad * weight", 2 * E), ("grad * normed (weight's gradient)", 3 * E),
           ("sum_to the weight's shape: read", E), ("ToCopyBackward (type_as): read bf16, write fp32", E + F32),
           ("MulBackward (rsqrt): grad * rsqrt", 2 * F32), ("grad * x (rsqrt's gradient)", 3 * F32),
           ("sum_to the row: read", F32), ("MeanBackward: expand / N, write", F32),
           ("PowBackward: x.pow(1) copy", 2 * F32), ("2 * that", 2 * F32), ("grad * that", 3 * F32),
           ("accumulate the two fp32 gradients of x.float()", 3 * F32),
           ("ToCopyBackward (x.float()): read fp32, write bf16", F32 + E)]


def test_python_rmsnorm_is_18e_forward_46e_backward() -> None:
    assert _total(RMS_FWD) == 36.0 and _total(RMS_BWD) == 92.0


def test_torchtitan_eager_llama3_8b_by_op_list() -> None:
    """Llama 3 8B (GQA 32 / 8, RoPE, SwiGLU), t 1, norm_type rmsnorm: x = Q = 4096, K = V = 1024, K_r = V_r = 4096."""
    h, f, q, k, v, kr, vr = 4096.0, 14336.0, 4096.0, 1024.0, 1024.0, 4096.0, 4096.0
    rope = [("xq.float(): read bf16, write fp32", E + F32), ("complex xq_ * freqs_cis: read, write fp32", 2 * F32),
            ("type_as: read fp32, write bf16", F32 + E)]  # per rotated element, forward; backward the same three
    fwd = [("attention_norm", h * _total(RMS_FWD)), ("ffn_norm", h * _total(RMS_FWD)),
           ("h = x + attention(...): read 2, write", 3 * E * h), ("out = h + feed_forward(...)", 3 * E * h),
           ("RoPE of xq and xk", (q + k) * _total(rope)),
           ("repeat_kv keys: expand(...).reshape copy", E * (k + kr)), ("repeat_kv values", E * (v + vr)),
           ("SDPA output.transpose(1, 2).contiguous(): flash's [b, s, a, d] output, no copy", 0.0),
           ("F.silu(w1 x): read, write", 2 * E * f), ("* w3 x: read 2, write", 3 * E * f)]
    bwd = [("attention_norm backward", h * _total(RMS_BWD)), ("ffn_norm backward", h * _total(RMS_BWD)),
           ("residual gradient accumulation x 2", 2 * 3 * E * h),
           ("wq, wk, wv input gradients summed (2 sums)", 2 * 3 * E * h), ("w1, w3 input gradients summed", 3 * E * h),
           ("RoPE backward of dq and dk", (q + k) * _total(rope)),
           ("ExpandBackward keys: sum over the repeats, read K_r, write K", E * (kr + k)),
           ("ExpandBackward values", E * (vr + v)),
           ("MulBackward: grad * w3 x, grad * silu", 2 * 3 * E * f), ("silu_backward: read grad and input, write",
                                                                      3 * E * f)]
    got_f, got_b = layer_eltwise_bytes(shape(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128256,
                                             ffn_hidden=14336, gated_mlp=True, dropout=False), "torchtitan_eager")
    assert float(got_f) == pytest.approx(_total(fwd)) and float(got_f) == pytest.approx(610304.0)
    assert float(got_b) == pytest.approx(_total(bwd)) and float(got_b) == pytest.approx(1257472.0)
    # norm_type fused_rmsnorm: TritonFusedRMSNorm reads x and writes y (2e x); its backward kernel reads x and dy,
    # writes dx (3e x; dw as per-SM fp32 partial sums, not counted). Everything else as above.
    ff, fb = layer_eltwise_bytes(shape(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128256,
                                       ffn_hidden=14336, gated_mlp=True, dropout=False),
                                 "torchtitan_eager_fused_rmsnorm")
    assert float(ff) == pytest.approx(_total(fwd) - 2 * h * _total(RMS_FWD) + 2 * 2 * E * h)
    assert float(fb) == pytest.approx(_total(bwd) - 2 * h * _total(RMS_BWD) + 2 * 3 * E * h)


def test_fms_llama2_7b_by_op_list() -> None:
    """fms LLaMABlock, Llama 2 7B (MHA 32, RoPE, SwiGLU 11008), t 1: RotaryEmbedding.adjusted_qk multiplies the
    [.., D/2, 1, 2] fp32 pairs by the [.., D/2, 2, 2] rotation and sums the last axis; no repeat (MHA)."""
    h, f, q, k = 4096.0, 11008.0, 4096.0, 4096.0
    rope_f = [("q.float()", E + F32), ("freqs.mul(q_.unsqueeze(-2)): read 4, write 2 x 4", F32 + 2 * F32),
              ("sum(5): read 2 x 4, write 4", 3 * F32), ("type_as(q)", F32 + E)]
    rope_b = [("ToCopyBackward", E + F32), ("MulBackward: expanded grad * freqs, write 2 x 4", F32 + 2 * F32),
              ("sum_to q_.unsqueeze(-2): read 2 x 4, write 4", 3 * F32), ("ToCopyBackward (q.float())", F32 + E)]
    fwd = [("ln, ff_ln (use_high_precision_pow)", 2 * h * _total(RMS_FWD)), ("two residual adds", 2 * 3 * E * h),
           ("RoPE of queries and keys", (q + k) * _total(rope_f)), ("a(wg x) * w1 x", 5 * E * f)]
    bwd = [("norm backwards", 2 * h * _total(RMS_BWD)), ("residual accumulations", 2 * 3 * E * h),
           ("query, key, value input gradients (2 sums), w1, wg (1)", 3 * 3 * E * h),
           ("RoPE backward", (q + k) * _total(rope_b)), ("mul's two products, silu_backward", 9 * E * f)]
    got_f, got_b = layer_eltwise_bytes(shape(layers=32, hidden=4096, heads=32, vocab=32000, ffn_hidden=11008,
                                             gated_mlp=True, dropout=False), "fms")
    assert float(got_f) == pytest.approx(_total(fwd)) and float(got_f) == pytest.approx(749056.0)
    assert float(got_b) == pytest.approx(_total(bwd)) and float(got_b) == pytest.approx(1369600.0)


def test_eager_torchtitan_costs_more_than_compiled() -> None:
    """The same block unfused moves more bytes each way than inductor's fusions of it."""
    sh = shape(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128256, ffn_hidden=14336, gated_mlp=True,
               dropout=False)
    cf, cb = layer_eltwise_bytes(sh, "torchtitan")
    for impl in ("torchtitan_eager", "torchtitan_eager_fused_rmsnorm"):
        ef, eb = layer_eltwise_bytes(sh, impl)
        assert float(ef) > float(cf) and float(eb) > float(cb)
