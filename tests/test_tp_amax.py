"""Transformer Engine's per-linear TP amax all-reduces of current scaling and NVFP4 under sequence parallelism, counted
by hand (docs/model.md#tp-amax).

With ``sequence_parallel`` a column-parallel linear's input quantizer and a row-parallel linear's grad-output quantizer
all-reduce their amax (MAX) over the TP group and wait on it before the cast (NVIDIA/TransformerEngine v2.16
pytorch/module/linear.py ``_customize_quantizers_float8_current_scaling`` / ``_customize_quantizers_nvfp4``;
pytorch/csrc/quantizer.cpp ``allreduce_coalesced(...)->wait()``): 4 bytes (current scaling's one amax) or 8 (NVFP4's
row- and column-wise amaxes) per call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.choices import Recompute
from scalemodel.cost import collectives as coll
from scalemodel.cost import compute
from scalemodel.cost.placement import place
from scalemodel.cost.transformer import RECOMPUTE_MODULES
from scalemodel.engine import step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.layer_compute import module_recipe
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import ModulePrecisionSpec, StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec

DENSE: dict[str, Any] = dict(name="d", layers=4, hidden=64, heads=4, kv_heads=2, ffn_hidden=128, gated_mlp=True,
                             vocab=128, seq_len=256, tied_embeddings=False, biases=False)
MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 16, "heads": 8}


def _shape(**over: Any) -> Any:
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="fp8", seq_len=256, fp8_recipe="tensorwise")
    return build_job(load_cluster("dgx-h100"), TransformerWorkload(**dict(DENSE, **over)), tr,
                     straggler_cv=0.0).shape


def _counts(sh: Any, recipe: str, **kw: Any) -> tuple[float, float]:
    f, b = compute.tp_amax_reductions(sh, recipe=recipe, **kw)
    return float(np.ravel(f)[0]), float(np.ravel(b)[0])


@pytest.mark.parametrize("recipe", ["tensorwise", "nvfp4"])
def test_dense_layer_two_each_way(recipe: str) -> None:
    """A GQA layer: forward linear_qkv and linear_fc1 (column-parallel inputs), backward linear_proj and linear_fc2
    (row-parallel output gradients): 2 and 2."""
    assert _counts(_shape(), recipe) == (2.0, 2.0)


@pytest.mark.parametrize("recipe", ["delayed", "mxfp8", "blockwise"])
def test_other_recipes_none(recipe: str) -> None:
    """Delayed scaling reduces once per chunk (its own term); MXFP8 and blockwise scale per block in the cast."""
    assert _counts(_shape(), recipe) == (0.0, 0.0)


def test_mla_up_projections_and_moe_shared_experts() -> None:
    """MLA with a q low rank: the q and kv down-projections are replicated (no reduction), q_up and kv_up are
    column-parallel: forward 2 + linear_fc1 = 3, backward linear_proj + linear_fc2 = 2. Every layer MoE with one
    shared expert: the shared experts' linear_fc1 / linear_fc2 stand for the MLP's (routed GroupedLinear: none), and
    the shared linear_fc1 quantizes its saved input again in the backward (below): 3 and 3; without shared experts
    2 and 1."""
    mla = dict(kv_heads=4, mla=MLASpec(kv_lora_rank=16, q_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                      v_head_dim=16))
    assert _counts(_shape(**mla), "nvfp4") == (3.0, 2.0)
    moe = {"experts": 8, "top_k": 2, "ffn_hidden": 32}
    assert _counts(_shape(**mla, moe=dict(moe, shared_experts=1)), "nvfp4") == (3.0, 3.0)
    assert _counts(_shape(**mla, moe=moe), "nvfp4") == (2.0, 1.0)


def test_hybrid_by_kind_and_module_precision() -> None:
    """'M-' x 4 (8 layers): 4 Mamba mixers (in_proj forward, out_proj backward) and 4 MLPs: per mean layer 8 / 8 = 1
    each way; out_proj in MXFP8 (te_quant.cfg's) drops its 4: backward 0.5. '*-' x 4 with the attention block in BF16:
    only the 4 MLPs, 0.5 each way."""
    sh = _shape(layers=8, hybrid={"pattern": "M-" * 4, "mamba": MAMBA})
    assert _counts(sh, "nvfp4") == (1.0, 1.0)
    assert _counts(sh, "nvfp4", mamba_out_recipe="mxfp8") == (1.0, 0.5)
    sh = _shape(layers=8, hybrid={"pattern": "*-" * 4, "mamba": None})
    assert _counts(sh, "tensorwise", attention_recipe="") == (0.5, 0.5)


def _job(cluster: str, precision: str, recipe: str | None, **training: Any) -> tuple[Any, Any, Any]:
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision=precision, seq_len=256, fp8_recipe=recipe,
                      **training)
    job = build_job(load_cluster(cluster), TransformerWorkload(**DENSE), tr, straggler_cv=0.0)
    return job, tr, grid_from_strategy(StrategySpec(tp=2, dp=4, sequence_parallel=True), tr, 8, job)


def _tp_comm(job: Any, g: Any) -> float:
    return float(np.ravel(step.evaluate(job, g).breakdown["tp_comm"])[0])


@pytest.mark.parametrize(("cluster", "precision", "recipe", "nbytes", "low"),
                         [("dgx-h100", "fp8", "tensorwise", 4.0, 1.0), ("dgx-b200", "fp4", None, 8.0, 0.75)])
def test_step_adds_the_reductions_to_tp_comm(monkeypatch: pytest.MonkeyPatch, cluster: str, precision: str,
                                             recipe: str | None, nbytes: float, low: float) -> None:
    """tp 2 (SP), dp 4 on 8 GPUs: m = 32 / 4 = 8 micro-batches, 4 layers, each 2 forward + 2 backward all-reduces of
    ``nbytes`` over the 2 TP ranks (stride 1): tp_comm grows by 8 x 4 x 4 x t_allreduce against the same step without
    the term. NVFP4 with 1 of the 4 layers in BF16 (training.bf16_layers): 3/4 of it."""
    kw = {"bf16_layers": 1} if low < 1.0 else {}
    job, _, g = _job(cluster, precision, recipe, **kw)
    with_term = _tp_comm(job, g)
    monkeypatch.setattr(compute, "TP_AMAX_RECIPES", ())
    without = _tp_comm(job, g)
    t_ar = float(np.ravel(coll.group_time("allreduce", nbytes, place(2, 1.0, job.network)))[0])
    assert with_term - without == pytest.approx(8 * 4 * 4 * low * t_ar, rel=1e-9)
    assert t_ar > 0.0


def test_no_reduction_without_sequence_parallelism_or_tp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without SP the quantizers reduce nothing (each rank quantizes the whole replicated input); at tp 1 there is no
    TP group: the step is the same with or without the term."""
    job, tr, _ = _job("dgx-h100", "fp8", "tensorwise")
    grids = [grid_from_strategy(s, tr, 8, job) for s in (StrategySpec(tp=2, dp=4, sequence_parallel=False),
                                                           StrategySpec(tp=1, dp=8))]
    with_term = [_tp_comm(job, g) for g in grids]
    monkeypatch.setattr(compute, "TP_AMAX_RECIPES", ())
    assert [_tp_comm(job, g) for g in grids] == with_term


def test_module_precision_spec_is_honoured() -> None:
    """An NVFP4 run whose attention block is BF16 (te_quant.cfg's): the attention's linear_qkv / linear_proj quantize
    nothing, so only linear_fc1 / linear_fc2 reduce: 1 each way per layer."""
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="fp4", seq_len=256,
                      module_precision=ModulePrecisionSpec(attention_proj="bf16"))
    job = build_job(load_cluster("dgx-b200"), TransformerWorkload(**DENSE), tr, straggler_cv=0.0)
    f, b = compute.tp_amax_reductions(job.shape, recipe=job.fp8_recipe,
                                      attention_recipe=module_recipe(job, "attention_proj"))
    assert (float(np.ravel(f)[0]), float(np.ravel(b)[0])) == (1.0, 1.0)


