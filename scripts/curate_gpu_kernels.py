#!/usr/bin/env python
"""Curated calibration points from two runs of scripts/measure_gpu_kernels.py (the raw JSON it writes).

Prints, for pasting under ``points:`` of hardware/measurements/{gemm,attention,memory_kernels,layer_timing}.yaml,
one YAML line per measured case. The rule, the same for every section: each run's value is that run's median time
(the script's CUDA-event median of several repeats); the curated time is the median of the two runs' medians (for
two values, their mean); throughput is recomputed from that time and the case's own FLOP or byte count, and each
run's own throughput is kept beside it (``runs``) so that the run-to-run spread stays visible. Rows where either run
recorded an error are left out. Nothing is fitted or smoothed here.

    python scripts/curate_gpu_kernels.py RUN1.json RUN2.json --acc h200-sxm --src SM-H200 [--section gemm|...]

Needs no torch: it reads JSON and prints text.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

SECTIONS = ("gemm", "attention", "memory_kernels", "layer")


def _mid(a: float, b: float) -> float:
    """Median of the two runs' medians."""
    return statistics.median([a, b])


def _pairs(r1: dict[str, Any], r2: dict[str, Any], section: str, key: tuple[str, ...]) -> list[tuple[dict, dict]]:
    """Rows of both runs matched on `key` (same order in both files is not assumed); error rows dropped."""
    second = {tuple(row.get(k) for k in key): row for row in r2.get(section, []) if "error" not in row}
    out = []
    for row in r1.get(section, []):
        other = second.get(tuple(row.get(k) for k in key))
        if "error" not in row and other is not None:
            out.append((row, other))
    return out


def gemm_lines(r1: dict[str, Any], r2: dict[str, Any], acc: str, src: str) -> list[str]:
    lines = []
    for a, b in _pairs(r1, r2, "gemm", ("prec", "m", "n", "k", "kind")):
        flops = 2.0 * a["m"] * a["n"] * a["k"]
        ms = _mid(a["ms"], b["ms"])
        tf = flops / (ms * 1e-3) / 1e12
        lines.append(f"  - {{acc: {acc}, prec: {a['prec']}, b: 1, m: {a['m']}, n: {a['n']}, k: {a['k']}, "
                     f"tflops: {tf:.1f}, src: {src}, kind: {a['kind']}, runs: [{a['tflops']:.1f}, {b['tflops']:.1f}]}}")
    return lines


def attention_lines(r1: dict[str, Any], r2: dict[str, Any], acc: str, src: str) -> list[str]:
    names = {"flash": "fa2", "cudnn": "cudnn"}
    lines = []
    for a, b in _pairs(r1, r2, "attention", ("kernel", "causal", "d", "s")):
        fwd = 4.0 * a["b"] * a["h"] * a["s"] ** 2 * a["d"] / (2.0 if a["causal"] else 1.0)
        for direction, field, mult in (("fwd", "fwd_ms", 1.0), ("fwd+bwd", "fwd_bwd_ms", 3.5)):
            ms = _mid(a[field], b[field])
            tf = mult * fwd / (ms * 1e-3) / 1e12
            runs = [mult * fwd / (x[field] * 1e-3) / 1e12 for x in (a, b)]
            lines.append(f"  - {{src: {src}, panel: 'sdpa {a['kernel']}', acc: {acc}, kernel: {names[a['kernel']]}, "
                         f"dir: {direction}, causal: {str(a['causal']).lower()}, dtype: bf16, b: {a['b']}, "
                         f"h: {a['h']}, d: {a['d']}, s: {a['s']}, tflops: {tf:.1f}, ms: {ms:.4f}, "
                         f"runs: [{runs[0]:.1f}, {runs[1]:.1f}]}}")
    return lines


#: kernel -> (elem_bytes, passes): bytes = rows x width x elem_bytes x passes, as measure_gpu_kernels.py counts them
MEMORY_PASSES = {"copy": (2, 2), "add": (2, 3), "gelu": (2, 2), "layer_norm": (2, 2), "rms_norm": (2, 2),
                 "softmax": (2, 2), "cast_fp8": (1, 3), "adamw_fused_fp32": (4, 7)}


def memory_lines(r1: dict[str, Any], r2: dict[str, Any], acc: str, src: str) -> list[str]:
    lines = []
    for a, b in _pairs(r1, r2, "memory_kernels", ("kernel", "mib", "params")):
        eb, passes = MEMORY_PASSES[a["kernel"]]
        rows, width = (a["rows"], a["width"]) if "rows" in a else (a["params"], 1)
        assert rows * width * eb * passes == a["bytes"], a  # the script's byte count, re-derived
        ms = _mid(a["ms"], b["ms"])
        lines.append(f"  - {{acc: {acc}, kernel: {a['kernel']}, rows: {rows}, width: {width}, elem_bytes: {eb}, "
                     f"passes: {passes}, ms: {ms:.6f}, src: {src}, runs_ms: [{a['ms']:.6f}, {b['ms']:.6f}]}}")
    return lines


def layer_lines(r1: dict[str, Any], r2: dict[str, Any], acc: str, src: str) -> list[str]:
    lines = []
    for a, b in _pairs(r1, r2, "layer", ("h", "heads", "s", "b", "attention")):
        kernel = f"{a['attention']} " if a.get("attention") else ""   # runs before the cuDNN variant name none
        for measured, field in (("fwd", "fwd_ms"), ("fwd+bwd", "fwd_bwd_ms")):
            ms = _mid(a[field], b[field])
            lines.append(f"  - {{src: {src}, row: 'eager {kernel}h{a['h']} {measured}', acc: {acc}, prec: bf16, "
                         f"hidden: {a['h']}, heads: {a['heads']}, ffn: {4 * a['h']}, seq: {a['s']}, "
                         f"micro_batch: {a['b']}, tp: 1, sp: false, flash: true, causal: true, recompute: none, "
                         f"measured: {measured}, ms: {ms:.3f}, ar: 0, runs_ms: [{a[field]:.3f}, {b[field]:.3f}]}}")
    return lines


WRITERS = {"gemm": gemm_lines, "attention": attention_lines, "memory_kernels": memory_lines, "layer": layer_lines}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs=2, type=Path)
    ap.add_argument("--acc", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--section", choices=SECTIONS, action="append")
    args = ap.parse_args(argv)
    r1, r2 = (json.loads(p.read_text(encoding="utf-8")) for p in args.runs)
    for section in args.section or SECTIONS:
        print(f"# ---- {section}")
        print("\n".join(WRITERS[section](r1, r2, args.acc, args.src)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
