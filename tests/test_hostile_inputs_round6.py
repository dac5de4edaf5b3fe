"""Hostile-input round 6: framework launch files, nccl-tests and training logs, runs files, ``~USER`` paths.

Each case is one finding of the round-6 fuzz pass (a traceback, a wrong value accepted silently, a
misleading message or a negative zero in the output); the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import refused

NOUSER = "~no-such-user-round6"


@pytest.mark.parametrize("args", [
    ["predict", "-c", f"{NOUSER}/c.yaml", "-m", "gpt-1.7b", "-n", "8"],
    ["predict", "-c", "dgx-h100", "-m", f"{NOUSER}/config.json", "-n", "8"],
    ["memory", "-c", "dgx-h100", "-m", NOUSER, "-n", "8"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", f"{NOUSER}/megatron.sh"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={NOUSER}/a.yaml"],
])
def test_unknown_user_in_a_path_is_one_line(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """``~USER`` of a user that does not exist: Path.expanduser raised RuntimeError (a traceback)."""
    refused(cli, *args, "--json", match="no such user")


def test_unknown_user_in_files_that_name_other_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"kind: sweep\nmodels: ['{NOUSER}/m.yaml']\nclusters: [dgx-h100]\ngpus: [8]\n")
    refused(cli, "sweep", str(sweep), "-j", "1", "--json", inputs=(sweep,), match="no such user")
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"- {{cluster: '{NOUSER}/c.yaml', model: gpt-1.7b, gpus: 8, step_time: 1 s}}\n")
    refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,), match="no such user")
    scenario = tmp_path / "cap.yaml"
    scenario.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16]\n"
                        "assertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(scenario), "--set", f"model={NOUSER}/m.yaml", "--json", inputs=(scenario,),
            match="no such user")


@pytest.mark.parametrize("extra", [["-n", "8,16", "--micro-batch", "100000000"],
                                   ["-n", "16,32", "--micro-batch", "100000000", "--mode", "strong"]])
def test_scale_global_batch_beyond_a_spec_is_one_line(cli, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The derived global batch (dp x micro-batch, grown with N in weak mode) past 1e9: was a SpecError traceback
    from the TrainingSpec copy of each point."""
    refused(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", *extra, "--json", match="--global-batch")


def test_scale_from_a_strategy_file_with_a_huge_micro_batch(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "megatron.sh"
    f.write_text("--micro-batch-size 99999999\n")
    refused(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64,128", "--strategy", str(f), "--json",
            inputs=(f,), match="at most 1e+09 sequences")
