"""Pipeline-parallel schedules: bubble size and micro-batches in flight.

With p stages, m micro-batches per step and per-micro-batch stage time t = t_f + t_b (+ recompute):

=============  ==============================  ====================================  ==========================
schedule       step time on one stage          bubble fraction of ideal (bubble/m t)   micro-batches in flight
=============  ==============================  ====================================  ==========================
gpipe          (m + p - 1) t                   (p - 1) / m                             m
1f1b           (m + p - 1) t                   (p - 1) / m                             min(m, p)
interleaved:v  (m + (p - 1)/v) t               (p - 1) / (v m)                         min(p (1 + (p-1)/(p v)), m)
zb (ZB-H1)     (m + (p - 1)/3) t               (p - 1) / (3 m)                         min(m, p)
=============  ==============================  ====================================  ==========================

Sources: GPipe and 1F1B bubble (p-1)/m, interleaved (p-1)/(v m) and its activation-memory
factor 1 + (p-1)/(p v): Narayanan et al., SC'21 (arXiv 2104.04473) §2.2; Megatron-LM
``theoretical_memory_usage.py``; the interleaved count capped at m where every forward is a warm-up forward
(:func:`inflight_microbatches`). ZB-H1: Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024)
splits the backward into B (input gradient) and W (weight gradient) and fills the bubble with W,
reducing it to about a third of 1F1B's at 1F1B's memory; we model that as (p - 1)/3 micro-batch
times (T_F = T_B = T_W assumption of the paper's ZB-H1 analysis).
"""

from __future__ import annotations

import functools
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
    """Micro-batches whose activations the first stage holds at once (peak activation memory), as a multiple of
    its layers.

    GPipe keeps all m; 1F1B and ZB-H1 keep min(m, p); interleaved min(p (1 + (p-1)/(p v)), m) = min(p + (p-1)/v, m).

    Interleaved: Megatron-Core's rank 0 runs min(2 (p - 1) + (v - 1) p, m v) warm-up forwards, each one model chunk
    (1/v of its layers) of one micro-batch, then a forward and a backward a step (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches`` lines 953-977), so with equal chunks
    it holds at most min(warm-up + 1, m v) / v = min(p + (p-1)/v, m) micro-batches of its layers: Narayanan's
    p (1 + (p-1)/(p v)) (Megatron-LM ``theoretical_memory_usage.py``) where m v exceeds the warm-up, and m (every
    micro-batch of every chunk, all warm-up) at m = p, the fewest the schedule takes (it refuses m below its group
    size, p by default, and m not a multiple of it). It was min(m, p) (1 + (p-1)/(p v)) = p + (p-1)/v at m = p:
    (p-1)/v micro-batches over what the schedule holds (review17b).
    """
    p = np.asarray(pp, dtype=float)
    m = np.asarray(microbatches, dtype=float)
    code = schedule_code(schedule)
    v = np.maximum(np.asarray(virtual_stages, dtype=float), 1.0)
    onef1b = np.minimum(m, p)
    interleaved = np.minimum(p * (1.0 + (p - 1.0) / (p * v)), m)
    return np.where(code == ScheduleKind.GPIPE, m, np.where(code == ScheduleKind.INTERLEAVED, interleaved, onef1b))


@functools.lru_cache(maxsize=4096)
def interleaved_chunks_held(pp: int, virtual_stages: int, microbatches: int, stage_rank: int
                            ) -> tuple[tuple[int, ...], ...]:
    """The distinct vectors (h_0, ..., h_{v-1}) of micro-batches of each of its v model chunks whose activations
    pipeline rank ``stage_rank`` holds right after each of its forwards under Megatron-Core's interleaved 1F1B (the
    moments its activation memory can peak: a backward only frees).

    NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/schedules.py: the k-th forward runs chunk
    ``get_schedule_table(m, v, p)[k]``'s chunk (groups of ``microbatch_group_size_per_vp_stage`` = p micro-batches,
    each group through chunk 0, then chunk 1, ..., the last group holding the remainder; lines 989-1016), the k-th
    backward chunk v - 1 - that (``get_model_chunk_id``, lines 1244-1249); rank r runs
    min((p - r - 1) 2 + (v - 1) p, m v) warm-up forwards (lines 953-977), then one forward and one backward per step,
    then the remaining backwards. Small (m v steps) and cached per (p, v, m, r)."""
    p, v, m, r = int(pp), int(virtual_stages), int(microbatches), int(stage_rank)
    table = [c for g0 in range(0, m, p) for c in range(v) for _ in range(g0, min(g0 + p, m))]
    total = m * v
    warm = min((p - r - 1) * 2 + (v - 1) * p, total)
    held = [0] * v
    seen: set[tuple[int, ...]] = set()
    for k in range(total):
        held[table[k]] += 1
        seen.add(tuple(held))
        if k >= warm:  # steady state: this forward's step ends with backward k - warm
            held[v - 1 - table[k - warm]] -= 1
    return tuple(sorted(seen))


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


