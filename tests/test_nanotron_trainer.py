"""nanotron's trainer (strategy ``nanotron_trainer``, huggingface/nanotron@c2528430): the fp32 accumulation pass, the
ZeRO-1 data-parallel sync (one fp32 all-reduce after the backward, one bf16 all-gather after the step, nothing
overlapped) and the ZeRO-0 DDP buckets, by hand from the code's operations (docs/model.md#nanotron)."""

from __future__ import annotations

import pytest
from grid_helpers import evaluated, first

from scalemodel.cost import collectives as coll
from scalemodel.engine.dp_comm import nanotron_grad_buffer_time
from scalemodel.engine.layer_compute import grad_accumulation_time
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_workload

BF16_FP32 = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)

#: gpt-7.5b's parameters on one GPU of its busiest pipeline rank at tp 1, pp 4: since posemb23 gave the Megatron GPT
#: workloads their learned 2048-row position table, the first: 9 of the 36 layers (each 12 h^2 + 13 h with biases and
#: two LayerNorms), the word embedding V h and the position table 2048 h; the last rank holds the tied output layer's
#: own copy V h (Megatron-Core builds it there; nanotron replicates the tied lm_head) and the final LayerNorm 2 h
H75 = 4096
P_D = 9 * (12 * H75 * H75 + 13 * H75) + 51200 * H75 + 2048 * H75


def test_zero1_is_one_fp32_allreduce_and_one_bf16_gather(a100) -> None:  # type: ignore[no-untyped-def]
    """ZeRO-1 with accumulate_grad_in_fp32: no DDP (trainer.py init_model), so after the last backward
    FP32GradientAccumulator.sync_gradients_across_dp all-reduces the one contiguous fp32 buffer
    (gradient_accumulator.py 128-155), and ZeroDistributedOptimizer._all_gather_params gathers every parameter's bf16
    shard in one dist.all_gather (optim/zero.py 217-251, distributed.py 153-220). gpt-7.5b, tp 1, pp 4 (9 of 36
    layers a stage), dp 8 inside one DGX A100 node: P_d = the last rank's parameters per GPU (:data:`P_D`),

        dp_total = AllReduce(4 P_d, 8) + AllGather(2 P_d, 8),   one call each,

    and all of it is exposed (one bucket: nothing under the backward)."""
    wl = load_workload("gpt-7.5b")
    job, _, res = evaluated(a100, wl, BF16_FP32, 32, tp=1, pp=4, zero="1", nanotron_trainer=True)
    p_d = P_D
    ar = first(coll.collective_time("allreduce", 4.0 * p_d, 8, job.network, stride=1))
    ag = first(coll.collective_time("allgather", 2.0 * p_d, 8, job.network, stride=1))
    total = first(res.extras["dp_comm_total"])
    assert total == pytest.approx(ar + ag, rel=1e-9)
    assert first(res.breakdown["dp_comm"]) == pytest.approx(total, rel=1e-9)
    # the bytes: 2 x 7/8 x 4 + 7/8 x 2 = 8.75 bytes a parameter on the wire, against the reduce-scatter + all-gather's
    # 7/8 x (4 + 2) = 5.25 that Megatron-style ZeRO-1 sends (docs/model.md#dp-comm); over NVLink3 (300 GB/s a
    # direction, 0.77 of line rate) at least 8.75 x 1.86e9 / 231e9 = 70 ms
    assert total > 8.75 * p_d / (300e9 * 0.77)
    _, _, megatron = evaluated(a100, wl, BF16_FP32, 32, tp=1, pp=4, zero="1", bucket_size=1e12)
    assert total / first(megatron.extras["dp_comm_total"]) == pytest.approx(8.75 / 5.25, rel=0.05)


