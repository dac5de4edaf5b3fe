"""The word embedding's output reduction over TP (model_parallel_comm.embedding_tp_collective,
docs/model.md#embedding-tp-comm). VocabParallelEmbedding's output is a partial sum over the TP ranks' vocabulary rows
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/tensor_parallel/layers.py lines 367-385): with sequence parallelism and
no learned positions a reduce-scatter, whose backward all-gathers; with learned positions an all-reduce, then
scatter_to_sequence_parallel_region, whose backward all-gathers (language_model_embedding.py lines 51-56, 143-147);
without sequence parallelism an all-reduce alone (its backward the identity). One b s h bf16 activation, on the
stage that embeds (the one stage at pp 1, rank 0 at pp > 1), exposed. The collectives' seconds are the collectives
model's for those bytes on the TP group (the primitive, tested in tests/test_collectives*.py); which ones, and where,
is worked out here by hand."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, S, B, LAYERS = 4096, 4096, 1, 4
ACT = B * S * H * 2.0  # one micro-batch's activation, bf16: 32 MiB


def _setup(positions: int = 0, **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="d", layers=LAYERS, hidden=H, heads=32, ffn_hidden=4 * H, vocab=32000, seq_len=S,
                             tied_embeddings=False, position_embeddings=positions)
    tr = TrainingSpec(global_batch=16, micro_batch=B, precision="bf16", seq_len=S)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, model_parallel_comm._mp_collectives(job, g, groups)


def _t(job, op: str, ranks: int) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time(op, np.asarray(ACT), place(float(ranks), 1.0, job.network)))


def _tp(job, g, c, embedding: bool, logits: bool = True) -> float:  # type: ignore[no-untyped-def]
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(2.0), logits_on_stage=logits,
                                                embedding_on_stage=embedding)
    comp = step._overlap_windows(raw, job.overlap_efficiency)
    return float(np.ravel(model_parallel_comm._model_parallel_comm(job, g, comp, c)["tp"])[0])


@pytest.mark.parametrize(("sp", "positions", "ops"), [
    (True, 0, ("reducescatter", "allgather")),  # reduce_scatter_embeddings
    # learned positions (a table as long as S): all-reduce, then the scatter (backward gathers)
    (True, 4096, ("allreduce", "allgather")),
    (False, 0, ("allreduce",))])  # no SP: the all-reduce, backward the identity
def test_pp1_stage_pays_the_collectives(sp: bool, positions: int, ops: tuple[str, ...]) -> None:
    job, g, c = _setup(positions, tp=4, pp=1, dp=2, sequence_parallel=sp, zero="1", megatron_ddp=True)
    by_hand = sum(_t(job, op, 4) for op in ops)
    assert float(np.ravel(c["tp_embed"])[0]) == pytest.approx(by_hand, rel=1e-12)
    # the one stage embeds: its exposed TP traffic is the layers' plus these (the logits stage at pp 1)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(2.0), logits_on_stage=True)
    assert float(np.ravel(raw["embedding_uses"])[0]) == 1.0
    no_emb = dict(c, tp_embed=np.zeros(1))
    comp = step._overlap_windows(raw, job.overlap_efficiency)
    with_emb = float(np.ravel(model_parallel_comm._model_parallel_comm(job, g, comp, c)["tp"])[0])
    without = float(np.ravel(model_parallel_comm._model_parallel_comm(job, g, comp, no_emb)["tp"])[0])
    assert with_emb - without == pytest.approx(by_hand, rel=1e-9)


def test_only_rank0_at_pp2_and_none_at_tp1() -> None:
    job, g, c = _setup(tp=4, pp=2, dp=1, sequence_parallel=True, zero="1", megatron_ddp=True)
    by_hand = _t(job, "reducescatter", 4) + _t(job, "allgather", 4)
    assert _tp(job, g, c, True, False) - _tp(job, g, c, False, False) == pytest.approx(by_hand, rel=1e-9)
    # the last rank (logits, no MTP) does not embed
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(2.0), logits_on_stage=True)
    assert float(np.ravel(raw["embedding_uses"])[0]) == 0.0
    job1, g1, c1 = _setup(tp=1, pp=2, dp=4, zero="1", megatron_ddp=True)
    assert float(np.ravel(c1["tp_embed"])[0]) == 0.0
