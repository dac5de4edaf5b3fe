"""The interleaved schedule's exposed exchanges in the regime of the MLPerf GPT-3 175B rows at 10,240-11,616 H100
(vpgap36, validation/README.md#vpgap36; docs/model.md#pp-comm-overlap).

Those rows run as few micro-batches as the interleaved schedule takes, m = p (v4.0: p 6, v 8, m 6; v3.1: p 8, v 12,
m 8), or m = 2 p (v3.1 at 4096-8192 GPUs: p 8, v 12, m 16). At m = p every forward of every rank is a warm-up forward
(Megatron-Core core_v0.7.0.beta 3c0f3ef38c schedules.py L528-530: ``num_warmup_microbatches = total_num_microbatches``
when num_microbatches == pipeline_parallel_size), each waiting, before it starts, the exchange posted after the one
before it, its own send included (L694-698; p2p_communication.py ``_p2p_ops`` puts the send request in the handles,
L183). tests/test_pp_overlap.py checks the engine's 2 (p v - 1) exposed
transfers against the step-by-step simulation of that schedule (tests/p2p_schedule_sim.py) at m >= 2 p only; this
checks the rows' own (p, v, m), with the rows' ratio of transfer to chunk compute (a 12.6 MB activation at about
45 GB/s, 0.28 ms, against a two-layer chunk forward of about 3.8 ms: c = 0.07 f), and that the regime adds no exposed
transfer the closed form misses (the count does not grow with the warm-up's length)."""
from __future__ import annotations

import numpy as np
import pytest
from p2p_schedule_sim import simulate

from scalemodel.choices import ScheduleKind
from scalemodel.engine.job import GRID_DEFAULTS, StrategyGrid
from scalemodel.engine.model_parallel_comm import pp_overlap

ROWS = [(6, 8, 6),    # mlpt40_h100_gpt3_175b_10752 / _11616: TP 4 x PP 6 x VP 8, GBS / DP = 6 micro-batches of 1
        (8, 12, 8),   # mlpt31_h100_gpt3_175b_10240 / _10752: TP 4 x PP 8 x VP 12, 8 micro-batches of 1
        (8, 12, 16)]  # mlpt31_h100_gpt3_175b_4096 / _6144 / _8192: 16 micro-batches of 1


def _engine_exposed(p: int, v: int, m: int, f: float, b: float, c: float) -> float:
    """The step's exposed pipeline traffic as step.evaluate composes it: (m + (p - 1)/v) micro-batch times of
    pp_overlap's per-micro-batch term, on chunk passes of f and b with nothing else under them, each send waited one
    chunk later (overlap_p2p_send_wait false: Megatron-Core before 260cba7133, as these rows ran)."""
    base = {k: np.asarray(val) for k, val in GRID_DEFAULTS.items()}
    grid = StrategyGrid(gpus=np.full(1, p), dp=np.ones(1, int), tp=np.ones(1, int), pp=np.full(1, p),
                        micro_batch=np.ones(1, int), global_batch=np.full(1, m),
                        **{**base, "schedule": np.full(1, int(ScheduleKind.INTERLEAVED)),
                           "virtual_stages": np.full(1, v), "overlap_p2p_comm": np.full(1, True),
                           "overlap_p2p_send_wait": np.full(1, False)})
    out = pp_overlap(grid, {"forward": np.full(1, v * f), "backward": np.full(1, v * b)},
                     {"pp": np.full(1, 2.0 * v * c), "hidden_fwd": np.zeros(1), "hidden_bwd": np.zeros(1)},
                     np.full(1, c), np.full(1, float(v)))
    return float((m + (p - 1) / v) * out["pp"][0])


@pytest.mark.parametrize(("p", "v", "m"), ROWS)
def test_rows_regime_exposes_two_pv_minus_one_transfers(p: int, v: int, m: int) -> None:
    f, b = 1.0, 2.0
    base = simulate(p, v, m, f, b, 0.0, overlap=True)[0]
    assert base == pytest.approx((m * v + p - 1) * (f + b))  # Narayanan's interleaved step, no transfer time
    for c in (0.07 * f, 0.25 * f):
        exposed = simulate(p, v, m, f, b, c, overlap=True)[0] - base
        # the schedule exposes the p v - 1 boundaries of the first forward and of the last backward, no more: the
        # warm-up's own send waits (m v of them at m = p) lie under the chunks that follow them
        assert exposed == pytest.approx(2 * (p * v - 1) * c)
        assert _engine_exposed(p, v, m, f, b, c) == pytest.approx(exposed, rel=1e-9)

