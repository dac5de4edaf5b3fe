"""Read validation/convergence.yaml and print what each convergence default rests on (issue 14).

- compression: the accuracy change of top-k with error feedback at each published point (DGC reference
  reproduction), its mean and standard error per model; the step model charges no extra steps where the
  mean change is not below zero by more than two standard errors.
- staleness: kappa per (optimizer, model family) by least squares of steps_ratio - 1 = kappa * mean_staleness
  over the transcribed points (scalemodel/cost/staleness.py), with 95 % intervals; for groups without a published
  point, the same fit over the points of our own simulation (staleness.measured: hardware/measurements/
  staleness.yaml, written by scripts/measure_staleness.py; measured_points says how runs become points and what
  censored runs leave out), its fit of a published group printed as a cross-check; the borrow table and the
  fallback (a fitted group to borrow from) for groups without points; the status of every source.
- critical batch: Kaplan's default B_crit(L(N)) for the given non-embedding parameter counts.

Run: PYTHONPATH=$PWD python scripts/fit_convergence.py [path/to/convergence.yaml] [--write [OUT.json]] [--check]
  --write  writes the staleness defaults the tool uses (default scalemodel/data/staleness_kappa.json)
  --check  exits 1 when the committed defaults differ from a fresh fit of the YAML
Nothing here reads or targets the source document's numbers.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from scalemodel.choices import Optimizer
from scalemodel.cost import efficiency, staleness
from scalemodel.errors import InputError
from scalemodel.report.output import check_output_path, write_file
from scalemodel.specs import files

ROOT = Path(__file__).resolve().parents[1]


def accuracy_deltas(point: dict[str, Any]) -> list[float]:
    """Top-1 change (points) of each run against the dense baseline."""
    return [float(t) - float(point["baseline_top1"]) for t in point["top1"]]


def mean_and_stderr(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def _fit_entry(pts: list[dict[str, Any]]) -> dict[str, Any]:
    """One group's least-squares kappa (scalemodel/cost/staleness.fit_kappa), rounded for the defaults file."""
    f = staleness.fit_kappa([float(p["mean_staleness"]) for p in pts], [float(p["steps_ratio"]) for p in pts])
    return {"kappa": round(f.kappa, 4), "low": None if f.low is None else round(f.low, 4),
            "high": None if f.high is None else round(f.high, 4), "n": f.n, "rms_residual": round(f.rms_residual, 4),
            "sources": sorted({f"{p['source']} {p['table']}" for p in pts})}


def measured_points(doc: dict[str, Any], source: str, table: str) -> tuple[dict[str, list[dict[str, Any]]],
                                                                           dict[str, str]]:
    """Points (mean_staleness, steps_ratio) per group from a staleness measurement file (scripts/measure_staleness.py).

    A run at staleness s > 0 and seed k has r_k = steps(s, k) / steps(0, k), infinite when it is censored (it did
    not reach the target within the cap: r_k is beyond cap / steps(0, k)). One point per staleness level: r = the
    median of r_k over the seeds, at the mean of their realised mean delays (mean_delay, optimizer steps). The
    median is a finite number while fewer than half of the seeds are censored; the first level whose median is
    censored, and every level above it, give no point (the penalty there exceeds the cap, and a fit past it would
    be one on lower bounds). A seed whose s = 0 run is censored gives no ratio. Returns the points and, per group
    with something left out, a line saying what."""
    runs: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    for r in doc.get("runs") or []:
        key = staleness.group_key(str(r["optimizer"]), str(r["family"]))
        runs.setdefault(key, {})[(int(r["staleness"]), int(r["seed"]))] = r
    points: dict[str, list[dict[str, Any]]] = {}
    left_out: dict[str, str] = {}
    for key, by in sorted(runs.items()):
        seeds = sorted({k for _, k in by})
        ref = {k: int(by[(0, k)]["steps"]) for k in seeds if (0, k) in by and by[(0, k)]["steps"] is not None}
        notes = [f"seed(s) {', '.join(str(k) for k in seeds if k not in ref)} censored at s = 0"] \
            if len(ref) < len(seeds) else []
        pts = []
        for s in sorted({s for s, _ in by if s > 0}):
            level = [by[(s, k)] for k in ref if (s, k) in by]
            ratios = [math.inf if r["steps"] is None else int(r["steps"]) / ref[int(r["seed"])] for r in level]
            med = statistics.median(ratios) if ratios else math.inf
            if not math.isfinite(med):
                notes.append(f"s >= {s} not fitted (median censored at s = {s}: "
                             f"{sum(1 for x in ratios if not math.isfinite(x))} of {len(ratios)} runs)")
                break
            pts.append({"source": source, "table": table, "staleness": s, "steps_ratio": med,
                        "mean_staleness": sum(float(r["mean_delay"]) for r in level) / len(level)})
        if pts:
            points[key] = pts
        if notes:
            left_out[key] = "; ".join(notes)
    return points, left_out


