"""Run a sweep grid (models x clusters x GPU counts x strategies) through the engine, in parallel.

Each grid point takes the one route its command takes: ``best`` through
:func:`scalemodel.engine.planner.plan` (top 1, the sweep's objective), a fixed strategy through
:func:`scalemodel.engine.predict.predict`. A point that cannot be built (more GPUs than the cluster
has, a layout that does not divide the GPU count, no feasible strategy) becomes a row with
``status: error`` and the reason, so one bad corner does not lose the rest of the study.

Points run on local processes (:class:`concurrent.futures.ProcessPoolExecutor`, all cores by
default) or, given a scheduler address, on a Dask cluster (``distributed``, the optional ``dask``
extra). Rows come back in grid order whatever order the points finish in: one tidy table, one row
per point, the columns of :data:`COLUMNS`.
"""

from __future__ import annotations

import os
import signal
import threading  # concurrent.futures imports it already: no cost to a sweep without --scheduler
import time
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.planner import plan
from scalemodel.engine.predict import Prediction, predict
from scalemodel.errors import InputError, Origin
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload, notices
from scalemodel.specs.sweep import SweepSpec, default_name
from scalemodel.specs.training import check_derived_batch

#: Columns of the tidy table, in order (None where a value does not apply).
COLUMNS: tuple[str, ...] = (
    "point", "model", "cluster", "gpus", "strategy", "status", "message", "global_batch", "step_time_s",
    "tokens_per_s", "tokens_per_s_per_gpu", "samples_per_s", "tflops_per_gpu", "mfu", "hfu",
    "memory_per_gpu_bytes", "memory_capacity_bytes", "fits", "dp", "tp", "pp", "cp", "ep", "micro_batch",
    "schedule", "zero", "recompute", "sequence_parallel", "algorithm", "sync", "time_to_train_s", "cost_usd",
    *(f"{k}_s" for k in BREAKDOWN_KEYS),
    # the prediction interval (engine/intervals.py): step time and throughput bands, from the validation
    # residuals of the named family of published runs; out_of_distribution = nothing similar validated
    "step_time_s_low", "step_time_s_high", "tokens_per_s_low", "tokens_per_s_high", "mfu_low", "mfu_high",
    "interval_family", "interval_cases", "out_of_distribution",
    # plan's search (best points): candidates_evaluated is every candidate the search covered (plan's JSON key of
    # that name), candidates_priced the ones the step model priced, the rest bounded ("searched N candidates (M
    # evaluated, the rest bounded)" in plan's words); candidates_priced came last (round 19), so the columns before
    # it keep their positions for a reader that takes them by index
    "candidates_evaluated", "elapsed_s", "cpu_s", "candidates_priced",
    # the interval's source, published, calibrated-leave-one-out or calibrated-in-sample (a cluster overlay of
    # `calibrate runs` takes its band from its own runs' residuals, docs/model.md#calibrated-intervals); last (round
    # 19, after candidates_priced), so the columns before it keep their positions
    "interval_source")

#: Seconds to wait for a Dask scheduler before giving up with an error.
CONNECT_TIMEOUT_S = 10
#: Seconds :func:`_connect` waits beyond CONNECT_TIMEOUT_S for a peer that accepted the connection to answer.
HANDSHAKE_GRACE_S = 5

#: A row's key for the warnings its point raised, taken off by run_grid (not a column of the table).
_WARNINGS = "_warnings"

_STRATEGY_COLUMNS = ("dp", "tp", "pp", "cp", "ep", "micro_batch", "schedule", "zero", "recompute",
                     "sequence_parallel", "algorithm", "sync")


@dataclass(frozen=True)
class GridPoint:
    """One point of the grid, self-contained (validated specs), so it can run in another process."""

    point: int
    model: str
    cluster: str
    gpus: int
    strategy: str
    workload_spec: Any
    cluster_spec: Any
    training: Any
    fixed: StrategySpec | None  # None: the planner's best
    objective: str
    origin: Origin | None = None  # the sweep file's fields for this row's strategy and GPU count (errors name them)
    source: str = ""  # the sweep file: a row's error names it and the field (``sweep.yaml: training.precision``)
    labelled: bool = False  # the file gave the strategy a label (else its name is specs.sweep.default_name's)


