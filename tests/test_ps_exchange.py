"""Machine-level parameter server (docs/model.md#parameter-server): values worked by hand from the
BytePS (Jiang et al. OSDI 2020, §3 and Theorem 1) and parameter-server (Li et al. OSDI 2014) formulas."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import ps
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

M, B = 1e9, 12.5e9  # 1 GB per machine, 100 Gbit/s NICs


def test_dedicated_colocated_and_summation_by_hand() -> None:
    # n = 8 machines, k = 4 dedicated servers, one message (no pipelining): push and pull each take
    # max(M/B, 8 M (1/4)/B) = 2 M/B = 0.16 s, so 0.32 s plus 2 alpha
    r = ps.ps_exchange(8, 4, M, B, latency_s=1e-5)
    assert float(r["time"]) == pytest.approx(2 * 0.16 + 2e-5)
    # servers with a 400 Gbit/s NIC: max(0.08, 8 * 0.25e9 / 50e9 = 0.04) -> the workers' NICs bind
    assert float(ps.ps_exchange(8, 4, M, B, 50e9)["time"]) == pytest.approx(2 * 0.08)
    # colocated on 4 of the 8 machines: P (1 + 6/4)/B = 0.2 s per direction
    assert float(ps.ps_exchange(8, 4, M, B, colocated=True)["time"]) == pytest.approx(0.4)
    # server DRAM 20 GB/s: sum = 3 x 8 x 0.25 GB / 20 GB/s = 0.3 s, between push and pull
    assert float(ps.ps_exchange(8, 4, M, B, server_memory_bw=20e9)["time"]) == pytest.approx(0.32 + 0.3)
    # pipelined in c = 4 pieces: stages (0.16 + 0.16 + 0.3)/4 + 3/4 x max(0.16, 0.3)
    t = ps.ps_exchange(8, 4, M, B, server_memory_bw=20e9, chunks=4)["time"]
    assert float(t) == pytest.approx(0.62 / 4 + 0.75 * 0.3)
    # one machine exchanges nothing across the network: only its intra-node part remains
    assert float(ps.ps_exchange(1, 4, M, B, intra_s=0.05, latency_s=1e-5)["time"]) == pytest.approx(0.05)
    with pytest.raises(InputError):
        ps.ps_exchange(8, 4, M, B, server_memory_bw=0.0)


def test_byteps_optimum_is_half_a_ring() -> None:
    """k = n dedicated CPU servers with the workers' NIC: push = pull = M/B, overlapped in pieces,
    so t -> M/B against ring all-reduce's 2(n-1)M/(nB): ratio n/(2(n-1)), 0.508 at n = 64."""
    for n in (8, 64, 256):
        ring = float(ps.allreduce_ring_time(n, M, B))
        chunks = np.ceil(M / ps.BYTEPS_PARTITION_BYTES)  # 245 pieces of at most 4096000 bytes
        f = float(ps.round_robin_fmax(n, M))
        t = float(ps.ps_exchange(n, n, M, B, f_max=f, chunks=chunks)["time"])
        by_hand = (2 * max(M / B, n * M * f / B)) / chunks + (chunks - 1) / chunks * max(M / B, n * M * f / B)
        assert t == pytest.approx(by_hand)
        assert float(ps.byteps_time(n, n, M, B)) == pytest.approx(M / B)  # Theorem 1 at k = n
        assert t / ring == pytest.approx(n / (2 * (n - 1)), rel=0.02 + (f * n - 1))
    # at n = 64 the 245 pieces do not divide by 64: the busiest server holds 4, f_max = 4/245 instead of
    # 1/64, so the servers take 64 x 4/245 = 1.045 M/B
    assert float(ps.round_robin_fmax(64, M)) == pytest.approx(4 / 245)
    # without push/pull overlap (one message) the PS needs 2 M/B: no better than the ring
    assert float(ps.ps_exchange(64, 64, M, B)["time"]) == pytest.approx(2 * M / B)
    assert float(ps.ps_exchange(64, 64, M, B)["time"]) > float(ps.allreduce_ring_time(64, M, B))


