"""ux30: an expert user's walkthrough of README.md's commands, as a capacity planner meets them: each --help names
every option's default and unit, the tables use the words the other commands and the docs use. Each test failed
before its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_docs import ROOT

from scalemodel.choices import Algorithm
from scalemodel.commands import calibrate, memory, predict, scale, sensitivity, stragglers
from scalemodel.commands.args import Command
from scalemodel.cost.algorithms import APPLICABLE
from scalemodel.engine.grid import GridResult
from scalemodel.report.sweep import render_sweep

#: Options that have no default to state: a file, the overrides, an output switch.
NO_DEFAULT = {"--strategy", "--set", "--json", "--csv", "--plot", "--scenario", "--best", "--objective",
              "--critical-batch", "--out"}


def _help_of(command: Command, flag: str) -> str:
    return next(o.help for o in command.options if flag in o.flags)


@pytest.mark.parametrize("command", [predict.COMMAND, scale.COMMAND, sensitivity.COMMAND], ids=lambda c: c.name)
def test_algo_help_names_every_algorithm_the_option_takes(command: Command) -> None:
    """`predict --help` offered 'auto|ring|tree|rhd|hierarchical' for --algo, while the option takes rd and direct
    too (choices.Algorithm; `--algo foo` answers with all seven)."""
    text = _help_of(command, "--algo")
    # the seven the option takes, written out (the docstring; an emptied Algorithm passed the loop before)
    assert sorted(Algorithm.labels()) == ["auto", "direct", "hierarchical", "rd", "rhd", "ring", "tree"]
    for label in Algorithm.labels():
        assert label in text.replace("|", " ").replace(",", " ").split(), label


@pytest.mark.parametrize("command", [predict.COMMAND, sensitivity.COMMAND, memory.COMMAND, scale.COMMAND],
                         ids=lambda c: c.name)
def test_every_strategy_option_states_its_default(command: Command) -> None:
    """`predict --help` listed --tp, --pp, --cp, --ep, --micro-batch, --zero, --recompute, --schedule, --precision,
    --overlap, --compression, --sync, --algo, --assignment, --work-cv and --train-tokens with no default: a planner
    could not tell what an option left out prices (the header shows TP 1, ZeRO 0, 1f1b, ...)."""
    missing = [o.flags[0] for o in command.options
               if o.flags[0].startswith("--") and o.flags[0] not in NO_DEFAULT and o.default in (None, "")
               and not o.required and "default" not in o.help.lower()]
    assert not missing


@pytest.mark.parametrize("flag, unit", [("--straggler-cv", "fraction"), ("--work-cv", "fraction"),
                                        ("--dispatch-overhead", "seconds")])
def test_strategy_options_state_their_unit(flag: str, unit: str) -> None:
    """A CV given as 5 (meaning 5 %) is a CV of 500 %: the help said 'coefficient of variation' and no unit; a bare
    --dispatch-overhead number is seconds, which the help did not say."""
    assert unit in _help_of(predict.COMMAND, flag)


def test_calibrate_help_lists_what_op_algo_and_factors_take() -> None:
    """`calibrate --help` said 'Collective, when the log does not say' and 'Algorithm the model uses for the fit'
    with no allowed values, and named two of the factors --factors takes."""
    text = " ".join(o.help for o in calibrate.COMMAND.options)
    for op in APPLICABLE:
        assert op in _help_of(calibrate.COMMAND, "--op")
    for algo in APPLICABLE["allreduce"]:
        assert algo in _help_of(calibrate.COMMAND, "--algo")
    for factor in ("compute", "compute:fp8", "bandwidth:TIER", "overlap", "overhead_s"):
        assert factor in _help_of(calibrate.COMMAND, "--factors"), factor
    assert "0.25 = 25%" in text  # --tolerance is a fraction


def test_memory_and_stragglers_help_state_units() -> None:
    assert "fraction of model states plus activations" in _help_of(memory.COMMAND, "--fragmentation")
    assert "bytes" in _help_of(memory.COMMAND, "--workspace")
    assert "seconds" in _help_of(stragglers.COMMAND, "--samples")


def _row(**over: Any) -> dict[str, Any]:
    row = {"model": "mixtral-8x7b", "cluster": "dgx-h100", "gpus": 64, "strategy": "best", "status": "ok",
           "step_time_s": 1.5, "tokens_per_s_per_gpu": 1000.0, "mfu": 0.4, "memory_per_gpu_bytes": 6e10,
           "fits": True, "dp": 8, "tp": 2, "pp": 2, "cp": 2, "ep": 4}
    return {**row, **over}


def test_sweep_best_row_names_the_layout_as_plan_does(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep's searched row read 'best: tp2 pp2 dp8': a third spelling of the layout (plan and predict write 'DP 8
    x TP 2 x PP 2'), and it left out the winner's CP 2 and EP 4, so two different plans printed alike."""
    monkeypatch.setenv("COLUMNS", "200")  # one line a row
    result = GridResult(inputs={"name": "t"}, rows=[_row(), _row(cp=1, ep=1, dp=16)], elapsed_s=1.0,
                        backend="local processes", workers=1, cpu_s=1.0)
    render_sweep(result, as_json=False, as_csv=False, outs=[])
    out = " ".join(capsys.readouterr().out.split())
    assert "best: DP 8 x TP 2 x PP 2 x CP 2 (EP 4)" in out
    assert "best: DP 16 x TP 2 x PP 2 " in out
    assert "tp2 pp2" not in out


