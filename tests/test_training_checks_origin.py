"""One loop over engine.job.training_checks (engine.job.run_training_checks) for the commands' and the scenario
checks' naming of where a refused training field was written; errors.sub_path keeps what the engine named below it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from scalemodel.commands.common import check_training_fits
from scalemodel.engine import job as job_module
from scalemodel.engine.job import scenario_training_fits
from scalemodel.errors import InputError, sub_path


@pytest.mark.parametrize(("where", "field", "rest"), [
    ("training.module_precision.attention_proj", "training.module_precision", ".attention_proj"),
    ("training.module_precision[0]", "training.module_precision", "[0]"),
    ("training.module_precision", "training.module_precision", ""),
    ("training.precisionX", "training.precision", ""),   # another field that shares the prefix
    ("training.fp8_recipe", "training.precision", ""),   # another field altogether
    ("precision", "training.precision", ""),
    ("", "training.cudnn_release", ""),
])
def test_sub_path_keeps_only_what_lies_below_the_field(where: str, field: str, rest: str) -> None:
    assert sub_path(where, field) == rest


def _refusing(calls: list[str]) -> Any:
    """A training_checks stand-in: one refusal of a module below training.module_precision, counted per call."""
    def checks(cluster: Any, workload: Any, training: Any) -> list[tuple[str, Any]]:
        calls.append("checked")

        def refuse() -> None:
            raise InputError("the model has no MTP layers", where="training.module_precision.mtp", allowed="x")
        return [("cudnn_release", lambda: None), ("module_precision", refuse)]
    return checks


def test_both_callers_run_the_one_loop_and_name_the_place(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Replacing engine.job.training_checks reaches the commands' check too (it imported its own name of it before,
    and looped itself): each caller runs the shared loop once and names the place it knows, with the module kept."""
    calls: list[str] = []
    monkeypatch.setattr(job_module, "training_checks", _refusing(calls))
    scen = SimpleNamespace(cluster=None, model=None, training=None)
    cases = [
        (lambda: scenario_training_fits(scen, "scen.yaml"), "scen.yaml: training.module_precision.mtp"),
        (lambda: scenario_training_fits(scen, "scen.yaml", ["training.module_precision.mtp=bf16"]),
         "--set training.module_precision.mtp"),
        (lambda: scenario_training_fits(scen, ""), "training.module_precision.mtp"),
        (lambda: check_training_fits(None, None, None, {}, None, ["training.module_precision={mtp: bf16}"]),
         "--set training.module_precision.mtp"),
        (lambda: check_training_fits(None, None, None, {}, None, None,
                                     scenario=("s.yaml", {"module_precision": {}})),
         "--scenario: s.yaml: training.module_precision.mtp"),
        (lambda: check_training_fits(None, None, None, {}, None, None), "training.module_precision.mtp"),
    ]
    for call, where in cases:
        with pytest.raises(InputError) as got:
            call()
        assert got.value.message() == f"{where}: the model has no MTP layers; x"
    assert calls == ["checked"] * len(cases)
