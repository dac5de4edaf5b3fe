"""`scalemodel sweep SWEEP.yaml`: a capacity study's grid (models x clusters x GPU counts x strategies)
on all local cores or a Dask cluster, written as one tidy table."""

from __future__ import annotations

import os
from typing import Any

from scalemodel.commands.args import Command, arg, integer, opt, repeat, switch
from scalemodel.commands.options import JSON
from scalemodel.engine.grid import run_grid
from scalemodel.errors import InputError
from scalemodel.report.sweep import SweepProgress, output_format, render_sweep, write_tables
from scalemodel.specs.sweep import load_sweep

#: The most local processes a sweep takes (--workers; the API's ``workers``).
MAX_WORKERS = 4096


def check_runner(workers: int | None, scheduler: Any, option: str = "--workers",
                 scheduler_option: str = "--scheduler") -> None:
    """--workers and --scheduler (the API's ``workers`` and ``scheduler``, named by the options): at most
    MAX_WORKERS processes, a scheduler address that is not blank (round 17: --scheduler '' ran on local processes),
    and not both. A scheduler that is not a str is Dask's to judge (its Client also takes a Cluster)."""
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"{option} must be from 1 to {MAX_WORKERS}, got {workers}", where=option,
                         allowed=f"an integer from 1 to {MAX_WORKERS}")
    if isinstance(scheduler, str) and not scheduler.strip():
        raise InputError("no address given", where=scheduler_option,
                         allowed="the address of a running Dask scheduler, e.g. tcp://10.0.0.1:8786, or leave "
                                 f"{scheduler_option} out for local processes")
    if scheduler is not None and workers is not None:
        raise InputError(f"{option} and {scheduler_option} both given", where=option,
                         allowed=f"{option} for local processes, or {scheduler_option} for a Dask cluster")


def sweep(*, file: str, out: list[str] | None, workers: int | None, scheduler: str | None, as_csv: bool,
          as_json: bool) -> None:
    """Run a grid of models x clusters x GPU counts x strategies; one row per point (plan or predict)."""
    if as_json and as_csv:
        raise InputError("--json and --csv both given", where="--csv", allowed="one output format")
    check_runner(workers, scheduler)
    outs = list(out or [])
    for path in outs:
        output_format(path)  # before the work: extension, folder, not an input
    _distinct_outputs(outs)
    spec, models, clusters = load_sweep(file)
    for path in outs:
        output_format(path)  # again now that the sweep's inputs have been read
    inputs = {"file": file, "name": spec.name, "models": spec.models, "clusters": spec.clusters,
              "gpus": spec.gpus, "strategies": [s if s == "best" else s.model_dump(mode="json", exclude_unset=True)
                                                for s in spec.strategies],
              "training": spec.training.model_dump(mode="json", exclude_unset=True), "objective": spec.objective,
              "out": outs, "scheduler": scheduler}
    bar = SweepProgress(f"sweep {spec.name}")
    try:
        result = run_grid(spec, models, clusters, workers=workers, scheduler=scheduler, progress=bar,
                          inputs=inputs)
    finally:
        bar.close()
    write_tables(result, outs)
    render_sweep(result, as_json=as_json, as_csv=as_csv, outs=outs)


COMMAND = Command("sweep", sweep, (
    arg("file", "Sweep file (kind: sweep; `scalemodel schema sweep`).", metavar="SWEEP.yaml"),
    repeat("--out", "-o", help="Write the table: FILE.csv, FILE.jsonl or FILE.parquet (needs pyarrow); repeatable."),
    opt("--workers", "-j", type=integer, help="Local processes (default: all cores)."),
    opt("--scheduler", metavar="ADDRESS", help="Run on a Dask cluster at ADDRESS, e.g. tcp://10.0.0.1:8786 "
                                               "(pip install 'scalemodel[dask]')."),
    switch("--csv", dest="as_csv", help="Print the table as CSV."),
    JSON))


def _distinct_outputs(outs: list[str]) -> None:
    """Refuse two --out that name one file (the same path, or one through a symbolic or hard link): round 22, `-o
    t.jsonl -o link.csv` with link.csv -> t.jsonl wrote the JSONL table and then the CSV over it, exit 0, one table of
    two."""
    seen: dict[object, str] = {}
    for path in outs:
        # an existing file by its identity: a hard link to t.jsonl has its own realpath (review22g)
        st = os.stat(path) if os.path.exists(path) else None
        real = (st.st_dev, st.st_ino) if st is not None else os.path.realpath(path)
        if real in seen:
            raise InputError(f"{path!r} is the same file as {seen[real]!r}, given before", where="--out",
                             allowed="one --out for each file")
        seen[real] = path
