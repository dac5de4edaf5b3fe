"""Bounded reading of every input file: regular files only, a documented size limit per kind of file.

Every reader in :mod:`scalemodel.specs` (YAML specs, scenarios and capacity files, HuggingFace
``config.json``, nccl-tests logs, ``--samples`` files) goes through :func:`read_text`, which

- looks at the file with ``os.stat`` before opening it, and refuses anything that is not a regular
  file (a directory, a FIFO, a socket, a device such as ``/dev/zero`` or a symlink to one), so no
  read can block on a pipe without a writer or run without end on a device;
- refuses a file larger than the limit for its kind (the error names the limit), and reads at most
  ``limit + 1`` bytes even when the file grows while it is read;
- opens with ``O_NONBLOCK`` and checks the opened descriptor again, so a file swapped for a FIFO
  between the check and the open cannot block either;
- decodes strict UTF-8, and remembers the file's identity (device, inode) so that the writers in
  :mod:`scalemodel.report.output` can refuse to write over a file the same invocation read.

The limits (bytes) are far above any real input: the largest built-in spec is about 5 KiB, a large
HuggingFace config.json about 50 KiB, a verbose nccl-tests log a few MiB.
"""

from __future__ import annotations

import codecs
import errno
import functools
import math
import os
import re
import stat
from typing import Any

from scalemodel.errors import InputError, shown

KiB = 2**10
MiB = 2**20

#: YAML (or JSON) spec files: accelerators, clusters, workloads, scenarios, capacity files, overlays.
MAX_SPEC_BYTES = 256 * KiB
#: HuggingFace config.json files (parsed by the C JSON parser).
MAX_JSON_BYTES = 8 * MiB
#: nccl-tests output logs (text or ``-J`` JSON).
MAX_LOG_BYTES = 64 * MiB
#: Lines of a log (nccl-tests or training): 64 MiB of lines of 32 bytes on average. nccl-tests data rows are ~100
#: bytes, NCCL INFO lines 60-150, a Megatron-LM iteration line ~300, so a real log of MAX_LOG_BYTES holds well under
#: a million lines; the readers take ~1 us of CPU a line, and 60 MiB of empty lines took 64 s (fuzz35).
MAX_LOG_LINES = 2_000_000
#: ``stragglers --samples`` files of measured step times.
MAX_SAMPLES_BYTES = 16 * MiB
#: Integers in a spec (YAML or JSON): 10**30 is beyond any count of GPUs, parameters, bytes or FLOPs.
MAX_INT_DIGITS = 30
#: Nesting of a YAML spec, and parts of a ``--set`` path: a spec nests a handful of levels.
MAX_DEPTH = 100
#: The decimals a spec may write (YAML, JSON, TOML): what a 64-bit float holds (:func:`float_range_refusal`).
FLOAT_MAGNITUDES = "a number of magnitude 0 or 5e-324 to 1.79e308"


@functools.cache
def non_printable() -> re.Pattern[str]:
    """A character a string in a spec may not hold: what YAML refuses in a file (PyYAML yaml/reader.py
    Reader.NON_PRINTABLE, YAML 1.1 c-printable: NUL, ESC and the other C0 / C1 controls but tab and line breaks, lone
    UTF-16 surrogates, U+FFFE / U+FFFF), refused written as an escape too ("\\x1b" in YAML, "\\u001b" or a lone
    "\\ud800" in JSON): one reached the terminal as an escape sequence, or made the text output a UnicodeEncodeError
    traceback. Compiled on first use, not at import: re's compiler expands the class's ranges into a 64 Ki charmap,
    about 50 M instructions (6% of a `predict --json` that reads no spec file; PyYAML's reader, when imported,
    compiles the same pattern, which re's cache then shares)."""
    return re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]")


#: what such a refusal allows
PRINTABLE_TEXT = "printable text (no NUL or control characters; tab and newline are fine)"

