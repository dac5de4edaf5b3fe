"""Load balance: static equal split, speed-proportional static split, dynamic assignment.

Reference: docs/model.md#load-balance (and docs/model.md#imbalance for noisy workers).

Workers i = 1..n have speeds v_i (work units per second, e.g. samples/s) along ``axis`` of
``speeds``; ``work`` is the total work W of one step. Leading axes broadcast (one row per
candidate). Results are seconds.

- Static equal split, share W/n each: T = (W/n) / min_i v_i.
- Static proportional split, share W v_i / sum v (Whale-style hardware-aware balance): T = W / sum v.
  The gain over the equal split is sum v / (n min v) (4 fast + 4 half-speed GPUs: 12/8 = 1.5x).
  With unequal shares the gradients must be averaged with weights b_i/B (the tool flags, not models).
- Dynamic assignment (work queue / work stealing; greedy list scheduling, Graham 1966/69) with
  tasks of size w and a scheduling overhead o seconds per task: worker i needs t_i = w/v_i + o per
  task and the pool completes R = sum 1/t_i tasks/s. Bounds: m/R <= T <= m/R + max t_i
  (Graham's bound for uniform machines with the overhead folded into the task time), m = W/w.
  Estimate: with the queue empty at T0 = (m - n/2)/R (each busy worker is on average half-way
  through its task) and the worst in-flight task ending up to max t_i later,
  T ~= m/R - n/(2R) + max t_i, clipped into the bounds. For identical workers this is
  m t/n + t/2: the last task costs half a task on average, not the "max over fixed shares".
- Imbalance ratio = makespan / (W / sum v) >= 1 (1 = perfect balance, scheduling cost included).

Work variability from the data (docs/model.md#imbalance): a sample of L tokens costs c(L) (the model's
own forward FLOPs of one sequence, GEMMs ~ L plus attention ~ L^2); with L drawn from the workload's
length distribution, a micro-batch of b samples has compute CV = CV[c(L)] / sqrt(b).

Dispatch latency default (:data:`DEFAULT_DISPATCH_OVERHEAD_S`): the measured round trip of one
synchronous task through Ray's scheduler, 980.7 tasks/s in Ray's release microbenchmark
(``single_client_tasks_sync``, ray-project/ray ``release/perf_metrics/microbenchmark.json`` at commit
08444c4c), i.e. 1.02 ms per task: submit, schedule, run an empty task, return its result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.cost import stragglers as st
from scalemodel.errors import InputError

Array = Any

#: Ray release microbenchmark ``single_client_tasks_sync``: 980.7121 tasks/s (release/perf_metrics/
#: microbenchmark.json, ray-project/ray commit 08444c4c): one synchronous task round trip, 1.02 ms.
RAY_SINGLE_CLIENT_TASKS_SYNC_PER_S = 980.7121217208985
#: Ray ``single_client_tasks_async``: 8040.5 tasks/s, the rate one driver can hand out tasks at.
RAY_SINGLE_CLIENT_TASKS_ASYNC_PER_S = 8040.530786886751
DEFAULT_DISPATCH_OVERHEAD_S = 1.0 / RAY_SINGLE_CLIENT_TASKS_SYNC_PER_S


def _speeds(speeds: Array) -> np.ndarray:
    v = np.asarray(speeds, dtype=float)
    if v.ndim == 0:
        v = v[None]
    if v.shape[-1] < 1 or np.any(v <= 0) or not np.all(np.isfinite(v)):
        raise InputError("worker speeds must be finite and > 0", where="speeds")
    return v


def _work(work: Array) -> np.ndarray:
    w = np.asarray(work, dtype=float)
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise InputError("work must be finite and >= 0", where="work")
    return w


def ideal_makespan(work: Array, speeds: Array, axis: int = -1) -> np.ndarray:
    """W / sum v: the makespan of perfect balance with no scheduling cost."""
    return _work(work) / np.sum(_speeds(speeds), axis=axis)


def static_equal_makespan(work: Array, speeds: Array, axis: int = -1) -> np.ndarray:
    """T = (W/n) / min v: equal shares, so the slowest worker sets the step."""
    v = _speeds(speeds)
    return _work(work) / v.shape[axis] / np.min(v, axis=axis)


def static_proportional_makespan(work: Array, speeds: Array, axis: int = -1) -> np.ndarray:
    """T = W / sum v: shares proportional to speed finish together (Jia et al. 2022, Whale)."""
    return ideal_makespan(work, speeds, axis)


def dynamic_makespan(work: Array, speeds: Array, task_work: Array, overhead_s: Array = 0.0,
                     axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dynamic assignment of tasks of size ``task_work`` with ``overhead_s`` per task.

    Returns (estimate, lower, upper) in seconds; formulas in the module docstring."""
    v = _speeds(speeds)
    w = _work(work)
    tw = np.asarray(task_work, dtype=float)
    o = np.asarray(overhead_s, dtype=float)
    if np.any(tw <= 0) or not np.all(np.isfinite(tw)):
        raise InputError("task size must be finite and > 0", where="task_work")
    if np.any(o < 0) or not np.all(np.isfinite(o)):
        raise InputError("scheduling overhead must be finite and >= 0", where="overhead_s")
    n = v.shape[axis]
    t_i = np.expand_dims(tw, axis) / v + np.expand_dims(o, axis) if np.ndim(tw) or np.ndim(o) else tw / v + o
    rate = np.sum(1.0 / t_i, axis=axis)
    m = np.ceil(w / tw - 1e-9)
    lower = m / rate
    upper = lower + np.max(t_i, axis=axis)
    est = np.clip(lower - np.minimum(m, n) / (2 * rate) + np.max(t_i, axis=axis), lower, upper)
    return est, lower, upper


