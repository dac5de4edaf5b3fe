"""Alpha-beta(-gamma) models of collective algorithms: textbook single-tier forms and their multi-tier
versions over a placed group.

Notation (all SI): ``S`` bytes (the nccl-tests "size": the full buffer for all-reduce, broadcast and
reduce; the FULL gathered buffer for all-gather and reduce-scatter, each rank holding S/p; the total
sent per rank for all-to-all), ``p`` ranks, ``alpha`` seconds per message (hop), ``beta = 1/B``
seconds per byte, ``gamma`` seconds per byte of reduction arithmetic.

1. Textbook single-tier closed forms (uniform alpha, beta; exactly what a step-by-step simulation of the
   algorithm gives, tests/test_collective_sim.py):

   - ring all-reduce ``2(p-1) alpha + 2(p-1)/p S beta + (p-1)/p S gamma`` (:func:`ring_allreduce`),
     reduce-scatter ``(p-1) alpha + (p-1)/p S (beta + gamma)``, all-gather ``(p-1) alpha + (p-1)/p S beta``;
   - Rabenseifner (recursive halving + doubling) ``2 lg p alpha + 2(p-1)/p S beta + (p-1)/p S gamma``
     (:func:`rhd_allreduce`), recursive doubling ``lg p (alpha + S beta + S gamma)`` (:func:`rd_allreduce`);
   - pipelined double binary tree ``T(k) = (2h + k - 1)(alpha + 2 S beta / k)``, h = floor(lg p)
     (:func:`tree_allreduce`), pipelined chain broadcast ``(p - 2 + k)(alpha + S beta / k)``.

2. Multi-tier versions (:func:`ring_time`, :func:`tree_time`, :func:`rhd_time`, :func:`rd_time`,
   :func:`direct_time`, :func:`hierarchical_time`; :func:`algorithm_time` by name) on a
   :class:`~scalemodel.cost.placement.Placement`: each hop is charged the latency ``alpha_i`` and the
   bandwidth ``B_i`` of the outermost tier it crosses. Algorithms whose traffic leaves a node only on a few
   edges (flat ring and tree: NCCL stripes its channels over all NICs of the node) get ``a_i = c_0`` times
   the per-GPU bandwidth on outer tiers; algorithms in which every GPU talks across the tier at once (RHD,
   RD, direct, hierarchical levels) get the per-GPU rate. An oversubscribed tier is charged per flow
   (:meth:`~scalemodel.cost.placement.Placement.flow_bw`, docs/model.md#flow-taper): a flat ring leaves a
   child domain on ``a_i`` flows, a double binary tree on ``TREE_FLOWS a_i``, the others on every rank's;
   the taper applies only as far as those flows exceed the domain's uplink. On a full mesh of direct links
   (tier 0 with ``Tier.full_mesh``, docs/model.md#full-mesh) ``B_0`` is the group's share, the links between its
   members (:attr:`~scalemodel.cost.placement.Placement.bw`), and a pairwise exchange (send/recv, each RHD / RD
   step) one link (:meth:`~scalemodel.cost.placement.Placement.pair_bw`). No protocol, base latency or channel effects
   here: those are NCCL's layer (:mod:`scalemodel.cost.nccl`).

Sources: Thakur, Rabenseifner & Gropp, IJHPCA 19(1) 2005 (ring, RHD, RD, pairwise, Bruck);
Patarasuk & Yuan, JPDC 69(2) 2009 (ring bandwidth optimality); Sanders, Speck & Träff, Parallel
Computing 35(12) 2009 (two-tree); Cho et al., BlueConnect, MLSys 2019 and Mikami et al.,
arXiv:1811.05233 (hierarchical / 2D-torus); NVIDIA/nccl v2.30.7 src/graph/tuning.cc (ring hop counts,
NVLS efficiency). See docs/model.md#collectives and docs/model.md#nccl.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from scalemodel.cost import topology
from scalemodel.cost.placement import Placement
from scalemodel.errors import InputError

OPS: tuple[str, ...] = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "reduce", "sendrecv")
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "rhd", "rd", "direct", "hierarchical")

#: Which algorithms model each operation (``rhd`` for broadcast/reduce is scatter + all-gather (van de
#: Geijn) / reduce-scatter + gather (Rabenseifner); ``rhd`` for reduce-scatter / all-gather is the matching
#: phase of Rabenseifner's all-reduce (nearest partner carries the largest block), ``rd`` the stand-alone
#: MPICH algorithms (recursive halving / doubling: farthest partner carries the largest block); ``rd`` for
#: all-to-all is Bruck; ``direct`` for all-to-all is pairwise exchange).
APPLICABLE: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "rhd", "rd", "direct", "hierarchical"),
    "reducescatter": ("ring", "rhd", "rd", "direct", "hierarchical"),
    "allgather": ("ring", "rhd", "rd", "direct", "hierarchical"),
    "alltoall": ("direct", "rd"),
    "broadcast": ("ring", "tree", "rhd"),
    "reduce": ("ring", "tree", "rhd"),
    "sendrecv": ("direct",),
}

#: Flows per direction, in units of one stream's per-GPU rate, that NCCL's double binary tree sends out of
#: a block of consecutive nodes (a rack), per parallel stream: the two trees (in-order numbering, ncclGetBtree /
#: ncclGetDtree; Sanders et al. 2009) cross the boundary of a block of 2^j nodes on at most 8 edges together
#: (6 when the node count is a power of two), each carrying one of a rank's 4 streams (B/4): 8 / 4 = 2
#: (docs/model.md#flow-taper; tests/test_fabric_sim.py counts the crossing edges). Racks of a node count that
#: is not a power of two can be crossed on more edges; the flow taper never exceeds the full taper.
TREE_FLOWS = 2.0

#: In-network reduction (NVLS / SHARP) efficiency: NCCL's NVLS "eff" for Hopper (tuning.cc;
#: docs/model.md#in-network-reduction).
INR_EFFICIENCY = 0.85


def check_op(op: str) -> None:
    """Refuse an operation not in ``OPS``."""
    if op not in OPS:
        raise InputError(f"unknown collective {op!r}", where="op", allowed="one of: " + ", ".join(OPS))


def busbw_factor(op: str, p: np.ndarray | float) -> np.ndarray:
    """nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md): 2(n-1)/n all-reduce; (n-1)/n
    reduce-scatter, all-gather, all-to-all; 1 broadcast, reduce, send/recv. n = 1 gives 1 here, where nccl-tests'
    own factor is 0 for all-reduce, reduce-scatter and all-gather (tests/src/all_reduce.cu AllReduceGetBw:
    2(nranks-1)/nranks, so a one-GPU run prints busbw 0): no number depends on it, since a one-rank group's time is 0
    (:func:`nccl.algorithm_time` masks it) and :func:`collectives.algbw` is 0 at time 0.
    The one copy for both the reporting (:func:`collectives.busbw`) and NCCL's llMaxBw cap."""
    check_op(op)
    p = np.asarray(p, dtype=float)
    if op == "allreduce":
        f = 2.0 * (p - 1.0) / np.maximum(p, 1.0)
    elif op in ("reducescatter", "allgather", "alltoall"):
        f = (p - 1.0) / np.maximum(p, 1.0)
    else:
        f = np.ones_like(p)
    return np.where(p <= 1, 1.0, f)


