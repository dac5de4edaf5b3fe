"""Torus tiers: hand computations from the published formulas (docs/model.md#torus)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as C
from scalemodel.cost import topology as T
from scalemodel.cost.network import Network, Tier
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster


def test_link_bandwidth_is_the_node_total_over_its_links() -> None:
    # TPU v3: 4 ICI links per chip on a 2D torus, 100 GB/s one-way each -> catalog 400 GB/s per chip
    assert T.link_bandwidth(400e9, 1.0, (32, 32)) == pytest.approx(100e9)
    assert T.link_bandwidth(600e9, 1.0, (16, 16, 16)) == pytest.approx(100e9)  # 6 links (3D)


def test_2d_torus_allreduce_is_mikami_three_phases() -> None:
    """Mikami et al. 2018 (2D-torus all-reduce: reduce-scatter along X, all-reduce along Y on the shard,
    all-gather along X; every ring in both directions, each half of the data on one direction's link, 2 B_link),
    run on two shares of S/2 in the orders X, Y and Y, X at once (tpucoll30; scaling-book sharding.md L337-345:
    n_axes times one axis's bandwidth), each phase as long as its slower share."""
    X, Y, S, a, b = 32, 16, 1e9, 0.75e-6, 100e9
    h = S / 2
    rs = (max((X - 1) * (a + h / X / (2 * b)), (Y - 1) * (a + h / Y / (2 * b)))
          + max((Y - 1) * (a + h / (X * Y) / (2 * b)), (X - 1) * (a + h / (X * Y) / (2 * b))))
    assert float(T.torus_allreduce(S, (X, Y), a, b, op="reducescatter")) == pytest.approx(rs)
    assert float(T.torus_allreduce(S, (X, Y), a, b)) == pytest.approx(2 * rs)  # all-gather: the same, mirrored
    # a 1-D torus is a bidirectional ring: 2(p-1) alpha + 2(p-1)/p S / (2 B)
    assert float(T.torus_allreduce(S, (8,), a, b)) == pytest.approx(14 * a + 2 * 7 / 8 * S / (2 * b))


def test_torus_alltoall_is_bisection_limited() -> None:
    """k-ary n-cube with wraparound (Dally & Towles 2004): 2 k^(n-1) links per direction across the bisection;
    p S / 4 bytes cross it each way. TPU v4 pod 16 x 16 x 16: 512 links, 1024 S / (512 B) = 2 S / B; the
    injection bound (4095/4096) S / (6 B) is lower; latency = diameter 3 x 8 hops."""
    S, a, b = 64e6, 1e-6, 45e9
    assert T.bisection_links((16, 16, 16)) == 2 * 16**2
    assert float(T.torus_alltoall(S, (16, 16, 16), a, b)) == pytest.approx(24 * a + 2 * S / b)
    # a 4 x 2 torus: the cut across the 4-long dimension has 2 x 8/4 = 4 links; a 2-long dimension's two
    # wraparound links are one pair: 8/2 = 4 links per direction; injection (7/8) S / (4 B) vs bisection 2S/(4B)
    assert T.bisection_links((4, 2)) == 4
    assert float(T.torus_alltoall(S, (4, 2), a, b)) == pytest.approx(3 * a + max(8 * S / 4 / (4 * b),
                                                                                  7 / 8 * S / (4 * b)))


TORUS = Network((Tier("ici", 16, 400e9, 1e-6, efficiency=0.8, topology="torus", protocol="ici",
                      torus_dims=(4, 4)),), 4)
SWITCH = Network((Tier("ici", 16, 400e9, 1e-6, efficiency=0.8, protocol="ici"),), 4)


def test_a_group_filling_the_torus_takes_the_torus_forms() -> None:
    S = np.array([1e3, 1e6, 1e9])
    b_link = 400e9 * 0.8 / 4
    got = C.raw_algorithm_time("allreduce", "ring", S, 16, TORUS)
    assert got == pytest.approx(T.torus_allreduce(S, (4, 4), 1e-6, b_link))
    # both dimensions at once (tpucoll30): all 4 links busy, the switch's bandwidth term, 12 hops not 30
    sw = C.raw_algorithm_time("allreduce", "ring", 1e9, 16, SWITCH)
    assert float(C.raw_algorithm_time("allreduce", "ring", 1e9, 16, TORUS)) == pytest.approx(
        float(sw) - 18 * 1e-6, rel=1e-12)
    a2a = C.raw_algorithm_time("alltoall", "direct", S, 16, TORUS)
    assert a2a == pytest.approx(T.torus_alltoall(S, (4, 4), 1e-6, b_link))
    # a group that does not fill the torus (8 of 16, or stride 2) is priced as on a switch
    assert C.raw_algorithm_time("allreduce", "ring", S, 8, TORUS) == pytest.approx(
        C.raw_algorithm_time("allreduce", "ring", S, 8, SWITCH))
    assert C.raw_algorithm_time("allreduce", "ring", S, 8, TORUS, stride=2) == pytest.approx(
        C.raw_algorithm_time("allreduce", "ring", S, 8, SWITCH, stride=2))


def test_torus_dims_are_checked_against_the_tier() -> None:
    cl = load_cluster("tpu-v3-pod", ["tiers.ici.torus_dims=[32, 32]"])
    assert cl.tiers[0].torus_dims == [32, 32]
    with pytest.raises(InputError, match="product must match"):
        load_cluster("tpu-v3-pod", ["tiers.ici.torus_dims=[32, 16]"])
    with pytest.raises(InputError, match="needs topology: torus"):
        load_cluster("dgx-a100", ["tiers.nvlink.torus_dims=[2, 4]"])


B0, B1 = 300e9, 25e9
NVL = Tier("nvl", 8, B0, 2e-6, protocol="nvlink")


def rail_net(topology: str) -> Network:
    return Network((NVL, Tier("leaf", 256, B1, 5e-6, topology=topology, protocol="rdma")), 8)


def test_rail_alltoall_crosses_nvlink_first_for_other_rails() -> None:
    """Rail-optimised leaf (NVIDIA DGX SuperPOD RA; NCCL PXN): 16 GPUs on 2 nodes, all-to-all of S per rank,
    m = S/16 per peer. Switch leaf: NVLink port 7m/B0, NIC 8m/B1. Rail leaf: 7 of the 8 peers in the other node
    are on another rail, so 7m more cross NVLink first (14 m / B0) and pay an NVLink hop each."""
    S = 64e6
    m = S / 16
    sw = float(C.raw_algorithm_time("alltoall", "direct", S, 16, rail_net("switch")))
    rail = float(C.raw_algorithm_time("alltoall", "direct", S, 16, rail_net("rail")))
    assert sw == pytest.approx(max(7 * m / B0, 8 * m / B1) + 7 * 2e-6 + 8 * 5e-6)
    assert rail == pytest.approx(max(14 * m / B0, 8 * m / B1) + 14 * 2e-6 + 8 * 5e-6)
    # a DP group of same-index GPUs (stride 8: one per node) stays on its rail: no PXN
    assert float(C.raw_algorithm_time("alltoall", "direct", S, 16, rail_net("rail"), stride=8)) == pytest.approx(
        float(C.raw_algorithm_time("alltoall", "direct", S, 16, rail_net("switch"), stride=8)))


@pytest.mark.parametrize("algo", ["ring", "tree", "rhd", "hierarchical"])
def test_rail_aligned_algorithms_cost_the_same_as_on_a_switched_leaf(algo: str) -> None:
    S = np.array([1e4, 1e8])
    for p, s in ((64, 1), (32, 2), (16, 8)):
        assert C.raw_algorithm_time("allreduce", algo, S, p, rail_net("rail"), stride=s) == pytest.approx(
            C.raw_algorithm_time("allreduce", algo, S, p, rail_net("switch"), stride=s))


def test_rhd_partners_in_other_nodes_share_the_local_index() -> None:
    """Why RHD needs no PXN: with g GPUs per node and stride s (powers of two), a partner 2^k ranks away in
    another node is 2^k s GPUs away, a multiple of g, so both GPUs sit on the same rail."""
    for g in (2, 4, 8):
        for s in (1, 2, 4, 8, 16):
            p = 64
            for k in range(6):
                for r in range(p):
                    a, b = r * s, (r ^ (1 << k)) * s
                    if a // g != b // g:
                        assert a % g == b % g



def _simulate_torus_reducescatter(dims: tuple[int, ...], S: float, alpha: float, b_link: float) -> float:
    """Step-by-step dimension-ordered bidirectional ring reduce-scatter on a torus (Mikami et al. 2018; Ying
    et al. 2018). Every node holds S bytes (as values). Along each dimension in turn, every line of nodes
    runs two rings, one per direction, each on half of the nodes' current shard cut into d chunks; in
    each of the d - 1 steps every node sends one partial chunk to its neighbour, which adds it. A step
    takes alpha + (most bytes on one directed link) / b_link. Returns the time, after checking that the
    nodes end with disjoint shards that cover the vector and hold the full sum."""
    rng = np.random.default_rng(0)
    n_el = int(np.prod(dims)) * 2 ** len(dims) * 4
    nodes = list(np.ndindex(*dims))
    data = {n: rng.random(n_el) for n in nodes}
    total = sum(data.values())
    own = {n: np.arange(n_el) for n in nodes}  # element positions each node is reducing
    elem = S / n_el
    t = 0.0
    for k, d in enumerate(dims):
        if d == 1:
            continue
        parts = {}
        for n in nodes:
            half = len(own[n]) // 2
            parts[n] = {+1: np.array_split(own[n][:half], d), -1: np.array_split(own[n][half:], d)}
        for step in range(d - 1):
            link_bytes: dict[tuple, float] = {}
            new = {n: v.copy() for n, v in data.items()}
            for n in nodes:
                for direction in (+1, -1):
                    pos = parts[n][direction][(n[k] - direction * step) % d]
                    dst = tuple((x + direction) % d if j == k else x for j, x in enumerate(n))
                    new[dst][pos] += data[n][pos]
                    link = (n, dst, direction)  # extent 2: the direct and the wraparound link join one pair
                    link_bytes[link] = link_bytes.get(link, 0.0) + len(pos) * elem
            data = new
            t += alpha + max(link_bytes.values()) / b_link
        own = {n: np.concatenate([parts[n][+1][(n[k] + 1) % d], parts[n][-1][(n[k] - 1) % d]]) for n in nodes}
    covered = np.sort(np.concatenate([own[n] for n in nodes]))
    assert np.array_equal(covered, np.arange(n_el))  # disjoint shards covering the vector
    for n in nodes:
        assert np.allclose(data[n][own[n]], total[own[n]])
    return t


@pytest.mark.parametrize("dims", [(4,), (16,)])  # several dimensions at once: tests/test_tpucoll30.py
def test_torus_reducescatter_matches_a_step_by_step_count_of_bytes_per_link(dims: tuple[int, ...]) -> None:
    S, a, b = 96e6, 0.75e-6, 100e9
    sim = _simulate_torus_reducescatter(dims, S, a, b)
    assert float(T.torus_allreduce(S, dims, a, b, op="reducescatter")) == pytest.approx(sim, rel=1e-9)


def test_a_ring_on_one_torus_dimension_gets_two_of_six_links() -> None:
    """A 16-way group on one dimension of a TPU v5p 3D torus (6 ICI links per chip, 100 GB/s one-way each;
    catalog tier 600 GB/s x 0.80): its bidirectional ring uses 2 links, so its reduce-scatter bandwidth term
    is 3x the switch pricing's (p - 1)/p S / (600 GB/s x 0.80) that a tier without torus_dims gets."""
    S = 2.68e9
    b_link = T.link_bandwidth(600e9, 0.80, (16, 16, 24))  # 80 GB/s
    ring = float(T.torus_allreduce(S, (16,), 0.0, b_link, op="reducescatter"))
    assert ring == pytest.approx(15 / 16 * S / (2 * 80e9))
    switch = 15 / 16 * S / (600e9 * 0.80)
    assert ring / switch == pytest.approx(3.0)
    pod = load_cluster("tpu-v5p-pod")
    assert not pod.tiers[0].torus_dims  # the catalog pod is priced as a switch (validation/README.md)


def test_a_group_along_whole_torus_dimensions_rings_on_their_links_only() -> None:
    """A group of one dimension (4 ranks at stride 1: dimension 1; at stride 4: dimension 2) of the 4 x 4
    torus is a 1-D torus: one bidirectional ring on 2 of the node's 4 links, B_link = 400e9 x 0.8 / 4 each
    (jax mesh_utils._create_device_mesh_for_nd_torus gives a mesh axis of 4 one physical axis of 4)."""
    a, b_link, S = 1e-6, 400e9 * 0.8 / 4, 1e9
    ring = 2 * 3 * a + 2 * 3 / 4 * S / (2 * b_link)  # 2(d-1) alpha + 2(d-1)/d S / (2 B_link)
    for stride in (1, 4):
        assert float(C.raw_algorithm_time("allreduce", "ring", S, 4, TORUS, stride=stride)) == pytest.approx(ring)
        # all-to-all on a 4-ring: the cut crosses 2 x 4/4 = 2 links; 4 S / 4 bytes cross it each way
        a2a = 2 * a + max(S / (2 * b_link), 3 / 4 * S / (2 * b_link))
        assert float(C.raw_algorithm_time("alltoall", "direct", S, 4, TORUS, stride=stride)) == pytest.approx(a2a)
    # half the bandwidth the switch pricing gives the same group (all 4 links feeding one ring)
    assert float(C.raw_algorithm_time("allreduce", "ring", S, 4, TORUS)) > 1.9 * float(
        C.raw_algorithm_time("allreduce", "ring", S, 4, SWITCH))
    # a group that is not a run of whole dimensions (4 at stride 2) keeps the switch pricing; 2 ranks at stride 1,
    # a segment of dimension 1, is held since tpu33 at its 2 links' floor, 2 x 1/2 S / (2 B_link) (tests/test_tpu33.py)
    assert float(C.raw_algorithm_time("allreduce", "ring", S, 4, TORUS, stride=2)) == pytest.approx(
        float(C.raw_algorithm_time("allreduce", "ring", S, 4, SWITCH, stride=2)))
    assert float(C.raw_algorithm_time("allreduce", "ring", S, 2, TORUS)) == pytest.approx(
        max(float(C.raw_algorithm_time("allreduce", "ring", S, 2, SWITCH)), S / (2 * b_link)))


def test_no_algorithm_beats_a_torus_groups_injection_floor() -> None:
    """On a (sub-)torus group a node receives (p-1)/p S (all-gather; 2x for all-reduce) over the 2 |dims|
    links of its dimensions: 3/4 S / (2 B_link) on one 4-long dimension, 15/16 S / (4 B_link) on the 4 x 4."""
    b_link, S = 400e9 * 0.8 / 4, 1e9
    # torus31: rhd on a 4-long dimension is priced on its links (partners 1 and 2 hops away, S/2 then 2 x S/4 on
    # the busiest link: 3 alpha + S / B_link), above the floor the switch price was held at before
    hand = 3 * 1e-6 + S / b_link
    assert float(C.raw_algorithm_time("allgather", "rhd", S, 4, TORUS)) == pytest.approx(hand)
    assert hand > 3 / 4 * S / (2 * b_link)
    assert float(C.raw_algorithm_time("allreduce", "rhd", S, 4, TORUS, stride=4)) == pytest.approx(2 * hand)
    assert float(C.raw_algorithm_time("allgather", "rhd", S, 16, TORUS)) >= 15 / 16 * S / (4 * b_link) * (1 - 1e-9)
    # the same algorithm on a switch, or on a group the torus forms do not cover, is not floored
    assert float(C.raw_algorithm_time("allgather", "rhd", S, 4, SWITCH)) < 0.6 * 3 / 4 * S / (2 * b_link)
    assert float(C.raw_algorithm_time("allgather", "rhd", S, 4, TORUS, stride=2)) == pytest.approx(
        float(C.raw_algorithm_time("allgather", "rhd", S, 4, SWITCH, stride=2)))
    # with NCCL's protocol layer too: auto can no longer price a 1-D group on all of the node's links
    net = build_network(load_cluster("tpu-v5e-pod", []))
    b5 = 200e9 * 0.8 / 4  # v5e: 4 ICI ports of 50 GB/s, 16 x 16
    t = float(C.collective_time("allgather", 64e6, 16, net, dtype_bytes=1))
    assert t >= 15 / 16 * 64e6 / (2 * b5) * (1 - 1e-9)
