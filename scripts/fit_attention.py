#!/usr/bin/env python
"""Fit the fused attention kernels' efficiency curves (accelerator spec ``attention_efficiency``) to published
attention-kernel benchmarks, hardware/measurements/attention.yaml, and nothing else (never to a training run).

Model (scalemodel.cost.compute.flash_kernel_time / attention_kernel_efficiency), per accelerator, kernel and
direction::

    eff(k, d) = attn_max * k / (k + seq_half) * d / (d + head_half)
    t_fwd     = F / (peak * eff_fwd(k, d)),   t_bwd = 2.5 F / (peak * eff_bwd(k, d)),   F = 2 s k (2 d) b h

with k = keys per query (s without mask; (s + 1) / 2 with the causal mask, the blocks a fused kernel computes,
Shape.causal_keys), peak the catalog's 16-bit peak. One curve covers both masks: a causal call is priced at
k = (s + 1) / 2, where the curve is lower, which is how the measured causal / full time ratio (0.55-0.6 at
s >= 2k, more at short s; scripts/validate_attention.py) exceeds 0.5.

Measured time of a point = the source's FLOPs (attention.yaml ``flop_conventions``: fa-benchmark, forward
4 b h s^2 d halved when causal, backward 2.5x, forward + backward 3.5x; cudnn-frontend, forward 4 b h N d over the
N score entries computed, s (s + 1) / 2 causal, w (w + 1) / 2 + (s - w) w with a sliding window w) / its TFLOP/s.
A point with a ``window`` is priced at keys w - w (w - 1) / (2 s), as Shape.causal_keys prices a local layer.
Least squares on ln(t_model / t_measured) (scipy), attn_max bounded to (0, 1] (no kernel beyond the peak),
seq_half and head_half to >= 0. Per (accelerator, kernel):

* forward points exist: the forward curve is fitted to them;
* forward + backward points too (same kernel; possibly another source, e.g. h100-sxm fa2: FA3-FWD forward, FA2-H100
  forward + backward): the backward curve is fitted to them with the forward curve held, t = t_fwd + t_bwd;
* only forward + backward points (a100-sxm-80g fa1/fa2/triton/xformers, h100-sxm fa1): ONE curve for both
  directions (ASSUMPTION, stated: the backward runs at the forward's efficiency, i.e. takes 2.5x its time; the
  measured H200 fwd+bwd / fwd ratios 3.6-5.9 say the backward is slower at short sequences, so these curves
  understate the forward's and overstate the backward's speed at s <= 1k, their sum fits);
* only forward points (h100-sxm triton): the backward is BORROWED as the donor's backward / forward
  relation (:data:`BWD_DONORS`): attn_max = own forward attn_max x donor bwd / donor fwd attn_max, seq_half and
  head_half the donor backward's.
* points at one head dim only (b200 cudnn and fa2: NVIDIA/cudnn-frontend's B200 sweeps, d 128 only): head_half
  cannot be fitted (it trades against attn_max), so it is HELD at the same kernel family's fitted value on Hopper
  (:data:`HEAD_DONORS`: h200-sxm's own cuDNN / FA2 sweeps, d 64 and 128) and attn_max, seq_half are fitted; an
  assumption (the head-dim dependence of the Blackwell kernels is not measured), stated in the source.

Points marked ``fit: false`` in attention.yaml (with the reason in their source's ``read``) are recorded, not fitted.
Accelerators (or kernels) without a measurement borrow a measured one whole (:data:`ACC_DONORS`,
:data:`KERNEL_DONORS`) and say so in their spec's ``source``. Accelerators named nowhere keep the GEMM-curve
pricing of the core (cost.compute.flash_core_time): Volta, TPU, Gaudi, and AMD kernels other than
AITER's asm v3 (no attention benchmark).
The curves are on the isolated basis (a kernel benchmark runs one call back to back): no in-layer factor is
applied, unlike the GEMM curves (that factor was measured as what the layer pricing leaves out beside the GEMMs).

``--windows`` prints the sliding-window evidence (:func:`window_check`; report only); ``--causal`` the causal /
unmasked backward relation of the Hopper sweeps with both masks (:func:`causal_check`; report only).
``--check`` compares the fits with the accelerator YAMLs' ``attention_efficiency`` (rounded to 0.001 / 1 / 1)
and exits 1 when they differ; ``--yaml`` prints the blocks; ``--write`` puts them into the YAMLs (then run
scripts/build_catalog.py); ``-v`` every point's residual.
Usage: python scripts/fit_attention.py [-v] [--check] [--windows] [--causal] [--yaml] [--write]
"""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scalemodel.cost.compute import FLASH_BACKWARD_FLOP_RATIO, flash_kernel_time
from scalemodel.cost.transformer import causal_mean_keys
from scalemodel.specs import load_accelerator
from scalemodel.specs.accelerator import cudnn_release_key
from scalemodel.specs.loader import builtin_names

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: repo_yaml beside this file
from repo_yaml import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = ROOT / "hardware" / "measurements" / "attention.yaml"


def _load(path: Path) -> Any:
    """attention.yaml as a deep copy of its one parse (scripts/repo_yaml.py), another file as yaml.safe_load
    reads it."""
    if Path(path).resolve() == ATTENTION.resolve():
        return read_yaml(path)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


#: FLOP conventions a source may count in (attention.yaml ``flop_conventions``; :func:`source_forward_flops`)
FLOP_CONVENTIONS = ("fa-benchmark", "cudnn-frontend")
#: source FLOPs per direction as multiples of the forward (both conventions: backward 2.5x at d_qk = d_vo)
PER_DIR = {"fwd": 1.0, "bwd": FLASH_BACKWARD_FLOP_RATIO, "fwd+bwd": 1.0 + FLASH_BACKWARD_FLOP_RATIO}
#: (accelerator, kernel) with forward points only -> (accelerator, kernel) whose backward / forward relation it takes
#: (h100-sxm cudnn and fa3 borrowed h200-sxm cudnn's until FA3-BWD's mask was read: the paper's Figure 6 captions)
BWD_DONORS = {("h100-sxm", "triton"): ("a100-sxm-80g", "triton")}  # the only Triton fwd+bwd points
#: accelerator without an attention benchmark -> the measured accelerator whose curves it takes (all kernels)
ACC_DONORS = {"h800": "h100-sxm", "h100-pcie": "h100-sxm", "a100-sxm-40g": "a100-sxm-80g",
              "a100-pcie-80g": "a100-sxm-80g", "b300": "b200"}
