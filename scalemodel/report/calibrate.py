"""Render `scalemodel calibrate` results: fitted parameters and residuals per size, or the JSON document."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from scalemodel.engine.calibrate import CalibrationResult, layout_text
from scalemodel.engine.calibrate_runs import RunsFit
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


def _factor_value(f: Any) -> str:
    return f"{f.value:.4g} s" if f.name == "overhead_s" else f"x{f.value:.4g}"


def _factor_ci(f: Any) -> str:
    if not f.determined:
        return "not fitted"
    if f.ci is None:
        return "not determined"
    return f"{f.ci[0]:.4g} .. {f.ci[1]:.4g}" + (" s" if f.name == "overhead_s" else "")


def render_runs_fit(result: RunsFit, *, as_json: bool, wrote: bool = False) -> None:
    """Fitted factors with 95% intervals, residual per run before and after, warnings (or the JSON document)."""
    for w in result.warnings:
        sys.stderr.write(f"warning: calibrate runs: {w}\n")
    if as_json:
        emit_json(result.payload(), "calibrate")
        return
    c = Console()
    inp = result.inputs
    c.print(f"{inp['n_runs']} measured runs on {inp['cluster']} ({inp['runs']})", highlight=False)
    t = Table(title="fitted factors (95% interval from the Jacobian)")
    for col in ("factor", "fitted", "95% interval", "meaning"):
        t.add_column(col, justify="left" if col in ("factor", "meaning") else "right")
    for f in result.factors:
        kept = f"{f.value:.4g} s (kept)" if f.name == "overhead_s" else "x1 (kept)"
        t.add_row(f.name, _factor_value(f) if f.determined else kept, _factor_ci(f), f.description)
    print_table(c, t)
    r = Table(title=f"residual per run (rms log error {result.rms_log_error_before:.3f} before, "
                    f"{result.rms_log_error_after:.3f} after)")
    for col in ("run", "GPUs", "measured", "model", "error", "fitted", "error "):
        r.add_column(col, justify="left" if col == "run" else "right")
    for x in result.runs:
        r.add_row(x["name"], str(x["gpus"]), fq(x["measured_s"], "time"), fq(x["before_s"], "time"),
                  f"{x['error_before']:+.1%}", fq(x["after_s"], "time"), f"{x['error_after']:+.1%}")
    print_table(c, r)
    if wrote:
        c.print(f"wrote {inp['out']} (use it as --cluster {inp['out']})", highlight=False)
