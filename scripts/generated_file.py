"""Write a generated data file, or with ``--check`` only say whether the committed copy is current (exit 1 if
stale): the one route of the scripts that regenerate package data (build_catalog.py, build_residuals.py)."""

from __future__ import annotations

from pathlib import Path


def write_or_check(out: Path, text: str, argv: list[str], *, script: str, summary: str) -> int:
    """``--check`` in ``argv``: 0 when ``out`` holds ``text``, else 1 with the command that regenerates it
    (``python scripts/<script>``); otherwise write ``text`` to ``out`` and report ``summary``."""
    if "--check" in argv:
        current = out.read_text() if out.is_file() else ""
        if current != text:
            print(f"{out} is stale: run python scripts/{script}")
            return 1
        print(f"{out} is current")
        return 0
    out.write_text(text)
    print(f"wrote {out} ({summary})")
    return 0
