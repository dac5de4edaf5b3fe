"""A hybrid pattern's pipeline ranks on their own kinds, where the even split of the mean layer is not what Megatron
runs (docs/model.md#uneven-stages, "Hybrid segments" and "Without '|'").

Without '|', Megatron-LM splits the pattern's characters by count (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/models/hybrid/hybrid_layer_allocation.py select_pipeline_segment, lines 385-456): rank r holds its own
run of characters, so a pattern whose MoE layers bunch up gives one rank more of them than the mean. The expected
splits below are Megatron's own unit tests of that code (tests/unit_tests/ssm/test_hybrid_layer_allocation.py
TestSelectPipelineSegmentLegacyFallback at d98e8a64dd). A pipe-free pattern split by count is the same ranks as the
pattern with '|' at the rank boundaries, which tests/test_hybrid_segment_ranks.py checks layer by layer.

The data-parallel sync and the optimizer step are the rank's with the most parameters, on its own parameters,
counted by hand here (each layer's parameters from cost.transformer's per-kind formulas; the word embedding on rank
0, the final norm and the untied output layer on the last rank, where Megatron-Core builds them). The planner's
floors stay below the evaluated step on random patterns (property), and an empty segment, which Megatron allows
("Empty segments are allowed for pipeline balancing", test_empty_segment), is a rank without layers.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from msgspec.structs import replace

import scalemodel
from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.choices import ScheduleKind
from scalemodel.cost import transformer
from scalemodel.engine import pipeline_ranks, stage_memory, step
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy

GB, GPUS = 64, 16
BASE = dict(kind="transformer", name="ranks", hidden=1024, heads=8, kv_heads=4, ffn_hidden=2048, vocab=32000,
            seq_len=2048, gated_mlp=True, dropout=False, moe={"experts": 32, "top_k": 4, "ffn_hidden": 1024})
MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}


def _hybrid(pattern: str) -> dict:  # type: ignore[type-arg]
    """The hybrid block: the Mamba-2 widths only where the pattern has M layers (refused without one)."""
    return {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}


def _model(pattern: str) -> dict:
    base = BASE if "E" in pattern else {k: v for k, v in BASE.items() if k != "moe"}
    return dict(base, layers=len(pattern.replace("|", "")), hybrid=_hybrid(pattern))


def _job_grid(pattern: str, gpus: int = GPUS, **strategy):
    training = training_spec(global_batch=GB, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(_model(pattern)), training)
    return job, grid_from_strategy(strategy_spec(**strategy), training, gpus, job)


def _f(x) -> float:
    return float(np.ravel(x)[0])


# --- Megatron's split by count of a pattern without '|' -------------------------------------------------------------

@pytest.mark.parametrize("pattern,p,first,last,expected", [
    ("M*M-", 2, -1, -1, ["M*", "M-"]),  # test_even_split_2_ranks
    ("M*M*M*M*", 4, -1, -1, ["M*"] * 4),  # test_even_split_4_ranks: 2 each, offsets 0, 2, 4, 6
    ("M*M*M*", 4, 3, -1, ["M*M", "*", "M", "*"]),  # test_uneven_pp_first_stage: 3, then 1 each (offsets 3, 5)
    ("M*M*M*", 4, -1, 3, ["M", "*", "M", "*M*"]),  # test_uneven_pp_last_stage: 1 each, the last 3 (offset 3)
    ("M*M*M*M*", 4, 1, 1, ["M", "*M*", "M*M", "*"]),  # test_uneven_pp_first_and_last: offsets 0, 1, 4, 7
    ("M*M*M*", 3, -1, -1, ["M*", "M*", "M*"]),  # test_all_ranks_cover_full_pattern
])
def test_the_split_by_count_is_megatrons(pattern, p, first, last, expected):
    assert pipeline_ranks._pipe_free_ranks(pattern, p, first, last) == expected


def test_the_splits_megatron_refuses_are_not_priced_from():
    assert pipeline_ranks._pipe_free_ranks("M*M*M*M*M", 4, 2, -1) is None  # test_uneven_pp_middle_not_divisible_raises
    # no middle layer for the middle rank (TransformerConfig)
    assert pipeline_ranks._pipe_free_ranks("EEMM", 3, 2, 2) is None
    # L not divisible by pp Megatron refuses for a hybrid, as it does for every model; the balanced split every model
    # is priced with then (pipeline_ranks._stage_layers): the first L mod p ranks one layer more
    assert pipeline_ranks._pipe_free_ranks("M*M*M*", 4, -1, -1) == ["M*", "M*", "M", "*"]


@pytest.mark.parametrize("flat,piped,kw", [
    ("EEEEMMMM", "EEEE|MMMM", dict(pp=2)),
    ("MMMMEEEE", "MMMM|EEEE", dict(pp=2)),
    ("EEEMMMMM", "EEE|MMMMM", dict(pp=2, first_stage_layers=3)),
    ("MM*EEE--EE", "MM|*EEE|--EE", dict(pp=3, first_stage_layers=2, last_stage_layers=4)),
    ("E*EEM-MM", "E*|EE|M-|MM", dict(pp=4)),
])
def test_a_pattern_without_pipes_is_priced_as_its_ranks(flat, piped, kw):
    """Without '|' each rank holds its own characters (split by count, first / last stage layers as given): the same
    ranks as the pattern with '|' at their boundaries, so the same step, parts and memory to rounding; the mean layer
    (every rank the pattern's shares) prices it otherwise."""
    gpus = 4 * kw["pp"]
    common = dict(global_batch=GB, micro_batch=1, ep=2, moe_layer_host_s=2e-4)
    a = scalemodel.predict("dgx-h100", _model(flat), gpus, **common, **kw)
    b = scalemodel.predict("dgx-h100", _model(piped), gpus, **common, pp=kw["pp"])
    assert a.feasible and b.feasible, (a.infeasible_reason, b.infeasible_reason)
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
    for part, t in b.breakdown_s.items():
        assert a.breakdown_s[part] == pytest.approx(t, rel=1e-12, abs=1e-15), part
    assert a.memory["per_gpu_bytes"] == pytest.approx(b.memory["per_gpu_bytes"], rel=1e-12)


@pytest.mark.parametrize("pattern,pp", [("MEMEMEME", 2), ("MEMEMEME", 4), ("M*-E" * 4, 4), ("MMMMM", 2),
                                        ("*-*-*-", 3)])
def test_ranks_of_the_patterns_shares_keep_the_even_split(pattern, pp):
    """Every rank of the pattern's own kinds and MoE intervals (lengths may differ): no split is priced apart, the
    even split of the mean layer is the step as before, to the bit."""
    job, g = _job_grid(pattern, gpus=4 * pp, pp=pp, ep=1)
    assert pipeline_ranks._rank_layers(job, g) == []


def test_a_bunched_pattern_moves_its_moe_rank():
    """7 of the 8 E layers in the first half: at pp 2 rank 0 holds them and is the busiest, its EP traffic 7 E layers'
    (one E layer's from an all-E pattern at the same pp), not the mean layer's 4."""
    pattern = "EEEEEEEM" + "MMMMMMME"
    r = scalemodel.predict("dgx-h100", _model(pattern), GPUS, global_batch=GB, micro_batch=1, pp=2, ep=4)
    one = scalemodel.predict("dgx-h100", _model("E" * 16), GPUS, global_batch=GB, micro_batch=1, pp=2, ep=4)
    m = GB // (GPUS // 2)
    per_layer = one.breakdown_s["ep_comm"] / (m * 8)
    assert r.breakdown_s["ep_comm"] == pytest.approx(m * 7 * per_layer, rel=1e-9)


# --- the data-parallel sync and the optimizer step of the rank with the most parameters ----------------------------

def _rank_params(job, layers: str, ep: int, where: str) -> float:
    """One GPU's parameters of a rank of ``layers`` (tp 1) as the data-parallel sync counts them: each layer's own, the
    word embedding V h on the first rank (``where`` "first"), the untied output layer V h and the final norm h on the
    last ("last"), neither on a middle rank ("mid")."""
    sh = job.shape
    norm = float(transformer.norm_params(sh))
    per = {"M": norm + float(transformer.mamba_params(sh)), "*": norm + float(transformer.attention_params(sh)),
           "-": norm + float(transformer.mlp_params(sh)),
           "E": norm + float(sh.hidden * sh.moe_experts) + float(sh.moe_experts * transformer.expert_params(sh)) / ep}
    outside = {"first": float(sh.vocab * sh.hidden), "last": float(sh.vocab * sh.hidden) + float(sh.hidden),
               "mid": 0.0}[where]
    return sum(per[ch] for ch in layers) + outside


@pytest.mark.parametrize("pattern,kw,heavy,where", [("EEEE|MMMM", dict(pp=2), "EEEE", "first"),
                                                    ("MMMMEEEE", dict(pp=2), "EEEE", "last"),
                                                    ("E*|EE|M-|MM", dict(pp=4), "EE", "mid"),
                                                    ("EEEMMMMM", dict(pp=2, first_stage_layers=3), "EEE", "first")])
def test_the_optimizer_steps_the_heavy_ranks_own_parameters(pattern, kw, heavy, where):
    """ZeRO 0: the optimizer step reads and writes (2 K + g + 6) bytes per parameter of the rank with the most
    parameters (here the MoE rank: every routed expert of its E layers), by hand; the mean layer's share is less."""
    ep = 2
    job, g = _job_grid(pattern, ep=ep, **kw)
    res = step.evaluate(job, g)
    assert bool(res.feasible[0]), int(res.reason[0])
    per_param = 2.0 * job.optimizer_bytes_per_param + job.grad_bytes + 6.0
    expected = _rank_params(job, heavy, ep, where) * per_param / (job.memory_bandwidth * job.memory_efficiency)
    assert _f(res.breakdown["optimizer"]) == pytest.approx(expected, rel=1e-12)
    mean = float(job.params - job.expert_params + job.expert_params / ep) / kw["pp"]
    assert _f(res.breakdown["optimizer"]) > mean * per_param / (job.memory_bandwidth * job.memory_efficiency)


@pytest.mark.parametrize("zero", ["0", "1", "3"])
def test_the_heavy_ranks_gradients_are_an_all_moe_ranks(zero):
    """The MoE rank of "MMMM|EEEE" at pp 2 (the last) holds 4 E layers, the final norm and the output layer, as the
    last rank of the all-E pattern "EEEEEEEE" (the even split, every rank the pattern's shares) does, and runs the same
    compute: the same data-parallel traffic (every gradient bucket, the ZeRO gathers) and optimizer step; the mean
    layer of "EMEMEMEM" gives less."""
    kw = dict(pp=2, ep=2, zero=zero)
    job, g = _job_grid("MMMM|EEEE", **kw)
    job_e, g_e = _job_grid("EEEEEEEE", **kw)
    job_m, g_m = _job_grid("EMEMEMEM", **kw)
    res, res_e, res_m = step.evaluate(job, g), step.evaluate(job_e, g_e), step.evaluate(job_m, g_m)
    for key in ("dp_comm_total",):
        assert _f(res.extras[key]) == pytest.approx(_f(res_e.extras[key]), rel=1e-12)
        assert _f(res.extras[key]) > _f(res_m.extras[key])
    assert _f(res.breakdown["optimizer"]) == pytest.approx(_f(res_e.breakdown["optimizer"]), rel=1e-12)
    assert _f(res.breakdown["optimizer"]) > _f(res_m.breakdown["optimizer"])


def test_the_dp_rank_is_the_one_with_the_most_parameters_and_the_last_on_a_tie():
    job, g = _job_grid("EEEE|MMMM", pp=2, ep=2)
    picks = pipeline_ranks._dp_ranks(job, g, pipeline_ranks._rank_layers(job, g))
    assert [(sp.ranks[r], bool(np.all(on))) for on, sp, r in picks] == [("EEEE", True)]
    job, g = _job_grid("MMMM|EEEE", pp=2, ep=2)
    splits = pipeline_ranks._rank_layers(job, g)
    assert [sp.ranks[r] for _on, sp, r in pipeline_ranks._dp_ranks(job, g, splits)] == ["EEEE"]
    job, g = _job_grid("ME|EM", pp=2, ep=2)  # the same layers: the last rank (its final norm h outweighs nothing
    # else: V h on either end)
    assert [r for _on, _sp, r in pipeline_ranks._dp_ranks(job, g, pipeline_ranks._rank_layers(job, g))] == [1]


# --- empty segments --------------------------------------------------------------------------------------------------

def test_an_empty_segment_is_a_rank_without_layers():
    """Megatron builds an empty segment's rank with no layer (select_pipeline_segment: validate_segment_layers('')
    is []; "Empty segments are allowed for pipeline balancing"): "EE||MM" at pp 3 is priced, rank 1 a stage of no
    layer (its send/recvs), the busiest rank's compute and EP traffic that of "EE|MM" at pp 2 with the same dp (the
    same two ranks of layers), and neither the DP nor the memory peak rank is the empty one."""
    a = scalemodel.predict("dgx-h100", _model("EE||MM"), 12, global_batch=48, micro_batch=1, pp=3, ep=2)
    b = scalemodel.predict("dgx-h100", _model("EE|MM"), 8, global_batch=48, micro_batch=1, pp=2, ep=2)
    assert a.feasible, a.infeasible_reason
    for part in ("compute", "ep_comm", "optimizer"):
        assert a.breakdown_s[part] == pytest.approx(b.breakdown_s[part], rel=1e-12), part
    job, g = _job_grid("EE||MM", gpus=12, pp=3, ep=2)
    groups = step.parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                                  layout=g.layout)
    memo = step._stage_memo(job, g, groups)
    [(sp, ranks)] = step._segment_rank_stages(job, g, memo)
    assert sp.ranks == ["EE", "", "MM"]
    assert _f(ranks[1].time) == _f(step._stage(job, g, groups, np.zeros(1), False).time)
    assert _f(ranks[1].time) < min(_f(ranks[0].time), _f(ranks[2].time))
    assert [r for _on, _sp, r in pipeline_ranks._dp_ranks(job, g, [sp])] == [0]
    assert int(_f(stage_memory.memory_peak_stage(job, g, pipeline_ranks.microbatches(g)).rank)) != 1


