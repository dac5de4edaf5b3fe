"""Fit a network tier's latency and bandwidth to nccl-tests measurements.

Parsing of the logs lives in :mod:`scalemodel.specs.nccl_tests` (re-exported here).

The fit (``fit_tier``) adjusts one tier's per-hop latency and achievable bandwidth (line rate x
efficiency) with ``scipy.optimize.least_squares`` on log(time) residuals of the collective model of
:mod:`scalemodel.cost.collectives`; the rest of the cluster stays as specified.

Confidence intervals (95 %) come from the least-squares Jacobian J at the solution (the standard
linearised covariance, e.g. Seber & Wild, *Nonlinear Regression*, 1989, sec. 2.1): with m sizes, p = 2
parameters x = (ln latency, ln bandwidth) and residual variance s^2 = sum r_i^2 / (m - p),
Cov(x) = s^2 (J^T J)^-1 and x_k +- t_(0.975, m-p) sqrt(Cov_kk), mapped back through exp (so the
intervals are multiplicative). A parameter whose column of J is (near) zero has no finite interval.

A fit is *questioned* (``CalibrationResult.problems``; the command exits 1 and writes no overlay
unless forced) when a fitted parameter sits on a bound of the solver (the data cannot determine it,
or the rest of the model already exceeds the measurements), when the fitted latency is hidden (taking it down to
the lower bound moves no modelled time by ``HIDDEN_SHARE``: either the rest of the model already exceeds the
smallest measured message, or the log has no message small enough for a latency to show), when a residual
exceeds the stated tolerance, or when the log's rank layout (hosts x GPUs per host, from its ``Rank N ... on HOST``
lines) differs from the layout the cluster model assumes for that many ranks, or the fitted tier is
not crossed by them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import yaml

from scalemodel.cost.algorithms import APPLICABLE
from scalemodel.cost.collectives import collective_time
from scalemodel.cost.network import Network
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs.nccl_tests import NcclLog, NcclRow, at_log, parse_nccl_tests, read_nccl_tests
from scalemodel.units import format_quantity

__all__ = ["FitResult", "NcclLog", "NcclRow", "fit_tier", "infer_ranks", "layout_problems", "overlay_yaml",
           "parse_nccl_tests", "read_nccl_tests"]

#: Solver bounds: latency 1 ns .. 10 ms, effective bandwidth 1 MB/s .. 100 TB/s (beyond any link).
LATENCY_BOUNDS = (1e-9, 1e-2)
#: A fitted latency whose removal (down to the lower bound) moves no modelled time by this share is undetermined:
#: well inside the residual tolerance (25 % by default) the fit is judged by.
HIDDEN_SHARE = 0.02
BANDWIDTH_BOUNDS = (1e6, 1e14)
#: A fitted parameter within this factor of a bound is "on the bound".
BOUND_FACTOR = 1.01
#: Default largest accepted |predicted / measured - 1| at any size.
DEFAULT_TOLERANCE = 0.25


def infer_ranks(log: NcclLog) -> int | None:
    """n from busbw/algbw when no device lines were printed (factor 2(n-1)/n or (n-1)/n)."""
    ratios = [r.busbw_oop_Bps * r.time_oop_s / r.size_bytes for r in log.rows
              if r.size_bytes >= 2**20 and r.busbw_oop_Bps > 0]
    if not ratios:
        return None
    f = float(np.median(ratios))
    if log.op == "allreduce" and f < 2:
        return max(2, round(2 / (2 - f)))
    if log.op in ("allgather", "reducescatter", "alltoall") and f < 1:
        return max(2, round(1 / (1 - f)))
    return None


@dataclass
class FitResult:
    cluster: str
    tier: str
    op: str
    ranks: int
    algorithm: str
    latency_s: float
    bandwidth_Bps: float          # line rate written to the overlay
    efficiency: float
    effective_bandwidth_Bps: float
    before: dict[str, float]
    residuals: list[dict[str, float]]
    rms_log_error: float
    rows_used: int
    #: 95 % confidence intervals [low, high] from the Jacobian; None when not finite
    latency_ci_s: list[float] | None = None
    effective_bandwidth_ci_Bps: list[float] | None = None
    #: parameters sitting on a solver bound, e.g. {"latency_s": "lower"}
    at_bound: dict[str, str] | None = None  # parameter -> "lower" | "upper" | "hidden" (no effect on any time)
    tier_index: int = 0
    #: the tier's transport profile (docs/model.md#transport), included in the fitted latency and efficiency:
    #: the overlay writes them without it, so that loading it applies the profile once
    transport: str = ""
    transport_latency_s: float = 0.0
    wire_efficiency: float = 1.0


def fit_tier(log: NcclLog, network: Network, *, cluster_name: str, ranks: int, tier: str | None = None,
             algorithm: str = "ring", stride: int = 1) -> FitResult:
    """Least-squares fit of one tier's latency and effective bandwidth to the log's times.

    The tier defaults to the outermost one the group of ``ranks`` crosses. Residuals are
    log(t_model / t_measured), so every size counts equally. Efficiency = fitted effective bandwidth /
    the spec's line rate; when that exceeds 1 the line rate is raised instead and efficiency set to 1.
    """
    from scipy.optimize import least_squares  # optional heavy dependency: only a fit needs it

    names = [t.name for t in network.tiers]
    if tier is None:
        idx = int(place(ranks, stride, network).tier)
    elif tier in names:
        idx = names.index(tier)
    else:
        raise InputError(f"no tier {tier!r} in cluster {cluster_name!r}", where="--tier",
                         allowed="one of: " + ", ".join(names))
    if algorithm not in (*APPLICABLE[log.op], "auto"):
        raise InputError(f"algorithm {algorithm!r} does not apply to {log.op}", where="--algo",
                         allowed=", ".join((*APPLICABLE[log.op], "auto")))
    base = network.tiers[idx]
    S = np.array([r.size_bytes for r in log.rows])
    t = np.array([r.time_s for r in log.rows])
    keep = (S > 0) & (t > 0) & np.isfinite(S) & np.isfinite(t)
    S, t = S[keep], t[keep]
    sizes = np.unique(S)
    if sizes.size < 2:
        # fuzz34: rows that all repeat one size (a log cut to one line, copied) were fitted as "5 sizes": one size
        # gives one time, which any latency pairs with some bandwidth, so neither is determined
        many = f", at two sizes or more: its {S.size} rows are all at {sizes[0]:.0f} bytes" if S.size > 1 else ""
        raise InputError(f"need at least two rows with size > 0 to fit latency and bandwidth{many}", where="LOG",
                         allowed="an nccl-tests log of a size sweep (-b 8 -e 8G -f 2), at least two message sizes")

    def model(x: np.ndarray) -> np.ndarray:
        lat, bw = float(np.exp(x[0])), float(np.exp(x[1]))
        tiers = list(network.tiers)
        tiers[idx] = replace(base, latency=lat, bandwidth=bw, efficiency=1.0)
        net = replace(network, tiers=tuple(tiers))  # the cluster's generation, tuner and host kept
        return collective_time(log.op, S, ranks, net, algorithm=algorithm, stride=stride, dtype_bytes=1)

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(model(x), 1e-15) / t)

    lo_b = np.log([LATENCY_BOUNDS[0], BANDWIDTH_BOUNDS[0]])
    hi_b = np.log([LATENCY_BOUNDS[1], BANDWIDTH_BOUNDS[1]])
    x0 = np.clip(np.log([max(base.latency, 1e-7), base.effective_bandwidth]), lo_b + 0.1, hi_b - 0.1)
    sol = least_squares(resid, x0, method="trf", x_scale=1.0, bounds=(lo_b, hi_b))
    lat, beff = float(np.exp(sol.x[0])), float(np.exp(sol.x[1]))
    lat_ci, bw_ci = fit_intervals(np.asarray(sol.x), np.asarray(sol.jac), np.asarray(sol.fun), log_params=2)
    at_bound: dict[str, str] = {}
    for k, name in enumerate(("latency_s", "effective_bandwidth_Bps")):
        if sol.x[k] - lo_b[k] < math.log(BOUND_FACTOR):
            at_bound[name] = "lower"
        elif hi_b[k] - sol.x[k] < math.log(BOUND_FACTOR):
            at_bound[name] = "upper"
    pred = model(sol.x)
    if "latency_s" not in at_bound:
        # a latency that moves no time by more than HIDDEN_SHARE when taken down to the solver's lower bound is not
        # determined by the log: e.g. one below the ring's per-step network overhead (the tier's net_overhead,
        # NCCL's tuning.cc: every step of a multi-node ring waits at least that long), or any latency on a log of
        # large messages only (_hidden_cause tells the two apart for the message)
        probe = np.array(sol.x, dtype=float)
        probe[0] = lo_b[0]
        if float(np.max(np.abs(model(probe) / np.maximum(pred, 1e-15) - 1.0))) < HIDDEN_SHARE:
            at_bound["latency_s"] = "hidden"
    res = [{"size_bytes": float(s), "measured_s": float(m), "predicted_s": float(p), "error": float(p / m - 1)}
           for s, m, p in zip(S, t, pred, strict=True)]
    line = base.bandwidth
    eff = beff / line
    if eff > 1.0:
        line, eff = beff, 1.0
    return FitResult(cluster_name, base.name, log.op, ranks, algorithm, lat, line, eff, beff,
                     {"latency_s": base.latency, "bandwidth_Bps": base.bandwidth, "efficiency": base.efficiency},
                     res, float(np.sqrt(np.mean(np.asarray(sol.fun) ** 2))), int(S.size),
                     latency_ci_s=lat_ci, effective_bandwidth_ci_Bps=bw_ci, at_bound=at_bound, tier_index=idx,
                     transport=base.transport, transport_latency_s=base.transport_latency,
                     wire_efficiency=base.wire_efficiency)


def fit_intervals(x: np.ndarray, jac: np.ndarray, fun: np.ndarray, *, log_params: int) -> list[list[float] | None]:
    """95 % intervals of the least-squares parameters ``x`` from the linearised covariance s^2 (J^T J)^-1 (module
    docstring), one per parameter: the first ``log_params`` are logs (the interval mapped through exp, None where
    exp would overflow), the rest plain (floored at 0); None where (J^T J) is singular or the fit has no degree of
    freedom. The nccl-tests fit (both parameters logs) and ``calibrate runs`` (engine.calibrate_runs) use it."""
    from scipy.stats import t as student_t  # optional heavy dependency: only a fit needs it

    m, p = jac.shape
    dof = m - p
    if dof < 1:
        return [None] * p
    jtj = jac.T @ jac
    try:
        cov = float(np.sum(fun**2)) / dof * np.linalg.inv(jtj) if np.linalg.cond(jtj) < 1e12 else None
    except np.linalg.LinAlgError:
        cov = None
    q = float(student_t.ppf(0.975, dof))
    out: list[list[float] | None] = []
    for k in range(p):
        if cov is None or not np.isfinite(cov[k, k]) or cov[k, k] < 0:
            out.append(None)
            continue
        d = q * math.sqrt(float(cov[k, k]))
        if k < log_params:
            # None where the upper end would overflow to inf (exp past ~709.78) or the interval spans e^600
            out.append(None if d > 300 or x[k] + d > 700 else [float(np.exp(x[k] - d)), float(np.exp(x[k] + d))])
        else:
            out.append([max(0.0, float(x[k] - d)), float(x[k] + d)])
    return out


def model_layout(ranks: int, gpus_per_node: int) -> list[int]:
    """GPUs per node the cluster model assumes for ``ranks`` consecutive ranks (stride 1): full nodes, then the rest."""
    full, rest = divmod(ranks, gpus_per_node)
    return [gpus_per_node] * full + ([rest] if rest else [])


def layout_text(counts: list[int]) -> str:
    if len(set(counts)) == 1:
        return f"{len(counts)} host{'s' if len(counts) > 1 else ''} x {counts[0]} GPU{'s' if counts[0] > 1 else ''}"
    return f"{len(counts)} hosts with " + "+".join(map(str, counts)) + " GPUs"


def layout_problems(log: NcclLog, network: Network, ranks: int, tier_index: int, cluster_name: str) -> list[str]:
    """Why the log's rank layout does not match the tier being fitted (empty when it does, or is unknown).

    The log's layout is read from its per-rank ``on HOST`` lines; the model's is ``ranks`` consecutive
    GPUs filling nodes of ``gpus_per_node``. The fitted tier must also be one the group crosses.
    """
    out = []
    layout = log.layout()
    if layout is not None:
        seen = list(layout.values())
        want = model_layout(ranks, network.gpus_per_node)
        if sorted(seen) != sorted(want):
            out.append(f"layout: the log's {sum(seen)} ranks ran on {layout_text(seen)}, but cluster "
                       f"{cluster_name!r} places {ranks} ranks on {layout_text(want)}; the fit would charge "
                       f"traffic to the wrong tiers (use a cluster whose nodes hold {seen[0]} GPUs, "
                       f"e.g. a file with gpus_per_node: {seen[0]} and a node tier of span {seen[0]})")
    crossed = int(place(ranks, 1, network).tier)
    if tier_index > crossed:
        names = [t.name for t in network.tiers]
        out.append(f"layout: {ranks} ranks fit inside tier {names[crossed]!r}, so tier {names[tier_index]!r} "
                   f"carries none of the log's traffic and cannot be fitted (fit {names[crossed]!r}, or use a log "
                   "that spans it)")
    return out


def _hidden_cause(fit: FitResult) -> str:
    """Why a fitted latency is hidden, read off the smallest message: the model above it by more than
    ``HIDDEN_SHARE`` means the rest of the model (the other hops, the ring's per-step network overhead
    ``net_overhead``) already takes longer than it; otherwise the log's messages are too large for any latency to
    show (a bandwidth sweep from tens of MiB up: the latency is a small share of every time, fitted or not)."""
    small = min(fit.residuals, key=lambda r: r["size_bytes"])
    size = format_quantity(small["size_bytes"], "bytes")
    if small["error"] > HIDDEN_SHARE:
        return (f"the rest of the model already takes longer than the measured smallest message ({size}: "
                f"{small['error']:+.0%}), e.g. the ring's per-step network overhead (net_overhead, NCCL's tuning.cc)")
    return (f"the log's smallest message ({size}) is too large for the latency to show in any time (fit it with a "
            "log that starts at small sizes, -b 8)")


def fit_problems(fit: FitResult, tolerance: float) -> list[str]:
    """Bound and residual problems of a fit (see the module docstring)."""
    out = []
    bounds = {"latency_s": ("latency", LATENCY_BOUNDS, "time"), "effective_bandwidth_Bps":
              ("effective bandwidth", BANDWIDTH_BOUNDS, "bandwidth")}
    for key, side in (fit.at_bound or {}).items():
        if side == "hidden":
            out.append("bound: fitted latency is hidden: any latency down to the solver's lower bound 1 ns moves no "
                       f"modelled time by {HIDDEN_SHARE:.1%}; {_hidden_cause(fit)}; the log does not determine it")
            continue
        label, (lo, hi), kind = bounds[key]
        value = lo if side == "lower" else hi
        why = (" (the rest of the model already takes longer than the measured small messages)"
               if key == "latency_s" and side == "lower" else "")
        out.append(f"bound: fitted {label} sits on the solver's {side} bound "
                   f"{format_quantity(value, kind)}{why}; the log does not determine it")
    worst = max(fit.residuals, key=lambda r: abs(r["error"]))
    if abs(worst["error"]) > tolerance:
        errs = [r["error"] for r in fit.residuals]
        out.append(f"residuals: the fitted model misses the log by {min(errs):+.0%} to {max(errs):+.0%} "
                   f"(worst at {format_quantity(worst['size_bytes'], 'bytes')}), beyond the tolerance "
                   f"+-{tolerance:.0%}; the {fit.algorithm} model does not describe this log")
    return out


def overlay_yaml(fit: FitResult, source: str, extends: str | None = None, sets: tuple[str, ...] = ()) -> str:
    """A cluster YAML that ``extends:`` the calibrated cluster and overrides the fitted tier (merged by name).

    ``extends`` is how the overlay names its base: a built-in name, or the path of a cluster file
    relative to the overlay's folder (:func:`scalemodel.specs.loader.reference_from`); by default the
    cluster's name, which loads only for a built-in cluster. ``sets`` (the ``--set`` overrides the
    fit was made under) are listed in the header: the overlay does not carry them.
    """
    source = source.replace("\r", "\\r").replace("\n", "\\n")  # stays one comment line
    # A tier that names a transport gets its profile added on loading: write the fit without it.
    latency = max(0.0, fit.latency_s - fit.transport_latency_s)
    line, eff = fit.bandwidth_Bps, fit.efficiency / fit.wire_efficiency
    if eff > 1.0:
        line, eff = line * eff, 1.0
    doc = {
        "extends": extends or fit.cluster,
        "name": f"{fit.cluster}-calibrated",
        "tiers": [{
            "name": fit.tier,
            "latency": f"{latency * 1e6:.6g} us",
            "bandwidth": f"{line / 1e9:.6g} GB/s",
            "efficiency": round(eff, 6),
        }],
    }
    head = (f"# Calibrated by `scalemodel calibrate nccl-tests` from {source}: {fit.op} on {fit.ranks} ranks,\n"
            f"# {fit.rows_used} sizes, algorithm {fit.algorithm}, rms log error {fit.rms_log_error:.3g}.\n")
    if fit.transport:
        head += (f"# tier {fit.tier} names transport {fit.transport}: latency and efficiency are written without its "
                 f"profile (+{fit.transport_latency_s * 1e6:.6g} us per message, x{fit.wire_efficiency:.6g} for "
                 "headers), which loading adds back (docs/model.md#transport)\n")
        if fit.latency_s < fit.transport_latency_s:
            head += "# the fitted latency is below the profile's per-message cost alone: written as 0\n"
    for item in sets:
        item = item.replace("\r", "\\r").replace("\n", "\\n")
        head += f"# fitted with --set {item}: pass it again with this overlay\n"
    return head + yaml.safe_dump(doc, sort_keys=False)


@dataclass(frozen=True)
class CalibrationResult:
    """A parsed nccl-tests log and one tier's fit to it."""

    inputs: dict[str, Any]
    log: NcclLog
    ranks: int
    fit: FitResult
    problems: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return not self.problems

    def payload(self) -> dict[str, Any]:
        layout = self.log.layout()
        return {"inputs": self.inputs, "format": self.log.fmt, "fit": self.fit, "accepted": self.accepted,
                "problems": self.problems, "log_layout": None if layout is None else {
                    "hosts": len(layout), "gpus_per_host": list(layout.values())}}


