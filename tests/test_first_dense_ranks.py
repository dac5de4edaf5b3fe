"""Leading dense layers (DeepSeek-V3's first_k_dense_replace 3 of 61) sit on the first pipeline rank: Megatron-Core
builds a rank's layers in order (transformer_block.py, get_transformer_layer_offset) and each layer's MLP kind from
its global number (gpt_layer_specs.py get_gpt_decoder_block_spec, moe_layer_freq / first_k_dense), so each rank is
priced on its own layers (pipeline_ranks._kinds_ranks, pipeline_ranks._kinds_part_job), not on the model's mean layer.

The small model: 4 layers, h 1024, 8 heads (MHA), gated FFN 4096, vocab 32000 untied, no biases; MoE from layer 1
(first_dense 1): 8 experts of width 512, top 2, one shared expert. pp 2: rank 0 holds layers 0-1 ("de"), rank 1
layers 2-3 ("ee"). The values below are computed by hand from these widths."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import transformer
from scalemodel.engine import layer_compute, pipeline_ranks, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from scalemodel.specs.workload import MoESpec, TransformerWorkload

H, F, V, FE, E = 1024, 4096, 32_000, 512, 8
SMALL = TransformerWorkload(name="mini-dsv3", layers=4, hidden=H, heads=8, ffn_hidden=F, vocab=V, seq_len=2048,
                            gated_mlp=True, biases=False, tied_embeddings=False, dropout=False,
                            moe=MoESpec(experts=E, top_k=2, ffn_hidden=FE, shared_experts=1, first_dense=1))
ATTN = 4 * H * H + 2 * H  # fused QKV 3h^2, proj h^2, two RMSNorm gains
DENSE_MLP = 3 * H * F
MOE_NON_ROUTED = H * E + 3 * H * FE  # router + the shared expert
EXPERT = 3 * H * FE


def _job_grid(pp: int = 2, ep: int = 2, **kw):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("dgx-h100"), SMALL, TrainingSpec(precision="bf16"))
    gpus = 2 * pp * ep
    st = StrategySpec(dp=2 * ep, pp=pp, ep=ep, **kw)
    g = grid_from_strategy(st, TrainingSpec(global_batch=gpus * 2, precision="bf16"), gpus, job)
    return job, g


def test_layer_kinds_by_position() -> None:
    """MoE layers at 1-based positions F + j e: DeepSeek-V3 (F 3, e 1) layers 0-2 dense, 3-60 MoE; F 1 e 1 on 4
    layers "deee"; e 2 on 6 layers positions 2, 4, 6."""
    job = build_job(load_cluster("dgx-h100"), load_workload("deepseek-v3"), TrainingSpec())
    assert transformer.layer_kinds(job.shape) == "ddd" + "e" * 58
    assert transformer.layer_kinds(build_job(load_cluster("dgx-h100"), SMALL, TrainingSpec()).shape) == "deee"
    every2 = SMALL.model_copy(update={"layers": 6, "moe": MoESpec(experts=E, top_k=2, ffn_hidden=FE, every=2)})
    assert transformer.layer_kinds(build_job(load_cluster("dgx-h100"), every2, TrainingSpec()).shape) == "dedede"
    assert transformer.kind_intervals("ddeede") == ((0, 1), (1, 1), (2, 1))
    assert transformer.kind_intervals("de") == ((1, 1),)


def test_ranks_hold_their_own_layers() -> None:
    job, g = _job_grid()
    splits = pipeline_ranks._rank_layers(job, g)
    assert splits is not None and [sp.ranks for sp in splits] == [["de", "ee"]]
    # every layer MoE (first_dense 0): the mean layer is every rank's, no split
    moe_all = SMALL.model_copy(update={"moe": MoESpec(experts=E, top_k=2, ffn_hidden=FE, shared_experts=1)})
    job_all = build_job(load_cluster("dgx-h100"), moe_all, TrainingSpec(precision="bf16"))
    assert not pipeline_ranks._rank_layers(job_all, g)


def test_each_rank_parameters_by_hand() -> None:
    """ep 2: rank 0 = 2 attention blocks + the dense MLP + one MoE layer (router, shared expert, 8 / 2 routed
    experts) + the word embedding; rank 1 = 2 attention blocks + 2 MoE layers + the final norm + the output layer.
    The mean layer gave each rank 1.5 MoE layers and half a dense MLP."""
    job, g = _job_grid()
    rank0 = 2 * ATTN + DENSE_MLP + MOE_NON_ROUTED + E // 2 * EXPERT + V * H
    rank1 = 2 * ATTN + 2 * (MOE_NON_ROUTED + E // 2 * EXPERT) + H + V * H
    assert float(pipeline_ranks._rank_params(job, g, "de", 0)) == pytest.approx(rank0, rel=1e-12)
    assert float(pipeline_ranks._rank_params(job, g, "ee", 1)) == pytest.approx(rank1, rel=1e-12)
    mean1 = 2 * ATTN + 0.5 * DENSE_MLP + 1.5 * (MOE_NON_ROUTED + E // 2 * EXPERT) + H + V * H
    assert float(pipeline_ranks._rank_params(job, g, "tt", 1)) == pytest.approx(mean1, rel=1e-12)  # the mean layer


def test_each_rank_compute_and_expert_traffic_are_its_own_layers() -> None:
    """Rank 1's two MoE layers: its expert-parallel all-to-alls are 2 MoE layers', 4/3 of the mean layer's 1.5 at
    2 layers; its compute is twice one MoE layer's (the model with every layer MoE, 1 layer, less the rank without
    layers), rank 0's one dense and one MoE layer's."""
    job, g = _job_grid()
    groups = step.parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                                  layout=g.layout)
    two = np.full(1, 2.0)
    ee, de = pipeline_ranks._part_job(job, "ee"), pipeline_ranks._part_job(job, "de")
    assert ee is not job and de is not job
    assert float(ee.shape.moe_layers) == 4.0 and float(de.shape.moe_layers) == 2.0  # n_e L / n
    stage = step._stage_memo(job, g, groups)
    mp_ee, mp_mean = stage(two, False, ee).mp, stage(two, False).mp
    assert float(mp_mean["ep"][0]) > 0
    assert float(mp_ee["ep"][0]) == pytest.approx(float(mp_mean["ep"][0]) * 2.0 / 1.5, rel=1e-12)

    def fwd(j, n: float) -> float:  # type: ignore[no-untyped-def]
        return float(layer_compute._compute_per_microbatch(j, g, np.full(1, n), logits_on_stage=False)["forward"][0])

    moe_one, dense_one = step._one_kind_job(job, "moe"), step._one_kind_job(job, "dense")
    base = fwd(job, 0.0)
    assert fwd(ee, 2.0) - base == pytest.approx(2.0 * (fwd(moe_one, 1.0) - base), rel=1e-9)
    assert fwd(de, 2.0) - base == pytest.approx(fwd(moe_one, 1.0) + fwd(dense_one, 1.0) - 2.0 * base, rel=1e-9)


def test_the_step_is_priced_at_the_ranks_own_layers(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """pp 2: the pipeline runs at the busier rank's pace, rank 1's two MoE layers (here the slower): the step is
    longer than the mean layer's pricing, which gave rank 1 1.5 MoE layers."""
    job, g = _job_grid()
    with_ranks = float(np.ravel(step.evaluate(job, g).step_time)[0])
    monkeypatch.setattr(pipeline_ranks, "_kinds_ranks", lambda job, g: pipeline_ranks._given_ranks(job, g))
    pipeline_ranks._KINDS_RANKS_MEMO.clear()
    mean = float(np.ravel(step.evaluate(job, g).step_time)[0])
    pipeline_ranks._KINDS_RANKS_MEMO.clear()
    assert with_ranks > mean


def test_a_model_deeper_than_the_placement_bound_keeps_the_mean_layer() -> None:
    """pipeline_ranks.MAX_PLACED_LAYERS bounds the O(L) kind strings a split builds: deeper, every rank is the mean
    layer."""
    deep = SMALL.model_copy(update={"layers": pipeline_ranks.MAX_PLACED_LAYERS + 2})
    job = build_job(load_cluster("dgx-h100"), deep, TrainingSpec(precision="bf16"))
    st = StrategySpec(dp=4, pp=2, ep=2)
    g = grid_from_strategy(st, TrainingSpec(global_batch=16, precision="bf16"), 8, job)
    assert not pipeline_ranks._rank_layers(job, g)
