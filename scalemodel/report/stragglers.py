"""Human output of `scalemodel stragglers` (rich tables; no modelling here)."""

from __future__ import annotations

from rich.table import Table

from scalemodel.engine.stragglers import StragglersResult
from scalemodel.report.output import emit_json, new_console, print_table
from scalemodel.units import format_quantity as fq


def render_stragglers(stragglers: StragglersResult, *, as_json: bool) -> None:
    """The JSON document, or the slowest-worker and sync-strategy tables."""
    if as_json:
        emit_json(stragglers.payload(), "stragglers")
        return
    result = stragglers.payload()
    inp = result["inputs"]
    dist = inp["dist"] if inp["dist"] != "empirical" else f"empirical ({inp['samples']} samples)"
    t = Table(title=f"Slowest of {result['workers']} workers ({dist}, cv {inp['cv']:.3g})")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("mean worker step", fq(result["expected_mean_s"], "time"))
    t.add_row("expected slowest worker (BSP compute)", fq(result["expected_max_s"], "time"))
    t.add_row("slowdown vs mean", f"{result['slowdown']:.4f}x")
    for k, v in result["quantiles_s"].items():
        t.add_row(f"slowest worker, {k}", fq(v, "time"))
    s = Table(title="Synchronisation strategies (per worker iteration, comm "
                    f"{fq(inp['comm_s'], 'time')} per sync)")
    # "sync eff.": plan's name for the sync mode's staleness efficiency (docs/model.md, "Two efficiencies, named
    # apart in the tables"; batch eff. is the critical-batch one); this table's bare "eff." named neither
    for col in ("sync", "step", "vs BSP", "updates/s", "stale (steps)", "sync eff.", "eff. step"):
        s.add_column(col, justify="right" if col != "sync" else "left")
    bsp = result["strategies"][0]["step_time_s"]
    for r in result["strategies"]:
        s.add_row(r["sync"], fq(r["step_time_s"], "time"), f"{r['step_time_s'] / bsp:.3f}x",
                  f"{r['updates_per_s']:.4g}", f"{r['mean_staleness']:.3g}", f"{r['statistical_efficiency']:.3f}",
                  fq(r["effective_step_s"], "time"))
    console = new_console()
    print_table(console, t)
    print_table(console, s)
    strag = result["expected_max_s"] - result["expected_mean_s"]
    console.print(f"Stragglers add {fq(max(strag, 0.0), 'time')} "
                  f"({100 * (result['slowdown'] - 1):.1f} %) to every synchronous step.")
    for note in result.get("notes", []):
        console.print(f"note: {note}", style="dim")
