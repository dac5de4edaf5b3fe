"""Planner throughput and CLI latency of scalemodel, printed as figures (never asserted).

    python benchmarks/bench.py            # all figures, best of 3 (pinned to one core)
    python benchmarks/bench.py --repeat 5 --json
    python benchmarks/bench.py --latency  # only 6: query wall time over `import numpy`, median of 7

Figures and the targets of issue 7:

1. vectorised evaluation: candidates per second of ``engine.step.evaluate`` on the planner's grid
   for GPT-3 175B on 4096 GPUs of dgx-a100 (target >= 1,000,000 /s on one core);
2. ``planner.search`` for the same job, in process (the whole search: enumeration, evaluation,
   ranking, explanation);
(The CLI figures run ``python -m scalemodel``, i.e. the interpreter directly; the collective is also
timed through the ``scalemodel`` script found on PATH. A pyenv shim in front of it adds ~0.1 s.)

3. ``scalemodel plan --cluster dgx-a100 --model gpt3-175b --gpus 4096`` wall time as a fresh
   process (target < 2 s);
4. ``scalemodel collective --op allreduce --size 1GiB --gpus 2048 --cluster dgx-h100`` wall time
   (target < 0.5 s), and whether scipy.stats / matplotlib get imported on that path (they must not);
5. ``scalemodel plan`` at scale (issue 15), each as a fresh process: strategies covered, evaluated
   (full step-model evaluations; sync modes re-priced from one evaluation are counted apart), search
   seconds (the JSON's ``elapsed_s``), wall seconds and peak RSS of (a) GPT-3 175B on 4096 dgx-a100 GPUs,
   (b) the same on 16384 GPUs with six sync modes, (c) 1e5 and 1e6 GPUs, (d) a million layers
   (targets: (a) and (b) < 1 s wall, every case < 500 MB).
6. what-if query latency (issue 15): ``predict`` and ``collective``, each with tables and with --json, median
   wall time as a ratio to the median of ``python -c "import numpy"`` (target <= 2.5x), all commands timed
   round-robin in one run; next to each, its floor: a ``python -c`` importing every third-party module the
   query imports (found with -X importtime, so it follows the dependencies as they change); and, per query,
   the heaviest imports (median self time of 3 runs under -X importtime), per package and per module.
7. the planner's throughput (``--throughput`` alone): evaluated candidates per second of search (the JSON's
   ``elapsed_s``) and of wall time, for README's plan (a) and a TPU multislice plan (GPT-3 175B on four 256-chip
   tpu-v5p slices), each a fresh process, round-robin, the run with the least search time; beside them the
   process's CPU time (best and median), which a loaded machine moves less than the wall time.

The package's bytecode is compiled first (as ``pip install`` does): with PYTHONDONTWRITEBYTECODE set
and no ``__pycache__``, every run would compile scalemodel's sources again (about 0.1 s).

Every figure is pinned to one CPU core (``os.sched_setaffinity``) and single-threaded BLAS, so the
numbers do not depend on the machine's core count; wall times are the minimum over ``--repeat``
runs (the least disturbed by other load), except the query latencies (6), reported as medians (and best).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from msgspec.structs import replace

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

PLAN_CMD = ["plan", "--cluster", "dgx-a100", "--model", "gpt3-175b", "--gpus", "4096", "--json"]
COLLECTIVE_CMD = ["collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "2048", "--cluster", "dgx-h100"]
PREDICT_CMD = ["predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"]
_GPT3 = ["plan", "--cluster", "dgx-a100", "--model", "gpt3-175b", "--json"]
#: The TPU multislice plan of figure 7: GPT-3 175B on four v5p slices of 256 chips (1024 chips) joined over the DCN
#: (the cluster's ici span set to the slice, as its description says).
TPU_PLAN_CMD = ["plan", "--cluster", "tpu-v5p-multislice", "--model", "gpt3-175b", "--gpus", "1024",
                "--set", "cluster.tiers.ici.span=256", "--json"]
#: (label, arguments) of figure 7, the planner's throughput: README's plan (a) and the TPU multislice plan.
THROUGHPUT_PLANS: list[tuple[str, list[str]]] = [("(a) GPT-3 175B, 4096 dgx-a100", PLAN_CMD),
                                                 ("GPT-3 175B, 4 x 256 tpu-v5p-multislice", TPU_PLAN_CMD)]


def _beyond(span: int) -> list[str]:
    """dgx-a100's 3-tier fat tree reaches 16,000 GPUs (its ib-core span); a larger what-if needs that outer tier
    widened to a multiple of the 800-GPU spine (a cluster whose max_gpus exceeds its outermost tier is refused)."""
    return ["--set", f"cluster.max_gpus={span}", "--set", f"cluster.tiers.3.span={span}"]
#: (label, what, arguments, wall target in seconds or None) of the issue-15 scale figures.
SCALE_CASES: list[tuple[str, str, list[str], float | None]] = [
    ("a", "GPT-3 175B, 4096 dgx-a100", [*_GPT3, "--gpus", "4096"], 1.0),
    ("b", "16384 GPUs, 6 sync modes", [*_GPT3, "--gpus", "16384", *_beyond(16800),
                                      "--sync-modes", "bsp,asp,ssp:2,local:4,backup:2,hier:8"], 1.0),
    ("c", "100,000 GPUs", [*_GPT3, "--gpus", "100000", *_beyond(100000)], None),
    ("c", "1,000,000 GPUs", [*_GPT3, "--gpus", "1000000", *_beyond(1000000)], None),
    ("d", "4096 GPUs, 1,000,000 layers", [*_GPT3, "--gpus", "4096", "--set", "model.layers=1000000"], None),
]
RSS_TARGET_MB = 500.0
HEAVY = ("scipy", "scipy.stats", "scipy.special", "matplotlib", "pandas")


def _one_core() -> int | None:
    """Pin this process (and its children) to one core; return it (None where unsupported)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _scalemodel() -> list[str]:
    return [sys.executable, "-m", "scalemodel"]


