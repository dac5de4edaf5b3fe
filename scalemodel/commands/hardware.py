"""`scalemodel hardware list | show NAME | validate FILE`: the built-in catalog and spec checking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scalemodel.commands.common import JsonOption, SetOption

hardware_app = typer.Typer(help="List, show and validate accelerator and cluster specs.", no_args_is_help=True)


def _summaries() -> dict[str, list[dict[str, Any]]]:
    from scalemodel.specs import load_accelerator, load_cluster
    from scalemodel.specs.loader import builtin_names

    accs = []
    for name in builtin_names("accelerator"):
        a = load_accelerator(name)
        accs.append({"name": a.name, "description": a.description, "bf16_flops_per_s": a.peak_flops.get("bf16"),
                     "memory_bytes": a.memory, "memory_bandwidth_Bps": a.memory_bandwidth, "tdp_w": a.tdp})
    clusters = []
    for name in builtin_names("cluster"):
        c = load_cluster(name)
        clusters.append({
            "name": c.name, "description": c.description, "accelerator": c.accelerator.name,
            "gpus_per_node": c.gpus_per_node, "max_gpus": c.largest_gpus,
            "tiers": [{"name": t.name, "span": t.span, "bandwidth_Bps": t.bandwidth, "latency_s": t.latency,
                       "efficiency": t.efficiency} for t in c.tiers]})
    return {"accelerators": accs, "clusters": clusters}


@hardware_app.command("list")
def list_(as_json: JsonOption = False) -> None:
    """List the built-in accelerators and clusters."""
    data = _summaries()
    if as_json:
        from scalemodel.report.output import emit_json

        emit_json({"inputs": {}, **data}, "hardware list")
        return
    from rich.console import Console
    from rich.table import Table

    from scalemodel.units import format_quantity as fq

    t = Table(title="Accelerators")
    for col in ("name", "bf16 dense", "memory", "mem bw", "TDP", "description"):
        t.add_column(col)
    for a in data["accelerators"]:
        bf16 = fq(a["bf16_flops_per_s"], "flop_rate") if a["bf16_flops_per_s"] else "-"
        t.add_row(a["name"], bf16, fq(a["memory_bytes"], "bytes"), fq(a["memory_bandwidth_Bps"], "bandwidth"),
                  fq(a["tdp_w"], "power") if a["tdp_w"] else "n/p", a["description"])
    c = Table(title="Clusters (tiers innermost first: span x per-GPU bandwidth)")
    for col in ("name", "accelerator", "GPUs/node", "tiers", "description"):
        c.add_column(col)
    for cl in data["clusters"]:
        tiers = ", ".join(f"{t['name']} {t['span']}x{fq(t['bandwidth_Bps'], 'bandwidth')}" for t in cl["tiers"])
        c.add_row(cl["name"], cl["accelerator"], str(cl["gpus_per_node"]), tiers, cl["description"])
    console = Console()
    console.print(t)
    console.print(c)


def _find(name: str) -> tuple[str, Any]:
    from scalemodel.errors import InputError
    from scalemodel.specs.files import exists
    from scalemodel.specs.loader import builtin_names, builtin_path

    for kind in ("cluster", "accelerator", "workload"):
        if builtin_path(kind, name) is not None:
            return kind, name
    if exists(name):  # a FIFO, a device or a directory is refused when read
        return _kind_of(Path(name)), Path(name)
    import difflib

    names = builtin_names("cluster") + builtin_names("accelerator") + builtin_names("workload")
    near = difflib.get_close_matches(name[:100], names, n=3, cutoff=0.4)
    shown = name if len(name) <= 100 else f"{name[:60]}... ({len(name)} characters)"
    raise InputError(f"unknown built-in spec {shown!r}", where="hardware show",
                     allowed=(f"did you mean {', '.join(near)}? " if near else "") + "see `scalemodel hardware list`")


def _kind_of(path: Path) -> str:
    from scalemodel.errors import InputError
    from scalemodel.specs.loader import read_document

    data, _ = read_document(path)
    if path.suffix == ".json" and isinstance(data, dict) and ("num_hidden_layers" in data or "n_layer" in data):
        return "workload"
    if not isinstance(data, dict):
        raise InputError("expected a mapping of fields", where=str(path), allowed="a spec with a `kind:` field")
    kind = data.get("kind")
    if kind in ("transformer", "generic"):
        return "workload"
    if kind in ("accelerator", "cluster", "scenario"):
        return str(kind)
    if "tiers" in data or "extends" in data and "accelerator" in data:
        return "cluster"
    if "peak_flops" in data:
        return "accelerator"
    raise InputError(f"cannot tell what kind of spec this is (kind: {kind!r})", where=f"{path}: kind",
                     allowed="kind: accelerator, cluster, transformer, generic or scenario")


def _load(kind: str, ref: Any, sets: list[str] | None) -> Any:
    from scalemodel import specs

    loaders = {"cluster": specs.load_cluster, "accelerator": specs.load_accelerator,
               "workload": specs.load_workload, "scenario": specs.load_scenario}
    return loaders[kind](ref, sets or [])


@hardware_app.command("show")
def show(name: Annotated[str, typer.Argument(help="A built-in name or a spec file.")],
         set_: SetOption = None, as_json: JsonOption = False) -> None:
    """Show one spec with every value in readable units (and SI in --json)."""
    kind, ref = _find(name)
    spec = _load(kind, ref, set_)
    data = spec.model_dump(mode="json")
    if as_json:
        from scalemodel.report.output import emit_json

        emit_json({"inputs": {"name": name, "set": list(set_ or [])}, "kind": kind, "spec": data}, "hardware show")
        return
    import yaml
    from rich.console import Console

    Console().print(f"[bold]{kind}[/bold] {spec.name}")
    print(yaml.safe_dump(data, sort_keys=False, width=110).rstrip())


@hardware_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="The spec file to check.")],
             set_: SetOption = None, as_json: JsonOption = False) -> None:
    """Validate a spec file: exit 0 when valid, 2 (with the reason) when not."""
    from scalemodel.errors import InputError
    from scalemodel.specs.files import exists

    if not exists(file):  # a FIFO, a device or a directory is refused when read
        raise InputError(f"file not found: {str(file)[:200]}", where=str(file)[:200], allowed="an existing YAML file")
    kind = _kind_of(file)
    spec = _load(kind, file, set_)
    if as_json:
        from scalemodel.report.output import emit_json

        emit_json({"inputs": {"file": str(file), "set": list(set_ or [])}, "file": str(file), "kind": kind,
                   "name": spec.name, "valid": True}, "hardware validate")
    else:
        print(f"ok: {file} is a valid {kind} spec ({spec.name})")


def register(app: typer.Typer) -> None:
    app.add_typer(hardware_app, name="hardware")
