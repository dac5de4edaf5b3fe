"""data28's rows (validation/README.md "MLPerf Training v6.0 Blackwell and AMD llama31 rows"): NVIDIA's FP8
llama31_8b on 1024 GB200 (compared), the NVFP4 runs of Cisco, Nebius (B300) and HPE (GB200, GB300) and AMD's MXFP4 run
on MI355X (listed).
The measured values are typed by hand from the MLLOG lines of the fork Richardyu114/training_results_v6.0@eabf23a0."""

from __future__ import annotations

import statistics

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

TYCHE = "mlpt60_gb200_llama31_8b_1024"
# mlpt60_gb200_llama31_8b_8_nvfp4 compared since data28b (tests/test_data28b.py)
LISTED = {"mlpt60_b300_llama31_8b_16_nvfp4": "NVFP4 linears with FP8 dot-product attention",
          "mlpt60_b300_llama31_8b_8_nvfp4": "NVFP4 linears with FP8 dot-product attention",
          "mlpt60_gb300_llama31_8b_72_nvfp4": "NVFP4 linears with FP8 dot-product attention",
          "mlpt60_mi355x_llama31_8b_8_mxfp4": "MXFP4 linears"}


@needs_new_cases
def test_rates_are_the_logged_steps() -> None:
    """tokens/s/GPU = GBS x 8192 / step / GPUs, the step the median of the logged train_step_time values (NVIDIA's
    implementation) or the block wall time over 384 steps (AMD Primus: block_start / block_stop time_ms)."""
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    tyche = [0.07183432579040527, 0.07196331024169922, 0.07196736335754395, 0.07212686538696289, 0.07205557823181152,
             0.07195496559143066, 0.07184481620788574, 0.07222700119018555, 0.07199621200561523, 0.07174849510192871,
             0.07183980941772461, 0.07206892967224121, 0.0720357894897461, 0.0719916820526123, 0.07198452949523926,
             0.07203483581542969, 0.07201647758483887, 0.07212305068969727, 0.07183003425598145, 0.07180118560791016,
             0.07203412055969238, 0.07192134857177734, 0.07196569442749023, 0.07236695289611816,
             0.0719141960144043, 0.07196187973022461, 0.0722341537475586, 0.07179570198059082, 0.07178568840026855]
    amd_blocks = [(1778600790131, 1778601125261), (1778601134355, 1778601470042), (1778601479100, 1778601814340),
                  (1778601823465, 1778602158871), (1778602167998, 1778602503908), (1778602512981, 1778602848886),
                  (1778602858093, 1778603193622), (1778603202765, 1778603538553), (1778603547695, 1778603884699),
                  (1778603893796, 1778604229490), (1778604238645, 1778604574994), (1778604584110, 1778604920506),
                  (1778604929670, 1778605265588), (1778605274796, 1778605610827)]
    amd = statistics.median((stop - start) / 1000 / 384 for start, stop in amd_blocks)
    for cid, gbs, step, gpus in ((TYCHE, 64, statistics.median(tyche), 1024),
                                 ("mlpt60_mi355x_llama31_8b_8_mxfp4", 32, amd, 8)):
        measured = cases[cid]["measured"]
        assert measured["step_time_s"] == pytest.approx(step, rel=1e-4)
        assert measured["tokens_per_s_per_gpu"] == pytest.approx(gbs * 8192 / step / gpus, rel=1e-4)
        par = cases[cid]["parallelism"]
        assert par["tp"] * par["cp"] * par["dp"] == gpus == par["gpus"] and par["global_batch_seqs"] == gbs
    for cid, gbs, gpus in (("mlpt60_b300_llama31_8b_16_nvfp4", 16, 16), ("mlpt60_b300_llama31_8b_8_nvfp4", 16, 8),
                           ("mlpt60_gb200_llama31_8b_8_nvfp4", 16, 8), ("mlpt60_gb300_llama31_8b_72_nvfp4", 72, 72)):
        measured = cases[cid]["measured"]
        assert measured["tokens_per_s_per_gpu"] == pytest.approx(gbs * 8192 / measured["step_time_s"] / gpus, rel=1e-4)


@needs_new_cases
def test_tyche_row_takes_its_sources_settings_and_the_rest_are_listed() -> None:
    """The GB200 row: TP 4 with userbuffers, CP 4, DP 64, the config's 768e6-element bucket, FP8 tensorwise with FP8
    parameter gather, BF16 attention, its Dockerfile's cuDNN 9.21.1; the NVFP4 / MXFP4 rows listed with their reason."""
    mod = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    results, listed, _ = mod.validate_all()
    r = {x.id: x for x in results}[TYCHE]
    s = r.settings
    assert (s["tp"], s["cp"], s["dp"], s["micro_batch"], s["global_batch"]) == (4, 4, 64, 1, 64)
    assert s["tp_comm_overlap"] and s["sequence_parallel"] and not s["fp8_attention"]
    assert (s["precision"], s["fp8_recipe"], s["cudnn_release"]) == ("fp8", "tensorwise", "9.21.1")
    opts = mod.megatron_options(cases[TYCHE], "1", "fp8", 2.0)
    assert opts["bucket_size"] == 768_000_000 * 2.0 and opts["fp8_param_gather"]
    reasons = {x.id: x.reason for x in listed}
    for cid, why in LISTED.items():
        assert reasons[cid].startswith(why)
        assert mod.families(cases[cid])["precision"] == "fp4"