#: Format characters (Unicode category Cf) a spec string may not hold although YAML prints them: the bidirectional
#: controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: "Trojan Source", Boucher and Anderson 2021,
#: arXiv:2111.00169; Unicode UAX #9 section 2) reorder what a terminal shows after them, so a name or label
#: ``"\u202egnp.x"`` reads "x.png" reversed in a table; the invisible ones (U+200B-U+200D, U+2060-U+2064, U+FEFF
#: past a file's first byte) make two names that look the same differ (ux34); the line and paragraph separators
#: (U+2028, U+2029, categories Zl / Zp, which error lines already escape: errors._INVISIBLE) broke a name across lines
#: of a table (``--set model.name=x<U+2028>y``, fuzz35).
_FORMAT = {"\u061c": "bidirectional", "\u200e": "bidirectional", "\u200f": "bidirectional",
           **dict.fromkeys("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", "bidirectional"),
           **dict.fromkeys("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff", "invisible"),
           **dict.fromkeys("\u2028\u2029", "separator")}
#: what a format-character refusal allows
PLAIN_TEXT = ("text without bidirectional controls, invisible format characters or line separators (U+061C, "
              "U+200B-U+200F, U+2028-U+202E, U+2060-U+2064, U+2066-U+2069, U+FEFF); letters of any script are fine")


def refused_character(text: str) -> str | None:
    """The first character of ``text`` a spec string may not hold (:func:`non_printable`, :data:`_FORMAT`), or
    None."""
    bad = non_printable().search(text) or _format_characters().search(text)
    return bad.group() if bad else None


@functools.cache
def _format_characters() -> re.Pattern[str]:
    return re.compile(f"[{''.join(_FORMAT)}]")


def character_refusal(c: str, escaped: bool) -> InputError:
    """The refusal of ``c`` (from :func:`refused_character`) in a string; ``escaped``: written as an escape
    (``\\u202e``), not raw. The caller names the file, line and field (:meth:`InputError.at`)."""
    how = " (written as an escape)" if escaped else ""
    if c in _FORMAT:
        what = {"bidirectional": "a bidirectional control: it reorders the text a terminal shows after it",
                "invisible": "an invisible format character",
                "separator": "a line or paragraph separator: a terminal breaks the line at it"}[_FORMAT[c]]
        return InputError(f"character U+{ord(c):04X} (\\u{ord(c):04x}, {what}){how} is not allowed in a string",
                          allowed=PLAIN_TEXT)
    return InputError(f"character U+{ord(c):04X}{how} is not allowed in a string", allowed=PRINTABLE_TEXT)


def refuse_unprintable_strings(data: Any, text: str, name: str) -> None:
    """Refuse a string value of ``data`` (a JSON or TOML document parsed from ``text``) holding a character the
    YAML reader refuses (:func:`refused_character`), named at its line and key path: the one check of parsed JSON
    and TOML strings, as :mod:`scalemodel.specs.yamlread` makes it of YAML's. JSON writes any character as
    ``\\uXXXX`` (``\\b``, ``\\f``) and passes C1 controls and format characters raw; TOML's basic strings take
    ``\\uXXXX`` / ``\\UXXXXXXXX`` escapes and raw format characters (tomllib refuses only raw controls): a
    cluster.json's ``"name": "\\u001b[31m"`` reached the terminal as an escape sequence, a lone ``"\\ud800"`` made
    the text output a UnicodeEncodeError traceback, and a torchtitan ``flavor = "8B\\u202e"`` was echoed in a
    warning (fuzz35). Keys are left as they are: a key is read only where it is a field's name, and any other is
    named in an error or warning, which writes such a character as its escape (errors.prose); a third-party config
    (HuggingFace, DeepSpeed, torchtitan) keeps its unread keys, warned about."""
    if "\\" not in text and not refused_character(text):  # no escape, nothing raw: every string is printable
        return
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, dict):
            stack.extend((f"{path}.{k}".lstrip("."), v) for k, v in reversed(x.items()))
        elif isinstance(x, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(x))))
        elif isinstance(x, str) and (c := refused_character(x)) is not None:
            raw = text.find(c)
            escape = re.search({"\b": r"\\b", "\f": r"\\f"}.get(c, rf"\\u{ord(c):04x}|\\U{ord(c):08x}"), text,
                               re.I)
            line = text.count("\n", 0, raw if raw >= 0 else escape.start() if escape else 0) + 1
            key = f" {shown(path)[:100]}:" if path else ""
            raise character_refusal(c, raw < 0).at(f"{name}:{line}:{key}".rstrip(":"))

