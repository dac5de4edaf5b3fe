"""NCCL's per-step network post overhead of multi-node flat rings (docs/model.md#ring-net-overhead).

NVIDIA/nccl v2.27.7-1 src/graph/tuning.cc, Ring, not broadcast/reduce: "Inter-node rings still have to launch
nsteps * net overhead": with nNodes > 1, intraLat = max(intraLat, netOverhead), x3 with Simple. Checked here: ring
times computed by hand on a 2-node and a 1-node group (bare alpha-beta and NCCL's protocol lines), a step-by-step
walk of the ring's steps (each one max(hop latency, overhead)) against the closed form over arrays of placements,
where the overhead does not apply (broadcast, trees, one node), and the cluster field's default and checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import algorithms as A
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster

US = 1e-6
NVL = Tier("nvlink", 8, 100e9, 2 * US, 1.0, protocol="nvlink")
NET = Tier("net", 4096, 10e9, 20 * US, 1.0, protocol="rdma", net_overhead=7 * US)
TWO = Network((NVL, NET), 8)


def test_two_node_ring_by_hand() -> None:
    """16 ranks on 2 nodes: 14 NVLink steps at max(2, 7) = 7 us, 1 crossing at max(20, 7) = 20 us = 118 us an
    all-gather sweep; bytes over min(100, 8 channels x 10) = 80 GB/s."""
    pl = place(16, 1, TWO)
    S = 2.0**30
    assert float(A.ring_time("allgather", np.float64(0.0), pl)) == pytest.approx(118 * US, rel=1e-12)
    assert float(A.ring_time("allgather", np.float64(S), pl)) == pytest.approx(118 * US + 15 / 16 * S / 80e9, rel=1e-12)
    assert float(A.ring_time("reducescatter", np.float64(0.0), pl)) == pytest.approx(118 * US, rel=1e-12)
    assert float(A.ring_time("allreduce", np.float64(0.0), pl)) == pytest.approx(236 * US, rel=1e-12)


def test_one_node_ring_has_no_overhead() -> None:
    """8 ranks in one node: 7 steps x 2 us, the network's overhead does not apply (NCCL: nNodes == 1)."""
    pl = place(8, 1, TWO)
    assert float(A.ring_time("allgather", np.float64(0.0), pl)) == pytest.approx(14 * US, rel=1e-12)
    assert float(A.ring_time("allreduce", np.float64(0.0), pl)) == pytest.approx(28 * US, rel=1e-12)


def test_nccl_protocol_lines_by_hand() -> None:
    """NCCL's layer: LL sees the overhead x1, Simple x3 (tuning.cc). 2 nodes x 8, zero bytes, all-gather:
    LL 6.6 + 14 x max(2, 7) + 1 x max(20, 7) = 124.6 us; Simple (NVLink hop 2 + 3.4 - 0.6 = 4.8 us, net hop
    20 + 14 - 2.7 = 31.3 us, overhead 21 us) 8.4 + 14 x 21 + 31.3 = 333.7 us. One node: LL 6.6 + 7 x 2 = 20.6 us."""
    z = np.float64(0.0)
    ll = nccl.algorithm_time("allgather", "ring", z, place(16, 1, TWO), protocols=("ll",))
    simple = nccl.algorithm_time("allgather", "ring", z, place(16, 1, TWO), protocols=("simple",))
    one = nccl.algorithm_time("allgather", "ring", z, place(8, 1, TWO), protocols=("ll",))
    assert float(ll) == pytest.approx(124.6 * US, rel=1e-12)
    assert float(simple) == pytest.approx(333.7 * US, rel=1e-12)
    assert float(one) == pytest.approx(20.6 * US, rel=1e-12)


