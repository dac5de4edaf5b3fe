"""Model-parallel communication of one micro-batch: TP, CP, EP and PP, and what of it compute hides.

The collectives of each group priced on its placement (:func:`_mp_collectives`: TP all-reduces or reduce-scatter +
all-gather, CP ring / all-gather / all-to-all, MoE dispatch and combine all-to-alls or all-gathers, pipeline
send/recvs at stage boundaries, nanotron's p2p metadata), then what of them is exposed
(:func:`_model_parallel_comm`: TP overlap with GEMMs as Transformer Engine's userbuffers or nanotron do
(:func:`_tp_comm_overlap`, :func:`nanotron_tp_time`), CP under the attention core, shared-expert and
steady-state overlap of the MoE all-to-alls), and the once-a-step model-parallel syncs (tied embedding,
sequence-parallel replicated gradients). The formulas are in the docstring of :mod:`scalemodel.engine.step`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scalemodel.choices import Algorithm, CpCommType, FlexBackend, LayerImpl, LossImpl, Recompute, ScheduleKind
from scalemodel.cost import collectives as coll
from scalemodel.cost import compute, ep_dispatch, memory, nccl, transformer
from scalemodel.cost.placement import ParallelGroups, Placement, place
from scalemodel.engine.host_floor import CALL_COST_US
from scalemodel.engine.job import Job, StrategyGrid
from scalemodel.engine.layer_compute import (
    deferred_head_share,
    module_recipe,
    moe_block_recomputed,
    moe_rank_load,
    mtp_module_recomputed,
    vocab_shard_elements,
    xla_remat,
)
from scalemodel.engine.pipeline_ranks import _etp, microbatches


def _collective(op: str, size: np.ndarray, group: Placement, algorithm: np.ndarray | None = None) -> np.ndarray:
    """group_time on a placed group with a per-candidate algorithm code (a few vectorised calls, one per
    code used): :func:`_priced`'s time."""
    return _priced(op, size, group, algorithm).time


def _priced(op: str, size: np.ndarray, group: Placement, algorithm: np.ndarray | None = None) -> nccl.Priced:
    """:func:`_collective` with the hierarchical (NVLS) all-reduce's seconds the candidates on NCCL's own choice
    (auto) weighed (:func:`scalemodel.cost.collectives.priced_group_time`), which :func:`nvls_allreduce` compares
    with the time."""
    size = np.maximum(size, 0.0)
    # return_counts keeps np.unique on its sorting path: the plain call imports numpy.ma (10 ms a query) in numpy >= 2.3
    codes = np.unique(algorithm, return_counts=True)[0] if algorithm is not None else np.asarray([0])
    if len(codes) == 1:
        t, hier = coll.priced_group_time(op, size, group, algorithm=Algorithm.of(codes[0]).label)
        return nccl.Priced(np.asarray(t, dtype=float), hier)
    assert algorithm is not None
    out = np.zeros(np.broadcast_shapes(np.shape(size), np.shape(group.p), np.shape(algorithm)))
    hier = np.full((), np.inf)
    for code in codes:  # one vectorised call per algorithm in use (a handful), selected by broadcasting
        t, h = coll.priced_group_time(op, size, group, algorithm=Algorithm.of(code).label)
        out = np.where(algorithm == code, t, out)
        if code == int(Algorithm.AUTO):  # a named algorithm weighs none
            hier = h
    return nccl.Priced(out, hier)


def nvls_allreduce(group: Placement, algorithm: Any, chosen: Any, nvls: Any) -> np.ndarray:
    """Whether an all-reduce on ``group`` runs as NCCL's NVLS, and so on its NVLS channels
    (``Job.collective_share_nvls``, docs/model.md#contention): where NVLS applies
    (:func:`~scalemodel.cost.nccl.nvls_allreduce_applies`), the algorithm is named hierarchical (NVLS's name here),
    or it is NCCL's own choice (auto, None) and the priced time ``chosen`` is NVLS's (``nvls``: the hierarchical
    all-reduce's time that choice weighed, :func:`_priced`), i.e. the auto choice took NVLS (a 2-rank group, or a
    small message across nodes, runs a ring or a tree instead)."""
    code = np.asarray(int(Algorithm.AUTO) if algorithm is None else algorithm)
    picked = np.asarray(nvls) <= np.asarray(chosen) * (1.0 + 1e-12)  # auto is the fastest: NVLS's time when NVLS won
    return np.asarray(nccl.nvls_allreduce_applies(group) & ((code == int(Algorithm.HIERARCHICAL))
                                                            | ((code == int(Algorithm.AUTO)) & picked)))


#: Transformer Engine userbuffers splits of a "pipeline" GEMM + reduce-scatter overlap (O-proj and FC2
#: forward; TE pytorch/module/base.py initialize_ub default config num_splits = 4); "ring_exchange" ones
#: (QKV and FC1 forward, O-proj and FC2 data-gradient) split into tp chunks.
UB_PIPELINE_SPLITS = 4.0


def _tp_comm_overlap(fwd: Any, rec: Any, bwd: Any, gemm_fwd: Any, gemm_rec: Any,
                     gemm_bwd: Any) -> dict[str, np.ndarray]:
    """Exposed and hidden TP seconds per micro-batch with ``tp_comm_overlap`` (docs/model.md#tp-comm).

    Megatron-LM ``--tp-comm-overlap`` (Transformer Engine userbuffers; needs sequence parallelism,
    megatron/training/arguments.py) overlaps each sequence-parallel all-gather and reduce-scatter with
    the GEMM beside it (Transformer Engine pytorch/module/base.py ``initialize_ub`` defaults): forward
    (and recompute) AG -> QKV, FC1 as tp ring-exchange steps pipelined with the GEMM's chunks, O-proj,
    FC2 -> RS as a pipeline of :data:`UB_PIPELINE_SPLITS` GEMM chunks each followed by its reduce-
    scatter; backward "bulk" overlaps (the input AG under the data-gradient GEMM, the data-gradient RS
    under the weight-gradient GEMM, neither waiting on the other) and ring-exchange AGs. Per phase with
    C seconds of TP traffic and W seconds of GEMMs beside it:

        exposed = max(C - W, floor),   hidden = C - exposed <= W
        floor   = C / (2 x UB_PIPELINE_SPLITS) in the forward and recompute, 0 in the backward

    C - W: no GEMM hides more than runs beside it; the forward floor: the reduce-scatter (half of C)
    of the last pipeline chunk runs after the last GEMM chunk with nothing left to hide it. Phases:
    forward (W = the forward GEMMs), recompute (W = the recomputed forward GEMMs), backward. Each phase's traffic
    and GEMMs may be tuples of parts, each collective beside the GEMMs that can hide it (tp33: a linear's overlap
    runs inside that linear's own forward or backward, TE@c55e425ac5 linear.py L441-472 / L572 / L652):
    exposed = sum_i max(C_i - W_i, f_i C_i), the forward's and the recompute's as (all-gathers, reduce-scatters)
    with floors (0, 1 / UB_PIPELINE_SPLITS), the backward's floors 0; ``hidden_<phase>_parts`` the hidden seconds of
    each part. The caller hands in each part's usable window (review33b): (1 - 1/tp) W beside a ring exchange (its
    last GEMM chunk runs after the last receive), (1 - 1/UB_PIPELINE_SPLITS) W beside the pipeline (its first GEMM
    chunk runs before the first reduce-scatter), W beside a bulk overlap (TE@c55e425ac5 comm_gemm_overlap.cpp
    L405-530, L735-882). Hidden traffic slows the compute under it (``contention``).
    """
    out: dict[str, Any] = {}
    pipe = 1.0 / UB_PIPELINE_SPLITS
    for name, c, w, floors in (("fwd", fwd, gemm_fwd, (0.0, pipe)), ("rec", rec, gemm_rec, (0.0, pipe)),
                               ("bwd", bwd, gemm_bwd, (0.0, 0.0, 0.0))):
        split = isinstance(c, tuple)
        parts = tuple(zip(c, w, floors[:len(c)], strict=True)) if split else (
            (c, w, 0.5 * pipe if name != "bwd" else 0.0),)
        exposed = tuple(np.maximum(np.asarray(x, dtype=float) - np.asarray(y, dtype=float),
                                   np.asarray(x, dtype=float) * f) for x, y, f in parts)
        hidden = tuple(np.asarray(x, dtype=float) - e for (x, _y, _f), e in zip(parts, exposed, strict=True))
        out[name], out["hidden_" + name] = sum(exposed, np.zeros(1)), sum(hidden, np.zeros(1))
        out["hidden_" + name + "_parts"] = hidden
    return {"exposed": out["fwd"] + out["rec"] + out["bwd"], "hidden_fwd": out["hidden_fwd"],
            "hidden_bwd": out["hidden_rec"] + out["hidden_bwd"],
            "hidden_fwd_rec": out["hidden_fwd"] + out["hidden_rec"], "hidden_bwd_only": out["hidden_bwd"],
            "hidden_fwd_parts": out["hidden_fwd_parts"], "hidden_rec_parts": out["hidden_rec_parts"],
            "hidden_bwd_parts": out["hidden_bwd_parts"]}


#: SMs of Transformer Engine's userbuffers kernels per tp_comm_overlap method (NVIDIA/TransformerEngine@bee4649c,
#: 2.2.0.dev0: pytorch/module/base.py ``initialize_ub`` ``get_default_config`` L251-257: ``"num_sm": 1 if method ==
#: "ring_exchange" else 16``, ``"set_sm_margin": not method == "ring_exchange"``, ``"use_ce": True``;
#: docs/model.md#contention)
UB_RING_EXCHANGE_SMS = 1.0
UB_PIPELINE_BULK_SMS = 16.0


def userbuffers_sm_time(units: int, shared: bool, hidden_fwd: Any, hidden_bwd: Any, rs_gemm: Any,
                        bulk_bwd: Any = 0.0, ring: Any = 0.0) -> np.ndarray:
    """Seconds per micro-batch the GEMMs lose to Transformer Engine's userbuffers kernels under tp_comm_overlap
    (docs/model.md#contention). ``units``: the chip's SMs (S); ``shared``: collectives run on them (the accelerator's
    collective share is not 0); ``hidden_fwd``: hidden TP seconds of the forward and recomputed forward,
    ``hidden_bwd``: of the backward; ``rs_gemm``: seconds of the forward (and recomputed) GEMMs inside a
    pipeline reduce-scatter (O-proj, dense and shared-expert FC2; not the routed experts, :func:`_ub_shares`).
    With r = 1 SM (ring exchange) and k = 16 SMs (pipeline, bulk)::

        t = hidden_fwd (r / 2) / S + hidden_bwd (r + k) / 2 / S + rs_gemm k / (S - k)

    Half of each phase's traffic is an all-gather on the ring exchange (QKV / FC1 forward, O-proj / FC2
    data-gradient: copy engines, r SMs while it runs); the forward's other half the pipeline reduce-scatters, whose
    GEMM runs on S - k SMs for its whole length (``set_sm_margin``: TE@bee4649c
    common/comm_gemm_overlap/comm_gemm_overlap.cpp L84 ``_math_sms = (set_sm_margin) ? sm_count - num_comm_sm :
    sm_count``), the backward's the bulk overlaps, k SMs while they run (NeMo@7a8f1cc7bc
    recipes/tp_overlap_configs/userbuffers.py sets ``set_sm_margin=False`` for bulk). ``bulk_bwd``: hidden backward
    seconds that are bulk overlaps only (the input re-gathers under the data-gradient GEMMs, :func:`sp_regather`),
    k SMs while they run: + bulk_bwd k / S; ``ring``: hidden seconds that are ring-exchange all-gathers only (the
    forward's and the recompute's input gathers beside QKV / FC1, the row-parallel linears' output-gradient gathers
    beside their data-gradient GEMMs; tp33, which passes its parts here and 0 as ``hidden_fwd`` / ``hidden_bwd``),
    r SMs while they run: + ring r / S."""
    if not units or not shared or units <= UB_PIPELINE_BULK_SMS:
        return np.zeros(1)
    s = float(units)
    r, k = UB_RING_EXCHANGE_SMS, UB_PIPELINE_BULK_SMS
    return np.asarray(np.maximum(hidden_fwd, 0.0) * 0.5 * r / s + np.maximum(hidden_bwd, 0.0) * 0.5 * (r + k) / s
                      + np.maximum(rs_gemm, 0.0) * k / (s - k) + np.maximum(bulk_bwd, 0.0) * k / s
                      + np.maximum(ring, 0.0) * r / s, dtype=float)


def nanotron_tp_time(ag: Any, rs: Any, ar: Any, cols: tuple[Any, Any], rows: tuple[Any, Any], tp: Any,
                     sequence_parallel: Any) -> dict[str, np.ndarray]:
    """Exposed and hidden TP seconds per dense layer and micro-batch under nanotron's tensor-parallel linears
    (huggingface/nanotron@c2528430, the same at 67c5ebb6: src/nanotron/parallel/tensor_parallel/functional.py;
    docs/model.md#nanotron). ``ag``, ``rs``: one all-gather / reduce-scatter of the layer's activation over ``tp``;
    ``ar``: its all-reduce; ``cols`` the forward GEMM seconds of the two column-parallel linears (qkv_proj,
    gate_up_proj), ``rows`` of the two row-parallel ones (o_proj, down_proj).

    With sequence parallelism nanotron runs tp_mode REDUCE_SCATTER with tp_linear_async_communication (the benchmark
    grid's setting, scripts/scaling_benchmarks.py at e24d2483 line 88) and tp_recompute_allgather (ParallelismArgs
    default True):

    - column forward (``_ColumnLinearAsyncCommunication.forward``, lines 134-262): ``all_gather_into_tensor(...,
      async_op=True)``, then the GEMM of the rank's own sequence shard (1/t of the rows), ``handle.wait()``, then the
      other shards: the gather hides under G_c / t at most;
    - row forward (``_RowLinearAsyncCommunication.forward``, lines 455-472): the GEMM, then a blocking
      reduce-scatter: exposed;
    - column backward (lines 268-345): the input all-gathered again (async) under the data-gradient GEMM, the
      gradient's reduce-scatter (async) under the weight-gradient GEMM, each waited before the next use;
    - row backward (lines 476-581): the output gradient's all-gather (async) under the local shard's data-gradient
      GEMM (1/t of it), then the other shards and the weight gradient.

    Per layer (G_c, G_r: a linear's forward GEMM = its data- and its weight-gradient GEMM)::

        fwd exposed  = sum_c max(AG - G_c / t, 0) + 2 RS          hidden = sum_c min(AG, G_c / t)
        bwd exposed  = sum_c [max(AG - G_c, 0) + max(RS - G_c, 0)] + sum_r max(AG - G_r / t, 0)
        bwd hidden   = sum_c [min(AG, G_c) + min(RS, G_c)] + sum_r min(AG, G_r / t)

    (4 all-gathers and 2 reduce-scatters a backward: the columns' re-gathered inputs are traffic too). Without
    sequence parallelism (tp_mode ALL_REDUCE) the llama's o_proj cannot run the async linear (its forward asserts
    REDUCE_SCATTER), so every linear is synchronous: the row forward's all-reduce and the column backward's
    (``DifferentiableIdentity``, distributed_differentiable_primitives.py) run blocking, 2 AR each way, nothing
    hidden. No traffic hides longer than the GEMM under it."""
    ag, rs, ar = (np.asarray(v, dtype=float) for v in (ag, rs, ar))
    t = np.asarray(tp, dtype=float)
    sp = np.asarray(sequence_parallel, dtype=bool)
    fwd_e = 2.0 * rs + sum(np.maximum(ag - c / t, 0.0) for c in cols)
    fwd_h = sum(np.minimum(ag, c / t) for c in cols)
    bwd_e = (sum(np.maximum(ag - c, 0.0) + np.maximum(rs - c, 0.0) for c in cols)
             + sum(np.maximum(ag - r / t, 0.0) for r in rows))
    bwd_h = sum(np.minimum(ag, c) + np.minimum(rs, c) for c in cols) + sum(np.minimum(ag, r / t) for r in rows)
    zero = 0.0 * ar
    return {"fwd": np.where(sp, fwd_e, 2.0 * ar), "bwd": np.where(sp, bwd_e, 2.0 * ar),
            "hidden_fwd": np.where(sp, fwd_h, zero), "hidden_bwd": np.where(sp, bwd_h, zero)}


def _nanotron_linear_shares(sh: Any) -> tuple[float, float, float, float]:
    """The FLOP shares of a dense layer's weight GEMMs in nanotron's four linears (qkv_proj, gate_up_proj, o_proj,
    down_proj): each linear's GEMM time is taken as its share of the layer's priced forward GEMM time."""
    attn = {name: float(n_in * n_out) for name, n_in, n_out, _split in transformer.attention_matrices(sh)}
    fh = float(sh.ffn_hidden) * float(sh.hidden)
    up = (2.0 if bool(sh.gated_mlp) else 1.0) * fh
    total = attn["qkv"] + attn["o"] + up + fh
    return attn["qkv"] / total, up / total, attn["o"] / total, fh / total


def _ub_shares(sh: Any, column_down: Any = False, shared_off: Any = False) -> tuple[Any, Any]:
    """Shares of the model's layers' weight-GEMM FLOPs in the userbuffers GEMMs beside an all-gather (a) and beside a
    reduce-scatter (r), summed over the layers by kind (docs/model.md#ub-shares; the shape's, or a pipeline rank's
    part shape's, attention / dense MLP / MoE / Mamba layer counts, so a hybrid pattern's layers each count their own
    block and a standard layer its attention + MLP): :func:`_ub_block_shares` of those counts. The MTP blocks have
    their own, :func:`_mtp_ub_shares`. ``column_down`` (strategy mla_column_down_proj) and ``shared_off``
    (moe_shared_expert_overlap): :func:`_ub_block_shares`."""
    return _ub_block_shares(sh, float(sh.attention_layers), float(sh.mlp_layers), float(sh.moe_layers),
                            float(sh.mamba_layers), column_down, shared_off)


def _mtp_ub_shares(sh: Any, column_down: Any = False, shared_off: Any = False) -> tuple[Any, Any]:
    """:func:`_ub_block_shares` of one MTP pass's block (docs/model.md#ub-shares): one attention layer and one MoE
    layer where the model's last layer (or a hybrid's MTP pattern, ``*E``) is MoE, else one dense MLP (``*-``), no
    Mamba: the block ``layer_compute.mtp_compute`` prices as ``mtp_gemm`` (Megatron-LM@d98e8a64dd
    megatron/core/transformer/multi_token_prediction.py L1199-1228: a HybridStack of the MTP pattern or the decoder's
    last layer spec). eh_proj is not in it: its GEMM is not in ``mtp_gemm`` and its TP collectives are not in the
    count (docs/model.md#mtp). Under tp_comm_overlap Megatron builds the block without userbuffers at all (eh_proj's
    ``tp_comm_buffer_name`` "mtp_eh_proj" turns the shared config's tp_comm_overlap off, extensions/
    transformer_engine.py L1176-1186): these shares then size only its re-gathers' window (:func:`_mtp_plain_tp`,
    docs/model.md#ub-off)."""
    moe = 1.0 if bool(sh.last_layer_moe) else 0.0
    return _ub_block_shares(sh, 1.0, 1.0 - moe, moe, 0.0, column_down, shared_off)


def _ub_block_shares(sh: Any, n_att: float, n_mlp: float, n_moe: float, n_mamba: float, column_down: Any = False,
                     shared_off: Any = False) -> tuple[Any, Any]:
    """The userbuffers AG-side (a) and RS-side (r) shares of the forward weight-GEMM FLOPs of ``n_att`` attention,
    ``n_mlp`` dense MLP, ``n_moe`` MoE and ``n_mamba`` Mamba blocks (docs/model.md#ub-shares), on one TP rank of a
    sequence-parallel run, in units of (tokens T) x (weight elements) / tp::

        AG = n_att (QKV or Q/KV up + [column_down] D) + up (n_mlp h f + [not shared_off] S) + n_mamba h w_in
        RS = n_att (a d_v h) + (n_mlp h f + [not shared_off] S) + n_mamba d_inner h
        a = AG / T,   r = RS / T,   T = n_att (QKV or Q/KV up + D + a d_v h) + (up + 1) (n_mlp h f + S)
                                        + n_mamba (h w_in + d_inner h) + X
        D = MLA's down-projections h r_q + h (r_kv + d_rope),   S = n_moe s h f_e,
        X = n_moe (k (up + 1) f_e w + h E + 2 h l)

    (up = 2 gated, 1 not; s shared experts, k routed of width w: h, or LatentMoE's l; w_in the Mamba in_proj's
    2 d_inner + 2 G N + H). The AG side is the column-parallel linears (QKV, the dense and shared-expert FC1, the
    Mamba in_proj), the RS side the row-parallel ones (O-proj, FC2, the Mamba out_proj: Megatron-LM@d98e8a64dd
    megatron/core/ssm/mamba_mixer.py L281-295 / L437-451 build them with ``tp_comm_buffer_name`` "fc1" / "fc2",
    megatron/core/models/hybrid/hybrid_layer_specs.py L110-117 as TELayerNormColumnParallelLinear /
    TERowParallelLinear). X is the rest of the forward GEMM time the shares multiply (``compute.layer_compute_time``'s
    ``forward_gemm``): the routed experts' grouped GEMMs, which are not Transformer Engine userbuffers GEMMs
    (TE@bee4649c pytorch/module/grouped_linear.py L455-457: "GroupedLinear doesn't support Userbuffer overlap."; their
    tokens reach them through the token dispatcher, so userbuffers neither splits them nor shrinks them with
    ``set_sm_margin``, review21j); the router, h x E whole on every rank on its T / tp sequence shard
    (moe/router.py ``gating``, a plain GEMM), and LatentMoE's fc1_latent_proj / fc2_latent_proj, h x l each, whole
    (TELinear ``parallel_mode="duplicated"``, moe/moe_layer.py L279-295) on the same shard, which feed no TP
    collective and run outside any linear's gather-to-wait span (a re-gather is issued and waited inside its own
    linear's backward, layers.py L666-687). MLA's down-projections D (linear_q_down_proj, linear_kv_down_proj) are
    TELinear ``parallel_mode='duplicated'`` in the Transformer Engine spec (multi_latent_attention.py L526-527 /
    L573-574; models/gpt/gpt_layer_specs.py L302 / L304 ``backend.linear()``, TELinear): no gather, no re-gather, no
    userbuffers (TELinear sets ub_overlap only for ``parallel_mode != "duplicated"``, extensions/transformer_engine.py
    L1189): in T only; with ``column_down`` (strategy ``mla_column_down_proj``, TEColumnParallelLinear) each gathers
    its h-wide input and re-gathers it under its own data-gradient GEMM, so the re-gather window counts them on the AG
    side (not userbuffers either: their buffer names are none of qkv / proj / fc1 / fc2, transformer_engine.py
    L1176-1186). ``shared_off`` (``moe_shared_expert_overlap``) takes the shared experts off both sides: their
    linears' own comm and userbuffers are switched off (shared_experts.py L163-175) and their pair runs outside the
    weight-gradient window (:func:`_moe_tp_collectives`). Before hybrid32 the shares were one attention + MLP layer's
    with the MoE share moe_layers / layers; before review32a the down-projections sat on the AG side whatever the
    build; before mtp32 the router and LatentMoE projections were left out of T."""
    col, row, total = _block_linears(sh, n_att, n_mlp, n_moe, n_mamba, column_down, shared_off)
    if total <= 0:
        return 0.5, 0.5
    return (sum(n * f for n, f, _ in col) / total, sum(n * f for n, f, _ in row) / total)