def interleaved_rank_time(m: ArrayLike, w: ArrayLike, c: ArrayLike) -> np.ndarray:
    """:func:`interleaved_uneven_time` with every rank's and every chunk's own time: ``w`` one micro-batch's
    seconds on ranks 0 .. p-1 (all their V chunks) along the last axis, ``c`` the forward + backward seconds of
    chunks 0 .. p-2 (virtual stage 0, one micro-batch) along the last axis:

        T = max_r [ m W_r + sum_{c<r} (f_c + b_c) ]

    the bound that :func:`interleaved_uneven_time` evaluates with three rank classes and one middle chunk (its
    derivation: rank r's first forward waits for chunks 0 .. r-1, its last backward is followed by theirs), here
    through each rank with its own wait, so a middle rank behind heavier chunks than the mean is not priced short.
    Equal middle ranks and chunks give :func:`interleaved_uneven_time` (the engine's ``|`` segments,
    docs/model.md#uneven-stages)."""
    w_ = np.asarray(w, dtype=float)
    c_ = np.asarray(c, dtype=float)
    wait = np.concatenate([np.zeros(c_.shape[:-1] + (1,)), np.cumsum(c_, axis=-1)], axis=-1)  # chunks before r
    return np.asarray(np.max(np.asarray(m, dtype=float)[..., None] * w_ + wait, axis=-1))

def interleaved_rank_wait_time(m: ArrayLike, w: ArrayLike, wait: ArrayLike) -> np.ndarray:
    """:func:`interleaved_rank_time` with each rank's wait given: ``w`` one micro-batch's seconds on ranks 0 .. p-1
    and ``wait`` the forward + backward seconds, one micro-batch, of every chunk before rank r's first chunk that
    holds a layer, both along the last axis:

        T = max_r [ m W_r + wait_r ]

    the same bound (rank r's first real forward waits for micro-batch 0 through every chunk before it, and its last
    real backward, on that chunk, is followed by theirs), where some rank's chunk of virtual stage 0 holds no layer
    (Megatron's layout allows an empty stage: ``E|...``, ``(|t*8)*4``): that rank's first work is on a later chunk,
    behind every chunk of the virtual stages before it. :func:`interleaved_rank_time` counts the chunks of virtual
    stage 0 only, and a split whose virtual stage 0 held no layers (``[0,0,0,0,8,8,8,8]`` at pp 4, V 2, the 1F1B
    pipeline of [8,8,8,8] with an empty lap before it) was priced with no bubble at all."""
    w_ = np.asarray(w, dtype=float)
    return np.asarray(np.max(np.asarray(m, dtype=float)[..., None] * w_ + np.asarray(wait, dtype=float), axis=-1))


def _one_f_one_b_rank_paths(m: np.ndarray, warm: np.ndarray, f_k: np.ndarray, b_k: np.ndarray,
                            f_before: np.ndarray, b_before: np.ndarray, w_after: np.ndarray) -> np.ndarray:
    """Longest of the four schedule paths through rank k of a 1F1B pipeline (see :func:`one_f_one_b_time`).

    ``warm`` = min(p - 1 - k, m - 1) warm-up forwards; ``f_before``/``b_before`` = forward/backward seconds of
    ranks 0 .. k-1; ``w_after`` = forward + backward seconds of ranks k+1 .. p-1 (one micro-batch each)."""
    w_k = f_k + b_k
    trip = w_k + w_after  # micro-batch 0 from rank k's forward to its backward there, downstream and back
    rest = m - warm - 1.0  # backwards rank k runs before its last forward
    a = m * w_k
    c = trip + rest * f_k + (m - 1.0) * b_k
    d = m * f_k + rest * b_k + w_after + b_k
    e = np.where(rest >= 1.0, trip + rest * f_k + (rest - 1.0) * b_k + w_after + b_k, 0.0)
    return np.asarray(f_before + np.maximum(np.maximum(a, c), np.maximum(d, e)) + b_before)