def test_full_recompute_repeats_the_forward_reductions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full recompute re-runs each layer's forward in the backward, its 2 forward reductions with it: per layer and
    micro-batch 2 + 2 + 2 = 6 all-reduces of 4 bytes (current scaling) over the 2 TP ranks."""
    job, tr, _ = _job("dgx-h100", "fp8", "tensorwise")
    g = grid_from_strategy(StrategySpec(tp=2, dp=4, sequence_parallel=True, recompute="full"), tr, 8, job)
    with_term = _tp_comm(job, g)
    monkeypatch.setattr(compute, "TP_AMAX_RECIPES", ())
    t_ar = float(np.ravel(coll.group_time("allreduce", 4.0, place(2, 1.0, job.network)))[0])
    assert with_term - _tp_comm(job, g) == pytest.approx(8 * 4 * 6 * t_ar, rel=1e-9)


MOE_SHARED: dict[str, Any] = {"experts": 8, "top_k": 2, "ffn_hidden": 32, "shared_experts": 1}


def test_shared_expert_fc1_requantized_in_backward_none_when_overlapped() -> None:
    """Megatron-Core's SharedExpertMLP sets ``save_original_input`` on linear_fc1 for fp8 other than delayed (TE >= 2.6)
    and fp4 (TE >= 2.7) unless shared_experts is recomputed (NVIDIA/Megatron-LM 2d1fa8d372, the 26.04 container's,
    megatron/core/transformer/moe/shared_experts.py lines 131-145; since 781e765818), so TE's backward quantizes the
    saved BF16 shard again with the same input quantizer (amax reduction over TP) before its all-gather for the wgrad
    GEMM (TransformerEngine v2.16 pytorch/module/linear.py lines 862-910): one more backward reduction per shared
    FC1. With ``moe_shared_expert_overlap`` both shared linears get ``parallel_mode = None`` (shared_experts.py lines
    147-153; Megatron gathers in BF16 itself), so neither reduces. Every layer MoE with one shared expert, MLA with a
    q low rank: forward q_up, kv_up, shared linear_fc1 = 3; backward linear_proj, shared linear_fc2, shared
    linear_fc1's re-quantization = 3; overlapped: 2 and 1."""
    mla = dict(kv_heads=4, mla=MLASpec(kv_lora_rank=16, q_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                      v_head_dim=16))
    sh = _shape(**mla, moe=MOE_SHARED)
    assert _counts(sh, "nvfp4") == (3.0, 3.0)
    assert _counts(sh, "tensorwise", shared_expert_overlap=True) == (2.0, 1.0)


