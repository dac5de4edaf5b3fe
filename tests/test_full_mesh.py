"""A full mesh of direct links (tier 0 ``full_mesh``: AMD Instinct xGMI, 7 links a GPU, no switch;
docs/model.md#full-mesh): a group reaches only the links between its members, a pair one link. Values are
counted by hand (bytes per link per step of rings over the mesh's directed Hamiltonian cycles) and compared with
[RCCL-XGMI]'s published TransferBench and rccl-tests figures on MI300X."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from scalemodel.cost import collectives as C
from scalemodel.cost.network import Network
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster

NET = build_network(load_cluster("mi300x-8"))
LINK = 64e9 * 0.71  # one xGMI link per direction x the tier's efficiency (448 GB/s = 7 x 64 GB/s)
ALPHA = 2e-6  # the xgmi tier's hop latency


def _ring_allreduce_by_links(g: int, S: float, alpha: float, b_link: float) -> float:
    """Ring all-reduce over g GPUs of a full mesh, counted link by link: one channel per directed Hamiltonian
    cycle of the g GPUs (every ring order, each carrying an equal share of S: RCCL's rings over a mesh use every
    link between the members), 2(g - 1) lock-step steps in which every channel moves one chunk S / (channels g)
    along each of its g edges; a step takes alpha + (most bytes on one directed link) / b_link."""
    cycles = [(0, *rest) for rest in itertools.permutations(range(1, g))]
    chunk = S / (len(cycles) * g)
    per_link: dict[tuple[int, int], float] = {}
    for cyc in cycles:
        assert sorted(cyc) == list(range(g))
        for k in range(g):
            edge = (cyc[k], cyc[(k + 1) % g])
            per_link[edge] = per_link.get(edge, 0.0) + chunk
    assert len(per_link) == g * (g - 1)  # every directed link between the members carries traffic
    step = alpha + max(per_link.values()) / b_link
    return 2 * (g - 1) * step


@pytest.mark.parametrize("g", [2, 3, 4, 5, 8])
def test_ring_allreduce_over_g_gpus_of_the_mesh_uses_the_links_between_them(g: int) -> None:
    S = 2.0**30
    want = _ring_allreduce_by_links(g, S, ALPHA, LINK)
    got = float(C.raw_algorithm_time("allreduce", "ring", S, g, NET))
    assert got == pytest.approx(want, rel=1e-12)
    # the bus bandwidth this gives: (g - 1) links, 45.4 GB/s on 2 GPUs, 136 on 4, 318 on all 8
    bus = float(C.busbw("allreduce", S, g, want - 2 * (g - 1) * ALPHA))
    assert bus == pytest.approx((g - 1) * LINK)


def test_a_send_to_one_peer_gets_one_link_whatever_the_group() -> None:
    S = 64 * 2.0**20
    for p, stride in ((2, 1), (2, 4), (4, 1), (8, 1)):  # a ring of neighbours: every rank sends to one peer
        t = float(C.raw_algorithm_time("sendrecv", "direct", S, p, NET, stride=stride))
        assert t == pytest.approx(ALPHA + S / LINK, rel=1e-12)
    # [RCCL-XGMI] TransferBench, 64 MiB a transfer, all 56 links busy: 45.1-47.2 GB/s a link (mean 46.55)
    got = S / float(C.collective_time("sendrecv", S, 2, NET, dtype_bytes=1))
    assert 45.1e9 * 0.97 <= got <= 47.2e9
    assert got / 46.55e9 - 1 == pytest.approx(-0.024, abs=0.01)


def test_direct_alltoall_sends_each_peer_its_share_on_its_own_link() -> None:
    S = 2.0**28
    for g in (2, 4, 8):
        zero = float(C.raw_algorithm_time("alltoall", "direct", 0.0, g, NET))
        t = float(C.raw_algorithm_time("alltoall", "direct", S, g, NET))
        # each rank sends S/g to each of its g - 1 peers, each on its own link, all at once
        assert t - zero == pytest.approx((S / g) / LINK, rel=1e-9)


def test_recursive_doubling_steps_each_take_one_link() -> None:
    S = 2.0**26
    t = float(C.raw_algorithm_time("allreduce", "rd", S, 8, NET))
    assert t == pytest.approx(3 * (ALPHA + S / LINK), rel=1e-12)  # lg 8 exchanges of S with one partner each


def test_group_share_and_pair_bandwidth_on_the_placement() -> None:
    pl = place(np.array([1.0, 2.0, 4.0, 8.0, 16.0, 2.0]), np.array([1.0, 1.0, 1.0, 1.0, 1.0, 8.0]), NET)
    assert pl.mesh_share.tolist() == pytest.approx([1 / 7, 1 / 7, 3 / 7, 1.0, 1.0, 1 / 7])
    assert pl.bw.shape == (3, 6)
    assert pl.bw[0].tolist() == pytest.approx((pl.mesh_share * 7 * LINK).tolist())
    assert pl.bw[1].tolist() == pytest.approx([50e9 * 0.94] * 6)  # the NIC tiers are untouched
    assert float(pl.pair_bw(0)) == pytest.approx(LINK)
    assert pl.pair_bw(np.array([0, 1, 2])).tolist() == pytest.approx([LINK, 47e9, 47e9])


def test_a_collective_across_nodes_with_all_eight_gpus_a_node_is_unchanged() -> None:
    """c_0 = 8: every link of the node is the group's, so the mesh costs what the switch-like pricing did."""
    switch = Network((replace(NET.tiers[0], full_mesh=False), *NET.tiers[1:]), NET.gpus_per_node, NET.generation)
    S = np.array([2.0**20, 2.0**30])
    for op in ("allreduce", "allgather", "reducescatter", "alltoall"):
        for p in (8, 16, 64):
            assert np.allclose(C.collective_time(op, S, p, NET), C.collective_time(op, S, p, switch), rtol=1e-12)


