"""The interleaved (virtual-pipeline) schedule's data-parallel sync, model chunk by model chunk
(docs/model.md#interleaved-dp-sync; dp_comm.interleaved_grad_sync_exposed, dp_comm.interleaved_param_gather_exposed).

The expected values come from a step-by-step simulation of the first pipeline stage written here from Megatron-Core's
schedule (megatron/core/pipeline_parallel/schedules.py ``forward_backward_pipelining_with_interleaving`` at
NVIDIA/Megatron-LM@f2e5db402c; the same order at 92c8482e6 with the default microbatch group of pp): the chunk of
each forward and backward iteration, which iteration is a chunk's first or last micro-batch, when its gradient sync
and its parameter gather are launched, and one FIFO stream (the data-parallel group's NCCL stream) that runs them in
launch order. Compute runs back to back (the first stage's warmup forwards and cooldown backwards, which hold
every chunk's first forward and last backward), so the windows are compute only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scalemodel.choices import ScheduleKind, Zero
from scalemodel.engine import dp_comm, step
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.workload import TransformerWorkload

# ---------------------------------------------------------------------------------------------------------------
# Megatron-Core's iteration bookkeeping (schedules.py at f2e5db402c: get_model_chunk_id,
# is_first_microbatch_for_model_chunk, is_last_microbatch_for_model_chunk), for m micro-batches, pp stages, v chunks


def chunk_of(k: int, pp: int, v: int, forward: bool) -> int:
    c = (k % (pp * v)) // pp
    return c if forward else v - 1 - c


def is_first_for_chunk(k: int, pp: int, v: int, m: int) -> bool:
    return k < m * v and k // (pp * v) == 0 and (k % (pp * v)) % pp == 0


def is_last_for_chunk(k: int, pp: int, v: int, m: int) -> bool:
    return k < m * v and k // (pp * v) == m // pp - 1 and (k % (pp * v)) % pp == pp - 1


class Stream:
    """One CUDA stream: a collective starts when it is launched and the one before it has finished."""

    def __init__(self) -> None:
        self.free = 0.0

    def run(self, launched: float, seconds: float) -> float:
        self.free = max(self.free, launched) + seconds
        return self.free


def simulate_grad_sync(pp: int, v: int, m: int, r: float, beta: float, chunk0: list[float], aligned: bool) -> float:
    """Seconds the first stage's gradient sync runs past its last backward. Each chunk syncs r seconds of traffic;
    chunk 0's buckets ``chunk0`` (sum r) in the order their gradients complete (the embedding's last); one
    chunk-backward takes beta. aligned (grad_sync_func): after the backward of the chunk's last micro-batch the
    whole chunk is launched (``backward_step_helper``; rank 0: grad_sync_microbatch_id = microbatch_id). Not aligned:
    the sync is enabled before that backward, so each bucket launches when its last gradient exists (chunk 0's
    buckets spread over the backward in proportion to their size; every later chunk is one bucket: at its end)."""
    assert abs(sum(chunk0) - r) < 1e-9 * max(r, 1.0)
    s = Stream()
    for k in range(m * v):
        if not is_last_for_chunk(k, pp, v, m):
            continue
        c = chunk_of(k, pp, v, forward=False)
        start, end = k * beta, (k + 1) * beta
        if c > 0:
            s.run(end, r)
        elif aligned:
            for b in chunk0:
                s.run(end, b)
        else:
            done = 0.0
            for b in chunk0:
                done += b
                s.run(start + beta * done / r, b)
    return max(s.free - m * v * beta, 0.0)


def simulate_param_gather(pp: int, v: int, m: int, a: float, phi: float, chunk0: list[float], aligned: bool) -> float:
    """Seconds the first stage's forwards wait for parameter all-gathers: each chunk gathers a seconds, chunk 0 in
    buckets ``chunk0`` in forward order (the embedding's first), one chunk-forward takes phi. Aligned
    (param_sync_func = start_param_sync): chunks 0 and 1 launched when the schedule starts, chunk c + 1 (> 1) at the
    start of chunk c's first forward (forward_step_helper, rank 0: param_sync_microbatch_id = microbatch_id); the
    pre-hook only waits. Not aligned (Megatron-Core 92c8482e6 ``finish_param_sync``): the pre-hook launches a bucket
    not yet launched and waits for it; after each wait it launches the next bucket of the same chunk. Chunk 0's
    first bucket is the word embedding's, whose forward is a lookup: its layers' compute is spread over the others."""
    s = Stream()
    done: dict[tuple[int, int], float] = {}
    if aligned:
        for i, b in enumerate(chunk0):
            done[0, i] = s.run(0.0, b)
        done[1, 0] = s.run(0.0, a)
    t = 0.0
    for k in range(v * pp):  # every chunk's first forward; the first stage runs them back to back (warmup)
        c = chunk_of(k, pp, v, forward=True)
        if aligned and is_first_for_chunk(k, pp, v, m) and 1 < c + 1 < v:
            done[c + 1, 0] = s.run(t, a)
        if not is_first_for_chunk(k, pp, v, m):
            t += phi
            continue
        buckets = chunk0 if c == 0 else [a]
        for i, b in enumerate(buckets):
            if (c, i) not in done:  # not aligned: the pre-hook launches it
                done[c, i] = s.run(t, b)
            t = max(t, done[c, i])
            if not aligned and i + 1 < len(buckets):
                done[c, i + 1] = s.run(t, buckets[i + 1])
            rest = a - chunk0[0]
            t += phi * (float(c > 0 or rest <= 0.0) if i == 0 else b / rest)
    return t - v * pp * phi


SHAPES = [(2, 2, 2), (2, 3, 4), (2, 4, 8), (3, 4, 6), (4, 2, 8), (4, 6, 8), (4, 12, 16), (8, 8, 16), (8, 3, 8)]
#: traffic per chunk against one chunk's compute: well under, about, over, far over the windows
SCALES = [0.05, 0.4, 1.0, 3.0, 12.0, 40.0]


def _buckets(total: float, first: float, fine: int, embedding_last: bool) -> list[float]:
    """``fine`` equal buckets and the embedding's bucket of ``first`` (its share of ``total``)."""
    rest = [(total - first) / fine] * fine
    return rest + [first] if embedding_last else [first] + rest


@pytest.mark.parametrize(("pp", "v", "m"), SHAPES)
@pytest.mark.parametrize("scale", SCALES)
def test_aligned_grad_sync_equals_the_simulation(pp: int, v: int, m: int, scale: float) -> None:
    """aligned: every bucket of a chunk is launched after its last backward, so the simulation and
    max(r, C - (v - 1) pp b/v) agree exactly, whatever chunk 0's buckets."""
    beta = 0.01
    r = scale * beta
    for chunk0 in ([r], _buckets(r, 0.3 * r, 5, True)):
        sim = simulate_grad_sync(pp, v, m, r, beta, chunk0, aligned=True)
        got = dp_comm.interleaved_grad_sync_exposed(v * r, v * beta, pp, v, chunk0[-1], True)
        assert float(got) == pytest.approx(sim, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("pp", "v", "m"), SHAPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("share", [0.02, 0.3])
def test_unaligned_grad_sync_against_the_simulation(pp: int, v: int, m: int, scale: float, share: float) -> None:
    """Not aligned: chunk 0's buckets launch under its last backward, the embedding's last. The formula is the
    fluid limit of the buckets (as the whole-stage rule max(C - b, C x last) is): the simulation lies between it and
    it plus one of the fine buckets."""
    beta = 0.01
    r = scale * beta
    fine = 400
    chunk0 = _buckets(r, share * r, fine, embedding_last=True)
    sim = simulate_grad_sync(pp, v, m, r, beta, chunk0, aligned=False)
    got = float(dp_comm.interleaved_grad_sync_exposed(v * r, v * beta, pp, v, share * r, False))
    assert got <= sim + 1e-12
    assert sim <= got + (1.0 - share) * r / fine + 1e-12


@pytest.mark.parametrize(("pp", "v", "m"), SHAPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("share", [0.02, 0.3])
@pytest.mark.parametrize("aligned", [True, False])
def test_param_gather_against_the_simulation(pp: int, v: int, m: int, scale: float, share: float,
                                             aligned: bool) -> None:
    """The gathers before every chunk's first forward: the simulation lies between the formula and the formula plus
    one of chunk 0's fine buckets (the formula takes chunk 0's buckets in the fluid limit)."""
    phi = 0.004
    a = scale * phi
    fine = 400
    chunk0 = _buckets(a, share * a, fine, embedding_last=False)
    sim = simulate_param_gather(pp, v, m, a, phi, chunk0, aligned)
    got = float(dp_comm.interleaved_param_gather_exposed(v * a, v * phi, pp, v, share * a, aligned))
    assert got <= sim + 1e-12
    assert sim <= got + (1.0 - share) * a / fine + 1e-12


def test_hand_values() -> None:
    """Two cases by hand. pp 4, v 12, C = 343.7 ms of reduce-scatter against b = 69.24 ms (W = 4 x 5.77 = 23.08 ms):
    aligned max(28.64, 343.7 - 11 x 23.08) = 89.82 ms; not aligned the same (the queue term is the largest).
    pp 8, v 8, A = 105.6 ms of gathers, f = 36.18 ms (W = 36.18 ms, a = 13.2 ms, d0 = max(13.2 - 4.52, 4.3) = 8.68):
    aligned max(8.68, 26.4 - 36.18) + 6 x 0 = 8.68 ms; not aligned 8.68 + 7 x 13.2 = 101.08 ms."""
    assert float(dp_comm.interleaved_grad_sync_exposed(343.7, 69.24, 4, 12, 18.9, True)) == pytest.approx(
        max(343.7 / 12, 343.7 - 11 * 4 * 69.24 / 12))
    assert float(dp_comm.interleaved_grad_sync_exposed(343.7, 69.24, 4, 12, 18.9, False)) == pytest.approx(
        89.82, abs=0.01)
    a, f_v = 105.6 / 8, 36.18 / 8  # 13.2 ms of gathers and 4.5225 ms of forward per chunk
    d0 = max(a - f_v, min(4.3, a))  # chunk 0's delay: 8.6775 ms
    assert d0 == pytest.approx(8.6775) and 2 * a - 8 * f_v < d0 and a < 8 * f_v  # the later chunks hide
    assert float(dp_comm.interleaved_param_gather_exposed(105.6, 36.18, 8, 8, 4.3, True)) == pytest.approx(d0)
    assert float(dp_comm.interleaved_param_gather_exposed(105.6, 36.18, 8, 8, 4.3, False)) == pytest.approx(
        d0 + 7 * a)


def test_never_hides_more_than_the_compute_under_it() -> None:
    """Random traffic and windows (vectorised): the hidden part of each sync is at most the compute the schedule puts
    under it (the reduce-scatters: the last (v - 1) pp chunk-backwards, plus chunk 0's own when not aligned; the
    gathers: the first v pp chunk-forwards), the exposed part at most the traffic, and more compute never exposes
    more."""
    rng = np.random.default_rng(7)
    n = 20_000
    pp = rng.integers(2, 17, n).astype(float)
    v = rng.integers(2, 13, n).astype(float)
    c = rng.exponential(0.2, n)
    w = rng.exponential(0.1, n)
    first = c * rng.uniform(0.0, 0.5, n)
    for aligned in (np.ones(n, bool), np.zeros(n, bool), rng.random(n) < 0.5):
        rs = dp_comm.interleaved_grad_sync_exposed(c, w, pp, v, first, aligned)
        ag = dp_comm.interleaved_param_gather_exposed(c, w, pp, v, first, aligned)
        assert np.all((rs >= 0) & (rs <= c + 1e-15) & (ag >= 0) & (ag <= c + 1e-15))
        assert np.all(c - rs <= (v - 1) * pp * w / v + np.where(aligned, 0.0, w / v) + 1e-12)
        assert np.all(c - ag <= v * pp * w / v + 1e-12)
        assert np.all(dp_comm.interleaved_grad_sync_exposed(c, 1.5 * w, pp, v, first, aligned) <= rs + 1e-15)
        assert np.all(dp_comm.interleaved_param_gather_exposed(c, 1.5 * w, pp, v, first, aligned) <= ag + 1e-15)


# ---------------------------------------------------------------------------------------------------------------
# the step: which candidates sync chunk by chunk, and the 1F1B / non-pipelined rule unchanged

# the model of tests/test_distopt.py with 8 layers
TINY = TransformerWorkload(name="tiny-llama", layers=8, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False)


@pytest.fixture(scope="module")
def job():  # type: ignore[no-untyped-def]
    return build_job(load_cluster("pcie-25gbe"), TINY, TrainingSpec(precision="bf16"))


def _captured(job, g):  # type: ignore[no-untyped-def]
    """step.evaluate on ``g``, with the arguments and result of its data-parallel exposure."""
    seen = {}
    orig = dp_comm._expose_param_gather

    def spy(g_, comp, grads, last, gather, *rest):  # type: ignore[no-untyped-def]
        out = orig(g_, comp, grads, last, gather, *rest)  # rest: nemo39's optimizer-step window
        seen.update(comp=comp, grads=grads, last=last, gather=gather, out=out)
        return out

    dp_comm._expose_param_gather = spy
    try:
        res = step.evaluate(job, g)
    finally:
        dp_comm._expose_param_gather = orig
    return res, seen


#: 16 layers of h 4096 (7 B-class), untied: pp 2 x v 4 = two layers a chunk
MID = TransformerWorkload(name="mid", layers=16, hidden=4096, heads=32, ffn_hidden=11008, vocab=32_000, seq_len=4096,
                          gated_mlp=True, biases=False, tied_embeddings=False, dropout=False)


@pytest.mark.parametrize("cluster", ["dgx-h100", "pcie-25gbe"])
@pytest.mark.parametrize("align_grad", [True, False])
@pytest.mark.parametrize("align_gather", [True, False])
def test_step_prices_the_interleaved_schedule(cluster: str, align_grad: bool, align_gather: bool) -> None:
    """Megatron-Core DDP, ZeRO-1 with overlap_param_gather, pp 2, v 4, m 4, dp 16: the step's exposed data-parallel
    time is the simulated reduce-scatter (chunk 0 in its priced buckets) plus the simulated gathers, on the engine's
    own traffic and windows. On NDR InfiniBand the traffic is about the windows (each switch matters), on 25 GbE far
    over them."""
    job = build_job(load_cluster(cluster), MID, TrainingSpec(precision="bf16"))
    st = StrategySpec(dp=16, pp=2, schedule="interleaved:4", zero="1", overlap=True, overlap_param_gather=True,
                      megatron_ddp=True, align_grad_reduce=align_grad, align_param_gather=align_gather)
    g = grid_from_strategy(st, TrainingSpec(global_batch=64, precision="bf16"), 32, job)
    _res, seen = _captured(job, g)
    ag = float(seen["gather"][0])
    rs = float(seen["grads"][0]) - ag
    last = float(np.asarray(seen["last"]).ravel()[0])
    f, b = float(seen["comp"]["forward_free"][0]), float(seen["comp"]["backward_free"][0])
    assert ag > 0 and rs > 0
    v, pp, m = 4, 2, 4
    fine = 200
    rs_sim = simulate_grad_sync(pp, v, m, rs / v, b / v, _buckets(rs / v, min(rs * last, rs / v), fine, True),
                                aligned=align_grad)
    ag_sim = simulate_param_gather(pp, v, m, ag / v, f / v, _buckets(ag / v, min(ag * last, ag / v), fine, False),
                                   aligned=align_gather)
    tol = (rs + ag) / v / fine
    assert float(seen["out"][0]) == pytest.approx(rs_sim + ag_sim, abs=tol)


@pytest.mark.parametrize(("pp", "schedule", "megatron"), [(1, "1f1b", True), (2, "1f1b", True),
                                                         (2, "interleaved:2", False)])
def test_other_schedules_keep_the_whole_stage_rule(job, pp: int, schedule: str, megatron: bool) -> None:  # type: ignore[no-untyped-def]
    """Without pipelining, under 1F1B, or without Megatron-Core's DDP the reduce-scatters share the last backward
    and the gathers the first forward, max(RS - b, RS x last) + max(AG - f, AG x last), by hand from the engine's
    traffic, and the align switches change nothing."""
    outs = []
    for align in (True, False):
        st = StrategySpec(dp=8, pp=pp, schedule=schedule, zero="1", overlap=True, overlap_param_gather=True,
                          megatron_ddp=megatron, align_grad_reduce=align, align_param_gather=align)
        g = grid_from_strategy(st, TrainingSpec(global_batch=32, precision="bf16"), 8 * pp, job)
        res, seen = _captured(job, g)
        ag = float(seen["gather"][0])
        rs = float(seen["grads"][0]) - ag
        last = float(np.asarray(seen["last"]).ravel()[0])
        f, b = float(seen["comp"]["forward_free"][0]), float(seen["comp"]["backward_free"][0])
        hand = max(rs - b, rs * last) + max(ag - f, ag * last)
        assert float(seen["out"][0]) == pytest.approx(hand, rel=1e-12)
        outs.append(float(res.step_time[0]))
    assert outs[0] == outs[1]


def test_mask_needs_every_condition() -> None:
    """interleaved_dp_sync: Megatron-Core DDP at ZeRO 0/1, overlap, interleaved, pp > 1, v >= 2."""
    cases = list(itertools.product([True, False], [Zero.NONE, Zero.OPTIMIZER, Zero.PARAMETERS], [True, False],
                                   [ScheduleKind.INTERLEAVED, ScheduleKind.ONE_F_ONE_B], [1, 2], [1, 2]))
    cols = list(zip(*cases, strict=True))
    g = grid_from_arrays(gpus=16, dp=8, tp=1, pp=np.asarray(cols[4]), micro_batch=1, global_batch=32,
                         megatron_ddp=np.asarray(cols[0]), zero=np.asarray(cols[1]), overlap=np.asarray(cols[2]),
                         schedule=np.asarray(cols[3]), virtual_stages=np.asarray(cols[5]))
    got = dp_comm.interleaved_dp_sync(g)
    for i, (ddp, zero, ov, sched, pp, vv) in enumerate(cases):
        want = ddp and zero <= Zero.OPTIMIZER and ov and sched == ScheduleKind.INTERLEAVED and pp > 1 and vv == 2
        assert bool(got[i]) == want


@pytest.mark.parametrize(("flag", "field"), [("--no-align-grad-reduce", "align_grad_reduce"),
                                             ("--no-delay-grad-reduce", "align_grad_reduce"),
                                             ("--no-align-param-gather", "align_param_gather")])
def test_megatron_flags(tmp_path, flag: str, field: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --use-distributed-optimizer --overlap-grad-reduce {flag}\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy[field] is False
    assert not any(flag in u for u in sf.unused)
