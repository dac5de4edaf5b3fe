"""`scalemodel collective`: time, algbw and busbw of one collective per algorithm, for one size or a sweep."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from scalemodel.commands.common import ClusterOption, JsonOption, SetOption


def parse_sizes(text: str) -> list[float]:
    """``"1KiB:8GiB"`` -> 1 KiB, 2 KiB, ... 8 GiB (factor 2, as nccl-tests ``-f 2``); ``"a:b:f"`` sets the factor."""
    from scalemodel.commands.common import quantity
    from scalemodel.errors import InputError

    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise InputError(f"cannot read {text!r} as a size sweep", where="--sizes", allowed="MIN:MAX or MIN:MAX:FACTOR")
    lo = quantity(parts[0], "bytes", "--sizes")
    hi = quantity(parts[1], "bytes", "--sizes")
    factor = float(parts[2]) if len(parts) == 3 and parts[2].replace(".", "", 1).isdigit() else 2.0
    if len(parts) == 3 and not parts[2].replace(".", "", 1).isdigit():
        raise InputError(f"bad factor {parts[2]!r}", where="--sizes", allowed="a number > 1")
    if not (0 < lo <= hi) or factor <= 1:
        raise InputError(f"sweep {text!r} must have 0 < MIN <= MAX and factor > 1", where="--sizes",
                         allowed="e.g. 1KiB:8GiB")
    out: list[float] = []
    s = lo
    while s <= hi * (1 + 1e-12) and len(out) < 200:
        out.append(s)
        s *= factor
    return out


def compute(op: str, sizes: list[float], gpus: int, network: Any, algo: str, stride: int,
            dtype_bytes: int) -> list[dict[str, Any]]:
    """One row per size: every algorithm's time, algbw, busbw and zero-byte latency, and the best."""
    import numpy as np

    from scalemodel.cost import collectives as C
    from scalemodel.cost.algorithms import APPLICABLE

    S = np.asarray(sizes, dtype=float)
    if algo == "auto":
        times, names, idx, _ = C.best_algorithm(op, S, gpus, network, stride=stride, dtype_bytes=dtype_bytes)
        lat, *_ = C.best_algorithm(op, 0.0 * S, gpus, network, stride=stride, dtype_bytes=dtype_bytes)
        best = [names[int(i)] for i in idx]
    else:
        if algo not in APPLICABLE[op]:
            from scalemodel.errors import InputError

            raise InputError(f"algorithm {algo!r} does not apply to {op}", where="--algo",
                             allowed="for " + op + ": " + ", ".join((*APPLICABLE[op], "auto")))
        names = (algo,)
        times = C.collective_time(op, S, gpus, network, algorithm=algo, stride=stride, dtype_bytes=dtype_bytes)[None]
        lat = C.collective_time(op, 0.0 * S, gpus, network, algorithm=algo, stride=stride, dtype_bytes=1)[None]
        best = [algo] * len(sizes)
    rows = []
    for j, s in enumerate(sizes):
        algs = []
        for a, name in enumerate(names):
            t = float(times[a, j])
            algs.append({"algorithm": name, "time_s": t, "algbw_Bps": float(C.algbw(op, s, t)),
                         "busbw_Bps": float(C.busbw(op, s, gpus, t)), "latency_s": float(lat[a, j])})
        rows.append({"size_bytes": float(s), "best": best[j], "algorithms": algs})
    return rows


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("collective")
    def collective(
        cluster: ClusterOption,
        gpus: Annotated[int, typer.Option("--gpus", "-n", help="Ranks in the collective.")],
        op: Annotated[str, typer.Option("--op", help="allreduce|reducescatter|allgather|alltoall|broadcast|"
                                        "reduce|sendrecv")] = "allreduce",
        size: Annotated[str | None, typer.Option("--size", help="Message size as nccl-tests counts it.")] = None,
        sizes: Annotated[str | None, typer.Option("--sizes", help="Sweep MIN:MAX (x2 steps), e.g. 1KiB:8GiB.")] = None,
        algo: Annotated[str, typer.Option("--algo", help=(
            "ring|tree|rhd|rd|direct|hierarchical|auto. auto picks the fastest of what NCCL implements "
            "(ring, tree; hierarchical = NVLS/CollNet only where a tier declares in-network reduction; "
            "direct for alltoall/sendrecv; all algorithms on TPU/ICI clusters); rhd, rd, direct and "
            "hierarchical can always be named explicitly."))] = "auto",
        stride: Annotated[int, typer.Option("--stride", help="Spacing of the group's ranks in GPU order.")] = 1,
        dtype_bytes: Annotated[int, typer.Option("--dtype-bytes", help="Element size in bytes.")] = 2,
        sets: SetOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Predict one collective's time, algbw and busbw for every algorithm, and the best (nccl-tests style)."""
        from scalemodel.commands.common import load_cluster_with, positive_int, quantity
        from scalemodel.cost.algorithms import ALGORITHMS, OPS
        from scalemodel.engine.job import build_network
        from scalemodel.errors import InputError

        op_n = op.lower().replace("_", "").replace("-", "")
        if op_n not in OPS:
            raise InputError(f"unknown collective {op!r}", where="--op", allowed="one of: " + ", ".join(OPS))
        if algo not in (*ALGORITHMS, "auto"):
            raise InputError(f"unknown algorithm {algo!r}", where="--algo",
                             allowed="one of: " + ", ".join((*ALGORITHMS, "auto")))
        positive_int(gpus, "--gpus")
        positive_int(stride, "--stride")
        positive_int(dtype_bytes, "--dtype-bytes")
        if size is not None and sizes is not None:
            raise InputError("give --size or --sizes, not both", where="--size", allowed="one of them")
        size_list = parse_sizes(sizes) if sizes is not None else [quantity(size or "1GiB", "bytes", "--size")]
        if any(s < 0 for s in size_list):
            raise InputError("size must be >= 0", where="--size", allowed="a byte quantity such as 1GiB")
        spec = load_cluster_with(cluster, sets)
        if gpus * stride > spec.largest_gpus:
            raise InputError(f"{gpus} ranks x stride {stride} need {gpus * stride} GPUs but cluster {spec.name!r} "
                             f"has at most {spec.largest_gpus}", where="--gpus",
                             allowed=f"gpus x stride <= {spec.largest_gpus}")
        rows = compute(op_n, size_list, gpus, build_network(spec), algo, stride, dtype_bytes)
        inputs = {"cluster": spec.name, "op": op_n, "gpus": gpus, "stride": stride, "algo": algo,
                  "dtype_bytes": dtype_bytes, "sizes_bytes": size_list, "set": list(sets or [])}
        from scalemodel.report.collective import render_collective

        render_collective(inputs, op_n, gpus, rows, as_json=as_json)
