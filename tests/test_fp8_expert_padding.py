"""The experts' FP8 padding copies (strategy moe_fp8_padding): bytes and seconds against values worked out by hand
from the code path the function cites (Megatron-Core TEGroupedMLP.forward with fp8 runs Transformer Engine's
Fp8Padding before FC1 and Fp8Unpadding after FC2; each copies the whole routed-token tensor, read + write, and its
autograd backward copies the gradient back the other way)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import script_module, training_cases
from grid_helpers import HBM, TINY_MOE, one

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import predict
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")



def test_bytes_by_hand() -> None:
    # Qwen3-235B-A22B layer (h 4096, 128 experts, top-8), b 1, s 4096, EP 8: 8 * 4096 * 8 / 128 = 2048 tokens on each
    # of 16 local experts = 32,768 rows; padding + unpadding, each read + write of 32,768 x 4096 x 2 B
    qwen = shape(layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn_hidden=12288, vocab=151_936,
                 gated_mlp=True, moe_experts=128, moe_top_k=8, moe_ffn_hidden=1536)
    f, b = compute.fp8_expert_padding_bytes(qwen, micro_batch=1, seq_len=4096, ep=8)
    assert float(f) == 4 * 2 * 32_768 * 4096 == 1_073_741_824
    assert float(b) == float(f)
    # TP 2 with expert TP 1 and EP 32 (MoE parallel folding): the ep x etp = 32 ranks gather the sequence-parallel
    # tokens of their TP pairs: 32 * 4096 * 8 / (128 * 2) = 4096 tokens on each of 4 local experts = 16,384 rows
    f, _ = compute.fp8_expert_padding_bytes(qwen, micro_batch=1, seq_len=4096, tp=2, ep=32, etp=1)
    assert float(f) == 4 * 2 * 16_384 * 4096
    dense = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000)
    f, b = compute.fp8_expert_padding_bytes(dense, micro_batch=1, seq_len=128)
    assert float(f) == 0.0 and float(b) == 0.0


def _grid(job, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(dp=8, ep=8, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=16, micro_batch=2, precision="fp8"), 8, job)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_in_the_layer_times(h100, recompute) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY_MOE, TrainingSpec(precision="fp8"))
    assert job.memory_bandwidth == 3.35e12 and job.memory_efficiency == pytest.approx(0.88)
    # b 2 x s 2048 = 4096 tokens, EP 8: 8 * 4096 * 4 / 64 = 2048 tokens on each of 8 local experts = 16,384 rows
    per_moe_layer = 4 * 2 * 16_384 * 1024 / HBM  # forward, and again backward
    layers = np.asarray([4.0])  # 1 dense + 3 MoE layers: the per-layer mean carries 3/4 of a MoE layer's copies
    a = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute), layers)
    b = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute, moe_fp8_padding=True), layers)
    assert one(b["forward"] - a["forward"]) == pytest.approx(3 * per_moe_layer)
    again = per_moe_layer if recompute == "full" else 0.0  # full recompute repeats the forward's copies
    assert one(b["backward"] - a["backward"]) == pytest.approx(3 * (per_moe_layer + again))


def test_not_priced_without_fp8(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY_MOE, TrainingSpec(precision="bf16"))
    st = StrategySpec(dp=8, ep=8, moe_fp8_padding=True)
    g = grid_from_strategy(st, TrainingSpec(global_batch=16, micro_batch=2), 8, job)
    g0 = grid_from_strategy(StrategySpec(dp=8, ep=8), TrainingSpec(global_batch=16, micro_batch=2), 8, job)
    layers = np.asarray([4.0])
    assert one(layer_compute._compute_per_microbatch(job, g, layers)["total"]) == one(
        layer_compute._compute_per_microbatch(job, g0, layers)["total"])


def test_predict_compute_grows_by_the_hand_values(h100) -> None:  # type: ignore[no-untyped-def]
    """8 GPUs, pp 1, one micro-batch of 2 sequences per GPU: the compute part of the step grows by the forward and
    backward copies of the 3 MoE layers."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8")
    base = predict(h100, TINY_MOE, 8, tr, StrategySpec(dp=8, ep=8))
    more = predict(h100, TINY_MOE, 8, tr, StrategySpec(dp=8, ep=8, moe_fp8_padding=True))
    want = 3 * 2 * 4 * 2 * 16_384 * 1024 / HBM
    assert more.breakdown_s["compute"] - base.breakdown_s["compute"] == pytest.approx(want, rel=1e-9)
    assert more.strategy["moe_fp8_padding"] is True and base.strategy["moe_fp8_padding"] is False


def test_validation_rule_sets_the_field_for_the_alltoall_fp8_rows() -> None:
    """Megatron-Bridge 25.11: the all-to-all dispatcher's FP8 rows pad in the experts; the GB200 FP8 row dispatches
    with HybridEP, which pads in its permute; BF16 rows have no FP8 GEMM to pad for."""
    cases = training_cases()
    vt = script_module("validate_training")
    want = {"mb2511_b200_dsv3_mtp_fp8mx": True, "mb2511_b200_qwen3_235b_fp8mx": True,
            "mb2511_h100_qwen3_235b_fp8cs": True, "mb2511_gb200_qwen3_30b_fp8mx": False,
            "mb2511_gb200_dsv3_bf16": False}
    for cid, on in want.items():
        r = vt.predict_new_case(cases[cid])
        assert r.settings["moe_fp8_padding"] is on, cid


