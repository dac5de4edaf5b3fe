"""Megatron-Core's eager layer ops (strategy eager_rope, eager_glu_clamp, eager_expert_bias, eager_bias_dropout_add):
bytes and seconds against values worked out by hand from the code paths the functions cite
(rope_utils._apply_rotary_pos_emb_bshd, fused_bias_geglu.weighted_bias_quick_geglu_impl's clamp and cat,
TEGroupedMLP._apply_bias, fused_bias_dropout._bias_dropout_add_func), per kernel: what it reads and writes, e = 2 bytes
per 16-bit element."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import script_module, training_cases
from grid_helpers import HBM, TINY_MOE, one

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import predict
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import MLASpec

# GPT-OSS 120B's layer: h 2880, 64 query heads and 8 KV groups of 64, 128 experts top-4 of width 2880, gated
GPT_OSS = shape(layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880, vocab=201_088,
                gated_mlp=True, moe_experts=128, moe_top_k=4, moe_ffn_hidden=2880)


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def test_rope_bytes_by_hand() -> None:
    # b 1, s 4096: 4096 tokens x (64 + 8) heads x 64 = 18,874,368 rotated elements. Eager forward: t*cos 2e, -x2 on
    # the half 1e, cat(-x2, x1) 2e, *sin 2e, sum 3e, cat(t, t_pass) 2e = 12e; backward: g*cos 2e, g*sin 2e, neg 1e,
    # chunk's cat 2e, t's three gradients summed by two adds 6e, the empty t_pass slice's backward zeros of t's size
    # 1e = 14e; the fused kernel's 2e each way is priced already, so 10e and 12e remain
    rotated = 4096 * 72 * 64
    f, b = compute.eager_rope_bytes(GPT_OSS, micro_batch=1, seq_len=4096)
    assert float(f) == 10 * 2 * rotated == 377_487_360
    assert float(b) == 12 * 2 * rotated
    f2, _ = compute.eager_rope_bytes(GPT_OSS, micro_batch=4, seq_len=4096, tp=2, cp=2)  # 8192 tokens, half the heads
    assert float(f2) == 10 * 2 * 8192 * 36 * 64
    learned = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, position_embeddings=2048)
    f, b = compute.eager_rope_bytes(learned, micro_batch=1, seq_len=128)
    assert float(f) == 0.0 and float(b) == 0.0


def test_mla_rope_bytes_by_hand() -> None:
    """DeepSeek-V3's MLA at tp 2, b 1, s 4096 (Megatron-LM 7094270c6f multi_latent_attention.py, rope_utils.py):
    only the decoupled RoPE part rotates, q_pos_emb 128 / 2 = 64 heads x 64 and k_pos_emb one head x 64 (the whole
    sequence on each TP rank), 65 x 64 = 4160 elements per token. Forward: the de-interleaving cat 2e + the 12e of
    the plain path = 14e; backward: the plain path's 14e with t's gradients summed by one add (3e) where the plain
    path's input had two, then the two strided slices' backward (zeros 1e + the half's copy 1e, each) 4e and the
    input's three gradients summed (two adds) 6e: 2 + 2 + 1 + 2 + 3 + 4 + 1 + 6 = 21e; the fused 2e each way is
    priced already: 12e and 19e."""
    mla = shape(layers=61, hidden=7168, heads=128, ffn_hidden=18432, vocab=129_280, kv_lora_rank=512,
                q_lora_rank=1536, qk_rope_head_dim=64, head_dim=192, v_head_dim=128)
    f, b = compute.eager_rope_bytes(mla, micro_batch=1, seq_len=4096, tp=2)
    assert float(f) == 12 * 2 * 4096 * 4160 == 408_944_640
    assert float(b) == 19 * 2 * 4096 * 4160 == 647_495_680


def test_mla_fused_rope_bytes_rotate_the_rope_part_only() -> None:
    """The fused RoPE that layer_eltwise_bytes (megatron_te) prices, and that eager_rope_bytes' increments are measured
    from, touches in MLA only the decoupled RoPE part: Megatron-LM 7094270c6f multi_latent_attention.py L475-487
    applies it to q_pos_emb [s, b, a / t, r] and k_pos_emb [s, b, 1, r], reading and writing E = (a / t + 1) r
    elements a token (2e each way), not the whole Q and K. DeepSeek-V3 at tp 2: E = 65 x 64 = 4160, Q = K = 64 x 192
    = 12288, V = 64 x 128 = 8192; what RoPE adds (against the same layer without it): the fused kernel 2e E each way
    and the core's layout copies (forward cat of query and key + value.contiguous(), backward the split's cat)
    2e (Q + K + V) each way."""
    kw = dict(layers=61, hidden=7168, heads=128, ffn_hidden=18432, vocab=129_280, kv_lora_rank=512,
              q_lora_rank=1536, qk_rope_head_dim=64, head_dim=192, v_head_dim=128)
    rope, learned = shape(**kw), shape(**kw, position_embeddings=4096)
    f1, b1 = compute.layer_eltwise_bytes(rope, tp=2, sequence_parallel=True)
    f0, b0 = compute.layer_eltwise_bytes(learned, tp=2, sequence_parallel=True)
    assert float(f1 - f0) == 2 * 2 * 4160 + 2 * 2 * (12288 + 12288 + 8192)
    assert float(b1 - b0) == 2 * 2 * 4160 + 2 * 2 * (12288 + 12288 + 8192)


def test_clamp_and_bias_bytes_by_hand() -> None:
    # b 1, s 4096, EP 8: 8 * 4096 * 4 / 128 = 1024 tokens on each of 16 local experts = 16,384 routed rows
    rows = 16_384
    f, b = compute.eager_glu_clamp_bytes(GPT_OSS, micro_batch=1, seq_len=4096, ep=8)
    # forward: clamp of each 2880-wide half (read + write 2 B each) 8 B, cat of the 5760 (read + write) 8 B
    assert float(f) == rows * 2880 * (4 + 4 + 8) == 754_974_720
    # backward: gate half le (2 + 1) + where (1 + 2 + 2); linear half ge (2 + 1), le (2 + 1), logical_and_ (1 + 1 + 1),
    # where (1 + 2 + 2); chunk's backward cat of the halves (read 4, write 4)
    assert float(b) == rows * 2880 * ((3 + 5) + (3 + 3 + 3 + 5) + 8)
    f, b = compute.eager_expert_bias_bytes(GPT_OSS, micro_batch=1, seq_len=4096, ep=8)
    # forward: b*p writes 2, t + bp reads 4 writes 2, cat reads 2 writes 2; backward: grad*p (4) + sum (2), grad*b
    # (4) + sum (2)
    assert float(f) == rows * 2880 * 12 == float(b)
    plain = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, moe_experts=8, moe_top_k=2)
    f, b = compute.eager_glu_clamp_bytes(plain, micro_batch=1, seq_len=128)  # no gate: no clamp
    assert float(f) == 0.0 and float(b) == 0.0
    dense = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, gated_mlp=True)
    assert float(compute.eager_expert_bias_bytes(dense, micro_batch=1, seq_len=128)[0]) == 0.0


def test_bias_dropout_add_bytes_by_hand() -> None:
    # GPT-OSS trains without dropout: the unfused add runs x + bias (read 2, write 2 bytes per element of h) where
    # the compiled kernel would read the bias beside x; dropout(p = 0) returns its input; the residual add is priced
    # already.
    # b 1, s 4096: 4096 tokens x 2880. An MoE layer hands the add one bias (the attention output's), a dense layer two.
    no_drop = shape(layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880, vocab=201_088,
                    gated_mlp=True, moe_experts=128, moe_top_k=4, moe_ffn_hidden=2880, dropout=False)
    f, b = compute.eager_bias_dropout_add_bytes(no_drop, micro_batch=1, seq_len=4096, biased_adds=1.0)
    assert float(f) == 4 * 4096 * 2880 == 47_185_920 and float(b) == 0.0
    # with dropout (the GPT_OSS shape above keeps the default): two adds each run a separate dropout kernel (read 2,
    # write 2 more; the mask byte is priced already) and each biased add's bias gradient is its own reduction (read
    # 2); a dense layer, both adds biased; sequence parallel at tp 4 leaves h / 4 = 720 per token on a GPU
    f, b = compute.eager_bias_dropout_add_bytes(GPT_OSS, micro_batch=2, seq_len=1024, tp=4, sequence_parallel=True)
    assert float(f) == 2048 * 720 * (4 + 4 + 4 + 4) and float(b) == 2048 * 720 * (2 + 2)


def _grid(job, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(dp=8, ep=8, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=16, micro_batch=2), 8, job)


@pytest.mark.parametrize("recompute", ["none", "full", "selective"])
def test_in_the_layer_times(h100, recompute) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY_MOE, TrainingSpec())
    layers = np.asarray([4.0])
    mods = "moe_act" if recompute == "selective" else ""
    a = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute, recompute_modules=mods), layers)
    b = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute, recompute_modules=mods,
                                                         eager_rope=True, eager_glu_clamp=True,
                                                         eager_expert_bias=True), layers)
    tokens = 2 * 2048  # b 2 x s 2048
    rope_f, rope_b = 10 * 2 * tokens * 16 * 128 / HBM, 12 * 2 * tokens * 16 * 128 / HBM  # (8 + 8) heads of 128
    # EP 8: 8 * 4096 * 4 / 64 = 2048 tokens on each of 8 local experts = 16,384 rows; the clamp over the 512 width,
    # the bias over h 1024; the bias's launches: 2 per local expert + the cat forward, 4 per local expert backward
    rows = 16_384
    clamp_f, clamp_b = 16 * rows * 512 / HBM, 30 * rows * 512 / HBM
    bias_f = 12 * rows * 1024 / HBM + (2 * 8 + 1) * 1.78e-6
    bias_b = 12 * rows * 1024 / HBM + 4 * 8 * 1.78e-6
    fwd = 4 * rope_f + 3 * (clamp_f + bias_f)  # RoPE in every layer, the experts' ops in the 3 MoE layers
    again = {"none": 0.0, "full": fwd, "selective": 3 * clamp_f}[recompute]  # moe_act repeats the clamp only
    assert one(b["forward"] - a["forward"]) == pytest.approx(fwd, rel=1e-9)
    assert one(b["backward"] - a["backward"]) == pytest.approx(4 * rope_b + 3 * (clamp_b + bias_b) + again, rel=1e-9)


@pytest.mark.parametrize(("recompute", "mods"), [("none", ""), ("selective", "mla_up_proj"),
                                                 ("selective", "core_attn"), ("full", "")])
def test_mla_rope_in_the_layer_times(h100, recompute, mods) -> None:  # type: ignore[no-untyped-def]
    """TINY_MOE with MLA (8 heads, RoPE part 32), b 2 x s 2048, tp 1: (8 + 1) x 32 = 288 rotated elements a token,
    12 x 2 bytes forward and 19 x 2 backward each, in the 4 layers; the forward repeats in the backward under full
    recompute and under selective recompute of mla_up_proj (MLA rotates inside the checkpointed up-projection), not
    under core_attn."""
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    job = build_job(h100, TINY_MOE.model_copy(update={"mla": mla}), TrainingSpec())
    layers = np.asarray([4.0])
    a = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute, recompute_modules=mods), layers)
    b = layer_compute._compute_per_microbatch(job, _grid(job, recompute=recompute, recompute_modules=mods,
                                                         eager_rope=True), layers)
    rope_f, rope_b = 12 * 2 * 4096 * 288 / HBM, 19 * 2 * 4096 * 288 / HBM
    again = rope_f if (recompute == "full" or mods == "mla_up_proj") else 0.0
    assert one(b["forward"] - a["forward"]) == pytest.approx(4 * rope_f, rel=1e-9)
    assert one(b["backward"] - a["backward"]) == pytest.approx(4 * (rope_b + again), rel=1e-9)


def test_mla_rope_in_the_mtp_block(h100) -> None:  # type: ignore[no-untyped-def]
    """With one MTP module the last stage runs one more MLA layer (the MTP block), which rotates as the stage's
    layers do: 4 layers + 1 block with the logits, 4 without; nothing else moves."""
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    job = build_job(h100, TINY_MOE.model_copy(update={"mla": mla, "mtp_layers": 1}), TrainingSpec())
    layers = np.asarray([4.0])
    rope_f, rope_b = 12 * 2 * 4096 * 288 / HBM, 19 * 2 * 4096 * 288 / HBM
    for last, n in ((True, 5), (False, 4)):
        a = layer_compute._compute_per_microbatch(job, _grid(job), layers, logits_on_stage=last)
        b = layer_compute._compute_per_microbatch(job, _grid(job, eager_rope=True), layers, logits_on_stage=last)
        assert one(b["forward"] - a["forward"]) == pytest.approx(n * rope_f, rel=1e-9)
        assert one(b["backward"] - a["backward"]) == pytest.approx(n * rope_b, rel=1e-9)


@pytest.mark.parametrize(("biases", "dropout", "adds"), [(True, False, 5), (False, False, 0), (False, True, 8)])
def test_bias_dropout_add_in_the_layer_times(h100, biases, dropout, adds) -> None:  # type: ignore[no-untyped-def]
    """TINY_MOE (4 layers, the first dense), b 2 x s 2048 on one GPU, each extra pass reading 2 and writing 2 bytes of
    4096 x 1024 elements, forward only (full recompute repeats them). With linear biases and no dropout the dense
    layer adds x + bias twice (attention output, MLP FC2), each MoE layer once (its experts keep their bias): 5.
    Without biases (``if bias is not None``) nothing is added; with dropout but no bias the separate dropout kernel
    runs in each of the 8 residual adds (the mask, and without a bias no bias gradient, priced already)."""
    job = build_job(h100, TINY_MOE.model_copy(update={"biases": biases, "dropout": dropout}), TrainingSpec())
    layers = np.asarray([4.0])
    for rec in ("none", "full"):
        a = layer_compute._compute_per_microbatch(job, _grid(job, recompute=rec), layers)
        b = layer_compute._compute_per_microbatch(job, _grid(job, recompute=rec, eager_bias_dropout_add=True), layers)
        fwd = adds * 4 * 4096 * 1024 / HBM
        assert one(b["forward"] - a["forward"]) == pytest.approx(fwd, rel=1e-9, abs=1e-15)
        assert one(b["backward"] - a["backward"]) == pytest.approx(fwd if rec == "full" else 0.0, abs=1e-15)


def test_predict_compute_grows_by_the_hand_values(h100) -> None:  # type: ignore[no-untyped-def]
    """8 GPUs, pp 1, one micro-batch of 2 sequences per GPU: the compute part of the step grows by the RoPE bytes of
    the 4 layers, forward and backward, and nothing else."""
    tr = TrainingSpec(global_batch=16, micro_batch=2)
    base = predict(h100, TINY_MOE, 8, tr, StrategySpec(dp=8, ep=8))
    more = predict(h100, TINY_MOE, 8, tr, StrategySpec(dp=8, ep=8, eager_rope=True))
    want = 4 * (10 + 12) * 2 * 4096 * 16 * 128 / HBM
    assert more.breakdown_s["compute"] - base.breakdown_s["compute"] == pytest.approx(want, rel=1e-9)
    assert more.strategy["eager_rope"] is True and base.strategy["eager_rope"] is False


@pytest.mark.parametrize("field", ["eager_rope", "eager_glu_clamp", "eager_expert_bias", "eager_bias_dropout_add"])
def test_bad_value_is_a_one_line_error(cli, tmp_path, field) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"{field}: sometimes\n")
    r = cli("predict", "--model", "mixtral-8x7b", "--gpus", "8", "--strategy", str(bad))
    assert r.code == 2 and r.err.startswith("error: ") and field in r.err and "true or false" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1


def test_unpriced_use_is_a_warning(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    on = tmp_path / "on.yaml"
    on.write_text("eager_glu_clamp: true\neager_expert_bias: true\n")
    r = cli("predict", "--model", "llama2-7b", "--gpus", "8", "--strategy", str(on))  # dense: no experts
    assert r.code == 0 and "eager_glu_clamp is not priced" in r.err and "eager_expert_bias is not priced" in r.err
    # Llama 2 has no linear biases and runs no dropout: the unfused bias-dropout-add has nothing to add or drop
    on.write_text("eager_bias_dropout_add: true\n")
    r = cli("predict", "--model", "llama2-7b", "--gpus", "8", "--strategy", str(on), "--set", "model.dropout=false")
    assert r.code == 0 and "eager_bias_dropout_add is not priced" in r.err, r.err


def test_validation_rules() -> None:
    """The GPT-OSS rows run RoPE eagerly (YaRN, mscale 1.347), and so do NeMo 25.04's DeepSeek-V3 rows (MLA's YaRN
    RoPE, apply_rope_fusion False); only the 26.04 H100 row runs the experts' clamp and bias eagerly (no TE op
    fuser); the Qwen3 rows of the same containers run neither, nor the Megatron-Bridge DeepSeek-V3 rows."""
    cases = training_cases()
    vt = script_module("validate_training")
    want = {"mb2604_h100_gpt_oss_120b_bf16": (True, True), "mb2608_gb200_gpt_oss_120b_fp8mx": (True, False),
            "mb2608_gb300_gpt_oss_120b_fp8mx": (True, False), "mb2604_h100_qwen3_235b_fp8cs": (False, False),
            "dgxc2505_gb200_dsv3_bf16_128": (True, False), "dgxc2505_h100_dsv3_bf16_512": (True, False),
            "mb2511_gb200_dsv3_bf16": (False, False)}
    for cid, (rope, experts) in want.items():
        r = vt.predict_new_case(cases[cid])
        assert r.settings["eager_rope"] is rope, cid
        assert r.settings["eager_glu_clamp"] is experts and r.settings["eager_expert_bias"] is experts, cid
        # GPTOSSBridge: add_bias_linear True, bias_dropout_fusion False; the Qwen3 and DeepSeek-V3 rows have no
        # linear biases
        assert r.settings["eager_bias_dropout_add"] is (rope and "gpt_oss" in cid), cid


def test_megatron_no_rope_fusion_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM's --no-rope-fusion (store_false, dest apply_rope_fusion) sets eager_rope; without it nothing."""
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "launch.sh"
    f.write_text("--tensor-model-parallel-size 2 --bf16 --no-rope-fusion\n")
    assert read_strategy_file(str(f)).strategy.get("eager_rope") is True
    f.write_text("--tensor-model-parallel-size 2 --bf16\n")
    assert "eager_rope" not in read_strategy_file(str(f)).strategy


def test_megatron_no_bias_dropout_fusion_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM's --no-bias-dropout-fusion (store_false, dest bias_dropout_fusion) sets eager_bias_dropout_add for
    the linear biases Megatron-LM adds by default; with --disable-bias-linear no bias reaches the add: not set."""
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "launch.sh"
    f.write_text("--tensor-model-parallel-size 2 --bf16 --no-bias-dropout-fusion\n")
    assert read_strategy_file(str(f)).strategy.get("eager_bias_dropout_add") is True
    f.write_text("--tensor-model-parallel-size 2 --bf16 --no-bias-dropout-fusion --disable-bias-linear\n")
    read = read_strategy_file(str(f))
    assert "eager_bias_dropout_add" not in read.strategy
    assert any("--no-bias-dropout-fusion" in u for u in read.unused)
