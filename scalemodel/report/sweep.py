"""Render a sweep: the tidy table as CSV, JSON lines or Parquet files, a compact summary, a progress bar."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from scalemodel.engine.grid import COLUMNS, GridResult
from scalemodel.errors import InputError, one_line
from scalemodel.report.explain import describe_layout
from scalemodel.report.output import (
    _plain,
    check_output_path,
    emit_data,
    emit_json,
    new_console,
    print_table,
    verbatim,
    write_files,
)
from scalemodel.units import format_quantity as fq

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def output_format(path: str, option: str = "--out") -> str:
    """The table format of an output path by its extension; refuses a bad path before the work."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the table format of {path[:200]!r}", where=option,
                         allowed="a file name ending in .csv, .jsonl or .parquet")
    if fmt == "parquet":
        _pyarrow(option)
    check_output_path(path, option)
    return fmt


def _pyarrow(option: str) -> Any:
    try:
        import pyarrow  # optional heavy dependency: only Parquet output needs it
        import pyarrow.parquet  # noqa: F401  (registers the writer)
    except ImportError:
        raise InputError("Parquet output needs pyarrow, which is not installed", where=option,
                         allowed="pip install pyarrow, or write .csv / .jsonl") from None
    return pyarrow


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(["" if r[c] is None else (repr(r[c]) if isinstance(r[c], float) else r[c]) for c in COLUMNS])
    return buf.getvalue()


def to_jsonl(rows: list[dict[str, Any]]) -> str:
    """One strictly valid JSON object per line (no NaN or Infinity), keys in :data:`COLUMNS` order."""
    return "".join(json.dumps(_plain({c: r[c] for c in COLUMNS}), allow_nan=False) + "\n" for r in rows)


def to_parquet(rows: list[dict[str, Any]], option: str = "--out") -> bytes:
    pa = _pyarrow(option)
    import pyarrow.parquet as pq  # optional heavy dependency, loaded by _pyarrow above

    table = pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def write_tables(result: GridResult, outs: list[str]) -> None:
    """Write every ``--out`` file in the format its extension names, as one (:func:`write_files`: none replaced
    unless all can be; never over an input)."""
    items: list[tuple[str, str | bytes, str]] = []
    for path in outs:
        fmt = output_format(path)
        data: str | bytes = (to_csv(result.rows) if fmt == "csv" else to_jsonl(result.rows) if fmt == "jsonl"
                             else to_parquet(result.rows))
        items.append((path, data, "--out"))
    write_files(items)


class SweepProgress:
    """A rich progress bar on stderr (only on a terminal, so pipes and --json stay clean)."""

    def __init__(self, label: str) -> None:
        console = Console(stderr=True)
        self._progress: Any = None
        if console.is_terminal:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True)
            self._task = self._progress.add_task(label, total=None)
            self._progress.start()

    def __call__(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def render_sweep(result: GridResult, *, as_json: bool, as_csv: bool, outs: list[str]) -> None:
    """The JSON document, the CSV on stdout, or a compact summary table; then the files written."""
    if as_json:
        emit_json(result.payload(), "sweep")
        return
    if as_csv:
        emit_data(to_csv(result.rows))
        return
    console = new_console()
    inp = result.inputs
    # an unnamed sweep file printed 'sweep sweep: 8 points' (SweepSpec's default name): its path names it then
    name = inp.get("name") or "sweep"
    label = inp.get("file") or name if name == "sweep" else name
    console.print(f"sweep {verbatim(label)}: {len(result.rows)} points in {result.elapsed_s:.1f} s "
                  f"({result.backend}; {result.points_per_cpu_s:.2f} points per CPU-second)")
    t = Table(title="one row per point (every column: --out FILE.csv | .jsonl | .parquet)")
    for col, just in (("model", "left"), ("cluster", "left"), ("GPUs", "right"), ("strategy", "left"),
                      ("step", "right"), ("tokens/s/GPU", "right"), ("MFU", "right"), ("mem/GPU", "right")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in result.rows:
        if r["status"] == "error":
            t.add_row(verbatim(r["model"]), verbatim(r["cluster"]), str(r["gpus"]), verbatim(r["strategy"]), "error",
                      "-", "-", "-")
            continue
        # a searched point in plan's and predict's words ('DP 16 x TP 2 x PP 8', CP and EP where used): 'tp2 pp8
        # dp16' was a third spelling, and it left out a winner's CP and EP
        layout = f"{r['strategy']}" if r["strategy"] != "best" else f"best: {describe_layout(r)}"
        # names and labels as written (review25d: a label "[red]a" printed as "a")
        t.add_row(verbatim(r["model"]), verbatim(r["cluster"]), str(r["gpus"]), verbatim(layout),
                  fq(r["step_time_s"], "time"),
                  f"{r['tokens_per_s_per_gpu']:,.0f}", f"{r['mfu']:.1%}",
                  fq(r["memory_per_gpu_bytes"], "bytes") + ("" if r["fits"] else " !"))
    print_table(console, t)
    if any(r["status"] != "error" and not r["fits"] for r in result.rows):  # the mark was nowhere explained
        console.print("! does not fit in accelerator memory: priced as if it ran (the files' `fits` column)",
                      highlight=False)
    for note in result.notes:
        console.print(f"note: {note}")
    for r in result.rows:
        if r["status"] == "error":
            console.print(f"point {r['point']} ({r['model']}, {r['cluster']}, {r['gpus']} GPUs, {r['strategy']}): "
                          f"{r['message']}", highlight=False)
    for path in outs:
        console.print(f"wrote {one_line(str(path))}", highlight=False, markup=False)  # as calibrate's _wrote
