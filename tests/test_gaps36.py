"""gaps36: three mechanism gaps closed with a basis in framework code (docs/model.md#nccl-tree-uneven, ...).

1. NCCL's Tree and CollNetChain on unevenly filled nodes (docs/model.md#nccl-tree-uneven): the time charges the
   fullest node's chain, c_0 - 1 hops each way (NVIDIA/nccl v2.30.7-1 connect.cc ``ncclTopoPreset``: each node's chain
   over its own localRanks); NCCL's tuner estimate charges ``nRanks / nNodes - 1`` in C integer division (tuning.cc
   L416 Tree ``2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat)``, L423 CollNetChain ``2 *
   (nRanks / nNodes - 1) * intraLat + interLat``). Expected values are hop counts by hand: a 1 s NVLink hop makes the
   intra-node chain the whole latency to within a millisecond.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place

SECOND = 1.0
NET_HOP = 1e-6


def _net(nvlink_latency: float = SECOND, sharp: bool = False) -> Network:
    """Nodes of 8 GPUs whose NVLink hop takes ``nvlink_latency``, under a 64-GPU network tier of 1 us hops (SHARP
    there when ``sharp``; the NVLink tier does not reduce, so NVLS / NVLSTree never apply)."""
    return Network(tiers=(Tier(name="nvlink", span=8, bandwidth=200e9, latency=nvlink_latency, efficiency=0.8),
                          Tier(name="net0", span=64, bandwidth=25e9, latency=NET_HOP, efficiency=0.9,
                               in_network_reduction=sharp)),
                   gpus_per_node=8)


@pytest.mark.parametrize("ranks,critical,tuner", [
    (20, 7, 5),   # 3 nodes of 8, 8, 4: the fullest chain 7; NCCL floor(20 / 3) - 1 = 5
    (17, 7, 4),   # 3 nodes of 8, 8, 1: floor(17 / 3) - 1 = 4
    (12, 7, 5),   # 2 nodes of 8, 4: floor(12 / 2) - 1 = 5
    (24, 7, 7),   # 3 whole nodes: c_0 - 1 either way
    (8, 7, 7),    # one node
    (3, 2, 2),    # one node of 3
])
def test_chain_hops_critical_path_and_nccl_estimate(ranks: int, critical: int, tuner: int) -> None:
    pl = place(ranks, 1, _net())
    assert float(nccl.nccl_chain_hops(pl)) == critical
    assert float(nccl.nccl_chain_hops(pl, estimate=True)) == tuner


def test_nccl_tree_estimate_on_three_uneven_nodes_by_hand() -> None:
    """20 ranks on nodes of 8 (3 nodes: 8, 8, 4), 0 bytes, NCCL's Tree: NCCL's estimate 2 (5 x 1 s + log2i(3) x ~1 us)
    = 10 s plus the base latency and the per-hop Tree rows (microseconds); the time 2 x 7 = 14 s (the fullest node's
    chain, which the last rank's result waits on)."""
    pl = place(20, 1, _net())
    est = float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl, estimate=True))
    t = float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl))
    assert 10 * SECOND <= est <= 10 * SECOND + 1e-3
    assert 14 * SECOND <= t <= 14 * SECOND + 1e-3
    via_api = float(coll.collective_time("allreduce", 0.0, 20, _net(), algorithm="tree", dtype_bytes=1))
    assert via_api == pytest.approx(t, rel=1e-12)


def test_two_ranks_on_a_node_and_one_on_the_next_pay_the_nvlink_hop() -> None:
    """3 ranks on nodes of 2 (2, 1): NCCL's formula floor(3 / 2) - 1 = 0 charges no NVLink hop, but the first node's
    two ranks exchange over it: the time charges 2 x 1 s (the physics property of tests/test_coll34.py), the estimate
    none (under 1 ms: the base latency and one network level each way)."""
    net = Network(tiers=(Tier(name="nvlink", span=2, bandwidth=200e9, latency=SECOND, efficiency=0.8),
                         Tier(name="net0", span=64, bandwidth=25e9, latency=NET_HOP, efficiency=0.9)),
                  gpus_per_node=2)
    pl = place(3, 1, net)
    assert 2 * SECOND <= float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl)) <= 2 * SECOND + 1e-3
    assert float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl, estimate=True)) < 1e-3


def test_collnet_chain_on_three_uneven_nodes_by_hand() -> None:
    """CollNetChain (SHARP on the network tier, NVLS off): 2 h intraLat + interLat, each NVLink hop 1 s + 2.8 us -
    0.6 us (NCCL's CollNetChain NVLink entry read on the measured hop less the Ring LL entry,
    docs/model.md#in-network-reduction; NCCL's own 2.8 us in the estimate): 20 ranks on 3 nodes, the time's 7 hops
    14 s, NCCL's estimate 5 hops at 2.8 us each (the estimate charges NCCL's hwLatencies, not the tier's)."""
    pl = place(20, 1, _net(sharp=True))
    t = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), pl))
    assert 14 * SECOND <= t <= 14 * SECOND + 1e-3
    est = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), pl, estimate=True))
    # 2 x 5 x 2.8 us + NET CollNetChain 30 us (n_0 > 1): 58 us
    assert est == pytest.approx(2 * 5 * 2.8e-6 + 30e-6, rel=1e-9)
    est24 = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), place(24, 1, _net(sharp=True)), estimate=True))
    assert est24 == pytest.approx(2 * 7 * 2.8e-6 + 30e-6, rel=1e-9)
