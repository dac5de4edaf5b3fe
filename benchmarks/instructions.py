"""CPU instructions of the what-if queries and of a plan, under callgrind, as a ratio to ``import numpy``.

    python benchmarks/instructions.py            # predict and collective, tables and --json
    python benchmarks/instructions.py --plan     # also plan (a) of bench.py, a 64-GPU plan and the TPU plan
    python benchmarks/instructions.py --evaluate # also the planner's evaluation, instructions per candidate
    python benchmarks/instructions.py --json

Wall time moves by +-0.2x between runs on a shared machine; the instructions a process executes do not (within ~1%:
``PYTHONHASHSEED=0``, the package's bytecode written first as in bench.py, so no run compiles sources). Each command
runs once as a fresh process under ``valgrind --tool=callgrind`` and the total it collected ("Collected : N") is
printed, beside its ratio to that of ``python -c "import numpy"`` in the same run (the floor issue 15's <= 2.5x target
is measured against). Needs valgrind on PATH; prints figures and asserts nothing.

``--evaluate`` counts the planner's evaluation as bench.py's figure 1 times it, machine-independently: one
``engine.step.evaluate`` call on bench.py's chunk (``evaluate_chunk``: ~400k candidates of GPT-3 175B on 4096
dgx-a100 GPUs) is the difference between a process that makes 3 calls and one that makes 1 (each after the same
set-up), halved, then divided by the chunk's candidates: instructions per candidate, the inverse of candidates/s at a
given instruction rate; and the same for a call on the chunk's first 16 configuration rows (576 candidates), the cost
of a call whatever its size (plan (a) makes four). ``--plan`` also divides plan (a)'s and the TPU multislice plan's
whole process by the candidates each evaluated (its JSON's ``search.evaluated``, read from one run outside callgrind).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any

from bench import COLLECTIVE_CMD, PLAN_CMD, PREDICT_CMD, TPU_PLAN_CMD, _compile_package, evaluate_chunk

#: (label, arguments after ``python``); the plans only with --plan.
QUERIES: list[tuple[str, list[str]]] = [
    ("python -c 'import numpy'", ["-c", "import numpy"]),
    ("predict --json", ["-m", "scalemodel", *PREDICT_CMD, "--json"]),
    ("predict (tables)", ["-m", "scalemodel", *PREDICT_CMD]),
    ("collective --json", ["-m", "scalemodel", *COLLECTIVE_CMD, "--json"]),
    ("collective (tables)", ["-m", "scalemodel", *COLLECTIVE_CMD]),
    ("python -c pass", ["-c", "pass"]),
]
PLANS: list[tuple[str, list[str]]] = [
    ("plan, 64 dgx-a100 GPUs --json", ["-m", "scalemodel", "plan", "-c", "dgx-a100", "-m", "gpt3-175b", "-n", "64",
                                       "--json"]),
    ("plan (a), 4096 GPUs --json", ["-m", "scalemodel", *PLAN_CMD]),
    ("plan, 4 x 256 tpu-v5p-multislice --json", ["-m", "scalemodel", *TPU_PLAN_CMD]),
]
#: A process that builds bench.py's chunk and evaluates it {calls} times (the first call also warms caches).
#: With {rows} set, the chunk's first {rows} configuration rows only (every field spanning axis 0 cut to them): the
#: cost an evaluate() call has whatever its size (its Python-level work: thousands of numpy calls on small arrays).
_EVALUATE = ("import sys\nsys.path.insert(0, {here!r})\nfrom bench import evaluate_chunk\nimport msgspec\n"
             "from scalemodel.engine.step import evaluate\njob, grid = evaluate_chunk()\nn = grid.shape[0]\n"
             "if {rows}:\n    grid = msgspec.structs.replace(grid, **{{f: getattr(grid, f)[:{rows}] for f in "
             "grid.__struct_fields__ if getattr(grid, f).ndim and getattr(grid, f).shape[0] == n}})\n"
             "for _ in range({calls}):\n    evaluate(job, grid)\n")
#: Configuration rows of the small call (each with every ZeRO stage, recompute and SP: 36 candidates a row).
SMALL_ROWS = 16


def instructions(args: list[str]) -> int:
    """Instructions one fresh ``python ARGS`` executes (callgrind's total), its output discarded."""
    env = dict(os.environ, PYTHONHASHSEED="0", COLUMNS="120")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *args],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    found = re.search(r"Collected : (\d+)", r.stderr)
    if found is None:
        raise SystemExit(f"callgrind gave no total for {' '.join(args)}:\n{r.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", action="store_true", help="also the plans (each a few minutes under callgrind)")
    ap.add_argument("--evaluate", action="store_true",
                    help="also instructions per candidate of one evaluate() call on bench.py's chunk (two runs)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH (apt-get install valgrind)")
    _compile_package()
    rows: list[dict[str, Any]] = []
    for label, cmd in QUERIES + (PLANS if args.plan else []):
        rows.append({"command": label, "instructions": instructions(cmd)})
    base = rows[0]["instructions"]
    for r in rows:
        r["ratio_to_import_numpy"] = round(r["instructions"] / base, 3)
    per_candidate: dict[str, Any] = {}
    if args.evaluate:
        here = os.path.dirname(os.path.abspath(__file__))
        one, three = (instructions(["-c", _EVALUATE.format(here=here, calls=n, rows=0)]) for n in (1, 3))
        s_one, s_three = (instructions(["-c", _EVALUATE.format(here=here, calls=n, rows=SMALL_ROWS)]) for n in (1, 3))
        size = evaluate_chunk()[1].size
        per_candidate["evaluate_small"] = {"rows": SMALL_ROWS, "instructions_per_call": (s_three - s_one) / 2}
        per_candidate["evaluate"] = {"candidates": size, "instructions_per_call": (three - one) / 2,
                                     "instructions_per_candidate": round((three - one) / 2 / size, 1)}
    if args.plan:
        for key, label, cmd in (("plan (a)", PLANS[1][0], PLAN_CMD), ("plan tpu", PLANS[2][0], TPU_PLAN_CMD)):
            doc = json.loads(subprocess.run([sys.executable, "-m", "scalemodel", *cmd], capture_output=True,
                                            text=True, check=True).stdout)
            total = next(r["instructions"] for r in rows if r["command"] == label)
            per_candidate[key] = {"evaluated": doc["search"]["evaluated"], "covered": doc["search"]["covered"],
                                  "instructions_per_evaluated": round(total / doc["search"]["evaluated"], 1)}
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "rows": rows, "per_candidate": per_candidate}, indent=2))
        return
    print(f"scalemodel instructions under callgrind (python {sys.version.split()[0]}; PYTHONHASHSEED=0, COLUMNS=120)")
    for r in rows:
        print(f"  {r['command']:<32} {r['instructions'] / 1e6:>10,.1f} M  {r['ratio_to_import_numpy']:>6.2f}x")
    if "evaluate" in per_candidate:
        e = per_candidate["evaluate"]
        print(f"  evaluate, one call on {e['candidates']:,} candidates: {e['instructions_per_call'] / 1e6:,.1f} M, "
              f"{e['instructions_per_candidate']:,.1f} instructions a candidate")
    if "evaluate_small" in per_candidate:
        e = per_candidate["evaluate_small"]
        print(f"  evaluate, one call on the chunk's first {e['rows']} configuration rows: "
              f"{e['instructions_per_call'] / 1e6:,.1f} M (the cost of a call whatever its size)")
    for key in ("plan (a)", "plan tpu"):
        if key in per_candidate:
            p = per_candidate[key]
            print(f"  {key}, whole process over its {p['evaluated']:,} evaluated candidates: "
                  f"{p['instructions_per_evaluated']:,.1f} instructions each")


if __name__ == "__main__":
    main()