#: (accelerator, kernel) not measured on that accelerator -> the accelerator it is borrowed from
KERNEL_DONORS = {("h200-sxm", "fa3"): "h100-sxm", ("h200-sxm", "fa1"): "h100-sxm",
                 ("h200-sxm", "triton"): "h100-sxm", ("gb200", "cudnn"): "b200", ("gb200", "fa2"): "b200",
                 ("gb300", "fa2"): "b200", ("mi325x", "aiter"): "mi300x", ("mi350x", "aiter"): "mi355x"}
#: (accelerator, kernel) fitted by RATIO -> (paired accelerator, paired source): each of its points is paired with the
#: point of the same shape, direction and kernel in the paired source (same benchmark, same software, other GPU), and
#: its target time is the paired accelerator's catalog curve at that shape x (this GPU's time / the paired GPU's
#: time). The curve so fitted carries the hardware difference measured at one software release, not that release's
#: level. gb300 cudnn: NVIDIA/cudnn-frontend's GB300 and GB200 sweeps at cuDNN 9.22 (attention.yaml CUDNN-GB300-9.22)
RATIO_FITS = {("gb300", "cudnn"): ("gb200", "CUDNN-GB200-9.22")}
WHY = {"h800": "the H100 SXM die with export-limited NVLink; same SMs and clocks",
       "h100-pcie": "same GH100 kernels; its lower clocks and power are in its own peak, the fraction is assumed",
       "a100-sxm-40g": "same GA100 die and clocks", "a100-pcie-80g": "same GA100 die; fraction of its own peak",
       "h200-sxm": "same GH100 die (H200 = H100 with HBM3e); the kernel is compute-bound",
       "gb200": "same Blackwell die as the B200, as a fraction of its own (higher-clocked) peak; its own cuDNN sweeps "
                "(CUDNN-GB200-9.17, CUDNN-919, CUDNN-GB200-9.22) are later releases, fitted each to its own release's "
                "curve (attention_releases), not to this default",
       "gb300": "Blackwell Ultra is the Blackwell die (208e9 transistors, TSMC 4NP) with 152 of its 160 SMs enabled "
                "and twice the SFU exponential rate; the curve is taken as a fraction of its own peak, as gb200 takes "
                "it; no FlashAttention-2 sweep on GB300 with its GB200 twin was found (Azure's ND GB300 v6 FA2 figure, "
                "one shape, CUDA 13.0, against ND GB200 v6's on CUDA 12.8, is not a same-software pair)",
       "b300": "the HGX Blackwell Ultra part (sm_103, 148 SMs enabled, 1100 W), nearest to the B200 of the same HGX "
               "board, as a fraction of its own peak; gb300's ratio fit is not taken (it carries GB300's 1400 W, "
               "152 SMs and a ratio measured at cuDNN 9.22); "
               "no B300 SDPA sweep was found",
       "mi325x": "the MI300X's die (gfx942, 304 CUs, the same 1307.4 TFLOP/s dense BF16 peak) with HBM3E; the asm v3 "
                 "kernels are built per gfx arch (aiter's table names 'mi300/325' one column), so the curve is taken "
                 "as a fraction of the same peak; no MI325X attention sweep was found",
       "mi350x": "the MI355X's die (gfx950, 256 CUs) at a 2200 MHz peak engine clock against 2400 and 1000 W against "
                 "1400; the asm v3 kernels are built per gfx arch, so the curve is taken as a fraction of this part's "
                 "own (clock-scaled) peak; no MI350X attention sweep was found"}
#: (accelerator, kernel) measured at one head dim -> (accelerator, kernel) whose fitted head_half (per direction) it
#: holds: the same kernel family on Hopper (h200-sxm: scalemodel's own sweeps at d 64 and 128)
HEAD_DONORS = {("b200", "cudnn"): ("h200-sxm", "cudnn"), ("b200", "fa2"): ("h200-sxm", "fa2"),
               # AMD AITER's asm v3 kernels: ROCm/aiter's table (AITER-MHA-V3) is at head dim 128 only and no
               # head-dim sweep of them was found; held at the fused kernel measured at two head dims nearest in
               # kind (a vendor's hand-scheduled fused kernel, h200-sxm cuDNN): ASSUMPTION. At head dim 128, every
               # validated AMD row's, the fitted attn_max absorbs it (the curve reproduces the points either way)
               ("mi300x", "aiter"): ("h200-sxm", "cudnn"), ("mi355x", "aiter"): ("h200-sxm", "cudnn")}
#: accelerators with attention points recorded but not fitted (``fit: false``; their source says why)
RECORDED_NOT_FITTED = frozenset({"gb200"})
#: cuDNN release -> {accelerator: sources}: the per-release cudnn curves (accelerator spec ``attention_releases``,
#: docs/model.md#cudnn-release), each fitted to ONE release's own sweep on that accelerator (the sources' run logs /
#: CSV columns name the release: attention.yaml), by level, ``fit: false`` points included (they are recorded out of
#: the default fit because the default stands for the earliest releases; here each is fitted at its own release).
#: attn_max and seq_half fitted, head_half HELD at the default b200 cudnn fit's (h200-sxm's, :data:`HEAD_DONORS`), so
#: the releases differ only in level and short-sequence cost; windowed points are left out
#: (docs/model.md#window-calls). A per_call_latency source (the B200 torch-path sweeps) keeps the latency the
#: default fit found for it: its 7 points alone trade the latency against seq_half (fitted free, the 9.10-only and
#: 9.13-only backward curves differed by 35 % at s 4096 causal where the two sweeps' published times differ by 1 %);
#: the joint fit of both sweeps, one kernel curve, is what separates them
RELEASE_FITS = {"9.10": {"b200": ("CUDNN-B200-9.10",)}, "9.13": {"b200": ("CUDNN-B200-9.13",)},
                "9.17": {"gb200": ("CUDNN-GB200-9.17",)},
                "9.19": {"gb200": ("CUDNN-919",), "gb300": ("CUDNN-919",)},
                "9.22": {"gb200": ("CUDNN-GB200-9.22",), "gb300": ("CUDNN-GB300-9.22",)}}
#: accelerator -> accelerator whose release curves it takes where it has no sweep of that release (same die as a
#: fraction of its own peak, the reasons of :data:`WHY`): b200 <-> gb200 both ways, b300 from b200. gb300 takes none
#: (a run at an earlier release than its 9.19 is refused: specs.training.cudnn_release_held)
RELEASE_DONORS = {"b200": "gb200", "gb200": "b200", "b300": "b200"}
#: why an accelerator may take its :data:`RELEASE_DONORS` donor's release curve (written into the borrowed source)
RELEASE_WHY = {"b200": "the B200 is the GB200's Blackwell die at lower clocks; the curve is a fraction of its own "
                       "peak, as gb200 takes b200's default curve",
               "gb200": "same Blackwell die as the B200, as a fraction of its own (higher-clocked) peak",
               "b300": "b200's, as b300 takes b200's default curve (the HGX Blackwell Ultra part; no B300 SDPA sweep)"}
