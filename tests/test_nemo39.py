"""Two NeMo 2 mechanisms, worked out by hand from the frameworks' code paths (docs/model.md#optimizer-step-gather and
#loss-token-count-read):

* ``overlap_param_gather_with_optimizer_step`` (strategy of the same name). NeMo 2's ``init_ddp`` builds chunk 0's DDP
  with ``disable_bucketing = (model_chunk_idx > 0) or overlap_param_gather_with_optimizer_step`` (NVIDIA/NeMo v2.2.0
  nemo/lightning/megatron_parallel.py L652): chunk 0 is one bucket a buffer on every rank, so the NaN check reads
  v buckets on rank 0 too. Megatron-Core (791b70e031) gives chunk 0 an optimizer of its own, steps it first and
  dispatches its all-gather right after (optimizer.py L1026-1036), so that gather runs under the other chunks' Adam
  step, weight copy and the next step's gradient-buffer reset (H seconds) instead of under the first forward.
  The exposure is checked against an event simulation of the first stage's warmup (one FIFO communication stream,
  the dispatch points of schedules.py and the pre-hook's wait), not against the formula's own algebra.
* NeMo 2's per-micro-batch token-count read (strategy loss_token_count_read): ``if num_valid_tokens < 0.5`` on a CUDA
  tensor in masked_token_loss (v2.2.0 L1798), from 1626ddded6 to 58f6689700: one blocking read a micro-batch on the
  last stage, 6 us round trip + 5 us launch (engine/host_floor.py SYNC_ROUND_TRIP_US, CALL_COST_US 'launch' low; the
  constants of their own sources, no new one).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from conftest import ROOT
from grid_helpers import HBM, one

from scalemodel.engine import dp_comm, planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

sys.path.insert(0, str(ROOT / "scripts"))
import validate_training as vt  # noqa: E402

# 8 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, 32,000-token embedding, no biases (test_nanchunk38's)
H, V = 1024, 32_000
LAYER = [H, 3 * H * H, H * H, H, 4 * H * H, 4 * H * H]  # norm, QKV, proj, norm, FC1, FC2
EMB = V * H
RANK0 = [EMB] + LAYER * 4  # pp 2: the embedding and layers 0-3
CHUNK0 = [EMB] + LAYER * 2  # interleaved:2: rank 0's first chunk
ROUND_TRIP_US, LAUNCH_US = 6.0, 5.0
ADAM_BYTES = 2 * 12 + 4 + 6  # read + write fp32 master, m, v (12 B); read the fp32 gradient; bf16 copy read 4 write 2


def model(tied: bool = False) -> TransformerWorkload:
    return TransformerWorkload(name="tiny8", layers=8, hidden=H, heads=8, ffn_hidden=4 * H, vocab=V, seq_len=2048,
                               gated_mlp=False, biases=False, tied_embeddings=tied, dropout=False)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


TRAINING = TrainingSpec(global_batch=32, micro_batch=2, precision="bf16", grad_bytes_per_param=4)
BASE = dict(dp=8, pp=2, megatron_ddp=True, zero="1", schedule="interleaved:2", overlap_param_gather=True)


def grid(job, **strategy):  # type: ignore[no-untyped-def]
    return grid_from_strategy(StrategySpec(**{**BASE, **strategy}), TRAINING, 16, job)


def read_s(buckets: int, reads: int = 2) -> float:
    return buckets * reads * (ROUND_TRIP_US + LAUNCH_US) * 1e-6


# ---- the NaN check's buckets

def test_chunk0_unbucketed_on_rank0(h100) -> None:  # type: ignore[no-untyped-def]
    """Rank 0 without the switch: chunk 0 bucketed (bound 2 at 40 M elements) + chunk 1 one bucket = 3; with it every
    chunk is one bucket: v = 2, i.e. one bucket (2 reads, 22 us) less."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    norms = sum(RANK0) * 4 / HBM
    off = grid(job, check_for_nan_in_grad=True)
    on = grid(job, check_for_nan_in_grad=True, overlap_param_gather_with_optimizer_step=True)
    assert one(dp_comm.nan_check_time(job, off, 4, 0)) == pytest.approx(norms + read_s(3))
    assert one(dp_comm.nan_check_buckets(job, on, 4, 0)) == 2
    assert one(dp_comm.nan_check_time(job, on, 4, 0)) == pytest.approx(norms + read_s(2))
    # the last rank was one bucket a chunk already
    assert one(dp_comm.nan_check_buckets(job, on, 4, 1)) == one(dp_comm.nan_check_buckets(job, off, 4, 1)) == 2


