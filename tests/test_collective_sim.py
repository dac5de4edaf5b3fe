"""Step-by-step simulations of ring, double-binary-tree and recursive halving-doubling all-reduce.

Each simulator moves real data (numpy vectors) chunk by chunk between ranks, checks that the
result is the all-reduced vector, and tracks time with a per-link alpha + bytes*beta cost and
per-link / per-rank serialisation. For uniform links the simulated time must equal the closed forms
in scalemodel.cost.collectives exactly (to float rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import algorithms as A
from scalemodel.cost import collectives as C
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier


def sim_ring_allreduce(p: int, S: float, link) -> float:  # type: ignore[no-untyped-def]
    """Ring reduce-scatter then all-gather; link(r) -> (alpha, beta) of the edge r -> r+1."""
    rng = np.random.default_rng(p)
    data = rng.standard_normal((p, p))  # data[r, chunk]
    expected = data.sum(axis=0)
    buf = data.copy()
    m = S / p
    recv_ready = np.zeros(p)  # time rank r has the data it needs for its next send
    send_free = np.zeros(p)
    for step in range(2 * (p - 1)):
        new_ready = np.zeros(p)
        sends = []
        for r in range(p):
            if step < p - 1:
                chunk = (r - step) % p
            else:
                chunk = (r + 1 - (step - (p - 1))) % p  # the chunk r finished reducing
            sends.append((r, chunk, buf[r, chunk]))
            a, b = link(r)
            start = max(recv_ready[r], send_free[r])
            end = start + a + m * b
            send_free[r] = end
            new_ready[(r + 1) % p] = end
        for r, chunk, val in sends:
            dst = (r + 1) % p
            if step < p - 1:
                buf[dst, chunk] += val
            else:
                buf[dst, chunk] = val
        recv_ready = np.maximum(recv_ready, new_ready)
    assert np.allclose(buf, expected[None, :])
    return float(max(recv_ready.max(), send_free.max()))


def _heap_tree(p: int, mirror: bool) -> list[int]:
    """parent[node] for a complete binary tree in heap order; the mirror uses reversed ranks."""
    parent = [-1] * p
    for i in range(1, p):
        par = (i - 1) // 2
        if mirror:
            parent[p - 1 - i] = p - 1 - par
        else:
            parent[i] = par
    return parent


def sim_tree_allreduce(p: int, S: float, k: int, alpha: float, beta: float) -> float:
    """Two complementary trees, each carrying S/2 in k chunks, pipelined reduce up + broadcast down.

    Every directed tree link is a FIFO server at B/4 (a rank drives four streams), so a chunk of
    S/(2k) bytes occupies it for alpha + 4 beta S/(2k).
    """
    rng = np.random.default_rng(7)
    finish = 0.0
    c = S / (2 * k)
    hop = alpha + 4 * beta * c
    for mirror in (False, True):
        parent = _heap_tree(p, mirror)
        children: list[list[int]] = [[] for _ in range(p)]
        for n, par in enumerate(parent):
            if par >= 0:
                children[par].append(n)
        root = parent.index(-1)
        vals = rng.standard_normal((p, k))
        expected = vals.sum(axis=0)
        # order nodes by depth, deepest first, for the up phase
        depth = [0] * p
        for n in range(p):
            d, x = 0, n
            while parent[x] >= 0:
                x = parent[x]
                d += 1
            depth[n] = d
        order_up = sorted(range(p), key=lambda n: -depth[n])
        up_val = vals.copy()
        have_up = np.zeros((p, k))  # time node holds the reduced chunk j of its subtree
        link_free = np.zeros(p)  # link node -> parent (up) and parent -> node (down): separate servers
        for n in order_up:
            for j in range(k):
                ready = max([have_up[ch, j] for ch in children[n]], default=0.0)
                have_up[n, j] = ready
                for ch in children[n]:
                    up_val[n, j] += up_val[ch, j]
            if parent[n] >= 0:
                for j in range(k):
                    start = max(have_up[n, j], link_free[n])
                    link_free[n] = start + hop
                    have_up[n, j] = start + hop  # arrival time at parent
        # have_up[child, j] now = arrival time at the parent; recompute root readiness
        root_ready = np.array([max([have_up[ch, j] for ch in children[root]], default=0.0) for j in range(k)])
        result = up_val[root].copy()
        assert np.allclose(result, expected)
        have_down = np.zeros((p, k))
        have_down[root] = root_ready
        down_free = np.zeros(p)
        for n in sorted(range(p), key=lambda n: depth[n]):
            for ch in children[n]:
                for j in range(k):
                    start = max(have_down[n, j], down_free[ch])
                    down_free[ch] = start + hop
                    have_down[ch, j] = start + hop
        finish = max(finish, float(have_down.max()))
    return finish


def sim_rhd_allreduce(p: int, S: float, pair_link) -> float:  # type: ignore[no-untyped-def]
    """MPICH Rabenseifner: fold extra ranks, recursive halving (nearest partner first), recursive
    doubling back, unfold. pair_link(a, b) -> (alpha, beta) between ranks a and b."""
    rng = np.random.default_rng(3)
    pp = 1 << (p.bit_length() - 1)
    r = p - pp
    nblk = pp
    data = rng.standard_normal((p, nblk))
    expected = data.sum(axis=0)
    clock = np.zeros(p)
    buf = data.copy()

    def xfer(a: int, b: int, nbytes: float) -> None:  # simultaneous exchange a <-> b
        al, be = pair_link(a, b)
        t = max(clock[a], clock[b]) + al + nbytes * be
        clock[a] = clock[b] = t

    # fold: ranks 2i (i < r) send everything to 2i+1; survivors are the odd ones and ranks >= 2r
    survivors = [2 * i + 1 for i in range(r)] + list(range(2 * r, p))
    for i in range(r):
        xfer(2 * i, 2 * i + 1, S)
        buf[2 * i + 1] += buf[2 * i]
    lo = {v: 0 for v in range(pp)}
    hi = {v: nblk for v in range(pp)}
    for k in range(pp.bit_length() - 1):  # halving, partner at distance 2^k (virtual ranks)
        for v in range(pp):
            w = v ^ (1 << k)
            if v < w:
                a, b = survivors[v], survivors[w]
                mid = (lo[v] + hi[v]) // 2
                size = (hi[v] - lo[v]) / 2 * S / nblk
                xfer(a, b, size)
                # v keeps the lower half, w the upper half
                lower = buf[a, lo[v]:mid] + buf[b, lo[v]:mid]
                upper = buf[a, mid:hi[v]] + buf[b, mid:hi[v]]
                buf[a, lo[v]:mid] = lower
                buf[b, mid:hi[v]] = upper
                hi[v] = mid
                lo[w] = mid
    for k in reversed(range(pp.bit_length() - 1)):  # doubling
        for v in range(pp):
            w = v ^ (1 << k)
            if v < w:
                a, b = survivors[v], survivors[w]
                size = (hi[v] - lo[v]) * S / nblk
                xfer(a, b, size)
                buf[b, lo[v]:hi[v]] = buf[a, lo[v]:hi[v]]
                buf[a, lo[w]:hi[w]] = buf[b, lo[w]:hi[w]]
                new_lo, new_hi = min(lo[v], lo[w]), max(hi[v], hi[w])
                lo[v] = lo[w] = new_lo
                hi[v] = hi[w] = new_hi
    for v in range(pp):
        assert np.allclose(buf[survivors[v]], expected)
    for i in range(r):
        xfer(2 * i + 1, 2 * i, S)
        buf[2 * i] = buf[2 * i + 1]
    assert np.allclose(buf, expected[None, :])
    return float(clock.max())


ALPHA, BETA = 3e-6, 1 / 40e9


@pytest.mark.parametrize("p", [2, 3, 5, 8, 13])
def test_ring_sim_equals_closed_form(p: int) -> None:
    S = 6.0e6
    sim = sim_ring_allreduce(p, S, lambda r: (ALPHA, BETA))
    assert sim == pytest.approx(float(A.ring_allreduce(S, p, ALPHA, BETA)), rel=1e-12)
    # hand check for p = 4: 6 steps of (alpha + S/4 beta)
    if p == 4:
        assert sim == pytest.approx(6 * (3e-6 + 1.5e6 / 40e9))


@pytest.mark.parametrize("p,k", [(2, 1), (2, 4), (3, 2), (7, 3), (8, 5), (15, 1), (16, 6)])
def test_tree_sim_equals_closed_form(p: int, k: int) -> None:
    S = 4.0e6
    sim = sim_tree_allreduce(p, S, k, ALPHA, BETA)
    assert sim == pytest.approx(float(A.tree_allreduce(S, p, ALPHA, BETA, chunks=k)), rel=1e-12)


def test_tree_optimal_chunks_is_minimum_over_integer_k() -> None:
    S, p = 64e6, 64
    best_int = min(float(A.tree_allreduce(S, p, ALPHA, BETA, chunks=k)) for k in range(1, 400))
    cont = float(A.tree_allreduce(S, p, ALPHA, BETA))
    assert cont <= best_int * (1 + 1e-12)
    assert cont >= best_int * 0.99  # the continuous optimum is within 1 % of the best whole k


@pytest.mark.parametrize("p", [2, 4, 6, 8, 11, 16])
def test_rhd_sim_equals_closed_form(p: int) -> None:
    S = 8.0e6
    sim = sim_rhd_allreduce(p, S, lambda a, b: (ALPHA, BETA))
    assert sim == pytest.approx(float(A.rhd_allreduce(S, p, ALPHA, BETA)), rel=1e-12)


def test_rhd_multi_tier_matches_simulation_with_per_pair_links() -> None:
    """Two tiers (8-GPU NVLink node, IB between nodes): the simulator decides each pair's tier from GPU
    ids; the closed form decides it from the placement. Stride 2 puts 4 group ranks in a node."""
    fast = Tier("nvlink", 8, 300e9, 2e-6)
    slow = Tier("ib", 4096, 25e9, 6e-6)
    net = Network((fast, slow), 8)
    for p, stride in [(16, 1), (32, 1), (16, 2), (8, 8)]:
        def link(a: int, b: int, stride: int = stride) -> tuple[float, float]:
            same_node = (a * stride) // 8 == (b * stride) // 8
            t = fast if same_node else slow
            return t.latency, 1 / t.effective_bandwidth
        S = 16.0e6
        sim = sim_rhd_allreduce(p, S, link)
        model = float(C.raw_algorithm_time("allreduce", "rhd", S, p, net, stride=stride))
        assert sim == pytest.approx(model, rel=1e-12), (p, stride)


def test_ring_sim_uniform_multi_tier_network_equals_ring_time() -> None:
    """A network whose two tiers have identical links behaves as one tier."""
    t0 = Tier("a", 4, 40e9, ALPHA)
    t1 = Tier("b", 64, 40e9 / 4, ALPHA)  # per-GPU rate; a flat ring gets 4 streams on it -> 40e9
    net = Network((t0, t1), 4)
    S, p = 3.2e6, 16
    sim = sim_ring_allreduce(p, S, lambda r: (ALPHA, BETA))
    assert sim == pytest.approx(float(C.raw_algorithm_time("allreduce", "ring", S, p, net)), rel=1e-12)


def nccl_channel_loop(S: float, nc: int, nt: int, threshold: float) -> tuple[int, int]:
    """NCCL's runtime reduction (enqueue.cc, docs/model.md#nccl), step by step: drop channels
    while S < nc nt threshold, then halve threads while nt % 128 == 0."""
    while S < nc * nt * threshold:
        if nc >= 2:
            nc -= 1
        elif nt % 128 == 0:
            nt //= 2
        else:
            break
    return nc, nt


@pytest.mark.parametrize("proto,nt", [("simple", 512), ("ll", 512), ("ll128", 640)])
def test_channel_ramp_brackets_nccl_loop(proto: str, nt: int) -> None:
    """The continuous S_eff of channel_ramp_size never exceeds the discrete loop's S / (nc nt / (nc_max nt_max))
    and is within a factor 2 of it (one channel or one thread halving of rounding)."""
    nc_max, p = 18, 8
    thr = nccl.NCCL_THREAD_THRESHOLD[proto] * (p if proto == "ll" else 1)
    for S in np.unique(np.round(np.logspace(0, 8, 400))):
        nc, nt_used = nccl_channel_loop(float(S), nc_max, nt, thr)
        discrete = S * nc_max * nt / (nc * nt_used)
        cont = float(nccl.channel_ramp_size(np.array(S), proto, np.array(float(nc_max)), np.array(float(p)),
                                         ring_ll=True))
        assert cont <= discrete * (1 + 1e-12), (proto, S)
        assert discrete <= 2 * cont * (1 + 1e-12), (proto, S)
