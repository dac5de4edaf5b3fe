"""Synchronisation strategies: step time, update rate, staleness and a convergence penalty.

Reference: docs/model.md#sync (formulas and primary sources).

Strategies (option string for ``--sync``, parsed by :func:`parse_sync`):

=============  ==============================================================================
``bsp``        bulk-synchronous: every step waits for all N workers, then communicates.
``backup:B``   Chen et al. (2016): N+B workers run, the update uses the first N gradients.
``asp``        fully asynchronous parameter server: every worker runs at its own rate.
``ssp:S``      stale-synchronous parallel (Ho et al. 2013): the fastest worker may lead the
               slowest by at most S clocks.
``local:H``    local SGD / periodic averaging every H local steps (Stich 2019; Wang & Joshi).
``hier:G``     synchronous inside groups of G workers, asynchronous across the N/G groups.
``hier:G:H``   synchronous inside groups of G, periodic averaging across groups every H steps
               (Lin et al. 2020, hierarchical local SGD).
=============  ==============================================================================

Units of the results (all broadcast over the numeric inputs):

- ``step_time_s``: wall seconds per *worker iteration*, i.e. per step in which each worker
  computes one local gradient (N gradients in total). Comparable across strategies; for BSP it
  is the synchronous step.
- ``updates_per_s``: parameter updates applied to the (shared or local) model per second. A BSP
  or backup step is one update of N gradients; ASP/SSP apply every gradient as its own update
  (N / step_time); local SGD counts the local step; ``hier:G`` counts group updates.
- ``mean_staleness``: expected age, *in global steps* (multiples of N gradients), of the
  parameters a gradient was computed on when it is applied. BSP/backup: 0. ASP: (N-1)/N (a
  gradient misses the N-1 gradients applied by the others while it was being computed; the
  literature's "tau ~ N-1 updates", Lian et al. 2015, divided by N). SSP with lazily refreshed
  caches (Ho et al. 2013): the cached copy is refreshed only when older than S clocks, so its
  age is ~uniform on [0, S] clocks: S/2 * (N-1)/N. Local SGD: a worker at local step j misses
  j steps of the N-1 others; mean over j = 0..H-1: (H-1)/2 * (N-1)/N. hier:G async: the other
  groups' (N-G)/N share of one step; hier:G:H adds (H-1)/2 * (N-G)/N.
- ``efficiency``: statistical efficiency multiplier in (0, 1], the fraction of a fresh
  synchronous step's progress that one step makes. The model is the heuristic of docs/model.md#sync:

      efficiency = 1 / (1 + kappa * mean_staleness)

  with ``kappa`` the extra synchronous steps needed per global step of staleness. It is NOT a universal
  constant: staleness theory only gives bounds (SSP regret grows with sqrt(s+1), Ho et al. 2013; linear
  speedup for async needs staleness O(sqrt(K/M)), Lian et al. 2015; the local-SGD error term grows with
  tau-1, Wang & Joshi 2021). Its defaults are fitted per (optimizer, model family) to the published
  steps-to-target points of validation/convergence.yaml (:mod:`scalemodel.cost.staleness`); only adam/transformer
  has points (PipeDream-2BW, one step of delay), and every other group borrows that fit (the file's fallback,
  :data:`DEFAULT_STALENESS_KAPPA`, reported as borrowed). ``--staleness-kappa`` overrides it; set it from
  measurement.
  Time to target = steps_sync * step_time_s / efficiency.

Straggler terms come from :mod:`scalemodel.cost.stragglers`: BSP waits for E[max of N]; waiting
every tau steps (SSP window S+1, local SGD H) costs E[max_i sum of tau steps]/tau (docs/model.md#stragglers).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import SYNC_ALLOWED, SyncKind, SyncMode, parse_sync
from scalemodel.cost import staleness
from scalemodel.cost import stragglers as st
from scalemodel.errors import InputError

__all__ = ["SYNC_ALLOWED", "SyncStrategy", "parse_sync", "sync_step", "effective_step_time", "staleness_efficiency"]

Array = Any

#: kappa of a job whose (optimizer, model family) has no fit: the fallback of scalemodel/data/staleness_kappa.json
#: (the fit it borrows)
DEFAULT_STALENESS_KAPPA = staleness.fallback_kappa()
SYNC_KINDS = tuple(k.value for k in SyncKind)
#: A parsed strategy (the vocabulary lives in :mod:`scalemodel.choices`).
SyncStrategy = SyncMode


class SyncResult(msgspec.Struct, eq=False):  # numpy fields: == has no single truth value
    """Per-strategy outcome; every field broadcasts with the inputs (see the module docstring)."""

    strategy: str
    step_time_s: np.ndarray
    updates_per_s: np.ndarray
    gradients_per_s: np.ndarray
    mean_staleness: np.ndarray
    efficiency: np.ndarray
    straggler_s: np.ndarray  # wait beyond the mean compute time, per worker iteration
    workers_total: np.ndarray  # machines occupied (N + B for backup workers)
    wasted_fraction: np.ndarray  # share of computed gradients thrown away (B/(N+B) for backup)


def staleness_efficiency(mean_staleness: Array, kappa: Array = DEFAULT_STALENESS_KAPPA) -> np.ndarray:
    """efficiency = 1/(1 + kappa * staleness) (heuristic, docs/model.md#sync; kappa >= 0, cost/staleness.py)."""
    s = np.asarray(mean_staleness, dtype=float)
    k = np.asarray(kappa, dtype=float)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise InputError("a staleness is negative or not finite", where="staleness",
                         allowed="finite staleness >= 0 steps")
    if np.any(k < 0) or not np.all(np.isfinite(k)):
        raise InputError("a staleness sensitivity kappa is negative or not finite", where="kappa",
                         allowed="finite kappa >= 0")
    return 1.0 / (1.0 + k * s)


def _finite_nonnegative(x: np.ndarray) -> bool:
    """Whether every element of ``x`` is finite and >= 0: its min and max (NaN propagates through both and fails
    the comparisons), two reductions instead of elementwise masks over the planner's grid."""
    return not x.size or (float(x.min()) >= 0.0 and float(x.max()) < np.inf)


def sync_step(strategy: SyncStrategy | str, n: Array, mean: Array, cv: Array, dist: str = "normal", *,
              comm_s: Array = 0.0, group_comm_s: Array | None = None,
              kappa: Array = DEFAULT_STALENESS_KAPPA) -> SyncResult:
    """Model one synchronisation strategy for N workers with i.i.d. compute times (mean, cv, dist).

    ``comm_s`` is the time of one synchronisation of the whole job (BSP all-reduce, or an ASP
    worker's push + pull), ``group_comm_s`` that of the intra-group sync of hier:G (defaults to
    ``comm_s``; the cross-group exchange of hier uses ``comm_s``). Formulas, with E_N = E[max of N]:

    - bsp:      T = E_N + C                                         (docs/model.md#sync)
    - backup:B: T = E[X_(N:N+B)] + C; B/(N+B) of the gradients wasted (Chen et al. 2016)
    - asp:      T = mean + C per worker; updates/s = N / T           (docs/model.md#sync)
    - ssp:S:    T = E[max_i sum_{j<=S+1} X_ij]/(S+1) + C             ("window" heuristic, docs/model.md#sync)
    - local:H:  T = E[max_i sum_{j<=H} X_ij]/H + C/H                 (AdaComm runtime, Wang & Joshi 2019)
    - hier:G:   T = E_G + C_group + C   (each group syncs, then pushes/pulls asynchronously;
                C is dropped when G = N, which is then exactly BSP with C_group)
    - hier:G:H: T = m_G + s_G e_{N/G}/sqrt(H) + C_group + C/H, where m_G, s_G are the mean and sd
                of the group step E_G (normal approximation of the cross-group barrier, docs/model.md#sync);
                H = 1 is the exact BSP barrier E_N with a two-level exchange (no staleness).
    """
    strat = parse_sync(strategy) if isinstance(strategy, str) else strategy
    nn = np.asarray(n, dtype=float)
    if np.any(nn < 1) or not np.all(np.isfinite(nn)):
        raise InputError("fewer than 1 worker, or not finite", where="workers", allowed="a finite number >= 1")
    m = np.asarray(mean, dtype=float)
    c_arr = np.asarray(cv, dtype=float)
    comm = np.asarray(comm_s, dtype=float)
    if not _finite_nonnegative(comm):
        raise InputError("a communication time is negative or not finite", where="comm_s",
                         allowed="finite times >= 0 seconds")
    gcomm = comm if group_comm_s is None else np.asarray(group_comm_s, dtype=float)
    if gcomm is not comm and not _finite_nonnegative(gcomm):
        raise InputError("a group communication time is negative or not finite", where="group_comm_s",
                         allowed="finite times >= 0 seconds")
    zeros = np.zeros(np.broadcast_shapes(nn.shape, m.shape, c_arr.shape, comm.shape, gcomm.shape))
    frac_others = (nn - 1) / nn
    total = nn + zeros
    wasted = zeros.copy()
    kind, p = strat.kind, strat.param

    if kind == SyncKind.BSP:
        compute = st.expected_max_step(m, c_arr, nn, dist)
        step = compute + comm
        updates = 1 / step
        stale = zeros
    elif kind == SyncKind.BACKUP:
        compute = st.expected_max_step(m, c_arr, nn + p, dist, k=nn)
        step = compute + comm
        updates = 1 / step
        stale = zeros
        total = nn + p + zeros
        wasted = p / (nn + p) + zeros
    elif kind == SyncKind.ASP:
        compute = m + zeros
        step = compute + comm
        updates = nn / step
        stale = frac_others + zeros
    elif kind == SyncKind.SSP:
        compute = st.expected_max_of_sum(p + 1, nn, m, c_arr, dist)
        step = compute + comm
        updates = nn / step
        stale = p / 2 * frac_others + zeros
    elif kind == SyncKind.LOCAL:
        compute = st.expected_max_of_sum(p, nn, m, c_arr, dist)
        step = compute + comm / p
        updates = 1 / step
        stale = (p - 1) / 2 * frac_others + zeros
    else:  # hier
        g = float(p)
        if np.any(nn % g != 0):
            raise InputError(f"hier group size {p} must divide the number of workers", where="--sync",
                             allowed="G a divisor of N")
        groups = nn / g
        cross = np.where(groups > 1, comm, 0.0)  # one group (G = N) has no cross-group exchange
        if strat.period == 1:
            # averaging across groups every step is a (two-level) synchronous barrier over all N
            compute = st.expected_max_step(m, c_arr, nn, dist)
            step = compute + gcomm + cross
            updates = 1 / step
            stale = zeros
        elif strat.period:
            h = float(strat.period)
            mg, sg = st.order_stat_moments(g, g, m, c_arr, dist)
            e_groups = st.expected_max_step(0.0 * mg + 1.0, 1.0, groups, "normal") - 1.0  # e_{N/G}
            compute = mg + sg * e_groups / np.sqrt(h)
            step = compute + gcomm + cross / h
            updates = 1 / step
            stale = (h - 1) / 2 * (nn - g) / nn + zeros
        else:
            # g as a scalar, not g + zeros: z depends on (G, cv) only, so expected_max_step finds its distinct
            # keys on cv's shape instead of sorting one key per candidate of the planner's grid (same values)
            compute = st.expected_max_step(m, c_arr, g, dist)
            step = compute + gcomm + cross
            updates = groups / step
            stale = (nn - g) / nn + zeros
    step = step + zeros
    return SyncResult(
        strategy=strat.label(),
        step_time_s=step,
        updates_per_s=updates + zeros,
        gradients_per_s=nn / step,
        mean_staleness=stale + zeros,
        efficiency=staleness_efficiency(stale + zeros, kappa),
        straggler_s=np.maximum(compute - m, 0.0) + zeros,
        workers_total=total,
        wasted_fraction=wasted,
    )


def effective_step_time(strategy: SyncStrategy | str, n: Array, mean: Array, cv: Array, dist: str = "normal",
                        *, comm_s: Array = 0.0, group_comm_s: Array | None = None,
                        kappa: Array = DEFAULT_STALENESS_KAPPA) -> np.ndarray:
    """step_time_s / efficiency: wall time per fresh-synchronous-step-equivalent of progress."""
    r = sync_step(strategy, n, mean, cv, dist, comm_s=comm_s, group_comm_s=group_comm_s, kappa=kappa)
    return r.step_time_s / r.efficiency