def test_tied_rank0_shared_embedding_bucket(h100) -> None:  # type: ignore[no-untyped-def]
    """Tied at pp 2 under the distributed optimizer: rank 0's embedding is a shared_embedding parameter, which closes
    a bucket of its own where its chunk is one bucket (param_and_grad_buffer.py L575-608 at core_v0.13.1): 2 + 1."""
    job = build_job(h100, model(tied=True), TrainingSpec(grad_bytes_per_param=4))
    on = grid(job, check_for_nan_in_grad=True, overlap_param_gather_with_optimizer_step=True)
    assert one(dp_comm.nan_check_buckets(job, on, 4, 0)) == 3


def test_switch_needs_its_route(h100) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM refuses the switch without overlap_param_gather, the distributed optimizer or interleaving; the
    model prices it only there (and warns elsewhere)."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    assert one(dp_comm.optimizer_step_gather(grid(job, overlap_param_gather_with_optimizer_step=True))) == 1.0
    for other in (dict(overlap_param_gather=False), dict(zero="0"), dict(schedule="1f1b"), dict(megatron_ddp=False)):
        g = grid(job, overlap_param_gather_with_optimizer_step=True, **other)
        assert one(dp_comm.optimizer_step_gather(g)) == 0.0
        assert one(dp_comm.optimizer_step_gather_window(job, g, "bsp", 4, 0)) == 0.0


# ---- the gather's window and exposure

def test_window_by_hand(h100) -> None:  # type: ignore[no-untyped-def]
    """H on rank 0: chunk 1's Adam step and copy over its ZeRO-1 shard (dp 8), (P - P0) / 8 x 34 B, then the next
    step's zero_grad_buffer of the rank's whole fp32 gradient buffer, P x 4 B, over HBM (no FP8 here)."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    assert job.optimizer_bytes_per_param == 12.0  # the premise of ADAM_BYTES
    p, p0 = sum(RANK0), sum(CHUNK0)
    by_hand = (p - p0) / 8 * ADAM_BYTES / HBM + p * 4 / HBM
    g = grid(job, overlap_param_gather_with_optimizer_step=True)
    assert one(dp_comm.optimizer_step_gather_window(job, g, "bsp", 4, 0)) == pytest.approx(by_hand)
    # below the whole optimizer part: chunk 0's own step comes before the dispatch
    assert one(dp_comm.optimizer_step_gather_window(job, g, "bsp", 4, 0)) < one(
        dp_comm._optimizer_time(job, g, "bsp", 4, 0))


def test_window_by_hand_on_the_last_rank(h100) -> None:  # type: ignore[no-untyped-def]
    """H on the last rank (pp 2, interleaved:2): its chunk 0 is layers 2-3 alone; the final norm and the output layer
    are its chunk 1's (Megatron builds them where post_process, the last virtual stage: training.py get_model at
    d98e8a64dd L2394), stepped by the second optimizer under the window: (layers 6-7 + norm + V h) / 8 x 34 B, then
    the rank's whole buffer reset, P x 4 B. review39: chunk 0 was counted with the output layer, H short by
    (V h + h) / 8 x 34 B."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    p = sum(LAYER * 4) + H + EMB  # layers 4-7, the final norm, the output layer (untied)
    rest = sum(LAYER * 2) + H + EMB  # chunk 1: layers 6-7 and the head
    by_hand = rest / 8 * ADAM_BYTES / HBM + p * 4 / HBM
    g = grid(job, overlap_param_gather_with_optimizer_step=True)
    assert one(dp_comm.optimizer_step_gather_window(job, g, "bsp", 4, 1)) == pytest.approx(by_hand)


