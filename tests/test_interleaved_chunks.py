"""Interleaved 1F1B over uneven model chunks (Megatron-Core's account-for-embedding/loss split and layouts).

The closed form (:func:`scalemodel.cost.pipeline.interleaved_uneven_time`) is checked against a step-by-step
simulation of Megatron's interleaved schedule written here from its description (Narayanan et al. 2021 §2.2.2;
Megatron-Core ``forward_backward_pipelining_with_interleaving``): rank r runs (p - r - 1) x 2 + (V - 1) x p
warm-up forwards, then one forward and one backward in turn, then the remaining backwards; virtual
micro-batch k runs on model chunk (k mod pV) // p (backwards in reverse chunk order), micro-batch
(k // pV) p + k mod p. Every operation starts when its rank is free and its input exists (the forward of
the previous chunk, the backward of the next chunk). The layer counts of the split are counted by hand.
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
from scalemodel.engine.step import Infeasible, _stage, _stage_time, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _ops(p: int, v: int, m: int, r: int) -> list[tuple[str, int, int]]:
    """Rank r's operations in order: (F or B, micro-batch, global chunk index)."""
    total = m * v
    warm = min((p - r - 1) * 2 + (v - 1) * p, total)

    def level(k: int, forward: bool) -> int:
        c = (k % (p * v)) // p
        return c if forward else v - 1 - c

    def mb(k: int) -> int:
        return (k // (p * v)) * p + k % p

    seq = [("F", mb(k), level(k, True) * p + r) for k in range(warm)]
    for k in range(total - warm):
        seq.append(("F", mb(k + warm), level(k + warm, True) * p + r))
        seq.append(("B", mb(k), level(k, False) * p + r))
    seq += [("B", mb(k), level(k, False) * p + r) for k in range(total - warm, total)]
    return seq


def simulate(p: int, v: int, m: int, f: list[float], b: list[float]) -> float:
    """Makespan of the schedule with chunk forward/backward times f[c], b[c] (c = k p + r)."""
    n = p * v

    def deps(op: Any) -> list[Any]:
        kind, j, c = op
        if kind == "F":
            return [("F", j, c - 1)] if c > 0 else []
        return [("F", j, c)] + ([("B", j, c + 1)] if c < n - 1 else [])

    return makespan([_ops(p, v, m, r) for r in range(p)], deps, lambda op: f[op[2]] if op[0] == "F" else b[op[2]])


def closed_form(p: int, v: int, m: int, f: list[float], b: list[float]) -> float:
    """interleaved_uneven_time on chunk lists whose chunks other than the first and last are equal."""
    t = [x + y for x, y in zip(f, b, strict=True)]
    rank = [sum(t[k * p + r] for k in range(v)) for r in range(p)]
    mid_rank = rank[1] if p >= 3 else 0.0
    return float(pipeline.interleaved_uneven_time(m, p, rank[0], mid_rank, rank[p - 1], t[0], t[1]))


@pytest.mark.parametrize("p,v,m", [(2, 2, 4), (4, 2, 8), (4, 4, 16), (8, 3, 16), (8, 8, 32), (16, 4, 32)])
def test_equal_chunks_match_narayanan(p, v, m):
    # equal chunks: (m V + p - 1) chunk times = (m + (p-1)/V) t, Narayanan et al. 2021 §2.2.2
    f, b = [1.0] * (p * v), [2.0] * (p * v)
    sim = simulate(p, v, m, f, b)
    assert sim == pytest.approx((m * v + p - 1) * 3.0, rel=1e-12)
    assert closed_form(p, v, m, f, b) == pytest.approx(sim, rel=1e-12)
    bubble = pipeline.bubble_microbatches(p, "interleaved", v)
    assert float(bubble) * v * 3.0 == pytest.approx(sim - m * v * 3.0, rel=1e-12)


def test_heavier_last_chunk_is_exact():
    # a last chunk with the logits of a large vocabulary outweighs the others: the last rank sets the pace,
    # and the first p-1 chunks fill the pipeline in front of it
    rng = random.Random(7)
    for _ in range(40):
        p, v = rng.choice([2, 4, 8]), rng.choice([2, 3, 4])
        m = p * rng.choice([1, 2, 4])
        f = [1.0] * (p * v)
        f[-1] = rng.uniform(1.0, 2.5)
        ratio = rng.uniform(1.5, 2.5)
        b = [ratio * x for x in f]
        assert closed_form(p, v, m, f, b) == pytest.approx(simulate(p, v, m, f, b), rel=1e-9)


def test_megatron_family_within_one_percent_and_never_above():
    # lighter first chunk (the embedding counted as a layer) and a lighter or heavier last chunk
    rng = random.Random(11)
    worst = 0.0
    for _ in range(60):
        p, v = rng.choice([4, 8, 16]), rng.choice([2, 3, 4, 8])
        m = p * rng.choice([4, 8])
        f = [1.0] * (p * v)
        f[0], f[-1] = rng.uniform(0.2, 1.0), rng.uniform(0.2, 2.5)
        ratio = rng.uniform(1.5, 2.5)
        b = [ratio * x for x in f]
        sim, cf = simulate(p, v, m, f, b), closed_form(p, v, m, f, b)
        assert cf <= sim * (1 + 1e-12)
        worst = max(worst, 1 - cf / sim)
    assert worst < 0.01


def test_closed_form_is_a_lower_bound_even_for_a_heavier_first_chunk():
    rng = random.Random(5)
    for _ in range(30):
        p, v = rng.choice([2, 4, 8]), rng.choice([2, 4])
        m = p * rng.choice([1, 2, 4])
        f = [1.0] * (p * v)
        f[0], f[-1] = rng.uniform(1.0, 2.0), rng.uniform(0.3, 2.0)
        b = [2.0 * x for x in f]
        assert closed_form(p, v, m, f, b) <= simulate(p, v, m, f, b) * (1 + 1e-12)


@pytest.mark.parametrize("layers,pp,v,expected", [
    (126, 16, 4, (1, 2, 1)),  # Llama 3.1 405B: 126 + 2 = 128 slots, 64 chunks of 2
    (126, 8, 8, (1, 2, 1)),
    (94, 8, 3, (3, 4, 3)),  # Qwen3-235B: 96 slots, 24 chunks of 4
    (94, 8, 2, (5, 6, 5)),  # 16 chunks of 6
    (94, 8, 4, (2, 3, 2)),  # 32 chunks of 3
])
def test_megatron_account_for_embedding_and_loss_split(layers, pp, v, expected):
    first, mid, last = pipeline.megatron_chunk_layers(layers, pp, v, embedding_in_split=True, loss_in_split=True)
    assert (first, mid, last) == expected
    assert first + (pp * v - 2) * mid + last == layers


def test_megatron_split_refuses_what_megatron_asserts():
    with pytest.raises(ValueError, match="63 slots"):
        pipeline.megatron_chunk_layers(61, 4, 4, embedding_in_split=True, loss_in_split=True)


def _job(model: str, batch: int, cluster: str = "dgx-h100"):
    tr = TrainingSpec(global_batch=batch, micro_batch=1)
    return build_job(load_cluster(cluster), load_workload(model), tr), tr


def test_balanced_chunk_sizes_reproduce_the_plain_interleaved_step():
    # 126 layers over pp 7 x V 2 = 14 chunks of 9 split evenly; naming 9 and 9 must not change the step
    job, tr = _job("llama3-405b", 56)
    plain = evaluate(job, grid_from_strategy(StrategySpec(tp=8, pp=7, schedule="interleaved:2"), tr, 56, job))
    assert int(plain.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    named = evaluate(job, grid_from_strategy(StrategySpec(tp=8, pp=7, schedule="interleaved:2",
                                                          first_chunk_layers=9, last_chunk_layers=9), tr, 56, job))
    # same work, and (issue 13) one route for both: the bubble is the (p-1)/V middle-rank chunk times in front
    # of the last rank, not the last rank's own time with the logits
    assert float(named.breakdown["compute"][0]) == pytest.approx(float(plain.breakdown["compute"][0]), rel=1e-12)
    g = grid_from_strategy(StrategySpec(tp=8, pp=7, schedule="interleaved:2"), tr, 56, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    w_mid = float(_stage_time(job, g, groups, np.asarray([18.0]), False)[0])
    w_last = float(_stage_time(job, g, groups, np.asarray([18.0]), True)[0])
    assert w_last > w_mid
    # rank 0's first chunk also runs the word embedding (its gradient and TP collective,
    # docs/model.md#first-stage-embedding-grad, #embedding-tp-comm): its forward starts the step and its backward
    # ends it, so what it adds to a chunk is on the path once
    w_emb = float(_stage(job, g, groups, np.asarray([18.0]), False, embedding=True).time[0]) - w_mid
    assert w_emb > 0.0
    assert float(plain.breakdown["bubble"][0]) == pytest.approx(6 / 2 * w_mid + w_emb, rel=1e-12)
    assert float(plain.step_time[0]) == pytest.approx(float(named.step_time[0]), rel=1e-12)
    assert float(named.breakdown["bubble"][0]) == pytest.approx(6 / 2 * w_mid + w_emb, rel=1e-12)


def test_engine_pipeline_time_matches_the_simulation_on_its_own_chunk_times():
    # Llama 3.1 405B, pp 4 x V 2 with Megatron's split (15, 16 x 6, 15): the engine's (m + bubble) t_mb against
    # the simulated schedule on the chunk times the engine prices (its own per-rank costs)
    job, tr = _job("llama3-405b", 32)
    st = StrategySpec(tp=8, pp=4, schedule="interleaved:2", first_chunk_layers=15, last_chunk_layers=15)
    g = grid_from_strategy(st, tr, 32, job)
    res = evaluate(job, g)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    m = int(res.microbatches[0])
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    pp_only = float(_stage_time(job, g, groups, np.zeros(1), False)[0])

    def chunk(layers: float, logits: bool = False, embedding: bool = False) -> float:
        time = _stage(job, g, groups, np.asarray([layers]), logits, embedding=embedding).time
        return float(time[0]) - pp_only + pp_only / 2

    p, v = 4, 2
    times = [chunk(16.0)] * (p * v)
    # the first chunk with the word embedding (rank 0), the last with the logits
    times[0], times[-1] = chunk(15.0, embedding=True), chunk(15.0, logits=True)
    pipelined = (m + float(res.extras["bubble_microbatches"][0])) * float(res.extras["microbatch_time"][0])
    for ratio in (1.0, 2.0, 3.0):
        f = [t / (1 + ratio) for t in times]
        b = [t - x for t, x in zip(times, f, strict=True)]
        sim = simulate(p, v, m, f, b)
        assert pipelined <= sim * (1 + 1e-9)
        assert pipelined == pytest.approx(sim, rel=0.01)


def test_uneven_chunks_rank_layers_and_feasibility():
    job, tr = _job("llama3-405b", 64)
    ok = grid_from_strategy(StrategySpec(tp=8, pp=16, schedule="interleaved:4", first_chunk_layers=1,
                                         last_chunk_layers=1), tr, 128, job)
    assert int(evaluate(job, ok).reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    # 126 - 1 - 3 = 122 over 62 chunks does not divide: refused as bad input since round 24 (split24: it was priced
    # infeasible; Megatron-Core's rule, tests/test_pipeline_split_rules.py)
    with pytest.raises(InputError, match="122 / 62"):
        grid_from_strategy(StrategySpec(tp=8, pp=16, schedule="interleaved:4", first_chunk_layers=1,
                                        last_chunk_layers=3), tr, 128, job)


def test_chunk_layers_need_an_interleaved_schedule():
    job, tr = _job("llama3-405b", 64)
    with pytest.raises(InputError, match="interleaved"):
        grid_from_strategy(StrategySpec(tp=8, pp=16, first_chunk_layers=1), tr, 128, job)
