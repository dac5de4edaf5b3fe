"""FP8 attention's rate (training.fp8_attention): the fused core of an FP8 / MXFP8 SDPA runs at the measured FP8 /
BF16 kernel time of its shape class on the same GPU (cost.compute.fp8_attention_time_ratios,
FP8_ATTENTION_TIME_RATIOS; layer_compute_time ``fp8_attention_ratios``; docs/model.md#fp8-attention-rate)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost import transformer
from scalemodel.cost.compute import (
    FP8_ATTENTION_TIME_RATIOS,
    NO_FP8_ATTENTION_RATIOS,
    fp8_attention_ratio_at,
    fp8_attention_time_ratios,
    layer_compute_time,
)
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

CLASS_SWEEP = {192: "dsv3", 128: "llama3.1", 64: "gpt_oss"}


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
@pytest.mark.parametrize("d", [192, 128, 64])
def test_every_class_is_the_sweeps_ratio_at_each_s(gpu: str, d: int) -> None:
    """Each class, scaling and direction is the measured FP8 / BF16 time at each swept s (CSV_MS, below); the d-64
    backward is 1 (the window-blind rule prices it)."""
    for col, recipe in ((1, "mxfp8"), (2, "fp8")):
        fwd, bwd = FP8_ATTENTION_TIME_RATIOS[gpu][recipe][d]
        for i in range(len(SWEEP_S)):
            ms = CSV_MS[(CLASS_SWEEP[d], gpu, "fwd")][i]
            assert fwd[i] == pytest.approx(ms[col] / ms[0], abs=6e-4)
            if d == 64:
                assert bwd[i] == 1.0
            else:
                ms = CSV_MS[(CLASS_SWEEP[d], gpu, "bwd")][i]
                assert bwd[i] == pytest.approx(ms[col] / ms[0], abs=6e-4)
    # by hand, GB300 MXFP8 d 192 at s 8192: 1.944 / 3.013
    if gpu == "gb300":
        assert FP8_ATTENTION_TIME_RATIOS[gpu]["mxfp8"][192][0][2] == pytest.approx(1.944 / 3.013, abs=6e-4)


def test_the_ratio_between_swept_lengths_is_linear_in_log_s() -> None:
    r = FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][128][1]
    assert fp8_attention_ratio_at(r, 4096.0) == pytest.approx(r[1])
    assert fp8_attention_ratio_at(r, 4096.0 * 2 ** 0.5) == pytest.approx((r[1] + r[2]) / 2)
    assert fp8_attention_ratio_at(r, 512.0) == pytest.approx(r[0])  # the end value beyond the sweep
    assert fp8_attention_ratio_at(r, 131072.0) == pytest.approx(r[-1])
    assert fp8_attention_ratio_at(0.7, 3000.0) == pytest.approx(0.7)


def test_class_recipe_and_borrowing() -> None:
    mla = FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][192]
    assert fp8_attention_time_ratios("gb300", "mxfp8", 192) == mla
    assert fp8_attention_time_ratios("b300", "mxfp8", 192) == mla  # Blackwell Ultra borrows GB300's
    assert fp8_attention_time_ratios("GB300", "mxfp8", 256) == mla  # beyond the largest class: the largest
    assert fp8_attention_time_ratios("gb300", "mxfp8", 96) == FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][128]
    assert fp8_attention_time_ratios("b200", "delayed", 64) == FP8_ATTENTION_TIME_RATIOS["gb200"]["fp8"][64]
    assert fp8_attention_time_ratios("b200", "tensorwise", 128) == FP8_ATTENTION_TIME_RATIOS["gb200"]["fp8"][128]
    assert fp8_attention_time_ratios("mi300x", "delayed", 128) == NO_FP8_ATTENTION_RATIOS  # no sweep: as before


def _layer(fp8: bool, ratios: Any, seq_len: int = 4096) -> tuple[float, float, float]:
    c = load_yaml(ROOT / "hardware" / "accelerators" / "gb300.yaml")["attention_efficiency"]["cudnn"]
    curve = {d: {k: float(c[d][k]) for k in ("attn_max", "seq_half", "head_half")} for d in ("fwd", "bwd")}
    sh = transformer.shape(layers=2, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn_hidden=8192, vocab=1000,
                           gated_mlp=True)
    lt = layer_compute_time(sh, micro_batch=1, seq_len=seq_len, peak_flops=5000e12, memory_bandwidth=8e12,
                            gemm_max=0.5, gemm_half_dim=113.0, flash_attention=True, attention_fwd=curve["fwd"],
                            attention_bwd=curve["bwd"], core_peak_flops=2500e12, core_gemm_max=0.55,
                            core_gemm_half_dim=175.0, fp8_attention=fp8, fp8_attention_ratios=ratios)
    return float(lt.forward), float(lt.backward), float(lt.attention_core)


def test_the_ratios_scale_the_fused_core_and_nothing_else() -> None:
    """forward moves by (r_f - 1) x the BF16 core's forward; backward by (r_b - 1) x its backward, which is the
    backward with the ratio 2 less the one without."""
    f0, b0, core0 = _layer(False, (1.0, 1.0))
    f1, b1, core1 = _layer(True, (1.0, 1.0))
    assert (f1, b1, core1) == (f0, b0, core0)  # no window, no ratio: as a BF16 core
    f2, b2, core2 = _layer(True, (2.0, 2.0))
    core_bwd = b2 - b0
    assert core2 == pytest.approx(2.0 * core0, rel=1e-12)
    fr, br, corer = _layer(True, (0.645, 0.725))
    assert corer == pytest.approx(0.645 * core0, rel=1e-12)
    assert fr - f0 == pytest.approx((0.645 - 1.0) * core0, rel=1e-9)
    assert br - b0 == pytest.approx((0.725 - 1.0) * core_bwd, rel=1e-9)
    assert _layer(False, (0.5, 0.5)) == (f0, b0, core0)  # the ratios need fp8_attention


def test_the_job_carries_its_accelerators_ratios() -> None:
    """DeepSeek-V3 (MLA, Q K head dim 192) with MXFP8 and fp8_attention on a GB300 gets GB300's d-192 MXFP8 pair;
    on an MI300X (no sweep) and without fp8_attention (1, 1)."""
    ds = load_workload("deepseek-v3")
    tr = TrainingSpec(precision="fp8", fp8_recipe="mxfp8", fp8_attention=True)
    assert build_job(load_cluster("gb300-nvl72", overrides=[]), ds, tr).fp8_attention_ratios == \
        FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][192]
    off = TrainingSpec(precision="fp8", fp8_recipe="mxfp8")
    assert build_job(load_cluster("gb300-nvl72", overrides=[]), ds, off).fp8_attention_ratios == NO_FP8_ATTENTION_RATIOS
    amd = TrainingSpec(precision="fp8", fp8_attention=True)
    assert build_job(load_cluster("mi300x-8", overrides=[]), ds, amd).fp8_attention_ratios == NO_FP8_ATTENTION_RATIOS


#: Every time the table reads (review26a): NVIDIA/cudnn-frontend@3929da2 benchmark/sdpa_benchmark_training/results/
#: {dsv3,llama3.1,gpt_oss}/{gb200,gb300}/*_20260424_*.csv, attn_mask top_left, deterministic_bwd False, time_ms at
#: s 2048, 4096, 8192, 16384, 32768 as (bfloat16, mxfp8, fp8), copied from the files (dsv3 b 2, 128 heads, qk 192 /
#: v 128; llama3.1 b 2, GQA 64 / 8, d 128; gpt_oss b 2, 128 heads, d 64, window 128)
SWEEP_S = (2048, 4096, 8192, 16384, 32768)
CSV_MS = {
    ("dsv3", "gb200", "fwd"): [(0.321, 0.224, 0.207), (0.977, 0.714, 0.656), (3.470, 2.478, 2.294),
                               (13.103, 9.337, 8.845), (50.456, 37.773, 35.942)],
    ("dsv3", "gb200", "bwd"): [(1.056, 0.854, 0.681), (3.383, 2.620, 2.112), (11.984, 9.567, 7.296),
                               (50.424, 36.835, 29.050), (212.546, 149.238, 123.181)],
    ("dsv3", "gb300", "fwd"): [(0.268, 0.166, 0.150), (0.864, 0.546, 0.493), (3.013, 1.944, 1.758),
                               (11.178, 7.336, 6.653), (44.189, 29.731, 26.146)],
    ("dsv3", "gb300", "bwd"): [(0.977, 0.772, 0.591), (3.127, 2.348, 1.803), (11.074, 8.030, 6.188),
                               (43.911, 31.002, 23.257), (177.494, 122.768, 95.057)],
    ("llama3.1", "gb200", "fwd"): [(0.125, 0.103, 0.097), (0.391, 0.326, 0.305), (1.397, 1.156, 1.074),
                                   (5.150, 4.400, 4.084), (21.692, 17.201, 16.012)],
    ("llama3.1", "gb200", "bwd"): [(0.389, 0.461, 0.414), (1.198, 1.305, 1.167), (4.127, 4.272, 3.781),
                                   (16.554, 15.315, 13.476), (71.756, 61.716, 52.155)],
    ("llama3.1", "gb300", "fwd"): [(0.100, 0.079, 0.070), (0.323, 0.242, 0.217), (1.185, 0.856, 0.759),
                                   (4.593, 3.225, 2.880), (18.014, 12.632, 11.319)],
    ("llama3.1", "gb300", "bwd"): [(0.356, 0.424, 0.364), (1.101, 1.203, 0.985), (3.832, 3.917, 3.087),
                                   (14.593, 14.072, 10.805), (59.024, 55.340, 41.328)],
    ("gpt_oss", "gb200", "fwd"): [(0.109, 0.109, 0.101), (0.210, 0.210, 0.195), (0.414, 0.417, 0.385),
                                  (0.822, 0.826, 0.766), (2.634, 1.637, 1.529)],
    ("gpt_oss", "gb300", "fwd"): [(0.104, 0.092, 0.086), (0.202, 0.175, 0.167), (0.397, 0.342, 0.327),
                                  (0.790, 0.676, 0.650), (2.530, 1.345, 1.296)],
}


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
@pytest.mark.parametrize("recipe,col", [("mxfp8", 1), ("tensorwise", 2)])
@pytest.mark.parametrize("i", range(len(SWEEP_S)))
def test_the_d128_core_runs_at_the_measured_ratio_of_its_sequence(gpu: str, recipe: str, col: int, i: int) -> None:
    """review26a: the FP8 / BF16 time trends with s (GB300 MXFP8 d-128 backward 1.19 at 2k, 0.94 at 32k), so the core
    of a run at s takes the sweep's ratio at s, not the median over 2k-32k (the 8k point, whatever the run's s):
    a d-128 layer at each swept s moves its fused core by the CSV's FP8 / BF16 time at that s."""
    s = SWEEP_S[i]
    ratios = fp8_attention_time_ratios(gpu, recipe, 128)
    f0, b0, core0 = _layer(False, ratios, s)
    f1, b1, core1 = _layer(True, ratios, s)
    _, b2, _ = _layer(True, fp8_attention_time_ratios("mi300x", recipe, 128), s)  # no measurement: the BF16 core
    fwd = CSV_MS[("llama3.1", gpu, "fwd")][i]
    bwd = CSV_MS[("llama3.1", gpu, "bwd")][i]
    assert core1 / core0 == pytest.approx(fwd[col] / fwd[0], abs=6e-4)
    assert b2 == pytest.approx(b0, rel=1e-12)
    assert 1.0 + (b1 - b0) / _core_bwd(s) == pytest.approx(bwd[col] / bwd[0], abs=6e-4)


