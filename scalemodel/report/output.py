"""Strict JSON output, shared console helpers, and the one atomic writer of every output file."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from scalemodel.errors import InputError, shown
from scalemodel.specs import files, notices
from scalemodel.specs.files import read_by_this_invocation
from scalemodel.units import format_quantity

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

SCHEMA_VERSION = "2.0"


def duration(seconds: float, days: str = "days") -> str:
    """A time to train: whole days from two days up ('29.9 days'), else in hours or less ('7.644 h'): plan, predict
    and scale printed '0.3 days' for every plan of a 7-8 hour job, which its ranking by time to train told apart."""
    return f"{seconds / 86400:,.1f} {days}" if seconds >= 2 * 86400 else format_quantity(seconds, "time")


def _plain(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and specs (model_dump) to JSON-ready values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, str):  # a path's undecodable byte (os.fsdecode's lone surrogate) as \xff: strict JSON
        return shown(obj)
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise InputError(f"a result is not finite ({obj!r}), so no JSON was written", where="result",
                             allowed="inputs within physical ranges (sizes, bandwidths, latencies, times)")
        return obj
    if hasattr(obj, "model_dump"):
        return _plain(obj.model_dump(mode="json"))
    if hasattr(obj, "__dataclass_fields__"):
        return _plain({k: getattr(obj, k) for k in obj.__dataclass_fields__})
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return _plain(float(obj))
    return str(obj)


def to_json(payload: dict[str, Any], command: str) -> str:
    """One strictly valid JSON document with ``schema_version`` and ``command`` first, and the
    ``warnings`` raised while reading the inputs (:mod:`scalemodel.specs.notices`) last."""
    doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "command": command}
    doc.update(payload)
    own = list(payload.get("warnings", []))
    doc["warnings"] = own + [w for w in notices.current() if w not in own]
    return json.dumps(_plain(doc), allow_nan=False, indent=2)


def emit_json(payload: dict[str, Any], command: str) -> None:
    sys.stdout.write(to_json(payload, command) + "\n")  # ASCII (json.dumps escapes the rest): any stdout writes it


def stdout_encodes(text: str) -> bool:
    """Whether stdout's encoding writes each character of ``text`` (else it writes '?': cli._tolerant_stdout)."""
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def emit_data(text: str) -> None:
    """Machine-readable text (a CSV table) on stdout, every character kept: where stdout's encoding (ascii, latin-1)
    cannot write one, the text goes out as UTF-8 bytes, as the files ``--out`` writes (:func:`write_file`). Written
    through the encoding, a sweep's strategy label in Chinese was '????' in ``sweep --csv > out.csv``, exit 0."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None or stdout_encodes(text):
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    buffer.write(shown(text).encode("utf-8"))
    buffer.flush()


# --- tables within the terminal width ------------------------------------------------------------

def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size()`` gives it to argparse (``COLUMNS``, else the
    terminal on stdout, else 80), without importing shutil, which loads zlib, bz2 and lzma (~2 ms): argparse
    builds a formatter for every option it adds, so each query would import it."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout, or not a terminal
            columns = 0
    return columns or 80


#: The narrowest console a table is printed in: its compact layout ("header: value" lines) still reads there.
MIN_COLUMNS = 20


def _console_width() -> int | None:
    """The width to give rich's Console where ``COLUMNS`` is one it cannot print in, else None (rich's own: COLUMNS,
    the terminal, 80). rich takes any all-digit COLUMNS: COLUMNS=0 printed nothing at all with exit status 0, and
    COLUMNS=1 a character a line (fuzz24). 0 is unset, as for --help (:func:`terminal_columns`, shutil's rule);
    below :data:`MIN_COLUMNS`, that."""
    text = os.environ.get("COLUMNS", "")
    return max(terminal_columns(), MIN_COLUMNS) if text.isdigit() and int(text) < MIN_COLUMNS else None


def verbatim(text: object) -> str:
    """``text``, a name the user gave (a cluster's, model's or scenario's), as rich markup that prints it as written:
    "[red]mine" printed as "mine" in the header lines (review25d; fuzz25 the same of the output paths)."""
    from rich.markup import escape  # tables only: the header line above a table (a --json query never loads rich)
    return escape(str(text))


def new_console() -> Console:
    """The rich Console every table and line goes through (stdout). Emoji codes are off, so names and
    values print verbatim (``:x:`` in a model name stays text); rich's repr highlighter (it colours
    numbers, paths, ...) runs only where colour is written: without a colour system (a pipe, a file,
    ``TERM=dumb``) its styles are dropped anyway, and its regexes cost ~2 ms of a query's first print. A line
    it wraps keeps each number with its unit ("500 MB", as tables do: :func:`print_table`)."""
    cls = _console_class()
    width = _console_width()
    console = cls(emoji=False, width=width)
    return console if console.color_system else cls(emoji=False, highlight=False, width=width)


_CONSOLE: Any = None


def _console_class() -> Any:
    """rich's Console, printing a text line with each number glued to its unit while it wraps (made once)."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console  # tables only: a --json query never loads rich

        class UnitConsole(Console):
            def on_broken_pipe(self) -> None:
                """rich's own ends the process with exit 1 (`scalemodel hardware list | head`, fuzz28): the CLI's
                rule for a closed pipe is exit 0, as a --json query gets (cli._run)."""
                self.quiet = True
                raise BrokenPipeError

            def print(self, *objects: Any, **kwargs: Any) -> None:
                if not any(isinstance(o, str) and re.search(_UNIT_GAP, o) for o in objects):
                    super().print(*objects, **kwargs)
                    return
                with self.capture() as capture:
                    glued = (re.sub(_UNIT_GAP, _GLUE, o) if isinstance(o, str) else o for o in objects)
                    super().print(*glued, **kwargs)
                self.file.write(capture.get().replace(_GLUE, " "))

        _CONSOLE = UnitConsole
    return _CONSOLE


def _fit_widths(console: Any, table: Any, width: int) -> bool:
    """Give each column of ``table`` a width so the table fits ``width`` without breaking a word: every
    column gets its longest word (its whole text when it does not wrap), and the space left is shared
    in proportion to how much more each column's longest line needs. False when even that does not fit."""
    from rich.measure import Measurement  # tables only: a --json query never loads rich

    opts = console.options.update_width(10**5)  # measure without the console's width as a cap
    for col in table.columns:  # right-aligned columns hold numbers with units: "11.23 s" stays on one line
        if col.justify == "right" and all(len(_cell_text(c)) <= 16 for c in col.cells):
            col.no_wrap = True
    lows, highs = [], []
    for col in table.columns:
        ms = [Measurement.get(console, opts, cell) for cell in (col.header, *col.cells)]
        high = max(m.maximum for m in ms)
        lows.append(high if col.no_wrap else max(m.minimum for m in ms))
        highs.append(high)
    saved = [col.width for col in table.columns]
    for col in table.columns:
        col.width = 1
    overhead = Measurement.get(console, opts, table).maximum - len(table.columns)  # borders and padding
    for col, w in zip(table.columns, saved, strict=True):
        col.width = w
    if sum(highs) + overhead <= width:
        return True
    spare = width - overhead - sum(lows)
    if spare < 0:
        return False
    grow = [h - lo for h, lo in zip(highs, lows, strict=True)]
    total = sum(grow) or 1
    for col, lo, g in zip(table.columns, lows, grow, strict=True):
        col.width = lo + spare * g // total
    return True


#: The space between a number and its unit ("bucket 500 MB"), and after the headers' "seq" ("seq 2,048"): glued
#: while rich wraps a table cell or a line, so that it breaks before the number or after the unit, never between.
_UNIT_GAP = (r"(?<=\d) (?=(?:[kKMGTPE]i?B|B|[pnum]?s|[kKMGTPE]?B/s|[kMGT]bit/s|[kMGTPE]?FLOP/s|k?W|USD|"
             r"days?)(?![\w/]))|(?<=\bseq) (?=\d)")  # text: compiled by re on first use, by tables only
_GLUE = "\ue000"  # a private-use character: one cell wide and not whitespace, so rich's word wrap never splits at it


def _glue_units(table: Any) -> bool:
    """Glue each number to its unit in the table's text cells; True when any was."""
    glued = False
    for col in table.columns:
        cells = [re.sub(_UNIT_GAP, _GLUE, c) if isinstance(c, str) else c for c in col._cells]
        glued = glued or cells != col._cells
        col._cells = cells
    return glued


def _print_glued(console: Any, table: Any, glued: bool) -> None:
    if not glued:
        console.print(table)
        return
    with console.capture() as capture:
        console.print(table)
    console.file.write(capture.get().replace(_GLUE, " "))


def _cell_text(cell: Any) -> str:
    from rich.text import Text  # tables only: a --json query never loads rich

    plain = getattr(cell, "plain", None)
    if isinstance(plain, str):
        return plain
    return Text.from_markup(cell, emoji=False).plain if isinstance(cell, str) else str(cell)  # as rendered: emoji off


def print_table(console: Any, table: Any) -> None:
    """Print ``table`` within the console's width (a terminal's, or ``COLUMNS``/80 when piped) without
    breaking a word or a number: boxed when every column's longest word fits; else borderless (no box
    lines, one space between columns); else one block per row, ``header: value`` lines under the first
    column's value (the compact layout)."""
    from rich import box  # tables only: a --json query never loads rich

    width = console.width
    glued = _glue_units(table)
    if _fit_widths(console, table, width):
        _print_glued(console, table, glued)
        return
    table.box = box.SIMPLE_HEAD
    table.show_edge = False
    table.pad_edge = False
    table.padding = (0, 1)
    table.collapse_padding = True
    if _fit_widths(console, table, width):
        _print_glued(console, table, glued)
        return
    columns = list(table.columns)
    heads = [_cell_text(c.header).replace("\n", " ") for c in columns]
    cells = [[_cell_text(x).replace(_GLUE, " ") for x in c.cells] for c in columns]
    if table.title:
        console.print(_cell_text(table.title), highlight=False)
    for r in range(table.row_count):
        console.print(f"{heads[0]}: {cells[0][r]}" if heads[0] else cells[0][r], highlight=False, markup=False)
        for h, col in zip(heads[1:], cells[1:], strict=True):
            if col[r]:
                console.print(f"  {h}: {col[r]}" if h else f"  {col[r]}", highlight=False, markup=False)


# --- files the tool writes ------------------------------------------------------------------------

def check_output_path(path: str | os.PathLike[str], option: str, suffixes: tuple[str, ...] = ()) -> str:
    """Refuse an output path before any work: a folder (or a name ending in /), a missing folder,
    something that is not a regular file, a file this invocation has read (an input), or, where ``suffixes`` are
    given (the one format the option writes), a name without one of them: ``calibrate --out o.csv`` wrote YAML."""
    text = os.fspath(path)
    shown = text if len(text) <= 200 else text[:200] + "..."
    if not text or text.endswith(("/", os.sep)) or text in (".", ".."):
        # the example was out.yaml for every option: `sweep -o o.csv/` was offered a YAML name
        name = files.name(files.clean(text.rstrip("/" + os.sep)))
        # and a name whose suffix the option refuses is not offered (`calibrate runs F --out o.txt/`: "e.g. o.txt")
        suffix = files.suffix(files.clean(name))
        example = (f"{name} (without the trailing /)" if suffix and text.endswith(("/", os.sep))
                   and (not suffixes or suffix.lower() in suffixes) else f"out{suffixes[0]}" if suffixes else "")
        raise InputError(f"{shown!r} names a folder, not a file", where=option,
                         allowed="a file path" + (f", e.g. {example}" if example else ""))
    p = files.clean(text)
    _refuse_foreign_link(p, shown, option)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write {shown!r}: {getattr(exc, 'strerror', None) or exc}", where=option,
                         allowed="a writable file path") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{shown!r} is a folder", where=option, allowed="a file path inside it")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{shown!r} exists and is not a regular file", where=option,
                             allowed="a new file or a regular file to replace")
        source = read_by_this_invocation(p)
        if source is not None:
            raise InputError(f"{shown!r} is an input of this command ({source}); writing it would replace it",
                             where=option, allowed="a different output file")
    parent = files.parent(files.resolved(p) if st is not None else p)
    if not os.path.isdir(parent):
        raise InputError(f"folder {str(parent)!r} does not exist", where=option,
                         allowed="a file path in an existing folder")
    if suffixes and files.suffix(p).lower() not in suffixes:
        raise InputError(f"{shown!r}: {option} writes {suffixes[0].lstrip('.').upper()} only", where=option,
                         allowed=f"a file name ending in {' or '.join(suffixes)}, e.g. out{suffixes[0]}")
    return p


