"""One training step, composed from the cost models and vectorised over candidate strategies.

For a strategy DP x TP x PP x CP (EP carved out of DP, as in Megatron-LM), ranks are placed TP
innermost, then CP, then DP, then PP outermost (Megatron's default order), so a TP group has
stride 1, CP stride tp, DP and EP stride tp*cp, and pipeline neighbours are tp*cp*dp apart; the
strategy's ``layout`` may put PP inside DP instead (pipeline neighbours tp*cp apart, DP stride
tp*cp*pp; :func:`scalemodel.cost.placement.rank_strides`, docs/model.md#layout). Each
group is placed on the network tiers once per evaluation (:class:`scalemodel.cost.placement.ParallelGroups`)
and every collective of that group is priced on that placement
(:func:`scalemodel.cost.collectives.group_time`).

Per micro-batch on the busiest pipeline stage (the slowest of the last stage, with its layers and the
logits, rank 0 with its layers and the embedding, and a middle stage; :func:`scalemodel.engine.pipeline_ranks.
_stage_layers` for uneven splits):

    t_mb = compute + TP comm + CP comm + EP comm + PP send/recv          (exposed parts only)
           (+ FP8 delayed scaling's amax reductions, 2 per model chunk: model_parallel_comm.delayed_amax_time;
            current scaling's / NVFP4's per-linear TP ones under SP: model_parallel_comm.tp_amax_time)

and the pipelined part of the step is (m + bubble) * t_mb with m = B / (dp b) micro-batches and
bubble = (p-1), (p-1)/v or (p-1)/3 micro-batch times (:mod:`scalemodel.cost.pipeline`). Then the
DP gradient synchronisation (whatever of it is not hidden under the last micro-batch's backward),
the optimizer step (memory-bound), and the wait for stragglers under the chosen sync mode
(:mod:`scalemodel.cost.sync`). Every part of the breakdown is a term of that sum, so the parts add
up exactly to the step time.

Communication terms (per layer, per micro-batch; S_act = b (s/cp) h bytes-per-element):

- TP (Narayanan et al. 2021 §3.3; Korthikanti et al. 2022 §4): 2 all-reduces of S_act in the
  forward and 2 in the backward (each an equal-volume reduce-scatter + all-gather with sequence
  parallelism), 2 more in the forward recompute under full recompute. Forward ones are exposed;
  backward ones overlap the weight-gradient GEMMs (half of the backward GEMM time), as in
  Megatron's asynchronous TP all-reduce, and only what exceeds them is exposed.
- CP (ring attention, Liu et al. 2023): K and V of the local chunk, 2 b (s/cp) g d bytes/elem / tp,
  pass round the cp ring (cp - 1 send/recv steps) forward, twice that backward; hidden under the
  attention core, exposed beyond it. strategy cp_comm_type all_gather / a2a (Transformer Engine's
  AttnFuncWithCPAndKVAllGather / AttnFuncWithCPAndQKVOA2A): all-gathers of K, V (+ reduce-scatters of dK, dV
  backward) or all-to-alls of Q, K, V, O each way over the whole cp group, exposed (_cp_exposed).
- EP (GShard/Switch): 2 all-to-alls (dispatch, combine) of b (s/cp) k h bytes/elem / tp per MoE
  layer forward, 2 backward, 2 more in a recomputed forward (full recompute, selective recompute of moe);
  exposed. DeepEP / HybridEP (strategy moe_flex_dispatcher): each token once per destination NVLink domain,
  then once per destination GPU over NVLink (scalemodel.cost.ep_dispatch, docs/model.md#ep-hierarchical).
- PP: b (s/cp) h bytes/elem per boundary per direction, the whole activation on every TP rank as
  Megatron-Core sends it (schedules.py get_tensor_shapes), / tp under sequence parallelism or with legacy
  Megatron-LM's scatter/gather (Narayanan et al. 2021 §4.1, strategy pp_scatter_gather: + an all-gather over TP
  after each receive); 2 v send/recvs per micro-batch per stage on the critical path, priced on the slowest
  boundary (the one crossing the outermost tier the pipeline spans).
- DP (ZeRO paper §7, Rajbhandari et al. 2020): gradients of the stage's parameters; all-reduce
  for ZeRO-0, reduce-scatter + all-gather (same volume) for ZeRO-1/2, x1.5 for ZeRO-3/FSDP;
  expert parameters over the dp/ep group. Gradients are synchronised in buckets (PyTorch DDP's
  bucket_cap_mb, default 25 MiB = 26,214,400 B): n = ceil(bytes / bucket) collectives of bytes / n each, so every
  bucket pays the collective's latency (which grows with the group for rings). Overlapped with the
  last micro-batch's backward except the final bucket (exposed = max(t_dp - window, t_dp / n)). Compression changes the
  bytes and adds encode/decode time; a parameter server replaces the all-reduce
  (:mod:`scalemodel.cost.ps`).

This module composes the step (:func:`evaluate`, :func:`with_sync`, the host wait, the pipeline schedule over uneven
ranks, and the lower bounds :func:`compute_floor` and :func:`dp_exposed_floor`) from its parts, each a module of its
own: the layers each pipeline rank and chunk holds (:mod:`scalemodel.engine.pipeline_ranks`), the compute of one
micro-batch (:mod:`scalemodel.engine.layer_compute`), TP / CP / EP / PP communication
(:mod:`scalemodel.engine.model_parallel_comm`), data-parallel sync and the optimizer step
(:mod:`scalemodel.engine.dp_comm`) and memory per stage (:mod:`scalemodel.engine.stage_memory`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from functools import cache, partial
from typing import Any, NamedTuple

import msgspec
import numpy as np

from scalemodel.choices import (
    CompressionKind,
    CpCommType,
    Layout,
    Recompute,
    ScheduleKind,
    StateOffload,
    SyncKind,
    Zero,
    parse_sync,
)
from scalemodel.cost import balance, pipeline, transformer
from scalemodel.cost import sync as sync_model
from scalemodel.cost.checks import all_finite_nonnegative
from scalemodel.cost.placement import DataParallelGroups, ParallelGroups, parallel_groups
from scalemodel.engine.dp_comm import (
    DEEPSPEED_GATHERS_PER_LAYER,
    _offload_exposed,
    _optimizer_time,
    _sync_comm,
    _sync_traffic,
    hier_group,
    host_state_bytes_per_node,
    hsdp_shard_group,
    loss_allreduce_time,
    loss_token_count_read_time,
    nan_loss_check_time,
    offloaded_optimizer,
    optimizer_stats_allreduce_time,
    train_metric_sync_time,
)
from scalemodel.engine.host_floor import eager_ops_host_s, expert_forward_host_share, sync_refill_us
from scalemodel.engine.job import (
    Job,
    StrategyGrid,
    cp_window_refused,
    ep_dispatch_share,
    hybridep_group_refused,
    moe_sp_refused,
    topk_refused,
)
from scalemodel.engine.layer_compute import (
    _block_recomputed,
    _chunk_ranks_recomputed,
    _compute_per_microbatch,
    _gathered_bytes,
    _recomputed_total,
    _split_rank_recomputed,
    _stage_recomputed,
    deferred_head_share,
    fsdp_root_params,
    moe_block_recomputed,
    mtp_module_recomputed,
    recomputed_layers,
    shared_layer_pieces,
    xla_remat,
)
from scalemodel.engine.lockstep import jitter_wait
from scalemodel.engine.model_parallel_comm import (
    _collective,
    _model_parallel_comm,
    _mp_collectives,
    _no_tp_comm,
    sp_replicated_grad_allreduce,
    tied_embedding_allreduce,
)
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.pipeline_ranks import (
    _chunk_layers,
    _chunked,
    _dp_ranks,
    _etp,
    _join_results,
    _join_rows,
    _layers_split,
    _params_per_gpu,
    _part_job,
    _rank_dp_job,
    _rank_layers,
    _rank_params_per_gpu,
    _RankSplit,
    _split_rows,
    _splits_cover,
    _stage_layers,
    _stage_params_per_gpu,
    microbatches,
)
from scalemodel.engine.stage_memory import memory_parts
from scalemodel.errors import InputError


class Infeasible(IntEnum):
    """Why a candidate cannot run: a code (0 = feasible), a JSON key and a sentence."""

    key: str
    text: str
    #: as choices.Choice's: ndarray's own, so numpy's per-operation lookup (codes == Infeasible.MEMORY) is found at
    #: once instead of missing through EnumType.__getattr__ in Python
    __array_ufunc__ = np.ndarray.__array_ufunc__

    def __new__(cls, code: int, key: str, text: str) -> Infeasible:
        obj = int.__new__(cls, code)
        obj._value_ = code
        obj.key = key
        obj.text = text
        return obj

    GPUS_NOT_DIVISIBLE = 1, "gpus_not_divisible", "gpus not divisible by tp x pp x cp, or dp x tp x pp x cp != gpus"
    BATCH_NOT_DIVISIBLE = 2, "batch_not_divisible", "global batch not divisible by dp x micro-batch"
    LAYERS_NOT_DIVISIBLE = 3, "layers_not_divisible", (
        "layers do not split into the pipeline stages (interleaving needs layers divisible by pp x v; "
        "given first/last stage layers must leave the other stages an equal share of at least one; a hybrid "
        "pattern's '|' segments are the stages: pp x v of them, without first/last stage or chunk layers; "
        "given stage_layers need pp x v of them)")
    HEADS_NOT_DIVISIBLE = 4, "heads_not_divisible", (
        "heads not divisible by tp (nor, in a hybrid pattern, the Mamba heads and groups: MambaMixer's asserts; "
        "with cp_comm_type a2a or a2a+p2p, the heads and KV heads per TP rank not divisible by the all-to-all "
        "group, cp or cp_a2a_size, which must divide cp)")
    EXPERT_PARALLEL_INVALID = 5, "expert_parallel_invalid", (
        "expert parallelism must divide the number of experts, and etp x ep the tp x cp x dp ranks of a stage")
    SEQ_NOT_DIVISIBLE = 6, "seq_not_divisible", (
        "sequence length not divisible by cp (x2 for load-balanced ring attention)")
    INTERLEAVE_INVALID = 7, "interleave_invalid", (
        "interleaved schedule needs v >= 2 and micro-batches divisible by pp (and, in a hybrid pattern, '|' stage "
        "boundaries: Megatron-Core refuses virtual stages without them)")
    MODEL_PARALLEL_NEEDS_TRANSFORMER = 8, "model_parallel_needs_transformer", (
        "model parallelism (tp/pp/cp/ep > 1) needs a transformer workload")
    EXCEEDS_CLUSTER = 9, "exceeds_cluster", "more GPUs than the cluster has"
    OUT_OF_MEMORY = 10, "out_of_memory", "does not fit in accelerator memory"
    PS_INCOMPATIBLE = 11, "ps_incompatible", "parameter server needs all-reduce-free DP (no ZeRO, no top-k)"
    HSDP_GROUP_INVALID = 12, "hsdp_group_invalid", (
        "the HSDP sharding group must divide the data-parallel degree; under hier:G it is the hier group of "
        "min(dp, G) replicas, so a pinned shard_group must equal that")
    LAYOUT_INVALID = 13, "layout_invalid", (
        "a rank order with PP inside DP needs ep = 1 with a pipeline (Megatron-LM: expert and dense data-parallel "
        "degrees must agree unless PP is outermost)")
    OFFLOAD_INVALID = 14, "offload_invalid", (
        "activation offload needs pp = 1, no recompute, fewer offloaded layers than the model has "
        "(Megatron-Core transformer_config.py), a transformer block (a hybrid Mamba model's MambaStack builds no "
        "offload context: megatron/core/models/hybrid/hybrid_block.py) and the cluster's host_bandwidth")
    SYNC_NEEDS_REPLICAS = 15, "sync_needs_replicas", (
        "asp, ssp:S and local:H step every data-parallel rank on its own full copy of the model and optimizer, "
        "which ZeRO, FSDP and HSDP shard across those ranks: they need zero 0")
    MOE_A2A_OVERLAP_INVALID = 16, "moe_a2a_overlap_invalid", (
        "moe_a2a_overlap needs ep > 1, no full recompute, no selective recompute of moe, and the interleaved "
        "schedule when pp > 1 (Megatron-Core TransformerConfig; job._check_moe_a2a_overlap refuses it in predict)")
    CP_WINDOW_UNSUPPORTED = 17, "cp_window_unsupported", (
        "sliding-window attention with context parallelism needs cp_comm_type a2a or all_gather: Transformer Engine "
        "refuses a window on the p2p ring (p2p, and a2a+p2p with more than one ring rank; job.cp_window_refused, "
        "predict refuses it)")
    HYBRIDEP_GROUP_INVALID = 18, "hybridep_group_invalid", (
        "the flex dispatcher's HybridEP backend needs its etp x ep ranks divisible by the group's ranks per NVLink "
        "domain (DeepEP hybrid-ep hybrid_ep_buffer.py asserts it; job.hybridep_group_refused, predict refuses it)")
    MOE_SP_REQUIRED = 19, "moe_sp_required", (
        "Megatron-Core (layer_impl megatron_te) refuses to train an MoE model at tp > 1 without sequence parallelism "
        "(moe_layer.py MoELayer.forward raises; job.moe_sp_refused, predict refuses it)")
    TOPK_SHARDED_GRADIENTS = 20, "topk_sharded_gradients", (
        "top-k compression all-gathers each rank's whole sparsified gradient (with its error-feedback residual); "
        "ZeRO 2, ZeRO 3, FSDP and HSDP reduce-scatter the gradients to shards instead: top-k needs zero 0 or 1 "
        "(job.topk_refused, predict refuses it)")
    STATE_OFFLOAD_INVALID = 21, "state_offload_invalid", (
        "offload_states needs the cluster's host_bandwidth and a framework that runs it: optimizer with zero 1, 2 "
        "or 3 (DeepSpeed offload_optimizer), optimizer+params with zero 3, fsdp or hsdp (DeepSpeed offload_param, "
        "FSDP CPUOffload); not beside activation offload, Megatron-Core's DDP, nanotron's trainer or Apex's "
        "DistributedFusedAdam (StrategySpec and job._check_state_offload refuse these in predict)")
    HOST_OUT_OF_MEMORY = 22, "host_out_of_memory", (
        "the model states offload_states keeps in host memory (fp32 master, Adam moments, gradient and staging "
        "buffers of the node's ranks) exceed the cluster's host_memory per node (docs/model.md#host-memory)")


INFEASIBLE_REASONS = {int(r): r.text for r in Infeasible}
REASON_KEYS = {int(r): r.key for r in Infeasible}



class StepArrays(msgspec.Struct, eq=False):  # numpy fields: == has no single truth value
    """Results for every candidate (arrays of one shape). ``breakdown`` parts sum to ``step_time``.

    A msgspec Struct, as :class:`~scalemodel.engine.job.Job` is (a dataclass of these 18 fields compiled its methods
    at import, ~3 M instructions); copies with changes are :func:`msgspec.structs.replace`."""

    step_time: np.ndarray
    breakdown: dict[str, np.ndarray]
    feasible: np.ndarray
    reason: np.ndarray  # 0 when feasible, else an Infeasible code
    microbatches: np.ndarray
    tokens_per_s: np.ndarray
    samples_per_s: np.ndarray
    model_flops: np.ndarray  # per step, whole job
    hardware_flops: np.ndarray
    tflops_per_gpu: np.ndarray  # model FLOP/s per GPU / 1e12
    mfu: np.ndarray
    hfu: np.ndarray
    memory: dict[str, np.ndarray]  # per-GPU bytes by part, plus "total"
    fits: np.ndarray
    statistical_efficiency: np.ndarray  # staleness penalty of the sync mode (1 for bsp)
    updates_per_s: np.ndarray
    mean_staleness: np.ndarray
    extras: dict[str, np.ndarray] = msgspec.field(default_factory=dict)


def _feasibility(job: Job, g: StrategyGrid, m: np.ndarray, sync: str = "bsp") -> np.ndarray:
    reason = np.zeros(g.shape, dtype=np.int64)

    R = Infeasible

    def flag(code: Infeasible, bad: Any) -> None:
        nonlocal reason
        if not np.any(bad):  # most checks hold everywhere (the planner enumerates valid splits): no pass over the grid
            return
        reason = np.where((reason == 0) & bad, code, reason)

    flag(R.GPUS_NOT_DIVISIBLE, g.dp * g.tp * g.pp * g.cp != g.gpus)
    hsdp = g.zero == Zero.HSDP
    hier = hier_group(g, sync)
    if hier is not None:  # hier:G shards HSDP inside its groups (hier_group): a pinned group other than min(dp, G)
        # is refused before any other check, as grid_from_strategy refuses it (so plan's counts give predict's reason)
        flag(R.HSDP_GROUP_INVALID, hsdp & (g.shard_group > 0) & (g.shard_group != hier))
    per_step = g.dp * g.micro_batch
    flag(R.BATCH_NOT_DIVISIBLE, (g.global_batch % np.maximum(per_step, 1) != 0) | (g.global_batch < per_step))
    if job.is_transformer:
        sh = job.shape
        flag(R.LAYERS_NOT_DIVISIBLE, ~_layers_split(job, g))
        flag(R.HEADS_NOT_DIVISIBLE, (int(sh.heads) % g.tp != 0) | ((int(sh.mamba.heads) % g.tp != 0)
                                                                   | (int(sh.mamba.groups) % g.tp != 0)
                                                                   if sh.mamba is not None else False))
        a2a_kind = (g.cp_comm_type == CpCommType.A2A) | (g.cp_comm_type == CpCommType.A2A_P2P)
        if np.any((g.cp > 1) & a2a_kind):
            # AttnFuncWithCPAndQKVOA2A (and the a2a level of a2a+p2p) asserts num_heads % cp_size == 0 for Q, K and
            # V (TE context_parallel.py at d0067d0); K's heads per TP rank: g / t, at least 1 (Megatron-Core
            # replicates KV heads when g < t); the a2a level's size must divide cp
            n_a = np.where(g.cp_comm_type == CpCommType.A2A, g.cp, np.maximum(g.cp_a2a_size, 1))
            kv_local = np.where(sh.mla, int(sh.heads) // np.maximum(g.tp, 1),
                                np.maximum(int(sh.kv_heads) // np.maximum(g.tp, 1), 1))
            flag(R.HEADS_NOT_DIVISIBLE, (g.cp > 1) & a2a_kind & (((int(sh.heads) // np.maximum(g.tp, 1)) % n_a != 0)
                                                               | (kv_local % n_a != 0) | (g.cp % n_a != 0)))
        experts = int(sh.moe_experts)
        folded = (g.tp * g.cp * g.dp) % (_etp(g) * g.ep) != 0  # MoE parallel folding: etp x ep | tp cp dp
        bad_ep = (experts == 0) | folded | (experts % np.maximum(g.ep, 1) != 0)
        flag(R.EXPERT_PARALLEL_INVALID, ((g.ep > 1) | (g.etp > 0)) & bad_ep)
        flag(R.SEQ_NOT_DIVISIBLE, (g.cp > 1) & (job.seq_len % (2 * g.cp) != 0))
        if experts > 0 and np.any(np.asarray(g.moe_flex_dispatcher, dtype=bool)):
            flag(R.HYBRIDEP_GROUP_INVALID, hybridep_group_refused(job, g.ep, _etp(g), g.moe_flex_dispatcher,
                                                                  g.moe_flex_backend))
        if experts > 0:
            flag(R.MOE_SP_REQUIRED, moe_sp_refused(job, g.tp, g.sequence_parallel, g.layer_impl))
        if np.any(g.cp > 1):
            flag(R.CP_WINDOW_UNSUPPORTED, cp_window_refused(job, g.cp, g.cp_comm_type, g.cp_a2a_size, g.layer_impl))
        bad_v = (g.virtual_stages < 2) | (m % g.pp != 0) | (g.pp < 2)
        if sh.hybrid is not None and sh.hybrid.segments < 2:  # hybrid_layer_allocation.py select_pipeline_segment
            bad_v = bad_v | True
        flag(R.INTERLEAVE_INVALID, (g.schedule == ScheduleKind.INTERLEAVED) & bad_v)
    else:
        flag(R.MODEL_PARALLEL_NEEDS_TRANSFORMER, (g.tp > 1) | (g.pp > 1) | (g.cp > 1) | (g.ep > 1))
    flag(R.EXCEEDS_CLUSTER, g.gpus > job.max_gpus)
    flag(R.HSDP_GROUP_INVALID, hsdp & (g.shard_group > 0) & (g.dp % np.maximum(g.shard_group, 1) != 0))
    host = np.asarray(g.offload_states)
    if np.any(host > 0):  # offload_states: what predict refuses (flagged before
        # the parameter-server and top-k codes, which plan's pass 1 counts per communication choice on open candidates)
        flag(R.STATE_OFFLOAD_INVALID, (host > 0) & (
            (job.host_bandwidth <= 0) | (g.offload_layers > 0) | (g.offload_tensors > 0) | g.megatron_ddp
            | g.nanotron_trainer | g.bucket_fragments
            | ((host == StateOffload.OPTIMIZER) & ((g.zero == Zero.NONE) | (g.zero >= Zero.FSDP)))
            | ((host == StateOffload.PARAMS) & (g.zero < Zero.PARAMETERS))))
        if job.host_memory > 0:  # unknown (0): not checked; memory's report says so
            flag(R.HOST_OUT_OF_MEMORY, (host > 0) & (host_state_bytes_per_node(job, g, m, sync) > job.host_memory))
    topk = g.compression == CompressionKind.TOPK
    flag(R.PS_INCOMPATIBLE, (g.ps_servers > 0) & ((g.zero > Zero.NONE) | topk))
    flag(R.TOPK_SHARDED_GRADIENTS, topk_refused(g.compression, g.zero))
    flag(R.LAYOUT_INVALID, _pp_not_outermost(g) & (g.pp > 1) & (g.ep > 1))
    layers = float(job.shape.layers) if job.is_transformer else 1.0
    # Megatron-Core offloads through TransformerBlock's get_cpu_offload_context; MambaStack (HybridStack,
    # models/hybrid/hybrid_block.py at d98e8a64dd) has none, so a hybrid model's cpu_offloading_num_layers moves
    # nothing (docs/model.md#offload)
    no_block = not job.is_transformer or job.shape.hybrid is not None
    flag(R.OFFLOAD_INVALID, (g.offload_layers > 0) & ((g.pp > 1) | (g.recompute != Recompute.NONE)
                                                      | (g.offload_layers >= layers) | no_block
                                                      | (job.host_bandwidth <= 0)))
    # named-tensor offload (MaxText's attention-layer names) on a hybrid pattern: the grid's face of
    # job._check_offload_tensor_layers (no framework offloads a Mamba layer's tensors by name; mem35)
    flag(R.OFFLOAD_INVALID, (np.asarray(g.offload_tensors) > 0) & no_block)
    flag(R.SYNC_NEEDS_REPLICAS, needs_replicas(sync) & (g.zero != Zero.NONE))
    if np.any(g.moe_a2a_overlap):  # a pinned moe_a2a_overlap: plan ranked candidates predict refuses
        flag(R.MOE_A2A_OVERLAP_INVALID, np.asarray(g.moe_a2a_overlap, dtype=bool) & (
            (g.ep <= 1) | (g.recompute == Recompute.FULL) | moe_block_recomputed(job, g)
            | ((g.pp > 1) & (g.schedule != ScheduleKind.INTERLEAVED))))
    return reason


def needs_replicas(sync: str) -> bool:
    """Whether sync mode ``sync`` lets the data-parallel ranks step apart (asp, ssp:S, local:H), so each needs
    its own full model and optimizer state: a sharded one (ZeRO 1-3, FSDP, HSDP) exists once per group and
    is stepped together (Rajbhandari et al. 2020 partition the state of one synchronous replica)."""
    return parse_sync(sync).kind in (SyncKind.ASP, SyncKind.SSP, SyncKind.LOCAL)


def _pp_not_outermost(g: StrategyGrid) -> np.ndarray:
    """Where the strategy's rank order does not put PP outermost (choices.Layout)."""
    return np.isin(g.layout, [int(m) for m in Layout if m.dims[-1] != "pp"])


