"""Re-run the ``scalemodel`` commands whose output the documentation quotes, and report drift.

Usage: ``python scripts/check_doc_outputs.py [FILE.md ...] [--list]`` (default: README.md, examples/README.md,
docs/*.md). Exit 0 when every marked block still matches, 1 when one drifted, 2 on a malformed marker.

The marker. A quoted output is checked only where the Markdown says which command printed it, with an HTML
comment (invisible when rendered) on the line before its fenced block::

    <!-- output-of: scalemodel scale --scenario examples/scenarios/strong-scaling.yaml -->
    ```
    $ scalemodel scale --scenario examples/scenarios/strong-scaling.yaml
      128   4,096   7.1 s   1.18M    103.8   100.0%  100.0%  (reference)
    ...
    ```

The command is run in-process (``scalemodel.cli.main``, from the repository root, ``COLUMNS=200``) and its
stdout and stderr are joined into one line with runs of whitespace collapsed, so the terminal's width, table
padding and line wrapping do not matter. Each line of the block, whitespace collapsed the same way, must then
occur in that text, in the block's order; lines that start with ``$ `` (the command as shown, with the lines
it continues with a trailing backslash) and lines that are ``...`` (an elision) are skipped. A block may
therefore leave out lines of the output (titles, bar charts, notes) but every line it keeps must be what the
command prints now. Blocks without a marker (summaries of ``--json`` fields, hand-made tables) are not
checked unless they carry the second marker.

The second marker, for a table that summarises ``--json`` output row by row::

    <!-- figures-of: scalemodel scale --scenario S.yaml --gpus 2048 --json :: step_time_s breakdown_s.dp_comm -->
    ```
    $ scalemodel scale --scenario S.yaml --gpus 2048 [--sync ...] --json
    (bsp)                      4.63 s   3.54 s   ...
    --sync hier:128            4.67 s   3.62 s   ...
    $ ... --set strategy.bucket_size=25MiB        (a comment)
    (bsp)                      8.83 s   7.74 s   ...
    ```

After ``::`` come the columns: each a path into one point of the JSON (``breakdown_s.dp_comm``), with an
optional point index before a colon (``0:step_time_s``; the last point by default) and an optional factor
after ``*`` or divisor after ``/`` (``breakdown_s.straggler*1000`` for ms, ``time_to_target_s/3600`` for h).
A row is a line that starts with ``--`` (the flags it adds to the command) or with ``(`` (none), up to the
first run of two spaces; its first numbers after that are the columns' figures, and each must be what the
command prints rounded as quoted (within half a unit of the quoted last digit). A line ``$ ... FLAGS`` adds
FLAGS (up to ``(`` or two spaces) to the rows below it; other lines (titles, headers, notes) are skipped, and
so are the numbers after the columns (sums, percentages: keep the checked columns first).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*<!--\s*(output-of|figures-of):\s*(.+?)\s*-->\s*$")
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
ROW_LABEL = re.compile(r"^(\(.*?\)|--\S.*?)(?:\s{2,}|$)")
FIELD = re.compile(r"^(?:(-?\d+):)?([A-Za-z_][\w.]*)(?:([*/])(\d+(?:\.\d+)?))?$")
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Block:
    """One marked block: where it is, the command, and the lines it quotes."""

    path: Path
    line: int  # 1-based line of the marker
    command: str
    quoted: tuple[str, ...]
    columns: tuple[str, ...] = ()  # figures-of: the JSON columns; quoted then holds the raw lines


def collapse(text: str) -> str:
    return " ".join(text.split())


def blocks(path: Path) -> list[Block]:
    """Every ``output-of`` marker of a Markdown file with the fenced block that follows it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not FENCE.match(lines[j]):
            raise ValueError(f"{path}:{i + 1}: output-of marker not followed by a fenced block")
        fence = FENCE.match(lines[j]).group(1)  # type: ignore[union-attr]
        k = j + 1
        while k < len(lines) and not lines[k].strip().startswith(fence):
            k += 1
        if k >= len(lines):
            raise ValueError(f"{path}:{j + 1}: fenced block after the output-of marker is not closed")
        command, columns = m.group(2), ""
        if m.group(1) == "figures-of":
            command, _, columns = command.partition(" :: ")
            bad = [c for c in columns.split() if not FIELD.match(c)]
            if not columns.split() or bad:
                msg = f"figures-of needs ' :: ' and columns like 0:breakdown_s.x*1000, got {bad}"
                raise ValueError(f"{path}:{i + 1}: {msg}")
        if not command.startswith("scalemodel "):
            raise ValueError(f"{path}:{i + 1}: {m.group(1)} command must start with 'scalemodel ', got {command!r}")
        if columns:
            found.append(Block(path, i + 1, command, tuple(lines[j + 1 : k]), tuple(columns.split())))
            i = k + 1
            continue
        quoted: list[str] = []
        continued = False  # inside a shown command continued with a trailing backslash
        for ln in (collapse(x) for x in lines[j + 1 : k]):
            shown = continued or ln.startswith("$ ")
            continued = shown and ln.endswith("\\")
            if ln and ln != "..." and not shown:
                quoted.append(ln)
        found.append(Block(path, i + 1, command, tuple(quoted)))
        i = k + 1
    return found