def allowed(op: str) -> str:
    """The algorithms an error message offers for ``op``."""
    return "for " + op + ": " + ", ".join((*APPLICABLE[op], "auto"))


def log2_floor(p: np.ndarray) -> np.ndarray:
    """floor(log2 p) for p >= 1, robust to float rounding (log2(8) may be 2.9999999)."""
    return np.floor(np.log2(np.maximum(p, 1.0)) + 1e-9)


def tree_depth(pl: Placement, i: int, unit: np.ndarray | float = 1.0) -> np.ndarray:
    """Levels of one binary tree over the group's ``unit``-sized members (ranks: 1; NCCL's nodes: ``c_0``) that
    cross tier ``i``: ``d_i = max(1, floor(lg n_i) - floor(lg n_(i-1)))`` where the group spans tier i's level
    (``p_i`` > 1), else 0, with ``n_i = ceil(c_i / unit)`` the whole members inside a tier-i domain (n_(-1) = 1).
    The sum over the tiers telescopes to ``floor(lg n)`` of the whole group's n members, one tree's depth
    (:func:`tree_allreduce`'s ``floor(lg p)``; NCCL's ``log2i(nNodes)``, tuning.cc L416 at v2.30.7-1), each level
    on the tier it crosses; the 1 keeps a spanned tier's crossing where its members do not add a whole level (7
    nodes in domains of 5). Whole counts, not the level's mean fill ``p_i = c_i / c_(i-1)``: 28 ranks on nodes of 8
    are 4 nodes, two levels, where ``floor(lg 3.5)`` gave one (review35b; d544ca0f's rule for the hierarchical ring
    and NVLSTree)."""
    u = np.asarray(unit, dtype=float)
    n = np.ceil(pl.c[i] / u - 1e-9)
    n_prev = np.ceil(pl.c_prev(i) / u - 1e-9) if i > 0 else np.ones_like(n)
    return np.asarray(np.where(pl.level(i) > 1 + 1e-9,
                               np.maximum(1.0, log2_floor(n) - log2_floor(np.maximum(n_prev, 1.0))), 0.0))


# ------------------------------------------------------------------------------------------------
# 1. Textbook single-tier closed forms (uniform alpha, beta). Used by tests and as building blocks.
# ------------------------------------------------------------------------------------------------

def ring_allreduce(S, p, alpha, beta, gamma=0.0):  # type: ignore[no-untyped-def]
    """Ring all-reduce = ring reduce-scatter + ring all-gather:
    ``T = 2(p-1) alpha + 2(p-1)/p S beta + (p-1)/p S gamma`` (Patarasuk & Yuan 2009; Thakur et al. 2005 §4)."""
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, 2 * (p - 1) * alpha + 2 * (p - 1) / p * S * beta + (p - 1) / p * S * gamma, 0.0)


def ring_reducescatter(S, p, alpha, beta, gamma=0.0):  # type: ignore[no-untyped-def]
    """Ring reduce-scatter of a full buffer S: ``T = (p-1) alpha + (p-1)/p S (beta + gamma)`` (Thakur et al. 2005)."""
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, (p - 1) * alpha + (p - 1) / p * S * (beta + gamma), 0.0)


def ring_allgather(S, p, alpha, beta):  # type: ignore[no-untyped-def]
    """Ring all-gather of a full buffer S: ``T = (p-1) alpha + (p-1)/p S beta`` (Thakur et al. 2005)."""
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, (p - 1) * alpha + (p - 1) / p * S * beta, 0.0)


def rhd_allreduce(S, p, alpha, beta, gamma=0.0):  # type: ignore[no-untyped-def]
    """Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather.

    For p a power of two ``T = 2 lg p alpha + 2(p-1)/p S beta + (p-1)/p S gamma`` (Thakur et al.
    2005 §4.4). Otherwise p' = 2^floor(lg p) ranks run it and the r = p - p' extra ranks first send
    their whole vector to a partner and get the result back at the end: + 2(alpha + S beta) + S gamma.
    """
    p = np.asarray(p, dtype=float)
    L = log2_floor(p)
    pp = 2.0**L
    t = 2 * L * alpha + 2 * (pp - 1) / pp * S * beta + (pp - 1) / pp * S * gamma
    t = t + np.where(pp < p, 2 * (alpha + S * beta) + S * gamma, 0.0)
    return np.where(p > 1, t, 0.0)


def rd_allreduce(S, p, alpha, beta, gamma=0.0):  # type: ignore[no-untyped-def]
    """Recursive doubling: lg p exchanges of the full vector, ``T = lg p (alpha + S beta + S gamma)``
    (Thakur et al. 2005); non-power-of-two p adds the same pre/post step as :func:`rhd_allreduce`."""
    p = np.asarray(p, dtype=float)
    L = log2_floor(p)
    pp = 2.0**L
    t = L * (alpha + S * beta + S * gamma) + np.where(pp < p, 2 * (alpha + S * beta) + S * gamma, 0.0)
    return np.where(p > 1, t, 0.0)


def tree_allreduce(S, p, alpha, beta, chunks=None):  # type: ignore[no-untyped-def]
    """Pipelined double binary tree all-reduce (Sanders, Speck & Träff 2009; NCCL's Tree).

    Each of two complementary binary trees of height ``h = floor(lg p)`` carries S/2, cut into k
    chunks. At steady state a rank drives four streams (up in both trees, down to two children in
    the tree where it is interior), so a tree link runs at B/4 and a chunk hop costs
    ``t = alpha + (S/(2k)) 4 beta = alpha + 2 S beta / k``. Reduce up and broadcast down pipeline
    through the root: ``T(k) = (2h + k - 1) t``. Per-rank traffic is 2S (NCCL's Tree algBw = busBw/2,
    docs/model.md#nccl). With ``chunks=None`` k is the continuous optimum
    ``k* = sqrt((2h-1) 2 S beta / alpha)`` (>= 1), giving
    ``T = 2 S beta + (2h-1) alpha + 2 sqrt((2h-1) alpha 2 S beta)``.
    """
    p = np.asarray(p, dtype=float)
    h = log2_floor(p)
    D = 2 * h
    if chunks is not None:
        k = np.asarray(chunks, dtype=float)
        t = (D + k - 1) * (alpha + 2 * S * beta / k)
        return np.where(p > 1, t, 0.0)
    A = D * alpha
    V = D * 2 * S * beta
    u = 2 * S * beta
    return np.where(p > 1, _pipeline_opt(A, V, u, np.asarray(alpha, dtype=float) + 0 * p), 0.0)


