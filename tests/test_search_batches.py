"""Pass 2's batch top-up (planner._top_up) and NCCL's inter-node speed lookup change no result.

The top-up moves rows of a class's later batches into a thinned one; the search must rank the same plans, with the
same values and counts, as without it. Small chunks (CHUNK_CANDIDATES) make many batches per class, so the top-up
runs many times on these small spaces; a spy checks that it did, so the comparison is never vacuous.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import nccl
from scalemodel.cost.placement import place
from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.network import build_network
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.constraints import parse_constraints

SPACES = [  # (cluster, model, model sets, gpus, global batch, sync modes, objective)
    ("dgx-a100", "llama2-13b", ["layers=8"], 16, 32, ("bsp", "asp", "hier:2"), "throughput"),
    ("dgx-h100", "mixtral-8x7b", ["layers=4"], 16, 32, ("bsp", "local:4", "hier:2"), "time-to-train"),
]


def _summary(res: planner.PlanResult) -> tuple:
    """Everything the plan reports but the search's own counters (evaluated, re-priced) and its time."""
    ranked = [p.payload() for p in res.ranked]  # strategy, step time and breakdown, throughput, memory, ...
    fam = {k: p.payload() for k, p in res.family_best.items()}
    return (res.objective_values, ranked, fam, res.equivalents, res.feasible, res.candidates_evaluated,
            res.infeasible_by_reason, res.search["second_pass_outer"])


@pytest.mark.parametrize("space", SPACES, ids=[s[1] for s in SPACES])
def test_top_up_ranks_the_same_plans(space, monkeypatch):
    cluster, model, sets, gpus, batch, modes, objective = space
    job = build_job(load_cluster(cluster, []), load_workload(model, sets), TrainingSpec(global_batch=batch))
    n_choice = len(planner.comm_choices(job, gpus, {}, frozenset())["algorithm"])
    monkeypatch.setattr(planner, "CHUNK_CANDIDATES", 16 * n_choice)  # batches of 16 rows: several per class
    grew = []
    top_up = planner._top_up

    def spy(part, *args):
        out = top_up(part, *args)
        grew.append(len(out) > len(part))
        return out

    monkeypatch.setattr(planner, "_top_up", spy)
    with_top_up = planner.search(job, gpus, batch, top=5, sync_modes=modes, objective=objective)
    assert any(grew), "the top-up never added a row: the comparison below would test nothing"
    monkeypatch.setattr(planner, "_top_up", lambda part, *args: part)  # each batch as it was cut
    without = planner.search(job, gpus, batch, top=5, sync_modes=modes, objective=objective)
    assert _summary(with_top_up) == _summary(without)
    assert with_top_up.ranked  # something was ranked


def _loop_rule(gbs: np.ndarray, speeds: tuple[float, ...]) -> np.ndarray:
    """search.cc:1157-1171's pick as the comparison against each speed in turn: slowest first, the last speed not
    above the NIC's rate wins (the slowest where none is)."""
    s = np.full(gbs.shape, speeds[-1])
    for v in reversed(speeds):
        s = np.where(v <= gbs * (1 + 1e-9), v, s)
    return s


@pytest.mark.parametrize("gen", sorted(nccl.NCCL_INTER_SPEEDS))
def test_inter_speed_matches_the_rule(gen):
    speeds = nccl.NCCL_INTER_SPEEDS[gen]
    assert list(speeds) == sorted(speeds, reverse=True)  # fastest first, as the rule reads it
    edges = np.array(speeds)  # every speed, just inside and beyond the 1e-9 tolerance, extremes, random rates
    gbs = np.concatenate([edges, edges * (1 + 5e-10), edges * (1 - 1e-9), edges * (1 - 2e-9), edges * 0.999,
                          [0.0, 0.05, 1e6, np.inf, np.nan], np.random.default_rng(7).uniform(0, 120, 500)])
    assert np.array_equal(nccl.inter_speed(gbs, speeds), _loop_rule(gbs, speeds))


def test_inter_speed_by_hand():
    hopper = nccl.NCCL_INTER_SPEEDS["hopper"]
    # 400 Gb/s = 50 GB/s -> 48; 25 GB/s (HDR) -> 24; 24 GB/s -> 24; 12.5 GB/s -> 12; below the slowest -> the slowest;
    # no outer tier (inf) -> the fastest; NaN -> the slowest
    got = nccl.inter_speed(np.array([50.0, 25.0, 24.0, 12.5, 0.1, np.inf, np.nan]), hopper)
    assert got.tolist() == [48.0, 24.0, 24.0, 12.0, 0.12, 48.0, 0.12]
    assert nccl.inter_speed(np.array([100.0, 85.0]), nccl.NCCL_INTER_SPEEDS["blackwell"]).tolist() == [96.0, 80.0]


