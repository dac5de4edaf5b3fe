"""Compute time of one micro-batch on a pipeline stage, and the kernels that ride on it.

:func:`_compute_per_microbatch` prices the stage's layers forward, backward and recomputed
(:mod:`scalemodel.cost.compute`, per layer kind for hybrid patterns: :func:`_kind_times`) and adds what the
framework runs per layer or per micro-batch besides the GEMMs and attention: fp8 / NVFP4 cast and quantize kernels
(:func:`fp8_cast_per_layer`), multi-token prediction (:func:`mtp_compute`), eager layer ops, attention unpadding,
fp8 expert padding and quantize kernels, the router's dtype, gradient accumulation and embedding-gradient kernels
(:func:`grad_accumulation_time`), FSDP copy-in/out kernels (:func:`fsdp2_copy_time`), and the rules for which layers
are recomputed (:func:`recomputed_layers`, per rank and chunk). The memo of the last job's per-kind layer times
lives here (_KIND_MEMO).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from msgspec.structs import replace

from scalemodel.choices import ROWWISE_FP8_RECIPES, FlexBackend, LayerImpl, Precision, Recompute, ScheduleKind, Zero
from scalemodel.cost import compute, moe_routing, pipeline, transformer
from scalemodel.engine.job import Job, StrategyGrid
from scalemodel.engine.pipeline_ranks import (
    _PART_MEMO,
    _chunk_layers,
    _chunked,
    _etp,
    _params_per_gpu,
    _rank_layers,
    _RankSplit,
    microbatches,
)


def deferred_head_share(job: Job, g: StrategyGrid) -> np.ndarray:
    """Share of the output layer's weight-gradient GEMMs on the last stage deferred to the pipeline flush
    (strategy defer_embedding_wgrad, wgrad_deferral_limit): :func:`scalemodel.cost.pipeline.deferred_wgrad_share`
    with m = :func:`microbatches` and one pass a micro-batch per head (the main one and each MTP module's, which
    run the shared output layer). docs/model.md#defer-embedding-wgrad"""
    if not np.any(g.defer_embedding_wgrad):
        return np.zeros(1)
    uses = 1.0 + float(job.shape.mtp_layers) if job.is_transformer else 1.0
    return pipeline.deferred_wgrad_share(g.defer_embedding_wgrad, g.pp, microbatches(g), uses,
                                         g.wgrad_deferral_limit)


def _compute_per_microbatch(job: Job, g: StrategyGrid, layers_per_stage: np.ndarray,
                            logits_on_stage: bool = True, recomputed: Any = None,
                            embedding_on_stage: bool = False) -> dict[str, np.ndarray]:
    """Compute seconds for one micro-batch on a stage of ``layers_per_stage`` layers (with the logits
    when ``logits_on_stage``), and the pieces overlap needs. ``recomputed``: the stage's recomputed layers where
    they are not :func:`recomputed_layers`' (a model chunk, or a rank of unequal chunks: :func:`_block_recomputed`).
    ``embedding_on_stage``: the stage is pipeline rank 0's (or its first model chunk), which holds the word embedding
    (:func:`first_stage_embedding_grad_time`, at pp > 1; at pp 1 the one stage's is :func:`embedding_grad_time`'s).

    A low-precision run with layers kept in BF16 (Job.bf16_layer_share s, training.bf16_layers): every piece is
    (1 - s) x the all-low-precision one + s x the same stage priced with BF16 layers (the BF16 peak and 16-bit
    curve of the attention core and logits, no recipe: no casts). The pieces that do not depend on the layers'
    precision (logits, copies, embedding) are equal in both and so unchanged. Which stage holds the BF16 layers
    (Megatron-Core: the first / last ones) is not modelled: each stage gets the share (exact at pp 1)."""
    s = float(job.bf16_layer_share)
    if s > 0.0 and job.fp8_recipe and job.attention_peak_flops > 0:
        low = _compute_per_microbatch(replace(job, bf16_layer_share=0.0), g, layers_per_stage, logits_on_stage,
                                      recomputed, embedding_on_stage)
        high = _compute_per_microbatch(job.bf16_layer_job, g, layers_per_stage, logits_on_stage, recomputed,
                                       embedding_on_stage)
        # equal pieces (layer counts, logits) kept as they are, not re-rounded by the mix
        return {k: v if np.array_equal(v, high[k]) else (1.0 - s) * np.asarray(v, dtype=float) + s * np.asarray(
                high[k], dtype=float) for k, v in low.items()}
    b = g.micro_batch.astype(float)
    if not job.is_transformer:
        if job.generic_time_per_sample > 0:
            total = job.generic_time_per_sample * b
        else:
            # Roofline of the whole network: FLOPs at the GEMM efficiency, or the activation traffic
            # at the memory efficiency, whichever is longer. Each activation is written in the
            # forward pass, read by the next layer, read again in the backward pass and its gradient
            # written (4 passes); catalog activation sizes are fp32, scaled to the training precision.
            flops = job.generic_flops_per_sample * (1.0 + job.generic_backward_factor) * b
            traffic = 4.0 * job.generic_activation_bytes * (job.elem_bytes / 4.0) * b
            total = np.maximum(flops / (job.peak_flops * job.gemm_max), _hbm_seconds(job, traffic))
        fwd = total / (1.0 + job.generic_backward_factor)
        recompute = np.where(g.recompute == Recompute.FULL, fwd, 0.0)
        bwd = total - fwd
        zero = np.zeros_like(total)
        return {"total": total + recompute, "forward": fwd, "backward": bwd + recompute, "wgrad": bwd / 2,
                "attention_core": zero, "layers_per_stage": zero + 1, "recomputed_layers": zero + 1}
    sh = job.shape
    p = _layer_pieces(job, g, b)
    kw, flash, mtp_flash, logits, core = p["kw"], p["flash"], p["mtp_flash"], p["logits"], p["core"]
    fwd_l, bwd_l, rec_l, gemm_l, core_l, attn_l = p["per_layer"]
    dense, moe, rec = p["dense"], p["moe"], g.recompute
    with_logits = 1.0 if logits_on_stage else 0.0
    copy_f, copy_b = fsdp2_copy_time(job, g, layers_per_stage)
    fwd = layers_per_stage * fwd_l + with_logits * logits.forward + copy_f
    rec_n = recomputed_layers(g, layers_per_stage) if recomputed is None else np.asarray(recomputed, dtype=float)
    if "per_step" not in p:  # the (job, grid) terms, asked for here as before (the first stage's order of calls)
        p["per_step"] = (train_metric_time(job, g), mtp_embedding_grad_time(job, g), mtp_output_grad_sum_time(job, g),
                         grad_accumulation_time(job, g), fsdp_flat_grad_time(job, g))
    metric, mtp_emb, mtp_out, grad_acc, flat_grad = p["per_step"]
    if "embedding" not in p:
        p["embedding"] = embedding_grad_time(job, g)
    if embedding_on_stage and "first_embedding" not in p:
        p["first_embedding"] = first_stage_embedding_grad_time(job, g)
    bwd = layers_per_stage * bwd_l + rec_n * rec_l \
        + with_logits * (logits.backward + metric + mtp_emb + mtp_out) \
        + grad_acc + flat_grad + copy_b + p["embedding"] \
        + (p["first_embedding"] if embedding_on_stage else 0.0)
    # the output layer's weight-gradient GEMMs (G each pass) deferred to the flush under defer_embedding_wgrad leave
    # the micro-batch's backward: step.py prices their drain (docs/model.md#defer-embedding-wgrad)
    bwd = bwd - with_logits * deferred_head_share(job, g) * (1.0 + float(sh.mtp_layers)) * logits.forward_gemm
    out = {"total": fwd + bwd, "forward": fwd, "backward": bwd,
           # weight-gradient GEMMs = forward GEMM time (16-bit ones under fp8_wgrad false: _with_16bit_wgrad)
           "wgrad": layers_per_stage * p["wgrad_per_layer"],
           "attention_core": layers_per_stage * core_l, "layers_per_stage": layers_per_stage,
           "recomputed_layers": rec_n,
           "forward_per_layer": fwd_l, "gemm_per_layer": gemm_l, "core_per_layer": core_l,
           "attention_forward": layers_per_stage * attn_l,  # the attention blocks' forward GEMMs and core
           "mtp_blocks": np.zeros(1), "mtp_attention_blocks": np.zeros(1), "mtp_moe_blocks": np.zeros(1),
           "mtp_gemm": np.zeros(1), "mtp_gemm_half_dim": np.asarray(float(job.gemm_half_dim)),
           # word-embedding lookups (model_parallel_comm.embedding_tp_collective): rank 0's (the one stage's at pp 1)
           # and each MTP module's on the stage with the logits (multi_token_prediction.py embeds through it)
           "embedding_uses": np.where(g.pp > 1, 1.0 if embedding_on_stage else 0.0, 1.0)
           + with_logits * float(sh.mtp_layers),
           # output-head passes (model_parallel_comm.output_layer_tp_collective, cross_entropy_tp_collective): the
           # main head and each MTP module's through the shared output layer, on the stage with the logits
           "head_uses": with_logits * (1.0 + float(sh.mtp_layers)), "head_gemm": logits.forward_gemm}
    if logits_on_stage and float(sh.mtp_layers) > 0:
        mjob, mkw, pkw = _mtp_job(job, kw)
        if mjob is not job:  # the MTP block at its own precision (mtp_recipe): every GEMM of it
            block = compute.layer_compute_time(sh, ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=rec,
                                               moe=bool(sh.last_layer_moe), etp=_etp(g), **mkw,
                                               **dict(mtp_flash, fp8_attention=False, **expert_gemm_kwargs(mjob)))
        elif sh.hybrid is not None:  # a hybrid's MTP block (*E or *-): one attention + MoE / MLP layer
            block = compute.layer_compute_time(sh, ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=rec,
                                               moe=bool(sh.last_layer_moe), etp=_etp(g), **kw, **flash)
        else:
            block = moe if moe is not None and bool(sh.last_layer_moe) else dense
        casts = core if job.fp8_recipe and mjob is job else None  # the decoder's FP8 attention casts, the same job's
        out = _with_mtp(out, mtp_compute(mjob, g, _mtp_block(mjob, g, block, bool(sh.last_layer_moe), casts), logits,
                                         pkw))
    return out