TOL = {"attn_max": 0.0006, "seq_half": 0.6, "head_half": 0.6}
PARAMS = ("attn_max", "seq_half", "head_half")


def load_points(path: Path = ATTENTION, recorded: bool = False) -> list[dict[str, Any]]:
    """The fitted points (``recorded``: also those marked ``fit: false``), each with its measured time."""
    doc = _load(path)
    conv = doc["flop_conventions"]
    out = []
    for p in doc["points"]:
        flops = doc["sources"][p["src"]].get("flops")
        if flops not in FLOP_CONVENTIONS or flops not in conv:
            continue
        if p.get("fit") is False and not recorded:  # recorded, not fitted (its source's ``read`` says why)
            continue
        fwd = source_forward_flops(p, flops)
        out.append({**p, "t_meas": fwd * PER_DIR[p["dir"]] / (p["tflops"] * 1e12),
                    "latency": bool(doc["sources"][p["src"]].get("per_call_latency"))})
    return out


def keys_of(p: dict[str, Any]) -> float:
    """Keys per query of the point's call, as Shape.causal_keys prices a layer: s without mask, (s + 1) / 2 causal,
    ``w - w (w - 1) / (2 s)`` with a sliding window w < s (``window``)."""
    if not p["causal"]:
        return float(p["s"])
    return float(causal_mean_keys(p["s"], min(p["s"], p.get("window") or p["s"])))


def source_forward_flops(p: dict[str, Any], convention: str) -> float:
    """Forward FLOPs of the point's call in its source's convention (attention.yaml ``flop_conventions``):
    fa-benchmark 4 b h s^2 d, halved when causal; cudnn-frontend 4 b h N d with N the score entries computed
    (s^2, s (s + 1) / 2 causal, w (w + 1) / 2 + (s - w) w with a window), i.e. N = s * keys_of(p)."""
    if convention == "cudnn-frontend":
        return 4.0 * p["b"] * p["h"] * p["s"] * keys_of(p) * p["d"]
    return 4.0 * p["b"] * p["h"] * p["s"] ** 2 * p["d"] * (0.5 if p["causal"] else 1.0)


def direction_time(p: dict[str, Any], acc: Any, curve: dict[str, float], ratio: float) -> float:
    """Model time of one direction of the point's call (ratio 1 forward, 2.5 backward) on ``curve``."""
    return float(flash_kernel_time(p["s"], keys_of(p), p["d"], p["d"], p["b"] * p["h"], peak_flops=acc.peak("bf16"),
                                   memory_bandwidth=acc.memory_bandwidth, memory_efficiency=0.85, elem_bytes=2.0,
                                   flop_ratio=ratio, **curve))


def model_time(p: dict[str, Any], acc: Any, fwd: dict[str, float], bwd: dict[str, float]) -> float:
    t = 0.0
    if p["dir"] in ("fwd", "fwd+bwd"):
        t += direction_time(p, acc, fwd, 1.0)
    if p["dir"] in ("bwd", "fwd+bwd"):
        t += direction_time(p, acc, bwd, FLASH_BACKWARD_FLOP_RATIO)
    return t


def _curve(x: np.ndarray) -> dict[str, float]:
    return {"attn_max": float(x[0]), "seq_half": float(x[1]), "head_half": float(x[2])}


def _lsq(pts: list[dict[str, Any]], acc: Any, build: Any, head_half: float | None = None,
         held_latency: dict[str, float] | None = None) -> tuple[dict[str, float], float, float, dict[str, float]]:
    """Fit one curve: ``build(curve)`` -> (fwd, bwd) curves for the model; (curve, rms ln, worst rel, per-call
    latency per source in s). With ``head_half`` that parameter is held and attn_max, seq_half are fitted
    (:data:`HEAD_DONORS`). Points of a source marked ``per_call_latency`` (its benchmark times one call from the
    host's launch, after a synchronize) are modelled as t_kernel + t0, one t0 >= 0 per such source fitted beside
    the curve (a property of that benchmark's timing, not of the kernel: the curve alone goes to the catalog);
    ``held_latency`` gives a source's latency instead of fitting it (:func:`release_fits`)."""
    from scipy.optimize import least_squares  # optional heavy dependency, only this script needs it

    t_meas = np.array([p["t_meas"] for p in pts])
    held = held_latency or {}
    lat_srcs = sorted({p["src"] for p in pts if p.get("latency")} - set(held))
    n = 3 if head_half is None else 2

    def full(x: np.ndarray) -> np.ndarray:
        return x[:3] if head_half is None else np.array([x[0], x[1], head_half])

    def resid(x: np.ndarray) -> np.ndarray:
        f, b = build(_curve(full(x)))
        t0 = {**held, **dict(zip(lat_srcs, x[n:], strict=True))}
        return np.log(np.array([model_time(p, acc, f, b) + t0.get(p["src"], 0.0) for p in pts]) / t_meas)

    x0, lo, hi = [0.7, 256.0, 16.0], [1e-3, 0.0, 0.0], [1.0, 1e5, 1e4]
    k = len(lat_srcs)
    sol = least_squares(resid, x0=x0[:n] + [5e-5] * k, bounds=(lo[:n] + [0.0] * k, hi[:n] + [1e-2] * k))
    r = resid(sol.x)
    rel = np.exp(r) - 1.0
    return (_curve(full(sol.x)), float(np.sqrt(np.mean(r**2))), float(rel[np.argmax(np.abs(rel))]),
            dict(zip(lat_srcs, (float(v) for v in sol.x[n:]), strict=True)))


def _shape(p: dict[str, Any]) -> tuple[Any, ...]:
    return (p["kernel"], p["dir"], p["causal"], p["b"], p["h"], p.get("h_kv"), p["d"], p["s"])


