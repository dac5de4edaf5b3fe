"""Non-interleaved 1F1B over stages of unequal time (issue 13).

The closed form (:func:`scalemodel.cost.pipeline.one_f_one_b_time`) is checked against a step-by-step
simulation of the schedule written here from its description (Narayanan et al. 2021 §2.2.1; Megatron-LM
``forward_backward_pipelining_without_interleaving``): rank r runs min(p - r - 1, m) warm-up forwards, then one
forward and one backward in turn, then the remaining backwards. Every operation starts when its rank is free
and its input exists (the forward on the rank before, the backward on the rank after).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from schedule_sim import makespan

from scalemodel.cost import pipeline
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import Infeasible, _stage, _stage_forward_backward, evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _ops(p: int, m: int, r: int) -> list[tuple[str, int, int]]:
    """Rank r's operations in order: (F or B, micro-batch, rank)."""
    warm = min(p - r - 1, m)
    seq = [("F", j, r) for j in range(warm)]
    for i in range(m - warm):
        seq += [("F", warm + i, r), ("B", i, r)]
    return seq + [("B", j, r) for j in range(m - warm, m)]


def simulate(p: int, m: int, f: list[float], b: list[float]) -> float:
    def deps(op: Any) -> list[Any]:
        kind, j, r = op
        if kind == "F":
            return [("F", j, r - 1)] if r > 0 else []
        return [("F", j, r)] + ([("B", j, r + 1)] if r < p - 1 else [])

    return makespan([_ops(p, m, r) for r in range(p)], deps, lambda op: f[op[2]] if op[0] == "F" else b[op[2]])


def _random_stages(rng: random.Random, p: int) -> tuple[list[float], list[float]]:
    ratio = rng.uniform(1.5, 2.5)  # backward / forward
    w = [rng.uniform(0.5, 1.5) for _ in range(p)]
    f = [x / (1 + ratio) for x in w]
    return f, [x - y for x, y in zip(w, f, strict=True)]


@pytest.mark.parametrize("p", range(2, 9))
def test_equal_stages_give_the_textbook_step(p):
    # (m + p - 1) t: Huang et al. 2019 (GPipe), Narayanan et al. 2021 §2.2.1
    for m in (p, 2 * p, 4 * p):
        f, b = [1.0] * p, [2.0] * p
        sim = simulate(p, m, f, b)
        assert sim == pytest.approx((m + p - 1) * 3.0, rel=1e-12)
        assert float(pipeline.one_f_one_b_time(m, f, b)) == pytest.approx(sim, rel=1e-12)
        assert float(pipeline.one_f_one_b_three_class_time(m, p, 1, 2, 1, 2, 1, 2)) == pytest.approx(sim, rel=1e-12)


def test_random_stages_close_to_the_simulation_and_never_above():
    rng = random.Random(13)
    worst, exact, overshoot, n = 0.0, 0, 0.0, 300
    for _ in range(n):
        p = rng.randint(2, 8)
        m = rng.randint(p, 4 * p)
        f, b = _random_stages(rng, p)
        sim = simulate(p, m, f, b)
        cf = float(pipeline.one_f_one_b_time(m, f, b))
        assert cf <= sim * (1 + 1e-12)  # a chain of dependent operations: a lower bound
        worst = max(worst, 1 - cf / sim)
        exact += cf >= sim * (1 - 1e-12)
        overshoot = max(overshoot, (m + p - 1) * max(x + y for x, y in zip(f, b, strict=True)) / sim - 1)
    # onefb39: the schedule's makespan (the four chains of sessions 13-38: exact in 4 of 5, up to 3.3 % short)
    assert worst < 1e-12
    assert exact == n
    assert overshoot > 0.3  # the upper bound it replaces is far off on the same draws


def test_three_class_form_equals_the_general_one():
    rng = random.Random(3)
    for _ in range(200):
        p = rng.randint(1, 12)
        m = rng.randint(1, 4 * p)
        (ff, fm, fl), r = [rng.uniform(0.2, 2.0) for _ in range(3)], rng.uniform(1.0, 3.0)
        f = ([ff] + [fm] * (p - 2) + [fl]) if p >= 2 else [ff]
        b = [x * r for x in f]
        general = float(pipeline.one_f_one_b_time(m, f, b))
        three = float(pipeline.one_f_one_b_three_class_time(m, p, ff, ff * r, fm, fm * r, f[-1], f[-1] * r))
        assert three == pytest.approx(general, rel=1e-12)


