"""Prediction intervals from the model's own validation residuals (docs/model.md#intervals).

Every published run `scripts/validate_training.py` compares leaves a signed speed error
``e = predicted speed / measured speed - 1`` (``scalemodel/data/validation_residuals.json``, written by
``scripts/build_residuals.py``). A prediction is matched to the most specific family of validated runs
with at least :data:`MIN_CASES` cases, in this order of keys: accelerator generation, parallelism family
(TP/PP/DP vs ZeRO-3/FSDP), dense vs MoE, precision; dropping keys from the end until enough cases
remain. The band is that family's error range (its 10th-90th percentile from :data:`QUANTILE_FROM`
cases on, its min-max below) applied to the prediction: the measured step time would be
``t (1 + e)``, the measured throughput ``x / (1 + e)``.

Nothing similar validated (fewer than :data:`MIN_CASES` cases of the accelerator generation, none or a few, and
the result says which) is out of distribution: the result says so, and the band is the whole validation set's
error range (min to max), doubled, not a narrow one. A job far outside the GPU counts of its family (more than
:data:`SCALE_MARGIN` x beyond them) is flagged the same way.

A job on a cluster overlay written by ``scalemodel calibrate runs`` (:class:`Calibration`, from the overlay's
``calibration`` block) takes its band from the calibrated model's own errors on the runs it was fitted to instead:
leave-one-out errors (each run predicted by a refit without it) where the overlay has them, else the fit's in-sample
errors (optimistic, and said so). The runs are matched as the published ones are, on parallelism family, dense vs
MoE and precision (the cluster is the overlay's own, so the generation is fixed), dropping keys from the end until
:data:`MIN_CASES` runs remain, down to all the runs. The published-runs band is kept, with the reason, where the
calibration cannot give one: fewer than :data:`MIN_CASES` runs, a fit with as many factors as runs (its residuals
are zero by construction), a job more than :data:`SCALE_MARGIN` x beyond the runs' GPU counts (the runs say nothing
about that scale), a cluster whose hardware is not the runs' (a spec extending the overlay with another accelerator
or tier line rate: :func:`hardware_change`), or an overlay from before the residuals were recorded (version 1).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import msgspec

from scalemodel.choices import Zero
from scalemodel.units import format_quantity

RESIDUALS = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data",
                         "validation_residuals.json")
MIN_CASES = 3
QUANTILE_FROM = 10
SCALE_MARGIN = 4.0
KEYS = ("generation", "parallelism", "model", "precision")


class Interval(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """A band on the step time (and the throughputs), with where it comes from."""

    low: float  # smallest error of the family (a negative e: the run was faster than predicted)
    high: float  # largest error (the model predicted a faster run than measured)
    family: dict[str, str]
    cases: int
    out_of_distribution: bool
    reason: str
    source: str = "published"  # or "calibrated-leave-one-out", "calibrated-in-sample" (SOURCES)
    calibration: dict[str, Any] | None = None  # the overlay's fit, when the job's cluster is calibrated

    def step_time(self, t: float) -> tuple[float, float]:
        return t * (1.0 + self.low), t * (1.0 + self.high)

    def throughput(self, x: float) -> tuple[float, float]:
        return x / (1.0 + self.high), x / (1.0 + self.low)

    def label(self) -> str:
        fam = " ".join(self.family.values()) or "all validated runs"
        return f"{fam}, {runs_phrase({'cases': self.cases, 'source': self.source})}"

    def payload(self, step_time_s: float, tokens_per_s: float, mfu: float) -> dict[str, Any]:
        t_lo, t_hi = self.step_time(step_time_s)
        x_lo, x_hi = self.throughput(tokens_per_s)
        m_lo, m_hi = self.throughput(mfu)
        return {"step_time_s": [t_lo, t_hi], "tokens_per_s": [x_lo, x_hi], "mfu": [m_lo, m_hi],
                "speed_error_range": [self.low, self.high], "family": self.family, "cases": self.cases,
                "out_of_distribution": self.out_of_distribution, "basis": self.reason, "source": self.source,
                "calibration": self.calibration}


#: Where a band comes from (Interval.source).
SOURCES = ("published", "calibrated-leave-one-out", "calibrated-in-sample")


def runs_phrase(band: dict[str, Any]) -> str:
    """'18 published runs', '8 of your calibration runs (leave-one-out)': the runs an interval payload's band
    comes from."""
    n = band["cases"]
    src = band.get("source", "published")
    if src == "published":
        return f"{n} published run{'s' if n != 1 else ''}"
    return f"{n} of your calibration runs ({'leave-one-out' if src.endswith('leave-one-out') else 'in-sample'})"


#: Keys a calibration run is matched on (the cluster, hence the generation, is the overlay's own).
CALIBRATION_KEYS = ("parallelism", "model", "precision")


class Calibration(msgspec.Struct, frozen=True):
    """The ``calibration`` block of a `calibrate runs` overlay (specs.cluster.CalibrationSpec), as a job carries it:
    hashable, the residual of the chosen method per run. ``version`` 1: an overlay from before the block (no
    residuals)."""

    cluster: str
    version: int
    runs: int = 0
    factors: int = 0
    method: str = "none"  # "leave-one-out" | "in-sample" | "none"
    reason: str = ""
    residuals: tuple[tuple[str, str, str, int, float], ...] = ()  # (parallelism, model, precision, gpus, e)
    changed: str = ""  # how the job's cluster differs from the hardware the runs ran on (hardware_change); "": not

    def summary(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "version": self.version, "runs": self.runs, "factors": self.factors,
                "method": self.method}


#: What `calibrate runs` writes as its compute curve's source (engine.calibrate_runs.overlay_doc): how an overlay from
#: before the calibration block (version 1) is told from a hand-written cluster.
CALIBRATED_SOURCE = "calibrated: x"


def calibration_of(cluster: Any) -> Calibration | None:
    """The calibration ``cluster`` carries: its ``calibration`` block, or version 1 (no residuals) for an overlay
    `calibrate runs` wrote before the block existed, told by its compute curve's source (written whenever a compute
    factor was fitted, as in every default fit); None for any other cluster."""
    cal = getattr(cluster, "calibration", None)
    if cal is not None:
        rows = tuple((r.parallelism, r.model, r.precision, int(r.gpus),
                      float(r.leave_one_out if cal.method == "leave-one-out" else r.in_sample))
                     for r in cal.residuals if cal.method != "leave-one-out" or r.leave_one_out is not None)
        return Calibration(cluster.name, int(cal.version), int(cal.runs), int(cal.factors), cal.method, cal.reason,
                           rows, hardware_change(cal.hardware, cluster.hardware()))
    curve = getattr(getattr(cluster, "accelerator", None), "compute_efficiency", None)
    if curve is not None and str(getattr(curve, "source", "") or "").startswith(CALIBRATED_SOURCE):
        return Calibration(cluster.name, 1)
    return None


def hardware_change(fitted: Any, now: dict[str, Any]) -> str:
    """What differs between the hardware a calibration was fitted on (CalibrationHardware; None: not recorded, nothing
    said) and a cluster's (ClusterSpec.hardware): "" when nothing, else e.g. "accelerator h100-sxm -> b200",
    "accelerator bf16 peak 312 TFLOP/s -> 600 TFLOP/s" (a peak or memory bandwidth an overlay records: a --set keeps
    the name), "tier ib-leaf 50 GB/s -> 12.5 GB/s per GPU", "tier ib-spine oversubscription 1:1 -> 2:1" (a tier's
    oversubscription, span or latency where the overlay records them; quantities compared to 1e-9)."""
    if fitted is None:
        return ""
    out = [f"{k.replace('_', ' ')} {getattr(fitted, k)} -> {now[k]}" for k in ("accelerator", "gpus_per_node")
           if getattr(fitted, k) != now[k]]
    same = fitted.accelerator == now["accelerator"]  # another accelerator: its name says it; else what --set changed
    if same and fitted.peak_flops is not None:  # an overlay written before the peaks were recorded: not checked
        for prec in sorted(set(fitted.peak_flops) | set(now["peak_flops"])):
            a, b = fitted.peak_flops.get(prec), now["peak_flops"].get(prec)
            if a is None or b is None or _differ(a, b):
                out.append(f"accelerator {prec} peak {_shown(a, 'flop_rate')} -> {_shown(b, 'flop_rate')}")
    if same and fitted.memory_bandwidth is not None and _differ(fitted.memory_bandwidth, now["memory_bandwidth"]):
        out.append(f"accelerator memory bandwidth {format_quantity(fitted.memory_bandwidth, 'bandwidth')} -> "
                   f"{format_quantity(now['memory_bandwidth'], 'bandwidth')}")
    for name in sorted(set(fitted.tiers) | set(now["tiers"])):
        a, b = fitted.tiers.get(name), now["tiers"].get(name)
        if a is None or b is None:
            out.append(f"tier {name} {'added' if a is None else 'removed'}")
        elif _differ(a, b):
            out.append(f"tier {name} {format_quantity(a, 'bandwidth')} -> {format_quantity(b, 'bandwidth')} per GPU")
    for key, shown in _TIER_SHAPE:
        recorded = getattr(fitted, key)
        if recorded is None:  # an overlay written before it was recorded: not checked
            continue
        for name in sorted(set(recorded) & set(now[key])):  # a tier added or removed is said above
            if _differ(recorded[name], now[key][name]):
                out.append(f"tier {name} {key} {shown(recorded[name])} -> {shown(now[key][name])}")
    return ", ".join(out)


#: A tier's recorded shape and alpha (CalibrationHardware) and how a change of it reads.
_TIER_SHAPE: tuple[tuple[str, Callable[[float], str]], ...] = (
    ("oversubscription", lambda x: f"{x:g}:1"), ("span", lambda x: f"{x:g} GPUs"),
    ("latency", lambda x: format_quantity(x, "time")))


def _differ(a: float, b: float) -> bool:
    """Two recorded quantities differ beyond a YAML round trip (relative 1e-9)."""
    return abs(a - b) > 1e-9 * max(abs(a), abs(b))


def _shown(value: float | None, kind: str) -> str:
    return "none" if value is None else format_quantity(value, kind)


@cache
def _residuals() -> tuple[dict[str, Any], ...]:
    if not os.path.isfile(RESIDUALS):
        return ()
    with open(RESIDUALS) as f:
        return tuple(json.loads(f.read())["cases"])


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` by numpy.quantile's default method ("linear", Hyndman and Fan's type 7)
    with its arithmetic: the order statistics around index (n - 1) q, interpolated as numpy's ``_lerp``
    does. Written out because numpy.quantile imports numpy.ma (10 ms a query) from numpy 2.3 on."""
    x = sorted(float(v) for v in values)
    h = (len(x) - 1) * q
    lo = math.floor(h)
    if lo >= len(x) - 1:
        return x[-1]
    a, b, t = x[lo], x[lo + 1], h - lo
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _band(errors: list[float]) -> tuple[float, float]:
    if len(errors) >= QUANTILE_FROM:
        return quantile(errors, 0.1), quantile(errors, 0.9)
    return float(min(errors)), float(max(errors))


