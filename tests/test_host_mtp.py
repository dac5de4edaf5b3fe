"""The host wait at a multi-token prediction module's MoE block (docs/model.md#host-mtp, step.mtp_host_wait).

Megatron-Core builds an MTP module's transformer block from the decoder's last layer spec
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/gpt_layer_specs.py lines 767-769), so with an MoE last layer
the block's MoELayer runs the same dropless dispatcher and its device-to-host synchronisation: each of the D passes
is one more interval from a synchronisation to the next on the rank with the logits, holding the passes and the
output heads with their losses. A full recompute re-runs the module under recompute_method uniform and skips it
under block (multi_token_prediction.py lines 1621-1634, 1705-1706).

Checked here from the step only (not from the implementation): where every interval binds, a micro-batch on a single
rank takes (L + D) H (1 + r) and nothing else, the logits and the MTP passes hidden under the module's interval; its
slope in H is L + D, with each pass's share r of a recomputed forward."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _workload(mtp: int, shared: bool = False) -> TransformerWorkload:
    """8 Qwen3-30B-A3B-type layers, every one an MoE layer (so the MTP block is MoE), with ``mtp`` modules."""
    return TransformerWorkload(name="qwen3-8l-mtp", layers=8, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                               ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                               moe={"experts": 128, "top_k": 8, "ffn_hidden": 768}, mtp_layers=mtp,
                               mtp_shared=shared)


def _t_mb(host_s: float, mtp: int = 0, shared: bool = False, **strategy) -> float:  # type: ignore[no-untyped-def]
    """One micro-batch on the single rank (pp 1, 8 GPUs, EP 8, MBS 1, 8 micro-batches)."""
    t = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), _workload(mtp, shared), t)
    st = StrategySpec(moe_layer_host_s=host_s, dp=8, ep=8, **strategy)
    res = evaluate(job, grid_from_strategy(st, t, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


@pytest.mark.parametrize("mtp", [1, 2])
def test_every_interval_binding_hides_the_logits_and_the_mtp_passes(mtp: int) -> None:
    """H = 1 s binds everywhere. Without MTP the 8 layer intervals take 8 H and the logits (outside every interval:
    after the last MoE layer's interval there is no synchronisation until the next micro-batch's first) add their
    device time; with D modules the D MTP intervals hold the passes and the heads, so the micro-batch is exactly
    (8 + D) H: nothing of a single rank lies outside an interval."""
    assert _t_mb(1.0, mtp) == pytest.approx(8.0 + mtp, rel=1e-12)
    logits = _t_mb(1.0, 0) - 8.0
    assert logits > 0.0  # the head and loss, not hidden without a synchronisation after them


def test_slope_counts_one_interval_per_pass_shared_or_not() -> None:
    """dt_mb / dH where every interval binds: L = 8 without MTP, 8 + D with D passes; a shared module (one set of
    weights run D times, Megatron-Core mtp_use_repeated_layer) runs D blocks and synchronises D times too."""
    for mtp, shared, slope in ((0, False, 8.0), (1, False, 9.0), (2, False, 10.0), (2, True, 10.0)):
        assert _t_mb(2.0, mtp, shared) - _t_mb(1.0, mtp, shared) == pytest.approx(slope, rel=1e-12)


def test_recomputed_module_adds_its_forward_share() -> None:
    """Selective recompute of moe: every interval's host work H (1 + 0.3199), the module's as the layers':
    slope (8 + 1) x 1.3199 = 11.8791. Full recompute, method uniform (chunks of 1): every layer's whole forward
    again and the module's too (MultiTokenPredictionLayer._checkpointed_forward's 'uniform' branch, which asserts
    recompute_num_layers 1): 9 x 1.4512 = 13.0608."""
    moe = dict(recompute="selective", recompute_modules="moe_act,moe")
    assert _t_mb(2.0, 1, **moe) - _t_mb(1.0, 1, **moe) == pytest.approx(9 * 1.3199, rel=1e-9)
    uniform = dict(recompute="full", recompute_method="uniform", recompute_layers=1)
    assert _t_mb(2.0, 1, **uniform) - _t_mb(1.0, 1, **uniform) == pytest.approx(9 * 1.4512, rel=1e-9)


def test_block_recompute_skips_the_module() -> None:
    """Full recompute, method block, 2 of the 8 layers: the layers' share pro rata, 8 (1 + 0.4512 x 2 / 8) = 8.9024,
    and the module is not recomputed at all: MultiTokenPredictionLayer._checkpointed_forward's 'block' branch warns
    "recompute_method == 'block' is not supported for MTP yet. Skipping recompute." and runs the module plainly
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/multi_token_prediction.py lines 1630-1634; the same
    at core_v0.15.0 lines 640-644), so its interval's host work is H: 8.9024 + 1 = 9.9024 (review24b)."""
    block = dict(recompute="full", recompute_method="block", recompute_layers=2)
    assert _t_mb(2.0, 1, **block) - _t_mb(1.0, 1, **block) == pytest.approx(8 * (1 + 0.4512 * 2 / 8) + 1.0,
                                                                           rel=1e-9)
    assert _t_mb(2.0, 0, **block) - _t_mb(1.0, 0, **block) == pytest.approx(8 * (1 + 0.4512 * 2 / 8), rel=1e-9)


def test_no_host_time_no_wait() -> None:
    """H = 0 prices no wait with or without the modules: the step is the device's."""
    t = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), _workload(1), t)
    res = evaluate(job, grid_from_strategy(StrategySpec(dp=8, ep=8), t, 8, job))
    assert float(np.asarray(res.breakdown["host"]).reshape(-1)[0]) == 0.0
