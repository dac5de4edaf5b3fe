"""`scalemodel calibrate nccl-tests LOG --cluster C`: fit a tier's latency and bandwidth to nccl-tests output."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scalemodel.commands.common import ClusterOption, JsonOption, SetOption, load_cluster_with, positive_int
from scalemodel.engine.calibrate import DEFAULT_TOLERANCE, collective_op, overlay_yaml
from scalemodel.engine.calibrate import calibrate as run
from scalemodel.errors import InputError
from scalemodel.report.calibrate import render_calibration
from scalemodel.report.output import check_output_path, write_file
from scalemodel.specs.loader import reference_from
from scalemodel.specs.nccl_tests import read_nccl_tests


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("calibrate")
    def calibrate(
        args: Annotated[list[str], typer.Argument(help="nccl-tests LOG (the word `nccl-tests` may come first)",
                                                  metavar="[nccl-tests] LOG")],
        cluster: ClusterOption,
        tier: Annotated[str | None, typer.Option("--tier", help="Tier to fit (default: outermost crossed).")] = None,
        out: Annotated[str | None, typer.Option("--out", help="Write a YAML overlay (extends: CLUSTER).")] = None,
        ranks: Annotated[int | None, typer.Option("--ranks", help="Ranks in the log when it does not say.")] = None,
        op: Annotated[str | None, typer.Option("--op", help="Collective, when the log does not say.")] = None,
        algo: Annotated[str, typer.Option("--algo", help="Algorithm the model uses for the fit.")] = "ring",
        tolerance: Annotated[float, typer.Option(
            "--tolerance", help="Largest accepted |model / measured - 1| at any size.")] = DEFAULT_TOLERANCE,
        force: Annotated[bool, typer.Option(
            "--force", help="Write the overlay and exit 0 even when the fit is questioned (warnings stay).")] = False,
        sets: SetOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Fit one network tier to nccl-tests measurements; report residuals and 95% intervals; write an overlay.

        Exits 1 (and writes no overlay) when a fitted parameter sits on a solver bound, a residual
        exceeds --tolerance, or the log's hosts x GPUs per host differ from the cluster's layout.
        """
        if len(args) == 2 and args[0] == "nccl-tests":
            log_path = Path(args[1])
        elif len(args) == 1:
            log_path = Path(args[0])
        else:
            raise InputError(f"expected `nccl-tests LOG`, got {' '.join(args)!r}", where="calibrate",
                             allowed="scalemodel calibrate nccl-tests LOG --cluster C")
        positive_int(ranks, "--ranks")
        if out is not None:
            check_output_path(out, "--out")  # before the work; write_file checks again, inputs included
        log = read_nccl_tests(log_path, op=collective_op(op))
        spec = load_cluster_with(cluster, sets)
        result = run(log, spec, source=str(log_path), ranks=ranks, tier=tier, algorithm=algo,
                     out=str(out) if out else None, sets=sets, tolerance=tolerance)
        wrote = out is not None and (result.accepted or force)
        if wrote and out is not None:
            base = reference_from("cluster", cluster, Path(out).absolute().parent)
            write_file(out, overlay_yaml(result.fit, str(log_path), extends=base, sets=tuple(sets or ())), "--out")
        render_calibration(result, as_json=as_json, wrote=wrote)
        if not result.accepted and not force:
            raise typer.Exit(1)
