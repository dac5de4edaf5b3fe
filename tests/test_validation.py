"""The step model against published runs (Narayanan 2021 Table 1, Korthikanti 2022, Goyal 2017).

Issue 5's bar: median absolute error <= 10 %, no case worse than 20 %, with built-in clusters and
no per-case constants (the rules are in scripts/validate_training.py).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "validate_training.py"


@functools.cache
def load_script():  # type: ignore[no-untyped-def]
    """The script as a module, loaded once (its specs and predictions are cached inside it)."""
    spec = importlib.util.spec_from_file_location("validate_training", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_published_runs_within_bounds() -> None:
    mod = load_script()
    assert mod.CASES is not None
    rows, skipped = mod.collect_rows(yaml.safe_load(Path(mod.CASES).read_text()))
    assert len(rows) >= 15 and skipped == ["horovod_128gpu"]
    errors = [abs(pred - meas) / meas for _, _, meas, pred, _ in rows]
    assert statistics.median(errors) <= 0.10
    assert max(errors) <= 0.20
