"""Pipeline-parallel schedules: bubble size and micro-batches in flight.

With p stages, m micro-batches per step and per-micro-batch stage time t = t_f + t_b (+ recompute):

=============  ==============================  ====================================  ==========================
schedule       step time on one stage          bubble fraction of ideal (bubble/m t)   micro-batches in flight
=============  ==============================  ====================================  ==========================
gpipe          (m + p - 1) t                   (p - 1) / m                             m
1f1b           (m + p - 1) t                   (p - 1) / m                             min(m, p)
interleaved:v  (m + (p - 1)/v) t               (p - 1) / (v m)                         min(m, p) (1 + (p-1)/(p v))
zb (ZB-H1)     (m + (p - 1)/3) t               (p - 1) / (3 m)                         min(m, p)
=============  ==============================  ====================================  ==========================

Sources: GPipe and 1F1B bubble (p-1)/m, interleaved (p-1)/(v m) and its activation-memory
factor 1 + (p-1)/(p v): Narayanan et al., SC'21 (arXiv 2104.04473) §2.2; Megatron-LM
``theoretical_memory_usage.py``. ZB-H1: Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024)
splits the backward into B (input gradient) and W (weight gradient) and fills the bubble with W,
reducing it to about a third of 1F1B's at 1F1B's memory; we model that as (p - 1)/3 micro-batch
times (T_F = T_B = T_W assumption of the paper's ZB-H1 analysis).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.choices import ScheduleKind, codes

ArrayLike = Any


def schedule_code(name: ArrayLike) -> np.ndarray:
    """Schedule name(s) or :class:`~scalemodel.choices.ScheduleKind` code(s) -> integer code array."""
    return codes(ScheduleKind, name, "schedule")


ONE_F_ONE_B = ScheduleKind.ONE_F_ONE_B


def bubble_microbatches(pp: ArrayLike, schedule: ArrayLike = ONE_F_ONE_B, virtual_stages: ArrayLike = 1) -> np.ndarray:
    """Bubble length in units of one micro-batch's stage time: (p-1), (p-1)/v or (p-1)/3."""
    p = np.asarray(pp, dtype=float)
    code = schedule_code(schedule)
    v = np.maximum(np.asarray(virtual_stages, dtype=float), 1.0)
    base = p - 1.0
    zero_bubble = np.where(code == ScheduleKind.ZERO_BUBBLE, base / 3.0, base)
    return np.where(code == ScheduleKind.INTERLEAVED, base / v, zero_bubble)


def bubble_fraction(pp: ArrayLike, microbatches: ArrayLike, schedule: ArrayLike = ONE_F_ONE_B,
                    virtual_stages: ArrayLike = 1) -> np.ndarray:
    """Bubble time over ideal time: (p-1)/m (1F1B, GPipe), (p-1)/(v m) interleaved, (p-1)/(3 m) ZB-H1."""
    return bubble_microbatches(pp, schedule, virtual_stages) / np.asarray(microbatches, dtype=float)


def inflight_microbatches(pp: ArrayLike, microbatches: ArrayLike, schedule: ArrayLike = ONE_F_ONE_B,
                          virtual_stages: ArrayLike = 1) -> np.ndarray:
    """Micro-batches whose activations the first stage holds at once (peak activation memory).

    GPipe keeps all m; 1F1B and ZB-H1 keep min(m, p); interleaving multiplies by 1 + (p-1)/(p v).
    """
    p = np.asarray(pp, dtype=float)
    m = np.asarray(microbatches, dtype=float)
    code = schedule_code(schedule)
    v = np.maximum(np.asarray(virtual_stages, dtype=float), 1.0)
    onef1b = np.minimum(m, p)
    interleaved = onef1b * (1.0 + (p - 1.0) / (p * v))
    return np.where(code == ScheduleKind.GPIPE, m, np.where(code == ScheduleKind.INTERLEAVED, interleaved, onef1b))