def _where_stage(take: np.ndarray, a: _Stage, b: _Stage) -> _Stage:
    """Per candidate, rank ``a`` where ``take``, else ``b`` (every field of one rank, never a mix)."""
    def pick(x: dict[str, np.ndarray], y: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: np.where(take, x[k], y[k]) if k in x else y[k] for k in y}
    return _Stage(np.where(take, a.time, b.time), pick(a.compute, b.compute), pick(a.busy, b.busy),
                  pick(a.mp, b.mp), np.where(take, a.host, b.host))


def _busiest(stages: list[_Stage]) -> _Stage:
    """Per candidate, the rank of ``stages`` with the longest micro-batch time (the first of equal ones)."""
    best = stages[0]
    for s in stages[1:]:
        best = _where_stage(s.time > best.time, s, best)
    return best


def _segment_rank_stages(job: Job, g: StrategyGrid, stage: Callable[..., _Stage]
                         ) -> list[tuple[_RankSplit, list[_Stage]]] | None:
    """For each split of :func:`_rank_layers`: (the split, every rank's stage priced on its own layers' kinds
    (:func:`_part_job`)); the last rank with the logits, rank 0 with the word embedding. None for a model that is not
    hybrid."""
    splits = _rank_layers(job, g)
    if splits is None:
        return None
    return [(sp, [stage(np.full(1, float(len(s))), r == sp.p - 1, _part_job(job, s), _split_rank_recomputed(g, sp, r),
                        r == 0) for r, s in enumerate(sp.ranks)]) for sp in splits]


def _segment_pipeline_total(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], m: np.ndarray,
                            interleaved: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """(the candidates, the pipelined time of one step) for each split of :func:`_rank_layers`, every rank at its own
    stage time: 1F1B :func:`scalemodel.cost.pipeline.one_f_one_b_time` over the p ranks' forward and backward seconds
    (each rank's time split as its compute, :func:`_stage_forward_backward`); interleaved (``|`` segments only)
    :func:`scalemodel.cost.pipeline.interleaved_rank_time` over the p ranks' times and the chunks of virtual stage 0
    (segments 0 .. p-2, each its own kinds, with its two send/recvs: its stage less the empty stage's 2 v
    send/recvs, plus 1 / v of them)."""
    out: list[tuple[np.ndarray, np.ndarray]] = []
    if not interleaved:
        for sp, fb, c, same in _segment_1f1b_ranks(job, g, stage):
            if same:  # middle ranks all one stage: the three-class closed form, the same bound to the bit
                mid_fb = fb[1] if sp.p >= 3 else fb[0]
                out.append((sp.on, pipeline.one_f_one_b_three_class_time(m, sp.p, *fb[0], *mid_fb, *fb[-1], c)))
                continue
            f, b, shape = _stacked(fb, m, c)
            out.append((sp.on, pipeline.one_f_one_b_time(np.broadcast_to(m, shape), f, b, np.broadcast_to(c, shape))))
        return out
    seg = _segment_rank_stages(job, g, stage)
    for sp, stages in seg or ():
        p = sp.p
        # middle ranks and middle chunks all one stage: the three-class closed form, the same bound to the bit as
        # without '|' (equal segments)
        same = all(x is stages[1] for x in stages[1:-1])
        if not sp.piped:  # Megatron refuses virtual stages without '|' (the split is not the candidates')
            continue
        if sp.segments and not all(sp.segments[:p]):
            # a rank whose chunk of virtual stage 0 holds no layer starts on a later chunk, behind every chunk
            # before it (cost.pipeline.interleaved_rank_wait_time)
            out.append((sp.on, _empty_chunk_waits(job, g, stage, m, sp, stages)))
            continue
        pieces, chunks = _stage0_chunks(job, g, stage, sp)
        if same and all(x is pieces[-1] for x in pieces[1:]):
            mid = stages[1] if p >= 3 else stages[0]
            out.append((sp.on, pipeline.interleaved_uneven_time(m, p, stages[0].time, mid.time, stages[-1].time,
                                                                chunks[0], chunks[-1])))
            continue
        shape = np.broadcast_shapes(np.shape(m), *(np.shape(x.time) for x in stages),
                                    *(np.shape(x) for x in chunks))
        w = np.stack([np.broadcast_to(x.time, shape) for x in stages], axis=-1)
        c = np.stack([np.broadcast_to(x, shape) for x in chunks], axis=-1)
        out.append((sp.on, pipeline.interleaved_rank_time(np.broadcast_to(m, shape), w, c)))
    return out


def _stage0_chunks(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], sp: _RankSplit
                   ) -> tuple[list[_Stage], list[np.ndarray]]:
    """Chunks 0 .. p-2 of virtual stage 0 of an interleaved split (``sp``: '|' segments or strategy.stage_layers; chunk
    i runs on rank i): (each chunk's layers as a stage with every exchange exposed, its forward + backward seconds of
    one micro-batch in the bubble's chain, :func:`_chunk_time`, on its own kinds, its own first N layers recomputed
    (:func:`_block_recomputed`), rank 0's with the word embedding, less 1 / v of its rank's hidden exchanges). Read by
    the interleaved bubble (:func:`_segment_pipeline_total`) and the deferred-wgrad flush idle
    (:func:`_deferred_wgrad_exposed`)."""
    pieces, chunks = [], []
    for i, s in enumerate(sp.chunks[:sp.p - 1]):
        n, part, rec = np.full(1, float(len(s))), _part_job(job, s), _block_recomputed(g, [len(s)])
        pieces.append(stage(n, False, part, rec, i == 0, blocking_p2p=True))
        rank = sp.ranks[i]  # virtual stage 0's chunk i runs on rank i
        hidden = _rank_hidden(stage, np.full(1, float(len(rank))), False, _part_job(job, rank),
                              _split_rank_recomputed(g, sp, i), i == 0)
        chunks.append(_chunk_time(stage, n, float(sp.v), part, rec, i == 0, hidden))
    return pieces, chunks


