"""Memory per GPU of a pipeline stage, rank and virtual chunk, and the peak over them.

:func:`memory_peak_stage` prices the busiest stage's bytes (:mod:`scalemodel.cost.memory`) for balanced and
uneven splits, per rank of a hybrid split (:func:`_segment_memory`) and per interleaved chunk
(:func:`_chunk_peak`, :func:`_given_chunk_peak`); :func:`memory_parts` and :func:`memory_total` are what the
step, the planner and ``memory`` report.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, NamedTuple

import numpy as np
from msgspec.structs import replace

from scalemodel.choices import LayerImpl, Recompute, ScheduleKind, Zero
from scalemodel.cost import compute, memory, pipeline, transformer
from scalemodel.engine.dp_comm import (
    _expert_state_shards,
    _state_shards,
    fp8_param_linear_per_layer,
    module_input_bytes,
    offloaded_tensor_bytes,
    proj_input_bytes,
)
from scalemodel.engine.job import Job, StrategyGrid
from scalemodel.engine.layer_compute import (
    _stage_recomputed,
    fp8_params_held,
    fp8_transpose_copy,
    fsdp_fp8_gather,
    fsdp_root_params,
    module_recipe,
    moe_capacity_buffers,
    mtp_recipe,
    recomputed_layers,
)
from scalemodel.engine.pipeline_ranks import (
    _chunk_layers,
    _chunked,
    _cut_rows,
    _etp,
    _join_results,
    _part_job,
    _rank_layers,
    _RankSplit,
    _RowsMemo,
    _split_rows,
    _splits_cover,
    _stage_layers,
)


def torch_fsdp2(g: StrategyGrid) -> np.ndarray:
    """Where the candidate shards with PyTorch FSDP2 (``fully_shard``): zero fsdp / hsdp flagged ``fsdp_per_param``
    (torchtitan's and NeMo Automodel's runs) or ``fsdp_defer_grad_sync`` (whose field names FSDP2): its shards and their
    gradients at the parameters' own dtype (:func:`scalemodel.cost.memory.fsdp2_shard_bytes`), TE's ``is_fsdp2``
    (no cached dense weight copy, :func:`weight_workspace`)."""
    return np.asarray((g.zero >= Zero.FSDP) & (g.fsdp_per_param | g.fsdp_defer_grad_sync), dtype=bool)


def memory_parts(job: Job, g: StrategyGrid, m: np.ndarray, *,
                 fragmentation: float = memory.DEFAULT_FRAGMENTATION,
                 workspace: float = memory.DEFAULT_WORKSPACE, sync: str = "bsp") -> dict[str, np.ndarray]:
    """Per-GPU bytes by part (scalemodel.cost.memory) on the pipeline stage with the peak, plus ``total``
    (:func:`memory_peak_stage`, which also says which stage that is)."""
    return memory_peak_stage(job, g, m, fragmentation=fragmentation, workspace=workspace, sync=sync).parts


def memory_total(job: Job, g: StrategyGrid, m: np.ndarray, *,
                 fragmentation: float = memory.DEFAULT_FRAGMENTATION,
                 workspace: float = memory.DEFAULT_WORKSPACE, sync: str = "bsp",
                 activations: MutableMapping[str, np.ndarray] | None = None) -> np.ndarray:
    """``memory_parts(...)["total"]`` alone (the planner's feasibility pass reads nothing else): the same stages
    compared the same way, but only their totals are selected per candidate, not every part, and the peak stage's
    rank and parameters are not priced (:func:`memory_peak_stage` with ``parts=False``; ``activations`` its memo)."""
    return memory_peak_stage(job, g, m, fragmentation=fragmentation, workspace=workspace, sync=sync,
                             parts=False, activations=activations).parts["total"]


class PeakStage(NamedTuple):
    """The pipeline stage :func:`memory_parts` prices, per candidate: ``parts`` its bytes by part and ``total``;
    ``rank`` its pipeline rank (0 the first stage, pp - 1 the last; 1 the busiest middle stage, which holds the
    second stage's micro-batches in flight); ``params`` the parameters one of its GPUs holds before ZeRO sharding
    (:func:`scalemodel.cost.memory.params_per_gpu` of that stage: its layers, embedding, output layer, MTP)."""

    parts: dict[str, np.ndarray]
    rank: np.ndarray
    params: np.ndarray


def memory_peak_stage(job: Job, g: StrategyGrid, m: np.ndarray, *,
                      fragmentation: float = memory.DEFAULT_FRAGMENTATION,
                      workspace: float = memory.DEFAULT_WORKSPACE, sync: str = "bsp", parts: bool = True,
                      activations: MutableMapping[str, np.ndarray] | None = None) -> PeakStage:
    """Per-GPU bytes by part of the stage with the most memory, and which stage it is (:class:`PeakStage`):
    the first stage (with the embedding); with a pipeline, a middle stage where it has more layers;
    and the last stage with the output layer, its logits and any multi-token prediction modules
    (:func:`_last_stage_memory`). ``sync``: under
    hier:G, ZeRO/FSDP shard the states inside the groups of G replicas (:func:`~scalemodel.engine.dp_comm.hier_group`).

    Weights are held at the compute element size (4 bytes for fp32/tf32 runs, else 2: fp8 GEMMs
    keep 16-bit weights). Generic workloads: the catalog's activation bytes per sample are fp32,
    scaled to the training precision, and full recompute keeps a quarter of them.

    ``parts`` false (:func:`memory_total`): only ``parts["total"]`` is returned, with ``rank`` 0 and ``params`` the
    model's (not priced); the total is the same to the bit (each stage's total is the sum of its parts in the
    same order, and the peak stage is chosen by the same comparisons).

    ``activations``: a memo of each stage's activation bytes ("first", "mid", "last"), shared by calls on grids
    that differ only in what the model states read (``sync``, the ZeRO stage): the first call fills it, the
    others read it (no activation argument depends on those: :func:`scalemodel.cost.memory.memory_per_gpu`).
    A hybrid pattern's rows of each rank split are priced apart (:func:`_split_rows`).
    """
    split = _split_rows(job, g)
    if split is not None:
        n, nd = g.shape[0], len(g.shape)
        return _join_results([(x.rows, memory_peak_stage(
            job, x.grid, _cut_rows(m, x.rows, n, nd), fragmentation=fragmentation, workspace=workspace, sync=sync,
            parts=parts, activations=None if activations is None else _RowsMemo(activations, f"rows {i}")))
            for i, x in enumerate(split)], n, nd)
    rank, params = np.zeros(1), np.full(1, float(job.params))
    if not job.is_transformer:
        deferred = g.fsdp_defer_grad_sync & (m > 1) & (g.zero >= Zero.FSDP)
        ms = memory.model_state_bytes(job.params, dp=_state_shards(job, g, sync), zero_stage=g.zero,
                                      weight_bytes=job.elem_bytes,
                                      grad_bytes=job.grad_bytes, optimizer_bytes=job.optimizer_bytes_per_param,
                                      gathered_params=np.where(g.fsdp_reshard_after_forward & ~deferred, 0.0,
                                                               job.params), fsdp2=torch_fsdp2(g),
                                       host_states=g.offload_states)
        # FSDP2's unsharded gradient accumulators under fsdp_defer_grad_sync (docs/model.md#fsdp-deferred-sync)
        ms = memory.ModelStates(weights=ms.weights, gradients=ms.gradients + np.where(
            deferred, job.grad_bytes * float(job.params), 0.0), optimizer=ms.optimizer)
        act = (job.generic_activation_bytes * (job.elem_bytes / 4.0) * g.micro_batch
               * np.where(g.recompute == Recompute.FULL, 0.25, 1.0))
        frag = fragmentation * (ms.total + act)
        out = {"weights": ms.weights, "gradients": ms.gradients, "optimizer": ms.optimizer, "activations": act,
               "fragmentation": frag, "workspace": workspace + 0 * act}
    else:
        kw = _memory_kwargs(job, g, m, sync, fragmentation, workspace)
        if _splits_cover(g, _rank_layers(job, g)):
            # every candidate a split's, whose ranks' own memory (_segment_memory) replaces the first, middle and
            # last stages' below: those are not priced (zeros stand in until the split's peak takes their place)
            br = _kept(memory.MemoryBreakdown(**dict.fromkeys(memory.MemoryBreakdown.__struct_fields__,
                                                             np.zeros(1))), parts)
        else:
            br, rank, params = _mean_stage_memory(job, g, m, kw, rank, params, parts, activations)
        br, rank, params = _segment_memory(job, g, m, kw, br, rank, params, parts, activations,
                                           (sync, fragmentation, workspace))
        if not parts:
            return PeakStage({"total": np.asarray(br.total, dtype=float)}, rank, params)
        assert isinstance(br, memory.MemoryBreakdown)
        out = {"weights": br.weights, "gradients": br.gradients, "optimizer": br.optimizer,
               "activations": br.activations, "fragmentation": br.fragmentation, "workspace": br.workspace}
    out = {k: np.asarray(v, dtype=float) for k, v in out.items()}
    out["total"] = sum(out.values())  # type: ignore[assignment]
    if not parts:
        return PeakStage({"total": out["total"]}, rank, params)
    return PeakStage(out, np.asarray(rank, dtype=float), np.asarray(params, dtype=float))


def _mean_stage_memory(job: Job, g: StrategyGrid, m: np.ndarray, kw: dict[str, Any], rank: np.ndarray,
                       params: np.ndarray, parts: bool, activations: MutableMapping[str, np.ndarray] | None
                       ) -> tuple[Any, np.ndarray, np.ndarray]:
    """:func:`memory_peak_stage`'s stages of a transformer by class (the first, the busiest middle one, the last;
    ``kw`` :func:`_memory_kwargs`): the peak's breakdown (its total alone where not ``parts``), rank and parameters."""
    _last, other, first = _stage_layers(job, g)
    # given first / last chunks: each rank's own chunks' recomputed layers (_stage_recomputed; None elsewhere)
    rec_last, rec_other, rec_first = _stage_recomputed(job, g, _last, other, first)
    # the first stage (with the embedding) and, with a pipeline, a middle stage (without it; _stage_layers' middle
    # class, the most layers a middle rank holds) with
    # the second stage's micro-batches in flight (the most any later stage holds): the larger is the peak
    stage = np.where(g.pp > 1, first, float(job.shape.layers))
    d_mtp = float(job.shape.mtp_layers)
    first_args: dict[str, Any] = dict(stage_layers=stage, mtp_modules=np.where(g.pp > 1, 0.0, d_mtp),
                                      recomputed_layers=recomputed_layers(g, stage) if rec_first is None else np.where(
                                          g.pp > 1, rec_first, recomputed_layers(g, stage)))
    br_f = _stage_memory(activations, "first", job.shape, **first_args, **kw)
    # given first / last chunks: rank 0's chunks each their own (_given_chunk_peak)
    act_c: np.ndarray | None = None if activations is None else activations.get("first chunks")
    if act_c is None:
        act_c = _given_chunk_peak(job, g, m, kw, False, dict(mtp_modules=0.0), stage,
                                  first_args["recomputed_layers"], br_f.activations)
        if act_c is not None and activations is not None:
            activations["first chunks"] = act_c
    if act_c is not None:
        br_f = memory.memory_per_gpu(job.shape, activations=act_c, **first_args, **kw)
    br = _kept(br_f, parts)
    if parts:
        params = _stage_params(job, kw, stage_layers=stage, mtp_modules=np.where(g.pp > 1, 0.0, d_mtp))
    if np.any((g.pp > 1) & (other > first)):  # with as many layers, a later stage holds less
        mid = np.where(g.pp > 1, np.maximum(other, 1.0), stage)
        rec_mid = recomputed_layers(g, mid) if rec_other is None else np.where(
            (g.pp > 1) & (other >= 1.0), rec_other, recomputed_layers(g, mid))
        br_o = _kept(_stage_memory(
            activations, "mid", job.shape, stage_layers=mid, recomputed_layers=rec_mid,
            embedding=g.pp <= 1, stage_rank=np.where(g.pp > 1, 1, 0), **kw), parts)
        take = (g.pp > 1) & (other > first) & (br_o.total > br.total)
        br = _where_breakdown(take, br_o, br)
        if parts:
            rank = np.where(take, 1.0, rank)
            params = np.where(take, _stage_params(job, kw, stage_layers=mid, embedding=g.pp <= 1), params)
    if np.any(g.pp > 1):
        br, rank, params = _last_stage_memory(job, g, br, _last, kw, rank, params, parts, activations, rec_last)
    return br, rank, params


