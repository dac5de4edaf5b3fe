"""`scalemodel hardware list | show NAME | validate FILE`: the built-in catalog and spec checking."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scalemodel.commands.common import JsonOption, SetOption
from scalemodel.engine.hardware import catalog, show_spec, validate_spec
from scalemodel.report.hardware import render_catalog, render_spec, render_validation

hardware_app = typer.Typer(help="List, show and validate accelerator and cluster specs.", no_args_is_help=True)


@hardware_app.command("list")
def list_(as_json: JsonOption = False) -> None:
    """List the built-in accelerators and clusters."""
    render_catalog(catalog(), as_json=as_json)


@hardware_app.command("show")
def show(name: Annotated[str, typer.Argument(help="A built-in name or a spec file.")],
         set_: SetOption = None, as_json: JsonOption = False) -> None:
    """Show one spec with every value in readable units (and SI in --json)."""
    render_spec(show_spec(name, set_), as_json=as_json)


@hardware_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="The spec file to check.")],
             set_: SetOption = None, as_json: JsonOption = False) -> None:
    """Validate a spec file: exit 0 when valid, 2 (with the reason) when not."""
    render_validation(validate_spec(file, set_), as_json=as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(hardware_app, name="hardware")
