"""The spec catalog as data: built-in accelerators, clusters, workloads and scenarios, and any spec found by
name or file (the engine behind `scalemodel hardware`)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalemodel import specs
from scalemodel.engine.job import (
    model_param_counts,
    scenario_training_fits,
    transformer_shape,
    warn_published_params,
)
from scalemodel.errors import InputError
from scalemodel.specs import load_accelerator, load_cluster, load_scenario, load_workload
from scalemodel.specs.files import exists, missing_what
from scalemodel.specs.frameworks import MEGATRON_MARK
from scalemodel.specs.loader import (
    _DEEPSPEED_KEYS,
    _FRAMEWORK_SUFFIXES,
    Override,
    builtin_names,
    builtin_path,
    read_document,
)
from scalemodel.specs.sweep import load_sweep


@dataclass(frozen=True)
class Catalog:
    """Summaries of the built-in accelerators, clusters, workloads and scenarios (SI units)."""

    accelerators: list[dict[str, Any]]
    clusters: list[dict[str, Any]]
    workloads: list[dict[str, Any]] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)

    def payload(self) -> dict[str, Any]:
        return {"inputs": {}, "accelerators": self.accelerators, "clusters": self.clusters,
                "workloads": self.workloads, "scenarios": self.scenarios}


@dataclass(frozen=True)
class SpecView:
    """One spec, resolved: its kind, the validated spec and how it was asked for."""

    kind: str
    spec: Any
    inputs: dict[str, Any]


def catalog() -> Catalog:
    """The built-in accelerators, clusters, workloads and scenarios, summarised."""
    accs = []
    for name in builtin_names("accelerator"):
        a = load_accelerator(name)
        accs.append({"name": a.name, "description": a.description, "bf16_flops_per_s": a.peak_flops.get("bf16"),
                     "memory_bytes": a.memory,
                     # what every command takes as the capacity: the driver's total less the slice it keeps from CUDA
                     "memory_allocatable_bytes": a.memory - (a.memory_reserved or 0.0),
                     "memory_bandwidth_Bps": a.memory_bandwidth, "tdp_w": a.tdp})
    clusters = []
    for name in builtin_names("cluster"):
        c = load_cluster(name)
        clusters.append({
            "name": c.name, "description": c.description, "accelerator": c.accelerator.name,
            "gpus_per_node": c.gpus_per_node, "max_gpus": c.largest_gpus,
            "tiers": [{"name": t.name, "span": t.span, "bandwidth_Bps": t.bandwidth, "latency_s": t.latency,
                       "efficiency": t.efficiency} for t in c.tiers]})
    workloads = []
    for name in builtin_names("workload"):
        w = load_workload(name)
        shape = ({"layers": w.layers, "hidden": w.hidden, "heads": w.heads, "seq_len": w.seq_len,
                  "moe_experts": w.moe.experts if w.moe is not None else 0}
                 if w.kind == "transformer" else {"flops_per_sample": w.flops_per_sample})
        # params: the count the file states (published, for checking); params_priced: the count its shape gives,
        # which every command prices (a workload that states none, Nemotron 3 Super, showed no size at all)
        priced = (float(model_param_counts(transformer_shape(w))[0]) if w.kind == "transformer"
                  else float(w.params))
        workloads.append({"name": w.name, "kind": w.kind, "description": w.description,
                          "params": getattr(w, "params", None), "params_priced": priced, **shape})
    scenarios = []
    for name in builtin_names("scenario"):
        sc = load_scenario(name)
        scenarios.append({"name": sc.name, "cluster": sc.cluster.name, "model": sc.model.name, "gpus": sc.gpus,
                          "mode": sc.mode, "best": sc.best, "description": sc.description})
    return Catalog(accelerators=accs, clusters=clusters, workloads=workloads, scenarios=scenarios)


#: The kinds of built-in spec, in the order a name is looked up.
_BUILTIN_KINDS = ("cluster", "accelerator", "workload", "scenario")


def _find(name: str) -> tuple[str, Any]:
    for kind in _BUILTIN_KINDS:  # every kind `hardware list` shows
        if builtin_path(kind, name) is not None:
            return kind, name
    if exists(name):  # a FIFO, a device or a directory is refused when read
        return _kind_of(Path(name)), Path(name)
    names = [n for kind in _BUILTIN_KINDS for n in builtin_names(kind)]
    near = difflib.get_close_matches(name[:100], names, n=3, cutoff=0.4)
    shown = name if len(name) <= 100 else f"{name[:60]}... ({len(name)} characters)"
    raise InputError(f"unknown built-in spec {shown!r}", where="hardware show",
                     allowed=(f"did you mean {', '.join(near)}? " if near else "") + "see `scalemodel hardware list`")


#: What ``hardware validate`` says of a strategy file (round 15: a torchtitan TOML was "malformed YAML: did not find
#: expected <document start>", a launch script "expected a mapping of fields", kind: strategy "cannot tell what kind
#: of spec this is").
_STRATEGY_FILE = ("an accelerator, cluster, workload, scenario or sweep spec; a strategy file is read where it is "
                  "used: --strategy FILE of predict, plan, scale, memory or sensitivity, whose errors name the file")


def _kind_of(path: Path) -> str:
    if path.name.endswith(_FRAMEWORK_SUFFIXES):  # read as YAML: "malformed YAML" of a TOML, a mapping of a script
        raise InputError("a training framework's launch config (a torchtitan TOML or Megatron-LM flags), not a spec",
                         where=str(path), allowed=_STRATEGY_FILE)
    data, _ = read_document(path)
    if isinstance(data, str) and MEGATRON_MARK.search(data):
        raise InputError("Megatron-LM flags (a launch script), not a spec", where=str(path), allowed=_STRATEGY_FILE)
    if isinstance(data, dict) and (data.get("kind") == "strategy" or any(k in data for k in _DEEPSPEED_KEYS)):
        what = "a scalemodel strategy file" if data.get("kind") == "strategy" else "a DeepSpeed config"
        raise InputError(f"{what}, not a spec", where=str(path), allowed=_STRATEGY_FILE)
    if path.suffix == ".json" and isinstance(data, dict) and ("num_hidden_layers" in data or "n_layer" in data):
        return "workload"
    if not isinstance(data, dict):
        raise InputError("expected a mapping of fields", where=str(path), allowed="a spec with a `kind:` field")
    kind = data.get("kind")
    if kind in ("transformer", "generic"):
        return "workload"
    if kind in ("accelerator", "cluster", "scenario", "sweep"):
        return str(kind)
    if "tiers" in data or "extends" in data and "accelerator" in data:
        return "cluster"
    if "peak_flops" in data:
        return "accelerator"
    raise InputError(f"cannot tell what kind of spec this is (kind: {kind!r})", where=f"{path}: kind",
                     allowed="kind: accelerator, cluster, transformer, generic, scenario or sweep")


#: The root a ``--set`` path may start with for a spec of each kind, as every other command spells it
#: (``cluster.tiers.ib.bandwidth``, ``model.layers``): ``hardware show dgx-h100 --set cluster.max_gpus=8`` was refused
#: as "cluster: unknown key 'cluster'" though the option's help lists those roots. A scenario's fields are its own
#: (its cluster: and model: are fields), so it takes none.
_SET_ROOTS = {"cluster": ("cluster.",), "accelerator": ("accelerator.",), "workload": ("model.", "workload.")}


def _own_paths(kind: str, sets: list[str]) -> list[str]:
    """``sets`` with the kind's root cut off where given (errors still name the path as written)."""
    out: list[str] = []
    for item in sets:
        root = next((r for r in _SET_ROOTS.get(kind, ()) if item.startswith(r)), None)
        out.append(item if root is None else Override(item[len(root):], item.split("=", 1)[0].strip()))
    return out


