"""Selective recompute of the shared experts (recompute_modules shared_experts; Megatron-Core --recompute-modules
shared_experts, moe_layer.py ``shared_experts_recompute``: ``shared_experts_compute`` runs the shared experts under
``tensor_parallel.checkpoint`` / ``te_checkpoint``, NVIDIA/Megatron-LM@d98e8a64dd). The backward repeats the shared
experts' forward (their GEMMs and activation); their activations go, the block input staying (the router keeps it).
Values worked out by hand from the roofline of cost/compute.py and the activation formulas of cost/memory.py."""

from __future__ import annotations

import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape, training_flops

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)
B, S, H, FE = 2, 512, 1024, 256
T = B * S

# 16 experts top-2 of f_e 256 and 2 shared experts (shared width 512), SwiGLU
SH = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
           moe_top_k=2, moe_ffn_hidden=FE, moe_shared_experts=2)
NO_SHARED = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2048,
                  moe_experts=16, moe_top_k=2, moe_ffn_hidden=FE)


def _gemm(m: float, n: float, k: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def _mods(*names: str) -> int:
    return memory.recompute_modules_code(",".join(names))


def _recompute(sh, mods: int, moe: bool = True, **kw) -> float:
    return float(compute.layer_compute_time(sh, micro_batch=B, seq_len=S, recompute="selective", moe=moe,
                                            flash_attention=True, recompute_modules=mods, **KW, **kw).recompute)


# shared experts: up T x 2(512) x h, down T x h x 512, SwiGLU 3 eb T 512
SHARED = _gemm(T, 2 * 512, H) + _gemm(T, H, 512) + 3 * 2 * T * 512 / (HBM * MEM)


def test_repeats_the_shared_experts_forward() -> None:
    assert _recompute(SH, _mods("shared_experts")) == pytest.approx(SHARED, rel=1e-12)
    assert _recompute(SH, _mods("shared_experts"), moe=False) == 0.0  # a dense layer has none
    assert _recompute(NO_SHARED, _mods("shared_experts")) == 0.0
    # with moe: the block's forward (which runs them) and their own checkpoint once more
    moe = _recompute(SH, _mods("moe"))
    assert _recompute(SH, _mods("moe", "shared_experts")) == pytest.approx(moe + SHARED, rel=1e-12)


def test_tensor_parallel_splits_them() -> None:
    want = _gemm(T, 512, H) + _gemm(T, H, 256) + 3 * 2 * T * 256 / (HBM * MEM)
    assert _recompute(SH, _mods("shared_experts"), tp=2) == pytest.approx(want, rel=1e-12)


def test_hardware_flops() -> None:
    base = training_flops(SH, S, 8, "selective", _mods("core_attn"))
    more = training_flops(SH, S, 8, "selective", _mods("core_attn", "shared_experts"))
    # 2 MoE layers x 2 s (3 h 512) x 8 sequences
    assert float(more.hardware - base.hardware) == pytest.approx(2 * 2 * S * 3 * H * 512 * 8, rel=1e-12)
    assert float(more.model) == float(base.model)


@pytest.mark.parametrize("fp8, gemm_in", [(False, 2.0), (True, 1.0)])
def test_activations_drop_the_shared_experts(fp8: bool, gemm_in: float) -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, fp8_inputs=fp8, moe=True)
    base = float(memory.activation_bytes_per_layer(SH, recompute_modules=_mods("core_attn"), **kw))
    more = float(memory.activation_bytes_per_layer(SH, recompute_modules=_mods("core_attn", "shared_experts"), **kw))
    # gate and up outputs 4, the product (down-projection input) gemm_in, per element of the shared width 512
    assert base - more == pytest.approx((4 + gemm_in) * S * B * 512, rel=1e-12)
    # under moe the block's split bytes are gone already
    moe = float(memory.activation_bytes_per_layer(SH, recompute_modules=_mods("moe"), **kw))
    both = float(memory.activation_bytes_per_layer(SH, recompute_modules=_mods("moe", "shared_experts"), **kw))
    assert moe == both


