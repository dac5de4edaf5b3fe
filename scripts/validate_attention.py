#!/usr/bin/env python
"""Compare the fused attention core of the step model with published attention-kernel throughput.

Reads hardware/measurements/attention.yaml (or the file given). For every point the model's time of that
kernel call is :func:`scalemodel.cost.compute.flash_core_time` of ``b * h`` heads, ``s`` queries and keys,
head dim ``d`` (= value head dim), 2-byte elements, on the catalog accelerator's 16-bit peak and GEMM curve
(its ``compute_efficiency``, else the family default, as ``engine.job.build_job`` picks them); the backward is
2.5 x that forward (``layer_compute_time``: ``FLASH_BACKWARD_FLOP_RATIO``, the backward recomputes Q K^T) and
forward + backward 3.5 x. A causal call attends ``transformer.causal_mean_keys(s, s)`` = (s + 1) / 2 keys per
query, as the step model's ``Shape.causal_keys`` (the kernels skip the masked blocks).

The model time is turned into TFLOP/s in the source's FLOP convention (``flop_conventions`` of the YAML; the
FlashAttention benchmarks count 4 b h s^2 d forward FLOPs, halved when causal, backward 2.5x and forward +
backward 3.5x the forward), so that ``error = model TFLOP/s / measured TFLOP/s - 1 = measured time / model
time - 1``: positive when the model prices the call faster than the kernel ran.

Prints one row per point; then per accelerator x kernel x causal x direction the count, median |error|,
bias (median signed error) and worst error; then the measured causal / non-causal time ratio for every shape
published both ways (t_causal / t_full = 0.5 x TFLOP/s_full / TFLOP/s_causal in this convention; the model's
ratio is about 0.5: (s + 1) / 2 keys on the GEMM curve); and the measured (forward + backward) / forward time
where a kernel is published both ways (the model's ratio is 3.5). ``--isolated`` divides the catalog gemm_max by
the in-layer factor of its family and precision (``cost.compute.in_layer_gemm_factor``), i.e. prices the call on
the isolated-GEMM level the catalog curve was derived from (gemm_half_dim unchanged; capped at 1), since a kernel
benchmark, like a GEMM microbenchmark, runs the call alone. ``--json`` writes the same as one strictly valid JSON
object.

A point with a ``window`` (a sliding window of w keys; causal points only) is priced at w - w (w - 1) / (2 s) keys a
query, as Shape.causal_keys prices a local layer, and counted in its source's convention (cudnn-frontend: the
w (w + 1) / 2 + (s - w) w score entries computed). Where its source names same-release ``twins``, the report ends
with each window point beside its causal twin of the same length (:func:`window_pairs`; docs/model.md#window-calls).

Usage: python scripts/validate_attention.py [attention.yaml] [--isolated] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from measurement_file import DataError, read_or_report  # noqa: E402  (scripts/, beside this file)

from scalemodel.cost.compute import (
    FLASH_BACKWARD_FLOP_RATIO,
    default_efficiency,
    flash_core_time,
    flash_kernel_time,
    in_layer_gemm_factor,
)
from scalemodel.cost.transformer import causal_mean_keys
from scalemodel.specs import files, load_accelerator, yamlread
from scalemodel.specs.accelerator import cudnn_release_key

DEFAULT = Path(__file__).resolve().parents[1] / "hardware" / "measurements" / "attention.yaml"

#: step-model time of one call, in forward-call times (layer_compute_time: the flash core's backward is
#: FLASH_BACKWARD_FLOP_RATIO = 2.5 x its forward)
MODEL_CALLS = {"fwd": 1.0, "bwd": FLASH_BACKWARD_FLOP_RATIO, "fwd+bwd": 1.0 + FLASH_BACKWARD_FLOP_RATIO}

#: FLOP conventions a source may state: (factor on the forward FLOPs when causal, {direction: multiple of
#: the forward FLOPs}). fa-benchmark: Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py flops()
CONVENTIONS: dict[str, tuple[float, dict[str, float]]] = {
    "fa-benchmark": (0.5, {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}),
    # NVIDIA/cudnn-frontend benchmark_single_sdpa.py flops() (df73764 / fb682ce): 4 b h N d over the N score entries
    # computed, s (s + 1) / 2 causal, w (w + 1) / 2 + (s - w) w with a sliding window (source_flops)
    "cudnn-frontend": (0.5, {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}),
}

#: Bounds of a point's shape (b, h, d, s: at least 1) and of its reported TFLOP/s: far beyond any published kernel
#: benchmark either way, and narrow enough that 4 b h s^2 d and the times derived from it are finite floats.
MAX_DIM = 1e9
MIN_TFLOPS, MAX_TFLOPS = 1e-6, 1e6

KEYS = ("src", "acc", "kernel", "dir", "causal", "dtype", "b", "h", "d", "s", "tflops")
DTYPES = ("fp16", "bf16")
#: YAML nodes a measurement file may hold: a point is about 30 (13-16 keys and values), so the spec readers' bound
#: (yamlread.MAX_NODES, 20,000: "a spec has hundreds of nodes") is under the catalog's own attention.yaml since its
#: 376 AITER points (~21,000 nodes); 4x that bound keeps the guard against a YAML bomb and room for the file to grow
MAX_MEASUREMENT_NODES = 4 * yamlread.MAX_NODES
#: Bytes a measurement file may hold, by the same 4x: the spec readers' 256 KiB (files.MAX_SPEC_BYTES) alone would
#: bind long before the node bound (attention.yaml is 209 KB at ~21,000 nodes: about 300 more points of ~172 bytes
#: against some 2,000 more under the node bound; review20a)
MAX_MEASUREMENT_BYTES = 4 * files.MAX_SPEC_BYTES


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(sources, points) of an attention measurement file, every point checked for the fields the model needs."""
    # the CLI's readers: a regular file of bounded size (a FIFO or /dev/zero is refused, not read forever), strict
    # YAML 1.2 (`causal: yes` is text, not true; a duplicate key is refused), integers of bounded length
    text = files.read_text(path, limit=MAX_MEASUREMENT_BYTES, what="measurement file")
    doc, _ = yamlread.load(text, str(path), max_nodes=MAX_MEASUREMENT_NODES)
    if not isinstance(doc, dict) or not isinstance(doc.get("points"), list) or not isinstance(doc.get("sources"), dict):
        raise DataError(f"{path}: needs a `sources` mapping and a `points` list")
    sources: dict[str, Any] = doc["sources"]
    for i, p in enumerate(doc["points"]):
        where = f"{path.name}: points[{i}]"
        if not isinstance(p, dict):
            raise DataError(f"{where}: not a mapping")
        missing = [k for k in KEYS if k not in p]
        if missing:
            raise DataError(f"{where}: missing {', '.join(missing)}; every point needs {', '.join(KEYS)}")
        for k in ("src", "acc", "kernel", "dir", "dtype"):
            if not isinstance(p[k], str):
                raise DataError(f"{where}: {k} {p[k]!r}; a string")
        src = sources.get(p["src"])
        if not isinstance(src, dict):
            raise DataError(f"{where}: src {p['src']!r} is not in `sources`")
        if not isinstance(src.get("flops"), str) or src["flops"] not in CONVENTIONS:
            raise DataError(f"{where}: source {p['src']} has flops {src.get('flops')!r}; "
                            f"known conventions: {', '.join(CONVENTIONS)}")
        if p["dir"] not in MODEL_CALLS:
            raise DataError(f"{where}: dir {p['dir']!r}; one of {', '.join(MODEL_CALLS)}")
        if not isinstance(p["causal"], bool):
            raise DataError(f"{where}: causal {p['causal']!r}; true or false")
        if "window" in p and (isinstance(p["window"], bool) or not isinstance(p["window"], int)
                              or not 1 <= p["window"] <= MAX_DIM or p["causal"] is not True):
            raise DataError(f"{where}: window {p['window']!r}; a whole number of keys from 1 to {MAX_DIM:g}, on a "
                            "causal point only")
        if "fit" in p and not isinstance(p["fit"], bool):
            raise DataError(f"{where}: fit {p['fit']!r}; true or false (false: recorded, not fitted)")
        if p["dtype"] not in DTYPES:
            raise DataError(f"{where}: dtype {p['dtype']!r}; one of {', '.join(DTYPES)} (the core runs in 16 bit)")
        for k in ("b", "h", "d", "s", "tflops"):
            v = p[k]
            lo, hi = (MIN_TFLOPS, MAX_TFLOPS) if k == "tflops" else (1, MAX_DIM)  # b h s^2 d / tflops stay finite
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise DataError(f"{where}: {k} {v!r}; a number from {lo:g} to {hi:g}")
    return sources, doc["points"]


