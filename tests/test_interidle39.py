"""interidle39: two items tidy39 left.

(1) The deferred output-layer wgrad's flush idle of an interleaved pipeline whose split is priced rank by rank (a given
stage_layers list per virtual stage, a hybrid pattern's '|' segments): the last micro-batch's backward passes chunks
p-2 .. 0 of virtual stage 0 (chunk r on rank r), each of its own layers; the closed form took 1 / v of each rank's
backward, exact for equal chunks only. Checked here against each chunk priced from its own layers.

(2) A recompute sub-field (recompute_layers, recompute_method, recompute_modules) written in a scalemodel ``--strategy``
file that does not write recompute: the file's read refused it (specs.frameworks.read_strategy_file validated the file
alone) before plan's _build_specs could read its needs_recompute marker, so plan refused a pin it searches for when the
same pin is given as ``--set strategy.X`` (ux38b, tidy39). Now the file's read leaves it to the command's validation,
as it leaves a zero-needing switch (needs_zero): one route, the same rule and marker for both ways of pinning.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def _stage0_backwards(job, g, split: list[int], pp: int, v: int, n_rec: int | None) -> float:  # type: ignore[no-untyped-def]
    """sum_{r<p-1} of chunk r's backward (chunk r of virtual stage 0 runs on rank r, which holds chunks r, r + p, ...),
    rank 0's with the word embedding, each its own first n_rec layers recomputed (block method)."""
    ref = 0.0
    for r in range(pp - 1):
        rank_n = sum(split[c * pp + r] for c in range(v))
        rec = None if n_rec is None else np.full(1, float(min(n_rec, split[r])))
        ref += _chunk_backward(job, g, split[r], rank_n, r == 0, rec)
    return ref


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
    ref = _stage0_backwards(job, g, split, pp, v, st.get("recompute_layers"))
    got = _engine_idle(job, g, monkeypatch)
    assert got == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize(("layers", "pp", "v", "chunks", "st"), [
    (15, 4, 2, {"first_chunk_layers": 1}, {}),                      # Megatron's account-for-embedding: 1, then 2s
    (15, 4, 2, {"first_chunk_layers": 1}, {"overlap_p2p_comm": True}),
    (22, 4, 3, {"first_chunk_layers": 2, "last_chunk_layers": 0}, {"recompute": "full"}),
    (13, 3, 2, {"first_chunk_layers": 4, "last_chunk_layers": 1}, {"recompute": "full", "recompute_layers": 1})])
def test_first_and_last_chunk_layers_idle_is_its_chunks(monkeypatch, layers: int, pp: int, v: int, chunks: dict,
                                                         st: dict) -> None:  # type: ignore[type-arg]
    """An interleaved split priced by class (strategy first/last_chunk_layers; Megatron-Core's account-for-embedding
    / -loss split, cost.pipeline.megatron_chunk_layers): chunk 0 holds first_chunk_layers, the other chunks of
    virtual stage 0 the middle count, each priced from its own layers as above; the same split written as a
    stage_layers list gives the same idle. The closed form took rank 0's backward / v: f + (v - 1) c layers over v."""
    f, lc = chunks["first_chunk_layers"], chunks.get("last_chunk_layers", -1)
    n_chunks = pp * v
    mid = (layers - f - max(lc, 0)) // (n_chunks - 1 - (lc >= 0))
    split = [f] + [mid] * (n_chunks - 2) + [lc if lc >= 0 else mid]
    assert sum(split) == layers
    job = _job(layers)
    g = _grid(job, pp, v, **chunks, **st)
    ref = _stage0_backwards(job, g, split, pp, v, st.get("recompute_layers"))
    got = _engine_idle(job, g, monkeypatch)
    assert got == pytest.approx(ref, rel=1e-9)
    monkeypatch.undo()
    assert got == pytest.approx(_engine_idle(job, _grid(job, pp, v, stage_layers=split, **st), monkeypatch), rel=1e-9)


@pytest.mark.parametrize("st", [{}, {"overlap_p2p_comm": True}, {"recompute": "full"}])
def test_equal_chunks_keep_the_closed_form(monkeypatch, st: dict) -> None:  # type: ignore[type-arg]
    """Equal chunks of a model whose stage time is linear in its layers (this one: no host-bound launches, no
    contention that varies with the stage): each chunk is 1 / v of its rank, so the chunk-by-chunk idle is the closed
    form ((p - 2) b_middle + b_first) / v on the ranks' own backward (cost.pipeline.deferred_wgrad_idle), written
    out here from each rank priced whole; a given list of the same chunks gives the same."""
    job = _job(16)
    g = _grid(job, 4, 2, **st)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    with layer_compute.shared_layer_pieces():
        b = [float(step._stage_forward_backward(step._stage(job, g, groups, np.full(1, 4.0), False, None, None,
                                                            r == 0))[1][0]) for r in range(2)]
    closed = (2 * b[1] + b[0]) / 2
    by_class = _engine_idle(job, g, monkeypatch)
    monkeypatch.undo()
    listed = _engine_idle(job, _grid(job, 4, 2, stage_layers=[2] * 8, **st), monkeypatch)
    assert by_class == pytest.approx(closed, rel=1e-9) and listed == pytest.approx(closed, rel=1e-9)


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


