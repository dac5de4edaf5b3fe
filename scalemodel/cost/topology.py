"""Topologies a tier's ``topology`` field selects besides the switched fat tree: direct-connect tori (k-ary
n-cube; ``topology: torus`` with ``torus_dims``, docs/model.md#torus) and rail-optimised leaves
(``topology: rail``, docs/model.md#rail).

A torus tier with dimensions ``d_1 x ... x d_n`` (one node per point, ``prod d_k`` nodes) gives every node two
links per dimension (one to each neighbour); the tier's ``bandwidth`` is, by the catalog convention, the sum
over a node's ``2n`` links per direction, so one link carries ``B_link = bandwidth x efficiency / (2n)`` per
direction.

- Ring all-reduce over every dimension at once (:func:`torus_allreduce`): dimension-ordered bidirectional rings
  (Mikami et al. 2018, arXiv:1811.05233, 2D-torus all-reduce: reduce-scatter along one dimension, all-reduce
  along the next on the shard, all-gather back; Ying et al. 2018, arXiv:1811.06992, the same 2-D summation on
  the TPU v3 pod torus, both directions of every ring) run on ``n`` shares of the data in rotated dimension
  orders, so every dimension's links are busy in every phase (jax-ml/scaling-book@0819a7d8 sharding.md L337-345:
  over ``n_axes`` mesh axes ``T = V / (W_ICI n_axes)``, ``W_ICI`` the bidirectional bandwidth of one axis).
  On ``d_1 = ... = d_n = d``:

  ``T = 2 n (d - 1) alpha + 2 (p - 1)/p S / (2 n B_link) + (p - 1)/p S gamma``

  reduce-scatter / all-gather: one sweep (half the latency and bandwidth terms).
- All-to-all, bisection-limited (Dally & Towles 2004, Principles and Practices of Interconnection Networks,
  chapters on topology basics and tori: a k-ary n-cube with wraparound is cut in half across its largest
  dimension on ``2 p / d_max`` links per direction, ``2 k^(n-1)`` for a k-ary n-cube; ``p / d_max`` if
  ``d_max = 2``, whose two wraparound links join the same pair): each of the ``p`` nodes sends ``S/p`` to
  every other, so ``p S / 4`` bytes cross the bisection each way, and no node can inject faster than its
  ``2n`` links:

  ``T = sum_k floor(d_k / 2) alpha + max(p S / 4 / (L_bis B_link), (p - 1)/p S / (2n B_link))``.

A group with one rank per torus node whose ranks run along whole dimensions takes the same forms on those
dimensions only (:func:`torus_groups`): torus nodes are numbered in mixed radix, the first dimension fastest,
so a group of ``p = d_k x ... x d_(m-1)`` ranks at a stride of ``d_1 x ... x d_(k-1)`` nodes is the
sub-torus of dimensions ``k .. m-1`` (wraparound included), and its rings use only those dimensions' links,
``B_link`` each as above (a 1-D group: one bidirectional ring, 2 of the node's ``2n`` links). This is how
JAX lays a device mesh on a TPU torus: ``jax.experimental.mesh_utils.create_device_mesh`` ->
``_create_device_mesh_for_nd_torus`` gives each logical axis, the last (most network-intensive) first,
the first free physical axis, or product of axes, whose size it equals, so MaxText's 16-way tensor axis on
a 16 x 16 v5e slice runs along one torus dimension. The group filling the torus (``k = 1``, ``m = n + 1``)
is the whole-torus case. Any other group on the tier (a partial dimension, an odd stride) is priced as on a
switch (a sub-block's geometry is not modelled).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scalemodel.cost.placement import Placement


def link_bandwidth(bandwidth: float, efficiency: float, dims: Sequence[int]) -> float:
    """Bytes/s per link per direction: the tier's per-node bandwidth (sum over its ``2n`` links) / (2n)."""
    return bandwidth * efficiency / (2.0 * len(dims))


