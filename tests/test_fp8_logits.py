"""fp8 runs price the output-layer (logits) GEMM in BF16, and the sensitivity's peak FLOP/s moves every peak.

Megatron-Core's output layer is a ``tensor_parallel.ColumnParallelLinear`` (not a Transformer Engine module) and
torchtitan's Float8 conversion skips the module named ``output``: the logits GEMM of an fp8 run runs at the BF16
peak on the 16-bit GEMM curve (scalemodel/engine/job.py _bf16_gemms).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.engine import layer_compute
from scalemodel.engine.calibrate_runs import scaled_job
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.sensitivity import sensitivity
from scalemodel.specs.accelerator import ComputeEfficiency, GemmCurve

H100_BF16 = 989.4e12  # H100 SXM dense BF16, datasheet
H100_HBM = 3.35e12  # H100 SXM HBM3, datasheet
# a made-up curve with distinct 16-bit and fp8 halves, so using the wrong one shows
CURVE = ComputeEfficiency(gemm_max=0.5, gemm_half_dim=50.0, memory=0.6,
                          fp8=GemmCurve(gemm_max=0.4, gemm_half_dim=70.0))


def _job_and_grid(precision: str, gpus: int = 1, model: str = "gpt-7.5b") -> tuple[Any, Any]:
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model=model, sets=[],
                                 training={"precision": precision, "global_batch": 1, "micro_batch": 1}, strategy={})
    cl.accelerator.compute_efficiency = CURVE
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(st, tr, gpus, job)


@pytest.mark.parametrize(("precision", "want"), [("fp8", (H100_BF16, 0.5, 50.0)), ("bf16", (0.0, 0.0, 0.0))])
def test_fp8_job_carries_the_bf16_logits_peak_and_curve(precision: str, want: tuple) -> None:
    job, _ = _job_and_grid(precision)
    assert (job.logits_peak_flops, job.logits_gemm_max, job.logits_gemm_half_dim) == pytest.approx(want)


@pytest.mark.parametrize("precision", ["fp8", "bf16"])
def test_logits_time_by_hand_at_the_16bit_curve(precision: str) -> None:
    """The logits' share of a micro-batch (stage with the logits minus the same stage without) by hand:

        T = b s tokens, GEMM T x V x h:  t_gemm = max(2 T V h / (P_bf16 eff), (T h + h V + T V) 2 B / (HBM mem))
        eff = 0.5 x T/(T+50) x V/(V+50) x h/(h+50)   (16-bit curve, also in an fp8 run)
        cross-entropy (loss_impl megatron, the default): 38 + 14 B a logit, 52 T V bytes / (HBM mem)
        forward + backward = 3 t_gemm + t_ce  (tests/test_loss_impl.py lists the loss's passes)
    """
    job, g = _job_and_grid(precision)
    sh = job.shape
    T, V, h = 1 * job.seq_len, float(sh.vocab), float(sh.hidden)
    eff = 0.5 * T / (T + 50) * V / (V + 50) * h / (h + 50)
    t_gemm = max(2 * T * V * h / (H100_BF16 * eff), (T * h + h * V + T * V) * 2 / (H100_HBM * 0.6))
    t_ce = (38 + 14) * T * V / (H100_HBM * 0.6)
    layers = np.ones(1)  # one layer on the stage
    with_logits = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=True)["total"]
    without = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)["total"]
    assert float((with_logits - without).ravel()[0]) == pytest.approx(3 * t_gemm + t_ce, rel=1e-12)
    # on the fp8 curve (gemm_max 0.4, d0 70, fp8 peak) it would be visibly different
    eff8 = 0.4 * T / (T + 70) * V / (V + 70) * h / (h + 70)
    assert 2 * T * V * h / (2 * H100_BF16 * eff8) < 0.7 * t_gemm


def test_sensitivity_peak_moves_every_compute_peak() -> None:
    """A single GPU does no communication, so its step is homogeneous of degree -1 in (peaks, memory bandwidth):
    e_peak + e_memory_bandwidth = 1 (Euler). In an fp8 run that holds only if "peak FLOP/s" also moves the BF16
    peaks of the attention core and the logits GEMM. Priced with the tensorwise recipe: delayed scaling's amax
    reductions launch two kernels per chunk and pass whose fixed time (compute.KERNEL_FIXED_S, docs/model.md#fp8-amax)
    neither moves, so that step is not homogeneous."""
    job, g = _job_and_grid("fp8")
    job = replace(job, fp8_recipe="tensorwise")
    assert job.attention_peak_flops > 0 and job.logits_peak_flops > 0
    r = sensitivity(job, g, factor=2.0)
    p = {q.name: q for q in r.parameters}
    assert p["peak FLOP/s"].elasticity + p["memory bandwidth"].elasticity == pytest.approx(1.0, abs=1e-6)
    assert r.group_ratios["compute"] == pytest.approx(p["peak FLOP/s"].throughput_ratio, rel=1e-12)


def test_calibration_scales_the_bf16_logits_by_the_16bit_factor() -> None:
    """calibrate-runs: an fp8 run's GEMMs take the fp8 factor c8, its BF16 parts (attention core, logits GEMM)
    the 16-bit factor c, like the memory efficiency: curve 0.4 (fp8) x 0.6 and 0.5 (16-bit) x 0.8."""
    job, _ = _job_and_grid("fp8")
    j = scaled_job(job, 0.8, {}, fp8=0.6)
    assert (j.gemm_max, j.attention_gemm_max, j.logits_gemm_max) == pytest.approx((0.24, 0.4, 0.4))
    assert j.memory_efficiency == pytest.approx(0.48)
