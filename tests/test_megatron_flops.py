"""The Megatron-LM MoE recipe rows (source mcrec26) print TFLOP/s/GPU only; they are compared in tokens/s/GPU through
Megatron's own FLOPs per token, which each row records (``measured.megatron_flops_per_token``). These tests recompute
that number from the formula itself and check the conversion the validation script makes.

The formula is NVIDIA/Megatron-LM 9c5258f109 (2026-08-11) megatron/training/training.py
``num_floating_point_operations`` -> ``transformer_flops`` for BSHD batches (no packing: ``seqlen_squared_sum_in_batch``
= GBS x s^2, ``total_real_tokens_in_batch`` = GBS x s), transcribed here term by term from the source (not from
scalemodel):

    per token = 3 x 2 x [ h x (ffn x e x n_dense + (ffn_moe x top_k x e + ffn_shared x e) x n_moe)
                         + n_attn x attn_linear
                         + mtp x (3 h + 2 h^2)
                         + h x V_padded x (mtp + 1) ]
              + s x n_attn x core

with e = 3 (SwiGLU), n_attn = layers + mtp, the MTP layers counted as MoE when the last layer is MoE; GQA
attn_linear = h (q + 2k) + q h (q = heads x kv_channels, k = groups x kv_channels) and core = 6 q / 2 x 2 (the /2 is
the causal mask); MLA attn_linear = q_lora (h + heads (d_qk + d_rope) + 1) + kv_lora (h + heads (d_qk + d_v) + 1)
+ h d_rope + heads d_v h and core = 6 (heads (d_qk + d_rope) / 2 + heads d_v / 2). The router and norms (but MTP's) are
not counted.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, load_yaml, script_module

CASES = ROOT / "validation" / "training_cases.yaml"


def megatron_flops_per_token(layers: int, h: int, heads: int, s: int, vocab: int, *, kv_channels: int,
                             groups: int | None = None, mla: tuple[int, int, int, int, int] | None = None,
                             ffn_dense: int = 0, n_dense: int = 0, ffn_moe: int = 0, top_k: int = 0,
                             ffn_shared: int = 0, last_is_moe: bool = True, mtp: int = 0) -> int:
    """Megatron-LM 9c5258f109 transformer_flops() / (GBS x s), integers throughout (the causal /2 of the core terms
    is exact for the even widths used). ``mla`` = (q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim,
    v_head_dim)."""
    n_moe = layers - n_dense
    if last_is_moe:
        n_moe += mtp
    else:
        n_dense += mtp
    n_attn = layers + mtp
    if mla is None:
        assert groups is not None
        q, k = kv_channels * heads, kv_channels * groups
        attn_linear = 6 * (h * (q + k + k) + q * h)
        core = 6 * q // 2 * 2
    else:
        q_lora, kv_lora, d_qk, d_rope, d_v = mla
        attn_linear = 6 * (q_lora * (h + heads * (d_qk + d_rope) + 1) + kv_lora * (h + heads * (d_qk + d_v) + 1)
                           + h * d_rope + heads * d_v * h)
        core = 6 * (heads * (d_qk + d_rope) // 2 + heads * d_v // 2)
    mlp = 6 * h * (ffn_dense * 3 * n_dense + (ffn_moe * top_k * 3 + ffn_shared * 3) * n_moe)
    mtp_terms = 6 * mtp * (3 * h + 2 * h * h)
    logits = 6 * h * vocab * (mtp + 1)
    return mlp + attn_linear * n_attn + mtp_terms + logits + s * core * n_attn


def padded_vocab(tokenizer_len: int, divisible_by: int, tp: int) -> int:
    """megatron/core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding at 9c5258f109."""
    multiple = divisible_by * tp
    return -(-tokenizer_len // multiple) * multiple


#: Qwen3-30B-A3B and Qwen3-235B-A22B as their recipes' ARGS state them (qwen3_30b/*/*.yaml, qwen3_235b/*/*.yaml): every
#: layer MoE (moe_layer_freq default 1), no shared expert, no MTP, swiglu, kv_channels 128, 4 query groups.
QWEN3_30B = megatron_flops_per_token(48, 2048, 32, 4096, 151936, kv_channels=128, groups=4, ffn_moe=768, top_k=8)
QWEN3_235B = megatron_flops_per_token(94, 4096, 64, 4096, 151936, kv_channels=128, groups=4, ffn_moe=1536, top_k=8)
#: DeepSeek-V3 (deepseek_v3/*/*.yaml): moe_layer_freq ([0]*3+[1]*58), ffn_hidden_size 18432, one shared expert of 2048,
#: MLA (1536, 512, 128, 64, 128), mtp_num_layers 1.
DEEPSEEK_V3 = megatron_flops_per_token(61, 7168, 128, 4096, 129280, kv_channels=128, mla=(1536, 512, 128, 64, 128),
                                       ffn_dense=18432, n_dense=3, ffn_moe=2048, top_k=8, ffn_shared=2048, mtp=1)


def _rows() -> dict[str, dict]:
    return {c["id"]: c for c in load_yaml(CASES) if c["id"].startswith("mcrec26_")}


def test_hand_values_of_the_formula() -> None:
    """The numbers written in the rows' derivations, term by term (Qwen3-30B: 48 x (113246208 + 100663296 +
    226492416) + 1866989568; DeepSeek-V3: 62 x (1122643968 + 503316480) + 147446562816 + 616691712 + 11120148480)."""
    assert 6 * (2048 * 5120 + 4096 * 2048) == 113246208
    assert 6 * 4096 // 2 * 2 * 4096 == 100663296
    assert 6 * 2048 * 768 * 8 * 3 == 226492416
    assert QWEN3_30B == 48 * (113246208 + 100663296 + 226492416) + 6 * 2048 * 151936 == 23006281728
    assert DEEPSEEK_V3 == 62 * (1122643968 + 503316480) + 147446562816 + 616691712 + 11120148480 == 259992950784
    assert QWEN3_235B == 94 * (427819008 + 201326592 + 905969664) + 3733979136 == 148034813952


def test_padded_vocabularies() -> None:
    """The recipes' make_vocab_size_divisible_by gives the HF configs' vocabularies at TP 1 and 2: 151936 = 1187 x 128
    for any Qwen3 tokenizer length in (150749, 151936] (151669 taken here); 129280 = 3232 x 40 for any DeepSeek-V3
    tokenizer length in (126048, 129280] (128815 taken here)."""
    assert padded_vocab(151669, 1187, 1) == padded_vocab(151669, 1187, 2) == 151936
    assert padded_vocab(128815, 3232, 1) == padded_vocab(128815, 3232, 2) == 129280


def test_against_published_ratios() -> None:
    """Megatron's count agrees with the FLOPs per token other NVIDIA tables imply (TFLOP/s over tokens/s):
    Megatron-Bridge 26.08 DeepSeek-V3 GB200 1276e12 / 4912 and Qwen3-235B GB200 1077e12 / 7280, within 0.2 %.
    Qwen3-30B differs more (Bridge 923e12 / 39936 = 23.11 GFLOP, +0.5 %): Bridge's own counter."""
    assert DEEPSEEK_V3 == pytest.approx(1276e12 / 4912, rel=2e-3)
    assert QWEN3_235B == pytest.approx(1077e12 / 7280, rel=2e-3)
    assert QWEN3_30B == pytest.approx(923e12 / 39936, rel=6e-3)


