"""plan searches context parallelism's exchange (cp_comm_type, cp_a2a_size) on cp > 1 candidates and the MoE
dispatch (moe_flex_dispatcher, moe_a2a_overlap) on MoE candidates with ep > 1 (docs/model.md#plan-exchanges).

The independent check: with every other axis pinned, plan's pick is the argmin of ``predict`` run by hand on each
exchange (predict's refusals skipped), and none of the plans it ranks is one predict refuses or prices otherwise."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from scalemodel.specs.constraints import normalize_constraints
from tests.grid_helpers import TINY_MOE

# every communication choice pinned to StrategySpec's defaults, so the by-hand predicts take the same
COMM = {"algorithm": "auto", "compression": "none", "overlap": True, "bucket": 0.0, "dp_comm": "allreduce",
        "assignment": "static"}


def _by_hand(cl, wl, gpus, tr, base: dict, choices: list[dict]) -> tuple[float, dict]:
    """The least step time predict gives over ``choices`` (each merged into ``base``), and that choice; a choice
    predict refuses (InputError) or finds infeasible is skipped."""
    best = (np.inf, {})
    for ch in choices:
        try:
            p = predict(cl, wl, gpus, tr, StrategySpec(**base, **ch))
        except InputError:
            continue
        if p.feasible and p.step_time_s < best[0]:
            best = (p.step_time_s, ch)
    return best


def _same_in_predict(cl, wl, gpus, tr, strategy: dict) -> float:
    """predict on a ranked plan's strategy dict (it must accept it): the step time."""
    keys = ("dp", "tp", "pp", "cp", "ep", "zero", "recompute", "sequence_parallel", "schedule", "layout",
            "cp_comm_type", "cp_a2a_size", "moe_flex_dispatcher", "moe_a2a_overlap", "moe_flex_backend")
    p = predict(cl, wl, gpus, TrainingSpec(global_batch=tr.global_batch, micro_batch=strategy["micro_batch"],
                                          seq_len=tr.seq_len, precision=tr.precision),
                StrategySpec(**{k: strategy[k] for k in keys}))
    assert p.feasible
    return p.step_time_s


def test_long_context_pick_is_predicts_argmin_over_the_exchanges():
    """llama2-13b cut to 4 layers at 32k tokens on 16 H100s, cp 8 (two nodes), every other axis pinned: plan's
    pick (and its step time) is the argmin of predict over p2p, all_gather, a2a and a2a+p2p with A = 2, 4."""
    cl, wl = load_cluster("dgx-h100"), load_workload("llama2-13b", ["layers=4"])
    tr = TrainingSpec(global_batch=2, micro_batch=1, seq_len=32768, precision="bf16")
    job = build_job(cl, wl, tr)
    base = dict(dp=2, tp=1, pp=1, cp=8, zero="1", recompute="selective", sequence_parallel=False)
    cons = {"dp": 2, "tp": 1, "pp": 1, "cp": 8, "micro_batch": 1, "zero": ("=", 1), "recompute": "selective",
            "sequence_parallel": False, **COMM}
    res = planner.search(job, 16, 2, top=10, constraints=cons, allow=("cp-exchanges",))
    choices = [dict(cp_comm_type=t) for t in ("p2p", "all_gather", "a2a")] + [
        dict(cp_comm_type="a2a+p2p", cp_a2a_size=a) for a in (2, 4)]
    want, pick = _by_hand(cl, wl, 16, tr, base, choices)
    best = res.ranked[0].strategy
    assert res.objective_values and best["cp_comm_type"] == pick["cp_comm_type"]
    assert best["cp_a2a_size"] == pick.get("cp_a2a_size", 1)
    assert res.ranked[0].step_time_s == pytest.approx(want, rel=1e-9)
    # 5 exchanges x 2 rank orders (which coincide here: one configuration's orders are its twins)
    seen = {(p.strategy["cp_comm_type"], p.strategy["cp_a2a_size"]) for p in res.ranked}
    assert seen <= {(c["cp_comm_type"], c.get("cp_a2a_size", 1)) for c in choices}
    for p in res.ranked:
        assert _same_in_predict(cl, wl, 16, tr, p.strategy) == pytest.approx(p.step_time_s, rel=1e-9)


def test_all_to_all_exchanges_only_where_te_runs_them():
    """40 heads: a2a at cp 16 needs 40 % 16 = 0 (no), a2a+p2p with A in {2, 4, 8} needs A | 40 (2, 4, 8 yes);
    cp 1 rows carry one exchange, and the degenerate hierarchies (A = 1, A = cp) are not searched."""
    cl, wl = load_cluster("dgx-h100"), load_workload("llama2-13b", ["layers=4"])
    job = build_job(cl, wl, TrainingSpec(global_batch=16, seq_len=32768))
    cfg = planner.configurations(job, 16, 16, normalize_constraints({"tp": 1, "pp": 1, "micro_batch": 1}),
                                 frozenset({"cp_comm_type"}))
    rows = {(int(c), int(t), int(a)) for c, t, a in zip(cfg["cp"], cfg["cp_comm_type"], cfg["cp_a2a_size"],
                                                         strict=True)}
    assert {r for r in rows if r[0] == 1} == {(1, 0, 1)}
    assert {r[1:] for r in rows if r[0] == 16} == {(0, 1), (1, 1), (3, 2), (3, 4), (3, 8)}
    assert {r[1:] for r in rows if r[0] == 8} == {(0, 1), (1, 1), (2, 1), (3, 2), (3, 4)}
    assert {r[1:] for r in rows if r[0] == 2} == {(0, 1), (1, 1), (2, 1)}