def test_three_class_stages_against_the_simulation():
    rng = random.Random(21)
    exact = 0
    for _ in range(100):
        p = rng.randint(2, 8)
        m = rng.randint(p, 4 * p)
        (ff, fm, fl), r = [rng.uniform(0.3, 2.0) for _ in range(3)], rng.uniform(1.5, 2.5)
        f = [ff] + [fm] * (p - 2) + [fl]
        b = [x * r for x in f]
        sim = simulate(p, m, f, b)
        cf = float(pipeline.one_f_one_b_three_class_time(m, p, ff, ff * r, fm, fm * r, fl, fl * r))
        assert cf <= sim * (1 + 1e-12)
        assert cf == pytest.approx(sim, rel=1e-12)  # onefb39 (the four chains: up to 4.5 % short, exact in 9 of 10)
        exact += cf >= sim * (1 - 1e-12)
    assert exact == 100


def test_heavier_last_stage_is_exact():
    # the last stage with the logits sets the pace; the stages in front only fill the pipeline once
    rng = random.Random(8)
    for _ in range(60):
        p = rng.randint(2, 8)
        m = rng.randint(p, 4 * p)
        f = [1.0] * p
        f[-1] = rng.uniform(1.0, 2.0)
        b = [2.0 * x for x in f]
        assert float(pipeline.one_f_one_b_time(m, f, b)) == pytest.approx(simulate(p, m, f, b), rel=1e-12)
        assert simulate(p, m, f, b) == pytest.approx(m * 3 * f[-1] + (p - 1) * 3.0, rel=1e-12)


def test_engine_pipelined_time_matches_the_simulation_on_its_own_stage_times():
    # GPT-3 175B, 96 layers over pp 8 with a lighter first stage (6) and 90 / 7 ... : first 6, last 6, 12 x 6 mid
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), TrainingSpec(global_batch=32, micro_batch=1))
    tr = TrainingSpec(global_batch=32, micro_batch=1)
    st = StrategySpec(tp=8, pp=8, first_stage_layers=6, last_stage_layers=6)
    g = grid_from_strategy(st, tr, 64, job)
    res = evaluate(job, g)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    m, p = int(res.microbatches[0]), 8
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    fb = [_stage_forward_backward(_stage(job, g, groups, np.asarray([n]), lg)) for n, lg in
          [(6.0, False)] + [(14.0, False)] * (p - 2) + [(6.0, True)]]
    f, b = [float(x[0][0]) for x in fb], [float(x[1][0]) for x in fb]
    sim = simulate(p, m, f, b)
    pipelined = (m + float(res.extras["bubble_microbatches"][0])) * float(res.extras["microbatch_time"][0])
    assert pipelined <= sim * (1 + 1e-9)
    assert pipelined == pytest.approx(sim, rel=0.01)  # these ranks are not the engine's own (no embedding on rank 0,
    # the end ranks with a middle rank's two exchanges: step._end_rank); tests/test_pipeline_exchanges.py compares those
    t_max = max(x + y for x, y in zip(f, b, strict=True))
    assert pipelined < (m + p - 1) * t_max * 0.99  # below the old upper bound


@pytest.mark.parametrize("eta", [1.0, 0.1])  # at 0.1 the cut windows expose TP traffic
def test_pipeline_ranks_are_priced_as_evaluate_prices_its_micro_batch(eta: float) -> None:
    """The rank times the pipeline formulas use are evaluate's own: with the overlap efficiency below 1 the
    busiest rank's time is still the micro-batch time t_mb the bubble is counted in (the formulas once priced
    ranks with full overlap windows while t_mb used the cut ones); the last rank, an end rank, less the second
    boundary's exchange it does not pay (mp['pp_edge'], step._end_rank), in t_mb as in the formulas' paths."""
    from msgspec.structs import replace

    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), TrainingSpec(global_batch=32, micro_batch=1))
    job = replace(job, overlap_efficiency=eta)
    g = grid_from_strategy(StrategySpec(tp=8, pp=8), TrainingSpec(global_batch=32), 64, job)
    res = evaluate(job, g)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    st = _stage(job, g, groups, np.asarray([12.0]), True)  # 96 layers / 8, with the logits
    last = float(st.time[0]) - float(np.asarray(st.mp["pp_edge"]).reshape(-1)[0])
    assert float(np.asarray(st.mp["pp_edge"]).reshape(-1)[0]) > 0.0
    assert last == pytest.approx(float(res.extras["microbatch_time"][0]), rel=1e-12)
