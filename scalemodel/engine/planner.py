"""The planner: search every strategy the engine can evaluate for a job and rank the best by an objective.

The space is the product of the *outer* choices (dp, tp, pp, cp, ep, rank order, micro-batch, schedule
and virtual stages, the CP exchange where cp > 1 and the MoE dispatch where ep > 1 (:func:`_with_cp_exchange`,
:func:`_with_moe_dispatch`, docs/model.md#plan-exchanges), ZeRO/FSDP, recompute, sequence parallelism) and the
*data-parallel communication*
choices (collective algorithm, compression, all-reduce or parameter server with K servers dedicated
or colocated, overlap, gradient bucket size, static or dynamic assignment), for each sync mode
asked for. Every member of the :mod:`scalemodel.choices` enums is searched, so a new member appears
without planner edits; by default only what mainstream frameworks run (:data:`MAINSTREAM`), the rest
on request (``allow``) and labelled ``custom`` in the result.

Decomposed search (branch and bound, exact):

1a. *Counts and a compute-only bound.* For every configuration (dp, tp, pp, cp, ep, rank order,
    micro-batch, schedule, CP exchange, EP dispatch) x recompute x SP: the feasibility codes and memory at every
    ZeRO stage (the exact counts of
    the whole space, no step time priced), and a bound per configuration: (m + bubble) x the busiest
    stage's compute (:func:`scalemodel.engine.step.compute_floor`, priced once per rank-order twin), times the
    least factor any sync mode puts on a one-worker step (its straggler wait over its statistical efficiency,
    :func:`_bound_factor`), the least over the (recompute, SP) that fit at some ZeRO stage; the modes that need
    a replica per rank (asp, ssp:S, local:H, infeasible at ZeRO > 0: code 15) bound the ZeRO 0 stages only.
1b. *Outer pass.* Configurations best bound first, while the bound can still reach the best ``keep``
    values found (or the best of their parallelism family), are evaluated at their first feasible ZeRO
    stage with one data-parallel communication choice (the first allowed: NCCL auto, no compression,
    all-reduce, overlap, the framework's bucket) under bsp, in vectorised batches of
    :func:`scalemodel.engine.step.evaluate`. That gives exact values (for every sync mode that moves
    bsp's traffic, :func:`scalemodel.engine.step.with_sync`) and the bound of each (outer, ZeRO stage)
    pair: (m + bubble) x t_mb (compute, TP, CP, EP, PP, their contention, bubble: no ZeRO stage,
    communication choice or sync mode changes it) times the sync factor, plus the ZeRO-3/FSDP/HSDP
    gathers no communication choice hides (:func:`scalemodel.engine.step.dp_exposed_floor`) times what
    the sync mode makes of traffic (at ZeRO > 0 over the class's modes that need no replica); the other
    parts (optimizer, the rest of dp_comm, straggler, imbalance) are >= 0, and statistical efficiency <= 1.
    Batches after the first hold CHUNK_CANDIDATES candidates of the configurations still in reach.
2.  *Communication pass.* Pairs whose bound cannot reach the threshold are pruned; the rest, best bound
    first across the evaluation classes, are evaluated on every communication choice at once (the
    all-reduce choices as a cartesian block, one axis per field, :func:`_comm_blocks`), and the threshold
    tightens as exact values come in. The sync modes that move bsp's data-parallel traffic (all but
    hier:G, and asp/ssp on a parameter server) share one evaluation; each hier:G (and asp/ssp with a
    parameter server) has its own. A class's ZeRO 0 pairs are batched apart, so asp, ssp:S and local:H are
    re-priced on those batches only.

Feasibility depends on the communication choice only through "parameter server needs ZeRO 0", so the
infeasible counts of the whole space are exact without evaluating it (``candidates_evaluated`` counts
every candidate covered; ``search["evaluated"]`` the ones actually computed). tests/test_planner.py
checks the decomposed search against brute force on spaces small enough to enumerate.

Ranking: ``throughput`` maximises tokens/s; ``time-to-train`` maximises tokens/s x statistical
efficiency (the staleness penalty of the sync mode, :mod:`scalemodel.cost.sync`); ``cost``
minimises time-to-train x gpus x price per GPU-second. Each outer plan is ranked with its best
communication choice; plans within :data:`NEAR` (0.5 %) of a better one that differ from it in a
single choice are folded into it, and every ranked plan lists the choices that did not matter (the
values within 0.5 %). Ties go to the simpler candidate (earlier on every axis).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import (
    TORCHTITAN_LAYERS,
    Algorithm,
    Assignment,
    CompressionKind,
    CpCommType,
    FlexBackend,
    LayerImpl,
    Layout,
    LossImpl,
    Recompute,
    RecomputeMethod,
    ScheduleKind,
    StateOffload,
    SyncKind,
    Zero,
    parse_compression,
    parse_dp_comm,
    parse_schedule,
    parse_sync,
)
from scalemodel.cost import compression, compute, efficiency, memory, transformer
from scalemodel.cost import sync as sync_model
from scalemodel.cost.placement import distinct_layout
from scalemodel.cost.transformer import RECOMPUTE_MODULES
from scalemodel.engine.divisors import divisors
from scalemodel.engine.dp_comm import hsdp_shard_group
from scalemodel.engine.job import (
    GRID_DEFAULTS,
    OTHER_SPLITS,
    PIN_CHECKS,
    STAGE_SPLITS,
    Job,
    StrategyGrid,
    build_job,
    check_backup_workers,
    check_ep_dispatch_sms,
    check_fp4_param_gather,
    check_fp8_all_gather,
    check_mtp_recompute,
    check_stage_layers,
    defer_embedding_wgrad_refusal,
    grid_from_arrays,
    held_gpus,
    refuse_two_splits,
    stage_split_code,
    warn_unfused_attention,
    warn_unpriced_jax_release,
)
from scalemodel.engine.layer_compute import moe_block_recomputed
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.predict import Prediction, result_at
from scalemodel.engine.stage_memory import memory_total
from scalemodel.engine.step import (
    REASON_KEYS,
    Infeasible,
    StepArrays,
    compute_floor,
    dp_exposed_floor,
    evaluate,
    feasibility,
    needs_replicas,
    refuse_non_finite,
    shared_stages,
    shares_bsp_comm,
    with_sync,
)
from scalemodel.errors import InputError
from scalemodel.specs import notices
from scalemodel.specs.constraints import Constraints, normalize_constraints
from scalemodel.specs.constraints import keep as allowed_by
from scalemodel.specs.strategy_file import JSON_FIELD_TWINS
from scalemodel.specs.training import TP_COMM_PARTS, TRAINER_NAMES, trainer_sync_refusal

OBJECTIVES = ("throughput", "time-to-train", "cost")
#: Candidates per evaluate() call: bounds memory (well under 500 MB) and paces the progress bar.
CHUNK_CANDIDATES = 100_000
#: Candidates per call of pass 1a, which prices memory, feasibility and the compute floor only (no evaluate()):
#: fewer, larger calls, each with a fixed cost of tens of ms (a hybrid prices every pipeline rank on its own).
#: 1,000,000 (was 400,000): plan (b) ~35 ms and nemotron-3-nano on 512 GPUs ~100 ms less CPU, the counts the same;
#: peak RSS of the bench's plans 107-134 MB -> 120-180 MB (the 1e6-layer case the most), under the 500 MB target.
COUNT_CHUNK_CANDIDATES = 1_000_000
#: Configurations of each parallelism family in pass 1b's first batch (its best bounds), besides the best overall.
FIRST_PER_FAMILY = 16
#: Plans per objective the Pareto front is drawn from.
PARETO_POOL = 50
#: The most distinct sync modes one search takes (--sync-modes): every hier:G is priced apart (its own in-group
#: traffic), ~15 ms each on a 64-GPU search; 3,000 of them (hier:1,...,hier:2999) ran past any CLI timeout.
MAX_SYNC_MODES = 64
#: The largest search space one search takes by default (plan's --max-candidates): outer candidates x data-parallel
#: communication choices, as counted before pass 1a (:func:`search`'s ``total`` x ``n_choice``; the ``covered`` it
#: reports after is this less the outer candidates no sync mode or layout admits). The CPU a search takes is set by
#: the candidates the bounds leave to evaluate, not by the space; measured (fuzz41, one core of the shared machine,
#: process start included, docs/model.md#plan-space): 11-35 ns a candidate with the 72 mainstream communication
#: choices (deepseek-v3 on 4096 dgx-h100 --allow expert-tp, 0.71e9, 18 s; on 1024 with micro-batches 0.35e9, 9 s),
#: 0.5-5 ns with --allow's 1,064-1,112 (mixtral-8x7b on 64 dgx-h100 --allow all 17.8e9, 47 s; at tp 2 5.0e9, 24 s;
#: gpt3-175b on 4096 dgx-a100 17.7e9, 13 s); plan (a) (97.6e6) 1.0 s (benchmarks/bench.py --throughput, 105,388
#: evaluated a second of search). 1e10 takes every example and test (the largest, tests/test_speed37.py's mixtral-8x7b
#: on 256 GPUs with the custom communication choices under four sync modes, 5.34e9; 2e9 refused it), bench.py's plans
#: (issue 15's (b), 0.66e9) and every mainstream search up to 139e6 outer candidates; the slowest measured search it
#: takes ran 24 s (mixtral --allow all at tp 2, 5.0e9); --allow all on the largest spaces passes it and needs the option
#: (fuzz40: mixtral -n 64 --allow all, 17.8e9, ran 51 s unsaid).
MAX_CANDIDATES = 10_000_000_000
#: Relative gap under which two plans that differ in one choice are near-duplicates.
NEAR = 0.005
#: Kept fractions of top-k compression the search tries (Lin et al. 2018, DGC: 0.1 % to 10 %).
TOPK_RATIOS = (0.1, 0.01, 0.001)
#: Explicit gradient bucket sizes searched besides each framework's default (0), bytes of uncompressed gradient:
#: PyTorch DDP's bucket_cap_mb 5 and 25, which DDP reads in MiB (``int(bucket_cap_mb * 1024 * 1024)``,
#: :data:`scalemodel.engine.job.DDP_BUCKET_BYTES`: 25 -> 26,214,400 B; these were 5e6 and 25e6 B, sizes no
#: bucket_cap_mb a user writes gives), then 100 MB to 2 GB (DeepSpeed's reduce_bucket_size, in elements: its
#: default 5e8 is 1 GB of 16-bit gradients; Megatron-Core's --ddp-bucket-size, elements, default
#: max(4e7, 1e6 dp cp)).
BUCKET_BYTES = (0.0, 5.0 * 1024 * 1024, 25.0 * 1024 * 1024, 100e6, 500e6, 2e9)

#: What mainstream frameworks run, per searched choice: NCCL's algorithms (NCCL_ALGO=Ring|Tree, and its
#: own tuner for auto; NCCL does not implement recursive halving-doubling, recursive doubling, direct or
#: two-level hierarchical all-reduce), all-reduce data parallelism (Megatron-LM, DeepSpeed, FSDP,
#: torchtitan), gradients communicated in 16 bits (PyTorch DDP fp16/bf16_compress_hook, DeepSpeed
#: communication_data_type), and static micro-batch assignment. Anything else is searched on request.
MAINSTREAM: dict[str, frozenset[int]] = {
    "algorithm": frozenset({int(Algorithm.AUTO), int(Algorithm.RING), int(Algorithm.TREE)}),
    "compression": frozenset({int(CompressionKind.NONE), int(CompressionKind.FP16)}),
    "dp_comm": frozenset({0}),  # all-reduce (0 parameter servers)
    "assignment": frozenset({int(Assignment.STATIC)}),
}
#: ``allow`` names: which non-mainstream choices they open.
#: ``cp-exchanges`` and ``moe-dispatch`` open the search over context parallelism's exchange and the expert dispatch
#: (docs/model.md#plan-exchanges): each multiplies the rows with cp > 1 (ep > 1 on MoE models) by up to 4-5 (6 for
#: moe-dispatch with the flex dispatcher's two backends), which took the default GPT-3 plan from 0.4 to 1.2-1.4 s of
#: search, so they are asked for (or pinned), not default. ``expert-tp`` opens expert tensor parallelism (strategy.etp,
#: every proper divisor of tp beside Megatron's default etp = tp) with ep folded over tp x cp x dp
#: (:func:`configurations`, docs/model.md#plan-space): 1.3x the CPU of plan -m mixtral-8x7b -n 64 and 2.3x of
#: deepseek-v3 -n 256 (etp39).
ALLOW = {"custom-collectives": ("algorithm",), "compression": ("compression",), "parameter-server": ("dp_comm",),
         "dynamic-assignment": ("assignment",), "cp-exchanges": ("cp_comm_type",),
         "moe-dispatch": ("moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend"),
         "offload": ("offload_states",), "micro-batches": ("micro_batch",), "expert-tp": ("etp",)}
ALLOW["all"] = tuple(k for keys in ALLOW.values() for k in keys)  # every name's keys: none is left out of all
#: The communication-choice fields of a StrategyGrid (axis 1 of the second pass).
COMM_FIELDS = ("algorithm", "compression", "topk_ratio", "ps_servers", "ps_colocated", "overlap", "bucket_bytes",
               "dynamic_assignment")
#: StrategySpec fields plan can pin as a search axis (--set strategy.X), and those it takes as fixed
#: parameters of every candidate; any other --set strategy.X is refused.
PIN_AXES = ("dp", "tp", "pp", "cp", "ep", "zero", "recompute", "sequence_parallel", "schedule", "algorithm", "overlap",
            "compression", "dp_comm", "assignment", "bucket_size", "sync", "layout", "cp_comm_type", "cp_a2a_size",
            "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend")
PIN_FIXED = ("flash_attention", "dispatch_overhead", "first_stage_layers", "last_stage_layers", "stage_layers",
             "shard_group",
             "first_chunk_layers", "last_chunk_layers", "etp", "recompute_layers", "recompute_method",
             "offload_layers", "offload_states", "tp_comm_overlap", "tp_async_allreduce", "overlap_param_gather",
             "moe_layer_host_s", "ep_dispatch_sms", "moe_allgather_dispatcher", "moe_shared_expert_overlap",
             "moe_shared_expert_stream",
             "recompute_modules", "deepspeed_pipeline", "nanotron_trainer", "fsdp_reshard_after_forward",
             "fsdp_fp8_all_gather", "fsdp_defer_grad_sync",
             "fsdp_flat_param", "fsdp_per_param", "xla_gpu_lhs", "attention_unpad", "moe_fp8_padding",
             "moe_permute_fusion",
             "megatron_ddp",
             "align_grad_reduce", "align_param_gather", "overlap_param_gather_with_optimizer_step",
             "grad_accumulation_fusion", "main_grad_hook", "bucket_fragments",
             "fp8_param_gather", "fp4_param_gather", "loss_dp_allreduce", "check_for_nan_in_grad",
             "check_for_nan_in_loss", "loss_token_count_read",
             "defer_embedding_wgrad", "wgrad_deferral_limit", "loss_impl", "layer_impl",
             "pp_scatter_gather", "overlap_p2p_comm", "overlap_p2p_send_wait",
             "eager_rope", "mla_column_down_proj", "eager_glu_clamp", "eager_expert_bias",
             "eager_bias_dropout_add", "moe_host_attention_graphed", "train_metric_passes", "train_metric_states",
             "eager_activation", "fp8_wgrad", *TP_COMM_PARTS)

#: The pinned switches that run at some ZeRO stages only, (the value that needs them, those stages): StrategySpec's
#: refusals (specs.training StrategySpec._check, each citing its framework). Plan searches only those stages where
#: the switch is pinned and zero is not (:func:`pins` adds the constraint; ux37): fp8_param_gather at zero 0 or 3 was
#: refused "give zero too" where it left several stages open, though zero 1, 2, fsdp and hsdp each run it.
#: offload_states is not here: ux36 counts the stages that cannot run it state_offload_invalid.
ZERO_SWITCHES: dict[str, tuple[bool, tuple[Zero, ...]]] = {
    "fp8_param_gather": (True, (Zero.OPTIMIZER, Zero.GRADIENTS, Zero.FSDP, Zero.HSDP)),
    "fp4_param_gather": (True, (Zero.OPTIMIZER, Zero.GRADIENTS)),
    "bucket_fragments": (True, (Zero.OPTIMIZER, Zero.GRADIENTS)),
    "fsdp_fp8_all_gather": (True, (Zero.FSDP, Zero.HSDP)),
    "fsdp_per_param": (True, (Zero.FSDP, Zero.HSDP)),
    "fsdp_defer_grad_sync": (True, (Zero.FSDP, Zero.HSDP)),
    "fsdp_reshard_after_forward": (False, (Zero.PARAMETERS, Zero.FSDP, Zero.HSDP)),
    "fsdp_flat_param": (True, (Zero.GRADIENTS, Zero.PARAMETERS, Zero.FSDP, Zero.HSDP)),
    "xla_gpu_lhs": (True, (Zero.FSDP, Zero.HSDP)),
    # fuzz40: NeMo 1's O2 hook (StrategySpec refuses it at zero 3, fsdp and hsdp, whose sharded-parameter wrappers
    # accumulate their own gradients); plan ranked FSDP plans with it pinned, each one predict refuses
    "main_grad_hook": (True, (Zero.NONE, Zero.OPTIMIZER, Zero.GRADIENTS)),
}


#: The pinned recompute fields that run under one recompute mode only, (the mode, whether the pinned value needs it):
#: StrategySpec's refusals (specs.training: recompute_layers and recompute_method uniform need recompute full, as
#: Megatron-LM's --recompute-num-layers and --recompute-method go with --recompute-granularity full; recompute_modules
#: needs selective). ux38b: plan searches only that mode where such a field is pinned and recompute is not
#: (:func:`pins` adds the constraint, :func:`plan` says so), as ZERO_SWITCHES keep zero to the stages a switch runs
#: at; plan refused them "add recompute: full" though it searches recompute.
RECOMPUTE_SWITCHES: dict[str, tuple[Recompute, Callable[[Any], bool]]] = {
    "recompute_layers": (Recompute.FULL, lambda v: v is not None),
    "recompute_method": (Recompute.FULL, lambda v: RecomputeMethod.parse(v) == RecomputeMethod.UNIFORM),
    "recompute_modules": (Recompute.SELECTIVE, lambda v: bool(v)),
}


def recompute_switch_modes(strategy: Any, names: Sequence[str]) -> list[tuple[str, Recompute]]:
    """(name, the recompute mode it needs) of each pinned :data:`RECOMPUTE_SWITCHES` field whose value needs one."""
    return [(n, mode) for n, (mode, needs) in RECOMPUTE_SWITCHES.items()
            if n in names and needs(getattr(strategy, n, None))]


def zero_switch_stages(fixed: Mapping[str, Any]) -> tuple[list[str], list[Zero]]:
    """(the pinned :data:`ZERO_SWITCHES` set to the value that needs a ZeRO stage, as ``name value``; the stages
    every one of them runs at, all of Zero where there is none)."""
    named, stages = [], list(Zero)
    for name, (value, runs) in ZERO_SWITCHES.items():
        if name in fixed and bool(fixed[name]) == value:
            named.append(f"{name} {str(value).lower()}")
            stages = [z for z in stages if z in runs]
    return named, stages


# --------------------------------------------------------------------------------------------
# search space


def _restricted(values: np.ndarray, c: Constraints, key: str) -> np.ndarray:
    """The values of one search axis that the constraints on ``key`` allow (all of them when none)."""
    return values[allowed_by(values, c[key])] if key in c else values


def _unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)``, the same sorted values by the sorting path: the plain call (no index, inverse or counts
    asked for) reads ``np.ma`` in numpy >= 2.3, which imports numpy.ma (~15 ms a fresh process) for nothing."""
    return np.unique(a, return_counts=True)[0]