def interval_for(generation: str, parallelism: str, model: str, precision: str, gpus: int,
                 calibration: Calibration | None = None) -> Interval | None:
    """The band for a job of these family keys at ``gpus`` GPUs (None when no residuals are shipped): from
    ``calibration``'s runs where it can give one, else from the published runs (module docstring)."""
    if calibration is None:
        return _published(generation, parallelism, model, precision, gpus)
    cal = calibration
    want = {"parallelism": parallelism, "model": model, "precision": precision}
    why = None
    if cal.version < 2:
        # told by the compute curve alone (calibration_of): a spec that extends a calibrated overlay and drops its
        # block (`calibration: null`, as a derived spec that changes the hardware should) reads the same
        why = (f"cluster {cal.cluster!r} has the compute curve `calibrate runs` fitted but no calibration block: "
               "an overlay written before overlays recorded the fit's residuals (version 1; rerun `calibrate runs` to "
               "get a band from your runs), or a spec that extends one and drops the block")
    elif cal.changed:
        why = (f"cluster {cal.cluster!r} is not the hardware its calibration runs ran on ({cal.changed}): the fitted "
               "factors and their errors describe that hardware (a spec that extends a calibrated overlay and changes "
               "its hardware)")
    elif cal.method == "none":
        why = cal.reason
    elif len(cal.residuals) < MIN_CASES:
        why = f"{len(cal.residuals)} calibration run{'s' if len(cal.residuals) != 1 else ''} (a band needs {MIN_CASES})"
    else:
        keys, match = _most_similar(cal.residuals, want, CALIBRATION_KEYS, fewest=0,
                                    value=lambda r, k: r[CALIBRATION_KEYS.index(k)])
        sizes = [r[3] for r in match]
        if not (min(sizes) / SCALE_MARGIN <= gpus <= max(sizes) * SCALE_MARGIN):
            why = (f"{gpus} GPUs is more than {SCALE_MARGIN:g}x beyond the {min(sizes)}-{max(sizes)} GPUs of the "
                   "calibration runs, which say nothing of that scale")
        else:
            lo, hi = _band([r[4] for r in match])
            dropped = [k for k in CALIBRATION_KEYS if k not in keys]
            method = ("leave-one-out errors of the calibrated model (each run predicted by a refit without it)"
                      if cal.method == "leave-one-out" else
                      f"in-sample errors of the calibrated model on the runs it was fitted to (optimistic: "
                      f"{cal.reason or 'no leave-one-out residuals'})")
            basis = (f"{method}, {len(match)} of {cal.runs} runs" + (
                f" (not matched on {', '.join(dropped)})" if dropped else ""))
            return Interval(lo, hi, {"cluster": cal.cluster, **{k: want[k] for k in keys}}, len(match), False,
                            basis, f"calibrated-{cal.method}", cal.summary())
    band = _published(generation, parallelism, model, precision, gpus)
    if band is None:
        return None
    return msgspec.structs.replace(band, reason=f"{band.reason}; not from the calibration: {why}",
                                   calibration=cal.summary())


