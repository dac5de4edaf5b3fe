"""Which layers each pipeline rank, stage and virtual chunk holds, and the parameters that puts on a GPU.

The split of the model over the pipeline that :mod:`scalemodel.engine.step` prices: balanced, or uneven
(strategy first/last_stage_layers, first/last_chunk_layers, stage_layers: :func:`_stage_layers`); per rank where the
ranks differ in what they hold (hybrid layer patterns, first_k_dense, MTP, embedding/loss pinned to a rank:
:func:`_rank_layers`, :class:`_RankSplit`), the sub-jobs each kind of rank is priced as (:func:`_part_job`), the
rows of a candidate grid that share one split (:func:`_split_rows`), and the parameters per GPU of a stage or rank
(:func:`_params_per_gpu`, :func:`_rank_params_per_gpu`).

Memos of the last job's splits live here (_PART_MEMO, _KINDS_MEMO, _KINDS_RANKS_MEMO, _DP_JOB_MEMO, each keyed
"last"); the strategy's stage_layers codes live in :data:`scalemodel.engine.job.STAGE_SPLITS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from typing import Any, NamedTuple

import msgspec
import numpy as np

from scalemodel.choices import ScheduleKind
from scalemodel.cost import mamba as mamba_cost
from scalemodel.cost import memory, transformer
from scalemodel.engine.job import STAGE_SPLITS, Job, StrategyGrid, model_param_counts


def _stage_layers(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layers on (the last stage, a middle stage, the first stage) of the pipeline: each class its own count.

    Balanced split (Megatron's default when L divides; the planner's own split when it does not):
    L mod p stages take ceil(L/p) layers and the rest floor(L/p), the short ones last, since the last
    stage also runs the logits. Given first and/or last stage layers (Megatron-LM
    --decoder-first/last-pipeline-num-layers), the other stages share the remaining layers evenly.
    Without a pipeline the one stage holds every layer.

    The middle count is the middle ranks' (1 .. p-2) own, the most any of them holds (the balanced split's rank 1:
    ceil(L/p) where L mod p >= 2, else floor(L/p)); at p = 2, with no middle rank, rank 0's. Until uneven38 it was the
    busiest rank but the last, max(first, middle), so a first stage heavier than the middle ones priced every middle
    rank at its count (the three-class 1F1B bubble, the deferred-wgrad idle); the terms that want the busiest rank
    but the last take the first and the middle class each (step._evaluate, compute_floor, _dp_rank, the memory peak).
    """
    layers = float(job.shape.layers) if job.is_transformer else 1.0
    p = g.pp.astype(float)
    f, last = g.first_stage_layers.astype(float), g.last_stage_layers.astype(float)
    set_f, set_l = f >= 0, last >= 0
    n_mid = p - set_f - set_l
    rest = layers - np.where(set_f, f, 0.0) - np.where(set_l, last, 0.0)
    mid = np.maximum(rest, 0.0) / np.maximum(n_mid, 1.0)  # first + last > L: no layers left (_layers_split flags it)
    explicit = set_f | set_l
    ceil, floor = np.ceil(layers / p), np.floor(layers / p)
    last_n = np.where(explicit, np.where(set_l, last, mid), floor)
    first = np.where(explicit, np.where(set_f, f, mid), ceil)
    # rank 1 of the balanced split holds ceil(L/p) where at least 2 ranks take the extra layer
    middle = np.where(explicit, mid, np.where(np.mod(layers, np.maximum(p, 1.0)) >= 2, ceil, floor))
    middle = np.where(p >= 3, middle, first)
    single = p <= 1
    out = (np.where(single, layers, last_n), np.where(single, layers, middle), np.where(single, layers, first))
    out = _with_split_ranks(g, out)
    # a hybrid pattern's ranks of their own kinds (its '|' segments, or Megatron's split by count where a rank's kinds
    # are not the pattern's) are priced apart, every rank its own (_rank_layers); these counts stay the mean layer's
    return _with_chunk_ranks(job, g, out)


def _split_segments(code: int, p: int) -> tuple[str, ...] | None:
    """The virtual stages of a given per-stage split (strategy.stage_layers, :data:`scalemodel.engine.job.STAGE_SPLITS`
    ``code``) at pipeline degree ``p`` as layer strings ('t' per decoder layer, Megatron's layout letter), in
    Megatron-LM's order: virtual stage c of rank r is entry c p + r (pipeline_parallel_layer_layout.py
    ``PipelineParallelLayerLayout.__init__`` at d98e8a64dd: ``layout[vpp_rank * pp + pp_rank]``). None where the
    split does not fit p (its length not a multiple of p, or p < 2: :func:`_layers_split` flags it)."""
    split = STAGE_SPLITS[code]
    if p < 2 or len(split) % p:
        return None
    return tuple("t" * n for n in split)


