"""`scalemodel calibrate nccl-tests LOG --cluster C`: fit a tier's latency and bandwidth to nccl-tests output."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scalemodel.commands.common import ClusterOption, JsonOption, SetOption


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("calibrate")
    def calibrate(
        args: Annotated[list[str], typer.Argument(help="nccl-tests LOG (the word `nccl-tests` may come first)",
                                                  metavar="[nccl-tests] LOG")],
        cluster: ClusterOption,
        tier: Annotated[str | None, typer.Option("--tier", help="Tier to fit (default: outermost crossed).")] = None,
        out: Annotated[Path | None, typer.Option("--out", help="Write a YAML overlay (extends: CLUSTER).")] = None,
        ranks: Annotated[int | None, typer.Option("--ranks", help="Ranks in the log when it does not say.")] = None,
        op: Annotated[str | None, typer.Option("--op", help="Collective, when the log does not say.")] = None,
        algo: Annotated[str, typer.Option("--algo", help="Algorithm the model uses for the fit.")] = "ring",
        sets: SetOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Fit one network tier to nccl-tests measurements; report residuals per size; write an overlay."""
        from scalemodel.commands.common import load_cluster_with, positive_int
        from scalemodel.errors import InputError

        if len(args) == 2 and args[0] == "nccl-tests":
            log_path = Path(args[1])
        elif len(args) == 1:
            log_path = Path(args[0])
        else:
            raise InputError(f"expected `nccl-tests LOG`, got {' '.join(args)!r}", where="calibrate",
                             allowed="scalemodel calibrate nccl-tests LOG --cluster C")
        positive_int(ranks, "--ranks")
        if not log_path.is_file():
            raise InputError(f"no such file {str(log_path)!r}", where="LOG", allowed="a nccl-tests output file")
        from scalemodel.engine.calibrate import fit_tier, infer_ranks, overlay_yaml, parse_nccl_tests
        from scalemodel.engine.job import build_network

        text = log_path.read_text(errors="replace")
        op_n = op.lower().replace("_", "") if op else None
        from scalemodel.cost.algorithms import APPLICABLE

        if op_n is not None and op_n not in APPLICABLE:
            raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(APPLICABLE))
        log = parse_nccl_tests(text, op=op_n)
        n = ranks or log.ranks or infer_ranks(log)
        if n is None or n < 2:
            raise InputError("cannot tell how many ranks the log used", where="LOG", allowed="pass --ranks N")
        spec = load_cluster_with(cluster, sets)
        fit = fit_tier(log, build_network(spec), cluster_name=spec.name, ranks=n, tier=tier, algorithm=algo)
        if out is not None:
            try:
                out.write_text(overlay_yaml(fit, str(log_path)))
            except OSError as exc:
                raise InputError(f"cannot write {str(out)!r}: {exc.strerror}", where="--out",
                                 allowed="a writable file path") from None
        if as_json:
            from scalemodel.report.output import emit_json

            emit_json({"inputs": {"log": str(log_path), "cluster": spec.name, "tier": tier, "ranks": n,
                                  "op": log.op, "algo": algo, "out": str(out) if out else None,
                                  "set": list(sets or [])},
                       "format": log.fmt, "fit": fit}, "calibrate")
            return
        from rich.console import Console
        from rich.table import Table

        from scalemodel.units import format_quantity as fq

        c = Console()
        c.print(f"{log.op} on {n} ranks, {fit.rows_used} sizes ({log.fmt} log); fitted tier {fit.tier!r} "
                f"of {spec.name} with algorithm {algo}")
        t = Table(title="fitted parameters")
        for col in ("parameter", "spec", "fitted"):
            t.add_column(col, justify="right" if col != "parameter" else "left")
        t.add_row("latency", fq(fit.before["latency_s"], "time"), fq(fit.latency_s, "time"))
        t.add_row("bandwidth (line rate)", fq(fit.before["bandwidth_Bps"], "bandwidth"),
                  fq(fit.bandwidth_Bps, "bandwidth"))
        t.add_row("efficiency", f"{fit.before['efficiency']:.3f}", f"{fit.efficiency:.3f}")
        t.add_row("effective bandwidth", fq(fit.before["bandwidth_Bps"] * fit.before["efficiency"], "bandwidth"),
                  fq(fit.effective_bandwidth_Bps, "bandwidth"))
        c.print(t)
        r = Table(title=f"residuals per size (rms log error {fit.rms_log_error:.3f})")
        for col in ("size", "measured", "model", "error"):
            r.add_column(col, justify="right")
        for x in fit.residuals:
            r.add_row(fq(x["size_bytes"], "bytes"), fq(x["measured_s"], "time"), fq(x["predicted_s"], "time"),
                      f"{x['error']:+.1%}")
        c.print(r)
        if out is not None:
            c.print(f"wrote {out} (use it as --cluster {out})")
