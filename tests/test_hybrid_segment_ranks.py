"""A hybrid pattern's '|' segments: each pipeline rank's memory, EP traffic and host intervals from its own layer
kinds (docs/model.md#uneven-stages, "Hybrid segments"), not the pattern's mean layer x the rank's share. Megatron-LM
gives pipeline rank r, virtual stage c the segment c pp + r (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/models/hybrid/hybrid_layer_allocation.py select_pipeline_segment, lines 466-467), so a rank holding
all the E layers holds all the routed experts and runs all the all-to-alls.

The expected values are counted by hand, layer by layer: each layer's parameters from cost.transformer's per-kind
formulas (an E layer its norm, router and E / ep routed experts; an M layer its norm and Mamba mixer; rank 0 the
word embedding, the last rank the final norm and the untied output layer), each E layer's four all-to-alls
(dispatch and combine, forward and backward) of one size, and each E layer's host interval H when the host binds.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import scalemodel
from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.choices import ScheduleKind
from scalemodel.cost import pipeline, transformer
from scalemodel.engine import pipeline_ranks, stage_memory, step
from scalemodel.engine.job import build_job, grid_from_strategy

GB, GPUS = 64, 16
BASE = dict(kind="transformer", name="ranks", hidden=1024, heads=8, kv_heads=4, ffn_hidden=2048, vocab=32000,
            seq_len=2048, gated_mlp=True, dropout=False, moe={"experts": 32, "top_k": 4, "ffn_hidden": 1024})
MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}


def _hybrid(pattern: str) -> dict:  # type: ignore[type-arg]
    """The hybrid block: the Mamba-2 widths only where the pattern has M layers (refused without one)."""
    return {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}


def _model(pattern: str) -> dict:
    return dict(BASE, layers=len(pattern.replace("|", "")), hybrid=_hybrid(pattern))


def _job_grid(pattern: str, **strategy):
    training = training_spec(global_batch=GB, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(_model(pattern)), training)
    return job, grid_from_strategy(strategy_spec(**strategy), training, GPUS, job)


def _ranks(pattern: str, pp: int) -> list[str]:
    segs = pattern.split("|")
    return ["".join(segs[c * pp + r] for c in range(len(segs) // pp)) for r in range(pp)]


def _rank_params(job, layers: str, r: int, pp: int, ep: int) -> float:
    """One GPU's parameters of rank r (tp 1), layer by layer."""
    sh = job.shape
    norm = float(transformer.norm_params(sh))
    per = {"M": norm + float(transformer.mamba_params(sh)), "*": norm + float(transformer.attention_params(sh)),
           "-": norm + float(transformer.mlp_params(sh)),
           "E": norm + float(sh.hidden * sh.moe_experts) + float(sh.moe_experts * transformer.expert_params(sh)) / ep}
    word = float(sh.vocab * sh.hidden)
    return sum(per[ch] for ch in layers) + (word if r == 0 else 0.0) + (float(sh.hidden) + word if r == pp - 1
                                                                         else 0.0)


def _f(x) -> float:
    return float(np.ravel(x)[0])


def _state_bytes(job) -> float:
    """Weights, gradients and optimizer states per parameter (ZeRO 0)."""
    return float(job.elem_bytes + job.grad_bytes + job.optimizer_bytes_per_param)


@pytest.mark.parametrize("pattern,pp,schedule", [("EEEE|MMMM", 2, "1f1b"), ("MMMM|EEEE", 2, "1f1b"),
                                                 ("EEEE|MMMM|EEEE|MMMM", 2, "interleaved:2"),
                                                 ("MM|EE|MM|EE", 2, "interleaved:2")])
def test_the_peak_rank_holds_its_own_layers_parameters(pattern, pp, schedule):
    """The peak stage's parameters are its own layers' (the MoE rank: every routed expert; the Mamba rank: none),
    and its model states alone are within the peak."""
    ep = 4
    job, g = _job_grid(pattern, pp=pp, ep=ep, schedule=schedule)
    peak = stage_memory.memory_peak_stage(job, g, pipeline_ranks.microbatches(g))
    r = int(_f(peak.rank))
    ranks = _ranks(pattern, pp)
    assert _f(peak.params) == pytest.approx(_rank_params(job, ranks[r], r, pp, ep), rel=1e-12)
    assert _f(peak.parts["weights"]) == pytest.approx(job.elem_bytes * _f(peak.params), rel=1e-12)
    # here the MoE rank's experts outweigh the rest: it is the peak
    assert set(ranks[r]) == {"E"}
    for q, layers in enumerate(ranks):  # every rank's own model states fit under the peak
        assert _f(peak.parts["total"]) >= _state_bytes(job) * _rank_params(job, layers, q, pp, ep)


