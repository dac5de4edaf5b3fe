"""Strict JSON output and shared console helpers for every command."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np

from scalemodel.errors import InputError

SCHEMA_VERSION = "1.0"


def _plain(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and pydantic models to JSON-ready values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
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
    """One strictly valid JSON document with ``schema_version`` and ``command`` first."""
    doc = {"schema_version": SCHEMA_VERSION, "command": command}
    doc.update(payload)
    return json.dumps(_plain(doc), allow_nan=False, indent=2)


def emit_json(payload: dict[str, Any], command: str) -> None:
    sys.stdout.write(to_json(payload, command) + "\n")