def _curve(acc: Any, dtype: str) -> tuple[float, float, float]:
    """(gemm_max, gemm_half_dim, memory) of the accelerator's 16-bit curve, as engine.job.build_job takes them."""
    ce = acc.compute_efficiency
    if ce is not None:
        gm, d0 = ce.gemm(dtype)
        return gm, d0, float(ce.memory)
    c = default_efficiency(acc.family if acc.family != "other" else acc.name)
    return float(c.gemm_max), float(c.gemm_half_dim), float(c.memory)


def keys_of(p: dict[str, Any]) -> float:
    """Keys per query the step model prices the call at (Shape.causal_keys): s without mask, (s + 1) / 2 causal,
    w - w (w - 1) / (2 s) with a sliding window w < s."""
    if not p["causal"]:
        return float(p["s"])
    return float(causal_mean_keys(p["s"], min(p["s"], p.get("window") or p["s"])))


def source_flops(p: dict[str, Any], convention: str) -> float:
    """FLOPs of the call as the source counts them (cudnn-frontend: the score entries computed, s * keys_of)."""
    causal_factor, per_dir = CONVENTIONS[convention]
    if convention == "cudnn-frontend":
        fwd = 4.0 * p["b"] * p["h"] * p["s"] * keys_of(p) * p["d"]
    else:
        fwd = 4.0 * p["b"] * p["h"] * p["s"] ** 2 * p["d"] * (causal_factor if p["causal"] else 1.0)
    return fwd * per_dir[p["dir"]]


