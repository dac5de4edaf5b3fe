"""Input checks shared by the cost models: every array argument is finite and in range, or the
caller gets an InputError naming it (numbers never silently become NaN, infinite or negative)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scalemodel.errors import InputError

#: The reductions behind ``ndarray.min`` / ``ndarray.max``, called without their Python wrappers
#: (numpy/_core/_methods.py ``_amin`` / ``_amax`` call these with the same arguments): the same values, one frame less
#: in checks the cost models make hundreds of times per evaluation.
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def span(x: np.ndarray) -> tuple[float, float] | None:
    """(least, greatest) element of ``x`` as floats, None where ``x`` is empty. NaN propagates into both (numpy's
    minimum and maximum), so a NaN anywhere fails every comparison made on them."""
    if x.ndim == 0:
        v = float(x)
        return v, v
    if not x.size:
        return None
    return float(_MIN(x, None)), float(_MAX(x, None))


def _within(x: np.ndarray, low: float, closed: bool, high: float = math.nan) -> bool:
    """Whether every element of ``x`` is finite, > ``low`` (>= where ``closed``) and, where ``high`` is given,
    <= ``high``. Two reductions (min, max) instead of elementwise masks: NaN propagates through min and max (and
    fails every comparison), -inf fails the lower test, +inf the upper one; the cost models call these checks
    thousands of times per plan."""
    s = span(x)
    if s is None:
        return True
    lo, hi = s
    return (low <= lo if closed else low < lo) and (hi <= high if high == high else hi < math.inf)


def positive(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array, finite and > 0."""
    x = np.asarray(value, dtype=float)
    if not _within(x, 0.0, False):
        raise InputError(f"{name} has a value <= 0 or not finite", where=name, allowed="finite values > 0")
    return x


def all_finite_nonnegative(x: np.ndarray) -> bool:
    """Whether every element of the float array ``x`` is finite and >= 0 (True when empty): two reductions."""
    return _within(x, 0.0, True)


def all_finite_above(x: np.ndarray, minimum: float, strict: bool = True) -> bool:
    """Whether every element of the float array ``x`` is finite and > ``minimum`` (>= where not ``strict``; True when
    empty): two reductions, as the elementwise ``~isfinite(x) | (x <= minimum)`` test decides it."""
    return _within(x, minimum, not strict)


def nonnegative(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array, finite and >= 0."""
    x = np.asarray(value, dtype=float)
    if not all_finite_nonnegative(x):
        raise InputError(f"{name} has a negative or non-finite value", where=name, allowed="finite values >= 0")
    return x


def fraction(name: str, value: Any) -> np.ndarray:
    """``value`` as a float array in (0, 1]."""
    x = np.asarray(value, dtype=float)
    if not _within(x, 0.0, False, high=1.0):
        raise InputError(f"{name} has a value outside (0, 1]", where=name, allowed="values in (0, 1]")
    return x
