"""rdv40: non-interleaved 1F1B with Megatron-Core's blocking batched exchanges as their own rendezvous
(cost.pipeline.one_f_one_b_time's ``exchange``, the class-wise forms likewise; docs/model.md#onefb-rendezvous),
checked against tests/test_pipeline_exchanges.py ``megatron_simulate``: a step-by-step run of Megatron-Core's program
(warm-up recv_forward / send_forward, send_forward_recv_backward, send_backward_recv_forward, cool-down recv_backward
/ send_backward), each batch holding its rank until c after the later of its two ranks posts it. It shares no code
with the formula. Integer stage times compare with ``==`` (their sums are exact in floats), random floats to 1e-12.

Until rdv40 the engine folded each rank's exchanges into its forward and backward (split as its compute) and priced
the graph without them: never above the simulation, short of it by up to 1.3 / 2.3 / 2.8 / 9.1 / 11 % at an exchange
0.25 / 0.5 / 1 / 2 / 4 x the lightest forward (onefb39), 3.8 % on the 25 GbE TCP profile at m 4: a blocking send's
wait for its peer, which no per-rank time holds."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_onefb39 import _engine_fold
from test_pipeline_exchanges import _engine_and_schedule, megatron_simulate

from scalemodel.cost import pipeline
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import _blocking_exchanges
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.training import StrategySpec

FAST = settings(max_examples=150, deadline=None)


def test_by_hand_two_ranks() -> None:
    """p 2, m 2, forwards [2, 1], backwards [4, 2], c 1, Megatron's program written out:
    rank 0: F0 0-2, send A0 (rank 1 waits in its recv from 0) 2-3, F1 3-5, send_forward_recv_backward posted at 5;
    rank 1: recv A0 -3, F0 3-4, B0 4-6, send_backward_recv_forward posted at 6: the batch pair runs 6-7;
    rank 0: B0 7-11, then recv_backward of G1; rank 1: F1 7-8, B1 8-10, send_backward posted at 10 waits for rank 0's
    receive (posted at 11): 11-12; rank 0: B1 12-16. T = 16, where the fold (rank 0: 2 + 1/3 and 4 + 2/3, rank 1:
    1 + 1/3 and 2 + 2/3) gives 15 2/3: rank 1's last send waits for rank 0's backward, which no rank's own time
    holds. The formula's chain: rank 0's forward, the send, rank 1's forward and backward with its exchange (4 + 3),
    rank 0's backward, then its cool-down backward at its pace b + c (4 + 5)."""
    f, b = [2.0, 1.0], [4.0, 2.0]
    assert megatron_simulate(2, 2, f, b, 1.0) == 16.0
    assert float(pipeline.one_f_one_b_time(2, np.asarray(f), np.asarray(b), 1.0)) == 16.0
    ff, bb = _engine_fold(2, f, b, 1.0)
    assert float(pipeline.one_f_one_b_time(2, np.asarray(ff), np.asarray(bb))) == pytest.approx(15.0 + 2.0 / 3.0)
    # the class form: rank 0 first, rank 1 last
    assert float(pipeline.one_f_one_b_three_class_time(2, 2, 2.0, 4.0, 9.0, 9.0, 1.0, 2.0, 1.0)) == 16.0


@st.composite
def ranks(draw: st.DrawFn, max_p: int = 9) -> tuple[int, int, list[int], list[int], int]:
    """(p, m, forwards, backwards, c): p 1..max_p, m 1..4p + 2, integer stage times 0..5 (zero stages included) and
    an exchange 0..5, each rank its own forward and backward."""
    p = draw(st.integers(1, max_p))
    m = draw(st.integers(1, 4 * p + 2))
    times = st.lists(st.integers(0, 5), min_size=p, max_size=p)
    return p, m, draw(times), draw(times), draw(st.integers(0, 5))


