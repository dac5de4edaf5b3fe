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


def megatron_chunk_layers(layers: int, pp: int, virtual_stages: int, *, embedding_in_split: bool = False,
                          loss_in_split: bool = False) -> tuple[int, int, int]:
    """(first, middle, last) model-chunk decoder layers of Megatron-Core's interleaved split.

    Megatron-Core ``get_num_layers_to_build`` (megatron/core/transformer/transformer_block.py, NVIDIA/Megatron-LM
    @d98e8a64dd): with ``--account-for-embedding-in-pipeline-split`` and/or ``--account-for-loss-in-pipeline-split``
    the embedding and/or the loss each count as one layer, the L (+1) (+1) slots must divide by pp (and then by V),
    every chunk gets (L + e + l) / (pp V) slots, and the first chunk (pipeline rank 0, virtual stage 0) builds one
    layer fewer for the embedding, the last (last rank, last virtual stage) one fewer for the loss.
    Raises ValueError where Megatron's assertions would fail.
    """
    e, lo = int(embedding_in_split), int(loss_in_split)
    slots = layers + e + lo
    chunks = pp * virtual_stages
    if slots % pp or (slots // pp) % virtual_stages:
        raise ValueError(f"{layers} layers + {e + lo} (embedding/loss) = {slots} slots do not divide into "
                         f"pp {pp} x V {virtual_stages} = {chunks} chunks")
    per = slots // chunks
    if per - e < 0 or per - lo < 0:
        raise ValueError("not enough layers in the first/last chunk")
    return per - e, per, per - lo


def interleaved_uneven_time(m: ArrayLike, pp: ArrayLike, w_first: ArrayLike, w_mid: ArrayLike, w_last: ArrayLike,
                            c_first: ArrayLike, c_mid: ArrayLike) -> np.ndarray:
    """Pipelined time of one step of Megatron's interleaved 1F1B when the first and last model chunks differ.

    p ranks hold V chunks each; chunk c = k p + r (virtual stage k) sits on rank r. The first chunk (c = 0)
    takes ``c_first`` seconds (forward + backward, one micro-batch), every other chunk but the last ``c_mid``;
    the ranks' work per micro-batch is ``w_first`` (rank 0), ``w_mid`` (ranks 1 .. p-2) and ``w_last``
    (rank p-1, with the last chunk and the logits). Returns

        T = max_r [ m W_r + sum_{c<r} (f_c + b_c) ]
          = max( m w_first,  m w_mid + c_first + (p-3) c_mid  [p >= 3],  m w_last + c_first + (p-2) c_mid ).

    Derivation (a lower bound that the schedule attains): rank r's first operation is the forward of the first
    micro-batch on chunk r, whose input has passed chunks 0 .. r-1; its last is the backward of the last
    micro-batch on chunk r (Megatron's cool-down ends on virtual stage 0), after which chunks r-1 .. 0 still run
    their backward; in between it does m W_r of work. With equal chunks (f + b = t / V) the bound on rank p-1 is
    m t + (p-1) t / V, Narayanan et al. 2021 (SC'21, arXiv 2104.04473) §2.2.2's interleaved step exactly. A
    step-by-step simulation of the schedule (tests/test_interleaved_chunks.py) finds it exact for equal chunks
    and for a last chunk heavier than the others, and within 1% (p >= 4, m >= 4p) for a lighter first and/or
    last chunk, Megatron's account-for-embedding/loss splits; it is a lower bound (never above the
    simulation), so a layout with a heavier first chunk can wait longer in the steady state than it says.
    """
    m_ = np.asarray(m, dtype=float)
    p = np.asarray(pp, dtype=float)
    cf, cm = np.asarray(c_first, dtype=float), np.asarray(c_mid, dtype=float)
    first = m_ * np.asarray(w_first, dtype=float)
    mid = np.where(p >= 3, m_ * np.asarray(w_mid, dtype=float) + cf + np.maximum(p - 3.0, 0.0) * cm, 0.0)
    last = m_ * np.asarray(w_last, dtype=float) + cf + np.maximum(p - 2.0, 0.0) * cm
    return np.maximum(np.maximum(first, mid), last)
