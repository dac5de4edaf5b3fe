"""Placement of a group of GPUs on the tiers of a network: the one answer to "which tier holds this group".

A group of ``p`` ranks with stride ``s`` occupies GPUs 0, s, 2s, ... (s - 1 GPUs of other groups sit
between consecutive members). Tier i is a set of domains of ``span_i`` consecutive GPUs (cumulative:
a node's NVLink tier spans 8, a leaf 256, the spine the cluster; docs/model.md#placement). Then

- inside one domain of tier i sit ``c_i = clip(floor(span_i / s), c_(i-1), p)`` of the group's ranks
  (the outermost tier holds all p, ``c_(-1) = 1``);
- the group touches ``n_i = p / c_i`` domains of tier i (``n_(-1) = p``);
- level i of a hierarchical decomposition has ``p_i = c_i / c_(i-1)`` members;
- a flat ring over the group in rank order has ``n_(i-1) - n_i`` edges whose outermost crossed tier is i;
- the group occupies a block of ``p s`` consecutive GPUs (Megatron-style placement); the tier that holds
  it, the outermost tier its traffic crosses, is the innermost i with ``p s <= span_i`` (equivalently
  ``c_i = p`` for p >= 2), the outermost tier if none does (:attr:`Placement.tier`); a block of k
  consecutive group ranks lies inside the innermost tier with ``c_i >= k`` (:meth:`Placement.tier_for_block`).

Per-tier link figures travel with the placement: hop latency ``alpha_i`` (``Tier.latency``) and the
effective bandwidth per GPU per direction ``B_i = line rate x efficiency / oversubscription``
(``Tier.effective_bandwidth``); on a full mesh of direct links (tier 0 with ``Tier.full_mesh``: AMD Instinct
xGMI, ``span_0 - 1`` links a GPU) a group reaches only the links between its members, ``B_0 x max(c_0 - 1, 1) /
(span_0 - 1)`` (:attr:`Placement.mesh_share`), and one pair of GPUs one link (:meth:`Placement.pair_bw`;
docs/model.md#full-mesh); the NCCL layer (:mod:`scalemodel.cost.nccl`) swaps in its own per-protocol
latencies and bandwidth factors without placing the group again (:meth:`Placement.relinked`), and
:meth:`Placement.untapered` drops the oversubscription (traffic that does not fill the tapered tier).
A flat ring or tree gets ``a_i = c_0`` parallel streams on outer tiers (NCCL stripes its channels over
every NIC of a node, docs/model.md#placement: busbw ~ min(NVLink busbw, NICs x B_nic,eff)), so its bus
bandwidth is ``min over crossed tiers of a_i B_i`` (:meth:`Placement.bottleneck`), with an oversubscribed
tier charged per flow: ``B_i(W) = line rate x efficiency / clip(o_i W / c_(i-1), 1, o_i)`` for W flows per
group leaving a child domain (:meth:`Placement.flow_bw`, docs/model.md#flow-taper).

The parallel groups of a DP x TP x PP x CP job follow the strategy's rank order
(:class:`scalemodel.choices.Layout`, docs/model.md#layout): ranks are numbered in mixed radix, innermost
dimension first, so a dimension's group members are the product of the degrees inner to it apart
(:func:`rank_strides`). Megatron-LM's default order, TP innermost, then CP, then DP, PP outermost (Narayanan
et al., SC'21 §3; Megatron-LM ``parallel_state.initialize_model_parallel``), gives TP stride 1, CP stride tp,
DP stride tp cp, pipeline neighbours tp cp dp apart; PP inside DP (``tp-cp-pp-dp``) gives pipeline neighbours
tp cp apart and DP stride tp cp pp (:class:`ParallelGroups`; each group is placed once per evaluation, on
first use). Experts have their own grid over the same tp cp dp ranks of a stage (Megatron-Core "MoE parallel
folding", Liu et al. 2025, arXiv 2504.14960 §3; ``parallel_state.initialize_model_parallel`` builds it with
order tp-ep-dp and cp = 1): expert-TP ``etp`` innermost (default tp), then EP (stride etp), then expert-DP,
edp = tp cp dp / (etp ep) replicas of one expert shard, stride etp ep. With etp = tp and cp = 1 that is EP
carved out of DP at stride tp, the replicas of an expert shard tp ep apart.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import Layout
from scalemodel.cost.checks import span
from scalemodel.cost.network import Network
from scalemodel.errors import InputError


def checked_array(x: object, name: str, *, minimum: float = 0.0) -> np.ndarray:
    """``x`` as a float array, refused unless finite and >= ``minimum``."""
    a = np.asarray(x, dtype=float)
    s = span(a)  # least and greatest element (checks.span): finite iff both are, NaN failing every comparison
    if s is None:
        return a
    if not (-math.inf < s[0] and s[1] < math.inf):
        raise InputError(f"{name} must be finite", where=name, allowed="finite numbers")
    if s[0] < minimum:
        raise InputError(f"{name} must be >= {minimum:g}", where=name, allowed=f"values >= {minimum:g}")
    return a


def _check_tiers(network: Network) -> None:
    tiers = network.tiers
    if not tiers:
        raise InputError("the network has no tiers", where="network.tiers", allowed="at least one tier")
    for t in tiers:  # finite too: an infinite rate (efficiency inf) would lose every ``b < bmin`` (fuzz32)
        bad = next((f for f, v, low in (("bandwidth", t.bandwidth, 0.0), ("efficiency", t.efficiency, 0.0),
                                         ("oversubscription", t.oversubscription, 1.0))
                    if not (low <= v < np.inf and (low > 0 or v > 0))), None)
        if bad is not None:  # the field and its value named (review32b: was the tier alone)
            raise InputError(f"tier {t.name!r} needs bandwidth > 0, efficiency > 0, oversubscription >= 1: its {bad} "
                             f"is {float(getattr(t, bad))!r}", where=f"tiers.{t.name}.{bad}",
                             allowed="positive finite numbers (oversubscription >= 1)")
        if not (t.latency >= 0 and np.isfinite(t.latency)):
            raise InputError(f"tier {t.name!r} has a negative or non-finite latency",
                             where=f"tiers.{t.name}.latency", allowed="latency >= 0")


class Placement(msgspec.Struct, frozen=True, eq=False, dict=True):  # dict: for cached_property
    """A group of ``p`` ranks placed on ``network`` (module docstring), with its per-tier link figures."""

    network: Network
    p: np.ndarray                 # ranks (float array, broadcast with the stride)
    stride: np.ndarray            # GPUs between consecutive ranks (float array)
    c: tuple[np.ndarray, ...]     # group ranks inside one domain of tier i (cumulative), c[-1] == p
    alpha: np.ndarray             # per-tier hop latency (s), shape (T,)
    bandwidth: np.ndarray         # per-tier line rate per GPU per direction (B/s), shape (T,)
    efficiency: np.ndarray        # per-tier achievable fraction of the line rate, shape (T,)
    oversubscription: np.ndarray  # per-tier taper of traffic leaving the tier below, shape (T,)
    overhead_factor: float = 1.0  # x Tier.net_overhead as this (protocol's) ring sees it (NCCL: x3 Simple)

    @property
    def ntiers(self) -> int:
        return len(self.c)

    @cached_property
    def spans(self) -> np.ndarray:
        """GPUs inside one domain of each tier, shape (T,)."""
        return np.array([t.span for t in self.network.tiers], dtype=float)

    @cached_property
    def inr(self) -> tuple[bool, ...]:
        """Whether each tier reduces in the network (NVLS / SHARP)."""
        return tuple(bool(t.in_network_reduction) for t in self.network.tiers)

    @cached_property
    def full_mesh(self) -> bool:
        """Whether tier 0 is a full mesh of direct links (``Tier.full_mesh``, docs/model.md#full-mesh)."""
        return bool(self.network.tiers[0].full_mesh)

    @cached_property
    def mesh_share(self) -> np.ndarray:
        """The share of a full-mesh tier 0's per-GPU bandwidth the group reaches: the links between its members,
        ``max(c_0 - 1, 1) / (span_0 - 1)`` (at most 1), shape of p (docs/model.md#full-mesh). The line rate is
        ``span_0 - 1`` links busy at once, and a member of ``c_0`` ranks in one domain has a direct link to each
        of the other ``c_0 - 1`` only; a group with one rank a domain still reaches one peer (PXN's hop). 1 on any
        other tier 0."""
        if not self.full_mesh:
            return np.ones_like(self.p)
        links = self.spans[0] - 1.0
        return np.minimum(1.0, np.maximum(self.c[0] - 1.0, 1.0) / links)

    @cached_property
    def _rate(self) -> np.ndarray:
        """Line rate x efficiency / oversubscription per tier, shape (T,): the per-GPU rate before a full mesh's
        group share (:attr:`bw`, :meth:`pair_bw`)."""
        return self.bandwidth * self.efficiency / self.oversubscription

    @cached_property
    def _pair_rate(self) -> np.ndarray:
        """Per tier, the bandwidth between one pair of GPUs, shape (T,): :attr:`_rate`, over ``span_0 - 1`` on a
        full-mesh tier 0 (one direct link), whole elsewhere (a switch port)."""
        rate = self._rate.copy()
        if self.full_mesh:
            rate[0] = rate[0] / (self.spans[0] - 1.0)
        return rate

    @cached_property
    def bw(self) -> np.ndarray:
        """Effective bandwidth per GPU per direction the group's collectives reach: line rate x efficiency /
        oversubscription, shape (T,); on a full-mesh tier 0 its row is scaled by :attr:`mesh_share` and the
        array is (T,) + p's shape (``bw[i]`` broadcasts with p either way; docs/model.md#full-mesh)."""
        base = self._rate
        if not self.full_mesh:
            return base
        out = np.broadcast_to(base.reshape((-1,) + (1,) * self.p.ndim), (len(base),) + self.p.shape).copy()
        out[0] = base[0] * self.mesh_share
        return out

    def pair_bw(self, t: np.ndarray | int) -> np.ndarray:
        """Effective bandwidth between ONE pair of GPUs on tier ``t`` (an index or an array of indices): the per-GPU
        rate of a switched tier, one direct link (rate / (span_0 - 1)) on a full-mesh tier 0. Pairwise exchanges
        (send/recv, the RHD / RD steps) price with it (docs/model.md#full-mesh)."""
        return np.asarray(self._pair_rate[t])

    def c_prev(self, i: int) -> np.ndarray:
        return np.ones_like(self.p) if i == 0 else self.c[i - 1]

    def level(self, i: int) -> np.ndarray:
        """p_i: members of level i of a hierarchical decomposition (>= 1)."""
        return self.c[i] / self.c_prev(i)

    @cached_property
    def _domain_counts(self) -> dict[int, np.ndarray]:
        """:meth:`domains` per tier as computed (they read only p and c, which :meth:`relinked` and
        :meth:`untapered` keep, so those copies share this memo)."""
        return {}

    def domains(self, i: int) -> np.ndarray:
        """n_i: domains of tier i the group touches, ceil(p / c_i) (a group that does not fill its last
        domain still reaches it); n_(-1) = p. Computed once per tier and placement (the collectives of one
        evaluation ask for the same group's counts many times); the array is shared, never to be written."""
        if i < 0:
            return self.p
        memo = self._domain_counts
        if i not in memo:
            memo[i] = np.ceil(self.p / self.c[i] - 1e-9)
        return memo[i]

    def tier_for_block(self, ranks: np.ndarray | float) -> np.ndarray:
        """Index of the innermost tier whose domain holds a block of ``ranks`` consecutive group ranks."""
        idx = np.zeros(np.broadcast(self.p, np.asarray(ranks)).shape, dtype=int)
        for i in range(self.ntiers - 1):
            idx = idx + (self.c[i] < np.asarray(ranks) - 1e-9)
        return idx

    @cached_property
    def extent(self) -> np.ndarray:
        """GPUs in the block the group occupies: p x stride."""
        return self.p * self.stride

    def inside(self, i: int) -> np.ndarray:
        """Whether the group's block lies inside one domain of tier i (p x stride <= span_i)."""
        return np.asarray(self.extent <= self.spans[i])

    @cached_property
    def tier(self) -> np.ndarray:
        """Index of the innermost tier whose domain holds the group's block, i.e. the outermost tier its
        traffic crosses; the outermost tier when none does."""
        idx = np.zeros(self.p.shape, dtype=int)
        for i in range(self.ntiers - 1):
            idx = idx + ~self.inside(i)
        return idx

    def agg(self, i: int) -> np.ndarray:
        """Parallel streams a flat ring/tree gets on tier i: 1 inside tier 0, else the group ranks per
        tier-0 domain (NCCL stripes channels over the node's NICs, §5.3)."""
        return np.ones_like(self.p) if i == 0 else self.c[0]

    def flow_bw(self, i: int, flows: np.ndarray | float) -> np.ndarray:
        """Bandwidth per GPU-rate flow on tier ``i`` when each group sends ``flows`` such flows per direction
        out of one child domain (a domain of tier i-1) that holds ``c_(i-1)`` of its ranks
        (docs/model.md#flow-taper):

        ``B_i(flows) = line rate x efficiency / o_eff``,  ``o_eff = clip(o_i x flows / c_(i-1), 1, o_i)``.

        The child domain of T GPUs has ``T x B / o_i`` of uplink; the job's groups tile it (T / c_(i-1)
        groups of the same shape run the same collective at once), so they offer
        ``(T / c_(i-1)) x flows x B`` and the taper bites only as far as that exceeds the uplink.
        ``flows = c_(i-1)`` (every rank's traffic leaves the domain: RHD, RD, direct, hierarchical levels)
        gives the full taper ``o_i``; a rack-contiguous flat ring that leaves a rack on ``a_i`` channels
        gets ``max(1, o_i a_i / c_(i-1))``. Tier 0's child is one GPU (``c_(-1) = 1``)."""
        o = self.oversubscription[i]
        if o <= 1.0:  # untapered: the per-GPU rate whatever the flows (fast path)
            return self.bw[i]
        o_eff = np.clip(o * np.asarray(flows, dtype=float) / self.c_prev(i), 1.0, o)
        rate = self.bandwidth[i] * self.efficiency[i]
        return (rate * self.mesh_share if i == 0 and self.full_mesh else rate) / o_eff

    def bottleneck(self, flows_per_stream: float = 1.0) -> np.ndarray:
        """Bus bandwidth of a flat ring (or, with ``flows_per_stream`` = the tree's crossing factor, a tree)
        over the group: min over the tiers its hops cross of ``a_i B_i(flows_per_stream x a_i)``
        (:meth:`flow_bw`; NCCL busBw = nChannels x bw, channels striped over the node's NICs; §1.5, §5.3).
        Computed once per placement and ``flows_per_stream`` (every algorithm of a collective asks for it); the
        array is shared, never to be written."""
        memo = self._bottlenecks
        key = float(flows_per_stream)
        if key not in memo:
            memo[key] = self._bottleneck(flows_per_stream)
        return memo[key]

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Figures the cost functions derive from this placement alone (its group and its links), kept by them
        under their own keys so each is computed once per placement (e.g. ``nccl.protocol_links``, the flat
        ring's hops); not shared with :meth:`relinked` or :meth:`untapered` copies, whose links differ."""
        return {}

    @cached_property
    def _bottlenecks(self) -> dict[float, np.ndarray]:
        """:meth:`bottleneck` per flows_per_stream as computed (this placement's links only: not shared with
        :meth:`relinked` or :meth:`untapered` copies)."""
        return {}

    def _bottleneck(self, flows_per_stream: float) -> np.ndarray:
        bmin = np.full_like(self.p, np.inf)
        for i in range(self.ntiers):
            crossed = (self.domains(i - 1) - self.domains(i)) > 0.5
            a = self.agg(i)
            b = a * self.flow_bw(i, flows_per_stream * a)
            bmin = np.where(crossed & (b < bmin), b, bmin)
        return np.where(np.isfinite(bmin), bmin, self.bw[0])

    def relinked(self, alpha: np.ndarray, bandwidth: np.ndarray, overhead_factor: float | None = None) -> Placement:
        """The same group with other per-tier hop latencies and line rates (no new placement); ``overhead_factor``
        scales the tiers' ``net_overhead`` as one NCCL protocol sees it (None: unchanged)."""
        f = self.overhead_factor if overhead_factor is None else overhead_factor
        _check_links(self.network, alpha, bandwidth)
        return self._same_group(msgspec.structs.replace(self, alpha=alpha, bandwidth=bandwidth, overhead_factor=f))

    def untapered(self) -> Placement:
        """The same group as if no tier were oversubscribed (oversubscription 1 everywhere)."""
        return self._same_group(msgspec.structs.replace(self, oversubscription=np.ones_like(self.oversubscription)))

    def _same_group(self, other: Placement) -> Placement:
        """``other`` (this group on other links) sharing this placement's domain counts."""
        other.__dict__["_domain_counts"] = self._domain_counts
        return other


def _check_links(network: Network, alpha: np.ndarray, bandwidth: np.ndarray) -> None:
    """Refuse per-tier links a cost function derived (:meth:`Placement.relinked`: NCCL's protocol latencies and
    rates) that are not a finite latency >= 0 and a finite line rate > 0, naming the tier: a NaN rate loses every
    bottleneck comparison ``b < bmin`` (Placement._bottleneck, the ring's hops, the trees), so the group was priced
    as if it never crossed that tier (fuzz32)."""
    a, b = np.asarray(alpha, dtype=float), np.asarray(bandwidth, dtype=float)
    bad = ~((a >= 0) & (a < np.inf) & (b > 0) & (b < np.inf))
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"tier {network.tiers[i].name!r}'s link as a collective protocol sees it has latency "
                         f"{float(a[i])!r} s and rate {float(b[i])!r} B/s", where="result",
                         allowed="an internal invariant: a finite latency >= 0 and a finite rate > 0 (a defect to "
                         "report, with the command that gave it)")


#: The small placements last made: {(network, p's shape and bytes, stride's): placement} (:func:`place`).
_PLACED: dict[tuple[object, ...], Placement] = {}
#: Placements of at most this many elements are remembered by value (:func:`place`); a planner's grid is placed anew.
PLACE_MEMO_ELEMENTS = 64


def place(ranks: object, stride: object, network: Network) -> Placement:
    """Place ``ranks`` GPUs spaced ``stride`` apart on ``network``'s tiers (module docstring). Broadcasts.

    A group of at most :data:`PLACE_MEMO_ELEMENTS` elements placed again on an equal network (the frozen dataclass's
    value, tier by tier) with the same ranks and stride (bit for bit) is the placement made before, with the figures
    its :attr:`Placement.memo` and cached properties keep (the ring's hops, the protocol copies, the bottlenecks):
    every one of them reads the placement's fields alone, so they are the values a new placement would compute. A
    calibration, a sensitivity or a check evaluates the same few groups hundreds of times, each on a job rebuilt
    with other factors that leave most tiers as they were (evalspeed41)."""
    p = checked_array(ranks, "ranks", minimum=1.0)
    s = checked_array(stride, "stride", minimum=1.0)
    if np.any(p != np.floor(p)):
        raise InputError("ranks must be whole numbers", where="ranks", allowed="integers >= 1")
    _check_tiers(network)
    key: tuple[object, ...] | None = None
    if p.size <= PLACE_MEMO_ELEMENTS and s.size <= PLACE_MEMO_ELEMENTS:
        key = (network, p.dtype.str, p.shape, p.tobytes(), s.dtype.str, s.shape, s.tobytes())
        try:
            hit = _PLACED.get(key)
        except TypeError:  # a network with an unhashable field (a hand-built one): placed each time
            hit, key = None, None
        if hit is not None:
            return hit
    out = _place(p, s, network)
    if key is not None:
        if len(_PLACED) >= 256:
            _PLACED.clear()
        _PLACED[key] = out
    return out


def _place(p: np.ndarray, s: np.ndarray, network: Network) -> Placement:
    """:func:`place` of checked ranks ``p`` and stride ``s``."""
    tiers = network.tiers
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
    return Placement(network, p + 0 * prev, s + 0 * prev, tuple(cs), np.array([t.latency for t in tiers]),
                     np.array([t.bandwidth for t in tiers]), np.array([t.efficiency for t in tiers]),
                     np.array([t.oversubscription for t in tiers]))


def rank_strides(layout: object, *, tp: object, cp: object, dp: object, pp: object) -> dict[str, np.ndarray]:
    """GPUs between consecutive members of the TP, CP, DP and PP groups under the rank order ``layout``
    (:class:`scalemodel.choices.Layout` codes; broadcasts with the degrees).

    A rank order numbers the ranks in mixed radix, innermost dimension first: rank
    ``r = sum_d i_d x prod_(e inner to d) p_e``, so the members of one group of dimension d (every index
    but i_d fixed) are ``s_d = prod_(e inner to d) p_e`` apart (Megatron-LM ``RankGenerator``,
    ``generate_masked_orthogonal_rank_groups``; torch ``DeviceMesh`` row-major meshes). EP lives on the
    expert grid (:attr:`ParallelGroups.expert`, stride etp), not on this order.
    """
    sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    codes = np.asarray(layout)
    # return_counts keeps np.unique on its sorting path (the plain call imports numpy.ma in numpy >= 2.3)
    members = [Layout.of(c) for c in np.unique(codes, return_counts=True)[0]] if codes.size else [Layout.TP_CP_DP_PP]
    out: dict[str, np.ndarray] = {}
    for k, member in enumerate(members):
        stride: np.ndarray = np.ones(np.shape(codes))
        mine: dict[str, np.ndarray] = {}
        for d in member.dims:
            mine[d] = stride
            stride = stride * np.asarray(sizes[d], dtype=float)
        for d, s in mine.items():
            out[d] = s if k == 0 else np.where(codes == member, s, out[d])
    return out


def distinct_layout(layout: object, *, tp: object, cp: object, dp: object, pp: object,
                    among: tuple[Layout, ...] = tuple(Layout)) -> np.ndarray:
    """Whether the rank order ``layout`` numbers the ranks differently from every earlier member of
    ``among`` (smaller code): two orders number them alike when they agree on the dimensions of degree
    > 1 (the others contribute a factor 1), so a candidate needs only the first of them."""
    sizes = {"tp": np.asarray(tp), "cp": np.asarray(cp), "dp": np.asarray(dp), "pp": np.asarray(pp)}
    codes = np.asarray(layout)
    shape = np.broadcast_shapes(codes.shape, *(a.shape for a in sizes.values()))
    out = np.ones(shape, dtype=bool)
    for member in Layout:
        here = codes == member
        if not np.any(here):
            continue
        for earlier in (m for m in among if m < member):
            same = np.ones(shape, dtype=bool)
            for i, a in enumerate(member.dims):
                for b in member.dims[i + 1:]:
                    if earlier.dims.index(a) > earlier.dims.index(b):  # a and b swap: alike only if one is 1
                        same &= (sizes[a] == 1) | (sizes[b] == 1)
            out &= ~(here & same)
    return out


class DataParallelGroups(msgspec.Struct, frozen=True, eq=False, dict=True):
    """The replicas that synchronise gradients: ``ranks`` of them ``stride`` GPUs apart for the dense
    parameters, and the max(ranks / ep, 1) replicas of one expert shard, ``stride x ep`` apart (routed
    experts are replicated over the expert-DP ranks only; ``ep`` here is the number of DP replicas one
    expert-grid row spans, ep etp / (tp cp), :attr:`ParallelGroups.expert_fold`: ep itself when etp = tp
    and cp = 1). Each is placed on first use."""

    network: Network
    ranks: np.ndarray
    stride: np.ndarray
    ep: np.ndarray
    cp: np.ndarray | None = None  # the context-parallel degree of each replica (None: not folded in, see sharding)

    @cached_property
    def dense(self) -> Placement:
        return place(self.ranks, self.stride, self.network)

    @cached_property
    def sharding(self) -> DataParallelGroups:
        """The ranks that shard the model states for these replicas: the replicas with their ``cp`` ranks, which
        hold the same weights (Megatron-Core's dp-cp group, torchtitan's ``dp_shard_cp``). cp sits directly inside
        dp in both rank orders, so the group is ranks x cp GPUs at stride / cp (contiguous under tp-cp-dp-pp;
        under tp-cp-pp-dp the uniform stride tp pp spans the same GPUs as the cp pairs tp apart and the replicas
        tp cp pp apart). The experts' group is the same (their fold, ep etp / (tp cp) replicas, already counts
        cp: ranks / fold and stride x fold do not change). Built once, so each group is placed once."""
        if self.cp is None:
            return self
        cp = self.cp.astype(float)
        return DataParallelGroups(self.network, self.ranks * cp, self.stride / cp, self.ep * cp)

    @cached_property
    def expert(self) -> Placement:
        # whole replicas (an etp x ep that does not divide the stage is flagged infeasible by the engine)
        return place(np.maximum(np.floor(self.ranks / self.ep + 1e-9), 1.0), self.stride * self.ep, self.network)


class ParallelGroups(msgspec.Struct, frozen=True, eq=False, dict=True):  # msgspec: built in C, unlike a dataclass
    """The parallel groups of a DP x TP x PP x CP (EP within DP) job in the rank order ``layout``
    (module docstring; :func:`rank_strides`), each placed once, on first use. Degrees and layout codes
    are broadcastable arrays (one element per candidate strategy)."""

    network: Network
    tp: np.ndarray
    cp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    pp: np.ndarray
    layout: np.ndarray = msgspec.field(default_factory=lambda: np.asarray(int(Layout.TP_CP_DP_PP)))

    @cached_property
    def strides(self) -> dict[str, np.ndarray]:
        """GPUs between consecutive members of the tp, cp, dp and pp groups (:func:`rank_strides`)."""
        return rank_strides(self.layout, tp=self.tp, cp=self.cp, dp=self.dp, pp=self.pp)

    @cached_property
    def tensor(self) -> Placement:
        """A TP group: tp GPUs, stride 1 (TP is innermost in every order)."""
        return place(self.tp, self.strides["tp"], self.network)

    @cached_property
    def context(self) -> Placement:
        """Two neighbours of a CP ring (ring attention passes K/V to the next CP rank): 2 ranks, stride tp."""
        return place(2.0, self.strides["cp"], self.network)

    @cached_property
    def context_group(self) -> Placement:
        """The whole CP group (cp ranks, stride tp): the all-gathers, reduce-scatters and all-to-alls of
        context parallelism by all_gather or a2a (strategy cp_comm_type)."""
        return place(self.cp.astype(float), self.strides["cp"] * 1.0, self.network)

    def context_levels(self, a2a: np.ndarray) -> tuple[Placement, Placement]:
        """Hierarchical CP (a2a+p2p) with ``a2a`` CP ranks per all-to-all group: (one all-to-all group: ``a2a``
        consecutive CP ranks, stride tp; two neighbours of the p2p ring across the groups: stride tp x a2a).
        Transformer Engine's ring sends to cp_global_ranks[(rank + 1) % cp_p2p * cp_a2a + rank_a2a]
        (context_parallel.py at NVIDIA/TransformerEngine@d0067d0)."""
        n_a = np.asarray(a2a, dtype=float)
        return (place(n_a, self.strides["cp"] * 1.0, self.network),
                place(2.0, self.strides["cp"] * n_a, self.network))

    etp: np.ndarray | None = None  # expert tensor parallelism; None = tp

    @cached_property
    def expert_tp(self) -> np.ndarray:
        """Expert-TP degree: ``etp``, else the attention TP degree (Megatron's default)."""
        return self.tp if self.etp is None else np.where(self.etp > 0, self.etp, self.tp)

    @cached_property
    def expert_fold(self) -> np.ndarray:
        """DP replicas one expert grid row spans: ep etp / (tp cp). The expert-DP group is then dp / this
        many replicas, this many replicas (etp ep GPUs) apart (module docstring)."""
        return (self.ep * self.expert_tp / (self.tp * self.cp)).astype(float)

    @cached_property
    def expert(self) -> Placement:
        """An EP group (all-to-all): ep ranks, stride etp (the expert grid's tp-ep-dp order; Megatron refuses
        an order with PP inside DP whose expert and dense DP degrees differ, Infeasible.LAYOUT_INVALID)."""
        return place(self.ep, self.expert_tp.astype(float), self.network)

    @cached_property
    def stage(self) -> np.ndarray:
        """GPUs per pipeline stage, tp cp dp."""
        return (self.tp * self.cp * self.dp).astype(float)

    @cached_property
    def stage_group(self) -> Placement:
        """All tp cp dp GPUs of one pipeline stage (Megatron-Core's tensor-and-data-parallel group with CP, the
        FP8 amax reduction group): consecutive in the default order; with PP inside DP, blocks of tp cp GPUs
        tp cp pp apart, placed as tp cp dp ranks pp apart (the same extent, the same ranks within each tier
        spanning a block of tp cp pp)."""
        return place(self.stage, self.strides["dp"] / (self.tp * self.cp), self.network)

    @cached_property
    def pp_stride(self) -> np.ndarray:
        """GPUs between pipeline neighbours: tp cp dp in the default order (a stage's block), tp cp with PP
        inside DP."""
        return self.strides["pp"] + 0.0 * self.stage

    @cached_property
    def pipeline(self) -> Placement:
        """The pipeline's slowest stage boundary: a sending and a receiving GPU at either end of the
        pipeline's block of pp_stride x max(pp, 2) GPUs (2 ranks, stride half the block), so the pair
        crosses the outermost tier the pipeline spans."""
        extent = self.pp_stride * np.maximum(self.pp, 2)
        return place(2.0, extent / 2, self.network)

    @cached_property
    def data(self) -> DataParallelGroups:
        """The whole DP group: dp replicas at the DP stride (tp cp, or tp cp pp with PP inside DP)."""
        return DataParallelGroups(self.network, self.dp.astype(float), self.strides["dp"] * 1.0, self.expert_fold,
                                  self.cp)

    def data_split(self, size: np.ndarray) -> tuple[DataParallelGroups, DataParallelGroups]:
        """Hierarchical synchronisation over groups of ``size`` DP replicas: (inside a group: ``size``
        consecutive replicas; across groups: max(dp / size, 1) replicas ``size`` replicas apart)."""
        base = self.strides["dp"]
        inner = DataParallelGroups(self.network, np.asarray(size, dtype=float), base * 1.0, self.expert_fold, self.cp)
        outer = DataParallelGroups(self.network, np.maximum(self.dp / size, 1.0), base * size, self.expert_fold)
        return inner, outer


def parallel_groups(network: Network, *, tp: object, cp: object, dp: object, ep: object, pp: object,
                    layout: object = 0, etp: object = None) -> ParallelGroups:
    """The job's parallel groups on ``network`` (degrees and Layout codes as broadcastable integer arrays;
    ``etp`` the expert-TP degree, None or 0 = tp)."""
    return ParallelGroups(network, tp=np.asarray(tp), cp=np.asarray(cp), dp=np.asarray(dp), ep=np.asarray(ep),
                          pp=np.asarray(pp), layout=np.asarray(layout), etp=None if etp is None else np.asarray(etp))
