"""The last pipeline stage's word-embedding gradient when it runs multi-token prediction modules at pp > 1
(layer_compute.mtp_embedding_grad_time, docs/model.md#mtp-embedding-grad).

Megatron-Core builds the word embedding on the stage that runs the modules (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/models/gpt/gpt_model.py lines 173-174) and each module embeds its input through it
(multi_token_prediction.py line 1302), so that stage runs F.embedding's backward every micro-batch: a zero-filled dense
V/tp x h gradient in the weight's 16-bit dtype (write e), each further module's dense gradient summed into it by
autograd (write e, then read 2e and write e), and the DDP hook's add into main_grad (read g + e, write g). Bytes
worked out here by hand: V h / tp x (2 e + 2 g + 4 e (D - 1))."""

from __future__ import annotations

import numpy as np
import pytest
from grid_helpers import HBM, one

from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, untied 32,000-token embedding
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
EMB = 32_000 * 1024  # the word embedding: 32,768,000 elements


def _job(mtp: int, grad_bytes: int = 4):  # type: ignore[no-untyped-def]
    wl = TINY.model_copy(update={"mtp_layers": mtp})
    return build_job(load_cluster("dgx-h100"), wl, TrainingSpec(grad_bytes_per_param=grad_bytes))


def _grid(job, **strategy):  # type: ignore[no-untyped-def]
    """One strategy on 8 GPUs (dp derived), global batch 16 in micro-batches of 2."""
    return grid_from_strategy(StrategySpec(**strategy), TrainingSpec(global_batch=16, micro_batch=2), 8, job)


@pytest.mark.parametrize(("mtp", "grad_bytes", "per_element"), [
    (1, 4, 2 + (4 + 2 + 4)),  # one module: its dense bf16 gradient (2), the hook's add into fp32 main_grad (4 + 2 + 4)
    (2, 4, 2 + (4 + 2 + 4) + (2 + 3 * 2)),  # the second module's dense gradient (2) and autograd's sum (3 x 2)
    (1, 2, 2 + (2 + 2 + 2))])  # a bf16 main_grad
def test_last_stage_bytes_by_hand(mtp: int, grad_bytes: int, per_element: int) -> None:
    job = _job(mtp, grad_bytes)
    g = _grid(job, pp=2, zero="1", megatron_ddp=True)
    assert one(layer_compute.mtp_embedding_grad_time(job, g)) == pytest.approx(EMB * per_element / HBM)
    # tp 2 holds half the vocabulary rows
    g2 = _grid(job, pp=2, tp=2, zero="1", megatron_ddp=True)
    assert one(layer_compute.mtp_embedding_grad_time(job, g2)) == pytest.approx(EMB / 2 * per_element / HBM)


def test_zero_where_it_does_not_apply() -> None:
    """pp 1 (embedding_grad_time counts the modules with the one stage's embedding), no modules, or a data-parallel
    wrapper other than Megatron-Core's DDP."""
    job = _job(1)
    assert one(layer_compute.mtp_embedding_grad_time(job, _grid(job, pp=1, zero="1", megatron_ddp=True))) == 0.0
    assert one(layer_compute.mtp_embedding_grad_time(job, _grid(job, pp=2, zero="1"))) == 0.0
    job0 = _job(0)
    assert one(layer_compute.mtp_embedding_grad_time(job0, _grid(job0, pp=2, zero="1", megatron_ddp=True))) == 0.0


def test_only_the_stage_with_the_logits_carries_it() -> None:
    """In a micro-batch's backward at pp 2: the stage with the logits (and the modules) gains exactly the bytes
    above under Megatron-Core's DDP, 12 a element, and the sum of the output layer's two weight gradients (the main
    head's and the module's, read 2 x 2, write 2: 6, mtp_output_grad_sum_time, review24b); a stage without them
    gains nothing (its first-stage embedding gradient is not priced apart at pp > 1, as before); the forward is
    unchanged."""
    job = _job(1)
    on, off = _grid(job, pp=2, zero="1", megatron_ddp=True), _grid(job, pp=2, zero="1")
    layers = np.asarray([2.0])
    for logits, extra in ((True, EMB * (12 + 6) / HBM), (False, 0.0)):
        a = layer_compute._compute_per_microbatch(job, off, layers, logits_on_stage=logits)
        b = layer_compute._compute_per_microbatch(job, on, layers, logits_on_stage=logits)
        assert one(b["forward"] - a["forward"]) == 0.0
        assert one(b["backward"] - a["backward"]) == pytest.approx(extra, abs=1e-15)