def mla_column_linears(sh: Any) -> tuple[tuple[str, Any, Any], ...]:
    """The Transformer Engine column-parallel linears of one multi-head latent attention block, each as (name, input
    width, weight elements), in the slot order of ``coll['tp_mla_rs']`` / ``coll['tp_mla_rg']``
    (:func:`_mp_collectives`): linear_q_up_proj (r_q x a d; linear_q_proj h x a d where r_q = 0), linear_kv_up_proj
    (r_kv x a (d_nope + d_v)), linear_q_down_proj (h x r_q; none where r_q = 0), linear_kv_down_proj
    (h x (r_kv + d_rope)), from :func:`scalemodel.cost.transformer.attention_matrices`. The up-projections are
    column-parallel in every build (TELayerNormColumnParallelLinear with the latent norms, else TEColumnParallelLinear:
    NVIDIA/Megatron-LM@7094270c6f megatron/core/models/gpt/gpt_layer_specs.py L117-126, @d98e8a64dd L302-309); the
    down-projections only in the column build (``mla_column_down_proj``: TEColumnParallelLinear at 7094270c6f L117 /
    L123), TELinear ``parallel_mode='duplicated'`` otherwise (no TP collective: :func:`_block_linears` counts them
    ``column_down`` times). Each gathers its own input with sequence parallelism inside the module, re-gathers it for
    its weight gradient and reduce-scatters its input gradient (docs/model.md#mla-per-linear). 0 widths without MLA."""
    m = {name: (n_in, n_in * n_out) for name, n_in, n_out, _split in transformer.attention_matrices(sh)}
    return tuple((name, *m[name]) for name in ("q_up", "kv_up", "q_down", "kv_down"))


def _block_linears(sh: Any, n_att: float, n_mlp: float, n_moe: float, n_mamba: float, column_down: Any = False,
                   shared_off: Any = False) -> tuple[tuple[tuple[Any, Any, int], ...], tuple[tuple[Any, Any, int], ...],
                                                     float]:
    """The TP linears of ``n_att`` attention, ``n_mlp`` dense MLP, ``n_moe`` MoE and ``n_mamba`` Mamba blocks by kind,
    each as (instances, one instance's forward weight-GEMM FLOPs in :func:`_ub_block_shares`' units, slot), on the
    column side (attention: QKV, or each of MLA's column-parallel linears, :func:`mla_column_linears`, the
    down-projections ``column_down`` times; dense FC1; the shared experts' FC1; the Mamba in_proj) and the row side
    (O-proj, FC2, the shared experts' FC2, the out_proj), and T, every weight GEMM of the blocks
    (docs/model.md#ub-shares, #tp34, #mla-per-linear). ``slot``: -1 for a linear whose collective is the count's
    h-wide one, i >= 0 for MLA's linear i, whose collective is its own width's (:func:`_own_windows`). Each instance
    runs one TP collective per side and pass; the shared experts count only where they exist and run on the TP
    linears (not ``shared_off``). A parallel block (GPT-NeoX ``gpt_j_residual``) sums the attention's and the MLP's
    row-parallel outputs before its one reduction (EleutherAI/gpt-neox@ea7aefd8f8 megatron/model/transformer.py
    L951-959 / L1117-1118, the linears built with ``parallel_output``, mpu/layers.py L775-782): its row side is one
    instance a layer over O-proj and FC2 together."""
    w = {name: (float(n_in * n_out), split) for name, n_in, n_out, split in transformer.attention_matrices(sh)}
    o = w.pop("o")[0]
    down = sum(v for v, split in w.values() if not split)  # MLA's q_down / kv_down, held whole
    up = 2.0 if bool(sh.gated_mlp) else 1.0
    parts = transformer.linear_weight_parts(sh)
    h = float(sh.hidden)
    f, s = float(sh.ffn_hidden) * h, float(sh.moe_shared_experts * sh.moe_ffn_hidden) * h
    shared = n_moe * (1.0 - np.asarray(shared_off, dtype=float)) * (1.0 if s > 0 else 0.0)
    m_in, m_out = float(parts["mamba_in_proj"][0]), float(parts["mamba_out_proj"][0])
    if bool(np.any(sh.mla)):
        cd = np.asarray(column_down, dtype=float)
        att: tuple[tuple[Any, Any, int], ...] = tuple(
            (n_att * (cd if name.endswith("down") else 1.0), float(flops), i)
            for i, (name, _w, flops) in enumerate(mla_column_linears(sh)))
    else:
        att = ((n_att, w["qkv"][0], -1),)
    col = (*att, (n_mlp, up * f, -1), (shared, up * s, -1), (n_mamba, m_in, -1))
    row = ((n_att, o, -1), (n_mlp, f, -1), (shared, s, -1), (n_mamba, m_out, -1))
    if bool(np.any(sh.parallel_block)):
        row = ((n_mlp, o + f, -1), (n_att - n_mlp, o, -1), (shared, s, -1), (n_mamba, m_out, -1))
    routed = float(sh.moe_top_k * sh.moe_ffn_hidden * sh.moe_width) * (up + 1.0)
    other = (h * float(sh.moe_experts) + 2.0 * h * float(sh.moe_latent)) if float(sh.moe_experts) > 0 else 0.0
    qkv = sum(v for v, split in w.values() if split)  # QKV, or MLA's up-projections (q when r_q = 0)
    total = (n_att * (qkv + down + o) + (up + 1.0) * (n_mlp * f + n_moe * s) + n_mamba * (m_in + m_out)
             + n_moe * (routed + other))
    return col, row, float(total)


def _ub_gemm(sh: Any, comp: dict[str, np.ndarray], side: int, layers: Any, mtp: Any, column_down: Any = False,
             shared_off: Any = False) -> np.ndarray:
    """Forward GEMM seconds of the userbuffers linears on ``side`` (0: beside an all-gather, 1: beside a
    reduce-scatter) in ``layers`` of the stage's layers (their mean forward GEMM time ``gemm_per_layer``, at
    :func:`_ub_shares`) and ``mtp`` passes of its MTP blocks (their forward GEMM time ``mtp_gemm``, at the block's own
    :func:`_mtp_ub_shares`): the window of the SP re-gathers (side 0) and contention's ``G_rs`` (side 1)."""
    return np.asarray(_ub_shares(sh, column_down, shared_off)[side] * layers * comp["gemm_per_layer"]
                      + _mtp_ub_shares(sh, column_down, shared_off)[side] * mtp * comp.get("mtp_gemm", 0.0),
                      dtype=float)


def _own_windows(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], c: Any, side: int, att_extra: Any = 0.0,
                 layers: Any = None, mtp: Any = 1.0, edge: Any = 1.0, floor: float = 0.0, mla: Any = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(traffic, exposed, hidden) seconds per micro-batch of one TP collective per linear on ``side`` (0: the
    column-parallel linears, 1: the row-parallel ones, :func:`_block_linears`), each under ``edge`` x its own linear's
    GEMM (docs/model.md#tp34). Transformer Engine overlaps a linear's collective with that linear's own GEMMs, inside
    the linear's forward or backward (NVIDIA/TransformerEngine@c55e425ac5, v2.2, pytorch/module/linear.py L230-262
    the forward's userbuffers overlap in its own ``general_gemm``; L582-588 / L676-679 the input-gradient collective
    launched after the data-gradient GEMM and waited after the weight-gradient GEMM; layernorm_linear.py L662-668 /
    L753-756, layernorm_mlp.py L880-886 / L957-960), so one linear's excess is not hidden under another's slack::

        exposed = sum_k n_k max(c_k - edge w_k, floor c_k),   hidden = sum_k n_k c_k - exposed

    ``c`` seconds a linear whose collective is the count's h-wide one (slot -1); ``w_k`` one instance's forward GEMM
    seconds (= its data- and its weight-gradient GEMM's): its FLOP share of T times the blocks' GEMM time, the stage's
    ``layers`` (default all its layers, ``gemm_per_layer`` each) and ``mtp`` x its MTP passes' blocks (``mtp_gemm``,
    one attention block a pass). MLA's column linears (slots i >= 0, :func:`mla_column_linears`) each run their own
    width's collective, ``mla[i]`` seconds (docs/model.md#mla-per-linear: sequence parallelism, tp > 1); where ``mla``
    is None or where it is off, the block's ``c + att_extra`` (the count's collective and MLA's further gathers, as
    one pool) is shared out pro rata to the block's column GEMMs, c_i = (c + att_extra) w_i / sum_j m_j w_j, so that
    sum_i m_i max(c_i - w_i, 0) = max(c + att_extra - sum_j m_j w_j, 0): the block pooled (m_j: the down-projections'
    ``column_down`` instances). Before tp34 each side was one pool, max(sum c - edge sum w, floor sum c); before
    mla35 an MLA block's column linears were one pool under their summed GEMMs."""
    sh = job.shape
    n = comp["layers_per_stage"] if layers is None else layers
    passes = mtp * comp.get("mtp_attention_blocks", 0.0)
    cd, off = g.mla_column_down_proj, g.moe_shared_expert_overlap
    moe = 1.0 if bool(sh.last_layer_moe) else 0.0
    per_model = float(sh.layers)
    mtp_gemm = np.where(np.asarray(passes) > 0, comp.get("mtp_gemm", 0.0) / np.maximum(passes, 1e-300), 0.0)
    n_att = float(sh.attention_layers)
    sets = ((n / per_model, n_att, _block_linears(sh, n_att, float(sh.mlp_layers), float(sh.moe_layers),
                                                  float(sh.mamba_layers), cd, off),
             per_model * comp["gemm_per_layer"]),
            (passes, 1.0, _block_linears(sh, 1.0, 1.0 - moe, moe, 0.0, cd, off), mtp_gemm))
    c = np.asarray(c, dtype=float)
    per_linear = (g.sequence_parallel & (g.tp > 1)) if mla is not None else np.zeros(1, dtype=bool)
    traffic, exposed = np.zeros(1), np.zeros(1)
    for scale, blocks, (col, row, total), gemm in sets:
        lin = (col, row)[side]
        # one attention block's MLA column GEMMs in T's units (m_j w_j), the pro-rata divisor
        att_w = (np.asarray(sum(count * flops for count, flops, slot in lin if slot >= 0), dtype=float)
                 / max(blocks, 1e-300))
        for count, flops, slot in lin:
            ck = c
            if slot >= 0:
                pooled = (c + att_extra) * flops / np.maximum(att_w, 1e-300)
                ck = np.where(per_linear, mla[slot] if mla is not None else 0.0, pooled)
            w = edge * (flops / total if total > 0 else 0.0) * gemm
            inst = scale * count
            traffic = traffic + inst * ck
            exposed = exposed + inst * np.maximum(ck - w, floor * ck)
    return traffic, exposed, traffic - exposed


def _gathered_elem_bytes(job: Job, both_usages: bool) -> float:
    """Bytes an element of a sequence-parallel all-gather that Transformer Engine quantizes before it gathers
    (:func:`sp_regather_elem_bytes`, :func:`sp_grad_gather_elem_bytes`): 16-bit runs the activations'
    ``elem_bytes``; per-tensor FP8 (delayed, tensorwise) 1 byte, whatever the usages (``_all_gather_fp8`` gathers the
    row-wise data only and transposes it locally); MXFP8 1 + 1/32 (its E8M0 scales), blockwise 1 + 4/128, NVFP4
    1/2 + 1/16 a usage (:func:`scalemodel.cost.memory.quantized_input_bytes`, the copy TE saves), twice where the
    quantizer asks for both (``both_usages``: ``_all_gather_mxfp8`` / ``_all_gather_fp8_blockwise`` /
    ``_all_gather_nvfp4`` gather the row-wise and the column-wise data and scales); the layers a run keeps in BF16
    (``bf16_layer_share``) gather ``elem_bytes``."""
    eb = float(job.elem_bytes)
    recipe = str(job.fp8_recipe)
    low = memory.quantized_input_bytes(recipe)  # one usage of TE's quantized copy; 0: gathered unquantized
    if not low:
        return eb
    usages = 2.0 if both_usages and recipe not in ("delayed", "tensorwise") else 1.0
    share = float(job.bf16_layer_share)
    return share * eb + (1.0 - share) * usages * low


def sp_regather_elem_bytes(job: Job) -> float:
    """Bytes an element of a sequence-parallel column-parallel linear's input all-gather, the forward's and the
    backward's re-gather of the saved shard for the weight gradient (:func:`sp_regather`; docs/model.md#sp-regather,
    #tp-comm): one usage (:func:`_gathered_elem_bytes`). Transformer Engine's FP8 linears quantize the input before
    they gather it (NVIDIA/TransformerEngine@c27ee60ec7, v1.11, pytorch/module/linear.py L106-133 ``cast_to_fp8``
    before the L149-150 gather, layernorm_linear.py L124-126 the norm writes FP8; @c55e425ac5, v2.2, linear.py
    L143-156 and layernorm_linear.py L164-172 / L201-227 ``input_quantizer.set_usage(rowwise=True,
    columnwise=False)`` before ``gather_along_first_dim(..., quantizer=input_quantizer)``) and save the quantized
    shard (v1.11 layernorm_linear.py L321-329; v2.2 L316-327 keeps the row-wise FP8 data for delayed / current
    scaling, the column-wise for MXFP8, L595-612 re-gathers it with the input quantizer; @40c69e751a, v2.8,
    linear.py L202-204 and layernorm_linear.py L252-261 the same row-wise forward gather, distributed.py
    ``_all_gather_nvfp4``)."""
    return _gathered_elem_bytes(job, False)


def sp_grad_gather_elem_bytes(job: Job) -> float:
    """Bytes an element of a sequence-parallel row-parallel linear's output-gradient all-gather in the backward
    without userbuffers (docs/model.md#sp-grad-gather): Transformer Engine's ``grad_output_preprocess`` quantizes
    the gradient before it gathers it, with the usages both backward GEMMs need (row-wise for the data gradient,
    column-wise for the weight gradient: NVIDIA/TransformerEngine@c55e425ac5, v2.2, pytorch/module/linear.py L478-493
    ``set_usage(rowwise=True, columnwise=True)``, base.py L837-857; @40c69e751a, v2.8, linear.py L564-574, base.py
    L1163-1193; v1.11 @c27ee60ec7 base.py L775-795 ``cast_to_fp8`` then the gather of the ``uint8`` copy): per-tensor
    FP8 1 byte, MXFP8, blockwise and NVFP4 both usages (:func:`_gathered_elem_bytes`)."""
    return _gathered_elem_bytes(job, True)


def sp_regather(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], coll: dict[str, np.ndarray],
                mtp: Any = 1.0) -> dict[str, np.ndarray]:
    """Exposed and hidden seconds per micro-batch of the backward's input re-gathers under sequence parallelism
    (docs/model.md#sp-regather). A column-parallel linear with sequence parallelism saves its input shard, not the
    gathered input, and all-gathers it again in the backward for the weight-gradient GEMM: asynchronously, issued
    before the data-gradient GEMM and waited on after it (Megatron-LM@1afee592e8, core_r0.9.0,
    megatron/core/tensor_parallel/layers.py L392 / L431-453, and @d98e8a64dd L604 / L666-687; Transformer Engine
    @c27ee60ec7, v1.11, pytorch/module/linear.py L420-423 / L499-501 and layernorm_linear.py L451-459 / L566-567;
    @c55e425ac5, v2.2, linear.py L268-279 / L510-527 / L609-611 and layernorm_linear.py L595-612 / L689-691;
    @40c69e751a, v2.8, layernorm_linear.py L365-367 frees the gathered copy after the forward GEMM). One re-gather
    per forward all-gather of a column-parallel input (:func:`_block_linears`: the stage's layers' h-wide ones, each MoE
    block's shared experts', the MTP blocks'), at ``coll['tp_regather']``, an MLA block's further ones at
    ``coll['tp_att_regather']`` with it (the saved dtype, :func:`sp_regather_elem_bytes`), each under its own linear's
    data-gradient GEMM (tp34, :func:`_own_windows`; until tp34 all under the gathering linears' summed GEMMs)::

        exposed = sum_k n_k max(AG_k - w_k, 0),   hidden = sum_k n_k AG_k - exposed

    Not for a parallel block (GPT-NeoX's linears run ``F.linear`` on the gathered input, which autograd saves:
    EleutherAI/gpt-neox@ea7aefd8f8 megatron/mpu/layers.py L567-576; docs/model.md#tp34-parallel), nor for
    nanotron's linears (:func:`nanotron_tp_time` prices their own re-gathers), nor under XLA (a TPU, an XLA layer:
    :func:`~scalemodel.engine.layer_compute.xla_remat`; XLA keeps the gathered input unless a remat policy drops it:
    :func:`_jax_remat_tp_recompute`); 0 without sequence parallelism
    or at tp 1 (the saved input is the whole one). ``mtp``: the MTP blocks in the window, 1, or 0 for the layers'
    re-gathers alone (under userbuffers the MTP blocks' are priced on their own, :func:`_mtp_plain_tp`)."""
    on = (g.sequence_parallel & (g.tp > 1) & ~np.asarray(g.nanotron_trainer, dtype=bool)
          & ~xla_remat(job, g) & ~np.asarray(job.shape.parallel_block, dtype=bool))
    c, own, _ = _own_windows(job, g, comp, coll.get("tp_regather", 0.0), 0, coll.get("tp_att_regather", 0.0), mtp=mtp,
                             mla=coll.get("tp_mla_rg"))
    c, exposed = np.where(on, c, 0.0), np.where(on, own, 0.0)
    return {"total": np.asarray(c, dtype=float), "exposed": exposed, "hidden": c - exposed}


def _tp_chunking(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], tokens: Any) -> np.ndarray:
    """Seconds per micro-batch the GEMMs lose to being split for ``tp_comm_overlap`` (docs/model.md#tp-comm).

    Userbuffers runs a GEMM beside its collective as n chunks of M/n rows (M = T tokens, the whole
    gathered sequence): ring_exchange n = tp (QKV and FC1 forward, O-proj and FC2 data-gradient),
    pipeline n = :data:`UB_PIPELINE_SPLITS` (O-proj and FC2 forward); bulk overlaps (the other backward
    GEMMs) do not split. On the roofline's compute-bound side a GEMM's time scales with
    1/eff ~ (M + d0)/M in M, so n chunks take (M + n d0)/(M + d0) of the whole GEMM's time: an extra

        dt = t_GEMM x (n - 1) d0 / (T + d0)

    with d0 = the accelerator curve's gemm_half_dim. t_GEMM per class: the layer's forward GEMM time
    x the FLOP share of the userbuffers AG-side (a) or RS-side (r) matrices (:func:`_ub_shares`: the routed
    experts' grouped GEMMs are not split), for the forward, the recomputed forward and the RS-side data-gradient
    GEMMs of the stage's L_s layers (their mean forward GEMM time), full recompute repeating the recomputed ones::

        dt = d0 / (T + d0) gemm_l ((L_s + rec) fwd + L_s dgrad),   fwd = a (tp - 1) + r (4 - 1),   dgrad = r (tp - 1)

    The MTP blocks are not split: Megatron-Core builds them without userbuffers (:func:`_mtp_plain_tp`)."""
    if not job.is_transformer:
        return np.zeros(1)
    T = np.asarray(tokens, dtype=float)
    d0 = job.gemm_half_dim
    t = g.tp.astype(float)
    rec = np.where(g.recompute == Recompute.FULL, comp["recomputed_layers"], 0.0)
    a, r = _ub_shares(job.shape, shared_off=g.moe_shared_expert_overlap)
    # a part switched off (tp_comm_overlap_ag / _rs, docs/model.md#tp-comm-parts) runs its GEMM whole: the ring
    # exchange's (the forward AG side and the RS side's data-gradient) with tp_comm_overlap_ag, the pipeline's with _rs
    ag_on = np.where(np.asarray(g.tp_comm_overlap_ag, dtype=bool), 1.0, 0.0)
    rs_on = np.where(np.asarray(g.tp_comm_overlap_rs, dtype=bool), 1.0, 0.0)
    fwd, dgrad = ag_on * a * (t - 1.0) + rs_on * r * (UB_PIPELINE_SPLITS - 1.0), ag_on * r * (t - 1.0)
    layers = comp["layers_per_stage"]
    per = d0 / (T + d0)
    return np.asarray(comp["gemm_per_layer"] * per * ((layers + rec) * fwd + layers * dgrad), dtype=float)


