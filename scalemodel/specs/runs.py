"""Read measured training runs (``calibrate runs FILE``): a YAML list or a CSV table.

Each run (a YAML mapping, or a CSV row under a header line) names ``cluster``, ``model`` and ``gpus``
as a scenario does, any :class:`~scalemodel.specs.training.TrainingSpec` or
:class:`~scalemodel.specs.training.StrategySpec` field by its own name (``tp``, ``pp``, ``zero``,
``micro_batch``, ``global_batch``, ``precision``, ...), an optional ``name``, and exactly one measurement:
``step_time`` (seconds, or with a unit: ``1.2 s``, ``950ms``), ``tokens_per_s`` (whole job), or ``log``: a
Megatron-LM, DeepSpeed or torchtitan training log (a path relative to the runs file) whose median
iteration speed after ``warmup_steps`` (default 10) is the measurement (:mod:`scalemodel.specs.train_logs`).
A YAML file may also be a mapping with the list under ``runs:``. CSV cells are read as YAML scalars
(``8`` is an integer, ``true`` a boolean); an empty cell is absent. Cluster and model names are
built-in names or paths relative to the runs file's folder. The file is read through
:mod:`scalemodel.specs.files` (a regular file of at most :data:`~scalemodel.specs.files.MAX_SPEC_BYTES`;
at most :data:`MAX_RUNS` runs); every error names the file, the run and the field.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalemodel.errors import InputError, folded
from scalemodel.specs import files, yamlread
from scalemodel.specs.cluster import ClusterSpec
from scalemodel.specs.loader import _parse_value, load_spec, resolve, validate
from scalemodel.specs.train_logs import DEFAULT_WARMUP, LogSpeed, read_train_log
from scalemodel.specs.training import StrategySpec, TrainingSpec, check_derived_batch
from scalemodel.specs.workload import Workload
from scalemodel.units import parse_quantity

MAX_RUNS = 1000
#: The largest warmup_steps: beyond any logged run (a step a second for 30 years).
MAX_WARMUP = 10**9
RUN_KEYS = ("name", "cluster", "model", "gpus", "step_time", "tokens_per_s", "log", "warmup_steps")
ALLOWED = "a list of runs with cluster, model, gpus, step_time, tokens_per_s or log, and training/strategy fields"
#: What a runs file writes instead of a YAML merge key: it has no ``extends:`` (ux38b: the refusal suggested it).
MERGE_ALLOWED = ("each run's fields written out (an alias *anchor may stand for a whole value, such as a stage_layers "
                 "list); a runs file has no extends: (a cluster or model file a run names may have one)")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run, its specs validated."""

    label: str
    cluster_ref: str      # as written in the file
    cluster_path: Path    # the file it resolved to
    cluster: Any          # ClusterSpec
    workload: Any
    gpus: int
    training: Any         # TrainingSpec
    strategy: Any         # StrategySpec
    step_time_s: float | None
    tokens_per_s: float | None
    where: str = ""       # file and run, for errors found later
    log: LogSpeed | None = None  # the training log the measurement came from, if any


def _refuse_other_keys(doc: dict[Any, Any], node: Any, name: str) -> None:
    """A runs file written as a mapping has the one key ``runs`` (the list): any other is named, with its line (ux38b:
    ``runs: [...]`` beside ``note: ...`` was "expected a list of runs", the key not named). A mapping of one run's
    fields (``cluster: ...`` at the top) is told to be a list item."""
    other = [k for k in doc if k != "runs"]
    if not other:
        return
    key = other[0]
    line = next((k.start_mark.line + 1 for k, _ in getattr(node, "value", []) if getattr(k, "value", None) == str(key)),
                None)
    where = f"{name}:{line}" if line else name
    if "runs" not in doc and (str(key) in RUN_KEYS or str(key) in TrainingSpec.model_fields
                              or str(key) in StrategySpec.model_fields):
        raise InputError(f"a mapping of one run's fields ({str(key)[:40]!r} at the top), not a list of runs",
                         where=where, allowed=f"each run a list item ('- cluster: ...'), or the list under runs:; "
                                              f"{ALLOWED}")
    raise InputError(f"unknown top-level key {str(key)[:60]!r}", where=f"{where}: {str(key)[:60]}",
                     allowed="a runs file is a list of runs, or a mapping with the one key runs: (the list); "
                             "a run's fields go in each run")