def _pipeline_opt(A, V, u, alpha_b):  # type: ignore[no-untyped-def]
    """min over k >= 1 of ``T(k) = A + V/k + (k-1)(alpha_b + u/k)`` = (A - alpha_b + u) + (V-u)/k + k alpha_b.

    Convex in k; optimum k* = sqrt((V-u)/alpha_b), clipped to k >= 1 (k = 1 gives A + V).
    """
    K = np.maximum(np.asarray(V - u, dtype=float), 0.0)
    ab = np.asarray(alpha_b, dtype=float)
    use_opt = K >= ab
    t_opt = A - ab + u + 2.0 * np.sqrt(K * ab)
    t_one = A + V
    return np.where(use_opt, np.minimum(t_opt, t_one), t_one)


def pipelined_chain_broadcast(S, p, alpha, beta, chunks=None):  # type: ignore[no-untyped-def]
    """Pipelined chain (ring) broadcast: ``T(k) = (p - 2 + k)(alpha + S beta / k)``; the continuous
    optimum is ``k* = sqrt((p-2) S beta / alpha)`` (Thakur et al. 2005; NCCL's ring broadcast)."""
    p = np.asarray(p, dtype=float)
    if chunks is not None:
        k = np.asarray(chunks, dtype=float)
        return np.where(p > 1, (p - 2 + k) * (alpha + S * beta / k), 0.0)
    A = (p - 1) * alpha
    V = (p - 1) * S * beta
    u = S * beta
    return np.where(p > 1, _pipeline_opt(A, V, u, np.asarray(alpha, dtype=float) + 0 * p), 0.0)


# ------------------------------------------------------------------------------------------------
# 2. Mapping a group onto the tiers


# ------------------------------------------------------------------------------------------------
# 2. Multi-tier algorithms. Each takes (op, S, placement, gamma) and returns seconds.
# ------------------------------------------------------------------------------------------------

def _steps_factor(op: str) -> float:
    return 2.0 if op == "allreduce" else 1.0


