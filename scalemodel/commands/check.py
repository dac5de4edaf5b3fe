"""`scalemodel check capacity.yaml`: verify a capacity plan's assertions (exit 0 all hold, 1 any fails, 2 bad input)."""

from __future__ import annotations

from typing import Annotated

import typer

from scalemodel.commands import common as o
from scalemodel.engine.check import check_file
from scalemodel.report.check import render_check


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check(
        file: Annotated[str, typer.Argument(help="Capacity file: a scenario (kind: scenario) with assertions:.",
                                            metavar="CAPACITY.yaml")],
        straggler_cv: o.StragglerCvOption = None,
        set_: Annotated[list[str] | None, typer.Option(
            "--set", metavar="PATH=VALUE",
            help="Override a field of the scenario, e.g. assertions.max_step_time=3s, "
                 "cluster.price_per_gpu_hour=2.5, training.global_batch=2048 (repeatable).")] = None,
        pessimistic: Annotated[bool, typer.Option(
            "--pessimistic",
            help="Check at the slow end of the prediction interval (docs/model.md#intervals).")] = False,
        as_json: o.JsonOption = False,
    ) -> None:
        """Check a capacity plan for CI: each assertion's verdict; exit 0 when all hold, 1 when any fails."""
        result = check_file(file, list(set_ or []), straggler_cv=straggler_cv, pessimistic=pessimistic)
        render_check(result, as_json=as_json)
        if not result.passed:
            raise typer.Exit(1)
