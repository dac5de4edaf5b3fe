"""Sensitivity of training throughput to each hardware parameter.

For a parameter p the *elasticity* of throughput X is

    e_p = d ln X / d ln p  ~=  (ln X(p e^d) - ln X(p e^-d)) / (2 d)        (central difference in log space)

so e_p = 0.3 means "1% more p gives 0.3% more throughput". Speeds (peak FLOP/s, memory bandwidth,
tier bandwidths) have e >= 0, costs (latencies, straggler CV) e <= 0. Because every time in the
step model is a work amount divided by a speed or a latency count times a latency, the step time is
homogeneous of degree -1 in (speeds, 1/latencies) apart from fixed constants (NCCL base latency,
the GEMM efficiency curve depends on shapes only), so by Euler's theorem

    sum over speeds of e  -  sum over latencies of e  ~=  1

i.e. the elasticities are the shares of the step each resource is responsible for (the part of
the one that is missing is the fixed per-collective overhead). A single GPU has no network term:
e_peak + e_memory_bandwidth = 1 exactly.

Besides the local derivative, each parameter is improved by a finite factor (bandwidth x f,
latency / f, ...) and the throughput ratio reported: "what a 2x better network buys" is the
ratio with every tier improved at once. Memory capacity does not change the step time of a fixed
strategy (elasticity 0); its row says whether the strategy fits before and after the improvement.
Where a parameter sits at a kink (less of it slows the step, more of it alone changes nothing: two tiers of equal
bandwidth on one path) the central difference is half the downward slope; a note names those parameters. Where the
step does not move within the log step either way but the full improvement changes it (the parameter enters through a
max, a min or a threshold that another term holds near the value and the improvement passes), the elasticity is 0,
the local derivative, beside a nonzero improved gain; a note names those parameters too. Cases checked:

- Llama 2 7B, tp 2 on 16 H100s, ib-leaf bandwidth: flat within 1%, 0.4% at 2x (tests/test_tidy26.py). Llama-3 70B,
  tp 8 pp 4 on 512 H100s, NVLink latency was the first: NVLS held its TP all-reduces at NCCL's fixed 25 us
  (:data:`~scalemodel.cost.nccl.NVLS_LATENCY`) whatever the tier's latency; since coll34 NVLS reads that hwLatency on
  the tier's measured hop as every algorithm does (26.4 us at 1x), so the row moves (tests/test_review26d.py).
- (inv27) Llama-3 8B on 64 H100s (dp 64, 8 nodes), ib-leaf bandwidth, was the second: the 2x improvement passed a
  threshold of the model's search graph (two 48 GB/s channels a NIC from 96 GB/s, 16 channels, Tree's channel caps
  doubled) and the DP all-reduce turned from NVLS to Tree, a slower step (-0.7%). NCCL's search holds 8 channels
  there (each GPU's NVLink, 370.8 GB/s as NCCL counts it, sends 7 of 48 GB/s:
  :func:`~scalemodel.cost.nccl.nccl_graph_channels_inter`), so the all-reduce stays on NVLS and the gain is 0.
"Peak FLOP/s" scales every compute peak the job prices work at (an fp8 run's BF16 attention core and logits
GEMM with its fp8 GEMMs, an fp32 / fp64 router's TF32 / FP64 GEMMs, an MXFP8 module's FP8 GEMMs in an fp4 run,
:func:`_peaks_perturb`), so the identity above holds at every precision.

Perturbations are :func:`msgspec.structs.replace` copies of the :class:`~scalemodel.engine.job.Job`
(and of its :class:`~scalemodel.cost.network.Tier` objects); each is one vectorised
:func:`~scalemodel.engine.step.evaluate` call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from scalemodel.cost.nccl import remembering
from scalemodel.engine.job import Job, StrategyGrid, build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError, Origin
from scalemodel.specs.cluster import cv_refusal
from scalemodel.units import format_signed

#: Half-width of the central difference in log space (1%: small enough to stay on one branch of
#: the model's max()/min() kinks in practice, large enough to be far above rounding error).
LOG_STEP = 0.01
#: The largest --factor: a million-fold improvement already takes every parameter past its physical range, and
#: a factor near 1e300 makes the improved peak FLOP/s infinite.
FACTOR_MAX = 1e6

Perturb = Callable[[Job, float], Job]


@dataclass(frozen=True)
class _Param:
    name: str
    value: float
    unit: str  # units.format_quantity kind, "fraction" (a CV: 0.0118 is 1.18 %), or "" for a plain number
    group: str  # compute | memory | network | stragglers | capacity
    better: int  # +1: larger is better (multiply by the factor), -1: smaller is better (divide)
    perturb: Perturb
    #: the multiplier the model can price nearest the one asked for (the straggler CV's: :func:`_priced_cv_mult`)
    priced: Callable[[Job, float], float] = lambda job, mult: mult

    def apply(self, job: Job, mult: float) -> tuple[Job, float]:
        """``job`` with the parameter x ``mult``, or x the nearest multiplier the model prices, and that multiplier."""
        m = self.priced(job, mult)
        return self.perturb(job, m), m


@dataclass
class ParameterSensitivity:
    name: str
    value: float
    unit: str
    group: str
    elasticity: float
    improved_by: str  # e.g. "x2" or "/2"
    throughput_ratio: float
    fits_when_improved: bool

    def payload(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "group": self.group,
                "elasticity": self.elasticity, "improved_by": self.improved_by,
                "throughput_ratio": self.throughput_ratio, "fits_when_improved": self.fits_when_improved}


@dataclass
class SensitivityResult:
    inputs: dict[str, Any]
    factor: float
    baseline_tokens_per_s: float
    baseline_step_time_s: float
    feasible: bool
    fits: bool
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    parameters: list[ParameterSensitivity]  # ranked by |elasticity|, largest first
    group_ratios: dict[str, float]  # throughput ratio with every parameter of a group improved
    group_elasticity: dict[str, float]  # sum of |elasticity| per group
    bound: str  # the group with the largest summed |elasticity|
    conclusion: str
    notes: list[str] = field(default_factory=list)
    # the candidate priced, as predict's JSON gives it (StrategyGrid.describe): the inputs echo what was given, and
    # an unset sequence_parallel (null there) is priced on for an MoE model at tp > 1 under Megatron-Core's layer
    strategy: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "strategy": self.strategy, "factor": self.factor,
            "baseline": {"tokens_per_s": self.baseline_tokens_per_s, "step_time_s": self.baseline_step_time_s,
                         "feasible": self.feasible, "fits": self.fits,
                         "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
                         "memory_capacity_bytes": self.memory_capacity_bytes},
            "parameters": [p.payload() for p in self.parameters],
            "groups": {g: {"elasticity": self.group_elasticity[g], "throughput_ratio": self.group_ratios[g]}
                       for g in self.group_ratios},
            "bound": self.bound, "conclusion": self.conclusion, "notes": self.notes,
        }


def _tier_perturb(index: int, attr: str) -> Perturb:
    def apply(job: Job, mult: float) -> Job:
        tiers = list(job.network.tiers)
        t = tiers[index]
        tiers[index] = replace(t, **{attr: getattr(t, attr) * mult})
        return msgspec.structs.replace(job, network=replace(job.network, tiers=tuple(tiers)))
    return apply


def _job_perturb(attr: str) -> Perturb:
    def apply(job: Job, mult: float) -> Job:
        return msgspec.structs.replace(job, **{attr: getattr(job, attr) * mult})
    return apply


#: Every compute peak a job may price work at: the GEMMs' (training precision) and, in an fp8 run, the BF16 peak of
#: the attention core and of the logits GEMM (Job.attention_peak_flops / logits_peak_flops), an fp32 / fp64 router's
#: TF32 / FP64 peak (Job.router_peak_flops) and an MXFP8 module's FP8 peak (Job.mxfp8_peak_flops); 0 = not used.
PEAK_FIELDS = ("peak_flops", "attention_peak_flops", "logits_peak_flops", "router_peak_flops", "mxfp8_peak_flops")


def _peaks_perturb(job: Job, mult: float) -> Job:
    """``job`` with every compute peak it uses x ``mult`` (:data:`PEAK_FIELDS`; a 0 "not used" stays 0).

    "Peak FLOP/s" is the accelerator's compute speed: a faster chip is faster at every precision, so the
    BF16 parts of an fp8 run (attention core, logits GEMM) move with its fp8 GEMMs. Moving only ``peak_flops``
    would leave their time fixed and break the single-GPU identity e_peak + e_memory_bandwidth = 1."""
    return msgspec.structs.replace(job, **{f: getattr(job, f) * mult for f in PEAK_FIELDS})


def _priced_cv_mult(job: Job, mult: float) -> float:
    """``mult``, or where ``straggler_cv x mult`` leaves the range of cvs the job's step-time distribution is priced
    for (:func:`scalemodel.specs.cluster.cv_refusal`, the one statement of those ranges: a Weibull cv in [1.3e-5, 1e14],
    a shifted exponential's <= 1), the multiplier that takes the cv to the edge of that range: the cv nearest the one
    asked for that the order statistics price. Found by bisection in log space between 1 (the job's own cv, priced)
    and ``mult``, the last multiplier priced kept (to a relative 1e-12). ``--factor 1e6`` on a Weibull cv of 9.9 asked
    for 9.9e-6 and was refused as "error: cv: a Weibull cv is outside [0.001, 20]", naming neither --factor nor the
    straggler CV (fuzz31; the range was [0.001, 20] then); a Weibull cv at the floor could not take the elasticity's
    step down (x e^-0.01)."""
    cv, dist = job.straggler_cv, job.straggler_dist
    if cv <= 0.0 or cv_refusal(dist, cv * mult) is None:
        return mult
    lo, hi = 0.0, math.log(mult)  # log multipliers: lo priced, hi not
    while abs(hi - lo) > 1e-12:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cv_refusal(dist, cv * math.exp(mid)) is None else (lo, mid)
    return math.exp(lo)


def hardware_parameters(job: Job) -> list[_Param]:
    """The hardware parameters the step time depends on, with how to perturb each."""
    params = [
        _Param("peak FLOP/s", job.peak_flops, "flop_rate", "compute", +1, _peaks_perturb),
        _Param("memory bandwidth", job.memory_bandwidth, "bandwidth", "memory", +1, _job_perturb("memory_bandwidth")),
    ]
    for i, t in enumerate(job.network.tiers):
        params.append(_Param(f"{t.name} bandwidth", t.bandwidth, "bandwidth", "network", +1,
                             _tier_perturb(i, "bandwidth")))
        params.append(_Param(f"{t.name} latency", t.latency, "time", "network", -1, _tier_perturb(i, "latency")))
    params.append(_Param("straggler CV", job.straggler_cv, "fraction", "stragglers", -1, _job_perturb("straggler_cv"),
                         _priced_cv_mult))
    # the accelerator's clock swing, which the lock-stepped GPUs wait on (the jitter part, docs/model.md#jitter)
    params.append(_Param("clock jitter CV", job.clock_jitter_cv, "fraction", "stragglers", -1,
                         _job_perturb("clock_jitter_cv")))
    params.append(_Param("memory capacity", job.memory_capacity, "bytes", "capacity", +1,
                         _job_perturb("memory_capacity")))
    return params


def _evaluate_one(job: Job, grid: StrategyGrid, sync: str, kappa: float | None) -> tuple[float, float, bool, bool,
                                                                                        float]:
    """(tokens/s, step seconds, feasible, fits, memory bytes) of the single candidate in ``grid``. Under
    :func:`~scalemodel.cost.nccl.remembering`: each perturbation moves one factor, so most groups' collectives are
    priced as the last evaluation priced them (the same values; evalspeed41's calibration route)."""
    with remembering():
        res = evaluate(job, grid, sync=sync, kappa=kappa)
    first = (0,) * res.step_time.ndim
    return (float(res.tokens_per_s[first]), float(res.step_time[first]), bool(res.feasible[first]),
            bool(res.fits[first]), float(res.memory["total"][first]))


def _compose(params: list[_Param], mults: list[float]) -> Perturb:
    def apply(job: Job, _: float) -> Job:
        for p, m in zip(params, mults, strict=True):
            job = p.apply(job, m)[0]
        return job
    return apply


def _fmt_factor(f: float) -> str:
    return f"{f:g}"


def sensitivity(job: Job, grid: StrategyGrid, *, sync: str = "bsp", kappa: float | None = None,
                factor: float = 2.0, log_step: float = LOG_STEP,
                inputs: dict[str, Any] | None = None) -> SensitivityResult:
    """Elasticity of throughput to every hardware parameter, and the gain of a ``factor`` improvement.

    ``grid`` must hold one candidate (e.g. from :func:`~scalemodel.engine.job.grid_from_strategy`).
    """
    if grid.size != 1:
        raise InputError(f"sensitivity needs one strategy, got {grid.size} candidates", where="strategy",
                         allowed="one pinned strategy (tp, pp, cp, ep, zero, ...)")
    if not (math.isfinite(factor) and 1.0 < factor <= FACTOR_MAX):
        raise InputError(f"improvement factor {factor:g} is not a finite number > 1 and <= {FACTOR_MAX:g}",
                         where="--factor", allowed=f"a number > 1 and <= {FACTOR_MAX:g}, e.g. 2 (bandwidth x2, "
                                                   "latency /2)")
    if not (0.0 < log_step < 0.5):
        raise InputError(f"log step {log_step} out of range", where="log_step", allowed="0 < step < 0.5")
    base_x, base_t, feasible, fits, mem = _evaluate_one(job, grid, sync, kappa)
    if not (base_x > 0 and math.isfinite(base_x)):
        raise InputError("the baseline step has no positive throughput", where="strategy",
                         allowed="a strategy whose step processes samples in a finite time")
    up, down = math.exp(log_step), math.exp(-log_step)
    rows: list[ParameterSensitivity] = []
    params = hardware_parameters(job)
    kinks: list[str] = []  # worse hurts, better buys nothing: the central difference averages the two sides
    flat: list[str] = []  # nothing changes within the log step, the full improvement does: a max / min reached further
    edge: list[str] = []  # a straggler CV at the edge of its distribution's range: a one-sided difference
    held: list[str] = []  # the improvement taken to that edge
    for p in params:
        (job_up, m_up), (job_dn, m_dn) = p.apply(job, up), p.apply(job, down)
        x_up = _evaluate_one(job_up, grid, sync, kappa)[0]
        x_dn = _evaluate_one(job_dn, grid, sync, kappa)[0]
        # the log step priced each way: log_step but where the range's edge held a side (then the side's own, 0 at
        # the edge: a one-sided difference over the other)
        if (m_up, m_dn) != (up, down):
            edge.append(p.name)
        elasticity = (math.log(x_up) - math.log(x_dn)) / (math.log(m_up) - math.log(m_dn))
        better, worse = (x_up, x_dn) if p.better > 0 else (x_dn, x_up)
        if (p.name not in edge and abs(elasticity) >= 1e-3
                and abs(math.log(better / base_x)) < 1e-12 < abs(math.log(worse / base_x))):
            kinks.append(p.name)
        asked = factor if p.better > 0 else 1.0 / factor
        improved, m_imp = p.apply(job, asked)
        x_imp, _, _, fits_imp, _ = _evaluate_one(improved, grid, sync, kappa)
        if m_imp != asked:
            why = (cv_refusal(job.straggler_dist, p.value * asked) or ("",))[0]
            held.append(f"--factor {_fmt_factor(factor)} takes the {p.name} {p.value:g} to {p.value * asked:.3g} "
                        f"({why}): the improvement is priced at {p.value * m_imp:.4g}, the nearest cv the order "
                        "statistics price, and buys at least the ratio shown")
        if abs(elasticity) < 1e-12:
            elasticity = 0.0
            if abs(math.log(x_imp / base_x)) > 1e-12:
                flat.append(p.name)
        rows.append(ParameterSensitivity(
            name=p.name, value=p.value, unit=p.unit, group=p.group, elasticity=elasticity,
            improved_by=("x" if p.better > 0 else "/") + _fmt_factor(factor) + (
                f" (held at {100 * p.value * m_imp:.4g}%)" if m_imp != asked else ""),
            throughput_ratio=x_imp / base_x, fits_when_improved=fits_imp))
    rows.sort(key=lambda r: -abs(r.elasticity))

    # Whole groups improved at once: "2x network" = every tier's bandwidth x f and latency / f.
    groups = ("compute", "memory", "network", "stragglers")
    group_ratios: dict[str, float] = {}
    group_elasticity: dict[str, float] = {}
    for g in groups:
        members = [p for p in params if p.group == g]
        combined = _compose(members, [factor if p.better > 0 else 1.0 / factor for p in members])
        group_ratios[g] = _evaluate_one(combined(job, 1.0), grid, sync, kappa)[0] / base_x
        group_elasticity[g] = sum(abs(r.elasticity) for r in rows if r.group == g)
    bound = max(groups, key=lambda g: group_elasticity[g])
    conclusion = _conclusion(bound, group_elasticity, group_ratios, factor)
    notes = []
    if not fits:
        notes.append(f"the strategy does not fit: {mem / job.memory_capacity:.2f}x the accelerator memory is needed")
    elif not feasible:
        notes.append("the strategy is infeasible (see `scalemodel predict`); elasticities describe its modelled step")
    if job.straggler_cv == 0.0:
        notes.append("straggler CV is 0 (no variability modelled): use --straggler-cv to see its effect")
    notes.extend(held)
    if edge:
        notes.append(f"{', '.join(edge)}: at the edge of the {job.straggler_dist} range of cvs priced, the elasticity "
                     "is one-sided (the difference over the step that stays inside)")
    if kinks:
        notes.append(f"{', '.join(kinks)}: at a kink, worse slows the step but better alone buys nothing (another "
                     "part binds at the same value, such as a tier of equal bandwidth); the elasticity is the mean "
                     "of the two sides, the improved column what improving it alone buys")
    if flat:
        notes.append(f"{', '.join(flat)}: the step does not move within {log_step:.0%} of the value (elasticity 0: the "
                     "parameter enters through a max, a min or a threshold, such as NCCL's choice of its fastest "
                     "algorithm, a channel count or traffic hidden under compute, "
                     "that another term holds here), but the full improvement passes the point where it counts; the "
                     "improved column is what it buys")
    return SensitivityResult(
        inputs=inputs or {}, factor=factor, baseline_tokens_per_s=base_x, baseline_step_time_s=base_t,
        feasible=feasible, fits=fits, memory_per_gpu_bytes=mem, memory_capacity_bytes=job.memory_capacity,
        parameters=rows, group_ratios=group_ratios, group_elasticity=group_elasticity, bound=bound,
        conclusion=conclusion, notes=notes, strategy={**grid.describe(0), "sync": sync})


_GROUP_WORDS = {"compute": "compute-bound", "memory": "memory-bandwidth-bound", "network": "network-bound",
                "stragglers": "straggler-bound"}
_GROUP_NAMES = {"compute": "peak FLOP/s", "memory": "memory bandwidth", "network": "network",
                "stragglers": "straggler CV"}


def _conclusion(bound: str, elasticity: dict[str, float], ratios: dict[str, float], factor: float) -> str:
    f = _fmt_factor(factor)
    total = sum(elasticity.values())
    share = elasticity[bound] / total if total > 0 else 0.0
    buys = ", ".join(f"{f}x {_GROUP_NAMES[g]} buys {format_signed(100 * (ratios[g] - 1.0), 0, '%')}"
                     for g in ("network", "compute", "memory") if g in ratios)
    return f"the step is {_GROUP_WORDS[bound]} ({share:.0%} of the sensitivity): {buys}"


def sensitivity_for(cluster: Any, workload: Any, gpus: int, training: Any, strategy: Any, *,
                    straggler_cv: float | None = None, kappa: float | None = None, factor: float = 2.0,
                    inputs: dict[str, Any] | None = None, origin: Origin | None = None) -> SensitivityResult:
    """:func:`sensitivity` from validated specs (the engine behind `scalemodel sensitivity`); ``origin`` names
    where the strategy's fields were written, for errors (job.grid_from_strategy)."""
    job = build_job(cluster, workload, training, straggler_cv=straggler_cv)
    grid = grid_from_strategy(strategy, training, gpus, job, origin=origin)
    return sensitivity(job, grid, sync=strategy.sync, kappa=kappa, factor=factor, inputs=inputs)


__all__ = ["LOG_STEP", "ParameterSensitivity", "SensitivityResult", "hardware_parameters", "sensitivity",
           "sensitivity_for"]
