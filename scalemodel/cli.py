"""The scalemodel command line: a thin layer of argument parsing over the engine.

Each command lives in ``scalemodel/commands/<name>.py`` and registers itself on a Typer app. The
root group loads a command's module only when that command runs (click's LazyGroup pattern,
https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands), so a query
imports only what it uses; ``--help`` loads them all to list their summaries. Any
:class:`~scalemodel.errors.InputError` becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from difflib import get_close_matches
from typing import Any

import numpy as np
import typer
from typer.core import TyperGroup

from scalemodel import __version__
from scalemodel.commands import COMMAND_MODULES
from scalemodel.errors import InputError
from scalemodel.specs.loader import builtin_names

#: Options whose values tab-complete to built-in spec names (a path is typed as usual).
_NAMED_OPTIONS = {"--cluster": "cluster", "--model": "workload", "--scenario": "scenario"}


def _name_completer(kind: str) -> Any:
    def complete(ctx: Any, param: Any, incomplete: str) -> list[str]:
        return [n for n in builtin_names(kind) if n.startswith(incomplete)]

    return complete


def _complete_spec_names(cmd: Any) -> None:
    """Let --cluster, --model and --scenario tab-complete to the built-in names (shell completion)."""
    for sub in getattr(cmd, "commands", {}).values():
        _complete_spec_names(sub)
    for param in getattr(cmd, "params", []):
        kind = next((_NAMED_OPTIONS[o] for o in getattr(param, "opts", []) if o in _NAMED_OPTIONS), None)
        if kind is not None and getattr(param, "_custom_shell_complete", None) is None:
            param._custom_shell_complete = _name_completer(kind)


class LazyGroup(TyperGroup):
    """A root group whose subcommands are the modules of :data:`COMMAND_MODULES`, imported on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMAND_MODULES)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMAND_MODULES:
            return None
        if cmd_name not in self.commands:
            sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
            importlib.import_module(f"scalemodel.commands.{cmd_name}").register(sub)
            self.commands[cmd_name] = typer.main.get_group(sub).commands[cmd_name]
            _complete_spec_names(self.commands[cmd_name])
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return self._click_resolve_command(ctx, args)
        except Exception as exc:  # a usage error of typer's click: suggest the nearest command names
            message = getattr(exc, "message", None)
            matches = get_close_matches(args[0], COMMAND_MODULES) if args and isinstance(message, str) else []
            if matches:
                exc.message = f"{message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"  # type: ignore[attr-defined, union-attr]
            raise


app = typer.Typer(
    name="scalemodel",
    cls=LazyGroup,
    help="Predict how a distributed training job scales, why efficiency falls, and what to change.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

#: Options of Megatron-LM (megatron/training/arguments.py) and DeepSpeed's launcher that users paste.
_FRAMEWORK_FLAG = re.compile(r"--(tensor-model-parallel-size|pipeline-model-parallel-size|context-parallel-size|"
                             r"expert-model-parallel-size|micro-batch-size|global-batch-size|seq-length|"
                             r"recompute-granularity|use-distributed-optimizer|deepspeed_config|deepspeed)\b")

_INTERRUPTED = "error: interrupted; files are written whole or not at all, so none was left half-written\n"


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"scalemodel {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Predict how a distributed training job scales, why efficiency falls, and what to change."""


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


def _print_warnings() -> None:
    """Each warning raised while reading the inputs as one ``warning:`` line on stderr (once)."""
    notices = sys.modules.get("scalemodel.specs.notices")  # not loaded: nothing was read, nothing to say
    if notices is None:
        return
    for line in notices.current():
        sys.stderr.write(f"warning: {line}\n")
    notices.clear()


def _main(argv: list[str] | None) -> None:
    try:
        _run(argv)
    finally:
        _print_warnings()  # also after a usage error or an interrupted run


def _run(argv: list[str] | None) -> None:
    # Overflow and 0/0 in numpy become inf/nan, which the output layer refuses with a clear error;
    # the intermediate RuntimeWarnings would only add noise on stderr.
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    np.seterr(all="ignore")
    files = sys.modules.get("scalemodel.specs.files")  # loaded by an earlier in-process invocation
    if files is not None:
        files.forget_reads()  # a new invocation: the files it reads are the ones its writers must not replace
    notices = sys.modules.get("scalemodel.specs.notices")
    if notices is not None:
        notices.clear()  # a new invocation: forget what an earlier in-process one (or a library call) raised
    try:
        code = app(args=argv, prog_name="scalemodel", standalone_mode=False)
    except InputError as exc:
        _print_warnings()
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
        if _FRAMEWORK_FLAG.search(exc.format_message()):
            hint = ("; Megatron-LM and DeepSpeed flags are read from a file: put them in one (a launch script "
                    "will do) and give it with --strategy FILE")
        sys.stderr.write(f"error: {where}{exc.format_message()}{hint}\n")
        raise SystemExit(2) from None
    if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into exit status 130 without a word
        sys.stderr.write(_INTERRUPTED)
    raise SystemExit(code if isinstance(code, int) else 0)
