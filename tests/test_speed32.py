"""speed32's rewrites give what the code before them gave.

- ``placement.checked_array`` tests the least and greatest element (``checks.span``) instead of an elementwise
  ``isfinite`` and comparison: its refusals (which message, and whether any) are checked against that elementwise
  definition, written out here, on arrays of every shape class (0-d, empty, 1-d, 2-d) drawn from NaN, +-inf, -0.0,
  and finite values on both sides of the minimum.
- ``_model_parallel_comm`` skips its CP terms where no row has cp > 1 and its EP terms where no row gathers: a grid
  mixing rows with and without CP (EP) prices its cp 1 (ep 1) rows on the full route; the same rows alone take the
  skip. Every result of ``step.evaluate`` on those rows is compared bit for bit between the two.
"""

from __future__ import annotations

import math
import random

import msgspec
import numpy as np
import pytest
from grid_helpers import TINY_MOE

from scalemodel.cost.checks import span
from scalemodel.cost.placement import checked_array
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import StepArrays, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

POOL = [math.nan, math.inf, -math.inf, -1.0, -0.0, 0.0, 1e-300, 0.5, 1.0, 2.0, 1e308]


def random_arrays(seed: int, n: int = 3000):  # type: ignore[no-untyped-def]
    """n (array, bound) pairs: 0-d, empty, 1-d and 2-d arrays drawn from :data:`POOL` (NaN, +-inf, -0.0 and finite
    values on both sides of each bound) and a bound from 0, 1, -1, 0.5; the range checks' tests compare against them."""
    rnd = random.Random(seed)
    shapes = [(), (0,), (1,), (5,), (2, 3), (0, 4)]
    for _ in range(n):
        shape = rnd.choice(shapes)
        a = np.array([rnd.choice(POOL) for _ in range(int(np.prod(shape)))], dtype=float).reshape(shape)
        yield a, rnd.choice([0.0, 1.0, -1.0, 0.5])


def _definition(a: np.ndarray, minimum: float) -> str | None:
    """checked_array's refusal as it was written before speed32: elementwise, finiteness first."""
    if not np.all(np.isfinite(a)):
        return "finite"
    if np.any(a < minimum):
        return "minimum"
    return None


def test_checked_array_refuses_as_the_elementwise_definition() -> None:
    for a, minimum in random_arrays(32):
        want = _definition(a, minimum)
        try:
            got = checked_array(a, "x", minimum=minimum)
        except InputError as e:
            assert want == ("finite" if "must be finite" in str(e) else "minimum"), (a, minimum, str(e))
            assert want != "minimum" or f">= {minimum:g}" in str(e)
        else:
            assert want is None, (a, minimum)
            assert np.array_equal(got, a)


def test_span_is_least_and_greatest() -> None:
    rnd = random.Random(320)
    assert span(np.zeros(0)) is None
    for _ in range(500):
        n = rnd.randint(1, 6)
        a = np.array([rnd.choice(POOL) for _ in range(n)], dtype=float)
        lo, hi = span(a) or (0.0, 0.0)
        if np.isnan(a).any():
            assert math.isnan(lo) and math.isnan(hi)
        else:
            assert (lo, hi) == (float(a.min()), float(a.max()))
        assert span(np.asarray(a[0])) == (float(a[0]), float(a[0])) or math.isnan(a[0])


def _rows(res: StepArrays, keep: np.ndarray) -> dict[str, bytes]:
    """Every result of ``res`` at the rows ``keep`` of axis 0, as bytes (so -0.0 and NaN compare exactly)."""
    out = {}
    for f in res.__struct_fields__:
        v = getattr(res, f)
        for k, a in (v.items() if isinstance(v, dict) else [("", v)]):
            out[f"{f}.{k}"] = np.ascontiguousarray(np.asarray(a)[keep]).tobytes()
    return out


def _mixed_and_alone(job: object, g: object, axis_values: dict[str, list[int]], keep_first: int) -> None:
    """``g`` with the fields of ``axis_values`` along axis 0: its first ``keep_first`` rows priced in the mixed grid
    and in a grid of those rows alone, compared bit for bit."""
    fields = {f: np.array(v).reshape(-1, 1) for f, v in axis_values.items()}
    mixed = msgspec.structs.replace(g, **fields)
    alone = msgspec.structs.replace(g, **{f: a[:keep_first] for f, a in fields.items()})
    keep = np.arange(keep_first)
    assert _rows(evaluate(job, mixed), keep) == _rows(evaluate(job, alone), keep)  # type: ignore[arg-type]


@pytest.mark.parametrize("cp_comm_type", ["p2p", "all_gather", "a2a"])
def test_cp_terms_skipped_without_cp_change_nothing(cp_comm_type: str) -> None:
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job = build_job(load_cluster("dgx-h100", []), load_workload("llama3-8b", []), tr)
    g = grid_from_strategy(StrategySpec(tp=2, pp=2, cp_comm_type=cp_comm_type), tr, 16, job)
    g = msgspec.structs.replace(g, recompute=np.arange(3).reshape(1, 3))
    # rows 0-1 without CP (dp 4, tp 2 and dp 2, tp 4), the last two with cp 2
    _mixed_and_alone(job, g, {"dp": [4, 2, 2, 1], "tp": [2, 4, 2, 4], "cp": [1, 1, 2, 2]}, 2)


def test_ep_terms_skipped_without_ep_change_nothing() -> None:
    tr = TrainingSpec(global_batch=16, micro_batch=2)
    job = build_job(load_cluster("dgx-h100", []), TINY_MOE, tr)
    g = grid_from_strategy(StrategySpec(dp=8), tr, 8, job)
    g = msgspec.structs.replace(g, recompute=np.arange(3).reshape(1, 3))
    # rows 0-1 without EP (tp 1 and tp 2, etp = tp: no expert-TP gather), the last two with ep 2 and ep 4
    _mixed_and_alone(job, g, {"dp": [8, 4, 8, 8], "tp": [1, 2, 1, 1], "ep": [1, 1, 2, 4]}, 2)
