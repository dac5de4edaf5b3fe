"""NCCL's search-graph channels across nodes where GPUs share NICs, and the pure TREE pattern's x0.85
(docs/model.md#nccl-tree-caps), computed by hand from NCCL's code at NVIDIA/nccl 5067397.

The search (src/graph/search.cc) starts at the fastest speed of its list not above the NIC path (speedArrayInter
48, 30, 28, 24, 20, 18, 15, 12, ... GB/s before Hopper, search.cc:1052-1065, 1157-1171), takes that speed off a NIC's
``net.bw`` per channel and skips a NIC with less left (ncclTopoSearchRecNet), so a NIC carries floor(nic / speed)
channels; ncclTopoDupChannels doubles them unless the speed is under 25 GB/s (search.cc:1036-1048); the Tree graph
takes the Ring graph's count (init.cc:1184-1185). Caps: ``nCh x perChMaxTreeBw`` (tuning.cc:330-335; Ampere N2 / N4
23.6 / 17.8 GB/s, LL128 20 / 20; Volta 18.5 / 10.0, LL128 20 / 20; tuning.cc:191-203).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import nccl
from scalemodel.cost.algorithms import TREE_FLOWS
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster


def _slope(net, ranks: int, stride: int, proto: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds a further GiB costs at 1-2 GiB (treeCorrectionFactor is 1 there, the ramp full)."""
    pl = place(ranks, stride, net)
    t = nccl.algorithm_time("allreduce", "tree", np.array([2.0**30, 2.0**31]), pl, protocols=(proto,))
    return float(t[1] - t[0])


def test_a100_four_hdr_nics_by_hand() -> None:
    # a100-4nic-hdr: 8 A100 and 4 HDR NICs a node, 12.5 GB/s a GPU -> a NIC of 2 x 12.5 = 25 GB/s. Search speed: the
    # fastest of 48, 30, 28, 24 not above 25 -> 24; floor(25 / 24) = 1 channel a NIC; 4 NICs -> 4 channels; 24 < 25:
    # not doubled -> 4 (review23c: NCCL's 4, the model's 8 before)
    net = build_network(load_cluster("a100-4nic-hdr"))
    assert net.tiers[1].gpus_per_nic == 2.0
    assert float(nccl.nccl_graph_channels_inter(place(32, 1, net))) == 4.0
    # 4 nodes: column N4, 4 x 17.8 = 71.2 GB/s (Tree), 4 x 20 = 80 (LL128); 2 nodes: N2, 4 x 23.6 = 94.4
    cap_t, cap_l = nccl.tree_channel_caps(place(32, 1, net))
    assert float(cap_t) == pytest.approx(71.2e9) and float(cap_l) == pytest.approx(80.0e9)
    cap_t, _ = nccl.tree_channel_caps(place(16, 1, net))
    assert float(cap_t) == pytest.approx(94.4e9)
    # the cap binds: 0.92 x busbw is above 71.2 GB/s, so Tree Simple moves a GiB at algBw 0.5 x 71.2 GB/s
    bus = float(place(32, 1, net).bottleneck(TREE_FLOWS))
    assert 0.92 * bus > 71.2e9
    assert _slope(net, 32, 1, "simple") == pytest.approx(2.0**30 / (0.5 * 71.2e9), rel=1e-9)
    # LL128: min(71.2 x 120/128 = 66.75, 80) = 66.75 GB/s
    assert _slope(net, 32, 1, "ll128") == pytest.approx(2.0**30 / (0.5 * 71.2e9 * 120 / 128), rel=1e-9)


def test_dp_groups_under_tp_reach_one_nic_a_gpu() -> None:
    # a100-4nic-hdr, a DP group under TP 2 / 4 / 8 (stride 2, 4, 8): 4, 2, 1 GPUs a node, each behind another NIC
    # (GPUs 0, 2, 4, 6 / 0, 4 / 0) -> min(c_0, 4 NICs) channels of 24 GB/s, not doubled
    net = build_network(load_cluster("a100-4nic-hdr"))
    got = nccl.nccl_graph_channels_inter(place(np.array([64.0, 32.0, 16.0]), np.array([2.0, 4.0, 8.0]), net))
    assert got.tolist() == [4.0, 2.0, 1.0]


def test_volta_clusters_by_hand() -> None:
    # dgx-1-v100: 4 EDR NICs for 8 V100, 6.25 GB/s a GPU -> 12.5 GB/s a NIC; speed 12 (30, 28, 24, 20, 18, 15 above
    # it); floor(12.5 / 12) = 1 a NIC -> 4 channels, 12 < 25 not doubled; caps 4 x 10.0 = 40 GB/s at 4 nodes, 4 x 18.5
    # = 74 at 2 (Volta row)
    v100 = build_network(load_cluster("dgx-1-v100"))
    assert float(nccl.nccl_graph_channels_inter(place(32, 1, v100))) == 4.0
    assert float(nccl.tree_channel_caps(place(32, 1, v100))[0]) == pytest.approx(40.0e9)
    assert float(nccl.tree_channel_caps(place(16, 1, v100))[0]) == pytest.approx(74.0e9)
    # dgx-2: 8 EDR NICs for 16 V100 -> 8 channels of 12, cap 8 x 10 = 80 GB/s at 4 nodes, under 0.92 x busbw
    dgx2 = build_network(load_cluster("dgx-2"))
    assert float(nccl.nccl_graph_channels_inter(place(64, 1, dgx2))) == 8.0
    assert float(nccl.tree_channel_caps(place(64, 1, dgx2))[0]) == pytest.approx(80.0e9)
    assert 0.92 * float(place(64, 1, dgx2).bottleneck(TREE_FLOWS)) > 80.0e9
    assert _slope(dgx2, 64, 1, "simple") == pytest.approx(2.0**30 / (0.5 * 80.0e9), rel=1e-9)


