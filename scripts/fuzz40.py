"""Hostile-input corpus of round 40 (fuzz40): what session 39 added and the commands' output paths.

Run from the project root: ``python scripts/fuzz40.py [--only SECTION] [--list] [--text] [--verbose]``. Each case
runs the CLI in process through scripts/fuzz36.py's harness and its one reporting driver (``drive``: 20 s CPU /
300 s wall alarm; exit 0, 1 or 2 only; no traceback; on exit 2 one ``error:`` line and nothing on stdout; ``--json``
parsed with ``parse_constant`` raising and no non-finite float; no ``nan`` / ``inf`` word in a table; no input
file changed); besides, an error line cut at 300 characters, a case over 20 s of wall clock or 1 GiB of new peak
memory is a finding. Findings are printed one a line; the last line counts the cases and the findings.

Sections: allow (plan --allow micro-batches / expert-tp / all with odd micro-batch, etp and ep pins, prime and
highly composite batches, odd GPU counts), hook (strategy main_grad_hook beside every other strategy switch and
every ZeRO form, over every command and file kind), optstep (overlap_param_gather_with_optimizer_step over
schedules, pipeline depths, ZeRO forms, trainers and the switches it needs), losstok (loss_token_count_read over
micro-batch counts, pipelines, sync modes and files), negation (Megatron-LM launches whose --no-* / --disable-*
switches come with their positive form, each other, twice, with values, in both orders, generated from the
reader's own tables), cmds (calibrate logs and runs files, sensitivity factors, check runs-like files, scale --gpus
edge lists). The ``outs`` runner (subprocesses) points every command's output (sweep --out, calibrate --out,
calibrate runs --out, scale --plot) at its inputs through symlinks and hard links (the runs file, its cluster
file, a --strategy file, a -m workload file, a sweep's referenced file), at a folder, a read-only folder and a
FIFO, and checks that no input changed, no temporary file is left and the exit is 2 with an error line.

Round 40: 1,462 cases (negation 693, optstep 281, allow 189, hook 159, losstok 50, cmds 48; outs 42 subprocess
cases, one fresh folder each; the first pass ran 1,456 with negation at 685, then hook, optstep, losstok and outs
again after the fixes, 532), 0 tracebacks, hangs past the wall alarm, invalid JSON, non-finite numbers or changed
inputs. Findings (tests/test_fuzz40.py): a launch's --overlap-param-gather-with-optimizer-step warned as not used
(fixed: read); a ZeRO-dependent switch refused at a zero 0 that was given, said "the default ... give zero too"
(fixed: optstep, every case of which sets zero); plan with main_grad_hook pinned ranked FSDP / ZeRO-3 plans predict
refuses (fixed: engine.planner.ZERO_SWITCHES; found by hand from the hook section's plan cases, which the harness
passes: exit 0, valid JSON); a folder named where a built-in scenario or cluster goes called "a file" (fixed, by
hand beside the corpus); sweep's --out files written one by one, the earlier ones replaced when a later one cannot
be written (open: strict xfail, the fix is report/output.py's). Found slow, not fixed:
``plan -m mixtral-8x7b -n 64 --allow all`` over 20 s of CPU (51 s alone, 14.2e9 candidates, 34.4e6 evaluated; 20 s
and 2.5e9 without micro-batches and expert-tp, round 38's 18.5 s): the search is exhaustive with bounds, reports what
it covered after the fact ("searched N candidates (M evaluated, the rest bounded)") and has no cap. A first outs pass
that reused one folder broke its hard links with the first rename (os.replace makes a new inode) and was the
harness's fault, not the tool's; a read-only folder is writable by root (the cases accept 0 there).
"""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from fuzz36 import DENSE, MOE, TOP, Case, _write, drive, judge_cut, judge_wall_rss  # noqa: E402

from scalemodel.specs import megatron_args as meg  # noqa: E402

DS3 = ["-m", "deepseek-v3", "-c", "gb200-nvl72", "-n", "256"]
BIG = ["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"]
LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "
ZEROS = ["0", "1", "2", "3", "fsdp", "hsdp"]
BOOLS = ["true", "false", "yes", "1", "0", "2", "null", "[]", "'true'", "~"]


