"""NeMo's per-micro-batch loss all-reduce over the data-parallel group (strategy loss_dp_allreduce,
docs/model.md#loss-dp-allreduce).

NeMo 1's loss_func (and NeMo 2's MaskedTokenLossReduction before 58f6689700) all-reduces each training micro-batch's
loss over the data-parallel group, blocking, on the last pipeline stage. Two terms follow, each checked here by hand:

* its latency: m all-reduces of one fp32 value over the dp replicas a step, in the dp_comm part; checked against the
  collective model's own zero-byte floor and 4-byte time through its rank-count API (not the placed group the engine
  uses), and the step's parts moving by exactly that;
* the replicas locked together every micro-batch: the jitter group gains dp, so with tp = pp = 1 the lock-stepped
  compute stretches by c x E[max of dp normals], whose closed forms for dp = 2 and 4 are 1/sqrt(pi) and
  (6/pi^(3/2)) arctan(sqrt(2)) (David & Nagaraja, Order Statistics, 3rd ed., §4.2).
"""

from __future__ import annotations

from math import atan, pi, sqrt
from typing import Any

import numpy as np
import pytest
from conftest import script_module, training_cases

from scalemodel.cost.collectives import collective_time, latency_floor
from scalemodel.cost.stragglers import normal_expected_max
from scalemodel.engine import step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.lockstep import lockstep_group
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

E2, E4 = 1 / sqrt(pi), 6 / pi ** 1.5 * atan(sqrt(2))
DENSE: dict[str, Any] = dict(name="d", layers=4, hidden=256, heads=4, ffn_hidden=1024, gated_mlp=True, vocab=512,
                             seq_len=512, tied_embeddings=False, biases=False)
GLOBAL_BATCH, MICRO_BATCH = 64, 1


def _eval(gpus: int, cluster: str = "dgx-h100", precision: str = "bf16", recipe: str | None = None,
          **strategy: Any) -> tuple[Any, Any, dict[str, float], float]:
    tr = TrainingSpec(global_batch=GLOBAL_BATCH, micro_batch=MICRO_BATCH, precision=precision, seq_len=512,
                      fp8_recipe=recipe)
    job = build_job(load_cluster(cluster), TransformerWorkload(**DENSE), tr, straggler_cv=0.0)
    g = grid_from_strategy(StrategySpec(**strategy), tr, gpus, job)
    res = step.evaluate(job, g)
    parts = {k: float(np.ravel(v)[0]) for k, v in res.breakdown.items()}
    return job, g, parts, float(np.ravel(res.step_time)[0])


@pytest.mark.parametrize(("dp", "e"), [(2, E2), (4, E4)])
def test_replicas_lock_step_by_hand(dp: int, e: float) -> None:
    """tp = pp = 1, dp replicas: without the all-reduce no GPU waits for another within the step (jitter 0); with it
    the dp replicas meet every micro-batch, jitter = compute x c x E[max of dp] (closed form)."""
    job, _, off, _ = _eval(dp, dp=dp)
    _, _, on, _ = _eval(dp, dp=dp, loss_dp_allreduce=True)
    assert off["jitter"] == 0.0
    assert job.clock_jitter_cv > 0.0
    assert on["jitter"] == pytest.approx(on["compute"] * job.clock_jitter_cv * e, rel=1e-6)


@pytest.mark.parametrize("dp", [2, 8])
def test_latency_by_hand(dp: int) -> None:
    """m = B / (dp b) all-reduces of 4 bytes over the dp replicas (one node here, stride tp = 1): the dp_comm part grows
    by m x that time and the step by it plus the jitter; the time lies on the collective's zero-byte floor to within
    what 4 bytes can add (under 1 us on NVLink)."""
    _, _, off, t_off = _eval(dp, dp=dp)
    job, _, on, t_on = _eval(dp, dp=dp, loss_dp_allreduce=True)
    m = GLOBAL_BATCH / (dp * MICRO_BATCH)
    one = float(np.ravel(collective_time("allreduce", 4.0, dp, job.network, dtype_bytes=4))[0])
    floor = float(np.ravel(latency_floor("allreduce", dp, job.network))[0])
    assert floor <= one <= floor + 1e-6
    assert on["dp_comm"] - off["dp_comm"] == pytest.approx(m * one, rel=1e-6)
    assert t_on - t_off == pytest.approx(m * one + on["jitter"] - off["jitter"], rel=1e-6)
    for k in set(on) - {"dp_comm", "jitter"}:
        assert on[k] == pytest.approx(off[k], rel=1e-9, abs=1e-15), k