def _levels(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` of a 1-D integer column whose equal values stand mostly in runs (a
    configuration column: each (tp, pp, cp, ep) row is followed by its micro-batches, schedules and rank orders),
    the same sorted values and inverse without sorting every row: the distinct values are those of the runs' first
    rows (every value starts some run), and a row's index among them is where it sorts in (np.searchsorted finds
    each value, all being there). plan -n 73513440 on a 1e8-GPU cluster: 5.3 M configurations, 155 k runs of dp."""
    if not len(a):
        vals, inv = np.unique(a, return_inverse=True)
        return vals, np.ravel(inv)
    starts = np.ones(len(a), dtype=bool)
    starts[1:] = a[1:] != a[:-1]
    vals = _unique(a[starts])
    return vals, np.searchsorted(vals, a)


def configurations(job: Job, gpus: int, global_batch: int, constraints: Constraints | None = None,
                   allow: frozenset[str] = frozenset(), *, narrow: bool = False,
                   fixed: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The configuration axis: 1-D arrays dp, tp, pp, cp, ep, micro_batch, schedule, virtual_stages
    of every valid combination (vectorised filtering of a cartesian product).

    tp, pp, cp are divisors of the GPU count whose product divides it (dp = gpus / (tp pp cp)), tp <=
    heads, pp <= layers, cp <= seq_len / 2, ep dividing the expert count (MoE only) and dp (one pinned with =: tp x
    cp x dp, the folding predict takes); where ``allow`` opens etp (--allow expert-tp) on an MoE model, the expert
    tensor parallelism etp too (column ``etp``: 0 for Megatron's default etp = tp, and every proper divisor of tp;
    torchtitan's layer: its default 1 and tp) unless ``fixed`` pins it, and there or with etp pinned, ep with etp x ep
    dividing tp x cp x dp (Megatron-Core's expert grid, MoE parallel folding: docs/model.md#plan-space);
    micro-batches are the powers of two dividing the per-replica batch B / dp (every divisor of it where ``allow``
    opens micro_batch: --allow micro-batches), and one pinned with = whatever it is (docs/model.md#plan-space);
    pipelines (pp > 1) try 1F1B, GPipe, ZB-H1 and interleaved:v for every divisor v >= 2 of the layer count with
    layers divisible by pp v (so the axis is as long as the layer count has divisors, not layers). A hybrid
    pattern with S '|' segments fixes the split: pp divides S, and interleaved:v needs pp v = S
    (docs/model.md#uneven-stages, "Hybrid segments").

    ``narrow``: each integer column in the least signed type that holds its own values (:func:`_narrow`; search's
    columns, which reach the cost model only through grid_from_arrays' int64), otherwise int64.
    """
    c = constraints or {}
    div = divisors(gpus)
    hy = job.shape.hybrid if job.is_transformer else None
    segments = int(hy.segments) if hy is not None else 1
    if job.is_transformer:
        sh = job.shape
        layers, heads, experts = int(sh.layers), int(sh.heads), int(sh.moe_experts)
        tp_c = div[div <= heads]
        if sh.mamba is not None:  # MambaMixer asserts nheads % tp == 0 and ngroups % tp == 0
            tp_c = tp_c[(np.mod(float(sh.mamba.heads), tp_c) == 0) & (np.mod(float(sh.mamba.groups), tp_c) == 0)]
        pp_c = div[div <= layers]
        # a hybrid pattern's '|' segments are the stages: pp divides them (pipeline_ranks._layers_split)
        if segments > 1:
            pp_c = pp_c[(pp_c == 1) | (segments % pp_c == 0)]
        cp_c = div[(div == 1) | (2 * div <= job.seq_len)]
        ep_c = div[div <= experts] if experts > 0 else np.asarray([1])
    else:
        layers = 1
        tp_c = pp_c = cp_c = ep_c = np.asarray([1])
    tp_c, pp_c, cp_c, ep_c = (_restricted(a, c, k) for a, k in ((tp_c, "tp"), (pp_c, "pp"), (cp_c, "cp"), (ep_c, "ep")))
    tp, pp, cp, ep = (a.ravel() for a in np.meshgrid(tp_c, pp_c, cp_c, ep_c, indexing="ij"))
    mp = tp * pp * cp
    ok = gpus % mp == 0
    tp, pp, cp, ep, mp = tp[ok], pp[ok], cp[ok], ep[ok], mp[ok]
    dp = gpus // mp
    # expert tensor parallelism x ep folded over each stage's tp x cp x dp ranks, as Megatron-Core builds its expert
    # grid (megatron/core/parallel_state.py initialize_model_parallel at core_v0.13.1 = ea651a3b, lines 778-800:
    # etp defaults to tp, expert_data_parallel_size = world / (etp ep pp), world % (etp ep pp) == 0 or RuntimeError,
    # the expert RankGenerator over tp=etp, ep, dp=edp, pp with cp=1; the same at d98e8a64dd lines 871-896) and as
    # predict refuses the rest (step.py expert_parallel_invalid: etp x ep | tp cp dp, ep | experts). Unpinned, ep had
    # to divide dp at etp = tp, so the etp 1 layouts of Mixtral / DeepSeek / Qwen3 MoE runs (tp 2-8, etp 1, ep 8-64)
    # were never searched (planmb39). With --allow expert-tp (ALLOW: 1.3-2.3x the CPU, below) each row takes etp 0
    # (Megatron's default, etp = tp) and every proper divisor of
    # tp (Megatron asks nothing of etp but the world's divisibility; a divisor of tp keeps the expert GEMMs' TP split
    # one the dense layers' already divides); torchtitan's layer takes its default 1 (0 becomes 1 where ep > 1:
    # job.grid_from_arrays) and tp, the two its ParallelDims._validate allows (specs.torchtitan_config._titan_etp).
    # A pinned etp (fixed) is every candidate's: no column, the fold at it.
    moe = job.is_transformer and int(job.shape.moe_experts) > 0
    fx = fixed or {}
    titan = int(fx.get("layer_impl", LayerImpl.MEGATRON_TE)) in TORCHTITAN_LAYERS
    searched_etp = moe and "etp" not in fx and "etp" in allow
    if searched_etp:
        e_c = np.concatenate([np.zeros(1, dtype=np.int64), divisors(max(int(tp.max(initial=1)), 1))])
        ok_e = np.broadcast_to(e_c[None, :] == 0, (len(tp), len(e_c))).copy()
        if titan:
            ok_e |= (e_c[None, :] == tp[:, None]) & (tp[:, None] > 1) & (ep[:, None] > 1)
        else:
            ok_e |= (e_c[None, :] > 0) & (tp[:, None] % np.maximum(e_c[None, :], 1) == 0) & (e_c[None, :] < tp[:, None])
        ri, ei = np.nonzero(ok_e)
        tp, pp, cp, ep, dp, etp = tp[ri], pp[ri], cp[ri], ep[ri], dp[ri], e_c[ei]
    else:
        etp = np.full(len(tp), int(fx.get("etp", 0) or 0), dtype=np.int64)
    etp_eff = np.where(etp > 0, etp, np.where(titan & (ep > 1), 1, tp))
    # without --allow expert-tp and no etp pinned: etp = tp and ep carved out of dp, as before (the axis took plan -m
    # mixtral-8x7b -n 64 from 0.95 to 1.27 CPU s and deepseek-v3 -n 256 from 1.55 to 3.53, etp 1 alone beside tp to
    # 1.34 and 2.63: docs/model.md#plan-space), an ep pinned with = folded over tp x cp x dp as predict takes it (a
    # pinned ep 32 at dp 16 x tp 2, validation row dgxc2505_gb200_dsv3_bf16_128, left plan "no split meets what was
    # asked": consist38)
    folds = any(op in ("=", "==") for op, _ in c.get("ep", ()))
    if moe and ("etp" in fx or searched_etp):
        ok = (tp * cp * dp) % (etp_eff * ep) == 0
    else:
        ok = (tp * cp * dp) % ep == 0 if folds else dp % ep == 0
    if moe:
        ok &= int(job.shape.moe_experts) % ep == 0
    if "dp" in c:
        ok &= allowed_by(dp, c["dp"])
    tp, pp, cp, ep, dp, etp = tp[ok], pp[ok], cp[ok], ep[ok], dp[ok], etp[ok]

    # micro-batches: the powers of two dividing the per-replica batch, or with --allow micro-batches every divisor of it
    # (1 alone when dp does not divide B, which evaluate() then reports as batch_not_divisible). Megatron-LM runs any
    # micro-batch dividing B / dp (megatron/core/num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator
    # asserts only global_batch_size % (micro_batch_size x data_parallel_size) == 0), but every divisor costs: GPT-3
    # 175B on 4096 A100s at B 1536 covers 2.0x the candidates for 1.5x the CPU, at B 2880 5.8x for 2.0x (planmb39,
    # docs/model.md#plan-space), and nothing where every B / dp is a power of two (plan's default B, the GPU count, on
    # a power-of-two cluster), so it is opened on request (ALLOW), as cp-exchanges and moe-dispatch are.
    per_replica = np.where(global_batch % dp == 0, global_batch // np.maximum(dp, 1), 1)
    if _open("micro_batch", c, allow):
        mb_c = _unique(np.concatenate([divisors(int(v)) for v in _unique(np.maximum(per_replica, 1))]
                                      or [np.ones(1, dtype=np.int64)]))
    else:
        top = max(int(per_replica.max(initial=1)), 1)
        mb_c = 2 ** np.arange(int(math.log2(top)) + 1)
    # a micro-batch pinned with = (--constraint micro_batch=6, a --strategy file's, scale --best's --micro-batch) is a
    # candidate whatever it is, as predict prices it: a pinned 6 (MaxText's per_device_batch_size 6 on 1024 v5e chips,
    # validation row mtv5e23_v5e_16b_4x256) left plan "no split meets what was asked" (consist38)
    pinned = [int(v) for op, v in c.get("micro_batch", ()) if op in ("=", "==") and int(v) >= 1]
    if pinned:
        mb_c = np.union1d(mb_c, np.asarray(pinned, dtype=mb_c.dtype))
    ok2 = (per_replica[:, None] % mb_c[None, :]) == 0
    if "micro_batch" in c:
        ok2 &= allowed_by(mb_c, c["micro_batch"])[None, :]
    li, mi = np.nonzero(ok2)
    tp, pp, cp, ep, dp, mb, etp = tp[li], pp[li], cp[li], ep[li], dp[li], mb_c[mi], etp[li]

    # schedules: (code, v); only 1f1b without a pipeline, interleaved:v needs layers % (pp v) == 0
    # with '|' segments, interleaved:v needs pp v = the segments instead (Megatron-LM validate_args derives v)
    vs = divisors(max(segments if segments > 1 else layers, 1))
    vs = vs[vs >= 2]
    # an interleaved:v pinned with = is a candidate whatever v, as predict prices it: the stage split decides
    # (pipeline_ranks._layers_split: strategy.stage_layers or first/last chunk layers, else layers_not_divisible).
    # DeepSeek-V3's 61 layers at pp 4 x interleaved:8 over stage_layers (validation row
    # automodel26_h100_dsv3_fsdp64_ep64_256) left plan "no split meets what was asked" (consist38)
    pinned_v = np.asarray(sorted({int(v) for op, (code, v) in c.get("schedule", ()) if op in ("=", "==")
                                  and code == ScheduleKind.INTERLEAVED and v is not None and int(v) >= 2}),
                          dtype=vs.dtype)
    if segments == 1 and len(pinned_v):
        vs = np.union1d(vs, pinned_v)
    flat_kinds = [k for k in ScheduleKind if k != ScheduleKind.INTERLEAVED]
    sched = np.concatenate([np.asarray(flat_kinds, dtype=np.int64),
                            np.full(len(vs), ScheduleKind.INTERLEAVED, dtype=np.int64)])
    virt = np.concatenate([np.ones(len(flat_kinds), dtype=np.int64), vs])
    ok3 = (pp[:, None] > 1) | (sched[None, :] == ScheduleKind.ONE_F_ONE_B)
    split = (pp[:, None] * virt[None, :] == segments) if segments > 1 else (
        (layers % (pp[:, None] * virt[None, :]) == 0) | np.isin(virt, pinned_v)[None, :])
    ok3 &= (sched[None, :] != ScheduleKind.INTERLEAVED) | split
    if segments > 1:  # a flat schedule's stages are the segments themselves
        ok3 &= (sched[None, :] == ScheduleKind.INTERLEAVED) | (pp[:, None] == 1) | (pp[:, None] == segments)
    if "schedule" in c:
        for op, (code, v) in c["schedule"]:
            match = (sched == code) & ((virt == v) if v is not None else True)
            ok3 &= (match if op in ("=", "==") else ~match)[None, :]
    if "virtual_stages" in c:
        ok3 &= allowed_by(virt, c["virtual_stages"])[None, :]
    ci, si = np.nonzero(ok3)
    cfg = {"dp": dp[ci], "tp": tp[ci], "pp": pp[ci], "cp": cp[ci], "ep": ep[ci], "micro_batch": mb[ci],
           "schedule": sched[si], "virtual_stages": virt[si], **({"etp": etp[ci]} if searched_etp else {})}
    return _with_layouts(_with_state_offload(job, _with_moe_dispatch(job, _with_cp_exchange(job, cfg, c, allow), c,
                                                                     allow), allow), c, narrow)


def _narrow(v: np.ndarray) -> np.ndarray:
    """An integer column in the least of int8, int16, int32 that holds every value it has (its own least and greatest
    value checked, so no value changes), or as it is (int64 beyond, bool, an empty column). The planner's
    configuration columns hold degrees and counts (dp, tp, pp, cp, ep <= GPUs, micro-batch <= the per-replica batch,
    interleaving v <= layers) and choice codes (< 10): ``plan -n 73513440`` on a 1e8-GPU cluster kept 14 int64
    columns of 5.3 M rows (593 MB); narrowed, dp is int32 and the others int8 / int16."""
    if v.dtype.kind != "i" or not len(v):
        return v
    least, most = int(v.min()), int(v.max())
    for kind in (np.int8, np.int16, np.int32):
        info = np.iinfo(kind)
        if info.min <= least and most <= info.max:
            return v.astype(kind)
    return v


def _expand(cfg: dict[str, np.ndarray], group: np.ndarray, options: list[dict[str, list[Any]]], names: Sequence[str]
            ) -> dict[str, np.ndarray]:
    """Each row of ``cfg`` times the options of its group (``options[group[row]]``: {column: values} over ``names``,
    every column as long): rows keep their order, each followed by its options in order (the default first)."""
    if not len(group):
        return {**cfg, **{n: np.zeros(0, dtype=np.int64) for n in names}}
    counts = np.asarray([len(o[names[0]]) for o in options], dtype=np.int64)
    if np.all(counts == 1):  # one option a group: the rows as they are (the same arrays), each its group's values
        # (the repeat below copied every column of every row: plan -n 73513440, 2 x 13 columns of 5.3 M rows)
        return {**cfg, **{n: np.asarray([o[n][0] for o in options])[group] for n in names}}
    rep = counts[group]
    rows = np.repeat(np.arange(len(group)), rep)
    pos = np.arange(len(rows)) - np.repeat(np.cumsum(rep) - rep, rep)
    at = (np.cumsum(counts) - counts)[group[rows]] + pos
    out = {k: v[rows] for k, v in cfg.items()}
    for n in names:
        vals = np.asarray([x for o in options for x in o[n]])
        out[n] = (vals if vals.size else vals.astype(np.int64))[at]
    return out


def _flag_values(c: Constraints, key: str, allow: frozenset[str]) -> list[bool]:
    """The values of a searched flag that the constraints on ``key`` allow, False (the default) first; only the first
    unless ``allow`` opens the flag or a constraint names it (otherwise predict's default is the one searched)."""
    values = [v for v in (False, True) if key not in c or bool(allowed_by(np.asarray(v), c[key]))]
    return values if key in allow or key in c else values[:1]


def _with_cp_exchange(job: Job, cfg: dict[str, np.ndarray], c: Constraints,
                      allow: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """The configurations x context parallelism's exchange (strategy cp_comm_type, docs/model.md#cp-comm-type):
    with cp > 1, p2p (the default), all_gather, a2a and a2a+p2p with each a2a group size A = cp_a2a_size a proper
    divisor of cp (1 < A < cp: A = 1 prices as p2p and A = cp as a2a, TE's own fallbacks). The all-to-all kinds
    only where Transformer Engine runs them: the all-to-all group (cp for a2a, A for a2a+p2p) divides the heads and
    KV heads per TP rank (step's heads_not_divisible, which predict refuses), and tp divides the heads. With cp = 1
    there is no exchange: one row (the first allowed type). A pinned (equality) cp_comm_type or cp_a2a_size is
    kept on every cp > 1 row, every divisor of cp for a pinned a2a+p2p, and feasibility refuses the rows TE does
    not run, as it did for the fixed field (counted as heads_not_divisible). The exchanges other than p2p are
    searched only where ``allow`` opens ``cp_comm_type`` (``--allow cp-exchanges``) or a constraint names
    cp_comm_type or cp_a2a_size; otherwise every row keeps p2p, the default, as predict does."""
    opened = "cp_comm_type" in allow or "cp_comm_type" in c or "cp_a2a_size" in c
    allowed = [int(t) for t in CpCommType if (opened or t == CpCommType.P2P) and (
        "cp_comm_type" not in c or allowed_by(np.asarray(int(t)), c["cp_comm_type"]))]
    size_pin = [int(v) for op, v in c.get("cp_a2a_size", []) if op in ("=", "==")]
    pinned = _pinned_equal(c, "cp_comm_type") or bool(size_pin)
    other = size_pin[0] if size_pin else 1  # the size the other exchanges carry (they ignore it)
    heads = kv = 0
    mla = False
    if job.is_transformer:
        sh = job.shape
        heads, kv, mla = int(sh.heads), int(sh.kv_heads), bool(np.any(sh.mla))
    if len(allowed) == 1 and allowed[0] != CpCommType.A2A_P2P:
        # one exchange, one size: every row takes it (a2a where TE does not run it falls back to it too, below),
        # without pricing each (cp, tp) apart (plan -n 73513440: 6,753 pairs in a Python loop)
        return _expand(cfg, np.zeros(len(cfg["dp"]), dtype=np.int64),
                       [{"cp_comm_type": [allowed[0]], "cp_a2a_size": [other]}], ("cp_comm_type", "cp_a2a_size"))
    span = int(cfg["tp"].max(initial=0)) + 1
    uk, group = _levels(cfg["cp"] * span + cfg["tp"])  # 1-D: np.unique(axis=0) loads numpy.ma
    options: list[dict[str, list[Any]]] = []
    for cp, tp in zip((uk // span).tolist(), (uk % span).tolist(), strict=True):
        h_local = heads // tp if heads and heads % tp == 0 else 0
        kv_local = h_local if mla else max(kv // tp, 1)

        def runs(n_a: int, h: int = h_local, k: int = kv_local, c_: int = cp) -> bool:
            """TE's all-to-all asserts (step._feasibility), or kept when pinned."""
            return pinned or (h > 0 and h % n_a == 0 and k % n_a == 0 and c_ % n_a == 0)

        types: list[int] = []
        sizes: list[int] = []
        for t in (allowed if cp > 1 else allowed[:1]):
            if cp == 1 or t in (CpCommType.P2P, CpCommType.ALL_GATHER) or (t == CpCommType.A2A and runs(cp)):
                types.append(t)
                sizes.append(other)
            elif t == CpCommType.A2A_P2P:
                d = divisors(int(cp))
                a = np.asarray(size_pin[:1]) if size_pin else d if _pinned_equal(c, "cp_comm_type") else d[
                    (d > 1) & (d < cp)]
                a = [int(x) for x in _restricted(a, c, "cp_a2a_size") if runs(int(x))]
                types += [t] * len(a)
                sizes += a
        if not types:  # nothing the constraints allow runs here: the first allowed, refused by feasibility
            types, sizes = allowed[:1], [other]
        options.append({"cp_comm_type": types, "cp_a2a_size": sizes})
    return _expand(cfg, np.ravel(group), options, ("cp_comm_type", "cp_a2a_size"))


def _with_moe_dispatch(job: Job, cfg: dict[str, np.ndarray], c: Constraints,
                       allow: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """The configurations x the expert-parallel dispatch (docs/model.md#ep-hierarchical, #moe-a2a-overlap): for an
    MoE model with ep > 1, NCCL's all-to-all or the flex dispatcher (moe_flex_dispatcher, DeepEP / HybridEP) x the
    all-to-alls exposed or overlapped with another micro-batch (moe_a2a_overlap), the overlap only where
    Megatron-Core runs it (no pipeline, or the interleaved schedule: job._check_moe_a2a_overlap; full recompute and
    selective recompute of moe are outside the space, :func:`outer_valid`). ep = 1 and dense models: one row
    (False, or the pinned value, which predict refuses or does not price there, as before). Searched only where
    ``allow`` opens them (``--allow moe-dispatch``) or a constraint names one; otherwise the defaults (NCCL's
    all-to-all, exposed), as predict prices them. The flex dispatcher's backend (moe_flex_backend: deepep, then
    hybridep) is searched on the flex rows under the same ``allow`` (or a constraint on it); the rows with NCCL's
    all-to-all carry the first allowed backend, which prices nothing there. A constraint on the backend also opens
    the flex dispatcher, as one on cp_a2a_size opens cp_comm_type: the backend acts only on flex rows, so without
    them a pinned ``hybridep`` ranked NCCL plans under its name."""
    key = "moe_flex_backend"
    flex = _flag_values(c, "moe_flex_dispatcher", allow | {"moe_flex_dispatcher"} if key in c else allow)
    over = _flag_values(c, "moe_a2a_overlap", allow)
    backends = [int(b) for b in FlexBackend if key not in c or bool(allowed_by(np.asarray(int(b)), c[key]))]
    backends = backends if key in allow or key in c else backends[:1]
    moe = job.is_transformer and int(job.shape.moe_experts) > 0
    one: dict[str, list[Any]] = {"moe_flex_dispatcher": [flex[0]], "moe_a2a_overlap": [over[0]], key: [backends[0]]}
    if not moe or not np.any(cfg["ep"] > 1):
        return _expand(cfg, np.zeros(len(cfg["ep"]), dtype=np.int64), [one], list(one))
    blocked = (cfg["pp"] > 1) & (cfg["schedule"] != ScheduleKind.INTERLEAVED)
    group = np.where(cfg["ep"] > 1, np.where(blocked, 2, 1), 0)
    pinned = "moe_a2a_overlap" in c  # a pinned overlap keeps the rows predict refuses: counted infeasible
    options = [one]
    for b in (False, True):
        rows = [(f, o, k) for f in flex for o in over if pinned or not (o and b)
                for k in (backends if f else backends[:1])]
        options.append({"moe_flex_dispatcher": [r[0] for r in rows], "moe_a2a_overlap": [r[1] for r in rows],
                        key: [r[2] for r in rows]})
    return _expand(cfg, group, options, list(one))


def _with_state_offload(job: Job, cfg: dict[str, np.ndarray], allow: frozenset[str] = frozenset()
                        ) -> dict[str, np.ndarray]:
    """The configurations x the model states' host offload (strategy offload_states, docs/model.md#state-offload):
    none, optimizer, optimizer+params on every row where ``allow`` opens it (``--allow offload``) and the cluster
    gives its host link; a ZeRO stage that cannot run a value is counted state_offload_invalid. Otherwise no column:
    every candidate at predict's default (none), or at plan's pinned value (a fixed field, :func:`search` then
    leaves the search closed). A column, not an outer axis: the memory rows key on it (it is not in
    :data:`MEMORY_BLIND`), so each value's states are priced."""
    if "offload_states" not in allow or job.host_bandwidth <= 0:
        return cfg
    options = [{"offload_states": [int(m) for m in StateOffload]}]
    return _expand(cfg, np.zeros(len(cfg["dp"]), dtype=np.int64), options, ("offload_states",))


def outer_valid(job: Job, g: StrategyGrid) -> np.ndarray:
    """Which outer candidates are in the space: sequence parallelism needs tp > 1, and moe_a2a_overlap runs
    without full recompute and without selective recompute of moe (Megatron-Core TransformerConfig, as predict
    refuses: job._check_moe_a2a_overlap), and moe_shared_expert_overlap (pinned) without selective recompute of the
    shared experts of a model that has them (job._check_shared_expert_overlap), so those pairs are no candidates (not
    infeasible ones)."""
    ok = ~(g.sequence_parallel & (g.tp == 1))
    if np.any(g.moe_a2a_overlap):
        ok = ok & ~(g.moe_a2a_overlap & ((g.recompute == Recompute.FULL) | moe_block_recomputed(job, g)))
    shared = np.asarray(g.moe_shared_expert_overlap, dtype=bool)
    if np.any(shared) and job.is_transformer and float(job.shape.moe_shared_experts) > 0:
        # Megatron-Core: "shared_experts recompute cannot work with --moe-shared-expert-overlap"
        # (job._check_shared_expert_overlap)
        again = transformer.recomputed_modules(job.shape, g.recompute, g.recompute_modules).shared_experts
        ok = ok & ~(shared & np.asarray(again, dtype=bool))
    return np.asarray(ok)


def _with_layouts(cfg: dict[str, np.ndarray], c: Constraints, narrow: bool = False) -> dict[str, np.ndarray]:
    """The configurations x the rank orders (choices.Layout) the constraints allow: each configuration
    takes every order that numbers its ranks differently from the allowed orders before it (with pp = 1
    or dp = 1 the two orders coincide: one candidate), except PP inside DP with ep > 1 and a pipeline,
    which Megatron-LM does not run (step.Infeasible.LAYOUT_INVALID). A configuration's orders are adjacent
    rows, its first allowed order first. ``narrow``: the columns gathered narrowed (:func:`_narrow`), the orders
    found from the int64 columns."""
    lay = _restricted(np.asarray([int(m) for m in Layout]), c, "layout")
    among = tuple(Layout.of(x) for x in lay)
    col = {k: v[:, None] for k, v in cfg.items()}
    ok = distinct_layout(lay[None, :], tp=col["tp"], cp=col["cp"], dp=col["dp"], pp=col["pp"], among=among)
    pp_inner = np.asarray([m.dims[-1] != "pp" for m in among])[None, :]
    ok &= ~(pp_inner & (col["pp"] > 1) & (col["ep"] > 1))
    ri, li = np.nonzero(ok)
    if narrow:
        return {**{k: _narrow(v)[ri] for k, v in cfg.items()}, "layout": _narrow(lay)[li]}
    return {**{k: v[ri] for k, v in cfg.items()}, "layout": lay[li]}


def _pinned_equal(c: Constraints, key: str) -> bool:
    """Whether ``key`` is fixed by an equality constraint (an explicit request opens custom choices)."""
    return any(op in ("=", "==") for op, _v in c.get(key, []))


def _open(key: str, c: Constraints, allow: frozenset[str]) -> bool:
    return key in allow or _pinned_equal(c, key)


def _axes(job: Job, c: Constraints) -> dict[str, np.ndarray]:
    """The outer axes besides the configurations: ZeRO/FSDP, recompute, sequence parallelism."""
    zero = np.asarray(list(Zero))
    # selective recompute has no meaning for a generic model
    rec = np.asarray([r for r in Recompute if job.is_transformer or r != Recompute.SELECTIVE])
    sp = np.asarray([False, True]) if job.is_transformer else np.asarray([False])
    return {"zero": _restricted(zero, c, "zero"), "recompute": _restricted(rec, c, "recompute"),
            "sequence_parallel": _restricted(sp, c, "sequence_parallel")}


def _match(pairs: list[tuple[str, Any]], value: tuple[Any, Any]) -> bool:
    """Categorical (a, b) pairs against = / != constraints whose b (or a = -1) may be a wildcard None."""
    ok = True
    for op, (a, b) in pairs:
        hit = (a == -1 and value[0] > 0 or a == value[0]) and (b is None or b == value[1])
        ok &= hit if op in ("=", "==") else not hit
    return bool(ok)


def comm_choices(job: Job, gpus: int, c: Constraints, allow: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """The data-parallel communication choices as 1-D arrays over :data:`COMM_FIELDS` (choice 0 the
    simplest allowed). All-reduce: algorithm x compression (top-k at :data:`TOPK_RATIOS`) x overlap x
    bucket (:data:`BUCKET_BYTES`) x assignment; parameter server: K servers (powers of two up to the
    GPU count), dedicated or colocated, x overlap x assignment (algorithm, compression and bucket do
    not apply). Non-mainstream members only where ``allow`` (or an equality constraint) opens them."""
    def allowed(key: str, members: list[int]) -> list[int]:
        if _open(key, c, allow):
            return members
        return [m for m in members if m in MAINSTREAM[key]]

    algos = [a for a in allowed("algorithm", [int(a) for a in Algorithm])
             if "algorithm" not in c or allowed_by(np.asarray(a), c["algorithm"])]
    comps: list[tuple[int, float]] = []
    for k in allowed("compression", [int(k) for k in CompressionKind]):
        for r in (TOPK_RATIOS if k == CompressionKind.TOPK else (1.0,)):
            if "compression" in c:
                exact = [v for op, (kk, v) in c["compression"] if op in ("=", "==") and kk == k and v is not None]
                if k == CompressionKind.TOPK and exact:
                    r = exact[0]
                if not _match(c["compression"], (k, r)):
                    continue
            if (k, r) not in comps:
                comps.append((k, r))
    overlaps = [o for o in (True, False) if "overlap" not in c or allowed_by(np.asarray(o), c["overlap"])]
    buckets = [b for b in BUCKET_BYTES if "bucket" not in c or allowed_by(np.asarray(b), c["bucket"])]
    if "bucket" in c:
        buckets += [v for op, v in c["bucket"] if op in ("=", "==") and v not in buckets]
    assigns = [a for a in allowed("assignment", [int(a) for a in Assignment])
               if "assignment" not in c or allowed_by(np.asarray(a), c["assignment"])]
    servers: list[tuple[int, bool]] = []
    if 0 in allowed("dp_comm", [0, 1]) and ("dp_comm" not in c or _match(c["dp_comm"], (0, False))):
        servers.append((0, False))
    if _open("dp_comm", c, allow):
        ks = [2 ** i for i in range(int(math.log2(max(gpus, 1))) + 1)]
        ks += [k for op, (k, _p) in c.get("dp_comm", []) if op in ("=", "==") and k > 0 and k not in ks]
        servers += [(k, col) for k in ks for col in (False, True)
                    if "dp_comm" not in c or _match(c["dp_comm"], (k, col))]
    rows: list[tuple[Any, ...]] = []
    for k, col in servers:
        if k == 0:
            rows += [(a, cm, r, 0, False, o, b, asg) for a in algos for (cm, r) in comps for o in overlaps
                     for b in buckets for asg in assigns]
        elif int(Algorithm.AUTO) in algos and (int(CompressionKind.NONE), 1.0) in comps and 0.0 in buckets:
            rows += [(int(Algorithm.AUTO), int(CompressionKind.NONE), 1.0, k, col, o, 0.0, asg)
                     for o in overlaps for asg in assigns]
    if not rows:
        raise InputError("the constraints leave no data-parallel communication choice",
                         where="--constraint / --set strategy.*",
                         allowed="an algorithm, compression, dp_comm, overlap, bucket and assignment that can go "
                                 "together (a parameter server takes algorithm auto, no compression, bucket default)")
    cols = list(zip(*rows, strict=True))
    out = {name: np.asarray(col) for name, col in zip(COMM_FIELDS, cols, strict=True)}
    out["dynamic_assignment"] = out["dynamic_assignment"] == int(Assignment.DYNAMIC)
    return out


def custom_choices(strategy: dict[str, Any]) -> list[str]:
    """The choices of a strategy dict that mainstream frameworks do not run (see :data:`MAINSTREAM`)."""
    out = []
    if int(Algorithm.parse(strategy["algorithm"])) not in MAINSTREAM["algorithm"]:
        out.append(f"algorithm {strategy['algorithm']} (not an NCCL algorithm)")
    if int(parse_compression(strategy["compression"]).kind) not in MAINSTREAM["compression"]:
        out.append(f"compression {strategy['compression']}")
    if parse_dp_comm(strategy["dp_comm"]).servers:
        out.append(f"dp_comm {strategy['dp_comm']} (parameter server)")
    if int(Assignment.parse(strategy["assignment"])) not in MAINSTREAM["assignment"]:
        out.append(f"assignment {strategy['assignment']}")
    return out


def take_one(grid: StrategyGrid, i: int) -> StrategyGrid:
    """Candidate at flat position ``i`` of a broadcast grid as a 1-element grid (no materialising)."""
    shape = grid.shape
    idx = np.unravel_index(int(i), shape)
    at: dict[tuple[int, ...], tuple[Any, ...]] = {}  # the position in each field shape (the grid's ~100 fields
    # share a handful of shapes), worked out once per shape
    out = {}
    for name in grid.__struct_fields__:
        a = getattr(grid, name)
        if a.shape not in at:
            full = (1,) * (len(shape) - a.ndim) + a.shape
            at[a.shape] = tuple(ix if n > 1 else 0 for ix, n in zip(idx, full, strict=True))[len(shape) - a.ndim:]
        out[name] = a[at[a.shape]].reshape(1)
    one = msgspec.structs.replace(grid, **out)
    one.__dict__["shape"] = (1,)  # every field is (1,): StrategyGrid.shape's cache seeded (broadcasting ~0.1 ms)
    return one


def family(tp: int, pp: int, cp: int, ep: int, dp: int) -> str:
    """Parallelism family of a strategy, e.g. 'DP+TP+PP'."""
    names = [n for n, d in (("DP", dp), ("TP", tp), ("PP", pp), ("CP", cp), ("EP", ep)) if d > 1]
    return "+".join(names) or "single GPU"


def _family_name(code: int) -> str:
    """Inverse of :func:`_family_code`."""
    return family(2 if code & 2 else 1, 2 if code & 4 else 1, 2 if code & 8 else 1, 2 if code & 16 else 1,
                  2 if code & 1 else 1)


def _family_code(cfg: dict[str, np.ndarray]) -> np.ndarray:
    return ((cfg["dp"] > 1) * 1 + (cfg["tp"] > 1) * 2 + (cfg["pp"] > 1) * 4 + (cfg["cp"] > 1) * 8
            + (cfg["ep"] > 1) * 16).astype(np.int64)


# --------------------------------------------------------------------------------------------
# result


@dataclass
class PlanResult:
    """Outcome of :func:`search`. ``ranked`` holds full :class:`Prediction` objects, best first."""

    inputs: dict[str, Any]
    objective: str
    candidates_evaluated: int  # every candidate of the space, accounted for (feasible + infeasible)
    feasible: int
    infeasible_by_reason: dict[str, int]
    elapsed_s: float
    ranked: list[Prediction]
    objective_values: list[float]
    family_best: dict[str, Prediction] = field(default_factory=dict)
    searched_families: list[str] = field(default_factory=list)  # families the enumeration contained
    why: str = ""  # the explanation in words: filled by scalemodel.report.explain.explained
    search: dict[str, Any] = field(default_factory=dict)  # covered / evaluated counts, the method
    equivalents: list[dict[str, list[Any]]] = field(default_factory=list)  # per ranked plan: choices within NEAR
    custom: list[list[str]] = field(default_factory=list)  # per ranked plan: non-mainstream choices
    pareto: list[Prediction] = field(default_factory=list)  # throughput vs time to target vs cost front
    # per ranked plan of a batch-searched time-to-train plan (:func:`_search_batches`): the critical-batch
    # efficiency (B_ref + B_noise) / (B + B_noise), B_ref the smallest batch searched, its time to train divides
    # the budget restated at B_ref (``search["reference_tokens"]``) by besides the sync efficiency
    batch_efficiency: list[float] = field(default_factory=list)

    @property
    def best(self) -> Prediction | None:
        return self.ranked[0] if self.ranked else None

    def payload(self) -> dict[str, Any]:
        ranked = []
        for i, p in enumerate(self.ranked):
            ranked.append({
                "rank": i + 1, "strategy": _readable(p.strategy), "step_time_s": p.step_time_s,
                "tokens_per_s": p.throughput["tokens_per_s"], "mfu": p.flops["mfu"],
                "memory_per_gpu_bytes": p.memory["per_gpu_bytes"], "breakdown_s": p.breakdown_s,
                "statistical_efficiency": p.sync["statistical_efficiency"],
                **({"batch_efficiency": self.batch_efficiency[i]} if i < len(self.batch_efficiency) else {}),
                "time_to_train_s": p.time_to_train_s, "cost_usd": p.cost_usd,
                "did_not_matter": self.equivalents[i] if i < len(self.equivalents) else {},
                "custom": self.custom[i] if i < len(self.custom) else [],
                "interval": p.reported_interval,
            })
        out = {"inputs": self.inputs, "candidates_evaluated": self.candidates_evaluated,
               "feasible": self.feasible, "infeasible_by_reason": self.infeasible_by_reason,
               "search": self.search, "elapsed_s": self.elapsed_s, "ranked": ranked, "why": self.why}
        if self.pareto:
            out["pareto"] = [{
                "strategy": _readable(p.strategy), "tokens_per_s": p.throughput["tokens_per_s"],
                "statistical_efficiency": p.sync["statistical_efficiency"],
                "effective_tokens_per_s": p.throughput["tokens_per_s"] * p.sync["statistical_efficiency"],
                "time_to_train_s": p.time_to_train_s, "cost_usd": p.cost_usd} for p in self.pareto]
        return out


def _scale(objective: str, job: Job, gpus: int, global_batch: int) -> float:
    """Objective value per second of step at statistical efficiency 1 (lower is better)."""
    per_token = 1.0 / (float(global_batch) * job.seq_len)
    return per_token * (gpus * job.price_per_gpu_s if objective == "cost" else 1.0)


def _score(objective: str, job: Job, gpus: int, res: Any, grid: StrategyGrid | None = None, sync: str = "bsp"
           ) -> np.ndarray:
    """Lower is better: seconds per token (throughput), per effective token (time-to-train), or USD: the GPUs held
    (backup:B's replicas of ``grid``'s tp x pp x cp too, :func:`held_gpus`) x their price per effective token.
    :func:`_scale` charges the ``gpus`` alone: its bounds stay below."""
    tok = np.asarray(res.tokens_per_s)
    eff = np.asarray(1.0 if objective == "throughput" else res.statistical_efficiency)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 1.0 / (tok * eff)
    if objective == "cost":
        held = gpus if grid is None else held_gpus(sync, gpus, grid.tp * grid.pp * grid.cp)
        score = score * (held * job.price_per_gpu_s)
    return np.asarray(score)


@dataclass(order=True)
class _Pick:
    score: float
    order: tuple[int, ...]  # (sync index, config row, zero, recompute, sp, choice): deterministic tie-break
    source: tuple[StrategyGrid, int] = field(compare=False)  # the batch's grid and the candidate's flat position
    sync: str = field(compare=False)
    row: np.ndarray | None = field(compare=False, default=None)  # scores over the communication choices
    one: StrategyGrid | None = field(compare=False, default=None)
    result: StepArrays | None = field(compare=False, default=None)  # its evaluation (:func:`_result_one`)

    @property
    def grid(self) -> StrategyGrid:
        """The candidate as a 1-element grid (:func:`take_one`), taken when first asked for: most picks are
        dropped by later, better ones before anything reads them."""
        if self.one is None:
            self.one = take_one(*self.source)
        return self.one


def _sync_mask(cfg: dict[str, np.ndarray], sync: str, spare: int | None = None) -> np.ndarray:
    """Configurations a sync mode applies to: hier:G needs G to divide the data-parallel degree; backup:B needs its
    B replicas of tp x pp x cp GPUs within the ``spare`` GPUs the cluster has beyond the N (None: no bound), the
    bound predict refuses beyond (engine.job.check_backup_workers; review26f: plan ranked layouts predict refuses)."""
    strat = parse_sync(sync)
    if strat.kind == SyncKind.HIER:
        return np.asarray(cfg["dp"].astype(np.int64) % strat.param == 0)  # int64: a narrowed column (_narrow)
    if strat.kind == SyncKind.BACKUP and spare is not None:
        return np.asarray(strat.param * cfg["tp"].astype(np.int64) * cfg["pp"] * cfg["cp"] <= spare)
    return np.ones(len(cfg["dp"]), dtype=bool)


def _no_sync_split(modes: Sequence[str], gpus: int, spare: int) -> str:
    """Why no split takes any of ``modes`` (:func:`_sync_mask` empty for each), for plan's "no split" refusal."""
    said = []
    for sync in modes:
        strat = parse_sync(sync)
        if strat.kind == SyncKind.BACKUP:
            said.append(f"{sync} runs {strat.param:,} replica{'s' if strat.param > 1 else ''} of tp x pp x cp GPUs "
                        f"beside the {gpus:,} GPUs, {spare:,} to spare: no split has tp x pp x cp <= "
                        f"{spare // strat.param:,}")
        elif strat.kind == SyncKind.HIER:
            said.append(f"{sync}'s group of {strat.param:,} divides no split's dp")
    return "; ".join(said)


def _for_sync(cfg: dict[str, np.ndarray], sync: str, spare: int | None = None) -> dict[str, np.ndarray]:
    """The configurations of :func:`_sync_mask`."""
    ok = _sync_mask(cfg, sync, spare)
    return {k: v[ok] for k, v in cfg.items()}


def _family_cutoff(threshold: float, fam_thr: dict[int, float], n_fam: int) -> np.ndarray:
    """Per family code, the bound above which a candidate can reach neither the best ``keep`` values
    (``threshold``) nor the best of its family; inf for a family with no exact value yet."""
    lut = np.full(n_fam, math.inf)
    for f, v in fam_thr.items():
        lut[f] = max(threshold, v)
    return lut


def _bound_factor(job: Job, cfg: dict[str, np.ndarray], sync: str, mask: np.ndarray, objective: str,
                  kappa: float | None, levels: dict[bytes, tuple[np.ndarray, np.ndarray]] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per configuration, what a sync mode makes of a one-worker step time x and of the exposed data-parallel
    traffic c, over the objective's statistical efficiency: (a, b) with score >= (a x + b c) x scale.

    a = ``sync_step(sync, dp, mean=1, comm=0).step_time_s / efficiency`` (efficiency 1 under ``throughput``):
    every straggler family is a scale family (:func:`scalemodel.cost.stragglers.expected_max_step`), so the
    wait grows in proportion to x. b: the step grows by c per second of traffic (bsp, backup, asp, ssp), c / H
    (local:H), or for hier:G by c per second of in-group traffic (the floor hier prices, step.dp_exposed_floor).
    inf where the mode does not apply (``mask``). ``levels``: the distinct dp of each mask and where each row's
    sits, shared by the calls of one search (every mode but hier:G has the same mask; np.unique with its inverse was
    three quarters of a call, 1.3 of 1.7 ms over 52,551 configurations)."""
    a = np.full(len(cfg["dp"]), np.inf)
    b = np.zeros(len(cfg["dp"]))
    if not np.any(mask):
        return a, b
    key = mask.tobytes()
    found = None if levels is None else levels.get(key)
    if found is None:
        found = _levels(cfg["dp"][mask])
        if levels is not None:
            levels[key] = found
    dps, inv = found
    kw: dict[str, Any] = {} if kappa is None else {"kappa": kappa}
    n = dps.astype(float)
    r0 = sync_model.sync_step(sync, n, 1.0, job.straggler_cv, job.straggler_dist, comm_s=0.0, **kw)
    hier = parse_sync(sync).kind == SyncKind.HIER
    r1 = sync_model.sync_step(sync, n, 1.0, job.straggler_cv, job.straggler_dist, comm_s=0.0 if hier else 1.0,
                              group_comm_s=1.0 if hier else None, **kw)
    eff = np.asarray(r0.efficiency, dtype=float) if objective != "throughput" else np.ones(len(dps))
    step0 = np.asarray(r0.step_time_s, dtype=float)
    per_comm = (np.asarray(r1.step_time_s, dtype=float) - step0) / eff
    # a NaN here (a straggler order statistic) read as "mode not applicable" below (np.isfinite prunes): refused
    # (|b|: b's rounding below 0 is clipped below, as it was)
    unit = {"sync step per second of one worker's step": step0 / eff,
            "sync step per second of traffic": np.abs(per_comm)}
    refuse_non_finite(unit, np.minimum(*unit.values()))
    a[mask] = (step0 / eff)[np.ravel(inv)]
    b[mask] = np.maximum(per_comm, 0.0)[np.ravel(inv)]
    return a, b


def _code_histogram(code: np.ndarray, valid: np.ndarray, sharded_z: np.ndarray, n_codes: int, n_choice: int,
                    ps_hit: np.ndarray, n_ps: int, topk_hit: np.ndarray | None = None, n_topk: int = 0
                    ) -> np.ndarray:
    """Per configuration row and ZeRO group (0, > 0), the weighted count of the valid candidates of each code
    (shape (rows, 2, n_codes + 1); code n_codes: feasible but over the memory constraint): each valid outer
    candidate weighs its ``n_choice`` communication choices, less the ``n_ps`` parameter-server ones where
    ``ps_hit`` (a subset of ``valid``), and the ``n_topk`` top-k ones where ``topk_hit`` (ZeRO >= 2:
    step.Infeasible.TOPK_SHARDED_GRADIENTS; no choice is both). Counted in integers (n_choice x all - n_ps x hits:
    exact, as the weighted
    float sum of whole numbers below 2^53 was), which spares a float weight array over the grid. The candidates
    left out go to one extra bin, dropped after the count: ``at[valid]``, a gather through a broadcast mask, took
    twice as long as the np.where (2.0 vs 0.9 ms of the 3.7 ms per 400,000-candidate chunk), the counts the same."""
    n_rows = code.shape[0]
    n_bins = n_rows * 2 * (n_codes + 1)
    at = (np.arange(n_rows).reshape(-1, 1, 1, 1) * 2 + sharded_z.reshape(1, -1, 1, 1)) * (n_codes + 1) + code
    counts = np.bincount(np.where(valid, at, n_bins).ravel(), minlength=n_bins + 1)[:n_bins] * n_choice
    if n_ps and np.any(ps_hit):
        counts = counts - np.bincount(np.where(ps_hit, at, n_bins).ravel(), minlength=n_bins + 1)[:n_bins] * n_ps
    if n_topk and topk_hit is not None and np.any(topk_hit):
        counts = counts - np.bincount(np.where(topk_hit, at, n_bins).ravel(),
                                      minlength=n_bins + 1)[:n_bins] * n_topk
    return counts.astype(float).reshape(n_rows, 2, n_codes + 1)


class _ClosedSplit:
    """Pass 1a's classification of a chunk split at ``need`` (per row: some valid candidate whose code before memory
    leaves memory to decide, :func:`_open_code`) where the codes before memory ``r1`` have no ZeRO axis. A closed
    row's candidates all take r1's code, fitting or not, at every ZeRO stage, and none is feasible or a parameter
    server's or top-k's hit (those need an open code): its histogram is its codes' counts at one stage times the
    number of stages in each ZeRO group, exact in integers as :func:`_code_histogram`'s. ``plan -n 73513440`` on a
    1e8-GPU cluster: 50,164 of 5.3 M configurations are open, so classify at (rows, 6, 3, 2) ran on the closed
    rows for nothing (tests/test_speed36.py compares the split with classify on every row)."""

    def __init__(self, need: np.ndarray, r1: np.ndarray, valid: np.ndarray, sharded_z: np.ndarray, n_codes: int,
                 n_choice: int) -> None:
        self.need, self.open_rows = need, np.nonzero(need)[0]
        n = len(need)
        own = np.broadcast_shapes((n, 1, 1, 1), r1.shape, valid.shape)  # one ZeRO stage
        one = _code_histogram(np.broadcast_to(r1, own), np.broadcast_to(valid, own) & ~need.reshape(-1, 1, 1, 1),
                              np.zeros(1, dtype=bool), n_codes, n_choice, np.zeros((1, 1, 1, 1), dtype=bool), 0)
        per_group = np.asarray([np.count_nonzero(~sharded_z), np.count_nonzero(sharded_z)], dtype=float)
        self.hist = one[:, :1] * per_group.reshape(1, 2, 1)  # open rows: 0 (classify's counts replace them)

    def run(self, classify: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], mem: np.ndarray,
            r1: np.ndarray, valid: np.ndarray, zb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``classify(mem, r1, valid, zb)``'s (good, histogram, parameter-server hits, top-k hits) on every row of
        the chunk (``mem``, ``valid``, ``zb`` at its full shape), classify run on the open rows alone."""
        at = self.open_rows
        got = classify(mem[at], np.broadcast_to(r1, (len(self.need), *r1.shape[1:]))[at], valid[at], zb[: len(at)])
        good = np.zeros(mem.shape, dtype=bool)
        good[at] = got[0]
        hist = self.hist.copy()
        hist[at] = got[1]
        hits = []
        for part in got[2:]:
            every = np.zeros(len(self.need), dtype=np.asarray(part).dtype)
            every[at] = part
            hits.append(every)
        return good, hist, hits[0], hits[1]


def _top_up(part: np.ndarray, batches: list[np.ndarray], later: list[int],
            refilter: Callable[[np.ndarray], np.ndarray], per2: int) -> np.ndarray:
    """Pass 2's batch ``part`` (fewer than ``per2`` rows once the cutoffs thinned it) topped up with the rows of its
    class's ``later`` batches still in reach, the best batches first: to ``per2`` rows, or all of them where they come
    to at most ``per2 // 2`` more (no batch of a few rows is left for last). The rows not taken go back to those
    batches, ``per2`` at most each. An evaluate() costs tens of ms whatever its size (plan (b): 6 calls, of 10 to
    1,388 rows, became 3). Which batch evaluates a row changes no result: every candidate that can reach the final
    picks is evaluated whenever it is, and the picks are ranked by (score, order)."""
    more = np.concatenate([refilter(batches[k]) for k in later])
    take = len(more) if len(part) + len(more) <= per2 + per2 // 2 else per2 - len(part)
    rest = more[take:]
    for i, k in enumerate(later):
        batches[k] = rest[i * per2:(i + 1) * per2]
    return np.concatenate([part, more[:take]])


def _class_factor(factor: list[tuple[np.ndarray, np.ndarray]], mode_mask: list[np.ndarray], members: list[int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The least (a, b) of :func:`_bound_factor` over the sync modes ``members`` of an evaluation class, per
    configuration (a = inf, b = 0 where none of them applies: such candidates are pruned)."""
    n = len(mode_mask[0]) if mode_mask else 0
    if not members:
        return np.full(n, np.inf), np.zeros(n)
    a = np.min([factor[si][0] for si in members], axis=0)
    b = np.min([np.where(mode_mask[si], factor[si][1], np.inf) for si in members], axis=0)
    return a, np.where(np.isfinite(b), b, 0.0)


def _result_one(res: StepArrays, i: int) -> StepArrays:
    """Candidate ``i`` (flat position) of an evaluation as a 1-candidate result: every array field (and those of its
    dicts) taken at ``i``, ``extras`` left out. A pick keeps it, not the batch's arrays, and its prediction is read
    from it (:func:`_predict_all`): the values the search ranked, without evaluating the picks again."""
    at = np.unravel_index(i, np.shape(res.step_time))

    def one(a: Any) -> Any:
        if isinstance(a, dict):
            return {k: one(v) for k, v in a.items()}
        arr = np.asarray(a)
        return arr[at].reshape(1) if arr.ndim else arr.reshape(1)

    return msgspec.structs.replace(res, **{f: one(getattr(res, f)) for f in res.__struct_fields__ if f != "extras"},
                                   extras={})


def _predict_all(job: Job, picks: list[_Pick]) -> list[Prediction]:
    """Full predictions for the picked candidates, from the evaluation each was ranked by (:func:`_result_one`)."""
    out = []
    for p in picks:
        assert p.result is not None  # every pick is made in pass 2, with its result
        out.append(result_at(job, p.grid, p.result, 0, sync=p.sync, inputs=None))
    return out


class _Best:
    """The ``n`` smallest values seen per key (an outer candidate keeps its smallest): the pruning threshold."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.values: dict[tuple[int, ...], float] = {}

    def add(self, keys: list[tuple[int, ...]], values: np.ndarray) -> None:
        for k, v in zip(keys, values.tolist(), strict=True):
            if v < self.values.get(k, math.inf):
                self.values[k] = v
        if len(self.values) > 4 * self.n:
            kept = heapq.nsmallest(self.n, self.values.items(), key=lambda kv: kv[1])
            self.values = dict(kept)

    @property
    def threshold(self) -> float:
        if len(self.values) < self.n:
            return math.inf
        return heapq.nsmallest(self.n, self.values.values())[-1]


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [k for k in a if k not in ("gpus", "global_batch") and a[k] != b.get(k)]


def _collapse(picks: list[_Pick], strategies: list[dict[str, Any]], top: int
              ) -> tuple[list[int], list[dict[str, list[Any]]]]:
    """Indices of the plans to show (at most ``top``) and, for each, the choices that did not matter:
    a later plan within NEAR of a shown one that differs from it in one choice is folded into it."""
    shown: list[int] = []
    same: list[dict[str, list[Any]]] = []
    for i, p in enumerate(picks):
        folded = False
        for j, k in enumerate(shown):
            if p.score <= picks[k].score * (1 + NEAR):
                diff = _differing(strategies[k], strategies[i])
                if len(diff) == 1:
                    vals = same[j].setdefault(diff[0], [strategies[k][diff[0]]])
                    if strategies[i][diff[0]] not in vals:
                        vals.append(strategies[i][diff[0]])
                    folded = True
                    break
        if not folded:
            if len(shown) == top:
                continue
            shown.append(i)
            same.append({})
    return shown, same


def _comm_equivalents(p: _Pick, choices: dict[str, np.ndarray], into: dict[str, list[Any]]) -> None:
    """Communication choices that differ from the plan's own in one field and score within NEAR."""
    if p.row is None:
        return
    best = int(p.order[-1])
    own: dict[str, Any] = {}  # the plan's own strategy, described once
    for i in np.nonzero(np.isfinite(p.row) & (p.row <= p.score * (1 + NEAR)))[0]:
        if i == best:
            continue
        diff = [f for f in COMM_FIELDS if choices[f][i] != choices[f][best]]
        if len(diff) == 1 or diff == ["compression", "topk_ratio"]:
            # p.grid is one candidate (take_one: every field of shape (1,)) and so is this: no take_one again, only
            # StrategyGrid.shape's cache seeded, which replace leaves out (~0.1 ms of broadcasting a grid)
            alt = msgspec.structs.replace(p.grid, **{f: np.asarray([choices[f][i]]) for f in COMM_FIELDS})
            alt.__dict__["shape"] = (1,)
            one = alt.describe(0)
            name = {"ps_servers": "dp_comm", "ps_colocated": "dp_comm", "topk_ratio": "compression",
                    "bucket_bytes": "bucket_bytes", "dynamic_assignment": "assignment"}.get(diff[0], diff[0])
            own = own or p.grid.describe(0)
            mine = own[name]
            vals = into.setdefault(name, [mine])
            if one[name] not in vals:
                vals.append(one[name])


#: Configuration columns the compute floor does not read (step.compute_floor: the rank order, and the EP dispatch,
#: which changes only EP traffic and its contention): rows that differ only in them share one floor.
FLOOR_BLIND = ("layout", "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend")
#: Configuration columns memory does not read (stage_memory.memory_total), but for all_gather's gathered K and V
#: (compute.cp_gathered_bytes, a per-GPU workspace added to every stage's total): :func:`_memory_rows`.
MEMORY_BLIND = ("cp_comm_type", "cp_a2a_size", "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend")


def _memory_rows(job: Job, cfg: dict[str, np.ndarray], lo: int, hi: int, hsdp: np.ndarray | None = None
                 ) -> tuple[dict[str, np.ndarray] | None, np.ndarray, np.ndarray | float]:
    """For configuration rows lo:hi: (the configurations whose memory is priced, None for the rows themselves; each
    row's index among them; the bytes a row adds to it). Rows that differ only in the rank order and in
    :data:`MEMORY_BLIND` columns take one pricing. Memory reads the rank order only through HSDP's default shard group
    (dp_comm.hsdp_shard_group: the replicas in a node, by the order's data-parallel stride), so ``hsdp``, each row's
    group where HSDP is searched (None where not), is compared in its place: plan (b)'s rank-order twins halve the
    rows priced. Where the :data:`MEMORY_BLIND` columns differ, the pricing is at cp_comm_type p2p: memory reads
    none of them but cp_comm_type all_gather's transient gathered K, V and their gradients (``workspace``, added to
    each stage's total, so to the peak), added here per row; where they do not, a row takes its twin's memory as is
    (gathered 0.0, not added)."""
    blind = [cfg[k][lo:hi] for k in MEMORY_BLIND if k in cfg]
    same_blind = all(np.all(v == v[0]) for v in blind if len(v))
    cols = [v[lo:hi] for k, v in cfg.items() if k not in MEMORY_BLIND and k != "layout"]
    if hsdp is not None:
        cols.append(hsdp)
    _u, first, inv = np.unique(_row_key(cols), return_index=True, return_inverse=True)
    if len(first) == hi - lo and same_blind:
        return None, np.arange(hi - lo), 0.0
    rep = {k: v[lo + first] for k, v in cfg.items()}
    if same_blind:
        return rep, np.ravel(inv), 0.0
    gathered: np.ndarray | float = 0.0
    ag = (cfg["cp_comm_type"][lo:hi] == CpCommType.ALL_GATHER) & (cfg["cp"][lo:hi] > 1)
    if job.is_transformer and np.any(ag):
        gathered = compute.cp_gathered_bytes(
            job.shape, micro_batch=cfg["micro_batch"][lo:hi].astype(np.int64), seq_len=job.seq_len,
            tp=cfg["tp"][lo:hi].astype(np.int64), cp=cfg["cp"][lo:hi].astype(np.int64),
            cp_comm_type=cfg["cp_comm_type"][lo:hi].astype(np.int64),
            elem_bytes=job.elem_bytes).reshape(-1, 1, 1, 1)
    rep["cp_comm_type"] = np.zeros(len(first), dtype=np.int64)  # p2p: no gathered bytes (memory_total)
    return rep, np.ravel(inv), gathered


def _row_key(cols: list[np.ndarray]) -> np.ndarray:
    """One int64 per row, equal exactly where the rows are equal in every column (each column ranked, the ranks
    combined in mixed radix, re-ranked before the product could overflow): 1-D, so np.unique sorts integers. An
    integer column whose values span at most 4x its length is ranked by its offset from its least value, without the
    sort np.unique's ranks take (the configuration columns: 11 of pass 1a's 15 ms a chunk of plan (b)), where its
    values fit int64 (a uint64 column above 2^63 is ranked by np.unique)."""
    key = np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
    span = 1
    for col in cols:
        most = int(col.max()) if col.dtype.kind in "biu" and len(col) else 2 ** 63
        least = int(col.min()) if most < 2 ** 63 else 0
        n_vals = most - least + 1 if most < 2 ** 63 else 0
        if 0 < n_vals <= 4 * len(col):
            rank = col.astype(np.int64) - least
        else:
            vals, rank = np.unique(col, return_inverse=True)
            n_vals = len(vals)
        if span * n_vals >= 2 ** 62:
            uk, key = np.unique(key, return_inverse=True)
            span = len(uk)
        key = key * n_vals + np.ravel(rank)
        span *= n_vals
    return key


def _open_code(r1: np.ndarray, ps_bad: int, topk_bad: int) -> np.ndarray:
    """Where a candidate's code before memory leaves memory to decide (pass 1a's classify): feasible so far, or
    refused only for a first communication choice that the ZeRO stage rules out (parameter server, top-k)."""
    return np.asarray((r1 == 0) | (r1 == ps_bad) | (r1 == topk_bad))


def _open_memory_rows(job: Job, grid: StrategyGrid, rows: dict[str, np.ndarray], rep: bool, inv: np.ndarray,
                      gathered: np.ndarray | float, need: np.ndarray | None, acts: dict[str, np.ndarray],
                      outer: Callable[[dict[str, np.ndarray]], StrategyGrid]
                      ) -> Callable[[np.ndarray, str], np.ndarray]:
    """Pass 1a's memory of a chunk (``grid``; ``inv``, ``gathered`` from :func:`_memory_rows`, ``rows`` its memory
    rows: its configurations, or where ``rep`` the rows that :func:`_memory_rows` picked) as a function of the ZeRO
    stages and the sync mode: every chunk row's bytes where ``need`` (per chunk row; None: every row) holds, 0
    elsewhere. Only the memory rows some needed row reads are priced (``outer`` makes their grid): a row's bytes are
    the same to the bit whichever rows are priced beside it (every term is elementwise, as the chunks and the memory
    rows' sharing already take). ``plan -n 73513440`` on a 1e8-GPU cluster: 50,164 of 5.3 M configurations have a
    candidate that the heads', sequence's and interleaving's divisibility leave open; the others' memory was priced
    for nothing (a quarter of the search's CPU)."""
    n_rep = len(rows["dp"])
    priced = np.arange(n_rep) if need is None else _unique(inv[need])
    some = len(priced) < n_rep
    base = (outer({k: v[priced] for k, v in rows.items()}) if len(priced) else grid) if some else (
        outer(rows) if rep else grid)

    def at(zero: np.ndarray, sync: str) -> np.ndarray:
        if not len(priced):  # no candidate of the chunk left open: nothing priced
            return _per_row(np.zeros((n_rep, *msgspec.structs.replace(grid, zero=zero).shape[1:])), inv, gathered)
        g = msgspec.structs.replace(base, zero=zero)
        m = np.broadcast_to(memory_total(job, g, microbatches(g), sync=sync, activations=acts), g.shape)
        if some:
            full = np.zeros((n_rep, *g.shape[1:]))
            full[priced] = m
            m = full
        return _per_row(m, inv, gathered)

    return at


def _per_row(mem: np.ndarray, inv: np.ndarray, gathered: np.ndarray | float) -> np.ndarray:
    """Memory of the priced rows (:func:`_memory_rows`) on every row of the chunk (a row's gathered bytes added only
    where it has some: a twin's memory is taken bit for bit)."""
    if isinstance(gathered, float) and gathered == 0.0:
        if len(inv) == len(mem) and np.array_equal(inv, np.arange(len(inv))):
            return mem
        return np.asarray(mem[inv])
    return np.asarray(mem[inv] + gathered)


def _outer_grid(gpus: int, global_batch: int, cfg: dict[str, np.ndarray], lo: int, hi: int,
                axes: dict[str, np.ndarray], comm0: dict[str, Any], fixed: dict[str, Any]) -> StrategyGrid:
    """Configurations lo:hi on axis 0, the first ZeRO stage, recompute, sequence parallelism; one communication
    choice."""
    col = {k: v[lo:hi].reshape(-1, 1, 1, 1) for k, v in cfg.items()}
    return grid_from_arrays(
        gpus=gpus, global_batch=global_batch, **col, **comm0, **fixed,
        zero=axes["zero"][:1].reshape(1, 1, 1, 1), recompute=axes["recompute"].reshape(1, 1, -1, 1),
        sequence_parallel=axes["sequence_parallel"].reshape(1, 1, 1, -1))


def _comm_grid(gpus: int, global_batch: int, cfg: dict[str, np.ndarray], at: np.ndarray,
               axes: dict[str, np.ndarray], choices: dict[str, np.ndarray], fixed: dict[str, Any]) -> StrategyGrid:
    """Outer candidates ``at`` (rows of (config row, zero, recompute, sp) indices) x every communication choice."""
    col = {k: v[at[:, 0]].reshape(-1, 1) for k, v in cfg.items()}
    return grid_from_arrays(
        gpus=gpus, global_batch=global_batch, **col, **fixed,
        zero=axes["zero"][at[:, 1]].reshape(-1, 1), recompute=axes["recompute"][at[:, 2]].reshape(-1, 1),
        sequence_parallel=axes["sequence_parallel"][at[:, 3]].reshape(-1, 1),
        **{f: choices[f].reshape(1, -1) for f in COMM_FIELDS})


def _comm_blocks(choices: dict[str, np.ndarray]) -> list[tuple[int, dict[str, np.ndarray]]]:
    """The communication choices (rows of :func:`comm_choices`) as blocks of consecutive rows: (first row,
    {field: array}) with the block's rows in C order of the arrays' broadcast shape (leading axis of length 1
    for the outer candidates). The all-reduce rows are the product algorithm x compression x overlap x
    bucket x assignment, so each field gets its own axis and a collective is priced once per distinct
    message size rather than once per row; other rows (parameter servers) form one flat block, on the last of as
    many axes as the product's, so that both blocks' outer candidates have one shape and share their stages
    (:func:`~scalemodel.engine.step.shared_stages`)."""
    n = len(choices["algorithm"])
    ar = np.nonzero(choices["ps_servers"] == 0)[0]
    blocks: list[tuple[int, dict[str, np.ndarray]]] = []
    flat_from = 0
    if len(ar) and ar[0] == 0 and ar[-1] == len(ar) - 1:
        groups: tuple[tuple[str, ...], ...] = (
            ("algorithm",), ("compression", "topk_ratio"), ("overlap",), ("bucket_bytes",), ("dynamic_assignment",))
        levels = []
        for names in groups:
            rows = list(zip(*(choices[f][: len(ar)].tolist() for f in names), strict=True))
            levels.append(list(dict.fromkeys(rows)))
        size = int(np.prod([len(lv) for lv in levels]))
        comm: dict[str, np.ndarray] = {"ps_servers": np.zeros((1,) * (len(groups) + 1), dtype=np.int64),
                                       "ps_colocated": np.zeros((1,) * (len(groups) + 1), dtype=bool)}
        for axis, (names, lv) in enumerate(zip(groups, levels, strict=True)):
            shape = [1] * (len(groups) + 1)
            shape[axis + 1] = len(lv)
            for k, name in enumerate(names):
                comm[name] = np.asarray([v[k] for v in lv], dtype=choices[name].dtype).reshape(shape)
        if size == len(ar) and all(
                np.array_equal(np.broadcast_to(comm[f], np.broadcast_shapes(*(a.shape for a in comm.values())))
                               .reshape(-1), choices[f][: len(ar)]) for f in COMM_FIELDS):
            blocks.append((0, comm))
            flat_from = len(ar)
    if flat_from < n:
        ndim = len(blocks[0][1]["algorithm"].shape) if blocks else 2
        blocks.append((flat_from, {f: choices[f][flat_from:].reshape((1,) * (ndim - 1) + (-1,)) for f in COMM_FIELDS}))
    return blocks


def _block_grid(gpus: int, global_batch: int, cfg: dict[str, np.ndarray], at: np.ndarray,
                axes: dict[str, np.ndarray], comm: dict[str, np.ndarray], fixed: dict[str, Any]) -> StrategyGrid:
    """Outer candidates ``at`` (rows of (config row, zero, recompute, sp) indices) on axis 0 x one block of
    communication choices (:func:`_comm_blocks`) on the others."""
    ndim = np.broadcast_shapes(*(a.shape for a in comm.values())).__len__()
    lead = (-1,) + (1,) * (ndim - 1)
    col = {k: v[at[:, 0]].reshape(lead) for k, v in cfg.items()}
    return grid_from_arrays(
        gpus=gpus, global_batch=global_batch, **col, **fixed,
        zero=axes["zero"][at[:, 1]].reshape(lead), recompute=axes["recompute"][at[:, 2]].reshape(lead),
        sequence_parallel=axes["sequence_parallel"][at[:, 3]].reshape(lead), **comm)


def search(job: Job, gpus: int, global_batch: int, *, objective: str = "throughput", top: int = 5,
           constraints: dict[str, Any] | None = None, sync_modes: Sequence[str] = ("bsp",),
           progress: Callable[[int, int], None] | None = None, kappa: float | None = None,
           inputs: dict[str, Any] | None = None, allow: Sequence[str] = (),
           fixed: dict[str, Any] | None = None, written: Mapping[str, str] | None = None,
           max_candidates: float = MAX_CANDIDATES) -> PlanResult:
    """Search every strategy for ``job`` on ``gpus`` GPUs at ``global_batch`` sequences per step.

    ``constraints``: {key: value | (op, value) | [(op, value), ...]} over CONSTRAINT_KEYS (see
    :func:`parse_constraints`); ``allow``: names of :data:`ALLOW` that open non-mainstream choices;
    ``fixed``: strategy fields every candidate takes (flash_attention, dispatch_overhead,
    first/last_stage_layers); ``written``: where a fixed field was written when not ``--set strategy.X`` (a
    ``--strategy`` file's flag), for its refusal. ``progress(done, total)`` is called after each outer batch.
    ``max_candidates``: a space larger (outer candidates x communication choices, counted before any is priced) is
    refused (:data:`MAX_CANDIDATES`, :func:`check_space`; ``math.inf``: no limit).
    Returns the top ``top`` distinct plans by ``objective`` with exact counts of the whole space (module docstring).
    """
    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}", where="--objective", allowed=" | ".join(OBJECTIVES))
    if gpus < 1 or global_batch < 1:
        raise InputError("gpus and global batch must be >= 1", where="--gpus", allowed="positive integers")
    if top < 1:
        raise InputError(f"top must be >= 1, got {top}", where="--top", allowed="an integer >= 1")
    if objective == "cost" and job.price_per_gpu_s <= 0:
        raise InputError(f"cluster {job.cluster_name} has no price per GPU-hour", where="--objective",
                         allowed="throughput | time-to-train, or --set cluster.price_per_gpu_hour=2.5USD/h")
    for name in allow:
        if name not in ALLOW:
            raise InputError(f"unknown --allow {name!r}", where="--allow", allowed=" | ".join(ALLOW))
    allow_keys = frozenset(k for name in allow for k in ALLOW[name])
    if fixed and "offload_states" in fixed:  # pinned: every candidate's, no search (_with_state_offload)
        allow_keys -= {"offload_states"}
    c = normalize_constraints(constraints)
    modes = []
    for s in sync_modes:
        label = parse_sync(s).label()
        if label in modes:
            continue
        if "sync" not in c or allowed_by(np.asarray([0]), [(op, 0 if v == label else 1) for op, v in c["sync"]])[0]:
            modes.append(label)
    if len(modes) > MAX_SYNC_MODES:
        raise InputError(f"{len(modes)} distinct sync modes", where="--sync-modes",
                         allowed=f"at most {MAX_SYNC_MODES} distinct modes (each hier:G is searched apart)")
    if not modes:
        raise InputError(f"the sync constraint leaves none of the searched sync modes ({', '.join(sync_modes)[:200]})",
                         where="--constraint sync", allowed="a sync constraint that a mode of --sync-modes meets, "
                                                           "or that mode added to --sync-modes")
    fixed = dict(fixed or {})
    _trainer_sync_modes(fixed, modes, c, written)
    _warn_unpriced_bucket(job, fixed, c)
    _warn_cast_noop(job, c)
    if fixed.get("moe_allgather_dispatcher") and fixed.get("moe_shared_expert_overlap") and job.is_transformer and \
            float(job.shape.moe_shared_experts) > 0:
        # predict's refusal (job._check_allgather_dispatcher): Megatron-Core raises it only where
        # moe_shared_expert_intermediate_size is set (transformer_config.py lines 1813-1826 @d98e8a64dd); a model
        # without shared experts runs the pair (the overlap unpriced, warned), so pins() does not refuse it blind
        raise InputError("moe_allgather_dispatcher with moe_shared_expert_overlap: Megatron-Core refuses it for a "
                         "model with shared experts ('moe_shared_expert_overlap only works with alltoall or flex "
                         "token dispatcher')",
                         where=(written or {}).get("moe_allgather_dispatcher",
                                                   "--set strategy.moe_allgather_dispatcher"),
                         allowed="one of moe_allgather_dispatcher and moe_shared_expert_overlap")
    if int(fixed.get("recompute_layers", -1)) >= 0:  # plan's and scale --best's pins (predict: job.py's check);
        # a pinned uniform method implies recompute full (StrategySpec refuses it otherwise)
        check_mtp_recompute(job, bool(fixed.get("recompute_uniform", False)), int(fixed["recompute_layers"]),
                            (written or {}).get("recompute_layers", "--set strategy.recompute_layers"))
    if int(fixed.get("ep_dispatch_sms", -1)) >= 0:
        # a --strategy file's SM count (``written``: --moe-flex-dispatcher-num-sms) is named as the file wrote it; it
        # was refused as "--set strategy.ep_dispatch_sms", an option never given (round 16)
        check_ep_dispatch_sms(job, int(fixed["ep_dispatch_sms"]),
                              (written or {}).get("ep_dispatch_sms", "--set strategy.ep_dispatch_sms"))
    if int(fixed.get("stage_split", -1)) >= 0:
        split_at = (written or {}).get("stage_layers", "--set strategy.stage_layers")
        refuse_two_splits([n for n in OTHER_SPLITS if int(fixed.get(n, -1)) >= 0], split_at)
        check_stage_layers(job, STAGE_SPLITS[int(fixed["stage_split"])], split_at)
    warn_unfused_attention(job, bool(fixed.get("flash_attention", True)))  # unpinned, every candidate runs it
    warn_unpriced_jax_release(job, int(fixed.get("layer_impl", LayerImpl.MEGATRON_TE)))  # predict's (ux37)
    if "moe_flex_backend" in c and "moe_flex_dispatcher" in c and not (
            bool(allowed_by(np.asarray(True), c["moe_flex_dispatcher"]))
            or bool(allowed_by(np.asarray(int(FlexBackend.DEEPEP)), c["moe_flex_backend"]))):
        # predict's warning (job._warn_unpriced_fields): the backend acts only where the flex dispatcher runs
        notices.warn("moe_flex_backend other than deepep is not priced: moe_flex_dispatcher is held off (the "
                     "expert-parallel tokens move with NCCL's all-to-all)")
    for name, needs in (("align_grad_reduce", ("megatron_ddp",)),
                        ("align_param_gather", ("megatron_ddp", "overlap_param_gather"))):
        missing = [n for n in needs if not fixed.get(n, False)]
        if name in fixed and not fixed[name] and missing:
            # predict's warning (job._warn_unpriced_alignment): plan searches the schedule, pp, ZeRO and overlap, but
            # these fields are fixed, and without them no candidate runs the per-chunk sync the switch times
            notices.warn(f"strategy.{name} = false is not priced: it times the interleaved schedule's per-chunk "
                         f"data-parallel sync of Megatron-Core's DDP, and {' and '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not pinned true")
    if fixed.get("overlap_param_gather_with_optimizer_step", False):
        missing = [n for n in ("megatron_ddp", "overlap_param_gather") if not fixed.get(n, False)]
        if missing:
            # predict's warning (job._warn_unpriced_alignment): the switch acts only on the interleaved per-chunk
            # ZeRO-1 gathers of Megatron-Core's DDP (docs/model.md#optimizer-step-gather)
            notices.warn("strategy.overlap_param_gather_with_optimizer_step = true is not priced: it moves the first "
                         "model chunk's ZeRO-1 parameter gather of Megatron-Core's DDP into the optimizer step, and "
                         f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not pinned true")
    all_cfg = configurations(job, gpus, global_batch, c, allow_keys, narrow=True, fixed=fixed)
    no_split = _segment_split_refusal(job, gpus, c) if not len(all_cfg["dp"]) else ""
    axes = _axes(job, c)
    for name, axis in axes.items():
        if not axis.size:  # e.g. recompute=selective on a per-sample workload, which has no selective recompute
            raise InputError(f"the constraints on {name} leave no value this model can take",
                             where=f"--constraint {name} / --set strategy.{name}",
                             allowed=f"a {name} the model supports" + (
                                 " (a generic workload: recompute none or full)" if name == "recompute" else ""))
    choices = comm_choices(job, gpus, c, allow_keys)
    n_choice = len(choices["algorithm"])
    n_ps = int(np.count_nonzero(choices["ps_servers"] > 0))
    n_topk = int(np.count_nonzero(choices["compression"] == int(CompressionKind.TOPK)))
    first_is_topk = bool(choices["compression"][0] == int(CompressionKind.TOPK))
    comm0 = {f: choices[f][0] for f in COMM_FIELDS}
    first_is_ps = bool(choices["ps_servers"][0] > 0)
    inner = int(np.prod([len(a) for a in axes.values()]))
    per_chunk = max(1, COUNT_CHUNK_CANDIDATES // max(inner, 1))
    mode_mask = [_sync_mask(all_cfg, sync, job.max_gpus - gpus) for sync in modes]
    if len(all_cfg["dp"]) and not any(m.any() for m in mode_mask):  # splits, but none a sync mode applies to
        no_split = _no_sync_split(modes, gpus, job.max_gpus - gpus)
    fam_all = _family_code(all_cfg).astype(np.int8)  # 5 bits (n_fam below): int8 on every configuration
    total = sum(int(m.sum()) for m in mode_mask) * inner
    check_space(total, n_choice, max_candidates, allow, len(modes), global_batch)
    keep = max(10 * top, 50)
    scale = _scale(objective, job, gpus, global_batch)
    oom, ps_bad = int(Infeasible.OUT_OF_MEMORY), int(Infeasible.PS_INCOMPATIBLE)
    topk_bad, sharded_grads = int(Infeasible.TOPK_SHARDED_GRADIENTS), int(Zero.GRADIENTS)
    replicas = int(Infeasible.SYNC_NEEDS_REPLICAS)
    # Evaluation classes: the modes that move bsp's data-parallel traffic on every communication choice share
    # one evaluation (step.with_sync re-prices the wait); hier:G and asp/ssp on a parameter server have their own.
    shared = [si for si, sync in enumerate(modes) if shares_bsp_comm(sync, choices["ps_servers"])]
    classes = ([shared] if shared else []) + [[si] for si in range(len(modes)) if si not in shared]
    class_sync = ["bsp" if members == shared else modes[members[0]] for members in classes]
    # the traffic floor each class is bounded with: hier:G's in-group gathers, the whole group's otherwise
    floor_sync = [sync if parse_sync(sync).kind == SyncKind.HIER else "bsp" for sync in class_sync]
    # bound factors per class (the least over its modes, per configuration; see _bound_factor)
    levels: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    factor = [_bound_factor(job, all_cfg, sync, mask, objective, kappa, levels)
              for sync, mask in zip(modes, mode_mask, strict=True)]
    # Per class and ZeRO group, (a, b) per configuration: at ZeRO 0 over every member, at ZeRO > 0 over the members
    # that need no replica per rank (asp, ssp:S, local:H are infeasible there, code 15; a = inf where none is left)
    f_class = [(_class_factor(factor, mode_mask, members), _class_factor(
        factor, mode_mask, [si for si in members if not needs_replicas(modes[si])])) for members in classes]
    del factor, levels  # read by f_class alone: a float pair per mode and dp's inverse per mask, per configuration
    a_any = np.min([f[z][0] for f in f_class for z in (0, 1)], axis=0)
    a_sharded = np.min([f[1][0] for f in f_class], axis=0)  # at ZeRO > 0
    sharded_z = axes["zero"] != int(Zero.NONE)  # the ZeRO stages the second factors apply to
    class_mask = [np.any([mode_mask[si] for si in members], axis=0) for members in classes]
    # modes with the same configurations (all but hier:G, and backup:B where the cluster has too few GPUs to spare
    # for every layout's replicas) are counted once, times their number
    mask_groups: dict[tuple[int, bytes], tuple[np.ndarray, int]] = {}
    # (asp, ssp:S and local:H need an unsharded replica per rank, so they count apart: key -1)
    for sync, mask in zip(modes, mode_mask, strict=True):
        spec = parse_sync(sync)
        key = int(spec.param) if spec.kind == SyncKind.HIER else (-1 if needs_replicas(sync) else 0)
        group = (key, mask.tobytes())
        mask_groups[group] = (mask, mask_groups.get(group, (mask, 0))[1] + 1)

    covered = feasible_n = computed = derived = 0
    over_limit = 0.0
    reasons = np.zeros(max(REASON_KEYS) + 1, dtype=float)
    n_codes = len(reasons)
    best = _Best(keep)
    fam_thr: dict[int, float] = {}
    stored: list[np.ndarray] = []  # survivors: columns lb, class, row, zero, recompute, sp, family
    n_stored = 0
    n_fam = 32  # family codes: 5 bits (DP, TP, PP, CP, EP)

    def refilter(rows: np.ndarray) -> np.ndarray:
        """Rows whose bound can still reach the best ``keep`` values, or the best of their family."""
        if not len(rows):
            return rows
        lut = _family_cutoff(best.threshold, fam_thr, n_fam)
        return rows[rows[:, 0] <= lut[rows[:, 6].astype(np.int64)]]

    # ---- pass 1a: every outer candidate's feasibility and memory at every ZeRO stage (the exact counts of the
    # whole space), and a compute-only bound per configuration; nothing communicates yet
    done = 0
    zeros = axes["zero"].reshape(1, -1, 1, 1)
    n_cfg = len(all_cfg["dp"])
    nz, nr, ns = (len(axes[k]) for k in ("zero", "recompute", "sequence_parallel"))
    # feasible and within the memory constraint, kept for the configurations with a candidate that is (the others'
    # are all False and nothing reads them): good_pos[row] indexes good_fit's pieces, -1 where none fits (a
    # (configurations, 36) mask was 192 MB of the 1e8-GPU plan's peak for 50 k rows that fit)
    # row indices per configuration (good_pos, twin_of, floor_pos) in int32 where every row index fits it
    index_t = np.int32 if n_cfg < 2 ** 31 else np.int64
    good_pos = np.full(n_cfg, -1, dtype=index_t)
    good_fit: list[np.ndarray] = []
    n_good = 0
    bound_a = np.full(n_cfg, np.inf)  # least compute-only bound of the configuration's candidates, any mode
    # rank-order twins (adjacent rows that differ in the order alone) share the compute floor, which reads no
    # placement: it is priced once per twin group (memory does read the order: HSDP's default group is a node's)
    first = np.zeros(n_cfg, dtype=bool)
    first[:1] = True
    for name, column in all_cfg.items():  # a column at a time (a stacked (columns, configurations) mask was 69 MB)
        if name not in FLOOR_BLIND:
            first[1:] |= column[1:] != column[:-1]
    twin_of = np.cumsum(first, dtype=index_t) - 1
    del first
    # the floors priced, one row per twin group in the order priced (floor_val, grown by doubling), and per twin
    # group its row there (floor_pos, -1: not priced): only groups with a configuration that fits are priced (the
    # 1e8-GPU plan: 50 k of 5.3 M configurations), so a (twin groups, recompute, SP) float array was mostly unread
    floor_pos = np.full(int(twin_of[-1]) + 1 if n_cfg else 0, -1, dtype=index_t)
    floor_val = np.empty((0, nr, ns))
    n_floor = 0
    hsdp_searched = bool(np.any(axes["zero"] == int(Zero.HSDP)))
    hsdp_pinned = int(fixed.get("shard_group", 0) or 0) > 0 and hsdp_searched
    # hier:G's own counts (below) take its own codes where HSDP's shard group is pinned: memory priced everywhere there
    hier_counted = any(key > 0 for key, _b in mask_groups) and bool(np.any(sharded_z))
    offload_zero = "offload_states" in all_cfg or int(fixed.get("offload_states", 0) or 0) > 0
    def classify(mem: np.ndarray, r1: np.ndarray, valid_all: np.ndarray, zb: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(candidates feasible within the memory constraint, per configuration and ZeRO group (0, > 0) the
        choices of each code (code n_codes: feasible but over the memory constraint), per configuration the
        candidates whose parameter-server choices ZeRO > 0 rules out, and those whose top-k choices ZeRO >= 2 rules
        out: job.topk_refused) from memory and the codes before it (``r1`` at its own shape, broadcast here).
        An open code (0, or a first choice's refusal at some ZeRO stage) becomes the code a candidate takes where
        it fits and the one where it does not, both at the codes' own shape (and the ZeRO stages' where the first
        choice is refused at some), so one comparison and one selection run over the whole chunk."""
        open_ = _open_code(r1, ps_bad, topk_bad)
        fit_code, oom_code = np.where(open_, 0, r1), np.where(open_, oom, r1)
        for first_refused, refused, code_then in ((first_is_ps, zb > 0, ps_bad),
                                                  (first_is_topk, zb >= sharded_grads, topk_bad)):
            if first_refused:  # the first choice refused at these ZeRO stages whether or not the candidate fits
                fit_code = np.where(open_ & refused, code_then, fit_code)
                oom_code = np.where(open_ & refused, code_then, oom_code)
        reason = np.where(mem <= job.memory_capacity, fit_code, oom_code)
        feas = reason == 0
        code, good = reason, feas
        if "memory" in c:  # feasible but over the memory constraint: code n_codes
            over = feas & ~allowed_by(mem, c["memory"])
            code, good = np.where(over, n_codes, reason), feas & ~over
        # with all-reduce first, the parameter-server choices are infeasible where ZeRO > 0 (none to count without
        # parameter-server choices)
        ps_hit = valid_all & open_ & (zb > 0) if n_ps and not first_is_ps else np.zeros((1, 1, 1, 1), dtype=bool)
        topk_hit = (valid_all & open_ & (zb >= sharded_grads) if n_topk and not first_is_topk
                    else np.zeros((1, 1, 1, 1), dtype=bool))
        hist = _code_histogram(code, valid_all, sharded_z, n_codes, n_choice, ps_hit, n_ps, topk_hit, n_topk)
        return (good, hist, np.broadcast_to(np.count_nonzero(ps_hit, axis=(1, 2, 3)), (len(mem),)),
                np.broadcast_to(np.count_nonzero(topk_hit, axis=(1, 2, 3)), (len(mem),)))

    for lo in range(0, n_cfg, per_chunk):
        hi = min(n_cfg, lo + per_chunk)
        grid = _outer_grid(gpus, global_batch, all_cfg, lo, hi, axes, comm0, fixed)
        full = msgspec.structs.replace(grid, zero=zeros)
        shape = full.shape
        # memory reads no exchange choice but all_gather's gathered K, V (added per row) and the rank order only
        # through HSDP's shard group (_memory_rows): priced once per row that differs in something else
        rep, inv, gathered = _memory_rows(job, all_cfg, lo, hi, np.ravel(np.broadcast_to(hsdp_shard_group(
            job, grid), (hi - lo, 1, 1, 1))) if hsdp_searched else None)
        valid_one = outer_valid(job, grid)  # reads no ZeRO stage: once for both shapes below
        valid_all = np.broadcast_to(valid_one, shape)
        # feasibility depends on the ZeRO stage only through memory, "parameter server needs ZeRO 0" and, with a
        # pinned shard group, HSDP's "the group divides dp", or with the states' host offload searched or pinned,
        # the stages that run it (state_offload_invalid): then the codes are taken at every ZeRO stage
        r1 = feasibility(job, full if hsdp_pinned or offload_zero else grid)  # at their own shape (classify broadcasts)
        # memory decides a candidate's code only where it is in the space and no refusal before memory closed it
        # (classify: elsewhere its code is r1's, fitting or not): only the memory rows of such configurations are
        # priced (:func:`_open_memory_rows`), the others hold 0 bytes that nothing reads
        acts: dict[str, np.ndarray] = {}  # the stages' activation bytes, shared with hier:G's memory below
        valid_own = np.broadcast_to(valid_one, grid.shape)  # no ZeRO axis: grid has one stage
        need = None if hsdp_pinned and hier_counted else np.any(valid_own & _open_code(r1, ps_bad, topk_bad),
                                                                axis=(1, 2, 3))
        mem_of = _open_memory_rows(
            job, grid, {k: v[lo:hi] for k, v in all_cfg.items()} if rep is None else rep, rep is not None, inv,
            gathered, need, acts, lambda r: _outer_grid(gpus, global_batch, r, 0, len(r["dp"]), axes, comm0, fixed))
        mem = mem_of(zeros, "bsp")
        zb = np.broadcast_to(zeros, shape)
        # where r1 has no ZeRO axis, the closed configurations' codes are r1's at every stage: classified at one
        # stage, their counts times the stages of each group (_ClosedSplit); classify runs on the open rows only
        closed = _ClosedSplit(need, r1, valid_own, sharded_z, n_codes, n_choice) if (
            need is not None and np.ndim(r1) == 4 and r1.shape[1] == 1) else None
        # each group of sync modes takes its configurations' sums (those needing replicas lose ZeRO > 0)
        good, hist, n_ps_hit, n_topk_hit = (closed.run(classify, mem, r1, valid_all, zb) if closed
                                            else classify(mem, r1, valid_all, zb))
        good_chunk = valid_all & good
        n_valid = np.count_nonzero(valid_all, axis=(1, 2, 3))
        for (key, _bytes), (mask, count) in mask_groups.items():
            w = count * mask[lo:hi]
            if key > 0 and np.any(sharded_z):
                # hier:G shards the states inside its groups of G (dp_comm.hier_group): more memory at ZeRO > 0, so
                # its own counts; the bounds keep bsp's fits, a superset (sharding over dp takes no more memory).
                # Only the model states differ, and only where ZeRO shards them: ZeRO 0 keeps bsp's bytes (the
                # replicas enter only through the sharded stages' terms) and the activation bytes are bsp's
                mem_h = np.array(mem)
                mem_h[:, sharded_z] = mem_of(axes["zero"][sharded_z].reshape(1, -1, 1, 1), f"hier:{key}")
                # a pinned HSDP shard group other than the hier group is infeasible there (step._feasibility)
                r1_h = feasibility(job, full, sync=f"hier:{key}") if hsdp_pinned else r1
                _good, hist_h, ps_hits, topk_hits = (closed.run(classify, mem_h, r1_h, valid_all, zb) if closed
                                                     else classify(mem_h, r1_h, valid_all, zb))
                h = hist_h.sum(axis=1)
            else:
                h = hist.sum(axis=1)
                ps_hits, topk_hits = n_ps_hit, n_topk_hit
            if key == -1:  # ZeRO > 0: feasible, out of memory or over the limit all become sync_needs_replicas
                h = hist[:, 0].copy()
                h[:, replicas] += hist[:, 1, [0, oom, n_codes]].sum(axis=1)
                h += np.where(np.isin(np.arange(n_codes + 1), [0, oom, n_codes]), 0.0, hist[:, 1])
            covered += int(w @ n_valid) * n_choice
            tot = w @ h
            reasons[1:] += tot[1:n_codes]
            reasons[ps_bad] += n_ps * float(w @ ps_hits)
            reasons[topk_bad] += n_topk * float(w @ topk_hits)
            feasible_n += int(round(tot[0]))
            over_limit += float(tot[n_codes])
        # compute-only bound (traffic >= 0) of the configurations with a candidate that fits
        fit_at = np.nonzero(good_chunk.any(axis=(1, 2, 3)))[0]
        fit = lo + fit_at
        g_fit = good_chunk[fit_at]
        good_fit.append(g_fit)
        good_pos[fit] = n_good + np.arange(len(fit))
        n_good += len(fit)
        if len(fit):
            new = fit[floor_pos[twin_of[fit]] < 0]
            todo = new[np.unique(twin_of[new], return_index=True)[1]]  # one row per twin group not yet priced
            if len(todo):
                sub = {k: v[todo] for k, v in all_cfg.items()}
                if n_floor + len(todo) > len(floor_val):
                    grown = np.empty((max(2 * len(floor_val), n_floor + len(todo)), nr, ns))
                    grown[:n_floor] = floor_val[:n_floor]
                    floor_val = grown
                floor_val[n_floor:n_floor + len(todo)] = np.broadcast_to(compute_floor(job, _outer_grid(
                    gpus, global_batch, sub, 0, len(todo), axes, comm0, fixed)), (len(todo), 1, nr, ns))[:, 0]
                floor_pos[twin_of[todo]] = n_floor + np.arange(len(todo))
                n_floor += len(todo)
            cf = floor_val[floor_pos[twin_of[fit]]]
            # only the (recompute, SP) that fit somewhere count, each with the least factor of the ZeRO stages
            # where it fits (the modes that need replicas only at ZeRO 0)
            fac = np.minimum(np.where(g_fit[:, ~sharded_z].any(axis=1), a_any[fit].reshape(-1, 1, 1), np.inf),
                             np.where(g_fit[:, sharded_z].any(axis=1), a_sharded[fit].reshape(-1, 1, 1), np.inf))
            bound_a[fit] = (cf.reshape(len(fit), nr, ns) * fac).reshape(len(fit), -1).min(axis=1) * scale * (
                1.0 - 1e-12)
        done += sum(int(m[lo:hi].sum()) for m in mode_mask) * inner
        if progress is not None:
            progress(done, total)

    # ---- pass 1b: configurations best compute-only bound first, those that can still reach the best: each
    # evaluated at its first feasible ZeRO stage and one communication choice, under bsp. That gives exact
    # values (the sync modes sharing bsp's traffic re-priced) and the bound of pass 2: (m + bubble) x t_mb, which
    # no ZeRO stage, communication choice or sync mode changes, plus the traffic no choice hides.
    good_of = np.concatenate(good_fit) if good_fit else np.zeros((0, nz, nr, ns), dtype=bool)
    del good_fit
    order = np.argsort(bound_a, kind="stable")
    order = order[np.isfinite(bound_a[order])]
    # batches of the configurations that can still reach the threshold, in bound order: the first a third of the
    # others, to set a threshold early, then CHUNK_CANDIDATES candidates each (the cutoffs only fall, so a
    # configuration left out stays out)
    per_1b = max(1, CHUNK_CANDIDATES // max(nr * ns, 1))
    first_1b = max(1, per_1b // 3)
    rest = order
    while len(rest):
        lut = _family_cutoff(best.threshold, fam_thr, n_fam)
        ok = bound_a[rest] <= lut[fam_all[rest]]
        sel = np.nonzero(ok)[0]
        if rest is order:  # the first batch: the best bounds, and each family's best few, so that every family
            # has a cutoff before the next batch (one without an exact value yet would take all its configurations)
            fams = fam_all[rest[sel]]
            per_fam = sel[np.lexsort((np.arange(len(sel)), fams))]  # by family, each in bound order
            starts = np.searchsorted(np.sort(fams), np.arange(n_fam))
            rank = np.arange(len(per_fam)) - starts[fam_all[rest[per_fam]]]
            sel = _unique(np.concatenate([sel[:first_1b], per_fam[rank < FIRST_PER_FAMILY]]))
        else:
            sel = sel[:per_1b]
        if not len(sel):
            break
        idx = rest[sel]
        ok[sel] = False  # the rest of the rows the cutoffs still allow stay (those they left out stay out)
        rest = rest[ok]
        good_idx = good_of[good_pos[idx]]  # every configuration pass 1b takes has a finite bound: one that fits
        zstar = np.argmax(good_idx.any(axis=(2, 3)), axis=1)  # first ZeRO stage where some candidate fits
        sub = {k: v[idx] for k, v in all_cfg.items()}
        grid = msgspec.structs.replace(_outer_grid(gpus, global_batch, sub, 0, len(idx), axes, comm0, fixed),
                       zero=axes["zero"][zstar].reshape(-1, 1, 1, 1))
        res = evaluate(job, grid, sync="bsp", kappa=kappa)
        computed += grid.size
        shape = good_idx.shape
        at_z = np.take_along_axis(good_idx, zstar.reshape(-1, 1, 1, 1), axis=1)  # (n, 1, R, S)
        lb = (res.microbatches + res.extras["bubble_microbatches"]) * res.extras["microbatch_time"] * (1.0 - 1e-12)
        fams = fam_all[idx]
        for si in range(len(modes)):
            in_mode = mode_mask[si][idx].reshape(-1, 1, 1, 1)
            if shares_bsp_comm(modes[si], grid.ps_servers):  # exact values where pass 1b evaluated
                res_si = res if modes[si] == "bsp" else with_sync(job, grid, res, modes[si], kappa=kappa)
                derived += 0 if modes[si] == "bsp" else grid.size
                ok_si = at_z & in_mode & np.asarray(res_si.feasible)  # asp/ssp/local: ZeRO 0 only
                score = np.where(ok_si, _score(objective, job, gpus, res_si, grid, modes[si]), np.inf)
                flat = score.ravel()
                fin = np.nonzero(np.isfinite(flat))[0]
                if fin.size:
                    k = min(keep, fin.size)
                    sel = fin[np.argpartition(flat[fin], k - 1)[:k]] if k < fin.size else fin
                    a, _z, r, sp_i = np.unravel_index(sel, score.shape)
                    best.add([(si, int(idx[ai]), int(zstar[ai]), int(ri), int(spi))
                              for ai, ri, spi in zip(a, r, sp_i, strict=True)], flat[sel])
                    best_row = score.reshape(len(idx), -1).min(axis=1)
                    for f in _unique(fams[np.isfinite(best_row)]):
                        v = float(best_row[fams == f].min())
                        if v < fam_thr.get(int(f), math.inf):
                            fam_thr[int(f)] = v
        # the traffic floor: only ZeRO-3/FSDP/HSDP gathers have one, so it is priced only where they fit and where
        # the bound without it can still reach the threshold (refilter drops the others whatever their floor)
        floors = {fs: np.zeros(shape) for fs in dict.fromkeys(floor_sync)}
        z3 = np.nonzero(axes["zero"] >= int(Zero.PARAMETERS))[0]
        cut = _family_cutoff(best.threshold, fam_thr, n_fam)[fams].reshape(-1, 1, 1, 1)
        for fs, fl in floors.items():
            need = np.zeros(len(idx), dtype=bool)
            for ci, (_f0, (a1, b1)) in enumerate(f_class):
                if floor_sync[ci] != fs or not len(z3):
                    continue
                reach = (lb * a1[idx].reshape(-1, 1, 1, 1) * scale <= cut) & (b1[idx] > 0).reshape(-1, 1, 1, 1)
                need |= (good_idx[:, z3] & reach & class_mask[ci][idx].reshape(-1, 1, 1, 1)).any(axis=(1, 2, 3))
            rows3 = np.nonzero(need)[0]
            if len(rows3):
                sub3 = {k: v[rows3] for k, v in sub.items()}
                g3 = msgspec.structs.replace(_outer_grid(gpus, global_batch, sub3, 0, len(rows3), axes, comm0, fixed),
                             zero=axes["zero"][z3].reshape(1, -1, 1, 1))
                fl[rows3[:, None], z3[None, :]] = np.broadcast_to(dp_exposed_floor(job, g3, fs),
                                                                  (len(rows3), len(z3), nr, ns)) * (1.0 - 1e-12)
        sharded = sharded_z.reshape(1, -1, 1, 1)
        for ci, ((a0, b0), (a1, b1)) in enumerate(f_class):
            in_class = good_idx & class_mask[ci][idx].reshape(-1, 1, 1, 1)
            floor = floors[floor_sync[ci]]
            f_local = np.where(sharded, a1[idx].reshape(-1, 1, 1, 1), a0[idx].reshape(-1, 1, 1, 1))
            f_comm = np.where(sharded, b1[idx].reshape(-1, 1, 1, 1), b0[idx].reshape(-1, 1, 1, 1))
            with np.errstate(invalid="ignore"):  # inf x 0 where no mode of the class applies: pruned below
                lbc = np.where(in_class & np.isfinite(f_local), (lb * f_local + floor * f_comm) * scale, np.inf)
            lbf = lbc.ravel()
            cand = np.nonzero(np.isfinite(lbf))[0]
            if cand.size:
                a, z, r, sp_i = np.unravel_index(cand, shape)
                rows = np.stack([lbf[cand], np.full(len(cand), ci), idx[a], z, r, sp_i, fam_all[idx[a]]],
                                axis=1).astype(float)
                rows = refilter(rows)
                stored.append(rows)
                n_stored += len(rows)
                if n_stored > 4 * CHUNK_CANDIDATES:
                    stored = [refilter(np.concatenate(stored))]
                    n_stored = len(stored[0])

    # ---- pass 2: survivors on every communication choice, best bound first across the evaluation classes ------
    surv = refilter(np.concatenate(stored)) if stored else np.zeros((0, 7))
    surv = surv[np.lexsort((surv[:, 0], surv[:, 1]))]  # by class, then best bound first
    per2 = max(1, CHUNK_CANDIDATES // n_choice)
    blocks = _comm_blocks(choices)  # the choices as cartesian products: each field priced on its own axis
    block_start = [b0 for b0, _comm in blocks]
    block_size = [int(np.prod(np.broadcast_shapes(*(a.shape for a in comm.values())))) for _b0, comm in blocks]
    picks: list[_Pick] = []
    fam_pick: dict[int, _Pick] = {}
    batches = []
    for ci in _unique(surv[:, 1]).astype(int):
        rows_ci = surv[surv[:, 1] == ci]
        # a class whose modes that need replicas (ZeRO 0 only) mix with others: its ZeRO 0 rows batched apart, so
        # the other batches skip re-pricing those modes
        kinds = {needs_replicas(modes[si]) for si in classes[ci]}
        split = sharded_z[rows_ci[:, 3].astype(np.int64)] if len(kinds) == 2 else np.zeros(len(rows_ci), dtype=bool)
        for part_ci in (rows_ci[~split], rows_ci[split]):
            batches += [part_ci[i:i + per2] for i in range(0, len(part_ci), per2)]
    batches.sort(key=lambda b: float(b[0, 0]))  # the batch holding the best bound first, whatever its class
    for nb in range(len(batches)):
        part = refilter(batches[nb])
        if not len(part):
            continue
        # one evaluate() per batch of one class; the class's other sync modes re-priced from it
        ci = int(part[0, 1])
        later = [k for k in range(nb + 1, len(batches)) if len(batches[k]) and int(batches[k][0, 1]) == ci]
        if len(part) < per2 and later:
            part = _top_up(part, batches, later, refilter, per2)
        at = part[:, 2:6].astype(np.int64)
        grids = [_block_grid(gpus, global_batch, all_cfg, at, axes, comm, fixed) for _b0, comm in blocks]
        with shared_stages():  # the blocks' outer candidates' stages priced once, each block its own DP sync
            res0s = [evaluate(job, grid, sync=class_sync[ci], kappa=kappa) for grid in grids]
        computed += sum(grid.size for grid in grids)
        ok0s = []
        for res0 in res0s:
            ok0 = np.asarray(res0.feasible)
            if "memory" in c:
                ok0 = ok0 & allowed_by(np.asarray(res0.memory["total"]), c["memory"])
            ok0s.append(ok0.reshape(len(at), -1))
        fams = part[:, 6].astype(np.int64)
        at_rows = at.tolist()
        in_mode_rows = [mode_mask[si][at[:, 0]].reshape(-1, 1) for si in range(len(modes))]
        all_sharded = bool(np.all(sharded_z[at[:, 1]]))
        for si in classes[ci]:
            sync = modes[si]
            if all_sharded and needs_replicas(sync):  # infeasible at ZeRO > 0 (code 15)
                continue
            cols, ress = [], []
            for grid, res0, ok0 in zip(grids, res0s, ok0s, strict=True):
                res = res0 if sync == class_sync[ci] else with_sync(job, grid, res0, sync, kappa=kappa)
                ress.append(res)
                derived += 0 if res is res0 else grid.size
                score = np.broadcast_to(_score(objective, job, gpus, res, grid, sync), grid.shape).reshape(len(at), -1)
                ok = ok0 if res is res0 else ok0 & np.asarray(res.feasible).reshape(len(at), -1)
                cols.append(np.where(ok & in_mode_rows[si], score, np.inf))
            sc = cols[0] if len(cols) == 1 else np.concatenate(cols, axis=1)
            bi = np.argmin(sc, axis=1)
            bv = sc[np.arange(len(at)), bi]
            keys = [(si, *row) for row in at_rows]
            fin = np.isfinite(bv)
            best.add([k for k, f in zip(keys, fin.tolist(), strict=True) if f], bv[fin])
            limit = best.threshold
            # only rows within the limit or not above their family's pick as it stands can make a pick (both only
            # fall in the loop): the others are passed over before it, not one by one in it. A family's tie is
            # taken in and decided by the pick order, as the ranked plans' are, not by which batch evaluated first
            fam_cut = np.asarray([fam_pick[f].score if f in fam_pick else math.inf for f in range(n_fam)])
            for j in np.nonzero(fin & ((bv <= limit) | (bv <= fam_cut[fams])))[0]:
                v, f = float(bv[j]), int(fams[j])
                is_fam = f not in fam_pick or v <= fam_pick[f].score
                if v > limit and not is_fam:
                    continue
                blk = int(np.searchsorted(block_start, bi[j], side="right")) - 1
                at_j = int(j) * block_size[blk] + int(bi[j]) - block_start[blk]
                pick = _Pick(v, (*keys[j], int(bi[j])), (grids[blk], at_j), sync, sc[j].copy(),
                             result=_result_one(ress[blk], at_j))
                if v <= limit:
                    picks.append(pick)
                if f not in fam_pick or pick < fam_pick[f]:
                    fam_pick[f] = pick
                fam_thr[f] = min(fam_thr.get(f, math.inf), v)
            if len(picks) > 2 * keep:
                picks = heapq.nsmallest(keep, picks)

    picks = sorted(picks)[:keep]
    strategies = [dict(p.grid.describe(0), sync=p.sync) for p in picks]
    shown, same = _collapse(picks, strategies, top)
    for n_shown, idx in enumerate(shown):
        _comm_equivalents(picks[idx], choices, same[n_shown])
    chosen = [picks[idx] for idx in shown]
    fam_picks = sorted(fam_pick.values())
    preds = _predict_all(job, [*chosen, *fam_picks])
    ranked = preds[:len(chosen)]
    by_reason = {REASON_KEYS[int(code)]: int(round(n)) for code, n in enumerate(reasons) if n > 0}
    if over_limit:
        by_reason["memory_constraint"] = int(round(over_limit))
    family_best = {}
    for pred in preds[len(chosen):]:
        st = pred.strategy
        family_best[family(st["tp"], st["pp"], st["cp"], st["ep"], st["dp"])] = pred
    method = ("decomposed: feasibility, memory and a compute-only bound for every outer candidate (parallel "
              "degrees, rank order, micro-batch, schedule, ZeRO, recompute, SP); those whose bound could still "
              "reach the best evaluated at one communication choice, then, bounded by the parts no communication "
              "choice or sync mode changes, on every communication choice; sync modes that move bsp's traffic "
              "re-priced from one evaluation")
    result = PlanResult(
        inputs=dict(inputs or {}), objective=objective, candidates_evaluated=covered, feasible=feasible_n,
        infeasible_by_reason=by_reason, elapsed_s=0.0, ranked=ranked, objective_values=[p.score for p in chosen],
        family_best=family_best, searched_families=sorted({
            _family_name(int(code)) for m in mode_mask for code in _unique(fam_all[m])}),
        search={"covered": covered, "evaluated": computed, "outer_candidates": total,
                "communication_choices": n_choice, "second_pass_outer": int(len(surv)), "sync_repriced": derived,
                "allow": sorted(allow), "method": method, **({"no_split": no_split} if no_split else {})},
        equivalents=same, custom=[custom_choices(p.strategy) for p in ranked])
    result.elapsed_s = time.perf_counter() - t0
    return result


def check_space(outer: int, n_choice: int, limit: float, allow: Sequence[str], n_modes: int, batch: int) -> None:
    """Refuse a search space of more than ``limit`` candidates (``outer`` x ``n_choice``, as :func:`search` counts
    them before pass 1a) before any is priced, naming its size, its two factors, what narrows each and the option
    that raises the limit (fuzz41: plan -m mixtral-8x7b -n 64 --allow all searched 14.2e9 candidates for 51 s of CPU
    with no word before it finished)."""
    space = outer * n_choice
    if space <= limit:
        return
    wide = [a for a in ("all", *(k for k in ALLOW if k != "all")) if a in allow]  # "all" first: it widens most
    modes = f" over {n_modes} sync modes" if n_modes > 1 else ""
    raise InputError(
        f"the search space is {space:,} candidates at global batch {batch:,} ({outer:,} outer candidates{modes} x "
        f"{n_choice:,} data-parallel communication choices), more than the limit of "
        f"{f'{limit:,.0f}' if float(limit).is_integer() else f'{limit:,g}'}",
        where="--max-candidates",
        allowed=(f"fewer --allow searches (given: {', '.join(wide)}; custom-collectives, compression, "
                 "parameter-server and dynamic-assignment multiply the communication choices, micro-batches, "
                 "expert-tp, cp-exchanges, moe-dispatch and offload the outer candidates), " if wide else "")
        + "--constraint tp=, pp=, cp=, ep=, zero=, micro_batch=, recompute= or schedule= (or --set strategy.X) to "
          f"pin an axis{', fewer --sync-modes' if n_modes > 1 else ''}; or plan --max-candidates {space} (or inf) to "
          "search it all (about 0.5-35 ns of CPU a candidate, measured: docs/model.md#plan-space)")


def _readable(strategy: dict[str, Any]) -> dict[str, Any]:
    """A plan's strategy as the JSON shows it: with ``bucket_size`` (the strategy field a --strategy file reads)
    beside ``bucket_bytes`` (the grid's; None for the framework's default), and ``dispatch_overhead`` beside
    ``dispatch_overhead_s``, so that the strategy written back as a strategy file prices the bucket and the dispatch
    overhead the plan used; they were left out, and predict priced the framework's default bucket and Ray's default
    overhead (a file does not read bucket_bytes nor dispatch_overhead_s). ``dispatch_overhead`` is null under static
    assignment, as a strategy file reads ``dispatch_overhead_s`` only under dynamic (specs.frameworks): there the
    overhead is not priced (step.py) and the JSON's dispatch_overhead_s echoes the default, as predict's does; written
    back as ``dispatch_overhead`` it was warned 'not priced' (consist38, once plan's grid took predict's default). The
    key stays (tests/data/json_contract.json: a key leaves only with a MAJOR); a file's null is the default."""
    out: dict[str, Any] = {}
    dynamic = strategy.get("assignment") == "dynamic"
    for k, v in strategy.items():
        out[k] = v
        if k in JSON_FIELD_TWINS:
            out[JSON_FIELD_TWINS[k]] = None if k == "dispatch_overhead_s" and not dynamic else v
    return out


def pins(strategy: Any, names: Sequence[str], written: Mapping[str, str] | None = None,
         ) -> tuple[dict[str, list[tuple[str, Any]]], dict[str, Any], str | None]:
    """--set strategy.X for plan: (constraints pinning the axes, fixed fields, the pinned sync mode or None).

    ``strategy`` is the validated StrategySpec, ``names`` the fields that were set. A field plan cannot
    honour is refused: it is never silently ignored. ``written``: where a field was written when not
    ``--set strategy.X`` (a ``--strategy`` file's field, e.g. ``--strategy: run.sh: --fp8-param-gather``), for
    the refusals.
    """
    at = {**{n: f"--set strategy.{n}" for n in names}, **(written or {})}
    cons: dict[str, list[tuple[str, Any]]] = {}
    fixed: dict[str, Any] = {}
    sync = None
    for name in dict.fromkeys(names):
        value = getattr(strategy, name, None)
        if name not in PIN_AXES and name not in PIN_FIXED:
            raise InputError(f"plan cannot honour strategy.{name}", where=at[name],
                             allowed="strategy." + ", strategy.".join(PIN_AXES + PIN_FIXED))
        if name in ("dp", "tp", "pp", "cp", "ep"):
            if value is None:
                continue
            cons[name] = [("=", int(value))]
        elif name == "zero":
            cons[name] = [("=", int(Zero.parse(value)))]
        elif name == "recompute":
            cons[name] = [("=", int(Recompute.parse(value)))]
        elif name in ("sequence_parallel", "overlap", "moe_flex_dispatcher", "moe_a2a_overlap"):
            if value is None:  # sequence_parallel unset: the planner searches it
                continue
            cons[name] = [("=", bool(value))]
        elif name == "cp_comm_type":
            cons[name] = [("=", int(CpCommType.parse(value, "strategy.cp_comm_type")))]
        elif name == "moe_flex_backend":
            cons[name] = [("=", int(FlexBackend.parse(value, "strategy.moe_flex_backend")))]
        elif name == "cp_a2a_size":
            cons[name] = [("=", int(value or 1))]
        elif name == "schedule":
            sch = parse_schedule(value)
            cons[name] = [("=", (int(sch.kind), sch.virtual_stages if sch.kind == ScheduleKind.INTERLEAVED else None))]
        elif name == "algorithm":
            cons[name] = [("=", int(Algorithm.parse(value)))]
        elif name == "compression":
            comp = parse_compression(value)
            cons[name] = [("=", (int(comp.kind), comp.topk_ratio))]
        elif name == "dp_comm":
            dc = parse_dp_comm(value)
            cons[name] = [("=", (dc.servers, dc.colocated))]
        elif name == "assignment":
            cons[name] = [("=", int(Assignment.parse(value)))]
        elif name == "layout":
            cons[name] = [("=", int(Layout.parse(value)))]
        elif name == "bucket_size":
            cons["bucket"] = [("=", float(value or 0.0))]
        elif name == "sync":
            sync = parse_sync(value).label()
        elif name == "recompute_modules":
            fixed[name] = memory.recompute_modules_code(str(value or ""))
        elif name == "recompute_method":
            fixed["recompute_uniform"] = RecomputeMethod.parse(value) == RecomputeMethod.UNIFORM
        elif name == "stage_layers":
            # every candidate runs this split (its code in job.STAGE_SPLITS); a candidate whose pp x V is not its
            # length is infeasible (pipeline_ranks._layers_split), as for first/last_stage_layers
            fixed["stage_split"] = -1 if value is None else stage_split_code(value)
        elif name == "loss_impl":
            fixed[name] = int(LossImpl.parse(value, "strategy.loss_impl"))
        elif name == "layer_impl":
            fixed[name] = int(LayerImpl.parse(value, "strategy.layer_impl"))
        elif name == "offload_states":  # every candidate's; where its ZeRO stage cannot run it, state_offload_invalid
            fixed[name] = int(StateOffload.parse(value, "strategy.offload_states"))
        elif type(GRID_DEFAULTS.get(name)) in (bool, int, float):
            # a flag, a count or a time: the grid's own type, and its default where the spec's None means "not set"
            # (the stage and chunk layer counts, etp, shard_group, ep_dispatch_sms, dispatch_overhead: a file's
            # `dispatch_overhead: null` went into the grid as NaN and plan stopped "a result is not finite", where
            # predict prices the same file at the default: consist38)
            fixed[name] = GRID_DEFAULTS[name] if value is None else type(GRID_DEFAULTS[name])(value)
        else:
            fixed[name] = value
    switches, stages = zero_switch_stages(fixed)
    if switches and "zero" not in names:
        # only the stages that run the pinned switch are searched (ZERO_SWITCHES; run says so)
        cons.setdefault("zero", []).extend(("!=", int(z)) for z in Zero if z not in stages)
    if "recompute" not in names:  # only the mode a pinned recompute field runs under is searched (plan says so)
        for _, mode in recompute_switch_modes(strategy, names):
            if ("=", int(mode)) not in cons.get("recompute", []):
                cons.setdefault("recompute", []).append(("=", int(mode)))
    _refuse_chunks_with_flat_trainer(strategy, names, fixed, at)
    _pipeline_switch_pins(strategy, names, fixed, cons, at)
    _check_hier_shard_group(sync, fixed.get("shard_group"), cons.get("zero"), at.get("shard_group", ""))
    if fixed.get("deepspeed_pipeline"):
        _deepspeed_pipeline_pins(strategy, names, cons, at["deepspeed_pipeline"])
    if cons.get("moe_a2a_overlap") == [("=", True)]:
        _moe_a2a_overlap_pins(fixed, cons, at["moe_a2a_overlap"])
    if fixed.get("moe_allgather_dispatcher"):
        _allgather_dispatcher_pins(fixed, cons, at["moe_allgather_dispatcher"])
    if fixed.get("moe_shared_expert_overlap"):
        _shared_expert_overlap_pins(cons, at["moe_shared_expert_overlap"])
    if fixed.get("moe_shared_expert_stream"):
        _shared_expert_stream_pins(fixed, cons, at["moe_shared_expert_stream"])
    trainer = next((n for n in TRAINER_NAMES if fixed.get(n)), None)
    if trainer is not None:
        # a pinned framework trainer runs NCCL's all-reduce / reduce-scatter and nothing else
        # (specs.training.trainer_what_if_refusal, which refuses them pinned): the what-ifs it has no code for are
        # left out of the search, as --allow custom-collectives, compression or parameter-server would open them
        cons.setdefault("dp_comm", []).append(("=", (0, None)))
        cons.setdefault("compression", []).extend([("!=", (int(CompressionKind.INT8), None)),
                                                   ("!=", (int(CompressionKind.TOPK), None))])
        if trainer != "deepspeed_pipeline":  # DeepSpeed's communication_data_type alone casts before the sync
            cons["compression"].append(("!=", (int(CompressionKind.FP16), None)))
        cons.setdefault("algorithm", []).extend(("!=", int(a)) for a in Algorithm
                                                if a not in (Algorithm.AUTO, Algorithm.RING, Algorithm.TREE))
        cons.setdefault("assignment", []).append(("=", int(Assignment.STATIC)))
    if fixed.get("xla_gpu_lhs"):
        # XLA's all-reduces pass through no compression hook (StrategySpec refuses compression with it pinned)
        cons.setdefault("compression", []).extend(("!=", (int(k), None)) for k in CompressionKind
                                                  if k != CompressionKind.NONE)
    if fixed.get("megatron_ddp"):
        # Megatron-Core's DDP runs at ZeRO 0 or 1 only (its distributed optimizer; StrategySpec refuses zero >= 2 with
        # it): plan would otherwise rank sharded strategies that predict refuses
        cons.setdefault("zero", []).append(("<=", int(Zero.OPTIMIZER)))
    if fixed.get("nanotron_trainer"):
        # nanotron's ZeRO is stage 1 only (StrategySpec refuses zero >= 2 with it), as for megatron_ddp above; its
        # pipeline engines are 1f1b and afab (GPipe's order) and it has no context parallelism (StrategySpec refuses
        # the others pinned): plan would otherwise rank interleaved, zero-bubble or cp > 1 plans predict refuses
        cons.setdefault("zero", []).append(("<=", int(Zero.OPTIMIZER)))
        cons.setdefault("schedule", []).extend([("!=", (int(ScheduleKind.INTERLEAVED), None)),
                                                ("!=", (int(ScheduleKind.ZERO_BUBBLE), None))])
        cons.setdefault("cp", []).append(("=", 1))
    return cons, fixed, sync


#: The pinned fields that run on some pipelines only, each with the constraint that keeps the search to those
#: (:func:`_pipeline_switch_pins`) and the words :func:`_warn_pipeline_switches` says it in: defer_embedding_wgrad at
#: pp >= 2 (job.defer_embedding_wgrad_refusal, Megatron-Core's ModelParallelConfig), first/last_chunk_layers under an
#: interleaved schedule (job._check_chunk_layers: they split an interleaved pipeline's model chunks). ux38: plan
#: searched pp 1 (1f1b) with them pinned and ranked only plans predict refuses. first/last_stage_layers at pp >= 2
#: (job._check_edge_split: "no pipeline to split"); fuzzpin38: pinned beside pp 1 plan searched 123,120 candidates
#: and called every one layers_not_divisible, where predict names the pin.
PIPELINE_SWITCHES: dict[str, tuple[str, list[tuple[str, Any]], str, str]] = {
    **{n: ("pp", [(">=", 2)], "pp 2 or more", "at pp 1")
       for n in ("defer_embedding_wgrad", "first_stage_layers", "last_stage_layers")},
    **{n: ("schedule", [("!=", (int(k), None)) for k in ScheduleKind if k != ScheduleKind.INTERLEAVED],
           "interleaved schedules", "under 1f1b, gpipe or zb (a flat schedule)")
       for n in ("first_chunk_layers", "last_chunk_layers")}}


def _pipeline_switches(strategy: Any, names: Sequence[str]) -> list[str]:
    """The pinned :data:`PIPELINE_SWITCHES` that are on (defer_embedding_wgrad true, a stage or chunk layer count
    given)."""
    # a count of 0 is given (a stage may hold none), not off: `0 in (None, False)` is true
    return [n for n in PIPELINE_SWITCHES if n in names and getattr(strategy, n, None) is not None
            and getattr(strategy, n) is not False]


def _pipeline_switch_pins(strategy: Any, names: Sequence[str], fixed: dict[str, Any],
                          cons: dict[str, list[tuple[str, Any]]], at: Mapping[str, str]) -> None:
    """The search kept to the pipelines a pinned :data:`PIPELINE_SWITCHES` runs on (its constraint added to
    ``cons``), and what predict refuses whatever the pipeline refused here, at the pin: defer_embedding_wgrad with
    grad_accumulation_fusion false pinned too, a stage layer count with pp 1 pinned, a chunk layer count with a flat
    schedule pinned."""
    for name in _pipeline_switches(strategy, names):
        if name == "defer_embedding_wgrad":
            # a pinned pp is the one searched (pp 1 refused here, not as "--set: no pp meets pp=1, pp>=2")
            shown = {n: f" ({at[n].rsplit(': ', 1)[-1]})" if n in at else ""
                     for n in ("pp", "grad_accumulation_fusion")}
            why = defer_embedding_wgrad_refusal(int(strategy.pp) if "pp" in names else 2,
                                                bool(fixed.get("grad_accumulation_fusion", True)), shown["pp"],
                                                shown["grad_accumulation_fusion"])
            if why is not None:
                raise InputError(why[0], where=at[name], allowed=why[1])
        elif name in ("first_stage_layers", "last_stage_layers"):
            if "pp" in names and int(strategy.pp) < 2:  # job._check_edge_split's refusal, in its words
                raise InputError(f"{name} with pp {strategy.pp} (pinned by {at['pp']}): no pipeline to split",
                                 where=at[name], allowed=f"pp >= 2, or leave {name} out")
        elif "schedule" in names and parse_schedule(strategy.schedule).kind != ScheduleKind.INTERLEAVED:
            raise InputError(f"{name} is set but the schedule is {strategy.schedule} (pinned by {at['schedule']})",
                             where=at[name], allowed="an interleaved:V schedule (V >= 2), or first/last_stage_layers "
                                                     "for 1f1b")
        key, pairs, _, _ = PIPELINE_SWITCHES[name]
        cons.setdefault(key, []).extend(p for p in pairs if p not in cons.get(key, []))


#: The pinned framework trainers that run flat pipeline schedules only, in words: DeepSpeed's PipelineEngine runs
#: its TrainSchedule (1F1B; :func:`_deepspeed_pipeline_pins`), nanotron 1f1b and afab (GPipe's order; :func:`pins`).
FLAT_TRAINERS = {"deepspeed_pipeline": "DeepSpeed's TrainSchedule (1f1b)", "nanotron_trainer": "1f1b or afab (gpipe)"}


def _refuse_chunks_with_flat_trainer(strategy: Any, names: Sequence[str], fixed: Mapping[str, Any],
                                     at: Mapping[str, str]) -> None:
    """Refuse a pinned first/last_chunk_layers beside a pinned trainer that runs flat schedules only
    (:data:`FLAT_TRAINERS`): the chunk counts need an interleaved schedule (:data:`PIPELINE_SWITCHES`), the trainer
    refuses one, so no candidate is left. ux38b: with deepspeed_pipeline the trainer's 1f1b pin replaced the
    interleaved one and plan ranked 1f1b plans predict refuses; with nanotron_trainer the search was empty, "no split
    ... meets what was asked", neither naming the two pins."""
    chunks = [n for n in ("first_chunk_layers", "last_chunk_layers") if n in _pipeline_switches(strategy, names)]
    trainer = next((t for t in FLAT_TRAINERS if fixed.get(t)), None)
    if chunks and trainer is not None:
        name = chunks[0]
        raise InputError(f"{name} {getattr(strategy, name)} splits an interleaved pipeline's model chunks, and the "
                         f"pinned {trainer} ({at[trainer]}) runs {FLAT_TRAINERS[trainer]} only, a flat schedule",
                         where=at[name], allowed=f"first/last_stage_layers for a flat schedule's stages, or leave "
                                                 f"out {name} or {trainer}")


def _warn_recompute_switches(strategy: Any, pinned: Sequence[str], asked: Constraints) -> None:
    """Say that the search keeps to the recompute mode a pinned :data:`RECOMPUTE_SWITCHES` field runs under, where
    the constraints given (``asked``) allowed others (ux38b)."""
    if "recompute" in pinned:
        return
    for name, mode in recompute_switch_modes(strategy, pinned):
        out = [r.label for r in Recompute if r != mode and allowed_by(np.asarray(int(r)), asked.get("recompute", []))]
        if out:
            value = str(getattr(strategy, name)).lower()
            notices.warn(f"plan searches recompute {mode.label} only: the pinned {name} {value} cannot run at "
                         f"recompute {' or '.join(out)} (predict refuses it there)")


def _warn_pipeline_switches(strategy: Any, pinned: Sequence[str], asked: Constraints) -> None:
    """Say that the search keeps to the pipelines a pinned :data:`PIPELINE_SWITCHES` runs on, as ux37 says it of the
    ZeRO stages, where the constraints given (``asked``, before the pins) allowed others: pp 1 is searched on every
    GPU count, the flat schedules unless a constraint pins an interleaved one."""
    for name in _pipeline_switches(strategy, pinned):
        key, _, kept, out = PIPELINE_SWITCHES[name]
        if key in pinned:
            continue
        if key == "pp" and not bool(allowed_by(np.asarray([1]), asked.get("pp", []))[0]):
            continue
        if key == "schedule" and any(op in ("=", "==") and code == ScheduleKind.INTERLEAVED
                                     for op, (code, _) in asked.get("schedule", [])):
            continue
        value = str(getattr(strategy, name)).lower()
        notices.warn(f"plan searches {kept} only: the pinned {name} {value} cannot run {out} (predict refuses it "
                     "there)")


def _segment_split_refusal(job: Job, gpus: int, c: Constraints) -> str:
    """Why no configuration is left, where it is the hybrid pattern's '|' segments: they are the pipeline stages
    (:func:`configurations`: pp is 1 or divides the segments; Megatron-LM runs pp x v = segments), and the pp
    constraint allows none of those pp. "" where that is not the reason (plan's explanation then says only that no
    split of the GPUs meets what was asked, as it said here too, the segments unnamed)."""
    hy = job.shape.hybrid if job.is_transformer else None
    segments = int(hy.segments) if hy is not None else 1
    if segments < 2 or "pp" not in c:
        return ""
    div = divisors(gpus)
    fits = div[(div == 1) | (segments % div == 0)]
    if allowed_by(fits, c["pp"]).any():
        return ""
    asked = div[allowed_by(div, c["pp"])]
    shown = ", ".join(str(int(v)) for v in fits)
    return (f"the model's hybrid pattern has {segments} segments (split at '|'), which are the pipeline stages "
            f"(Megatron-LM runs pp x v = segments): pp is {shown} on {gpus} GPUs, and the pp constraint allows "
            f"{', '.join(str(int(v)) for v in asked) or 'no divisor of the GPU count'}")


def _warn_unpriced_bucket(job: Job, fixed: dict[str, Any], c: Constraints) -> None:
    """Predict's warning (job._warn_unpriced_fields) for a pinned bucket size that no candidate prices: nanotron's
    ZeRO-1 with fp32 accumulation all-reduces its whole fp32 buffer in one call, whatever the size (step.
    bucket_size_priced); the plans were explained as run in buckets of that size (their strategy now names the
    framework's default, what was priced: predict.result_at)."""
    sizes = [v for op, v in c.get("bucket", []) if op in ("=", "==") and v]
    zero = [v for op, v in c.get("zero", []) if op in ("=", "==")]
    if sizes and fixed.get("nanotron_trainer") and zero == [int(Zero.OPTIMIZER)] and job.grad_bytes > job.elem_bytes:
        notices.warn(f"strategy.bucket_size = {sizes[0]:g} B is not priced: nanotron_trainer at zero 1 with fp32 "
                     "gradient accumulation builds no DDP buckets (one all-reduce of the whole fp32 gradient buffer "
                     "after the last backward)")
    bf16_fp32 = str(job.precision) == "bf16" and job.grad_bytes > job.elem_bytes
    if sizes and fixed.get("deepspeed_pipeline") and (zero == [int(Zero.NONE)] or (
            zero == [int(Zero.OPTIMIZER)] and bf16_fp32)):
        # dp_comm.deepspeed_pipeline_fixed_buckets (review17f): predict's warning, job._warn_unpriced_fields
        notices.warn(f"strategy.bucket_size = {sizes[0]:g} B is not priced: DeepSpeed's PipelineEngine all-reduces "
                     "the gradients in buckets of MEMORY_OPT_ALLREDUCE_SIZE (5e8 elements) there, not "
                     "reduce_bucket_size")


def _warn_cast_noop(job: Job, c: Constraints) -> None:
    """Predict's note (compression.cast_noop_note) for a pinned 16-bit cast of 16-bit gradients: every plan was
    priced as compression none, which the ranked strategies' "compression fp16" did not say."""
    pinned = [kk for op, (kk, _) in c.get("compression", []) if op in ("=", "==")]
    note = compression.cast_noop_note(CompressionKind.FP16.label, job.grad_bytes)
    if pinned == [int(CompressionKind.FP16)] and note:
        notices.warn(note)


def _trainer_sync_modes(fixed: dict[str, Any], modes: Sequence[str], c: Constraints,
                        written: Mapping[str, str] | None) -> None:
    """Refuse a searched sync mode (--sync-modes) that the pinned framework trainer cannot run, as predict refuses it
    (specs.training.trainer_sync_refusal): bsp only, and with megatron_ddp hier:G:1, its partial distributed
    optimizer, which needs zero 1: pinned, since the search would otherwise price hier:G:1 at zero 0 too."""
    trainer = next((n for n in TRAINER_NAMES if fixed.get(n)), None)
    if trainer is None:
        return
    zero = [v for op, v in c.get("zero", []) if op in ("=", "==")]
    for mode in modes:
        why = trainer_sync_refusal(trainer, zero[0] if zero else None, mode)
        if not why and parse_sync(mode).kind != SyncKind.BSP and not zero:
            why = (f"{mode} with megatron_ddp is Megatron-Core's partial distributed optimizer, which needs zero 1; "
                   "plan searches zero")
        if why:
            pinned_at = (written or {}).get(trainer, f"--set strategy.{trainer}")
            raise InputError(f"{why} ({trainer} pinned by {pinned_at})", where="--sync-modes",
                             allowed="--sync-modes bsp" + (", or hier:G:1 with --set strategy.zero=1"
                                                           if trainer == "megatron_ddp" else "") + f" with {trainer}")


def _allgather_dispatcher_pins(fixed: dict[str, Any], cons: dict[str, list[tuple[str, Any]]], where: str) -> None:
    """A pinned moe_allgather_dispatcher (docs/model.md#ep-allgather) holds the EP dispatch search
    (:func:`_with_moe_dispatch`) to what Megatron-Core runs beside it, as predict does
    (job._check_allgather_dispatcher): the flex dispatcher off (one moe_token_dispatcher_type) and moe_a2a_overlap
    off ("supported with alltoall/flex token dispatcher"); a pin of either on is refused, not searched."""
    for other in ("moe_flex_dispatcher", "moe_a2a_overlap"):
        if any(op in ("=", "==") and value is True for op, value in cons.get(other, [])):
            raise InputError(f"moe_allgather_dispatcher with {other} true: Megatron-Core runs {other} with the "
                             "alltoall or flex dispatcher only", where=where,
                             allowed=f"one of moe_allgather_dispatcher and {other}")
        cons.setdefault(other, []).append(("=", False))
    # beside moe_shared_expert_overlap Megatron-Core refuses it only for a model with shared experts (lines
    # 1813-1826): :func:`search` refuses that pair, where the model is known, as predict does


def _shared_expert_overlap_pins(cons: dict[str, list[tuple[str, Any]]], where: str) -> None:
    """A pinned moe_shared_expert_overlap keeps the EP dispatch search (:func:`_with_moe_dispatch`) off
    moe_a2a_overlap, which Megatron-Core refuses beside it ("disable moe_shared_expert_overlap when enabling
    overlap_moe_expert_parallel_comm", TransformerConfig.__post_init__ at NVIDIA/Megatron-LM@d98e8a64dd
    transformer_config.py lines 3039-3041), as predict does (job._check_shared_expert_overlap); both pinned on is
    refused. Selective recompute of shared_experts, its other refusal, is left out of the space
    (:func:`outer_valid`)."""
    if any(op in ("=", "==") and value is True for op, value in cons.get("moe_a2a_overlap", [])):
        raise InputError("moe_shared_expert_overlap with moe_a2a_overlap true: Megatron-Core refuses them together "
                         "('disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm')",
                         where=where, allowed="one of moe_shared_expert_overlap and moe_a2a_overlap")
    cons.setdefault("moe_a2a_overlap", []).append(("=", False))


def _shared_expert_stream_pins(fixed: dict[str, Any], cons: dict[str, list[tuple[str, Any]]], where: str) -> None:
    """A pinned moe_shared_expert_stream (NeMo Automodel's shared-expert side stream,
    docs/model.md#shared-expert-stream) keeps the EP dispatch search off moe_a2a_overlap, as predict refuses the pair
    (job._check_shared_expert_overlap); pinned beside moe_shared_expert_overlap or moe_a2a_overlap true it is
    refused."""
    if fixed.get("moe_shared_expert_overlap") or any(
            op in ("=", "==") and value is True for op, value in cons.get("moe_a2a_overlap", [])):
        raise InputError("moe_shared_expert_stream (NeMo Automodel's shared-expert side stream) does not run with "
                         "moe_shared_expert_overlap or moe_a2a_overlap", where=where,
                         allowed="one of moe_shared_expert_stream, moe_shared_expert_overlap and moe_a2a_overlap")
    cons.setdefault("moe_a2a_overlap", []).append(("=", False))


def _moe_a2a_overlap_pins(fixed: dict[str, Any], cons: dict[str, list[tuple[str, Any]]], where: str) -> None:
    """A pinned moe_a2a_overlap keeps plan to what Megatron-Core runs it with, as predict does
    (job._check_moe_a2a_overlap, TransformerConfig.__post_init__ at NVIDIA/Megatron-LM@d98e8a64dd): no full
    recompute (the recompute axis drops it), and no selective recompute of moe, refused when both are pinned
    (recompute_modules moe needs recompute selective, so no candidate would be left). The step keeps the all-to-alls
    exposed on such candidates (model_parallel_comm._with_moe_a2a_overlap), but plan ranked them under the pinned
    flag."""
    if int(fixed.get("recompute_modules", 0)) & RECOMPUTE_MODULES["moe"]:
        # no candidate could run (step Infeasible.MOE_A2A_OVERLAP_INVALID): refused as predict refuses it
        raise InputError("moe_a2a_overlap does not run with selective recompute of moe", where=where,
                         allowed="recompute_modules without moe, or moe_a2a_overlap false "
                         "(Megatron-Core TransformerConfig: disable moe in recompute_modules when enabling "
                         "overlap_moe_expert_parallel_comm)")
    if ("=", int(Recompute.FULL)) in cons.get("recompute", []):
        raise InputError("moe_a2a_overlap does not run with full recompute", where=where,
                         allowed="recompute none or selective, or moe_a2a_overlap false")
    cons.setdefault("recompute", []).append(("!=", int(Recompute.FULL)))


def _deepspeed_pipeline_pins(strategy: Any, names: Sequence[str], cons: dict[str, list[tuple[str, Any]]],
                             where: str) -> None:
    """A pinned deepspeed_pipeline keeps plan to what DeepSpeed's PipelineEngine runs, as predict does: its
    TrainSchedule (1F1B; a pinned other schedule is refused, job._grid_from_strategy) and ZeRO 0 or 1 (the engine
    asserts stage < 2; a pinned zero 2/3 is refused by StrategySpec). Applied after every pin: a schedule pinned
    after deepspeed_pipeline replaced its 1F1B pin, and plan ranked interleaved plans predict refuses."""
    if "schedule" in names and parse_schedule(strategy.schedule).kind != ScheduleKind.ONE_F_ONE_B:
        raise InputError(f"deepspeed_pipeline runs DeepSpeed's TrainSchedule, not {strategy.schedule}",
                         where=where, allowed="schedule: 1f1b with deepspeed_pipeline")
    cons["schedule"] = [("=", (int(ScheduleKind.ONE_F_ONE_B), None))]
    cons.setdefault("zero", []).append(("<=", int(Zero.OPTIMIZER)))


def _check_hier_shard_group(sync: str | None, shard: Any, zero: list[tuple[str, Any]] | None, where: str) -> None:
    """Refuse a pinned shard_group that a pinned hier:G overrides for HSDP (the hier group is the shard group,
    dp_comm.hier_group), as predict does (job.build): plan would otherwise rank strategies predict refuses."""
    if sync is None or not shard or (zero is not None and zero != [("=", int(Zero.HSDP))]):
        return
    spec = parse_sync(sync)
    if spec.kind == SyncKind.HIER and int(shard) != int(spec.param):
        raise InputError(f"zero hsdp under hier:{spec.param} shards inside the hier groups of {spec.param} replicas, "
                         f"not shard_group = {shard}", where=where,
                         allowed=f"shard_group unset or {spec.param}, strategy.zero pinned to another stage, or "
                                 "another sync mode")


def _check_pins_meet_constraints(cons: dict[str, list[tuple[str, Any]]], strategy: Any, pinned: Sequence[str],
                                 written: Mapping[str, str] | None) -> None:
    """Refuse a --constraint that the pinned strategy's own constraints leave no value of, naming the pins. fuzz28:
    ``plan --strategy run.sh --constraint zero=3`` (a Megatron-LM launch pins megatron_ddp, which adds zero<=1) was
    "--constraint: no zero meets zero=3, zero<=1 together", a zero<=1 nobody wrote. The pins that add constraints
    on the key are found one by one (:func:`pins` of each alone), on this error path only."""
    try:
        normalize_constraints(cons)
        return
    except InputError as exc:
        refusal = exc
    at = {n: (written or {}).get(n, f"--set strategy.{n}") for n in pinned}
    for key in cons:
        try:
            normalize_constraints({key: cons[key]})
            continue
        except InputError as exc:
            refusal = exc
        origins = []
        for name in dict.fromkeys(pinned):
            try:
                if key in pins(strategy, [name], written)[0]:
                    origins.append(f"{name} ({at[name]})")
            except InputError:  # a pin refused alone (needs another one beside it): not the one that adds it
                continue
        if origins:
            raise InputError(f"{refusal.what}: {key} is also constrained by the pinned {', '.join(origins)}",
                             where=refusal.where,
                             allowed=f"a constraint on {key} that the pinned strategy allows, or that setting changed")
        break
    raise refusal


#: Global batches the time-to-target objective tries, as multiples of the default (one sequence per GPU).
GLOBAL_BATCH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _at_batch(pred: Prediction, b: int, default_batch: int, b_noise: float) -> Prediction:
    """``pred`` (a plan at global batch ``b``) with its time to train and cost on the same footing as the
    ranking: the workload's ``train_tokens`` is the budget at the default batch, and the tokens to reach
    the same loss grow as E_min (1 + B/B_noise) (McCandlish et al. 2018, arXiv 1812.06162 §2.3,
    (S/S_min - 1)(E/E_min - 1) = 1), so at batch b they are ``train_tokens (b + B_noise) / (default + B_noise)``."""
    scale = (b + b_noise) / (default_batch + b_noise)
    if scale == 1.0 or pred.time_to_train_s is None:
        return pred
    return replace(pred, time_to_train_s=pred.time_to_train_s * scale,
                   cost_usd=None if pred.cost_usd is None else pred.cost_usd * scale)


def _search_batches(job: Job, gpus: int, batch: int, *, top: int, **kw: Any) -> PlanResult:
    """Time to target over the global batch too (when the critical batch B_noise is known and the batch is
    not fixed): each batch B in :data:`GLOBAL_BATCH_FACTORS` x ``batch`` is searched on its own, and plans are
    ranked by time to target, S_min (1 + B_noise/B) t_step / sync efficiency (McCandlish et al. 2018,
    :mod:`scalemodel.cost.efficiency`), i.e. the per-effective-token score x (B + B_noise), up to a constant.

    Each ranked plan's batch efficiency is against the smallest batch searched, B_ref: (B_ref + B_noise) / (B +
    B_noise), in (0, 1] as McCandlish's E_min / E and Pollux's M >= M0 have it (against the default batch the rows
    below it read above 100 %). ``search`` names B_ref and the budget restated at it, train_tokens (B_ref + B_noise)
    / (B_default + B_noise) tokens, so a row's time to train is that / (tokens/s x sync eff. x batch eff.)."""
    bn = job.critical_batch
    batches: list[int] = []
    for f in GLOBAL_BATCH_FACTORS:
        b = int(round(batch * f))
        if b >= 1 and b not in batches:
            batches.append(b)
    # searched largest first (fuzz41): its space is most often the largest (more micro-batches), so a space over
    # ``max_candidates`` is refused before the smaller batches have been searched, not after six of them; each search
    # is independent of the others, so the runs (in batch order below) and the ranking are the same
    found = {b: search(job, gpus, b, objective="time-to-train", top=top, **kw) for b in sorted(batches, reverse=True)}
    runs = [(b, found[b]) for b in batches]
    rows = sorted(((v * (b + bn), k, i) for k, (b, r) in enumerate(runs) for i, v in enumerate(r.objective_values)))
    rows = rows[:top]
    base = min(runs, key=lambda br: min(br[1].objective_values, default=math.inf) * (br[0] + bn))[1]
    by_reason: dict[str, int] = {}
    for _b, r in runs:
        for key, n in r.infeasible_by_reason.items():
            by_reason[key] = by_reason.get(key, 0) + n
    ref = min(b for b, _r in runs)
    search_info = dict(base.search, covered=sum(r.search["covered"] for _b, r in runs),
                       evaluated=sum(r.search["evaluated"] for _b, r in runs),
                       global_batches=[b for b, _r in runs], reference_batch=ref,
                       reference_tokens=job.train_tokens * (ref + bn) / (batch + bn) if job.train_tokens > 0 else None)
    return replace(
        base, candidates_evaluated=sum(r.candidates_evaluated for _b, r in runs),
        feasible=sum(r.feasible for _b, r in runs), infeasible_by_reason=by_reason,
        ranked=[_at_batch(runs[k][1].ranked[i], runs[k][0], batch, bn) for _v, k, i in rows],
        batch_efficiency=[float(efficiency.statistical_efficiency(runs[k][0], bn, ref_batch=ref))
                          for _v, k, _i in rows],
        objective_values=[v for v, _k, _i in rows],
        equivalents=[runs[k][1].equivalents[i] for _v, k, i in rows],
        custom=[runs[k][1].custom[i] for _v, k, i in rows], search=search_info,
        elapsed_s=sum(r.elapsed_s for _b, r in runs))


def pareto_front(preds: Sequence[Prediction]) -> list[Prediction]:
    """The plans no other plan beats on both step throughput (tokens/s) and progress per second (tokens/s x
    statistical efficiency, i.e. time to target); at a fixed GPU count cost is time to target x GPUs x price,
    so the cost axis adds no other trade-off. Sorted by throughput, fastest first; duplicates dropped."""
    pts = sorted(((-p.throughput["tokens_per_s"], -p.throughput["tokens_per_s"] * p.sync["statistical_efficiency"], i)
                  for i, p in enumerate(preds)))
    front: list[Prediction] = []
    best_eff = 0.0
    for _x, y, i in pts:
        if -y > best_eff * (1 + 1e-6):  # more progress per second than every faster plan
            front.append(preds[i])
            best_eff = -y
    return front


def plan(cluster: Any, workload: Any, gpus: int, training: Any, *, objective: str = "throughput", top: int = 5,
         constraints: dict[str, Any] | None = None, sync_modes: Sequence[str] = ("bsp",),
         straggler_cv: float | None = None, progress: Callable[[int, int], None] | None = None,
         echo: dict[str, Any] | None = None, allow: Sequence[str] = (), strategy: Any = None,
         pinned: Sequence[str] = (), pareto: bool = False, written: Mapping[str, str] | None = None,
         max_candidates: float = MAX_CANDIDATES) -> PlanResult:
    """Search every valid strategy for validated specs (the engine behind `scalemodel plan`).

    The global batch defaults to one sequence per GPU. ``echo`` holds what the caller wants echoed
    in the result's inputs besides the resolved job (the constraints as typed, the --set overrides).
    ``strategy`` (a StrategySpec) with ``pinned`` (the fields --set on it) fixes those axes
    (:func:`pins`; ``written`` names where a pinned field was written when not ``--set strategy.X``, a
    ``--strategy`` file's field); ``allow`` opens non-mainstream choices (:data:`ALLOW`). ``pareto`` adds the front of
    step throughput vs time to target vs cost (:func:`pareto_front`) over the best plans of the
    throughput and the time-to-train searches (50 each; the front of those plans, not of the whole space).
    ``max_candidates`` bounds each search's space (:func:`check_space`; time to train over the batch searches seven
    batches, each bounded apart, and ``pareto`` two more searches at the batch).
    """
    t0 = time.perf_counter()
    batch = int(training.global_batch or gpus)
    cluster.require_gpus(gpus)
    job = build_job(cluster, workload, training, straggler_cv=straggler_cv)
    cons = dict(normalize_constraints(constraints))
    fixed: dict[str, Any] = {}
    modes = list(sync_modes)
    for mode in modes:  # each backup worker is at least one GPU (a replica of tp x pp x cp; predict checks the exact)
        check_backup_workers(parse_sync(mode), gpus, None, cluster.largest_gpus, "--sync-modes")
    if pinned:
        extra, fixed, sync = pins(strategy, pinned, written)
        for key, check in (("fsdp_fp8_all_gather", check_fp8_all_gather), ("fp8_param_gather", check_fp8_all_gather),
                           ("fp4_param_gather", check_fp4_param_gather)):
            try:
                check(job, bool(fixed.get(key, False)), f"--set strategy.{key}")
            except InputError as exc:  # a --strategy file's field: named as the file wrote it
                if key not in (written or {}):
                    raise
                raise InputError(exc.what, where=(written or {})[key], allowed=exc.allowed) from None
        for key, rule in PIN_CHECKS:  # ux38: recompute_modules titan_op on an MoE model ranked plans predict refuses
            if key in pinned:
                try:
                    rule(job, strategy)
                except InputError as exc:
                    raise InputError(exc.what, where=(written or {}).get(key, f"--set strategy.{key}"),
                                     allowed=exc.allowed) from None
        switches, stages = zero_switch_stages(fixed)
        asked = [z for z in Zero if allowed_by(np.asarray(int(z)), cons.get("zero", []))]  # --constraint's stages
        left_out = [z for z in asked if z not in stages]
        for k, v in normalize_constraints(extra, where="--set").items():
            cons[k] = [*cons.get(k, []), *v]
        if switches and left_out and "zero" not in pinned:
            kept = [z.label for z in asked if z in stages] or ["none"]
            out = [z.label for z in left_out]
            notices.warn(f"plan searches zero {', '.join(kept)} only: the pinned {' and '.join(switches)} "
                         f"cannot run at zero {', '.join(out[:-1]) + ' or ' if len(out) > 1 else ''}{out[-1]} "
                         "(predict refuses it there)")
        _check_pins_meet_constraints(cons, strategy, pinned, written)
        _warn_recompute_switches(strategy, pinned, normalize_constraints(constraints))
        _warn_pipeline_switches(strategy, pinned, normalize_constraints(constraints))
        if sync is not None:
            labels = [parse_sync(m).label() for m in modes]
            if labels not in (["bsp"], [sync]) and sync not in labels:
                raise InputError(f"strategy.sync={sync} is not among --sync-modes {','.join(labels)}",
                                 where="--set strategy.sync", allowed="a mode listed in --sync-modes, or leave one out")
            modes = [sync]
    inputs: dict[str, Any] = {
        "cluster": cluster.name, "model": workload.name, "gpus": gpus, "global_batch": batch, "seq_len": job.seq_len,
        "precision": job.precision, "objective": objective, "top": top, "constraints": [],
        "sync_modes": modes, "straggler_cv": job.straggler_cv, "train_tokens": job.train_tokens or None,
        "set": [], "allow": sorted(allow)}
    inputs.update(echo or {})
    if objective == "time-to-train" and job.critical_batch > 0 and not training.global_batch:
        result = _search_batches(job, gpus, batch, top=top, constraints=cons, sync_modes=modes, progress=progress,
                                 inputs=inputs, allow=allow, fixed=fixed, written=written,
                                 max_candidates=max_candidates)
        result.inputs["global_batch"] = result.search["global_batches"]  # searched, not fixed
    else:
        result = search(job, gpus, batch, objective=objective, top=top, constraints=cons, sync_modes=modes,
                        progress=progress, inputs=inputs, allow=allow, fixed=fixed, written=written,
                        max_candidates=max_candidates)
    _warn_unused_a2a_size(cons, result.ranked)
    if not result.ranked and result.infeasible_by_reason.get(Infeasible.OUT_OF_MEMORY.key):
        # the model states alone, sharded over every GPU (ZeRO-3), at the job's bytes per parameter: a floor on the
        # GPU count before any activation, for the explanation (report.explain): "no feasible strategy" said
        # nothing of how far off the job was
        per_param = job.elem_bytes + job.grad_bytes + job.optimizer_bytes_per_param
        states = float(job.params) * per_param
        result.search["memory_floor"] = {"params": float(job.params), "bytes_per_param": per_param,
                                         "state_bytes": states, "capacity_bytes": float(job.memory_capacity),
                                         "gpus": math.ceil(states / job.memory_capacity),
                                         # host offload of the states not searched, and the cluster could price it
                                         # (docs/model.md#state-offload): the explanation names it
                                         "offload_unsearched": bool(job.host_bandwidth > 0 and not {"offload", "all"}
                                                                    & set(allow) and "offload_states" not in fixed)}
    if pareto:
        pool: list[Prediction] = []
        for obj in ("throughput", "time-to-train"):
            pool += search(job, gpus, batch, objective=obj, top=PARETO_POOL, constraints=cons, sync_modes=modes,
                           inputs=inputs, allow=allow, fixed=fixed, max_candidates=max_candidates).ranked
        result.pareto = pareto_front(pool)
        result.elapsed_s = time.perf_counter() - t0
    return result


def _warn_unused_a2a_size(c: Constraints, ranked: Sequence[Prediction]) -> None:
    """A warning when a constraint (or --set pin) on cp_a2a_size acts on none of the ranked plans (round 16):
    ``--constraint cp_a2a_size=16`` at 64 GPUs ranked cp 8 rows of cp_comm_type a2a showing cp_a2a_size 16, which
    predict of the same strategy warns is not used, and ``cp_a2a_size>=3`` rows showing 1, without a word. The size
    acts only on an a2a+p2p row whose all-to-all groups it forms, 1 < cp_a2a_size < cp dividing cp
    (:func:`_with_cp_exchange`; TE prices A = 1 as p2p and A = cp as a2a)."""
    asked = c.get("cp_a2a_size", [])
    if not asked or not ranked:
        return

    def used(st: Mapping[str, Any]) -> bool:
        cp, size = int(st.get("cp", 1)), int(st.get("cp_a2a_size", 1))
        return str(st.get("cp_comm_type")) == CpCommType.A2A_P2P.label and 1 < size < cp and cp % size == 0

    if any(used(p.strategy) for p in ranked):
        return
    shown = ", ".join(f"cp_a2a_size{op}{v}" for op, v in asked)
    notices.warn(f"{shown} acts on none of the ranked plans: cp_a2a_size sizes the all-to-all groups of cp_comm_type "
                 "a2a+p2p (a divisor of cp, 1 < cp_a2a_size < cp), which none of them runs; add --constraint "
                 "cp_comm_type=a2a+p2p to rank only plans that do")


# --------------------------------------------------------------------------------------------
# comparisons (data for the explanation, which report/explain.py writes)


def part_gains(win: Prediction, other: Prediction) -> list[tuple[float, str]]:
    """(seconds ``other`` spends beyond ``win``, part) for every breakdown part, largest first."""
    return sorted(((other.breakdown_s[k] - win.breakdown_s[k], k) for k in BREAKDOWN_KEYS), reverse=True)


def strategy_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Strategy keys whose values differ between ``a`` and ``b`` (the GPU count and batch aside)."""
    return [k for k in a if k not in ("gpus", "global_batch") and a.get(k) != b.get(k)]
