#!/usr/bin/env python
"""Compare the collective models with the published collective cases in ../shared/validation/cases.yaml.

Uses the built-in clusters as they are (no per-case tuning) and compares TIMES (busbw converted to a
time with the nccl-tests factor), since busbw is only a derived quantity. ``auto`` chooses among the
algorithms NCCL implements (``--family all`` lets it pick rhd/rd/one-shot too, for comparison). Prints
one row per point and the median and worst absolute error, for all sizes and for >= 1 MiB.
Cases with a ``cluster``, ``ranks`` and a measured ``msg_bytes`` / ``busbw_GBps`` sweep, a ``peak_busbw_GBps`` or
a ``latency_us`` (the layout of hardware/measurements/nccl.yaml) are read generically; a run that forced an
algorithm (``collective.algorithm``: NVLS, Ring, CollNetChain) is compared with that algorithm (``FORCED``), and
a table of median / worst error per family (``FAMILIES``) follows the rows (docs/model.md#in-network-reduction).
The file is read as the CLI reads its specs (a regular file of at most 256 KiB, strict YAML 1.2: ``yes`` is text,
a duplicate key is refused) and every field a compared case uses is checked (a YAML list of mappings; ``ranks`` an
integer from 2; sizes, bandwidths and latencies finite and positive within the bounds below; a built-in cluster or a
cluster file): a bad file gives one ``error: <file>: <field>: <what>; <what is allowed>`` line and exit status 2.
``--json`` writes the rows and tables as one strictly valid JSON object.
Usage: python scripts/validate_collectives.py [cases.yaml | hardware/measurements/nccl.yaml] [--family auto|nccl|all]
[--json]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from measurement_file import DataError, read_or_report  # noqa: E402  (scripts/, beside this file)

from scalemodel.cost import collectives as C
from scalemodel.cost.algorithms import ALGORITHMS
from scalemodel.engine.job import build_network
from scalemodel.errors import InputError
from scalemodel.specs import files, load_cluster, yamlread
from scalemodel.specs.base import MAX_GPUS

# ../shared/validation when the shared folder is beside the checkout, else the copy kept for tests (as
# validate_training.py): a clean clone without ../shared still runs its default file.
_HERE = Path(__file__).resolve().parent
CASES = next((p for p in [_HERE.parent.parent / "shared" / "validation" / "cases.yaml",
                          _HERE.parent / "tests" / "data" / "validation" / "cases.yaml"] if p.is_file()),
             _HERE.parent.parent / "shared" / "validation" / "cases.yaml")
GB = 1e9

#: Bounds of a case's numbers, far beyond any published nccl-tests run either way and narrow enough that every
#: time derived from them (bytes x 2(p-1)/p / busbw) is a finite, non-zero float: message sizes in bytes,
#: bus / algorithm bandwidths in GB/s (1 kB/s to 1 PB/s), latencies in microseconds (1 ns to 1000 s).
MAX_BYTES = 2.0**50
MIN_GBPS, MAX_GBPS = 1e-6, 1e6
MIN_US, MAX_US = 1e-3, 1e9
#: The NCCL_ALGO values a run may have forced (NCCL src/graph/tuning.cc ncclAlgoStr); those not in FORCED
#: are compared with auto.
NCCL_ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
FAMILY_CHOICES = ("auto", "nccl", "all")
#: measured fields of the three cases of cases.yaml read by id (the rest are read generically)
SPECIAL: dict[str, tuple[str, ...]] = {
    "nt175_a100_1node_2node": ("busbw_GBps_1node_8gpu_to_4GB", "busbw_GBps_2node_16gpu"),
    "nt212_h100_guidance": ("nvls_peak_algbw_GBps", "ring_effective_busbw_GBps", "user_algbw_GBps_at_256MB"),
}
SWEEP_ID = "az_nda100v4_allreduce_1node"


def _number(v: Any, where: str, lo: float, hi: float, unit: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise DataError(f"{where}: {v!r} is not usable; a number from {lo:g} to {hi:g} ({unit})")


def _sweep(m: dict[str, Any], where: str) -> None:
    """measured.msg_bytes and measured.busbw_GBps: lists of the same length of sizes and bus bandwidths."""
    for k, lo, hi, unit in (("msg_bytes", 1.0, MAX_BYTES, "bytes"), ("busbw_GBps", MIN_GBPS, MAX_GBPS, "GB/s")):
        v = m.get(k)
        if not isinstance(v, list) or not v:
            raise DataError(f"{where}: measured.{k}: {'missing' if v is None else repr(v)[:80]}; "
                            f"a non-empty list of numbers ({unit})")
        for j, x in enumerate(v):
            _number(x, f"{where}: measured.{k}[{j}]", lo, hi, unit)
    if len(m["msg_bytes"]) != len(m["busbw_GBps"]):
        raise DataError(f"{where}: measured.busbw_GBps: {len(m['busbw_GBps'])} values for {len(m['msg_bytes'])} "
                        f"msg_bytes; one bus bandwidth per message size")


def check_case(c: Any, where: str) -> None:
    """Every field :func:`points` reads from a collective case (other kinds of case are passed over)."""
    if not isinstance(c, dict):
        raise DataError(f"{where}: {type(c).__name__} {repr(c)[:60]} is not a case; "
                        f"a mapping (id, kind, measured, ...)")
    if c.get("kind") != "collective":
        return
    if not isinstance(c.get("id"), str):
        raise DataError(f"{where}: id: {c.get('id')!r}; a string naming the case")
    where = f"{where} ({c['id']})"
    m = c.get("measured")
    if not isinstance(m, dict):
        raise DataError(f"{where}: measured: {'missing' if m is None else repr(m)[:80]}; a mapping of the measured "
                        f"values (msg_bytes + busbw_GBps, peak_busbw_GBps or latency_us)")
    if c["id"] == SWEEP_ID:
        _sweep(m, where)
        return
    if c["id"] in SPECIAL:
        for k in SPECIAL[c["id"]]:
            if k not in m:
                raise DataError(f"{where}: measured.{k}: missing; a number from {MIN_GBPS:g} to {MAX_GBPS:g} (GB/s)")
            _number(m[k], f"{where}: measured.{k}", MIN_GBPS, MAX_GBPS, "GB/s")
        return
    if "cluster" not in c:
        return
    coll = c.get("collective")
    if not isinstance(coll, dict) or not isinstance(coll.get("op"), str):
        got = "missing" if coll is None else repr(coll if not isinstance(coll, dict) else coll.get("op"))[:80]
        raise DataError(f"{where}: collective.op: {got}; a mapping with op (a string: "
                        f"{', '.join(COMPARED_OPS)} are compared)")
    if coll["op"] not in COMPARED_OPS:
        return
    if not isinstance(c["cluster"], str) or not c["cluster"].split("|")[0].strip():
        raise DataError(f"{where}: cluster: {c['cluster']!r}; a built-in cluster name or a cluster file, optionally "
                        f"followed by |algorithm and |cluster.FIELD=VALUE overrides")
    p = c.get("ranks")
    if isinstance(p, bool) or not isinstance(p, int) or not 2 <= p <= MAX_GPUS:
        raise DataError(f"{where}: ranks: {'missing' if p is None else repr(p)[:80]}; "
                        f"an integer from 2 to {MAX_GPUS:g}")
    algo = coll.get("algorithm")
    if algo is not None and algo not in NCCL_ALGOS:
        raise DataError(f"{where}: collective.algorithm: {algo!r}; one of {', '.join(NCCL_ALGOS)} (NCCL_ALGO), "
                        f"or no algorithm")
    if "msg_bytes" in m or "busbw_GBps" in m:
        _sweep(m, where)
    elif "peak_busbw_GBps" in m:
        _number(m["peak_busbw_GBps"], f"{where}: measured.peak_busbw_GBps", MIN_GBPS, MAX_GBPS, "GB/s")
    elif "latency_us" in m:
        _number(m["latency_us"], f"{where}: measured.latency_us", MIN_US, MAX_US, "microseconds")
        r = m.get("msg_bytes_range", [128])
        if not isinstance(r, list) or not r:
            raise DataError(f"{where}: measured.msg_bytes_range: {r!r}; a non-empty list of sizes (bytes)")
        for j, x in enumerate(r):
            _number(x, f"{where}: measured.msg_bytes_range[{j}]", 1.0, MAX_BYTES, "bytes")
    else:
        raise DataError(f"{where}: measured: no measurement ({', '.join(map(str, m))[:80]}); msg_bytes + "
                        f"busbw_GBps, peak_busbw_GBps or latency_us")


def load(path: Path) -> list[dict[str, Any]]:
    """The cases of a measurement file, every compared case checked for the fields :func:`points` reads."""
    # the CLI's readers: a regular file of bounded size (a FIFO or /dev/zero is refused, not read forever), strict
    # YAML 1.2 (`ranks: yes` is text, not true; a duplicate key is refused), integers of bounded length
    text = files.read_text(path, limit=files.MAX_SPEC_BYTES, what="measurement file")
    doc, _ = yamlread.load(text, str(path))
    if not isinstance(doc, list):
        raise DataError(f"{path}: top level: {'empty' if doc is None else 'a ' + type(doc).__name__}; a YAML list "
                        f"of cases (- id: ..., kind: collective, cluster: ..., ranks: ..., measured: ...)")
    for i, c in enumerate(doc):
        check_case(c, f"{path}: cases[{i}]")
    return doc


#: nccl-tests operation -> (the cost layer's op, busbw / algbw factor numerator: busbw = algbw x f (p-1)/p)
#: (nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n, reduce_scatter, all_gather and alltoall (n-1)/n; alltoall's
#: size is the total each rank sends, nccl-tests src/alltoall.cu, the cost layer's all-to-all size).
COMPARED_OPS = {"all_reduce": ("allreduce", 2.0), "reduce_scatter": ("reducescatter", 1.0),
                "all_gather": ("allgather", 1.0), "alltoall": ("alltoall", 1.0)}


def points(cases: list[dict]) -> list[tuple[str, str, int, int, float, float, str, str]]:
    """(case id, cluster, ranks, stride, size bytes, measured time s, what, op) for every usable point."""
    out: list[tuple[str, str, int, int, float, float, str, str]] = []
    for c in cases:
        if c.get("kind") != "collective":
            continue
        m = c["measured"]
        if c["id"] == "az_nda100v4_allreduce_1node":
            for s, bb in zip(m["msg_bytes"], m["busbw_GBps"], strict=True):
                t = s * (2 * 7 / 8) / (bb * GB)
                out.append((c["id"], "dgx-a100", 8, 1, float(s), t, f"busbw {bb} GB/s", "allreduce"))
        elif c["id"] == "nt175_a100_1node_2node":
            s = 4 * 2.0**30  # "to 4GB": the peak row of the sweep
            out.append((c["id"], "dgx-a100", 8, 1, s, s * 2 * 7 / 8 / (m["busbw_GBps_1node_8gpu_to_4GB"] * GB),
                        "1 node peak busbw", "allreduce"))
            # 2 nodes with 4 HDR NICs per node: the dgx-a100 spec has 8 NICs; halve its NIC tier (4 x 25 GB/s)
            out.append((c["id"], "dgx-a100|cluster.tiers.1.bandwidth=100Gbit/s", 16, 1, s,
                        s * 2 * 15 / 16 / (m["busbw_GBps_2node_16gpu"] * GB), "2 nodes, 4 NICs/node", "allreduce"))
        elif c["id"] == "nt212_h100_guidance":
            s = 8 * 2.0**30  # peak: large message
            out.append((c["id"], "dgx-h100", 8, 1, s, s / (m["nvls_peak_algbw_GBps"] * GB), "NVLS peak algbw",
                        "allreduce"))
            out.append((c["id"], "dgx-h100|ring", 8, 1, s, s * 2 * 7 / 8 / (m["ring_effective_busbw_GBps"] * GB),
                        "ring busbw", "allreduce"))
            s2 = 256e6
            out.append((c["id"], "dgx-h100", 8, 1, s2, s2 / (m["user_algbw_GBps_at_256MB"] * GB),
                        "algbw at 256 MB", "allreduce"))
        elif "cluster" in c and c.get("collective", {}).get("op") in COMPARED_OPS:
            # hardware/measurements/nccl.yaml: busbw = algbw x f(p-1)/p (COMPARED_OPS); an algorithm the run forced
            # (NCCL_ALGO) is modelled by the same algorithm, not by auto (FORCED)
            p = int(c["ranks"])
            op, f = COMPARED_OPS[c["collective"]["op"]]
            cl = c["cluster"] + FORCED.get(str(c["collective"].get("algorithm", "")), "")
            if "msg_bytes" in m and "busbw_GBps" in m:
                for s, bb in zip(m["msg_bytes"], m["busbw_GBps"], strict=True):
                    out.append((c["id"], cl, p, 1, float(s), s * f * (p - 1) / p / (bb * GB), f"busbw {bb} GB/s", op))
            elif "peak_busbw_GBps" in m:
                s = 8 * 2.0**30  # a peak without a size: read at nccl-tests' usual largest size, 8 GiB
                out.append((c["id"], cl, p, 1, s, s * f * (p - 1) / p / (m["peak_busbw_GBps"] * GB), "peak busbw",
                            op))
            elif "latency_us" in m:
                s = float(m.get("msg_bytes_range", [128])[0])  # the flat small-message latency, at its smallest size
                out.append((c["id"], c["cluster"], p, 1, s, m["latency_us"] * 1e-6, "latency", op))
    return out


#: NCCL_ALGO forced by a measured run -> the algorithm (and cluster overrides) that model it: NVLS and
#: NVLSTree are ``hierarchical`` on an NVLS tier; CollNetChain is ``hierarchical`` with SHARP switched on for
#: the InfiniBand tiers (the clusters ship with it off: it needs the CollNet plugin); Ring is ``ring``.
#: NVLSTree on one node is disabled by NCCL (tuning.cc), so that latency case is compared with auto.
FORCED = {"NVLS": "|hierarchical", "Ring": "|ring",
          "CollNetChain": "|hierarchical|cluster.tiers.1.in_network_reduction=true"
                          "|cluster.tiers.2.in_network_reduction=true|cluster.tiers.3.in_network_reduction=true"}

#: Families of the summary table (by case id prefix).
FAMILIES = (("az_ndh100v5", "NVLS 8x H100"), ("az_ndh200v5", "NVLS 8x H200"), ("az_ndgb200v6", "GB200 4 GPUs ring"),
            ("az_ndgb300v6", "GB300 4 GPUs ring"), ("nccl1807_b200", "B200 8 GPUs peak (out)"),
            ("cw_gb200_nvl72", "NVL72 1 rack"), ("cw_gb200_allreduce_2racks", "NVL72 2 racks"),
            ("cw_gb200_allreduce_20racks", "NVL72 20 racks"), ("cw_h100_64gpu", "SHARP IB 64x H100"),
            ("nccl1374_h800", "H800 NVLS peak"), ("nccl1259", "H100 2-GPU latency"),
            ("wh8_h100_4gpu", "H100 4-GPU latency (out)"), ("az_ndmi300x", "MI300X RCCL"),
            ("tcp_nccl209_gcp_32gbe_4x8", "TCP 4x8 GCP ring"), ("tcp_nt83", "TCP 2x4 Azure ring"),
            ("tcp_nccl209_gcp_32gbe_2x8", "TCP 2x8 GCP tree (out)"), ("nccl1047_h100_reducescatter", "H100 RS ring"),
            ("p5efa_allreduce", "p5 EFA all-reduce"), ("p5efa_allgather", "p5 EFA all-gather"),
            ("p5efa_alltoall", "p5 EFA all-to-all"),
            ("a3tcpx_allgather", "A3 TCPX all-gather"))


def family_of(cid: str) -> str:
    for prefix, name in FAMILIES:
        if cid.startswith(prefix):
            return name
    return cid


USAGE = "validate_collectives.py [FILE.yaml] [--family auto|nccl|all] [--json]"


def evaluate(cases: list[dict[str, Any]], family: str, where: str) -> list[tuple[Any, ...]]:
    """(case id, cluster, ranks, size, algorithm used, what, measured s, predicted s, error) for every point."""
    rows = []
    specs: dict[str, Any] = {}
    for cid, cl, p, stride, s, t_meas, what, op in points(cases):
        name, *extra = cl.split("|")
        algo = "auto"
        overrides = []
        for e in extra:
            if e in ALGORITHMS:
                algo = e
            else:
                overrides.append(e)
        try:
            if cl not in specs:
                specs[cl] = load_cluster(name, [o.removeprefix("cluster.") for o in overrides])
            specs[cl].require_gpus(p, where="ranks")
        except InputError as e:
            raise e.at(f"{where}: case {cid}: cluster {cl!r}") from None
        network = build_network(specs[cl])
        t_pred = float(C.collective_time(op, s, p, network, algorithm=algo, stride=stride, family=family))
        _, names, idx, _ = C.best_algorithm(op, s, p, network, stride=stride, family=family)
        used = algo if algo != "auto" else names[int(idx)]
        err = (t_pred - t_meas) / t_meas
        rows.append((cid, name, p, s, used, what, t_meas, t_pred, err))
    if not rows:
        raise DataError(f"{where}: no collective case to compare; all_reduce cases with cluster, ranks and measured "
                        f"msg_bytes + busbw_GBps, peak_busbw_GBps or latency_us")
    return rows


def _families(rows: list[tuple[Any, ...]]) -> dict[str, list[tuple[float, float]]]:
    fams: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        fams.setdefault(family_of(r[0]), []).append((r[3], r[-1]))
    return fams


def report(rows: list[tuple[Any, ...]]) -> str:
    lines = [f"{'case':30s} {'cluster':9s} {'p':>4s} {'size':>10s} {'algo':12s} {'measured':>11s} "
             f"{'predicted':>11s} {'error':>8s}"]
    for cid, name, p, s, used, _what, tm, tp, e in rows:
        lines.append(f"{cid:30s} {name:9s} {p:4d} {s:10.3g} {used:12s} {tm * 1e6:9.1f}us {tp * 1e6:9.1f}us {e:+8.1%}")
    errs = [abs(r[-1]) for r in rows]
    big = [abs(r[-1]) for r in rows if r[3] >= 2**20]
    lines.append(f"\n{'family':24s} {'points':>6s} {'median':>8s} {'worst':>8s} {'median>=1MiB':>13s} "
                 f"{'worst>=1MiB':>12s}")
    for name, fe in _families(rows).items():
        a = [abs(e) for _, e in fe]
        b = [abs(e) for sz, e in fe if sz >= 2**20]
        mb = f"{statistics.median(b):13.1%} {max(b):12.1%}" if b else f"{'-':>13s} {'-':>12s}"
        lines.append(f"{name:24s} {len(a):6d} {statistics.median(a):8.1%} {max(a):8.1%} {mb}")
    lines.append(f"\n{len(errs)} points: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    lines.append(f"{len(big)} points >= 1 MiB: median |error| {statistics.median(big):.1%}, worst {max(big):.1%}"
                 if big else "0 points >= 1 MiB")
    return "\n".join(lines)


def _stats(errors: list[float]) -> dict[str, Any]:
    a = [abs(e) for e in errors]
    return {"points": len(a), "median_abs_error": statistics.median(a) if a else None,
            "worst_abs_error": max(a, default=None)}


def as_json(path: Path, family: str, rows: list[tuple[Any, ...]]) -> str:
    keys = ("case", "cluster", "ranks", "size_bytes", "algorithm", "what", "measured_s", "predicted_s", "error")
    doc = {"file": str(path), "family": family, "points": [dict(zip(keys, r, strict=True)) for r in rows],
           "families": [{"family": name, **_stats([e for _, e in fe]),
                         "ge_1MiB": _stats([e for sz, e in fe if sz >= 2**20])}
                        for name, fe in _families(rows).items()],
           "all": _stats([r[-1] for r in rows]), "ge_1MiB": _stats([r[-1] for r in rows if r[3] >= 2**20])}
    return json.dumps(doc, allow_nan=False, indent=1)


def main(argv: list[str]) -> int:
    args = list(argv[1:])
    family = "auto"
    as_doc = "--json" in args
    args = [a for a in args if a != "--json"]
    if "--family" in args:
        i = args.index("--family")
        family = args[i + 1] if i + 1 < len(args) else ""
        del args[i:i + 2]
    bad = [a for a in args if a.startswith("-")] or args[1:]
    if bad or family not in FAMILY_CHOICES:
        what = f"{' '.join(bad)} not understood" if bad else f"--family {family!r}"
        print(f"error: arguments: {what}; usage: {USAGE}", file=sys.stderr)
        return 2
    path = Path(args[0]) if args else CASES
    rows = read_or_report(path, lambda: evaluate(load(path), family, str(path)))
    if rows is None:
        return 2
    if not all(math.isfinite(r[-1]) for r in rows):
        bad_rows = ", ".join(f"{r[0]} at {r[3]:g} B" for r in rows if not math.isfinite(r[-1]))
        print(f"error: {path}: the model time is not finite for {bad_rows}; a finite model time", file=sys.stderr)
        return 1
    print(as_json(path, family, rows) if as_doc else report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
