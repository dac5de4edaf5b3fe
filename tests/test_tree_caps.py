"""NCCL's per-channel caps on the Tree all-reduce across nodes (docs/model.md#nccl-tree-caps), checked by hand.

NVIDIA/nccl v2.30.7-1 (5067397) src/graph/tuning.cc:330-335: ``busBw = min(busBw * .92, nCh * perChMaxTreeBw)``,
then LL128 ``busBw = min(busBw * 120/128, nCh * perChMaxTreeLL128Bw)``; Hopper at 3 or more nodes: 36.0 and 29.0 GB/s a
channel (tuning.cc:191-203). nCh: the search graph's channels, one per 400 Gb/s NIC on Hopper (search.cc speed 48 GB/s,
floor(50 / 48) = 1 a GPU).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.algorithms import TREE_FLOWS
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster

NVL = Tier("nvlink", 8, 450e9, 2e-6, efficiency=0.82, protocol="nvlink")


def _net(nic_bw: float, generation: str = "hopper") -> Network:
    return Network((NVL, Tier("ib", 4096, nic_bw, 5e-6, efficiency=0.88, protocol="rdma")), 8, generation=generation)


def _slope(net: Network, ranks: int, proto: str) -> float:
    """Seconds a further GiB costs at 1-2 GiB (treeCorrectionFactor is 1 there, the ramp is full)."""
    pl = place(ranks, 1, net)
    t = nccl.algorithm_time("allreduce", "tree", np.array([2.0**30, 2.0**31]), pl, protocols=(proto,))
    return float(t[1] - t[0])


def test_graph_channels_one_per_nic_at_the_search_speed() -> None:
    # 8 GPUs of a node, each with its NIC: 400 Gb/s -> Hopper speed 48 GB/s, one channel a NIC -> 8
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(50e9)))) == 8.0
    # 800 Gb/s on Hopper: 100 / 48 -> 2 channels a NIC, but the NVLink (18 x 20.6 = 370.8 GB/s, 7 channels of 48 a
    # GPU) holds 8 (tests/test_inv27.py); on Blackwell (NVLink 5, 900 GB/s) the search starts at 96 -> 1 -> 8, and
    # channels of 96 GB/s (>= 50) are doubled: 16 (test_graph_channels_duplicated_as_the_search_does)
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(100e9)))) == 8.0
    nvl5 = Network((replace(NVL, bandwidth=900e9), _net(100e9).tiers[1]), 8, generation="blackwell")
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, nvl5))) == 16.0
    # 200 Gb/s: 25 GB/s -> speed 24 -> one channel a NIC; 4 GPUs of each node in the group -> 4 channels
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(25e9)))) == 8.0
    assert float(nccl.nccl_graph_channels_inter(place(64, 2, _net(25e9)))) == 4.0


def test_caps_by_node_count_and_family() -> None:
    cap_t, cap_l = nccl.tree_channel_caps(place(128, 1, _net(50e9)))  # 16 nodes: column N4
    assert float(cap_t) == pytest.approx(8 * 36.0e9) and float(cap_l) == pytest.approx(8 * 29.0e9)
    cap_t, cap_l = nccl.tree_channel_caps(place(16, 1, _net(50e9)))  # 2 nodes: column N2
    assert float(cap_t) == pytest.approx(8 * 41.4e9) and float(cap_l) == pytest.approx(8 * 36.7e9)
    cap_t, cap_l = nccl.tree_channel_caps(place(8, 1, _net(50e9)))  # one node: not capped here
    assert np.isinf(cap_t) and np.isinf(cap_l)
    cap_t, _ = nccl.tree_channel_caps(place(128, 1, _net(50e9, "")))  # not an NCCL accelerator
    assert np.isinf(cap_t)


def test_tree_bandwidth_at_the_cap_by_hand() -> None:
    # 16 nodes x 8 H100, 400 Gb/s a GPU: Simple busBw = min(0.92 x bus, 8 x 36) = 288 GB/s (0.92 x 352 = 324 above it),
    # algBw = 0.5 x 288 = 144 GB/s: a GiB more costs 2^30 / 144e9; LL128: min(288 x 120/128 = 270, 8 x 29 = 232) GB/s,
    # algBw 116 GB/s
    net = _net(50e9)
    bus = float(place(128, 1, net).bottleneck(TREE_FLOWS))
    assert 0.92 * bus > 288e9  # the cap binds
    assert _slope(net, 128, "simple") == pytest.approx(2.0**30 / (0.5 * 288e9), rel=1e-9)
    assert _slope(net, 128, "ll128") == pytest.approx(2.0**30 / (0.5 * 232e9), rel=1e-9)
    # the uncapped line (no NCCL family) is NCCL's 0.92 x busbw (x 120/128 for LL128)
    free = _net(50e9, "")
    assert _slope(free, 128, "simple") == pytest.approx(2.0**30 / (0.5 * 0.92 * bus), rel=1e-9)
    assert _slope(free, 128, "ll128") == pytest.approx(2.0**30 / (0.5 * 0.92 * 120 / 128 * bus), rel=1e-9)


def test_cap_does_not_bind_on_a_slow_nic_or_one_node() -> None:
    # 200 Gb/s a GPU: 8 channels of 24 GB/s, 0.92 x busbw (<= 8 x 25 x 0.88 = 176) is below 8 x 36 = 288: unchanged
    for ranks in (8, 128):  # (LL left out: its llMaxBw cap holds on NCCL families only)
        for proto in ("ll128", "simple"):
            assert _slope(_net(25e9), ranks, proto) == pytest.approx(_slope(_net(25e9, ""), ranks, proto), rel=1e-12)
    # one node: the same with a 400 Gb/s NIC (the NIC is not crossed)
    assert _slope(_net(50e9), 8, "simple") == pytest.approx(_slope(_net(50e9, ""), 8, "simple"), rel=1e-12)


def test_graph_channels_duplicated_as_the_search_does() -> None:
    """ncclTopoDupChannels (NVIDIA/nccl 5067397 src/graph/search.cc:1036-1048) doubles the search graph's channels
    (halving their bw) unless bw < 25 GB/s, or, on compute capability > 8.0, unless bw < 50 with more than 4 channels;
    the Tree graph then takes the Ring graph's count (src/init.cc:1184-1185, min = max = ring nChannels). Published:
    nccl#1189's H20 log, 2 GPUs a node with 400 Gb/s NICs, prints the ring graph as 'nChannels 4, bw 24' (2 NICs x
    1 channel of 48 GB/s, doubled). review23c: these were 2, 1, 4 and 8 before."""
    assert float(nccl.nccl_graph_channels_inter(place(32, 4, _net(50e9)))) == 4.0  # 2 GPUs a node: 2 -> 4
    assert float(nccl.nccl_graph_channels_inter(place(64, 8, _net(50e9)))) == 2.0  # 1 GPU a node: 1 -> 2
    assert float(nccl.nccl_graph_channels_inter(place(64, 2, _net(50e9)))) == 8.0  # 4 GPUs a node: 4 -> 8
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(50e9)))) == 8.0  # 8 at 48 GB/s: not doubled
    # Blackwell (NVLink 5) at 800 Gb/s: 8 channels of 96 GB/s (>= 50) -> 16; Hopper at 200 Gb/s: 24 GB/s (< 25) never
    # doubled
    nvl5 = Network((replace(NVL, bandwidth=900e9), _net(100e9).tiers[1]), 8, generation="blackwell")
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, nvl5))) == 16.0
    assert float(nccl.nccl_graph_channels_inter(place(64, 8, _net(25e9)))) == 1.0
    # so a DP group of one GPU a node on Hopper is capped at 2 x 36 GB/s, above 0.92 x its 44 GB/s NIC: not binding
    cap_t, _ = nccl.tree_channel_caps(place(64, 8, _net(50e9)))
    assert float(cap_t) == pytest.approx(2 * 36.0e9)


def test_a_faster_intra_node_tier_never_slows_the_capped_tree() -> None:
    """A 64-GPU DGX H100 group's tree all-reduce of 100 B-100 kB: the inter-node per-channel cap binds, so a 1.5x
    NVLink leaves the tree's bandwidth where it was; its channel ramp counted the channels of the uncapped
    bottleneck, so the faster NVLink charged more ramp bytes at the same capped rate and the collective got slower
    (found by tests/test_review15c.py's monotonicity property at 0.2 us). Now the ramp's channels run what the caps
    leave: never slower, and at these sizes the same time (the cap alone sets both)."""
    job_net = build_network(load_cluster("dgx-h100"))
    tiers = list(job_net.tiers)
    faster = replace(job_net, tiers=tuple([replace(tiers[0], bandwidth=tiers[0].bandwidth * 1.5)] + tiers[1:]))
    for size in (1e2, 1e3, 1e4, 1e5):
        slow = coll.collective_time("allreduce", size, 64, job_net, algorithm="tree")
        fast = coll.collective_time("allreduce", size, 64, faster, algorithm="tree")
        assert float(fast) <= float(slow) * (1 + 1e-12), (size, float(fast), float(slow))