def _memory_kwargs(job: Job, g: StrategyGrid, m: np.ndarray, sync: str, fragmentation: float,
                   workspace: float) -> dict[str, Any]:
    """The arguments every pipeline stage's :func:`scalemodel.cost.memory.memory_per_gpu` shares in
    :func:`memory_peak_stage` (a hybrid rank's own kinds: its :func:`_part_job`)."""
    return dict(
        micro_batch=g.micro_batch, seq_len=job.seq_len, dp=_state_shards(job, g, sync), tp=g.tp,
        expert_dp=_expert_state_shards(job, g, sync),
        pp=g.pp, cp=g.cp, ep=g.ep, zero_stage=g.zero, recompute=g.recompute,
        sequence_parallel=g.sequence_parallel, num_microbatches=m, schedule=g.schedule,
        virtual_stages=g.virtual_stages, weight_bytes=job.elem_bytes, grad_bytes=job.grad_bytes,
        elem_bytes=job.elem_bytes,  # the activations' element (4 in an fp32 / tf32 run): docs/model.md#activations
        optimizer_bytes=job.optimizer_bytes_per_param, flash_attention=g.flash_attention,
        host_states=g.offload_states,  # states in host memory: cost.memory.host_offloaded (#state-offload)
        fragmentation=fragmentation, etp=_etp(g), offloaded_layers=g.offload_layers,
        offloaded_layer_bytes=offloaded_tensor_bytes(job, g),  # strategy offload_tensors (docs/model.md#offload)
        # all_gather CP: one layer's gathered K, V and their full-length gradients (cp_gathered_bytes)
        workspace=workspace + compute.cp_gathered_bytes(
            job.shape, micro_batch=g.micro_batch, seq_len=job.seq_len, tp=g.tp, cp=g.cp,
            cp_comm_type=g.cp_comm_type, elem_bytes=job.elem_bytes),
        recompute_chunk=np.where(g.recompute_uniform & (g.recompute_layers > 0), g.recompute_layers, 0),
        fp8_inputs=memory.quantized_input_bytes(job.fp8_recipe), recompute_modules=g.recompute_modules,
        # Megatron-Core's shared experts keep their own quantized input copy under the delayed recipe only, and
        # there not with fp8_wgrad false (TE 1.x's Linear keeps the 16-bit input the router keeps: #fp8-wgrad)
        shared_input_copy=(job.fp8_recipe == "delayed") & np.asarray(g.fp8_wgrad, dtype=bool),
        reshard_after_forward=g.fsdp_reshard_after_forward, fp8_gather=fsdp_fp8_gather(job, g),
        deferred_sync=g.fsdp_defer_grad_sync,  # FSDP2's gradient sync at the last micro-batch (#fsdp-deferred-sync)
        fsdp2=torch_fsdp2(g),  # shards and their gradients at the parameters' dtype (#fsdp2-shard-dtype)
        root_unit=fsdp_root_params(job, g) > 0,  # held gathered from the forward to the backward
        fp8_params=fp8_params_held(job, g),  # MXFP8 gathers BF16 into the gradient buffer
        **moe_capacity_buffers(job, g),  # drop-and-pad's capacity rows, XLA's einsum-dispatch buffers
        # 1.125 for NVFP4 parameters (both copies); 1 for FP8 ones (the Hopper transpose not held: #fp8-param-gather)
        fp8_param_bytes=compute.param_gather_bytes(job.fp8_recipe)[1],
        fp8_linear_per_layer=fp8_param_linear_per_layer(job, g.tp) if job.is_transformer else None,
        **weight_workspace(job, g),  # TE's cached quantized copies of the 16-bit weights
        **module_input_bytes(job),  # modules' saved GEMM inputs at their own precision
        **proj_input_bytes(job, g),  # 16-bit saved inputs (training.proj_original_input, strategy fp8_wgrad)
        logits_bytes=compute.loss_saved_bytes(g.loss_impl, job.elem_bytes),  # what the loss keeps
        per_layer={},  # the stages share their layers' activation bytes (computed once)
        shared={})  # and the terms of their model states no stage argument enters (memory.memory_per_gpu's)


