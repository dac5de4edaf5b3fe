"""Render a scaling sweep: rich table, terminal bar chart of efficiency and its lost causes, CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from scalemodel.choices import zero_label
from scalemodel.engine.parts import PARTS
from scalemodel.engine.scaling import ScalingResult
from scalemodel.errors import one_line
from scalemodel.report.explain import describe_settings
from scalemodel.report.output import duration, emit_data, emit_json, new_console, print_table, verbatim
from scalemodel.report.plot import plot_scaling
from scalemodel.units import format_quantity as fq

BAR_WIDTH = 40
FULL, LOST = "█", "▒"


def csv_columns(result: Any) -> list[str]:
    causes = list(result.causes)
    return (["gpus", "global_batch", "step_time_s", "tokens_per_s", "samples_per_s", "tflops_per_gpu", "mfu",
             "scaling_efficiency", "batch_efficiency", "time_to_target_s", "feasible", "memory_per_gpu_bytes",
             "dp", "tp", "pp", "cp", "ep", "micro_batch", "schedule", "zero", "recompute", "sync"]
            + [f"loss_{c}" for c in causes] + [f"{k}_s" for k in result.points[0].prediction.breakdown_s])


def to_csv(result: Any) -> str:
    """One row per point: the scalar columns of the JSON points (loss_<cause>, <part>_s flattened)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = csv_columns(result)
    w.writerow(cols)
    for p in result.points:
        d = p.payload()
        row: dict[str, Any] = {k: d.get(k) for k in cols if k in d}
        for k in ("dp", "tp", "pp", "cp", "ep", "micro_batch", "schedule", "zero", "recompute", "sync"):
            row[k] = d["strategy"].get(k)
        for c in result.causes:
            row[f"loss_{c}"] = d["loss_attribution"].get(c, 0.0)
        for k, v in d["breakdown_s"].items():
            row[f"{k}_s"] = v
        w.writerow(["" if row.get(c) is None else (repr(row[c]) if isinstance(row[c], float) else row[c])
                    for c in cols])
    return buf.getvalue()


def bar_segments(efficiency: float, losses: dict[str, float], width: int = BAR_WIDTH) -> list[tuple[str, int]]:
    """(cause or "efficiency", cells) segments of one bar: efficiency filled, then the positive losses.

    The bar is ``width`` cells for efficiency 1. Positive losses share the cells between the
    efficiency and the full width in proportion (gains, i.e. negative losses, are not drawn).
    """
    eff = max(0.0, efficiency)
    filled = min(width, round(eff * width))
    rest = width - filled
    pos = {k: v for k, v in losses.items() if v > 0}
    total = sum(pos.values())
    segs: list[tuple[str, int]] = [("efficiency", filled)]
    if rest <= 0 or total <= 0:
        return segs
    # largest-remainder rounding so the segments fill exactly `rest` cells
    raw = {k: rest * v / total for k, v in pos.items()}
    cells = {k: int(x) for k, x in raw.items()}
    for k in sorted(raw, key=lambda k: -(raw[k] - cells[k]))[: rest - sum(cells.values())]:
        cells[k] += 1
    segs += [(k, cells[k]) for k in sorted(pos, key=lambda k: -pos[k]) if cells[k] > 0]
    return segs


def chart_lines(result: Any, width: int = BAR_WIDTH) -> list[str]:
    """Rich-markup lines: one bar per point (efficiency filled, lost efficiency coloured by cause)."""
    lines = []
    label_w = max(len(str(p.gpus)) for p in result.points)
    used: list[str] = []
    for p in result.points:
        segs = bar_segments(p.scaling_efficiency, p.loss_attribution, width)
        text = ""
        for name, n in segs:
            if name == "efficiency":
                text += f"[green]{FULL * n}[/green]"
            else:
                if name not in used:
                    used.append(name)
                text += f"[{PARTS[name].style}]{LOST * n}[/]"
        more = "+" if p.scaling_efficiency > 1.0005 else " "
        lines.append(f"{str(p.gpus).rjust(label_w)} GPUs {text}{more} {p.scaling_efficiency:6.1%}  "
                     f"{p.prediction.flops['tflops_per_gpu']:6.1f} TFLOP/s/GPU")
    legend = "  ".join([f"[green]{FULL}[/green] efficiency"]
                       + [f"[{PARTS[c].style}]{LOST}[/] {c}" for c in used])
    lines.append(" " * (label_w + 6) + legend)
    return lines


def _short(x: float) -> str:
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def _short_time(x: float) -> str:
    return f"{x:.3g} s" if x >= 1 else fq(x, "time")