def evaluate(sources: dict[str, Any], points: list[dict[str, Any]], *, isolated: bool = False) -> list[dict[str, Any]]:
    """Each point with the model's time of the call (s), its TFLOP/s in the source's convention and the error."""
    accs: dict[str, Any] = {}
    out = []
    for p in points:
        if p["acc"] not in accs:
            accs[p["acc"]] = load_accelerator(p["acc"], overrides=[])
        acc = accs[p["acc"]]
        gm, d0, mem = _curve(acc, p["dtype"])
        if isolated:
            gm = min(gm / in_layer_gemm_factor(acc.family, p["dtype"], acc.name), 1.0)
        keys = keys_of(p)  # as Shape.causal_keys
        t_fwd = float(flash_core_time(p["s"], keys, p["d"], p["d"], p["b"] * p["h"], peak_flops=acc.peak(p["dtype"]),
                                      memory_bandwidth=acc.memory_bandwidth, gemm_max=gm, gemm_half_dim=d0,
                                      memory_efficiency=mem, elem_bytes=2.0))
        t_model = MODEL_CALLS[p["dir"]] * t_fwd
        flops = source_flops(p, sources[p["src"]]["flops"])
        model_tflops = flops / t_model / 1e12
        t_kernel = kernel_time(p, acc, keys)
        kernel_tflops = None if t_kernel is None else flops / t_kernel / 1e12
        out.append({**p, "model_time_s": t_model, "measured_time_s": flops / (p["tflops"] * 1e12),
                    "model_tflops": model_tflops, "error": model_tflops / p["tflops"] - 1.0,
                    "kernel_time_s": t_kernel, "kernel_tflops": kernel_tflops,
                    "kernel_error": None if kernel_tflops is None else kernel_tflops / p["tflops"] - 1.0,
                    "inferred": p.get("labels") == "inferred",
                    "latency": bool(sources[p["src"]].get("per_call_latency")),
                    "ratio": sources[p["src"]].get("level") == "ratio", **release_error(p, sources, acc, keys, flops)})
    return out


