"""Validated input specs (msgspec Structs) and their loading from YAML, built-in names and overrides."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from scalemodel.choices import INTRA_PROTOCOLS
from scalemodel.errors import InputError
from scalemodel.specs import notices
from scalemodel.specs.accelerator import PRECISIONS, AcceleratorSpec, ComputeEfficiency
from scalemodel.specs.cluster import ClusterSpec, TierSpec, Variability
from scalemodel.specs.loader import Override, load_scenario_spec, load_spec
from scalemodel.units import format_quantity

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


def load_accelerator(ref: str | os.PathLike[str], overrides: Iterable[str] = ()) -> AcceleratorSpec:
    return load_spec("accelerator", ref, AcceleratorSpec, overrides)  # type: ignore[no-any-return]


def load_cluster(ref: str | os.PathLike[str], overrides: Iterable[str] = ()) -> ClusterSpec:
    return load_spec("cluster", ref, ClusterSpec, overrides)  # type: ignore[no-any-return]


def load_workload(ref: str | os.PathLike[str], overrides: Iterable[str] = ()) -> TransformerWorkload | GenericWorkload:
    return load_spec("workload", ref, __getattr__("Workload"), overrides)  # type: ignore[no-any-return]


def load_scenario(ref: str | os.PathLike[str], overrides: Iterable[str] = ()) -> ScenarioSpec:
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


def note_tier_bandwidth(cluster: Any, items: list[str]) -> None:
    """Say, when ``--set`` writes the bandwidth of a tier outside the node, that it is per GPU (ux19): "10 GbE" set as
    ``tiers.eth.bandwidth=10Gbit/s`` on an 8-GPU node prices an 80 Gbit/s node NIC, and nothing at the point of use
    said so. A tier inside the node, or of NCCL's NVLink or PCI class (cost/nccl.py ``_link_class``: an NVL72 rack's
    NVLink, a TPU pod's ICI, which span past the node), is per GPU in every datasheet and no node NIC, so it is not
    noted: gb200-nvl72's 72-GPU NVLink and tpu-v5p-pod's ICI were said 'a node NIC of B is B / 4 per GPU'. ``items``:
    the cluster's items as :func:`split_overrides` routes them (``tiers.X.bandwidth``), from every command that takes
    --set: predict, plan, memory and scale (commands.common.build_specs), collective and calibrate, check (a
    scenario's ``cluster.`` items, :func:`scenario_cluster_items`)."""
    gpn = int(cluster.gpus_per_node)
    for item in items:
        parts = [p.strip() for p in item.split("=", 1)[0].split(".")]
        if len(parts) != 3 or parts[0] != "tiers" or parts[2] != "bandwidth":
            continue
        # addressed as apply_overrides does: a decimal index ('1', '01') or a name
        i = int(parts[1]) if parts[1].isascii() and parts[1].isdigit() and len(parts[1]) < 10 else next(
            (j for j, t in enumerate(cluster.tiers) if t.name == parts[1]), None)
        if i is None or i >= len(cluster.tiers):
            continue
        tier, proto = cluster.tiers[i], str(cluster.tiers[i].protocol).lower()
        if tier.span <= gpn or gpn == 1 or proto in INTRA_PROTOCOLS or (i == 0 and not proto):
            continue
        per_gpu = float(tier.bandwidth)
        notices.warn(f"--set {getattr(item, 'shown', item)}: a tier's bandwidth is per GPU: {_rate(per_gpu)} per GPU "
                     f"is {_rate(per_gpu * gpn)} per node of {gpn} GPUs; a node NIC of B is B / {gpn} per GPU")


def _rate(rate: float) -> str:
    """A line rate in bytes and in bits, as datasheets and NIC names give it."""
    return f"{format_quantity(rate, 'bandwidth')} ({rate * 8 / 1e9:.4g} Gbit/s)"


def scenario_cluster_items(sets: Iterable[str]) -> list[str]:
    """The ``--set`` items of a scenario (paths from its root: ``cluster.tiers.ib.bandwidth``) that write a field of its
    cluster, routed as :func:`split_overrides` routes a command's (``tiers.ib.bandwidth``, shown as written); one that
    replaces the whole cluster (``cluster=dgx-a100``) writes no field and is not among them."""
    return split_overrides([s for s in sets if "." in s.split("=", 1)[0]
                            and s.split("=", 1)[0].split(".", 1)[0].strip() == "cluster"])["cluster"]
