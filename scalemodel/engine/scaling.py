"""Scaling sweeps: one strategy (or the planner's best) at several GPU counts, weak or strong, with the
efficiency lost at each point attributed to its causes.

Definitions (per point, N GPUs, global batch B samples, step time t = sum_k t_k over the step-model
breakdown, :data:`scalemodel.engine.parts.BREAKDOWN`):

    T   = t   x N / B      GPU-seconds per sample (the inverse of per-GPU throughput)
    T_k = t_k x N / B      the same for part k, so T = sum_k T_k
    E   = T_0 / T_N        scaling efficiency: per-GPU throughput relative to the first point

and the efficiency lost splits exactly into per-part contributions,

    1 - E = (T_N - T_0) / T_N = sum_k (T_k(N) - T_k(0)) / T_N,

so ``loss_attribution[k] = (T_k(N) - T_k(0)) / T_N`` (a negative value is a gain: e.g. ZeRO-1
shrinking the optimizer step as DP grows). This is the "isoefficiency" bookkeeping of Grama, Gupta
& Kumar (IEEE Concurrency 1993): total overhead N t - W split into its sources.

With ``best=True`` each point uses the planner's best memory-feasible strategy. The fastest strategy
ignoring memory has per-part times U_k; the memory-forced penalty F = T - sum_k U_k >= 0 (what the
memory limit costs), and the attribution uses U_k for the causes plus ``memory_forced`` =
(F(N) - F(0)) / T_N, again summing exactly to 1 - E.

Weak scaling keeps the per-replica batch fixed: B(N) = B_0 N / N_0 (for a fixed strategy, B_0/dp_0
samples per replica at every N). Strong scaling keeps B(N) = B_0. B_0 is ``training.global_batch``,
by default dp_0 x micro-batch at the first point. DP is re-derived at each N as N / (tp pp cp).

Batch efficiency (``batch_efficiency``; McCandlish et al. 2018, arXiv:1812.06162, via
:mod:`scalemodel.cost.efficiency`), when ``training.critical_batch`` (B_noise) is set: relative to the
sweep's smallest batch B_min, (B_noise + B_min) / (B_noise + B_N), the samples B_min needs per sample needed
at B_N, in (0, 1]. B_min is the first point's B_0 (the counts increase, weak scaling grows the batch and strong
keeps it). Time to target, when ``train_tokens`` is also set: the target is the loss reached after
train_tokens at B_0, so E_0 = tokens / seq_len samples, S_min = E_0 / (B_noise + B_0) steps, and at
B_N it takes S_min (1 + B_noise / B_N) steps of t_N each (divided by the sync mode's staleness
efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from scalemodel.choices import parse_compression
from scalemodel.cost import compression, efficiency
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.parts import BREAKDOWN_KEYS, CAUSES, PARTS
from scalemodel.engine.planner import search as plan_search
from scalemodel.engine.predict import Prediction, result_at, staleness_note
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError, Origin
from scalemodel.specs.base import MAX_SPEC_INT
from scalemodel.units import format_quantity

#: Multiplier on accelerator memory for the "ignore memory" search behind ``memory_forced``.
_UNLIMITED_MEMORY = 1e9


@dataclass
class ScalingPoint:
    gpus: int
    global_batch: int
    prediction: Prediction
    gpu_seconds_per_sample: float  # T
    parts_per_sample: dict[str, float]  # T_k (memory-unconstrained parts with best=True) + memory_forced
    scaling_efficiency: float
    loss_attribution: dict[str, float]
    batch_efficiency: float | None  # critical-batch (McCandlish); the sync mode's is prediction.sync's
    time_to_target_s: float | None

    @property
    def strategy(self) -> dict[str, Any]:
        return self.prediction.strategy

    def payload(self) -> dict[str, Any]:
        p = self.prediction
        return {
            "gpus": self.gpus, "global_batch": self.global_batch, "step_time_s": p.step_time_s,
            "tokens_per_s": p.throughput["tokens_per_s"], "tflops_per_gpu": p.flops["tflops_per_gpu"],
            "mfu": p.flops["mfu"], "scaling_efficiency": self.scaling_efficiency,
            "loss_attribution": self.loss_attribution, "breakdown_s": p.breakdown_s, "strategy": p.strategy,
            "batch_efficiency": self.batch_efficiency, "time_to_target_s": self.time_to_target_s,
            "samples_per_s": p.throughput["samples_per_s"], "gpu_seconds_per_sample": self.gpu_seconds_per_sample,
            "feasible": p.feasible, "infeasible_reason": p.infeasible_reason,
            "memory_per_gpu_bytes": p.memory["per_gpu_bytes"], "sync": p.sync, "interval": p.reported_interval,
        }


@dataclass
class ScalingResult:
    mode: str
    best: bool
    points: list[ScalingPoint]
    inputs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the note on the documented default critical batch, when one of ``notes`` is it: the statistical efficiency
    #: and time to target scale prints rest on it; check, which uses neither without training.critical_batch, drops it
    default_critical_batch_note: str | None = None

    @property
    def causes(self) -> tuple[str, ...]:
        return CAUSES if self.best else BREAKDOWN_KEYS

    def top_causes(self, point: ScalingPoint, k: int = 3) -> list[tuple[str, float]]:
        """The k largest positive contributions to the efficiency lost at ``point``."""
        items = sorted(point.loss_attribution.items(), key=lambda kv: -kv[1])
        return [(c, v) for c, v in items[:k] if v > 0.0005]

    def summary(self) -> str:
        """One line: how far efficiency falls and which causes take it."""
        first, last = self.points[0], self.points[-1]
        if len(self.points) == 1:
            return f"one point ({first.gpus} GPUs): nothing to compare; give several --gpus"
        e = last.scaling_efficiency
        head = (f"{self.mode} scaling {first.gpus} -> {last.gpus} GPUs: per-GPU throughput at "
                f"{e:.0%} of the {first.gpus}-GPU point")
        top = self.top_causes(last, 2)
        # the throughput's efficiency leaves out the statistical one: weak scaling's growing batch kept 99.8 % per GPU
        # and 'no material loss' while each sequence bought 12 % less progress (the table's batch eff. column, named so)
        s0, s1 = first.batch_efficiency, last.batch_efficiency
        stat = (f"; batch efficiency {s0:.1%} -> {s1:.1%} (global batch {first.strategy['global_batch']:,} -> "
                f"{last.strategy['global_batch']:,}): progress per sequence falls" if s0 and s1 and s1 < s0 * 0.995
                else "")
        if e >= 0.995 or not top:
            return head + " (no material loss)" + stat
        parts = []
        for i, (cause, v) in enumerate(top):
            text = f"{cause} takes {_points(v)} ({_unnested(PARTS[cause].description)}"
            if i == 0 and cause in last.prediction.breakdown_s and not self.best:
                a, b = first.prediction.breakdown_s[cause], last.prediction.breakdown_s[cause]
                sa, sb = first.strategy, last.strategy
                text += f": {_fmt_s(a)} -> {_fmt_s(b)} per step"
                if cause == "dp_comm" and sa["dp"] != sb["dp"]:
                    text += f" as the DP group grows {sa['dp']} -> {sb['dp']}"
                elif cause == "bubble" and self.mode == "strong":
                    text += " with fewer micro-batches per step"
            parts.append(text + ")")
        tail = ""
        forced = last.loss_attribution.get("memory_forced", 0.0)
        if self.best and any(c != "memory_forced" for c, _ in top):
            # the causes are U_k, the parts of the fastest strategy ignoring memory (module docstring), which need
            # not be the chosen one's: at 1536 A100s GPT-3's unconstrained best is ZeRO-0 with a 0.2 s optimizer
            # step, the chosen ZeRO-2 one's is 2 ms, and "optimizer takes 2 points" read as the chosen plan's
            tail = ("; with --best these causes are the parts of the fastest strategy ignoring memory, not the "
                    f"chosen one's (breakdown_s), and memory_forced ({100 * forced:+.1f} points) is the change in "
                    "what the memory limit costs")
        return head + "; " + "; ".join(parts) + tail + stat

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "mode": self.mode, "best": self.best,
                "points": [p.payload() for p in self.points], "summary": self.summary(), "notes": self.notes}


def _points(v: float) -> str:
    """Efficiency points lost (v a fraction): whole points from 2 up (as the table's 22, 8), one decimal below,
    where a whole number read "1 points" or "0 points" for a cause the table shows as 1.0 or 0.1."""
    pts = 100.0 * v
    return f"{pts:.0f} points" if round(pts) >= 2 else f"{pts:.1f} point{'' if f'{pts:.1f}' == '1.0' else 's'}"


def _fmt_s(x: float) -> str:
    return format_quantity(x, "time")


def _batches(gpus: list[int], mode: str, b0: int, where: str = "--global-batch") -> list[int]:
    """The global batch at each point (weak: ``b0`` grown with N); ``where``: what set ``b0`` (--global-batch, or
    --micro-batch where the batch is derived as dp x micro-batch), named when a point's batch is past the bound."""
    n0 = gpus[0]
    out = []
    for n in gpus:
        if mode != "strong" and (b0 * n) % n0:
            raise InputError(f"weak scaling grows the global batch {b0} by {n}/{n0}, which is not a whole number "
                             "of samples", where="--gpus",
                             allowed=f"GPU counts that make {b0} x N / {n0} an integer (e.g. multiples of {n0})")
        out.append(b0 if mode == "strong" else b0 * n // n0)
        if out[-1] > MAX_SPEC_INT:  # a spec holds no larger count (the copied TrainingSpec would refuse it)
            raise InputError(f"the global batch at {n} GPUs would be {out[-1]:,} sequences", where=where,
                             allowed=f"at most {MAX_SPEC_INT:.0e} sequences at every point (a smaller --micro-batch "
                                     "or --global-batch)")
    return out


def _check_split(n: int, batch: int, strategy: Any, micro: int, mode: str, gpus_at: str = "--gpus") -> None:
    mp = strategy.tp * strategy.pp * strategy.cp
    if n % mp:
        raise InputError(f"{n} GPUs is not a multiple of tp x pp x cp = {mp}", where=gpus_at,
                         allowed=f"GPU counts that are multiples of {mp}")
    dp = n // mp
    if batch % (dp * micro) or batch < dp * micro:
        raise InputError(f"{mode} scaling: global batch {batch} cannot be split over dp {dp} x micro-batch {micro} "
                         f"at {n} GPUs", where="--global-batch",
                         allowed=f"a global batch that is a multiple of dp x micro-batch at every point "
                                 f"(here {dp * micro}), or a smaller --micro-batch or fewer GPUs")


def _parts_per_sample(pred: Prediction, n: int, batch: int) -> dict[str, float]:
    return {k: pred.breakdown_s[k] * n / batch for k in BREAKDOWN_KEYS}


def sweep(cluster: Any, workload: Any, training: Any, strategy: Any, gpus: list[int], mode: str, *,
          best: bool = False, straggler_cv: float | None = None, kappa: float | None = None,
          search: dict[str, Any] | None = None,
          inputs: dict[str, Any] | None = None, origin: Origin | None = None,
          check_only: bool = False) -> ScalingResult:
    """Evaluate ``strategy`` (or, with ``best``, the planner's best strategy) at each GPU count.

    ``origin``: where the strategy's fields were written, for errors (job.grid_from_strategy).

    ``search`` holds extra keyword arguments for :func:`scalemodel.engine.planner.search` (objective,
    constraints, sync_modes, progress). Raises InputError when a point cannot be built. ``check_only``: build every
    point's strategy (each refusal of :func:`~scalemodel.engine.job.grid_from_strategy`, the ones predict and check
    make) and price nothing; the result has no points (``hardware validate`` of a scenario).
    """
    if mode not in ("weak", "strong"):
        raise InputError(f"unknown scaling mode {mode!r}", where="--mode", allowed="weak or strong")
    gpus = [int(n) for n in gpus]
    if not gpus or any(n <= 0 for n in gpus):
        raise InputError(f"GPU counts must be positive integers, got {gpus}", where="--gpus",
                         allowed="a comma-separated list such as 128,256,512")
    if any(b <= a for a, b in zip(gpus, gpus[1:], strict=False)):  # the first count is every point's baseline
        raise InputError(f"GPU counts must increase (the first is the baseline of every efficiency), got {gpus}",
                         where="--gpus", allowed="strictly increasing counts, e.g. "
                                                 + ",".join(str(n) for n in sorted(set(gpus))))
    notes: list[str] = []
    if strategy.dp is not None:
        notes.append(f"dp={strategy.dp} ignored: DP is re-derived at each point as N / (tp pp cp)")
        strategy = strategy.model_copy(update={"dp": None})
    job = build_job(cluster, workload, training, straggler_cv=straggler_cv)
    comp = parse_compression(strategy.compression)
    caveat = compression.accuracy_note(comp.kind.label, comp.topk_ratio)
    if caveat:
        notes.append(caveat)
    assumption = compression.error_feedback_note(comp.kind.label)
    if assumption:
        notes.append(assumption)
    micro = training.micro_batch
    n0 = gpus[0]
    mp = strategy.tp * strategy.pp * strategy.cp
    if training.global_batch is not None:
        b0 = int(training.global_batch)
    else:
        if n0 % mp:
            raise InputError(f"{n0} GPUs is not a multiple of tp x pp x cp = {mp}",
                             where=origin.gpus if origin is not None else "--gpus",
                             allowed=f"GPU counts that are multiples of {mp}")
        b0 = (n0 // mp) * micro
    # the derived batch (no global batch given) was refused at --global-batch, an option never given
    batches = _batches(gpus, mode, b0, "--global-batch" if training.global_batch is not None else "--micro-batch")

    preds: list[Prediction] = []
    parts: list[dict[str, float]] = []
    for n, batch in zip(gpus, batches, strict=True):
        if best and check_only:  # the planner's strategy: nothing to check before its search prices it
            continue
        if best:
            kw = dict(search or {})
            kw.setdefault("kappa", kappa)
            searched = plan_search(job, n, batch, top=1, **kw)
            found = searched.ranked
            if not found:
                # the planner's reasons, most candidates first: a pinned --no-sequence-parallel on an MoE model at
                # tp > 1 was "no feasible strategy" without the moe_sp_required that plan names
                top3 = sorted(searched.infeasible_by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
                why = ", ".join(f"{k}: {v:,}" for k, v in top3 if v)
                raise InputError(f"no feasible strategy for {n} GPUs at global batch {batch}"
                                 + (f" (candidates infeasible by reason: {why})" if why else ""), where="--best",
                                 allowed="fewer GPUs, another global batch, or relaxed constraints")
            pred = found[0]
            roomy = msgspec.structs.replace(job, memory_capacity=job.memory_capacity * _UNLIMITED_MEMORY)
            free = plan_search(roomy, n, batch, top=1, **kw).ranked
            own = _parts_per_sample(pred, n, batch)
            t = sum(own.values())
            unconstrained = _parts_per_sample(free[0], n, batch) if free else own
            if sum(unconstrained.values()) >= t:  # not faster per sample (another objective): nothing forced
                unconstrained = own
            part = {**unconstrained, "memory_forced": t - sum(unconstrained.values())}
        else:
            _check_split(n, batch, strategy, micro, mode, origin.gpus if origin is not None else "--gpus")
            tr = training.model_copy(update={"global_batch": batch})
            grid = grid_from_strategy(strategy, tr, n, job, origin=origin)
            if check_only:  # hardware validate: every point's strategy refusals, nothing priced
                continue
            res = evaluate(job, grid, sync=strategy.sync, kappa=kappa)
            pred = result_at(job, grid, res, 0, sync=strategy.sync)
            part = _parts_per_sample(pred, n, batch)
        if pred.step_time_s <= 0:
            raise InputError(f"zero step time at {n} GPUs", where="--gpus",
                             allowed="a job with work to time: a workload with FLOPs per sample")
        preds.append(pred)
        parts.append(part)

    if check_only:
        return ScalingResult(mode=mode, best=best, points=[], inputs=inputs or {}, notes=notes)
    t0 = sum(parts[0].values())
    smallest = min(batches)  # b0: the batch efficiency's reference, no larger than any point's (module docstring)
    points: list[ScalingPoint] = []
    for n, batch, pred, part in zip(gpus, batches, preds, parts, strict=True):
        t = sum(part.values())
        attribution = {k: (part[k] - parts[0][k]) / t for k in part}
        stat = ttt = None
        if job.critical_batch > 0:
            stat = float(efficiency.statistical_efficiency(batch, job.critical_batch, ref_batch=smallest))
            if job.train_tokens > 0:
                e0 = job.train_tokens / job.seq_len
                s_min = e0 / (job.critical_batch + b0)
                sync_eff = min(max(pred.sync["statistical_efficiency"], 1e-12), 1.0)
                ttt = float(efficiency.time_to_target(s_min, batch, job.critical_batch, pred.step_time_s, sync_eff))
        points.append(ScalingPoint(
            gpus=n, global_batch=batch, prediction=pred, gpu_seconds_per_sample=t, parts_per_sample=part,
            scaling_efficiency=t0 / t, loss_attribution=attribution, batch_efficiency=stat,
            time_to_target_s=ttt))
    if any((p.prediction.sync.get("mean_staleness") or 0.0) > 0 for p in points):
        notes.append(staleness_note(job, kappa))
    infeasible = [p.gpus for p in points if not p.prediction.feasible]
    if infeasible:
        reason = next(p.prediction.infeasible_reason for p in points if not p.prediction.feasible)
        notes.append(f"infeasible at {', '.join(map(str, infeasible))} GPUs: {reason}")
    default_note = None
    # the default B_noise moves a number only where the batch does: at one global batch (strong scaling) the
    # statistical efficiency is 1 at every point and the time to target is the steps at b0 whatever B_noise is
    if job.critical_batch > 0 and training.critical_batch is None and job.critical_batch_source \
            and any(b != b0 for b in batches):
        default_note = job.critical_batch_source
        notes.append(default_note)
    if training.critical_batch is not None and job.train_tokens <= 0:
        notes.append("time to target needs train_tokens as well as critical_batch")
    return ScalingResult(mode=mode, best=best, points=points, inputs=inputs or {}, notes=notes,
                         default_critical_batch_note=default_note)


def _unnested(description: str) -> str:
    """'pipeline bubble: stages idle while ...' for 'pipeline bubble (stages idle while ...)': the summary puts a
    part's description in parentheses, and 'bubble takes 2 points (pipeline bubble (stages idle ...))' nested them."""
    head, sep, rest = description.partition(" (")
    return f"{head}: {rest[:-1]}" if sep and rest.endswith(")") and "(" not in rest else description