def evaluate_chunk() -> tuple[Any, Any]:
    """(job, grid) of figure 1: one planner chunk (~400k candidates, every ZeRO stage) of GPT-3 175B on 4096 GPUs
    of dgx-a100, as ``engine.step.evaluate`` takes them (also what instructions.py --evaluate counts)."""
    from scalemodel.engine import planner
    from scalemodel.engine.job import build_job
    from scalemodel.specs import TrainingSpec, load_cluster, load_workload

    job = build_job(load_cluster("dgx-a100", []), load_workload("gpt3-175b", []), TrainingSpec(global_batch=4096))
    cfg = planner.configurations(job, 4096, 4096)
    axes = planner._axes(job, {})
    choices = planner.comm_choices(job, 4096, {})
    comm0 = {f: choices[f][0] for f in planner.COMM_FIELDS}
    inner = 1
    for a in axes.values():
        inner *= len(a)
    per_chunk = max(1, 400_000 // inner)  # ~400k candidates, as issue 7 measured (the planner's chunks are smaller)
    grid = planner._outer_grid(4096, 4096, cfg, 0, per_chunk, axes, comm0, {})
    return job, replace(grid, zero=axes["zero"].reshape(1, -1, 1, 1))  # every ZeRO stage


def bench_evaluate(repeat: int) -> dict[str, Any]:
    """Candidates/s of one evaluate() call over one planner chunk of the GPT-3 175B / 4096 GPU grid."""
    from scalemodel.engine.step import evaluate

    job, grid = evaluate_chunk()
    evaluate(job, grid)  # warm caches (order-statistic quadratures, imports)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        evaluate(job, grid)
        times.append(time.perf_counter() - t0)
    best = min(times)
    return {"grid_candidates": grid.size, "seconds": best, "candidates_per_s": grid.size / best,
            "target_per_s": 1_000_000, "met": grid.size / best >= 1_000_000}


def bench_search(repeat: int) -> dict[str, Any]:
    from scalemodel.engine import planner
    from scalemodel.engine.job import build_job
    from scalemodel.specs import TrainingSpec, load_cluster, load_workload

    job = build_job(load_cluster("dgx-a100", []), load_workload("gpt3-175b", []), TrainingSpec(global_batch=4096))
    planner.search(job, 4096, 4096, top=5)  # warm
    times, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = planner.search(job, 4096, 4096, top=5)
        times.append(time.perf_counter() - t0)
    assert res is not None
    best = min(times)
    return {"candidates": res.candidates_evaluated, "evaluated": res.search["evaluated"], "feasible": res.feasible,
            "seconds": best, "candidates_per_s": res.candidates_evaluated / best, "target_s": 1.0, "met": best < 1.0}


def _wall(args: list[str], repeat: int, launcher: list[str] | None = None) -> tuple[float, float, str]:
    times, out = [], ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run((launcher or _scalemodel()) + args, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"scalemodel {' '.join(args)} failed: {proc.stderr.strip()}")
        out = proc.stdout
    return min(times), statistics.median(times), out


def _wall_rss(args: list[str]) -> tuple[float, float | None, str]:
    """Wall seconds, peak resident memory (MB, from the child's own rusage; None where os.wait4 is missing)
    and stdout of one fresh ``python -m scalemodel`` process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(_scalemodel() + args, stdout=out, stderr=err)
        if hasattr(os, "wait4"):
            _pid, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            code = os.waitstatus_to_exitcode(status)
            rss: float | None = usage.ru_maxrss / 1024.0  # KiB on Linux
        else:  # pragma: no cover - not on the development machine
            code = proc.wait()
            wall, rss = time.perf_counter() - t0, None
        out.seek(0)
        err.seek(0)
        if code != 0:
            raise SystemExit(f"scalemodel {' '.join(args)} failed: {err.read().decode().strip()}")
        return wall, rss, out.read().decode()


def bench_scale(repeat: int) -> list[dict[str, Any]]:
    """Issue 15's figures: each case as a fresh process, the best wall of ``repeat`` runs, its peak RSS."""
    rows = []
    for label, what, args, target in SCALE_CASES:
        runs = [_wall_rss(args) for _ in range(repeat)]
        wall, rss, out = min(runs, key=lambda r: r[0])
        doc = json.loads(out)
        best = doc["ranked"][0]["strategy"] if doc["ranked"] else None
        rows.append({
            "case": label, "what": what, "command": "scalemodel " + " ".join(args),
            "covered": doc["search"]["covered"], "evaluated": doc["search"]["evaluated"],
            "sync_repriced": doc["search"].get("sync_repriced", 0), "search_s": doc["elapsed_s"], "wall_s": wall,
            "peak_rss_mb": rss, "best": best and {k: best.get(k) for k in ("dp", "tp", "pp", "cp", "sync")},
            "wall_target_s": target, "met": (target is None or wall < target) and (rss is None or rss < RSS_TARGET_MB)})
    return rows


def bench_throughput(repeat: int) -> list[dict[str, Any]]:
    """Figure 7: each plan of THROUGHPUT_PLANS as a fresh process, ``repeat`` runs round-robin; the run with the
    least search time (its JSON's ``elapsed_s``): evaluated candidates per second of search and of wall time."""
    runs: dict[str, list[tuple[float, float, float, dict[str, Any]]]] = {label: [] for label, _ in THROUGHPUT_PLANS}
    for _ in range(repeat):
        for label, args in THROUGHPUT_PLANS:
            wall, cpu, out = _wall_cpu(args)
            doc = json.loads(out)
            runs[label].append((doc["elapsed_s"], wall, cpu, doc["search"]))
    rows = []
    for label, args in THROUGHPUT_PLANS:
        search_s, wall, cpu, search = min(runs[label], key=lambda r: r[0])
        rows.append({"plan": label, "command": "scalemodel " + " ".join(args), "evaluated": search["evaluated"],
                     "sync_repriced": search.get("sync_repriced", 0), "covered": search["covered"],
                     "search_s": search_s, "wall_s": wall, "evaluated_per_search_s": search["evaluated"] / search_s,
                     "evaluated_per_wall_s": search["evaluated"] / wall,
                     "search_s_median": statistics.median(r[0] for r in runs[label]),
                     "cpu_s_best": min(r[2] for r in runs[label]),
                     "cpu_s_median": statistics.median(r[2] for r in runs[label])})
    return rows


def _wall_cpu(args: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, the child's own rusage) and stdout of one fresh process: the CPU
    time moves less than the wall time on a loaded machine (it leaves out the time spent waiting for a core)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(_scalemodel() + args, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"scalemodel {' '.join(args)} failed: {err.read().decode().strip()}")
        return wall, usage.ru_utime + usage.ru_stime, out.read().decode()


def _throughput_lines(rows: list[dict[str, Any]]) -> list[str]:
    out = ["  planner throughput (fresh process, run with the least search time; evaluated candidates per second):"]
    for r in rows:
        out.append(f"    {r['plan']:<40}: {r['evaluated']:>9,} evaluated of {r['covered']:>12,} covered, search "
                   f"{r['search_s']:.3f} s (median {r['search_s_median']:.3f} s), wall {r['wall_s']:.3f} s, CPU "
                   f"{r['cpu_s_best']:.3f} s (median {r['cpu_s_median']:.3f} s): {r['evaluated_per_search_s']:>9,.0f} "
                   f"/s of search, {r['evaluated_per_wall_s']:>9,.0f} /s of wall")
    return out


def bench_cli(repeat: int) -> dict[str, Any]:
    plan_best, plan_median, out = _wall(PLAN_CMD, repeat)
    doc = json.loads(out)
    coll_best, coll_median, _ = _wall(COLLECTIVE_CMD, max(repeat, 3))
    probe = "\n".join([
        "import json, sys", "from scalemodel.cli import main", "try:", f"    main({json.dumps(COLLECTIVE_CMD)})",
        "except SystemExit:", "    pass", f"print('MODULES', json.dumps([m for m in {json.dumps(HEAVY)} "
        "if m in sys.modules]))"])
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("MODULES")]
    heavy = json.loads(line[-1].split(" ", 1)[1]) if line else ["<probe failed>"]
    base_best, _, _ = _wall(["--help"], max(repeat, 3))
    script = shutil.which("scalemodel")
    path_best = _wall(COLLECTIVE_CMD, max(repeat, 3), [script])[0] if script else None
    return {
        "plan": {"command": "scalemodel " + " ".join(PLAN_CMD), "wall_s_best": plan_best, "wall_s_median": plan_median,
                 "search_elapsed_s": doc["elapsed_s"], "candidates": doc["candidates_evaluated"],
                 "target_s": 2.0, "met": plan_best < 2.0},
        "collective": {"command": "scalemodel " + " ".join(COLLECTIVE_CMD), "wall_s_best": coll_best,
                       "wall_s_median": coll_median, "heavy_modules_imported": heavy, "target_s": 0.5,
                       "met": coll_best < 0.5 and not heavy},
        "startup": {"command": "python -m scalemodel --help", "wall_s_best": base_best},
        "collective_via_path": {"launcher": script, "wall_s_best": path_best},
    }


#: The timed queries (issue 15): what-if answers a user waits for.
LATENCY_QUERIES = {
    "predict_json": [*PREDICT_CMD, "--json"],
    "predict": PREDICT_CMD,
    "collective": COLLECTIVE_CMD,
    "collective_json": [*COLLECTIVE_CMD, "--json"],
}
LATENCY_LABELS = {
    "numpy": "python -c 'import numpy'", "predict_json": "predict --json", "predict": "predict (tables)",
    "collective": "collective (tables, figure 4)", "collective_json": "collective --json", "python": "python -c pass",
}
LATENCY_TARGET = 2.5
#: Each query's floor: a ``python -c`` that imports every third-party module the query imports (found with
#: -X importtime, so it follows the dependencies as they change), i.e. what the query pays before any of
#: scalemodel's own code runs.
_FLOOR_CODE = ("import importlib\nfor _m in {mods!r}:\n    try:\n        importlib.import_module(_m)\n"
               "    except Exception:\n        pass\n")


def _compile_package() -> None:
    """Write scalemodel's bytecode, as pip install does, so no timed run compiles sources."""
    import compileall

    import scalemodel

    compileall.compile_dir(os.path.dirname(scalemodel.__file__), quiet=1)


def _importtime(cmd: list[str]) -> list[tuple[str, int, int]]:
    """(module, self us, cumulative us) of each import of one run of ``cmd`` under ``-X importtime``, in the
    order Python reports them (a module after the modules it imported)."""
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-2000:]}")
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        head, cum_us, name = line.split("|")  # "import time:   self | cumulative | name"
        rows.append((name.strip(), int(head.split(":")[1]), int(cum_us)))
    return rows


