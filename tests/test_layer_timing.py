"""hardware/measurements/layer_timing.yaml and scripts/fit_in_layer_factor.py.

The A100 row must give back IN_LAYER_GEMM_FACTOR from Korthikanti et al. 2022 Table 4 (the times typed from the
paper), the H100 rows of Transformer Engine's guide Hopper's factors (HOPPER_IN_LAYER_GEMM_FACTOR); model times are
recomputed by hand from the roofline formulas of scalemodel/cost/compute.py's
docstring; the all-reduce time from the nccl-tests table's two neighbouring rows.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from conftest import ROOT

from scalemodel.cost.compute import (
    BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR,
    HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR,
    HOPPER_IN_LAYER_GEMM_FACTOR,
    IN_LAYER_GEMM_FACTOR,
    in_layer_gemm_factor,
)
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import fit_in_layer_factor as fl  # noqa: E402

DOC = fl.load()
KEYS = {"src", "row", "acc", "prec", "hidden", "heads", "ffn", "seq", "micro_batch", "tp", "sp", "flash", "causal",
        "recompute", "measured", "ms", "ar"}


def test_yaml_loads_and_is_sane() -> None:
    assert DOC["kind"] == "measurements" and DOC["what"] == "layer_timing"
    for name, src in DOC["sources"].items():
        assert src.get("cite") and src.get("status"), name
    for p in DOC["points"]:
        assert KEYS <= set(p), p
        assert p["src"] in DOC["sources"]
        assert p["prec"] in {"bf16", "fp16", "fp8"}
        assert p["measured"] in {"fwd", "bwd", "fwd+bwd"}
        assert p["recompute"] in {"none", "selective", "full"}
        assert 0.1 < p["ms"] < 1000 and p["hidden"] % p["heads"] == 0 and p["ar"] in (0, 2)
    # the TE guide's summary CSV repeats its .out 'Mean time' lines rounded to 0.01 ms
    te = {p["row"]: p["ms"] for p in DOC["points"] if p["src"] == "TE-GS-PT"}
    csv = {"Baseline PyTorch": 48.28, "TE Unfused": 49.34, "TE Unfused + TE Attention": 35.71,
           "TE Unfused + TE Attention + FP8": 23.41, "TE Fused + TE Attention + FP8": 22.96,
           "TE TransformerLayer + FP8": 21.67}
    assert set(te) == set(csv) and all(abs(te[k] - v) <= 0.005 for k, v in csv.items())


def test_a100_row_reproduces_the_documented_factor() -> None:
    """Least squares on ln time over the six Table 4 times, divided by the A100 microbenchmark fit (0.840)."""
    pts = [p for p in DOC["points"] if p["src"] == fl.REFERENCE]
    assert len(pts) == 6
    gm = fl.best_gemm_max(pts, DOC["sources"][fl.REFERENCE])
    iso = fl.isolated_curve("a100-sxm-80g", "fp16")["gemm_max"]
    assert gm == pytest.approx(0.7565, abs=0.002)  # Megatron-LM's own memory-bound ops (layer_impl megatron_legacy)
    assert gm / iso == pytest.approx(IN_LAYER_GEMM_FACTOR, abs=0.002)


def test_allreduce_time_from_the_nccl_table_by_hand() -> None:
    """GPT-3 layer, b 1, s 2048: 2048 x 12288 x 2 B = 50.33 MB, between the Azure ND H100 v5 rows 33554432 B
    (295.53 GB/s) and 67108864 B (361.78 GB/s); log-log: 295.53 x (361.78/295.53)^(ln(50.33e6/33.55e6)/ln 2)."""
    msg = 2048 * 12288 * 2
    bw = 295.53 * (361.78 / 295.53) ** (math.log(msg / 33554432) / math.log(2))
    p = next(q for q in DOC["points"] if q["src"] == "FUSER-TE" and q["row"] == "tp-forward")
    expected = 2 * 2 * 7 / 8 * msg / (bw * 1e9)  # two all-reduces, 2(n-1)/n x bytes / busbw
    assert fl.comm_time(p, DOC["sources"]["FUSER-TE"]) == pytest.approx(expected, rel=1e-9)
    assert 0.50e-3 < expected < 0.56e-3


def _gemm(m: float, n: float, k: float, count: float, gm: float, d0: float, peak: float, bw: float) -> float:
    eff = gm * m / (m + d0) * n / (n + d0) * k / (k + d0)
    return max(2 * m * n * k * count / (peak * eff), (m * k + k * n + m * n) * 2 * count / bw)


def _eltwise_by_hand(impl: str, dropout: bool) -> tuple[float, float]:
    """(forward, backward) memory-bound bytes of the TE guide's layer (h 4096, MHA, biases, GELU f 16384, learned
    positions, t 1, T = 16384 tokens, eb 2), op by op (docs/model.md#layer-eltwise): 'eager' (torch.nn modules) or
    'megatron_te' (TE's fused modules)."""
    e, h, f = 2.0, HID, FFN
    m = 2 * h if dropout else 0.0  # the two dropout masks, 1 B each
    dm = 2 * (2 * e + 1) * h if dropout else 0.0  # two dropout backwards (read dy + mask, write)
    if impl == "eager":
        fwd = [2 * 2 * e * h, 2 * 3 * e * h, dm, 2 * e * h, 2 * e * f]  # LN, adds, dropouts, output copy, GELU
        bwd = [2 * 5 * e * h, 2 * 3 * e * h, dm, 2 * e * 3 * h, e * (3 * h + h + f + h), 3 * e * f]
    else:
        fwd = [2 * 2 * e * h, 2 * 3 * e * h, m, 2 * e * f]  # TE norms, bias-dropout-adds, masks, bias_gelu
        bwd = [2 * 3 * e * h, 2 * 3 * e * h, dm, 3 * e * f + e * f]  # TE norm bwd, accumulations, dropout, bgelu+bias
    return T * sum(fwd), T * sum(bwd)


def test_te_baseline_model_time_by_hand() -> None:
    """TE guide 'Baseline PyTorch' (h 4096, a 32, f 16384, s 2048, b 8, t 1, unfused attention) on H100 SXM at
    gemm_max 0.687, from the formulas of scalemodel/cost/compute.py's docstring: T = 16384 tokens; GEMMs QKV
    T x 12288 x 4096, O T x 4096 x 4096, FC1 T x 16384 x 4096, FC2 T x 4096 x 16384; core 256 heads of
    2048 x 2048 x 128 and 2048 x 128 x 2048; softmax + dropout (4 eb + 1) 256 s^2 bytes, eb 2; the eager layer's
    memory-bound ops (_eltwise_by_hand, dropout 0.1); fwd+bwd = 3 x (GEMMs + core) + those bytes forward and
    backward."""
    peak, bw = 989.4e12, 3.35e12 * 0.88  # catalog h100-sxm: dense BF16 peak; HBM3 x memory fraction 0.88
    gm, d0 = 0.687, 87.0
    T, h, f, s = 16384.0, 4096.0, 16384.0, 2048.0
    gemms = sum(_gemm(T, n, k, 1, gm, d0, peak, bw) for n, k in ((3 * h, h), (h, h), (f, h), (h, f)))
    core = _gemm(s, s, 128, 256, gm, d0, peak, bw) + _gemm(s, 128, s, 256, gm, d0, peak, bw)
    soft = (4 * 2 + 1) * 256 * s * s / bw
    ef, eb = _eltwise_by_hand("eager", True)
    by_hand = 3 * (gemms + core + soft) + (ef + eb) / bw
    p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == "Baseline PyTorch")
    model = float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], gm)[()])
    assert model == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(48.27e-3, rel=0.002)  # the script's model time at its fit of then (0.6865)


