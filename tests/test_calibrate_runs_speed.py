"""`calibrate runs`: a configuration repeated across runs is priced once, runs sharing a job are priced in one
vectorised call per factor trial, and neither changes the fit (docs/model.md#calibrate-runs).

The reference is the fit with every run priced on its own (one single-candidate evaluate per run per trial, as
the command did before the runs were pooled): the two must agree exactly, float for float.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import scalemodel.engine.calibrate_runs as cr
from scalemodel.engine.calibrate_runs import fit_runs, scaled_job
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs.runs import read_runs
from tests.test_calibrate_runs import RUNS, synthetic

#: two gpt-1.7b layouts (one job), one gpt-3.6b layout (another job); the first and last repeated, the
#: repeats measured apart (noise is drawn per row), so their residuals differ
ROWS = [RUNS[0], RUNS[1], RUNS[3], {**RUNS[0], "name": "1.7b-8 again"}, {**RUNS[3], "name": "3.6b-16 again"},
        {**RUNS[0], "name": "1.7b-8 third"}]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the number of candidates of every evaluate call fit_runs makes."""
    sizes: list[int] = []
    real = cr.evaluate

    def counted(job: Any, grid: Any, **kw: Any) -> Any:
        sizes.append(grid.size)
        return real(job, grid, **kw)

    monkeypatch.setattr(cr, "evaluate", counted)
    return sizes


def test_repeated_runs_priced_once_and_the_fit_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = synthetic(tmp_path, ROWS)
    with monkeypatch.context() as m:
        sizes = _counting(m)
        fit = fit_runs(read_runs(path), source=str(path), only=["compute", "overhead_s"])
    # preparation: the 3 distinct configurations, one candidate each; then per trial the two gpt-1.7b layouts
    # in one call and the gpt-3.6b one in another: 3 candidates priced per trial for 6 runs
    assert sizes[:3] == [1, 1, 1]
    trials = sizes[3:]
    assert trials and trials == [2, 1] * (len(trials) // 2), trials[:6]

    with monkeypatch.context() as m:  # the reference: every run priced on its own, as before
        m.setattr(cr, "_same_run", lambda *a: None)
        m.setattr(cr, "_same_job", lambda a, b: False)
        sizes = _counting(m)
        alone = fit_runs(read_runs(path), source=str(path), only=["compute", "overhead_s"])
    assert set(sizes) == {1} and len(sizes) > 6 * len(trials) // 2
    assert fit.factors == alone.factors  # values, intervals, bounds: float for float
    assert fit.runs == alone.runs and fit.warnings == alone.warnings
    assert (fit.rms_log_error_before, fit.rms_log_error_after) == (alone.rms_log_error_before,
                                                                    alone.rms_log_error_after)
    rows = {r["name"]: r for r in fit.runs}
    for a, b in (("1.7b-8", "1.7b-8 again"), ("1.7b-8", "1.7b-8 third"), ("3.6b-16", "3.6b-16 again")):
        assert rows[a]["before_s"] == rows[b]["before_s"] and rows[a]["after_s"] == rows[b]["after_s"]
        assert rows[a]["measured_s"] != rows[b]["measured_s"]  # each repeat keeps its own residual
        assert rows[a]["error_after"] != rows[b]["error_after"]


#: layouts that take different branches of the step model (pipeline stages with and without the logits,
#: interleaving, ZeRO, recompute, sequence parallelism, fp8, local SGD) on one cluster
MIXED = [
    {"model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4},
    {"model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 2, "pp": 2},
    {"model": "gpt-1.7b", "gpus": 32, "global_batch": 128, "micro_batch": 1, "pp": 4, "overlap": False},
    {"model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 2, "zero": "1"},
    {"model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 1, "zero": "3", "overlap": False},
    {"model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 4, "recompute": "full"},
    {"model": "gpt-1.7b", "gpus": 16, "global_batch": 32, "micro_batch": 1, "tp": 2, "sequence_parallel": True},
    {"model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4, "precision": "fp8"},
    {"model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 2, "pp": 2, "precision": "fp8"},
    {"model": "gpt-3.6b", "gpus": 16, "global_batch": 64, "micro_batch": 2, "tp": 2},
    {"model": "gpt-3.6b", "gpus": 32, "global_batch": 64, "micro_batch": 1, "tp": 2, "pp": 2,
     "schedule": "interleaved:2"},
    {"model": "gpt-3.6b", "gpus": 64, "global_batch": 256, "micro_batch": 2, "tp": 2, "zero": "1", "overlap": False},
    {"model": "gpt-1.7b", "gpus": 64, "global_batch": 512, "micro_batch": 8, "sync": "local:4"},
    {"model": "gpt-1.7b", "gpus": 64, "global_batch": 512, "micro_batch": 8, "sync": "local:4", "overlap": False},
]


def test_a_stacked_grid_prices_each_run_as_alone(tmp_path: Path) -> None:
    """Every run's step from the pooled (stacked) evaluate equals its own single-candidate evaluate exactly,
    at spec factors and at scaled ones."""
    path = synthetic(tmp_path, MIXED, cluster="dgx-h100", noise=0.0, scale=lambda job: job, overhead_s=0.0)
    runs = read_runs(path)
    items = []
    for r in runs:
        job = build_job(r.cluster, r.workload, r.training)
        items.append((job, grid_from_strategy(r.strategy, r.training, r.gpus, job), r.strategy.sync))
    batches = cr._batched(items)
    assert len(batches) < len(items) and max(len(b[3]) for b in batches) >= 4  # runs really pooled
    for factors in ((1.0, {}, None, 1.0), (0.83, {"nvlink": 0.9, "ib-leaf": 0.6}, 0.71, 0.5)):
        c, bw, f8, ov = factors
        for job, grid, sync, members in batches:
            pooled = cr._steps_of(cr.evaluate(scaled_job(job, c, bw, f8, overlap=ov), grid, sync=sync))
            for k, i in enumerate(members):
                job_i, grid_i, sync_i = items[i]
                alone = cr._step(scaled_job(job_i, c, bw, f8, overlap=ov), grid_i, sync_i)[0]
                assert float(pooled[k]) == alone, (runs[i].label, factors)
