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


def test_nanotron_micro_batch_1_has_no_output_copies() -> None:
    """At micro-batch 1 the o_proj input ``attention_output.view(1, s, O).transpose(0, 1)`` is a contiguous [s, 1, O]
    tensor (PyTorch's contiguity check skips size-1 dimensions: strides (O, s O, 1) over sizes (s, 1, O)), so
    F.linear folds it without a copy, the view's backward reshapes the gradient without one and the async row
    linear's ``tensor.contiguous()`` returns it as is: the 3.57B layer of the first test at t 1 without its 2e O
    forward and 4e O backward. Every other op stays (the QKV permute, the KV pack's cat and permute, the split's
    cats act on dimensions that size 1 does not make contiguous). Op list checked against an aten trace of the
    layer's code (TorchDispatchMode, torch 2.1.2, b 1 and 2)."""
    h, f = 3072.0, 8192.0
    u = h
    fwd = [("2 TritonRMSNorm forwards", 2 * 2 * E * h), ("2 residual adds", 2 * 3 * E * h),
           ("qkv view.permute(2,1,0,3,4).contiguous()", 2 * E * 3 * u),
           ("kv cat", 2 * E * 2 * u), ("kv permute(1,2,0,3,4).contiguous()", 2 * E * 2 * u),
           ("rotary in place on q and k", 2 * E * 2 * u),
           ("silu", 2 * E * f), ("mul", 3 * E * f)]
    bwd = [("2 norm backwards", 2 * 3 * E * h), ("2 accumulations", 2 * 3 * E * h),
           ("act: two products, silu_backward, split's cat", 13 * E * f),
           ("kv split backward cat", 2 * E * 2 * u), ("rotary backward", 2 * E * 2 * u),
           ("unbind backward stack", 2 * E * 3 * u), ("view(s,b,3,a,d) backward reshape", 2 * E * 3 * u)]
    sh = shape(layers=28, hidden=h, heads=24, vocab=131072, ffn_hidden=f, gated_mlp=True, dropout=False)
    got_f, got_b = layer_eltwise_bytes(sh, "nanotron", micro_batch=1)
    assert float(got_f) == pytest.approx(_total(fwd))
    assert float(got_b) == pytest.approx(_total(bwd))
    # by hand: fwd 10 e h + 6 e h + 8 e h + 4 e h + 5 e f = 28 e h + 5 e f; bwd 12 e h + 4 e h + 4 e h + 12 e h
    # + 13 e f = 32 e h + 13 e f
    assert float(got_f) == pytest.approx(E * (28 * h + 5 * f))
    assert float(got_b) == pytest.approx(E * (32 * h + 13 * f))
    # micro-batch 2 (and None, the default: b > 1) keep them: + 2 e h forward, + 4 e h backward
    two_f, two_b = layer_eltwise_bytes(sh, "nanotron", micro_batch=[1, 2])
    assert float(two_f[1] - two_f[0]) == pytest.approx(2 * E * h)
    assert float(two_b[1] - two_b[0]) == pytest.approx(4 * E * h)


def test_nanotron_layer_time_passes_the_micro_batch() -> None:
    """layer_compute_time hands its micro-batch to the byte count: a dense layer's forward memory-bound time is
    T x its forward bytes at the roofline (T = b s), so per token the 3.57B layer at t 1 (MHA, flash) moves 28 e h +
    5 e f at b 1 and 30 e h + 5 e f at b 2 (the two tests above, by hand), at 3.35 TB/s x 0.85."""
    from scalemodel.cost.compute import layer_compute_time

    h, f, s, bw, eff = 3072.0, 8192.0, 4096.0, 3.35e12, 0.85
    sh = shape(layers=28, hidden=h, heads=24, vocab=131072, ffn_hidden=f, gated_mlp=True, dropout=False)
    lt = layer_compute_time(sh, micro_batch=[1, 2], seq_len=s, peak_flops=989e12, memory_bandwidth=bw,
                            memory_efficiency=eff, flash_attention=True, layer_impl="nanotron")
    per_token = [E * (28 * h + 5 * f), E * (30 * h + 5 * f)]
    for i, b in enumerate((1.0, 2.0)):
        assert float(lt.forward_memory[i]) == pytest.approx(b * s * per_token[i] / (bw * eff))


