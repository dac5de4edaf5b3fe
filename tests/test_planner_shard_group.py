"""A pinned HSDP shard group (--set strategy.shard_group=N) in the planner, against brute force and predict.

The brute force evaluates every candidate of the space in one flat grid with the pinned field set on every
candidate (``evaluate`` flags hsdp_group_invalid where N does not divide dp); the planner prices pass 1a's
feasibility before the ZeRO axis is applied, so it must still see HSDP's group check.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from scalemodel.choices import Layout, Zero
from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.step import REASON_KEYS, Infeasible, evaluate
from scalemodel.specs import TrainingSpec, constraints, load_cluster, load_workload


def _job(cluster: str, model: str, layers: int, batch: int, seq_len: int = 1024):
    cl = load_cluster(cluster, [])
    wl = load_workload(model, [f"layers={layers}"])
    return build_job(cl, wl, TrainingSpec(global_batch=batch, seq_len=seq_len))


def _brute(job, gpus, batch, cons, fixed, sync_modes=("bsp",), allow=()):
    """(best throughput objective, candidates, feasible, Counter of infeasible reasons) over the whole space,
    every candidate evaluated at once with ``fixed`` on each (one rank order: the default)."""
    c = constraints.normalize_constraints(cons)
    # the configurations ``allow`` opens too (offload35: --allow all's offload_states column)
    cfg = planner.configurations(job, gpus, batch, c, frozenset(k for a in allow for k in planner.ALLOW[a]))
    axes = planner._axes(job, c)
    ch = planner.comm_choices(job, gpus, c, frozenset(k for a in allow for k in planner.ALLOW[a]))
    best, n, n_ok, why = np.inf, 0, 0, Counter()
    for sync in sync_modes:
        cf = planner._for_sync(cfg, sync)
        if not len(cf["dp"]):
            continue
        g = planner.grid_from_arrays(
            gpus=gpus, global_batch=batch, **{k: v.reshape(-1, 1, 1, 1, 1) for k, v in cf.items()}, **fixed,
            zero=axes["zero"].reshape(1, -1, 1, 1, 1), recompute=axes["recompute"].reshape(1, 1, -1, 1, 1),
            sequence_parallel=axes["sequence_parallel"].reshape(1, 1, 1, -1, 1),
            **{f: ch[f].reshape(1, 1, 1, 1, -1) for f in planner.COMM_FIELDS})
        r = evaluate(job, g, sync=sync)
        valid = ~np.broadcast_to(g.sequence_parallel & (g.tp == 1), g.shape)
        ok = np.asarray(r.feasible) & valid
        n += int(valid.sum())
        n_ok += int(ok.sum())
        reason = np.broadcast_to(np.asarray(r.reason), g.shape)
        why.update(REASON_KEYS[int(x)] for x in reason[valid & ~ok])
        best = min(best, float(np.where(ok, planner._score("throughput", job, gpus, r), np.inf).min()))
    return best, n, n_ok, why


# 16 GPUs, so dp takes 1, 2, 4, 8, 16: a shard group of 4 divides dp = 4, 8, 16 and not dp = 1, 2
CASES = [
    ("dgx-a100-40g", "llama2-13b", 4, 16, 32, 4),
    ("dgx-a100", "gpt-1.7b", 4, 16, 32, 4),
    ("dgx-h100", "gpt-1.7b", 6, 16, 16, 8),
]


@pytest.mark.parametrize("cluster,model,layers,gpus,batch,shard", CASES)
def test_pinned_shard_group_counts_and_best_equal_brute_force(cluster, model, layers, gpus, batch, shard):
    job = _job(cluster, model, layers, batch)
    cons = {"cp": [("=", 1)], "layout": [("=", int(Layout.TP_CP_DP_PP))], "recompute": [("!=", "selective")],
            "zero": [("!=", 1), ("!=", 2)]}
    fixed = {"shard_group": shard}
    expect, n, n_ok, why = _brute(job, gpus, batch, cons, fixed)
    assert why["hsdp_group_invalid"] > 0  # the pinned group leaves some dp out, as intended
    res = planner.search(job, gpus, batch, top=3, constraints=cons, fixed=fixed)
    assert res.candidates_evaluated == n
    assert res.feasible == n_ok
    assert {k: v for k, v in res.infeasible_by_reason.items() if v} == dict(why)
    assert np.isfinite(expect) and res.objective_values[0] == pytest.approx(expect, rel=1e-12)
    for p in res.ranked:
        if p.strategy["zero"] == "hsdp":
            assert p.strategy["dp"] % shard == 0, p.strategy


# hier:G shards HSDP inside its groups of G replicas (dp_comm.hier_group); predict refuses any other pinned group
HIER_CASES = [
    ("dgx-a100", "gpt-1.7b", 4, 16, 32, 4, ("bsp", "hier:2"), ()),
    ("dgx-a100-40g", "llama2-13b", 4, 16, 32, 2, ("hier:2", "hier:4"), ("all",)),
]


@pytest.mark.parametrize("cluster,model,layers,gpus,batch,shard,modes,allow", HIER_CASES)
def test_pinned_shard_group_under_hier_equals_brute_force(cluster, model, layers, gpus, batch, shard, modes, allow):
    job = _job(cluster, model, layers, batch)
    cons = {"cp": [("=", 1)], "layout": [("=", int(Layout.TP_CP_DP_PP))], "recompute": [("!=", "selective")],
            "zero": [("!=", 1), ("!=", 2)]}
    fixed = {"shard_group": shard}
    expect, n, n_ok, why = _brute(job, gpus, batch, cons, fixed, modes, allow)
    res = planner.search(job, gpus, batch, top=5, constraints=cons, fixed=fixed, sync_modes=modes, allow=allow)
    assert res.candidates_evaluated == n
    assert res.feasible == n_ok
    assert {k: v for k, v in res.infeasible_by_reason.items() if v} == dict(why)
    assert np.isfinite(expect) and res.objective_values[0] == pytest.approx(expect, rel=1e-12)
    for p in res.ranked:
        sync = p.strategy.get("sync", "bsp")
        if p.strategy["zero"] == "hsdp" and sync.startswith("hier:"):
            assert int(sync.split(":")[1]) == shard, p.strategy


def test_hier_refuses_every_hsdp_group_but_its_own():
    """Independently of the planner: evaluate flags HSDP under hier:2 with a pinned group of 4 on every dp
    (hier:2 runs only where 2 divides dp, and its groups hold 2 replicas), and keeps a group of 2."""
    job = _job("dgx-a100", "gpt-1.7b", 4, 32)
    for dp in (2, 4, 8, 16):
        for shard, ok in ((4, False), (2, True)):
            g = planner.grid_from_arrays(gpus=dp, global_batch=32, dp=dp, tp=1, pp=1, micro_batch=32 // dp,
                                         zero=int(Zero.HSDP), shard_group=shard)
            r = evaluate(job, g, sync="hier:2")
            reason = int(np.asarray(r.reason).reshape(-1)[0])
            assert (reason != Infeasible.HSDP_GROUP_INVALID) == ok, (dp, shard, reason)


def test_plan_and_predict_agree_on_a_pinned_shard_group_under_hier(cli):
    base = ["--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "32",
            "--set", "strategy.shard_group=4", "--set", "strategy.zero=hsdp"]
    r = cli("predict", *base, "--tp", "1", "--pp", "1", "--sync", "hier:2")
    assert r.code == 2 and r.err.startswith("error: --set strategy.shard_group:"), r.err
    r = cli("plan", *base, "--sync-modes", "bsp,hier:2", "--top", "20", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["ranked"] and all(e["strategy"].get("sync", "bsp") == "bsp" for e in doc["ranked"])
    r = cli("plan", *base, "--sync-modes", "hier:2", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["ranked"] == [] and doc["feasible"] == 0


def test_no_feasible_summary_under_hier_names_predicts_reason(cli):
    """hier:2 with HSDP pinned to a shard group of 4: predict refuses every such strategy for the shard group
    alone (strategy.shard_group: the hier group is the shard group), before any other check. The plan's
    no-feasible summary must give that reason for every candidate, in words that say why (4 divides every dp
    hier:2 runs at, so "must divide the data-parallel degree" alone would name the wrong rule)."""
    base = ["--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "32",
            "--set", "strategy.shard_group=4", "--set", "strategy.zero=hsdp"]
    # predict, on a strategy the planner counts (interleaved with v = 3 on pp = 2 is invalid in itself too)
    r = cli("predict", *base, "--tp", "1", "--pp", "2", "--schedule", "interleaved:3", "--sync", "hier:2")
    assert r.code == 2 and r.err.startswith("error: --set strategy.shard_group:") and "hier" in r.err, r.err
    r = cli("plan", *base, "--sync-modes", "hier:2", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["feasible"] == 0 and doc["candidates_evaluated"] > 0
    assert doc["infeasible_by_reason"] == {"hsdp_group_invalid": doc["candidates_evaluated"]}
    text = " ".join(cli("plan", *base, "--sync-modes", "hier:2").out.split())
    assert "hier:G" in text and "hsdp_group_invalid" in text