def weight_workspace(job: Job, g: StrategyGrid) -> dict[str, np.ndarray]:
    """:func:`scalemodel.cost.memory.memory_per_gpu`'s ``weight_workspace`` (bytes per layer on one TP rank) and
    ``expert_workspace`` (bytes per routed-expert parameter): the quantized weight copies Transformer Engine caches
    across micro-batches and steps under Megatron-Core's TE layers (layer_impl megatron_te, which pass
    ``is_first_microbatch``), w(r) = :func:`scalemodel.cost.memory.weight_workspace_bytes` of a recipe r (2 for
    delayed / tensorwise FP8 off Blackwell, 1 on it; blockwise 2.0005; mxfp8 2.0625; nvfp4 1.125):

        weight_workspace = w(run) n_run + sum over module recipes r of w(r) n_r        expert_workspace = w(run)

    n_run the layer's linear weights on one TP rank (the TP-split ones / tp, MLA's down-projections and LatentMoE's
    projections whole, mem30b) at the run's recipe (:func:`~scalemodel.engine.dp_comm.fp8_param_linear_per_layer`,
    w(run) = 0 where they are quantized parameters already: fp8_param_gather's FP8 or MXFP8 parameters,
    fp4_param_gather's NVFP4 ones, which ``quantize_weight`` returns as they are), n_r those of the modules at their
    own recipe r (training.module_precision, :func:`~scalemodel.engine.layer_compute.module_recipe`; a per-module
    recipe builds its weights 16-bit unless its own ``fp8_param``, default False: Megatron-Core
    ``_get_fp8_model_init_for_quant_recipe``, extensions/transformer_engine.py L257-262 at
    NVIDIA/Megatron-LM@24bad8e677): a bf16 module runs under ``fp8_autocast(enabled=False)`` and caches nothing
    (w = 0), an mxfp8 one caches its MXFP8 copy (2.0625) whatever the run's recipe. The routed experts
    (GroupedLinear, no module key) cache at the run's recipe: ``quantize_weight`` per GEMM into
    ``_fp8_workspaces[f"weight{i}"]`` with the same row- and column-wise usage (grouped_linear.py L142-156,
    L196-207, L1175-1215 at NVIDIA/TransformerEngine@4220403e8).

    ZeRO 3 / FSDP. The cache holds the quantized copy of the tensor the module sees in its forward, the gathered one,
    and keeps it across steps: Megatron-FSDP points the parameter at the unsharded bucket (``p.data = data``,
    megatron_fsdp/param_and_grad_buffer.py ``fetch_bucket`` L1296-1354; the module's forward runs on the raw
    parameters, megatron_fsdp.py L1516-1523, NVIDIA/Megatron-LM@d98e8a64dd), DeepSpeed ZeRO-3 gathers into
    ``param.data``; TE's workspace is an allocation of its own (``quantizer.quantize``, base.py L751-764), which
    resharding does not free. So zero 3 / fsdp / hsdp hold every unit's whole (tp-local, unsharded) copy, as ZeRO 0-2
    do. PyTorch FSDP2 (``fsdp_per_param``): TE's Linear, LayerNormLinear and LayerNormMLP name no cache
    (``cache_name = None if (is_first_microbatch is None or self.is_fsdp2)``, linear.py L1805,
    layernorm_linear.py L1663, layernorm_mlp.py L2284-2288; ``is_fsdp2``: a torch ``fully_shard`` state, base.py
    L884-895): the dense workspace is 0, but GroupedLinear's ``cache_weight = is_first_microbatch is not None``
    (L1175) has no such test: the experts' copies are held. FSDP1 (``fsdp_flat_param``): whole, as ZeRO-3: TE scatters
    a cached copy over an FSDP group only in a module with ``fsdp_group`` set, which ``prepare_te_modules_for_fsdp``
    sets only on a TE module that is itself an FSDP unit (distributed.py L2067-2108), not on the linears inside a
    per-layer unit (mem30). The MTP modules (``mtp_workspace`` per module with weights, on one TP rank, and
    ``mtp_expert_workspace`` per MTP routed-expert parameter): :func:`~scalemodel.cost.transformer.mtp_linear_weights`
    at the block's recipe and eh_proj's 2 h^2 / t at its own
    (:func:`~scalemodel.engine.layer_compute.mtp_recipe`, which the compute model reads too: module_precision mtp
    where named; in an fp4 run, which enters no fp4 context around eh_proj nor a GPT-path layer, BF16, none; else
    the run's, w(run), 0 under quantized parameters:
    Megatron-Core builds the MTP layers under ``get_fp8_context(config, is_init=True)``), under the run-wide fp8
    context with no layer number, so not reduced by bf16_layers (multi_token_prediction.py L1386-1402, L1927 at
    NVIDIA/Megatron-LM@d98e8a64dd); the same FSDP2 rule. The layers a run keeps
    in BF16 (training.bf16_layers, Megatron-Core ``first_last_layers_bf16``: the layer built and run outside the
    fp8 context, ``get_fp8_context`` a nullcontext) cache nothing either: both workspaces x (1 - their share
    ``Job.bf16_layer_share``), exact with one pipeline stage, the layers' mean on each stage with more (their
    placement is not in the job; the compute model mixes them the same way). Other layers, and a model that is not
    a transformer: none (docs/model.md#weight-workspace)."""
    if not job.is_transformer or not job.fp8_recipe:
        return {}
    hopper = fp8_transpose_copy(job)
    quantized = (g.fp8_param_gather & (job.fp8_recipe != "nvfp4")) | (g.fp4_param_gather & (job.fp8_recipe == "nvfp4"))
    w_run = np.where(np.asarray(quantized, dtype=bool), 0.0, memory.weight_workspace_bytes(job.fp8_recipe, hopper))
    dense = w_run * fp8_param_linear_per_layer(job, g.tp)  # on one TP rank (MLA down / latent projections whole)
    full = transformer.linear_weights_per_layer(job.shape, g.tp)
    # the module recipes other than bf16 ("": no copy) and the run's own (None): each its modules' share of the layer
    for r in sorted({r for m, _p in job.module_precision if (r := module_recipe(job, m))}):
        at_r = tuple((m, p) for m, p in job.module_precision if module_recipe(job, m) == r)
        dense = dense + memory.weight_workspace_bytes(r, hopper) * (
            full - fp8_param_linear_per_layer(replace(job, module_precision=at_r), g.tp))
    # the MTP block's layer and eh_proj at their recipes (layer_compute.mtp_recipe: module_precision mtp, or BF16 where
    # an fp4 run enters no fp4 context; a 16-bit parameter's copy, bf16 none), else the run's
    w_mtp, w_eh = (w_run if r is None else np.full(1, memory.weight_workspace_bytes(r, hopper))
                   for r in (mtp_recipe(job, "block"), mtp_recipe(job, "eh_proj")))
    block, eh = transformer.mtp_linear_weights(job.shape, g.tp)  # on one TP rank
    mtp_ws = w_mtp * block + w_eh * eh
    te = g.layer_impl == LayerImpl.MEGATRON_TE
    fsdp2 = torch_fsdp2(g)  # TE's is_fsdp2: no dense cache, GroupedLinear's still
    low = 1.0 - float(job.bf16_layer_share)  # training.bf16_layers run without a recipe: no copy
    return {"weight_workspace": np.asarray(np.where(te & ~fsdp2, low * dense, 0.0), dtype=float),
            "expert_workspace": np.asarray(np.where(te, low * w_run, 0.0), dtype=float),
            "mtp_workspace": np.asarray(np.where(te & ~fsdp2, mtp_ws, 0.0), dtype=float),
            "mtp_expert_workspace": np.asarray(np.where(te, w_mtp, 0.0), dtype=float)}