def test_nanotron_row_linear_without_async_copies_once() -> None:
    """tp 4 without sequence parallelism (nanotron tp_mode ALL_REDUCE: the grid turns tp_linear_async_communication
    off with it, and o_proj's async linear asserts REDUCE_SCATTER): o_proj is ``F.linear`` under autograd. Forward the
    fold's copy 2e O as before; backward only the view's reshape of the transposed gradient, 2e O: the weight gradient
    uses the fold's copy autograd saved, no ``tensor.contiguous()``. Against the same layer with SP (async): the
    residual stream at h, not h/4 (norms 2e + 3e, adds 3e + 3e, per norm-and-add pair), and 2e O less backward.
    8B-like: h 4096, 32 heads, t 4: O = 1024."""
    h, t = 4096.0, 4.0
    o = h / t
    sh = shape(layers=32, hidden=h, heads=32, vocab=131072, ffn_hidden=14336.0, gated_mlp=True, dropout=False)
    sp_f, sp_b = layer_eltwise_bytes(sh, "nanotron", tp=t, sequence_parallel=True, micro_batch=2)
    ar_f, ar_b = layer_eltwise_bytes(sh, "nanotron", tp=t, sequence_parallel=False, micro_batch=2)
    # the residual stream x: h/4 with SP, h without; per layer fwd 2 norms (2e x) + 2 adds (3e x) = 10e x,
    # bwd 2 norms (3e x) + 2 accumulations (3e x) = 12e x
    dx = h - h / t
    assert float(ar_f - sp_f) == pytest.approx(10 * E * dx)
    assert float(ar_b - sp_b) == pytest.approx(12 * E * dx - 2 * E * o)


def test_nanotron_tp_time_by_hand() -> None:
    """nanotron's TP linears (engine.model_parallel_comm.nanotron_tp_time, docs/model.md#nanotron): an 80B-like layer at
    t 8 with AG 0.2 ms, RS 0.18 ms; column GEMMs qkv 0.32 ms, gate_up 0.74 ms; row GEMMs o 0.106 ms, down 0.37 ms."""
    from scalemodel.engine.model_parallel_comm import nanotron_tp_time

    ag, rs, ar, t = 0.2, 0.18, 0.35, 8.0
    cols, rows = (0.32, 0.74), (0.106, 0.37)
    got = nanotron_tp_time(ag, rs, ar, cols, rows, t, True)
    # forward: qkv's gather under its own shard's GEMM 0.32/8 = 0.04 -> 0.16 exposed; gate_up's under 0.0925 ->
    # 0.1075; two blocking reduce-scatters 0.36
    assert float(got["fwd"]) == pytest.approx(0.16 + 0.1075 + 0.36)
    assert float(got["hidden_fwd"]) == pytest.approx(0.04 + 0.0925)
    # backward: the columns' re-gather and reduce-scatter fit under their data- and weight-gradient GEMMs (0);
    # the rows' output-gradient gathers under 0.106/8 = 0.01325 and 0.37/8 = 0.04625
    assert float(got["bwd"]) == pytest.approx((0.2 - 0.01325) + (0.2 - 0.04625))
    assert float(got["hidden_bwd"]) == pytest.approx(2 * (0.2 + 0.18) + 0.01325 + 0.04625)
    # a column GEMM shorter than the traffic: qkv 0.1 ms hides 0.1 of each backward collective, 0.1 + 0.08 exposed
    small = nanotron_tp_time(ag, rs, ar, (0.1, 0.74), rows, t, True)
    assert float(small["bwd"] - got["bwd"]) == pytest.approx(0.1 + 0.08)
    # without sequence parallelism: tp_mode ALL_REDUCE, every linear synchronous: 2 all-reduces each way, none hidden
    both = nanotron_tp_time(ag, rs, ar, cols, rows, t, [True, False])
    assert both["fwd"][1] == pytest.approx(0.7) and both["bwd"][1] == pytest.approx(0.7)
    assert both["hidden_fwd"][1] == 0.0 and both["hidden_bwd"][1] == 0.0
    assert both["fwd"][0] == pytest.approx(float(got["fwd"]))


def test_nanotron_refuses_userbuffers() -> None:
    """nanotron has no Transformer Engine userbuffers: tp_comm_overlap with nanotron_trainer is refused at the field."""
    from scalemodel.errors import InputError
    from scalemodel.specs import StrategySpec

    with pytest.raises(InputError, match="nanotron_trainer.*tp_comm_overlap"):
        StrategySpec(tp=8, sequence_parallel=True, tp_comm_overlap=True, nanotron_trainer=True)


