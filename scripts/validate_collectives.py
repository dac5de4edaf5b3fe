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
Usage: python scripts/validate_collectives.py [cases.yaml | hardware/measurements/nccl.yaml] [--family nccl|all]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np
import yaml

from scalemodel.cost import collectives as C
from scalemodel.cost.algorithms import ALGORITHMS
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

CASES = Path(__file__).resolve().parents[2] / "shared" / "validation" / "cases.yaml"
GB = 1e9


def points(cases: list[dict]) -> list[tuple[str, str, int, int, float, float, str]]:
    """(case id, cluster, ranks, stride, size bytes, measured time s, what) for every usable point."""
    out = []
    for c in cases:
        if c.get("kind") != "collective":
            continue
        m = c["measured"]
        if c["id"] == "az_nda100v4_allreduce_1node":
            for s, bb in zip(m["msg_bytes"], m["busbw_GBps"], strict=True):
                t = s * (2 * 7 / 8) / (bb * GB)
                out.append((c["id"], "dgx-a100", 8, 1, float(s), t, f"busbw {bb} GB/s"))
        elif c["id"] == "nt175_a100_1node_2node":
            s = 4 * 2.0**30  # "to 4GB": the peak row of the sweep
            out.append((c["id"], "dgx-a100", 8, 1, s, s * 2 * 7 / 8 / (m["busbw_GBps_1node_8gpu_to_4GB"] * GB),
                        "1 node peak busbw"))
            # 2 nodes with 4 HDR NICs per node: the dgx-a100 spec has 8 NICs; halve its NIC tier (4 x 25 GB/s)
            out.append((c["id"], "dgx-a100|cluster.tiers.1.bandwidth=100Gbit/s", 16, 1, s,
                        s * 2 * 15 / 16 / (m["busbw_GBps_2node_16gpu"] * GB), "2 nodes, 4 NICs/node"))
        elif c["id"] == "nt212_h100_guidance":
            s = 8 * 2.0**30  # peak: large message
            out.append((c["id"], "dgx-h100", 8, 1, s, s / (m["nvls_peak_algbw_GBps"] * GB), "NVLS peak algbw"))
            out.append((c["id"], "dgx-h100|ring", 8, 1, s, s * 2 * 7 / 8 / (m["ring_effective_busbw_GBps"] * GB),
                        "ring busbw"))
            s2 = 256e6
            out.append((c["id"], "dgx-h100", 8, 1, s2, s2 / (m["user_algbw_GBps_at_256MB"] * GB), "algbw at 256 MB"))
        elif "cluster" in c and c.get("collective", {}).get("op") == "all_reduce":
            # hardware/measurements/nccl.yaml: all_reduce busbw = algbw x 2(p-1)/p; an algorithm the run forced
            # (NCCL_ALGO) is modelled by the same algorithm, not by auto (FORCED)
            p = int(c["ranks"])
            cl = c["cluster"] + FORCED.get(str(c["collective"].get("algorithm", "")), "")
            if "msg_bytes" in m and "busbw_GBps" in m:
                for s, bb in zip(m["msg_bytes"], m["busbw_GBps"], strict=True):
                    out.append((c["id"], cl, p, 1, float(s), s * 2 * (p - 1) / p / (bb * GB), f"busbw {bb} GB/s"))
            elif "peak_busbw_GBps" in m:
                s = 8 * 2.0**30  # a peak without a size: read at nccl-tests' usual largest size, 8 GiB
                out.append((c["id"], cl, p, 1, s, s * 2 * (p - 1) / p / (m["peak_busbw_GBps"] * GB), "peak busbw"))
            elif "latency_us" in m:
                s = float(m.get("msg_bytes_range", [128])[0])  # the flat small-message latency, at its smallest size
                out.append((c["id"], c["cluster"], p, 1, s, m["latency_us"] * 1e-6, "latency"))
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
            ("cw_gb200_nvl72", "NVL72 1 rack"), ("cw_gb200_allreduce_2racks", "NVL72 2 racks"),
            ("cw_gb200_allreduce_20racks", "NVL72 20 racks"), ("cw_h100_64gpu", "SHARP IB 64x H100"),
            ("nccl1374_h800", "H800 NVLS peak"), ("nccl1259", "H100 2-GPU latency"), ("az_ndmi300x", "MI300X RCCL"),
            ("tcp_nccl209_gcp_32gbe_4x8", "TCP 4x8 GCP ring"), ("tcp_nt83", "TCP 2x4 Azure ring"),
            ("tcp_nccl209_gcp_32gbe_2x8", "TCP 2x8 GCP tree (out)"))


def family_of(cid: str) -> str:
    for prefix, name in FAMILIES:
        if cid.startswith(prefix):
            return name
    return cid


def main(argv: list[str]) -> int:
    args = list(argv[1:])
    family = "auto"
    if "--family" in args:
        i = args.index("--family")
        family = args[i + 1]
        del args[i:i + 2]
    path = Path(args[0]) if args else CASES
    cases = yaml.safe_load(path.read_text())
    rows = []
    for cid, cl, p, stride, s, t_meas, what in points(cases):
        name, *extra = cl.split("|")
        algo = "auto"
        overrides = []
        for e in extra:
            if e in ALGORITHMS:
                algo = e
            else:
                overrides.append(e)
        spec = load_cluster(name, [o.removeprefix("cluster.") for o in overrides])
        network = build_network(spec)
        t_pred = float(C.collective_time("allreduce", s, p, network, algorithm=algo, stride=stride, family=family))
        _, names, idx, _ = C.best_algorithm("allreduce", s, p, network, stride=stride, family=family)
        used = algo if algo != "auto" else names[int(idx)]
        err = (t_pred - t_meas) / t_meas
        rows.append((cid, name, p, s, used, what, t_meas, t_pred, err))
    print(f"{'case':30s} {'cluster':9s} {'p':>4s} {'size':>10s} {'algo':12s} {'measured':>11s} "
          f"{'predicted':>11s} {'error':>8s}")
    for cid, name, p, s, used, _what, tm, tp, e in rows:
        print(f"{cid:30s} {name:9s} {p:4d} {s:10.3g} {used:12s} {tm * 1e6:9.1f}us {tp * 1e6:9.1f}us {e:+8.1%}")
    errs = [abs(r[-1]) for r in rows]
    big = [abs(r[-1]) for r in rows if r[3] >= 2**20]
    fams: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        fams.setdefault(family_of(r[0]), []).append((r[3], r[-1]))
    print(f"\n{'family':24s} {'points':>6s} {'median':>8s} {'worst':>8s} {'median>=1MiB':>13s} {'worst>=1MiB':>12s}")
    for name, fe in fams.items():
        a = [abs(e) for _, e in fe]
        b = [abs(e) for sz, e in fe if sz >= 2**20]
        mb = f"{statistics.median(b):13.1%} {max(b):12.1%}" if b else f"{'-':>13s} {'-':>12s}"
        print(f"{name:24s} {len(a):6d} {statistics.median(a):8.1%} {max(a):8.1%} {mb}")
    print(f"\n{len(errs)} points: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}")
    print(f"{len(big)} points >= 1 MiB: median |error| {statistics.median(big):.1%}, worst {max(big):.1%}")
    return 0 if np.isfinite(max(errs)) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
