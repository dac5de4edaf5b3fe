"""The interleaved pipeline's sends hidden in its steady phase (strategy overlap_p2p_comm,
docs/model.md#pp-comm-overlap; Megatron-Core schedules.py forward_backward_pipelining_with_interleaving at
NVIDIA/Megatron-LM d98e8a64dd).

Hand values: gpt-7.5b (32 layers, h 4096, s 2048) on 8 A100s at tp 4 x pp 2, micro-batch 1, global batch 16 (m = 16),
interleaved:2 (v = 2). Warm-up chunk passes at the last pipeline rank, the step's critical path: W = (v - 1) pp = 2 of
m v = 32, as many cool-down ones. One 4 MiB-per-rank activation send over NVLink (about 0.1 ms) is far below a chunk's
8 layers of 7.5B-model compute (tens of ms), so every steady send hides whole: of the (m + (pp - 1)/v) 2 v = 66
transfers the step prices, 2 (pp v - 1) = 6 stay exposed (the warm-up and cool-down, and the pp - 1 boundaries before
and after the last rank), a share 6 / 66 = 1 / 11 (m 4: 6 / 18 = 1 / 3), with each send waited one chunk later
(overlap_p2p_send_wait false, Megatron-Core before 0.18). Waited at once (the default, Megatron-Core from 0.18) the
m v - W = 30 steady activation sends stay exposed too: 36 / 66 (m 4: (6 + 6) / 18)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from p2p_schedule_sim import simulate

from scalemodel.choices import ScheduleKind
from scalemodel.engine.job import GRID_DEFAULTS, StrategyGrid
from scalemodel.engine.model_parallel_comm import pp_overlap


def _pp(a100: Any, gb: int = 16, **strategy: Any) -> tuple[float, float, float]:
    from grid_helpers import evaluated, first

    from scalemodel.specs import TrainingSpec, load_workload

    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=gb, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    _, _, res = evaluated(a100, wl, tr, 8, tp=4, pp=2, **strategy)
    return first(res.breakdown["pp_comm"]), first(res.breakdown["contention"]), first(res.step_time)


def test_steady_sends_hide_and_the_edges_stay(a100) -> None:  # type: ignore[no-untyped-def]
    off, _, step_off = _pp(a100, schedule="interleaved:2")
    on, _, step_on = _pp(a100, schedule="interleaved:2", overlap_p2p_comm=True, overlap_p2p_send_wait=False)
    waited, _, step_waited = _pp(a100, schedule="interleaved:2", overlap_p2p_comm=True)
    assert off > 0
    assert np.isclose(on / off, 6 / 66, rtol=1e-9)  # by hand above
    assert np.isclose(waited / off, 36 / 66, rtol=1e-9)
    assert step_on < step_waited < step_off
    # m 4: 6 of (4 + 1/2) 4 = 18 transfers exposed
    off4, _, _ = _pp(a100, gb=4, schedule="interleaved:2")
    on4, _, _ = _pp(a100, gb=4, schedule="interleaved:2", overlap_p2p_comm=True, overlap_p2p_send_wait=False)
    assert np.isclose(on4 / off4, 6 / 18, rtol=1e-9)


def test_hidden_never_more_than_the_chunk_compute() -> None:
    """pp_overlap on windows made by hand: a chunk pass of 1 s forward (0.4 of it already hiding TP traffic) and 2 s
    backward, p2p 5 s per send (more than either window): each steady pass hides only its window's free compute, and
    with the forward send waited at once (overlap_p2p_send_wait) nothing under the backward."""
    base = {k: np.asarray(v) for k, v in GRID_DEFAULTS.items()}
    g = StrategyGrid(gpus=np.full(1, 8), dp=np.ones(1, int), tp=np.ones(1, int), pp=np.full(1, 4),
                     micro_batch=np.ones(1, int), global_batch=np.full(1, 8),
                     **{**base, "schedule": np.full(1, int(ScheduleKind.INTERLEAVED)), "virtual_stages": np.full(1, 2),
                        "overlap_p2p_comm": np.full(1, True), "overlap_p2p_send_wait": np.full(1, False)})
    v = np.full(1, 2.0)
    comp = {"forward": np.full(1, 2.0), "backward": np.full(1, 4.0)}  # per micro-batch, both chunks
    mp = {"pp": np.full(1, 2 * 2 * 5.0), "hidden_fwd": np.full(1, 0.8), "hidden_bwd": np.zeros(1)}
    out = pp_overlap(g, comp, mp, np.full(1, 5.0), v)
    # m 8, v 2: 16 passes, the last rank's W = 1 x 4 = 4, steady 12 passes over m + (pp - 1)/v = 9.5 micro-batch times
    steady = 12 / 9.5
    hid_f, hid_b = steady * (2.0 - 0.8) / 2, steady * 4.0 / 2
    assert np.isclose(out["pp"][0], 20.0 - hid_f - hid_b)
    assert np.isclose(out["hidden_fwd"][0], 0.8 + hid_f) and np.isclose(out["hidden_bwd"][0], hid_b)
    waited = pp_overlap(msgspec.structs.replace(g, overlap_p2p_send_wait=np.full(1, True)), comp, mp,
                        np.full(1, 5.0), v)
    assert np.isclose(waited["pp"][0], 20.0 - hid_f) and np.isclose(waited["hidden_bwd"][0], 0.0)


def test_one_f_one_b_is_unchanged_and_warned(a100, cli) -> None:  # type: ignore[no-untyped-def]
    off, _, _ = _pp(a100)
    on, _, _ = _pp(a100, overlap_p2p_comm=True)
    assert on == off
    res = cli("predict", "-m", "gpt3-175b", "-n", "1024", "--tp", "8", "--pp", "8", "--global-batch", "512",
              "--set", "strategy.overlap_p2p_comm=true", "--json")
    assert res.code == 0, res.err
    assert "strategy.overlap_p2p_comm" in res.err and "not priced" in res.err


@pytest.mark.parametrize("sets", [[], ["strategy.overlap_p2p_comm=true", "strategy.schedule=1f1b"],
                                  ["strategy.overlap_p2p_comm=true", "strategy.moe_a2a_overlap=true",
                                   "strategy.ep=8"]])
def test_send_wait_without_priced_overlap_is_warned(cli, sets: list[str]) -> None:  # type: ignore[no-untyped-def]
    """overlap_p2p_send_wait false only says which of overlap_p2p_comm's steady sends hide: without the overlap, where
    it is not priced, or beside the EP overlap's combined 1F1B (which hides none) it changes nothing, said so."""
    model = ["-m", "mixtral-8x7b"] if "strategy.ep=8" in sets else ["-m", "gpt3-175b"]
    args = ["predict", *model, "-n", "1024", "--tp", "8", "--pp", "8", "--global-batch", "512",
            "--set", "strategy.schedule=interleaved:2", "--set", "strategy.overlap_p2p_send_wait=false"]
    for s in sets:
        args += ["--set", s]
    res = cli(*args, "--json")
    assert res.code == 0, res.err
    assert "strategy.overlap_p2p_send_wait" in res.err and "not priced" in res.err
    if not sets:  # priced: no word
        res = cli(*args, "--set", "strategy.overlap_p2p_comm=true", "--json")
        assert res.code == 0, res.err
        assert "overlap_p2p_send_wait" not in res.err