def _refuse_foreign_link(p: str, shown: str, option: str) -> None:
    """Refuse to write through a symlink another user planted in a shared sticky folder (e.g. /tmp).

    The kernel refuses to *open* such a link for a follower who owns neither the link nor the folder
    (fs.protected_symlinks, Documentation/admin-guide/sysctl/fs.rst); :func:`write_file` resolves the
    path itself and renames over the target, which the kernel never checks, so the same rule is applied
    here to every link of the chain, and of each folder on the path (the kernel checks those too: a link
    planted as ``/tmp/x`` -> a folder of the victim's makes ``/tmp/x/out.json`` a file there). A user's own
    links, and links in ordinary folders, are followed.
    """
    root = "//" if p.startswith("//") else "/" if p.startswith("/") else ""
    parts = [part for part in p[len(root):].split("/") if part not in ("", ".")]
    if root:
        _refuse_foreign_chain(root, shown, option)
    for i in range(1, len(parts) + 1):  # the folders on the path, outermost first, then the file itself
        _refuse_foreign_chain(root + "/".join(parts[:i]), shown, option)


def _refuse_foreign_chain(p: str, shown: str, option: str) -> None:
    """:func:`_refuse_foreign_link` for the chain of links that starts at ``p`` itself."""
    for _ in range(40):  # the kernel's own limit on nested links (MAXSYMLINKS)
        try:
            link = os.lstat(p)
        except (OSError, ValueError):
            return  # missing or unreadable: check_output_path reports it
        if not stat.S_ISLNK(link.st_mode):
            return
        folder = files.parent(p)  # '.' for a bare name
        try:
            fst = os.stat(folder)
        except OSError:
            return
        shared = bool(fst.st_mode & stat.S_ISVTX) and bool(fst.st_mode & stat.S_IWOTH)
        if shared and link.st_uid not in (os.geteuid(), fst.st_uid):
            raise InputError(f"{shown!r} is a symbolic link another user owns in the shared folder "
                             f"{str(folder)!r}; writing through it would replace a file you did not name",
                             where=option, allowed="a path that is not such a link")
        target = os.readlink(p)
        p = files.join(folder, target)
    raise InputError(f"{shown!r}: too many levels of symbolic links", where=option,
                     allowed="a file path")