def _installed(top: str) -> bool:
    """Whether the top-level package ``top`` is an installed distribution (lives in site-packages)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    places = [spec.origin or "", *(spec.submodule_search_locations or [])] if spec else []
    return any("site-packages" in p or "dist-packages" in p for p in places)


def _third_party(rows: list[tuple[str, int, int]], startup: set[str]) -> list[str]:
    """The modules of ``rows`` from installed packages other than scalemodel, less what ``python -c pass``
    itself loads (``startup``: site hooks)."""
    tops = {m.split(".")[0] for m, _, _ in rows} - startup - {"scalemodel"}
    keep = {t for t in tops if _installed(t)}
    return [m for m, _, _ in rows if m.split(".")[0] in keep]


def import_profile(runs: int = 3) -> dict[str, Any]:
    """Per query: the median self import time of each module over ``runs`` runs (-X importtime), the
    heaviest modules, the same summed per top-level package, and the third-party modules it imports."""
    out: dict[str, Any] = {}
    startup = {m.split(".")[0] for m, _, _ in _importtime([sys.executable, "-c", "pass"])}
    for key, args in LATENCY_QUERIES.items():
        per_run = [_importtime(_scalemodel() + args) for _ in range(runs)]
        selfs: dict[str, list[int]] = {}
        for rows in per_run:
            for name, self_us, _ in rows:
                selfs.setdefault(name, []).append(self_us)
        med = {m: statistics.median(v + [0] * (runs - len(v))) / 1e3 for m, v in selfs.items()}
        packages: dict[str, float] = {}
        for m, ms in med.items():
            packages[m.split(".")[0]] = packages.get(m.split(".")[0], 0.0) + ms
        out[key] = {
            "modules_ms": dict(sorted(med.items(), key=lambda kv: -kv[1])[:12]),
            "own_modules_ms": dict(sorted(((m, ms) for m, ms in med.items() if m.startswith("scalemodel")),
                                          key=lambda kv: -kv[1])[:8]),
            "packages_ms": dict(sorted(packages.items(), key=lambda kv: -kv[1])[:10]),
            "total_ms": sum(med.values()), "modules": len(med),
            "third_party": _third_party(per_run[0], startup),
        }
    return out


def bench_latency(repeat: int) -> dict[str, Any]:
    """Median (and best) wall time of each query, of ``python -c "import numpy"`` and of each query's floor,
    all timed round-robin in one run (so load hits them alike), as ratios to ``import numpy``'s median;
    with the heaviest imports of each query."""
    _compile_package()
    profile = import_profile()
    launchers = {"python": [sys.executable, "-c", "pass"], "numpy": [sys.executable, "-c", "import numpy"]}
    launchers.update({k: _scalemodel() + args for k, args in LATENCY_QUERIES.items()})
    launchers.update({f"floor_{k}": [sys.executable, "-c", _FLOOR_CODE.format(mods=p["third_party"])]
                      for k, p in profile.items()})
    times: dict[str, list[float]] = {k: [] for k in launchers}
    for _ in range(repeat):
        for k, cmd in launchers.items():
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            times[k].append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    median = {k: statistics.median(v) for k, v in times.items()}
    ratio = {k: v / median["numpy"] for k, v in median.items()}
    return {"wall_s_median": median, "wall_s_best": {k: min(v) for k, v in times.items()},
            "ratio_to_numpy": ratio, "repeat": repeat, "target_ratio": LATENCY_TARGET,
            "commands": {k: "scalemodel " + " ".join(v) for k, v in LATENCY_QUERIES.items()},
            "imports": {k: {f: p[f] for f in ("modules_ms", "own_modules_ms", "packages_ms", "total_ms", "modules")}
                        for k, p in profile.items()},
            "floor_modules": {k: sorted({m.split(".")[0] for m in p["third_party"]}) for k, p in profile.items()},
            "met": all(ratio[k] <= LATENCY_TARGET for k in LATENCY_QUERIES)}


def _print_latency(lat: dict[str, Any]) -> None:
    med, best, r = lat["wall_s_median"], lat["wall_s_best"], lat["ratio_to_numpy"]
    print(f"  query / import numpy (median of {lat['repeat']}, round-robin; target <= {lat['target_ratio']}x: "
          f"{'met' if lat['met'] else 'NOT met'}); floor = the query's third-party imports alone:")
    print(f"    {'':32s} {'median':>9s} {'best':>9s} {'ratio':>6s}   {'floor':>9s} {'ratio':>6s}")
    for k in ("numpy", *LATENCY_QUERIES, "python"):
        floor = f"   {med['floor_' + k] * 1e3:6.1f} ms {r['floor_' + k]:5.2f}x" if "floor_" + k in med else ""
        print(f"    {LATENCY_LABELS[k]:32s} {med[k] * 1e3:6.1f} ms {best[k] * 1e3:6.1f} ms {r[k]:5.2f}x{floor}")
    for k in LATENCY_QUERIES:
        print(f"    floor of {LATENCY_LABELS[k]}: {', '.join(lat['floor_modules'][k])}")
    for k in ("predict_json", "predict", "collective"):
        imp = lat["imports"][k]
        mods = ", ".join(f"{m} {ms:.1f}" for m, ms in list(imp["modules_ms"].items())[:8])
        pkgs = ", ".join(f"{m} {ms:.1f}" for m, ms in list(imp["packages_ms"].items())[:8])
        print(f"    imports of {LATENCY_LABELS[k]} (-X importtime, self ms, median of 3): {imp['modules']} modules, "
              f"{imp['total_ms']:.0f} ms")
        print(f"      by package: {pkgs}")
        print(f"      heaviest: {mods}")
        own = ", ".join(f"{m} {ms:.1f}" for m, ms in imp["own_modules_ms"].items())
        print(f"      heaviest of scalemodel's: {own}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (the best is reported)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--scale-only", action="store_true", help="only the plan-at-scale figures (issue 15)")
    ap.add_argument("--latency", action="store_true", help="only the query-latency figures (median of max(repeat, 7))")
    ap.add_argument("--throughput", action="store_true", help="only the planner-throughput figures (7)")
    args = ap.parse_args()
    cpu = _one_core()
    if args.throughput:
        _compile_package()
        rows = bench_throughput(args.repeat)
        print(json.dumps({"python": sys.version.split()[0], "pinned_cpu": cpu, "throughput": rows}, indent=2)
              if args.json else "\n".join(_throughput_lines(rows)))
        return
    if args.scale_only:
        scale = bench_scale(args.repeat)
        print(json.dumps({"python": sys.version.split()[0], "pinned_cpu": cpu, "scale": scale}, indent=2)
              if args.json else "\n".join(_scale_lines(scale)))
        return
    if args.latency:
        lat = bench_latency(max(args.repeat, 7))
        if args.json:
            print(json.dumps({"python": sys.version.split()[0], "pinned_cpu": cpu, "latency": lat}, indent=2))
        else:
            print(f"scalemodel query latency (python {sys.version.split()[0]}, pinned to cpu {cpu})")
            _print_latency(lat)
        return
    # the scale figures first: a child forked from this process would inherit its peak RSS once the in-process
    # figures have grown it (Linux keeps ru_maxrss across fork and exec)
    scale = bench_scale(args.repeat)
    figures = {"python": sys.version.split()[0], "pinned_cpu": cpu,
               "evaluate": bench_evaluate(args.repeat), "search": bench_search(args.repeat),
               **bench_cli(args.repeat), "latency": bench_latency(max(args.repeat, 7)), "scale": scale,
               "throughput": bench_throughput(args.repeat)}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    ev, se, pl, co, st = (figures[k] for k in ("evaluate", "search", "plan", "collective", "startup"))

    def ok(flag: bool) -> str:
        return "meets target" if flag else "MISSES target"

    print(f"scalemodel benchmarks (python {figures['python']}, pinned to cpu {cpu})")
    print(f"  vectorised evaluate : {ev['candidates_per_s']:>12,.0f} candidates/s  ({ev['grid_candidates']:,} in "
          f"{ev['seconds'] * 1e3:.0f} ms; target >= 1,000,000/s: {ok(ev['met'])})")
    print(f"  planner.search      : {se['seconds']:>12.3f} s  ({se['candidates']:,} candidates covered, "
          f"{se['evaluated']:,} evaluated, {se['feasible']:,} feasible; target < 1 s: {ok(se['met'])})")
    print(f"  scalemodel plan     : {pl['wall_s_best']:>12.3f} s wall (median {pl['wall_s_median']:.3f} s; search "
          f"{pl['search_elapsed_s']:.3f} s; target < 2 s: {ok(pl['met'])})")
    print(f"  scalemodel collective: {co['wall_s_best']:>11.3f} s wall (median {co['wall_s_median']:.3f} s; heavy "
          f"modules imported: {co['heavy_modules_imported'] or 'none'}; target < 0.5 s: {ok(co['met'])})")
    vp = figures["collective_via_path"]
    if vp["wall_s_best"] is not None:
        print(f"  same, via PATH      : {vp['wall_s_best']:>12.3f} s wall ({vp['launcher']})")
    print(f"  scalemodel --help   : {st['wall_s_best']:>12.3f} s wall (interpreter + CLI start-up floor)")
    _print_latency(figures["latency"])
    print("\n".join(_scale_lines(figures["scale"])))
    print("\n".join(_throughput_lines(figures["throughput"])))


def _scale_lines(rows: list[dict[str, Any]]) -> list[str]:
    out = [f"  scalemodel plan at scale (fresh process, best of the runs; target: (a), (b) < 1 s wall, peak RSS "
           f"< {RSS_TARGET_MB:.0f} MB):"]
    for r in rows:
        rss = "n/a" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:.0f} MB"
        target = "" if r["wall_target_s"] is None else f"; target < {r['wall_target_s']:g} s"
        out.append(f"    ({r['case']}) {r['what']:<28}: {r['covered']:>13,} covered, {r['evaluated']:>9,} evaluated"
                   f" (+{r['sync_repriced']:,} re-priced), search {r['search_s']:.3f} s, wall {r['wall_s']:.3f} s, "
                   f"peak {rss}{target}: {'meets target' if r['met'] else 'MISSES target'}")
    return out


if __name__ == "__main__":
    main()
