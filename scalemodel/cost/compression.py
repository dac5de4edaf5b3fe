"""Compressed gradient communication: quantisation (all-reducible) vs sparsification (all-gather).

Reference: docs/model.md#compression. Symbols: dense bytes M,
compression ratio r, n ranks, per-rank bandwidth B, latency alpha, encode/decode times.

- All-reduce-compatible (fp16/bf16 casts, int8 with a shared scale, PowerSGD factors):
      t = t_enc + 2(n-1)/n (M/r)/B + 2(n-1) alpha + t_dec
- All-gather-only (top-k / DGC values + indices): every rank receives the n-1 other payloads,
      t = t_enc + (n-1) rho c M/B + (n-1) alpha + t_dec + (n-1) t_dec_per_peer
  with density rho and c = (value + index bytes)/value bytes (2 for fp32 values + int32 indices).
- Break-even against dense ring all-reduce (ignoring latency and codec time): rho c < 2/n.
- Agarwal et al. (MLSys 2022): compression beat optimised synchronous DP in only 6 of >200 setups;
  recommend it only when it wins by a margin (default 10 %), see :func:`compression_worthwhile`.

``size`` is the dense gradient in bytes *as stored* (e.g. fp32: 4 bytes/parameter); the
quantisation ratios below are relative to fp32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.errors import InputError

Array = Any

# bits per element of each all-reducible scheme, relative to fp32 gradients
QUANT_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8}
COMPRESSION_KINDS = (*QUANT_BITS, "topk")
AGARWAL_MARGIN = 0.10  # recommend compression only when it saves >= 10 % (Agarwal et al. 2022)

#: Convergence cost of each scheme, as published (validation/convergence.yaml, scripts/fit_convergence.py).
#: The step model charges no extra steps for any of them *within the published range*, because none was
#: measured: fp16/bf16 casts of 16-bit gradients are exact; int8 with a shared scale and error feedback is within
#: QSGD's "full accuracy" 8-bit setting (Alistarh et al. 2017); top-k with error feedback (DGC's local
#: accumulation + momentum correction) matched the dense top-1 on ImageNet at density 0.001 from 8 to 128 GPUs
#: (synxlin/deep-gradient-compression README table: ResNet-50 mean +0.27 points, VGG-16-BN +0.15). Without error
#: feedback no scheme here is claimed lossless (Seide et al. 2014; Karimireddy et al. 2019).
TOPK_LOWEST_PUBLISHED_DENSITY = 0.001


def accuracy_note(kind: str, density: float = 1.0) -> str | None:
    """A one-line caveat where a scheme runs outside the density its accuracy was published for, else None."""
    if kind == "topk" and density < TOPK_LOWEST_PUBLISHED_DENSITY:
        return (f"top-k density {density:g} is below the lowest with a published accuracy "
                f"({TOPK_LOWEST_PUBLISHED_DENSITY:g}, DGC with error feedback); no step-count cost is charged, "
                "but none is known")
    return None


def error_feedback_note(kind: str) -> str | None:
    """A one-line statement of the error-feedback assumption for the lossy schemes (int8, topk), else None.

    The step model charges them no extra steps as published *with* error feedback; without it biased
    compressors can fail to converge (Karimireddy et al. 2019; validation/convergence.yaml compression.kinds)."""
    if kind in ("int8", "topk"):
        return (f"{kind}: no step-count cost charged, as published with error feedback (the residual carried to "
                "the next step); without it biased compressors can lose accuracy or fail to converge "
                "(Karimireddy et al. 2019)")
    return None


def cast_noop_note(kind: str, grad_bytes: float) -> str | None:
    """A note where a 16-bit cast is given 16-bit (or narrower) gradients: it sends min(2, g) = g bytes per element
    (the wire width dp_comm prices, docs/model.md#compression), the same bytes as no compression, and encodes
    nothing, so the step time is that of compression none. None elsewhere."""
    if kind in ("fp16", "bf16") and grad_bytes <= 2:
        return (f"compression {kind} changes nothing here: the gradients are already {grad_bytes * 8:g}-bit, so the "
                "cast sends the same bytes as no compression (the step time of compression none); it halves the "
                "wire only for 32-bit gradients (training.grad_bytes_per_param 4)")
    return None


def _check(n: Array, size: Array, bw: Array, lat: Array, t_enc: Array, t_dec: Array) -> tuple[np.ndarray, ...]:
    vals = [np.asarray(x, dtype=float) for x in (n, size, bw, lat, t_enc, t_dec)]
    names = ("ranks", "size", "bandwidth", "latency", "t_enc", "t_dec")
    for v, name in zip(vals, names, strict=True):
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise InputError(f"{name} is negative or not finite", where=name, allowed="finite values >= 0")
    if np.any(vals[0] < 1):
        raise InputError("fewer than 1 rank", where="ranks", allowed="a number of ranks >= 1")
    if np.any(vals[2] <= 0):
        raise InputError("bandwidth is 0", where="bandwidth", allowed="a bandwidth > 0 bytes/s")
    return tuple(vals)


def allreduce_compressed_time(n: Array, size: Array, bandwidth: Array, ratio: Array = 1.0, *,
                              latency_s: Array = 0.0, t_enc_s: Array = 0.0, t_dec_s: Array = 0.0) -> np.ndarray:
    """t_enc + 2(n-1)/n (M/r)/B + 2(n-1) alpha + t_dec; ratio r = 1 is the dense ring all-reduce."""
    nn, m, b, a, te, td = _check(n, size, bandwidth, latency_s, t_enc_s, t_dec_s)
    r = np.asarray(ratio, dtype=float)
    if np.any(r < 1) or not np.all(np.isfinite(r)):
        raise InputError("a compression ratio is < 1 or not finite", where="ratio", allowed="finite ratios >= 1")
    comm = 2 * (nn - 1) / nn * (m / r) / b + 2 * (nn - 1) * a
    return np.where(nn > 1, te + comm + td, 0.0)


def allgather_sparse_time(n: Array, size: Array, bandwidth: Array, density: Array, *,
                          index_overhead: Array = 2.0, latency_s: Array = 0.0, t_enc_s: Array = 0.0,
                          t_dec_s: Array = 0.0, t_dec_per_peer_s: Array = 0.0) -> np.ndarray:
    """t_enc + (n-1) rho c M/B + (n-1) alpha + t_dec + (n-1) t_dec_per_peer (top-k via all-gather)."""
    nn, m, b, a, te, td = _check(n, size, bandwidth, latency_s, t_enc_s, t_dec_s)
    rho = np.asarray(density, dtype=float)
    c = np.asarray(index_overhead, dtype=float)
    tp = np.asarray(t_dec_per_peer_s, dtype=float)
    if np.any((rho <= 0) | (rho > 1)) or not np.all(np.isfinite(rho)):
        raise InputError("a density is outside (0, 1]", where="density", allowed="densities in (0, 1]")
    if np.any(c < 1) or not np.all(np.isfinite(c)):
        raise InputError("an index overhead c is < 1 or not finite", where="index_overhead",
                         allowed="finite c >= 1 (bytes sent per value byte)")
    if np.any(tp < 0) or not np.all(np.isfinite(tp)):
        raise InputError("a per-peer decode time is negative or not finite", where="t_dec_per_peer_s",
                         allowed="finite times >= 0 seconds")
    t = te + (nn - 1) * (rho * c * m / b + a + tp) + td
    return np.where(nn > 1, t, 0.0)


def sparse_break_even_density(n: Array, index_overhead: Array = 2.0, dense_passes: Array = 2.0) -> np.ndarray:
    """Largest density at which all-gathered top-k beats the dense ring exchange it replaces: rho < d/(n c), from
    (n-1) rho c M/B < d (n-1)M/(nB) with d = 2 for an all-reduce (ZeRO 0) and d = 1 for the gradients'
    reduce-scatter alone (ZeRO 1, whose parameter all-gather stays); latency and codec time ignored."""
    nn = np.asarray(n, dtype=float)
    c = np.asarray(index_overhead, dtype=float)
    if np.any(nn < 2) or np.any(c < 1):
        raise InputError("n < 2 ranks or index overhead < 1", where="break_even",
                         allowed="n >= 2 and index overhead >= 1")
    return np.minimum(np.asarray(dense_passes, dtype=float) / (nn * c), 1.0)


def compressed_comm_time(kind: str, n: Array, size: Array, bandwidth: Array, *, density: Array = 0.01,
                         index_overhead: Array = 2.0, latency_s: Array = 0.0, t_enc_s: Array = 0.0,
                         t_dec_s: Array = 0.0, t_dec_per_peer_s: Array = 0.0) -> np.ndarray:
    """Dispatcher: fp32/fp16/bf16/int8 (all-reduce of M * bits/32) or topk (all-gather)."""
    if kind in QUANT_BITS:
        return allreduce_compressed_time(n, size, bandwidth, 32 / QUANT_BITS[kind], latency_s=latency_s,
                                         t_enc_s=t_enc_s, t_dec_s=t_dec_s)
    if kind == "topk":
        return allgather_sparse_time(n, size, bandwidth, density, index_overhead=index_overhead,
                                     latency_s=latency_s, t_enc_s=t_enc_s, t_dec_s=t_dec_s,
                                     t_dec_per_peer_s=t_dec_per_peer_s)
    raise InputError(f"unknown compression {kind!r}", where="compression", allowed=", ".join(COMPRESSION_KINDS))


def compression_worthwhile(dense_time_s: Array, compressed_time_s: Array,
                           margin: Array = AGARWAL_MARGIN) -> np.ndarray:
    """True where compression saves at least ``margin`` of the dense exposed communication time
    (Agarwal et al. 2022 planner rule: small predicted wins rarely survive in practice)."""
    d = np.asarray(dense_time_s, dtype=float)
    c = np.asarray(compressed_time_s, dtype=float)
    return c <= (1 - np.asarray(margin, dtype=float)) * d
