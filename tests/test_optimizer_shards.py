"""The optimizer step reads and writes the states a rank holds: the same shards the memory model counts.

Megatron-Core builds its distributed optimizer (ZeRO-1) over the data-parallel group *with* the context-parallel
ranks (megatron/core/optimizer/__init__.py, ``get_data_parallel_group(with_context_parallel=True)``), and
torchtitan shards FSDP over the ``dp_shard_cp`` mesh: with cp = 2 each rank updates half the states it updates at
cp = 1 with the same dp. Expected values are computed here from the mixed-precision Adam byte count
(read fp32 master, m, v, gradient; write master, m, v, 16-bit copy = 2 K + g + 2 bytes per parameter).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import _optimizer_time, memory_parts, microbatches
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
    per_param = 2 * 12.0 + 2.0 + 2.0  # 28 bytes
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
    # updates are the same: time x bandwidth / 28 bytes = optimizer bytes / 12, at every ZeRO stage >= 1
    job, tr = _job()
    for cp, zero in ((2, 1), (2, 3), (4, 2), (2, "hsdp")):
        g = grid_from_strategy(StrategySpec(cp=cp, zero=zero), tr, 64, job)
        params_updated = _first(_optimizer_time(job, g)) * A100_HBM * MEM_EFF / 28.0
        params_held = _first(memory_parts(job, g, microbatches(g))["optimizer"]) / 12.0
        assert params_updated == pytest.approx(params_held, rel=1e-9), (cp, zero)
