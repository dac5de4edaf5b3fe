"""dsend38: DeepSpeed's PipelineEngine end ranks skip TP all-gathers as well as the second boundary's shards
(docs/model.md#deepspeed-end-ranks; the per-rank count and the engine against the TrainSchedule simulation are in
tests/test_pipeline_exchanges.py). Here what must not move: the Megatron-Core, legacy scatter/gather and nanotron
end ranks stay symmetric (both skip one boundary's exchange), DeepSpeed at tp 1 has no gathers to skip, and at pp 2
the one DeepSpeed rank pair is priced as the first and the last rank, no rank with a middle rank's 3 gathers."""

from __future__ import annotations

import numpy as np
import pytest
from grid_helpers import evaluated, first

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.step import _stage
from scalemodel.specs import TrainingSpec, load_workload


def _edges(job, g, layers: float = 9.0) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(priced stage's pp traffic, mp['pp_edge_first'], mp['pp_edge']) of one rank of ``layers`` layers."""
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    mp = _stage(job, g, groups, np.asarray([layers]), False).mp
    return first(mp["pp"]), first(mp["pp_edge_first"]), first(mp["pp_edge"])


@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("switch", [{}, {"pp_scatter_gather": True}, {"nanotron_trainer": True, "zero": "1"}])
def test_other_pipelines_end_ranks_stay_symmetric(a100, pp: int, switch: dict) -> None:  # type: ignore[no-untyped-def]
    """Megatron's 1F1B (batched exchanges), legacy Megatron-LM's scatter/gather (an all-gather after every receive,
    on both sides of each boundary) and nanotron's engine: the first and the last rank each skip one boundary's
    exchange at pp > 2, nothing at pp 2 (tests/test_pipeline_exchanges.py's simulations): the two edges are equal."""
    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, g, _ = evaluated(a100, wl, tr, 16 * pp, tp=2, pp=pp, **switch)
    priced, edge_first, edge_last = _edges(job, g)
    assert edge_first == edge_last
    assert (edge_last > 0.0) == (pp > 2)
    assert edge_last == pytest.approx(priced / 2.0 if pp > 2 else 0.0, rel=1e-9)  # one boundary's of two


@pytest.mark.parametrize("pp", [2, 4])
def test_deepspeed_at_tp1_has_no_gathers_to_skip(a100, pp: int) -> None:  # type: ignore[no-untyped-def]
    """tp 1: the PipelineEngine does not partition (is_pipe_partitioned = is_model_parallel, False), so an end rank
    skips only the second boundary's two whole activations: 2 T(b s h x 2) at pp 4, nothing at pp 2. gpt-7.5b on the
    8 GPUs of one DGX A100 node, dp 8 / pp (pipeline neighbours dp GPUs apart over NVLink)."""
    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job, g, _ = evaluated(a100, wl, tr, 8, tp=1, pp=pp, deepspeed_pipeline=True)
    act = wl.seq_len * wl.hidden * 2.0
    c = first(coll.collective_time("sendrecv", act, 2, job.network, stride=8 // pp))
    priced, edge_first, edge_last = _edges(job, g)
    assert priced == pytest.approx(2 * (pp - 1 if pp < 3 else 2) * c, rel=1e-9)
    assert edge_first == edge_last == pytest.approx(2 * c if pp > 2 else 0.0, rel=1e-9)


def test_deepspeed_pp2_prices_rank0_and_the_last_rank_by_hand(a100) -> None:  # type: ignore[no-untyped-def]
    """pp 2, tp 2 (gpt-7.5b, 8 micro-batches of 1): no middle rank. Rank 0 sends its output's shard, receives the
    gradient's, and all-gathers its output and that gradient before each backward: 2 T(shard) + 2 AG; the last
    rank receives and sends a shard and all-gathers its input only: 2 T(shard) + 1 AG. The stage the step prices
    (rank 0's, without the embedding) keeps 2 gathers, the last rank's pp_comm is m (2 T + AG): before dsend38 both
    carried 3."""
    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job, g, res = evaluated(a100, wl, tr, 32, tp=2, pp=2, deepspeed_pipeline=True)
    act = wl.seq_len * wl.hidden * 2.0
    shard = first(coll.collective_time("sendrecv", act / 2, 2, job.network, stride=16))  # stages 2 x 8 GPUs apart
    ag = first(coll.collective_time("allgather", act, 2, job.network, stride=1))
    priced, edge_first, edge_last = _edges(job, g, 18.0)
    assert priced == pytest.approx(2 * shard + 2 * ag, rel=1e-9)
    assert edge_first == 0.0
    assert edge_last == pytest.approx(ag, rel=1e-9)
    m = int(first(res.microbatches))
    assert m == 8
    # the last rank (the logits, 18 of the 36 layers) paces: its pp_comm m (2 T(shard) + 1 AG)
    assert first(res.breakdown["pp_comm"]) == pytest.approx(m * (2 * shard + ag), rel=1e-9)