def ring_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Flat ring over the group in rank order (NCCL's Ring; latency composition of NCCL's tuning.cc).

    All-reduce / reduce-scatter / all-gather:
    ``T = sum_i f (n_(i-1) - n_i) max(alpha_i, o) + f (p-1)/p S / min_i(a_i B_i) [+ (p-1)/p S gamma]``,
    f = 2 for all-reduce else 1; f (n_(i-1) - n_i) is the number of ring steps whose hop crosses tier i (NCCL:
    nInter = 2(N-1) of 2(n-1) steps), a_i the parallel streams on tier i (``Placement.agg``), B_i the
    per-flow bandwidth for a_i flows leaving each child domain (``Placement.flow_bw``, taper
    ``clip(o a_i / c_(i-1), 1, o)``; docs/model.md#flow-taper). ``o`` is the network post overhead of a ring
    that leaves its node: the largest ``Tier.net_overhead`` x ``Placement.overhead_factor`` over the outer
    tiers the group crosses, 0 inside one node (NCCL tuning.cc "Inter-node rings still have to launch
    nsteps * net overhead": ``intraLat = max(intraLat, netOverhead)`` when nNodes > 1, x3 with Simple;
    docs/model.md#ring-net-overhead). NCCL takes the max on the intra-node steps only; here it is taken on
    every step, which is the same wherever the network hop is at least the overhead (always in NCCL's table).
    Broadcast / reduce: the pipelined chain of :func:`pipelined_chain_broadcast` with path latency
    ``sum_i (n_(i-1) - n_i) alpha_i`` (no overhead: NCCL's Ring broadcast/reduce row has none) and the
    bottleneck link. A group that fills a tier declaring a torus (``topology: torus``, ``torus_dims``), or
    runs along whole dimensions of it, runs dimension-ordered bidirectional rings on those dimensions instead, one
    share of the data per dimension in rotated orders so every dimension's links are busy at once
    (:func:`scalemodel.cost.topology.torus_allreduce`, docs/model.md#torus); its broadcast / reduce is the chain
    routed on the torus links (:func:`_torus_pipeline`, tpu32).
    """
    p = pl.p
    chain = op in ("broadcast", "reduce")  # only the chain reads V and alpha_b
    lat, bmin, alpha_b, hops, ring_lat = _ring_hops(pl)
    if chain:
        V = np.zeros_like(p)
        for h, b in hops:
            V = V + h * S / b
        # chain of p-1 hops: lat and V as computed (f = 1); bottleneck per-chunk time u = S / bmin
        u = S / bmin
        t = _pipeline_opt(lat, V, u, alpha_b)
        if op == "reduce":
            t = t + S * gamma
        return np.where(p > 1, _torus_pipeline(op, "ring", S, pl, gamma, t), 0.0)
    f = _steps_factor(op)
    t = f * ring_lat + f * (p - 1) / p * S / bmin
    if op in ("allreduce", "reducescatter"):
        t = t + (p - 1) / p * S * gamma
    t = _on_torus(op, "ring", S, pl, gamma, t)  # a (sub-)torus group: dimension-ordered rings
    return np.where(p > 1, t, 0.0)


def _on_torus(op: str, algorithm: str, S: np.ndarray, pl: Placement, gamma: float, t: np.ndarray) -> np.ndarray:
    """``t`` replaced by ``algorithm``'s torus form where the group is a (sub-)torus and the form applies
    (:func:`scalemodel.cost.topology.torus_time`; docs/model.md#torus)."""
    torus = topology.torus_time(op, S, pl, gamma, algorithm)
    return t if torus is None else np.where(torus[0], torus[1], t)


def _ring_hops(pl: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]],
                                       np.ndarray]:
    """The size-independent figures of :func:`ring_time` on a placed group: the path latency
    ``sum_i (n_(i-1) - n_i) alpha_i``, the bottleneck ``min_i a_i B_i`` over the crossed tiers (1 where none is),
    its tier's alpha, per tier (hops crossing it, a_i B_i), and the ring's latency with the network post
    overhead ``sum_i (n_(i-1) - n_i) max(alpha_i, o)``, ``o = max over crossed tiers i >= 1 of net_overhead_i x
    overhead_factor`` (0 inside one node). Computed once per placement (:attr:`Placement.memo`): every message
    size priced on the group shares them."""
    if "ring_hops" not in pl.memo:
        p = pl.p
        lat = np.zeros_like(p)
        bmin = np.full_like(p, np.inf)
        alpha_b = np.zeros_like(p)
        ovh = np.zeros_like(p)
        hops = []
        for i in range(pl.ntiers):
            h = pl.domains(i - 1) - pl.domains(i)
            crossed = h > 0.5
            a = pl.agg(i)
            b = a * pl.flow_bw(i, a)  # a channels leave each child domain (rack-contiguous order)
            lat = lat + h * pl.alpha[i]
            newmin = crossed & (b < bmin)
            alpha_b = np.where(newmin, pl.alpha[i], alpha_b)
            bmin = np.where(newmin, b, bmin)
            hops.append((h, b))
            if i > 0:  # a crossed outer tier: the ring leaves its node
                o = pl.network.tiers[i].net_overhead * pl.overhead_factor
                ovh = np.where(crossed, np.maximum(ovh, o), ovh)
        ring_lat = np.zeros_like(p)
        for i, (h, _) in enumerate(hops):
            ring_lat = ring_lat + h * np.maximum(pl.alpha[i], ovh)
        pl.memo["ring_hops"] = (lat, np.where(np.isfinite(bmin), bmin, 1.0), alpha_b, hops, ring_lat)
    return pl.memo["ring_hops"]  # type: ignore[no-any-return]


def tree_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Pipelined double binary tree (all-reduce) or two-tree broadcast/reduce across the tiers.

    Level i of the group (p_i members) adds :func:`tree_depth`'s ``d_i`` tree levels (0 if p_i = 1; one
    tree of ``floor(lg p)`` levels over the group's ranks, each on the tier it crosses),
    whose hops cost alpha_i and run at a_i B_i / 4 per link (all-reduce: 4 streams per rank, chunk
    S/(2k)) or a_i B_i / 2 (broadcast/reduce: 2 streams). With D = number of hop traversals
    (2 sum d_i for all-reduce, sum d_i otherwise):
    ``T(k) = sum_i D_i (alpha_i + x_i / k) + (k-1)(alpha_b + x_b / k)``, x_i = 2S/(a_i B_i) (all-reduce) or
    S/(a_i B_i), b the slowest tier, minimised over k >= 1 (:func:`tree_allreduce`; Sanders et al. 2009);
    B_i is the per-flow bandwidth for ``TREE_FLOWS a_i`` flows leaving each child domain (docs/model.md#flow-taper).
    """
    p = pl.p
    A = np.zeros_like(p)
    V = np.zeros_like(p)
    u = np.zeros_like(p)
    alpha_b = np.zeros_like(p)
    bmin = np.full_like(p, np.inf)
    mult = 2.0 if op == "allreduce" else 1.0
    for i in range(pl.ntiers):
        d = tree_depth(pl, i)
        a = pl.agg(i)
        b = a * pl.flow_bw(i, TREE_FLOWS * a)
        x = mult * S / b
        A = A + mult * d * pl.alpha[i]
        V = V + mult * d * x
        newmin = (d > 0) & (b < bmin)
        alpha_b = np.where(newmin, pl.alpha[i], alpha_b)
        u = np.where(newmin, x, u)
        bmin = np.where(newmin, b, bmin)
    t = _pipeline_opt(A, V, u, alpha_b)
    if op in ("allreduce", "reduce"):
        t = t + S * gamma
    return np.where(p > 1, _torus_pipeline(op, "tree", S, pl, gamma, t), 0.0)


def _torus_pipeline(op: str, algorithm: str, S: np.ndarray, pl: Placement, gamma: float, t: np.ndarray
                    ) -> np.ndarray:
    """The pipelined ``tree`` (all-reduce, broadcast, reduce) or ``ring`` chain (broadcast, reduce) on a (sub-)torus
    group in rank order (docs/model.md#torus-algorithms), ``t`` elsewhere. ``V`` bytes go in ``k`` chunks down a
    path of ``H`` hops while the busiest directed link passes ``E`` chunks one after another:
    ``T(k) = H alpha + H V / (k B_link) + (k - 1)(alpha + E V / (k B_link))`` (+ ``S gamma`` all-reduce, reduce),
    minimised over k (:func:`_pipeline_opt`). Tree (torus31; NCCL's double binary tree, each tree half the data,
    :func:`scalemodel.cost.topology.tree_loads`): ``V = S/2``; all-reduce: up and down, ``2 H`` hops, ``E`` both
    sweeps' traversals; broadcast the down sweep, reduce the up sweep alone (tpu32). Ring (tpu32): the chain
    through ranks ``0 .. p-1`` (reduce: ``1 .. p-1, 0``, review32c), ``V = S``, ``H`` and ``E`` from
    :func:`scalemodel.cost.topology.chain_loads` (a step that carries into the next dimension is one hop longer;
    every chain edge has links of its own, ``E = 1``)."""
    if op not in ("allreduce", "broadcast", "reduce") or (algorithm == "ring" and op == "allreduce"):
        return t

    def form(dims: tuple[int, ...], alpha: float, b_link: float) -> np.ndarray:
        size = np.asarray(S, dtype=float)
        if algorithm == "ring":
            hops, edges = topology.chain_loads(dims, op == "reduce")
            path, vol = float(hops), size
        else:
            edges, hops = topology.tree_loads(dims, {"allreduce": "both", "broadcast": "down", "reduce": "up"}[op])
            path, vol = (2.0 if op == "allreduce" else 1.0) * hops, size / 2.0
        out = _pipeline_opt(path * alpha, path * vol / b_link, edges * vol / b_link, alpha + 0.0 * vol)
        return out + (size * gamma if op in ("allreduce", "reduce") else 0.0)
    torus = topology.on_torus_groups(op, S, pl, form)
    return t if torus is None else np.where(torus[0], torus[1], t)


def _log_steps(pl: Placement) -> tuple[np.ndarray, int]:
    L = log2_floor(pl.p)
    return L, int(np.max(L)) if L.size else 0


def _folded_step_tiers(pl: Placement, steps: int) -> list[np.ndarray]:
    """Which tiers each recursive halving / doubling step ``k`` (``k < steps``) crosses, as a boolean array of
    shape (tiers,) + p's: where p is a power of two the one tier holding an aligned block of 2^(k+1) group ranks
    (every pair of the step crosses the same one); otherwise every tier one of the step's pairs crosses after
    MPICH's fold (docs/model.md#rhd-fold): the first 2r ranks (r = p - p') fold 2i into 2i+1 and the p' left are
    renumbered, rank j being group rank 2j+1 for j < r and j + r after, so pair (j, j + 2^k) (bit k of j clear) can
    straddle a domain boundary the aligned rule does not (p 25 on domains of 16: pair 15-24), and pairs of one step
    cross different tiers. Group ranks fill the tiers' domains in order, c_i to a tier-i domain (:class:`Placement`).

    The folded groups are priced once per distinct (p, c_0 .. c_{T-2}), all at once, in closed form
    (:func:`_folded_crossings`: a few representative runs of pairs per group, not its p ranks);
    tests/test_speed35.py keeps the row-by-row loop and tests/test_rhdbig35.py the rank-array version this replaced
    as references and compare them."""
    p = np.asarray(pl.p, dtype=float)
    levels = np.arange(pl.ntiers).reshape((-1,) + (1,) * p.ndim)
    out = [levels == pl.tier_for_block(2.0 ** (k + 1)) for k in range(steps)]
    folded = 2.0 ** log2_floor(p) < p
    if steps == 0 or not np.any(folded):
        return out
    cs = np.stack([np.broadcast_to(np.asarray(c, dtype=float), p.shape) for c in pl.c[:-1]] or
                  [np.zeros(p.shape)], axis=-1)
    rows, inverse = np.unique(np.concatenate([p[..., None], cs], axis=-1)[folded], axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    where = np.flatnonzero(folded.ravel())
    crossed, reach = _folded_crossings(rows[:, 0].astype(np.int64), rows[:, 1:pl.ntiers], pl.ntiers, steps)
    for k in range(steps):
        at = reach[inverse] > k  # steps past lg p' of a row keep the aligned rule (the loop's range)
        out[k].reshape(pl.ntiers, -1)[:, where[at]] = crossed[k][inverse[at]].T
    return out


#: pieces of runs priced in one block of :func:`_folded_crossings` (each with 1 + 4 (T - 1) candidate pairs)
_FOLD_BLOCK = 1 << 16


def _whole_runs(rows: np.ndarray, first: np.ndarray, count: np.ndarray, shift: int, x_off: np.ndarray, span: int,
                longer: int, n_ranks: np.ndarray, bounds: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The runs ``first .. first + count - 1`` of one kind (run m's pairs lie in (shift m + x_off, shift m + x_off +
    span]) that give every count they hold, as (row, run) arrays (:func:`_folded_crossings`).

    A bound ``c`` with ``longer < c < p`` (one a pair of the run can cross and can fail to) changes a run's counts
    only if one of its multiples lies in the run's range; the others are crossed by every pair or by none. Split
    those bounds at a size: the smaller ("dense") bring the runs back to the same offsets after
    ``P = lcm c / gcd(c, shift)`` runs; a run holding no multiple of a larger ("sparse") one has the counts of every
    run P away that holds none either, and among N + 1 runs P apart at most N hold one of the N sparse multiples.
    So the first ``min(count, P (N + 1))`` runs and the N runs holding a sparse multiple give every count. The
    split is chosen per row to price the fewest runs: a few where the domains share a short period (a power of two
    times small odd factors: the shipped clusters at stride 1), about p / c where a large domain c has none of its
    own, never more than the runs themselves."""
    live = (bounds > longer) & (bounds < n_ranks[:, None])
    lo = shift * first + x_off
    hi = shift * (first + count - 1) + x_off + span
    safe = np.maximum(bounds, 1)
    mult = np.where(live, np.maximum(hi[:, None] // safe - lo[:, None] // safe, 0), 0)  # multiples in the range
    step = np.where(live, safe // np.gcd(safe, shift), 1)
    cap = np.maximum(count, 1)
    best, sparse_of = np.full(len(rows), np.iinfo(np.int64).max), np.zeros(bounds.shape, dtype=bool)
    window = count.copy()
    for edge in [np.zeros(len(rows), dtype=np.int64)] + list(bounds.T):
        sparse = live & (bounds > edge[:, None])
        period = np.ones(len(rows), dtype=np.int64)
        for b in range(bounds.shape[1]):
            st = np.where(sparse[:, b], 1, step[:, b])
            q = period // np.gcd(period, st)
            period = np.where(q > cap // st, cap, np.minimum(q * st, cap))
        near = np.sum(np.where(sparse, mult, 0), axis=1)
        win = np.where(period > count // (near + 1), count, period * (near + 1))
        cost = win + near
        better = cost < best
        best, window = np.where(better, cost, best), np.where(better, win, window)
        sparse_of[better] = sparse[better]
    yield from _runs(rows, window, first)
    at = np.repeat(np.arange(len(rows)), bounds.shape[1])
    cf = safe.ravel()
    for i, off in _runs(np.arange(at.size), np.where(sparse_of, mult, 0).ravel(), np.zeros(at.size, dtype=np.int64)):
        q = (lo[at[i]] // cf[i] + 1 + off) * cf[i]  # a multiple of a sparse bound in the range
        m = (q - x_off[at[i]] - 1) // shift  # the run whose range holds it
        keep = (m >= first[at[i]]) & (m < first[at[i]] + count[at[i]])
        yield rows[at[i]][keep], m[keep]


def _folded_crossings(n_ranks: np.ndarray, bounds: np.ndarray, ntiers: int, steps: int
                      ) -> tuple[list[np.ndarray], np.ndarray]:
    """Per folded group (``n_ranks`` p, not a power of two; ``bounds`` its c_0 .. c_{T-2}, shape (rows, T - 1)):
    the tiers step k's pairs cross (``crossed[k]``, shape (rows, T)) and the steps the group runs, lg p'
    (``reach``). Rank j of the p' left after the fold is group rank x(j) = 2j + 1 for j < r (r = p - p') and j + r
    after; step k (h = 2^k) pairs j with j + h for j in the runs [2hm, 2hm + h), and a pair crosses the tier that
    counts the bounds it straddles (``x // c != y // c``; nested domains).

    Closed form, not the p ranks (rhdbig35): the runs split at r - h and r into three kinds of pair, both ranks
    folded (y = x + 2h), both after the fold (y = x + h), and one of each (y = j + h + r, distance >= h), so within a
    piece of a run x and y rise linearly with j and a bound changes a pair's count only where x or y passes one of
    its multiples. A bound no larger than the piece's least distance is crossed by every pair of it; a larger one
    has at most two multiples within the piece's x and one within its y, so the count is constant between the
    piece's first j and the j where x or y reaches one of the next two multiples of each bound, and those
    1 + 4 (T - 1) pairs give every count the piece holds. Whole runs of one kind repeat once the run offset
    (2h m after the fold, 4h m in x before it) is a multiple of every bound that matters, so only a few of them are
    priced (:func:`_whole_runs`), plus the at most three pieces of the run holding r - h and r."""
    lg = (np.frexp(n_ranks.astype(float))[1] - 1).astype(np.int64)  # exactly floor(lg p): p = m 2^e, m in [1/2, 1)
    crossed = [np.zeros((len(n_ranks), ntiers), dtype=bool) for _ in range(steps)]
    c = np.asarray(bounds, dtype=np.int64).reshape(len(n_ranks), ntiers - 1)
    r = n_ranks - (np.int64(1) << lg)
    for k in range(steps):
        rows = np.flatnonzero(lg > k)
        if not rows.size:
            continue
        h = 1 << k
        n, rr, cb = n_ranks[rows], r[rows], c[rows]
        runs = (np.int64(1) << lg[rows]) // (2 * h)
        m1, m2 = rr // (2 * h), -(-rr // (2 * h))  # runs wholly before r - h; the first wholly from r on
        cut = m1 < m2  # r is not a multiple of 2h: run m1 holds r - h and r, in up to three pieces
        row, mid, rc = rows[cut], 2 * h * m1[cut], rr[cut]
        cut_run = [(row, mid, np.minimum(mid + h, rc - h), 0),  # (row, first j, end j, kind)
                   (row, np.maximum(mid, rc - h), np.minimum(mid + h, rc), 2), (row, np.maximum(mid, rc), mid + h, 1)]
        # whole runs before r - h (x = 2j + 1 from 4hm + 1, y up to 4hm + 4h - 1) and from r on (x = j + r),
        # generated a block at a time
        before = ((row, 2 * h * m, 2 * h * m + h, 0) for row, m in
                  _whole_runs(rows, 0 * m1, m1, 4 * h, 1 + 0 * m1, 4 * h - 2, 2 * h, n, cb))
        after = ((row, 2 * h * m, 2 * h * m + h, 1) for row, m in
                 _whole_runs(rows, m2, runs - m2, 2 * h, rr, 2 * h - 1, h, n, cb))
        for row, first, end, kind in itertools.chain(cut_run, before, after):
            keep = first < end
            row, first, end = row[keep], first[keep], end[keep]
            for s in range(0, len(row), _FOLD_BLOCK):
                sl = slice(s, s + _FOLD_BLOCK)
                hit = _piece_counts(row[sl], first[sl], end[sl], kind, r, c, h)
                flat = (row[sl][:, None] * ntiers + hit).ravel()
                crossed[k] |= np.bincount(flat, minlength=len(n_ranks) * ntiers).reshape(-1, ntiers) > 0
    return crossed, lg


def _runs(rows: np.ndarray, counts: np.ndarray, start: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Runs ``start[i] .. start[i] + counts[i] - 1`` of each row ``rows[i]``, as (row, run) arrays of at most
    ``_FOLD_BLOCK`` entries (the runs of one row may fill many)."""
    ends = np.cumsum(counts)
    for s in range(0, int(ends[-1]) if ends.size else 0, _FOLD_BLOCK):
        flat = np.arange(s, min(s + _FOLD_BLOCK, int(ends[-1])), dtype=np.int64)
        i = np.searchsorted(ends, flat, side="right")
        yield rows[i], start[i] + flat - (ends[i] - counts[i])


def _piece_counts(row: np.ndarray, a: np.ndarray, b: np.ndarray, kind: int, r_all: np.ndarray, c_all: np.ndarray,
                  h: int) -> np.ndarray:
    """The bound counts of the candidate pairs of pieces ``a <= j < b`` of one ``kind`` (:func:`_folded_crossings`:
    0 both ranks folded, 1 both after the fold, 2 one of each), shape (pieces, 1 + 4 (T - 1))."""
    r, c, a2 = r_all[row][:, None], c_all[row], a[:, None]

    def x_of(j: np.ndarray) -> np.ndarray:
        return j + r if kind == 1 else 2 * j + 1

    def y_of(j: np.ndarray) -> np.ndarray:
        return 2 * j + 2 * h + 1 if kind == 0 else j + h + r

    x0, y0 = x_of(a2), y_of(a2)
    cand = [a2]
    for i in range(c.shape[1]):
        ci = c[:, i:i + 1]
        for t in (1, 2):
            xm, ym = (x0 // ci + t) * ci, (y0 // ci + t) * ci  # the next multiples of c_i above x(a), y(a)
            cand.append(xm - r if kind == 1 else xm // 2)  # the first j with x(j) >= xm
            cand.append((ym - 2 * h) // 2 if kind == 0 else ym - h - r)  # the first j with y(j) >= ym
    j = np.concatenate(cand, axis=1)
    j = np.where((j >= a2) & (j < b[:, None]), j, a2)
    x, y = x_of(j), y_of(j)
    count = np.zeros(j.shape, dtype=np.int64)
    for i in range(c.shape[1]):
        count += x // c[:, i:i + 1] != y // c[:, i:i + 1]
    return count


def _step_time(pl: Placement, crossed: np.ndarray, m: np.ndarray) -> np.ndarray:
    """One step of every rank at once: the slowest of its pairs, ``max_t (alpha_t + m / B_t)`` over the tiers its
    pairs cross (``crossed``, :func:`_folded_step_tiers`)."""
    return np.max([np.where(crossed[i], pl.alpha[i] + m / pl.pair_bw(i), 0.0) for i in range(pl.ntiers)], axis=0)


def rhd_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Recursive halving/doubling across tiers, nearest partner first (Thakur et al. 2005).

    Step k (k = 0 .. lg p' - 1) exchanges with the rank 2^k away; the pair lies in the innermost tier
    t_k holding 2^(k+1) consecutive group ranks and every GPU sends at once (per-GPU B; one link on a full mesh,
    :meth:`~scalemodel.cost.placement.Placement.pair_bw`: each step has one partner). Halving
    sends S/2^(k+1):  RS = sum_k (alpha_tk + S/2^(k+1) (beta_tk + gamma)); AG the same without gamma;
    all-reduce (Rabenseifner) = RS + AG. Non-power-of-two p adds 2 (alpha_t + S beta_t) (+ S gamma) on the tier t
    of a 2-rank block (MPICH pairs group ranks 2i and 2i+1 for the fold; tier 0 only for unstrided groups).
    Partner order of Rabenseifner's all-reduce in MPICH (src/mpi/coll/allreduce/
    allreduce_intra_reduce_scatter_allgather.c: "recursive-halving ... beginning with processes that are
    distance 1 apart"): its reduce-scatter phase runs ``mask = 1, 2, .. p'/2`` with blocks S/2, S/4, ..,
    its all-gather phase ``mask = p'/2, .., 1`` with blocks S/p', .., S/2, the time reversal of the first:
    each step of the all-gather moves the bytes of one reduce-scatter step between the same partners.
    ``reducescatter`` and ``allgather`` here are those two phases alone (ZeRO-1/2's pair with ``rhd``,
    ``dp_comm.zero12_algorithm``), each carrying one of the two pre/post steps, so RS + AG = the all-reduce
    exactly. The stand-alone MPICH algorithms order their partners the other way round (:func:`rd_time`).
    Broadcast = binomial scatter (the same halving sweep, no gamma) + recursive-doubling all-gather
    (van de Geijn; 2 lg p alpha + 2(p-1)/p S beta); reduce is its mirror, reduce-scatter + binomial
    gather (Rabenseifner), + (p-1)/p S gamma.
    """
    p = pl.p
    L, Lmax = _log_steps(pl)
    pp = 2.0**L
    crossed = _folded_step_tiers(pl, Lmax)
    half = np.zeros_like(p)  # one halving (or doubling) sweep, no gamma
    for k in range(Lmax):
        active = k < L
        m = S / 2.0 ** (k + 1)  # each halving step moves half of the remaining vector
        half = half + np.where(active, _step_time(pl, crossed[k], m), 0.0)
    t2 = pl.tier_for_block(2.0)  # MPICH folds rank 2i into 2i+1: adjacent group ranks, on their own tier
    extra = np.where(pp < p, pl.alpha[t2] + S / pl.pair_bw(t2), 0.0)
    red = (pp - 1) / pp * S * gamma
    if op == "allreduce":
        t_all = 2 * half + 2 * extra + red + np.where(pp < p, S * gamma, 0.0)
    elif op == "reducescatter":
        t_all = half + extra + red + np.where(pp < p, S * gamma, 0.0)
    elif op == "allgather":
        t_all = half + extra
    elif op in ("broadcast", "reduce"):
        t_all = 2 * half + 2 * extra + (red if op == "reduce" else 0.0 * red)
    else:
        raise InputError(f"rhd does not model {op}", where="algorithm", allowed=allowed(op))
    t_all = _on_torus(op, "rhd", S, pl, gamma, t_all)  # broadcast / reduce: topology.torus_scatter_gather
    return np.where(p > 1, t_all, 0.0)


def rd_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Recursive doubling (all-reduce: lg p exchanges of the full S; all-gather: doubling with S/2^(lg p - k);
    reduce-scatter: recursive halving = same volume; all-to-all: Bruck, ceil(lg p) steps of S/2)
    (Thakur et al. 2005, Table 1). Step k crosses the tier of a 2^(k+1)-rank block, per-GPU bandwidth
    (one pair's: one link on a full mesh, :meth:`~scalemodel.cost.placement.Placement.pair_bw`).

    Partner orders of the stand-alone algorithms (Thakur et al. 2005 §4; MPICH src/mpi/coll/allgather/
    allgather_intra_recursive_doubling.c ``mask = 1 .. p/2``, reduce_scatter/
    reduce_scatter_intra_recursive_halving.c ``mask = p'/2 .. 1``): the all-gather exchanges with the rank 2^k
    away at step k, sending the S 2^k/p it has gathered, so its largest block (S/2) goes to the farthest partner;
    the reduce-scatter starts at distance p'/2 with S/2 ("the first p/2 processes send the second n/2 data to
    their counterparts in the other half") and halves both, step k on the tier of a p'/2^k-rank block with
    S/2^(k+1): again the largest block to the farthest partner. The two are each other's time reversal; the
    nearest-first order of Rabenseifner's all-reduce phases is ``rhd`` (:func:`rhd_time`)."""
    p = pl.p
    L, Lmax = _log_steps(pl)
    pp = 2.0**L
    if op == "alltoall":
        Lc = np.ceil(np.log2(np.maximum(p, 1.0)) - 1e-9)
        tot = np.zeros_like(p)
        for k in range(int(np.max(Lc)) if Lc.size else 0):
            t = pl.tier_for_block(np.minimum(2.0 ** (k + 1), p))
            tot = tot + np.where(k < Lc, pl.alpha[t] + (S / 2) / pl.pair_bw(t), 0.0)
        return np.where(p > 1, _on_torus(op, "rd", S, pl, gamma, tot), 0.0)  # topology.torus_bruck (tpu32)
    tot = np.zeros_like(p)
    for k in range(Lmax):
        active = k < L
        # step k pairs ranks 2^k apart (doubling), or p'/2^(k+1) apart for the halving reduce-scatter
        t = pl.tier_for_block(2.0 ** (L - k) if op == "reducescatter" else 2.0 ** (k + 1))
        if op == "allreduce":
            m = S
            g = S * gamma
        elif op == "allgather":
            m = S * 2.0**k / p  # doubling: block grows 1, 2, 4, ... shares of S/p
            g = 0.0 * m
        elif op == "reducescatter":
            m = S / 2.0 ** (k + 1)  # recursive halving, farthest partner first
            g = m * gamma
        else:
            raise InputError(f"rd does not model {op}", where="algorithm", allowed=allowed(op))
        tot = tot + np.where(active, pl.alpha[t] + m / pl.pair_bw(t) + g, 0.0)
    # non-power-of-two p: the p - 2^L extra ranks fold into partners and get the result back, over the tier
    # that holds the whole group (the extra ranks may sit in another domain)
    te = pl.tier_for_block(p)
    extra = np.where(pp < p, 2 * (pl.alpha[te] + S / pl.pair_bw(te)) + (S * gamma if op == "allreduce" else 0.0),
                     0.0)
    if op != "allreduce":
        extra = extra / 2
    return np.where(p > 1, _on_torus(op, "rd", S, pl, gamma, tot + extra), 0.0)


def direct_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Direct (one-shot) algorithms: every rank exchanges with every peer at once.

    Bytes to peers in tier i: ``(c_i - c_(i-1)) m`` with m = S (one-shot all-reduce: push the whole
    buffer to every peer, reduce locally), S/p (all-gather, reduce-scatter, all-to-all) or S
    (send/recv to one neighbour). Tier 0 has its own port; all outer tiers share the NIC, so
    ``T_bw = max(bytes_0 / B_0, sum_(i>=1) bytes_i / B_i)``. Latency: one round, alpha of the outermost
    tier crossed, for the one-shot collectives; all-to-all is pairwise exchange (Thakur et al. 2005):
    ``sum_i (c_i - c_(i-1)) alpha_i`` (p-1 rounds). Send/recv: ``max_i alpha_i + S / B_i`` (one pair's
    bandwidth, :meth:`~scalemodel.cost.placement.Placement.pair_bw`: one link on a full mesh) over the
    tiers the ring of neighbours crosses. Across a rail-optimised tier the share of peers on another rail
    (:func:`scalemodel.cost.topology.pxn_fraction`) first crosses NVLink (PXN): ``+ share x bytes_i`` on the
    NVLink port and ``+ alpha_0`` per such peer (docs/model.md#rail).
    All-to-all on a group that fills a torus tier or whole dimensions of it: bisection-limited
    (:func:`scalemodel.cost.topology.torus_alltoall`, docs/model.md#torus).
    """
    p = pl.p
    if op == "sendrecv":
        worst = np.zeros_like(p)
        for i in range(pl.ntiers):
            crossed = (pl.domains(i - 1) - pl.domains(i)) > 0.5
            worst = np.maximum(worst, np.where(crossed, pl.alpha[i] + S / pl.pair_bw(i), 0.0))
        return np.where(p > 1, worst, 0.0)
    if op == "allreduce":
        m = S + 0 * p
    elif op in ("allgather", "reducescatter", "alltoall"):
        m = S / p
    else:
        raise InputError(f"direct does not model {op}", where="algorithm", allowed=allowed(op))
    port0 = np.zeros_like(p)
    nic = np.zeros_like(p)
    tiers, lat, lat_pairwise = _direct_peers(pl)
    for i, peers, pxn in tiers:
        if i == 0:
            port0 = port0 + peers * m / pl.bw[0]
        else:
            nic = nic + peers * m / pl.bw[i]
            port0 = port0 + pxn * peers * m / pl.bw[0]
    t = np.maximum(port0, nic)
    if op == "alltoall":
        t = t + lat_pairwise
    else:
        t = t + lat
    if op in ("allreduce", "reducescatter"):
        t = t + (p - 1) * m * gamma
    t = _on_torus(op, "direct", S, pl, gamma, t)  # a (sub-)torus group: bisection- or injection-limited
    return np.where(p > 1, t, 0.0)


def _direct_peers(pl: Placement) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """The size-independent figures of :func:`direct_time` on a placed group: per tier (its index, the peers in it
    ``c_i - c_(i-1)`` (``c_0 - 1`` on tier 0), the other-rail share :func:`topology.pxn_fraction` (0 on tier 0)), the
    one-round latency and the pairwise exchange's, as the loop over the tiers computed them. Computed once per
    placement (:attr:`Placement.memo`): every message size priced on the group shares them (evalspeed41)."""
    hit = pl.memo.get("direct_peers")
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    p = pl.p
    lat = np.zeros_like(p)
    lat_pairwise = np.zeros_like(p)
    tiers: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i in range(pl.ntiers):
        peers = pl.c[i] - pl.c_prev(i) if i > 0 else pl.c[0] - 1.0
        crossed = peers > 0.5
        pxn = np.zeros(())
        if i > 0:
            pxn = topology.pxn_fraction(pl, i)  # rail-optimised: other-rail peers go over NVLink first
            lat_pairwise = lat_pairwise + pxn * peers * pl.alpha[0]
            lat = np.where(crossed & (pxn > 0), np.maximum(lat, pl.alpha[i] + pl.alpha[0]), lat)
        lat = np.where(crossed, np.maximum(lat, pl.alpha[i]), lat)
        lat_pairwise = lat_pairwise + peers * pl.alpha[i]
        tiers.append((i, peers, pxn))
    pl.memo["direct_peers"] = out = (tiers, lat, lat_pairwise)
    return out


def hierarchical_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """Multi-level decomposition over the tiers (BlueConnect, Cho et al. 2019; 2D-torus, Mikami et al. 2018;
    Horovod hierarchical): reduce-scatter inside tier 0, then inside each outer tier on the shrinking
    shard, all-reduce at the outermost level, all-gather back down. With m_i = S / c_(i-1):

    ``T_AR = sum_i [2 (ceil(p_i) - 1) alpha_i + 2 (p_i - 1)/p_i m_i / B_i + (p_i - 1)/p_i m_i gamma]``

    (p_i = c_i / c_(i-1) may be fractional where a group fills its outer domain unevenly; its ring still has
    ceil(p_i) sub-groups, so the hop count is whole, while the bytes keep the mean share.)

    where a level whose tier declares in-network reduction (NVLS/SHARP) may instead cost
    ``2 alpha_i + m_i / (INR_EFFICIENCY B_i)`` (the cheaper is taken; nccl#1242, tuning.cc NVLS eff).
    Reduce-scatter / all-gather: half of it (one sweep, no in-network shortcut).
    With one level (everything inside one tier, no INR) this is exactly the flat ring.
    """
    p = pl.p
    tot = np.zeros_like(p)
    for i in range(pl.ntiers):
        pi = pl.level(i)
        m = S / pl.c_prev(i)
        frac = (pi - 1) / pi
        # A ring over k sub-groups takes k - 1 steps: an uneven level (49 ranks over domains of 32: 1.53) still
        # has 2 sub-groups and one hop on its critical path, not 0.53 of one (CI's test_coll34 draw, p 49)
        steps = np.ceil(pi - 1e-9) - 1
        if op == "allreduce":
            ring = 2 * steps * pl.alpha[i] + 2 * frac * m / pl.bw[i] + frac * m * gamma
            if pl.inr[i]:
                inr = 2 * pl.alpha[i] + m / (INR_EFFICIENCY * pl.bw[i]) + frac * m * gamma
                ring = np.minimum(ring, inr)
        elif op in ("reducescatter", "allgather"):
            ring = steps * pl.alpha[i] + frac * m / pl.bw[i]
            if op == "reducescatter":
                ring = ring + frac * m * gamma
        else:
            raise InputError(f"hierarchical does not model {op}", where="algorithm", allowed=allowed(op))
        tot = tot + np.where(pi > 1 + 1e-9, ring, 0.0)
    tot = _on_torus(op, "hierarchical", S, pl, gamma, tot)  # a torus group: Mikami's dimension-ordered rings
    return np.where(p > 1, tot, 0.0)


ALGO_FUNCS: dict[str, Callable[[str, np.ndarray, Placement, float], np.ndarray]] = {
    "ring": ring_time, "tree": tree_time, "rhd": rhd_time, "rd": rd_time,
    "direct": direct_time, "hierarchical": hierarchical_time,
}


def algorithm_time(op: str, algorithm: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> np.ndarray:
    """The bare alpha-beta model of one named algorithm on a placed group (no protocol lines, no base latency),
    no faster than a torus group's injection floor (:func:`scalemodel.cost.topology.floored`)."""
    if algorithm not in APPLICABLE[op]:
        raise InputError(f"algorithm {algorithm!r} does not apply to {op}", where="algorithm", allowed=allowed(op))
    return topology.floored(op, S, pl, ALGO_FUNCS[algorithm](op, S, pl, gamma))