def userbuffers_on(job: Job, g: StrategyGrid) -> np.ndarray:
    """Whether the stage's layers run their TP collectives as Transformer Engine userbuffers (docs/model.md#ub-off):
    ``tp_comm_overlap`` with sequence parallelism at tp > 1, on Transformer Engine's linears, and not an MLA model.
    Userbuffers is a Transformer Engine module option (TE@c55e425ac5 pytorch/module/base.py ``initialize_ub``, CUDA
    IPC buffers and the ``CommOverlap`` C++ classes): a program XLA compiles (a TPU's, an XLA layer's, or one under
    XLA's GPU scheduler, ``xla_gpu_lhs``: :func:`~scalemodel.engine.layer_compute.xla_remat`) has its partitioner
    place its TP collectives (:func:`_xla_partitioned`) and its remat drop the recomputed down-projection's, and
    nanotron's linears run their own (:func:`nanotron_tp_time`), so none runs them; there the flag prices nothing, the
    step is the one without it (ubmoe36, docs/model.md#ub-xla: a TPU v5e's Mixtral at tp 8 priced its layers as
    userbuffers linears, each collective under its own TE linear's GEMMs, and so exposed more than XLA's plain
    schedule, which hides the backward's collectives beside every weight-gradient GEMM, the routed experts' too; under
    ``xla_gpu_lhs`` with full recompute the userbuffers path re-ran the reduce-scatter XLA's remat drops).
    Megatron-Core's TELinear
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/extensions/transformer_engine.py L1176-1186, since 4e6ae3a2d2,
    2025-04-24) writes ``self.config.tp_comm_overlap = False`` on the TransformerConfig every module shares when its
    ``tp_comm_buffer_name`` is none of qkv / proj / fc1 / fc2; MLA's first such linear (q_proj or q_down_proj,
    multi_latent_attention.py L510-546) is built right after the first layer's linear_proj (L230, in
    ``MultiLatentAttention.__init__`` before ``MLASelfAttention``'s), so every later linear is built without
    userbuffers. Before 4e6ae3a2d2 MLA's linears had no buffer name and TELinear asserted one under the overlap
    (4e6ae3a2d2^ transformer_engine.py: "Buffer name should be set to configure communication overlap settings"): no
    Megatron-Core release builds an MLA model with userbuffers beyond that one linear_proj, which is priced without
    them too (one reduce-scatter and its data-gradient all-gather per model chunk)."""
    return np.asarray((g.tp > 1) & g.tp_comm_overlap & g.sequence_parallel & ~xla_remat(job, g)
                      & ~np.asarray(g.nanotron_trainer, dtype=bool) & ~np.asarray(job.shape.mla, dtype=bool),
                      dtype=bool)


def _sp_backward_pool(job: Job, g: StrategyGrid, coll: dict[str, np.ndarray], traffic: Any, count: Any,
                      att_blocks: Any) -> tuple[np.ndarray, np.ndarray]:
    """The backward's mirror of a forward's TP traffic ``traffic`` (``count`` block collectives, ``att_blocks``
    attention blocks' MLA gathers) without userbuffers: (exposed gathers, the pool for the weight-gradient window).
    With sequence parallelism each forward reduce-scatter of the count (a row-parallel linear's output) is an
    all-gather of the output gradient in the backward, issued and waited on before any GEMM of that linear's
    backward (Transformer Engine grad_output_preprocess, Megatron-Core _ReduceScatterToSequenceParallelRegion
    .backward): exposed, at ``tp_grad_ag`` (docs/model.md#sp-grad-gather). The rest, the reduce-scatters of the
    column-parallel linears' input gradients, goes to the pool at the activations' dtype: the forward's gathers
    (``tp_fwd_ag``, MLA's ``tp_att``, at the quantized dtype) give way to their mirrors (the count's ``tp_rs`` already
    in ``traffic``, MLA's ``tp_att_grad_rs``: review32d). Not for nanotron's linears (nanotron_tp_time), nor on a TPU
    or an XLA layer (_xla_partitioned). MLA's plain gathers' mirrors (the RoPE key's reduce-scatter, the column
    build's latents' gathers: Megatron's autograd collectives, blocking on the compute stream, ``tp_att_plain``) are
    exposed too (tp33)::

        exposed = count AG(q_g) + att_blocks P
        pool    = traffic - count AG(q) + att_blocks (RS_att(eb) - AG_att(q) - P)"""
    blocking = np.where(g.sequence_parallel & (g.tp > 1) & ~np.asarray(g.nanotron_trainer, dtype=bool)
                        & ~_xla_partitioned(job, g), count, 0.0)
    mla_blocks = np.where(g.sequence_parallel & (g.tp > 1), att_blocks, 0.0)
    mla = mla_blocks * (coll.get("tp_att_grad_rs", 0.0) - coll.get("tp_att", 0.0))
    plain = mla_blocks * coll.get("tp_att_plain", 0.0)
    return (np.asarray(blocking * coll.get("tp_grad_ag", 0.0) + plain),
            np.asarray(traffic - blocking * coll.get("tp_fwd_ag", 0.0) + mla - plain))


def _mtp_plain_tp(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], coll: dict[str, np.ndarray],
                  traffic: Any, gathers: Any, att_blocks: Any) -> dict[str, np.ndarray]:
    """Exposed and hidden TP seconds per micro-batch of the MTP blocks under ``tp_comm_overlap`` (docs/model.md#ub-off):
    plain NCCL, as without the overlap. Megatron-Core builds each MTP layer after the decoder (gpt_model.py L233 /
    L245 at NVIDIA/Megatron-LM@d98e8a64dd) and its block after eh_proj, whose ``tp_comm_buffer_name`` "mtp_eh_proj"
    (multi_token_prediction.py L1174-1184, since 9d71cb1cd2, 2026-02-04) makes TELinear switch the shared config's
    tp_comm_overlap off (extensions/transformer_engine.py L1176-1186); before 9d71cb1cd2 eh_proj had no buffer name
    and TELinear asserted one under the overlap (9d71cb1cd2^ transformer_engine.py L572-575), so no release runs
    an MTP block with userbuffers. ``traffic``: the blocks' forward TP seconds, ``gathers`` / ``att_blocks`` their
    re-gathers (:func:`sp_regather`); G = the blocks' column-parallel linears' forward GEMM time (``mtp_gemm`` at the
    block's AG-side share, :func:`_input_grad_windows`) = their weight-gradient GEMMs', the window of their
    input-gradient reduce-scatters (tp33; before, all of ``mtp_gemm``; tp34: each under its own linear's)::

        exposed = traffic (1 + [recomputed]) + B + max(P - G, 0) + regather exposed,
        hidden  = min(P, G) + regather hidden

    (the forward's exposed; the backward's output-gradient gathers B exposed and its reduce-scatters P under the
    blocks' weight-gradient GEMMs, :func:`_sp_backward_pool`, as :func:`_model_parallel_comm` prices the layers
    without the overlap (before review32d the gathers pooled under G too); the re-gathers under the blocks' own
    data-gradient GEMMs)."""
    blocks_only = {**comp, "layers_per_stage": np.zeros(1)}
    rg = sp_regather(job, g, blocks_only, coll)
    rec = np.where(mtp_module_recomputed(g), 1.0, 0.0)
    grad_ag = _sp_backward_pool(job, g, coll, traffic, gathers, att_blocks)[0]
    # each column-parallel linear's input-gradient reduce-scatter under its own weight-gradient GEMM (tp33, tp34)
    _, own, hid = _input_grad_windows(job, g, comp, coll, layers=np.zeros(1))
    return {"exposed": traffic * (1.0 + rec) + grad_ag + own + rg["exposed"], "hidden": hid + rg["hidden"]}


