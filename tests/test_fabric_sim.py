"""Link-level simulation of collectives on small leaf/spine fabrics with an oversubscribed spine.

Fabric: racks of ``T`` GPUs in nodes of ``g`` GPUs. Every GPU has an NVLink port (B0 per direction) and a
NIC share (B1 per direction); every rack has ``T x B1 / o`` of uplink and as much downlink to the spine
(taper ``o``). The job's groups tile the GPUs (``s`` interleaved groups of ``p`` ranks at stride ``s``), and
all of them run the same collective at once. Each algorithm step is a set of flows (src GPU, dst GPU,
bytes, NIC used); the simulator counts the bytes on every link in that step and charges the step the time
of its slowest link (bytes / capacity; latencies 0). The sum over steps must equal the closed forms of
:mod:`scalemodel.cost.algorithms`, which charge the taper per flow (docs/model.md#flow-taper).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scalemodel.cost import algorithms as A
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place

B0, B1 = 400e9, 25e9
S = 1e9

Flow = tuple[int, int, float, int, int]  # src, dst, bytes, NIC GPU at src, NIC GPU at dst


def fabric(g: int, T: int, racks: int, o: float) -> Network:
    return Network((Tier("nvl", g, B0, 0.0, protocol="nvlink"), Tier("leaf", T, B1, 0.0, protocol="rdma"),
                    Tier("spine", T * racks, B1, 0.0, oversubscription=o, protocol="rdma")), g)


def step_time(flows: list[Flow], g: int, T: int, o: float) -> float:
    """Slowest link of one step: NVLink tx/rx per GPU, NIC tx/rx per GPU, rack uplink/downlink."""
    load: dict[tuple[str, int], float] = defaultdict(float)
    cap = {"nvl_tx": B0, "nvl_rx": B0, "nic_tx": B1, "nic_rx": B1, "up": T * B1 / o, "down": T * B1 / o}
    for src, dst, nbytes, nic_s, nic_d in flows:
        if src // g == dst // g:
            load[("nvl_tx", src)] += nbytes
            load[("nvl_rx", dst)] += nbytes
            continue
        load[("nic_tx", nic_s)] += nbytes
        load[("nic_rx", nic_d)] += nbytes
        if src // T != dst // T:
            load[("up", src // T)] += nbytes
            load[("down", dst // T)] += nbytes
    return max((v / cap[k[0]] for k, v in load.items()), default=0.0)


def groups(p: int, s: int) -> list[list[int]]:
    """All groups of p ranks at stride s tiling p x s GPUs (Megatron order): group j = j, j+s, j+2s, ..."""
    return [[j + k * s for k in range(p)] for j in range(s)]


def ring_flows(members: list[int], g: int, nbytes: float) -> list[Flow]:
    """One ring step of a flat ring striped over a = (ranks per node) channels (NCCL): every channel moves
    nbytes / a over every edge; a node-crossing edge of channel j leaves through the j-th member of the
    sending node's NIC and enters through the j-th member of the receiving node's NIC."""
    per_node: dict[int, list[int]] = defaultdict(list)
    for r in members:
        per_node[r // g].append(r)
    a = len(per_node[members[0] // g])
    flows: list[Flow] = []
    p = len(members)
    for j in range(a):
        for k in range(p):
            src, dst = members[k], members[(k + 1) % p]
            flows.append((src, dst, nbytes / a, per_node[src // g][j], per_node[dst // g][j]))
    return flows


def sim_ring_allreduce(g: int, T: int, racks: int, o: float, p: int, s: int) -> float:
    """2(p-1) steps, each moving S/p per edge (split over the channels)."""
    flows = [f for grp in groups(p, s) for f in ring_flows(grp, g, S / p)]
    return 2 * (p - 1) * step_time(flows, g, T, o)


def sim_rhd_allreduce(g: int, T: int, racks: int, o: float, p: int, s: int) -> float:
    """Recursive halving (step k: every rank sends S/2^(k+1) to the rank 2^k away) then the mirror doubling."""
    total = 0.0
    for k in range(int(np.log2(p))):
        flows: list[Flow] = []
        for grp in groups(p, s):
            for r in range(p):
                src, dst = grp[r], grp[r ^ (1 << k)]
                flows.append((src, dst, S / 2 ** (k + 1), src, dst))
        total += 2 * step_time(flows, g, T, o)
    return total


def sim_hierarchical_allreduce(g: int, T: int, racks: int, o: float, p: int, s: int, c: list[int]) -> float:
    """Level i: c_(i-1) concurrent rings of p_i members (the same index in each child domain) over the shard
    m_i = S / c_(i-1); reduce-scatter down the levels, all-gather back: 2 (p_i - 1) steps of m_i / p_i."""
    total = 0.0
    prev = 1
    for ci in c:
        pi = ci // prev
        if pi > 1:
            m = S / prev
            flows: list[Flow] = []
            for grp in groups(p, s):
                for base in range(0, p, ci):  # one domain of this tier
                    for j in range(prev):  # one ring per index inside the child domain
                        ring = [grp[base + j + q * prev] for q in range(pi)]
                        for q in range(pi):
                            src, dst = ring[q], ring[(q + 1) % pi]
                            flows.append((src, dst, m / pi, src, dst))
            total += 2 * (pi - 1) * step_time(flows, g, T, o)
        prev = ci
    return total


FABRICS = [(g, T, racks, o) for g in (2, 4) for T in (4, 8) for racks in (2, 4) for o in (1.0, 2.0, 3.0, 4.0)
           if T >= g]


@pytest.mark.parametrize(("g", "T", "racks", "o"), FABRICS)
@pytest.mark.parametrize("s", [1, 2, 4])
def test_flat_ring_is_tapered_per_flow(g: int, T: int, racks: int, o: float, s: int) -> None:
    p = T * racks // s
    if p < 2:
        pytest.skip("one rank")
    net = fabric(g, T, racks, o)
    closed = float(A.ring_time("allreduce", np.asarray(S), place(p, s, net)))
    assert closed == pytest.approx(sim_ring_allreduce(g, T, racks, o, p, s), rel=1e-12)


def test_flat_ring_escapes_the_taper_only_where_few_channels_leave_the_rack() -> None:
    """4 racks of 8 GPUs in nodes of 2, taper 4: 2 channels leave each rack (2 x B1 of 8 x B1 / 4 = 2 x B1):
    no taper; with nodes of 4 the 4 channels want 4 x B1 of 2 x B1: the spine halves the ring's bandwidth."""
    untapered = sim_ring_allreduce(2, 8, 4, 1.0, 32, 1)
    assert sim_ring_allreduce(2, 8, 4, 4.0, 32, 1) == pytest.approx(untapered)
    assert sim_ring_allreduce(4, 8, 4, 4.0, 32, 1) == pytest.approx(2 * sim_ring_allreduce(4, 8, 4, 1.0, 32, 1))
    # stride 8 (one rank per rack, 8 interleaved groups): every GPU's ring leaves its rack: the full taper
    assert sim_ring_allreduce(2, 8, 4, 4.0, 4, 8) == pytest.approx(4 * sim_ring_allreduce(2, 8, 4, 1.0, 4, 8))