def _segment_memory(job: Job, g: StrategyGrid, m: np.ndarray, kw: dict[str, Any], br: Any, rank: np.ndarray,
                    params: np.ndarray, parts: bool, activations: MutableMapping[str, np.ndarray] | None,
                    how: tuple[str, float, float]) -> tuple[Any, np.ndarray, np.ndarray]:
    """:func:`memory_peak_stage` for a hybrid pattern's pipeline ranks (:func:`_rank_layers`: its ``|`` segments, or
    Megatron's split by count without them): every pipeline rank r of each split priced on its own layers' kinds
    (:func:`_part_job`: its Mamba, attention, MLP and MoE layers' weights, gradients, optimizer states and
    activations, the expert weights only where its E layers are), with its own micro-batches in flight (stage_rank
    r), the embedding on rank 0, the output layer, its logits and the MTP modules on rank p - 1
    (:func:`_last_stage_memory`'s arguments); the peak is the largest rank's. ``br``, ``rank``, ``params`` where no
    split is the candidate's (and for a model that is not hybrid). ``how``: (sync, fragmentation, workspace) the part
    jobs' :func:`_memory_kwargs` take."""
    split = _rank_layers(job, g)
    if not split:
        return br, rank, params
    d_mtp = float(job.shape.mtp_layers)
    kws: dict[int, dict[str, Any]] = {id(job): kw}
    held: dict[tuple[int, int, bool, bool], tuple[Job, np.ndarray]] = {}  # a rank's parameters by part, layers, place
    for sp in split:
        p, layers = sp.p, sp.ranks
        best: Any = None
        best_rank, best_params = np.zeros(1), np.zeros(1)
        # middle ranks already priced, by their layers and chunks: a later middle rank of the same layers and chunks
        # (the closed form, _chunk_peak None) differs from the earlier one only in stage_rank, whose micro-batches in
        # flight (memory.inflight_microbatches: 1F1B min(m, p - r), interleaved min(p + (p - 1 - 2 r) / v, m), GPipe
        # m) do not grow with r, and its bytes (per_stage + emb) x inflight + what it holds once, and the total, do
        # not grow with them (IEEE rounding is monotone): it never exceeds the running peak (``take`` is strict), so
        # it is not priced (DeepSeek-V3 at pp 32: 27 middle ranks of 2 MoE layers, one pricing)
        middle_seen: set[tuple[str, tuple[str, ...]]] = set()
        for r, s in enumerate(layers):
            if 0 < r < p - 1:
                cls = (s, tuple(sp.segments[c * p + r] for c in range(sp.v)) if sp.piped and sp.segments else ())
                if cls in middle_seen and _chunk_peak_free(sp, r):
                    continue
                middle_seen.add(cls)
            part = _part_job(job, s)
            if id(part) not in kws:
                # one layer's activation bytes of a kind do not read the pattern's kind counts: the ranks share
                # the job's per-layer memo (memory.activation_bytes per_layer), each kind computed once
                kws[id(part)] = dict(_memory_kwargs(part, g, m, *how), per_layer=kw["per_layer"])
            kw_r = kws[id(part)]
            n = np.full(1, float(len(s)))
            where = (dict(embedding=d_mtp > 0, head=True, mtp_modules=d_mtp) if r == p - 1
                     else dict(mtp_modules=0.0) if r == 0 else dict(embedding=False))
            chunked = _chunk_peak(job, g, m, kws, sp, r, where, how, kw["per_layer"], activations)
            br_r = _kept(_stage_memory(activations, f"segment pp {p} rank {r} {s}", part.shape, stage_layers=n,
                                       recomputed_layers=recomputed_layers(g, n), stage_rank=r, **where, **kw_r)
                         if chunked is None else
                         memory.memory_per_gpu(part.shape, activations=chunked, stage_layers=n,
                                               recomputed_layers=recomputed_layers(g, n), stage_rank=r, **where,
                                               **kw_r), parts)
            take = np.ones(1, dtype=bool) if best is None else np.asarray(br_r.total > best.total)
            best = br_r if best is None else _where_breakdown(take, br_r, best)
            if parts:
                best_rank = np.where(take, float(r), best_rank)
                # the same part, layers and place (first, middle, last) hold the same parameters: priced once
                at = (id(part), len(s), r == 0, r == p - 1)
                if at not in held:  # the part held with it: its id stays its own
                    held[at] = (part, _stage_params(part, kw_r, stage_layers=n, **where))
                best_params = np.where(take, held[at][1], best_params)
        here = sp.on
        br = _where_breakdown(here, best, br)
        if parts:
            rank, params = np.where(here, best_rank, rank), np.where(here, best_params, params)
    return br, rank, params

