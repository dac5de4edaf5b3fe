"""The command line's vocabulary: a command is a function plus a table of :class:`Opt`, which
:func:`parser` turns into one :mod:`argparse` parser (the standard library: ~1 ms to import, and
nothing is built from type hints at run time). Usage errors raise :class:`UsageError`; cli.py
prints them as one ``error:`` line and exit status 2, never argparse's usage dump.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import msgspec

from scalemodel.report.output import terminal_columns
from scalemodel.specs.base import digit_grouping


class UsageError(Exception):
    """A command line that cannot be parsed: ``prog`` (``scalemodel predict``) and what is wrong."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


def integer(text: str) -> int:
    """An integer option's value (``8``, ``-3``); anything else is a usage error naming the value."""
    if (why := digit_grouping(text, "an integer")) is not None:
        raise argparse.ArgumentTypeError(why)
    try:
        if not text.isascii():  # int() reads other scripts' digits ("\u0661\u0666" is 16)
            raise ValueError(text)
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def number(text: str) -> float:
    """A number option's value (``0.05``, ``1e-3``); ``-0`` reads as 0 (a negative zero is echoed as ``-0.0``)."""
    if (why := digit_grouping(text, "a number")) is not None:
        raise argparse.ArgumentTypeError(why)
    try:
        if not text.isascii():
            raise ValueError(text)
        return float(text.replace("_", "")) + 0.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


_METAVAR: dict[Any, str] = {integer: "<int>", number: "<float>", None: "<str>"}


class Opt(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """One option (``flags`` start with ``-``) or positional argument (one bare name) of a command.

    ``kind``: ``value`` (takes one value, parsed by ``type``; None keeps the text), ``switch``
    (``--json``: False unless given), ``pair`` (``--overlap/--no-overlap``: True, False or None when
    neither is given), ``repeat`` (``--set``: a list, one entry per use, None when never given),
    ``optional`` (its value may be left out: "" then), ``arg`` (positional) or ``args`` (one or more
    positionals). ``dest`` is the command function's parameter; ``complete`` a spec kind whose
    built-in names complete the value in the shell.
    """

    flags: tuple[str, ...]
    help: str
    kind: str = "value"
    type: Callable[[str], Any] | None = None
    default: Any = None
    dest: str | None = None
    metavar: str | None = None
    required: bool = False
    choices: tuple[str, ...] | None = None
    complete: str | None = None

    @property
    def name(self) -> str:
        """The parameter the parsed value is passed as."""
        if self.dest:
            return self.dest
        long = next((f for f in self.flags if f.startswith("--")), self.flags[0])
        return long.lstrip("-").replace("-", "_")

    def but(self, **changes: Any) -> Opt:
        """The same option with other attributes (a different default or help)."""
        return msgspec.structs.replace(self, **changes)

    def option_strings(self) -> list[str]:
        """Everything a user may type for it (both halves of a pair)."""
        if self.kind == "pair":
            return [*self.flags, *(f"--no-{f[2:]}" for f in self.flags if f.startswith("--"))]
        return [f for f in self.flags if f.startswith("-")]

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        text = self.help
        if self.kind == "value" and self.default not in (None, ""):
            text += f"  [default: {self.default}]"
        if self.required:
            text += "  [required]"
        kw: dict[str, Any] = {"help": text.replace("%", "%%"), "dest": self.name}
        flags = sorted(self.flags, key=lambda f: f.startswith("--"))  # -n, --gpus
        if self.kind == "switch":
            parser.add_argument(*flags, action="store_true", default=False, **kw)
        elif self.kind == "pair":
            parser.add_argument(*flags, action=argparse.BooleanOptionalAction, default=self.default, **kw)
        elif self.kind == "repeat":
            parser.add_argument(*flags, action="append", default=None, metavar=self.metavar or "<str>", **kw)
        elif self.kind == "optional":
            parser.add_argument(*flags, nargs="?", const="", default=None, metavar=self.metavar, **kw)
        elif self.kind in ("arg", "args"):
            kw.pop("dest")
            parser.add_argument(self.name, nargs="+" if self.kind == "args" else None, choices=self.choices,
                                metavar=self.metavar or self.name.upper(), **kw)
        else:
            parser.add_argument(*flags, type=self.type or str, default=self.default, required=self.required,
                                metavar=self.metavar or _METAVAR.get(self.type, "<value>"), **kw)


def opt(*flags: str, help: str, type: Callable[[str], Any] | None = None, default: Any = None,
        dest: str | None = None, metavar: str | None = None, required: bool = False,
        complete: str | None = None) -> Opt:
    """An option taking one value: ``opt("--tp", help=..., type=integer)``."""
    return Opt(flags, help, "value", type, default, dest, metavar, required, None, complete)


def optional(*flags: str, help: str, metavar: str) -> Opt:
    """An option whose value may be left out: the value, "" when left out, None when the option is not given."""
    return Opt(flags, help, "optional", metavar=metavar)


def switch(*flags: str, help: str, dest: str | None = None) -> Opt:
    """An on/off flag, off unless given: ``--json``."""
    return Opt(flags, help, "switch", dest=dest)


def pair(flag: str, help: str, dest: str | None = None) -> Opt:
    """``--flag/--no-flag``: True, False, or None when neither is given (the spec's value stands)."""
    return Opt((flag,), help, "pair", dest=dest)


def repeat(*flags: str, help: str, dest: str | None = None, metavar: str | None = None) -> Opt:
    """An option that may be given many times; its values as a list (None when never given)."""
    return Opt(flags, help, "repeat", dest=dest, metavar=metavar)


def arg(name: str, help: str, metavar: str | None = None, choices: tuple[str, ...] | None = None,
        many: bool = False) -> Opt:
    """A positional argument (``many``: one or more, as a list)."""
    return Opt((name,), help, "args" if many else "arg", metavar=metavar, choices=choices)


class Command(msgspec.Struct, frozen=True):
    """A command: the function that runs it and its option table (or, for a group, its subcommands).
    The summary in ``--help`` is the function's docstring (or ``help``)."""

    name: str
    run: Callable[..., None] | None
    options: tuple[Opt, ...] = ()
    help: str = ""
    subcommands: tuple[Command, ...] = ()

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.help or (self.run.__doc__ if self.run else None) or "")

    @property
    def summary(self) -> str:
        return self.description.split("\n", 1)[0]

    def sub(self, name: str) -> Command | None:
        return next((c for c in self.subcommands if c.name == name), None)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Docstrings as written; an option's value shown once (``-n, --gpus <int>``), short flag first."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        value = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{', '.join(action.option_strings)} {value}"


