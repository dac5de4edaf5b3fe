"""`scalemodel schema KIND`: JSON Schema of a spec kind, for editors' yaml-language-server modeline."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from scalemodel.report.schema import render_schema
from scalemodel.specs.schema import json_schema


class SchemaKind(str, Enum):
    cluster = "cluster"
    accelerator = "accelerator"
    workload = "workload"
    scenario = "scenario"
    sweep = "sweep"


def register(app: typer.Typer) -> None:
    @app.command("schema")
    def schema(kind: Annotated[SchemaKind, typer.Argument(help="Which spec kind.")]) -> None:
        """Print the JSON Schema of a spec kind (use with `# yaml-language-server: $schema=`)."""
        render_schema(json_schema(kind.value))