def _new_file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_file(path: str | os.PathLike[str], data: str | bytes, option: str) -> str:
    """Write ``data`` to ``path`` atomically: a temporary file in the target's folder, flushed to disk,
    then renamed over the target, so an interrupted or failed run leaves the previous file as it was.
    Refuses what :func:`check_output_path` refuses. A symlink is followed (the file it points to is
    replaced) unless another user planted it in a shared sticky folder (the kernel's protected_symlinks
    rule, which a rename does not apply); a replaced file keeps its permission bits. Every file
    scalemodel writes goes through here or :func:`write_files`.
    """
    return write_files([(path, data, option)])[0]


def write_files(items: Sequence[tuple[str | os.PathLike[str], str | bytes, str]]) -> list[str]:
    """:func:`write_file` for several (path, data, option) files as one: every file written to its temporary
    first, then every rename, so a refused or failed file (a bad path, a full disk) leaves all the targets as they
    were (fuzz40: sweep's second --out refused after its first was replaced). Only a rename failing between two
    others (the folder's permissions changed mid-call) could leave some replaced."""
    import tempfile  # only a command writing a file needs it (~1 ms: random, shutil); queries print

    staged: list[tuple[str, str, str, str]] = []  # (temporary, target, path as checked, option)
    written: list[str] = []
    try:
        for path, data, option in items:
            p = check_output_path(path, option)
            written.append(p)
            target = files.resolved(p)
            # a file name's undecodable byte (os.fsdecode's lone surrogate, e.g. a calibrate overlay's "from <log>"
            # line) as \xff (errors.shown), as --json writes it: UTF-8 refuses a lone surrogate
            payload = shown(data).encode("utf-8") if isinstance(data, str) else data
            try:
                mode = stat.S_IMODE(os.stat(target).st_mode)
            except OSError:
                mode = _new_file_mode()
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{files.name(target)[:100]}.", suffix=".tmp",
                                           dir=files.parent(target))
                staged.append((tmp, target, p, option))
                with os.fdopen(fd, "wb") as f:
                    f.write(payload)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, mode)
            except OSError as exc:
                raise _cannot_write(p, option, exc) from None
        while staged:
            tmp, target, p, option = staged[0]
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise _cannot_write(p, option, exc) from None
            staged.pop(0)
    finally:
        for tmp, *_ in staged:  # failed or interrupted (KeyboardInterrupt included): the old files are untouched
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return written


def _cannot_write(p: str, option: str, exc: OSError) -> InputError:
    return InputError(f"cannot write {str(p)!r}: {exc.strerror or exc}", where=option, allowed="a writable file path")
