"""Parameter-server push/pull traffic vs ring all-reduce, and BytePS's optimal split.

Reference: docs/model.md#parameter-server (BytePS, Jiang et al. OSDI 2020,
section 2 and byteps docs/rationale.md; Li et al. OSDI 2014). n GPU (worker) machines, k server
machines, every NIC ``bandwidth`` B bytes/s per direction, model/gradient M bytes. Times are
seconds of one push (gradients) + pull (parameters) round; full-duplex links, so a machine's time
is its larger per-direction volume / B. Optional ``latency_s`` adds per-message latency.

- Ring all-reduce:        t = 2(n-1)M/(nB) + 2(n-1) alpha
- Dedicated PS (k CPU servers, shard fractions with max f_max, 1/k when even):
                          worker sends M, receives M: M/B; server j moves n f_j M each way:
                          t = max(M/B, n M f_max/B) + 2 alpha
  PS beats all-reduce iff k > n^2 / (2(n-1)) (about n/2).
- Colocated PS (one server per worker machine, shard f_j on machine j): machine j sends
  M(1 - f_j) as a worker and (n-1) f_j M as a server: t = M(1 + (n-2) f_max)/B + 2 alpha;
  even sharding (f = 1/n) gives 2(n-1)M/(nB), the all-reduce volume.
- BytePS optimal split with k extra CPU servers (Theorem 1): t = 2n(n-1)M/((n^2 + kn - 2k)B);
  k = 0 is all-reduce, k = n is M/B.
- Shard imbalance heuristic for many random shards: f_max ~= (1/k)(1 + CV_shard sqrt(2 ln k))
  (normal order statistics applied to server loads; heuristic, docs/model.md#parameter-server).
- Async PS update rate: min(sum_i 1/(X_i + 2M/B), k B/(2M)) (docs/model.md#parameter-server).

The step model uses :func:`ps_exchange`: the same formulas at machine level with separate worker
and server NICs, an intra-node reduction before the push, DRAM summation on the servers and
push/pull pipelined in BytePS partitions (:data:`BYTEPS_PARTITION_BYTES`, :func:`round_robin_fmax`).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from scalemodel.errors import InputError

Array = Any


def _check(n: Array, size: Array, bw: Array, lat: Array) -> tuple[np.ndarray, ...]:
    nn = np.asarray(n, dtype=float)
    m = np.asarray(size, dtype=float)
    b = np.asarray(bw, dtype=float)
    a = np.asarray(lat, dtype=float)
    if np.any(nn < 1) or not np.all(np.isfinite(nn)):
        raise InputError("number of worker machines must be >= 1", where="workers")
    if np.any(m < 0) or not np.all(np.isfinite(m)):
        raise InputError("message size must be finite and >= 0 bytes", where="size")
    if np.any(b <= 0) or not np.all(np.isfinite(b)):
        raise InputError("bandwidth must be finite and > 0", where="bandwidth")
    if np.any(a < 0) or not np.all(np.isfinite(a)):
        raise InputError("latency must be finite and >= 0", where="latency")
    return nn, m, b, a


def _servers(k: Array, allow_zero: bool = False) -> np.ndarray:
    kk = np.asarray(k, dtype=float)
    if np.any(kk < (0 if allow_zero else 1)) or not np.all(np.isfinite(kk)):
        raise InputError(f"number of servers must be >= {0 if allow_zero else 1}", where="servers")
    return kk


def _fmax(k: np.ndarray, f_max: Array | None) -> np.ndarray:
    if f_max is None:
        return 1.0 / k
    f = np.asarray(f_max, dtype=float)
    if np.any(f < 1.0 / k - 1e-12) or np.any(f > 1):
        raise InputError("largest shard fraction must lie in [1/k, 1]", where="f_max")
    return f


def allreduce_ring_time(n: Array, size: Array, bandwidth: Array, latency_s: Array = 0.0) -> np.ndarray:
    """2(n-1)M/(nB) + 2(n-1) alpha (ring all-reduce, BytePS section 2)."""
    nn, m, b, a = _check(n, size, bandwidth, latency_s)
    return 2 * (nn - 1) / nn * m / b + 2 * (nn - 1) * a


def ps_time(n: Array, k: Array, size: Array, bandwidth: Array, *, colocated: bool = False,
            f_max: Array | None = None, latency_s: Array = 0.0) -> np.ndarray:
    """Push + pull time of a parameter server (dedicated or colocated); see the module docstring.
    ``f_max`` is the largest shard's fraction of M (default: even sharding over k servers)."""
    nn, m, b, a = _check(n, size, bandwidth, latency_s)
    kk = _servers(k)
    if colocated:
        kk = nn + 0 * kk
        if np.any(nn < 2):
            return 0.0 * m + 0.0 * kk
        f = _fmax(kk, f_max)
        return m * (1 + (nn - 2) * f) / b + 2 * a
    f = _fmax(kk, f_max)
    return np.maximum(m / b, nn * m * f / b) + 2 * a