def _walk(p: int, stride: int, tiers: tuple[Tier, ...], f: int) -> float:
    """The ring's steps one by one: rank r on GPU r x stride, step r -> r+1 (r < p - 1; the p - 1 steps of a sweep)
    costs max(alpha of the outermost tier the hop crosses, o), o = the largest net_overhead of the outer tiers any
    hop crosses (0 when the ring stays in one node); f sweeps."""
    def hop_tier(g: int, h: int) -> int:
        return next(i for i, t in enumerate(tiers) if g // t.span == h // t.span)

    hops = [hop_tier(r * stride, (r + 1) * stride) for r in range(p - 1)]
    o = max([tiers[i].net_overhead for i in set(hops) if i > 0], default=0.0)
    return f * sum(max(tiers[i].latency, o) for i in hops)


def test_step_by_step_walk_equals_closed_form() -> None:
    tiers = (NVL, Tier("leaf", 64, 10e9, 9 * US, 1.0, protocol="rdma", net_overhead=3 * US),
             Tier("spine", 1 << 20, 10e9, 15 * US, 1.0, protocol="rdma", net_overhead=5 * US))
    net = Network(tiers, 8)
    cases = [(p, s) for p in (2, 3, 5, 8, 9, 16, 24, 64, 100) for s in (1, 2, 8, 16, 64)]
    p = np.array([c[0] for c in cases], dtype=float)
    s = np.array([c[1] for c in cases], dtype=float)
    pl = place(p, s, net)
    for op, f in (("allgather", 1), ("allreduce", 2)):
        got = A.ring_time(op, np.zeros_like(p), pl)  # every placement at once (the planner's arrays)
        want = [_walk(int(a), int(b), tiers, f) for a, b in cases]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    assert A._ring_hops(pl) is A._ring_hops(pl)  # memoised on the placement


def test_bytes_term_and_other_algorithms_unchanged() -> None:
    """The overhead is latency only, and only the flat ring's all-reduce/reduce-scatter/all-gather pay it: broadcast
    and reduce chains, trees and direct sends price as on the same network without it."""
    bare = Network((NVL, Tier("net", 4096, 10e9, 20 * US, 1.0, protocol="rdma")), 8)
    with_o, without = place(16, 1, TWO), place(16, 1, bare)
    S = np.float64(2.0**28)
    z = np.float64(0.0)
    d = A.ring_time("allgather", S, with_o) - A.ring_time("allgather", z, with_o)
    assert float(d) == pytest.approx(float(A.ring_time("allgather", S, without) - A.ring_time("allgather", z, without)))
    for op, algo in (("broadcast", "ring"), ("reduce", "ring"), ("allreduce", "tree"), ("sendrecv", "direct")):
        for size in (z, S):
            assert float(A.algorithm_time(op, algo, size, with_o)) == float(A.algorithm_time(op, algo, size, without))
            got = nccl.algorithm_time(op, algo, size, with_o)
            assert float(got) == float(nccl.algorithm_time(op, algo, size, without))


def test_cluster_field_default_and_checks() -> None:
    """Omitted: NCCL's default (1 us, getNetOverhead) on a network tier, 0 on NVLink-class tiers and on TPU (ICI)
    clusters; aws-p5 states its
    fitted 7.1 us (scripts/fit_efa_tier.py); a negative value is refused."""
    net = build_network(load_cluster("dgx-h100"))  # nvlink, then three rdma tiers, none stating it
    assert net.tiers[0].net_overhead == 0.0
    assert [t.net_overhead for t in net.tiers[1:]] == [1e-6] * 3 and nccl.NET_OVERHEAD == 1e-6
    assert build_network(load_cluster("pcie-25gbe")).tiers[1].net_overhead == 1e-6  # tcp: NCCL's socket transport
    assert build_network(load_cluster("tpu-v5p-multislice")).tiers[1].net_overhead == 0.0  # DCN: no NCCL on TPUs
    p5 = build_network(load_cluster("aws-p5"))
    assert p5.tiers[1].net_overhead == pytest.approx(7.1 * US)
    with pytest.raises(InputError):
        load_cluster("aws-p5", ["tiers.1.net_overhead=-1us"])


def test_default_follows_the_host_cpu() -> None:
    """getNetOverhead (tuning.cc v2.30.7-1): 1 us on x86 Intel, 2 us on x86 AMD, 1 us otherwise. DGX A100 (AMD EPYC
    7742, host_cpu amd) takes 2 us on its three rdma tiers; dgx-h100 (Intel) and gb200-nvl72 (Grace, arm) 1 us; an
    AMD host's stated figure wins (aws-p5's fitted 7.1 us)."""
    a100 = build_network(load_cluster("dgx-a100"))
    assert a100.tiers[0].net_overhead == 0.0 and [t.net_overhead for t in a100.tiers[1:]] == [2e-6] * 3
    assert [t.net_overhead for t in build_network(load_cluster("dgx-h100")).tiers[1:]] == [1e-6] * 3
    assert build_network(load_cluster("gb200-nvl72")).tiers[1].net_overhead == 1e-6
    assert build_network(load_cluster("aws-p5")).tiers[1].net_overhead == pytest.approx(7.1 * US)
    assert build_network(load_cluster("dgx-h100", ["host_cpu=amd"])).tiers[1].net_overhead == 2e-6
    # Simple ring all-gather over 2 DGX A100 nodes, zero bytes: Ring Simple base 8.4 us + 14 NVLink steps at
    # max(2 + 2.8, 3 x 2) = 6 us + 1 leaf crossing at max(3.5 + 11.3, 6) = 14.8 us (NCCL's Ring hop rows: Simple -
    # LL = 3.4 - 0.6 on NVLink, 14.0 - 2.7 on NET) = 107.2 us; on an Intel host the NVLink steps stay at
    # max(4.8, 3 x 1) = 4.8 us: 8.4 + 67.2 + 14.8 = 90.4 us
    assert nccl.BASE_LATENCY["simple"] == 8.4e-6
    t = nccl.algorithm_time("allgather", "ring", np.float64(0.0), place(16, 1, a100), protocols=("simple",))
    assert float(t) == pytest.approx((8.4 + 14 * 6.0 + 14.8) * US, rel=1e-9)
    intel = build_network(load_cluster("dgx-a100", ["host_cpu=intel"]))
    t = nccl.algorithm_time("allgather", "ring", np.float64(0.0), place(16, 1, intel), protocols=("simple",))
    assert float(t) == pytest.approx((8.4 + 14 * 4.8 + 14.8) * US, rel=1e-9)
