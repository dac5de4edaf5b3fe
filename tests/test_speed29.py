"""speed29's rewrites give what the code before them gave.

- ``intervals._most_similar`` measures each row's matching prefix once: its picks are checked against the
  definition written out (for each prefix length from the longest, the rows equal to ``want`` on every key of the
  prefix; the first with at least MIN_CASES rows), on random rows;
- ``StrategyGrid.shape`` is cached per grid: a grid built from another by ``msgspec.structs.replace`` with a
  field of another shape has its own shape (the broadcast of its fields, computed here by numpy), not the cache of
  the grid it came from.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np

from scalemodel.engine.intervals import MIN_CASES, _most_similar
from scalemodel.engine.job import _GRID_FIELDS, StrategyGrid, build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

KEYS = ("a", "b", "c", "d")


def _by_definition(rows: list[dict[str, str]], want: dict[str, str], fewest: int) -> tuple[Any, list[Any]]:
    for n_keys in range(len(KEYS), fewest - 1, -1):
        match = [r for r in rows if all(r[k] == want[k] for k in KEYS[:n_keys])]
        if len(match) >= MIN_CASES:
            return KEYS[:n_keys], match
    return KEYS[:fewest], []


def test_most_similar_is_the_longest_prefix_with_enough_rows() -> None:
    rnd = random.Random(29)
    seen_lengths = set()
    for _ in range(400):
        rows = [{k: rnd.choice("xxxy") for k in KEYS} for _ in range(rnd.randrange(0, 14))]
        want = {k: rnd.choice("xxxyz") for k in KEYS}  # "z" matches no row
        for fewest in (0, 1):
            expected = _by_definition(rows, want, fewest)
            got = _most_similar(rows, want, KEYS, fewest=fewest, value=lambda r, k: r[k])
            assert (tuple(got[0]), got[1]) == (tuple(expected[0]), expected[1])
            assert all(a is b for a, b in zip(got[1], expected[1], strict=True))  # the same rows, in order
            seen_lengths.add(len(got[0]))
    assert seen_lengths == {0, 1, 2, 3, 4}  # every prefix length was the answer somewhere


def test_grid_shape_is_its_own_after_replace() -> None:
    job = build_job(load_cluster("dgx-a100", []), load_workload("gpt3-175b", []), TrainingSpec(global_batch=1024))
    g = grid_from_strategy(StrategySpec(tp=8, pp=8), TrainingSpec(global_batch=1024), 1024, job)
    assert isinstance(g, StrategyGrid)
    before = g.shape
    wide = msgspec.structs.replace(g, zero=np.arange(4).reshape(1, 4), tp=np.array([[1], [2], [4]]))
    shapes = [getattr(wide, f).shape for f in _GRID_FIELDS]
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + s for s in shapes]
    expected = tuple(max(s[i] for s in padded) for i in range(ndim))  # every dim is 1 or this
    assert wide.shape == expected == (3, 4)
    assert g.shape == before  # the first grid keeps its own
    assert wide.size == 12
