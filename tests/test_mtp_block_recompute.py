"""A multi-token prediction module under full recompute with recompute_method block (review24b).

Megatron-Core's MultiTokenPredictionLayer.forward calls ``_checkpointed_forward`` whenever recompute_granularity is
'full'; under 'uniform' it checkpoints the module, under 'block' it warns "recompute_method == 'block' is not
supported for MTP yet. Skipping recompute." and runs the module once (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/transformer/multi_token_prediction.py lines 1621-1634, 1705-1706; core_v0.15.0 lines 632-644). So under
block with a layer count the module costs a micro-batch exactly what it costs without recompute (its compute, its
TP / EP collectives), and under uniform more (its forward and its collectives again). Checked on the step: the
micro-batch with one module less the same without it, with H = 0 (no host floor)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _t_mb(mtp: int, **strategy) -> float:  # type: ignore[no-untyped-def]
    """One micro-batch on the single rank of 8 Qwen3-30B-A3B-type MoE layers (TP 2 with SP, EP 4, DP 4)."""
    wl = TransformerWorkload(name="qwen3-8l-mtp", layers=8, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                             ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                             moe={"experts": 128, "top_k": 8, "ffn_hidden": 768}, mtp_layers=mtp)
    t = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), wl, t)
    st = StrategySpec(dp=4, tp=2, ep=4, sequence_parallel=True, **strategy)
    res = evaluate(job, grid_from_strategy(st, t, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


def _module(**strategy) -> float:  # type: ignore[no-untyped-def]
    return _t_mb(1, **strategy) - _t_mb(0, **strategy)


@pytest.mark.parametrize("layers", [2, 8])
def test_block_recompute_leaves_the_module_as_without_recompute(layers: int) -> None:
    block = _module(recompute="full", recompute_method="block", recompute_layers=layers)
    assert block == pytest.approx(_module(), rel=1e-12)


def test_uniform_recompute_repeats_the_module() -> None:
    uniform = _module(recompute="full", recompute_method="uniform", recompute_layers=1)
    assert uniform > _module() * 1.02
