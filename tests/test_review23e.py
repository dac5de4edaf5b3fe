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