_READ_CHUNK = MiB

# (st_dev, st_ino) -> the path as given, for every file read since the last forget_reads()
_reads: dict[tuple[int, int], str] = {}


def _size_text(n: int) -> str:
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= KiB and n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n} bytes"


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def forget_reads() -> None:
    """Start a new invocation: forget which files were read (the CLI calls this once per command)."""
    _reads.clear()


def read_by_this_invocation(path: str | os.PathLike[str]) -> str | None:
    """The name under which ``path`` (the same file, by device and inode) was read, or None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _reads.get((st.st_dev, st.st_ino))


def refuse_trailing_slash(ref: str | os.PathLike[str], what: str = "file") -> None:
    """Refuse a path written with a trailing '/' (``file.yaml/``) that names something other than a folder, as the
    OS does (ENOTDIR, "Not a directory"): :class:`pathlib.Path` drops the slash, and such a path was read as the file.
    A folder's path (a HuggingFace snapshot ``models/llama/``) keeps its slash. An empty path, which
    :class:`pathlib.Path` reads as '.', is refused here too (:func:`empty_path`)."""
    if ref == "":
        raise empty_path(what)
    if not isinstance(ref, str) or not ref.endswith(("/", os.sep)) or ref.strip("/" + os.sep) == "":
        return
    try:
        os.stat(ref)
    except NotADirectoryError:
        raise _not_a_directory(ref, what) from None
    except (OSError, ValueError):
        return  # not found, a NUL byte, ...: refused where the path is read, as without the slash


def _not_a_directory(ref: str | os.PathLike[str], what: str) -> InputError:
    shown = str(ref)[:200]
    return InputError(f"not a directory: the path ends with '/', but {shown.rstrip('/' + os.sep)!r} is not a folder",
                      where=shown, allowed=f"the {what}'s path without the trailing '/'")


def empty_path(what: str) -> InputError:
    """The refusal of an empty path (``--strategy ''``): ``Path('')`` and :func:`clean` read it as '.', the working
    folder, which a reader then refused as "'.' is a directory" (a path the user did not write), and ``os.stat('')``
    as "not found" of no path (fuzz35)."""
    return InputError("an empty path ('')", allowed="a file path" + (f" (the {what})" if what != "file" else ""))


def _stat(path: str | os.PathLike[str], what: str) -> os.stat_result:
    if os.fspath(path) == "":
        raise empty_path(what)
    try:
        return os.stat(path)
    except NotADirectoryError:
        if str(path).endswith(("/", os.sep)):
            raise _not_a_directory(path, what) from None
        raise InputError(f"{what} not found: a part of the path before the last is a file, not a folder",
                         where=str(path)[:200], allowed=f"an existing {what}") from None
    except FileNotFoundError:
        # a dangling link: said as such, as a spec path is (missing_what); an nccl-tests log, a --samples file or a
        # --strategy file behind a link whose target is gone was "not found" of a link ls shows
        link = missing_what(path)
        raise InputError(f"{what} not found" if link == "file not found" else f"{what} not found: {link}",
                         where=str(path), allowed=f"an existing {what}") from None
    except ValueError:  # an embedded NUL byte in the path
        raise InputError("the path contains a NUL byte", where=repr(str(path))[:80],
                         allowed=f"a path to a {what}") from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", where=str(path)[:200],
                         allowed=f"a readable {what}") from None


def read_bytes(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes (see the module docstring)."""
    where = str(path)
    st = _stat(path, what)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"is {_file_type(st.st_mode)}, not a regular file", where=where,
                         allowed=f"a {what} (a regular file)")
    too_big = InputError(f"{what} is larger than the {_size_text(limit)} limit", where=where,
                         allowed=f"a {what} of at most {_size_text(limit)} ({limit} bytes)")
    if st.st_size > limit:
        raise too_big
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot open {what}: {exc.strerror or exc}", where=where,
                         allowed=f"a readable {what}") from None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):  # swapped between the stat and the open
            raise InputError(f"is {_file_type(fst.st_mode)}, not a regular file", where=where,
                             allowed=f"a {what} (a regular file)")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew while being read
            raise too_big
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", where=where,
                         allowed=f"a readable {what}") from None
    finally:
        os.close(fd)
    _reads[(fst.st_dev, fst.st_ino)] = where
    return b"".join(chunks)


