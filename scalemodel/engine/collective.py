"""`collective`: one collective's time, algbw and busbw per algorithm, for one size or a sweep."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scalemodel.cost import collectives as C
from scalemodel.cost import nccl
from scalemodel.cost.algorithms import APPLICABLE, OPS
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError


@dataclass(frozen=True)
class CollectiveResult:
    """One row per message size: every algorithm's time, algbw, busbw and zero-byte latency, and the best."""

    inputs: dict[str, Any]
    op: str
    ranks: int
    rows: list[dict[str, Any]]

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "op": self.op, "ranks": self.ranks, "rows": self.rows}


def normalize_op(op: str) -> str:
    """The collective's canonical name (case, '_' and '-' ignored), or an InputError naming --op."""
    op_n = op.lower().replace("_", "").replace("-", "")
    if op_n not in OPS:
        raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(OPS))
    return op_n


def compute(op: str, sizes: list[float], gpus: int, network: Any, algo: str, stride: int,
            dtype_bytes: int) -> list[dict[str, Any]]:
    """One row per size: every algorithm's time, algbw, busbw and zero-byte latency, and the best."""
    S = np.asarray(sizes, dtype=float)
    if algo == "auto":
        times, names, idx, _ = C.best_algorithm(op, S, gpus, network, stride=stride, dtype_bytes=dtype_bytes)
        lat, *_ = C.best_algorithm(op, 0.0 * S, gpus, network, stride=stride, dtype_bytes=dtype_bytes)
        best = [names[int(i)] for i in idx]
        basis = _auto_basis(op, S, gpus, network, stride, dtype_bytes, best)
    else:
        if algo not in APPLICABLE[op]:
            raise InputError(f"algorithm {algo!r} does not apply to {op}", where="--algo",
                             allowed="for " + op + ": " + ", ".join((*APPLICABLE[op], "auto")))
        names = (algo,)
        times = C.collective_time(op, S, gpus, network, algorithm=algo, stride=stride, dtype_bytes=dtype_bytes)[None]
        lat = C.collective_time(op, 0.0 * S, gpus, network, algorithm=algo, stride=stride, dtype_bytes=1)[None]
        best = [algo] * len(sizes)
        basis = ["named with --algo"] * len(sizes)
    rows = []
    for j, s in enumerate(sizes):
        algs = []
        for a, name in enumerate(names):
            t = float(times[a, j])
            algs.append({"algorithm": name, "time_s": t, "algbw_Bps": float(C.algbw(op, s, t)),
                         "busbw_Bps": float(C.busbw(op, s, gpus, t)), "latency_s": float(lat[a, j])})
        rows.append({"size_bytes": float(s), "best": best[j], "best_basis": basis[j], "algorithms": algs})
    return rows


# what NCCL implements per collective, as auto chooses among them (scalemodel.cost.nccl.NCCL_FAMILY, auto_eligible)
_NCCL_RUNS = {
    "allreduce": lambda inr: "ring, tree" + (", in-network reduction as hierarchical" if inr else ""),
    "reducescatter": lambda inr: "ring; PAT as rd at one GPU a node; NVLS as hierarchical in one NVLink-SHARP domain",
    "allgather": lambda inr: "ring; PAT as rd at one GPU a node; NVLS as hierarchical in one NVLink-SHARP domain",
    "alltoall": lambda inr: "direct",
    "broadcast": lambda inr: "ring",
    "reduce": lambda inr: "ring",
    "sendrecv": lambda inr: "direct",
}


def _auto_basis(op: str, S: np.ndarray, gpus: int, network: Any, stride: int, dtype_bytes: int,
                best: list[str]) -> list[str]:
    """Why ``auto``'s pick is the one NCCL runs, per size: a tuner plugin the cluster names decided it
    (:func:`scalemodel.cost.nccl.tuner_plugin_choice`, fastest or not), or it is the fastest of the algorithms NCCL
    implements (ring, tree; ``hierarchical`` there stands for NCCL's in-network reduction, NVLS/NVLSTree/CollNet,
    :func:`scalemodel.cost.nccl.auto_eligible`), or of every algorithm on an ICI (TPU) network. The table lists the
    textbook algorithms too, so a faster row than the pick is no contradiction; this says so."""
    pl = place(gpus, stride, network)
    elems = np.ceil(S / dtype_bytes) * dtype_bytes  # whole elements, as best_algorithm prices them
    pick, _ = nccl.tuner_plugin_choice(op, elems, pl)
    family = nccl.resolve_family(network, "auto")
    inr = bool(np.asarray(nccl.inr_applies(pl)).ravel()[0])
    out = []
    for j, name in enumerate(best):
        if int(np.asarray(pick).ravel()[j]) >= 0:
            out.append(f"the {network.nccl_tuner} tuner plugin's choice (docs/model.md#tuner-plugin)")
        elif family == "nccl" and name == "hierarchical":
            out.append("the fastest algorithm NCCL runs; hierarchical is its "
                       + ("in-network reduction (NVLS/NVLSTree/CollNet) here" if op == "allreduce" else
                          "NVLS (one NVLink-SHARP domain) here"))
        elif family == "nccl":
            out.append(f"the fastest algorithm NCCL runs for {op} ({_NCCL_RUNS[op](inr)})")
        else:
            out.append("the fastest algorithm (every algorithm runs on an ICI network)")
    return out


def collective(cluster: Any, op: str, sizes: list[float], gpus: int, *, algo: str = "auto", stride: int = 1,
               dtype_bytes: int = 2, sets: list[str] | None = None) -> CollectiveResult:
    """Predict ``op`` over ``gpus`` ranks ``stride`` apart on ``cluster`` (a ClusterSpec) for each size
    (the engine behind `scalemodel collective`)."""
    op_n = normalize_op(op)
    if algo not in (*C.ALGORITHMS, "auto"):
        raise InputError(f"unknown algorithm {algo!r}", where="--algo",
                         allowed="one of: " + ", ".join((*C.ALGORITHMS, "auto")))
    if any(s < 0 for s in sizes):
        raise InputError("size must be >= 0", where="--size", allowed="a byte quantity such as 1GiB")
    if gpus * stride > cluster.largest_gpus:
        raise InputError(f"{gpus} ranks x stride {stride} need {gpus * stride} GPUs but cluster {cluster.name!r} "
                         f"has at most {cluster.largest_gpus}", where="--gpus",
                         allowed=f"gpus x stride <= {cluster.largest_gpus}")
    rows = compute(op_n, sizes, gpus, build_network(cluster), algo, stride, dtype_bytes)
    inputs = {"cluster": cluster.name, "op": op_n, "gpus": gpus, "stride": stride, "algo": algo,
              "dtype_bytes": dtype_bytes, "sizes_bytes": sizes, "set": list(sets or [])}
    return CollectiveResult(inputs=inputs, op=op_n, ranks=gpus, rows=rows)