def test_te_guide_is_out_of_reach_of_an_h100_pcie() -> None:
    """The guide does not name the H100 SKU. On h100-pcie (756 TFLOP/s BF16, 2.0 TB/s) even gemm_max 1 runs the
    BF16 rows slower than published, so the fit has no solution (NaN): the timings came from an SXM-class part."""
    pts = [p for p in DOC["points"] if p["src"] == "TE-GS-PT" and p["prec"] == "bf16"]
    assert math.isnan(fl.best_gemm_max(pts, DOC["sources"]["TE-GS-PT"], acc="h100-pcie"))
    assert np.isfinite(fl.best_gemm_max(pts, DOC["sources"]["TE-GS-PT"]))


def test_fuser_nsys_gemm_kernels_by_hand() -> None:
    """PR #4844's nsys rows: the three 256x128 nvjet instances (min 109663, med 384733, max 401214 ns) sum to
    3 x the average 298536.7 ns; with the 192x192 bias kernel (288415 ns) the four forward GEMMs of the GPT-3 layer
    per GPU at t 8 (2 x 2048 x (4608 x 12288 + 12288 x 1536 + 6144 x 12288 + 12288 x 6144) = 927.7 GFLOP) take
    1.184 ms, 784 TFLOP/s: faster than the model's isolated H100 curve (1.244 ms), let alone its in-layer one."""
    ns = DOC["sources"]["FUSER-TE-NSYS"]["gemm_kernels_ns"]
    assert sum(ns[:3]) == pytest.approx(3 * 298536.7, abs=1)
    g = fl.gemm_kernels(DOC)
    assert g["flops"] == pytest.approx(2 * 2048 * (4608 * 12288 + 12288 * 1536 + 2 * 6144 * 12288))
    assert g["measured"] == pytest.approx(1.184025e-3, rel=1e-6)
    assert g["measured"] < g["isolated"] < g["in_layer"]
    assert g["in_layer"] / g["isolated"] == pytest.approx(1 / HOPPER_IN_LAYER_GEMM_FACTOR["16bit"], rel=0.02)