def test_a_pattern_of_empty_segments_only_is_refused():
    from scalemodel.cost.mamba import layer_counts
    with pytest.raises(scalemodel.InputError, match="no layer"):
        layer_counts("||")


# --- the planner's floors --------------------------------------------------------------------------------------------

def _random_cases(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pp = rng.choice([2, 4])
        if i % 2:  # '|' segments, some empty, v = 1 or 2
            v = rng.choice([1, 2])
            pattern = "|".join("".join(rng.choice("ME*-E") for _ in range(rng.randint(0 if j % 3 else 1, 4)))
                               for j in range(pp * v))
            sched = "1f1b" if v == 1 else f"interleaved:{v}"
            kw = {}
        else:  # split by count, MoE layers bunched
            size = pp * rng.randint(2, 4) + rng.choice([0, 0, 1])
            pattern = "".join(sorted(rng.choice("MEE*-") for _ in range(size)))
            sched = rng.choice(["1f1b", "gpipe", "zb"])
            kw = dict(first_stage_layers=1) if rng.random() < 0.3 and (size - 1) % (pp - 1) == 0 else {}
        if "E" not in pattern:
            pattern = "E" + pattern
        out.append((pattern, pp, sched, kw))
    return out


@pytest.mark.parametrize("pattern,pp,schedule,kw", _random_cases(10, 16))
def test_floors_stay_below_the_evaluated_step(pattern, pp, schedule, kw):
    """Property (the planner prunes on them): over ZeRO 0 / 1 / 3 / FSDP, recompute none / full, dp 2 and 4, with and
    without overlap, compute_floor <= the pipelined part (m + bubble) t_mb and dp_exposed_floor <= the exposed dp
    traffic of the candidate evaluated, so (the optimizer, the rest >= 0) floor <= step."""
    job, _ = _job_grid(pattern, gpus=pp * 2, pp=pp, ep=2, schedule=schedule, **kw)
    dp = np.array([2, 4]).reshape(2, 1, 1)
    zero = np.array([0, 1, 3, 4]).reshape(1, 4, 1)
    rec = np.array([0, 2]).reshape(1, 1, 2)
    v = int(schedule.split(":")[1]) if schedule.startswith("interleaved") else 1
    sched = {"1f1b": ScheduleKind.ONE_F_ONE_B, "gpipe": ScheduleKind.GPIPE, "zb": ScheduleKind.ZERO_BUBBLE}.get(
        schedule, ScheduleKind.INTERLEAVED)
    g = grid_from_arrays(gpus=dp * pp, dp=dp, tp=1, pp=pp, ep=2, micro_batch=1, global_batch=GB, zero=zero,
                         recompute=rec, schedule=int(sched), virtual_stages=v, moe_layer_host_s=1e-4,
                         first_stage_layers=kw.get("first_stage_layers", -1))
    for overlap in (True, False):
        gg = replace(g, overlap=np.asarray(overlap))
        res = step.evaluate(job, gg)
        assert np.all(np.asarray(res.feasible)), (pattern, np.unique(np.asarray(res.reason)))
        pipelined = np.asarray((res.microbatches + res.extras["bubble_microbatches"]) * res.extras["microbatch_time"])
        cf = np.broadcast_to(step.compute_floor(job, gg), pipelined.shape)
        assert np.all(cf <= pipelined * (1 + 1e-12)), float(np.max(cf - pipelined))
        df = np.broadcast_to(step.dp_exposed_floor(job, gg), pipelined.shape)
        dp_part = np.asarray(res.breakdown["dp_comm"])
        assert np.all(df <= dp_part * (1 + 1e-12)), float(np.max(df - dp_part))
        z3 = np.broadcast_to(gg.zero >= 3, df.shape)
        assert np.all(df[z3] > 0) and np.all(df[~z3] == 0)  # not vacuous
        assert np.all(cf + df <= np.asarray(res.step_time) * (1 + 1e-12))


def test_the_planner_finds_the_brute_force_best_of_a_bunched_pattern():
    """The decomposed search (its floors, tests/test_planner.py) finds the brute-force best for a pattern whose MoE
    layers bunch in one half, pipe-free and with '|' (each rank its own kinds)."""
    from test_planner import _brute_force_best

    from scalemodel.engine import planner
    for pattern in ("MM*MEEEE", "MM*M|EEEE"):
        training = training_spec(global_batch=32, micro_batch=1)
        job = build_job(cluster_spec("dgx-h100"), workload_spec(_model(pattern)), training)
        cons = {"cp": [("=", 1)], "tp": [("<=", 2)]}
        expect, n = _brute_force_best(job, 8, 32, cons)
        res = planner.search(job, 8, 32, top=3, constraints=cons)
        assert res.candidates_evaluated == n
        assert np.isfinite(expect)
        assert res.objective_values[0] == pytest.approx(expect, rel=1e-12)


def test_a_grid_of_several_splits_prices_each_row_as_alone():
    """The planner's unit of work: one grid whose rows (first axis) run different splits of a pattern without '|'
    (pp 1, 2, 4, and pp 2 with 3 first-stage layers) and ZeRO / recompute on the other axes. Each split's ranks are
    priced on its own rows (pipeline_ranks._split_rows); every candidate is what it is alone: step, memory and both
    floors."""
    pattern = "EEEMMMM*EE-M"
    job, _ = _job_grid(pattern, pp=2, ep=2)
    pp = np.array([1, 2, 4, 2]).reshape(4, 1, 1)
    first = np.array([-1, -1, -1, 3]).reshape(4, 1, 1)
    zero = np.array([0, 3]).reshape(1, 2, 1)
    rec = np.array([0, 2]).reshape(1, 1, 2)
    g = grid_from_arrays(gpus=GPUS, dp=GPUS // pp, tp=1, pp=pp, ep=2, micro_batch=1, global_batch=GB,
                         first_stage_layers=first, zero=zero, recompute=rec)
    assert [len(x.rows) for x in pipeline_ranks._split_rows(job, g)] == [1, 1, 1, 1]
    res = step.evaluate(job, g)
    cf, df = step.compute_floor(job, g), step.dp_exposed_floor(job, g)
    for i in range(4):
        for j, z in enumerate(("0", "3")):
            for k, recompute in enumerate(("none", "full")):
                kw = dict(first_stage_layers=3) if i == 3 else {}
                one_job, one = _job_grid(pattern, pp=int(pp[i, 0, 0]), ep=2, zero=z, recompute=recompute, **kw)
                alone = step.evaluate(one_job, one)
                assert bool(alone.feasible[0]) == bool(np.asarray(res.feasible)[i, j, k])
                assert _f(alone.step_time) == pytest.approx(float(np.asarray(res.step_time)[i, j, k]), rel=1e-12)
                for part, v in alone.breakdown.items():
                    assert _f(v) == pytest.approx(float(np.asarray(res.breakdown[part])[i, j, k]), rel=1e-12,
                                                  abs=1e-15), part
                assert _f(alone.memory["total"]) == pytest.approx(float(np.asarray(res.memory["total"])[i, j, k]),
                                                                  rel=1e-12)
                assert _f(step.compute_floor(one_job, one)) == pytest.approx(
                    float(np.broadcast_to(cf, g.shape)[i, j, k]), rel=1e-12)
                assert _f(step.dp_exposed_floor(one_job, one)) == pytest.approx(
                    float(np.broadcast_to(df, g.shape)[i, j, k]), rel=1e-12, abs=1e-15)
