"""Transformer Engine userbuffers' SMs under tp_comm_overlap (docs/model.md#contention): the hidden TP traffic is
priced at TE's SM counts (ring exchange 1, pipeline / bulk 16; the pipeline's GEMMs on S - 16 SMs with set_sm_margin),
not at NCCL's channel share."""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.cost.collectives import collective_time
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.model_parallel_comm import _ub_shares, userbuffers_sm_time
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def val(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


def test_userbuffers_sm_time_by_hand() -> None:
    """GB200, 148 SMs: 1 s of forward traffic (half on the 1-SM ring exchange: 0.5/148), 2 s of backward traffic
    (half ring 1 SM, half bulk 16 SMs: 2 x 8.5/148), 3 s of pipeline GEMMs on 132 of 148 SMs (3 x 16/132)."""
    expected = 0.5 / 148 + 2 * 8.5 / 148 + 3 * 16 / 132  # 0.003378 + 0.114865 + 0.363636
    assert expected == pytest.approx(0.481880, abs=1e-6)
    assert val(userbuffers_sm_time(148, True, 1.0, 2.0, 3.0)) == pytest.approx(expected, rel=1e-12)
    # H100, 132 SMs: the same traffic and GEMMs cost more (fewer SMs left to the GEMM)
    assert val(userbuffers_sm_time(132, True, 1.0, 2.0, 3.0)) == pytest.approx(
        0.5 / 132 + 17 / 132 + 48 / 116, rel=1e-12)


@pytest.mark.parametrize(("units", "shared"), [(0, True), (148, False), (16, True)])
def test_no_userbuffers_cost_without_sms_on_which_it_runs(units: int, shared: bool) -> None:
    assert val(userbuffers_sm_time(units, shared, 1.0, 2.0, 3.0)) == 0.0


def test_userbuffers_traffic_is_not_priced_at_nccl_share() -> None:
    """TP 8 with sequence parallelism and tp_comm_overlap on one GB200 NVL72 domain, dp 1 (no DP traffic, no CP):
    every hidden collective of the layers is a userbuffers one, so the contention term moves with NCCL's channel
    share only by the output layer's, a plain ColumnParallelLinear whose backward re-gather and reduce-scatter run on
    NCCL under the output GEMMs (docs/model.md#output-tp-comm): (0.5 - 32/152) x m x (AG + RS) of one b s h bf16
    activation over the 8 ranks, each shorter than the GEMM that hides it; without tp_comm_overlap the layers'
    hidden backward traffic is NCCL's too and it moves more."""
    cluster, gpt = load_cluster("gb200-nvl72"), load_workload("gpt-7.5b")
    training = dict(global_batch=8, micro_batch=1)
    job = build_job(cluster, gpt, TrainingSpec(**training))

    def contention(j, overlap: bool) -> float:  # type: ignore[no-untyped-def]
        st = StrategySpec(tp=8, sequence_parallel=True, tp_comm_overlap=overlap)
        return val(evaluate(j, grid_from_strategy(st, TrainingSpec(**training), 8, j), sync=st.sync)
                   .breakdown["contention"])

    assert job.collective_share == pytest.approx(32 / 152)  # 32 ring CTAs of 152 SMs (review28b)
    on = contention(job, True)
    assert on > 0.0
    act = 1 * gpt.seq_len * gpt.hidden * 2.0
    head = sum(val(collective_time(op, act, 8, job.network, stride=1)) for op in ("allgather", "reducescatter"))
    moved_on = contention(replace(job, collective_share=0.5), True) - on
    assert moved_on == pytest.approx((0.5 - 32 / 152) * 8 * head, rel=1e-9)
    assert contention(replace(job, collective_share=0.5), False) - contention(job, False) > moved_on


def test_userbuffers_gemms_leave_routed_experts_out() -> None:
    """Userbuffers splits (chunking) and set_sm_margin shrinks only its own GEMMs (QKV / O-proj, dense / shared FC1 and
    FC2); Mixtral 8x7B's routed experts run through the token dispatcher, not userbuffers. By hand: q 4096x4096,
    k / v 4096x1024, o 4096x4096; top-2 experts of 3 matrices 4096x14336 and the router 4096x8 (in the layer's priced
    forward GEMM time, on neither side: mtp32): of (10240 + 6 x 14336 + 8) x 4096, q + k + v 6144 x 4096 (all-gather
    side), o 4096 x 4096 (reduce-scatter side). Merged code: 1 - 0.340 and 0.340."""
    sh = build_job(load_cluster("gb200-nvl72"), load_workload("mixtral-8x7b"),
                   TrainingSpec(global_batch=8, micro_batch=1)).shape
    assert _ub_shares(sh) == pytest.approx((6144 / 96264, 4096 / 96264), rel=1e-12)  # AG side: q, k, v
    dense = build_job(load_cluster("gb200-nvl72"), load_workload("gpt-7.5b"),
                      TrainingSpec(global_batch=8, micro_batch=1)).shape
    assert sum(_ub_shares(dense)) == pytest.approx(1.0, rel=1e-12)  # no routed experts: every GEMM on userbuffers
