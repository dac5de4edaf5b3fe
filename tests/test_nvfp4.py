"""NVFP4 training (precision fp4): Transformer Engine's NVFP4BlockScaling recipe (docs/model.md#nvfp4).

GEMM rate. Source, read at NVIDIA/TransformerEngine@d0067d0da6 docs/examples/gemm_profiling/gemm_profiling.rst
(hardware/measurements/gemm.yaml TE-GEMMPROF-B300): one B300 SXM6 AC, the 12 GEMMs of one layer of a 5B config,
``--pre-quantize`` (GEMM kernels only), per-pass sums in ms:

    pass     FP8 current scaling   NVFP4
    fprop    2.158                 1.254
    dgrad    2.329                 1.305
    wgrad    2.325                 1.205
    layer    6.812                 3.764

Casts. transformer_engine/pytorch/csrc/quantizer.cpp ``NVFP4Quantizer::quantize_impl`` (same commit): an amax kernel
(``nvte_hadamard_transform_amax`` with RHT, ``nvte_compute_amax_with_config`` without) reads the 16-bit tensor, then
one kernel (``nvte_quantize_with_hadamard_transform`` / ``nvte_quantize_v2``) reads it again and writes the row-wise
and column-wise E2M1 copies (1/2 byte an element) with one E4M3 scale per 16 elements each.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import load_yaml

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError

FP8_CS = {"fprop": 2.158, "dgrad": 2.329, "wgrad": 2.325}
NVFP4 = {"fprop": 1.254, "dgrad": 1.305, "wgrad": 1.205}


def _job(cluster: str, precision: str, model: str = "gpt-7.5b", **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1, **training}
    cl, wl, tr, stg = build_specs(cluster=cluster, model=model, sets=[], training=tr_in, strategy={})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(stg, tr, 1, job)


def test_rate_factor_from_the_guide_by_hand() -> None:
    """6.812 / 3.764 = 1.8098: NVFP4's GEMMs 1.810x the per-tensor FP8 ones (passes add to the printed totals)."""
    assert sum(FP8_CS.values()) == pytest.approx(6.812, abs=1e-9)
    assert sum(NVFP4.values()) == pytest.approx(3.764, abs=1e-9)
    assert 6.812 / 3.764 == pytest.approx(1.80978, abs=1e-5)
    assert compute.FP8_RECIPE_GEMM_FACTORS["blackwell"]["nvfp4"] == round(6.812 / 3.764, 3) == 1.810


def test_precision_names() -> None:
    """fp4 is the label; Megatron-Bridge's recipe name and 'nvfp4' are aliases of it."""
    from scalemodel.choices import Precision
    assert Precision.parse("nvfp4") is Precision.FP4 is Precision.parse("bf16_with_nvfp4_mixed")
    assert Precision.FP4.element_bytes == 2.0  # activations stay 16-bit, as under fp8


@pytest.mark.parametrize("cluster,fp8_gm,fp8_d0,p8,p4", [
    ("gb200-nvl72", 0.496, 113.0, 5000e12, 10000e12),  # gb200.yaml fp8 curve, fp8 / fp4 dense peaks
    ("dgx-b200", 0.580, 366.0, 4500e12, 9000e12),  # b200.yaml
    ("dgx-b300", 0.588, 366.0, 4500e12, 13500e12),  # b300.yaml (3 x FP8, Blackwell Ultra)
    ("gb300-nvl72", 0.568, 113.0, 5000e12, 15000e12),  # gb300.yaml (gb200's x the chip ratio since gb300_29)
])
def test_job_prices_nvfp4_gemms_on_the_fp4_peak(cluster: str, fp8_gm: float, fp8_d0: float, p8: float,
                                                  p4: float) -> None:
    """gemm_max = fp8 gemm_max x 1.810 x P8 / P4 on the fp4 peak: the rate is 1.810x the fp8 curve's, by hand;
    the attention core and logits GEMM on the BF16 peak and 16-bit curve; recipe nvfp4."""
    job, _ = _job(cluster, "fp4")
    assert job.peak_flops == p4
    assert job.gemm_max == pytest.approx(fp8_gm * 1.810 * p8 / p4, rel=1e-12)
    assert job.gemm_half_dim == fp8_d0
    assert job.peak_flops * job.gemm_max == pytest.approx(1.810 * p8 * fp8_gm, rel=1e-12)
    assert job.fp8_recipe == "nvfp4"
    bf16, _ = _job(cluster, "bf16")
    assert job.attention_peak_flops == job.logits_peak_flops == bf16.peak_flops
    assert job.attention_gemm_max == job.logits_gemm_max == bf16.gemm_max


