"""Render `scalemodel hardware`: the catalog tables, one spec as YAML, a validation verdict, or JSON."""

from __future__ import annotations

import yaml
from rich.console import Console
from rich.table import Table

from scalemodel.engine.hardware import Catalog, SpecView
from scalemodel.report.output import emit_json
from scalemodel.units import format_quantity as fq


def render_catalog(data: Catalog, *, as_json: bool) -> None:
    if as_json:
        emit_json(data.payload(), "hardware list")
        return
    t = Table(title="Accelerators")
    for col in ("name", "bf16 dense", "memory", "mem bw", "TDP", "description"):
        t.add_column(col)
    for a in data.accelerators:
        bf16 = fq(a["bf16_flops_per_s"], "flop_rate") if a["bf16_flops_per_s"] else "-"
        t.add_row(a["name"], bf16, fq(a["memory_bytes"], "bytes"), fq(a["memory_bandwidth_Bps"], "bandwidth"),
                  fq(a["tdp_w"], "power") if a["tdp_w"] else "n/p", a["description"])
    c = Table(title="Clusters (tiers innermost first: span x per-GPU bandwidth)")
    for col in ("name", "accelerator", "GPUs/node", "tiers", "description"):
        c.add_column(col)
    for cl in data.clusters:
        tiers = ", ".join(f"{t['name']} {t['span']}x{fq(t['bandwidth_Bps'], 'bandwidth')}" for t in cl["tiers"])
        c.add_row(cl["name"], cl["accelerator"], str(cl["gpus_per_node"]), tiers, cl["description"])
    console = Console()
    console.print(t)
    console.print(c)



def render_spec(view: SpecView, *, as_json: bool) -> None:
    data = view.spec.model_dump(mode="json")
    if as_json:
        emit_json({"inputs": view.inputs, "kind": view.kind, "spec": data}, "hardware show")
        return
    Console().print(f"[bold]{view.kind}[/bold] {view.spec.name}")
    print(yaml.safe_dump(data, sort_keys=False, width=110, allow_unicode=True).rstrip())


def render_validation(view: SpecView, *, as_json: bool) -> None:
    file = view.inputs["file"]
    if as_json:
        emit_json({"inputs": view.inputs, "file": file, "kind": view.kind, "name": view.spec.name, "valid": True},
                  "hardware validate")
    else:
        print(f"ok: {file} is a valid {view.kind} spec ({view.spec.name})")
