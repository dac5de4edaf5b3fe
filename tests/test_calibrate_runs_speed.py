"""`calibrate runs`: a configuration repeated across runs is priced once, runs sharing a job are priced in one
vectorised call per factor trial, and neither changes the fit (docs/model.md#calibrate-runs).

The reference is the fit with every run priced on its own (one single-candidate evaluate per run per trial, as
the command did before the runs were pooled): the two must agree exactly, float for float.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import scalemodel.engine.calibrate_runs as cr
from scalemodel.engine.calibrate_runs import fit_runs, scaled_job
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.specs.runs import read_runs
from tests.test_calibrate_runs import RUNS, synthetic

#: two gpt-1.7b layouts (one job), one gpt-3.6b layout (another job)
ROWS = [RUNS[0], RUNS[1], RUNS[3]]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the number of candidates of every evaluate call fit_runs makes."""
    sizes: list[int] = []
    real = cr.evaluate

    def counted(job: Any, grid: Any, **kw: Any) -> Any:
        sizes.append(grid.size)
        return real(job, grid, **kw)

    monkeypatch.setattr(cr, "evaluate", counted)
    return sizes


def test_runs_sharing_a_job_priced_in_one_call_and_the_fit_unchanged(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    runs = read_runs(synthetic(tmp_path, ROWS))
    with monkeypatch.context() as m:
        sizes = _counting(m)
        fit = fit_runs(runs, source="runs", only=["compute", "overhead_s"])
    # preparation: each run, one candidate each; then per trial the two gpt-1.7b layouts in one call and the
    # gpt-3.6b one in another
    assert sizes[:3] == [1, 1, 1]
    trials = sizes[3:]
    assert trials and trials == [2, 1] * (len(trials) // 2), trials[:6]

    with monkeypatch.context() as m:  # the reference: every run priced on its own, as before
        m.setattr(cr, "_same_job", lambda a, b: False)
        sizes = _counting(m)
        alone = fit_runs(runs, source="runs", only=["compute", "overhead_s"])
    assert set(sizes) == {1} and len(sizes) > 3 * len(trials) // 2
    assert fit.factors == alone.factors  # values, intervals, bounds: float for float
    assert fit.runs == alone.runs and fit.warnings == alone.warnings
    assert (fit.rms_log_error_before, fit.rms_log_error_after) == (alone.rms_log_error_before,
                                                                    alone.rms_log_error_after)


def test_repeats_are_no_special_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runs file refuses a repeated configuration (specs.runs) and the public API reads only runs files, so
    fit_runs keeps no repeat cache (it priced a repeat once and copied the step): runs given twice straight to the
    engine are each priced like any other run, in the same stacked call per trial (one candidate each)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    runs = (read_runs(synthetic(tmp_path / "a", ROWS, seed=1))
            + read_runs(synthetic(tmp_path / "b", [{**r, "name": r["name"] + " again"} for r in ROWS], seed=2)))
    assert not hasattr(cr, "_same_run")
    with monkeypatch.context() as m:
        sizes = _counting(m)
        fit = fit_runs(runs, source="runs", only=["compute", "overhead_s"])
    assert sizes[:6] == [1] * 6 and sizes[6:8] == [4, 2]  # each run prepared; per trial 4 + 2 candidates
    rows = {r["name"]: r for r in fit.runs}
    for r in ROWS:
        a, b = rows[r["name"]], rows[r["name"] + " again"]
        assert a["before_s"] == b["before_s"] and a["measured_s"] != b["measured_s"]


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
    assert BREAKDOWN_KEYS[-1] == cr.OVERHEAD  # the parts the pooled sum adds before it, the overhead last
    for factors in ((1.0, {}, None, 1.0, 0.0), (0.83, {"nvlink": 0.9, "ib-leaf": 0.6}, 0.71, 0.5, 0.0371)):
        c, bw, f8, ov, o = factors
        for job, grid, sync, members in batches:
            # the pooled job keeps the cluster's overhead (0 s): the overhead o is added to the other parts' sum
            pooled = cr._modelled_of(cr.evaluate(scaled_job(job, c, bw, f8, overlap=ov), grid, sync=sync)) + o
            for k, i in enumerate(members):
                job_i, grid_i, sync_i = items[i]
                alone = cr._step(scaled_job(job_i, c, bw, f8, overlap=ov, overhead=o), grid_i, sync_i)[0]
                assert float(pooled[k]) == alone, (runs[i].label, factors)


#: five runs (test_calibrate_band's), three factors: every leave-one-out refit keeps 4 runs for 3 factors
LOO_ROWS = [r for r in RUNS if r["name"] in ("1.7b-8", "1.7b-32", "3.6b-16", "3.6b-64", "7.5b-32")]
LOO_FACTORS = ["compute", "bandwidth:ib-leaf", "overhead_s"]


@pytest.fixture(scope="module")
def loo_fit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fit with its leave-one-out refits, every evaluate call and every solver call it made recorded."""
    import scipy.optimize

    path = synthetic(tmp_path_factory.mktemp("loo"), LOO_ROWS)
    calls: list[tuple[Any, Any]] = []
    solves: list[tuple[dict[str, Any], Any]] = []
    real_eval, real_lsq = cr.evaluate, scipy.optimize.least_squares

    def evaluate(job: Any, grid: Any, **kw: Any) -> Any:
        calls.append((job, grid))
        return real_eval(job, grid, **kw)

    def least_squares(fun: Any, x0: Any, **kw: Any) -> Any:
        sol = real_lsq(fun, x0, **kw)
        solves.append(({"x0": np.array(x0), **kw}, sol))
        return sol

    with pytest.MonkeyPatch.context() as m:
        m.setattr(cr, "LOO_MAX_RUNS", 40)  # conftest turns the refits off outside test_calibrate_band.py
        m.setattr(cr, "evaluate", evaluate)
        m.setattr(scipy.optimize, "least_squares", least_squares)
        fit = fit_runs(read_runs(path), source=str(path), only=LOO_FACTORS)
    return {"fit": fit, "runs": read_runs(path), "calls": calls, "solves": solves}


def test_no_factor_vector_is_priced_twice(loo_fit: dict[str, Any]) -> None:
    """The leave-one-out refits all start at the full fit's solution and take the same finite differences there,
    and the overhead's column moves no other part: each (configuration batch, multipliers) is evaluated once."""
    assert loo_fit["fit"].calibration["method"] == "leave-one-out"
    seen: dict[tuple[Any, ...], int] = {}
    for job, grid in loo_fit["calls"]:
        key = (id(grid), job.gemm_max, job.memory_efficiency, job.overlap_efficiency,
               tuple(t.efficiency for t in job.network.tiers))  # the factors' fields, not the overhead
        seen[key] = seen.get(key, 0) + 1
    assert max(seen.values()) == 1, sum(n > 1 for n in seen.values())


def test_leave_one_out_equals_a_brute_force_refit(loo_fit: dict[str, Any]) -> None:
    """Each run's leave-one-out prediction equals, float for float, a refit done here by brute force: every other
    run priced alone by its own evaluate (no batch, nothing remembered, the overhead in the job), the solver started
    at the full fit's solution with the fit's bounds and scales, the left-out run priced alone at its optimum."""
    from scipy.optimize import least_squares

    fit, runs, solves = loo_fit["fit"], loo_fit["runs"], loo_fit["solves"]
    assert len(solves) == 1 + len(runs)  # the full fit, then one refit per run
    full_kw, full = solves[0]
    lo, hi = full_kw["bounds"]
    t = np.array([r.step_time_s for r in runs])
    prepared = []
    for r in runs:
        job = build_job(r.cluster, r.workload, r.training)
        prepared.append((job, grid_from_strategy(r.strategy, r.training, r.gpus, job), r.strategy.sync))

    def step(i: int, z: np.ndarray) -> float:  # z = (ln compute, ln ib-leaf, overhead), LOO_FACTORS' order
        job, grid, sync = prepared[i]
        return cr._step(scaled_job(job, float(np.exp(z[0])), {"ib-leaf": float(np.exp(z[1]))},
                                   overhead=float(z[2])), grid, sync)[0]

    for i, (kw, sol) in enumerate(solves[1:]):
        keep = [j for j in range(len(runs)) if j != i]
        x0 = np.clip(full.x, lo + 1e-6, hi - 1e-6)  # warm-started at the full fit's solution
        assert np.array_equal(kw["x0"], x0)

        def resid(z: np.ndarray, keep: list[int] = keep) -> np.ndarray:
            return np.log(np.array([step(j, z) for j in keep]) / t[keep])

        brute = least_squares(resid, x0, method="trf", bounds=(lo, hi), x_scale=kw["x_scale"], diff_step=1e-4)
        assert np.array_equal(brute.x, sol.x), runs[i].label
        assert fit.runs[i]["loo_s"] == step(i, brute.x), runs[i].label
        assert fit.calibration["residuals"][i]["leave_one_out"] == t[i] / step(i, brute.x) - 1