def _input_grad_windows(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], coll: dict[str, np.ndarray],
                        layers: Any = None, mtp: Any = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_own_windows` of the column-parallel linears' input-gradient collectives in the backward: the
    reduce-scatter (sequence parallelism) or all-reduce of the activation, ``coll['tp']`` less the forward's
    all-gather, each under its own linear's weight-gradient GEMM (tp33, tp34); an attention block's MLA mirrors
    (``tp_att_grad_rs``) less its plain gathers' (``tp_att_plain``, exposed: :func:`_sp_backward_pool`) with it,
    MLA's gathers as they are without sequence parallelism."""
    sp = g.sequence_parallel & (g.tp > 1)
    extra = np.where(sp, coll.get("tp_att_grad_rs", 0.0) - coll.get("tp_att_plain", 0.0), coll.get("tp_att", 0.0))
    return _own_windows(job, g, comp, coll["tp"] - coll.get("tp_fwd_ag", 0.0), 0, extra, layers=layers, mtp=mtp,
                        mla=coll.get("tp_mla_rs"))


def _model_parallel_comm(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray],
                         coll: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """Exposed TP, CP, EP and PP communication seconds per micro-batch on the busiest stage, and the
    forward and backward compute already busy hiding TP and CP traffic (``hidden_fwd``,
    ``hidden_bwd``), which no other traffic can hide under again. ``coll``: :func:`_mp_collectives`
    (None for a model that is not a transformer: no model-parallel traffic)."""
    zero = np.zeros(1)
    if not job.is_transformer or coll is None:
        return {"tp": zero, "cp": zero, "ep": zero, "pp": zero, "amax": zero, "hidden_fwd": zero, "hidden_bwd": zero,
                "hidden_ep": zero}
    sh = job.shape
    tokens = _tokens_per_microbatch(job, g)
    # the stage's layers, and each MTP pass's block once by kind (mtp_compute): TP as layers, CP as attention layers,
    # EP as MoE layers; full recompute repeats the blocks (Megatron-Core checkpoints every module under 'full', but
    # not under recompute_method block with a count: mtp_module_recomputed)
    n = comp["layers_per_stage"]
    mtp_tp = comp.get("mtp_blocks", 0.0)
    mtp_again = np.where(mtp_module_recomputed(g), 1.0, 0.0)
    L = n + mtp_tp
    # TP: all-reduce, or reduce-scatter + all-gather of the same buffer with sequence parallelism.
    per = coll["tp"]
    per_pass = float(transformer.tp_allreduces_per_layer(sh))
    rec_n = np.where(g.recompute == Recompute.FULL, comp["recomputed_layers"] + mtp_again * mtp_tp, 0.0)
    # an MoE block's own TP collectives (docs/model.md#tp-comm-moe): with SP, ``adj`` block collectives per MoE block
    # leave the layers' count (-1 without shared experts or with theirs off userbuffers), ``ext`` seconds per pass run
    # exposed (the dispatcher's expert-TP all-gather / reduce-scatter; the shared experts' pair under
    # moe_shared_expert_overlap)
    adj, ext, _ = _moe_tp_collectives(job, g, coll)
    moe_f = comp["layers_per_stage"] * float(sh.moe_layers / sh.layers) + comp.get("mtp_moe_blocks", 0.0)
    moe_r = np.where(g.recompute == Recompute.FULL,
                     comp["recomputed_layers"] * float(sh.moe_layers / sh.layers)
                     + mtp_again * comp.get("mtp_moe_blocks", 0.0),
                     0.0)
    pool_f = (L * per_pass + adj * moe_f) * per  # one pass's collectives in the layers' count
    pool_r = (rec_n * per_pass + adj * moe_r) * per
    # each attention block's gathers beyond the h-wide one (MLA's, coll['tp_att']): the stage's attention layers and
    # each MTP pass's attention block, again where full recompute repeats them
    att_share = float(sh.attention_layers / sh.layers)
    mtp_att_blocks = comp.get("mtp_attention_blocks", 0.0)
    pool_f = pool_f + (n * att_share + mtp_att_blocks) * coll.get("tp_att", 0.0)
    pool_r = pool_r + np.where(g.recompute == Recompute.FULL,
                               comp["recomputed_layers"] * att_share + mtp_again * mtp_att_blocks,
                               0.0) * coll.get("tp_att", 0.0)
    moe_ext = ext * (2.0 * moe_f + moe_r)  # forward, backward, recomputed forward
    # XLA's remat skips the MLP down-projection and so its trailing collective (xla_remat)
    tp_fwd = pool_f + pool_r - np.where(xla_remat(job, g), rec_n * coll["tp_last"], 0.0)
    # backward: under the weight-gradient GEMMs with Megatron's async all-reduce, else after them (exposed); with
    # sequence parallelism Megatron launches the reduce-scatter async_op=True before the wgrad GEMM whatever the
    # all-reduce flag (LinearWithGradAccumulationAndAsyncCommunication.backward, core_r0.5.0
    # megatron/core/tensor_parallel/layers.py; validate_args turns the flag off with SP): always under it
    # the window is each column-parallel linear's own weight-gradient GEMM (_input_grad_windows, tp33: the collective
    # is waited on before that linear's backward returns); an XLA partitioner schedules its collectives beside any GEMM
    # (tp34: each its own linear's, not the side's pool)
    async_on, xla = g.tp_async_allreduce | g.sequence_parallel, _xla_partitioned(job, g)
    # with sequence parallelism the row-parallel linears' output-gradient gathers exposed, the rest of the mirror under
    # the weight-gradient GEMMs (_sp_backward_pool; docs/model.md#sp-grad-gather); not under userbuffers (below)
    grad_ag, under = _sp_backward_pool(job, g, coll, pool_f, L * per_pass + adj * moe_f,
                                       n * att_share + mtp_att_blocks)
    # MaxText's einsum dispatch at tp > 1: each MoE block's backward all-reduces its combine mask's gradient over the
    # tensor axis (coll['moe_mask_ar'], 0 elsewhere), one more collective of the backward's pool, which the XLA
    # partitioner schedules beside the weight-gradient GEMMs as it does the layers' own (below)
    under = under + moe_f * coll.get("moe_mask_ar", 0.0)
    # the later XLA partitioner's head-side gathers (jaxlib 0.4.29 on) join the pool XLA schedules beside the
    # weight-gradient compute; the norm output they spare is no longer re-gathered (_xla_head_side_gathers)
    xla_head, xla_spared = _xla_head_side_gathers(job, g, comp, coll, n * att_share + mtp_att_blocks)
    under = under + xla_head
    own_c, _, own_h = _input_grad_windows(job, g, comp, coll)
    # a parallel block under a framework's linears (GPT-NeoX gpt_j_residual, docs/model.md#tp34-parallel): each of
    # QKV and FC1 gathers its own input (with SP: one all-gather more a pass than the count's one) and reduces its own
    # input gradient in the backward (two a layer against the count's one), blocking: none is hidden
    pb = np.asarray(sh.parallel_block, dtype=bool) & ~xla & (g.tp > 1) & (float(sh.moe_experts) == 0)
    bwd_hidden = np.where(async_on & ~pb, np.minimum(under, np.where(xla, comp["wgrad"], own_h)), 0.0)
    tp_bwd = grad_ag + np.where(pb, own_c, under) - bwd_hidden
    tp_fwd = tp_fwd + np.where(pb, (L + rec_n) * coll.get("tp_fwd_ag", 0.0), 0.0)
    # selective recompute of mlp: each dense MLP block's checkpointed forward runs its TP collective(s) again in the
    # backward (the all-reduce after linear_fc2, or with SP the all-gather before linear_fc1 and the reduce-scatter
    # after linear_fc2: one block's forward traffic, ``per``), exposed like the forward's; under tp_comm_overlap too
    # (its userbuffers overlap of the recomputed MLP GEMMs is not modelled: an upper bound)
    mlp_rec = np.zeros(1)
    if np.any(transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).mlp):
        mtp_dense = (comp.get("mtp_blocks", 0.0) - comp.get("mtp_moe_blocks", 0.0)
                     - (comp.get("mtp_attention_blocks", 0.0) if sh.hybrid is not None else 0.0))
        mlp_rec = np.where(transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).mlp,
                           n * float(sh.mlp_layers / sh.layers) + mtp_dense, 0.0) * per
    # selective recompute of shared_experts or moe: an MoE layer's checkpointed forward runs its TP collective(s)
    # again in the backward (moe_layer.py ``shared_experts_compute`` checkpoints ``self.shared_experts``, whose
    # linear_fc1 (column-parallel: all-gather with SP) and linear_fc2 (row-parallel: reduce-scatter with SP, else the
    # all-reduce) run inside it; moe's checkpoint re-runs the whole block, the shared experts' and the dispatcher's
    # collectives with it): the model's one block collective per MoE layer (and MoE MTP block) once per repeat,
    # exposed as the mlp's above (_moe_tp_recompute)
    moe_rec = _moe_tp_recompute(job, g, comp, coll)
    # JAX remat policies (jax_dots, jax_qkvo, jax_qkv): the TP collectives their backward runs again, exposed as the
    # mlp's above (_jax_remat_tp_recompute)
    jax_rec = _jax_remat_tp_recompute(job, g, comp, coll) - xla_spared
    # selective recompute of mla_up_proj: the up-projections' input gathers again in the backward (sequence
    # parallelism; transformer.mla_up_proj_gathers), exposed as the mlp's above
    up_rec = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules).mla_up_proj
    mla_rec = np.where(up_rec & g.sequence_parallel & (g.tp > 1),
                       (n * att_share + mtp_att_blocks) * coll.get("tp_mla_up", 0.0), 0.0)
    mlp_rec = mlp_rec + moe_rec + moe_ext + mla_rec + jax_rec
    # the backward's re-gathers of the column-parallel linears' saved input shards under their data-gradient GEMMs
    # (sequence parallelism; sp_regather): one per forward all-gather of pool_f
    rg = sp_regather(job, g, comp, coll)
    tp = np.where(g.tp > 1, tp_fwd + tp_bwd + mlp_rec + rg["exposed"], 0.0)
    tp_hidden = np.where(g.tp > 1, bwd_hidden + rg["hidden"], 0.0)
    tp_hidden_fwd = chunking = hidden_ub = ub_sms = np.zeros(1)
    ub = userbuffers_on(job, g)
    if np.any(ub):  # userbuffers: the layers' TP collectives under the GEMMs beside them (_tp_comm_overlap); the MTP
        # blocks' plain NCCL (_mtp_plain_tp: Megatron builds them without userbuffers), at their own block's GEMMs
        mtp_moe = comp.get("mtp_moe_blocks", 0.0)
        mtp_gathers = mtp_tp * per_pass + adj * mtp_moe
        mtp_f = mtp_gathers * per + mtp_att_blocks * coll.get("tp_att", 0.0)
        rec_ub = np.where(g.recompute == Recompute.FULL, comp["recomputed_layers"], 0.0)
        rg_l = sp_regather(job, g, comp, coll, mtp=0.0)
        mtp_nccl = _mtp_plain_tp(job, g, comp, coll, mtp_f, mtp_gathers, mtp_att_blocks)
        # the backward, each overlap inside its own linear's backward (tp33): the row-parallel linears' output-gradient
        # gathers (ring exchange) beside their data-gradient GEMMs (the RS side), the column-parallel linears'
        # input-gradient reduce-scatters (bulk) beside their weight-gradient GEMMs and their input re-gathers (bulk,
        # sp_regather) beside their data-gradient GEMMs (the AG side)
        layers_f = pool_f - mtp_f
        grad_ag_l = (n * per_pass + adj * (moe_f - mtp_moe)) * coll.get("tp_fwd_ag", 0.0)
        shared_off = g.moe_shared_expert_overlap
        # the forward and the recomputed forward likewise (tp33): the ring-exchange all-gathers beside the
        # column-parallel linears' GEMMs, the pipelined reduce-scatters beside the row-parallel ones'
        layers_r = pool_r - mtp_again * mtp_f
        ag_share = coll.get("tp_fwd_ag", 0.0) / np.maximum(per, 1e-300)
        # the chunked overlaps' edge (review33b): a ring exchange's last GEMM chunk (1 / tp) runs after its last
        # receive, a pipeline's first (1 / 4) before its first reduce-scatter: neither has traffic beside it
        ring_w, pipe_w = 1.0 - 1.0 / np.maximum(g.tp, 1.0), 1.0 - 1.0 / UB_PIPELINE_SPLITS
        # each part's window is what its linears hide, each beside its own GEMM (_own_windows, tp34): the hidden
        # seconds, so that _tp_comm_overlap's max(C - W, f C) is the per-linear sum (each term >= f c_k)
        fwd_ag, fwd_rs = coll.get("tp_fwd_ag", 0.0), per - coll.get("tp_fwd_ag", 0.0)

        def hid(c: Any, side: int, layers: Any, edge: Any, floor: float = 0.0) -> np.ndarray:
            return _own_windows(job, g, comp, c, side, layers=layers, mtp=0.0, edge=edge, floor=floor)[2]

        pipe = 1.0 / UB_PIPELINE_SPLITS
        # tp_comm_overlap's parts (noflags40, docs/model.md#tp-comm-parts): a part switched off runs its collective with
        # NCCL instead (TE@c55e425ac5 layernorm_linear.py L216-227 / L423-428 / L596-612 / L655-668): the forward
        # gathers and reduce-scatters and the row-parallel output-gradient gathers blocking (window 0: exposed), the
        # bulk parts async beside the same GEMM as the userbuffers kernel (the same window, NCCL's SMs)
        ag_on, rs_on = (np.asarray(x, dtype=bool) for x in (g.tp_comm_overlap_ag, g.tp_comm_overlap_rs))
        bd_on, bw_on = (np.asarray(x, dtype=bool) for x in (g.tp_comm_bulk_dgrad, g.tp_comm_bulk_wgrad))
        ov = _tp_comm_overlap((layers_f * ag_share, layers_f * (1.0 - ag_share)),
                              (layers_r * ag_share, layers_r * (1.0 - ag_share)),
                              (grad_ag_l, layers_f - grad_ag_l, rg_l["total"]),
                              (np.where(ag_on, hid(fwd_ag, 0, n, ring_w), 0.0),
                               np.where(rs_on, hid(fwd_rs, 1, n, pipe_w, pipe), 0.0)),
                              (np.where(ag_on, hid(fwd_ag, 0, rec_ub, ring_w), 0.0),
                               np.where(rs_on, hid(fwd_rs, 1, rec_ub, pipe_w, pipe), 0.0)),
                              (np.where(ag_on, hid(fwd_ag, 1, n, ring_w), 0.0),
                               _input_grad_windows(job, g, comp, coll, n, 0.0)[2], rg_l["hidden"]))
        h_ring, h_rs, h_rg = ov["hidden_bwd_parts"]
        ring_fwd = ov["hidden_fwd_parts"][0] + ov["hidden_rec_parts"][0]
        # the bulk parts switched off: NCCL's asynchronous collectives, hidden at the collective share (contention)
        h_rs_ub, h_rg_ub = np.where(bw_on, h_rs, 0.0), np.where(bd_on, h_rg, 0.0)
        tp = np.where(ub, ov["exposed"] + mtp_nccl["exposed"] + mlp_rec, tp)
        tp_hidden_fwd = np.where(ub, ov["hidden_fwd"], 0.0)
        tp_hidden = np.where(ub, ov["hidden_bwd"] + mtp_nccl["hidden"], tp_hidden)
        chunking = np.where(ub, _tp_chunking(job, g, comp, tokens), 0.0)
        # on userbuffers' SMs (contention): all the hidden forward traffic is userbuffers' (an NCCL forward part hides
        # nothing), the backward's less its NCCL bulk parts
        hidden_ub = np.where(ub, ov["hidden_fwd"] + ov["hidden_bwd"] - (h_rs - h_rs_ub) - (h_rg - h_rg_ub), 0.0)
        ub_sms = np.where(ub, userbuffers_sm_time(job.compute_units, job.collective_share > 0.0, 0.0, 0.0,
                                                  np.where(rs_on, _ub_gemm(sh, comp, 1, n + rec_ub, 0.0,
                                                                           shared_off=shared_off), 0.0),
                                                  h_rs_ub + h_rg_ub, ring=h_ring + ring_fwd),
                          0.0)
    # nanotron's own linears (nanotron_tp_time, docs/model.md#nanotron): a dense Llama's layers only (nanotron's
    # LlamaModel has no MoE, hybrid or MTP blocks; those keep the pricing above)
    nt = np.asarray(g.nanotron_trainer, dtype=bool) & (g.tp > 1)
    if (np.any(nt) and float(sh.moe_experts) == 0 and sh.hybrid is None
            and not np.any(np.asarray(comp.get("mtp_blocks", 0.0)) > 0)):
        s_qkv, s_up, s_o, s_down = _nanotron_linear_shares(sh)
        gemm = comp["gemm_per_layer"]
        rs = coll["tp_last"]
        ntp = nanotron_tp_time(coll["tp"] - rs, rs, coll["tp"], (s_qkv * gemm, s_up * gemm),
                               (s_o * gemm, s_down * gemm), g.tp, g.sequence_parallel)
        # a recomputed layer (recompute_layer: CheckpointFunction over the whole layer) runs its forward's again
        tp = np.where(nt, (n + rec_n) * ntp["fwd"] + n * ntp["bwd"] + mlp_rec, tp)
        tp_hidden_fwd = np.where(nt, n * ntp["hidden_fwd"], tp_hidden_fwd)
        tp_hidden = np.where(nt, rec_n * ntp["hidden_fwd"] + n * ntp["hidden_bwd"], tp_hidden)
        hidden_ub = np.where(nt, 0.0, hidden_ub)
        ub_sms = np.where(nt, 0.0, ub_sms)
    # tp 1, etp > 1: the dispatcher's expert-TP pair, outside the attention TP group (_moe_tp_collectives)
    tp = tp + np.where(g.tp == 1, moe_ext + moe_rec, 0.0)
    # the word embedding's output reduction on the stages that embed (embedding_tp_collective), exposed
    tp = tp + comp.get("embedding_uses", 0.0) * coll.get("tp_embed", 0.0)
    # the output layer's TP collectives and the vocab-parallel cross-entropy's on the stage with the logits, once per
    # head (the main one and each MTP module's): output_layer_tp_collective, cross_entropy_tp_collective
    heads = comp.get("head_uses", 0.0)
    if np.any(np.asarray(heads) > 0) and "tp_ag" in coll:
        head = output_layer_tp_collective(job, g, coll["tp_ar"], coll["tp_rs"], coll["tp_ag"], comp["head_gemm"],
                                          deferred_head_share(job, g))
        tp = tp + heads * (head["exposed"] + coll["tp_loss"])
        tp_hidden_fwd = tp_hidden_fwd + heads * head["hidden_fwd"]
        tp_hidden = tp_hidden + heads * head["hidden_bwd"]
    # CP: ring attention, K and V chunks pass round the cp ring (a2a+p2p: the n_p = cp / cp_a2a_size ranks of its
    # ring level; a2a: none); hidden under the attention core (_cp_ring_overlap).
    cp = cp_hidden = cp_hidden_bwd = np.zeros(1)  # cp 1 on every row: no CP traffic (np.where(g.cp > 1, ..., 0.0))
    if np.any(g.cp > 1):
        n_p = compute.cp_levels(g.cp, g.cp_comm_type, g.cp_a2a_size)[1]
        # in the attention layers only (all but in a hybrid pattern; its Mamba layers' context-parallel all-to-alls
        # are not modelled)
        att = float(sh.attention_layers / sh.layers)
        mtp_att = comp.get("mtp_attention_blocks", 0.0)
        att_n = n * att + mtp_att
        core_att = comp["core_per_layer"] / max(att, 1e-300)
        ring_f, ring_b = _cp_ring_overlap(n_p, coll["cp"], coll["cp_kv_dkv"], core_att)
        cp = np.where(g.cp > 1, att_n * (ring_f[0] + ring_b[0]), 0.0)
        cp_hidden = np.where(g.cp > 1, att_n * ring_f[1], 0.0)
        cp_hidden_bwd = np.where(g.cp > 1, att_n * ring_b[1], 0.0)
        if np.any(g.cp_comm_type != CpCommType.P2P):  # all_gather / a2a: blocking collectives, exposed (_cp_exposed)
            exposed = _cp_exposed(job, g, comp, coll, att_n, comp["recomputed_layers"] * att + mtp_again * mtp_att)
            ag = (g.cp > 1) & (g.cp_comm_type == CpCommType.ALL_GATHER)
            cp = np.where(ag, exposed, np.where((g.cp > 1) & (g.cp_comm_type != CpCommType.P2P), cp + exposed, cp))
            cp_hidden = np.where(ag, 0.0, cp_hidden)
            cp_hidden_bwd = np.where(ag, 0.0, cp_hidden_bwd)
    # EP: dispatch + combine all-to-all per MoE layer (the stage's layers at the MoE share, and each MTP pass's MoE
    # block once), forward and backward; a recomputed forward runs the forward's two again in the backward
    # (MoELayer.forward dispatches and combines inside the checkpointed function): every MoE layer under selective
    # recompute of moe, the recomputed layers' MoE share and every MTP block under full recompute (XLA's remat: the
    # dispatch only, the combine feeds only the residual sum, as the TP collective after the down-projection)
    moe_share = float(sh.moe_layers / sh.layers)
    mtp_moe = comp.get("mtp_moe_blocks", 0.0)
    full = g.recompute == Recompute.FULL
    # the allgather dispatcher gathers over etp x ep: at ep 1 too when etp > 1 (docs/model.md#ep-allgather)
    gathers = (g.ep > 1) | (np.asarray(g.moe_allgather_dispatcher, dtype=bool) & (_etp(g) > 1))
    # no row gathers (ep 1, no expert-TP gather): no EP traffic, as np.where(gathers, ..., 0.0) gives, and neither
    # overlap below applies (both need ep > 1)
    ep, ep_on = np.zeros(1), bool(np.any(gathers))
    if ep_on:
        moe_recomputed = moe_block_recomputed(job, g)
        again_moe = np.where(moe_recomputed, 1.0, 0.0)
        again_full = np.where(full, np.where(xla_remat(job, g), 1.0, 2.0), 0.0)
        rec_moe = np.where(full, comp["recomputed_layers"] * moe_share + mtp_again * mtp_moe, 0.0)
        ep_moe = (n * moe_share + mtp_moe) * (4.0 + 2.0 * again_moe) + rec_moe * again_full
        # a recomputed forward's traffic beyond the 2 ops counted for it (HybridEP's routing-map gather runs whole
        # again, the allgather dispatcher's forward differs from its backward; coll['ep_refwd'], 0 for the all-to-alls)
        refwds = (n * moe_share + mtp_moe) * again_moe + rec_moe
        ep = np.where(gathers, ep_moe * ep_op_mean(coll) + refwds * coll.get("ep_refwd", 0.0), 0.0)
    # PP: activations forward, gradients backward, v times per micro-batch with interleaving.
    p2p = coll["pp"]
    v = np.where(g.schedule == ScheduleKind.INTERLEAVED, g.virtual_stages, 1).astype(float)
    # legacy Megatron-LM's scatter/gather: each receive all-gathers the split tensor over TP (pp_split)
    sg = np.where(pp_split(g), coll["pp_gather"], 0.0)
    # nanotron: the activation and its gradient one after the other, with its metadata messages and the sequence mask
    # (nanotron_p2p_extra_time), on each boundary the rank exchanges on (pp_exchanges)
    n_x = pp_exchanges(g)
    nano = n_x * (2.0 * p2p + coll.get("pp_meta", 0.0))
    # Megatron's 1F1B: one batched exchange (activation out, gradient in, both ways at once) per boundary the rank
    # exchanges on; interleaved (a ring of chunks: both neighbours at any pp), GPipe and ZB-H1 two per micro-batch
    onef1b = g.schedule == ScheduleKind.ONE_F_ONE_B
    exchanges = np.where(onef1b, n_x, 2.0 * v)
    ds, nt = np.asarray(g.deepspeed_pipeline, dtype=bool), np.asarray(g.nanotron_trainer, dtype=bool)
    pp = np.where(g.pp > 1, np.where(ds, deepspeed_pipe_comm(g, p2p, coll["pp_gather"]),
                                     np.where(nt, nano, exchanges * (p2p + sg))), 0.0)
    # the pipeline's first and last rank exchange on one boundary: what a middle rank pays on its second (pp > 2),
    # taken off the end ranks' time by the non-interleaved pipeline formulas (step._end_rank); DeepSpeed's end ranks
    # also skip some of the priced stage's TP all-gathers, the first rank one, the last two (deepspeed_pipe_edges)
    boundary = np.where(nt, 2.0 * p2p + coll.get("pp_meta", 0.0), p2p + sg)
    edge = np.where((g.pp > 1) & onef1b, np.maximum(n_x - 1.0, 0.0) * boundary, 0.0)
    ds_first, ds_last = deepspeed_pipe_edges(g, p2p, coll["pp_gather"])
    edge_first, edge = np.where(ds, ds_first, edge), np.where(ds, ds_last, edge)
    # delayed scaling's amax reductions: a forward and a backward one per model chunk (delayed_amax_time), exposed
    amax = v * coll.get("amax", 0.0)
    # current scaling's / NVFP4's per-linear TP amax all-reduces (tp_amax_time): each layer's forward and backward, a
    # fully recomputed layer's forward again
    rec_amax = np.where(g.recompute == Recompute.FULL, comp["recomputed_layers"], 0.0)
    amax = amax + (n + rec_amax) * coll.get("tp_amax_fwd", 0.0) + n * coll.get("tp_amax_bwd", 0.0)
    out = {"tp": tp, "cp": cp, "ep": ep, "pp": pp, "pp_edge": edge, "pp_edge_first": edge_first, "amax": amax,
           "hidden_fwd": cp_hidden + tp_hidden_fwd, "hidden_bwd": tp_hidden + cp_hidden_bwd, "chunking": chunking,
           "hidden_ep": np.zeros(1), "hidden_ub": hidden_ub, "ub_sms": ub_sms,
           # the hidden TP traffic that is an NVLS all-reduce (without sequence parallelism every hidden TP
           # collective is an all-reduce: the async backward one, the output layer's): on the NVLS channels
           "hidden_nvls": coll.get("tp_nvls", 0.0) * np.where(g.tp > 1, tp_hidden_fwd + tp_hidden, 0.0)}
    if ep_on:
        # the stage's MoE blocks per micro-batch (each pass runs its dispatch and combine once), and the forward passes
        # recomputed in the backward: the shared experts beside their all-to-alls (moe_shared_expert_overlap)
        blocks = n * moe_share + mtp_moe
        # beside the shared experts: the tokens' all-to-all and the probabilities' with the dispatch; the counts' gather
        # precedes the shared stream's fork
        probs, counts = coll.get("ep_probs", 0.0), coll.get("ep_counts", 0.0)
        out = _with_shared_expert_overlap(job, g, out, coll["ep_tokens"], blocks, blocks * again_moe + rec_moe, comp,
                                          probs)
        # the counts' gathers in ep (a quarter of each op's mean, half of each recomputed forward's beyond its 2): never
        # hidden by the EP overlap, which runs them in the compute stream's attention node
        counts_total = np.where(gathers, (0.25 * ep_moe + 0.5 * refwds) * counts, 0.0)
        out = _with_moe_a2a_overlap(g, comp, out, refused=moe_recomputed, fixed=counts_total)
    return pp_overlap(g, comp, out, p2p, v)


def pp_overlap(g: StrategyGrid, comp: dict[str, np.ndarray], mp: dict[str, np.ndarray], p2p: Any,
               v: np.ndarray) -> dict[str, np.ndarray]:
    """The interleaved pipeline's sends and receives hidden in its steady phase (``overlap_p2p_comm``,
    docs/model.md#pp-comm-overlap).

    Megatron-Core --overlap-p2p-communication (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/
    schedules.py ``forward_backward_pipelining_with_interleaving``): in the steady 1F1B phase each forward chunk
    posts its ``send_forward_recv_forward`` with ``overlap_p2p_comm=True`` and the next forward waits for it
    (``pp_pre_forward`` / ``pp_post_forward``, lines 1747-1800), the backward chunk between them running
    meanwhile; each backward chunk's ``send_backward_recv_backward`` likewise under the next forward chunk. The
    warm-up and cool-down exchanges are blocking unless ``overlap_p2p_comm_warmup_flush`` (default False,
    model_parallel_config.py lines 422-428; lines 1633-1657 and 1971-2035). The step's critical path runs through the
    last pipeline rank (every rank does the same work; the last waits for the first micro-batch's forward through the
    p - 1 boundaries before it and is followed by the last one's backward through them): its warm-up of
    ``W = (v - 1) p`` chunk passes (lines 964-965, ``microbatch_group_size_per_vp_stage``'s default p), at most m v,
    and as many cool-down ones exchange blocking, its m v - W steady ones each hide the send under the opposite
    chunk. Rank 0's ``2 (p - 1)`` extra warm-up passes fall in its own bubble (p2p21 took rank 0's W, which priced
    2 (p - 1) transfers too many; review22p2p). A step-by-step simulation of the schedule over every rank
    (tests/test_pp_overlap.py) exposes 2 (p v - 1) transfers whatever m where every transfer is shorter than the
    chunk under it, as this does. The engine prices the pipelined part as (m + (p - 1)/v) micro-batch times, the
    bubble's share of this term included, so the hidden time is spread over them. Per micro-batch, p2p one boundary
    exchange:

        steady  = (m v - W) / (m + (p - 1) / v)              steady chunk passes per priced micro-batch (<= v)
        hid_f   = steady · min(p2p, (forward - hidden_fwd) / v)     gradient sends under a forward chunk
        hid_b   = [not send_wait] steady · min(p2p, (backward - hidden_bwd) / v)   activation sends under a backward
        t_pp    = 2 v p2p (+ the scatter/gather's all-gathers) - hid_f - hid_b

    ``send_wait`` (strategy ``overlap_p2p_send_wait``): Megatron-Core from 260cba7133 (2026-04-16, core_v0.18.0;
    d98e8a64dd lines 1813-1815) waits each steady forward send as soon as it is posted where
    ``deallocate_pipeline_outputs`` (Megatron-LM's argument_utils.py line 305, NeMo 2's GPTConfig and
    Megatron-Bridge's GPTModelProvider set it): the compute stream waits for the activation's transfer before the
    backward chunk, so the activation sends stay exposed; the gradient sends' wait still comes one chunk later. The
    simulation finds the form above it by at most p + 1 transfers a step (tests/test_pp_overlap.py).

    Never more hidden than a chunk's compute not already hiding TP/CP/EP traffic; the hidden time joins
    ``hidden_fwd`` / ``hidden_bwd`` (no compute hides two collectives; contention as other hidden traffic). On
    where ``overlap_p2p_comm`` is set, pp > 1 and the schedule is interleaved, outside ``deepspeed_pipeline`` and
    ``nanotron_trainer`` (their own send/recv pricing).

    Nothing hides beside the EP overlap (``moe_a2a_overlap`` with ep > 1, Megatron-Core's
    overlap_moe_expert_parallel_comm): each steady iteration is then the combined 1F1B (d98e8a64dd schedules.py
    lines 1485-1510, models/common/model_chunk_schedule_plan.py ``TransformerModelChunkSchedulePlan.run`` lines
    535-607; the same order at 0d8e0714cd, core_v0.16.0, 2d1fa8d372 and 9c5258f109), which waits both receives
    before the merged forward and backward and posts both exchanges after them: no compute lies between a
    transfer's post and its wait (the simulation exposes all but 3 transfers a step; review22c)."""
    combined = np.asarray(g.moe_a2a_overlap, dtype=bool) & (g.ep > 1)
    # Megatron-Core's interleaved exchanges only (mp['pp'] = 2 v p2p there): DeepSpeed's and nanotron's pipelines
    # price their own send/recv (nanotron's n_x (2 p2p + metadata), which the hidden 2 steady p2p could exceed)
    on = (np.asarray(g.overlap_p2p_comm, dtype=bool) & (g.pp > 1) & (g.schedule == ScheduleKind.INTERLEAVED)
          & ~np.asarray(g.deepspeed_pipeline, dtype=bool) & ~np.asarray(g.nanotron_trainer, dtype=bool) & ~combined)
    if not np.any(on):
        return mp
    m = np.asarray(microbatches(g), dtype=float)
    passes = m * v
    warm = np.minimum((v - 1.0) * g.pp, passes)  # the last rank's warm-up
    steady = (passes - warm) / np.maximum(m + (g.pp - 1.0) / v, 1.0)
    hid_f = steady * np.minimum(p2p, np.maximum(comp["forward"] - mp["hidden_fwd"], 0.0) / v)
    hid_b = np.where(np.asarray(g.overlap_p2p_send_wait, dtype=bool), 0.0,
                     steady * np.minimum(p2p, np.maximum(comp["backward"] - mp["hidden_bwd"], 0.0) / v))
    hid_f, hid_b = np.where(on, hid_f, 0.0), np.where(on, hid_b, 0.0)
    return dict(mp, pp=mp["pp"] - hid_f - hid_b, hidden_fwd=mp["hidden_fwd"] + hid_f,
                hidden_bwd=mp["hidden_bwd"] + hid_b)


def _with_shared_expert_overlap(job: Job, g: StrategyGrid, mp: dict[str, np.ndarray], a2a: Any, blocks: Any,
                                rec_passes: Any, comp: dict[str, np.ndarray] | None = None,
                                probs: Any = 0.0) -> dict[str, np.ndarray]:
    """EP all-to-alls hidden under the shared experts' compute (``moe_shared_expert_overlap``,
    docs/model.md#shared-expert-overlap).

    Megatron-Core --moe-shared-expert-overlap (NVIDIA/Megatron-LM@d98e8a64dd): ``SharedExpertMLP`` runs on a
    stream of its own (megatron/core/transformer/moe/shared_experts.py lines 107-109, 163-198) in four steps the
    token dispatcher calls (token_dispatcher.py): the alltoall dispatcher launches ``linear_fc1_forward_and_act``
    right after the dispatch all-to-all ("Make sure the shared experts fc1 is overlapped with dispatch A2A", lines
    697-717) and ``linear_fc2_forward`` right after the combine all-to-all (lines 858-873); the flex dispatcher
    (DeepEP / HybridEP) likewise after its dispatch (lines 1971-1979) and beside its combine (lines 2029-2051,
    the shared stream synchronised before the combine, fc2 launched after it). Autograd runs each op's backward on
    its forward's stream, and the dispatcher orders the backward so that the all-to-all is launched first
    ("Backward launch order: probs A2A -> tokens A2A -> shared experts fc1"). So per MoE block, a of the tokens'
    all-to-all (dispatch = combine here) and p of the alltoall dispatcher's probabilities' all-to-all that follows
    the dispatch's and precedes its backward (0 for the flex and allgather dispatchers;
    docs/model.md#ep-probs-counts):

        hidden forward  = blocks (min(a + p, fc1_f) + min(a, fc2_f))
        hidden backward = blocks (min(a, fc2_b) + min(a + p, fc1_b)) + rec (min(a + p, fc1_f) + min(a, fc2_f))
        exposed ep      = ep - hidden                          (never below 0: each term <= its all-to-alls)

    The alltoall dispatcher's counts all-gather stays exposed: ``preprocess`` runs it before the shared experts'
    stream forks (``pre_forward_comm``, ``wait_current_stream``: token_dispatcher.py lines 570-575, 658, 700) and
    the host waits on it before the dispatch.

    ``blocks`` the stage's MoE blocks per micro-batch, ``rec`` the forward passes recomputed in the backward
    (selective moe: every block; full: the recomputed layers' MoE share and the MTP blocks); fc1 / fc2 forward and
    backward as :func:`scalemodel.cost.compute.shared_expert_times` prices them. The hidden time is never more than
    the forward / backward compute not already hiding TP/CP traffic (``comp``'s forward - ``hidden_fwd``,
    backward - ``hidden_bwd``: no compute hides two collectives). The compute under them is taken from what DP
    traffic can hide (``hidden_fwd`` / ``hidden_bwd``) and slowed by the dispatcher's SMs (``hidden_ep``,
    ``contention``). Not modelled: the shared experts' own TP all-gather / reduce-scatter on their stream (priced
    as without the overlap: exposed, or under tp_comm_overlap under the GEMMs as userbuffers, which Megatron-Core
    turns off for the shared experts' linears under the overlap, shared_experts.py lines 163-175). Megatron-Core
    refuses it with overlap_moe_expert_parallel_comm and with selective recompute of shared_experts
    (job._check_shared_expert_overlap); for a planner grid holding such a candidate it is off there.

    ``moe_shared_expert_stream`` (docs/model.md#shared-expert-stream): NeMo Automodel's MoE.forward forks the whole
    shared MLP onto ``_shared_experts_stream`` after the gate, before the dispatch, and joins it after the combine
    (NVIDIA-NeMo/Automodel nemo_automodel/components/moe/layers.py @bb0c0bfb0 L615-629; @89e3a9fdd L911-923), so
    it runs beside the dispatch (the routed experts' GEMMs after it share the SMs, which hides no traffic) and,
    autograd running each op's backward on its forward's stream, its backward beside the combine's backward, the
    first all-to-all of the routed branch's backward::

        hidden forward  = blocks min(a + p, fc1_f + fc2_f)
        hidden backward = blocks min(a, fc1_b + fc2_b) + rec min(a + p, fc1_f + fc2_f)

    with the same caps. Its TP collectives are priced as without it (Automodel's MoE parallelizer runs tp 1)."""
    mcore = np.asarray(g.moe_shared_expert_overlap, dtype=bool)
    stream = np.asarray(g.moe_shared_expert_stream, dtype=bool) & ~mcore  # job refuses both; a grid keeps Megatron's
    on = (mcore | stream) & (g.ep > 1)
    if not job.is_transformer or not np.any(on) or float(job.shape.moe_shared_experts) <= 0:
        return mp
    on = on & ~np.asarray(g.moe_a2a_overlap, dtype=bool) & (stream | ~np.asarray(
        transformer.recomputed_modules(job.shape, g.recompute, g.recompute_modules).shared_experts, dtype=bool))
    f1, f2, b1, b2 = compute.shared_expert_times(
        job.shape, micro_batch=g.micro_batch.astype(float), seq_len=job.seq_len, tp=g.tp, cp=g.cp,
        peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
        gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency, elem_bytes=job.elem_bytes)
    a, p = np.asarray(a2a, dtype=float), np.asarray(probs, dtype=float)
    fwd = np.minimum(a + p, f1) + np.minimum(a, f2)
    bwd = np.minimum(a, b2) + np.minimum(a + p, b1)
    # Automodel's side stream (moe_shared_expert_stream): the whole shared MLP beside the dispatch in the forward
    # (and a recomputed forward), its backward beside the combine's backward; the probabilities' all-to-all is the
    # alltoall dispatcher's (0 under DeepEP), beside the forward's dispatch
    fwd = np.where(stream, np.minimum(a + p, f1 + f2), fwd)
    bwd = np.where(stream, np.minimum(a, b1 + b2), bwd)
    hid_f = np.where(on, blocks * fwd, 0.0)
    hid_b = np.where(on, blocks * bwd + rec_passes * fwd, 0.0)
    if comp is not None:  # only compute not already hiding TP/CP traffic
        hid_f = np.minimum(hid_f, np.maximum(comp["forward"] - mp["hidden_fwd"], 0.0))
        hid_b = np.minimum(hid_b, np.maximum(comp["backward"] - mp["hidden_bwd"], 0.0))
    hid_f = np.minimum(hid_f, mp["ep"])
    hid_b = np.minimum(hid_b, mp["ep"] - hid_f)
    return dict(mp, ep=mp["ep"] - hid_f - hid_b, hidden_fwd=mp["hidden_fwd"] + hid_f,
                hidden_bwd=mp["hidden_bwd"] + hid_b, hidden_ep=mp.get("hidden_ep", 0.0) + hid_f + hid_b)


def _moe_tp_collectives(job: Job, g: StrategyGrid,
                        coll: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An MoE block's tensor-parallel collectives per pass (docs/model.md#tp-comm-moe), as
    ``(adj, ext, block)``:

        sp = [tp > 1, sequence_parallel, MoE model, not a parallel block]
        d  = [etp > 1, sp or tp = 1, not flex] (AG + RS)(etp k b s w eb / (cp tp), etp ranks at stride 1)
        adj   = sp ([c > 0] [not shared_overlap] - 1)            block collectives, to the layers' count
        ext   = sp [c > 0] [shared_overlap] per + d                                                  seconds
        block = sp ([c > 0] per + d) + [tp = 1] d + (1 - sp) [tp > 1] per                            seconds

    The layers' count (:func:`scalemodel.cost.transformer.tp_allreduces_per_layer`) gives an MoE layer one block
    collective for its MLP, ``per`` (reduce-scatter + all-gather of b s h / cp with SP). NVIDIA/Megatron-LM@d98e8a64dd
    (core_v0.15.0 0d7e02bd26 the same) runs instead: the shared experts' pair, when there are shared experts
    (SharedExpertMLP is an MLP over the attention TP group, shared_experts.py lines 102-132: TE column-parallel
    fc1 all-gathers, row-parallel fc2 reduce-scatters, userbuffers as the dense MLP's); under
    ``moe_shared_expert_overlap`` the same pair with userbuffers and the linears' own comm switched off
    (lines 163-175), run as ``pre_forward_comm`` / ``post_forward_comm`` (lines 234-256, 340-356) on the shared
    experts' stream beside the dispatcher: outside the userbuffers overlap and the weight-gradient window, priced
    exposed (``ext``), Megatron's plain gather and reduce-scatter of the unquantized activation (``tp_rs`` +
    ``tp_ag``, not the TE linears' quantized pair ``per``: docs/model.md#sp-grad-gather). The routed experts' tokens
    cross the expert-TP group only when etp > 1
    (token_dispatcher.py line 86: the dispatcher's ``tp_group`` is ``expt_tp``): the alltoall dispatcher all-gathers
    the received tokens after the all-to-all (``dispatch_postprocess``, lines 741-751) and reduce-scatters them
    before the combine all-to-all (``combine_preprocess``, lines 824-834), plain autograd collectives on the compute
    stream (their backward the reduce-scatter / all-gather of the same buffer), never userbuffers: exposed, fwd and
    bwd. The flex dispatcher runs no expert-TP collective: it folds expert TP into its dispatch over the tp_ep group
    (lines 1831-1856, etp x k copies of each token), whose bytes the flex dispatch prices
    (docs/model.md#ep-hierarchical, :mod:`scalemodel.cost.ep_dispatch`), so ``d`` is 0 there. With etp 1
    the routed tokens meet no TP collective. With tp 1 and etp > 1 the pair runs too (the dispatcher's condition is
    ``self.tp_size > 1``, the expert-TP size), outside the attention TP group's term: :func:`_model_parallel_comm`
    adds it where tp is 1. Without SP Megatron-Core refuses MoE with tp > 1 in training
    (moe_layer.py lines 636-640): the one block all-reduce stays as before."""
    sh = job.shape
    zero = np.zeros(1)
    if int(sh.moe_experts) <= 0 or float(sh.moe_layers) <= 0 or bool(np.any(np.asarray(sh.parallel_block))):
        return zero, zero, np.asarray(coll["tp"])
    per = coll["tp"]
    sp = (g.tp > 1) & np.asarray(g.sequence_parallel, dtype=bool)
    shared = float(sh.moe_shared_experts) > 0
    off_ub = np.asarray(g.moe_shared_expert_overlap, dtype=bool) & shared
    # the pair off the TE linears (pre_forward_comm / post_forward_comm: Megatron's plain autograd gather and
    # reduce-scatter of the unquantized activation, whatever the run's fp8 recipe)
    plain = np.where(sp, coll.get("tp_rs", 0.0) + coll.get("tp_ag", 0.0), per) if np.any(off_ub) else per
    # the alltoall dispatcher's expert-TP pair: etp > 1 with SP, or with tp 1 (no SP to shard the tokens: each
    # rank's own); the flex dispatcher's etp copies are in its own dispatch bytes, not a TP collective
    # (the allgather dispatcher's gathers span etp x ep in its own term, ep: docs/model.md#ep-allgather)
    flex = np.asarray(g.moe_flex_dispatcher, dtype=bool) | np.asarray(g.moe_allgather_dispatcher, dtype=bool)
    disp = np.where((_etp(g) > 1) & (sp | (g.tp == 1)) & ~flex, coll.get("moe_disp", 0.0), 0.0)
    adj = np.where(sp, np.where(off_ub, 0.0, 1.0 if shared else 0.0) - 1.0, 0.0)
    ext = np.where(sp, np.where(off_ub, plain, 0.0), 0.0) + disp
    block = np.where(sp, np.where(off_ub, plain, per if shared else 0.0) + disp, np.where(g.tp == 1, disp, per))
    return np.asarray(adj), np.asarray(ext), np.asarray(block)


def _moe_tp_recompute(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray],
                      coll: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds per micro-batch on the busiest stage of the MoE blocks' TP collectives run again under selective
    recompute (docs/model.md#recompute-shared-experts, #recompute-moe, #tp-comm-moe), exposed:

        t = (n · moe_layers / L + MoE MTP blocks) · ([shared_experts] per + [moe] block)

    ``shared_experts`` (an MoE layer with shared experts): Megatron-Core runs ``self.shared_experts`` under
    ``tensor_parallel.checkpoint`` / ``te_checkpoint`` (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/moe/moe_layer.py lines 507-533 ``shared_experts_compute``); SharedExpertMLP is an MLP
    (shared_experts.py line 102) whose TE column-parallel ``linear_fc1`` all-gathers the sequence-parallel input and
    whose row-parallel ``linear_fc2`` reduce-scatters its output (all-reduces without SP), so the backward's
    re-run of the checkpoint repeats them: one block collective ``per``. ``moe``: the block's ``custom_forward``
    (lines 658-719) runs under the checkpoint, its shared experts and its dispatcher with it: the block's own TP
    collectives (:func:`_moe_tp_collectives` ``block``: the shared experts' pair if any, the dispatcher's expert-TP
    all-gather and reduce-scatter if etp > 1; nothing with etp 1 and no shared experts). Named together, both
    repeat (the shared experts' checkpoint runs again inside the recomputed block)."""
    sh = job.shape
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules)
    if not (np.any(again.shared_experts) or np.any(again.moe)):
        return np.zeros(1)
    block = _moe_tp_collectives(job, g, coll)[2]
    blocks = comp["layers_per_stage"] * float(sh.moe_layers / sh.layers) + comp.get("mtp_moe_blocks", 0.0)
    shared = np.where(again.shared_experts & (g.tp > 1), coll["tp"], 0.0)
    return np.asarray(blocks * (shared + np.where(again.moe, block, 0.0)))


def _jax_remat_tp_recompute(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray],
                            coll: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds per micro-batch on the busiest stage of the TP collectives a JAX remat policy's backward runs again
    (docs/model.md#jax-remat-tp, tpu31), exposed as the forward's:

        t = n (g_l AG [SP] + a_l [jax_qkv] (RS with SP, else AR))            (n: the stage's layers)

    ``g_l`` the column-parallel inputs a layer gathers: 2 in a sequential dense layer (the input norm's output before
    Q / K / V, the pre-MLP norm's before the up-projections), 1 in a parallel block (one shared norm output) and in
    an MoE layer (the attention's; the MoE block's own collectives are :func:`_moe_tp_recompute`'s under ``moe``);
    ``a_l`` the attention layers' share. Why: ``jax.checkpoint`` (jax-ml/jax ``jax/_src/ad_checkpoint.py``) keeps
    only the residuals its policy names and recomputes the rest in the backward; under ``jit`` the collectives are
    not in the jaxpr but inserted by XLA's SPMD partitioner on the program AD and remat produced, so a recomputed
    value carries its collective with it. MaxText shards the residual stream's embed dimension over 'tensor'
    (base.yml ``logical_axis_rules`` ``['activation_embed', 'tensor']``): a column-parallel matmul gathers its normed
    input, a row-parallel one reduce-scatters its output (the model's sequence-parallel pair). The policies keep
    matmul outputs (``checkpoint_dots_with_no_batch_dims``; or the names query_proj / key_proj / value_proj /
    out_proj), never a norm's output, which is no dot: the weight gradients of Q / K / V and of the up-projections
    read the gathered norm output, so the backward recomputes the norm and gathers it again (``jax_qkvo`` also
    re-runs the up-projections on it). ``jax_qkv`` recomputes out_proj, whose output rebuilds the residual sum (the
    pre-MLP norm's input): its reduce-scatter (all-reduce without SP) runs again. What none of them repeats: the
    down-projection's collective (its output feeds only the sum no backward reads; XLA drops it, as
    :func:`~scalemodel.engine.layer_compute.xla_remat` says of full recompute), the attention core's (local on the
    rank's heads). Full recompute repeats the forward's collectives in ``tp_fwd`` (less the down-projection's under
    XLA), one route per policy. Not priced: the norms' cross-'tensor' sum of squares (b s scalars a norm)."""
    sh = job.shape
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules)
    jax = again.jax_dots | again.jax_qkvo
    if not np.any(jax & (g.tp > 1)):
        return np.zeros(1)
    n = comp["layers_per_stage"]
    moe_share = float(sh.moe_layers / sh.layers)
    gathers = float(transformer.tp_allreduces_per_layer(sh)) * (1.0 - moe_share) + moe_share
    sp = np.asarray(g.sequence_parallel, dtype=bool)
    ag = np.where(sp, gathers * coll["tp_ag"], 0.0)
    out_proj = np.where(again.out_proj, float(sh.attention_layers / sh.layers) * coll["tp_last"], 0.0)
    return np.asarray(np.where(jax & (g.tp > 1), n * (ag + out_proj), 0.0))


def _xla_head_side_gathers(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], coll: dict[str, np.ndarray],
                           att_blocks: Any) -> tuple[np.ndarray, np.ndarray]:
    """(added, spared) seconds per micro-batch on the busiest stage of the later XLA SPMD partitioner's backward
    (jaxlib 0.4.29 on: Job.xla_later_partitioner, training.jax_release; docs/model.md#xlaver36) on an XLA program
    (:func:`_xla_partitioned`) at tensor > 1 with the activations sharded on embed over 'tensor' (sequence_parallel,
    MaxText's ``activation_embed``): each weight-gradient dot of an attention projection gathers its narrower
    head-side operand instead of the h-wide one (dot_handler.cc ``PartitionDot``; measured on CPU GSPMD,
    docs/model.md#xlabwd36)::

        added  = att_blocks sum_i AG(w_i)      (w_i: transformer.xla_head_side_gathers, Q K V O; coll['tp_xla_head'])
        spared = att_blocks AG(h)              in a sequential layer under a JAX dots policy (jax_dots, jax_qkvo)
                                               where Q, K and V all gather head-side

    ``added`` are distinct tensors (no collective CSE merges them) priced over the tensor group at the activations'
    dtype; they join the backward pool XLA schedules beside the weight-gradient compute (the caller's ``under``,
    hidden up to ``comp['wgrad']`` with the rest of it: never more than the compute under them). ``spared``: the
    input norm's output, which only Q / K / V's weight gradients read, is no longer re-gathered under a policy that
    recomputes it (:func:`_jax_remat_tp_recompute` priced it; measured: a sequential layer's gathered tensors 4 -> 7
    under ``minimal`` at a d = 0.8 h, 4 -> 8 under ``full``, whose recomputed forward gathers it anyway)."""
    sh = job.shape
    on = (_xla_partitioned(job, g) & (g.tp > 1) & np.asarray(g.sequence_parallel, dtype=bool)
          & bool(job.xla_later_partitioner))
    if not np.any(on):
        return np.zeros(1), np.zeros(1)
    added = np.where(on, att_blocks * coll["tp_xla_head"], 0.0)
    q, k, v, _o = transformer.xla_head_side_gathers(sh)
    again = transformer.recomputed_modules(sh, g.recompute, g.recompute_modules)
    spare = (on & (again.jax_dots | again.jax_qkvo) & ~np.asarray(sh.parallel_block, dtype=bool)
             & (q > 0) & (k > 0) & (v > 0))
    spared = np.where(spare, att_blocks * coll["tp_ag"], 0.0)
    return np.asarray(added), np.asarray(spared)


def _cp_exposed(job: Job, g: StrategyGrid, comp: dict[str, np.ndarray], coll: dict[str, np.ndarray],
                att_layers: np.ndarray, full_rec: np.ndarray) -> np.ndarray:
    """Exposed context-parallel seconds per micro-batch on a stage of ``att_layers`` attention layers under
    ``cp_comm_type`` all_gather or a2a (docs/model.md#cp-comm), from Transformer Engine's
    transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py at NVIDIA/TransformerEngine@d0067d0:

    * all_gather (AttnFuncWithCPAndKVAllGather): forward ``gather_along_first_dim(k)``, ``(v)`` over the cp group,
      backward the same two gathers again and ``reduce_scatter_along_first_dim(dk)``, ``(dv)``; both helpers
      (transformer_engine/pytorch/distributed.py) default to ``async_op=False``, issued on the compute stream
      before (after) the kernels that need (produce) them: nothing hides them.
      per layer: fwd = AG(K) + AG(V), bwd = AG(K) + AG(V) + RS(dK) + RS(dV), of the gathered b s K / t bytes.
    * a2a (AttnFuncWithCPAndQKVOA2A, flash_attn_a2a_communicate): all-to-alls of Q, K, V before the kernel and of
      the output after it; backward of dO before and dQ, dK, dV after; cp_stream overlaps one all-to-all only with
      the layout copies of the next, not with the kernel: exposed. per layer: fwd = bwd = A(Q) + A(K) + A(V) + A(O),
      each the rank's local tensor (b s / cp tokens, heads / t).
    * a2a+p2p (AttnFuncWithCPAndKVP2P with cp_group = [a2a, p2p]): the a2a's all-to-alls inside groups of
      cp_a2a_size ranks (the same tensors), added to the ring's exposed part over the other cp / cp_a2a_size ranks.

    The forward's collectives repeat where the core's forward is recomputed: full recompute (``full_rec``
    attention layers) and selective recompute of core_attn (Megatron-Core checkpoints TE's DotProductAttention,
    the exchange inside it: every attention layer).

        t_cp = att_layers (fwd + bwd) + repeats fwd"""
    code = g.recompute
    again = transformer.recomputed_modules(job.shape, code, g.recompute_modules).attention_core
    repeats = np.where(code == Recompute.FULL, full_rec,
                       np.where((code == Recompute.SELECTIVE) & again, att_layers, 0.0))
    ag = g.cp_comm_type == CpCommType.ALL_GATHER
    fwd = np.where(ag, coll["cp_ag"], coll["cp_a2a"])
    bwd = np.where(ag, coll["cp_ag"] + coll["cp_rs"], coll["cp_a2a"])
    return np.asarray(att_layers * (fwd + bwd) + repeats * fwd)


def _allgathers(widths: tuple[np.ndarray, ...], tokens: np.ndarray, job: Job, group: Placement,
                elem_bytes: float | None = None, op: str = "allgather") -> np.ndarray:
    """Seconds of one all-gather (``op``: or reduce-scatter) per width (elements a token; a width of 0 runs none) of
    ``tokens`` tokens over ``group``, each its own collective (:func:`_collective`; a width 0 in every candidate is
    not priced at all), at ``elem_bytes`` an element (default the activations' ``job.elem_bytes``)."""
    eb = job.elem_bytes if elem_bytes is None else elem_bytes
    return np.asarray(sum((np.where(w > 0, _collective(op, tokens * w * eb, group), 0.0)
                           for w in widths if np.any(w > 0)), np.zeros(1)), dtype=float)


def ep_op_mean(coll: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds of the mean of a MoE layer's four EP operations (dispatch and combine, forward and backward) from
    :func:`_mp_collectives`' parts: the tokens' exchange ``ep_tokens`` (the alltoall dispatcher's all-to-all, the
    flex dispatcher's hierarchical one, the allgather dispatcher's gathers' mean) and the alltoall dispatcher's
    extras, P its probabilities' all-to-all and C its counts' all-gather (:func:`_alltoall_dispatcher_extras`, 0
    for the other dispatchers; docs/model.md#ep-probs-counts)::

        t = A + P / 2 + C / 4"""
    return np.asarray(coll["ep_tokens"] + 0.5 * coll.get("ep_probs", 0.0) + 0.25 * coll.get("ep_counts", 0.0))


def _cp_ring_overlap(n_p: np.ndarray, step: np.ndarray, step2: np.ndarray, core: np.ndarray
                     ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((exposed, hidden) forward, (exposed, hidden) backward) seconds of one attention layer's p2p ring of n_p
    ranks: ``step`` one send/recv of the local K, V block, ``step2`` one of K, V with dK, dV (twice the bytes),
    ``core`` the layer's forward attention core over all n_p steps, the backward's 2 x; the n_p steps of equal work
    (the load-balanced causal chunks: step 0 causal over the rank's 2 chunks, each other step a half block, as many
    FLOPs), so a forward step takes a = core / n_p and a backward step 2 a. Transformer Engine's
    AttnFuncWithCPAndKVP2P (NVIDIA/TransformerEngine@d0067d0
    transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py), step by step:

    * forward (L1698-1716): iteration i waits for block i, issues the exchange of block i + 1 (i < n_p - 1) and runs
      attention step i, so each of the n_p - 1 exchanges runs beside one step and the last step has none:
      exposed (n_p - 1) max(step - a, 0), hidden (n_p - 1) min(step, a);
    * backward (L2460-2495, L2718-2720): iteration i issues one exchange (K, V at i = 0; the buffer of K, V and the
      accumulated dK, dV for 0 < i < n_p - 1; dK, dV at i = n_p - 1) and waits for it after its own step:
      exposed 2 max(step - 2a, 0) + (n_p - 2) max(step2 - 2a, 0), hidden likewise with min."""
    a = core / np.maximum(n_p, 1.0)
    mid = np.maximum(n_p - 2.0, 0.0)
    ends = np.where(n_p >= 2.0, 2.0, 0.0)  # the first (K, V) and the last (dK, dV); n_p 1: no exchange
    fwd = (np.maximum(n_p - 1.0, 0.0) * np.maximum(step - a, 0.0), np.maximum(n_p - 1.0, 0.0) * np.minimum(step, a))
    bwd = (ends * np.maximum(step - 2.0 * a, 0.0) + mid * np.maximum(step2 - 2.0 * a, 0.0),
           ends * np.minimum(step, 2.0 * a) + mid * np.minimum(step2, 2.0 * a))
    return fwd, bwd


def _gather_scatter(size: np.ndarray, group: Placement) -> np.ndarray:
    """Seconds of an all-gather and a reduce-scatter of the same ``size`` bytes (the gathered buffer) over
    ``group``: a forward gather and its backward's reduce-scatter, or the reverse (:func:`_collective`)."""
    return np.asarray(_collective("allgather", size, group) + _collective("reducescatter", size, group))


def einsum_mask_allreduce_bytes(tokens: Any, seq_len: Any, top_k: Any, capacity: Any, elem_bytes: Any) -> np.ndarray:
    """Bytes of the all-reduce over the tensor axis that MaxText's einsum dispatch (drop-and-pad on the XLA layer,
    docs/model.md#maxtext-dropping-moe) needs per MoE block and micro-batch at tp > 1: the combine mask's gradient,
    ``tokens x E C x eb`` with ``tokens = b s / cp`` the rank's rows of the mask and ``E C = c k s`` its capacity
    columns (``C = ceil(s k / E) c`` an expert, the rounding not priced as in
    :func:`scalemodel.cost.compute.moe_einsum_dispatch`). Source: AI-Hypercomputer/maxtext@14b5876ea
    MaxText/layers/moe.py ``dense_matmul``: ``output = einsum("EBCM,BSEC -> BSM", intermediate_layer, combine_mask)``
    with ``intermediate_layer`` constrained to ``(activation_exp, activation_batch_no_exp, None, activation_embed)``
    (L848-851) and ``activation_embed`` -> ``tensor`` (configs/base.yml L279): the combine mask's gradient
    ``einsum("BSM,EBCM -> BSEC")`` contracts over the tensor-sharded M, each rank a partial sum; the mask is constrained
    to ``mask_axes = (activation_batch, activation_length, None, None)`` (L769, L797-798), no tensor axis, and JAX
    constrains a cotangent as its primal (jax/_src/pjit.py: ``ad.deflinear2(sharding_constraint_p, lambda ct, _,
    **params: (sharding_constraint_p.bind(ct, **params),))``), so the gradient is whole on every tensor rank: the
    partial sums' all-reduce (GSPMD's dot over a contracting dimension sharded in both operands, Xu et al. 2021,
    arXiv:2105.04663). ``eb``: the mask's dtype, the routing weights' (``combine_mask = weights[..., None] x
    one_hot``), the activations'. The forward's einsums and the dispatch's backward move nothing over the tensor axis
    (their contractions run over E C or the unsharded s; the dispatch mask is a bool without a gradient)."""
    return np.asarray(np.asarray(tokens, dtype=float) * np.asarray(capacity, dtype=float) * float(top_k)
                      * np.asarray(seq_len, dtype=float) * np.asarray(elem_bytes, dtype=float))


def _tokens_per_microbatch(job: Job, g: StrategyGrid) -> np.ndarray:
    """Tokens of one micro-batch on one GPU (context parallelism splits the sequence)."""
    return np.asarray(g.micro_batch.astype(float) * job.seq_len / g.cp)


def _mp_collectives(job: Job, g: StrategyGrid, groups: ParallelGroups) -> dict[str, np.ndarray]:
    """The per-layer collectives of :func:`_model_parallel_comm`, which do not depend on the stage's layers:
    one TP all-reduce (or reduce-scatter + all-gather with sequence parallelism) of the activation, one CP
    ring step of K and V, one EP all-to-all (``ep_tokens``, the dispatcher's extras ``ep_probs`` and ``ep_counts``
    beside it: :func:`ep_op_mean`), one pipeline send/recv. Priced once per grid
    (:func:`~scalemodel.engine.step._stage_memo`): a pipeline's first, middle and last ranks share them."""
    sh = job.shape
    tokens = _tokens_per_microbatch(job, g)
    act = tokens * float(sh.hidden) * job.elem_bytes
    ar, ar_hier = _priced("allreduce", act, groups.tensor)
    rs, ag = _collective("reducescatter", act, groups.tensor), _collective("allgather", act, groups.tensor)
    ar_nvls = np.zeros(1, dtype=bool)
    if np.any(nccl.nvls_allreduce_applies(groups.tensor)) and not np.all(g.sequence_parallel):
        ar_nvls = nvls_allreduce(groups.tensor, None, ar, ar_hier)
    # an attention block's all-gathers beyond the one h-wide gather coll['tp'] holds, with sequence parallelism, each
    # its own collective (docs/model.md#mla-tp): MLA's only (an ordinary block's one gather is coll['tp']'s)
    att_gather = mla_up = att_regather = att_grad_rs = att_plain = np.zeros(1)
    mla_rs = mla_rg = np.zeros((4, 1))
    # the backward's re-gathers of the saved input shards, in their saved dtype (sp_regather): the forward's gathers
    # again where that is the activations' dtype
    rg_eb = sp_regather_elem_bytes(job)
    same = rg_eb == job.elem_bytes
    regather = ag if same else _collective("allgather", tokens * float(sh.hidden) * rg_eb, groups.tensor)
    # Transformer Engine's linears (not nanotron's own, not XLA's partitioner): the forward's column-parallel input
    # gathers at the quantized dtype, as their re-gathers (sp_regather_elem_bytes), and the row-parallel linears'
    # output-gradient gathers in the backward at the gradient's (sp_grad_gather_elem_bytes;
    # docs/model.md#sp-grad-gather)
    te = ~np.asarray(g.nanotron_trainer, dtype=bool) & ~_xla_partitioned(job, g)
    fwd_ag = np.where(te, regather, ag)
    gg_eb = sp_grad_gather_elem_bytes(job)
    grad_ag = np.where(te, ag if gg_eb == job.elem_bytes else
                       _collective("allgather", tokens * float(sh.hidden) * gg_eb, groups.tensor), ag)
    if np.any(sh.mla):
        on = g.sequence_parallel & (g.tp > 1)
        # the TE column linears' input gathers, one each, by slot of mla_column_linears (q_up, kv_up, and the column
        # build's q_down, kv_down: 0 wide in the duplicated build, whose TELinear down-projections gather nothing):
        # transformer.mla_up_proj_gathers' two and mla_down_proj_gathers' slots 0 and 2; quantized before they gather
        col = np.asarray(g.mla_column_down_proj, dtype=bool)
        lin_w = [np.where(col, w, 0.0) if name.endswith("down") else w for name, w, _f in mla_column_linears(sh)]
        # Megatron's plain gathers of the bf16 down-projection outputs, mla_down_proj_gathers' slots 1 and 3 (the RoPE
        # key, gather_from_sequence_parallel_region; the column build's latents, gather_from_tensor_model_parallel_
        # region), at the activations' dtype (review32d)
        down_plain = _allgathers(transformer.mla_down_proj_gathers(sh, g.mla_column_down_proj)[1::2], tokens, job,
                                 groups.tensor)

        def per_linear(eb: float | None = None) -> np.ndarray:
            return np.stack(np.broadcast_arrays(*(_allgathers((w,), tokens, job, groups.tensor, eb) for w in lin_w)))

        # each TE column linear's own collectives (_own_windows, mla35): its input-gradient reduce-scatter, the
        # activations' dtype whatever the recipe (the data-gradient GEMM's 16-bit output), priced as the forward's
        # gather at eb as docs/model.md#mla-tp prices the backward (review32d), and its re-gather at the saved dtype
        mla_rs = per_linear()
        mla_rg = mla_rs if same else per_linear(rg_eb)
        mla_up, te_eb = mla_rs[0] + mla_rs[1], mla_rs.sum(axis=0)
        att_gather = np.where(on, te_eb + down_plain - ag, 0.0)
        # the backward's mirrors as one pool (_sp_backward_pool): the linears' sum with the plain gathers' mirrors (the
        # column build's scatter's gather), less the count's h-wide reduce-scatter, which no MLA linear runs (until
        # mla35 less the count's all-gather, RS(h) - AG(h) a block off the linears' own sum)
        att_grad_rs = np.where(on, te_eb + down_plain - rs, 0.0)
        # the plain gathers' backward mirrors (_GatherFromSequenceParallelRegion.backward's reduce-scatter of the RoPE
        # key's gradient, mappings.py at d98e8a64dd; the column build's scatter's gather): autograd collectives run on
        # the compute stream, blocking, outside any linear's backward: exposed (_sp_backward_pool, tp33)
        att_plain = np.where(on, down_plain, 0.0)
        # the re-gathers: the TE column linears' saved input shards only; the plain gathers save nothing to re-gather
        # (their backward is the mirror above; tp33: the RoPE key was counted re-gathered)
        att_regather = np.where(on, mla_rg.sum(axis=0) - regather, 0.0)
        if not same:
            # the forward's: the TE linears' input gathers at the quantized dtype too, the plain ones at eb
            att_gather = np.where(te & on, mla_rg.sum(axis=0) + down_plain - regather, att_gather)
    kv_bytes = tokens * float(transformer.kv_elements_per_token(sh)) * job.elem_bytes / g.tp
    # the routed tokens' width: h, or LatentMoE's l (dispatch after fc1_latent_proj, combine before fc2_latent_proj:
    # Megatron-Core moe_layer.py preprocess / postprocess; token_dispatcher.py hidden_dim = moe_latent_size or hidden)
    token_bytes = tokens * float(sh.moe_width) * job.elem_bytes / g.tp
    # the busiest EP rank receives (dispatch) and sends back (combine) max / mean x the mean copies
    # (docs/model.md#moe-rank-imbalance): each expert-TP slice's all-to-all, mean k b s / (cp tp) copies a rank
    moe = int(sh.moe_experts) > 0
    copies = tokens / g.tp * float(sh.moe_top_k)  # the mean rank's routed rows a dispatch
    load = moe_rank_load(job, g, copies) if moe else 1.0
    a2a_bytes = token_bytes * float(sh.moe_top_k) * load
    ep = _collective("alltoall", a2a_bytes, groups.expert)
    # seconds a recomputed MoE forward's EP traffic runs beyond the 2 of the 4 per-layer operations the step counts for
    # it (docs/model.md#hybridep-preprocess, #ep-allgather, #ep-probs-counts): 0 where the forward and backward ops
    # are alike
    ep_refwd = ep_probs = ep_counts = np.zeros(1)
    if moe:  # Megatron-Core's alltoall dispatcher: the probabilities' all-to-all and the counts' all-gather besides
        ep_probs, ep_counts = _alltoall_dispatcher_extras(job, g, groups, copies * load)
        ep_refwd = 0.5 * ep_counts
    # the routed tokens' expert-TP all-gather after the dispatch and reduce-scatter before the combine (etp > 1,
    # docs/model.md#tp-comm-moe): gathered buffer etp x the rank's k b s / (cp tp) received tokens, over the etp
    # ranks at stride 1 (the expert grid's innermost dimension). Its busiest EP index gathers the rows every slice
    # received for it (token_dispatcher.py L746-747 @d98e8a64dd: gather_from_sequence_parallel_region over the
    # expert-TP group with output_split_sizes, the slices' own counts): the load of the experts' rows, mean
    # etp k b s / (cp tp) copies, not etp x one slice's busiest (the slices route independently)
    moe_disp = np.zeros(1)
    if moe and np.any((_etp(g) > 1) & (g.sequence_parallel | (g.tp == 1))):
        etp_group = place(np.asarray(_etp(g), dtype=float), 1.0, groups.network)
        gathered = _etp(g) * tokens / g.tp * float(sh.moe_top_k)
        disp_bytes = _etp(g) * token_bytes * float(sh.moe_top_k) * moe_rank_load(job, g, gathered)
        # forward AG (eb) + RS in the probabilities' dtype (combine_preprocess: hidden_states.to(self.probs.dtype));
        # backward RS (eb) + AG (the same dtype): the pair's mean per pass (docs/model.md#router-dtype); and the
        # routing probabilities gathered with the tokens (dispatch_postprocess L749-751, one a row in their dtype:
        # the cast buffer / w), their gradient reduce-scattered in the backward (docs/model.md#ep-probs-counts)
        cast = disp_bytes * ((job.router_bytes or job.elem_bytes) / job.elem_bytes)
        probs = cast / float(sh.moe_width)
        moe_disp = 0.5 * (_gather_scatter(disp_bytes, etp_group) + _gather_scatter(cast, etp_group)
                          + _gather_scatter(probs, etp_group))
    # MaxText's einsum dispatch (drop-and-pad on the XLA layer) at tp > 1: the combine mask's gradient, all-reduced
    # over the tensor axis once a MoE block's backward (einsum_mask_allreduce_bytes, docs/model.md#maxtext-dropping-moe)
    moe_mask = np.zeros(1)
    einsum_tp = moe & bool(job.moe_pad_to_capacity) & (np.asarray(g.layer_impl) == int(LayerImpl.XLA)) & (g.tp > 1)
    if np.any(einsum_tp):
        mask_bytes = einsum_mask_allreduce_bytes(tokens, job.seq_len, float(sh.moe_top_k), load, job.elem_bytes)
        moe_mask = np.where(einsum_tp, _collective("allreduce", mask_bytes, groups.tensor), 0.0)
    flex = np.asarray(g.moe_flex_dispatcher, dtype=bool) & (int(sh.moe_experts) > 0)
    if np.any(flex):  # DeepEP / HybridEP: once per destination domain, then NVLink (docs/model.md#ep-hierarchical)
        E, k = float(sh.moe_experts), float(sh.moe_top_k)
        # the flex dispatcher's group is tp_ep: etp x ep ranks, stride 1 (token_dispatcher.py @d98e8a64dd
        # MoEFlexTokenDispatcher; its kernels get top-k etp k of etp E: docs/model.md#ep-hierarchical)
        etp = _etp(g)
        fg = _tp_ep_group(g, groups)
        # HybridEP: of the 4 per layer, the forward dispatch and the backward combine carry the routing probabilities
        # the busiest receiver of each stage (docs/model.md#moe-rank-imbalance): random routing's, or the measured
        busy = dict(tokens=tokens / g.tp, imbalance=job.moe_rank_imbalance, routing=job.moe_routing)
        hier = 0.5 * (ep_dispatch.hierarchical_alltoall_time(token_bytes, E, k, fg, etp=etp, **busy)
                      + ep_dispatch.hierarchical_alltoall_time(token_bytes, E, k, fg,
                                                               prob_tokens=tokens / g.tp, etp=etp, **busy))
        # HybridEP's metadata preprocessing: each forward dispatch (no cached handle) all-gathers the routing map,
        # [b s / (cp tp), etp E] bool a rank, over the group with NCCL; a quarter of it on each of the 4 per layer
        # (docs/model.md#hybridep-preprocess); its scan kernel's time is not priced (no published timing)
        map_gather = _collective("allgather", g.ep * etp * (tokens / g.tp) * etp * E, fg)
        hier = hier + 0.25 * map_gather
        # a recomputed forward dispatches without a handle again: the whole gather, where its 2 ops count a half
        ep_refwd = np.where(flex, 0.5 * map_gather, ep_refwd)
        deepep = np.asarray(g.moe_flex_backend) == int(FlexBackend.DEEPEP)
        if np.any(flex & deepep):  # DeepEP: each copy a 16-byte-aligned slot with its metadata, the 4 ops' mean
            rows = tokens / g.tp
            slot = ep_dispatch.deepep_mean_slot_bytes(float(sh.moe_width) * job.elem_bytes, etp * k)
            hier = np.where(deepep, ep_dispatch.hierarchical_alltoall_time(rows * slot, E, k, fg, etp=etp, **busy),
                            hier)
            ep_refwd = np.where(flex & deepep, 0.0, ep_refwd)
        ep = np.where(flex, hier, ep)
        ep_probs, ep_counts = np.where(flex, 0.0, ep_probs), np.where(flex, 0.0, ep_counts)
    gather = np.asarray(g.moe_allgather_dispatcher, dtype=bool) & (int(sh.moe_experts) > 0)
    if np.any(gather):  # Megatron-Core's allgather dispatcher (docs/model.md#ep-allgather)
        mean, refwd = _allgather_dispatch_time(job, g, groups, tokens / g.tp)
        ep = np.where(gather, mean, ep)
        ep_refwd = np.where(gather, refwd, ep_refwd)
        ep_probs, ep_counts = np.where(gather, 0.0, ep_probs), np.where(gather, 0.0, ep_counts)
    cp_ag = cp_rs = cp_a2a = np.zeros(1)
    cp_ring = _collective("sendrecv", kv_bytes, groups.context)
    cp_ring2 = _collective("sendrecv", 2.0 * kv_bytes, groups.context)  # the backward's K, V and dK, dV together
    if np.any((g.cp > 1) & (g.cp_comm_type != CpCommType.P2P)):  # _cp_exposed
        k_share = float(sh.head_dim / (sh.head_dim + sh.v_head_dim))
        k_b, v_b = kv_bytes * k_share, kv_bytes * (1.0 - k_share)  # the local K and V blocks
        cpg = groups.context_group
        hier = g.cp_comm_type == CpCommType.A2A_P2P
        if np.any(hier):  # a2a+p2p: the all-to-alls in groups of cp_a2a_size ranks, the ring across them
            a2a_group, ring_pair = groups.context_levels(compute.cp_levels(g.cp, g.cp_comm_type, g.cp_a2a_size)[0])
            cp_ring = np.where(hier, _collective("sendrecv", kv_bytes, ring_pair), cp_ring)
            cp_ring2 = np.where(hier, _collective("sendrecv", 2.0 * kv_bytes, ring_pair), cp_ring2)
        # all-gather / reduce-scatter sizes are the gathered buffers (nccl-tests convention): cp x the local block
        cp_ag = _collective("allgather", g.cp * k_b, cpg) + _collective("allgather", g.cp * v_b, cpg)
        cp_rs = _collective("reducescatter", g.cp * k_b, cpg) + _collective("reducescatter", g.cp * v_b, cpg)
        q_b = tokens * float(sh.heads * sh.head_dim) * job.elem_bytes / g.tp
        o_b = tokens * float(sh.heads * sh.v_head_dim) * job.elem_bytes / g.tp
        cp_a2a = (_collective("alltoall", q_b, cpg) + _collective("alltoall", k_b, cpg)
                  + _collective("alltoall", v_b, cpg) + _collective("alltoall", o_b, cpg))
        if np.any(hier):
            cp_a2a = np.where(hier, _collective("alltoall", q_b, a2a_group) + _collective("alltoall", k_b, a2a_group)
                              + _collective("alltoall", v_b, a2a_group) + _collective("alltoall", o_b, a2a_group),
                              cp_a2a)
    tp_amax_f, tp_amax_b = tp_amax_time(job, g, groups)
    return {"cp_ag": cp_ag, "cp_rs": cp_rs, "cp_a2a": cp_a2a, "amax": delayed_amax_time(job, g, groups),
            "tp_amax_fwd": tp_amax_f, "tp_amax_bwd": tp_amax_b,
            "tp": np.where(g.sequence_parallel, rs + fwd_ag, ar), "tp_att": att_gather,
            "tp_att_grad_rs": att_grad_rs, "tp_att_plain": att_plain,
            "tp_fwd_ag": np.where(g.sequence_parallel, fwd_ag, 0.0), "tp_grad_ag": np.where(g.sequence_parallel,
                                                                                             grad_ag, 0.0),
            "tp_regather": regather, "tp_att_regather": att_regather,
            # 1 where the TP collective is an all-reduce NCCL runs as NVLS (nvls_allreduce; contention's share)
            "tp_nvls": np.where(~np.asarray(g.sequence_parallel, dtype=bool) & ar_nvls, 1.0, 0.0),
            "tp_mla_up": mla_up, "tp_mla_rs": mla_rs, "tp_mla_rg": mla_rg,
            # the later XLA partitioner's head-side gathers of an attention layer's backward (_xla_head_side_gathers)
            "tp_xla_head": _allgathers(transformer.xla_head_side_gathers(sh), tokens, job, groups.tensor)
            if np.any(_xla_partitioned(job, g) & (g.tp > 1)) and job.xla_later_partitioner else np.zeros(1),
            "moe_disp": moe_disp, "moe_mask_ar": moe_mask,
           "tp_embed": embedding_tp_collective(job, g, ar, rs, ag), "tp_ar": ar, "tp_rs": rs, "tp_ag": ag,
           "tp_loss": cross_entropy_tp_collective(job, g, groups, tokens),
            "tp_last": np.where(g.sequence_parallel, rs, ar),
           "cp": cp_ring, "cp_kv_dkv": cp_ring2,
           "ep_tokens": ep, "ep_refwd": ep_refwd, "ep_probs": ep_probs, "ep_counts": ep_counts,
           # the activation each TP rank sends (pp_send_divisor, docs/model.md#pp-comm)
           "pp": _stage_boundary_time(groups, act / pp_send_divisor(g)),
           "pp_meta": nanotron_p2p_extra_time(groups, tokens) if np.any(g.nanotron_trainer) else 0.0 * act,
           # the receiver's all-gather over TP of the split activation (DeepSpeed's PartitionedTensor.full(), legacy
           # Megatron-LM's gather_split_1d_tensor)
           "pp_gather": _collective("allgather", act, groups.tensor)
           if np.any(g.deepspeed_pipeline | np.asarray(g.pp_scatter_gather, dtype=bool)) else 0.0 * act}


def delayed_amax_on(job: Job, g: StrategyGrid) -> np.ndarray:
    """Where Transformer Engine's delayed scaling reduces its amaxes over the stage's tp cp dp GPUs twice a chunk
    (:func:`delayed_amax_time`): an fp8 run with the delayed recipe on Megatron-Core's Transformer Engine layer
    (``layer_impl`` megatron_te)."""
    return np.asarray((job.fp8_recipe == "delayed") & (g.layer_impl == int(LayerImpl.MEGATRON_TE)))


def delayed_amax_time(job: Job, g: StrategyGrid, groups: ParallelGroups) -> np.ndarray:
    """Seconds of one model chunk's two amax reductions (its forward's and its backward's) under Transformer Engine's
    delayed scaling, on the compute stream's critical path (docs/model.md#fp8-amax):

        t = sum over pass in (forward, backward) of
            all-reduce(4 A_pass bytes, MAX) over the stage's tp cp dp GPUs
            + kernels_pass x KERNEL_FIXED_S + HBM bytes_pass / (HBM x memory efficiency)

    (A_pass, kernels, bytes: :func:`scalemodel.cost.compute.delayed_amax_reduction` on the mean stage's L / pp layers:
    the message is latency-bound, the rank's own count moves it by bytes). Where: Megatron-Core's TransformerBlock
    forward wraps the whole chunk in one ``fp8_autocast(fp8_group=get_amax_reduction_group(with_context_parallel=
    True))`` under delayed scaling (NVIDIA/Megatron-LM core_r0.8.0 - core_v0.15.0 transformer_block.py; core_v0.12.0+
    ``use_outer_fp8_context`` for the delayed recipe only), and that group is
    ``_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP`` (parallel_state.py, ``tp_only_amax_red`` False by default).
    Transformer Engine reduces the forward buffer on the outermost autocast's exit (fp8.py ``fp8_autocast_exit``) and
    the backward buffer in the backward of the chunk's first FP8 module (``ctx.reduce_and_update_bwd_fp8_tensors =
    is_first_fp8_module()``, module/linear.py, layernorm_linear.py): one of each per chunk and micro-batch. 0 unless
    :func:`delayed_amax_on`."""
    on = delayed_amax_on(job, g)
    if not job.is_transformer or not np.any(on):
        return np.zeros(1)
    layers = job.shape.layers / g.pp
    t = np.zeros(1)
    for forward in (True, False):
        nbytes, kernels, hbm = compute.delayed_amax_reduction(job.shape, layers=layers, ep=g.ep, forward=forward)
        t = t + (_collective("allreduce", nbytes, groups.stage_group) + kernels * compute.KERNEL_FIXED_S
                 + compute.memory_time(hbm, memory_bandwidth=job.memory_bandwidth,
                                       memory_efficiency=job.memory_efficiency))
    return np.where(on, t, 0.0)


def embedding_tp_collective(job: Job, g: StrategyGrid, ar: Any, rs: Any, ag: Any) -> np.ndarray:
    """Seconds per micro-batch of one word-embedding lookup's TP collectives (forward and backward), b s / cp x h
    elements of e bytes over the TP group (``ar``, ``rs``, ``ag``: :func:`_mp_collectives`' one-activation all-reduce,
    reduce-scatter and all-gather). The vocab-parallel embedding's output is a partial sum over the TP ranks' vocabulary
    rows (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/tensor_parallel/layers.py VocabParallelEmbedding.forward, lines
    367-385):

        sequence parallelism, no learned positions   reduce-scatter (forward) + all-gather (its backward)
                                                     (reduce_scatter_embeddings: language_model_embedding.py 51-56)
        sequence parallelism, learned positions      all-reduce + all-gather (scatter_to_sequence_parallel_region's
                                                     backward, language_model_embedding.py 143-147); legacy
                                                     Megatron-LM / Megatron-DeepSpeed (layer_impl megatron_legacy)
                                                     always so (megatron/model/language_model.py Embedding.forward)
        no sequence parallelism                      all-reduce (reduce_from_tensor_model_parallel_region; its
                                                     backward is the identity)

    Not the layers' (:func:`~scalemodel.cost.transformer.tp_allreduces_per_layer`): :func:`_model_parallel_comm` adds
    it, exposed (the first layer waits for it; its backward's all-gather ends the backward), on the stages that embed
    (``embedding_uses`` of :func:`~scalemodel.engine.layer_compute._compute_per_microbatch`). A TPU's or an XLA
    layer's partitioner places its own collectives: 0 there. docs/model.md#embedding-tp-comm"""
    learned = (np.asarray(job.shape.position_embeddings, dtype=float) > 0) | (
        np.asarray(g.layer_impl) == int(LayerImpl.MEGATRON_LEGACY))
    t = np.where(g.sequence_parallel, np.where(learned, ar, rs) + ag, ar)
    return np.asarray(np.where(_no_tp_comm(job, g), 0.0, t))


def _xla_partitioned(job: Job, g: StrategyGrid) -> np.ndarray:
    """bool: a TPU's or an XLA layer's partitioner places (and schedules) the TP collectives, not a framework's
    linears (Transformer Engine, Megatron-Core, nanotron)."""
    return np.asarray((np.asarray(g.layer_impl) == int(LayerImpl.XLA)) | (job.accelerator_family == "tpu"))


def _no_tp_comm(job: Job, g: StrategyGrid) -> np.ndarray:
    """bool: no priced TP collectives around the embedding and the output head: tp 1, or a TPU's or an XLA layer's
    partitioner, which places its own (:func:`_xla_partitioned`)."""
    return np.asarray((g.tp <= 1) | _xla_partitioned(job, g))


def output_layer_tp_collective(job: Job, g: StrategyGrid, ar: Any, rs: Any, ag: Any, gemm: Any, deferred: Any = 0.0
                               ) -> dict[str, np.ndarray]:
    """Seconds per micro-batch and head of the output layer's TP collectives, exposed and hidden (forward,
    backward), ``ar``, ``rs``, ``ag`` one b s / cp x h activation's all-reduce, reduce-scatter, all-gather over TP
    (:func:`_mp_collectives`), ``gemm`` G the output GEMM's forward seconds (T x V/t x h; its data- and its
    weight-gradient GEMM each take G, :func:`scalemodel.cost.compute.logits_compute_time`).

    Megatron-Core's output layer is a ``tensor_parallel.ColumnParallelLinear`` (gather_output False: the logits stay
    vocab-parallel; NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/gpt/gpt_model.py lines 271-295), not a
    Transformer Engine module, so userbuffers (tp_comm_overlap) never covers it. Its
    ``LinearWithGradAccumulationAndAsyncCommunication`` (tensor_parallel/layers.py):

    - sequence parallelism: the forward all-gathers the sequence-sharded input, blocking, before the GEMM (lines
      619-631); the backward all-gathers the saved shard again (``async_op=True``) under the data-gradient GEMM
      (lines 666-687), then reduce-scatters the input gradient (``async_op=True``) under the weight-gradient GEMM
      (lines 700-710)::

          exposed = AG + max(AG - G, 0) + max(RS - G, 0)      hidden (backward) = min(AG, G) + min(RS, G)

    - no sequence parallelism: the forward is the identity; the backward all-reduces the input gradient
      (``allreduce_dgrad``, ``async_op=True``, lines 694-698, 1144-1146) under the weight-gradient GEMM, or, with the
      async all-reduce off (strategy tp_async_allreduce: older Megatron's ``copy_to_tensor_model_parallel_region``,
      lines 1217-1225), after it, blocking::

          exposed = max(AR - G, 0) (async) or AR              hidden (backward) = min(AR, G) (async) or 0

    Legacy Megatron-LM's ``parallel_lm_logits`` runs the same function with the same flags. nanotron's LM head is a
    ``TensorParallelColumnLinear`` (huggingface/nanotron@c2528430 src/nanotron/models/llama.py lines 856-870) run as
    its layers' column linears are (:func:`nanotron_tp_time`): with SP the forward's all-gather hides under the
    rank's own shard's GEMM, G / t (exposed max(AG - G / t, 0), hidden min(AG, G / t)), the backward as above;
    without SP (tp_mode ALL_REDUCE, synchronous) the backward all-reduce is blocking. Not in the layers' count
    (:func:`~scalemodel.cost.transformer.tp_allreduces_per_layer`: each layer's own pairs). 0 where
    :func:`_no_tp_comm`.

    ``deferred`` d: the share of the passes whose weight-gradient GEMM is deferred to the pipeline flush
    (defer_embedding_wgrad, :func:`~scalemodel.engine.layer_compute.deferred_head_share`; 3c0f3ef38c layers.py lines
    380-480): such a backward skips the input's all-gather (``wgrad_compute`` False) and waits on its reduce-scatter
    (SP) or async all-reduce with no GEMM under it, so it pays RS (SP) or AR in full and hides nothing; the drain's
    all-gathers are priced with the drain (step.py). Each part is (1 - d) x the usual + d x the deferred one.
    docs/model.md#output-tp-comm, #defer-embedding-wgrad"""
    ar, rs, ag, gemm, d = (np.asarray(v, dtype=float) for v in (ar, rs, ag, gemm, deferred))
    nt = np.asarray(g.nanotron_trainer, dtype=bool)
    sp = np.asarray(g.sequence_parallel, dtype=bool)
    own = gemm / np.asarray(g.tp, dtype=float)
    fwd_e = np.where(nt, np.maximum(ag - own, 0.0), ag)
    fwd_h = np.where(nt, np.minimum(ag, own), 0.0)
    bwd_sp_e = np.maximum(ag - gemm, 0.0) + np.maximum(rs - gemm, 0.0)
    bwd_sp_h = np.minimum(ag, gemm) + np.minimum(rs, gemm)
    hides = np.asarray(g.tp_async_allreduce, dtype=bool) & ~nt
    bwd_ar_e = np.where(hides, np.maximum(ar - gemm, 0.0), ar)
    bwd_ar_h = np.where(hides, np.minimum(ar, gemm), 0.0)
    # a deferred pass (Megatron-Core only: never nanotron's head): RS or AR exposed, nothing hidden in its backward
    d = np.where(nt, 0.0, d)
    bwd_sp_e = (1.0 - d) * bwd_sp_e + d * rs
    bwd_sp_h = (1.0 - d) * bwd_sp_h
    bwd_ar_e = (1.0 - d) * bwd_ar_e + d * ar
    bwd_ar_h = (1.0 - d) * bwd_ar_h
    off = _no_tp_comm(job, g)
    return {"exposed": np.where(off, 0.0, np.where(sp, fwd_e + bwd_sp_e, bwd_ar_e)),
            "hidden_fwd": np.where(off | ~sp, 0.0, fwd_h),
            "hidden_bwd": np.where(off, 0.0, np.where(sp, bwd_sp_h, bwd_ar_h))}


def cross_entropy_tp_collective(job: Job, g: StrategyGrid, groups: ParallelGroups, tokens: Any) -> np.ndarray:
    """Seconds per micro-batch and head of the vocab-parallel cross-entropy's TP collectives, blocking in its forward
    (the backward has none), on T = b s / cp tokens of fp32 per-token values (the logits are cast to float first),
    over the TP group, by ``loss_impl``:

        megatron      3 all-reduces of 4 T bytes: the max (MAX), the predicted logit and the sum of exp (SUM)
                      (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/tensor_parallel/cross_entropy.py lines 130-152;
                      nanotron's sharded_cross_entropy the same three, huggingface/nanotron@c2528430
                      src/nanotron/parallel/tensor_parallel/functional.py lines 41-76, whatever loss_impl says)
        megatron_fused  all-reduce 4 T (max) + all-reduce 8 T (predicted logit and sum of exp concatenated)
                      (megatron/core/fusions/fused_cross_entropy.py lines 42, 94-114)
        te            one all-gather of (max, sum, target logit), 12 T bytes a rank: gathered 12 T t
                      (NVIDIA/TransformerEngine@d0067d0d transformer_engine/pytorch/triton/cross_entropy.py line 85)
        flash_attn    an all-gather of the log-sum-exp, gathered 4 T t, + an all-reduce of the losses, 4 T
                      (Dao-AILab/flash-attention flash_attn/ops/triton/cross_entropy.py lines 225-230)
        torch, inductor  as megatron (PyTorch's loss_parallel reduces the max, the sum of exp and the target logit)

    0 where :func:`_no_tp_comm`. docs/model.md#output-tp-comm"""
    tg = groups.tensor
    row = 4.0 * np.asarray(tokens, dtype=float)
    three = 3.0 * _collective("allreduce", row, tg)
    impl = np.asarray(g.loss_impl)
    fused = _collective("allreduce", row, tg) + _collective("allreduce", 2.0 * row, tg)
    te = _collective("allgather", 3.0 * row * g.tp, tg)
    fa = _collective("allgather", row * g.tp, tg) + _collective("allreduce", row, tg)
    nt = np.asarray(g.nanotron_trainer, dtype=bool)
    t = np.where(impl == int(LossImpl.MEGATRON_FUSED), fused,
                 np.where(impl == int(LossImpl.TE), te, np.where(impl == int(LossImpl.FLASH_ATTN), fa, three)))
    return np.asarray(np.where(_no_tp_comm(job, g), 0.0, np.where(nt, three, t)))


def tp_amax_time(job: Job, g: StrategyGrid, groups: ParallelGroups) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one mean layer's blocking TP amax all-reduces (forward, backward) under Transformer Engine's current
    scaling (``tensorwise``) or NVFP4 with sequence parallelism at tp > 1 (docs/model.md#tp-amax):

        t_pass = n_pass(layer) x (1 - bf16 share) x all-reduce(TP_AMAX_BYTES, MAX) over the TP group

    n_pass from :func:`scalemodel.cost.compute.tp_amax_reductions` (modules at their own precision counted by theirs:
    training.module_precision attention_proj, mamba_out_proj; the shared experts' none under the strategy's
    moe_shared_expert_overlap; selective recompute's re-run forwards in the backward's); the layers of
    ``training.bf16_layers`` quantize nothing.
    Latency-bound (4-8 bytes), on the compute stream's critical path: ProcessGroupNCCL's ``wait()`` blocks the compute
    stream (not the host) on the NCCL stream until the all-reduce ends, before the scale, the cast and the GEMM.
    0 unless Megatron-Core's Transformer Engine layer (``layer_impl`` megatron_te)."""
    recipe = job.fp8_recipe
    on = (g.layer_impl == int(LayerImpl.MEGATRON_TE)) & g.sequence_parallel & (g.tp > 1)
    if not job.is_transformer or recipe not in compute.TP_AMAX_RECIPES or not np.any(on):
        return np.zeros(1), np.zeros(1)
    f, b = compute.tp_amax_reductions(job.shape, recipe=recipe, attention_recipe=module_recipe(job, "attention_proj"),
                                      mamba_out_recipe=module_recipe(job, "mamba_out_proj"),
                                      shared_expert_overlap=g.moe_shared_expert_overlap, recompute=g.recompute,
                                      recompute_modules=g.recompute_modules)
    per = _collective("allreduce", np.asarray(compute.TP_AMAX_BYTES[recipe]), groups.tensor)
    low = 1.0 - job.bf16_layer_share
    return np.where(on, f * low * per, 0.0), np.where(on, b * low * per, 0.0)


def pp_split(g: StrategyGrid) -> np.ndarray:
    """bool: the pipeline send is split over the TP group and all-gathered by the receiver, without sequence
    parallelism at tp > 1: legacy Megatron-LM's scatter/gather (strategy ``pp_scatter_gather``; megatron/
    p2p_communication.py ``_communicate`` at NVIDIA/Megatron-LM 5942af978a: split_tensor_into_1d_equal_chunks before
    the send, gather_split_1d_tensor after the receive, ``and not args.sequence_parallel``). DeepSpeed's split
    (``deepspeed_pipeline``) is priced by :func:`deepspeed_pipe_comm`."""
    return np.asarray(np.asarray(g.pp_scatter_gather, dtype=bool) & ~np.asarray(g.sequence_parallel, dtype=bool)
                      & (g.tp > 1))


def pp_send_divisor(g: StrategyGrid) -> np.ndarray:
    """t or 1: the pipeline send of each TP rank is the activation b (s/cp) h bytes/elem divided by this
    (docs/model.md#pp-comm). Megatron-Core sends the tensor shape ``get_tensor_shapes`` gives, (s/cp, b, h), and
    (s/cp/t, b, h) only under ``config.sequence_parallel`` (megatron/core/pipeline_parallel/schedules.py at
    NVIDIA/Megatron-LM d98e8a64dd lines 2115-2144; p2p_communication.py ``_communicate`` sends the tensor as it
    is): every TP rank sends the whole replicated activation without SP, t times the SP shard. So does nanotron
    without SP (PipelineBlock.forward, pipeline_parallel/block.py at huggingface/nanotron@c2528430). Legacy
    Megatron-LM's scatter/gather (Narayanan et al. 2021 section 4.1, :func:`pp_split`) and DeepSpeed's
    PipelineEngine (is_pipe_partitioned, v0.5.4+) send one 1/t piece; under SP the shard is already 1/t."""
    split = (np.asarray(g.sequence_parallel, dtype=bool) | np.asarray(g.pp_scatter_gather, dtype=bool)
             | np.asarray(g.deepspeed_pipeline, dtype=bool))
    return np.asarray(np.where(split, g.tp, 1).astype(float))


#: Bytes of nanotron's P2P metadata messages (huggingface/nanotron@c2528430 src/nanotron/parallel/pipeline_parallel/
#: p2p.py ``P2P._send_meta`` lines 207-243): the first, FIRST_METADATA_SIZE = 7 int64 (ndim, nstride, contiguous,
#: storage size, offset, dtype, requires_grad); the second, shape + stride as int64: 6 for the [s, b, h] hidden
#: states, 4 for the [b, s] sequence mask.
NANOTRON_META_FIRST_BYTES = 7 * 8.0
NANOTRON_META_HIDDEN_BYTES = 6 * 8.0
NANOTRON_META_MASK_BYTES = 4 * 8.0

#: Host synchronisations in series on one stage boundary per micro-batch, the lower count of the two P2P files
#: (docs/model.md#nanotron, nano27). Per tensor crossing, the sender's host waits 4 times before its second header
#: leaves (the two headers' ``copy_`` from a pageable CPU tensor, which PyTorch runs as ``cudaMemcpyAsync`` +
#: ``cudaStreamSynchronize``, and two ``assert len(...) == self.first_metadata[i]``, a CUDA element read as a bool:
#: huggingface/nanotron@c2528430 and 67c5ebb6 p2p.py ``_send_meta`` alike), and the receiver's at least 2 after the
#: second header arrives and before it posts the data's receive (67c5ebb6 ``_recv_meta``: shape and stride each read
#: with ``.tolist()``; c2528430 reads the header's elements as 0-d CUDA tensors, 8 + 2r for an r-dimensional tensor).
#: Three tensors cross (hidden states and mask forward, the gradient backward): 3 x (4 + 2) = 18 (c2528430: 52).
NANOTRON_META_HOST_SYNCS = 18.0


def nanotron_p2p_extra_time(groups: ParallelGroups, tokens: Any) -> np.ndarray:
    """Seconds per micro-batch that nanotron's pipeline sends add on a stage boundary beyond the activation and its
    gradient (docs/model.md#nanotron; huggingface/nanotron@c2528430 src/nanotron/parallel/pipeline_parallel/p2p.py,
    block.py, models/llama.py). A decoder PipelineBlock takes ``hidden_states`` and ``sequence_mask`` (llama.py
    ``module_input_keys``), so at a boundary ``PipelineBlock.forward`` sends both (block.py lines 76-106), and
    ``P2P.isend_tensors`` precedes each tensor by two blocking metadata sends (``_send_meta``: ``dist.send`` of the
    7-int64 header, then of shape + stride; lines 207-243, 289-315), the receiver reading them before it allocates
    (``_recv_meta``, lines 245-287). The mask needs no gradient, so the backward sends the hidden states' gradient
    alone, with its two metadata messages. Per micro-batch, each a send/recv across the boundary:

        forward   2 x (first 56 B) + second 48 B (hidden) + second 32 B (mask) + the mask, b s bytes (torch.bool)
        backward  first 56 B + second 48 B

    (the activation and its gradient are the boundary's 2 sends, :func:`_stage_boundary_time` ``pp``); a rank pays
    all of it on each boundary it exchanges on, :func:`pp_exchanges` of them. ``tokens``: b s / cp of the
    micro-batch. Beside the messages, the hosts' synchronisations between the first header and the data
    (:data:`NANOTRON_META_HOST_SYNCS`), each at one eager op's host time, the low end of
    ``host_floor.CALL_COST_US["op"]`` (8.3 us; a lower bound: the device's round trip is not counted)."""
    def send(nbytes: Any) -> np.ndarray:
        return _stage_boundary_time(groups, np.asarray(nbytes, dtype=float) + 0.0 * np.asarray(tokens, dtype=float))

    first = send(NANOTRON_META_FIRST_BYTES)
    host = NANOTRON_META_HOST_SYNCS * CALL_COST_US["op"][0] * 1e-6
    return (3.0 * first + 2.0 * send(NANOTRON_META_HIDDEN_BYTES) + send(NANOTRON_META_MASK_BYTES)
            + send(np.asarray(tokens, dtype=float)) + host)


def _alltoall_dispatcher_extras(job: Job, g: StrategyGrid, groups: ParallelGroups,
                                rows: Any) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of the two collectives Megatron-Core's alltoall token dispatcher runs beside the tokens' all-to-all,
    P the probabilities' all-to-all and C the counts' all-gather, 0 where it does not run them; :func:`ep_op_mean`
    adds P / 2 + C / 4 to the tokens' all-to-all for the mean of the four per-layer EP operations, and the caller C / 2
    to a recomputed forward beyond its 2 of them (docs/model.md#ep-probs-counts).
    NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher``
    (the same calls at core_r0.15.0 0d8e0714, lines 547-548 and 677): ``preprocess`` (lines 570-575) all-gathers
    ``num_local_tokens_per_expert`` (``routing_map.sum(dim=0).long()``: E int64 a rank, no gradient) over
    ``tp_ep_group`` (the etp x ep expert ranks, stride 1) before every forward dispatch; ``token_dispatch`` (lines
    705-724) sends the permuted routing probabilities (one a routed row, the router's dtype) in a second
    ``all_to_all`` over the EP group with the tokens' splits, whose backward is the same all-to-all of their
    gradient; the combine moves the tokens only. With A the tokens' all-to-all, P the probabilities' (``rows`` x pb
    bytes a rank) and C the counts' all-gather (etp x ep x E x 8 bytes gathered)::

        fwd = A + P + C + A          bwd = A + A + P
        t   = (fwd + bwd) / 4 = A + P / 2 + C / 4,   extra = P / 2 + C / 4
        refwd = fwd - 2 t = C / 2    (a recomputed forward's preprocess gathers again)

    Only for Megatron-Core layers (``layer_impl`` megatron_te) at ep > 1; 0 elsewhere (at ep 1 the step prices no
    EP operation: the counts' gather over the etp ranks that runs there when tp > 1 is left out)."""
    sh = job.shape
    pb = job.router_bytes or job.elem_bytes
    probs = _collective("alltoall", np.asarray(rows, dtype=float) * pb, groups.expert)
    counts = _collective("allgather", g.ep * _etp(g) * float(sh.moe_experts) * 8.0, _tp_ep_group(g, groups))
    on = (np.asarray(g.layer_impl) == int(LayerImpl.MEGATRON_TE)) & (g.ep > 1)
    return np.asarray(np.where(on, probs, 0.0)), np.asarray(np.where(on, counts, 0.0))


def _allgather_dispatch_time(job: Job, g: StrategyGrid, groups: ParallelGroups,
                             rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of one of the four per-layer EP operations of Megatron-Core's allgather token dispatcher (strategy
    ``moe_allgather_dispatcher``, docs/model.md#ep-allgather), the mean of the forward's and the backward's, so that
    the step's 4 per MoE layer and pass are the layer's forward and backward traffic. From
    NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py ``MoEAllGatherTokenDispatcher``
    (lines 233-372): ``token_dispatch`` gathers, over ``tp_ep_group`` (the etp x ep expert ranks, stride 1), the
    routing map (bool, E a token, under no_grad), the probabilities ([tokens, E] in the router's dtype) and the
    hidden states (w elements a token, the activations' dtype); ``token_combine`` reduce-scatters the unpermuted
    expert output back over the same group, cast to the probabilities' dtype (``hidden_states.to(
    self.local_probs.dtype)``). ``gather_from_sequence_parallel_region``'s backward is a reduce-scatter and
    ``reduce_scatter_to_sequence_parallel_region``'s an all-gather (megatron/core/tensor_parallel/mappings.py), so,
    with P = etp ep, R the rank's ``rows`` (b s / (cp tp)) and sizes the gathered buffers (nccl-tests convention)::

        fwd = AG(P R E) + AG(P R E pb) + AG(P R w eb) + RS(P R w pb)
        bwd = RS(P R E pb) + RS(P R w eb) + AG(P R w pb)
        t   = (fwd + bwd) / 4
        refwd = fwd - 2 t      (a recomputed forward runs fwd, where the step's 2 ops of it count 2 t)

    ``pb`` the probabilities' bytes: the router's dtype, the activations' ``eb`` unless ``moe_router_dtype`` is
    fp32 / fp64 (docs/model.md#router-dtype: router.py casts the logits, moe_utils.py
    ``topk_routing_with_score_function`` returns ``probs.type_as(logits)``). Every token goes to every
    rank of the group whatever its top-k: no k in the bytes, as against the alltoall dispatcher's k copies."""
    sh = job.shape
    E, w, eb = float(sh.moe_experts), float(sh.moe_width), job.elem_bytes
    pb = job.router_bytes or eb
    etp = _etp(g)
    group = _tp_ep_group(g, groups)
    size = g.ep * etp * rows
    fwd = (_collective("allgather", size * E, group) + _collective("allgather", size * E * pb, group)
           + _collective("allgather", size * w * eb, group) + _collective("reducescatter", size * w * pb, group))
    bwd = (_collective("reducescatter", size * E * pb, group) + _collective("reducescatter", size * w * eb, group)
           + _collective("allgather", size * w * pb, group))
    t = (fwd + bwd) / 4.0
    return np.asarray(t), np.asarray(fwd - 2.0 * t)


def pp_exchanges(g: StrategyGrid) -> np.ndarray:
    """Stage boundaries a pipeline rank exchanges on per micro-batch in a non-interleaved 1F1B schedule:
    min(pp - 1, 2). A middle rank receives its input from the rank before and sends that rank the gradient, and
    sends its output to the rank after and receives the gradient from it; with blocking (rendezvous) transfers both
    exchanges lie on its own timeline, so the steady state grows by t_f + t_b + 2 exchanges a micro-batch. At pp = 2
    each rank has one neighbour: one exchange. An exchange is one batched send/recv pair under Megatron's 1F1B
    (``send_forward_recv_backward`` / ``send_backward_recv_forward``, both directions at once: NVIDIA/Megatron-LM@
    d98e8a64dd megatron/core/pipeline_parallel/schedules.py lines 2379-2450, p2p_communication.py lines 22-57 and
    536-600, ``batch_p2p_comm`` True) and two transfers one after the other under DeepSpeed's PipelineEngine and
    nanotron's engine. The first and the last rank exchange on one boundary whatever pp: the pipeline formulas take
    the second one off their time (``pp_edge``, ``pp_edge_first``: step._end_rank). Step-by-step simulations of the
    three schedules: tests/test_pipeline_exchanges.py, tests/test_deepspeed_pipeline.py. 0 without a pipeline."""
    return np.asarray(np.clip(np.asarray(g.pp, dtype=float) - 1.0, 0.0, 2.0))


#: TP all-gathers (PartitionedTensor.full(), each of the whole b s h activation or its gradient over the TP group) a
#: rank of DeepSpeed's PipelineEngine runs per micro-batch at tp > 1 (is_pipe_partitioned = is_grad_partitioned =
#: model-parallel): ``_exec_forward_pass`` gathers the received input ``if self.is_pipe_partitioned and not
#: self.is_first_stage()``; ``_exec_backward_pass`` returns at once on the last stage (``super().backward(self.loss)``)
#: and elsewhere gathers the stage's own partitioned output and the received gradient (deepspeedai/DeepSpeed@edaa722126
#: deepspeed/runtime/pipe/engine.py lines 731-738, 821-824, 835-857; the same branches at v0.5.4, v0.6.5 and v0.14.4).
#: The sends (_exec_send_activations / _exec_send_grads) split with PartitionedTensor(), a local narrow, no collective.
DEEPSPEED_GATHERS_FIRST, DEEPSPEED_GATHERS_MIDDLE, DEEPSPEED_GATHERS_LAST = 2.0, 3.0, 1.0


def _deepspeed_priced_gathers(g: StrategyGrid) -> np.ndarray:
    """TP all-gathers a micro-batch of the stage :func:`deepspeed_pipe_comm` prices, G: a middle rank's
    (:data:`DEEPSPEED_GATHERS_MIDDLE`) at pp > 2, rank 0's (:data:`DEEPSPEED_GATHERS_FIRST`) at pp = 2, where there is
    no middle rank; the one count :func:`deepspeed_pipe_comm` and :func:`deepspeed_pipe_edges` read (tidy39: each
    derived it)."""
    return np.asarray(np.where(g.pp > 2, DEEPSPEED_GATHERS_MIDDLE, DEEPSPEED_GATHERS_FIRST))


def deepspeed_pipe_comm(g: StrategyGrid, p2p: np.ndarray, gather: np.ndarray) -> np.ndarray:
    """Pipeline communication seconds per micro-batch on the stage the step prices under DeepSpeed's PipelineEngine,
    a middle rank at pp > 2 (at pp 2, with no middle rank, rank 0; the end ranks less :func:`deepspeed_pipe_edges`):

        t_pp = 2 n_x p2p + G [tp > 1] t_allgather_tp(b s h eb),   n_x = min(pp - 1, 2)  (pp_exchanges)
        G = 3 at pp > 2 (a middle rank's), 2 at pp = 2 (rank 0's)

    DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py, v0.5.0-v0.6.5) gives every stage, per
    micro-batch, a forward step that opens with RecvActivation then SendGrad (with the stage before) and a
    backward step that opens with SendActivation then RecvGrad (with the stage after); the first stage has no stage
    before, the last none after (``_valid_stage``). p2p.send/recv are
    blocking broadcasts in a 2-rank group (deepspeed/runtime/pipe/p2p.py), so the activation and the gradient of
    one exchange follow each other instead of sharing the link both ways as Megatron's batched
    send_forward_recv_backward does: 4 send/recvs per micro-batch on a middle stage, against Megatron's 2; 2 at
    pp = 2, where each stage has one neighbour (:func:`pp_exchanges`). Both are
    partitioned over the TP group (PipelineEngine: is_pipe_partitioned = is_grad_partitioned = model-parallel,
    since v0.5.4; ``p2p`` is one TP shard b s h eb / tp, as legacy Megatron-LM's scatter/gather) and rebuilt with
    PartitionedTensor.full(), an all-gather over TP of the whole b s h activation: the received input before
    the forward (not on the first stage), the stage's own output and the received gradient before the backward (not
    on the last stage): 3 per micro-batch on a middle rank, 2 on the first, 1 on the last
    (:data:`DEEPSPEED_GATHERS_MIDDLE`). A step-by-step simulation of the schedule with blocking exchanges
    (tests/test_deepspeed_pipeline.py) gives a steady state of t_f + t_b + 4 p2p per micro-batch (2 p2p at pp = 2);
    DeepSpeed has no interleaved schedule."""
    gathers = _deepspeed_priced_gathers(g)
    return np.asarray(2.0 * pp_exchanges(g) * p2p + np.where(g.tp > 1, gathers * gather, 0.0))


def deepspeed_pipe_edges(g: StrategyGrid, p2p: np.ndarray, gather: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first rank's, last rank's) seconds per micro-batch of :func:`deepspeed_pipe_comm`'s priced stage that the
    PipelineEngine's end rank does not run (``mp['pp_edge_first']``, ``mp['pp_edge']``, taken off by
    step._end_rank): at pp > 2 a middle rank's second boundary, 2 p2p (the shard one way and its gradient back), and
    its TP all-gathers beyond the end rank's own (:data:`DEEPSPEED_GATHERS_FIRST` etc.): the first rank gathers no
    received input (1 fewer), the last no output and no gradient (2 fewer). At pp = 2 the priced stage is rank 0's:
    the first rank 0, the last 1 gather. Per micro-batch, a TP shard s = b s h eb / tp and a gather of b s h eb:

        first   2 p2p (send s, receive s)   + 2 gathers    = priced - [pp > 2] 2 p2p - (G - 2) gathers
        middle  4 p2p (2 sends, 2 receives) + 3 gathers
        last    2 p2p (receive s, send s)   + 1 gather     = priced - [pp > 2] 2 p2p - (G - 1) gathers

    tests/test_pipeline_exchanges.py (dsend38) counts them per rank by a step-by-step simulation of the schedule."""
    gathers = _deepspeed_priced_gathers(g)
    ag = np.where(g.tp > 1, gather, 0.0)
    second = np.maximum(pp_exchanges(g) - 1.0, 0.0) * 2.0 * p2p
    on = g.pp > 1
    return (np.asarray(np.where(on, second + (gathers - DEEPSPEED_GATHERS_FIRST) * ag, 0.0)),
            np.asarray(np.where(on, second + (gathers - DEEPSPEED_GATHERS_LAST) * ag, 0.0)))


def _stage_boundary_time(groups: ParallelGroups, nbytes: np.ndarray, op: str = "sendrecv") -> np.ndarray:
    """One send/recv (or another 2-rank collective ``op``) across the pipeline's slowest stage boundary.

    1F1B runs at the pace of its slowest boundary: the one that splits the pipeline's block of
    pp x s GPUs across the outermost tier it spans (pair extent = the whole pipeline), s the GPUs
    between pipeline neighbours (tp cp dp, a whole stage, in the default rank order; tp cp with PP
    inside DP). Across that boundary every GPU of a stage sends at once; s of the T GPUs of a child
    domain have their partner outside it (all T when s >= T), so an oversubscribed tier (taper o
    over child domains of T GPUs, docs/model.md#oversubscription) is saturated only as far as that:
    the taper applied is max(1, o x min(s, T) / T), interpolated linearly in the bandwidth term
    between the untapered and fully tapered times.
    The boundary pair and the tier it crosses come from the placement (``groups.pipeline``).
    """
    pair = groups.pipeline
    tapered = _collective(op, nbytes, pair)
    over = pair.oversubscription
    if np.all(over <= 1.0):
        return tapered
    untapered = _collective(op, nbytes, pair.untapered())
    spans = pair.spans
    k = pair.tier
    child = np.where(k > 0, spans[np.maximum(k - 1, 0)], 1.0)
    o = over[k]
    o_eff = np.maximum(1.0, o * np.minimum(groups.pp_stride, child) / child)
    share = np.divide(o_eff - 1.0, o - 1.0, out=np.zeros_like(o_eff), where=o > 1.0)
    return untapered + (tapered - untapered) * share


def tied_embedding_allreduce(job: Job, g: StrategyGrid, groups: ParallelGroups) -> np.ndarray:
    """Seconds of the all-reduce of the tied word-embedding gradient between the first and the last pipeline
    stage, once per step after the pipeline flush (0 without a pipeline or with untied embeddings).

        bytes = V h / tp x grad_bytes        one TP shard of the V x h word-embedding gradient
        t     = all-reduce(bytes) over 2 ranks: the same TP/DP rank of the first and the last stage

    With tied embeddings and pp > 1 the input embedding lives on the first stage and its copy, the output
    layer, on the last; both accumulate a gradient that must be summed before the optimizer step. Megatron-LM
    does it after the pipeline flush and the data-parallel gradient sync, outside any overlap (megatron/
    training.py train_step, 2021: "All-reduce word_embeddings' grad across first and last stages to ensure
    that word_embeddings parameters stay in sync"; Megatron-Core finalize_model_grads ->
    _allreduce_word_embedding_grads over the embedding group); DeepSpeed's PipelineEngine runs
    ReduceTiedGrads after the last BackwardPass, before ReduceGrads (deepspeed/runtime/pipe/schedule.py
    TrainSchedule.steps, v0.5.0-v0.6.5). The pair lies at either end of the pipeline, so it crosses the
    outermost tier the pipeline spans: priced as the slowest stage boundary's send/recv is
    (:func:`_stage_boundary_time`: the 2-rank placement ``groups.pipeline``, every GPU of a stage at once, the
    same per-flow taper).

    Multi-token prediction modules (``mtp_layers`` > 0) need the word embedding on the last stage too: Megatron-Core
    builds a copy there (gpt_model.py: "if self.pre_process or self.mtp_process: self.embedding = ...") and
    all-reduces its gradient with the first stage's as for tied embeddings (finalize_model_grads.py
    _get_shared_word_embedding_weight: "share_embeddings_and_output_weights or getattr(config, 'mtp_num_layers',
    0)", core_v0.15.0), so the same term applies to an untied model with MTP."""
    if not job.is_transformer:
        return np.zeros(1)
    sh = job.shape
    nbytes = vocab_shard_elements(job, g) * job.grad_bytes
    t = _stage_boundary_time(groups, np.asarray(nbytes, dtype=float), "allreduce")
    return np.asarray(np.where((sh.tied_embeddings | (sh.mtp_layers > 0)) & (g.pp > 1), t, 0.0))


def _tp_ep_group(g: StrategyGrid, groups: ParallelGroups) -> Any:
    """Megatron-Core's ``tp_ep`` group, the etp x ep expert ranks at stride 1 that the flex and allgather
    dispatchers run over: the EP group itself at etp 1."""
    etp = _etp(g)
    return groups.expert if not np.any(etp > 1) else place(g.ep * etp, 1.0, groups.network)


def sp_replicated_grad_allreduce(job: Job, g: StrategyGrid, groups: ParallelGroups, layers: Any,
                                 rank: Any) -> np.ndarray:
    """Seconds per step of the TP all-reduce of the whole-per-rank parameters' gradients under sequence parallelism:

        t = [sp, tp > 1] t_allreduce_tp((L_s n_layer + n_outside(rank)) g)

    with ``n_layer`` :func:`~scalemodel.cost.transformer.tp_whole_elements`' per layer (norms, router, row-parallel
    biases, MLA down-projections, LatentMoE projections), ``L_s`` the priced stage's layers, ``rank`` its pipeline
    rank, and ``n_outside`` the tensors outside the layers that rank holds, as
    :func:`scalemodel.cost.memory.params_per_gpu` places them: the final norm and the D MTP modules' whole tensors on
    the last rank, all of them at pp 1 (each rank reduces its own parameters' gradients; before chunker18 every stage
    was priced with all of them, a middle rank's final norm included). Not the learned position table, though every TP
    rank holds it whole: it is a plain ``torch.nn.Embedding`` with no ``sequence_parallel`` attribute
    (models/common/embeddings/language_model_embedding.py at d98e8a64dd), looked up for the whole sequence before
    ``scatter_to_sequence_parallel_region``, whose backward all-gathers, so every TP rank already holds the same
    gradient and finalize_model_grads does not reduce it (review19b: it was counted on rank 0). ``g`` the gradient
    bytes. With
    sequence parallelism each TP rank sees its own sequence shard, so these weights' gradients differ across the TP
    ranks and are summed: Megatron-Core ``finalize_model_grads`` -> ``_allreduce_non_tensor_model_parallel_grads``
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/distributed/finalize_model_grads.py: one coalesced all-reduce
    over the TP group of every param with ``sequence_parallel`` set: norms, the router (moe/router.py), and the
    TELinear ``duplicated`` weights, extensions/transformer_engine.py: "Reduce the gradient further on the TP
    group since the weight is duplicated across TP ranks"). It runs after the backward's data-parallel sync,
    before the optimizer: not overlapped."""
    if not job.is_transformer:
        return np.zeros(1)
    sh = job.shape
    w = transformer.tp_whole_elements(sh)
    r = np.asarray(rank, dtype=float)
    last = r >= g.pp - 1.0
    mtp = float(np.ravel(sh.mtp_weight_modules)[0])
    # the position table (w.position) is whole per TP rank but not sequence_parallel-marked: not reduced here
    outside = np.where(last, float(np.ravel(w.final_norm)[0]) + mtp * float(np.ravel(w.mtp_module)[0]), 0.0)
    n = np.asarray(layers, dtype=float) * float(np.ravel(w.per_layer)[0]) + outside
    nbytes = n * job.grad_bytes
    t = _collective("allreduce", np.asarray(nbytes, dtype=float), groups.tensor)
    return np.asarray(np.where(g.sequence_parallel & (g.tp > 1), t, 0.0))


def moe_a2a_steady_share(g: StrategyGrid) -> np.ndarray:
    """Share of the busiest (last) rank's forward and backward passes that run in the 1F1B steady state, where
    Megatron-Core's EP overlap pairs one micro-batch's forward with another's backward: (m V - w) / (m V) with
    w = min((V - 1) p + 1, m V) warm-up forwards (and as many cool-down backwards) on the last rank of the
    interleaved schedule (``forward_backward_pipelining_with_interleaving``; NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches`` lines 964-977: (p - r - 1) 2 +
    (V - 1) p, "one extra micro-batch forward step before the 1f1b stages" with overlap_moe_expert_parallel_comm,
    capped at m V; the extra one was left out until review17b), w = 1 without a pipeline (the first forward and the
    last backward run alone, ``forward_backward_no_pipelining`` with overlap_moe_expert_parallel_comm)."""
    m = microbatches(g).astype(float)
    p = g.pp.astype(float)
    v = np.where(g.schedule == ScheduleKind.INTERLEAVED, np.maximum(g.virtual_stages, 1), 1).astype(float)
    alone = np.where(p > 1, (v - 1.0) * p + 1.0, 1.0)
    return np.asarray(np.clip((m * v - alone) / (m * v), 0.0, 1.0))


def _with_moe_a2a_overlap(g: StrategyGrid, comp: dict[str, np.ndarray], mp: dict[str, np.ndarray],
                          refused: Any = False, fixed: Any = 0.0) -> dict[str, np.ndarray]:
    """EP all-to-alls hidden under another micro-batch's computation (``moe_a2a_overlap``).

    Megatron-Core --overlap-moe-expert-parallel-comm (with --delay-wgrad-compute, as Megatron-Bridge's
    moe_a2a_overlap sets them; NVIDIA/Megatron-LM@d98e8a64dd megatron/core/model_parallel_config.py, "Overlap EP
    A2A communications with independent computations of different micro-batches in 1f1b phase") merges the
    forward of one micro-batch with the backward of another, DeepSeek-V3's DualPipe overlap (DeepSeek-AI
    2024, arXiv 2412.19437, section 3.2.1): the two forward all-to-alls (dispatch, combine) of one micro-batch
    run under the other's backward compute, the two backward ones under its forward compute. Only compute not
    already hiding TP/CP traffic can hide them (never more than that compute), only in the steady state
    (:func:`moe_a2a_steady_share`), and the hidden traffic slows that compute (``contention``, via
    ``hidden_ep``, at the dispatcher's share of the SMs, strategy ``ep_dispatch_sms``):

        hidden_f = s min(e / 2, backward - hidden_bwd),  hidden_b = s min(e / 2, forward - hidden_fwd)
        exposed ep = ep - hidden_f - hidden_b,          e = ep - fixed

    ``fixed`` the part of ep no overlap hides: the alltoall dispatcher's counts all-gathers, which
    ``layer.mlp.preprocess`` runs in the attention node on the compute stream (models/gpt/fine_grained_callables.py
    ``submodule_pre_dispatch_forward`` lines 67-150, moe_layer.py line 491 ``dispatch_preprocess``), not in the
    dispatch node on the communication stream (docs/model.md#ep-probs-counts).
    """
    # where Megatron-Core would refuse the overlap (job.grid_from_strategy says so for one strategy; a planner
    # grid with the flag pinned also holds such candidates) the all-to-alls stay exposed
    on = (np.asarray(g.moe_a2a_overlap, dtype=bool) & (g.ep > 1) & (g.recompute != Recompute.FULL)
          & ~np.asarray(refused, dtype=bool)  # selective recompute of moe ("disable moe in recompute_modules ...")
          & ((g.pp <= 1) | (g.schedule == ScheduleKind.INTERLEAVED)))
    if not np.any(on):
        return mp
    share = moe_a2a_steady_share(g)
    per_pass = np.maximum(mp["ep"] - fixed, 0.0) / 2.0
    fwd_free = np.maximum(comp["forward"] - mp["hidden_fwd"], 0.0)
    bwd_free = np.maximum(comp["backward"] - mp["hidden_bwd"], 0.0)
    hid_f = np.where(on, share * np.minimum(per_pass, bwd_free), 0.0)  # forward a2a under the other's backward
    hid_b = np.where(on, share * np.minimum(per_pass, fwd_free), 0.0)  # backward a2a under the other's forward
    return dict(mp, ep=mp["ep"] - hid_f - hid_b, hidden_fwd=mp["hidden_fwd"] + hid_b,
                hidden_bwd=mp["hidden_bwd"] + hid_f, hidden_ep=mp.get("hidden_ep", 0.0) + hid_f + hid_b)
