"""Render `scalemodel collective` results: nccl-tests-like tables or the JSON document."""

from __future__ import annotations

from scalemodel.engine.collective import CollectiveResult
from scalemodel.report.output import emit_json, new_console, print_table
from scalemodel.units import format_quantity as fq


def render_collective(result: CollectiveResult, *, as_json: bool) -> None:
    if as_json:
        emit_json(result.payload(), "collective")
        return
    from rich.table import Table  # tables only

    inputs, op, ranks, rows = result.inputs, result.op, result.ranks, result.rows
    console = new_console()
    title = f"{op} over {ranks} GPU{'' if ranks == 1 else 's'} on {inputs['cluster']}" + (
        f" (stride {inputs['stride']})" if inputs.get("stride", 1) != 1 else "")
    if len(rows) == 1:
        row = rows[0]
        t = Table(title=f"{title}, {fq(row['size_bytes'], 'bytes')}")
        # the last column marks the best algorithm (the one the sizes' table names under "best"); it had no header
        for col in ("algorithm", "time", "algbw", "busbw", "latency (0 B)", "best"):
            t.add_column(col, justify="right" if col not in ("algorithm", "best") else "left")
        for a in sorted(row["algorithms"], key=lambda a: a["time_s"]):
            t.add_row(a["algorithm"], fq(a["time_s"], "time"), fq(a["algbw_Bps"], "bandwidth"),
                      fq(a["busbw_Bps"], "bandwidth"), fq(a["latency_s"], "time"),
                      "yes" if a["algorithm"] == row["best"] else "")
        print_table(console, t)
        best = next(a for a in row["algorithms"] if a["algorithm"] == row["best"])
        if best["time_s"] <= 0:  # one rank, or nothing to move: neither latency- nor bandwidth-bound
            console.print(f"best: {row['best']} ({fq(best['time_s'], 'time')}): nothing crosses a link")
            return
        share = best["latency_s"] / best["time_s"]
        dominant = "latency-bound" if share > 0.5 else "bandwidth-bound"
        console.print(f"best: {row['best']} ({fq(best['time_s'], 'time')}), {dominant}: "
                      f"{share:.0%} of it is the zero-byte latency")
        fastest = min(row["algorithms"], key=lambda a: a["time_s"])
        if fastest["time_s"] < best["time_s"] or row["best"] == "hierarchical":
            # a faster row than "best" (a textbook algorithm NCCL lacks, or a tuner plugin's pick), or a
            # "hierarchical" that is NCCL's in-network reduction: say which rule picked it
            faster = (f"; {fastest['algorithm']} ({fq(fastest['time_s'], 'time')}) is faster in the model"
                      if fastest["time_s"] < best["time_s"] else "")
            console.print(f"best = {row['best_basis']}{faster}")
        return
    names = [a["algorithm"] for a in rows[0]["algorithms"]]
    t = Table(title=title + " (fastest algorithm per size)")
    for col in ("size", "best", "time", "algbw", "busbw"):
        t.add_column(col, justify="left" if col == "best" else "right")
    for row in rows:
        best = next(a for a in row["algorithms"] if a["algorithm"] == row["best"])
        t.add_row(fq(row["size_bytes"], "bytes"), row["best"], fq(best["time_s"], "time"),
                  fq(best["algbw_Bps"], "bandwidth"), fq(best["busbw_Bps"], "bandwidth"))
    print_table(console, t)
    if len(names) > 1:
        console.print("every algorithm's time is in --json (rows[].algorithms)")
