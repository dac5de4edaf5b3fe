"""interidle39: two items tidy39 left.

(1) The deferred output-layer wgrad's flush idle of an interleaved pipeline whose split is priced rank by rank (a given
stage_layers list per virtual stage, a hybrid pattern's '|' segments): the last micro-batch's backward passes chunks
p-2 .. 0 of virtual stage 0 (chunk r on rank r), each of its own layers; the closed form took 1 / v of each rank's
backward, exact for equal chunks only. Checked here against each chunk priced from its own layers.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.cost import pipeline
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import layer_compute, step
from scalemodel.engine.job import build_job, grid_from_strategy

# --- (1) an interleaved split's deferred-wgrad flush idle, chunk by chunk ------------------------------------------

DENSE = {"kind": "transformer", "name": "d", "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn_hidden": 4096,
         "vocab": 32000, "seq_len": 2048, "gated_mlp": True, "dropout": False}
MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 64}
TRAINING = training_spec(global_batch=16, micro_batch=1)


def _job(layers: int, pattern: str | None = None):  # type: ignore[no-untyped-def]
    model = dict(DENSE, layers=layers)
    if pattern is not None:
        model["hybrid"] = {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}
    return build_job(cluster_spec("dgx-h100"), workload_spec(model), TRAINING)


def _grid(job, pp: int, v: int, **st):  # type: ignore[no-untyped-def]
    return grid_from_strategy(strategy_spec(tp=1, pp=pp, schedule=f"interleaved:{v}", defer_embedding_wgrad=True,
                                            **st), TRAINING, pp, job)


def _engine_idle(job, g, monkeypatch) -> float:  # type: ignore[no-untyped-def]
    """The flush idle evaluate prices: the deferred GEMMs' drain set to 1 s, so that the exposed drain
    step._deferred_wgrad_exposed returns is 1 s less the idle."""
    seen = []
    exposed = step._deferred_wgrad_exposed

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        seen.append(exposed(*a, **k))
        return seen[-1]
    monkeypatch.setattr(pipeline, "deferred_wgrad_drain", lambda *a: np.ones(1))
    monkeypatch.setattr(step, "_deferred_wgrad_exposed", spy)
    step.evaluate(job, g)
    (out,) = seen
    return 1.0 - float(np.asarray(out).ravel()[0])


def _chunk_backward(job, g, n: int, rank_n: int, first: bool, recomputed) -> float:  # type: ignore[no-untyped-def]
    """One model chunk's backward seconds, one micro-batch, in the interleaved bubble's chain (docs/model.md
    #uneven-stages; step._chunk_time's formula written out): its n layers priced as a pipeline rank with every exchange
    exposed (overlap_p2p_comm off), less the empty rank's exchanges, plus 1 / v of them less 1 / v of what the overlap
    hides on the chunk's rank (rank_n layers: exposed less as priced), chunk = T_x(n) - T_x(0) + (T_x(0) - H) / v;
    its backward the chunk's share of backward (+ recompute) compute, as every stage's micro-batch is split."""
    v = float(np.asarray(g.virtual_stages).ravel()[0])
    exposed = msgspec.structs.replace(g, overlap_p2p_comm=np.zeros_like(g.overlap_p2p_comm))
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    with layer_compute.shared_layer_pieces():
        def t(grid, layers: float, emb: bool, rec=None):  # type: ignore[no-untyped-def]
            return step._stage(job, grid, groups, np.full(1, float(layers)), False, None, rec, emb)
        piece = t(exposed, n, first, recomputed)
        empty = float(t(exposed, 0, False).time[0])
        hidden = float(t(exposed, rank_n, first).time[0] - t(g, rank_n, first).time[0])
    chunk = float(piece.time[0]) - empty + (empty - hidden) / v
    comp = piece.compute
    return chunk * (1.0 - float(comp["forward"][0]) / float(comp["total"][0]))


@pytest.mark.parametrize(("split", "pp", "v", "st"), [
    ([1, 1, 1, 3, 3, 3, 2, 2], 4, 2, {}),                       # light chunks first: the closed form was +76 %
    ([4, 3, 3, 1, 1, 1, 1, 2], 4, 2, {}),                       # heavy chunks first: -34 %
    ([4, 3, 3, 1, 1, 1, 1, 2], 4, 2, {"overlap_p2p_comm": True}),
    ([2, 1, 3, 1, 2, 3, 1, 1, 2], 3, 3, {"recompute": "full"}),
    ([3, 1, 2, 2, 1, 1, 3, 1], 4, 2, {"recompute": "full", "recompute_layers": 1})])
def test_a_given_interleaved_splits_idle_is_virtual_stage_0s_chunks(monkeypatch, split: list[int], pp: int, v: int,
                                                                    st: dict) -> None:  # type: ignore[type-arg]
    """Megatron's interleaved layout puts stage_layers' chunk c on pipeline rank c mod p, virtual stage c // p
    (megatron/core/transformer/pipeline_parallel_layer_layout.py ``layout[vpp_rank * pp + pp_rank]``, NVIDIA/
    Megatron-LM@d98e8a64dd); the last rank's last backward is on its chunk of virtual stage 0 (chunk p-1), after
    which chunks p-2 .. 0 run theirs (schedules.py's cool-down ends on model chunk 0): idle = sum_{r<p-1} b(split[r]),
    the first chunk with the word embedding, each its own first N layers recomputed (block method)."""
    job = _job(sum(split))
    g = _grid(job, pp, v, stage_layers=split, **st)
    n_rec = st.get("recompute_layers")
    ref = 0.0
    for r in range(pp - 1):
        rank_n = sum(split[c * pp + r] for c in range(v))
        rec = None if n_rec is None else np.full(1, float(min(n_rec, split[r])))
        ref += _chunk_backward(job, g, split[r], rank_n, r == 0, rec)
    got = _engine_idle(job, g, monkeypatch)
    assert got == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("st", [{}, {"overlap_p2p_comm": True}, {"recompute": "full"}])
def test_equal_chunks_keep_the_closed_form(monkeypatch, st: dict) -> None:  # type: ignore[type-arg]
    """Equal chunks: each chunk is 1 / v of its rank (stage times linear in the layers), so the list's chunk-by-chunk
    idle is the class route's ((p - 2) b_middle + b_first) / v of the same even split (no stage_layers)."""
    job = _job(16)
    listed = _engine_idle(job, _grid(job, 4, 2, stage_layers=[2] * 8, **st), monkeypatch)
    monkeypatch.undo()
    by_class = _engine_idle(job, _grid(job, 4, 2, **st), monkeypatch)
    assert listed == pytest.approx(by_class, rel=1e-9)


def test_a_hybrid_patterns_idle_is_its_segments_of_virtual_stage_0(monkeypatch) -> None:
    """A hybrid pattern's '|' segments, rank r holding segments r, p + r, ... (hybrid_layer_allocation.py
    ``select_pipeline_segment`` at d98e8a64dd): segments 0 .. p-2 each priced as a model of its own kinds (the segment
    repeated, one segment a chunk), their backward summed."""
    segs = ["M-M", "*-", "MMM*", "--M", "*", "M-*", "MM", "-*-"]
    pp, v = 4, 2
    job = _job(sum(map(len, segs)), "|".join(segs))
    g = _grid(job, pp, v)
    ref = 0.0
    for r in range(pp - 1):
        own = _job(len(segs[r]) * pp * v, "|".join([segs[r]] * (pp * v)))
        ref += _chunk_backward(own, _grid(own, pp, v), len(segs[r]), len(segs[r]) * v, r == 0, None)
    assert _engine_idle(job, g, monkeypatch) == pytest.approx(ref, rel=1e-9)