def torus_allreduce(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float, gamma: float = 0.0,
                    *, op: str = "allreduce") -> np.ndarray:
    """Ring all-reduce (or one reduce-scatter / all-gather sweep) on a torus over all its ``n`` dimensions at once
    (module docstring; jax-ml/scaling-book@0819a7d8 sharding.md L337-345: a collective over several mesh axes has
    ``n_axes`` times the bandwidth of one; Mikami et al. 2018, Ying et al. 2018 for the dimension-ordered rings).

    The data is cut into ``n`` equal shares; share ``j`` runs bidirectional dimension-ordered rings in the order
    ``j, j+1, ..., j+n-1 (mod n)``, so in each of the ``n`` phases every dimension carries one share, both
    directions of both of its links busy. Phases run in lockstep, a phase as long as its slowest dimension:
    ``T = sum_t max_j [f (d - 1) alpha + f (d - 1)/d S_(j,t) / (2 B_link)] + (p - 1)/p S gamma``, ``d`` the
    dimension share ``j`` runs in phase ``t``, ``S_(j,t) = S / n / prod(its earlier dimensions)``, f = 2 for
    all-reduce else 1 (gamma for all-reduce and reduce-scatter). On ``d x ... x d`` (every catalog torus) the
    bandwidth term is ``f (p - 1)/p S / (2 n B_link)``, a node's bytes over all its ``2n`` links (the
    :func:`injection_floor`); a one-dimension group is one bidirectional ring on 2 links, as before."""
    S = np.asarray(S, dtype=float)
    sweeps = 2.0 if op == "allreduce" else 1.0
    axes = [float(d) for d in dims if d > 1]
    n = len(axes)
    t = np.zeros_like(S)
    for phase in range(n):
        slowest = np.zeros_like(S)
        for j in range(n):
            order = axes[j:] + axes[:j]
            d = order[phase]
            shard = S / n / float(np.prod(order[:phase]))
            slowest = np.maximum(slowest, sweeps * (d - 1.0) * alpha + sweeps * (d - 1.0) / d * shard / (2.0 * b_link))
        t = t + slowest
    if op in ("allreduce", "reducescatter") and n:
        p = float(np.prod(axes))
        t = t + (p - 1.0) / p * S * gamma
    return t


def bisection_links(dims: Sequence[int]) -> float:
    """Links per direction across the torus's bisection, cut across its largest dimension (module docstring)."""
    p = float(np.prod(dims))
    dmax = max(dims)
    return (2.0 if dmax > 2 else 1.0) * p / dmax


