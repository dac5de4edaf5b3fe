"""`scalemodel schema KIND`: JSON Schema of a spec kind, for editors' yaml-language-server modeline."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any

import typer


class SchemaKind(str, Enum):
    cluster = "cluster"
    accelerator = "accelerator"
    workload = "workload"
    scenario = "scenario"


def json_schema(kind: str) -> dict[str, Any]:
    """The Draft-07 JSON Schema of a spec kind (pydantic's schema with the draft declared)."""
    from pydantic import TypeAdapter

    from scalemodel import specs

    models: dict[str, Any] = {"cluster": specs.ClusterSpec, "accelerator": specs.AcceleratorSpec,
                              "workload": specs.Workload, "scenario": specs.ScenarioSpec}
    schema = TypeAdapter(models[kind]).json_schema(mode="validation")
    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "title": f"scalemodel {kind} spec", **schema}
    if kind in ("cluster", "scenario"):
        # Cluster and scenario fields also accept a built-in name (resolved by the loader).
        props = schema.get("properties", {})
        for field in ("accelerator", "cluster", "model"):
            if field in props:
                props[field] = {"anyOf": [{"type": "string", "description": "built-in name or file"}, props[field]]}
    return schema


def register(app: typer.Typer) -> None:
    @app.command("schema")
    def schema(kind: Annotated[SchemaKind, typer.Argument(help="Which spec kind.")]) -> None:
        """Print the JSON Schema of a spec kind (use with `# yaml-language-server: $schema=`)."""
        print(json.dumps(json_schema(kind.value), indent=2))