def test_the_mean_layer_would_have_split_the_experts():
    """The same layers without '|' at pp 2 (the even split: every rank half the E layers) hold half the experts per
    rank; with the segments one rank holds them all, more memory."""
    job, g = _job_grid("EEEE|MMMM", pp=2, ep=4)
    seg = stage_memory.memory_peak_stage(job, g, pipeline_ranks.microbatches(g))
    job_m, g_m = _job_grid("EMEMEMEM", pp=2, ep=4)
    mean = stage_memory.memory_peak_stage(job_m, g_m, pipeline_ranks.microbatches(g_m))
    experts = float(job.shape.moe_experts * transformer.expert_params(job.shape)) / 4
    r_mean = int(_f(mean.rank))
    assert (int(_f(seg.rank)), _f(seg.params)) == (0, pytest.approx(_rank_params(job, "EEEE", 0, 2, 4), rel=1e-12))
    assert _f(mean.params) == pytest.approx(_rank_params(job, "EMEM", r_mean, 2, 4), rel=1e-12)
    assert _f(seg.params) - _f(mean.params) > experts  # two more E layers' experts, less the Mamba layers
    assert _f(seg.parts["total"]) > _f(mean.parts["total"])


def _ep_per_layer(pp: int, schedule: str, segments: int) -> float:
    """One E layer's four all-to-alls' exposed seconds per micro-batch, from a pattern of E layers alone (equal
    segments: every rank the same), at the same pp (the same EP group placement): ep_comm / (m x E layers per rank)."""
    pattern = "|".join(["EEEE"] * segments)
    r = scalemodel.predict("dgx-h100", _model(pattern), GPUS, global_batch=GB, micro_batch=1, pp=pp, ep=4,
                           schedule=schedule)
    m = GB // (GPUS // pp)
    return r.breakdown_s["ep_comm"] / (m * 4 * segments / pp)


@pytest.mark.parametrize("pattern,pp,schedule", [("MMMM|EEEE", 2, "1f1b"), ("EEEE|MMMM", 2, "1f1b"),
                                                 ("EEEE|MMMM|EEEE|MMMM", 2, "interleaved:2")])
def test_ep_traffic_is_the_busiest_ranks_own_e_layers(pattern, pp, schedule):
    """The MoE rank (the busiest: the Mamba layers here are light) runs an all-to-all set per E layer it holds, all of
    them; the pattern's mean would give it the E share of its layers."""
    r = scalemodel.predict("dgx-h100", _model(pattern), GPUS, global_batch=GB, micro_batch=1, pp=pp, ep=4,
                           schedule=schedule)
    assert r.feasible, r.infeasible_reason
    m = GB // (GPUS // pp)
    n_e = max(layers.count("E") for layers in _ranks(pattern, pp))
    per = _ep_per_layer(pp, schedule, len(pattern.split("|")))
    assert r.breakdown_s["ep_comm"] == pytest.approx(m * n_e * per, rel=1e-9)


@pytest.mark.parametrize("pattern,pp,schedule", [("EEEE|MMMM", 2, "1f1b"), ("MMMM|EEEE", 2, "1f1b"),
                                                 ("EEEE|MMMM|EEEE|MMMM", 2, "interleaved:2")])
