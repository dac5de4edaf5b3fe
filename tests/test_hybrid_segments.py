"""A hybrid pattern's '|' segments priced as Megatron-LM splits them (docs/model.md#uneven-stages): pipeline rank r,
virtual stage c holds segment c pp + r (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/models/hybrid/
hybrid_layer_allocation.py select_pipeline_segment, lines 466-467), so each rank computes its own segments' layer
kinds. The expected busiest-rank compute is assembled by hand from cost.compute's per-kind layer times (an
attention layer is layer_compute_time without the MLP, an MLP / MoE layer without the attention; an MoE layer also
launches its per-expert GEMMs, expert_gemm_calls x KERNEL_FIXED_S, docs/model.md#expert-quantize-kernels) and the
logits."""

from __future__ import annotations

import pytest

import scalemodel
from scalemodel.api import cluster_spec, training_spec, workload_spec
from scalemodel.choices import ScheduleKind
from scalemodel.cost import compute
from scalemodel.engine.job import build_job

BASE = dict(kind="transformer", name="segs", hidden=2048, heads=16, kv_heads=4, ffn_hidden=8192, vocab=32000,
            seq_len=4096, gated_mlp=True, dropout=False, moe={"experts": 8, "top_k": 2, "ffn_hidden": 1024})
GB = 64  # global batch; micro-batch 1, dp = 16 / (tp pp): m = 64 / dp micro-batches


def _model(pattern: str) -> dict:
    return dict(BASE, layers=len(pattern.replace("|", "")), hybrid={"pattern": pattern})


def _kind_times(pattern: str) -> tuple[dict[str, float], float]:
    """Per-micro-batch compute seconds of one layer of each kind at tp 1, ep 1 (bf16, flash attention, the job's
    attention kernel), and of the logits."""
    wl = workload_spec(_model(pattern))
    job = build_job(cluster_spec("dgx-h100"), wl, training_spec(global_batch=GB, micro_batch=1))
    kw = dict(micro_batch=1.0, seq_len=job.seq_len, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
              gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
              tp=1, cp=1, elem_bytes=job.elem_bytes)
    lt = dict(kw, ep=1, sequence_parallel=False, recompute="none", flash_attention=True,
              attention_fwd=job.attention_fwd, attention_bwd=job.attention_bwd)
    sh = job.shape
    n_f, n_b = compute.expert_gemm_calls(sh, ep=1)
    t = {"*": compute.layer_compute_time(sh, mlp=False, **lt).total,
         "-": compute.layer_compute_time(sh, attention=False, **lt).total,
         "E": compute.layer_compute_time(sh, attention=False, moe=True, etp=1, **lt).total
         + (n_f + n_b) * compute.KERNEL_FIXED_S}
    return {k: float(v) for k, v in t.items()}, float(compute.logits_compute_time(sh, **kw).total)


def _predict(pattern: str, **kw):
    return scalemodel.predict("dgx-h100", _model(pattern), 16, global_batch=GB, micro_batch=1, **kw)


