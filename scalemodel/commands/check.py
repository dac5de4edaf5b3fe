"""`scalemodel check capacity.yaml`: verify a capacity plan's assertions (exit 0 all hold, 1 any fails, 2 bad input)."""

from __future__ import annotations

from scalemodel.commands import common as o
from scalemodel.commands.args import Command, arg, repeat, switch
from scalemodel.engine.check import check_file
from scalemodel.report.check import render_check


def check(*, file: str, straggler_cv: float | None, sets: list[str] | None, pessimistic: bool, as_json: bool) -> None:
    """Check a capacity plan for CI: each assertion's verdict; exit 0 when all hold, 1 when any fails.

    Exit 2 on bad input: the file, or a strategy that cannot run at one of the GPU counts for any reason but memory
    (not fitting memory alone is a note, or must_fit_memory's verdict)."""
    o.check_straggler_cv_against_sets(straggler_cv, sets)
    result = check_file(file, list(sets or []), straggler_cv=straggler_cv, pessimistic=pessimistic)
    render_check(result, as_json=as_json)
    if not result.passed:
        raise SystemExit(1)


COMMAND = Command("check", check, (
    arg("file", "Capacity file: a scenario (kind: scenario) with assertions:.", metavar="CAPACITY.yaml"),
    o.STRAGGLER_CV,
    repeat("--set", dest="sets", metavar="PATH=VALUE",
           help="Override a field of the scenario, e.g. assertions.max_step_time=3s, "
                "cluster.price_per_gpu_hour=2.5USD/h (a bare number is USD per second), training.global_batch=2048 "
                "(repeatable)."),
    switch("--pessimistic", help="Check at the slow end of the prediction interval (docs/model.md#intervals)."),
    o.JSON))