def test_colocated_never_beats_the_ring_volume() -> None:
    """Colocated PS, one server per machine and even shards: each machine moves M(1 + (n-2)/n) =
    2(n-1)M/n per direction, the ring's volume; with k < n servers M(1 + (n-2)/k) > 2(n-1)M/n."""
    n, pieces = 16, 1e6  # push and pull overlapped in many pieces: one direction's time
    ring = float(ps.allreduce_ring_time(n, M, B))
    even = float(ps.ps_exchange(n, n, M, B, colocated=True, chunks=pieces)["time"])
    assert even == pytest.approx(ring, rel=1e-5)  # 1.875 M/B both
    for k in (2, 4, 8, 15):
        col = float(ps.ps_exchange(n, k, M, B, colocated=True, chunks=pieces)["time"])
        assert col == pytest.approx(M * (1 + (n - 2) / k) / B, rel=1e-5)
        assert col > ring
    # the dedicated k = n layout beats the colocated one by 2(n-1)/n
    ded = float(ps.ps_exchange(n, n, M, B, chunks=pieces)["time"])
    assert even / ded == pytest.approx(2 * (n - 1) / n, rel=1e-4)


def test_async_worker_and_server_round() -> None:
    # asynchronous: a worker's own exchange is its NIC alone (M/B each way, pipelined -> M/B); the
    # servers' cap per round of n pushes is n M f/B_s = 8 x 1 GB / 2 / 12.5 GB/s = 0.32 s with k = 2
    r = ps.ps_exchange(8, 2, M, B, chunks=1e9)
    assert float(r["worker"]) == pytest.approx(M / B, rel=1e-6)
    assert float(r["server_round"]) == pytest.approx(0.32)
    # the same cap as async_ps_rate: k B/(2M) rounds of pushes... 12.5 updates/s of 1 GB push+pull at k = 2
    assert float(ps.async_ps_rate(64, 1e-9, 2, M, B)) == pytest.approx(2 * B / (2 * M))


# --- engine: the step model at machine level -------------------------------------------------------

@pytest.fixture(scope="module")
def job():  # type: ignore[no-untyped-def]
    # commodity cluster of the examples: 8 x A100 PCIe per server, one 25 GbE NIC per server, TCP
    return build_job(load_cluster("pcie-25gbe"), load_workload("gpt-1.7b"), TrainingSpec(global_batch=64))


def _dp(job, gpus, sync="bsp", **kw):  # type: ignore[no-untyped-def]
    g = grid_from_arrays(gpus=gpus, dp=gpus, tp=1, pp=1, micro_batch=1, global_batch=gpus, overlap=False, **kw)
    r = evaluate(job, g, sync=sync)
    return float(np.ravel(r.breakdown["dp_comm"])[0]), r


def test_engine_byteps_optimum_against_ring(job) -> None:  # type: ignore[no-untyped-def]
    """64 GPUs = 8 machines, 8 dedicated CPU servers with the same 25 GbE NIC: about half the ring."""
    ps8, _ = _dp(job, 64, ps_servers=8)
    ring, _ = _dp(job, 64, algorithm=1)
    assert 0.4 < ps8 / ring < 0.6
    # by hand: each node reduce-scatters + all-gathers G over PCIe, pushes G through 8 x 390.625 MB/s x 0.62 (catalog)
    from scalemodel.cost import collectives as coll

    G = job.params * 2.0
    nic = 8 * 390.625e6 * 0.62
    c = np.ceil(G / 4096000)
    f = np.ceil(c / 8) / c
    push = max(G / nic, 8 * G * f / nic)
    summ = 3 * 8 * G * f / 204.8e9
    intra = sum(float(np.ravel(coll.collective_time(op, G, 8, job.network))[0])
                for op in ("reducescatter", "allgather"))
    expected = (intra + 2 * push + summ) / c + (c - 1) / c * max(intra, push, summ) + 2 * 35e-6
    assert ps8 == pytest.approx(expected, rel=1e-9)
    # half the servers: the server NICs bind (8 G (1/4)/B = 2 G/B), no better than the ring
    ps4, _ = _dp(job, 64, ps_servers=4)
    assert ps4 == pytest.approx(2 * ps8, rel=0.01)