def ratio_targets(pts: list[dict[str, Any]], paired: list[dict[str, Any]], acc: Any,
                  curve: dict[str, Any]) -> list[dict[str, Any]]:
    """:data:`RATIO_FITS`: each point with ``t_meas`` replaced by the paired accelerator's curve time at its shape x
    (its measured time / the paired point's measured time); a point without a twin is an error."""
    twin = {_shape(q): q for q in paired}
    out = []
    for p in pts:
        q = twin.get(_shape(p))
        if q is None:
            print(f"error: {ATTENTION.name}: {p['src']} {p['dir']} s {p['s']} d {p['d']}: no point of the same shape "
                  "in its RATIO_FITS pair", file=sys.stderr)
            raise SystemExit(2)
        t_paired = model_time(p, acc, curve["fwd"], curve["bwd"])
        out.append({**p, "ratio": p["t_meas"] / q["t_meas"], "t_meas": t_paired * p["t_meas"] / q["t_meas"]})
    return out


def _ratio_fit(key: tuple[str, str], pts_all: list[dict[str, Any]], pacc: str, donor: str, paired_curve: dict[str, Any],
               paired: list[dict[str, Any]]) -> dict[str, Any]:
    """One :data:`RATIO_FITS` entry: per direction, the curve fitted to the paired accelerator's curve x the measured
    time ratios (:func:`ratio_targets`); head_half fitted where the pairs span two head dims or more, else held at the
    paired curve's; a direction without pairs keeps the paired curve."""
    name, kernel = key
    tgt = ratio_targets(pts_all, paired, load_accelerator(pacc, overrides=[]), paired_curve)
    acc = load_accelerator(name, overrides=[])
    f: dict[str, Any] = {"n_fwd": 0, "n_fb": 0, "points": tgt, "fb_kind": "bwd"}
    parts = []
    for direction, (k_n, k_rms, k_w) in (("fwd", ("n_fwd", "rms_fwd", "worst_fwd")),
                                         ("bwd", ("n_fb", "rms_fb", "worst_fb"))):
        pts = [p for p in tgt if p["dir"] == direction]
        if not pts:
            f[direction] = paired_curve[direction]
            parts.append(f"{direction} the paired curve's (no {direction} pairs)")
            continue
        heads = sorted({p["d"] for p in pts})
        held = None if len(heads) > 1 else paired_curve[direction]["head_half"]
        build = (lambda c: (c, c)) if direction == "fwd" else (lambda c, fwd=f["fwd"]: (fwd, c))
        f[direction], f[k_rms], f[k_w], _ = _lsq(pts, acc, build, held)
        f[k_n] = len(pts)
        r = np.array([p["ratio"] for p in pts])
        parts.append(f"{direction} {len(pts)} pairs, {name} / {pacc} time median {float(np.median(r)):.3f} "
                     f"(speed {1 / float(np.median(r)):.3f}x, range {1 / float(r.max()):.2f}-{1 / float(r.min()):.2f})"
                     + (", attn_max at its bound 1" if f[direction]["attn_max"] > 0.9995 else "")
                     + (f", head dims {', '.join(str(h) for h in heads)}" if held is None else
                        f", head_half HELD at the paired curve's ({held:.0f}): head dim {heads[0]} only"))
    f["how"] = (f"RATIO fit (RATIO_FITS): fitted to {pacc}'s curve ({donor} {kernel}) x the measured {name} / {pacc} "
                f"time of the same shape in {pts_all[0]['src']} / {paired[0]['src'] if paired else '?'} (one "
                "benchmark, one cuDNN release, both GPUs): " + "; ".join(parts))
    return f


