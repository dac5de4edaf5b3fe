"""data28b: MLPerf v6.0's NVFP4 llama31_8b rows whose NVFP4 recipe options were to be read (validation/README.md
"MLPerf Training v6.0 Blackwell and AMD llama31 rows", data28b paragraph).

HPE's GB200 8-GPU run ran the v5.1 NeMo 2 implementation; the config its log names (GB200_2x4x2xtp1pp1cp1_8b_fp4) is
read in NVIDIA's v5.1 tree (mlcommons/training_results_v5.1@441d65f4 NVIDIA/benchmarks/llama31_8b/implementations/
nemo): config_common_fp4.sh exports NVTE_NVFP4_DISABLE_RHT / _STOCHASTIC_ROUNDING / _2D_QUANTIZATION = 1, then
config_common_8b.sh (sourced after it) resets the last two to 0, so only RHT is off; config_common.sh
NCCL_NVLS_ENABLE=0; the log prints bucket_size 134217728 and cuDNN 9.13.1.26. The three 26.04 rows stay listed:
config_common_fp4.sh of v6.0 is not in the fork."""

from __future__ import annotations

import statistics

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

HPE_GB200 = "mlpt60_gb200_llama31_8b_8_nvfp4"
THEIA = "mlpt60_gb300_llama31_8b_72_nvfp4_theia"
THEIA_8 = "mlpt60_gb300_llama31_8b_8_nvfp4_theia"
STILL_LISTED = ("mlpt60_b300_llama31_8b_16_nvfp4", "mlpt60_b300_llama31_8b_8_nvfp4", "mlpt60_gb300_llama31_8b_72_nvfp4",
                THEIA, THEIA_8)


@needs_new_cases
def test_hpe_gb200_row_takes_the_v51_configs_options() -> None:
    """Compared with FP8 attention, NVFP4 with RHT off only (stochastic rounding and 2D on), NVLS off, the printed
    128 Mi-element bucket (not the 26.04 logs' 768e6) and cuDNN 9.13.1; its measured rate is the logged step's."""
    mod = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    case = cases[HPE_GB200]
    assert case["measured"]["tokens_per_s_per_gpu"] == pytest.approx(16 * 8192 / 0.40833 / 8, rel=1e-4)
    assert case["framework"]["nvfp4_disable"] == ["rht"]
    assert mod.megatron_options(case, "1", "fp4", 2.0)["bucket_size"] == 128 * 1024 * 1024 * 2.0
    assert "tiers.nvlink.in_network_reduction=false" in mod.cluster_overrides(case, "gb200-nvl72")
    r = mod.predict_new_case(case)
    assert isinstance(r, mod.CaseResult)
    assert r.training.precision == "fp4" and r.training.fp8_attention
    assert list(r.training.nvfp4_disable) == ["rht"]
    assert r.settings["cudnn_release"] == "9.13.1"
    assert (r.settings["dp"], r.settings["micro_batch"], r.settings["global_batch"]) == (8, 2, 16)


@needs_new_cases
def test_hpe_gb200_row_prices_stochastic_rounding() -> None:
    """Stochastic rounding on (v5.1 config_common_8b.sh L28) costs time against the all-off "Vanilla recipe": the
    prediction with the row's options is slower than with all three off, and RHT off alone prices as nothing off
    (docs/model.md#nvfp4-recipe-options)."""
    mod = script_module("validate_training")
    case = {c["id"]: c for c in load_yaml(NEW_CASES)}[HPE_GB200]
    rate = {}
    for opts in ((), ("rht",), ("rht", "stochastic_rounding", "2d_quantization")):
        case["framework"].pop("nvfp4_disable", None)  # the row's field (validation/README.md), set in a copy;
        if opts:  # nothing off is the field left out (review32c refuses an empty list)
            case["framework"]["nvfp4_disable"] = list(opts)
        rate[opts] = mod.predict_new_case(case).predicted
    assert rate[("rht",)] == pytest.approx(rate[()], rel=1e-12)
    assert rate[("rht",)] < rate[("rht", "stochastic_rounding", "2d_quantization")]


@needs_new_cases
def test_the_26_04_rows_stay_listed_for_the_missing_config() -> None:
    """Cisco's and Nebius' B300 and HPE's GB300 rows: listed, the reason naming the missing config_common_fp4.sh."""
    mod = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    for cid in STILL_LISTED:
        r = mod.predict_new_case(cases[cid])
        assert isinstance(r, mod.NotExpressed)
        assert "config_common_fp4.sh the MLPerf v6.0 fork does not hold" in r.reason
        assert "nvfp4_disable" not in cases[cid].get("framework", {})


@needs_new_cases
def test_theia_72_rate_is_the_logged_steps() -> None:
    """NVIDIA's Theia 72-GPU run (result_0.txt, steps 342 -> 1197): the median of the 27 logged train_step_time values,
    typed by hand from the MLLOG lines; tokens/s/GPU = GBS 72 x 8192 / step / 72 GPUs."""
    steps = [0.19989657402038574, 0.19986748695373535, 0.19925665855407715, 0.20003771781921387, 0.19908618927001953,
             0.19921612739562988, 0.20047855377197266, 0.1990194320678711, 0.20053815841674805, 0.19890213012695312,
             0.1991426944732666, 0.1990983486175537, 0.19936847686767578, 0.19985175132751465, 0.19963693618774414,
             0.19916129112243652, 0.19970059394836426, 0.19936299324035645, 0.20014500617980957, 0.2001628875732422,
             0.20007801055908203, 0.19869709014892578, 0.19931292533874512, 0.19954895973205566, 0.19946789741516113,
             0.20019841194152832, 0.19941163063049316]
    case = {c["id"]: c for c in load_yaml(NEW_CASES)}[THEIA]
    step = statistics.median(steps)
    assert case["measured"]["step_time_s"] == pytest.approx(step, rel=2e-5)
    assert case["measured"]["tokens_per_s_per_gpu"] == pytest.approx(72 * 8192 / step / 72, rel=1e-4)
    par = case["parallelism"]
    assert (par["dp"], par["gpus"], par["global_batch_seqs"], par["microbatch"]) == (72, 72, 72, 1)


@needs_new_cases
def test_theia_8_rate_is_the_logged_steps() -> None:
    """NVIDIA's Theia 8-GPU run (result_0.txt, the block of steps 768 -> 1536, its first short step excluded): the
    median of 23 logged train_step_time values; tokens/s/GPU = GBS 16 x 8192 / step / 8 GPUs; MBS 2 = 16 / 8 / 1."""
    steps = [0.34479665756225586, 0.3451676368713379, 0.34410810470581055, 0.34367942810058594, 0.34449100494384766,
             0.34410858154296875, 0.34383487701416016, 0.34451961517333984, 0.34477925300598145, 0.3453052043914795,
             0.34450197219848633, 0.34456920623779297, 0.34479284286499023, 0.34389400482177734, 0.34481024742126465,
             0.34519338607788086, 0.3453640937805176, 0.345625638961792, 0.34464144706726074, 0.3452303409576416,
             0.3445558547973633, 0.3448977470397949, 0.34440016746520996]
    case = {c["id"]: c for c in load_yaml(NEW_CASES)}[THEIA_8]
    step = statistics.median(steps)
    assert case["measured"]["step_time_s"] == pytest.approx(step, rel=2e-5)
    assert case["measured"]["tokens_per_s_per_gpu"] == pytest.approx(16 * 8192 / step / 8, rel=1e-4)
    par = case["parallelism"]
    assert par["microbatch"] * par["dp"] * par["grad_accum"] == par["global_batch_seqs"] == 16
