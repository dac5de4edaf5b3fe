#!/usr/bin/env python3
"""Write scalemodel/data/catalog.json: every file of the built-in catalog (hardware/accelerators,
hardware/clusters, examples/workloads, examples/scenarios) parsed with the strict YAML reader of any
spec (scalemodel/specs/yamlread.py), so that a query on built-in names imports no YAML parser
(scalemodel/specs/precompiled.py). Each document is stored as ``[checksum, document]``, the CRC-32 of its
canonical JSON (precompiled.checksum), so that a damaged entry is not used. Re-run after editing any of those
files:

    python scripts/build_catalog.py            # write the file
    python scripts/build_catalog.py --check    # exit 1 when the committed file is stale

A document that JSON cannot hold exactly (a non-string key, a non-finite number) is left out with a
note: the loader parses that file from YAML, as it does any file the catalog does not hold.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generated_file import write_or_check  # noqa: E402  (scripts/, beside this file)

from scalemodel.specs import precompiled, yamlread  # noqa: E402
from scalemodel.specs.files import MAX_SPEC_BYTES, read_text  # noqa: E402
from scalemodel.specs.loader import CATALOG  # noqa: E402


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (1 and 1.0, or "1" and 1, differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.isfinite(a) and a == b
    return bool(a == b)


def files() -> list[Path]:
    """The catalog's files, in a stable order (kind by kind, then by name)."""
    return [p for top, sub in CATALOG.values() for p in sorted((ROOT / top / sub).glob("*.yaml"))]


def build() -> tuple[str, list[str]]:
    """The file's text and the notes on documents left out."""
    lines, notes, seen = [], [], set()
    for path in files():
        text = read_text(path, limit=MAX_SPEC_BYTES, what="spec file")
        doc, _node = yamlread.load(text, str(path.relative_to(ROOT)))
        encoded = msgspec.json.encode(doc)
        if not _same(msgspec.json.decode(encoded), doc):
            notes.append(f"{path.relative_to(ROOT)}: left out (JSON cannot hold its document exactly)")
            continue
        key = precompiled.key(path.name, text)
        if key in seen:
            continue
        seen.add(key)
        lines.append(f"{msgspec.json.encode(key).decode()}: [\"{precompiled.checksum(encoded)}\", {encoded.decode()}]")
    source = "scripts/build_catalog.py from the YAML files of the built-in catalog (regenerate, never edit)"
    text = (f'{{"source": {msgspec.json.encode(source).decode()},\n"documents": {{\n'
            + ",\n".join(lines) + "\n}}\n")
    return text, notes


def main(argv: list[str]) -> int:
    text, notes = build()
    for note in notes:
        print(note)
    return write_or_check(Path(precompiled.DATA), text, argv, script="build_catalog.py",
                          summary=f"{len(text.splitlines()) - 3} documents, {len(text) // 1024} KiB")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