def test_pipeline_group_gains_dp() -> None:
    """tp 2, pp 2, dp 2: the group is tp pp = 4 GPUs without it, tp pp dp = 8 with it; jitter = (m + bubble) x the
    busiest stage's micro-batch compute x c x E[max of G]."""
    job, g, off, _ = _eval(8, tp=2, pp=2, dp=2)
    _, g_on, on, _ = _eval(8, tp=2, pp=2, dp=2, loss_dp_allreduce=True)
    assert float(np.ravel(lockstep_group(job, g))[0]) == 4.0
    assert float(np.ravel(lockstep_group(job, g_on))[0]) == 8.0
    busy = off["jitter"] / (job.clock_jitter_cv * E4)  # (m + bubble) x the micro-batch compute, the same with it
    assert on["jitter"] == pytest.approx(busy * job.clock_jitter_cv * float(normal_expected_max(8.0)), rel=1e-6)


def test_no_replicas_or_already_locked_add_no_group() -> None:
    """dp 1: no all-reduce and no group; FP8 delayed scaling already ties the replicas (the amax all-reduce), so the
    loss all-reduce adds its latency only."""
    _, _, off, t_off = _eval(1, dp=1)
    _, _, on, t_on = _eval(1, dp=1, loss_dp_allreduce=True)
    assert t_on == t_off and on == off
    _, _, f_off, _ = _eval(4, cluster="dgx-h100", precision="fp8", recipe="delayed", dp=4)
    _, _, f_on, _ = _eval(4, cluster="dgx-h100", precision="fp8", recipe="delayed", dp=4, loss_dp_allreduce=True)
    assert f_off["jitter"] > 0.0 and f_on["jitter"] == pytest.approx(f_off["jitter"], rel=1e-12)
    assert f_on["dp_comm"] > f_off["dp_comm"]


def test_sources_and_rows() -> None:
    """The NeMo 1 sources, the NeMo 2 ones before 58f6689700 and Megatron-LM's before 3806ec2754 run it
    (validation/sources.yaml loss_dp_allreduce); Megatron-Bridge's rows do not."""
    vt = script_module("validate_training")
    # nemo1rest36 added mlpt50 (NeMo v2.2.0) and tprimat26 (Primus' own loss_func): tests/test_nemo1rest36.py;
    # data39 the NeMo Megatron launcher's 2022 tables (NeMo v1.9.0 L383, v1.10.0 L334, v1.11.0 L375
    # average_losses_across_data_parallel_group each micro-batch): tests/test_data39.py; data40 MLPerf v3.0's GPT-3
    # (NeMo v1.17.0_pt_23.04 megatron_gpt_model.py L633): tests/test_data40.py
    assert vt.LOSS_DP_ALLREDUCE == {"dgxc25", "dgxc2504", "dgxc2505", "mlpt31", "mlpt40", "mlpt41", "nemo2407",
                                    "nemo2502", "nemo2504", "mlm24", "mlpt50", "tprimat26", "nemolaunch22",
                                    "nemolaunch2206", "mlpt30"}
    cases = training_cases()
    assert vt.predict_new_case(cases["dgxc25_h100_nemotron4_15b_bf16_16"]).strategy.loss_dp_allreduce is True
    assert vt.predict_new_case(cases["mb2511_gb200_llama3_8b_fp8cs"]).strategy.loss_dp_allreduce is False