def byteps_time(n: Array, k: Array, size: Array, bandwidth: Array, latency_s: Array = 0.0) -> np.ndarray:
    """BytePS optimal communication time with k extra CPU servers (Theorem 1):
    t = 2n(n-1)M/((n^2 + kn - 2k)B) + 2 alpha (one push and one pull message; the k = 0
    all-reduce limit's 2(n-1) alpha is not reproduced: use :func:`allreduce_ring_time` there)."""
    nn, m, b, a = _check(n, size, bandwidth, latency_s)
    kk = _servers(k, allow_zero=True)
    return 2 * nn * (nn - 1) * m / ((nn * nn + kk * nn - 2 * kk) * b) + 2 * a * (nn > 1)


def byteps_split(n: Array, k: Array, size: Array) -> tuple[np.ndarray, np.ndarray]:
    """Bytes summed by each CPU server and each GPU machine in BytePS's optimum:
    M_cpu = 2(n-1)M/(n^2 + kn - 2k), M_gpu = (n-k)M/(n^2 + kn - 2k), with k M_cpu + n M_gpu = M."""
    nn = np.asarray(n, dtype=float)
    kk = _servers(k, allow_zero=True)
    m = np.asarray(size, dtype=float)
    if np.any(kk > nn):
        raise InputError("BytePS split assumes k <= n servers", where="servers")
    d = nn * nn + kk * nn - 2 * kk
    return 2 * (nn - 1) * m / d, (nn - kk) * m / d


def ps_beats_allreduce_servers(n: Array) -> np.ndarray:
    """Dedicated PS with even shards beats ring all-reduce iff k > n^2/(2(n-1))."""
    nn = np.asarray(n, dtype=float)
    if np.any(nn < 2):
        raise InputError("need n >= 2 workers to compare with all-reduce", where="workers")
    return nn * nn / (2 * (nn - 1))


def shard_fmax_heuristic(k: Array, cv_shard: Array) -> np.ndarray:
    """f_max ~= (1/k)(1 + CV_shard sqrt(2 ln k)), capped at 1 (heuristic, docs/model.md#parameter-server)."""
    kk = _servers(k)
    cv = np.asarray(cv_shard, dtype=float)
    if np.any(cv < 0):
        raise InputError("shard-size cv must be >= 0", where="cv_shard")
    return np.minimum((1 + cv * np.sqrt(2 * np.log(kk))) / kk, 1.0)


