"""NCCL's cap on the LL protocol's bus bandwidth, across nodes and on one node (docs/model.md#nccl-ll-cap).

NVIDIA/nccl v2.30.7-1 src/graph/tuning.cc (the same multi-node columns at v2.18.1-1): across nodes ``llMaxBw`` is
indexed by the host CPU ("for multi-node, we look at CPU type"), Intel row {39.0, 39.0, 20.4} GB/s for N1 / N2 / N4+,
AMD row {87.7, 22.5, 19.0} (cpuVendor AMD or mixed; every other host, ARM and POWER included, takes the Intel row),
and Ring LL runs at ``busBw = min(llMaxBw, busBw * .5)``, Tree LL at ``min(busBw / 3.8, llMaxBw)``. Checked here:
the cap by node count and host CPU (cluster ``host_cpu``), a DGX A100 (AMD EPYC) case end to end, a bad
``host_cpu`` refused, ring LL times by hand on 2- and 4-node groups of a hand-built network, the GPU row on one node
(by hand at 8 ranks for each NVIDIA generation), none off NVIDIA networks, the Tree LL floor on DGX H100, and a
512-rank all-gather of one MPT-3B block's parameters, where the uncapped LL line was the fastest and NCCL's own
model picks another protocol.
"""

from __future__ import annotations

import typing
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import collectives as C
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster
from scalemodel.specs.cluster import HostCpu

US = 1e-6
GIB = 2.0**30
NVL = Tier("nvlink", 8, 100e9, 2 * US, 1.0, protocol="nvlink")
NET = Tier("net", 4096, 10e9, 20 * US, 1.0, protocol="rdma", net_overhead=7 * US)
HOPPER = Network((NVL, NET), 8, generation="hopper")
UNNAMED = Network((NVL, NET), 8)


def test_cap_by_node_count() -> None:
    """Inside one node the GPU's row (Hopper-N1 141.0 GB/s); across nodes the Intel row: 39.0 GB/s on 2 nodes,
    20.4 GB/s on 3 nodes and more."""
    caps = nccl.ll_max_busbw(place(np.array([8.0, 16.0, 24.0, 32.0, 512.0]), 1, HOPPER))
    assert caps.tolist() == [141.0e9, 39.0e9, 20.4e9, 20.4e9, 20.4e9]
    assert nccl.NCCL_LL_MAX_BW_MULTI_NODE["amd"] == (22.5e9, 19.0e9)  # row 1 of the same table


def test_ring_ll_two_and_four_nodes_by_hand() -> None:
    """LL line of a ring all-gather of 1 GiB. Latency: base 6.6 us + NVLink steps at max(2, 7) us + node
    crossings at max(20, 7) us (LL: the tier latencies as given, overhead x1). Bytes: the uncapped LL bus
    bandwidth is 0.5 x min(100, 8 x 10) = 40 GB/s, above both caps, so the cap sets it. The channel ramp's
    full size (8 B x ranks x 512 threads x 4 channels) is far below 1 GiB: S_eff = S."""
    t2 = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(16, 1, HOPPER), protocols=("ll",)))
    assert t2 == pytest.approx((6.6 + 14 * 7 + 1 * 20) * US + GIB * 15 / 16 / 39.0e9, rel=1e-9)
    t4 = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(32, 1, HOPPER), protocols=("ll",)))
    assert t4 == pytest.approx((6.6 + 28 * 7 + 3 * 20) * US + GIB * 31 / 32 / 20.4e9, rel=1e-9)
    # all-reduce: twice the steps, bytes 2 (p - 1)/p S over the same cap
    ar = float(nccl.algorithm_time("allreduce", "ring", np.float64(GIB), place(32, 1, HOPPER), protocols=("ll",)))
    assert ar == pytest.approx(2 * (28 * 7 + 3 * 20) * US + 6.6 * US + 2 * GIB * 31 / 32 / 20.4e9, rel=1e-9)


def test_one_node_below_its_cap_or_an_unnamed_network() -> None:
    """One node: 0.5 x 100 GB/s LL line (under Hopper's one-node 141 GB/s), 7 NVLink steps at 2 us (no network
    overhead inside a node). A network that names no NVIDIA family keeps the uncapped line across nodes: 0.5 x 80
    GB/s."""
    one = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(8, 1, HOPPER), protocols=("ll",)))
    assert one == pytest.approx((6.6 + 7 * 2) * US + GIB * 7 / 8 / 50e9, rel=1e-9)
    bare = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(16, 1, UNNAMED), protocols=("ll",)))
    assert bare == pytest.approx((6.6 + 14 * 7 + 20) * US + GIB * 15 / 16 / 40e9, rel=1e-9)


