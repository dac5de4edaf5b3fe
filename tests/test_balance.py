"""Load balance: closed forms by hand and a list-scheduling simulation."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from scalemodel.cost import balance as bl
from scalemodel.errors import InputError


def _list_schedule(speeds, tasks, task_work, overhead, rng=None, cv=0.0):
    """Greedy work queue: the next task goes to the worker that frees up first."""
    heap = [(0.0, i) for i in range(len(speeds))]
    end = 0.0
    for _ in range(tasks):
        t, i = heapq.heappop(heap)
        noise = 1.0 if rng is None else rng.gamma(1 / cv**2, cv**2)
        d = task_work / speeds[i] * noise + overhead
        heapq.heappush(heap, (t + d, i))
        end = max(end, t + d)
    return end


def test_static_splits_by_hand():
    v = np.array([2.0] * 4 + [1.0] * 4)  # 4 fast + 4 half-speed GPUs
    w = 240.0
    assert bl.static_equal_makespan(w, v) == pytest.approx(30 / 1.0)
    assert bl.static_proportional_makespan(w, v) == pytest.approx(240 / 12)
    # gain of proportional over equal: sum v/(n min v) = 12/8 = 1.5
    assert bl.static_equal_makespan(w, v) / bl.static_proportional_makespan(w, v) == pytest.approx(1.5)
    assert bl.imbalance_ratio(30.0, w, v) == pytest.approx(1.5)
    # broadcasting over candidates (rows)
    rows = np.array([[1.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(bl.static_equal_makespan(12.0, rows), [6.0, 6.0])
    np.testing.assert_allclose(bl.static_proportional_makespan(12.0, rows), [6.0, 3.0])


@pytest.mark.parametrize("speeds", [[1.0] * 8, [2.0] * 4 + [1.0] * 4, [1.0, 1.3, 1.7, 2.2, 3.1]])
def test_dynamic_against_simulation(speeds):
    v = np.array(speeds)
    tasks, tw, o = 203, 1.0, 0.05
    sim = _list_schedule(v, tasks, tw, o)
    est, lo, hi = bl.dynamic_makespan(tasks * tw, v, tw, o)
    assert lo - 1e-9 <= sim <= hi + 1e-9
    assert lo <= est <= hi
    # hand: rate = sum 1/(w/v_i + o); lower = tasks/rate
    rate = sum(1 / (tw / s + o) for s in speeds)
    assert lo == pytest.approx(tasks / rate)
    # dynamic beats the equal static split whenever speeds differ
    if len(set(speeds)) > 1:
        assert est < bl.static_equal_makespan(tasks * tw, v)


def test_overhead_makes_dynamic_lose():
    # tiny tasks with a big scheduling cost: 1000 tasks of 0.01 work, 0.05 s overhead each
    v = np.ones(4)
    est, lo, _ = bl.dynamic_makespan(10.0, v, 0.01, 0.05)
    assert lo == pytest.approx(1000 * 0.06 / 4)
    assert est > bl.static_equal_makespan(10.0, v)


def test_noisy_workers_static_vs_dynamic_simulation():
    rng = np.random.default_rng(5)
    n, per, cv = 16, 20, 0.3
    # static: each worker owns 20 tasks; step ends with the slowest sum
    sums = rng.gamma(1 / cv**2, cv**2, size=(3000, n, per)).sum(axis=2).max(axis=1)
    assert bl.noisy_static_makespan(n, per, 1.0, cv, "gamma") == pytest.approx(sums.mean(), rel=0.01)
    dyn = np.mean([_list_schedule(np.ones(n), n * per, 1.0, 0.02, rng, cv) for _ in range(300)])
    assert bl.noisy_dynamic_makespan(n, n * per, 1.0, 0.02) == pytest.approx(dyn, rel=0.03)
    assert bl.noisy_dynamic_makespan(n, n * per, 1.0, 0.02) < bl.noisy_static_makespan(n, per, 1.0, cv, "gamma")


def test_bad_input():
    with pytest.raises(InputError):
        bl.static_equal_makespan(1.0, [1.0, 0.0])
    with pytest.raises(InputError):
        bl.dynamic_makespan(1.0, [1.0], 0.0)
    with pytest.raises(InputError):
        bl.dynamic_makespan(1.0, [1.0], 0.1, -1.0)
