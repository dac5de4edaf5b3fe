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
- The other algorithms of the collective table on such a group (torus31), each from the links its rank-order
  mapping loads: ``rhd`` / ``rd`` (:func:`torus_recursive`: the partner ``2^g`` ranks away is ``delta`` hops along
  one dimension and ``delta`` messages share the busiest link), ``direct`` (:func:`torus_direct`: the traffic of an
  all-to-all), ``hierarchical`` (:func:`torus_allreduce` unrotated: Mikami et al.'s schedule, one dimension at a
  time) and the double binary ``tree`` (:func:`tree_loads`, priced in ``algorithms.tree_time``). Broadcast and
  reduce (tpu32): the ``ring`` chain (:func:`chain_loads`), the ``tree``'s down or up sweep (:func:`tree_loads`),
  ``rhd``'s binomial scatter + all-gather / reduce-scatter + binomial gather (:func:`torus_scatter_gather`); ``rd``'s
  all-to-all (Bruck): :func:`torus_bruck`.

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
switch (a sub-block's geometry is not modelled), held since tpu33 at no less than a node's bytes over the 2
links of its dimension where it is a segment of one dimension, each byte over ``j`` of them where its ranks are ``j``
nodes apart (review33a; :func:`segment_groups`, :func:`injection_floor`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from scalemodel.cost.placement import Placement


def link_bandwidth(bandwidth: float, efficiency: float, dims: Sequence[int]) -> float:
    """Bytes/s per link per direction: the tier's per-node bandwidth (sum over its ``2n`` links) / (2n)."""
    return bandwidth * efficiency / (2.0 * len(dims))


def torus_allreduce(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float, gamma: float = 0.0,
                    *, op: str = "allreduce", rotate: bool = True) -> np.ndarray:
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
    :func:`injection_floor`); a one-dimension group is one bidirectional ring on 2 links, as before.
    ``rotate=False`` runs the whole buffer as one share in the dimensions' order (Mikami et al.'s 2D-torus
    schedule as published, one dimension's links busy at a time): the ``hierarchical`` algorithm on a torus
    group (torus31)."""
    S = np.asarray(S, dtype=float)
    sweeps = 2.0 if op == "allreduce" else 1.0
    axes = [float(d) for d in dims if d > 1]
    n = len(axes)
    shares = n if rotate else min(n, 1)
    t = np.zeros_like(S)
    for phase in range(n):
        slowest = np.zeros_like(S)
        for j in range(shares):
            order = axes[j:] + axes[:j]
            d = order[phase]
            shard = S / shares / float(np.prod(order[:phase]))
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


def _power_of_two(dims: Sequence[int]) -> bool:
    return all(d >= 1 and d & (d - 1) == 0 for d in dims)


def _rank_bits(dims: Sequence[int]) -> list[float]:
    """For each bit ``g`` of a group rank (mixed radix, the first dimension fastest, every extent a power of two),
    the hop distance ``delta`` of the partner ``2^g`` ranks away: ``2^(g - o_j)`` in the dimension ``j`` holding
    bit ``g`` (``o_j`` its first bit), shortest path on its ring (``delta <= d_j / 2``)."""
    return [float(2 ** b) for d in dims for b in range(int(d).bit_length() - 1)]


def torus_recursive(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float, gamma: float = 0.0,
                    *, op: str, algorithm: str) -> np.ndarray | None:
    """Recursive halving-doubling (``rhd``) or recursive doubling (``rd``) on a (sub-)torus group whose extents are
    powers of two, each step priced on the links its pairs really load (docs/model.md#torus, torus31); None where
    an extent is not a power of two (MPICH's pairs then cross dimensions; not modelled).

    The partner ``2^g`` ranks away lies ``delta_g`` hops along one dimension (:func:`_rank_bits`). On shortest
    paths the lower node of each pair sends ``delta`` hops one way and the upper the other way; of any ``delta``
    consecutive nodes of the ring, all ``delta`` are lower nodes where the blocks align, so the busiest directed
    link carries ``delta`` messages at once: a step of ``m`` bytes costs ``delta (alpha + m / B_link)`` (the
    latency by hop count, store-and-forward). MPICH's partner orders and message sizes as on a switch
    (:func:`scalemodel.cost.algorithms.rhd_time`, :func:`~scalemodel.cost.algorithms.rd_time`):

    - rhd reduce-scatter / all-gather: bit ``g`` with ``S / 2^(g+1)``; all-reduce both sweeps;
    - rd all-reduce: bit ``g`` with ``S`` (+ ``S gamma`` a step); all-gather and reduce-scatter: bit ``g`` with
      ``S 2^g / p``.

    Plus ``(p - 1)/p S gamma`` for reduce-scatter and rhd all-reduce. tests/test_torus31.py moves every pair's
    message hop by hop on 4x4, 4x4x4 and 16x16 tori and checks each step's busiest link."""
    if not _power_of_two(dims):
        return None
    S = np.asarray(S, dtype=float)
    p = float(np.prod(dims))
    t = np.zeros_like(S)
    for g, delta in enumerate(_rank_bits(dims)):
        if algorithm == "rhd":
            m = S / 2.0 ** (g + 1)
        elif op == "allreduce":
            m = S
        else:
            m = S * 2.0 ** g / p
        t = t + delta * (alpha + m / b_link)
        if algorithm == "rd" and op == "allreduce":
            t = t + S * gamma
    if algorithm == "rhd" and op == "allreduce":
        t = 2.0 * t
    if op == "reducescatter" or (algorithm == "rhd" and op == "allreduce"):
        t = t + (p - 1.0) / p * S * gamma
    return t


def torus_scatter_gather(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float,
                         gamma: float = 0.0, *, op: str) -> np.ndarray | None:
    """``rhd`` broadcast and reduce on a (sub-)torus group whose extents are powers of two (tpu32,
    docs/model.md#torus-algorithms); None otherwise (not modelled, as :func:`torus_recursive`). MPICH's schedules
    (pmodels/mpich src/mpi/coll/reduce/reduce_intra_reduce_scatter_gather.c; Thakur et al. 2005 §4):

    - broadcast (van de Geijn): a binomial scatter, farthest partner first, the root's subtree sending the
      ``S 2^g / p`` of the other half to the rank ``2^g`` away; the senders of that step lie ``2 delta_g`` apart
      along the dimension (one a ring at its top bit), so each link carries one message:
      ``sum_g (delta_g alpha + S 2^g / p / B_link)``; then the recursive-doubling all-gather
      (:func:`torus_recursive`, ``rd``: ``sum_g delta_g (alpha + S 2^g / p / B_link)``).
    - reduce (Rabenseifner): the recursive-halving reduce-scatter beginning at distance 1
      (``sum_g delta_g (alpha + S / 2^(g+1) / B_link)`` + ``(p - 1)/p S gamma``), then the binomial gather
      ``mask = p/2 .. 1``, the ``2^g`` ranks ``[2^g, 2^(g+1))`` each sending its ``S / 2^(g+1)`` ``delta_g``
      hops down: the ``delta_g`` consecutive senders of a ring all cross its link into ``delta_g``, so that link
      carries ``delta_g`` messages, the same cost as the reduce-scatter's step: the ``rhd`` all-reduce's form."""
    if not _power_of_two(dims):
        return None
    if op == "reduce":
        return torus_recursive(S, dims, alpha, b_link, gamma, op="allreduce", algorithm="rhd")
    S = np.asarray(S, dtype=float)
    p = float(np.prod(dims))
    t = np.asarray(torus_recursive(S, dims, alpha, b_link, op="allgather", algorithm="rd"))
    for g, delta in enumerate(_rank_bits(dims)):  # the scatter's steps
        t = t + delta * alpha + S * 2.0 ** g / p / b_link
    return t


def _loads(dims: Sequence[int], pairs: Sequence[tuple[int, int]]) -> tuple[int, int, int]:
    """``(most hops, total hops, most messages on one directed link)`` of messages sent at once between the rank
    pairs, each routed by :func:`_route`."""
    load: dict[tuple[int, int, int], int] = {}
    longest = total = 0
    for a, b in pairs:
        path = _route(dims, a, b)
        longest, total = max(longest, len(path)), total + len(path)
        for link in path:
            load[link] = load.get(link, 0) + 1
    return longest, total, max(load.values(), default=0)


@lru_cache(maxsize=64)
def bruck_loads(dims: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """Per round ``k`` of Bruck's all-to-all on a torus group in rank order: ``(hops, messages on the busiest
    directed link, blocks sent)``. Round ``k`` (``k < ceil(lg p)``) sends every rank's blocks whose index has bit
    ``k`` set to the rank ``2^k`` ahead (mod p) (Bruck et al. 1997; Thakur et al. 2005 §4.6): ``2^k`` ranks ahead
    is ``delta`` hops along the dimension holding bit ``k`` plus a carry of one hop into each following dimension
    where the coordinate wraps, so the hops and shared links are counted message by message (tpu32)."""
    p = int(np.prod(dims))
    out = []
    for k in range(max(p - 1, 0).bit_length()):
        hops, _, load = _loads(dims, [(r, (r + (1 << k)) % p) for r in range(p)])
        out.append((hops, load, sum((i >> k) & 1 for i in range(p))))
    return tuple(out)


def torus_bruck(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float) -> np.ndarray:
    """Bruck's all-to-all (``rd``) of ``S`` bytes a rank on a (sub-)torus group: round ``k`` costs its longest
    message's hops x alpha plus its busiest link's messages x its blocks x ``S / p`` / B_link
    (:func:`bruck_loads`; on a switch every round is one uncontended ``S/2``)."""
    S = np.asarray(S, dtype=float)
    p = float(np.prod(dims))
    t = np.zeros_like(S)
    for hops, load, blocks in bruck_loads(tuple(dims)):
        t = t + hops * alpha + load * blocks * S / p / b_link
    return t


@lru_cache(maxsize=64)
def chain_loads(dims: tuple[int, ...], reduce: bool = False) -> tuple[int, int]:
    """``(H, E)`` of NCCL's pipelined ring chain through the group's ranks in order, root 0, both along
    ``ring->next`` (NVIDIA/nccl@5067397c src/device/broadcast.h L16-17, L44-53: the root sends, the rank before it
    only receives; reduce.h L18, L31-50: the rank after the root sends, the root receives last): the broadcast
    ``0 -> 1 -> .. -> p-1``, the ``reduce`` ``1 -> .. -> p-1 -> 0`` (review32c: tpu32 ran it ``p-1 -> .. -> 0``, one
    hop short in 2-D, two in 3-D). ``H`` the hops of the whole chain (a step ``r -> r + 1`` is one hop plus one for
    every dimension it carries into; ``p-1 -> 0`` one a dimension), ``E`` the most chain edges on one directed
    link (tpu32)."""
    p = int(np.prod(dims))
    pairs = [(r, (r + 1) % p) for r in (range(1, p) if reduce else range(p - 1))]
    _, total, load = _loads(dims, pairs)
    return total, load


def torus_direct(S: np.ndarray | float, dims: Sequence[int], alpha: float, b_link: float, gamma: float = 0.0,
                 *, op: str) -> np.ndarray:
    """One-shot ``direct`` all-reduce / reduce-scatter / all-gather on a (sub-)torus group: every node sends ``m``
    to each of the ``p - 1`` others at once (``m = S`` all-reduce, ``S / p`` otherwise), the traffic of an
    all-to-all of ``p m`` bytes a node, so :func:`torus_alltoall` prices it (bisection or injection, one round of
    the torus diameter's hops); ``+ (p - 1) m gamma`` for the reductions (torus31)."""
    S = np.asarray(S, dtype=float)
    p = float(np.prod(dims))
    m = S if op == "allreduce" else S / p
    t = torus_alltoall(p * m, dims, alpha, b_link)
    return t + ((p - 1.0) * m * gamma if op in ("allreduce", "reducescatter") else 0.0)


def _tree_parent(r: int, p: int) -> int:
    """Parent of rank ``r`` in NCCL's binary tree of ``p`` ranks (-1 at the root, rank 0): NVIDIA/nccl v2.30.7
    src/graph/trees.cc ``ncclGetBtree``, ``up = (rank ^ bit) | (bit << 1)``, ``rank ^ bit`` when that is >= p."""
    if r == 0:
        return -1
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    return r ^ bit if up >= p else up


def _tree_parent2(r: int, p: int) -> int:
    """Parent in the second tree (trees.cc ``ncclGetDtree``): the first tree mirrored (``p - 1 - r``) for even p,
    shifted by one rank for odd p."""
    if p % 2:
        u = _tree_parent((r - 1 + p) % p, p)
        return -1 if u < 0 else (u + 1) % p
    u = _tree_parent(p - 1 - r, p)
    return -1 if u < 0 else p - 1 - u


def _route(dims: Sequence[int], a: int, b: int) -> list[tuple[int, int, int]]:
    """Directed links ``(node, dimension, +1 / -1)`` a message from rank ``a`` to rank ``b`` crosses, dimension
    by dimension in order, each the shorter way round its ring (the raw direction on a tie)."""
    links: list[tuple[int, int, int]] = []
    cur, unit = a, 1
    for j, d in enumerate(dims):
        x, y = (cur // unit) % d, (b // unit) % d
        diff = y - x
        step = 1 if diff > 0 else -1
        hops = abs(diff)
        if 2 * hops > d:
            step, hops = -step, d - hops
        for _ in range(hops):
            links.append((cur, j, step))
            nxt = (x + step) % d
            cur += (nxt - x) * unit
            x = nxt
        unit *= d
    return links


@lru_cache(maxsize=64)
def tree_loads(dims: tuple[int, ...], sweep: str = "both") -> tuple[int, int]:
    """``(E, H)`` of NCCL's double binary tree (:func:`_tree_parent`, :func:`_tree_parent2`) on a torus group in
    rank order: ``E`` the most edge traversals on one directed link (every edge carries its tree's half of the data
    up, child to parent, and down, parent to child, on its routed path, :func:`_route`; ``sweep`` "down" counts
    the parent-to-child paths only (broadcast), "up" the child-to-parent ones (reduce), tpu32), ``H`` the most
    hops from a rank to its tree's root. Counted edge by edge (torus31; the tree's edges join ranks ``2^g`` apart
    but carry into the next dimension, so no closed form is claimed)."""
    p = int(np.prod(dims))
    load: dict[tuple[int, int, int], int] = {}
    depth = 0
    for parent in (_tree_parent, _tree_parent2):
        for r in range(p):
            hops, node = 0, r
            while (up := parent(node, p)) >= 0:
                hops += len(_route(dims, node, up))
                node = up
            depth = max(depth, hops)
            u = parent(r, p)
            if u < 0:
                continue
            paths = {"up": _route(dims, r, u), "down": _route(dims, u, r)}
            for link in (paths["up"] + paths["down"] if sweep == "both" else paths[sweep]):
                load[link] = load.get(link, 0) + 1
    return max(load.values(), default=0), depth


def _torus_tier(pl: Placement) -> tuple[int, tuple[int, ...], float, np.ndarray] | None:
    """``(i, dims, inner, one_per_node)``: the torus tier ``i`` (the outermost tier with ``torus_dims``), its
    dimensions, the GPUs of one of its nodes (``span_(i-1)``) and where the group has one rank a node; None if no
    tier declares a torus."""
    tiers = pl.network.tiers
    idx = [i for i, t in enumerate(tiers) if t.topology == "torus" and t.torus_dims]
    if not idx:
        return None
    i = idx[-1]
    inner = float(pl.spans[i - 1]) if i > 0 else 1.0
    return i, tuple(int(d) for d in tiers[i].torus_dims), inner, np.asarray(pl.c_prev(i) < 1.5)


def torus_groups(pl: Placement) -> tuple[int, list[tuple[tuple[int, ...], np.ndarray]]] | None:
    """``(i, [(dims, mask), ...])``: the torus tier ``i`` (the outermost tier with ``torus_dims``) and, for
    each run of whole dimensions ``dims = d_k .. d_(m-1)``, where the group is that sub-torus: one rank per
    torus node (``c_(i-1) = 1``), ``p = prod dims`` ranks at a stride of ``span_(i-1) x d_1 x ... x d_(k-1)``
    GPUs (module docstring); None if no tier declares a torus."""
    tier = _torus_tier(pl)
    if tier is None:
        return None
    i, all_dims, inner, one_per_node = tier
    out: list[tuple[tuple[int, ...], np.ndarray]] = []
    for k in range(len(all_dims)):
        stride = inner * float(np.prod(all_dims[:k]))
        for m in range(k + 1, len(all_dims) + 1):
            dims = all_dims[k:m]
            mask = one_per_node & (np.abs(pl.p - float(np.prod(dims))) < 0.5) & (np.abs(pl.stride - stride) < 0.5)
            out.append((dims, np.asarray(mask)))
    return i, out


#: Bytes a node must receive, in units of ``(p - 1)/p S`` (nccl-tests size convention), per collective.
INJECTION_SWEEPS = {"allreduce": 2.0, "reducescatter": 1.0, "allgather": 1.0, "alltoall": 1.0}

#: The operations priced link by link on a (sub-)torus group (torus31; broadcast and reduce since tpu32)
TORUS_OPS = frozenset(INJECTION_SWEEPS) | {"broadcast", "reduce"}


def on_torus_groups(op: str, S: np.ndarray, pl: Placement,
                    form: Callable[[tuple[int, ...], float, float], np.ndarray | None]
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)``: ``form(dims, alpha, b_link)`` where the group is a (sub-)torus of the torus tier
    (:func:`torus_groups`) and the form applies (not None), with that tier's hop latency and ``B_link``; None
    where nothing applies."""
    found = torus_groups(pl)
    if found is None or op not in TORUS_OPS:
        return None
    i, groups = found
    b_link = link_bandwidth(float(pl.bandwidth[i]), float(pl.efficiency[i]), pl.network.tiers[i].torus_dims)
    alpha = float(pl.alpha[i])
    shape = np.broadcast(np.asarray(S, dtype=float), pl.p).shape
    mask = np.zeros(shape, dtype=bool)
    t = np.zeros(shape)
    for dims, where in groups:
        if np.any(where):
            value = form(dims, alpha, b_link)
            if value is None:
                continue
            t = np.where(where, value, t)
            mask = mask | where
    return (mask, t) if np.any(mask) else None


def torus_time(op: str, S: np.ndarray, pl: Placement, gamma: float = 0.0, algorithm: str = "ring"
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)`` of ``op`` by ``algorithm`` on a group that is a torus tier or a sub-torus of whole
    dimensions of it (:func:`torus_groups`), on the group's dimensions only: all-to-all by
    ``direct``: :func:`torus_alltoall`, by ``rd`` (Bruck): :func:`torus_bruck`; broadcast and reduce by ``rhd``:
    :func:`torus_scatter_gather` (``ring``, ``tree``: ``algorithms.ring_time`` with :func:`chain_loads`,
    ``algorithms.tree_time`` with :func:`tree_loads`); all-reduce, reduce-scatter, all-gather by ``ring``:
    :func:`torus_allreduce`, ``hierarchical``: the same unrotated, ``rhd`` / ``rd``: :func:`torus_recursive`,
    ``direct``: :func:`torus_direct` (``tree``: ``algorithms.tree_time`` with :func:`tree_loads`); with the
    placement's hop latency and line rate of that tier (so NCCL's protocol layer may relink them); None where
    nothing applies."""
    def form(dims: tuple[int, ...], alpha: float, b_link: float) -> np.ndarray | None:
        if op == "alltoall":
            return torus_bruck(S, dims, alpha, b_link) if algorithm == "rd" else torus_alltoall(S, dims, alpha, b_link)
        if op in ("broadcast", "reduce"):
            return torus_scatter_gather(S, dims, alpha, b_link, gamma, op=op) if algorithm == "rhd" else None
        if algorithm in ("rhd", "rd"):
            return torus_recursive(S, dims, alpha, b_link, gamma, op=op, algorithm=algorithm)
        if algorithm == "direct":
            return torus_direct(S, dims, alpha, b_link, gamma, op=op)
        return torus_allreduce(S, dims, alpha, b_link, gamma, op=op, rotate=algorithm != "hierarchical")
    return on_torus_groups(op, S, pl, form)


def torus_unpriced(op: str, algorithm: str, pl: Placement) -> np.ndarray | None:
    """Where the group is a (sub-)torus (:func:`torus_groups`) but ``algorithm``'s ``op`` has no link-level
    torus form (rhd / rd on an extent that is not a power of two, all-to-all's Bruck excepted): ``auto`` does not
    weigh that switch price there (``nccl.auto_eligible``); None if no tier declares a torus."""
    found = torus_groups(pl)
    if found is None:
        return None
    mask = np.zeros(np.shape(pl.p), dtype=bool)
    recursive = (op in INJECTION_SWEEPS and op != "alltoall" and algorithm in ("rhd", "rd")) or (
        op in ("broadcast", "reduce") and algorithm == "rhd")
    if recursive:
        for dims, where in found[1]:
            if not _power_of_two(dims):
                mask = mask | where
    return mask


def segment_groups(pl: Placement) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]] | None:
    """``(i, [(mask, hops), ...])``: the torus tier ``i`` (as :func:`torus_groups`) and, for each of its dimensions
    ``d_k``, where the group is a segment of it: one rank per torus node, ``p > 1`` ranks ``j`` nodes apart along
    that dimension (a stride of ``j x span_(i-1) x d_1 x ... x d_(k-1)`` GPUs, ``j`` a whole number) with ``p j``
    dividing ``d_k``, other than a whole dimension (``j = 1``, ``p = d_k``: :func:`torus_groups`); ``hops`` is ``j``,
    the fewest links of that dimension between two members (tpu33; ``j > 1``, review33a). Under SPMD every group of
    the mesh axis runs the same collective at once and together they hold every node; a byte between two members
    must change its coordinate along ``d_k`` by a multiple of ``j``, so it crosses at least ``j`` links of that
    dimension whatever route it takes, and the torus has 2 of them a node and direction
    (docs/model.md#torus-segment). None if no tier declares a torus."""
    tier = _torus_tier(pl)
    if tier is None:
        return None
    i, all_dims, inner, one_per_node = tier
    p = np.rint(pl.p)
    out = []
    for k, d in enumerate(all_dims):
        hops = pl.stride / (inner * float(np.prod(all_dims[:k])))
        j = np.rint(hops)
        span = p * np.maximum(j, 1.0)
        part = ((p > 1.5) & (j > 0.5) & (np.abs(hops - j) < 1e-9) & (span < d + 0.5)
                & (np.mod(d, span) < 0.5) & ~((j < 1.5) & (p > d - 0.5)))
        out.append((np.asarray(one_per_node & part), np.maximum(j, 1.0)))
    return i, out


def injection_floor(op: str, S: np.ndarray, pl: Placement) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mask, time)``: the least time any algorithm needs on a (sub-)torus group, a node's bytes in over the
    ``2 |dims|`` links of the group's dimensions (the only links joining it to the group's other nodes):
    ``sweeps x (p - 1)/p x S / (2 |dims| B_link)`` (:data:`INJECTION_SWEEPS`; docs/model.md#torus); on a segment
    of one dimension (:func:`segment_groups`, tpu33) its bytes over that dimension's 2 links a node, each byte
    over at least ``j`` of them: ``sweeps x j x (p - 1)/p x S / (2 B_link)`` (``j = 1``: the bidirectional
    ring's bandwidth term)."""
    if op not in INJECTION_SWEEPS:
        return None
    sweeps = INJECTION_SWEEPS[op]

    def form(dims: tuple[int, ...], alpha: float, b_link: float) -> np.ndarray:
        p = float(np.prod(dims))
        return sweeps * (p - 1.0) / p * np.asarray(S, dtype=float) / (2.0 * len(dims) * b_link)
    whole = on_torus_groups(op, S, pl, form)
    seg = segment_groups(pl)
    if seg is None:
        return whole
    i, groups = seg
    shape = np.broadcast(np.asarray(S, dtype=float), pl.p).shape
    where, hops = np.zeros(shape, dtype=bool), np.ones(shape)
    for m, j in groups:
        where, hops = where | m, np.where(m, j, hops)
    if not np.any(where):
        return whole
    b_link = link_bandwidth(float(pl.bandwidth[i]), float(pl.efficiency[i]), pl.network.tiers[i].torus_dims)
    p = np.maximum(pl.p, 1.0)
    t_seg = sweeps * hops * (p - 1.0) / p * np.asarray(S, dtype=float) / (2.0 * b_link)
    if whole is None:
        return where, np.where(where, t_seg, 0.0)
    return whole[0] | where, np.where(where, t_seg, whole[1])


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
