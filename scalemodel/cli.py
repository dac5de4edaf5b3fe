"""The scalemodel command line: a thin layer of argument parsing over the engine.

Each command lives in ``scalemodel/commands/<name>.py`` as ``COMMAND``: its function and a table of its
options (scalemodel/commands/args.py), parsed with the standard library's argparse. The module is
imported only when its command runs, so a query imports only what it uses; ``--help`` loads them all
to list their summaries. Every usage error and :class:`~scalemodel.errors.InputError` becomes one
line on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import sys
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from scalemodel import __version__
from scalemodel.commands import COMMAND_MODULES
from scalemodel.commands.args import Command, HelpShown, UsageError, optional, parse, parser, switch
from scalemodel.errors import InputError, one_line
from scalemodel.report.output import write_file  # --install-completion's atomic write of the shell's rc
from scalemodel.specs import files
from scalemodel.specs.loader import builtin_names

PROG = "scalemodel"

#: A quoted word argparse echoes in a usage error ("invalid choice: '...'", "'...' is not an integer"), over 100
#: characters: a 5,000-character word made a 5 KB error line.
_LONG_QUOTED = r"'([^'\n]{60})[^'\n]{41,}'"


def _shorten_quoted(message: str) -> str:
    """``message`` with each quoted word of more than 100 characters cut to its first 60 and its length."""
    return re.sub(_LONG_QUOTED, lambda m: f"'{m.group(1)}...' ({len(m.group(0)) - 2} characters)", message)

#: The root's options; any other first word is a command.
ROOT = Command(PROG, None, (
    switch("--version", help="Print the version and exit."),
    optional("--install-completion", metavar="SHELL",
             help="Install tab completion for bash, zsh or fish (default: the current shell, from $SHELL)."),
    optional("--show-completion", metavar="SHELL",
             help="Print the completion script for bash, zsh or fish, to copy it or customize the installation."),
), help="Predict how a distributed training job scales, why efficiency falls, and what to change.")

#: Options of Megatron-LM (megatron/training/arguments.py) and DeepSpeed's launcher that users paste.
_FRAMEWORK_FLAG = (r"--(tensor-model-parallel-size|pipeline-model-parallel-size|context-parallel-size|"
                   r"expert-model-parallel-size|micro-batch-size|global-batch-size|seq-length|"
                   r"recompute-granularity|use-distributed-optimizer|deepspeed_config|deepspeed)\b")

_INTERRUPTED = "error: interrupted; files are written whole or not at all, so none was left half-written\n"


def load(name: str) -> Command:
    """The command ``name`` (its module imported now)."""
    return importlib.import_module(f"scalemodel.commands.{name}").COMMAND  # type: ignore[no-any-return]


def root() -> Command:
    """The root with every command loaded (for --help and shell completion)."""
    return Command(PROG, None, ROOT.options, ROOT.help, tuple(load(n) for n in COMMAND_MODULES))


def dispatch(argv: Sequence[str]) -> None:
    """Run the command line ``argv`` (without the program name)."""
    if argv and not argv[0].startswith("-"):
        name = argv[0]
        if name not in COMMAND_MODULES:
            from difflib import get_close_matches  # error path only: a query never loads difflib
            near = get_close_matches(name, COMMAND_MODULES)
            # without a near name, the commands (fuzz26: "No such command 'compare'.; see ..." named none)
            hint = f". Did you mean {', '.join(repr(m) for m in near)}?" if near else \
                f" (the commands: {', '.join(COMMAND_MODULES)})"
            raise UsageError(PROG, f"No such command {name!r}{hint}")
        run(load(name), f"{PROG} {name}", argv[1:])
        return
    p = parser(PROG, root(), f"{PROG} [OPTIONS] COMMAND [ARGS]...")
    values = parse(p, argv, ROOT)
    if values["version"]:
        sys.stdout.write(f"{PROG} {__version__}\n")
    elif values["show_completion"] is not None or values["install_completion"] is not None:
        completion_script(values["show_completion"], values["install_completion"])
    else:
        sys.stdout.write(p.format_help())


def run(cmd: Command, prog: str, argv: Sequence[str]) -> None:
    """Parse ``argv`` for ``cmd`` (a group: pick its subcommand) and call it."""
    if cmd.subcommands:
        if argv and not argv[0].startswith("-"):
            sub = cmd.sub(argv[0])
            if sub is None:
                raise UsageError(prog, f"No such command {argv[0]!r} (the commands: "
                                       f"{', '.join(c.name for c in cmd.subcommands)})")
            run(sub, f"{prog} {sub.name}", argv[1:])
            return
        p = parser(prog, cmd, f"{prog} [OPTIONS] COMMAND [ARGS]...")
        parse(p, argv, cmd)  # --help, or an unknown option
        sys.stdout.write(p.format_help())  # no subcommand: the group's help
        return
    args = " ".join(o.metavar or o.name.upper() for o in cmd.options if o.kind in ("arg", "args"))
    p = parser(prog, cmd, f"{prog} [OPTIONS]" + (f" {args}" if args else ""))
    values = parse(p, argv, cmd)
    assert cmd.run is not None
    cmd.run(**values)


# --- shell completion -------------------------------------------------------------------------------
# The shell runs `scalemodel` with _SCALEMODEL_COMPLETE=complete_bash, COMP_WORDS (the command line) and
# COMP_CWORD (the index of the word being completed); it prints the candidates one a line: command names,
# option names, or the built-in spec names for --cluster, --model and --scenario (the shell completes paths).

_BASH = """_scalemodel_completion() {
    local IFS=$'\\n'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   _SCALEMODEL_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _scalemodel_completion scalemodel
"""
SCRIPTS = {
    "bash": _BASH,
    # zsh runs bash completion functions through bashcompinit (which needs compinit's compdef)
    "zsh": "autoload -Uz compinit bashcompinit\n(( $+functions[compdef] )) || compinit\nbashcompinit\n" + _BASH,
    "fish": """function __scalemodel_complete
    set -l before (commandline -opc)
    set -l current (commandline -ct)
    env COMP_WORDS="$before $current" COMP_CWORD=(count $before) _SCALEMODEL_COMPLETE=complete_bash scalemodel
end
complete -c scalemodel -f -a '(__scalemodel_complete)'
""",
}
#: Where each shell reads its start-up commands (the script is appended there).
RC_FILES = {"bash": ".bashrc", "zsh": ".zshrc", "fish": ".config/fish/completions/scalemodel.fish"}


def candidates(words: list[str], cword: int) -> list[str]:
    """What may stand at ``words[cword]`` (``words[0]`` is the program); only the named command is loaded."""
    current = words[cword] if cword < len(words) else ""
    before = words[1:cword]
    cmd = ROOT
    for word in before:  # descend into the command (and a group's subcommand) named so far
        sub = load(word) if cmd is ROOT and word in COMMAND_MODULES else cmd.sub(word)
        cmd = sub or cmd
    option = next((o for o in cmd.options if before and before[-1] in o.option_strings()), None)
    if option is not None and option.kind in ("value", "repeat"):  # completing the option's value
        return [n for n in builtin_names(option.complete) if n.startswith(current)] if option.complete else []
    if current.startswith("-"):
        flags = [f for o in cmd.options for f in o.option_strings() if f.startswith("--")] + ["--help"]
        return [f for f in flags if f.startswith(current)]
    names = COMMAND_MODULES if cmd is ROOT else [c.name for c in cmd.subcommands]
    return [n for n in names if n.startswith(current)]


def complete(env: Mapping[str, str]) -> None:
    """Answer the shell's question (``_SCALEMODEL_COMPLETE=complete_bash``): one candidate a line."""
    words = env.get("COMP_WORDS", "").split()
    try:
        cword = int(env.get("COMP_CWORD", len(words)))
    except ValueError:
        cword = len(words)
    if not 0 <= cword <= len(words):  # fuzz27: COMP_CWORD=-100 (a hand-set variable) was an IndexError traceback
        cword = len(words)
    sys.stdout.write("".join(f"{c}\n" for c in candidates(words, cword)))


def _shell(name: str | None) -> str:
    shell = name or files.name(files.clean(os.environ.get("SHELL", "bash")))
    if shell not in SCRIPTS:
        raise UsageError(PROG, f"no completion for shell {shell!r} (bash, zsh or fish)")
    return shell


def completion_script(show: str | None, install: str | None) -> None:
    """``--show-completion SHELL`` prints the script; ``--install-completion SHELL`` appends it to the shell's rc."""
    if show is not None:
        sys.stdout.write(SCRIPTS[_shell(show)])
        return
    shell = _shell(install)
    home = files.expand_user("~")
    rc = files.join(home, RC_FILES[shell])
    allowed = (f"a HOME whose {RC_FILES[shell]} can be written, or --show-completion {shell} to print the script and "
               "add it by hand")
    if not os.path.lexists(home):  # fuzz37: HOME=/nonexistent/x was created, folders and all, to hold a .bashrc
        raise InputError(f"cannot add the completion script to {str(rc)[:200]}: HOME does not exist",
                         where="--install-completion", allowed=allowed)
    try:
        with open(rc) if os.path.isfile(rc) else io.StringIO() as f:
            text = f.read()
        if "_SCALEMODEL_COMPLETE" not in text:
            os.makedirs(files.parent(rc), exist_ok=True)  # below HOME: fish's ~/.config/fish/completions
            # fuzz37: appended in place, a full disk left half a script at the end of the rc, a syntax error in every
            # new shell; written atomically (a temporary file renamed over it), the rc is whole or as it was
            write_file(rc, text + ("\n" if text and not text.endswith("\n") else "") + SCRIPTS[shell],
                       "--install-completion")
    except (OSError, UnicodeDecodeError) as exc:  # fuzz24: HOME=/etc/passwd (a file) or /proc was a traceback
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise InputError(f"cannot add the completion script to {str(rc)[:200]}: {why}", where="--install-completion",
                         allowed=allowed) from None
    sys.stdout.write(f"{shell} completion installed in {rc}; it works in new shells\n")


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
        sys.stderr.write(f"warning: {one_line(line)}\n")
    notices.clear()


def _drop_warnings() -> None:
    """Forget this invocation's warnings: once an input is refused, its ``error:`` line is the only line on stderr
    (a warning about an input that is not used any further would come first and hide it)."""
    notices = sys.modules.get("scalemodel.specs.notices")
    if notices is not None:
        notices.clear()


def _main(argv: list[str] | None) -> None:
    try:
        _run(argv)
    finally:
        _print_warnings()  # a run that ended (an error has dropped them first) or was interrupted


def _tolerant_stdout() -> None:
    """Characters stdout's encoding cannot write become '?' (stderr does this already, with backslashes). Under
    PYTHONIOENCODING=ascii (or a non-UTF-8 locale Python does not coerce, PEP 538) a table or a run's name in
    Chinese was a UnicodeEncodeError traceback after the result was computed."""
    enc = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if not enc.startswith("utf") and callable(reconfigure):
        reconfigure(errors="replace")


def _run(argv: list[str] | None) -> None:
    # Overflow and 0/0 in numpy become inf/nan, which the output layer refuses with a clear error;
    # the intermediate RuntimeWarnings would only add noise on stderr.
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    np.seterr(all="ignore")
    _tolerant_stdout()
    files = sys.modules.get("scalemodel.specs.files")  # loaded by an earlier in-process invocation
    if files is not None:
        files.forget_reads()  # a new invocation: the files it reads are the ones its writers must not replace
    notices = sys.modules.get("scalemodel.specs.notices")
    if notices is not None:
        notices.clear()  # a new invocation: forget what an earlier in-process one (or a library call) raised
    try:
        if sys.stdout is None:  # fuzz28: `scalemodel ... >&-` was an AttributeError traceback after the result
            raise InputError("closed: the result would go nowhere", where="stdout",
                             allowed="run it with stdout open: a terminal, a pipe or a file (>/dev/null to discard it)")
        if os.environ.get("_SCALEMODEL_COMPLETE") and argv is None:
            complete(os.environ)
        else:
            with contextlib.suppress(HelpShown):  # --help: its text written, the command done; flushed below
                dispatch(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # here, not at the interpreter's exit: a failed write is refused below, not ignored
    except UsageError as exc:
        _drop_warnings()
        hint = f"; see `{exc.prog} --help`"
        if re.search(_FRAMEWORK_FLAG, exc.message):
            hint = ("; Megatron-LM and DeepSpeed flags are read from a file: put them in one (a launch script "
                    "will do) and give it with --strategy FILE")
        sys.stderr.write(f"error: {one_line(exc.prog)}: {one_line(_shorten_quoted(exc.message))}{hint}\n")
        raise SystemExit(2) from None
    except InputError as exc:
        _drop_warnings()
        sys.stderr.write(f"error: {exc.message()}\n")
        raise SystemExit(2) from None
    except (OverflowError, RecursionError) as exc:
        _drop_warnings()
        sys.stderr.write(f"error: input out of range: {one_line(str(exc))}; values within physical ranges\n")
        raise SystemExit(2) from None
    except BrokenPipeError:  # e.g. `scalemodel ... | head`
        _drop_stdout()
        raise SystemExit(0) from None
    except OSError as exc:  # fuzz28: stdout on a full disk (`> /dev/full`) was an OSError traceback, exit 1
        _drop_warnings()
        _drop_stdout()
        sys.stderr.write(f"error: {_write_error(exc).message()}\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # Ctrl-C: files are written atomically, so nothing is left half-written
        sys.stderr.write(_INTERRUPTED)
        raise SystemExit(130) from None
    raise SystemExit(0)


def _write_error(exc: OSError) -> InputError:
    """An OSError no reader turned into an InputError: a file's, where it names one, else the output's (stdout: every
    file read or written is checked where it is opened, specs.files and report.output.write_file)."""
    why = exc.strerror or type(exc).__name__
    if exc.filename:
        return InputError(f"cannot read or write it: {why}", where=str(exc.filename)[:200],
                          allowed="a file that can be read, or a path in a folder that can be written")
    return InputError(f"cannot write the result: {why}", where="stdout",
                      allowed="a stdout that takes it: a terminal, a pipe, or a file on a disk with space")


def _drop_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so that what it still buffers is not written again (and refused
    with "Exception ignored ...", exit 120) when the interpreter exits: Python's documented way out of a broken pipe
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe). In-process (stdout a StringIO) nothing to do."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