def test_host_intervals_are_the_ranks_own(pattern, pp, schedule):
    """With a host that binds in every interval (H = 1 s, far above any layer's device time) a rank's micro-batch
    takes its E layers x H (+ the rank's time without layers, milliseconds): the MoE rank n_E H, the Mamba rank
    none (docs/model.md#host). The pattern's mean intervals would give every rank a share of the E layers' H."""
    H = 1.0
    job, g = _job_grid(pattern, pp=pp, ep=4, schedule=schedule, moe_layer_host_s=H)
    res = step.evaluate(job, g)
    assert bool(res.feasible[0]), int(res.reason[0])
    n_e = max(layers.count("E") for layers in _ranks(pattern, pp))
    t_mb = float(res.extras["microbatch_time"][0])
    assert n_e * H <= t_mb <= n_e * H + 0.01
    # the even split of the same layers: each rank half the E layers, half the wait
    job_m, g_m = _job_grid("EMEMEMEM" if pp * 2 == len(pattern.split("|")) * 2 else "EMEMEMEM" * 2, pp=pp, ep=4,
                           moe_layer_host_s=H)
    assert float(step.evaluate(job_m, g_m).extras["microbatch_time"][0]) < n_e * H


@pytest.mark.parametrize("kw", [dict(pp=2), dict(pp=4), dict(pp=2, schedule="interleaved:2")])
def test_equal_segments_of_mamba_and_moe_give_the_even_split(kw):
    """Segments of the same kinds each: the rank's own kinds are the pattern's, every term the unsegmented one's
    (memory, EP, host; the interleaved schedule against its own equal-segment form)."""
    unit = "MEM*E-"
    n = kw["pp"] * (2 if "schedule" in kw else 1)
    piped, flat = "|".join([unit] * n), unit * n
    common = dict(global_batch=GB, micro_batch=1, ep=2, moe_layer_host_s=2e-4)
    a = scalemodel.predict("dgx-h100", _model(piped), GPUS, **common, **kw)
    if "schedule" in kw:  # without '|' Megatron refuses virtual stages: each rank's two segments as one, at 1F1B
        b = scalemodel.predict("dgx-h100", _model("|".join([unit * 2] * kw["pp"])), GPUS, **common, pp=kw["pp"])
        for part in ("compute", "tp_comm", "ep_comm", "host"):
            assert a.breakdown_s[part] == pytest.approx(b.breakdown_s[part], rel=1e-9, abs=1e-12), part
        return
    b = scalemodel.predict("dgx-h100", _model(flat), GPUS, **common, **kw)
    assert a.step_time_s == b.step_time_s  # to the bit: every rank the pattern itself, the same closed forms
    assert a.breakdown_s == b.breakdown_s
    assert a.memory["per_gpu_bytes"] == b.memory["per_gpu_bytes"]


