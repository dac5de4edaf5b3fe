"""data30: the one unseen run on the thin families that qualified (validation/README.md#data30).

NVIDIA's MLPerf Training v5.1 llama31_8b on 8 GB300 (Theia, 2 trays of 4), NVFP4 with FP8 attention. Its FP8 attention
and NVFP4 recipe options reach the model only through per-row entries of scripts/validate_training.py, outside data30's
files, so the row sits as a commented block at the end of training_cases.yaml until those entries land. The checks
below recompute the transcribed numbers from the MLLOG and the launch config (mlcommons/training_results_v5.1
@441d65f4) and check that the row is expressible once uncommented. They read the live row once it has landed."""

from __future__ import annotations

import yaml
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

ROW = "mlpt51_gb300_llama31_8b_8_nvfp4"


def _row() -> dict:
    """The live row when it has landed, else the commented block data30 left at the end of training_cases.yaml."""
    live = {c["id"]: c for c in load_yaml(NEW_CASES)}
    if ROW in live:
        return live[ROW]
    lines = NEW_CASES.read_text().splitlines()
    start = lines.index(f"# - id: {ROW}")
    block = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines[start:] if ln.startswith("#")]
    (case,) = yaml.safe_load("\n".join(block))
    return case


@needs_new_cases
def test_rate_is_gbs_times_sequence_over_the_median_step() -> None:
    """MLLOG global_batch_size 16, max_sequence_length 8192, median train_step_time 0.34658 s on 8 GPUs:
    16 x 8192 / 0.34658 / 8 = 47,272.9 tokens/s/GPU."""
    case = _row()
    par, meas = case["parallelism"], case["measured"]
    assert par["global_batch_seqs"] == 16 and case["model"]["seq_len"] == 8192 and par["gpus"] == 8
    rate = par["global_batch_seqs"] * case["model"]["seq_len"] / meas["step_time_s"] / par["gpus"]
    assert abs(rate - 47272.9) < 0.5
    assert meas["tokens_per_s_per_gpu"] == round(rate)
    assert case["derived_step_time_s"] == meas["step_time_s"]


@needs_new_cases
def test_layout_is_the_config_file_s() -> None:
    """config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh: MBS 2, TP / PP / CP 1 on DGXNNODES 2 x DGXNGPU 4, so DP 8 and one
    micro-batch a step at GBS 16 (gradient accumulation 1 in the MLLOG)."""
    par = _row()["parallelism"]
    assert par["tp"] * par["pp"] * par["cp"] * par["dp"] == par["gpus"] == 2 * 4
    assert par["microbatch"] * par["dp"] * par["grad_accum"] == par["global_batch_seqs"]
    assert (par["microbatch"], par["grad_accum"], par["sequence_parallel"]) == (2, 1, False)


@needs_new_cases
def test_row_is_expressible_as_nvfp4_on_the_gb300_catalog_cluster() -> None:
    """Uncommented, the row needs no listing reason: GB300 is in the catalog (gb300-nvl72), the precision text names
    NVFP4 with no unpriced recipe marker, the batch is one number."""
    mod = script_module("validate_training")
    case = _row()
    assert mod.case_limits(case) == []
    assert mod.parse_precision(case["precision"]) == "fp4"
    assert mod.accelerator_variant(case["hardware"]["gpu"]) == "GB300"
    assert mod.comparison(case) == ("tokens/s/GPU", 47273.0)