def _layer_pieces(job: Job, g: StrategyGrid, b: np.ndarray) -> dict[str, Any]:
    """The pieces of :func:`_compute_per_microbatch` that read the job and the grid only, not the stage's layers,
    logits, recomputed layers or embedding: one layer's forward, backward and recompute (dense, MoE, a hybrid's
    mix, with the casts and kernels that ride on them), the logits, and the keyword sets the MTP block reuses;
    and, filled in by the first stage that asks (:func:`_compute_per_microbatch`), the per-micro-batch terms
    (metric, MTP gradients, gradient accumulation, flat FSDP gradients, embedding gradients). evaluate() prices
    several stages of one grid (the ranks, interleaved chunks, the host's probes:
    :func:`~scalemodel.engine.step._stage_memo`), each of which priced these again; now, inside
    :func:`shared_layer_pieces` (one evaluate() call), each (job, grid) pair keeps them, by identity (both immutable:
    Job and StrategyGrid are frozen Structs), and every stage reads the same arrays, so each value is the one it was
    to the bit (only the number of times it is computed changes)."""
    memo = _LAYER_MEMO.get("active")
    ids = (id(job), id(g))
    hit = None if memo is None else memo.get(ids)
    if hit is not None and hit[0] is job and hit[1] is g:
        return hit[2]
    sh = job.shape
    dense = moe = core = None
    kw: dict[str, Any] = dict(
              micro_batch=b, seq_len=job.seq_len, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
              gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
              tp=g.tp, cp=g.cp, elem_bytes=job.elem_bytes)
    flash: dict[str, Any] = {"flash_attention": g.flash_attention}
    if job.attention_fwd is not None:  # the fused core on its kernel's fitted curves (Job.attention_kernel)
        flash.update(attention_fwd=job.attention_fwd, attention_bwd=job.attention_bwd)
    if job.attention_peak_flops > 0:  # the core at its own precision (an fp8 run's core is BF16)
        flash.update(core_peak_flops=job.attention_peak_flops, core_gemm_max=job.attention_gemm_max,
                     core_gemm_half_dim=job.attention_gemm_half_dim)
    if job.logits_peak_flops > 0:  # an fp8 run's MoE router: BF16, outside Transformer Engine like the logits
        flash.update(router_peak_flops=job.logits_peak_flops, router_gemm_max=job.logits_gemm_max,
                     router_gemm_half_dim=job.logits_gemm_half_dim)
    rec = g.recompute
    flash["xla_remat"] = xla_remat(job, g)
    flash["recompute_modules"] = g.recompute_modules  # what selective recompute repeats
    flash["layer_impl"] = g.layer_impl  # whose memory-bound ops (compute.layer_eltwise_bytes)
    flash["cp_comm_type"] = g.cp_comm_type  # the core's kernel calls under context parallelism
    flash["cp_a2a_size"] = g.cp_a2a_size  # a2a+p2p: the all-to-all level's ranks
    flash["mla_column_down_proj"] = g.mla_column_down_proj  # MLA's down-projections' rows and columns a rank runs
    flash["fp8_attention"] = job.fp8_attention  # an FP8 core's window-blind backward
    flash["fp8_attention_ratios"] = job.fp8_attention_ratios  # and its measured time over the BF16 core's
    if int(sh.moe_experts) > 0:  # the busiest EP rank's routed rows, etp T k / tp on the mean rank
        flash["moe_load"] = moe_rank_load(job, g, _etp(g) * b * job.seq_len / g.cp * float(sh.moe_top_k) / g.tp)
        # the token dispatcher, whose permutations differ (compute.moe_permutation_bytes)
        flash["moe_dispatch"] = np.where(np.asarray(g.moe_flex_dispatcher, dtype=bool), compute.MOE_DISPATCH_FLEX,
                                         np.where(np.asarray(g.moe_allgather_dispatcher, dtype=bool),
                                                  compute.MOE_DISPATCH_ALLGATHER, compute.MOE_DISPATCH_ALLTOALL))
        # drop-and-pad on XLA (layer_impl xla): MaxText's dense_matmul, einsums against one-hot capacity masks, the
        # only path MaxText reads capacity_factor on (compute.moe_einsum_dispatch, docs/model.md#maxtext-dropping-moe)
        if job.moe_pad_to_capacity:
            flash["moe_dispatch"] = np.where(np.asarray(g.layer_impl) == LayerImpl.XLA, compute.MOE_DISPATCH_EINSUM,
                                             flash["moe_dispatch"])
        # Transformer Engine's fused permute kernels or Megatron-Core's unfused ones (strategy.moe_permute_fusion);
        # HybridEP permutes in its own kernel either way (token_dispatcher.py L1212 at d98e8a64dd)
        hybridep = (np.asarray(g.moe_flex_dispatcher, dtype=bool)
                    & (np.asarray(g.moe_flex_backend) == int(FlexBackend.HYBRIDEP)))
        flash["moe_permute_fusion"] = np.asarray(g.moe_permute_fusion, dtype=bool) | hybridep
        # drop-and-pad (training.moe_pad_to_capacity): each expert's rows are its capacity, without a random spread
        flash["moe_pad_to_capacity"] = bool(job.moe_pad_to_capacity)
        # cyclic routing (training.moe_routing): every expert's count the mean, no random spread either
        flash["moe_exact_counts"] = job.moe_routing == "cyclic"
    layer_flash = dict(flash)  # the layers' modules at their own precision (training.module_precision)
    for key, module in (("proj", "attention_proj"), ("latent", "moe_latent")):
        layer_flash.update(module_gemm_kwargs(job, module, key))
    layer_flash.update(expert_gemm_kwargs(job))  # an mxfp8 run's routed experts on Blackwell: their measured rate
    mtp_flash = flash
    flash = layer_flash
    moe_share = float(sh.moe_layers / sh.layers)
    if sh.hybrid is not None:  # one block per layer, mixed over the pattern's kinds
        fwd_l, bwd_l, rec_l, gemm_l, core_l, attn_l = _hybrid_layer_times(job, g, kw, flash)
    else:
        dense = compute.layer_compute_time(sh, ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=rec, **kw,
                                           **flash)  # etp only shapes the expert GEMMs
        # the routed-expert layer: the stage's MoE layers, or its MTP block where the model's last layer is MoE (a
        # stage of dense layers only may hold the logits and the MTP block: deepseek-v3's interleaved stage_layers
        # [0, 3, 58, 0] puts layers 0-2 and the head on rank 1)
        moe = compute.layer_compute_time(sh, ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=rec,
                                         moe=True, etp=_etp(g), **kw, **flash) \
            if moe_share > 0 or bool(sh.last_layer_moe) else None
        if moe is not None and moe_share > 0:
            mix = lambda a, c: (1 - moe_share) * a + moe_share * c  # noqa: E731
            fwd_l, bwd_l, rec_l = mix(dense.forward, moe.forward), mix(dense.backward, moe.backward), mix(
                dense.recompute, moe.recompute)
            gemm_l, core_l = mix(dense.forward_gemm, moe.forward_gemm), mix(dense.attention_core,
                                                                             moe.attention_core)
            attn_l = mix(dense.attention_forward, moe.attention_forward)
        else:
            fwd_l, bwd_l, rec_l, gemm_l, core_l = (dense.forward, dense.backward, dense.recompute,
                                                   dense.forward_gemm, dense.attention_core)
            attn_l = dense.attention_forward
    if job.fp8_recipe:  # an fp8 run's quantization casts (fp8_cast_per_layer)
        core = fp8_attention_casts(job, g)  # the FP8 attention core's casts: the layer's and its recompute's
        cast_f, cast_b = fp8_cast_per_layer(job, g, moe_share, attention_casts=core)
        fwd_l, bwd_l = fwd_l + cast_f, bwd_l + cast_b
        # full recompute and torchtitan's op policy (titan_op, which replays the layer's forward) repeat the casts
        titan_op = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).titan_op
        rec_l = rec_l + np.where((g.recompute == Recompute.FULL) | titan_op, cast_f, 0.0)
        rec_l = rec_l + fp8_attention_recompute_casts(job, g, core[0])  # selective core_attn: the core's Q, K, V casts
        rec_l = rec_l + fp8_moe_recompute_casts(job, g)  # selective moe: the MoE block's activation casts
        # selective mlp: the dense MLP block's activation casts, in the dense MLP layers' share
        rec_l = rec_l + float(sh.mlp_layers / sh.layers) * fp8_mlp_recompute_casts(job, g)
        fwd_l, bwd_l, rec_l = _with_rowwise_gemms(job, g, kw, flash, gemm_l, fwd_l, bwd_l, rec_l)
        bwd_l, wgrad_l = _with_16bit_wgrad(job, g, b, gemm_l, bwd_l)
    else:
        wgrad_l = gemm_l
    fwd_l, bwd_l, rec_l = _with_attention_unpad(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_fp8_expert_padding(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_expert_quantize_kernels(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_expert_original_input(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_proj_original_input(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_shared_original_input(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_router_dtype(job, g, fwd_l, bwd_l, rec_l)
    fwd_l, bwd_l, rec_l = _with_eager_layer_ops(job, g, fwd_l, bwd_l, rec_l)
    logits = compute.logits_compute_time(sh, loss_impl=g.loss_impl, **(kw if job.logits_peak_flops <= 0 else dict(
        kw, peak_flops=job.logits_peak_flops, gemm_max=job.logits_gemm_max,  # an fp8 run's: BF16
        gemm_half_dim=job.logits_gemm_half_dim)))
    pieces: dict[str, Any] = {"kw": kw, "flash": flash, "mtp_flash": mtp_flash, "logits": logits, "core": core,
                              "per_layer": (fwd_l, bwd_l, rec_l, gemm_l, core_l, attn_l), "dense": dense, "moe": moe,
                              "wgrad_per_layer": wgrad_l}
    if memo is not None:
        memo[ids] = (job, g, pieces)  # held: neither id can be reused while its pieces are kept
    return pieces


@contextmanager
def shared_layer_pieces() -> Iterator[None]:
    """Within this block (one :func:`~scalemodel.engine.step.evaluate` or ``compute_floor`` call, nested ones
    joining the outer), :func:`_layer_pieces` prices each (job, grid) once; outside it, every call prices its own, so
    nothing is kept from one call to the next (a changed function or a new grid is always read anew)."""
    if _LAYER_MEMO.get("active") is not None:
        yield
        return
    _LAYER_MEMO["active"] = {}
    try:
        yield
    finally:
        _LAYER_MEMO.pop("active", None)


#: :func:`_layer_pieces`' memo while :func:`shared_layer_pieces` is open: {"active": {(id(job), id(grid)): (job, grid,
#: pieces)}} (evaluate asks for its job, its one-kind probes, :func:`~scalemodel.engine.step._host_wait`, and a
#: BF16-layer mix's jobs)
_LAYER_MEMO: dict[str, dict[tuple[int, int], tuple[Any, Any, dict[str, Any]]]] = {}


def _with_rowwise_gemms(job: Job, g: StrategyGrid, kw: dict[str, Any], flash: dict[str, Any], gemm_l: np.ndarray,
                        fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A torchao row-wise recipe's GEMMs where they differ from the fp8 curve's (docs/model.md#fp8-rowwise), per
    layer and micro-batch, ``gemm_l`` the layer's forward weight GEMMs on the fp8 curve: the forward GEMMs run
    torch._scaled_mm's row-wise kernel at :func:`scalemodel.cost.compute.rowwise_forward_gemm_factor` f of the
    curve's rate (dgrad and wgrad run the per-tensor kernel, the curve's), so forward += (1/f - 1) gemm_l, and a
    recompute that repeats forward GEMMs adds the same on them (full: gemm_l; torchtitan's op policy:
    :func:`scalemodel.cost.compute.titan_op_gemm_time`'s); rowwise_with_gw_hp's wgrad GEMMs run in BF16 (on
    ``input_hp`` and ``grad_output``): backward += (the forward weight GEMMs on the BF16 peak and curve) - gemm_l,
    a wgrad GEMM priced as its forward GEMM as the layer's backward prices it. Other recipes: unchanged."""
    if job.fp8_recipe not in ROWWISE_FP8_RECIPES:
        return fwd_l, bwd_l, rec_l
    extra = 1.0 / compute.rowwise_forward_gemm_factor(job.accelerator_family) - 1.0
    sh = job.shape
    gemm_kw = {k: kw[k] for k in ("peak_flops", "memory_bandwidth", "gemm_max", "gemm_half_dim",
                                  "memory_efficiency", "elem_bytes")}
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).titan_op
    tokens = g.micro_batch.astype(float) * job.seq_len / g.cp
    titan = compute.titan_op_gemm_time(sh, tokens, g.tp, **gemm_kw) if np.any(again) else 0.0
    rec_gemm = np.where(g.recompute == Recompute.FULL, gemm_l, np.where(again, titan, 0.0))
    fwd_l, rec_l = fwd_l + extra * gemm_l, rec_l + extra * rec_gemm
    if job.fp8_recipe == "rowwise_with_gw_hp":
        bf16 = dict(kw, peak_flops=job.attention_peak_flops, gemm_max=job.attention_gemm_max,
                    gemm_half_dim=job.attention_gemm_half_dim)
        wgrad = compute.layer_compute_time(sh, ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=g.recompute,
                                           **bf16, **flash).forward_gemm
        bwd_l = bwd_l + wgrad - gemm_l
    return fwd_l, bwd_l, rec_l


def _with_16bit_wgrad(job: Job, g: StrategyGrid, b: np.ndarray, gemm_l: np.ndarray, bwd_l: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(backward, weight-gradient GEMMs) per layer and micro-batch of an fp8 delayed-scaling run with strategy
    ``fp8_wgrad`` false (docs/model.md#fp8-wgrad): the weight-gradient GEMMs in 16 bits. Megatron-Core hands
    ``override_linear_precision=(False, False, not config.fp8_wgrad)`` to DelayedScaling only
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/fp8_utils.py L772-776 / L805-809; the current-scaling, block and
    MXFP8 recipes take no such argument), and Transformer Engine 1.x's linears then run the wgrad GEMM on the
    16-bit saved input and gradient (NVIDIA/TransformerEngine v1.13 pytorch/module/linear.py L297-306 / L519-561:
    ``if not ctx.fp8_meta["recipe"].override_linear_precision.wgrad`` the FP8 GEMM, else the 16-bit one). Each
    wgrad GEMM is priced as its forward GEMM (the layer's backward prices it so), here the layer's forward weight
    GEMMs at the BF16 peak and 16-bit curve (Job.bf16_layer_job, the twin training.bf16_layers prices a BF16 layer on):
    backward += G_16 - G_fp8. Other recipes, and fp8_wgrad true: unchanged."""
    off = ~np.asarray(g.fp8_wgrad, dtype=bool)
    if job.fp8_recipe != "delayed" or not np.any(off) or job.attention_peak_flops <= 0:
        return bwd_l, gemm_l
    high = _layer_pieces(job.bf16_layer_job, g, b)["per_layer"][3]
    return bwd_l + np.where(off, high - gemm_l, 0.0), np.where(off, high, gemm_l)


def module_recipe(job: Job, module: str) -> str | None:
    """The Transformer Engine recipe of one module with its own precision in a low-precision run
    (training.module_precision): "" for bf16 (no cast), "mxfp8"; None where the module runs at the run's precision
    (not named, named at the run's own recipe, which the spec warns is not priced, or a 16-/32-bit job: a BF16 layer
    of training.bf16_layers is BF16 whole)."""
    if not job.fp8_recipe:
        return None
    p = dict(job.module_precision).get(module)
    return None if p is None or p == job.fp8_recipe else ("" if p == "bf16" else p)


def module_gemm_kwargs(job: Job, module: str, prefix: str) -> dict[str, float]:
    """``{prefix}_peak_flops`` / ``_gemm_max`` / ``_gemm_half_dim`` of one module's GEMMs at its own precision
    (:func:`module_recipe`): bf16 on the BF16 peak and 16-bit curve (Job.attention_*), mxfp8 on the fp8 peak at
    MXFP8's rate (Job.mxfp8_*); {} where the module runs at the run's (docs/model.md#module-precision)."""
    r = module_recipe(job, module)
    return {} if r is None else {f"{prefix}_{k}": v for k, v in _recipe_gemm_kwargs(job, r).items()}


def expert_gemm_kwargs(job: Job) -> dict[str, float]:
    """``expert_peak_flops`` / ``_gemm_max`` / ``_gemm_half_dim`` of the routed experts' GEMMs where a measured
    grouped-GEMM rate prices them (:func:`compute.layer_compute_time`, which takes the slower of this curve and the
    run's): an mxfp8 run on a family with :data:`compute.MXFP8_GROUPED_GEMM_SPEEDUPS` R (Blackwell) runs them at R x
    the isolated BF16 curve on the fp8 in-layer basis: R x the BF16 peak, the catalog 16-bit gemm_max (Job.attention_*)
    x f_fp8 / f_16 (:func:`compute.in_layer_gemm_factor`), its d0 (docs/model.md#mxfp8-expert-gemms); {} otherwise."""
    r = compute.mxfp8_grouped_gemm_speedup(job.accelerator_family, job.fp8_recipe)
    if r is None or job.attention_peak_flops <= 0:
        return {}
    basis = (compute.in_layer_gemm_factor(job.accelerator_family, "fp8", job.accelerator)
             / compute.in_layer_gemm_factor(job.accelerator_family, "bf16", job.accelerator))
    return {"expert_peak_flops": job.attention_peak_flops * r,
            "expert_gemm_max": min(job.attention_gemm_max * basis, 1.0),
            "expert_gemm_half_dim": job.attention_gemm_half_dim}


def mtp_recipe(job: Job, part: str = "block") -> str | None:
    """The Transformer Engine recipe of the multi-token prediction module's ``part``, ``"block"`` (its transformer
    layer) or ``"eh_proj"``, as :func:`module_recipe` gives one ("" for BF16, None at the run's): the one place that
    decides the MTP block's precision, for the compute model (:func:`_mtp_job`) and the memory model's weight
    workspace (:func:`~scalemodel.engine.stage_memory.weight_workspace`).

    training.module_precision mtp, where named, sets both (Megatron-Bridge's te_quant.cfg ``mtp.*`` matcher: every
    TE linear of the block). Not named, an fp8 run runs the block at its recipe (Megatron-Core enters
    ``get_fp8_context(config)`` around eh_proj and the layer "if self.config.fp8"), but an fp4 run enters no fp4
    context there ("TODO: currently ignoring FP4 in MTP layers because we need more numerical validation",
    ``MultiTokenPredictionLayer._proj_and_transformer_layer``, multi_token_prediction.py L1385-1402 at
    NVIDIA/Megatron-LM@d98e8a64dd): eh_proj runs in BF16, and so does a GPT-path layer (a single TransformerLayer,
    no context of its own); a hybrid pattern's MTP layer is a HybridStack, which takes its own per-layer
    ``get_fp4_context`` (models/hybrid/hybrid_block.py L339-379), so it runs at the run's NVFP4."""
    if dict(job.module_precision).get("mtp") is not None:
        return module_recipe(job, "mtp")
    if job.fp8_recipe == "nvfp4" and (part == "eh_proj" or job.shape.hybrid is None):
        return ""
    return None


def _recipe_gemm_kwargs(job: Job, r: str) -> dict[str, float]:
    """peak_flops / gemm_max / gemm_half_dim of GEMMs at a module recipe r: bf16 ("") the BF16 peak and 16-bit curve
    (Job.attention_*), mxfp8 the fp8 peak at MXFP8's rate (Job.mxfp8_*)."""
    peak, gm, d0 = ((job.attention_peak_flops, job.attention_gemm_max, job.attention_gemm_half_dim) if r == ""
                    else (job.mxfp8_peak_flops, job.mxfp8_gemm_max, job.mxfp8_gemm_half_dim))
    return {"peak_flops": peak, "gemm_max": gm, "gemm_half_dim": d0}


def _mtp_job(job: Job, kw: dict[str, Any]) -> tuple[Job, dict[str, Any], dict[str, Any]]:
    """The job and GEMM keywords the MTP block is priced with, and eh_proj's keywords (:func:`mtp_recipe`): ``job``
    and ``kw`` themselves where the part runs at the run's precision, else the same job at the part's: BF16 (the
    BF16 peak and curve, no recipe: no casts) or MXFP8 (the fp8 peak at MXFP8's rate, MXFP8's casts), its other
    modules' overrides dropped (the block's precision covers them)."""
    r, rp = mtp_recipe(job, "block"), mtp_recipe(job, "eh_proj")
    pkw = kw if rp is None else dict(kw, **_recipe_gemm_kwargs(job, rp))
    if r is None:
        return job, kw, pkw
    gk = _recipe_gemm_kwargs(job, r)
    factor = compute.fp8_recipe_gemm_factor(job.accelerator_family, r) if r else 1.0
    mjob = replace(job, **gk, fp8_recipe=r, fp8_recipe_gemm_factor=factor, fp8_attention=False, module_precision=())
    return mjob, dict(kw, **gk), pkw


def _hybrid_layer_times(job: Job, g: StrategyGrid, kw: dict[str, Any], flash: dict[str, Any]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(forward, backward, recompute, forward GEMMs, attention core, the attention blocks' forward GEMMs and core)
    of the mean layer of a hybrid pattern, per micro-batch: each kind's layer at its share of the layers
    (docs/model.md#mamba-2-layers). An attention layer is :func:`compute.layer_compute_time` without the MLP, an MLP
    or MoE layer without the attention block, each
    with one norm and one residual; a Mamba-2 layer :func:`compute.mamba_layer_time`, its SSD matmuls at the
    attention core's precision and curve (the Triton kernels run in the inputs' 16-bit type in an fp8 run). The
    forward GEMMs are the weight GEMMs (a Mamba layer's projections), whose gradients the backward computes."""
    sh = job.shape
    hy = sh.hybrid
    assert hy is not None
    L = float(sh.layers)
    lt = dict(ep=g.ep, sequence_parallel=g.sequence_parallel, recompute=g.recompute, **kw, **flash)
    times = _kind_times(job, g)  # each kind's layer priced once per grid for a job and its ranks' part jobs

    def kind(name: str) -> Any:
        if name not in times:
            if name == "attention":
                times[name] = compute.layer_compute_time(sh, mlp=False, **lt)
            elif name == "mlp":
                times[name] = compute.layer_compute_time(sh, attention=False, **lt)
            elif name == "moe":
                times[name] = compute.layer_compute_time(sh, attention=False, moe=True, etp=_etp(g), **lt)
            else:
                assert sh.mamba is not None
                core = job.attention_peak_flops > 0
                times[name] = compute.mamba_layer_time(
                    sh.mamba, recompute=g.recompute, sequence_parallel=g.sequence_parallel, **kw,
                    ssd_peak_flops=job.attention_peak_flops if core else None,
                    ssd_gemm_max=job.attention_gemm_max if core else None,
                    ssd_gemm_half_dim=job.attention_gemm_half_dim if core else None,
                    **module_gemm_kwargs(job, "mamba_out_proj", "out_proj"))
        return times[name]

    parts: list[tuple[float, Any, Any]] = []  # (share, layer time, attention core)
    if hy.attention:
        a = kind("attention")
        parts.append((hy.attention / L, a, a.attention_core))
    if hy.mlp:
        parts.append((hy.mlp / L, kind("mlp"), 0.0))
    if hy.moe:
        parts.append((hy.moe / L, kind("moe"), 0.0))
    if hy.mamba:
        parts.append((hy.mamba / L, kind("mamba"), 0.0))
    mix = lambda f: sum((w * f(t) for w, t, _ in parts), np.zeros(1))  # noqa: E731
    core_l = sum((w * c for w, _, c in parts), np.zeros(1))
    return (mix(lambda t: t.forward), mix(lambda t: t.backward), mix(lambda t: t.recompute),
            mix(lambda t: t.forward_gemm), np.asarray(core_l, dtype=float), mix(lambda t: t.attention_forward))


def _kind_times(job: Job, g: StrategyGrid) -> dict[str, Any]:
    """The memo of :func:`_hybrid_layer_times`' per-kind layer times (attention, mlp, moe, mamba) shared by ``job``
    and the part jobs :func:`~scalemodel.engine.pipeline_ranks._part_job` made of it, on grid ``g`` (the last such pair
    asked for). A part job differs
    from its job only in the pattern's kind counts and MoE intervals, which one layer's time of a kind never reads
    (each kind's layer is priced alone and weighted by its share after), so each kind is priced once for every rank,
    to the bit as priced per rank (tests/test_hybrid_rank_speed.py). Another job (a replaced copy) gets its own."""
    memo = _PART_MEMO.get("last")
    root = memo[0] if memo is not None and (job is memo[0] or any(job is x for x in memo[1].values())) else job
    last = _KIND_MEMO.get("last")
    if last is None or last[0] is not root or last[1] is not g:
        last = (root, g, {})
        _KIND_MEMO["last"] = last
    return last[2]


#: :func:`_kind_times`' memo: (job, grid, {kind: one layer's times}) of the last pair asked for
_KIND_MEMO: dict[str, tuple[Any, Any, dict[str, Any]]] = {}


def _hbm_seconds(job: Job, nbytes: Any) -> np.ndarray:
    """Memory-bound seconds of ``nbytes`` of HBM traffic on one of the job's GPUs (:func:`compute.memory_time` at
    the accelerator's bandwidth and memory efficiency)."""
    return compute.memory_time(nbytes, memory_bandwidth=job.memory_bandwidth, memory_efficiency=job.memory_efficiency)


def _cast_seconds(job: Job, nbytes: Any, recipe: str | None = None, gradient: bool = False) -> np.ndarray:
    """Seconds of an fp8 / fp4 run's Transformer Engine quantization of ``nbytes`` (signed: a difference from the
    BF16 run): :func:`_hbm_seconds` x :func:`scalemodel.cost.compute.cast_kernel_time_factor` of the accelerator
    (family, and b300's bus) and the recipe that quantizes them (``recipe``; None: the run's), Blackwell's measured
    cast kernels, docs/model.md#cast-kernel-rate; ``gradient``: output-gradient casts, x
    :func:`scalemodel.cost.compute.stochastic_rounding_cast_factor` (NVFP4's stochastic rounding,
    docs/model.md#nvfp4-stochastic-rounding)."""
    b = np.asarray(nbytes, dtype=float)
    r = job.fp8_recipe if recipe is None else recipe
    factor = compute.cast_kernel_time_factor(job.accelerator_family, r, job.accelerator)
    if gradient and job.nvfp4_stochastic_rounding:  # off: training.nvfp4_disable stochastic_rounding
        factor *= compute.stochastic_rounding_cast_factor(job.accelerator_family, r)
    return np.sign(b) * _hbm_seconds(job, np.abs(b)) * factor


def fp8_attention_casts(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray]:
    """Seconds (forward, backward) per attention layer and micro-batch of an FP8 attention core's Q, K, V and dO
    casts under a current-scaling attention recipe (training.fp8_attention with fp8_recipe tensorwise, or in an fp4
    run: :data:`scalemodel.cost.compute.FP8_ATTENTION_CS_RECIPES`): the ``torch.cat`` of Q, K, V at the HBM
    roofline, the Float8CurrentScaling casts at the tensorwise cast-kernel factor (:func:`_cast_seconds`, no
    stochastic rounding: FP8), :func:`scalemodel.cost.compute.fp8_attention_cast_bytes`
    (docs/model.md#fp8-attention-casts). Zero without FP8 attention or under another recipe."""
    if not (job.fp8_attention and job.fp8_recipe in compute.FP8_ATTENTION_CS_RECIPES):
        return np.zeros(1), np.zeros(1)
    copy, fwd, bwd = compute.fp8_attention_cast_bytes(job.shape, micro_batch=g.micro_batch.astype(float),
                                                      seq_len=job.seq_len, tp=g.tp, cp=g.cp,
                                                      elem_bytes=job.elem_bytes)
    return _hbm_seconds(job, copy) + _cast_seconds(job, fwd, "tensorwise"), _cast_seconds(job, bwd, "tensorwise")


def fp8_attention_recompute_casts(job: Job, g: StrategyGrid, forward: np.ndarray,
                                  whole_layer: bool = False) -> np.ndarray:
    """Seconds per mean layer and micro-batch of the FP8 attention core's forward casts (``forward``: the caller's
    :func:`fp8_attention_casts` forward, the Q, K, V copy and casts, which :func:`fp8_cast_per_layer` adds to the
    layer's forward: computed once) that selective recompute of the core repeats. Megatron-Core runs the core under
    ``tensor_parallel.checkpoint`` when core_attn is recomputed (attention.py ``checkpoint_core_attention`` L183-186,
    ``_checkpointed_attention_forward`` L216-254 at NVIDIA/Megatron-LM@d33919011); the rerun calls Transformer
    Engine's ``DotProductAttention`` again, whose ``FusedAttnFunc.forward`` casts Q, K, V again
    (``combine_and_quantize``, backends.py L1114 at NVIDIA/TransformerEngine@40c69e751). Full recompute and
    torchtitan's op policy repeat them with the layer's forward casts (the caller's ``cast_f``), so they are not
    counted here. A hybrid model's mean layer carries its attention layers' share (``whole_layer``: one attention +
    MLP/MoE layer, an MTP block). 0 without FP8 attention casts or core recompute
    (docs/model.md#fp8-attention-casts)."""
    if not (job.fp8_attention and job.fp8_recipe in compute.FP8_ATTENTION_CS_RECIPES):
        return np.zeros(1)  # the job's flags first: most fp8 runs have no FP8 attention core to recompute
    rec = transformer.recomputed_modules(job.shape, g.recompute, g.recompute_modules)
    again = np.asarray(rec.attention_core, dtype=bool) & ~np.asarray(rec.titan_op, dtype=bool)
    if not np.any(again):
        return np.zeros(1)
    hy = None if whole_layer else job.shape.hybrid
    share = 1.0 if hy is None else hy.attention / float(job.shape.layers)
    return np.where(again, share * forward, 0.0)


def _quantize_cast_seconds(job: Job, **kw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds (forward, backward, weights) of :func:`scalemodel.cost.compute.fp8_quantize_bytes` (``kw``), each
    module's bytes at its own recipe's cast-kernel factor (:func:`_cast_seconds`): a module at its own precision
    (``attention_recipe`` / ``latent_recipe``, training.module_precision) runs its recipe's quantization kernels,
    not the run's. The bytes add over modules (a module at "" quantizes nothing), so the module's share is the
    difference from the bytes with it at "" and is priced at its recipe's factor, the rest at the run's."""
    run = str(kw.get("recipe", job.fp8_recipe))
    own = {k: str(r) for k in ("attention_recipe", "latent_recipe")
           if (r := kw.get(k)) is not None and r != "" and r != run}
    if not own:
        f, b, w = compute.fp8_quantize_bytes(job.shape, **kw)
        return _cast_seconds(job, f, run), _cast_seconds(job, b, run, True), _cast_seconds(job, w, run)
    grads = (False, True, False)  # (forward, backward = the output gradients dY, weights)
    base = compute.fp8_quantize_bytes(job.shape, **dict(kw, **{k: "" for k in own}))
    out = [_cast_seconds(job, x, run, gr) for x, gr in zip(base, grads, strict=True)]
    for k, r in own.items():
        alone = compute.fp8_quantize_bytes(job.shape, **dict(kw, **{o: "" for o in own if o != k}))
        out = [o + _cast_seconds(job, a - b0, r, gr) for o, a, b0, gr in zip(out, alone, base, grads, strict=True)]
    return out[0], out[1], out[2]


def fp8_transpose_copy(job: Job) -> bool:
    """Whether the accelerator's FP8 GEMMs need a transposed (column-wise) copy of each quantized tensor beside the
    row-wise one: Hopper's take only the TN layout, Blackwell's any; every family but Blackwell is priced as Hopper
    (the ``transpose_copy`` of the cast and workspace costs in scalemodel.cost.compute and scalemodel.cost.memory)."""
    return job.accelerator_family != "blackwell"


def _fp8_cast_kwargs(job: Job, g: StrategyGrid) -> dict[str, Any]:
    """The strategy's arguments to :func:`scalemodel.cost.compute.fp8_quantize_bytes` (one place for
    :func:`fp8_cast_per_layer` and :func:`fp8_moe_recompute_casts`)."""
    return dict(micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len, recipe=job.fp8_recipe,
                transpose_copy=fp8_transpose_copy(job), tp=g.tp, cp=g.cp, ep=g.ep,
                sequence_parallel=g.sequence_parallel, elem_bytes=job.elem_bytes,
                fp8_params=fp8_params_held(job, g),  # no per-step weight casts (fp8_param_gather)
                attention_recipe=module_recipe(job, "attention_proj"),  # modules at their own precision
                latent_recipe=module_recipe(job, "moe_latent"))


def fp8_cast_per_layer(job: Job, g: StrategyGrid, moe_share: float, whole_layer: bool = False,
                       weight_share: Any = 1.0,
                       attention_casts: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Seconds per layer and micro-batch (forward, backward) of an fp8 run's Transformer Engine quantization
    (:func:`scalemodel.cost.compute.fp8_quantize_bytes`, memory-bound at the HBM bandwidth x memory efficiency, x
    the family's measured cast-kernel factor: :func:`_cast_seconds`),
    dense and MoE layers mixed as the layer times are. The per-step weight casts are spread over the step's m
    micro-batches (TE quantizes a weight on the first micro-batch and caches it): forward += weights / m; with
    fp8_param_gather (:func:`fp8_params_held`) the weights are FP8 already and only the transposed copy remains
    (fp8_quantize_bytes ``fp8_params``; the optimizer's quantization:
    :func:`~scalemodel.engine.dp_comm.fp8_param_quantize_time`).
    Full recompute repeats the forward casts (the caller adds them to the recompute). The transposed FP8 copy
    is priced on every accelerator but Blackwell (nvte_is_non_tn_fp8_gemm_supported: sm_100). ``whole_layer``: an
    attention + MLP/MoE layer's casts also in a hybrid model (its MTP block, *E or *-), not the pattern's mean layer.
    ``weight_share``: the weight casts' share per call (a shared MTP module's D passes cast its weights once:
    :func:`_mtp_block`). ``attention_casts``: :func:`fp8_attention_casts` where the caller holds it (for
    :func:`fp8_attention_recompute_casts` too), else computed here."""
    dpa_f, dpa_b = fp8_attention_casts(job, g) if attention_casts is None else attention_casts
    kw = _fp8_cast_kwargs(job, g)
    m = microbatches(g)

    def times(parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        # seconds (forward, backward, weights), signed (:func:`_cast_seconds`): the bytes are a difference from the
        # BF16 run: a delayed-scaling norm that writes FP8 (1 byte instead of eb) saves more than the casts add on
        # Blackwell (no transposed copy) with TP and no SP, so the sum may be below 0; the layer's own norm bytes,
        # which it saves from, keep the layer time positive
        f, b, w = parts
        return f + weight_share * w / m, b

    hy = None if whole_layer else job.shape.hybrid
    if hy is not None:
        # a hybrid's layer holds one block: an attention, MLP or Mamba layer about half an attention + MLP layer's
        # casts (one block's GEMM inputs and outputs), an MoE layer the MoE layer's less that half (an estimate),
        # with the attention block at the run's recipe; a module at its own precision (training.module_precision)
        # adds its exact change: the attention layers' block (own - run; the layer's casts at least 0), the Mamba
        # layers' out_proj (own - run; the layer's casts at least 0)
        run = dict(kw, attention_recipe=None)
        f, b = times(_quantize_cast_seconds(job, **run))
        L = float(job.shape.layers)
        half = (hy.attention + hy.mlp + hy.mamba) / (2.0 * L)
        out_f, out_b = half * f, half * b
        if hy.moe:
            mf, mb = times(_quantize_cast_seconds(job, moe=True, etp=_etp(g), **run))
            out_f, out_b = out_f + hy.moe / L * (mf - f / 2), out_b + hy.moe / L * (mb - b / 2)
        if kw["attention_recipe"] is not None and hy.attention:
            # an attention layer's estimate (half a layer's) with its block's exact change, never below nothing
            af, ab = times(_quantize_cast_seconds(job, **kw))
            att_f, att_b = np.maximum(f / 2 + af - f, 0.0), np.maximum(b / 2 + ab - b, 0.0)
            out_f, out_b = out_f + hy.attention / L * (att_f - f / 2), out_b + hy.attention / L * (att_b - b / 2)
        r = module_recipe(job, "mamba_out_proj")
        if r is not None and hy.mamba and job.shape.mamba is not None:
            mkw = dict(micro_batch=kw["micro_batch"], seq_len=kw["seq_len"], tp=g.tp, cp=g.cp,
                       sequence_parallel=g.sequence_parallel, transpose_copy=kw["transpose_copy"],
                       elem_bytes=job.elem_bytes)
            md = job.shape.mamba

            def mamba_times(recipe: str, **extra: Any) -> tuple[np.ndarray, np.ndarray]:
                """out_proj's casts at ``recipe``, priced at that recipe's cast-kernel factor."""
                parts = compute.mamba_out_proj_quantize_bytes(md, recipe=recipe, **mkw, **extra)
                return times((_cast_seconds(job, parts[0], recipe), _cast_seconds(job, parts[1], recipe, True),
                              _cast_seconds(job, parts[2], recipe)))

            of, ob = mamba_times(r)
            # the run's out_proj as the estimate holds it: with fp8_param_gather an FP8 weight, transposed only
            rf, rb = mamba_times(job.fp8_recipe, fp8_params=kw["fp8_params"])
            # a Mamba layer's estimate (half a layer's) with out_proj's exact change, never below nothing (as the
            # attention layers': half a layer's casts can be below the run's out_proj casts, e.g. BF16 out_proj)
            mam_f, mam_b = np.maximum(f / 2 + of - rf, 0.0), np.maximum(b / 2 + ob - rb, 0.0)
            out_f, out_b = out_f + hy.mamba / L * (mam_f - f / 2), out_b + hy.mamba / L * (mam_b - b / 2)
        return out_f + hy.attention / L * dpa_f, out_b + hy.attention / L * dpa_b
    f, b = times(_quantize_cast_seconds(job, **kw))
    if moe_share > 0:
        mf, mb = times(_quantize_cast_seconds(job, moe=True, etp=_etp(g), **kw))
        f, b = (1 - moe_share) * f + moe_share * mf, (1 - moe_share) * b + moe_share * mb
    return f + dpa_f, b + dpa_b


def fp8_moe_recompute_casts(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per mean layer and micro-batch of the fp8 activation casts that selective recompute of moe repeats:
    the recomputed MoE block's (``te_checkpoint`` reruns its forward in the backward; the weights' FP8 copies are
    cached from the first micro-batch, so no weight cast), estimated as :func:`fp8_cast_per_layer`'s hybrid rule
    does, an MoE layer's activation casts less half an attention + MLP layer's, x moe_layers / layers. 0 where the
    module is not recomputed or the run is not fp8. The estimate takes the attention block at the run's recipe
    (training.module_precision attention_proj left out: the MoE block holds no attention, and an attention block at
    its own precision would move the half-layer subtracted, not the block's casts); LatentMoE's projections, inside
    the block, at their own."""
    again = moe_block_recomputed(job, g)
    if not job.fp8_recipe or not np.any(again):
        return np.zeros(1)
    kw = dict(_fp8_cast_kwargs(job, g), attention_recipe=None)
    dense_f = _quantize_cast_seconds(job, **kw)[0]
    moe_f = _quantize_cast_seconds(job, moe=True, etp=_etp(g), **kw)[0]
    block = np.maximum(moe_f - dense_f / 2.0, 0.0)  # seconds, each module at its recipe's cast-kernel factor
    share = float(job.shape.moe_layers / job.shape.layers)
    return np.asarray(np.where(again, share * block, 0.0), dtype=float)


def fp8_mlp_recompute_casts(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per dense MLP block and micro-batch of the fp8 activation casts that selective recompute of mlp
    repeats (docs/model.md#recompute-mlp): Megatron-Core runs the dense MLP under ``te_checkpoint`` in an fp8 / fp4
    run (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_layer.py lines 992-1010), whose
    backward re-runs the block's forward, and Transformer Engine's linears quantize their inputs again
    (NVIDIA/TransformerEngine@d0067d0 pytorch/module/layernorm_linear.py lines 224-316, linear.py
    ``_linear_forward_impl`` lines 398, 436: the forward quantizes its input on every call; the weights' FP8 copies
    are cached from the step's first micro-batch, so no weight cast). Per block, the
    forward casts of :func:`scalemodel.cost.compute.fp8_quantize_bytes` for the MLP alone (``mlp_only``):

        X of linear_fc1 (T h, after its fused norm; the local shard gathered with SP) + X of linear_fc2 (T f / t)

    at the HBM bandwidth x memory efficiency x the cast-kernel factor (:func:`_cast_seconds`; signed: a
    delayed-scaling norm that writes FP8 saves bytes). 0 where mlp is not recomputed or the run is not fp8."""
    again = transformer.recomputed_modules(job.shape, g.recompute, g.recompute_modules).mlp
    if not job.fp8_recipe or not np.any(again):
        return np.zeros(1)
    kw = dict(_fp8_cast_kwargs(job, g), attention_recipe=None)
    f = _quantize_cast_seconds(job, mlp_only=True, **kw)[0]
    return np.asarray(np.where(again, f, 0.0), dtype=float)


def _mtp_block(job: Job, g: StrategyGrid, block: compute.LayerTime, moe_block: bool,
               attention_casts: tuple[np.ndarray, np.ndarray] | None = None) -> compute.LayerTime:
    """The transformer block of a multi-token prediction module (``block``: :func:`compute.layer_compute_time` of
    the last layer's kind, MoE when ``moe_block``) with the per-layer terms the stage's own layers carry beyond it,
    at that kind alone rather than mixed over dense and MoE layers: an fp8 run's quantization casts
    (:func:`fp8_cast_per_layer`, the block's weights cast once per step like the layers', and once for all D passes
    of a shared module: Megatron-Core's TE wrappers pass ``is_first_microbatch`` and set it False after the first
    call, NVIDIA/Megatron-LM@d98e8a64dd megatron/core/extensions/transformer_engine.py ``TELinear.forward``, so a
    module run again in the same step reuses TE's cached FP8 weight), flash-attn's unpad copies
    (:func:`_with_attention_unpad`), the experts' FP8 padding copies (:func:`_with_fp8_expert_padding`), their
    per-expert kernels and an fp32 / fp64 router's GEMMs and casts (:func:`_with_router_dtype`), Megatron-Core's
    eager layer ops (:func:`_with_eager_layer_ops`, the block's kind alone). Forward
    extras join the forward, backward extras the backward; full recompute repeats the forward's (the casts' as
    :func:`_compute_per_microbatch` repeats them for the layers). ``attention_casts``: the decoder's
    :func:`fp8_attention_casts` where the block runs at the layers' precision (the same job: computed once), else
    computed here."""
    share = 1.0 if moe_block else 0.0
    fwd, bwd, rec = block.forward, block.backward, block.recompute
    if job.fp8_recipe:
        D = float(job.shape.mtp_layers)
        once = float(job.shape.mtp_weight_modules) / D if D > 0 else 1.0  # weight casts per pass: 1, or 1/D shared
        core = fp8_attention_casts(job, g) if attention_casts is None else attention_casts
        cast_f, cast_b = fp8_cast_per_layer(job, g, share, whole_layer=True, weight_share=once, attention_casts=core)
        fwd, bwd = fwd + cast_f, bwd + cast_b
        rec = rec + np.where(g.recompute == Recompute.FULL, cast_f, 0.0)
        rec = rec + fp8_attention_recompute_casts(job, g, core[0], whole_layer=True)  # selective core_attn
        if not moe_block:  # selective mlp repeats a dense block's MLP casts
            rec = rec + fp8_mlp_recompute_casts(job, g)
    fwd, bwd, rec = _with_attention_unpad(job, g, fwd, bwd, rec)
    fwd, bwd, rec = _with_proj_original_input(job, g, fwd, bwd, rec, whole_layer=True)
    fwd, bwd, rec = _with_eager_layer_ops(job, g, fwd, bwd, rec, moe_share=share)
    if moe_block:
        fwd, bwd, rec = _with_fp8_expert_padding(job, g, fwd, bwd, rec, moe_share=1.0)
        fwd, bwd, rec = _with_expert_quantize_kernels(job, g, fwd, bwd, rec, moe_share=1.0)
        fwd, bwd, rec = _with_expert_original_input(job, g, fwd, bwd, rec, moe_share=1.0)
        fwd, bwd, rec = _with_shared_original_input(job, g, fwd, bwd, rec, moe_share=1.0)
        fwd, bwd, rec = _with_router_dtype(job, g, fwd, bwd, rec, moe_share=1.0)
    return compute.LayerTime(forward=fwd, backward=bwd, recompute=rec, forward_gemm=block.forward_gemm,
                             forward_memory=block.forward_memory, attention_core=block.attention_core,
                             forward_flops=block.forward_flops)


def mtp_compute(job: Job, g: StrategyGrid, block: compute.LayerTime, logits: compute.LayerTime,
                kw: dict[str, Any]) -> dict[str, np.ndarray]:
    """Compute seconds per micro-batch of the D multi-token prediction modules, which Megatron-Core builds on the
    last pipeline stage only (multi_token_prediction.py ``get_mtp_num_layers_to_build``, core_v0.15.0: "we only
    support put all of MTP layers on the last pipeline stage"; the last model chunk when interleaved). Each is
    priced from the same per-layer pieces as the stage's layers:

        forward  = D (block.forward + proj.forward + logits.forward)
        backward = D (block.backward + block.recompute + proj.backward + proj.recompute + logits.backward)

    ``block`` is :func:`scalemodel.cost.compute.layer_compute_time` of the last layer's kind (MoE for
    DeepSeek-V3) with the per-layer casts and copies of :func:`_mtp_block`, ``proj``
    :func:`scalemodel.cost.compute.mtp_projection_time` (norms, concatenation, eh_proj),
    ``logits`` the shared output head with its cross-entropy (:func:`scalemodel.cost.compute.logits_compute_time`);
    ``kw`` eh_proj's GEMM keywords, at its own precision (:func:`mtp_recipe` ``"eh_proj"``).
    Megatron-Core recomputes a module under full recompute with recompute_method uniform (or no layer count),
    whatever --recompute-num-layers says, and not at all under method block with a count
    (:func:`mtp_module_recomputed`: ``_checkpointed_forward``'s block branch skips the recompute; review24b), and
    its block's attention core under selective recompute, as every layer's."""
    sh = job.shape
    D = float(sh.mtp_layers)
    proj = compute.mtp_projection_time(sh, sequence_parallel=g.sequence_parallel, recompute=g.recompute, **kw)
    again = np.where((g.recompute == Recompute.FULL) & ~mtp_module_recomputed(g), 0.0, 1.0)
    fwd = D * (block.forward + proj.forward + logits.forward)
    bwd = D * (block.backward + again * (block.recompute + proj.recompute) + proj.backward + logits.backward)
    # each pass's block carries a layer's traffic, counted once per pass by kind (_model_parallel_comm): TP as layers'
    # (a hybrid's block, *E or *-, two of its one-block layers), CP as one attention layer's, EP as one MoE layer's
    blocks = D * (2.0 if sh.hybrid is not None else 1.0)
    # the D blocks' forward GEMM seconds at the module's own rate and the half-size dimension of its curve (the
    # GEMMs beside the blocks' TP collectives under tp_comm_overlap: _model_parallel_comm, _tp_chunking)
    return {"forward": fwd, "backward": bwd, "wgrad": D * (block.forward_gemm + proj.forward_gemm),
            "attention_core": D * block.attention_core, "blocks": np.asarray(blocks),
            "attention_blocks": np.asarray(D), "moe_blocks": np.asarray(float(sh.mtp_moe_layers)),
            "gemm": D * block.forward_gemm, "gemm_half_dim": np.asarray(float(job.gemm_half_dim))}


def _with_mtp(comp: dict[str, np.ndarray], mtp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A stage's compute parts with the MTP modules' (:func:`mtp_compute`) added; ``mtp_blocks`` (layers' worth of TP
    traffic), ``mtp_attention_blocks`` (attention layers: CP) and ``mtp_moe_blocks`` (MoE layers: EP) tell
    :func:`~scalemodel.engine.model_parallel_comm._model_parallel_comm` the blocks' traffic, apart from the stage's own
    layers; ``mtp_gemm`` (the blocks'
    forward GEMM seconds at the module's own rate) and ``mtp_gemm_half_dim`` (its curve's d0) the GEMMs beside
    that traffic."""
    out = dict(comp)
    for k in ("forward", "backward", "wgrad", "attention_core"):
        out[k] = comp[k] + mtp[k]
    out["total"] = out["forward"] + out["backward"]
    for k in ("blocks", "attention_blocks", "moe_blocks", "gemm", "gemm_half_dim"):
        out["mtp_" + k] = mtp[k] + 0 * comp["mtp_" + k]
    return out


#: Bytes per parameter per micro-batch of DeepSpeed's bf16 optimizer adding a micro-batch's 16-bit gradient into
#: its fp32 buffer: BF16_Optimizer.update_hp_grads runs ``hp_grad.add_(lp.grad.to(hp_grad.dtype))`` per parameter
#: (deepspeed/runtime/bf16_optimizer.py, v0.6.5): the cast reads 2 and writes a 4-byte temporary, the add reads
#: 4 + 4 and writes 4.
BF16_OPTIMIZER_ACCUMULATE_BYTES = 2.0 + 4.0 + 4.0 + 4.0 + 4.0


#: Bytes per parameter per micro-batch of nanotron adding a micro-batch's 16-bit gradient into its fp32 buffer:
#: ``fp32_grad_buffer.add_(half_param.grad)`` per parameter, a mixed-dtype in-place add (one elementwise kernel that
#: reads the 2-byte gradient and the 4-byte buffer and writes the buffer; no cast temporary), run by
#: ``FP32GradientAccumulator._accumulate_grad`` after each micro-batch's backward, and on DDP's sync micro-batch by
#: its comm hook ``fp32_accum_hook`` (``fp32_grad_buffer.add_(grad.view_as(fp32_grad_buffer))``)
#: (huggingface/nanotron@c2528430 src/nanotron/optim/gradient_accumulator.py lines 212-236 and 338-341).
NANOTRON_ACCUMULATE_BYTES = 2.0 + 4.0 + 4.0


#: Bytes per parameter per micro-batch of Megatron-Core DDP's backward hook adding a linear layer's 16-bit weight
#: gradient into the main_grad buffer when gradient-accumulation fusion is off:
#: ``param.main_grad.add_(param.grad.data)``, a mixed-dtype in-place add (read the e-byte gradient and the g-byte
#: buffer, write the buffer), with g the main_grad element (NVIDIA/Megatron-LM@847781764f
#: megatron/core/distributed/distributed_data_parallel.py ``_make_backward_post_hook`` L441-466; the same hook,
#: ``_make_param_hook``, at core_v0.8.0 baf94af3c6).
def megatron_unfused_accumulate_bytes(elem_bytes: Any, grad_bytes: Any) -> Any:
    """e + 2 g bytes per parameter (read the gradient and main_grad, write main_grad): 2 + 2 x 4 = 10 at bf16 /
    fp32."""
    return elem_bytes + 2.0 * grad_bytes


def grad_accumulation_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of adding the micro-batch's weight gradients into the step's gradient buffer
    outside the weight-gradient GEMMs (0 unless ``deepspeed_pipeline``, ``nanotron_trainer`` or Megatron-Core's DDP
    with ``grad_accumulation_fusion`` off; Megatron-LM's gradient-accumulation fusion writes the GEMM's output into
    the fp32 main_grad buffer directly, no extra pass).

        P_gpu = (dense + expert parameters) / (tp pp)    (the stages' mean; :func:`_params_per_gpu`)
        bytes = 18                     fp32 buffer (grad_bytes 4 with 16-bit compute), DeepSpeed: BF16_Optimizer,
                                       see :data:`BF16_OPTIMIZER_ACCUMULATE_BYTES`, every micro-batch
              = 10                     fp32 buffer, nanotron: :data:`NANOTRON_ACCUMULATE_BYTES`, every micro-batch
              = 3 g (m - 1) / m        otherwise: autograd's AccumulateGrad adds the new gradient into
                                       param.grad in place (read both, write one, g bytes each) for every
                                       micro-batch after the first
        bytes = e + 2 g                Megatron-Core DDP, fusion off (:func:`megatron_unfused_accumulate_bytes`),
                                       every micro-batch, over P_gpu less the word embedding's shard V h / tp
                                       where :func:`embedding_grad_time` already prices its add (pp 1); the
                                       same over all of P_gpu under NeMo 1's O2 hook (``main_grad_hook``, fusion
                                       off): MainParamsOptimizerWrapper's ``main_param.grad.add_(param.grad.data)``
                                       (NVIDIA/NeMo v1.10.0 nemo/core/optim/optimizer_with_main_params.py
                                       L300-308; v1.9.0 L232-240) and Apex DistributedFusedAdam's ``_grad_copy``,
                                       ``grad_out.add_(grad_in)`` into its fp32 contiguous buffer (NVIDIA/apex
                                       98661600 apex/contrib/optimizers/distributed_fused_adam.py L525-564, from
                                       the grad-accumulator hook L349-368, every micro-batch: NeMo v1.11.0 runs
                                       no_sync(greedy_grad_copy=True) at pp 1 and no no_sync at pp > 1)
        t     = P_gpu bytes / (HBM bandwidth x memory efficiency)

    DeepSpeed's PipelineEngine calls torch.autograd.backward per micro-batch and, with bf16, then
    ``optimizer.update_hp_grads`` (deepspeed/runtime/pipe/engine.py _exec_backward_pass, v0.6.5); with
    fp16 the FP16 optimizer leaves accumulation to autograd. nanotron's pipeline engines call
    ``grad_accumulator.backward(loss)`` per micro-batch, which runs ``loss.backward()`` and then adds every
    parameter's gradient into its fp32 buffer and sets the 16-bit ``grad`` to None (so autograd never accumulates)
    (nanotron@c2528430 parallel/pipeline_parallel/engine.py ``PipelineEngine.backward``, optim/gradient_accumulator.py
    ``FP32GradientAccumulator.backward``). Megatron-Core with ``gradient_accumulation_fusion`` False builds its
    Transformer Engine linears with ``fuse_wgrad_accumulation=False`` (NVIDIA/Megatron-LM@847781764f
    megatron/core/extensions/transformer_engine.py L395, L566) and its output layer's
    ``LinearWithGradAccumulationAndAsyncCommunication`` computes ``grad_output.t().matmul(total_input)`` instead of the
    fused kernel (tensor_parallel/layers.py), so each weight's gradient arrives as a new 16-bit ``param.grad`` that
    the DDP's per-parameter hook adds into ``main_grad`` and frees, every micro-batch
    (distributed_data_parallel.py ``_make_backward_post_hook``). The 16-bit GEMM output (e) against the fused
    GEMM's read-modify-write of main_grad (2 g) is epilogue traffic under a compute-bound GEMM, priced in neither
    case. Part of the backward pass, so the bubble scales with it. docs/model.md#grad-accum-fusion"""
    unfused = ~np.asarray(g.grad_accumulation_fusion, dtype=bool)
    ddp = megatron_ddp_on(g)
    megatron = (ddp | main_grad_hook_on(g)) & unfused
    on = g.deepspeed_pipeline | g.nanotron_trainer | megatron
    if not np.any(on):
        return np.zeros(1)
    dense, expert = _params_per_gpu(job, g)
    m = microbatches(g)
    fp32_buffer = (job.grad_bytes >= 4.0) & (job.elem_bytes <= 2.0)
    fp32_pass = np.where(g.deepspeed_pipeline, BF16_OPTIMIZER_ACCUMULATE_BYTES, NANOTRON_ACCUMULATE_BYTES)
    per_param = np.where(fp32_buffer, fp32_pass, 3.0 * job.grad_bytes * (m - 1.0) / m)
    t = _hbm_seconds(job, (dense + expert) * per_param)
    if np.any(megatron):
        # the embedding's own add is embedding_grad_time's under Megatron-Core DDP at pp 1; NeMo 1's hook adds it
        # with every other parameter (its embedding gradient is a dense 16-bit param.grad)
        embedding = (vocab_shard_elements(job, g) if job.is_transformer else 0.0) * (g.pp <= 1) * ddp
        # a 16-bit (or FP8-module) run's weight gradient is the 16-bit parameter's dtype: e is at least 2 bytes
        grad_elem = np.maximum(job.elem_bytes, 2.0)
        t_meg = _hbm_seconds(job, (dense + expert - embedding)
                             * megatron_unfused_accumulate_bytes(grad_elem, job.grad_bytes))
        t = np.where(megatron, t_meg, t)
    return np.asarray(np.where(on, t, 0.0))


def main_grad_hook_on(g: StrategyGrid) -> np.ndarray:
    """Where NeMo 1's O2 main-gradient hook runs (strategy ``main_grad_hook``): zero 0 (MainParamsOptimizerWrapper),
    1 or 2 (Apex DistributedFusedAdam), not beside Megatron-Core's DDP. StrategySpec refuses the others and plan
    searches only zero 0, 1 and 2 where it is pinned (planner.ZERO_SWITCHES, fuzz40); the mask keeps a grid built
    otherwise (a Python caller's) from pricing a hook the sharded wrappers of zero 3 / fsdp / hsdp do not run."""
    return np.asarray(g.main_grad_hook & (g.zero <= Zero.GRADIENTS) & ~megatron_ddp_on(g))


def megatron_ddp_on(g: StrategyGrid) -> np.ndarray:
    """Where Megatron-Core's DistributedDataParallel runs: strategy ``megatron_ddp`` at ZeRO 0 or 1 (its distributed
    optimizer). StrategySpec refuses it with ZeRO 2, 3, fsdp or hsdp and plan adds zero <= 1 where it is pinned
    (planner.pins); the mask keeps a grid built otherwise (a Python caller's) from pricing its terms at the
    sharded stages, whose candidates run a sharded data-parallel wrapper instead."""
    return np.asarray(g.megatron_ddp & (g.zero <= Zero.OPTIMIZER))


def vocab_shard_elements(job: Job, g: StrategyGrid) -> np.ndarray:
    """Elements of a rank's vocab-parallel shard of the V x h word embedding (or untied output layer): ``V h / tp``
    (Megatron-Core's VocabParallelEmbedding and ColumnParallelLinear output layer split the vocabulary over TP)."""
    return np.asarray(job.shape.vocab * job.shape.hidden / g.tp)


def embedding_grad_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of the word embedding's weight gradient outside any GEMM, under Megatron-Core's DDP
    (:func:`megatron_ddp_on`) without a pipeline (pp = 1: the one stage holds the embedding; at pp > 1 it is pipeline
    rank 0's, :func:`first_stage_embedding_grad_time`, and the MTP copy's, :func:`mtp_embedding_grad_time`), 0
    otherwise:

        E     = V h / tp                        the rank's vocab-parallel shard of the V x h word embedding
        u     = [tied] (1 + D) + D              other uses of the weight in the backward (D MTP modules; tied,
                                                the output layer of the main head and of each module's head)
        bytes = E (e + (g + e + g) + u (e + 3 e)) = E (2 e + 2 g + 4 e u)
        t     = bytes / (HBM bandwidth x memory efficiency)

    e = the 16-bit weight's element (the embedding is never an FP8 module), g = the gradient buffer's element
    (Megatron-Core's DDP allocates ``main_grad`` in fp32 when grad_reduce_in_fp32, else in the parameter's dtype:
    the element it reduces, ``Job.grad_bytes``).
    The embedding is not a linear layer, so gradient-accumulation fusion (the weight-gradient GEMM writing into
    main_grad) does not reach it: VocabParallelEmbedding.forward calls ``F.embedding(masked_input, self.weight)``
    (megatron/core/tensor_parallel/layers.py at core_v0.8.0 baf94af3c6, core_v0.15.0 0d7e02bd26 and 791b70e031),
    whose CUDA backward allocates a dense zero-filled V x h gradient in the weight's dtype and scatters the token
    rows' sums into it (pytorch/pytorch@d299946741 aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu
    ``embedding_backward_cuda_kernel``: ``at::zeros({num_weights, grad.size(-1)}, grad.options())``, write e per
    element); then the DDP's per-parameter hook adds it into the gradient buffer, ``param.main_grad.add_(
    param.grad.data)`` (megatron/core/distributed/distributed_data_parallel.py ``_make_param_hook``, the same three
    commits): read g + e, write g. Every micro-batch, in the backward's tail. The token rows' own work (b s/cp rows
    of h, against V rows) is left out, as :func:`scalemodel.cost.compute.loss_logit_bytes` leaves per-token work.

    Each other use of the weight hands autograd a second dense V x h gradient, which it sums with the first before
    the hook runs (torch/csrc/autograd/input_buffer.cpp ``accumulate``, ``old_var.add_(var)`` or ``old_var + var``,
    pytorch/pytorch@4537ef6cfa: read 2e, write e): with tied embeddings the output layer, whose fused weight-gradient
    GEMM writes main_grad itself and hands autograd a dummy that is ``torch.zeros`` (write e) because the model sets
    ``zero_out_wgrad`` on the shared weight when one stage holds both (LanguageModule
    ``setup_embeddings_and_output_layer``, megatron/core/models/common/language_module/language_module.py, and
    LinearWithGradAccumulationAndAsyncCommunication.backward, tensor_parallel/layers.py, at baf94af3c6, 0d7e02bd26
    and 791b70e031); each MTP module, which embeds its input through the same VocabParallelEmbedding (its own
    zero-filled gradient, e). With MTP and tied embeddings the output layer runs D + 1 times on the shared weight,
    the main head's and each module's (``process_mtp_loss`` calls ``output_layer(..., weight=output_weight)`` per
    module: NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/multi_token_prediction.py lines 1012-1016), each
    handing autograd its own zeros dummy (review24b: one before)."""
    on = megatron_ddp_on(g)
    if not job.is_transformer or not np.any(on):
        return np.zeros(1)
    sh = job.shape
    tied = np.where(np.asarray(sh.tied_embeddings, dtype=bool), 1.0, 0.0)
    uses = tied * (1.0 + sh.mtp_layers) + sh.mtp_layers
    return np.asarray(np.where(on & (g.pp <= 1), _embedding_grad_seconds(job, g, uses), 0.0))


def _embedding_grad_seconds(job: Job, g: StrategyGrid, uses: Any) -> np.ndarray:
    """The word embedding shard's dense gradient, ``uses`` more dense gradients summed into it, and the DDP hook's
    add into main_grad, at the HBM roofline: ``V h / tp x (2 e + 2 g + 4 e uses)`` bytes
    (:func:`embedding_grad_time`)."""
    return _hbm_seconds(job, vocab_shard_elements(job, g)
                        * (2.0 * job.elem_bytes + 2.0 * job.grad_bytes + 4.0 * job.elem_bytes * uses))


def first_stage_embedding_grad_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of the word embedding's weight gradient on pipeline rank 0 at pp > 1 (the stage that
    holds the embedding: :func:`_compute_per_microbatch` adds it where ``embedding_on_stage``), under Megatron-Core's
    DDP (:func:`megatron_ddp_on`), 0 otherwise (at pp 1 :func:`embedding_grad_time` prices the one stage's):

        E     = V h / tp                    the rank's vocab-parallel shard
        bytes = E (2 e + 2 g)               gradient-accumulation fusion on (the DDP hook's add priced here)
              = E e                         fusion off: :func:`grad_accumulation_time` prices every parameter's
                                            add into main_grad over the stages' mean, the embedding's among them
        t     = bytes / (HBM bandwidth x memory efficiency)      (:func:`_embedding_grad_seconds`, u = 0)

    The same F.embedding backward and DDP hook as :func:`embedding_grad_time`: ``LanguageModelEmbedding`` is built
    where ``pre_process`` (rank 0; NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/gpt_model.py lines
    173-174) and its VocabParallelEmbedding calls ``F.embedding(masked_input, self.weight)``; PyTorch's CUDA backward
    (pytorch/pytorch@1c94016e03 aten/src/ATen/native/cuda/Embedding.cu ``embedding_dense_backward_cuda``) allocates
    ``at::zeros({num_weights, grad_.size(-1)})`` for 3072 tokens or fewer and scatters them with
    ``embedding_backward_feature_kernel``, else radix-sorts the token ids and hands them to
    ``embedding_backward_cuda_kernel``, which allocates the same zero-filled V x h gradient and writes the segments'
    sums into the token rows: either way a dense e-byte V/tp x h tensor a micro-batch (the token rows' work, b s/cp
    rows of h, left out as at pp 1); the DDP hook then adds it into main_grad (read g + e, write g). No other use of
    the weight on rank 0: a tied output layer and the MTP modules use the last stage's copy
    (:func:`mtp_embedding_grad_time`). Part of rank 0's backward: 1F1B's three-class pipeline
    (:func:`scalemodel.cost.pipeline.one_f_one_b_three_class_time`) and the interleaved one run rank 0 at its own
    time, so it sets the pace where rank 0 is the busiest rank and lengthens the bubble's path through it
    otherwise. docs/model.md#first-stage-embedding-grad"""
    on = megatron_ddp_on(g) & (g.pp > 1)
    if not job.is_transformer or not np.any(on):
        return np.zeros(1)
    t = _embedding_grad_seconds(job, g, 0.0)
    # fusion off: the hook's add (e + 2 g bytes an element) is grad_accumulation_time's, over the stages' mean
    add = _hbm_seconds(job, vocab_shard_elements(job, g)
                       * megatron_unfused_accumulate_bytes(job.elem_bytes, job.grad_bytes))
    fused = np.asarray(g.grad_accumulation_fusion, dtype=bool)
    return np.asarray(np.where(on, np.where(fused, t, t - add), 0.0))


def mtp_embedding_grad_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of the last pipeline stage's word-embedding gradient when it holds D multi-token
    prediction modules at pp > 1 (at pp 1 :func:`embedding_grad_time` counts the modules' uses with the first's),
    under Megatron-Core's DDP, 0 otherwise. Megatron-Core builds the word embedding on a stage that runs the modules
    as well as on the first (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/gpt_model.py lines 173-174,
    ``if self.pre_process or self.mtp_process: self.embedding = LanguageModelEmbedding(...)``), and each module
    embeds its shifted input through it (megatron/core/transformer/multi_token_prediction.py line 1302,
    ``decoder_input = embedding(input_ids=input_ids, position_ids=position_ids)``): the same F.embedding backward and
    DDP hook as :func:`embedding_grad_time`, the first module's dense gradient and D - 1 more summed into it::

        bytes = V h / tp x (2 e + 2 g + 4 e (D - 1))

    The weight's gradient is all-reduced with the first stage's once a step (:func:`~scalemodel.engine.
    model_parallel_comm.tied_embedding_allreduce`); this is its per-micro-batch work on the last stage, part of the
    backward of the micro-batch that carries the logits.

    Tied embeddings (review24b): the stage's output layer runs on this copy, ``shared_embedding_or_output_weight``
    returning the embedding's weight where ``mtp_process`` (language_module.py lines 345-353), D + 1 times (the main
    head and each module's, :func:`embedding_grad_time`), so 2 D gradients join the first. Without
    gradient-accumulation fusion each is a 16-bit GEMM output, as above with D - 1 -> 2 D:
    ``V h / tp x (2 e + 2 g + 8 e D)``. With it, the fused GEMM writes main_grad itself and hands autograd a
    dummy that is ``torch.empty`` (nothing written), since the model sets ``zero_out_wgrad`` only at pp 1
    (language_module.py lines 263-268; tensor_parallel/layers.py lines 738-762), and the DDP hook adds param.grad
    only where ``grad_added_to_main_grad`` is False or ``zero_out_wgrad`` is set (distributed_data_parallel.py lines
    575-578): the D embedding gradients written (e) and 2 D sums (3 e), no hook add, ``V h / tp x 7 e D``."""
    on = megatron_ddp_on(g)
    sh = job.shape
    if not job.is_transformer or not np.any(on) or float(sh.mtp_layers) <= 0:
        return np.zeros(1)
    D = sh.mtp_layers
    tied = np.asarray(sh.tied_embeddings, dtype=bool)
    t = _embedding_grad_seconds(job, g, np.where(tied, 2.0 * D, D - 1.0))
    fused_tied = tied & np.asarray(g.grad_accumulation_fusion, dtype=bool)
    t = np.where(fused_tied, _hbm_seconds(job, vocab_shard_elements(job, g) * 7.0 * job.elem_bytes * D), t)
    return np.asarray(np.where(on & (g.pp > 1), t, 0.0))


def mtp_output_grad_sum_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of autograd summing the output layer's D + 1 weight gradients with D multi-token
    prediction modules and an untied output layer, under Megatron-Core's DDP, on the stage with the logits (any pp;
    tied, :func:`embedding_grad_time` and :func:`mtp_embedding_grad_time` count them with the embedding's), 0
    otherwise. The output layer runs once for the main head and once per module's head on the same weight
    (``process_mtp_loss``: ``output_layer(..., weight=output_weight)`` per module, NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/multi_token_prediction.py lines 1012-1016), and each call's backward hands autograd a
    dense V/tp x h gradient in the 16-bit dtype (fused: the dummy of tensor_parallel/layers.py lines 738-762, the
    real GEMM output unfused), which autograd sums before the weight's hook (input_buffer.cpp ``accumulate``, read
    2e, write e)::

        bytes = V h / tp x 3 e D

    The calls' own writes are the GEMMs' (the dummy: nothing written; unfused, the GEMM's epilogue, priced in
    neither case as :func:`grad_accumulation_time` leaves it), and the hook's add is :func:`grad_accumulation_time`'s
    (unfused; fused, the hook skips it: ``grad_added_to_main_grad``)."""
    on = megatron_ddp_on(g)
    sh = job.shape
    if not job.is_transformer or not np.any(on) or float(sh.mtp_layers) <= 0:
        return np.zeros(1)
    untied = ~np.asarray(sh.tied_embeddings, dtype=bool)
    t = _hbm_seconds(job, vocab_shard_elements(job, g) * 3.0 * job.elem_bytes * sh.mtp_layers)
    return np.asarray(np.where(on & untied, t, 0.0))


def fsdp_flat_grad_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of PyTorch FSDP1's passes over each unit's unsharded gradient before its
    reduce-scatter (strategy ``fsdp_flat_param``, with zero 2, 3, fsdp or hsdp; 0 otherwise):

        P_gpu = (dense + expert parameters) / (tp pp)     (the stages' mean; :func:`_params_per_gpu`)
        t     = P_gpu x fsdp_flat_grad_bytes(p = compute element, r = gradient element on the wire,
                                             divide when dp > 1) / (HBM bandwidth x memory efficiency)

    (:func:`scalemodel.cost.compute.fsdp_flat_grad_bytes`: cat, cast to the reduce dtype, pre-divide). Every rank
    builds its units' whole gradient, sharded or not, and FSDP reduces every micro-batch; part of the backward
    pass. docs/model.md#fsdp1-gradient"""
    if not np.any(g.fsdp_flat_param):
        return np.zeros(1)
    dense, expert = _params_per_gpu(job, g)
    nbytes = compute.fsdp_flat_grad_bytes(dense + expert, param_bytes=job.elem_bytes, reduce_bytes=job.grad_bytes,
                                          divide=g.dp > 1)
    t = _hbm_seconds(job, nbytes)
    return np.asarray(np.where(g.fsdp_flat_param & (g.zero >= Zero.GRADIENTS), t, 0.0))


def train_metric_time(job: Job, g: StrategyGrid) -> np.ndarray:
    """Seconds per micro-batch of the trainer's training-metric passes over the logits on the last stage (strategy
    ``train_metric_passes``, 0 by default; :func:`scalemodel.cost.compute.train_metric_bytes`)::

        t = passes x (3 e + 4) x T x V / t / (HBM bandwidth x memory efficiency),   T = b s / cp

    They run after the micro-batch's backward, outside autograd, and are priced with it
    (docs/model.md#train-metrics)."""
    if not np.any(g.train_metric_passes):
        return np.zeros(1)
    sh = job.shape
    logits = g.micro_batch * job.seq_len / g.cp * sh.vocab / g.tp
    return _hbm_seconds(job, logits * compute.train_metric_bytes(g.train_metric_passes, job.elem_bytes))


def fsdp2_copy_time(job: Job, g: StrategyGrid, layers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds per micro-batch (forward, backward) of PyTorch FSDP2's copies around its collectives (strategy
    ``fsdp_per_param``, with zero fsdp or hsdp; 0 otherwise; :func:`scalemodel.cost.compute.fsdp2_copy_bytes`):

        G     = the stage's gathered bytes (:func:`_gathered_bytes`: 16-bit, float8 linear weights with
                fsdp_fp8_all_gather) + 2 x its expert parameters
        fwd   = copy-out of every unit's forward gather, 2 G; with fsdp_defer_grad_sync and m > 1 micro-batches
                2 G / m (only the step's first forward gathers: a backward leaves its units gathered into the next
                forward: FSDPParamGroup.unshard returns at once for an unsharded group, and wait_for_unshard, which
                runs the copy-out, without an all-gather result; torch 2.7.0 _fsdp_param_group.py L255-256,
                L285-286; docs/model.md#fsdp-deferred-sync)
        bwd   = copy-out of the backward gathers, 2 G_b (L - 1)/L with reshard after forward (the last unit is not
                re-gathered, as the FSDP traffic term counts), else 0; G_b is G less the root unit's 2 R
                (:func:`fsdp_root_params`), which stays gathered from the forward to the backward
                + copy-in of the unsharded gradients, (dense + expert) x (compute element + gradient element on the
                wire)

    at the HBM roofline. FSDP2 runs the copy-out on the compute stream (wait_for_unshard) and the copy-in on its
    reduce-scatter stream, a memory-bound kernel beside the GEMMs, priced as serial as FSDP1's passes are
    (docs/model.md#fsdp2-copies)."""
    if not np.any(g.fsdp_per_param):
        return np.zeros(1), np.zeros(1)
    dense, expert = _params_per_gpu(job, g)
    gathered = _gathered_bytes(job, g, dense, layers) + 2.0 * expert
    out_b, in_b = compute.fsdp2_copy_bytes(gathered, dense + expert, grad_bytes=job.elem_bytes,
                                           reduce_bytes=job.grad_bytes)
    on = g.fsdp_per_param & (g.zero >= Zero.FSDP)
    m = microbatches(g).astype(float)
    first = np.where(g.fsdp_defer_grad_sync & (m > 1.0), 1.0 / m, 1.0)  # the forwards that gather, per micro-batch
    units = np.maximum(layers, 1.0)  # a planner candidate with no layer on a stage is infeasible, not a NaN
    again = np.where(g.fsdp_reshard_after_forward, (units - 1.0) / units, 0.0)
    root = np.minimum(fsdp_root_params(job, g), dense)
    blocks_b = compute.fsdp2_copy_bytes(_gathered_bytes(job, g, dense - root, layers) + 2.0 * expert, 0.0)[0]
    return (np.asarray(np.where(on, first * _hbm_seconds(job, out_b), 0.0)),
            np.asarray(np.where(on, _hbm_seconds(job, again * blocks_b + in_b), 0.0)))


def _plus_per_layer(g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray, f_t: Any, b_t: Any,
                    moe_block: Any = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer (forward, backward, recompute) with a term's forward seconds ``f_t`` and backward seconds ``b_t``:
    the forward's join the forward, the backward's the backward, and full recompute repeats the forward's;
    ``moe_block`` (a bool mask): where selective recompute repeats the term too (the MoE block's own under
    recompute of moe, :func:`moe_block_recomputed`; MLA's RoPE under mla_up_proj)."""
    again = (g.recompute == Recompute.FULL) | np.asarray(moe_block, dtype=bool)
    return fwd_l + f_t, bwd_l + b_t, rec_l + np.where(again, f_t, 0.0)


def mtp_module_recomputed(g: StrategyGrid) -> np.ndarray:
    """Where full recompute re-runs a multi-token prediction module's forward in the backward: full recompute with
    ``recompute_method`` uniform, or without a layer count (every layer recomputed); not with method block and a
    count N. Megatron-Core's MultiTokenPredictionLayer.forward calls ``_checkpointed_forward`` whenever
    recompute_granularity is 'full', which checkpoints the module under 'uniform' (asserting recompute_num_layers 1)
    and under 'block' warns "recompute_method == 'block' is not supported for MTP yet. Skipping recompute." and runs
    it plainly (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/multi_token_prediction.py lines 1621-1634,
    1705-1706; core_v0.15.0 0d7e02bd26 lines 632-644, 702). The partial-block test is :func:`recomputed_layers`'."""
    return np.asarray((g.recompute == Recompute.FULL) & ~((g.recompute_layers >= 0) & ~g.recompute_uniform),
                      dtype=bool)


def moe_block_recomputed(job: Job, g: StrategyGrid) -> np.ndarray:
    """Where selective recompute repeats the whole MoE block's forward (``recompute_modules`` moe,
    :func:`scalemodel.cost.transformer.recomputed_modules`; False for a model that is not a transformer)."""
    if not job.is_transformer:
        return np.zeros(1, dtype=bool)
    return np.asarray(transformer.recomputed_modules(job.shape, g.recompute, g.recompute_modules).moe, dtype=bool)


def _with_attention_unpad(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with flash-attn's unpad / pad copies (strategy
    ``attention_unpad`` with ``flash_attention``; :func:`scalemodel.cost.compute.attention_unpad_bytes`) at the
    HBM roofline: the forward's copies join the forward, the backward's the backward, and full recompute
    repeats the forward's. docs/model.md#attention-unpad"""
    on = g.attention_unpad & g.flash_attention
    if not job.is_transformer or not np.any(on):
        return fwd_l, bwd_l, rec_l
    f_b, b_b = compute.attention_unpad_bytes(job.shape, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len,
                                             tp=g.tp, cp=g.cp, elem_bytes=job.elem_bytes)
    f_t = np.where(on, _hbm_seconds(job, f_b), 0.0)
    b_t = np.where(on, _hbm_seconds(job, b_b), 0.0)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t)


def _with_fp8_expert_padding(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray,
                             moe_share: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the experts' FP8 padding copies of an fp8 run
    (strategy ``moe_fp8_padding``; :func:`scalemodel.cost.compute.fp8_expert_padding_bytes`) at the HBM roofline,
    mixed over the layers as the layer times are (``moe_share``, default moe_layers / layers, of them are MoE
    layers): the forward's copies join the forward, the backward's the backward, and full recompute repeats the
    forward's. docs/model.md#fp8-expert-padding"""
    sh = job.shape if job.is_transformer else None
    on = np.asarray(g.moe_fp8_padding, dtype=bool) & bool(job.fp8_recipe)
    if sh is None or sh.moe_layers == 0 or not np.any(on):
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    f_b, b_b = compute.fp8_expert_padding_bytes(sh, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len,
                                                tp=g.tp, cp=g.cp, ep=g.ep, etp=_etp(g), elem_bytes=job.elem_bytes)
    f_t = np.where(on, share * _hbm_seconds(job, f_b), 0.0)
    b_t = np.where(on, share * _hbm_seconds(job, b_b), 0.0)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t, moe_block_recomputed(job, g))


def _with_expert_quantize_kernels(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray,
                                  rec_l: np.ndarray, moe_share: float | None = None
                                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the fixed time of the routed experts' per-expert
    kernels: their GEMM calls (:func:`scalemodel.cost.compute.expert_gemm_calls`, every precision) and, in an fp8
    run, their quantization kernels (:func:`scalemodel.cost.compute.fp8_expert_quantize_kernels`), each
    :data:`scalemodel.cost.compute.KERNEL_FIXED_S`; mixed over the layers as the layer times are (``moe_share``,
    default moe_layers / layers); full recompute repeats the forward's. docs/model.md#expert-quantize-kernels"""
    sh = job.shape if job.is_transformer else None
    if sh is None or sh.moe_layers == 0:
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    n_f, n_b = compute.expert_gemm_calls(sh, ep=g.ep)
    if job.fp8_recipe:
        q_f, q_b = compute.fp8_expert_quantize_kernels(job.fp8_recipe, sh, ep=g.ep)
        n_f, n_b = n_f + q_f, n_b + q_b
    f_t = share * n_f * compute.KERNEL_FIXED_S
    b_t = share * n_b * compute.KERNEL_FIXED_S
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t, moe_block_recomputed(job, g))


def _with_expert_original_input(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray,
                                rec_l: np.ndarray, moe_share: float | None = None
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the routed experts' FC2 keeping its 16-bit input under
    selective recompute of moe_act in an fp8 / fp4 run (Megatron-Core ``set_save_original_input(self.linear_fc2)``,
    Megatron-Core's TE layers only): the forward quantizes FC2's input for the forward GEMM alone and the backward
    quantizes it again, expert by expert (:func:`scalemodel.cost.compute.expert_fc2_original_input_bytes`, its bytes
    as the run's other casts are priced, and one tensor's per-expert quantize kernels,
    :func:`scalemodel.cost.compute.fp8_expert_quantize_kernels`, at :data:`scalemodel.cost.compute.KERNEL_FIXED_S`);
    mixed over the layers as the layer times are (``moe_share``, default moe_layers / layers); the forward's repeats
    where the MoE block is recomputed (full, or selective moe). docs/model.md#expert-fc2-original-input"""
    sh = job.shape if job.is_transformer else None
    recipe = job.fp8_recipe
    if sh is None or sh.moe_layers == 0 or recipe not in compute.EXPERT_QUANTIZE_KERNELS:
        return fwd_l, bwd_l, rec_l
    on = ((g.recompute == Recompute.SELECTIVE)
          & transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).moe_act
          & (np.asarray(g.layer_impl) == LayerImpl.MEGATRON_TE))
    if not np.any(on):
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    f_b, b_b = compute.expert_fc2_original_input_bytes(
        recipe, sh, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len,
        transpose_copy=fp8_transpose_copy(job), tp=g.tp, cp=g.cp, ep=g.ep, etp=_etp(g),
        elem_bytes=job.elem_bytes)
    kernels = compute.fp8_expert_quantize_kernels(recipe, sh, ep=g.ep)[1] / 2.0  # one tensor of the two
    f_t = np.where(on, share * _cast_seconds(job, f_b), 0.0)
    b_t = np.where(on, share * (_cast_seconds(job, b_b) + kernels * compute.KERNEL_FIXED_S), 0.0)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t, moe_block_recomputed(job, g))


def proj_original_input(job: Job, g: StrategyGrid) -> tuple[np.ndarray, str]:
    """(where, recipe): the strategies whose attention linear_proj keeps its 16-bit input (training.proj_original_input
    and megatron_core_release on Megatron-Core's TE layers, strategy layer_impl megatron_te), and the attention block's
    recipe (its training.module_precision, else the run's), which must be one of the job's
    (:func:`scalemodel.specs.training.proj_original_input_recipes`) and of
    :data:`scalemodel.cost.compute.PROJ_ORIGINAL_INPUT_RECIPES` (Megatron-Core sets the flag for ``config.fp8`` with
    a recipe other than delayed and, from core_v0.16.0, for ``config.fp4``: attention.py lines 428-444 at
    NVIDIA/Megatron-LM@d98e8a64dd); nowhere otherwise.
    docs/model.md#proj-original-input"""
    own = module_recipe(job, "attention_proj")
    recipe = job.fp8_recipe if own is None else own
    if not (job.is_transformer and recipe in job.proj_original_input
            and recipe in compute.PROJ_ORIGINAL_INPUT_RECIPES):
        return np.zeros(1, dtype=bool), ""
    return np.asarray(np.asarray(g.layer_impl) == LayerImpl.MEGATRON_TE, dtype=bool), recipe


def _with_proj_original_input(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray,
                              whole_layer: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the attention's linear_proj keeping its 16-bit input
    (:func:`proj_original_input`): the forward writes no column-wise FP8 copy of its input, the backward quantizes
    the saved input again for the wgrad GEMM (:func:`scalemodel.cost.compute.proj_original_input_bytes`, priced as
    the attention block's other casts, :func:`_cast_seconds` at its recipe); in a hybrid pattern the attention layers'
    share of the layers (``whole_layer``: an attention + MLP/MoE layer, the MTP block's); full recompute repeats the
    forward's. docs/model.md#proj-original-input"""
    on, recipe = proj_original_input(job, g)
    if not np.any(on):
        return fwd_l, bwd_l, rec_l
    hy = None if whole_layer else job.shape.hybrid
    share = 1.0 if hy is None else float(hy.attention / job.shape.layers)
    f_b, b_b = compute.proj_original_input_bytes(
        recipe, job.shape, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len,
        transpose_copy=fp8_transpose_copy(job), tp=g.tp, cp=g.cp, elem_bytes=job.elem_bytes)
    f_t = np.where(on, share * _cast_seconds(job, f_b, recipe), 0.0)
    b_t = np.where(on, share * _cast_seconds(job, b_b, recipe), 0.0)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t)


def _with_shared_original_input(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray,
                                rec_l: np.ndarray, moe_share: float | None = None
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the shared experts' linear_fc1 keeping its 16-bit input
    (Megatron-Core ``set_save_original_input(self.linear_fc1)`` in SharedExpertMLP, under the recipes the job's
    Megatron-Core release gives linear_proj too, :func:`proj_original_input`; not where selective recompute names
    shared_experts, which then sets no flag): the forward quantizes the input for the forward GEMM only and the
    backward quantizes it again (:func:`scalemodel.cost.compute.shared_fc1_original_input_bytes`, priced as the run's
    other casts); mixed over the layers as the layer times are (``moe_share``, default moe_layers / layers); the
    forward's repeats where the MoE block is recomputed (full, or selective moe).
    docs/model.md#shared-fc1-original-input"""
    sh = job.shape if job.is_transformer else None
    recipe = job.fp8_recipe
    if sh is None or sh.moe_layers == 0 or sh.moe_shared_experts <= 0 or recipe not in job.proj_original_input:
        return fwd_l, bwd_l, rec_l
    on = ((np.asarray(g.layer_impl) == LayerImpl.MEGATRON_TE)
          & ~((g.recompute == Recompute.SELECTIVE)
              & transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).shared_experts))
    if not np.any(on):
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    f_b, b_b = compute.shared_fc1_original_input_bytes(
        recipe, sh, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len,
        transpose_copy=fp8_transpose_copy(job), tp=g.tp, cp=g.cp, sequence_parallel=g.sequence_parallel,
        gathered=g.moe_shared_expert_overlap, elem_bytes=job.elem_bytes)
    f_t = np.where(on, share * _cast_seconds(job, f_b), 0.0)
    b_t = np.where(on, share * _cast_seconds(job, b_b), 0.0)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t, moe_block_recomputed(job, g))


def _with_router_dtype(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray,
                       moe_share: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the router's fp32 / fp64 GEMMs and casts
    (training.moe_router_dtype, :func:`scalemodel.cost.compute.router_dtype_times`), at the router's own 16-bit price
    as :func:`scalemodel.cost.compute.layer_compute_time` has it (an fp8 run's router is BF16: the logits' peak and
    curve); mixed over the layers as the layer times are (``moe_share``, default moe_layers / layers). The router is
    inside the MoE block: full recompute and selective recompute of moe repeat the forward's.
    docs/model.md#router-dtype-compute"""
    sh = job.shape if job.is_transformer else None
    if sh is None or sh.moe_layers == 0 or job.router_bytes <= 0:
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    bf16 = job.logits_peak_flops > 0  # an fp8 / fp4 run: the router GEMM at the BF16 peak and curve
    f_t, b_t = compute.router_dtype_times(
        sh, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len, router_bytes=job.router_bytes,
        router_peak_flops=job.router_peak_flops, peak_flops=job.logits_peak_flops if bf16 else job.peak_flops,
        memory_bandwidth=job.memory_bandwidth, gemm_max=job.logits_gemm_max if bf16 else job.gemm_max,
        gemm_half_dim=job.logits_gemm_half_dim if bf16 else job.gemm_half_dim,
        memory_efficiency=job.memory_efficiency, tp=g.tp, cp=g.cp, sequence_parallel=g.sequence_parallel,
        elem_bytes=job.elem_bytes)
    return _plus_per_layer(g, fwd_l, bwd_l, rec_l, share * f_t, share * b_t, moe_block_recomputed(job, g))


def _with_eager_layer_ops(job: Job, g: StrategyGrid, fwd_l: np.ndarray, bwd_l: np.ndarray, rec_l: np.ndarray,
                          moe_share: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer forward, backward and recompute seconds with the eager ATen kernels of Megatron-Core's unfused paths
    (docs/model.md#eager-layer-ops), at the HBM roofline: strategy ``eager_rope`` in every layer
    (:func:`scalemodel.cost.compute.eager_rope_bytes`; selective recompute of mla_up_proj repeats MLA's, which runs
    inside the checkpointed up-projection); ``eager_bias_dropout_add`` in every layer, the attention
    output's bias and a dense MLP's (:func:`~scalemodel.cost.compute.eager_bias_dropout_add_bytes`);
    ``eager_glu_clamp`` and ``eager_expert_bias`` in the MoE
    layers (``moe_share``, default moe_layers / layers; :func:`~scalemodel.cost.compute.eager_glu_clamp_bytes`,
    :func:`~scalemodel.cost.compute.eager_expert_bias_bytes`, the latter's per-expert launches at
    :data:`~scalemodel.cost.compute.KERNEL_FIXED_S` each). Full recompute repeats every forward; selective recompute
    of moe_act repeats the clamp's forward (it runs inside ``bias_act_func``, the checkpointed function), not the
    bias (added after FC2, outside it)."""
    sh = job.shape if job.is_transformer else None
    rope, clamp, bias = (np.asarray(x, dtype=bool) for x in (g.eager_rope, g.eager_glu_clamp, g.eager_expert_bias))
    bda = np.asarray(g.eager_bias_dropout_add, dtype=bool)
    act = np.asarray(g.eager_activation, dtype=bool)
    if sh is None or not (np.any(rope) or np.any(clamp) or np.any(bias) or np.any(bda) or np.any(act)):
        return fwd_l, bwd_l, rec_l
    kw: dict[str, Any] = dict(micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len, tp=g.tp, cp=g.cp,
                              elem_bytes=job.elem_bytes)
    r_f, r_b = compute.eager_rope_bytes(sh, **kw)
    f_t = np.where(rope, _hbm_seconds(job, r_f), 0.0)
    b_t = np.where(rope, _hbm_seconds(job, r_b), 0.0)
    # MLA rotates inside qkv_up_proj_and_rope_apply, which selective recompute of mla_up_proj repeats
    up_proj = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).mla_up_proj
    fwd_l, bwd_l, rec_l = _plus_per_layer(g, fwd_l, bwd_l, rec_l, f_t, b_t, up_proj)
    if np.any(bda):  # the unfused bias-dropout-add: the attention output's bias and a dense MLP's, per mean layer
        L = float(sh.layers)
        if sh.hybrid is not None:  # one block per layer: attention and MLP blocks hand the add a bias
            biased, adds = (sh.hybrid.attention + sh.hybrid.mlp) / L, 1.0
        else:
            share_moe = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
            biased, adds = 2.0 - share_moe, 2.0
        biased = biased * np.where(np.asarray(sh.biases, dtype=bool), 1.0, 0.0)  # no linear bias: nothing to add
        a_f, a_b = compute.eager_bias_dropout_add_bytes(sh, sequence_parallel=g.sequence_parallel, biased_adds=biased,
                                                        adds=adds, **kw)
        fwd_l, bwd_l, rec_l = _plus_per_layer(g, fwd_l, bwd_l, rec_l, np.where(bda, _hbm_seconds(job, a_f), 0.0),
                                              np.where(bda, _hbm_seconds(job, a_b), 0.0))
    if np.any(act):  # the dense MLP blocks' eager activation (eager_activation_bytes), per mean layer
        dense = float(sh.mlp_layers / sh.layers) if moe_share is None else 1.0 - moe_share
        x_f, x_b = compute.eager_activation_bytes(sh, **kw)
        # selective recompute of mlp re-runs the dense MLP's forward (its checkpoint holds the activation)
        mlp_again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).mlp
        fwd_l, bwd_l, rec_l = _plus_per_layer(g, fwd_l, bwd_l, rec_l,
                                              np.where(act, dense * _hbm_seconds(job, x_f), 0.0),
                                              np.where(act, dense * _hbm_seconds(job, x_b), 0.0), mlp_again)
    if sh.moe_layers == 0 or not (np.any(clamp) or np.any(bias)):
        return fwd_l, bwd_l, rec_l
    share = float(sh.moe_layers / sh.layers) if moe_share is None else moe_share
    c_f, c_b = compute.eager_glu_clamp_bytes(sh, ep=g.ep, etp=_etp(g), **kw)
    e_f, e_b = compute.eager_expert_bias_bytes(sh, ep=g.ep, etp=_etp(g), prob_bytes=job.router_bytes or None, **kw)
    local = np.maximum(np.maximum(sh.moe_experts, 0.0) / g.ep, 1.0)
    k_f, k_b = compute.EXPERT_BIAS_KERNELS
    clamp_f = np.where(clamp, share * _hbm_seconds(job, c_f), 0.0)
    bias_f = np.where(bias, share * (_hbm_seconds(job, e_f) + (k_f * local + 1.0) * compute.KERNEL_FIXED_S), 0.0)
    bias_b = np.where(bias, share * (_hbm_seconds(job, e_b) + k_b * local * compute.KERNEL_FIXED_S), 0.0)
    fwd_l, bwd_l, rec_l = _plus_per_layer(g, fwd_l, bwd_l, rec_l, clamp_f + bias_f,
                                          np.where(clamp, share * _hbm_seconds(job, c_b), 0.0) + bias_b,
                                          moe_block_recomputed(job, g))  # both inside MoELayer.forward
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).moe_act
    return fwd_l, bwd_l, rec_l + np.where((g.recompute == Recompute.SELECTIVE) & again, clamp_f, 0.0)


def recomputed_layers(g: StrategyGrid, layers_per_stage: Any) -> np.ndarray:
    """Layers of a stage whose forward is repeated in the backward pass (docs/model.md#recompute).

    Full recompute with ``recompute_layers`` N (Megatron-LM ``--recompute-method block
    --recompute-num-layers N``; megatron/core/transformer/transformer_block.py ``_checkpointed_forward``
    recomputes the first N layers of each model chunk): min(N v, n) of the stage's n layers, v = the
    virtual stages (each of its v chunks is a block of its own). ``recompute_method: uniform`` recomputes
    every layer (in checkpointed chunks of N, which changes the memory only). Otherwise every layer of the stage
    (selective recompute repeats each layer's attention core; none repeats nothing, priced as zero).
    """
    n = np.asarray(layers_per_stage, dtype=float)
    v = np.where(g.schedule == ScheduleKind.INTERLEAVED, g.virtual_stages, 1).astype(float)
    partial = (g.recompute == Recompute.FULL) & (g.recompute_layers >= 0) & ~g.recompute_uniform
    return np.where(partial, np.minimum(g.recompute_layers * v, n), n)


def _block_recomputed(g: StrategyGrid, chunks: Sequence[Any]) -> np.ndarray | None:
    """Recomputed layers of a rank whose model chunks hold ``chunks`` layers each (one chunk: a model chunk alone),
    under full recompute with ``recompute_layers`` N: sum_c min(N, n_c), since the block method checkpoints the
    first N layers of each chunk's TransformerBlock (``layer_idx < config.recompute_num_layers`` over
    ``range(self.num_layers_per_pipeline_rank)``, the block's own ``len(self.layers)``: NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/recompute.py lines 167-181, megatron/core/transformer/transformer_block.py line 334; the FP8 skip
    of layers without an input gradient aside). :func:`recomputed_layers`' min(N v, n) is this for v equal
    chunks of the rank's n layers, not for unequal ones (a given split's or a hybrid pattern's chunks: 1 and 5 layers
    at N 2 recompute 1 + 2, not min(4, 6)) nor for one chunk of a rank of v (min(N, n_c), not min(N v, n_c)). Every
    layer otherwise, as :func:`recomputed_layers` (review18a). None where no candidate recomputes N layers a chunk
    (:func:`recomputed_layers` is then exact: the stage is priced as it was)."""
    partial = (g.recompute == Recompute.FULL) & (g.recompute_layers >= 0) & ~g.recompute_uniform
    if not np.any(partial):
        return None
    n = [np.asarray(c, dtype=float) for c in chunks]
    return np.asarray(np.where(partial, sum((np.minimum(g.recompute_layers, c) for c in n), np.zeros(1)),
                               sum(n, np.zeros(1))), dtype=float)


def _split_rank_recomputed(g: StrategyGrid, sp: _RankSplit, r: int) -> np.ndarray | None:
    """Recomputed layers of rank r of a split whose v >= 2 chunks (its ``|`` segments or given virtual stages
    r, p + r, ...) are not all equal (:func:`_block_recomputed`); None where :func:`recomputed_layers` is exact
    (one chunk a rank, or equal chunks)."""
    if not sp.piped or sp.v < 2 or not sp.segments:
        return None
    sizes = [len(sp.segments[c * sp.p + r]) for c in range(sp.v)]
    if len(set(sizes)) == 1:
        return None
    return _block_recomputed(g, sizes)


def _chunk_ranks_recomputed(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(rank 0, a middle rank, the last rank) recomputed layers of an interleaved pipeline of given first / last model
    chunks (:func:`_chunked`, :func:`_chunk_layers`' first f, middle c, last l): rank 0 runs chunks f, c, ..., c, a
    middle rank v chunks c, the last rank c, ..., c, l, each chunk its own first N layers (:func:`_block_recomputed`):
    min(N, f) + (v-1) min(N, c), v min(N, c), (v-1) min(N, c) + min(N, l); min(N v, n) of the rank's n layers
    (:func:`recomputed_layers`) took rank 0 of f 1, c 3, v 2 at N 2 as min(4, 4) = 4 recomputed, not 1 + 2 = 3.
    Read only where :func:`_chunked` (other candidates' entries are a balanced chunk's); None where no chunked
    candidate recomputes N layers a chunk."""
    if not np.any(_chunked(g) & (g.pp >= 2)):
        return None
    first, mid, last = _chunk_layers(job, g)
    v = np.maximum(g.virtual_stages, 1)
    # a rank's v - 1 middle chunks, one entry per chunk up to the grid's largest v - 1 (past a candidate's own
    # v - 1 an entry holds no layer: min(N, 0) adds 0)
    more = [np.where(k < v - 1, mid, 0.0) for k in range(int(np.max(v)) - 1)]
    r0 = _block_recomputed(g, [first, *more])
    r_mid = _block_recomputed(g, [mid, *more])
    r_last = _block_recomputed(g, [*more, last])
    if r0 is None or r_mid is None or r_last is None:
        return None
    return r0, r_mid, r_last


def _stage_recomputed(job: Job, g: StrategyGrid, last: np.ndarray, other: np.ndarray, first: np.ndarray
                      ) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Recomputed layers of :func:`~scalemodel.engine.pipeline_ranks._stage_layers`' (last, other, first) ranks: on the
    chunked interleaved candidates
    the ranks' own (:func:`_chunk_ranks_recomputed`; ``other`` a middle rank at pp >= 3, else rank 0, as
    :func:`~scalemodel.engine.pipeline_ranks._with_chunk_ranks` counts them), :func:`recomputed_layers` of
    the counts elsewhere; (None, None, None) where that is exact everywhere (the stages priced as they were)."""
    ranks = _chunk_ranks_recomputed(job, g)
    if ranks is None:
        return None, None, None
    r0, r_mid, r_last = ranks
    r_other = np.where(g.pp >= 3, r_mid, r0)
    c = _chunked(g) & (g.pp >= 2)
    return (np.asarray(np.where(c, r_last, recomputed_layers(g, last))),
            np.asarray(np.where(c, r_other, recomputed_layers(g, other))),
            np.asarray(np.where(c, r0, recomputed_layers(g, first))))


def _recomputed_total(job: Job, g: StrategyGrid) -> np.ndarray:
    """Layers whose forward a micro-batch repeats over the whole pipeline, the sum over the ranks of what each
    rank's compute prices: the balanced split's L mod p ranks of ceil(L/p) layers and p - L mod p of floor(L/p), or
    the given first / last stage and the middle ones sharing the rest (:func:`recomputed_layers` of each), an
    interleaved pipeline of given first / last chunks' rank 0 + (p - 2) middle ranks + the last
    (:func:`_chunk_ranks_recomputed`), a given split's or a hybrid pattern's ranks each its own
    (:func:`_split_rank_recomputed`, :func:`_rank_layers`). Every layer where every layer repeats."""
    layers = float(job.shape.layers)
    p = g.pp.astype(float)
    f, lst = g.first_stage_layers.astype(float), g.last_stage_layers.astype(float)
    set_f, set_l = f >= 0, lst >= 0
    explicit = set_f | set_l
    n_mid = p - set_f - set_l
    mid = np.maximum(layers - np.where(set_f, f, 0.0) - np.where(set_l, lst, 0.0), 0.0) / np.maximum(n_mid, 1.0)
    given = (np.where(set_f, recomputed_layers(g, f), 0.0) + np.where(set_l, recomputed_layers(g, lst), 0.0)
             + n_mid * recomputed_layers(g, mid))
    k = np.mod(layers, p)  # the balanced split: k ranks of ceil(L/p), the rest floor(L/p)
    balanced = k * recomputed_layers(g, np.ceil(layers / p)) + (p - k) * recomputed_layers(g, np.floor(layers / p))
    total = np.where(p <= 1, recomputed_layers(g, layers), np.where(explicit, given, balanced))
    ranks = _chunk_ranks_recomputed(job, g)
    if ranks is not None:
        r0, r_mid, r_last = ranks
        total = np.where(_chunked(g) & (g.pp >= 2), r0 + (p - 2.0) * r_mid + r_last, total)
    for sp in _rank_layers(job, g) or ():
        own = [_split_rank_recomputed(g, sp, r) for r in range(sp.p)]
        rank_sum = sum((recomputed_layers(g, float(len(s))) if x is None else x for s, x in zip(sp.ranks, own,
                                                                                                strict=True)),
                       np.zeros(1))
        total = np.where(sp.on, rank_sum, total)
    return np.asarray(total, dtype=float)


def xla_remat(job: Job, g: StrategyGrid) -> np.ndarray:
    """bool per grid point: whether full recompute is XLA's (:func:`scalemodel.cost.compute.layer_compute_time`,
    ``xla_remat``): a program XLA compiles, on a TPU (JAX, PyTorch/XLA: every TPU program) or on GPUs (a layer
    compiled by XLA, ``layer_impl`` xla: MaxText; or a program under XLA's GPU scheduler, ``xla_gpu_lhs``). Its
    recomputed forward leaves out the MLP down-projection, whose output the backward never reads, and the TP
    collective after it (the reduce-scatter with sequence parallelism, else the all-reduce); in a parallel block the
    attention's output projection too, whose output feeds only the same sum (docs/model.md#xlapar35). The device
    does not enter: JAX's partial evaluation of ``jax.checkpoint`` keeps only the recomputed equations the backward
    reads (jax/_src/ad_checkpoint.py ``remat_partial_eval``, ``pe.dce_jaxpr``) and XLA's ``HloDCE`` removes dead
    instructions in the GPU and TPU pipelines alike (docs/model.md#xlagpu35)."""
    return np.asarray((np.asarray(g.layer_impl) == int(LayerImpl.XLA)) | np.asarray(g.xla_gpu_lhs, dtype=bool)
                      | (job.accelerator_family == "tpu"), dtype=bool)


def moe_rank_load(job: Job, g: StrategyGrid, copies: Any) -> np.ndarray:
    """The busiest EP rank's routed token copies over the mean, for a mean of ``copies`` per rank and dispatch
    (docs/model.md#moe-rank-imbalance): the measured training.moe_rank_imbalance where given (at most
    :func:`scalemodel.cost.moe_routing.copy_load_cap`), else the expected
    maximum under uniform random top-k routing (:func:`scalemodel.cost.moe_routing.copy_load_factor` over the ep
    ranks), or 1 under training.moe_routing cyclic (Automodel's FakeBalancedGate: over a period of E / gcd(k, E)
    tokens every expert gets k / gcd(k, E) copies, so every rank of E / ep experts the same;
    :func:`scalemodel.cost.moe_routing.cyclic_part_hits`); 1 at ep 1 and without experts. Under drop-and-pad
    (training.moe_pad_to_capacity) the stated factor is the capacity factor c, and every expert runs c x its mean
    rows at every ep, ep 1 included (Megatron-LM 7094270c6f moe_utils.py ``topk_softmax_with_capacity``: capacity
    ceil(T k / E c) a pad-filled expert; MaxText ``generate_masks``: C = ceil(s k / E) c a sequence): c, at most
    E / k (job.check_moe_rank_imbalance), no routing cap (the padding rows are not token copies)."""
    sh = job.shape
    E, k = float(sh.moe_experts), float(sh.moe_top_k)
    ep = np.asarray(g.ep, dtype=float)
    if job.moe_pad_to_capacity and job.moe_rank_imbalance >= 1.0:
        return np.asarray(np.broadcast_to(np.where(E > 0, job.moe_rank_imbalance, 1.0),
                                          np.broadcast(ep, copies).shape), dtype=float)
    # a stated figure at most the most one rank can take, p min(k, E/p) / k (a figure measured at another ep can
    # pass it: 3 at ep 2 of 8 experts, top-2, would price a rank over all the copies its experts can be sent)
    f = (np.broadcast_to(np.minimum(job.moe_rank_imbalance, moe_routing.copy_load_cap(E, k, ep)),
                         np.broadcast(ep, copies).shape) if job.moe_rank_imbalance >= 1.0
         else np.ones(np.broadcast(ep, copies).shape) if job.moe_routing == "cyclic"
         else moe_routing.copy_load_factor(copies, E, k, ep))
    return np.asarray(np.where((ep > 1) & (E > 0), f, 1.0))


def moe_capacity_buffers(job: Job, g: StrategyGrid) -> dict[str, Any]:
    """The memory model's MoE buffer arguments (cost.memory.activation_bytes_per_layer): ``moe_capacity`` the
    routed experts' rows over the dropless k s b, the capacity factor c under drop-and-pad (training.moe_pad_to_capacity
    with moe_rank_imbalance c: every expert's buffer holds c x its mean rows, at every ep), else 1; ``moe_einsum``
    where drop-and-pad runs on the XLA layer (MaxText dense_matmul: its masks and expert-output buffer,
    docs/model.md#maxtext-dropping-moe)."""
    pad = bool(job.moe_pad_to_capacity) and float(job.shape.moe_experts) > 0
    cap = float(job.moe_rank_imbalance) if pad and job.moe_rank_imbalance >= 1.0 else 1.0
    return {"moe_capacity": cap, "moe_einsum": np.asarray(g.layer_impl) == LayerImpl.XLA if pad else False}


def fp8_params_held(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether the layers' linear weights are quantized parameters
    (:func:`~scalemodel.engine.dp_comm.fp8_param_elements`), with ZeRO 1-2 on a transformer: FP8 under
    fp8_param_gather with a recipe whose parameters Megatron gathers in FP8 (delayed, tensorwise, and blockwise,
    whose ``Float8BlockwiseQTensor`` parameters sit in the uint8 buffer, 128 x 128 tiles; not mxfp8, as
    :func:`scalemodel.cost.compute.fp8_quantize_bytes` holds), NVFP4 under fp4_param_gather with the nvfp4 recipe
    (docs/model.md#fp4-param-gather). job.check_fp8_all_gather / check_fp4_param_gather refuse either flag at the
    other precision; a planner grid may still carry it, and it holds nothing there."""
    on = (g.fp8_param_gather & (job.fp8_recipe not in ("mxfp8", "nvfp4"))) | (
        g.fp4_param_gather & (job.fp8_recipe == "nvfp4"))
    return np.asarray(on & ((g.zero == Zero.OPTIMIZER) | (g.zero == Zero.GRADIENTS)) & bool(job.is_transformer))


def _gathered_bytes(job: Job, g: StrategyGrid, dense: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """Bytes all-gathered for the ``dense`` (non-expert) parameters of a stage of ``layers`` units: 2 per
    parameter (16-bit), except, with ``fsdp_fp8_all_gather``, 1 per element of the linear weights on one TP rank
    (layers x :func:`~scalemodel.cost.transformer.linear_weights_per_layer` at tp: the TP-split ones / tp, those
    every rank holds whole, MLA's down-projections and LatentMoE's projections, whole; at most ``dense``), which
    torchao casts to float8 before the gather (torchtitan docs/float8.md: "cast Float8Linear.weight from high
    precision to float8 before FSDP all-gather so we can communicate in float8"); norms and embeddings are not
    Float8Linear and stay 16-bit. Megatron-FSDP with ``fp8_param_gather`` (:func:`fsdp_fp8_gather`) gathers the
    same linear weights in FP8; it builds MLA's linear_q_down_proj / linear_kv_down_proj and LatentMoE's
    projections as TELinear ``parallel_mode="duplicated"``, whole on every TP rank (multi_latent_attention.py
    L524-527, L572-574, moe_layer.py L279-295 at NVIDIA/Megatron-LM@d98e8a64dd; mem30b). torchtitan's float8 + FSDP
    gather (tensorwise only: "using `float8_config.enable_fsdp_float8_all_gather` together with
    `float8_config.recipe_name` is not supported", pytorch/torchtitan@e7c0cae
    torchtitan/components/quantization/float8.py L57-60) runs Llama 3 / Llama 4, whose TP plans split every
    attention and MLP linear (models/llama3/parallelize_llama.py, experiments/llama4/infra/parallelize_llama.py;
    Llama 4's router gate, ``NoParallel``, is a router, which linear_weights_per_layer does not count), so the
    whole count is 0 there; its later DeepSeek-V3 plan, which keeps MLA's wq_a / wkv_a ``NoParallel``, has
    no float8 gather (pytorch/torchtitan@b5bcd76c66 has no enable_fsdp_float8_all_gather; mtp30)."""
    nbytes = 2.0 * dense
    fp8 = fsdp_fp8_gather(job, g)
    if not job.is_transformer or not np.any(fp8):
        return nbytes
    linear = np.minimum(layers * transformer.linear_weights_per_layer(job.shape, g.tp), dense)
    return np.where(fp8, nbytes - linear, nbytes)


#: The fp8 recipes whose XLA-compiled weight gathers run in FP8 (:func:`fsdp_fp8_gather`): Flax's per-tensor
#: ``Fp8DotGeneralOp`` scales are the scalars the gemm rewriter and the collective quantizer need (a broadcast scalar
#: scale); block-scaled recipes are not XLA's pattern.
XLA_FP8_GATHER_RECIPES = ("delayed", "tensorwise")


def fsdp_fp8_gather(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether FSDP (zero fsdp/hsdp) gathers the dense linear weights in float8: torchao's
    ``fsdp_fp8_all_gather``, or Megatron-FSDP with ``fp8_param_gather`` (Megatron-LM --fp8-param-gather
    "only supported with distributed optimizer, torch fsdp2, megatron fsdp", megatron/training/arguments.py;
    Megatron-FSDP builds its parameter buffers from the FP8 parameters, megatron/core/distributed/fsdp/src/
    megatron_fsdp/param_and_grad_buffer.py ``init_param_with_fp8``; NVIDIA/Megatron-LM@d98e8a64dd). The routed
    experts' gathers stay priced at 16 bits on this path, and the FP8 shards' smaller storage is not priced.
    Delayed, tensorwise and blockwise (Megatron-FSDP quantizes ``Float8BlockwiseQTensor`` parameters into its
    buffers, param_and_grad_buffer.py "Special handling of blockwise FP8", NVIDIA/Megatron-LM@9c5258f109 line
    3525): the mxfp8 case is not verified, and priced at 16 bits.

    XLA (``layer_impl`` xla, an fp8 run with a per-tensor recipe, the Flax ``Fp8DotGeneralOp`` MaxText's
    ``quantization=fp8`` runs): every dot's operand is quantize-dequantized (q / scale, clamp, convert to E4M3,
    convert back, x scale; google/flax@10f34608 flax/linen/fp8_ops.py ``in_qdq``) on the FSDP-sharded weight, and the
    SPMD partitioner's all-gather sits between the dequantization and the dot. XLA moves that gather onto the FP8
    data: gemm_rewriter's FP8 pattern takes an all-gather between the dequantization and the dot since
    openxla/xla#4462 (2023-07, "This effectively causes an FP16 or FP32 all-gather to be converted to an FP8
    all-gather"; NVIDIA/JAX-Toolbox@bae53fc1 rosetta/docs/NATIVE_FP8.md lists AllGather among the ops the pattern
    allows), and the collective quantizer swaps a dequantization and the collective after it (openxla/xla#15584,
    2024-08; run before the collective pipeliner since #17453, 2024-09). So the linear weights cross the wire in
    FP8, as torchao's; the norms' scales are no dot operand and stay 16-bit. GPUs only: both passes are XLA's GPU
    compiler's (gpu_compiler.cc's collective pipeline, xla/service/gpu's gemm rewriter) and MaxText's
    ``Fp8Quantization`` is "Fp8 quantization for NVIDIA GPUs" (AI-Hypercomputer/maxtext@9551c2ade
    MaxText/layers/quantizations.py line 194); a TPU compiles through its own, unpublished passes, so its gathers
    stay 16-bit."""
    megatron = g.fp8_param_gather & (g.zero >= Zero.FSDP) & (job.fp8_recipe != "mxfp8")
    xla = ((g.layer_impl == LayerImpl.XLA) & (g.zero >= Zero.FSDP) & (job.accelerator_family != "tpu")
           & (Precision.parse(job.precision) == Precision.FP8) & (job.fp8_recipe in XLA_FP8_GATHER_RECIPES))
    return np.asarray(g.fsdp_fp8_all_gather | megatron | xla)


def fsdp_root_params(job: Job, g: StrategyGrid) -> np.ndarray:
    """Parameters per GPU in the PyTorch FSDP root unit: the word embedding, the output layer when untied, learned
    positions and the final norm (:func:`~scalemodel.cost.transformer.embedding_params`), over tp (vocab-parallel),
    on PyTorch FSDP (zero fsdp or hsdp) as the frameworks flagged ``fsdp_per_param`` (FSDP2) or
    ``fsdp_flat_param`` (FSDP1) wrap it, with one pipeline stage; 0 otherwise.

    torchtitan fully_shards each TransformerBlock and then the model, whose unit keeps what no block holds
    (pytorch/torchtitan@e7c0cae torchtitan/models/llama3/parallelize_llama.py apply_fsdp: ``fully_shard(model,
    ...)`` after the loop over ``model.layers``); Composer's FSDP1 auto-wraps each MPTBlock (llm-foundry MPTModel
    ``fsdp_wrap_fn``), and llm-foundry marks ``wte`` (tied, also the output), ``wpe`` and ``norm_f`` ``_fsdp_wrap`` as
    units of their own, priced as this root (their further FULL_SHARD gathers are not: docs/model.md
    #fsdp-mpt-embedding-unit); mosaicml/examples' MosaicGPT leaves them in the root. The
    root is not resharded after the forward (FSDP2 ``FSDPState._lazy_init``: "For the root, do not reshard after
    forward since for training, the parameters would be freed and all-gathered immediately"; FSDP1
    ``_post_forward_reshard``: "Do not free the root's parameters in the post-forward"), so it is gathered once per
    micro-batch, before the first block, and its gradients, the last the backward completes (the embedding's),
    are reduce-scattered after the whole backward (:func:`~scalemodel.engine.dp_comm._sharded_parameter_traffic`). With
    pp > 1 each stage's
    root holds only part of this (the embedding on the first stage, the output on the last): not priced, 0."""
    if not job.is_transformer:
        return np.zeros(1)
    on = (g.fsdp_per_param | g.fsdp_flat_param) & (g.zero >= Zero.FSDP) & (g.pp == 1)
    if not np.any(on):
        return np.zeros(1)
    return np.asarray(np.where(on, transformer.embedding_params(job.shape) / g.tp, 0.0), dtype=float)