def _most_similar(rows: Sequence[Any], want: dict[str, str], keys: Sequence[str], *, fewest: int,
                  value: Callable[[Any, str], Any]) -> tuple[Sequence[str], list[Any]]:
    """The rows that match ``want`` on the longest prefix of ``keys`` (at least ``fewest`` of them) that leaves
    :data:`MIN_CASES` rows, and that prefix; ``[]`` where no prefix does. ``value(row, key)`` reads a row's key.
    Each row's matching prefix is measured once (up to its first mismatch), not once per prefix tried."""
    agree = []
    for r in rows:
        n = 0
        while n < len(keys) and value(r, keys[n]) == want[keys[n]]:
            n += 1
        agree.append(n)
    for n_keys in range(len(keys), fewest - 1, -1):
        match = [r for r, n in zip(rows, agree, strict=True) if n >= n_keys]
        if len(match) >= MIN_CASES:
            return keys[:n_keys], match
    return keys[:fewest], []


@cache
def _published_match(generation: str, parallelism: str, model: str, precision: str
                     ) -> tuple[tuple[str, ...], tuple[dict[str, Any], ...]]:
    """:func:`_most_similar` of the published runs (:func:`_residuals`, read once a process) for these family keys,
    once per process for each: a plan's picks share a few families (the TPU multislice plan of benchmarks/bench.py
    asked 18 times for one or two, ~6% of its search)."""
    want = {"generation": generation, "parallelism": parallelism, "model": model, "precision": precision}
    keys, match = _most_similar(_residuals(), want, KEYS, fewest=1, value=lambda c, k: c[k])
    return tuple(keys), tuple(match)