@pytest.mark.parametrize(("g", "T", "racks", "o"), FABRICS)
@pytest.mark.parametrize("s", [1, 2])
def test_rhd_pays_the_full_taper_on_its_cross_rack_steps(g: int, T: int, racks: int, o: float, s: int) -> None:
    p = T * racks // s
    net = fabric(g, T, racks, o)
    closed = float(A.rhd_time("allreduce", np.asarray(S), place(p, s, net)))
    assert closed == pytest.approx(sim_rhd_allreduce(g, T, racks, o, p, s), rel=1e-12)


@pytest.mark.parametrize(("g", "T", "racks", "o"), FABRICS)
@pytest.mark.parametrize("s", [1, 2])
def test_hierarchical_levels_pay_the_full_taper(g: int, T: int, racks: int, o: float, s: int) -> None:
    p = T * racks // s
    net = fabric(g, T, racks, o)
    pl = place(p, s, net)
    c = [int(x) for x in (float(pl.c[0]), float(pl.c[1]), float(pl.c[2]))]
    closed = float(A.hierarchical_time("allreduce", np.asarray(S), pl))
    assert closed == pytest.approx(sim_hierarchical_allreduce(g, T, racks, o, p, s, c), rel=1e-12)


def test_direct_alltoall_closed_form_bounds_the_fluid_time() -> None:
    """One-step all-to-all (every rank sends S/p to every peer): the closed form serialises the NIC's leaf
    and spine bytes (sum), the fluid link model overlaps them (max); the sum lies between max and 2 x max."""
    for g, T, racks, o in FABRICS:
        p = T * racks
        flows = [(a, b, S / p, a, b) for a in range(p) for b in range(p) if a != b]
        sim = step_time(flows, g, T, o)
        closed = float(A.direct_time("alltoall", np.asarray(S), place(p, 1, fabric(g, T, racks, o))))
        assert sim * (1 - 1e-12) <= closed <= 2 * sim * (1 + 1e-12)


