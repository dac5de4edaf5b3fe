"""The one error type users see: where, what was wrong, what is allowed.

Every bad input (a spec file, a CLI option, a unit) raises :class:`InputError`; the CLI prints it
as ``error: <where>: <what>; <what is allowed>`` on stderr and exits with status 2.
"""

from __future__ import annotations

import re

import msgspec

#: C0 control characters but the tab, DEL and the C1 controls: a newline in a file name made the one error line
#: two, an ESC (or C1 CSI) in a name sent a terminal escape sequence to the user's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")

# The patterns below are kept as text and compiled by ``re`` where first used (it caches them): a query whose text is
# ASCII never needs them, and compiling every module-level pattern of the package at import cost ~4% of `import numpy`.

#: Bidirectional controls, invisible format characters and the Unicode line/paragraph separators (categories Cf,
#: Zl, Zp): a U+202E in a file name reversed the rest of the error line on the terminal (round 15b); warnings
#: (specs.notices) already wrote them as ``\u202e``.
_INVISIBLE = ("[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
              "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]")


#: Lone surrogates: Python's file-system decoding (``os.fsdecode``, surrogateescape) keeps a file name byte that is not
#: UTF-8 as U+DC80..U+DCFF, which strict JSON readers and UTF-8 encoders refuse.
_SURROGATE = "[\ud800-\udfff]"


def shown(text: str) -> str:
    """``text`` as it may be written out (JSON, stderr): a byte of a file name that is not UTF-8 (``os.fsdecode``'s
    surrogateescape, U+DC80..U+DCFF) written as its backslash escape ``\\xff``, as Python writes bytes, and any
    other lone surrogate as ``\\udxxx`` text; the one formatting every path and message goes through (errors,
    warnings, ``--json`` strings)."""
    if text.isascii():
        return text
    return re.sub(_SURROGATE, lambda m: (f"\\x{ord(m.group()) - 0xDC00:02x}" if 0xDC80 <= ord(m.group()) <= 0xDCFF
                                     else f"\\u{ord(m.group()):04x}"), text)


def written(value: object) -> str:
    """``value`` in an error as the user's YAML / JSON spelled it: ``null``, ``true``, ``false`` (``repr`` printed
    None / True / False, words no spec file writes: ux36, "unknown recompute None" for ``recompute: null``);
    anything else as ``repr``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def one_line(text: str) -> str:
    """``text`` with every line break and terminal control character written as its Python escape (``\\n``,
    ``\\x1b``): what the CLI prints on stderr stays one line and shows the character instead of acting on it; a
    file name's undecodable byte as ``\\xff`` (:func:`shown`)."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], shown(text))
    return re.sub(_INVISIBLE, lambda m: f"\\u{ord(m.group()):04x}", text) if not text.isascii() else text


def prose(text: str) -> str:
    """A message as one output line (errors, warnings): :func:`one_line` of the stripped text, tabs written ``\\t``
    as well. Line breaks and tabs are escaped, never folded into spaces: a file name holding one (``a\\nb.yaml``) was
    shown as ``a b.yaml``, another file's name. A parser's own multi-line text is folded where it is quoted
    (:func:`folded`)."""
    return one_line(text.strip()).replace("\t", "\\t")


def first_of(items: list[str], n: int) -> str:
    """The first ``n`` of ``items`` joined by ", ", and how many more (" and 3 more"): a message's list kept short."""
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def folded(text: object) -> str:
    """An exception's own text (PyYAML's, tomllib's, shlex's, csv's: prose over several lines) folded to one line of
    single spaces, for quoting inside a message; file names go in ``where``, where :func:`prose` escapes them."""
    return " ".join(str(text).split())