def test_a_cube_mesh_without_full_mesh_is_priced_as_before() -> None:
    """DGX-1's hybrid cube mesh keeps topology mesh without full_mesh: priced as a switch (not every pair is
    linked, so the full-mesh rule does not describe it)."""
    v100 = build_network(load_cluster("dgx-1-v100"))
    assert not v100.tiers[0].full_mesh
    switch = Network((replace(v100.tiers[0], topology="switch"), *v100.tiers[1:]), v100.gpus_per_node,
                     v100.generation, host_cpu=v100.host_cpu)
    S = np.array([2.0**16, 2.0**30])
    for p in (2, 4, 8):
        assert np.array_equal(C.collective_time("allreduce", S, p, v100), C.collective_time("allreduce", S, p, switch))
    assert place(4.0, 1.0, v100).bw.shape == (2,)


def test_nccl_layer_prices_the_smaller_group_slower() -> None:
    """Through the NCCL/RCCL protocol layer (auto): at 8 GiB the bus bandwidth follows the links, (g - 1)/7 of
    the 8-GPU figure within the protocol's latency share."""
    S = 8 * 2.0**30
    bus = {g: float(C.busbw("allreduce", S, g, C.collective_time("allreduce", S, g, NET))) for g in (2, 4, 8)}
    assert bus[8] == pytest.approx(316.82e9, rel=0.01)  # az_ndmi300xv5_allreduce_1node plateau, unchanged
    for g in (2, 4):
        assert bus[g] / bus[8] == pytest.approx((g - 1) / 7, rel=0.01)


@pytest.mark.parametrize("override, where", [
    ("tiers.ib-leaf.full_mesh=true", "innermost"),
    ("tiers.xgmi.topology=switch", "topology"),
])
def test_full_mesh_needs_the_innermost_mesh_tier(override: str, where: str) -> None:
    with pytest.raises(InputError, match="full_mesh needs the innermost tier"):
        load_cluster("mi300x-8", [override])
    assert math.isclose(load_cluster("mi300x-8").tiers[0].bandwidth, 448e9)
