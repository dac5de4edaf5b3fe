"""Helpers shared by the tests that price one strategy on an 8-GPU grid and read back a broadcast result, and the
small MoE workload several of them price."""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec, TransformerWorkload

# 4 layers, the first dense, then 3 MoE layers of 64 experts (top-4, width 512) on h = 1024, 8 heads of 128, MHA
TINY_MOE = TransformerWorkload(name="tiny-moe", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                               seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=False, dropout=False,
                               moe=MoESpec(experts=64, top_k=4, ffn_hidden=512, first_dense=1))
HBM = 3.35e12 * 0.88  # H100 SXM: 3.35 TB/s datasheet x 0.88 BabelStream fraction (hardware/accelerators/h100-sxm.yaml)


def one(x: Any) -> float:
    """The one value of a broadcast grid result (every element equal)."""
    a = np.asarray(x, dtype=float).ravel()
    assert np.allclose(a, a[0])
    return float(a[0])


def grid8(job: Any, **strategy: Any) -> Any:
    """The grid of one strategy at dp 8 on 8 GPUs, global batch 16 in micro-batches of 2."""
    st = StrategySpec(dp=8, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=16, micro_batch=2, precision=job.precision), 8, job)


def evaluated(cluster: Any, workload: Any, training: Any, gpus: int, **strategy: Any) -> tuple[Any, Any, Any]:
    """(job, grid, step.evaluate's result) of one strategy on ``gpus`` GPUs."""
    job = build_job(cluster, workload, training)
    g = grid_from_strategy(StrategySpec(**strategy), training, gpus, job)
    return job, g, evaluate(job, g)


def first(a: Any) -> float:
    """The first value of a broadcast result."""
    return float(np.asarray(a).reshape(-1)[0])