@pytest.mark.parametrize(("mtp", "fusion", "per_element"), [
    # fused output GEMM: it writes main_grad itself and hands autograd a torch.empty dummy (nothing written: at pp > 1
    # the model sets zero_out_wgrad only at pp 1), which autograd sums with the modules' dense gradients (read 2e,
    # write e); the DDP hook then skips the add (grad_added_to_main_grad, no zero_out_wgrad)
    # the D + 1 output-layer calls (main head and each module's head: multi_token_prediction.py lines 1012-1016)
    (1, True, 2 + 2 * (3 * 2)),  # one embedding gradient written, two dummies summed in
    (2, True, 2 + (2 + 3 * 2) + 3 * (3 * 2)),  # two embedding gradients written and summed, three dummies summed
    # unfused: each output GEMM's 16-bit gradient is one more dense gradient (e, summed: 3e), then the hook's add
    (1, False, 2 + 2 * (2 + 3 * 2) + (4 + 2 + 4)),
])
def test_tied_output_layer_shares_the_copy(mtp: int, fusion: bool, per_element: int) -> None:
    """Tied embeddings at pp > 1: the last stage's output layer runs on the MTP embedding copy
    (NVIDIA/Megatron-LM@d98e8a64dd language_module.py lines 345-353, shared_embedding_or_output_weight returns the
    embedding's weight where mtp_process), so its weight gradient joins the copy's. The fused wgrad's dummy is
    torch.empty where zero_out_wgrad is unset (tensor_parallel/layers.py lines 738-762; zero_out_wgrad set only at
    pp 1, language_module.py lines 263-268), and the DDP hook adds param.grad only where grad_added_to_main_grad is
    False or zero_out_wgrad is set (distributed_data_parallel.py lines 575-578). Bytes by hand, e 2, g 4 (review24b)."""
    wl = TINY.model_copy(update={"mtp_layers": mtp, "tied_embeddings": True})
    job = build_job(load_cluster("dgx-h100"), wl, TrainingSpec(grad_bytes_per_param=4))
    g = _grid(job, pp=2, zero="1", megatron_ddp=True, grad_accumulation_fusion=fusion)
    assert one(layer_compute.mtp_embedding_grad_time(job, g)) == pytest.approx(EMB * per_element / HBM)


@pytest.mark.parametrize(("mtp", "pp", "fusion"), [(1, 1, True), (2, 1, True), (1, 2, True), (2, 2, False)])
def test_untied_output_layer_gradients_summed(mtp: int, pp: int, fusion: bool) -> None:
    """An untied output layer runs D + 1 times on its weight (the main head and each module's head:
    multi_token_prediction.py lines 1012-1016), each backward a dense V x h bf16 gradient (the fused GEMM's dummy, or
    the unfused GEMM's output) that autograd sums into the first: D sums of read 2 + 2, write 2, at any pp, on the
    stage with the logits; 0 tied (counted with the embedding's), without MTP or without Megatron-Core's DDP."""
    job = _job(mtp)
    g = _grid(job, pp=pp, zero="1", megatron_ddp=True, grad_accumulation_fusion=fusion)
    assert one(layer_compute.mtp_output_grad_sum_time(job, g)) == pytest.approx(EMB * 6 * mtp / HBM)
    assert one(layer_compute.mtp_output_grad_sum_time(job, _grid(job, pp=pp, zero="1"))) == 0.0
    tied = build_job(load_cluster("dgx-h100"), TINY.model_copy(update={"mtp_layers": mtp, "tied_embeddings": True}),
                     TrainingSpec())
    assert one(layer_compute.mtp_output_grad_sum_time(tied, _grid(tied, pp=pp, zero="1", megatron_ddp=True))) == 0.0
    job0 = _job(0)
    assert one(layer_compute.mtp_output_grad_sum_time(job0, _grid(job0, pp=pp, zero="1", megatron_ddp=True))) == 0.0
