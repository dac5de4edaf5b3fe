"""Megatron-Core DDP's gradient NaN check counted per model chunk (dp_comm.nan_check_buckets / nan_check_time,
docs/model.md#nan-check), worked out by hand on one model at pp 2:

* each model chunk has its own DistributedDataParallel with its own buffers; its ``bucket_size`` is None (one bucket
  per buffer) where ``pp_rank > 0`` or ``disable_bucketing`` (chunk k > 0): NVIDIA/Megatron-LM core_v0.13.1
  distributed_data_parallel.py L177-189 and training.py L1139, d98e8a64dd L170 and ``per_chunk_bucket_sizes``
  L2504-2514. Only rank 0's first chunk is bucketed;
* each bucket costs two host reads (isnan, isinf), each the 6 us round trip + one 5 us launch (engine/host_floor.py
  SYNC_ROUND_TRIP_US, CALL_COST_US 'launch' low; constants from their own sources, not from a training run), and the
  norms read the rank's whole gradient buffer once (P x 4 bytes over the H100's HBM bandwidth x 0.88);
* rank 0's bucketed chunk is counted by bucket_count's documented bound big + ceil(S / e) (computed here from the
  tensor list, not by the engine), with Megatron-Core's own fill beside it (the bound is at or above it);
* a tied embedding at pp > 1 under the distributed optimizer is a ``shared_embedding`` parameter that closes a
  bucket of its own (param_and_grad_buffer.py L575-608): one more bucket on the last rank;
* the loss function's check (strategy check_for_nan_in_loss, pretrain_gpt.py loss_func at core_v0.13.1 L248-264):
  two reads of the same price a micro-batch, m a step, in the host part.
"""

from __future__ import annotations

import math

import pytest
from grid_helpers import HBM, one

from scalemodel.engine import dp_comm, planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.workload import TransformerWorkload

# 8 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, 32,000-token embedding, no biases
H, V = 1024, 32_000
LAYER = [H, 3 * H * H, H * H, H, 4 * H * H, 4 * H * H]  # norm, QKV, proj, norm, FC1, FC2 (GPTModel build order)
EMB = V * H  # 32,768,000: under the 40 M-element bucket, so a small tensor for the bound
RANK0 = [EMB] + LAYER * 4  # pp 2: the embedding and layers 0-3
RANK1 = LAYER * 4 + [H, V * H]  # layers 4-7, the final norm, the output layer (tied: its own copy at pp > 1)
CHUNK0 = [EMB] + LAYER * 2  # interleaved:2: rank 0's first chunk, the embedding and 2 layers
ROUND_TRIP_US, LAUNCH_US, READS = 6.0, 5.0, 2
BUCKET = 40_000_000  # max(4e7, 1e6 x dp 8), elements


def fill(params: list[int], bucket: float) -> int:
    """Megatron-Core's fill: whole parameters in reverse order, a bucket closed once it holds >= ``bucket``."""
    n, held = 0, 0
    for p in reversed(params):
        held += p
        if held >= bucket:
            n, held = n + 1, 0
    return n + (held > 0)


def bound(params: list[int], bucket: float) -> int:
    """bucket_count's bound: tensors of >= e elements one bucket each, the rest ceil(S / e), at most the payload's."""
    big = sum(p >= bucket for p in params)
    small = sum(p for p in params if p < bucket)
    return max(min(big + math.ceil(small / bucket), math.ceil(sum(params) / bucket)), 1)


def read_s(buckets: int) -> float:
    return buckets * READS * (ROUND_TRIP_US + LAUNCH_US) * 1e-6


def model(tied: bool) -> TransformerWorkload:
    return TransformerWorkload(name="tiny8", layers=8, hidden=H, heads=8, ffn_hidden=4 * H, vocab=V, seq_len=2048,
                               gated_mlp=False, biases=False, tied_embeddings=tied, dropout=False)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def grid(job, **strategy):  # type: ignore[no-untyped-def]
    """dp 8 x pp 2 on 16 GPUs, 2 micro-batches (>= pp, as the interleaved schedule needs)."""
    st = StrategySpec(dp=8, pp=2, megatron_ddp=True, check_for_nan_in_grad=True, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=32, micro_batch=2, precision="bf16",
                                               grad_bytes_per_param=4), 16, job)


def nan_s(job, g, layers: float, rank: int) -> float:  # type: ignore[no-untyped-def]
    return one(dp_comm.nan_check_time(job, g, layers, rank))


def test_interleaved_last_rank_one_bucket_a_chunk(h100) -> None:  # type: ignore[no-untyped-def]
    """pp 2, interleaved:2: the last rank's two chunks, bucket_size None each: 2 buckets, 4 reads (the stage's
    83.1 M elements in 40 M buckets would be 3)."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    g = grid(job, zero="1", schedule="interleaved:2")
    assert nan_s(job, g, 4, 1) == pytest.approx(sum(RANK1) * 4 / HBM + read_s(2))
    assert one(dp_comm.nan_check_buckets(job, g, 4, 1)) == 2


def test_interleaved_first_rank(h100) -> None:  # type: ignore[no-untyped-def]
    """Rank 0: its first chunk (embedding + 2 layers, 57.9 M elements) bucketed at 40 M, its second chunk one
    bucket. Megatron-Core's fill closes one bucket (the embedding tops it past 40 M); the bound, all tensors below
    40 M, is ceil(57.9 / 40) = 2; + 1."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    g = grid(job, zero="1", schedule="interleaved:2")
    assert fill(CHUNK0, BUCKET) == 1
    assert bound(CHUNK0, BUCKET) == 2
    assert nan_s(job, g, 4, 0) == pytest.approx(sum(RANK0) * 4 / HBM + read_s(2 + 1))


