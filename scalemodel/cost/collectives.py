"""Alpha-beta(-gamma) cost models of collective operations over a multi-tier network.

Notation (all SI): ``S`` bytes (the nccl-tests "size": the full buffer for all-reduce, broadcast and
reduce; the FULL gathered buffer for all-gather and reduce-scatter, each rank holding S/p; the total
sent per rank for all-to-all), ``p`` ranks, ``alpha`` seconds per message (hop), ``beta = 1/B``
seconds per byte, ``gamma`` seconds per byte of reduction arithmetic.

Two layers:

1. Textbook single-tier closed forms (``ring_allreduce``, ``tree_allreduce``, ``rhd_allreduce``, ...):
   uniform links, exactly what a step-by-step simulation of the algorithm gives
   (tests/test_collective_sim.py checks that).
2. The multi-tier models (``ring_time``, ``tree_time``, ``rhd_time``, ``rd_time``, ``direct_time``,
   ``hierarchical_time``) that map a group of p ranks placed ``stride`` GPUs apart onto the tiers of a
   :class:`~scalemodel.cost.network.Network` (:func:`raw_algorithm_time` gives them bare).
3. NCCL's own model on top (:func:`algorithm_time`, :func:`collective_time`, :func:`best_algorithm`;
   constants from NCCL 2.30.7 ``src/graph/tuning.cc``/``enqueue.cc``, docs/model.md#nccl): per
   (algorithm, protocol) base latencies and per-hop latency increments, the minimum over the LL, LL128
   and Simple lines, the runtime channel/thread reduction that leaves small messages unable to fill the
   pipe (:func:`channel_ramp_size`), NCCL's Tree (intra-node chain, double binary tree across nodes,
   treeCorrectionFactor) and the Ring Simple "plateau". ``auto`` on GPU clusters picks only among the
   algorithms NCCL implements (``NCCL_FAMILY``); the others stay selectable by name.

Placement (``_Placement``): a group of p ranks with stride s occupies GPUs 0, s, 2s, ...; inside one
domain of tier i (``span_i`` consecutive GPUs) sit ``c_i = clip(span_i // s, 1, p)`` of its ranks
(the outermost tier holds all p). The group therefore touches ``n_i = p / c_i`` domains of tier i, and
level i of a hierarchical decomposition has ``p_i = c_i / c_(i-1)`` members. A flat ring over the
group in rank order has ``n_(i-1) - n_i`` edges whose outermost crossed tier is i.

Per-tier bandwidth is ``Tier.effective_bandwidth`` (line rate x efficiency / oversubscription), per
GPU per direction. Algorithms whose traffic leaves a node only on a few edges (flat ring and tree:
NCCL stripes its channels over all NICs of the node) get ``c_0`` times the per-GPU bandwidth on
outer tiers (docs/model.md#placement: busbw ~ min(NVLink busbw, NICs x B_nic,eff)); algorithms in which
every GPU talks across the tier at once (RHD, RD, direct, hierarchical levels) get the per-GPU rate.

Sources: Thakur, Rabenseifner & Gropp, IJHPCA 19(1) 2005 (ring, RHD, RD, pairwise, Bruck);
Patarasuk & Yuan, JPDC 69(2) 2009 (ring bandwidth optimality); Sanders, Speck & Träff, Parallel
Computing 35(12) 2009 (two-tree); Cho et al., BlueConnect, MLSys 2019 and Mikami et al.,
arXiv:1811.05233 (hierarchical / 2D-torus); NVIDIA/nccl v2.30.7 src/graph/tuning.cc (protocol
constants, base and per-hop latencies, ring hop counts, NVLS efficiency). See
docs/model.md#collectives and docs/model.md#nccl.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from scalemodel.cost.network import Network, Tier
from scalemodel.errors import InputError

OPS: tuple[str, ...] = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "reduce", "sendrecv")
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "rhd", "rd", "direct", "hierarchical")

#: Which algorithms model each operation (``rhd`` for broadcast/reduce is scatter + all-gather (van de
#: Geijn) / reduce-scatter + gather (Rabenseifner); ``rd`` for all-gather is recursive doubling, for
#: reduce-scatter recursive halving, for all-to-all Bruck; ``direct`` for all-to-all is pairwise exchange).
APPLICABLE: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "rhd", "rd", "direct", "hierarchical"),
    "reducescatter": ("ring", "rd", "direct", "hierarchical"),
    "allgather": ("ring", "rd", "direct", "hierarchical"),
    "alltoall": ("direct", "rd"),
    "broadcast": ("ring", "tree", "rhd"),
    "reduce": ("ring", "tree", "rhd"),
    "sendrecv": ("direct",),
}

# ---- NCCL model constants (NVIDIA/nccl v2.30.7, commit 5067397; docs/model.md#nccl) ----------
#: The NCCL release the constants below are read from (docs/model.md#nccl: a model should record
#: which NCCL version its constants come from).
NCCL_VERSION = "2.30.7"
PROTOCOLS: tuple[str, ...] = ("ll", "ll128", "simple")
_PI = {"ll": 0, "ll128": 1, "simple": 2}
#: baseLatencies[algorithm][protocol] in seconds, order LL / LL128 / Simple (tuning.cc).
NCCL_BASE_LATENCY: dict[str, tuple[float, float, float]] = {
    "ring": (6.6e-6, 14.0e-6, 8.4e-6),
    "tree": (6.8e-6, 14.0e-6, 8.4e-6),
}
#: Per-collective base latency of the Ring row, also used for the non-NCCL algorithms (rhd, rd, direct,
#: hierarchical), which are charged the same launch/base cost as NCCL's ring (modelling assumption).
BASE_LATENCY: dict[str, float] = dict(zip(PROTOCOLS, NCCL_BASE_LATENCY["ring"], strict=True))
#: hwLatencies[link][algorithm][protocol] in seconds, LL / LL128 / Simple (tuning.cc).
NCCL_HW_LATENCY: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"ring": (0.6e-6, 1.9e-6, 3.4e-6), "tree": (0.6e-6, 1.25e-6, 4.0e-6)},
    "pci": {"ring": (1.0e-6, 2.5e-6, 5.7e-6), "tree": (1.0e-6, 1.9e-6, 4.0e-6)},
    "net": {"ring": (2.7e-6, 4.0e-6, 14.0e-6), "tree": (5.0e-6, 8.5e-6, 14.0e-6)},
}
#: Ring bandwidth per protocol relative to Simple (tuning.cc): LL moves 8 B of data per
#: 16 B line (x0.5); LL128 x0.92 (comment "120/128"); Simple 1. NCCL's absolute caps (llMaxBw,
#: perChMaxRingLL128Bw) depend on the GPU generation, which a Network does not carry: not applied.
PROTOCOL_BW: dict[str, float] = {"ll": 0.5, "ll128": 0.92, "simple": 1.0}
#: Tree all-reduce bandwidth factors (tuning.cc): x0.92 for every protocol, then LL /3.8 and LL128
#: x7/9 on one node, x120/128 across nodes. The "pure TREE pattern" x0.85 depends on NCCL's topology
#: search and is not applied.
TREE_AR_BW = 0.92
TREE_LL_DIV = 3.8
TREE_LL128_ONE_NODE = 7.0 / 9.0
TREE_LL128_MULTI_NODE = 120.0 / 128.0
#: Tree algBw = busBw x 0.5 (per-rank traffic ~2S of a double binary tree; nccl#457).
TREE_ALGBW = 0.5
#: treeCorrectionFactor[protocol][floor(log2(S/64))], S = 64 B .. 256 MiB (tuning.cc). NCCL uses
#: it as a step function and only for index <= 22; here it is interpolated linearly in log2 S between
#: bucket starts and is 1 from 512 MiB on, which keeps t(S) monotone (a step up in the factor would make
#: a larger message faster than a smaller one).
TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "ll": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "ll128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
#: Ring + Simple + AllReduce across nodes: latency x1.4 once S / (nChannels x nRanks) >= 64 B (the
#: "plateau", tuning.cc; x1.9 before SM80, not applied: every built-in GPU is SM80 or newer).
RING_PLATEAU = 1.4
RING_PLATEAU_BYTES = 64.0
#: Runtime channel/thread reduction (enqueue.cc): while S < nc x nt x threshold NCCL drops
#: channels down to 1, then halves threads while nt % 128 == 0. Threads per CTA (device.h): LL 512,
#: LL128 640, Simple 512; the halving stops at 64 (512 -> 64) and at 320 for LL128 (320 % 128 != 0).
#: Thresholds in bytes per thread (comm.h): LL 8, LL128 8, Simple 64; Ring LL x nRanks.
NCCL_THREADS: dict[str, float] = {"ll": 512.0, "ll128": 640.0, "simple": 512.0}
NCCL_MIN_THREADS: dict[str, float] = {"ll": 64.0, "ll128": 320.0, "simple": 64.0}
NCCL_THREAD_THRESHOLD: dict[str, float] = {"ll": 8.0, "ll128": 8.0, "simple": 64.0}
#: Bandwidth one channel (one CTA at full threads) moves: NCCL's per-link NVLink bandwidth used by its
#: topology search, 20.0 GB/s for SM70/SM80 (20.6 SM90; topo.h); busBw = nChannels x bw per
#: channel (tuning.cc). Modelling assumption: one channel carries about one link's worth on every tier,
#: so a group whose bottleneck busbw is B runs clip(B / CHANNEL_BW, 1, MAXCHANNELS) channels when full.
CHANNEL_BW = 20.0e9
MAX_CHANNELS = 64.0  # MAXCHANNELS (device.h)
#: Link classes that use NCCL's NVLink row / PCI row; every other tier uses the NET row.
#: LL128 is off on PCIe and on TCP/Ethernet paths (tuning.cc).
NVLINK_CLASS = frozenset({"nvlink", "nvswitch", "xgmi", "infinity-fabric", "ici", "c2c"})
PCI_CLASS = frozenset({"pcie", "pci"})
INTRA_PROTOCOLS = NVLINK_CLASS | PCI_CLASS
NO_LL128_PROTOCOLS = frozenset({"pcie", "tcp", "ethernet"})
#: In-network reduction (NVLS / SHARP) efficiency: NCCL's NVLS "eff" for Hopper (tuning.cc).
INR_EFFICIENCY = 0.85

#: Algorithm families for ``auto``. "nccl": only what NCCL implements (docs/model.md#nccl): all-reduce Ring and Tree,
#: plus NVLS/CollNet (modelled by ``hierarchical`` with an in-network-reduction level) where a tier the
#: group spans declares in-network reduction; AG/RS/broadcast/reduce Ring (PAT needs 1 GPU per node and is
#: not modelled); all-to-all and send/recv are NCCL's grouped point-to-point (``direct``). "all": every
#: applicable algorithm (one-shot ``direct`` only inside the innermost tier). "auto" = "nccl" unless a
#: tier's protocol is "ici" (TPU pods do not run NCCL), then "all".
FAMILIES: tuple[str, ...] = ("auto", "nccl", "all")
NCCL_FAMILY: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "hierarchical"),
    "reducescatter": ("ring",),
    "allgather": ("ring",),
    "alltoall": ("direct",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "sendrecv": ("direct",),
}

_SMALL = 1e-300


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------

def busbw_factor(op: str, p: np.ndarray | float) -> np.ndarray:
    """nccl-tests bus-bandwidth factor (doc/PERFORMANCE.md): 2(n-1)/n all-reduce; (n-1)/n
    reduce-scatter, all-gather, all-to-all; 1 broadcast, reduce, send/recv. n = 1 gives 1."""
    _check_op(op)
    p = np.asarray(p, dtype=float)
    if op == "allreduce":
        f = 2.0 * (p - 1.0) / p
    elif op in ("reducescatter", "allgather", "alltoall"):
        f = (p - 1.0) / p
    else:
        f = np.ones_like(p)
    return np.where(p <= 1, 1.0, f)


def _check_op(op: str) -> None:
    if op not in OPS:
        raise InputError(f"unknown collective {op!r}", where="op", allowed="one of: " + ", ".join(OPS))


def _arr(x: object, name: str, *, minimum: float = 0.0) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} must be finite", where=name, allowed="finite numbers")
    if np.any(a < minimum):
        raise InputError(f"{name} must be >= {minimum:g}", where=name, allowed=f"values >= {minimum:g}")
    return a


def _log2_floor(p: np.ndarray) -> np.ndarray:
    """floor(log2 p) for p >= 1, robust to float rounding (log2(8) may be 2.9999999)."""
    return np.floor(np.log2(np.maximum(p, 1.0)) + 1e-9)


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
    L = _log2_floor(p)
    pp = 2.0**L
    t = 2 * L * alpha + 2 * (pp - 1) / pp * S * beta + (pp - 1) / pp * S * gamma
    t = t + np.where(pp < p, 2 * (alpha + S * beta) + S * gamma, 0.0)
    return np.where(p > 1, t, 0.0)


def rd_allreduce(S, p, alpha, beta, gamma=0.0):  # type: ignore[no-untyped-def]
    """Recursive doubling: lg p exchanges of the full vector, ``T = lg p (alpha + S beta + S gamma)``
    (Thakur et al. 2005); non-power-of-two p adds the same pre/post step as :func:`rhd_allreduce`."""
    p = np.asarray(p, dtype=float)
    L = _log2_floor(p)
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
    NVIDIA/nccl#457). With ``chunks=None`` k is the continuous optimum
    ``k* = sqrt((2h-1) 2 S beta / alpha)`` (>= 1), giving
    ``T = 2 S beta + (2h-1) alpha + 2 sqrt((2h-1) alpha 2 S beta)``.
    """
    p = np.asarray(p, dtype=float)
    h = _log2_floor(p)
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

