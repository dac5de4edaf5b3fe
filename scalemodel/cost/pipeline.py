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


_NEG = -np.inf


def _after(a: np.ndarray) -> np.ndarray:
    """max over the ranks after k of ``a`` (last axis), -inf for the last rank."""
    tail = np.flip(np.maximum.accumulate(np.flip(a[..., 1:], -1), -1), -1)
    return np.concatenate([tail, np.full(a.shape[:-1] + (1,), _NEG)], axis=-1)


def _first_entry(t: np.ndarray, p: ArrayLike, m: np.ndarray) -> np.ndarray:
    """The least rank i whose entry into rank k is at most t + k: w_i - i = min(p - 1 - 2 i, m - i) <= t."""
    return np.asarray(np.maximum(0.0, np.minimum(np.ceil((np.asarray(p, dtype=float) - 1.0 - t) / 2.0), m - t)))


def one_f_one_b_time(m: ArrayLike, forward: ArrayLike, backward: ArrayLike, exchange: ArrayLike = 0.0) -> np.ndarray:
    """Pipelined time of one step of non-interleaved 1F1B (PipeDream-Flush) with stage times of its own per rank:
    the makespan of the schedule's dependency graph, exactly.

    ``forward``/``backward`` hold one micro-batch's seconds on ranks 0 .. p-1 along the last axis. Rank k runs
    w_k = min(p-1-k, m) warm-up forwards, then a forward and a backward in turn, then the remaining backwards
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/schedules.py
    ``forward_backward_pipelining_without_interleaving``; Narayanan et al., SC'21 §2.2.1); a forward waits for the
    same micro-batch's forward on the rank before, a backward for its backward on the rank after.

    Each rank runs 2m operations; number them s = 0 .. 2m-1 on their rank. A forward's step to the next rank and a
    backward's to the previous one advance s by one in the steady phase and by none in the warm-up (forwards of one
    micro-batch down the ranks at s = j) and the cool-down (backwards up the ranks at s = m + j). The longest chain
    (onefb39; docs/model.md#onefb-exact) enters some pivot rank k, stays on it and leaves it:

      entry  from rank i <= k: the warm-up chain to rank i's first steady forward (s = w_i),
                F_<=i + w_i max_{r<=i} f_r (its forwards run on the slowest forward among ranks 0 .. i),
             then forwards down to k (f_{i+1} + .. + f_k), at s = w_i + k - i;
             from rank i > k: that chain to rank i, its backward and backwards up to k (b_k + .. + b_i), at s = w_k + 1;
      stay   on k from the entry to the exit: n = s_exit - s_entry operations, alternately b_k and f_k after a
             forward entry (f_k and b_k after a backward one): n (f_k + b_k) / 2 + (b_k - f_k)/4 (s_X - s_Y)
             (s = +1 for a forward, -1 for a backward end);
      exit   to rank j <= k: backwards up to j (b_j .. b_{k-1}) from s = 2m-1-w_j-(k-j), then the cool-down chain
             B_<j + w_j max_{r<=j} b_r; to rank j > k: forwards down to j from s = 2m-2-w_k, its backward,
             and that chain from j;

    T = max over (i, k, j) with the stay's n >= 0 (n = 0 only with entry and exit of one kind). Every term is a
    chain of the schedule (a lower bound); that the longest is one of them was checked against step-by-step
    simulations of the graph (tests/test_onefb39.py: random and integer grids, m 1..4p, p 1..9, zero stages) and is
    argued in docs/model.md#onefb-exact. The four paths of sessions 13-38 (A: i = j = k without the maxima; C/D/E:
    i and/or j = p-1) are members; they fell short by up to 13 % where a rank before k has a slower forward or
    backward than k, or the longest chain enters or leaves through a middle rank. Equal stages give
    (m + p - 1)(f + b) (Huang et al. 2019; Narayanan et al. 2021 §2.2.1). O(p^2) per pipeline, vectorised.

    ``exchange`` (rdv40; docs/model.md#onefb-rendezvous): c seconds of one blocking batched send/recv across a stage
    boundary (one value per pipeline, broadcast over the leading axes; ``forward``/``backward`` then the ranks'
    compute alone), Megatron-Core's program exactly: a batch ends c after the later of its two ranks reaches it
    (schedules.py L2344 / L2362 warm-up recv_forward / send_forward, L2374 the first steady recv_forward, L2416
    send_forward_recv_backward, L2446 send_backward_recv_forward, L2442 the last send_backward, L2466 / L2474 the
    cool-down recv_backward / send_backward; p2p_communication.py L536 / L569, each waited at L418). In the steady
    phase every batch joins a forward on rank k and a backward on rank k+1 that both successors need anyway, so a
    forward carries its rank's send_forward_recv_backward (f + c below the last rank) and a backward its
    send_backward_recv_forward (b + c above rank 0); in the warm-up (cool-down) a rank's forward (backward) runs
    between two blocking transfers, so the chains there run at the slowest of f + n c (b + n c), n the rank's
    boundaries (1 at either end, 2 between). The same formula with those times and paces; the chains the warm-up's
    rendezvous pushes back up (a send waits for the next rank's previous send) were never longer on any checked case
    (tests/test_rdv40.py). 0: the graph above.
    """
    return _one_f_one_b_chains(m, forward, backward, exchange, to_last=False)


