"""Hostile pins to ``plan``, round 38 (fuzzpin38). consist38 made a value pinned with ``=`` (``--constraint X=v``,
``--set strategy.X=v``, a ``--strategy`` file's layout) a plan candidate whatever it is; scripts/fuzzpin38.py fuzzes
that door (micro_batch, tp, pp, cp, dp, ep and interleaved:v at 0, 1, primes, beyond the GPUs and past int64; stage
lists; chunk layer counts; contradicting pins; 1 and 1e8 GPUs). The CLI contract is test_hostile_inputs.py's: exit 2,
one ``error:`` line naming the option, what was wrong and what is allowed, nothing on stdout.

Findings:

1. ``--constraint micro_batch=9223372036854775808`` (or ``cp_a2a_size=`` past int64): the pinned value went into the
   search's int64 columns and stopped plan with "input out of range: Python int too large to convert to C long",
   naming neither the option nor the key. An equality pin past the counts a spec holds (MAX_SPEC_INT = 1e9, the
   bound a --strategy file's micro_batch meets) is now refused at the constraint.
2. ``first_stage_layers`` / ``last_stage_layers`` pinned beside ``pp 1``: plan searched 123,120 candidates and called
   every one layers_not_divisible, where predict refuses the pin ("no pipeline to split", job._check_edge_split).
   They are now PIPELINE_SWITCHES (pp >= 2, as defer_embedding_wgrad): refused at the pin beside a pinned pp 1, the
   search kept to pp >= 2 otherwise, with ux38's warning.
3. A layer count of 0 (``first_chunk_layers=0``, ``first_stage_layers=0``) was taken as a switch that is off
   (``0 in (None, False)`` is true): ``first_chunk_layers=0`` with ``schedule=1f1b`` pinned ranked 1f1b plans predict
   refuses ("first_chunk_layers is set but the schedule is 1f1b"). 0 is a count given (a stage may hold none).
4. ``--set strategy.schedule=1f1b --constraint schedule=interleaved:2`` (or two schedule constraints no schedule meets
   together) was searched to nothing, "no split of 16 GPUs ... meets what was asked", exit 0, where tp=2 against
   tp=4 (and recompute, sequence_parallel, algorithm) is refused naming the pin. Schedule constraints are now
   checked together as the other keys are.
"""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]


# --- 1. an equality pin past the counts a spec holds --------------------------------------------------------------

@pytest.mark.parametrize("pin", [f"micro_batch={2**63}", f"micro_batch={2**70}", f"cp_a2a_size={10**20}",
                                 f"micro_batch={-(10**20)}", f"micro_batch=={2**40}", f"tp={2**64}"])
def test_equality_pin_past_spec_counts_refused(cli, pin: str) -> None:
    key = pin.split("=")[0]
    line = refused(cli, "plan", *DENSE, "--constraint", pin, "--top", "1", "--json",
                   match=f"--constraint: constraint '{pin}' pins {key} beyond the counts a spec holds (1 to 1e+09)")
    assert f"{key}=N with N an integer from 1 to 1e+09" in line
    assert "C long" not in line


def test_pin_at_the_bound_still_a_candidate(cli) -> None:
    # 1e9 itself is a count a spec holds: searched (no per-replica batch of 16 takes it), not refused
    r = cli("plan", *DENSE, "--constraint", "micro_batch=1000000000", "--top", "1")
    assert r.code == 0 and "error" not in r.err, r.err
    assert "micro_batch=1000000000" in r.out


def test_inequality_past_spec_counts_is_no_bound(cli) -> None:
    # tp<=10**20 bounds nothing: the whole grid, as before (only an equality pin enters the int64 columns)
    r = cli("plan", *DENSE, "--constraint", f"tp<={10**20}", "--top", "1")
    assert r.code == 0 and "error" not in r.err, r.err


# --- 2, 3. stage / chunk layer counts beside a pipeline that cannot take them ---------------------------------------

@pytest.mark.parametrize(("field", "value", "pp_pin"), [
    ("first_stage_layers", "8", ["--set", "strategy.pp=1"]),
    ("last_stage_layers", "4", ["--set", "strategy.pp=1"]),
    ("first_stage_layers", "0", ["--set", "strategy.pp=1"])])
def test_stage_layers_with_pinned_pp_1_refused_as_predict_refuses(cli, field: str, value: str,
                                                                  pp_pin: list[str]) -> None:
    pins = ["--set", f"strategy.{field}={value}", *pp_pin]
    said = refused(cli, "predict", *DENSE, *pins)
    assert f"{field} with pp 1" in said and "no pipeline to split" in said  # predict's own refusal
    line = refused(cli, "plan", *DENSE, *pins, "--top", "1", "--json",
                   match=f"error: --set strategy.{field}: {field} with pp 1 (pinned by --set strategy.pp): "
                         "no pipeline to split")
    assert f"pp >= 2, or leave {field} out" in line


def test_stage_layers_unpinned_pp_searched_from_2(cli) -> None:
    r = cli("plan", *DENSE, "--set", "strategy.first_stage_layers=7", "--top", "3", "--json")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(p["strategy"]["pp"] >= 2 for p in ranked)  # 7 + 25 at pp 2 runs; pp 1 cannot
    assert "plan searches pp 2 or more only: the pinned first_stage_layers 7 cannot run at pp 1" in r.err


def test_zero_chunk_layers_with_flat_schedule_refused(cli) -> None:
    pins = ["--set", "strategy.first_chunk_layers=0", "--set", "strategy.schedule=1f1b"]
    assert "first_chunk_layers is set but the schedule is 1f1b" in refused(cli, "predict", *DENSE, *pins)
    refused(cli, "plan", *DENSE, *pins, "--top", "1", "--json",
            match="first_chunk_layers is set but the schedule is 1f1b (pinned by --set strategy.schedule)")


# --- 4. schedule constraints no schedule meets together ------------------------------------------------------------

def test_pinned_schedule_against_constraint_refused_naming_the_pin(cli) -> None:
    refused(cli, "plan", *DENSE, "--set", "strategy.schedule=1f1b", "--constraint", "schedule=interleaved:2",
            "--top", "1", "--json",
            match="no schedule meets schedule=interleaved:2, schedule=1f1b together: schedule is also constrained "
                  "by the pinned schedule (--set strategy.schedule)")


@pytest.mark.parametrize("cons", [
    ["schedule=interleaved:2", "schedule=interleaved:4"], ["schedule=1f1b", "schedule=gpipe"],
    ["schedule=interleaved", "schedule!=interleaved"],
    ["schedule!=1f1b", "schedule!=gpipe", "schedule!=zb", "schedule!=interleaved"]])
def test_schedule_constraints_none_meets_refused(cli, cons: list[str]) -> None:
    args = [a for c in cons for a in ("--constraint", c)]
    refused(cli, "plan", *DENSE, *args, "--top", "1", match=f"no schedule meets {', '.join(cons)} together")


@pytest.mark.parametrize("cons", [["schedule=interleaved", "schedule!=interleaved:2"],
                                  ["schedule!=1f1b", "schedule!=gpipe", "schedule!=zb"]])
def test_schedule_constraints_some_schedule_meets_searched(cli, cons: list[str]) -> None:
    # interleaved at V other than 2 (4 at pp 2 on 32 layers), and interleaved alone: searched, a plan found
    args = [a for c in cons for a in ("--constraint", c)]
    r = cli("plan", *DENSE, *args, "--top", "1", "--json")
    assert r.code == 0, r.err
    best = json.loads(r.out)["ranked"][0]["strategy"]["schedule"]
    assert best.startswith("interleaved:") and best != "interleaved:2"