def nccl_btree(n: int) -> list[int]:
    """parent[rank] of NCCL's binary tree over n ranks (ncclGetBtree, src/graph/trees.cc: in-order numbering,
    a rank's parent flips its lowest set bit and sets the next one up; rank 0 is the root)."""
    parent = [-1] * n
    for r in range(1, n):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        if up >= n:
            up = r ^ bit
        parent[r] = up
    return parent


def nccl_dtree(n: int) -> tuple[list[int], list[int]]:
    """NCCL's two complementary trees (ncclGetDtree): the second mirrors the ranks (even n) or shifts them
    by one (odd n)."""
    t1 = nccl_btree(n)
    t2 = [-1] * n
    for r in range(n):
        pr = (n - 1 - r) if n % 2 == 0 else (r - 1) % n
        par = t1[pr]
        if par >= 0:
            t2[r] = (n - 1 - par) if n % 2 == 0 else (par + 1) % n
    return t1, t2


@pytest.mark.parametrize("n", [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256])
def test_double_binary_tree_crosses_a_rack_on_few_edges(n: int) -> None:
    """TREE_FLOWS = 2: the two trees together cross the boundary of a block of 2^j consecutive nodes (a rack
    that the node count fills) on at most 8 edges (6 for a power-of-two node count), each carrying one of a
    rank's 4 streams: 8 / 4 = 2 streams' worth per channel."""
    trees = nccl_dtree(n)
    for tree in trees:
        assert tree.count(-1) == 1 and all(par != r for r, par in enumerate(tree))
    worst = 0
    for m in [2**j for j in range(0, 9) if 2**j < n and n % 2**j == 0]:
        for start in range(0, n, m):
            block = set(range(start, start + m))
            worst = max(worst, sum(sum(1 for r, par in enumerate(tree) if par >= 0 and ((r in block) != (par in block)))
                                   for tree in trees))
    assert worst <= (6 if n & (n - 1) == 0 else 8)
    assert A.TREE_FLOWS == 8 / 4


# --- recursive halving / doubling as separate reduce-scatter and all-gather (ZeRO-1/2's pair) -------------------
# The simulation tracks which of the p blocks (S/p each) every rank holds and derives each step's flows from that
# bookkeeping, not from the closed forms' byte counts.

Step = list[tuple[int, int, int]]  # (src rank, dst rank, blocks sent) within one group


def halving_steps(p: int, masks: list[int]) -> list[Step]:
    """Recursive-halving reduce-scatter: each rank holds a range of partially reduced blocks, starting with all
    p; at the step with ``mask`` it keeps the half its side of the pair owns (rank & mask: the upper half in
    the pair's bit order) and sends the other half to rank ^ mask. The ``masks`` order is the partner order:
    Rabenseifner's phase (1, 2, .., p/2) or MPICH's stand-alone recursive halving (p/2, .., 1)."""
    held = [list(range(p)) for _ in range(p)]
    steps: list[Step] = []
    for mask in masks:
        step: Step = []
        new = []
        for r in range(p):
            keep = [b for b in held[r] if (b & mask) == (r & mask)]
            step.append((r, r ^ mask, len(held[r]) - len(keep)))
            new.append(keep)
        held = new
        steps.append(step)
    assert all(h == [r] for r, h in enumerate(held))  # each rank ends with its own reduced block
    return steps


def doubling_steps(p: int, masks: list[int]) -> list[Step]:
    """Recursive-doubling all-gather: each rank starts with its own block; at the step with ``mask`` it sends
    all it holds to rank ^ mask and adds what it receives. Nearest first (1, 2, .., p/2) is the stand-alone
    algorithm (MPICH allgather_intra_recursive_doubling); farthest first (p/2, .., 1) Rabenseifner's phase."""
    held = [{r} for r in range(p)]
    steps: list[Step] = []
    for mask in masks:
        steps.append([(r, r ^ mask, len(held[r])) for r in range(p)])
        held = [held[r] | held[r ^ mask] for r in range(p)]
    assert all(h == set(range(p)) for h in held)
    return steps


def sim_steps(steps: list[Step], g: int, T: int, o: float, p: int, s: int) -> float:
    """All s interleaved groups run the same steps at once; every flow leaves through its sender's NIC."""
    total = 0.0
    for step in steps:
        flows: list[Flow] = [(grp[a], grp[b], n * S / p, grp[a], grp[b]) for grp in groups(p, s) for a, b, n in step]
        total += step_time(flows, g, T, o)
    return total


