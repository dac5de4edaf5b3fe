"""Selective recompute of the dense MLP (recompute_modules mlp; Megatron-Core --recompute-modules mlp,
transformer_layer.py ``recompute_mlp``: ``self.mlp`` under ``tensor_parallel.checkpoint`` in layers that are not MoE
layers, NVIDIA/Megatron-LM@d98e8a64dd). The backward repeats one forward of the MLP block (the norm fused into
linear_fc1, both GEMMs, the activation, its TP collectives); its activations drop to the residual stream the fused
norm reads. Values worked out by hand from the roofline in cost/compute.py's docstring and the activation formulas of
cost/memory.py's, not read back from the implementation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape, training_flops
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)
B, S, H, F = 2, 512, 1024, 2048
T = B * S
SBH = S * B * H

GQA = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=F)
MOE = shape(layers=4, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=F, moe_experts=16,
            moe_top_k=2, moe_ffn_hidden=256, moe_first_dense=1)


def _gemm(m: float, n: float, k: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def _mods(*names: str) -> int:
    return memory.recompute_modules_code(",".join(names))


def _recompute(sh, mods: int, moe: bool = False, **kw) -> float:
    return float(compute.layer_compute_time(sh, micro_batch=B, seq_len=S, recompute="selective", moe=moe,
                                            flash_attention=True, recompute_modules=mods, **KW, **kw).recompute)


def test_dense_layer_repeats_its_mlp_forward() -> None:
    # up (gate and up fused) T x 2F x H, down T x H x F; fused norm 2 eb h and SwiGLU 3 eb F per token
    want = _gemm(T, 2 * F, H) + _gemm(T, H, F) + (2 * 2 * H + 3 * 2 * F) * T / (HBM * MEM)
    assert _recompute(GQA, _mods("mlp")) == pytest.approx(want, rel=1e-12)
    # beside core_attn, added to the core's recompute
    core = _recompute(GQA, _mods("core_attn"))
    assert _recompute(GQA, _mods("core_attn", "mlp")) == pytest.approx(core + want, rel=1e-12)


def test_tensor_parallel_and_sequence_parallel_split_it() -> None:
    want = _gemm(T, F, H) + _gemm(T, H, F / 2) + (2 * 2 * H / 2 + 3 * 2 * F / 2) * T / (HBM * MEM)
    assert _recompute(GQA, _mods("mlp"), tp=2, sequence_parallel=True) == pytest.approx(want, rel=1e-12)


def test_moe_layers_are_left_alone() -> None:
    assert _recompute(MOE, _mods("mlp"), moe=True) == 0.0


def test_hardware_flops_add_the_dense_mlp_gemms() -> None:
    # MOE: 1 dense layer of 4; 2 s (3 h F) per sequence, 8 sequences
    base = training_flops(MOE, S, 8, "selective", _mods("core_attn"))
    mlp = training_flops(MOE, S, 8, "selective", _mods("core_attn", "mlp"))
    assert float(mlp.hardware - base.hardware) == pytest.approx(1 * 2 * S * 3 * H * F * 8, rel=1e-12)
    assert float(mlp.model) == float(base.model)


@pytest.mark.parametrize("fp8, gemm_in", [(False, 2.0), (True, 1.0)])
def test_activations_drop_the_mlp(fp8: bool, gemm_in: float) -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, fp8_inputs=fp8)
    base = float(memory.activation_bytes_per_layer(GQA, recompute_modules=_mods("core_attn"), **kw))
    mlp = float(memory.activation_bytes_per_layer(GQA, recompute_modules=_mods("core_attn", "mlp"), **kw))
    # gated: gate and up outputs 4 F, the product (the down-projection's input) gemm_in F, the fused norm's
    # output (linear_fc1's saved input) gemm_in h, per token
    assert base - mlp == pytest.approx((4 + gemm_in) * S * B * F + gemm_in * SBH, rel=1e-12)
    moe_base = float(memory.activation_bytes_per_layer(MOE, moe=True, recompute_modules=_mods("core_attn"), **kw))
    moe_mlp = float(memory.activation_bytes_per_layer(MOE, moe=True, recompute_modules=_mods("core_attn", "mlp"),
                                                      **kw))
    assert moe_base == moe_mlp


def test_stage_holds_one_mlp_block_as_working_set() -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, embedding=False)
    base = float(memory.activation_bytes(GQA, recompute_modules=_mods("core_attn"), **kw))
    mlp = float(memory.activation_bytes(GQA, recompute_modules=_mods("core_attn", "mlp"), **kw))
    block = 6 * S * B * F + 2 * SBH
    assert base - mlp == pytest.approx(2 * block - block, rel=1e-12)  # 2 layers freed, one re-materialised


LLAMA = TransformerWorkload(name="dense", layers=8, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                            gated_mlp=True, vocab=128256, seq_len=4096, tied_embeddings=False)


def _run(**strategy):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), LLAMA, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    return evaluate(job, g)


@pytest.mark.parametrize("sp", [False, True])
def test_tp_collectives_of_the_mlp_run_again(sp: bool) -> None:
    """A layer's forward runs 2 TP collectives (after attention, after the MLP); full recompute runs both again,
    mlp one of them: the added traffic is half full recompute's (the backward's is the same in all three)."""
    kw = dict(tp=4, dp=2, sequence_parallel=sp)
    base = float(_run(recompute="selective", recompute_modules="core_attn", **kw).breakdown["tp_comm"][0])
    mlp = float(_run(recompute="selective", recompute_modules="core_attn,mlp", **kw).breakdown["tp_comm"][0])
    full = float(_run(recompute="full", **kw).breakdown["tp_comm"][0])
    assert base > 0 and mlp - base == pytest.approx((full - base) / 2, rel=1e-9)


def test_cli_warns_where_there_is_no_dense_mlp(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["predict", "-c", "dgx-h100", "-n", "64", "--set", "strategy.recompute=selective",
            "--set", "strategy.recompute_modules=mlp"]
    moe = cli(*base, "-m", "mixtral-8x7b")  # every layer an MoE layer
    assert moe.code == 0 and "mlp recomputes nothing" in moe.err
    dense = cli(*base, "-m", "llama3-8b")
    assert dense.code == 0 and "recomputes nothing" not in dense.err


PARALLEL = shape(layers=2, hidden=H, heads=8, vocab=1000, gated_mlp=False, ffn_hidden=F, parallel_block=True,
                 norms_per_layer=1)


def test_parallel_block_recomputes_nothing() -> None:
    """Megatron-Core has no parallel (GPT-J) block: mlp there repeated the GEMMs, FLOPs and TP collective while the
    memory kept the MLP's bytes (its shared input can't go), a cost with nothing saved; now nothing either way."""
    assert _recompute(PARALLEL, _mods("mlp")) == 0.0
    assert _recompute(PARALLEL, _mods("core_attn", "mlp")) == _recompute(PARALLEL, _mods("core_attn"))
    base = training_flops(PARALLEL, S, 8, "selective", _mods("core_attn"))
    mlp = training_flops(PARALLEL, S, 8, "selective", _mods("core_attn", "mlp"))
    assert float(mlp.hardware) == float(base.hardware)


def test_cli_warns_on_a_parallel_block(cli) -> None:  # type: ignore[no-untyped-def]
    args = ["predict", "-c", "dgx-h100", "-n", "8", "--tp", "2", "-m", str(ROOT / "examples/workloads/gpt-j-6b.yaml"),
            "--set", "strategy.recompute=selective"]
    base = cli(*args, "--json")
    mlp = cli(*args, "--set", "strategy.recompute_modules=core_attn,mlp", "--json")
    assert mlp.code == 0 and "mlp recomputes nothing" in mlp.err
    assert json.loads(mlp.out)["step_time_s"] == json.loads(base.out)["step_time_s"]


# --- fp8: the recomputed MLP quantizes its inputs again (docs/model.md#recompute-mlp) ---

def _fp8_job(cluster: str, recipe: str, **strategy):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", fp8_recipe=recipe, seq_len=4096)
    job = build_job(load_cluster(cluster), LLAMA, tr)
    st = StrategySpec(**strategy)
    return job, grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)


@pytest.mark.parametrize("cluster, recipe, per_x_fc1, per_x_fc2, kernel_factor", [
    # H100, delayed, tp 1: linear_fc1's input is its fused norm's output, which writes FP8 (1 byte for 2: -1) and a
    # transpose kernel (read 1 + write 1: +2) -> +1 an element of T h; linear_fc2's input cast: read 2, write the
    # row-wise 1 and the transposed 1 -> 4 an element of T f
    ("dgx-h100", "delayed", 1.0, 4.0, 1.0),
    # B200, MXFP8 (norm unfused, no transposed copy): read 2, write both copies with an E8M0 scale per 32 elements;
    # Blackwell's MXFP8 cast kernels at 1.282 x their roofline price (tests/test_cast_kernel_rate.py)
    ("dgx-b200", "mxfp8", 2 + 2 * (1 + 1 / 32), 2 + 2 * (1 + 1 / 32), 1.282),
])
def test_fp8_casts_of_the_recomputed_mlp_by_hand(cluster: str, recipe: str, per_x_fc1: float,
                                                 per_x_fc2: float, kernel_factor: float) -> None:
    from scalemodel.engine import layer_compute
    job, g = _fp8_job(cluster, recipe, tp=1, dp=8, recompute="selective", recompute_modules="core_attn,mlp")
    T = 1 * 4096
    nbytes = per_x_fc1 * T * 4096 + per_x_fc2 * T * 14336  # X of fc1 (T h), X of fc2 (T f): forward casts only
    want = kernel_factor * nbytes / (job.memory_bandwidth * job.memory_efficiency)
    assert float(np.ravel(layer_compute.fp8_mlp_recompute_casts(job, g))[0]) == pytest.approx(want, rel=1e-12)
    # not named: nothing
    job, g = _fp8_job(cluster, recipe, tp=1, dp=8, recompute="selective", recompute_modules="core_attn")
    assert float(np.ravel(layer_compute.fp8_mlp_recompute_casts(job, g))[0]) == 0.0


def test_fp8_casts_of_the_recomputed_mlp_under_tp_and_sp_by_hand() -> None:
    """H100 delayed, tp 2 with SP: linear_fc1 quantizes its local shard row-wise (the fused norm: 1 - 2 = -1 an
    element of T h / 2), all-gathers it in FP8 and transposes the gathered tensor (2 an element of T h); linear_fc2
    its T f / 2 input (read 2, write 1 + 1 transposed)."""
    from scalemodel.engine import layer_compute
    job, g = _fp8_job("dgx-h100", "delayed", tp=2, dp=4, sequence_parallel=True, recompute="selective",
                      recompute_modules="core_attn,mlp")
    T, h, f = 4096, 4096, 14336
    nbytes = -1.0 * T * h / 2 + 2.0 * T * h + 4.0 * T * f / 2
    want = nbytes / (job.memory_bandwidth * job.memory_efficiency)
    assert float(np.ravel(layer_compute.fp8_mlp_recompute_casts(job, g))[0]) == pytest.approx(want, rel=1e-12)


def test_fp8_casts_join_each_recomputed_dense_layer(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The step's backward carries the casts once per dense layer on the stage (8 layers, pp 1)."""
    from scalemodel.engine import layer_compute
    job, g = _fp8_job("dgx-h100", "delayed", tp=1, dp=8, recompute="selective", recompute_modules="core_attn,mlp")
    monkeypatch.setattr(layer_compute, "fp8_mlp_recompute_casts", lambda job, g: np.asarray([0.0]))
    base = float(evaluate(job, g).breakdown["compute"][0])
    monkeypatch.setattr(layer_compute, "fp8_mlp_recompute_casts", lambda job, g: np.asarray([1e-3]))
    more = float(evaluate(job, g).breakdown["compute"][0])
    micro = 16 // 8  # micro-batches per step on each of the 8 data-parallel ranks
    assert more - base == pytest.approx(8 * 1e-3 * micro, rel=1e-9)