@FAST
@given(ranks())
def test_rank_by_rank_is_megatrons_program(case: tuple[int, int, list[int], list[int], int]) -> None:
    p, m, f, b, c = case
    got = float(pipeline.one_f_one_b_time(m, np.asarray(f, float), np.asarray(b, float), float(c)))
    assert got == megatron_simulate(p, m, [float(x) for x in f], [float(x) for x in b], float(c))


@FAST
@given(st.integers(1, 9), st.data())
def test_class_forms_are_megatrons_program(p: int, data: st.DataObject) -> None:
    """rank 0, n_u upper middle ranks, the other middle ranks, the last, an exchange: the closed branch (m >= 2p - 1)
    and the ranks written out (m < 2p - 1); n_u = p - 2 the three-class form."""
    m = data.draw(st.integers(1, 4 * p + 2))
    n_up = data.draw(st.integers(0, max(p - 2, 0)))
    cls = data.draw(st.lists(st.integers(0, 5), min_size=8, max_size=8))
    c = float(data.draw(st.integers(0, 5)))
    ff, bf, fu, bu, fo, bo, fl, bl = (float(x) for x in cls)
    n_low = max(p - 2, 0) - n_up
    f = [ff] + [fu] * n_up + [fo] * n_low + [fl] if p >= 2 else [ff]
    b = [bf] + [bu] * n_up + [bo] * n_low + [bl] if p >= 2 else [bf]
    sim = megatron_simulate(p, m, f, b, c)
    assert float(pipeline.one_f_one_b_four_class_time(m, p, n_up, ff, bf, fu, bu, fo, bo, fl, bl, c)) == sim
    if n_low == 0:
        assert float(pipeline.one_f_one_b_three_class_time(m, p, ff, bf, fu, bu, fl, bl, c)) == sim


def _draws(rng: random.Random, n: int, max_p: int) -> list[tuple[int, int, list[float], list[float], float]]:
    """Random pipelines: p 1..max_p, m 1..4p, forwards 0.3..2, each backward 1..3x its forward, an exchange 0..4x the
    lightest forward (a quarter of them at 0.25, 0.5, 1, 2 or 4x exactly, onefb39's grid)."""
    out = []
    for _ in range(n):
        p = rng.randint(1, max_p)
        m = rng.randint(1, 4 * p)
        f = [rng.uniform(0.3, 2.0) for _ in range(p)]
        b = [x * rng.uniform(1.0, 3.0) for x in f]
        x = rng.choice([0.25, 0.5, 1.0, 2.0, 4.0]) if rng.random() < 0.25 else rng.uniform(0.0, 4.0)
        out.append((p, m, f, b, x * min(f)))
    return out


def _vectorised(cases: list[tuple[int, int, list[float], list[float], float]]) -> list[float]:
    """one_f_one_b_time on every case, one call per pipeline depth (candidates broadcast along the leading axis)."""
    got = [0.0] * len(cases)
    for p in sorted({x[0] for x in cases}):
        idx = [i for i, x in enumerate(cases) if x[0] == p]
        m = np.asarray([cases[i][1] for i in idx], float)
        f = np.asarray([cases[i][2] for i in idx])
        b = np.asarray([cases[i][3] for i in idx])
        c = np.asarray([cases[i][4] for i in idx])
        for i, t in zip(idx, pipeline.one_f_one_b_time(m, f, b, c), strict=True):
            got[i] = float(t)
    return got