def test_zero1_sync_is_not_hidden_where_megatron_style_is(a100) -> None:  # type: ignore[no-untyped-def]
    """The same job without the switch (ZeRO-1 reduce-scatter in buckets, overlapped) exposes less than its total;
    nanotron exposes all of its (larger) total."""
    wl = load_workload("gpt-7.5b")
    _, _, plain = evaluated(a100, wl, BF16_FP32, 32, tp=1, pp=4, zero="1")
    _, _, nano = evaluated(a100, wl, BF16_FP32, 32, tp=1, pp=4, zero="1", nanotron_trainer=True)
    assert first(plain.breakdown["dp_comm"]) < first(plain.extras["dp_comm_total"])
    assert first(nano.breakdown["dp_comm"]) == pytest.approx(first(nano.extras["dp_comm_total"]), rel=1e-9)
    assert first(nano.breakdown["dp_comm"]) > first(plain.breakdown["dp_comm"])


def test_zero0_ddp_buckets_are_25mib_of_bf16_gradients(a100) -> None:  # type: ignore[no-untyped-def]
    """ZeRO-0: PyTorch DDP buckets the bf16 gradients by bytes (ddp_bucket_cap_mb 25, read by DDP in MiB:
    bucket_bytes_cap = int(25 x 1024 x 1024) = 26,214,400 bytes, 13,107,200 bf16 elements) and the comm hook
    all-reduces those parameters' fp32 buffers, i.e. the buckets of a plain run given bucket_size = 13,107,200
    elements x 4 bytes of fp32 gradient (StrategySpec.bucket_size counts uncompressed gradient bytes), not those of
    12.5e6 elements (25e6 bytes of bf16), which for gpt-3.6b on one node (dp 8) are one bucket more (gpt-1.7b's,
    used before its learned position table was counted, now split into as many buckets either way)."""
    wl = load_workload("gpt-3.6b")
    _, _, nano = evaluated(a100, wl, BF16_FP32, 8, tp=1, pp=1, zero="0", nanotron_trainer=True)
    _, _, plain = evaluated(a100, wl, BF16_FP32, 8, tp=1, pp=1, zero="0", bucket_size=25 * 1024 * 1024 / 2 * 4)
    _, _, decimal = evaluated(a100, wl, BF16_FP32, 8, tp=1, pp=1, zero="0", bucket_size=25e6 / 2 * 4)
    assert first(nano.extras["dp_comm_total"]) == pytest.approx(first(plain.extras["dp_comm_total"]), rel=1e-12)
    assert first(decimal.extras["dp_comm_total"]) > first(plain.extras["dp_comm_total"]) * (1 + 1e-6)


def test_fp32_accumulation_pass_by_hand(a100) -> None:  # type: ignore[no-untyped-def]
    """fp32_grad_buffer.add_(half_param.grad) every micro-batch (gradient_accumulator.py 212-236, 338-341): read 2 +
    read 4 + write 4 = 10 bytes a parameter; 16-bit gradients (no fp32 accumulation): autograd's in-place add,
    3 x 2 bytes for all micro-batches but the first. Parameters per GPU: / (tp pp), but the weights every TP rank
    holds whole (per layer two LayerNorms' gains and biases and the O-proj and FC2 biases, 6 h; the final LayerNorm
    2 h; the learned position table 2048 h; h = 4096, 36 layers) only / pp."""
    wl = load_workload("gpt-7.5b")
    for grad_bytes, per_param in ((4.0, 10.0), (2.0, 3 * 2.0 * 7 / 8)):
        training = TrainingSpec(global_batch=64, micro_batch=1, grad_bytes_per_param=grad_bytes)
        job, g, _ = evaluated(a100, wl, training, 64, tp=2, pp=4, nanotron_trainer=True)
        whole = 36 * 6 * 4096 + 2 * 4096 + 2048 * 4096  # + the learned position table, whole on every TP rank
        params_gpu = (job.params - whole) / (2 * 4) + whole / 4  # tp 2 x pp 4, m = 8 micro-batches
        expected = params_gpu * per_param / (job.memory_bandwidth * job.memory_efficiency)
        assert first(grad_accumulation_time(job, g)) == pytest.approx(expected, rel=1e-9)
    # A100 80GB 2.039 TB/s: 0.94e9 parameters x 10 bytes is 4.6 ms a micro-batch at the full rate
    job, g, _ = evaluated(a100, wl, BF16_FP32, 64, tp=2, pp=4, nanotron_trainer=True)
    assert 0.0046 < first(grad_accumulation_time(job, g)) < 0.0070


