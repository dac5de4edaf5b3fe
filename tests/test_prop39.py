"""Property tests and physics checks for session 39's additions (prop39).

Pipeline (onefb39, interidle39): the exact 1F1B time against a step-by-step simulation of the schedule's dependency
graph (tests/test_pipeline_uneven.py's ``simulate``: every rank's operations in Megatron's order, each op starting at
the later of its rank's previous op and its producer), its lower bounds (each rank's own 2m operations back to back;
one micro-batch's forward down and backward up), monotonicity in every stage time and in m, and the class forms equal
to the ranks written out for every (p, m), m < p and p = 1, 2 included.

Engine (nemo39, nl2239, tidy39): over tests/test_physics_wide.py's wide generator with the session's switches forced,
switching a host read or the main-gradient hook on never makes the step faster, the optimizer-step gather window H
never exceeds the optimizer step it is part of, the gather hidden never exceeds H, and every number is finite and
non-negative. Plan (planmb39): --allow micro-batches never returns a worse best, and its best is predict's step.

Each test is small (derandomize, explicit seeds); ``scripts/prop39.py`` runs the same properties with many more
examples.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_interleaved_chunks import simulate as interleaved_simulate
from test_pipeline_uneven import simulate

from scalemodel.cost import pipeline
from scalemodel.engine import dp_comm
from scalemodel.engine.job import grid_from_arrays, stage_split_code
from scalemodel.engine.step import evaluate
from tests.test_consist38 import _cli, _close
from tests.test_physics_wide import _eval, _numbers, _steps_per_sync, _wide_job, wide_cases

#: scripts/prop39.py raises this for the long run
SCALE = int(os.environ.get("PROP39_SCALE", "1"))


def fast(n: int) -> settings:
    return settings(max_examples=n * SCALE, deadline=None, derandomize=SCALE == 1,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pipelines(draw: st.DrawFn, max_p: int = 7) -> tuple[int, int, list[float], list[float]]:
    """(p, m, forwards, backwards): p 1..max_p, m 1..3p + 1, integer stage times 0..4 (exact arithmetic)."""
    p = draw(st.integers(1, max_p))
    m = draw(st.integers(1, 3 * p + 1))
    times = st.lists(st.integers(0, 4), min_size=p, max_size=p)
    return p, m, [float(x) for x in draw(times)], [float(x) for x in draw(times)]


def _t(m: int, f: list[float], b: list[float]) -> float:
    return float(pipeline.one_f_one_b_time(m, np.asarray(f), np.asarray(b)))


@seed(3901)
@fast(80)
@given(pipelines())
def test_onefb_is_never_below_a_rank_busy_or_one_micro_batch_through(case) -> None:  # type: ignore[no-untyped-def]
    """T >= m (f_k + b_k) for every rank k (it runs 2m operations one at a time) and T >= sum f + sum b (one
    micro-batch's forward down the ranks and its backward up them); T = the simulated makespan."""
    p, m, f, b = case
    t = _t(m, f, b)
    assert t == simulate(p, m, f, b)
    assert t >= max(m * (x + y) for x, y in zip(f, b, strict=True))
    assert t >= sum(f) + sum(b)


@seed(3902)
@fast(80)
@given(pipelines(), st.data())
def test_onefb_is_non_decreasing_in_every_stage_time_and_in_m(case, data) -> None:  # type: ignore[no-untyped-def]
    """A slower forward or backward on any rank, or one more micro-batch, never shortens the step (each is a longer
    operation or one more operation in the same dependency graph)."""
    p, m, f, b = case
    t = _t(m, f, b)
    k = data.draw(st.integers(0, p - 1))
    extra = float(data.draw(st.integers(1, 3)))
    f2, b2 = list(f), list(b)
    f2[k] += extra
    b2[k] += extra
    assert _t(m, f2, b) >= t
    assert _t(m, f, b2) >= t
    assert _t(m + 1, f, b) >= t


def test_onefb_monotone_in_m_per_step_floor() -> None:
    """(m + p - 1) min_k (f_k + b_k) <= T(m) for every m 1..4p on integer grids (the equal-stage step of the slowest
    ... fastest rank brackets it), and T(m + 1) - T(m) >= min_k (f_k + b_k) where the fastest rank paces nothing
    less than one more forward and backward on every rank."""
    rng = np.random.default_rng(3903)
    for _ in range(60):
        p = int(rng.integers(1, 7))
        f = rng.integers(0, 5, p).astype(float)
        b = rng.integers(0, 5, p).astype(float)
        lo = float(np.min(f + b))
        prev = None
        for m in range(1, 4 * p + 1):
            t = _t(m, list(f), list(b))
            assert t >= (m + p - 1) * lo - 1e-12
            assert t <= (m + p - 1) * float(np.max(f + b)) + 1e-12
            if prev is not None:
                assert t - prev >= lo - 1e-12
            prev = t


def test_class_forms_equal_the_ranks_written_out_for_every_p_and_m() -> None:
    """Four-class and three-class forms against :func:`one_f_one_b_time` on the ranks written out, every p 1..7,
    every m 1..3p + 1 (m < p and m < 2p - 1 go the written-out route, the rest the closed form), every n_u, random
    integer class times; and vectorised over a grid of mixed (p, m) at once (plan's broadcast)."""
    rng = np.random.default_rng(3904)
    rows = []
    for p in range(1, 8):
        for m in range(1, 3 * p + 2):
            for n_up in range(max(p - 2, 0) + 1):
                cls = [float(x) for x in rng.integers(0, 5, 8)]
                ff, bf, fu, bu, fo, bo, fl, bl = cls
                n_low = max(p - 2, 0) - n_up
                f = [ff] + [fu] * n_up + [fo] * n_low + [fl] if p >= 2 else [ff]
                b = [bf] + [bu] * n_up + [bo] * n_low + [bl] if p >= 2 else [bf]
                want = _t(m, f, b)
                assert float(pipeline.one_f_one_b_four_class_time(m, p, n_up, *cls)) == want, (p, m, n_up, cls)
                if n_low == 0:
                    assert float(pipeline.one_f_one_b_three_class_time(m, p, ff, bf, fu, bu, fl, bl)) == want
                rows.append((m, p, n_up, *cls, want))
    arr = np.asarray(rows)
    got = pipeline.one_f_one_b_four_class_time(*(arr[:, i] for i in range(11)))
    np.testing.assert_array_equal(got, arr[:, 11])


def test_class_forms_accept_broadcast_views() -> None:
    """plan's grids arrive as broadcast views of different shapes: (m along one axis, pp along another) gives the
    same as the points one by one."""
    ms = np.arange(1, 10, dtype=float)[:, None]
    ps = np.asarray([1.0, 2.0, 3.0, 5.0])[None, :]
    got = pipeline.one_f_one_b_three_class_time(ms, ps, 1.0, 2.0, 1.5, 3.0, 2.0, 4.0)
    for (i, m), (j, p) in itertools.product(enumerate(ms[:, 0]), enumerate(ps[0])):
        n = int(p)
        f = [1.0] + [1.5] * max(n - 2, 0) + ([2.0] if n >= 2 else [])
        b = [2.0] + [3.0] * max(n - 2, 0) + ([4.0] if n >= 2 else [])
        assert got[i, j] == _t(int(m), f, b), (m, p)


# --- the engine: the session's switches over the wide generator -----------------------------------------------------


#: the host reads and the hook of nemo39 / nl2239 / nancheck37-38: each adds work and hides nothing
SWITCHES = ("main_grad_hook", "loss_token_count_read", "check_for_nan_in_grad", "check_for_nan_in_loss")


def _opt_step_gather(arrays: dict, pp: int, v: int) -> dict:  # type: ignore[type-arg]
    """The case under optimizer_step_gather: Megatron-Core DDP at ZeRO 1 with overlap_param_gather on an interleaved
    pipeline of pp stages, v chunks each (the edge/chunk splits off: the even split)."""
    return {**arrays, "megatron_ddp": True, "main_grad_hook": False, "bucket_fragments": False, "zero": 1,
            "shard_group": 0, "overlap": True, "overlap_param_gather": True,
            "overlap_param_gather_with_optimizer_step": True, "schedule": int(pipeline.ScheduleKind.INTERLEAVED),
            "pp": pp, "virtual_stages": v, "gpus": arrays["dp"] * arrays["tp"] * pp * arrays["cp"],
            "stage_split": -1, "first_stage_layers": -1, "last_stage_layers": -1, "first_chunk_layers": -1,
            "last_chunk_layers": -1, "offload_states": 0}


@seed(3905)
@fast(20)
@given(wide_cases(), st.sampled_from(SWITCHES))
def test_switching_a_host_read_or_the_hook_on_never_makes_the_step_faster(case, switch) -> None:  # type: ignore[no-untyped-def]
    job, arrays, sync = case
    off = {**arrays, switch: False}
    on = {**arrays, switch: True}
    if switch == "main_grad_hook":  # not beside Megatron-Core's DDP (StrategySpec refuses both)
        off["megatron_ddp"] = on["megatron_ddp"] = False
    t0 = float(_eval(job, off, sync).step_time[0])
    res = _eval(job, on, sync)
    t1 = float(res.step_time[0])
    assert t1 >= t0 * (1 - 1e-12), (switch, arrays, sync, t0, t1)
    # and the step with it on keeps the physics: FLOPs at peak, its data-parallel bytes at line rate, every number
    assert t1 >= float(res.model_flops[0]) / (on["gpus"] * job.peak_flops) * (1 - 1e-12), (switch, on, sync)
    rounds = _steps_per_sync(sync)
    if rounds:
        assert t1 >= float(res.extras["dp_comm_total"][0]) / rounds * (1 - 1e-12), (switch, on, sync)
    bad = {k: x.tolist() for k, x in _numbers(res).items() if not (np.all(np.isfinite(x)) and np.all(x >= 0))}
    assert not bad, (switch, on, sync, bad)


@seed(3906)
@fast(20)
@given(wide_cases(), st.sampled_from((2, 4)), st.sampled_from((2, 3)))
def test_optimizer_step_gather_window_and_what_it_hides(case, pp, v) -> None:  # type: ignore[no-untyped-def]
    """H (optimizer_step_gather_window) is part of the optimizer step: never longer than _optimizer_time for the
    same rank (the stages' mean, and the first and last rank of L / pp layers); with the switch on, the
    data-parallel traffic hidden is at most compute + bubble + host + optimizer (the window's compute is the
    optimizer's); every number finite and >= 0."""
    job, arrays, sync = case
    if not job.is_transformer or job.shape.hybrid is not None:
        return
    a = _opt_step_gather(arrays, pp, v)
    g = grid_from_arrays(**{k: np.asarray([x]) for k, x in a.items()})
    if not bool(dp_comm.optimizer_step_gather(g)[0]):
        return
    h = float(dp_comm.optimizer_step_gather_window(job, g, sync)[0])
    assert h <= float(dp_comm._optimizer_time(job, g, sync)[0]) * (1 + 1e-12), (a, sync)
    layers = np.asarray([float(int(job.shape.layers) // pp)])
    for rank in (0, pp - 1):
        r = np.asarray([float(rank)])
        hr = float(dp_comm.optimizer_step_gather_window(job, g, sync, layers, r)[0])
        assert 0.0 <= hr <= float(dp_comm._optimizer_time(job, g, sync, layers, r)[0]) * (1 + 1e-12), (a, rank)
    if _steps_per_sync(sync) != 1:
        sync = "bsp"
    res = evaluate(job, g, sync=sync)
    bad = {k: x.tolist() for k, x in _numbers(res).items() if not (np.all(np.isfinite(x)) and np.all(x >= 0))}
    assert not bad, (a, sync, bad)
    b = {k: float(x[0]) for k, x in res.breakdown.items()}
    hidden = float(res.extras["dp_comm_total"][0]) - b["dp_comm"]
    assert hidden <= (b["compute"] + b["bubble"] + b["host"] + b["optimizer"]) * (1 + 1e-9), (a, sync, hidden, b)


@seed(3907)
@fast(60)
@given(st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.floats(0.01, 5.0), st.integers(2, 8), st.integers(2, 4),
       st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.booleans())
def test_the_optimizer_step_hides_at_most_h_of_the_gather(gather, forward, dummy, pp, v, first, h,  # type: ignore[no-untyped-def]
                                                            aligned) -> None:
    """interleaved_param_gather_exposed with opt_step: exposed(H) >= exposed(0) - H (the window hides at most H),
    exposed never above the gather, never below 0, and non-increasing in H."""
    args = dict(gather=gather, forward=forward, pp=pp, v=v, first_bucket=min(first, gather), aligned=aligned,
                opt_step=True)
    e0 = float(dp_comm.interleaved_param_gather_exposed(**args, opt_window=0.0))
    eh = float(dp_comm.interleaved_param_gather_exposed(**args, opt_window=h))
    e2 = float(dp_comm.interleaved_param_gather_exposed(**args, opt_window=h + dummy))
    assert 0.0 <= eh <= gather * (1 + 1e-12)
    assert eh >= e0 - h - 1e-12
    assert e2 <= eh + 1e-12


# --- plan --allow micro-batches (planmb39) ---------------------------------------------------------------------------


#: B / dp with odd factors (3, 5, 6, 12 ...: micro-batches the powers of two leave out); small models, one node
PLANS = (("dgx-a100-40g", "llama2-13b", ("model.layers=8",), 8, 24),
         ("dgx-h100", "llama3-8b", ("model.layers=8",), 8, 40),
         ("dgx-h100", "mixtral-8x7b", ("model.layers=4",), 8, 12))


def _predict_flags(s: dict) -> list[str]:  # type: ignore[type-arg]
    """predict's flags for plan's winning strategy, every key plan searches (the rest are the defaults both take)."""
    out = ["--tp", str(s["tp"]), "--pp", str(s["pp"]), "--cp", str(s["cp"]), "--ep", str(s["ep"]), "--dp",
           str(s["dp"]), "--micro-batch", str(s["micro_batch"]), "--global-batch", str(s["global_batch"]),
           "--zero", str(s["zero"]), "--recompute", str(s["recompute"]), "--schedule", str(s["schedule"]),
           "--overlap" if s["overlap"] else "--no-overlap", "--compression", str(s["compression"]),
           "--dp-comm", str(s["dp_comm"]), "--algo", str(s["algorithm"]), "--assignment", str(s["assignment"]),
           "--sync", str(s["sync"]), "--set", f"strategy.layout={s['layout']}"]
    if s["sequence_parallel"]:
        out.append("--sequence-parallel")
    if s["bucket_bytes"]:
        out += ["--set", f"strategy.bucket_size={s['bucket_bytes']}"]
    return out


@pytest.mark.parametrize(("cluster", "model", "sets", "gpus", "batch"), PLANS)
def test_allow_micro_batches_never_worse_and_its_best_is_predict(cluster, model, sets, gpus, batch) -> None:  # type: ignore[no-untyped-def]
    base = ["-c", cluster, "-m", model, *(x for s in sets for x in ("--set", s)), "-n", str(gpus),
            "--global-batch", str(batch)]
    plain = _cli("plan", *base, "--top", "1")
    opened = _cli("plan", *base, "--top", "1", "--allow", "micro-batches")
    assert opened["ranked"], opened.get("infeasible_by_reason")
    assert opened["candidates_evaluated"] >= plain["candidates_evaluated"]
    win = opened["ranked"][0]
    if plain["ranked"]:
        assert win["step_time_s"] <= plain["ranked"][0]["step_time_s"] * (1 + 1e-12)
    s = win["strategy"]
    p = _cli("predict", *base, *_predict_flags(s))
    differ = {k: (v, p["strategy"].get(k)) for k, v in s.items() if k in p["strategy"] and p["strategy"][k] != v}
    assert not differ, differ
    assert _close(win["step_time_s"], p["step_time_s"]), (win["step_time_s"], p["step_time_s"])
    assert win["breakdown_s"] == pytest.approx(p["breakdown_s"], rel=1e-9, abs=1e-12)


# --- every number of --json with the session's switches --------------------------------------------------------------

#: NeMo 2's interleaved ZeRO-1 layout with the optimizer-step gather and the token-count read; NeMo 1's O2 hook;
#: Megatron-Core's NaN checks
SWITCHED = (
    ("--tp", "2", "--pp", "2", "--schedule", "interleaved:2", "--zero", "1", "--set", "strategy.megatron_ddp=true",
     "--set", "strategy.overlap_param_gather=true", "--set", "strategy.overlap_param_gather_with_optimizer_step=true",
     "--set", "strategy.loss_token_count_read=true", "--set", "strategy.check_for_nan_in_grad=true",
     "--set", "strategy.check_for_nan_in_loss=true"),
    ("--tp", "2", "--pp", "2", "--zero", "1", "--set", "strategy.main_grad_hook=true",
     "--set", "strategy.grad_accumulation_fusion=false", "--set", "strategy.loss_token_count_read=true"),
)


#: signed by definition: the validation's speed error (predicted / measured - 1) and its interval; scale's loss
#: attribution (T_k(N) - T_k(0)) / T_N, negative where a part shrinks with N (engine/scaling.py: ZeRO-1's optimizer)
SIGNED = ("speed_error", "loss_attribution")


def _bad_numbers(doc: object, path: str = "") -> list[str]:
    """Paths of numbers in a JSON document that are not finite, or negative outside :data:`SIGNED`."""
    if isinstance(doc, dict):
        return [x for k, v in doc.items() for x in _bad_numbers(v, f"{path}.{k}")]
    if isinstance(doc, list):
        return [x for i, v in enumerate(doc) for x in _bad_numbers(v, f"{path}[{i}]")]
    if isinstance(doc, bool) or not isinstance(doc, int | float):
        return []
    return [] if np.isfinite(doc) and (doc >= 0 or any(k in path for k in SIGNED)) else [f"{path}={doc}"]


@pytest.mark.parametrize("flags", SWITCHED)
def test_every_number_of_predict_plan_and_scale_is_finite_and_non_negative(flags) -> None:  # type: ignore[no-untyped-def]
    base = ["-c", "dgx-h100", "-m", "llama3-8b", "--set", "model.layers=8"]
    p = _cli("predict", *base, "-n", "16", "--global-batch", "64", *flags)
    assert p["step_time_s"] > 0
    assert not _bad_numbers(p), _bad_numbers(p)
    pins = [f.split("=", 1)[0] for f in flags if f.startswith("strategy.")]
    assert all(p["strategy"][k.split(".", 1)[1]] for k in pins if k.split(".", 1)[1] != "grad_accumulation_fusion")
    sets = [x for i, f in enumerate(flags) if f.startswith("strategy.") for x in ("--set", flags[i])]
    plan = _cli("plan", *base, "-n", "16", "--global-batch", "64", "--top", "3", "--constraint", "tp=2,pp=2",
                "--allow", "micro-batches", *sets)
    assert plan["ranked"]
    assert not _bad_numbers(plan), _bad_numbers(plan)
    scale = _cli("scale", *base, "--gpus", "8,16,32", "--global-batch", "64", *flags)
    assert not _bad_numbers(scale), _bad_numbers(scale)


# --- defect found (prop39): an empty first model chunk ----------------------------------------------------------------


def test_an_empty_first_chunk_waits_behind_virtual_stage_0() -> None:
    """first_chunk_layers 0 (the embedding alone): rank 0's first layer is on chunk p, behind micro-batch 0's forward
    through chunks 0 .. p-1. The step-by-step simulation of Megatron's interleaved schedule
    (tests/test_interleaved_chunks.py's ``simulate``) of chunks [e, 14, 14, 4] (e = 0.01 per unit, f = 1, b = 2 a
    layer) at pp 2, V 2, m 2 is 126.12; the rank-wait bound (:func:`interleaved_rank_wait_time`) is within e m of it,
    the three-class bound without the wait 108.15 (14 % short)."""
    p, v, m, chunks = 2, 2, 2, [0.01, 14.0, 14.0, 4.0]
    f, b = chunks, [2.0 * x for x in chunks]
    t = [x + y for x, y in zip(f, b, strict=True)]
    w = [t[0] + t[2], t[1] + t[3]]
    sim = interleaved_simulate(p, v, m, f, b)
    bound = float(pipeline.interleaved_rank_wait_time(m, np.asarray(w), np.asarray([t[0] + t[1], t[0]])))
    assert sim <= bound <= sim + m * t[0] + 1e-9
    assert float(pipeline.interleaved_uneven_time(m, p, w[0], 0.0, w[1], t[0], t[1])) < 0.9 * sim


@pytest.mark.parametrize(("model", "m", "layers"), [("mistral-7b", 2, (0, 15, 15, 2)),
                                                    ("mistral-7b", 4, (0, 15, 15, 2)), ("gpt-j-6b", 2, (0, 13, 13, 2))])
def test_first_chunk_layers_zero_prices_as_its_stage_layers(model, m, layers) -> None:  # type: ignore[no-untyped-def]
    """The same chunks given as first/last_chunk_layers (the chunk-class route) and as strategy.stage_layers (each
    chunk its own: _empty_chunk_waits) price the same step. prop39: mistral-7b on a DGX H100 at pp 2, V 2, chunks
    [0, 15, 15, 2], m 2 was 19.5 % faster through first_chunk_layers 0 (m 4: 5.2 %)."""
    job = _wide_job("dgx-h100", model, "bf16", None, 4096)
    base = dict(dp=1, tp=1, cp=1, ep=1, etp=0, micro_batch=1, layout=0, stage_split=-1, first_stage_layers=-1,
                last_stage_layers=-1, pp=2, virtual_stages=2, schedule=int(pipeline.ScheduleKind.INTERLEAVED), gpus=2,
                global_batch=m)
    chunked = _eval(job, {**base, "first_chunk_layers": layers[0], "last_chunk_layers": layers[-1]})
    split = _eval(job, {**base, "first_chunk_layers": -1, "last_chunk_layers": -1,
                        "stage_split": stage_split_code(list(layers))})
    assert float(chunked.step_time[0]) == pytest.approx(float(split.step_time[0]), rel=1e-9)


@seed(3908)
@fast(12)
@given(wide_cases(), st.sampled_from((2, 4)), st.sampled_from((2, 3)), st.integers(0, 2), st.integers(1, 4),
       st.sampled_from((1, 2, 4)))
def test_given_chunk_layers_price_as_their_stage_layers(case, pp, v, fc, lc, groups) -> None:  # type: ignore[no-untyped-def]
    """first/last_chunk_layers (the chunk classes) and the same chunks as strategy.stage_layers (each chunk its own)
    give the same step: one schedule, two routes (m = groups x pp, the first chunk empty too)."""
    job, arrays, sync = case
    layers = int(job.shape.layers) if job.is_transformer else 0
    mid = pp * v - 2
    if not job.is_transformer or job.shape.hybrid is not None or (layers - fc - lc) < mid or (layers - fc - lc) % mid:
        return
    a = {**arrays, "pp": pp, "virtual_stages": v, "schedule": int(pipeline.ScheduleKind.INTERLEAVED),
         "gpus": arrays["dp"] * arrays["tp"] * pp * arrays["cp"], "global_batch": arrays["dp"] * arrays["micro_batch"]
         * pp * groups, "stage_split": -1, "first_stage_layers": -1, "last_stage_layers": -1,
         "first_chunk_layers": fc, "last_chunk_layers": lc}
    b = {**a, "first_chunk_layers": -1, "last_chunk_layers": -1,
         "stage_split": stage_split_code([fc] + [(layers - fc - lc) // mid] * mid + [lc])}
    ta, tb = float(_eval(job, a, sync).step_time[0]), float(_eval(job, b, sync).step_time[0])
    assert ta == pytest.approx(tb, rel=1e-9), (a, sync, ta, tb)