def test_field_descriptions_say_what_hides() -> None:
    """The schema text a user reads: overlap_p2p_comm names the send wait that keeps the activation sends exposed
    and the combined 1F1B that hides none; overlap_p2p_send_wait says no Megatron flag sets it."""
    from scalemodel.specs import StrategySpec

    info = msgspec.json.schema(StrategySpec)["$defs"]["StrategySpec"]["properties"]
    comm, wait = info["overlap_p2p_comm"]["description"], info["overlap_p2p_send_wait"]["description"]
    assert "overlap_p2p_send_wait" in comm and "moe_a2a_overlap" in comm
    assert "No Megatron flag" in wait


def test_megatron_reader_default_and_switches(tmp_path: Path) -> None:
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "a.args"
    f.write_text("--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 3\n")
    assert read_strategy_file(f).strategy["overlap_p2p_comm"] is True  # the default since 4eeff55d1f
    f.write_text("--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 3 "
                 "--no-overlap-p2p-communication\n")
    assert "overlap_p2p_comm" not in read_strategy_file(f).strategy
    f.write_text("--pipeline-model-parallel-size 4 --overlap-p2p-communication\n")
    sf = read_strategy_file(f)
    assert "overlap_p2p_comm" not in sf.strategy
    assert any("--overlap-p2p-communication" in u for u in sf.unused)


def _grid(p: int, v: int, m: int, **flags: Any) -> StrategyGrid:
    base = {k: np.asarray(val) for k, val in GRID_DEFAULTS.items()}
    return StrategyGrid(gpus=np.full(1, p), dp=np.ones(1, int), tp=np.ones(1, int), pp=np.full(1, p),
                        micro_batch=np.ones(1, int), global_batch=np.full(1, m),
                        **{**base, "schedule": np.full(1, int(ScheduleKind.INTERLEAVED)),
                           "virtual_stages": np.full(1, v), "overlap_p2p_comm": np.full(1, True),
                           **{k: np.full(1, val) for k, val in flags.items()}})