def _rank_compute(pattern: str, pp: int) -> list[float]:
    """Each rank's compute per micro-batch by hand: its segments c pp + r, layer by layer, the last with the logits."""
    per, logits = _kind_times(pattern)
    segs = pattern.split("|")
    ranks = [sum(per[ch] for c in range(len(segs) // pp) for ch in segs[c * pp + r]) for r in range(pp)]
    ranks[-1] += logits
    return ranks


# unequal segments: the MoE layers all in the first half, the dense MLP layers (ffn 8192, heavier than two of the
# MoE's 1024-wide experts) in the second; and the reverse
@pytest.mark.parametrize("pattern", ["*E*E*E|*-*-*-", "*-*-*-|*E*E*E", "*EE|*--*--"])
def test_pp2_each_rank_computes_its_own_segment(pattern):
    r = _predict(pattern, pp=2)
    assert r.feasible, r.infeasible_reason
    m = GB // 8  # dp 8
    assert r.breakdown_s["compute"] == pytest.approx(m * max(_rank_compute(pattern, 2)), rel=1e-9)


def test_segments_move_the_busiest_rank():
    # the same layers, the heavy MLP layers on the last rank (with the logits) or on the first: different steps
    a, b = _predict("*E*E*E|*-*-*-", pp=2), _predict("*-*-*-|*E*E*E", pp=2)
    ra, rb = _rank_compute("*E*E*E|*-*-*-", 2), _rank_compute("*-*-*-|*E*E*E", 2)
    assert max(ra) > max(rb) and a.breakdown_s["compute"] > b.breakdown_s["compute"]


def test_pp4_interleaved2_each_rank_holds_segments_r_and_r_plus_4():
    # 8 segments at pp 4: v = 2, rank r holds segments r and r + 4; the MoE-heavy and MLP-heavy segments placed
    # so that the ranks differ (rank 1: two '---' segments)
    pattern = "*E|*--|*E|*-|E*E|*--|*E|*-"
    r = _predict(pattern, pp=4, schedule="interleaved:2")
    assert r.feasible, r.infeasible_reason
    m = GB // 4  # dp 4
    ranks = _rank_compute(pattern, 4)
    assert ranks[1] != ranks[0]
    assert r.breakdown_s["compute"] == pytest.approx(m * max(ranks), rel=1e-9)


@pytest.mark.parametrize("kw", [dict(pp=2), dict(pp=4), dict(pp=2, schedule="interleaved:2")])
def test_equal_segments_give_the_unsegmented_step(kw):
    """Segments of the same layers each: the even split of today (the mean layer on every rank)."""
    unit = "*E*-"
    n = kw["pp"] * (2 if "schedule" in kw else 1)
    piped, flat = "|".join([unit * 2] * n), unit * 2 * n
    a, b = _predict(piped, **kw), _predict(flat, **(kw if "schedule" not in kw else dict(pp=kw["pp"])))
    if "schedule" in kw:  # without '|' Megatron refuses virtual stages: compare with the 1F1B compute per rank
        assert a.breakdown_s["compute"] == pytest.approx(b.breakdown_s["compute"], rel=1e-9)
        return
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-9)
    for part, t in b.breakdown_s.items():
        assert a.breakdown_s[part] == pytest.approx(t, rel=1e-9, abs=1e-12), part
    assert a.memory["per_gpu_bytes"] == pytest.approx(b.memory["per_gpu_bytes"], rel=1e-9)


@pytest.mark.parametrize("kw", [dict(pp=4), dict(pp=2, first_stage_layers=4), dict(pp=2, last_stage_layers=4),
                                dict(pp=2, schedule="interleaved:2")])
def test_megatron_refusals_still_hold(kw):
    r = _predict("*E*E*E|*-*-*-", **kw)
    assert not r.feasible and "'|' segments are the stages" in r.infeasible_reason


def test_planner_searches_only_the_segment_pp():
    plan = scalemodel.plan("dgx-h100", _model("*E*E|*-*-|*E*-|*-*E"), 16, global_batch=GB, top=20)
    ranked = plan.ranked if hasattr(plan, "ranked") else plan["ranked"]
    assert ranked
    for row in ranked:
        st = row.strategy if hasattr(row, "strategy") else row["strategy"]
        pp = st["pp"] if isinstance(st, dict) else st.pp
        sched = st["schedule"] if isinstance(st, dict) else st.schedule
        v = int(str(sched).split(":")[1]) if str(sched).startswith("interleaved") else 1
        assert pp == 1 or pp * v == 4, (pp, sched)


def test_planner_searches_the_interleaving_unequal_segments_allow():
    """18 layers in 4 unequal segments: Megatron runs pp 2 interleaved:2 (v = S / pp) though 18 is not divisible by
    pp x v = 4; the planner offers it, and only pp 1, 2, 4 (planner.configurations)."""
    from scalemodel.engine.planner import configurations
    pattern = "*E*E|*-*-*-|*E*-|*-*E"
    job = build_job(cluster_spec("dgx-h100"), workload_spec(_model(pattern)), training_spec(global_batch=GB,
                                                                                            micro_batch=1))
    cfg = configurations(job, 16, GB)
    assert set(cfg["pp"].tolist()) <= {1, 2, 4}
    inter = cfg["schedule"] == ScheduleKind.INTERLEAVED
    assert set(cfg["pp"][~inter].tolist()) == {1, 4}  # flat schedules: the segments are the stages
    pairs = set(zip(cfg["pp"][inter].tolist(), cfg["virtual_stages"][inter].tolist(), strict=True))
    assert pairs == {(2, 2)}
    assert _predict(pattern, pp=2, schedule="interleaved:2").feasible


def test_layer_counts_keep_each_segment_in_order():
    from scalemodel.cost.mamba import layer_counts
    got = layer_counts("M*|-E|E")
    assert got.segments == 3 and got.segment_kinds == ((1, 1, 0, 0), (0, 0, 1, 1), (0, 0, 0, 1))
    assert layer_counts("M*-E").segment_kinds == ()
