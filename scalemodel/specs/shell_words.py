"""A launch script read as bash reads it, for the Megatron-LM reader (:mod:`scalemodel.specs.megatron_args`).

Logical lines (backslash-newline continuations, quotes and parentheses spanning lines, ``#`` comments), here-document
texts blanked (a command's input, not its words), each line split at bash's control operators into commands
(:class:`_Segment`), and the string and array variables that hold flags expanded where a command names them
(``GPT_ARGS="..."`` / ``ARGS=(...)``, ``+=``), bounded by :data:`MAX_EXPANDED_CHARS`. Which command is the launch and
what it is passed is decided in :mod:`scalemodel.specs.megatron_args` (``_megatron_tokens``), which knows the flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from scalemodel.errors import InputError
from scalemodel.specs.strategy_file import StrategyFile


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """The script's commands as bash reads them: (first line number, text) per logical line, a backslash-newline
    joining two physical lines (replaced by a space), a newline inside quotes or inside parentheses (a bash array
    ``ARGS=( ... )``, a ``$( ... )``) not ending one, ``#`` comments (at a word's start, unquoted) dropped."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = line = 1
    quote = ""
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote == "'":  # single quotes: nothing is special up to the closing one
            quote = "" if c == "'" else quote
            line += c == "\n"
            buf.append(c)
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            nl = 2 if text[i + 1] == "\n" else 3 if text.startswith("\r\n", i + 1) else 0
            if nl:  # a continuation: the next physical line goes on this one
                line += 1
                buf.append(" ")
                i += nl
                continue
            buf.append(text[i:i + 2])
            i += 2
            continue
        if quote == '"':
            quote = "" if c == '"' else quote
            line += c == "\n"
            buf.append(c)
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "#" and (not buf or buf[-1] in " \t\n(;|&"):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif c == "\n":
            line += 1
            if depth == 0:
                out.append((start, "".join(buf)))
                buf, start = [], line
                i += 1
                continue
        buf.append(c)
        i += 1
    if buf:
        out.append((start, "".join(buf)))
    return out


#: a backslash, then blanks, at a physical line's end: no continuation in bash (the backslash escapes the blank)
_BLANK_AFTER_BACKSLASH = re.compile(r"\\[ \t]+\r?$")
#: bash's control operators, as shlex with punctuation_chars ";&|" yields them
_CONTROL_OPERATORS = frozenset({";", ";;", "&", "&&", "|", "||", "|&", ";&", ";;&"})