def simulate(a: float, f: float, pp: int, v: int, bucket: float, aligned: bool, early: bool, window: float) -> float:
    """The first stage's warmup forwards, event by event: v chunks of ``a`` seconds of all-gather each on one FIFO
    stream; pp chunk-forwards of ``f`` seconds per chunk, chunk j's first after the j-th group. Chunk 0: with ``early``
    (the switch) one bucket dispatched at -``window`` (in the optimizer step) and waited whole by its first forward;
    else dispatched at 0 (the schedule's start, or the pre-hook at the first forward), its first layer waiting for
    its first bucket (``bucket`` seconds) and the rest streaming under its first chunk-forward. Chunks j >= 1, one
    bucket each (disable_bucketing): aligned, chunk 1 at the start and chunk j + 1 when chunk j's first forward step
    begins (schedules.py forward_step_helper, before chunk j's pre-hook waits); not aligned, chunk j at its own first
    forward (the pre-hook dispatches and waits). Returns the compute stream's total wait."""
    free = -window if early else 0.0
    done: dict[int, float] = {}

    def dispatch(j: int, at: float) -> None:
        nonlocal free
        free = max(free, at) + a
        done[j] = free

    if early:
        dispatch(0, -window)
        ready0 = end0 = done[0]
    else:
        ready0, end0, free = min(bucket, a), a, a
    if aligned and v > 1:
        dispatch(1, 0.0)
    t = wait = 0.0
    for j in range(v):
        for i in range(pp):
            if i == 0:
                if aligned and 1 <= j < v - 1:
                    dispatch(j + 1, t)
                if not aligned and j >= 1:
                    dispatch(j, t)
                start = max(t, ready0 if j == 0 else done[j])
                wait, t = wait + start - t, start
                if j == 0:  # chunk 0's later buckets under its first chunk-forward
                    end = max(t + f, end0)
                    wait, t = wait + end - (t + f), end
                    continue
            t += f
    return wait


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("a,chunk_fwd,pp,v,window", [
    (5.0, 2.0, 2, 2, 3.0), (5.0, 2.0, 4, 6, 3.0), (1.0, 2.0, 4, 6, 0.4), (1.0, 2.0, 4, 6, 5.0),
    (9.0, 0.5, 4, 12, 2.0), (3.0, 1.0, 8, 8, 0.0)])
def test_gather_exposure_against_simulation(a, chunk_fwd, pp, v, window, aligned) -> None:  # type: ignore[no-untyped-def]
    """interleaved_param_gather_exposed with the switch against the event simulation; chunk 0's gather hides at most
    H; never exposed more than the whole gather."""
    got = one(dp_comm.interleaved_param_gather_exposed(a * v, chunk_fwd * v, pp, v, a, aligned, True, window))
    assert got == pytest.approx(simulate(a, chunk_fwd, pp, v, a, aligned, True, window))
    assert got <= a * v + 1e-12
    assert got >= min(a * v, max(a - window, 0.0)) - 1e-12


@pytest.mark.parametrize("aligned", [True, False])
def test_switch_saves_at_most_the_window(aligned) -> None:  # type: ignore[no-untyped-def]
    """Against the same stage without the switch (chunk 0 bucketed, B = a / 4, dispatched at the start): the switch
    saves at most H (no compute hides traffic twice) and, with H = 0, saves nothing (one bucket cannot stream under
    the first forward). Both simulated."""
    a, chunk_fwd, pp, v = 4.0, 1.0, 4, 6
    for window in (0.0, 1.0, 3.0, 10.0):
        with_ = one(dp_comm.interleaved_param_gather_exposed(a * v, chunk_fwd * v, pp, v, a / 4, aligned, True,
                                                             window))
        without = one(dp_comm.interleaved_param_gather_exposed(a * v, chunk_fwd * v, pp, v, a / 4, aligned))
        assert without == pytest.approx(simulate(a, chunk_fwd, pp, v, a / 4, aligned, False, 0.0))
        assert without - with_ <= window + 1e-12
        if window == 0.0:
            assert with_ >= without - 1e-12


