"""Pipeline rank 0's word-embedding gradient at pp > 1 under Megatron-Core's DDP
(layer_compute.first_stage_embedding_grad_time, docs/model.md#first-stage-embedding-grad).

Rank 0 holds the word embedding (Megatron-Core builds LanguageModelEmbedding where pre_process) and runs F.embedding's
backward every micro-batch: a zero-filled dense V/tp x h gradient in the weight's 16-bit dtype (write e), then the DDP
hook's add into main_grad (read g + e, write g). Bytes worked out here by hand: V h / tp x (2 e + 2 g) with
gradient-accumulation fusion on; with it off the add is grad_accumulation_time's (over the stages' mean), so e.

Pipeline: a 1F1B step at pp 2 over m micro-batches, rank 0 running F(0), F(1), B(0), F(2), B(1), .., F(m-1), B(m-2),
B(m-1) and rank 1 F(0), B(0), F(1), B(1), ..: with the last rank (the logits) the busiest it is F_0 + m W_1 + B_0
(rank 0's first forward, the last rank's m micro-batches, rank 0's last backward), so rank 0's extra backward x adds x
once. With rank 0 the busiest, its last backward B(m-1) waits for rank 1's F_1 + B_1 of micro-batch m-1, which starts
when F(m-1) ends and runs beside B(m-2): m F_0 + (m - 2) B_0 + max(B_0, W_1) + B_0, which is m F_0 + (m - 1) B_0 + W_1
where W_1 > B_0: x adds m - 1 times."""

from __future__ import annotations

import numpy as np
import pytest
from grid_helpers import HBM, one

from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, untied 32,000-token embedding
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
EMB = 32_000 * 1024  # the word embedding: 32,768,000 elements


def _job(grad_bytes: int = 4, tied: bool = False, layers: int = 4):  # type: ignore[no-untyped-def]
    wl = TINY.model_copy(update={"tied_embeddings": tied, "layers": layers})
    return build_job(load_cluster("dgx-h100"), wl, TrainingSpec(grad_bytes_per_param=grad_bytes))


def _grid(job, micro_batches: int = 8, **strategy):  # type: ignore[no-untyped-def]
    """One strategy on 8 GPUs (dp derived), micro-batches of 2."""
    training = TrainingSpec(global_batch=2 * micro_batches * 8 // (strategy.get("pp", 1) * strategy.get("tp", 1)),
                            micro_batch=2)
    return grid_from_strategy(StrategySpec(**strategy), training, 8, job)


@pytest.mark.parametrize(("grad_bytes", "fusion", "tied", "per_element"), [
    (4, True, False, 2 + (4 + 2 + 4)),  # the dense bf16 gradient (2), the hook's add into fp32 main_grad (4 + 2 + 4)
    (2, True, False, 2 + (2 + 2 + 2)),  # a bf16 main_grad
    (4, True, True, 2 + (4 + 2 + 4)),  # tied: the output layer's use is the last stage's copy, not rank 0's
    (4, False, False, 2)])  # fusion off: the add is grad_accumulation_time's; the dense gradient alone
def test_rank0_bytes_by_hand(grad_bytes: int, fusion: bool, tied: bool, per_element: int) -> None:
    job = _job(grad_bytes, tied)
    g = _grid(job, pp=2, zero="1", megatron_ddp=True, grad_accumulation_fusion=fusion)
    assert one(layer_compute.first_stage_embedding_grad_time(job, g)) == pytest.approx(EMB * per_element / HBM)
    # tp 2 holds half the vocabulary rows
    g2 = _grid(job, pp=2, tp=2, zero="1", megatron_ddp=True, grad_accumulation_fusion=fusion)
    assert one(layer_compute.first_stage_embedding_grad_time(job, g2)) == pytest.approx(EMB / 2 * per_element / HBM)


def test_zero_where_it_does_not_apply() -> None:
    """pp 1 (embedding_grad_time prices the one stage's), or a data-parallel wrapper other than Megatron-Core's DDP
    (ZeRO 3 with megatron_ddp pinned by a plan runs another wrapper)."""
    job = _job()
    assert one(layer_compute.first_stage_embedding_grad_time(job, _grid(job, pp=1, zero="1", megatron_ddp=True))) == 0
    assert one(layer_compute.first_stage_embedding_grad_time(job, _grid(job, pp=2, zero="1"))) == 0.0


def test_only_rank0_carries_it() -> None:
    """In one micro-batch at pp 2: the stage with the embedding gains exactly 12 bytes an element in its backward,
    a stage without it nothing; the forward is unchanged."""
    job = _job()
    g = _grid(job, pp=2, zero="1", megatron_ddp=True)
    layers = np.asarray([2.0])
    for logits in (False, True):
        a = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=logits)
        b = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=logits, embedding_on_stage=True)
        assert one(b["forward"] - a["forward"]) == 0.0
        assert one(b["backward"] - a["backward"]) == pytest.approx(EMB * 12 / HBM, abs=1e-15)


def _pipelined(job, g) -> float:  # type: ignore[no-untyped-def]
    """(m + bubble) t_mb: the pipelined part of evaluate's step."""
    r = evaluate(job, g)
    return one((r.microbatches + r.extras["bubble_microbatches"]) * r.extras["microbatch_time"])


@pytest.mark.parametrize(("first", "times"), [
    (None, 1),  # 4 + 4 layers: the last rank (logits) the busiest, F_0 + m W_1 + B_0
    (7, 7)])  # 7 + 1 layers: rank 0 the busiest, W_1 > B_0: m F_0 + (m - 1) B_0 + W_1 (m = 8)
def test_1f1b_step_by_hand(monkeypatch: pytest.MonkeyPatch, first: int | None, times: int) -> None:
    job = _job(layers=8)
    g = _grid(job, pp=2, zero="1", megatron_ddp=True, schedule="1f1b", first_stage_layers=first)
    assert one(g.dp) == 4 and one(evaluate(job, g).microbatches) == 8
    n0 = np.asarray([7.0 if first else 4.0])
    w0 = layer_compute._compute_per_microbatch(job, g, n0, logits_on_stage=False, embedding_on_stage=True)
    w1 = layer_compute._compute_per_microbatch(job, g, 8.0 - n0)
    if first:  # the case's premise: rank 0 the busiest, the last rank's micro-batch longer than rank 0's backward
        assert one(w0["total"]) > one(w1["total"]) > one(w0["backward"])
    else:
        assert one(w1["total"]) > one(w0["total"])
    with_grad = _pipelined(job, g)
    monkeypatch.setattr(layer_compute, "first_stage_embedding_grad_time", lambda job, g: np.zeros(1))
    without = _pipelined(job, g)
    assert with_grad - without == pytest.approx(times * EMB * 12 / HBM, rel=1e-6)