def one_f_one_b_last_rank_end(m: ArrayLike, forward: ArrayLike, backward: ArrayLike,
                              exchange: ArrayLike = 0.0) -> np.ndarray:
    """When the last pipeline rank of :func:`one_f_one_b_time`'s schedule is done: the end of its last
    ``send_backward`` (Megatron-Core's last 1F1B iteration, NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/pipeline_parallel/schedules.py L2440-2444), after which it runs ``finish_embedding_wgrad_compute``
    (L2486, the deferred output-layer weight gradients: :func:`one_f_one_b_flush_idle`). Same arguments.

    That send is a rendezvous with rank p-2's first cool-down ``recv_backward`` (L2466), which rank p-2 posts when its
    last steady ``send_backward`` (L2442) ends, itself a rendezvous with rank p-3's first cool-down receive, and so up
    to rank 0, whose last steady send moves nothing (p2p_communication.py L536-600). With S_j the end of rank j's last
    steady send (S_0: its last steady backward), S_j = max(e_j, S_{j-1}) + c, e_j rank j's last steady backward's end:

        E = S_{p-1} = max_j [ ê_j + (p - 1 - j) c ]        ê_j = e_j + c above rank 0 (its own send), ê_0 = e_0

    ê_j is where each exit of :func:`one_f_one_b_time`'s chains reaches rank j (its last steady backward carries its
    send there), so E is that formula with each exit's tail, B_<j + w_j max_{r<=j} pace_b to rank 0's end, replaced
    by (p - 1 - j) c (rdv41; docs/model.md#onefb-flush). Checked against tests/test_pipeline_exchanges.py
    ``megatron_simulate``'s last rank (tests/test_rdv41.py: integer-exact, ``==``; random floats to 1e-12)."""
    return _one_f_one_b_chains(m, forward, backward, exchange, to_last=True)


def one_f_one_b_flush_idle(m: ArrayLike, forward: ArrayLike, backward: ArrayLike,
                           exchange: ArrayLike = 0.0) -> np.ndarray:
    """Seconds the last rank of :func:`one_f_one_b_time`'s schedule waits between the end of its last send
    (:func:`one_f_one_b_last_rank_end`, E) and the end of rank 0's last backward (T, the step's pipelined part):
    T - E, the window Megatron-Core's deferred output-layer weight-gradient drain runs in on the last rank
    (schedules.py L2486; docs/model.md#defer-embedding-wgrad). A drain of D seconds ends the step at max(T, E + D):
    it adds max(D - (T - E), 0). Exactly; a last rank that paces the pipeline waits the last micro-batch's backward
    on the p - 1 ranks before it and the p - 2 exchanges between them, sum_{r<p-1} b_r + (p - 2) c, a lower bound."""
    t = _one_f_one_b_chains(m, forward, backward, exchange, to_last=False)
    return np.asarray(t - _one_f_one_b_chains(m, forward, backward, exchange, to_last=True))


