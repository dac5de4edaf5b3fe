"""Data-parallel synchronisation and the optimizer step.

The gradient sync of a stage's parameters (:func:`_dp_comm`: buckets as DDP, Megatron-Core and DeepSpeed cut
them (:func:`bucket_count`), the distributed optimizer and ZeRO-1/2 reduce-scatter + all-gather, nanotron's
ZeRO-1, compression, parameter servers (:func:`_ps_exchange`)), the parameter gathers of ZeRO-3 / FSDP / HSDP
(:func:`_sharded_parameter_traffic`), what of them the backward and forward hide (:func:`_sync_comm`,
interleaved schedules: :func:`_expose_param_gather`), optimizer-state offload, and the optimizer step with its
kernels (:func:`_optimizer_time`: Adam, weight copy, grad-buffer reset, fp8 parameter quantize).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
from msgspec.structs import replace

from scalemodel.choices import (
    Algorithm,
    CompressionKind,
    Precision,
    Recompute,
    ScheduleKind,
    SyncKind,
    Zero,
    parse_sync,
)
from scalemodel.cost import compute, memory, ps, state_offload, transformer
from scalemodel.cost.nccl import nccl_graph_channels_inter, nvls_allreduce_applies
from scalemodel.cost.placement import DataParallelGroups, ParallelGroups, Placement, place, rank_strides
from scalemodel.engine.host_floor import CALL_COST_US, SYNC_ROUND_TRIP_US
from scalemodel.engine.job import DDP_BUCKET_BYTES, DEEPSPEED_BUCKET_ELEMENTS, Job, StrategyGrid
from scalemodel.engine.layer_compute import (
    _gathered_bytes,
    _hbm_seconds,
    fp8_params_held,
    fsdp_root_params,
    main_grad_hook_on,
    megatron_ddp_on,
    module_recipe,
    moe_capacity_buffers,
    proj_original_input,
    recomputed_layers,
    vocab_shard_elements,
    xla_remat,
)
from scalemodel.engine.model_parallel_comm import _collective, _priced, nvls_allreduce
from scalemodel.engine.pipeline_ranks import (
    _etp,
    _params_per_gpu,
    _rank_params_per_gpu,
    _stage_layers,
    _stage_params_per_gpu,
    microbatches,
)
from scalemodel.specs.training import OFFLOAD_TENSORS

#: Bytes per parameter of the optimizer's 16-bit weight copy after the step: read the fp32 master weight (4), write
#: the 16-bit model weight (2). It is a kernel of its own after the Adam update (whose 2 K + grad bytes read fp32
#: master, m, v and the gradient and write master, m, v): Megatron-Core's distributed optimizer
#: ``_copy_main_params_to_model_params`` runs ``shard_model_param.data.copy_(shard_main_param)`` per parameter, the
#: fp32 main shard into the bf16 parameter buffer (megatron/core/optimizer/distrib_optimizer.py,
#: NVIDIA/Megatron-LM@baf94af3c6 = core_r0.8.0), as its Float16OptimizerWithFloat16Params does
#: (``_copy_main_params_to_model_params`` -> ``_multi_tensor_copy_this_to_that``, optimizer.py, same commit) and
#: DeepSpeed ZeRO-1/2's ``bit16_partitions[partition_id].data.copy_(fp32_partition.data)`` (``step``,
#: deepspeed/runtime/zero/stage_1_and_2.py).
WEIGHT_COPY_BYTES = 4.0 + 2.0


def _adam_step_bytes(job: Job) -> float:
    """HBM bytes per parameter of the optimizer step on a rank's state shard: 2 K + g + :data:`WEIGHT_COPY_BYTES`
    (read and write the K bytes of fp32 master, m and v; read the g-byte gradient; the 16-bit copy). Read by
    :func:`_optimizer_time` and :func:`optimizer_step_gather_window`."""
    return 2.0 * job.optimizer_bytes_per_param + job.grad_bytes + WEIGHT_COPY_BYTES


def grad_buffer_reset_time(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None) -> np.ndarray:
    """Seconds per step of zeroing Megatron-Core DDP's gradient buffer (:func:`megatron_ddp_on`) or NeMo 1's O2
    fp32 main-gradient buffer (:func:`main_grad_hook_on`), 0 otherwise:

        bytes = P_gpu g        P_gpu = (dense + expert parameters) / (tp pp) (:func:`_params_per_gpu`), unsharded
        t     = bytes / (HBM bandwidth x memory efficiency)

    The training loop calls ``model_chunk.zero_grad_buffer()`` at the start of every iteration, which runs
    ``self.grad_data.zero_()`` over each whole buffer (megatron/core/distributed/param_and_grad_buffer.py
    ``ParamAndGradBuffer.reset`` at core_v0.8.0 baf94af3c6; ``_ParamAndGradBuffer.reset`` at core_v0.15.0 0d7e02bd26
    and 791b70e031): the distributed optimizer shards the optimizer states, not this buffer, which holds a gradient
    element of g bytes (``Job.grad_bytes``) for every parameter of the rank. NeMo 1's training_step calls
    ``self._optimizer.zero_grad()`` first (megatron_gpt_model.py L206 at v1.9.0, L168 at v1.10.0, L201 at v1.11.0),
    which zeroes the whole buffer its O2 hook adds into: MainParamsOptimizerWrapper.zero_grad -> ``GradBucket.zero``,
    ``self.data.zero_()`` (nemo/core/optim/optimizer_with_main_params.py v1.9.0 L249-264 / L77-79, v1.10.0 and
    v1.11.0 L346-361 / L91-93), and Apex DistributedFusedAdam.zero_grad's ``self._grad_buffer.zero_()`` with
    ``contiguous_grad_buffer`` (NeMo v1.11.0 passes it, megatron_gpt_model.py L183; NVIDIA/apex 98661600
    apex/contrib/optimizers/distributed_fused_adam.py L497-505, ericharper/apex nm_v1.11.0 L634-642), unsharded at
    ZeRO 1 too. Once per step, before the first forward; counted with the optimizer step (the state passes between
    two steps). ``layers`` (and ``rank``): a stage of that many layers (pipeline rank ``rank``'s own,
    :func:`_stage_params_per_gpu`), else the stages' mean."""
    on = megatron_ddp_on(g) | main_grad_hook_on(g)
    if not np.any(on):
        return np.zeros(1)
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    return np.asarray(np.where(on, _hbm_seconds(job, (dense + expert) * job.grad_bytes), 0.0))


#: Host reads per bucket of Megatron-Core DDP's gradient NaN check (strategy check_for_nan_in_grad): two
#: ``rerun_state_machine.validate_result`` calls on the bucket's norm, ``rejection_func=torch.isnan`` then
#: ``torch.isinf`` (NVIDIA/Megatron-LM core_v0.13.1 megatron/core/distributed/param_and_grad_buffer.py
#: ``_ParamAndGradBucketGroup.check_grads`` L167-191; 9c5258f109 L410-431), each a Python truth test of a CUDA tensor
#: with reruns disabled (``result_rejected: bool = rejection_func(result)``, rerun_state_machine.py L491-493 at
#: core_v0.13.1). Megatron-Core before the rerun state machine (f2e5db402c L111-118) has one, ``assert not
#: norm.isnan()``; priced at two there too (docs/model.md#nan-check says by how much).
NAN_CHECK_HOST_READS = 2.0


def nan_check_buckets(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None) -> np.ndarray:
    """Gradient buckets of pipeline rank ``rank``'s Megatron-Core DDP wrappers, one per model chunk, as the NaN
    check visits them (:func:`nan_check_time`; docs/model.md#nan-check):

        v     = virtual stages (interleaved schedule at pp > 1), else 1: one DDP, one set of buffers, per chunk
        n_b   = [rank 0] x B(chunk 0)                       rank 0's first chunk, bucketed
              + (v - [rank 0]) x (1 + [experts])            every other chunk: one bucket per buffer
              + [tied, pp > 1, distributed optimizer] x ([last rank] + [rank 0, no overlap])

    B(chunk 0): :func:`bucket_count` of the chunk's dense and expert buffers (layers / v of the stage, with the
    word embedding) at Megatron-Core's bucket (:func:`megatron_bucket_elements`, or the given bucket_size; one per
    buffer without --overlap-grad-reduce). Source: the DDP constructor sets ``bucket_size = None`` (one bucket for
    the whole buffer) where ``pp_rank > 0`` or ``disable_bucketing`` (NVIDIA/Megatron-LM core_v0.13.1
    megatron/core/distributed/distributed_data_parallel.py L177-189; f2e5db402c L66-74; 9c5258f109 L97-105,
    d98e8a64dd L162-170 ``if disable_bucketing or pp_rank > 0``), and every launcher wraps chunk k > 0 with
    ``disable_bucketing`` true: Megatron-LM's get_model (training.py L1139 at core_v0.13.1, L458 at f2e5db402c;
    ``per_chunk_bucket_sizes`` "None if (disable or pp_rank > 0)" at d98e8a64dd L2504-2514, 9c5258f109
    L2260-2270), NeMo 2's ``init_ddp`` (nemo/lightning/megatron_parallel.py L652 at v2.2.0,
    ``(model_chunk_idx > 0) or overlap_param_gather_with_optimizer_step``). Each chunk's DDP builds one buffer per
    (param dtype, grad dtype) group of its dense parameters and one for its experts (L193-293 at core_v0.13.1);
    counted here as one dense buffer a chunk (FP8 parameters, a uint8 group of their own, are not split off) and an
    expert buffer in every chunk of a rank that holds experts. Tied embeddings at pp > 1 with the distributed
    optimizer: the shared weight (``shared_embedding``, set on rank 0's embedding and the last rank's output layer,
    language_module.py L134-151) closes a bucket of its own even with ``bucket_size`` None
    (``_does_param_require_new_bucket``, param_and_grad_buffer.py L575-608): one more bucket on the last rank, and on
    rank 0 where its chunk is one bucket (no overlap; bucketed, :func:`bucket_count` already closes the embedding's
    own bucket where it is at least a bucket). With :func:`optimizer_step_gather` rank 0's first chunk is one bucket a
    buffer too (NeMo 2's ``init_ddp``, ``disable_bucketing = (model_chunk_idx > 0) or
    overlap_param_gather_with_optimizer_step``, megatron_parallel.py L652 at v2.2.0, L668 at v2.3.0; Megatron-LM's
    get_model the same): n_b = v (1 + [experts]) on every rank. ``rank`` None (a workload without layers, or the
    stages' mean): the bucketed chunk, as rank 0's."""
    return _nan_check_buckets(job, g, layers, rank, _stage_params_per_gpu(job, g, layers, rank))


def _nan_check_buckets(job: Job, g: StrategyGrid, layers: Any, rank: Any, params: tuple[np.ndarray, np.ndarray]
                       ) -> np.ndarray:
    """:func:`nan_check_buckets` given the rank's (dense, expert) parameters per GPU, ``params``
    (``_stage_params_per_gpu(job, g, layers, rank)``), which :func:`nan_check_time` reads as well (tidy39: each
    computed them)."""
    q = float(job.grad_bytes)
    elements = np.where(g.bucket_bytes > 0, g.bucket_bytes / q, megatron_bucket_elements(g))
    bucket = np.where(g.overlap, elements, np.inf) * q  # no overlap: one bucket per buffer (megatron_bucket_elements)
    pp = np.asarray(g.pp, dtype=float)
    v = np.where((g.schedule == ScheduleKind.INTERLEAVED) & (pp > 1), np.maximum(g.virtual_stages, 1), 1
                 ).astype(float)
    stage = np.asarray(job.shape.layers / pp if layers is None else layers, dtype=float) if job.is_transformer \
        else None
    dense, expert = params
    if layers is None:
        dense0, expert0 = dense / v, expert / v
    else:
        dense0, expert0 = _stage_params_per_gpu(job, g, np.asarray(layers, dtype=float) / v, rank)
    dense_tensors = expert_tensors = None
    if stage is not None:
        comp = {"layers_per_stage": stage / v}
        if rank is not None:
            comp["pipeline_rank"] = np.asarray(rank, dtype=float)
        dense_tensors, expert_tensors = param_tensors(job, g, comp)
    first = np.ones(1, dtype=bool) if rank is None else (np.asarray(rank) == 0) | (pp <= 1)
    one_bucket = optimizer_step_gather(g)  # chunk 0 unbucketed too (docs/model.md#optimizer-step-gather)
    bucketed = bucket_count(dense0 * q, bucket, q, dense_tensors)
    has_experts = expert > 0
    if job.expert_params > 0:  # the experts' own buffer (Megatron-Core's expert_parallel_buffers), its own buckets
        bucketed = bucketed + np.where(expert0 > 0, bucket_count(expert0 * q, bucket, q, expert_tensors), 0.0)
    whole = 1.0 + np.where(has_experts, 1.0, 0.0)  # one bucket per buffer in every other chunk
    n_b = np.where(first & ~one_bucket, bucketed + (v - 1.0) * whole, v * whole)
    if job.is_transformer and bool(job.shape.tied_embeddings):
        shared = (pp > 1) & (g.zero == Zero.OPTIMIZER)
        last = np.zeros(1, dtype=bool) if rank is None else np.asarray(rank) >= pp - 1
        n_b = n_b + np.where(shared & (last | (first & (~np.asarray(g.overlap, dtype=bool) | one_bucket))), 1.0, 0.0)
    return np.asarray(n_b, dtype=float)


def nan_check_time(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None) -> np.ndarray:
    """Seconds per step of Megatron-Core DDP's gradient NaN check (strategy ``check_for_nan_in_grad`` under
    :func:`megatron_ddp_on`), 0 otherwise (docs/model.md#nan-check):

        n_b   = buckets of the rank's DDP wrappers, one per model chunk (:func:`nan_check_buckets`: rank 0's first
                chunk bucketed, every other chunk one bucket per buffer)
        t     = P_gpu g / (HBM bandwidth x memory efficiency)                        the norms' read of every bucket
              + n_b x 2 x (SYNC_ROUND_TRIP_US + CALL_COST_US['launch'] low) x 1e-6   the host reads and refills

    Source. ``start_grad_sync`` of each bucket group calls ``check_grads`` before its reduce-scatter / all-reduce
    (NVIDIA/Megatron-LM core_v0.13.1 megatron/core/distributed/param_and_grad_buffer.py L291-308; f2e5db402c
    L96-118), which takes ``self.buckets[i].grad_data.norm(p=2)`` of the whole bucket (not the rank's shard; the
    gradient element ``g`` = ``Job.grad_bytes``) on the current, i.e. compute, stream and tests it on the host
    (:data:`NAN_CHECK_HOST_READS`). Each read blocks the host until the norm is done and returns after the
    device-to-host round trip (:data:`~scalemodel.engine.host_floor.SYNC_ROUND_TRIP_US`); the GPU, drained by then,
    idles until the host's next launch (CALL_COST_US 'launch', low): the blocking read empties the host's run-ahead,
    so the backward's remaining kernels and the bucket's collective start after round trip + launch. With
    --overlap-grad-reduce the check runs inside the last backward (the bucket's hook, on the compute stream), without
    it after the backward (finish_grad_sync): on the critical path either way, once a step (start_grad_sync runs on
    the last micro-batch only). No collective is involved, so it locks no replicas together. ``layers`` / ``rank``:
    the stage, as :func:`grad_buffer_reset_time`."""
    on = np.asarray(g.check_for_nan_in_grad, dtype=bool) & megatron_ddp_on(g)
    if not np.any(on):
        return np.zeros(1)
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    n_b = _nan_check_buckets(job, g, layers, rank, (dense, expert))
    reads = n_b * NAN_CHECK_HOST_READS * (SYNC_ROUND_TRIP_US + CALL_COST_US["launch"][0]) * 1e-6
    return np.asarray(np.where(on, _hbm_seconds(job, (dense + expert) * float(job.grad_bytes)) + reads, 0.0),
                      dtype=float)


#: Host reads per micro-batch of the loss function's NaN check (strategy check_for_nan_in_loss): Megatron-LM's
#: pretrain_gpt.py ``loss_func`` calls ``rerun_state_machine.validate_result`` on the micro-batch's loss twice,
#: ``rejection_func=torch.isnan`` then ``torch.isinf`` (NVIDIA/Megatron-LM core_v0.13.1 pretrain_gpt.py L248-264,
#: 9c5258f109 L320-334, d98e8a64dd L263-277), each a Python truth test of a CUDA tensor with reruns disabled
#: (rerun_state_machine.py L520 at 9c5258f109). At f2e5db402c (L136-142) one, ``assert not loss[0].isnan()``; priced
#: at two there too, as :data:`NAN_CHECK_HOST_READS` is (docs/model.md#nan-check says by how much).
NAN_LOSS_HOST_READS = 2.0


def nan_loss_check_time(g: StrategyGrid, m: Any) -> np.ndarray:
    """Seconds per step of the loss function's per-micro-batch NaN check (strategy ``check_for_nan_in_loss``), 0
    where off (docs/model.md#nan-check):

        T = m x 2 x (SYNC_ROUND_TRIP_US + CALL_COST_US['launch'] low) x 1e-6          m micro-batches a step

    Megatron-Core's schedules call the loss function once a micro-batch on the last pipeline stage (its last model
    chunk when interleaved), between the micro-batch's forward and its backward; each read (:data:`NAN_LOSS_HOST_READS`)
    blocks the host until the loss is computed, i.e. until the GPU has run everything queued (the output layer, the
    cross-entropy), and the GPU, drained, idles for the round trip and until the host's next launch (the isinf, then
    the backward's first kernel): the same price a read as :func:`nan_check_time`'s, no new constant. The host is
    ahead at that point on every priced row (the output layer's GEMMs and the cross-entropy are device work the host
    issued in microseconds), so the drain is not in any host term: dense layers' host time is priced 0 and the MoE
    host wait's intervals count the dispatcher's synchronisations, not this one (docs/model.md#host-refill). A lower
    bound: the Python between the reads and the backward (the reporting loss's clone and cat, the schedule's return)
    is left out. On the last stage's critical path in every schedule; no collective, no replicas locked together."""
    on = np.asarray(g.check_for_nan_in_loss, dtype=bool)
    if not np.any(on):
        return np.zeros(1)
    one = NAN_LOSS_HOST_READS * (SYNC_ROUND_TRIP_US + CALL_COST_US["launch"][0]) * 1e-6
    return np.asarray(np.where(on, np.asarray(m, dtype=float) * one, 0.0), dtype=float)


#: Host reads per micro-batch of NeMo 2's token-count test in its training loss (strategy loss_token_count_read):
#: ``if num_valid_tokens < 0.5`` in ``masked_token_loss`` (NVIDIA/NeMo v2.2.0 7192a2c944
#: nemo/lightning/megatron_parallel.py L1798; with CP ``masked_token_loss_context_parallel`` L1815) and ``if
#: num_valid_tokens_in_ub < 0.5`` in ``MaskedTokenLossReduction.forward`` (v2.3.0 2b03b748bb L1798, 7a8f1cc7bc L1798),
#: the Python truth test of a CUDA tensor, once a micro-batch; added by 1626ddded6 (2025-01-15; 42ad3c0afa for the CP
#: path), removed by 58f6689700 (2025-05-05, "Fix loss compute and reduction (#13295)", an ancestor of v2.4.0, not of
#: v2.3.x), which returns the token count unread.
LOSS_TOKEN_COUNT_HOST_READS = 1.0


def loss_token_count_read_time(g: StrategyGrid, m: Any) -> np.ndarray:
    """Seconds per step of NeMo 2's per-micro-batch token-count read (strategy ``loss_token_count_read``), 0 where off
    (docs/model.md#loss-token-count-read):

        T = m x 1 x (SYNC_ROUND_TRIP_US + CALL_COST_US['launch'] low) x 1e-6          m micro-batches a step

    The same price a read as :func:`nan_loss_check_time` (no new constant): the loss function runs once a
    micro-batch on the last pipeline stage between its forward and its backward, the read blocks the host until the
    token sum (queued after the output layer and the cross-entropy) is done, and the drained GPU waits the round trip
    and the next launch. On the last stage's critical path in every schedule; no collective."""
    on = np.asarray(g.loss_token_count_read, dtype=bool)
    if not np.any(on):
        return np.zeros(1)
    one = LOSS_TOKEN_COUNT_HOST_READS * (SYNC_ROUND_TRIP_US + CALL_COST_US["launch"][0]) * 1e-6
    return np.asarray(np.where(on, np.asarray(m, dtype=float) * one, 0.0), dtype=float)


#: Bytes per parameter per step of nanotron's passes over its whole fp32 gradient buffer outside the optimizer:
#: ``clip_grad_norm`` reads every gradient once for its per-parameter norms (``torch.linalg.vector_norm`` of each
#: ``grad_accumulator.get_grad_buffer(name)``) and scales each in place (``.mul_``: read and write), 4 + 4 + 4, over
#: every parameter the rank holds, not its ZeRO shard (huggingface/nanotron@c2528430 src/nanotron/optim/clip_grads.py
#: lines 44-94, called from trainer.py training_step lines 528-541; the benchmark config sets clip_grad 1.0,
#: examples/config_tiny_llama_bench.yaml line 56 at 67c5ebb6); then ``FP32GradientAccumulator.zero_grad`` zeroes the
#: whole contiguous buffer, write 4 (optim/gradient_accumulator.py line 276).
NANOTRON_GRAD_BUFFER_BYTES = 4.0 + 4.0 + 4.0 + 4.0
#: Bytes per parameter per step of PyTorch DDP's bucket copies at nanotron's ZeRO 0 (DDP only where dp > 1:
#: trainer.py ``init_model`` lines 786-788; built without ``gradient_as_bucket_view``, lines 847-852, so False): on the
#: sync micro-batch the reducer copies each 16-bit gradient into its bucket (``bucket_view.copy_(grad)`` with a comm
#: hook, read 2 + write 2) and after the hook copies the bucket back into the gradient (``copy_bucket_to_grad``, "If
#: gradient_as_bucket_view_ is false, after allreduce buckets, copy bucket results back to grads", read 2 + write 2)
#: (pytorch/pytorch@00413201d3 torch/csrc/distributed/c10d/reducer.cpp ``Reducer::mark_variable_ready_dense``,
#: ``Reducer::copy_bucket_to_grad``).
NANOTRON_DDP_COPY_BYTES = 2.0 + 2.0 + 2.0 + 2.0


#: Bytes per DDP bucket under nanotron: ``ddp_bucket_cap_mb`` 25 (the benchmark config,
#: examples/config_tiny_llama_bench.yaml at 67c5ebb6; the default, config.py at c2528430) is passed as
#: DistributedDataParallel's ``bucket_cap_mb`` (trainer.py lines 847-852), which PyTorch reads in MiB:
#: ``self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)`` (pytorch/pytorch@25562d3d41
#: torch/nn/parallel/distributed.py), 26,214,400 bytes = 13,107,200 bf16 elements: the same bytes as the model's
#: generic PyTorch DDP default, job.DDP_BUCKET_BYTES, but filled by the 16-bit gradients (see _bucket_bytes).
NANOTRON_DDP_BUCKET_BYTES = DDP_BUCKET_BYTES


def nanotron_grad_buffer_time(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None) -> np.ndarray:
    """Seconds per step of nanotron's gradient clipping and buffer reset over its fp32 gradient buffer, and at ZeRO 0
    of DDP's bucket copies (``nanotron_trainer`` with a gradient element wider than the parameter,
    accumulate_grad_in_fp32), 0 otherwise:

        bytes = P_gpu x (16 + 8 [zero 0 and dp > 1])    P_gpu = (dense + expert parameters) / (tp pp)
        t     = bytes / (HBM bandwidth x memory efficiency)                  (:func:`_params_per_gpu`, unsharded)

    (:data:`NANOTRON_GRAD_BUFFER_BYTES`, :data:`NANOTRON_DDP_COPY_BYTES`). Counted with the optimizer step, as
    :func:`grad_buffer_reset_time` is (the copies run at the end of the last backward, equally serial). With
    ``layers`` and ``rank``: that pipeline rank's own parameters (:func:`_stage_params_per_gpu`)."""
    fp32 = bool(job.grad_bytes > job.elem_bytes)
    if not fp32 or not np.any(g.nanotron_trainer):
        return np.zeros(1)
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    ddp = (g.zero == Zero.NONE) & (g.dp > 1)
    per_param = NANOTRON_GRAD_BUFFER_BYTES + np.where(ddp, NANOTRON_DDP_COPY_BYTES, 0.0)
    t = _hbm_seconds(job, (dense + expert) * per_param)
    return np.asarray(np.where(g.nanotron_trainer, t, 0.0))