def test_one_chunk_at_pp2(h100) -> None:  # type: ignore[no-untyped-def]
    """1F1B, one chunk a rank: rank 0 bucketed over its whole stage (ceil(83.1 / 40) = 3), the last rank one
    bucket (pp_rank > 0)."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    g = grid(job, zero="1")
    assert bound(RANK0, BUCKET) == 3 >= fill(RANK0, BUCKET)
    assert nan_s(job, g, 4, 0) == pytest.approx(sum(RANK0) * 4 / HBM + read_s(3))
    assert nan_s(job, g, 4, 1) == pytest.approx(sum(RANK1) * 4 / HBM + read_s(1))


def test_no_overlap_one_bucket_per_chunk(h100) -> None:  # type: ignore[no-untyped-def]
    """Without --overlap-grad-reduce every chunk's bucket_size is None: v buckets on every rank, rank 0 included
    (the dgxc2504 405B 30-layer proxies, dp 1 at VP 8: 8 where 1 was priced)."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    g = grid(job, zero="1", schedule="interleaved:2", overlap=False)
    assert nan_s(job, g, 4, 0) == pytest.approx(sum(RANK0) * 4 / HBM + read_s(2))
    assert nan_s(job, g, 4, 1) == pytest.approx(sum(RANK1) * 4 / HBM + read_s(2))


def test_tied_shared_embedding_bucket(h100) -> None:  # type: ignore[no-untyped-def]
    """Tied at pp 2: the last rank's output weight is a shared_embedding parameter; with the distributed optimizer
    (zero 1) it closes a bucket of its own (2 where 1), without it (zero 0) not."""
    job = build_job(h100, model(True), TrainingSpec(grad_bytes_per_param=4))
    assert nan_s(job, grid(job, zero="1"), 4, 1) == pytest.approx(sum(RANK1) * 4 / HBM + read_s(2))
    assert nan_s(job, grid(job, zero="0"), 4, 1) == pytest.approx(sum(RANK1) * 4 / HBM + read_s(1))
    # rank 0, no overlap: its one-bucket chunk splits at the shared embedding too
    assert nan_s(job, grid(job, zero="1", overlap=False), 4, 0) == pytest.approx(
        sum(RANK0) * 4 / HBM + read_s(2))


def test_in_the_optimizer_part(h100) -> None:  # type: ignore[no-untyped-def]
    """Counted with the optimizer step of the priced rank (dp_comm._optimizer_time), once a step."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    on = grid(job, zero="1", schedule="interleaved:2")
    off = grid_from_strategy(StrategySpec(dp=8, pp=2, megatron_ddp=True, zero="1", schedule="interleaved:2"),
                             TrainingSpec(global_batch=32, micro_batch=2, precision="bf16", grad_bytes_per_param=4),
                             16, job)
    diff = one(dp_comm._optimizer_time(job, on, "bsp", 4, 1)) - one(dp_comm._optimizer_time(job, off, "bsp", 4, 1))
    assert diff == pytest.approx(sum(RANK1) * 4 / HBM + read_s(2))


# ---- the loss function's per-micro-batch NaN check (strategy check_for_nan_in_loss)

def test_loss_check_by_hand(h100) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM pretrain_gpt.py loss_func (core_v0.13.1 L248-264): validate_result on the loss with torch.isnan,
    then torch.isinf, each a blocking read: 2 x (6 + 5) us a micro-batch on the last stage, m = 32 / (8 x 2) = 2
    micro-batches a step, in the host part; the step grows by exactly that (nothing hides a drained GPU)."""
    job = build_job(h100, model(False), TrainingSpec(grad_bytes_per_param=4))
    m = 32 / (8 * 2)
    by_hand = m * READS * (ROUND_TRIP_US + LAUNCH_US) * 1e-6
    assert by_hand == pytest.approx(44e-6)
    st = dict(dp=8, pp=2, megatron_ddp=True, zero="1", schedule="interleaved:2")
    tr = TrainingSpec(global_batch=32, micro_batch=2, precision="bf16", grad_bytes_per_param=4)
    on = grid_from_strategy(StrategySpec(check_for_nan_in_loss=True, **st), tr, 16, job)
    off = grid_from_strategy(StrategySpec(**st), tr, 16, job)
    assert one(dp_comm.nan_loss_check_time(on, m)) == pytest.approx(by_hand)
    assert one(dp_comm.nan_loss_check_time(off, m)) == 0.0
    a, b = evaluate(job, on), evaluate(job, off)
    assert one(a.step_time) - one(b.step_time) == pytest.approx(by_hand, rel=1e-6)
    assert one(a.breakdown["host"]) - one(b.breakdown["host"]) == pytest.approx(by_hand, rel=1e-6)


def test_loss_check_reader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One Megatron-LM argument drives both checks: on by default, off with --no-check-for-nan-in-loss-and-grad,
    off under --fp16 with dynamic loss scaling (arguments.py L1196-1203 at d98e8a64dd)."""
    f = tmp_path / "launch.sh"
    f.write_text("--tensor-model-parallel-size 2 --bf16\n")
    read = read_strategy_file(str(f))
    assert read.strategy.get("check_for_nan_in_loss") is True
    assert read.is_default("strategy", "check_for_nan_in_loss")
    f.write_text("--tensor-model-parallel-size 2 --bf16 --no-check-for-nan-in-loss-and-grad\n")
    assert read_strategy_file(str(f)).strategy.get("check_for_nan_in_loss") is False
    f.write_text("--tensor-model-parallel-size 2 --fp16\n")
    assert "check_for_nan_in_loss" not in read_strategy_file(str(f)).strategy


def test_loss_check_pinned_by_the_planner() -> None:
    assert "check_for_nan_in_loss" in planner.PIN_FIXED