def test_large_gemm_runs_1_81x_the_fp8_one() -> None:
    """A compute-bound 8192^3 GEMM on a GB200: fp8 time / fp4 time = 1.810 exactly (the curve's shape is shared)."""
    j4, _ = _job("gb200-nvl72", "fp4")
    j8, _ = _job("gb200-nvl72", "fp8", fp8_recipe="tensorwise")
    kw = dict(memory_bandwidth=8e12)
    t4 = compute.gemm_time(8192, 8192, 8192, peak_flops=j4.peak_flops, gemm_max=j4.gemm_max,
                           gemm_half_dim=j4.gemm_half_dim, **kw)
    t8 = compute.gemm_time(8192, 8192, 8192, peak_flops=j8.peak_flops, gemm_max=j8.gemm_max,
                           gemm_half_dim=j8.gemm_half_dim, **kw)
    # by hand: 2 d^3 / (P x gm x (d / (d + d0))^3), d0 = 113 (gb200.yaml fp8, its own Azure sweep's; b200's 366
    # from bwcurve19 to review19c)
    eff8 = 0.496 * (8192 / (8192 + 113.0)) ** 3
    assert float(t8) == pytest.approx(2 * 8192.0 ** 3 / (5000e12 * eff8), rel=1e-12)
    assert float(t8) / float(t4) == pytest.approx(1.810, rel=1e-12)


def test_nvfp4_needs_blackwell() -> None:
    with pytest.raises(InputError, match="Blackwell"):
        _job("dgx-h100", "fp4")


def test_tensor_cast_bytes_by_hand() -> None:
    """Per element of a 16-bit tensor (eb = 2): amax read 2 + cast read 2 + two copies (1/2 + 1/16) = 5.125."""
    got = compute._fp8_tensor_bytes("nvfp4", 1000.0, 1000.0, from_norm=True, transpose_copy=False, eb=2.0)
    assert float(got) == pytest.approx((2 + 2 + 2 * (0.5 + 1 / 16)) * 1000, rel=1e-12) == 5125.0
    # gathered over SP ranks as NVFP4 both ways (TE _all_gather_nvfp4): priced on the local shard, like mxfp8
    got_sp = compute._fp8_tensor_bytes("nvfp4", 1000.0, 4000.0, from_norm=False, transpose_copy=True, eb=2.0)
    assert float(got_sp) == 5125.0


def test_layer_cast_bytes_scale_with_the_per_element_cost() -> None:
    """Every tensor of a layer is cast at a per-element cost independent of fusions under both block-scaled recipes,
    so a layer's NVFP4 bytes are its MXFP8 bytes x 5.125 / (2 + 2 (1 + 1/32)) = 5.125 / 4.0625, forward, backward
    and weights alike (a hand check of the tensor count that does not read the implementation's sums)."""
    _, g = _job("dgx-b200", "fp4")
    j, _ = _job("dgx-b200", "fp4")
    kw = dict(micro_batch=2.0, seq_len=4096, transpose_copy=False, tp=2, sequence_parallel=True)
    n4 = compute.fp8_quantize_bytes(j.shape, recipe="nvfp4", **kw)
    mx = compute.fp8_quantize_bytes(j.shape, recipe="mxfp8", **kw)
    for a, b in zip(n4, mx, strict=True):
        assert float(a) == pytest.approx(float(b) * 5.125 / 4.0625, rel=1e-12)


