"""MLPerf Training v3.0 GPT-3 175B rows (`mlpt30`, data40): each row against the submission's own files.

The published figures, transcribed here from mlcommons/training_results_v3.0@63e326c4 (not from the rows): each
config_DGXH100_<nodes>x8x<MINIBS>x4x8_mbs1.sh (DGXNNODES, MINIBS, TP 4, PP 8, MICRO_BATCH_SIZE 1), config_common.sh
(INTERLEAVED_PIPELINE 12, GLOBAL_BATCH_SIZE = MINIBS x DP with DP = nodes x 8 / (TP x PP)), the MLLOG
global_batch_size / gradient_accumulation_steps each result file prints, and the median of every training step's
``train_step_timing`` over the three result files. Checked independently of the validator: the row's DP, GBS and
gradient accumulation follow from the config's arithmetic and agree with the log; its tokens/s/GPU is GBS x 2048 /
step / GPUs; the pipeline holds the 96 layers as 8 x 12 chunks of one; and the validator reads the source settings
the submission's code fixes (validation/sources.yaml mlpt30).
"""

from __future__ import annotations

import pytest
from conftest import script_module, training_cases

#: row id -> (nodes, MINIBS, MLLOG global_batch_size, MLLOG gradient_accumulation_steps, median train_step_timing s)
PUBLISHED = {
    "mlpt30_h100_gpt3_175b_512": (64, 128, 2048, 128, 12.0769),
    "mlpt30_h100_gpt3_175b_768": (96, 128, 3072, 128, 12.1261),
    "mlpt30_h100_gpt3_175b_768_cw": (96, 128, 3072, 128, 12.2993),
    "mlpt30_h100_gpt3_175b_1536_cw": (192, 64, 3072, 64, 6.3376),
    "mlpt30_h100_gpt3_175b_3584_cw": (448, 24, 2688, 24, 2.5976),
}
TP, PP, VP, LAYERS, SEQ = 4, 8, 12, 96, 2048


def test_every_mlpt30_row_is_listed_here() -> None:
    assert {c for c in training_cases() if c.startswith("mlpt30_")} == set(PUBLISHED)


@pytest.mark.parametrize("cid", sorted(PUBLISHED))
def test_row_against_the_submission(cid: str) -> None:
    nodes, minibs, gbs_log, ga_log, step = PUBLISHED[cid]
    case = training_cases()[cid]
    par = case["parallelism"]
    dp = nodes * 8 // (TP * PP)
    assert (par["tp"], par["pp"], par["microbatch"], par["interleaved_stages_per_device"]) == (TP, PP, 1, VP)
    assert par["gpus"] == nodes * 8 and par["dp"] == dp
    assert par["global_batch_seqs"] == minibs * dp == gbs_log  # config_common.sh's GBS is the logged one
    assert par["grad_accum"] == gbs_log // (dp * 1) == ga_log == minibs
    assert LAYERS == PP * VP * 1  # one layer a chunk
    assert case["model"]["seq_len"] == SEQ and case["model"]["layers"] == LAYERS
    assert case["measured"]["step_time_s"] == step
    assert case["measured"]["tokens_per_s_per_gpu"] == pytest.approx(gbs_log * SEQ / step / (nodes * 8), abs=0.05)
    fw = case["framework"]
    assert (fw["optim_name"], fw["fp8_param_gather"], fw["bucket_cap_mb"]) == ("distributed_fused_adam", False, 100)


def test_source_settings() -> None:
    """NeMo v1.17.0_pt_23.04's per-micro-batch loss all-reduce, Apex's overlapped interleaved p2p (each wait one chunk
    late), NVLS off (R525 kernel driver) and the 2023 run year."""
    vt = script_module("validate_training")
    assert "mlpt30" in vt.LOSS_DP_ALLREDUCE and "mlpt30" in vt.OVERLAP_P2P_SOURCES
    assert "mlpt30" in vt.OVERLAP_P2P_SEND_LAGGED and "mlpt30" in vt.NVLS_DISABLED
    assert vt.RUN_YEAR["mlpt30"] == 2023
    strat = vt.predict_new_case(training_cases()["mlpt30_h100_gpt3_175b_512"]).strategy
    assert strat.loss_dp_allreduce is True and strat.fp8_param_gather is False


