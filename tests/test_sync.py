"""Synchronisation strategies: parser, hand-derived formulas and a step-by-step simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import stragglers as st
from scalemodel.cost.sync import (
    DEFAULT_STALENESS_KAPPA,
    SyncStrategy,
    parse_sync,
    staleness_efficiency,
    sync_step,
)
from scalemodel.errors import InputError


def test_parser_accepts_all_forms():
    assert parse_sync("bsp") == SyncStrategy("bsp")
    assert parse_sync("backup:4") == SyncStrategy("backup", 4)
    assert parse_sync("ASP") == SyncStrategy("asp")
    assert parse_sync("ssp:3") == SyncStrategy("ssp", 3)
    assert parse_sync("local:8") == SyncStrategy("local", 8)
    assert parse_sync("hier:8") == SyncStrategy("hier", 8)
    assert parse_sync("hier:8:4") == SyncStrategy("hier", 8, 4)
    assert parse_sync("hier:8:4").label() == "hier:8:4"


@pytest.mark.parametrize("bad", ["", "bulk", "bsp:1", "backup", "backup:x", "backup:-1", "ssp:1.5",
                                 "local:0", "hier:0", "hier:4:0", "hier:1:2:3", "asp:2"])
def test_parser_rejects(bad):
    with pytest.raises(InputError) as exc:
        parse_sync(bad)
    assert "--sync" in exc.value.message()


def test_bsp_and_backup_by_hand():
    # BSP, normal mu = 1, sigma = 0.1, N = 100: T = 1 + 0.1 * 2.5076 + C
    r = sync_step("bsp", 100, 1.0, 0.1, "normal", comm_s=0.2)
    assert r.step_time_s == pytest.approx(1 + 0.25076 + 0.2, abs=1e-4)
    assert r.updates_per_s == pytest.approx(1 / r.step_time_s)
    assert r.mean_staleness == 0 and r.efficiency == 1
    # backup: shifted-exp Delta 0.9 + Exp(0.1), N = 96 of 100: 0.9 + 0.1 (H_100 - H_4)
    b = sync_step("backup:4", 96, 1.0, 0.1, "shifted-exp")
    h100 = sum(1 / i for i in range(1, 101))
    h4 = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert b.step_time_s == pytest.approx(0.9 + 0.1 * (h100 - h4), rel=1e-6)
    assert b.workers_total == 100 and b.wasted_fraction == pytest.approx(0.04)


def test_asp_ssp_local_formulas():
    n, mu, cv, c = 64, 1.0, 0.2, 0.1
    a = sync_step("asp", n, mu, cv, comm_s=c)
    assert a.updates_per_s == pytest.approx(n / (mu + c))  # sum_i 1/E[X_i + C]
    assert a.mean_staleness == pytest.approx(63 / 64)
    # local SGD every H: E[max of sum of H]/H + C/H; normal: mu + sigma e_N / sqrt(H)
    e64 = st.expected_max(64, 1.0, 1.0) - 1
    loc = sync_step("local:4", n, mu, cv, comm_s=c)
    assert loc.step_time_s == pytest.approx(mu + 0.2 * e64 / 2 + c / 4, rel=1e-9)
    assert loc.mean_staleness == pytest.approx(1.5 * 63 / 64)
    ssp = sync_step("ssp:3", n, mu, cv, comm_s=c)
    assert ssp.step_time_s == pytest.approx(mu + 0.2 * e64 / 2 + c, rel=1e-9)
    assert ssp.mean_staleness == pytest.approx(1.5 * 63 / 64)
    # ordering: BSP slowest per step, ASP fastest; ssp:0 and local:1 are BSP
    bsp = sync_step("bsp", n, mu, cv, comm_s=c)
    assert a.step_time_s < loc.step_time_s < bsp.step_time_s
    for s in ("ssp:0", "local:1", "hier:64"):
        r = sync_step(s, n, mu, cv, comm_s=c)
        assert r.step_time_s == pytest.approx(bsp.step_time_s) and r.mean_staleness == 0


def test_staleness_penalty_is_explicit():
    assert staleness_efficiency(2.0, kappa=0.25) == pytest.approx(1 / 1.5)
    assert staleness_efficiency(2.0, kappa=0.0) == 1.0
    r = sync_step("asp", 10, 1.0, 0.1, kappa=1.0)
    assert r.efficiency == pytest.approx(1 / (1 + 0.9))
    r = sync_step("asp", 10, 1.0, 0.1)
    assert r.efficiency == pytest.approx(1 / (1 + DEFAULT_STALENESS_KAPPA * 0.9))
    with pytest.raises(InputError):
        staleness_efficiency(1.0, kappa=-1)


def test_hierarchical():
    # hier:8 async across groups: group step = E[max of 8] + C_group + C; 8 group updates per step
    r = sync_step("hier:8", 64, 1.0, 0.1, comm_s=0.05, group_comm_s=0.01)
    e8 = 1.4236
    assert r.step_time_s == pytest.approx(1 + 0.1 * e8 + 0.06, abs=1e-4)
    assert r.updates_per_s == pytest.approx(8 / r.step_time_s)
    assert r.mean_staleness == pytest.approx(56 / 64)
    with pytest.raises(InputError):
        sync_step("hier:5", 64, 1.0, 0.1)


def test_hier_periodic_against_simulation():
    # step-by-step simulation: groups of G sync every step, groups average every H steps
    rng = np.random.default_rng(3)
    n, g, h, reps = 64, 8, 4, 4000
    x = rng.normal(1.0, 0.1, size=(reps, h, n // g, g))
    group_step = x.max(axis=3)  # each group waits for its slowest member
    barrier = group_step.sum(axis=1).max(axis=1) / h  # groups meet every h steps
    r = sync_step("hier:8:4", n, 1.0, 0.1)
    assert r.step_time_s == pytest.approx(barrier.mean(), rel=0.01)


def test_local_sgd_against_simulation_lognormal():
    rng = np.random.default_rng(11)
    n, h, reps = 32, 8, 5000
    s2 = math.log(1 + 0.3**2)
    x = np.exp(rng.normal(-s2 / 2, math.sqrt(s2), size=(reps, h, n)))
    sim = x.sum(axis=1).max(axis=1).mean() / h
    r = sync_step("local:8", n, 1.0, 0.3, "lognormal")
    assert r.step_time_s == pytest.approx(sim, rel=0.01)


def test_broadcasting():
    n = np.array([8, 64, 512])
    r = sync_step("backup:2", n, np.array([[1.0], [2.0]]), 0.05, comm_s=0.1)
    assert r.step_time_s.shape == (2, 3)
    assert np.all(np.diff(r.step_time_s, axis=1) > 0)
    with pytest.raises(InputError):
        sync_step("bsp", 0, 1.0, 0.1)
    with pytest.raises(InputError):
        sync_step("bsp", 8, 1.0, 0.1, comm_s=-1)


def test_hierarchical_every_step_is_the_bsp_barrier() -> None:
    """hier:G:1 averages across groups every step: the barrier is BSP's exact E[max of N]."""
    from scalemodel.cost import stragglers as st
    from scalemodel.cost.sync import sync_step

    n, mean, cv = 2048.0, 1.0, 0.05
    r = sync_step("hier:128:1", n, mean, cv, "lognormal", comm_s=0.1, group_comm_s=0.2)
    assert float(r.step_time_s) == pytest.approx(float(st.expected_max_step(mean, cv, n, "lognormal")) + 0.3)
    assert float(r.mean_staleness) == 0.0
