"""A separate fp8 GEMM curve (ComputeEfficiency.fp8) is used exactly when the training precision is fp8."""

from __future__ import annotations

import pytest

from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.accelerator import ComputeEfficiency, GemmCurve


def _curve(with_fp8: bool) -> ComputeEfficiency:
    fp8 = GemmCurve(gemm_max=0.4, gemm_half_dim=70.0) if with_fp8 else None
    return ComputeEfficiency(gemm_max=0.5, gemm_half_dim=50.0, memory=0.6, fp8=fp8)


def test_gemm_picks_the_fp8_curve_only_for_fp8() -> None:
    c = _curve(True)
    assert c.gemm("fp8") == (0.4, 70.0)
    for p in ("bf16", "fp16", "tf32", "fp32"):
        assert c.gemm(p) == (0.5, 50.0)
    assert _curve(False).gemm("fp8") == (0.5, 50.0)  # no fp8 curve: the 16-bit one


@pytest.mark.parametrize(("precision", "want"), [("fp8", (0.4, 70.0)), ("bf16", (0.5, 50.0))])
def test_build_job_uses_the_precision_curve(precision: str, want: tuple[float, float]) -> None:
    cluster = load_cluster("dgx-h100", overrides=[])
    cluster.accelerator.compute_efficiency = _curve(True)
    job = build_job(cluster, load_workload("gpt-7.5b"), TrainingSpec(precision=precision))
    assert (job.gemm_max, job.gemm_half_dim) == want
    assert job.memory_efficiency == 0.6  # one memory efficiency for every precision


def test_fp8_curve_is_validated() -> None:
    with pytest.raises(ValueError):
        GemmCurve(gemm_max=1.2, gemm_half_dim=70.0)
    with pytest.raises(ValueError):
        GemmCurve(gemm_max=0.5, gemm_half_dim=0.0)


@pytest.mark.parametrize(("precision", "want"), [("fp8", (989.4e12, 0.5, 50.0)), ("bf16", (0.0, 0.0, 0.0))])
def test_fp8_attention_core_runs_on_the_16bit_peak_and_curve(precision: str, want: tuple) -> None:
    """Transformer Engine's FP8 recipes leave dot-product attention in BF16 (recipe fp8_dpa default False): an
    fp8 job carries the BF16 peak (H100 SXM datasheet 989.4 TFLOP/s dense) and the 16-bit curve for its
    attention core; other precisions leave them at 0 (= the GEMMs' own)."""
    cluster = load_cluster("dgx-h100", overrides=[])
    cluster.accelerator.compute_efficiency = _curve(True)
    job = build_job(cluster, load_workload("gpt-7.5b"), TrainingSpec(precision=precision))
    assert (job.attention_peak_flops, job.attention_gemm_max, job.attention_gemm_half_dim) == pytest.approx(want)
