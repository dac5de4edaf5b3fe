"""Hostile-input corpus of round 38 (fuzz38): what session 37 added and the input kinds earlier rounds fuzzed least.

Run from the project root: ``python scripts/fuzz38.py [--only SECTION] [--list] [--text]``. Each case runs the CLI
in-process through scripts/fuzz36.py's harness (``run_case``: 20 s CPU / 300 s wall alarm; exit 0, 1 or 2 only; no
traceback; on exit 2 one ``error:`` line and nothing on stdout; ``--json`` parsed by ``json.loads`` with
``parse_constant`` raising and no non-finite float; no ``nan`` / ``inf`` word in a table; no input file changed).
The ``proc`` section runs the CLI in a subprocess (environment variables, stdin, outputs that cannot be written).
Findings are printed one a line; the last line counts the cases and the findings.

Sections: s37 (strategy check_for_nan_in_grad beside megatron_ddp / zero / fp16, Megatron-LM's NaN-check,
DeepEP padding and dispatcher flags, plan's ZERO_SWITCHES pins with defer_embedding_wgrad), calib (nccl-tests logs
with hostile sizes, times, encodings; calibrate's written overlays edited field by field and read back as clusters),
runs (calibrate runs files: numeric edges, encodings, CSV quirks, training logs), sweep (huge axis products, nested
and duplicate axes, alias bombs), files (cluster / workload / scenario / sweep / accelerator files: billion laughs,
deep nesting, duplicate keys, non-UTF-8, BOM, CRLF, UTF-16, JSON / TOML text), numbers (1e308, -0.0, 1e-320, 2**70
and their neighbours in every numeric field kind of cluster, accelerator, model, training and strategy), proc
(COLUMNS / NO_COLOR / TERM, '-' for stdin, --out / --plot into /dev/full, a folder, a FIFO, a read-only folder).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from fuzz36 import DENSE, MOE, Case, _write, drive, judge_cut, run_case  # noqa: E402

BIG = ["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"]
BOOLS = ["true", "false", "yes", "no", "1", "0", "null", "[]", "{}", "'true'", "2", "on", "~", "1e308", ".nan"]
#: numbers at the edges of every numeric kind: huge, signed zero, subnormal, past int64, past float
EDGE = ["1e308", "-1e308", "-0.0", "0.0", "1e-320", "5e-324", str(2**70), str(-(2**70)), str(2**63), str(2**63 - 1),
        "1e309", "-1e-320", "0x7fffffffffffffff", "1e-308", "4.9e-324"]
LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "


# --- session 37's additions ---------------------------------------------------------------------------------------

def sec_s37(tmp: Path) -> Iterator[Case]:
    for v in BOOLS:
        for ddp in ("true", "false", "null"):
            for zero in ("0", "1", "3", "fsdp"):
                sets = ["--set", f"strategy.check_for_nan_in_grad={v}", "--set", f"strategy.megatron_ddp={ddp}",
                        "--set", f"strategy.zero={zero}"]
                yield "s37.nan", ["predict", *DENSE, *sets, "--json"], ()
            yield "s37.nan", ["memory", *DENSE, "--set", f"strategy.check_for_nan_in_grad={v}", "--json"], ()
            yield "s37.nan", ["predict", *DENSE, "--precision", "fp16", "--set", f"strategy.megatron_ddp={ddp}",
                              "--set", f"strategy.check_for_nan_in_grad={v}", "--json"], ()
        yield "s37.nan.plan", ["plan", *DENSE, "--top", "2", "--set", f"strategy.check_for_nan_in_grad={v}",
                               "--json"], ()
        yield "s37.nan.sens", ["sensitivity", *DENSE, "--set", f"strategy.check_for_nan_in_grad={v}", "--json"], ()
        yield "s37.nan.scale", ["scale", *DENSE[:4], "--gpus", "8,16", "--set", f"strategy.check_for_nan_in_grad={v}",
                                "--json"], ()
    for i, v in enumerate(BOOLS[::2]):
        sw = _write(tmp, f"nsw{i}.yaml", "kind: sweep\nname: s\nmodels: [llama3-8b]\nclusters: [dgx-h100]\n"
                    f"gpus: [8, 16]\nstrategies:\n  - best\n  - {{label: a, megatron_ddp: true, "
                    f"check_for_nan_in_grad: {v}}}\n")
        yield "s37.nan.sweep", ["sweep", str(sw), "--json"], (sw,)
        runs = _write(tmp, f"nruns{i}.yaml", "".join(
            f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, megatron_ddp: true, check_for_nan_in_grad: {v}, "
            f"step_time: {t}}}\n" for g, t in ((8, "2 s"), (16, "1.05 s"), (32, "0.56 s"))))
        yield "s37.nan.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)
        csvf = _write(tmp, f"nruns{i}.csv", "cluster,model,gpus,megatron_ddp,check_for_nan_in_grad,step_time\n"
                      + "".join(f"dgx-h100,llama3-8b,{g},true,{v},{t}\n" for g, t in ((8, 2), (16, 1.05), (32, .56))))
        yield "s37.nan.runs", ["calibrate", "runs", str(csvf), "--json"], (csvf,)
    # Megatron-LM's NaN-check switch and what turns it off (--fp16 without --loss-scale)
    nan_flags = ["--no-check-for-nan-in-loss-and-grad", "--no-check-for-nan-in-loss-and-grad=1",
                 "--no-check-for-nan-in-loss-and-grad false", "--no-check-for-nan-in-loss-and-grad "
                 "--no-check-for-nan-in-loss-and-grad", "--check-for-nan-in-loss-and-grad", "--fp16",
                 "--fp16 --loss-scale 1024", "--fp16 --loss-scale nan", "--fp16 --loss-scale -1",
                 "--fp16 --loss-scale 1e400", "--fp16 --loss-scale", "--fp16 --loss-scale=", "--bf16 --loss-scale 0",
                 "--fp16 --no-check-for-nan-in-loss-and-grad", "--bf16 --check-for-spiky-loss",
                 "--bf16 --use-torch-fsdp2 --no-check-for-nan-in-loss-and-grad", "--bf16 --use-megatron-fsdp",
                 "--bf16 --no-check-for-nan-in-loss-and-grad --use-distributed-optimizer --overlap-grad-reduce",
                 "--bf16 --check-for-large-grads", "--bf16 --no-check-for-nan-in-loss-and-grad\u200b",
                 "--bf16 --NO-CHECK-FOR-NAN-IN-LOSS-AND-GRAD", "--bf16 --no-check-for-nan-in-loss"]
    # DeepEP / padding flags (moefp837)
    moe = "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 --fp8-format hybrid --bf16 "
    pad_flags = [moe + f for f in (
        "--moe-grouped-gemm", "--moe-grouped-gemm --moe-router-padding-for-quantization",
        "--moe-grouped-gemm --moe-router-padding-for-fp8", "--moe-grouped-gemm --moe-router-padding-for-fp8=true",
        "--moe-grouped-gemm --moe-router-padding-for-quantization 1",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend nccl",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ''",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend DEEPEP",
        "--moe-grouped-gemm --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend x" + "y" * 5000,
        "--moe-grouped-gemm --moe-enable-deepep", "--moe-grouped-gemm --moe-enable-deepep=1",
        "--moe-grouped-gemm --moe-enable-deepep --moe-token-dispatcher-type alltoall",
        "--moe-grouped-gemm --moe-token-dispatcher-type", "--moe-grouped-gemm --moe-token-dispatcher-type FLEX",
        "--moe-grouped-gemm --moe-use-legacy-grouped-gemm", "--moe-use-legacy-grouped-gemm",
        "--moe-grouped-gemm --moe-token-dispatcher-type alltoall_seq", "--moe-router-padding-for-quantization")]
    for i, fl in enumerate(nan_flags + pad_flags):
        prec = "" if "--fp16" in fl or "--bf16" in fl else "--bf16 "
        f = _write(tmp, f"meg{i}.sh", LAUNCH + prec + fl + "\n")
        model = ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64"] if "--num-experts" in fl else \
            ["-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "64"]
        for cmd in ("predict", "memory"):
            yield "s37.meg", [cmd, *model, "--strategy", str(f), "--json"], (f,)
        yield "s37.meg.plan", ["plan", *model, "--top", "2", "--strategy", str(f), "--json"], (f,)
        yield "s37.meg.over", ["predict", *model, "--strategy", str(f), "--set", "strategy.check_for_nan_in_grad=true",
                               "--zero", "1", "--json"], (f,)
    # strategy.moe_fp8_padding and moe_flex_backend as fields
    for v in ("true", "false", "null", "2", "'x'"):
        for back in ("deepep", "hybridep", "nccl", "none", "DEEPEP", "null", "''"):
            yield "s37.pad", ["predict", *MOE, "--precision", "fp8", "--set", f"strategy.moe_fp8_padding={v}",
                              "--set", "strategy.moe_flex_dispatcher=true", "--set",
                              f"strategy.moe_flex_backend={back}", "--ep", "8", "--json"], ()
    # plan's ZERO_SWITCHES pins beside defer_embedding_wgrad and the nan check
    pins = ["fp8_param_gather=true", "fp4_param_gather=true", "bucket_fragments=true", "fsdp_fp8_all_gather=true",
            "fsdp_per_param=true", "fsdp_defer_grad_sync=true", "fsdp_flat_param=true", "megatron_ddp=true",
            "check_for_nan_in_grad=true", "defer_embedding_wgrad=true", "wgrad_deferral_limit=3",
            "offload_states=optimizer"]
    for i, a in enumerate(pins):
        for b in pins[i:]:
            for extra in ([], ["--pp", "2"], ["--constraint", "zero=1"], ["--constraint", "pp>=2"],
                          ["--allow", "offload"]):
                yield "s37.pins", ["plan", *DENSE[:4], "-n", "8", "--precision", "fp8", "--top", "2", "--set",
                                   f"strategy.{a}", "--set", f"strategy.{b}", *extra, "--json"], ()
    for lim in ("0", "1", "7", "-1", "1e308", str(2**70), "null", "1.5"):
        for pp in ("1", "2", "4"):
            yield "s37.defer", ["plan", *DENSE, "--top", "2", "--set", "strategy.defer_embedding_wgrad=true",
                                "--set", f"strategy.wgrad_deferral_limit={lim}", "--pp", pp, "--json"], ()


# --- calibrate: nccl-tests logs and the overlays calibrate writes -----------------------------------------------------

def _nccl_lines() -> tuple[list[str], list[str]]:
    log = (ROOT / "tests" / "data" / "nccl" / "synthetic_current.log").read_text().splitlines(keepends=True)
    head = [ln for ln in log if ln.startswith("#")]
    rows = [ln for ln in log if ln.strip() and not ln.startswith("#")]
    return head, rows


def sec_calib(tmp: Path) -> Iterator[Case]:
    head, rows = _nccl_lines()
    good = "".join(head + rows)
    bodies: dict[str, str | bytes] = {
        "crlf": good.replace("\n", "\r\n"), "bom": "\ufeff" + good, "cr": good.replace("\n", "\r"),
        "utf16": good.encode("utf-16"), "latin1": (good.replace("node01", "n\u00f6de01")).encode("latin-1"),
        "nonutf8": good.encode() + b"\xff\xfe garbage\n", "nul": good.replace("float", "fl\0oat", 1),
        "one_row": "".join(head + rows[:1]), "two_rows": "".join(head + rows[:2]), "no_rows": "".join(head),
        "dup_rows": "".join(head + rows + rows), "reversed": "".join(head + rows[::-1]),
        "header_only_hash": "#\n", "empty": "", "rows_no_head": "".join(rows),
        "tabs": "".join(head + [r.replace("     ", "\t") for r in rows]),
        "ansi": "".join(head + ["\x1b[32m" + r for r in rows]),
    }
    for name, val in (("zero_time", "0.00"), ("neg_time", "-5.0"), ("nan_time", "nan"), ("inf_time", "inf"),
                      ("huge_time", "1e308"), ("tiny_time", "1e-320"), ("negzero", "-0.0"), ("big_int", str(2**70))):
        bodies[name] = "".join(head + [rows[0].replace("51.45", val, 1)] + rows[1:])
    for name, val in (("size0", "0"), ("size_neg", "-1024"), ("size_huge", str(2**70)), ("size_float", "1e3"),
                      ("size_1e308", "1e308")):
        bodies[name] = "".join(head + [rows[0].replace("1024", val, 1)] + rows[1:])
    for name, val in (("busbw_nan", "nan"), ("busbw_neg", "-0.03"), ("busbw_huge", "1e308")):
        bodies[name] = "".join(head + [rows[0].replace("0.03", val, 1)] + rows[1:])
    bodies["ranks_huge"] = good.replace("nGpus 1", f"nGpus {2**70}")
    bodies["ranks0"] = "".join([ln for ln in head if "Rank" not in ln] + rows)
    bodies["long_line"] = "".join(head + rows) + "#" + "x" * 3_000_000 + "\n"
    bodies["many_rows"] = "".join(head) + "".join(
        f"{2**(10 + i % 40)} {2**(8 + i % 40)} float sum -1 {50 + i} 1 1 0 {50 + i} 1 1 0\n" for i in range(50_000))
    bodies["json_form"] = json.dumps({"op": "allreduce", "rows": [[1024, 50.0]]})
    bodies["yaml_bomb"] = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 9) + "]\n" for k in range(9))
    for name, body in bodies.items():
        p = _write(tmp, f"nc_{name}.log", body)
        yield "calib.log", ["calibrate", str(p), "-c", "dgx-a100", "--json"], (p,)
        out = tmp / f"nc_{name}.out.yaml"
        yield "calib.log", ["calibrate", str(p), "-c", "dgx-a100", "--out", str(out), "--force", "--json"], (p,)
    for ranks in ("0", "-8", "1", str(2**70), "1e3", "8.0"):
        p = _write(tmp, "nc_noranks.log", "".join([ln for ln in head if "Rank" not in ln] + rows))
        yield "calib.ranks", ["calibrate", str(p), "-c", "dgx-a100", "--ranks", ranks, "--json"], (p,)
    # the overlays calibrate writes, read back as clusters after an edit of one field
    yield from _overlay_edits(tmp)


def _calibration_overlay(tmp: Path) -> Path:
    runs = _write(tmp, "cal_runs.yaml", "".join(
        f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, step_time: {t}}}\n"
        for g, t in ((8, "2 s"), (16, "1.05 s"), (32, "0.56 s"))))
    out = tmp / "cal_base.yaml"
    if not out.exists():
        run_case(["calibrate", "runs", str(runs), "--out", str(out), "--json"])
    return out


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))
        yield (*path, "+")  # an element appended
    else:
        yield path


def _set_path(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if path[-1] == "+":
        obj.append(value)
    else:
        obj[path[-1]] = value


def _overlay_edits(tmp: Path) -> Iterator[Case]:
    import yaml  # the corpus only

    base = _calibration_overlay(tmp)
    if not base.exists():
        return
    doc = yaml.safe_load(base.read_text())
    values: list[Any] = [None, 0, -1, 1e308, -0.0, 1e-320, 2**70, float("nan"), float("inf"), "x", "", [], {},
                         True, "1e308", -1e308]
    i = 0
    for path in _leaves(doc["calibration"], ("calibration",)):
        for v in values:
            edited = json.loads(json.dumps(doc, allow_nan=True))
            try:
                _set_path(edited, path, v)
            except (KeyError, IndexError, TypeError):
                continue
            i += 1
            p = _write(tmp, f"ov{i}.yaml", yaml.safe_dump(edited, allow_unicode=True))
            cmd = ("predict", "memory", "scale", "check")[i % 4]
            if cmd == "scale":
                yield "calib.overlay", ["scale", "-m", "llama3-8b", "-c", str(p), "--gpus", "8,16", "--json"], (p,)
            elif cmd == "check":
                scen = _write(tmp, f"ovs{i}.yaml", f"kind: scenario\nname: s\nmodel: llama3-8b\ncluster: {p}\n"
                              "gpus: [8, 16]\nassertions: {min_scaling_efficiency: 0.1}\n")
                yield "calib.overlay", ["check", str(scen), "--json"], (p, scen)
            else:
                yield "calib.overlay", [cmd, "-m", "llama3-8b", "-c", str(p), "-n", "16", "--json"], (p,)
    # whole-block edits
    cal = doc["calibration"]
    for name, block in (("none", None), ("list", []), ("str", "x"), ("deep", {"calibration": cal}),
                        ("huge_residuals", {**cal, "residuals": cal["residuals"] * 5000})):
        edited = dict(doc, calibration=block)
        p = _write(tmp, f"ovb_{name}.yaml", yaml.safe_dump(edited))
        yield "calib.overlay", ["predict", "-m", "llama3-8b", "-c", str(p), "-n", "16", "--json"], (p,)
        yield "calib.overlay", ["hardware", "validate", str(p), "--json"], (p,)
    # an overlay that extends itself, a cycle of two, a chain of 200
    a = _write(tmp, "ova.yaml", "extends: ./ovb.yaml\nname: a\n")
    b = _write(tmp, "ovb.yaml", "extends: ./ova.yaml\nname: b\n")
    s = _write(tmp, "ovself.yaml", "extends: ./ovself.yaml\nname: s\n")
    for p in (a, b, s):
        yield "calib.extends", ["predict", "-m", "llama3-8b", "-c", str(p), "-n", "16", "--json"], (p,)
    prev = "dgx-h100"
    for k in range(200):
        prev = str(_write(tmp, f"chain{k}.yaml", f"extends: {prev}\nname: c{k}\n"))
    yield "calib.extends", ["predict", "-m", "llama3-8b", "-c", prev, "-n", "16", "--json"], ()


# --- calibrate runs files ---------------------------------------------------------------------------------------------

def sec_runs(tmp: Path) -> Iterator[Case]:
    good = [(8, "2 s"), (16, "1.05 s"), (32, "0.56 s")]
    fields = {"gpus": "8", "step_time": "2 s", "tokens_per_s": "1e5", "warmup_steps": "10", "tp": "1",
              "micro_batch": "1", "global_batch": "64", "seq_len": "4096", "pp": "1"}
    i = 0
    for field in fields:
        for v in EDGE:
            i += 1
            rows = []
            for g, t in good:
                row = {"cluster": "dgx-h100", "model": "llama3-8b", "gpus": str(g), "step_time": t}
                if field == "tokens_per_s":
                    row.pop("step_time")
                    row["tokens_per_s"] = "1e5"
                row[field] = v if g == 16 else row.get(field, fields[field])
                rows.append("- {" + ", ".join(f"{k}: {x}" for k, x in row.items()) + "}\n")
            p = _write(tmp, f"re{i}.yaml", "".join(rows))
            yield "runs.edge", ["calibrate", "runs", str(p), "--json"], (p,)
            yield "runs.edge", ["calibrate", "runs", str(p), "--predict-at", "64", "--json"], (p,)
    csv = "cluster,model,gpus,step_time\n" + "".join(f"dgx-h100,llama3-8b,{g},{t}\n" for g, t in good)
    csv_bodies: dict[str, str | bytes] = {
        "crlf": csv.replace("\n", "\r\n"), "bom": "\ufeff" + csv, "utf16": csv.encode("utf-16"),
        "nonutf8": csv.encode() + b"dgx-h100,llama3-8b,64,\xff\n", "dup_header": csv.replace("gpus,", "gpus,gpus,", 1),
        "semicolons": csv.replace(",", ";"), "quoted_nl": csv.replace("2 s", '"2\ns"', 1),
        "ragged": csv + "dgx-h100,llama3-8b\n", "extra_cells": csv + "dgx-h100,llama3-8b,64,0.3 s,x,y\n",
        "header_only": "cluster,model,gpus,step_time\n", "blank_header": ",,,\n" + csv.split("\n", 1)[1],
        "nul": csv.replace("llama3-8b", "llama3\x00-8b", 1), "huge_field": csv.replace("2 s", "2" * 200_000 + " s", 1),
        "cell_yaml": csv.replace("2 s", '"{a: [1, 2]}"', 1), "cell_anchor": csv.replace("2 s", '"&a 2 s"', 1),
        "cell_alias": csv.replace("2 s", '"*a"', 1), "cell_tag": csv.replace("2 s", '"!!python/none"', 1),
        "cell_list": csv.replace(",8,", ",[8],", 1), "cell_neg0": csv.replace(",8,", ",-0,", 1),
        "cell_big": csv.replace(",8,", f",{2**70},", 1), "cell_1e308": csv.replace("2 s", "1e308", 1),
        "cell_sub": csv.replace("2 s", "1e-320", 1), "cell_negzero_time": csv.replace("2 s", "-0.0 s", 1),
        "dup_rows": csv + csv.split("\n", 1)[1] * 400, "too_many": "cluster,model,gpus,step_time\n" +
        "dgx-h100,llama3-8b,8,2 s\n" * 1001, "cr_only": csv.replace("\n", "\r"),
        "tsv": csv.replace(",", "\t"),
    }
    for name, body in csv_bodies.items():
        p = _write(tmp, f"rc_{name}.csv", body)
        yield "runs.csv", ["calibrate", "runs", str(p), "--json"], (p,)
    yaml_good = "".join(f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, step_time: {t}}}\n" for g, t in good)
    yaml_bodies: dict[str, str | bytes] = {
        "bom": "\ufeff" + yaml_good, "crlf": yaml_good.replace("\n", "\r\n"), "utf16": yaml_good.encode("utf-16-le"),
        "nonutf8": yaml_good.encode() + b"# \xff\n", "dup_key": yaml_good.replace("gpus: 8,", "gpus: 8, gpus: 9,"),
        "laughs": "x: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
            f"x{k}: &{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k) if k else 'a'}"] * 10) + "]\n"
            for k in range(9)).replace("*a]", "*a]") + "runs:\n" + yaml_good.replace("- ", "  - "),
        "alias_runs": "r: &r {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 2 s}\nruns: [" +
        ", ".join(["*r"] * 1001) + "]\n",
        "merge": "b: &b {cluster: dgx-h100, model: llama3-8b}\nruns:\n" + "".join(
            f"  - {{<<: *b, gpus: {g}, step_time: {t}}}\n" for g, t in good),
        "deep": "runs: " + "[" * 5000 + "]" * 5000 + "\n", "runs_map": "runs: {a: 1}\n", "runs_null": "runs:\n",
        "two_docs": yaml_good + "---\n" + yaml_good,
        "json": json.dumps([{"cluster": "dgx-h100", "model": "llama3-8b", "gpus": g, "step_time": t} for g, t in good]),
        "json_nan": '[{"cluster": "dgx-h100", "model": "llama3-8b", "gpus": 8, "step_time": NaN}]',
        "toml": "[[runs]]\ncluster = 'dgx-h100'\nmodel = 'llama3-8b'\ngpus = 8\nstep_time = '2 s'\n",
        "both_measures": yaml_good.replace("step_time: 2 s", "step_time: 2 s, tokens_per_s: 1e5"),
        "log_self": yaml_good.replace("step_time: 2 s", "log: rl_log_self.yaml"),
        "log_dir": yaml_good.replace("step_time: 2 s", "log: ."),
        "log_missing": yaml_good.replace("step_time: 2 s", "log: nope.log"),
        "log_abs": yaml_good.replace("step_time: 2 s", "log: /dev/zero"),
        "log_null": yaml_good.replace("step_time: 2 s", "log: null"),
        "log_list": yaml_good.replace("step_time: 2 s", "log: [a.log]"),
    }
    for name, body in yaml_bodies.items():
        p = _write(tmp, f"rl_{name}.yaml", body)
        yield "runs.yaml", ["calibrate", "runs", str(p), "--json"], (p,)
    # training logs with hostile speeds
    megline = (" iteration {i}/ 100 | consumed samples: {s} | elapsed time per iteration (ms): {t} | "
               "learning rate: 1.0E-04 | global batch size: 64 | lm loss: 1.0E+01 |\n")
    for name, val in (("nan", "nan"), ("inf", "inf"), ("huge", "1e308"), ("sub", "1e-320"), ("neg0", "-0.0"),
                      ("big", str(2**70)), ("comma", "1,234.5"), ("badcomma", "1,2,3"), ("exp", "1.0E+03"),
                      ("neg", "-5"), ("zero", "0.0")):
        logs = {g: _write(tmp, f"tl_{name}_{g}.log", "".join(
            megline.format(i=i, s=64 * i, t=val if i == 15 and g == 16 else "2000.0") for i in range(1, 31)))
            for g in (8, 16, 32)}
        p = _write(tmp, f"rlog_{name}.yaml", "".join(
            f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, log: {log.name}}}\n" for g, log in logs.items()))
        yield "runs.log", ["calibrate", "runs", str(p), "--json"], (p, *logs.values())
    for ws in EDGE + ["null", "'10'", "[]"]:
        p = _write(tmp, "rlog_ws.yaml", "".join(
            f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, log: tl_exp_{g}.log, warmup_steps: {ws}}}\n"
            for g in (8, 16, 32)))
        yield "runs.warmup", ["calibrate", "runs", str(p), "--json"], (p,)


# --- sweep files ------------------------------------------------------------------------------------------------------

def sec_sweep(tmp: Path) -> Iterator[Case]:
    head = "kind: sweep\nname: s\n"
    g = list(range(8, 8 * 1001, 8))
    bodies = {
        "gpus_10k": head + f"models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: {list(range(1, 10_002))}\n"
                           "strategies: [best]\n",
        "product_1e12": head + f"models: [{', '.join(['llama3-8b'] * 1000)}]\nclusters: "
                               f"[{', '.join(['dgx-h100'] * 1000)}]\ngpus: {g}\nstrategies: [{{tp: 1}}]\n",
        "strategies_1e5": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies:\n" +
        "".join(f"  - {{label: s{i}, tp: 1}}\n" for i in range(100_001)),
        "best_fixed_mix": head + f"models: [llama3-8b, llama3-70b]\nclusters: [dgx-h100, dgx-a100]\ngpus: {g[:2000]}\n"
                                 "strategies: [best, best, best]\n",
        "alias_bomb": "a: &a [8, 16]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, "
                      "*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, "
                      "*d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, "
                      "*f, *f, *f, *f]\n" + head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: *g\n"
                      "strategies: [best]\n",
        "alias_strategies": "s: &s {tp: 1}\n" + head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                            "strategies: [" + ", ".join(["*s"] * 2000) + "]\n",
        "nested_gpus": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [[8, 16], [32]]\nstrategies: [best]\n",
        "nested_models": head + "models: [[llama3-8b]]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [best]\n",
        "dup_axis": head + "models: [llama3-8b]\nmodels: [llama3-70b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                           "strategies: [best]\n",
        "dup_values": head + "models: [llama3-8b, llama3-8b]\nclusters: [dgx-h100, dgx-h100]\ngpus: [8, 8, 8]\n"
                             "strategies: [best, best]\n",
        "dup_labels": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                             "strategies: [{label: a, tp: 1}, {label: a, tp: 2}]\n",
        "gpus_map": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: {a: 8}\nstrategies: [best]\n",
        "gpus_range_str": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: '8..1e9'\nstrategies: [best]\n",
        "gpus_edge": head + f"models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [{2**70}, 1e308, -0.0, 1e-320]\n"
                            "strategies: [best]\n",
        "empty_axes": head + "models: []\nclusters: []\ngpus: []\nstrategies: []\n",
        "strategy_nested": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                                  "strategies: [[best]]\n",
        "strategy_deep": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [" +
        "{a: " * 2000 + "1" + "}" * 2000 + "]\n",
        "training_list": head + "models: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [best]\n"
                                "training: [{global_batch: 64}, {global_batch: 128}]\n",
        "inline_models": head + "models: [{kind: transformer, name: m, layers: 2, hidden: 64, heads: 2, vocab: 100}]\n"
                                "clusters: [dgx-h100]\ngpus: [8]\nstrategies: [best]\n",
    }
    for name, body in bodies.items():
        p = _write(tmp, f"sw_{name}.yaml", body)
        yield "sweep.file", ["sweep", str(p), "--json"], (p,)
        yield "sweep.file", ["hardware", "validate", str(p), "--json"], (p,)


# --- spec files: structure and encoding over every kind ---------------------------------------------------------------

def _kinds() -> dict[str, str]:
    return {
        "cluster": "kind: cluster\nname: c\naccelerator: h100-sxm\ngpus_per_node: 8\ntiers:\n"
                   "  - {name: nv, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8}\n"
                   "  - {name: ib, span: 1024, bandwidth: 50 GB/s, latency: 4 us, efficiency: 0.9}\n",
        "workload": "kind: transformer\nname: w\nlayers: 4\nhidden: 1024\nheads: 8\nvocab: 32000\nseq_len: 2048\n",
        "scenario": "kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\ngpus: [8, 16]\n",
        "accelerator": (ROOT / "hardware" / "accelerators" / "h100-sxm.yaml").read_text()
        if (ROOT / "hardware" / "accelerators" / "h100-sxm.yaml").exists() else "kind: accelerator\nname: a\n",
    }


def _use(kind: str, p: Path, tmp: Path) -> list[list[str]]:
    if kind == "cluster":
        return [["predict", "-m", "llama3-8b", "-c", str(p), "-n", "16", "--json"]]
    if kind == "workload":
        return [["predict", "-m", str(p), "-c", "dgx-h100", "-n", "16", "--json"]]
    if kind == "scenario":
        return [["scale", "--scenario", str(p), "--json"]]
    if kind == "accelerator":
        c = _write(tmp, f"acc_{p.stem}_c.yaml", f"extends: dgx-h100\nname: c\naccelerator: {p}\n")
        return [["predict", "-m", "llama3-8b", "-c", str(c), "-n", "16", "--json"]]
    return []


def sec_files(tmp: Path) -> Iterator[Case]:
    for kind, good in _kinds().items():
        lines = good.splitlines(keepends=True)
        first_key = next(ln for ln in lines if ln.startswith("name:"))
        bodies: dict[str, str | bytes] = {
            "bom": "\ufeff" + good, "bom2": "\ufeff\ufeff" + good, "crlf": good.replace("\n", "\r\n"),
            "cr": good.replace("\n", "\r"), "utf16": good.encode("utf-16"), "utf32": good.encode("utf-32"),
            "latin1": good.replace("name: ", "name: \u00e9", 1).encode("latin-1"),
            "nonutf8_comment": good.encode() + b"# \xff\xfe\n",
            "nonutf8_value": good.encode().replace(b"name: ", b"name: \xc3\x28", 1),
            "surrogate": good.encode().replace(b"name: ", b"name: \xed\xa0\x80", 1),
            "dup_name": good + first_key.replace("name:", "name:", 1), "dup_kind": "kind: cluster\n" + good,
            "laughs": "x: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
                f"x{k}: &{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 10) + "]\n" for k in range(9)) + good,
            "laughs_str": "x: &a lol\n" + "".join(f"y{k}: &{chr(98 + k)} [" + ", ".join([f"*{chr(97 + k)}"] * 10)
                                                  + "]\n" for k in range(9)) + good.replace("name: ", "name: *j #", 1),
            "deep_list": good + "sources: " + "[" * 20000 + "]" * 20000 + "\n",
            "deep_map": good + "sources: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
            "deep_block": good + "sources:\n" + "".join(" " * i + f"k{i}:\n" for i in range(3000)),
            "json": json.dumps({k.split(":")[0]: None for k in []}) if False else _as_json(good),
            "toml": _as_toml(good), "null_doc": "~\n", "list_doc": "- " + good.replace("\n", "\n  "),
            "tab_indent": good.replace("  - ", "\t- "), "ctrl": good.replace("name: ", "name: a\x07b", 1),
            "bidi": good.replace("name: ", "name: \u202eab", 1), "nbsp_key": good.replace("name:", "name\u00a0:", 1),
            "zw_key": good.replace("name:", "na\u200bme:", 1), "fullwidth": good.replace("name:", "\uff4eame:", 1),
            "two_docs": good + "---\n" + good, "doc_end": good + "...\n" + "garbage: [\n",
            "directive": "%YAML 1.1\n---\n" + good, "directive_bad": "%YAML 9.9\n---\n" + good,
            "tag_local": good.replace("name: ", "name: !local ", 1), "tag_py": good.replace(
                "name: ", "name: !!python/object/apply:os.getcwd []  #", 1),
            "timestamp": good.replace("name: ", "name: 2001-12-14t21:59:43.10-05:00 #", 1),
        }
        for name, body in bodies.items():
            p = _write(tmp, f"{kind}_{name}.yaml", body)
            for argv in _use(kind, p, tmp):
                yield f"files.{kind}", argv, (p,)
            yield f"files.{kind}", ["hardware", "validate", str(p), "--json"], (p,)
        for suffix in (".json", ".toml", ".yml", ".YAML", "", ".txt"):
            body = _as_json(good) if suffix == ".json" else _as_toml(good) if suffix == ".toml" else good
            p = _write(tmp, f"{kind}_sfx{suffix.replace('.', '_')}{suffix}", body)
            for argv in _use(kind, p, tmp):
                yield f"files.{kind}.suffix", argv, (p,)


def _as_json(yaml_text: str) -> str:
    import yaml

    return json.dumps(yaml.safe_load(yaml_text))


def _as_toml(yaml_text: str) -> str:
    import yaml

    doc = yaml.safe_load(yaml_text)
    out = []
    for k, v in doc.items():
        if isinstance(v, (str, int, float)):
            out.append(f"{k} = {json.dumps(v)}")
    return "\n".join(out) + "\n"


# --- numbers at the edges in every numeric field ----------------------------------------------------------------------

def _numeric_fields(schema: str, defn: str) -> list[str]:
    s = json.loads((ROOT / "schemas" / f"{schema}.schema.json").read_text())["$defs"][defn]["properties"]
    out = []
    for name, prop in s.items():
        types = {prop.get("type")} | {a.get("type") for a in prop.get("anyOf", [])}
        if types & {"integer", "number"} or "quantity" in json.dumps(prop).lower():
            out.append(name)
    return out


def sec_numbers(tmp: Path) -> Iterator[Case]:
    roots = {"strategy": _numeric_fields("scenario", "StrategySpec"),
             "training": _numeric_fields("scenario", "TrainingSpec")}
    for root, names in roots.items():
        for name in names:
            for v in EDGE:
                yield f"numbers.{root}", ["predict", *DENSE, "--set", f"{root}.{name}={v}", "--json"], ()
    for name in ("layers", "hidden", "heads", "vocab", "seq_len", "ffn_hidden", "kv_heads"):
        for v in EDGE:
            yield "numbers.model", ["memory", *DENSE, "--set", f"model.{name}={v}", "--json"], ()
    for name in ("gpus_per_node", "max_gpus", "host_bandwidth", "host_memory", "node_power", "tiers.nvlink.bandwidth",
                 "tiers.nvlink.latency", "tiers.nvlink.efficiency", "tiers.nvlink.span", "tiers.ib-leaf.span",
                 "tiers.ib-leaf.oversubscription", "tiers.ib-leaf.nics_per_node", "tiers.ib-leaf.mtu",
                 "tiers.ib-leaf.net_overhead"):
        for v in EDGE + [f"{e} GB/s" for e in EDGE[:6]] + [f"{e} us" for e in EDGE[:6]]:
            yield "numbers.cluster", ["predict", *DENSE, "--set", f"cluster.{name}={v}", "--json"], ()
    for name in ("memory", "memory_bandwidth", "peak_flops.bf16", "peak_flops.fp8", "tdp", "efficiency.gemm_max",
                 "efficiency.memory", "efficiency.gemm_half_dim", "l2_cache", "sm_count"):
        for v in EDGE + [f"{e} TB/s" for e in EDGE[:4]] + [f"{e} TFLOPS" for e in EDGE[:4]]:
            yield "numbers.accelerator", ["predict", *DENSE, "--set", f"accelerator.{name}={v}", "--json"], ()
    for opt in ("-n", "--global-batch", "--tp", "--pp", "--ep", "--cp"):
        for v in EDGE:
            base = [a for a in DENSE]
            if opt == "-n":
                base[base.index("-n") + 1] = v
                yield "numbers.opt", ["predict", *base, "--json"], ()
            else:
                yield "numbers.opt", ["predict", *DENSE, opt, v, "--json"], ()
    for opt, cmd in (("--size", ["collective", "allreduce", "-c", "dgx-h100", "-n", "16"]),
                     ("--cv", ["stragglers", "-n", "64"]), ("--step-time", ["stragglers", "-n", "64"])):
        for v in EDGE + ["1e308B", "1e-320 MB"]:
            yield "numbers.opt", [*cmd, opt, v, "--json"], ()


# --- in a subprocess: environment, stdin, outputs ---------------------------------------------------------------------

def _sub(argv: list[str], cwd: Path, env: dict[str, str] | None = None, stdin: Any = subprocess.DEVNULL,
         stdout: Any = subprocess.PIPE, inp: bytes | None = None) -> tuple[int, str, str]:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    try:
        r = subprocess.run([sys.executable, "-m", "scalemodel", *argv], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                           stdin=stdin if inp is None else None, input=inp, timeout=120, env=e)
    except subprocess.TimeoutExpired:
        return 124, "", "hang"
    out = r.stdout.decode("utf-8", "replace") if isinstance(r.stdout, bytes) else ""
    return r.returncode, out, r.stderr.decode("utf-8", "replace")


def run_proc(tmp: Path) -> tuple[int, list[str]]:
    d = tmp / "proc"
    d.mkdir()
    findings: list[str] = []
    n = 0

    def judge(label: str, argv: list[str], code: int, out: str, err: str, want: tuple[int, ...] = (0, 1, 2)) -> None:
        nonlocal n
        n += 1
        lines = err.strip().splitlines()
        why = ""
        if code == 124:
            why = "hang"
        elif "Traceback" in err:
            why = "traceback"
        elif code not in want:
            why = f"exit {code}, wanted {want}"
        elif code == 2 and (not lines or not lines[-1].startswith("error: ")):
            why = "exit 2 without an error line"
        elif "--json" in argv and code in (0, 1) and out:
            try:
                json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError as exc:
                why = f"invalid JSON: {exc}"
        if why:
            findings.append(f"[{label}] {' '.join(argv)[:200]}: {why}: {err[-300:]!r}")

    for env in ({"COLUMNS": "0"}, {"COLUMNS": "-5"}, {"COLUMNS": "abc"}, {"COLUMNS": "1"}, {"COLUMNS": "19"},
                {"COLUMNS": "99999999999999999999"}, {"COLUMNS": "1e9"}, {"COLUMNS": " 80"},
                {"COLUMNS": "\u0668\u0660"},
                {"LINES": "0"}, {"LINES": "-1"}, {"NO_COLOR": "1"}, {"NO_COLOR": ""}, {"TERM": "dumb"}, {"TERM": ""},
                {"TERM": "xterm-256color", "FORCE_COLOR": "1"}, {"FORCE_COLOR": "0"}, {"TTY_COMPATIBLE": "1"},
                {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"},
                {"COLUMNS": "30", "PYTHONIOENCODING": "ascii:strict"}, {"HOME": "/nonexistent"},
                {"SHELL": "/bin/\xff"}, {"COLUMNS": "100000"}):
        for argv in (["predict", *DENSE], ["plan", *DENSE, "--top", "3"], ["hardware", "list"], ["predict", "--help"],
                     ["scale", *DENSE[:4], "--gpus", "8,16"], ["sweep", str(ROOT / "examples/sweeps/capacity.yaml"),
                                                                "--csv"],
                     ["memory", *DENSE], ["stragglers", "-n", "64"]):
            code, out, err = _sub(argv, d, env=env)
            judge(f"env {env}", argv, code, out, err)
            if code == 0 and not out.strip():
                findings.append(f"[env {env}] {' '.join(argv)}: exit 0 with nothing printed")
    # '-' as a file: stdin
    strat = b"strategy: {zero: 1}\n"
    for argv, inp in ((["predict", *DENSE, "--strategy", "-", "--json"], strat),
                      (["predict", *DENSE, "--strategy", "-", "--json"], b""),
                      (["predict", *DENSE, "--strategy", "-", "--json"], b"\xff\xfe\x00"),
                      (["predict", "-m", "-", "-c", "dgx-h100", "-n", "8", "--json"], b"kind: workload\n"),
                      (["predict", "-m", "llama3-8b", "-c", "-", "-n", "8", "--json"], b"extends: dgx-h100\n"),
                      (["sweep", "-", "--json"], (ROOT / "examples/sweeps/capacity.yaml").read_bytes()),
                      (["check", "-", "--json"], b"kind: scenario\n"),
                      (["calibrate", "-", "-c", "dgx-a100", "--json"],
                       (ROOT / "tests/data/nccl/synthetic_current.log").read_bytes()),
                      (["calibrate", "runs", "-", "--json"], b"- {cluster: dgx-h100}\n"),
                      (["hardware", "validate", "-", "--json"], b"kind: cluster\n"),
                      (["stragglers", "-n", "64", "--samples", "-", "--json"], b"1\n2\n3\n" * 10),
                      (["stragglers", "-n", "64", "--samples", "-", "--json"], b"nan\n1e308\n-0.0\n")):
        code, out, err = _sub(argv, d, inp=inp)
        judge("stdin", argv, code, out, err)
    # outputs that cannot be written
    (d / "ro").mkdir()
    os.chmod(d / "ro", stat.S_IRUSR | stat.S_IXUSR)
    os.mkfifo(d / "fifo.csv")
    os.mkfifo(d / "fifo.yaml")
    os.mkfifo(d / "fifo.png")
    (d / "dir.csv").mkdir()
    (d / "dir.yaml").mkdir()
    sweep = d / "s.yaml"
    sweep.write_text((ROOT / "examples" / "sweeps" / "capacity.yaml").read_text())
    log = d / "a.log"
    log.write_text((ROOT / "tests" / "data" / "nccl" / "synthetic_current.log").read_text())
    keep = {p: p.read_bytes() for p in (sweep, log)}
    outs = {"sweep": (["sweep", "s.yaml", "--out"], ".csv"), "calibrate": (["calibrate", "a.log", "-c", "dgx-a100",
                                                                            "--force", "--out"], ".yaml"),
            "scale": (["scale", *DENSE[:4], "--gpus", "8,16", "--plot"], ".png")}
    for name, (argv, sfx) in outs.items():
        for target in ("/dev/full", "/dev/null", f"dir{sfx}", f"fifo{sfx}", f"ro/x{sfx}", f"ro{sfx}",
                       f"nope/x{sfx}", f"x{sfx}/", "", f"{'x' * 300}{sfx}", f"a\nb{sfx}", f"-{sfx}", "/",
                       f"/proc/self/x{sfx}", f"./ro/../ro/x{sfx}"):
            code, out, err = _sub([*argv, target], d)
            judge(f"out {name}", [*argv, target], code, out, err)
            for p, b in keep.items():
                if p.read_bytes() != b:
                    findings.append(f"[out {name}] {target}: changed {p.name}")
                    p.write_bytes(b)
            leftovers = [q.name for q in d.iterdir() if q.name.endswith(".tmp")]
            if leftovers:
                findings.append(f"[out {name}] {target}: left {leftovers}")
    os.chmod(d / "ro", stat.S_IRWXU)
    return n, findings


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "s37": sec_s37, "calib": sec_calib, "runs": sec_runs, "sweep": sec_sweep, "files": sec_files,
    "numbers": sec_numbers}


def main_() -> int:
    return drive("fuzz38", __doc__, SECTIONS, runners={"proc": run_proc}, judges=(judge_cut,))


if __name__ == "__main__":
    raise SystemExit(main_())