def _flash(q: float, k: float, d: float, count: float, gm: float, d0: float, peak: float, bw: float) -> float:
    """Fused core (scalemodel/cost/compute.py flash_core_time): Q K^T and P V on the GEMM curve against Q, K, V, O."""
    eff1 = gm * q / (q + d0) * k / (k + d0) * d / (d + d0)
    return max(2 * q * k * count * 2 * d / eff1 / peak, 2 * (q + k) * d * 2 * count / bw)


H100 = dict(peak=989.4e12, bw=3.35e12 * 0.88)  # catalog h100-sxm: dense BF16 peak; HBM3 x memory fraction 0.88
T, HID, FFN, SEQ = 16384.0, 4096.0, 16384.0, 2048.0


def _te_layer_by_hand(gm: float, d0: float, peak: float, core_gm: float, impl: str = "eager",
                      dropout: bool = True) -> tuple[float, float, float]:
    """(GEMMs, causal core forward, memory-bound time forward + backward) of the TE guide's layer: GEMMs QKV
    T x 12288 x 4096, O T x 4096 x 4096, FC1 T x 16384 x 4096, FC2 T x 4096 x 16384 at (gm, d0, peak); the fused
    core of 256 heads over (s + 1)/2 = 1024.5 keys per query (the causal mask), d 128, at BF16 on core_gm with d0 87;
    the row's memory-bound bytes forward and backward (:func:`_eltwise_by_hand`) at 3.35 TB/s x 0.88."""
    bw = H100["bw"]
    gemms = sum(_gemm(T, n, k, 1, gm, d0, peak, bw) for n, k in ((3 * HID, HID), (HID, HID), (FFN, HID), (HID, FFN)))
    core = _flash(SEQ, (SEQ + 1) / 2, 128, 256, core_gm, 87.0, H100["peak"], bw)
    ef, eb = _eltwise_by_hand(impl, dropout)
    return gemms, core, (ef + eb) / bw


def test_te_attention_row_model_time_by_hand() -> None:
    """'TE Unfused + TE Attention' (causal te.DotProductAttention) at gemm_max 0.669, the core on the GEMM curve
    (core="gemm"): forward = GEMMs + memory + core over the causal keys; backward = 2 x (GEMMs + memory) + 2.5 x
    core (FlashAttention-2 Algorithm 2: five matmuls against two), so fwd+bwd = 3 GEMMs + the eager layer's
    memory-bound bytes forward and backward + 3.5 core."""
    gm = 0.669
    gemms, core, mem = _te_layer_by_hand(gm, 87.0, H100["peak"], gm)
    by_hand = 3 * gemms + mem + 3.5 * core
    p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == "TE Unfused + TE Attention")
    assert float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], gm, core="gemm")[()]) == pytest.approx(by_hand,
                                                                                                     rel=1e-9)