class HelpShown(Exception):
    """``--help`` was given: its text is on stdout and the command is done (cli.py flushes stdout and exits 0)."""


class _Help(argparse.Action):
    """``--help``: the parser's help written to stdout as every result is. argparse's own help action writes through
    ``ArgumentParser._print_message``, which drops an OSError (CPython 3.11.7 Lib/argparse.py:2603-2609), and exits
    0: ``scalemodel --help > /dev/full`` wrote nothing and exited 0 (fuzz29), where a result refused by its stdout is
    one ``error:`` line and exit 2 (cli._run)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> NoReturn:
        sys.stdout.write(parser.format_help())
        raise HelpShown


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


def parser(prog: str, cmd: Command, usage: str) -> Parser:
    """The parser of one command (or group: its summary lists the subcommands)."""
    epilog = None
    if cmd.subcommands:
        width = max(len(c.name) for c in cmd.subcommands) + 2
        epilog = "commands:\n" + "\n".join(f"  {c.name:{width}}{c.summary}" for c in cmd.subcommands)
    p = Parser(prog=prog, usage=usage, description=cmd.description, epilog=epilog, add_help=False,
               allow_abbrev=False, formatter_class=_Formatter)
    for option in cmd.options:
        option.add_to(p)
    p.add_argument("--help", action=_Help, help="Show this message and exit.")
    return p


def _glue_dash_values(argv: Sequence[str], cmd: Command) -> list[str]:
    """``--mean -1s`` as ``--mean=-1s``: an option that takes a value takes the next word, even one that
    starts with ``-`` (argparse would read it as an option), unless that word is one of the command's options."""
    takes = {f for o in cmd.options if o.kind in ("value", "repeat") for f in o.flags}
    known = {f for o in cmd.options for f in o.option_strings()} | {"--help"}
    out = list(argv)
    i = 0
    while i < len(out) - 1:
        word, after = out[i], out[i + 1]
        if word in takes and after.startswith("-") and after.split("=", 1)[0] not in known:
            out[i:i + 2] = [f"{word}={after}" if word.startswith("--") else f"{word}{after}"]
        i += 1
    return out


def _shown(text: str) -> str:
    """A word of the command line as an error shows it: over 100 characters, its first 60 and its length (a
    5,000-character word made a 5 KB error line)."""
    return text if len(text) <= 100 else f"{text[:60]}... ({len(text)} characters)"


#: A word argparse reads as a positional although it starts with '-' (CPython 3.11 Lib/argparse.py
#: ``_negative_number_matcher``; no option of scalemodel looks like a negative number).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _unknown_option(words: Sequence[str], known: set[str]) -> str | None:
    """The first word of ``words`` (dash values glued, :func:`_glue_dash_values`) argparse would not know as an
    option, or None. Looked for before argparse parses: it checks required arguments and choices first, so
    `collective --nope` was "the following arguments are required: -c/--cluster, -n/--gpus" and `schema --nope
    cluster` took ``cluster`` as --nope's value and then refused KIND as missing (ux34)."""
    for word in words:
        if word == "--":  # what follows is positional
            return None
        if not word.startswith("-") or word == "-" or _NEGATIVE_NUMBER.match(word):
            continue
        flag = word.split("=", 1)[0]
        if flag not in known and not (not word.startswith("--") and word[:2] in known):  # -n8: -n with 8
            return flag
    return None


def parse(p: Parser, argv: Sequence[str], cmd: Command) -> dict[str, Any]:
    """The command function's keyword arguments from ``argv``; options and positionals may interleave."""
    words = _glue_dash_values(argv, cmd)
    known = [s for o in cmd.options for s in o.option_strings()]
    unknown = _unknown_option(words, {*known, "--help"})
    if unknown is not None:  # said before a missing or misread argument it caused
        from difflib import get_close_matches  # error path only: a query never loads difflib
        near = get_close_matches(unknown[:100], known)
        p.error(f"No such option: {_shown(unknown)}" + (f" (Possible options: {', '.join(near)})" if near else ""))
    values, extra = p.parse_known_intermixed_args(words)
    for o in cmd.options:  # argparse takes '--' out of an option's words (CPython 3.11 Lib/argparse.py _get_values):
        # `-c --` (or --tp=--) left the option the empty list [], a traceback in the spec reader (fuzz29)
        given = getattr(values, o.name, None)
        if isinstance(given, list) and (o.kind in ("value", "optional") or any(isinstance(g, list) for g in given)):
            flags = "/".join(sorted(o.flags, key=lambda f: f.startswith("--")))
            p.error(f"argument {flags}: expected one argument, not '--' (the end of the options)")
    if extra:  # an unknown option was refused above: what is left are positional words
        p.error(f"Got unexpected extra argument(s) ({_shown(' '.join(extra))})")
    return vars(values)
