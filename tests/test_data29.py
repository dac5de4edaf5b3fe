"""data29: ZeRO-3 / FSDP runs at 256+ GPUs from sources the project had not used (validation/README.md "ZeRO-3 / FSDP at
256+ GPUs from new sources").

One run passed the section's rule: the 1T-parameter GPT on 512 A100 40GB (64 AWS p4d) from "Training a 1 Trillion
Parameter Model With PyTorch Fully Sharded Data Parallel on AWS" (2022), 81 TFLOP/s/GPU by the Megatron-2 formula. Its
parameters and optimizer live on the host (FSDP parameter CPU offload), which the model does not price, so the row is
listed with that reason. The checks below recompute its numbers by hand from the post and Narayanan et al. 2021."""

from __future__ import annotations

import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

ROW = "fsdpaws22_a100_40g_gpt1t_fsdp512"
PARAM_OFFLOAD = "parameter shards held in host memory"


def _row() -> dict:
    return {c["id"]: c for c in load_yaml(NEW_CASES)}[ROW]


@needs_new_cases
def test_row_is_listed_for_its_parameter_offload() -> None:
    """The row is listed by its recorded offload names (not by its id): parameter offload gives its own reason, and the
    same row without the offload is expressible."""
    mod = script_module("validate_training")
    case = _row()
    assert any(PARAM_OFFLOAD in why for why in mod.case_limits(case))
    alone = {**case, "parallelism": {**case["parallelism"], "offload": "offload_params (FSDP CPUOffload)"}}
    assert [w for w in mod.case_limits(alone) if PARAM_OFFLOAD in w]
    none = {**case, "parallelism": {k: v for k, v in case["parallelism"].items() if k != "offload"}}
    assert mod.case_limits(none) == []


@needs_new_cases
def test_row_metric_is_the_printed_hardware_tflops() -> None:
    """'even with 512 GPUs, we observed 81 teraFLOP/s/GPU', counted by Megatron-2's formula (recompute included)."""
    mod = script_module("validate_training")
    assert mod.comparison(_row()) == ("hw TFLOP/s/GPU", 81.0)


@needs_new_cases
def test_row_shape_is_a_one_trillion_parameter_model() -> None:
    """12 l h^2 (blocks) + 2 V h (untied minGPT embedding and head) + s h (learned positions) for 128 layers, hidden
    25600, vocabulary 50000, sequence 2048: 1.00924e12, within 1 % of the post's '1T' (Narayanan et al. 2021 Table 1
    prints 1008B for the same shape with its 51200-token vocabulary)."""
    m = _row()["model"]
    l, h, v, s = m["layers"], m["hidden"], m["vocab"], m["seq_len"]
    n = 12 * l * h**2 + 2 * v * h + s * h
    assert n == 1_009_245_388_800
    assert abs(n / (m["params_B"] * 1e9) - 1) < 0.01
    assert m["hidden"] % m["heads"] == 0 and m["hidden"] // m["heads"] == 160  # head size 160


@needs_new_cases
def test_row_step_time_from_the_megatron2_formula() -> None:
    """F = 96 B s l h^2 (1 + s / 6h + V / 16 l h) with B = 4 x 512 = 2048 sequences: 3.42596e19 FLOPs a step; at 81
    TFLOP/s on each of 512 GPUs that is 826.1 s (9.92 tokens/s/GPU), the row's derived_step_time_s."""
    case = _row()
    par, m = case["parallelism"], case["model"]
    b = par["microbatch"] * par["gpus"]
    assert b == par["global_batch_seqs"] == 2048
    s, l, h, v = m["seq_len"], m["layers"], m["hidden"], m["vocab"]
    flops = 96 * b * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h))
    assert flops == pytest.approx(3.4259569e19, rel=1e-7)
    step = flops / (par["gpus"] * case["measured"]["tflops_per_gpu"] * 1e12)
    assert step == pytest.approx(case["derived_step_time_s"], abs=0.05)
    assert b * s / step / par["gpus"] == pytest.approx(9.92, abs=0.005)
