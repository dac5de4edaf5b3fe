"""The interleaved pipeline's sends hidden in its steady phase (strategy overlap_p2p_comm,
docs/model.md#pp-comm-overlap; Megatron-Core schedules.py forward_backward_pipelining_with_interleaving at
NVIDIA/Megatron-LM d98e8a64dd).

Hand values: gpt-7.5b (32 layers, h 4096, s 2048) on 8 A100s at tp 4 x pp 2, micro-batch 1, global batch 16 (m = 16),
interleaved:2 (v = 2). Warm-up chunk passes at pipeline rank 0: W = 2 (pp - 1) + (v - 1) pp = 2 + 2 = 4 of m v = 32.
One 4 MiB-per-rank activation send over NVLink (about 0.1 ms) is far below a chunk's 8 layers of 7.5B-model compute
(tens of ms), so every steady send hides whole and the exposed share is W / (m v) = 4 / 32 = 0.125 of the 2 v sends."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def _pp(a100: Any, gb: int = 16, **strategy: Any) -> tuple[float, float, float]:
    from grid_helpers import evaluated, first

    from scalemodel.specs import TrainingSpec, load_workload

    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=gb, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    _, _, res = evaluated(a100, wl, tr, 8, tp=4, pp=2, **strategy)
    return first(res.breakdown["pp_comm"]), first(res.breakdown["contention"]), first(res.step_time)


def test_steady_sends_hide_and_the_edges_stay(a100) -> None:  # type: ignore[no-untyped-def]
    off, _, step_off = _pp(a100, schedule="interleaved:2")
    on, _, step_on = _pp(a100, schedule="interleaved:2", overlap_p2p_comm=True)
    assert off > 0
    assert np.isclose(on / off, 4 / 32, rtol=1e-9)  # W / (m v), by hand above
    assert step_on < step_off
    # m 4: W = 4 of m v = 8 chunk passes
    off4, _, _ = _pp(a100, gb=4, schedule="interleaved:2")
    on4, _, _ = _pp(a100, gb=4, schedule="interleaved:2", overlap_p2p_comm=True)
    assert np.isclose(on4 / off4, 4 / 8, rtol=1e-9)


def test_hidden_never_more_than_the_chunk_compute() -> None:
    """pp_overlap on windows made by hand: a chunk pass of 1 s forward (0.4 of it already hiding TP traffic) and 2 s
    backward, p2p 5 s per send (more than either window): each steady pass hides only its window's free compute."""
    from scalemodel.choices import ScheduleKind
    from scalemodel.engine.job import GRID_DEFAULTS, StrategyGrid
    from scalemodel.engine.model_parallel_comm import pp_overlap

    base = {k: np.asarray(v) for k, v in GRID_DEFAULTS.items()}
    g = StrategyGrid(gpus=np.full(1, 8), dp=np.ones(1, int), tp=np.ones(1, int), pp=np.full(1, 4),
                     micro_batch=np.ones(1, int), global_batch=np.full(1, 8),
                     **{**base, "schedule": np.full(1, int(ScheduleKind.INTERLEAVED)), "virtual_stages": np.full(1, 2),
                        "overlap_p2p_comm": np.full(1, True)})
    v = np.full(1, 2.0)
    comp = {"forward": np.full(1, 2.0), "backward": np.full(1, 4.0)}  # per micro-batch, both chunks
    mp = {"pp": np.full(1, 2 * 2 * 5.0), "hidden_fwd": np.full(1, 0.8), "hidden_bwd": np.zeros(1)}
    out = pp_overlap(g, comp, mp, np.full(1, 5.0), v)
    # m 8, v 2: 16 passes, W = 2 x 3 + 1 x 4 = 10, steady 6 passes / 8 micro-batches = 0.75 per micro-batch
    hid_f, hid_b = 0.75 * (2.0 - 0.8) / 2, 0.75 * 4.0 / 2
    assert np.isclose(out["pp"][0], 20.0 - hid_f - hid_b)
    assert np.isclose(out["hidden_fwd"][0], 0.8 + hid_f) and np.isclose(out["hidden_bwd"][0], hid_b)


def test_one_f_one_b_is_unchanged_and_warned(a100, cli) -> None:  # type: ignore[no-untyped-def]
    off, _, _ = _pp(a100)
    on, _, _ = _pp(a100, overlap_p2p_comm=True)
    assert on == off
    res = cli("predict", "-m", "gpt3-175b", "-n", "1024", "--tp", "8", "--pp", "8", "--global-batch", "512",
              "--set", "strategy.overlap_p2p_comm=true", "--json")
    assert res.code == 0, res.err
    assert "strategy.overlap_p2p_comm" in res.err and "not priced" in res.err


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