def imbalance_ratio(makespan: Array, work: Array, speeds: Array, axis: int = -1) -> np.ndarray:
    """makespan / (W / sum v): 1 is perfect balance."""
    ideal = ideal_makespan(work, speeds, axis)
    return np.asarray(makespan, dtype=float) / np.where(ideal > 0, ideal, 1.0)


def noisy_static_makespan(n: Array, tasks_per_worker: Array, task_mean_s: Array, task_cv: Array,
                          dist: str = "normal") -> np.ndarray:
    """Identical workers, each with a fixed share of m i.i.d. tasks (mean, cv): the step ends
    with the slowest sum, T = m E[max_i sum_{j<=m} X_ij]/m (docs/model.md#stragglers, tau = m)."""
    m = np.asarray(tasks_per_worker, dtype=float)
    return m * st.expected_max_of_sum(m, n, task_mean_s, task_cv, dist)


def noisy_dynamic_makespan(n: Array, total_tasks: Array, task_mean_s: Array,
                           overhead_s: Array = 0.0) -> np.ndarray:
    """Identical noisy workers pulling from a queue: T ~= M (mu + o)/n + (mu + o)/2 (the dynamic
    estimate above; the task-time noise only moves the tail, by well under a task for M >> n)."""
    nn = np.asarray(n, dtype=float)
    mm = np.asarray(total_tasks, dtype=float)
    t = np.asarray(task_mean_s, dtype=float) + np.asarray(overhead_s, dtype=float)
    if np.any(nn < 1) or np.any(mm < 0) or np.any(t <= 0):
        raise InputError("need n >= 1, tasks >= 0 and a positive task time", where="balance")
    return np.maximum(mm * t / nn - np.minimum(mm, nn) * t / (2 * nn) + t, np.where(mm > 0, t, 0.0))


def length_cost_cv(costs: Array, samples_per_task: Array = 1) -> float:
    """CV of a task's cost when each of its ``samples_per_task`` samples draws one of ``costs`` (the
    cost of every possible length, equally likely) independently: CV[c] / sqrt(b)."""
    c = np.asarray(costs, dtype=float)
    b = float(np.asarray(samples_per_task, dtype=float))
    if c.size < 1 or np.any(c <= 0) or not np.all(np.isfinite(c)):
        raise InputError("per-length costs must be finite and > 0", where="sequence_lengths")
    if not (b >= 1 and np.isfinite(b)):
        raise InputError("samples per task must be >= 1", where="micro_batch")
    return float(np.std(c) / np.mean(c) / np.sqrt(b))
