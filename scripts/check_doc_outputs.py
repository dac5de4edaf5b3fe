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
checked; keep them few.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*<!--\s*output-of:\s*(.+?)\s*-->\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Block:
    """One marked block: where it is, the command, and the lines it quotes."""

    path: Path
    line: int  # 1-based line of the marker
    command: str
    quoted: tuple[str, ...]


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
        command = m.group(1)
        if not command.startswith("scalemodel "):
            raise ValueError(f"{path}:{i + 1}: output-of command must start with 'scalemodel ', got {command!r}")
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
    return collapse(out.getvalue() + "\n" + err.getvalue())


def check(block: Block, output: str | None = None) -> list[str]:
    """The problems of one block (empty when it matches): the first quoted line not found, in order."""
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
            print(f"{b.path}:{b.line}: {b.command} ({len(b.quoted)} lines)")
            continue
        msgs = check(b)
        problems += bool(msgs)
        print(("DRIFT " + "\n".join(msgs)) if msgs else f"ok    {_rel(b.path)}:{b.line}: {b.command}")
    if not listing:
        print(f"{len(found)} marked blocks, {problems} drifted")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
