"""Docs that name code in engine/step.py name code that is there.

split19step moved most of step.py into pipeline_ranks, layer_compute, model_parallel_comm, dp_comm and stage_memory;
a Markdown reference ```step.bucket_count``` or "step.py `_expose_param_gather`" to a function that moved sends a
reader to the wrong file (step.py imports some of them, so the name still resolves there: the check is where the
definition stands). review20a found four such references left by the split."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

STEP = ROOT / "scalemodel" / "engine" / "step.py"

#: `step.NAME` / `engine.step.NAME` in code spans
DOTTED = re.compile(r"`(?:scalemodel\.)?(?:engine\.)?step\.(?!py\b)([A-Za-z_][A-Za-z_0-9]*)")
#: step.py `NAME` and step.py` (`NAME`, `NAME`, ...): the names a step.py citation lists (not lockstep.py's)
CITED = re.compile(r"(?<![A-Za-z_])step\.py`?\s*(\(`[^)]*\)|`[A-Za-z_][A-Za-z_0-9]*`)")


def _defined_in_step() -> set[str]:
    text = STEP.read_text(encoding="utf-8")
    return set(re.findall(r"^(?:def|class)\s+([A-Za-z_][A-Za-z_0-9]*)", text, flags=re.M)) | set(
        re.findall(r"^([A-Za-z_][A-Za-z_0-9]*)\s*[:=]", text, flags=re.M))


def _markdown_files() -> list[Path]:
    skip = {".git", ".venv", "node_modules"}
    return [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]


def test_markdown_step_references_are_defined_in_step_py() -> None:
    defined = _defined_in_step()
    stale = []
    for path in _markdown_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            names = DOTTED.findall(line)
            for group in CITED.findall(line):
                names += re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", group)
            stale += [f"{path.relative_to(ROOT)}:{n}: {name}" for name in names if name not in defined]
    assert not stale, "references to engine/step.py for code defined elsewhere:\n" + "\n".join(stale)