def _one_f_one_b_chains(m: ArrayLike, forward: ArrayLike, backward: ArrayLike, exchange: ArrayLike,
                        to_last: bool) -> np.ndarray:
    """:func:`one_f_one_b_time`'s longest chain: to the end of rank 0's last backward (the makespan), or with
    ``to_last`` to the end of the last rank's last send (:func:`one_f_one_b_last_rank_end`): the same entries, stays
    and exits, each exit's tail from rank j's last steady backward the cool-down chain B_<j + w_j max_{r<=j} pace_b or
    (p - 1 - j) c."""
    f = np.asarray(forward, dtype=float)
    b = np.asarray(backward, dtype=float)
    p = f.shape[-1]
    c = np.asarray(exchange, dtype=float)
    shape = np.broadcast_shapes(np.shape(m), f.shape[:-1], b.shape[:-1], c.shape)
    f, b = np.broadcast_to(f, shape + (p,)), np.broadcast_to(b, shape + (p,))
    m_ = np.broadcast_to(np.asarray(m, dtype=float), shape)[..., None]
    r = np.arange(p, dtype=float)
    pace_f, pace_b = f, b
    c_ = np.broadcast_to(c, shape)[..., None]
    if np.any(c):
        below, above = c_ * (r < p - 1.0), c_ * (r > 0.0)  # a rank's exchange with the next / previous rank
        f, b = f + below, b + above
        pace_f, pace_b = f + above, b + below
    w = np.minimum(p - 1.0 - r, m_)  # warm-up forwards
    fc, bc = np.cumsum(f, axis=-1), np.cumsum(b, axis=-1)
    bl = bc - b  # B_<k
    vin = fc + w * np.maximum.accumulate(pace_f, axis=-1)  # chain to rank i's first steady forward
    if to_last:  # from rank j's last steady backward (its send included above rank 0) to the last rank's last send
        sout = np.broadcast_to((p - 1.0 - r) * c_, shape + (p,))
    else:  # from rank j's last steady backward to rank 0's last backward
        sout = bl + w * np.maximum.accumulate(pace_b, axis=-1)
    lam, d = (f + b) / 2.0, (b - f) / 4.0
    k, x = r[:, None], r[None, :]  # pivot, entry / exit rank
    e_f = np.where(x <= k, (vin - fc)[..., None, :] + (fc + d)[..., :, None]
                   - (w[..., None, :] + k - x) * lam[..., :, None], _NEG)
    e_f_from = np.flip(np.maximum.accumulate(np.flip(e_f, -1), -1), -1)  # the best forward entry from rank >= i
    e_b = _after(vin + bc) - bl - (w + 1.0) * lam - d
    s_b = 2.0 * m_[..., None] - 1.0 - w[..., None, :] - k + x
    x_b = np.where(x <= k, bl[..., :, None] + (sout - bl)[..., None, :] + s_b * lam[..., :, None] + d[..., :, None],
                   _NEG)
    s_f = 2.0 * m_ - 2.0 - w
    x_f = _after(fc + b + sout) - fc + s_f * lam - d
    i0 = _first_entry(s_b - 1.0 - k, p, m_[..., None])  # a forward entry before a backward exit (n odd, >= 1)
    fb = np.where(i0 <= k, np.take_along_axis(e_f_from, np.minimum(i0, p - 1.0).astype(np.intp), -1) + x_b, _NEG)
    i1 = _first_entry(s_f - r, p, m_)
    ff = np.where(i1 <= r, np.take_along_axis(e_f_from, np.minimum(i1, p - 1.0).astype(np.intp)[..., None],
                                              -1)[..., 0] + x_f, _NEG)
    bb = e_b + np.max(np.where(w[..., :, None] + 1.0 <= s_b, x_b, _NEG), axis=-1)
    bf = np.where(w + 1.0 < s_f, e_b + x_f, _NEG)
    best = np.maximum(np.maximum(np.max(fb, axis=-1), ff), np.maximum(bb, bf))
    return np.asarray(np.max(best, axis=-1))


def one_f_one_b_three_class_time(m: ArrayLike, pp: ArrayLike, f_first: ArrayLike, b_first: ArrayLike,
                                 f_mid: ArrayLike, b_mid: ArrayLike, f_last: ArrayLike, b_last: ArrayLike,
                                 exchange: ArrayLike = 0.0) -> np.ndarray:
    """:func:`one_f_one_b_time` for a pipeline whose rank 0, ranks 1 .. p-2 and rank p-1 have their own stage
    times (the engine's first / middle / last stages), vectorised over ``pp``: :func:`one_f_one_b_four_class_time`
    with every middle rank of the upper class."""
    n_mid = np.maximum(np.asarray(pp, dtype=float) - 2.0, 0.0)
    return one_f_one_b_four_class_time(m, pp, n_mid, f_first, b_first, f_mid, b_mid, f_mid, b_mid, f_last, b_last,
                                       exchange)