def _cudnn_core_by_hand(peak: float) -> tuple[float, float]:
    """(forward, backward) of the guide's causal core on h100-sxm's cuDNN curves (hardware/accelerators/h100-sxm.yaml
    attention_efficiency.cudnn, typed: fwd attn_max 0.719, seq_half 196, head_half 40; bwd 0.663, 357, 28): 256 heads
    of 2048 queries over k = 1024.5 keys, d 128; FLOPs 2 q k (d + d) per head forward, 2.5x that backward, at
    peak x attn_max x k/(k + k0) x d/(d + d0) (compute-bound: the Q K V O floor is 1000x shorter)."""
    k, d = (SEQ + 1) / 2, 128.0
    flops = 256 * 2 * SEQ * k * 2 * d
    fwd = flops / (peak * 0.719 * k / (k + 196) * d / (d + 40))
    bwd = 2.5 * flops / (peak * 0.663 * k / (k + 357) * d / (d + 28))
    return fwd, bwd


def test_te_attention_rows_on_the_cudnn_curve_by_hand() -> None:
    """The default pricing (core="kernel"): the rows' layer_timing.yaml kernel is cudnn (Transformer Engine's
    FusedAttention on Hopper), so the core runs h100-sxm's fitted cuDNN curves, as engine/layer_compute.py prices a
    Hopper job: fwd+bwd = 3 GEMMs + memory-bound bytes + core_fwd + core_bwd (backward = 2 x the GEMMs + the kernel's
    backward). BF16 row at gemm_max 0.6705; FP8 'TE TransformerLayer' at fp8 gemm_max 0.6645 (d0 155, 1979
    TFLOP/s), its core at the BF16 peak, plus its casts as in test_te_fp8_row_model_time_by_hand."""
    cf, cb = _cudnn_core_by_hand(H100["peak"])
    gemms, _, mem = _te_layer_by_hand(0.6705, 87.0, H100["peak"], 0.6705)
    p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == "TE Unfused + TE Attention")
    assert p["kernel"] == "cudnn"
    assert float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], 0.6705)[()]) == pytest.approx(
        3 * gemms + mem + cf + cb, rel=1e-9)
    gemms, _, mem = _te_layer_by_hand(0.6645, 155.0, 1979e12, 0.6705, "megatron_te", dropout=False)
    weights = 4 * HID * HID + 2 * HID * FFN
    casts = (26 * T * HID + 8 * T * FFN + 4 * weights - 8 * T * FFN) / H100["bw"]
    p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == "TE TransformerLayer + FP8")
    assert float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], 0.6645)[()]) == pytest.approx(
        3 * gemms + mem + cf + cb + casts, rel=1e-9)


def test_te_fp8_row_model_time_by_hand() -> None:
    """'TE TransformerLayer + FP8' at fp8 gemm_max 0.675 (d0 155, 1979 TFLOP/s), the core in BF16 on the GEMM curve
    at 0.669 (core="gemm"), plus
    the delayed-scaling casts of Transformer Engine on Hopper (cost.compute.fp8_quantize_bytes' table, per element):
    QKV and FC1 inputs from the fused norm 1 - 2 + 2 (FP8 norm output, transpose kernel), proj and FC2 inputs and every
    dY 2 + 1 + 1; weights (3h^2 + h^2 + 2hf) x 4 once per call. Forward 6 T h + 4 T f, backward (12 + 4 + 4) T h +
    4 T f, weights 4 W bytes, at 3.35 TB/s x 0.88 (Megatron-Core's layer spec). The row's te.LayerNormMLP writes FC2's
    FP8 input from the GELU kernel and FC1's FP8 output gradient from the dGELU kernel (te_modules 'fused'): the
    16-bit activation write and the cast's read of it, 2 + 2 bytes per T f element, drop each way: - 8 T f.
    'TE Unfused + TE Attention + FP8' (te.LayerNorm + te.Linear): its QKV and FC1 inputs are cast from the norm's
    16-bit output, 2 + 1 + 1 instead of 1 - 2 + 2: + 3 x 2 T h."""
    weights = 4 * HID * HID + 2 * HID * FFN
    megatron = (26 * T * HID + 8 * T * FFN + 4 * weights) / H100["bw"]
    assert 1.55e-3 < megatron < 1.65e-3  # 4.70 GB
    f, b, w = fl.fp8_quantize_bytes(fl.shape(layers=1, hidden=4096, heads=32, vocab=32000, ffn_hidden=16384,
                                             causal=True), micro_batch=8, seq_len=2048, recipe="delayed")
    assert float(f + b + w) / H100["bw"] == pytest.approx(megatron, rel=1e-12)
    # memory-bound ops per row (scripts/fit_in_layer_factor.py LAYER_IMPL): TE's fused modules (TransformerLayer
    # without dropout), the unfused row's PyTorch-side ops eager
    fused, unfused = megatron - 8 * T * FFN / H100["bw"], megatron + 6 * T * HID / H100["bw"]
    for row, casts, impl, drop in (("TE TransformerLayer + FP8", fused, "megatron_te", False),
                                   ("TE Fused + TE Attention + FP8", fused, "megatron_te", True),
                                   ("TE Unfused + TE Attention + FP8", unfused, "eager", True)):
        gemms, core, mem = _te_layer_by_hand(0.675, 155.0, 1979e12, 0.669, impl, drop)
        by_hand = 3 * gemms + mem + 3.5 * core + casts
        p = next(q for q in DOC["points"] if q["src"] == "TE-GS-PT" and q["row"] == row)
        model = float(fl.model_time(p, DOC["sources"]["TE-GS-PT"], 0.675, core_gemm_max=0.669, core="gemm")[()])
        assert model == pytest.approx(by_hand, rel=1e-9), row