class InputError(ValueError):
    """Bad user input. Subclasses ValueError so spec validators report it with a field path."""

    def __init__(self, what: str, *, where: str = "", allowed: str = "", also: tuple[str | int, ...] = (),
                 needs_zero: bool = False, needs_recompute: str = "") -> None:
        self.what = what
        self.where = where
        self.allowed = allowed
        #: a spec's rule across two fields: the other field's path in the spec (``("zero",)`` for a refused
        #: ``megatron_ddp``; specs.base.field_error's ``also``), for a caller that names where each was written
        self.also = also
        #: a refusal at zero 0 of a switch that some ZeRO stage runs, where zero was not given (its allowed text ends
        #: with specs.training.ZERO_UNSET_HINT, "give zero too"): set where that hint is written, for the callers
        #: that name their own way to give zero or search it (commands.common, commands.plan, specs.frameworks).
        #: ux38: they matched the hint's text, which a reworded hint would silently have broken
        self.needs_zero = needs_zero
        #: the recompute sub-field (recompute_layers, recompute_method, recompute_modules) refused for the recompute
        #: mode it runs under, where the rule names recompute (specs.base field_error's ``needs_recompute``), else "":
        #: for commands.plan, which searches recompute and validates at that mode instead. tidy39: plan matched the
        #: refusal's ``where`` against the two places it expected the field written
        self.needs_recompute = needs_recompute
        super().__init__(self.message())

    def message(self) -> str:
        """One line: ``where: what; allowed`` (an echoed array is folded and cut to stay readable)."""
        what = prose(self.what)
        if len(what) > 300:
            what = what[:297] + "..."
        where, allowed = prose(self.where), prose(self.allowed)
        if len(where) > 400:  # a 100,000-character --set path (or key) named the field whole: a 100 KB line
            where = f"{where[:240]}... ({len(where):,} characters)"
        text = f"{where}: {what}" if where else what
        return f"{text}; {allowed}" if allowed else text

    def at(self, where: str) -> InputError:
        """The same error, located more precisely (prefixing the outer location)."""
        loc = f"{where}: {self.where}" if self.where else where
        return InputError(self.what, where=loc, allowed=self.allowed, also=self.also, needs_zero=self.needs_zero,
                          needs_recompute=self.needs_recompute)


def sub_path(where: str, field: str) -> str:
    """What ``where`` names below ``field`` (``.attention_proj`` of ``training.module_precision.attention_proj``), or
    "" when it names the field itself or something else: the part of an engine's location a caller keeps when it
    names the place ``field`` was written instead (``--set training.module_precision`` + ``.attention_proj``)."""
    rest = where[len(field):] if where.startswith(field) else ""
    return rest if rest[:1] in (".", "[") else ""


class Origin(msgspec.Struct, frozen=True):
    """Where a strategy's values were written when not on the command line: a file's fields.

    ``strategy`` + a field name locates that field (``"sweep.yaml: strategies[1]."`` + ``"tp"``,
    ``"runs.yaml: run 3: "`` + ``"tp"``); ``gpus`` is the field that holds the GPU count.
    """

    strategy: str
    gpus: str
    #: (field, where) pairs that override ``strategy`` + name for a field: a command line that mixes options, a
    #: --strategy file, --set and a scenario names each field where it was written (``--ep``,
    #: ``--strategy: run.sh: --expert-model-parallel-size``, ``--set strategy.ep``)
    named: tuple[tuple[str, str], ...] = ()
    #: the fields whose value a framework file's reader filled with that framework's own default, the file not
    #: writing them (specs.strategy_file.StrategyFile.defaults; Megatron-LM's allgather dispatcher for a launch with
    #: --num-experts and no --moe-token-dispatcher-type): not a choice the user made. Marked by the reader, not read
    #: back from the text of :meth:`field`
    defaults: frozenset[str] = frozenset()

    def field(self, name: str) -> str:
        return dict(self.named).get(name, f"{self.strategy}{name}")

    def is_default(self, name: str) -> bool:
        """True where field ``name`` holds a framework default that a reader filled in, not a value written."""
        return name in self.defaults