def _chunk_peak_free(sp: _RankSplit, r: int) -> bool:
    """True where :func:`_chunk_peak` prices rank r of ``sp`` by the closed form (returns None whatever the grid): not
    a '|' split of v >= 2 chunks a rank, or rank r's chunks all equal."""
    if not sp.piped or sp.v < 2 or not sp.segments:
        return True
    return len({sp.segments[c * sp.p + r] for c in range(sp.v)}) == 1


def _chunk_peak(job: Job, g: StrategyGrid, m: np.ndarray, kws: dict[int, dict[str, Any]], sp: _RankSplit, r: int,
                where: dict[str, Any], how: tuple[str, float, float], per_layer: dict[Any, np.ndarray],
                memo: MutableMapping[str, np.ndarray] | None) -> np.ndarray | None:
    """Activation bytes of pipeline rank r of a hybrid pattern's ``|`` split whose v model chunks differ, for the
    interleaved candidates (schedule interleaved, virtual stages v = S / p): the rank holds h_c micro-batches of chunk
    c at a time, which differ by chunk (:func:`scalemodel.cost.pipeline.interleaved_chunks_held`, Megatron-Core's
    schedule table), so its peak is max over its forwards of sum_c h_c P_c, P_c chunk c's own activation bytes per
    micro-batch (its layers' kinds, its recomputed layers min(N, n_c) of ``--recompute-num-layers`` N per chunk, or
    ceil(n_c / N) checkpoints under uniform recompute; the
    embedding's dropout mask in rank 0's chunk 0, the MTP modules in rank p - 1's last chunk), plus what the rank
    holds once (logits, recompute working set: memory.activation_bytes at 0 in flight). Elsewhere, and where the
    rank's chunks are equal (the closed form inflight x layers is then exact), the candidates' own activation bytes
    (None: no candidate here is such a rank's). docs/model.md#hybrid-segments."""
    segs = sp.segments
    if not sp.piped or sp.v < 2 or not segs:
        return None
    p, v = sp.p, sp.v
    chunks = [segs[c * p + r] for c in range(v)]
    if len(set(chunks)) == 1:
        return None
    shape = np.broadcast_shapes(np.shape(sp.on), np.shape(g.schedule), np.shape(g.virtual_stages), np.shape(m))
    inter = np.broadcast_to(sp.on & (g.schedule == ScheduleKind.INTERLEAVED) & (g.virtual_stages == v), shape)
    if not np.any(inter):
        return None
    key = f"segment pp {p} rank {r} chunks {'|'.join(chunks)}"
    if memo is not None and key in memo:
        return memo[key]
    s = "".join(chunks)
    part = _part_job(job, s)
    n = np.full(1, float(len(s)))
    base = memory.memory_per_gpu(part.shape, stage_layers=n, recomputed_layers=recomputed_layers(g, n), stage_rank=r,
                                 **where, **kws[id(part)]).activations
    once = memory.memory_per_gpu(part.shape, stage_layers=n, recomputed_layers=recomputed_layers(g, n), stage_rank=r,
                                 inflight=0.0, **where, **kws[id(part)]).activations
    partial = (g.recompute == Recompute.FULL) & (g.recompute_layers >= 0) & ~g.recompute_uniform
    per_mb = []
    for c, ch in enumerate(chunks):
        if not ch:
            per_mb.append(np.zeros(1))
            continue
        part_c = _part_job(job, ch)
        if id(part_c) not in kws:
            kws[id(part_c)] = dict(_memory_kwargs(part_c, g, m, *how), per_layer=per_layer)
        n_c = np.full(1, float(len(ch)))
        place = (dict(where) if (r == 0 and c == 0) or (r == p - 1 and c == v - 1)
                 else dict(embedding=False, mtp_modules=0.0))
        # one chunk is one block: uniform recompute checkpoints it in ceil(n_c / N) pieces (virtual stages 1)
        args = dict(kws[id(part_c)], stage_layers=n_c, stage_rank=r, virtual_stages=1, **place,
                    recomputed_layers=np.where(partial, np.minimum(g.recompute_layers, n_c), n_c))
        one = memory.memory_per_gpu(part_c.shape, inflight=1.0, **args).activations
        none = memory.memory_per_gpu(part_c.shape, inflight=0.0, **args).activations
        per_mb.append(one - none)
    peak = np.zeros(shape)
    mm = np.broadcast_to(m, shape)
    for mu in np.unique(mm[inter]):
        held = pipeline.interleaved_chunks_held(p, v, int(mu), r)
        top = np.max(np.stack(np.broadcast_arrays(*[sum(h * b for h, b in zip(row, per_mb, strict=True))
                                                     for row in held])), axis=0)
        peak = np.where(mm == mu, top, peak)
    out = np.where(inter, once + peak, base)
    if memo is not None:
        memo[key] = out
    return out


