"""recompute_modules jax_qkvo: MaxText's ``save_dot_except_mlp`` / ``save_dot_except_mlpwi`` remat policies (and
``remat_policy=custom`` with query_proj, key_proj, value_proj, out_proj (mlpwo) on 'device'), the policies of
NVIDIA/dgxc-benchmarking@35a9aec maxtext/configure.sh (the mtdgxc24 rows).

What the policy saves, read at AI-Hypercomputer/maxtext@9551c2ade (models.py lines 314-330, attentions.py lines
1279-1281 and 1315, linears.py line 288, llama2.py line 82) and checked with ``jax.ad_checkpoint.
print_saved_residuals`` on that layer's structure: the layer input, Q and K after RoPE, V and the output projection's
output; the backward re-runs the norms, the attention core, the MLP's two up-projections and the activation (the
down-projection's output only feeds the residual sum, so mlpwo is no residual). Every expected value below is written
out from that list and cost/compute.py's roofline formulas, not read back from the implementation."""

from __future__ import annotations

import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape, training_flops

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)
QKVO = memory.recompute_modules_code("jax_qkvo")
DOTS = memory.recompute_modules_code("jax_dots")

# Llama 2 70B (models/llama2-70b.yml): h 8192, 64 query / 8 kv heads of 128, SwiGLU 28672
LLAMA2_70B = shape(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn_hidden=28672, vocab=32000,
                   gated_mlp=True, tied_embeddings=False, dropout=False)
# a small GQA layer for the compute side: h 1024, 8 heads of 128, 2 kv heads, SwiGLU 2816
SMALL = shape(layers=2, hidden=1024, heads=8, kv_heads=2, head_dim=128, ffn_hidden=2816, vocab=1000, gated_mlp=True,
              dropout=False)