@pytest.mark.parametrize(("extra", "pads"), [
    ("", True),  # Megatron-LM's default dispatcher, allgather, leaves the padding to TEGroupedMLP
    ("--moe-token-dispatcher-type alltoall", True),
    # DeepEP pads its routing map only under --moe-router-padding-for-quantization (Megatron-LM 32f2c9cfdd
    # token_dispatcher.py _DeepepManager._pad_routing_map): TEGroupedMLP pads (moefp837); HybridEP pads in its dispatch
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", True),
    ("--moe-token-dispatcher-type flex", True),  # deepep is moe_flex_dispatcher_backend's default
    ("--moe-token-dispatcher-type flex --moe-enable-deepep", True),
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep", False),  # padded in the dispatch
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep --moe-router-padding-for-quantization",
     False),
    ("--moe-token-dispatcher-type alltoall --moe-router-padding-for-quantization", False),  # routing map padded
    ("--moe-token-dispatcher-type alltoall --moe-router-padding-for-fp8", False),  # its alias
])
def test_megatron_flags(tmp_path: Path, extra: str, pads: bool) -> None:
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "launch.sh"
    base = "--num-experts 64 --moe-router-topk 4 --expert-model-parallel-size 8 --moe-grouped-gemm"
    f.write_text(f"{base} --fp8-format hybrid --fp8-recipe mxfp8 {extra}\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy.get("moe_fp8_padding", False) is pads
    assert any("--num-experts" in u for u in sf.unused)  # still named as a model flag
    f.write_text(f"{base} --bf16 {extra}\n")  # no FP8 GEMM, no padding
    assert "moe_fp8_padding" not in read_strategy_file(str(f)).strategy
    f.write_text(f"--num-experts 64 --fp8-format e4m3 {extra}\n")  # SequentialMLP (no --moe-grouped-gemm)
    assert "moe_fp8_padding" not in read_strategy_file(str(f)).strategy


def test_the_mtp_block_carries_the_copies_and_casts(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-V3 (61 layers, 58 MoE, one MTP module whose block is a MoE layer) on DGX-B200, mxfp8, EP 8, b 1,
    s 4096: 8 * 4096 * 8 / 256 = 1024 tokens on each of 32 local experts = 32,768 rows of h 7168. A stage of 4
    layers with the logits and the module gains the padding copies of 4 x 58/61 mean layers and of the module's
    block, 8 eb R h each forward and backward; the module's block also carries a MoE layer's FP8 casts, which the
    stage's 4 mean layers carry already, whatever the module."""
    from scalemodel.specs import load_workload

    b200 = load_cluster("dgx-b200")
    wl = load_workload("deepseek-v3")
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", fp8_recipe="mxfp8")
    job = build_job(b200, wl, tr)
    hbm = 7.7e12 * 0.85  # B200: 7.7 TB/s datasheet x 0.85 (hardware/accelerators/b200.yaml)
    assert job.memory_bandwidth == 7.7e12 and job.memory_efficiency == pytest.approx(0.85)
    assert (job.shape.layers, job.shape.moe_layers, job.shape.mtp_layers) == (61, 58, 1)
    pad = 2 * 4 * 2 * 32_768 * 7168 / hbm  # forward + backward of one MoE layer

    def grid(**kw):  # type: ignore[no-untyped-def]
        return grid_from_strategy(StrategySpec(dp=16, ep=8, **kw), tr, 16, job)

    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, grid(), layers, logits_on_stage=True)
    b = layer_compute._compute_per_microbatch(job, grid(moe_fp8_padding=True), layers, logits_on_stage=True)
    assert one(b["total"] - a["total"]) == pytest.approx((4 * 58 / 61 + 1) * pad, rel=1e-9)
    # the casts: the module's share of the stage, with and without the recipe (same peaks, curves and layers); the
    # routed experts' MXFP8 grouped-GEMM rate, which goes with the recipe, held off in both (tested on its own in
    # tests/test_mxfp8_expert_gemms.py)
    from msgspec.structs import replace
    monkeypatch.setattr(compute, "MXFP8_GROUPED_GEMM_SPEEDUPS", {})
    no_casts = replace(job, fp8_recipe="")
    g = grid()
    with_mtp = layer_compute._compute_per_microbatch(job, g, layers)["total"] - layer_compute._compute_per_microbatch(
        job, g, layers, logits_on_stage=False)["total"]
    bare = layer_compute._compute_per_microbatch(no_casts, g, layers)["total"] - layer_compute._compute_per_microbatch(
        no_casts, g, layers, logits_on_stage=False)["total"]
    f, bw, w = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=4096, recipe="mxfp8", transpose_copy=False,
                                          ep=8, moe=True)
    m = 16 / 16  # micro-batches per step: global 16 over dp 16
    # and its per-expert MXFP8 quantize kernels' fixed time (test_expert_quantize_kernels.py): 31 extra local
    # experts x 2 tensors, forward and backward, 1.78 us each
    kernels = 2 * 2 * 31 * 1.78e-6
    # the casts at Blackwell's measured MXFP8 cast-kernel rate, 1.282 x their roofline price
    # (tests/test_cast_kernel_rate.py); the padding copies above are not casts and stay at the roofline
    casts = 1.282 * (float(f) + float(w) / m + float(bw)) / hbm
    assert one(with_mtp - bare) == pytest.approx(casts + kernels, rel=1e-9)
