"""The optimizer step reads and writes the states a rank holds: the same shards the memory model counts.

Megatron-Core builds its distributed optimizer (ZeRO-1) over the data-parallel group *with* the context-parallel
ranks (megatron/core/optimizer/__init__.py, ``get_data_parallel_group(with_context_parallel=True)``), and
torchtitan shards FSDP over the ``dp_shard_cp`` mesh: with cp = 2 each rank updates half the states it updates at
cp = 1 with the same dp. Expected values are computed here from the mixed-precision Adam byte count
(Adam reads fp32 master, m, v, gradient and writes master, m, v; then the 16-bit copy reads the fp32 master and
writes the 16-bit weight: 2 K + g + 4 + 2 bytes per parameter).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine.dp_comm import _optimizer_time
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.stage_memory import memory_parts
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec

A100_HBM = 2039e9  # bytes/s, A100 80GB SXM datasheet
MEM_EFF = 0.85  # dgx-a100's memory efficiency curve (the job's input, not an output)


def _first(x: np.ndarray) -> float:
    return float(np.ravel(x)[0])


def _job(batch: int = 64):
    tr = TrainingSpec(global_batch=batch, micro_batch=1, seq_len=2048)
    return build_job(load_cluster("dgx-a100"), load_workload("gpt-1.7b"), tr), tr


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_optimizer_step_with_cp_2_updates_the_dp_x_cp_shard(zero: int) -> None:
    job, tr = _job()
    assert job.expert_params == 0.0 and job.optimizer_bytes_per_param == 12.0 and job.grad_bytes == 2.0
    psi = job.params
    per_param = 2 * 12.0 + 2.0 + 4.0 + 2.0  # 32 bytes
    # 64 GPUs, cp 2 -> dp 32: the states are sharded over 32 x 2 = 64 ranks
    g2 = grid_from_strategy(StrategySpec(cp=2, zero=zero), tr, 64, job)
    assert _first(g2.dp) == 32
    want2 = psi / 64 * per_param / (A100_HBM * MEM_EFF)
    assert _first(_optimizer_time(job, g2)) == pytest.approx(want2, rel=1e-9)
    # 32 GPUs, cp 1 -> dp 32: twice the states per rank, twice the time
    g1 = grid_from_strategy(StrategySpec(cp=1, zero=zero), tr, 32, job)
    want1 = psi / 32 * per_param / (A100_HBM * MEM_EFF)
    assert _first(_optimizer_time(job, g1)) == pytest.approx(want1, rel=1e-9)
    assert want1 == pytest.approx(2 * want2, rel=1e-12)


def test_optimizer_time_and_optimizer_memory_count_the_same_shards() -> None:
    # the optimizer states the memory model holds per rank (12 bytes per parameter) and the ones the step
    # updates are the same: time x bandwidth / 32 bytes = optimizer bytes / 12, at every ZeRO stage >= 1
    job, tr = _job()
    for cp, zero in ((2, 1), (2, 3), (4, 2), (2, "hsdp")):
        g = grid_from_strategy(StrategySpec(cp=cp, zero=zero), tr, 64, job)
        params_updated = _first(_optimizer_time(job, g)) * A100_HBM * MEM_EFF / 32.0
        params_held = _first(memory_parts(job, g, microbatches(g))["optimizer"]) / 12.0
        assert params_updated == pytest.approx(params_held, rel=1e-9), (cp, zero)


def test_moe_expert_states_shard_over_the_expert_data_parallel_ranks_with_cp() -> None:
    """Mixtral 8x7B on 64 H100s, tp 2, cp 2, ep 8, ZeRO-1: dp = 64 / 4 = 16. Megatron-Core's expert grid (MoE
    parallel folding) covers the tp cp dp ranks of a stage as etp x ep x edp, so edp = 2 x 2 x 16 / (2 x 8) = 4
    (etp = tp = 2): each rank holds 1/4 of its experts' optimizer states (cp counted once, not twice); the dense
    states are sharded over dp x cp = 32. The dense weights are split over tp 2 but for those every TP rank holds
    whole (Megatron-Core TENorm, moe/router.py): per layer the two RMSNorm gains 2 h and the router E h, and the
    final norm h."""
    tr = TrainingSpec(global_batch=64, micro_batch=1, seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), load_workload("mixtral-8x7b"), tr)
    g = grid_from_strategy(StrategySpec(tp=2, cp=2, ep=8, zero=1, sequence_parallel=True), tr, 64, job)
    per_expert = 3 * 4096 * 14336  # gated MLP: up, gate, down
    expert_local = 32 * (8 / 8) * per_expert / 2  # 32 MoE layers, 8 experts over ep 8, each split over etp 2
    assert expert_local == 2_818_572_288
    whole = 32 * (2 * 4096 + 8 * 4096) + 4096
    dense_local = (job.params - job.expert_params - whole) / 2 + whole  # tp 2, pp 1
    want_opt = 12.0 * (dense_local / 32 + expert_local / 4)
    got_opt = _first(memory_parts(job, g, microbatches(g))["optimizer"])
    assert got_opt == pytest.approx(want_opt, rel=1e-9)
    h100_hbm, eff = 3.35e12, 0.88  # H100 SXM datasheet; dgx-h100's memory efficiency
    want_t = (dense_local / 32 + expert_local / 4) * 32.0 / (h100_hbm * eff)
    assert _first(_optimizer_time(job, g)) == pytest.approx(want_t, rel=1e-9)
