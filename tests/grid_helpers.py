"""Helpers shared by the tests that price one strategy on an 8-GPU grid and read back a broadcast result."""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.engine.job import grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec


def one(x: Any) -> float:
    """The one value of a broadcast grid result (every element equal)."""
    a = np.asarray(x, dtype=float).ravel()
    assert np.allclose(a, a[0])
    return float(a[0])


def grid8(job: Any, **strategy: Any) -> Any:
    """The grid of one strategy at dp 8 on 8 GPUs, global batch 16 in micro-batches of 2."""
    st = StrategySpec(dp=8, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=16, micro_batch=2, precision=job.precision), 8, job)
