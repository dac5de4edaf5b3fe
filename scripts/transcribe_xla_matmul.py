#!/usr/bin/env python
"""Transcribe OpenXLA's default matmul performance table (one device key) into hardware/measurements/gemm.yaml points.

Input: either the header itself (``--header``: OpenXLA's xla/backends/gpu/cost_model/matmul_interpolator_data.h, the
``kDefaultMatmulPTable`` text proto, parsed for ``--key``), or the plain-text transcription of that key kept beside the
raw measurements (:data:`RAWS`: hardware/measurements/raw/xla_sm100_matmul_table.txt for ``sm_100``,
xla_sm90_matmul_table.txt for ``sm_90``; one line per entry, ``b m n k`` and the entry's five ``flops`` values in
DTYPES order). Source of both keys: tensorflow/tensorflow@a305421c45a1ea5117c170b8d8a00a51f9dcee8f,
third_party/xla/xla/backends/gpu/cost_model/matmul_interpolator_data.h (gemm.yaml sources XLA-SM100 and XLA-SM90-2).

What an entry means (XLA's own code at that commit): the table generator (xla/tools/matmul_perf_table_gen.cc) compiles
an HLO dot lhs [b, m, k] x rhs [b, k, n] with XLA's normal GEMM pipeline (its autotuner picks the kernel), runs it
once to warm up, traces 5 x 2 runs (two argument sets, small and large value range) and keeps the median kernel time
in whole nanoseconds t; the stored value is flops = 2 b m n k 1e9 / t. XLA turns an entry back into time as
2 b m n k / flops (matmul_interpolator.cc, PreciseFlopsRetrieval). So every value must equal 2 b m n k 1e9 / t for an
integer t to within the rounding of the division: :func:`integer_ns` checks it, which catches a miscopied digit in
any of the leading places (98 % of single-digit changes anywhere in the number).

Checks before printing: the (b, m, n, k) grid is complete (b in {1, 2, 4}, m, n, k in {256, ..., 4096}: 375
entries), every entry carries every dtype, every value passes :func:`integer_ns`. Then prints, for pasting under
``points:`` of gemm.yaml, one line per entry for bf16 (bf16 x bf16 -> bf16) and fp8 (f8e4m3fn x f8e4m3fn -> bf16, the
forward-pass FP8 GEMM), tflops rounded to 0.01, and a summary of the two hybrid FP8 keys (e4m3 x e5m2, e5m2 x e4m3:
Transformer Engine's HYBRID recipe's backward GEMMs) and f32 against them, which stay in the raw transcription only.

sm_90 (XLA-SM90-2) is printed with ``fit: false`` (:data:`KEYS`): its FP8 values are not FP8 GEMM kernel times
(29 of 375 e4m3 entries exceed H100's dense FP8 peak; gemm.yaml's XLA-SM90-2 source says why), and its BF16 entries
are a record beside the older sm_90 table (XLA-SM90) the H100 BF16 curve is fitted to.

    python scripts/transcribe_xla_matmul.py [--key sm_100|sm_90] [--header FILE] [--acc NAME] [--src NAME] [--summary]

Needs no torch: it reads text and prints text.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAW_DIR = ROOT / "hardware" / "measurements" / "raw"
#: device key -> its plain-text transcription
RAWS = {"sm_100": RAW_DIR / "xla_sm100_matmul_table.txt", "sm_90": RAW_DIR / "xla_sm90_matmul_table.txt"}
RAW = RAWS["sm_100"]
#: device key -> (accelerator, gemm.yaml source, fitted): the defaults printed for that key
KEYS = {"sm_100": ("b200", "XLA-SM100", True), "sm_90": ("h100-sxm", "XLA-SM90-2", False)}
DTYPES = ("bf16xbf16->bf16", "f32xf32->f32", "f8e4m3fnxf8e4m3fn->bf16", "f8e4m3fnxf8e5m2->bf16",
          "f8e5m2xf8e4m3fn->bf16")
#: gemm.yaml precision -> table dtype key
PRINTED = {"bf16": "bf16xbf16->bf16", "fp8": "f8e4m3fnxf8e4m3fn->bf16"}
GRID_B = (1, 2, 4)
GRID_D = (256, 512, 1024, 2048, 4096)

Entry = dict[str, int]  # b, m, n, k, and one FLOP/s value per dtype key


def integer_ns(b: int, m: int, n: int, k: int, flops: int) -> int | None:
    """The whole-nanosecond kernel time t with flops == 2 b m n k 1e9 / t (to within 2 FLOP/s, the rounding of
    XLA's division), or None when no integer t gives that value."""
    work = 2 * b * m * n * k * 10**9
    t = round(work / flops)
    return t if t > 0 and abs(work / t - flops) <= 2.0 else None


def read_raw(path: Path) -> list[Entry]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        v = [int(x) for x in line.split()]
        if len(v) != 4 + len(DTYPES):
            raise ValueError(f"{path}: line {line!r} has {len(v)} fields, expected {4 + len(DTYPES)}")
        out.append(dict(zip(("b", "m", "n", "k", *DTYPES), v, strict=True)))
    return out


def read_header(path: Path, key: str) -> list[Entry]:
    """Entries of one device key from the header's text proto (top-level ``entries { key: "..." value { ... } }``)."""
    text = path.read_text(encoding="utf-8")
    start = text.find(f'key: "{key}"')
    if start < 0:
        raise ValueError(f"{path}: no key {key!r}")
    nxt = re.compile(r'\n  entries \{\n    key: "').search(text, start)
    block = text[start: nxt.start() if nxt else len(text)]
    out = []
    for body in re.findall(r"entries \{\s*(b: \d+.*?)\n      \}", block, flags=re.S):
        e: Entry = {d: int(re.search(rf"\b{d}: (\d+)", body).group(1)) for d in ("b", "m", "n", "k")}  # type: ignore[union-attr]
        for dt, val in re.findall(r'flops \{ key: "([^"]+)" value: (\d+) \}', body):
            e[dt.lower()] = int(val)
        out.append(e)
    return out


def validate(entries: list[Entry]) -> list[str]:
    """Problems with a transcription: grid gaps or duplicates, missing dtypes, values with no integer-ns time."""
    errs = []
    shapes = [(e["b"], e["m"], e["n"], e["k"]) for e in entries]
    want = {(b, m, n, k) for b in GRID_B for m in GRID_D for n in GRID_D for k in GRID_D}
    if len(shapes) != len(set(shapes)):
        errs.append("duplicate (b, m, n, k) entries")
    if set(shapes) != want:
        errs.append(f"grid: {len(want - set(shapes))} shapes missing, {len(set(shapes) - want)} unexpected")
    for e in entries:
        for dt in DTYPES:
            if dt not in e:
                errs.append(f"{e['b']} {e['m']} {e['n']} {e['k']}: no {dt}")
            elif integer_ns(e["b"], e["m"], e["n"], e["k"], e[dt]) is None:
                errs.append(f"{e['b']} {e['m']} {e['n']} {e['k']} {dt} {e[dt]}: not 2bmnk*1e9/t for an integer t ns")
    return errs


def yaml_lines(entries: list[Entry], acc: str, src: str, fit: bool = True) -> list[str]:
    lines = []
    tail = "" if fit else ", fit: false"
    for prec, dt in PRINTED.items():
        for e in entries:
            lines.append(f"  - {{acc: {acc}, prec: {prec}, b: {e['b']}, m: {e['m']}, n: {e['n']}, k: {e['k']}, "
                         f"tflops: {e[dt] / 1e12:.2f}, src: {src}{tail}}}")
    return lines


def summary(entries: list[Entry]) -> list[str]:
    out = []
    for dt in DTYPES:
        tf = [e[dt] / 1e12 for e in entries]
        best = max(entries, key=lambda e: e[dt])
        out.append(f"# {dt:26s} max {max(tf):7.1f} TFLOP/s at b{best['b']} {best['m']}x{best['n']}x{best['k']}")
    for dt in DTYPES[3:] + DTYPES[1:2]:
        r = [e[dt] / e[PRINTED['fp8' if dt.startswith('f8') else 'bf16']] for e in entries]
        big = [x for x, e in zip(r, entries, strict=True) if 2 * e["b"] * e["m"] * e["n"] * e["k"] >= 10e9]
        out.append(f"# {dt} / {'fp8 e4m3 x e4m3' if dt.startswith('f8') else 'bf16'}: median {statistics.median(r):.3f}"
                   f" (GEMMs >= 10 GFLOP: {statistics.median(big):.3f}, n {len(big)})")
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", type=Path, help="matmul_interpolator_data.h to parse instead of the raw transcription")
    ap.add_argument("--key", default="sm_100", choices=sorted(KEYS))
    ap.add_argument("--acc", help="accelerator the points are mapped to (default: the key's, KEYS)")
    ap.add_argument("--src", help="gemm.yaml source name (default: the key's, KEYS)")
    ap.add_argument("--summary", action="store_true", help="print only the per-dtype summary")
    a = ap.parse_args(argv)
    acc, src, fitted = KEYS[a.key]
    try:
        entries = read_header(a.header, a.key) if a.header else read_raw(RAWS[a.key])
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    errs = validate(entries)
    if errs:
        print(f"error: {len(errs)} problems, first: {errs[0]}", file=sys.stderr)
        return 2
    print(f"# {len(entries)} entries, all {len(DTYPES)} dtypes, every value a whole-ns kernel time")
    print("\n".join(summary(entries)))
    if not a.summary:
        print("\n".join(yaml_lines(entries, a.acc or acc, a.src or src, fitted)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
