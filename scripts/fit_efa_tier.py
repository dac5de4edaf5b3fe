#!/usr/bin/env python
"""Fit aws-p5's ``efa`` tier (per-hop latency, efficiency, per-step network overhead) to the published p5 all-gather
sweeps.

Data: the ``p5efa_allgather_*`` cases of hardware/measurements/nccl.yaml (nccl-tests all_gather_perf on
ml.p5.48xlarge, 2-32 nodes x 8 ranks, 32 MiB-2 GiB, aws-ofi-nccl tuner; crazyguitar/aws-gpu-communication-benchmark
@fd167f97 data/nccl_all_gather.csv). All-gather is used because its algorithm is known: with 8 GPUs a node NCCL runs
multi-node AllGather as Ring (PAT needs one GPU per node, NVLS gathers stay inside one NVLink domain; NVIDIA/nccl
v2.30.7 src/graph/tuning.cc), so the fit prices every point with the model's ``ring`` (docs/model.md#nccl: protocol
lines, base latency, channel ramp) and nothing depends on which algorithm the tuner chose. The all-reduce sweeps of
the same source are compared, not fitted (the tuner switches among Ring, Tree and NVLS-Tree by size there).

Method: the objective of ``scalemodel calibrate`` (engine/calibrate.py ``fit_tier``): least squares of
ln(model time / measured time), every point weighted equally, over x = (ln latency, ln efficiency, ln net_overhead),
efficiency bounded to (0.3, 1], on all 35 points at once (one tier for every node count), with the rest of aws-p5 as
specified. The measured time of a point is nccl-tests' ``bytes x (n-1)/n / busbw`` (doc/PERFORMANCE.md).
``net_overhead`` is NCCL's per-step network post overhead of a multi-node ring (tuning.cc "Inter-node rings still
have to launch nsteps * net overhead", NCCL_NET_OVERHEAD; x3 with Simple; docs/model.md#ring-net-overhead): every
step of the ring pays at least it, the node crossings pay the efa latency, so the fit is the every-step form of the
``--forms`` comparison inside the model's NCCL layer.

Usage: python scripts/fit_efa_tier.py [--json | --forms]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scalemodel.cost import collectives as C
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

ROOT = Path(__file__).resolve().parents[1]
NCCL = ROOT / "hardware" / "measurements" / "nccl.yaml"
PREFIX = "p5efa_allgather_"
CLUSTER, TIER = "aws-p5", 1


def points(path: Path = NCCL) -> list[tuple[int, float, float]]:
    """(ranks, bytes, measured seconds) of every published p5 all-gather point."""
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for c in cases:
        if not c["id"].startswith(PREFIX):
            continue
        p = int(c["ranks"])
        for s, bw in zip(c["measured"]["msg_bytes"], c["measured"]["busbw_GBps"], strict=True):
            out.append((p, float(s), float(s) * (p - 1) / p / (float(bw) * 1e9)))
    return out


def residuals(latency_s: float, efficiency: float, pts: list[tuple[int, float, float]],
              net_overhead_s: float | None = None) -> np.ndarray:
    """ln(model / measured) per point with the efa tier at ``latency_s``, ``efficiency`` and ``net_overhead_s``
    (None: as aws-p5 states it)."""
    sets = [f"tiers.{TIER}.latency={float(latency_s) * 1e6!r}us",
            f"tiers.{TIER}.efficiency={float(min(efficiency, 1.0))!r}"]
    if net_overhead_s is not None:
        sets.append(f"tiers.{TIER}.net_overhead={float(net_overhead_s) * 1e6!r}us")
    spec = load_cluster(CLUSTER, sets)
    net = build_network(spec)
    return np.array([np.log(float(C.algorithm_time("allgather", "ring", s, p, net)) / t) for p, s, t in pts])


def fit(path: Path = NCCL) -> dict[str, Any]:
    from scipy.optimize import least_squares  # optional heavy dependency: only the fit needs it

    pts = points(path)
    res = least_squares(lambda x: residuals(float(np.exp(x[0])), float(np.exp(x[1])), pts, float(np.exp(x[2]))),
                        np.log([20e-6, 0.9, 3e-6]), bounds=(np.log([1e-6, 0.3, 1e-7]), np.log([1e-3, 1.0, 1e-3])))
    lat, eff, ovh = (float(v) for v in np.exp(res.x))
    err = np.expm1(res.fun)
    return {"points": len(pts), "latency_s": lat, "efficiency": eff, "net_overhead_s": ovh,
            "median_abs_error": float(np.median(np.abs(err))), "worst_abs_error": float(np.max(np.abs(err)))}


def bare_forms(path: Path = NCCL) -> dict[str, dict[str, float]]:
    """The same points fitted by two bare alpha-beta forms of the ring all-gather (no protocol lines, no base
    latency; bytes at ``e`` x 8 NICs x 50 GB/s a node): the latency ``L`` on every one of the p - 1 ring steps,
    ``(p-1) L + (p-1)/p S / (e 400 GB/s)``, or on the node crossings only (the catalog's form before the per-step
    net overhead),
    ``(p/8 - 1) L + ...``. Same objective as :func:`fit`. docs/model.md#nanotron compares them (review 17c)."""
    from scipy.optimize import least_squares

    pts = points(path)
    p = np.array([x[0] for x in pts], dtype=float)
    s = np.array([x[1] for x in pts])
    t = np.array([x[2] for x in pts])
    out = {}
    for name, steps in (("every_step", p - 1.0), ("crossings", p / 8.0 - 1.0)):
        def res(x: np.ndarray, steps: np.ndarray = steps) -> np.ndarray:
            lat, eff = np.exp(x)
            return np.log((steps * lat + s * (p - 1) / p / (eff * 400e9)) / t)

        r = least_squares(res, np.log([10e-6, 0.8]), bounds=(np.log([1e-7, 0.3]), np.log([1e-3, 1.0])))
        err = np.abs(np.expm1(r.fun))
        out[name] = {"latency_s": float(np.exp(r.x[0])), "efficiency": float(np.exp(r.x[1])),
                     "median_abs_error": float(np.median(err)), "worst_abs_error": float(np.max(err))}
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--forms" in args:
        for name, f in bare_forms().items():
            print(f"bare ring, latency on {name.replace('_', ' ')}: {f['latency_s'] * 1e6:.1f} us, efficiency "
                  f"{f['efficiency']:.3f}; |error| median {f['median_abs_error']:.1%}, "
                  f"worst {f['worst_abs_error']:.1%}")
        return 0
    r = fit()
    if "--json" in args:
        print(json.dumps(r, indent=2))
    else:
        print(f"{CLUSTER} efa from {r['points']} p5 all-gather points: latency {r['latency_s'] * 1e6:.1f} us, "
              f"efficiency {r['efficiency']:.3f}, net overhead {r['net_overhead_s'] * 1e6:.2f} us a ring step; "
              f"|error| median {r['median_abs_error']:.1%}, "
              f"worst {r['worst_abs_error']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
