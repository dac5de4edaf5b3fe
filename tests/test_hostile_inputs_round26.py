"""Hostile-input round 26: the strategy / workload fields of round 25 (mla_column_down_proj, the eager_* host-op
fields, moe_host_attention_graphed, the MoE dispatchers, moe_router_dtype, etp against ep / tp / experts, MLA widths),
the Python API's msgspec specs (built positionally, copied, assigned, with NumPy values), plan's sync modes under
constraints that empty the space, sweep label collisions, near-miss names, environment oddities and '-' as a file.

Each case is one finding of a corpus of 1450 cases run one process per case (timeout and memory cap, sequentially on
one core, under /tmp); the CLI contract is test_hostile_inputs.py's, the API's docs/api.md's (bad values raise
InputError naming the argument).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

import scalemodel
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec

# --- a spec class built with positional arguments -------------------------------------------------------------------
# StrategySpec(8) raised msgspec's TypeError "Extra positional arguments provided": no InputError, no field named.


@pytest.mark.parametrize("make, said", [
    (lambda: StrategySpec(8), "StrategySpec: 1 positional argument (8): a spec's fields are named; keyword arguments, "
                              "e.g. StrategySpec(dp=...)"),
    (lambda: TrainingSpec(1, 2, 3, 4), "TrainingSpec: 4 positional arguments (1, 2, 3, ...): a spec's fields are "
                                       "named; keyword arguments, e.g. TrainingSpec(global_batch=...)"),
], ids=["strategy", "training"])
def test_a_spec_built_with_positional_arguments_is_refused(make, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        make()
    assert str(exc.value) == said


# --- model_copy with a field the spec has not -----------------------------------------------------------------------
# spec.model_copy(update={'tpp': 2}) raised msgspec's TypeError "`StrategySpec` has no field 'tpp'" ({3: 2}: "keywords
# must be strings"), where StrategySpec(tpp=2) says the key and the closest field (tidy25).

@pytest.mark.parametrize("update, starts", [
    ({"tpp": 2}, "tpp: unknown key 'tpp'; did you mean 'tp'? known keys: dp, tp, pp"),
    ({"eager_ropes": True}, "eager_ropes: unknown key 'eager_ropes'; did you mean 'eager_rope'?"),
    ({3: 2}, "3: unknown key 3; known keys: dp, tp, pp"),
], ids=["near", "new-field", "not-a-string"])
def test_model_copy_with_an_unknown_field_is_refused_as_the_constructor_refuses_it(update, starts: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        StrategySpec().model_copy(update=update)
    assert str(exc.value).startswith(starts), str(exc.value)


def test_model_copy_with_known_fields_still_copies() -> None:
    assert StrategySpec(tp=2).model_copy(update={"pp": 4}) == StrategySpec(tp=2, pp=4)


# --- NumPy values in a spec built, copied or assigned in Python -----------------------------------------------------
# StrategySpec(tp=np.int64(8)) was refused as "tp: Input should be a valid integer (got np.int64(8))" and
# eager_rope=np.True_ as "a valid boolean", while np.float64(8.0) was taken and scalemodel.predict(..., tp=np.int64(8))
# runs (docs/api.md: NumPy scalars and arrays are taken where Python numbers and lists are).

@pytest.mark.parametrize("make, field, value", [
    (lambda: StrategySpec(tp=np.int64(8)), "tp", 8),
    (lambda: StrategySpec(eager_rope=np.True_, mla_column_down_proj=np.array(True)), "mla_column_down_proj", True),
    (lambda: msgspec.structs.replace(StrategySpec(), etp=np.uint8(2)), "etp", 2),
    (lambda: StrategySpec().model_copy(update={"ep_dispatch_sms": np.int32(20)}), "ep_dispatch_sms", 20),
    (lambda: StrategySpec(pp=2, stage_layers=np.array([12, 12])), "stage_layers", [12, 12]),
    (lambda: TrainingSpec(global_batch=np.int64(64), moe_router_dtype=np.str_("fp32")), "moe_router_dtype", "fp32"),
], ids=["ctor-int64", "ctor-bools", "replace", "model_copy", "array", "training"])
def test_numpy_values_in_a_spec_are_the_python_values_they_hold(make, field: str, value) -> None:  # type: ignore[no-untyped-def]
    got = getattr(make(), field)
    assert got == value and type(got) is type(value), got


def test_a_numpy_value_assigned_to_a_spec_field_is_taken() -> None:
    s = StrategySpec()
    s.tp = np.int64(4)  # type: ignore[assignment]
    assert s.tp == 4 and type(s.tp) is int


@pytest.mark.parametrize("make, said", [
    (lambda: StrategySpec(tp=np.bool_(True)), "tp: True is a boolean, not a number; an integer from 1 to 1e+09"),
    (lambda: StrategySpec(tp=np.datetime64(8, "s")), "tp: Input should be a valid integer (got np.datetime64("),
    (lambda: StrategySpec(eager_rope=np.ones(10**6, dtype=bool)),
     "eager_rope: an array of shape (1000000,) (1,000,000 values) is larger than any spec field"),
], ids=["bool-for-int", "time", "huge-array"])
def test_numpy_values_a_field_cannot_hold_are_still_refused(make, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        make()
    assert str(exc.value).startswith(said), str(exc.value)


# --- an empty name for a cluster, a model or a scenario -------------------------------------------------------------
# `scale -c ''` ran dgx-h100 and `scale -m ''` gpt3-175b (the defaults of an option left out); predict said of -m ''
# "folder holds no config.json" (the current folder) and of -c '' "'' is a file, but read as a built-in cluster name".

@pytest.mark.parametrize("command", ["predict", "scale", "plan", "memory"])
@pytest.mark.parametrize("option, kind", [("-c", "cluster"), ("-m", "workload")])
def test_an_empty_name_is_refused_as_such(cli, command: str, option: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    args = {"-c": ["-m", "gpt-1.7b"], "-m": ["-c", "dgx-h100"]}[option]
    refused(cli, command, *args, option, "", "-n", "16", "--json",
            match=f"error: {kind}: an empty {kind} name (''); a built-in {kind} name or a path to a YAML file")


def test_scale_with_an_empty_scenario_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "scale", "--scenario", "", "-n", "16", match="error: scenario: an empty scenario name ('')")


# --- '-' for a file -------------------------------------------------------------------------------------------------
# scalemodel reads no standard input; '-' was "unknown built-in workload '-'" with the list of names, and "-: file not
# found: -" / "strategy file not found" of the readers.

@pytest.mark.parametrize("args, said", [
    (["predict", "-m", "-", "-n", "8"], "error: workload: '-' (standard input) is not read; "),
    (["predict", "-c", "-", "-m", "gpt-1.7b", "-n", "8"], "error: cluster: '-' (standard input) is not read; "),
    (["predict", "-m", "gpt-1.7b", "-n", "8", "--strategy", "-"],
     "error: --strategy: -: strategy file not found: '-' is a file name here, and no file has it: standard input is "
     "not read"),
    (["sweep", "-"], "error: -: '-' is a file name here, and no file has it: standard input is not read"),
    (["hardware", "validate", "-"], "error: -: '-' is a file name here, and no file has it: standard input is not "
                                    "read (save the piped text to a file); an existing YAML file"),
], ids=["model", "cluster", "strategy", "sweep", "validate"])
def test_a_dash_for_a_file_says_standard_input_is_not_read(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    refused(cli, *args, match=said)


def test_a_file_named_dash_is_still_read(cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                                "strategies: [{tp: 1, label: a}]\n")
    doc = accepted(cli, "sweep", "-", "-j", "1")
    assert len(doc["rows"]) == 1


# --- an unknown command names the commands ---------------------------------------------------------------------------
# "No such command 'compare'.; see `scalemodel --help`": a stray period before the ';' and no command named.

@pytest.mark.parametrize("args, said", [
    (["compare"], "error: scalemodel: No such command 'compare' (the commands: scale, predict, plan, sweep, check, "),
    (["hardware", "bogus"], "error: scalemodel hardware: No such command 'bogus' (the commands: list, show, validate)"
                            "; see `scalemodel hardware --help`"),
], ids=["root", "group"])
def test_an_unknown_command_lists_the_commands(cli, args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *args, match=said)
    assert ".;" not in line, line


# --- a constraint's unknown operator ---------------------------------------------------------------------------------
# plan(constraints={'tp': ('~', 2)}) was read as the bare value ('~', 2): "constraint "tp=('~', 2)" needs an integer".

@pytest.mark.parametrize("op", ["~", "=>", "lt"])
def test_an_unknown_constraint_operator_is_said(op: str) -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.plan("dgx-h100", "gpt-1.7b", 16, constraints={"tp": (op, 2)}, top=1)
    assert str(exc.value).startswith(f"constraints: unknown operator {op!r} in constraint on tp; KEY OP VALUE"), \
        str(exc.value)


def test_a_positional_refusal_is_still_a_type_error() -> None:  # tidy25: other TypeErrors stay TypeErrors
    with pytest.raises(TypeError, match="positional"):
        StrategySpec(2)


# --- backup workers beyond the cluster -------------------------------------------------------------------------------
# backup:B runs B data-parallel replicas beside the N GPUs (Chen et al. 2016; cost/sync.py: N + B machines).
# backup:100000 on 16 of dgx-h100's 16,384 GPUs was priced as the 16th fastest of 100,016 workers (49.5 ms against
# bsp's 64.9 ms), plan ranked it first; predict -n 16384 --sync backup:1 ran on a GPU the cluster has not.

@pytest.mark.parametrize("args, said", [
    (["predict", "-n", "16", "--sync", "backup:100000"],
     "error: --sync: backup:100000 runs 100,000 backup workers of tp x pp x cp = 1 GPU beside the 16 GPUs: 100,016 "
     "GPUs, more than the cluster's 16,384; backup:B with B <= 16,368"),
    (["predict", "-n", "16368", "--tp", "8", "--sync", "backup:3"],  # 16,368 + 3 x 8 = 16,392
     "error: --sync: backup:3 runs 3 backup workers of tp x pp x cp = 8 GPUs beside the 16,368 GPUs: 16,392 GPUs, "
     "more than the cluster's 16,384; backup:B with B <= 2"),
    (["predict", "-n", "16384", "--sync", "backup:1"],
     "error: --sync: backup:1 runs 1 backup worker of tp x pp x cp = 1 GPU beside the 16,384 GPUs: 16,385 GPUs, more "
     "than the cluster's 16,384; fewer GPUs (none is left for a backup worker)"),
    (["plan", "-n", "16", "--sync-modes", "bsp,backup:100000"],
     "error: --sync-modes: backup:100000 runs 100,000 backup workers of at least 1 GPU beside the 16 GPUs"),
], ids=["predict", "model-parallel", "full", "plan"])
def test_backup_workers_beyond_the_cluster_are_refused(cli, args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *args, "-c", "dgx-h100", "-m", "gpt-1.7b", "--json", match=said)


def test_backup_workers_the_cluster_holds_still_run(cli) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16368", "--tp", "8", "--sync", "backup:2")
    assert doc["sync"]["mode"] == "backup:2" and doc["feasible"]


def test_api_backup_workers_beyond_the_cluster_name_the_argument() -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.plan("dgx-h100", "gpt-1.7b", 16, sync_modes="backup:100000", top=1)
    assert str(exc.value).startswith("sync_modes: backup:100000 runs 100,000 backup workers"), str(exc.value)
    with pytest.raises(InputError) as exc:
        scalemodel.predict("dgx-h100", "gpt-1.7b", 16, sync="backup:100000")
    assert str(exc.value).startswith("sync: backup:100000 runs"), str(exc.value)


def test_a_sweep_row_with_too_many_backup_workers_names_its_field(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [16]\n"
                 "strategies: [{tp: 2, sync: 'backup:100000', label: b}]\n")
    row = accepted(cli, "sweep", str(f), "-j", "1")["rows"][0]
    assert row["status"] == "error" and row["message"].startswith(
        f"{f}: strategies[0].sync: backup:100000 runs 100,000 backup workers of tp x pp x cp = 2 GPUs"), row["message"]
