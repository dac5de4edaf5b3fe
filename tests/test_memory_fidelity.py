"""Memory-model terms of issue 13 (memory fidelity), each checked against a count made by hand from the
framework's documented behaviour (see the scalemodel.cost.memory module docstring for the sources).

Every expected value below is written out term by term from what the framework stores; none is read
back from the implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.memory import (
    activation_bytes,
    activation_bytes_per_layer,
    inflight_microbatches,
    memory_per_gpu,
    params_per_gpu,
    recompute_modules_code,
)
from scalemodel.cost.transformer import shape
from scalemodel.errors import InputError

# Llama-3-70B-like GQA shape: h 8192, a 64, g 8, d 128, SwiGLU f 28672
LLAMA = shape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128000, gated_mlp=True,
              tied_embeddings=False)
LLAMA_NODROP = shape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128000, gated_mlp=True,
                     tied_embeddings=False, dropout=False)
S, B = 8192, 1


def _per_layer(sh, **kw):
    return float(activation_bytes_per_layer(sh, micro_batch=B, seq_len=S, flash_attention=True, **kw))


def test_bf16_llama_layer_by_hand():
    # Korthikanti's terms with flash attention: norms 4sbh, QKV/MLP inputs 2+2, masks 2, Q 2sbh,
    # K and V 2 x 2 s b g d, O 2sbh, SwiGLU 6 s b f, softmax statistics 4 a s b (fp32)
    s, b, h, a, g, d, f = S, B, 8192, 64, 8, 128, 28672
    by_hand = (4 + 2 + 2 + 2) * s * b * h + 2 * s * b * h + 4 * s * b * g * d + 2 * s * b * h + 6 * s * b * f \
        + 4 * a * s * b
    assert _per_layer(LLAMA) == pytest.approx(by_hand, rel=1e-12)


def test_fp8_gemm_inputs_are_one_byte_by_hand():
    # TE keeps 1-byte copies of the QKV, MLP-up and MLP-down inputs; the O-projection keeps a 1-byte copy
    # next to the 16-bit attention output that flash attention keeps (3 sbh); norms, Q, K, V stay 16-bit;
    # SwiGLU keeps its 16-bit gate and up (4 s b f) and the product goes to the down-projection in fp8 (1)
    s, b, h, a, g, d, f = S, B, 8192, 64, 8, 128, 28672
    by_hand = (4 + 1 + 1 + 2) * s * b * h + 2 * s * b * h + 4 * s * b * g * d + 3 * s * b * h + 5 * s * b * f \
        + 4 * a * s * b
    assert _per_layer(LLAMA, fp8_inputs=True) == pytest.approx(by_hand, rel=1e-12)
    # without flash attention the O-projection input is only its fp8 copy (the V-matmul's backward reads the
    # probabilities and V, not its output); the scores term is Korthikanti's 5 a s^2 b
    no_flash = float(activation_bytes_per_layer(LLAMA, micro_batch=B, seq_len=S, fp8_inputs=True))
    by_hand_nf = (4 + 1 + 1 + 2) * s * b * h + 2 * s * b * h + 4 * s * b * g * d + 1 * s * b * h + 5 * s * b * f \
        + 5 * a * s * s * b
    assert no_flash == pytest.approx(by_hand_nf, rel=1e-12)


def test_fp8_gelu_mlp_by_hand():
    gpt = shape(layers=4, hidden=1024, heads=16, vocab=1000)  # f = 4h, GeLU, a = g
    s, b, h = 1024, 2, 1024
    got = float(activation_bytes_per_layer(gpt, micro_batch=b, seq_len=s, fp8_inputs=True, flash_attention=True))
    # GeLU keeps its 16-bit input (2 s b f) and the fp8 copy of its output (1 s b f), f = 4h: 12 sbh
    by_hand = (4 + 1 + 1 + 2) * s * b * h + 2 * s * b * h + 4 * s * b * h + 3 * s * b * h + 12 * s * b * h \
        + 4 * 16 * s * b
    assert got == pytest.approx(by_hand, rel=1e-12)


def test_no_dropout_drops_the_two_masks_and_the_embedding_mask():
    s, b, h = S, B, 8192
    assert _per_layer(LLAMA) - _per_layer(LLAMA_NODROP) == pytest.approx(2 * s * b * h, rel=1e-12)
    kw = dict(micro_batch=b, seq_len=s, pp=2, num_microbatches=8, flash_attention=True, stage_layers=1)
    one_layer = shape(layers=2, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128000, gated_mlp=True)
    one_layer_nd = shape(layers=2, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128000,
                         gated_mlp=True, dropout=False)
    # 1F1B first stage: min(m, p) = 2 micro-batches of (1 layer + the embedding mask s b h)
    diff = float(activation_bytes(one_layer, **kw)) - float(activation_bytes(one_layer_nd, **kw))
    assert diff == pytest.approx(2 * (2 * s * b * h + s * b * h), rel=1e-12)


def test_mla_up_proj_recompute_keeps_only_the_latents():
    # DeepSeek-V3 attention: a 128 heads, d = 128 + 64, d_v 128, r_q 1536, r_kv 512, rope 64
    ds = shape(layers=61, hidden=7168, heads=128, vocab=129280, head_dim=192, v_head_dim=128, q_lora_rank=1536,
               kv_lora_rank=512, qk_rope_head_dim=64, gated_mlp=True, ffn_hidden=18432, dropout=False)
    s, b, a = 4096, 1, 128
    full = float(activation_bytes_per_layer(ds, micro_batch=b, seq_len=s, flash_attention=True, recompute="selective"))
    up = float(activation_bytes_per_layer(ds, micro_batch=b, seq_len=s, flash_attention=True, recompute="selective",
                                          recompute_modules=recompute_modules_code("mla_up_proj")))
    # Q (2 s b a d) and the up-projected K, V (2 s b a (d + d_v)) are no longer kept
    assert full - up == pytest.approx(2 * s * b * a * 192 + 2 * s * b * a * (192 + 128), rel=1e-12)
    # outside selective recompute the modules change nothing
    none = float(activation_bytes_per_layer(ds, micro_batch=b, seq_len=s, flash_attention=True,
                                            recompute_modules=recompute_modules_code("mla_up_proj")))
    assert none == pytest.approx(full, rel=1e-12)


def test_moe_act_recompute_drops_the_expert_activation_output():
    moe = shape(layers=4, hidden=2048, heads=32, kv_heads=4, head_dim=128, vocab=1000, gated_mlp=True,
                ffn_hidden=6144, moe_experts=128, moe_top_k=8, moe_ffn_hidden=768, dropout=False)
    s, b = 4096, 1
    kw = dict(micro_batch=b, seq_len=s, flash_attention=True, recompute="selective", moe=True)
    base = float(activation_bytes_per_layer(moe, **kw))
    act = float(activation_bytes_per_layer(moe, recompute_modules=recompute_modules_code("core_attn,moe_act"), **kw))
    # per routed copy the SwiGLU product (2 s b f_e, 16-bit) is recomputed: k of them
    assert base - act == pytest.approx(8 * 2 * s * b * 768, rel=1e-12)


def test_jax_dots_policy_by_hand():
    # MaxText 32B synthetic (base.yml x scale 32): h 10240, 32 heads x 256, relu MLP 32768, tp 4 with the
    # activations sharded over the tensor axis; kept: layer input h, Q, K, V (3 x 8192), MLP up 32768
    mt = shape(layers=32, hidden=10240, heads=32, head_dim=256, ffn_hidden=32768, vocab=32768, dropout=False)
    s, b, t = 2048, 32, 4
    got = float(activation_bytes_per_layer(mt, micro_batch=b, seq_len=s, tp=t, sequence_parallel=True,
                                           flash_attention=True, recompute="selective",
                                           recompute_modules=recompute_modules_code("jax_dots")))
    by_hand = 2 * s * b * (10240 + 3 * 8192 + 32768) / t
    assert got == pytest.approx(by_hand, rel=1e-12)
    # gated MLP: both up-projection outputs (gate and up) are kept
    gated = shape(layers=2, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=1000, gated_mlp=True)
    got_g = float(activation_bytes_per_layer(gated, micro_batch=1, seq_len=4096, recompute="selective",
                                             recompute_modules=recompute_modules_code("jax_dots")))
    assert got_g == pytest.approx(2 * 4096 * (4096 + 4096 + 2 * 8 * 128 + 2 * 14336), rel=1e-12)


def test_recompute_modules_code_rejects_unknown_names():
    assert recompute_modules_code("") == 0
    assert recompute_modules_code("mla_up_proj, moe_act") == recompute_modules_code("moe_act,mla_up_proj")
    with pytest.raises(InputError):
        recompute_modules_code("layernorm_typo")


def test_inflight_per_pipeline_rank_by_hand():
    # Megatron-Core schedules: 1F1B rank r holds p - r micro-batches; interleaved rank r runs
    # (p - r - 1) 2 + (v - 1) p warm-up chunk forwards + 1, each 1/v of the stage's layers
    p, m, v = 16, 384, 4
    for r in (0, 1, 5, 15):
        assert float(inflight_microbatches(p, m, "1f1b", 1, stage_rank=r)) == p - r
        chunks = (p - r - 1) * 2 + (v - 1) * p + 1
        assert float(inflight_microbatches(p, m, "interleaved", v, stage_rank=r)) == pytest.approx(chunks / v)
    assert float(inflight_microbatches(8, 32, "gpipe", 1, stage_rank=3)) == 32


def test_middle_stage_has_no_embedding():
    kw = dict(tp=4, pp=16, stage_layers=8)
    with_emb = params_per_gpu(LLAMA, **kw)
    without = params_per_gpu(LLAMA, embedding=False, **kw)
    assert float(with_emb.dense - without.dense) == pytest.approx(128000 * 8192 / 4, rel=1e-12)


def test_memory_per_gpu_passes_the_new_terms_through():
    kw = dict(micro_batch=1, seq_len=S, tp=4, pp=8, dp=2, zero_stage=1, sequence_parallel=True,
              num_microbatches=64, schedule="1f1b", flash_attention=True)
    bf16 = memory_per_gpu(LLAMA_NODROP, **kw)
    fp8 = memory_per_gpu(LLAMA_NODROP, fp8_inputs=True, **kw)
    # 10 layers x 8 micro-batches of (1 + 1 - 1) sbh/t + 1 s b f/t saved bytes per layer
    s, h, f, t = S, 8192, 28672, 4
    assert float(bf16.activations - fp8.activations) == pytest.approx(10 * 8 * (s * h + s * f) / t, rel=1e-12)
    assert np.all(fp8.states == bf16.states)


#: Runs the memory model puts over capacity though they ran: a known miss of the memory model, each named here
#: with what it reads, so a new one fails. nl2239 (closing39): the NeMo Megatron launcher's 22.08 GPT-3 5B on one
#: and two DGX A100 80GB (tp 1, pp 1, micro-batch 2, no recompute, 2022's non-flash attention) read 89.9 / 85.9 GB
#: against 85.1 GB once the fp32 main-gradient buffer NeMo 1's O2 hook adds into is counted (4 B a parameter,
#: Apex DistributedFusedAdam's grad buckets). mem40 read every buffer (tests/test_mem40.py, validation/README.md
#: "mem40"): each one the model counts is held (bf16 weights 2, the whole fp32 _grad_buffer 4, fp32 master / m / v
#: 12 / dp, Korthikanti's activations with attention dropout and no recompute, the fp32 softmax of the loss), none
#: twice; their sum, 84.7 / 80.9 GB, is under 85.1 GB, and the 5 % fragmentation and 1 GB workspace allowance (an
#: assumption, not a measurement) puts them over. Nothing to correct from a source: kept.
KNOWN_OVER_CAPACITY = frozenset({"nemolaunch22_a100_gpt3_5b_8", "nemolaunch22_a100_gpt3_5b_16"})


def test_every_validated_run_fits_the_memory_model() -> None:
    """Published measurements: every run the validator predicts really ran, so it fit in its accelerator's
    memory; the memory model (and the planner, which refuses strategies with the same model) must agree.
    Exempted: :data:`KNOWN_OVER_CAPACITY` only, and each of them must still be over (so a fix shows)."""
    from conftest import load_yaml, script_module

    mod = script_module("validate_training")
    results, _listed, _n = mod.validate_all()
    oom = [f"{r.id}: {n}" for r in results for n in r.notes if n.startswith("oom")]
    assert {o.split(":")[0] for o in oom} == KNOWN_OVER_CAPACITY, "\n".join(oom)
    oom = [o for o in oom if o.split(":")[0] not in KNOWN_OVER_CAPACITY]
    assert not oom, "\n".join(oom)
    assert mod.CASES is not None
    rows, _skipped = mod.collect_rows(load_yaml(mod.CASES))
    too_big = [f"{cid}: {p.memory['per_gpu_bytes'] / 1e9:.1f} GB > {p.memory['capacity_bytes'] / 1e9:.1f} GB"
               for cid, _m, _meas, _pred, p in rows if not p.memory["fits"] and cid not in KNOWN_OVER_CAPACITY]
    assert not too_big, "\n".join(too_big)


def test_optimizer_states_shard_over_dp_times_cp_by_hand() -> None:
    """ZeRO-1 over the data-parallel x context-parallel group (Megatron-Core's dp-cp group): 64 GPUs at tp 8 give
    the same 12 Psi / 8 optimizer bytes with cp 2 (dp 4) as with cp 1 (dp 8)."""
    from scalemodel.commands.common import build_specs
    from scalemodel.engine.memory import memory

    out = {}
    for cp in (1, 2):
        cl, wl, tr, st = build_specs(cluster="dgx-h100", model="llama3-70b", sets=[], training={"micro_batch": 1},
                                     strategy={"tp": 8, "cp": cp, "zero": "1", "sequence_parallel": True})
        out[cp] = memory(cl, wl, 64, tr, st)
    psi = out[1].params_per_gpu  # pp 1: the whole model over tp 8
    for cp in (1, 2):
        assert out[cp].per_gpu_bytes["optimizer"] == pytest.approx(12 * psi / 8, rel=1e-12)
        assert out[cp].per_gpu_bytes["weights"] == pytest.approx(2 * psi, rel=1e-12)


def test_recompute_modules_spec_needs_selective() -> None:
    from scalemodel.commands.common import build_specs

    with pytest.raises(InputError, match="recompute_modules"):
        build_specs(cluster="dgx-h100", model="llama3-70b", sets=[], training={},
                    strategy={"tp": 8, "recompute": "none", "recompute_modules": "mla_up_proj"})
