"""A sweep: the grid of a capacity study, models x clusters x GPU counts x strategies, from one YAML.

```yaml
kind: sweep
name: capacity-study
models: [gpt3-175b, llama3-70b, ./my-model.yaml]   # built-in names or files (relative to this file)
clusters: [dgx-h100, dgx-a100]
gpus: [256, 512, 1024]
strategies:
  - best                                  # the planner's best strategy at each point
  - {label: tp8-pp8, tp: 8, pp: 8, zero: "1"}   # a fixed strategy (any strategy field)
training: {global_batch: 1024}            # shared by every point (default: as plan / predict)
objective: throughput                     # how `best` ranks: throughput | time-to-train | cost
```

Every point goes through the same engine entry point as the commands: ``best`` through
:func:`scalemodel.engine.planner.plan` (as `scalemodel plan`), a fixed strategy through
:func:`scalemodel.engine.predict.predict` (as `scalemodel predict`).
"""


from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from scalemodel.errors import InputError
from scalemodel.specs import files
from scalemodel.specs.base import MAX_GPUS, Spec, field_error
from scalemodel.specs.loader import read_document, resolve, validate
from scalemodel.specs.training import StrategySpec, TrainingSpec

#: The most grid points one sweep file may describe, and the most of them `best` (a typo guard, sized from what a
#: point costs). 1,000,000 points, the bound before, was 5 CPU-hours and ~3 GB of rows as fixed strategies, days as
#: `best`: a sweep that neither finished nor said why. What a point costs (fuzz32, CPU seconds by
#: ``time.process_time`` and where they go by cProfile, warm process, on the shared 2-core machine): a fixed strategy
#: 33-50 ms and ~2.8 KB of table row held until the end; a `best` point a whole plan, which prices every outer
#: candidate's bound and evaluates the survivors, so its cost follows the model and the GPU count: 0.55 s (llama3-8b
#: on 24 H100s, 51 k outer candidates), 1.2 s (gpt3-175b on 2,048, 1.1 M), 1.6 s (mixtral-8x7b on 5,040, 4.4 M),
#: 3.6 s (deepseek-v3 on 2,048) and 11.5 s (deepseek-v3 on 5,040, 4.6 M: 61 layers that few pipeline degrees divide,
#: so the uneven stages' compute and memory are priced stage by stage, ~70% of its search). A worker process's first
#: point adds 0.5-0.9 s (imports and caches). So 100,000 fixed points are ~1-1.4 CPU-hours, 10,000 `best` points 1.5
#: to 32 CPU-hours, and a 2,048-point sweep of GPU counts (strategies default to `best`) 20 minutes to 7 hours of CPU:
#: what fuzz31 saw run for minutes on all cores was that budget, not a defect. The refusal says so; a larger study
#: is several sweeps, or a Dask cluster (README.md, "Capacity studies").
MAX_POINTS = 100_000
MAX_PLAN_POINTS = 10_000
#: Measured CPU seconds of one point (the comment above), the range the refusals quote: fixed, then `best`.
POINT_CPU_S = {"fixed": (0.033, 0.05), "best": (0.55, 11.5)}


def _cpu_hours(points: int, kind: str) -> str:
    lo, hi = (points * s / 3600 for s in POINT_CPU_S[kind])
    return f"{lo:.2g}-{hi:.2g} CPU-hours at {POINT_CPU_S[kind][0]:g}-{POINT_CPU_S[kind][1]:g} s a point"


class SweepStrategy(StrategySpec, kw_only=True):
    """A fixed strategy of the grid; ``label`` names it in the table (default: tpX-ppY...)."""

    label: Annotated[Annotated[str, Meta(max_length=80)] | None, Meta(
        description="name of this strategy in the output")] = None

    def name(self) -> str:
        return self.label or default_name(self)