def release_error(p: dict[str, Any], sources: dict[str, Any], acc: Any, keys: float, flops: float) -> dict[str, Any]:
    """The point on the curve of its own cuDNN release (its source's ``cudnn_release``; the accelerator's
    ``attention_releases``, docs/model.md#cudnn-release): {release, release_error}, or {} where the source names no
    release or the accelerator holds no curve for it."""
    release = sources[p["src"]].get("cudnn_release")
    curves = ((acc.attention_releases or {}).get(str(release)) or {}).get(p["kernel"]) if release else None
    if curves is None:
        return {}
    t = kernel_time(p, acc, keys, curves)
    return {} if t is None else {"release": str(release), "release_error": flops / t / 1e12 / p["tflops"] - 1.0}


def kernel_time(p: dict[str, Any], acc: Any, keys: float, curves: Any = None) -> float | None:
    """The step model's time of the call on the kernel's own fitted curves (the accelerator's
    ``attention_efficiency``, cost.compute.flash_kernel_time: forward, backward at 2.5x the FLOPs), as
    layer_compute_time prices a core under ``training.attention_kernel``; None where the accelerator has no curve
    for the kernel (the step model then prices it on the GEMM curve). ``curves``: another fitted kernel (a cuDNN
    release's, :func:`release_error`) instead of ``attention_efficiency``'s."""
    if curves is None:
        curves = (acc.attention_efficiency or {}).get(p["kernel"])
    if curves is None:
        return None
    kw = dict(peak_flops=acc.peak(p["dtype"]), memory_bandwidth=acc.memory_bandwidth, elem_bytes=2.0,
              memory_efficiency=float(acc.compute_efficiency.memory) if acc.compute_efficiency else 0.85)
    t = 0.0
    for direction, ratio in (("fwd", 1.0), ("bwd", FLASH_BACKWARD_FLOP_RATIO)):
        if direction in p["dir"].split("+"):
            c = getattr(curves, direction)
            t += float(flash_kernel_time(p["s"], keys, p["d"], p["d"], p["b"] * p["h"], attn_max=c.attn_max,
                                         seq_half=c.seq_half, head_half=c.head_half, flop_ratio=ratio, **kw))
    return t


def _after(r: dict[str, Any]) -> bool:
    """A point counted in the kernel curve's (after) figures: it has a curve, was fitted (not ``fit: false``), its
    time is the kernel's alone (not a source marked ``per_call_latency``, whose times include the host's per-call
    latency that scripts/fit_attention.py fits beside the curve and the catalog leaves out) and its level is the
    curve's (not a source marked ``level: ratio``, fitted by its time ratio to a paired GPU's point, whose level
    is its own software release's: scripts/fit_attention.py RATIO_FITS)."""
    return (r["kernel_error"] is not None and r.get("fit") is not False and not r.get("latency")
            and not r.get("ratio"))


