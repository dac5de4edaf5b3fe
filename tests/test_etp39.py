"""plan's expert tensor parallelism axis (etp39): with --allow expert-tp an MoE model's candidates take etp = tp
(Megatron's default) and every proper divisor of tp, with ep folded over each stage's tp x cp x dp ranks as
Megatron-Core builds its expert grid (megatron/core/parallel_state.py initialize_model_parallel at core_v0.13.1,
lines 778-800: expert_data_parallel_size = world / (etp ep pp), world % (etp ep pp) == 0 or RuntimeError).

The brute force enumerates the space with plain loops (divisors found by trial, Megatron's divisibility rule written
out here, not the planner's) and prices each candidate on its own through ``grid_from_strategy`` and ``evaluate``,
predict's path, not the planner's broadcast grid; infeasible candidates are counted as the planner counts them.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_plan_is_brute_force_best

from scalemodel.engine import planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.report.explain import describe_layout
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from scalemodel.specs.constraints import normalize_constraints

GPUS = 8
BATCH = 16
EXPERTS = 8  # Mixtral 8x7B's
# Mixtral 8x7B cut to 2 layers on one 8-GPU H100 node; pp 1 and cp 1 (one schedule, one rank order), ZeRO <= 1,
# recompute none, the framework's DP communication: tp, ep, etp, micro-batch, ZeRO and SP are searched.
SMALL = {"cp": [("=", 1)], "pp": [("=", 1)], "algorithm": [("=", "auto")], "recompute": [("=", "none")],
         "zero": [("<=", 1)], "compression": [("=", "none")], "overlap": [("=", "true")],
         "bucket": [("=", "default")], "layout": [("=", "tp-cp-dp-pp")]}


@pytest.fixture(scope="module")
def job():
    wl = load_workload("mixtral-8x7b", ["layers=2"])
    return build_job(load_cluster("dgx-h100", []), wl, TrainingSpec(global_batch=BATCH)), wl


def _brute_force(job, wl, expert_tp: bool, batch: int, tp_min: int):
    """(step_time, feasible, key) of every candidate of the SMALL space, one predict-path evaluation each."""
    rows = []
    for tp in range(tp_min, GPUS + 1):
        if GPUS % tp or tp > wl.heads:
            continue
        dp = GPUS // tp
        # etp: None (= tp, Megatron's default) and, opened, every proper divisor of tp
        etps = [None] + ([e for e in range(1, tp) if tp % e == 0] if expert_tp else [])
        for ep in range(1, EXPERTS + 1):
            if GPUS % ep or EXPERTS % ep:
                continue
            for etp in etps:
                if expert_tp:
                    if (tp * dp) % ((etp or tp) * ep):  # the expert grid: etp x ep x edp = tp x cp x dp
                        continue
                elif dp % ep:  # not opened: ep carved out of dp
                    continue
                per = batch // dp
                for mb in (b for b in range(1, per + 1) if per % b == 0 and b & (b - 1) == 0):
                    for zero in ("0", "1"):
                        for sp in (False, True) if tp > 1 else (False,):  # SP needs tp > 1 (no candidate)
                            key = (tp, ep, etp, dp, mb, zero, sp)
                            if tp > 1 and not sp:  # Megatron-Core's MoELayer refuses it; predict says so (job.py)
                                rows.append((float("inf"), False, key))
                                continue
                            st = StrategySpec(tp=tp, ep=ep, etp=etp, zero=zero, recompute="none",
                                              sequence_parallel=sp)
                            g = grid_from_strategy(st, TrainingSpec(global_batch=batch, micro_batch=mb), GPUS, job)
                            r = evaluate(job, g)
                            rows.append((float(r.step_time.ravel()[0]), bool(r.feasible.ravel()[0]), key))
    return rows


def _key(p):
    s = p.strategy
    return (s["tp"], s["ep"], s["etp"], s["dp"], s["micro_batch"], s["zero"], s["sequence_parallel"])


# The default search (no --allow expert-tp) is checked on its configuration axis below, not by brute force: its
# brute-force case cost 9 s of the CI's CPU for what test_default_axis_folds_ep_over_dp_only checks directly.
@pytest.mark.parametrize(("expert_tp", "batch", "tp_min"), [(True, 16, 1), (True, 8, 2)])
def test_plan_equals_brute_force_over_expert_tp(job, expert_tp, batch, tp_min):
    job_, wl = job
    brute = _brute_force(job_, wl, expert_tp, batch, tp_min)
    c = {**SMALL, "tp": [(">=", tp_min)]}
    res = planner.search(job_, GPUS, batch, top=3, constraints=c, allow=("expert-tp",) if expert_tp else ())
    win, _best = assert_plan_is_brute_force_best(res, brute, _key)
    if not expert_tp:
        assert win.strategy["etp"] is None
    if tp_min > 1:
        # tensor parallelism asked for: etp 1 wins, with ep 8 beyond dp 4 (folded over tp 2 x dp 4, as Megatron-Core's
        # expert grid takes it and the default search never did), and beats every etp = tp candidate by > 0.1 %
        assert (win.strategy["tp"], win.strategy["etp"], win.strategy["ep"], win.strategy["dp"]) == (2, 1, 8, 4)
        at_tp = min(r[0] for r in brute if r[1] and r[2][2] is None)
        assert win.step_time_s < at_tp * (1 - 1e-3)


def test_default_axis_folds_ep_over_dp_only(job):
    """Without --allow expert-tp and no etp pinned, the space has no etp column and every ep divides dp (etp = tp,
    ep carved out of dp, as before etp39); opened, an ep beyond dp appears (folded over tp x dp)."""
    job_, _wl = job
    c = normalize_constraints({"cp": 1, "pp": 1})
    base = planner.configurations(job_, GPUS, BATCH, c)
    assert "etp" not in base
    assert np.all(base["dp"] % base["ep"] == 0) and set(base["ep"].tolist()) >= {1, 2, 4, 8}
    opened = planner.configurations(job_, GPUS, BATCH, c, frozenset(planner.ALLOW["expert-tp"]))
    assert np.any(opened["ep"] > opened["dp"])


def test_pinned_etp_folds_and_predict_refusals_are_not_ranked(job):
    """A pinned etp is every candidate's, and ep folds over tp x dp at it; a layout predict refuses
    (expert_parallel_invalid) is counted infeasible, never ranked."""
    job_, wl = job
    res = planner.search(job_, GPUS, BATCH, top=50, constraints={**SMALL, "tp": [("=", 4)]}, fixed={"etp": 1})
    eps = {p.strategy["ep"] for p in res.ranked}
    assert all(p.strategy["etp"] == 1 for p in res.ranked)
    assert 8 in eps  # ep 8 > dp 2: folded over tp 4 x dp 2 at etp 1
    for p in res.ranked:
        s = p.strategy
        assert (s["tp"] * s["dp"]) % (s["etp"] * s["ep"]) == 0 and EXPERTS % s["ep"] == 0
        g = grid_from_strategy(StrategySpec(tp=s["tp"], ep=s["ep"], etp=s["etp"], zero=s["zero"], recompute="none",
                                            sequence_parallel=s["sequence_parallel"]),
                               TrainingSpec(global_batch=BATCH, micro_batch=s["micro_batch"]), GPUS, job_)
        assert bool(evaluate(job_, g).feasible.ravel()[0])


def test_dense_model_has_no_etp_axis():
    wl = load_workload("llama2-13b", ["layers=2"])
    j = build_job(load_cluster("dgx-h100", []), wl, TrainingSpec(global_batch=BATCH))
    cfg = planner.configurations(j, GPUS, BATCH, {}, frozenset(planner.ALLOW["expert-tp"]))
    assert "etp" not in cfg and set(cfg["ep"].tolist()) == {1}


def test_plan_table_names_the_experts_tensor_parallelism():
    """The layout column says ETP where it is not TP's (etp39 left the table at '(EP 8)'), and nothing more where
    etp is Megatron's default (None: = tp)."""
    s = {"dp": 4, "tp": 2, "pp": 1, "cp": 1, "ep": 8}
    assert describe_layout({**s, "etp": None}) == "DP 4 x TP 2 x PP 1 (EP 8)"
    assert describe_layout({**s, "etp": 2}) == "DP 4 x TP 2 x PP 1 (EP 8)"
    assert describe_layout({**s, "etp": 1}) == "DP 4 x TP 2 x PP 1 (EP 8, ETP 1)"
    assert describe_layout({**s, "ep": 1, "etp": 1}) == "DP 4 x TP 2 x PP 1 (ETP 1)"
    assert describe_layout(s) == "DP 4 x TP 2 x PP 1 (EP 8)"  # a sweep row: no etp key
