"""The scalemodel command line: a thin layer of argument parsing over the engine.

Each command lives in ``scalemodel/commands/<name>.py`` and registers itself here. Any
:class:`~scalemodel.errors.InputError` becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
import sys

import typer

from scalemodel.commands import COMMAND_MODULES
from scalemodel.errors import InputError

app = typer.Typer(
    name="scalemodel",
    help="Predict how a distributed training job scales, why efficiency falls, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)



@app.callback()
def _root() -> None:
    """Predict how a distributed training job scales, why efficiency falls, and what to change."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"scalemodel.commands.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``scalemodel`` console script and ``python -m scalemodel``."""
    try:
        app(args=argv, prog_name="scalemodel")
    except InputError as exc:
        sys.stderr.write(f"error: {exc.message()}\n")
        raise SystemExit(2) from None
    except BrokenPipeError:  # e.g. `scalemodel ... | head`
        raise SystemExit(0) from None
