"""nanotron's ZeRO-1 gather copies (``dp_comm.nanotron_gather_loop_time``, docs/model.md#nanotron-gather-loop): around
the one all-gather of the updated bf16 shards, ``all_gather_coalesced`` flattens the input and each rank's output
slices (a cat each) and ProcessGroupNCCL copies its flat output into the list (read + write the rank's parameters
twice, + the input's 2/dp), then ``update_output`` issues one eager ``copy_`` per (dp rank, parameter)
(huggingface/nanotron@c2528430 src/nanotron/distributed.py lines 153-220, optim/zero.py lines 217-251); all but the
launch queue's 1024 are issued after the gather, at 8.3 us of host time each (the low "op" cost,
hardware/measurements/host_overhead.yaml), and all of them move 2 bytes a parameter element. Expected values are
counted here from the Llama module list (per decoder layer: input_layernorm, qkv_proj, o_proj,
post_attention_layernorm, gate_up_proj, down_proj; models/llama.py), not read back from the function."""

from __future__ import annotations

import pytest
from grid_helpers import HBM, evaluated, first

from scalemodel.engine.dp_comm import nanotron_gather_loop_time
from scalemodel.specs import TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

OP_S = 8.3e-6
QUEUE = 1024
PER_LAYER = 6  # two RMSNorm weights, fused qkv, o, fused gate_up, down: no biases

# the benchmark grid's 3.57B (h 3072, 28 layers, 24 heads, f 8192, vocab 131072, tied: intermediate < 10,000)
LLAMA_3B = TransformerWorkload(name="nanotron-3b", layers=28, hidden=3072, heads=24, ffn_hidden=8192, vocab=131072,
                               seq_len=4096, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False)
H, F, V = 3072, 8192, 131072
LAYER = 3 * H * H + H * H + 2 * F * H + F * H  # qkv, o, gate_up, down: split over tp; the two norms whole
E = 2.0  # bf16 parameters

FP32_ACC = TrainingSpec(global_batch=256, micro_batch=2, precision="bf16", grad_bytes_per_param=4.0)


@pytest.fixture(scope="module")
def p5():  # type: ignore[no-untyped-def]
    return load_cluster("aws-p5")


def test_3b_at_dp128_by_hand(p5) -> None:  # type: ignore[no-untyped-def]
    """tp 4, pp 1, dp 128 (64 nodes): the rank holds 28 x 6 layer tensors + the tied embedding + the final norm =
    170; 128 x 170 = 21,760 copies, 20,736 after the queue's 1024, 0.1721 s."""
    job, g, res = evaluated(p5, LLAMA_3B, FP32_ACC, 512, tp=4, pp=1, zero="1", nanotron_trainer=True)
    assert job.memory_bandwidth * job.memory_efficiency == pytest.approx(HBM)
    n_t = 28 * PER_LAYER + 2
    assert n_t == 170
    host = (128 * n_t - QUEUE) * OP_S
    assert host == pytest.approx(0.1721088)
    p_d = 28 * (LAYER / 4 + 2 * H) + V * H / 4 + H  # the vocab-parallel tied embedding, the final norm
    serial = (4 + 2 / 128) * p_d * E / HBM  # the two flattens and the copy-out: 2.4 ms
    loop_bytes = 2 * p_d * E / HBM  # 1.2 ms, under the host's 172 ms
    expected = serial + max(host, loop_bytes)
    assert first(nanotron_gather_loop_time(job, g)) == pytest.approx(expected, rel=1e-9)
    # it is part of the optimizer step, which the step adds serially
    assert first(res.breakdown["optimizer"]) > expected


def test_pipeline_rank_counts_its_own_tensors(p5) -> None:  # type: ignore[no-untyped-def]
    """pp 2 at tp 1, dp 32: nanotron's split puts 16 layers and the embedding on rank 0 (97 tensors) and 12 layers,
    the final norm and the tied lm_head's copy on rank 1 (74 tensors)."""
    training = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, g, _ = evaluated(p5, LLAMA_3B, training, 64, tp=1, pp=2, zero="1", nanotron_trainer=True)
    r0 = first(nanotron_gather_loop_time(job, g, layers=16.0, rank=0.0))
    r1 = first(nanotron_gather_loop_time(job, g, layers=12.0, rank=1.0))
    p0 = 16 * (LAYER + 2 * H) + V * H  # the embedding
    p1 = 12 * (LAYER + 2 * H) + H + V * H  # the final norm and the tied lm_head's copy
    host0 = (32 * (16 * PER_LAYER + 1) - QUEUE) * OP_S  # 2080 copies past the queue: 17.3 ms
    host1 = (32 * (12 * PER_LAYER + 2) - QUEUE) * OP_S  # 1344: 11.2 ms
    assert r0 == pytest.approx((4 + 2 / 32) * p0 * E / HBM + max(host0, 2 * p0 * E / HBM), rel=1e-9)
    assert r1 == pytest.approx((4 + 2 / 32) * p1 * E / HBM + max(host1, 2 * p1 * E / HBM), rel=1e-9)


def test_no_loop_below_the_queue_or_off_zero1(p5) -> None:  # type: ignore[no-untyped-def]
    """dp 8 x 97 = 776 copies fit the queue: only the copies' bytes, (4 + 2/8 + 2) bytes a parameter element; ZeRO 0,
    dp 1 and other trainers run none of it."""
    training = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, g, _ = evaluated(p5, LLAMA_3B, training, 16, tp=1, pp=2, zero="1", nanotron_trainer=True)
    p0 = 16 * (LAYER + 2 * H) + V * H
    got = first(nanotron_gather_loop_time(job, g, layers=16.0, rank=0.0))
    assert got == pytest.approx((4 + 2 / 8 + 2) * p0 * E / HBM, rel=1e-9)
    for kw in ({"zero": "0", "nanotron_trainer": True}, {"zero": "1"}):
        job, g, _ = evaluated(p5, LLAMA_3B, FP32_ACC, 512, tp=4, pp=1, **kw)
        assert first(nanotron_gather_loop_time(job, g)) == 0.0
    job, g, _ = evaluated(p5, LLAMA_3B, FP32_ACC, 4, tp=4, pp=1, zero="1", nanotron_trainer=True)
    assert first(nanotron_gather_loop_time(job, g)) == 0.0


def test_16bit_gradients_run_the_same_loop(p5) -> None:  # type: ignore[no-untyped-def]
    """Without fp32 accumulation the optimizer is the same ZeroDistributedOptimizer (DDP reduces instead): the
    same copies."""
    bf16 = TrainingSpec(global_batch=256, micro_batch=2, precision="bf16", grad_bytes_per_param=2.0)
    job, g, _ = evaluated(p5, LLAMA_3B, bf16, 512, tp=4, pp=1, zero="1", nanotron_trainer=True)
    _, g32, _ = evaluated(p5, LLAMA_3B, FP32_ACC, 512, tp=4, pp=1, zero="1", nanotron_trainer=True)
    host = (128 * 170 - QUEUE) * OP_S
    got = first(nanotron_gather_loop_time(job, g))
    assert got == pytest.approx(first(nanotron_gather_loop_time(job, g32)), rel=1e-12)
    assert host < got < host * 1.02  # the copies' bytes: 2.4 ms in series
