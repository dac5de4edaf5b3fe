"""prop37's seed sweep (tests/README.md "Property tests"): what it found in code merged in session 36.

One counterexample, of ``test_wide_more_microbatches_never_grow_the_bubble_fraction`` under deferwgrad36's
``defer_embedding_wgrad`` (found by a throwaway generator forcing the session-36 fields on, shrunk by hypothesis and
by hand to a stage split): mistral-7b on 4 H100s (dgx-h100), pp 4, stage_layers [0, 0, 0, 32], 1F1B, every pass of
the output layer's weight-gradient GEMM deferred (wgrad_deferral_limit 0). The bubble over the compute grows from
0.0051026 at m 4 to 0.0052399 at m 16 (``scalemodel predict --cluster dgx-h100 --model mistral-7b --gpus 4 --set
strategy.pp=4 --set 'strategy.stage_layers=[0,0,0,32]' --set strategy.defer_embedding_wgrad=true --set
strategy.overlap=false --set training.micro_batch=1 --set training.seq_len=2048 --set training.global_batch=4``
(then 16) --json: bubble 3.2705 / 13.434 ms over compute 0.64095 / 2.56379 s). The step-by-step schedule below
says it must not: the drain of m G seconds
runs on the last rank after its last backward, inside the wait for that micro-batch's backward to reach rank 0, so
the last rank's idle is F + max(I, m G) (F its fill, I that wait) and (F + max(I, m G)) / (m W) never grows with m
(simulated with the engine's own stage times: 0.005467 at m 4, 0.005352 at m 16; the drain adds 3.212 and 13.434 ms
there, exactly the engine's max(m G - I, 0), so the drain is priced right). The engine's pipeline bubble is what
differs: bubble_mb t_mb = max(F + m W + I - m t_mb, 0) is 5.87e-5 s at m 4 and 0 at m 16, because t_mb, the busiest
(last) rank's micro-batch (0.160354 s), counts a middle rank's two pipeline exchanges (pp_exchanges), while the
schedule's paths (pipeline.one_f_one_b_time) take the end rank's one (_stage_forward_backward's ``end``: W =
0.160296 s, pp_edge 5.87e-5 s). Whichever the end rank's steady state is (its own one exchange, or paced through
the blocking exchange by its two-exchange neighbour), one of the two terms is off by m pp_edge (0.94 ms at m 16,
against F + I = 0.29 ms), and the clipped bubble drops the fill and the wait the drain is credited with. Without
the drain the same clipping only flattens the bubble (never a growth), which is why no earlier sweep saw it.
Fixed in bubble37 (engine/step.py ``_end_rank``): the end rank's per-micro-batch time is its own one-exchange
micro-batch in both terms, as Megatron-Core's 1F1B sends nothing past the ends; the engine test below passes (15
validation rows moved by at most 0.031 points).
"""

from __future__ import annotations

import pytest
from schedule_sim import makespan

from scalemodel.cost import pipeline
from scalemodel.engine.job import stage_split_code
from tests.test_physics_wide import _eval, _wide_job
from tests.test_pipeline_uneven import _ops

#: the counterexample's candidate (every other field at its default)
SPLIT_32 = dict(gpus=4, dp=1, tp=1, pp=4, micro_batch=1, global_batch=4, defer_embedding_wgrad=True,
                wgrad_deferral_limit=0, overlap=False, layer_impl=0, loss_impl=0, moe_permute_fusion=False,
                align_grad_reduce=False, align_param_gather=False, grad_accumulation_fusion=False,
                overlap_p2p_send_wait=False)


def _deps(p: int):  # type: ignore[no-untyped-def]
    """tests/test_pipeline_uneven.py's dependencies (a forward after the rank before's, a backward after its own
    forward and the rank after's backward), and the drain ("D") after the last rank's last backward."""
    def deps(op):  # type: ignore[no-untyped-def]
        kind, j, r = op
        if kind == "D":
            return [("B", j, r)]
        if kind == "F":
            return [("F", j, r - 1)] if r > 0 else []
        return [("F", j, r)] + ([("B", j, r + 1)] if r < p - 1 else [])
    return deps