@dataclass
class GridResult:
    """The rows of a sweep (grid order) and how it ran."""

    inputs: dict[str, Any]
    rows: list[dict[str, Any]]
    elapsed_s: float
    backend: str
    workers: int
    cpu_s: float = 0.0  # CPU seconds the points took (sum of their process times)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # raised while the points were priced, once each, labelled

    @property
    def points_per_cpu_s(self) -> float:
        """Points per CPU-second (per core): the rate one core sustains, whatever else runs on the machine."""
        return len(self.rows) / self.cpu_s if self.cpu_s > 0 else 0.0

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "columns": list(COLUMNS), "rows": self.rows, "elapsed_s": self.elapsed_s,
                "backend": self.backend, "workers": self.workers, "points": len(self.rows),
                "errors": sum(r["status"] == "error" for r in self.rows),
                "points_per_s": len(self.rows) / self.elapsed_s if self.elapsed_s > 0 else 0.0,
                "cpu_s": self.cpu_s, "points_per_cpu_s": self.points_per_cpu_s, "notes": self.notes,
                "warnings": self.warnings}


def grid_points(spec: SweepSpec, models: dict[str, Path], clusters: dict[str, Path],
                source: str = "") -> list[GridPoint]:
    """The grid in order models x clusters x gpus x strategies, each spec loaded once (``source``: the sweep
    file, which a row's error then names with the field: ``sweep.yaml: strategies[1].tp``)."""
    wl = {name: load_workload(path) for name, path in models.items()}
    cl = {name: load_cluster(path) for name, path in clusters.items()}
    where = f"{source}: " if source else ""
    out: list[GridPoint] = []
    for m in spec.models:
        for c in spec.clusters:
            for j, n in enumerate(spec.gpus):
                for i, s in enumerate(spec.strategies):
                    fixed = None if s == "best" else StrategySpec.model_validate(
                        s.model_dump(exclude={"label"}))  # type: ignore[union-attr]
                    label = "best" if s == "best" else s.name()  # type: ignore[union-attr]
                    out.append(GridPoint(len(out), m, c, n, label, wl[m], cl[c], spec.training, fixed,
                                         spec.objective, Origin(f"{where}strategies[{i}].", f"{where}gpus[{j}]"),
                                         source, labelled=s != "best" and bool(s.label)))  # type: ignore[union-attr]
    return out


def _row(pt: GridPoint) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(point=pt.point, model=pt.model, cluster=pt.cluster, gpus=pt.gpus, strategy=pt.strategy)
    return row


def run_point(pt: GridPoint) -> dict[str, Any]:
    """One grid point through its command's engine entry point, as a row of the tidy table."""
    t0, c0 = time.perf_counter(), time.process_time()
    row = _row(pt)
    with notices.collecting() as raised:  # raised where the point runs (maybe another process): sent with the row
        _run_point(pt, row)
    row[_WARNINGS] = raised
    row["elapsed_s"] = time.perf_counter() - t0
    row["cpu_s"] = time.process_time() - c0
    return row


