"""plan's predictions (ranked and family_best) are read from the pass-2 evaluation that ranked them
(planner._result_one, speed18), not from a second evaluate() of the picks. Each must equal what an evaluation of that
strategy on its own gives (grid_from_strategy + evaluate + result_at, the route predict takes): every field the old
re-evaluation produced (step time, breakdown, memory, throughput, FLOPs, sync, time to train, interval, notes)."""
from __future__ import annotations

import msgspec
import pytest
from msgspec.structs import replace

from scalemodel.engine import planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import result_at
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

FIELDS = {f.name for f in msgspec.structs.fields(StrategySpec)}
COMPARED = ("feasible", "step_time_s", "breakdown_s", "memory", "throughput", "flops", "sync", "time_to_train_s",
            "interval", "notes", "dominant", "strategy")


def _alone(job, pred, batch):  # type: ignore[no-untyped-def]
    """The prediction's strategy evaluated as a one-candidate grid of its own."""
    st = {k: v for k, v in pred.strategy.items() if k in FIELDS and v is not None and k != "dp"}
    st["dispatch_overhead"] = pred.strategy["dispatch_overhead_s"]
    if pred.strategy["bucket_bytes"] is not None:
        st["bucket_size"] = pred.strategy["bucket_bytes"]
    tr = TrainingSpec(global_batch=batch, micro_batch=pred.strategy["micro_batch"])
    g = grid_from_strategy(StrategySpec(**st), tr, pred.strategy["gpus"], job)
    sync = pred.strategy["sync"]
    return result_at(job, g, evaluate(job, g, sync=sync), 0, sync=sync, inputs=None)


@pytest.mark.parametrize(("cluster", "objective", "modes"), [
    ("dgx-h100", "time-to-train", ("bsp", "asp")), ("dgx-a100", "throughput", ("asp", "ssp:2", "local:4", "backup:1"))])
def test_plan_predictions_equal_the_strategy_evaluated_alone(cluster: str, objective: str, modes: tuple[str, ...]) \
        -> None:
    job = build_job(load_cluster(cluster, []), load_workload("llama2-13b", ["layers=8"]), TrainingSpec(global_batch=64))
    job = replace(job, straggler_cv=0.05)  # the sync modes' straggler terms non-zero
    res = planner.search(job, 16, 64, top=3, constraints={"cp": [("<=", 2)]}, sync_modes=modes, objective=objective)
    preds = [*res.ranked, *res.family_best.values()]
    assert len(res.ranked) == 3 and len(res.family_best) >= 3
    if "bsp" not in modes:  # the picks of modes re-priced from another's evaluation (step.with_sync) are covered
        assert {p.strategy["sync"] for p in preds} - {"bsp"}
    for pred in preds:
        alone = _alone(job, pred, 64)
        for k in COMPARED:
            assert getattr(pred, k) == getattr(alone, k), (k, pred.strategy["sync"])
