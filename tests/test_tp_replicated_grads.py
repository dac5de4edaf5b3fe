"""Parameters every tensor-parallel rank holds whole, counted by hand.

LatentMoE's fc1_latent_proj / fc2_latent_proj are TELinear ``parallel_mode="duplicated"`` (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/transformer/moe/moe_layer.py): each TP rank holds, reduces over DP and updates them whole. Under sequence
parallelism every whole-per-rank weight's gradient (norms, router, duplicated linears) is also all-reduced over the TP
group once per step (finalize_model_grads.py ``_allreduce_non_tensor_model_parallel_grads``, same commit)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import model_parallel_comm, pipeline_ranks, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

# 2 layers, h 64, 4 heads of 16 (MHA), E 8 experts of f_e 16, top-2, ungated, no biases, untied, LatentMoE l 16
SMALL: dict[str, Any] = dict(name="s", layers=2, hidden=64, heads=4, ffn_hidden=32, gated_mlp=False, vocab=128,
                             seq_len=256, tied_embeddings=False, biases=False)


def _job(latent: int | None, strategy: dict[str, Any], gpus: int = 2) -> tuple[Any, Any]:
    moe: dict[str, Any] = {"experts": 8, "top_k": 2, "ffn_hidden": 16}
    if latent:
        moe["latent_size"] = latent
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision="bf16", seq_len=256)
    job = build_job(load_cluster("dgx-h100"), TransformerWorkload(**SMALL, moe=moe), tr, straggler_cv=0.0)
    return job, grid_from_strategy(StrategySpec(**strategy), tr, gpus, job)


@pytest.mark.parametrize("latent", [None, 16])
def test_whole_weights_count_whole_per_tp_rank(latent: int | None) -> None:
    """Whole on each of the 2 TP ranks (Megatron-Core builds them at full size: TENorm, moe/router.py's
    (E, h) weight, the duplicated latent projections): per MoE layer the 2 pre-norms 2 h = 128 and the router
    E h = 512 (+ 2 h l = 2 x 64 x 16 = 2048 with a latent width), 2 MoE layers, and the final norm h = 64; the rest of
    the non-expert weights halves. (Before, only the latent projections were whole: Megatron-LM's
    theoretical_memory_usage.py count divides the norms and router by tp.)"""
    job, g = _job(latent, {"tp": 2})
    dense, _ = pipeline_ranks._params_per_gpu(job, g)
    whole = 2 * (2 * 64 + 8 * 64 + (2 * 64 * 16 if latent else 0)) + 64
    assert float(np.ravel(dense)[0]) == pytest.approx((job.params - job.expert_params - whole) / 2 + whole,
                                                      rel=1e-12)
    # tp 1: every weight on the one rank
    job1, g1 = _job(latent, {"tp": 1})
    dense1, _ = pipeline_ranks._params_per_gpu(job1, g1)
    assert float(np.ravel(dense1)[0]) == pytest.approx(job1.params - job1.expert_params, rel=1e-12)


@pytest.mark.parametrize("latent", [None, 16])
def test_sequence_parallel_all_reduces_the_whole_weights_gradients(latent: int | None) -> None:
    """Whole per rank, per layer: 2 pre-norms (2 h = 128), the router (E h = 512), LatentMoE's 2 h l (2048); outside:
    the final norm (h = 64). Stage of 2 layers: 2 x (128 + 512 [+ 2048]) + 64 elements x the gradient bytes, one
    all-reduce over the 2 TP ranks (one NVLink pair); none without sequence parallelism or with tp 1."""
    job, g = _job(latent, {"tp": 2, "sequence_parallel": True})
    per_layer = 2 * 64 + 8 * 64 + (2 * 64 * 16 if latent else 0)
    nbytes = (2 * per_layer + 64) * job.grad_bytes
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    want = float(np.ravel(coll.group_time("allreduce", nbytes, groups.tensor))[0])
    got = model_parallel_comm.sp_replicated_grad_allreduce(job, g, groups, np.full(1, 2.0), np.zeros(1))
    assert want > 0 and float(np.ravel(got)[0]) == pytest.approx(want, rel=1e-12)
    res = step.evaluate(job, g)
    # the step carries it in the exposed TP traffic
    assert float(np.ravel(res.breakdown["tp_comm"])[0]) >= want
    # without SP: an eager PyTorch layer (Megatron-Core refuses MoE at tp > 1 without SP, and an unset
    # sequence_parallel is priced on there: docs/model.md#moe-sp-required)
    job, g = _job(latent, {"tp": 2, "sequence_parallel": False, "layer_impl": "eager"})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    grads = model_parallel_comm.sp_replicated_grad_allreduce(job, g, groups, np.full(1, 2.0), np.zeros(1))
    assert float(np.ravel(grads)[0]) == 0.0


@pytest.mark.parametrize("positions", [0, 256])
def test_each_pipeline_rank_reduces_its_own_outside_tensors(positions: int) -> None:
    """pp 2 x tp 2 with SP, 1 layer a rank: each rank all-reduces its own whole weights' gradients. Rank 0: its layer's
    2 pre-norms and router (2 h + E h = 640) only, with or without learned positions: the P x h table (256 x 64 =
    16384) is whole on each TP rank but has no ``sequence_parallel`` attribute (Megatron-Core
    language_model_embedding.py, a plain torch.nn.Embedding looked up before the scatter to the SP region, whose
    backward all-gathers: the TP ranks' gradients are equal) and is not reduced (review19b: it was counted); rank 1:
    its layer's 640 and the final norm (h = 64) it holds with the output layer. Every stage was priced with all the
    tensors outside the layers (the final norm on rank 0 too)."""
    wl = TransformerWorkload(**dict(SMALL, position_embeddings=positions), moe={"experts": 8, "top_k": 2,
                                                                               "ffn_hidden": 16})
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision="bf16", seq_len=256)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    g = grid_from_strategy(StrategySpec(tp=2, pp=2, sequence_parallel=True), tr, 4, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    per_layer = 2 * 64 + 8 * 64
    for rank, outside in ((0, 0), (1, 64)):
        want = float(np.ravel(coll.group_time("allreduce", (per_layer + outside) * job.grad_bytes, groups.tensor))[0])
        got = model_parallel_comm.sp_replicated_grad_allreduce(job, g, groups, np.full(1, 1.0), np.full(1, float(rank)))
        assert float(np.ravel(got)[0]) == pytest.approx(want, rel=1e-12), rank