def _run_point(pt: GridPoint, row: dict[str, Any]) -> None:
    try:
        pred: Prediction | None
        if pt.fixed is None:
            res = plan(pt.cluster_spec, pt.workload_spec, pt.gpus, pt.training, objective=pt.objective, top=1)
            row["candidates_evaluated"] = res.candidates_evaluated
            row["candidates_priced"] = res.search.get("evaluated", res.candidates_evaluated)
            pred = res.best
            if pred is None:
                reasons = ", ".join(f"{k} {v}" for k, v in sorted(res.infeasible_by_reason.items(),
                                                                   key=lambda kv: -kv[1])[:3])
                raise InputError(f"no feasible strategy among {res.candidates_evaluated} candidates ({reasons})",
                                 where="best", allowed="more GPUs, a larger accelerator memory, or looser constraints")
        else:
            pt.cluster_spec.require_gpus(pt.gpus, "gpus")
            # a derived global batch past the bound, as predict refuses it (it was priced, 6.4e9 sequences a step)
            check_derived_batch(pt.training, pt.fixed, pt.gpus, "training.micro_batch", "training.global_batch")
            pred = predict(pt.cluster_spec, pt.workload_spec, pt.gpus, pt.training, pt.fixed, origin=pt.origin)
            if not pt.labelled:
                # the default name says what was priced: an unset sequence_parallel as the pricing resolved it (on
                # for an MoE model at tp > 1 under Megatron-Core's layer, job.resolve_sequence_parallel); the
                # point's warnings are labelled with it too (_point_warnings reads the row)
                row["strategy"] = default_name(pt.fixed.model_copy(
                    update={"sequence_parallel": bool(pred.strategy["sequence_parallel"])}))
        _fill(row, pred)
    except InputError as exc:
        row.update(status="error", message=_located(exc, pt).message())


def _point_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """Each warning the points raised (taken off their rows), once, after the label of the first point (in grid
    order) that raised it and the count of the others that did."""
    first: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = {}
    for row in rows:
        for w in row.pop(_WARNINGS, None) or []:
            first.setdefault(w, row)
            count[w] = count.get(w, 0) + 1
    out = []
    for w, row in first.items():
        more = count[w] - 1
        also = f" (and {more} other point{'s' if more > 1 else ''})" if more else ""
        out.append(f"sweep point {row['point']} ({row['model']}, {row['cluster']}, {row['gpus']} GPUs, "
                   f"{row['strategy']}){also}: {w}")
    return out


def _located(exc: InputError, pt: GridPoint) -> InputError:
    """A row's error at the sweep file's field: its GPU count (the planner names --gpus, the GPU check gpus), the
    strategies entry of a "best" point, the training field the engine names bare ("precision: accelerator
    'a100-sxm-80g' has no fp8 peak"); any other location is prefixed with the file (``pt.source``) unless it
    names it already: a row's error did not name the sweep file."""
    where = exc.where
    if pt.origin is not None and where in ("--gpus", "gpus"):
        where = pt.origin.gpus
    elif pt.origin is not None and where == "best":
        where = pt.origin.strategy.rstrip(".")
    elif where in TrainingSpec.model_fields:
        where = f"training.{where}"
    prefix = f"{pt.source}: " if pt.source else ""
    if prefix and not where.startswith(prefix):
        where = prefix + where
    return exc if where == exc.where else InputError(exc.what, where=where, allowed=exc.allowed)


def _fill(row: dict[str, Any], p: Prediction) -> None:
    s = p.strategy
    row.update(
        status="ok" if p.feasible else "infeasible", message=p.infeasible_reason, global_batch=s.get("global_batch"),
        step_time_s=p.step_time_s, tokens_per_s=p.throughput["tokens_per_s"],
        tokens_per_s_per_gpu=p.throughput["tokens_per_s_per_gpu"], samples_per_s=p.throughput["samples_per_s"],
        tflops_per_gpu=p.flops["tflops_per_gpu"], mfu=p.flops["mfu"], hfu=p.flops["hfu"],
        memory_per_gpu_bytes=p.memory["per_gpu_bytes"], memory_capacity_bytes=p.memory["capacity_bytes"],
        fits=p.memory["fits"], time_to_train_s=p.time_to_train_s, cost_usd=p.cost_usd)
    for k in _STRATEGY_COLUMNS:
        v = s.get(k)
        row[k] = v if isinstance(v, (bool, int, float)) or v is None else str(v)
    for k in BREAKDOWN_KEYS:
        row[f"{k}_s"] = p.breakdown_s[k]
    band = p.reported_interval  # none for an infeasible point, as predict's JSON
    if band is not None:
        row.update(step_time_s_low=band["step_time_s"][0], step_time_s_high=band["step_time_s"][1],
                   tokens_per_s_low=band["tokens_per_s"][0], tokens_per_s_high=band["tokens_per_s"][1],
                   mfu_low=band["mfu"][0], mfu_high=band["mfu"][1],
                   interval_family=" ".join(str(v) for v in band["family"].values()) or "all runs",
                   interval_cases=band["cases"], out_of_distribution=band["out_of_distribution"],
                   interval_source=band["source"])