def test_stage_holds_one_layers_shared_experts() -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, embedding=False)
    base = float(memory.activation_bytes(SH, recompute_modules=_mods("core_attn"), **kw))
    more = float(memory.activation_bytes(SH, recompute_modules=_mods("core_attn", "shared_experts"), **kw))
    block = 6 * S * B * 512
    assert base - more == pytest.approx(2 * block - block, rel=1e-12)  # 2 MoE layers freed, one re-materialised


def test_cli_warns_without_shared_experts(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--set", "strategy.recompute=selective",
            "--set", "strategy.recompute_modules=shared_experts")
    assert r.code == 0 and "shared_experts recomputes nothing: the model has no shared experts" in r.err


# --- the shared experts' TP collectives run again (docs/model.md#recompute-shared-experts) ---

def _moe_run(shared: int, **strategy):  # type: ignore[no-untyped-def]
    from scalemodel.engine.job import build_job, grid_from_strategy
    from scalemodel.engine.step import evaluate
    from scalemodel.specs import TransformerWorkload, load_cluster
    from scalemodel.specs.training import StrategySpec, TrainingSpec
    from scalemodel.specs.workload import MoESpec

    wl = TransformerWorkload(name="moe", layers=8, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                             gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                             moe=MoESpec(experts=8, top_k=2, ffn_hidden=2048, shared_experts=shared))
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    return float(evaluate(job, g).breakdown["tp_comm"][0])


@pytest.mark.parametrize("sp, layer", [(False, "eager"), (True, "megatron_te")])
def test_tp_collectives_of_the_shared_experts_run_again(sp: bool, layer: str) -> None:
    """Every layer an MoE layer: its forward runs 2 TP collectives (after attention; the MoE block's, which with
    shared experts is their linear_fc1 all-gather + linear_fc2 reduce-scatter, or all-reduce without SP); full
    recompute runs both again. shared_experts re-runs their checkpoint, so one of the two: half full recompute's
    added traffic; moe re-runs the block (and the shared experts in it) once, the two together twice: as much as full
    recompute adds (the backward's collectives are the same in all). etp 1: the routed tokens meet no TP collective,
    so the MoE block's only TP traffic is the shared experts' pair (docs/model.md#tp-comm-moe; with etp = tp the
    dispatcher's expert-TP all-gather / reduce-scatter join the block, tests/test_moe_tp_collectives.py). Without SP
    on an eager PyTorch layer: Megatron-Core refuses MoE at tp > 1 without SP (docs/model.md#moe-sp-required)."""
    kw = dict(tp=4, dp=2, sequence_parallel=sp, etp=1, layer_impl=layer)
    base = _moe_run(1, recompute="selective", recompute_modules="core_attn", **kw)
    shared = _moe_run(1, recompute="selective", recompute_modules="core_attn,shared_experts", **kw)
    moe = _moe_run(1, recompute="selective", recompute_modules="core_attn,moe", **kw)
    both = _moe_run(1, recompute="selective", recompute_modules="core_attn,moe,shared_experts", **kw)
    full = _moe_run(1, recompute="full", **kw)
    assert base > 0
    assert shared - base == pytest.approx((full - base) / 2, rel=1e-9)
    assert moe - base == pytest.approx((full - base) / 2, rel=1e-9)
    assert both - base == pytest.approx(full - base, rel=1e-9)
    # no shared experts: shared_experts recomputes nothing, so no collective again
    none = _moe_run(0, recompute="selective", recompute_modules="core_attn", **kw)
    assert _moe_run(0, recompute="selective", recompute_modules="core_attn,shared_experts", **kw) == none
    # tp 1: no TP collective at all
    assert _moe_run(1, recompute="selective", recompute_modules="shared_experts", tp=1, dp=8) == 0.0
