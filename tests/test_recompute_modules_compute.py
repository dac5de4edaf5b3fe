"""What selective recompute repeats, by recompute_modules (Megatron-Core --recompute-modules): the compute side.

Megatron-Core (core_dev_r0.15.0 @0d8e0714) recomputes the attention core only when core_attn is named
(attention.py ``checkpoint_core_attention``), MLA's Q and KV up-projections with mla_up_proj
(multi_latent_attention.py ``qkv_up_checkpoint``), and the routed experts' activation with moe_act (experts.py
``activation_recompute``). The values below are worked out by hand from the roofline of cost/compute.py's module
docstring, not read back from the implementation."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)


def _gemm(m: float, n: float, k: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def _mods(*names: str) -> int:
    return memory.recompute_modules_code(",".join(names))


# an MLA layer: h 1024, 8 heads of d 96 (64 nope + 32 rope), d_v 64, r_q 256, r_kv 128; 16 experts top-2, f_e 256
MLA = shape(layers=2, hidden=1024, heads=8, vocab=1000, head_dim=96, v_head_dim=64, q_lora_rank=256, kv_lora_rank=128,
            qk_rope_head_dim=32, gated_mlp=True, ffn_hidden=2048, moe_experts=16, moe_top_k=2, moe_ffn_hidden=256)


def _layer(mods: int, moe: bool = True) -> compute.LayerTime:
    return compute.layer_compute_time(MLA, micro_batch=2, seq_len=512, recompute="selective", moe=moe,
                                      flash_attention=True, recompute_modules=mods, **KW)


def test_mla_up_proj_alone_repeats_the_up_projections_not_the_core() -> None:
    T = 2 * 512
    q_up = _gemm(T, 8 * 96, 256)  # r_q -> a d
    kv_up = _gemm(T, 8 * (64 + 64), 128)  # r_kv -> a (d_nope + d_v)
    lt = _layer(_mods("mla_up_proj"))
    assert float(lt.recompute) == pytest.approx(q_up + kv_up, rel=1e-12)
    both = _layer(_mods("core_attn", "mla_up_proj"))
    assert float(both.recompute) == pytest.approx(float(lt.attention_core) + q_up + kv_up, rel=1e-12)


def test_default_is_the_core_and_moe_act_the_experts_activation() -> None:
    default = _layer(0)
    assert float(default.recompute) == pytest.approx(float(default.attention_core), rel=1e-12)
    assert float(_layer(_mods("core_attn")).recompute) == float(default.recompute)
    # routed experts' SwiGLU: 3 eb bytes per element of T k f_e (gate and up read, product written)
    act = 3 * 2 * (2 * 512) * 2 * 256 / (HBM * MEM)
    assert float(_layer(_mods("moe_act")).recompute) == pytest.approx(act, rel=1e-12)
    assert float(_layer(_mods("moe_act"), moe=False).recompute) == 0.0  # a dense layer has no experts
    # without MLA the up-projection module recomputes nothing
    gqa = shape(layers=2, hidden=1024, heads=8, kv_heads=2, vocab=1000)
    lt = compute.layer_compute_time(gqa, micro_batch=2, seq_len=512, recompute="selective", flash_attention=True,
                                    recompute_modules=_mods("mla_up_proj"), **KW)
    assert float(lt.recompute) == 0.0


def test_full_and_none_ignore_the_modules() -> None:
    for mods in (0, _mods("mla_up_proj"), _mods("moe_act")):
        full = compute.layer_compute_time(MLA, micro_batch=2, seq_len=512, recompute="full", moe=True,
                                          flash_attention=True, recompute_modules=mods, **KW)
        assert float(full.recompute) == pytest.approx(float(full.forward), rel=1e-12)
        none = compute.layer_compute_time(MLA, micro_batch=2, seq_len=512, recompute="none", moe=True,
                                          flash_attention=True, recompute_modules=mods, **KW)
        assert float(none.recompute) == 0.0
    grid = compute.layer_compute_time(MLA, micro_batch=2, seq_len=512, recompute="selective", moe=True,
                                      flash_attention=True, recompute_modules=np.asarray([0, _mods("mla_up_proj")]),
                                      **KW)
    assert grid.recompute.shape == (2,) and grid.recompute[0] > grid.recompute[1]


# --- hardware FLOPs follow the same modules (transformer.recomputed_modules, the one rule) --------------------------


def test_hardware_flops_count_what_the_compute_time_repeats() -> None:
    """Per layer and sequence of the MLA shape above (s 512): the attention core 2 s s a (d + d_v) =
    2 x 512 x 512 x 8 x 160 = 671,088,640 FLOP; MLA's up-projections 2 s (r_q a d + r_kv a (d_nope + d_v)) =
    2 x 512 x (256 x 768 + 128 x 1024) = 335,544,320 FLOP; the experts' activation function no FLOP (no
    elementwise FLOP is counted). Hardware - model FLOPs for B = 3 sequences, L = 2 layers = 6 x the per-layer sum,
    and the layer's recompute time is the same modules' seconds (the GEMM roofline by hand)."""
    from scalemodel.cost.transformer import training_flops

    core, up = 2 * 512 * 512 * 8 * (96 + 64), 2 * 512 * (256 * 8 * 96 + 128 * 8 * (64 + 64))
    assert (core, up) == (671_088_640, 335_544_320)
    T = 2 * 512
    up_s = _gemm(T, 8 * 96, 256) + _gemm(T, 8 * (64 + 64), 128)
    act_s = 3 * 2 * T * 2 * 256 / (HBM * MEM)
    core_s = float(_layer(0).attention_core)
    for names, flops, seconds in (((), core, core_s), (("core_attn",), core, core_s), (("mla_up_proj",), up, up_s),
                                  (("moe_act",), 0, act_s), (("core_attn", "mla_up_proj"), core + up, core_s + up_s),
                                  (("jax_dots",), core, core_s)):
        f = training_flops(MLA, 512, 3, "selective", _mods(*names))
        assert float(f.hardware - f.model) == pytest.approx(6 * flops, rel=1e-12), names
        assert float(f.recompute) == pytest.approx(6 * flops, rel=1e-12), names
        assert float(_layer(_mods(*names)).recompute) == pytest.approx(seconds, rel=1e-12), names
    # full and none ignore the modules; a model without MLA recomputes nothing for mla_up_proj
    full = training_flops(MLA, 512, 3, "full")
    assert float(training_flops(MLA, 512, 3, "full", _mods("moe_act")).hardware) == float(full.hardware)
    assert float(training_flops(MLA, 512, 3, "none", _mods("mla_up_proj")).recompute) == 0.0
    gqa = shape(layers=2, hidden=1024, heads=8, kv_heads=2, vocab=1000)
    assert float(training_flops(gqa, 512, 3, "selective", _mods("mla_up_proj")).recompute) == 0.0


def test_engine_hfu_uses_the_recompute_modules() -> None:
    """Through predict: an MLA model with MTP (D = 1, whose block is a layer under selective recompute too), 4
    layers, B = 8 sequences of 1024: hardware - model = B (L + D) x per-layer FLOPs of the named modules:
    core 2 s s a (d + d_v) = 2 x 1024^2 x 16 x (192 + 128) = 10,737,418,240; up-projections
    2 s (r_q a d + r_kv a (d_nope + d_v)) = 2 x 1024 x (512 x 16 x 192 + 256 x 16 x (128 + 128)) = 5,368,709,120."""
    from scalemodel.engine.predict import predict
    from scalemodel.specs import StrategySpec, TrainingSpec, TransformerWorkload, load_cluster
    from scalemodel.specs.workload import MLASpec

    wl = TransformerWorkload(name="t", layers=4, hidden=2048, heads=16, seq_len=1024, vocab=32000, gated_mlp=True,
                             ffn_hidden=4096, mtp_layers=1,
                             mla=MLASpec(kv_lora_rank=256, q_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                         v_head_dim=128))
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision="bf16", seq_len=1024)
    core, up = 2 * 1024**2 * 16 * 320, 2 * 1024 * (512 * 16 * 192 + 256 * 16 * 256)
    for mods, per_layer in (("", core), ("mla_up_proj", up), ("core_attn,mla_up_proj", core + up), ("moe_act", 0)):
        st = StrategySpec(tp=1, pp=1, dp=8, recompute="selective", recompute_modules=mods, flash_attention=True)
        fl = predict(load_cluster("dgx-h100"), wl, 8, tr, st).flops
        assert fl["hardware_flops_per_step"] - fl["model_flops_per_step"] == pytest.approx(8 * 5 * per_layer,
                                                                                           rel=1e-9), mods