def one_f_one_b_time(m: ArrayLike, forward: ArrayLike, backward: ArrayLike) -> np.ndarray:
    """Pipelined time of one step of non-interleaved 1F1B (PipeDream-Flush) with stage times of its own per rank.

    ``forward``/``backward`` hold one micro-batch's seconds on ranks 0 .. p-1 along the last axis. Rank k runs
    w = min(p-1-k, m-1) warm-up forwards, then a forward and a backward in turn, then the remaining backwards
    (Megatron-LM ``forward_backward_pipelining_without_interleaving``; Narayanan et al., SC'21 §2.2.1). With
    F_<k, B_<k the forward/backward seconds of the ranks before k, W_k = f_k + b_k and D_k = sum_{c>k} W_c
    (the round trip downstream), the step lasts at least the longest of four paths through some rank k:

      A  F_<k + m W_k + B_<k                             rank k busy from its first forward to its last backward
      C  F_<k + (W_k + D_k) + (m-w-1) f_k + (m-1) b_k + B_<k      ... after waiting for micro-batch 0's round trip
      D  F_<k + m f_k + (m-w-1) b_k + D_k + b_k + B_<k            ... then the last micro-batch's round trip
      E  F_<k + (W_k + D_k) + (m-w-1) f_k + (m-w-2) b_k + D_k + b_k + B_<k     both round trips (m-w-1 >= 1)

    and T = max over k and the four. Each is a chain of dependent operations of the schedule, so T is a lower
    bound; with equal stages path A on the last rank gives the textbook (m + p - 1) t (Huang et al. 2019,
    GPipe; Narayanan et al. 2021 §2.2.1) exactly. Against a step-by-step simulation of the schedule
    (tests/test_pipeline_uneven.py: p 2..8, m p..4p) it is exact in about 4 cases of 5 and at most 3.3% short
    for independent random stage times within 3x of each other, exact in 9 of 10 and at most 4.5% short for
    first/middle/last classes 0.3-2x apart (the misses: critical paths that wander across several ranks);
    the upper bound (m + p - 1) max_k W_k it replaces overshoots by up to 60% there.
    """
    f = np.asarray(forward, dtype=float)
    b = np.asarray(backward, dtype=float)
    p = f.shape[-1]
    m_ = np.asarray(m, dtype=float)[..., None]
    k = np.arange(p, dtype=float)
    w_all = f + b
    f_before = np.cumsum(f, axis=-1) - f
    b_before = np.cumsum(b, axis=-1) - b
    w_after = np.sum(w_all, axis=-1, keepdims=True) - np.cumsum(w_all, axis=-1)
    warm = np.minimum(p - 1.0 - k, m_ - 1.0)
    return np.asarray(np.max(_one_f_one_b_rank_paths(m_, warm, f, b, f_before, b_before, w_after), axis=-1))


def one_f_one_b_three_class_time(m: ArrayLike, pp: ArrayLike, f_first: ArrayLike, b_first: ArrayLike,
                                 f_mid: ArrayLike, b_mid: ArrayLike, f_last: ArrayLike, b_last: ArrayLike
                                 ) -> np.ndarray:
    """:func:`one_f_one_b_time` for a pipeline whose rank 0, ranks 1 .. p-2 and rank p-1 have their own stage
    times (the engine's first / middle / last stages), vectorised over ``pp``: :func:`one_f_one_b_four_class_time`
    with every middle rank of the upper class."""
    n_mid = np.maximum(np.asarray(pp, dtype=float) - 2.0, 0.0)
    return one_f_one_b_four_class_time(m, pp, n_mid, f_first, b_first, f_mid, b_mid, f_mid, b_mid, f_last, b_last)