def test_one_node_cap_is_the_gpu_row() -> None:
    """Inside one node NCCL indexes llMaxBws by the GPU (tuning.cc v2.30.7-1: ``index1 = nNodes == 1 ?
    compCapIndex``), column N1: Volta 39.0, Ampere 87.7, Hopper 141.0, Blackwell 2 x 141.0 GB/s. An 8-GPU node of
    800 GB/s NVLink: the uncapped LL line is 0.5 x 800 = 400 GB/s, above every row, so the row sets the bytes' time;
    latency 6.6 us base + 7 NVLink steps at 2 us. Pascal takes the Volta row (compute capability < 8.0)."""
    fast = Tier("nvlink", 8, 800e9, 2 * US, 1.0, protocol="nvlink")
    for gen, cap in (("pascal", 39.0e9), ("volta", 39.0e9), ("ampere", 87.7e9), ("hopper", 141.0e9),
                     ("blackwell", 282.0e9)):
        net = Network((fast, NET), 8, generation=gen)
        t = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(8, 1, net), protocols=("ll",)))
        assert t == pytest.approx((6.6 + 7 * 2) * US + GIB * 7 / 8 / cap, rel=1e-9), gen
    # all-reduce: 2 (p - 1)/p S over the same cap
    net = Network((fast, NET), 8, generation="hopper")
    ar = float(nccl.algorithm_time("allreduce", "ring", np.float64(GIB), place(8, 1, net), protocols=("ll",)))
    assert ar == pytest.approx((6.6 + 14 * 2) * US + 2 * GIB * 7 / 8 / 141.0e9, rel=1e-9)


def test_tree_ll_floor_on_dgx_h100() -> None:
    """Tree LL all-reduce of 1 GiB over 64 ranks (8 nodes): NCCL's algBw = 0.5 x min(0.92 busBw / 3.8, 20.4 GB/s)
    x treeCorrection (1 from 512 MiB on), so the bytes take at least 2^30 / (0.5 x 20.4e9) = 105.3 ms; the uncapped
    line (0.5 x 0.92 / 3.8 x a busbw of a few hundred GB/s) would take a quarter of that."""
    net = build_network(load_cluster("dgx-h100"))
    pl = place(64, 1, net)
    t = nccl.algorithm_time("allreduce", "tree", np.array([0.0, GIB]), pl, protocols=("ll",))
    assert float(t[1] - t[0]) == pytest.approx(GIB / (0.5 * 20.4e9), rel=1e-9)


def test_mpt_3b_block_gather_at_512() -> None:
    """One MPT-3B block (12 d^2 + 2 d params, d 2560: 78,648,320) gathered in bf16 over 512 H100s (64 DGX nodes):
    S = 157,296,640 B. LL line by hand: base 6.6 us + 448 NVLink steps x max(2, 1) us + 62 leaf crossings x 3.5 us
    + 1 spine crossing x 4.16 us = 1123.76 us, plus S x 511/512 / 20.4 GB/s = 7.695 ms: 8.82 ms. Uncapped it was
    under 2 ms and the fastest line; now the collective is the faster of LL128 and Simple."""
    net = build_network(load_cluster("dgx-h100"))
    S = 2.0 * (12 * 2560**2 + 2 * 2560)
    assert S == 157_296_640
    ll = float(C.algorithm_time("allgather", "ring", S, 512, net, protocols=("ll",)))
    assert ll == pytest.approx((6.6 + 448 * 2 + 62 * 3.5 + 4.16) * US + S * 511 / 512 / 20.4e9, rel=1e-6)
    others = min(float(C.algorithm_time("allgather", "ring", S, 512, net, protocols=(p,))) for p in ("ll128", "simple"))
    assert float(C.collective_time("allgather", S, 512, net)) == pytest.approx(others, rel=1e-12)
    assert others < ll


# tuning.cc v2.30.7-1 llMaxBws, typed in from the table: row 0 "Volta-N1/Intel-N2/Intel-N4" {39.0, 39.0, 20.4},
# row 1 "Ampere-N1/AMD-N2/AMD-N4" {87.7, 22.5, 19.0} GB/s; index1 = 1 only for cpuVendor AMD (or MIXED) across nodes,
# index2 = 0 / 1 / 2 for 1 / 2 / 3+ nodes. The N1 column is the GPU's row and is not applied (inf).
EXPECTED_GBPS = {"intel": (39.0, 20.4), "amd": (22.5, 19.0), "arm": (39.0, 20.4), "power": (39.0, 20.4),
                 "other": (39.0, 20.4), "": (39.0, 20.4)}


