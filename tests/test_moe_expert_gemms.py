"""MoE expert GEMMs are priced on the size-dependent GEMM curve at their real per-expert shape.

Checks (issue: MoE step predictions), each against a value computed here by hand or a published
microbenchmark, not against the implementation's own output:

* ``layer_compute_time(moe=True)`` prices the routed experts as E/ep GEMMs of M = ep*T*k/E tokens
  (Megatron-Core's grouped MLP: every local expert receives its share of the EP group's routed tokens;
  force-balanced routing, as the Megatron-Bridge benchmark runs state), K = h, N = 2 f_e (gated up + gate)
  and K = f_e, N = h (down), plus the router T x E x h, on the roofline of scalemodel/cost/compute.py.
* The H100 SXM fp8 curve of the catalog, without the in-layer factor (i.e. the isolated-GEMM
  microbenchmark fit), reproduces DeepGEMM's published FP8 grouped-GEMM (contiguous layout, the
  training-forward MoE layout) throughput on H800 SXM5 (same SM count and FP8 tensor peak as H100
  SXM) within 10 %: deepseek-ai/DeepGEMM README.md @a9967bc (2025-04-09), table "Grouped GEMMs for
  MoE models (contiguous layout)".
"""

from __future__ import annotations

import pytest

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.specs import load_cluster

# Qwen3-30B-A3B (Megatron-Bridge Qwen3MoEModelProvider 30B_A3B): h 2048, 32 heads x 128, 4 kv heads,
# 128 experts of width 768, top-8, gated; the mb2511 DGX-H100 run: micro-batch 2, s 4096, ep 8, tp 1.
H, HEADS, KV, D, E, K_TOP, FE = 2048, 32, 4, 128, 128, 8, 768
B, S, EP = 2, 4096, 8


def _roofline(m: float, n: float, k: float, count: float, peak: float, bw: float, gmax: float, d0: float,
              mem: float, eb: float) -> float:
    """The module docstring's formula, written out: max(2MNK / (peak * eff), bytes / (bw * mem))."""
    eff = gmax * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0))
    return count * max(2 * m * n * k / (peak * eff), (m * k + k * n + m * n) * eb / (bw * mem))


def test_expert_gemms_use_the_per_expert_shape_by_hand() -> None:
    peak, bw, gmax, d0, mem, eb = 1979e12, 3.35e12, 0.64, 167.0, 0.88, 2.0  # H100 SXM fp8 curve (catalog)
    kw = dict(micro_batch=B, seq_len=S, peak_flops=peak, memory_bandwidth=bw, gemm_max=gmax, gemm_half_dim=d0,
              memory_efficiency=mem, elem_bytes=eb, ep=EP, flash_attention=True)
    moe_sh = shape(layers=48, hidden=H, heads=HEADS, kv_heads=KV, head_dim=D, vocab=151936, gated_mlp=True,
                   moe_experts=E, moe_top_k=K_TOP, moe_ffn_hidden=FE)
    moe = compute.layer_compute_time(moe_sh, moe=True, **kw)
    # the same attention block with a dense MLP of width f: its MLP GEMMs by hand, subtracted
    f = 6144
    dense_sh = shape(layers=48, hidden=H, heads=HEADS, kv_heads=KV, head_dim=D, vocab=151936, gated_mlp=True,
                     ffn_hidden=f)
    dense = compute.layer_compute_time(dense_sh, **kw)
    T = B * S
    args = (peak, bw, gmax, d0, mem, eb)
    attention = float(dense.forward_gemm) - _roofline(T, 2 * f, H, 1, *args) - _roofline(T, H, f, 1, *args)
    m_expert = EP * T * K_TOP / E
    assert m_expert == 4096  # 8 ranks x 8192 tokens x top-8 over 128 experts
    experts_here = E / EP
    rows = m_expert + 64  # a 128-row tile multiple: each expert computes half a tile more (expert-tile-padding)
    by_hand = (attention + _roofline(T, E, H, 1, *args)  # router
               + _roofline(rows, 2 * FE, H, experts_here, *args)  # fc1: up + gate
               + _roofline(rows, H, FE, experts_here, *args))  # fc2: down
    assert float(moe.forward_gemm) == pytest.approx(by_hand, rel=1e-9)
    # the expert GEMMs run at about half of the fp8 peak at this shape, not at gemm_max
    eff_fc1 = gmax * (4096 / (4096 + d0)) * (2 * FE / (2 * FE + d0)) * (H / (H + d0))
    assert eff_fc1 == pytest.approx(0.513, abs=0.002)