def one_f_one_b_four_class_time(m: ArrayLike, pp: ArrayLike, n_upper: ArrayLike, f_first: ArrayLike,
                                b_first: ArrayLike, f_upper: ArrayLike, b_upper: ArrayLike, f_lower: ArrayLike,
                                b_lower: ArrayLike, f_last: ArrayLike, b_last: ArrayLike) -> np.ndarray:
    """:func:`one_f_one_b_time` for a pipeline of rank 0, ``n_upper`` middle ranks 1 .. n_u of one stage time, the
    other middle ranks n_u + 1 .. p-2 of another and rank p-1, vectorised over ``pp`` (the balanced split of L layers
    that p does not divide: rank 0 and ranks 1 .. L mod p - 1 of ceil(L/p) layers, the rest and the last of
    floor(L/p); n_u clipped to 0 .. p-2). The ranks k = 0, 1, n_u (the upper run, where n_u >= 1), n_u + 1, p-2 (the
    lower run, where it has ranks) and p-1 are evaluated. n_u = p - 2 is the three-class pipeline
    (:func:`one_f_one_b_three_class_time`), to the bit.

    Why a run's ends suffice (fourclass38): the paths are not linear along a run (w = min(p-1-k, m-1) has a kink, and
    E exists only where rest = m - w - 1 >= 1), but each is non-decreasing in k there. From rank k to the next equal
    rank (f, b, W = f + b), F_<k + B_<k grows by W, D_k falls by W and rest = max(m - p + k, 0) grows by d in {0, 1};
    so A grows by W, C by d f, D by d b, and E = F_<k + B_<k + W + 2 D_k + rest W, where it exists (rest >= 1, then
    d = 1), by W - 2 W + W = 0, and only switches on going up. Each path's maximum over a run is thus at the run's last
    rank (the first is evaluated as well: harmless, never above one_f_one_b_time). Checked exactly on every integer
    case of pp 2..9, m 1..12, every n_u, each class's f and b in {0, 1, 3}, an exchange 0 or 1 (5.7 M cases, equal
    to one_f_one_b_time with ``==``), and each path summed op by op along its chain of the schedule
    (tests/test_fourclass38.py; scripts/fourclass_grid.py also against the step-by-step simulations)."""
    m_, p = np.asarray(m, dtype=float), np.asarray(pp, dtype=float)
    ff, bf, fu, bu = (np.asarray(x, dtype=float) for x in (f_first, b_first, f_upper, b_upper))
    fo, bo = np.asarray(f_lower, dtype=float), np.asarray(b_lower, dtype=float)
    fl, bl = np.asarray(f_last, dtype=float), np.asarray(b_last, dtype=float)
    n_mid = np.maximum(p - 2.0, 0.0)
    n_up = np.clip(np.asarray(n_upper, dtype=float), 0.0, n_mid)
    n_low = n_mid - n_up
    w_up, w_low, w_last = fu + bu, fo + bo, fl + bl

    def at(k: np.ndarray, fk: np.ndarray, bk: np.ndarray) -> np.ndarray:
        up_before = np.clip(k - 1.0, 0.0, n_up)  # upper middle ranks among 0 .. k-1
        low_before = np.clip(k - 1.0 - n_up, 0.0, n_low)  # lower middle ranks among 0 .. k-1
        first_before = np.minimum(k, 1.0)
        up_after = np.where(k >= 1.0, np.clip(n_up - k, 0.0, n_up), n_up)  # upper middle ranks among k+1 .. p-1
        low_after = np.where(k >= 1.0, np.clip(n_mid - np.maximum(k, n_up), 0.0, n_low), n_low)
        last_after = np.where(k < p - 1.0, 1.0, 0.0)
        warm = np.minimum(p - 1.0 - k, m_ - 1.0)
        f_before = first_before * ff + up_before * fu
        b_before = first_before * bf + up_before * bu
        after = up_after * w_up + last_after * w_last
        lower = n_low > 0  # the lower class's terms only where it has ranks (n_u = p - 2: the three classes' sums)
        f_before = np.where(lower, f_before + low_before * fo, f_before)
        b_before = np.where(lower, b_before + low_before * bo, b_before)
        after = np.where(lower, up_after * w_up + low_after * w_low + last_after * w_last, after)
        return _one_f_one_b_rank_paths(m_, warm, fk, bk, f_before, b_before, after)

    zero = np.zeros_like(p)
    out = np.maximum(at(zero, ff + 0 * p, bf + 0 * p), at(p - 1.0, fl + 0 * p, bl + 0 * p))
    upper = np.maximum(at(zero + 1.0, fu + 0 * p, bu + 0 * p), at(np.maximum(n_up, 1.0), fu + 0 * p, bu + 0 * p))
    lower = np.maximum(at(n_up + 1.0, fo + 0 * p, bo + 0 * p), at(p - 2.0, fo + 0 * p, bo + 0 * p))
    out = np.where((p >= 3) & (n_up >= 1), np.maximum(out, upper), out)
    return np.asarray(np.where((p >= 3) & (n_low >= 1), np.maximum(out, lower), out))


