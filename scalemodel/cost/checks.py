"""Input checks shared by the cost models: every array argument is finite and in range, or the
caller gets an InputError naming it (numbers never silently become NaN, infinite or negative)."""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.errors import InputError


def positive(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array, finite and > 0."""
    x = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(x) | (x <= 0)):
        raise InputError(f"{name} must be finite and > 0", where=name)
    return x


def nonnegative(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array, finite and >= 0."""
    x = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(x) | (x < 0)):
        raise InputError(f"{name} must be finite and >= 0", where=name)
    return x


def fraction(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array in (0, 1]."""
    x = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(x) | (x <= 0) | (x > 1)):
        raise InputError(f"{name} must be in (0, 1]", where=name)
    return x