def test_dense_mlp_cast_bytes_by_hand() -> None:
    """gpt-7.5b's MLP (no TP), T = 4096 tokens: forward X of FC1 (T h) and FC2 (T f), backward
    dY of FC1 (T f) and FC2 (T h), weights 2 h f; each element 5.125 bytes. The MLP's share, by the difference
    between widths f and 2f: T f (fwd), T f (bwd, x2 gated), 2 h f (weights, 3 h f gated) elements more."""
    import msgspec
    j, _ = _job("dgx-b200", "fp4")
    sh = j.shape
    T, h = 4096.0, float(sh.hidden)
    f = float(sh.ffn_hidden)
    gated = 2.0 if bool(sh.gated_mlp) else 1.0
    kw = dict(micro_batch=1.0, seq_len=4096, transpose_copy=False)
    a = compute.fp8_quantize_bytes(sh, recipe="nvfp4", **kw)
    b = compute.fp8_quantize_bytes(msgspec.structs.replace(sh, ffn_hidden=2 * sh.ffn_hidden), recipe="nvfp4", **kw)
    assert float(b[0] - a[0]) == pytest.approx(5.125 * T * f, rel=1e-12)  # FC2's input grows by T f
    assert float(b[1] - a[1]) == pytest.approx(5.125 * T * gated * f, rel=1e-12)  # FC1's dY grows
    assert float(b[2] - a[2]) == pytest.approx(5.125 * (gated + 1) * h * f, rel=1e-12)  # FC1 + FC2 weights


def test_expert_quantize_is_grouped() -> None:
    """split_quantize's NVFP4 path runs grouped kernels over all experts: no per-expert launches (as delayed)."""
    assert compute.EXPERT_QUANTIZE_KERNELS["nvfp4"] == 0.0


def test_fp4_run_faster_than_fp8_but_not_beyond_its_flops() -> None:
    """gpt-7.5b on one DGX-B200 GPU: the fp4 step is faster than the MXFP8 one and never faster than its model FLOPs
    at the fp4 peak."""
    j4, g4 = _job("dgx-b200", "fp4")
    j8, g8 = _job("dgx-b200", "fp8", fp8_recipe="mxfp8")
    r4, r8 = step.evaluate(j4, g4), step.evaluate(j8, g8)
    assert float(r4.step_time[0]) < float(r8.step_time[0])
    assert float(r4.step_time[0]) >= float(r4.model_flops[0]) / 9000e12
    assert float(r4.model_flops[0]) == float(r8.model_flops[0])  # model FLOPs do not change with precision
    assert np.isfinite(float(r4.step_time[0]))


