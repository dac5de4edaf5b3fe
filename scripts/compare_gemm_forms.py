#!/usr/bin/env python
"""Held-out comparison of GEMM-efficiency curve forms against the published GEMM sweeps (a study, not a fit the
catalog uses).

Question: does a functional form other than the engine's ``eff = gemm_max * prod d/(d + d0)`` (one d0 for all
three sides, no batch term; scalemodel.cost.compute.gemm_efficiency) describe hardware/measurements/gemm.yaml
clearly better on points it was not fitted to? Data and rules are those of scripts/fit_compute_curves.py: GEMMs of
at least MIN_GFLOP (10 GFLOP), ``fit: false`` records left out, gemm_max bounded by the group's MAMF fraction,
memory roofline with the same BabelStream ``memory`` fits, residual r = ln(t_model / t_measured), least squares.
Shape-only sources (AZ-GB200) and d0-borrowing groups are left out (no shape information of their own).

Forms (each keeps the memory roofline max(., bytes / bandwidth)); s = min(m, n, k), W = b m n, F = 2 b m n k:

  current   g * prod d/(d+d0)                                    2 parameters (the engine's form)
  minside   g * s/(s+ds) * prod_{other two} d/(d+do)             3: the smallest side (the skinny dimension, a
            TP shard or a head dim) gets its own half-point; CUTLASS/cuBLAS tile the output (m, n) in 64-256 blocks
            and loop over k in 32-128 steps, so the side that limits a tile set is not symmetric in size
  hill      g * prod d^p/(d^p + d0^p)                            3: a sharper (p > 1) or softer knee; with ceil()
            tiling efficiency d / (T ceil(d/T)) jumps to ~1 within a few tiles, faster than d/(d+d0)
  tau       t = t_current + tau                                  3: a fixed time per call (launch, prologue,
            epilogue, last-wave tail): the "fixed launch and tail costs" of docs/model.md#blackwell-gemm-table that
            the 10-GFLOP cut keeps out
  flops     g * prod d/(d+d0) * F/(F+F0)                         3: a term in total work (b included): small calls
            cannot fill the GPU for long enough to amortise ramp-up
  occupancy g * prod d/(d+d0) * W/(W+W0)                         3: a batch term through the output elements the
            grid spreads over SMs (b m n / tile area = the number of CTAs); not symmetric in (m, n, k)
  wave      g * prod d/(d+d0) * q^a, q = C / (S ceil(C/S)),      3: wave quantisation (NVIDIA, "Matrix
            C = b ceil(m/128) ceil(n/128), S = SM count            Multiplication Background User's Guide",
                                                                    DU-09799-001, section 3.2 "Wave Quantization"):
            the last wave of CTAs leaves SMs idle; 128 x 128 output tiles assumed, exponent a fitted (a = 1: the full
            penalty)
  harmonic  g * hm/(hm + h0), hm = 3/(1/m + 1/n + 1/k)           2: arithmetic intensity 2mnk/((mk+kn+mn) eb) =
            (2/(3 eb)) hm: a roofline-style term in bytes per FLOP instead of three separate sides

Held-out schemes, per accelerator and precision group:
  * kfold: 5-fold cross-validation, points shuffled (seeds 0..3), each point predicted by the fit on the other four
    folds; groups of fewer than 20 points use leave-one-out instead;
  * extrap: fit on the GEMMs below the group's 67th FLOP percentile, test on the largest third (the tables stop at
    4096 per side while a training layer's GEMMs are larger, so extrapolation in size is what the step model does);
  * batch (groups with b = 4 points, the OpenXLA tables): fit on b 1 and 2, test on b 4;
  * cross: fit the H100 BF16 group, test on the re-measured OpenXLA sm_90 table (XLA-SM90-2 bf16, recorded, never
    fitted).
Printed per form: held-out rms ln(t), and per FLOP band (10-50, 50-200, 200-1000, >= 1000 GFLOP) rms and worst.
``--cuts`` prints instead the all-point fits of current, tau and flops on the OpenXLA groups at the size cuts 10 / 50 /
100 GFLOP (how stable each form's parameters are as the smallest GEMMs leave the fit).

Decision rule (written before the results or any validation row were looked at): a form is adopted only if its
kfold held-out rms ln(t) is at least 20 % lower than ``current``'s on every group with a table of its own (H100 BF16
XLA-SM90, B200 BF16 and FP8 XLA-SM100, H200 BF16 and FP8 SM-H200, V100 DeepBench), no worse (within 5 %) on the
small groups (A100, H100 FP8, MI300X FP8, leave-one-out), and its extrap rms is no worse than ``current``'s on any
group. Better on B200 alone is not enough. The validation rows (validation/training_cases.yaml) play no part.

    python scripts/compare_gemm_forms.py [--forms=current,minside,...] [--cuts]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fit_compute_curves as fcc  # noqa: E402
from repo_yaml import read_yaml  # noqa: E402

from scalemodel.specs import load_accelerator  # noqa: E402

#: streaming multiprocessors (CUs on MI300X) per device, from the vendors' datasheets / whitepapers:
#: V100 80 (Volta whitepaper), A100 108 (Ampere whitepaper), H100 SXM5 / H200 132 (Hopper whitepaper),
#: B200 148 (NVIDIA Blackwell datasheet: 2 dies x 74), MI300X 304 CUs (AMD CDNA 3 whitepaper).
SMS = {"v100-sxm2-32g": 80, "a100-sxm-80g": 108, "h100-sxm": 132, "h200-sxm": 132, "b200": 148, "mi300x": 304}
TILE = 128.0
BANDS = ((10.0, 50.0), (50.0, 200.0), (200.0, 1000.0), (1000.0, np.inf))
BIG_GROUPS = (("h100-sxm", "16bit"), ("b200", "16bit"), ("b200", "fp8"), ("h200-sxm", "16bit"), ("h200-sxm", "fp8"),
              ("v100-sxm2-32g", "16bit"))
SMALL_GROUPS = (("a100-sxm-80g", "16bit"), ("h100-sxm", "fp8"), ("mi300x", "fp8"))


def _prod(m: np.ndarray, n: np.ndarray, k: np.ndarray, d0: float) -> np.ndarray:
    return (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0))


def _wave(m: np.ndarray, n: np.ndarray, b: np.ndarray, sms: int) -> np.ndarray:
    ctas = b * np.ceil(m / TILE) * np.ceil(n / TILE)
    return ctas / (sms * np.ceil(ctas / sms))


# form -> (extra-parameter names, x0, lower, upper, efficiency(x, m, n, k, b, sms), additive time(x))
Form = tuple[list[str], list[float], list[float], list[float],
             Callable[..., np.ndarray], Callable[[np.ndarray], float]]


def _no_tau(x: np.ndarray) -> float:
    return 0.0


def _min_side(x: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, b: np.ndarray, sms: int) -> np.ndarray:
    dims = np.sort(np.stack([m, n, k]), axis=0)
    return (x[0] * dims[0] / (dims[0] + x[1]) * dims[1] / (dims[1] + x[2]) * dims[2] / (dims[2] + x[2]))


def _hill(x: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, b: np.ndarray, sms: int) -> np.ndarray:
    p = x[2]
    return x[0] * np.prod([d**p / (d**p + x[1] ** p) for d in (m, n, k)], axis=0)


def _harmonic(x: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, b: np.ndarray, sms: int) -> np.ndarray:
    hm = 3.0 / (1.0 / m + 1.0 / n + 1.0 / k)
    return x[0] * hm / (hm + x[1])


FORMS: dict[str, Form] = {
    "current": (["d0"], [100.0], [1e-3], [1e4], lambda x, m, n, k, b, s: x[0] * _prod(m, n, k, x[1]), _no_tau),
    "minside": (["d_small", "d_other"], [100.0, 100.0], [1e-3, 1e-3], [1e4, 1e4], _min_side, _no_tau),
    "hill": (["d0", "p"], [200.0, 1.0], [1e-3, 0.2], [1e4, 5.0], _hill, _no_tau),
    "tau": (["d0", "tau_us"], [100.0, 1.0], [1e-3, 0.0], [1e4, 200.0],
            lambda x, m, n, k, b, s: x[0] * _prod(m, n, k, x[1]), lambda x: x[2] * 1e-6),
    "flops": (["d0", "F0_gflop"], [100.0, 1.0], [1e-3, 0.0], [1e4, 1e4],
              lambda x, m, n, k, b, s: x[0] * _prod(m, n, k, x[1]) * (2 * b * m * n * k / (2 * b * m * n * k
                                                                                              + x[2] * 1e9)),
              _no_tau),
    "occupancy": (["d0", "W0_M"], [100.0, 1.0], [1e-3, 0.0], [1e4, 1e3],
                  lambda x, m, n, k, b, s: x[0] * _prod(m, n, k, x[1]) * (b * m * n / (b * m * n + x[2] * 1e6)),
                  _no_tau),
    "wave": (["d0", "a"], [100.0, 0.5], [1e-3, 0.0], [1e4, 1.0],
             lambda x, m, n, k, b, s: x[0] * _prod(m, n, k, x[1]) * _wave(m, n, b, s) ** x[2], _no_tau),
    "harmonic": (["h0"], [300.0], [1e-3], [1e5], _harmonic, _no_tau),
}


class Group:
    """One accelerator and precision group: its points as arrays plus the constants of its roofline."""

    def __init__(self, key: tuple[str, str], pts: list[dict[str, Any]], cap_pts: list[dict[str, Any]], mem: float):
        self.key = key
        acc = load_accelerator(key[0], overrides=[])
        self.peak, self.bw, self.mem = fcc._peak(acc, key[1]), float(acc.memory_bandwidth), mem
        self.cap = min(1.0, fcc.mamf_fraction(cap_pts, acc, key[1]) or 1.0)
        self.m, self.n, self.k, self.b = (np.array([float(p[c]) for p in pts]) for c in ("m", "n", "k", "b"))
        self.flops = 2.0 * self.b * self.m * self.n * self.k
        self.t = self.flops / (np.array([float(p["tflops"]) for p in pts]) * 1e12)
        self.src = [p["src"] for p in pts]
        self.sms = SMS.get(key[0], 132)

    def __len__(self) -> int:
        return len(self.t)

    def model(self, form: str, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        _, _, _, _, eff_fn, tau_fn = FORMS[form]
        m, n, k, b = self.m[idx], self.n[idx], self.k[idx], self.b[idx]
        eff = eff_fn(x, m, n, k, b, self.sms)
        t_mem = (m * k + k * n + m * n) * 2.0 * b / (self.bw * self.mem)
        return np.maximum(self.flops[idx] / (self.peak * eff), t_mem) + tau_fn(x)

    def fit(self, form: str, idx: np.ndarray) -> np.ndarray:
        from scipy.optimize import least_squares  # optional heavy dependency, only this script needs it

        names, x0, lo, hi, _, _ = FORMS[form]
        start = min(0.8, 0.99 * self.cap)
        best = None
        # a few starting points: several forms have shallow directions (hill's p, tau near 0)
        for scale in (1.0, 0.1, 0.3, 3.0, 10.0):
            xs = [start] + [min(max(v * scale, lo_i + 1e-6), hi_i - 1e-6) for v, lo_i, hi_i in zip(x0, lo, hi,
                                                                                                     strict=True)]
            sol = least_squares(lambda x: np.log(self.model(form, x, idx) / self.t[idx]), x0=xs,
                                bounds=([1e-3] + lo, [self.cap] + hi))
            if best is None or sol.cost < best.cost:
                best = sol
        assert best is not None
        return np.asarray(best.x)


def load_groups() -> dict[tuple[str, str], Group]:
    doc = read_yaml(fcc.GEMM)
    shape_only = {name for name, src in doc["sources"].items() if src.get("level") == "shape-only"}
    memfit = fcc.fit_memory(read_yaml(fcc.MEMBW)["points"])
    pts: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    caps: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in doc["points"]:
        key = (p["acc"], fcc.GROUP[p["prec"]])
        if p["src"] == "MAMF":
            caps[key].append(p)
        if (p.get("fit", True) and p["src"] not in shape_only
                and 2.0 * p["b"] * p["m"] * p["n"] * p["k"] >= fcc.MIN_GFLOP * 1e9):
            pts[key].append(p)
    out = {}
    for key in BIG_GROUPS + SMALL_GROUPS:
        mem_src = key[0] if key[0] in memfit else fcc.MEMORY_DONORS.get(key[0], "a100-sxm-80g")
        out[key] = Group(key, pts[key], caps[key], memfit[mem_src]["memory"])
    return out


def heldout(g: Group, form: str, scheme: str) -> tuple[np.ndarray, np.ndarray]:
    """Held-out residuals r = ln(t_model / t) and the indices they belong to (a point may appear per seed)."""
    n = len(g)
    res, where = [], []
    if scheme in ("extrap", "batch"):
        if scheme == "extrap":
            cut = np.percentile(g.flops, 67)
            train, test = np.flatnonzero(g.flops < cut), np.flatnonzero(g.flops >= cut)
        else:
            train, test = np.flatnonzero(g.b < 4), np.flatnonzero(g.b >= 4)
        x = g.fit(form, train)
        return np.log(g.model(form, x, test) / g.t[test]), test
    if n < 20:
        folds_per_seed = [[np.array([i]) for i in range(n)]]
    else:
        folds_per_seed = []
        for seed in range(4):
            perm = np.random.default_rng(seed).permutation(n)
            folds_per_seed.append(np.array_split(perm, 5))
    for folds in folds_per_seed:
        for test in folds:
            train = np.setdiff1d(np.arange(n), test)
            x = g.fit(form, train)
            res.append(np.log(g.model(form, x, test) / g.t[test]))
            where.append(test)
    return np.concatenate(res), np.concatenate(where)


def band_summary(g: Group, r: np.ndarray, idx: np.ndarray) -> str:
    parts = []
    for lo, hi in BANDS:
        sel = (g.flops[idx] >= lo * 1e9) & (g.flops[idx] < hi * 1e9)
        if not sel.any():
            parts.append(f"{'-':>15s}")
            continue
        rel = np.exp(r[sel]) - 1.0
        parts.append(f"{np.sqrt(np.mean(r[sel] ** 2)):.3f}/{100 * rel[np.argmax(np.abs(rel))]:+5.0f}%")
    return " ".join(f"{p:>15s}" for p in parts)


def main(argv: list[str]) -> int:
    forms = list(FORMS)
    for a in argv[1:]:
        if a.startswith("--forms="):
            forms = a.split("=", 1)[1].split(",")
    groups = load_groups()
    if "--cuts" in argv:
        for key in (("h100-sxm", "16bit"), ("b200", "16bit"), ("b200", "fp8")):
            g = groups[key]
            for form in ("current", "tau", "flops"):
                cells = []
                for cut in (10.0, 50.0, 100.0):
                    x = g.fit(form, np.flatnonzero(g.flops >= cut * 1e9))
                    cells.append(f"{cut:g} GFLOP: " + " ".join(f"{nm} {v:.3g}" for nm, v in
                                                               zip(["g"] + FORMS[form][0], x, strict=True)))
                print(f"{key[0]} {key[1]} {form:8s} " + " | ".join(cells))
        return 0
    table: dict[tuple[str, str, str], float] = {}
    band_hdr = " ".join(f"{f'{lo:g}-{hi:g}' if np.isfinite(hi) else f'>={lo:g}':>15s}" for lo, hi in BANDS)
    for scheme in ("kfold", "extrap", "batch"):
        print(f"\n== {scheme}: held-out rms ln(t), then per FLOP band (GFLOP) rms / worst relative time error")
        for key, g in groups.items():
            if scheme == "batch" and not (g.b >= 4).any():
                continue
            print(f"-- {key[0]} {key[1]}  n {len(g)}  (MAMF cap {g.cap:.3f})     {band_hdr}")
            for form in forms:
                r, idx = heldout(g, form, scheme)
                rms = float(np.sqrt(np.mean(r**2)))
                table[(scheme, f"{key[0]} {key[1]}", form)] = rms
                x = g.fit(form, np.arange(len(g)))
                par = " ".join(f"{nm} {v:.3g}" for nm, v in zip(["g"] + FORMS[form][0], x, strict=True))
                print(f"   {form:9s} {rms:.4f}  {band_summary(g, r, idx)}   all-point fit: {par}")
    cross(groups[("h100-sxm", "16bit")], forms)
    print("\n== held-out rms ln(t) relative to current (kfold | extrap | batch)")
    for key in groups:
        name = f"{key[0]} {key[1]}"

        def rel(scheme: str, f: str, name: str = name) -> str:
            if (scheme, name, f) not in table:
                return "-"
            return f"{table[(scheme, name, f)] / table[(scheme, name, 'current')]:.2f}"

        cells = [f"{f}: {rel('kfold', f)}|{rel('extrap', f)}|{rel('batch', f)}" for f in forms if f != "current"]
        print(f"  {name:22s} " + "  ".join(cells))
    return 0


def cross(g: Group, forms: list[str]) -> None:
    """Fit on the H100 BF16 group (OpenXLA's older sm_90 table + MAMF), predict the re-measured sm_90 table
    (XLA-SM90-2, bf16, recorded ``fit: false``): another measurement of the same grid, never fitted."""
    doc = read_yaml(fcc.GEMM)
    pts = [p for p in doc["points"] if p["src"] == "XLA-SM90-2" and p["prec"] == "bf16"
           and 2.0 * p["b"] * p["m"] * p["n"] * p["k"] >= fcc.MIN_GFLOP * 1e9]
    other = Group(g.key, pts, [], g.mem)
    other.cap = g.cap
    print(f"\n== cross: fit on h100-sxm 16bit (XLA-SM90 + MAMF, n {len(g)}), test on XLA-SM90-2 bf16 (n {len(other)})")
    for form in forms:
        x = g.fit(form, np.arange(len(g)))
        idx = np.arange(len(other))
        r = np.log(other.model(form, x, idx) / other.t)
        print(f"   {form:9s} {float(np.sqrt(np.mean(r**2))):.4f}  {band_summary(other, r, idx)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