def _given_chunk_peak(job: Job, g: StrategyGrid, m: np.ndarray, kw: dict[str, Any], last_rank: bool,
                      where: dict[str, Any], layers: np.ndarray, recomputed: Any, base: np.ndarray
                      ) -> np.ndarray | None:
    """Activation bytes of rank 0 (``last_rank`` false) or the last rank of an interleaved pipeline of given first /
    last model chunks (:func:`_chunked`, :func:`_chunk_layers`' first f, middle c, last l), as :func:`_chunk_peak`
    prices a hybrid rank's unequal chunks: rank 0 runs chunks f, c, ..., c, the last rank c, ..., c, l, and holds h_k
    micro-batches of its chunk k at a time (:func:`scalemodel.cost.pipeline.interleaved_chunks_held`, Megatron-Core's
    schedule table), so its peak is max over its forwards of sum_k h_k P_k, P_k chunk k's own activation bytes per
    micro-batch (its layers, its recomputed layers min(N, n_k) of ``--recompute-num-layers`` N, or ceil(n_k / N)
    checkpoints under uniform recompute; the embedding's dropout mask in rank 0's chunk 0, the MTP modules in the last
    rank's last chunk), plus what the rank holds once (logits, the recompute working set: at 0 in flight). The closed
    form inflight x the rank's layers is this for equal chunks only (chunks 1 | 3 | 3 | 1 at p 2, v 2, m 8: rank 0,
    chunks 1 and 3, peaks at 3 micro-batches of its chunk 0 and 2 of its chunk 1, 9 layers' worth, not 2.5 x 4 = 10;
    the last rank, chunks 3 and 1, at 3 of its chunk 0, 9, not 1.5 x 4 = 6). ``base`` (the closed form) for the
    other candidates; None where no candidate is such a rank's (``layers``, ``recomputed``: the rank's, ``where``
    its placement arguments as :func:`memory_peak_stage` prices it)."""
    c = np.asarray(_chunked(g) & (g.pp >= 2))
    if not np.any(c):
        return None
    first, mid, last = _chunk_layers(job, g)
    partial = (g.recompute == Recompute.FULL) & (g.recompute_layers >= 0) & ~g.recompute_uniform
    sh = job.shape
    rank = np.maximum(g.pp - 1, 0) if last_rank else np.zeros(1)

    def per_mb(n: np.ndarray, place: dict[str, Any]) -> np.ndarray:
        """One micro-batch's activation bytes of a chunk of ``n`` layers (one block: virtual stages 1)."""
        args = dict(kw, stage_layers=n, stage_rank=rank, virtual_stages=1, **place,
                    recomputed_layers=np.where(partial, np.minimum(g.recompute_layers, n), n))
        return np.asarray(memory.memory_per_gpu(sh, inflight=1.0, **args).activations
                          - memory.memory_per_gpu(sh, inflight=0.0, **args).activations)

    inner = dict(embedding=False, mtp_modules=0.0)
    p_mid = per_mb(mid, inner)
    p_end = per_mb(last, where) if last_rank else per_mb(first, where)
    once = memory.memory_per_gpu(sh, stage_layers=layers, recomputed_layers=recomputed, stage_rank=rank,
                                 inflight=0.0, **where, **kw).activations
    shape = np.broadcast_shapes(np.shape(c), np.shape(g.pp), np.shape(g.virtual_stages), np.shape(m),
                                np.shape(p_mid), np.shape(p_end), np.shape(once))
    cc = np.broadcast_to(c, shape)
    keys = np.stack([np.broadcast_to(x, shape)[cc] for x in (g.pp, g.virtual_stages, m)], axis=-1).astype(np.int64)
    peak = np.zeros(shape)
    for p, v, mu in np.unique(keys.reshape(-1, 3), axis=0):
        on = cc & (np.broadcast_to(g.pp, shape) == p) & (np.broadcast_to(g.virtual_stages, shape) == v) & (
            np.broadcast_to(m, shape) == mu)
        held = pipeline.interleaved_chunks_held(int(p), max(int(v), 1), max(int(mu), 1), int(p) - 1 if last_rank else 0)
        # chunk 0 the first (rank 0) or chunk v - 1 the last (the last rank); the others middle chunks
        top = np.max(np.stack(np.broadcast_arrays(*[sum(row) * p_mid + row[-1 if last_rank else 0] * (p_end - p_mid)
                                                    for row in held])), axis=0)
        peak = np.where(on, top, peak)
    return np.asarray(np.where(cc, once + peak, base))


