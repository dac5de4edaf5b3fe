"""plan's micro-batch axis (planmb39): the powers of two dividing B / dp by default, every divisor with --allow
micro-batches (Megatron-LM runs any micro-batch dividing B / dp: megatron/core/num_microbatches_calculator.py,
ConstantNumMicroBatchesCalculator asserts only global_batch_size % (micro_batch_size x dp) == 0).

The brute force enumerates the space with plain loops (every divisor found by trial, not by the planner's
``divisors``) and prices each candidate on its own through ``grid_from_strategy`` and ``evaluate``, predict's path,
not the planner's broadcast grid.
"""

from __future__ import annotations

import json

import pytest
from conftest import assert_plan_is_brute_force_best

from scalemodel.engine import planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from scalemodel.specs.constraints import normalize_constraints

GPUS = 8
# B 12 on 8 GPUs: B / dp is 12, 6, 3 (dp 1, 2, 4) or not divisible (dp 8), so 3, 6 and 12 are micro-batches the
# powers of two leave out. Llama-2-13B cut to 8 layers on 40 GB A100s, the other axes pinned as tests/test_planner.py's
# SMALL space (ZeRO <= 1, recompute none or full, no CP or SP, the framework's DP communication).
BATCH = 12
SMALL = {"cp": [("=", 1)], "algorithm": [("=", "auto")], "sequence_parallel": [("=", "false")],
         "zero": [("<=", 1)], "recompute": [("!=", "selective")], "compression": [("=", "none")],
         "overlap": [("=", "true")], "bucket": [("=", "default")], "layout": [("=", "tp-cp-dp-pp")]}


@pytest.fixture(scope="module")
def job():
    wl = load_workload("llama2-13b", ["layers=8"])
    return build_job(load_cluster("dgx-a100-40g", []), wl, TrainingSpec(global_batch=BATCH)), wl


def _brute_force(job, wl, every_divisor: bool):
    """(step_time, feasible, key) of every candidate of the SMALL space, one predict-path evaluation each."""
    rows = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if GPUS % (tp * pp) or tp > wl.heads or pp > wl.layers:
                continue
            dp = GPUS // (tp * pp)
            per = BATCH // dp if BATCH % dp == 0 else 1  # 1 alone where dp does not divide B (batch_not_divisible)
            micro = [b for b in range(1, per + 1) if per % b == 0
                     and (every_divisor or b & (b - 1) == 0)]
            schedules = ["1f1b"]
            if pp > 1:
                schedules += ["gpipe", "zb"] + [f"interleaved:{v}" for v in range(2, wl.layers + 1)
                                                 if wl.layers % (pp * v) == 0]
            for mb in micro:
                for sched in schedules:
                    for zero in ("0", "1"):
                        for rec in ("none", "full"):
                            g = grid_from_strategy(StrategySpec(tp=tp, pp=pp, schedule=sched, zero=zero, recompute=rec),
                                                   TrainingSpec(global_batch=BATCH, micro_batch=mb), GPUS, job)
                            r = evaluate(job, g)
                            rows.append((float(r.step_time.ravel()[0]), bool(r.feasible.ravel()[0]),
                                         (tp, pp, dp, mb, sched, zero, rec)))
    return rows


def _key(p):
    s = p.strategy
    return (s["tp"], s["pp"], s["dp"], s["micro_batch"], s["schedule"], s["zero"], s["recompute"])


# The default (powers of two) is checked on the axis itself (test_micro_batch_axis_default_and_opened) and plan's
# default route by tests/test_consist38.py; its brute-force case cost 15 s of the CI's CPU.
@pytest.mark.parametrize("every_divisor", [True])
def test_plan_equals_brute_force_over_its_micro_batches(job, every_divisor):
    job_, wl = job
    brute = _brute_force(job_, wl, every_divisor)
    res = planner.search(job_, GPUS, BATCH, top=3, constraints=SMALL,
                         allow=("micro-batches",) if every_divisor else ())
    win, _best = assert_plan_is_brute_force_best(res, brute, _key)
    if every_divisor:
        # the winner's micro-batch is 3 (dp 4 x tp 2, B / dp = 3, one micro-batch a step): no power of two
        assert win.strategy["micro_batch"] == 3
        pow2 = min(r[0] for r in brute if r[1] and r[2][3] & (r[2][3] - 1) == 0)
        assert win.step_time_s < pow2 * (1 - 1e-3)  # and it beats every power-of-two micro-batch by > 0.1 %
    else:
        assert win.strategy["micro_batch"] & (win.strategy["micro_batch"] - 1) == 0


def test_micro_batch_axis_default_and_opened(job):
    job_, _wl = job
    c = normalize_constraints({"tp": 1, "pp": 1, "cp": 1})  # dp 8
    base = planner.configurations(job_, GPUS, 48, c)  # dp 8, B / dp = 6
    opened = planner.configurations(job_, GPUS, 48, c, frozenset(planner.ALLOW["micro-batches"]))
    assert sorted(set(base["micro_batch"].tolist())) == [1, 2]
    assert sorted(set(opened["micro_batch"].tolist())) == [1, 2, 3, 6]
    # all opens it too; with B / dp a power of two (B 64 on 8 GPUs) every divisor is one: the same space
    assert "micro_batch" in planner.ALLOW["all"]
    a = planner.configurations(job_, GPUS, 64, c)
    b = planner.configurations(job_, GPUS, 64, c, frozenset(planner.ALLOW["all"]))
    assert sorted(set(a["micro_batch"].tolist())) == sorted(set(b["micro_batch"].tolist())) == [1, 2, 4, 8]
    # an = pin is a candidate whatever it is, without --allow (consist38)
    pinned = planner.configurations(job_, GPUS, 48, normalize_constraints({"tp": 1, "pp": 1, "cp": 1,
                                                                          "micro_batch": 3}))
    assert set(pinned["micro_batch"].tolist()) == {3}


def test_cli_allow_micro_batches(cli):  # type: ignore[no-untyped-def]
    out = cli("plan", "-c", "dgx-a100-40g", "-m", "llama2-13b", "--set", "model.layers=8", "-n", "8",
              "--global-batch", "12", "--allow", "micro-batches", "--constraint", "tp=2", "--constraint", "pp=1",
              "--constraint", "cp=1", "--json")
    assert out.code == 0, out.err
    assert json.loads(out.out)["ranked"][0]["strategy"]["micro_batch"] == 3