def one_f_one_b_four_class_time(m: ArrayLike, pp: ArrayLike, n_upper: ArrayLike, f_first: ArrayLike,
                                b_first: ArrayLike, f_upper: ArrayLike, b_upper: ArrayLike, f_lower: ArrayLike,
                                b_lower: ArrayLike, f_last: ArrayLike, b_last: ArrayLike,
                                exchange: ArrayLike = 0.0) -> np.ndarray:
    """:func:`one_f_one_b_time` for a pipeline of rank 0, ``n_upper`` middle ranks 1 .. n_u of one stage time, the
    other middle ranks n_u + 1 .. p-2 of another and rank p-1, vectorised over ``pp`` (the balanced split of L layers
    that p does not divide: rank 0 and ranks 1 .. L mod p - 1 of ceil(L/p) layers, the rest and the last of
    floor(L/p); n_u clipped to 0 .. p-2). n_u = p - 2 is the three-class pipeline
    (:func:`one_f_one_b_three_class_time`). p = 1: rank 0 of the first class.

    Where m >= 2p - 1 every entry of :func:`one_f_one_b_time` comes before every exit (the stay's n >= 0 for all
    (i, k, j)), so T = max_k [max_i entry(k, i) + max_j exit(k, j)], and each of those is affine in i (in j) along a
    run of equal ranks (f, b and the prefix maxima constant there; w_i = p-1-i), so its maximum over the run sits at
    the run's ends or at k, k + 1; T(k) is then a maximum of functions affine in k along a run of equal pivots (convex),
    largest at the run's first rank, its last, or the one before the last (where the candidate k + 1 leaves the run).
    So each run's pivots are its first rank, its last and the one before its last (k in {0, 1, n_u - 1, n_u, n_u + 1,
    p - 3, p - 2, p - 1}), each entry (exit) from the ends of the runs before and after the pivot's, the run's first
    rank and k, and k + 1 and the run's last (onefb39; docs/model.md#onefb-exact): about 5x the four chains' work.
    Elsewhere (m < 2p - 1, a few of plan's candidates) it is :func:`one_f_one_b_time` on the ranks written out, one
    pipeline depth at a time. ``exchange``: as :func:`one_f_one_b_time`'s (rdv40), each class's times its compute:
    rank 0 runs f + c, b (paces f + c, b + c), a middle rank f + c, b + c (paces f + 2c, b + 2c), the last f, b + c;
    the prefix maxima are of the paces, constant along a run as before, so the same points suffice."""
    args = [np.asarray(v, dtype=float) for v in (m, pp, n_upper, f_first, b_first, f_upper, b_upper, f_lower, b_lower,
                                                 f_last, b_last, exchange)]
    full = np.broadcast_shapes(*(v.shape for v in args))
    # one contiguous axis of candidates (plan's grids arrive as broadcast views)
    m_, p, n_upper_, *vals, c = (np.ascontiguousarray(np.broadcast_to(v, full)).reshape(-1) for v in args)
    shape = m_.shape
    raw = vals
    ff, bf, fu, bu, fo, bo, fl, bl = vals
    # the paces of the warm-up (forward) and cool-down (backward) chains: each operation between its rank's blocking
    # transfers; then each operation with its one steady exchange (rdv40; one_f_one_b_time)
    c_end = np.where(p >= 2.0, c, 0.0)
    pff, pbf, pfu, pbu, pfo, pbo = ff + c_end, bf + c_end, fu + 2.0 * c, bu + 2.0 * c, fo + 2.0 * c, bo + 2.0 * c
    pfl, pbl = fl + c_end, bl + c_end
    ff, fu, bu, fo, bo, bl = ff + c_end, fu + c, bu + c, fo + c, bo + c, bl + c_end
    n_mid = np.maximum(p - 2.0, 0.0)
    n_up = np.clip(n_upper_, 0.0, n_mid)
    n_low = n_mid - n_up
    neg = np.full(shape, _NEG)
    has_u, has_o, has_l = n_up >= 1.0, n_low >= 1.0, p >= 2.0
    # prefix maxima of the forward / backward through each run (rank 0; the upper run; the lower run; the last)
    mfu, mbu = np.maximum(pff, pfu), np.maximum(pbf, pbu)
    mfo = np.maximum(np.where(has_u, mfu, pff), pfo)
    mbo = np.maximum(np.where(has_u, mbu, pbf), pbo)
    mfl = np.maximum(np.where(has_o, mfo, np.where(has_u, mfu, pff)), pfl)
    mbl = np.maximum(np.where(has_o, mbo, np.where(has_u, mbu, pbf)), pbl)
    fc_all = ff + n_up * fu + n_low * fo + np.where(has_l, fl, 0.0)
    bc_all = bf + n_up * bu + n_low * bo + np.where(has_l, bl, 0.0)
    zero = np.zeros(shape)
    # name: (f, b, F_<=i and B_<=i at i = 0 of the run's line (F_<=i = c + i f), max f, max b, first, last, exists)
    runs = {"first": (ff, bf, ff, bf, pff, pbf, zero, zero, p >= 1.0),
            "upper": (fu, bu, ff, bf, mfu, mbu, zero + 1.0, n_up, has_u),
            "lower": (fo, bo, ff + n_up * (fu - fo), bf + n_up * (bu - bo), mfo, mbo, n_up + 1.0, p - 2.0, has_o),
            "last": (fl, bl, fc_all, bc_all, mfl, mbl, p - 1.0, p - 1.0, has_l)}
    slope = {"first": 0.0, "upper": 1.0, "lower": 1.0, "last": 0.0}  # F_<=i grows along the run, not at its ends
    order = list(runs)

    def point(run: str, i: np.ndarray) -> dict[str, np.ndarray]:
        """Rank i of ``run``: the terms of its entries and exits (m >= 2p - 1, so w_i = p - 1 - i)."""
        f, b, fc0, bc0, mf, mb = runs[run][:6]
        fc, bc, rest = fc0 + slope[run] * i * f, bc0 + slope[run] * i * b, p - 1.0 - i
        return {"i": i, "fc": fc, "bl": bc - b, "alpha": rest * mf, "beta": 2.0 * i - p + 1.0,
                "g": fc + bc + rest * mf, "alpha_x": rest * mb, "g_x": fc + bc + rest * mb}

    ends = {r: (point(r, runs[r][6]), point(r, runs[r][7])) for r in order}  # each run's first and last rank
    out = neg
    for ri, r in enumerate(order):
        a, e, exists = runs[r][6], runs[r][7], runs[r][8]
        lam, d = (runs[r][0] + runs[r][1]) / 2.0, (runs[r][1] - runs[r][0]) / 4.0
        earlier = [(runs[q][8], x) for q in order[:ri] for x in ends[q]]
        later = [(runs[q][8], x) for q in order[ri + 1:] for x in ends[q]]
        prev = functools.reduce(np.maximum, [np.where(ok, x["alpha"] + x["beta"] * lam, neg) for ok, x in earlier],
                                neg)
        prev_x = functools.reduce(np.maximum, [np.where(ok, x["alpha_x"] + 2.0 * x["i"] * lam, neg)
                                               for ok, x in earlier], neg)
        next_g = functools.reduce(np.maximum, [np.where(ok, x["g"], neg) for ok, x in later], neg)
        next_gx = functools.reduce(np.maximum, [np.where(ok, x["g_x"], neg) for ok, x in later], neg)
        start, stop = ends[r]
        # pivots: the run's first rank, its last, and the one before its last (where k + 1 leaves the run)
        for k in (a, np.maximum(e - 1.0, a), e):
            pk, inner = point(r, k), k < e
            nxt = point(r, np.minimum(k + 1.0, e))
            f_in = np.maximum(prev, np.maximum(start["alpha"] + start["beta"] * lam, pk["alpha"] + pk["beta"] * lam))
            b_in = np.maximum(next_g, np.where(inner, np.maximum(nxt["g"], stop["g"]), neg))
            b_out = np.maximum(prev_x, np.maximum(start["alpha_x"] + 2.0 * start["i"] * lam,
                                                  pk["alpha_x"] + 2.0 * k * lam))
            f_out = np.maximum(next_gx, np.where(inner, np.maximum(nxt["g_x"], stop["g_x"]), neg))
            entry = np.maximum(f_in + pk["fc"] + d - k * lam, b_in - pk["bl"] - (p - k) * lam - d)
            leave = np.maximum(b_out + pk["bl"] + (2.0 * m_ - p - k) * lam + d,
                               f_out - pk["fc"] + (2.0 * m_ - 1.0 - p + k) * lam - d)
            out = np.where(exists, np.maximum(out, entry + leave), out)
    short = m_ < 2.0 * p - 1.0
    if np.any(short):
        out = _ranks_written_out(one_f_one_b_time, short, m_, p, n_up, raw, c, out)
    return np.asarray(out).reshape(full)


