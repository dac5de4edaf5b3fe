"""review26d of tidy26: the refusal of a field given both by its option and by ``--set`` (9f5ce49a)."""
from __future__ import annotations

import pytest
from conftest import ROOT


def test_a_switch_beside_its_set_is_named_as_given(cli) -> None:  # type: ignore[no-untyped-def]
    """``--sequence-parallel`` takes no value: the refusal named it ``--sequence-parallel True`` (Python's bool), an
    option the command line cannot hold. It names the switch as written."""
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--sequence-parallel",
            "--set", "strategy.sequence_parallel=false")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set strategy.sequence_parallel: --sequence-parallel and --set "
                             "strategy.sequence_parallel=false both set strategy.sequence_parallel; one of them "
                             "(--sequence-parallel or --set strategy.sequence_parallel)"), r.err


@pytest.mark.parametrize("command, args", [
    ("predict", ["-n", "64"]),
    ("sensitivity", ["-n", "64"]),
    ("plan", ["-n", "64", "--top", "1"]),
    ("scale", ["--gpus", "64,128"]),
    ("check", [str(ROOT / "examples" / "scenarios" / "strong-scaling.yaml")]),
])
def test_straggler_cv_beside_its_set_is_refused(cli, command: str, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """README: a field given both by its option and by ``--set`` is refused. ``--straggler-cv`` is the cluster's
    ``variability.cv`` ("default: the cluster's"), and beside ``--set cluster.variability.cv=0.3`` it was taken
    without a word (predict's straggler term 2.14 s at cv 0.1 either way, 8.50 s at 0.3 alone)."""
    model = [] if command == "check" else ["-m", "gpt-1.7b", "-c", "dgx-h100"]
    r = cli(command, *model, *args, "--straggler-cv", "0.1", "--set", "cluster.variability.cv=0.3")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set cluster.variability.cv: --straggler-cv 0.1 and --set "
                             "cluster.variability.cv=0.3 both set the cluster's variability.cv; one of them "
                             "(--straggler-cv or --set cluster.variability.cv)"), r.err


def test_straggler_cv_beside_another_variability_field_is_taken(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "64", "--straggler-cv", "0.1", "--set",
            "cluster.variability.dist=normal", "--json")
    assert r.code == 0, r.err


def test_scales_no_switch_beside_its_set_is_named_as_given(cli) -> None:  # type: ignore[no-untyped-def]
    """scale takes the pair --sequence-parallel / --no-sequence-parallel (False an explicit choice there): the refusal
    named ``--no-sequence-parallel`` as ``--sequence-parallel False``."""
    r = cli("scale", "-m", "gpt-1.7b", "-c", "dgx-h100", "--gpus", "8,16", "--no-sequence-parallel", "--set",
            "strategy.sequence_parallel=true")
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == ("error: --set strategy.sequence_parallel: --no-sequence-parallel and --set "
                             "strategy.sequence_parallel=true both set strategy.sequence_parallel; one of them "
                             "(--no-sequence-parallel or --set strategy.sequence_parallel)"), r.err
