"""The DGX Cloud DeepSeek-V3 BF16 rows against their launch script, and the arithmetic of dsv3gb37's reading
(validation/README.md "DGX Cloud GB200 DeepSeek-V3 BF16: NUMA binding, TE's pre-2.6 permute kernels, NVIDIA's eager
baseline (dsv3gb37)"; docs/model.md#moe-permute-fusion, "Not priced: Transformer Engine's fused kernels before v2.6").

Expected values are typed here from the sources, not read from the model: NVIDIA/dgxc-benchmarking v25.05 @68eaf7e
deepseek_v3/pretraining/launch.sh (GBS = GPUs x 8; gb200: TP 2, PP 4, EP 32 at 128 GPUs else 64, VP 1, ETP 1, RM
core_attn; h100: TP 2, PP 16, EP 64, RM mla_up_proj; PP 8 at 512 GPUs from v25.05.04 @6be5ea0), NVIDIA/NeMo@7a8f1cc7bc
scripts/performance/llm/pretrain_deepseek_v3.py (first / last pipeline stage 64 / pp - 1 and 64 / pp - 2 layers),
and Megatron-LM's DeepSeek-V3 GB200 guide (docs/discussions/deepseek-v3-gb200-optimization @eb0783b6d3: baseline
494.46 TFLOPS/GPU on 256 GB200, TP 1, PP 8, VPP 4, EP 32, GBS 2048, layout Et|(tt|)*30L).
"""
from __future__ import annotations

import pytest
from conftest import script_module, training_cases

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape

SEQ, LAYERS = 4096, 61
# id: (gpus, tp, pp, ep, recompute module) as launch.sh sets them
LAUNCH = {
    "dgxc2505_gb200_dsv3_bf16_128": (128, 2, 4, 32, "core_attn"),
    "dgxc2505_gb200_dsv3_bf16_256": (256, 2, 4, 64, "core_attn"),
    "dgxc2505_gb200_dsv3_bf16_512": (512, 2, 4, 64, "core_attn"),
    "dgxc2505_h100_dsv3_bf16_512": (512, 2, 8, 64, "mla_up_proj"),
    "dgxc2505_h100_dsv3_bf16_1024": (1024, 2, 16, 64, "mla_up_proj"),
}
GB200 = [k for k in LAUNCH if "gb200" in k]


def _nemo_split(pp: int) -> tuple[int, int, int]:
    """(first, middle, last) decoder layers a rank: NeMo's first = 64 / pp - 1, last = 64 / pp - 2, the rest even."""
    first, last = 64 // pp - 1, 64 // pp - 2
    middle, rest = divmod(LAYERS - first - last, pp - 2)
    assert rest == 0
    return first, middle, last


@pytest.mark.parametrize("case_id", sorted(LAUNCH))
def test_the_rows_hold_the_launch_script(case_id: str) -> None:
    case = training_cases()[case_id]
    gpus, tp, pp, ep, module = LAUNCH[case_id]
    par = case["parallelism"]
    dp = gpus // (tp * pp)
    assert (par["gpus"], par["tp"], par["pp"], par["cp"], par["ep"], par["dp"]) == (gpus, tp, pp, 1, ep, dp)
    assert (par["microbatch"], par["global_batch_seqs"]) == (1, 8 * gpus)
    assert par["grad_accum"] == 8 * gpus // dp
    assert module in par["recompute"] and "selective" in par["recompute"]
    assert case["model"]["seq_len"] == SEQ and case["model"]["layers"] == LAYERS
    assert case["framework"]["etp"] == 1 and case["framework"]["moe_permute_fusion"] is True
    assert case["precision"].startswith("bf16")


@pytest.mark.parametrize("case_id", sorted(LAUNCH))
def test_the_stated_pipeline_split_is_nemos_rule(case_id: str) -> None:
    """15 / 16 / 16 / 14 at PP 4, 7 / 8 x 6 / 6 at PP 8, 3 / 4 x 14 / 2 at PP 16, read by the validator's parser."""
    case = training_cases()[case_id]
    pp = case["parallelism"]["pp"]
    first, middle, last = _nemo_split(pp)
    assert middle == 64 // pp  # the middle ranks hold 64 / pp: the rule is a 64-layer split less 3
    assert script_module("validate_training").stage_layout(case["parallelism"]["pipeline_layout"]) == (first, last)


def _gb200_layer_pass_s(case_id: str) -> float:
    """Measured step over the busiest rank's layer passes: (GA + pp - 1) micro-batch slots (1F1B, VP 1) x its 16
    layers."""
    case = training_cases()[case_id]
    par = case["parallelism"]
    slots = par["grad_accum"] + par["pp"] - 1
    return float(case["measured"]["iteration_time_s"]) / (slots * _nemo_split(par["pp"])[1])


def test_the_gb200_layer_pass_is_flat_across_ep_and_matches_nvidias_eager_baseline() -> None:
    """34.168 / 34.194 / 34.274 s over 67 x 16 passes: 31.87-31.97 ms (EP 32 -> 64 moves it 0.3 %). The guide's eager
    MXFP8 baseline: 494.46 TFLOPS at 0.2491 TFLOP a token (Megatron's count, the 25.11 table's 782 / 3139), 2048 x
    4096 / 256 tokens a GPU, (64 + 7 / 4) slots x 8 layers: 31.4 ms for twice the tokens a micro-batch."""
    passes = [_gb200_layer_pass_s(c) for c in GB200]
    assert max(passes) / min(passes) - 1 < 0.005
    assert passes[0] == pytest.approx(34.168 / (67 * 16), rel=1e-12)
    step = 2048 * 4096 / 256 * 0.2491e12 / 494.46e12
    guide = step / ((2048 / 32 + 7 / 4) * 8)
    assert guide == pytest.approx(31.4e-3, abs=0.05e-3)
    assert abs(passes[0] / guide - 1) < 0.02


def test_the_priced_fused_permutations_at_the_128_gpu_row() -> None:
    """alltoall, fused: permute the rank's n = 4096 / 2 tokens into n k copies (read n, write n k), unpermute back
    (read n k, write n), and with 8 local experts the drop-and-pad transpose there and back (read R, write R each), R =
    T k / tp = 16384: 2 x 7168 x (2 x 2048 x 9 + 4 x 16384) = 1,468,006,400 bytes a forward, as many backward; at
    GB200's 8.0 TB/s 0.367 ms a layer pass, 0.432 ms at the catalog's 0.85 memory efficiency."""
    sh = shape(layers=LAYERS, hidden=7168, heads=128, vocab=129280, gated_mlp=True, ffn_hidden=18432,
               moe_experts=256, moe_top_k=8, moe_ffn_hidden=2048, moe_shared_experts=1, moe_first_dense=3)
    n, k, R = 2048, 8, 4096 * 8 / 2
    hand = 2 * 7168 * ((n + n * k) + (n * k + n) + 4 * R)
    assert hand == 1_468_006_400
    got = compute.moe_permutation_bytes(sh, tokens=4096, own=n, tp=2, ep=32, etp=1,
                                        dispatch=compute.MOE_DISPATCH_ALLTOALL, elem_bytes=2.0, fused=True)
    assert float(got) == pytest.approx(hand, rel=1e-12)
    assert 2 * hand / 8.0e12 == pytest.approx(0.367e-3, abs=0.001e-3)
    assert 2 * hand / (8.0e12 * 0.85) == pytest.approx(0.432e-3, abs=0.001e-3)