def test_nanotron_tp_in_the_step(a100) -> None:  # type: ignore[no-untyped-def]
    """In the step: llama3-8b at tp 8 with SP on one DGX A100 node, micro-batch 1. nanotron's TP time per micro-batch
    lies between its blocking part, the two row reduce-scatters of every layer's forward (2 L RS), and all its
    traffic (forward 2 AG + 2 RS, backward 4 AG + 2 RS a layer), with AG and RS priced here by the collective model
    on the node's NVLink, and differs from Megatron's pricing of the same job (the formula, not the traffic)."""
    from grid_helpers import evaluated, first

    from scalemodel.cost import collectives as coll
    from scalemodel.specs import TrainingSpec, load_workload

    wl = load_workload("llama3-8b")
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, _, mega = evaluated(a100, wl, tr, 8, tp=8, pp=1, sequence_parallel=True)
    _, _, nano = evaluated(a100, wl, tr, 8, tp=8, pp=1, sequence_parallel=True, nanotron_trainer=True)
    act = float(job.seq_len) * float(job.shape.hidden) * 2.0
    ag = first(coll.collective_time("allgather", act, 8, job.network, stride=1))
    rs = first(coll.collective_time("reducescatter", act, 8, job.network, stride=1))
    layers, mbs = float(job.shape.layers), 8.0  # global batch 8 / (dp 1 x micro-batch 1)
    t_n = first(nano.breakdown["tp_comm"]) / mbs
    assert 2 * layers * rs < t_n < layers * (6 * ag + 4 * rs)
    assert t_n != pytest.approx(first(mega.breakdown["tp_comm"]) / mbs)


@pytest.mark.parametrize("tp", [1, 2])
def test_nanotron_pipeline_metadata_sends(a100, tp: int) -> None:  # type: ignore[no-untyped-def]
    """nanotron's stage boundary per micro-batch (p2p.py _send_meta, block.py; docs/model.md#nanotron): beside the
    activation and its gradient (2 T(act), one after the other; Megatron's 1F1B batches them both ways at once, T(act)
    at pp 2: tests/test_pipeline_exchanges.py), forward two metadata pairs (56 + 48 B for the hidden
    states, 56 + 32 B for the sequence mask) and the mask itself (b s bytes), backward one pair (56 + 48 B). gpt-7.5b
    at pp 2 in one DGX A100 node (tp 1 x dp 4, tp 2 x dp 2), micro-batch 1: every send a 2-rank send/recv at the
    pipeline's stride tp x dp = 4 priced by the collective model, so pp_comm grows by the ratio of those sends to
    the default's one batched exchange. At tp 2 without sequence parallelism nanotron runs tp_mode ALL_REDUCE: every
    TP rank holds the whole [s, b, h] hidden states and its PipelineBlock sends them as they are
    (pipeline_parallel/block.py, p2p.py at c2528430), as Megatron-Core does (the strategy default; legacy
    Megatron-LM's scatter/gather sends b s h / t, pp_scatter_gather, tests/test_pp_scatter_gather.py), so the
    activation is the whole one at either tp."""
    from grid_helpers import evaluated, first

    from scalemodel.cost import collectives as coll
    from scalemodel.specs import TrainingSpec, load_workload

    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, _, mega = evaluated(a100, wl, tr, 8, tp=tp, pp=2, zero="1")
    _, _, nano = evaluated(a100, wl, tr, 8, tp=tp, pp=2, zero="1", nanotron_trainer=True)

    def t(nbytes: float) -> float:
        return first(coll.collective_time("sendrecv", nbytes, 2, job.network, stride=4))

    s = float(job.seq_len)
    act = s * float(job.shape.hidden) * 2.0
    # + the hosts' synchronisations: 3 tensors x (4 sender's + 2 receiver's) at 8.3 us (docs/model.md#nanotron)
    extra = 3 * t(56.0) + 2 * t(48.0) + t(32.0) + t(s) + 3 * (4 + 2) * 8.3e-6
    ratio = first(nano.breakdown["pp_comm"]) / first(mega.breakdown["pp_comm"])
    assert ratio == pytest.approx((2 * t(act) + extra) / t(act), rel=1e-6)