def sec_allow(tmp: Path) -> Iterator[Case]:
    allows = ["micro-batches", "expert-tp", "micro-batches,expert-tp", "all", "expert-tp,expert-tp",
              "micro-batches,,expert-tp", "micro-batches,x", "MICRO-BATCHES", " expert-tp", "expert_tp"]
    for a in allows:
        for base in (DENSE, MOE):
            yield "allow.kind", ["plan", *base, "--allow", a, *TOP], ()
    pins = [["--constraint", "micro_batch=3"], ["--constraint", "micro_batch=7"], ["--constraint", "micro_batch>=5"],
            ["--constraint", "micro_batch<=0"], ["--constraint", "micro_batch=1000000"],
            ["--set", "training.micro_batch=3"], ["--set", "training.micro_batch=5"],
            ["--set", "strategy.etp=0"], ["--set", "strategy.etp=1"], ["--set", "strategy.etp=3"],
            ["--set", "strategy.etp=5"], ["--set", "strategy.etp=16"], ["--set", "strategy.etp=-1"],
            ["--set", "strategy.etp=1", "--set", "strategy.tp=4"],
            ["--set", "strategy.etp=4", "--set", "strategy.tp=2"],
            ["--constraint", "ep=3"], ["--constraint", "ep=16", "--set", "strategy.etp=1"],
            ["--constraint", "tp=8", "--set", "strategy.etp=2"], ["--constraint", "tp=1", "--set", "strategy.etp=2"],
            ["--set", "strategy.ep=8", "--set", "strategy.etp=3"], ["--constraint", "cp=2", "--set", "strategy.etp=1"]]
    for pin in pins:
        for base in (MOE, DENSE):
            for a in ("micro-batches,expert-tp", "expert-tp", "micro-batches"):
                yield "allow.pin", ["plan", *base, "--allow", a, *pin, *TOP], ()
    for gb in ("1", "3", "1009", "7919", "65536", "720720", "1048573", "2147483647", "99999999999"):
        yield "allow.batch", ["plan", *DENSE, "--global-batch", gb, "--allow", "micro-batches", *TOP], ()
        yield "allow.batch.moe", ["plan", *MOE, "--global-batch", gb, "--allow", "micro-batches,expert-tp", *TOP], ()
    for n in ("1", "2", "3", "6", "24", "96", "1000", "4096"):
        yield "allow.gpus", ["plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", n, "--allow",
                             "micro-batches,expert-tp", *TOP], ()
    for extra in (["--objective", "time-to-train", "--train-tokens", "1e9"], ["--objective", "cost"],
                  ["--sync-modes", "bsp,local:4"], ["--pareto"], ["--top", "500"]):
        yield "allow.obj", ["plan", *MOE, "--allow", "micro-batches,expert-tp", *extra, "--json"], ()
    # scale --best over the same planner, and a strategy file that pins what --allow opens
    for a in ("micro-batches", "expert-tp"):
        yield "allow.scale", ["scale", *MOE[:4], "--gpus", "16,64", "--best", "--set", "strategy.etp=1", "--json"], ()
        f = _write(tmp, f"allow_{a}.yaml", "kind: strategy\netp: 1\nmicro_batch: 3\n")
        yield "allow.file", ["plan", *MOE, "--allow", a, "--strategy", str(f), *TOP], (f,)
    # torchtitan's expert TP (1 or tp) and Megatron's --expert-tensor-parallel-size beside --allow expert-tp
    for v in ("0", "1", "3", "8"):
        f = _write(tmp, f"etp{v}.sh", LAUNCH + f"--expert-model-parallel-size 8 --expert-tensor-parallel-size {v}\n")
        yield "allow.megatron", ["plan", *MOE, "--allow", "expert-tp", "--strategy", str(f), *TOP], (f,)
        yield "allow.megatron.predict", ["predict", *MOE, "--strategy", str(f), "--json"], (f,)


