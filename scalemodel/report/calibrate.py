"""Render `scalemodel calibrate` results: fitted parameters and residuals per size, or the JSON document."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from scalemodel.engine.calibrate import CalibrationResult, layout_text
from scalemodel.engine.calibrate_runs import RunsFit, ScaleChange
from scalemodel.engine.intervals import MIN_CASES
from scalemodel.engine.parts import PARTS
from scalemodel.errors import one_line
from scalemodel.report.output import emit_json, new_console, print_table, verbatim
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
    c = new_console()
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
    # the sign said nowhere, and it is validation's the other way round (there + = the model predicts too fast)
    r = Table(title=f"residuals per size (error = model / measured time - 1, + = model slower; rms log error "
                    f"{fit.rms_log_error:.3f})")
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
        c.print(_wrote(inp["out"]), highlight=False, markup=False)


def _wrote(out: str) -> str:
    """The line naming the overlay written, its name as one escaped line and printed without rich markup (fuzz25: a
    name with a line break printed on two lines, "[red]r.yaml" as "wrote r.yaml", the name rich's markup ate)."""
    name = one_line(str(out))
    return f"wrote {name} (use it as --cluster {name})"


def _factor_value(f: Any) -> str:
    """'x0.5786'; the overhead in seconds, 0 on its lower bound (the solver's 2.173e-10 s was printed as fitted)."""
    if f.name == "overhead_s":
        return "0 s" if f.at_bound == "lower" else fq(f.value, "time")
    return f"x{f.value:.4g}"


def _factor_ci(f: Any) -> str:
    if not f.determined:
        return "not fitted"
    if f.ci is None:
        return "not determined"
    return f"{f.ci[0]:.4g} .. {f.ci[1]:.4g}" + (" s" if f.name == "overhead_s" else "")


def scale_change_text(ch: ScaleChange) -> str:
    """What changed between the largest measured run and the target, in words: the step either side and
    the parts whose share of the step grew most (their seconds and shares), or that none did."""
    a, b = ch.measured, ch.target
    ta, tb = a["step_s"], b["step_s"]
    head = (f"From the largest measured run ({a['name']}, {a['gpus']} GPUs, global batch {a['global_batch']}) to "
            f"{b['gpus']} GPUs ({ch.mode} scaling, global batch {b['global_batch']}) the fitted step goes from "
            f"{fq(ta, 'time')} to {fq(tb, 'time')} ({tb / ta - 1:+.1%})" if ta > 0 else "")
    rows = {r["part"]: r for r in ch.parts}
    if not ch.grew:
        return head + "; no part's share of the step grows by 0.5 points or more."
    grew = [f"{PARTS[k].words} {rows[k]['from_share']:.1%} -> {rows[k]['to_share']:.1%} of the step "
            f"({fq(rows[k]['from_s'], 'time')} -> {fq(rows[k]['to_s'], 'time')})" for k in ch.grew]
    return head + "; the parts whose share of the step grew most: " + "; ".join(grew) + "."


def _render_scale_change(c: Console, ch: ScaleChange) -> None:
    a, b = ch.measured, ch.target
    t = Table(title=f"breakdown at the largest measured run ({a['gpus']} GPUs) and at {b['gpus']} GPUs (fitted)")
    for col in ("part", f"{a['gpus']} GPUs", "share", f"{b['gpus']} GPUs", "share ", "change"):
        t.add_column(col, justify="left" if col == "part" else "right")
    for r in ch.parts:
        t.add_row(r["part"], fq(r["from_s"], "time"), f"{r['from_share']:.1%}", fq(r["to_s"], "time"),
                  f"{r['to_share']:.1%}", f"{100 * r['change_share']:+.1f} pt")
    t.add_row("step", fq(a["step_s"], "time"), "", fq(b["step_s"], "time"), "", "")
    print_table(c, t)
    c.print(ch.why, highlight=False)
    for n in ch.notes:
        c.print(f"note: {n}", highlight=False)


def band_text(cal: dict) -> str:  # type: ignore[type-arg]
    """Which of the fit's residuals the overlay's predictions take their band from (docs/model.md#intervals)."""
    m = cal.get("method")
    if m == "leave-one-out":
        return (f"prediction band with the overlay: the leave-one-out errors of these {cal['runs']} runs ('left out': "
                f"each run predicted by the factors refitted to the other {cal['runs'] - 1}; docs/model.md#intervals)")
    if m == "in-sample" and cal["runs"] < MIN_CASES:  # engine.intervals.interval_for keeps the published band
        return (f"prediction band with the overlay: the published runs' ({cal['runs']} calibration runs, a band "
                f"needs {MIN_CASES}; docs/model.md#intervals)")
    if m == "in-sample":
        return (f"prediction band with the overlay: the fitted model's in-sample errors on these {cal['runs']} runs, "
                f"optimistic ({cal['reason']}; docs/model.md#intervals)")
    return (f"prediction band with the overlay: the published runs' ({cal.get('reason', '')}; "
            "docs/model.md#intervals)")


def render_runs_fit(result: RunsFit, *, as_json: bool, wrote: bool = False,
                    change: ScaleChange | None = None) -> None:
    """Fitted factors with 95% intervals, residual per run before and after, warnings, and with
    ``change`` the breakdown at the largest run and the target side by side (or the JSON document)."""
    for w in result.warnings:
        sys.stderr.write(f"warning: calibrate runs: {w}\n")
    if change is not None:
        change.why = scale_change_text(change)
    if as_json:
        doc = result.payload()
        if change is not None:
            doc["predict_at"] = change.payload()
        emit_json(doc, "calibrate")
        return
    c = new_console()
    inp = result.inputs
    c.print(f"{inp['n_runs']} measured runs on {inp['cluster']} ({inp['runs']})", highlight=False)
    t = Table(title="fitted factors (95% interval from the Jacobian)")
    for col in ("factor", "fitted", "95% interval", "meaning"):
        t.add_column(col, justify="left" if col in ("factor", "meaning") else "right")
    for f in result.factors:
        kept = (f"{f.value:.4g} s" if f.name == "overhead_s" else "x1") + (" (held)" if f.held else " (kept)")
        t.add_row(f.name, _factor_value(f) if f.determined else kept, _factor_ci(f), f.description)
    print_table(c, t)
    r = Table(title=f"residual per run (error = model / measured step time - 1, + = model slower; rms log error "
                    f"{result.rms_log_error_before:.3f} before, {result.rms_log_error_after:.3f} after)")
    loo = any(x.get("loo_s") is not None for x in result.runs)
    for col in ("run", "GPUs", "measured", "model", "error", "fitted", "error ") + (
            ("left out", "error  ") if loo else ()):
        r.add_column(col, justify="left" if col == "run" else "right")
    for x in result.runs:
        r.add_row(verbatim(x["name"]), str(x["gpus"]), fq(x["measured_s"], "time"), fq(x["before_s"], "time"),
                  f"{x['error_before']:+.1%}", fq(x["after_s"], "time"), f"{x['error_after']:+.1%}",
                  *((fq(x["loo_s"], "time"), f"{x['error_loo']:+.1%}") if loo else ()))
    print_table(c, r)
    c.print(band_text(result.calibration), highlight=False)
    if change is not None:
        _render_scale_change(c, change)
    if wrote:
        c.print(_wrote(inp["out"]), highlight=False, markup=False)
