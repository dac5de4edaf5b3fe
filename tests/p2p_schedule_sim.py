"""A step-by-step simulation of Megatron-Core's interleaved 1F1B schedule with its point-to-point traffic, for the
tests (no model code): every rank's compute and every send / receive, over all pipeline ranks.

Transcribed from NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/schedules.py
``forward_backward_pipelining_with_interleaving`` (lines 1019-2112) with ``overlap_p2p_comm_warmup_flush`` False (its
default, model_parallel_config.py) and no ``overlap_moe_expert_parallel_comm``:

- ``get_pp_rank_microbatches`` (lines 929-986): rank r runs W_r = min(2 (p - r - 1) + (v - 1) p, m v) warm-up
  forwards, then R = m v - W_r steady iterations (one forward, one backward), then W_r cool-down backwards;
  ``get_schedule_table`` (lines 989-1016) and ``get_model_chunk_id``: groups of p micro-batches through chunk 0, then
  chunk 1, ...; backward chunks reversed; ``recv_tensor_from_previous_stage`` (lines 1285-1331) decides each receive;
- before the warm-up a blocking ``recv_forward`` (not on rank 0); every warm-up forward is followed by a blocking
  ``send_forward_recv_forward`` (lines 1633-1657; without overlap_p2p_comm the last one is the blocking
  ``send_forward_backward_recv_forward_backward``, lines 1634-1654); with overlap_p2p_comm the last warm-up iteration
  posts the first backward's receive asynchronously (lines 1697-1727);
- steady phase with overlap_p2p_comm (lines 1747-1910): ``pp_pre_forward`` waits the oldest pending forward receive,
  the forward runs, ``pp_post_forward`` posts ``send_forward_recv_forward`` asynchronously and waits the *previous*
  forward send (with ``deallocate_pipeline_outputs`` this send at once: lines 1813-1815, added by 260cba7133,
  2026-04-16, "wait for async P2P send before deallocating output tensor", core_v0.18.0 on); the backward likewise
  (``pp_pre_backward`` / ``pp_post_backward``: the previous backward send waited, never at once); without it
  (lines 1912-1965) the forward and the backward run, then one blocking ``send_forward_backward_recv_forward_backward``;
- cool-down (lines 1969-2058): the pending backward receive waited, each backward followed by a blocking
  ``send_backward_recv_backward``; the last backward send waited at the end.
- ``combined`` (``overlap_moe_expert_parallel_comm``, the EP overlap's combined 1F1B): one more warm-up forward
  (``get_pp_rank_microbatches`` lines 966-970); each steady iteration runs through
  ``forward_backward_helper_wrapper`` (lines 1485-1510) into ``combined_1f1b_schedule_for_interleaved_pipelining``
  and ``TransformerModelChunkSchedulePlan.run`` (models/common/model_chunk_schedule_plan.py lines 535-607):
  ``pre_forward`` and ``pre_backward`` wait their receives, the forward and the backward run merged, then
  ``post_forward`` posts its exchange on the communication stream (its send waits, lagged or at once, hold that
  stream, not the compute: left out) and ``post_backward`` posts its exchange and waits the previous backward send on
  the compute stream. The delayed first layer's weight gradient after ``post_backward`` is left out (nothing hides).

Timing: a compute pass lasts its chunk's seconds on the rank's stream; a send and its receive (matched in post order
per ordered pair of ranks, as NCCL does) run from the later of the two posts for ``c`` seconds; a blocking call and a
wait hold the rank's stream until the transfer ends. Every pass is checked to start after its input has arrived
(a wait missing from the transcription fails the simulation)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _End:
    """One side of a transfer: posted by ``rank`` to / from ``peer``."""

    send: bool
    rank: int
    peer: int
    tag: tuple[str, int, int] | None = None  # the tensor a send carries: (A or G, micro-batch, global stage)
    post: float | None = None
    twin: _End | None = None


@dataclass
class _Program:
    ops: list[tuple[str, object]] = field(default_factory=list)


def _chunk_table(p: int, v: int, m: int) -> list[tuple[int, int]]:
    """``get_schedule_table`` with microbatch_group_size_per_vp_stage = p: (micro-batch, chunk) per virtual id."""
    out: list[tuple[int, int]] = []
    for g0 in range(0, m, p):
        hi = g0 + p if g0 + p < m else m  # the last group takes the remainder
        out += [(mb, c) for c in range(v) for mb in range(g0, hi)]
    return out


def programs(p: int, v: int, m: int, overlap: bool, send_wait_at_once: bool = False,
             combined: bool = False) -> list[_Program]:
    """Every rank's sequence of ("F"/"B", (micro-batch, stage)), ("post", [_End]) and ("wait", [_End]) operations.
    Only for the m that Megatron-Core runs: at least p micro-batches and a last group of 0 or at least p
    (d98e8a64dd lines 1160-1180, microbatch_group_size_per_vp_stage = p), so m a multiple of p (core_v0.9.0 line
    631 says so directly); the engine calls the rest infeasible (step.py, INTERLEAVE_INVALID)."""
    if m < p or m % p:
        raise ValueError(f"Megatron-Core refuses the interleaved schedule at m {m}, pp {p}: m a multiple of pp")
    table = _chunk_table(p, v, m)
    total = m * v
    progs = []
    for r in range(p):
        first, last = r == 0, r == p - 1
        nxt, prv = (r + 1) % p, (r - 1) % p
        prog = _Program()
        ops = prog.ops
        warm = min(2 * (p - r - 1) + (v - 1) * p + int(combined), total)
        all_warm = warm >= total
        rem = total - warm

        def chunk(k: int, forward: bool) -> int:
            c = table[k % total][1]
            return c if forward else v - 1 - c

        def recv_from_prev(k: int, forward: bool, first: bool = first, last: bool = last) -> bool:
            leading = first if forward else last
            if not leading:
                return True
            recv = k >= p - 1
            nc = chunk(k + 1, forward) if k < p - 1 else chunk(k - (p - 1), forward)
            return recv and nc != ((v - 1) if forward else 0)

        def fwd(k: int, r: int = r) -> tuple[str, int, int]:
            return ("A", table[k][0], chunk(k, True) * p + r)

        def bwd(k: int, r: int = r) -> tuple[str, int, int]:
            return ("G", table[k][0], chunk(k, False) * p + r)

        def exchange(send_next: tuple | None, send_prev: tuple | None, recv_prev: bool, recv_next: bool,
                     nxt: int = nxt, prv: int = prv, r: int = r, ops: list = ops) -> dict[str, _End]:
            h: dict[str, _End] = {}
            if send_next is not None:
                h["send_next"] = _End(True, r, nxt, send_next)
            if send_prev is not None:
                h["send_prev"] = _End(True, r, prv, send_prev)
            if recv_prev:
                h["recv_prev"] = _End(False, r, prv)
            if recv_next:
                h["recv_next"] = _End(False, r, nxt)
            if h:
                ops.append(("post", list(h.values())))
            return h

        def blocking(*args: object, ops: list = ops) -> None:
            h = exchange(*args)  # type: ignore[arg-type]
            if h:
                ops.append(("wait", list(h.values())))

        if not first:  # recv_forward before the warm-up
            blocking(None, None, True, False)
        recv_prev_q: list[_End] = []
        recv_next_q: list[_End] = []

        def post_grad(bk: int, pending: _End | None, first: bool = first, ops: list = ops,
                      recv_next_q: list[_End] = recv_next_q) -> _End | None:
            """Post the steady phase's gradient send (and the next receive), wait the previous gradient send
            (the one-backward lag of schedules.py); the new send's end is the next one to wait."""
            grad = None if (chunk(bk, False) == 0 and first) else bwd(bk)
            h = exchange(None, grad, False, recv_from_prev(bk, False))
            if pending is not None:
                ops.append(("wait", [pending]))
            if "recv_next" in h:
                recv_next_q.append(h["recv_next"])
            return h.get("send_prev")
        send_next_h: _End | None = None
        send_prev_h: _End | None = None
        for k in range(warm):
            rp = recv_from_prev(k, True) and k != total - 1
            ops.append(("F", fwd(k)))
            out = None if (chunk(k, True) == v - 1 and last) else fwd(k)
            if k == warm - 1 and not overlap and not all_warm:
                blocking(out, None, rp, not last)
            else:
                blocking(out, None, rp, False)
            if overlap and k == warm - 1 and not all_warm:
                h = exchange(None, None, False, not last)
                if "recv_next" in h:
                    recv_next_q.append(h["recv_next"])
        for k in range(rem):
            fk, bk = k + warm, k
            if overlap and combined:
                if not (chunk(fk, True) == 0 and first) and recv_prev_q:
                    ops.append(("wait", [recv_prev_q.pop(0)]))
                if not (chunk(bk, False) == v - 1 and last) and recv_next_q:
                    ops.append(("wait", [recv_next_q.pop(0)]))
                ops.append(("F", fwd(fk)))
                ops.append(("B", bwd(bk)))
                out = None if (chunk(fk, True) == v - 1 and last) else fwd(fk)
                h = exchange(out, None, recv_from_prev(fk, True) and k != rem - 1, False)
                if "recv_prev" in h:
                    recv_prev_q.append(h["recv_prev"])
                send_prev_h = post_grad(bk, send_prev_h)
            elif overlap:
                if not (chunk(fk, True) == 0 and first) and recv_prev_q:
                    ops.append(("wait", [recv_prev_q.pop(0)]))
                ops.append(("F", fwd(fk)))
                out = None if (chunk(fk, True) == v - 1 and last) else fwd(fk)
                rp = recv_from_prev(fk, True) and k != rem - 1
                h = exchange(out, None, rp, False)
                if send_next_h is not None:
                    ops.append(("wait", [send_next_h]))
                send_next_h = h.get("send_next")
                if "recv_prev" in h:
                    recv_prev_q.append(h["recv_prev"])
                if send_next_h is not None and send_wait_at_once:  # deallocate_pipeline_outputs, 260cba7133 on
                    ops.append(("wait", [send_next_h]))
                    send_next_h = None
                if not (chunk(bk, False) == v - 1 and last) and recv_next_q:
                    ops.append(("wait", [recv_next_q.pop(0)]))
                ops.append(("B", bwd(bk)))
                send_prev_h = post_grad(bk, send_prev_h)
            else:
                ops.append(("F", fwd(fk)))
                ops.append(("B", bwd(bk)))
                out = None if (chunk(fk, True) == v - 1 and last) else fwd(fk)
                grad = None if (chunk(bk, False) == 0 and first) else bwd(bk)
                blocking(out, grad, recv_from_prev(fk, True) and k != rem - 1, recv_from_prev(bk, False))
        if all_warm:  # recv_backward before the cool-down
            blocking(None, None, False, not last)
        for k in range(rem, total):
            if not (chunk(k, False) == v - 1 and last) and k != 0 and recv_next_q:
                ops.append(("wait", [recv_next_q.pop(0)]))
            rn = recv_from_prev(k, False) and k != total - 1
            ops.append(("B", bwd(k)))
            grad = None if (chunk(k, False) == 0 and first) else bwd(k)
            blocking(None, grad, False, rn)
        if send_prev_h is not None:
            ops.append(("wait", [send_prev_h]))
        if send_next_h is not None:
            ops.append(("wait", [send_next_h]))
        assert not recv_prev_q and not recv_next_q, "a receive is left pending"
        progs.append(prog)
    return progs