def sec_hook(tmp: Path) -> Iterator[Case]:
    switches = [s for s in _strategy_bools() if s != "main_grad_hook"]
    for other in switches:
        for v in ("true", "false"):
            yield "hook.beside", ["predict", *DENSE, "--pp", "2", "--zero", "1", "--set",
                                  "strategy.main_grad_hook=true", "--set", f"strategy.{other}={v}", "--json"], ()
    for z in ZEROS:
        for cmd in (["predict", *DENSE], ["memory", *DENSE], ["plan", *DENSE, "--top", "2"],
                    ["scale", *DENSE[:4], "--gpus", "8,16"], ["sensitivity", *DENSE]):
            yield "hook.zero", [*cmd, "--set", f"strategy.zero={z}", "--set", "strategy.main_grad_hook=true",
                                "--json"], ()
        yield "hook.zero.nofusion", ["predict", *DENSE, "--set", f"strategy.zero={z}", "--set",
                                     "strategy.main_grad_hook=true", "--set", "strategy.grad_accumulation_fusion=false",
                                     "--json"], ()
    for v in BOOLS:
        yield "hook.value", ["predict", *DENSE, "--set", f"strategy.main_grad_hook={v}", "--json"], ()
        f = _write(tmp, f"hook{abs(hash(v))}.yaml", f"kind: strategy\nmain_grad_hook: {v}\nzero: 1\n")
        yield "hook.file", ["predict", *DENSE, "--strategy", str(f), "--json"], (f,)
    for trainer in ("megatron_ddp", "deepspeed_pipeline", "nanotron_trainer"):
        yield "hook.trainer.plan", ["plan", *DENSE, "--set", "strategy.main_grad_hook=true", "--set",
                                    f"strategy.{trainer}=true", *TOP], ()
        yield "hook.trainer.plan.zero", ["plan", *DENSE, "--set", "strategy.main_grad_hook=true", "--constraint",
                                         "zero=3", *TOP], ()
    for c in (["--constraint", "zero<=2"], ["--constraint", "zero=fsdp"], ["--constraint", "zero!=0"],
              ["--allow", "offload"], ["--allow", "all"]):
        yield "hook.plan", ["plan", *DENSE, "--set", "strategy.main_grad_hook=true", *c, *TOP], ()
    runs = _write(tmp, "hookruns.yaml", "".join(
        f"- {{cluster: dgx-a100, model: gpt-7.5b, gpus: {g}, main_grad_hook: true, zero: 1, step_time: {t}}}\n"
        for g, t in ((8, "4 s"), (16, "2.1 s"), (32, "1.1 s"))))
    yield "hook.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)
    runs3 = _write(tmp, "hookruns3.yaml", "- {cluster: dgx-a100, model: gpt-7.5b, gpus: 8, main_grad_hook: true, "
                   "zero: 3, step_time: 4 s}\n")
    yield "hook.runs.zero3", ["calibrate", "runs", str(runs3), "--json"], (runs3,)
    scen = _write(tmp, "hookscen.yaml", "kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\ngpus: [8, 16]\n"
                  "strategy: {main_grad_hook: true, zero: fsdp}\nassertions: {min_mfu: 0.1}\n")
    yield "hook.check", ["check", str(scen), "--json"], (scen,)
    sw = _write(tmp, "hooksw.yaml", "kind: sweep\nname: s\nmodels: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8, 16]\n"
                "strategies:\n  - {main_grad_hook: true, zero: 1}\n  - {main_grad_hook: true, zero: 3}\n")
    yield "hook.sweep", ["sweep", str(sw), "--json"], (sw,)


def _strategy_bools() -> list[str]:
    """The strategy's boolean fields, read from the shipped schema (schemas/scenario.schema.json)."""
    props = json.loads((ROOT / "schemas" / "scenario.schema.json").read_text())["$defs"]["StrategySpec"]["properties"]
    return [k for k, p in props.items() if any(o.get("type") == "boolean" for o in p.get("anyOf", [p]))]