def fit(points: list[dict[str, Any]],
        recorded: list[dict[str, Any]] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """(accelerator, kernel) -> {fwd, bwd, how, rms_fwd, rms_bwd, ...} for every measured pair, then the ratio fits
    (:data:`RATIO_FITS`, paired with ``recorded``: every point, ``fit: false`` ones included; by default the file's),
    then borrowed."""
    if recorded is None:
        recorded = load_points(recorded=True)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        by[(p["acc"], p["kernel"])].append(p)
    fits: dict[tuple[str, str], dict[str, Any]] = {}
    order = sorted((k for k in by if k not in RATIO_FITS),
                   key=lambda key: (key in BWD_DONORS or key in HEAD_DONORS, key))
    for key in order:
        acc = load_accelerator(key[0], overrides=[])
        fw = [p for p in by[key] if p["dir"] == "fwd"]
        fb = [p for p in by[key] if p["dir"] != "fwd"]
        f: dict[str, Any] = {"n_fwd": len(fw), "n_fb": len(fb), "points": by[key]}
        held = fits[HEAD_DONORS[key]] if key in HEAD_DONORS else None
        if fw:
            f["fwd"], f["rms_fwd"], f["worst_fwd"], f["lat_fwd"] = _lsq(fw, acc, lambda c: (c, c),
                                                                        held["fwd"]["head_half"] if held else None)
            if fb:
                fwd = f["fwd"]
                f["bwd"], f["rms_fb"], f["worst_fb"], f["lat_fb"] = _lsq(
                    fb, acc, lambda c, fwd=fwd: (fwd, c), held["bwd"]["head_half"] if held else None)
                srcs = sorted({p["src"] for p in fw} | {p["src"] for p in fb})
                kinds = f["fb_kind"] = "/".join(sorted({p["dir"] for p in fb}))
                f["how"] = (f"forward fitted to {len(fw)} fwd points, backward to {len(fb)} {kinds} points "
                            f"({', '.join(srcs)})")
                if f["lat_fwd"] or f["lat_fb"]:
                    f["how"] += ("; per-call latency of the benchmark's timing fitted beside the curve, per source, "
                                 "not in the catalog (" + ", ".join(
                                     f"{s} {1e6 * f['lat_fwd'].get(s, 0.0):.0f} us fwd, "
                                     f"{1e6 * f['lat_fb'].get(s, 0.0):.0f} us bwd"
                                     for s in sorted(set(f["lat_fwd"]) | set(f["lat_fb"]))) + ")")
                if held:
                    d = HEAD_DONORS[key]
                    f["how"] += (f"; head_half HELD at {d[0]} {d[1]}'s ({held['fwd']['head_half']:.0f} fwd, "
                                 f"{held['bwd']['head_half']:.0f} bwd): points at head dim "
                                 f"{', '.join(str(x) for x in sorted({p['d'] for p in by[key]}))} only")
            else:
                donor = fits[BWD_DONORS[key]]
                ratio = donor["bwd"]["attn_max"] / donor["fwd"]["attn_max"]
                f["bwd"] = {"attn_max": min(1.0, f["fwd"]["attn_max"] * ratio), "seq_half": donor["bwd"]["seq_half"],
                            "head_half": donor["bwd"]["head_half"]}
                f["how"] = (f"forward fitted to {len(fw)} fwd points ({', '.join(sorted({p['src'] for p in fw}))}); "
                            f"backward BORROWED from {BWD_DONORS[key][0]} {BWD_DONORS[key][1]}: attn_max x its "
                            f"bwd / fwd attn_max {ratio:.3f}, its seq_half and head_half (no fwd+bwd points)")
        else:
            c, f["rms_fb"], f["worst_fb"], f["lat_fb"] = _lsq(fb, acc, lambda c: (c, c))
            f["fwd"] = f["bwd"] = c
            f["how"] = (f"one curve for both directions fitted to {len(fb)} fwd+bwd points "
                        f"({', '.join(sorted({p['src'] for p in fb}))}; no fwd points: the backward is ASSUMED to run "
                        "at the forward's efficiency)")
        fits[key] = f
    for key, (pacc, psrc) in RATIO_FITS.items():
        if key in by:
            donor = KERNEL_DONORS.get((pacc, key[1]), pacc)
            fits[key] = _ratio_fit(key, by[key], pacc, donor, fits[(donor, key[1])],
                                   [q for q in recorded if q["src"] == psrc and q["acc"] == pacc])
    for (name, kernel), donor in KERNEL_DONORS.items():
        d = fits[(donor, kernel)]
        fits[(name, kernel)] = {"fwd": d["fwd"], "bwd": d["bwd"], "borrowed": donor,
                                "how": f"BORROWED from {donor} {kernel} ({WHY[name]}): no {kernel} benchmark "
                                       f"{'fitted ' if name in RECORDED_NOT_FITTED else ''}on {name}"}
    for name, donor in ACC_DONORS.items():
        for (a, kernel), d in list(fits.items()):
            if a == donor:
                fits[(name, kernel)] = {"fwd": d["fwd"], "bwd": d["bwd"], "borrowed": donor,
                                        "how": f"BORROWED from {donor} {kernel} ({WHY[name]}): no attention benchmark "
                                               f"on {name}"}
    return fits


def release_fits(recorded: list[dict[str, Any]] | None = None,
                 head: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """(accelerator, release) -> {fwd, bwd, how, rms...} for :data:`RELEASE_FITS`, then the borrowed ones
    (:data:`RELEASE_DONORS`). ``head``: the curve whose head_half is held (default: the b200 cudnn default fit's)."""
    if recorded is None:
        recorded = load_points(recorded=True)
    if head is None:
        head = fit(load_points(), recorded)[("b200", "cudnn")]
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for release, per_acc in sorted(RELEASE_FITS.items(), key=lambda kv: cudnn_release_key(kv[0])):
        for name, srcs in per_acc.items():
            pts = [p for p in recorded if p["src"] in srcs and p["acc"] == name and p["kernel"] == "cudnn"
                   and not p.get("window")]
            acc = load_accelerator(name, overrides=[])
            fw = [p for p in pts if p["dir"] == "fwd"]
            bw = [p for p in pts if p["dir"] == "bwd"]
            f: dict[str, Any] = {"n_fwd": len(fw), "n_fb": len(bw), "points": pts, "fb_kind": "bwd"}
            lat_f = {s: v for s, v in head.get("lat_fwd", {}).items() if s in srcs}
            lat_b = {s: v for s, v in head.get("lat_fb", {}).items() if s in srcs}
            f["fwd"], f["rms_fwd"], f["worst_fwd"], _ = _lsq(fw, acc, lambda c: (c, c), head["fwd"]["head_half"], lat_f)
            fwd = f["fwd"]
            f["bwd"], f["rms_fb"], f["worst_fb"], _ = _lsq(bw, acc, lambda c, fwd=fwd: (fwd, c),
                                                           head["bwd"]["head_half"], lat_b)
            f["lat_fwd"], f["lat_fb"] = lat_f, lat_b
            masks = " and ".join(m for m, on in (("causal", True), ("unmasked", False))
                                 if any(p["causal"] is on for p in pts))
            f["how"] = (f"cuDNN {release} only: forward fitted to {len(fw)} fwd points, backward to {len(bw)} bwd "
                        f"points ({', '.join(srcs)} on {name}: {masks}, no window; head dims "
                        f"{', '.join(str(d) for d in sorted({p['d'] for p in pts}))}), by level")
            lat = sorted(set(f["lat_fwd"]) | set(f["lat_fb"]))
            if lat:
                f["how"] += ("; the benchmark's per-call latency HELD at the default fit's for that source (one "
                             "release's points cannot separate it from seq_half; not in the catalog: "
                             + ", ".join(f"{1e6 * f['lat_fwd'].get(s, 0.0):.0f} us fwd, "
                                         f"{1e6 * f['lat_fb'].get(s, 0.0):.0f} us bwd" for s in lat) + ")")
            f["how"] += (f"; head_half HELD at the default b200 cudnn curve's ({head['fwd']['head_half']:.0f} fwd, "
                         f"{head['bwd']['head_half']:.0f} bwd)")
            out[(name, release)] = f
    for name, donor in RELEASE_DONORS.items():
        for (a, release), d in list(out.items()):
            if a == donor and (name, release) not in out:
                fitted_on = d.get("fitted_on", donor)  # a donor's own borrowed curve: name the fit, then the donor
                via = "" if fitted_on == donor else f", via {donor}"
                out[(name, release)] = {"fwd": d["fwd"], "bwd": d["bwd"], "borrowed": donor, "fitted_on": fitted_on,
                                        "how": f"cuDNN {release}: BORROWED from {fitted_on}'s fit of that release{via} "
                                               f"({RELEASE_WHY[name]}): no {release} sweep on {name}"}
    return out


def _print_point_errors(name: str, f: dict[str, Any], *, src_width: int, dir_width: int) -> None:
    """Each point of fit ``f`` (its ``points``; none for a borrowed curve) with the fitted curve's time error,
    the source's per-call latency (``lat_fwd`` / ``lat_fb``) added, as the fit modelled it."""
    if "points" not in f:
        return
    acc = load_accelerator(name, overrides=[])
    for p in f["points"]:
        lat = f.get("lat_fwd" if p["dir"] == "fwd" else "lat_fb", {}).get(p["src"], 0.0)
        e = (model_time(p, acc, f["fwd"], f["bwd"]) + lat) / p["t_meas"] - 1.0
        print(f"      {p['src']:{src_width}s} {p['dir']:{dir_width}s} causal {p['causal']!s:5s} d {p['d']:3d} "
              f"s {p['s']:5d} {p['tflops']:6.1f} TFLOP/s  model time {100 * e:+6.1f} %")


def release_report(rel: dict[tuple[str, str], dict[str, Any]], verbose: bool) -> None:
    """Print each (accelerator, release) curve of :func:`release_fits` with its fit statistics or its donor; with
    ``verbose`` every point's time error on it."""
    print("per-release cudnn curves (attention_releases; docs/model.md#cudnn-release)")
    for (name, release), f in sorted(rel.items(), key=lambda kv: (kv[0][0], cudnn_release_key(kv[0][1]))):
        fw, bw = rounded(f["fwd"]), rounded(f["bwd"])
        stats = "" if "rms_fwd" not in f else (f"  fwd n {f['n_fwd']} rms {f['rms_fwd']:.3f} worst "
                                               f"{100 * f['worst_fwd']:+.1f} %; bwd n {f['n_fb']} rms "
                                               f"{f['rms_fb']:.3f} worst {100 * f['worst_fb']:+.1f} %")
        print(f"  {name:6s} {release:5s} fwd {fw['attn_max']:.3f}/{fw['seq_half']:5.0f}/{fw['head_half']:4.0f}  "
              f"bwd {bw['attn_max']:.3f}/{bw['seq_half']:5.0f}/{bw['head_half']:4.0f}{stats}"
              f"{' (borrowed from ' + f['borrowed'] + ')' if 'borrowed' in f else ''}")
        if verbose:
            _print_point_errors(name, f, src_width=16, dir_width=4)


def release_blocks(rel: dict[tuple[str, str], dict[str, Any]]) -> dict[str, str]:
    """accelerator -> its ``attention_releases`` YAML block."""
    by: dict[str, list[str]] = defaultdict(list)
    for (name, release), f in sorted(rel.items(), key=lambda kv: (kv[0][0], cudnn_release_key(kv[0][1]))):
        fw, bw = rounded(f["fwd"]), rounded(f["bwd"])
        rms = (f" rms ln(t) {f['rms_fwd']:.3f} fwd, {f['rms_fb']:.3f} bwd" if "rms_fwd" in f else "")
        src = f"scripts/fit_attention.py on hardware/measurements/attention.yaml: {f['how']}.{rms}".replace('"', "'")
        by[name].append(f"  '{release}':\n"
                        f"    cudnn:\n"
                        f"      fwd: {{attn_max: {fw['attn_max']}, seq_half: {fw['seq_half']:g}, "
                        f"head_half: {fw['head_half']:g}}}\n"
                        f"      bwd: {{attn_max: {bw['attn_max']}, seq_half: {bw['seq_half']:g}, "
                        f"head_half: {bw['head_half']:g}}}\n"
                        f"      source: \"{src}\"")
    return {name: "attention_releases:\n" + "\n".join(v) for name, v in by.items()}


def write_releases(rel: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Replace (or add, right after the ``attention_efficiency`` block) each accelerator's ``attention_releases``."""
    for name, block in sorted(release_blocks(rel).items()):
        path = ROOT / "hardware" / "accelerators" / f"{name}.yaml"
        lines = path.read_text(encoding="utf-8").split("\n")
        if "attention_releases:" in lines:
            i = lines.index("attention_releases:")
            j = next(n for n in range(i + 1, len(lines)) if lines[n] and not lines[n].startswith(" "))
            del lines[i:j]
        i = lines.index("attention_efficiency:")
        at = next(n for n in range(i + 1, len(lines)) if lines[n] and not lines[n].startswith(" "))
        lines[at:at] = block.split("\n")
        path.write_text("\n".join(lines), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} attention_releases")


def check_releases(rel: dict[tuple[str, str], dict[str, Any]]) -> int:
    """Each built-in accelerator's ``attention_releases`` against the fits: every accelerator the fits name, and every
    one holding release curves (a block on one the fits do not name is not fitted, and a run naming it is priced)."""
    bad = 0
    names = {name for name, _ in rel} | {n for n in builtin_names("accelerator")
                                         if load_accelerator(n, overrides=[]).attention_releases}
    for name in sorted(names):
        have = load_accelerator(name, overrides=[]).attention_releases or {}
        want = {r for n, r in rel if n == name}
        for release in sorted(set(have) ^ want):
            print(f"check: {name} cuDNN {release}: "
                  f"{'in the catalog, not fitted' if release in have else 'fitted, not in the catalog'}")
            bad += 1
        for release in sorted(set(have) & want):
            bad += _curve_mismatches(f"{name} cuDNN {release}", have[release]["cudnn"], rel[(name, release)])
    print(f"check: {'all catalog release curves match the fits' if not bad else f'{bad} release mismatches'}")
    return 1 if bad else 0


def _curve_mismatches(label: str, got: Any, fit: dict[str, Any]) -> int:
    """Print and count the parameters of a catalog curve (``got``: fwd / bwd) that differ from its fit (rounded)."""
    bad = 0
    for direction in ("fwd", "bwd"):
        have, want = getattr(got, direction), rounded(fit[direction])
        for p in PARAMS:
            if not math.isclose(float(getattr(have, p)), want[p], abs_tol=TOL[p]):
                print(f"check: {label} {direction} {p} {getattr(have, p)} in the catalog, fit {want[p]}")
                bad += 1
    return bad


def rounded(c: dict[str, float]) -> dict[str, float]:
    return {"attn_max": round(c["attn_max"], 3), "seq_half": float(round(c["seq_half"])),
            "head_half": float(round(c["head_half"]))}


def report(fits: dict[tuple[str, str], dict[str, Any]], verbose: bool) -> None:
    print("fused attention kernel curves: eff = attn_max * k/(k + seq_half) * d/(d + head_half); residual "
          "r = ln(t_model/t_measured)")
    for (name, kernel), f in sorted(fits.items()):
        fw, bw = rounded(f["fwd"]), rounded(f["bwd"])
        stats = []
        if "rms_fwd" in f:
            stats.append(f"fwd n {f['n_fwd']} rms {f['rms_fwd']:.3f} worst {100 * f['worst_fwd']:+.1f} %")
        if "rms_fb" in f:
            stats.append(f"{f.get('fb_kind', 'fwd+bwd')} n {f['n_fb']} rms {f['rms_fb']:.3f} "
                         f"worst {100 * f['worst_fb']:+.1f} %")
        print(f"  {name:13s} {kernel:8s} fwd {fw['attn_max']:.3f}/{fw['seq_half']:5.0f}/{fw['head_half']:4.0f}  "
              f"bwd {bw['attn_max']:.3f}/{bw['seq_half']:5.0f}/{bw['head_half']:4.0f}  {'; '.join(stats)}"
              f"{' (borrowed from ' + f['borrowed'] + ')' if 'borrowed' in f else ''}")
        if verbose:
            _print_point_errors(name, f, src_width=8, dir_width=7)


def yaml_blocks(fits: dict[tuple[str, str], dict[str, Any]]) -> str:
    by: dict[str, list[str]] = defaultdict(list)
    for (name, kernel), f in sorted(fits.items()):
        fw, bw = rounded(f["fwd"]), rounded(f["bwd"])
        parts = ([f"{f['rms_fwd']:.3f} fwd"] if "rms_fwd" in f else []) + (
            [f"{f['rms_fb']:.3f} {f.get('fb_kind', 'fwd+bwd')}"] if "rms_fb" in f else [])
        rms = f" rms ln(t) {', '.join(parts)}" if parts else ""
        src = f"scripts/fit_attention.py on hardware/measurements/attention.yaml: {f['how']}.{rms}".replace('"', "'")
        by[name].append(f"  {kernel}:\n"
                        f"    fwd: {{attn_max: {fw['attn_max']}, seq_half: {fw['seq_half']:g}, "
                        f"head_half: {fw['head_half']:g}}}\n"
                        f"    bwd: {{attn_max: {bw['attn_max']}, seq_half: {bw['seq_half']:g}, "
                        f"head_half: {bw['head_half']:g}}}\n"
                        f"    source: \"{src}\"")
    return "\n".join(f"# {name}\nattention_efficiency:\n" + "\n".join(v) for name, v in sorted(by.items()))


def write(fits: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Replace (or add, before compute_units / collective_units / sources) each fitted accelerator YAML's
    ``attention_efficiency`` block with the fit's; the rest of the file is left as it is."""
    blocks = re.split(r"^# (\S+)\n", yaml_blocks(fits), flags=re.M)[1:]
    for name, block in zip(blocks[::2], blocks[1::2], strict=True):
        path = ROOT / "hardware" / "accelerators" / f"{name}.yaml"
        lines = path.read_text(encoding="utf-8").split("\n")
        if "attention_efficiency:" in lines:
            i = lines.index("attention_efficiency:")
            j = next(n for n in range(i + 1, len(lines)) if lines[n] and not lines[n].startswith(" "))
            del lines[i:j]
        at = next(n for key in ("compute_units:", "collective_units:", "sources:")
                  for n, line in enumerate(lines) if line.startswith(key))
        lines[at:at] = block.rstrip("\n").split("\n")
        path.write_text("\n".join(lines), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


def check(fits: dict[tuple[str, str], dict[str, Any]]) -> int:
    bad = 0
    names = {name for name, _ in fits}
    for name in sorted(names):
        have = load_accelerator(name, overrides=[]).attention_efficiency or {}
        want = {k for n, k in fits if n == name}
        for kernel in sorted(set(have) ^ want):
            where = "in the catalog, not fitted" if kernel in have else "fitted, not in the catalog"
            print(f"check: {name} {kernel}: {where}")
            bad += 1
        for kernel in sorted(set(have) & want):
            bad += _curve_mismatches(f"{name} {kernel}", have[kernel], fits[(name, kernel)])
    print(f"check: {'all catalog attention curves match the fits' if not bad else f'{bad} mismatches'}")
    return 1 if bad else 0


def _held_resid(x: np.ndarray, group: list[dict[str, Any]], acc: Any, ratio: float, head_half: float,
                attn_max: float | None = None) -> np.ndarray:
    """ln(model / measured time) of ``group`` on the curve (x = attn_max, seq_half; or x = seq_half with ``attn_max``
    given), head_half held."""
    c = ({"attn_max": x[0], "seq_half": x[1], "head_half": head_half} if attn_max is None
         else {"attn_max": attn_max, "seq_half": x[0], "head_half": head_half})
    return np.log(np.array([direction_time(q, acc, c, ratio) for q in group]) / np.array([q["t_meas"] for q in group]))


def _fit_then_shift(ref: list[dict[str, Any]], other: list[dict[str, Any]], acc: Any, ratio: float,
                    held: float) -> tuple[float, float, float]:
    """attn_max and seq_half fitted to ``ref`` (head_half held), then the seq_half ``other`` needs with that attn_max
    held: (attn_max, seq_half, other's seq_half)."""
    from scipy.optimize import least_squares  # optional heavy dependency, only this script needs it

    am, k0 = least_squares(_held_resid, x0=[0.7, 500.0], bounds=([1e-3, 0.0], [1.0, 1e5]),
                           args=(ref, acc, ratio, held)).x
    k0x = float(least_squares(_held_resid, x0=[k0], bounds=([0.0], [1e5]), args=(other, acc, ratio, held, am)).x[0])
    return float(am), float(k0), k0x


def window_check(path: Path = ATTENTION) -> list[dict[str, Any]]:
    """The sliding-window evidence (docs/model.md#window-calls), report only: nothing here reaches the catalog.

    For every source with ``twins`` (its same-release calls without a window: the sources named, panels starting
    with ``twin_panels``) and every accelerator, kernel and direction it covers: the twins' own curve, attn_max and
    seq_half fitted to them (least squares on ln t, as :func:`fit`) with head_half held at the catalog curve's;
    the window points' errors on that curve (model time / measured - 1: negative where the window runs slower than
    the causal curve of its own release says); and the seq_half the window points alone would need on it (attn_max
    and head_half held). A seq_half below the twins' would mean a window row costs less fixed work than a causal
    one; above, more."""

    doc = _load(path)
    pts = load_points(path, recorded=True)
    out = []
    for name, src in doc["sources"].items():
        if not src.get("twins"):
            continue
        wins = [p for p in pts if p["src"] == name]
        for acc_name, kernel, direction in sorted({(p["acc"], p["kernel"], p["dir"]) for p in wins}):
            acc = load_accelerator(acc_name, overrides=[])
            held = getattr(acc.attention_efficiency[kernel], direction).head_half
            tw = [q for q in pts if q["src"] in src["twins"] and q["acc"] == acc_name and q["kernel"] == kernel
                  and q["dir"] == direction and not q.get("window")
                  and str(q.get("panel", "")).startswith(src.get("twin_panels", ""))]
            ws = [p for p in wins if p["acc"] == acc_name and p["kernel"] == kernel and p["dir"] == direction]
            if not tw:
                continue
            ratio = PER_DIR[direction]
            am, k0, k0w = _fit_then_shift(tw, ws, acc, ratio, held)
            err = np.exp(_held_resid(np.array([am, k0]), ws, acc, ratio, held)) - 1.0
            rt = _held_resid(np.array([am, k0]), tw, acc, ratio, held)
            out.append({"src": name, "acc": acc_name, "kernel": kernel, "dir": direction, "n_twins": len(tw),
                        "attn_max": float(am), "seq_half": float(k0), "head_half": float(held),
                        "rms_twins": float(np.sqrt(np.mean(rt**2))), "window_seq_half": k0w,
                        "windows": [(p["window"], p["s"], float(e)) for p, e in zip(ws, err, strict=True)]})
    return out


def window_report(rows: list[dict[str, Any]]) -> None:
    print("sliding-window calls against the causal / unmasked curve fitted to their same-release twins "
          "(head_half held at the catalog's; error = model time / measured - 1)")
    for r in rows:
        errs = " ".join(f"{100 * e:+.0f}" for _, _, e in r["windows"])
        print(f"  {r['src']:14s} {r['acc']:9s} {r['kernel']:6s} {r['dir']}: twins n {r['n_twins']} fit "
              f"{r['attn_max']:.3f}/{r['seq_half']:.0f}/{r['head_half']:.0f} rms {r['rms_twins']:.3f}; window "
              f"{r['windows'][0][0]} at s {r['windows'][0][1]}..{r['windows'][-1][1]}: {errs} %; seq_half the windows "
              f"alone need {r['window_seq_half']:.0f} ({r['window_seq_half'] / max(r['seq_half'], 1.0):.2f}x)")


def backward_points(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each backward-only call of ``pts``: its ``bwd`` points, and for a shape timed forward and forward + backward
    (not backward alone) a derived point, ``t_meas`` = t(fwd+bwd) - t(fwd) of the same source and shape (the
    difference the raw sweep's bwd_tflops also takes)."""
    fwd = {(p["src"], *_shape(p)[:1], *_shape(p)[2:]): p for p in pts if p["dir"] == "fwd"}
    out = [p for p in pts if p["dir"] == "bwd"]
    for p in pts:
        f = fwd.get((p["src"], *_shape(p)[:1], *_shape(p)[2:]))
        if p["dir"] == "fwd+bwd" and f is not None and p["t_meas"] > f["t_meas"]:
            out.append({**p, "dir": "bwd", "t_meas": p["t_meas"] - f["t_meas"]})
    return out


def causal_check(path: Path = ATTENTION, accelerators: tuple[str, ...] = ("h200-sxm",)) -> list[dict[str, Any]]:
    """The causal / unmasked backward relation (docs/model.md#causal-backward), report only: nothing here reaches
    the catalog. Per source, accelerator, kernel and head dim measured backward with both masks
    (:func:`backward_points`, windows left out): attn_max and seq_half fitted to the unmasked calls (head_half held
    at the catalog curve's: one head dim cannot fit it), then the seq_half the causal calls need with that attn_max
    held, each causal call at its (s + 1) / 2 keys. ``extra`` = causal seq_half - unmasked seq_half is the keys a
    causal call costs beyond its (s + 1) / 2 at the unmasked rate (eff = attn_max k / (k + k0): a call computing
    k + x keys' work at that rate takes as long as k keys at seq_half k0 + x); ``unmasked`` the causal calls' errors
    on the unmasked fit (model time / measured - 1: negative where causal runs slower than unmasked at the same
    keys), ``shifted`` on the shifted one."""

    pts = [p for p in backward_points(load_points(path, recorded=True))
           if p["acc"] in accelerators and not p.get("window")]
    ratio = FLASH_BACKWARD_FLOP_RATIO
    out = []
    for src, acc_name, kernel, d in sorted({(p["src"], p["acc"], p["kernel"], p["d"]) for p in pts}):
        grp = [p for p in pts if (p["src"], p["acc"], p["kernel"], p["d"]) == (src, acc_name, kernel, d)]
        full = sorted((p for p in grp if not p["causal"]), key=lambda p: p["s"])
        causal = sorted((p for p in grp if p["causal"]), key=lambda p: p["s"])
        if len(full) < 2 or not causal:
            continue
        acc = load_accelerator(acc_name, overrides=[])
        held = acc.attention_efficiency[kernel].bwd.head_half
        am, k0, k0c = _fit_then_shift(full, causal, acc, ratio, held)
        rel = np.exp(_held_resid(np.array([am, k0]), causal, acc, ratio, held)) - 1.0
        rel_c = np.exp(_held_resid(np.array([am, k0c]), causal, acc, ratio, held)) - 1.0
        rf = _held_resid(np.array([am, k0]), full, acc, ratio, held)
        out.append({"src": src, "acc": acc_name, "kernel": kernel, "d": d, "n_full": len(full),
                    "n_causal": len(causal), "attn_max": float(am), "seq_half": float(k0), "head_half": float(held),
                    "rms_full": float(np.sqrt(np.mean(rf**2))), "causal_seq_half": k0c, "extra": k0c - float(k0),
                    "calls": [(p["s"], float(e), float(c)) for p, e, c in zip(causal, rel, rel_c, strict=True)]})
    return out


def causal_report(rows: list[dict[str, Any]]) -> None:
    print("causal backward against the unmasked backward of the same sweep, head dim and kernel (causal calls at "
          "(s + 1) / 2 keys; error = model time / measured - 1)")
    for r in rows:
        errs = " ".join(f"{s}:{100 * e:+.1f}" for s, e, _ in r["calls"])
        shifted = max(abs(c) for _, _, c in r["calls"])
        print(f"  {r['src']:10s} {r['acc']:9s} {r['kernel']:6s} d {r['d']:3d}: unmasked n {r['n_full']} fit "
              f"{r['attn_max']:.3f}/{r['seq_half']:.0f}/{r['head_half']:.0f} rms {r['rms_full']:.3f}; causal n "
              f"{r['n_causal']} on it {errs} %; causal seq_half {r['causal_seq_half']:.0f} (extra "
              f"{r['extra']:+.0f} keys), worst {100 * shifted:.1f} % on it")


def main(argv: list[str]) -> int:
    recorded = load_points(recorded=True)
    fits = fit(load_points(), recorded)
    report(fits, "-v" in argv)
    rel = release_fits(recorded, fits[("b200", "cudnn")])
    release_report(rel, "-v" in argv)
    if "--windows" in argv:
        window_report(window_check())
    if "--causal" in argv:
        causal_report(causal_check())
    if "--yaml" in argv:
        print(yaml_blocks(fits))
        print("\n".join(f"# {n}\n{b}" for n, b in sorted(release_blocks(rel).items())))
    if "--write" in argv:
        write(fits)
        write_releases(rel)
    return max(check(fits), check_releases(rel)) if "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