def _published(generation: str, parallelism: str, model: str, precision: str, gpus: int) -> Interval | None:
    """The band from the published runs' residuals (module docstring)."""
    cases = _residuals()
    if not cases:
        return None
    want = {"generation": generation, "parallelism": parallelism, "model": model, "precision": precision}
    keys, match = _published_match(generation, parallelism, model, precision)
    if match:
        lo, hi = _band([c["speed_error"] for c in match])
        sizes = [c["gpus"] for c in match if c.get("gpus")]
        family = {k: want[k] for k in keys}
        if sizes and not (min(sizes) / SCALE_MARGIN <= gpus <= max(sizes) * SCALE_MARGIN):
            return Interval(max(2 * lo, -0.9), 2 * hi, family, len(match), True,
                            f"{gpus} GPUs is outside the {min(sizes)}-{max(sizes)} GPUs of the similar "
                            "validated runs: their error range, doubled")
        dropped = [k for k in KEYS if k not in keys]
        basis = "error range of the most similar validated runs" + (
            f" (not matched on {', '.join(dropped)})" if dropped else "")
        return Interval(lo, hi, family, len(match), False, basis)
    errors = [c["speed_error"] for c in cases]
    own = sum(c["generation"] == generation for c in cases)  # fewer than MIN_CASES, perhaps not none
    what = (f"no validated run on {generation} accelerators" if not own else
            f"only {own} validated run{'s' if own != 1 else ''} on {generation} accelerators (a band needs "
            f"{MIN_CASES})")
    return Interval(max(2 * min(min(errors), 0.0), -0.9), 2 * max(max(errors), 0.0), {}, len(cases), True,
                    f"{what}: the whole validation set's error range, doubled")


def generation_of(accelerator_family: str) -> str:
    """The validation's accelerator generation for a catalog family (ampere, hopper, blackwell, ...)."""
    return accelerator_family.lower()


def family_of(job: Any, zero: Any) -> tuple[str, str, str]:
    """(parallelism family, dense or MoE, precision family) of a job (engine.job.Job) under a strategy's ZeRO stage:
    the keys after the generation that a band is matched on."""
    return ("FSDP/ZeRO-3" if Zero.parse(zero) >= Zero.PARAMETERS else "TP/PP/DP",
            "MoE" if job.expert_params > 0 else "dense", precision_family(job.precision))


def precision_family(precision: str) -> str:
    if precision in ("fp8", "fp4"):  # fp4 (NVFP4) its own family: no validated run matches it yet
        return precision
    return "fp32" if precision in ("fp32", "tf32") else "16-bit"
