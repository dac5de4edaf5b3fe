"""Megatron-Core DDP's gradient NaN check (strategy check_for_nan_in_grad, dp_comm.nan_check_time,
docs/model.md#nan-check), worked out by hand on one model:

* the norms read every bucket's whole gradient buffer once: P x g bytes over the H100's HBM bandwidth x 0.88;
* each bucket costs two host reads (validate_result on torch.isnan, then torch.isinf: Megatron-LM core_v0.13.1
  param_and_grad_buffer.py L167-191), each the 6 us device-to-host round trip plus one 5 us launch before the GPU
  runs again (engine/host_floor.py SYNC_ROUND_TRIP_US and CALL_COST_US 'launch', low; constants from their own
  sources, not from a training run);
* the buckets are counted by running Megatron-Core's fill step by step here (parameters in reverse order, a bucket
  closed once it holds >= 40,000,000 elements: ``max(4e7, 1e6 dp)`` at dp 8), not by the engine's bucket_count;
* Megatron-LM's launch reader turns it on by default and off with --no-check-for-nan-in-loss-and-grad, and off under
  --fp16 with dynamic loss scaling (arguments.py validate_args).
"""

from __future__ import annotations

import pytest
from grid_helpers import HBM, grid8, one

from scalemodel.engine import dp_comm, planner
from scalemodel.engine.job import build_job
from scalemodel.engine.step import evaluate
from scalemodel.specs import TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, untied 32,000-token embedding, no biases
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
H = 1024
LAYER = [H, 3 * H * H, H * H, H, 4 * H * H, 4 * H * H]  # norm, QKV, proj, norm, FC1, FC2 (GPTModel build order)
PARAMS = [32_000 * H] + LAYER * 4 + [H, 32_000 * H]  # embedding, the 4 layers, final norm, output layer
P = sum(PARAMS)  # 116,655,104
ROUND_TRIP_US, LAUNCH_US, READS = 6.0, 5.0, 2


def megatron_buckets(params: list[int], bucket: float) -> int:
    """Megatron-Core's fill: whole parameters in reverse order, the bucket closed once it holds >= ``bucket``
    elements (param_and_grad_buffer.py _ParamAndGradBuffer.__init__), the last one closed at the end."""
    n, held = 0, 0
    for p in reversed(params):
        held += p
        if held >= bucket:
            n, held = n + 1, 0
    return n + (held > 0)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


@pytest.mark.parametrize("grad_bytes", [4, 2])
def test_nan_check_by_hand(h100, grad_bytes) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=grad_bytes))
    assert job.params == P
    n_b = megatron_buckets(PARAMS, 40e6)
    # output layer + final norm + layer 3's FC2, FC1 (41.2 M); the rest of 3, 2, 1 and 0's tail; 0's head
    assert n_b == 3
    by_hand = P * grad_bytes / HBM + n_b * READS * (ROUND_TRIP_US + LAUNCH_US) * 1e-6
    on = grid8(job, zero="1", megatron_ddp=True, check_for_nan_in_grad=True)
    assert one(dp_comm.nan_check_time(job, on)) == pytest.approx(by_hand)
    # counted with the optimizer step (beside the gradient buffer's reset), once a step
    off = grid8(job, zero="1", megatron_ddp=True)
    assert one(dp_comm._optimizer_time(job, on)) - one(dp_comm._optimizer_time(job, off)) == pytest.approx(by_hand)
    # and the step grows by it: nothing hides it (the compute stream and the host both wait)
    assert one(evaluate(job, on).step_time) - one(evaluate(job, off).step_time) == pytest.approx(by_hand, rel=1e-6)


def test_one_bucket_without_overlap(h100) -> None:  # type: ignore[no-untyped-def]
    """Without --overlap-grad-reduce Megatron-Core builds one bucket per buffer (bucket_size None), so one pair of
    host reads after the whole backward."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    g = grid8(job, zero="1", megatron_ddp=True, overlap=False, check_for_nan_in_grad=True)
    assert one(dp_comm.nan_check_time(job, g)) == pytest.approx(
        P * 4 / HBM + 1 * READS * (ROUND_TRIP_US + LAUNCH_US) * 1e-6)


def test_given_bucket_size(h100) -> None:  # type: ignore[no-untyped-def]
    """--ddp-bucket-size 10,000,000 elements (bucket_size 4e7 bytes at fp32 gradients). Megatron-Core's fill gives 6
    buckets (the output layer and the embedding, 32.8 M each, close their own, each layer of 12.6 M one more); the
    engine counts them by bucket_count's documented bound, big + ceil(S / e) = 2 + ceil(51.1 M / 10 M) = 8 (the
    small tensors' buckets counted as if none joined a big tensor's: tests/test_bucket_count.py), the same count its
    data-parallel sync pays latencies for. The test holds the engine to that bound by hand and the bound above the
    fill: the two extra buckets are 2 x 2 x 11 us = 44 us of host reads."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    g = grid8(job, zero="1", megatron_ddp=True, bucket_size=4e7, check_for_nan_in_grad=True)
    fill = megatron_buckets(PARAMS, 1e7)
    assert fill == 6
    big = 2
    bound = big + -(-(P - big * 32_000 * H) // 10_000_000)
    assert bound == 8 >= fill
    assert one(dp_comm.nan_check_time(job, g)) == pytest.approx(
        P * 4 / HBM + bound * READS * (ROUND_TRIP_US + LAUNCH_US) * 1e-6)


def test_only_under_megatron_ddp(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    assert one(dp_comm.nan_check_time(job, grid8(job, zero="1", check_for_nan_in_grad=True))) == 0.0
    assert one(dp_comm.nan_check_time(job, grid8(job, zero="1", megatron_ddp=True))) == 0.0


def test_pinned_by_the_planner() -> None:
    assert "check_for_nan_in_grad" in planner.PIN_FIXED


def test_megatron_launch_reader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """arguments.py: --no-check-for-nan-in-loss-and-grad is store_false (default on), handed to the DDP config by
    get_model; --fp16 without --loss-scale turns it off (dynamic loss scaling)."""
    f = tmp_path / "launch.sh"
    f.write_text("--tensor-model-parallel-size 2 --bf16 --use-distributed-optimizer\n")
    read = read_strategy_file(str(f))
    assert read.strategy.get("check_for_nan_in_grad") is True
    assert read.is_default("strategy", "check_for_nan_in_grad")
    f.write_text("--tensor-model-parallel-size 2 --bf16 --no-check-for-nan-in-loss-and-grad\n")
    assert read_strategy_file(str(f)).strategy.get("check_for_nan_in_grad") is False
    f.write_text("--tensor-model-parallel-size 2 --fp16\n")
    assert "check_for_nan_in_grad" not in read_strategy_file(str(f)).strategy
    f.write_text("--tensor-model-parallel-size 2 --fp16 --loss-scale 1024\n")
    assert read_strategy_file(str(f)).strategy.get("check_for_nan_in_grad") is True