def test_nanotron_zero_is_stage_one_only() -> None:
    """nanotron builds ZeroDistributedOptimizer (optimizer states only) for any zero_stage > 0 (helpers.py 381)."""
    for zero in ("2", "3", "fsdp"):
        with pytest.raises(InputError, match="nanotron_trainer"):
            StrategySpec(zero=zero, nanotron_trainer=True)
    assert StrategySpec(zero="1", nanotron_trainer=True).nanotron_trainer


def test_clip_and_reset_of_the_whole_fp32_buffer_by_hand(a100) -> None:  # type: ignore[no-untyped-def]
    """clip_grad_norm reads every fp32 gradient for its norms and scales it in place (4 + 4 + 4 bytes), then zero_grad
    zeroes the contiguous buffer (4): 16 bytes per parameter the rank holds, not its ZeRO shard, once per step
    (optim/clip_grads.py, optim/gradient_accumulator.py at c2528430). Same parameter count as the accumulation test:
    gpt-7.5b at tp 2 x pp 4; none with 16-bit gradients (no fp32 buffer) or without the switch."""
    wl = load_workload("gpt-7.5b")
    job, g, _ = evaluated(a100, wl, BF16_FP32, 64, tp=2, pp=4, zero="1", nanotron_trainer=True)
    whole = 36 * 6 * 4096 + 2 * 4096 + 2048 * 4096  # + the learned position table, whole on every TP rank
    params_gpu = (job.params - whole) / (2 * 4) + whole / 4
    expected = params_gpu * 16.0 / (job.memory_bandwidth * job.memory_efficiency)
    assert first(nanotron_grad_buffer_time(job, g)) == pytest.approx(expected, rel=1e-9)
    _, g0, _ = evaluated(a100, wl, BF16_FP32, 64, tp=2, pp=4, zero="1")
    assert first(nanotron_grad_buffer_time(job, g0)) == 0.0
    # ZeRO 0 with dp > 1 runs DDP, whose comm-hook path copies each bf16 gradient into its bucket and back once a step
    # (reducer.cpp mark_variable_ready_dense, copy_bucket_to_grad): 2 + 2 + 2 + 2 more bytes a parameter
    job0, gz, _ = evaluated(a100, wl, BF16_FP32, 64, tp=2, pp=4, zero="0", nanotron_trainer=True)
    assert first(nanotron_grad_buffer_time(job0, gz)) == pytest.approx(expected * (16.0 + 8.0) / 16.0, rel=1e-9)
    _, g1, _ = evaluated(a100, wl, BF16_FP32, 8, tp=2, pp=4, zero="0", nanotron_trainer=True)  # dp 1: no DDP
    assert first(nanotron_grad_buffer_time(job0, g1)) == pytest.approx(expected, rel=1e-9)
    bf16 = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", grad_bytes_per_param=2.0)
    job16, g16, _ = evaluated(a100, wl, bf16, 64, tp=2, pp=4, nanotron_trainer=True)
    assert first(nanotron_grad_buffer_time(job16, g16)) == 0.0


