"""Collective operations over a multi-tier network: the entry points, in nccl-tests terms.

``collective_time(op, S, p, network, stride=s)`` is the time of collective ``op`` of ``S`` bytes over
``p`` ranks placed ``s`` GPUs apart, in three steps, each in its own module:

1. :mod:`scalemodel.cost.placement`: which tiers the group spans (``c_i`` ranks per domain of tier i)
   and the per-tier hop latency and effective bandwidth (line rate x efficiency / oversubscription);
2. :mod:`scalemodel.cost.algorithms`: the alpha-beta(-gamma) time of each algorithm (ring, tree, RHD,
   RD, direct, hierarchical) on those tiers (Thakur et al. 2005; Sanders et al. 2009; Cho et al. 2019);
3. :mod:`scalemodel.cost.nccl`: NCCL 2.30.7's protocol lines (LL/LL128/Simple), base latencies,
   channel ramp and Tree corrections, and the ``auto`` choice among the algorithms NCCL implements.

Size convention as nccl-tests (doc/PERFORMANCE.md): ``S`` is the full buffer for all-reduce,
broadcast and reduce, the FULL gathered buffer for all-gather and reduce-scatter (each rank holding
S/p), the total sent per rank for all-to-all; sizes are rounded up to whole ``dtype_bytes`` elements.
algbw = S / t; busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter, all-gather, all-to-all),
1 (broadcast, reduce, send/recv). Callers that place a group once and price many collectives on it
(the step model) use :func:`group_time` with a :class:`~scalemodel.cost.placement.Placement`.
See docs/model.md#collectives and docs/model.md#nccl.
"""

from __future__ import annotations

import math

import numpy as np

from scalemodel.cost import algorithms, nccl, transport
from scalemodel.cost.algorithms import ALGORITHMS, allowed, busbw_factor, check_op
from scalemodel.cost.network import Network
from scalemodel.cost.placement import Placement, checked_array, place
from scalemodel.errors import InputError

_SMALL = 1e-300


def _size(size_bytes: object, dtype_bytes: int) -> np.ndarray:
    """The message size in whole elements, as nccl-tests counts it."""
    if not (isinstance(dtype_bytes, (int, np.integer)) and dtype_bytes >= 1):
        raise InputError(f"dtype_bytes must be a positive integer, got {dtype_bytes!r}", where="dtype_bytes",
                         allowed="1, 2, 4 or 8")
    S = checked_array(size_bytes, "size_bytes")
    return np.ceil(S / dtype_bytes) * dtype_bytes


def _check_request(op: str, algorithm: str, family: str, network: Network) -> None:
    check_op(op)
    if algorithm == "auto":
        nccl.resolve_family(network, family)
    elif algorithm not in ALGORITHMS:
        raise InputError(f"unknown algorithm {algorithm!r}", where="algorithm", allowed=allowed(op))


def _registration(S: np.ndarray, pl: Placement) -> np.ndarray:
    """RDMA memory registration not amortised by buffer reuse, charged once per collective on the group's
    outermost tier (:func:`scalemodel.cost.transport.registration_per_call`, docs/model.md#transport); 0 for
    p = 1 and on every tier that registers once (the default)."""
    if all(math.isinf(t.registration_reuse) for t in pl.network.tiers):
        return np.zeros(())
    return np.where(pl.p > 1, transport.registration_per_call(S, pl.network.tiers, pl.tier), 0.0)


def group_time(op: str, size_bytes: object, placement: Placement, *, algorithm: str = "auto", dtype_bytes: int = 2,
               gamma: float = 0.0, family: str = "auto") -> np.ndarray:
    """:func:`collective_time` on a group already placed (:func:`scalemodel.cost.placement.place`)."""
    return priced_group_time(op, size_bytes, placement, algorithm=algorithm, dtype_bytes=dtype_bytes, gamma=gamma,
                             family=family).time


def priced_group_time(op: str, size_bytes: object, placement: Placement, *, algorithm: str = "auto",
                      dtype_bytes: int = 2, gamma: float = 0.0, family: str = "auto") -> nccl.Priced:
    """:func:`group_time` with the hierarchical all-reduce's seconds its ``auto`` choice weighed, registration
    included in both (:class:`scalemodel.cost.nccl.Priced`: NCCL's in-network reduction where it applies, inf
    where nothing was weighed); docs/model.md#contention compares the two, so the NVLS price is not computed
    again."""
    _check_request(op, algorithm, family, placement.network)
    S = _size(size_bytes, dtype_bytes)
    t, hier = nccl.priced_collective(op, S, placement, algorithm=algorithm, gamma=gamma, family=family)
    reg = _registration(S, placement)
    return nccl.Priced(t + reg, hier + reg)


def collective_time(op: str, size_bytes: object, ranks: object, network: Network, *, algorithm: str = "auto",
                    stride: object = 1, dtype_bytes: int = 2, gamma: float = 0.0, family: str = "auto"
                    ) -> np.ndarray:
    """Seconds for collective ``op`` of ``size_bytes`` over ``ranks`` GPUs placed ``stride`` apart.

    Size convention as nccl-tests (module docstring). ``algorithm="auto"`` takes the fastest algorithm of
    ``family`` per element (:func:`scalemodel.cost.nccl.collective_time`): on GPU clusters only what NCCL
    implements (ring, tree; NVLS/CollNet as ``hierarchical`` where a tier declares in-network reduction;
    ``direct`` for all-to-all and send/recv). ``rhd``, ``rd``, ``direct`` and ``hierarchical`` stay
    selectable by name, and ``family="all"`` lets ``auto`` consider them. Broadcasts over size, ranks and
    stride; p = 1 costs 0.
    """
    _check_request(op, algorithm, family, network)
    S = _size(size_bytes, dtype_bytes)
    pl = place(ranks, stride, network)
    return nccl.collective_time(op, S, pl, algorithm=algorithm, gamma=gamma, family=family) + _registration(S, pl)


def best_algorithm(op: str, size_bytes: object, ranks: object, network: Network, *, stride: object = 1,
                   dtype_bytes: int = 2, gamma: float = 0.0, family: str = "auto"
                   ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
    """Every applicable algorithm's time and the fastest eligible one per element
    (:func:`scalemodel.cost.nccl.best_algorithm`): ``(times, names, best_index, best_time)``."""
    nccl.resolve_family(network, family)
    check_op(op)
    S = _size(size_bytes, dtype_bytes)
    return nccl.best_algorithm(op, S, place(ranks, stride, network), gamma=gamma, family=family)


def algorithm_time(op: str, algorithm: str, size_bytes: object, ranks: object, network: Network, *,
                   stride: object = 1, gamma: float = 0.0, protocols: tuple[str, ...] | None = None) -> np.ndarray:
    """One named algorithm with NCCL's protocol lines (:func:`scalemodel.cost.nccl.algorithm_time`)."""
    check_op(op)
    S = np.asarray(size_bytes, dtype=float)
    return nccl.algorithm_time(op, algorithm, S, place(ranks, stride, network), gamma=gamma, protocols=protocols)


def raw_algorithm_time(op: str, algorithm: str, size_bytes: object, ranks: object, network: Network, *,
                       stride: object = 1, gamma: float = 0.0) -> np.ndarray:
    """The bare alpha-beta model of one algorithm on ``network`` (no protocol lines, no base latency;
    :func:`scalemodel.cost.algorithms.algorithm_time`)."""
    check_op(op)
    S = _size(size_bytes, 1)
    return algorithms.algorithm_time(op, algorithm, S, place(ranks, stride, network), gamma)


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