def families(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kernel family (all accelerators, masks, directions): median |error| and worst error of the GEMM-curve
    pricing (before) and of the kernel's fitted curve (after; over the points :func:`_after` counts)."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[r["kernel"]].append(r)
    out = []
    for kernel, rs in sorted(by.items()):
        before = [r["error"] for r in rs]
        after = [r["kernel_error"] for r in rs if _after(r)]
        out.append({"kernel": kernel, "n": len(rs), "gemm_median_abs": statistics.median(abs(e) for e in before),
                    "gemm_worst": max(before, key=abs), "n_kernel": len(after),
                    "kernel_median_abs": statistics.median(abs(e) for e in after) if after else None,
                    "kernel_worst": max(after, key=abs) if after else None})
    return out


def groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median |error|, bias (median signed error) and worst error per accelerator x kernel x causal x direction."""
    by: dict[tuple[str, str, bool, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["acc"], r["kernel"], r["causal"], r["dir"])].append(r)
    out = []
    for (acc, kernel, causal, direction), rs in sorted(by.items()):
        errs = [r["error"] for r in rs]
        kerr = [r["kernel_error"] for r in rs if _after(r)]
        out.append({"acc": acc, "kernel": kernel, "causal": causal, "dir": direction, "n": len(rs),
                    "median_abs_error": statistics.median(abs(e) for e in errs), "bias": statistics.median(errs),
                    "worst_error": max(errs, key=abs), "inferred": any(r["inferred"] for r in rs),
                    "kernel_median_abs_error": statistics.median(abs(e) for e in kerr) if kerr else None,
                    "kernel_worst_error": max(kerr, key=abs) if kerr else None})
    return out


def release_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per accelerator x cuDNN release x direction: each point on its own release's curve (:func:`release_error`),
    window points and per-call-latency sweeps left out (as :func:`_after`); the default curve's error of the same
    points beside it."""
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if "release_error" in r and not r.get("window") and not r.get("latency"):
            by[(r["acc"], r["release"], r["dir"])].append(r)
    out = []
    for (acc, release, direction), rs in sorted(by.items(), key=lambda kv: (kv[0][0], cudnn_release_key(kv[0][1]),
                                                                          kv[0][2])):
        errs = [r["release_error"] for r in rs]
        dflt = [r["kernel_error"] for r in rs if r["kernel_error"] is not None]
        out.append({"acc": acc, "release": release, "dir": direction, "n": len(rs),
                    "median_abs_error": statistics.median(abs(e) for e in errs), "bias": statistics.median(errs),
                    "worst_error": max(errs, key=abs),
                    "default_bias": statistics.median(dflt) if dflt else None})
    return out


def window_pairs(rows: list[dict[str, Any]], sources: dict[str, Any]) -> list[dict[str, Any]]:
    """Every sliding-window point whose source names same-release ``twins`` (sources; panels starting with
    ``twin_panels``), with the causal twin of the same accelerator, kernel, direction and length: the kernel
    curve's error on each, and ``relative`` = (1 + window error) / (1 + twin error) - 1 = measured (t_window /
    t_twin) / model (t_window / t_twin) - 1, negative where the window runs slower against its twin than the model
    prices (docs/model.md#window-calls)."""
    out = []
    for r in rows:
        src = sources[r["src"]]
        if not r.get("window") or not src.get("twins") or r["kernel_error"] is None:
            continue
        twin = [q for q in rows if q["src"] in src["twins"] and q["causal"] and not q.get("window")
                and str(q.get("panel", "")).startswith(src.get("twin_panels", ""))
                and (q["acc"], q["kernel"], q["dir"], q["s"]) == (r["acc"], r["kernel"], r["dir"], r["s"])]
        if len(twin) != 1 or twin[0]["kernel_error"] is None:
            continue
        q = twin[0]
        out.append({"src": r["src"], "acc": r["acc"], "kernel": r["kernel"], "dir": r["dir"], "window": r["window"],
                    "s": r["s"], "d": r["d"], "twin_src": q["src"], "twin_d": q["d"],
                    "window_error": r["kernel_error"], "twin_error": q["kernel_error"],
                    "relative": (1.0 + r["kernel_error"]) / (1.0 + q["kernel_error"]) - 1.0})
    return out


def causal_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measured t_causal / t_full for every shape a source publishes both ways (same source, kernel, direction)."""
    full = {(r["src"], r["acc"], r["kernel"], r["dir"], r["d"], r["s"]): r for r in rows if not r["causal"]}
    out = []
    for r in rows:
        key = (r["src"], r["acc"], r["kernel"], r["dir"], r["d"], r["s"])
        if r["causal"] and key in full:
            out.append({"src": r["src"], "acc": r["acc"], "kernel": r["kernel"], "dir": r["dir"], "d": r["d"],
                        "s": r["s"], "ratio": r["measured_time_s"] / full[key]["measured_time_s"],
                        "inferred": r["inferred"] or full[key]["inferred"]})
    return out


def ratio_groups(ratios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median, min and max of the causal / full time ratio per accelerator x kernel x direction (all lengths,
    and sequences of 2k and longer, where the masked blocks are most of the work skipped)."""
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in ratios:
        by[(q["acc"], q["kernel"], q["dir"])].append(q)
    out = []
    for (acc, kernel, direction), qs in sorted(by.items()):
        v = [q["ratio"] for q in qs]
        long = [q["ratio"] for q in qs if q["s"] >= 2048]
        out.append({"acc": acc, "kernel": kernel, "dir": direction, "n": len(v), "median": statistics.median(v),
                    "min": min(v), "max": max(v), "median_s_ge_2k": statistics.median(long) if long else None,
                    "inferred": any(q["inferred"] for q in qs)})
    return out


def direction_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measured (forward + backward) / forward time for every shape published both ways for the same kernel and
    mask (the model's ratio is 3.5: backward = 2.5 x forward). The two points may come from different sources
    (``cross_source``), i.e. different releases of the kernel."""
    fwd = {(r["acc"], r["kernel"], r["causal"], r["d"], r["s"]): r for r in rows if r["dir"] == "fwd"}
    out = []
    for r in rows:
        key = (r["acc"], r["kernel"], r["causal"], r["d"], r["s"])
        if r["dir"] == "fwd+bwd" and key in fwd:
            f = fwd[key]
            ratio = (r["measured_time_s"] / (r["b"] * r["h"])) / (f["measured_time_s"] / (f["b"] * f["h"]))
            out.append({"acc": r["acc"], "kernel": r["kernel"], "causal": r["causal"], "d": r["d"], "s": r["s"],
                        "ratio": ratio, "fwd_src": f["src"], "fwd_bwd_src": r["src"],
                        "cross_source": f["src"] != r["src"], "inferred": r["inferred"] or f["inferred"]})
    return out


def report(rows: list[dict[str, Any]], isolated: bool, windows: list[dict[str, Any]] | None = None) -> str:
    def pct(v: float | None, sign: str = "") -> str:
        return f"{'-':>7}" if v is None else f"{v:>{sign}7.1%}"

    lines = [f"fused attention core vs published kernels: GEMM curve (cost.compute.flash_core_time; bwd = 2.5 x fwd, "
             f"fwd+bwd = 3.5 x; curve: {'isolated (catalog gemm_max / in-layer factor)' if isolated else 'catalog'}) "
             "and the kernel's fitted curve (cost.compute.flash_kernel_time, accelerator attention_efficiency; "
             "- = no curve for that kernel)",
             f"{'src':9} {'acc':13} {'kernel':8} {'dir':7} {'causal':6} {'d':>4} {'s':>6} {'meas':>6} "
             f"{'gemm':>6} {'error':>7} {'kernel':>6} {'error':>7}"]
    for r in rows:
        mark = ((" (labels inferred)" if r["inferred"] else "") + (" (not fitted)" if r.get("fit") is False else "")
                + (" (time includes per-call latency)" if r.get("latency") else "")
                + (" (ratio-fitted: level is its sweep's cuDNN release)" if r.get("ratio") else ""))
        kt = "-" if r["kernel_tflops"] is None else f"{r['kernel_tflops']:.0f}"
        lines.append(f"{r['src']:9} {r['acc']:13} {r['kernel']:8} {r['dir']:7} {str(r['causal']):6} {r['d']:>4} "
                     f"{r['s']:>6} {r['tflops']:>6.0f} {r['model_tflops']:>6.0f} {r['error']:>+7.1%} {kt:>6} "
                     f"{pct(r['kernel_error'], '+')}{mark}")
    lines += ["", "by kernel family, all accelerators: GEMM curve (before) and the kernel's fitted curve (after)",
              f"{'kernel':8} {'n':>3} {'med|err|':>8} {'worst':>7}   {'n':>3} {'med|err|':>8} {'worst':>7}"]
    for f in families(rows):
        lines.append(f"{f['kernel']:8} {f['n']:>3} {f['gemm_median_abs']:>8.1%} {f['gemm_worst']:>+7.1%}   "
                     f"{f['n_kernel']:>3} {pct(f['kernel_median_abs']):>8} {pct(f['kernel_worst'], '+')}")
    lines += ["", "by accelerator x kernel x causal x direction (* = includes points with inferred labels)",
              f"{'acc':13} {'kernel':8} {'causal':6} {'dir':7} {'n':>3} {'med|err|':>8} {'bias':>7} {'worst':>7}"
              f" {'kernel med|err|':>15} {'worst':>7}"]
    for g in groups(rows):
        lines.append(f"{g['acc']:13} {g['kernel']:8} {str(g['causal']):6} {g['dir']:7} {g['n']:>3} "
                     f"{g['median_abs_error']:>8.1%} {g['bias']:>+7.1%} {g['worst_error']:>+7.1%} "
                     f"{pct(g['kernel_median_abs_error']):>15} {pct(g['kernel_worst_error'], '+')}"
                     f"{' *' if g['inferred'] else ''}")
    rg = ratio_groups(causal_ratios(rows))
    lines += ["", "measured causal / non-causal time ratio, same shape (the model prices about 0.50)",
              f"{'acc':13} {'kernel':8} {'dir':7} {'n':>3} {'median':>6} {'min':>5} {'max':>5} {'s>=2k':>6}"]
    for g in rg:
        lk = "" if g["median_s_ge_2k"] is None else f"{g['median_s_ge_2k']:.2f}"
        lines.append(f"{g['acc']:13} {g['kernel']:8} {g['dir']:7} {g['n']:>3} {g['median']:>6.2f} {g['min']:>5.2f} "
                     f"{g['max']:>5.2f} {lk:>6}{' *' if g['inferred'] else ''}")
    dr = direction_ratios(rows)
    if dr:
        lines += ["", "measured (fwd+bwd) / fwd time, same kernel, mask and shape (the model prices 3.50; "
                  "x = the two from different sources)",
                  f"{'acc':13} {'kernel':8} {'causal':6} {'d':>4} {'s':>6} {'ratio':>6}"]
        for q in dr:
            lines.append(f"{q['acc']:13} {q['kernel']:8} {str(q['causal']):6} {q['d']:>4} {q['s']:>6} "
                         f"{q['ratio']:>6.2f}{' x' if q['cross_source'] else ''}{' *' if q['inferred'] else ''}")
    rel = release_groups(rows)
    if rel:
        lines += ["", "cuDNN points on their own release's curve (attention_releases; docs/model.md#cudnn-release; no "
                  "window, no per-call-latency sweep); default = the same points on attention_efficiency's curve",
                  f"{'acc':9} {'release':7} {'dir':4} {'n':>3} {'med|err|':>8} {'bias':>7} {'worst':>7} "
                  f"{'default bias':>12}"]
        for g in rel:
            lines.append(f"{g['acc']:9} {g['release']:7} {g['dir']:4} {g['n']:>3} {g['median_abs_error']:>8.1%} "
                         f"{g['bias']:>+7.1%} {g['worst_error']:>+7.1%} {pct(g['default_bias'], '+'):>12}")
    if windows:
        lines += ["", "sliding-window calls against their same-release causal twin of the same length (kernel curve; "
                  "relative = measured t_window/t_twin over the model's - 1; docs/model.md#window-calls)",
                  f"{'src':14} {'acc':9} {'dir':4} {'w':>5} {'s':>6} {'d':>3} {'error':>7} {'twin':16} {'d':>3} "
                  f"{'error':>7} {'relative':>8}"]
        for q in windows:
            lines.append(f"{q['src']:14} {q['acc']:9} {q['dir']:4} {q['window']:>5} {q['s']:>6} {q['d']:>3} "
                         f"{q['window_error']:>+7.1%} {q['twin_src']:16} {q['twin_d']:>3} {q['twin_error']:>+7.1%} "
                         f"{q['relative']:>+8.1%}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    unknown = flags - {"--json", "--isolated"}
    if unknown or len(args) > 1:
        bad = ", ".join(sorted(unknown)) or " ".join(args[1:])
        print(f"error: arguments: {bad} not understood; usage: validate_attention.py [FILE.yaml] [--isolated] [--json]",
              file=sys.stderr)
        return 2
    path = Path(args[0]) if args else DEFAULT
    def work() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        sources, points = load(path)
        rows = evaluate(sources, points, isolated="--isolated" in flags)
        return rows, window_pairs(rows, sources)

    done = read_or_report(path, work)
    if done is None:
        return 2
    rows, windows = done
    if "--json" in flags:
        ratios = causal_ratios(rows)
        doc = {"file": str(path), "isolated": "--isolated" in flags, "points": rows, "groups": groups(rows),
               "families": families(rows),
               "causal_ratios": ratios, "causal_ratio_groups": ratio_groups(ratios),
               "direction_ratios": direction_ratios(rows), "window_pairs": windows,
               "release_groups": release_groups(rows)}
        print(json.dumps(doc, allow_nan=False, indent=1))
    else:
        print(report(rows, "--isolated" in flags, windows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