def test_all_gather_memory_is_the_p2p_memory_plus_the_gathered_bytes():
    """The planner prices memory once per row that differs in something else, adding all_gather's gathered K, V
    (planner._memory_rows): the step's own memory of the all_gather row says the same."""
    from msgspec.structs import replace

    from scalemodel.cost.compute import cp_gathered_bytes
    from scalemodel.engine.pipeline_ranks import microbatches
    from scalemodel.engine.stage_memory import memory_total

    cl, wl = load_cluster("dgx-h100"), load_workload("llama2-13b", ["layers=8"])
    job = build_job(cl, wl, TrainingSpec(global_batch=16, seq_len=16384))
    cfg = planner.configurations(job, 16, 16, normalize_constraints({"cp": [(">=", 2)], "cp_comm_type": "p2p"}))
    axes = planner._axes(job, {})
    g = planner._outer_grid(16, 16, cfg, 0, len(cfg["dp"]), axes, {}, {})
    g = replace(g, zero=axes["zero"].reshape(1, -1, 1, 1))
    p2p = np.broadcast_to(memory_total(job, g, microbatches(g)), g.shape)
    ag = replace(g, cp_comm_type=np.ones_like(g.cp_comm_type))
    full = np.broadcast_to(memory_total(job, ag, microbatches(ag)), g.shape)
    gathered = 2.0 * cfg["micro_batch"] * 16384 * (2 * 40 * 128) * 2.0 / cfg["tp"]  # 2 e b s KV / t, MHA: KV = 2 a d
    assert np.allclose(cp_gathered_bytes(job.shape, micro_batch=cfg["micro_batch"], seq_len=16384, tp=cfg["tp"],
                                         cp=cfg["cp"], cp_comm_type=1), gathered)
    assert np.allclose(full - p2p, gathered.reshape(-1, 1, 1, 1), rtol=1e-12)
    assert np.any(cfg["pp"] > 1) and np.any(cfg["tp"] > 1)


def test_moe_pick_is_predicts_argmin_over_the_dispatch_and_never_a_refused_one():
    """A 64-expert MoE on 16 H100s (two NVLink domains), ep 16: plan searches NCCL vs the flex dispatcher x the
    all-to-all overlap x recompute, and on the flex rows its backend (deepep, hybridep); its pick is predict's argmin
    over those by hand (the overlap with full recompute refused by predict, job._check_moe_a2a_overlap, and never
    ranked)."""
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=64, micro_batch=1, seq_len=4096, precision="bf16")
    job = build_job(cl, TINY_MOE, tr)
    cons = {"dp": 16, "tp": 1, "pp": 1, "cp": 1, "ep": 16, "micro_batch": 1, "zero": ("=", 1),
            "sequence_parallel": False, **COMM}
    res = planner.search(job, 16, 64, top=20, constraints=cons, allow=("moe-dispatch",))
    base = dict(dp=16, tp=1, pp=1, cp=1, ep=16, zero="1", sequence_parallel=False)
    choices = [dict(moe_flex_dispatcher=f, moe_a2a_overlap=o, recompute=r, moe_flex_backend=b)
               for f, o, r, b in itertools.product((False, True), (False, True), ("none", "selective", "full"),
                                                   ("deepep", "hybridep")) if f or b == "deepep"]
    want, pick = _by_hand(cl, TINY_MOE, 16, tr, base, choices)
    best = res.ranked[0].strategy
    assert {k: best[k] for k in pick} == pick
    assert res.ranked[0].step_time_s == pytest.approx(want, rel=1e-9)
    # (1 + 2 backends) x 2 x 3 less the three overlap + full pairs: 15 candidates, each ranked plan one predict
    # accepts and prices alike
    assert res.candidates_evaluated == 15
    for p in res.ranked:
        assert not (p.strategy["moe_a2a_overlap"] and p.strategy["recompute"] == "full")
        assert _same_in_predict(cl, TINY_MOE, 16, tr, p.strategy) == pytest.approx(p.step_time_s, rel=1e-9)
    # every dispatch was searched, each flex one with both backends (a backend within planner.NEAR of the shown one
    # is listed as one that did not matter)
    flags = {(p.strategy["moe_flex_dispatcher"], p.strategy["moe_a2a_overlap"], b)
             for p, same in zip(res.ranked, res.equivalents, strict=True)
             for b in same.get("moe_flex_backend", [p.strategy["moe_flex_backend"]])}
    assert len(flags) == 6