def sec_optstep(tmp: Path) -> Iterator[Case]:
    rng = random.Random(40)
    scheds = ["1f1b", "interleaved:2", "interleaved:4", "zb", "gpipe", "interleaved:3"]
    for _ in range(260):
        sets = ["--set", "strategy.overlap_param_gather_with_optimizer_step=true",
                "--set", f"strategy.schedule={rng.choice(scheds)}",
                "--set", f"strategy.pp={rng.choice(['1', '2', '4', '8'])}",
                "--set", f"strategy.zero={rng.choice(ZEROS)}",
                "--set", f"strategy.megatron_ddp={rng.choice(['true', 'false'])}",
                "--set", f"strategy.overlap_param_gather={rng.choice(['true', 'false'])}",
                "--set", f"strategy.overlap={rng.choice(['true', 'false'])}"]
        for extra in rng.sample([["--set", "training.precision=fp8", "--set", "strategy.fp8_param_gather=true"],
                                 ["--set", "strategy.align_param_gather=false"],
                                 ["--set", "strategy.first_chunk_layers=0"], ["--set", "strategy.last_chunk_layers=1"],
                                 ["--set", "strategy.bucket_size=1KiB"], ["--set", "strategy.bucket_size=1e15B"],
                                 ["--set", "strategy.check_for_nan_in_grad=true"],
                                 ["--set", "strategy.defer_embedding_wgrad=true"],
                                 ["--set", "strategy.tp=2", "--set", "strategy.sequence_parallel=true"],
                                 ["--set", "strategy.offload_states=optimizer"],
                                 ["--set", "strategy.main_grad_hook=true"]], rng.randint(0, 3)):
            sets += extra
        base = rng.choice([["-m", "llama3-8b", "-c", "dgx-h100", "-n", "64"], BIG, ["-m", "mixtral-8x7b", "-c",
                                                                                     "dgx-h100", "-n", "64"]])
        cmd = rng.choice(["predict", "predict", "memory"])
        yield "optstep.rand", [cmd, *base, *sets, "--json"], ()
    on = ["--set", "strategy.overlap_param_gather_with_optimizer_step=true"]
    for cmd in (["plan", *BIG, "--top", "2"], ["plan", *BIG, "--top", "2", "--constraint", "virtual_stages=2"],
                ["plan", *BIG, "--top", "2", "--constraint", "pp=1"],
                ["plan", *BIG, "--top", "2", "--constraint", "zero=3"],
                ["scale", *BIG[:4], "--gpus", "64,128", "--pp", "4", "--schedule", "interleaved:2"],
                ["scale", *BIG[:4], "--gpus", "64,128", "--best"],
                ["sensitivity", *BIG, "--pp", "4", "--schedule", "interleaved:2", "--zero", "1"]):
        yield "optstep.cmd", [*cmd, *on, "--set", "strategy.megatron_ddp=true", "--set",
                              "strategy.overlap_param_gather=true", "--json"], ()
    for v in BOOLS:
        yield "optstep.value", ["predict", *BIG, "--pp", "4", "--schedule", "interleaved:2", "--set",
                                f"strategy.overlap_param_gather_with_optimizer_step={v}", "--json"], ()
    for fl in ("--overlap-param-gather-with-optimizer-step", "--overlap-param-gather-with-optimizer-step "
               "--overlap-param-gather-with-optimizer-step", "--overlap-param-gather-with-optimizer-step=1",
               "--overlap-param-gather-with-optimizer-step --no-overlap-param-gather-with-optimizer-step"):
        f = _write(tmp, f"os{abs(hash(fl))}.sh", LAUNCH + "--pipeline-model-parallel-size 4 --num-layers 80 "
                   "--num-layers-per-virtual-pipeline-stage 10 --use-distributed-optimizer --overlap-grad-reduce "
                   "--overlap-param-gather " + fl + "\n")
        yield "optstep.megatron", ["predict", *BIG, "--strategy", str(f), "--json"], (f,)