def _empty_chunk_waits(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], m: np.ndarray, sp: _RankSplit,
                       stages: list[_Stage]) -> np.ndarray:
    """The interleaved step of a split (``sp``: '|' segments or strategy.stage_layers) where a chunk of virtual stage 0
    holds no layer: :func:`scalemodel.cost.pipeline.interleaved_rank_wait_time` over the ranks' times (``stages``)
    and each rank's wait, the chunks before its first chunk that holds a layer (virtual stage c of rank r at c p + r),
    each chunk priced as :func:`_segment_pipeline_total` prices the chunks of virtual stage 0 (its layers on its own
    kinds, its two send/recvs: the empty stage's 2 v less (2 v - 2))."""
    p, v, segs = sp.p, float(sp.v), sp.segments
    times: list[np.ndarray] = []
    for i, s in enumerate(segs):
        # virtual stage 0 (rank 0's first chunk) holds the word embedding
        rank = sp.ranks[i % p]  # chunk i (virtual stage i // p) runs on rank i mod p
        hidden = _rank_hidden(stage, np.full(1, float(len(rank))), i % p == p - 1, _part_job(job, rank),
                              _split_rank_recomputed(g, sp, i % p), i % p == 0)
        times.append(_chunk_time(stage, np.full(1, float(len(s))), v, _part_job(job, s), None, i == 0, hidden))
    waits = []
    for r in range(p):
        first = next((c * p + r for c in range(len(segs) // p) if segs[c * p + r]), r)
        waits.append(sum(times[:first], np.zeros(1)))
    shape = np.broadcast_shapes(np.shape(m), *(np.shape(x.time) for x in stages), *(np.shape(x) for x in waits))
    w = np.stack([np.broadcast_to(x.time, shape) for x in stages], axis=-1)
    c = np.stack([np.broadcast_to(x, shape) for x in waits], axis=-1)
    return pipeline.interleaved_rank_wait_time(np.broadcast_to(m, shape), w, c)


def _overlap_windows(comp: dict[str, np.ndarray], efficiency: float) -> dict[str, np.ndarray]:
    """``comp`` with the windows that hide communication cut to ``efficiency`` of their compute
    (docs/model.md#overlap-efficiency): the forward and backward passes (DP and FSDP/ZeRO-3 traffic), the
    weight-gradient GEMMs (TP backward), the output GEMM (the output layer's TP backward) and the attention core
    (CP). Those keys serve only as windows; the compute itself (``total``) is unchanged. Efficiency 1 leaves
    ``comp`` as it is."""
    if efficiency == 1.0:
        return comp
    keys = ("forward", "backward", "wgrad", "head_gemm", "attention_core", "core_per_layer")
    return dict(comp, **{k: efficiency * comp[k] for k in keys if k in comp})


def _with_overhead(rate: np.ndarray, step: np.ndarray, overhead: float) -> np.ndarray:
    """A per-step rate (updates/s) once every step is ``overhead`` seconds longer than ``step``
    (which includes it): every sync mode's rate is a count over the step time (cost.sync), so it
    scales by (step - overhead) / step."""
    if overhead == 0.0:
        return rate
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(step > 0, rate * (step - overhead) / step, rate))


def refuse_non_finite(parts: dict[str, Any], total: Any) -> None:
    """Refuse, as one ``error: result:`` line naming the part, a part of ``parts`` or a ``total`` (their sum, or a
    quantity built from them) that is NaN, infinite or negative: an internal invariant (every part of a step is a
    finite time >= 0), checked where a rate or a search's bound is taken from it, by two reductions over the grid
    per part and two for ``total``. Every part, not only the total: a negative part hides in a sum that a larger
    positive part keeps >= 0 (fuzz32; the first version checked the total only). The part named is the first that
    is wrong other than dp_comm (the step less the others, wrong when any is), else ``total`` itself (finite parts
    whose sum overflowed)."""
    def wrong(v: Any) -> bool:
        return not all_finite_nonnegative(np.asarray(v, dtype=float))

    bad = [k for k, v in parts.items() if wrong(v)]
    if not bad and not wrong(total):
        return
    name = next((k for k in bad if not k.startswith("dp_comm")), bad[0] if bad else "total")
    v = np.asarray(parts[name] if bad else total, dtype=float)
    w = ~(np.isfinite(v) & (v >= 0))
    raise InputError(f"the step model's {name} is {float(v[w].flat[0])!r} (not a finite number >= 0) for "
                     f"{int(np.count_nonzero(w)):,} of {w.size:,} candidates", where="result",
                     allowed="an internal invariant: every part of a step is a finite time >= 0 (a defect to "
                     "report, with the command that gave it)")


def _rate_denominator(breakdown: dict[str, np.ndarray], step: np.ndarray) -> np.ndarray:
    """The step time as the denominator of the rates (tokens/s, MFU, HFU): ``step`` where > 0, else inf (a rate of
    0), once :func:`refuse_non_finite`. A NaN straggler time (fuzz31, gamma cv 1e-200) fell through ``step > 0``
    (False for NaN) to a rate of 0, and predict's finite-only display zeroed the part: a finite "857 ms" step at
    "0 tokens/s", exit 0."""
    refuse_non_finite({f"{k} time": v for k, v in breakdown.items()}, step)
    return np.where(step > 0, step, np.inf)


def _with_free_windows(comp: dict[str, np.ndarray], mp: dict[str, np.ndarray],
                       share: float = 0.0, ep_share: Any = None, nvls_share: Any = None) -> dict[str, np.ndarray]:
    """The stage's compute plus the forward and backward time left for data-parallel traffic once the
    tensor-, context- and (with moe_a2a_overlap) expert-parallel traffic has been hidden in it (no compute hides
    traffic twice), and the compute slowed by that hidden traffic (``contention``, :func:`_contention`): the
    collective library's ``share`` of the SMs for hidden TP/CP traffic, the EP dispatcher's ``ep_share``
    (:func:`scalemodel.engine.job.ep_dispatch_share`; ``share`` when None) for the hidden EP all-to-alls
    (``hidden_ep``, a part of ``hidden_fwd + hidden_bwd``); the TP traffic tp_comm_overlap hides (``hidden_ub``, a
    part too) runs on Transformer Engine's userbuffers SMs, priced in ``ub_sms``
    (:func:`scalemodel.engine.model_parallel_comm.userbuffers_sm_time`), not at ``share``; the hidden TP all-reduces
    NCCL runs as NVLS (``hidden_nvls``, a part too) on its NVLS channels, ``nvls_share`` (``share`` when None)."""
    hidden_ep = mp.get("hidden_ep", 0.0)
    hidden_ub = mp.get("hidden_ub", 0.0)
    hidden_nvls = mp.get("hidden_nvls", 0.0)
    mp_hidden = mp["hidden_fwd"] + mp["hidden_bwd"] - hidden_ep - hidden_ub - hidden_nvls
    contention = (_contention(share, mp_hidden) + _contention(share if nvls_share is None else nvls_share, hidden_nvls)
                  + _contention(share if ep_share is None else ep_share, hidden_ep)
                  + mp.get("ub_sms", 0.0) + mp.get("chunking", 0.0))
    return dict(comp, forward_free=np.maximum(comp["forward"] - mp["hidden_fwd"], 0.0),
                backward_free=np.maximum(comp["backward"] - mp["hidden_bwd"], 0.0), contention=contention)


def _dp_share(job: Job, total: Any, nvls: Any) -> np.ndarray:
    """The share of the compute units the hidden data-parallel traffic holds (docs/model.md#contention): its
    collectives' shares weighted by their seconds, ``(s_nvls A + s (T - A)) / T`` with T the step's DP seconds, A
    their NVLS all-reduce part (on the NVLS channels, ``collective_share_nvls``) and s the ring channels' share
    (``collective_share``: reduce-scatters, all-gathers, ring / tree all-reduces); ``s`` where T is 0. The hidden
    part is read as holding the kinds in the same proportion (the all-reduce buckets and the distributed
    optimizer's reduce-scatters are hidden under the same backward)."""
    s, s_nvls = job.collective_share, job.collective_share_nvls
    if s_nvls == s:
        return np.asarray(s)
    frac = np.divide(nvls, total, out=np.zeros(np.broadcast(nvls, total).shape), where=np.asarray(total) > 0)
    return np.asarray(s + (s_nvls - s) * np.clip(frac, 0.0, 1.0))


def _contention(share: Any, hidden: Any) -> np.ndarray:
    """Seconds compute loses to the collectives hidden under it (docs/model.md#contention).

    A collective library that runs on the chip's compute units (NCCL: one CTA per channel, each on
    one SM, for the collective's whole duration) leaves the compute overlapped with it ``1 - share``
    of the units, ``share`` = collective units / compute units (an EP dispatcher that runs its own kernels,
    DeepEP / HybridEP: its configured SMs / compute units). While ``hidden`` seconds of traffic
    run under compute, the compute advances at ``1 - share`` of its rate, so it finishes
    ``share x hidden`` seconds later. Hidden traffic never exceeds the compute under it, and the
    delay does not lengthen the windows that hide traffic (a lower bound on the slowdown).
    """
    return np.asarray(share * np.maximum(hidden, 0.0))


def _imbalance(job: Job, g: StrategyGrid, m: np.ndarray, task: np.ndarray) -> np.ndarray:
    """Seconds a step loses to uneven work across the dp replicas (docs/model.md#imbalance).

    Each replica runs m micro-batches whose compute times are i.i.d. with mean ``task`` and CV
    ``job.work_cv``. Static assignment (fixed equal shares) ends with the slowest replica's sum,
    m E[max_i sum_j X_ij]/m (:func:`~scalemodel.cost.balance.noisy_static_makespan`); dynamic assignment pulls
    micro-batches from a shared queue at ``dispatch_overhead`` seconds each
    (:func:`~scalemodel.cost.balance.noisy_dynamic_makespan`). The term is the makespan minus the balanced m x
    task already counted as compute (never negative: the overhead is part of the loss).
    """
    dynamic = g.dynamic_assignment
    if job.work_cv == 0 and not np.any(dynamic):
        return np.zeros(1)
    dp = g.dp.astype(float)
    static = balance.noisy_static_makespan(dp, m, task, job.work_cv, job.straggler_dist) if job.work_cv > 0 else (
        m * task)
    queued = balance.noisy_dynamic_makespan(dp, m * dp, task, g.dispatch_overhead) if np.any(dynamic) else static
    return np.maximum(np.where(dynamic, queued, static) - m * task, 0.0)


def _dp_rank(job: Job, g: StrategyGrid, last: np.ndarray, other: np.ndarray, first: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """(layers, pipeline rank) of the rank whose data-parallel sync and optimizer step the step prices, per
    candidate of a transformer (None for any other model: the mean stage): the one holding the most parameters
    (:func:`_rank_params_per_gpu`: the gradients it reduces and the states it steps; the step waits for the slowest
    rank), among the last (``last`` layers, the final norm and the output layer), rank 0 (``first`` layers and the
    embedding) and, at pp > 2, a middle rank of ``other`` layers (the middle ranks' own count, :func:`_stage_layers`),
    the last on a tie, then rank 0; rank 1 stands for the
    middle one. At pp = 1 the one rank (0, which is also the last). Where a hybrid pattern's or a given split's ranks
    are priced each on its own, :func:`_dp_ranks` picks among them the same way."""
    if not job.is_transformer:
        return None
    pp = np.asarray(g.pp, dtype=float)
    top = np.maximum(pp - 1.0, 0.0)
    p_last = sum(_rank_params_per_gpu(job, g, last, top))
    p_first = sum(_rank_params_per_gpu(job, g, first, np.zeros(1)))
    p_mid = np.where(pp > 2, sum(_rank_params_per_gpu(job, g, other, np.ones(1))), -1.0)
    take_first = p_first >= p_mid
    best_other, n_other = np.where(take_first, p_first, p_mid), np.where(take_first, first, other)
    r_other = np.where(take_first, 0.0, 1.0)
    on_last = (p_last >= best_other) | (pp <= 1)
    return np.asarray(np.where(on_last, last, n_other), dtype=float), np.asarray(np.where(on_last, top, r_other))


def evaluate(job: Job, g: StrategyGrid, *, sync: str = "bsp", kappa: float | None = None) -> StepArrays:
    """Evaluate every candidate in ``g`` in one vectorised pass (one sync mode per call; a hybrid pattern's rows of
    each rank split apart, :func:`_split_rows`). Its stages share one layer's pricing (:func:`shared_layer_pieces`)."""
    with shared_layer_pieces():
        return _evaluate(job, g, sync=sync, kappa=kappa)


def _evaluate(job: Job, g: StrategyGrid, *, sync: str, kappa: float | None) -> StepArrays:
    """:func:`evaluate`, inside its shared layer pricing."""
    split = _split_rows(job, g)
    if split is not None:
        return _join_results([(x.rows, evaluate(job, x.grid, sync=sync, kappa=kappa)) for x in split], g.shape[0],
                             len(g.shape))
    m = microbatches(g)
    reason = _feasibility(job, g, m.astype(np.int64), sync)
    last_layers, other_layers, first_layers = _stage_layers(job, g)
    # given first / last chunks: each rank's own chunks' recomputed layers (_stage_recomputed; None elsewhere)
    rec_last, rec_other, rec_first = _stage_recomputed(job, g, last_layers, other_layers, first_layers)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                             layout=g.layout)  # placed once, reused
    stage = _stage_memo(job, g, groups)  # the pipeline formulas below reuse these ranks
    # every candidate a split's ranks' (_rank_layers; a row group of _split_rows) and no layer offloaded: each split's
    # ranks replace the mean layer's stages, DP sync, optimizer step and SP gradient all-reduce everywhere below, so
    # those are not priced (zeros(1) stand in until the first split's values take their place)
    own = (job.is_transformer and not np.any(np.asarray(g.offload_layers) > 0)
           and not np.any(np.asarray(g.offload_tensors) > 0) and _splits_cover(g, _rank_layers(job, g)))
    zero = np.zeros(1)
    if own:
        last = _Stage(zero, {}, {}, {}, zero)
    else:
        # the last rank exchanges on one boundary: its micro-batch as the schedule runs it (_end_rank), the time the
        # pipeline formulas' paths take for it, so m t_mb and the bubble count its exchanges alike
        last = _end_rank(stage(last_layers, True, None, rec_last))
    comp, mp, t_mb, host = last.busy, last.mp, last.time, last.host
    comp_dp = comp  # the stage whose data-parallel traffic is priced: the rank holding the most parameters
    idle_dp = host  # its GPU's wait on the host per micro-batch, a window of the DP traffic (dp_comm._sync_comm)
    dp_rank = None if own else _dp_rank(job, g, last_layers, other_layers, first_layers)
    if dp_rank is not None:
        n_dp, r_dp = dp_rank
        for layers_c, rec_c, on_c, emb in ((other_layers, rec_other, (r_dp == 1) & (g.pp > 2), False),
                                           (first_layers, rec_first, (r_dp == 0) & (g.pp > 1), True)):
            if np.any(on_c):
                st_c = stage(layers_c, False, None, rec_c, emb)
                comp_dp = {k: np.where(on_c, st_c.busy[k], v) for k, v in comp_dp.items()}
                idle_dp = np.where(on_c, st_c.host, idle_dp)
        comp_dp = dict(comp_dp, pipeline_rank=r_dp)
    if job.is_transformer and not own and np.any(g.pp > 1):
        # a stage without the logits but with more layers may be the slowest: 1F1B runs at its pace; so may one with
        # as many where the last rank's exchange on one boundary (_end_rank) saves more than its logits cost. The
        # busiest rank but the last as a given split's ranks are picked (below): rank 0 (its own layers, the word
        # embedding, one boundary: _end_rank) and, at pp > 2, a middle rank of its own layers (uneven38: rank 0's
        # count stood for the middle ranks' where it was larger), the middle one only where strictly slower
        first_s = _end_rank(stage(first_layers, False, None, rec_first, True), first=True)
        other = first_s
        if np.any(g.pp > 2):
            mid_s = stage(other_layers, False, None, rec_other)
            other = _where_stage((g.pp > 2) & (mid_s.time > first_s.time), mid_s, first_s)
        comp_o, mp_o, t_o = other.busy, other.mp, other.time
        busier = (g.pp > 1) & (t_o > t_mb)
        comp = {k: np.where(busier, comp_o[k], v) for k, v in comp.items()}
        mp = {k: np.where(busier, mp_o[k], v) for k, v in mp.items()}
        host = np.where(busier, other.host, host)
        t_mb = np.maximum(t_mb, t_o)
    rank_stages = _segment_rank_stages(job, g, stage) or []
    for sp, ranks in rank_stages:
        # a hybrid pattern's ranks (its '|' segments, or the split by count where a rank's kinds are its own): each
        # rank on its own kinds (_part_job), the pace the busiest rank's
        last_s, other_s = _end_rank(ranks[-1]), _busiest([_end_rank(ranks[0], first=True)] + ranks[1:-1])
        sel = _where_stage(other_s.time > last_s.time, other_s, last_s)
        if not comp:  # own: the mean layer's stage not priced, its parts stand in as zeros
            comp, mp = dict.fromkeys(sel.busy, zero), dict.fromkeys(sel.mp, zero)
        comp = {k: np.where(sp.on, sel.busy[k], v) if k in sel.busy else v for k, v in comp.items()}
        mp = {k: np.where(sp.on, sel.mp[k], v) if k in sel.mp else v for k, v in mp.items()}
        host = np.where(sp.on, sel.host, host)
        t_mb = np.where(sp.on, sel.time, t_mb)
    bubble_mb = pipeline.bubble_microbatches(g.pp, g.schedule, g.virtual_stages)
    # an interleaved pipeline's chunk classes, priced at most once: read by the bubble and the deferred-wgrad idle
    classes = cache(partial(_chunk_classes, job, g, stage))
    bubble_mb = _chunked_bubble(job, g, stage, m, t_mb, bubble_mb, classes)
    # the balanced split's two runs of middle ranks, read by the 1F1B bubble and the deferred-wgrad flush idle
    runs = _balanced_middle_runs(job, g)
    bubble_mb = _uneven_1f1b_bubble(job, g, stage, m, t_mb, bubble_mb, runs)
    opt = zero if own else (_optimizer_time(job, g, sync) if dp_rank is None
                            else _optimizer_time(job, g, sync, *dp_rank))
    # the DP collectives priced once: the state offload's copies queue behind their reductions, the activation
    # offload reads its gathers' exposure, the sync all of them (sync28b)
    traffic = None if own else _sync_traffic(job, g, comp_dp, m, sync, groups)
    if not own:  # model states in host memory: the CPU step and the link's copies (docs/model.md#state-offload)
        n_opt, r_opt = dp_rank if dp_rank is not None else (None, None)
        opt = offloaded_optimizer(job, g, m, comp_dp, opt, sync, n_opt, r_opt, traffic=traffic, t_mb=t_mb)
    imbalance_s = _imbalance(job, g, m, comp["total"])
    tied = tied_embedding_allreduce(job, g, groups)  # after the flush, not overlapped
    sp_grads = zero if own else sp_replicated_grad_allreduce(job, g, groups, comp_dp["layers_per_stage"],  # likewise
                                                             comp_dp.get("pipeline_rank", np.zeros(1)))
    # the host's per-step gather of the training metrics' states, the device idle (docs/model.md#train-metric-sync)
    # and the loss function's per-micro-batch NaN check on the last stage, the GPU drained (docs/model.md#nan-check)
    # and NeMo 2.2/2.3's per-micro-batch token-count read there (docs/model.md#loss-token-count-read)
    host_syncs = train_metric_sync_time(job, g) + nan_loss_check_time(g, m) + loss_token_count_read_time(g, m)
    # the lock-stepped GPUs' wait for the slowest of them under the clock's power-management swing
    # (docs/model.md#jitter): the compute of every micro-batch and of the bubble's
    jitter = jitter_wait(job, g, (m + bubble_mb) * comp["total"], sync)
    # each micro-batch's loss all-reduced over the data-parallel group on the last stage, in the dp_comm part
    # (docs/model.md#loss-dp-allreduce)
    loss_sync = loss_allreduce_time(g, groups, m)
    # the optimizer step's gradient-norm and FP8-parameter amax all-reduces, in series between the gradient
    # reduce-scatter and the parameter gather, in the dp_comm part (docs/model.md#optimizer-stats-allreduce)
    loss_sync = loss_sync + optimizer_stats_allreduce_time(job, g, groups)
    # the output layer's deferred weight-gradient GEMMs, drained after the last stage's last backward: what the
    # flush's wait does not hold (docs/model.md#defer-embedding-wgrad), in the bubble part
    drain = _deferred_wgrad_exposed(job, g, groups, stage, m, (last_layers, rec_last), (other_layers, rec_other),
                                    (first_layers, rec_first), runs, classes)
    local = (m + bubble_mb) * t_mb + drain + opt + imbalance_s + tied + sp_grads + host_syncs + jitter + loss_sync
    if own:  # no layer offloaded (_offload_exposed's zeros(1)); every candidate's DP sync its split's rank's below
        off = np.zeros(1)
        cross, in_group, dp_total, dp_nvls = zero, None if hier_group(g, sync) is None else zero, zero, zero
        idle_hidden = zero
    else:
        # offload needs pp = 1: no bubble to scale; its copies also run while a layer waits on TP/CP/EP traffic
        layer_comm = (mp["tp"] + mp["cp"] + mp["ep"]) / np.maximum(comp_dp["layers_per_stage"], 1.0)
        assert traffic is not None  # priced above where not own
        off = _offload_exposed(job, g, comp_dp, m, traffic[0][1], layer_comm)
        cross, in_group, dp_total, dp_nvls, idle_hidden = _sync_comm(job, g, comp_dp, m, sync, groups,
                                                                     local=local + off, idle=idle_dp,
                                                                     traffic=traffic)
    local = local + off
    for sp, ranks in rank_stages:
        for on, _sp, r in _dp_ranks(job, g, [sp]):
            # a hybrid pattern's ranks: the data-parallel sync and the optimizer step of the rank with the most
            # parameters (_dp_ranks), on its own parameters (_rank_dp_job) and its own compute windows
            s, n = sp.ranks[r], np.full(1, float(len(sp.ranks[r])))
            dp_job = _rank_dp_job(job, s)
            comp_r = dict(ranks[r].busy, pipeline_rank=np.full(1, float(r)))  # _dp_comm: the rank's own parameters
            traffic_r = _sync_traffic(dp_job, g, comp_r, m, sync, groups)
            opt_r = offloaded_optimizer(dp_job, g, m, ranks[r].busy,
                                        _optimizer_time(dp_job, g, sync, layers=n, rank=np.full(1, float(r))),
                                        sync, layers=n, rank=np.full(1, float(r)), traffic=traffic_r, t_mb=t_mb)
            sp_r = sp_replicated_grad_allreduce(_part_job(job, s), g, groups, n, np.full(1, float(r)))
            local_r = ((m + bubble_mb) * t_mb + drain + opt_r + imbalance_s + tied + sp_r + off + host_syncs + jitter
                       + loss_sync)
            cross_r, in_group_r, total_r, nvls_r, idle_r = _sync_comm(dp_job, g, comp_r, m, sync, groups,
                                                                      local=local_r, idle=ranks[r].host,
                                                                      traffic=traffic_r)
            opt, sp_grads, local = np.where(on, opt_r, opt), np.where(on, sp_r, sp_grads), np.where(on, local_r, local)
            cross, dp_total, dp_nvls = np.where(on, cross_r, cross), np.where(on, total_r, dp_total), np.where(
                on, nvls_r, dp_nvls)
            idle_hidden = np.where(on, idle_r, idle_hidden)
            if in_group is not None and in_group_r is not None:
                in_group = np.where(on, in_group_r, in_group)
    # data-parallel traffic hidden under compute slows that compute (docs/model.md#contention); what the host wait
    # hid ran while no compute ran (docs/model.md#host-dp-window)
    exposed_dp = cross + (in_group if in_group is not None else 0.0)
    dp_contention = _contention(_dp_share(job, dp_total, dp_nvls), dp_total - exposed_dp - idle_hidden)
    local = local + dp_contention

    kw: dict[str, Any] = {"kappa": job.staleness_kappa if kappa is None else kappa}
    sres = sync_model.sync_step(sync, g.dp.astype(float), local, job.straggler_cv, job.straggler_dist,
                                comm_s=cross, group_comm_s=in_group, **kw)
    step = np.asarray(sres.step_time_s, dtype=float)
    straggler = np.asarray(sres.straggler_s, dtype=float)
    dp_term = step - local - straggler  # the synchronisation's own share under this sync mode

    breakdown = {
        "compute": m * comp["total"], "contention": m * comp["contention"] + dp_contention,
        "tp_comm": m * (mp["tp"] + mp["amax"]) + sp_grads, "cp_comm": m * mp["cp"], "ep_comm": m * mp["ep"],
        "pp_comm": m * mp["pp"], "host": m * host + host_syncs, "offload": off, "bubble": bubble_mb * t_mb + drain,
        "dp_comm": np.maximum(dp_term, 0.0) + loss_sync, "embed_comm": tied,
        "optimizer": opt, "straggler": straggler, "jitter": jitter, "imbalance": imbalance_s,
        "overhead": np.full(np.shape(step), job.step_overhead),  # docs/model.md#overhead
    }
    breakdown = {k: breakdown[k] for k in BREAKDOWN_KEYS}  # the parts table fixes names and order
    step = sum(breakdown.values())  # identical to sres.step_time_s up to rounding; parts add up exactly
    mem = memory_parts(job, g, m, sync=sync)
    fits = mem["total"] <= job.memory_capacity
    reason = np.where((reason == 0) & ~fits, Infeasible.OUT_OF_MEMORY, reason)
    flops = _flops(job, g)
    gpus = g.gpus.astype(float)
    samples = _priced_samples(g, m)
    if np.any(samples != g.global_batch):  # only where dp b does not divide B (infeasible, batch_not_divisible)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(g.global_batch > 0, samples / g.global_batch, 1.0)
        flops = {k: v * ratio for k, v in flops.items()}  # FLOPs are linear in the batch (docs/model.md#flops)
    safe = _rate_denominator(breakdown, step)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = flops["model"] / safe / gpus / 1e12
        mfu = flops["model"] / safe / (gpus * job.peak_flops)
        hfu = flops["hardware"] / safe / (gpus * job.peak_flops)
    shape = np.broadcast_shapes(g.shape, np.shape(step))

    def full(a: Any) -> np.ndarray:  # read-only broadcast views: every result has the grid's shape
        return np.broadcast_to(np.asarray(a), shape)

    return StepArrays(
        step_time=full(step), breakdown={k: full(v) for k, v in breakdown.items()}, feasible=full(reason == 0),
        reason=full(reason), microbatches=full(m), tokens_per_s=full(samples * job.seq_len / safe),
        samples_per_s=full(samples / safe), model_flops=full(flops["model"]),
        hardware_flops=full(flops["hardware"]), tflops_per_gpu=full(tflops), mfu=full(mfu), hfu=full(hfu),
        memory={k: full(v) for k, v in mem.items()}, fits=full(fits),
        statistical_efficiency=full(sres.efficiency), updates_per_s=full(_with_overhead(sres.updates_per_s, step,
                                                                                         job.step_overhead)),
        mean_staleness=full(sres.mean_staleness),
        extras={"dp_comm_total": full(dp_total), "microbatch_time": full(t_mb),
                "bubble_microbatches": full(bubble_mb), "local": full(local), "sync_comm": full(cross),
                "dp_serial": full(loss_sync)},
    )


def _deferred_wgrad_exposed(job: Job, g: StrategyGrid, groups: ParallelGroups, stage: Callable[..., _Stage],
                            m: np.ndarray, last: tuple[Any, Any], other: tuple[Any, Any], first: tuple[Any, Any],
                            runs: tuple[np.ndarray, np.ndarray], classes: Callable[[], _ChunkClasses]
                            ) -> np.ndarray:
    """Seconds a step of the output layer's deferred weight-gradient GEMMs (strategy defer_embedding_wgrad) that the
    pipeline's flush does not hold: max(drain - idle, 0), the drain of n = d m u GEMMs of G seconds (d
    :func:`~scalemodel.engine.layer_compute.deferred_head_share`, u the head passes a micro-batch, G the last stage's
    ``head_gemm``; with sequence parallelism at tp > 1 each input all-gathered over TP first, A = one b s / cp x h
    activation's all-gather: :func:`scalemodel.cost.pipeline.deferred_wgrad_drain`), the idle the last rank's wait
    for the last micro-batch's backward to pass the p - 1 ranks before it (first and middle ranks' backward a
    micro-batch, each middle rank its own: ``runs``, :func:`_balanced_middle_runs` as evaluate computed it for the
    bubble too; a split priced rank by rank, each rank's own layers and kinds: :func:`_segment_rank_stages`;
    interleaved, chunks 0 .. p-2 of virtual stage 0, each its own layers, as the bubble's chain prices them:
    ``classes`` (:func:`_chunk_classes`, the bubble's), :func:`_stage0_chunks`, interidle39;
    :func:`_stage_forward_backward`, :func:`scalemodel.cost.pipeline.deferred_wgrad_idle`); a 1F1B pipeline (rdv41)
    the program's window exactly, from the end of the last rank's last send to the end of rank 0's last backward, on
    the stages its bubble prices (:func:`_class_1f1b_times`, :func:`_segment_1f1b_ranks`,
    :func:`scalemodel.cost.pipeline.one_f_one_b_flush_idle`; docs/model.md#onefb-flush). Megatron-Core
    runs the drain on the last stage after the schedule's last backward (NVIDIA/NeMo b2eccd270d
    megatron_gpt_model.py lines 745-767; NVIDIA/Megatron-LM core_r0.12.0 schedules.py lines 1576, 1978
    ``finish_embedding_wgrad_compute``), before the gradients' finalisation. 0 without the switch or at pp 1."""
    share = deferred_head_share(job, g) if job.is_transformer else np.zeros(1)
    if not np.any(share > 0):
        return np.zeros(1)
    uses = 1.0 + float(job.shape.mtp_layers)
    coll = _mp_collectives(job, g, groups)
    gemm = stage(last[0], True, None, last[1]).compute["head_gemm"]
    sp_ag = np.asarray(g.sequence_parallel, dtype=bool) & ~np.asarray(_no_tp_comm(job, g), dtype=bool)
    ag = np.where(sp_ag, coll.get("tp_ag", 0.0), 0.0)
    drain = pipeline.deferred_wgrad_drain(share * m * uses, gemm, ag)
    _, b_first = _stage_forward_backward(stage(first[0], False, None, first[1], True), end=True, first=True)
    _, b_mid = _stage_forward_backward(stage(other[0], False, None, other[1]))
    n_upper, lower = runs
    n_mid = np.maximum(g.pp - 2.0, 0.0)
    if np.any(n_upper < n_mid):  # the balanced split's middle ranks after the ceil(L/p) ones hold floor(L/p)
        _, b_low = _stage_forward_backward(stage(lower, False))
        with np.errstate(divide="ignore", invalid="ignore"):
            b_mid = np.where(n_upper < n_mid, (n_upper * b_mid + (n_mid - n_upper) * b_low) / n_mid, b_mid)
    # a split priced rank by rank (_rank_layers: a given stage_layers list, a hybrid pattern's ranks, a model whose
    # MLP kind varies by position): rank 0 and each middle rank their own layers and kinds, the stages the bubble
    # prices (_segment_rank_stages). prop38b: a given split's middle ranks all took the most any of them holds;
    # tidy39: a hybrid pattern's (and a kinds split's) ranks took the mean layer's kinds
    seg = _segment_rank_stages(job, g, stage) or []
    for sp, ranks in seg:
        b_first = np.where(sp.on, _stage_forward_backward(ranks[0], end=True, first=True)[1], b_first)
        if sp.p >= 3:
            b_mid = np.where(sp.on, sum(_stage_forward_backward(x)[1] for x in ranks[1:-1]) / (sp.p - 2), b_mid)
    inter = g.schedule == ScheduleKind.INTERLEAVED
    v = np.where(inter, g.virtual_stages, 1)
    idle = pipeline.deferred_wgrad_idle(g.pp, v, b_first, b_mid)
    # rdv41: 1F1B exactly, the last rank's wait from the end of its last send to the end of rank 0's last backward
    # (cost.pipeline.one_f_one_b_flush_idle), on the stages the bubble prices (by class, or a split's ranks)
    onef1b = (g.schedule == ScheduleKind.ONE_F_ONE_B) & (g.pp >= 2) & (share > 0)
    if np.any(onef1b):
        if not _splits_cover(g, _rank_layers(job, g)):
            n_upper, times, c, _ = _class_1f1b_times(job, g, stage, runs)
            # only the candidates that defer: the others' depth set to 1 (no pipeline, no idle)
            exact = pipeline.one_f_one_b_four_class_flush_idle(m, np.where(onef1b, g.pp, 1), n_upper, *times, c)
            idle = np.where(onef1b, exact, idle)
        for sp, fb, c, _ in _segment_1f1b_ranks(job, g, stage):
            f, b, shape = _stacked(fb, m, c)
            exact = pipeline.one_f_one_b_flush_idle(np.broadcast_to(m, shape), f, b, np.broadcast_to(c, shape))
            idle = np.where(sp.on & onef1b, exact, idle)
    if np.any(inter & (g.pp >= 2)):  # interleaved by class: virtual stage 0's first chunk and p - 2 middle ones
        _, (p_first, c_first), (p_mid, c_mid) = classes()
        b_c = [_stage_forward_backward(x._replace(time=c))[1] for x, c in ((p_first, c_first), (p_mid, c_mid))]
        idle = np.where(inter, pipeline.deferred_wgrad_idle(g.pp, 1, *b_c), idle)
    # interidle39: an interleaved split priced rank by rank: the last micro-batch's backward passes chunks p-2 .. 0 of
    # virtual stage 0 (chunk r on rank r), each its own layers (Megatron's interleaved assignment), not 1 / v of its
    # rank's backward (the closed form's equal chunks): each chunk's backward, its bubble-chain time (_stage0_chunks)
    # split as its compute (_stage_forward_backward), summed: deferred_wgrad_idle at v 1
    for sp, _ in seg:
        on = np.asarray(sp.on & inter)
        if sp.piped and sp.v >= 2 and np.any(on):
            pieces, chunks = _stage0_chunks(job, g, stage, sp)
            b_chunk = [_stage_forward_backward(x._replace(time=c))[1] for x, c in zip(pieces, chunks, strict=True)]
            b_mid_chunk = sum(b_chunk[1:], np.zeros(1)) / max(sp.p - 2, 1)
            idle = np.where(on, pipeline.deferred_wgrad_idle(sp.p, 1, b_chunk[0], b_mid_chunk), idle)
    return np.asarray(np.where(share > 0, np.maximum(drain - idle, 0.0), 0.0))


class _Stage(NamedTuple):
    """One pipeline rank's micro-batch as :func:`evaluate` prices it."""

    time: np.ndarray  # seconds: compute, its contention, exposed TP/CP/EP/PP traffic
    compute: dict[str, np.ndarray]  # the compute parts as computed (forward/backward split intact)
    busy: dict[str, np.ndarray]  # the windows cut to the overlap efficiency, free windows, contention
    mp: dict[str, np.ndarray]  # the model-parallel traffic (_model_parallel_comm)
    host: np.ndarray  # seconds the GPU waits on the host's launches (_host_wait), included in ``time``


def _stage(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: np.ndarray, logits: bool,
           coll: dict[str, np.ndarray] | None = None, recomputed: Any = None, embedding: bool = False) -> _Stage:
    """A pipeline rank of ``layers`` layers (with the logits when ``logits``; with the word embedding when
    ``embedding``, pipeline rank 0 or its first model chunk): the one route by which :func:`evaluate` and the pipeline
    formulas price a rank (``coll``: the grid's :func:`_mp_collectives`, priced here when not given; ``recomputed``,
    ``embedding``: :func:`_compute_per_microbatch`'s ``recomputed``, ``embedding_on_stage``)."""
    if coll is None and job.is_transformer:
        coll = _mp_collectives(job, g, groups)
    time, raw, busy, mp = _stage_device(job, g, groups, layers, logits, coll, recomputed, embedding)
    host = _host_wait(job, g, groups, layers, logits, time, coll, recomputed, embedding)
    return _Stage(np.asarray(time + host), raw, busy, mp, host)


def _stage_device(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: np.ndarray, logits: bool,
                  coll: dict[str, np.ndarray] | None, recomputed: Any = None, embedding: bool = False
                  ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(device seconds, raw compute, busy windows, model-parallel traffic) of one micro-batch on a rank of
    ``layers`` layers: :func:`_stage` without the host's wait."""
    raw = _compute_per_microbatch(job, g, layers, logits_on_stage=logits, recomputed=recomputed,
                                  embedding_on_stage=embedding)
    comp = _overlap_windows(raw, job.overlap_efficiency)
    mp = _model_parallel_comm(job, g, comp, coll)
    # the flex dispatcher's default SM count (HybridEP) depends on whether the EP group leaves its NVLink domain
    spans = groups.expert.c[0] < groups.expert.p - 1e-9 if np.any(g.moe_flex_dispatcher) else False
    busy = _with_free_windows(comp, mp, job.collective_share, ep_dispatch_share(job, g, spans),
                              job.collective_share_nvls)
    time = busy["total"] + busy["contention"] + mp["tp"] + mp["cp"] + mp["ep"] + mp["pp"] + mp["amax"]
    return time, raw, busy, mp


def moe_intervals(sh: Any) -> list[tuple[dict[str, int], float]]:
    """The layers between one MoE layer and the next, read cyclically (those after the last MoE layer join those
    before the first), as ({kind: layers between}, how many intervals are like that), one interval per MoE layer:
    a hybrid pattern's own (:attr:`scalemodel.cost.mamba.LayerCounts.moe_intervals`, kinds mamba, attention, mlp),
    else the MoE layers every ``moe_every``-th after ``moe_first_dense`` dense ones
    (:attr:`~scalemodel.cost.transformer.Shape.moe_layers`, at
    1-based positions F + j e, j = 1..n), kind dense: n - 1 intervals of e - 1 dense layers and one of
    L - n e + e - 1 (DeepSeek-V3, L 61, F 3, e 1: 57 of none and one of 3). [] without MoE layers."""
    n = int(float(sh.moe_layers))
    if n == 0:
        return []
    hy = sh.hybrid
    if hy is not None:
        return [({k: c for k, c in zip(("mamba", "attention", "mlp"), between, strict=True) if c}, count)
                for between, count in hy.moe_intervals]
    if sh.rank_kinds:  # one pipeline rank's own layers (_kinds_part_job): its intervals, each x L / n
        scale = float(sh.layers) / len(sh.rank_kinds)
        return [({"dense": gap} if gap else {}, count * scale)
                for gap, count in transformer.kind_intervals(sh.rank_kinds)]
    L, e = int(float(sh.layers)), int(float(sh.moe_every))
    found: dict[int, int] = {}
    for gap, count in ((e - 1, n - 1), (L - n * e + e - 1, 1)):
        if count:
            found[gap] = found.get(gap, 0) + count
    return [({"dense": gap} if gap else {}, count) for gap, count in sorted(found.items())]


def _one_kind_job(job: Job, kind: str) -> Job:
    """``job`` with every layer of one kind (moe, dense; a hybrid's mamba, attention, mlp, moe), the rest of the
    shape as it is: the rank :func:`_host_wait` prices to learn one kind's device time per layer."""
    sh = job.shape
    hy = sh.hybrid
    if hy is not None:
        L = hy.layers
        counts = {k: (L if k == kind else 0) for k in ("mamba", "attention", "mlp", "moe")}
        symbol = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}[kind]
        new = msgspec.structs.replace(hy, last=symbol, moe_intervals=(), segment_layers=(),
                                      layers_as_written="", **counts)
        return msgspec.structs.replace(job, shape=msgspec.structs.replace(sh, hybrid=new))
    if kind == "moe":  # every layer MoE
        return msgspec.structs.replace(job, shape=msgspec.structs.replace(
            sh, moe_every=np.ones_like(sh.moe_every), moe_first_dense=np.zeros_like(sh.moe_first_dense), rank_kinds=""))
    # no MoE layer: the dense prefix covers them all
    return msgspec.structs.replace(job, shape=msgspec.structs.replace(
        sh, moe_first_dense=np.asarray(sh.layers, dtype=float), rank_kinds=""))


#: The share of ``moe_layer_host_s`` (H, the host's issue time of one MoE layer's forward and backward) that a
#: recomputed forward issues again, from the bottom-up count of H's source layer
#: (hardware/measurements/host_overhead.yaml ``moe_layer_bottom_up``: Qwen3-30B-A3B, TP 1, 16 local experts, MXFP8,
#: Megatron-LM 92c8482e6d, TE release_v2.9), at the lower of its two pricings (every call class at its low cost,
#: then at its high cost):
#:   the MoE block's forward (the count's expert path forward, router and preprocess graphed in the source):
#:     low  (2 x 115 + 11 x 8.3 + 66 x 5 + 26 x 0.949 + 192 x 1) / 2713.62 = 867.97 / 2713.62 = 0.3199
#:     high (2 x 140 + 11 x 13.5 + 66 x 10 + 26 x 1.094 + 192 x 1) / 3981.33 = 1308.94 / 3981.33 = 0.3288
#:   the whole layer's forward (attention's 3 modules + 5 ops, + the MoE block's):
#:     low  (386.5 + 867.97) / 2713.62 = 0.4623,   high (487.5 + 1308.94) / 3981.33 = 0.4512
#: The count prices a third to a half of H (docs/model.md#host "Bottom-up check"); its shares, not its total, are
#: carried over to H (the unpriced Python, autograd and allocator time assumed spread like the priced calls).
MOE_FORWARD_HOST_SHARE = 0.3199
LAYER_FORWARD_HOST_SHARE = 0.4512


def moe_host_s(job: Job, g: StrategyGrid) -> np.ndarray:
    """H of one MoE layer (docs/model.md#host, #host-eager-ops): strategy ``moe_layer_host_s`` plus, where it is
    priced (> 0), the host calls that the unfused paths the strategy sets (eager_rope, eager_bias_dropout_add,
    eager_glu_clamp, eager_expert_bias) issue beyond H's source layer
    (:func:`scalemodel.engine.host_floor.eager_ops_host_s`, added, not scaled), at the rank's local experts (routed
    experts / ep, at least 1); the attention block's paths (RoPE, its bias-dropout-add) only where attention runs
    eagerly in the MoE layer: not under ``moe_host_attention_graphed`` (the graph issues them), nor in a hybrid
    pattern's E layer (the MoE block alone, as ``attention`` of the count). Each path only where the model has what
    it acts on, as its device bytes: rotary embeddings, linear biases (the count's ``x + bias``), a gated MLP; the
    expert bias's casts where the probabilities are wider than the activations (moe_router_dtype fp32 / fp64, or the
    flex dispatcher, whose HybridEP and DeepEP carry fp32 probabilities)."""
    H = np.asarray(g.moe_layer_host_s, dtype=float)
    sh = job.shape
    attention = ~np.asarray(g.moe_host_attention_graphed, dtype=bool) & (sh.hybrid is None)
    biased = bool(np.any(sh.biases))
    eager = eager_ops_host_s(np.maximum(float(sh.moe_experts) / g.ep, 1.0), attention,
                             rope=np.asarray(g.eager_rope, dtype=bool) & bool(sh.rope),
                             bias_dropout_add=np.asarray(g.eager_bias_dropout_add, dtype=bool) & biased,
                             glu_clamp=np.asarray(g.eager_glu_clamp, dtype=bool) & bool(sh.gated_mlp),
                             expert_bias=g.eager_expert_bias,
                             wide_probs=(job.router_bytes > job.elem_bytes)
                             | (np.asarray(g.moe_flex_dispatcher, dtype=bool) & (job.elem_bytes < 4.0)))
    return np.asarray(np.where(H > 0, H + eager, H), dtype=float)


def recomputed_host_share(job: Job, g: StrategyGrid, layers: Any, recomputed: Any = None) -> np.ndarray:
    """The host time a rank's recomputed forwards add per MoE layer, as a share of H (docs/model.md#host): a
    recomputed forward re-runs the MoE block's route, preprocess and dropless dispatch, and so its device-to-host
    synchronisation, in the backward. Selective recompute of moe (:func:`moe_block_recomputed`): every MoE block,
    :data:`MOE_FORWARD_HOST_SHARE`; full recompute: the recomputed share of the rank's layers
    (:func:`recomputed_layers` / layers, pro rata as every per-layer term of a rank), each its whole forward,
    :data:`LAYER_FORWARD_HOST_SHARE` (attention's and the MoE block's), or in a hybrid pattern, whose MoE layer holds
    the MoE block alone (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/hybrid/hybrid_layer_specs.py lines
    226-231: MoETransformerLayer with pre_mlp_layernorm, mlp and mlp_bda only), :data:`MOE_FORWARD_HOST_SHARE`; the
    pattern's Mamba, attention and MLP layers re-issue what their first forward issues here, nothing (their host
    time is priced 0, and the bottom-up count has no Mamba part to price it from). Megatron-Core core_v0.15.0
    (0d7e02bd26): moe_layer.py ``MoELayer.forward``
    runs ``custom_forward`` under ``tensor_parallel.checkpoint`` / ``te_checkpoint`` (lines 272-292), whose
    backward runs it again (tensor_parallel/random.py ``CheckpointFunction.backward``, line 463
    ``outputs = ctx.run_function(*detached_inputs)``); the recomputed ``dispatch_preprocess`` recounts the tokens
    per expert from the recomputed routing map (token_dispatcher.py line 583 ``self.preprocess(self.routing_map)``,
    line 471 ``routing_map.sum(dim=0)``), rewriting the split sizes rather than reusing the forward's, and waits on
    their device-to-host copy (line 859 ``self.d2h_event.synchronize()``); full recompute's
    ``_checkpointed_forward`` re-runs MoELayer.forward the same way (transformer_block.py lines 440-456). The same
    at d98e8a64dd, where HybridEP's ``_HybridEPManager.combine`` resets ``num_permuted_tokens`` to None
    (token_dispatcher.py lines 1202-1207), so the recomputed dispatch runs with ``non_blocking`` False
    (fused_a2a.py lines 415-417) and sizes its buffers on the host again."""
    n = np.asarray(layers, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rec = recomputed_layers(g, n) if recomputed is None else np.asarray(recomputed, dtype=float)
        rho = np.where(n > 0, rec / n, 0.0)
    # a hybrid pattern's MoE layer (E) holds the MoE block alone: its recomputed forward re-issues the MoE block's
    # forward share, not an attention + MoE layer's; the interval's other layers (Mamba, attention, MLP) re-issue
    # what their first forward issues in this model, nothing (their host time is priced 0; the count has no Mamba
    # part)
    hybrid = job.is_transformer and job.shape.hybrid is not None
    share = MOE_FORWARD_HOST_SHARE if hybrid else LAYER_FORWARD_HOST_SHARE
    full = np.where(g.recompute == Recompute.FULL, share * rho, 0.0)
    return np.asarray(np.where(moe_block_recomputed(job, g), MOE_FORWARD_HOST_SHARE, full), dtype=float)


def mtp_recomputed_host_share(job: Job, g: StrategyGrid) -> np.ndarray:
    """The host time a multi-token prediction module's recomputed forward adds to its MoE block's H, as a share of
    H (docs/model.md#host-mtp): selective recompute of moe repeats the module's MoE block as every MoE layer's,
    :data:`MOE_FORWARD_HOST_SHARE`; full recompute repeats the whole module whatever the recomputed layer count
    under method uniform (or without a count), and not at all under method block with a count
    (:func:`~scalemodel.engine.layer_compute.mtp_module_recomputed`: NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/multi_token_prediction.py lines 1621-1634, 1705-1706, block "Skipping recompute"),
    its block's forward share, :data:`LAYER_FORWARD_HOST_SHARE` (attention's and the MoE block's),
    :data:`MOE_FORWARD_HOST_SHARE` in a hybrid pattern: :func:`recomputed_host_share` of one layer, recomputed or
    not; else 0."""
    return recomputed_host_share(job, g, 1.0, np.where(mtp_module_recomputed(g), 1.0, 0.0))


def mtp_host_wait(job: Job, g: StrategyGrid, groups: ParallelGroups, logits: bool, base: np.ndarray,
                  coll: dict[str, np.ndarray] | None, short: np.ndarray) -> np.ndarray:
    """Seconds per micro-batch the last rank's GPU waits for the host at the MoE blocks of its D multi-token
    prediction passes (docs/model.md#host-mtp). Megatron-Core builds an MTP module's block from the decoder's last
    layer spec (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/gpt_layer_specs.py lines 767-769, "get the
    spec for the last layer of decoder block"), so where that layer is an MoE layer the block's MoELayer runs the
    same dropless token dispatcher and waits on the host at the same point as the decoder's
    (token_dispatcher.py ``_maybe_dtoh_and_synchronize``, docs/model.md#host): each pass is one more interval
    from a synchronisation to the next, on the rank that holds the modules (the one with the logits). Its device
    time is what follows the block's synchronisation up to the next one: the D passes and the output heads with
    their losses, ``base`` (the rank without layers, logits on) less the same rank without the logits, split
    evenly over the D passes (the lower end of the D waits, max being convex):

        D_mtp = (time_0(logits) - time_0(no logits)) / D
        wait  = D max(H (1 + r_mtp) - D_mtp, short, 0)

    r_mtp (:func:`mtp_recomputed_host_share`) the module's recomputed forward, ``short`` the decoder MoE layer's
    expert-path shortfall (:func:`expert_issue_shortfall`; the block's expert path is the same layer's). 0 where the
    rank has no logits, the module's block is not MoE, or H = 0."""
    sh = job.shape
    D = float(sh.mtp_layers)
    if not logits or D <= 0 or float(sh.mtp_moe_layers) <= 0:
        return np.zeros(1)
    H = moe_host_s(job, g)
    zero = np.zeros_like(np.asarray(base, dtype=float))
    tail = (base - _stage_device(job, g, groups, zero, False, coll)[0]) / D
    host = H * (1.0 + mtp_recomputed_host_share(job, g))
    return np.asarray(np.where(H > 0, D * np.maximum(np.maximum(host - tail, short), 0.0), 0.0), dtype=float)


def expert_issue_shortfall(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: np.ndarray, logits: bool,
                           coll: dict[str, np.ndarray] | None, recomputed: Any, H: np.ndarray, d_moe: np.ndarray,
                           scale: Any = 1.0) -> np.ndarray:
    """Seconds per MoE layer by which the host's issue of the expert path's forward, after the dispatcher's host
    synchronisation, exceeds the device work it can run meanwhile (docs/model.md#host-issue-order):

        short = t_rt + max(s_A H - d_A, h_1)       0 with the EP all-to-all overlap (combined 1F1B)
        d_A   = d_moe - scale (t_bwd + t_attn + (t_ep + t_tp) / 2)

    t_rt, h_1 the synchronisation's round trip and the first launch after it where nothing is queued behind the
    read (:func:`scalemodel.engine.host_floor.sync_refill_us`: HybridEP 6 + 5 us, DeepEP 0 + 5 us, allgather
    6 + 8.3 us; the all-to-all 0, 0, its first permutation running through both): the queue refill's terms at k = 1
    and k = the expert path's end, :func:`scalemodel.engine.host_floor.refill_exposed` (docs/model.md#host-refill).

    The synchronisation (``d2h_event.synchronize()`` before the EP all-to-all, the event recorded after the
    token counts' copy at the preprocess; HybridEP's and DeepEP's host-side token counts) returns once the device
    has run everything issued before that copy, so the queue is (all but) empty; the device
    can then run only what the host issues after it, the expert path first (dispatch, experts, combine: host share
    s_A of H, :func:`scalemodel.engine.host_floor.expert_forward_host_share`, 0.3199 with attention in the count,
    0.4354 for a hybrid pattern's E layer), and every later kernel of the interval waits for that issue: the
    interval takes at least s_A H + (D_i - d_A), the two-stage chain's bound max_j (sum_{i<=j} h_i +
    sum_{i>=j} d_i) at j = the expert path's last kernel. d_A bounds the device work up to that kernel from above:
    the MoE layer's device time d_moe (``job`` a rank of MoE layers) less what runs surely after it, the layer's
    backward and recompute (t_bwd), its attention block's forward GEMMs and core (t_attn, issued before the
    synchronisation) and half its exposed EP and TP traffic (t_ep, t_tp: the backward's), per layer and scaled as
    d_moe is (``scale``). With the all-to-all overlap the other micro-batch's expert backward is queued before the
    synchronisation and after the copy, on the computation stream (Megatron-Core model_chunk_schedule_plan.py
    ``TransformerLayerSchedulePlan.run``), so the queue is not empty there: 0 (the unpaired forwards of the
    combined 1F1B and a recomputed forward's second synchronisation are left out: the lower end)."""
    n = np.asarray(layers, dtype=float)
    zero = np.zeros_like(n)
    _, r_n, _, mp_n = _stage_device(job, g, groups, n, logits, coll, recomputed)
    _, r_0, _, mp_0 = _stage_device(job, g, groups, zero, logits, coll)
    after = (r_n["backward"] - r_0["backward"] + r_n["attention_forward"] - r_0["attention_forward"]
             + 0.5 * (mp_n["ep"] - mp_0["ep"] + mp_n["tp"] - mp_0["tp"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        d_a = np.maximum(d_moe - np.where(n > 0, after / n, 0.0) * scale, 0.0)
    share = expert_forward_host_share(attention=job.shape.hybrid is None)
    ordered = ~np.asarray(g.moe_a2a_overlap, dtype=bool)
    # the refill at the synchronisation (docs/model.md#host-refill): its round trip and the first launch after it
    # where nothing was queued behind the read (HybridEP, DeepEP, allgather; 0 for the all-to-all)
    trip, first = sync_refill_us(g.moe_flex_dispatcher, g.moe_flex_backend, g.moe_allgather_dispatcher)
    refill = 1e-6 * trip + np.maximum(share * H - d_a, 1e-6 * first)
    return np.asarray(np.where(ordered, np.maximum(refill, 0.0), 0.0), dtype=float)


def _host_wait(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: np.ndarray, logits: bool,
               time: np.ndarray, coll: dict[str, np.ndarray] | None, recomputed: Any = None,
               embedding: bool = False) -> np.ndarray:
    """Seconds per micro-batch the GPU waits for the host when every MoE layer synchronises the host
    (docs/model.md#host): strategy ``moe_layer_host_s`` = H, the host's time to issue one MoE layer's forward and
    backward. A synchronisation drains the host's run-ahead, so the interval from one MoE layer's synchronisation to
    the next (the MoE layer and the layers up to the next MoE layer, :func:`moe_intervals`) takes max(D_i, H): the
    host issues H in it (the other layers' host time priced 0, as a dense layer's), the device D_i, the MoE layer's
    device time and the layers' between it and the next; and at least D_i + short, ``short``
    (:func:`expert_issue_shortfall`) the expert path's host issue after the synchronisation beyond the device work
    it can run meanwhile:

        D_i  = d_moe + sum_k c_ik d_k           c_ik layers of kind k in interval i
        d_k  = (T_k(L_s) - T_k(0)) / L_s x (time - time_0) / sum_k' n_k' (T_k'(L_s) - T_k'(0)) / L
        wait = (L_s / L) sum_i max(H - D_i, short, 0)

    T_k the same rank with every layer of kind k (:func:`_one_kind_job`), n_k the model's layers of kind k, time_0
    the rank without layers (logits, pipeline sends): each kind's own device time per layer, scaled so that the
    intervals add up to the rank's device time (time - time_0), so that a host that binds in every interval gives
    time_0 + L_s (moe_layers / L) H. Every layer an MoE layer (Qwen3, Mixtral, GPT-OSS): one interval per layer,
    d_moe = (time - time_0) / L_s, wait = L_s max(H - d_moe, 0). Zero when H = 0.

    A recomputed forward (selective recompute of moe; full recompute) synchronises again in the backward, and its
    host work joins the interval of its MoE layer: H becomes H (1 + r), r = :func:`recomputed_host_share`, against
    the same D_i, which already holds the recomputed forward's device time (the layer's recompute pass is in its
    backward compute). H is one unit of forward and backward with no split, so the backward's intervals are priced
    with the forward's, as before: a separate backward interval max(r H - D_i,bwd, 0) would let the backward's
    device time hide H's backward share (inside max(D_i, H)) and the recomputed forward's host time both."""
    if not job.is_transformer or job.shape.moe_layers == 0 or not np.any(g.moe_layer_host_s > 0):
        return np.zeros(1)
    H = moe_host_s(job, g)
    n = np.asarray(layers, dtype=float)
    if not np.any(n > 0):
        return np.zeros(1)
    sh = job.shape
    L = float(sh.layers)
    intervals = moe_intervals(sh)
    # no layers: no MoE, no wait (rank 0's embedding gradient, as in ``time``)
    base = _stage_device(job, g, groups, np.zeros_like(n), logits, coll, None, embedding)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        d_mean = np.where(n > 0, (time - base) / n, 0.0)  # the rank's device time per layer
    kinds = sorted({k for between, _ in intervals for k in between})
    if not kinds:  # every layer an MoE layer
        d = {"moe": d_mean}
    else:
        d = {}
        for kind in ["moe", *kinds]:
            one = _one_kind_job(job, kind)
            t_n = _stage_device(one, g, groups, n, logits, coll, recomputed)[0]
            t_0 = _stage_device(one, g, groups, np.zeros_like(n), logits, coll)[0]
            with np.errstate(divide="ignore", invalid="ignore"):
                d[kind] = np.where(n > 0, (t_n - t_0) / n, 0.0)
        count = {"moe": float(sh.moe_layers), "dense": float(sh.dense_layers)}
        if sh.hybrid is not None:
            count.update(mamba=float(sh.hybrid.mamba), attention=float(sh.hybrid.attention),
                         mlp=float(sh.hybrid.mlp))
        mixed = sum((count[k] / L * d[k] for k in d), np.zeros(1))
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(mixed > 0, d_mean / mixed, 1.0)
        d = {k: v * scale for k, v in d.items()}
    host = H * (1.0 + recomputed_host_share(job, g, n, recomputed))  # the interval's host work, recomputed forwards
    # the expert path issued after the synchronisation on a drained queue: its host time not hidden by its own
    short = expert_issue_shortfall(_one_kind_job(job, "moe") if kinds else job, g, groups, n, logits, coll,
                                   recomputed, H, d["moe"], scale if kinds else 1.0)
    wait = sum((count_i / L * np.maximum(np.maximum(
        host - d["moe"] - sum((c * d[k] for k, c in between.items()), np.zeros(1)), short), 0.0)
                for between, count_i in intervals), np.zeros(1))
    # the MTP modules' MoE blocks on the rank with the logits: one interval each (the shortfall where the rank has
    # MoE layers to price it from, else 0: the lower end)
    mtp = mtp_host_wait(job, g, groups, logits, base, coll, np.where(n > 0, short, 0.0))
    return np.asarray(np.where(H > 0, n * wait + mtp, 0.0))


def _stage_time(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: np.ndarray, logits: bool) -> np.ndarray:
    """One micro-batch's seconds on a pipeline rank of ``layers`` layers (with the logits when ``logits``):
    compute, its contention, and the exposed TP/CP/EP/PP traffic, as :func:`evaluate` prices a stage."""
    return _stage(job, g, groups, layers, logits).time


#: The grid fields only the data-parallel sync reads (dp_comm, :func:`_feasibility`, :func:`_imbalance`,
#: :func:`with_sync`): the planner's communication choices. A pipeline rank's stage (:func:`_stage`: compute, the
#: model-parallel collectives, the host's wait) reads none of them, so grids that differ only in these share their
#: stages within :func:`shared_stages` (tests/test_pass2cut39.py checks that against a fresh evaluate).
SYNC_FIELDS = frozenset({"algorithm", "compression", "topk_ratio", "ps_servers", "ps_colocated", "overlap",
                         "bucket_bytes", "dynamic_assignment"})

#: :func:`_stage_memo`'s stage functions while :func:`shared_stages` is open: {"active": {key: (job, stage)}}, the key
#: the job's id and every field of the grid but :data:`SYNC_FIELDS` (shape, dtype, bytes)
_STAGE_MEMO: dict[str, dict[tuple[Any, ...], tuple[Job, Callable[..., _Stage]]]] = {}


@contextmanager
def shared_stages() -> Iterator[None]:
    """Within this block, :func:`evaluate` calls on grids equal but for :data:`SYNC_FIELDS` (the planner's pass 2:
    one batch of outer candidates on its all-reduce and its parameter-server choices) price their pipeline ranks'
    stages and per-layer collectives once (:func:`_stage_memo`), each call its own data-parallel sync; outside it
    every call prices its own, as predict's one call does. The grids' shapes must broadcast alike on the fields kept
    (the planner gives both blocks the same number of axes)."""
    if _STAGE_MEMO.get("active") is not None:
        yield
        return
    _STAGE_MEMO["active"] = {}
    try:
        yield
    finally:
        _STAGE_MEMO.pop("active", None)


def _layout_key(job: Job, g: StrategyGrid) -> tuple[Any, ...] | None:
    """:data:`_STAGE_MEMO`'s key of (job, g): None (not shared) where a field is not a plain numeric array."""
    key: list[Any] = [id(job)]
    for name in g.__struct_fields__:
        if name in SYNC_FIELDS:
            continue
        a = getattr(g, name)
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
            return None
        key.append((name, a.shape, a.dtype.str, a.tobytes()))
    return tuple(key)


def _stage_memo(job: Job, g: StrategyGrid, groups: ParallelGroups) -> Callable[..., _Stage]:
    """:func:`_stage` remembered per distinct (layers, logits, part), with the per-layer collectives priced once:
    evaluate and the pipeline formulas ask for ranks and chunks that are often the same size (a balanced
    split), and each costs a compute and traffic pass. ``part``: a hybrid pattern's rank or segment priced on its
    own kinds (:func:`_part_job`; the per-layer collectives depend on the widths alone, not on the kinds), else
    ``job``. ``blocking_p2p``: the stage with every pipeline send/recv exposed, ``overlap_p2p_comm`` off (the
    collectives do not depend on it): the interleaved bubble's chunks, whose warm-up and cool-down exchanges no
    compute hides (:func:`_chunk_time`). Within :func:`shared_stages` one per grid but its :data:`SYNC_FIELDS`."""
    shared = _STAGE_MEMO.get("active")
    layout = None if shared is None else _layout_key(job, g)
    if shared is not None and layout is not None and layout in shared:
        return shared[layout][1]
    seen: dict[tuple[Any, ...], _Stage] = {}
    held: dict[int, Job] = {}
    coll = _mp_collectives(job, g, groups) if job.is_transformer else None
    grids: dict[bool, StrategyGrid] = {False: g}

    def stage(layers: np.ndarray, logits: bool, part: Job | None = None, recomputed: Any = None,
              embedding: bool = False, blocking_p2p: bool = False) -> _Stage:
        a = np.asarray(layers, dtype=float)
        who = job if part is None else part
        rec = None if recomputed is None else np.asarray(recomputed, dtype=float)
        blocking = blocking_p2p and bool(np.any(g.overlap_p2p_comm))
        key = (a.shape, a.tobytes(), logits, id(who), None if rec is None else (rec.shape, rec.tobytes()), embedding,
               blocking)
        if key not in seen:
            if blocking not in grids:
                grids[blocking] = msgspec.structs.replace(g, overlap_p2p_comm=np.zeros_like(g.overlap_p2p_comm))
            seen[key] = _stage(who, grids[blocking], groups, a, logits, coll, rec, embedding)
            held[id(who)] = who  # its id stays its own while remembered
        return seen[key]
    if shared is not None and layout is not None:
        shared[layout] = (job, stage)  # the job held: its id stays its own while remembered
    return stage


def _chunk_time(stage: Callable[..., _Stage], layers: np.ndarray, v: Any, part: Job | None = None,
                recomputed: Any = None, embedding: bool = False, rank_hidden: Any = 0.0) -> np.ndarray:
    """One model chunk of an interleaved pipeline in the bubble's chain, forward + backward of one micro-batch: its
    ``layers`` priced as a stage with every pipeline exchange exposed (``blocking_p2p``), less the empty stage's 2 v
    send/recvs (and the other per-chunk costs an empty stage carries), plus 1 / v of them, less 1 / v of
    ``rank_hidden``, what ``overlap_p2p_comm`` takes off one micro-batch of the rank holding the chunk
    (:func:`_rank_hidden`):

        chunk = T_blocking(n layers) - T(0) + (T(0) - hidden_rank) / v

    With equal chunks and stage times linear in the layers this is the rank's own micro-batch time over v, so the
    bubble stays (p - 1)/v of t_mb, the rate model_parallel_comm.pp_overlap spreads its 2 (p v - 1) exposed
    transfers at (its steady count over m + (p - 1)/v micro-batch times; the schedule simulation of
    tests/test_pp_overlap.py). Before vpp35 the chunk was its layers' stage with the steady phase's hiding applied
    at that stage's own size (``min(p2p, forward / v)`` of n layers, not of the rank's n v) less the empty stage's
    unhidden exchanges: short by up to 2 p2p a chunk less the rank's share, most with few layers a chunk (MLPerf v4.0
    GPT-3 175B at pp 8 x v 12, one layer a chunk: a middle chunk 6.2 ms, now 12.0 ms = its rank's 143.4 ms / 12)."""
    pp_only = stage(np.zeros_like(np.asarray(layers, dtype=float)), False, part, blocking_p2p=True).time
    piece = stage(layers, False, part, recomputed, embedding, blocking_p2p=True)
    return np.asarray(piece.time - pp_only + (pp_only - rank_hidden) / v)


def _rank_hidden(stage: Callable[..., _Stage], layers: Any, logits: bool, part: Job | None = None,
                 recomputed: Any = None, embedding: bool = False) -> np.ndarray:
    """Seconds ``overlap_p2p_comm`` takes off one micro-batch of a pipeline rank (its hidden steady-phase exchanges
    and the contention they bring, model_parallel_comm.pp_overlap): the rank priced with every exchange exposed less
    the rank as priced; 0 where the overlap is off."""
    a = np.asarray(layers, dtype=float)
    return np.asarray(stage(a, logits, part, recomputed, embedding, blocking_p2p=True).time
                      - stage(a, logits, part, recomputed, embedding).time)


def _chunked_bubble(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], m: np.ndarray,
                    t_mb: np.ndarray, bubble_mb: np.ndarray, classes: Callable[[], _ChunkClasses]) -> np.ndarray:
    """Bubble (in micro-batch times of the busiest rank) of an interleaved pipeline, its first and/or last
    model chunk equal to the others or not: :func:`scalemodel.cost.pipeline.interleaved_uneven_time` on the
    ranks' and chunks' own times (the last rank's with the logits), minus the m t_mb the busiest rank computes.
    Each chunk's time carries its two pipeline send/recvs (one forward, one backward). With equal chunks and
    no logits this is (p-1)/V; the logits on the last rank, which the chunks before it never wait for, shrink
    it relative to t_mb. A hybrid pattern's ``|`` segments: every rank and every chunk of virtual stage 0 on its own
    kinds (:func:`_segment_pipeline_total`, :func:`scalemodel.cost.pipeline.interleaved_rank_time`), each middle
    rank with its own wait. Other candidates keep ``bubble_mb``."""
    # even chunks too: one route for every interleaved pipeline (one stage has no pipeline and no bubble)
    chunked = (g.schedule == ScheduleKind.INTERLEAVED) & (g.pp > 1)
    if not job.is_transformer or not np.any(chunked):
        return bubble_mb
    splits = _rank_layers(job, g)
    if _splits_cover(g, splits) and all(sp.piped for sp in splits or ()):
        # every candidate a '|' split's (or a given stage_layers split's), whose ranks' and chunks' own times replace
        # the chunk classes' below
        total = np.zeros(1)
    else:
        total = _chunk_class_total(job, g, m, classes())
    for on, seg_total in _segment_pipeline_total(job, g, stage, m, interleaved=True):
        total = np.where(on, seg_total, total)  # '|' segments: every rank and chunk its own kinds
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(t_mb > 0, (total - m * t_mb) / t_mb, 0.0)
    return np.asarray(np.where(chunked, np.maximum(own, 0.0), bubble_mb))


def _chunk_class_total(job: Job, g: StrategyGrid, m: np.ndarray, classes: _ChunkClasses) -> np.ndarray:
    """:func:`_chunked_bubble`'s interleaved step of rank 0, the middle ranks and the last (first, middle and last
    model chunks: :func:`scalemodel.cost.pipeline.interleaved_uneven_time`).

    A first chunk of no layers (first_chunk_layers 0: the word embedding alone, Megatron's account-for-embedding split
    at one slot a chunk) leaves rank 0's first layer on chunk p (virtual stage 1), behind micro-batch 0's forward
    through chunks 0 .. p-1 and its last layer before their backward: rank 0's bound is m W_0 + c_first + (p-1) c_mid,
    :func:`scalemodel.cost.pipeline.interleaved_rank_wait_time`'s wait, the one a stage_layers split of the same
    chunks gets (:func:`_empty_chunk_waits`). prop39: it was m W_0, and at m = p (pp 2, V 2, chunks [0, 14, 14, 4])
    the step fell 14 % below the step-by-step simulation of Megatron's schedule (tests/test_interleaved_chunks.py's)."""
    (w_first, w_mid, w_last), (_, first_c), (_, mid_c) = classes
    total = pipeline.interleaved_uneven_time(m, g.pp, w_first, w_mid, w_last, first_c, mid_c)
    empty_first = (_chunk_layers(job, g)[0] == 0) & (g.pp >= 2)
    behind = m * w_first + first_c + (g.pp - 1.0) * mid_c
    return np.asarray(np.where(empty_first, np.maximum(total, behind), total))


_ChunkClasses = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[_Stage, np.ndarray], tuple[_Stage, np.ndarray]]


def _chunk_classes(job: Job, g: StrategyGrid, stage: Callable[..., _Stage]) -> _ChunkClasses:
    """An interleaved pipeline priced by class (:func:`_chunk_layers`: the first, middle and last model chunks):
    ((rank 0's, a middle rank's, the last rank's micro-batch seconds), (the first chunk's layers as a stage with every
    exchange exposed, its seconds in the bubble's chain: :func:`_chunk_time`), the same of a middle chunk). Read by
    :func:`_chunk_class_total` and the deferred-wgrad flush idle (:func:`_deferred_wgrad_exposed`)."""
    first, mid, last = _chunk_layers(job, g)
    v = np.maximum(g.virtual_stages, 1).astype(float)
    r_first, r_mid, r_last = first + (v - 1.0) * mid, v * mid, (v - 1.0) * mid + last
    rec_first, rec_mid, rec_last = None, None, None
    ranks = _chunk_ranks_recomputed(job, g)
    if ranks is not None:  # given first / last chunks: each rank's own chunks' recomputed layers
        c = _chunked(g) & (g.pp >= 2)
        rec_first, rec_mid, rec_last = (np.asarray(np.where(c, x, recomputed_layers(g, n)))
                                        for x, n in zip(ranks, (r_first, r_mid, r_last), strict=True))
    w_first = stage(r_first, False, None, rec_first, embedding=True).time  # rank 0: the word embedding's gradient
    w_mid = stage(r_mid, False, None, rec_mid).time
    w_last = stage(r_last, True, None, rec_last).time

    def chunk(n: np.ndarray, hidden: np.ndarray, embedding: bool = False) -> tuple[_Stage, np.ndarray]:
        # one model chunk: its own first N layers recomputed (_block_recomputed); rank 0's first with the embedding
        rec = _block_recomputed(g, [n])
        return (stage(n, False, None, rec, embedding, blocking_p2p=True),
                _chunk_time(stage, n, v, None, rec, embedding, hidden))

    first_c = chunk(first, _rank_hidden(stage, r_first, False, None, rec_first, True), True)
    mid_c = chunk(mid, _rank_hidden(stage, r_mid, False, None, rec_mid))
    return (w_first, w_mid, w_last), first_c, mid_c


def feasibility(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """The infeasibility codes :func:`evaluate` gives under ``sync`` before it checks memory (0: feasible so far)."""
    return _feasibility(job, g, microbatches(g).astype(np.int64), sync)


def compute_floor(job: Job, g: StrategyGrid) -> np.ndarray:
    """A lower bound on the pipelined part of :func:`evaluate`'s step from compute alone (t_mb without the
    communication and contention it adds). Any schedule runs the busiest stage's m micro-batches, m t_max;
    and the last stage can start only after micro-batch 0's forward through the stages before it and ends
    only before the last backward through them, so a pipeline also takes m t_last + the one-micro-batch
    compute of the layers before the last stage (the 1F1B/GPipe critical path through the last rank;
    interleaved and zero-bubble schedules, which fill that path with other work, are bounded by m t_max
    alone). GPipe and ZB-H1, whose bubble evaluate takes as fixed (p - 1 and (p - 1)/3 micro-batches of
    t_mb >= t_max), are also bounded by (m + bubble) t_max. Without a pipeline all are m t. A hybrid pattern's
    ranks of their own kinds (:func:`_rank_layers`): t_max and t_last the ranks' own compute (:func:`_part_job`, at
    their layers), the layers before the last rank the sum of the ranks 0 .. p-2's own. Its stages share one layer's
    pricing (:func:`shared_layer_pieces`)."""
    with shared_layer_pieces():
        return _compute_floor(job, g)


def _compute_floor(job: Job, g: StrategyGrid) -> np.ndarray:
    """:func:`compute_floor`, inside its shared layer pricing."""
    split = _split_rows(job, g)
    if split is not None:
        return _join_rows([(x.rows, compute_floor(job, x.grid)) for x in split], g.shape[0], len(g.shape))
    m = microbatches(g)
    last, other, _first = _stage_layers(job, g)
    rec_last, rec_other, _rec_first = _stage_recomputed(job, g, last, other, _first)
    splits = _rank_layers(job, g)
    if _splits_cover(g, splits):
        # every candidate is a split's, whose ranks' own compute replaces the mean layer's stages below: those are
        # not priced (their shape kept, so that the floor's is as it was)
        t_last = t_max = before = np.zeros(np.broadcast_shapes(*(np.shape(x) for x in (
            last, other, rec_last, rec_other) if x is not None)))
    else:
        t_last = _compute_per_microbatch(job, g, last, recomputed=rec_last)["total"]
        if not job.is_transformer:
            return np.asarray((m + pipeline.bubble_microbatches(g.pp, g.schedule, g.virtual_stages)) * t_last)
        # the busiest rank's compute: the last, a middle one (pp > 2) or rank 0 (its layers and the embedding)
        t_mid = _compute_per_microbatch(job, g, other, logits_on_stage=False, recomputed=rec_other)["total"]
        t_first = _compute_per_microbatch(job, g, _first, logits_on_stage=False, recomputed=_rec_first,
                                          embedding_on_stage=True)["total"]
        t_max = np.maximum(t_last, np.where(g.pp > 2, np.maximum(t_mid, t_first), np.where(g.pp > 1, t_first, 0.0)))
        before = _compute_per_microbatch(job, g, np.maximum(float(job.shape.layers) - last, 0.0),
                                         logits_on_stage=False, embedding_on_stage=True)["total"]  # rank 0's too
    seen: dict[tuple[int, int, bool, bool, bytes | None], np.ndarray] = {}
    for sp in splits or ():
        # a hybrid pattern's ranks of their own kinds (_rank_layers): each rank's own compute (_part_job), as evaluate
        # prices its stage; the ranks before the last one by one (each stage's forward + backward is at least its
        # compute: the 1F1B path through the last rank, F_<k + m W_k + B_<k, pipeline.one_f_one_b_time)
        own = []
        for r, s in enumerate(sp.ranks):
            part, last_r = _part_job(job, s), r == sp.p - 1
            rec = _split_rank_recomputed(g, sp, r)
            key = (id(part), len(s), last_r, r == 0, None if rec is None else rec.tobytes())  # one pricing each
            if key not in seen:
                seen[key] = _compute_per_microbatch(part, g, np.full(1, float(len(s))), logits_on_stage=last_r,
                                                    recomputed=rec, embedding_on_stage=r == 0)["total"]
            own.append(seen[key])
        t_max = np.where(sp.on, np.maximum.reduce(own), t_max)
        t_last = np.where(sp.on, own[-1], t_last)
        before = np.where(sp.on, sum(own[:-1], np.zeros(1)), before)
    plain = (g.pp > 1) & ((g.schedule == ScheduleKind.ONE_F_ONE_B) | (g.schedule == ScheduleKind.GPIPE))
    floor = np.where(plain, np.maximum(m * t_max, m * t_last + before), m * t_max)
    # GPipe and ZB-H1 keep evaluate's fixed bubble, p - 1 and (p - 1)/3 micro-batches of t_mb >= t_max
    fixed = (g.pp > 1) & ((g.schedule == ScheduleKind.GPIPE) | (g.schedule == ScheduleKind.ZERO_BUBBLE))
    bubble = pipeline.bubble_microbatches(g.pp, g.schedule, g.virtual_stages)
    return np.asarray(np.where(fixed, np.maximum(floor, (m + bubble) * t_max), floor))


def dp_exposed_floor(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """Seconds of data-parallel traffic a step exposes whatever its communication choice (algorithm,
    compression, bucket, overlap, assignment): with ZeRO-3, FSDP or HSDP, the gathers of
    :func:`~scalemodel.engine.dp_comm._sharded_parameter_traffic` that no compute hides, per micro-batch

        AG + (L-1) max(0, AG - f') + (L-1) max(0, AG - b')

    with f', b' one unit's forward and backward compute (>= the free windows f, b; RS >= 0 dropped), and
    without the last term when ``fsdp_reshard_after_forward`` is false (the backward gathers nothing). With a
    PyTorch FSDP root unit (:func:`fsdp_root_params`, R parameters) AG is the blocks' (dense - R) and its gather
    AG_r (2 R bytes, exposed before the first block) is added; its reduce-scatter RS_r >= 0 is dropped.
    With ``fsdp_defer_grad_sync`` (m > 1) the forward terms and AG_r count once a step, the backward term every
    micro-batch (docs/model.md#fsdp-deferred-sync).
    AG moves 16-bit parameters (float8 linear weights with ``fsdp_fp8_all_gather``, :func:`_gathered_bytes`)
    on NCCL's own algorithm, so no communication choice changes it, and the un-overlapped (2L-1) AG + L RS
    (L AG + L RS) is larger; 0 for ZeRO 0-2. Over the whole data-parallel group (or
    HSDP's sharding group), or for hier:G over the G replicas of a group, which the states are sharded over
    (:func:`hier_group`; HSDP's shard group is then the group too) and whose traffic :func:`_sync_comm`
    exposes inside the group. The planner bounds with it; it
    prices the same stage and groups as :func:`evaluate` (tests/test_step.py checks it stays below): a hybrid
    pattern's ranks of their own kinds, the rank :func:`_dp_ranks` takes, on its own parameters
    (:func:`_rank_dp_job`) and compute (tests/test_hybrid_rank_dp.py)."""
    split = _split_rows(job, g)
    if split is not None:
        return _join_rows([(x.rows, dp_exposed_floor(job, x.grid, sync)) for x in split], g.shape[0], len(g.shape))
    zero3 = g.zero >= Zero.PARAMETERS
    if not np.any(zero3):
        return np.zeros(1)
    m = microbatches(g)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    splits = _rank_layers(job, g)
    if _splits_cover(g, splits):  # every candidate a split's rank's (_dp_ranks), below: the mean stage not priced
        out = np.zeros(1)
    else:
        out = _mean_gather_floor(job, g, sync, groups, m, zero3)
    for on, sp, r in _dp_ranks(job, g, splits):
        # a hybrid pattern's ranks: the rank whose sync evaluate prices (_dp_ranks), its own parameters and compute
        s, n = sp.ranks[r], np.full(1, float(len(sp.ranks[r])))
        dp_job = _rank_dp_job(job, s)
        dense_r, expert_r = _stage_params_per_gpu(dp_job, g, n, np.full(1, float(r)))
        comp_r = _compute_per_microbatch(_part_job(job, s), g, n, logits_on_stage=r == sp.p - 1,
                                         recomputed=_split_rank_recomputed(g, sp, r), embedding_on_stage=r == 0)
        out = np.where(on, _gather_floor(dp_job, g, sync, groups, m, zero3, dense_r, expert_r, comp_r["forward"],
                                         comp_r["backward"], np.maximum(n, 1.0)), out)
    return np.asarray(out)


def _mean_gather_floor(job: Job, g: StrategyGrid, sync: str, groups: ParallelGroups, m: np.ndarray,
                       zero3: np.ndarray) -> np.ndarray:
    """:func:`dp_exposed_floor` of evaluate's comp_dp by class (the stage of the most parameters, :func:`_dp_rank`)."""
    dense, expert = _params_per_gpu(job, g)
    last, other, first = _stage_layers(job, g)
    rec_last, rec_other, rec_first = _stage_recomputed(job, g, last, other, first)
    comp = _compute_per_microbatch(job, g, last, recomputed=rec_last)
    fwd, bwd = comp["forward"], comp["backward"]
    dp_rank = _dp_rank(job, g, last, other, first)
    if dp_rank is not None:
        # evaluate's comp_dp: the rank holding the most parameters (_dp_rank), its own parameters and compute
        stage, r_dp = dp_rank
        dense, expert = _rank_params_per_gpu(job, g, stage, r_dp)
        for layers_c, rec_c, on_c, emb in ((other, rec_other, (r_dp == 1) & (g.pp > 2), False),
                                           (first, rec_first, (r_dp == 0) & (g.pp > 1), True)):
            if np.any(on_c):
                comp_c = _compute_per_microbatch(job, g, layers_c, logits_on_stage=False, recomputed=rec_c,
                                                 embedding_on_stage=emb)
                fwd, bwd = np.where(on_c, comp_c["forward"], fwd), np.where(on_c, comp_c["backward"], bwd)
    else:
        stage = np.ones(1)
    return np.asarray(_gather_floor(job, g, sync, groups, m, zero3, dense, expert, fwd, bwd, np.maximum(stage, 1.0)))


def _gather_floor(job: Job, g: StrategyGrid, sync: str, groups: ParallelGroups, m: np.ndarray, zero3: np.ndarray,
                  dense: Any, expert: Any, fwd: Any, bwd: Any, layers: Any) -> np.ndarray:
    """:func:`dp_exposed_floor` of a stage of ``layers`` units holding ``dense`` and ``expert`` parameters per GPU,
    its forward and backward compute ``fwd``, ``bwd`` per micro-batch."""
    pieces = np.where(g.zero == Zero.PARAMETERS, DEEPSPEED_GATHERS_PER_LAYER, 1.0)
    root = np.minimum(fsdp_root_params(job, g), dense)  # pp == 1 only: the stage is the whole model
    blocks = dense - root

    def first_gather(group: DataParallelGroups) -> tuple[np.ndarray, np.ndarray]:
        """(one unit's AG, the root unit's AG_r)."""
        group = group.sharding  # the ranks that shard the states (_sharded_parameter_traffic)
        ag = pieces * _collective("allgather", _gathered_bytes(job, g, blocks, layers) / layers / pieces, group.dense)
        if job.expert_params > 0:
            ag = ag + pieces * _collective("allgather", 2.0 * expert / layers / pieces, group.expert)
        ag_r = (np.where(root > 0, _collective("allgather", 2.0 * root, group.dense), 0.0) if np.any(root > 0)
                else np.zeros(1))
        return np.where(group.ranks > 1, ag, 0.0), np.where(group.ranks > 1, ag_r, 0.0)

    def exposed(ag_both: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        ag, ag_r = ag_both
        bwd_ag = np.where(g.fsdp_reshard_after_forward, ag, 0.0)
        forward = ag_r + ag + (layers - 1.0) * np.maximum(ag - fwd / layers, 0.0)
        backward = (layers - 1.0) * np.maximum(bwd_ag - bwd / layers, 0.0)
        # fsdp_defer_grad_sync: only the first forward gathers (docs/model.md#fsdp-deferred-sync)
        forwards = np.where(g.fsdp_defer_grad_sync & (m > 1), 1.0, m)
        return np.asarray(np.where(zero3, forwards * forward + m * backward, 0.0))

    hier = hier_group(g, sync)
    if hier is not None:  # inside the groups of G replicas, the states' shards (as _sync_comm prices)
        return exposed(first_gather(groups.data_split(hier)[0]))
    ag, ag_r = first_gather(groups.data)
    if np.any(g.zero == Zero.HSDP):
        ag_h, ag_rh = first_gather(groups.data_split(hsdp_shard_group(job, g))[0])
        is_hsdp = g.zero == Zero.HSDP
        ag, ag_r = np.where(is_hsdp, ag_h, ag), np.where(is_hsdp, ag_rh, ag_r)
    return exposed((ag, ag_r))


def shares_bsp_comm(sync: str, ps_servers: Any) -> bool:
    """Whether sync mode ``sync`` moves the same data-parallel traffic as bsp on candidates whose parameter
    servers are ``ps_servers`` (0: all-reduce):
    every mode but hier:G (two-level groups) and asp/ssp on a parameter server (the server cap,
    :func:`_sync_comm`). Such a mode differs from bsp only in how the workers wait (:func:`with_sync`)."""
    kind = parse_sync(sync).kind
    if kind == SyncKind.HIER:
        return False
    return not (kind in (SyncKind.ASP, SyncKind.SSP) and bool(np.any(np.asarray(ps_servers) > 0)))


def with_sync(job: Job, g: StrategyGrid, res: StepArrays, sync: str, *, kappa: float | None = None) -> StepArrays:
    """``evaluate(job, g, sync=sync)`` from ``res = evaluate(job, g)`` (bsp) where :func:`shares_bsp_comm`:
    the one-worker step (``local``) and the exposed traffic (``sync_comm``) are bsp's, so only the sync
    model's wait and the parts built on it are recomputed, with evaluate's own arithmetic (bit-identical;
    tests/test_step.py). Lets the planner price several sync modes on one evaluation. ``res.extras["dp_serial"]``:
    the all-reduces in series on every rank (:func:`~scalemodel.engine.dp_comm.loss_allreduce_time`,
    :func:`~scalemodel.engine.dp_comm.optimizer_stats_allreduce_time`), part of ``local`` and of the dp_comm part."""
    if not shares_bsp_comm(sync, g.ps_servers):
        raise ValueError(f"sync mode {sync} does not share bsp's data-parallel traffic on this grid")
    local, cross = res.extras["local"], res.extras["sync_comm"]
    kw: dict[str, Any] = {} if kappa is None else {"kappa": kappa}
    sres = sync_model.sync_step(sync, g.dp.astype(float), local, job.straggler_cv, job.straggler_dist,
                                comm_s=cross, group_comm_s=None, **kw)
    straggler = np.asarray(sres.straggler_s, dtype=float)
    dp_term = np.asarray(sres.step_time_s, dtype=float) - local - straggler
    # the loss and optimizer-statistics all-reduces sit in ``local`` and in the dp_comm part beside the wait, as
    # evaluate adds them (prop38: the planner's asp / ssp / local / backup picks left them out of the step)
    parts = dict(res.breakdown, dp_comm=np.maximum(dp_term, 0.0) + res.extras["dp_serial"], straggler=straggler)
    breakdown = {k: parts[k] for k in BREAKDOWN_KEYS}
    step = sum(breakdown.values())
    gpus = g.gpus.astype(float)
    samples = _priced_samples(g, res.microbatches)  # res.model_flops already counts these samples
    safe = _rate_denominator(breakdown, step)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = res.model_flops / safe / gpus / 1e12
        mfu = res.model_flops / safe / (gpus * job.peak_flops)
        hfu = res.hardware_flops / safe / (gpus * job.peak_flops)
    shape = res.step_time.shape

    def full(a: Any) -> np.ndarray:
        return np.broadcast_to(np.asarray(a), shape)

    reason = res.reason
    if needs_replicas(sync):
        open_ = (reason == 0) | (reason == Infeasible.OUT_OF_MEMORY)  # evaluate flags it before memory
        reason = np.where(open_ & (g.zero != Zero.NONE), int(Infeasible.SYNC_NEEDS_REPLICAS), reason)
    return msgspec.structs.replace(
        res, step_time=full(step), breakdown={k: full(v) for k, v in breakdown.items()},
        reason=full(reason), feasible=full(reason == 0),
        tokens_per_s=full(samples * job.seq_len / safe), samples_per_s=full(samples / safe),
        tflops_per_gpu=full(tflops), mfu=full(mfu), hfu=full(hfu), statistical_efficiency=full(sres.efficiency),
        updates_per_s=full(sres.updates_per_s), mean_staleness=full(sres.mean_staleness))


def _priced_samples(g: StrategyGrid, m: np.ndarray) -> np.ndarray:
    """Samples the priced step processes, m dp b with m = :func:`microbatches`: the global batch B wherever dp b
    divides it. Where it does not (infeasible, batch_not_divisible) the step is priced at m = max(floor(B / (dp b)),
    1) micro-batches, and throughput, FLOPs and MFU count those samples, not B: B = 1536 on dp 1024 priced one
    micro-batch of 1024 sequences and reported 1536 sequences in it, an HFU of 91 % on an A100."""
    return np.asarray(m * g.dp * g.micro_batch, dtype=float)


def _flops(job: Job, g: StrategyGrid) -> dict[str, np.ndarray]:
    rec = g.recompute
    if job.is_transformer:
        f = transformer.training_flops(job.shape, job.seq_len, g.global_batch.astype(float), rec,
                                       g.recompute_modules)  # selective: the modules the compute time repeats
        xla = xla_remat(job, g)
        if np.any(xla):  # XLA's remat leaves the down-projections (a parallel block's O-proj too) out
            dead = transformer.xla_remat_dead_flops(job.shape, job.seq_len) * g.global_batch.astype(float)
            extra = f.recompute - np.where((rec == Recompute.FULL) & xla, dead, 0.0)
            f = transformer.StepFlops(forward=f.forward, model=f.model, hardware=f.model + extra, recompute=extra)
        if np.any((rec == Recompute.FULL) & (g.recompute_layers >= 0)):
            # partial full recompute: the share of the L layers a micro-batch recomputes over the whole pipeline,
            # each rank's own recomputed layers (_recomputed_total: the first N of each of its chunks)
            share = _recomputed_total(job, g) / float(job.shape.layers)
            return {"model": np.asarray(f.model, dtype=float),
                    "hardware": np.asarray(f.model + f.recompute * share, dtype=float)}
    else:
        f = transformer.generic_training_flops(job.generic_flops_per_sample, g.global_batch.astype(float), rec)
    return {"model": np.asarray(f.model, dtype=float), "hardware": np.asarray(f.hardware, dtype=float)}


def _end_rank(stage: _Stage, first: bool = False) -> _Stage:
    """The pipeline's last (``first``: first) rank of a non-interleaved schedule, which exchanges on one boundary only:
    ``stage`` (priced with a middle rank's two, model_parallel_comm.pp_exchanges) less what a middle rank runs that
    this end rank does not (``mp['pp_edge']``, ``mp['pp_edge_first']``: the second boundary's exchange, 0 at pp 2,
    interleaved and GPipe / ZB-H1; under DeepSpeed's PipelineEngine also the TP all-gathers the end rank skips,
    model_parallel_comm.deepspeed_pipe_edges, at pp 2 too), off its time and its pipeline traffic alike, so the
    parts still add up to the time. Megatron-Core's 1F1B: the end rank's calls toward no neighbour move nothing
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/p2p_communication.py lines 536-600), and an end
    rank that paces the pipeline adds f + b + one exchange a micro-batch (tests/test_pipeline_exchanges.py's
    step-by-step simulations, Megatron, nanotron and DeepSpeed). The one route for an end rank's micro-batch: the
    pipeline formulas' paths (:func:`_stage_forward_backward`) and the busiest rank's t_mb (:func:`_evaluate`) both
    take it, so the bubble, (pipelined time - m t_mb) / t_mb, counts the end rank's exchanges as m t_mb does (prop37:
    t_mb kept the two, the paths one, and the bubble clipped at 0 by m pp_edge; docs/model.md#bubble)."""
    edge = stage.mp.get("pp_edge_first" if first else "pp_edge")
    if edge is None or not np.any(edge):
        return stage
    return stage._replace(time=np.asarray(stage.time - edge),
                          mp=dict(stage.mp, pp=np.asarray(stage.mp["pp"] - edge), pp_edge=np.zeros(1),
                                  pp_edge_first=np.zeros(1)))


def _stage_forward_backward(stage: _Stage, end: bool = False, first: bool = False,
                            blocking: Any = False) -> tuple[np.ndarray, np.ndarray]:
    """One micro-batch's (forward, backward) seconds on a pipeline rank: its time split in the proportion
    of the rank's forward and backward (+ recompute) compute. ``end``: the pipeline's last rank (with ``first``, its
    first) of a non-interleaved schedule, which exchanges on one boundary only (:func:`_end_rank`). ``blocking``
    (:func:`_blocking_exchanges`): where true, the rank's time less its pipeline exchanges, which the 1F1B formulas
    then price as the program's own rendezvous (``exchange``, :func:`_boundary_exchange`; rdv40)."""
    st = _end_rank(stage, first) if end else stage
    total, comp = st.time, stage.compute
    if np.any(blocking):
        total = np.asarray(total - np.where(blocking, st.mp["pp"], 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(comp["total"] > 0, comp["forward"] / comp["total"], 1.0 / 3.0)
    return total * share, total * (1.0 - share)


def _blocking_exchanges(g: StrategyGrid) -> np.ndarray:
    """bool: the non-interleaved 1F1B program whose stage-boundary exchanges the step prices as Megatron-Core's
    blocking batched send/recv (model_parallel_comm's ``exchanges``: one a boundary a micro-batch), not DeepSpeed's
    PipelineEngine or nanotron's engine (their own programs, folded into each rank's time as before). Where true the
    1F1B formulas price each exchange as its own rendezvous (``cost.pipeline.one_f_one_b_time``'s ``exchange``,
    docs/model.md#onefb-rendezvous): a batch ends c after the later of its two ranks reaches it."""
    return np.asarray((g.schedule == ScheduleKind.ONE_F_ONE_B) & ~np.asarray(g.deepspeed_pipeline, dtype=bool)
                      & ~np.asarray(g.nanotron_trainer, dtype=bool))


def _boundary_exchange(rank0: _Stage, blocking: np.ndarray) -> np.ndarray:
    """Seconds of one batched exchange across a stage boundary where ``blocking`` (:func:`_blocking_exchanges`), 0
    elsewhere: the first rank's pipeline traffic a micro-batch, one boundary's (:func:`_end_rank`; the slowest
    boundary's, as model_parallel_comm prices every rank's)."""
    return np.asarray(np.where(blocking, _end_rank(rank0, first=True).mp["pp"], 0.0))


def _balanced_middle_runs(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray]:
    """(how many middle ranks hold the middle class's layers, the other middle ranks' layers) of a pipeline priced
    by class (:func:`_stage_layers`): the balanced split of L layers over p ranks gives ranks 0 .. L mod p - 1
    ceil(L/p) layers and the others floor(L/p), so of the middle ranks 1 .. p-2 the first max(L mod p - 1, 0) hold
    ceil(L/p) (the middle class where L mod p >= 2) and the rest floor(L/p); every middle rank is of the middle class
    elsewhere (p - 2 of them: given first / last stage layers, chunked interleaved, p divides L)."""
    layers = float(job.shape.layers) if job.is_transformer else 1.0
    p = np.asarray(g.pp, dtype=float)
    n_mid = np.maximum(p - 2.0, 0.0)
    extra = np.mod(layers, np.maximum(p, 1.0))
    balanced = ((g.first_stage_layers < 0) & (g.last_stage_layers < 0) & (np.asarray(g.stage_split) < 0)
                & ~_chunked(g) & (g.schedule != ScheduleKind.INTERLEAVED) & (extra > 0))
    n_upper = np.where(balanced, np.clip(extra - 1.0, 0.0, n_mid), n_mid)
    return np.asarray(n_upper), np.asarray(np.where(balanced, np.floor(layers / np.maximum(p, 1.0)), 0.0))


def _uneven_1f1b_bubble(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], m: np.ndarray,
                        t_mb: np.ndarray, bubble_mb: np.ndarray, runs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Bubble (in micro-batch times of the busiest rank) of a non-interleaved 1F1B pipeline whose stages differ
    (:func:`_stage_layers`: the first, the middle ones, the last with the logits):
    :func:`scalemodel.cost.pipeline.one_f_one_b_three_class_time` on the ranks' own forward and backward
    times, minus the m t_mb the busiest rank computes. Equal stages give the textbook p - 1. A hybrid pattern's
    ``|`` segments: :func:`scalemodel.cost.pipeline.one_f_one_b_time` on every rank's own time
    (:func:`_segment_pipeline_total`), not three classes. Other candidates keep ``bubble_mb``. ``runs``:
    :func:`_balanced_middle_runs` of the grid, which evaluate computes once for this and the deferred-wgrad idle."""
    onef1b = (g.schedule == ScheduleKind.ONE_F_ONE_B) & (g.pp >= 2)
    if not job.is_transformer or not np.any(onef1b):
        return bubble_mb
    if _splits_cover(g, _rank_layers(job, g)):
        total = np.zeros(1)  # every candidate a split's, whose ranks' own time replaces the three classes' below
    else:
        n_upper, times, c, four = _class_1f1b_times(job, g, stage, runs)
        if four:
            total = pipeline.one_f_one_b_four_class_time(m, g.pp, n_upper, *times, c)
        else:
            ff, bf, fm, bm, _, _, fl, bl = times
            total = pipeline.one_f_one_b_three_class_time(m, g.pp, ff, bf, fm, bm, fl, bl, c)
    for on, seg_total in _segment_pipeline_total(job, g, stage, m, interleaved=False):
        total = np.where(on, seg_total, total)  # a hybrid's ranks (_rank_layers): every rank its own
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(t_mb > 0, (total - m * t_mb) / t_mb, 0.0)
    return np.asarray(np.where(onef1b, np.maximum(own, 0.0), bubble_mb))


_ClassTimes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _class_1f1b_times(job: Job, g: StrategyGrid, stage: Callable[..., _Stage], runs: tuple[np.ndarray, np.ndarray]
                      ) -> tuple[np.ndarray, _ClassTimes, np.ndarray, bool]:
    """A non-interleaved 1F1B pipeline priced by class (:func:`_stage_layers`): (how many middle ranks of the upper
    class, the (forward, backward) seconds of rank 0, an upper and a lower middle rank and the last, one boundary's
    exchange, whether any candidate has lower middle ranks), each rank's time split as its compute less its pipeline
    traffic where Megatron's program blocks (:func:`_stage_forward_backward`, :func:`_boundary_exchange`). Read by the
    1F1B bubble (:func:`_uneven_1f1b_bubble`) and the deferred-wgrad flush idle (:func:`_deferred_wgrad_exposed`)."""
    last, other, first = _stage_layers(job, g)
    blocking = _blocking_exchanges(g)
    rank0 = stage(first, False, embedding=True)
    ff, bf = _stage_forward_backward(rank0, end=True, first=True, blocking=blocking)
    fm, bm = _stage_forward_backward(stage(other, False), blocking=blocking)
    fl, bl = _stage_forward_backward(stage(last, True), end=True, blocking=blocking)
    c = _boundary_exchange(rank0, blocking)
    # the balanced split where p does not divide L: ranks 1 .. L mod p - 1 hold ceil(L/p) layers (the middle
    # class, _stage_layers), the middle ranks after them floor(L/p) (uneven38: all were priced at ceil)
    n_upper, lower = runs
    four = bool(np.any(n_upper < np.maximum(g.pp - 2, 0)))
    fo, bo = _stage_forward_backward(stage(lower, False), blocking=blocking) if four else (fm, bm)
    return n_upper, (ff, bf, fm, bm, fo, bo, fl, bl), c, four


def _segment_1f1b_ranks(job: Job, g: StrategyGrid, stage: Callable[..., _Stage]
                        ) -> list[tuple[Any, list[tuple[np.ndarray, np.ndarray]], np.ndarray, bool]]:
    """For each split of :func:`_rank_layers` (1F1B: every rank at its own stage time): (the split, each rank's
    (forward, backward) seconds, one boundary's exchange, whether its middle ranks are all one stage), as
    :func:`_class_1f1b_times` splits them. Read by the 1F1B bubble (:func:`_segment_pipeline_total`) and the
    deferred-wgrad flush idle (:func:`_deferred_wgrad_exposed`)."""
    out = []
    blocking = _blocking_exchanges(g)
    for sp, stages in _segment_rank_stages(job, g, stage) or ():
        p = sp.p
        fb = [_stage_forward_backward(x, end=k in (0, p - 1), first=k == 0, blocking=blocking)
              for k, x in enumerate(stages)]
        same = all(x is stages[1] for x in stages[1:-1])
        out.append((sp, fb, _boundary_exchange(stages[0], blocking), same))
    return out


def _stacked(fb: list[tuple[np.ndarray, np.ndarray]], *others: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(forwards, backwards) of the ranks along a last axis, broadcast with ``others`` (m, the exchange)."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in others), *(np.shape(f) for pair in fb for f in pair))
    f = np.stack([np.broadcast_to(x[0], shape) for x in fb], axis=-1)
    b = np.stack([np.broadcast_to(x[1], shape) for x in fb], axis=-1)
    return f, b, shape