#: a here-document's opener, << or <<- and its delimiter word (quoted or not); not a here-string (<<<) or a shift
_HEREDOC = re.compile(r"(?<!<)<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _heredoc_openers(line: str) -> list[tuple[bool, str]]:
    """The here-documents a physical line opens, as (tabs stripped: <<-, delimiter), where the ``<<`` is outside
    quotes and before any comment."""
    found: list[tuple[bool, str]] = []
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            quote = "" if c == quote else quote
        elif c == "\\":
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t;|&("):
            break
        elif ((m := _HEREDOC.match(line, i)) and not (i > 0 and line[i - 1] == "<")
              and line.count("((", 0, i) <= line.count("))", 0, i)):  # not a shift in $(( ... ))
            found.append((m.group(1) == "-", m.group(3)))
            i = m.end()
            continue
        i += 1
    return found


def _drop_heredocs(text: str, out: StrategyFile | None) -> str:
    """The script with each here-document's text blanked (its lines kept, empty, so that line numbers stay): the
    text is a command's input, not words of any command (review18b: ``cat > cfg <<EOF`` ... ``--tensor-model-parallel-
    size 8`` ... ``EOF`` was merged into the launch's flags, and an apostrophe in such a text opened a quote that
    swallowed the rest of the file). A flag in a dropped text is said in ``out.unused``."""
    lines = text.split("\n")
    kept: list[str] = []
    i = 0
    while i < len(lines):
        kept.append(lines[i])
        pending = _heredoc_openers(lines[i])
        i += 1
        for strip_tabs, delim in pending:
            start = i
            while i < len(lines):
                end = lines[i].rstrip("\r")
                if (end.lstrip("\t") if strip_tabs else end) == delim:
                    break
                i += 1
            flagged = next((k for k in range(start, i) if re.search(r"(?:^|\s)--[A-Za-z]", lines[k])), None)
            if flagged is not None and out is not None:
                shown = " ".join(lines[flagged].split())
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                out.unused.append(f"{shown} (line {flagged + 1}: the text of a here-document, <<{delim}: a "
                                  "command's input, not arguments: bash does not pass it)")
            kept.extend("" for _ in range(start, min(i + 1, len(lines))))
            i = min(i + 1, len(lines))
    return "\n".join(kept)


#: Commands that print or write their arguments and pass none of them to a launch (review18b: ``echo --tensor-model-
#: parallel-size 8`` on a line of its own was merged into the launch's flags; after the launch it set tp 8)
_OUTPUT_COMMANDS = frozenset({"echo", "printf", "cat", "tee", "logger", ":", "true", "false"})
#: bash builtins that declare variables: their assignments are read as written without them
_DECLARE = frozenset({"export", "declare", "local", "readonly", "typeset"})
#: bash reserved words that may open a command before an assignment (then ARGS="..."), and a case pattern (big))
_KEYWORDS = frozenset({"then", "else", "do", "{", "!", "time"})
_CASE_PATTERN = re.compile(r"\(?[^()=]*\)")


@dataclass
class _Segment:
    """One command of a script as bash splits a logical line at its control operators."""

    no: int  # the logical line's first physical line
    j: int  # its place on that line
    op: str  # the operator before it ('' for the first)
    words: list[str]  # as written (quotes removed)
    dashes: bool = False  # a line that starts with a flag, in a script with a launch command
    kind: str = "command"  # command | define | output
    expanded: list[str] = field(default_factory=list)


def _split_commands(words: list[str]) -> list[tuple[str, list[str]]]:
    """A logical line's words split at bash's control operators (``;``, ``&&``, ``|``, ``&`` ...), with the operator
    before each command; the ``&`` of a redirection such as ``2>&1`` is not one, nor an operator inside a ``$( ... )``
    or backticks (--data-path $(ls | head))."""
    commands: list[tuple[str, list[str]]] = [("", [])]
    depth = ticks = 0
    for i, w in enumerate(words):
        if w == "&" and i > 0 and words[i - 1].endswith((">", "<")):
            continue
        if w in _CONTROL_OPERATORS:
            if depth == 0 and ticks % 2 == 0:
                _unquoted_layout_pipe(words, i)
                commands.append((w, []))
            continue
        depth, ticks = max(depth + w.count("(") - w.count(")"), 0), ticks + w.count("`")
        commands[-1][1].append(w)
    return commands


def _unquoted_layout_pipe(words: list[str], i: int) -> None:
    """Refuse a ``|`` that ends an unquoted --pipeline-model-parallel-layout (round 18: ``... Et*8|t*8|t*8|t*8L``
    unquoted: bash pipes the launch into a command ``t*8`` and passes the layout ``Et*8``; read so, it was refused as
    "1 stages for pipeline size 4", a count the file does not show). A quoted layout holds its ``|``s in one word."""
    if words[i] not in ("|", "||") or i == 0:
        return
    layout = "--pipeline-model-parallel-layout"
    value = words[i - 1].partition("=")[2] if words[i - 1].startswith(layout + "=") else (
        words[i - 1] if i > 1 and words[i - 2] == layout else None)
    after = words[i + 1] if i + 1 < len(words) else ""
    if value is not None and "|" not in value and re.fullmatch(r"[EtLm0-9*(),]+", after):
        raise InputError(f"an unquoted {words[i]!r} in the layout: bash reads it as a pipe and passes the launch the "
                         "layout up to it", where=layout,
                         allowed=f"the layout in quotes, e.g. {layout} 'Et*3|(tt|)*6,t|tL'")


def _shown(words: list[str], limit: int = 50) -> str:
    text = " ".join(words)
    return text if len(text) <= limit else text[:limit - 3] + "..."


#: a shell variable's assignment as shlex leaves it (quotes removed): NAME=value, or NAME+=value (appended)
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)", re.S)
#: the word opening a bash array assignment, NAME=( or NAME+=(, with the array's first word where written on it
_ARRAY_OPEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=\((.*)", re.S)
#: an unquoted whole-word reference to a variable: $NAME, ${NAME}, or an array's ${NAME[@]}, ${NAME[*]}, ${NAME[0]}
_REFERENCE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(\[[@*0]\])?\})")


