"""Hostile pins to ``plan`` (fuzzpin38): values pinned with ``=`` are plan candidates whatever they are (consist38), so
every door that pins one is fuzzed with values outside plan's own grid.

Run from the project root: ``python scripts/fuzzpin38.py [--only SECTION] [--verbose]``. Each case runs the CLI in
process through scripts/fuzz36.py's harness (``run_case``: 20 s CPU / 300 s wall alarm; exit 0, 1 or 2 only; no
traceback; on exit 2 one ``error:`` line and nothing on stdout; ``--json`` parsed with ``parse_constant`` raising).
Besides, a case over 20 s of wall clock or 1 GiB of new peak memory (ru_maxrss) is a finding.

Sections: mb (micro_batch through --set, --constraint and a --strategy file: 0, -1, 3, 7, 1e9, 2**40, 2**70, 1.5,
"x", nan), deg (tp, pp, cp, dp, ep and interleaved:v at 0, 1, primes, beyond the GPUs, not dividing heads / layers /
experts / GPUs), stages (stage_layers lists, first/last chunk layer counts with flat and interleaved schedules),
clash (--set against --constraint, a --strategy file against --set, pins with --allow all), gpus (pins on 1 GPU and
on 1e8 GPUs).

Round 38: 1,468 cases (after the fixes), 0 tracebacks, hangs, invalid JSON or memory blow-ups; the findings fixed are
listed in tests/test_fuzzpin38.py. Two cases stay "slow" (11-13 s of CPU): mixtral-8x7b on 64 GPUs with --allow all,
whose unpinned search takes longer still (18.5 s), so not a pin's doing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from fuzz36 import DENSE, MOE, TOP, Case, _write, drive, judge_wall_rss  # noqa: E402

ODD = ["0", "-1", "1", "2", "3", "7", "13", "1e9", str(2**40), str(2**63), str(2**70), "1.5", "x", "nan", ".nan",
       "inf", "-0", "true", "null", "[]", "''", "1_000"]
WALL_LIMIT_S = 20.0
RSS_LIMIT_KB = 1 << 20  # 1 GiB


def sec_mb(tmp: Path) -> Iterator[Case]:
    for v in ODD:
        for base in (DENSE, MOE):
            yield "mb.set", ["plan", *base, "--set", f"training.micro_batch={v}", *TOP], ()
            yield "mb.cons", ["plan", *base, "--constraint", f"micro_batch={v}", *TOP], ()
        f = _write(tmp, f"mb_{abs(hash(v))}.yaml", f"kind: strategy\ntp: 2\nmicro_batch: {v}\n")
        yield "mb.file", ["plan", *DENSE, "--strategy", str(f), *TOP], (f,)
        yield "mb.gb", ["plan", *DENSE, "--global-batch", "7", "--constraint", f"micro_batch={v}", *TOP], ()


def sec_deg(tmp: Path) -> Iterator[Case]:
    for key in ("tp", "pp", "cp", "dp", "ep"):
        for v in ["0", "1", "3", "5", "7", "17", "31", "64", "128", "1024", "1e9", str(2**40), str(2**70), "-2",
                  "1.5", "x", "nan"]:
            for base in (DENSE, MOE):
                yield f"deg.{key}.set", ["plan", *base, "--set", f"strategy.{key}={v}", *TOP], ()
                yield f"deg.{key}.cons", ["plan", *base, "--constraint", f"{key}={v}", *TOP], ()
            f = _write(tmp, f"deg_{key}_{abs(hash(v))}.yaml", f"kind: strategy\n{key}: {v}\n")
            yield f"deg.{key}.file", ["plan", *MOE, "--strategy", str(f), *TOP], (f,)
    for v in ["0", "1", "2", "3", "5", "7", "16", "31", "32", "33", "64", "1e9", str(2**40), str(2**70), "-1", "x"]:
        for pp in ("2", "4", "8", "3"):
            for base in (DENSE, MOE):
                yield "deg.v.set", ["plan", *base, "--set", f"strategy.pp={pp}",
                                    "--set", f"strategy.schedule=interleaved:{v}", *TOP], ()
                yield "deg.v.cons", ["plan", *base, "--constraint", f"pp={pp}",
                                     "--constraint", f"schedule=interleaved:{v}", *TOP], ()
        yield "deg.v.only", ["plan", *DENSE, "--constraint", f"schedule=interleaved:{v}", *TOP], ()
        yield "deg.v.vs", ["plan", *DENSE, "--constraint", f"virtual_stages={v}", *TOP], ()


def sec_stages(tmp: Path) -> Iterator[Case]:
    lists = ["[]", "[32]", "[16, 16]", "[8, 8, 8, 8]", "[8, 8, 8, 9]", "[0, 32]", "[-1, 33]", "[32, 0]",
             f"[{2**40}, 1]", f"[{2**70}]", "[1.5, 30.5]", "[x, y]", "[null]", "[.nan, 32]", "[1, 1, 1, 1, 1, 1, 1, 1]",
             "[" + ", ".join(["1"] * 32) + "]", "[" + ", ".join(["1"] * 4096) + "]", "16", "{a: 1}", "''"]
    for lst in lists:
        for extra in ([], ["--set", "strategy.pp=2"], ["--set", "strategy.pp=4"],
                      ["--set", "strategy.pp=4", "--set", "strategy.schedule=interleaved:2"],
                      ["--constraint", "pp=4"]):
            yield "stages.set", ["plan", *DENSE, "--set", f"strategy.stage_layers={lst}", *extra, *TOP], ()
        f = _write(tmp, f"st_{abs(hash(lst))}.yaml", f"kind: strategy\npp: 4\nstage_layers: {lst}\n")
        yield "stages.file", ["plan", *DENSE, "--strategy", str(f), *TOP], (f,)
    for field in ("first_stage_layers", "last_stage_layers"):
        for v in ["0", "1", "-1", "7", "31", "32", "33", "1e9", str(2**70), "1.5", "x", "null"]:
            for extra in ([], ["--set", "strategy.schedule=1f1b"], ["--set", "strategy.schedule=gpipe"],
                          ["--set", "strategy.pp=4"], ["--constraint", "schedule=1f1b"],
                          ["--set", "strategy.pp=4", "--set", "strategy.schedule=interleaved:2"],
                          ["--constraint", "pp=1"], ["--set", "strategy.pp=1"]):
                yield f"stages.{field}", ["plan", *DENSE, "--set", f"strategy.{field}={v}", *extra, *TOP], ()
    for field in ("first_chunk_layers", "last_chunk_layers"):
        for v in ["0", "1", "3", "31", "33", "1e9", "-1", "x"]:
            for extra in ([], ["--set", "strategy.schedule=1f1b"], ["--set", "strategy.schedule=zb"],
                          ["--set", "strategy.pp=4", "--set", "strategy.schedule=interleaved:2"],
                          ["--constraint", "schedule=gpipe"], ["--set", "strategy.pp=1"],
                          ["--set", "strategy.first_stage_layers=4"]):
                yield f"stages.{field}", ["plan", *DENSE, "--set", f"strategy.{field}={v}", *extra, *TOP], ()
    for lst in ("[8, 8, 8, 8]", "[10, 6, 8, 8]"):
        yield "stages.both", ["plan", *DENSE, "--set", f"strategy.stage_layers={lst}", "--set",
                              "strategy.first_stage_layers=4", *TOP], ()


def sec_clash(tmp: Path) -> Iterator[Case]:
    for key, a, b in (("tp", "2", "4"), ("pp", "2", "4"), ("micro_batch", "2", "3"), ("cp", "1", "2"),
                      ("ep", "2", "4"), ("dp", "4", "8"), ("zero", "1", "3"), ("schedule", "1f1b", "interleaved:2")):
        base = MOE if key == "ep" else DENSE
        yield "clash.setcons", ["plan", *base, "--set", f"strategy.{key}={a}", "--constraint", f"{key}={b}", *TOP], ()
        yield "clash.setset", ["plan", *base, "--set", f"strategy.{key}={a}", "--set", f"strategy.{key}={b}", *TOP], ()
        yield "clash.conscons", ["plan", *base, "--constraint", f"{key}={a}", "--constraint", f"{key}={b}", *TOP], ()
        yield "clash.ne", ["plan", *base, "--constraint", f"{key}={a}", "--constraint", f"{key}!={a}", *TOP], ()
        f = _write(tmp, f"cl_{key}.yaml", f"kind: strategy\n{key}: {a}\n")
        yield "clash.fileset", ["plan", *base, "--strategy", str(f), "--set", f"strategy.{key}={b}", *TOP], (f,)
        yield "clash.filecons", ["plan", *base, "--strategy", str(f), "--constraint", f"{key}={b}", *TOP], (f,)
        yield "clash.allow", ["plan", *base, "--set", f"strategy.{key}={a}", "--allow", "all", *TOP], ()
        yield "clash.allowodd", ["plan", *base, "--constraint", f"{key}={b}", "--allow", "all",
                                 "--sync-modes", "bsp,asp,local:4", *TOP], ()
    f = _write(tmp, "cl_all.yaml", "kind: strategy\ntp: 2\npp: 2\ndp: 4\nmicro_batch: 3\nschedule: interleaved:3\n")
    for extra in ([], ["--allow", "all"], ["--set", "strategy.micro_batch=5"], ["--constraint", "tp=4"],
                  ["--set", "strategy.stage_layers=[8, 8, 8, 8]"], ["-n", "1"], ["-n", "7"]):
        yield "clash.file", ["plan", *DENSE, "--strategy", str(f), *extra, *TOP], (f,)


def sec_gpus(tmp: Path) -> Iterator[Case]:
    for n in ("1", "2", "3", "7", "100000000", str(10**9), str(2**40)):
        for pin in (["--constraint", "micro_batch=3"], ["--set", "strategy.tp=3"], ["--set", "strategy.pp=7"],
                    ["--constraint", "ep=5"], ["--set", "strategy.micro_batch=1000000000"],
                    ["--constraint", "schedule=interleaved:5"], ["--set", "strategy.dp=3"],
                    ["--set", "strategy.stage_layers=[8, 8, 8, 8]"], ["--allow", "all"]):
            for m in ("llama3-8b", "mixtral-8x7b"):
                yield "gpus", ["plan", "-m", m, "-c", "dgx-h100", "-n", n, *pin, *TOP], ()


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "mb": sec_mb, "deg": sec_deg, "stages": sec_stages, "clash": sec_clash, "gpus": sec_gpus}


def main_() -> int:
    return drive("fuzzpin38", __doc__, SECTIONS, judges=(judge_wall_rss(WALL_LIMIT_S, RSS_LIMIT_KB),))


if __name__ == "__main__":
    raise SystemExit(main_())