_PLAN = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--top", "3", "--json")
_PREDICT = ("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32")


def _refusal(cli, *args: str) -> str:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, (r.code, r.err)
    return r.err.strip()


# --- (2) a strategy file's recompute sub-field: plan's route as --set's ------------------------------------------

@pytest.mark.parametrize(("field", "value", "mode"), [("recompute_layers", "2", "full"),
                                                      ("recompute_method", "uniform", "full"),
                                                      ("recompute_modules", "core_attn", "selective")])
@pytest.mark.parametrize("nested", [True, False])
def test_plan_takes_a_files_recompute_pin_as_it_takes_set(cli, tmp_path: Path, field: str, value: str, mode: str,
                                                          nested: bool) -> None:  # type: ignore[no-untyped-def]
    """The same pin given as ``--set strategy.X`` and written in a strategy file (under ``strategy:`` or at the top):
    plan ranks the same strategies at the same step times and says the same warning; before, the file's read refused
    it ("needs recompute: full"), exit 2."""
    f = tmp_path / "s.yaml"
    f.write_text(f"strategy:\n  {field}: {value}\n" if nested else f"{field}: {value}\n")
    by_set, by_file = cli(*_PLAN, "--set", f"strategy.{field}={value}"), cli(*_PLAN, "--strategy", str(f))
    assert by_set.code == 0 and by_file.code == 0, (by_set.err, by_file.err)
    a, b = json.loads(by_set.out), json.loads(by_file.out)
    assert a["ranked"] and [p["strategy"] for p in a["ranked"]] == [p["strategy"] for p in b["ranked"]]
    assert [p["step_time_s"] for p in a["ranked"]] == [p["step_time_s"] for p in b["ranked"]]
    assert all(p["strategy"]["recompute"] == mode and str(p["strategy"][field]) == value for p in b["ranked"])
    assert a["warnings"] == b["warnings"] and any(f"searches recompute {mode} only" in w for w in b["warnings"])


@pytest.mark.parametrize(("field", "value", "said"), [
    ("recompute_layers", "2", "recompute_layers=2 needs recompute: full (got 'none')"),
    ("recompute_method", "uniform", "uniform needs recompute: full (got 'none')"),
    ("recompute_modules", "core_attn", "'core_attn' needs recompute: selective (got 'none')")])
def test_predict_still_refuses_the_lone_field_naming_the_file(cli, tmp_path: Path, field: str, value: str,
                                                              said: str) -> None:  # type: ignore[no-untyped-def]
    """predict prices one strategy: the file's lone field is refused by the command's validation, naming the file and
    the field as the file writes it, as --set's is refused naming --set; with recompute given beside the file
    (--set strategy.recompute, the refusal's own advice) it runs (the file's read refused that too)."""
    f = tmp_path / "s.yaml"
    f.write_text(f"strategy:\n  {field}: {value}\n")
    line = _refusal(cli, *_PREDICT, "--strategy", str(f))
    assert line.startswith(f"error: --strategy: {f}: strategy.{field}: ") and said in line, line
    top = tmp_path / "top.yaml"
    top.write_text(f"{field}: {value}\n")
    line = _refusal(cli, *_PREDICT, "--strategy", str(top))
    assert line.startswith(f"error: --strategy: {top}: ") and f"{field}: " in line and said in line, line
    line = _refusal(cli, *_PREDICT, "--set", f"strategy.{field}={value}")
    assert line.startswith(f"error: --set strategy.{field}: ") and said in line, line
    mode = said.split("needs recompute: ")[1].split(" ")[0]
    ok = cli(*_PREDICT, "--strategy", str(f), "--set", f"strategy.recompute={mode}", "--json")
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)["inputs"]["strategy"]["recompute"] == mode


def test_a_file_that_writes_recompute_is_still_judged_as_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Where the file writes recompute too, its pair is refused (at the read, as before), by plan as by predict: plan
    does not search recompute for it, as for ``--set strategy.recompute=none --set strategy.recompute_layers=2``."""
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  recompute: none\n  recompute_layers: 2\n")
    for cmd in (_PLAN, _PREDICT):
        line = _refusal(cli, *cmd, "--strategy", str(f))
        assert f"{f}: strategy.recompute_layers: " in line and "needs recompute: full (got 'none')" in line, line