def sec_losstok(tmp: Path) -> Iterator[Case]:
    on = ["--set", "strategy.loss_token_count_read=true"]
    for gb in ("16", "1024", "1048576", "16777216"):
        for pp in ("1", "2", "8"):
            yield "losstok.m", ["predict", *BIG, "--pp", pp, "--global-batch", gb, *on, "--json"], ()
    for sync in ("asp", "ssp:2", "local:4", "backup:1", "hier:2"):
        yield "losstok.sync", ["predict", *BIG, "--sync", sync, *on, "--json"], ()
    for v in BOOLS:
        yield "losstok.value", ["predict", *DENSE, "--set", f"strategy.loss_token_count_read={v}", "--json"], ()
        runs = _write(tmp, f"ltr{abs(hash(v))}.yaml", "".join(
            f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, loss_token_count_read: {v}, step_time: {t}}}\n"
            for g, t in ((8, "4 s"), (16, "2.1 s"), (32, "1.1 s"))))
        yield "losstok.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)
    for cmd in (["plan", *DENSE, "--top", "2"], ["scale", *DENSE[:4], "--gpus", "8,16,1024"],
                ["sensitivity", *DENSE], ["memory", *DENSE], ["plan", *MOE, "--top", "2", "--allow", "all"]):
        yield "losstok.cmd", [*cmd, *on, "--set", "strategy.check_for_nan_in_loss=true", "--json"], ()
    for other in ("check_for_nan_in_loss", "check_for_nan_in_grad", "main_grad_hook", "nanotron_trainer",
                  "deepspeed_pipeline", "megatron_ddp", "moe_host_attention_graphed"):
        yield "losstok.beside", ["predict", *MOE, *on, "--set", f"strategy.{other}=true", "--json"], ()
    f = _write(tmp, "lt.sh", LAUNCH + "--loss-token-count-read\n")
    yield "losstok.megatron", ["predict", *DENSE, "--strategy", str(f), "--json"], (f,)


def _neg_pairs() -> Iterator[tuple[str, str | None]]:
    """Each negative switch of the Megatron-LM reader's tables with its positive form (None where it has none)."""
    negs = sorted({*meg._MEG_NO_KNOWN, *meg._MEG_DISABLE_TP_COMM, *meg._MEG_NO_MODEL,
                   *(k for k in meg._MEG_SWITCH if k.startswith(("--no-", "--disable-"))),
                   *(k for k in meg._MEG_STORE_TRUE if k.startswith(("--no-", "--disable-")))})
    for n in negs:
        base = "--" + n.split("-", 3)[-1] if n.startswith("--no-") else "--" + n[len("--disable-"):]
        yield n, base


def sec_negation(tmp: Path) -> Iterator[Case]:
    i = 0
    for neg, base in _neg_pairs():
        other = neg.replace("--no-", "--disable-", 1) if neg.startswith("--no-") else neg.replace("--disable-",
                                                                                                   "--no-", 1)
        value = " 3" if neg == "--no-rope-freq" else ""
        for fl in (f"{neg}{value}", f"{neg}{value} {neg}{value}", f"{neg}{value} {base}", f"{base} {neg}{value}",
                   f"{base} {base}", f"{neg}{value} {other}{value}", f"{neg}=false", f"{neg} true",
                   f"{neg.replace('-', '_')}{value} {base}"):
            i += 1
            f = _write(tmp, f"neg{i}.sh", LAUNCH + "--pipeline-model-parallel-size 2 --tp-comm-overlap "
                       "--fp8-format hybrid --swiglu " + fl + "\n")
            yield "negation", ["predict", *DENSE[:4], "-n", "64", "--strategy", str(f), "--json"], (f,)
    # the positive switches the reader prices, each with an invented negation and repeated
    for sw in sorted(meg._MEG_SWITCH):
        if sw.startswith(("--no-", "--disable-")):
            continue
        for fl in (f"{sw} {sw}", f"{sw} --no-{sw[2:]}", f"--disable-{sw[2:]} {sw}", f"{sw}=1"):
            i += 1
            f = _write(tmp, f"neg{i}.sh", LAUNCH + "--pipeline-model-parallel-size 2 " + fl + "\n")
            yield "negation.pos", ["predict", *DENSE[:4], "-n", "64", "--strategy", str(f), "--json"], (f,)
            yield "negation.pos.plan", ["plan", *DENSE[:4], "-n", "64", "--strategy", str(f), *TOP], (f,)