def run(command: str) -> str:
    """``scalemodel ARGS`` in-process from the repository root: stdout then stderr, whitespace collapsed."""
    out, err = _invoke(command)
    return collapse(out + "\n" + err)


def _invoke(command: str) -> tuple[str, str]:
    """``scalemodel ARGS`` in-process from the repository root (``COLUMNS=200``): its stdout and stderr."""
    from scalemodel.cli import main

    out, err = io.StringIO(), io.StringIO()
    cwd, columns = os.getcwd(), os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "200"
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(shlex.split(command)[1:])
            except SystemExit:
                pass
    finally:
        os.chdir(cwd)
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return out.getvalue(), err.getvalue()


def rows(block: Block) -> list[tuple[int, list[str], list[str]]]:
    """The rows of a figures-of block: (line number, the flags it adds, its quoted figures)."""
    found: list[tuple[int, list[str], list[str]]] = []
    prefix: list[str] = []
    for n, raw in enumerate(block.quoted, start=block.line + 2):
        line = raw.strip()
        if line.startswith("$ ... "):
            prefix = shlex.split(re.split(r"\(|\s{2,}", line[len("$ ... ") :], maxsplit=1)[0])
            continue
        m = ROW_LABEL.match(line)
        figures = NUMBER.findall(line[m.end() :]) if m else []
        if m and figures:
            label = m.group(1)
            found.append((n, prefix + ([] if label.startswith("(") else shlex.split(label)), figures))
    return found


def figure(point_list: list[dict], column: str) -> float:
    """The value of one column (``[N:]path[*k|/k]``) in a ``--json`` answer's points."""
    m = FIELD.match(column)
    assert m is not None  # checked when the marker was read
    value = point_list[int(m.group(1) or -1)]
    for key in m.group(2).split("."):
        value = value[key]
    scale = float(m.group(4) or 1)
    return float(value) * scale if m.group(3) == "*" else float(value) / scale


def matches(quoted: str, value: float) -> bool:
    """Whether ``value`` rounds to the quoted figure: within half a unit of its last digit."""
    mantissa, _, exponent = quoted.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - decimals)
    return abs(value - float(quoted)) <= unit / 2 * (1 + 1e-9)


def check_figures(block: Block, answer: dict[str, str] | None = None) -> list[str]:
    """The problems of a figures-of block: each row whose figures are not what its command prints now.
    ``answer`` maps a row's full command to its JSON output (for tests); by default each command is run."""
    problems = []
    where = f"{_rel(block.path)}:{block.line}"
    for n, flags, figures in rows(block):
        command = " ".join([block.command, *(shlex.quote(f) for f in flags)])
        out = answer[command] if answer is not None else _invoke(command)[0]
        try:
            point_list = json.loads(out)["points"]
            now = [figure(point_list, c) for c in block.columns]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            problems.append(f"{where}: line {n}: `{command}` gave no {block.columns} ({exc!r})")
            continue
        if len(figures) < len(now):
            problems.append(f"{where}: line {n}: {len(figures)} figures for {len(now)} columns")
        elif not all(matches(q, v) for q, v in zip(figures, now, strict=False)):
            quoted, shown = " ".join(figures[: len(now)]), " ".join(f"{v:.6g}" for v in now)
            problems.append(f"{where}: line {n}: `{command}`\n  quoted: {quoted}\n  now:    {shown}")
    return problems


def check(block: Block, output: str | None = None) -> list[str]:
    """The problems of one block (empty when it matches): the first quoted line not found, in order."""
    if block.columns:
        return check_figures(block)
    text = run(block.command) if output is None else output
    pos = 0
    for ln in block.quoted:
        at = text.find(ln, pos)
        if at < 0:
            where = f"{_rel(block.path)}:{block.line}"
            near = difflib.get_close_matches(ln, _windows(text[pos:], len(ln)), n=1, cutoff=0.5)
            return [f"{where}: `{block.command}`\n  quoted: {ln}\n  now:    {near[0] if near else '(nothing close)'}"]
        pos = at + len(ln)
    return []


def _rel(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _windows(text: str, width: int) -> list[str]:
    """Substrings of ``text`` as long as a quoted line, starting at each word, for the closest-match hint."""
    starts = [0] + [m.end() for m in re.finditer(" ", text)]
    return [text[s : s + width] for s in starts]


def default_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    listing = "--list" in args
    files = [Path(a).resolve() for a in args if a != "--list"] or default_files()
    try:
        found = [b for f in files for b in blocks(f)]
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    problems = 0
    for b in found:
        if listing:
            what = f"{len(rows(b))} rows x {len(b.columns)} figures" if b.columns else f"{len(b.quoted)} lines"
            print(f"{b.path}:{b.line}: {b.command} ({what})")
            continue
        msgs = check(b)
        problems += bool(msgs)
        print(("DRIFT " + "\n".join(msgs)) if msgs else f"ok    {_rel(b.path)}:{b.line}: {b.command}")
    if not listing:
        print(f"{len(found)} marked blocks, {problems} drifted")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