def _target_line(result: ScalingResult) -> str:
    """What the 'time to target' column is a time to (engine.scaling's docstring): the column gave days and named
    neither the token budget nor the batch it is stated at, nor B_noise."""
    tr = result.inputs.get("training") or {}
    tokens, samples, noise = tr.get("train_tokens"), tr.get("train_samples"), tr.get("critical_batch")
    budget = (f"{tokens:,.0f} tokens" if isinstance(tokens, (int, float)) and tokens > 0
              else f"{samples:,.0f} samples" if isinstance(samples, (int, float)) and samples > 0 else "the budget")
    given = f", B_noise {noise:,.0f}" if isinstance(noise, (int, float)) and noise > 0 else ""
    return (f"time to target: to the loss {budget} reach at the first point's global batch B_0 = "
            f"{result.points[0].global_batch:,}; at global batch B it takes S_min (1 + B_noise / B) steps, S_min = "
            f"{budget} / seq_len / (B_noise + B_0){given} (docs/model.md#statistical-efficiency-and-critical-batch)")


def _causes_text(result: Any, point: Any) -> str:
    """The two parts that took the most points, each 'name points': one decimal below 10 points, whole from 10 (the
    summary line under the table gives whole points too), so 'dp_comm 10.2' does not wrap at 80 columns and break
    its number from its name (tests/test_frontend_layout.py)."""
    top = result.top_causes(point, 2)
    return ", ".join(f"{c} {100 * v:.{1 if 100 * v < 9.95 else 0}f}" for c, v in top) if top else "-"


def render_scale(result: ScalingResult, *, as_json: bool = False, as_csv: bool = False,
                 plot: str | Path | None = None) -> None:
    """Write the plot when asked, then print the JSON document, the CSV or the tables and bar chart."""
    if plot is not None:
        plot_scaling(result.payload(), plot)
    if as_json:
        emit_json(result.payload(), "scale")
    elif as_csv:
        emit_data(to_csv(result))
    else:
        render_scaling(result)
        if plot is not None:
            new_console().print(f"plot written to {one_line(str(plot))}", highlight=False, markup=False)


def render_scaling(result: Any) -> None:
    console = new_console()
    inp = result.inputs
    first = result.points[0]
    s = first.strategy
    what = "planner's best strategy at each point" if result.best else (
        f"TP {s['tp']} x PP {s['pp']} x CP {s['cp']} (EP {s['ep']}), DP = N / {s['tp'] * s['pp'] * s['cp']}, "
        f"micro-batch {s['micro_batch']}, {s['schedule']}, {zero_label(s['zero'], ' ')}, recompute {s['recompute']}, "
        + ("SP, " if s["sequence_parallel"] else "") + f"sync {s['sync']}")  # SP: as memory's header says it
    if isinstance(inp.get("seq_len"), int):
        what += f", seq {inp['seq_len']:,}"
    scen = f" [dim](scenario {verbatim(inp['scenario'])})[/dim]" if inp.get("scenario") else ""
    console.print(f"[bold]{verbatim(inp.get('model', ''))}[/bold] on {verbatim(inp.get('cluster', ''))}, "
                  f"{result.mode} scaling: "
                  f"{what}{scen}")
    stat = any(p.batch_efficiency is not None for p in result.points)
    ttt = any(p.time_to_target_s is not None for p in result.points)
    t = Table(title="Scaling sweep (eff. = per-GPU throughput relative to the first point)",
              box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    for col in ("GPUs", "global\nbatch", "step\ntime", "tokens/s", "TFLOP/s\nper GPU", "scaling\neff."):
        t.add_column(col, justify="right", no_wrap=True)
    if stat:
        t.add_column("batch\neff.", justify="right", no_wrap=True)  # critical-batch: plan's "batch eff."
    if ttt:
        t.add_column("time to\ntarget", justify="right", no_wrap=True)
    # numbers never wrap; the causes column folds onto a second line when the terminal is narrow
    t.add_column("lost to\n(points)", overflow="fold")
    for p in result.points:
        pr = p.prediction
        row = [str(p.gpus), f"{p.global_batch:,}", _short_time(pr.step_time_s), _short(pr.throughput["tokens_per_s"]),
               f"{pr.flops['tflops_per_gpu']:.1f}", f"{p.scaling_efficiency:.1%}"]
        if stat:
            row.append("-" if p.batch_efficiency is None else f"{p.batch_efficiency:.1%}")
        if ttt:
            row.append("-" if p.time_to_target_s is None else duration(p.time_to_target_s, "d"))
        row.append(_causes_text(result, p) if p is not first else "(reference)")
        if not pr.feasible:
            row[0] += " !"
        t.add_row(*row)
    print_table(console, t)
    if ttt:
        console.print(_target_line(result), highlight=False)
    if result.best:
        st = Table(title="Strategy chosen at each point")
        for col in ("GPUs", "DP", "TP", "PP", "CP", "EP"):
            st.add_column(col, justify="right")
        # plan's words for the rest (explain.describe_settings): the columns left out sequence parallelism, the
        # bucket, the rank order and the collective plan had chosen, so a point could not be re-run from the table
        st.add_column("settings")
        for p in result.points:
            x = p.strategy
            st.add_row(*(str(v) for v in (p.gpus, x["dp"], x["tp"], x["pp"], x["cp"], x["ep"])),
                       describe_settings(x))
        print_table(console, st)
    for line in chart_lines(result):
        console.print(line, highlight=False)
    console.print(f"[italic]{result.summary()}[/italic]")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