class _Total(NamedTuple):
    """A stage's total bytes alone (:func:`memory_total`): what the peak-stage comparisons read."""

    total: np.ndarray


def _stage_memory(memo: MutableMapping[str, np.ndarray] | None, key: str, sh: Any, **kw: Any
                  ) -> memory.MemoryBreakdown:
    """:func:`scalemodel.cost.memory.memory_per_gpu` of one stage, its activation bytes taken from ``memo[key]``
    when there (and put there when not)."""
    act = None if memo is None else memo.get(key)
    br = memory.memory_per_gpu(sh, activations=act, **kw)
    if memo is not None and act is None:
        memo[key] = br.activations
    return br


def _kept(br: memory.MemoryBreakdown, parts: bool) -> memory.MemoryBreakdown | _Total:
    """``br`` itself, or only its total where the parts are not wanted."""
    return br if parts else _Total(br.total)


def _stage_params(job: Job, kw: dict[str, Any], **stage: Any) -> np.ndarray:
    """Parameters one GPU of a stage holds (dense + expert), with the stage arguments its memory was priced with."""
    pg = memory.params_per_gpu(job.shape, tp=kw["tp"], pp=kw["pp"], ep=kw["ep"], etp=kw["etp"], shared=kw["shared"],
                               **stage)
    return np.asarray(pg.dense + pg.expert, dtype=float)