def test_bf16_layers_mix_the_bf16_runs_layers() -> None:
    """training.bf16_layers = L/4 on gpt-7.5b (one GPU, pp 1): a micro-batch's compute is 3/4 of the all-NVFP4 run's
    and 1/4 of the BF16 run's (whose layers are what Megatron-Core's BF16 layers run: BF16 GEMMs, no casts; the
    logits are BF16 in both, so the mix leaves them as they are)."""
    j4, g4 = _job("dgx-b200", "fp4")
    L = int(j4.shape.layers)
    assert L % 4 == 0
    jm, gm = _job("dgx-b200", "fp4", bf16_layers=L // 4)
    jb, gb = _job("dgx-b200", "bf16")
    assert jm.bf16_layer_share == 0.25
    one = np.array([float(L)])
    t4 = float(np.ravel(layer_compute._compute_per_microbatch(j4, g4, one)["total"])[0])
    tb = float(np.ravel(layer_compute._compute_per_microbatch(jb, gb, one)["total"])[0])
    tm = float(np.ravel(layer_compute._compute_per_microbatch(jm, gm, one)["total"])[0])
    assert tm == pytest.approx(0.75 * t4 + 0.25 * tb, rel=1e-12)
    assert t4 < tm < tb
    # and the whole step: slower than all-NVFP4, never faster than its FLOPs at the fp4 peak
    r4, rm = step.evaluate(j4, g4), step.evaluate(jm, gm)
    assert float(rm.step_time[0]) > float(r4.step_time[0]) >= float(r4.model_flops[0]) / 9000e12


def test_bf16_layers_refused_where_meaningless() -> None:
    with pytest.raises(InputError, match="bf16_layers"):
        _job("dgx-b200", "bf16", bf16_layers=2)
    with pytest.raises(InputError, match="bf16_layers"):
        _job("dgx-b200", "fp4", bf16_layers=10_000)


def test_megatron_fp4_and_bf16_layer_flags(tmp_path: Any) -> None:
    """Megatron-LM's --fp4-format e2m1 (--fp4-recipe nvfp4) is precision fp4; --first-last-layers-bf16 keeps
    --num-layers-at-start-in-bf16 + --num-layers-at-end-in-bf16 layers (defaults 1 + 1) in BF16 in a low-precision
    run and is unused otherwise; fp4 with fp8 is refused."""
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "a.args"
    f.write_text("--fp4-format e2m1 --fp4-recipe nvfp4 --first-last-layers-bf16 --num-layers-at-end-in-bf16 14 "
                 "--num-layers-at-start-in-bf16 0\n")
    assert read_strategy_file(f).training == {"precision": "fp4", "bf16_layers": 14}
    f.write_text("--fp8-format e4m3 --fp8-recipe tensorwise --first-last-layers-bf16\n")  # not delayed: review29c
    assert read_strategy_file(f).training == {"precision": "fp8", "fp8_recipe": "tensorwise", "bf16_layers": 2}
    f.write_text("--bf16 --first-last-layers-bf16\n")
    sf = read_strategy_file(f)
    assert "bf16_layers" not in sf.training and any("--first-last-layers-bf16" in u for u in sf.unused)
    f.write_text("--fp4-format e2m1 --fp8-format e4m3\n")
    with pytest.raises(InputError, match="both given"):
        read_strategy_file(f)


def test_gemm_yaml_records_the_nvfp4_source_as_applied() -> None:
    """The measurement behind the NVFP4 factor is recorded with its provenance (hardware/measurements/gemm.yaml)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    src = load_yaml(root / "hardware" / "measurements" / "gemm.yaml")["sources"]
    te = src["TE-GEMMPROF-B300"]
    assert te["nvfp4"].startswith("APPLIED") and "6.812 / 3.764" in te["nvfp4"]


def test_saved_nvfp4_inputs_by_hand() -> None:
    """An NVFP4 layer keeps the column-wise copies of its GEMM inputs at 1/2 + 1/16 bytes an element instead of FP8's
    1: gpt-7.5b (no TP, s 2048, b 1, flash core) saves the QKV and MLP inputs (s b h each), the O-projection input
    (s b a d_v) and the FC2 input (s b f), so the layer holds 0.4375 x (2 s b h + s b a d_v + s b f) bytes less."""
    from scalemodel.cost import memory
    j, _ = _job("dgx-b200", "fp4")
    sh = j.shape
    assert memory.quantized_input_bytes("nvfp4") == 0.5625 and memory.quantized_input_bytes("") == 0.0
    # FP8: the uint8 column-wise data, + one E8M0 scale per 32 elements for MXFP8 (TE mxfp8_tensor.py), one fp32
    # scale per tensor (not counted) for delayed and tensorwise scaling
    assert memory.quantized_input_bytes("mxfp8") == 1 + 1 / 32 == 1.03125
    assert memory.quantized_input_bytes("delayed") == memory.quantized_input_bytes("tensorwise") == 1.0
    kw = dict(micro_batch=1.0, seq_len=2048, flash_attention=True)
    fp8 = float(np.ravel(memory.activation_bytes_per_layer(sh, fp8_inputs=True, **kw))[0])
    nv = float(np.ravel(memory.activation_bytes_per_layer(sh, fp8_inputs=0.5625, **kw))[0])
    s, h, a, dv, f = 2048.0, float(sh.hidden), float(sh.heads), float(sh.v_head_dim), float(sh.ffn_hidden)
    assert not bool(sh.gated_mlp) and not bool(sh.parallel_block)
    assert fp8 - nv == pytest.approx(0.4375 * (2 * s * h + s * a * dv + s * f), rel=1e-12)


def test_calibration_scales_nvfp4_gemms_by_the_fp8_factor() -> None:
    """calibrate runs: an fp4 run's NVFP4 GEMMs are priced on the fp8 curve (1.810 x its rate), so they take the
    fp8 factor c8 that the overlay writes into that curve, not the 16-bit c (whose curve they never read); the BF16
    attention core and logits GEMM and the memory efficiency keep c. B200: fp8 gemm_max 0.580, 16-bit from the spec."""
    from scalemodel.engine.calibrate_runs import scaled_job
    job, _ = _job("dgx-b200", "fp4")
    j = scaled_job(job, 0.8, {}, fp8=0.6)
    assert j.gemm_max == pytest.approx(0.580 * 1.810 * 4500 / 9000 * 0.6, rel=1e-12)
    assert j.attention_gemm_max == pytest.approx(job.attention_gemm_max * 0.8, rel=1e-12)
    assert j.logits_gemm_max == pytest.approx(job.logits_gemm_max * 0.8, rel=1e-12)
    assert j.memory_efficiency == pytest.approx(job.memory_efficiency * 0.8, rel=1e-12)