def sec_cmds(tmp: Path) -> Iterator[Case]:
    for g in ["1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768,65536,131072", "8,16,8", "8,,16",
              ",8", "8, 16", "08,16", "8.0,16", "8e0,16", "1", "100000000", "100000001", "8:16", "8..64", "8-64",
              "\u0038,16", "８,16", "8\t,16", "8,16\n", " 8,16", "-0", "0,8"]:
        yield "cmds.scale", ["scale", *DENSE[:4], "--gpus", g, "--json"], ()
    for fac in ["1e-320", "5e-324", "-0", "0.999999999999", "1.000000000001", "1e15", "1 %", "10%", "2x", ""]:
        yield "cmds.sens", ["sensitivity", *DENSE, "--factor", fac, "--json"], ()
    # runs files with the session-39 fields and their neighbours
    rows = ["- {cluster: dgx-a100, model: gpt-7.5b, gpus: 8, step_time: 4 s, main_grad_hook: true, "
            "grad_accumulation_fusion: false}\n",
            "- {cluster: dgx-h100, model: llama3-70b, gpus: 64, step_time: 9 s, pp: 4, schedule: interleaved:2, "
            "zero: 1, megatron_ddp: true, overlap_param_gather: true, "
            "overlap_param_gather_with_optimizer_step: true}\n",
            "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 1 s, loss_token_count_read: true, "
            "global_batch: 1048576}\n",
            "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 0 s}\n",
            "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 1e-300 s}\n",
            "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 1e300 s}\n"]
    for i, row in enumerate(rows):
        f = _write(tmp, f"cr{i}.yaml", row * 3)
        yield "cmds.runs", ["calibrate", "runs", str(f), "--json"], (f,)
        yield "cmds.runs.check", ["check", str(f), "--json"], (f,)
    nccl = sorted((ROOT / "tests" / "data" / "nccl").glob("*.log"))[0].read_text()
    for i, body in enumerate((nccl * 50, nccl.replace(" 0 ", " -0 "), nccl.replace("1", "\u0661"),
                              nccl + "\x00", "#" * 100000 + "\n" + nccl)):
        f = _write(tmp, f"ncl{i}.log", body)
        yield "cmds.calib", ["calibrate", str(f), "-c", "dgx-a100", "--json"], (f,)


# --- output paths, in a subprocess ------------------------------------------------------------------------------------