@pytest.mark.parametrize("host", sorted(EXPECTED_GBPS))
def test_cap_by_host_cpu_and_node_count(host: str) -> None:
    """1, 2, 3, 4 and 64 nodes of 8 GPUs: the GPU's row on one node (Hopper, N1 column: 141.0 GB/s, whatever the
    host), the host's N2 column on two, its N4 column from three on."""
    net = replace(HOPPER, host_cpu=host)
    caps = nccl.ll_max_busbw(place(np.array([8.0, 16.0, 24.0, 32.0, 512.0]), 1, net))
    n2, n4 = EXPECTED_GBPS[host]
    assert caps[0] == 141.0e9
    assert caps[1:].tolist() == [n2 * 1e9, n4 * 1e9, n4 * 1e9, n4 * 1e9]


def test_host_cpu_classes_match_the_spec_vocabulary() -> None:
    assert tuple(typing.get_args(HostCpu)) == nccl.HOST_CPUS


def test_builtin_hosts() -> None:
    """The vendor documents' hosts (hardware/SOURCES.md): EPYC on DGX A100 and p5, Xeon on p4d / DGX H100 / B200,
    Grace on GB200 NVL72; a cluster that names none keeps '' (Intel's row)."""
    want = {"dgx-a100": "amd", "dgx-a100-40g": "amd", "aws-p5": "amd", "aws-p4d": "intel", "dgx-h100": "intel",
            "dgx-b200": "intel", "gb200-nvl72": "arm", "gb300-nvl72": "arm", "hgx-h200": ""}
    assert {c: build_network(load_cluster(c)).host_cpu for c in want} == want


def test_amd_cluster_end_to_end() -> None:
    """DGX A100 (two AMD EPYC 7742 a node): ring all-gather of 1 GiB on the LL line over 2 and 4 nodes of the built-in
    cluster. Latency: base 6.6 us + NVLink steps at max(2 us, AMD net overhead 2 us) + leaf crossings at 3.5 us (LL: the
    tier latencies as given). Bytes: the uncapped LL bus bandwidth is 0.5 x 8 NICs x 25 GB/s x 0.96 = 96 GB/s, above
    both rows, so the AMD row sets it: 22.5 GB/s on 2 nodes, 19.0 on 4 (the Intel row would give 39.0 and 20.4)."""
    net = build_network(load_cluster("dgx-a100"))
    assert net.host_cpu == "amd"
    t2 = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(16, 1, net), protocols=("ll",)))
    assert t2 == pytest.approx((6.6 + 14 * 2 + 1 * 3.5) * US + GIB * 15 / 16 / 22.5e9, rel=1e-9)
    t4 = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(32, 1, net), protocols=("ll",)))
    assert t4 == pytest.approx((6.6 + 28 * 2 + 3 * 3.5) * US + GIB * 31 / 32 / 19.0e9, rel=1e-9)
    intel = replace(net, host_cpu="intel")
    t2i = float(nccl.algorithm_time("allgather", "ring", np.float64(GIB), place(16, 1, intel), protocols=("ll",)))
    assert t2i == pytest.approx((6.6 + 14 * 2 + 1 * 3.5) * US + GIB * 15 / 16 / 39.0e9, rel=1e-9)
    # Tree LL all-reduce over 8 nodes: the bytes take at least 2^30 / (0.5 x 19.0 GB/s) (treeCorrection 1 at 1 GiB)
    t = nccl.algorithm_time("allreduce", "tree", np.array([0.0, GIB]), place(64, 1, net), protocols=("ll",))
    assert float(t[1] - t[0]) == pytest.approx(GIB / (0.5 * 19.0e9), rel=1e-9)


def test_a_bad_host_cpu_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """One line naming the file, the field and the allowed classes; exit 2."""
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nname: x\nextends: dgx-h100\nhost_cpu: epyc\n")
    r = cli("collective", "-c", str(f), "-n", "16")
    assert r.code == 2 and r.out == "" and "Traceback" not in r.err
    line = r.err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("error: "), line
    assert str(f) in line and "host_cpu" in line and "'intel', 'amd', 'arm', 'power' or 'other'" in line, line
