"""FP8 attention's rate (training.fp8_attention): the fused core of an FP8 / MXFP8 SDPA runs at the measured FP8 /
BF16 kernel time of its shape class on the same GPU (cost.compute.fp8_attention_time_ratios,
FP8_ATTENTION_TIME_RATIOS; layer_compute_time ``fp8_attention_ratios``; docs/model.md#fp8-attention-rate)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from conftest import load_yaml

from scalemodel.cost import transformer
from scalemodel.cost.compute import FP8_ATTENTION_TIME_RATIOS, fp8_attention_time_ratios, layer_compute_time
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

ROOT = Path(__file__).resolve().parents[1]

#: NVIDIA/cudnn-frontend@3929da2 benchmark/sdpa_benchmark_training/results/dsv3/gb300/dsv3_20260424_101002.csv and
#: dsv3/gb200/dsv3_20260424_101009.csv (cuDNN 9.22.0; b 2, 128 heads, d 192 / 128, top_left causal,
#: deterministic_bwd False): time_ms at s 2048, 4096, 8192, 16384, 32768, as (bfloat16, mxfp8, fp8)
DSV3_MS = {
    ("gb300", "fwd"): [(0.268, 0.166, 0.150), (0.864, 0.546, 0.493), (3.013, 1.944, 1.758), (11.178, 7.336, 6.653),
                       (44.189, 29.731, 26.146)],
    ("gb300", "bwd"): [(0.977, 0.772, 0.591), (3.127, 2.348, 1.803), (11.074, 8.030, 6.188),
                       (43.911, 31.002, 23.257), (177.494, 122.768, 95.057)],
    ("gb200", "fwd"): [(0.321, 0.224, 0.207), (0.977, 0.714, 0.656), (3.470, 2.478, 2.294), (13.103, 9.337, 8.845),
                       (50.456, 37.773, 35.942)],
    ("gb200", "bwd"): [(1.056, 0.854, 0.681), (3.383, 2.620, 2.112), (11.984, 9.567, 7.296),
                       (50.424, 36.835, 29.050), (212.546, 149.238, 123.181)],
}
#: llama3.1/gb300/llama3.1_20260424_100757.csv (b 2, GQA 64 / 8, d 128, top_left): (bfloat16, mxfp8) time_ms
LLAMA_GB300_MS = {"fwd": [(0.100, 0.079), (0.323, 0.242), (1.185, 0.856), (4.593, 3.225), (18.014, 12.632)],
                  "bwd": [(0.356, 0.424), (1.101, 1.203), (3.832, 3.917), (14.593, 14.072), (59.024, 55.340)]}


def _median_ratio(rows: list[tuple[float, ...]], col: int) -> float:
    return statistics.median(r[col] / r[0] for r in rows)


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_mla_ratios_are_the_sweeps_medians(gpu: str) -> None:
    """The d-192 class is the median over s 2k-32k of the measured FP8 / BF16 time, per direction and scaling."""
    for col, recipe in ((1, "mxfp8"), (2, "fp8")):
        fwd, bwd = FP8_ATTENTION_TIME_RATIOS[gpu][recipe][192]
        assert fwd == pytest.approx(_median_ratio(DSV3_MS[(gpu, "fwd")], col), abs=6e-4)
        assert bwd == pytest.approx(_median_ratio(DSV3_MS[(gpu, "bwd")], col), abs=6e-4)
    # by hand, GB300 MXFP8: the middle of 0.619 / 0.632 / 0.645 / 0.656 / 0.673 is 1.944 / 3.013
    if gpu == "gb300":
        assert FP8_ATTENTION_TIME_RATIOS[gpu]["mxfp8"][192][0] == pytest.approx(1.944 / 3.013, abs=6e-4)


def test_d128_class_is_the_llama_sweeps_median() -> None:
    fwd, bwd = FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][128]
    assert fwd == pytest.approx(_median_ratio(LLAMA_GB300_MS["fwd"], 1), abs=6e-4)
    assert bwd == pytest.approx(_median_ratio(LLAMA_GB300_MS["bwd"], 1), abs=6e-4)
    assert bwd > 1.0  # MXFP8's backward at d 128 is no faster than BF16's: priced slower, as measured


def test_class_recipe_and_borrowing() -> None:
    mla = FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][192]
    assert fp8_attention_time_ratios("gb300", "mxfp8", 192) == mla
    assert fp8_attention_time_ratios("b300", "mxfp8", 192) == mla  # Blackwell Ultra borrows GB300's
    assert fp8_attention_time_ratios("GB300", "mxfp8", 256) == mla  # beyond the largest class: the largest
    assert fp8_attention_time_ratios("gb300", "mxfp8", 96) == FP8_ATTENTION_TIME_RATIOS["gb300"]["mxfp8"][128]
    assert fp8_attention_time_ratios("b200", "delayed", 64) == FP8_ATTENTION_TIME_RATIOS["gb200"]["fp8"][64]
    assert fp8_attention_time_ratios("b200", "tensorwise", 128) == FP8_ATTENTION_TIME_RATIOS["gb200"]["fp8"][128]
    assert fp8_attention_time_ratios("h100-sxm", "delayed", 128) == (1.0, 1.0)  # no sweep with FP8 rows: as before


def _layer(fp8: bool, ratios: tuple[float, float]) -> tuple[float, float, float]:
    c = load_yaml(ROOT / "hardware" / "accelerators" / "gb300.yaml")["attention_efficiency"]["cudnn"]
    curve = {d: {k: float(c[d][k]) for k in ("attn_max", "seq_half", "head_half")} for d in ("fwd", "bwd")}
    sh = transformer.shape(layers=2, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn_hidden=8192, vocab=1000,
                           gated_mlp=True)
    lt = layer_compute_time(sh, micro_batch=1, seq_len=4096, peak_flops=5000e12, memory_bandwidth=8e12,
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
    on an H100 (no sweep) and without fp8_attention (1, 1)."""
    ds = load_workload("deepseek-v3")
    tr = TrainingSpec(precision="fp8", fp8_recipe="mxfp8", fp8_attention=True)
    assert build_job(load_cluster("gb300-nvl72", overrides=[]), ds, tr).fp8_attention_ratios == (0.645, 0.725)
    off = TrainingSpec(precision="fp8", fp8_recipe="mxfp8")
    assert build_job(load_cluster("gb300-nvl72", overrides=[]), ds, off).fp8_attention_ratios == (1.0, 1.0)
    h100 = TrainingSpec(precision="fp8", fp8_attention=True)
    assert build_job(load_cluster("dgx-h100", overrides=[]), ds, h100).fp8_attention_ratios == (1.0, 1.0)