def _sub(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    try:
        r = subprocess.run([sys.executable, "-m", "scalemodel", *argv], cwd=cwd, capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return 124, "", "timeout"
    return r.returncode, r.stdout, r.stderr


def _outs_dir(d: Path) -> dict[Path, bytes]:
    """A fresh folder of inputs and of links to them (symlinks ``l_*``, hard links ``hl_*``); their bytes."""
    d.mkdir()
    (d / "sub").mkdir()
    (d / "ro").mkdir()
    for name in ("dir.yaml", "dir.png", "dir.csv"):
        (d / name).mkdir()
    os.mkfifo(d / "fifo.yaml")
    ins = [_write(d, "c.yaml", "extends: dgx-a100\nname: c\n"),
           _write(d, "w.yaml", (ROOT / "examples" / "workloads" / "llama3-8b.yaml").read_text()),
           _write(d, "s.yaml", "kind: strategy\nzero: 1\n"),
           _write(d, "runs.yaml", "".join(f"- {{cluster: c.yaml, model: w.yaml, gpus: {g}, step_time: {t}}}\n"
                                          for g, t in ((8, "4 s"), (16, "2.1 s")))),
           _write(d, "a.log", sorted((ROOT / "tests" / "data" / "nccl").glob("*.log"))[0].read_text()),
           _write(d, "sw.yaml", "kind: sweep\nname: s\nmodels: [w.yaml]\nclusters: [c.yaml]\ngpus: [8, 16]\n"
                  "strategies:\n  - s.yaml\n"),
           _write(d, "sc.yaml", "kind: scenario\nname: s\nmodel: w.yaml\ncluster: c.yaml\ngpus: [8, 16]\n"
                  "strategy: s.yaml\n")]
    for src, name in (("runs.yaml", "runs.yaml"), ("c.yaml", "c.yaml"), ("s.yaml", "s.png"), ("w.yaml", "w.png"),
                      ("w.yaml", "w.csv"), ("sw.yaml", "sw.csv"), ("a.log", "log.yaml"), ("s.yaml", "s.csv"),
                      ("c.yaml", "c.png"), ("sc.yaml", "sc.svg")):
        os.symlink(src, d / f"l_{name}")
        os.link(d / src, d / f"hl_{name}")
    os.chmod(d / "ro", stat.S_IRUSR | stat.S_IXUSR)
    return {p: p.read_bytes() for p in ins}


def run_outs(tmp: Path) -> tuple[int, list[str]]:
    """Every command's output at one of its inputs by another name, at a folder, a read-only folder and a FIFO; each
    case in a fresh folder (an earlier case's rename would have broken a hard link). Exit 2 is wanted where the
    output is an input of the command, a folder or a FIFO; a read-only folder is writable by root (exit 0 taken)."""
    root_user = os.geteuid() == 0
    ro_want = (0, 2) if root_user else (2,)
    cases: list[tuple[list[str], tuple[int, ...]]] = []
    for out, want in (("l_runs.yaml", (2,)), ("hl_runs.yaml", (2,)), ("l_c.yaml", (2,)), ("hl_c.yaml", (2,)),
                      ("sub/../runs.yaml", (2,)), ("./c.yaml", (2,)), ("hl_log.yaml", (0,)), ("dir.yaml", (2,)),
                      ("fifo.yaml", (2,)), ("ro/x.yaml", ro_want), ("ro", (2,)), ("sub/../hl_c.yaml", (2,))):
        cases.append((["calibrate", "runs", "runs.yaml", "--out", out], want))
    for out, want in (("l_c.yaml", (2,)), ("hl_c.yaml", (2,)), ("hl_log.yaml", (2,)), ("l_log.yaml", (2,)),
                      ("hl_runs.yaml", (0,)), ("dir.yaml", (2,)), ("fifo.yaml", (2,)), ("ro/x.yaml", ro_want)):
        cases.append((["calibrate", "a.log", "-c", "c.yaml", "--out", out], want))
    for out, want in (("l_s.png", (2,)), ("hl_s.png", (2,)), ("l_w.png", (2,)), ("hl_w.png", (2,)),
                      ("l_c.png", (2,)), ("hl_c.png", (2,)), ("dir.png", (2,)), ("ro/x.png", ro_want)):
        cases.append((["scale", "-m", "w.yaml", "-c", "c.yaml", "--gpus", "8,16", "--strategy", "s.yaml",
                       "--plot", out], want))
    for out, want in (("l_w.csv", (2,)), ("hl_w.csv", (2,)), ("l_sw.csv", (2,)), ("hl_sw.csv", (2,)),
                      ("l_s.csv", (2,)), ("hl_s.csv", (2,)), ("dir.csv", (2,)), ("ro/x.csv", ro_want)):
        cases.append((["sweep", "sw.yaml", "--out", out], want))
    for out in ("l_sc.svg", "hl_sc.svg", "l_c.png", "hl_c.png", "l_s.png", "hl_w.png"):
        cases.append((["scale", "--scenario", "sc.yaml", "--plot", out], (2,)))
    findings = []
    for i, (argv, want) in enumerate(cases):
        d = tmp / f"outs{i}"
        keep = _outs_dir(d)
        code, _, err = _sub(argv, d)
        lines = err.strip().splitlines()
        if code not in want or "Traceback" in err or (code == 2 and (not lines or not lines[-1].startswith("error:"))):
            findings.append(f"{' '.join(argv)}: exit {code} (wanted {want}): {err[-300:]!r}")
        changed = [p.name for p, b in keep.items() if p.read_bytes() != b]
        if changed:
            findings.append(f"{' '.join(argv)}: changed {changed}")
        left = [q.name for q in [*d.iterdir(), *(d / "sub").iterdir()] if q.name.endswith(".tmp")]
        if left:
            findings.append(f"{' '.join(argv)}: left {left}")
        os.chmod(d / "ro", stat.S_IRWXU)
    return len(cases), findings


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "allow": sec_allow, "hook": sec_hook, "optstep": sec_optstep, "losstok": sec_losstok, "negation": sec_negation,
    "cmds": sec_cmds}


def main_() -> int:
    return drive("fuzz40", __doc__, SECTIONS, runners={"outs": run_outs},
                 judges=(judge_cut, judge_wall_rss(20.0, 1 << 20)))


if __name__ == "__main__":
    raise SystemExit(main_())
