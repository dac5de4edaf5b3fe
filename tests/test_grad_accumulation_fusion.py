"""Megatron-Core with gradient-accumulation fusion off (strategy grad_accumulation_fusion false): every linear's
16-bit weight gradient is added into main_grad by DDP's backward hook, ``param.main_grad.add_(param.grad.data)``
(NVIDIA/Megatron-LM@847781764f distributed_data_parallel.py ``_make_backward_post_hook``), once per parameter per
micro-batch: read the 2-byte gradient and the g-byte buffer, write the buffer. Values worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from grid_helpers import HBM, grid8, one

from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, untied 32,000-token embedding, no biases
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
NORMS = 4 * 2 * 1024 + 1024  # two norms a layer and the final norm: held whole by every TP rank
P = 4 * (1024 * 3072 + 1024 * 1024 + 2 * 1024 * 4096) + NORMS + 2 * 32_000 * 1024  # 116,655,104
EMB = 32_000 * 1024  # the word embedding, whose add embedding_grad_time prices at pp 1


def grid(job, **strategy):  # type: ignore[no-untyped-def]
    return grid_from_strategy(StrategySpec(**strategy), TrainingSpec(global_batch=16, micro_batch=2), 8, job)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


@pytest.mark.parametrize(("grad_bytes", "per_param"), [(4, 2 + 4 + 4), (2, 2 + 2 + 2)])
def test_unfused_add_by_hand(h100, grad_bytes, per_param) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=grad_bytes))
    assert job.params == P
    off = dict(zero="1", megatron_ddp=True, grad_accumulation_fusion=False)
    # pp 1: every parameter but the word embedding (its own dense gradient and add are embedding_grad_time's)
    assert one(layer_compute.grad_accumulation_time(job, grid8(job, **off))) == pytest.approx(
        (P - EMB) * per_param / HBM)
    # pp 2: the stages' mean P / 2; the embedding's add is now the first stage's, counted in the mean
    assert one(layer_compute.grad_accumulation_time(job, grid(job, pp=2, **off))) == pytest.approx(
        P / 2 * per_param / HBM)
    # tp 2: the sharded weights halve, the norms stay whole, half the vocabulary rows
    tp2 = (P - NORMS) / 2 + NORMS - EMB / 2
    assert one(layer_compute.grad_accumulation_time(job, grid(job, tp=2, **off))) == pytest.approx(
        tp2 * per_param / HBM)


def test_fused_or_not_megatron_prices_nothing(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    assert one(layer_compute.grad_accumulation_time(job, grid8(job, zero="1", megatron_ddp=True))) == 0.0
    assert one(layer_compute.grad_accumulation_time(job, grid8(job, zero="1", grad_accumulation_fusion=False))) == 0.0


def test_the_add_is_in_every_micro_batch_backward(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, grid8(job, zero="1", megatron_ddp=True), layers)
    b = layer_compute._compute_per_microbatch(
        job, grid8(job, zero="1", megatron_ddp=True, grad_accumulation_fusion=False), layers)
    assert one(b["forward"] - a["forward"]) == 0.0
    assert one(b["backward"] - a["backward"]) == pytest.approx((P - EMB) * 10 / HBM)


def test_megatron_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --use-distributed-optimizer --no-gradient-accumulation-fusion\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy["grad_accumulation_fusion"] is False
    assert not any("--no-gradient-accumulation-fusion" in u for u in sf.unused)


def test_unpriced_switch_warns(cli) -> None:  # type: ignore[no-untyped-def]
    """Without Megatron-Core's DDP there is no hook to add into main_grad: the switch prices nothing and says so."""
    base = ("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--zero", "1", "--json")
    r = cli(*base, "--set", "strategy.grad_accumulation_fusion=false")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert any(w.startswith("strategy.grad_accumulation_fusion = false is not priced") for w in got["warnings"]), \
        got["warnings"]
    assert got["step_time_s"] == json.loads(cli(*base).out)["step_time_s"]
