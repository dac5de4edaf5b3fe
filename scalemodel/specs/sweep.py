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

#: The most grid points one sweep file may describe (a typo guard: 1e6 plans is days of CPU).
MAX_POINTS = 1_000_000


class SweepStrategy(StrategySpec, kw_only=True):
    """A fixed strategy of the grid; ``label`` names it in the table (default: tpX-ppY...)."""

    label: Annotated[Annotated[str, Meta(max_length=80)] | None, Meta(
        description="name of this strategy in the output")] = None

    def name(self) -> str:
        if self.label:
            return self.label
        parts = [f"{k}{getattr(self, k)}" for k in ("tp", "pp", "cp", "ep") if getattr(self, k) > 1]
        if self.dp is not None:
            parts.insert(0, f"dp{self.dp}")
        extra = [f"zero{self.zero}" if self.zero != "0" else "", self.recompute if self.recompute != "none" else "",
                 "sp" if self.sequence_parallel else "", self.sync if self.sync != "bsp" else ""]
        return "-".join(parts + [e for e in extra if e]) or "dp-only"


class SweepSpec(Spec, kw_only=True):
    kind: Literal["sweep"] = "sweep"
    name: str = "sweep"
    description: str = ""
    models: Annotated[list[str], Meta(min_length=1, description="built-in workload names or files")]
    clusters: Annotated[list[str], Meta(min_length=1, description="built-in cluster names or files")]
    gpus: Annotated[list[int], Meta(min_length=1, description="GPU counts")]
    strategies: Annotated[list[Literal["best"] | SweepStrategy], Meta(
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

    def size(self) -> int:
        return len(self.models) * len(self.clusters) * len(self.gpus) * len(self.strategies)


def load_sweep(path: str | Path) -> tuple[SweepSpec, dict[str, Path], dict[str, Path]]:
    """Read and validate a sweep file; returns the spec and its models and clusters resolved to files
    ({name as written: path}, relative names against the sweep file's folder)."""
    p = Path(path)
    if not files.exists(p):
        raise InputError(f"file not found: {str(p)[:200]}", where=str(p)[:200], allowed="an existing sweep YAML file")
    raw, node = read_document(p)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping of fields", where=str(p), allowed="a sweep spec (kind: sweep)")
    declared = raw.get("kind", "sweep")
    if declared != "sweep":
        raise InputError(f"this file is a {declared!r} spec", where=f"{p}: kind", allowed="a sweep (kind: sweep)")
    spec: SweepSpec = validate(SweepSpec, raw, path=p, node=node)
    if spec.size() > MAX_POINTS:
        raise InputError(f"the grid has {spec.size():,} points", where=f"{p}",
                         allowed=f"at most {MAX_POINTS:,} (split the study into several sweeps)")
    models = {_key(m, "models", p): resolve("workload", m, p.parent) for m in spec.models}
    clusters = {_key(c, "clusters", p): resolve("cluster", c, p.parent) for c in spec.clusters}
    return spec, models, clusters


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
