"""FSDP and HSDP with context parallelism shard the dense states over the replicas' cp ranks too, as torchtitan
does: FSDP over the ``dp_shard_cp`` mesh, HSDP over ``("dp_replicate", "dp_shard_cp")`` (replicated over
dp_replicate only; torchtitan/models/llama3/infra/parallelize.py at 91ee9ad31, today ParallelDims.build_mesh's
``fsdp`` = dp_shard x cp). Memory, optimizer step and the per-unit gathers / reduce-scatters follow, checked by hand
against the collective formulas."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

TRAINING = dict(global_batch=64, micro_batch=1)  # 64 GPUs, cp 2 -> dp 32, m = 64 / 32 = 2


def _val(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


@pytest.fixture(scope="module")
def job():  # type: ignore[no-untyped-def]
    return build_job(load_cluster("dgx-a100"), load_workload("gpt-7.5b"), TrainingSpec(**TRAINING))


def _run(job, gpus: int = 64, **strategy):  # type: ignore[no-untyped-def]
    g = grid_from_strategy(StrategySpec(**strategy), TrainingSpec(**TRAINING), gpus, job)
    return g, evaluate(job, g)


def _t(job, op: str, nbytes: float, ranks: int, stride: int) -> float:  # type: ignore[no-untyped-def]
    return _val(coll.collective_time(op, nbytes, ranks, job.network, stride=stride))


def test_hsdp_with_cp_shards_over_the_group_times_cp(job) -> None:  # type: ignore[no-untyped-def]
    """cp 2, tp 1 on 64 A100s (8 per node): dp = 32, replicas 2 GPUs apart. The default HSDP shard group is the
    replicas of one node, 8 / (tp cp) = 4, so with their cp ranks the states are sharded over 4 x 2 = 8 GPUs (a
    node, stride 1) and each unit's reduced 1/8 shard is all-reduced across the 32 / 4 = 8 groups, 8 GPUs apart.
    Per micro-batch (m = 2, no overlap): (2L - 1) all-gathers and L reduce-scatters of a layer's 16-bit
    parameters over those 8 GPUs, and L all-reduces of 1/8 of a layer over the 8 groups. Optimizer states: 12 Psi
    / 8 (before: 12 Psi / 4, the cp ranks holding the same shard)."""
    g, r = _run(job, cp=2, zero="hsdp", overlap=False)
    assert _val(g.dp) == 32 and _val(g.cp) == 2
    psi, L = job.params, 36  # gpt-7.5b: 36 layers; tp 1, pp 1: every parameter on each GPU before sharding
    unit = 2.0 * psi / L
    want = 2 * ((2 * L - 1) * _t(job, "allgather", unit, 8, 1)
                + L * (_t(job, "reducescatter", unit, 8, 1) + _t(job, "allreduce", unit / 8, 8, 8)))
    assert _val(r.breakdown["dp_comm"]) == pytest.approx(want, rel=1e-9)
    assert _val(r.memory["optimizer"]) == pytest.approx(12.0 * psi / 8, rel=1e-9)
    assert _val(r.memory["gradients"]) == pytest.approx(2.0 * psi / 8, rel=1e-9)
    # a pinned group of all 32 replicas is FSDP over dp x cp = 64 GPUs: the same states and traffic
    _, whole = _run(job, cp=2, zero="hsdp", shard_group=32, overlap=False)
    _, fsdp = _run(job, cp=2, zero="fsdp", overlap=False)
    assert _val(whole.memory["total"]) == pytest.approx(_val(fsdp.memory["total"]), rel=1e-12)
    assert _val(whole.breakdown["dp_comm"]) == pytest.approx(_val(fsdp.breakdown["dp_comm"]), rel=1e-12)


def test_fsdp_with_cp_gathers_over_dp_times_cp(job) -> None:  # type: ignore[no-untyped-def]
    """FSDP, cp 2: the memory already divided the states by dp x cp = 64; the per-unit traffic now spans the same
    64 GPUs (stride 1), not the 32 replicas 2 apart. With dp 1 (2 GPUs, cp 2) FSDP still shards over the 2 cp ranks
    and moves the gathers torchtitan runs there ("when cp is used, FSDP is also applied ... even if there may be
    no data parallelism", ParallelDims.build_mesh)."""
    psi, L = job.params, 36
    unit = 2.0 * psi / L
    _, r = _run(job, cp=2, zero="fsdp", overlap=False)
    want = 2 * ((2 * L - 1) * _t(job, "allgather", unit, 64, 1) + L * _t(job, "reducescatter", unit, 64, 1))
    assert _val(r.breakdown["dp_comm"]) == pytest.approx(want, rel=1e-9)
    assert _val(r.memory["optimizer"]) == pytest.approx(12.0 * psi / 64, rel=1e-9)
    training = dict(global_batch=1, micro_batch=1)
    small = build_job(load_cluster("dgx-a100"), load_workload("gpt-7.5b"), TrainingSpec(**training))
    g2 = grid_from_strategy(StrategySpec(cp=2, zero="fsdp", overlap=False), TrainingSpec(**training), 2, small)
    r2 = evaluate(small, g2)
    assert _val(g2.dp) == 1
    want2 = (2 * L - 1) * _t(small, "allgather", unit, 2, 1) + L * _t(small, "reducescatter", unit, 2, 1)
    assert _val(r2.breakdown["dp_comm"]) == pytest.approx(want2, rel=1e-9)


def test_ddp_and_distributed_optimizer_reduce_over_dp_times_cp(job) -> None:  # type: ignore[no-untyped-def]
    """ZeRO 0 (DDP) and ZeRO 1 (distributed optimizer), cp 2: each cp rank holds the gradient of its own sequence
    chunk for the same weights, so Megatron-Core reduces over the dp x cp group (distributed_data_parallel.py
    intra_dp_cp_group; param_and_grad_buffer.py get_data_parallel_group(with_context_parallel=True)): 64 GPUs,
    contiguous (stride 1), not the 32 replicas 2 GPUs apart. One bucket (bucket_size 1 TB), no overlap: dp_comm is
    one all-reduce of the 16-bit gradient 2 Psi over those 64 GPUs (ZeRO 1 moves the same volume as reduce-scatter
    + all-gather); ZeRO 1's optimizer states are 12 Psi / 64, the shards the step updates."""
    psi = job.params
    want = _t(job, "allreduce", 2.0 * psi, 64, 1)
    assert want != pytest.approx(_t(job, "allreduce", 2.0 * psi, 32, 2), rel=1e-3)  # the test can tell them apart
    # ZeRO 1 is the reduce-scatter then the all-gather of the same 2 Psi bytes, each priced as itself (issue 13:
    # NCCL's algorithms for them, not the all-reduce's), over the same 64 GPUs
    want1 = _t(job, "reducescatter", 2.0 * psi, 64, 1) + _t(job, "allgather", 2.0 * psi, 64, 1)
    assert want1 != pytest.approx(_t(job, "reducescatter", 2.0 * psi, 32, 2) + _t(job, "allgather", 2.0 * psi, 32, 2),
                                  rel=1e-3)
    for zero, expected in (("0", want), ("1", want1)):
        _, r = _run(job, cp=2, zero=zero, overlap=False, bucket_size=1e12)
        assert _val(r.breakdown["dp_comm"]) == pytest.approx(expected, rel=1e-9)
    _, r1 = _run(job, cp=2, zero="1", overlap=False, bucket_size=1e12)
    assert _val(r1.memory["optimizer"]) == pytest.approx(12.0 * psi / 64, rel=1e-9)
    # dp 1 (2 GPUs, cp 2): the two cp ranks still all-reduce their gradients
    training = dict(global_batch=1, micro_batch=1)
    small = build_job(load_cluster("dgx-a100"), load_workload("gpt-7.5b"), TrainingSpec(**training))
    g2 = grid_from_strategy(StrategySpec(cp=2, overlap=False, bucket_size=1e12), TrainingSpec(**training), 2, small)
    assert _val(g2.dp) == 1
    assert _val(evaluate(small, g2).breakdown["dp_comm"]) == pytest.approx(
        _t(small, "allreduce", 2.0 * psi, 2, 1), rel=1e-9)


def test_hier_with_cp_exchanges_one_over_g_cp_shards(job) -> None:  # type: ignore[no-untyped-def]
    """hier:2, ZeRO 0, cp 2 on 64 A100s (dp 32, replicas 2 GPUs apart): inside a group the 2 replicas with their cp
    ranks, 4 contiguous GPUs, all-reduce the 16-bit gradient 2 Psi; each of the 4 then holds a reduced 1/4 (G cp)
    and all-reduces it with its counterparts in the other 32 / 2 = 16 groups, 2 replicas = 4 GPUs apart. One
    bucket, no overlap: dp_comm = AllReduce(2 Psi, 4, 1) + AllReduce(2 Psi / 4, 16, 4) (1/G would send 2 Psi / 2)."""
    psi = job.params
    want = _t(job, "allreduce", 2.0 * psi, 4, 1) + _t(job, "allreduce", 2.0 * psi / 4, 16, 4)
    g = grid_from_strategy(StrategySpec(cp=2, overlap=False, bucket_size=1e12), TrainingSpec(**TRAINING), 64, job)
    r = evaluate(job, g, sync="hier:2")
    assert _val(r.breakdown["dp_comm"]) == pytest.approx(want, rel=1e-9)
