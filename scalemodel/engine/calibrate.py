"""Fit a network tier's latency and bandwidth to nccl-tests measurements.

Parsing of the logs lives in :mod:`scalemodel.specs.nccl_tests` (re-exported here).

The fit (``fit_tier``) adjusts one tier's per-hop latency and achievable bandwidth (line rate x
efficiency) with ``scipy.optimize.least_squares`` on log(time) residuals of the collective model of
:mod:`scalemodel.cost.collectives`; the rest of the cluster stays as specified.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import yaml

from scalemodel.cost.algorithms import APPLICABLE
from scalemodel.cost.collectives import collective_time
from scalemodel.cost.network import Network
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs.nccl_tests import NcclLog, NcclRow, parse_nccl_tests, read_nccl_tests

__all__ = ["FitResult", "NcclLog", "NcclRow", "fit_tier", "infer_ranks", "overlay_yaml", "parse_nccl_tests",
           "read_nccl_tests"]


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
    if S.size < 2:
        raise InputError("need at least two rows with size > 0 to fit latency and bandwidth", where="LOG")

    def model(x: np.ndarray) -> np.ndarray:
        lat, bw = float(np.exp(x[0])), float(np.exp(x[1]))
        tiers = list(network.tiers)
        tiers[idx] = replace(base, latency=lat, bandwidth=bw, efficiency=1.0)
        net = Network(tuple(tiers), network.gpus_per_node)
        return collective_time(log.op, S, ranks, net, algorithm=algorithm, stride=stride, dtype_bytes=1)

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(model(x), 1e-15) / t)

    x0 = np.log([max(base.latency, 1e-7), base.effective_bandwidth])
    sol = least_squares(resid, x0, method="trf", x_scale=1.0, bounds=(np.log([1e-9, 1e6]), np.log([1e-2, 1e14])))
    lat, beff = float(np.exp(sol.x[0])), float(np.exp(sol.x[1]))
    pred = model(sol.x)
    res = [{"size_bytes": float(s), "measured_s": float(m), "predicted_s": float(p), "error": float(p / m - 1)}
           for s, m, p in zip(S, t, pred, strict=True)]
    line = base.bandwidth
    eff = beff / line
    if eff > 1.0:
        line, eff = beff, 1.0
    return FitResult(cluster_name, base.name, log.op, ranks, algorithm, lat, line, eff, beff,
                     {"latency_s": base.latency, "bandwidth_Bps": base.bandwidth, "efficiency": base.efficiency},
                     res, float(np.sqrt(np.mean(np.asarray(sol.fun) ** 2))), int(S.size))


def overlay_yaml(fit: FitResult, source: str, extends: str | None = None, sets: tuple[str, ...] = ()) -> str:
    """A cluster YAML that ``extends:`` the calibrated cluster and overrides the fitted tier (merged by name).

    ``extends`` is how the overlay names its base: a built-in name, or the path of a cluster file
    relative to the overlay's folder (:func:`scalemodel.specs.loader.reference_from`); by default the
    cluster's name, which loads only for a built-in cluster. ``sets`` (the ``--set`` overrides the
    fit was made under) are listed in the header: the overlay does not carry them.
    """
    source = source.replace("\r", "\\r").replace("\n", "\\n")  # stays one comment line
    doc = {
        "extends": extends or fit.cluster,
        "name": f"{fit.cluster}-calibrated",
        "tiers": [{
            "name": fit.tier,
            "latency": f"{fit.latency_s * 1e6:.6g} us",
            "bandwidth": f"{fit.bandwidth_Bps / 1e9:.6g} GB/s",
            "efficiency": round(fit.efficiency, 6),
        }],
    }
    head = (f"# Calibrated by `scalemodel calibrate nccl-tests` from {source}: {fit.op} on {fit.ranks} ranks,\n"
            f"# {fit.rows_used} sizes, algorithm {fit.algorithm}, rms log error {fit.rms_log_error:.3g}.\n")
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

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "format": self.log.fmt, "fit": self.fit}


def collective_op(op: str | None) -> str | None:
    """The ``--op`` name normalised (``all_reduce`` -> ``allreduce``), or None; an unknown one is an error."""
    op_n = op.lower().replace("_", "") if op else None
    if op_n is not None and op_n not in APPLICABLE:
        raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(APPLICABLE))
    return op_n


def calibrate(log: NcclLog, cluster: Any, *, source: str, ranks: int | None = None, tier: str | None = None,
              algorithm: str = "ring", out: str | None = None, sets: list[str] | None = None) -> CalibrationResult:
    """Fit one tier of ``cluster`` (a ClusterSpec) to the nccl-tests ``log`` read from ``source`` (the
    engine behind `scalemodel calibrate`). ``ranks`` is used when the log does not say; ``out`` is only
    echoed in the inputs."""
    n = ranks or log.ranks or infer_ranks(log)
    if n is None or n < 2:
        raise InputError("cannot tell how many ranks the log used", where="LOG", allowed="pass --ranks N")
    fit = fit_tier(log, build_network(cluster), cluster_name=cluster.name, ranks=n, tier=tier, algorithm=algorithm)
    inputs = {"log": source, "cluster": cluster.name, "tier": tier, "ranks": n, "op": log.op, "algo": algorithm,
              "out": out, "set": list(sets or [])}
    return CalibrationResult(inputs=inputs, log=log, ranks=n, fit=fit)