@dataclass(frozen=True)
class _Placement:
    p: np.ndarray                # ranks (float array)
    c: list[np.ndarray]          # group ranks inside one domain of tier i (cumulative), c[-1] == p
    alpha: np.ndarray            # per-tier hop latency (s), shape (T,)
    bw: np.ndarray               # per-tier effective bandwidth per GPU (B/s), shape (T,)
    inr: tuple[bool, ...]        # in-network reduction per tier

    @property
    def ntiers(self) -> int:
        return len(self.c)

    def c_prev(self, i: int) -> np.ndarray:
        return np.ones_like(self.p) if i == 0 else self.c[i - 1]

    def level(self, i: int) -> np.ndarray:
        """p_i: members of level i of a hierarchical decomposition (>= 1)."""
        return self.c[i] / self.c_prev(i)

    def domains(self, i: int) -> np.ndarray:
        """n_i: domains of tier i the group touches; n_(-1) = p."""
        return self.p if i < 0 else self.p / self.c[i]

    def tier_for_block(self, ranks: np.ndarray | float) -> np.ndarray:
        """Index of the innermost tier whose domain holds a block of ``ranks`` consecutive group ranks."""
        idx = np.zeros(np.broadcast(self.p, np.asarray(ranks)).shape, dtype=int)
        for i in range(self.ntiers - 1):
            idx = idx + (self.c[i] < np.asarray(ranks) - 1e-9)
        return idx

    def agg(self, i: int) -> np.ndarray:
        """Parallel streams a flat ring/tree gets on tier i: 1 inside tier 0, else the group ranks per
        tier-0 domain (NCCL stripes channels over the node's NICs, nccl#1576)."""
        return np.ones_like(self.p) if i == 0 else self.c[0]