def default_name(s: StrategySpec) -> str:
    """A fixed strategy's name in the sweep table when it has no label: tpX-ppY-cpZ-epW (degrees above 1, dpN first
    where given), then zeroK, the recompute mode, sp, a sync mode other than bsp; dp-only where none is. The sweep
    names a priced row by the strategy with its unset ``sequence_parallel`` as priced (engine.grid._run_point)."""
    parts = [f"{k}{getattr(s, k)}" for k in ("tp", "pp", "cp", "ep") if getattr(s, k) > 1]
    if s.dp is not None:
        parts.insert(0, f"dp{s.dp}")
    extra = [f"zero{s.zero}" if s.zero != "0" else "", s.recompute if s.recompute != "none" else "",
             "sp" if s.sequence_parallel else "", s.sync if s.sync != "bsp" else ""]
    return "-".join(parts + [e for e in extra if e]) or "dp-only"


class SweepSpec(Spec, kw_only=True):
    kind: Literal["sweep"] = "sweep"
    name: str = "sweep"
    description: str = ""
    models: Annotated[list[str], Meta(min_length=1, description="built-in workload names or files")]
    clusters: Annotated[list[str], Meta(min_length=1, description="built-in cluster names or files")]
    # each count typed with its range: the allowed text of a refused entry said "an integer from -1e+09 to 1e+09"
    gpus: Annotated[list[Annotated[int, Meta(gt=0, le=MAX_GPUS)]], Meta(min_length=1, description="GPU counts")]
    strategies: Annotated[list[Literal["best"] | SweepStrategy], Meta(
        min_length=1,
        description="`best` (the planner's best strategy) or a strategy mapping (any strategy field, plus label)")] = \
        msgspec.field(default_factory=lambda: ["best"])
    training: Annotated[TrainingSpec, Meta(description="shared by every point")] = msgspec.field(
        default_factory=TrainingSpec)
    objective: Annotated[Literal["throughput", "time-to-train", "cost"], Meta(
        description="how `best` ranks the candidates")] = "throughput"

    def _check(self) -> None:
        if any(not 0 < n <= MAX_GPUS for n in self.gpus):
            raise field_error("gpus", f"GPU counts must be integers from 1 to {MAX_GPUS:.0e}",
                              f"a list of counts, each from 1 to {MAX_GPUS:.0e}")
        # a repeated entry runs every point it spans again and prints the same rows twice (``strategies: [best,
        # best, ...]`` x 1000 GPU counts was 1,000,000 plans of 1,000 distinct ones)
        for name, values in (("models", self.models), ("clusters", self.clusters), ("gpus", self.gpus)):
            _no_repeat(name, [(str(v), repr(v if isinstance(v, int) else str(v)[:60])) for v in values])
        _no_repeat("strategies", [("best", "best") if st == "best" else
                                  (msgspec.json.encode(st).decode(), "the same strategy") for st in self.strategies])
        # by the name each row shows: a fixed strategy labelled "best" beside the planner's, or two whose default
        # names agree ({tp: 2} and {tp: 2, overlap: false} are both tp2), gave rows no reader could tell apart
        _no_repeat("strategies", [("best", "best") if st == "best" else
                                  (st.name(), f"label {st.label!r}" if st.label else f"default name {st.name()!r}")
                                  for st in self.strategies])

    def size(self) -> int:
        return len(self.models) * len(self.clusters) * len(self.gpus) * len(self.strategies)

    def plan_points(self) -> int:
        """Points that run the planner (a `best` strategy)."""
        return len(self.models) * len(self.clusters) * len(self.gpus) * sum(s == "best" for s in self.strategies)


def _no_repeat(field: str, entries: list[tuple[str, str]]) -> None:
    """Refuse the second of two equal entries (key, how the error shows it) of a list field."""
    seen: dict[str, tuple[int, str]] = {}
    for i, (key, shown) in enumerate(entries):
        if key in seen:
            j, first = seen[key]
            also = f" ({first})" if first and first != shown else ""  # "best repeats strategies[0] (label 'best')"
            raise field_error(field, f"{field}[{i}]: {shown} repeats {field}[{j}]{also}",
                              "each entry once (a repeat runs the same points again)"
                              + ("; distinct labels" if field == "strategies" else ""))
        seen[key] = (i, shown)