def test_step_drops_shared_expert_reductions_under_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step reads the strategy's moe_shared_expert_overlap: tp 2 (SP), dp 4, m = 8, 4 MoE layers of GQA + one
    shared expert, current scaling. Without overlap per layer 2 forward (linear_qkv, shared linear_fc1) and 3 backward
    (linear_proj, shared linear_fc2, shared linear_fc1 again): 8 x 4 x 5 all-reduces of 4 bytes over 2 ranks; with
    overlap 1 and 1: 8 x 4 x 2."""
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="fp8", seq_len=256, fp8_recipe="tensorwise")
    job = build_job(load_cluster("dgx-h100"), TransformerWorkload(**dict(DENSE, moe=MOE_SHARED)), tr,
                    straggler_cv=0.0)
    t_ar = float(np.ravel(coll.group_time("allreduce", 4.0, place(2, 1.0, job.network)))[0])
    for overlap, calls in ((False, 5), (True, 2)):
        g = grid_from_strategy(StrategySpec(tp=2, dp=4, sequence_parallel=True, moe_shared_expert_overlap=overlap),
                               tr, 8, job)
        with monkeypatch.context() as mp:
            with_term = _tp_comm(job, g)
            mp.setattr(compute, "TP_AMAX_RECIPES", ())
            without = _tp_comm(job, g)
        assert with_term - without == pytest.approx(8 * 4 * calls * t_ar, rel=1e-9)


@pytest.mark.parametrize(("modules", "extra"), [("mla_up_proj", 2.0), ("moe", 1.0), ("shared_experts", 0.0),
                                                ("core_attn", 0.0), ("moe_act", 0.0)])
def test_selective_recompute_repeats_the_reductions_it_reruns(modules: str, extra: float) -> None:
    """Selective recompute re-runs a module's forward in the backward, its quantizers' reductions with it (Megatron-LM
    d98e8a64dd): mla_up_proj the q_up and kv_up projections (multi_latent_attention.py lines 855-875, 983-988: 2),
    moe the whole MoE block with the shared linear_fc1 (1); shared_experts re-runs the shared linear_fc1 but then sets
    no save_original_input (shared_experts.py lines 147-161), so its backward re-quantization goes: net 0; core_attn
    and moe_act re-run no linear. Every layer MLA + MoE with one shared expert: 3 forward, 3 + extra backward."""
    mla = dict(kv_heads=4, mla=MLASpec(kv_lora_rank=16, q_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                      v_head_dim=16))
    sh = _shape(**mla, moe=MOE_SHARED)
    code = sum(RECOMPUTE_MODULES[m] for m in modules.split(","))
    assert _counts(sh, "nvfp4", recompute=int(Recompute.SELECTIVE), recompute_modules=code) == (3.0, 3.0 + extra)


def test_selective_recompute_of_the_dense_mlp() -> None:
    """recompute_modules mlp re-runs a dense layer's MLP forward (transformer_layer.py lines 992-1010 at d98e8a64dd),
    linear_fc1's reduction with it: GQA + dense MLP, 2 forward, 2 + 1 backward; not under full recompute's code
    (that is the caller's n_rec)."""
    sh = _shape()
    mlp = RECOMPUTE_MODULES["mlp"]
    assert _counts(sh, "tensorwise", recompute=int(Recompute.SELECTIVE), recompute_modules=mlp) == (2.0, 3.0)
    assert _counts(sh, "tensorwise", recompute=int(Recompute.FULL), recompute_modules=mlp) == (2.0, 2.0)


def test_step_counts_selective_recompute_of_the_mlp(monkeypatch: pytest.MonkeyPatch) -> None:
    """tp 2 (SP), dp 4, m = 8, 4 dense layers, current scaling, selective recompute of mlp: per layer 2 forward, 2
    backward and linear_fc1's again: 8 x 4 x 5 all-reduces of 4 bytes over 2 ranks."""
    job, tr, _ = _job("dgx-h100", "fp8", "tensorwise")
    g = grid_from_strategy(StrategySpec(tp=2, dp=4, sequence_parallel=True, recompute="selective",
                                        recompute_modules="mlp"), tr, 8, job)
    with_term = _tp_comm(job, g)
    monkeypatch.setattr(compute, "TP_AMAX_RECIPES", ())
    t_ar = float(np.ravel(coll.group_time("allreduce", 4.0, place(2, 1.0, job.network)))[0])
    assert with_term - _tp_comm(job, g) == pytest.approx(8 * 4 * 5 * t_ar, rel=1e-9)
