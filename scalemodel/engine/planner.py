"""The planner: enumerate every valid parallelisation of a job, evaluate them all in vectorised
batches with :func:`scalemodel.engine.step.evaluate`, drop the infeasible ones (counted by reason)
and rank the rest by an objective.

The search space is a broadcast grid, never a Python loop over candidates:

- a *configuration* axis (length K) of valid (dp, tp, pp, cp, ep, micro-batch, schedule, virtual
  stages) tuples, built by vectorised filtering: tp, pp, cp are divisors of the GPU count whose
  product divides it (dp = gpus / (tp pp cp)), tp <= heads, pp <= layers, cp <= seq_len / 2, ep
  divides dp and the expert count (MoE only); micro-batches are the powers of two dividing the
  per-replica batch B / dp; pipelines (pp > 1) try 1F1B, GPipe, ZB-H1 and interleaved:v for every
  v >= 2 with layers divisible by pp v;
- then ZeRO stage 0-3, recompute none/selective/full, sequence parallelism off/on (on only when
  tp > 1) and the DP collective algorithm (auto and every all-reduce algorithm), each on its own
  axis, so :mod:`scalemodel.engine.step` computes each cost on the sub-grid of the choices it
  depends on and broadcasts.

Structural duplicates (sequence parallelism with tp = 1, selective recompute for a generic model)
are masked out and not counted. Divisibility rules that the step model checks itself (layers by
pp, heads by tp, sequence by 2 cp, micro-batches by pp for interleaving, the global batch by dp)
and memory are left to :func:`evaluate`, so they show up in ``infeasible_by_reason``.

Ranking: ``throughput`` maximises tokens/s; ``time-to-train`` maximises tokens/s x statistical
efficiency (the staleness penalty of the sync mode, :mod:`scalemodel.cost.sync`); ``cost``
minimises time-to-train x gpus x price per GPU-second. Ties go to the simpler candidate (earlier on
every axis: auto algorithm, ZeRO 0, no recompute, no sequence parallelism, smaller degrees). The
ranked list shows each plan once, with its best DP collective algorithm (candidates that differ only
in the algorithm are variants of one plan); every candidate is still evaluated and counted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from scalemodel.choices import Algorithm, Recompute, ScheduleKind, SyncKind, Zero, parse_sync
from scalemodel.engine.job import Job, StrategyGrid, build_job, grid_from_arrays
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.predict import Prediction, result_at
from scalemodel.engine.step import REASON_KEYS, evaluate
from scalemodel.errors import InputError
from scalemodel.specs.constraints import Constraints, normalize_constraints
from scalemodel.specs.constraints import keep as allowed_by

OBJECTIVES = ("throughput", "time-to-train", "cost")
#: Candidates per evaluate() call: bounds memory (a few hundred MB) and paces the progress bar.
CHUNK_CANDIDATES = 400_000
#: ZeRO stages the planner searches.
ZERO_STAGES = (Zero.NONE, Zero.OPTIMIZER, Zero.GRADIENTS, Zero.PARAMETERS)

# --------------------------------------------------------------------------------------------
# search space


def _divisors(n: int) -> np.ndarray:
    small = np.arange(1, math.isqrt(n) + 1)
    small = small[n % small == 0]
    return np.unique(np.concatenate([small, n // small]))


def configurations(job: Job, gpus: int, global_batch: int, constraints: Constraints | None = None
                   ) -> dict[str, np.ndarray]:
    """The configuration axis: 1-D arrays dp, tp, pp, cp, ep, micro_batch, schedule, virtual_stages
    of every valid combination (vectorised filtering of a cartesian product; see module docstring)."""
    c = constraints or {}
    div = _divisors(gpus)
    if job.is_transformer:
        sh = job.shape
        layers, heads, experts = int(sh.layers), int(sh.heads), int(sh.moe_experts)
        tp_c = div[div <= heads]
        pp_c = div[div <= layers]
        cp_c = div[(div == 1) | (2 * div <= job.seq_len)]
        ep_c = div[div <= experts] if experts > 0 else np.asarray([1])
    else:
        layers = 1
        tp_c = pp_c = cp_c = ep_c = np.asarray([1])
    for name, axis in (("tp", "tp_c"), ("pp", "pp_c"), ("cp", "cp_c"), ("ep", "ep_c")):
        if name in c:
            arr = {"tp_c": tp_c, "pp_c": pp_c, "cp_c": cp_c, "ep_c": ep_c}[axis]
            arr = arr[allowed_by(arr, c[name])]
            if axis == "tp_c":
                tp_c = arr
            elif axis == "pp_c":
                pp_c = arr
            elif axis == "cp_c":
                cp_c = arr
            else:
                ep_c = arr
    tp, pp, cp, ep = (a.ravel() for a in np.meshgrid(tp_c, pp_c, cp_c, ep_c, indexing="ij"))
    mp = tp * pp * cp
    ok = gpus % mp == 0
    tp, pp, cp, ep, mp = tp[ok], pp[ok], cp[ok], ep[ok], mp[ok]
    dp = gpus // mp
    ok = dp % ep == 0
    if job.is_transformer and int(job.shape.moe_experts) > 0:
        ok &= int(job.shape.moe_experts) % ep == 0
    if "dp" in c:
        ok &= allowed_by(dp, c["dp"])
    tp, pp, cp, ep, dp = tp[ok], pp[ok], cp[ok], ep[ok], dp[ok]

    # micro-batches: powers of two dividing the per-replica batch (1 alone when dp does not divide B,
    # which evaluate() then reports as batch_not_divisible)
    per_replica = np.where(global_batch % dp == 0, global_batch // np.maximum(dp, 1), 1)
    top = max(int(per_replica.max(initial=1)), 1)
    mb_c = 2 ** np.arange(int(math.log2(top)) + 1)
    ok2 = (per_replica[:, None] % mb_c[None, :]) == 0
    if "micro_batch" in c:
        ok2 &= allowed_by(mb_c, c["micro_batch"])[None, :]
    li, mi = np.nonzero(ok2)
    tp, pp, cp, ep, dp, mb = tp[li], pp[li], cp[li], ep[li], dp[li], mb_c[mi]

    # schedules: (code, v); only 1f1b without a pipeline, interleaved:v needs layers % (pp v) == 0
    vs = np.arange(2, max(layers, 2) + 1)
    flat_kinds = [ScheduleKind.ONE_F_ONE_B, ScheduleKind.GPIPE, ScheduleKind.ZERO_BUBBLE]
    sched = np.concatenate([np.asarray(flat_kinds, dtype=np.int64),
                            np.full(len(vs), ScheduleKind.INTERLEAVED, dtype=np.int64)])
    virt = np.concatenate([np.ones(len(flat_kinds), dtype=np.int64), vs])
    ok3 = (pp[:, None] > 1) | (sched[None, :] == ScheduleKind.ONE_F_ONE_B)
    ok3 &= (sched[None, :] != ScheduleKind.INTERLEAVED) | (layers % (pp[:, None] * virt[None, :]) == 0)
    if "schedule" in c:
        for op, (code, v) in c["schedule"]:
            match = (sched == code) & ((virt == v) if v is not None else True)
            ok3 &= (match if op in ("=", "==") else ~match)[None, :]
    if "virtual_stages" in c:
        ok3 &= allowed_by(virt, c["virtual_stages"])[None, :]
    ci, si = np.nonzero(ok3)
    return {"dp": dp[ci], "tp": tp[ci], "pp": pp[ci], "cp": cp[ci], "ep": ep[ci], "micro_batch": mb[ci],
            "schedule": sched[si], "virtual_stages": virt[si]}


def _axes(job: Job, c: Constraints) -> dict[str, np.ndarray]:
    zero = np.asarray(ZERO_STAGES)
    # selective recompute has no meaning for a generic model
    rec = np.asarray([r for r in Recompute if job.is_transformer or r != Recompute.SELECTIVE])
    sp = np.asarray([False, True]) if job.is_transformer else np.asarray([False])
    algo = np.asarray(list(Algorithm))
    if "zero" in c:
        zero = zero[allowed_by(zero, c["zero"])]
    if "recompute" in c:
        rec = rec[allowed_by(rec, c["recompute"])]
    if "sequence_parallel" in c:
        sp = sp[allowed_by(sp, c["sequence_parallel"])]
    if "algorithm" in c:
        algo = algo[allowed_by(algo, c["algorithm"])]
    return {"zero": zero, "recompute": rec, "sequence_parallel": sp, "algorithm": algo}


def _grid(gpus: int, global_batch: int, cfg: dict[str, np.ndarray], lo: int, hi: int,
          axes: dict[str, np.ndarray]) -> StrategyGrid:
    """Configurations lo:hi on axis 0, then zero, recompute, sequence parallelism, algorithm."""
    col = {k: v[lo:hi].reshape(-1, 1, 1, 1, 1) for k, v in cfg.items()}
    return grid_from_arrays(
        gpus=gpus, global_batch=global_batch, **col,
        zero=axes["zero"].reshape(1, -1, 1, 1, 1), recompute=axes["recompute"].reshape(1, 1, -1, 1, 1),
        sequence_parallel=axes["sequence_parallel"].reshape(1, 1, 1, -1, 1),
        algorithm=axes["algorithm"].reshape(1, 1, 1, 1, -1))


def take_one(grid: StrategyGrid, i: int) -> StrategyGrid:
    """Candidate at flat position ``i`` of a broadcast grid as a 1-element grid (no materialising)."""
    shape = grid.shape
    idx = np.unravel_index(int(i), shape)
    out = {}
    for f in fields(grid):
        a = getattr(grid, f.name)
        a = a.reshape((1,) * (len(shape) - a.ndim) + a.shape)
        out[f.name] = a[tuple(ix if n > 1 else 0 for ix, n in zip(idx, a.shape, strict=True))].reshape(1)
    return replace(grid, **out)


def _duplicate_mask(grid: StrategyGrid) -> np.ndarray:
    """True for structural duplicates: sequence parallelism without tensor parallelism."""
    return np.asarray(grid.sequence_parallel & (grid.tp == 1))


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
    candidates_evaluated: int
    feasible: int
    infeasible_by_reason: dict[str, int]
    elapsed_s: float
    ranked: list[Prediction]
    objective_values: list[float]
    family_best: dict[str, Prediction] = field(default_factory=dict)
    searched_families: list[str] = field(default_factory=list)  # families the enumeration contained
    why: str = ""  # the explanation in words: filled by scalemodel.report.explain.explained

    @property
    def best(self) -> Prediction | None:
        return self.ranked[0] if self.ranked else None

    def payload(self) -> dict[str, Any]:
        ranked = []
        for i, p in enumerate(self.ranked):
            ranked.append({
                "rank": i + 1, "strategy": p.strategy, "step_time_s": p.step_time_s,
                "tokens_per_s": p.throughput["tokens_per_s"], "mfu": p.flops["mfu"],
                "memory_per_gpu_bytes": p.memory["per_gpu_bytes"], "breakdown_s": p.breakdown_s,
                "statistical_efficiency": p.sync["statistical_efficiency"],
                "time_to_train_s": p.time_to_train_s, "cost_usd": p.cost_usd,
            })
        return {"inputs": self.inputs, "candidates_evaluated": self.candidates_evaluated,
                "feasible": self.feasible, "infeasible_by_reason": self.infeasible_by_reason,
                "elapsed_s": self.elapsed_s, "ranked": ranked, "why": self.why}


def _score(objective: str, job: Job, gpus: int, res: Any) -> np.ndarray:
    """Lower is better: seconds per token (throughput), per effective token (time-to-train), or USD."""
    tok = np.asarray(res.tokens_per_s)
    eff = np.asarray(1.0 if objective == "throughput" else res.statistical_efficiency)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 1.0 / (tok * eff)
    if objective == "cost":
        score = score * (gpus * job.price_per_gpu_s)
    return np.asarray(score)


@dataclass(order=True)
class _Pick:
    score: float
    order: tuple[int, int, int]  # (sync index, chunk start, flat index): deterministic tie-break
    grid: StrategyGrid = field(compare=False)
    sync: str = field(compare=False)


def _for_sync(cfg: dict[str, np.ndarray], sync: str) -> dict[str, np.ndarray]:
    """Configurations a sync mode applies to: hier:G needs G to divide the data-parallel degree."""
    strat = parse_sync(sync)
    if strat.kind != SyncKind.HIER:
        return cfg
    ok = cfg["dp"] % strat.param == 0
    return {k: v[ok] for k, v in cfg.items()}


def _strategy_key(g: StrategyGrid) -> tuple[Any, ...]:
    return tuple(getattr(g, f.name).item() for f in fields(g) if f.name != "algorithm")


def _distinct(picks: list[_Pick]) -> list[_Pick]:
    """Each plan once: drop candidates that differ from a better-ranked one only in the DP collective
    algorithm (the list then shows distinct plans, each with its best algorithm)."""
    out: list[_Pick] = []
    seen: set[tuple[Any, ...]] = set()
    for p in sorted(picks):
        key = (p.sync, _strategy_key(p.grid))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _predict_all(job: Job, picks: list[_Pick], kappa: float | None) -> list[Prediction]:
    """Full predictions for the picked candidates: one evaluate() per sync mode over all of them."""
    out: list[Prediction | None] = [None] * len(picks)
    for sync in dict.fromkeys(p.sync for p in picks):
        idx = [i for i, p in enumerate(picks) if p.sync == sync]
        grid = replace(picks[idx[0]].grid, **{
            f.name: np.concatenate([getattr(picks[i].grid, f.name) for i in idx]) for f in fields(StrategyGrid)})
        res = evaluate(job, grid, sync=sync, kappa=kappa)
        for j, i in enumerate(idx):
            out[i] = result_at(job, grid, res, j, sync=sync, inputs=None)
    return [p for p in out if p is not None]


def search(job: Job, gpus: int, global_batch: int, *, objective: str = "throughput", top: int = 5,
           constraints: dict[str, Any] | None = None, sync_modes: Sequence[str] = ("bsp",),
           progress: Callable[[int, int], None] | None = None, kappa: float | None = None,
           inputs: dict[str, Any] | None = None) -> PlanResult:
    """Search every valid strategy for ``job`` on ``gpus`` GPUs at ``global_batch`` sequences per step.

    ``constraints``: {key: value | (op, value) | [(op, value), ...]} over CONSTRAINT_KEYS (see
    :func:`parse_constraints`). ``progress(done, total)`` is called after each evaluated chunk.
    Returns the top ``top`` feasible candidates by ``objective`` with counts of the rest.
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
    c = normalize_constraints(constraints)
    modes = []
    for s in sync_modes:
        label = parse_sync(s).label()
        if "sync" not in c or allowed_by(np.asarray([0]), [(op, 0 if v == label else 1) for op, v in c["sync"]])[0]:
            modes.append(label)
    mem_limit = [v for op, v in c.get("memory", [])]
    all_cfg = configurations(job, gpus, global_batch, c)
    axes = _axes(job, c)
    inner = int(np.prod([len(a) for a in axes.values()]))
    per_chunk = max(1, CHUNK_CANDIDATES // max(inner, 1))
    by_mode = [_for_sync(all_cfg, sync) for sync in modes]
    total = sum(len(m["dp"]) for m in by_mode) * inner

    evaluated = feasible_n = 0
    reasons = np.zeros(max(REASON_KEYS) + 1, dtype=np.int64)
    over_limit = 0
    picks: list[_Pick] = []
    fam_best: dict[int, _Pick] = {}
    keep = top * len(axes["algorithm"])  # enough for `top` plans that differ in more than the algorithm
    done = 0
    for si, (sync, cfg) in enumerate(zip(modes, by_mode, strict=True)):
        fam_of_cfg = _family_code(cfg)
        n_cfg = len(cfg["dp"])
        for lo in range(0, n_cfg, per_chunk):
            hi = min(n_cfg, lo + per_chunk)
            grid = _grid(gpus, global_batch, cfg, lo, hi, axes)
            res = evaluate(job, grid, sync=sync, kappa=kappa)
            valid = np.broadcast_to(~_duplicate_mask(grid), grid.shape)
            feasible = np.asarray(res.feasible)
            ok = feasible & valid
            if mem_limit:
                over = ok & ~allowed_by(np.asarray(res.memory["total"]), c["memory"])
                over_limit += int(np.count_nonzero(over))
                ok &= ~over
            evaluated += int(np.count_nonzero(valid))
            feasible_n += int(np.count_nonzero(ok))
            reasons += np.bincount(np.asarray(res.reason)[valid & ~feasible], minlength=len(reasons))
            score = np.where(ok, _score(objective, job, gpus, res), np.inf).reshape(hi - lo, -1)
            flat = score.ravel()
            k = min(keep, flat.size)
            cand = np.argpartition(flat, k - 1)[:k] if k < flat.size else np.arange(flat.size)
            for i in cand[np.isfinite(flat[cand])]:
                picks.append(_Pick(float(flat[i]), (si, lo, int(i)), take_one(grid, int(i)), sync))
            picks = sorted(picks)[:keep]
            # best of each parallelism family (for the explanation)
            row_best = score.argmin(axis=1)
            row_score = score[np.arange(hi - lo), row_best]
            fams = fam_of_cfg[lo:hi]
            finite = np.isfinite(row_score)
            for f in np.unique(fams[finite]):
                rows = np.nonzero((fams == f) & finite)[0]
                r = int(rows[np.argmin(row_score[rows])])
                i = r * score.shape[1] + int(row_best[r])
                p = _Pick(float(row_score[r]), (si, lo, i), take_one(grid, i), sync)
                if int(f) not in fam_best or p < fam_best[int(f)]:
                    fam_best[int(f)] = p
            done += (hi - lo) * inner
            if progress is not None:
                progress(done, total)

    picks = _distinct(picks)[:top]
    fam_picks = sorted(fam_best.values())
    preds = _predict_all(job, [*picks, *fam_picks], kappa)
    ranked = preds[:len(picks)]
    by_reason = {REASON_KEYS[int(code)]: int(n) for code, n in enumerate(reasons) if n > 0}
    if over_limit:
        by_reason["memory_constraint"] = over_limit
    family_best = {}
    for pred in preds[len(picks):]:
        st = pred.strategy
        family_best[family(st["tp"], st["pp"], st["cp"], st["ep"], st["dp"])] = pred
    result = PlanResult(
        inputs=dict(inputs or {}), objective=objective, candidates_evaluated=evaluated, feasible=feasible_n,
        infeasible_by_reason=by_reason, elapsed_s=0.0, ranked=ranked, objective_values=[p.score for p in picks],
        family_best=family_best, searched_families=sorted({
            _family_name(int(code)) for m in by_mode for code in np.unique(_family_code(m))}))
    result.elapsed_s = time.perf_counter() - t0
    return result


def plan(cluster: Any, workload: Any, gpus: int, training: Any, *, objective: str = "throughput", top: int = 5,
         constraints: dict[str, Any] | None = None, sync_modes: Sequence[str] = ("bsp",),
         straggler_cv: float | None = None, progress: Callable[[int, int], None] | None = None,
         echo: dict[str, Any] | None = None) -> PlanResult:
    """Search every valid strategy for validated specs (the engine behind `scalemodel plan`).

    The global batch defaults to one sequence per GPU. ``echo`` holds what the caller wants echoed
    in the result's inputs besides the resolved job (the constraints as typed, the --set overrides).
    """
    batch = int(training.global_batch or gpus)
    cluster.require_gpus(gpus)
    job = build_job(cluster, workload, training, straggler_cv=straggler_cv)
    inputs: dict[str, Any] = {
        "cluster": cluster.name, "model": workload.name, "gpus": gpus, "global_batch": batch, "seq_len": job.seq_len,
        "precision": job.precision, "objective": objective, "top": top, "constraints": [],
        "sync_modes": list(sync_modes), "straggler_cv": job.straggler_cv, "train_tokens": job.train_tokens or None,
        "set": []}
    inputs.update(echo or {})
    return search(job, gpus, batch, objective=objective, top=top, constraints=constraints, sync_modes=sync_modes,
                  progress=progress, inputs=inputs)


# --------------------------------------------------------------------------------------------
# comparisons (data for the explanation, which report/explain.py writes)


def part_gains(win: Prediction, other: Prediction) -> list[tuple[float, str]]:
    """(seconds ``other`` spends beyond ``win``, part) for every breakdown part, largest first."""
    return sorted(((other.breakdown_s[k] - win.breakdown_s[k], k) for k in BREAKDOWN_KEYS), reverse=True)


def strategy_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Strategy keys whose values differ between ``a`` and ``b`` (the GPU count and batch aside)."""
    return [k for k in a if k not in ("gpus", "global_batch") and a.get(k) != b.get(k)]