def _rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    text = files.read_text(path, limit=files.MAX_SPEC_BYTES, what="runs file")
    name = str(path)
    if path.suffix.lower() == ".csv":
        # newline=None: universal newlines, so a file saved with bare CR line ends (classic Mac, some spreadsheet
        # exports) reads as rows, not "new-line character seen in unquoted field - do you need to open the file in
        # universal-newline mode?"
        reader = csv.reader(io.StringIO(text, newline=None))
        try:
            lines = [r for r in reader if any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
        except csv.Error as exc:  # e.g. a cell over the csv module's 128 KiB field limit
            raise InputError(f"malformed CSV on line {reader.line_num}: {folded(exc)}", where=name,
                             allowed="a CSV header naming the columns, then a run a row") from None
        if not lines:
            raise InputError("no header line", where=name, allowed="a CSV header naming the columns, then a run a row")
        header = [h.strip() for h in lines[0]]
        if len(set(header)) != len(header) or "" in header:
            raise InputError(f"header {header} has an empty or repeated column", where=name,
                             allowed="each column named once")
        out = []
        for i, cells in enumerate(lines[1:], start=1):
            where = f"{name}: row {i}"
            if len(cells) != len(header):
                raise InputError(f"{len(cells)} cells under a header of {len(header)}", where=where,
                                 allowed="one cell per column (leave a cell empty for absent)")
            out.append((where, {h: _parse_value(c.strip(), f"{where}: {h}") for h, c in zip(header, cells, strict=True)
                                if c.strip()}))
        return out
    doc, node = yamlread.load(text, name, merge_allowed=MERGE_ALLOWED)
    if isinstance(doc, dict) and doc:
        _refuse_other_keys(doc, node, name)
    if isinstance(doc, dict) and set(doc) == {"runs"}:
        doc = doc["runs"]
        node = next((v for k, v in node.value if k.value == "runs"), None) if node is not None else None
    if not isinstance(doc, list):
        raise InputError("expected a list of runs", where=name, allowed=ALLOWED)
    out = []
    for i, item in enumerate(doc, start=1):
        line = ""
        if node is not None and hasattr(node, "value") and i - 1 < len(node.value):
            line = f" (line {node.value[i - 1].start_mark.line + 1})"
        where = f"{name}: run {i}{line}"
        if not isinstance(item, dict):
            raise InputError(f"{str(item)[:40]!r} is not a mapping", where=where, allowed=ALLOWED)
        out.append((where, item))
    return out


def _measurement(row: dict[str, Any], where: str) -> tuple[float | None, float | None]:
    given = [k for k in ("step_time", "tokens_per_s", "log") if row.get(k) is not None]
    if len(given) != 1:
        raise InputError("needs exactly one of step_time, tokens_per_s, log" + (" (more given)" if given else ""),
                         where=where, allowed="step_time: 1.2 s, tokens_per_s: 150000 (whole job), or log: train.log")
    key = given[0]
    if key == "log":
        return None, None
    v = row[key]
    if isinstance(v, (bool, list, dict)):
        raise InputError(f"{str(v)[:40]!r} is not a number", where=f"{where}: {key}", allowed="a positive number")
    x = parse_quantity(v, "time", where=f"{where}: {key}") if key == "step_time" else v
    if not isinstance(x, (int, float)):  # tokens_per_s: '1e5' (a quoted string) was "must be a positive finite number"
        raise InputError(f"{str(v)[:40]!r} is not a number", where=f"{where}: {key}",
                         allowed="a number > 0 of tokens per second (the whole job), not quoted")
    if not (math.isfinite(x) and x > 0):
        raise InputError(f"{str(v)[:40]!r} must be a positive finite number", where=f"{where}: {key}",
                         allowed="a number > 0 (seconds for step_time, tokens per second for tokens_per_s)")
    # beyond the bounds: said by _plausible (1e300 s was "must be a positive finite number", which it is)
    return _plausible(float(x), None, f"{where}: {key}") if key == "step_time" else _plausible(None, float(x),
                                                                                              f"{where}: {key}")


#: The shortest step time a run may report: far below any training step (a kernel launch takes microseconds),
#: and far enough above the float range's bottom that the fit's ratios stay finite.
MIN_STEP_S = 1e-6
#: The longest: 1e12 s (the bound step_time has always had), for a step derived from a rate as well
#: (tokens_per_s, a DeepSpeed log's samples per second), where 1e-300 tokens/s made a step of 1e305 s.
MAX_STEP_S = 1e12


def _plausible(step: float | None, tokens: float | None, where: str) -> tuple[float | None, float | None]:
    if step is not None and step < MIN_STEP_S:
        raise InputError(f"a step time of {step:.3g} s is shorter than any training step", where=where,
                         allowed=f"a step time of at least {MIN_STEP_S:g} s")
    if step is not None and step > MAX_STEP_S:
        raise InputError(f"a step time of {step:.3g} s is longer than any training step", where=where,
                         allowed=f"a step time of at most {MAX_STEP_S:g} s")
    if tokens is not None and tokens > 1e12:
        raise InputError(f"{tokens:.3g} tokens per second is beyond any training job", where=where,
                         allowed="at most 1e12 tokens per second")
    return step, tokens


def read_runs(path: str | Path) -> list[MeasuredRun]:
    """The measured runs of a YAML or CSV file (module docstring)."""
    files.refuse_trailing_slash(path, "runs file")
    path = Path(path)
    rows = _rows(path)
    if not rows:
        raise InputError("no runs", where=str(path), allowed=ALLOWED)
    if len(rows) > MAX_RUNS:
        raise InputError(f"{len(rows)} runs", where=str(path), allowed=f"at most {MAX_RUNS} runs")
    folder = path.parent
    specs: dict[tuple[str, str], Any] = {}
    seen: dict[tuple[str, str], str] = {}  # (name | configuration | log, its key) -> the run that gave it first
    labels: dict[str, str] = {}  # a run's label (table rows, the overlay's calibration block) -> the run that has it
    names: dict[str, str] = {}  # a run's name as written -> the run
    tr_fields, st_fields = set(TrainingSpec.model_fields), set(StrategySpec.model_fields)
    out = []
    for where, row in rows:
        keys = [str(k) for k in row]
        unknown = [k for k in keys if k not in RUN_KEYS and k not in tr_fields and k not in st_fields]
        if unknown:
            raise InputError(f"unknown field {unknown[0][:60]!r}", where=where,
                             allowed=f"{', '.join(RUN_KEYS)}, or a training/strategy field such as tp, pp, zero, "
                                     "micro_batch, global_batch, precision")
        for key in ("cluster", "model"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise InputError(f"missing or not a name: {str(row.get(key))[:40]!r}", where=f"{where}: {key}",
                                 allowed="a built-in name or a path relative to the runs file")
        gpus = row.get("gpus")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 10**8:
            raise InputError(f"{str(gpus)[:40]!r} is not a GPU count", where=f"{where}: gpus",
                             allowed="a whole number from 1 to 1e8")
        step, tokens = _measurement(row, where)
        if row.get("warmup_steps") is not None and row.get("log") is None:
            raise InputError("warmup_steps without a log", where=f"{where}: warmup_steps",
                             allowed="warmup_steps only with log: FILE")
        kinds = (("cluster", ClusterSpec), ("workload", Workload))
        loaded = []
        for (kind, model), key in zip(kinds, ("cluster", "model"), strict=True):
            if (kind, row[key]) not in specs:
                try:
                    p = Path(resolve(kind, row[key], folder))  # a Path: load_spec reads it as found
                    specs[(kind, row[key])] = (p, load_spec(kind, p, model))
                except InputError as exc:
                    raise exc.at(f"{where}: {key}") from None
            loaded.append(specs[(kind, row[key])])
        (cpath, cl), (wpath, wl) = loaded
        if gpus > cl.largest_gpus:
            raise InputError(f"{gpus} GPUs: more than cluster {cl.name!r} has ({cl.largest_gpus})",
                             where=f"{where}: gpus", allowed=f"at most {cl.largest_gpus}")
        try:
            tr = validate(TrainingSpec, {k: v for k, v in row.items() if k in tr_fields})
            st = validate(StrategySpec, {k: v for k, v in row.items() if k in st_fields})
        except InputError as exc:
            raise exc.at(where) from None
        # a derived global batch past the bound, as predict refuses it (it was priced: 6.4e9 sequences a step)
        check_derived_batch(tr, st, gpus, f"{where}: micro_batch", "global_batch")
        log = None
        if row.get("log") is not None:
            step, tokens, log = _from_log(row, folder, where, gpus, tr)
            step, tokens = _plausible(step, tokens, f"{where}: log: {log.path}")
        label = str(row.get("name") or f"{cl.name} {wl.name} {gpus}")[:80]
        if row.get("name") and (str(row["name"]) in names or label in labels):  # labels: names are cut to 80
            raise InputError(f"name {str(row['name'])[:60]!r} is also " + (
                f"{names[str(row['name'])]}'s" if str(row["name"]) in names else
                f"{labels[label]}'s label (a run's label is its name's first 80 characters, or cluster, model and "
                "GPUs when unnamed)"), where=f"{where}: name", allowed="a name given to one run only")
        # the files' real paths: "c.yaml" and "../runs/c.yaml" (or a link to it) are one cluster
        _once(seen, where, f"{os.path.realpath(cpath)}|{os.path.realpath(wpath)}|{gpus}|{tr!r}|{st!r}", log)
        if label in labels:  # two unnamed runs that differ in a training/strategy field
            label = f"{label[:60]} ({where.rsplit(': ', 1)[-1]})"
        labels[label] = where.rsplit(": ", 1)[-1]
        if row.get("name"):
            names[str(row["name"])] = labels[label]
        out.append(MeasuredRun(label, row["cluster"], cpath, cl, wl, gpus, tr, st, step, tokens, where, log))
    return out


def _once(seen: dict[tuple[str, str], str], where: str, config: str, log: LogSpeed | None) -> None:
    """Refuse a run that repeats an earlier one's configuration or training log (a repeated name, or label, is refused
    by :func:`read_runs`: it made two rows of the residual table and of the overlay's calibration block that nothing
    tells apart). A repeated configuration was fitted as two runs, and leave-one-out predicted each twin from the
    other (a band as narrow as the in-sample one); one log given to two runs is one measurement counted twice, for two
    configurations."""
    run = where.rsplit(": ", 1)[-1]  # "run 2 (line 9)" of a YAML file, "row 2" of a CSV table
    if first := seen.get(("configuration", config)):
        raise InputError(f"same cluster, model, GPUs, training and strategy as {first} (a repeated measurement)",
                         where=where,
                         allowed="one run per configuration: the median of repeated measurements, as one run")
    log_key = None if log is None else os.path.realpath(log.path)
    if log_key is not None and (first := seen.get(("log", log_key))):
        raise InputError(f"{str(log.path if log else '')[-80:]!r} is also {first}'s log (one log is one run's "
                         "measurement)", where=f"{where}: log", allowed="each run's own training log")
    seen[("configuration", config)] = run
    if log_key is not None:
        seen[("log", log_key)] = run


def _from_log(row: dict[str, Any], folder: Path, where: str, gpus: int, training: Any
              ) -> tuple[float | None, float | None, LogSpeed]:
    """(step_time, tokens_per_s, the log's reading) of a run measured by ``log: FILE``: Megatron's
    iteration time as is; DeepSpeed's samples/s of the whole job as global_batch / X; torchtitan's
    tokens/s per GPU as X x gpus tokens/s of the job."""
    ref, warm = row["log"], row.get("warmup_steps", DEFAULT_WARMUP)
    if not isinstance(ref, str) or not ref:
        raise InputError(f"{str(ref)[:40]!r} is not a file name", where=f"{where}: log",
                         allowed="a path to a training log, relative to the runs file")
    # fuzz34: 1e9 (a whole number, as spec integer fields take it) was "not a step count"; the bound was not said
    written = warm
    if isinstance(warm, float) and warm.is_integer():
        warm = int(warm)
    if isinstance(warm, bool) or not isinstance(warm, int) or not 0 <= warm <= MAX_WARMUP:
        # the value as written (fuzz38: 1e308 was shown as int(1e308)'s first 40 of 309 digits, null as 'None')
        text = "null" if written is None else repr(written) if isinstance(written, float) else str(written)
        raise InputError(f"{text[:40]!r} is not a step count", where=f"{where}: warmup_steps",
                         allowed=f"a whole number from 0 to {MAX_WARMUP:.0e} (logged steps up to it are dropped)")
    path = Path(ref) if Path(ref).is_absolute() else folder / ref
    try:
        if ref.endswith("/"):  # the Path dropped it
            files.refuse_trailing_slash(f"{path}/", "training log")
        speed = read_train_log(path, warmup_steps=warm)
    except InputError as exc:
        raise exc.at(f"{where}: log") from None
    if speed.quantity == "step_time_s":
        return speed.value, None, speed
    if speed.quantity == "tokens_per_s_per_gpu":
        return None, speed.value * gpus, speed
    if training.global_batch is None:
        raise InputError("a DeepSpeed log gives samples per second; the step time needs the global batch",
                         where=f"{where}: global_batch", allowed="global_batch: the run's train_batch_size")
    return float(training.global_batch) / speed.value, None, speed