def shard_fmax_from_sizes(tensor_bytes: Array, k: int, partition_bytes: float | None = None) -> float:
    """Largest server share when tensors (optionally split into ``partition_bytes`` pieces, as
    BytePS does with ~4 MB) are placed greedily largest-first on the least-loaded of k servers."""
    sizes = np.asarray(tensor_bytes, dtype=float).ravel()
    if sizes.size == 0 or np.any(sizes <= 0) or int(k) < 1:
        raise InputError("need positive tensor sizes and k >= 1", where="shards")
    if partition_bytes is not None:
        if partition_bytes <= 0:
            raise InputError("partition size must be > 0", where="partition_bytes")
        full = np.floor(sizes / partition_bytes)
        rest = sizes - full * partition_bytes
        sizes = np.concatenate([np.repeat(partition_bytes, int(full.sum())), rest[rest > 0]])
    loads = [0.0] * int(k)
    heapq.heapify(loads)
    for s in np.sort(sizes)[::-1]:
        heapq.heappush(loads, heapq.heappop(loads) + float(s))
    return max(loads) / float(sizes.sum())


def async_ps_rate(n: Array, step_mean_s: Array, k: Array, size: Array, bandwidth: Array) -> np.ndarray:
    """Async PS updates/s: min(n/(X + 2M/B), k B/(2M)) (docs/model.md#parameter-server; identical workers)."""
    nn, m, b, _ = _check(n, size, bandwidth, 0.0)
    kk = _servers(k)
    x = np.asarray(step_mean_s, dtype=float)
    if np.any(x < 0):
        raise InputError("step time must be >= 0", where="step_mean_s")
    worker_rate = nn / np.maximum(x + 2 * m / b, 1e-300)
    server_cap = np.where(m > 0, kk * b / (2 * np.maximum(m, 1e-300)), np.inf)
    return np.minimum(worker_rate, server_cap)


#: BytePS partition size: every tensor is cut into pieces of at most this many bytes, which are
#: assigned to servers and pipelined (``BYTEPS_PARTITION_BYTES`` default 4096000, bytedance/byteps
#: ``byteps/common/global.cc`` and docs/env.md).
BYTEPS_PARTITION_BYTES = 4096000.0
#: DRAM bytes a CPU server moves per byte it receives: the NIC's DMA write of the pushed piece, the
#: CPU's read of it to add into the accumulator (a 4 MB partition's accumulator stays in cache), and
#: the NIC's DMA read of the sum for the pull. **[assumption]** (docs/model.md#parameter-server;
#: BytePS §4.2: CPU summation is bounded by memory bandwidth, not by AVX FLOP/s).
SERVER_MEMORY_BYTES_PER_RECEIVED_BYTE = 3.0


def round_robin_fmax(k: Array, machine_bytes: Array, partition_bytes: Array = BYTEPS_PARTITION_BYTES) -> np.ndarray:
    """Largest server share when a machine's ``machine_bytes`` are cut into c = ceil(bytes/partition)
    equal pieces dealt round-robin to k servers: f_max = ceil(c/k)/c (>= 1/k; exactly 1/k when k | c)."""
    kk = _servers(k)
    m = np.asarray(machine_bytes, dtype=float)
    part = np.asarray(partition_bytes, dtype=float)
    if np.any(part <= 0) or np.any(m < 0):
        raise InputError("partition size must be > 0 and bytes >= 0", where="partition_bytes")
    c = np.maximum(np.ceil(m / part), 1.0)
    return np.minimum(np.ceil(c / kk) / c, 1.0)


def _pipelined(stages: list[np.ndarray], resources: list[np.ndarray], chunks: np.ndarray) -> np.ndarray:
    """Makespan of c equal chunks through a pipeline: sum(stages)/c + (c-1)/c x max(resources)
    (the first chunk fills every stage; the rest advance at the busiest resource's pace)."""
    total = sum(stages)
    busiest = np.maximum.reduce([np.asarray(r, dtype=float) for r in resources])
    return total / chunks + (chunks - 1.0) / chunks * busiest


