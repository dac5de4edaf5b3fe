"""The training-step model: each communication term against a hand composition of the formulas,
breakdown sums, monotonicity, the pure-DP limit and infeasibility reporting."""

from __future__ import annotations

import json
from dataclasses import replace

import msgspec
import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import compute
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, build_network, grid_from_arrays, grid_from_strategy
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.predict import predict
from scalemodel.engine.step import _stage_time, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


@pytest.fixture(scope="module")
def a100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-a100")


@pytest.fixture(scope="module")
def gpt():  # type: ignore[no-untyped-def]
    return load_workload("gpt-7.5b")


def job_for(cluster, workload, **training):  # type: ignore[no-untyped-def]
    return build_job(cluster, workload, TrainingSpec(**training))


def one(job, training, gpus, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, TrainingSpec(**training), gpus, job)
    return g, evaluate(job, g, sync=st.sync)


def val(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


def head_gemm(job, b: int, s: int, tp: int) -> float:  # type: ignore[no-untyped-def]
    """The output GEMM's forward seconds (T x V/t x h), the window of the output layer's backward TP collectives
    (docs/model.md#output-tp-comm)."""
    return val(compute.logits_compute_time(job.shape, micro_batch=b, seq_len=s, peak_flops=job.peak_flops,
                                           memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                           gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                           tp=tp).forward_gemm)


def loss_allreduces(job, b: int, s: int, tp: int) -> float:  # type: ignore[no-untyped-def]
    """The vocab-parallel cross-entropy's 3 all-reduces of b s fp32 values (docs/model.md#output-tp-comm)."""
    return 3.0 * val(coll.collective_time("allreduce", b * s * 4.0, tp, job.network, stride=1))


#: DDP buckets of gpt-7.5b's gradients at tp 1 in 12.5 M-element buckets (25 MB of bf16): no framework splits a tensor
#: (dp_comm.bucket_count), and its 36 x 4 weight matrices (QKV 4096 x 12288, proj 4096 x 4096, fc1, fc2) and the
#: 51200 x 4096 embedding each exceed the bucket and close one; its biases and LayerNorms, 36 x 53,248 + 8,192 =
#: 1,925,120 elements, make ceil(1,925,120 / 12.5e6) = 1 more: 146, where ceil(bytes / 25 MB) gave 597
GPT_7_5B_DDP_BUCKETS = 36 * 4 + 1 + 1


def bucketed_allreduce(nbytes: float, ranks: int, network, n: int) -> float:  # type: ignore[no-untyped-def]
    """DDP-style: n ring all-reduces of equal buckets."""
    return n * val(coll.collective_time("allreduce", nbytes / n, ranks, network, algorithm="ring", stride=1))


def test_breakdown_sums_exactly_over_a_grid(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    job = job_for(a100, gpt, global_batch=512)
    tp = np.array([1, 2, 4, 8]).reshape(4, 1, 1, 1)
    pp = np.array([1, 2, 4]).reshape(1, 3, 1, 1)
    rec = np.array([0, 1, 2]).reshape(1, 1, 3, 1)
    zero = np.array([0, 1, 3]).reshape(1, 1, 1, 3)
    g = grid_from_arrays(gpus=64, dp=64 // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=512,
                         recompute=rec, zero=zero)
    res = evaluate(job, g)
    total = sum(np.asarray(res.breakdown[k]) for k in BREAKDOWN_KEYS)
    np.testing.assert_allclose(total, res.step_time, rtol=1e-12)
    assert res.step_time.shape == g.shape
    for k in BREAKDOWN_KEYS:
        assert np.all(np.asarray(res.breakdown[k]) >= 0), k
    assert np.all(np.isfinite(res.step_time))


def test_pure_data_parallel_limit(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """TP = PP = 1: no TP/PP terms, no bubble, and the DP term is the all-reduce of all gradients."""
    job = job_for(a100, gpt, global_batch=64, micro_batch=1)
    g, res = one(job, dict(global_batch=64, micro_batch=1), 64, algorithm="ring", overlap=False)
    for k in ("tp_comm", "pp_comm", "cp_comm", "ep_comm", "bubble"):
        assert val(res.breakdown[k]) == 0.0
    grad_bytes = job.params * 2.0  # bf16 gradients
    expected = bucketed_allreduce(grad_bytes, 64, job.network, GPT_7_5B_DDP_BUCKETS)
    assert val(res.breakdown["dp_comm"]) == pytest.approx(expected, rel=1e-9)
    # one big bucket: a single all-reduce of every gradient
    _, whole = one(job, dict(global_batch=64, micro_batch=1), 64, algorithm="ring", overlap=False, bucket_size=1e12)
    single = val(coll.collective_time("allreduce", grad_bytes, 64, job.network, algorithm="ring"))
    assert val(whole.breakdown["dp_comm"]) == pytest.approx(single, rel=1e-9)


def test_tp_term_is_four_allreduces_per_layer(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """Forward: 2 all-reduces of b*s*h*2 bytes per layer (exposed); backward: 2 more, hidden by the
    weight-gradient GEMMs (= forward GEMM time) up to their length (Narayanan 2021 §3.3). Since tp33
    (docs/model.md#tp33) each backward all-reduce hides only under its own column-parallel linear's weight-gradient
    GEMM (NVIDIA/TransformerEngine@c55e425ac5 pytorch/module/linear.py L582-588 / L676-679, layernorm_linear.py
    L662-668 / L753-756), not the whole layer's: QKV 3 h^2 + FC1 4 h^2 of gpt-7.5b's 12 h^2 weight GEMMs a layer
    (not gated, ffn 4 h, no GQA), a = 7/12 of the forward GEMM time."""
    b, s, h, L = 2, gpt.seq_len, gpt.hidden, gpt.layers
    job = job_for(a100, gpt, global_batch=8, micro_batch=b)
    g, res = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8)
    t_ar = val(coll.collective_time("allreduce", b * s * h * 2.0, 8, job.network, stride=1))
    layer = compute.layer_compute_time(job.shape, micro_batch=b, seq_len=s, peak_flops=job.peak_flops,
                                       memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                       gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                       tp=8, flash_attention=True)
    wgrad = (3 + 4) / (3 + 1 + 4 + 4) * L * val(layer.forward_gemm)  # the column-parallel linears' (tp33)
    m = 8 // b  # micro-batches (dp = 1)
    # + the word embedding's output all-reduce, once a micro-batch (docs/model.md#embedding-tp-comm), and the output
    # layer's backward all-reduce beyond its weight-gradient GEMM with the loss's 3 (docs/model.md#output-tp-comm)
    head = max(t_ar - head_gemm(job, b, s, 8), 0.0) + loss_allreduces(job, b, s, 8)
    expected = m * (L * 2 * t_ar + max(L * 2 * t_ar - wgrad, 0.0) + t_ar + head)
    assert val(res.breakdown["tp_comm"]) == pytest.approx(expected, rel=1e-9)
    # full recompute repeats the two forward all-reduces
    g2, res2 = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8, recompute="full")
    assert val(res2.breakdown["tp_comm"]) == pytest.approx(expected + m * L * 2 * t_ar, rel=1e-9)


def test_synchronous_tp_allreduce_exposes_the_backward_ones(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """tp_async_allreduce false (Megatron-LM before its asynchronous TP all-reduce, 2021-09): the 2 backward
    all-reduces per layer wait for the linear's whole backward, so all 4 (6 with full recompute) are exposed:
    m * L * 4 * AR(b*s*h*2 bytes, 8 ranks), whatever the weight-gradient GEMMs take."""
    b, s, h, L = 2, gpt.seq_len, gpt.hidden, gpt.layers
    job = job_for(a100, gpt, global_batch=8, micro_batch=b)
    t_ar = val(coll.collective_time("allreduce", b * s * h * 2.0, 8, job.network, stride=1))
    m = 8 // b
    _, sync = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8, tp_async_allreduce=False)
    # + the word embedding's output all-reduce and the output layer's backward one, once a micro-batch, and the loss's
    # 3 small ones (docs/model.md#embedding-tp-comm, #output-tp-comm)
    loss = loss_allreduces(job, b, s, 8)
    assert val(sync.breakdown["tp_comm"]) == pytest.approx(m * ((L * 4 + 2) * t_ar + loss), rel=1e-9)
    _, sync_rec = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8, tp_async_allreduce=False, recompute="full")
    # the embedding and the output layer are outside the recomputed layers: theirs once
    assert val(sync_rec.breakdown["tp_comm"]) == pytest.approx(m * ((L * 6 + 2) * t_ar + loss), rel=1e-9)
    # nothing hidden under the backward: no contention from TP traffic, and never faster than the async form
    _, asyn = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8)
    assert val(sync.step_time) >= val(asyn.step_time)