def _gemm(m: float, n: float, k: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def test_saved_tensors_of_the_llama2_70b_layer_by_hand() -> None:
    # the dgxc rows: s 4096, MBS 2, no tensor parallelism. Kept per layer: the input and out_proj (2 x 2 s b h),
    # Q (2 s b a d), K and V (2 x 2 s b g d)
    s, b = 4096, 2
    by_hand = 2 * s * b * (8192 + 8192) + 2 * s * b * (64 * 128 + 8 * 128 + 8 * 128)
    assert by_hand == 436_207_616
    got = memory.activation_bytes_per_layer(LLAMA2_70B, micro_batch=b, seq_len=s, flash_attention=True,
                                            recompute="selective", recompute_modules=QKVO)
    assert float(got) == pytest.approx(by_hand, rel=1e-12)
    # tp 4 with sequence parallelism: the two residual-stream tensors / t, the heads / t
    got_t = memory.activation_bytes_per_layer(LLAMA2_70B, micro_batch=b, seq_len=s, tp=4, sequence_parallel=True,
                                              flash_attention=True, recompute="selective", recompute_modules=QKVO)
    assert float(got_t) == pytest.approx(by_hand / 4, rel=1e-12)
    # jax_dots (checkpoint_dots_with_no_batch_dims) keeps the two up-projections instead of out_proj
    dots = memory.activation_bytes_per_layer(LLAMA2_70B, micro_batch=b, seq_len=s, flash_attention=True,
                                             recompute="selective", recompute_modules=DOTS)
    assert float(dots) - float(got) == pytest.approx(2 * s * b * (2 * 28672 - 8192), rel=1e-12)


def test_hardware_flops_add_the_core_and_the_up_projections() -> None:
    # per layer and sequence (s 512): core 2 s s a (d + d_v) = 2 x 512 x 512 x 8 x 256; up-projections
    # 2 s (2 f) h = 2 x 512 x 2 x 2816 x 1024; 3 sequences x 2 layers
    core, up = 2 * 512 * 512 * 8 * 256, 2 * 512 * 2 * 2816 * 1024
    assert (core, up) == (1_073_741_824, 5_905_580_032)
    f = training_flops(SMALL, 512, 3, "selective", QKVO)
    assert float(f.recompute) == pytest.approx(6 * (core + up), rel=1e-12)
    assert float(f.hardware - f.model) == pytest.approx(6 * (core + up), rel=1e-12)
    # named with mlp the MLP's GEMMs are repeated once (mlp's whole block), not the up-projections twice
    both = training_flops(SMALL, 512, 3, "selective", memory.recompute_modules_code("jax_qkvo,mlp"))
    assert float(both.recompute) == pytest.approx(6 * (core + 2 * 512 * 3 * 2816 * 1024), rel=1e-12)


def test_layer_recompute_time_by_hand() -> None:
    # T = 2 x 512 tokens, layer_impl xla: the core + GEMM T x 2f x h + the bytes of the two norms (2e h each) and
    # the SwiGLU (3e f: reads gate and up, writes the product), e = 2
    T = 2 * 512
    kw = dict(micro_batch=2, seq_len=512, flash_attention=True, layer_impl="xla", **KW)
    core = float(compute.layer_compute_time(SMALL, recompute="selective", **kw).attention_core)
    lt = compute.layer_compute_time(SMALL, recompute="selective", recompute_modules=QKVO, **kw)
    by_hand = core + _gemm(T, 2 * 2816, 1024) + T * (2 * 2 * 1024 + 2 * 2 * 1024 + 3 * 2 * 2816) / (HBM * MEM)
    assert float(lt.recompute) == pytest.approx(by_hand, rel=1e-12)
    # jax_dots repeats the core only (its own memory-bound recompute is not priced apart)
    dots = compute.layer_compute_time(SMALL, recompute="selective", recompute_modules=DOTS, **kw)
    assert float(dots.recompute) == pytest.approx(core, rel=1e-12)
    # an MoE layer (priced with moe named too, maxtext30): no dense MLP there, the core and the two norms' bytes
    # (2e h each) again; the block itself is moe's
    moe = shape(layers=2, hidden=1024, heads=8, kv_heads=2, head_dim=128, ffn_hidden=2816, vocab=1000,
                gated_mlp=True, moe_experts=8, moe_top_k=2, moe_ffn_hidden=512)
    m = compute.layer_compute_time(moe, recompute="selective", recompute_modules=QKVO, moe=True, **kw)
    assert float(m.recompute) == pytest.approx(float(m.attention_core) + T * 2 * 2 * 2 * 1024 / (HBM * MEM),
                                               rel=1e-12)


def test_engine_refuses_jax_qkvo_on_an_moe_model(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-c", "dgx-h100", "-n", "64", "-m", "mixtral-8x7b", "--recompute", "selective",
            "--set", "strategy.recompute_modules=jax_qkvo")
    assert r.code == 2
    assert "jax_qkvo prices MaxText's save_dot_except_mlp(wi) on a dense block" in r.err
    assert "the model has MoE layers" in r.err


@pytest.mark.parametrize("name", ["jax_qkvo", "titan_op"])
def test_engine_refuses_a_dense_only_set_on_a_hybrid_pattern(cli, name: str) -> None:  # type: ignore[no-untyped-def]
    # a dense (no MoE) Mamba-2 / attention / MLP pattern: the policies name one attention + MLP block per layer, and
    # cost.memory would charge an MLP-only or Mamba-2 layer the Q, K, V it does not have
    r = cli("predict", "-c", "dgx-h100", "-n", "8", "-m", "nemotron-3-nano", "--set", "model.moe=null",
            "--set", "model.mtp_layers=0", "--set", "model.layers=28", "--set", "model.hybrid.pattern=" + "M-M*-M-" * 4,
            "--recompute", "selective", "--set", f"strategy.recompute_modules={name}")
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.err
    assert f"{name} prices" in lines[0] and "the model has a hybrid layer pattern" in lines[0]
