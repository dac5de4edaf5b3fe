"""Render `scalemodel calibrate` results: fitted parameters and residuals per size, or the JSON document."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from scalemodel.engine.calibrate import CalibrationResult
from scalemodel.report.output import emit_json
from scalemodel.units import format_quantity as fq


def render_calibration(result: CalibrationResult, *, as_json: bool) -> None:
    if as_json:
        emit_json(result.payload(), "calibrate")
        return
    fit, log, inp = result.fit, result.log, result.inputs
    c = Console()
    c.print(f"{log.op} on {result.ranks} ranks, {fit.rows_used} sizes ({log.fmt} log); fitted tier {fit.tier!r} "
            f"of {inp['cluster']} with algorithm {fit.algorithm}")
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
    if inp["out"] is not None:
        c.print(f"wrote {inp['out']} (use it as --cluster {inp['out']})")