def test_hopper_factors_come_from_the_te_guide() -> None:
    """HOPPER_IN_LAYER_GEMM_FACTOR is what the guide's H100 rows imply over the H100 SXM microbenchmark fits (BF16
    0.803, FP8 0.709, both the MAMF bound): least squares on ln time over the three BF16 rows, then over the three
    FP8 rows, the 'TE Attention' cores on h100-sxm's cuDNN curve (the kernel they ran). NVIDIA/Fuser's tp-8 layer
    implies far less (not used: its all-reduces ran NCCL RING_LL and host gaps may be included); an H100 PCIe cannot
    reach the guide's times. With every core on the GEMM curve (FP8 core on the BF16 in-layer fit) the same rows give
    HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR, the basis of families whose core stays on the GEMM curve. Blackwell borrows
    the kernel-core factor: its core is priced on its fitted cuDNN curve (b200, gb200 attention_efficiency)."""
    gemm_core = {(r["source"], r["acc"], r["group"]): r for r in fl.run(DOC, core="gemm", sources=("TE-GS-PT",))}
    g16, g8 = gemm_core[("TE-GS-PT", "h100-sxm", "16bit")], gemm_core[("TE-GS-PT", "h100-sxm", "fp8")]
    assert g16["factor"] == pytest.approx(HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR["16bit"], abs=0.002)
    assert g8["factor"] == pytest.approx(HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR["fp8"], abs=0.002)
    assert g8["core_gemm_max"] == g16["gemm_max"]
    for prec in ("bf16", "fp8"):
        assert in_layer_gemm_factor("hopper", prec) == HOPPER_IN_LAYER_GEMM_FACTOR[fl._group(prec)]
    assert in_layer_gemm_factor("blackwell", "bf16") == HOPPER_IN_LAYER_GEMM_FACTOR["16bit"]
    assert in_layer_gemm_factor("blackwell", "fp8") == BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR  # test below
    rows = {(r["source"], r["acc"], r["group"]): r for r in fl.run(DOC)}
    bf16, fp8 = rows[("TE-GS-PT", "h100-sxm", "16bit")], rows[("TE-GS-PT", "h100-sxm", "fp8")]
    assert bf16["isolated_gemm_max"] == pytest.approx(794.5 / 989.4, abs=5e-4)
    assert fp8["isolated_gemm_max"] == pytest.approx(1402.6 / 1979, abs=5e-4)
    assert bf16["factor"] == pytest.approx(HOPPER_IN_LAYER_GEMM_FACTOR["16bit"], abs=0.002)
    assert fp8["factor"] == pytest.approx(HOPPER_IN_LAYER_GEMM_FACTOR["fp8"], abs=0.002)
    assert fp8["core_gemm_max"] == bf16["gemm_max"]
    assert all(abs(q["model_ms"] / q["measured_ms"] - 1) < 0.05 for q in bf16["points"] + fp8["points"])
    assert rows[("FUSER-TE", "h100-sxm", "16bit")]["factor"] < 0.70
    assert math.isnan(rows[("TE-GS-PT", "h100-pcie", "16bit")]["factor"])