def run_points(points: list[GridPoint]) -> list[dict[str, Any]]:
    """A chunk of points, in order (the unit of work sent to a process or a Dask worker)."""
    return [run_point(p) for p in points]


def _chunks(points: list[GridPoint], workers: int) -> list[list[GridPoint]]:
    """About 4 chunks per worker: few enough to amortise sending specs, enough to balance the load."""
    size = max(1, -(-len(points) // (4 * workers)))
    return [points[i:i + size] for i in range(0, len(points), size)]


def _local(chunks: list[list[GridPoint]], workers: int) -> Generator[list[dict[str, Any]], None, None]:
    if workers == 1:
        for c in chunks:
            yield run_points(c)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_points, c) for c in chunks]
        # SIGTERM (kill, timeout(1), a CI job cancelled) ended this process at once and left its workers computing
        # their chunks as orphans, minutes of CPU each on a large grid (fuzz24); Ctrl-C reaches them as a group
        # only where SIGTERM has its default action: one the caller ignores (SIG_IGN, inherited across exec) or
        # handles itself (an application's handler; None: set from C) stays as it is
        main = threading.current_thread() is threading.main_thread() and signal.getsignal(
            signal.SIGTERM) == signal.SIG_DFL
        if main:
            signal.signal(signal.SIGTERM, _terminated)
        try:
            for f in as_completed(futures):
                yield f.result()
        except BaseException:  # Ctrl-C, SIGTERM or an error: do not start the remaining chunks, stop the running ones
            procs = list((getattr(pool, "_processes", None) or {}).values())  # the executor keeps no public handle
            for proc in procs:  # the pool, broken, fails every pending future itself: one cancelled first made
                proc.terminate()  # Python 3.11's manager die (InvalidStateError) and the exit hang on its call queue
            if not procs:
                for f in futures:
                    f.cancel()
            raise
        finally:
            if main:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _terminated(signum: int, frame: Any) -> None:
    """SIGTERM while local workers run: exit as SIGTERM's default does (status 128 + 15), through the pool's cleanup."""
    raise SystemExit(128 + signum)