def collective_op(op: str | None) -> str | None:
    """The ``--op`` name normalised (``all_reduce`` -> ``allreduce``), or None; an unknown one is an error."""
    op_n = op.lower().replace("_", "") if op is not None else None  # fuzz35: --op '' was taken as not given
    if op_n is not None and op_n not in APPLICABLE:
        raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(APPLICABLE))
    return op_n


def check_ranks(ranks: int | None, log: Any = None, option: str = "--ranks") -> None:
    """--ranks (the API's ``ranks``, named by ``option`` as check_kappa names its own) against the log: at least 2
    (1 was taken for "not given" and answered "cannot tell how many ranks the log used; pass --ranks"), and the
    log's own count where it lists one (--ranks is for a log that does not say)."""
    if ranks == 1:
        raise InputError("a collective needs at least 2 ranks, got 1", where=option,
                         allowed="the number of ranks in the log (2 or more)")
    if ranks is not None and log is not None and log.ranks is not None and ranks != log.ranks:
        raise InputError(f"{option} {ranks}, but the log lists {log.ranks} ranks", where=option,
                         allowed=f"{log.ranks}, or leave {option} out (it is for a log that does not list its ranks)")


def calibrate(log: NcclLog, cluster: Any, *, source: str, ranks: int | None = None, tier: str | None = None,
              algorithm: str = "ring", out: str | None = None, sets: list[str] | None = None,
              tolerance: float = DEFAULT_TOLERANCE) -> CalibrationResult:
    """Fit one tier of ``cluster`` (a ClusterSpec) to the nccl-tests ``log`` read from ``source`` (the
    engine behind `scalemodel calibrate`). ``ranks`` is used when the log does not say; ``out`` is only
    echoed in the inputs. ``problems`` lists why the fit should not be trusted (module docstring):
    bounds, residuals beyond ``tolerance`` (largest |predicted/measured - 1|), rank layout."""
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise InputError(f"tolerance must be a number > 0, got {tolerance}", where="--tolerance",
                         allowed="e.g. 0.25 (25 %)")
    n = ranks or log.ranks or infer_ranks(log)
    if n is None or n < 2:
        raise InputError("cannot tell how many ranks the log used", where=source[:200], allowed="pass --ranks N")
    network = build_network(cluster)
    try:
        fit = fit_tier(log, network, cluster_name=cluster.name, ranks=n, tier=tier, algorithm=algorithm)
    except InputError as exc:
        raise at_log(exc, source) from None
    problems = layout_problems(log, network, n, fit.tier_index, cluster.name) + fit_problems(fit, tolerance)
    inputs = {"log": source, "cluster": cluster.name, "tier": tier, "ranks": n, "op": log.op, "algo": algorithm,
              "out": out, "set": list(sets or []), "tolerance": tolerance}
    return CalibrationResult(inputs=inputs, log=log, ranks=n, fit=fit, problems=problems)
