"""--recompute-num-layers N on an interleaved pipeline of given first / last model chunks (strategy first_chunk_layers,
last_chunk_layers): Megatron's block method recomputes the first N layers of each model chunk's TransformerBlock
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/recompute.py lines 167-181, transformer_block.py
``_checkpointed_forward``), so a rank of chunks n_c recomputes sum_c min(N, n_c) layers, not min(N v, n).

The expected values are by hand: per-layer forward, backward and recomputed-forward times and the logits' from
cost.compute, activation bytes per layer from cost.memory, the recomputed counts and Megatron's in-flight count
written out."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.stage_memory import memory_peak_stage
from scalemodel.engine.step import Infeasible, compute_floor, dp_exposed_floor, evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from tests.test_stage_layers import _full_recompute_layer as _layer  # one layer under full recompute, by hand

# 8 layers at pp 2 x interleaved:2, the first and last chunks 1 layer each: 4 chunks 1 | 3 | 3 | 1 (chunk c on rank
# c mod 2), so rank 0 runs chunks 1 and 3, rank 1 chunks 3 and 1: 4 layers each. N = 2 recomputes
# min(2, 1) + min(2, 3) = 3 of them on each rank; min(N v, n) = min(4, 4) priced all 4.
CHUNKS = dict(pp=2, schedule="interleaved:2", first_chunk_layers=1, last_chunk_layers=1, recompute="full")


def _job(overrides: tuple[str, ...] = ("layers=8",), batch: int = 8):
    tr = TrainingSpec(global_batch=batch, micro_batch=1)
    return build_job(load_cluster("dgx-h100"), load_workload("llama2-7b", list(overrides)), tr), tr


def _grid(job, tr, **strategy):
    return grid_from_strategy(StrategySpec(**CHUNKS, **strategy), tr, 2, job)


def test_compute_recomputes_n_layers_of_each_chunk():
    """Both ranks hold 4 layers; the last also runs the logits and so sets the pace: m = 8 micro-batches of
    4 (f + b) + 3 r + logits (min(4, 4) = 4 recomputed layers gave 4 r)."""
    job, tr = _job()
    f, b, r, logits = _layer(job)
    g = _grid(job, tr, recompute_layers=2)
    res = evaluate(job, g)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    want = 8 * (4 * (f + b) + 3 * r + logits)
    assert float(res.breakdown["compute"][0]) == pytest.approx(want, rel=1e-12)
    # the compute floor of an interleaved pipeline is m t_max, the same rank
    assert float(compute_floor(job, g)[0]) == pytest.approx(want, rel=1e-12)
    # the same split given per virtual stage (stage_layers, the route review18a fixed): the same compute
    given = evaluate(job, grid_from_strategy(StrategySpec(pp=2, schedule="interleaved:2", stage_layers=[1, 3, 3, 1],
                                                          recompute="full", recompute_layers=2), tr, 2, job))
    assert float(res.breakdown["compute"][0]) == pytest.approx(float(given.breakdown["compute"][0]), rel=1e-12)


def test_middle_rank_of_equal_chunks_recomputes_n_v():
    """pp 3 x interleaved:2 of 14 layers, first and last chunks 1: chunks 1 | 3 | 3 | 3 | 3 | 1; rank 0 runs 1 and 3
    (4 layers), rank 1 3 and 3 (6), rank 2 3 and 1 (4, the logits). At N = 2 rank 1 recomputes 2 + 2 = 4 (as
    min(N v, n) = min(4, 6) did), rank 2 2 + 1 = 3: the step runs at the slower of 6 (f + b) + 4 r and
    4 (f + b) + 3 r + logits."""
    job, tr = _job(("layers=14",), batch=6)
    f, b, r, logits = _layer(job)
    res = evaluate(job, grid_from_strategy(StrategySpec(**dict(CHUNKS, pp=3), recompute_layers=2), tr, 3, job))
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    want = 6 * max(6 * (f + b) + 4 * r, 4 * (f + b) + 3 * r + logits)
    assert float(res.breakdown["compute"][0]) == pytest.approx(want, rel=1e-12)


def _a(job, recompute: str) -> float:
    """One layer's activation bytes per micro-batch (cost.memory, Korthikanti's rows)."""
    return float(memory.activation_bytes_per_layer(job.shape, recompute=recompute, micro_batch=1.0,
                                                   seq_len=job.seq_len, tp=1, cp=1, sequence_parallel=False,
                                                   flash_attention=True))


def test_memory_keeps_one_layer_whole_in_each_chunk_held():
    """N = 2 against N = 3 (min(3, 1) + min(3, 3) = 4: every layer recomputed): at N = 2 the 3-layer chunk keeps one
    layer's no-recompute activations a_none instead of the full-recompute row's a_full (2 s b h), per micro-batch of
    it held. With a small vocabulary the last rank (chunks 3 and 1) holds the peak: Megatron's interleaved schedule
    (p 2, v 2, m 8; pipeline.interleaved_chunks_held) has it hold 3 micro-batches of its chunk 0 and none of its last
    chunk (each micro-batch's last-chunk forward runs right before its backward), so the peak's activations differ
    by 3 (a_none - a_full). Without per-chunk recompute N = 2 was priced min(4, 4) = 4 (no difference); the closed
    form inflight x the rank's layers gives 1.5 micro-batches of the rank (1.5 (a_none - a_full))."""
    job, tr = _job(("layers=8", "vocab=512"))
    m = np.full(1, 8.0)
    peak = {n: memory_peak_stage(job, _grid(job, tr, recompute_layers=n), m) for n in (2, 3)}
    assert all(int(p.rank[0]) == 1 for p in peak.values())
    got = float(peak[2].parts["activations"][0] - peak[3].parts["activations"][0])
    assert got == pytest.approx(3 * (_a(job, "none") - _a(job, "full")), rel=1e-9)


def test_rank_zero_holds_its_chunks_as_the_schedule_runs_them():
    """No recompute, chunks 3 | 2 | 2 | 1 (8 layers, p 2, v 2, first 3, last 1): rank 0 runs chunks of 3 and 2 layers.
    Megatron's schedule (m 8) has it hold, after its forwards, (1, 0), (2, 0), (2, 1), (2, 2), (3, 2), (4, 1)
    micro-batches of its two chunks: the peak 4 x 3 + 1 x 2 = 14 layers' activations a_none (llama2 has no dropout:
    no embedding mask; rank 0 holds no logits and, without recompute, no working set). The closed form inflight x
    layers gave 2.5 x 5 = 12.5."""
    job, tr = _job(("layers=8", "vocab=512"))
    g = grid_from_strategy(StrategySpec(pp=2, schedule="interleaved:2", first_chunk_layers=3, last_chunk_layers=1),
                           tr, 2, job)
    peak = memory_peak_stage(job, g, np.full(1, 8.0))
    assert int(peak.rank[0]) == 0
    assert float(peak.parts["activations"][0]) == pytest.approx(14 * _a(job, "none"), rel=1e-9)


# --- hardware FLOPs: the layers a micro-batch recomputes over the whole pipeline ------------------------------------

@pytest.mark.parametrize("strategy, share", [
    # chunks 1 | 3 | 3 | 1: each rank min(2, 1) + min(2, 3) = 3, 6 of 8 (equal stages of 4 gave min(4, 4) / 4 = 1)
    (dict(CHUNKS, recompute_layers=2), 6 / 8),
    # stages 1 and 7 (first_stage_layers): min(2, 1) + min(2, 7) = 3 of 8 (equal stages: min(2, 4) / 4 = 1 / 2)
    (dict(pp=2, first_stage_layers=1, recompute="full", recompute_layers=2), 3 / 8),
    # the same two splits given per (virtual) stage (strategy stage_layers: every rank its own)
    (dict(pp=2, schedule="interleaved:2", stage_layers=[1, 3, 3, 1], recompute="full", recompute_layers=2), 6 / 8),
    (dict(pp=2, stage_layers=[1, 7], recompute="full", recompute_layers=2), 3 / 8),
    # stages 4 and 4, v 1: 2 + 2 = 4 of 8, as equal stages gave
    (dict(pp=2, recompute="full", recompute_layers=2), 4 / 8),
])
def test_hardware_flops_count_the_layers_recomputed(strategy, share):
    """HFU's F_hw = F_model + the recomputed layers' forward (docs/model.md#flops): under --recompute-num-layers N the
    share of the L layers' forward that the ranks repeat, the sum over the ranks of each one's recomputed layers over
    L, so F_hw - F_model is that share of full recompute's."""
    job, tr = _job()
    part = evaluate(job, grid_from_strategy(StrategySpec(**strategy), tr, 2, job))
    full = evaluate(job, grid_from_strategy(StrategySpec(**dict(strategy, recompute_layers=None)), tr, 2, job))
    extra = float(part.hardware_flops[0] - part.model_flops[0])
    extra_full = float(full.hardware_flops[0] - full.model_flops[0])
    assert float(part.model_flops[0]) == float(full.model_flops[0])
    assert extra_full > 0 and extra == pytest.approx(share * extra_full, rel=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_the_planner_floors_stay_below_the_step(n):
    """The compute floor (m t_max of the busiest rank, its own chunks' recomputed layers) is at most evaluate's
    pipelined part (m + bubble) t_mb, and the ZeRO-3 floor (the gathers no compute of the priced rank hides) at most
    its dp_comm: the floors price the ranks as evaluate does (the planner prunes on them)."""
    job, tr = _job(batch=16)
    g = grid_from_strategy(StrategySpec(**CHUNKS, recompute_layers=n, zero=3), tr, 4, job)
    res = evaluate(job, g)
    pipelined = float((res.microbatches[0] + res.extras["bubble_microbatches"][0]) * res.extras["microbatch_time"][0])
    assert float(compute_floor(job, g)[0]) <= pipelined * (1 + 1e-12)
    floor = float(np.ravel(dp_exposed_floor(job, g))[0])
    assert 0 < floor <= float(res.breakdown["dp_comm"][0]) * (1 + 1e-12)
