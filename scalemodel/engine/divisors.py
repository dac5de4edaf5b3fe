"""The divisors of a whole number: the planner's degrees and interleaving axis, the largest micro-batch that fits
(engine.memory), a pipeline split's chunk counts (engine.check), and the "what would divide" details of refusals
(engine.predict, engine.job). One routine, so no caller scans 1..n (fuzz35: a global batch near the 1e9 a spec
allows held ``predict`` for a minute when its detail did)."""

from __future__ import annotations

import math

import numpy as np


def divisors(n: int) -> np.ndarray:
    """The divisors of ``n`` >= 1, ascending (int64), by trial division up to sqrt(n) (each divisor d <= sqrt(n)
    pairs with n / d >= sqrt(n)). Sorted without np.unique, which imports numpy.ma (model_parallel_comm.py)."""
    small = np.arange(1, math.isqrt(n) + 1, dtype=np.int64)
    small = small[n % small == 0]
    return np.array(sorted({*small.tolist(), *(n // small).tolist()}), dtype=np.int64)
