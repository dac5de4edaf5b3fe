"""Review of fuzz23 (the round-23 hostile-input fixes): what its boundary checks still got wrong.

Each test failed before its fix: a comma-separated string for plan's ``sync_modes`` / calibrate_runs' ``factors``
was split but not stripped as the command line strips it; the shared rank check said ``--ranks`` to a Python caller;
spec fields (``_plain``) kept the NumPy scalars fuzz23 fixed only for the arguments (``_scalar``); a path ending in /
was offered its own name for an option that refuses that suffix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_hostile_inputs import refused

import scalemodel
from scalemodel.errors import InputError

LOG = Path(__file__).resolve().parent / "data" / "nccl" / "synthetic_current.log"  # lists 8 ranks


def _refused(call: Any) -> str:
    with pytest.raises(InputError) as exc:
        call()
    return str(exc.value)


# --- a comma-separated string is the command line's list ------------------------------------------------------------
# `--factors "compute, overhead_s"` fits both, factors="compute, overhead_s" was refused ("unknown factor
# ' overhead_s'"); sync_modes="bsp, ssp:2" ran but echoed ' ssp:2' where `--sync-modes "bsp, ssp:2"` echoes 'ssp:2'.

def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {name: a, cluster: dgx-h100, model: gpt-1.7b, gpus: 8, global_batch: 16, step_time: 5 s}\n"
                    "- {name: b, cluster: dgx-h100, model: gpt-1.7b, gpus: 16, global_batch: 32, step_time: 6 s}\n")
    return runs


def test_api_factors_with_spaces_after_commas_are_the_command_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path)
    fit = scalemodel.calibrate_runs(runs, factors="compute, overhead_s")
    r = cli("calibrate", "runs", str(runs), "--factors", "compute, overhead_s", "--json")
    assert r.code == 0, r.err
    named = sorted(f["name"] for f in json.loads(r.out)["factors"])
    assert sorted(f.name for f in fit.factors) == named


def test_api_sync_modes_with_spaces_after_commas_echo_as_the_command_lines(cli) -> None:  # type: ignore[no-untyped-def]
    doc = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=1, sync_modes="bsp, ssp:2").payload()
    r = cli("plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--top", "1", "--sync-modes", "bsp, ssp:2",
            "--json")
    assert r.code == 0, r.err
    assert doc["inputs"]["sync_modes"] == json.loads(r.out)["inputs"]["sync_modes"] == ["bsp", "ssp:2"]


# --- the shared rank check names the argument in the API -------------------------------------------------------------
# calibrate_log(ranks=3) said "ranks: --ranks 3, but the log lists 8 ranks; 8, or leave --ranks out (...)": the
# location was re-named, the text was not (docs/api.md: messages name the argument, not the command line's option).

def test_calibrate_log_rank_refusals_name_the_argument(cli) -> None:  # type: ignore[no-untyped-def]
    api = _refused(lambda: scalemodel.calibrate_log(LOG, "dgx-a100", ranks=3))
    assert api == ("ranks: ranks 3, but the log lists 8 ranks; 8, or leave ranks out (it is for a log that does "
                   "not list its ranks)"), api
    line = refused(cli, "calibrate", str(LOG), "--cluster", "dgx-a100", "--ranks", "3")
    assert line == ("error: --ranks: --ranks 3, but the log lists 8 ranks; 8, or leave --ranks out (it is for a "
                    "log that does not list its ranks)"), line  # the command line's message as it was
    assert _refused(lambda: scalemodel.calibrate_log(LOG, "dgx-a100", ranks=1)).startswith(
        "ranks: a collective needs at least 2 ranks, got 1; ")


# --- spec fields take the NumPy scalars the arguments take -----------------------------------------------------------
# fuzz23 fixed np.longdouble / np.timedelta64 in _scalar (gpus, straggler_cv) only: a field's np.timedelta64(64)
# still became 64 through .tolist() (global_batch=np.timedelta64(64) ran as 64 sequences), and tp=np.longdouble(2)
# was refused as "not a valid integer (got np.longdouble('2.0'))" while tp=np.float64(2.0) runs.

def test_fields_take_longdouble_as_float64() -> None:
    base = scalemodel.predict("dgx-h100", "llama3-8b", 16, tp=2, global_batch=64).step_time_s
    for tp, gb in ((np.longdouble(2), 64), (2, np.longdouble(64)), (np.array(2, dtype=np.longdouble), 64)):
        assert scalemodel.predict("dgx-h100", "llama3-8b", 16, tp=tp, global_batch=gb).step_time_s == base
    stages = scalemodel.predict("dgx-h100", "llama3-8b", 16, pp=2, global_batch=64,
                                stage_layers=np.array([16, 16], dtype=np.longdouble))
    assert stages.step_time_s == scalemodel.predict("dgx-h100", "llama3-8b", 16, pp=2, global_batch=64,
                                                    stage_layers=[16, 16]).step_time_s


@pytest.mark.parametrize("fields", [{"global_batch": np.timedelta64(64)}, {"tp": np.timedelta64(2)},
                                    {"stage_layers": np.array([16, 16], dtype="timedelta64"), "pp": 2},
                                    {"global_batch": np.array(64, dtype="timedelta64[s]")}],
                         ids=["global_batch", "tp", "stage_layers", "0-d"])
def test_fields_refuse_timedelta64(fields: dict[str, Any]) -> None:
    said = _refused(lambda: scalemodel.predict("dgx-h100", "llama3-8b", 16, **fields))
    name = next(iter(fields))
    assert said.startswith(("training." + name, "strategy." + name)) and "timedelta64" in said, said


# --- a path ending in / for an option that writes one format ---------------------------------------------------------
# `calibrate runs F --out o.txt/` was offered "a file path, e.g. o.txt (without the trailing /)", and --out o.txt is
# then refused ("--out writes YAML only").

def test_a_folder_path_is_offered_a_name_the_option_takes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path)
    line = refused(cli, "calibrate", "runs", str(runs), "--out", "o.txt/")
    assert line.endswith("a file path, e.g. out.yaml"), line
    line = refused(cli, "calibrate", "runs", str(runs), "--out", "o.yml/")
    assert line.endswith("a file path, e.g. o.yml (without the trailing /)"), line


# --- a constraint whose operator is not hashable ----------------------------------------------------------------------
# plan(constraints={'tp': ([1], 2)}) and {'tp': [([1], 2)]} raised TypeError ("unhashable type: 'list'") from
# `op in OPS`, a traceback where every other malformed constraint is an InputError at "constraints".

@pytest.mark.parametrize("spec", [([1], 2), [([1], 2)], [({"<": 1}, 2)]], ids=["pair", "list", "dict-op"])
def test_an_unhashable_constraint_operator_is_refused(spec: Any) -> None:
    said = _refused(lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 16, top=1, constraints={"tp": spec}))
    assert said.startswith("constraints: ") and "; " in said, said


# --- a sync mode that is not a string --------------------------------------------------------------------------------
# plan(sync_modes=['bsp', 5]) said "sync_modes: empty sync strategy 5": 5 is not empty, it is not a name.

def test_a_sync_mode_that_is_not_a_string_is_not_called_empty() -> None:
    said = _refused(lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=1, sync_modes=["bsp", 5]))
    assert said.startswith("sync_modes: 5 is not a sync strategy name; bsp | "), said
    assert _refused(lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=1, sync_modes=["bsp", " "])).startswith(
        "sync_modes: empty sync strategy ' '; ")


# --- study's workers and scheduler as `sweep`'s --workers and --scheduler ------------------------------------------
# fuzz23 checked workers as a count up to 1e8: study(workers=5000) ran where `sweep --workers 5000` is refused (1 to
# 4096: a sweep of as many points forked that many processes); study(workers=2, scheduler=ADDRESS) waited 10 s on the
# scheduler where the command line refuses both, and scheduler=' ' ran on local processes (round 17's --scheduler '').
# (A scheduler that is not a str is left to Dask's Client, which also takes a Cluster object.)

SWEEP = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "capacity.yaml"


@pytest.mark.parametrize("kw, said", [
    ({"workers": 5000}, "workers: 5,000 processes is outside 1 to 4,096; an integer from 1 to 4,096"),
    ({"workers": 2, "scheduler": "tcp://127.0.0.1:1"},
     "workers: workers and scheduler both given; workers for local processes, or scheduler for a Dask cluster"),
    ({"scheduler": " "}, "scheduler: no address given; the address of a running Dask scheduler"),
], ids=["workers", "both", "empty"])
def test_study_refuses_what_sweep_refuses(kw: dict[str, Any], said: str) -> None:
    assert _refused(lambda: scalemodel.study(SWEEP, **kw)).startswith(said)