#: Commands a CUDA stream queues before the host's next launch on it blocks until the device retires one: "about
#: 1000" kernels, measured (a host loop of 10,000 launches of a 190 us kernel took 4-5 us a launch for the first
#: ~1000, then ~190 us, the kernel's own time: forums.developer.nvidia.com thread 68937 and stackoverflow.com question
#: 53970187, 2018, "the buffer size is about 1000 kernels", per stream), 1024 per stream (Oneflow-Inc/oneflow pull
#: request 890, 2018: over 1024 kernels in a stream its calls turn blocking). Both predate Hopper and CUDA 12; no later
#: figure was found (hardware/measurements/host_overhead.yaml ``launch_queue``). An upper bound on how far the host
#: can run ahead of one stream, used as such: a larger queue would hide more of a host loop, a smaller one less.
CUDA_LAUNCH_QUEUE_DEPTH = 1024.0


#: Bytes per parameter (x the parameter element) of the device copies around nanotron's ZeRO-1 gather that run in
#: series with it: ``all_gather_coalesced`` flattens each rank's list of output slices (``_flatten_dense_tensors``, a
#: cat: read 1, write 1 over the whole parameter) before the collective, and ProcessGroupNCCL's list ``allgather``
#: copies its flat output into the list's tensors on the NCCL stream after it (read 1, write 1: the post hook's
#: ``outputTensors_[j].copy_(outputFlattened[j], true)``, torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp as read at
#: pytorch/pytorch@cf1380dfb6; the rows' torch 2.1 is taken to run the same list path); the input's flatten, 2 / dp
#: more, is added where priced (:func:`nanotron_gather_loop_time`).
NANOTRON_GATHER_SERIAL_COPIES = 2.0 + 2.0
#: Bytes per parameter (x the element) of ``update_output``'s copies back into the parameters: read 1, write 1.
NANOTRON_GATHER_LOOP_COPIES = 2.0


def nanotron_gather_loop_time(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None) -> np.ndarray:
    """Seconds per step around nanotron's ZeRO-1 parameter all-gather: the device copies in series with it and the
    host tail of its Python copy loop after it (``nanotron_trainer`` at zero 1 with dp > 1, any gradient element;
    0 otherwise):

        N = dp x n_t                 eager ``copy_`` calls, n_t the rank's parameter tensors (:func:`param_tensors`)
        t = (4 + 2 / dp) P_d e / B + max((N - Q) x c_op, 2 P_d e / B)
                                     Q = CUDA_LAUNCH_QUEUE_DEPTH, c_op = host_floor.CALL_COST_US["op"] low, 8.3 us

    ``P_d`` the rank's parameters, ``e`` the parameter element, ``B`` the HBM bandwidth x memory efficiency.

    Source, huggingface/nanotron@c2528430 (the same at 67c5ebb6): ``ZeroDistributedOptimizer.step`` ends with
    ``_all_gather_params`` (src/nanotron/optim/zero.py lines 94-120, 217-251), which passes, for every parameter and
    every dp rank, a slice of the parameter as an output to ``dist.all_gather_coalesced`` (src/nanotron/distributed.py
    lines 153-220). That flattens the input shards and each rank's list of output slices (``_flatten_dense_tensors``,
    one cat each, on the current stream, before the collective: (2 / dp + 2) P_d e bytes), issues one synchronous
    ``dist.all_gather`` of the flat buffers, which ProcessGroupNCCL runs as one ncclAllGather into a flat output and
    copies into the list's tensors on the NCCL stream after it (2 P_d e; its ``work.wait()`` makes the current stream
    wait on the NCCL stream, not the host), and then, in ``update_output``, copies every gathered piece back with
    ``original_buffer.copy_(gathered_buffer)`` in a Python loop over ranks and parameters: dp x n_t eager ops, each
    one D2D copy on the current stream, queued behind the gather (2 P_d e in all). The host cannot queue more than Q
    of them before the all-gather completes: the (Q+1)th launch blocks until the device retires a command, and none
    of these can run before the gather ends. From then on each copy is a small transfer (2 x P_d e / N bytes on
    average: 160 kB for 3.57B at dp 128) that the device finishes in a few microseconds, faster than the host issues
    the next, so the remaining N - Q copies take at least their host time after the gather, whatever the host's lead
    before it, and all N at least their bytes' time. Nothing in the step synchronises the host before the closing
    ``dist.barrier()`` + ``torch.cuda.synchronize()`` (trainer.py ``train_step_logs``), so the loop ends the step.

    A lower bound: the host's per-call cost at the low end of the published range (PyTorch issue 161822's eager
    matmul loop; an eager ``copy_`` runs the same dispatcher and one runtime call), and the Python slicing of the
    same dp x n_t pieces before the gather (``_all_gather_params``' list comprehensions) and the per-rank
    ``_unflatten_dense_tensors`` views left out (their exposure depends on the host's lead, which the code does not
    fix). With ``layers`` and ``rank``: that pipeline rank's tensors and parameters; else the stage's mean share with
    every tensor outside the layers. docs/model.md#nanotron-gather-loop"""
    on = nanotron_zero1(g) & (g.dp > 1)
    if not np.any(on) or not job.is_transformer:
        return np.zeros(1)
    stage = float(job.shape.layers) / g.pp if layers is None else np.asarray(layers, dtype=float)
    comp: dict[str, np.ndarray] = {"layers_per_stage": np.asarray(stage, dtype=float) + np.zeros(np.shape(g.dp))}
    if rank is not None:
        comp["pipeline_rank"] = np.asarray(rank, dtype=float)
    dense_t, expert_t = param_tensors(job, g, comp)
    n_t = sum((c for c, _ in (dense_t or []) + (expert_t or [])), np.zeros(1))
    calls = g.dp * n_t
    host = np.maximum(calls - CUDA_LAUNCH_QUEUE_DEPTH, 0.0) * CALL_COST_US["op"][0] * 1e-6
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    p_e = (dense + expert) * float(job.elem_bytes)
    serial = _hbm_seconds(job, p_e * (NANOTRON_GATHER_SERIAL_COPIES + 2.0 / np.maximum(g.dp, 1.0)))
    t = serial + np.maximum(host, _hbm_seconds(job, p_e * NANOTRON_GATHER_LOOP_COPIES))
    return np.asarray(np.where(on, t, 0.0))


#: Bytes of one rank's contribution to a metric state's all-gather: a 0-d tensor, fp32 (``sum_loss``,
#: ``torch.tensor(0.)``) or int64 (``total_items``, ``torch.tensor(0)``): the larger, 8, for every state.
METRIC_STATE_BYTES = 8.0
#: Host calls per state after the gather: ``torch.stack`` of the gathered tensors and the state's reduction
#: (``dim_zero_sum``), torchmetrics ``Metric._sync_dist``.
METRIC_STATE_REDUCE_OPS = 2.0


def train_metric_sync_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per step the GPU waits while the host gathers the training metrics' states over every rank (strategy
    ``train_metric_states`` = S, 0 = none), with W = the job's GPUs:

        t_state = AllReduce(1 B, W) + (W + 2) c_op + max(AllGather(8 W B, W), W c_launch)
        T = S t_state                 c_op, c_launch = host_floor.CALL_COST_US["op"], ["launch"] low: 8.3, 5 us

    Source. Composer computes every train metric after every batch (composer/trainer/trainer.py ``_train_loop`` ->
    ``_compute_and_log_metrics``: ``metric.compute()`` for each, at mosaicml/composer v0.17.2, the release
    llm-foundry@5e85bd62d pins, and the same call at v0.13.2), after the batch's loss has been all-reduced and read
    with ``.item()`` (the device is idle: nothing of the next batch is issued before the loop returns). torchmetrics'
    ``compute()`` syncs the states over the default (world) group first (``Metric.sync`` -> ``_sync_dist`` ->
    ``gather_all_tensors`` per state, Lightning-AI/torchmetrics v1.0.3 src/torchmetrics/utilities/distributed.py, the
    newest release Composer 0.17 allows, ``torchmetrics>=0.10.0,<1.1``; the same at v0.11.4): a
    ``torch.distributed.barrier`` (ProcessGroupNCCL runs it as an all-reduce of one byte and waits for the device),
    then, a 0-d state, ``_simple_gather_all_tensors``: ``[torch.zeros_like(result) for _ in range(world_size)]`` (W
    Python calls) and ``torch.distributed.all_gather`` into that list, which ProcessGroupNCCL runs as one
    ncclAllGather into a flat buffer followed by ``outputTensors[i][j].copy_(outputFlattened[i][j], true)`` for each
    of the W outputs, issued from C++ on the NCCL stream (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    ``ProcessGroupNCCL::allgather``, as read at pytorch/pytorch@cf1380dfb6, the torch 2.1-era multi-device API), then
    ``torch.stack`` and the reduction. The copies are issued while the gather runs, so the larger of the two counts.
    Every call runs in series with the device idle: a lower bound at the low end of the published per-call costs
    (hardware/measurements/host_overhead.yaml), the logging's ``.item()`` reads and Composer's own per-batch
    collectives (the loss all-reduce, the samples / tokens all-reduce and the batch-time broadcast) left out.
    docs/model.md#train-metric-sync"""
    states = np.asarray(g.train_metric_states, dtype=float)
    if not np.any(states > 0):
        return np.zeros(1)
    world = g.gpus.astype(float)
    group = place(world, 1.0, job.network)
    barrier = _collective("allreduce", np.ones(np.shape(world)), group)
    gather = _collective("allgather", METRIC_STATE_BYTES * world, group)
    c_op, c_launch = CALL_COST_US["op"][0] * 1e-6, CALL_COST_US["launch"][0] * 1e-6
    one = barrier + (world + METRIC_STATE_REDUCE_OPS) * c_op + np.maximum(gather, world * c_launch)
    return np.asarray(np.where((states > 0) & (world > 1), states * one, 0.0), dtype=float)


#: Bytes of one micro-batch's loss all-reduced over the data-parallel group (strategy loss_dp_allreduce): one fp32
#: value (NeMo's loss_func reduces ``loss_for_ub``, the masked mean of the fp32 per-token losses).
LOSS_ALLREDUCE_BYTES = 4.0


def loss_allreduce_time(g: StrategyGrid, groups: ParallelGroups, m: np.ndarray) -> np.ndarray:
    """Seconds per step of the per-micro-batch loss all-reduce over the data-parallel group (strategy
    ``loss_dp_allreduce``), on the last pipeline stage's critical path:

        T = m x AllReduce(4 B, the dp replicas at the DP stride)          0 where off or dp = 1

    Source. NeMo 1's ``MegatronGPTModel.get_forward_output_and_loss_func`` ``loss_func`` returns, for a training
    micro-batch, ``average_losses_across_data_parallel_group([loss_for_ub])`` (NVIDIA/NeMo bd0b818ac2
    megatron_gpt_model.py L840, b2eccd270d L1184, 24.09-alpha.rc0 L1353, v2.0.0 L1362), which calls
    ``torch.distributed.all_reduce(averaged_losses, group=parallel_state.get_data_parallel_group())``
    (nemo/collections/nlp/modules/common/megatron/utils.py L188-196 at b2eccd270d): not ``async_op``, so the compute
    stream waits for it, unconditionally (no config switch). Megatron-Core's schedules call the loss function once a
    micro-batch on the last pipeline stage (its last model chunk when interleaved), between that micro-batch's forward
    and its backward. NeMo 2's ``MaskedTokenLossReduction.forward`` did the same (nemo/lightning/megatron_parallel.py
    L1750 at v2.2.0 7192a2c944, L1813 at v2.3.0 2b03b748bb) until 58f6689700 (2025-05-05, "Fix loss compute and
    reduction"), which is in neither v2.3.0 nor 7a8f1cc7bc; Megatron-LM's pretrain_gpt.py loss_func all-reduces its
    reporting loss (sum and token count, 8 bytes) over the data-parallel group likewise (NVIDIA/Megatron-LM f2e5db402c
    L145) until 3806ec2754 (2025-04-30). The message is latency-bound (4 or 8 bytes: the same time to well under 1 %).
    docs/model.md#loss-dp-allreduce"""
    on = np.asarray(g.loss_dp_allreduce, dtype=bool) & (np.asarray(g.dp) > 1)
    if not np.any(on):
        return np.zeros(1)
    one = _collective("allreduce", np.full(1, LOSS_ALLREDUCE_BYTES), groups.data.dense)
    return np.asarray(np.where(on, np.asarray(m, dtype=float) * one, 0.0), dtype=float)


#: Bytes of the gradient norm Megatron-Core's optimizer all-reduces once a step
#: (:func:`optimizer_stats_allreduce_time`): one fp32, the sum of the shard's squared norms.
GRAD_NORM_ALLREDUCE_BYTES = 4.0
#: Bytes per parameter tensor of the tensorwise FP8 parameters' amax all-reduce (one fp32 amax each).
PARAM_AMAX_BYTES = 4.0


def optimizer_stats_allreduce_time(job: Job, g: StrategyGrid, groups: ParallelGroups) -> np.ndarray:
    """Seconds per step of the two small all-reduces Megatron-Core's distributed optimizer issues in its step (strategy
    ``megatron_ddp`` at ZeRO 1), in series on the compute stream between the last gradient reduce-scatter and the
    parameter all-gather, so exposed whole:

        T = AllReduce(4 B, all W GPUs)                                   the gradient norm
          + AllReduce(4 n_t B, the dp x cp sharding group)               tensorwise FP8 parameters only

    Source (NVIDIA/Megatron-LM@d98e8a64dd). The gradient norm: ``MixedPrecisionOptimizer.step`` clips where
    ``config.clip_grad > 0`` (megatron/core/optimizer/optimizer.py L830-831; OptimizerConfig's default 1.0, every
    MLPerf llama31 run's opt_gradient_clip_norm 1.0), and ``clip_grad_norm`` -> ``get_grad_norm_fp32``
    (optimizer.py L374-390; clip_grads.py L55-140) sums the shard's squared norm (one multi_tensor_l2norm) and
    all-reduces it over ``grad_stats_parallel_group``, which the distributed optimizer sets to the
    intra-distributed-optimizer-instance group (optimizer/__init__.py L671-674), every rank of the job with one
    instance (parallel_state.py L1561-1576: the tp-ep-pp groups of all data-parallel ranks), an fp32 scalar
    (no host read where multi_tensor_scale_tensor_impl exists). The parameters' amaxes: with FP8 parameters under
    current scaling (fp8_param_gather, recipe tensorwise) ``_copy_main_params_to_model_params`` calls
    ``quantize_param_shard(..., self.data_parallel_group)`` (distrib_optimizer.py L2847-2852), which reaches
    Transformer Engine's ``_cast_master_weights_to_fp8_current_scaling`` (NVIDIA/TransformerEngine@d0067d0
    transformer_engine/pytorch/tensor/utils.py L466-532): a packed fp32 amax per FP8 parameter, every one of them,
    ``all_reduce(packed_amaxes, MAX, group)`` over the optimizer's data-parallel (dp x cp) group, before the casts.
    n_t: the rank's parameter tensors (:func:`param_tensors`; an upper bound on its FP8 weights, norms counted), a
    message under 1 kB whose time is the collective's latency. Delayed scaling casts with the previous scale (no
    reduction here); blockwise and NVFP4 reduce per tile, not priced here. 0 off Megatron-Core's distributed
    optimizer. docs/model.md#optimizer-stats-allreduce"""
    on = megatron_ddp_on(g) & (g.zero == Zero.OPTIMIZER) & (g.gpus > 1)
    if not np.any(on):
        return np.zeros(1)
    world = place(g.gpus.astype(float), 1.0, job.network)
    norm = _collective("allreduce", np.full(1, GRAD_NORM_ALLREDUCE_BYTES), world)
    amax = np.zeros(1)
    if job.fp8_recipe == "tensorwise" and job.is_transformer:
        comp: dict[str, np.ndarray] = {
            "layers_per_stage": float(job.shape.layers) / np.asarray(g.pp, dtype=float) + np.zeros(np.shape(g.dp))}
        dense_t, expert_t = param_tensors(job, g, comp)
        n_t = sum((c for c, _ in (dense_t or []) + (expert_t or [])), np.zeros(1))
        shard = groups.data.sharding
        amax = np.where(fp8_params_held(job, g) & (shard.ranks > 1),
                        _collective("allreduce", PARAM_AMAX_BYTES * np.maximum(n_t, 1.0), shard.dense), 0.0)
    return np.asarray(np.where(on, norm + amax, 0.0), dtype=float)