# ------------------------------- deferred output-layer weight gradients (docs/model.md#defer-embedding-wgrad)
def deferred_wgrad_share(defer: ArrayLike, pp: ArrayLike, microbatches: ArrayLike, head_uses: ArrayLike,
                         limit: ArrayLike = 0) -> np.ndarray:
    """Share of the last pipeline stage's output-layer weight-gradient GEMMs that Megatron-Core's
    ``defer_embedding_wgrad_compute`` moves out of their backward, n / (m u) with n = min(limit, m u) (limit 0:
    n = m u), u the output layer's passes a micro-batch (the main head and each MTP module's), m the micro-batches
    a step.

    NVIDIA/Megatron-LM core_r0.12.0 (5cb6dbb3ed) tensor_parallel/layers.py line 455: a pass appends its incoming
    gradient to ``grad_output_buffer`` and skips its weight-gradient GEMM while ``wgrad_deferral_limit == 0 or
    len(grad_output_buffer) < wgrad_deferral_limit`` (the limit from core_r0.9.0; 3c0f3ef38c lines 384-385 defer
    every pass). 0 at pp 1: model_parallel_config.py lines 367-370 (3c0f3ef38c lines 296-299) refuse the switch
    without a pipeline, and only the pipelined schedules drain the buffer (schedules.py lines 1576 and 1978)."""
    n_all = np.asarray(microbatches, dtype=float) * np.asarray(head_uses, dtype=float)
    lim = np.asarray(limit, dtype=float)
    n = np.where(lim > 0, np.minimum(lim, n_all), n_all)
    on = np.asarray(defer, dtype=bool) & (np.asarray(pp) > 1) & (n_all > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(on, n / np.where(n_all > 0, n_all, 1.0), 0.0))


def deferred_wgrad_drain(n: ArrayLike, gemm: ArrayLike, all_gather: ArrayLike = 0.0) -> np.ndarray:
    """Seconds of the drain, n deferred weight-gradient GEMMs of G seconds each, the last stage's run after its last
    backward, each input all-gathered over TP first under sequence parallelism (A seconds; 0 without)::

        drain = A + (n - 1) max(G, A) + G        (n >= 1; 0 for n = 0)

    NVIDIA/Megatron-LM 3c0f3ef38c megatron/core/utils.py lines 269-351 ``drain_embedding_wgrad_compute``: the first
    input's all-gather blocking, then each next input's all-gather issued async into the other half of a double buffer
    before the current GEMM and waited after it, and the last GEMM alone. A = 0 gives n G."""
    n_ = np.asarray(n, dtype=float)
    g_, a = np.asarray(gemm, dtype=float), np.asarray(all_gather, dtype=float)
    return np.asarray(np.where(n_ > 0, a + np.maximum(n_ - 1.0, 0.0) * np.maximum(g_, a) + g_, 0.0))


def deferred_wgrad_idle(pp: ArrayLike, virtual_stages: ArrayLike, first_backward: ArrayLike,
                        middle_backward: ArrayLike) -> np.ndarray:
    """Seconds the last pipeline rank of a 1F1B (or interleaved) schedule waits between its last backward and the end
    of the flush, where the drain runs: the last micro-batch's backward still has to pass the p - 1 ranks before it,
    one model chunk each (a rank's backward a micro-batch / v)::

        idle = ((p - 2) b_middle + b_first) / v        (0 at p <= 1)

    The lower bound of that wait (a last rank that paces the pipeline; a faster one finishes earlier)."""
    p = np.asarray(pp, dtype=float)
    v = np.maximum(np.asarray(virtual_stages, dtype=float), 1.0)
    idle = (np.maximum(p - 2.0, 0.0) * np.asarray(middle_backward, dtype=float)
            + np.asarray(first_backward, dtype=float)) / v
    return np.asarray(np.where(p > 1, idle, 0.0))