def test_zero1_with_16bit_gradients_is_ddp_allreduce_and_one_gather(a100) -> None:  # type: ignore[no-untyped-def]
    """ZeRO-1 without fp32 accumulation (accumulate_grad_in_fp32 false, gradients of the parameter's 2 bytes): nanotron
    builds DDP (trainer.py 786-788: make_ddp = dp > 1 and not (fp32 accumulation and zero > 0)) with no comm hook
    (helpers.py registers get_fp32_accum_hook only with a gradient accumulator), so DDP all-reduces the bf16
    gradients in its 25 MiB buckets under the last backward, and ZeroDistributedOptimizer all-gathers the bf16 shards
    once after the step. gpt-7.5b, tp 1, pp 4, dp 8 in one DGX A100 node, P_d the last rank's (:data:`P_D`):

        dp_total = (the ZeRO-0 DDP all-reduce of the same bf16 buckets) + AllGather(2 P_d, 8)

    not ZeRO-1's reduce-scatter (which sends half the all-reduce's bytes) in DeepSpeed's 5e8-element buckets."""
    wl = load_workload("gpt-7.5b")
    bf16 = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", grad_bytes_per_param=2.0)
    job, _, nano = evaluated(a100, wl, bf16, 32, tp=1, pp=4, zero="1", nanotron_trainer=True)
    _, _, ddp0 = evaluated(a100, wl, bf16, 32, tp=1, pp=4, zero="0", nanotron_trainer=True)
    p_d = P_D
    ag = first(coll.collective_time("allgather", 2.0 * p_d, 8, job.network, stride=1))
    assert first(nano.extras["dp_comm_total"]) == pytest.approx(first(ddp0.extras["dp_comm_total"]) + ag, rel=1e-9)
    # the all-reduce alone moves 2 x 7/8 x 2 bytes a parameter, twice the reduce-scatter's 7/8 x 2
    ar = first(ddp0.extras["dp_comm_total"])
    assert ar > 2 * 7 / 8 * 2.0 * p_d / (300e9 * 0.77)
    # the all-reduce is bucketed under the backward (as at ZeRO 0); the gather after the step is exposed
    assert first(nano.breakdown["dp_comm"]) < first(nano.extras["dp_comm_total"])
    assert first(nano.breakdown["dp_comm"]) >= ag * (1 - 1e-9)


def test_nanotron_is_not_megatron_ddp_or_deepspeed_pipeline(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One trainer a job: nanotron builds torch's DDP or none (trainer.py init_model) and its own pipeline engines, so
    a strategy that also names Megatron-Core's DDP or DeepSpeed's PipelineEngine is refused at the field, and the CLI
    exits 2 with one line, no traceback."""
    for other in ("megatron_ddp", "deepspeed_pipeline"):
        with pytest.raises(InputError, match=f"nanotron_trainer.*{other}"):
            StrategySpec(nanotron_trainer=True, **{other: True})
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 2\n  nanotron_trainer: true\n  megatron_ddp: true\n")
    r = cli("predict", "-c", "dgx-a100", "-m", "gpt-7.5b", "-n", "16", "--strategy", str(f))
    assert r.code == 2 and "Traceback" not in r.err, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "s.yaml: strategy.nanotron_trainer" in lines[0] and "megatron_ddp" in lines[0], r.err


def test_nanotron_runs_its_own_schedules_and_no_cp(cli) -> None:  # type: ignore[no-untyped-def]
    """nanotron's pp_engine is 1f1b or afab (config/utils_config.py at c2528430; afab is GPipe's order) and it has no
    context parallelism: predict refuses interleaved, zb and cp > 1 with the switch (one line, exit 2), and plan pinned
    to nanotron ranks none of them (it ranked interleaved, zb and cp 2-4 plans for llama3-70b on 512 H100s)."""
    import json

    for kw in ({"pp": 4, "schedule": "interleaved:2"}, {"pp": 4, "schedule": "zb"}, {"cp": 2}):
        with pytest.raises(InputError, match="nanotron_trainer"):
            StrategySpec(nanotron_trainer=True, **kw)  # type: ignore[arg-type]
    for sched in ("1f1b", "gpipe"):
        assert StrategySpec(pp=4, schedule=sched, nanotron_trainer=True).nanotron_trainer
    r = cli("predict", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "512", "--tp", "8", "--cp", "2",
            "--set", "strategy.nanotron_trainer=true")
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert r.code == 2 and len(lines) == 1 and "strategy.nanotron_trainer" in lines[0] and "cp 2" in lines[0], r.err
    r = cli("plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "512", "--set", "strategy.nanotron_trainer=true",
            "--json", "--top", "30")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(x["strategy"]["schedule"] in ("1f1b", "gpipe") and x["strategy"]["cp"] == 1
                          and x["strategy"]["zero"] in ("0", "1") for x in ranked)