def _engine_exposed(p: int, v: int, m: int, f: float, b: float, c: float, **flags: Any) -> float:
    """The step's exposed pipeline traffic as the engine composes it: (m + (p - 1)/v) micro-batch times of the
    per-micro-batch pp term (the bubble's (p - 1)/v of them included, step.evaluate), on chunk passes of f and b
    seconds with nothing else hiding under them."""
    out = pp_overlap(_grid(p, v, m, **flags), {"forward": np.full(1, v * f), "backward": np.full(1, v * b)},
                     {"pp": np.full(1, 2.0 * v * c), "hidden_fwd": np.zeros(1), "hidden_bwd": np.zeros(1)},
                     np.full(1, c), np.full(1, float(v)))
    return float((m + (p - 1) / v) * out["pp"][0])


CASES = [(2, 2, 4), (2, 2, 8), (3, 2, 6), (4, 2, 8), (4, 3, 8), (4, 2, 16), (4, 4, 32), (8, 2, 16), (8, 4, 16)]


@pytest.mark.parametrize(("p", "v", "m"), CASES)
def test_closed_form_matches_the_schedule_simulation(p: int, v: int, m: int) -> None:
    """The exposed traffic of a step against a step-by-step simulation of Megatron-Core's interleaved schedule over
    every rank, each send waited one chunk after it is posted (Megatron-Core before 0.18: overlap_p2p_send_wait
    false; tests/p2p_schedule_sim.py, each send and receive where schedules.py posts and waits it): with every
    transfer shorter than the chunk compute under it the simulation exposes 2 (p v - 1) transfers whatever m, the
    first micro-batch's forward through the p v - 1 boundaries of the virtual pipeline and the last one's backward
    (the last rank's (v - 1) p warm-up and as many cool-down exchanges, and the p - 1 boundaries before and after it),
    and the closed form says the same; with longer transfers it stays above the simulation, within 15 %."""
    f, b = 1.0, 2.0
    base = simulate(p, v, m, f, b, 0.0, overlap=True)[0]
    assert base == pytest.approx(m * v * (f + b) + (p - 1) * (f + b))  # Narayanan's interleaved step
    for c in (0.1, 0.5, 1.0):
        sim = simulate(p, v, m, f, b, c, overlap=True)[0] - base
        assert sim == pytest.approx(2 * (p * v - 1) * c)
        assert _engine_exposed(p, v, m, f, b, c, overlap_p2p_send_wait=False) == pytest.approx(sim, rel=1e-9)
    for c in (1.5, 2.5):
        sim = simulate(p, v, m, f, b, c, overlap=True)[0] - base
        assert sim <= _engine_exposed(p, v, m, f, b, c, overlap_p2p_send_wait=False) <= 1.15 * sim


@pytest.mark.parametrize(("p", "v", "m"), [case for case in CASES if case[0] > 2])
def test_without_overlap_the_engine_prices_every_exchange(p: int, v: int, m: int) -> None:
    """Without overlap_p2p_comm (blocking exchanges, the steady phase's four-way batch taking two transfers at a rank
    that sends one tensor at a time) the simulation is the engine's (m + (p - 1)/v) 2 v transfers less 4. Megatron-LM
    refuses the interleaved schedule without the overlap at pp 2 (arguments.py at d98e8a64dd lines 1005-1009: "to
    avoid having multiple p2p sends and recvs between same 2 ranks per communication batch")."""
    f, b, c = 1.0, 2.0, 0.3
    base = simulate(p, v, m, f, b, 0.0, overlap=False)[0]
    sim = simulate(p, v, m, f, b, c, overlap=False)[0] - base
    assert sim == pytest.approx((m + (p - 1) / v) * 2 * v * c - 4 * c)


@pytest.mark.parametrize(("p", "v", "m"), CASES)
def test_forward_send_waited_at_once_stays_exposed(p: int, v: int, m: int) -> None:
    """Megatron-Core from 260cba7133 (2026-04-16, core_v0.18.0; in d98e8a64dd lines 1813-1815) waits each steady
    forward send as soon as it is posted where ``deallocate_pipeline_outputs`` (set by Megatron-LM, NeMo 2 and
    Megatron-Bridge): the activation sends no longer hide, the gradient sends still do (their wait comes one backward
    later). The engine's default (strategy overlap_p2p_send_wait) prices it: never below the simulation, above it by
    at most p + 1 transfers a step where transfers are shorter than the chunks (a third of the exposed traffic at
    pp 2, m 4; 4 % at pp 4, v 4, m 32), by at most 35 % where they are longer; without the wait (Megatron-Core before
    0.18) both directions hide (the test above)."""
    f, b = 1.0, 2.0
    base = simulate(p, v, m, f, b, 0.0, overlap=True)[0]
    for c in (0.1, 0.5, 1.0, 1.5, 2.5):
        sim = simulate(p, v, m, f, b, c, overlap=True, send_wait_at_once=True)[0] - base
        engine = _engine_exposed(p, v, m, f, b, c)
        assert sim <= engine <= 1.35 * sim
        if c <= min(f, b):
            assert engine - sim <= (p + 1) * c * (1 + 1e-9)
    lagged = simulate(p, v, m, f, b, 0.5, overlap=True)[0] - base
    assert _engine_exposed(p, v, m, f, b, 0.5, overlap_p2p_send_wait=False) == pytest.approx(lagged, rel=1e-9)


