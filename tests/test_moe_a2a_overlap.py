"""EP all-to-all overlap with another micro-batch's compute (StrategySpec.moe_a2a_overlap; Megatron-Core
--overlap-moe-expert-parallel-comm). Hidden traffic is checked against hand-counted steady-state shares
and against the compute under it; Megatron's refusals are refused here too."""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.choices import Recompute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.model_parallel_comm import moe_a2a_steady_share
from scalemodel.engine.planner import PIN_AXES
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

QWEN3_30B = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                                ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def _run(cluster: str = "dgx-h100", batch: int = 16, **strategy):
    tr = TrainingSpec(global_batch=batch, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster(cluster), QWEN3_30B, tr)
    # Megatron-Core needs SP for MoE at tp > 1 (tests/test_moe_sp_required.py)
    st = StrategySpec(**{"sequence_parallel": strategy.get("tp", 1) > 1, **strategy})
    gpus = st.tp * st.pp * st.cp * (st.dp or 1)
    g = grid_from_strategy(st, tr, gpus, job)
    return job, g, evaluate(job, g)


@pytest.mark.parametrize("pp,schedule,batch,share", [
    (1, "1f1b", 16, 15 / 16),  # no pipeline: the first forward and the last backward run alone
    # last rank: (V-1) p + 1 warm-up forwards of m V, the + 1 Megatron's extra forward with
    # overlap_moe_expert_parallel_comm (schedules.py lines 966-970 @d98e8a64dd; review17b)
    (2, "interleaved:2", 16, (32 - 3) / 32),  # (V-1) p + 1 = 3 of m V = 32
    (4, "interleaved:4", 8, (32 - 13) / 32),  # (V-1) p + 1 = 13 of m V = 32
])
def test_steady_share_by_hand(pp, schedule, batch, share):
    _job, g, _ = _run(tp=8, ep=8, etp=1, pp=pp, schedule=schedule, batch=batch, moe_a2a_overlap=True)
    assert float(moe_a2a_steady_share(g).ravel()[0]) == pytest.approx(share, rel=1e-12)


def test_overlap_hides_at_most_the_steady_share_and_never_more_than_the_compute():
    kw = dict(tp=8, ep=8, etp=1, pp=2, schedule="interleaved:2", batch=16)
    job, g, off = _run(**kw)
    _, _, on = _run(**kw, moe_a2a_overlap=True)
    ep_off, ep_on = float(off.breakdown["ep_comm"][0]), float(on.breakdown["ep_comm"][0])
    assert ep_off > 0
    share = (32 - 2) / 32
    hidden = ep_off - ep_on
    assert 0 < hidden <= share * ep_off * (1 + 1e-12)
    assert hidden <= share * float(off.breakdown["compute"][0])
    # the same compute is slower for the traffic it hides (contention) ...
    assert float(on.breakdown["compute"][0]) == pytest.approx(float(off.breakdown["compute"][0]), rel=1e-12)
    extra = float(on.breakdown["contention"][0]) - float(off.breakdown["contention"][0])
    assert extra == pytest.approx(job.collective_share * hidden, rel=1e-6)
    # ... and the step is shorter by what is hidden less that slowdown (the bubble scales with the rank time)
    assert float(on.step_time[0]) < float(off.step_time[0])


def test_no_pipeline_hides_at_most_the_compute_of_the_paired_passes():
    # EP over 8 data-parallel ranks of one server, no pipeline: 63 of 64 micro-batch pairs overlap
    kw = dict(tp=1, dp=8, ep=8, pp=1, batch=64)
    _, _, off = _run(**kw)
    _, _, on = _run(**kw, moe_a2a_overlap=True)
    hidden = float(off.breakdown["ep_comm"][0]) - float(on.breakdown["ep_comm"][0])
    assert 0 < hidden <= (63 / 64) * float(off.breakdown["compute"][0]) * (1 + 1e-12)


@pytest.mark.parametrize("strategy,match", [
    (dict(tp=8, ep=1, pp=1), "expert parallelism"),
    (dict(tp=8, ep=8, etp=1, pp=1, recompute="full"), "full recompute"),
    (dict(tp=8, ep=8, etp=1, pp=2, schedule="1f1b"), "interleaved"),
])
def test_megatron_refusals(strategy, match):
    with pytest.raises(InputError, match=match):
        _run(**strategy, moe_a2a_overlap=True)


def test_planner_can_pin_it():
    assert "moe_a2a_overlap" in PIN_AXES  # a searched axis plan can pin


def test_grid_candidates_megatron_refuses_keep_the_all_to_alls_exposed():
    # a planner grid with the flag pinned holds full-recompute candidates: there the overlap changes nothing
    job, g, _ = _run(tp=8, ep=8, etp=1, pp=1, batch=16, moe_a2a_overlap=True)
    full_on = replace(g, recompute=np.asarray([int(Recompute.FULL)]))
    full_off = replace(full_on, moe_a2a_overlap=np.asarray([False]))
    a, b = evaluate(job, full_on), evaluate(job, full_off)
    assert float(a.step_time[0]) == pytest.approx(float(b.step_time[0]), rel=1e-12)
