"""`scalemodel schema KIND`: JSON Schema of a spec kind, for editors' yaml-language-server modeline."""

from __future__ import annotations

from scalemodel.commands.args import Command, arg
from scalemodel.report.schema import render_schema
from scalemodel.specs.schema import json_schema

KINDS = ("cluster", "accelerator", "workload", "scenario", "sweep")


def schema(*, kind: str) -> None:
    """Print the JSON Schema of a spec kind (use with `# yaml-language-server: $schema=`)."""
    render_schema(json_schema(kind))


COMMAND = Command("schema", schema, (arg("kind", "Which spec kind: " + ", ".join(KINDS) + ".", metavar="KIND",
                                         choices=KINDS),))
