"""pass2cut39: the planner's pass 2 prices a batch's pipeline stages once for its two blocks of communication choices.

Inside ``step.shared_stages`` an ``evaluate`` call reuses the stage function (compute, model-parallel collectives,
the host's wait) of an earlier call on a grid equal but for ``step.SYNC_FIELDS`` (the communication choices). The
reference here is a fresh ``evaluate`` of each grid outside the block (predict's route: nothing shared), on random
rows of the plan space of ``plan -m mixtral-8x7b -n 64 --allow all`` and of a dense pipeline model; every array of
the result must be bitwise equal. The parameter-server block, now on as many axes as the all-reduce block, is also
checked against the 2-D layout it had before (outer rows x choices).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from scalemodel.engine import planner, step
from scalemodel.engine.job import build_job
from scalemodel.engine.step import evaluate, shared_stages
from scalemodel.specs import TrainingSpec, load_cluster, load_workload


def _arrays(res: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array of a StepArrays (dict fields flattened), by name."""
    out: dict[str, np.ndarray] = {}
    for f in res.__struct_fields__:
        v = getattr(res, f)
        items = v.items() if isinstance(v, dict) else [("", v)]
        for k, a in items:
            out[f"{prefix}{f}.{k}"] = np.ascontiguousarray(np.asarray(a))
    return out


def _bitwise_equal(a: Any, b: Any) -> None:
    xa, xb = _arrays(a), _arrays(b)
    assert xa.keys() == xb.keys()
    for k in xa:
        assert xa[k].shape == xb[k].shape and xa[k].dtype == xb[k].dtype, k
        assert xa[k].tobytes() == xb[k].tobytes(), k


def _space(cluster: str, model: str, gpus: int) -> tuple[Any, ...]:
    """(job, configurations, outer axes, communication blocks, choices) as planner.search builds them under --allow
    all."""
    job = build_job(load_cluster(cluster, []), load_workload(model, []), TrainingSpec(global_batch=gpus))
    allow = frozenset(planner.ALLOW["all"])
    cfg = planner.configurations(job, gpus, gpus, {}, allow, narrow=True)
    choices = planner.comm_choices(job, gpus, {}, allow)
    return job, cfg, planner._axes(job, {}), planner._comm_blocks(choices), choices


def test_sync_fields_are_the_planners_communication_choices() -> None:
    assert step.SYNC_FIELDS == frozenset(planner.COMM_FIELDS)


@pytest.mark.parametrize(("cluster", "model", "gpus", "seed"), [
    ("dgx-h100", "mixtral-8x7b", 64, 0), ("dgx-h100", "mixtral-8x7b", 64, 1), ("dgx-a100", "llama2-13b", 64, 2),
    ("dgx-h100", "examples/workloads/nemotron-3-nano.yaml", 64, 3)])
def test_shared_stages_equal_a_fresh_evaluate(cluster: str, model: str, gpus: int, seed: int) -> None:
    job, cfg, axes, blocks, _choices = _space(cluster, model, gpus)
    assert len(blocks) == 2  # the all-reduce product and the parameter-server block
    rng = np.random.default_rng(seed)
    n_cfg = len(cfg["dp"])
    rows = rng.choice(n_cfg, size=min(6, n_cfg), replace=False)
    draws = [rng.integers(0, len(axes[k]), len(rows)) for k in ("zero", "recompute", "sequence_parallel")]
    first = np.stack([rows, *draws], axis=1).astype(np.int64)
    again = first.copy()  # the same rows but for recompute: a layout field, its stages not the first batch's
    again[:, 2] = (again[:, 2] + 1) % len(axes["recompute"])
    other = np.stack([rng.choice(n_cfg, size=len(rows), replace=False),
                      *[rng.integers(0, len(axes[k]), len(rows)) for k in ("zero", "recompute", "sequence_parallel")]],
                     axis=1).astype(np.int64)
    batches = [[planner._block_grid(gpus, gpus, cfg, at, axes, comm, {}) for _b0, comm in blocks]
               for at in (first, again, other)]
    with shared_stages():
        shared = [[evaluate(job, g) for g in grids] for grids in batches]
    for grids, got in zip(batches, shared, strict=True):
        for g, res in zip(grids, got, strict=True):
            _bitwise_equal(res, evaluate(job, g))


def test_memo_is_used_and_the_flat_block_layout_prices_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    job, cfg, axes, blocks, choices = _space("dgx-h100", "mixtral-8x7b", 64)
    at = np.stack([np.arange(4), np.zeros(4), np.zeros(4), np.zeros(4)], axis=1).astype(np.int64)
    grids = [planner._block_grid(64, 64, cfg, at, axes, comm, {}) for _b0, comm in blocks]
    calls = []
    real = step._mp_collectives
    monkeypatch.setattr(step, "_mp_collectives", lambda *a: calls.append(1) or real(*a))
    with shared_stages():
        evaluate(job, grids[0])
        n_first = len(calls)
        ps = evaluate(job, grids[1])
    assert n_first >= 1 and len(calls) == n_first  # the parameter-server block priced no collective of its own
    # the parameter-server block as it was before (outer rows on axis 0, its choices on axis 1): the same values
    b0 = blocks[1][0]
    flat = planner._block_grid(64, 64, cfg, at, axes, {f: choices[f][b0:].reshape(1, -1)
                                                      for f in planner.COMM_FIELDS}, {})
    old = evaluate(job, flat)
    assert len(flat.shape) == 2 and len(grids[1].shape) == len(grids[0].shape) > 2
    xa, xb = _arrays(ps), _arrays(old)
    for k in xa:
        assert xa[k].reshape(len(at), -1).tobytes() == xb[k].reshape(len(at), -1).tobytes(), k


def test_outside_the_block_nothing_is_kept() -> None:
    job, cfg, axes, blocks, _choices = _space("dgx-h100", "mixtral-8x7b", 64)
    at = np.zeros((1, 4), dtype=np.int64)
    g = planner._block_grid(64, 64, cfg, at, axes, blocks[1][1], {})
    evaluate(job, g)
    assert step._STAGE_MEMO.get("active") is None
    with shared_stages():
        evaluate(job, g)
        assert len(step._STAGE_MEMO["active"]) >= 1
        # a grid with a different layout field (tp) is not the same key
        other = msgspec.structs.replace(g, tp=g.tp * 2)
        assert step._layout_key(job, other) not in step._STAGE_MEMO["active"]
    assert step._STAGE_MEMO.get("active") is None