def test_step_physics(h100) -> None:  # type: ignore[no-untyped-def]
    """On the step: the switch moves the data-parallel part by no more than the window it hides under, and the
    optimizer part only by the rank-0 NaN-check reads it removes (none here: the check is off)."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    off, on = grid(job), grid(job, overlap_param_gather_with_optimizer_step=True)
    a, b = evaluate(job, off), evaluate(job, on)
    window = max(one(dp_comm.optimizer_step_gather_window(job, on, "bsp", 4, r)) for r in (0, 1))
    assert one(a.breakdown["dp_comm"]) - one(b.breakdown["dp_comm"]) <= window + 1e-12
    assert one(a.breakdown["optimizer"]) == pytest.approx(one(b.breakdown["optimizer"]))


# ---- NeMo 2.2 / 2.3's token-count read

def test_token_count_read_by_hand(h100) -> None:  # type: ignore[no-untyped-def]
    """One read a micro-batch, m = 32 / (8 x 2) = 2: 2 x (6 + 5) us = 22 us, in the host part; the step grows by
    exactly that."""
    job = build_job(h100, model(), TrainingSpec(grad_bytes_per_param=4))
    m = 32 / (8 * 2)
    by_hand = m * 1 * (ROUND_TRIP_US + LAUNCH_US) * 1e-6
    assert by_hand == pytest.approx(22e-6)
    on, off = grid(job, loss_token_count_read=True), grid(job)
    assert one(dp_comm.loss_token_count_read_time(on, m)) == pytest.approx(by_hand)
    assert one(dp_comm.loss_token_count_read_time(off, m)) == 0.0
    a, b = evaluate(job, on), evaluate(job, off)
    assert one(a.step_time) - one(b.step_time) == pytest.approx(by_hand, rel=1e-6)
    assert one(a.breakdown["host"]) - one(b.breakdown["host"]) == pytest.approx(by_hand, rel=1e-6)


# ---- the validation rows' settings and the planner

def _case(cid: str) -> dict[str, Any]:
    return next(c for c in vt.read_yaml(vt.NEW_CASES) if c["id"] == cid)


def test_rows_take_the_launch_rule() -> None:
    """set_primary_perf_configs' dp > 1 and pp > 1 and vp > 1 (NeMo v2.2.0 scripts/llm/performance/utils.py
    L219-225): on for nemo2502's GPT-3 175B (dp 32, pp 4, vp 6), off for dgxc2504's 30-layer proxy (dp 1) and its
    8-layer one (pp 1); the token read on every NeMo 2.2 / 2.3 row (mlpt51's Nebius rows per row), off on
    Megatron-Bridge's."""
    gpt3 = vt.predict_new_case(_case("nemo2502_b200_gpt3_175b"))
    assert gpt3.strategy.overlap_param_gather_with_optimizer_step and gpt3.strategy.loss_token_count_read
    for cid in ("dgxc2504_h100_llama31_405b_30l_bf16_64", "dgxc2504_h100_llama31_405b_8l_bf16_32"):
        st = vt.predict_new_case(_case(cid)).strategy
        assert not st.overlap_param_gather_with_optimizer_step and st.loss_token_count_read
    assert vt.predict_new_case(_case("mlpt51_h200_llama31_405b_512")).strategy.loss_token_count_read
    bridge = vt.predict_new_case(_case("mb2511_b200_llama31_405b_fp8cs")).strategy
    assert bridge.overlap_param_gather_with_optimizer_step and not bridge.loss_token_count_read


def test_pinned_by_the_planner() -> None:
    assert {"overlap_param_gather_with_optimizer_step", "loss_token_count_read"} <= set(planner.PIN_FIXED)


def test_predict_warns_where_the_switch_prices_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    """1F1B (Megatron-LM refuses the switch without a virtual pipeline): predict warns, naming why, and the step is the
    one without it; on the interleaved ZeRO-1 route it says nothing."""
    base = ["predict", "--model", "gpt-1.7b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--pp", "2", "--zero", "1", "--set", "strategy.megatron_ddp=true",
            "--set", "strategy.overlap_param_gather=true", "--json"]
    r = cli(*base, "--set", "strategy.overlap_param_gather_with_optimizer_step=true")
    assert r.code == 0, r.err
    line = next(x for x in r.err.splitlines() if "overlap_param_gather_with_optimizer_step = true is not priced" in x)
    assert "the schedule is 1f1b" in line, line
    r = cli(*base, "--schedule", "interleaved:2", "--set", "strategy.overlap_param_gather_with_optimizer_step=true")
    assert r.code == 0, r.err
    assert "overlap_param_gather_with_optimizer_step" not in r.err, r.err