def simulate(p: int, v: int, m: int, f: float | list[float], b: float | list[float], c: float, overlap: bool,
             send_wait_at_once: bool = False, combined: bool = False) -> tuple[float, list[float]]:
    """(makespan, each rank's end) of one step with every chunk's forward ``f`` and backward ``b`` seconds (one value
    for every chunk, or one per model chunk in Megatron's order, chunk k p + r the k-th on rank r: rdv41) and ``c``
    seconds per transfer (the engine's ``sendrecv``: one tensor each way at the link's rate). A rank sends one tensor
    at a time and receives one at a time (its sends queue on its egress, its receives on its ingress, each in its
    post order: two sends posted together take 2 c, as the steady phase's batched four-way exchange without
    overlap_p2p_comm)."""
    progs = programs(p, v, m, overlap, send_wait_at_once, combined)
    fs = f if isinstance(f, list) else [f] * (p * v)
    bs = b if isinstance(b, list) else [b] * (p * v)
    sends: dict[tuple[int, int], list[_End]] = {}
    recvs: dict[tuple[int, int], list[_End]] = {}
    before: dict[int, list[_End]] = {}  # the rank's previous send (receive) in its program order
    last_send: dict[int, _End] = {}
    last_recv: dict[int, _End] = {}
    for prog in progs:
        for kind, arg in prog.ops:
            if kind == "post":
                for e in arg:  # type: ignore[attr-defined]
                    key = (e.rank, e.peer) if e.send else (e.peer, e.rank)
                    (sends if e.send else recvs).setdefault(key, []).append(e)
                    chain = last_send if e.send else last_recv
                    before[id(e)] = [chain[e.rank]] if e.rank in chain else []
                    chain[e.rank] = e
    for key, ss in sends.items():
        rs = recvs.get(key, [])
        assert len(ss) == len(rs), f"unmatched transfers on {key}: {len(ss)} sends, {len(rs)} receives"
        for s, rv in zip(ss, rs, strict=True):
            s.twin, rv.twin = rv, s
    assert all(len(rs) == len(sends.get(key, [])) for key, rs in recvs.items()), "a receive has no send"
    done: dict[int, float] = {}  # id(send end) -> end of its transfer

    def end(e: _End) -> float | None:
        s = e if e.send else e.twin
        assert s is not None and s.twin is not None
        if id(s) in done:
            return done[id(s)]
        if s.post is None or s.twin.post is None:
            return None
        start = max(s.post, s.twin.post)
        for prev in before[id(s)] + before[id(s.twin)]:  # the sender's egress, the receiver's ingress
            t = end(prev)
            if t is None:
                return None
            start = max(start, t)
        done[id(s)] = start + c
        arrival[s.tag] = start + c  # type: ignore[index]
        return start + c

    arrival: dict[tuple[str, int, int], float] = {}  # tensor -> end of its transfer
    pos = [0] * p
    clock = [0.0] * p
    moved = True
    while moved:
        moved = False
        for r, prog in enumerate(progs):
            while pos[r] < len(prog.ops):
                kind, arg = prog.ops[pos[r]]
                if kind == "post":
                    for e in arg:  # type: ignore[attr-defined]
                        e.post = clock[r]
                elif kind == "wait":
                    ends = [end(e) for e in arg]  # type: ignore[attr-defined]
                    if any(t is None for t in ends):
                        break
                    clock[r] = max([clock[r]] + ends)  # type: ignore[list-item]
                else:
                    _, mb, stage = arg  # type: ignore[misc]
                    need = ("A", mb, stage - 1) if kind == "F" else ("G", mb, stage + 1)
                    if (kind == "F" and stage > 0) or (kind == "B" and stage < p * v - 1):
                        assert need in arrival and arrival[need] <= clock[r] + 1e-12, (
                            f"rank {r} runs {kind}{arg} before its input {need} has arrived")
                    clock[r] += fs[stage] if kind == "F" else bs[stage]
                pos[r] += 1
                moved = True
    assert all(pos[r] == len(prog.ops) for r, prog in enumerate(progs)), "the schedule deadlocked"
    return max(clock), clock