@pytest.mark.parametrize("prefix,expected", [("qwen3_30b", QWEN3_30B), ("qwen3_235b", QWEN3_235B),
                                             ("dsv3", DEEPSEEK_V3)])
def test_rows_record_megatrons_count(prefix: str, expected: int) -> None:
    """Every measured mcrec26 row of a model records that model's count, and the row's architecture fields are the
    ones the count was computed from."""
    rows = [c for i, c in _rows().items() if prefix in i and "tflops_per_gpu" in c["measured"]]
    assert rows
    for c in rows:
        assert c["measured"]["megatron_flops_per_token"] == expected, c["id"]
        m = c["model"]
        assert (m["layers"], m["hidden"], m["heads"], m["vocab"], m["seq_len"]) in {
            (48, 2048, 32, 151936, 4096), (94, 4096, 64, 151936, 4096), (61, 7168, 128, 129280, 4096)}


def test_comparison_converts_tflops_to_tokens() -> None:
    """The validation script compares tokens/s/GPU = TFLOP/s x 1e12 / FLOPs per token (e.g. GB200 Qwen3-30B BF16:
    528e12 / 23006281728 = 22950.3) and the rows' derived_tokens_per_s_per_gpu says the same."""
    mod = script_module("validate_training")
    rows = _rows()
    metric, value = mod.comparison(rows["mcrec26_gb200_qwen3_30b_bf16"])
    assert metric == "tokens/s/GPU" and value == pytest.approx(22950.3, abs=0.05)
    metric, value = mod.comparison(rows["mcrec26_gb300_dsv3_mtp_fp8mx"])
    assert metric == "tokens/s/GPU" and value == pytest.approx(1357.7e12 / 259992950784)
    for c in rows.values():
        meas = c["measured"]
        if "megatron_flops_per_token" in meas:
            assert c["derived_tokens_per_s_per_gpu"] == pytest.approx(
                meas["tflops_per_gpu"] * 1e12 / meas["megatron_flops_per_token"], abs=0.05)


def test_every_readme_row_is_a_case() -> None:
    """All 18 recipes of the README's table are rows (never a selection): 16 with a median, 2 with an empty cell."""
    rows = _rows()
    assert len(rows) == 18
    assert sum("tflops_per_gpu" in c["measured"] for c in rows.values()) == 16