def _te_layer_ms(acc: str, prec: str, factor: float) -> float:
    """The 12 GEMMs of Transformer Engine's GEMM profiling layer (M 15872, h 4096, f 16384: fprop, dgrad, wgrad of
    QKV, attn out, MLP up, MLP down) on ``acc``'s catalog curve / ``factor``, written out: sum 2 m n k / (peak x
    gemm_max x prod d / (d + d0)) (every one compute-bound), ms."""
    a = load_accelerator(acc, overrides=[])
    gm, d0 = a.compute_efficiency.gemm(prec)  # type: ignore[union-attr]
    M, H, F = 15872, 4096, 16384
    fprop = ((M, 3 * H, H), (M, H, H), (M, F, H), (M, H, F))
    shapes = fprop + tuple((m, k, n) for m, n, k in fprop) + tuple((n, k, m) for m, n, k in fprop)
    peak = a.peak("fp8" if prec == "fp8" else "bf16")
    return sum(2e3 * m * n * k / (peak * gm / factor * m / (m + d0) * n / (n + d0) * k / (k + d0))
               for m, n, k in shapes)


def test_blackwell_fp8_factor_carries_hoppers_relation_to_the_te_kernel_ratio() -> None:
    """BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR (bw22), by hand: Transformer Engine's GEMM profiling guide measured the
    pre-quantized FP8 current-scaling / BF16 kernel ratio of one layer's 12 GEMMs on an H200 NVL (31.968 / 16.785
    ms) and a B300 (13.102 / 6.812 ms). h100-sxm's in-layer curves (the basis of Hopper's factors) price that ratio at
    1.720 x 0.900 / 0.847 = 1.829 (catalog rounding: within 0.002), 0.960 x its kernel ratio (its isolated curves
    1.720: the FP8 premium 0.900 / 0.847 closes part of that gap). Blackwell's isolated curves are bounded to the
    B300's kernel ratio (1.923); carrying Hopper's 0.960 gives the in-layer target 1.829 x 1.923 / 1.905 = 1.847 and
    fp8 factor 0.847 x 1.847 / 1.923 = 0.813, where Hopper's 0.900 would give 2.04 (bw22 on Hopper's earlier 0.855 /
    0.936, before h100cmp22 refit them on FA3-BWD: in-layer 1.884, target 1.902, factor 0.846, against 2.106). The
    script's derivation agrees."""
    hopper_in_layer = _te_layer_ms("h100-sxm", "bf16", 1.0) / _te_layer_ms("h100-sxm", "fp8", 1.0)
    hopper_isolated = (_te_layer_ms("h100-sxm", "bf16", HOPPER_IN_LAYER_GEMM_FACTOR["16bit"])
                       / _te_layer_ms("h100-sxm", "fp8", HOPPER_IN_LAYER_GEMM_FACTOR["fp8"]))
    assert (hopper_isolated, hopper_in_layer) == (pytest.approx(1.720, abs=0.002), pytest.approx(1.829, abs=0.002))
    target = hopper_in_layer * (13.102 / 6.812) / (31.968 / 16.785)
    assert target == pytest.approx(1.847, abs=0.002)
    for acc in ("b200", "b300", "gb200"):  # each fp8 curve on its FP8 / BF16 bound (gb300 borrows gb200's)
        iso = (_te_layer_ms(acc, "bf16", in_layer_gemm_factor("blackwell", "bf16"))
               / _te_layer_ms(acc, "fp8", BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR))
        assert iso == pytest.approx(13.102 / 6.812, abs=0.003), acc
        factor = HOPPER_IN_LAYER_GEMM_FACTOR["16bit"] * target / iso
        assert factor == pytest.approx(BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR, abs=0.001), acc
        in_layer = _te_layer_ms(acc, "bf16", 1.0) / _te_layer_ms(acc, "fp8", 1.0)
        assert in_layer == pytest.approx(target, abs=0.003), acc
        assert iso * HOPPER_IN_LAYER_GEMM_FACTOR["fp8"] / HOPPER_IN_LAYER_GEMM_FACTOR["16bit"] > 2.03  # Hopper's 0.900
    assert fl.blackwell_fp8_factor()["factor"] == pytest.approx(BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR, abs=0.001)
