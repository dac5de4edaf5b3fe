"""The output layer's and the vocab-parallel cross-entropy's TP collectives
(model_parallel_comm.output_layer_tp_collective, cross_entropy_tp_collective; docs/model.md#output-tp-comm).

Megatron-Core's output layer is a tensor_parallel.ColumnParallelLinear (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/models/gpt/gpt_model.py lines 271-295) whose LinearWithGradAccumulationAndAsyncCommunication
(tensor_parallel/layers.py) with sequence parallelism all-gathers its input, blocking, in the forward (lines 619-631),
all-gathers it again under the data-gradient GEMM (lines 666-687) and reduce-scatters the input gradient under the
weight-gradient GEMM (lines 700-710); without it all-reduces the input gradient under the weight-gradient GEMM
(allreduce_dgrad, lines 694-698), or after it without the async all-reduce. The cross-entropy all-reduces three
b s / cp fp32 vectors (cross_entropy.py lines 130-152), two with the fused loss (fused_cross_entropy.py lines 94-114),
and Transformer Engine's Triton loss all-gathers 3 floats a token (triton/cross_entropy.py line 85). The collectives'
seconds are the collectives model's for those bytes on the TP group (the primitive, tested in
tests/test_collectives*.py); which ones, of what size, and what hides them, is worked out here by hand."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, S, B, LAYERS, V = 4096, 4096, 1, 4, 32000
T = B * S  # tokens a micro-batch (cp 1)
ACT = T * H * 2.0  # one micro-batch's activation, bf16


def _setup(mtp: int = 0, tp: int = 4, **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="d", layers=LAYERS, hidden=H, heads=32, ffn_hidden=4 * H, vocab=V, seq_len=S,
                             tied_embeddings=False, mtp_layers=mtp)
    tr = TrainingSpec(global_batch=16, micro_batch=B, precision="bf16", seq_len=S)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(tp=tp, pp=1, dp=2, zero="1", megatron_ddp=not strategy.get("nanotron_trainer", False),
                      **strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, model_parallel_comm._mp_collectives(job, g, groups)


def _t(job, op: str, nbytes: float, ranks: int = 4) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time(op, np.asarray(nbytes), place(float(ranks), 1.0, job.network)))


def _f(x) -> float:  # type: ignore[no-untyped-def]
    return float(np.ravel(x)[0])


def _comp(job, g, logits: bool = True):  # type: ignore[no-untyped-def]
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(2.0), logits_on_stage=logits)
    return step._overlap_windows(raw, job.overlap_efficiency)


def test_formula_on_stated_seconds() -> None:
    """AG 3, RS 2, AR 4, G 2.5 (t 4): SP exposed AG + max(AG - G, 0) + max(RS - G, 0) = 3 + 0.5 + 0; hidden in the
    backward min(AG, G) + min(RS, G) = 2.5 + 2; no SP, async: max(AR - G, 0) = 1.5, hidden 2.5; not async: 4."""
    job, g, _ = _setup(sequence_parallel=True)
    out = model_parallel_comm.output_layer_tp_collective(job, g, 4.0, 2.0, 3.0, 2.5)
    assert (_f(out["exposed"]), _f(out["hidden_fwd"]), _f(out["hidden_bwd"])) == (3.5, 0.0, 4.5)
    job, g, _ = _setup(sequence_parallel=False)
    out = model_parallel_comm.output_layer_tp_collective(job, g, 4.0, 2.0, 3.0, 2.5)
    assert (_f(out["exposed"]), _f(out["hidden_fwd"]), _f(out["hidden_bwd"])) == (1.5, 0.0, 2.5)
    job, g, _ = _setup(sequence_parallel=False, tp_async_allreduce=False)
    out = model_parallel_comm.output_layer_tp_collective(job, g, 4.0, 2.0, 3.0, 2.5)
    assert (_f(out["exposed"]), _f(out["hidden_bwd"])) == (4.0, 0.0)
    # nanotron, SP: the forward gather under the own shard's GEMM G / t = 0.625: exposed 2.375 + 0.5, hidden 0.625
    job, g, _ = _setup(sequence_parallel=True, nanotron_trainer=True)
    out = model_parallel_comm.output_layer_tp_collective(job, g, 4.0, 2.0, 3.0, 2.5)
    assert (_f(out["exposed"]), _f(out["hidden_fwd"]), _f(out["hidden_bwd"])) == (2.875, 0.625, 4.5)
    # nanotron without SP: tp_mode ALL_REDUCE is synchronous, the backward all-reduce exposed
    job, g, _ = _setup(sequence_parallel=False, nanotron_trainer=True)
    assert _f(model_parallel_comm.output_layer_tp_collective(job, g, 4.0, 2.0, 3.0, 2.5)["exposed"]) == 4.0


@pytest.mark.parametrize(("impl", "ops"), [
    ("megatron", (("allreduce", 4.0 * T),) * 3),  # max, predicted logit, sum of exp
    ("megatron_fused", (("allreduce", 4.0 * T), ("allreduce", 8.0 * T))),  # max; the two concatenated
    ("te", (("allgather", 12.0 * T * 4),)),  # (max, sum, target logit) of every rank: gathered 12 T t
    ("flash_attn", (("allgather", 4.0 * T * 4), ("allreduce", 4.0 * T)))])  # the lse gathered, the losses summed
def test_cross_entropy_bytes(impl: str, ops: tuple[tuple[str, float], ...]) -> None:
    job, g, c = _setup(sequence_parallel=True, loss_impl=impl)
    assert _f(c["tp_loss"]) == pytest.approx(sum(_t(job, op, n) for op, n in ops), rel=1e-12)


def test_nanotron_loss_is_three_allreduces() -> None:
    job, g, c = _setup(sequence_parallel=True, nanotron_trainer=True, loss_impl="te")
    assert _f(c["tp_loss"]) == pytest.approx(3.0 * _t(job, "allreduce", 4.0 * T), rel=1e-12)


@pytest.mark.parametrize("sp", [True, False])
@pytest.mark.parametrize("mtp", [0, 2])
def test_stage_with_logits_pays_each_head(sp: bool, mtp: int) -> None:
    """The stage's exposed TP time with the head's collectives less without them: (1 + D) x (the output layer's
    exposed part + the loss's three all-reduces), the GEMM G that hides the backward ones the logits' own."""
    job, g, c = _setup(mtp=mtp, sequence_parallel=sp)
    comp = _comp(job, g)
    assert _f(comp["head_uses"]) == 1.0 + mtp
    gemm = _f(comp["head_gemm"])
    ag, rs, ar = _t(job, "allgather", ACT), _t(job, "reducescatter", ACT), _t(job, "allreduce", ACT)
    head = ag + max(ag - gemm, 0.0) + max(rs - gemm, 0.0) if sp else max(ar - gemm, 0.0)
    by_hand = (1.0 + mtp) * (head + 3.0 * _t(job, "allreduce", 4.0 * T))
    with_head = _f(model_parallel_comm._model_parallel_comm(job, g, comp, c)["tp"])
    without = _f(model_parallel_comm._model_parallel_comm(job, g, dict(comp, head_uses=np.zeros(1)), c)["tp"])
    assert with_head - without == pytest.approx(by_hand, rel=1e-9)
    assert with_head - without > 0.0


def test_none_off_the_logits_stage_at_tp1_and_for_xla() -> None:
    job, g, c = _setup(sequence_parallel=True)
    assert _f(_comp(job, g, logits=False)["head_uses"]) == 0.0
    job1, g1, c1 = _setup(tp=1)
    assert _f(c1["tp_loss"]) == 0.0
    assert _f(model_parallel_comm.output_layer_tp_collective(job1, g1, 4.0, 2.0, 3.0, 2.5)["exposed"]) == 0.0
    jx, gx, cx = _setup(sequence_parallel=True, layer_impl="xla")
    assert _f(cx["tp_loss"]) == 0.0
    assert _f(model_parallel_comm.output_layer_tp_collective(jx, gx, 4.0, 2.0, 3.0, 2.5)["exposed"]) == 0.0