#: The most characters a launch's words may hold once its variables are expanded: 16 x the largest strategy file
#: (files.MAX_SPEC_BYTES, 256 KiB). Each assignment that doubles the one before ("A1=\"$A $A\"", "A2=\"$A1 $A1\"",
#: ...) doubled the words held, and 40 of them ran the reader out of memory (a MemoryError traceback, round 18)
MAX_EXPANDED_CHARS = 16 * 256 * 1024


def _references(words: list[str]) -> set[str]:
    return {m.group(1) or m.group(2) for w in words if (m := _REFERENCE.fullmatch(w))}


def _read_variables(segments: list[_Segment], out: StrategyFile | None
                    ) -> tuple[dict[str, list[str]], dict[str, list[str]], set[str]]:
    """Assign each segment its kind and its words with the variables that hold flags expanded, in the script's order,
    as bash word-splits an unquoted ``$NAME``: Megatron-LM's own example scripts (examples/pretrain_gpt_distributed.sh
    and its kind) write ``GPT_ARGS="--num-layers 24 \\ ... "`` and launch ``torchrun ... pretrain_gpt.py $GPT_ARGS
    $DATA_ARGS``; others build an array, ``ARGS=(...)`` and ``"${ARGS[@]}"``. A value's own ``$OTHER`` words expand
    the same way (``ALL_ARGS="$GPT_ARGS $DATA_ARGS"``); ``+=`` appends. An array is expanded where it is named
    (review18b: its words were kept where the array was written, so ``--tensor-model-parallel-size 4 "${ARGS[@]}"``
    with tp 2 in ARGS read 4 where argparse keeps the later 2, and an array no command names was read all the same).
    A variable given flags twice (an if / else) is read at its later value, and said. Returns (strings, arrays, the
    names referenced)."""
    strings: dict[str, list[str]] = {}
    arrays: dict[str, list[str]] = {}
    where: dict[str, int] = {}
    used: set[str] = set()

    produced = 0  # characters the references have expanded to so far, bounded by MAX_EXPANDED_CHARS

    def expand(word: str) -> list[str]:
        nonlocal produced
        m = _REFERENCE.fullmatch(word)
        if not m:
            return [word]
        words = _expand_reference(m)
        produced += sum(len(w) + 1 for w in words)
        if produced > MAX_EXPANDED_CHARS:
            shown = word if len(word) <= 40 else word[:37] + "..."
            raise InputError(f"the shell variables expand to more than {MAX_EXPANDED_CHARS:,} characters (at "
                             f"{shown})", allowed="a launch script whose variables hold its flags (each expanded "
                                                  "where it is named, at most 16 times the file's size in all)")
        return words

    def _expand_reference(m: re.Match[str]) -> list[str]:
        word = m.group(0)
        name, index = m.group(1) or m.group(2), m.group(3)
        # each element one word, as the usual quoted "${ARGS[@]}" passes it (an element holding blanks, from a quoted
        # word in the array or a NAME="..." on an array, stays whole; whether the reference was quoted is not kept
        # once shlex has read the words)
        if index in ("[@]", "[*]") and name in arrays:
            used.add(name)
            return list(arrays[name])
        if index in (None, "[0]") and name in arrays:  # an array named without [@] is its first element (bash)
            used.add(name)
            return arrays[name][0].split() if arrays[name] else []
        if name in strings:  # a string is its own ${NAME[@]} and ${NAME[0]} too
            used.add(name)
            return list(strings[name])
        return [word]

    def assign(table: dict[str, list[str]], name: str, append: bool, value: list[str], no: int) -> None:
        old = table.get(name, []) if append else []
        extends = value[:len(table.get(name, []))] == table.get(name)  # ARGS="$ARGS --more": a self-extension
        if (not append and name in table and not extends and any(w.startswith("--") for w in table[name])
                and out is not None):
            out.unused.append(f"{name}={_shown(table[name])} (line {where[name]}; assigned again on line {no}: read "
                              "as the later value, as bash does where both assignments run; a branch (if / else, "
                              "case) is not evaluated)")
        table[name] = old + value
        where[name] = no
        (arrays if table is strings else strings).pop(name, None)

    for s in segments:
        if s.dashes:
            continue
        words = s.words
        k = 0
        while k < len(words) and (words[k] in _KEYWORDS or _CASE_PATTERN.fullmatch(words[k])):
            k += 1  # "then ARGS=...", "big) ARGS=... ;;": the assignment is the command's
        if k < len(words) and words[k] in _DECLARE:
            k += 1
            while k < len(words) and words[k].startswith("-") and not words[k].startswith("--"):
                k += 1
        rest: list[str] = []
        i = k
        while i < len(words):
            word = words[i]
            if a := _ARRAY_OPEN.fullmatch(word):
                # review17f: "ARGS=(--tensor-model-parallel-size 2 --micro-batch-size 1)" on one line was refused as the
                # count '1)': the parentheses are bash's array syntax, not part of the first and last words
                name, append, first = a.group(1), bool(a.group(2)), a.group(3)
                items: list[str] = []
                depth, part = 1, first
                while True:
                    depth += part.count("(") - part.count(")")
                    if depth <= 0:
                        part = part[:-1] if part.endswith(")") else part
                    if part:
                        items.extend(expand(part))
                    if depth <= 0 or i + 1 >= len(words):
                        break
                    i += 1
                    part = words[i]
                assign(arrays, name, append, items, s.no)
                i += 1
                continue
            m = _ASSIGNMENT.fullmatch(word)
            if m and not word.startswith("-") and m.group(1) in arrays:
                # NAME="..." where NAME is an array sets its element 0 (NAME+="..." appends to it; bash(1) Arrays)
                text = re.sub(r"\S+", lambda part: " ".join(expand(part.group())), m.group(3))  # its blanks kept
                old = arrays[m.group(1)]
                head = (old[0] if old else "") + text if m.group(2) else text
                arrays[m.group(1)] = [head, *old[1:]]
                i += 1
                continue
            if m and not word.startswith("-"):
                value = [w for part in m.group(3).split() for w in expand(part)]
                if m.group(2) or any(w.startswith("--") for w in value) or m.group(1) in strings:
                    assign(strings, m.group(1), bool(m.group(2)), value, s.no)
                    if any(w.startswith("--") for w in strings[m.group(1)]):
                        i += 1
                        continue
                rest.append(word)
                i += 1
                continue
            break
        command = words[i:]
        if not command:
            s.kind = "define"
            s.expanded = [w for w in rest]
            if rest:  # assignments of no flags: kept as words, as before (positionals to argparse)
                s.kind = "command"
            continue
        if command[0] in _OUTPUT_COMMANDS:
            s.kind = "output"
        expanded: list[str] = []
        for word in command:
            m = _ASSIGNMENT.fullmatch(word)
            value = [w for part in m.group(3).split() for w in expand(part)] if m and not word.startswith("-") else []
            if m and s.kind == "command" and any(w.startswith("--") for w in value):  # flags assigned mid-command
                assign(strings, m.group(1), bool(m.group(2)), value, s.no)
                continue
            expanded.extend(expand(word))
        s.expanded = words[:k] + rest + expanded
    return strings, arrays, used
