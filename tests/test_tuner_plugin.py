"""aws-ofi-nccl's p5 region tuner steering all-reduce (docs/model.md#tuner-plugin): region picks checked by hand
against the polygons of aws-ofi-nccl v1.16.3 src/tuner/nccl_ofi_regions.cpp region_init_internal_p5_p5e, and the
NVLSTree time at a point the tuner gives NVLSTree computed by hand from tuning.cc's formula
(docs/model.md#in-network-reduction), not from the implementation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalemodel.cost import collectives as C
from scalemodel.cost import nccl
from scalemodel.cost.network import Network
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

MiB = 2.0**20


def p5() -> Network:
    return build_network(load_cluster("aws-p5", []))


def _pick(S: float, p: int, stride: int = 1) -> tuple[str, str] | None:
    idx, choices = nccl.tuner_plugin_choice("allreduce", np.array(S), place(p, stride, p5()))
    return None if int(idx) < 0 else choices[int(idx)]


def test_aws_p5_names_the_ofi_tuner() -> None:
    assert p5().nccl_tuner == "aws-ofi-p5"


@pytest.mark.parametrize(("S", "p", "want"), [
    # Tree LL128 polygon: at 32 ranks its right edge runs (31457280, 16) -> (37748736, 32): 32 MiB is left of it
    (32 * MiB, 32, ("tree", "ll128")),
    # at 64 ranks the Tree edge is at 117440512 = 112 MiB: 64 MiB Tree, 128 MiB falls to Ring LL128
    (64 * MiB, 64, ("tree", "ll128")),
    (128 * MiB, 64, ("ring", "ll128")),
    # 256 ranks: Tree up to 301989888 (288 MiB); 512 MiB lies above the NVLSTree notch (444596224, 160) ->
    # (1074790400, 256), whose height at 512 MiB is 160 + 96 x 92274688 / 630194176 = 174 < 256: NVLSTree
    (256 * MiB, 256, ("tree", "ll128")),
    (512 * MiB, 256, ("hierarchical", "simple")),
    # (2147483648, 256) is a Ring LL128 vertex (an edge point counts, Ring LL128 comes first)
    (2048 * MiB, 256, ("ring", "ll128")),
    # 32 ranks, 2 GiB: right of Ring LL128's edge (1073741824, 17) -> (2147483648, 64), whose size at 32 ranks
    # is 1073741824 + 15/47 x 1073741824 = 1.42 GB; inside Ring Simple, whose left edge (1610612736, 32) ->
    # (1073741824, 17) it meets at 32 ranks at 1.61 GB
    (2048 * MiB, 32, ("ring", "simple")),
    # 128 ranks 4 GiB: the second NVLSTree polygon's bottom edge (2147483648, 128) -> (6442450944, 128)
    (4096 * MiB, 128, ("hierarchical", "simple")),
])
def test_region_picks_by_hand(S: float, p: int, want: tuple[str, str]) -> None:
    assert _pick(S, p) == want


def test_two_nodes_and_other_ranks_per_node_fall_back_to_nccl() -> None:
    # nodes <= 2: the tuner returns NCCL's own choice; 4 ranks a node (stride 2) has no table. (1 rank a node,
    # stride 8, is the nRanks == nNodes table since review17e: 256 MiB at 32 ranks lies right of its Ring LL128 /
    # Ring Simple line (4736000, 2) -> (269484032, 128), 67.8 MB at 32 ranks: Ring Simple; tests/test_review17e.py)
    assert _pick(256 * MiB, 16) is None
    assert _pick(256 * MiB, 32, stride=2) is None
    assert _pick(256 * MiB, 32, stride=8) == ("ring", "simple")
    no_tuner = dataclasses.replace(p5(), nccl_tuner="")
    for S in (32 * MiB, 8192 * MiB):
        assert float(C.collective_time("allreduce", S, 16, p5(), dtype_bytes=1)) == \
            float(C.collective_time("allreduce", S, 16, no_tuner, dtype_bytes=1))


def test_nvlstree_time_at_a_tuner_point_by_hand() -> None:
    # 32 nodes x 8, 8 GiB: NVLSTree. k = 8 heads; intra busBw = 2 x 0.85 x 369 x 8/9 x 7/8 = 487.9 GB/s;
    # NIC term: k B_net 2(p-1)/p / v_N with B_net = 50 x 0.88 = 44 GB/s, v_N = 2 (>= 4 domains) -> 350.6 GB/s;
    # cap 8 x 45.5 = 364 GB/s. lat = NCCL's hwLatencies read on the measured hops (coll34): NVLink 2 + 25 - 0.6 =
    # 26.4 us, a level across the EFA tier 21.1 + 20.9 - 2.7 = 39.3 us: 26.4 + 2 log2(32) 39.3 = 419.4 us (NCCL's own
    # estimate 25 + 10 x 20.9 = 234 us); fill 2 x (16 x 8) x 128 KiB = 32 MiB.
    # T = lat + (S + fill) 2(p-1)/p / (8 x 44e9 x (p-1)/p) = lat + 2 (S + fill) / 352e9
    S = 8192 * MiB
    expect = 419.4e-6 + 2 * (S + 32 * MiB) / 352e9
    assert _pick(S, 256) == ("hierarchical", "simple")
    got = float(C.collective_time("allreduce", S, 256, p5(), dtype_bytes=1))
    assert got == pytest.approx(expect, rel=1e-9)
    assert got == pytest.approx(49416.5e-6, rel=1e-6)


def test_tuner_pick_is_priced_at_its_protocol_not_the_fastest() -> None:
    # 4 nodes, 256 MiB: Ring LL128, although the model's NVLSTree (and Tree) would be faster there
    net = p5()
    pl = place(32, 1, net)
    S = np.array(256 * MiB)
    ring_ll128 = float(nccl.algorithm_time("allreduce", "ring", S, pl, protocols=("ll128",)))
    nvlstree = float(nccl.algorithm_time("allreduce", "hierarchical", S, pl))
    assert nvlstree < ring_ll128
    assert float(C.collective_time("allreduce", S, 32, net, dtype_bytes=1)) == pytest.approx(ring_ll128, rel=1e-12)
    times, names, idx, best = C.best_algorithm("allreduce", S, 32, net, dtype_bytes=1)
    assert names[int(idx)] == "ring" and float(best) == pytest.approx(ring_ll128, rel=1e-12)
    assert float(times[names.index("ring")]) == pytest.approx(ring_ll128, rel=1e-12)
    # 4 nodes, 4 GiB: Ring Simple, priced at Simple although LL128 is among the ring's protocol lines
    S4 = np.array(4096 * MiB)
    ring_simple = float(nccl.algorithm_time("allreduce", "ring", S4, pl, protocols=("simple",)))
    times, names, idx, best = C.best_algorithm("allreduce", S4, 32, net, dtype_bytes=1)
    assert names[int(idx)] == "ring" and float(best) == pytest.approx(ring_simple, rel=1e-12)
    assert float(times[names.index("ring")]) == pytest.approx(ring_simple, rel=1e-12)


def test_collective_says_why_best_is_not_the_fastest_row(cli) -> None:  # type: ignore[no-untyped-def]
    """`collective --cluster aws-p5 -n 64 --size 1GiB` marked ring "best" under faster tree and hierarchical rows
    with no word why: the p5 region tuner (8 nodes x 8 ranks) picks Ring there. The row now carries the reason
    (``best_basis``) and the table's last line says it and names the faster row; where no tuner decides, the
    reason is NCCL's own family (a faster textbook row, rhd on pcie-25gbe, is one NCCL does not run), and a
    "hierarchical" pick on an NVSwitch node is named as NCCL's in-network reduction."""
    import json

    assert _pick(2.0**30, 64) is not None and _pick(2.0**30, 64)[0] == "ring"  # the tuner decides here
    doc = json.loads(cli("collective", "-c", "aws-p5", "-n", "64", "--size", "1GiB", "--json").out)
    (row,) = doc["rows"]
    times = {a["algorithm"]: a["time_s"] for a in row["algorithms"]}
    assert row["best"] == "ring" and min(times.values()) < times["ring"]
    assert "aws-ofi-p5 tuner plugin" in row["best_basis"]
    out = " ".join(cli("collective", "-c", "aws-p5", "-n", "64", "--size", "1GiB").out.split())
    fastest = min(times, key=times.__getitem__)
    assert "best = the aws-ofi-p5 tuner plugin's choice" in out and f"{fastest} (" in out.split("best =")[1]
    row = json.loads(cli("collective", "-c", "pcie-25gbe", "-n", "64", "--size", "1GiB", "--json").out)["rows"][0]
    assert row["best"] in ("ring", "tree")
    assert row["best_basis"].startswith("the fastest algorithm NCCL runs for allreduce (ring, tree")
    row = json.loads(cli("collective", "-c", "dgx-h100", "-n", "8", "--size", "1GiB", "--json").out)["rows"][0]
    assert row["best"] == "hierarchical" and "in-network reduction" in row["best_basis"]
    row = json.loads(cli("collective", "-c", "dgx-h100", "-n", "8", "--size", "1GiB", "--algo", "ring",
                         "--json").out)["rows"][0]
    assert row["best_basis"] == "named with --algo"


def test_collective_basis_lists_what_nccl_runs_for_the_op(cli) -> None:  # type: ignore[no-untyped-def]
    """All-gather on 8 H100s: NCCL runs ring, PAT and NVLS for it, not tree (nccl.NCCL_FAMILY); the basis said
    "(ring, tree, in-network reduction)" for every op."""
    import json

    row = json.loads(cli("collective", "-c", "dgx-h100", "-n", "8", "--op", "allgather", "--size", "1GiB",
                         "--json").out)["rows"][0]
    assert "tree" not in row["best_basis"] and "allgather" in row["best_basis"]