def _last_stage_memory(job: Job, g: StrategyGrid, br: Any, last: np.ndarray,
                       kw: dict[str, Any], rank: np.ndarray, params: np.ndarray, parts: bool = True,
                       activations: MutableMapping[str, np.ndarray] | None = None, recomputed: Any = None
                       ) -> tuple[Any, np.ndarray, np.ndarray]:
    """The larger of ``br`` and the last pipeline stage's memory (pp > 1): its ``last`` layers, the output layer
    (its own V h / t weight, gradient and optimizer states, tied or not: :func:`scalemodel.cost.memory.params_per_gpu`)
    and its fp32 logits, and the micro-batches the last stage holds in flight (1 under 1F1B); with D multi-token
    prediction modules also the modules (weights, gradients, optimizer states, activations), the word-embedding
    copy MTP needs and D more heads' logits. With the stage's rank and parameters per GPU (``rank``, ``params``
    of ``br`` where it stays). ``parts`` false: ``br`` and the result are totals alone (:class:`_Total`), rank and
    params passed through. ``activations``: :func:`memory_peak_stage`'s memo. ``recomputed``: the stage's recomputed
    layers where they are not :func:`recomputed_layers`' (given first / last chunks, :func:`_stage_recomputed`)."""
    n = np.maximum(last, 0.0)
    d_mtp = float(job.shape.mtp_layers)
    stage = dict(stage_layers=n, embedding=d_mtp > 0, head=True, mtp_modules=d_mtp)
    rec = recomputed_layers(g, n) if recomputed is None else np.where(last >= 0.0, recomputed, recomputed_layers(g, n))
    br_last = _stage_memory(activations, "last", job.shape, recomputed_layers=rec, stage_rank=np.maximum(g.pp - 1, 0),
                            **stage, **kw)
    # given first / last chunks: the last rank's chunks each their own (_given_chunk_peak)
    act = None if activations is None else activations.get("last chunks")
    if act is None:
        act = _given_chunk_peak(job, g, kw["num_microbatches"], kw, True,
                                dict(embedding=d_mtp > 0, head=True, mtp_modules=d_mtp), n, rec, br_last.activations)
        if act is not None and activations is not None:
            activations["last chunks"] = act
    if act is not None:
        br_last = memory.memory_per_gpu(job.shape, activations=act, recomputed_layers=rec,
                                        stage_rank=np.maximum(g.pp - 1, 0), **stage, **kw)
    br_l = _kept(br_last, parts)
    take = (g.pp > 1) & (br_l.total > br.total)
    if not parts:
        return _where_breakdown(take, br_l, br), rank, params
    return (_where_breakdown(take, br_l, br), np.where(take, np.maximum(g.pp - 1, 0), rank),
            np.where(take, _stage_params(job, kw, **stage), params))


def _where_breakdown(take: np.ndarray, a: Any, b: Any) -> Any:
    """Per candidate, every part of ``a`` where ``take``, else of ``b`` (a stage's whole breakdown, never a mix;
    of two :class:`_Total`, the total)."""
    if not np.any(take):  # one side everywhere: no per-field where over the planner's millions of rows
        return b
    if np.all(take) and np.shape(take) == np.shape(a.total):
        return a
    if isinstance(a, _Total):
        return _Total(np.where(take, a.total, b.total))
    return memory.MemoryBreakdown(**{f: np.where(take, getattr(a, f), getattr(b, f))
                                     for f in memory.MemoryBreakdown.__struct_fields__})
