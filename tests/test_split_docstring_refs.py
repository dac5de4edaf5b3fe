"""The docstrings of the modules split out of engine/step.py (split19step) and specs/frameworks.py (split19fw) name
code that a reader can find: every Sphinx-style reference (``:func:`name```, ``:data:``, ``:class:``, ``:mod:``,
a dotted ``:attr:`` / ``:meth:``) resolves, either as a name of the module itself (defined or imported there) or
as a full dotted path. The code moved verbatim, so an unqualified ``:func:`evaluate``` written in step.py pointed,
in pipeline_ranks.py, at nothing (review20a found 43 such references across eight of the modules)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

MODULES = ("scalemodel.engine.step", "scalemodel.engine.pipeline_ranks", "scalemodel.engine.layer_compute",
           "scalemodel.engine.model_parallel_comm", "scalemodel.engine.dp_comm", "scalemodel.engine.stage_memory",
           "scalemodel.specs.frameworks", "scalemodel.specs.strategy_file", "scalemodel.specs.deepspeed_config",
           "scalemodel.specs.torchtitan_config", "scalemodel.specs.shell_words", "scalemodel.specs.megatron_args",
           "scalemodel.specs.stage_layers")
REF = re.compile(r":(func|data|class|mod|attr|meth):`~?([A-Za-z_][A-Za-z_0-9.]*)`")


def _member(obj: Any, name: str) -> Any:
    """obj.name, or a dataclass / msgspec field of that name (a field with a factory is no class attribute)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
    if name in fields or name in getattr(obj, "__struct_fields__", ()):
        return name
    raise AttributeError(name)


def _resolves(module: ModuleType, ref: str) -> bool:
    parts = ref.split(".")
    try:  # a name of the module, then its attributes
        obj: Any = module
        for p in parts:
            obj = _member(obj, p)
        return True
    except AttributeError:
        pass
    for k in range(len(parts), 0, -1):  # a full dotted path: the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for p in parts[k:]:
                obj = _member(obj, p)
            return True
        except AttributeError:
            return False
    return False


@pytest.mark.parametrize("name", MODULES)
def test_docstring_references_resolve(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    broken = []
    for n, line in enumerate(Path(module.__file__).read_text(encoding="utf-8").splitlines(), 1):
        for role, ref in REF.findall(line):
            if role in ("attr", "meth") and "." not in ref:
                continue  # relative to the enclosing class
            if not _resolves(module, ref):
                broken.append(f"{name}:{n}: :{role}:`{ref}`")
    assert not broken, "references to nothing (qualify them with the module the code now lives in):\n" + "\n".join(
        broken)
