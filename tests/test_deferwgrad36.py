"""Megatron-Core's ``defer_embedding_wgrad_compute`` (strategy defer_embedding_wgrad, wgrad_deferral_limit;
docs/model.md#defer-embedding-wgrad).

The output layer's weight-gradient GEMMs leave the last stage's backward and run after its last backward (the
drain, NVIDIA/Megatron-LM 3c0f3ef38c megatron/core/utils.py lines 269-351), hidden only in the wait for the flush.
Checked here: the drain and share formulas by hand; a step-by-step 1F1B timeline (tests/schedule_sim.makespan, the
drain an operation of its own on the last rank after its last backward) against the closed form's wait; the engine
at pp 8 against that timeline on its own stage times; pp 1 unchanged (Megatron-Core refuses the switch there).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from schedule_sim import makespan

from scalemodel.cost import pipeline
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.model_parallel_comm import _mp_collectives
from scalemodel.engine.step import _stage, _stage_forward_backward, evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _timeline(p: int, m: int, f: list[float], b: list[float], drain: float) -> float:
    """Makespan of non-interleaved 1F1B (rank r: min(p - r - 1, m) warm-up forwards, then F / B in turn, then the
    rest of the backwards; an operation starts when its rank is free and its input exists), with the last rank
    running one more operation of ``drain`` seconds after its last backward."""
    def ops(r: int) -> list[tuple[str, int, int]]:
        warm = min(p - r - 1, m)
        seq = [("F", j, r) for j in range(warm)]
        for i in range(m - warm):
            seq += [("F", warm + i, r), ("B", i, r)]
        seq += [("B", j, r) for j in range(m - warm, m)]
        return seq + ([("D", 0, r)] if r == p - 1 and drain > 0 else [])

    def deps(op: Any) -> list[Any]:
        kind, j, r = op
        if kind == "D":
            return []
        if kind == "F":
            return [("F", j, r - 1)] if r > 0 else []
        return [("F", j, r)] + ([("B", j, r + 1)] if r < p - 1 else [])

    def duration(op: Any) -> float:
        return {"F": f, "B": b}[op[0]][op[2]] if op[0] != "D" else drain

    return makespan([ops(r) for r in range(p)], deps, duration)


def test_drain_by_hand():
    # A + (n - 1) max(G, A) + G: 3 + 3 x 3 + 2 = 14 (all-gather the longer); 1 + 3 x 2 + 2 = 9; n G without SP
    assert float(pipeline.deferred_wgrad_drain(4, 2.0, 3.0)) == pytest.approx(14.0)
    assert float(pipeline.deferred_wgrad_drain(4, 2.0, 1.0)) == pytest.approx(9.0)
    assert float(pipeline.deferred_wgrad_drain(4, 2.0)) == pytest.approx(8.0)
    assert float(pipeline.deferred_wgrad_drain(0, 2.0, 1.0)) == 0.0


def test_share_by_hand():
    # 64 micro-batches, limit 22: 22 of 64 deferred; limit 0 all; pp 1 none; limit above m: all
    assert float(pipeline.deferred_wgrad_share(True, 4, 64, 1, 22)) == pytest.approx(22 / 64)
    assert float(pipeline.deferred_wgrad_share(True, 4, 64, 1, 0)) == 1.0
    assert float(pipeline.deferred_wgrad_share(True, 1, 64, 1, 0)) == 0.0
    assert float(pipeline.deferred_wgrad_share(False, 4, 64, 1, 0)) == 0.0
    assert float(pipeline.deferred_wgrad_share(True, 4, 16, 1, 22)) == 1.0
    # an MTP head's pass counts against the limit too: 2 passes x 16 micro-batches, 22 of 32
    assert float(pipeline.deferred_wgrad_share(True, 4, 16, 2, 22)) == pytest.approx(22 / 32)


@pytest.mark.parametrize("gemm", [0.3, 1.0])  # drain 2.4 under the 6-s wait; drain 8 beyond it by 2
def test_wait_matches_a_step_by_step_timeline(gemm: float) -> None:
    p, m, f, b = 4, 8, 1.0, 2.0
    off = _timeline(p, m, [f] * p, [b] * (p - 1) + [b + gemm], 0.0)
    on = _timeline(p, m, [f] * p, [b] * p, m * gemm)
    idle = float(pipeline.deferred_wgrad_idle(p, 1, b, b))
    assert idle == pytest.approx((p - 1) * b)  # the last micro-batch's backward on the 3 ranks before the last
    closed_on = float(pipeline.one_f_one_b_three_class_time(m, p, f, b, f, b, f, b)) + max(m * gemm - idle, 0.0)
    assert on == pytest.approx(closed_on, rel=1e-12)
    # the last rank paced the pipeline: each of its m backwards and the bubble's lose G; the drain beyond the wait
    # comes back
    assert off - on == pytest.approx((m + p - 1) * gemm - max(m * gemm - idle, 0.0) - (p - 1) * gemm, rel=1e-12)


def _gpt3(pp: int, defer: bool, limit: int = 0) -> tuple[Any, Any, Any]:
    tr = TrainingSpec(global_batch=32, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), tr)
    st = StrategySpec(tp=8, pp=pp, sequence_parallel=True, defer_embedding_wgrad=defer and pp > 1,
                      wgrad_deferral_limit=limit)
    g = grid_from_strategy(st, tr, 8 * pp, job)
    # at pp 1 the strategy is refused (ux37: job._check_defer_embedding_wgrad, as Megatron-Core's config refuses it);
    # the engine's grid still takes the switch there (the planner's grids), set on the array
    g = msgspec.structs.replace(g, defer_embedding_wgrad=np.full_like(g.defer_embedding_wgrad, defer))
    return job, g, evaluate(job, g)


def test_engine_pp8_by_hand_and_against_the_timeline():
    # GPT-3 175B, tp 8 sp, pp 8 (12 layers a rank), dp 1, 32 micro-batches
    job, g, on = _gpt3(8, True)
    _, g_off, off = _gpt3(8, False)
    p, m = 8, int(on.microbatches[0])
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    last_off = _stage(job, g_off, groups, np.asarray([12.0]), True)
    last_on = _stage(job, g, groups, np.asarray([12.0]), True)
    # the output GEMM T x V/t x h; its wgrad takes as long
    gemm = float(np.asarray(last_off.compute["head_gemm"]).ravel()[0])
    assert gemm > 0
    # the last stage's backward loses exactly one wgrad GEMM a micro-batch
    assert float(last_off.compute["backward"][0]) - float(last_on.compute["backward"][0]) == pytest.approx(gemm)
    # the drain: A + (m - 1) max(G, A) + G, A one activation's all-gather over TP
    ag = float(np.asarray(_mp_collectives(job, g, groups)["tp_ag"]).ravel()[0])
    drain = ag + (m - 1) * max(gemm, ag) + gemm
    fb = [_stage_forward_backward(_stage(job, g, groups, np.asarray([12.0]), lg, embedding=emb), end=end)
          for lg, emb, end in [(False, True, True)] + [(False, False, False)] * (p - 2) + [(True, False, True)]]
    f, b = [float(x[0][0]) for x in fb], [float(x[1][0]) for x in fb]
    idle = b[0] + (p - 2) * b[1]
    exposed = max(drain - idle, 0.0)
    pipelined = (m + float(on.extras["bubble_microbatches"][0])) * float(on.extras["microbatch_time"][0])
    assert float(on.breakdown["bubble"][0]) - (pipelined - m * float(on.extras["microbatch_time"][0])) \
        == pytest.approx(exposed, rel=1e-9, abs=1e-12)
    # the engine's pipelined part plus the exposed drain against the timeline on its own stage times
    sim = _timeline(p, m, f, b, drain)
    assert pipelined + exposed == pytest.approx(sim, rel=0.01)
    assert float(on.step_time[0]) < float(off.step_time[0])  # the saving is real at this size


def test_engine_limit_defers_a_share():
    job, g, lim = _gpt3(8, True, limit=8)  # 8 of 32 micro-batches
    _, g_off, _ = _gpt3(8, False)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    last_off = _stage(job, g_off, groups, np.asarray([12.0]), True)
    last_lim = _stage(job, g, groups, np.asarray([12.0]), True)
    drop = float(last_off.compute["backward"][0]) - float(last_lim.compute["backward"][0])
    assert drop == pytest.approx(8 / 32 * float(np.asarray(last_off.compute["head_gemm"]).ravel()[0]))


def test_pp1_unchanged():
    # Megatron-Core refuses the switch without a pipeline (model_parallel_config.py, 3c0f3ef38c lines 296-299)
    _, _, on = _gpt3(1, True)
    _, _, off = _gpt3(1, False)
    assert float(on.step_time[0]) == float(off.step_time[0])
    for k in on.breakdown:
        assert float(on.breakdown[k][0]) == float(off.breakdown[k][0]), k