def load_sweep(path: str | Path) -> tuple[SweepSpec, dict[str, Path], dict[str, Path]]:
    """Read and validate a sweep file; returns the spec and its models and clusters resolved to files
    ({name as written: path}, relative names against the sweep file's folder)."""
    files.refuse_trailing_slash(path, "sweep file")
    p = Path(path)
    if not files.exists(p):
        what = files.missing_what(p)
        raise InputError(f"{what}: {str(p)[:200]}" if what == "file not found" else what, where=str(p)[:200],
                         allowed="an existing sweep YAML file")
    raw, node = read_document(p)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping of fields", where=str(p), allowed="a sweep spec (kind: sweep)")
    declared = raw.get("kind", "sweep")
    if declared != "sweep":
        raise InputError(f"this file is a {declared!r} spec", where=f"{p}: kind", allowed="a sweep (kind: sweep)")
    spec: SweepSpec = validate(SweepSpec, raw, path=p, node=node)
    if spec.size() > MAX_POINTS:
        raise InputError(f"the grid has {spec.size():,} points", where=f"{p}",
                         allowed=f"at most {MAX_POINTS:,} (split the study into several sweeps), as fixed strategies "
                                 f"{_cpu_hours(MAX_POINTS, 'fixed')}")
    if spec.plan_points() > MAX_PLAN_POINTS:
        raise InputError(f"the grid has {spec.plan_points():,} best points, each a whole plan "
                         f"({_cpu_hours(spec.plan_points(), 'best')}, by the model and GPU count)",
                         where=f"{p}: strategies", allowed=f"at most {MAX_PLAN_POINTS:,} best points (split the study "
                                                           "into several sweeps, or fix some strategies)")
    models = {_key(m, "models", p): _resolve_entry("workload", "models", i, m, p) for i, m in enumerate(spec.models)}
    clusters = {_key(c, "clusters", p): _resolve_entry("cluster", "clusters", i, c, p)
                for i, c in enumerate(spec.clusters)}
    for field, found in (("models", models), ("clusters", clusters)):
        _no_repeat_file(field, found, p)
    return spec, models, clusters


def _resolve_entry(kind: str, field: str, i: int, ref: str, path: Path) -> Path:
    """``resolve`` of one models/clusters entry, an error located at the sweep file and the entry: an unknown name
    was "error: cluster: unknown built-in cluster 'nope'", naming neither the sweep file nor which entry."""
    try:
        return Path(resolve(kind, ref, path.parent))  # a Path: load_spec reads it as found
    except InputError as exc:
        inner = exc.where if exc.where and exc.where not in (kind, "--model") else ""
        what = f"{inner}: {exc.what}" if inner else exc.what
        raise InputError(what, where=f"{path}: {field}[{i}]", allowed=exc.allowed) from None


def _no_repeat_file(field: str, found: dict[str, Path], path: Path) -> None:
    """Refuse two entries naming one file: ``models: [m.yaml, ./m.yaml]`` passed the repeat check (the names
    differ) and ran every point of the model twice, each row printed twice."""
    seen: dict[Path, int] = {}
    for i, (name, resolved) in enumerate(found.items()):
        key = resolved.resolve()
        if key in seen:
            first = list(found)[seen[key]]
            raise InputError(f"{field}[{i}]: {name[:60]!r} is the file of {field}[{seen[key]}] ({first[:60]!r})",
                             where=f"{path}: {field}", allowed="each file once (a repeat runs the same points again)")
        seen[key] = i


def _key(name: str, field: str, path: Path) -> str:
    if not name.strip():
        raise InputError("an empty name", where=f"{path}: {field}", allowed="a built-in name or a file")
    return name


def sweep_raw_example() -> dict[str, Any]:
    """The module docstring's example as data (tests and docs use it)."""
    return {"kind": "sweep", "name": "capacity-study", "models": ["gpt3-175b", "llama3-70b"],
            "clusters": ["dgx-h100", "dgx-a100"], "gpus": [256, 512, 1024],
            "strategies": ["best", {"label": "tp8-pp8", "tp": 8, "pp": 8, "zero": "1"}],
            "training": {"global_batch": 1024}, "objective": "throughput"}
