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



_INTERRUPTED = "error: interrupted; files are written whole or not at all, so none was left half-written\n"


@app.callback()
def _root() -> None:
    """Predict how a distributed training job scales, why efficiency falls, and what to change."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"scalemodel.commands.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``scalemodel`` console script and ``python -m scalemodel``.

    Every input problem ends as one line ``error: <where>: <what>; <allowed>`` and exit status 2:
    spec and value errors (InputError), command-line usage errors, and inputs so far outside
    physical ranges that the arithmetic overflows.
    """
    try:
        _main(argv)
    except KeyboardInterrupt:  # Ctrl-C outside the command (e.g. while numpy loads)
        sys.stderr.write(_INTERRUPTED)
        raise SystemExit(130) from None


def _main(argv: list[str] | None) -> None:
    import warnings

    import numpy as np

    # Overflow and 0/0 in numpy become inf/nan, which the output layer refuses with a clear error;
    # the intermediate RuntimeWarnings would only add noise on stderr.
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    np.seterr(all="ignore")
    files = sys.modules.get("scalemodel.specs.files")  # loaded by an earlier in-process invocation
    if files is not None:
        files.forget_reads()  # a new invocation: the files it reads are the ones its writers must not replace
    try:
        code = app(args=argv, prog_name="scalemodel", standalone_mode=False)
    except InputError as exc:
        sys.stderr.write(f"error: {exc.message()}\n")
        raise SystemExit(2) from None
    except (OverflowError, RecursionError) as exc:
        sys.stderr.write(f"error: input out of range: {exc}; values within physical ranges\n")
        raise SystemExit(2) from None
    except BrokenPipeError:  # e.g. `scalemodel ... | head`
        raise SystemExit(0) from None
    except KeyboardInterrupt:  # Ctrl-C: files are written atomically, so nothing is left half-written
        sys.stderr.write(_INTERRUPTED)
        raise SystemExit(130) from None
    except Exception as exc:  # click's usage errors (typer may vendor its own click: match by protocol)
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
            raise SystemExit(0) from None
        where = f"{ctx.command_path}: " if ctx is not None else ""
        hint = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
        sys.stderr.write(f"error: {where}{exc.format_message()}{hint}\n")
        raise SystemExit(2) from None
    if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into exit status 130 without a word
        sys.stderr.write(_INTERRUPTED)
    raise SystemExit(code if isinstance(code, int) else 0)
