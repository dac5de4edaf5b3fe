"""Position encoding (workload position_embeddings, rotary; docs/model.md#position-encoding): every built-in workload
carries what its own source uses, and what each kind costs is checked against values worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import script_module, training_cases

from scalemodel.cost import compute, transformer
from scalemodel.cost.transformer import shape
from scalemodel.engine.job import transformer_shape
from scalemodel.specs import load_workload

HF = Path(__file__).parent / "data" / "hf"

# learned table rows (0 = none) and whether Q and K are rotated, read from each model's source (the workload file
# names it): Narayanan et al. 2021's Megatron GPT and GPT-3 learned 2048, BERT learned 512, Nemotron-H none
LEARNED = {f"gpt-{n}": 2048 for n in ("1.7b", "3.6b", "7.5b", "18b", "39b", "76b", "145b", "310b", "530b", "1t")}
LEARNED |= {"gpt3-175b": 2048, "bert-large": 512}
NO_POSITION = {"nemotron-3-nano", "nemotron-3-super"}
ROTARY = {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "mistral-7b",
          "mixtral-8x7b", "falcon-7b", "gpt-j-6b", "deepseek-v3"}


@pytest.mark.parametrize("name", sorted(LEARNED) + sorted(NO_POSITION) + sorted(ROTARY))
def test_builtin_position_encoding_is_its_sources(name: str) -> None:
    sh = transformer_shape(load_workload(name))
    assert float(sh.position_embeddings) == LEARNED.get(name, 0)
    assert bool(sh.rope) == (name in ROTARY)


def test_gpt3_175b_parameters_by_hand() -> None:
    # 96 layers x (QKV 3h^2 + 3h, O h^2 + h, FC1 4h^2 + 4h, FC2 4h^2 + h, two LayerNorms 4h = 12 h^2 + 13 h), the
    # tied 51200-row word table, the 2048-row position table, the final LayerNorm 2h
    h = 12288
    by_hand = 96 * (12 * h * h + 13 * h) + 51200 * h + 2048 * h + 2 * h
    assert by_hand == 174_615_846_912
    assert float(transformer.param_count(transformer_shape(load_workload("gpt3-175b")))) == by_hand
    assert abs(by_hand / 175.0e9 - 1) < 0.003  # Brown et al. 2020 Table 2.1 rounds to 175.0 B


def test_bert_large_parameters_are_hf_bertmodel_less_pooler_and_token_types() -> None:
    # HF BertModel of bert-large-uncased: 335,141,888 = this count + the pooler (1024^2 + 1024) + the 2-row
    # token-type table (2 x 1024), neither priced
    count = float(transformer.param_count(transformer_shape(load_workload("bert-large"))))
    assert count == 335_141_888 - (1024 * 1024 + 1024) - 2 * 1024 == 334_090_240


def test_rope_pass_bytes_by_hand_megatron_te() -> None:
    # Llama-2 7B's layer (MHA, h 4096: Q = K = V = 4096 per token), t = 1, e = 2: RoPE adds the fused kernel's
    # 2e (Q + K) each way and the layout copies it forces, 2e (Q + K + V) each way; no RoPE (a learned table or
    # rotary false) has neither
    kw = dict(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000, gated_mlp=True, dropout=False)
    rope = compute.layer_eltwise_bytes(shape(**kw))
    learned = compute.layer_eltwise_bytes(shape(**kw, position_embeddings=4096))
    none = compute.layer_eltwise_bytes(shape(**kw, rotary=False))
    per_way = 2 * 2 * (4096 + 4096) + 2 * 2 * (3 * 4096)
    assert per_way == 81_920
    for i in (0, 1):
        assert float(rope[i] - learned[i]) == per_way
        assert float(none[i]) == float(learned[i])


def test_rope_pass_bytes_by_hand_gqa() -> None:
    # Llama-3 8B (g 8: K = V = 1024, Q = 4096): GQA copies the query and concatenates the gradients with or without
    # RoPE, so RoPE adds forward 2e (Q + K) + 2e (K + V) + 2e Q (the full layout less GQA's own 2e Q) and backward
    # only its kernel's 2e (Q + K)
    kw = dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, gated_mlp=True)
    f1, b1 = compute.layer_eltwise_bytes(shape(**kw))
    f0, b0 = compute.layer_eltwise_bytes(shape(**kw, rotary=False))
    assert float(f1 - f0) == 4 * (4096 + 1024) + 4 * (4096 + 1024 + 1024) == 45_056
    assert float(b1 - b0) == 4 * (4096 + 1024) == 20_480


def test_no_rope_no_eager_rope_bytes() -> None:
    kw = dict(layers=2, hidden=1024, heads=8, vocab=1000)
    f, b = compute.eager_rope_bytes(shape(**kw, rotary=False), micro_batch=1, seq_len=2048)
    assert float(f) == float(b) == 0.0


def test_hf_bloom_and_nemotron_h_are_not_rotary() -> None:
    assert load_workload(HF / "bloom-560m").rotary is False
    assert load_workload(HF / "gpt2").rotary is None and not bool(transformer_shape(load_workload(HF / "gpt2")).rope)
    assert bool(transformer_shape(load_workload(HF / "Llama-2-7b-hf")).rope)


def test_rotary_with_a_learned_table_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-c", "dgx-a100", "-m", "gpt-1.7b", "-n", "8", "--set", "model.rotary=true")
    assert r.code == 2, r.out
    line = r.err.strip().splitlines()[-1]
    assert line.startswith("error: --set model.rotary: true with 2048 learned positions"), line


def test_rotary_false_with_mla_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "1024", "--ep", "64", "--pp", "16",
            "--set", "model.rotary=false")
    assert r.code == 2, r.out
    line = r.err.strip().splitlines()[-1]
    assert line.startswith("error: --set model.rotary: false with mla"), line


def test_validation_rows_state_their_sources_position_encoding() -> None:
    vt = script_module("validate_training")
    cases = training_cases()
    for cid, rows, rope in (("dgxc25_h100_gpt3_175b_bf16_128", 2048, False), ("mpt_h100_7b_512", 2048, False),
                            ("nemo2502_b200_gpt3_175b", 2048, False), ("bloom_176b_384", 0, False),
                            ("mb2606_h100_nemotron3_nano_fp8cs", 0, False), ("dgxc25_h100_llama31_8b_bf16_8", 0, True)):
        w, _ = vt.case_workload(cases[cid])
        sh = transformer_shape(w)
        assert (float(sh.position_embeddings), bool(sh.rope)) == (rows, rope), cid


def test_gpt3_learned_table_is_whole_on_every_tp_rank_of_the_first_stage(cli) -> None:  # type: ignore[no-untyped-def]
    # Megatron's position table is a serial torch.nn.Embedding (language_model.py "Position embedding (serial)"), whole
    # on every TP rank of the first stage: 12 layers of (12 h^2 + 7 h) / 8 + 6 h whole, the word table V h / 8 and
    # 2048 h, 25.2 M parameters more than the last stage's final LayerNorm 2 h, so the first stage holds the peak
    h, v, t = 12288, 51200, 8
    r = cli("memory", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "64", "--tp", "8", "--pp", "8", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["peak_stage"] == {"rank": 0, "role": "first"}
    assert doc["params_per_gpu"] == pytest.approx((12 * (12 * h * h + 7 * h) + v * h) / t + 12 * 6 * h + 2048 * h,
                                                  rel=1e-12)
