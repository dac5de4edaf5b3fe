"""Fit a network tier's latency and bandwidth to nccl-tests measurements.

Parsing follows docs/model.md#nccl-tests-logs (nccl-tests src/util.cu): text logs of
every era (older: no ``root`` column and a float ``error``; middle: ``root`` and ``#wrong``; current:
version and "Collective test starting" lines), launcher prefixes (``srun -l`` ``0:``, mpirun ``[0]``,
``[1,0]<stdout>:``), interleaved ``NCCL INFO``/``WARN`` lines, duplicated headers, ``N/A`` in #wrong,
and the ``-J`` JSON output. A data row is any line whose first two tokens are integers followed by
blocks of (time, algbw, busbw, #wrong) for out-of-place and in-place.

The fit (``fit_tier``) adjusts one tier's per-hop latency and achievable bandwidth (line rate x
efficiency) with ``scipy.optimize.least_squares`` on log(time) residuals of the collective model of
:mod:`scalemodel.cost.collectives`; the rest of the cluster stays as specified.
"""

from __future__ import annotations

import json
import re
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

_OP_FROM_TEST = {
    "all_reduce": "allreduce", "reduce_scatter": "reducescatter", "all_gather": "allgather", "alltoall": "alltoall",
    "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv", "hypercube": "sendrecv",
}
_PREFIX = re.compile(r"^\s*(?:\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?|\d+:)\s?")
_GLUED = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")
_NUM = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


@dataclass
class NcclRow:
    size_bytes: float
    count: int
    dtype: str
    time_oop_s: float
    busbw_oop_Bps: float
    time_ip_s: float | None = None
    busbw_ip_Bps: float | None = None

    @property
    def time_s(self) -> float:
        """Mean of out-of-place and in-place times (both measure the same operation)."""
        if self.time_ip_s is None:
            return self.time_oop_s
        return 0.5 * (self.time_oop_s + self.time_ip_s)


@dataclass
class NcclLog:
    op: str
    ranks: int | None
    rows: list[NcclRow] = field(default_factory=list)
    fmt: str = "text"
    nccl_version: str = ""


def _is_num(tok: str) -> bool:
    return bool(_NUM.match(tok))


def _op_from(text: str) -> str | None:
    m = re.search(r"Collective test (?:starting|concluded):\s*(\w+?)_perf", text)
    if not m:
        m = re.search(r"\b(\w+?)_perf\b", text)
    if m and m.group(1) in _OP_FROM_TEST:
        return _OP_FROM_TEST[m.group(1)]
    return None


def parse_nccl_tests(text: str, *, op: str | None = None) -> NcclLog:
    """Parse nccl-tests output (any era, text or ``-J`` JSON) into rows of size and time."""
    stripped = text.lstrip()
    if stripped.startswith("{") or re.match(r"\[\s*\{", stripped):
        return _parse_json(stripped, op)
    ranks: set[int] = set()
    rows: list[NcclRow] = []
    version = ""
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw)
        line = _GLUED.sub(" ", line)
        if "NCCL INFO" in line or "NCCL WARN" in line:
            continue
        mv = re.search(r"nccl-tests version (\S+)", line)
        if mv:
            version = mv.group(1)
        md = re.search(r"#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+", line)
        if md:
            ranks.add(int(md.group(1)))
            continue
        body = line.lstrip("#").strip() if not line.lstrip().startswith("#") else ""
        toks = body.split()
        if len(toks) < 6 or not (toks[0].isdigit() and toks[1].isdigit()):
            continue
        rest = [t for t in toks[2:] if _is_num(t) or t == "N/A"]
        # a leading integer root column (-1 or a rank) makes the count 4k + 1
        if len(rest) % 4 == 1:
            rest = rest[1:]
        if len(rest) < 3:
            continue
        try:
            vals = [float(t) if t != "N/A" else 0.0 for t in rest]
        except ValueError:
            continue
        t_oop, bus_oop = vals[0] * 1e-6, vals[2] * 1e9
        t_ip = vals[4] * 1e-6 if len(vals) >= 7 else None
        bus_ip = vals[6] * 1e9 if len(vals) >= 7 else None
        if t_oop <= 0:
            continue
        dtype = next((t for t in toks[2:] if not _is_num(t)), "")
        rows.append(NcclRow(float(toks[0]), int(toks[1]), dtype, t_oop, bus_oop, t_ip, bus_ip))
    if not rows:
        raise InputError("no nccl-tests data rows found", where="LOG",
                         allowed="output of all_reduce_perf and the other *_perf tests, text or -J JSON")
    found = op or _op_from(text) or "allreduce"
    return NcclLog(found, len(ranks) or None, rows, "text", version)


def _parse_json(text: str, op: str | None) -> NcclLog:
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} at line {exc.lineno}", where="LOG") from None
    results: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "size" in x and ("out_of_place" in x or "in_place" in x):
                results.append(x)
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    if not results:
        raise InputError("no result entries (size with out_of_place/in_place) in the JSON", where="LOG",
                         allowed="nccl-tests -J output")
    rows = []
    for r in results:
        oop = r.get("out_of_place") or {}
        ip = r.get("in_place") or {}
        t_oop = float(oop.get("time", ip.get("time", 0.0))) * 1e-6
        if t_oop <= 0:
            continue
        rows.append(NcclRow(float(r["size"]), int(r.get("count", 0)), str(r.get("type", "")), t_oop,
                            float(oop.get("bus_bw", 0.0)) * 1e9,
                            float(ip["time"]) * 1e-6 if "time" in ip else None,
                            float(ip["bus_bw"]) * 1e9 if "bus_bw" in ip else None))
    ranks = None
    if isinstance(doc, dict):
        devs = doc.get("devices")
        if isinstance(devs, list) and devs:
            ranks = len(devs)
        name = str(doc.get("config", {}).get("test", "")) if isinstance(doc.get("config"), dict) else ""
        op = op or _op_from(name + "_perf " + json.dumps(doc.get("config", ""))) or None
    return NcclLog(op or "allreduce", ranks, rows, "json")


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
    keep = (S > 0) & (t > 0)
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


def overlay_yaml(fit: FitResult, source: str) -> str:
    """A cluster YAML that ``extends:`` the calibrated cluster and overrides the fitted tier (merged by name)."""
    doc = {
        "extends": fit.cluster,
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


def calibrate(text: str, cluster: Any, *, source: str, op: str | None = None, ranks: int | None = None,
              tier: str | None = None, algorithm: str = "ring", out: str | None = None,
              sets: list[str] | None = None) -> CalibrationResult:
    """Fit one tier of ``cluster`` (a ClusterSpec) to the nccl-tests output ``text`` already read from
    ``source`` (the engine behind `scalemodel calibrate`). ``op`` and ``ranks`` are used when the log
    does not say; ``out`` is only echoed in the inputs."""
    op_n = op.lower().replace("_", "") if op else None
    if op_n is not None and op_n not in APPLICABLE:
        raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(APPLICABLE))
    log = parse_nccl_tests(text, op=op_n)
    n = ranks or log.ranks or infer_ranks(log)
    if n is None or n < 2:
        raise InputError("cannot tell how many ranks the log used", where="LOG", allowed="pass --ranks N")
    fit = fit_tier(log, build_network(cluster), cluster_name=cluster.name, ranks=n, tier=tier, algorithm=algorithm)
    inputs = {"log": source, "cluster": cluster.name, "tier": tier, "ranks": n, "op": log.op, "algo": algorithm,
              "out": out, "set": list(sets or [])}
    return CalibrationResult(inputs=inputs, log=log, ranks=n, fit=fit)