def test_azure_v31_row() -> None:
    """MLPerf v3.1 Azure+NVIDIA on 1344 ND H100 v5 (training_results_v3.1@d06288b): config_DGXH100_1344x8x8x4x8_mbs1.sh
    MINIBS 8, TP 4, PP 8, MBS 1 (the NVIDIA file's values), DP = 10752 / 32 = 336, GBS 8 x 336 = 2688 (MLLOG), GA 8;
    the block-convention median 0.9795 s a step, transcribed from the three result files; tokens/s/GPU follows."""
    case = training_cases()["mlpt31_h100_gpt3_175b_10752_azure"]
    par = case["parallelism"]
    assert (par["tp"], par["pp"], par["microbatch"], par["interleaved_stages_per_device"]) == (TP, PP, 1, VP)
    assert par["gpus"] == 1344 * 8 and par["dp"] == 1344 * 8 // (TP * PP) == 336
    assert par["global_batch_seqs"] == 8 * 336 == 2688 and par["grad_accum"] == 8
    assert case["measured"]["step_time_s"] == 0.9795
    assert case["measured"]["tokens_per_s_per_gpu"] == pytest.approx(2688 * SEQ / 0.9795 / 10752, abs=0.05)
    # the same hardware and implementation as NVIDIA's eos-dfw_n1344 row but the TE commit: every setting alike
    twin = training_cases()["mlpt31_h100_gpt3_175b_10752"]
    assert case["framework"] == twin["framework"] and case["model"] == twin["model"]
    assert {k: v for k, v in par.items() if k not in ("note", "overlap")} == \
        {k: v for k, v in twin["parallelism"].items() if k not in ("note", "overlap")}


def test_submitter_reads_joint_submissions() -> None:
    """A joint MLPerf submission's directory (Azure+NVIDIA) is one submitter, not the name after its '+'."""
    mod = script_module("calibrate_extrapolation")
    assert mod.submitter(training_cases()["mlpt31_h100_gpt3_175b_10752_azure"]) == "Azure+NVIDIA"
    assert mod.submitter(training_cases()["mlpt31_h100_gpt3_175b_10752"]) == "NVIDIA"
    assert mod.submitter(training_cases()["mlpt30_h100_gpt3_175b_3584_cw"]) == "NVIDIA_CoreWeave"


#: MLPerf v5.1 1-node B200 NVFP4 llama31_8b runs data31 read and measured (validation/README.md data31, "Read, measured,
#: not recorded"), recorded by data40: id -> (median train_step_time s over the ten result files, logged steps), the
#: figures data31 printed, which this round's own read of the logs reproduced
NVFP4_1NODE = {"mlpt51_b200_llama31_8b_8_nvfp4_oracle": (0.45327, 3550),
               "mlpt51_b200_llama31_8b_8_nvfp4_smc4126": (0.44957, 3625),
               "mlpt51_b200_llama31_8b_8_nvfp4_smc422": (0.45082, 3550),
               "mlpt51_b200_llama31_8b_8_nvfp4_nebius": (0.45596, 3550),
               "mlpt51_b200_llama31_8b_8_nvfp4_lenovo680": (0.44386, 3600),
               "mlpt51_b200_llama31_8b_8_nvfp4_lenovo780": (0.45122, 3575)}


@pytest.mark.parametrize("cid", sorted(NVFP4_1NODE))
def test_nvfp4_one_node_rows(cid: str) -> None:
    """Each run is the configuration of Dell's recorded row (the same config blobs): same model, layout, precision and
    framework settings but the printed 768e6 bucket; GBS 16 x 8192 tokens over 8 GPUs at the logged median step."""
    step, n = NVFP4_1NODE[cid]
    case, dell = training_cases()[cid], training_cases()["mlpt51_b200_llama31_8b_8_nvfp4"]
    assert case["model"] == dell["model"] and case["precision"] == dell["precision"]
    assert {k: v for k, v in case["parallelism"].items() if k != "note"} == \
        {k: v for k, v in dell["parallelism"].items() if k != "note"}
    fw = dict(case["framework"])
    assert fw.pop("bucket_elements") == 768_000_000
    assert {k: v for k, v in fw.items() if k != "cudnn_release_read_in"} == \
        {k: v for k, v in dell["framework"].items() if k != "cudnn_release_read_in"}
    assert case["measured"]["step_time_s"] == step and f"median of the {n} MLLOG" in case["note"]
    assert case["measured"]["tokens_per_s_per_gpu"] == round(16 * 8192 / step / 8)