def hsdp_shard_group(job: Job, g: StrategyGrid) -> np.ndarray:
    """Data-parallel replicas per HSDP sharding group: the strategy's ``shard_group``, else the replicas
    that fit in one node (gpus_per_node / the DP stride, i.e. / (tp cp) in the default rank order; at least 1,
    at most dp), as PyTorch's HYBRID_SHARD is usually set up (shard inside the node, replicate across nodes)."""
    stride = rank_strides(g.layout, tp=g.tp, cp=g.cp, dp=g.dp, pp=g.pp)["dp"].astype(np.int64)  # tp cp by default
    in_node = np.maximum(job.gpus_per_node // np.maximum(stride, 1), 1)
    asked = np.where(g.shard_group > 0, g.shard_group, np.minimum(in_node, g.dp))
    # a group that does not divide dp is infeasible (HSDP_GROUP_INVALID); price the largest that does
    return np.asarray(np.gcd(asked, g.dp), dtype=float)


def hier_group(g: StrategyGrid, sync: str) -> np.ndarray | None:
    """The data-parallel replicas per group of hier:G (min(dp, G)), or None for every other sync mode.

    Under hier:G the groups step apart (asynchronously, or averaging every H steps), so ZeRO 1-3, FSDP and
    HSDP can shard the model states only inside a group: each group holds one sharded copy (FSDP
    HYBRID_SHARD's layout with its shard group = the hier group; torchft runs FSDP inside each replica group
    and LocalSGD/DiLoCo across the replicated dimension, github.com/meta-pytorch/torchft), and the cross-group
    exchange all-reduces each rank's reduced 1/G shard (docs/model.md#sync)."""
    strategy = parse_sync(sync)
    return np.minimum(g.dp, float(strategy.param)).astype(float) if strategy.kind == SyncKind.HIER else None


def _state_replicas(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """Data-parallel replicas ZeRO/FSDP shard the model states over: dp, the HSDP group, or under hier:G the group
    of G (:func:`hier_group`; HSDP's shard group is then the hier group)."""
    group = hier_group(g, sync)
    if group is not None:
        return group
    return np.where(g.zero == Zero.HSDP, hsdp_shard_group(job, g), g.dp)


def _expert_state_shards(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """Ranks the routed experts' states are sharded over by ZeRO/FSDP: the expert-data-parallel ranks of
    :func:`scalemodel.cost.memory.expert_data_parallel` over :func:`_state_replicas` (tp cp dp / (etp ep));
    the count both :func:`~scalemodel.engine.stage_memory.memory_parts` and :func:`_optimizer_time` use for the
    experts."""
    return memory.expert_data_parallel(_state_replicas(job, g, sync), tp=g.tp, cp=g.cp, ep=g.ep, etp=_etp(g))


def _state_shards(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """Ranks a transformer's dense model states are sharded over by ZeRO/FSDP: the replicas they are sharded
    over (:func:`_state_replicas`: dp, the HSDP shard group, or hier:G's group) times the context-parallel
    degree. CP ranks hold the same weights: Megatron-Core builds its distributed optimizer over
    ``get_data_parallel_group(with_context_parallel=True)``, megatron/core/optimizer/__init__.py; torchtitan
    shards FSDP over the ``dp_shard_cp`` mesh and HSDP over ``("dp_replicate", "dp_shard_cp")``, replicating over
    dp_replicate only (torchtitan/models/llama3/infra/parallelize.py @91ee9ad31; today's ParallelDims.build_mesh
    names it ``fsdp`` = dp_shard x cp). The one count both the memory model
    (:func:`~scalemodel.engine.stage_memory.memory_parts`) and the
    optimizer step (:func:`_optimizer_time`) divide the states by."""
    return np.asarray(_state_replicas(job, g, sync) * g.cp)


def offloaded_tensor_bytes(job: Job, g: StrategyGrid) -> np.ndarray:
    """Bytes per layer and micro-batch that strategy ``offload_tensors`` sends to host memory (docs/model.md#offload).

    MaxText names the tensors with ``checkpoint_name`` and offloads them by JAX
    ``save_and_offload_only_these_names(..., offload_src="device", offload_dst="pinned_host")``
    (AI-Hypercomputer/maxtext@92e59fdf5 src/MaxText/layers/decoders.py ``get_remat_policy``, ``custom`` and
    ``qkv_proj_offloaded``). Per token (b s / cp of them), elements of the job's activation dtype (``elem_bytes``:
    MaxText's ``dtype``, default bfloat16 in src/MaxText/configs/base.yml; 2 in fp8 / fp4 runs, whose activations the
    model keeps 16-bit; 4 in a 32-bit run), the bytes the host link carries and the bytes cost.memory's activation
    terms of the same tensors count (the layer input, Q, K, V and out_proj at ``elem_bytes``: mem31b), so the bytes
    that leave HBM are the bytes counted there:

        decoder_layer_input, out_proj   h        (h / t with sequence parallelism, as the layer input of cost.memory)
        query_proj                      a d / t  (a heads of d = head_dim)
        key_proj, value_proj            k d / t  (k kv heads)
    """
    code = np.asarray(g.offload_tensors, dtype=np.int64)
    if not np.any(code > 0):
        return np.zeros(1)
    sh = job.shape
    t = np.asarray(g.tp, dtype=float)
    residual = sh.hidden / np.where(np.asarray(g.sequence_parallel, dtype=bool), t, 1.0)
    width = dict(decoder_layer_input=residual, query_proj=sh.heads * sh.head_dim / t,
                 key_proj=sh.kv_heads * sh.head_dim / t, value_proj=sh.kv_heads * sh.v_head_dim / t,
                 out_proj=residual)
    per_token = sum((np.where(code >> b & 1, width[n], 0.0) for b, n in enumerate(OFFLOAD_TENSORS)), np.zeros(1))
    return np.asarray(job.elem_bytes * g.micro_batch * job.seq_len / g.cp * per_token, dtype=float)


def _offload_time(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray],
                  layer_comm: np.ndarray | float = 0.0) -> np.ndarray:
    """Exposed seconds per micro-batch of activation offload to host memory (docs/model.md#offload).

    Megatron-Core ``cpu_offloading_num_layers`` k (Transformer Engine cpu_offload.py,
    AsyncDoubleBufferGroupOffloadHandler: "D2h and h2d copying are completely hidden behind computation
    if computation time of a layer is longer than host-device communication time"): each offloaded
    layer's activations A (the no-recompute row of cost.memory, Megatron forbids recompute with offload)
    leave the GPU while the next layer's forward runs and come back while the layer above it runs its
    backward; A is the bytes the memory model takes off the GPU for such a layer
    (:func:`scalemodel.cost.memory.layers_activation_bytes` / layers: an fp8 / fp4 run's quantized GEMM inputs,
    training.module_precision's modules, a hybrid's Mamba layers; mem32). With c = A / host_bandwidth (per GPU,
    per direction; PCIe or NVLink-C2C) and W_f, W_b one layer's forward and backward wall time:

        exposed = k (max(0, c - W_f) + max(0, c - W_b)),   W_f = f + e/3,  W_b = 2 f + 2 e/3

    f the layer's forward compute and e ``layer_comm``, the TP/CP/EP seconds per layer and micro-batch the
    step already exposes (split 1:2 like the compute). The copy engines keep copying while the SMs wait on
    NVLink, so a layer hides copies for its whole wall time, not only its compute: each layer then costs
    max(W, c), which never grows when the compute gets faster (summing copy and TP exposure each against
    the compute alone did: tests/test_physics.py test_faster_accelerator_never_slower). Copies run on the
    copy engines, not the SMs: no ``contention``.

    ``offload_tensors`` (MaxText's named-tensor offload, :func:`offloaded_tensor_bytes`) is the same copy with
    A = the named tensors' bytes and k = every layer of the stage: the TPU's DMA engines move them beside the
    compute (XLA host offloading) as the copy engines do on a GPU.
    """
    tensors = np.asarray(g.offload_tensors) > 0
    k = np.where(tensors, comp["layers_per_stage"], np.minimum(g.offload_layers, comp["layers_per_stage"]))
    k = np.asarray(k, dtype=float)
    if not job.is_transformer or not np.any(k > 0) or job.host_bandwidth <= 0:
        return np.zeros(1)
    sh = job.shape
    # the memory model's saved tensors of a layer at recompute none (stage_memory._memory_kwargs' arguments: the
    # quantized GEMM inputs of an fp8 / fp4 run, the modules at their own precision, a hybrid's Mamba layers), the
    # bytes cost.memory.activation_bytes takes off the GPU for an offloaded layer (mem32: one rule)
    per_layer = memory.layers_activation_bytes(
        sh, "none", None, micro_batch=g.micro_batch, seq_len=job.seq_len, tp=g.tp, cp=g.cp,
        sequence_parallel=g.sequence_parallel, flash_attention=g.flash_attention, etp=_etp(g),
        elem_bytes=job.elem_bytes, fp8_inputs=memory.quantized_input_bytes(job.fp8_recipe),
        recompute_modules=g.recompute_modules, **module_input_bytes(job), **proj_input_bytes(job, g),
        **moe_capacity_buffers(job, g)) / float(
            sh.layers)
    c = np.where(tensors, offloaded_tensor_bytes(job, g), per_layer) / job.host_bandwidth
    e = np.asarray(layer_comm, dtype=float)
    w_f = comp["forward_per_layer"] + e / 3.0
    return np.asarray(k * (np.maximum(c - w_f, 0.0) + np.maximum(c - 2.0 * w_f, 0.0)), dtype=float)


def _offload_exposed(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray,
                     gathers_exposed: Exposure, layer_comm: np.ndarray | float = 0.0) -> np.ndarray:
    """Exposed offload seconds per step: m x :func:`_offload_time`, less the time the layers already
    wait for their ZeRO-3/FSDP parameter gathers (docs/model.md#offload).

    The copy engines keep copying while a layer waits for its gather, so per layer the step pays
    max(copy excess, gather stall), not their sum; summed over the step this is taken as
    max(m t_offload, gathers_exposed) = gathers_exposed + max(m t_offload - gathers_exposed, 0), the
    second term being this part. Without sharded parameters it is m t_offload.

    ``gathers_exposed``: the exposure of the gathers the step's sync prices (:func:`_sync_traffic`'s first
    :data:`DpTraffic`: the whole data-parallel group's units, HSDP's shard group's, or under hier:G the in-group
    ones), read under the windows of ``comp``; the collectives are priced once for both (sync28b: before, the
    offload priced every data-parallel collective again only for its gathers' exposure).
    """
    per_mb = _offload_time(job, g, comp, layer_comm)
    if not np.any(per_mb > 0):
        return np.zeros(1)
    total = m * per_mb
    if np.any(g.zero >= Zero.PARAMETERS):  # (hier:G's cross-group all-reduces wait for no layer: left out)
        total = np.maximum(total - gathers_exposed(comp, cross=False), 0.0)
    return np.asarray(total, dtype=float)


def _expose_param_gather(g: StrategyGrid, comp: dict[str, np.ndarray], grads: np.ndarray,
                         last_bucket: np.ndarray, gather: np.ndarray, opt_window: Any = 0.0) -> np.ndarray:
    """Exposed gradient sync, its ZeRO-1/2 parameter all-gather apart (docs/model.md#overlap-param-gather).

    ZeRO-1/2 synchronises by a reduce-scatter of the gradients, RS = ``grads`` - AG, and an all-gather of the
    updated parameters, AG = ``gather`` (:func:`_dp_comm`'s ``param_gather``, 0 where there is none). With Megatron-LM
    ``--overlap-param-gather`` the all-gather of each bucket is issued after the optimizer step and waited for by
    the forward pre-hook of the bucket's first layer in the next step (megatron/core/distributed/
    param_and_grad_buffer.py), so it runs under the first micro-batch's forward; the reduce-scatters stay under
    the last backward (``--overlap-grad-reduce``):

        exposed = max(RS - backward_free, RS x last_bucket) + max(AG - forward_free, AG x last_bucket)

    (the first gathered bucket has no compute before it, as the last reduced one has none after it).
    Without the switch the all-gather is exposed whole: it needs the optimizer step's result, and Megatron-Core
    issues it synchronously after the step (``start_param_sync`` with ``async_op`` false), as DeepSpeed's
    ZeRO-1/2 ``step`` does (``all_gather_dp_groups``, deepspeed/runtime/zero/stage_1_and_2.py):

        exposed = max(RS - backward_free, RS x last_bucket) + AG          (overlap on, switch off)
                = RS + AG                                                  (overlap off)

    Other ZeRO stages (AG = 0): :func:`_expose` unchanged. Under :func:`optimizer_step_gather` the first chunk is one
    bucket: its reduce-scatter leaves with its last backward (``first_bucket`` the chunk's whole r in
    :func:`interleaved_grad_sync_exposed`) and its gather runs under ``opt_window`` (H,
    :func:`optimizer_step_gather_window`) in :func:`interleaved_param_gather_exposed`
    (docs/model.md#optimizer-step-gather).
    """
    zero12 = (g.zero == Zero.OPTIMIZER) | (g.zero == Zero.GRADIENTS)
    ag = np.asarray(gather, dtype=float)
    rs = np.maximum(grads - ag, 0.0)
    opg = g.overlap_param_gather & g.overlap & zero12
    hidden_ag = np.minimum(np.maximum(ag - comp["forward_free"], ag * last_bucket), ag)
    whole_stage = _expose(g, comp, rs, last_bucket) + np.where(opg, hidden_ag, ag)
    chunked = interleaved_dp_sync(g)
    if not np.any(chunked):
        return np.asarray(whole_stage)
    # the interleaved schedule syncs chunk by chunk (docs/model.md#interleaved-dp-sync); its chunks' last backwards
    # (first forwards) lie one micro-batch group apart, pp chunk-passes, or all m where m < pp (schedules.py
    # get_schedule_table's last group at d98e8a64dd; predict refuses m < pp, interleave_invalid, but the windows of
    # such a candidate stay within its m micro-batches' compute)
    v = np.maximum(g.virtual_stages, 1).astype(float)
    group = np.minimum(g.pp, microbatches(g))
    # NeMo 1's Apex route (bucket_fragments) always passes grad_sync_func and param_sync_func (apex-interleaved)
    apex = np.asarray(g.bucket_fragments, dtype=bool)
    opt_step = optimizer_step_gather(g)  # chunk 0 one bucket, gathered in the optimizer step
    rs_i = interleaved_grad_sync_exposed(rs, comp["backward_free"], group, v,
                                         np.where(opt_step, rs, rs * last_bucket), g.align_grad_reduce | apex)
    ag_i = np.where(apex, apex_interleaved_param_gather_exposed(ag, comp["forward_free"], group, v),
                    interleaved_param_gather_exposed(ag, comp["forward_free"], group, v, ag * last_bucket,
                                                     g.align_param_gather, opt_step, opt_window))
    return np.asarray(np.where(chunked, rs_i + np.where(opg, ag_i, ag), whole_stage))


def deepspeed_zero2(g: StrategyGrid) -> np.ndarray:
    """bool per grid point: ZeRO-2 as DeepSpeed runs it (zero 2, none of Megatron-Core's DDP, Apex's
    DistributedFusedAdam or nanotron's trainer), which reduces the gradients after every micro-batch's backward
    (:func:`_dp_traffic`; docs/model.md#zero12-sync)."""
    return np.asarray((g.zero == Zero.GRADIENTS) & ~np.asarray(g.megatron_ddp, dtype=bool)
                      & ~np.asarray(g.bucket_fragments, dtype=bool) & ~np.asarray(g.nanotron_trainer, dtype=bool))


def interleaved_dp_sync(g: StrategyGrid) -> np.ndarray:
    """Where the data-parallel sync runs model chunk by model chunk (docs/model.md#interleaved-dp-sync): Megatron-Core's
    DDP (:func:`megatron_ddp_on`) or NeMo 1's Apex DistributedFusedAdam (``bucket_fragments``, ZeRO 1/2;
    docs/model.md#apex-interleaved) with overlap, under the interleaved schedule with pp > 1 and v >= 2 chunks per
    rank (megatron/core/pipeline_parallel/schedules.py ``forward_backward_pipelining_with_interleaving``)."""
    zero12 = (g.zero == Zero.OPTIMIZER) | (g.zero == Zero.GRADIENTS)
    owner = megatron_ddp_on(g) | (np.asarray(g.bucket_fragments, dtype=bool) & zero12)
    return np.asarray(owner & g.overlap & (g.schedule == ScheduleKind.INTERLEAVED) & (g.pp > 1)
                      & (g.virtual_stages >= 2))


def optimizer_step_gather(g: StrategyGrid) -> np.ndarray:
    """bool per grid point: strategy ``overlap_param_gather_with_optimizer_step`` where it acts
    (docs/model.md#optimizer-step-gather): Megatron-Core's DDP (:func:`megatron_ddp_on`) at ZeRO 1 with
    overlap_param_gather under the interleaved per-chunk sync (:func:`interleaved_dp_sync`). Megatron-LM refuses
    the switch without the distributed optimizer, overlap_param_gather and a virtual pipeline (arguments.py), and
    NeMo 2's and Megatron-Bridge's performance scripts set it only at dp, pp and vpp > 1; elsewhere it is warned
    about, not priced (job._warn_unpriced_alignment)."""
    return np.asarray(np.asarray(g.overlap_param_gather_with_optimizer_step, dtype=bool) & megatron_ddp_on(g)
                      & (g.zero == Zero.OPTIMIZER) & np.asarray(g.overlap_param_gather, dtype=bool)
                      & interleaved_dp_sync(g))


def optimizer_step_gather_window(job: Job, g: StrategyGrid, sync: str = "bsp", layers: Any = None,
                                 rank: Any = None) -> np.ndarray:
    """Seconds of GPU work between the dispatch of the first model chunk's parameter all-gather under
    :func:`optimizer_step_gather` and the first forward that waits for it, 0 where the switch does not act:

        v      = virtual stages;  P, P0 = the rank's dense parameters, those of its first chunk (layers / v, rank 0's
                 with the embedding, the last rank's without the output layer: that is its last chunk's); E its
                 expert parameters; S, S_E their state shards (:func:`_state_shards`, :func:`_expert_state_shards`);
                 B = 2 K + g + 6 bytes a parameter (:func:`_adam_step_bytes`)
        H      = [(P - P0) / S + E / S_E] B / (HBM x eff)                the other chunks' Adam step and weight copy
               + fp8_param_quantize_time x (P - P0) / P                   their FP8 parameters' quantization
               + grad_buffer_reset_time                                   the next step's zero_grad_buffer, all chunks

    Source (NVIDIA/Megatron-LM 791b70e031, the Megatron-Core of NeMo 2.2): get_megatron_optimizer gives chunk 0 its
    own dense optimizer, first in the ChainedOptimizer, the other chunks a second and the experts of every chunk a
    third (megatron/core/optimizer/__init__.py L398-404, L419-451, L457-487); ChainedOptimizer.step_with_ready_grads
    steps the first, then calls ``model_chunks[0].start_param_sync(force_dispatch=True)`` (optimizer.py L1026-1036): an
    asynchronous all-gather on the data-parallel group's stream while the compute stream runs the other optimizers'
    inner steps and copies (optimizer.py L444-468, distrib_optimizer.py L1907-1930), then the training loop's
    ``zero_grad_buffer`` (distributed_data_parallel.py L454-464) before the forward's pre-hook waits for the gather
    (``finish_param_sync``, param_and_grad_buffer.py L217-247). The host's Python between them is not counted (a
    lower bound of the window)."""
    on = optimizer_step_gather(g)
    if not np.any(on):
        return np.zeros(1)
    v = np.maximum(np.asarray(g.virtual_stages, dtype=float), 1.0)
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    if layers is None or rank is None or not job.is_transformer:  # the stages' mean: a chunk is 1/v of it
        dense0 = dense / v
    else:
        # chunk 0 of the rank: its layers / v, the embedding on rank 0, never the output layer (the last rank's last
        # chunk holds it, stepped by the second optimizer under the window)
        dense0 = np.minimum(_rank_params_per_gpu(job, g, np.asarray(layers, dtype=float) / v, rank,
                                                 post_process=False)[0], dense)
    rest = np.maximum(dense - dense0, 0.0)
    states = rest / _state_shards(job, g, sync) + expert / _expert_state_shards(job, g, sync)
    quant = fp8_param_quantize_time(job, g, sync, layers, rank) * np.divide(
        rest, dense, out=np.zeros(np.broadcast(rest, dense).shape), where=dense > 0)
    window = _hbm_seconds(job, states * _adam_step_bytes(job)) + quant + grad_buffer_reset_time(job, g, layers, rank)
    return np.asarray(np.where(on, window, 0.0), dtype=float)


def interleaved_grad_sync_exposed(grads: Any, backward: Any, pp: Any, v: Any, first_bucket: Any,
                                  aligned: Any) -> np.ndarray:
    """Seconds of an interleaved pipeline's gradient sync (reduce-scatter or all-reduce, ``grads`` seconds for the
    stage) left after the first stage's last backward (docs/model.md#interleaved-dp-sync).

    Megatron-Core syncs each of the stage's v model chunks once its last micro-batch backward is done
    (schedules.py ``backward_step_helper``), its buckets queued on the data-parallel group's one NCCL stream; chunk
    k's last backward on the first stage comes k pp chunk-backwards (b/v each, ``backward`` = b, one micro-batch's
    backward of the stage left free) before the stage's last, chunk v - 1's first, chunk 0's last. With r = C/v
    per chunk and W = pp b/v:

        aligned (grad_sync_func: after the backward)   exposed = max(r, C - (v-1) W)
        not aligned (sync enabled before it)           exposed = max(2r - W, C - (v-1) W, r - b/v, min(B, r))

    (chunk k >= 1 is one bucket, ``disable_bucketing=(model_chunk_idx > 0)``, launched when its backward ends
    either way; chunk 0's buckets launch after its last backward when aligned, under it otherwise, the last,
    ``first_bucket`` = B seconds, after it: :func:`_expose`'s rule for one chunk). Each term is the queue
    from one chunk's release to the end: (k+1) r - k W, linear in k, so its ends bound it.
    """
    c = np.asarray(grads, dtype=float)
    v = np.maximum(np.asarray(v, dtype=float), 1.0)
    r = c / v
    chunk_bwd = np.asarray(backward, dtype=float) / v
    window = np.asarray(pp, dtype=float) * chunk_bwd
    queue = c - (v - 1.0) * window  # chunk v-1 released first, then every W another r
    after = np.maximum(r, queue)
    before = np.maximum(np.maximum(2.0 * r - window, queue),
                        np.maximum(r - chunk_bwd, np.minimum(np.asarray(first_bucket, dtype=float), r)))
    return np.asarray(np.minimum(np.where(aligned, after, before), c))


def interleaved_param_gather_exposed(gather: Any, forward: Any, pp: Any, v: Any, first_bucket: Any,
                                     aligned: Any, opt_step: Any = False, opt_window: Any = 0.0) -> np.ndarray:
    """Seconds of an interleaved pipeline's parameter all-gather (``gather`` seconds for the stage; ZeRO-1 with
    overlap_param_gather) the first stage's forwards wait for (docs/model.md#interleaved-dp-sync).

    The first stage's warmup runs the first micro-batches' chunk-forwards back to back (f/v each, ``forward`` = f,
    one micro-batch's forward of the stage left free): chunk j's first at forward j pp. With a = A/v per chunk,
    W = pp f/v and chunk 0's delay d0 = max(a - f/v, min(B, a)) (its buckets under its first forward, the first,
    ``first_bucket`` = B seconds, before it: the whole-stage rule for one chunk):

        aligned (param_sync_func)   exposed = max(d0, 2a - W) + (v - 2) max(0, a - W)
        not aligned                 exposed = d0 + (v - 1) a

    Aligned: the schedule dispatches chunks 0 and 1 when it starts and chunk j + 1 (j >= 1) at chunk j's first
    forward (schedules.py ``forward_step_helper``, ``param_sync_func``), all on one stream: chunks 0 and 1 share
    the first pp chunk-forwards, each later chunk has the pp before its own. Not aligned (Megatron-Core's
    pre-hook at 92c8482e6 dispatches a bucket that is not yet dispatched and waits for it; the next-bucket chain
    stays inside a chunk): every later chunk's single bucket is gathered at its first forward, nothing under it.

    ``opt_step`` (:func:`optimizer_step_gather`): chunk 0 is one bucket, dispatched in the optimizer step ``opt_window``
    = H seconds before the first forward (:func:`optimizer_step_gather_window`), and its start_param_sync from the
    schedule or the pre-hook dispatches nothing again (distributed_data_parallel.py L403-422 at 791b70e031); chunk 1,
    dispatched when the schedule starts (aligned), queues behind chunk 0's rest on the one stream, and the forwards
    start when chunk 0 is in, so it has the first pp chunk-forwards as before:

        aligned       exposed = max(0, a - H) + (v - 1) max(0, a - W)
        not aligned   exposed = max(0, a - H) + (v - 1) a
    """
    a_all = np.asarray(gather, dtype=float)
    v = np.maximum(np.asarray(v, dtype=float), 1.0)
    a = a_all / v
    chunk_fwd = np.asarray(forward, dtype=float) / v
    window = np.asarray(pp, dtype=float) * chunk_fwd
    d0 = np.maximum(a - chunk_fwd, np.minimum(np.asarray(first_bucket, dtype=float), a))
    after = np.maximum(d0, 2.0 * a - window) + (v - 2.0) * np.maximum(a - window, 0.0)
    exposed = np.where(aligned, after, d0 + (v - 1.0) * a)
    e0 = np.maximum(a - np.asarray(opt_window, dtype=float), 0.0)  # chunk 0 under the other chunks' optimizer step
    early = e0 + np.where(aligned, (v - 1.0) * np.maximum(a - window, 0.0), (v - 1.0) * a)
    return np.asarray(np.minimum(np.where(opt_step, early, exposed), a_all))


def apex_interleaved_param_gather_exposed(gather: Any, forward: Any, pp: Any, v: Any) -> np.ndarray:
    """Seconds of an interleaved pipeline's parameter all-gather (``gather`` seconds for the stage) the first stage
    waits for under NeMo 1's Apex DistributedFusedAdam with overlap_param_sync (docs/model.md#apex-interleaved).

    NeMo 1 passes ``sync_overlap_parameters`` as the schedule's ``param_sync_func`` (megatron_gpt_model.py
    ``fwd_bwd_step``; NeMo v2.0.0.rc0.beta L591-607, 24.09-alpha.rc0 L662-675, v2.1.0 L708-721), which launches the
    chunk's buckets through Apex's ``_try_start_bucket_param_sync`` -> ``_start_bucket_param_sync``, and that first
    calls ``_finish_bucket_param_sync``: the compute stream waits for every gather in flight on the one
    communication stream (apex/contrib/optimizers/distributed_fused_adam.py at b496d85f L1936-1946, L1991-1995;
    the same at c5f6b795, f9f19d5c, 6102d2c3). The schedule calls it for chunks 0 and 1 when it starts and for
    chunk j + 1 before chunk j's first forward (schedules.py, Megatron-Core core_v0.7.0.beta L549-552, L605-615).
    So chunk 1's launch waits for chunk 0's whole gather, before any compute, and chunk j's gather (j >= 1),
    launched at chunk j - 1's first forward, has the pp chunk-forwards before its own (f/v each, ``forward`` = f,
    one micro-batch's forward of the stage left free). With a = A/v a chunk, W = pp f/v:

        exposed = a + (v - 1) max(0, a - W)          (at most A)

    (Megatron-Core's aligned rule, :func:`interleaved_param_gather_exposed`, hides chunk 0's buckets under its first
    chunk-forward and launches chunks 0 and 1 together; Apex does neither.)
    """
    a_all = np.asarray(gather, dtype=float)
    v = np.maximum(np.asarray(v, dtype=float), 1.0)
    a = a_all / v
    window = np.asarray(pp, dtype=float) * np.asarray(forward, dtype=float) / v
    return np.asarray(np.minimum(a + (v - 1.0) * np.maximum(a - window, 0.0), a_all))


def _wire_and_codec(job: Job, g: StrategyGrid, elements: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per gradient element on the wire, and encode + decode seconds, per compression scheme.

    Quantisation (docs/model.md#compression, all-reducible): fp16 sends min(2, g) bytes,
    int8 1 byte; encode reads g and writes q bytes per element, decode the reverse (memory-bound).
    Top-k keeps a fraction rho as (value, int32 index) pairs, all-gathered (handled by the caller);
    selection reads the gradient 3 times (radix select) and decoding scatter-adds the dp - 1 payloads.
    """
    gb = job.grad_bytes
    q = np.select([g.compression == CompressionKind.FP16, g.compression == CompressionKind.INT8], [min(2.0, gb), 1.0],
                  default=gb)
    quant_codec = np.where(q < gb, _hbm_seconds(job, 2.0 * (gb + q) * elements), 0.0)
    pair = gb + 4.0
    topk_codec = _hbm_seconds(job, (3.0 * gb + g.topk_ratio * pair * (1.0 + 2.0 * (g.dp - 1))) * elements)
    codec = np.where(g.compression == CompressionKind.TOPK, topk_codec, quant_codec)
    return q, codec


def deepspeed_pipeline_buckets(g: StrategyGrid) -> np.ndarray:
    """Whether the data-parallel gradient all-reduce runs in DeepSpeed's 5e8-element buckets although ZeRO is 0:
    DeepSpeed's PipelineEngine reduces after the last BackwardPass with
    ``allreduce_gradients(bucket_size=MEMORY_OPT_ALLREDUCE_SIZE)`` (fp16) or ``buffered_allreduce_fallback(...,
    elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE)`` (bf16), MEMORY_OPT_ALLREDUCE_SIZE = 500000000 elements
    (deepspeed/runtime/pipe/engine.py _exec_reduce_grads, the constant in runtime/engine.py; v0.5.4, v0.6.5):
    flattened buckets of up to 5e8 elements, not PyTorch DDP's 25 MiB."""
    return np.asarray(g.deepspeed_pipeline & (g.zero == Zero.NONE))


def bf16_optimizer_param_gather(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether the data-parallel sync is DeepSpeed's BF16_Optimizer under its PipelineEngine, which sends the
    updated 16-bit weights on top of the gradient all-reduce (``deepspeed_pipeline``, bf16, fp32 gradient
    reduction ``grad_bytes`` 4, ZeRO 1: the optimizer's own partitioning of the fp32 states over DP).

        per GPU and step:  AllReduce(P_d g, dp)  +  AllGather(P_d eb, dp)       g = 4, eb = 2
        bytes sent       = 2 (dp-1)/dp P_d g    +  (dp-1)/dp P_d eb             (ring)

    against ZeRO-1's reduce-scatter in g + all-gather in eb ((dp-1)/dp P_d (g + eb), what ``zero 1`` prices,
    :func:`distributed_optimizer_sync`).
    DeepSpeed v0.6.5 (the bf16 pipeline BLOOM ran): with bf16 the PipelineEngine's ReduceGrads is
    ``_bf16_reduce_grads``, ``buffered_allreduce_fallback(grads=optimizer.get_grads_for_reduction())``: an
    all-reduce of the whole fp32 gradient buffers ``fp32_groups_gradients_flat``, not a reduce-scatter
    (deepspeed/runtime/pipe/engine.py; bf16 with ZeRO stage 1 raises NotImplementedError there);
    ``BF16_Optimizer.step`` then updates its 1/dp fp32 partition, copies it into its bf16 partition
    (``update_lp_params``) and all-gathers the bf16 partitions over DP (``all_gather_dp_groups`` in buckets of
    ``allgather_bucket_size`` = 5e8 elements; deepspeed/runtime/bf16_optimizer.py, runtime/utils.py). MoE
    gradients are not supported on that path (``buffered_allreduce_fallback`` asserts), so only the dense
    parameters are gathered."""
    bf16 = bool(Precision.parse(job.precision) == Precision.BF16) and job.grad_bytes > job.elem_bytes
    return np.asarray(g.deepspeed_pipeline & (g.zero == Zero.OPTIMIZER) & bf16)


def distributed_optimizer_sync(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether the data-parallel sync is ZeRO-1/2's reduce-scatter of the gradients at the gradient dtype
    (q bytes: ``grad_bytes``, or the compressed width) followed, after the optimizer step, by an all-gather of
    the updated parameters at the parameter dtype (w bytes: ``elem_bytes``, 16-bit, 4 for fp32 runs), in the
    same buckets of e elements (docs/model.md#dp-comm). Per GPU and step, n parameters over dp ranks (ring):

        RS(n q) + AG(n w):  bytes sent = (dp-1)/dp n q + (dp-1)/dp n w = (dp-1)/dp n (q + w),  2 (dp-1) steps

    the bytes and steps of one ring all-reduce of n (q + w)/2 bytes, the all-reduce of n q only when q = w.
    fp32 gradient reduction with 16-bit parameters: (4 + 2)/2 = 3 bytes a parameter against the all-reduce's 4,
    -25 %; int8 compression of bf16 gradients: (1 + 2)/2 = 1.5 against 1 (the parameters are not compressed).
    Each bucket is priced as its own reduce-scatter and all-gather (``_dp_comm``), on the algorithms NCCL has for
    those two operations (:func:`zero12_algorithm`: no tree, which only all-reduces), not as an all-reduce,
    whose tree or NVLS choice would be optimistic. The all-gather alone is ``param_gather`` (which
    ``overlap_param_gather`` moves under the next forward); with ``fp8_param_gather`` it moves 1 byte for each
    element of :func:`fp8_param_elements`, with ``fp4_param_gather`` 1/2 (the packed NVFP4 row-wise data,
    :func:`scalemodel.cost.compute.param_gather_bytes`).

    Sources. Megatron-Core's distributed optimizer: ``start_grad_sync`` reduce-scatters each bucket's
    ``grad_data`` (fp32 when ``grad_reduce_in_fp32``, else the parameter dtype) and ``start_param_sync``
    all-gathers its ``param_data`` (the parameter dtype; uint8 with ``fp8_param_gather`` / ``fp4_param_gather``)
    (megatron/core/distributed/param_and_grad_buffer.py ``group_params_for_buffers``); Megatron-LM's --bf16 sets
    ``accumulate_allreduce_grads_in_fp32`` unless --grad-reduce-in-bf16 (megatron/training/arguments.py; at
    core_r0.8.0 always). DeepSpeed ZeRO-1/2 (``reduce_scatter: true``, its default): each bucket's partition
    slices are reduced to their owners (``average_tensor``, one ``dist.reduce`` per owner: the reduce-scatter's
    volume) in ``communication_data_type`` (default the 16-bit model dtype), then ``step`` all-gathers the
    updated 16-bit partitions (``all_gather_dp_groups``, ``allgather_bucket_size`` 5e8 elements)
    (deepspeed/runtime/zero/stage_1_and_2.py, runtime/engine.py). Not here: DeepSpeed's BF16_Optimizer under its
    PipelineEngine, which all-reduces the fp32 gradients (:func:`bf16_optimizer_param_gather`)."""
    zero12 = (g.zero == Zero.OPTIMIZER) | (g.zero == Zero.GRADIENTS)
    return np.asarray(zero12 & ~bf16_optimizer_param_gather(job, g) & ~nanotron_zero1(g))


def nanotron_zero1_sync(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether the data-parallel sync is nanotron's at ZeRO-1 with fp32 gradient accumulation (``nanotron_trainer``,
    zero 1, gradient element wider than the parameter: ``accumulate_grad_in_fp32``): one all-reduce of the whole fp32
    gradient buffer after the last backward, then one all-gather of the updated 16-bit parameters after the
    optimizer step, neither under compute. Per GPU and step, P_d parameters of the stage over dp ranks:

        AllReduce(P_d g, dp)  +  AllGather(P_d w, dp)           g = 4, w = 2; one call each, both exposed
        ring bytes sent = 2 (dp-1)/dp P_d g + (dp-1)/dp P_d w = (dp-1)/dp P_d (2g + w) = 10 (dp-1)/dp P_d

    against 6 (dp-1)/dp P_d for ZeRO-1's reduce-scatter + all-gather (:func:`distributed_optimizer_sync`), and with
    the one bucket nothing overlaps the backward (:func:`_dp_comm`'s ``last_bucket`` is 1).

    Source, huggingface/nanotron@c2528430: src/nanotron/trainer.py ``init_model`` (lines 786-788) builds the model
    without DistributedDataParallel when ``accumulate_grad_in_fp32 and zero_stage > 0``, so no DDP bucket hook
    reduces under the backward; ``training_step`` (lines 509-519) then calls ``sync_gradients_across_dp(...,
    reduce_scatter=False)`` ("TODO @thomasw21: This is too memory hungry, instead we run all_reduce") after
    ``train_batch_iter`` has run every micro-batch, which is ``FP32GradientAccumulator.sync_gradients_across_dp``'s
    ``dist.all_reduce(self._contiguous_fp32_grad_buffer, ...)``, synchronous, on the one contiguous fp32 buffer of
    every parameter (optim/gradient_accumulator.py lines 128-155, 157-202); after the update
    ``ZeroDistributedOptimizer.step`` calls ``_all_gather_params`` (optim/zero.py lines 94-120, 217-251), one
    ``dist.all_gather_coalesced`` of every parameter's shard, which flattens each rank's shards into one buffer
    and issues one synchronous ``dist.all_gather`` (distributed.py lines 153-220). The ranks' buffers are equal where
    every parameter's element count divides by dp (optim/zero.py ``_partition_parameters``, lines 150-193: a Llama's
    tensors are multiples of the hidden size, which 128 divides in every shape priced here), and PyTorch's
    ProcessGroupNCCL runs equal-sized list all-gathers as one ncclAllGather (unequal ones as one broadcast per rank,
    not priced). The gather's copies (flatten, copy-out, the per-(rank, parameter) copy loop and its host tail) are
    priced in the optimizer step (:func:`nanotron_gather_loop_time`)."""
    fp32 = bool(job.grad_bytes > job.elem_bytes)
    return np.asarray(nanotron_zero1(g) & fp32)


def nanotron_zero1(g: StrategyGrid) -> np.ndarray:
    """Where nanotron's ZeRO-1 runs (``nanotron_trainer`` at zero 1), whatever the gradient element: its
    ``ZeroDistributedOptimizer`` all-gathers the updated 16-bit shards in one call after the step (optim/zero.py
    ``_all_gather_params``, lines 217-251 at huggingface/nanotron@c2528430), and the gradients are all-reduced, never
    reduce-scattered, so :func:`distributed_optimizer_sync` does not apply. With fp32 accumulation the all-reduce is
    the trainer's one call on the whole fp32 buffer (:func:`nanotron_zero1_sync`); with 16-bit gradients
    (``accumulate_grad_in_fp32`` false) ``init_model`` builds DistributedDataParallel (``make_ddp = dp > 1 and not
    (accumulate_grad_in_fp32 and zero_stage > 0)``, trainer.py lines 786-788) with no comm hook (helpers.py lines
    416-436 register ``get_fp32_accum_hook`` only with a gradient accumulator), so DDP all-reduces the 16-bit
    gradients in its ``ddp_bucket_cap_mb`` buckets under the last backward (the pipeline engine's ``no_sync`` on the
    other micro-batches, parallel/pipeline_parallel/engine.py ``_get_fwd_context``, ``_get_bwd_context``) and the
    trainer's own ``sync_gradients_across_dp`` is skipped (trainer.py lines 509-519: only when the model is not
    DDP). Priced: ``bucketed(AllReduce, P_d eb, dp)`` in those buckets, overlapped as ZeRO 0's, + ``AllGather(P_d eb,
    dp)``, exposed."""
    return np.asarray(g.nanotron_trainer & (g.zero == Zero.OPTIMIZER))


#: Megatron-Core DDP's default gradient bucket, max(MIN, PER_RANK x dp_cp) elements (:func:`megatron_bucket_elements`).
MEGATRON_BUCKET_MIN_ELEMENTS = 40_000_000
MEGATRON_BUCKET_PER_RANK_ELEMENTS = 1_000_000


def megatron_bucket_elements(g: StrategyGrid) -> np.ndarray:
    """Gradient elements per bucket of Megatron-Core's DistributedDataParallel (``megatron_ddp``, ZeRO 0 or 1)
    when no ``--ddp-bucket-size`` is given:

        overlap (--overlap-grad-reduce):  e = max(40,000,000, 1,000,000 x dp x cp)
        no overlap:                       e = inf (one bucket per buffer: dense, experts)

    Source: NVIDIA/Megatron-LM@d98e8a64dd megatron/training/training.py ``resolve_ddp_bucket_size`` ("if no
    explicit bucket_size: max(40_000_000, 1_000_000 * dp_cp_size); if overlap_grad_reduce is False: None
    (overrides the above)", over ``pg_collection.dp_cp``); core_r0.11.0 (59055868f) distributed_data_parallel.py
    had the same rule over the data-parallel group without cp. The larger buckets at large dp keep each ring
    chunk (bucket / dp) bandwidth-bound (the comment there). Without overlap Megatron ignores a given bucket size
    too. Megatron buckets only the first pipeline stage's first model chunk (``per_chunk_bucket_sizes``: None for
    pp_rank > 0 and chunk_idx > 0); the other stages finish their last backward earlier by the pipeline drain and
    their single bucket's sync has that slack, so the step model keeps pricing the tail of the bucketed stage."""
    dp_cp = (g.dp * g.cp).astype(float)
    overlapped = np.maximum(float(MEGATRON_BUCKET_MIN_ELEMENTS), MEGATRON_BUCKET_PER_RANK_ELEMENTS * dp_cp)
    return np.asarray(np.where(g.overlap, overlapped, np.inf))


def _bucket_bytes(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], layer_params: Any,
                  wire: Any) -> np.ndarray:
    """Wire bytes per gradient bucket. A bucket holds a number of gradient elements: the user's
    ``bucket_size`` (bytes of uncompressed gradient), else the framework's default for the ZeRO
    stage: PyTorch DDP 25 MiB (ZeRO 0, :data:`~scalemodel.engine.job.DDP_BUCKET_BYTES`), DeepSpeed
    reduce_bucket_size 5e8 elements (ZeRO 1-3), FSDP one wrapped layer, Megatron-Core's DDP (``megatron_ddp``)
    :func:`megatron_bucket_elements` (which without overlap is one bucket per buffer whatever the user's size, as
    Megatron does). Compression shrinks the bytes on
    the wire, not the elements per bucket. DeepSpeed's PipelineEngine (``deepspeed_pipeline``) all-reduces in
    buckets of 5e8 elements at ZeRO 0 too (:func:`deepspeed_pipeline_buckets`)."""
    deepspeed_or_ddp = np.where((g.zero >= Zero.OPTIMIZER) | deepspeed_pipeline_buckets(g), DEEPSPEED_BUCKET_ELEMENTS,
                                DDP_BUCKET_BYTES / job.grad_bytes)
    framework = np.where(g.zero == Zero.FSDP, layer_params, deepspeed_or_ddp)
    if np.any(g.nanotron_trainer):
        # nanotron: ZeRO-1 with fp32 gradients reduces its whole buffer in one call (nanotron_zero1_sync); at ZeRO 0
        # PyTorch DDP buckets the 16-bit gradients by bytes (25 MiB, ddp_bucket_cap_mb, config.py line 222 at
        # c2528430) and the comm hook reduces the same parameters' fp32 buffers (gradient_accumulator.py 374-378)
        # (and at ZeRO 1 with 16-bit gradients DDP all-reduces those buckets itself: nanotron_zero1)
        ddp16 = NANOTRON_DDP_BUCKET_BYTES / job.elem_bytes
        nano = np.where(nanotron_zero1_sync(job, g), np.inf,
                        np.where((g.zero == Zero.NONE) | (g.zero == Zero.OPTIMIZER), ddp16, framework))
        framework = np.where(g.nanotron_trainer, nano, framework)
    megatron = megatron_ddp_on(g)
    if np.any(megatron):
        framework = np.where(megatron, megatron_bucket_elements(g), framework)
    elements = np.where(g.bucket_bytes > 0, g.bucket_bytes / job.grad_bytes, framework)
    if np.any(megatron):
        elements = np.where(megatron & ~g.overlap, np.inf, elements)
    if np.any(g.nanotron_trainer):
        # nanotron's ZeRO-1 with fp32 accumulation has no buckets whatever bucket_size says (no DDP wrapper: one
        # all-reduce of the whole fp32 buffer, nanotron_zero1_sync); a given bucket_size priced a bucketed sync under
        # the backward (llama3-8b on 64 H100s: 1.058 -> 0.922 s at 100 MB) that nanotron does not run (round 17)
        elements = np.where(nanotron_zero1_sync(job, g), np.inf, elements)
    fixed = deepspeed_pipeline_fixed_buckets(job, g)
    if np.any(fixed):
        # review17f: DeepSpeed's PipelineEngine passes MEMORY_OPT_ALLREDUCE_SIZE (5e8 elements) itself, reading no
        # reduce_bucket_size there: a given bucket_size priced buckets DeepSpeed does not build
        elements = np.where(fixed, DEEPSPEED_BUCKET_ELEMENTS, elements)
    return np.maximum(elements * wire, 1.0)


def deepspeed_pipeline_fixed_buckets(job: Job, g: StrategyGrid) -> np.ndarray:
    """Where DeepSpeed's PipelineEngine all-reduces the gradients in buckets of its own fixed size whatever
    ``bucket_size`` (its config's ``zero_optimization.reduce_bucket_size``) says: ZeRO 0
    (:func:`deepspeed_pipeline_buckets`: ``allreduce_gradients(bucket_size=MEMORY_OPT_ALLREDUCE_SIZE)``, which at
    ZeRO 0 is ``buffered_allreduce_fallback(elements_per_buffer=bucket_size)``) and bf16 at ZeRO 1
    (:func:`bf16_optimizer_param_gather`: ``_bf16_reduce_grads``, ``buffered_allreduce_fallback(...,
    elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE)``), MEMORY_OPT_ALLREDUCE_SIZE = 500000000 elements
    (deepspeed/runtime/pipe/engine.py ``_exec_reduce_grads``, v0.5.4, v0.6.5). Only ZeRO-1's own optimizer (fp16)
    reads reduce_bucket_size under the PipelineEngine."""
    return np.asarray(deepspeed_pipeline_buckets(g) | bf16_optimizer_param_gather(job, g))


def bucket_size_priced(job: Job, g: StrategyGrid) -> np.ndarray:
    """Where a given ``bucket_size`` sets the gradient buckets :func:`_bucket_bytes` prices: everywhere but
    nanotron's ZeRO-1 with fp32 accumulation (:func:`nanotron_zero1_sync`: one all-reduce of the whole fp32 buffer,
    no DDP buckets) and Megatron-Core's DDP without overlap (:func:`megatron_bucket_elements`: one bucket per buffer,
    whatever --ddp-bucket-size says) and DeepSpeed's PipelineEngine at ZeRO 0 or bf16 ZeRO 1
    (:func:`deepspeed_pipeline_fixed_buckets`: 5e8 elements of its own). Where it is not, a plan's strategy names
    the framework's default (what was priced), not the searched size (predict.result_at): plan's explanation named
    "bucket 500 MB" for a nanotron ZeRO-1 fp32 winner whose sync is one call."""
    return np.asarray(~nanotron_zero1_sync(job, g) & ~(megatron_ddp_on(g) & ~g.overlap)
                      & ~deepspeed_pipeline_fixed_buckets(job, g))


def zero12_algorithm(g: StrategyGrid) -> np.ndarray:
    """The algorithm code ZeRO-1/2's reduce-scatter and all-gather run on, from the DP ``algorithm`` choice.

    NCCL implements ReduceScatter and AllGather with Ring, PAT (one GPU per node), NVLS and CollNetDirect only:
    no Tree (NVIDIA/nccl v2.30.7, 5067397c26, src/graph/tuning.cc ``ncclTopoTuneModel``: "if ((coll ==
    ncclFuncReduceScatter || coll == ncclFuncAllGather) && a != NCCL_ALGO_PAT && a != NCCL_ALGO_RING && a !=
    NCCL_ALGO_NVLS && a != NCCL_ALGO_COLLNET_DIRECT) continue;", leaving their bandwidth 0). So ``tree`` (an all-reduce
    algorithm) becomes ``auto``, the cost layer's NCCL choice for the two operations (``nccl.NCCL_FAMILY``).
    ``rhd`` (Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather) is kept: the cost
    layer's ``rhd`` reduce-scatter and all-gather are its two phases in MPICH's partner order (reduce-scatter at
    distance 1, 2, .., p/2 with S/2, S/4, ..; all-gather the time reversal), so the pair moves at each step the
    bytes of the all-reduce between the same partners and costs exactly its ``rhd`` all-reduce
    (:func:`scalemodel.cost.algorithms.rhd_time`). (Mapping it to ``rd``, the stand-alone recursive doubling
    all-gather, sent the all-gather's largest blocks to the farthest partners: 50.3 s against the ring's 20.0 s
    at 2048 GPUs behind a 3x spine.) Ring, rd, direct, hierarchical and auto apply to both operations and are
    kept too."""
    a = np.asarray(g.algorithm)
    return np.asarray(np.where(a == Algorithm.TREE, int(Algorithm.AUTO), a))


def fp8_param_elements(job: Job, g: StrategyGrid, layers: Any, dense: Any, expert: Any) -> tuple[Any, Any]:
    """Elements held and all-gathered as FP8 under Megatron's ``fp8_param_gather`` (ZeRO 1-2), of the ``dense``
    and ``expert`` parameters a GPU holds on a stage of ``layers`` transformer layers:

        dense:  min(layers x linear_weights_per_layer on a TP rank, dense)      expert: all routed-expert parameters

    Megatron-Core builds each transformer layer inside Transformer Engine's ``fp8_model_init`` when
    ``config.fp8_param`` (megatron/core/transformer/transformer_block.py ``get_fp8_context(..., is_init=True)``,
    megatron/core/fp8_utils.py), so the layer's TE linear modules (QKV, projection, MLP, shared and routed experts'
    grouped linears) own FP8 (or MXFP8) weights; the embedding, the output layer, norms and the router are built
    outside it or are not TE linears and stay 16-bit. The DDP buffer stores quantized parameters as uint8, 1 byte
    an element (megatron/core/distributed/param_and_grad_buffer.py ``group_params_for_buffers``: "torch.uint8 for
    FP8/NVFP4 parameters"), which the distributed optimizer all-gathers (``start_param_sync``) (NVIDIA/Megatron-LM
    @d98e8a64dd). Routed experts' biases, if any, are counted as FP8 (< 0.1 % of them). Under ``fp4_param_gather``
    (nvfp4) the same modules are built inside TE's ``quantized_model_init`` with the NVFP4 recipe
    (fp4_utils.py ``get_fp4_context(..., is_init=True)`` -> ``config.fp4_param``, NVIDIA/Megatron-LM@d1410e15e1
    L211) and own NVFP4 weights (docs/model.md#fp4-param-gather). (0, 0) without the switch,
    and (0, 0) for the mxfp8 recipe: MXFP8 parameters are all-gathered in BF16 into the gradient buffer and
    quantized after the gather ("For MXFP8 param: Create a shared buffer for param AG and grad RS ... only half of
    the buffer is used to store params in bf16", param_and_grad_buffer.py ``_ParamAndGradBuffer.__init__``;
    ``_post_param_sync`` ``copy_tensors_to_quantized_params``; the same at core_v0.15.0, 103851dcf4), so their
    gather and their held copy keep 16-bit-sized storage."""
    on = fp8_params_held(job, g)
    if not np.any(on):
        return 0.0, 0.0
    linear = np.minimum(layers * fp8_param_linear_per_layer(job, g.tp), dense)
    return np.where(on, linear, 0.0), np.where(on, expert, 0.0)


def module_input_bytes(job: Job) -> dict[str, float]:
    """The memory model's saved-GEMM-input bytes of the modules at their own precision (training.module_precision,
    :func:`module_recipe`): ``attention_inputs``, ``latent_inputs``, ``out_proj_inputs`` as
    :func:`scalemodel.cost.memory.quantized_input_bytes` of the module's recipe (0 = 16-bit); none where the module
    runs at the run's precision."""
    out: dict[str, float] = {}
    for key, module in (("attention_inputs", "attention_proj"), ("latent_inputs", "moe_latent"),
                        ("out_proj_inputs", "mamba_out_proj")):
        r = module_recipe(job, module)
        if r is not None:
            out[key] = memory.quantized_input_bytes(r)
    return out


def proj_input_bytes(job: Job, g: StrategyGrid) -> dict[str, Any]:
    """The memory model's ``proj_inputs`` and ``linear_inputs`` (cost.memory.activation_bytes_per_layer): 0 (the
    16-bit input) where linear_proj keeps its 16-bit input (:func:`proj_original_input`; for linear_proj it is the
    tensor the attention keeps as its output, held once) and, under an fp8 delayed-scaling run's strategy
    ``fp8_wgrad`` false, for linear_proj, linear_fc2 and the experts' linears too: Transformer Engine 1.x's Linear
    saves ``inputmat_no_fp8`` instead of its FP8 transpose when ``override_linear_precision.wgrad`` is set, and
    GroupedLinear ``inputmats_no_fp8`` (NVIDIA/TransformerEngine v1.13 = e5edd6cc3d pytorch/module/linear.py
    L297-306, grouped_linear.py L211-223), while LayerNormLinear (the QKV and dense FC1 linears, the norm fused)
    saves its FP8 ``ln_out`` and casts it back in the backward (layernorm_linear.py L326-336, L626-632); the
    layers' quantized input bytes elsewhere; nothing where neither applies to any strategy.
    docs/model.md#proj-original-input, #fp8-wgrad"""
    on, _ = proj_original_input(job, g)
    wgrad16 = ~np.asarray(g.fp8_wgrad, dtype=bool) & (job.fp8_recipe == "delayed")
    if not (np.any(on) or np.any(wgrad16)):
        return {}
    own = module_input_bytes(job).get("attention_inputs")
    q_att = memory.quantized_input_bytes(job.fp8_recipe) if own is None else own
    out: dict[str, Any] = {"proj_inputs": np.where(on | wgrad16, 0.0, float(q_att))}
    if np.any(wgrad16):
        out["linear_inputs"] = np.where(wgrad16, 0.0, float(memory.quantized_input_bytes(job.fp8_recipe)))
    return out


def fp8_param_linear_per_layer(job: Job, tp: Any = 1) -> np.ndarray:
    """The linear weights per layer on one of ``tp`` tensor-parallel ranks (the TP-split ones / tp, MLA's
    down-projections and LatentMoE's projections whole: :func:`~scalemodel.cost.transformer.linear_weights_per_layer`)
    that are FP8 parameters under fp8_param_gather: linear_weights_per_layer less the
    weights of the modules at their own precision (training.module_precision). Megatron-Core builds a module that
    its quant_recipe matches under that config's own ``fp8_model_init`` (``_get_fp8_model_init_for_quant_params``:
    enabled False for a BF16 config, ``fp8_param`` for an FP8 one, default False; megatron/core/extensions/
    transformer_engine.py at NVIDIA/Megatron-LM@24bad8e677), so its weights stay 16-bit: per layer, the attention
    layers' projections (attention_proj), the MoE layers' 2 h l (moe_latent) and the Mamba layers' h d_in
    (mamba_out_proj), each at its share of the layers. The MTP modules are outside the layers' count."""
    sh = job.shape
    full = transformer.linear_weights_per_layer(sh, tp)
    # each module key's linears (transformer.linear_weight_parts): the attention's split / tp and down-projections
    # whole, LatentMoE's whole, the Mamba out_proj row-parallel (split)
    own = tuple(m for key, m in (("attention_proj", "attention"), ("moe_latent", "moe_latent"),
                                 ("mamba_out_proj", "mamba_out_proj")) if module_recipe(job, key) is not None)
    if own:
        full = full - transformer.linear_weights_per_layer(sh, tp, modules=own)
    return np.asarray(np.maximum(full, 0.0), dtype=float)


def fp8_param_quantize_time(job: Job, g: StrategyGrid, sync: str = "bsp", layers: Any = None,
                            rank: Any = None) -> np.ndarray:
    """Seconds per step the optimizer adds under fp8_param_gather (or fp4_param_gather: NVFP4 parameters, 10.5 bytes
    an element, docs/model.md#fp4-param-gather): it quantizes its shard of the FP8 parameters
    (:func:`fp8_param_elements` of an average stage, L/pp layers, or of a stage of ``layers`` layers, over
    :func:`_state_shards` and :func:`_expert_state_shards`) from the fp32 master instead of writing their 16-bit copy:
    shard x (:func:`scalemodel.cost.compute.fp8_param_quantize_bytes` - :data:`WEIGHT_COPY_BYTES`) HBM bytes: the
    quantization reads the fp32 master and writes the 16-bit cast as the copy does, then casts that to FP8. With
    ``rank``: pipeline rank ``rank``'s own parameters (:func:`_stage_params_per_gpu`)."""
    if not job.fp8_recipe or not np.any(fp8_params_held(job, g)):  # no recipe: a grid built around the spec checks
        return np.zeros(1)
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    stage = float(job.shape.layers) / g.pp if layers is None else np.asarray(layers, dtype=float)
    fp8_dense, fp8_expert = fp8_param_elements(job, g, stage, dense, expert)
    shard = fp8_dense / _state_shards(job, g, sync) + fp8_expert / _expert_state_shards(job, g, sync)
    per_element = compute.fp8_param_quantize_bytes(job.fp8_recipe, elem_bytes=float(job.elem_bytes))
    return _hbm_seconds(job, shard * (per_element - WEIGHT_COPY_BYTES))


#: Parameter tensors one GPU holds, as (count, elements each) pairs of arrays (:func:`param_tensors`); None: unknown.
Tensors = list[tuple[np.ndarray, np.ndarray]] | None


def param_tensors(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray]) -> tuple[Tensors, Tensors]:
    """(dense, routed-expert) parameter tensors one GPU of the priced stage holds, by kind as (count, elements):
    ``L_s`` x the layer's tensors (:func:`~scalemodel.cost.transformer.layer_param_tensors`) + the tensors outside the
    layers (:func:`~scalemodel.cost.transformer.non_layer_param_tensors`) the stage holds, the TP-split ones divided by
    tp; the routed experts ``L_s`` x (MoE layers / L) x E / ep x
    :func:`~scalemodel.cost.transformer.expert_param_tensors`, split by etp. (None, None) for a workload that is not
    a transformer (no tensor list).

    The tensors outside the layers are those of the priced pipeline rank r (``comp["pipeline_rank"]``, as
    :func:`_rank_params_per_gpu` counts its parameters and :func:`scalemodel.cost.memory.params_per_gpu` places
    them; Megatron-Core gpt_model.py builds the embedding where ``pre_process``, the final norm and output layer
    where ``post_process``, NVIDIA/Megatron-LM@d98e8a64dd):

        p = 1     every one of them (the word embedding, the untied output layer, positions, final norm, MTP)
        p > 1     r = 0: the word embedding and the positions; r = p - 1: the final norm, the output layer (tied or
                  not, unless the rank also embeds and ties it) and the D MTP modules with, D > 0, their embedding
                  copy; a middle rank none

    Each DDP buffer is its rank's own: its buckets hold its own tensors. Without a priced rank (a caller with the
    stage's mean share) every stage counts them all, as before."""
    if not job.is_transformer:
        return None, None
    sh = job.shape
    layers = comp["layers_per_stage"]

    def grouped(kinds: list[tuple[transformer.ParamTensor, Any]], tp: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (kind, count multiplier) pairs merged by (elements, split), empty ones dropped (the job's shape is one
        model: scalars), their counts times the multiplier, the split ones' elements over ``tp``."""
        counts: dict[tuple[float, bool], Any] = {}
        for t, per in kinds:
            n, e = float(t.n), float(t.elements)
            if n > 0.0 and e > 0.0:
                counts[(e, t.split)] = counts.get((e, t.split), 0.0) + per * n
        return [(np.asarray(n, dtype=float), np.asarray(e / tp if split else e, dtype=float))
                for (e, split), n in counts.items()]

    dense_kinds: list[tuple[transformer.ParamTensor, Any]] = [(t, layers) for t in transformer.layer_param_tensors(sh)]
    if "pipeline_rank" in comp:
        r = np.asarray(comp["pipeline_rank"], dtype=float)
        p = np.asarray(g.pp, dtype=float)
        last = r >= p - 1.0
        has_emb = (r == 0) | (last & (float(sh.mtp_layers) > 0))
        one = np.ones(1)
        emb, head = np.where(has_emb | (p <= 1), one, 0.0), np.where(last, one, 0.0)
        untied = not bool(sh.tied_embeddings)
        # the output layer's own weight: untied, or tied on a last rank that does not also embed (p > 1)
        out_head = np.where((p <= 1) & untied, one, np.where((p > 1) & last & (untied | ~has_emb), one, 0.0))
        part = transformer.non_layer_tensor_parts(sh)
        dense_kinds += [(t, emb) for t in part["word"]] + [(t, out_head) for t in part["word"]]
        dense_kinds += [(t, emb) for t in part["positions"]] + [(t, head) for t in part["final_norm"]]
        mtp = float(sh.mtp_weight_modules)
        dense_kinds += [(t, head * mtp) for t in part["mtp"]]
    else:
        dense_kinds += [(t, 1.0) for t in transformer.non_layer_param_tensors(sh)]
    dense = grouped(dense_kinds, g.tp)
    per_stage = layers * float(sh.moe_layers / sh.layers) * float(sh.moe_experts) / g.ep
    expert = grouped([(t, per_stage) for t in transformer.expert_param_tensors(sh)], _etp(g))
    return dense, expert


def tensor_bucket_count(bucket: Any, wire: Any, tensors: Tensors) -> np.ndarray | None:
    """big + ceil(S / e) of :func:`bucket_count` (None without a tensor list): what the tensors alone allow, before
    the ceiling of the payload; computed once per tensor list and bucket and passed to :func:`bucket_count`."""
    if tensors is None:
        return None
    e = np.maximum(np.asarray(bucket, dtype=float), 1e-300) / wire
    big = sum(np.where(n >= e, c, 0.0) for c, n in tensors)
    small = sum(np.where(n < e, c * n, 0.0) for c, n in tensors)
    return np.asarray(big + np.ceil(small / e), dtype=float)


def _whole_tensors(g: StrategyGrid, by_tensors: np.ndarray | None) -> np.ndarray | None:
    """The tensor bound of :func:`bucket_count` where buckets hold whole tensors, none (inf) where they cut them
    (``bucket_fragments``: Apex's DistributedFusedAdam splits a parameter into ``ParameterFragment`` s at bucket
    boundaries, NVIDIA/apex@6424da3b apex/contrib/optimizers/distributed_fused_adam.py L1347-1496, so its count is
    ceil(nbytes / bucket) at least; the latencies they pay: :func:`coalesced_launches`)."""
    if by_tensors is None or not np.any(g.bucket_fragments):
        return by_tensors
    return np.where(np.asarray(g.bucket_fragments, dtype=bool), np.inf, by_tensors)


def coalesced_launches(g: StrategyGrid, layers: Any, nbytes: Any, bucket: Any, group: Placement) -> np.ndarray:
    """Ring latencies of the gradient sync (and parameter gather) of ``nbytes`` in ``bucket``-byte buckets where
    the buckets are Apex DistributedFusedAdam's as NeMo 1 sets them up (``bucket_fragments``):

        G = layers on the stage (virtual stages under the interleaved schedule);  k = ceil(nbytes / G / bucket)
        n = G ceil(k / C)     (C = the ring's inter-node channels; 1 launch a group within one node)

    NeMo 1 hands Apex one parameter group per Transformer layer, or per virtual-stage module with VPP
    (``configure_optimizers``, NVIDIA/NeMo v2.1.0 nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py
    L668-697; ``init_params_bucket`` per group, megatron_base_model.py L884-895). ``init_params_bucket`` closes the
    open buckets and gives every bucket of the group a fragment of each of its parameters (NVIDIA/apex@6424da3b
    apex/contrib/optimizers/distributed_fused_adam.py L1275-1345), so a group's k buckets fill together and
    ``_try_start_bucket_grad_sync`` reduce-scatters them in one ``_coalescing_manager`` (L1827-1946; the parameter
    all-gather the same, L2032-2082): one NCCL group. NCCL prices a group of ring tasks at ``lat x numPipeOps +
    bytes / bw`` with numPipeOps = ceil(tasks / nChannels) (NVIDIA/nccl v2.23.4-1 src/graph/tuning.cc L464-465,
    src/enqueue.cc L589-600), so the group pays ceil(k / C) latencies, not k. C is the search graph's channels
    (:func:`~scalemodel.cost.nccl.nccl_graph_channels_inter`), never above the communicator's, so the count is an
    upper bound; within one node the NVLink ring's channels (24 on Hopper) exceed every group's k here."""
    groups = np.maximum(np.where(g.virtual_stages > 1, g.virtual_stages, layers), 1.0)
    k = np.maximum(np.ceil(np.asarray(nbytes, dtype=float) / groups / np.maximum(bucket, 1e-300)), 1.0)
    channels = nccl_graph_channels_inter(group)
    return np.asarray(groups * np.where(np.isnan(channels), 1.0, np.ceil(k / np.maximum(channels, 1.0))), dtype=float)


def bucket_count(nbytes: Any, bucket: Any, wire: Any = 1.0, tensors: Tensors = None,
                 by_tensors: np.ndarray | None = None) -> np.ndarray:
    """Gradient buckets of a payload of ``nbytes`` in buckets of ``bucket`` bytes (``wire`` bytes an element) over
    the parameter tensors ``tensors`` (:func:`param_tensors`):

        e = bucket / wire elements;  big = tensors of >= e elements;  S = elements of the smaller ones
        n_b = max(min(big + ceil(S / e), ceil(nbytes / bucket)), 1)           (ceil(nbytes / bucket) without tensors)

    No framework splits a tensor across buckets: Megatron-Core fills a bucket with whole parameters in reverse order
    and closes it once it holds ``bucket_size`` elements (param_and_grad_buffer.py ``ParamAndGradBuffer.__init__``:
    "if (data_end_index - bucket_data_start_index) >= bucket_size", NVIDIA/Megatron-LM@baf94af3c6 = core_r0.8.0);
    PyTorch DDP does the same by bytes (torch/csrc/distributed/c10d/reducer.cpp ``compute_bucket_assignment_by_size``:
    a tensor joins the open bucket, which is closed once its size reaches the limit); DeepSpeed ZeRO-1/2 reduces the
    open bucket before a parameter that would overflow it (stage_1_and_2.py
    ``reduce_independent_p_g_buckets_and_remove_grads``). So every tensor of >= e elements closes a bucket of its own
    (with whatever smaller tensors were open), and a bucket without one holds >= e elements of small tensors, except
    the last: big <= k <= big + floor(S / e) + 1 for the greedy fill's k, and n_b lies there too. A bucket below the
    smallest tensor gives one bucket per tensor (n_b = the tensor count, where ceil(nbytes / bucket) priced millions
    of collectives); a bucket above every tensor ceil(S / e), as before; one above the payload 1. n_b counts the
    small tensors' buckets as if none had joined a big tensor's, so between the limits it can exceed k (by 5 of 8
    at worst on tests/test_bucket_count.py's model, where the fill is run step by step)."""
    size = np.maximum(np.asarray(bucket, dtype=float), 1e-300)
    ceiling = np.atleast_1d(np.maximum(np.ceil(np.asarray(nbytes, dtype=float) / size), 1.0))
    if by_tensors is None:
        by_tensors = tensor_bucket_count(bucket, wire, tensors)
    if by_tensors is None:
        return ceiling
    return np.atleast_1d(np.maximum(np.minimum(by_tensors, ceiling), 1.0)).astype(float)


def embedding_bucket_share(job: Job, g: StrategyGrid, n_params: Any) -> np.ndarray:
    """Share of the stage's gradient payload in its last-reduced bucket at least: the word embedding's TP shard,
    V h / tp elements of ``n_params`` (0 for a workload that is not a transformer):

        share >= min(V h / tp / n_params, 1)

    The buckets are filled in reverse parameter order (:func:`bucket_count`), and the word embedding is a model's
    first parameter (Megatron-Core GPTModel builds ``self.embedding`` before the decoder and the output layer,
    megatron/core/models/gpt/gpt_model.py; Hugging Face models register ``embed_tokens`` first), so its whole
    tensor is in the bucket reduced last, whose reduce-scatter or all-reduce can only start once the backward has
    reached the embedding: the tail no compute hides. Under --overlap-param-gather the same bucket is the first one
    all-gathered, waited for by the embedding's forward pre-hook before any compute (distrib_optimizer.py
    ``zero_grad`` dispatches all-gather 0; ``_get_model_param_buffer_dp_views`` orders the buckets "same order as
    forward pass", NVIDIA/Megatron-LM@baf94af3c6). PyTorch DDP rebuilds its buckets in the order the gradients became
    ready (``_rebuild_buckets``) and DeepSpeed ZeRO-1/2 fills its bucket as they arrive: the embedding's, tied or not,
    is still the last. Megatron buckets only the first pipeline stage, which holds the embedding; the step prices
    that stage's tail for every stage (:func:`megatron_bucket_elements`)."""
    if not job.is_transformer:
        return np.zeros(1)
    embedding = vocab_shard_elements(job, g)
    return np.asarray(np.minimum(embedding / np.maximum(n_params, 1.0), 1.0), dtype=float)


def _dp_comm(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray, data: DataParallelGroups, *,
             shard: Any = 1.0, hsdp: tuple[DataParallelGroups, DataParallelGroups] | None = None,
             all_reduce: bool = False) -> dict[str, np.ndarray]:
    """Gradient synchronisation seconds per step: the gradient sync (``grads``, overlappable with
    the last backward), the ZeRO-3 parameter gathers (``gathers``, total and ``gathers_exposed``),
    and the bucket share of the last bucket (``last_bucket``).

    The replicas of ``data`` (the whole DP group, or the groups of hierarchical sync, which calls this
    once inside its groups and once across them) take part, each synchronising 1/``shard`` of the
    gradients, with their context-parallel ranks where ``data`` carries cp (``data.sharding``: each cp rank holds
    the gradient of its own sequence chunk for the same weights): Megatron-Core's DDP reduces, and its distributed
    optimizer shards, over the dp x cp group (distributed_data_parallel.py ``intra_dp_cp_group``,
    param_and_grad_buffer.py ``get_data_parallel_group(with_context_parallel=True)``).

    ZeRO-0: all-reduce of the gradients. ZeRO-1/2: reduce-scatter of the gradients at the gradient dtype +
    all-gather of the updated parameters at the parameter dtype (:func:`distributed_optimizer_sync`; the
    all-gather is also returned alone as ``param_gather``: it follows the optimizer step, outside the backward
    window). ``all_reduce``: price ZeRO-1/2 as the all-reduce of the gradients (hier:G's exchange of each
    rank's reduced shard across the groups). ZeRO-3/FSDP: :func:`_sharded_parameter_traffic`
    (per-unit gathers and reduce-scatters in every micro-batch; Rajbhandari et al. 2020 §7: 1.5x the
    all-reduce volume when m = 1).

    Priced by :func:`_dp_traffic`; ``gathers_exposed`` is what the windows of ``comp`` leave of the gathers.
    """
    parts, gathers_exposed = _dp_traffic(job, g, comp, m, data, shard=shard, hsdp=hsdp, all_reduce=all_reduce)
    return dict(parts, gathers_exposed=gathers_exposed(comp))


class HostChain(NamedTuple):
    """The state offload's host copies of a ZeRO-3 / FSDP / HSDP rank (:func:`host_chain`, docs/model.md#state-offload),
    seconds: the gradient path's copies of each backward but the last (``early``) and of the last (``last``: with
    DeepSpeed's fp32 boundary copy), on the reduce-scatters' stream, each unit's after its reduce-scatter; their
    host-to-device part (``back``, of each backward); the parameter fetches of one gather pass over the units
    (``fetch``), on the gathers' stream, each unit's before its all-gather; and the copy engine's windows of one
    micro-batch's forward and backward (``forward``, ``backward``: their wall time)."""

    early: Any
    last: Any
    back: Any
    fetch: Any
    forward: Any
    backward: Any


class Exposure(Protocol):
    """Seconds per step a stage's windows leave exposed of priced traffic, as a function of the stage (its
    ``forward_free`` and ``backward_free``): the collectives are priced once, their exposure under any windows;
    with ``chain``, the ZeRO-3 / FSDP units' collectives with the state offload's host copies on their streams
    (each unit's gradient copies after its reduce-scatter, its fetch before its gather: :func:`_sharded_units`); with
    ``cross`` False, without hier:G's cross-group all-reduces on the units' reduce path (:func:`_sync_exposed`'s
    in-group part)."""

    def __call__(self, comp: dict[str, np.ndarray], /, chain: HostChain | None = None,
                 cross: bool = True) -> np.ndarray: ...

#: A data-parallel group's priced sync (:func:`_dp_traffic`): :func:`_dp_comm`'s seconds but ``gathers_exposed``,
#: and the ZeRO-3 / FSDP gathers' exposure under a stage's windows.
DpTraffic = tuple[dict[str, np.ndarray], Exposure]


def _none_exposed(comp: dict[str, np.ndarray], chain: HostChain | None = None, cross: bool = True) -> np.ndarray:
    """No sharded parameters: no gather to expose, whatever the windows."""
    return np.zeros(1)


def _dp_traffic(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray, data: DataParallelGroups, *,
                shard: Any = 1.0, hsdp: tuple[DataParallelGroups, DataParallelGroups] | None = None,
                all_reduce: bool = False, cross: DataParallelGroups | None = None) -> DpTraffic:
    """:func:`_dp_comm`'s collectives, priced once, and the exposure of its ZeRO-3 / FSDP gathers under a stage's
    windows (with ``cross``, hier:G's groups: and the units' cross-group all-reduces, :func:`_sharded_units`). Of
    ``comp`` only the stage's layers, its pipeline rank and its recomputed layers are read, never its compute windows
    (``forward_free``, ``backward_free``): the collectives' seconds do not depend on them."""
    dense, expert = _params_per_gpu(job, g)
    if job.is_transformer and "pipeline_rank" in comp:  # the priced rank's own parameters (step._dp_rank)
        dense, expert = _rank_params_per_gpu(job, g, comp["layers_per_stage"], comp["pipeline_rank"])
    elif job.is_transformer:  # the priced stage's share: its layers over the average L / pp
        share = comp["layers_per_stage"] * g.pp / float(job.shape.layers)
        dense, expert = dense * share, expert * share
    dense, expert = dense / shard, expert / shard
    # the replicas' cp ranks hold the same weights and partial gradients (their sequence chunks): the gradients are
    # reduced, and ZeRO 1-2 shard, over the replicas with their cp ranks (DataParallelGroups.sharding)
    red = data.sharding
    dp = red.ranks
    n_params = dense + expert
    q, codec = _wire_and_codec(job, g, n_params)
    zero3 = g.zero >= Zero.PARAMETERS
    bucket = _bucket_bytes(job, g, comp, dense * shard / comp["layers_per_stage"], q)
    dense_tensors, expert_tensors = param_tensors(job, g, comp)
    both_tensors = None if dense_tensors is None or expert_tensors is None else dense_tensors + expert_tensors
    # the tensors' bucket counts (bucket_count), once per list; buckets that cut tensors (bucket_fragments: Apex's
    # DistributedFusedAdam) are bounded by the payload alone
    dense_nt = _whole_tensors(g, tensor_bucket_count(bucket, q, dense_tensors))
    expert_nt = _whole_tensors(g, tensor_bucket_count(bucket, q, expert_tensors)) if job.expert_params > 0 else None
    both_nt = _whole_tensors(g, tensor_bucket_count(bucket, q, both_tensors)) if job.expert_params > 0 else dense_nt

    def launches(nbytes: Any, group: Placement, by_tensors: np.ndarray | None) -> np.ndarray:
        """The collectives, each paying its latency, that move ``nbytes`` in the buckets (bucket_count), or
        NeMo 1's coalesced Apex bucket groups where ``bucket_fragments`` (coalesced_launches)."""
        n = bucket_count(nbytes, bucket, by_tensors=by_tensors)
        if not np.any(g.bucket_fragments):
            return n
        return np.where(g.bucket_fragments, coalesced_launches(g, comp["layers_per_stage"], nbytes, bucket, group), n)

    distopt = np.zeros(1, dtype=bool) if all_reduce else distributed_optimizer_sync(job, g)
    # ZeRO-1/2: RS(n q) + AG of the n updated parameters in the same buckets, on the algorithms NCCL has for them
    # (distributed_optimizer_sync, zero12_algorithm); the AG moves w bytes a parameter, w_q (compute.param_gather_bytes:
    # 1 for fp8_param_gather's, 1/2 for fp4_param_gather's)
    w = job.elem_bytes
    w_q = compute.param_gather_bytes(job.fp8_recipe)[0]
    fp8_dense, fp8_expert = fp8_param_elements(job, g, comp["layers_per_stage"] / shard, dense, expert)
    rs_ag = zero12_algorithm(g) if np.any(distopt) else g.algorithm

    def reduce(n: Any, ag_bytes: Any, group: Placement, tensors: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sync seconds, the ZeRO-1/2 all-gather's part of them, the part that is an NVLS all-reduce) of the
        gradients of n parameters in ``tensors`` parameter tensors."""
        n_b = launches(n * q, group, tensors)  # the buckets: one collective each, paying its latency
        out, nvls = np.zeros(1), np.zeros(1)
        # no row of ZeRO-3 / FSDP reads what is priced here: their gradients' reduce-scatters are the per-unit
        # traffic's (_sharded_units) and their rows of the sync are zeroed below (sync28: an all-reduce and a
        # reduce-scatter were priced here for them too)
        if not np.all(distopt | zero3):
            t, hier = _priced("allreduce", n * q / n_b, group, g.algorithm)
            out = n_b * t
            if np.any(nvls_allreduce_applies(group)):  # NVLS: what auto weighed
                nvls = np.where(nvls_allreduce(group, g.algorithm, out, n_b * hier) & ~distopt, out, 0.0)  # zero3 later
        if not np.any(distopt):
            return out, np.zeros(1), nvls
        rs = n_b * _collective("reducescatter", n * q / n_b, group, rs_ag)
        ag = n_b * _collective("allgather", ag_bytes / n_b, group, rs_ag)
        return np.where(distopt, rs + ag, out), np.where(distopt, ag, 0.0), nvls

    every_zero3 = bool(np.all(zero3))  # their gradients move in the per-unit traffic only (below)
    total, param_gather, nvls_ar = (np.zeros(1), np.zeros(1), np.zeros(1)) if every_zero3 else reduce(
        dense, dense * w - fp8_dense * (w - w_q), red.dense, dense_nt)
    if job.expert_params > 0 and not every_zero3:  # routed experts are replicated over dp/ep ranks only
        # the same group as red.expert (their fold counts cp)
        t_e, ag_e, nv_e = reduce(expert, expert * w - fp8_expert * (w - w_q), data.expert, expert_nt)
        total, param_gather, nvls_ar = total + t_e, param_gather + ag_e, nvls_ar + nv_e
    gather = bf16_optimizer_param_gather(job, g)
    if np.any(gather):  # DeepSpeed's BF16_Optimizer: the fp32 all-reduce above, then the 16-bit weights gathered
        shards = np.maximum(np.floor(dense / DEEPSPEED_BUCKET_ELEMENTS), 1.0)  # all_gather_dp_groups' num_shards
        ag = shards * _collective("allgather", dense * job.elem_bytes / shards, red.dense)
        total = total + np.where(gather, ag, 0.0)
        param_gather = np.where(gather, ag, param_gather)
    nano = nanotron_zero1(g)
    if np.any(nano) and not all_reduce:  # nanotron ZeRO-1: the all-reduce above, then one 16-bit all-gather
        ag = _collective("allgather", dense * job.elem_bytes, red.dense)
        if job.expert_params > 0:
            ag = ag + _collective("allgather", expert * job.elem_bytes, data.expert)
        total = total + np.where(nano, ag, 0.0)
        param_gather = np.where(nano, ag, param_gather)
    topk = g.compression == CompressionKind.TOPK
    if np.any(topk):
        # each rank contributes rho * n (value, int32 index) pairs per bucket; all-gather size = dp x that. Under
        # ZeRO 1 it stands in for the gradients' reduce-scatter only: the updated shards are still all-gathered
        # (param_gather, kept); ZeRO 2/3, FSDP and HSDP are refused with top-k (job.topk_refused)
        per_rank = g.topk_ratio * n_params * (job.grad_bytes + 4.0)
        n_b = bucket_count(n_params * job.grad_bytes, bucket, by_tensors=both_nt)
        total = np.where(topk, n_b * _collective("allgather", per_rank / n_b * dp, red.dense) + param_gather, total)
        nvls_ar = np.where(topk, 0.0, nvls_ar)
    total = np.where(dp > 1, total + codec, 0.0)
    nvls_ar = np.where(dp > 1, nvls_ar, 0.0)
    param_gather = np.where(dp > 1, param_gather, 0.0)
    # DeepSpeed's ZeRO-2 reduces every micro-batch's gradients, not once at the boundary: partition_gradients makes
    # each backward's hooks reduce (deepspeedai/DeepSpeed@edaa7221 stage_1_and_2.py L1767-1769
    # ``if self.partition_gradients or self.is_gradient_accumulation_boundary()``), so m - 1 more reduce-scatters
    # each step, one under each earlier backward (review36); Megatron's, Apex's and nanotron's ZeRO reduce once
    rs_each = total - param_gather
    # (a parameter server, refused beside ZeRO, exchanges once a step: its rows' sync is replaced below)
    repeats = np.where(deepspeed_zero2(g) & ~np.asarray(all_reduce, dtype=bool) & (np.asarray(g.ps_servers) <= 0),
                       np.maximum(m - 1.0, 0.0), 0.0)
    total = total + repeats * rs_each
    ps_worker = ps_round = np.zeros(1)
    if np.any(g.ps_servers > 0):
        # Parameter server at machine level (BytePS analysis, docs/model.md#parameter-server), over the replicas
        # with their cp ranks (red), which reduce together as they do for the all-reduce above
        ex = _ps_exchange(job, g, red, n_params * q)
        uses_ps = g.ps_servers > 0
        total = np.where(uses_ps, np.where(dp > 1, ex["time"] + codec, 0.0), total)
        param_gather = np.where(uses_ps, 0.0, param_gather)
        nvls_ar = np.where(uses_ps, 0.0, nvls_ar)
        ps_worker = np.where(uses_ps & (dp > 1), ex["worker"] + codec, 0.0)
        ps_round = np.where(uses_ps & (dp > 1), ex["server_round"], 0.0)
    wire_total = np.maximum(n_params * q, 1.0)
    last_bucket = np.maximum(1.0 / bucket_count(wire_total, bucket, by_tensors=both_nt),
                             embedding_bucket_share(job, g, n_params))
    gathers = np.zeros(1)
    gathers_exposed: Exposure = _none_exposed
    # the gradients' reductions of the step (ZeRO 1/2: the sync less its parameter all-gather, which follows the
    # optimizer step) and the units' all-gathers: the streams the state offload's copies queue behind
    reduces, unit_gathers = total - param_gather, np.zeros(1)
    if np.any(zero3):
        root = np.minimum(fsdp_root_params(job, g) / shard, dense)
        units, units_exposed, units_rs = _sharded_units(job, g, comp, m, data, dense, expert, q, bucket, hsdp, root,
                                                        cross)
        total = np.where(zero3, 0.0, total)  # the gradient reduce-scatters are in the per-unit traffic
        nvls_ar = np.where(zero3, 0.0, nvls_ar)
        gathers = np.where(zero3, units, 0.0)
        reduces = np.where(zero3, units_rs, reduces)
        unit_gathers = np.where(zero3, units - units_rs, 0.0)

        def zero3_exposed(c: dict[str, np.ndarray], chain: HostChain | None = None, cross: bool = True
                          ) -> np.ndarray:
            """The ZeRO-3 / FSDP rows' exposed unit traffic under the windows of ``c`` (with ``chain``: and the
            gradient copies behind their reduce-scatters; without ``cross``: hier:G's all-reduces left out), 0 on the
            other rows."""
            return np.asarray(np.where(zero3, units_exposed(c, chain, cross), 0.0))

        gathers_exposed = zero3_exposed
    return ({"grads": total, "gathers": gathers, "last_bucket": last_bucket, "ps_worker": ps_worker,
             "ps_server_round": ps_round, "param_gather": param_gather, "nvls_allreduce": nvls_ar,
             "reduces": reduces, "unit_gathers": unit_gathers, "rs_each": rs_each, "repeats": repeats},
            gathers_exposed)


def _ps_exchange(job: Job, g: StrategyGrid, data: DataParallelGroups, gpu_bytes: np.ndarray) -> dict[str, np.ndarray]:
    """A parameter server's push + pull for the data-parallel group ``data``, machine by machine
    (:func:`scalemodel.cost.ps.ps_exchange`; docs/model.md#parameter-server). ``data`` is the group that
    reduces the gradients: with context parallelism the replicas with their cp ranks (``DataParallelGroups.sharding``,
    Megatron-Core's dp-cp group), whose partial gradients a node sums before its push.

    A node (``gpus_per_node`` GPUs) holds c0 = clip(floor(gpus_per_node / stride), 1, dp) replicas
    of the group. As BytePS does, each node first reduce-scatters their ``gpu_bytes`` over its inner
    tier, then pushes what it holds, P = gpus_per_node x gpu_bytes / c0 bytes (the node's GPUs of the
    other tensor/pipeline groups push theirs through the same NIC at the same time), and all-gathers
    after the pull. Worker NIC B_w = gpus_per_node x the smallest effective per-GPU bandwidth of
    the tiers between the node and the outermost tier the job spans (the taper of an
    oversubscribed tier applies, as to an all-reduce). Every machine of the job, W = gpus /
    gpus_per_node, pushes to the same k servers. Dedicated servers have their own NIC, line rate
    ``ps_server_nic_bandwidth`` (default: a node's NIC) x the NIC tier's efficiency, untapered;
    colocated ones share the workers'. Shards: ``ps_partition_bytes`` pieces dealt round-robin
    (f_max = ceil(c/k)/c) or the given imbalance / k.
    """
    net = job.network
    tiers = net.tiers
    gpn = float(net.gpus_per_node)
    stride = data.dense.stride
    ranks = data.ranks.astype(float)
    c0 = np.clip(np.floor(gpn / stride + 1e-9), 1.0, ranks)
    gpus = g.gpus.astype(float)
    machines = np.maximum(np.ceil(gpus / gpn), 1.0)
    node_tier = next((i for i, t in enumerate(tiers) if t.span >= gpn), len(tiers) - 1)
    nic_tier = min(node_tier + 1, len(tiers) - 1)
    per_gpu = np.full(np.shape(gpus), np.inf)
    alpha = np.zeros(np.shape(gpus))
    below = np.zeros(np.shape(gpus), dtype=bool)  # the job spilled past the tiers seen so far
    for i, t in enumerate(tiers):
        crossed = (i > node_tier) & ((i == nic_tier) | below)
        per_gpu = np.where(crossed, np.minimum(per_gpu, t.effective_bandwidth), per_gpu)
        alpha = np.where(crossed, t.latency, alpha)
        below = gpus > t.span
    nic = tiers[nic_tier]
    per_gpu = np.where(np.isfinite(per_gpu), per_gpu, nic.effective_bandwidth)
    worker_bw = gpn * per_gpu
    server_line, _ = ps_server_line(job)
    server_bw = server_line * nic.efficiency
    machine_bytes = np.minimum(gpn, gpus) * gpu_bytes / c0
    k = np.maximum(g.ps_servers, 1).astype(float)
    k_eff = np.where(g.ps_colocated, np.minimum(k, machines), k)
    pieces = np.maximum(np.ceil(machine_bytes / job.ps_partition_bytes), 1.0)
    f_max = (np.minimum(job.ps_shard_imbalance / k_eff, 1.0) if job.ps_shard_imbalance > 0
             else ps.round_robin_fmax(k_eff, machine_bytes, job.ps_partition_bytes))
    local = place(c0, stride, net)  # the node's replicas: reduce-scatter before the push, all-gather after
    both = _collective("reducescatter", gpu_bytes, local) + _collective("allgather", gpu_bytes, local)
    intra = np.where(c0 > 1, both, 0.0)
    return ps.ps_exchange(machines, k_eff, machine_bytes, worker_bw, server_bw, colocated=g.ps_colocated,
                          f_max=f_max, chunks=pieces, intra_s=intra, server_memory_bw=job.ps_server_memory_bandwidth,
                          latency_s=alpha)


#: DeepSpeed ZeRO-3 gathers parameters module by module (coalesced per sub-module: QKV, output
#: projection, MLP up/gate, MLP down): four gathers per transformer layer and pass.
DEEPSPEED_GATHERS_PER_LAYER = 4.0


#: XLA's GPU latency-hiding scheduler on its default cost model: an async collective's start -> done latency is
#: 5000 units and a cuBLAS / cuDNN custom call (or a loop fusion) costs 1000, "so the LHS will try to schedule
#: approximately 5 of these in between each start/end pair" (openxla/xla@4e8e23f16, 2024-04-02, jaxlib 0.4.26's XLA:
#: xla/service/gpu/gpu_hlo_schedule.cc GpuLatencyEstimator::NodeCost and GetLatencyBetween,
#: ApproximateLatencyEstimator kMediumCost / kHighLatency in latency_hiding_scheduler.cc; the same at fb46636c1,
#: 2024-12-08, the XLA before JAX-Toolbox's maxtext-2024-12-09 image, in gpu_latency_hiding_scheduler.cc).
XLA_LHS_WINDOW_KERNELS = 5.0

#: XLA's default all-reduce combine threshold, bytes (xla/service/collective_utils.h
#: ``kDefaultAllReduceCombineThreshold = 30 * 1024 * 1024 + 7`` at fb46636c1; 30 MiB, ``kDefaultThreshold`` in
#: debug_options_flags.cc, at 4e8e23f16), when no bucket_size is given.
XLA_ALL_REDUCE_COMBINE_BYTES = 30.0 * 1024 * 1024 + 7


def xla_layer_kernels(job: Job, g: StrategyGrid | None = None, recomputed: Any = 1.0) -> np.ndarray:
    """Medium-cost kernels of a transformer layer's backward under XLA (:data:`XLA_LHS_WINDOW_KERNELS`), counted
    from its GEMMs alone: a data-gradient and a weight-gradient GEMM per weight matrix of MaxText's layer (query,
    key, value and out projections, ``fused_qkv: False``; the MLP's wi_0, wi_1 and wo when gated, wi and wo
    otherwise, ``fused_mlp: False``: AI-Hypercomputer/maxtext@efb6d9e4a MaxText/configs/base.yml lines 97-98,
    layers/attentions.py, layers/linears.py MlpBlock) and the attention's backward kernel, and the forward kernels
    the backward repeats under ``g``'s recompute (:func:`xla_recomputed_kernels`) on the ``recomputed`` share of
    the stage's layers (its recomputed layers over its layers, as the backward seconds count them; none without g):

        K = 2 (4 + (3 if gated else 2)) + 1 + recomputed R            (15 for Llama without recompute)

    XLA's loop fusions cost as much to its scheduler, so the layer has more such kernels than K and a window of 5
    is shorter than 5/K of the layer's backward: pricing K from the GEMMs gives the longest window the scheduler
    can leave, the least exposure."""
    # the forward's weight GEMMs (K_f less its attention kernel), each with a data- and a weight-gradient GEMM
    own = 2.0 * (xla_layer_forward_kernels(job) - 1.0) + 1.0
    if g is None:
        return np.asarray(own, dtype=float)
    return np.asarray(own + np.asarray(recomputed, dtype=float) * xla_recomputed_kernels(job, g), dtype=float)


def xla_recomputed_kernels(job: Job, g: StrategyGrid) -> np.ndarray:
    """Medium-cost kernels a recomputed layer's backward repeats of its forward, counted as
    :func:`xla_layer_forward_kernels` counts the forward's (one GEMM per weight matrix, the attention kernel; the
    norms and activations are loop fusions, left out as there), for what the backward seconds price
    (docs/model.md#recompute, :func:`scalemodel.cost.transformer.recomputed_modules`):

        full recompute       K_f = 4 + (3|2) + 1, less the down-projection where XLA's remat leaves it out
                             (:func:`scalemodel.engine.layer_compute.xla_remat`: XLA's)      (8 for Llama)
                             and, in a parallel block, the output projection too (xlapar35)
        selective            the attention forward kernel with core_attn, jax_dots, jax_qkvo or jax_qkv (1; not
                             with jax_context, which keeps the kernel's output),
                             the MLP's up-projections with jax_qkvo or jax_qkv (wi_0, wi_1 gated, wi: 2|1), the
                             output projection with jax_qkv (1), the dense MLP's GEMMs
                             with mlp (3|2), torchtitan's repeated GEMMs with titan_op (wk, wo, and w3 gated:
                             :func:`scalemodel.cost.transformer.titan_op_gemms`)
        none                 0

    ``jax_dots`` (JAX's ``checkpoint_dots_with_no_batch_dims``) repeats no weight GEMM, only the core. MLA's
    up-projections and the MoE blocks are not counted: the layer's own count is MaxText's dense layer, which has
    neither."""
    sh = job.shape
    gated = np.asarray(sh.gated_mlp, dtype=bool)
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules)
    titan = sum((np.where(np.asarray(width, dtype=float) > 0, 1.0, 0.0)
                 for _, _, width in transformer.titan_op_gemms(sh)), np.zeros(1))
    selective = (np.where(again.attention_core, 1.0, 0.0)
                 + np.where(again.mlp, np.where(gated, 3.0, 2.0),
                            np.where(again.jax_qkvo, np.where(gated, 2.0, 1.0), 0.0))
                 + np.where(again.out_proj, 1.0, 0.0)
                 + np.where(again.titan_op, titan, 0.0))
    # XLA's remat drops the down-projection, and a parallel block's O-proj (docs/model.md#xlapar35)
    dead = 1.0 + np.where(np.asarray(job.shape.parallel_block, dtype=bool), 1.0, 0.0)
    full = xla_layer_forward_kernels(job) - np.where(xla_remat(job, g), dead, 0.0)
    return np.asarray(np.where(g.recompute == Recompute.FULL, full, selective), dtype=float)


def xla_layer_forward_kernels(job: Job) -> np.ndarray:
    """Medium-cost kernels of a transformer layer's forward under XLA, counted as :func:`xla_layer_kernels` counts
    the backward's: one GEMM per weight matrix of MaxText's unfused layer and the attention kernel,

        K_f = 4 + (3 if gated else 2) + 1            (8 for Llama)

    again the longest window of :data:`XLA_LHS_WINDOW_KERNELS` kernels the scheduler can leave (its loop fusions
    count as much)."""
    return np.asarray(4.0 + np.where(job.shape.gated_mlp, 3.0, 2.0) + 1.0, dtype=float)


def xla_lhs_unit_exposure(job: Job, gather: Any, scatter: Any, forward: Any, backward: Any,
                          backward_gathers: Any, kernels: Any, left: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) exposed seconds of one FSDP unit's collectives under XLA's GPU latency-hiding scheduler
    (``xla_gpu_lhs``; docs/model.md#xla-gpu-lhs): every async collective, the parameter all-gather and the gradient
    reduce-scatter as the all-reduce, is given about :data:`XLA_LHS_WINDOW_KERNELS` kernels of compute between its
    start and its done (``GpuLatencyEstimator::GetLatencyBetween``: kHighLatency for every async pair, the 4x of
    ``xla_gpu_enable_approx_costly_collectives``, off by default and absent at 4e8e23f16, for all-reduces only),
    one collective of any kind in flight: the default ``GpuAsyncTracker`` (``xla_gpu_lhs_enable_gpu_async_tracker``
    true) puts every async collective on one ``kGpuAsyncStreamCollectives`` resource, of which
    ``GetNumAvailableResources`` grants 1 ("upto 1 outstanding collective on the async stream"; a literal 1 at
    openxla/xla@4e8e23f16 gpu_hlo_schedule.cc, ``xla_gpu_experimental_parallel_collective_overlap_limit``, default 1,
    at fb46636c1 gpu_latency_hiding_scheduler.cc). With f and b a layer's free forward and backward seconds, b'
    (``left``, b when None) what the cross-group all-reduces' windows leave of b, and n = 2 collectives in a
    backward window (the previous unit's gather and the next one's reduce-scatter; 1 without the backward gather):

        W_f = 5 f / K_f                      (K_f = :func:`xla_layer_forward_kernels` >= 5)
        W_b = min(5 b / K, b' / n)           (K = ``kernels``, :func:`xla_layer_kernels` with the recomputed
                                              forward b holds; the windows never hold more than b')
        forward  = max(AG - W_f, 0)
        backward = max(AG - W_b, 0) [with the backward gather] + max(RS - W_b, 0)

    A window is 5 of the layer's kernels, each b / K long whatever the all-reduces take (they take whole windows of
    the same kernels, not a share of each), so the all-reduces shorten the units' windows only through b' / n.
    Each is at least the shared-window max(AG - f, 0), max(AG + RS - b', 0) (n W_b <= b'), and grows by at most
    5 / K_f of a second per second of f lost and by at most one per second of b lost."""
    forward, backward = np.asarray(forward, dtype=float), np.asarray(backward, dtype=float)
    left = backward if left is None else np.asarray(left, dtype=float)
    gathers = np.asarray(backward_gathers, dtype=bool)
    w_f = XLA_LHS_WINDOW_KERNELS * forward / xla_layer_forward_kernels(job)
    w_b = np.minimum(XLA_LHS_WINDOW_KERNELS * backward / np.asarray(kernels, dtype=float),
                     left / np.where(gathers, 2.0, 1.0))
    fwd = np.maximum(np.asarray(gather, dtype=float) - w_f, 0.0)
    bwd = np.where(gathers, np.maximum(np.asarray(gather, dtype=float) - w_b, 0.0), 0.0) \
        + np.maximum(np.asarray(scatter, dtype=float) - w_b, 0.0)
    return np.asarray(fwd, dtype=float), np.asarray(bwd, dtype=float)


def xla_lhs_allreduce(job: Job, g: StrategyGrid, shard_bytes: Any, wire: Any, replicas: Placement,
                      backward: Any, layers: Any, kernels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(total, exposed, windows) seconds per micro-batch of HSDP's cross-group gradient all-reduce of
    ``shard_bytes`` (every layer's reduced shard, ``wire`` bytes a gradient element) under XLA's GPU
    latency-hiding scheduler (``xla_gpu_lhs``; docs/model.md#xla-gpu-lhs).

    XLA's all-reduce combiner joins the independent all-reduces into groups of at most T bytes (the strategy's
    bucket_size, i.e. --xla_gpu_all_reduce_combine_threshold_bytes, in elements of the gradient at its wire
    bytes; :data:`XLA_ALL_REDUCE_COMBINE_BYTES` when unset): n = floor(S / T) full groups and a remainder
    r = S - n T. The scheduler runs one collective of any kind at a time (the default ``GpuAsyncTracker``'s one
    ``kGpuAsyncStreamCollectives`` resource, :func:`xla_lhs_unit_exposure`; ``all_reduce_overlap_limit = 1`` of
    gpu_hlo_schedule.cc GetSchedulerConfig binds only with that tracker off) and leaves each about
    :data:`XLA_LHS_WINDOW_KERNELS` kernels of compute between its start and its done, whatever its size; the compute
    after the done waits for the all-reduce. The combiner groups the all-reduces in program order, so the last group
    (the remainder r, else a full one) holds the first layer's and the embedding's gradients, which exist only when
    the backward ends: no backward is left to hide it, and it is exposed whole (as DDP's last bucket,
    :func:`_expose`). With b the layer's backward seconds, L the layers and K = ``kernels`` the layer's backward
    kernels (:func:`xla_layer_kernels`, with the recomputed forward b holds), each of the N = G - 1 groups before it
    (G = n + (1 if r > 0)) gets a window of 5 b / K, but together they never hold more than the L b of backward
    there is:

        W = min(5 b / K, L b / N)
        total   = n t(T) + t(r)
        exposed = N max(t(T) - W, 0) + t(last)           (t(last) = t(r) if r > 0 else t(T))

    and ``windows`` = N W, the backward the all-reduces take, which the units' gathers and reduce-scatters cannot
    claim too (:func:`_sharded_parameter_traffic` leaves them b - N W / L a layer): no compute hides traffic twice,
    and with both the exposure grows by at most L per second of b lost (a faster accelerator is never slower).
    t the all-reduce over the replica groups (one rank of each shard group, across nodes): the groups are priced
    once (:func:`xla_allreduce_groups`), the windows expose them (:func:`xla_allreduce_window`)."""
    return xla_allreduce_window(xla_allreduce_groups(job, g, shard_bytes, wire, replicas), backward, layers, kernels)


#: HSDP's cross-group all-reduce as XLA's combiner groups it (:func:`xla_allreduce_groups`), seconds per micro-batch:
#: (n t(T) + t(r) in all, t(T) one full group, t(last) the group the backward's end releases, N the groups that
#: complete inside the backward); what the backward hides of it depends on the windows alone
#: (:func:`xla_allreduce_window`).
XlaGroups = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def xla_allreduce_groups(job: Job, g: StrategyGrid, shard_bytes: Any, wire: Any, replicas: Placement) -> XlaGroups:
    """:func:`xla_lhs_allreduce`'s groups, priced (:data:`XlaGroups`): n = floor(S / T) full groups of T bytes and
    the remainder r = S - n T, each an all-reduce over ``replicas``; N = n if r > 0 else n - 1 of them complete
    inside the backward."""
    shard_bytes = np.asarray(shard_bytes, dtype=float)
    threshold = np.where(g.bucket_bytes > 0, g.bucket_bytes / job.grad_bytes * wire,
                         XLA_ALL_REDUCE_COMBINE_BYTES)
    full = np.floor(shard_bytes / threshold)
    rest = shard_bytes - full * threshold
    t_full = _collective("allreduce", threshold, replicas)
    t_rest = np.where(rest > 0, _collective("allreduce", rest, replicas), 0.0)
    before = np.where(rest > 0, full, np.maximum(full - 1.0, 0.0))  # the groups complete inside the backward
    last = np.where(rest > 0, t_rest, np.where(full > 0, t_full, 0.0))  # complete when the backward ends
    return np.asarray(full * t_full + t_rest, dtype=float), t_full, last, before


def xla_allreduce_window(groups: XlaGroups, backward: Any, layers: Any, kernels: Any
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(total, exposed, windows) of the priced ``groups`` under a layer's backward of ``backward`` seconds
    (:func:`xla_lhs_allreduce`): W = min(5 b / K, L b / N), exposed = N max(t(T) - W, 0) + t(last), windows = N W."""
    total, full, last, before = groups
    backward = np.asarray(backward, dtype=float)
    window = np.minimum(XLA_LHS_WINDOW_KERNELS * backward / np.asarray(kernels, dtype=float),
                        layers * backward / np.maximum(before, 1.0))
    exposed = before * np.maximum(full - window, 0.0) + last
    return total, np.asarray(exposed, dtype=float), np.asarray(before * window, dtype=float)


def ps_server_line(job: Job) -> tuple[float, Any]:
    """A dedicated parameter server's NIC line rate (B/s per direction) and the tier it is read from: the cluster's
    ``parameter_server.nic_bandwidth``, else a node's NIC, gpus_per_node x the per-GPU line rate of the first tier
    outside the node (BytePS's equal-NIC analysis; :func:`_ps_exchange` takes that tier's efficiency on it)."""
    tiers = job.network.tiers
    gpn = float(job.network.gpus_per_node)
    node_tier = next((i for i, t in enumerate(tiers) if t.span >= gpn), len(tiers) - 1)
    nic = tiers[min(node_tier + 1, len(tiers) - 1)]
    return float(job.ps_server_nic_bandwidth or gpn * nic.bandwidth), nic


def _sharded_parameter_traffic(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray,
                               data: DataParallelGroups, dense: np.ndarray, expert: np.ndarray,
                               wire: np.ndarray, bucket: np.ndarray,
                               hsdp: tuple[DataParallelGroups, DataParallelGroups] | None = None,
                               root: Any = 0.0) -> dict[str, np.ndarray]:
    """ZeRO-3 / FSDP traffic per step in the frameworks' units, and the part compute cannot hide.

    Each transformer layer is a unit (PyTorch FSDP wraps each block, Zhao et al. 2023 §3.2-3.3;
    DeepSpeed ZeRO-3 fetches each sub-module, Rajbhandari et al. 2020 §5.3). In every micro-batch a
    unit's 16-bit parameters are all-gathered over the data-parallel group before its forward (AG),
    again before its backward (parameters are freed after the forward: FSDP reshard_after_forward,
    ZeRO-3's release), except the last unit, whose backward follows its forward at once (torchtitan
    keeps it gathered; DeepSpeed's max_reuse_distance), and its gradients are reduce-scattered after
    its backward (RS; FSDP and ZeRO-2/3 reduce in every micro-batch, not once per step): (2L - 1) AG
    + L RS per micro-batch. With prefetching one unit ahead, the gather for unit i+1 runs under unit
    i's forward, and the gather for unit i-1 plus the reduce-scatter of unit i+1 run under unit i's
    backward (they share the network). Per micro-batch, with f and b one unit's forward and backward
    compute:

        exposed = AG + (L-1) max(0, AG - f) + (L-1) max(0, AG + RS - b) + RS

    (the first gather and the last reduce-scatter have no compute under them); without overlap
    everything is exposed. Each max() grows by at most what the compute shrinks, so a faster accelerator
    never makes the step slower, and no compute hides more traffic than runs under it.

    ``fsdp_reshard_after_forward`` false (PyTorch fully_shard reshard_after_forward=False: "keeps the
    unsharded parameters in memory after forward and avoids the all-gather in backward"; Llama 3,
    arXiv 2407.21783 §3.3.2): every unit keeps its forward's gather for its backward, so a micro-batch
    moves L AG + L RS, and each backward window holds only the reduce-scatter:

        exposed = AG + (L-1) max(0, AG - f) + (L-1) max(0, RS - b) + RS

    (the unsharded parameters of every unit are then held at once:
    :func:`~scalemodel.engine.stage_memory.memory_parts`).
    ``fsdp_fp8_all_gather`` (torchao Float8Linear, enable_fsdp_float8_all_gather): the linear weights of
    a unit (:func:`~scalemodel.cost.transformer.linear_weights_per_layer`) cross the wire in float8, 1 byte
    each; norms, embeddings and routed experts stay 16-bit, and the gradients' reduce-scatter is unchanged
    (:func:`_gathered_bytes`).
    DeepSpeed issues its gathers per module (:data:`DEEPSPEED_GATHERS_PER_LAYER` per layer) and its
    reduce-scatters in ``bucket`` pieces (reduce_bucket_size, or the user's bucket_size); FSDP one flat
    gather and one reduce-scatter per unit. With HSDP (``hsdp`` = the shard groups and the replica
    groups) the gathers and reduce-scatters stay inside groups of S replicas and each unit's reduced
    1/S shard is all-reduced across the dp/S groups, in the same backward window.

    ``root`` (:func:`fsdp_root_params`, R of the ``dense`` parameters): PyTorch FSDP's root unit, which holds the
    embedding and output layer. The L units are then the blocks alone (AG, RS over dense - R), and the root adds one
    gather AG_r (16-bit, 2 R bytes) before the first block's, which nothing hides (the first block's gather
    queues behind it), and one reduce-scatter RS_r (R x wire bytes; plus HSDP's all-reduce of its shard) after
    the last block's, once the backward has ended (its embedding gradient is the last one produced):

        traffic = AG_r + (2L - 1) AG + L RS + RS_r
        exposed = AG_r + AG + (L-1) max(0, AG - f) + (L-1) max(0, AG + RS - b) + RS + RS_r

    (R = 0 gives the formulas above). Both root terms are their own traffic, so exposed <= traffic still holds.
    ``fsdp_defer_grad_sync`` (FSDP2's set_requires_gradient_sync(False) and set_reshard_after_backward(False) on every
    micro-batch but the last, NeMo Automodel's components/moe/fsdp_mixin.py; m > 1; docs/model.md#fsdp-deferred-sync):
    each unit's gradients are reduce-scattered once, under the last backward; the units a backward gathered stay
    gathered into the next forward, so only the first forward gathers. Per step, with AG_b = AG where resharded after
    forward, else 0:

        traffic = L AG + m (L-1) AG_b + L RS + AG_r + RS_r
        exposed = AG + (L-1) max(0, AG - f) + (m-1) (L-1) max(0, AG_b - b) + (L-1) max(0, AG_b + RS - b) + RS
                  + AG_r + RS_r

    (m = 1: the per-micro-batch formulas above). Under pipeline parallelism (pp > 1, with AG_b = 0: the spec refuses
    reshard after forward there) each stage defers on its own (torch.distributed.pipelining stage.py
    ``backward_maybe_with_nosync``: every backward of an FSDPModule stage with requires_gradient_sync and
    reshard_after_backward off; ``perform_reduce_grad``, the schedule's REDUCE_GRAD after the stage's last backward,
    runs every unit's post_backward, reduce-scatter and reshard, and ``_root_post_backward_final_callback``, which
    makes the compute stream wait for them): the reduce-scatters run after the backward, under no compute,

        exposed = AG + (L-1)·max(0, AG - f) + L·RS + AG_r + RS_r        (pp > 1)

    docs/model.md#fsdp-deferred-sync.
    ``xla_gpu_lhs`` (zero fsdp/hsdp, a transformer): the (L-1) max() terms take XLA's windows instead
    (:func:`xla_lhs_unit_exposure`), and hsdp's cross-group all-reduces leave the units (:func:`xla_lhs_allreduce`).
    See docs/model.md#dp-comm. The collectives are priced once (:func:`_sharded_units`), then exposed under the
    windows f and b.
    """
    total, exposed, _ = _sharded_units(job, g, comp, m, data, dense, expert, wire, bucket, hsdp, root)
    return {"total": total, "exposed": exposed(comp)}


def _sharded_units(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray, data: DataParallelGroups,
                   dense: np.ndarray, expert: np.ndarray, wire: np.ndarray, bucket: np.ndarray,
                   hsdp: tuple[DataParallelGroups, DataParallelGroups] | None, root: Any,
                   cross: DataParallelGroups | None = None) -> tuple[np.ndarray, Exposure, np.ndarray]:
    """(traffic seconds per step, exposure, the reduce-scatters' (and HSDP's all-reduces') seconds per step of that
    traffic) of :func:`_sharded_parameter_traffic`: the collectives priced once (one
    unit's AG and RS, the root unit's, HSDP's cross-group all-reduces: of ``comp`` only the stage's layers and the
    recomputed ones are read, not its windows), and the seconds per step a stage's free forward and backward
    (``forward_free``, ``backward_free``: f and b, L units' worth) leave exposed of them, with XLA's windows
    (:func:`xla_lhs_unit_exposure`, :func:`xla_allreduce_window`) where ``xla_gpu_lhs``.

    ``cross`` (hier:G, offz41: the groups' replicas, one rank a group, ``data`` the group): each unit's reduced shard
    is all-reduced across the groups once a step, after its reduce-scatter on the reduce path of the last backward
    (AR, the inner ``unit_allreduce``'s form, HSDP's; docs/model.md#dp-comm), so the last backward's units carry
    RS + AR::

        per micro-batch but the last: as above;   the last: RS -> RS + AR in every backward term

    The exposure's ``cross=False`` prices the units without it (the in-group part of :func:`_sync_exposed`)."""
    layers = np.maximum(comp["layers_per_stage"], 1.0)
    zero3, deepspeed = g.zero >= Zero.PARAMETERS, g.zero == Zero.PARAMETERS
    pieces = np.where(deepspeed, DEEPSPEED_GATHERS_PER_LAYER, 1.0)

    def gather(nbytes: np.ndarray, group: Placement) -> np.ndarray:  # one unit's parameters
        return pieces * _collective("allgather", nbytes / layers / pieces, group)

    root = np.asarray(root, dtype=float)
    blocks = dense - root  # the L units' dense parameters (all of dense without a root unit)

    def unit_traffic(group: DataParallelGroups) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(AG, RS) of one unit and (AG_r, RS_r) of the root unit over the sharding group."""
        ag = gather(_gathered_bytes(job, g, blocks, layers), group.dense)
        # FSDP's one reduce-scatter a unit, DeepSpeed's in buckets: each priced only where a ZeRO-3 / FSDP row runs
        # it (the other rows' units are dropped, _dp_traffic; sync28: both were priced for every row)
        rs = fsdp_rs = ds_rs = np.zeros(1)
        if np.any(zero3 & ~deepspeed):
            rs = fsdp_rs = _collective("reducescatter", blocks * wire / layers, group.dense)
        if np.any(deepspeed):
            n_b = bucket_count(dense * wire, bucket, wire, param_tensors(job, g, comp)[0])
            ds_rs = n_b * _collective("reducescatter", dense * wire / n_b, group.dense) / layers
            rs = np.where(deepspeed, ds_rs, fsdp_rs)
        if job.expert_params > 0:  # routed experts are sharded over their dp/ep replicas
            ag = ag + gather(2.0 * expert, group.expert)
            rs = rs + _collective("reducescatter", expert * wire / layers, group.expert)
        many = group.ranks > 1
        on = many & (root > 0)
        if not np.any(on):  # no PyTorch FSDP root unit anywhere: no root collectives priced
            return np.where(many, ag, 0.0), np.where(many, rs, 0.0), np.zeros(1), np.zeros(1)
        ag_r = np.where(on, _collective("allgather", 2.0 * root, group.dense), 0.0)
        rs_r = np.where(on, _collective("reducescatter", root * wire, group.dense), 0.0)
        return np.where(many, ag, 0.0), np.where(many, rs, 0.0), ag_r, rs_r

    def unit_allreduce(shard: DataParallelGroups, replicas: DataParallelGroups) -> tuple[np.ndarray, np.ndarray]:
        """(AR, AR_r): the all-reduce of one unit's, and of the root unit's, reduced 1/(S cp) shard (``shard``'s
        ranks) with its counterparts in the other groups (``replicas``: one rank a group), issued after the unit's
        reduce-scatter on the reduce path (PyTorch FSDP1 HYBRID_SHARD's ``_post_backward_hook``, FSDP2's
        ``foreach_reduce``); DeepSpeed MiCS all-reduces each reduce bucket's partitions (``partition_grads`` ->
        ``allreduce_mics_shard_grads``), so a zero 3 row moves its unit's share in the reduce-scatter's buckets."""
        ar = _collective("allreduce", (blocks + expert) * wire / layers / shard.ranks, replicas.dense)
        if np.any(deepspeed):
            n_b = bucket_count(dense * wire, bucket, wire, param_tensors(job, g, comp)[0])
            ds_ar = n_b * _collective("allreduce", (dense + expert) * wire / n_b / shard.ranks, replicas.dense)
            ar = np.where(deepspeed, ds_ar / layers, ar)
        ar = np.where(replicas.ranks > 1, ar, 0.0)
        ar_r = (np.where((replicas.ranks > 1) & (root > 0),
                         _collective("allreduce", root * wire / shard.ranks, replicas.dense), 0.0)
                if np.any(root > 0) else np.zeros(1))
        return np.asarray(ar), np.asarray(ar_r)

    # the replicas with their cp ranks shard the states; an HSDP candidate's units are its shard group's (below), so
    # the whole group's are priced only where a candidate is not HSDP (sync28: they were priced for it too)
    is_hsdp = g.zero == Zero.HSDP
    whole = hsdp is None or not np.all(is_hsdp)
    ag, rs, ag_r, rs_r = unit_traffic(data.sharding) if whole else (np.zeros(1),) * 4
    xla = np.zeros(1, dtype=bool)
    if hsdp is not None:
        # HSDP: shard inside groups of S replicas (S cp ranks), then all-reduce each unit's reduced 1/(S cp) shard
        # with the same shard of the other dp/S groups (PyTorch HYBRID_SHARD; Zhao et al. 2023 §3.4)
        shard_group, replicas = hsdp
        shard_group = shard_group.sharding
        ag_h, rs_h, ag_rh, rs_rh = unit_traffic(shard_group)
        ar, ar_r = unit_allreduce(shard_group, replicas)
        # the all-reduces leave the units' windows; the windows count a transformer layer's kernels (job.py refuses
        # the field for other models, a grid of arrays prices them without windows)
        xla = is_hsdp & g.xla_gpu_lhs & (replicas.ranks > 1) & job.is_transformer
        ag, rs = np.where(is_hsdp, ag_h, ag), np.where(is_hsdp, rs_h + np.where(xla, 0.0, ar), rs)
        ag_r, rs_r = np.where(is_hsdp, ag_rh, ag_r), np.where(is_hsdp, rs_rh + ar_r, rs_r)
    # the backward's kernels, with the forward kernels its recompute repeats on the stage's recomputed layers
    kernels = np.ones(1)  # read only where xla_gpu_lhs prices a transformer's windows
    if np.any(g.xla_gpu_lhs) and job.is_transformer:
        recomputed = comp["recomputed_layers"] if "recomputed_layers" in comp else recomputed_layers(g, layers)
        kernels = xla_layer_kernels(job, g, recomputed / layers)
    xla_groups, xla_total = None, np.zeros(1)
    if hsdp is not None and np.any(xla):
        shard_group, replicas = hsdp[0].sharding, hsdp[1]
        xla_groups = xla_allreduce_groups(job, g, (blocks + expert) * wire / shard_group.ranks, wire, replicas.dense)
        xla_total = np.where(xla, xla_groups[0], 0.0)
    # the root unit's part of the rank's shard of the units' parameters: its part of the gradient copies, which follow
    # its reduce-scatter after the backward (the L units share the rest alike)
    share_r = np.zeros(1)
    if np.any(root > 0):
        def root_share(group: DataParallelGroups) -> np.ndarray:
            mine = root / group.ranks
            units = blocks / group.ranks + expert / group.expert.p
            return np.asarray(np.where(mine > 0, mine / np.where(mine > 0, units + mine, 1.0), 0.0))

        share_r = root_share(data.sharding) if whole else np.zeros(1)
        if hsdp is not None:
            share_r = np.where(is_hsdp, root_share(hsdp[0].sharding), share_r)
    # hier:G's cross-group all-reduce of each unit's reduced shard, once a step, in the last backward (offz41)
    ar1 = ar1_r = np.zeros(1)
    if cross is not None:
        ar1, ar1_r = unit_allreduce(data.sharding, cross)
    reshard = g.fsdp_reshard_after_forward  # else the backward gathers nothing: L AG, not 2L - 1
    per_mb = np.where(reshard, 2.0 * layers - 1.0, layers) * ag + layers * rs
    # fsdp_defer_grad_sync (m > 1): the first forward's L gathers, the backwards' (L - 1) each where resharded after
    # forward, one reduce-scatter of each unit; the root's gather and reduce-scatter once (#fsdp-deferred-sync)
    defer = g.fsdp_defer_grad_sync & (m > 1)
    bwd_ag = np.where(reshard, ag, 0.0)
    per_step = layers * ag + m * (layers - 1.0) * bwd_ag + layers * rs

    def exposed(c: dict[str, np.ndarray], chain: HostChain | None = None, cross: bool = True) -> np.ndarray:
        """Seconds per step of the priced units that the free windows of ``c`` do not hide; with ``chain``, the
        state offload's host copies too, each unit's on its collectives' streams (:func:`offloaded_optimizer`);
        without ``cross``, hier:G's cross-group all-reduces left out."""
        f = c["forward_free"] / layers
        b = c["backward_free"] / layers
        xla_exposed = np.zeros(1)
        b_free = b  # the layer's free backward: its kernels' length (xla_lhs_unit_exposure's windows of 5 of them)
        if xla_groups is not None:
            _, e, w = xla_allreduce_window(xla_groups, b, layers, kernels)
            xla_exposed = np.where(xla, e, 0.0)
            b = np.where(xla, np.maximum(b - w / layers, 0.0), b)  # the all-reduces' windows are taken
        # what one unit's forward and backward windows leave of its network traffic
        net_f, net = np.maximum(ag - f, 0.0), np.maximum(bwd_ag + rs - b, 0.0)
        lhs = g.xla_gpu_lhs & ((g.zero == Zero.FSDP) | (g.zero == Zero.HSDP)) & job.is_transformer
        if np.any(lhs):  # XLA's scheduler: each unit collective overlaps its own window of about 5 kernels
            fwd_x, bwd_x = xla_lhs_unit_exposure(job, ag, rs, f, b_free, reshard, kernels, left=b)
            net_f, net = np.where(lhs, fwd_x, net_f), np.where(lhs, bwd_x, net)
        hidden_fwd, hidden_bwd = (layers - 1.0) * net_f, (layers - 1.0) * net
        units = ag + hidden_fwd + hidden_bwd + rs
        # hier:G (offz41): the last backward's units each all-reduce their reduced shard across the groups after
        # their reduce-scatter, on the same path: RS + AR a unit in its window, the last unit's exposed
        a1, a1r = (ar1, ar1_r) if cross else (np.zeros(1), np.zeros(1))
        net_x, units_x = net, units
        if cross and np.any(ar1 > 0):
            net_x = np.maximum(bwd_ag + rs + a1 - b, 0.0)
            if np.any(lhs):
                net_x = np.where(lhs, xla_lhs_unit_exposure(job, ag, rs + a1, f, b_free, reshard, kernels, left=b)[1],
                                 net_x)
            units_x = ag + hidden_fwd + (layers - 1.0) * net_x + rs + a1
        per_mb_x, per_step_x = per_mb + layers * a1, per_step + layers * a1
        # XLA's combined cross-group all-reduces (xla_gpu_lhs), each exposed beyond its scheduler window
        xla_part = np.where(g.overlap, xla_exposed, xla_total)
        # deferred (fsdp_defer_grad_sync): the first forward as above, the m - 1 other backwards' gathers (reshard)
        # beside no reduce-scatter, the last backward as above; the other forwards gather nothing. Under a pipeline
        # schedule the stage's reduce-scatters wait for its last backward to end (REDUCE_GRAD): none under it (AG_b = 0
        # there: the spec refuses reshard after forward with pp > 1)
        out = np.where(g.overlap, np.minimum(units, per_mb), per_mb) + xla_part
        out_x = np.where(g.overlap, np.minimum(units_x, per_mb_x), per_mb_x) + xla_part
        # the root unit: gathered before the first block, reduce-scattered after the backward, both exposed
        plain = m * (out + ag_r + rs_r)
        if units_x is not units:  # the last micro-batch's backward carries the cross-group all-reduces
            plain = (m - 1.0) * (out + ag_r + rs_r) + out_x + ag_r + rs_r + a1r
        net_early = once = np.zeros(1)
        if np.any(defer):
            last_bwd = (layers - 1.0) * np.where(g.pp > 1, bwd_ag + rs + a1, net_x)
            net_early = np.maximum(bwd_ag - b, 0.0)
            once = ag + hidden_fwd + (m - 1.0) * (layers - 1.0) * net_early + last_bwd + rs + a1
            plain = np.where(defer, np.where(g.overlap, np.minimum(once, per_step_x), per_step_x) + ag_r + rs_r + a1r,
                             plain)
        if chain is None:
            return np.asarray(plain)
        # the host chain (docs/model.md#state-offload, offz340). Each unit's work, serial on each of its streams,
        # against one unit's window (the copy engine's: the pass's wall time / L; the network's: f, b): forward, the
        # gathers' stream fetch + AG (the first unit's exposed); backward, the reduce-scatters' stream RS + c (its
        # copies after its reduce-scatter: the last unit's exposed), the gathers' stream fetch + AG_b where the units
        # reshard, the link's host-to-device direction fetch + the copies back; each unit's exposure the most any of
        # them or the network leaves, (L - 1) of them a pass. What the copies add over the network's (exactly 0
        # with no copies) is returned with it; the root unit's copies and fetch wait for its collectives, exposed.
        w_f = np.asarray(chain.forward, dtype=float) / layers
        w_b = np.asarray(chain.backward, dtype=float) / layers
        keep = 1.0 - share_r  # the units' part (the root's: share_r)
        f_u = np.asarray(chain.fetch, dtype=float) * keep / layers
        f_b = np.where(reshard, f_u, 0.0)  # a backward gathers (and fetches) only where the units reshard
        back = np.asarray(chain.back, dtype=float) * keep / layers

        def worst(over: Any, *work: Any) -> np.ndarray:
            return np.asarray(np.maximum(over, np.max(np.broadcast_arrays(*work), axis=0)))

        def forward(gather: Any, over: Any) -> np.ndarray:
            """Seconds one forward's fetches add past the network's exposure ``over`` a unit (its units gather
            ``gather`` each)."""
            return (layers - 1.0) * (worst(over, f_u + gather - w_f) - worst(over, gather - w_f)) + f_u

        def backward(copies: Any, reduce: Any, gather: Any, over: Any) -> tuple[np.ndarray, np.ndarray]:
            """(seconds one backward's copies and fetches add past the network's exposure ``over`` a unit, its
            units' copies and fetches) of a backward whose units reduce ``reduce`` and gather ``gather`` each."""
            c_u = np.asarray(copies, dtype=float) * keep / layers
            more = worst(over, reduce + c_u - w_b, f_b + gather - w_b, f_b + back - w_b)
            base = worst(over, reduce - w_b, gather - w_b, -w_b)
            return (layers - 1.0) * (more - base) + c_u, layers * (c_u + f_b)

        fwd, fwd_units = forward(ag, net_f), layers * f_u
        root_f = np.asarray(chain.fetch, dtype=float) * share_r
        root_e, root_l = np.asarray(chain.early, dtype=float) * share_r, np.asarray(chain.last, dtype=float) * share_r
        bwd_e, units_e = backward(chain.early, rs, bwd_ag, net)
        bwd_l, units_l = backward(chain.last, rs + a1, bwd_ag, net_x)  # its copies after RS (+ hier:G's AR)

        # overlap off: the streams are the compute's (DeepSpeed stage3.py L335-336), every copy exposed with the rest
        def one(more: np.ndarray, copies: np.ndarray, root_copies: np.ndarray, net_units: np.ndarray,
                traffic: np.ndarray) -> np.ndarray:
            capped = np.where(g.overlap, np.minimum(net_units + more, traffic + copies), traffic + copies)
            return capped + xla_part + ag_r + rs_r + root_f + root_copies

        every = ((m - 1.0) * one(fwd + bwd_e, fwd_units + units_e, root_e, units, per_mb)
                 + one(fwd + bwd_l, fwd_units + units_l, root_l, units_x, per_mb_x) + a1r)
        # XLA's scheduler (xla_gpu_lhs) places its collectives in windows of a few kernels and no copy stream: no
        # window is priced for the copies there, all exposed
        every = np.where(lhs, plain + m * (fwd_units + root_f) + (m - 1.0) * (units_e + root_e) + units_l + root_l,
                         every)
        if not np.any(defer):
            return np.asarray(every)
        # deferred (offz41): only the first forward gathers, so only it fetches (the other forwards find their units
        # gathered: FSDPParamGroup.unshard returns at once, no all-gather and no copy of the CPU shard in; the bytes'
        # table counts the same passes, _host_passes); the earlier backwards fetch where they gather again (reshard
        # after forward) and copy nothing (no reduce-scatter: the gradients accumulate unsharded on the GPU); the last
        # one's copies follow the reduce-scatters (after the backward under a pipeline: all exposed). The root is
        # gathered, and fetched, once
        more = fwd + (m - 1.0) * backward(chain.early, 0.0, bwd_ag, net_early)[0]
        more = more + np.where(g.pp > 1, units_l, bwd_l)
        copies = fwd_units + (m - 1.0) * units_e + units_l
        once = np.where(g.overlap, np.minimum(once + more, per_step_x + copies), per_step_x + copies)
        return np.asarray(np.where(defer, once + ag_r + rs_r + a1r + root_f + (m - 1.0) * root_e + root_l, every))

    across = layers * ar1 + ar1_r  # hier:G's all-reduces, once a step
    reduces = np.where(defer, layers * rs + rs_r, m * (layers * rs + xla_total + rs_r)) + across
    return (np.where(defer, per_step + ag_r + rs_r, m * (per_mb + xla_total + ag_r + rs_r)) + across, exposed,
            reduces)


def _expose(g: StrategyGrid, comp: dict[str, np.ndarray], grads: np.ndarray, last_bucket: np.ndarray) -> np.ndarray:
    """The part of the gradient sync not hidden under the last micro-batch's backward pass: buckets
    start as soon as their gradients exist; the final bucket can only start when the backward ends."""
    overlapped = np.maximum(grads - comp["backward_free"], grads * last_bucket)
    return np.where(g.overlap, np.minimum(overlapped, grads), grads)


def _sync_comm(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray,
               sync: str, groups: ParallelGroups, *, local: Any = None, idle: Any = 0.0,
               traffic: tuple[DpTraffic, DpTraffic | None] | None = None
               ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """(cross-group comm, in-group comm or None, total comm, the NVLS all-reduce part of that total, the part of the
    total hidden under the host wait) seconds for the sync mode (the first two exposed). The collectives are priced
    once (:func:`_sync_traffic`, whose seconds do not depend on the windows) and exposed under the compute windows of
    ``comp`` (:func:`_sync_exposed`), and with a host wait under the stretched windows too.

    ``idle``: seconds per micro-batch the DP rank's GPU waits on the host (:func:`scalemodel.engine.step._host_wait`,
    a synchronising MoE layer; docs/model.md#host-dp-window). The data-parallel collectives run on their own streams
    and are issued by hooks before the compute that needs them or as soon as their gradients exist (the gathers by
    the forward pre-hooks, a unit or bucket ahead; the reduce-scatters and gradient buckets by the backward hooks),
    so those in flight keep running while the compute stream idles on the host. The host wait is priced per interval
    as max(D_i, H), forward and backward together with no split (docs/model.md#host), so the idle is read as
    stretching the micro-batch's free windows alike: each of the forward and backward free windows (f, b) gains its
    share of the idle ``w``,

        f' = f + w f / (f + b),        b' = b + w b / (f + b)

    (where f = b = 0, in the proportion of the forward and backward compute, F / (F + B): the idle is there whatever
    the model-parallel traffic leaves of the compute; half each without compute) and the traffic is exposed against
    (f', b') as it is against (f, b) (:func:`_sync_exposed`). The windows
    gain w in all, once (the idle is not counted in the forward and the backward both); the first gather and the
    last bucket, which no window hides, stay exposed. What the longer windows hide beyond the compute's is returned
    apart: it runs while no compute runs, so it slows none (docs/model.md#contention prices the rest). ``idle`` 0
    (no host wait) gives the compute windows' exposure exactly.

    ``traffic``: the collectives already priced for ``comp`` (:func:`_sync_traffic` of the same arguments), where the
    caller reads them too (:func:`scalemodel.engine.step.evaluate`'s offload, :func:`_offload_exposed`); priced here
    when None.
    """
    if traffic is None:
        traffic = _sync_traffic(job, g, comp, m, sync, groups)
    total, nvls = _sync_total(traffic)
    cross, in_group = _sync_exposed(job, g, traffic, comp, sync, local)
    w = np.maximum(np.asarray(idle, dtype=float), 0.0)
    if not np.any(w > 0):
        return cross, in_group, total, nvls, np.zeros(1)
    f, b = comp["forward_free"], comp["backward_free"]
    free = f + b
    # where the model-parallel traffic leaves no compute free (f = b = 0) the idle is still there: it splits as the
    # compute does (review27a; before, it was no window at all there, and a whole one at windows of a nanosecond)
    work = comp["forward"] + comp["backward"]
    share = np.where(free > 0, np.divide(f, free, out=np.zeros(np.broadcast(f, free).shape), where=free > 0),
                     np.divide(comp["forward"], work, out=np.full(np.broadcast(work).shape, 0.5), where=work > 0))
    longer = dict(comp, forward_free=f + w * share, backward_free=b + w * (1.0 - share))
    cross_w, in_group_w = _sync_exposed(job, g, traffic, longer, sync, local)
    e0 = cross + (0.0 if in_group is None else in_group)
    ew = cross_w + (0.0 if in_group_w is None else in_group_w)
    return cross_w, in_group_w, total, nvls, np.asarray(np.maximum(e0 - ew, 0.0), dtype=float)


def _sync_traffic(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], m: np.ndarray, sync: str,
                  groups: ParallelGroups) -> tuple[DpTraffic, DpTraffic | None]:
    """The sync mode's data-parallel collectives, priced once (:func:`_dp_traffic`): the whole DP group's and None,
    or under hier:G the in-group and the cross-group ones.

    hier:G first all-reduces inside each group of G replicas (with their cp ranks: G cp GPUs); then every member
    holds the group's gradient and exchanges its 1/(G cp) shard with its counterparts in the other N/G groups (G cp
    parallel all-reduces of S/(G cp) over N/G ranks spaced G replicas apart), as a hierarchical all-reduce does.
    Every other mode syncs the whole DP group."""
    size = hier_group(g, sync)
    if size is None:
        hsdp = groups.data_split(hsdp_shard_group(job, g)) if np.any(g.zero == Zero.HSDP) else None
        return _dp_traffic(job, g, comp, m, groups.data, hsdp=hsdp), None
    in_groups, across = groups.data_split(size)
    # the states are sharded inside the groups (hier_group): ZeRO-3/FSDP/HSDP gather and reduce-scatter there,
    # and each rank all-reduces its reduced 1/(G cp) shard across the groups once per step, as ZeRO-1/2 does (the
    # in-group reduce spans the G replicas with their cp ranks, in_groups.sharding: _dp_comm)
    zero3 = g.zero >= Zero.PARAMETERS
    if not np.any(zero3):
        return (_dp_traffic(job, g, comp, m, in_groups),
                _dp_traffic(job, g, comp, m, across, shard=size * g.cp, all_reduce=True))
    # ZeRO-3 / FSDP / HSDP (offz41): the all-reduce of each unit's reduced shard follows its in-group reduce-scatter
    # on the reduce path, unit by unit, in the last backward (_sharded_units' ``cross``), not one all-reduce of the
    # whole shard at the end: PyTorch FSDP1 HYBRID_SHARD all-reduces each unit's shard on the post-backward stream
    # after its reduce-scatter, FSDP2 each unit's on its all-reduce stream after it, DeepSpeed MiCS each reduce bucket's
    # on reduce_and_partition_stream at the accumulation boundary (docs/model.md#dp-comm)
    flat = replace(g, zero=np.where(zero3, Zero.GRADIENTS, g.zero))
    outer, outer_exposed = _dp_traffic(job, flat, comp, m, across, shard=size * g.cp, all_reduce=True)
    outer = {k: (v if k == "last_bucket" else np.where(zero3, 0.0, v)) for k, v in outer.items()}
    return _dp_traffic(job, g, comp, m, in_groups, cross=across), (outer, outer_exposed)


def _sync_total(traffic: tuple[DpTraffic, DpTraffic | None]) -> tuple[np.ndarray, np.ndarray]:
    """(total comm, its NVLS all-reduce part) seconds per step of the priced :func:`_sync_traffic`."""
    (dp, _), outer = traffic
    if outer is None:
        return dp["grads"] + dp["gathers"], dp["nvls_allreduce"]
    inner, out = dp, outer[0]
    return (inner["grads"] + out["grads"] + inner["gathers"] + out["gathers"],
            inner["nvls_allreduce"] + out["nvls_allreduce"])


def _sync_exposed(job: Job, g: StrategyGrid, traffic: tuple[DpTraffic, DpTraffic | None],
                  comp: dict[str, np.ndarray], sync: str, local: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(cross-group comm, in-group comm or None) exposed seconds of the priced :func:`_sync_traffic` under the
    compute windows of ``comp``.

    hier:G: the in-group and the cross-group gradient sync share one overlap window (the last backward), less what
    the in-group ZeRO-3 traffic hid of it.

    asp and ssp:S on a parameter server (dp_comm ps:K): each worker pushes and pulls on its own
    clock, so its communication is its own exchange over its NIC (``ps_worker``, exposed as the
    synchronous exchange is), but the servers must absorb one round of every worker's push per
    worker iteration: C = max(expose(C_worker), C_server_round - local), so that
    local + C >= C_server_round (the server cap of ``ps.async_ps_rate``; docs/model.md#parameter-server).
    """
    (parts, gathers_exposed), outer_traffic = traffic
    if outer_traffic is None:
        window = optimizer_step_gather_window(job, g, sync, comp.get("layers_per_stage"), comp.get("pipeline_rank"))
        exposed = _expose_param_gather(g, comp, parts["grads"] - parts["repeats"] * parts["rs_each"],
                                       parts["last_bucket"], parts["param_gather"], window) + gathers_exposed(comp) \
            + parts["repeats"] * _expose(g, comp, parts["rs_each"], parts["last_bucket"])
        if parse_sync(sync).kind in (SyncKind.ASP, SyncKind.SSP) and np.any(g.ps_servers > 0):
            worker = _expose(g, comp, parts["ps_worker"], parts["last_bucket"])
            busy = parts["ps_server_round"] - (0.0 if local is None else local)
            exposed = np.where(g.ps_servers > 0, np.maximum(worker, busy), exposed)
        return exposed, None
    inner, (outer, outer_exposed) = parts, outer_traffic
    inner_exposed = gathers_exposed(comp)
    # ZeRO-3 / FSDP / HSDP: the cross-group all-reduces ride the units' reduce path (_sync_traffic); their part is what
    # they add to the units' exposure (>= 0: the exposure grows with each unit's reduce)
    in_units = gathers_exposed(comp, cross=False) if np.any(g.zero >= Zero.PARAMETERS) else inner_exposed
    both = inner["grads"] + outer["grads"]
    # the in-group ZeRO-3 traffic that hid took its compute: what it hid is not there again for the gradients'
    # sync (no compute hides traffic twice; props26b's test_hier_zero3_hides_no_more_than_its_compute)
    hidden = np.maximum(inner["gathers"] - inner_exposed, 0.0)
    left = dict(comp, backward_free=np.maximum(comp["backward_free"] - hidden, 0.0))
    # the in-group parameter all-gather (ZeRO-1/2) follows the optimizer step: outside the backward window
    early = inner["repeats"] * inner["rs_each"]  # DeepSpeed ZeRO-2's reductions under the earlier backwards
    exposed = _expose(g, left, both - inner["param_gather"] - early, inner["last_bucket"]) + inner["param_gather"] \
        + inner["repeats"] * _expose(g, left, inner["rs_each"], inner["last_bucket"])
    share = np.divide(inner["grads"], both, out=np.ones_like(both), where=both > 0)
    in_group = exposed * share + in_units
    # (clipped at 0: the last micro-batch priced apart rounds differently from m of them where the all-reduce is 0)
    return exposed * (1.0 - share) + outer_exposed(comp) + np.maximum(inner_exposed - in_units, 0.0), in_group


def _state_shard(job: Job, g: StrategyGrid, sync: str = "bsp", layers: Any = None, rank: Any = None) -> np.ndarray:
    """Parameters whose model states one rank keeps at ZeRO >= 1: the stage's dense parameters over
    :func:`_state_shards` and its experts over :func:`_expert_state_shards` (the shards
    :func:`~scalemodel.engine.stage_memory.memory_parts` holds), for the stages' mean or, with ``layers`` and ``rank``,
    pipeline rank ``rank``'s own (:func:`_stage_params_per_gpu`). One count for the optimizer step, the offloaded
    states' copies and their host memory."""
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    return dense / _state_shards(job, g, sync) + expert / _expert_state_shards(job, g, sync)


def _optimizer_time(job: Job, g: StrategyGrid, sync: str = "bsp", layers: Any = None, rank: Any = None
                    ) -> np.ndarray:
    """Seconds of the optimizer step, memory-bound: the parameters whose states this rank updates (its share of
    the model; at ZeRO >= 1 the dense ones over :func:`_state_shards` and the experts over
    :func:`_expert_state_shards`, the shards :func:`~scalemodel.engine.stage_memory.memory_parts` holds) times
    2 K + g + :data:`WEIGHT_COPY_BYTES` (the 16-bit copy: read 4, write 2) bytes, over the HBM bandwidth x memory
    efficiency; with fp8_param_gather plus the FP8 parameters' quantization (:func:`fp8_param_quantize_time`); under
    Megatron-Core's DDP plus the zeroing of its whole gradient buffer (:func:`grad_buffer_reset_time`) and, where
    ``check_for_nan_in_grad``, the per-bucket NaN check of the last backward (:func:`nan_check_time`); under
    nanotron's trainer plus its clipping and reset of the whole fp32 gradient buffer
    (:func:`nanotron_grad_buffer_time`) and, at its ZeRO-1, the host tail of its gather's Python copy loop
    (:func:`nanotron_gather_loop_time`). The share: the stages' mean (:func:`_params_per_gpu`), or with ``layers``
    and ``rank`` pipeline rank ``rank`` of that many layers of ``job``, its own parameters with the embedding on rank
    0 and the head on the last (:func:`_rank_params_per_gpu`; a hybrid pattern's rank: of its
    :func:`~scalemodel.engine.pipeline_ranks._part_job`).
    :func:`~scalemodel.engine.step.evaluate` prices the rank holding the most parameters
    (:func:`~scalemodel.engine.step._dp_rank`): the step waits for it."""
    dense, expert = _stage_params_per_gpu(job, g, layers, rank)
    sharded = np.where(g.zero >= Zero.OPTIMIZER, _state_shard(job, g, sync, layers, rank), dense + expert)
    return _hbm_seconds(job, sharded * _adam_step_bytes(job)) + fp8_param_quantize_time(job, g, sync, layers, rank) \
        + grad_buffer_reset_time(job, g, layers, rank) + nan_check_time(job, g, layers, rank) \
        + nanotron_grad_buffer_time(job, g, layers, rank) + nanotron_gather_loop_time(job, g, layers, rank)


def _host_link(job: Job) -> float:
    """The GPU-host link per GPU per direction (B/s); inf without one (offload is refused there:
    job._check_state_offload)."""
    return job.host_bandwidth if job.host_bandwidth > 0 else np.inf


class HostCopies(NamedTuple):
    """A rank's model states in host memory (strategy offload_states, docs/model.md#state-offload), per step: its
    state shard ``n``; the bytes over the GPU-host link device-to-host and host-to-device during the step (``d2h``,
    ``h2d``), host-to-device after the CPU step (``after``) and the parameter fetches' part of ``h2d`` (``fetch``);
    and the CPU-Adam step's seconds (``cpu``)."""

    n: np.ndarray
    d2h: np.ndarray
    h2d: np.ndarray
    after: np.ndarray
    fetch: np.ndarray
    cpu: np.ndarray


def _host_passes(job: Job, g: StrategyGrid, m: Any, n: Any, sync: str = "bsp") -> tuple[np.ndarray, np.ndarray]:
    """(parameter gather passes, gradient reduce-scatter passes) over the units a step, in whole passes of the rank's
    state shard ``n``, the counts the state offload's fetches and FSDP's gradient copies follow: ``m`` forward passes
    and ``m`` backward ones where the units reshard after the forward, less PyTorch FSDP's root unit's part of each
    backward pass (:func:`fsdp_root_params`: not resharded after the forward, so the backward gathers and fetches only
    the blocks; offz41: the bytes' table counted it, the chain did not), ``m`` reductions. Under
    ``fsdp_defer_grad_sync`` (m > 1, FSDP2): one forward pass (the units a backward gathered stay gathered,
    ``set_reshard_after_backward(False)``, and ``FSDPParamGroup.unshard`` returns at once for a group already
    unsharded, so no all-gather and no ``to(device)`` of its CPU shard), the ``m`` backward passes where resharded
    after the forward, and one reduction (``set_requires_gradient_sync(False)``: ``foreach_reduce``, whose
    ``offload_to_cpu`` branch copies the reduced shard to the host, runs in the last backward only).
    docs/model.md#fsdp-deferred-sync."""
    m = np.asarray(m, dtype=float)
    reshard = np.asarray(g.fsdp_reshard_after_forward, dtype=float)
    root = fsdp_root_params(job, g)  # 0 with pp > 1 (and off PyTorch FSDP's wrapping): a stage's shard holds no root
    if np.any(root > 0):
        n = np.asarray(n, dtype=float)
        mine = np.minimum(root / _state_shards(job, g, sync), n)  # pp = 1: the rank's shard is the whole model's
        reshard = reshard * np.where(n > 0, 1.0 - mine / np.where(n > 0, n, 1.0), 1.0)
    defer = np.asarray(g.fsdp_defer_grad_sync, dtype=bool) & (m > 1) & (g.zero >= Zero.FSDP)
    return (np.asarray(np.where(defer, 1.0 + m * reshard, m * (1.0 + reshard)), dtype=float),
            np.asarray(np.where(defer, 1.0, m), dtype=float))


def _host_copies(job: Job, g: StrategyGrid, m: np.ndarray, sync: str = "bsp", layers: Any = None, rank: Any = None
                 ) -> HostCopies:
    """:class:`HostCopies` of the rank :func:`offloaded_optimizer` prices: its state shard ``n`` (its share of the
    stage's parameters over :func:`_state_shards`, the experts over :func:`_expert_state_shards`, as
    :func:`_optimizer_time` and the memory model count it: :func:`_state_shard`) crosses the link as
    :func:`scalemodel.cost.state_offload.host_copy_bytes` and :func:`~scalemodel.cost.state_offload.param_fetch_bytes`
    say, with the gather and reduce-scatter passes of :func:`_host_passes` (with the parameters on the host, one copy
    of the shard per all-gather); the host's CPU-Adam rate is shared by the ranks of one node
    (:func:`~scalemodel.cost.state_offload.cpu_adam_seconds`)."""
    n = _state_shard(job, g, sync, layers, rank)
    gathers, reductions = _host_passes(job, g, m, n, sync)
    shard = memory.fsdp2_shard_bytes(job.elem_bytes, job.optimizer_bytes_per_param)[1]  # FSDP's shard dtype
    # FSDP's gradient copies follow its reduce-scatters (``microbatches`` counts them for zero fsdp / hsdp)
    reduced = np.where(g.zero >= Zero.FSDP, reductions, m)
    d2h, h2d, after = state_offload.host_copy_bytes(n, mode=g.offload_states, zero=g.zero, microbatches=reduced,
                                                    gathers=gathers, weight_bytes=job.elem_bytes,
                                                    grad_bytes=job.grad_bytes, shard_bytes=shard)
    fetch = state_offload.param_fetch_bytes(n, mode=g.offload_states, zero=g.zero, gathers=gathers,
                                            weight_bytes=job.elem_bytes, shard_bytes=shard)
    cpu = state_offload.cpu_adam_seconds(n, np.minimum(g.gpus, job.gpus_per_node))
    return HostCopies(n, d2h, h2d, after, fetch, cpu)


def host_chain(job: Job, g: StrategyGrid, m: np.ndarray, copies: HostCopies, forward: Any, backward: Any,
               sync: str = "bsp") -> HostChain:
    """The host copies of a ZeRO-3 / FSDP / HSDP rank (``copies``: :func:`_host_copies`, over the host link) as the
    units' streams run them (:class:`HostChain`). The gradient path (D2H + H2D less the fetches) split by backward:
    DeepSpeed's ZeRO-3 copies each micro-batch's reduced partition out and back (2 gb a parameter: out then
    ``.to(device)``, or in, add, out) and, at the accumulation boundary only, its fp32 cast into the optimizer's
    gradient (4 bytes: ``partition_grads`` -> ``_offload_grad_partition_at_boundary``, deepspeedai/DeepSpeed@edaa7221
    stage3.py L1904-1925, L1393-1407), so the last backward carries those 4 bytes more; FSDP copies each reduced
    shard out once a micro-batch, or under ``fsdp_defer_grad_sync`` once, in the last backward, after its one
    reduce-scatter (:func:`_host_passes`). The fetches (optimizer+params, FSDP) split over the G gather passes of the
    units. ``forward``, ``backward``: one micro-batch's passes' wall time, the copy engine's windows."""
    n, d2h, h2d, fetch = copies.n, copies.d2h, copies.h2d, copies.fetch
    link = _host_link(job)
    passes, reductions = _host_passes(job, g, m, n, sync)
    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    path = (d2h + h2d - fetch) / link
    on = (np.asarray(g.offload_states) > 0) & (g.zero == Zero.PARAMETERS)
    boundary = np.where(on, state_offload.FP32_BYTES * n, 0.0) / link
    # deferred sync (one reduction, in the last backward): the earlier backwards copy nothing
    early = np.where(reductions < m, 0.0, (path - boundary) / m)
    last = np.where(reductions < m, path, early + boundary)
    return HostChain(early, last, (h2d - fetch) / link / m, fetch / link / np.maximum(passes, 1.0), forward, backward)


def host_state_bytes_per_node(job: Job, g: StrategyGrid, m: np.ndarray, sync: str = "bsp") -> np.ndarray:
    """Host-memory bytes per node of the model states strategy offload_states keeps there (docs/model.md#host-memory),
    0 where none: :func:`scalemodel.cost.state_offload.host_state_bytes` of each rank's state shard ``n`` (as
    :func:`offloaded_optimizer` prices it: the stages' mean share over :func:`_state_shards`, the experts over
    :func:`_expert_state_shards`), times the node's ranks, min(GPUs, gpus_per_node). ZeRO 1/2's one buffer of the
    largest parameter is the vocabulary-parallel word embedding, V h / tp elements. Under pipeline parallelism the
    shard is the pipeline rank's holding the most parameters (:func:`_rank_params_per_gpu` of the last rank, rank 0
    and the busiest middle one, as step._dp_rank picks), not the stages' mean: each rank keeps its own stage's states,
    and a node of one stage's ranks (tp cp dp >= gpus_per_node in the stage-major order, DeepSpeed's
    PipeDataParallelTopology) holds that many times them; where a node spans stages this is an upper bound. prop36:
    the mean under-counted llama3-8b pp 16 ZeRO-3 on 128 GPUs, the last stage's 1.68 GB a GPU of optimizer states and
    gradient shard leaving each GPU beside 1.13 GB a rank of host memory priced."""
    mode = np.asarray(g.offload_states)
    if not np.any(mode > 0):
        return np.zeros(1)
    n = _state_shard(job, g, sync)
    if job.is_transformer:
        pp = np.asarray(g.pp, dtype=float)
        last, other, first = _stage_layers(job, g)
        for layers, rank, on in ((last, np.maximum(pp - 1.0, 0.0), pp > 1), (first, np.zeros(1), pp > 1),
                                 (other, np.ones(1), pp > 2)):
            n = np.where(on, np.maximum(n, _state_shard(job, g, sync, layers, rank)), n)
    sw, sg = memory.fsdp2_shard_bytes(job.elem_bytes, job.optimizer_bytes_per_param)  # FSDP's shard dtype
    largest = (float(job.shape.vocab) * float(job.shape.hidden) / g.tp) if job.is_transformer else 0.0
    rank = state_offload.host_state_bytes(n, mode=mode, zero=g.zero, microbatches=m,
                                          optimizer_bytes=job.optimizer_bytes_per_param, weight_bytes=job.elem_bytes,
                                          grad_bytes=job.grad_bytes, shard_weight_bytes=sw, shard_grad_bytes=sg,
                                          largest_param=largest)
    return rank * np.minimum(g.gpus, job.gpus_per_node)


def offloaded_optimizer(job: Job, g: StrategyGrid, m: np.ndarray, comp: dict[str, np.ndarray], gpu_opt: Any,
                        sync: str = "bsp", layers: Any = None, rank: Any = None,
                        traffic: tuple[DpTraffic, DpTraffic | None] | None = None, t_mb: Any = None) -> Any:
    """The optimizer part of the step: ``gpu_opt`` (:func:`_optimizer_time`), replaced where the states live in host
    memory (the GPU runs no Adam step then) by the rank's host copies (:func:`_host_copies`, priced once) exposed
    during the step, then its CPU step and the copy back after it
    (:func:`~scalemodel.cost.state_offload.optimizer_part_seconds`).

    ZeRO 1/2 (and a candidate beside activation offload, or priced without ``traffic``): the fluid form,
    :func:`~scalemodel.cost.state_offload.offload_step_seconds`. The gradient path's copies follow the gradients'
    reductions on one stream, inside the backward: each backward ends waiting for that stream (DeepSpeed@edaa7221
    ``independent_gradient_partition_epilogue``: stage3.py L1363-1364 ``reduce_and_partition_stream.synchronize()``,
    stage_1_and_2.py L929-931 under overlap_comm; FSDP's post-backward callback waits for its reduce-scatter stream), so
    they run beside the backward compute less the reductions queued ahead of them, ``C = max(0, W - R)`` (review36;
    before it ``W`` was every micro-batch's forward and backward, and the reductions hid under the same compute too):
    ``W`` = ``m`` x ``comp["backward"]`` for ZeRO-3 (``reduce_and_partition_stream``, always) and FSDP / HSDP, and for
    ZeRO-2 with overlap_comm (``reduction_stream``; without it, and under cpu_offload, "stream =
    get_accelerator().current_stream()", the compute's own: 0); ZeRO-1 reduces and copies once, in the accumulation
    boundary's backward: with overlap_comm its gradient hooks (created under cpu_offload, which forces
    contiguous_gradients) reduce and copy bucket by bucket on the ``reduction_stream`` beside that last backward
    (``process_gradients`` -> ``reduce_ready_partitions_and_remove_grads``, which reduces only when
    ``is_gradient_accumulation_boundary()``), ``W`` = one micro-batch's backward; without overlap_comm
    ``reduce_gradients`` reduces after the backward on the compute's stream: 0 (stage_1_and_2.py L638-641, L861-881,
    L1758-1769; review35c). ``R``: the step's gradient reductions (``traffic``'s ``reduces``: ZeRO 1/2's
    reduce-scatters, the ZeRO-3 / FSDP units' reduce-scatters). The parameter fetches (optimizer+params) precede their
    all-gathers on the gather path, beside every micro-batch's forward and backward:
    ``C_F = max(0, m comp["total"] - A)``, ``A`` the units' all-gathers (``unit_gathers``).

    ``t_mb``: the micro-batch's time in the step (compute and the TP / CP / EP / pipeline traffic it exposes; None:
    its compute alone). The copies run on a copy engine over the host link, beside whatever the GPU's streams run,
    kernels or collectives, so both windows stretch by ``t_mb / comp["total"]`` (the backward's share of it for the
    gradient path; the exposed traffic is not priced per pass). Priced on the compute alone, a faster accelerator
    slowed the step (prop36: mixtral-8x7b tp 4 ZeRO-3 on dgx-h100, the compute 17.5 ms shorter, the copies 17.5 ms
    more exposed and the TP traffic 0.65 ms more: 34.51996 -> 34.52028 s).

    ZeRO-3 / FSDP / HSDP (offz340, beside no activation offload): the fluid windows above let the copies hide under
    backward time the units' reduce-scatters, exposed in dp_comm, already filled (closing39: a faster accelerator
    lengthened the step). DeepSpeed runs each bucket's reduce-scatter and then its partition's copies in one
    ``with stream(reduce_and_partition_stream)`` block (stage3.py L1591-1608, ``partition_grads`` L1886-1925), so the
    copies are priced unit by unit on the units' streams (:class:`HostChain`, :func:`host_chain`, the exposure of
    :func:`_sharded_units`): the part is what that chain adds past the units' own exposure, plus the CPU step and
    the copy back after it (docs/model.md#state-offload)."""
    mode = np.asarray(g.offload_states)
    if not np.any(mode > 0):
        return gpu_opt
    overlap = np.asarray(g.overlap, dtype=bool)
    beside = (g.zero >= Zero.PARAMETERS) | ((g.zero == Zero.GRADIENTS) & overlap)
    total = np.asarray(comp["total"], dtype=float)
    wall = total if t_mb is None else np.maximum(np.asarray(t_mb, dtype=float), total)
    stretch = np.where(total > 0, wall / np.where(total > 0, total, 1.0), 1.0)
    backward = np.asarray(comp["backward"], dtype=float) * stretch
    window = np.where(beside, m * backward, np.where((g.zero == Zero.OPTIMIZER) & overlap, backward, 0.0))
    reduces, gathers = np.zeros(1), np.zeros(1)
    for part in (() if traffic is None else traffic):
        if part is not None:
            reduces, gathers = reduces + part[0]["reduces"], gathers + part[0]["unit_gathers"]
    # beside activation offload (refused: state_offload_invalid) the link carries the activation copies under the
    # compute, so none of it is left to these (a plan's infeasible candidate stays monotone in the compute)
    act = (np.asarray(g.offload_layers) > 0) | (np.asarray(g.offload_tensors) > 0)
    under = np.where(act, 0.0, np.maximum(window - reduces, 0.0))
    fetch_under = np.where(act, 0.0, np.maximum(m * wall - gathers, 0.0))
    copies = _host_copies(job, g, m, sync, layers, rank)
    link = _host_link(job)
    opt = np.where(mode > 0, state_offload.offload_step_seconds(copies.d2h, copies.h2d, copies.after, copies.cpu,
                                                                link, under, copies.fetch, fetch_under), gpu_opt)
    chained = (g.zero >= Zero.PARAMETERS) & (mode > 0) & ~act
    if traffic is None or not np.any(chained):
        return opt
    # ZeRO-3 / FSDP / HSDP (offz340): the copies on the units' streams, each behind its reduce-scatter or ahead of its
    # gather, unit by unit under the same windows as the units' collectives; the step's own part what they add past
    # the units' exposure, which dp_comm prices (the copies hidden: the rest)
    chain = host_chain(job, g, m, copies, np.asarray(comp["forward"], dtype=float) * stretch, backward, sync)
    units = traffic[0][1]
    return np.where(chained, state_offload.optimizer_part_seconds(units(comp, chain) - units(comp), copies.cpu,
                                                                   copies.after, link), opt)
