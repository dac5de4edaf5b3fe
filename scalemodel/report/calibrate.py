"""Render `scalemodel calibrate` results: fitted parameters and residuals per size, or the JSON document."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from scalemodel.engine.calibrate import CalibrationResult, layout_text
from scalemodel.report.output import emit_json, print_table
from scalemodel.units import format_quantity as fq


def _ci(ci: list[float] | None, kind: str) -> str:
    return "not determined" if ci is None else f"{fq(ci[0], kind)} .. {fq(ci[1], kind)}"


def render_calibration(result: CalibrationResult, *, as_json: bool, wrote: bool = False) -> None:
    """The fitted parameters with 95% intervals and residuals (or the JSON document); each problem
    that questions the fit as one ``warning:`` line on stderr."""
    for problem in result.problems:
        sys.stderr.write(f"warning: calibrate: {problem}\n")
    if as_json:
        emit_json(result.payload(), "calibrate")
        return
    fit, log, inp = result.fit, result.log, result.inputs
    c = Console()
    c.print(f"{log.op} on {result.ranks} ranks, {fit.rows_used} sizes ({log.fmt} log); fitted tier {fit.tier!r} "
            f"of {inp['cluster']} with algorithm {fit.algorithm}")
    t = Table(title="fitted parameters (95% interval from the Jacobian)")
    for col in ("parameter", "spec", "fitted", "95% interval"):
        t.add_column(col, justify="right" if col != "parameter" else "left")
    t.add_row("latency", fq(fit.before["latency_s"], "time"), fq(fit.latency_s, "time"), _ci(fit.latency_ci_s, "time"))
    t.add_row("bandwidth (line rate)", fq(fit.before["bandwidth_Bps"], "bandwidth"),
              fq(fit.bandwidth_Bps, "bandwidth"), "")
    t.add_row("efficiency", f"{fit.before['efficiency']:.3f}", f"{fit.efficiency:.3f}", "")
    t.add_row("effective bandwidth", fq(fit.before["bandwidth_Bps"] * fit.before["efficiency"], "bandwidth"),
              fq(fit.effective_bandwidth_Bps, "bandwidth"), _ci(fit.effective_bandwidth_ci_Bps, "bandwidth"))
    print_table(c, t)
    r = Table(title=f"residuals per size (rms log error {fit.rms_log_error:.3f})")
    for col in ("size", "measured", "model", "error"):
        r.add_column(col, justify="right")
    for x in fit.residuals:
        r.add_row(fq(x["size_bytes"], "bytes"), fq(x["measured_s"], "time"), fq(x["predicted_s"], "time"),
                  f"{x['error']:+.1%}")
    print_table(c, r)
    layout = log.layout()
    if layout is not None:
        c.print(f"log layout: {layout_text(list(layout.values()))} (from its Rank lines)")
    else:
        c.print("log layout: not printed (no `Rank ... on HOST` lines), so not compared with the cluster's")
    for problem in result.problems:
        c.print(f"[bold red]questioned:[/bold red] {problem}", highlight=False)
    if result.problems:
        c.print("the fit is not accepted: exit status 1" + (", no overlay written" if inp["out"] and not wrote
                                                             else "") + " (--force accepts it)")
    if wrote:
        c.print(f"wrote {inp['out']} (use it as --cluster {inp['out']})")