def _random_patterns(n: int, seed: int) -> list[tuple[str, int, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        segs, pp = (2, 2) if i % 3 == 0 else (4, 4) if i % 3 == 1 else (4, 2)
        size = rng.randint(2, 4)
        pattern = "|".join("".join(rng.choice("ME*-") for _ in range(size)) for _ in range(segs))
        if "E" not in pattern:
            pattern = "E" + pattern
        out.append((pattern, pp, "1f1b" if segs == pp else f"interleaved:{segs // pp}"))
    return out


@pytest.mark.parametrize("pattern,pp,schedule", _random_patterns(9, 16))
def test_the_peak_covers_every_ranks_own_states(pattern, pp, schedule):
    """Property: the memory the step is checked against (the peak) is at least every rank's own model states
    (weights, gradients, optimizer states of its own layers, ZeRO 0), so at least the heavy rank's, which is at least
    the ranks' mean; and the parameters over the ranks add up to the model's."""
    ep = 2
    job, g = _job_grid(pattern, pp=pp, ep=ep, schedule=schedule)
    peak = stage_memory.memory_peak_stage(job, g, pipeline_ranks.microbatches(g))
    ranks = _ranks(pattern, pp)
    own = [_rank_params(job, layers, r, pp, ep) for r, layers in enumerate(ranks)]
    heavy, mean = max(own), sum(own) / pp
    assert _f(peak.parts["total"]) >= _state_bytes(job) * heavy >= _state_bytes(job) * mean
    r = int(_f(peak.rank))
    assert _f(peak.params) == pytest.approx(own[r], rel=1e-12)
    # the ranks' layers are the model's: dense + routed / ep over the ranks = the model's (tp 1, experts / ep)
    sh = job.shape
    routed = float(sh.moe_layers * sh.moe_experts * transformer.expert_params(sh))
    assert sum(own) == pytest.approx(float(transformer.param_count(sh)) - routed + routed / ep, rel=1e-12)
    assert np.isfinite(_f(peak.parts["total"]))


def test_interleaved_rank_time_is_each_ranks_own_chain():
    """T = max_r [m W_r + sum_{c<r} chunk_c], by hand at p 4: a light rank 1 behind a heavy chunk 0 and a heavy rank 2
    behind chunks 0 and 1 (the three-class form pairs the busiest middle rank with a mean wait)."""
    m, w, c = 8, [10.0, 9.0, 12.0, 10.5], [4.0, 1.0, 2.0]
    expected = max(m * 10.0, m * 9.0 + 4.0, m * 12.0 + 4.0 + 1.0, m * 10.5 + 7.0)
    assert float(pipeline.interleaved_rank_time(m, np.array(w), np.array(c))) == expected
    # equal middle ranks and middle chunks: the three-class closed form
    w2, c2 = [10.0, 11.0, 11.0, 10.5], [4.0, 2.0, 2.0]
    assert float(pipeline.interleaved_rank_time(m, np.array(w2), np.array(c2))) == pytest.approx(float(
        pipeline.interleaved_uneven_time(m, 4, 10.0, 11.0, 10.5, 4.0, 2.0)), rel=1e-15)


def test_interleaved_rank_time_is_a_lower_bound_of_the_schedule():
    """Against the step-by-step simulation of Megatron's interleaved schedule (tests/test_interleaved_chunks.py):
    every chunk its own time (segments of different kinds), the bound never above the simulation."""
    from test_interleaved_chunks import simulate
    rng = random.Random(3)
    for _ in range(40):
        p, v = rng.choice([2, 3, 4]), rng.choice([2, 3])
        m = p * rng.choice([1, 2, 4])
        f = [rng.uniform(0.3, 2.0) for _ in range(p * v)]
        b = [rng.uniform(1.5, 2.5) * x for x in f]
        t = [x + y for x, y in zip(f, b, strict=True)]
        w = np.array([sum(t[k * p + r] for k in range(v)) for r in range(p)])
        bound = float(pipeline.interleaved_rank_time(m, w, np.array(t[:p - 1])))
        assert bound <= simulate(p, v, m, f, b) * (1 + 1e-12)


def test_a_grid_of_several_pp_prices_each_as_alone_and_stays_above_the_floor():
    """One grid holding pp 1, 2 (interleaved:2) and 4 over a 4-segment pattern (the planner's unit of work): each
    candidate is what it is alone (its own pp's ranks, merged by pp), and the planner's compute floor stays below
    the pipelined part (step.compute_floor: each rank's own compute)."""
    from scalemodel.engine.job import grid_from_arrays

    pattern = "EEE|M*M*|E-E|MMMM"
    job, _ = _job_grid(pattern, pp=4, ep=2)
    pp = np.array([1, 2, 4]).reshape(3, 1)
    sched = np.where(pp == 2, int(ScheduleKind.INTERLEAVED), int(ScheduleKind.ONE_F_ONE_B))
    rec = np.array([0, 2]).reshape(1, 2)
    g = grid_from_arrays(gpus=GPUS, dp=GPUS // pp, tp=1, pp=pp, ep=2, micro_batch=1, global_batch=GB, schedule=sched,
                         virtual_stages=np.where(pp == 2, 2, 1), recompute=rec, moe_layer_host_s=1e-3)
    res = step.evaluate(job, g)
    assert np.all(np.asarray(res.feasible))
    pipelined = np.asarray((res.microbatches + res.extras["bubble_microbatches"]) * res.extras["microbatch_time"])
    floor = np.broadcast_to(step.compute_floor(job, g), g.shape)
    assert np.all(floor <= pipelined * (1 + 1e-12))
    for i, p in enumerate((1, 2, 4)):
        for j, recompute in enumerate(("none", "full")):
            kw = dict(schedule="interleaved:2") if p == 2 else {}
            one_job, one = _job_grid(pattern, pp=p, ep=2, recompute=recompute, moe_layer_host_s=1e-3, **kw)
            alone = step.evaluate(one_job, one)
            assert _f(alone.step_time) == pytest.approx(float(np.asarray(res.step_time)[i, j]), rel=1e-12)
            assert _f(alone.memory["total"]) == pytest.approx(float(np.asarray(res.memory["total"])[i, j]),
                                                              rel=1e-12)
