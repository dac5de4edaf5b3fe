"""Each pipeline rank's layers of a hybrid pattern against Megatron-LM's own rule, written out here from its text
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/hybrid/hybrid_layer_allocation.py select_pipeline_segment,
lines 331-493), per (pp rank, virtual stage), then joined per rank in the order it runs its chunks:

- with '|': segments = pattern.split('|'); (rank r, virtual stage c) builds segment c * pp + r (line 466);
- without '|' at pp > 1 (no virtual stages): with first and/or last stage layers, rank 0 the first ``first``,
  rank pp-1 the last ``last`` (offset L - last), every other rank ``(L - first - last) / middle`` layers at offset
  (r - [first given]) * per_middle + first; else L / pp each at offset r L / pp.

The model's split (engine.pipeline_ranks._rank_layers) must hold the same characters on every rank, and the stage
holding the embedding (pre_process: rank 0, virtual stage 0) and the output layer and MTP (post_process /
mtp_on_this_rank: rank pp-1, the last virtual stage) is rank 0 / rank pp-1 of that split.
"""

from __future__ import annotations

import pytest

import scalemodel
from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.engine import pipeline_ranks
from scalemodel.engine.job import build_job, grid_from_strategy

MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}


def _hybrid(pattern: str) -> dict:  # type: ignore[type-arg]
    """The hybrid block: the Mamba-2 widths only where the pattern has M layers (refused without one)."""
    return {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}


def _megatron_segment(pattern: str, pp: int, rank: int, vp: int | None, first: int | None,
                      last: int | None) -> str:
    """The layer characters Megatron builds for (pp rank, virtual stage), from select_pipeline_segment's text."""
    segments = pattern.split("|")
    if len(segments) == 1 and pp > 1:
        assert vp is None
        n = len(pattern)
        if first is not None or last is not None:
            f, lst = first or 0, last or 0
            middle = pp - sum(1 for x in (first, last) if x is not None)
            per = (n - f - lst) // middle if middle > 0 else 0
            if first is not None and rank == 0:
                offset, count = 0, f
            elif last is not None and rank == pp - 1:
                offset, count = n - lst, lst
            else:
                offset, count = (rank if first is None else rank - 1) * per + f, per
        else:
            per = n // pp
            offset, count = rank * per, per
        return pattern[offset:offset + count]
    return segments[(vp or 0) * pp + rank]


def _model_ranks(pattern: str, pp: int, **kw) -> list[str]:
    moe = {"moe": {"experts": 8, "top_k": 2, "ffn_hidden": 512}} if "E" in pattern else {}
    model = dict(kind="transformer", name="m", hidden=512, heads=8, kv_heads=8, ffn_hidden=1024, vocab=32000,
                 seq_len=1024, layers=len(pattern.replace("|", "")), hybrid=_hybrid(pattern),
                 **moe)
    training = training_spec(global_batch=32, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model), training)
    g = grid_from_strategy(strategy_spec(pp=pp, **kw), training, 8 * pp, job)
    splits = pipeline_ranks._rank_layers(job, g)
    assert splits is not None and len(splits) == 1, splits
    assert splits[0].p == pp
    return splits[0].ranks


@pytest.mark.parametrize("pattern,pp,v", [
    ("M*M-|E*|MMMM|-E", 2, 2),  # unequal segments, virtual stages 2: rank 0 segments 0, 2; rank 1 segments 1, 3
    ("M*|EE|M|*-|MMM|E", 2, 3),
    ("M*|EE|M|*-|MMM|E|-|M", 4, 2),
    ("MM*E|M|EEE-", 3, 1),
    ("M*||EE-", 3, 1),  # an empty segment: a rank without layers
])
def test_piped_ranks_are_megatrons_segments(pattern, pp, v):
    kw = dict(schedule=f"interleaved:{v}") if v > 1 else {}
    expected = ["".join(_megatron_segment(pattern, pp, r, c if v > 1 else None, None, None) for c in range(v))
                for r in range(pp)]
    assert _model_ranks(pattern, pp, **kw) == expected


@pytest.mark.parametrize("pattern,pp,first,last", [
    ("EEEEMMMM", 2, None, None),
    ("E*EEM-MM", 4, None, None),
    ("EEEMMMMM", 2, 3, None),
    ("EMMMMMME", 3, None, 2),  # only the last given: ranks 0 and 1 share the rest, offsets 0 and 3
    ("MM*EEE--EE", 3, 2, 4),
    ("EEM*M*M*M-", 4, 1, 3),
])
def test_pipe_free_ranks_are_megatrons_split(pattern, pp, first, last):
    kw = {}
    if first is not None:
        kw["first_stage_layers"] = first
    if last is not None:
        kw["last_stage_layers"] = last
    expected = [_megatron_segment(pattern, pp, r, None, first, last) for r in range(pp)]
    assert "".join(expected) == pattern  # every layer on one rank, in order
    assert _model_ranks(pattern, pp, **kw) == expected


def _activations(pattern: str, pp: int) -> float:
    model = dict(kind="transformer", name="m", hidden=512, heads=8, kv_heads=8, ffn_hidden=1024, vocab=256,
                 dropout=False, seq_len=1024, layers=len(pattern.replace("|", "")),
                 hybrid=_hybrid(pattern))
    r = scalemodel.predict("dgx-h100", model, pp, global_batch=8, micro_batch=1, pp=pp)
    assert r.feasible, r.infeasible_reason
    return float(r.memory["parts_bytes"]["activations"])


def test_one_f_one_b_ranks_hold_their_own_layers_times_their_micro_batches_in_flight():
    """1F1B (Megatron-Core schedules.py get_pp_rank_microbatches: p - r - 1 warm-up forwards + the one in flight):
    rank r holds min(m, p - r) micro-batches of its own layers, m = 8 here. All-Mamba, no dropout, no recompute and a
    256-word vocabulary (logits far below one layer's), so the peak is rank 0's: pp 2 '6|2' holds 2 x 6 = 12 layer
    micro-batches, '5|3' 2 x 5 = 10 (so one layer's bytes a = their difference / 2); pp 4 '4|2|1|1' 4 x 4 = 16 a,
    '8|2|1|1' 4 x 8 = 32 a."""
    a = (_activations("MMMMMM|MM", 2) - _activations("MMMMM|MMM", 2)) / 2.0
    assert a > 0
    assert _activations("MMMMMM|MM", 2) == pytest.approx(12 * a, rel=1e-12)
    assert _activations("MMMM|MM|M|M", 4) == pytest.approx(16 * a, rel=1e-12)
    assert _activations("MMMMMMMM|MM|M|M", 4) == pytest.approx(32 * a, rel=1e-12)
