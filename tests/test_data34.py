"""data34: NeMo AutoModel's pre-training table (`automodel26`, validation/README.md#data34).

NVIDIA-NeMo/Automodel docs/performance-summary.md, "System: DGX-H100, Precision: BF16": three rows whose benchmark
YAML was committed with (or was the one linked by) the table row and agrees with it -- Llama 3.1 70B on 64 GPUs
(FSDP2 32 x CP 2, commit 2013a4dd6), Nemotron 3 Nano on 8 (EP 8, FSDP 8, bb0c0bfb0) and DeepSeek-V3 on 256 (PP 4 x VP 8,
EP 64, FSDP 64, 89e3a9fdd). The numbers below are the table's, written by hand; the checks recompute what the rows
derive from them and check which rows the validator compares and which it lists."""

from __future__ import annotations

import math

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

LLAMA = "automodel26_h100_llama31_70b_fsdp32_cp2"
NANO = "automodel26_h100_nemotron3_nano"
DSV3 = "automodel26_h100_dsv3_fsdp64_ep64_256"

#: The table's cells as printed: #GPUs, GBS, MBS, GA, Seq Length, TP, PP, CP, EP, VP, FSDP, Time per Global Step (s),
#: Tokens/sec/GPU ("-" written as 1).
PRINTED = {
    LLAMA: (64, 128, 1, 4, 8192, 1, 1, 2, 1, 1, 32, 18.90, 866.77),
    NANO: (8, 512, 4, 16, 4096, 1, 1, 1, 8, 1, 8, 15.614, 16789.0),
    DSV3: (256, 512, 1, 1, 4096, 1, 4, 1, 64, 8, 64, 8.18, 1002.0),
}


def _rows() -> dict[str, dict]:
    return {c["id"]: c for c in load_yaml(NEW_CASES) if c["id"] in PRINTED}


@needs_new_cases
@pytest.mark.parametrize("cid", sorted(PRINTED))
def test_rate_is_gbs_times_sequence_over_the_printed_step(cid: str) -> None:
    """GBS x sequence / step time / GPUs gives the printed tokens/s/GPU to 0.1 % (the table rounds): 128 x 8192 / 18.90
    / 64 = 866.8, 512 x 4096 / 15.614 / 8 = 16789.1, 512 x 4096 / 8.18 / 256 = 1001.4."""
    gpus, gbs, _, _, seq, *_, step, rate = PRINTED[cid]
    assert gbs * seq / step / gpus == pytest.approx(rate, rel=1e-3)
    case = _rows()[cid]
    assert case["measured"]["iteration_time_s"] == step
    assert case["measured"]["tokens_per_s_per_gpu"] == rate
    assert case["model"]["seq_len"] == seq


@needs_new_cases
@pytest.mark.parametrize("cid", sorted(PRINTED))
def test_layout_is_the_table_s(cid: str) -> None:
    """TP / PP / CP / EP / VP / FSDP as printed, dp = the FSDP column, tp x pp x cp x dp = GPUs, and the global batch =
    dp x MBS x micro-batches. The DeepSeek-V3 row's GA 1 counts Automodel's local batches: one local batch of 8 runs as
    8 pipeline micro-batches of 1 (LBS 8, pp_microbatch_size 1), so its grad_accum (micro-batches a step, the file's
    convention) is 8."""
    gpus, gbs, mbs, ga, _, tp, pp, cp, ep, vp, fsdp, *_ = PRINTED[cid]
    par = _rows()[cid]["parallelism"]
    assert (par["gpus"], par["tp"], par["pp"], par["cp"], par["ep"], par["dp"]) == (gpus, tp, pp, cp, ep, fsdp)
    assert par.get("interleaved_stages_per_device", 1) == vp
    assert par["global_batch_seqs"] == gbs and par["microbatch"] == mbs
    assert tp * pp * cp * fsdp == gpus
    micro = 8 if cid == DSV3 else ga
    assert par["grad_accum"] == micro and fsdp * mbs * micro == gbs
    assert str(par["zero_stage"]).startswith("fsdp")


@needs_new_cases
def test_dsv3_split_is_automodel_s_and_the_validator_prices_it() -> None:
    """Automodel's AutoPipeline at 89e3a9fdd (pipelining/functional.py): ceil(61 / layers_per_stage 2) + 1 = 32 virtual
    stages (a multiple of pp 4, so 'down' rounding keeps it: VP 8 as printed); generate_hf_model_split gives 61 // 32
    = 1 layer each and one more to the first 61 % 32 = 29 stages; stage i runs on pipeline rank i mod 4, so the ranks
    hold 16 / 15 / 15 / 15 decoder layers. The row carries that split as framework.stage_layers (virtual stage c of
    rank r at entry c pp + r, the order strategy.stage_layers reads), so the validator compares it instead of the
    model's even-chunk refusal."""
    stages = math.ceil(61 / 2) + 1
    assert stages == 32 and stages % 4 == 0 and stages // 4 == 8
    per_stage = [61 // stages + (i < 61 % stages) for i in range(stages)]
    assert per_stage == [2] * 29 + [1] * 3 and sum(per_stage) == 61
    assert [sum(per_stage[r::4]) for r in range(4)] == [16, 15, 15, 15]
    assert "[2 x 29, 1 x 3]" in _rows()[DSV3]["parallelism"]["pipeline_layout"]
    assert _rows()[DSV3]["framework"]["stage_layers"] == per_stage
    mod = script_module("validate_training")
    assert mod.framework_split(_rows()[DSV3], 4) == per_stage
    out = mod.predict_new_case(_rows()[DSV3])
    assert not isinstance(out, mod.NotExpressed)
    assert out.metric == "tokens/s/GPU" and out.measured == 1002.0


@needs_new_cases
@pytest.mark.parametrize("cid", [LLAMA, NANO])
def test_llama_and_nano_rows_are_compared_on_tokens(cid: str) -> None:
    """Both rows are expressible and compared on the printed tokens/s/GPU."""
    mod = script_module("validate_training")
    case = _rows()[cid]
    assert mod.case_limits(case) == []
    assert mod.comparison(case) == ("tokens/s/GPU", PRINTED[cid][-1])
    assert mod.families(case)["source"] == "automodel26"
    assert mod.accelerator_variant(case["hardware"]["gpu"]) == "H100"


@needs_new_cases
def test_source_settings_and_the_compiled_llama_layer() -> None:
    """sources.yaml: the eager MaskedCrossEntropy (``torch``), Automodel's eager blocks (``eager``) and run year 2026;
    the Llama row's per-layer torch.compile is its own framework.layer_impl ``torchtitan``; its gradients are
    reduced in bf16 (FSDP2Config's default policy) and the MoE rows' in fp32 (apply_fsdp's default policy)."""
    mod = script_module("validate_training")
    rows = _rows()
    assert mod.LAYER_IMPL["automodel26"] == "eager"
    assert mod.RUN_YEAR["automodel26"] == 2026
    assert mod.layer_impl(rows[LLAMA]) == "torchtitan"
    assert mod.layer_impl(rows[NANO]) == "eager"
    assert mod.loss_impl(rows[NANO]) == "torch"
    assert str(rows[LLAMA]["parallelism"]["grad_reduce"]).startswith("bf16")
    assert str(rows[NANO]["parallelism"]["grad_reduce"]).startswith("fp32")
    assert rows[NANO]["parallelism"]["fsdp_reshard_after_forward"] is False
