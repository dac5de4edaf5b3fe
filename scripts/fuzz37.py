"""Hostile-input corpus of round 37 (fuzz37): what session 36 added and CLI combinations no earlier round fuzzed.

Run from the project root: ``python scripts/fuzz37.py [--only SECTION] [--list] [--text]``. Each case runs the CLI
in-process through scripts/fuzz36.py's harness (``run_case``: 20 s CPU / 300 s wall alarm; exit 0, 1 or 2 only; no
traceback; on exit 2 one ``error:`` line and nothing on stdout; ``--json`` parsed by ``json.loads`` with
``parse_constant`` raising and no non-finite float; no ``nan`` / ``inf`` word in a table; no input file changed).
The ``paths`` section runs the CLI in a subprocess (its stdout a file, /dev/full, a pipe closed early) and checks that
no input changed and that no output is left half-written. Findings are printed one a line; the last line counts the
cases and the findings.

Sections: s36 (strategy loss_dp_allreduce, defer_embedding_wgrad, wgrad_deferral_limit, training.jax_release,
cluster.host_memory over predict / memory / plan / scale / sensitivity / check / sweep / calibrate runs), hostoom
(offload_states against host_memory: host_out_of_memory in predict, memory, plan, plan --allow offload), deepspeed
(offload sections' keys: unknown, misspelt, "auto", nested), megatron (--use-torch-fsdp2 and its neighbours),
zero_hint (a file's zero-needing switch with the stage on the command line), bounds (plan / sweep / check /
sensitivity / calibrate options at their boundaries), combo (random valid combinations with a session-36 field),
paths (outputs equal to an input through symlinks, hard links, relative paths; /dev/full; a closed pipe).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from fuzz36 import DENSE, Case, _field_values, _write, drive, judge_cut  # noqa: E402

BIG = ["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"]
TPU = ["-m", "llama3-8b", "-c", "tpu-v5p-pod", "-n", "64"]
GB = ["-m", "deepseek-v3", "-c", "gb200-nvl72", "-n", "256"]

BOOLS = ["true", "false", "yes", "no", "1", "0", "TRUE", "null", "[]", "{}", "'true'", "2", "-1", "on", "~"]
LIMITS = ["0", "1", "2", "7", "1000000", "1000001", "-1", "1.5", "'3'", "3.0", "1e400", "0x10", "true", "null",
          "99999999999999999999", "nan", ".inf", "[1]", "1_000"]
JAX = ["0.4.23", "0.4.28", "0.4.29", "0.4.37", "0.5.0", "1.0.0", "999.999.999", "1000.0.0", "0.4.029", "01.4.23",
       "0.4", "0.4.23.1", "'0.4.23 '", "'\u0660.\u0664.\u0662\u0663'", "0.4.23\u200b", "0.4.-1", "null", "0.4e1",
       "'v0.4.23'", "0.04", "[0, 4, 23]", "true", "''", "0.0.0"]
HOST = ["2TB", "1GB", "1e9B", "100TB", "0.99GB", "100.1TB", "101TB", "1e14B", "1.0000001e14B", "0B", "-2TB",
        "2TiB", "nan", "inf", "1e999B", "'2 TB'", "2", "null", "512GiB", "true", "2 TB/s", "2TBps", "[2TB]"]


# --- session 36's fields ----------------------------------------------------------------------------------------------

def sec_s36(tmp: Path) -> Iterator[Case]:
    fields = {"strategy.loss_dp_allreduce": BOOLS, "strategy.defer_embedding_wgrad": BOOLS,
              "strategy.wgrad_deferral_limit": LIMITS, "training.jax_release": JAX, "cluster.host_memory": HOST}
    shapes = [[], ["--pp", "2"], ["--pp", "4", "--tp", "2", "--sequence-parallel"], ["--pp", "2", "--schedule",
                                                                                      "interleaved:2"]]
    for field, values in fields.items():
        for v in values:
            for i, shape in enumerate(shapes):
                base = TPU if field == "training.jax_release" and i % 2 else BIG
                extra = ["--set", "strategy.defer_embedding_wgrad=true"] if field.endswith("deferral_limit") else []
                for cmd in ("predict", "memory") if i < 2 else ("predict",):
                    yield "s36", [cmd, *base, *shape, *extra, "--set", f"{field}={v}", "--json"], ()
            yield "s36.plan", ["plan", *DENSE, "--top", "2", "--set", f"{field}={v}", "--json"], ()
            yield "s36.scale", ["scale", *DENSE[:4], "--gpus", "8,16", "--pp", "2", "--set", f"{field}={v}",
                                "--json"], ()
            yield "s36.sensitivity", ["sensitivity", *BIG, "--pp", "2", "--set", f"{field}={v}", "--json"], ()
    # the same fields in files: a scenario for check, a sweep, a runs file, a cluster YAML
    for i, (field, v) in enumerate((f, v) for f, vs in fields.items() for v in vs[::3]):
        sec, key = field.split(".")
        block = {"strategy": f"strategy: {{pp: 2, {key}: {v}}}\n", "training": f"training: {{{key}: {v}}}\n",
                 "cluster": ""}[sec]
        cl = "dgx-h100"
        if sec == "cluster":
            cl = str(_write(tmp, f"c{i}.yaml", "extends: dgx-h100\nname: c\n" f"host_memory: {v}\n"))
        scen = _write(tmp, f"scen{i}.yaml", f"kind: scenario\nname: s\nmodel: llama3-70b\ncluster: {cl}\n"
                      "gpus: [64]\n" + block + "assertions:\n  - {gpus: 64, efficiency: '>= 0.1'}\n")
        yield "s36.check", ["check", str(scen), "--json"], (scen,)
        sw = _write(tmp, f"sw{i}.yaml", f"kind: sweep\nname: s\nmodels: [llama3-70b]\nclusters: [{cl}]\n"
                    "gpus: [64]\nstrategies:\n  - best\n"
                    + (f"  - {{label: a, pp: 2, {key}: {v}}}\n" if sec == "strategy" else "  - {label: a, pp: 2}\n")
                    + (f"training: {{{key}: {v}}}\n" if sec == "training" else ""))
        yield "s36.sweep", ["sweep", str(sw), "-j", "1", "--json"], (sw,)
        if sec != "cluster":
            runs = _write(tmp, f"runs{i}.yaml", "".join(
                f"- {{cluster: dgx-h100, model: llama3-70b, gpus: {g}, pp: 2, {key}: {v}, step_time: {t}}}\n"
                for g, t in ((16, "40 s"), (32, "21 s"), (64, "11 s"))))
            yield "s36.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)


def sec_hostoom(tmp: Path) -> Iterator[Case]:
    """offload_states beside host_memory from the smallest taken to none, with the states' size varied by model and
    GPU count: host_out_of_memory in every command that reports it."""
    for model, cluster, gpus in (("llama3-70b", "dgx-h100", "16"), ("llama3-405b", "dgx-h100", "64"),
                                 ("gpt3-175b", "dgx-a100", "8"), ("llama3-8b", "gb200-nvl72", "8"),
                                 ("mixtral-8x7b", "dgx-h100", "16")):
        for host in ("1GB", "64GB", "2TB", "null", "100TB"):
            for mode, zero in (("optimizer", "1"), ("optimizer", "3"), ("optimizer+params", "3"),
                               ("optimizer+params", "fsdp"), ("optimizer+params", "hsdp"), ("none", "3")):
                base = ["-m", model, "-c", cluster, "-n", gpus, "--set", f"cluster.host_memory={host}",
                        "--set", f"strategy.offload_states={mode}", "--set", f"strategy.zero={zero}"]
                yield "hostoom", ["predict", *base, "--json"], ()
                yield "hostoom", ["memory", *base, "--json"], ()
            yield "hostoom.plan", ["plan", "-m", model, "-c", cluster, "-n", gpus, "--set",
                                   f"cluster.host_memory={host}", "--allow", "offload", "--top", "3", "--json"], ()
            yield "hostoom.plan", ["plan", "-m", model, "-c", cluster, "-n", gpus, "--set",
                                   f"cluster.host_memory={host}", "--set", "strategy.offload_states=optimizer+params",
                                   "--top", "3", "--json"], ()


def sec_deepspeed(tmp: Path) -> Iterator[Case]:
    sections = [{"device": "cpu", "pin_memmory": True}, {"device": "cpu", "Device": "cpu"},
                {"device": "cpu", "nvme_path": "/nvme", "buffer_count": 5}, {"device": "cpu", "auto": "auto"},
                {"device": "cpu", "max_in_cpu": 1}, {"device": "cpu", "ratio": 1, "super_offload": False},
                {"device": "cpu", "pipeline": True}, {"device": "cpu", "": 1}, {"device": "cpu", "x" * 5000: 1},
                {"device": "cpu", "buffer_size": "auto"}, {"device": "cpu", "fast_init": "auto"},
                {"device": "cpu", "cpuadam_cores_perc": 0.5, "stage": 3}, {}, {"device": None},
                {"device": "cpu", "pin_memory": {"a": 1}}, {"device": "cpu", "nvme_path": 5}]
    for i, s in enumerate(sections):
        for dev in ("offload_optimizer", "offload_param"):
            for stage in (1, 3):
                f = _write(tmp, f"ds{i}{dev}{stage}.json", json.dumps({
                    "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                    "zero_optimization": {"stage": stage, dev: s,
                                          **({"offload_optimizer": {"device": "cpu"}} if dev == "offload_param"
                                             else {})}}))
                yield "deepspeed", ["predict", *DENSE, "--strategy", str(f), "--json"], (f,)
                yield "deepspeed", ["plan", *DENSE, "--top", "2", "--strategy", str(f), "--json"], (f,)


def sec_megatron(tmp: Path) -> Iterator[Case]:
    base = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "
    flags = ["--use-torch-fsdp2", "--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward",
             "--torch-fsdp2-no-reshard-after-forward", "--torch-fsdp2-no-reshard-after-forward=1",
             "--use-torch-fsdp2 --use-distributed-optimizer", "--use-torch-fsdp2 --use-megatron-fsdp",
             "--use-torch-fsdp2 --pipeline-model-parallel-size 2", "--use-torch-fsdp2 --pipeline-model-parallel-size 1",
             "--use-torch-fsdp2 --expert-model-parallel-size 2", "--use-torch-fsdp2 --fp16",
             "--use-torch-fsdp2 --fp8-format hybrid --fp8-param-gather", "--use-torch-fsdp2 --overlap-grad-reduce "
             "--ddp-bucket-size 1000 --ddp-num-buckets 3", "--use-torch-fsdp2 --pipeline-model-parallel-size $PP",
             "--use-torch-fsdp2 --context-parallel-size 2", "--use-torch-fsdp2 --recompute-granularity full "
             "--recompute-method uniform --recompute-num-layers 1", "--use-torch-fsdp2 --overlap-param-gather",
             "--fp8-param-gather --fp8-format hybrid", "--fp8-param-gather --fp8-format hybrid --use-megatron-fsdp",
             "--use-torch-fsdp2=true", "--use-torch-fsdp2 false"]
    for i, fl in enumerate(flags):
        f = _write(tmp, f"meg{i}.sh", base + fl + "\n")
        for cmd in ("predict", "memory"):
            yield "megatron", [cmd, "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f),
                               "--json"], (f,)
        for over in (["--zero", "1"], ["--zero", "fsdp"], ["--pp", "2"], ["--set", "strategy.megatron_ddp=true"]):
            yield "megatron.over", ["predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f),
                                    *over, "--json"], (f,)
        yield "megatron.plan", ["plan", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "16", "--top", "2", "--strategy",
                                str(f), "--json"], (f,)


def sec_zero_hint(tmp: Path) -> Iterator[Case]:
    switches = ["fp8_param_gather: true", "fp4_param_gather: true", "fsdp_fp8_all_gather: true",
                "fsdp_per_param: true", "fsdp_defer_grad_sync: true", "xla_gpu_lhs: true", "fsdp_flat_param: true",
                "fsdp_reshard_after_forward: false", "bucket_fragments: true", "offload_states: optimizer",
                "offload_states: optimizer+params", "megatron_ddp: true"]
    for i, sw in enumerate(switches):
        f = _write(tmp, f"z{i}.yaml", f"strategy:\n  {sw}\n")
        for zero in ("", "0", "1", "2", "3", "fsdp", "hsdp", "4", "-1", "FSDP"):
            over = ["--zero", zero] if zero else []
            yield "zero_hint", ["predict", *DENSE, "--precision", "fp8", "--strategy", str(f), *over, "--json"], (f,)
            yield "zero_hint", ["predict", *DENSE, "--precision", "fp8", "--strategy", str(f),
                                *(["--set", f"strategy.zero={zero}"] if zero else []), "--json"], (f,)
        for con in ("", "zero=1", "zero=fsdp", "zero=3", "zero<=1", "zero!=0", "zero>=4", "zero=0", "zero=hsdp"):
            yield "zero_hint.plan", ["plan", *DENSE[:4], "-n", "8", "--precision", "fp8", "--top", "2", "--strategy",
                                     str(f), *(["--constraint", con] if con else []), "--json"], (f,)


def sec_bounds(tmp: Path) -> Iterator[Case]:
    for top in ("0", "1", "500", "501", "-1", "1e3", "2147483648"):
        yield "bounds.plan", ["plan", *DENSE, "-k", top, "--json"], ()
    for cv in ("0", "-0.0", "1e-300", "0.5", "9.99", "10", "1e308", "nan", "inf", "-inf", "-1", "0x1p-3"):
        yield "bounds.plan", ["plan", *DENSE, "--straggler-cv", cv, "--top", "1", "--json"], ()
        yield "bounds.sens", ["sensitivity", *BIG, "--straggler-cv", cv, "--json"], ()
    for tokens in ("0", "1", "300B", "1e30", "-1", "nan", "1e400", "3e11", "0.5", "1T", "1 T"):
        yield "bounds.plan", ["plan", *DENSE, "--objective", "time-to-train", "--train-tokens", tokens, "--top", "1",
                              "--json"], ()
    for gb in ("1", "15", "16", "17", "2147483647", "2147483648", "0", "-16"):
        yield "bounds.plan", ["plan", *DENSE, "--global-batch", gb, "--top", "1", "--json"], ()
        yield "bounds.sens", ["sensitivity", *DENSE, "--global-batch", gb, "--json"], ()
    for modes in ("bsp", "bsp,asp,ssp:2", "ssp:0", "ssp:-1", "backup:16", "backup:0", "local:1", "hier:2:1",
                  "bsp,bsp", ",", "asp,", "hier:1000000:2", "local:1e9"):
        yield "bounds.plan", ["plan", *DENSE, "--sync-modes", modes, "--top", "1", "--json"], ()
    for allow in ("offload", "all", "custom-collectives,compression", "offload,offload", "", "OFFLOAD", "nope"):
        yield "bounds.plan", ["plan", *DENSE, "--allow", allow, "--top", "1", "--json"], ()
    yield "bounds.plan", ["plan", *DENSE, "--pareto", "--top", "1", "--json"], ()
    yield "bounds.plan", ["plan", *DENSE, "--pareto", "--objective", "time-to-train", "--train-tokens", "1e12",
                          "--top", "1", "--json"], ()
    for factor in ("1", "1.0000001", "0.5", "2", "1e300", "0", "-2", "nan", "inf", "1e-300", "100"):
        yield "bounds.sens", ["sensitivity", *BIG, "--factor", factor, "--json"], ()
    for wcv in ("0", "9.99", "10", "-0.1", "nan"):
        yield "bounds.sens", ["sensitivity", *BIG, "--work-cv", wcv, "--json"], ()
    for workers in ("1", "0", "-1", "1000", "2"):
        sw = ROOT / "examples" / "sweeps" / "capacity.yaml"
        yield "bounds.sweep", ["sweep", str(sw), "-j", workers, "--json"], (sw,)
    yield "bounds.sweep", ["sweep", str(ROOT / "examples" / "sweeps" / "capacity.yaml"), "--csv", "--json"], ()
    log = next(iter(sorted((ROOT / "tests" / "data" / "nccl").glob("*.log"))))
    for tol in ("0", "1e-9", "0.25", "1", "10", "-0.1", "nan", "inf"):
        yield "bounds.calib", ["calibrate", str(log), "-c", "dgx-a100", "--tolerance", tol, "--json"], (log,)
    runs = _write(tmp, "runs.yaml", "".join(
        f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, step_time: {t}}}\n"
        for g, t in ((8, "2 s"), (16, "1.05 s"), (32, "0.56 s"))))
    for pa in ("1", "8", "64", "0", "-8", "1000000000", "3"):
        for mode in ("strong", "weak", "STRONG", ""):
            yield "bounds.runs", ["calibrate", "runs", str(runs), "--predict-at", pa, "--mode", mode, "--json"], (runs,)
    for factors in ("compute", "all", "overhead_s", "bandwidth:nope", "compute,compute", "", ",", "overlap,all"):
        yield "bounds.runs", ["calibrate", "runs", str(runs), "--factors", factors, "--json"], (runs,)
    scen = ROOT / "examples" / "capacity" / "gpt3-175b-dgx-h100.yaml"
    if scen.exists():
        for s in ("--pessimistic", "--straggler-cv=0.3", "--straggler-cv=nan"):
            yield "bounds.check", ["check", str(scen), s, "--json"], (scen,)


COMBO_BASES = [["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"], ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64"],
               ["-m", "deepseek-v3", "-c", "gb200-nvl72", "-n", "256"], ["-m", "llama3-8b", "-c", "tpu-v5p-pod",
                                                                         "-n", "64"],
               ["-m", "gpt3-175b", "-c", "dgx-a100", "-n", "128"], ["-m", "llama3-405b", "-c", "dgx-b200", "-n", "128"]]
SESSION36 = {"strategy": ["loss_dp_allreduce", "defer_embedding_wgrad", "wgrad_deferral_limit", "offload_states"],
             "training": ["jax_release"]}


def sec_combo(tmp: Path, count: int = int(os.environ.get("FUZZ37_COMBO", "1200")),
              seed: int = int(os.environ.get("FUZZ37_SEED", "37"))) -> Iterator[Case]:
    schema = json.loads((ROOT / "schemas" / "scenario.schema.json").read_text())["$defs"]
    pools = {sec: {f: _field_values(p) for f, p in schema[name]["properties"].items() if _field_values(p)}
             for sec, name in (("strategy", "StrategySpec"), ("training", "TrainingSpec"))}
    for drop in ("dp", "seq_len", "global_batch", "cp_a2a_size", "stage_layers"):
        for pool in pools.values():
            pool.pop(drop, None)
    pools["training"]["jax_release"] = ["0.4.23", "0.4.29", "0.4.37"]
    rng = random.Random(seed)
    for _ in range(count):
        base = rng.choice(COMBO_BASES)
        sec = rng.choice(list(SESSION36))
        picks = [(sec, rng.choice(SESSION36[sec]))]
        for _k in range(rng.randint(2, 6)):
            s2 = rng.choice(["strategy", "training"])
            picks.append((s2, rng.choice(list(pools[s2]))))
        sets = ["--set", f"strategy.pp={rng.choice([1, 2, 4])}", "--set",
                f"strategy.zero={rng.choice(['1', '2', '3', 'fsdp', 'hsdp', '0'])}",
                "--set", f"cluster.host_memory={rng.choice(['16GB', '2TB', 'null'])}"]
        for s2, f in picks:
            sets += ["--set", f"{s2}.{f}={rng.choice(pools[s2][f])}"]
        cmd = rng.choice(["predict", "predict", "memory", "sensitivity"])
        yield "combo", [cmd, *base, *sets, "--json"], ()


# --- output paths, in a subprocess ------------------------------------------------------------------------------------

def _sub(argv: list[str], cwd: Path, stdout: Any = subprocess.PIPE) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "scalemodel", *argv], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return r.returncode, r.stderr


def run_paths(tmp: Path) -> tuple[int, list[str]]:
    """Outputs that are an input by another name, and stdouts that cannot take the result: (cases, findings)."""
    d = tmp / "paths"
    d.mkdir()
    (d / "sub").mkdir()
    sweep = d / "s.yaml"
    sweep.write_text((ROOT / "examples" / "sweeps" / "capacity.yaml").read_text())
    log = d / "a.log"
    log.write_text(next(iter(sorted((ROOT / "tests" / "data" / "nccl").glob("*.log")))).read_text())
    cluster = d / "c.yaml"
    cluster.write_text("extends: dgx-a100\nname: c\n")
    scen = d / "sc.yaml"
    scen.write_text("kind: scenario\nname: s\nmodel: llama3-8b\ncluster: ./c.yaml\ngpus: [8, 16]\n")
    keep = {p: p.read_bytes() for p in (sweep, log, cluster, scen)}
    os.symlink("s.yaml", d / "ln.csv")
    os.link(sweep, d / "hl.jsonl")
    os.symlink("a.log", d / "ln.yaml")
    os.link(cluster, d / "hc.yaml")
    os.symlink("c.yaml", d / "lc.png")
    os.symlink("sc.yaml", d / "ls.svg")
    cases = [
        (["sweep", "s.yaml", "--out", "ln.csv"], 2), (["sweep", "s.yaml", "--out", "hl.jsonl"], 2),
        (["sweep", "s.yaml", "--out", "sub/../ln.csv"], 2), (["sweep", "./s.yaml", "--out", f"{d}/hl.jsonl"], 2),
        (["sweep", "s.yaml", "--out", "o.csv", "--out", "./o.csv"], 2),
        (["calibrate", "a.log", "-c", "dgx-a100", "--out", "ln.yaml"], 2),
        (["calibrate", "a.log", "-c", "c.yaml", "--out", "hc.yaml"], 2),
        (["calibrate", "a.log", "-c", "hc.yaml", "--out", "sub/../c.yaml"], 2),
        (["scale", "-m", "llama3-8b", "-c", "c.yaml", "--gpus", "8,16", "--plot", "lc.png"], 2),
        (["scale", "--scenario", "sc.yaml", "--plot", "ls.svg"], 2),
        (["scale", "--scenario", "sc.yaml", "--plot", "sub/../c.yaml.png"], 0),
    ]
    findings = []
    for argv, want in cases:
        code, err = _sub(argv, d)
        if code != want or "Traceback" in err or (want == 2 and not err.strip().splitlines()[-1].startswith("error:")):
            findings.append(f"{' '.join(argv)}: exit {code} (wanted {want}): {err[-200:]!r}")
        changed = [p.name for p, b in keep.items() if p.read_bytes() != b]
        if changed:
            findings.append(f"{' '.join(argv)}: changed {changed}")
            for p, b in keep.items():
                p.write_bytes(b)
    n = len(cases)
    with open("/dev/full", "w") as full:
        for argv in (["predict", *DENSE, "--json"], ["predict", *DENSE], ["sweep", "s.yaml", "--json"],
                     ["plan", *DENSE, "--top", "1", "--json"], ["hardware", "list"], ["schema", "cluster"],
                     ["memory", *DENSE, "--json"], ["sensitivity", *BIG, "--json"]):
            n += 1
            code, err = _sub(argv, d, stdout=full)
            if code != 2 or "Traceback" in err or "No space left" not in err:
                findings.append(f"{' '.join(argv)} > /dev/full: exit {code}: {err[-200:]!r}")
    for argv in (["predict", *DENSE, "--json"], ["plan", *DENSE, "--top", "3"], ["hardware", "list"]):
        n += 1
        p = subprocess.Popen([sys.executable, "-m", "scalemodel", *argv], cwd=d, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert p.stdout is not None and p.stderr is not None
        p.stdout.read(5)
        p.stdout.close()
        err = p.stderr.read().decode()
        code = p.wait(timeout=300)
        if "Traceback" in err or code not in (0, 1, 2, -13, 141):
            findings.append(f"{' '.join(argv)} | head -c 5: exit {code}: {err[-200:]!r}")
    return n, findings


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "s36": sec_s36, "hostoom": sec_hostoom, "deepspeed": sec_deepspeed, "megatron": sec_megatron,
    "zero_hint": sec_zero_hint, "bounds": sec_bounds, "combo": sec_combo}


def main_() -> int:
    return drive("fuzz37", __doc__, SECTIONS, runners={"paths": run_paths}, judges=(judge_cut,))


if __name__ == "__main__":
    raise SystemExit(main_())