@pytest.mark.parametrize(("p", "m"), [(4, 2), (4, 6), (3, 7)])
def test_simulation_refuses_what_megatron_refuses(p: int, m: int) -> None:
    """m below pp, or not a multiple of it: Megatron-Core's interleaved schedule raises (d98e8a64dd schedules.py
    lines 1160-1180 with the default group size pp); the simulation would transcribe a schedule no run has, so it
    refuses too, and the engine calls such a grid infeasible."""
    with pytest.raises(ValueError, match="refuses"):
        simulate(p, 2, m, 1.0, 2.0, 0.1, overlap=True)


@given(p=st.integers(2, 16), v=st.integers(2, 8), groups=st.integers(1, 8), f=st.floats(0.0, 5.0),
       b=st.floats(0.0, 5.0), c=st.floats(1e-6, 5.0), hf=st.floats(0.0, 1.0), hb=st.floats(0.0, 1.0),
       wait=st.booleans(), combined=st.booleans())
def test_physics_of_the_hidden_sends(p: int, v: int, groups: int, f: float, b: float, c: float, hf: float, hb: float,
                                     wait: bool, combined: bool) -> None:
    """Whatever the sizes: no compute hides more than its free part (hidden_fwd / hidden_bwd never above the chunk
    passes' compute), the exposed traffic never negative and never above the blocking exchanges, and never below the
    2 (p v - 1) transfers of the first micro-batch's fill and the last one's drain, which the schedule keeps
    blocking (beside the EP overlap's combined 1F1B: all of them)."""
    m = groups * p
    comp = {"forward": np.full(1, v * f), "backward": np.full(1, v * b)}
    mp = {"pp": np.full(1, 2.0 * v * c), "hidden_fwd": comp["forward"] * hf, "hidden_bwd": comp["backward"] * hb}
    out = pp_overlap(_grid(p, v, m, overlap_p2p_send_wait=wait, moe_a2a_overlap=combined, ep=2), comp, mp,
                     np.full(1, c), np.full(1, float(v)))
    assert out["hidden_fwd"][0] <= comp["forward"][0] * (1 + 1e-12) + 1e-12
    assert out["hidden_bwd"][0] <= comp["backward"][0] * (1 + 1e-12) + 1e-12
    assert 0.0 <= out["pp"][0] <= mp["pp"][0]
    assert (m + (p - 1) / v) * out["pp"][0] >= 2 * (p * v - 1) * c * (1 - 1e-9)
    if combined:
        assert out["pp"][0] == mp["pp"][0]


@pytest.mark.parametrize(("p", "v", "m"), CASES)
@pytest.mark.parametrize("wait", [True, False])
def test_combined_1f1b_hides_no_send(p: int, v: int, m: int, wait: bool) -> None:
    """With the EP overlap (strategy moe_a2a_overlap, Megatron-Core overlap_moe_expert_parallel_comm) each steady
    iteration runs the combined 1F1B (schedules.py at d98e8a64dd lines 1485-1510 into
    model_chunk_schedule_plan.py ``TransformerModelChunkSchedulePlan.run``, lines 535-607, the same order at
    0d8e0714cd, core_v0.16.0, 2d1fa8d372 and 9c5258f109): both receives are waited before the merged forward and
    backward, both exchanges posted after them, so no compute lies between a transfer's post and its wait. The
    simulation (tests/p2p_schedule_sim.py, ``combined``) exposes all but 3 of the engine's (m + (p - 1)/v) 2 v
    transfers at p > 2 whatever the send wait (all but m - 1 at p 2, at most 1 / (2 v) of them); the engine hides
    none (it hid the steady sends under the chunks before, below the simulation)."""
    f, b = 1.0, 2.0
    base = simulate(p, v, m, f, b, 0.0, overlap=True, combined=True)[0]
    assert base == pytest.approx(m * v * (f + b) + (p - 1) * (f + b))
    for c in (0.1, 0.5, 1.5):
        sim = simulate(p, v, m, f, b, c, overlap=True, send_wait_at_once=wait, combined=True)[0] - base
        engine = _engine_exposed(p, v, m, f, b, c, overlap_p2p_send_wait=wait, moe_a2a_overlap=True,
                                 ep=2)
        assert sim <= engine <= sim + (3 if p > 2 else m - 1) * c * (1 + 1e-9)