def test_sequence_parallel_backward_is_async_whatever_the_flag(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """With sequence parallelism Megatron launches each backward reduce-scatter async_op=True before the wgrad GEMM
    whatever --no-async-tensor-model-parallel-allreduce says (core_r0.5.0 tensor_parallel/layers.py): per layer
    2 forward (AG + RS) exposed, and in the backward 2 output-gradient AG exposed (sp32) and 2 RS under the
    weight-gradient GEMMs, m (L 2 c + L 2 AG + max(L 2 RS - wgrad, 0)), c = RS + AG of b*s*h*2 bytes over 8 ranks,
    the flag on or off; once per step
    the all-reduce over the 8 TP ranks of the whole-per-rank weights' gradients (Megatron-Core finalize_model_grads
    _allreduce_non_tensor_model_parallel_grads): per layer 2 LayerNorms' weight + bias and the 2 row-parallel
    biases, 6 h, and the final LayerNorm's 2 h, at the gradient bytes."""
    b, s, h, L = 2, gpt.seq_len, gpt.hidden, gpt.layers
    job = job_for(a100, gpt, global_batch=8, micro_batch=b)
    c = sum(val(coll.collective_time(k, b * s * h * 2.0, 8, job.network, stride=1))
            for k in ("reducescatter", "allgather"))
    layer = compute.layer_compute_time(job.shape, micro_batch=b, seq_len=s, peak_flops=job.peak_flops,
                                       memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                       gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                       tp=8, sequence_parallel=True, flash_attention=True)
    wgrad = L * val(layer.forward_gemm)
    m = 8 // b
    sp_grads = val(coll.collective_time("allreduce", (L * 6 * h + 2 * h) * job.grad_bytes, 8, job.network, stride=1))
    # + the word embedding's output: learned positions, so an all-reduce and the scatter's backward all-gather
    # (docs/model.md#embedding-tp-comm)
    emb = sum(val(coll.collective_time(k, b * s * h * 2.0, 8, job.network, stride=1))
              for k in ("allreduce", "allgather"))
    # + the output layer's forward all-gather, its backward re-gather and reduce-scatter beyond the data- and
    # weight-gradient GEMMs, and the loss's 3 all-reduces (docs/model.md#output-tp-comm)
    ag, rs = (val(coll.collective_time(k, b * s * h * 2.0, 8, job.network, stride=1))
              for k in ("allgather", "reducescatter"))
    G = head_gemm(job, b, s, 8)
    head = ag + max(ag - G, 0.0) + max(rs - G, 0.0) + loss_allreduces(job, b, s, 8)
    # sp32: of the 2 backward pairs the row-parallel linears' output-gradient all-gathers run blocking, exposed
    # (docs/model.md#sp-grad-gather); only the column-parallel linears' input-gradient reduce-scatters hide under W
    expected = m * (L * 2 * c + L * 2 * ag + max(L * 2 * rs - wgrad, 0.0) + emb + head) + sp_grads
    for flag in (True, False):
        _, res = one(job, dict(global_batch=8, micro_batch=b), 8, tp=8, sequence_parallel=True,
                     tp_async_allreduce=flag)
        assert val(res.breakdown["tp_comm"]) == pytest.approx(expected, rel=1e-9)


def test_pp_term_and_bubble(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """PP: 2 send/recvs of b*s*h*2 bytes per micro-batch between stages tp*dp GPUs apart (Megatron-Core without SP
    sends the whole activation on every TP rank, docs/model.md#pp-comm); the 1F1B bubble is (p - 1) micro-batch
    times, interleaving divides it by v."""
    b, s, h = 1, gpt.seq_len, gpt.hidden
    training = dict(global_batch=64, micro_batch=b)
    job = job_for(a100, gpt, **training)
    g, res = one(job, training, 64, tp=2, pp=4)  # dp = 8, m = 8
    t_p2p = val(coll.collective_time("sendrecv", b * s * h * 2.0, 2, job.network, stride=2 * 8))
    # the step's pp_comm is the busiest rank's, the last (the logits), which exchanges on one boundary
    # (docs/model.md#pp-comm, the end ranks; #bubble, which rank's micro-batch): one send/recv a micro-batch, a middle
    # rank's two less one
    assert val(res.breakdown["pp_comm"]) == pytest.approx(8 * 1 * t_p2p, rel=1e-9)
    # the bubble is p - 1 slots of the stages in front of the last one (issue 13): those hold the same layers as
    # the last but not the logits, so it is a little less than (p - 1) t_mb of the busiest (last) stage. The last
    # rank's path F_<3 + m W_3 + B_<3, W_3 = t_mb (its own one exchange), rank 0's t_front - t_p2p and rank 1's and
    # 2's t_front: 3 t_front - t_p2p (before bubble37 t_mb held two exchanges and the bubble m t_p2p less)
    t_mb = val(res.extras["microbatch_time"])
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    t_front = val(_stage_time(job, g, groups, np.asarray([gpt.layers / 4]), False))
    assert t_front < t_mb
    # rank 0 also all-reduces the word embedding's output over its 2 TP ranks (docs/model.md#embedding-tp-comm)
    t_emb = val(coll.collective_time("allreduce", b * s * h * 2.0, 2, job.network, stride=1))
    assert val(res.breakdown["bubble"]) == pytest.approx(3 * t_front - t_p2p + t_emb, rel=1e-9)
    g2, res2 = one(job, training, 64, tp=2, pp=4, schedule="interleaved:2")
    t_front2 = val(_stage_time(job, g2, groups, np.asarray([gpt.layers / 4]), False))
    # rank 0's first chunk with it: its forward starts the step, its backward ends it, t_emb once on the path
    assert val(res2.breakdown["bubble"]) == pytest.approx(1.5 * t_front2 + t_emb, rel=1e-9)


def test_zero3_gathers_parameters_every_microbatch(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """ZeRO-3 / FSDP: in every micro-batch each layer's 16-bit parameters are all-gathered for the
    forward and again for the backward (but the last layer's, still gathered), and its gradients
    reduce-scattered (FSDP and DeepSpeed reduce
    in every micro-batch); DeepSpeed gathers per module (4 per layer) and reduce-scatters in 5e8-element
    buckets, FSDP one flat gather and reduce-scatter per layer (ZeRO paper §7: 1.5x the all-reduce
    volume at m = 1). Without overlap every byte is exposed."""

    def t(op: str, nbytes: float) -> float:
        return val(coll.collective_time(op, nbytes, 64, job.network))

    for m in (1, 4):
        training = dict(global_batch=64 * m, micro_batch=1)
        job = job_for(a100, gpt, **training)
        grads = job.params * 2.0
        L = gpt.layers
        _, r3 = one(job, training, 64, zero="3", overlap=False)
        n = max(int(np.ceil(grads / 1e9)), 1)  # DeepSpeed reduce_bucket_size: 5e8 bf16 elements
        deepspeed = m * ((2 * L - 1) * 4 * t("allgather", grads / L / 4) + n * t("reducescatter", grads / n))
        assert val(r3.breakdown["dp_comm"]) == pytest.approx(deepspeed, rel=1e-9)
        _, rf = one(job, training, 64, zero="fsdp", overlap=False)
        fsdp = m * ((2 * L - 1) * t("allgather", grads / L) + L * t("reducescatter", grads / L))
        assert val(rf.breakdown["dp_comm"]) == pytest.approx(fsdp, rel=1e-9)
    # HSDP: the same per-layer traffic inside groups of 8 replicas (one node), and each layer's reduced
    # 1/8 shard all-reduced across the 64 / 8 = 8 groups (ranks 8 GPUs apart)
    training = dict(global_batch=128, micro_batch=1)
    job = job_for(a100, gpt, **training)
    grads = job.params * 2.0
    L = gpt.layers
    _, rh = one(job, training, 64, zero="hsdp", overlap=False)

    def tg(op: str, nbytes: float, ranks: int, stride: int) -> float:
        return val(coll.collective_time(op, nbytes, ranks, job.network, stride=stride))

    hsdp = 2 * ((2 * L - 1) * tg("allgather", grads / L, 8, 1)
                + L * (tg("reducescatter", grads / L, 8, 1) + tg("allreduce", grads / L / 8, 8, 8)))
    assert val(rh.breakdown["dp_comm"]) == pytest.approx(hsdp, rel=1e-9)
    _, r_full = one(job, training, 64, zero="fsdp")
    assert val(rh.memory["optimizer"]) == pytest.approx(8 * val(r_full.memory["optimizer"]), rel=1e-9)
    # a shard group that does not divide dp: the user's strategy is refused (an input error, as hier:G not dividing
    # dp is); the same candidate in a search (evaluate) is infeasible
    with pytest.raises(InputError, match="shard_group = 3 does not divide dp = 64"):
        one(job, training, 64, zero="hsdp", shard_group=3)
    g_ok, _ = one(job, training, 64, zero="hsdp")
    bad = evaluate(job, msgspec.structs.replace(g_ok, shard_group=np.asarray(3, dtype=np.int64)), sync="bsp")
    assert not bool(bad.feasible[0])
    # with a ring, reduce-scatter + 2 all-gathers is 1.5 all-reduces of the same buffer (m = 1)
    ring = {op: val(coll.collective_time(op, 1e9, 64, job.network, algorithm="ring"))
            for op in ("allreduce", "reducescatter", "allgather")}
    assert ring["reducescatter"] + 2 * ring["allgather"] == pytest.approx(1.5 * ring["allreduce"], rel=0.05)


def test_int8_compression_term(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """int8: all-reduce of 1 byte per element plus encode+decode reading/writing 2 and 1 bytes (x2)."""
    training = dict(global_batch=64, micro_batch=1)
    job = job_for(a100, gpt, **training)
    _, r = one(job, training, 64, compression="int8", algorithm="ring", overlap=False)
    n = job.params
    # DDP buckets hold 25 MB of bf16 gradient = 12.5 M elements, i.e. 12.5 MB once quantised to int8: the same 146
    comm = bucketed_allreduce(n * 1.0, 64, job.network, GPT_7_5B_DDP_BUCKETS)
    codec = 2 * (2.0 + 1.0) * n / (job.memory_bandwidth * job.memory_efficiency)
    assert val(r.breakdown["dp_comm"]) == pytest.approx(comm + codec, rel=1e-9)


def test_parameter_server_term(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    training = dict(global_batch=64, micro_batch=1)
    job = job_for(a100, gpt, **training)
    _, r = one(job, training, 64, dp_comm="ps:8", overlap=False)
    # machine level (docs/model.md#parameter-server): 8 DGX nodes each reduce their 8 copies of the bf16
    # gradients over NVLink and push P = G bytes through 8 x 200 Gbit/s HDR (x 0.96) to 8 dedicated servers
    # with the same NIC; each server gets 1/8 (4096000-byte pieces dealt round-robin) of every push and sums
    # it in DRAM, 3 bytes per received byte at 204.8 GB/s; push, sum and pull pipelined per piece.
    G = job.params * 2.0
    nic = 8 * 25e9 * 0.96
    c = np.ceil(G / 4096000)
    f = np.ceil(c / 8) / c
    push = max(G / nic, 8 * G * f / nic)
    summ = 3 * 8 * G * f / 204.8e9
    intra = sum(val(coll.collective_time(op, G, 8, job.network)) for op in ("reducescatter", "allgather"))
    expected = (intra + 2 * push + summ) / c + (c - 1) / c * max(intra, push, summ) + 2 * 3.5e-6
    assert val(r.breakdown["dp_comm"]) == pytest.approx(expected, rel=1e-9)
    assert summ > max(push, intra)  # one socket's DRAM, not the 1.6 Tbit/s NIC, limits such a server


def test_overlap_never_hurts_and_hides_at_most_the_backward(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    training = dict(global_batch=64, micro_batch=1)
    job = job_for(a100, gpt, **training)
    _, on = one(job, training, 64, overlap=True)
    _, off = one(job, training, 64, overlap=False)
    assert val(on.breakdown["dp_comm"]) <= val(off.breakdown["dp_comm"])
    assert val(on.breakdown["dp_comm"]) >= val(off.breakdown["dp_comm"]) - val(on.breakdown["compute"])


def test_more_bandwidth_is_never_slower(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    training = dict(global_batch=256, micro_batch=1)
    job = job_for(a100, gpt, **training)
    tp = np.array([1, 2, 8]).reshape(3, 1)
    pp = np.array([1, 4]).reshape(1, 2)
    g = grid_from_arrays(gpus=256, dp=256 // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=256)
    base = evaluate(job, g).step_time
    for factor in (2.0, 10.0):
        tiers = tuple(replace(t, bandwidth=t.bandwidth * factor) for t in job.network.tiers)
        fast = msgspec.structs.replace(job, network=replace(job.network, tiers=tiers))
        assert np.all(evaluate(fast, g).step_time <= base * (1 + 1e-12))


def test_more_microbatches_never_larger_bubble_fraction(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    job = job_for(a100, gpt, global_batch=8)
    batches = np.array([8, 16, 32, 64, 128, 256])
    g = grid_from_arrays(gpus=32, dp=1, tp=8, pp=4, micro_batch=1, global_batch=batches)
    res = evaluate(job, g)
    frac = np.asarray(res.breakdown["bubble"]) / np.asarray(res.step_time)
    assert np.all(np.diff(frac) <= 1e-15)


def test_memory_infeasible_is_reported(a100) -> None:  # type: ignore[no-untyped-def]
    wl = load_workload("gpt3-175b")
    p = predict(a100, wl, 8, TrainingSpec(global_batch=8), StrategySpec(tp=8))
    assert not p.feasible and not p.memory["fits"]
    assert "memory" in (p.infeasible_reason or "")
    assert p.memory["per_gpu_bytes"] > p.memory["capacity_bytes"]


def test_invalid_combinations_are_flagged(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    job = job_for(a100, gpt, global_batch=64)
    g = grid_from_arrays(gpus=64, dp=np.array([64, 16, 8]), tp=np.array([1, 4, 8]), pp=1,
                         micro_batch=np.array([1, 1, 3]), global_batch=64, zero=1)
    res = evaluate(job, g)
    assert res.feasible.tolist() == [True, True, False]
    assert int(res.reason[2]) == 2  # 64 sequences cannot be split into dp 8 x micro-batch 3
    heads = grid_from_arrays(gpus=64, dp=64 // 3 or 1, tp=3, pp=1, micro_batch=1, global_batch=63)
    assert not bool(evaluate(job, heads).feasible.reshape(-1)[0])


def test_mfu_definition(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    p = predict(a100, gpt, 64, TrainingSpec(global_batch=64), StrategySpec(tp=8, recompute="full"))
    peak = a100.accelerator.peak("bf16")
    assert p.flops["mfu"] == pytest.approx(p.flops["model_flops_per_step"] / (p.step_time_s * 64 * peak))
    assert p.flops["hfu"] > p.flops["mfu"]  # full recompute adds hardware FLOPs


def test_predict_cli_json_is_strict(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "64", "--global-batch", "128",
            "--train-tokens", "10B", "--json")
    assert r.code == 0, r.err

    def bad(x: str) -> None:
        raise ValueError(x)

    doc = json.loads(r.out, parse_constant=bad)
    for key in ("schema_version", "command", "inputs", "feasible", "infeasible_reason", "step_time_s",
                "breakdown_s", "throughput", "flops", "memory", "time_to_train_s", "cost_usd"):
        assert key in doc
    assert doc["command"] == "predict"
    assert sum(doc["breakdown_s"].values()) == pytest.approx(doc["step_time_s"], rel=1e-12)
    assert doc["time_to_train_s"] == pytest.approx(10e9 / doc["throughput"]["tokens_per_s"], rel=1e-9)


@pytest.mark.parametrize("args", [
    ("--tp", "7"),
    ("--dp", "3"),
    ("--zero", "5"),
    ("--schedule", "weird"),
    ("--compression", "topk:abc"),
    ("--sync", "ssp:x"),
    ("--gpus", "0"),
    ("--set", "model.layers=-1"),
])
def test_predict_bad_input_exit_2(cli, args) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "64", *args)
    assert r.code == 2
    assert r.err.startswith("error: ") and "Traceback" not in r.err


def test_load_imbalance_static_vs_dynamic(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """Static shares end with the slowest replica's sum; a work queue costs its overhead per task
    and half a task at the end (docs/model.md#imbalance; cost.balance)."""
    from scalemodel.cost import stragglers as st

    training = dict(global_batch=512, micro_batch=1)
    job = msgspec.structs.replace(job_for(a100, gpt, **training), work_cv=0.3)
    _, r = one(job, training, 64, tp=8)  # dp = 8, m = 64 micro-batches per replica
    m, n = 64, 8
    task = val(r.breakdown["compute"]) / m
    expected_static = m * val(st.expected_max_of_sum(m, n, task, 0.3, job.straggler_dist)) - m * task
    assert val(r.breakdown["imbalance"]) == pytest.approx(expected_static, rel=1e-9)
    o = 0.002
    _, d = one(job, training, 64, tp=8, assignment="dynamic", dispatch_overhead=o)
    t = task + o
    M = m * n
    expected_dynamic = M * t / n - n * t / (2 * n) + t - m * task
    assert val(d.breakdown["imbalance"]) == pytest.approx(expected_dynamic, rel=1e-9)
    balanced = msgspec.structs.replace(job, work_cv=0.0)
    _, z = one(balanced, training, 64, tp=8)
    assert val(z.breakdown["imbalance"]) == 0.0


def test_hierarchical_sync_prices_groups_and_leaders(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """hier:G: the in-group all-reduce over G replicas, then each member all-reduces its 1/G shard
    with its counterparts in the N/G groups, G replicas apart; cost.sync.sync_step composes them
    (T = E_G + C_group + C_cross)."""
    training = dict(global_batch=128, micro_batch=1)
    job = job_for(a100, gpt, **training)
    _, bsp = one(job, training, 128, tp=8, overlap=False)  # dp = 16
    _, hier = one(job, training, 128, tp=8, overlap=False, sync="hier:4")

    def bucketed(nbytes: float, ranks: int, stride: int, n: int) -> float:
        return n * val(coll.collective_time("allreduce", nbytes / n, ranks, job.network, stride=stride))

    # DDP's 25 MiB = 26,214,400-byte buckets (bucket_cap_mb * 1024 * 1024) hold 13,107,200 bf16 elements at tp 8
    # (dp_comm.bucket_count): only the embedding's shard (51200 x 4096 / 8 = 26,214,400) exceeds one (the largest
    # layer shards, fc1 and fc2, are 4 h^2 / 8 = 8,388,608); the rest, 36 x (12 h^2/8 + 7 h/8 split + 6 h whole
    # biases and norms) + 2 h + the learned positions 2048 h (whole: Megatron's serial Embedding) = 915,380,224
    # elements at h = 4096, fills ceil(915,380,224 / 13,107,200) = ceil(69.84) = 70: 71 buckets; the cross-group
    # shard, grads / 4, keeps ceil(grads / 4 / 25 MiB) = ceil(17.96) = 18 (fewer than the tensors' 71). (Without
    # the position table 906,991,616 elements, the same 71 and 18; with 25e6-byte buckets, 12.5e6 elements, 74 and 19.)
    h = 4096
    small = 36 * (12 * h * h // 8 + 7 * h // 8 + 6 * h) + 2 * h + 2048 * h
    assert small == 915_380_224
    # per GPU: the split weights / 8, the whole ones (6 h a layer, the final LayerNorm's 2 h, the positions) whole
    whole = 36 * 6 * h + 2 * h + 2048 * h
    grads = ((job.params - whole) / 8 + whole) * 2.0
    mib25 = 25 * 1024 * 1024
    assert mib25 == 26_214_400
    n_group, n_cross = 1 + int(np.ceil(small / (mib25 / 2))), int(np.ceil(grads / 4 / mib25))
    assert (n_group, n_cross) == (71, 18)
    group, cross = bucketed(grads, 4, 8, n_group), bucketed(grads / 4, 4, 8 * 4, n_cross)
    assert val(hier.breakdown["dp_comm"]) == pytest.approx(group + cross, rel=1e-9)
    assert val(bsp.breakdown["dp_comm"]) == pytest.approx(bucketed(grads, 16, 8, n_group), rel=1e-9)


def test_hierarchical_sync_shards_zero_inside_its_groups(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """hier:G with ZeRO: the groups step apart, so the states are sharded over the G replicas of a group (HSDP's
    layout), in memory and in traffic alike. By hand, gpt-7.5b on 128 A100s, tp 8, dp 16, hier:4, P = (params - W) /
    8 + W per GPU (W = 36 x 6 h + 2 h + 2048 h the weights every TP rank holds whole: two LayerNorms' gains and biases
    and the O-proj and FC2 biases a layer, the final LayerNorm, the learned position table; h = 4096), L = 36 layers,
    m = 8 micro-batches: ZeRO-1 optimizer 12 P / 4 bytes (bsp: 12 P / 16); ZeRO-2 gradients 2 P / 4; ZeRO-1 traffic =
    the in-group all-reduce volume (2 DeepSpeed buckets of 5e8 elements) + the cross-group all-reduce of the 2 P / 4
    shard over the 4 groups, 32 GPUs apart; FSDP = m ((2L - 1) AG + L RS) of one layer over the group + L all-reduces
    of a unit's 2 P / (4 L) shard across the groups, once per step (offz41); hsdp under hier = fsdp."""
    training = dict(global_batch=128, micro_batch=1)
    job = job_for(a100, gpt, **training)
    W = 36 * 6 * 4096 + 2 * 4096 + 2048 * 4096
    P, L, m = (job.params - W) / 8 + W, 36, 8

    def t(op: str, nbytes: float, ranks: int, stride: int) -> float:
        return val(coll.collective_time(op, nbytes, ranks, job.network, stride=stride))

    run = {(z, s): one(job, training, 128, tp=8, overlap=False, zero=z, sync=s)[1]
           for z in ("1", "2", "fsdp", "hsdp") for s in ("bsp", "hier:4")}
    assert val(run["1", "bsp"].memory["optimizer"]) == pytest.approx(12 * P / 16, rel=1e-9)
    assert val(run["1", "hier:4"].memory["optimizer"]) == pytest.approx(12 * P / 4, rel=1e-9)
    assert val(run["2", "hier:4"].memory["gradients"]) == pytest.approx(2 * P / 4, rel=1e-9)
    assert val(run["fsdp", "hier:4"].memory["optimizer"]) == pytest.approx(12 * P / 4, rel=1e-9)
    # the optimizer step updates the 1/4 shard: 4x bsp's 1/16
    assert val(run["1", "hier:4"].breakdown["optimizer"]) == pytest.approx(
        4 * val(run["1", "bsp"].breakdown["optimizer"]), rel=1e-9)
    cross = t("allreduce", 2 * P / 4, 4, 32)
    # the in-group ZeRO-1 sync: each bucket a reduce-scatter and an all-gather of P bytes (issue 13: priced as
    # themselves, no longer as one all-reduce of the bucket)
    in_group = 2 * (t("reducescatter", P, 4, 8) + t("allgather", P, 4, 8))
    assert val(run["1", "hier:4"].breakdown["dp_comm"]) == pytest.approx(in_group + cross, rel=1e-9)
    per_mb = (2 * L - 1) * t("allgather", 2 * P / L, 4, 8) + L * t("reducescatter", 2 * P / L, 4, 8)
    # FSDP: each unit's reduced 2 P / (4 L) shard all-reduced across the groups after its in-group reduce-scatter, in
    # the last backward (offz41: FSDP1 HYBRID_SHARD / FSDP2 / MiCS issue it unit by unit on the reduce path)
    unit_cross = L * t("allreduce", 2 * P / L / 4, 4, 32)
    assert val(run["fsdp", "hier:4"].breakdown["dp_comm"]) == pytest.approx(m * per_mb + unit_cross, rel=1e-9)
    for k in ("step_time",):
        assert val(getattr(run["hsdp", "hier:4"], k)) == val(getattr(run["fsdp", "hier:4"], k))
    assert val(run["hsdp", "hier:4"].memory["total"]) == val(run["fsdp", "hier:4"].memory["total"])
    # `scalemodel memory` reads the same sync mode
    from scalemodel.engine.memory import memory as memory_report

    rep = memory_report(a100, gpt, 128, TrainingSpec(**training), StrategySpec(tp=8, zero="1", sync="hier:4"))
    assert rep.per_gpu_bytes["optimizer"] == pytest.approx(12 * P / 4, rel=1e-9)
    # a shard group other than the hier group is refused, not ignored
    from scalemodel.errors import InputError

    with pytest.raises(InputError, match="shard_group"):
        grid_from_strategy(StrategySpec(tp=8, zero="hsdp", shard_group=8, sync="hier:4"), TrainingSpec(**training),
                           128, job)
    grid_from_strategy(StrategySpec(tp=8, zero="hsdp", shard_group=4, sync="hier:4"), TrainingSpec(**training),
                       128, job)
    # hier:dp is one group: bsp's sharding and memory
    _, whole = one(job, training, 128, tp=8, overlap=False, zero="fsdp", sync="hier:16")
    assert val(whole.memory["total"]) == val(run["fsdp", "bsp"].memory["total"])


def test_pipeline_boundary_saturates_a_tapered_spine_only_as_far_as_the_stage_fills_a_rack() -> None:
    """Default scenario fabric (256-GPU leaves, 3:1 spine), TP 4 x PP 8: the stage holds 4 x dp GPUs
    sending at once across the boundary that crosses the spine; taper = max(1, 3 x stage / 256). With sequence
    parallelism, as the scenario: each TP rank sends its b s h / 4 shard."""
    from scalemodel.specs import load_scenario

    scen = load_scenario("default")
    net = build_network(scen.cluster)
    flat = replace(net, tiers=tuple(replace(t, oversubscription=1.0) for t in net.tiers))
    training = dict(global_batch=48 * 32, micro_batch=1)
    job = build_job(scen.cluster, scen.model, TrainingSpec(**training))
    nbytes = 1 * scen.model.seq_len * scen.model.hidden * 2.0 / 4
    for gpus, taper in ((512, 1.0), (1024, 1.5), (2048, 3.0)):
        dp = gpus // 32
        tr = dict(global_batch=48 * dp, micro_batch=1)
        _, r = one(job, tr, gpus, tp=4, pp=8, sequence_parallel=True)
        extent = 4 * dp * 8
        full = val(coll.collective_time("sendrecv", nbytes, 2, net, stride=extent / 2))
        none = val(coll.collective_time("sendrecv", nbytes, 2, flat, stride=extent / 2))
        expected_p2p = none + (full - none) * (taper - 1.0) / 2.0
        m = 48
        assert val(r.breakdown["pp_comm"]) == pytest.approx(m * 2 * expected_p2p, rel=1e-9), gpus


@pytest.mark.parametrize("cv", [0.0, 0.07])
def test_with_sync_is_evaluate_under_that_mode(a100, gpt, cv) -> None:  # type: ignore[no-untyped-def]
    """Sync modes that move bsp's data-parallel traffic, derived from one bsp evaluation, equal evaluate()
    under the mode bit for bit (the planner ranks on them); hier and asp-on-a-parameter-server are refused."""
    from scalemodel.engine.step import shares_bsp_comm, with_sync

    job = msgspec.structs.replace(job_for(a100, gpt, global_batch=512), straggler_cv=cv, work_cv=0.1)
    tp = np.array([1, 2, 8]).reshape(3, 1, 1)
    zero = np.array([0, 1, 3]).reshape(1, 3, 1)
    bucket = np.array([0.0, 5e6, 2e9]).reshape(1, 1, 3)
    g = grid_from_arrays(gpus=64, dp=64 // (tp * 2), tp=tp, pp=2, micro_batch=2, global_batch=512, zero=zero,
                         bucket_bytes=bucket, overlap=np.array([True, False, True]).reshape(1, 1, 3),
                         algorithm=np.array([0, 1, 2]).reshape(1, 1, 3))
    base = evaluate(job, g)
    for sync in ("bsp", "asp", "ssp:2", "local:4", "backup:2"):
        assert shares_bsp_comm(sync, g.ps_servers)
        want, got = evaluate(job, g, sync=sync), with_sync(job, g, base, sync)
        for name in ("step_time", "tokens_per_s", "mfu", "statistical_efficiency", "feasible", "reason"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{sync} {name}")
        for k in BREAKDOWN_KEYS:
            np.testing.assert_array_equal(got.breakdown[k], want.breakdown[k], err_msg=f"{sync} {k}")
    assert not shares_bsp_comm("hier:2", g.ps_servers)
    assert not shares_bsp_comm("asp", [0, 2]) and shares_bsp_comm("local:2", [0, 2])
    with pytest.raises(ValueError):
        with_sync(job, g, base, "hier:2")


def test_ranks_that_step_apart_need_unsharded_replicas(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """asp, ssp:S and local:H step each data-parallel rank on its own model; ZeRO 1-3, FSDP and HSDP keep one
    sharded copy per group, so those pairs are refused (code 15), whatever else the candidate is; the
    synchronous modes keep every ZeRO stage."""
    from scalemodel.engine.step import Infeasible

    job = job_for(a100, gpt, global_batch=512)
    zero = np.array([0, 1, 2, 3, 4, 5])  # none, optimizer, gradients, parameters, fsdp, hsdp
    g = grid_from_arrays(gpus=64, dp=16, tp=2, pp=2, micro_batch=2, global_batch=512, zero=zero, shard_group=8)
    for sync in ("asp", "ssp:2", "local:4"):
        reason = evaluate(job, g, sync=sync).reason
        assert int(reason[0]) != Infeasible.SYNC_NEEDS_REPLICAS
        assert all(int(r) == Infeasible.SYNC_NEEDS_REPLICAS for r in reason[1:]), (sync, reason)
    for sync in ("bsp", "backup:2", "hier:4"):
        assert not np.any(evaluate(job, g, sync=sync).reason == Infeasible.SYNC_NEEDS_REPLICAS), sync


@pytest.mark.parametrize("model", ["gpt-7.5b", "mixtral-8x7b"])
def test_dp_exposed_floor_is_below_every_communication_choice(a100, model) -> None:  # type: ignore[no-untyped-def]
    """The planner's floor under the exposed data-parallel traffic holds for every algorithm, compression,
    bucket and overlap choice (and is not vacuous: ZeRO-3/FSDP/HSDP expose at least one gather per
    micro-batch)."""
    from scalemodel.engine.step import dp_exposed_floor

    job = job_for(a100, load_workload(model), global_batch=256)
    tp = np.array([1, 2, 8]).reshape(3, 1, 1, 1, 1, 1)
    pp = np.array([1, 3]).reshape(1, 2, 1, 1, 1, 1)  # 3 stages: uneven split of 32 layers
    zero = np.array([0, 2, 3, 4, 5]).reshape(1, 1, 5, 1, 1, 1)
    alg = np.array([0, 1, 2, 3]).reshape(1, 1, 1, 4, 1, 1)
    comp = np.array([0, 1, 2]).reshape(1, 1, 1, 1, 3, 1)
    bucket = np.array([0.0, 5e6, 2e9]).reshape(1, 1, 1, 1, 1, 3)
    ep = 2 if "mixtral" in model else 1
    g = grid_from_arrays(gpus=96, dp=96 // (tp * pp), tp=tp, pp=pp, ep=ep, micro_batch=1, global_batch=256 // 32 * 48,
                         zero=zero, algorithm=alg, compression=comp, bucket_bytes=bucket)
    for overlap in (True, False):
        gg = msgspec.structs.replace(g, overlap=np.asarray(overlap))
        res = evaluate(job, gg)
        floor = np.broadcast_to(dp_exposed_floor(job, gg), res.step_time.shape)
        dp = np.asarray(res.breakdown["dp_comm"])
        assert np.all(floor <= dp * (1 + 1e-12)), float(np.max(floor - dp))
        for sync in ("hier:2", "hier:4:2") if ep == 1 else ():  # the in-group traffic of hierarchical sync
            hres = evaluate(job, gg, sync=sync)
            hfloor = np.broadcast_to(dp_exposed_floor(job, gg, sync), hres.step_time.shape)
            assert np.all(hfloor <= np.asarray(hres.breakdown["dp_comm"]) * (1 + 1e-12)), sync
            assert np.any(hfloor > 0)
        z3 = np.broadcast_to((gg.zero == 3) | (gg.zero == 4), floor.shape) & np.broadcast_to(gg.dp > 1, floor.shape)
        assert np.all(floor[z3] > 0) and np.all(floor[~np.broadcast_to(gg.zero >= 3, floor.shape)] == 0)


def test_compute_floor_keeps_the_fixed_bubble_of_gpipe_and_zero_bubble(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """GPipe and ZB-H1 keep evaluate's textbook bubble (p - 1, (p - 1)/3 micro-batches of t_mb), so their floor
    is at least (m + bubble)/m x the compute evaluate books (m x the busiest stage's compute) and still at most
    evaluate's pipelined part (m + bubble) x t_mb."""
    from scalemodel.engine.step import compute_floor

    job = job_for(a100, gpt, global_batch=64)
    pp = np.array([2, 4, 3]).reshape(3, 1, 1)  # 3 stages split 32 layers unevenly
    sched = np.array([2, 3]).reshape(1, 2, 1)  # GPipe, ZB-H1
    rec = np.array([0, 2]).reshape(1, 1, 2)
    g = grid_from_arrays(gpus=24, dp=24 // (2 * pp), tp=2, pp=pp, micro_batch=1, global_batch=48, schedule=sched,
                         recompute=rec)
    res = evaluate(job, g)
    m = np.asarray(res.microbatches)
    bubble = np.broadcast_to(np.where(sched == 2, pp - 1.0, (pp - 1.0) / 3.0), g.shape)
    np.testing.assert_allclose(np.asarray(res.extras["bubble_microbatches"]), bubble, rtol=1e-12)
    pipelined = np.asarray((m + bubble) * res.extras["microbatch_time"])
    floor = np.broadcast_to(compute_floor(job, g), g.shape)
    booked = np.asarray(res.breakdown["compute"]) * (m + bubble) / m
    assert np.all(booked <= floor * (1 + 1e-12)) and np.all(floor <= pipelined * (1 + 1e-12))


def test_compute_floor_and_feasibility_match_evaluate(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """The planner's compute-only floor is evaluate's pipelined part without its traffic, (m + bubble) x busiest
    stage compute <= (m + bubble) x t_mb (equal where nothing communicates), and its feasibility codes are
    evaluate's before the memory check."""
    from scalemodel.engine.step import compute_floor, feasibility

    job = job_for(a100, gpt, global_batch=512)
    tp = np.array([1, 2, 8]).reshape(3, 1, 1, 1)
    pp = np.array([1, 3, 4]).reshape(1, 3, 1, 1)  # 3 stages split 32 layers unevenly
    sched = np.array([0, 1, 3]).reshape(1, 1, 3, 1)
    rec = np.array([0, 2]).reshape(1, 1, 1, 2)
    g = grid_from_arrays(gpus=96, dp=96 // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=384, schedule=sched,
                         virtual_stages=2, recompute=rec)
    res = evaluate(job, g)
    pipelined = np.asarray((res.microbatches + res.extras["bubble_microbatches"]) * res.extras["microbatch_time"])
    floor = np.broadcast_to(compute_floor(job, g), g.shape)
    assert np.all(floor <= pipelined * (1 + 1e-12)) and np.all(floor > 0)
    single = np.broadcast_to((g.tp == 1) & (g.pp == 1), g.shape)
    np.testing.assert_allclose(floor[single], pipelined[single], rtol=1e-12)
    codes = np.broadcast_to(feasibility(job, g), g.shape)
    r = np.asarray(res.reason)
    np.testing.assert_array_equal(np.where(r == 10, 0, r), codes)  # 10: out of memory, checked afterwards


def test_tied_embedding_allreduce_between_first_and_last_stage(a100, gpt) -> None:  # type: ignore[no-untyped-def]
    """Tied embeddings with pp > 1: one all-reduce per step of the V x h / tp word-embedding gradient between
    the first and the last stage (Megatron-LM train_step / finalize_model_grads; DeepSpeed ReduceTiedGrads),
    after the flush: its own part, added once, 0 untied or without a pipeline."""
    training = dict(global_batch=64, micro_batch=1)
    job = job_for(a100, gpt, **training)
    assert bool(job.shape.tied_embeddings)
    _, res = one(job, training, 64, tp=2, pp=4)  # dp 8: stages 16 GPUs apart, the pipeline spans 64 GPUs
    nbytes = gpt.vocab * gpt.hidden / 2 * 2.0  # bf16 gradient, one TP half
    expected = val(coll.collective_time("allreduce", nbytes, 2, job.network, stride=64 / 2))
    assert val(res.breakdown["embed_comm"]) == pytest.approx(expected, rel=1e-9)
    # by hand: 2 ranks in different nodes, one 200 Gb/s HDR NIC each at 0.96 of line rate; a 2-rank ring sends
    # half the buffer in the reduce-scatter and half in the all-gather, nbytes in all, plus two hop latencies
    by_hand = nbytes / (25e9 * 0.96)
    assert by_hand < val(res.breakdown["embed_comm"]) < 1.05 * by_hand + 20e-6
    assert val(res.step_time) == pytest.approx(sum(val(res.breakdown[k]) for k in BREAKDOWN_KEYS), rel=1e-12)
    untied = job_for(a100, load_workload("gpt-7.5b", ["tied_embeddings=false"]), **training)
    _, u = one(untied, training, 64, tp=2, pp=4)
    assert val(u.breakdown["embed_comm"]) == 0.0
    _, flat = one(job, training, 64, tp=8)  # no pipeline: the one copy needs no sync
    assert val(flat.breakdown["embed_comm"]) == 0.0


@pytest.mark.parametrize("sync", ["bsp", "asp"])  # asp: re-priced from bsp's evaluation (step.with_sync)
def test_a_batch_dp_does_not_divide_counts_the_samples_it_prices(cli, sync):  # type: ignore[no-untyped-def]
    """GPT 1.7B on 64 H100s at dp 64, b 1: a global batch of 96 is infeasible (batch_not_divisible) and priced as
    m = floor(96 / 64) = 1 micro-batch, i.e. 64 sequences, the same step as a batch of 64. Its throughput, FLOPs
    and MFU counted 96 sequences in that step (GPT-3 175B at B 1536 on dp 1024: HFU 91 % on an A100). They must
    be the 64-sequence step's: tokens/s = 64 x 2048 / step, and the FLOPs and MFU of the batch of 64."""
    import json

    base = ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--micro-batch", "1", "--sync", sync, "--json")
    odd = json.loads(cli(*base, "--global-batch", "96").out)
    even = json.loads(cli(*base, "--global-batch", "64").out)
    assert not odd["feasible"] and "not divisible" in odd["infeasible_reason"]
    assert odd["step_time_s"] == pytest.approx(even["step_time_s"], rel=1e-12)
    assert odd["throughput"]["tokens_per_s"] == pytest.approx(64 * 2048 / odd["step_time_s"], rel=1e-12)
    for key in ("model_flops_per_step", "hardware_flops_per_step", "mfu", "hfu"):
        assert odd["flops"][key] == pytest.approx(even["flops"][key], rel=1e-12), key