def test_memory_names_its_largest_part_as_its_table_does(cli: Any) -> None:
    """`memory` printed 'largest part: optimizer' under a table whose row reads 'optimizer states'. Llama 3 70B at
    ZeRO 0 with Adam: 12 bytes a parameter of optimizer states against 2 of weights and 2 of gradients (and the
    activations of one 8k-token micro-batch, 185 GB, below the 847 GB of states)."""
    r = cli("memory", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64")
    assert r.code == 0
    assert "largest part: optimizer states." in " ".join(r.out.split())


def test_scale_says_what_its_time_to_target_is_a_time_to(cli: Any) -> None:
    """The default study's 'time to target' column read '161.0 d' at 128 GPUs and named neither the token budget,
    nor the batch it is stated at, nor B_noise. The line under the table states the formula; checked against the
    default scenario's 300B tokens, seq 2048, B_noise 6000, B_0 192 by hand: S_min = 3e11 / 2048 / 6192 steps, and at
    B sequences S_min (1 + 6000 / B) steps of the point's step time."""
    r = cli("scale")
    assert r.code == 0
    text = " ".join(r.out.split())
    assert ("time to target: to the loss 300,000,000,000 tokens reach at the first point's global batch B_0 = 192; "
            "at global batch B it takes S_min (1 + B_noise / B) steps") in text
    assert "B_noise 6,000" in text
    doc = json.loads(cli("scale", "--json").out)
    s_min = 3e11 / 2048 / (6000 + 192)
    for p in doc["points"]:
        assert p["time_to_target_s"] == pytest.approx(s_min * (1 + 6000 / p["global_batch"]) * p["step_time_s"])


def test_calibrate_residual_tables_state_their_sign(cli: Any) -> None:
    """`calibrate`'s residual tables printed '+3.9%' with no sign convention, while validation's errors read the
    other way (+ = the model predicts too fast). On the synthetic 8-A100 log a row whose model time exceeds the
    measured one carries +: the sign the title now states."""
    log = str(ROOT / "tests" / "data" / "nccl" / "synthetic_current.log")
    r = cli("calibrate", "nccl-tests", log, "--cluster", "dgx-a100")
    assert r.code == 0
    assert "residuals per size (error = model / measured time - 1, + = model slower;" in " ".join(r.out.split())
    doc = json.loads(cli("calibrate", "nccl-tests", log, "--cluster", "dgx-a100", "--json").out)
    rows = doc["fit"]["residuals"]
    slower = [x for x in rows if x["predicted_s"] > x["measured_s"]]
    assert slower and all(x["error"] > 0 for x in slower)


def test_stragglers_names_its_efficiency_as_plan_does(cli: Any) -> None:
    """`stragglers` headed the sync mode's staleness efficiency 'eff.', where plan's table, predict's JSON and
    docs/model.md name it 'sync eff.' apart from the critical-batch 'batch eff.'. ASP on 64 workers is
    (N - 1) / N = 63 / 64 of a global step stale (cost/sync.py), so with kappa 0.1 its efficiency is
    1 / (1 + 0.1 x 63 / 64) by hand."""
    r = cli("stragglers", "--workers", "64", "--staleness-kappa", "0.1")
    assert r.code == 0
    header = next(line for line in r.out.splitlines() if "stale (steps)" in line)
    assert "sync eff." in header
    asp = next(line for line in r.out.splitlines() if line.strip("│ ").startswith("asp "))
    assert f"{1 / (1 + 0.1 * 63 / 64):.3f}" in asp