def _simulate(p: int, m: int, f: list[float], b: list[float], drain: float = 0.0) -> float:
    """Makespan of 1F1B (tests/test_pipeline_uneven.py's schedule) whose last rank, with ``drain`` > 0, runs one
    more operation of ``drain`` seconds after its last backward (Megatron-Core's drain_embedding_wgrad_compute after
    the schedule's last backward, docs/model.md#defer-embedding-wgrad)."""
    seqs = [list(_ops(p, m, r)) for r in range(p)]
    if drain > 0:
        seqs[p - 1].append(("D", m - 1, p - 1))
    return makespan(seqs, _deps(p), lambda op: drain if op[0] == "D" else f[op[2]] if op[0] == "F" else b[op[2]])


@pytest.mark.parametrize("b_first, b_mid", [(3.9e-5, 7.8e-5), (0.02, 0.01), (0.1, 0.1)])
def test_the_drain_window_is_at_least_the_backward_wait(b_first: float, b_mid: float) -> None:
    """step._deferred_wgrad_exposed's window I = ((p - 2) b_mid + b_first) / v (pipeline.deferred_wgrad_idle) is a
    lower bound: in the simulated schedule the drain adds at most max(D - I, 0) to the step, exactly that where the
    last rank paces the pipeline. Stages of the counterexample's shape (the last rank 0.16 s a micro-batch, its
    forward a third) and two with busier upstream ranks; D = m G with the model's G = 0.85 ms (mistral-7b's head)."""
    p, g_head = 4, 8.5185e-4
    f = [b_first / 2, b_mid / 2, b_mid / 2, 0.16 / 3]
    b = [b_first, b_mid, b_mid, 0.16 * 2 / 3]
    idle = float(pipeline.deferred_wgrad_idle(p, 1, b_first, b_mid))
    assert idle == pytest.approx(2 * b_mid + b_first, rel=1e-12)
    for m in (4, 16):
        base, with_drain = _simulate(p, m, f, b), _simulate(p, m, f, b, m * g_head)
        assert with_drain - base <= max(m * g_head - idle, 0.0) * (1 + 1e-9) + 1e-15, (m, with_drain - base)
        if b_first < 1e-3:  # the last rank paces: exact
            assert with_drain - base == pytest.approx(max(m * g_head - idle, 0.0), rel=1e-9, abs=1e-15)


def test_the_simulated_bubble_fraction_with_a_drain_never_grows() -> None:
    """The invariant holds in the schedule itself: the counterexample's stage times as the engine prices them
    (step._stage_forward_backward with ``end`` on ranks 0 and 3: the empty ranks' pipeline exchanges, the last rank
    0.0548 + 0.1055 s a micro-batch), every pass deferred (D = m G): the last rank's idle over its compute, (makespan -
    m W) / (m W), at m 4 is no less than at m 16."""
    p, g_head = 4, 8.5185e-4
    f = [1.9556e-5, 3.9111e-5, 3.9111e-5, 0.054766]
    b = [3.9111e-5, 7.8222e-5, 7.8222e-5, 0.10553]
    w = f[-1] + b[-1]
    frac = {m: (_simulate(p, m, f, b, m * g_head) - m * w) / (m * w) for m in (4, 16)}
    assert frac[16] <= frac[4] * (1 + 1e-12), frac


def test_the_engine_bubble_fraction_with_a_drain_never_grows() -> None:
    """The sweep's counterexample through the engine: bubble / compute 0.0051026 at m 4, 0.0052399 at m 16."""
    job = _wide_job("dgx-h100", "mistral-7b", "bf16", None, 2048)
    a = dict(SPLIT_32, stage_split=stage_split_code([0, 0, 0, 32]))
    few, many = _eval(job, a), _eval(job, dict(a, global_batch=16))
    frac_few = float(few.breakdown["bubble"][0]) / float(few.breakdown["compute"][0])
    frac_many = float(many.breakdown["bubble"][0]) / float(many.breakdown["compute"][0])
    assert frac_many <= frac_few * (1 + 1e-9) + 1e-12, (frac_few, frac_many)