def place(p: np.ndarray, stride: np.ndarray | float, network: Network) -> _Placement:
    """Map p ranks placed ``stride`` GPUs apart onto ``network``'s tiers (see module docstring)."""
    tiers = network.tiers
    if not tiers:
        raise InputError("the network has no tiers", where="network.tiers", allowed="at least one tier")
    for t in tiers:
        if not (t.bandwidth > 0 and t.efficiency > 0 and t.oversubscription >= 1 and np.isfinite(t.bandwidth)):
            raise InputError(f"tier {t.name!r} needs bandwidth > 0, efficiency > 0, oversubscription >= 1",
                             where=f"tiers.{t.name}", allowed="positive finite numbers")
        if not (t.latency >= 0 and np.isfinite(t.latency)):
            raise InputError(f"tier {t.name!r} has a negative or non-finite latency",
                             where=f"tiers.{t.name}.latency", allowed="latency >= 0")
    p = np.asarray(p, dtype=float)
    s = np.asarray(stride, dtype=float)
    cs: list[np.ndarray] = []
    prev = np.ones(np.broadcast(p, s).shape)
    for i, t in enumerate(tiers):
        if i == len(tiers) - 1:
            c = p + 0 * prev
        else:
            c = np.clip(np.floor(t.span / s + 1e-9), 1.0, p)
            c = np.minimum(np.maximum(c, prev), p)
        cs.append(c)
        prev = c
    P = p + 0 * prev
    return _Placement(P, cs, np.array([t.latency for t in tiers]), np.array([t.effective_bandwidth for t in tiers]),
                      tuple(bool(t.in_network_reduction) for t in tiers))


# ------------------------------------------------------------------------------------------------
# 3. Multi-tier algorithms. Each takes (op, S, placement, gamma) and returns seconds.
# ------------------------------------------------------------------------------------------------

def _steps_factor(op: str) -> float:
    return 2.0 if op == "allreduce" else 1.0