def read_measured(section: dict[str, Any]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The measured points of ``section['measured']`` (its file, relative to the repository, and its source key)."""
    m = section.get("measured")
    if not m:
        return {}, {}
    path = ROOT / str(m["file"])
    doc = yaml.safe_load(files.read_text(path, limit=files.MAX_SPEC_BYTES, what="staleness measurement file"))
    if str(m["source"]) not in (doc.get("sources") or {}):
        raise SystemExit(f"error: staleness.measured: {path} has no source {m['source']!r}")
    return measured_points(doc, str(m["source"]), f"({m['label']}, {m['file']})")


def staleness_defaults(section: dict[str, Any]) -> dict[str, Any]:
    """The defaults file: one fit per (optimizer, family) group of points, the borrow table, the fallback.

    A group with published points (``points``) is fitted to them alone; a group without takes its fit from the
    measured points (``measured``), if any. A measured fit of a group that has published points is written under
    ``crosscheck`` (printed, not used)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in section.get("points") or []:
        groups.setdefault(staleness.group_key(str(p["optimizer"]), str(p["family"])), []).append(p)
    fits: dict[str, Any] = {key: _fit_entry(pts) for key, pts in sorted(groups.items())}
    measured, left_out = read_measured(section)
    crosscheck: dict[str, Any] = {}
    for key, pts in measured.items():
        entry = _fit_entry(pts)
        if key in left_out:
            entry["left_out"] = left_out[key]
        (crosscheck if key in fits else fits)[key] = entry
    fits = dict(sorted(fits.items()))
    # measured groups left without a single point (the median censored at the lowest staleness): said, not fitted
    unfitted = {key: line for key, line in sorted(left_out.items()) if key not in measured}
    borrow = {staleness.group_key(*k.split("/")): staleness.group_key(*v.split("/"))
              for k, v in (section.get("borrow") or {}).items()}
    for k, v in borrow.items():
        if v not in fits:
            raise SystemExit(f"error: staleness.borrow: {k} borrows {v}, which has no fit; name a fitted group")
    return {"generated_by": "scripts/fit_convergence.py --write (from validation/convergence.yaml)",
            "model": "steps_ratio - 1 = kappa * mean_staleness (scalemodel/cost/staleness.py)",
            "fits": fits, "borrow": dict(sorted(borrow.items())), "fallback": fallback(section["fallback"], fits),
            **({"crosscheck": dict(sorted(crosscheck.items()))} if crosscheck else {}),
            **({"measured_unfitted": unfitted} if unfitted else {})}


def fallback(fb: dict[str, Any], fits: dict[str, Any]) -> dict[str, Any]:
    """The fallback entry: a fitted group to borrow from (its kappa copied, the direction line per optimizer), or
    a plain kappa with its status."""
    status = " ".join(str(fb["status"]).split())
    if "borrow" not in fb:
        return {"kappa": float(fb["kappa"]), "status": status}
    lender = staleness.group_key(*str(fb["borrow"]).split("/"))
    if lender not in fits:
        raise SystemExit(f"error: staleness.fallback: borrows {lender}, which has no fit; name a fitted group")
    direction = {Optimizer.normalize(k): " ".join(str(v).split()) for k, v in (fb.get("direction") or {}).items()}
    return {"borrow": lender, "kappa": fits[lender]["kappa"], "status": status,
            "direction": dict(sorted(direction.items()))}


def group_table(table: dict[str, Any]) -> list[tuple[str, str]]:
    """(group, 'kappa K, how') for every optimizer x model family: its own fit (n, 95 % interval), a borrow entry,
    or the fallback (the lender it names, or a plain number)."""
    rows = []
    fb = table["fallback"]
    for opt in Optimizer.labels():
        for fam in staleness.MODEL_FAMILIES:
            key = staleness.group_key(opt, fam)
            kappa = staleness.default_kappa(opt, fam, table).kappa
            if key in table["fits"]:
                f = table["fits"][key]
                ci = "" if f["low"] is None else f", 95 % [{f['low']:g}, {f['high']:g}]"
                how = f"fitted, n={f['n']}{ci}"
            elif key in table["borrow"]:
                how = f"borrowed from {table['borrow'][key]} (borrow entry)"
            elif "borrow" in fb:
                how = f"borrowed from {fb['borrow']} (fallback)"
            else:
                how = "fallback, fitted to nothing"
            rows.append((key, f"kappa {kappa:g}  {how}"))
    return rows


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    write = "--write" in argv
    out_path = Path(staleness.DEFAULTS_FILE)
    if write and argv.index("--write") + 1 < len(argv) and not argv[argv.index("--write") + 1].startswith("--"):
        out_path = Path(argv[argv.index("--write") + 1])
        args.remove(argv[argv.index("--write") + 1])
    path = Path(args[0]) if args else ROOT / "validation" / "convergence.yaml"
    try:  # bounded, regular files only, and remembered as an input, so that --write never replaces it
        data = yaml.safe_load(files.read_text(path, limit=files.MAX_SPEC_BYTES, what="convergence file"))
        if write:
            check_output_path(out_path, "--write")
    except InputError as exc:
        print(f"error: {exc.message()}", file=sys.stderr)
        return 2
    print("compression (top-1 change vs dense, points)")
    for p in data["compression"]["points"]:
        d = accuracy_deltas(p)
        mean, se = mean_and_stderr(d)
        lossless = mean > -2 * se
        print(f"  {p['model']:<10} {p['scheme']} density {p['density']:g} EF={p['error_feedback']}: "
              f"{', '.join(f'{x:+.1f}' for x in d)}  mean {mean:+.2f} +- {se:.2f} -> "
              f"{'no step-count cost' if lossless else 'accuracy loss'}")
    st = data["staleness"]
    table = staleness_defaults(st)
    print("staleness (steps_ratio - 1 = kappa * mean staleness, 95 % interval)")
    for key, f in table["fits"].items():
        ci = "no interval (one point)" if f["low"] is None else f"[{f['low']:.3g}, {f['high']:.3g}]"
        print(f"  {key:<20} kappa {f['kappa']:.3g} {ci}  n={f['n']} rms {f['rms_residual']:.3g}  "
              f"({'; '.join(f['sources'])})")
    for key, f in table.get("crosscheck", {}).items():
        print(f"  {key:<20} measured (not used: published points win) kappa {f['kappa']:.3g} "
              f"[{f['low']:.3g}, {f['high']:.3g}]  n={f['n']} rms {f['rms_residual']:.3g}")
    for key, f in {**table["fits"], **table.get("crosscheck", {})}.items():
        if "left_out" in f:
            print(f"  {key:<20} left out: {f['left_out']}")
    for key, line in table.get("measured_unfitted", {}).items():
        print(f"  {key:<20} measured, no point: {line}")
    for k, v in table["borrow"].items():
        print(f"  {k:<20} borrows {v}")
    for s in st["sources"]:
        print(f"  {s['id']:<9} {s['status']}")
    fb = table["fallback"]
    kind = (f"borrowed from {fb['borrow']}" if "borrow" in fb
            else "placeholder" if fb["status"].startswith("placeholder") else fb["status"])
    print(f"  default kappa {fb['kappa']:g} ({kind}) for every group without a fit or a borrow"
          f"{'' if table['fits'] else ': no group has a fit'}")
    print("  the default of every (optimizer, family) group:")
    for key, line in group_table(table):
        print(f"    {key:<20} {line}")
    text = json.dumps(table, indent=1) + "\n"
    if write:
        try:
            write_file(out_path, text, "--write")  # atomic: an interrupted run leaves the old file whole
        except InputError as exc:
            print(f"error: {exc.message()}", file=sys.stderr)
            return 2
        print(f"wrote {out_path}")
    if "--check" in argv:
        committed = Path(staleness.DEFAULTS_FILE).read_text() if os.path.exists(staleness.DEFAULTS_FILE) else ""
        if committed != text:
            print(f"error: {staleness.DEFAULTS_FILE} differs from the fit of {path}; run with --write",
                  file=sys.stderr)
            return 1
        print(f"{os.path.basename(staleness.DEFAULTS_FILE)} matches the fit")
    print("critical batch (Kaplan default, tokens and 2048-token sequences)")
    for n in (1.53e9, 3.87e10):
        b = float(efficiency.default_critical_batch_tokens(n))
        print(f"  N = {n:.3g} non-embedding: L = {float(efficiency.kaplan_loss(n)):.3f} nats, "
              f"B_crit = {b:.3g} tokens = {b / 2048:.0f} sequences")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