def test_thousands_of_random_float_pipelines() -> None:
    """3,000 pipelines up to p 12 and 60 of p 13..32, exchanges up to 4x the lightest forward: equal to the
    simulation to rounding; the engine's fold before rdv40 on the same draws is never above it and short where an
    exchange is long."""
    rng = random.Random(40)
    cases = _draws(rng, 3000, 12) + [(p, m, f, b, c) for p, m, f, b, c in _draws(rng, 400, 32) if p > 12][:60]
    assert sum(1 for x in cases if x[0] > 24) >= 10
    got = _vectorised(cases)
    short = 0.0
    for (p, m, f, b, c), t in zip(cases, got, strict=True):
        sim = megatron_simulate(p, m, f, b, c)
        assert t == pytest.approx(sim, rel=1e-12, abs=1e-12), (p, m, f, b, c)
        if p >= 2 and m <= 32:
            ff, bb = _engine_fold(p, f, b, c)
            folded = float(pipeline.one_f_one_b_time(m, np.asarray(ff), np.asarray(bb)))
            assert folded <= sim * (1 + 1e-12)
            short = max(short, 1.0 - folded / sim)
    assert short > 0.05  # the fold's shortfall the exchange closes (up to ~11 % on onefb39's draws)


def test_class_forms_vectorised_over_mixed_depths() -> None:
    """One call over pipelines of different depth, micro-batches and exchange (plan's candidates), each as alone
    against the simulation; the closed branch (m >= 2p - 1) and the ranks written out both occur."""
    rng = np.random.default_rng(40)
    n = 80
    p = rng.integers(1, 14, n).astype(float)
    m = np.maximum(1, (p * rng.uniform(0.3, 4.0, n)).astype(int)).astype(float)
    n_up = np.round(rng.uniform(0, 1, n) * np.maximum(p - 2, 0))
    cls = rng.uniform(0.1, 3.0, (8, n))
    c = rng.uniform(0.0, 4.0, n) * cls[0::2].min(axis=0)
    together = pipeline.one_f_one_b_four_class_time(m, p, n_up, *cls, c)
    assert together.shape == (n,) and np.any(m >= 2 * p - 1) and np.any(m < 2 * p - 1)
    for i in range(n):
        ff, bf, fu, bu, fo, bo, fl, bl = (float(x) for x in cls[:, i])
        k, u = int(p[i]), int(n_up[i])
        f = [ff] + [fu] * u + [fo] * (k - 2 - u) + [fl] if k >= 2 else [ff]
        b = [bf] + [bu] * u + [bo] * (k - 2 - u) + [bl] if k >= 2 else [bf]
        assert together[i] == pytest.approx(megatron_simulate(k, int(m[i]), f, b, float(c[i])), rel=1e-12)


@pytest.mark.parametrize("m", [4, 16, 64])
def test_engine_step_is_megatrons_program_over_tcp(m: int) -> None:
    """The engine's pipelined time (m + bubble) t_mb against the simulation over the engine's own ranks (compute less
    pipeline traffic) and its one boundary's exchange: gpt-39b, tp 4, pp 8 on 25 GbE TCP, an exchange about as long
    as a rank's compute. Before rdv40 it was short by 3.8 / 1.7 / 0.55 % at m 4 / 16 / 64
    (tests/test_pipeline_exchanges.py SHORT); now equal."""
    _, pipelined, sim, _ = _engine_and_schedule("pcie-25gbe", "gpt-39b", 4, 8, m)
    assert pipelined == pytest.approx(sim, rel=1e-9)


def test_only_megatrons_program_is_priced_as_rendezvous() -> None:
    """DeepSpeed's PipelineEngine and nanotron's engine (their own programs: two transfers a boundary one after the
    other), the interleaved schedule, GPipe and ZB-H1 keep their own pricing; Megatron-Core's 1F1B is the one
    priced as its rendezvous."""
    tr = TrainingSpec(global_batch=16, micro_batch=1)
    job = build_job(load_cluster("dgx-h100"), load_workload("gpt3-175b"), tr)
    want = {(): True, (("deepspeed_pipeline", True),): False, (("nanotron_trainer", True), ("zero", "1")): False,
            (("schedule", "interleaved:2"),): False, (("schedule", "gpipe"),): False}
    for extra, on in want.items():
        g = grid_from_strategy(StrategySpec(tp=8, pp=4, **dict(extra)), tr, 32, job)
        assert bool(np.all(_blocking_exchanges(g))) is on, extra
