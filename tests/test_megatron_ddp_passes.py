"""Megatron-Core DDP's passes outside the GEMMs (strategy megatron_ddp): the word embedding's dense gradient and its
add into main_grad every micro-batch (layer_compute.embedding_grad_time), and the zeroing of the whole gradient buffer
every step (dp_comm.grad_buffer_reset_time), against bytes worked out by hand from the code paths they cite
(F.embedding's CUDA backward, DistributedDataParallel._make_param_hook, ParamAndGradBuffer.reset)."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from grid_helpers import HBM, grid8, one

from scalemodel.engine import dp_comm, layer_compute, planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, untied 32,000-token embedding, no biases
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
# parameters: 4 layers x (QKV 1024 x 3072 + O 1024 x 1024 + FC1, FC2 2 x 1024 x 4096 + 2 norms x 1024)
# + embedding and output layer 2 x 32,000 x 1024 + final norm 1024
P = 4 * (1024 * 3072 + 1024 * 1024 + 2 * 1024 * 4096 + 2 * 1024) + 2 * 32_000 * 1024 + 1024  # 116,655,104
EMB = 32_000 * 1024  # the word embedding: 32,768,000 elements


def grid(job, **strategy):  # type: ignore[no-untyped-def]
    """One strategy on 8 GPUs (dp derived), global batch 16 in micro-batches of 2."""
    return grid_from_strategy(StrategySpec(**strategy), TrainingSpec(global_batch=16, micro_batch=2), 8, job)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


@pytest.mark.parametrize(("grad_bytes", "per_element"), [(4, 2 + (4 + 2 + 4)), (2, 2 + (2 + 2 + 2))])
def test_embedding_grad_by_hand(h100, grad_bytes, per_element) -> None:  # type: ignore[no-untyped-def]
    # zero-filled dense bf16 gradient (write 2), then main_grad.add_(grad): read main_grad g, read grad 2, write g
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=grad_bytes))
    assert one(layer_compute.embedding_grad_time(job, grid8(job, zero="1", megatron_ddp=True))) == pytest.approx(
        EMB * per_element / HBM)
    # tp 2 holds half the vocabulary rows
    assert one(layer_compute.embedding_grad_time(job, grid(job, tp=2, zero="1", megatron_ddp=True))) == pytest.approx(
        EMB / 2 * per_element / HBM)
    assert one(layer_compute.embedding_grad_time(job, grid8(job, zero="1"))) == 0.0  # not Megatron-Core's DDP
    # first stage's
    assert one(layer_compute.embedding_grad_time(job, grid(job, pp=2, zero="1", megatron_ddp=True))) == 0.0


@pytest.mark.parametrize(("tied", "mtp", "per_element"), [
    (True, 0, 2 + (4 + 2 + 4) + (2 + 3 * 2)),  # the output layer's zeros dummy 2, autograd's sum of the two 3 x 2
    (False, 1, 2 + (4 + 2 + 4) + (2 + 3 * 2)),  # the MTP module's own zero-filled embedding gradient 2, the sum 6
    # 2 modules' embeddings and 3 output-layer calls on the tied weight (the main head and each module's head,
    # NVIDIA/Megatron-LM@d98e8a64dd multi_token_prediction.py lines 1012-1016: review24b, 3 uses before)
    (True, 2, 2 + (4 + 2 + 4) + 5 * (2 + 3 * 2))])
def test_embedding_grad_with_other_uses_of_the_weight(h100, tied, mtp, per_element) -> None:  # type: ignore[no-untyped-def]
    """A tied output layer (zero_out_wgrad at pp 1: a torch.zeros dummy gradient, one per call: the main head and
    each MTP module's head) and each MTP module (its own F.embedding backward) hand autograd another dense V x h
    bf16 gradient, summed with the first (read 2 + 2, write 2) before the hook's add into the fp32 main_grad."""
    wl = TINY.model_copy(update={"tied_embeddings": tied, "mtp_layers": mtp})
    job = build_job(h100, wl, TrainingSpec(grad_bytes_per_param=4))
    assert one(layer_compute.embedding_grad_time(job, grid8(job, zero="1", megatron_ddp=True))) == pytest.approx(
        EMB * per_element / HBM)


def test_embedding_grad_in_every_micro_batch_backward(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, grid8(job, zero="1"), layers)
    b = layer_compute._compute_per_microbatch(job, grid8(job, zero="1", megatron_ddp=True), layers)
    assert one(b["forward"] - a["forward"]) == 0.0
    assert one(b["backward"] - a["backward"]) == pytest.approx(12 * EMB / HBM)


@pytest.mark.parametrize("grad_bytes", [4, 2])
def test_grad_buffer_reset_by_hand(h100, grad_bytes) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=grad_bytes))
    assert job.params == P
    # the whole buffer of the rank's parameters, not the distributed optimizer's 1/dp shard
    assert one(dp_comm.grad_buffer_reset_time(job, grid8(job, zero="1", megatron_ddp=True))) == pytest.approx(
        P * grad_bytes / HBM)
    # tp 2: the split weights halve, the RMSNorm gains (4 layers x 2 norms + the final norm, 9 x 1024) stay whole
    whole = 9 * 1024
    assert one(dp_comm.grad_buffer_reset_time(job, grid(job, tp=2, zero="1", megatron_ddp=True))) == pytest.approx(
        ((P - whole) / 2 + whole) * grad_bytes / HBM)
    assert one(dp_comm.grad_buffer_reset_time(job, grid8(job, zero="1"))) == 0.0
    # counted with the optimizer step: the ZeRO-1 Adam shard (P / 8 x (2 x 12 + g + 6) bytes) plus the reset
    on = one(dp_comm._optimizer_time(job, grid8(job, zero="1", megatron_ddp=True)))
    off = one(dp_comm._optimizer_time(job, grid8(job, zero="1")))
    assert off == pytest.approx(P / 8 * (24 + grad_bytes + 6) / HBM)
    assert on - off == pytest.approx(P * grad_bytes / HBM)


@pytest.mark.parametrize("zero", ["2", "3", "fsdp"])
def test_not_where_a_plan_searches_sharded_stages(h100, zero) -> None:  # type: ignore[no-untyped-def]
    """plan keeps a pinned megatron_ddp while it searches ZeRO 2, 3 and FSDP, which StrategySpec refuses with it:
    those candidates run a sharded wrapper, not Megatron-Core's DDP, so neither pass is priced there (as its
    buckets are not)."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    sharded = msgspec.structs.replace(grid8(job, zero=zero), megatron_ddp=np.asarray([True]))
    assert one(layer_compute.embedding_grad_time(job, sharded)) == 0.0
    assert one(dp_comm.grad_buffer_reset_time(job, sharded)) == 0.0


def test_plan_keeps_a_pinned_megatron_ddp_at_zero_0_or_1() -> None:
    """StrategySpec refuses megatron_ddp with ZeRO >= 2; a plan that pins it searches ZeRO 0 and 1 only."""
    cons, fixed, _ = planner.pins(StrategySpec(megatron_ddp=True), ["megatron_ddp"])
    assert fixed == {"megatron_ddp": True} and cons["zero"] == [("<=", 1)]
    cons, _, _ = planner.pins(StrategySpec(megatron_ddp=False), ["megatron_ddp"])
    assert "zero" not in cons
    with pytest.raises(Exception, match="megatron_ddp"):
        StrategySpec(megatron_ddp=True, zero="fsdp")