def test_family_best_ties_go_to_the_first_candidate(monkeypatch):
    """Equal family values are decided by the pick order (sync mode as listed, then configuration, ZeRO stage, ...),
    as the ranked plans are, never by which batch happened to evaluate them first. On this space two family bests
    are ties: at dp 2 hier:2 is one group, the same step as bsp, and at dp 1 ZeRO 1 shards nothing, the same step as
    ZeRO 0 (both checked below). The pick kept the first one evaluated, so the family table named hier:2 or bsp,
    ZeRO 1 or ZeRO 0, with the batch size (CHUNK_CANDIDATES) and the top-up's merging of batches."""
    cluster, model, sets, gpus, batch, modes, objective = SPACES[1]
    job = build_job(load_cluster(cluster, []), load_workload(model, sets), TrainingSpec(global_batch=batch))
    n_choice = len(planner.comm_choices(job, gpus, {}, frozenset())["algorithm"])

    def fams(rows: int, top_up: bool, sync_modes=modes, constraints=None) -> dict:
        monkeypatch.setattr(planner, "CHUNK_CANDIDATES", rows * n_choice)
        if not top_up:
            monkeypatch.setattr(planner, "_top_up", lambda part, *args: part)
        res = planner.search(job, gpus, batch, top=5, sync_modes=sync_modes, objective=objective,
                             constraints=constraints)
        monkeypatch.undo()
        return {k: p.payload() for k, p in res.family_best.items()}

    runs = {(rows, top_up): fams(rows, top_up) for rows, top_up in ((16, False), (64, False), (64, True))}
    ref = runs[(16, False)]
    for key, got in runs.items():
        assert got == ref, key
    # the ties exist: the tied candidate alone reaches the same step time
    alone_hier = fams(64, True, ("hier:2",))["DP+TP+PP+CP"]
    assert alone_hier["step_time_s"] == ref["DP+TP+PP+CP"]["step_time_s"]
    zero1 = fams(64, True, modes, parse_constraints(["zero>=1"]))["TP"]
    assert zero1["step_time_s"] == ref["TP"]["step_time_s"] and zero1["strategy"]["zero"] == "1"
    # and the first in pick order wins them: bsp (listed first), ZeRO 0
    assert ref["DP+TP+PP+CP"]["strategy"]["sync"] == "bsp" and ref["DP+TP+PP+CP"]["strategy"]["zero"] == "0"
    assert ref["TP"]["strategy"]["zero"] == "0" and ref["TP"]["strategy"]["sync"] == "bsp"


# NCCL / RCCL clusters only: TPU networks take no protocol lines (nccl.runs_nccl, tpucoll30)
TREE_CLUSTERS = ["dgx-h100", "dgx-b200", "dgx-1-v100", "a100-4nic-hdr", "pcie-25gbe", "mi300x-8"]


@pytest.mark.parametrize("cluster", TREE_CLUSTERS)
def test_tree_caps_priced_once_for_every_protocol(cluster, monkeypatch):
    """algorithm_time prices the Tree caps once per group (nccl.py, 3ab5da58) where they were priced on each protocol's
    Tree links: valid only while those links keep every figure tree_channel_caps reads. Checked on one node, 2 and
    16 nodes, a strided group, shared and non-NCCL NICs: the caps on each protocol's links, and the time as priced
    with the caps recomputed per protocol (``caps`` dropped), equal the hoisted ones bit for bit."""
    net = build_network(load_cluster(cluster, []))
    ranks, stride = np.array([2, 8, 16, 64, 128, 32]), np.array([1, 1, 1, 2, 1, 4])
    pl = place(ranks, stride, net)
    caps = nccl.tree_channel_caps(pl)
    protos = nccl.protocols_for(net)
    for proto in protos:
        linked = nccl.tree_channel_caps(nccl.protocol_links(pl, proto, "tree", bw_factor=1.0))
        assert all(np.array_equal(a, b) for a, b in zip(linked, caps, strict=True)), proto
    S = np.array([[1e3], [1e6], [3e8], [2.0**31]])
    hoisted = nccl.algorithm_time("allreduce", "tree", S, pl)
    tree_time = nccl.nccl_tree_allreduce_time
    seen = []

    def per_protocol(*args, caps=None, **kw):
        seen.append(caps is not None)
        return tree_time(*args, **kw)  # the caps priced again on this protocol's links

    monkeypatch.setattr(nccl, "nccl_tree_allreduce_time", per_protocol)
    assert np.array_equal(nccl.algorithm_time("allreduce", "tree", S, pl), hoisted)
    assert len(seen) == len(protos) and all(seen)  # the hoisted caps reached every protocol
    assert np.all(np.isfinite(hoisted)) and np.all(hoisted > 0)