def test_dispatch_rows_only_where_they_apply():
    """ep 1 and a dense model: one row (the defaults); the overlap only without a pipeline or with interleaving."""
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, TrainingSpec(global_batch=32, seq_len=2048))
    cfg = planner.configurations(job, 16, 32, normalize_constraints({"cp": 1, "micro_batch": 1}),
                                 frozenset({"moe_flex_dispatcher", "moe_a2a_overlap"}))
    ep1 = cfg["ep"] == 1
    assert not np.any(cfg["moe_flex_dispatcher"][ep1]) and not np.any(cfg["moe_a2a_overlap"][ep1])
    blocked = (cfg["pp"] > 1) & (cfg["schedule"] != 1)
    assert not np.any(cfg["moe_a2a_overlap"] & blocked)
    assert np.any(cfg["moe_a2a_overlap"] & (cfg["pp"] > 1)) and np.any(cfg["moe_flex_dispatcher"] & blocked)
    dense = build_job(load_cluster("dgx-h100"), load_workload("gpt-1.7b"), TrainingSpec(global_batch=16))
    cfg_d = planner.configurations(dense, 16, 16, normalize_constraints({"cp": 1}),
                                   frozenset({"moe_flex_dispatcher", "moe_a2a_overlap"}))
    assert not np.any(cfg_d["moe_flex_dispatcher"]) and not np.any(cfg_d["moe_a2a_overlap"])
    assert len(cfg_d["dp"]) == len(planner.configurations(dense, 16, 16, normalize_constraints(
        {"cp": 1, "moe_flex_dispatcher": False, "moe_a2a_overlap": False}))["dp"])


def test_exchanges_and_dispatch_are_searched_only_when_asked():
    """Without --allow cp-exchanges / moe-dispatch (or a constraint naming them) every row keeps predict's defaults
    (p2p; NCCL all-to-all, exposed), so the default plan's space is the one before the exchanges were searchable;
    with them the cp > 1 and ep > 1 rows multiply."""
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, TrainingSpec(global_batch=32, seq_len=8192))
    plain = planner.configurations(job, 16, 32, normalize_constraints({"micro_batch": 1}))
    assert not np.any(plain["cp_comm_type"]) and not np.any(plain["moe_flex_dispatcher"])
    assert not np.any(plain["moe_a2a_overlap"])
    asked = planner.configurations(job, 16, 32, normalize_constraints({"micro_batch": 1}),
                                   frozenset({"cp_comm_type", "moe_flex_dispatcher", "moe_a2a_overlap"}))
    assert len(asked["dp"]) > len(plain["dp"])
    assert np.any(asked["cp_comm_type"]) and np.any(asked["moe_flex_dispatcher"]) and np.any(asked["moe_a2a_overlap"])
    pinned = planner.configurations(job, 16, 32, normalize_constraints({"micro_batch": 1, "cp_comm_type": "a2a"}))
    assert set(pinned["cp_comm_type"][pinned["cp"] > 1].tolist()) == {2}


# --------------------------------------------------------------------------------------------
# pins and bad pins (CLI)


def _plan(cli, *args: str):
    return cli("plan", "--cluster", "dgx-h100", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "16",
               "--seq-len", "16384", "--set", "model.position_embeddings=16384",  # gpt-1.7b's table is 2048 rows
               "--top", "3", "--constraint", "cp>=2,pp=1", *args, "--json")


@pytest.mark.parametrize("sets,check", [
    (["strategy.cp_comm_type=a2a"], lambda s: s["cp_comm_type"] == "a2a"),
    (["strategy.cp_comm_type=all_gather"], lambda s: s["cp_comm_type"] == "all_gather"),
    (["strategy.cp_comm_type=a2a+p2p", "strategy.cp_a2a_size=2"],
     lambda s: s["cp_comm_type"] == "a2a+p2p" and s["cp_a2a_size"] == 2),
])
def test_set_pins_the_exchange_axis(cli, sets, check):
    r = _plan(cli, *[x for s in sets for x in ("--set", s)])
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["ranked"]
    assert all(check(e["strategy"]) for e in doc["ranked"]), [e["strategy"]["cp_comm_type"] for e in doc["ranked"]]


def test_constraint_key_restricts_the_exchange(cli):
    r = _plan(cli, "--constraint", "cp_comm_type!=p2p")
    assert r.code == 0, r.err
    assert all(e["strategy"]["cp_comm_type"] != "p2p" for e in json.loads(r.out)["ranked"])


@pytest.mark.parametrize("args,words", [
    (["--set", "strategy.cp_comm_type=ring2"], "cp_comm_type"),
    (["--constraint", "cp_comm_type=ring2"], "cp_comm_type"),
    (["--constraint", "cp_comm_type<=a2a"], "cp_comm_type"),
    (["--constraint", "moe_a2a_overlap=maybe"], "moe_a2a_overlap"),
    (["--set", "strategy.moe_a2a_overlap=true", "--set", "strategy.recompute=full"], "full recompute"),
    (["--set", "strategy.cp_a2a_size=0"], "cp_a2a_size"),
])
def test_bad_pins_exit_2_with_a_clear_line(cli, args, words):
    r = _plan(cli, *args)
    assert r.code == 2, (r.out, r.err)
    assert words in r.err and "Traceback" not in r.err