def _connect(distributed: Any, address: str) -> Any:
    """``distributed.Client(address)``, given up after :data:`CONNECT_TIMEOUT_S` (+ :data:`HANDSHAKE_GRACE_S`) even
    where the peer accepts the connection and never answers (round 16: the Client's own timeout covers the TCP
    connect, not its handshake read, and ``sweep --scheduler`` at such a peer waited forever). The connection is made
    in a daemon thread (distributed runs its IO loop in a daemon thread of its own), left behind when it does not
    finish.

    A Client whose connection fails is closed here, on every path: its constructor starts that IO loop and sets the
    Client as the default before it connects, so one that raises (a peer that answers as no scheduler) was left
    half-built, its loop running, and closed from its ``__del__`` whenever the garbage collector reached it, in
    whatever thread that was: a later in-process ``LocalCluster`` deadlocked on it (round 30). The object is made
    first (``Client.__new__``) so the caller holds it whatever the constructor raises; one still connecting at the
    give-up is closed by the connect thread when its constructor returns or raises."""
    box: dict[str, Any] = {}
    lock = threading.Lock()

    def connect() -> None:
        client = distributed.Client.__new__(distributed.Client)
        try:
            client.__init__(address, timeout=f"{CONNECT_TIMEOUT_S}s")
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            _close_quietly(client)
            box["error"] = exc
        else:
            box["client"] = client
        with lock:
            if box.get("abandoned") and "client" in box:
                _close_quietly(box.pop("client"))

    thread = threading.Thread(target=connect, name="scalemodel-dask-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + HANDSHAKE_GRACE_S)
    with lock:
        box["abandoned"] = thread.is_alive()
    if box["abandoned"]:
        raise TimeoutError(f"no answer within {CONNECT_TIMEOUT_S + HANDSHAKE_GRACE_S} s (the peer accepted the "
                           "connection but did not answer as a Dask scheduler)")
    if "error" in box:
        raise box["error"]
    return box["client"]


def _close_quietly(client: Any) -> None:
    """``client.close()``, whatever it raises (a constructor that failed early may have left fields unset): the
    caller reports the connection's own error."""
    try:
        client.close()
    except Exception:  # noqa: BLE001, S110 - the connection's error is the one to report
        pass


def _dask(chunks: list[list[GridPoint]], address: str) -> Generator[list[dict[str, Any]], None, None]:
    try:
        import distributed  # optional heavy dependency (the `dask` extra): only --scheduler needs it
    except ImportError:
        raise InputError("--scheduler needs Dask distributed, which is not installed", where="--scheduler",
                         allowed="pip install 'scalemodel[dask]'") from None
    try:
        client = _connect(distributed, address)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach a Dask scheduler at {address!r}: {exc}", where="--scheduler",
                         allowed="the address of a running scheduler, e.g. tcp://10.0.0.1:8786") from None
    except Exception as exc:  # noqa: BLE001 - whatever a peer that is no scheduler makes distributed raise
        # round 16: a server that answered the handshake with other bytes (an HTTP proxy's "HTTP/1.1 ...", read as
        # a frame of 3.5e18 bytes) made distributed's reader raise numpy's MemoryError, a traceback
        shown = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise InputError(f"{address!r} did not answer as a Dask scheduler ({type(exc).__name__}: {shown})",
                         where="--scheduler",
                         allowed="the address of a running scheduler, e.g. tcp://10.0.0.1:8786") from None
    try:
        futures = client.map(run_points, chunks, pure=False)
        for f in distributed.as_completed(futures):
            yield f.result()
    finally:
        client.close()


def run_grid(spec: SweepSpec, models: dict[str, Path], clusters: dict[str, Path], *, workers: int | None = None,
             scheduler: str | None = None, progress: Callable[[int, int], None] | None = None,
             inputs: dict[str, Any] | None = None) -> GridResult:
    """Every point of the sweep ``spec`` (the engine behind `scalemodel sweep`).

    ``workers``: local processes (default: all cores, :func:`os.cpu_count`); 1 runs in this process.
    ``scheduler``: a Dask scheduler address; the points then run on that cluster instead.
    ``progress(done, total)`` is called as chunks of points finish.
    """
    t0 = time.perf_counter()
    points = grid_points(spec, models, clusters, str((inputs or {}).get("file") or ""))
    if workers is not None and workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", where="--workers", allowed="an integer >= 1")
    n = workers or os.cpu_count() or 1
    n = max(1, min(n, len(points)))
    chunks = _chunks(points, n)
    stream = _dask(chunks, scheduler) if scheduler else _local(chunks, n)
    rows: list[dict[str, Any]] = []
    if progress is not None:
        progress(0, len(points))
    try:
        for part in stream:
            rows.extend(part)
            if progress is not None:
                progress(len(rows), len(points))
    finally:  # an error or a signal in progress() (between chunks) stops the workers now, not at the generator's
        stream.close()  # collection (the traceback holds this frame): the interpreter's exit joined the pool's chunks
    rows.sort(key=lambda r: r["point"])
    warnings = _point_warnings(rows)
    for w in warnings:  # to stderr with the inputs' own warnings (the --json `warnings` has them from payload)
        notices.warn(w)
    elapsed = time.perf_counter() - t0
    cpu = sum(r["cpu_s"] or 0.0 for r in rows)
    notes = []
    errors = [r for r in rows if r["status"] == "error"]
    if errors:
        notes.append(f"{len(errors)} of {len(rows)} points could not be evaluated (status error; see message)")
    return GridResult(inputs=dict(inputs or {}), rows=rows, elapsed_s=elapsed,
                      backend=f"dask {scheduler}" if scheduler else ("in-process" if n == 1 else "local processes"),
                      workers=n if not scheduler else 0, cpu_s=cpu, notes=notes, warnings=warnings)