def _core_bwd(s: int) -> float:
    """The BF16 fused core's backward in :func:`_layer`: the backward with the core x 2 less the one with x 1."""
    return _layer(True, (2.0, 2.0), s)[1] - _layer(True, (1.0, 1.0), s)[1]


#: NVIDIA/cudnn-frontend@3929da2 benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
#: llama3.1_20260227_034703.csv (one NVIDIA H200, cuDNN 9.19.1, b 1, GQA 64 / 8, d 128, top_left, deterministic_bwd
#: False, profile_pass both): (fwd_time_ms, bwd_time_ms) of bfloat16 and fp8 at s 2048-32768, copied from the file
H200_MS = {"bfloat16": [(0.142, 0.464), (0.465, 1.450), (1.708, 5.083), (6.531, 19.002), (25.566, 75.688)],
           "fp8": [(0.098, 0.437), (0.322, 1.459), (1.141, 6.392), (4.357, 29.422), (16.884, 118.729)]}


@pytest.mark.parametrize("acc", ["h200-sxm", "h100-sxm", "h100-pcie", "h800"])
def test_hopper_takes_the_h200_twin_sweep(acc: str) -> None:
    """review26a: Hopper's per-tensor FP8 SDPA has a published twin sweep (H200, same frontend script, bfloat16 and
    fp8 on the same shapes): forward 0.66-0.69 of BF16's time, backward 0.94 at 2k to 1.57 at 32k. Before, every
    Hopper core was priced as a BF16 one (1). The H100s and H800 borrow the H200's (one GH100 die)."""
    fwd, bwd = fp8_attention_time_ratios(acc, "delayed", 128)
    for i in range(len(SWEEP_S)):
        bf, f8 = H200_MS["bfloat16"][i], H200_MS["fp8"][i]
        assert fwd[i] == pytest.approx(f8[0] / bf[0], abs=6e-4)
        assert bwd[i] == pytest.approx(f8[1] / bf[1], abs=6e-4)
    assert fp8_attention_time_ratios(acc, "tensorwise", 64) == (fwd, bwd)  # the only class measured there
    assert fp8_attention_time_ratios(acc, "tensorwise", 192) == (fwd, bwd)
