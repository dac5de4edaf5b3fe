"""Rich rendering of a SensitivityResult: parameters ranked by elasticity, and a one-line conclusion."""

from __future__ import annotations

from rich.table import Table

from scalemodel.engine.sensitivity import SensitivityResult
from scalemodel.report.output import emit_json, new_console, print_table, verbatim
from scalemodel.units import format_quantity as fq
from scalemodel.units import format_signed


def _value(v: float, unit: str) -> str:
    """A parameter's value: a quantity in its unit, a fraction (a CV) as a percentage like the throughput column
    beside it and the docs ('1.18%', not 0.0118), else the plain number."""
    if unit == "fraction":
        return f"{100 * v:.3g}%"
    return fq(v, unit) if unit else f"{v:g}"


def render_sensitivity(r: SensitivityResult, *, as_json: bool) -> None:
    """The JSON document, or the parameters ranked by elasticity and a one-line conclusion."""
    if as_json:
        emit_json(r.payload(), "sensitivity")
        return
    console = new_console()
    inp = r.inputs
    console.print(f"[bold]{verbatim(inp.get('model', ''))}[/bold] on {inp.get('gpus', '')} x "
                  f"{verbatim(inp.get('cluster', ''))}: "
                  f"{r.baseline_tokens_per_s:,.0f} tokens/s, step {fq(r.baseline_step_time_s, 'time')}"
                  + (f", seq {inp['seq_len']:,}" if isinstance(inp.get("seq_len"), int) else ""))
    t = Table(title="Sensitivity of throughput to each hardware parameter (ranked by |elasticity|)")
    t.add_column("parameter")
    t.add_column("value", justify="right")
    t.add_column("elasticity", justify="right")
    t.add_column("improved", justify="right")
    t.add_column("throughput", justify="right")
    for p in r.parameters:
        note = ""
        if p.group == "capacity":
            note = " (fits)" if p.fits_when_improved else " (does not fit)"
        t.add_row(verbatim(p.name), _value(p.value, p.unit), format_signed(p.elasticity, 3), p.improved_by,
                  format_signed(100 * (p.throughput_ratio - 1.0), 1, "%") + note)
    print_table(console, t)
    console.print("elasticity = % change in tokens/s per 1% change of the parameter; "
                  "throughput = gain when the parameter is improved as shown")
    for note in r.notes:
        console.print(f"note: {verbatim(note)}")  # a kink note names parameters, tier names among them
    console.print(f"[italic]{verbatim(r.conclusion)}[/italic]")
