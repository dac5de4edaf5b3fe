"""The interleaved bubble's chunks under overlap_p2p_comm (vpp35; step._chunk_time, docs/model.md#pp-comm-overlap).

model_parallel_comm.pp_overlap spreads the 2 (p v - 1) transfers a step exposes (tests/test_pp_overlap.py checks the
count against a step-by-step simulation of Megatron-Core's schedule) over (m + (p - 1)/v) micro-batch times of the
rank: the bubble's (p - 1)/v of them carry the rank's exposed exchanges at that rate. The chunked bubble
(step._chunked_bubble) prices the chain of p - 1 model chunks before the last rank on the chunks' own times; each is
checked here against the rank's own micro-batch time over v, computed from the rank's stage (not from a chunk), with
one layer a chunk (gpt-7.5b's 36 layers at pp 4 x v 9), where the old chunk (the one-layer stage with its own steady
hiding, ``min(p2p, forward / v)`` of one layer, less the empty stage's unhidden exchanges) took off more exchange time
than its layer's compute hid."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import Infeasible, _stage, _stage_time, evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec

P, V, M = 4, 9, 16


def _case(overlap: bool):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=M, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt-7.5b"), tr)
    st = StrategySpec(tp=4, pp=P, schedule=f"interleaved:{V}", overlap_p2p_comm=overlap,
                      overlap_p2p_send_wait=False)
    g = grid_from_strategy(st, tr, 4 * P, job)
    res = evaluate(job, g)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    layers = np.asarray([36.0 / P])
    w_mid = float(_stage_time(job, g, groups, layers, False)[0])  # a middle rank: its 9 one-layer chunks
    w_emb = float(_stage(job, g, groups, layers, False, embedding=True).time[0]) - w_mid  # rank 0's embedding
    return res, w_mid, w_emb


@pytest.mark.parametrize("overlap", [False, True])
def test_bubble_is_the_chain_of_rank_time_over_v(overlap: bool) -> None:
    res, w_mid, w_emb = _case(overlap)
    assert int(res.microbatches[0]) == M
    # the last rank (with the logits) is the busiest; micro-batch 0 reaches it through p - 1 chunks of a middle
    # rank's pace, rank 0's with its embedding once (tests/test_interleaved_chunks.py, the same without overlap)
    assert float(res.breakdown["bubble"][0]) == pytest.approx((P - 1) / V * w_mid + w_emb, rel=1e-9)


def test_overlap_shortens_the_chain_by_the_ranks_hidden_share_only() -> None:
    off, w_off, _ = _case(False)
    on, w_on, _ = _case(True)
    hidden = w_off - w_on  # what the overlap takes off one micro-batch of a middle rank
    assert hidden > 0.0
    # each of the p - 1 chunks of the chain loses 1/v of it, no more (the old chunk lost up to 2 exchanges a chunk)
    drop = float(off.breakdown["bubble"][0]) - float(on.breakdown["bubble"][0])
    assert drop == pytest.approx((P - 1) / V * hidden, rel=1e-6)
