"""NCCL all-to-all against the published nccl-tests alltoall sweeps on AWS p5 (hardware/measurements/nccl.yaml
``p5efa_alltoall_*``, docs/model.md#alltoall-measured).

Checks, each by hand from the published figures and the formulas: the transcribed points are the source CSV's;
scripts/validate_collectives.py reads an alltoall case with nccl-tests' (n-1)/n busbw factor; at 1-2 GiB the
measured time is the bytes that leave the node over one NIC a GPU at the efa tier's effective rate (fitted to the
all-gather sweeps only, so the all-to-all reaches the same fraction of the NIC as a ring); at 32 MiB the measured
excess over that is far below a serialised per-peer latency; and the EP-64 message of the DeepSeek-V3 H100 rows is
priced on dgx-h100 between its own NIC floor and that floor plus the per-peer latencies.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.cost import collectives as C
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

NCCL = ROOT / "hardware" / "measurements" / "nccl.yaml"
CASES = {c["id"]: c for c in load_yaml(NCCL)}
NODES = (2, 4, 8, 16, 32)


def _busbw(nodes: int, size: int) -> float:
    m = CASES[f"p5efa_alltoall_{nodes}node"]["measured"]
    return float(m["busbw_GBps"][m["msg_bytes"].index(size)])


def _time(nodes: int, size: int) -> float:
    """nccl-tests: busbw = algbw x (n-1)/n, algbw = size / time (size: the total each rank sends)."""
    p = 8 * nodes
    return size * (p - 1) / p / (_busbw(nodes, size) * 1e9)


def test_the_transcribed_points_are_the_published_figures() -> None:
    # crazyguitar/aws-gpu-communication-benchmark@a77f70db data/nccl_alltoall.csv, out-of-place busbw, size(MB) = MiB
    assert _busbw(2, 2**31) == 79.25 and _busbw(8, 2**28) == 44.40 and _busbw(32, 2**25) == 19.72
    assert _busbw(16, 2**30) == 42.36 and _busbw(4, 2**27) == 52.56
    for n in NODES:
        c = CASES[f"p5efa_alltoall_{n}node"]
        assert c["ranks"] == 8 * n and c["collective"]["op"] == "alltoall" and c["cluster"] == "aws-p5"
        assert c["measured"]["msg_bytes"] == [2**k for k in range(25, 32)]
    # the CSV's algbw gives the same time: 8 nodes, 256 MiB, algbw 45.11 GB/s
    assert _time(8, 2**28) == pytest.approx(2**28 / 45.11e9, rel=2e-3)  # 5.95 ms


def test_validate_collectives_reads_alltoall_with_the_n_minus_1_over_n_factor() -> None:
    vc = script_module("validate_collectives")
    assert vc.COMPARED_OPS["alltoall"] == ("alltoall", 1.0)
    pts = [q for q in vc.points(list(CASES.values())) if q[0] == "p5efa_alltoall_8node" and q[4] == 2.0**28]
    assert len(pts) == 1
    cid, cluster, p, stride, size, t, _, op = pts[0]
    assert (cluster, p, stride, op) == ("aws-p5", 64, 1, "alltoall")
    assert t == pytest.approx(2**28 * 63 / 64 / 44.40e9, rel=1e-12)  # 5951.4 us
    assert vc.family_of(cid) == "p5 EFA all-to-all"


def test_large_messages_run_at_the_fitted_nic_rate() -> None:
    """At 2 GiB on 2-32 nodes the time is the bytes that leave the node, S (N-1)/N, over one NIC a GPU at the efa
    tier's effective rate, 0.88 x 50 GB/s (fitted to the all-gather sweeps, not to these), 0-11 % above it (1.04,
    1.05, 1.00, 1.05, 1.11): the all-to-all reaches the ring's fraction of the NIC, not less."""
    tier = load_cluster("aws-p5", []).tiers[1]
    rate = tier.efficiency * 400e9 / 8
    assert rate == pytest.approx(44e9)
    for n in NODES:
        floor = 2**31 * (n - 1) / n / rate
        assert 0.99 * floor < _time(n, 2**31) < 1.11 * floor, n
    # 8 nodes, 2 GiB: 2^31 x 7/8 / 44e9 = 42.71 ms against 42.59 measured
    assert _time(8, 2**31) == pytest.approx(42.71e-3, rel=0.005)


def test_mid_size_excess_is_far_below_a_serialised_per_peer_latency() -> None:
    """At 32 MiB the measured time beyond the NIC floor is 0.3-1.0 ms on 2-32 nodes, while (cross-node peers) x the
    tier's per-step latency of 21.1 us is 0.17-5.2 ms: from 8 nodes on the pairwise sum exceeds the whole excess."""
    tier = load_cluster("aws-p5", []).tiers[1]
    s = 2**25
    for n in NODES:
        excess = _time(n, s) - s * (n - 1) / n / 44e9
        assert 0.25e-3 < excess < 1.0e-3, n
        if n >= 8:
            assert 8 * (n - 1) * tier.latency > 2 * excess, n
    # 32 nodes: 1.695 ms measured, 0.739 ms of NIC time, 248 x 21.1 us = 5.23 ms of pairwise latency
    assert _time(32, s) == pytest.approx(1.695e-3, rel=1e-3)
    assert 248 * tier.latency == pytest.approx(5.23e-3, rel=1e-3)


def test_dsv3_ep64_message_on_dgx_h100_sits_on_its_nic_floor() -> None:
    """The DeepSeek-V3 H100 rows' EP-64 all-to-all (tp 2 with SP: 2048 tokens a rank, top-8, h 7168, BF16 =
    234,881,024 B a rank) over 8 DGX H100 nodes: NIC floor S x 7/8 / (0.94 x 50 GB/s) = 4.373 ms; the model adds
    the per-peer latencies and the NVLink share, at most 56 x (3.5 + 14) us + 7 x (2 + 3.4) us + protocol base."""
    net = build_network(load_cluster("dgx-h100", []))
    s = 2048 * 8 * 7168 * 2
    assert s == 234881024
    floor = s * 7 / 8 / (0.94 * 50e9)
    assert floor == pytest.approx(4.373e-3, rel=1e-3)
    t = float(C.collective_time("alltoall", s, 64, net))
    assert floor < t < floor + 56 * 17.5e-6 + 7 * 5.4e-6 + 20e-6
    # busbw 45.7 GB/s: no faster than the p5 sweep's 44.4 GB/s at 256 MiB by more than 4 %
    assert s * 63 / 64 / t / 1e9 < 44.40 * 1.04
