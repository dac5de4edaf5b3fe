"""Hostile-input corpus of round 36 (fuzz36): what session 35 added and the spec fields no earlier round fuzzed.

Run from the project root: ``python scripts/fuzz36.py [--only SECTION] [--list]``. Each case runs the CLI in-process
(``scalemodel.cli.main``) under a 20 s CPU / 300 s wall alarm and is checked against the contract of tests/README.md and
tests/test_hostile_inputs.py: exit 0, 1 or 2 only; no traceback (an exception other than SystemExit is a finding);
on exit 2 one ``error:`` line on stderr and nothing on stdout; ``--json`` output parsed by ``json.loads`` with
``parse_constant`` raising (no NaN / Infinity) and no float that is not finite; no ``nan`` / ``inf`` word in a
table; no input file changed. Findings are printed one a line; the last line counts the cases and the findings.
:func:`drive` is the one reporting driver of every fuzz corpus (fuzz36 to fuzz39, fuzzpin38): its options, the case
loop, the judges a corpus adds (:func:`judge_cut`, :func:`judge_wall_rss`), the subprocess sections and the summary.

Sections (what each varies is in its function): offload (strategy.offload_states over ZeRO forms, optimizers,
clusters, commands), plan_allow (plan --allow offload with pins and constraints), moe (training.moe_routing,
moe_shared_expert_stream, moe_pad_to_capacity over MoE shapes), fp8 (strategy.fp8_param_gather), tree (collective
tree / auto over rank counts, cluster shapes), deepspeed (offload keys' values), torchtitan (enable_cpu_offload),
fields (every spec field without an earlier fuzz test, 20+ values each), check (Assertions), generic (the generic
workload's fields), yaml (structure: anchors, nesting, duplicate keys, huge files).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scalemodel.cli import main  # noqa: E402

WALL_S = 300
CPU_S = 20

Case = tuple[str, list[str], tuple[Path, ...]]
#: the dense and MoE command bases of the later corpora (fuzz37, fuzz38, fuzzpin38, fuzz39) and plan's short JSON
#: tail, written once here for them
DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]
MOE = ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64"]
TOP = ["--top", "2", "--json"]


class Hang(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """A case is a hang past CPU_S seconds of CPU (SIGPROF) or `seconds` of wall clock (SIGALRM, for a blocked read):
    the machine is shared, so wall time alone would call a slow neighbour a hang."""
    def boom(signum, frame):  # type: ignore[no-untyped-def]
        raise Hang(f"over {CPU_S} s of CPU" if signum == signal.SIGPROF else f"over {seconds} s of wall clock")

    old = signal.signal(signal.SIGALRM, boom), signal.signal(signal.SIGPROF, boom)
    t0, c0 = time.monotonic(), time.process_time()
    outer_wall = signal.setitimer(signal.ITIMER_REAL, seconds)[0]  # an enclosing guard's (a test's) timers, resumed
    outer_cpu = signal.setitimer(signal.ITIMER_PROF, CPU_S)[0]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])
        if outer_wall:
            signal.setitimer(signal.ITIMER_REAL, max(outer_wall - (time.monotonic() - t0), 0.001))
        if outer_cpu:
            signal.setitimer(signal.ITIMER_PROF, max(outer_cpu - (time.process_time() - c0), 0.001))


def _no_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def _bad_floats(obj: object, where: str = "") -> list[str]:
    if isinstance(obj, float) and not math.isfinite(obj):
        return [where or "<root>"]
    if isinstance(obj, dict):
        return [w for k, v in obj.items() for w in _bad_floats(v, f"{where}.{k}")]
    if isinstance(obj, list):
        return [w for i, v in enumerate(obj) for w in _bad_floats(v, f"{where}[{i}]")]
    return []


def _negatives(obj: object, where: str = "") -> list[str]:
    """Paths (list indices folded to []) of the negative numbers in a JSON document."""
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj < 0:
        return [where]
    if isinstance(obj, dict):
        return [w for k, v in obj.items() for w in _negatives(v, f"{where}.{k}")]
    if isinstance(obj, list):
        return [w for v in obj for w in _negatives(v, f"{where}[]")]
    return []


#: where a negative number was seen in --json output: path -> (count, an example command)
NEGATIVES: dict[str, list] = {}  # type: ignore[type-arg]

_NAN_WORD = re.compile(r"(?<![A-Za-z_])(nan|NaN|-?inf|Infinity)(?![A-Za-z_])")


_LAST = [""]


def run_case(argv: list[str], inputs: tuple[Path, ...] = ()) -> tuple[str | None, float, int]:
    """Run one case; (the finding or None, CPU seconds, exit status)."""
    before = {p: p.read_bytes() for p in inputs if p.is_file()}
    out, err = io.StringIO(), io.StringIO()
    code = -1
    t0 = time.process_time()
    finding = None
    try:
        with _alarm(WALL_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang as exc:
        finding = f"hang: {exc}"
    except BaseException as exc:  # noqa: BLE001 (a finding, whatever it is)
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        finding = f"traceback: {type(exc).__name__}: {str(exc)[:160]} at {Path(tb.filename).name}:{tb.lineno}"
    cpu = time.process_time() - t0
    o, e = out.getvalue(), err.getvalue()
    if finding is None:
        lines = e.strip().splitlines()
        if code not in (0, 1, 2):
            finding = f"exit {code}"
        elif "Traceback" in e:
            finding = "traceback text on stderr"
        elif code == 2:
            if not lines or not lines[-1].startswith("error: ") or len(lines) != 1:
                finding = f"exit 2 without one error line: {e[-200:]!r}"
            elif o:
                finding = f"exit 2 with stdout: {o[:100]!r}"
        elif "--json" in argv and o:
            try:
                doc = json.loads(o, parse_constant=_no_constant)
                bad = _bad_floats(doc)
                for w in _negatives(doc):
                    NEGATIVES.setdefault(w, [0, " ".join(argv)[:200]])[0] += 1
                if bad:
                    finding = f"non-finite float in JSON at {bad[:3]}"
            except ValueError as exc:
                finding = f"invalid JSON: {exc}"
        elif o and _NAN_WORD.search(o):
            finding = f"nan/inf in the table: {_NAN_WORD.search(o).group(0)!r}"  # type: ignore[union-attr]
        if finding is None and cpu > 10:
            finding = f"slow: {cpu:.1f} s of CPU"
    for p, data in before.items():
        if p.read_bytes() != data:
            finding = (finding + "; " if finding else "") + f"{p.name} changed"
    _LAST[0] = e.strip().splitlines()[-1] if e.strip() else ""
    if finding is not None:
        finding += f" | stderr: {e.strip().splitlines()[-1][:200] if e.strip() else ''}"
    return finding, cpu, code


# --- the corpus ---------------------------------------------------------------------------------------------------

HOSTILE_TEXT = ["", " ", "NONE", "None", "null", "~", "optimizer,params", "optimizer+", "+", "optimizer+params+x",
                "OPTIMIZER", "cpu", "nvme", "true", "false", "0", "1", "2", "-1", "1e308", ".nan", ".inf", "[]", "{}",
                "[optimizer]", "{a: 1}", "optimizer\u200b", "optimizer\u202e", "opt\x00imizer", "x" * 5000,
                "optimizer params", "zero-infinity", "all", "params", "\u00fcptimizer", "'optimizer'"]
HOSTILE_BOOL = ["true", "false", "yes", "no", "on", "1", "0", "2", "-1", "", "null", "~", "[]", "{}", "tru",
                ".nan", "1e308", "'true'", "True", "TRUE", "x" * 3000, "true\u202e"]
HOSTILE_NUM = ["0", "-0", "1", "-1", "0.5", "-0.5", "1e-300", "5e-324", "1e308", "-1e308", "1e309", ".nan", ".inf",
               "-.inf", "1e999", "9" * 400, "-" + "9" * 400, "true", "null", "", "[]", "{}", "'1'", "1_000",
               "0x10", "0o10", "1:30", "2**64", str(2**63), str(2**64 + 1), "1 GB/s", "1 us", "abc"]

BASE_DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]
BASE_MOE = ["-m", "deepseek-v3", "-c", "dgx-h100", "-n", "256", "--ep", "8", "--pp", "8"]


def sec_offload(tmp: Path) -> Iterator[Case]:
    for v in HOSTILE_TEXT:
        for cmd in ("predict", "memory"):
            yield "offload.text", [cmd, *BASE_DENSE, "--zero", "3", "--set", f"strategy.offload_states={v}",
                                   "--json"], ()
    modes = ["none", "optimizer", "optimizer+params"]
    zeros = ["0", "1", "2", "3", "fsdp", "hsdp"]
    opts = ["adam", "adamw", "sgd", "lion", "adafactor", "muon"]
    clusters = ["dgx-h100", "dgx-a100", "gb200-nvl72", "tpu-v6e-pod", "dgx-b200"]
    for m in modes:
        for z in zeros:
            for o in opts:
                yield "offload.grid", ["predict", *BASE_DENSE, "--zero", z, "--set", f"strategy.offload_states={m}",
                                       "--set", f"training.optimizer={o}", "--json"], ()
            for c in clusters:
                yield "offload.cluster", ["memory", "-m", "llama3-70b", "-c", c, "-n", "8", "--zero", z,
                                          "--set", f"strategy.offload_states={m}", "--json"], ()
    for hb in ["0", "-1", "1e-30 GB/s", "1e30 TB/s", ".nan", ".inf", "null", "1 GB/s", "1 B/s", "1e300 B/s", "abc",
               "[]", "1e-300 GB/s", "5e-324 B/s"]:
        for m in modes[1:]:
            yield "offload.host_bw", ["predict", *BASE_DENSE, "--zero", "3", "--set", f"strategy.offload_states={m}",
                                      "--set", f"cluster.host_bandwidth={hb}", "--json"], ()
    # offload beside every other knob that touches the optimizer, the pipeline and recompute
    for extra in (["--pp", "2"], ["--pp", "4", "--schedule", "interleaved:2"], ["--tp", "8"], ["--recompute", "full"],
                  ["--precision", "fp8"], ["--precision", "fp32"], ["--precision", "fp4"], ["--micro-batch", "64"],
                  ["--global-batch", "1"], ["--global-batch", "100000000"], ["--dp-comm", "ps:2"],
                  ["--compression", "topk:0.01"], ["--sync", "local:4"], ["--sync", "asp"], ["--sync", "backup:2"],
                  ["--set", "strategy.optimizer_bytes_per_param=0"], ["--set", "training.optimizer_bytes_per_param=0"],
                  ["--set", "training.optimizer_bytes_per_param=1e30"], ["--set", "strategy.overlap_param_gather=true"],
                  ["--set", "strategy.fsdp_defer_grad_sync=true"], ["--set", "strategy.fsdp_per_param=true"],
                  ["--set", "strategy.shard_group=2"], ["--set", "strategy.offload_tensors=[qkv_proj]"],
                  ["-n", "1"], ["-n", "100000"], ["--seq-len", "1"], ["--seq-len", "1048576"]):
        for m in modes[1:]:
            for z in ("2", "3", "fsdp"):
                yield "offload.extra", ["predict", *BASE_DENSE, "--zero", z, "--set", f"strategy.offload_states={m}",
                                        *extra, "--json"], ()
    for m in modes[1:]:
        for cmd in (["scale", *BASE_DENSE[:4], "--gpus", "8,16,64"], ["sensitivity", *BASE_DENSE]):
            yield "offload.cmds", [*cmd, "--zero", "3", "--set", f"strategy.offload_states={m}", "--json"], ()


def sec_plan_allow(tmp: Path) -> Iterator[Case]:
    base = ["plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "8", "-k", "3", "--json"]
    for allow in ["offload", "offload,offload", "offload,", ",offload", " offload", "OFFLOAD", "offload,all",
                  "offload,moe-dispatch,cp-exchanges", "offloads", "offload\u200b", "offload;compression",
                  "all,offload", "offload," * 200]:
        yield "plan.allow", [*base, "--allow", allow], ()
    for c in ["offload_states=optimizer", "offload_states=optimizer+params", "offload_states=none",
              "offload_states<=optimizer", "offload_states=x", "offload_states=", "offload_states==optimizer",
              "zero=0", "zero=1", "zero=fsdp", "tp=8", "pp=8", "memory<=1GB", "memory<=1e30 GB", "memory<=-1 GB"]:
        yield "plan.constraint", [*base, "--allow", "offload", "--constraint", c], ()
    for s in ["strategy.offload_states=optimizer", "strategy.offload_states=optimizer+params",
              "cluster.host_bandwidth=0", "cluster.host_bandwidth=1e-30 GB/s", "cluster.host_bandwidth=null",
              "training.optimizer=sgd", "training.optimizer=lion", "strategy.zero=0",
              "cluster.host_bandwidth=1e300 TB/s"]:
        yield "plan.set", [*base, "--allow", "offload", "--set", s], ()
        yield "plan.set_noallow", [*base, "--set", s], ()
    for cluster in ["tpu-v6e-pod", "dgx-a100-40g", "gb200-nvl72"]:
        for n in ["1", "2", "7", "8"]:
            yield "plan.cluster", ["plan", "-m", "llama3-70b", "-c", cluster, "-n", n, "-k", "2", "--allow", "offload",
                                   "--json"], ()
    for obj in ["time-to-train", "throughput"]:
        yield "plan.objective", [*base, "--allow", "offload", "--objective", obj, "--train-tokens", "1B"], ()
    yield "plan.pareto", [*base, "--allow", "offload", "--pareto", "--train-tokens", "1B"], ()
    yield "plan.huge", ["plan", "-m", "gpt-1t", "-c", "dgx-h100", "-n", "8", "-k", "2", "--allow", "offload",
                        "--json"], ()


def sec_moe(tmp: Path) -> Iterator[Case]:
    models = [["-m", "deepseek-v3", "-n", "256", "--ep", "8", "--pp", "8"], ["-m", "mixtral-8x7b", "-n", "64",
                                                                              "--ep", "8"],
              ["-m", "mixtral-8x7b", "-n", "8", "--ep", "8"], ["-m", "deepseek-v3", "-n", "64", "--ep", "64"]]
    routings = ["random", "cyclic", "CYCLIC", "", "round-robin", "null", "cyclic\u202e", "1", "[]"]
    for mdl in models:
        for r in routings:
            yield "moe.routing", ["predict", "-c", "dgx-h100", *mdl, "--set", f"training.moe_routing={r}",
                                  "--json"], ()
    # cyclic routing over hostile MoE shapes: experts, top_k, shared experts, ep
    for experts, topk in [(1, 1), (2, 1), (2, 2), (8, 8), (8, 9), (3, 2), (7, 3), (256, 1), (256, 256), (1024, 8),
                          (65536, 8), (9, 8), (8, 0), (0, 0), (-1, 1), (8, -1)]:
        for ep in ("1", "2", "8", "64"):
            for r in ("cyclic", "random"):
                yield "moe.shape", ["predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64", "--ep", ep,
                                    "--set", f"model.moe.experts={experts}", "--set", f"model.moe.top_k={topk}",
                                    "--set", f"training.moe_routing={r}", "--json"], ()
    for dispatcher in [[], ["--set", "strategy.moe_allgather_dispatcher=true"],
                       ["--set", "strategy.moe_flex_dispatcher=true"],
                       ["--set", "strategy.moe_flex_dispatcher=true", "--set", "strategy.moe_flex_backend=hybridep"],
                       ["--set", "strategy.moe_flex_dispatcher=true", "--set", "strategy.moe_flex_backend=ncclep"],
                       ["--set", "strategy.moe_a2a_overlap=true"]]:
        for r in ("cyclic",):
            for n, ep in (("16", "16"), ("24", "8"), ("72", "72"), ("144", "72"), ("256", "256")):
                for c in ("dgx-h100", "gb200-nvl72"):
                    yield "moe.dispatch", ["predict", "-m", "deepseek-v3", "-c", c, "-n", n, "--ep", ep,
                                           "--set", f"training.moe_routing={r}",
                                           *dispatcher, "--json"], ()
    for v in HOSTILE_BOOL:
        for mdl in (["-m", "deepseek-v3", "-n", "64", "--ep", "8"], ["-m", "mixtral-8x7b", "-n", "8", "--ep", "8"],
                    ["-m", "llama3-8b", "-n", "8"]):
            yield "moe.stream", ["predict", "-c", "dgx-h100", *mdl, "--set", f"strategy.moe_shared_expert_stream={v}",
                                 "--json"], ()
    for other in ("strategy.moe_shared_expert_overlap=true", "strategy.moe_a2a_overlap=true",
                  "training.moe_pad_to_capacity=true", "training.moe_routing=cyclic", "strategy.layer_impl=xla",
                  "strategy.layer_impl=megatron_te", "model.moe.shared_experts=0", "model.moe.shared_experts=64",
                  "model.moe.shared_expert_ffn=0", "--recompute=selective",
                  "strategy.recompute_modules=[shared_experts]"):
        flag = ["--recompute", "selective"] if other.startswith("--") else ["--set", other]
        if other.startswith("strategy.recompute"):
            flag = ["--recompute", "selective", "--set", other]
        for cmd in ("predict", "memory"):
            yield "moe.stream_combo", [cmd, "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "64", "--ep", "8",
                                       "--set", "strategy.moe_shared_expert_stream=true", *flag, "--json"], ()
    for imb in ["0", "0.5", "1", "1.25", "8", "1e9", ".nan", "-1"]:
        yield "moe.pad", ["predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64", "--ep", "8",
                          "--set", "training.moe_pad_to_capacity=true", "--set", f"training.moe_rank_imbalance={imb}",
                          "--set", "training.moe_routing=cyclic", "--json"], ()
    for cmd in ("plan", "scale"):
        args = ["-m", "mixtral-8x7b", "-c", "dgx-h100", "--set", "training.moe_routing=cyclic",
                "--set", "strategy.moe_shared_expert_stream=true", "--json"]
        yield "moe.cmds", [cmd, *args, *(["-n", "64", "-k", "2"] if cmd == "plan" else ["--gpus", "8,64,512",
                                                                                        "--ep", "8"])], ()


def sec_fp8(tmp: Path) -> Iterator[Case]:
    for v in HOSTILE_BOOL:
        yield "fp8.values", ["predict", *BASE_DENSE, "--zero", "1", "--precision", "fp8",
                             "--set", f"strategy.fp8_param_gather={v}", "--json"], ()
    for z in ("0", "1", "2", "3", "fsdp", "hsdp"):
        for p in ("bf16", "fp8", "fp4", "fp32", "fp16", "tf32"):
            for recipe in ("", "delayed", "tensorwise", "mxfp8", "blockwise"):
                extra = ["--set", f"training.fp8_recipe={recipe}"] if recipe else []
                yield "fp8.grid", ["predict", *BASE_DENSE, "--zero", z, "--precision", p,
                                   "--set", "strategy.fp8_param_gather=true", *extra, "--json"], ()
    for cmd in ("memory", "sensitivity"):
        yield "fp8.cmds", [cmd, *BASE_DENSE, "--zero", "1", "--precision", "fp8",
                           "--set", "strategy.fp8_param_gather=true", "--json"], ()
    yield "fp8.plan", ["plan", *BASE_DENSE, "--precision", "fp8", "-k", "2", "--set",
                       "strategy.fp8_param_gather=true", "--json"], ()


def _cluster_yaml(tmp: Path, name: str, tiers: list[tuple[str, int]], gpn: int) -> Path:
    p = tmp / f"{name}.yaml"
    lines = ["kind: cluster", f"name: {name}", "accelerator: h100-sxm", f"gpus_per_node: {gpn}", "tiers:"]
    for tname, span in tiers:
        lines.append(f"  - {{name: {tname}, span: {span}, bandwidth: 100 GB/s, latency: 2 us, efficiency: 0.8}}")
    p.write_text("\n".join(lines) + "\n")
    return p


def sec_tree(tmp: Path) -> Iterator[Case]:
    shapes = {"t2": ([("nv", 8), ("ib", 1 << 20)], 8), "t3": ([("nv", 8), ("leaf", 32), ("spine", 1 << 20)], 8),
              "odd": ([("nv", 6), ("leaf", 18), ("spine", 18 << 16)], 6), "one": ([("nv", 1), ("ib", 1 << 20)], 1),
              "t5": ([("a", 2), ("b", 6), ("c", 18), ("d", 54), ("e", 54 << 14)], 2),
              "prime": ([("nv", 7), ("ib", 7 << 17)], 7), "flat": ([("ib", 1 << 20)], 1),
              "odd2": ([("nv", 6), ("leaf", 42), ("spine", 42 * 7 * 1000)], 6)}
    files = {k: _cluster_yaml(tmp, k, t, g) for k, (t, g) in shapes.items()}
    ranks = ["1", "2", "3", "5", "6", "7", "9", "21", "28", "63", "127", "129", "1000", "1023", "1025", "65535",
             "999999", "1048576"]
    for f in files.values():
        for n in ranks:
            for algo in ("tree", "auto", "ring", "hierarchical", "rhd"):
                yield "tree.collective", ["collective", "-c", str(f), "-n", n, "--op", "allreduce", "--algo", algo,
                                          "--size", "1 MiB", "--json"], (f,)
    for n in ranks:
        for op in ("allreduce", "reduce", "broadcast", "allgather", "reducescatter", "alltoall"):
            yield "tree.op", ["collective", "-c", "dgx-h100", "-n", n, "--op", op, "--algo", "tree", "--size", "1 B",
                              "--json"], ()
    for size in ["0", "1", "1 B", "-1", "1e30", "1 EiB", "0.5 B", ".nan"]:
        yield "tree.size", ["collective", "-c", "dgx-h100", "-n", "28", "--algo", "tree", "--size", size, "--json"], ()
    for n in ("6", "12", "18", "28", "36", "100", "126", "252", "10000"):
        for k in ("odd", "odd2", "t5", "prime"):
            yield "tree.predict", ["predict", "-m", "llama3-8b", "-c", str(files[k]), "-n", n, "--algo", "tree",
                                   "--json"], (files[k],)


def _write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def sec_deepspeed(tmp: Path) -> Iterator[Case]:
    values = ["null", "[]", "{}", '"cpu"', "1", "true", '{"device": "cpu"}', '{"device": "CPU"}',
              '{"device": "Cpu "}', '{"device": "nvme"}', '{"device": "none"}', '{"device": null}', '{"device": 1}',
              '{"device": ["cpu"]}', '{"device": "cpu", "pin_memory": "yes"}', '{"device": "cpu", "ratio": 2}',
              '{"device": "cpu", "ratio": -1}', '{"device": "cpu", "ratio": 0}', '{"device": "cpu", "ratio": NaN}',
              '{"device": "cpu", "ratio": 1e999}', '{"device": "cpu", "buffer_count": -1}',
              '{"device": "cpu", "super_offload": "true"}', '{"device": "cpu", "super_offload": true}',
              '{"device": "cpu", "super_offload": 1}', '{"device": "cpu", "fast_init": []}',
              '{"device": "cpu", "device": "nvme"}', '{"device": "cpu\\u202e"}', '{"device": "c\\u0000pu"}',
              '{"device": "auto"}', '{"device": "$DEV"}', '{"device": "cpu", "cpuadam_cores_perc": 2}',
              '{"device": "' + "c" * 5000 + '"}']
    stages = ["0", "1", "2", "3", '"3"', "null", "-1", "4", "3.0", "true"]
    optim = ['', ', "optimizer": {"type": "Adam"}', ', "optimizer": {"type": "Lion"}',
             ', "optimizer": {"type": "OneBitAdam"}', ', "optimizer": {"type": null}', ', "optimizer": []',
             ', "optimizer": {"type": "AdamW", "params": {"lr": NaN}}']
    i = 0
    for v in values:
        for key in ("offload_optimizer", "offload_param"):
            for stage in ("1", "3"):
                i += 1
                f = _write(tmp, f"ds{i}.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                           f'"zero_optimization": {{"stage": {stage}, "{key}": {v}}}}}')
                yield "ds.value", ["predict", *BASE_DENSE, "--strategy", str(f), "--json"], (f,)
    for stage in stages:
        for o in optim:
            i += 1
            f = _write(tmp, f"ds{i}.json", '{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                       f'"zero_optimization": {{"stage": {stage}, "offload_optimizer": {{"device": "cpu"}}, '
                       f'"offload_param": {{"device": "cpu"}}}}{o}}}')
            yield "ds.stage", ["predict", *BASE_DENSE, "--strategy", str(f), "--json"], (f,)
    for n in ("1", "8", "16", "1024"):
        for cmd in ("memory", "plan", "scale"):
            i += 1
            f = _write(tmp, f"ds{i}.json", '{"train_batch_size": 16, "zero_optimization": {"stage": 3, '
                       '"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}')
            extra = ["-n", n] if cmd != "scale" else ["--gpus", n]
            yield "ds.cmds", [cmd, "-m", "llama3-8b", "-c", "dgx-h100", *extra, "--strategy", str(f), "--json"], (f,)
    # the offload key at the top level, under a wrong parent, twice, and nested deeply
    for body in ['{"offload_optimizer": {"device": "cpu"}}',
                 '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, '
                 '"offload_optimizer": {"device": "none"}}}',
                 '{"zero_optimization": {"stage": 3, "zero_optimization": {"offload_param": {"device": "cpu"}}}}',
                 '{"zero_optimization": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}",
                 '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "nvme_path": "/x"}}}',
                 '{"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}',
                 '{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}',
                 '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, '
                 '"optimizer": {"type": "Adagrad"}}',
                 '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, '
                 '"fp16": {"enabled": true}}',
                 '{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, '
                 '"zero_allow_untested_optimizer": true, "optimizer": {"type": "SGD"}}']:
        i += 1
        f = _write(tmp, f"ds{i}.json", body)
        yield "ds.shape", ["predict", *BASE_DENSE, "--strategy", str(f), "--json"], (f,)


def sec_torchtitan(tmp: Path) -> Iterator[Case]:
    vals = ["true", "false", '"true"', "1", "0", "[]", "{}", "inf", "nan", '"yes"', "2024-01-01", '""']
    i = 0
    for v in vals:
        for fsdp in ("1", "-1", "2", "8", "16"):
            for extra in ("", "\ntensor_parallel_degree = 2", "\npipeline_parallel_degree = 2"):
                i += 1
                f = _write(tmp, f"tt{i}.toml", f"[training]\nlocal_batch_size = 1\nenable_cpu_offload = {v}\n"
                           f"[parallelism]\ndata_parallel_shard_degree = {fsdp}{extra}\n")
                yield "tt.offload", ["predict", *BASE_DENSE, "--strategy", str(f), "--json"], (f,)
    for body in ["[training]\nenable_cpu_offload = true\nenable_cpu_offload = false\n",
                 "[training]\nenable_cpu_offload = true\n[optimizer]\nname = 'Lion'\n",
                 "[training]\nenable_cpu_offload = true\n[optimizer]\nname = 'SGD'\n",
                 "[training]\nenable_cpu_offload = true\n[parallelism]\ndata_parallel_replicate_degree = 2\n",
                 "[training]\nenable_cpu_offload = true\n[parallelism]\ndata_parallel_shard_degree = 1\n"
                 "data_parallel_replicate_degree = 16\n",
                 "[training.enable_cpu_offload]\nx = 1\n", "training = {enable_cpu_offload = true}\n"]:
        i += 1
        f = _write(tmp, f"tt{i}.toml", body)
        for cmd in ("predict", "memory"):
            yield "tt.shape", [cmd, *BASE_DENSE, "--strategy", str(f), "--json"], (f,)


# every spec field no fuzz/hostile test names (scalemodel/specs at bc48a503), with the path --set reaches it by
STRATEGY_BOOLS = ["moe_shared_expert_overlap", "moe_allgather_dispatcher", "align_grad_reduce",
                  "grad_accumulation_fusion", "align_param_gather", "fsdp_defer_grad_sync", "attention_unpad",
                  "moe_fp8_padding", "moe_permute_fusion", "pp_scatter_gather", "eager_glu_clamp", "eager_expert_bias"]
WORKLOAD_FIELDS = ["tied_embeddings", "biases", "norm_biases", "parallel_block", "dropout"]
CLUSTER_FIELDS = ["host_bandwidth", "node_power", "parameter_server", "step_overhead", "host_cpu"]
TIER_FIELDS = ["topology", "transport", "mtu", "registration_reuse"]


def sec_fields(tmp: Path) -> Iterator[Case]:
    for f in STRATEGY_BOOLS:
        for v in HOSTILE_BOOL:
            for base in (BASE_DENSE, ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "16", "--ep", "8", "--pp", "2"]):
                yield "fields.strategy", ["predict", *base, "--zero", "fsdp" if "fsdp" in f else "1",
                                          "--set", f"strategy.{f}={v}", "--json"], ()
    for f in ("train_samples", "critical_batch"):
        for v in HOSTILE_NUM:
            yield "fields.training", ["predict", *BASE_DENSE, "--set", f"training.{f}={v}", "--json"], ()
            yield "fields.training.plan", ["plan", *BASE_DENSE, "-k", "1", "--objective", "time-to-train",
                                           "--set", f"training.{f}={v}", "--json"], ()
    for f in ("moe_pad_to_capacity",):
        for v in HOSTILE_BOOL:
            yield "fields.training", ["predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "16", "--ep", "8",
                                      "--set", f"training.{f}={v}", "--json"], ()
    for f in WORKLOAD_FIELDS:
        for v in HOSTILE_BOOL + HOSTILE_NUM[:20]:
            yield "fields.model", ["predict", *BASE_DENSE, "--set", f"model.{f}={v}", "--json"], ()
            yield "fields.model.mem", ["memory", *BASE_DENSE, "--set", f"model.{f}={v}", "--json"], ()
    for f in ("host_bandwidth", "node_power", "step_overhead"):
        for v in HOSTILE_NUM + ["1 W", "1e30 W", "-5 W", "1 ms", "-1 ms", "1e30 s", "1 kW", "0 W", "0 s"]:
            yield "fields.cluster", ["predict", *BASE_DENSE, "--set", f"cluster.{f}={v}", "--json"], ()
    for v in HOSTILE_NUM[:22] + ["{bandwidth: 1 GB/s}", "{servers: 0}", "{bandwidth: -1 GB/s, latency: 1 us}",
                                 "{bandwidth: 0 GB/s}", "{nic: 1}", "{bandwidth: .nan}"]:
        yield "fields.ps", ["predict", *BASE_DENSE, "--dp-comm", "ps:2", "--set", f"cluster.parameter_server={v}",
                            "--json"], ()
        yield "fields.host_cpu", ["predict", *BASE_DENSE, "--zero", "3", "--set", "strategy.offload_states=optimizer",
                                  "--set", f"cluster.host_cpu={v}", "--json"], ()
    for v in ["intel", "amd", "arm", "power", "other", "AMD", "x86", ""]:
        for n in ("8", "16", "24", "64"):
            yield "fields.host_cpu3", ["collective", "-c", "dgx-h100", "-n", n, "--set", f"cluster.host_cpu={v}",
                                       "--json"], ()
    for f in ("nic_bandwidth", "memory_bandwidth", "partition_bytes", "shard_imbalance"):
        for v in HOSTILE_NUM[:22] + ["1 GB/s", "0 GB/s", "1e30 TB/s", "1 B", "1 EiB", "0 B", "0.5", "1e6", "1e7"]:
            for ps in ("ps:1", "ps:4", "ps:4:colocated", "ps:1000"):
                yield "fields.ps2", ["predict", *BASE_DENSE, "--dp-comm", ps,
                                     "--set", f"cluster.parameter_server.{f}={v}", "--json"], ()
    for v in ["{cores: 0}", "{cores: -1}", "{cores: 1e9}", "{adam_rate: 0}", "{adam_rate: -1}", "{x: 1}", "{}",
              "{cores: .nan}", "{cores: 1.5}", "{name: x}"]:
        yield "fields.host_cpu2", ["predict", *BASE_DENSE, "--zero", "3", "--set", "strategy.offload_states=optimizer",
                                   "--set", f"cluster.host_cpu={v}", "--json"], ()
    for f in TIER_FIELDS:
        for v in HOSTILE_NUM[:24] + ["fat-tree", "torus", "ring", "dragonfly", "rail", "ib", "roce", "tcp", "efa",
                                    "nvlink", "1500 B", "9000", "4 KiB", "-1 B", "0 B", "1e30 B"]:
            yield "fields.tier", ["predict", *BASE_DENSE, "--set", f"cluster.tiers.ib-leaf.{f}={v}", "--json"], ()
            yield "fields.tier.coll", ["collective", "-c", "dgx-h100", "-n", "64",
                                       "--set", f"cluster.tiers.ib-leaf.{f}={v}", "--json"], ()
    for v in HOSTILE_NUM + ["700 W", "0 W", "-1 W", "1e30 W"]:
        yield "fields.tdp", ["predict", *BASE_DENSE, "--set", f"cluster.accelerator.tdp={v}", "--json"], ()


def sec_check(tmp: Path) -> Iterator[Case]:
    i = 0
    for field, vals in (("min_mfu", ["0", "1", "1.5", "-0.1", ".nan", ".inf", "1e-300", "50%", "'0.3'", "[]"]),
                        ("min_tokens_per_s", ["0", "-1", "1e308", ".inf", ".nan", "1M", "1e999", "abc", "[]"]),
                        ("max_time_to_train", ["0", "-1 d", "1 d", "1e308 s", ".inf", "30 days", "1 ms", "abc",
                                               "1e999 s", "[]"])):
        for v in vals:
            i += 1
            f = _write(tmp, f"sc{i}.yaml", "kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\n"
                       "gpus: [16, 32]\ntraining: {train_tokens: 1e9}\n" f"assertions:\n  {field}: {v}\n")
            yield "check.assert", ["check", str(f), "--json"], (f,)


def sec_generic(tmp: Path) -> Iterator[Case]:
    for f in ("flops_per_sample", "backward_factor", "activation_bytes_per_sample", "input_bytes_per_sample",
              "time_per_sample"):
        for v in HOSTILE_NUM + ["1 GB", "1 ms", "-1 ms", "1 TFLOP", "0 s"]:
            yield "generic", ["predict", "-m", "inception-v3", "-c", "dgx-a100", "-n", "16", "--set", f"model.{f}={v}",
                              "--json"], ()


def sec_yaml(tmp: Path) -> Iterator[Case]:
    strat_bodies = {
        "laughs": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, "
            f"*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}]\n"
            for k in range(8)) + "strategy: {offload_states: optimizer, zero: 3}\n",
        "dup": "strategy:\n  offload_states: optimizer\n  offload_states: none\n  zero: 3\n",
        "deep": "strategy: " + "[" * 10000 + "]" * 10000 + "\n",
        "deepmap": "strategy: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        "alias_value": "x: &o optimizer\nstrategy: {offload_states: *o, zero: 3}\n",
        "merge": "base: &b {offload_states: optimizer}\nstrategy: {<<: *b, zero: 3}\n",
        "merge_list": "base: &b {offload_states: optimizer}\nstrategy: {<<: [*b, *b], zero: 3}\n",
        "tag": "strategy: {offload_states: !!python/object/apply:os.system [echo], zero: 3}\n",
        "binary": "strategy: {offload_states: !!binary b3B0aW1pemVy, zero: 3}\n",
        "set": "strategy: {offload_states: !!set {optimizer: null}, zero: 3}\n",
        "int_key": "strategy: {1: optimizer, zero: 3}\n",
        "bool_key": "strategy: {true: optimizer, zero: 3}\n",
        "null_key": "strategy: {~: optimizer, zero: 3}\n",
        "complex_key": "strategy: {? [a, b] : optimizer, zero: 3}\n",
        "two_docs": "strategy: {zero: 3}\n---\nstrategy: {offload_states: optimizer}\n",
        "top_list": "- strategy: {zero: 3}\n",
        "top_scalar": "optimizer\n",
        "empty": "",
        "comment": "# nothing\n",
        "bom": "\ufeffstrategy: {zero: 3, offload_states: optimizer}\n",
        "utf16": "strategy: {zero: 3}\n",
        "moe_cyclic": "training: {moe_routing: cyclic}\nstrategy: {moe_shared_expert_stream: true}\n",
        "both_levels": "offload_states: optimizer\nstrategy: {offload_states: none, zero: 3}\n",
        "tabs": "strategy:\n\tzero: 3\n",
        "cr_only": "strategy:\r  zero: 3\r  offload_states: optimizer\r",
        "huge_int": "strategy: {zero: 3, shard_group: " + "9" * 100000 + "}\n",
        "huge_float": "strategy: {zero: 3, shard_group: 1e" + "9" * 5000 + "}\n",
        "long_line": "strategy: {zero: 3}\n#" + "x" * 10_000_000 + "\n",
    }
    for name, body in strat_bodies.items():
        p = tmp / f"st_{name}.yaml"
        if name == "utf16":
            p.write_bytes(body.encode("utf-16"))
        else:
            p.write_text(body)
        for cmd in ("predict", "memory"):
            yield "yaml.strategy", [cmd, *BASE_DENSE, "--strategy", str(p), "--json"], (p,)
    big = tmp / "big.yaml"
    with big.open("w") as fh:
        fh.write("strategy: {zero: 3}\n")
        fh.write(("#" + "y" * 1000 + "\n") * 100_000)  # ~100 MB
    yield "yaml.100MB", ["predict", *BASE_DENSE, "--strategy", str(big), "--json"], (big,)
    loop = tmp / "loop.yaml"
    with contextlib.suppress(FileExistsError):
        os.symlink(loop, loop)
    fifo = tmp / "fifo.yaml"
    with contextlib.suppress(FileExistsError):
        os.mkfifo(fifo)
    for special in (str(loop), str(fifo), "/dev/zero", "/dev/null", str(tmp), "/proc/self/mem", "/dev/stdin"):
        for opt in (["--strategy", special], ["-m", special], ["-c", special]):
            base = [a for a in BASE_DENSE]
            if opt[0] in base:
                base[base.index(opt[0]) + 1] = special
                yield "yaml.special", ["predict", *base, "--json"], ()
            else:
                yield "yaml.special", ["predict", *base, *opt, "--json"], ()
    big.unlink()


NEW_FIELDS = {"offload_states": ["optimizer", "optimizer+params", "none", "bogus", "", 1, None, [], "OPTIMIZER"],
              "moe_shared_expert_stream": [True, False, "yes", 2, None, "x"],
              "fp8_param_gather": [True, False, 2, None, "x"],
              "moe_routing": ["cyclic", "random", "Cyclic", 1, None]}


def _yaml_value(v: object) -> str:
    return json.dumps(v)


def sec_files(tmp: Path) -> Iterator[Case]:
    """The session-35 fields in sweep files, scenario files and calibrate runs files (YAML and CSV)."""
    i = 0
    for field, values in NEW_FIELDS.items():
        for v in values:
            for zero in ('"3"', '"1"', "fsdp"):
                i += 1
                sweep = _write(tmp, f"sw{i}.yaml", "kind: sweep\nname: s\nmodels: [llama3-8b, mixtral-8x7b]\n"
                               "clusters: [dgx-h100]\ngpus: [8, 16]\nstrategies:\n  - best\n"
                               f"  - {{label: a, zero: {zero}, ep: 8, {field}: {_yaml_value(v)}}}\n"
                               "training: {global_batch: 64, precision: fp8}\n")
                yield "files.sweep", ["sweep", str(sweep), "--json"], (sweep,)
                i += 1
                scen = _write(tmp, f"sc{i}.yaml", "kind: scenario\nname: s\nmodel: mixtral-8x7b\ncluster: dgx-h100\n"
                              "gpus: [8, 16]\n" + (
                                  f"strategy: {{zero: {zero}, ep: 8}}\n"
                                  f"training: {{precision: fp8, moe_routing: {_yaml_value(v)}}}\n"
                                  if field == "moe_routing" else
                                  f"strategy: {{zero: {zero}, ep: 8, {field}: {_yaml_value(v)}}}\n"
                                  "training: {precision: fp8}\n"))
                yield "files.scenario", ["scale", "--scenario", str(scen), "--json"], (scen,)
                i += 1
                runs = _write(tmp, f"runs{i}.yaml", "".join(
                    f"- {{cluster: dgx-h100, model: mixtral-8x7b, gpus: {g}, ep: 8, zero: {zero}, "
                    f"{field}: {_yaml_value(v)}, step_time: {t}}}\n" for g, t in ((8, "40 s"), (16, "21 s"),
                                                                                 (32, "11 s"))))
                yield "files.runs", ["calibrate", "runs", str(runs), "--json"], (runs,)
            i += 1
            cell = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            csvf = _write(tmp, f"runs{i}.csv", f"cluster,model,gpus,ep,zero,{field},step_time\n" + "".join(
                f'dgx-h100,mixtral-8x7b,{g},8,3,"{cell}",{t}\n' for g, t in ((8, 40), (16, 21), (32, 11))))
            yield "files.runs_csv", ["calibrate", "runs", str(csvf), "--json"], (csvf,)


def sec_megatron(tmp: Path) -> Iterator[Case]:
    base = "torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --micro-batch-size 1 --bf16 "
    flags = ["--fp8-param-gather", "--fp8-param-gather --use-distributed-optimizer",
             "--fp8-param-gather --use-distributed-optimizer --fp8-format hybrid",
             "--fp8-param-gather=1", "--fp8-param-gather true", "--fp8-param-gather --fp8-format e4m3 "
             "--use-distributed-optimizer --fp8-param-gather", "--fp8-param-gather --use-torch-fsdp2",
             "--fp8-param-gather --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params",
             "--moe-shared-expert-overlap --fp8-param-gather", "--optimizer-cpu-offload",
             "--optimizer-cpu-offload --optimizer-offload-fraction 0.5 --use-distributed-optimizer",
             "--optimizer-cpu-offload --optimizer-offload-fraction 1.0 --use-distributed-optimizer",
             "--optimizer-offload-fraction 2", "--cpu-offloading --cpu-offloading-num-layers 4",
             "--fp8-param-gather --fp8-format hybrid --use-distributed-optimizer --overlap-param-gather"]
    for i, fl in enumerate(flags):
        f = _write(tmp, f"meg{i}.sh", base + fl + "\n")
        yield "megatron", ["predict", *BASE_DENSE, "--strategy", str(f), "--json"], (f,)


def _field_values(prop: dict) -> list[str]:  # type: ignore[type-arg]
    """Values worth trying for one schema property: its enum, both booleans, small and edge integers."""
    opts = prop.get("anyOf", [prop])
    out: list[str] = []
    for o in opts:
        if "enum" in o:
            out += [str(v) for v in o["enum"]]
        elif o.get("type") == "boolean":
            out += ["true", "false"]
        elif o.get("type") == "integer":
            lo = o.get("minimum", o.get("exclusiveMinimum", -1) + 1)
            out += [str(v) for v in (lo, lo + 1, 2, 3, 4, 8, 7, 64) if v >= lo and v <= o.get("maximum", 10**9)]
        elif o.get("type") == "number":
            lo, hi = o.get("minimum", 0), o.get("maximum", o.get("exclusiveMaximum", 2e3) / 2)
            out += [str(v) for v in (lo, hi, (lo + hi) / 2)]
        elif o.get("type") == "null":
            out.append("null")
    return out


COMBO_BASES = [["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"], ["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"],
               ["-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64"], ["-m", "deepseek-v3", "-c", "gb200-nvl72",
                                                                      "-n", "256"],
               ["-m", "llama3-8b", "-c", "tpu-v6e-pod", "-n", "16"], ["-m", "gpt3-175b", "-c", "dgx-a100", "-n", "128"],
               ["-m", "mixtral-8x7b", "-c", "dgx-b200", "-n", "16"]]
SESSION35 = {"strategy": ["offload_states", "moe_shared_expert_stream", "fp8_param_gather", "fsdp_defer_grad_sync",
                          "fsdp_per_param", "layer_impl"],
             "training": ["moe_routing", "moe_pad_to_capacity", "optimizer"]}


def sec_combo(tmp: Path, count: int = int(os.environ.get("FUZZ36_COMBO", "1500")),
              seed: int = int(os.environ.get("FUZZ36_SEED", "36"))) -> Iterator[Case]:
    """Random combinations of valid field values (the schemas' enums, booleans and small integers), each with one of
    the session-35 fields, over dense, MoE, TPU and Blackwell bases: engine paths no hand-written case reaches."""
    import random

    schema = json.loads((ROOT / "schemas" / "scenario.schema.json").read_text())["$defs"]
    pools = {sec: {f: _field_values(p) for f, p in schema[name]["properties"].items() if _field_values(p)}
             for sec, name in (("strategy", "StrategySpec"), ("training", "TrainingSpec"))}
    for drop in ("dp", "seq_len", "global_batch", "cp_a2a_size", "stage_layers"):
        for pool in pools.values():
            pool.pop(drop, None)
    rng = random.Random(seed)
    for _ in range(count):
        base = rng.choice(COMBO_BASES)
        sec = rng.choice(list(SESSION35))
        picks = [(sec, rng.choice(SESSION35[sec]))]
        for _k in range(rng.randint(2, 7)):
            s2 = rng.choice(["strategy", "training"])
            picks.append((s2, rng.choice(list(pools[s2]))))
        sets = ["--set", f"strategy.zero={rng.choice(['1', '2', '3', 'fsdp', 'hsdp', '0'])}",
                "--set", f"training.precision={rng.choice(['bf16', 'fp8', 'fp8', 'fp4'])}"]
        for s2, f in picks:
            sets += ["--set", f"{s2}.{f}={rng.choice(pools[s2][f])}"]
        cmd = rng.choice(["predict", "predict", "predict", "memory"])
        yield "combo", [cmd, *base, *sets, "--json"], ()


SECTIONS: dict[str, Callable[[Path], Iterator[Case]]] = {
    "offload": sec_offload, "plan_allow": sec_plan_allow, "moe": sec_moe, "fp8": sec_fp8, "tree": sec_tree,
    "deepspeed": sec_deepspeed, "torchtitan": sec_torchtitan, "fields": sec_fields, "check": sec_check,
    "generic": sec_generic, "yaml": sec_yaml, "files": sec_files, "megatron": sec_megatron,
    "combo": sec_combo}


class Outcome(NamedTuple):
    """One case's run, as the driver's judges see it: exit status, CPU and wall seconds, the peak memory it added
    (ru_maxrss, KiB) and the last stderr line."""
    code: int
    cpu: float
    wall: float
    grown_kb: int
    last: str


#: a judge: (the case's argv, its outcome) -> a finding or None; run on a case :func:`run_case` found nothing in
Judge = Callable[[list[str], Outcome], "str | None"]
#: a section run outside :func:`run_case` (subprocesses: fuzz37's paths, fuzz38's proc): tmp -> (cases, findings)
Runner = Callable[[Path], tuple[int, list[str]]]

#: an error line whose ``what`` errors.InputError.message cut (``what[:297] + "..."``) before its "; allowed"
_CUT = re.compile(r"[^.]\.\.\.; ")


def judge_cut(argv: list[str], out: Outcome) -> str | None:
    """errors.InputError.message cuts a ``what`` past 300 characters: the rest of the sentence is lost (fuzz37)."""
    if out.code == 2 and _CUT.search(out.last):
        return f"message cut at 300 characters: {out.last[:200]}"
    return None


def judge_wall_rss(wall_s: float, rss_kb: int) -> Judge:
    """A case over ``wall_s`` seconds of wall clock or ``rss_kb`` KiB of new peak memory is a finding (fuzzpin38)."""
    def judge(argv: list[str], out: Outcome) -> str | None:
        if out.wall > wall_s:
            return f"slow: {out.wall:.1f} s of wall clock"
        if out.grown_kb > rss_kb:
            return f"memory: peak grew {out.grown_kb // 1024} MiB"
        return None
    return judge


def drive(name: str, doc: str, sections: dict[str, Callable[[Path], Iterator[Case]]],
          runners: dict[str, Runner] | None = None, judges: tuple[Judge, ...] = (),
          argv: list[str] | None = None) -> int:
    """The one reporting driver of the fuzz corpora (fuzz36, fuzz37, fuzz38, fuzzpin38, fuzz39): options --only,
    --verbose, --text, --list; each case of ``sections`` run by :func:`run_case`, then each of ``judges`` on a case
    it passed; ``runners`` (subprocess sections) after them, unless --list. A finding is printed as ``FINDING
    [label] argv`` and its text; the negative numbers seen in --json output, then one summary line. Exit status 1
    when anything was found."""
    runners = runners or {}
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=sorted([*sections, *runners]), help="run these sections only")
    ap.add_argument("--verbose", action="store_true",
                    help="print every case's exit status, wall seconds and last stderr line")
    ap.add_argument("--text", action="store_true", help="run every case without --json (the tables' renderers)")
    ap.add_argument("--list", action="store_true", help="print the cases, run none")
    args = ap.parse_args(argv)
    n = found = 0
    cpu_total = 0.0
    codes: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for sec in args.only or [*sections, *runners]:
            if sec in runners:
                if args.list:
                    continue
                count, findings = runners[sec](tmp)
                n += count
                found += len(findings)
                for f in findings:
                    print(f"FINDING [{sec}] {f}", flush=True)
                continue
            for label, case, inputs in sections[sec](tmp):
                n += 1
                if args.text:
                    case = [a for a in case if a != "--json"]
                if args.list:
                    print(label, " ".join(case)[:300])
                    continue
                rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                t0 = time.monotonic()
                finding, cpu, code = run_case(case, inputs)
                out = Outcome(code, cpu, time.monotonic() - t0,
                              resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0, _LAST[0])
                for judge in judges:
                    if finding is None:
                        finding = judge(case, out)
                cpu_total += cpu
                codes[code] = codes.get(code, 0) + 1
                if args.verbose:
                    print(code, f"{out.wall:.1f}s", " ".join(case)[:200], "|", out.last[:240], flush=True)
                if finding:
                    found += 1
                    print(f"FINDING [{label}] {' '.join(case)[:300]}\n    {finding}", flush=True)
    for w, (count, example) in sorted(NEGATIVES.items()):
        print(f"negative: {w} x{count} e.g. {example}")
    print(f"{name}: {n} cases, {found} findings, exit statuses {dict(sorted(codes.items()))}, "
          f"{cpu_total:.0f} s of CPU")
    return 1 if found else 0


def main_() -> int:
    return drive("fuzz36", __doc__, SECTIONS)


if __name__ == "__main__":
    raise SystemExit(main_())
