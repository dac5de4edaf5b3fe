"""Options and helpers shared by the commands (kept light: no engine imports here)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from scalemodel.errors import InputError

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="PATH=VALUE",
                 help="Override any spec field, e.g. cluster.tiers.ib.bandwidth=100Gbps or model.layers=48 "
                      "(repeatable; roots: cluster, accelerator, model, training, strategy)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one strictly valid JSON document instead of tables.")]
ClusterOption = Annotated[str, typer.Option("--cluster", "-c", help="Built-in cluster name or a cluster YAML file.")]
ModelOption = Annotated[str, typer.Option("--model", "-m", help="Built-in workload, a YAML file or a config.json.")]


def quantity(text: str, kind: str, option: str) -> float:
    """Parse a CLI quantity; errors name the option."""
    from scalemodel.units import parse_quantity

    try:
        return parse_quantity(text, kind)
    except InputError as exc:
        raise exc.at(option) from None


def load_cluster_with(ref: str, sets: list[str] | None) -> Any:
    from scalemodel.specs import load_cluster, split_overrides

    return load_cluster(ref, split_overrides(sets or [])["cluster"])


def positive_int(value: int | None, option: str) -> None:
    if value is not None and value <= 0:
        raise InputError(f"{option} must be a positive integer, got {value}", where=option, allowed="an integer >= 1")