def torus_alltoall(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float) -> np.ndarray:
    """Bisection- or injection-limited all-to-all of ``S`` bytes per node on a torus (module docstring)."""
    S = np.asarray(S, dtype=float)
    p = float(np.prod(dims))
    if p <= 1:
        return np.zeros_like(S)
    bis = p * S / 4.0 / (bisection_links(dims) * b_link)
    inject = (p - 1.0) / p * S / (2.0 * len(dims) * b_link)
    return sum(d // 2 for d in dims) * alpha + np.maximum(bis, inject)


def torus_groups(pl: Placement) -> tuple[int, list[tuple[tuple[int, ...], np.ndarray]]] | None:
    """``(i, [(dims, mask), ...])``: the torus tier ``i`` (the outermost tier with ``torus_dims``) and, for
    each run of whole dimensions ``dims = d_k .. d_(m-1)``, where the group is that sub-torus: one rank per
    torus node (``c_(i-1) = 1``), ``p = prod dims`` ranks at a stride of ``span_(i-1) x d_1 x ... x d_(k-1)``
    GPUs (module docstring); None if no tier declares a torus."""
    tiers = pl.network.tiers
    idx = [i for i, t in enumerate(tiers) if t.topology == "torus" and t.torus_dims]
    if not idx:
        return None
    i = idx[-1]
    all_dims = tuple(int(d) for d in tiers[i].torus_dims)
    inner = float(pl.spans[i - 1]) if i > 0 else 1.0
    one_per_node = pl.c_prev(i) < 1.5
    out: list[tuple[tuple[int, ...], np.ndarray]] = []
    for k in range(len(all_dims)):
        stride = inner * float(np.prod(all_dims[:k]))
        for m in range(k + 1, len(all_dims) + 1):
            dims = all_dims[k:m]
            mask = one_per_node & (np.abs(pl.p - float(np.prod(dims))) < 0.5) & (np.abs(pl.stride - stride) < 0.5)
            out.append((dims, np.asarray(mask)))
    return i, out


def torus_group_mask(pl: Placement) -> np.ndarray | None:
    """Where the placed group is a (sub-)torus of whole dimensions of the torus tier (:func:`torus_groups`), the
    groups the torus forms price link by link; None if no tier declares a torus."""
    found = torus_groups(pl)
    if found is None:
        return None
    mask = np.zeros(np.shape(pl.p), dtype=bool)
    for _, where in found[1]:
        mask = mask | where
    return mask


#: Bytes a node must receive, in units of ``(p - 1)/p S`` (nccl-tests size convention), per collective.
INJECTION_SWEEPS = {"allreduce": 2.0, "reducescatter": 1.0, "allgather": 1.0, "alltoall": 1.0}


def _on_torus_groups(op: str, S: np.ndarray, pl: Placement,
                     form: Callable[[tuple[int, ...], float, float], np.ndarray]
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)``: ``form(dims, alpha, b_link)`` where the group is a (sub-)torus of the torus tier
    (:func:`torus_groups`), with that tier's hop latency and ``B_link``; None where nothing applies."""
    found = torus_groups(pl)
    if found is None or op not in INJECTION_SWEEPS:
        return None
    i, groups = found
    b_link = link_bandwidth(float(pl.bandwidth[i]), float(pl.efficiency[i]), pl.network.tiers[i].torus_dims)
    alpha = float(pl.alpha[i])
    shape = np.broadcast(np.asarray(S, dtype=float), pl.p).shape
    mask = np.zeros(shape, dtype=bool)
    t = np.zeros(shape)
    for dims, where in groups:
        if np.any(where):
            t = np.where(where, form(dims, alpha, b_link), t)
            mask = mask | where
    return (mask, t) if np.any(mask) else None


def torus_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)`` of ``op`` on a group that is a torus tier or a sub-torus of whole dimensions of it
    (:func:`torus_groups`; all-reduce, reduce-scatter, all-gather: :func:`torus_allreduce`; all-to-all:
    :func:`torus_alltoall`, both on the group's dimensions only), with the placement's hop latency and line
    rate of that tier (so NCCL's protocol layer may relink them); None where nothing applies."""
    def form(dims: tuple[int, ...], alpha: float, b_link: float) -> np.ndarray:
        if op == "alltoall":
            return torus_alltoall(S, dims, alpha, b_link)
        return torus_allreduce(S, dims, alpha, b_link, gamma, op=op)
    return _on_torus_groups(op, S, pl, form)


def injection_floor(op: str, S: np.ndarray, pl: Placement) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)``: the least time any algorithm needs on a (sub-)torus group, a node's bytes in over the
    ``2 |dims|`` links of the group's dimensions (the only links joining it to the group's other nodes):
    ``sweeps x (p - 1)/p x S / (2 |dims| B_link)`` (:data:`INJECTION_SWEEPS`; docs/model.md#torus)."""
    sweeps = INJECTION_SWEEPS.get(op, 0.0)

    def form(dims: tuple[int, ...], alpha: float, b_link: float) -> np.ndarray:
        p = float(np.prod(dims))
        return sweeps * (p - 1.0) / p * np.asarray(S, dtype=float) / (2.0 * len(dims) * b_link)
    return _on_torus_groups(op, S, pl, form)


def floored(op: str, S: np.ndarray, pl: Placement, t: np.ndarray) -> np.ndarray:
    """``t`` (any algorithm's time) no less than the :func:`injection_floor` where the group is a (sub-)torus:
    its partners are reached over the links of its torus dimensions only, which the switch pricing of rhd,
    rd, tree, direct and hierarchical would overstate (docs/model.md#torus)."""
    floor = injection_floor(op, S, pl)
    return t if floor is None else np.where(floor[0], np.maximum(t, floor[1]), t)


def pxn_fraction(pl: Placement, i: int) -> np.ndarray:
    """Share of a rank's peers across tier ``i`` that sit on another rail, when tier ``i`` or a tier between
    it and the node is rail-optimised (``topology: rail``; docs/model.md#rail); 0 otherwise.

    Rail-optimised (NVIDIA DGX SuperPOD reference architecture): NIC j of every node plugs into rail switch j,
    so GPU j of one node reaches GPU j of another on its own rail. Traffic to another index goes over NVLink
    first to the local GPU on the destination's rail and leaves through that GPU's NIC (NCCL's PXN, 2.12+).
    With ``c_0`` group ranks per node on distinct indices, ``(c_0 - 1)/c_0`` of a rank's peers in other nodes
    are on another rail. Ring, tree, RHD/RD and hierarchical partners in other nodes are ``c_0`` ranks (a whole
    node of GPUs) apart, so they share the index and never need PXN; direct exchanges do."""
    tiers = pl.network.tiers
    if i < 1 or not any(t.topology == "rail" for t in tiers[1:i + 1]):
        return np.zeros_like(pl.p)
    return (pl.c[0] - 1.0) / pl.c[0]