def _split_rank_counts(g: StrategyGrid) -> list[tuple[np.ndarray, list[int]]]:
    """For each given per-stage split (strategy.stage_layers) and pp of the grid: (its candidates, each rank's layers,
    rank r holding its virtual stages r, p + r, ...); empty where no candidate has a split."""
    codes = np.asarray(g.stage_split)
    if not np.any(codes >= 0):
        return []
    shape = np.broadcast_shapes(np.shape(codes), np.shape(g.pp))
    cc, pp = np.broadcast_to(codes, shape), np.broadcast_to(g.pp, shape)
    out = []
    for code, p in sorted({(int(c), int(q)) for c, q in zip(cc[cc >= 0].ravel(), pp[cc >= 0].ravel(), strict=True)}):
        segs = _split_segments(code, p)
        if segs is not None:
            out.append((np.asarray((codes == code) & (g.pp == p)),
                        [sum(len(segs[c * p + r]) for c in range(len(segs) // p)) for r in range(p)]))
    return out


def _with_split_ranks(g: StrategyGrid, split: tuple[np.ndarray, np.ndarray, np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_stage_layers` for the candidates of a given per-stage split (strategy.stage_layers): (the last rank's
    layers, the most of any middle rank's (rank 0's at p = 2), rank 0's), rank r holding its virtual stages r, p + r,
    ...; the step prices every rank on its own (:func:`_rank_layers`), these counts are what the terms priced by
    class read."""
    last, other, first = split
    for on, ranks in _split_rank_counts(g):
        p = len(ranks)
        middle = max(ranks[1:-1]) if p >= 3 else ranks[0]
        last, other, first = (np.where(on, float(ranks[-1]), last), np.where(on, float(middle), other),
                              np.where(on, float(ranks[0]), first))
    return last, other, first


def _part_job(job: Job, layers: str) -> Job:
    """``job`` priced as a model of ``layers`` alone (a pipeline rank's or one segment's layers of a hybrid pattern,
    :func:`_rank_layers`): its kind counts n_k L / n and its MoE intervals (from each E of ``layers`` to
    the next, read cyclically over ``layers``: cost.mamba.moe_intervals) count x L / n, n = len(layers), L the pattern's
    layers. Every per-layer formula multiplies the mean layer (each kind at its share N_k / L) by a stage's layers,
    so a stage of n layers of this job holds exactly n_k layers of kind k: their compute, memory (weights, gradients,
    optimizer states, activations: memory.params_per_gpu's body N'_k x n / L = n_k layers of kind k, N'_k = n_k L / n
    this job's count), TP / CP / EP collectives (the
    per-layer counts and the attention and MoE shares of
    :func:`~scalemodel.engine.model_parallel_comm._model_parallel_comm`) and host intervals
    (:func:`~scalemodel.engine.step._host_wait`: count_i / L x n = the rank's own intervals). ``job`` itself where
    ``layers`` has the
    pattern's shares and intervals (equal segments: bit-identical), or no layers. The model-level totals (job.params,
    job.expert_params) are the pattern's, so the per-stage terms that read them as the stages' mean (FSDP copies,
    DeepSpeed accumulation) stay the mean's; the rank's DP sync and optimizer step take its own
    (:func:`_rank_dp_job`). Remembered
    per (job, counts, intervals), so that ranks of the same kinds are one job (one stage pricing)."""
    hy = job.shape.hybrid
    if hy is None:
        return _kinds_part_job(job, layers)
    n, L = len(layers), int(hy.layers)
    counts = tuple(layers.count(c) for c in "M*-E")
    intervals = mamba_cost.moe_intervals(layers)
    whole = (hy.mamba, hy.attention, hy.mlp, hy.moe)
    if n == 0 or (all(c * L == w * n for c, w in zip(counts, whole, strict=True))
                  and {b: c * L for b, c in intervals} == {b: c * n for b, c in hy.moe_intervals}):
        return job
    memo = _PART_MEMO.get("last")
    if memo is None or memo[0] is not job:
        memo = (job, {})
        _PART_MEMO["last"] = memo
    key = (counts, intervals)
    if key not in memo[1]:
        s = L / n
        new = msgspec.structs.replace(hy, mamba=counts[0] * s, attention=counts[1] * s, mlp=counts[2] * s,
                                      moe=counts[3] * s, moe_intervals=tuple((b, c * s) for b, c in intervals),
                                      segment_layers=(), layers_as_written="")
        memo[1][key] = msgspec.structs.replace(job, shape=msgspec.structs.replace(job.shape, hybrid=new))
    return memo[1][key]


#: :func:`_part_job`'s jobs of the last job asked for: (job, {(counts, intervals): part job})
_PART_MEMO: dict[str, tuple[Any, dict[Any, Job]]] = {}


def _model_kinds(job: Job) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(:func:`scalemodel.cost.transformer.layer_kinds`, its MoE intervals) of ``job``'s model, remembered for the
    last job asked for ("" for a hybrid pattern or a model of one kind)."""
    memo = _KINDS_MEMO.get("last")
    if memo is None or memo[0] is not job:
        deep = job.is_transformer and float(job.shape.layers) > MAX_PLACED_LAYERS
        kinds = transformer.layer_kinds(job.shape) if job.is_transformer and not deep else ""
        memo = (job, kinds, transformer.kind_intervals(kinds) if "e" in kinds else ())
        _KINDS_MEMO["last"] = memo
    return memo[1], memo[2]


#: The deepest model whose layers :func:`_kinds_ranks` places on their ranks by kind: it builds strings of the L
#: layers' kinds per split (O(L) time and memory; 10^7 layers took 73 s and 0.7 GB for one predict). No published
#: model has more than a few hundred layers; a deeper one keeps the mean layer on every rank, as before.
MAX_PLACED_LAYERS = 10_000

#: :func:`_model_kinds` of the last job asked for: (job, kinds, intervals)
_KINDS_MEMO: dict[str, tuple[Any, str, tuple[tuple[int, int], ...]]] = {}


def _kinds_part_job(job: Job, layers: str) -> Job:
    """:func:`_part_job` of a model that is not a hybrid pattern: ``layers`` a rank's (or segment's) layers as
    :func:`scalemodel.cost.transformer.layer_kinds` writes them ("d" dense MLP, "e" MoE; "t" a layer of the mean
    kind, a given split of a model of one kind). The part's shape carries them (Shape.rank_kinds): its MoE layers
    n_e L / n and, through :func:`~scalemodel.engine.step.moe_intervals`, its own MoE intervals x L / n, so that a
    stage of n layers of it
    holds exactly its n_e MoE and n - n_e dense layers (compute, memory, EP traffic, host waits; DP sync and
    optimizer through :func:`_rank_dp_job`). ``job`` itself where the rank's kinds and intervals are the model's
    shares (Mixtral, every layer MoE; a rank of DeepSeek-V3 with no dense layer is not: its share is 1, the model's
    58 / 61). Megatron-Core builds a rank's layers in order (TransformerBlock's layers get_transformer_layer_offset +
    i, NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_block.py), and the MoE layer spec comes
    from each layer's global number (moe_layer_freq, first_k_dense: gpt_layer_specs.py
    get_gpt_decoder_block_spec), so DeepSeek-V3's 3 dense layers sit on rank 0."""
    memo = _PART_MEMO.get("last")
    if memo is None or memo[0] is not job:
        memo = (job, {})
        _PART_MEMO["last"] = memo
    # by the rank's own string first: a split's ranks repeat the same few (DeepSeek-V3 at pp 32: 27 of "ee")
    found = memo[1].get(("layers", layers))
    if found is None:
        found = memo[1][("layers", layers)] = _kinds_part(job, layers, memo[1])
    return found


def _share(count: int, of: int) -> tuple[int, int]:
    """``count / of`` in lowest terms, as a (numerator, denominator) key: two shares are one key exactly where they
    are equal, as ``fractions.Fraction`` would make them, without importing it (1 ms, a regex compiled at import)."""
    g = math.gcd(count, of) or 1
    return count // g, of // g


def _kinds_part(job: Job, layers: str, parts: dict[Any, Job]) -> Job:
    """:func:`_kinds_part_job` of ``layers`` not yet asked for (``parts``: the part jobs of ``job`` by share)."""
    sh = job.shape
    n = len(layers)
    if n == 0 or set(layers) - {"d", "e"}:  # 't': a layer of a model of one kind
        return job
    kinds, whole_intervals = _model_kinds(job)
    if not kinds:
        return job
    L = float(sh.layers)
    n_e = layers.count("e")
    mine = {gap: c * L for gap, c in transformer.kind_intervals(layers)} if n_e else {}
    whole = {gap: c * n for gap, c in whole_intervals}
    if n_e * L == float(sh.moe_layers) * n and mine == whole:
        return job
    # by the rank's shares (MoE layers and intervals per layer), so that ranks of the same kinds in other counts
    # (a rank of 4 MoE layers and one of 3) are one job, one stage pricing
    key = ("kinds", _share(n_e, n), tuple(sorted((gap, _share(c, n)) for gap, c in
                                                 transformer.kind_intervals(layers))) if n_e else ())
    if key not in parts:
        parts[key] = msgspec.structs.replace(job, shape=msgspec.structs.replace(sh, rank_kinds=layers))
    return parts[key]


class _RankSplit(NamedTuple):
    """The pipeline ranks' own layers of a hybrid pattern for the candidates ``on`` (:func:`_rank_layers`)."""

    on: np.ndarray  # bool, broadcasting against the grid: the candidates this split is theirs
    p: int  # pipeline ranks
    ranks: list[str]  # rank r's layers, in the order it runs them
    chunks: list[str]  # with '|': the segments of virtual stage 0 (rank r's first chunk); without, the ranks'
    v: int  # virtual stages (segments / p with '|'; 1 without)
    piped: bool  # the pattern's '|' segments (else Megatron's split by count of a pattern without '|')
    segments: tuple[str, ...] = ()  # piped: every virtual stage's layers, stage c of rank r at c p + r


def _rank_layers(job: Job, g: StrategyGrid) -> list[_RankSplit] | None:
    """Each pipeline rank's layers of a hybrid pattern, for the candidates whose pipeline splits it (None for any
    other model: the even split of the mean layer).

    With ``|``: for each pp p >= 2 of the grid dividing the S segments, rank r holds segments r, p + r, ...,
    (v-1) p + r in that order (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/hybrid/hybrid_layer_allocation.py
    lines 466-467, ``select_pipeline_segment``; v = S / p). A segment may be empty ("Empty segments are allowed for
    pipeline balancing", tests/unit_tests/ssm/test_hybrid_layer_allocation.py ``test_empty_segment`` at d98e8a64dd):
    that rank or chunk holds no layer.

    Without ``|`` (:func:`_pipe_free_ranks`): for each (pp, first_stage_layers, last_stage_layers) of the grid's
    non-interleaved candidates (Megatron refuses virtual stages there), the ranks' runs of the pattern's characters
    in order, split by count as ``select_pipeline_segment`` does (lines 385-456), kept only where some rank's kinds or
    MoE intervals differ from the pattern's (:func:`_part_job`); elsewhere every rank is the mean layer's and the
    even split prices it as it is, to the bit."""
    hy = job.shape.hybrid if job.is_transformer else None
    if hy is None:
        memo = _KINDS_RANKS_MEMO.get("last")
        if memo is None or memo[0] is not job or memo[1] is not g:  # asked for again by each term of one pass
            memo = (job, g, _kinds_ranks(job, g))
            _KINDS_RANKS_MEMO["last"] = memo
        return memo[2]
    out: list[_RankSplit] = []
    if int(hy.segments) >= 2 and hy.segment_layers:
        segs = hy.segment_layers
        S = len(segs)
        for p in np.unique(np.asarray(g.pp)):
            p = int(p)
            if p >= 2 and S % p == 0:
                out.append(_RankSplit(np.asarray(g.pp == p), p, ["".join(segs[c * p + r] for c in range(S // p))
                                                                  for r in range(p)], list(segs[:p]), S // p, True,
                                      tuple(segs)))
        return out
    written = hy.layers_as_written
    if not written or not np.any(g.pp >= 2):
        return out
    shape = np.broadcast_shapes(np.shape(g.pp), np.shape(g.first_stage_layers), np.shape(g.last_stage_layers),
                                np.shape(g.schedule))
    pp, first, last = (np.broadcast_to(x, shape) for x in (g.pp, g.first_stage_layers, g.last_stage_layers))
    plain = np.broadcast_to(g.schedule != ScheduleKind.INTERLEAVED, shape)
    keys = np.stack([pp[plain & (pp >= 2)], first[plain & (pp >= 2)], last[plain & (pp >= 2)]], axis=-1)
    for p, f, lst in np.unique(keys.reshape(-1, 3), axis=0):
        ranks = _pipe_free_ranks(written, int(p), int(f), int(lst))
        if ranks is None or all(_part_job(job, s) is job for s in ranks):
            continue
        on = (pp == p) & (first == f) & (last == lst) & plain
        out.append(_RankSplit(on, int(p), ranks, ranks, 1, False))
    return out


#: :func:`_rank_layers` of the last (job, grid) of a model that is not a hybrid pattern: (job, grid, splits)
_KINDS_RANKS_MEMO: dict[str, tuple[Any, Any, list[Any] | None]] = {}


def _kinds_ranks(job: Job, g: StrategyGrid) -> list[_RankSplit] | None:
    """Each pipeline rank's layers of a model that is not a hybrid pattern: a given per-stage split's
    (:func:`_given_ranks`), and where the model's MLP kind varies by position (:func:`scalemodel.cost.transformer
    .layer_kinds`: DeepSeek-V3's 3 leading dense layers, an MoE layer every e-th) the ranks of every split by count,
    for the candidates where some rank's kinds differ from the model's shares (:func:`_kinds_part_job`): Megatron-Core
    places the layers in order, rank r of a 1F1B pipeline the r-th run of :func:`_pipe_free_ranks` (the balanced split,
    or first/last_stage_layers), an interleaved one its virtual stages r, p + r, ... of L / (p v) layers each
    (pipeline_parallel_layer_layout.py ``layout[vpp_rank * pp + pp_rank]`` at d98e8a64dd), the first and last chunks
    first/last_chunk_layers where given (DeepSeek-V3's "Et*4|(t*4|)*14tmL": 4, 14 x 4, 1). Each rank is then priced
    on its own layers (compute, memory, EP traffic, host waits, DP sync and optimizer), as a hybrid pattern's ranks
    are; every other candidate on the mean layer. None where there are no such candidates."""
    given = _given_ranks(job, g)
    kinds = _model_kinds(job)[0]
    if "d" not in kinds:  # one kind (every layer MoE, or no MoE layer): every rank's layers are the mean layer
        return given
    out: list[_RankSplit] = []
    for sp in given or ():  # a given split's 't' layers, their kinds by position (segments in model order)
        segs, at = [], 0
        for seg in sp.segments:
            segs.append(kinds[at:at + len(seg)])
            at += len(seg)
        ranks = ["".join(segs[c * sp.p + r] for c in range(sp.v)) for r in range(sp.p)]
        out.append(sp._replace(ranks=ranks, chunks=segs[:sp.p], segments=tuple(segs)))
    shape = np.broadcast_shapes(*(np.shape(x) for x in (g.pp, g.first_stage_layers, g.last_stage_layers, g.schedule,
                                                        g.stage_split, g.virtual_stages, g.first_chunk_layers,
                                                        g.last_chunk_layers)))
    pp, first, last, v = (np.broadcast_to(x, shape) for x in (g.pp, g.first_stage_layers, g.last_stage_layers,
                                                               g.virtual_stages))
    free = np.broadcast_to(np.asarray(g.stage_split) < 0, shape) & (pp >= 2)
    inter = np.broadcast_to(g.schedule == ScheduleKind.INTERLEAVED, shape)
    plain = free & ~inter
    for p, f, lst in _unique_rows(plain, g.pp, g.first_stage_layers, g.last_stage_layers):
        ranks_or_none = _pipe_free_ranks(kinds, int(p), int(f), int(lst))
        if ranks_or_none is None or all(_part_job(job, x) is job for x in ranks_or_none):
            continue
        on = (pp == p) & (first == f) & (last == lst) & plain
        out.append(_RankSplit(on, int(p), ranks_or_none, ranks_or_none, 1, False))
    # interleaved: p v chunks in model order, the first and last of first/last_chunk_layers where given, the others
    # the rest evenly (_chunk_layers; _chunk_split_ok flags a split that leaves them unequal)
    f_chunk, l_chunk = (np.broadcast_to(x, shape) for x in (g.first_chunk_layers, g.last_chunk_layers))
    sel = free & inter
    L = len(kinds)
    for p, vv, fc, lc in _unique_rows(sel, g.pp, g.virtual_stages, g.first_chunk_layers, g.last_chunk_layers):
        p, vv, fc, lc = int(p), int(vv), int(fc), int(lc)
        n_chunks = p * vv
        rest, n_mid = L - max(fc, 0) - max(lc, 0), n_chunks - (fc >= 0) - (lc >= 0)
        if vv < 2 or n_mid < 1 or rest < n_mid or rest % n_mid:
            continue  # _layers_split / _chunk_split_ok flag these candidates
        mid = rest // n_mid
        sizes = [fc if fc >= 0 else mid] + [mid] * (n_chunks - 2) + [lc if lc >= 0 else mid]
        edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        segments = tuple(kinds[edges[i]:edges[i + 1]] for i in range(n_chunks))
        if all(_part_job(job, x) is job for x in segments):
            continue
        ranks = ["".join(segments[c * p + r] for c in range(vv)) for r in range(p)]
        on = (pp == p) & (v == vv) & (f_chunk == fc) & (l_chunk == lc) & sel
        out.append(_RankSplit(on, p, ranks, list(segments[:p]), vv, True, segments))
    return out if out or given is not None else None


def _unique_rows(mask: np.ndarray, *cols: Any) -> np.ndarray:
    """``np.unique(np.stack([c[mask] for c in cols], -1), axis=0)`` of ``cols`` broadcast to ``mask``'s shape (the
    distinct value rows where ``mask``, sorted), the mask first reduced (np.any) over the axes along which no column
    varies (the planner's grid is 10^5 - 10^6 candidates; its pp and stage-layer fields vary along one axis)."""
    mask = np.asarray(mask, dtype=bool)
    small = np.broadcast_shapes(*(np.shape(c) for c in cols))
    small = (1,) * (mask.ndim - len(small)) + tuple(small)
    axes = tuple(i for i, (a, b) in enumerate(zip(mask.shape, small, strict=True)) if b == 1 and a != 1)
    if axes:
        mask = np.any(mask, axis=axes, keepdims=True)
    keys = np.stack([np.broadcast_to(c, mask.shape)[mask] for c in cols], axis=-1)
    return np.unique(keys.reshape(-1, len(cols)), axis=0)


def _given_ranks(job: Job, g: StrategyGrid) -> list[_RankSplit] | None:
    """Each pipeline rank's layers of a given per-stage split (strategy.stage_layers) of a model of one layer kind (a
    dense or MoE transformer: every layer the mean layer), for the candidates that take it: as a hybrid pattern's
    '|' segments are (the same pricing: every rank its own compute, memory, TP / CP / EP traffic, host waits, DP sync
    and optimizer step, the step at the busiest rank's pace; interleaved, rank r's chunks its virtual stages r, p + r,
    ...). None for a model without such candidates (the even split, or first/last stage layers, by class)."""
    if not job.is_transformer:
        return None
    codes = np.asarray(g.stage_split)
    if not np.any(codes >= 0):
        return None
    shape = np.broadcast_shapes(np.shape(codes), np.shape(g.pp))
    cc, pp = np.broadcast_to(codes, shape), np.broadcast_to(g.pp, shape)
    out: list[_RankSplit] = []
    for code, p in sorted({(int(c), int(q)) for c, q in zip(cc[cc >= 0].ravel(), pp[cc >= 0].ravel(), strict=True)}):
        segs = _split_segments(code, p)
        if segs is None:
            continue  # _layers_split flags these candidates
        v = len(segs) // p
        ranks = ["".join(segs[c * p + r] for c in range(v)) for r in range(p)]
        out.append(_RankSplit(np.asarray((g.stage_split == code) & (g.pp == p)), p, ranks, list(segs[:p]), v, True,
                              segs))
    return out


def _pipe_free_ranks(layers: str, p: int, first: int, last: int) -> list[str] | None:
    """The p pipeline ranks' layers of a hybrid pattern without ``|`` (``layers`` as written), as Megatron-LM's
    ``select_pipeline_segment`` splits it (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/models/hybrid/hybrid_layer_allocation.py lines 385-456): with ``first`` and/or ``last`` stage
    layers (>= 0; -1 not given: --decoder-first/last-pipeline-num-layers) rank 0 the first ``first``, rank p-1 the
    last ``last``, the ranks between the rest evenly (it refuses a remainder), in order; else L / p each in order
    (it refuses L not divisible by p; the balanced split every model takes here then, :func:`_stage_layers`: the first
    L mod p ranks one layer more). None where :func:`_layers_split` refuses the split (no rank is priced from it)."""
    L = len(layers)
    if first >= 0 or last >= 0:
        n_mid = p - (first >= 0) - (last >= 0)
        rest = L - max(first, 0) - max(last, 0)
        if rest < 0 or (n_mid > 0 and (rest < n_mid or rest % n_mid)) or (n_mid <= 0 and rest != 0):
            return None
        mid = rest // n_mid if n_mid > 0 else 0
        sizes = ([first] if first >= 0 else []) + [mid] * max(n_mid, 0) + ([last] if last >= 0 else [])
    else:
        if p > L:
            return None
        q, extra = divmod(L, p)
        sizes = [q + 1] * extra + [q] * (p - extra)
    edges = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [layers[edges[r]:edges[r + 1]] for r in range(p)]


def _rank_dp_job(job: Job, layers: str) -> Job:
    """:func:`_part_job` with the model-level parameter counts of its own kinds (``params`` and ``expert_params`` of a
    model of N'_k = n_k L / n layers of each kind: :func:`scalemodel.engine.job.model_param_counts`), for the terms
    that read them per stage: :func:`_params_per_gpu` x the stage's share n / (L / pp) is then the rank's own

        dense  = sum_k n_k p_k / tp (tp-split) + its whole-per-rank tensors + n / L of the tensors outside the layers
        expert = n_E x one E layer's routed experts / (etp ep) (+ n / L of an MoE MTP block's)

    (the tensors outside the layers spread over the stages as the even split spreads them), its data-parallel buckets,
    gradient sync and optimizer step (:func:`~scalemodel.engine.dp_comm._dp_comm`,
    :func:`~scalemodel.engine.dp_comm._optimizer_time`). ``job`` itself where the part is."""
    part = _part_job(job, layers)
    if part is job:
        return job
    memo = _DP_JOB_MEMO.get("last")
    if memo is None or memo[0] is not job:
        memo = (job, {})
        _DP_JOB_MEMO["last"] = memo
    if id(part) not in memo[1]:
        params, expert = model_param_counts(part.shape)
        # the part held: its id stays
        memo[1][id(part)] = (part, msgspec.structs.replace(part, params=params, expert_params=expert))
    return memo[1][id(part)][1]


#: :func:`_rank_dp_job`'s jobs of the last job asked for: (job, {id(part job): (part job, its data-parallel job)})
_DP_JOB_MEMO: dict[str, tuple[Any, dict[int, tuple[Job, Job]]]] = {}


def _rank_params(job: Job, g: StrategyGrid, layers: str, rank: int) -> np.ndarray:
    """Parameters one GPU of pipeline rank ``rank``, of ``layers``, holds before ZeRO sharding (dense + expert), as
    its data-parallel sync and optimizer step count them: its own layers (:func:`_part_job`) and the tensors outside
    the layers where they live (:func:`_rank_params_per_gpu`)."""
    dense, expert = _rank_params_per_gpu(_part_job(job, layers), g, float(len(layers)), rank)
    return np.asarray(dense + expert, dtype=float)


def _dp_ranks(job: Job, g: StrategyGrid, splits: list[_RankSplit] | None) -> list[tuple[np.ndarray, _RankSplit, int]]:
    """The pipeline rank whose data-parallel sync and optimizer step the step prices, per candidate of each split of
    :func:`_rank_layers`: the one holding the most parameters (:func:`_rank_params`; the gradients it reduces and the
    states it steps), the last rank where it holds as many, else the first of equal ones, as the even split takes the
    stage of the most layers, the last one on a tie (:func:`~scalemodel.engine.step.evaluate`). As (candidates, split,
    rank r), one per rank
    some candidate takes. Equal shares: the rank of the most layers, as without a split."""
    out: list[tuple[np.ndarray, _RankSplit, int]] = []
    for sp in splits or ():
        # ranks of the same layers hold the same parameters, but for the first (embedding) and the last (head)
        priced: dict[tuple[str, int], np.ndarray] = {}
        own = []
        for r, s in enumerate(sp.ranks):
            key = (s, 0 if r == 0 else (2 if r == sp.p - 1 else 1))
            if key not in priced:
                priced[key] = _rank_params(job, g, s, r)
            own.append(priced[key])
        best, most = np.zeros(np.shape(own[0]), dtype=int), own[0]
        for r in range(1, sp.p - 1):
            take = own[r] > most
            best, most = np.where(take, r, best), np.where(take, own[r], most)
        best = np.where(own[-1] >= most, sp.p - 1, best)
        on = np.broadcast_to(sp.on, np.broadcast_shapes(np.shape(sp.on), np.shape(best)))
        for r in np.unique(np.broadcast_to(best, on.shape)[on]):
            out.append((on & (best == r), sp, int(r)))
    return out


def _splits_cover(g: StrategyGrid, splits: list[_RankSplit] | None) -> bool:
    """True where every candidate of ``g`` is one of ``splits``' (:func:`_rank_layers`; a row group of
    :func:`_split_rows`): the terms each split's ranks price on their own then replace the mean layer's everywhere."""
    if not splits:
        return False
    shape = np.broadcast_shapes(g.shape, *(np.shape(sp.on) for sp in splits))
    covered = np.zeros(shape, dtype=bool)
    for sp in splits:
        covered |= np.broadcast_to(np.asarray(sp.on, dtype=bool), shape)
    return bool(np.all(covered))


class _Rows(NamedTuple):
    """One group of a grid's rows along its first axis (:func:`_split_rows`): their positions and the grid of them."""

    rows: np.ndarray
    grid: StrategyGrid


def _split_rows(job: Job, g: StrategyGrid) -> list[_Rows] | None:
    """The grid's rows (first axis) grouped by the hybrid pattern's rank split they run (:func:`_rank_layers`; one
    group for the rows of no split), where there are several groups and each split's candidates are whole rows (the
    planner's configurations: pp, the stage layers and the schedule on the first axis). Each rank of a split is then
    priced on its own rows, not on every candidate of the grid (:func:`~scalemodel.engine.step.evaluate`,
    :func:`~scalemodel.engine.stage_memory.memory_peak_stage`,
    :func:`~scalemodel.engine.step.compute_floor`, :func:`~scalemodel.engine.step.dp_exposed_floor` run once per group;
    the same values, every cost being per
    candidate). None otherwise: one pass over the grid."""
    splits = _rank_layers(job, g)
    shape = g.shape
    if not splits or len(shape) == 0 or shape[0] <= 1:
        return None
    nd, n = len(shape), shape[0]
    key = np.full(n, -1)
    for i, sp in enumerate(splits):
        on = np.asarray(sp.on)
        dims: tuple[int, ...] = (1,) * (nd - on.ndim) + tuple(on.shape)
        on = on.reshape(dims)
        if any(d != 1 for d in dims[1:]):
            return None  # a split that varies along another axis: priced over the whole grid
        key = np.where(np.broadcast_to(on.reshape(-1), (n,)), i, key)
    groups = np.unique(key)
    if len(groups) == 1:
        return None
    out = []
    for k in groups:
        rows = np.nonzero(key == k)[0]
        out.append(_Rows(rows, msgspec.structs.replace(g, **{name: _cut_rows(getattr(g, name), rows, n, nd)
                                                             for name in g.__struct_fields__})))
    return out


def _cut_rows(a: Any, rows: np.ndarray, n: int, nd: int) -> Any:
    """``a`` at ``rows`` of the first axis of a grid of ``nd`` axes and ``n`` rows, where it spans that axis."""
    x = np.asarray(a)
    return x[rows] if x.ndim == nd and x.shape[0] == n and n > 1 else a


def _join_rows(parts: list[tuple[np.ndarray, Any]], n: int, nd: int) -> np.ndarray:
    """The values of :func:`_split_rows`' groups put back at their rows of the first axis (``n`` rows, ``nd`` axes)."""
    vals = [np.asarray(v) for _rows, v in parts]
    vals = [v.reshape((1,) * (nd - v.ndim) + v.shape) for v in vals]
    trailing = np.broadcast_shapes(*(v.shape[1:] for v in vals))
    out = np.empty((n,) + tuple(trailing), dtype=np.result_type(*vals))
    for (rows, _v), v in zip(parts, vals, strict=True):
        out[rows] = v
    return out


def _join_results(parts: list[tuple[np.ndarray, Any]], n: int, nd: int) -> Any:
    """:func:`_join_rows` of every array (and dict of arrays) field of like results (a msgspec Struct or a
    NamedTuple)."""
    first = parts[0][1]

    def join(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {k: join([v[k] for v in values]) for k in values[0]}
        return _join_rows([(rows, v) for (rows, _r), v in zip(parts, values, strict=True)], n, nd)

    if isinstance(first, tuple):  # NamedTuple
        return type(first)(*(join([r[i] for _rows, r in parts]) for i in range(len(first))))
    return msgspec.structs.replace(first, **{f: join([getattr(r, f) for _rows, r in parts])
                                             for f in first.__struct_fields__})


class _RowsMemo(MutableMapping[str, np.ndarray]):
    """A view of a memo (:func:`~scalemodel.engine.stage_memory.memory_peak_stage`'s ``activations``) whose keys carry
    a row group's tag, so that the
    groups of :func:`_split_rows` keep their own arrays in one memo."""

    def __init__(self, memo: MutableMapping[str, np.ndarray], tag: str) -> None:
        self.memo, self.tag = memo, tag

    def __getitem__(self, key: str) -> np.ndarray:
        return self.memo[f"{self.tag} {key}"]

    def __setitem__(self, key: str, value: np.ndarray) -> None:
        self.memo[f"{self.tag} {key}"] = value

    def __delitem__(self, key: str) -> None:
        del self.memo[f"{self.tag} {key}"]

    def __iter__(self) -> Iterator[str]:
        return (k[len(self.tag) + 1:] for k in self.memo if k.startswith(self.tag + " "))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _layers_split(job: Job, g: StrategyGrid) -> np.ndarray:
    """True where the layers split into the pipeline as asked (see :func:`_stage_layers`)."""
    layers = int(job.shape.layers)
    v = np.where(g.schedule == ScheduleKind.INTERLEAVED, g.virtual_stages, 1)
    set_f, set_l = g.first_stage_layers >= 0, g.last_stage_layers >= 0
    explicit = set_f | set_l
    n_mid = g.pp - set_f - set_l
    rest = layers - np.where(set_f, g.first_stage_layers, 0) - np.where(set_l, g.last_stage_layers, 0)
    even_rest = np.where(n_mid > 0, (rest >= n_mid) & (rest % np.maximum(n_mid, 1) == 0), rest == 0)
    interleaved = g.schedule == ScheduleKind.INTERLEAVED
    ok_explicit = (g.pp >= 2) & (rest >= 0) & even_rest & ~interleaved
    ok_balanced = np.where(interleaved, layers % (g.pp * v) == 0, g.pp <= layers)
    ok = np.where(explicit, ok_explicit, ok_balanced)
    ok = np.where(_chunked(g), _chunk_split_ok(job, g) & ~explicit, ok)
    given = np.asarray(g.stage_split) >= 0
    if np.any(given):
        # a given per-stage split (strategy.stage_layers): pp x v counts (Megatron-LM's layout asserts its stages
        # divisible by pp and takes v = stages / pp), alone (predict refuses it beside first/last stage or chunk
        # layers; a hybrid pattern or a sum other than the model's layers: job.check_stage_layers)
        lengths = np.asarray([len(x) for x in STAGE_SPLITS] or [0])[np.maximum(np.asarray(g.stage_split), 0)]
        fits = (g.pp >= 2) & (lengths == g.pp * v) & ~explicit & ~_chunked(g)
        ok = np.where(given, fits, ok)
    hy = job.shape.hybrid
    if hy is not None and int(hy.segments) > 1:
        # a hybrid pattern's '|' segments are the pipeline's stages: Megatron-LM's validate_args (NVIDIA/Megatron-LM
        # megatron/training/arguments.py at d98e8a64) asserts no --decoder-first/last-pipeline-num-layers (nor a
        # layout or embedding/loss accounting) with pipes and segments divisible by pp, and derives the virtual
        # stages as segments / pp; select_pipeline_segment (megatron/core/models/hybrid/hybrid_layer_allocation.py)
        # builds each rank's segment. A pattern of 2 segments at pp 4, or with first_stage_layers, was priced.
        # The segments need not be equal nor the layers divisible by pp x v (each chunk is its own segment)
        ok = np.where(g.pp <= 1, ok, ~explicit & ~_chunked(g) & (g.pp * v == int(hy.segments)))
    return np.asarray(ok)


def _chunked(g: StrategyGrid) -> np.ndarray:
    """Candidates whose interleaved pipeline has a given first and/or last model-chunk size."""
    return np.asarray((g.schedule == ScheduleKind.INTERLEAVED) & ((g.first_chunk_layers >= 0)
                                                                 | (g.last_chunk_layers >= 0)))


def _chunk_layers(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, middle, last) model-chunk layers of an interleaved pipeline of pp x v chunks: the given first
    and/or last chunk sizes, the other chunks sharing the rest of the layers evenly (Megatron-Core's
    account-for-embedding/loss split, :func:`scalemodel.cost.pipeline.megatron_chunk_layers`, or a
    --pipeline-model-parallel-layout whose middle chunks are equal)."""
    layers = float(job.shape.layers) if job.is_transformer else 1.0
    chunks = (g.pp * np.maximum(g.virtual_stages, 1)).astype(float)
    set_f, set_l = g.first_chunk_layers >= 0, g.last_chunk_layers >= 0
    rest = layers - np.where(set_f, g.first_chunk_layers, 0) - np.where(set_l, g.last_chunk_layers, 0)
    mid = np.maximum(rest, 0.0) / np.maximum(chunks - set_f - set_l, 1.0)  # none left: _chunk_split_ok flags it
    out = (np.where(set_f, g.first_chunk_layers, mid).astype(float), mid,
           np.where(set_l, g.last_chunk_layers, mid).astype(float))
    return out  # a hybrid pattern's '|' segments are priced apart, each chunk its own (_segment_pipeline_total)


def _chunk_split_ok(job: Job, g: StrategyGrid) -> np.ndarray:
    """True where the given first/last chunk sizes leave every other chunk the same whole number (>= 1)."""
    first, mid, last = _chunk_layers(job, g)
    return np.asarray((g.pp >= 2) & (g.virtual_stages >= 2) & (mid >= 1.0) & (mid == np.floor(mid)))


def _with_chunk_ranks(job: Job, g: StrategyGrid, split: tuple[np.ndarray, np.ndarray, np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_stage_layers` for chunked interleaved candidates: rank 0 holds the first chunk and v-1 middle
    ones, ranks 1 .. p-2 v middle chunks, rank p-1 v-1 middle chunks and the last (the middle class at p >= 3,
    rank 0's at p = 2, as the split by stage)."""
    if not np.any(_chunked(g)):
        return split
    first, mid, last = _chunk_layers(job, g)
    v = np.maximum(g.virtual_stages, 1).astype(float)
    rank0, middle, rank_last = first + (v - 1.0) * mid, v * mid, (v - 1.0) * mid + last
    other = np.where(g.pp >= 3, middle, rank0)
    c = _chunked(g)
    return np.where(c, rank_last, split[0]), np.where(c, other, split[1]), np.where(c, rank0, split[2])


def _etp(g: StrategyGrid) -> np.ndarray:
    """Expert tensor-parallel degree: the strategy's etp, else tp (Megatron-Core's default)."""
    return np.asarray(np.where(g.etp > 0, g.etp, g.tp))


def _params_per_gpu(job: Job, g: StrategyGrid) -> tuple[np.ndarray, np.ndarray]:
    """(non-expert, expert) parameters held by one GPU before ZeRO sharding (the stages' mean); experts split
    etp x ep ways. The tensors every TP rank holds whole (:func:`~scalemodel.cost.transformer.tp_replicated_elements`:
    norms, the router, row-parallel biases, MLA's down-projections, LatentMoE's projections, the position table, the
    MTP modules' such tensors; Megatron-Core builds them at full size on each TP rank, NVIDIA/Megatron-LM@d98e8a64dd,
    see :func:`~scalemodel.cost.transformer.tp_whole_elements`) count whole per rank, as
    :func:`scalemodel.cost.memory.params_per_gpu` holds them: their gradients, optimizer states and DP traffic
    (docs/model.md#tp-whole-params); the other non-expert parameters / tp:

        dense = (P - P_expert - W) / (tp pp) + W / pp,    W = L n_layer + n_outside"""
    if job.is_transformer:
        per_layer, outside = transformer.tp_replicated_elements(job.shape)
        dup = float(job.shape.layers) * float(np.ravel(per_layer)[0]) + float(np.ravel(outside)[0])
    else:
        dup = 0.0
    dense = (job.params - job.expert_params - dup) / (g.tp * g.pp) + dup / g.pp
    expert = job.expert_params / (_etp(g) * g.pp * g.ep)
    return dense, expert


def _stage_params_per_gpu(job: Job, g: StrategyGrid, layers: Any = None, rank: Any = None
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) parameters one GPU holds: :func:`_params_per_gpu` (the stages' mean) with ``layers`` None;
    with ``rank`` (the pipeline rank, 0 .. pp-1) pipeline rank ``rank``'s own, a stage of ``layers`` decoder layers
    (:func:`_rank_params_per_gpu`: the embedding on rank 0, the final norm, output layer and MTP modules on the last);
    else (a model without layers) ``layers`` / (L / pp) of the mean."""
    dense, expert = _params_per_gpu(job, g)
    if layers is None:
        return dense, expert
    if rank is not None and job.is_transformer:
        return _rank_params_per_gpu(job, g, layers, rank)
    share = np.asarray(layers, dtype=float) * g.pp / float(job.shape.layers)
    return dense * share, expert * share


def _rank_params_per_gpu(job: Job, g: StrategyGrid, layers: Any, rank: Any, post_process: bool = True
                         ) -> tuple[np.ndarray, np.ndarray]:
    """(dense, expert) parameters one GPU of pipeline rank ``rank`` holds before ZeRO sharding, a rank of ``layers``
    decoder layers of ``job`` (a hybrid pattern's rank: its :func:`_part_job`, whose layers are the rank's own kinds):

        P_r = layers x (its layers' parameters) + [r = 0] (V h + positions) + [r = p-1] (final norm + output layer
              V h + D MTP modules + with D > 0 the embedding copy MTP reads)       (each TP-split tensor / tp)

    as :func:`scalemodel.cost.memory.params_per_gpu` places them, the same count the memory model prices for that
    rank. Megatron-Core builds the word embedding where ``pre_process`` (pipeline rank 0) and the final norm and
    ``output_layer`` where ``post_process`` (the last rank); tied, the last rank still allocates an output weight of
    its own (``skip_weight_param_allocation = pre_process and share_embeddings_and_output_weights``) whose gradient
    the embedding group all-reduces (:func:`~scalemodel.engine.model_parallel_comm.tied_embedding_allreduce`)
    (NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/models/gpt/gpt_model.py ``GPTModel.__init__``; megatron/core/models/common/language_module/
    language_module.py ``setup_embeddings_and_output_layer``); nanotron puts its token embedding on rank 0 and the
    final norm and lm_head on the last (its logged rank-0 "Local number of parameters" is rank 0's layers + the
    embedding, tests/test_review17d.py). Each rank's DDP buffer holds exactly these
    parameters: its gradient sync and optimizer step are its own. At pp = 1 the one rank holds the whole model:
    :func:`_params_per_gpu` to the bit.

    ``post_process`` False: a model chunk of the rank before its last (interleaved), which Megatron-Core builds
    without the final norm, output layer and MTP modules even on the last rank (``post_process`` is true on the last
    virtual stage only: NVIDIA/Megatron-LM@d98e8a64dd megatron/training/training.py ``get_model``'s build_model L2394,
    ``is_pp_last_stage(...) and is_vp_last_stage(vp_stage=i, ...)``)."""
    sh = job.shape
    r = np.asarray(rank)
    last = (r >= g.pp - 1) & post_process
    d_mtp = float(sh.mtp_layers)
    pg = memory.params_per_gpu(sh, tp=g.tp, pp=g.pp, ep=g.ep, etp=_etp(g),
                               stage_layers=np.maximum(np.asarray(layers, dtype=float), 0.0),
                               embedding=(r == 0) | (last & (d_mtp > 0)), head=last,
                               mtp_modules=np.where(last, d_mtp, 0.0))
    return np.asarray(pg.dense, dtype=float), np.asarray(pg.expert, dtype=float)


def microbatches(g: StrategyGrid) -> np.ndarray:
    """Micro-batches per step and replica, m = B / (dp b) (at least 1): the pipeline's and memory's m."""
    return np.maximum(g.global_batch // np.maximum(g.dp * g.micro_batch, 1), 1).astype(float)
