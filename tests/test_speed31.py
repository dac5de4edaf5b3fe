"""speed31's rewrites give what the code before them gave.

- ``planner.take_one`` seeds the one-candidate grid's ``shape`` (``StrategyGrid.shape`` is a cached property): the
  seed is checked against the broadcast of the new grid's own fields, computed here by numpy, and the candidate
  against the materialising route (``StrategyGrid.take``, every field broadcast to the grid's shape and raveled) at
  random positions of a broadcast grid of several field shapes, field by field and as ``describe`` writes it.
"""

from __future__ import annotations

import random

import msgspec
import numpy as np

from scalemodel.engine.job import _GRID_FIELDS, build_job, grid_from_strategy
from scalemodel.engine.planner import take_one
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def test_take_one_is_the_candidate_with_its_own_shape() -> None:
    job = build_job(load_cluster("dgx-a100", []), load_workload("gpt3-175b", []), TrainingSpec(global_batch=1024))
    g = grid_from_strategy(StrategySpec(tp=8, pp=8), TrainingSpec(global_batch=1024), 1024, job)
    wide = msgspec.structs.replace(
        g, tp=np.array([1, 2, 4, 8]).reshape(4, 1, 1), zero=np.arange(4).reshape(1, 4, 1),
        recompute=np.arange(3).reshape(1, 1, 3), sequence_parallel=np.array([[[False]], [[True]], [[True]], [[False]]]),
        micro_batch=np.array([1, 2, 4]).reshape(1, 1, 3))
    assert wide.shape == (4, 4, 3)
    rnd = random.Random(31)
    for i in [0, wide.size - 1, *rnd.sample(range(wide.size), 12)]:
        one = take_one(wide, i)
        own = np.broadcast_shapes(*(np.shape(getattr(one, f)) for f in _GRID_FIELDS))
        assert one.shape == own == (1,)
        assert one.size == 1
        ref = wide.take(np.asarray([i]))  # every field broadcast to (4, 4, 3), raveled, taken at i
        for f in _GRID_FIELDS:
            assert np.array_equal(getattr(one, f), getattr(ref, f)), f
        assert one.describe(0) == ref.describe(0)
    wider = msgspec.structs.replace(one, zero=np.arange(3))  # a grid made from it does not inherit the seed
    assert wider.shape == (3,)
