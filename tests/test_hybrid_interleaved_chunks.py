"""A hybrid pattern's pipeline rank whose interleaved model chunks differ holds different numbers of micro-batches of
each chunk (docs/model.md, "Hybrid segments"): its activation peak is max over its forwards of sum_c h_c P_c, not its
layers x the mean chunk's in-flight count.

The expected counts come from a simulation written here from Megatron-Core's rules
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/pipeline_parallel/schedules.py): forwards follow get_schedule_table
(micro-batches in groups of pp, each group through chunk 0 then chunk 1 ...), the k-th backward runs chunk
v - 1 - (the k-th forward's chunk), rank r runs (p - r - 1) 2 + (v - 1) p warm-up forwards, then a forward and a
backward per step. One M layer's bytes per micro-batch ``a`` come from the 1F1B schedule (no interleaving), where rank
0 holds min(m, p) = 2 micro-batches of each of its layers.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.engine import pipeline_ranks, stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy

MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}


def _hybrid(pattern: str) -> dict:  # type: ignore[type-arg]
    """The hybrid block: the Mamba-2 widths only where the pattern has M layers (refused without one)."""
    return {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}


def _peak(pattern: str, schedule: str, **extra):
    model = dict(kind="transformer", name="chunks", hidden=1024, heads=8, kv_heads=4, ffn_hidden=2048, vocab=32000,
                 seq_len=2048, gated_mlp=True, dropout=False, layers=len(pattern.replace("|", "")),
                 hybrid=_hybrid(pattern))
    training = training_spec(global_batch=64, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model), training)
    g = grid_from_strategy(strategy_spec(pp=2, schedule=schedule, **extra), training, 16, job)
    m = pipeline_ranks.microbatches(g)
    assert float(np.ravel(m)[0]) == 8  # 64 / (dp 8 x micro-batch 1)
    return stage_memory.memory_peak_stage(job, g, m)


def _hand_peak(p: int, v: int, m: int, r: int, layers: list) -> float:
    """Rank r's most one-layer micro-batch units held at once: its chunks' layers (or bytes) x micro-batches held."""
    order = []  # chunk of each forward, in order
    start = 0
    while start < m:
        size = min(p, m - start)
        for c in range(v):
            order += [c] * size
        start += size
    warm = min(2 * (p - r - 1) + p * (v - 1), m * v)
    held, best, back = [0] * v, 0, 0
    for k, c in enumerate(order):
        held[c] += 1
        best = max(best, sum(h * n for h, n in zip(held, layers, strict=True)))
        if k >= warm:
            held[v - 1 - order[back]] -= 1
            back += 1
    return best


def _acts(pk) -> float:
    return float(np.ravel(pk.parts["activations"])[0])


def _layer_bytes(pattern: str, layers: int) -> float:
    pk = _peak(pattern, "1f1b")
    assert float(np.ravel(pk.rank)[0]) == 0
    return _acts(pk) / (2 * layers)  # rank 0: its layers x min(m, p) = 2 micro-batches


def test_hand_simulation_counts():
    assert _hand_peak(2, 2, 8, 0, [8, 1]) == 33
    assert _hand_peak(2, 2, 8, 0, [1, 8]) == 19
    assert _hand_peak(2, 2, 8, 0, [4, 4]) == 20  # equal chunks: 2.5 x 8 layers, the closed form


@pytest.mark.parametrize("pattern,chunks", [("MMMMMMMM|M|M|M", [8, 1]), ("M|M|MMMMMMMM|M", [1, 8])])
def test_unequal_chunks_follow_the_schedule(pattern, chunks):
    a = _layer_bytes(pattern, 9)
    pk = _peak(pattern, "interleaved:2")
    assert float(np.ravel(pk.rank)[0]) == 0
    assert _acts(pk) == pytest.approx(_hand_peak(2, 2, 8, 0, chunks) * a, rel=1e-12)


def test_the_two_orders_differ():
    """The same nine layers on rank 0: the big chunk first holds 33 units, last 19 (the closed form said 22.5 both)."""
    a = _layer_bytes("MMMMMMMM|M|M|M", 9)
    assert _acts(_peak("MMMMMMMM|M|M|M", "interleaved:2")) - _acts(_peak("M|M|MMMMMMMM|M", "interleaved:2")) == (
        pytest.approx(14 * a, rel=1e-12))


def test_equal_chunks_keep_the_closed_form():
    """Rank 0's chunks equal: min(m, p) (1 + (p - 1) / (p v)) = 2.5 micro-batches of its 8 layers."""
    a = _layer_bytes("MMMM|M|MMMM|M", 8)
    pk = _peak("MMMM|M|MMMM|M", "interleaved:2")
    assert float(np.ravel(pk.rank)[0]) == 0
    assert _acts(pk) == pytest.approx(2.5 * 8 * a, rel=1e-12)


def test_recompute_num_layers_counts_per_chunk():
    """Full recompute, --recompute-num-layers 1: each chunk recomputes its first layer (Megatron's block method per
    model chunk), keeping only its input, 2 s b h bytes (tp 1, no sequence parallelism); the rest keep a each; one
    layer's full activations a are the recompute working set. Rank 0 of MMMMMMMM|M|M|M: P = (f + 7a, f)."""
    a = _layer_bytes("MMMMMMMM|M|M|M", 9)
    f = 2.0 * 2048 * 1 * 1024
    pk = _peak("MMMMMMMM|M|M|M", "interleaved:2", recompute="full", recompute_layers=1)
    assert float(np.ravel(pk.rank)[0]) == 0
    assert _acts(pk) == pytest.approx(_hand_peak(2, 2, 8, 0, [f + 7 * a, f]) + a, rel=1e-12)
