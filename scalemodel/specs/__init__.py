"""Validated input specs (msgspec Structs) and their loading from YAML, built-in names and overrides."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalemodel.errors import InputError
from scalemodel.specs.accelerator import PRECISIONS, AcceleratorSpec, ComputeEfficiency
from scalemodel.specs.cluster import ClusterSpec, TierSpec, Variability
from scalemodel.specs.loader import Override, load_scenario_spec, load_spec

if TYPE_CHECKING:
    from scalemodel.specs.scenario import Assertions, ScenarioSpec
    from scalemodel.specs.training import StrategySpec, TrainingSpec
    from scalemodel.specs.workload import GenericWorkload, MoESpec, TransformerWorkload, Workload

#: Re-exported on first use (PEP 562), as scalemodel/__init__.py does, so a query that reads only a
#: cluster (collective, hardware) never imports the workload, training and scenario specs.
_LAZY = {
    "Assertions": "scalemodel.specs.scenario", "ScenarioSpec": "scalemodel.specs.scenario",
    "StrategySpec": "scalemodel.specs.training", "TrainingSpec": "scalemodel.specs.training",
    "GenericWorkload": "scalemodel.specs.workload", "MoESpec": "scalemodel.specs.workload",
    "TransformerWorkload": "scalemodel.specs.workload", "Workload": "scalemodel.specs.workload",
}

__all__ = [
    "PRECISIONS", "AcceleratorSpec", "Assertions", "ClusterSpec", "ComputeEfficiency", "GenericWorkload",
    "MoESpec", "ScenarioSpec", "StrategySpec", "TierSpec", "TrainingSpec", "TransformerWorkload",
    "Variability", "Workload", "load_accelerator", "load_cluster", "load_scenario", "load_workload",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scalemodel.specs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_accelerator(ref: str | Path, overrides: Iterable[str] = ()) -> AcceleratorSpec:
    return load_spec("accelerator", ref, AcceleratorSpec, overrides)  # type: ignore[no-any-return]


def load_cluster(ref: str | Path, overrides: Iterable[str] = ()) -> ClusterSpec:
    return load_spec("cluster", ref, ClusterSpec, overrides)  # type: ignore[no-any-return]


def load_workload(ref: str | Path, overrides: Iterable[str] = ()) -> TransformerWorkload | GenericWorkload:
    return load_spec("workload", ref, __getattr__("Workload"), overrides)  # type: ignore[no-any-return]


def load_scenario(ref: str | Path, overrides: Iterable[str] = ()) -> ScenarioSpec:
    """A scenario file or built-in scenario name; names, paths and ``extends:`` inside it resolve
    against its folder (see :func:`scalemodel.specs.loader.load_scenario_spec`)."""
    return load_scenario_spec(ref, __getattr__("ScenarioSpec"), overrides)[0]  # type: ignore[no-any-return]


def split_overrides(sets: Iterable[str]) -> dict[str, list[str]]:
    """Route ``--set`` paths by their first part: cluster., accelerator., model., training., strategy."""
    roots = {"cluster": "cluster", "accelerator": "cluster", "model": "model", "workload": "model",
             "training": "training", "strategy": "strategy"}
    out: dict[str, list[str]] = {"cluster": [], "model": [], "training": [], "strategy": []}
    for item in sets:
        head = item.split("=", 1)[0].split(".", 1)[0].strip()
        if head in roots and "." not in item.split("=", 1)[0]:  # "--set cluster" was "does not start with a known root"
            raise InputError(f"override {item!r} names no field of {head}", where="--set",
                             allowed=f"{head}.<field>=VALUE, e.g. {head}.name=x")
        if "=" not in item and head in roots:  # was refused after the root was cut off: "override 'gpus_per_node'"
            raise InputError(f"override {item!r} has no '='", where="--set",
                             allowed=f"{item.strip()}=VALUE")
        if head not in roots:
            raise InputError(f"override {item!r} does not start with a known root", where="--set",
                             allowed="cluster.<field>, accelerator.<field>, model.<field>, training.<field> "
                                     "or strategy.<field>, e.g. cluster.tiers.ib.bandwidth=100Gbps")
        rest = item.split(".", 1)[1]
        shown = item.split("=", 1)[0].strip()
        out[roots[head]].append(Override(f"accelerator.{rest}" if head == "accelerator" else rest, shown))
    return out