def _ranks_written_out(fn: Any, on: np.ndarray, m: np.ndarray, p: np.ndarray, n_up: np.ndarray,
                       raw: list[np.ndarray], c: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out`` with ``fn`` (:func:`one_f_one_b_time` or a function of its arguments) of each candidate where ``on``
    (flat, one axis) on its ranks written out from its four classes (``raw``: first, upper, lower, last forward and
    backward; ``n_up`` upper middle ranks), one pipeline depth at a time."""
    out = np.array(out, dtype=float)
    for depth in sorted({float(x) for x in p[on].ravel()}):  # not np.unique: it imports numpy.ma (10 ms)
        sel = on & (p == depth)
        n = int(depth)
        ranks = np.arange(n, dtype=float)
        # each candidate's class a rank (candidates x n, from n_u's column): 0 first, 1 upper, 2 lower, 3 last
        cls = np.where(ranks == 0, 0, np.where(ranks == n - 1, 3, np.where(ranks <= n_up[sel][:, None], 1, 2)))
        table_f = np.stack([v[sel] for v in raw[0::2]], axis=-1)  # the compute, before the exchanges
        table_b = np.stack([v[sel] for v in raw[1::2]], axis=-1)
        out[sel] = fn(m[sel], np.take_along_axis(table_f, cls, -1), np.take_along_axis(table_b, cls, -1), c[sel])
    return out


def one_f_one_b_four_class_flush_idle(m: ArrayLike, pp: ArrayLike, n_upper: ArrayLike, f_first: ArrayLike,
                                      b_first: ArrayLike, f_upper: ArrayLike, b_upper: ArrayLike,
                                      f_lower: ArrayLike, b_lower: ArrayLike, f_last: ArrayLike,
                                      b_last: ArrayLike, exchange: ArrayLike = 0.0) -> np.ndarray:
    """:func:`one_f_one_b_flush_idle` of :func:`one_f_one_b_four_class_time`'s pipeline (same arguments), on its
    ranks written out, one pipeline depth at a time (O(p^2) a candidate; the engine prices it only where the
    deferred output-layer wgrad is on). 0 at p <= 1."""
    args = [np.asarray(v, dtype=float) for v in (m, pp, n_upper, f_first, b_first, f_upper, b_upper, f_lower,
                                                 b_lower, f_last, b_last, exchange)]
    full = np.broadcast_shapes(*(v.shape for v in args))
    m_, p, n_upper_, *raw, c = (np.ascontiguousarray(np.broadcast_to(v, full)).reshape(-1) for v in args)
    n_up = np.clip(n_upper_, 0.0, np.maximum(p - 2.0, 0.0))
    out = _ranks_written_out(one_f_one_b_flush_idle, p >= 2.0, m_, p, n_up, raw, c, np.zeros(m_.shape))
    return np.asarray(out).reshape(full)


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

    The lower bound of that wait (a last rank that paces the pipeline; a faster one finishes earlier), read for GPipe,
    ZB-H1 and the interleaved schedule; Megatron-Core's 1F1B takes the program's window exactly,
    :func:`one_f_one_b_flush_idle` (rdv41)."""
    p = np.asarray(pp, dtype=float)
    v = np.maximum(np.asarray(virtual_stages, dtype=float), 1.0)
    idle = (np.maximum(p - 2.0, 0.0) * np.asarray(middle_backward, dtype=float)
            + np.asarray(first_backward, dtype=float)) / v
    return np.asarray(np.where(p > 1, idle, 0.0))
