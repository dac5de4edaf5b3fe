"""Fit a few named factors of the step model to measured training runs (`scalemodel calibrate runs FILE`).

The factors (docs/model.md#calibrate-runs):

* ``compute``: a multiplier c on the accelerator's achieved compute efficiency, i.e. on the GEMM
  curve's ``gemm_max`` (16-bit and, where the spec has one, fp8) and on the memory-bandwidth
  efficiency together, so every compute and memory-bound kernel runs at c x the spec's rate;
* ``compute:fp8`` (only when a run is fp8 or fp4): fp8 and fp4 runs' GEMMs take this multiplier instead of ``compute``
  (on the fp8 curve's ``gemm_max``, else the 16-bit one); their memory-bound work keeps ``compute``;
* ``bandwidth:<tier>``: a multiplier on one network tier's efficiency (achieved fraction of its line rate);
* ``overlap``: a multiplier on the cluster's ``overlap_efficiency``, the fraction of each compute window that
  hides communication (docs/model.md#overlap-efficiency);
* ``overhead_s``: the cluster's ``step_overhead``, seconds added to every step (launch, data loading,
  logging: anything the model omits; docs/model.md#overhead). Not fitted, it stays the cluster's own.

Multipliers live in [0.1, min(2, 1 / the efficiency they scale)] (an efficiency never exceeds 1, so the
overlay carries the fit exactly); the overhead in [0, 10 x the largest measured step]. The fit is
``scipy.optimize.least_squares`` (trust-region reflective) on r_i = ln(T_i(c, b, eta, o) / t_i), with the
multipliers in log space, so every run counts by its relative error. Intervals (95 %) are the
linearised ones of Seber & Wild (*Nonlinear Regression*, 1989, sec. 2.1) as in
:mod:`scalemodel.engine.calibrate`: s^2 = sum r^2 / (m - p), Cov = s^2 (J^T J)^-1, x_k +- t_(0.975, m-p)
sqrt(Cov_kk), mapped back through exp for the multipliers. A multiplier that changes no run's predicted
step by more than :data:`INSENSITIVE` when moved from 1 to 0.9 (a tier no run's traffic crosses, or that
is fully hidden under compute) is not fitted: it stays 1 and is named in a warning. A factor within 1 %
of a bound is warned about (the data push it to a physical limit, so the other factors absorb the rest).

Without ``--factors`` (``only`` None) only the factors the runs identify are fitted (:func:`_identifiable`:
greedy column pivoting of the log-space Jacobian, at most max(1, m - 1) factors, condition index <= COND_MAX;
then :func:`_too_wide`: none whose 95 % interval spans more than a factor WIDE, none on a bound); every other is
held at 1 (the overhead at the cluster's) and named with its reason (docs/model.md#calibrate-runs-identified).
Fitting every factor to fewer runs than factors had extrapolated up to 1104 % off (46 % uncalibrated).

Each trial of the factors prices every run (a runs file refuses a repeated configuration, specs.runs ``_once``, and
the public API, ``scalemodel.calibrate_runs``, reads only runs files); the runs whose jobs are equal and share a sync
mode are stacked into one grid and priced by one vectorised :func:`evaluate` call. The step model prices each
candidate element-wise, so stacking changes no number
(docs/model.md#calibrate-runs; tests/test_calibrate_runs_speed.py). Each batch's price at a vector of multipliers is
remembered and the overhead added after it (:class:`_Pricer`): the overhead's finite differences, and the points every
leave-one-out refit starts from, are priced once, and every step is the one a fresh evaluation gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, NamedTuple

import msgspec
import numpy as np
import yaml

from scalemodel.choices import CompressionKind, SyncKind, Zero, parse_sync
from scalemodel.cost import compute as compute_cost
from scalemodel.cost.nccl import remembering
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.calibrate import fit_intervals
from scalemodel.engine.intervals import family_of
from scalemodel.engine.job import Job, build_job, grid_from_strategy
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.engine.pipeline_ranks import _params_per_gpu  # the stages' mean, as dp_comm prices the gradients
from scalemodel.engine.scaling import _batches, _check_split  # the sweep's own batch and split rules
from scalemodel.engine.step import INFEASIBLE_REASONS, evaluate
from scalemodel.errors import InputError, Origin
from scalemodel.specs import notices
from scalemodel.specs.cluster import CALIBRATION_VERSION, MIN_LOO_RUNS
from scalemodel.specs.quantities import RANGES
from scalemodel.specs.runs import MAX_STEP_S, MIN_STEP_S

#: Multiplier bounds (physical: no hardware part runs at a tenth of its spec, nor above twice it).
MULT_BOUNDS = (0.1, 2.0)
#: A multiplier is "not determined" when moving it from 1 to 0.9 changes no run's ln(step) by more.
INSENSITIVE = 1e-6
#: A factor within this factor of a bound is "on the bound".
BOUND_FACTOR = 1.01
#: Leave-one-out residuals (each run predicted by a refit without it) from MIN_LOO_RUNS runs on (specs.cluster, which
#: checks an overlay's block against it; fewer: in-sample) up to this many (each is one more fit; beyond, the
#: in-sample residuals, with many runs per factor, are close)
LOO_MAX_RUNS = 40


@dataclass
class Factor:
    name: str
    value: float
    ci: list[float] | None
    determined: bool
    at_bound: str | None = None   # "lower" | "upper"
    bounds: list[float] = field(default_factory=list)
    description: str = ""
    held: str | None = None  # the default fit: why the runs do not identify it (left at 1, the overhead the cluster's)


@dataclass
class RunsFit:
    inputs: dict[str, Any]
    factors: list[Factor]
    runs: list[dict[str, Any]]
    warnings: list[str]
    rms_log_error_before: float
    rms_log_error_after: float
    calibration: dict[str, Any] = field(default_factory=dict)  # the overlay's residual block (_calibration_block)

    def factor(self, name: str) -> Factor:
        return next(f for f in self.factors if f.name == name)

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "factors": self.factors, "runs": self.runs, "warnings": self.warnings,
                "rms_log_error_before": self.rms_log_error_before, "rms_log_error_after": self.rms_log_error_after,
                "calibration": self.calibration}


@dataclass(frozen=True)
class _Prepared:
    job: Job
    grid: Any
    sync: str
    measured_s: float


def scaled_job(job: Job, compute: float, bandwidth: dict[str, float], fp8: float | None = None, *,
               overlap: float = 1.0, overhead: float | None = None) -> Job:
    """``job`` with the compute multiplier on gemm_max and memory efficiency (an fp8 job's GEMMs take ``fp8``
    instead when given; its BF16 attention core and logits GEMM keep ``compute``), tier efficiencies scaled,
    the overlap efficiency x ``overlap`` and, when given, ``overhead`` seconds as its
    step overhead (replacing the cluster's)."""
    tiers = tuple(replace(t, efficiency=t.efficiency * bandwidth.get(t.name, 1.0)) for t in job.network.tiers)
    gemm = fp8 if fp8 is not None and job.precision in FP8_CURVE_PRECISIONS else compute
    return msgspec.structs.replace(job, gemm_max=job.gemm_max * gemm, memory_efficiency=job.memory_efficiency * compute,
                   attention_gemm_max=job.attention_gemm_max * compute,  # a BF16 core takes the 16-bit factor
                   logits_gemm_max=job.logits_gemm_max * compute,  # so does a BF16 logits GEMM
                   attention_fwd=_scaled_curve(job.attention_fwd, compute),  # and a fitted attention kernel
                   attention_bwd=_scaled_curve(job.attention_bwd, compute),
                   network=replace(job.network, tiers=tiers), overlap_efficiency=job.overlap_efficiency * overlap,
                   step_overhead=job.step_overhead if overhead is None else overhead)


def _scaled_curve(curve: dict[str, float] | None, compute: float) -> dict[str, float] | None:
    """An attention kernel's fitted curve (Job.attention_fwd / attention_bwd) with attn_max x ``compute``."""
    return None if curve is None else dict(curve, attn_max=curve["attn_max"] * compute)


def _compute_scaled(job: Job) -> list[float]:
    """The efficiencies of ``job`` that :func:`scaled_job` multiplies by the compute factor, besides the curve's
    gemm_max and memory (an fp8 job's GEMMs take the fp8 factor): the BF16 core and logits GEMMs' gemm_max and the
    attention kernel's attn_max, forward and backward."""
    out = [job.attention_gemm_max, job.logits_gemm_max]
    return out + [c["attn_max"] for c in (job.attention_fwd, job.attention_bwd) if c is not None]


def _step(job: Job, grid: Any, sync: str) -> tuple[float, float]:
    """(step time, tokens/s) of the single candidate of ``grid``."""
    return _step_of(evaluate(job, grid, sync=sync))


def _peak(job: Job) -> float:
    """The highest dense FLOP/s per GPU any of the job's GEMMs may run at (training precision, attention, logits,
    router, MXFP8): the floor below uses it, so a run mixing formats is held to no more than its fastest."""
    return max(job.peak_flops, job.attention_peak_flops, job.logits_peak_flops, job.router_peak_flops,
               job.mxfp8_peak_flops)


def _one(a: Any) -> float:
    """The value of a one-candidate grid's array (a run is priced as one candidate)."""
    return float(np.asarray(a).ravel()[0])


def _flops_floor_s(job: Job, res: Any, gpus: int) -> float:
    """The physical floor of a run's step: its model FLOPs at every GPU's peak, model_flops / (gpus x peak) (model
    FLOPs utilisation 100 %; the same bound the step model's property tests hold every prediction to). A measured
    step below it cannot be a real one."""
    return _one(res.model_flops) / (gpus * _peak(job))


class _BytesFloor(NamedTuple):
    """The slowest tier's floor on a run's step (:func:`_bytes_floor`)."""

    seconds: float
    grad_bytes: float  # S: one data-parallel rank's gradient bytes a step
    ranks: int  # p: the ranks that reduce them (dp x cp)
    per_domain: int  # c: of them inside one domain of the tier below
    tier: str
    line_rate: float  # B: the tier's line rate per GPU per direction, bytes/s


def _bytes_floor(job: Job, grid: Any, sync: str) -> _BytesFloor | None:
    """The other physical floor of a run's step: its gradients' bytes over the slowest tier they cross. Every step of
    synchronous data parallelism reduces S = one rank's gradient bytes (the stages' mean parameters x the gradient
    bytes, experts left out) over the p = dp x cp ranks that hold the same weights (Megatron-Core reduces over the
    dp-cp group; placement.DataParallelGroups.sharding). Whatever the algorithm (ring, tree, NVLS/SHARP in-network
    reduction, ZeRO's reduce-scatter), a domain of a tier holding c of the p ranks, each with its own shard to end
    with, must send out its contribution to the other (p - c)/p of the shards through its c GPUs' uplinks of the next
    tier, so the step takes at least (1 - c/p) S / (c B), B that tier's line rate per GPU (no efficiency, no taper):
    the bound tests/test_physics.py holds every collective to. The largest over the tiers the group crosses.

    None (no floor claimed) where the traffic is not that: another sync mode than bsp (backup workers, asp, ssp,
    local SGD and hier:G move other volumes per step), compressed gradients, a parameter server, HSDP (a shard group
    holds every shard per replica: its domains need not send (1 - c/p) S), or one rank."""
    g = grid
    if (parse_sync(sync).kind != SyncKind.BSP or _one(g.compression) != CompressionKind.NONE
            or _one(g.ps_servers) > 0 or _one(g.zero) == Zero.HSDP):
        return None
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    place = groups.data.sharding.dense
    p = _one(place.p)
    if p <= 1:
        return None
    dense, _expert = _params_per_gpu(job, g)
    s = _one(dense) * job.grad_bytes
    best: _BytesFloor | None = None
    for i in range(place.ntiers - 1):  # crossing into tier i + 1 from domains of tier i
        c = _one(place.c[i])
        if c >= p:
            break
        rate = float(place.bandwidth[i + 1])
        t = (1.0 - c / p) * s / (c * rate)
        if best is None or t > best.seconds:
            best = _BytesFloor(t, s, int(p), int(c), job.network.tiers[i + 1].name, rate)
    return best


def _step_of(res: Any) -> tuple[float, float]:
    """(step time, tokens/s) of the single candidate of an evaluated grid (the parts added in BREAKDOWN_KEYS order)."""
    step = sum(_one(res.breakdown[k]) for k in BREAKDOWN_KEYS)
    return step, _one(res.tokens_per_s)


#: The step's last part (parts.BREAKDOWN_KEYS): the job's step_overhead, which no other part reads (engine.step)
OVERHEAD = "overhead"


def _modelled_of(res: Any) -> np.ndarray:
    """Step time of every candidate of an evaluated (1-D) grid without the overhead: the other parts added in
    BREAKDOWN_KEYS order, as :func:`_step_of` adds them for one candidate. The overhead comes last in that order, so
    this plus an overhead o equals, float for float, the single-candidate step of the same job with overhead o."""
    parts = [np.asarray(res.breakdown[k], dtype=float) for k in BREAKDOWN_KEYS[:-1]]
    shape = np.broadcast_shapes(*(p.shape for p in parts))
    total = np.zeros(shape)
    for part in parts:
        total = total + part
    return total.ravel()


class _Pricer:
    """Each run's step under trial factors (:func:`fit_runs`' objective), priced as seldom as the results allow:
    each batch of :func:`_batched` in one evaluate per distinct multiplier vector, remembered, its modelled parts
    (:func:`_modelled_of`) plus the overhead asked for. A trial that moves only the overhead (its finite-difference
    column) and the points every leave-one-out refit starts from (the full fit's solution and the finite
    differences around it) are priced once; each step is the one evaluating the trial afresh gives, float for float.
    """

    def __init__(self, batches: list[tuple[Job, Any, str, np.ndarray]]) -> None:
        self.batches = batches
        self.memo: dict[tuple[int, tuple[Any, ...]], np.ndarray] = {}
        self.size = 1 + max(int(m.max()) for *_, m in batches)

    def steps(self, mults: dict[str, float], overhead: float) -> np.ndarray:
        """Each run's step time under the multipliers ``mults`` (factor name -> value; absent: 1) and ``overhead``."""
        bw = {n.split(":", 1)[1]: v for n, v in mults.items() if n.startswith("bandwidth:")}
        c, overlap = mults.get("compute", 1.0), mults.get("overlap", 1.0)
        # the multipliers as scaled_job applies them: an fp8 factor not given is the compute one, a tier's 1 none
        key = (c, mults.get("compute:fp8", c), overlap, tuple(sorted((n, v) for n, v in bw.items() if v != 1.0)))
        steps = np.empty(self.size)
        for b, (job, grid, sync, members) in enumerate(self.batches):  # one evaluate per job and sync mode
            modelled = self.memo.get((b, key))
            if modelled is None:
                trial = scaled_job(job, c, bw, mults.get("compute:fp8"), overlap=overlap)
                with remembering():  # a trial's unmoved groups price their collectives as the last trial did
                    modelled = self.memo[(b, key)] = _modelled_of(evaluate(trial, grid, sync=sync))
            steps[members] = modelled + overhead
        return steps


def _batched(items: list[tuple[Job, Any, str]]) -> list[tuple[Job, Any, str, np.ndarray]]:
    """(job, grid, sync) triples grouped by equal job and sync mode, each group's single-candidate grids stacked
    into one 1-D grid (the step model broadcasts over candidates), with the items' indices in stacking order."""
    groups: list[tuple[Job, str, list[int]]] = []
    for i, (job, _grid, sync) in enumerate(items):
        for gj, gs, members in groups:
            if gs == sync and _same_job(gj, job):
                members.append(i)
                break
        else:
            groups.append((job, sync, [i]))
    out = []
    for job, sync, members in groups:
        grids = [items[i][1] for i in members]
        stacked = msgspec.structs.replace(grids[0], **{
            name: np.stack([np.asarray(getattr(g, name)).reshape(()) for g in grids])
            for name in grids[0].__struct_fields__})
        out.append((job, stacked, sync, np.array(members, dtype=np.intp)))
    return out


def _same_job(a: Job, b: Job) -> bool:
    """Whether two jobs hold the same values, bit for bit (so either prices a grid exactly as the other)."""
    return _same_value(a, b)


def _same_value(a: Any, b: Any) -> bool:
    """Structural, bit-exact equality of job values: numpy arrays by dtype, shape and bytes, floats by their
    bits, dataclasses and msgspec structs (whose numpy fields make ``==`` an identity test) field by field."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray | np.generic):
        return bool(a.dtype == b.dtype and np.shape(a) == np.shape(b) and a.tobytes() == b.tobytes())
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    names = ([f.name for f in fields(a)] if is_dataclass(a) else
             list(getattr(type(a), "__struct_fields__", ())) or None)
    if names is not None:
        return all(_same_value(getattr(a, n), getattr(b, n)) for n in names)
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # no single truth value: count as different
        return False


#: Precisions whose layer GEMMs are priced on the accelerator's fp8 curve, so that ``compute:fp8`` scales them and
#: the calibrated spec writes it into that curve: fp8, and fp4, whose NVFP4 GEMMs run 1.810 x the fp8 curve's rate
#: (engine/job.py ``_nvfp4_gemms``; a factor written into the 16-bit curve would not reach them).
FP8_CURVE_PRECISIONS = ("fp8", "fp4")


def _fp8_gemm_max(acc: Any) -> float:
    """gemm_max of the curve fp8 GEMMs use: the spec's fp8 curve, else the 16-bit one."""
    if acc.compute_efficiency is not None and acc.compute_efficiency.fp8 is not None:
        return float(acc.compute_efficiency.fp8.gemm_max)
    return float(_curve(acc).gemm_max)


def _curve(acc: Any) -> Any:
    return acc.compute_efficiency or compute_cost.default_efficiency(acc.family if acc.family != "other" else acc.name)


#: The default fit's collinearity limit: a factor whose unit-scaled column of the log-space Jacobian raises the
#: condition number of the factors chosen before it above this is not fitted. 30 is the condition index from which
#: Belsley, Kuh & Welsch (*Regression Diagnostics*, 1980, ch. 3) find near-dependencies degrade the estimates.
COND_MAX = 30.0
#: The default fit's width limit: a factor whose 95 % interval spans more than this ratio (the overhead: more than
#: ln of it as a share of the shortest measured step) is not identified by the runs, and is held.
WIDE = 2.0


class _Solution(NamedTuple):
    """One least-squares fit of :func:`fit_runs`: its parameter names (multipliers, then the overhead), bounds, scales,
    solution, residuals, 95 % intervals and the map from the solution to (multipliers, overhead)."""

    names: list[str]
    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    x: np.ndarray
    fun: np.ndarray
    cis: list[list[float] | None]
    unpack: Any


def _identifiable(active: list[str], fit_o: bool, jac: np.ndarray) -> tuple[list[str], bool, dict[str, str]]:
    """The default fit's choice (docs/model.md#calibrate-runs): from the m x p Jacobian of the runs' ln T at the
    start (columns: d ln T / d ln f for each multiplier of ``active``, then d ln T / d o for the overhead), the
    multipliers in the order of greedy column pivoting (Businger & Golub 1965: each next the one whose column has
    the largest part outside the span of those before it), the overhead last; a factor is fitted while fewer than
    max(1, m - 1) are (so m >= 2 runs leave a residual to judge the fit by) and while the unit-scaled columns of the
    chosen ones keep a condition number <= COND_MAX. Returns the multipliers fitted, whether the overhead is, and
    why each other factor is held (without the list of factors fitted, which :func:`fit_runs` adds once the width
    rule has run)."""
    m = jac.shape[0]
    kmax = max(1, m - 1)
    names = active + (["overhead_s"] if fit_o else [])
    unit = jac / np.linalg.norm(jac, axis=0)
    order: list[int] = []
    left = list(range(len(active)))
    while left:
        def outside(j: int) -> float:
            if not order:
                return float(np.linalg.norm(jac[:, j]))
            a = jac[:, order]
            return float(np.linalg.norm(jac[:, j] - a @ np.linalg.lstsq(a, jac[:, j], rcond=None)[0]))
        best = max(left, key=outside)
        order.append(best)
        left.remove(best)
    kept: list[int] = []
    why: dict[int, str] = {}
    for k in order + ([len(active)] if fit_o else []):
        cond = float(np.linalg.cond(unit[:, kept + [k]]))
        if len(kept) >= kmax:
            why[k] = f"{m} run{'s identify' if m > 1 else ' identifies'} at most {kmax} factor{'s' if kmax > 1 else ''}"
            why[k] += " with a residual left to judge them" if m > 1 else ""
        elif not cond <= COND_MAX:
            why[k] = (f"its effect on the runs' steps is nearly a combination of the factors fitted before it "
                      f"(condition index {cond:.3g} > {COND_MAX:g})")
        else:
            kept.append(k)
    held = {names[k]: w for k, w in why.items()}  # fit_runs names the factors finally fitted after each reason
    return [names[k] for k in kept if k < len(active)], fit_o and len(active) in kept, held


def _too_wide(sol: _Solution, n_mult: int, t_min: float) -> dict[str, str]:
    """The factors of a default fit the runs leave unidentified, with why: a multiplier on a bound (its interval
    undefined), or one whose 95 % interval spans more than a factor WIDE (or has none while a residual is left);
    the overhead when its interval is wider than ln WIDE of the shortest measured step (the same width in ln T)."""
    out: dict[str, str] = {}
    dof = len(sol.fun) - len(sol.x)
    for k, name in enumerate(sol.names):
        ci = sol.cis[k]
        if k < n_mult and min(sol.x[k] - sol.lo[k], sol.hi[k] - sol.x[k]) < math.log(BOUND_FACTOR):
            out[name] = f"the fit put it on a bound ({math.exp(sol.x[k]):.4g}), where no interval holds"
        elif dof < 1:
            continue
        elif ci is None:
            out[name] = "the runs give it no interval (their Jacobian is singular in it)"
        elif k < n_mult and ci[1] / ci[0] > WIDE:
            out[name] = f"its 95 % interval {ci[0]:.3g} to {ci[1]:.3g} spans more than a factor {WIDE:g}"
        elif k >= n_mult and 2 * (ci[1] - sol.x[k]) / t_min > math.log(WIDE):
            out[name] = (f"its 95 % interval +-{ci[1] - sol.x[k]:.3g} s is wider than ln {WIDE:g} of the shortest "
                         f"measured step ({t_min:.3g} s)")
    return out


def fit_runs(runs: list[Any], *, source: str = "", out: str | None = None,
             only: list[str] | None = None) -> RunsFit:
    """Fit the factors (module docstring) to ``runs`` (:class:`scalemodel.specs.runs.MeasuredRun`), one cluster.

    ``only`` names the factors to fit (e.g. ``["compute", "overhead_s"]``, or ``["all"]``: every one); the others
    stay at 1 (the overhead at the cluster's ``step_overhead``). Without it, the factors the runs identify
    (:func:`_identifiable`, then :func:`_too_wide`; docs/model.md#calibrate-runs): each other is held, its
    ``Factor.held`` and a warning saying why.
    """
    from scipy.optimize import least_squares  # optional heavy dependency: only a fit needs it

    paths = {r.cluster_path.resolve() for r in runs}
    if len(paths) != 1:
        names = sorted({r.cluster_ref for r in runs})
        raise InputError(f"the runs name {len(paths)} clusters ({', '.join(names)[:200]})", where=source or "runs",
                         allowed="runs on one cluster (one overlay extends one cluster); split the file")
    cluster = runs[0].cluster
    prepared = []
    infeasible: list[str] = []
    for r in runs:
        where = r.where or f"{source}: {r.label}"
        try:
            # a run's warnings (a cudnn_release priced on another curve, ...) are said with the run they are about,
            # as the runs file names it ("runs.yaml: run 2 (line 3): ..."). The runs file writes every strategy and
            # training field flat under its run (specs.runs), so a warning names them so (notices.field_name):
            # moe_flex_dispatcher, not strategy.moe_flex_dispatcher
            with notices.collecting() as said, notices.flat_fields("strategy", "training"):
                job = build_job(r.cluster, r.workload, r.training)
                grid = grid_from_strategy(r.strategy, r.training, r.gpus, job,
                                          origin=Origin(f"{where}: ", f"{where}: gpus"))
                res = evaluate(job, grid, sync=r.strategy.sync)
            for line in dict.fromkeys(said):
                notices.warn(f"{where}: {line}")
            (step, tokens), reason = _step_of(res), int(np.asarray(res.reason).ravel()[0])
        except InputError as exc:
            if exc.where.startswith(where):
                raise
            # a run writes its training fields by their own names (specs.runs): "run 1: module_precision.mtp",
            # not the engine's "training.module_precision.mtp", a section the runs file has not
            field = exc.where.removeprefix("training.")
            raise InputError(exc.what, where=f"{where}: {field}" if field else where, allowed=exc.allowed) from None
        if not (math.isfinite(step) and step > 0 and tokens > 0):
            raise InputError("the model gives no finite step time", where=where,
                             allowed="a layout that divides the model and the GPUs (check with `scalemodel predict`)")
        measured = r.step_time_s if r.step_time_s is not None else step * tokens / r.tokens_per_s
        if r.step_time_s is None and not MIN_STEP_S <= measured <= MAX_STEP_S:  # a rate read as a step time
            # a subnormal rate overflows the step to inf: "a step of inf s" (fuzz38); said as past the bound
            step_text = f"of {measured:.3g} s" if math.isfinite(measured) else f"longer than {MAX_STEP_S:g} s"
            raise InputError(f"{r.tokens_per_s:.3g} tokens per second is a step {step_text} (this run's "
                             f"{step * tokens:.4g} tokens a step)", where=f"{where}: tokens_per_s",
                             allowed=f"a rate that makes a step of {MIN_STEP_S:g} s to {MAX_STEP_S:g} s")
        floor = _flops_floor_s(job, res, r.gpus)
        if measured < floor:  # faster than physics: a wrong step time, GPU count, model or batch, not a factor to fit
            shown = "log" if r.log is not None else "step_time" if r.step_time_s is not None else "tokens_per_s"
            raise InputError(f"a measured step of {measured:.4g} s is faster than the physical floor, the run's "
                             f"{_one(res.model_flops):.4g} model FLOPs a step at the "
                             f"{r.gpus} GPUs' peak of {_peak(job) / 1e12:.4g} TFLOP/s each: {floor:.4g} s",
                             where=f"{where}: {shown}",
                             allowed="the run's measured step time or rate with the GPUs, model, batch and sequence "
                                     "length it ran (model FLOPs utilisation at most 100 %)")
        net = _bytes_floor(job, grid, r.strategy.sync)
        if net is not None and measured < net.seconds:  # faster than its gradients can cross the slowest tier
            shown = "log" if r.log is not None else "step_time" if r.step_time_s is not None else "tokens_per_s"
            raise InputError(f"a measured step of {measured:.4g} s is faster than the physical floor, the run's "
                             f"{net.grad_bytes:.4g} gradient bytes a step per data-parallel rank reduced over its "
                             f"{net.ranks} ranks, {net.per_domain} inside each domain below the {net.tier} tier, at "
                             f"its line rate of {net.line_rate / 1e9:.4g} GB/s per GPU: {net.seconds:.4g} s",
                             where=f"{where}: {shown}",
                             allowed="the run's measured step time or rate with the GPUs, model, parallel layout and "
                                     "cluster it ran (its gradients cross each tier at most at the tier's line rate)")
        if reason:
            infeasible.append(f"run {r.label}: the model says this run could not run ({INFEASIBLE_REASONS[reason]}); "
                              "its step is still priced and fitted, check the run's settings")
        prepared.append(_Prepared(job, grid, r.strategy.sync, float(measured)))
    batches = _batched([(p.job, p.grid, p.sync) for p in prepared])
    t = np.array([p.measured_s for p in prepared])

    acc = cluster.accelerator
    curve = _curve(acc)
    fp8_gemm = _fp8_gemm_max(acc)
    effs = [float(curve.gemm_max), float(curve.memory), fp8_gemm]
    has_fp8 = any(r.training.precision in FP8_CURVE_PRECISIONS for r in runs)
    tiers = list(prepared[0].job.network.tiers)
    eta0, o0 = float(cluster.overlap_efficiency), float(cluster.step_overhead)
    mult_names = (["compute"] + (["compute:fp8"] if has_fp8 else []) + [f"bandwidth:{tr.name}" for tr in tiers]
                  + ["overlap"])
    # the compute multiplier also scales each run's attention curve and BF16 core / logits GEMMs (scaled_job):
    # none may pass 1, or a fitted factor would price a kernel above its peak (and be refused as input)
    scaled = [e for p in prepared for e in _compute_scaled(p.job)]
    mult_hi = ([min(MULT_BOUNDS[1], 1.0 / max((effs[:2] if has_fp8 else effs) + scaled))]
               + ([min(MULT_BOUNDS[1], 1.0 / fp8_gemm)] if has_fp8 else [])
               + [min(MULT_BOUNDS[1], 1.0 / tr.efficiency) for tr in tiers] + [min(MULT_BOUNDS[1], 1.0 / eta0)])

    predict_all = _Pricer(batches).steps

    if only is not None and "all" in only:  # every factor, whether the runs identify it or not (before calib27)
        if len(only) > 1:
            raise InputError(f"'all' names every factor and comes alone, got {','.join(only)[:200]!r}",
                             where="--factors", allowed="all, or a comma-separated list of: "
                             + ", ".join((*mult_names, "overhead_s")))
        only = [*mult_names, "overhead_s"]
    if only is not None:
        unknown = [n for n in only if n not in (*mult_names, "overhead_s")]
        if unknown or not only:
            raise InputError(f"unknown factor {unknown[0]!r}" if unknown else "no factor named", where="--factors",
                             allowed="a comma-separated list of: " + ", ".join((*mult_names, "overhead_s")))
    chosen = set(only) if only is not None else {*mult_names, "overhead_s"}
    before = predict_all({}, o0)
    warnings: list[str] = list(infeasible)
    active = []
    sens: dict[str, np.ndarray] = {}
    for name in mult_names:
        if name not in chosen:
            continue
        moved = predict_all({name: 0.9}, o0)
        sens[name] = np.abs(np.log(moved / before))  # per run: which runs determine this factor
        if float(np.max(sens[name])) > INSENSITIVE:
            active.append(name)
        else:
            why = ("no run's traffic crosses this tier, or it is all hidden under compute"
                   if name.startswith("bandwidth:") else
                   "no run's hidden communication needs more than 90 % of its compute window"
                   if name == "overlap" else "no run's step depends on it")
            warnings.append(f"{name}: not determined by the runs ({why}); left at 1 and not fitted")
    fit_o = "overhead_s" in chosen
    held: dict[str, str] = {}
    if only is None:  # the default: only the factors the runs identify (docs/model.md#calibrate-runs)
        jac0 = np.column_stack([np.log(predict_all({n: 0.9}, o0) / before) / math.log(0.9) for n in active]
                               + ([1.0 / before] if fit_o else [])) if active or fit_o else np.zeros((len(t), 0))
        active, fit_o, held = _identifiable(active, fit_o, jac0)
    o_hi = 10.0 * float(t.max())
    if not active and not fit_o and only is not None:
        raise InputError("none of the chosen factors changes any run's predicted step", where="--factors",
                         allowed="include overhead_s or a factor the runs exercise")
    if only is not None and len(t) < len(active) + fit_o:
        warnings.append(f"{len(t)} runs for {len(active) + fit_o} factors: the fit is underdetermined and has no "
                        "intervals")

    def solve(act: list[str], fo: bool, start: dict[str, float]) -> _Solution:
        """Least squares over the multipliers ``act`` (and the overhead when ``fo``), from ``start``."""
        nm = act + (["overhead_s"] if fo else [])
        lo = np.array([math.log(MULT_BOUNDS[0])] * len(act) + ([0.0] if fo else []))
        hi = np.array([math.log(mult_hi[mult_names.index(n)]) for n in act] + ([o_hi] if fo else []))
        scale = np.array([1.0] * len(act) + ([max(float(np.median(t)) * 0.1, 1e-6)] if fo else []))

        def unpack(x: np.ndarray) -> tuple[dict[str, float], float]:
            return {n: float(np.exp(x[i])) for i, n in enumerate(act)}, float(x[-1]) if fo else o0

        def resid(x: np.ndarray) -> np.ndarray:
            mults, o = unpack(x)
            return np.log(np.maximum(predict_all(mults, o), 1e-15) / t)

        if not nm:  # nothing identified: the cluster as it is
            return _Solution(nm, lo, hi, scale, np.zeros(0), resid(np.zeros(0)), [], unpack)
        x0 = np.array([math.log(start.get(n, 1.0)) for n in act] + ([start.get("overhead_s", 0.0)] if fo else []))
        x0 = np.clip(x0, lo + 1e-6, hi - 1e-6)
        if fo and "overhead_s" not in start:
            x0[-1] = min(max(o0, 0.01 * float(np.min(t))), hi[-1] / 2)
        sol = least_squares(resid, x0, method="trf", bounds=(lo, hi), x_scale=scale, diff_step=1e-4)
        x, fun = np.asarray(sol.x), np.asarray(sol.fun)
        # least_squares' own `jac` is scaled to zero in a column whose parameter sits on a bound (trf's
        # Coleman-Li scaling), so the interval Jacobian is taken afresh: one-sided differences pointing
        # into the feasible region
        jac = np.empty((len(t), len(nm)))
        for k in range(len(nm)):
            h = 1e-4 * scale[k]
            step = h if x[k] + h <= hi[k] else -h
            xk = x.copy()
            xk[k] += step
            jac[:, k] = (resid(xk) - fun) / step
        return _Solution(nm, lo, hi, scale, x, fun, fit_intervals(x, jac, fun, log_params=len(act)), unpack)

    fitted = solve(active, fit_o, {})
    while only is None:  # the default drops every factor whose interval the runs leave too wide, and fits again
        wide = _too_wide(fitted, len(active), float(np.min(t)))
        if not wide:
            break
        held.update(wide)
        start = {n: float(np.exp(fitted.x[i])) for i, n in enumerate(active)}
        active = [n for n in active if n not in wide]
        fit_o = fit_o and "overhead_s" not in wide
        fitted = solve(active, fit_o, start)
    names, lo, hi, scale, x, fun, cis, unpack = fitted
    # each reason names the factors the fit finally kept: a width drop after _identifiable can remove one it chose
    held = {n: f"{w} (fitted: {', '.join(names) or 'none'})" for n, w in held.items()}
    mults, overhead = unpack(x)
    after = predict_all(mults, overhead)

    def refit_without(i: int) -> float:
        """Run i's step predicted by the factors refitted to the other runs (leave-one-out): a multiplier that only
        run i determined is not fitted (stays 1), as the full fit leaves a factor no run determines; the factors are
        the full fit's selection (the default's held ones stay held: no fold reruns _identifiable, _too_wide); the
        refit starts from the full fit's solution (the optimum, where the fit has one, does not depend on the start)."""
        keep = np.arange(len(t)) != i
        act = [n for n in active if float(np.max(sens[n][keep])) > INSENSITIVE]
        cols = [active.index(n) for n in act] + ([len(names) - 1] if fit_o else [])
        if not cols:  # nothing left to fit without run i: the factors at their starting values
            return float(predict_all({}, o0)[i])
        lo_i, hi_i = lo[cols], hi[cols]
        x0_i = np.clip(x[cols], lo_i + 1e-6, hi_i - 1e-6)

        def unpack_i(z: np.ndarray) -> tuple[dict[str, float], float]:
            return {n: float(np.exp(z[j])) for j, n in enumerate(act)}, float(z[-1]) if fit_o else o0

        def resid_i(z: np.ndarray) -> np.ndarray:
            return np.log(np.maximum(predict_all(*unpack_i(z)), 1e-15)[keep] / t[keep])

        sol_i = least_squares(resid_i, x0_i, method="trf", bounds=(lo_i, hi_i), x_scale=scale[cols], diff_step=1e-4)
        return float(predict_all(*unpack_i(np.asarray(sol_i.x)))[i])

    loo_ok = MIN_LOO_RUNS <= len(t) <= LOO_MAX_RUNS and len(t) - 1 >= len(names)
    loo = [refit_without(i) for i in range(len(t))] if loo_ok else None

    factors = []
    descriptions = {"compute": "x the accelerator's GEMM (gemm_max) and memory-bandwidth efficiencies",
                    "compute:fp8": "x the fp8 GEMM curve's gemm_max (fp8 runs' GEMMs)",
                    "overlap": "x the cluster's overlap_efficiency (share of compute windows that hide traffic)",
                    "overhead_s": "seconds added to every step (the cluster's step_overhead)"}
    for name in mult_names:
        if name in active:
            i = active.index(name)
            value, ci = mults[name], cis[i]
            side = ("lower" if x[i] - lo[i] < math.log(BOUND_FACTOR) else
                    "upper" if hi[i] - x[i] < math.log(BOUND_FACTOR) else None)
            if side is not None:  # the linearised interval assumes an interior optimum
                ci = None
            elif ci is not None:  # clipped to the physical bounds
                ci = [max(ci[0], MULT_BOUNDS[0]), min(ci[1], mult_hi[mult_names.index(name)])]
        else:
            value, ci, side = 1.0, None, None
        desc = descriptions.get(name, f"x the efficiency of tier {name.split(':', 1)[-1]!r} (fraction of line rate)")
        factors.append(Factor(name, value, ci, name in active, side,
                              [MULT_BOUNDS[0], mult_hi[mult_names.index(name)]], desc, held.get(name)))
    o_side = (None if not fit_o else "lower" if overhead <= 1e-6 * float(np.min(t))
              else "upper" if o_hi - overhead < 1e-3 * o_hi else None)
    factors.append(Factor("overhead_s", overhead, cis[-1] if fit_o else None, fit_o, o_side, [0.0, o_hi],
                          descriptions["overhead_s"], held.get("overhead_s")))
    for f in factors:
        if f.held:
            kept = f"left at the cluster's {o0:.4g} s" if f.name == "overhead_s" else "left at 1"
            warnings.append(f"{f.name}: not identified by the runs, {kept} (the default fits only the factors the "
                            f"runs identify; --factors fits it anyway): {f.held}")
    for f in factors:
        if f.at_bound:
            what = ("the runs show no per-step overhead beyond the model" if f.name == "overhead_s"
                    and f.at_bound == "lower" else "the data push it to a physical limit; others absorb the rest")
            warnings.append(f"{f.name}: fitted value {f.value:.4g} sits on its {f.at_bound} bound "
                            f"{f.bounds[0] if f.at_bound == 'lower' else f.bounds[1]:.4g} ({what})")
    run_rows = [{"name": r.label, "gpus": r.gpus, "measured_s": float(m), "before_s": float(b), "after_s": float(a),
                 "error_before": float(b / m - 1), "error_after": float(a / m - 1),
                 "loo_s": None if loo is None else loo[i], "error_loo": None if loo is None else float(loo[i] / m - 1),
                 "log": _log_row(r)}
                for i, (r, m, b, a) in enumerate(zip(runs, t, before, after, strict=True))]
    bounded = any(f.at_bound for f in factors)
    calibration = {**_calibration_block(runs, prepared, t, after, loo, len(names), bounded),
                   "hardware": cluster.hardware()}
    inputs = {"runs": source, "cluster": cluster.name, "n_runs": len(runs), "out": out,
              "factors": sorted(chosen), "selection": "identified" if only is None else "as asked",
              # the candidates above; these the fit kept (the default holds what the runs do not identify)
              "fitted": [f.name for f in factors if f.determined]}
    return RunsFit(inputs, factors, run_rows, warnings,
                   float(np.sqrt(np.mean(np.log(before / t) ** 2))), float(np.sqrt(np.mean(np.log(after / t) ** 2))),
                   calibration)


#: The largest |in-sample speed error| of a fit that passes through every run (m <= p factors, none on a bound): the
#: least-squares solver's tolerance, far below any measured run's noise.
INTERPOLATED = 1e-6


def _calibration_block(runs: list[Any], prepared: list[_Prepared], t: np.ndarray, after: np.ndarray,
                       loo: list[float] | None, n_factors: int, bounded: bool = False) -> dict[str, Any]:
    """The overlay's ``calibration`` block (specs.cluster.CalibrationSpec, version CALIBRATION_VERSION): each run's
    speed error e = measured / predicted - 1 in and (``loo``: the refits' predictions) out of sample, its family
    keys, and which the band uses (docs/model.md#intervals); ``bounded``: a fitted factor sits on a bound."""
    m = len(t)
    if loo is not None:
        method, reason = "leave-one-out", ""
    elif m <= n_factors and float(np.max(np.abs(t / after - 1))) < INTERPOLATED:
        method, reason = "none", (f"{m} runs for {n_factors} fitted factors: the fit's residuals are zero by "
                                  "construction and say nothing of its error")
    elif m <= n_factors:  # a factor on its bound, or runs the factors cannot tell apart, kept the fit off some run:
        # the residuals are not zero, but no more telling (the line said 'zero by construction' over a residual table
        # of +2.8 %, +5.1 %, -6.2 %; then 'only because factors sit on their bounds' over three one-node runs whose
        # times are not affine in the batch, -10 %, +32 %, -16 %, no factor on a bound)
        why = ("only because factors sit on their bounds" if bounded else "because the runs vary in fewer ways than "
               "the factors: they cannot be told apart, and no setting of them passes through every run")
        method, reason = "none", (f"{m} runs for {n_factors} fitted factors: at least a factor per run, so the "
                                  f"residuals say nothing of the fit's error (they are not zero {why})")
    elif m < MIN_LOO_RUNS:
        method, reason = "in-sample", f"{m} runs (leave-one-out needs {MIN_LOO_RUNS})"
    elif m > LOO_MAX_RUNS:
        method, reason = "in-sample", (f"{m} runs, more than the {LOO_MAX_RUNS} refitted one by one; with this many "
                                       f"runs for {n_factors} factors in-sample errors are close to out-of-sample ones")
    else:
        method, reason = "in-sample", (f"{m} runs for {n_factors} fitted factors: a refit without one run would have "
                                       "fewer runs than factors")
    rows = []
    for i, (r, p) in enumerate(zip(runs, prepared, strict=True)):
        par, model, prec = family_of(p.job, p.grid.describe(0)["zero"])
        rows.append({"run": r.label, "gpus": int(r.gpus), "parallelism": par, "model": model, "precision": prec,
                     "in_sample": float(t[i] / after[i] - 1),
                     "leave_one_out": None if loo is None else float(t[i] / loo[i] - 1)})
    return {"version": CALIBRATION_VERSION, "runs": m, "factors": n_factors, "method": method, "reason": reason,
            "residuals": rows}


def _log_row(run: Any) -> dict[str, Any] | None:
    """Where a run's measurement came from when it was read from a training log (None otherwise)."""
    log = getattr(run, "log", None)
    if log is None:
        return None
    return {"path": log.path, "format": log.format, "quantity": log.quantity, "median": log.value,
            "lines_used": log.lines_used, "lines_dropped": log.lines_dropped}


def overlay_doc(fit: RunsFit, cluster: Any, *, extends: str) -> dict[str, Any]:
    """The cluster overlay (a dict for YAML) that ``extends`` the runs' cluster and carries every fitted
    factor: each fitted tier's efficiency x its factor, the accelerator (written in full, as a cluster's
    accelerator is replaced, not merged) with its efficiency curve x the compute factor, the overlap
    efficiency x the overlap factor, and the fitted per-step overhead as ``step_overhead``."""
    doc: dict[str, Any] = {"extends": extends, "name": f"{cluster.name}-calibrated"}
    ov = next((f for f in fit.factors if f.name == "overlap" and f.determined), None)
    if ov is not None:
        doc["overlap_efficiency"] = min(1.0, round(float(cluster.overlap_efficiency) * ov.value, 9))
    if fit.factor("overhead_s").determined:
        # an overhead fitted onto its lower bound 0 comes back from the solver as a few 1e-13 s, which the cluster
        # spec refuses as below a time's physical range (specs.quantities.RANGES, 1 ps): the overlay written could
        # not be read back. Below that floor it is the bound, written as 0.
        o = float(fit.factor("overhead_s").value)
        doc["step_overhead"] = o if o >= RANGES["time"][0] else 0.0
    tiers = []
    for f in fit.factors:
        if f.determined and f.name.startswith("bandwidth:"):
            tier = next(t for t in cluster.tiers if t.name == f.name.split(":", 1)[1])
            tiers.append({"name": tier.name, "efficiency": min(1.0, round(float(tier.efficiency) * f.value, 9))})
    c = fit.factor("compute")
    if c.determined or any(f.name == "compute:fp8" and f.determined for f in fit.factors):
        acc = cluster.accelerator.model_dump(mode="json", exclude_none=True)
        curve = _curve(cluster.accelerator)
        ce: dict[str, Any] = curve.model_dump(mode="json", exclude_none=True) if hasattr(curve, "model_dump") else {
            "gemm_max": float(curve.gemm_max), "gemm_half_dim": float(curve.gemm_half_dim),
            "memory": float(curve.memory)}
        ce["gemm_max"] = min(1.0, round(float(curve.gemm_max) * c.value, 9))
        ce["memory"] = min(1.0, round(float(curve.memory) * c.value, 9))
        f8 = next((f for f in fit.factors if f.name == "compute:fp8" and f.determined), None)
        if f8 is not None:  # fp8 GEMMs get their own factor: on the spec's fp8 curve, else a copy of the 16-bit one
            base = ce.get("fp8") or {"gemm_max": float(curve.gemm_max), "gemm_half_dim": float(curve.gemm_half_dim)}
            ce["fp8"] = {**base, "gemm_max": min(1.0, round(float(base["gemm_max"]) * f8.value, 9)),
                         "source": f"calibrated: x{f8.value:.6g}"}
        elif ce.get("fp8"):
            ce["fp8"]["gemm_max"] = min(1.0, round(float(ce["fp8"]["gemm_max"]) * c.value, 9))
        ce["source"] = f"calibrated: x{c.value:.6g} on {ce.get('source') or 'the default curve'}"[:500]
        acc["compute_efficiency"] = ce
        kernels = list((acc.get("attention_efficiency") or {}).values()) + [  # and each cuDNN release's curves
            k for per in (acc.get("attention_releases") or {}).values() for k in per.values()]
        for kernel in kernels:  # a fitted attention kernel: x compute
            for direction in ("fwd", "bwd"):
                kernel[direction]["attn_max"] = min(1.0, round(float(kernel[direction]["attn_max"]) * c.value, 9))
        doc["accelerator"] = acc
    if tiers:
        doc["tiers"] = tiers
    if fit.calibration:
        doc["calibration"] = fit.calibration
    return doc


def overlay_yaml(fit: RunsFit, cluster: Any, *, extends: str, source: str) -> str:
    source = source.replace("\r", "\\r").replace("\n", "\\n")
    head = (f"# Calibrated by `scalemodel calibrate runs` from {source}: {len(fit.runs)} runs,\n"
            f"# rms log error {fit.rms_log_error_before:.3g} before, {fit.rms_log_error_after:.3g} after.\n")
    return head + yaml.safe_dump(overlay_doc(fit, cluster, extends=extends), sort_keys=False)



def predict_with_fit(fit: RunsFit, runs: list[Any]) -> list[float]:
    """Step times of ``runs`` (MeasuredRun, any measurement) under the fitted factors, overhead included."""
    return [_one(res.step_time) for res in predictions_with_fit(fit, runs)]


def fitted_job(fit: RunsFit, job: Job) -> Job:
    """``job`` with every fitted factor applied (what the overlay gives)."""
    bw = {f.name.split(":", 1)[1]: f.value for f in fit.factors if f.name.startswith("bandwidth:") and f.determined}
    f8 = next((f.value for f in fit.factors if f.name == "compute:fp8" and f.determined), None)
    ov = next((f.value for f in fit.factors if f.name == "overlap" and f.determined), 1.0)
    o = fit.factor("overhead_s")
    return scaled_job(job, fit.factor("compute").value, bw, f8, overlap=ov, overhead=o.value if o.determined else None)


def predictions_with_fit(fit: RunsFit, runs: list[Any]) -> list[Any]:
    """The step model's result (StepArrays, one candidate) for each of ``runs`` under the fitted factors."""
    out = []
    for r in runs:
        job = fitted_job(fit, build_job(r.cluster, r.workload, r.training))
        grid = grid_from_strategy(r.strategy, r.training, r.gpus, job)
        out.append(evaluate(job, grid, sync=r.strategy.sync))
    return out


@dataclass
class ScaleChange:
    """The fitted model at the largest measured run and at a target GPU count, part by part
    (``calibrate runs --predict-at N``): what changed between the measured and the predicted scale."""

    mode: str
    measured: dict[str, Any]   # name, gpus, global_batch, measured_s, step_s, breakdown_s, share
    target: dict[str, Any]     # gpus, global_batch, dp, step_s, breakdown_s, share, tokens_per_s, feasible
    parts: list[dict[str, Any]]  # every part either side: from/to seconds and shares, change in each
    grew: list[str]            # parts whose share of the step grew most (largest first, at most 3)
    notes: list[str] = field(default_factory=list)
    why: str = ""

    def payload(self) -> dict[str, Any]:
        return {"mode": self.mode, "measured": self.measured, "target": self.target, "parts": self.parts,
                "grew": self.grew, "notes": self.notes, "why": self.why}


#: A part "grew" when its share of the step rose by at least this much (0.5 percentage point).
GREW_SHARE = 0.005


class ScaleTarget(NamedTuple):
    """The run ``--predict-at`` scales (the largest measured) and the same configuration at the target count."""

    row: int
    run: Any
    batch0: int
    target: Any
    notes: list[str]
    mode: str


def scale_target(runs: list[Any], gpus: int, *, mode: str = "strong") -> ScaleTarget:
    """The largest measured run (most GPUs; the last such run in the file) and the same configuration at
    ``gpus`` GPUs: DP re-derived as gpus / (tp pp cp), the global batch kept (``strong``) or grown by gpus / the
    run's GPUs (``weak``), as ``scalemodel scale`` does. Checked before the fit, which takes seconds: a bad
    --predict-at was refused only after it."""
    if mode not in ("weak", "strong"):
        raise InputError(f"unknown scaling mode {mode!r}", where="--mode", allowed="weak or strong")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InputError(f"{gpus!r} is not a GPU count", where="--predict-at", allowed="a whole number >= 1")
    i_max = max(range(len(runs)), key=lambda i: (runs[i].gpus, i))
    run = runs[i_max]
    run.cluster.require_gpus(gpus, where="--predict-at")
    notes = []
    if run.strategy.dp is not None:
        notes.append(f"dp={run.strategy.dp} of run {run.label!r} re-derived as {gpus} / (tp pp cp)")
    batch0 = int(run.training.global_batch) if run.training.global_batch is not None else None
    if batch0 is None:
        raise InputError(f"run {run.label!r} gives no global_batch", where="--predict-at",
                         allowed="runs with a global_batch, so the target's batch is defined")
    try:
        batch = _batches([run.gpus, gpus], mode, batch0)[1]
        _check_split(gpus, batch, run.strategy, run.training.micro_batch, mode)
    except InputError as exc:  # the sweep names its own options; here the target comes from --predict-at
        raise InputError(f"run {run.label!r} at {gpus} GPUs: {exc.what}", where="--predict-at",
                         allowed=exc.allowed) from None
    target = replace(run, gpus=gpus, strategy=run.strategy.model_copy(update={"dp": None}),
                     training=run.training.model_copy(update={"global_batch": batch}), label=f"{gpus} GPUs")
    return ScaleTarget(i_max, run, batch0, target, notes, mode)


def scale_change(fit: RunsFit, at: ScaleTarget) -> ScaleChange:
    """:func:`scale_target`'s target priced under the fitted factors beside the run it scales."""
    i_max, run, batch0, target, notes, mode = at
    notes, gpus = list(notes), int(target.gpus)
    res_a, res_b = predictions_with_fit(fit, [run, target])

    def one(res: Any) -> tuple[dict[str, float], float]:
        parts = {k: _one(res.breakdown[k]) for k in BREAKDOWN_KEYS}
        return parts, sum(parts.values())

    (pa, ta), (pb, tb) = one(res_a), one(res_b)
    reason = int(np.asarray(res_b.reason).ravel()[0])
    if reason:
        notes.append(f"the model says the target could not run ({INFEASIBLE_REASONS[reason]}); it is still priced")
    row = fit.runs[i_max]

    def side(parts: dict[str, float], step: float) -> dict[str, Any]:
        return {"step_s": step, "breakdown_s": parts, "share": {k: v / step if step > 0 else 0.0
                                                               for k, v in parts.items()}}

    a = {"name": run.label, "gpus": run.gpus, "global_batch": batch0, "measured_s": row["measured_s"], **side(pa, ta)}
    b = {"gpus": gpus, "global_batch": int(target.training.global_batch),
         "dp": gpus // (run.strategy.tp * run.strategy.pp * run.strategy.cp),
         "feasible": reason == 0, "tokens_per_s": _one(res_b.tokens_per_s), **side(pb, tb)}
    rows = []
    for k in BREAKDOWN_KEYS:
        if pa[k] == 0.0 and pb[k] == 0.0:
            continue
        rows.append({"part": k, "from_s": pa[k], "to_s": pb[k], "from_share": a["share"][k], "to_share": b["share"][k],
                     "change_s": pb[k] - pa[k], "change_share": b["share"][k] - a["share"][k]})
    grew = [r["part"] for r in sorted(rows, key=lambda r: -r["change_share"]) if r["change_share"] >= GREW_SHARE][:3]
    return ScaleChange(mode, a, b, rows, grew, notes)