#: Byte-order marks of UTF-16 text. Windows PowerShell 5.1's ``Out-File`` and ``>`` write UTF-16LE, with a mark
#: (learn.microsoft.com/powershell/module/microsoft.powershell.core/about/about_character_encoding?view=powershell-5.1:
#: "any Unicode encoding, except UTF7, always creates a BOM"; "Out-File and the redirection operators > and >> create
#: UTF-16LE").
_UTF16_BOMS = ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_UTF16_BOMS_ONLY = tuple(bom for bom, _ in _UTF16_BOMS)


def read_text(path: str | os.PathLike[str], *, limit: int, what: str = "file") -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading byte-order mark is dropped)."""
    data = read_bytes(path, limit=limit, what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # UTF-32 first: its little-endian mark starts with UTF-16's (fuzz31: a UTF-32 file was called UTF-16)
        for utf, boms in (("UTF-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)), ("UTF-16", _UTF16_BOMS_ONLY)):
            if data.startswith(boms):  # was "not UTF-8 text (byte 0xff on line 1)"
                raise InputError(f"{utf} text (it starts with a {utf} byte-order mark)", where=str(path),
                                 allowed=f"a UTF-8 text {what} (save it as UTF-8)") from None
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})", where=str(path),
                         allowed=f"a UTF-8 text {what}") from None


def read_log(path: str | os.PathLike[str], *, limit: int, what: str) -> str:
    """:func:`read_bytes` of a log (a training or nccl-tests log): UTF-16 when a UTF-16 byte-order mark says so,
    else UTF-8 with undecodable bytes as U+FFFD (a log may hold a stray binary line). A UTF-16 log read as UTF-8
    had every other byte NUL and was refused as "no ... line found" with no word of its encoding. At most
    :data:`MAX_LOG_LINES` lines: the byte limit alone let 60 MiB of empty lines hold a reader for a minute."""
    data = read_bytes(path, limit=limit, what=what)
    text = next((data[len(bom):].decode(codec, errors="replace") for bom, codec in _UTF16_BOMS
                 if data.startswith(bom) and not data.startswith(codecs.BOM_UTF32_LE)), None)
    if text is None:
        text = data.decode("utf-8-sig", errors="replace")
    # the lines str.splitlines makes (CR LF is one), counted in C before a reader's Python loop walks them
    lines = sum(text.count(c) for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029") - text.count("\r\n")
    if lines > MAX_LOG_LINES:
        raise InputError(f"{what} has more than {MAX_LOG_LINES:,} lines ({lines:,})", where=str(path),
                         allowed=f"a {what} of at most {MAX_LOG_LINES:,} lines (trim or split a longer log)")
    return text


def nul_note(text: str) -> str:
    """A clause for a log in which no line was recognised and that holds NUL bytes (UTF-16 without a byte-order
    mark, or a binary file), else ''."""
    return " (the file holds NUL bytes: UTF-16 text without a byte-order mark, or not text)" if "\x00" in text else ""


def expand_user(ref: str | os.PathLike[str]) -> str:
    """``ref`` as a path (:func:`clean`) with a leading ``~`` or ``~USER`` expanded as
    :meth:`pathlib.Path.expanduser` does; an unknown user (or no home folder) is an input error, where pathlib raises
    RuntimeError. (The clean path drops a trailing '/': callers that read a file refuse one first,
    :func:`refuse_trailing_slash`.)"""
    if os.fspath(ref) == "":
        raise empty_path("file")
    p = clean(ref)
    if not p.startswith("~"):
        return p
    first, _, rest = p.partition("/")
    home = os.path.expanduser(first)
    if home.startswith("~"):
        raise InputError(f"cannot expand {str(ref).split('/', 1)[0][:60]!r}: no such user or home folder",
                         where=str(ref)[:200], allowed="a path without ~USER, or ~ of an existing user")
    return clean(os.path.join(home, rest))


# --- paths as text ---------------------------------------------------------------------------------
# A query handles paths as str with os.path: pathlib imports urllib.parse and ipaddress (21 M instructions, ~3% of
# `predict --json`; benchmarks/README.md). These keep every path's text as str(pathlib.PurePosixPath(...)) spells it
# (CPython 3.11 Lib/pathlib.py _PosixFlavour.splitroot, _parse_args, name/suffix/stem/parent), which errors quote.

def clean(ref: str | os.PathLike[str]) -> str:
    """``str(PurePosixPath(ref))``: '.' parts, doubled and trailing slashes dropped ('' is '.'); a leading '//' (but
    not '///') kept, as POSIX leaves its meaning to the system."""
    text = os.fspath(ref)
    root = "//" if text.startswith("//") and not text.startswith("///") else "/" if text.startswith("/") else ""
    body = "/".join(part for part in text.split("/") if part and part != ".")
    return root + body if root or body else "."


def join(folder: str | os.PathLike[str], ref: str | os.PathLike[str]) -> str:
    """``str(Path(folder) / ref)``: ``ref`` itself when absolute."""
    return clean(os.path.join(os.fspath(folder), os.fspath(ref)))


def parent(path: str) -> str:
    """``str(Path(path).parent)`` of a :func:`clean` path ('.' for a bare name, '/' for '/')."""
    return os.path.dirname(path) or "."


def name(path: str) -> str:
    """``Path(path).name`` of a :func:`clean` path ('' for '.' and '/')."""
    return "" if path == "." else os.path.basename(path)


def _dot(base: str) -> int:
    i = base.rfind(".")
    return i if 0 < i < len(base) - 1 else -1


def suffix(path: str) -> str:
    """``Path(path).suffix``: the last '.xyz' of the name, '' for '.bashrc' and 'x.'."""
    base = name(path)
    i = _dot(base)
    return base[i:] if i > 0 else ""


def stem(path: str) -> str:
    """``Path(path).stem``: the name without its :func:`suffix`."""
    base = name(path)
    i = _dot(base)
    return base[:i] if i > 0 else base


def resolved(path: str | os.PathLike[str]) -> str:
    """``str(Path(path).resolve())`` (non-strict): the absolute path with every link followed."""
    return os.path.realpath(path)


def missing_what(path: str | os.PathLike[str]) -> str:
    """What to say of a path :func:`exists` found nothing at: a symbolic link whose target is missing or that loops
    back on itself was said "file not found", while the link is there to be seen with ls. A missing ``-`` is said to
    be a file name: a reader of standard input's ``-`` was told "file not found" of it (fuzz26)."""
    if str(path) == "-":
        return "'-' is a file name here, and no file has it: standard input is not read (save the piped text to a file)"
    try:
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return "a symbolic link that loops back on itself (too many levels of symbolic links)"
            return f"a symbolic link to {os.readlink(path)[:200]!r}, which does not resolve to a file"
    except (OSError, ValueError):
        pass
    return "file not found"


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether anything exists at ``path`` (without raising on names the file system cannot hold)."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def float_range_refusal(text: str, value: float) -> str | None:
    """Why the decimal ``text``, which ``float`` read as ``value``, is refused, or None where a 64-bit float holds it:
    beyond the range (read as inf) or nonzero below it (read as 0), so a refusal would quote a value the file does
    not hold ("layers: ... (got inf)"). One rule for the YAML, JSON and TOML readers (fuzz34, fuzz36); the spelled-out
    infinities and NaNs (YAML's .inf, TOML's inf) are the caller's to pass before."""
    if math.isinf(value) or (value == 0 and re.search(r"[1-9]", text.lower().lstrip("+-").split("e")[0])):
        return f"{text[:40]} is {'beyond' if value else 'below'} the range of a number (a 64-bit float)"
    return None