def test_one_nic_a_gpu_and_two_nics_a_gpu() -> None:
    # dgx-a100 states 8 NICs for 8 GPUs: the count of one NIC a GPU, 8 channels of 24 GB/s (25 / 24 -> 1)
    a100 = build_network(load_cluster("dgx-a100"))
    assert a100.tiers[1].gpus_per_nic == 1.0
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, a100))) == 8.0
    # 16 NICs of 200 Gb/s for 8 H100 (two a GPU, 50 GB/s a GPU): each NIC 25 GB/s -> Hopper speed 24 (48, 45, 42, 40,
    # 30 above it), one channel a NIC, 16 NICs -> 16 channels; 24 < 25: not doubled
    h100 = build_network(load_cluster("dgx-h100", ["tiers.ib-leaf.nics_per_node=16", "tiers.ib-spine.nics_per_node=16",
                                                   "tiers.ib-core.nics_per_node=16"]))
    assert h100.tiers[1].gpus_per_nic == 0.5
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, h100))) == 16.0


def test_pure_tree_pattern_one_gpu_a_node() -> None:
    # dgx-h100, a DP group of one GPU a node (stride 8) on 4 nodes: the Tree graph is TREE (search.cc:1133), so NCCL
    # takes x0.85 after the caps (tuning.cc:336). Channels: 50 GB/s NIC, speed 48, 1 a NIC, doubled (n = 1 <= 4) -> 2;
    # cap 2 x 36 = 72 GB/s (N4). busBw = min(0.92 x busbw, 72) x 0.85
    net = build_network(load_cluster("dgx-h100"))
    pl = place(32, 8, net)
    assert float(nccl.tree_pattern_factor(pl)) == 0.85
    b = min(0.92 * float(pl.bottleneck(TREE_FLOWS)), 72.0e9) * 0.85
    assert _slope(net, 32, 8, "simple") == pytest.approx(2.0**30 / (0.5 * b), rel=1e-9)
    # two GPUs a node (stride 4), one node (8 ranks), or a family NCCL does not run: no factor
    assert float(nccl.tree_pattern_factor(place(64, 4, net))) == 1.0
    assert float(nccl.tree_pattern_factor(place(8, 1, net))) == 1.0
    mi = build_network(load_cluster("mi300x-8"))
    assert float(nccl.tree_pattern_factor(place(32, 8, mi))) == 1.0


@pytest.mark.parametrize(("where", "value", "match"), [
    ("ib-leaf", "3", "tiers[1] ('ib-leaf') nics_per_node 3 for 8 GPUs a node: neither a whole number of GPUs a NIC "
                     "nor of NICs a GPU"),
    ("nvlink", "8", "tiers[0] ('nvlink') nics_per_node 8: the innermost tier's GPUs reach each other without a NIC"),
])
def test_nics_per_node_refused(where: str, value: str, match: str) -> None:
    with pytest.raises(InputError) as exc:
        load_cluster("a100-4nic-hdr", [f"tiers.{where}.nics_per_node={value}"])
    assert match in str(exc.value) and f"--set tiers.{where}.nics_per_node" in str(exc.value), str(exc.value)


def test_shared_nic_clusters_state_their_nics() -> None:
    # each built-in cluster whose GPUs share NICs says how many a node (with its source, checked by the spec tests)
    want = {"a100-4nic-hdr": 4, "aws-p4d": 4, "dgx-1-p100": 4, "dgx-1-v100": 4, "dgx-2": 8, "gcp-a3-high": 4,
            "pcie-25gbe": 1}
    for name, n in want.items():
        c = load_cluster(name)
        assert [t.nics_per_node for t in c.tiers[1:]] == [n] * (len(c.tiers) - 1), name
        assert Path(__file__).parent.parent.joinpath("hardware", "clusters", f"{name}.yaml").read_text().count(
            "      nics_per_node: \"") == len(c.tiers) - 1, name


def test_one_gpu_a_node_on_a3_high_reaches_one_nic() -> None:
    # gcp-a3-high, mtgpu24's replica all-reduce (one GPU a VM, stride 8): n = min(1 x max(1, 1/2), 8 / 2) = 1 NIC of
    # 2 x 12.5 = 25 GB/s, Hopper speed 24, 1 channel, 24 < 25 not doubled -> caps 1 x 41.4 (N2) / 1 x 36.0 (N4); the
    # docs' account of why those rows do not move read '4-channel caps' (review23f)
    net = build_network(load_cluster("gcp-a3-high"))
    for vms, cap in ((2, 41.4e9), (4, 36.0e9)):
        pl = place(vms, 8, net)
        assert float(nccl.nccl_graph_channels_inter(pl)) == 1.0
        assert float(nccl.tree_channel_caps(pl)[0]) == pytest.approx(cap)
    doc = Path(__file__).parent.parent.joinpath("docs", "model.md").read_text()
    assert "under the 4-channel caps" not in doc and "caps 41.4 / 36.0 GB/s at 2 / 4 VMs" in doc
