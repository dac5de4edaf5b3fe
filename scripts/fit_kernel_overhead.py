"""Fixed time per memory-bound kernel, from published single-kernel timings at several sizes.

Input: hardware/measurements/memory_kernels.yaml (Liger-Kernel's published benchmark CSV: its Triton RMSNorm,
SwiGLU and LayerNorm forward kernels on H100 SXM and A100 SXM 80GB, 5-6 sizes each). For every
(accelerator, kernel) series, least squares of

    time = t0 + bytes / bw            (bytes = rows x width x elem_bytes x passes)

gives the intercept t0 (the time a kernel takes beyond moving its bytes: launch-to-start, the ramp and the
partial last wave, as the benchmark's CUDA events see them; an upper bound of the cost inside a stream the host
keeps full) and the slope's bandwidth bw. The accelerator's per-kernel overhead is the median t0 over its series.
The step model does not apply it: the YAML's ``evaluation`` records what it did to the training validation.
The slopes are printed against the bandwidth the model prices bytes at (peak x the catalog's ``memory`` fraction,
BabelStream's; the family default on A100): within 11 %, so the intercept is the new information, not the bandwidth.

Usage: python scripts/fit_kernel_overhead.py [--json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: repo_yaml beside this file

from repo_yaml import read_yaml  # noqa: E402

from scalemodel.cost.compute import default_efficiency  # noqa: E402
from scalemodel.specs import load_accelerator  # noqa: E402

DATA = ROOT / "hardware" / "measurements" / "memory_kernels.yaml"


def point_bytes(p: dict[str, Any]) -> float:
    """Bytes one call moves: rows x width elements, elem_bytes each, over ``passes`` tensors read or written."""
    return float(p["rows"]) * float(p["width"]) * float(p["elem_bytes"]) * float(p["passes"])


def fit_series(pts: list[dict[str, Any]]) -> tuple[float, float]:
    """(t0 seconds, bw bytes/s) of the least-squares line time = t0 + bytes / bw."""
    b = np.array([point_bytes(p) for p in pts])
    t = np.array([p["ms"] * 1e-3 for p in pts])
    (t0, slope), *_ = np.linalg.lstsq(np.vstack([np.ones_like(b), b]).T, t, rcond=None)
    return float(t0), float(1.0 / slope)


def run(doc: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per accelerator: each series' (t0, bw) and the median t0."""
    doc = doc or read_yaml(DATA)
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for p in doc["points"]:
        groups.setdefault(p["acc"], {}).setdefault(p["kernel"], []).append(p)
    out: dict[str, dict[str, Any]] = {}
    for acc, series in groups.items():
        fits = {k: fit_series(pts) for k, pts in series.items()}
        out[acc] = {"series": {k: {"t0_s": t0, "bw_Bps": bw, "n": len(series[k])} for k, (t0, bw) in fits.items()},
                    "t0_s": float(np.median([t0 for t0, _ in fits.values()]))}
    return out


def main(argv: list[str]) -> int:
    res = run()
    if "--json" in argv:
        print(json.dumps(res, indent=1, allow_nan=False))
        return 0
    for acc, r in res.items():
        a = load_accelerator(acc, overrides=[])
        ce = a.compute_efficiency
        babel = a.memory_bandwidth * (ce.memory if ce is not None else default_efficiency(a.family).memory)
        print(f"{acc}: median t0 {1e6 * r['t0_s']:.2f} us (model memory-bound bandwidth {babel / 1e12:.2f} TB/s)")
        for k, s in r["series"].items():
            print(f"    {k:20s} n {s['n']}  t0 {1e6 * s['t0_s']:6.2f} us  bw {s['bw_Bps'] / 1e12:.3f} TB/s "
                  f"({s['bw_Bps'] / babel:.3f} x the model's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