def test_engine_colocated_loses(job) -> None:  # type: ignore[no-untyped-def]
    ded, _ = _dp(job, 64, ps_servers=8)
    col, _ = _dp(job, 64, ps_servers=8, ps_colocated=True)
    col4, _ = _dp(job, 64, ps_servers=4, ps_colocated=True)
    ring, _ = _dp(job, 64, algorithm=1)
    auto, _ = _dp(job, 64)
    assert col > 1.7 * ded  # 2(n-1)/n = 1.75 x the dedicated exchange
    assert col4 > ring and col4 > auto  # fewer colocated servers than machines: worse than all-reduce
    # more colocated servers than machines cannot help: capped at one per machine
    assert _dp(job, 64, ps_servers=64, ps_colocated=True)[0] == pytest.approx(col)


def test_engine_async_on_the_ps_path(job) -> None:  # type: ignore[no-untyped-def]
    # asp with 8 dedicated servers: each worker's own exchange (its NIC alone), not the all-reduce
    asp, r = _dp(job, 64, sync="asp", ps_servers=8)
    bsp, _ = _dp(job, 64, sync="bsp", ps_servers=8)
    ring_asp, _ = _dp(job, 64, sync="asp", algorithm=1)
    assert asp <= bsp and asp < 0.6 * ring_asp
    # one server: the server's NIC must take every worker's push each worker iteration, so the
    # asynchronous step is at least n G / B_s (8 machines x G through one 25 GbE NIC)
    _, r1 = _dp(job, 64, sync="asp", ps_servers=1)
    G = job.params * 2.0
    floor = 8 * G / (8 * 390.625e6 * 0.62)  # ~14 s, far above one worker's 0.2 s of compute
    assert float(np.ravel(r1.step_time)[0]) == pytest.approx(floor, rel=1e-9)


def _t(n: int, k: int, p: float, bw: float, bs: float, mem: float, co: bool, intra: float, c: float) -> float:
    f = float(ps.round_robin_fmax(min(k, n) if co else k, p))
    return float(ps.ps_exchange(n, k, p, bw, bs, colocated=co, f_max=f, chunks=c, intra_s=intra,
                                server_memory_bw=mem)["time"])


def test_more_servers_or_bandwidth_never_slower() -> None:
    """Monotonicity: more servers, a faster server NIC or DRAM, more pieces of overlap never slow the
    exchange (each stage time is non-increasing in them, and so is the pipeline's makespan)."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n, k = (int(x) for x in rng.integers(1, 64, 2))
        p = float(rng.uniform(1e6, 1e10))
        bw, bs, mem = (float(x) for x in rng.uniform(1e9, 1e11, 3))
        co = bool(rng.integers(0, 2))
        intra = float(rng.uniform(0, 1))
        c = float(np.ceil(p / ps.BYTEPS_PARTITION_BYTES))
        base = _t(n, k, p, bw, bs, mem, co, intra, c)
        assert _t(n, k + 1, p, bw, bs, mem, co, intra, c) <= base * (1 + 1e-12)
        assert _t(n, k, p, bw, 2 * bs, mem, co, intra, c) <= base * (1 + 1e-12)
        assert _t(n, k, p, bw, bs, 2 * mem, co, intra, c) <= base * (1 + 1e-12)
        assert _t(n, k, p, bw, bs, mem, co, intra, 1.0) >= base * (1 - 1e-12)