def near_first(p: int) -> list[int]:
    return [1 << k for k in range(int(np.log2(p)))]


@pytest.mark.parametrize(("g", "T", "racks", "o"), FABRICS)
@pytest.mark.parametrize("s", [1, 2, 4])
def test_rhd_pair_is_the_mirror_and_sums_to_the_allreduce(g: int, T: int, racks: int, o: float, s: int) -> None:
    """ZeRO-1/2 with ``rhd``: Rabenseifner's reduce-scatter phase (nearest partner first, the largest block to
    it) and its all-gather phase (the reverse order). Each all-gather step moves the same blocks between the
    same partners as the mirrored reduce-scatter step, link for link; both match rhd_time's closed forms, and
    together the all-reduce."""
    p = T * racks // s
    if p < 2:
        pytest.skip("one rank")
    rs = halving_steps(p, near_first(p))
    ag = doubling_steps(p, near_first(p)[::-1])
    for a, b in zip(ag, rs[::-1], strict=True):  # time reversal: same bytes, same (unordered) pairs
        assert sorted(a) == sorted(b)
    net = fabric(g, T, racks, o)
    pl = place(p, s, net)
    t_rs, t_ag = sim_steps(rs, g, T, o, p, s), sim_steps(ag, g, T, o, p, s)
    assert float(A.rhd_time("reducescatter", np.asarray(S), pl)) == pytest.approx(t_rs, rel=1e-12)
    assert float(A.rhd_time("allgather", np.asarray(S), pl)) == pytest.approx(t_ag, rel=1e-12)
    assert t_rs + t_ag == pytest.approx(sim_rhd_allreduce(g, T, racks, o, p, s), rel=1e-12)
    assert float(A.rhd_time("allreduce", np.asarray(S), pl)) == pytest.approx(t_rs + t_ag, rel=1e-12)


@pytest.mark.parametrize(("g", "T", "racks", "o"), FABRICS)
@pytest.mark.parametrize("s", [1, 2, 4])
def test_rd_reducescatter_and_allgather_follow_mpich_partner_order(g: int, T: int, racks: int, o: float,
                                                                  s: int) -> None:
    """The stand-alone algorithms (``rd``): MPICH's recursive-doubling all-gather pairs ranks 1, 2, .., p/2
    apart (its largest block, S/2, to the farthest partner); its recursive-halving reduce-scatter starts p/2
    apart with S/2 (Thakur et al. 2005 §4). They are each other's mirror too, and on a tapered spine cost more
    than the rhd pair, never less."""
    p = T * racks // s
    if p < 2:
        pytest.skip("one rank")
    net = fabric(g, T, racks, o)
    pl = place(p, s, net)
    rs = halving_steps(p, near_first(p)[::-1])
    ag = doubling_steps(p, near_first(p))
    t_rs, t_ag = sim_steps(rs, g, T, o, p, s), sim_steps(ag, g, T, o, p, s)
    assert float(A.rd_time("reducescatter", np.asarray(S), pl)) == pytest.approx(t_rs, rel=1e-12)
    assert float(A.rd_time("allgather", np.asarray(S), pl)) == pytest.approx(t_ag, rel=1e-12)
    assert t_rs == pytest.approx(t_ag, rel=1e-12)
    assert t_ag >= float(A.rhd_time("allgather", np.asarray(S), pl)) * (1 - 1e-12)


def test_rhd_pair_on_one_tapered_fabric_by_hand() -> None:
    """2 racks of 4 GPUs, nodes of 2, spine taper 2, one group of 8: steps at distance 1 (NVLink, B0), 2 (leaf,
    B1) and 4 (spine, B1 / 2). Rabenseifner's order sends S/2, S/4, S/8 over them; the stand-alone all-gather
    sends S/8, S/4, S/2."""
    pl = place(8, 1, fabric(2, 4, 2, 2.0))
    rhd = S / 2 / B0 + S / 4 / B1 + S / 8 / (B1 / 2)
    rd = S / 8 / B0 + S / 4 / B1 + S / 2 / (B1 / 2)
    assert sim_steps(doubling_steps(8, [4, 2, 1]), 2, 4, 2.0, 8, 1) == pytest.approx(rhd, rel=1e-12)
    assert sim_steps(doubling_steps(8, [1, 2, 4]), 2, 4, 2.0, 8, 1) == pytest.approx(rd, rel=1e-12)
    assert float(A.rhd_time("allgather", np.asarray(S), pl)) == pytest.approx(rhd, rel=1e-12)
    assert float(A.rd_time("allgather", np.asarray(S), pl)) == pytest.approx(rd, rel=1e-12)
