"""Hostile input, round 40 (fuzz40): what this round's corpus found. The CLI contract is test_hostile_inputs.py's:
exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is allowed, nothing on stdout,
no input changed.

The corpus is scripts/fuzz40.py (fuzz36's in-process harness, through the one reporting driver ``fuzz36.drive``).
Findings:

1. A Megatron-LM launch's ``--overlap-param-gather-with-optimizer-step`` (store_true, megatron/training/arguments.py
   L3150 at d98e8a64dd) was warned as a setting not used and the run priced without it, though strategy
   overlap_param_gather_with_optimizer_step prices it since session 39: now read as that field (so also refused with
   a ``--no-`` form, and warned as not priced where the model does not act on it, off the interleaved schedule).
2. A switch that some ZeRO stage runs, refused at zero 0 (fsdp_per_param, offload_states, fp8_param_gather, ...), said
   "(got zero '0', the default) ...; zero is 0 unless given: give zero too (--zero or --set strategy.zero)" where zero
   0 WAS given: ``--zero 0``, ``--set strategy.zero=0``, a strategy file's, a scenario's or a runs file's ``zero: 0``
   (found in the optstep section, whose every case sets zero). The loader now takes the default and the hint back
   where the refused field's mapping writes zero (specs.base.written_zero_refusal), and the refusal no longer asks
   plan or a file's reader to give zero (InputError.needs_zero false).
3. A folder given where a built-in scenario or cluster is named (``scale --scenario dd``, ``-c dd``) was "'dd' is a
   file, but read as a built-in ... name; ./dd to read it as a ... file", and ./dd is then refused as a directory.
4. ``plan --set strategy.main_grad_hook=true`` (session 39's NeMo 1 O2 hook) ranked FSDP and ZeRO-3 plans with the
   hook on, each one predict refuses (StrategySpec: the hook runs on neither another trainer nor sharded
   parameters); ``--constraint zero=3`` beside it searched them. It joins engine.planner.ZERO_SWITCHES (zero 0, 1, 2),
   as the other switches some stages run do: plan searches those stages and says so, and a zero constraint outside
   them is refused.
5. Sweep's --out files were written one by one: a later one that could not be written left the earlier ones
   replaced, exit 2 (now report.output.write_files: every temporary first, then every rename).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

BIG = ["-m", "llama3-70b", "-c", "dgx-h100", "-n", "64"]  # Llama 3 70B: 80 layers (its config.json)
#: a Megatron-LM launch at pp 4 with 10 layers a virtual stage (80 / (4 x 10): interleaved V 2), the distributed
#: optimizer and both overlaps: what megatron/training/arguments.py validate_args asks of the switch (L1066-1074)
LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --num-layers 80 "
          "--num-layers-per-virtual-pipeline-stage 10 --micro-batch-size 1 --bf16 --use-distributed-optimizer "
          "--overlap-grad-reduce --overlap-param-gather")
SWITCH = "--overlap-param-gather-with-optimizer-step"


def _predict(cli, *args: str) -> tuple[dict, str]:  # type: ignore[no-untyped-def, type-arg]
    r = cli("predict", *BIG, *args, "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    return json.loads(r.out), r.err


def test_launch_optimizer_step_gather_read_as_the_field(cli, tmp_path: Path) -> None:
    with_switch = tmp_path / "on.sh"
    with_switch.write_text(f"{LAUNCH} {SWITCH}\n")
    without = tmp_path / "off.sh"
    without.write_text(f"{LAUNCH}\n")
    read, err = _predict(cli, "--strategy", str(with_switch))
    assert SWITCH not in err, err  # was: "megatron settings not used: --overlap-param-gather-with-optimizer-step"
    assert read["inputs"]["strategy"]["overlap_param_gather_with_optimizer_step"] is True
    # the launch without the switch, the field set by --set: the same run by the field's own route
    by_field, _ = _predict(cli, "--strategy", str(without), "--set",
                           "strategy.overlap_param_gather_with_optimizer_step=true")
    plain, _ = _predict(cli, "--strategy", str(without))
    assert read["step_time_s"] == by_field["step_time_s"]
    assert read["step_time_s"] != plain["step_time_s"]  # the field moves this run (chunk 0 unbucketed): not a no-op


def test_launch_optimizer_step_gather_off_interleaving_warned_not_priced(cli, tmp_path: Path) -> None:
    f = tmp_path / "flat.sh"  # pp 4, no virtual stages: Megatron-LM asserts interleaving for the switch
    f.write_text(LAUNCH.replace(" --num-layers-per-virtual-pipeline-stage 10", "") + f" {SWITCH}\n")
    read, err = _predict(cli, "--strategy", str(f))
    assert "overlap_param_gather_with_optimizer_step = true is not priced" in err and "1f1b" in err, err
    plain, _ = _predict(cli, "--strategy", str(f), "--set", "strategy.overlap_param_gather_with_optimizer_step=false")
    assert read["step_time_s"] == plain["step_time_s"]


@pytest.mark.parametrize("negation", ["--no-overlap-param-gather-with-optimizer-step",
                                      "--disable-overlap-param-gather-with-optimizer-step"])
def test_launch_optimizer_step_gather_with_a_negation_refused(cli, tmp_path: Path, negation: str) -> None:
    f = tmp_path / "neg.sh"
    f.write_text(f"{LAUNCH} {SWITCH} {negation}\n")
    line = refused(cli, "predict", *BIG, "--strategy", str(f), inputs=(f,), match=f"{SWITCH} and {negation}")
    assert f"Megatron-LM has {SWITCH}, not {negation}" in line, line


def test_fuzz40_corpus_lists_every_section_through_the_one_driver() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz40.py"), "--list"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    labels = {line.split(" ", 1)[0].split(".", 1)[0] for line in r.stdout.splitlines()[:-1] if line[:1].isalpha()}
    assert {"allow", "hook", "optstep", "losstok", "negation", "cmds"} <= labels, labels
    assert r.stdout.strip().splitlines()[-1].startswith("fuzz40: ")


DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]
_NEEDS = "true needs PyTorch FSDP2: zero fsdp or hsdp"


@pytest.mark.parametrize("given", [["--zero", "0"], ["--set", "strategy.zero=0"], ["--set", "strategy.zero='0'"]])
def test_zero_given_as_0_is_not_called_the_default(cli, given: list[str]) -> None:
    for cmd in (["predict", *DENSE], ["memory", *DENSE], ["scale", *DENSE[:4], "--gpus", "8,16"]):
        line = refused(cli, *cmd, *given, "--set", "strategy.fsdp_per_param=true",
                       match="error: --set strategy.fsdp_per_param: ")
        assert line.endswith(f"{_NEEDS} (got zero '0'); false (the default) with zero 0, 1, 2 or 3; true with zero "
                             "fsdp or hsdp"), line
    if given[0] == "--set":  # plan has no --zero: its pin is --set strategy.zero
        line = refused(cli, "plan", *DENSE, *given, "--set", "strategy.fsdp_per_param=true", "--top", "1")
        assert "(got zero '0');" in line and "give zero too" not in line, line


def test_zero_not_given_still_named_the_default_with_the_options(cli) -> None:
    line = refused(cli, "predict", *DENSE, "--set", "strategy.fsdp_per_param=true")
    assert "(got zero '0', the default)" in line and line.endswith(
        "zero is 0 unless given: give zero too (--zero or --set strategy.zero)"), line
    # plan, zero not pinned, still searches the stages that run the switch (the refusal's marker kept)
    r = cli("plan", *DENSE, "--set", "strategy.fsdp_per_param=true", "--top", "1", "--json")
    assert r.code == 0 and json.loads(r.out)["ranked"][0]["strategy"]["zero"] in ("fsdp", "hsdp"), r.err


@pytest.mark.parametrize(("name", "text"), [
    ("s.yaml", "kind: strategy\nzero: 0\nfsdp_per_param: true\n"),
    ("sc.yaml", "kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\ngpus: [8]\n"
                "strategy: {zero: 0, fsdp_per_param: true}\n"),
    ("runs.yaml", "- {cluster: dgx-h100, model: llama3-8b, gpus: 8, zero: 0, fsdp_per_param: true, step_time: 4 s}\n"
                  "- {cluster: dgx-h100, model: llama3-8b, gpus: 16, zero: fsdp, step_time: 2 s}\n")])
def test_a_files_zero_0_is_not_called_the_default(cli, tmp_path: Path, name: str, text: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    cmd = {"s.yaml": ["predict", *DENSE, "--strategy", str(f)], "sc.yaml": ["check", str(f)],
           "runs.yaml": ["calibrate", "runs", str(f)]}[name]
    line = refused(cli, *cmd, inputs=(f,), match=str(f))
    assert f"{_NEEDS} (got zero '0');" in line and "give zero too" not in line, line
    # the same file without its zero line: the default, and the hint
    f.write_text(text.replace("zero: 0, ", "").replace("zero: 0\n", ""))
    line = refused(cli, *cmd, inputs=(f,))
    assert "(got zero '0', the default)" in line and "give zero too" in line, line


def test_sweep_outs_are_all_written_or_none(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sweep = tmp_path / "s.yaml"
    sweep.write_text("kind: sweep\nname: s\nmodels: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                     "strategies:\n  - {zero: 1}\n")
    first = tmp_path / "ok.csv"
    first.write_text("the previous table\n")
    monkeypatch.chdir(tmp_path)
    refused(cli, "sweep", str(sweep), "--out", str(first), "--out", "/proc/self/x.csv", inputs=(sweep,),
            match="error: --out: cannot write '/proc/self/x.csv'")
    assert first.read_text() == "the previous table\n"  # a refused command leaves the earlier --out as it was


@pytest.mark.parametrize(("cmd", "kind"), [(["scale", "--scenario", "dd"], "scenario"), (["check", "dd"], "scenario"),
                                           (["predict", "-m", "llama3-8b", "-c", "dd", "-n", "8"], "cluster")])
def test_a_folder_named_as_a_builtin_is_called_a_folder(cli, tmp_path: Path, monkeypatch, cmd: list[str],
                                                        kind: str) -> None:  # type: ignore[no-untyped-def]
    # was "'dd' is a file, but read as a built-in scenario name ...; ./dd to read it as a scenario file", and ./dd
    # is then refused as a directory
    (tmp_path / "dd").mkdir()
    monkeypatch.chdir(tmp_path)
    line = refused(cli, *cmd, match=f"error: {kind}: 'dd' is a folder, and no built-in {kind} has that name; ")
    assert "./dd" not in line, line



def test_plan_with_the_main_grad_hook_pinned_ranks_only_stages_it_runs_at(cli) -> None:
    r = cli("plan", *DENSE, "--set", "strategy.main_grad_hook=true", "--top", "5", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    ranked = [p["strategy"] for p in doc["ranked"]]
    assert ranked and all(s["zero"] in ("0", "1", "2") and s["main_grad_hook"] for s in ranked), ranked
    assert any("the pinned main_grad_hook true cannot run at zero 3, fsdp or hsdp" in w for w in doc["warnings"])
    # the winner runs as predict prices it (predict refuses the hook at zero 3 / fsdp / hsdp)
    best = ranked[0]
    p = cli("predict", *DENSE, "--zero", best["zero"], "--tp", str(best["tp"]), "--pp", str(best["pp"]),
            "--set", "strategy.main_grad_hook=true", "--json")
    assert p.code == 0, p.err
    for zero in ("3", "fsdp", "hsdp"):
        refused(cli, "plan", *DENSE, "--set", "strategy.main_grad_hook=true", "--constraint", f"zero={zero}",
                "--top", "1", match="zero is also constrained by the pinned main_grad_hook")
    # unpinned (false), the sharded stages stay searched
    r = cli("plan", *DENSE, "--set", "strategy.main_grad_hook=false", "--top", "3", "--json")
    assert r.code == 0 and {p["strategy"]["zero"] for p in json.loads(r.out)["ranked"]} & {"3", "fsdp", "hsdp"}
