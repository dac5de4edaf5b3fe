"""review35b: tree latency hops counted on whole sub-groups where a group fills its outer domains unevenly.

A level's member count p_i = c_i / c_(i-1) is fractional where the group fills its last domain in part (28 ranks on
nodes of 8: 3.5). NCCL's Tree crosses the network log2i(nNodes) times each way with the whole node count (tuning.cc
L416 at v2.30.7-1: ``2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat)``): 28 ranks are 4 nodes, two
levels, not floor(lg 3.5) = 1, which priced 28 ranks below 32 on the same nodes. algorithms.tree_depth apportions one
tree's floor(lg n) levels to the tiers they cross on whole counts (d544ca0f's rule for the hierarchical ring and
NVLSTree). Expected values are hop counts by hand."""

from __future__ import annotations

import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place

SECOND = 1.0
NVLINK_HOP = 1e-6


def _net(outer_latency: float, per_domain: int = 8) -> Network:
    """Domains of ``per_domain`` GPUs (nodes) under one 64-GPU outer tier."""
    return Network(tiers=(Tier(name="nvlink", span=per_domain, bandwidth=200e9, latency=NVLINK_HOP, efficiency=0.8),
                          Tier(name="net0", span=64, bandwidth=25e9, latency=outer_latency, efficiency=0.9)),
                   gpus_per_node=per_domain)


@pytest.mark.parametrize("per_domain,ranks,outer_levels", [
    (8, 28, 1), (8, 32, 2), (8, 57, 2), (6, 12, 1), (6, 21, 2), (6, 42, 3), (5, 7, 1)])
def test_alpha_beta_tree_allreduce_of_nothing_is_one_tree_over_the_ranks(per_domain, ranks, outer_levels) -> None:
    """The bare alpha-beta tree (algorithms.tree_time) all-reduce of 0 bytes: up and down one binary tree of
    floor(lg p) levels over the ranks (tree_allreduce's depth), floor(lg c_0) of them inside a domain and the rest
    across: 21 ranks on domains of 6 are floor(lg 21) = 4 levels, 2 inside and 2 across (floor(lg 3.5) gave 1
    across); 7 ranks on domains of 5 still cross once (floor(lg 7) - floor(lg 5) = 0 would leave the outer tier
    uncharged)."""
    inner = {8: 3, 6: 2, 5: 2}[per_domain]
    t = float(coll.raw_algorithm_time("allreduce", "tree", 0.0, ranks, _net(SECOND, per_domain)))
    assert t == pytest.approx(2 * (inner * NVLINK_HOP + outer_levels * SECOND), rel=1e-12)


@pytest.mark.parametrize("ranks,nodes", [(24, 3), (25, 4), (28, 4), (32, 4), (57, 8)])
def test_nccl_tree_allreduce_crosses_the_outer_hop_2_log2i_nodes_times(ranks, nodes) -> None:
    """NCCL's Tree (nccl.nccl_tree_allreduce_time via --algo tree): 2 log2i(nNodes) crossings of the 1 s outer hop
    (tuning.cc L416), nNodes the whole count; the rest (base latency, NVLink chain, Tree hop rows) is under 1 ms."""
    depth = {3: 1, 4: 2, 8: 3}[nodes]
    t = float(coll.collective_time("allreduce", 0.0, ranks, _net(SECOND), algorithm="tree", dtype_bytes=1))
    assert 2 * depth * SECOND <= t <= 2 * depth * SECOND + 1e-3


def test_nccl_tree_levels_apportioned_to_leaf_and_spine() -> None:
    """mlpt40's DP group shape: 484 ranks 4 apart on nodes of 8 (2 a node, 242 nodes), leaves of 32 nodes. NCCL's
    tree has log2i(242) = 7 levels: 5 inside a leaf (32 nodes), 2 across the spine; at a 1 s leaf hop and a 100 s
    spine hop that is 2 (5 + 200) s (the whole-group count 8 = 5 + floor(lg ceil(7.56)) would charge a third spine
    level)."""
    net = Network(tiers=(Tier(name="nvlink", span=8, bandwidth=200e9, latency=NVLINK_HOP, efficiency=0.8),
                         Tier(name="leaf", span=256, bandwidth=25e9, latency=SECOND, efficiency=0.9),
                         Tier(name="spine", span=16384, bandwidth=25e9, latency=100 * SECOND, efficiency=0.9)),
                  gpus_per_node=8)
    t = float(coll.group_time("allreduce", 0.0, place(484, 4, net), algorithm="tree", dtype_bytes=1))
    assert 2 * (5 + 200) * SECOND <= t <= 2 * (5 + 200) * SECOND + 1e-3


def test_more_ranks_on_the_same_nodes_never_climb_fewer_tree_levels() -> None:
    """The fractional depth made NCCL's Tree on 28 ranks (4 nodes) cost one level where 32 ranks on the same 4 nodes
    cost two: at a 1 s outer hop both now cost two levels each way, and 24 ranks (3 nodes) one."""
    t = {p: float(coll.collective_time("allreduce", 0.0, p, _net(SECOND), algorithm="tree", dtype_bytes=1))
         for p in (24, 28, 32)}
    assert t[24] < 4 * SECOND <= t[28] and t[32] >= 4 * SECOND