def _load(kind: str, ref: Any, sets: list[str] | None) -> Any:
    if kind == "sweep":  # a sweep file: as `scalemodel sweep` reads it (it takes no --set)
        if sets:
            raise InputError("--set does not apply to a sweep file", where="--set",
                             allowed="edit the sweep file (`scalemodel sweep` takes no --set either)")
        return load_sweep(ref)[0]
    loaders = {"cluster": specs.load_cluster, "accelerator": specs.load_accelerator,
               "workload": specs.load_workload, "scenario": specs.load_scenario}
    return loaders[kind](ref, _own_paths(kind, sets or []))


def show_spec(name: str, sets: list[str] | None = None) -> SpecView:
    """A built-in spec or a spec file by ``name``, with ``--set`` overrides applied."""
    kind, ref = _find(name)
    return SpecView(kind, _load(kind, ref, sets), {"name": name, "set": list(sets or [])})


def validate_spec(file: Path, sets: list[str] | None = None) -> SpecView:
    """Validate a spec file (any kind); raises InputError with the reason when it is not valid."""
    if not exists(file):  # a FIFO, a device or a directory is refused when read
        builtin = next((k for k in _BUILTIN_KINDS if builtin_path(k, str(file)) is not None), None)
        if builtin is not None:  # round 21: "deepseek-v3: file not found: deepseek-v3; an existing YAML file"
            raise InputError(f"no such file; {str(file)!r} is the name of a built-in {builtin}, which validate "
                             "does not read", where=str(file)[:200],
                             allowed=f"a spec file's path; `scalemodel hardware show {file}` loads and shows the "
                                     "built-in (with --set to check an override)")
        what = missing_what(file)  # a dangling link or '-' said as such (fuzz26: "-: file not found: -")
        raise InputError(f"file not found: {str(file)[:200]}" if what == "file not found" else what,
                         where=str(file)[:200], allowed="an existing YAML file")
    kind = _kind_of(file)
    spec = _load(kind, file, sets)
    if kind == "workload" and not sets:  # the file's own count against its own shape (a --set is a what-if)
        warn_published_params(spec)
    if kind == "scenario":  # check's cross-checks before pricing: the schema alone passed fp4 on an H100
        scenario_training_fits(spec, str(file), _own_paths(kind, sets or []))
        # and its strategy refusals (the allgather dispatcher beside moe_a2a_overlap, sequence_parallel false for an
        # MoE model at tp 2), which validate passed and check refused: engine.check.scenario_strategy_fits
        from scalemodel.engine.check import scenario_strategy_fits  # engine.check imports the sweep, heavy
        scenario_strategy_fits(spec, str(file), _own_paths(kind, sets or []))
    return SpecView(kind, spec, {"file": str(file), "set": list(sets or [])})