def ring_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Flat ring over the group in rank order (NCCL's Ring; latency composition of tuning.cc).

    All-reduce / reduce-scatter / all-gather:
    ``T = sum_i f (n_(i-1) - n_i) alpha_i + f (p-1)/p S / min_i(a_i B_i) [+ (p-1)/p S gamma]``, f = 2 for
    all-reduce else 1; f (n_(i-1) - n_i) is the number of ring steps whose hop crosses tier i (NCCL:
    nInter = 2(N-1) of 2(n-1) steps), a_i the parallel streams on tier i (``_Placement.agg``).
    Broadcast / reduce: the pipelined chain of :func:`pipelined_chain_broadcast` with path latency
    ``sum_i (n_(i-1) - n_i) alpha_i`` and the bottleneck link.
    """
    p = pl.p
    lat = np.zeros_like(p)
    bmin = np.full_like(p, np.inf)
    alpha_b = np.zeros_like(p)
    hops = np.zeros_like(p)
    V = np.zeros_like(p)
    for i in range(pl.ntiers):
        h = pl.domains(i - 1) - pl.domains(i)
        crossed = h > 0.5
        b = pl.agg(i) * pl.bw[i]
        lat = lat + h * pl.alpha[i]
        hops = hops + h
        V = V + h * S / b
        newmin = crossed & (b < bmin)
        alpha_b = np.where(newmin, pl.alpha[i], alpha_b)
        bmin = np.where(newmin, b, bmin)
    bmin = np.where(np.isfinite(bmin), bmin, 1.0)
    if op in ("broadcast", "reduce"):
        # chain of p-1 hops: lat and V as computed (f = 1); bottleneck per-chunk time u = S / bmin
        u = S / bmin
        t = _pipeline_opt(lat, V, u, alpha_b)
        if op == "reduce":
            t = t + S * gamma
        return np.where(p > 1, t, 0.0)
    f = _steps_factor(op)
    t = f * lat + f * (p - 1) / p * S / bmin
    if op in ("allreduce", "reducescatter"):
        t = t + (p - 1) / p * S * gamma
    return np.where(p > 1, t, 0.0)


def tree_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Pipelined double binary tree (all-reduce) or two-tree broadcast/reduce across the tiers.

    Level i of the group (p_i members) adds ``d_i = max(1, floor(lg p_i))`` tree levels (0 if p_i = 1),
    whose hops cost alpha_i and run at a_i B_i / 4 per link (all-reduce: 4 streams per rank, chunk
    S/(2k)) or a_i B_i / 2 (broadcast/reduce: 2 streams). With D = number of hop traversals
    (2 sum d_i for all-reduce, sum d_i otherwise):
    ``T(k) = sum_i D_i (alpha_i + x_i / k) + (k-1)(alpha_b + x_b / k)``, x_i = 2S/(a_i B_i) (all-reduce) or
    S/(a_i B_i), b the slowest tier, minimised over k >= 1 (:func:`tree_allreduce`; Sanders et al. 2009).
    """
    p = pl.p
    A = np.zeros_like(p)
    V = np.zeros_like(p)
    u = np.zeros_like(p)
    alpha_b = np.zeros_like(p)
    bmin = np.full_like(p, np.inf)
    mult = 2.0 if op == "allreduce" else 1.0
    for i in range(pl.ntiers):
        pi = pl.level(i)
        d = np.where(pi > 1 + 1e-9, np.maximum(1.0, _log2_floor(pi)), 0.0)
        b = pl.agg(i) * pl.bw[i]
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
    return np.where(p > 1, t, 0.0)


def _log_steps(pl: _Placement) -> tuple[np.ndarray, int]:
    L = _log2_floor(pl.p)
    return L, int(np.max(L)) if L.size else 0


def rhd_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Recursive halving/doubling across tiers, nearest partner first (Thakur et al. 2005).

    Step k (k = 0 .. lg p' - 1) exchanges with the rank 2^k away; the pair lies in the innermost tier
    t_k holding 2^(k+1) consecutive group ranks and every GPU sends at once (per-GPU B). Halving
    sends S/2^(k+1):  RS = sum_k (alpha_tk + S/2^(k+1) (beta_tk + gamma)); AG the same without gamma;
    all-reduce (Rabenseifner) = RS + AG. Non-power-of-two p adds 2 (alpha_0 + S beta_0) (+ S gamma).
    Broadcast = binomial scatter (the same halving sweep, no gamma) + recursive-doubling all-gather
    (van de Geijn; 2 lg p alpha + 2(p-1)/p S beta); reduce is its mirror, reduce-scatter + binomial
    gather (Rabenseifner), + (p-1)/p S gamma.
    """
    p = pl.p
    L, Lmax = _log_steps(pl)
    pp = 2.0**L
    half = np.zeros_like(p)  # one halving (or doubling) sweep, no gamma
    for k in range(Lmax):
        active = k < L
        t = pl.tier_for_block(2.0 ** (k + 1))
        m = S / 2.0 ** (k + 1)  # each halving step moves half of the remaining vector
        half = half + np.where(active, pl.alpha[t] + m / pl.bw[t], 0.0)
    extra = np.where(pp < p, pl.alpha[0] + S / pl.bw[0], 0.0)
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
        raise InputError(f"rhd does not model {op}", where="algorithm", allowed=_allowed(op))
    return np.where(p > 1, t_all, 0.0)


def rd_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Recursive doubling (all-reduce: lg p exchanges of the full S; all-gather: doubling with S/2^(lg p - k);
    reduce-scatter: recursive halving = same volume; all-to-all: Bruck, ceil(lg p) steps of S/2)
    (Thakur et al. 2005, Table 1). Step k crosses the tier of a 2^(k+1)-rank block, per-GPU bandwidth."""
    p = pl.p
    L, Lmax = _log_steps(pl)
    pp = 2.0**L
    if op == "alltoall":
        Lc = np.ceil(np.log2(np.maximum(p, 1.0)) - 1e-9)
        tot = np.zeros_like(p)
        for k in range(int(np.max(Lc)) if Lc.size else 0):
            t = pl.tier_for_block(np.minimum(2.0 ** (k + 1), p))
            tot = tot + np.where(k < Lc, pl.alpha[t] + (S / 2) / pl.bw[t], 0.0)
        return np.where(p > 1, tot, 0.0)
    tot = np.zeros_like(p)
    for k in range(Lmax):
        active = k < L
        t = pl.tier_for_block(2.0 ** (k + 1))
        if op == "allreduce":
            m = S
            g = S * gamma
        elif op == "allgather":
            m = S * 2.0**k / p  # doubling: block grows 1, 2, 4, ... shares of S/p
            g = 0.0 * m
        elif op == "reducescatter":
            m = S / 2.0 ** (k + 1)  # recursive halving
            g = m * gamma
        else:
            raise InputError(f"rd does not model {op}", where="algorithm", allowed=_allowed(op))
        tot = tot + np.where(active, pl.alpha[t] + m / pl.bw[t] + g, 0.0)
    extra = np.where(pp < p, 2 * (pl.alpha[0] + S / pl.bw[0]) + (S * gamma if op == "allreduce" else 0.0), 0.0)
    if op != "allreduce":
        extra = extra / 2
    return np.where(p > 1, tot + extra, 0.0)


def direct_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Direct (one-shot) algorithms: every rank exchanges with every peer at once.

    Bytes to peers in tier i: ``(c_i - c_(i-1)) m`` with m = S (one-shot all-reduce: push the whole
    buffer to every peer, reduce locally), S/p (all-gather, reduce-scatter, all-to-all) or S
    (send/recv to one neighbour). Tier 0 has its own port; all outer tiers share the NIC, so
    ``T_bw = max(bytes_0 / B_0, sum_(i>=1) bytes_i / B_i)``. Latency: one round, alpha of the outermost
    tier crossed, for the one-shot collectives; all-to-all is pairwise exchange (Thakur et al. 2005):
    ``sum_i (c_i - c_(i-1)) alpha_i`` (p-1 rounds). Send/recv: ``max_i alpha_i + S / B_i`` over the
    tiers the ring of neighbours crosses.
    """
    p = pl.p
    if op == "sendrecv":
        worst = np.zeros_like(p)
        for i in range(pl.ntiers):
            crossed = (pl.domains(i - 1) - pl.domains(i)) > 0.5
            worst = np.maximum(worst, np.where(crossed, pl.alpha[i] + S / pl.bw[i], 0.0))
        return np.where(p > 1, worst, 0.0)
    if op == "allreduce":
        m = S + 0 * p
    elif op in ("allgather", "reducescatter", "alltoall"):
        m = S / p
    else:
        raise InputError(f"direct does not model {op}", where="algorithm", allowed=_allowed(op))
    port0 = np.zeros_like(p)
    nic = np.zeros_like(p)
    lat = np.zeros_like(p)
    lat_pairwise = np.zeros_like(p)
    for i in range(pl.ntiers):
        peers = pl.c[i] - pl.c_prev(i) if i > 0 else pl.c[0] - 1.0
        crossed = peers > 0.5
        if i == 0:
            port0 = peers * m / pl.bw[0]
        else:
            nic = nic + peers * m / pl.bw[i]
        lat = np.where(crossed, np.maximum(lat, pl.alpha[i]), lat)
        lat_pairwise = lat_pairwise + peers * pl.alpha[i]
    t = np.maximum(port0, nic)
    if op == "alltoall":
        t = t + lat_pairwise
    else:
        t = t + lat
    if op in ("allreduce", "reducescatter"):
        t = t + (p - 1) * m * gamma
    return np.where(p > 1, t, 0.0)


def hierarchical_time(op: str, S: np.ndarray, pl: _Placement, gamma: float = 0.0) -> np.ndarray:
    """Multi-level decomposition over the tiers (BlueConnect, Cho et al. 2019; 2D-torus, Mikami et al. 2018;
    Horovod hierarchical): reduce-scatter inside tier 0, then inside each outer tier on the shrinking
    shard, all-reduce at the outermost level, all-gather back down. With m_i = S / c_(i-1):

    ``T_AR = sum_i [2 (p_i - 1) alpha_i + 2 (p_i - 1)/p_i m_i / B_i + (p_i - 1)/p_i m_i gamma]``

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
        if op == "allreduce":
            ring = 2 * (pi - 1) * pl.alpha[i] + 2 * frac * m / pl.bw[i] + frac * m * gamma
            if pl.inr[i]:
                inr = 2 * pl.alpha[i] + m / (INR_EFFICIENCY * pl.bw[i]) + frac * m * gamma
                ring = np.minimum(ring, inr)
        elif op in ("reducescatter", "allgather"):
            ring = (pi - 1) * pl.alpha[i] + frac * m / pl.bw[i]
            if op == "reducescatter":
                ring = ring + frac * m * gamma
        else:
            raise InputError(f"hierarchical does not model {op}", where="algorithm", allowed=_allowed(op))
        tot = tot + np.where(pi > 1 + 1e-9, ring, 0.0)
    return np.where(p > 1, tot, 0.0)


_ALGO_FUNCS: dict[str, Callable[[str, np.ndarray, _Placement, float], np.ndarray]] = {
    "ring": ring_time, "tree": tree_time, "rhd": rhd_time, "rd": rd_time,
    "direct": direct_time, "hierarchical": hierarchical_time,
}


def _allowed(op: str) -> str:
    return "for " + op + ": " + ", ".join((*APPLICABLE[op], "auto"))


# ------------------------------------------------------------------------------------------------
# 4. NCCL's protocols, channels and corrections, and the public entry points
# ------------------------------------------------------------------------------------------------

def _link_class(tier: Tier, i: int) -> str:
    """NCCL's link row for a tier: "nvlink" (NVLink/NVSwitch/xGMI/ICI/C2C, or an unlabelled innermost
    tier), "pci" (PCIe) or "net" (everything else: RDMA, TCP, Ethernet)."""
    proto = tier.protocol.lower()
    if proto in NVLINK_CLASS or (i == 0 and not proto):
        return "nvlink"
    if proto in PCI_CLASS:
        return "pci"
    return "net"


def hop_latency(tier: Tier, i: int, algorithm: str, proto: str) -> float:
    """Per-hop latency of ``algorithm`` ("ring" or "tree") with protocol ``proto`` on tier ``i``.

    ``Tier.latency`` is read as the measured per-hop latency of the smallest messages, which NCCL sends
    with Ring LL (nccl-tests#123: 8x A100 ring, 10 us at n = 2 to 33.7 us at n = 8, i.e. about 2 us per
    hop on top of a ~6 us base). Other (algorithm, protocol) pairs add
    NCCL's own difference to that entry (hwLatencies, tuning.cc; docs/model.md#nccl):
    ``alpha = Tier.latency + hwLat[link][algorithm][proto] - hwLat[link][ring][LL]``, e.g. an NVLink hop of
    2 us costs 2 / 3.3 / 4.8 us with LL / LL128 / Simple. (Modelling assumption: NCCL's table is kept as
    per-protocol increments rather than absolute values, since its absolute LL NVLink hop, 0.6 us, is
    about a third of the measured one.)
    """
    link = _link_class(tier, i)
    row = NCCL_HW_LATENCY[link]
    return tier.latency + row[algorithm][_PI[proto]] - row["ring"][0]


def _protocol_network(network: Network, proto: str, algorithm: str = "ring", bw_factor: float | None = None
                      ) -> Network:
    """The network as one NCCL (algorithm, protocol) sees it: hop latency from :func:`hop_latency`,
    bandwidth x ``bw_factor`` (default: the Ring protocol factor ``PROTOCOL_BW``)."""
    f = PROTOCOL_BW[proto] if bw_factor is None else bw_factor
    tiers = tuple(replace(t, latency=hop_latency(t, i, algorithm, proto), bandwidth=t.bandwidth * f)
                  for i, t in enumerate(network.tiers))
    return Network(tiers, network.gpus_per_node)


def protocols_for(network: Network) -> tuple[str, ...]:
    """LL and Simple always; LL128 only where no tier is PCIe/TCP (NCCL enables it only on NVLink
    paths and capable NICs, tuning.cc)."""
    if any(t.protocol.lower() in NO_LL128_PROTOCOLS for t in network.tiers):
        return ("ll", "simple")
    return PROTOCOLS


def _bottleneck(pl: _Placement) -> np.ndarray:
    """Bus bandwidth of a flat ring or tree over the group: min over the tiers its hops cross of
    ``a_i B_i`` (NCCL busBw = nChannels x bw, channels striped over the node's NICs; nccl#1576)."""
    bmin = np.full_like(pl.p, np.inf)
    for i in range(pl.ntiers):
        crossed = (pl.domains(i - 1) - pl.domains(i)) > 0.5
        b = pl.agg(i) * pl.bw[i]
        bmin = np.where(crossed & (b < bmin), b, bmin)
    return np.where(np.isfinite(bmin), bmin, pl.bw[0])


def nccl_channels(bus_bw: np.ndarray | float) -> np.ndarray:
    """Channels NCCL runs at full size: ``clip(busbw / CHANNEL_BW, 1, MAX_CHANNELS)`` (busBw = nChannels x
    per-channel bw, tuning.cc; CHANNEL_BW is a modelling assumption, see its comment)."""
    return np.clip(np.asarray(bus_bw, dtype=float) / CHANNEL_BW, 1.0, MAX_CHANNELS)


def channel_ramp_size(S: np.ndarray, proto: str, channels: np.ndarray, ranks: np.ndarray, *,
                      ring_ll: bool = False) -> np.ndarray:
    """Bytes that the bandwidth term is charged for, once NCCL's runtime channel/thread reduction is applied.

    NCCL runs ``nc`` channels of ``nt`` threads only while ``S >= nc nt threshold`` (enqueue.cc;
    docs/model.md#nccl), first dropping channels to 1, then halving threads. Throughput is taken as proportional
    to active channels (busBw = nChannels x bw) and, within one channel, to active threads (modelling
    assumption). In the continuous limit the achieved fraction of the full bandwidth is
    ``r(S) = clip(S / S_full, r_min, 1)`` with ``S_full = nc nt threshold`` and
    ``r_min = nt_min / (nc nt)``, and a bandwidth term ``S / (B r)`` equals one at full bandwidth for

    ``S_eff = S / r(S) = min(S / r_min, max(S, S_full))``:

    below S_full a message costs as many byte-times as S_full (too few bytes per channel to fill the
    pipe), below r_min S_full it scales down linearly again. Non-decreasing in S. ``ring_ll``: the
    algorithm is a ring, so the LL threshold is multiplied by the number of ranks (NCCL's Ring LL rule).
    """
    thr = NCCL_THREAD_THRESHOLD[proto] * (np.asarray(ranks, dtype=float) if ring_ll and proto == "ll" else 1.0)
    nt = NCCL_THREADS[proto]
    s_full = channels * nt * thr
    r_min = NCCL_MIN_THREADS[proto] / (channels * nt)
    return np.minimum(S / r_min, np.maximum(S, s_full))


def tree_correction(proto: str, S: np.ndarray) -> np.ndarray:
    """NCCL's treeCorrectionFactor for Tree all-reduce bandwidth (tuning.cc), interpolated linearly
    in log2(S/64) between bucket starts (64 B .. 256 MiB), 1 from 512 MiB on; constant below 64 B."""
    table = (*TREE_CORRECTION[proto], 1.0)
    x = np.log2(np.maximum(np.asarray(S, dtype=float), 1.0) / 64.0)
    return np.interp(x, np.arange(len(table), dtype=float), np.asarray(table, dtype=float))


def nccl_tree_allreduce_time(S: np.ndarray, pl: _Placement, proto: str, bus_bw: np.ndarray,
                             channels: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """NCCL's Tree all-reduce for one protocol (tuning.cc; docs/model.md#nccl).

    Latency: ``base_tree[p] + 2 ((ppn - 1) alpha_0 + sum_(i>=1) d_i alpha_i)``: a chain inside the node
    (ppn = group ranks per innermost domain) and a double binary tree of depth ``d_i = max(1, floor(lg
    p_i))`` across each outer tier (NCCL: floor(log2 N) x interLat); alpha from :func:`hop_latency` with
    the Tree row (``pl`` is placed on that network).
    Bandwidth: ``algbw = 0.5 x 0.92 x f_p x busbw x corr_p(S)``, busbw the bottleneck of :func:`_bottleneck`
    (NCCL's bwInter rule for N > 2; its N <= 2 use of bwIntra (tuning.cc) is not applied), f_LL = 1/3.8,
    f_LL128 = 7/9 on one node else 120/128, f_Simple = 1, corr from :func:`tree_correction`.
    ``T = lat + S_eff / algbw + S gamma`` with S_eff from :func:`channel_ramp_size`.
    """
    hops = (pl.c[0] - 1.0) * pl.alpha[0]
    for i in range(1, pl.ntiers):
        pi = pl.level(i)
        hops = hops + np.where(pi > 1 + 1e-9, np.maximum(1.0, _log2_floor(pi)), 0.0) * pl.alpha[i]
    lat = NCCL_BASE_LATENCY["tree"][_PI[proto]] + 2.0 * hops
    nodes = pl.domains(0)
    if proto == "ll":
        f: np.ndarray | float = 1.0 / TREE_LL_DIV
    elif proto == "ll128":
        f = np.where(nodes > 1.5, TREE_LL128_MULTI_NODE, TREE_LL128_ONE_NODE)
    else:
        f = 1.0
    alg = TREE_ALGBW * TREE_AR_BW * f * bus_bw * tree_correction(proto, S)
    S_eff = channel_ramp_size(S, proto, channels, pl.p)
    return np.where(pl.p > 1, lat + S_eff / alg + S * gamma, 0.0)


def _prepare(op: str, size_bytes: object, ranks: object, stride: object, dtype_bytes: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _check_op(op)
    if not (isinstance(dtype_bytes, (int, np.integer)) and dtype_bytes >= 1):
        raise InputError(f"dtype_bytes must be a positive integer, got {dtype_bytes!r}", where="dtype_bytes",
                         allowed="1, 2, 4 or 8")
    S = _arr(size_bytes, "size_bytes")
    p = _arr(ranks, "ranks", minimum=1.0)
    s = _arr(stride, "stride", minimum=1.0)
    if np.any(p != np.floor(p)):
        raise InputError("ranks must be whole numbers", where="ranks", allowed="integers >= 1")
    S = np.ceil(S / dtype_bytes) * dtype_bytes  # whole elements, as nccl-tests counts them
    return S, p, s


def algorithm_time(op: str, algorithm: str, S: np.ndarray, p: np.ndarray, network: Network, *,
                   stride: np.ndarray | float = 1, gamma: float = 0.0,
                   protocols: Sequence[str] | None = None) -> np.ndarray:
    """Time of one named algorithm: the minimum over NCCL's protocol lines (LL, LL128, Simple; tuning.cc);
    0 when p = 1.

    - ``tree`` all-reduce: :func:`nccl_tree_allreduce_time`.
    - everything else: ``base[p] + T_algo(S_eff)`` on the network as protocol p sees it
      (:func:`_protocol_network`, Ring hop row), with ``S_eff`` from :func:`channel_ramp_size` (Ring LL's
      threshold x p for ``ring`` and for ``hierarchical``, whose levels are rings; p is the whole group's
      size, so one-level hierarchical equals the flat ring). ``ring`` all-reduce with Simple across
      nodes takes NCCL's x1.4 latency "plateau" once S / (nChannels p) >= 64 (tuning.cc).

    The bare alpha-beta forms without any of this are :func:`raw_algorithm_time`.
    """
    if algorithm not in APPLICABLE[op]:
        raise InputError(f"algorithm {algorithm!r} does not apply to {op}", where="algorithm",
                         allowed=_allowed(op))
    protos = tuple(protocols) if protocols is not None else protocols_for(network)
    pl0 = place(p, stride, network)
    bus = _bottleneck(pl0)
    nc = nccl_channels(bus)
    multi_node = pl0.domains(0) > 1.5
    best = None
    for proto in protos:
        if algorithm == "tree" and op == "allreduce":
            pl = place(p, stride, _protocol_network(network, proto, "tree", bw_factor=1.0))
            t = nccl_tree_allreduce_time(S, pl, proto, bus, nc, gamma)
        else:
            pl = place(p, stride, _protocol_network(network, proto, "ring"))
            fn = _ALGO_FUNCS[algorithm]
            S_eff = channel_ramp_size(S, proto, nc, pl.p, ring_ll=algorithm in ("ring", "hierarchical"))
            t = BASE_LATENCY[proto] + fn(op, S_eff, pl, gamma)
            if algorithm == "ring" and op == "allreduce" and proto == "simple":
                lat = BASE_LATENCY[proto] + fn(op, 0.0 * S, pl, gamma)
                plateau = multi_node & (S / (nc * pl.p) >= RING_PLATEAU_BYTES)
                t = t + np.where(plateau, (RING_PLATEAU - 1.0) * lat, 0.0)
        best = t if best is None else np.minimum(best, t)
    assert best is not None
    return np.where(np.broadcast_to(p, best.shape) > 1, best, 0.0)


def raw_algorithm_time(op: str, algorithm: str, S: object, p: object, network: Network, *,
                       stride: object = 1, gamma: float = 0.0) -> np.ndarray:
    """The bare alpha-beta model of one algorithm on ``network`` (no protocol lines, no base latency)."""
    Sa, pa, sa = _prepare(op, S, p, stride, 1)
    if algorithm not in APPLICABLE[op]:
        raise InputError(f"algorithm {algorithm!r} does not apply to {op}", where="algorithm",
                         allowed=_allowed(op))
    return _ALGO_FUNCS[algorithm](op, Sa, place(pa, sa, network), gamma)


def resolve_family(network: Network, family: str = "auto") -> str:
    """``"nccl"`` or ``"all"`` (see ``FAMILIES``); ``"auto"`` is "all" on ICI (TPU) networks, else "nccl"."""
    if family not in FAMILIES:
        raise InputError(f"unknown algorithm family {family!r}", where="family", allowed=", ".join(FAMILIES))
    if family == "auto":
        return "all" if any(t.protocol.lower() == "ici" for t in network.tiers) else "nccl"
    return family


def _auto_eligible(op: str, algorithm: str, p: np.ndarray, stride: np.ndarray, network: Network,
                   family: str) -> np.ndarray:
    """Whether ``auto`` may pick ``algorithm``. Family "nccl": ``NCCL_FAMILY[op]``, with ``hierarchical``
    (standing for NVLS/CollNet) only where a tier whose level the group spans (p_i > 1) declares in-network
    reduction. Family "all": everything, except one-shot ``direct`` (load/store access to every peer) beyond
    the innermost tier, other than for all-to-all and send/recv."""
    shape = np.broadcast(p, stride).shape
    if family == "nccl":
        if algorithm not in NCCL_FAMILY[op]:
            return np.zeros(shape, dtype=bool)
        if algorithm == "hierarchical":
            pl = place(p, stride, network)
            ok = np.zeros(pl.p.shape, dtype=bool)
            for i in range(pl.ntiers):
                if pl.inr[i]:
                    ok = ok | (pl.level(i) > 1 + 1e-9)
            return np.broadcast_to(ok, shape)
        return np.ones(shape, dtype=bool)
    if algorithm == "direct" and op not in ("alltoall", "sendrecv"):
        return np.asarray(p * stride <= network.tiers[0].span)
    return np.ones(shape, dtype=bool)


def best_algorithm(op: str, size_bytes: object, ranks: object, network: Network, *, stride: object = 1,
                   dtype_bytes: int = 2, gamma: float = 0.0, family: str = "auto"
                   ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """Every applicable algorithm's time and the fastest eligible one per element.

    Returns ``(times, names, best_index, best_time)``: ``times`` has shape (len(names), *broadcast shape)
    for every algorithm in ``APPLICABLE[op]``; ``best_index`` indexes ``names`` and only points at an
    algorithm of the ``family`` (:func:`resolve_family`; on GPU clusters NCCL's own: ring, tree, and
    NVLS/CollNet as ``hierarchical`` where a tier declares in-network reduction).
    """
    fam = resolve_family(network, family)
    S, p, s = _prepare(op, size_bytes, ranks, stride, dtype_bytes)
    names = APPLICABLE[op]
    shape = np.broadcast(S, p, s).shape
    times = np.stack([np.broadcast_to(algorithm_time(op, a, S, p, network, stride=s, gamma=gamma), shape)
                      for a in names])
    elig = np.stack([np.broadcast_to(_auto_eligible(op, a, p, s, network, fam), shape) for a in names])
    masked = np.where(elig, times, np.inf)
    idx = np.argmin(masked, axis=0)
    best = np.take_along_axis(times, idx[None, ...], axis=0)[0]
    return times, names, idx, best


def collective_time(op: str, size_bytes: object, ranks: object, network: Network, *, algorithm: str = "auto",
                    stride: object = 1, dtype_bytes: int = 2, gamma: float = 0.0, family: str = "auto"
                    ) -> np.ndarray:
    """Seconds for collective ``op`` of ``size_bytes`` over ``ranks`` GPUs placed ``stride`` apart.

    Size convention as nccl-tests (module docstring). ``algorithm="auto"`` takes the fastest algorithm of
    ``family`` per element (:func:`best_algorithm`): on GPU clusters only what NCCL implements (ring,
    tree; NVLS/CollNet as ``hierarchical`` where a tier declares in-network reduction; ``direct`` for
    all-to-all and send/recv). ``rhd``, ``rd``, ``direct`` and ``hierarchical`` stay selectable by name,
    and ``family="all"`` lets ``auto`` consider them. Broadcasts over size, ranks and stride; p = 1 costs 0.
    """
    _check_op(op)
    if algorithm == "auto":
        # the same minimum as best_algorithm(...)[3], evaluating only the family's eligible algorithms
        fam = resolve_family(network, family)
        S, p, s = _prepare(op, size_bytes, ranks, stride, dtype_bytes)
        shape = np.broadcast(S, p, s).shape
        best = np.full(shape, np.inf)
        for a in APPLICABLE[op]:
            if fam == "nccl" and a not in NCCL_FAMILY[op]:
                continue
            elig = np.broadcast_to(_auto_eligible(op, a, p, s, network, fam), shape)
            if not np.any(elig):
                continue
            best = np.where(elig, np.minimum(best, algorithm_time(op, a, S, p, network, stride=s, gamma=gamma)),
                            best)
        return best
    if algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}", where="algorithm", allowed=_allowed(op))
    S, p, s = _prepare(op, size_bytes, ranks, stride, dtype_bytes)
    return algorithm_time(op, algorithm, S, p, network, stride=s, gamma=gamma)


def algbw(op: str, size_bytes: object, time_s: object) -> np.ndarray:
    """nccl-tests algorithm bandwidth S / t (B/s); 0 where t = 0."""
    S = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_s, dtype=float)
    return np.where(t > 0, S / np.maximum(t, _SMALL), 0.0)


def busbw(op: str, size_bytes: object, ranks: object, time_s: object) -> np.ndarray:
    """nccl-tests bus bandwidth = algbw x :func:`busbw_factor`."""
    return algbw(op, size_bytes, time_s) * busbw_factor(op, np.asarray(ranks, dtype=float))


def latency_floor(op: str, ranks: object, network: Network, *, algorithm: str = "auto", stride: object = 1
                  ) -> np.ndarray:
    """The size-independent part: the time of a zero-byte collective."""
    return collective_time(op, 0.0, ranks, network, algorithm=algorithm, stride=stride, dtype_bytes=1)