def ps_exchange(workers: Array, servers: Array, machine_bytes: Array, worker_bw: Array,
                server_bw: Array | None = None, *, colocated: Array = False, f_max: Array | None = None,
                chunks: Array = 1.0, intra_s: Array = 0.0, server_memory_bw: Array = np.inf,
                latency_s: Array = 0.0) -> dict[str, np.ndarray]:
    """One push + pull of a parameter server at machine level (docs/model.md#parameter-server).

    ``workers`` n GPU machines each push ``machine_bytes`` P (their gradients after the intra-node
    reduction, which takes ``intra_s`` together with the final intra-node all-gather) over their
    NIC ``worker_bw`` and pull P back. ``servers`` k hold shards, the largest a fraction ``f_max``
    of every machine's bytes (default 1/k). Dedicated servers have their own NIC ``server_bw``
    (default ``worker_bw``); colocated ones share the worker machine's NIC. Per direction:

    - dedicated:  push = pull = max(P/B_w, n P f_max / B_s)                 (BytePS §3.2, Li et al. 2014)
    - colocated:  push = pull = P (1 + (n-2) f_max) / B_w                    (machine holding the largest shard)
    - summation:  sum = 3 n P f_max / B_mem                                  (server DRAM, [assumption])

    Push, sum and pull run in ``chunks`` c pipelined pieces (BytePS partitions; c = 1 means push
    everything, then pull): t = (intra + 2 push + sum)/c + (c-1)/c max(intra, push, sum) + 2 alpha.
    n = 1 machine needs no exchange (t = intra). Returns ``time`` (synchronous, every worker at once),
    and for asynchronous training ``worker`` (one worker's own exchange, its NIC alone:
    push = P/B_w) and ``server_round`` (the time servers need per round of n pushes: their
    throughput cap, max(n P f_max/B_s, sum), or the colocated machine's per-direction load).
    With k = n dedicated servers, even shards, c -> inf and B_s = B_w this is P/B_w, half of ring
    all-reduce's 2(n-1)P/(nB_w) for large n (BytePS Theorem 1 with k = n).
    """
    nn, p, bw, a = _check(workers, machine_bytes, worker_bw, latency_s)
    kk = _servers(servers)
    bs = bw if server_bw is None else np.asarray(server_bw, dtype=float)
    if np.any(bs <= 0) or not np.all(np.isfinite(bs)):
        raise InputError("server bandwidth must be finite and > 0", where="server_bw")
    mem = np.asarray(server_memory_bw, dtype=float)
    if np.any(mem <= 0):
        raise InputError("server memory bandwidth must be > 0", where="server_memory_bw")
    c = np.asarray(chunks, dtype=float)
    if np.any(c < 1) or not np.all(np.isfinite(c)):
        raise InputError("chunks must be finite and >= 1", where="chunks")
    intra = np.asarray(intra_s, dtype=float)
    co = np.asarray(colocated, dtype=bool)
    k_eff = np.where(co, np.minimum(kk, nn), kk)  # colocated servers live on worker machines
    f = _fmax(k_eff, f_max) if f_max is not None else 1.0 / k_eff
    f = np.maximum(f, 1.0 / k_eff)
    multi = nn > 1
    own = p / bw
    dedicated_dir = np.maximum(own, nn * p * f / bs)
    colocated_dir = p * (1.0 + (nn - 2.0) * f) / bw
    direction = np.where(multi, np.where(co, colocated_dir, dedicated_dir), 0.0)
    summ = np.where(multi, SERVER_MEMORY_BYTES_PER_RECEIVED_BYTE * nn * p * f / mem, 0.0)
    lat = np.where(multi, 2.0 * a, 0.0)
    time = _pipelined([intra, 2.0 * direction, summ], [intra, direction, summ], c) + lat
    worker = _pipelined([intra, 2.0 * np.where(multi, own, 0.0)], [intra, np.where(multi, own, 0.0)], c) + lat
    server_round = np.where(multi, np.maximum(np.where(co, colocated_dir, nn * p * f / bs), summ), 0.0)
    return {"time": time, "worker": worker, "server_round": server_round, "f_max": f + 0 * time}
