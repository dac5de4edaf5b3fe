"""Hostile-input round 28: the leftovers of round 27 (a rule across two fields written in two places, ``--set
...extends=``, the aws-ofi-p5 tuner on a cluster with an ICI tier) and what this round's fuzzing found. The CLI
contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and
what is allowed, nothing on stdout, no input changed.

The corpus, each case in-process under a CPU / wall-clock guard (2,812 cases, ~90 more by hand in processes):
1,092 option values (Unicode digits, NUL, bidi controls, subnormals, 2**32+1, '1_000', '0.1%', '8,8', 1e400, nan,
inf, -1) on every option of predict, sensitivity, memory, scale, plan, collective and stragglers; 539 `calibrate
runs` sets (1 run, identical runs, 0 / negative / nan / inf / 1e300 / 1e-300 times and tokens/s, bad names, GPUs,
logs that are directories, /dev/zero, missing) and sweeps (24,000-point products, 3,000 strategies, alias bombs,
5,000-deep nesting) and plan constraints that exclude everything; 329 extreme-but-valid --set values (1 bit/s, 1e30
FLOP/s, 1e6 s latency, 1 layer, 1e8 vocab) checked for nan / inf / negative output; 264 DeepSpeed JSON, HF
config.json, Megatron-LM launch, torchtitan TOML and strategy YAML files (duplicate keys, NaN, 5,000-digit ints,
merge keys, python tags, dates, sets, binary, multi-document); 190 nccl-tests logs and -J JSON; 143 sweep / hardware
/ schema cases; 133 stragglers samples and every command with --json; 122 capacity-scenario assertions. By hand:
stdout a full disk, closed or a closed pipe; --out an input by every spelling, through extends and a cluster's
accelerator file, a FIFO; COLUMNS; option spellings; shell completion with a 1 MB word.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

PREDICT = ["predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64"]


# --- a rule across two fields: one in the --strategy file, the other on the command line ------------------------------
# `--strategy f.yaml --zero 3` over the file's `megatron_ddp: true` was refused at the file's field alone ("--strategy:
# f.yaml: strategy.megatron_ddp: true needs ... zero 0 or 1 (got zero '3')"): the option that made the conflict was
# not named. Now the option (or --set item) comes first and the file's field after it; a field given on the command
# line over the other one in the file names the file's field too (commands.common._across).

@pytest.mark.parametrize("file_text, option, said", [
    ("strategy:\n  megatron_ddp: true\n  zero: 1\n", ["--zero", "3"],
     ["error: --zero: --strategy: ", "s.yaml: strategy.megatron_ddp: true needs Megatron-Core's DDP", "got zero '3'",
      "true with zero 0 or 1"]),
    ("strategy:\n  fsdp_reshard_after_forward: false\n  zero: 3\n", ["--zero", "1"],
     ["error: --zero: --strategy: ", "s.yaml: strategy.fsdp_reshard_after_forward: false needs the parameters sharded",
      "got zero '1'", "false with zero 3, fsdp or hsdp"]),
    ("strategy:\n  megatron_ddp: true\n", ["--set", "strategy.zero=3"],
     ["error: --set strategy.zero: --strategy: ", "s.yaml: strategy.megatron_ddp: true needs", "got zero '3'"]),
    ("strategy:\n  nanotron_trainer: true\n", ["--zero", "2"],
     ["error: --zero: --strategy: ", "s.yaml: strategy.nanotron_trainer: true runs nanotron's trainer", "zero 0 or 1"]),
    ("strategy:\n  recompute_layers: 2\n  recompute: full\n", ["--recompute", "selective"],
     ["error: --recompute: --strategy: ", "s.yaml: strategy.recompute_layers: recompute_layers=2 needs recompute: "
      "full (got 'selective')", "leave it out for selective or none"]),
    ("strategy:\n  zero: 1\n", ["--set", "strategy.fsdp_reshard_after_forward=false"],
     ["error: --set strategy.fsdp_reshard_after_forward: false needs the parameters sharded", "got zero '1'",
      "strategy.zero from --strategy: ", "s.yaml: strategy.zero;"]),
])
def test_a_rule_across_the_file_and_the_command_line_names_both(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                file_text: str, option: list[str],
                                                                said: list[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(file_text)
    line = refused(cli, *PREDICT, "--strategy", str(f), *option, inputs=(f,))
    assert line.startswith(said[0]) and all(s in line for s in said[1:]), line


def test_both_fields_on_the_command_line_name_each_once(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *PREDICT, "--zero", "3", "--set", "strategy.megatron_ddp=true")
    assert line.startswith("error: --set strategy.megatron_ddp: true needs") and "got zero '3'" in line, line
    assert "from --zero" not in line and "--strategy" not in line, line


def test_both_fields_in_the_file_are_named_at_the_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  megatron_ddp: true\n  zero: 3\n")
    line = refused(cli, *PREDICT, "--strategy", str(f))
    assert line.startswith(f"error: --strategy: {f}: strategy.megatron_ddp: true needs"), line


# --- --set ...extends= ------------------------------------------------------------------------------------------------
# `--set cluster.extends=dgx-a100` was "unknown key 'extends'; known keys: sources, kind, name, ..." though a cluster
# file writes extends: the spec it names is read and merged before any --set applies. Now it says so, and what to
# give instead: the command's option (or the group's own --set) for another spec, --set X.<field> for one field.

@pytest.mark.parametrize("args, item, said", [
    (PREDICT, "cluster.extends=dgx-a100", ["error: --set cluster.extends: extends is resolved when the cluster is read",
                                           "--cluster NAME or FILE", "--set cluster.<field>=VALUE"]),
    (PREDICT, "model.extends=llama3-8b", ["error: --set model.extends: extends is resolved when the workload is read",
                                          "--model NAME or FILE", "--set model.<field>=VALUE"]),
    (PREDICT, "cluster.accelerator.extends=h200-sxm",
     ["error: --set cluster.accelerator.extends: extends is resolved when the accelerator is read",
      "--set cluster.accelerator=NAME or FILE", "--set cluster.accelerator.<field>=VALUE"]),
    (PREDICT, "accelerator.extends=h200-sxm",
     ["error: --set accelerator.extends: extends is resolved", "--set cluster.accelerator=NAME or FILE"]),
    (["check", "examples/capacity/gpt3-175b-dgx-h100.yaml"], "cluster.extends=dgx-a100",
     ["error: --set cluster.extends: extends is resolved when the cluster is read", "--set cluster=NAME or FILE"]),
    (["check", "examples/capacity/gpt3-175b-dgx-h100.yaml"], "model.extends=llama3-8b",
     ["error: --set model.extends: extends is resolved when the workload is read", "--set model=NAME or FILE"]),
    (["check", "examples/capacity/gpt3-175b-dgx-h100.yaml"], "extends=x",
     ["error: --set extends: extends is resolved when the scenario is read", "--set <field>=VALUE"]),
])
def test_set_extends_says_why_and_what_to_give(cli, args: list[str], item: str,  # type: ignore[no-untyped-def]
                                               said: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    args = [str(root / a) if a.startswith("examples/") else a for a in args]
    line = refused(cli, *args, "--set", item)
    assert line.startswith(said[0]) and all(s in line for s in said[1:]) and "unknown key" not in line, line


@pytest.mark.parametrize("item", ["training.extends=x", "strategy.extends=x", "cluster.tiers.0.extends=x"])
def test_extends_where_no_file_writes_it_is_an_unknown_key(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *PREDICT, "--set", item, match=f"error: --set {item.split('=')[0]}: unknown key 'extends'")


# --- the aws-ofi-p5 tuner on a cluster with an ICI tier ---------------------------------------------------------------
# An ICI (torus) tier under nccl_tuner aws-ofi-p5 was refused as "'aws-ofi-p5' on 8 h100-sxm accelerators a node
# (hopper): ... only on p5.48xlarge / p5e.48xlarge instances (8 H100 or H200 GPUs); ... or a cluster of 8 Hopper
# GPUs a node": 8 Hopper GPUs a node is what the cluster had. Now the cluster and its ici tier are named, and what is
# allowed excludes the tier.

@pytest.mark.parametrize("cluster, item, said", [
    ("aws-p5", "cluster.tiers.1.protocol=ici",
     ["error: --set cluster.tiers.1.protocol: nccl_tuner: 'aws-ofi-p5' on 8 h100-sxm accelerators a node (hopper) of "
      "cluster 'aws-p5', whose tier 'efa' (tiers[1]) is an ICI torus link (protocol ici)", "no tier of protocol ici"]),
    ("tpu-v5p-pod", "cluster.nccl_tuner=aws-ofi-p5",
     ["error: --set cluster.nccl_tuner: 'aws-ofi-p5' on 4 tpu-v5p accelerators a node (tpu) of cluster "
      "'tpu-v5p-pod', whose tier 'ici' (tiers[0]) is an ICI torus link", "'' (NCCL's own choice) on this cluster"]),
    ("aws-p5", "cluster.accelerator=a100-sxm-80g",
     ["error: --set cluster.accelerator: nccl_tuner: 'aws-ofi-p5' on 8 a100-sxm-80g accelerators a node (ampere) of "
      "cluster 'aws-p5': aws-ofi-nccl", "a cluster of 8 Hopper GPUs a node"]),
])
def test_the_p5_tuner_off_a_p5_names_the_cluster_and_tier(cli, cluster: str, item: str,  # type: ignore[no-untyped-def]
                                                         said: list[str]) -> None:
    line = refused(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "64", "--set", item)
    assert line.startswith(said[0]) and all(s in line for s in said[1:]) and "..." not in line, line


def test_the_p5_tuner_in_a_cluster_file_with_an_ici_tier(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "p5-ici.yaml"
    f.write_text("kind: cluster\nname: p5-ici\naccelerator: h100-sxm\ngpus_per_node: 8\nnccl_tuner: aws-ofi-p5\n"
                 "tiers:\n  - {name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8}\n"
                 "  - {name: torus, span: 4096, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.8, protocol: ici}\n")
    line = refused(cli, "hardware", "validate", str(f), inputs=(f,))
    assert line.startswith(f"error: {f}:5: nccl_tuner: 'aws-ofi-p5'") and "of cluster 'p5-ici', whose tier 'torus' " \
        "(tiers[1]) is an ICI torus link" in line, line



# --- plan: a --constraint the pinned strategy's own constraints exclude -----------------------------------------------
# A pinned trainer adds constraints of its own (megatron_ddp and nanotron_trainer: zero<=1; nanotron_trainer: cp=1):
# `plan --strategy run.sh --constraint zero=3` (a Megatron-LM launch pins megatron_ddp) was "--constraint: no zero
# meets zero=3, zero<=1 together", a zero<=1 the user never wrote. The pin that adds it is named, where it was written.

@pytest.mark.parametrize("file_text, constraint, said", [
    ("strategy:\n  megatron_ddp: true\n", "zero=3",
     ["error: --constraint: no zero meets zero=3, zero<=1 together: zero is also constrained by the pinned "
      "megatron_ddp (--strategy: ", "s.yaml: strategy.megatron_ddp)",
      "a constraint on zero that the pinned strategy allows"]),
    ("strategy:\n  nanotron_trainer: true\n", "cp=2",
     ["error: --constraint: no cp meets cp=2, cp=1 together: cp is also constrained by the pinned nanotron_trainer "
      "(--strategy: ", "s.yaml: strategy.nanotron_trainer)"]),
])
def test_plan_names_the_pin_that_excludes_a_constraint(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       file_text: str, constraint: str, said: list[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(file_text)
    line = refused(cli, "plan", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f),
                   "--constraint", constraint, "--json", inputs=(f,))
    assert line.startswith(said[0]) and all(s in line for s in said[1:]), line


def test_plan_names_a_set_pin_and_keeps_a_constraint_of_its_own(cli) -> None:  # type: ignore[no-untyped-def]
    """A --constraint on a field the --strategy file gives overrides the file's (commands.common.strategy_constraints);
    a --set pin does not."""
    refused(cli, "plan", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--set", "strategy.megatron_ddp=true",
            "--constraint", "zero=3", match="zero is also constrained by the pinned megatron_ddp (--set "
                                            "strategy.megatron_ddp)")
    line = refused(cli, "plan", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--constraint", "zero=3,zero=1")
    assert line == "error: --constraint: no zero meets zero=3, zero=1 together; constraints on zero that one of its " \
                   "values meets", line



# --- plan: a strategy file's degree written as a float ----------------------------------------------------------------
# `tp: 2.0` (YAML float; 2e0 too) is the integer 2 to every command that validates the file (predict, memory, scale),
# but plan turned the file's raw 2.0 into --constraint text and refused it alone: "--strategy: s.yaml: constraint
# 'tp=2.0' needs an integer; KEY OP VALUE with KEY one of ...". A degree of 2.5 is refused at the file's field by its
# reader, before (unchanged).

def test_plan_reads_an_integral_float_degree_as_the_other_commands_do(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 2.0\n  pp: 2e0\ntraining:\n  micro_batch: 1.0\n")
    ranked = accepted(cli, "plan", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "-k", "2",
                      "--strategy", str(f))["ranked"]
    assert ranked and all((r["strategy"]["tp"], r["strategy"]["pp"], r["strategy"]["micro_batch"]) == (2, 2, 1)
                          for r in ranked)


@pytest.mark.parametrize("command", [["plan"], ["scale", "--best"]])
def test_plan_refuses_a_fractional_degree_at_the_file_field(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                            command: list[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 2.5\n")
    refused(cli, *command, "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f), "--json",
            inputs=(f,), match=f"error: --strategy: {f}: strategy.tp: Input should be a valid integer, got a number "
                               "with a fractional part (got 2.5); an integer from 1 to 1e+09")



# --- an nccl-tests log whose every row is skipped ---------------------------------------------------------------------
# A log whose rows all have a time of 0 (or nan, or -1) was "no nccl-tests data rows found": the rows were found, and
# skipped; with some rows left the reader warns naming them (NcclLog.skipped_note), with none it said nothing of them.

@pytest.mark.parametrize("time", ["0.0", "nan", "-1", "inf"])
def test_an_nccl_log_of_skipped_rows_says_they_were_skipped(cli, tmp_path: Path, time: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "nccl.log"
    f.write_text("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n" + "".join(
        f"  {2 ** k}  {2 ** k // 4}  float  sum  -1  {time}  0.01  0.02  0  {time}  0.01  0.02  0\n"
        for k in range(10, 14)))
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--ranks", "8", "--json", inputs=(f,),
            match=f"error: {f}: no data row can be fitted: 4 row(s) skipped (line 2, line 3, line 4, line 5): a time "
                  "that is not a positive finite number of microseconds")


# --- stdout that cannot take the result ---------------------------------------------------------------------------
# `scalemodel predict ... > /dev/full` (a full disk) was an OSError traceback with exit 1, `... >&-` (stdout closed) an
# AttributeError traceback, and a table into a pipe closed early (`scalemodel hardware show dgx-h100 | head -c 10`)
# exit 1 from rich's own broken-pipe handler, where the CLI's rule (and a --json query's) is exit 0. Run as processes:
# the interpreter's own flush at exit is part of what is tested.

def _scalemodel(*args: str, stdout: int | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [["hardware", "show", "dgx-h100"], ["schema", "cluster"], [*PREDICT, "--json"]])
def test_a_full_stdout_is_one_error_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = _scalemodel(*args, stdout=full.fileno())
    assert (r.returncode, r.stderr) == (2, "error: stdout: cannot write the result: No space left on device; a stdout "
                                           "that takes it: a terminal, a pipe, or a file on a disk with space\n")


def test_a_closed_stdout_is_one_error_line() -> None:
    r = subprocess.run([sys.executable, "-c", "import os, sys; os.close(1); sys.stdout = None; "
                        "from scalemodel.cli import main; main(sys.argv[1:])", *PREDICT[1:]], stderr=subprocess.PIPE,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stderr) == (2, "error: stdout: closed: the result would go nowhere; run it with stdout "
                                           "open: a terminal, a pipe or a file (>/dev/null to discard it)\n")


@pytest.mark.parametrize("args", [["hardware", "show", "dgx-h100"], ["hardware", "list"], PREDICT,
                                  [*PREDICT, "--json"]])
def test_a_pipe_closed_early_ends_with_exit_0(args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # a reader gone before the first write (`| head -c 0`): every write is a broken pipe
    try:
        r = _scalemodel(*args, stdout=write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")