#: deepseek-ai/DeepGEMM README.md @a9967bc, "Grouped GEMMs for MoE models (contiguous layout)", H800 SXM5,
#: NVCC 12.8: (groups, M per group, N, K, TFLOP/s).
DEEPGEMM_GROUPED_H800 = [(4, 8192, 4096, 7168, 1346.0), (4, 8192, 7168, 2048, 1214.0),
                         (8, 4096, 4096, 7168, 1346.0), (8, 4096, 7168, 2048, 1214.0)]


@pytest.mark.parametrize("groups,m,n,k,tflops", DEEPGEMM_GROUPED_H800)
def test_h100_fp8_curve_matches_a_published_grouped_gemm_benchmark(groups: int, m: int, n: int, k: int,
                                                                   tflops: float) -> None:
    acc = load_cluster("dgx-h100").accelerator
    gmax, d0 = acc.compute_efficiency.gemm("fp8")
    isolated = gmax / compute.in_layer_gemm_factor(acc.family, "fp8")  # the microbenchmark fit behind the curve
    eff = isolated * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0))
    model = eff * acc.peak("fp8") / 1e12
    assert model == pytest.approx(tflops, rel=0.10), f"{groups}x{m}x{n}x{k}: curve {model:.0f} vs {tflops:.0f}"


def test_router_priced_at_its_own_precision_by_hand() -> None:
    """An fp8 run's router GEMM (Megatron-Core router_gating_linear: the unquantized BF16 input, no FP8 module)
    runs on the BF16 peak and curve passed as router_*: the MoE layer's GEMM time moves by exactly the router's
    time at BF16 minus its time at fp8, each written out with the roofline formula. A DeepSeek-V3-sized router
    (h 7168, 256 experts) over 8 x 8192 tokens is compute-bound; Qwen3-30B's (h 2048, 128 experts, 8192 tokens:
    35 MB for 4.3 GFLOP) is memory-bound at either precision, so there the change is nil."""
    fp8 = (1979e12, 3.35e12, 0.64, 167.0, 0.88, 2.0)  # H100 SXM fp8 curve (catalog)
    bf16_peak, bf16_gmax, bf16_d0 = 989.4e12, 0.72, 87.0  # H100 SXM 16-bit curve (catalog)
    peak, bw, gmax, d0, mem, eb = fp8
    h, experts, b, s = 7168, 256, 8, 8192
    kw = dict(micro_batch=b, seq_len=s, peak_flops=peak, memory_bandwidth=bw, gemm_max=gmax, gemm_half_dim=d0,
              memory_efficiency=mem, elem_bytes=eb, ep=EP, flash_attention=True, moe=True)
    sh = shape(layers=61, hidden=h, heads=56, kv_heads=56, head_dim=D, vocab=129280, gated_mlp=True,
               moe_experts=experts, moe_top_k=K_TOP, moe_ffn_hidden=2048)
    same = compute.layer_compute_time(sh, **kw)
    own = compute.layer_compute_time(sh, router_peak_flops=bf16_peak, router_gemm_max=bf16_gmax,
                                     router_gemm_half_dim=bf16_d0, **kw)
    T = b * s
    delta = (_roofline(T, experts, h, 1, bf16_peak, bw, bf16_gmax, bf16_d0, mem, eb)
             - _roofline(T, experts, h, 1, *fp8))
    assert delta > 50e-6  # BF16 is the slower precision here (~0.48 vs ~0.33 ms)
    assert float(own.forward_gemm) - float(same.forward_gemm) == pytest.approx(delta, rel=1e-9)
