"""Mamba-2 (SSD) layers and hybrid patterns (scalemodel.cost.mamba): values worked out by hand from the formulas
of the module docstring and Megatron-LM's FLOP count, and the Nemotron 3 Nano parameter total its report publishes."""

import numpy as np
import pytest

import scalemodel
from scalemodel.cost import compute, mamba, memory
from scalemodel.cost import transformer as tr
from scalemodel.errors import InputError

NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # Megatron-Bridge 17a381f95 nemotron_3_nano.py


def tiny():
    # h 4, H 2 heads of P 4 (d_in 8), N 2, G 1, K 4, Q 4
    return mamba.mamba_dims(hidden=4, heads=2, head_dim=4, state_dim=2, groups=1, conv_kernel=4, chunk_size=4)


def test_layer_counts_nano_pattern():
    c = mamba.layer_counts(NANO_PATTERN)
    # counted by eye: 23 M, 23 E, 6 *, no -; 52 layers (the recipe's num_layers)
    assert (c.mamba, c.moe, c.attention, c.mlp, c.layers) == (23, 23, 6, 0, 52)
    assert mamba.layer_counts("M-|M*").layers == 4  # a stage boundary is not a layer


@pytest.mark.parametrize("bad", ["M-G*", "MX", "", "|"])
def test_layer_counts_refuses_unknown_or_empty(bad):
    with pytest.raises(InputError):
        mamba.layer_counts(bad)


def test_dims_defaults_and_divisibility():
    md = mamba.mamba_dims(hidden=4096, head_dim=64)  # expand 2: d_in 8192, 128 heads
    assert float(md.heads) == 128 and float(md.d_inner) == 8192
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=4096, heads=128, groups=3)  # 128 % 3
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=4096, heads=128, groups=8, tp=16)  # 8 groups % 16
    with pytest.raises(InputError):
        mamba.mamba_dims(hidden=100, head_dim=64)  # 200 % 64


def test_mixer_params_by_hand():
    md = tiny()
    # in_proj 4 x (16 + 4 + 2) = 88; conv (4 + 1) x (8 + 4) = 60; dt_bias, A_log, D 6; norm 8; out_proj 32
    assert float(mamba.mamba_mixer_params(md)) == 88 + 60 + 6 + 8 + 32
    assert float(mamba.mamba_layer_params(md)) == 194 + 4


def nano():
    # Megatron-Bridge 17a381f95 src/megatron/bridge/recipes/nemotronh/nemotron_3_nano.py (MambaModelProvider);
    # vocab 131072 (the tokenizer of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, untied); shared expert 3712 = 2 x 1856
    md = mamba.mamba_dims(hidden=2688, heads=64, head_dim=64, state_dim=128, groups=8)
    sh = tr.shape(layers=52, hidden=2688, heads=32, kv_heads=2, head_dim=128, vocab=131072, ffn_hidden=1856,
                  moe_experts=128, moe_top_k=6, moe_ffn_hidden=1856, moe_shared_experts=2, gated_mlp=False,
                  tied_embeddings=False, biases=False, hybrid=mamba.layer_counts(NANO_PATTERN), mamba=md)
    return sh, md


def test_nano_parameters_match_the_published_total():
    # Nemotron 3 Nano technical report (NVIDIA 2025, arXiv 2512.20848): 31.6 B total, 3.6 B active with embeddings
    sh, _ = nano()
    assert float(tr.param_count(sh)) == pytest.approx(31.6e9, rel=0.003)
    assert float(tr.active_param_count(sh)) == pytest.approx(3.6e9, rel=0.01)
    assert float(sh.moe_layers) == 23 and float(sh.attention_layers) == 6 and float(sh.mamba_layers) == 23
    assert float(tr.tp_allreduces_per_layer(sh)) == 1  # one block, one row-parallel output per layer


def test_projection_flops_match_megatron_when_d_inner_is_2h():
    # Nemotron-H widths h 4096, 128 heads of 64 (d_in = 8192 = 2h), N 128, G 8: Megatron-LM training.py
    # mamba_layer_flops per token: in_proj 2 h (2 d_in + 2 G N + H) = 2*4096*(16384+2048+128) = 152,043,520,
    # out_proj 2 d_in h = 67,108,864, scan 7 d_in N = 7,340,032
    md = mamba.mamba_dims(hidden=4096, heads=128, head_dim=64, state_dim=128, groups=8)
    assert float(mamba.mamba_projection_flops(md, 1)) == 152_043_520 + 67_108_864
    assert float(mamba.megatron_mamba_flops(md, 1)) == 152_043_520 + 67_108_864 + 7_340_032


def test_ssd_flops_by_hand():
    md = tiny()
    # forward per token: H (2QP + 4NP) + G 2QN = 2 (32 + 32) + 16 = 144;
    # backward: H (4QP + 10NP) + G 6QN = 2 (64 + 80) + 48 = 336
    assert float(mamba.ssd_flops(md, 1)) == 144
    assert float(mamba.ssd_flops(md, 10, backward=True)) == 3360
    # conv: 2 K (d_in + 2GN) = 2 * 4 * 12 = 96 per token
    assert float(mamba.mamba_conv_flops(md, 1)) == 96


def test_hybrid_forward_flops_small_pattern_by_hand():
    md = tiny()
    sh = tr.shape(layers=4, hidden=4, heads=2, kv_heads=1, vocab=10, ffn_hidden=8, moe_experts=4, moe_top_k=2,
                  gated_mlp=False, biases=False, hybrid=mamba.layer_counts("M*-E"), mamba=md)
    s = 3
    # M: projections 2*3*4*(22 + 8) = 720, conv 3*96 = 288, SSD 3*144 = 432 -> 1440
    # *: QKV 4 x (4 + 2*2) = 32, O 16 -> 2*3*48 = 288; core 2 s s a (d + d) = 2*3*3*2*4 = 144 -> 432
    # -: 2*3*2*4*8 = 384;  E: 2*3*(2*2*4*8 + 4*4) = 864;  logits 2*3*4*10 = 240
    assert float(tr.forward_flops(sh, s)) == 1440 + 432 + 384 + 864 + 240
    # model FLOPs 3 x forward; full recompute repeats the layers (not the logits)
    f = tr.training_flops(sh, s, 1, recompute="full")
    assert float(f.model) == 3 * 3360 and float(f.recompute) == 3360 - 240
    # selective recompute (core_attn) repeats the core of the one attention layer only
    assert float(tr.training_flops(sh, s, 1, recompute="selective").recompute) == 144


def test_hybrid_parameters_by_hand():
    md = tiny()
    sh = tr.shape(layers=4, hidden=4, heads=2, kv_heads=1, vocab=10, ffn_hidden=8, moe_experts=4, moe_top_k=2,
                  gated_mlp=False, biases=False, hybrid=mamba.layer_counts("M*-E"), mamba=md)
    # M 194 + norm 4; * QKV 32 + O 16 + norm 4; - 2*4*8 + 4 = 68; E 4 experts x 64 + router 16 + norm 4 = 276;
    # embedding (tied, the shape's default) 40 + final norm 4 = 44
    assert float(tr.param_count(sh)) == 198 + 52 + 68 + 276 + 44
    # the layer tensors a DP bucket sees add up to the same layers (their shares x 4 layers)
    tensors = tr.layer_param_tensors(sh)
    assert float(sum(t.n * t.elements for t in tensors)) * 4 == pytest.approx(198 + 52 + 68 + 276 - 4 * 64)


@pytest.mark.parametrize("kw, where", [
    (dict(hybrid=mamba.layer_counts("M*-")), "hybrid.pattern"),  # 3 layers, layers 4
    (dict(hybrid=mamba.layer_counts("M*-E")), "hybrid.mamba"),  # M without widths
    (dict(hybrid=mamba.layer_counts("M*--"), mamba=None, moe_experts=4, moe_top_k=2), "hybrid.mamba"),
])
def test_hybrid_shape_refusals(kw, where):
    base = dict(layers=4, hidden=4, heads=2, vocab=10, ffn_hidden=8)
    with pytest.raises(InputError) as e:
        tr.shape(**{**base, **kw})
    assert e.value.where == where


def test_layer_time_bounds_and_broadcast():
    sh, md = nano()
    kw = dict(micro_batch=2, seq_len=8192, peak_flops=989e12, memory_bandwidth=3.35e12, gemm_max=0.75,
              gemm_half_dim=96.0)
    lt = compute.mamba_layer_time(md, **kw, tp=np.array([1.0, 2.0, 4.0]))
    # never faster than the FLOPs at peak, nor the bytes at full bandwidth
    assert np.all(lt.forward >= lt.forward_flops / 989e12)
    assert np.all(lt.forward_memory > 0)
    # FLOPs on a rank: the layer's / t (H and G split, h whole)
    full = float(mamba.mamba_forward_flops(md, 2 * 8192))
    assert lt.forward_flops == pytest.approx(full / np.array([1.0, 2.0, 4.0]))
    assert np.all(np.diff(lt.total) < 0)  # more TP, less time per rank
    rec = compute.mamba_layer_time(md, **kw, recompute="full")
    assert float(rec.recompute) == pytest.approx(float(rec.forward))
    assert float(compute.mamba_layer_time(md, **kw, recompute="selective").recompute) == 0.0


def test_activation_bytes_by_hand():
    md = tiny()
    # s b = 3 tokens, h 4: replicated (2 + 2) * 12 = 48; split 3 * (2*22 + 4*8 + 2*8) = 3 * 92 = 276
    assert float(memory.mamba_activation_bytes(md, micro_batch=1, seq_len=3)) == 48 + 276
    # tp 2 with sequence parallelism: all / 2; full recompute keeps the input 2 s b h (/t with SP)
    assert float(memory.mamba_activation_bytes(md, micro_batch=1, seq_len=3, tp=2, sequence_parallel=True)) == 162
    assert float(memory.mamba_activation_bytes(md, micro_batch=1, seq_len=3, recompute="full")) == 24


# --- through the engine -----------------------------------------------------------------------------------------

BASE = dict(kind="transformer", name="pairs", hidden=2048, heads=16, kv_heads=4, ffn_hidden=8192, vocab=32000,
            seq_len=4096, gated_mlp=True, dropout=False)


@pytest.mark.parametrize("moe", [False, True])
@pytest.mark.parametrize("kw", [dict(tp=2, pp=2, micro_batch=1), dict(micro_batch=2, recompute="full"),
                                dict(tp=4, cp=2, sequence_parallel=True, micro_batch=1),
                                dict(tp=2, recompute="selective", micro_batch=1, precision="fp8")])
def test_attention_mlp_pattern_is_the_standard_layer(moe, kw):
    """A pattern of (attention, MLP) pairs, each its own layer with one norm and one residual, is an attention + MLP
    layer split in two: the same FLOPs, parameters, compute, communication and step time as the standard model of
    half the layers (Megatron's hybrid model builds '*-' from the same attention and MLP modules as a GPT layer)."""
    extra = dict(moe={"experts": 8, "top_k": 2, "ffn_hidden": 1024}) if moe else {}
    std = dict(BASE, layers=8, **extra)
    hyb = dict(BASE, layers=16, hybrid={"pattern": ("*E" if moe else "*-") * 8}, **extra)
    if moe:
        kw = dict(kw, ep=2, sequence_parallel=kw.get("tp", 1) > 1)  # Megatron-Core needs SP for MoE at tp > 1
    a, b = (scalemodel.predict("dgx-h100", m, 16, global_batch=64, **kw) for m in (std, hyb))
    assert b.flops["model_flops_per_step"] == pytest.approx(a.flops["model_flops_per_step"], rel=1e-12)
    for part, t in a.breakdown_s.items():
        assert b.breakdown_s[part] == pytest.approx(t, rel=1e-9, abs=1e-12), part
    if kw.get("recompute") != "full":  # full recompute keeps one input per layer: twice the layers, twice the inputs
        assert b.memory["per_gpu_bytes"] == pytest.approx(a.memory["per_gpu_bytes"], rel=1e-12)


NANO = dict(kind="transformer", name="nano", layers=52, hidden=2688, heads=32, kv_heads=2, head_dim=128,
            ffn_hidden=1856, vocab=131072, seq_len=8192, gated_mlp=False, biases=False, dropout=False,
            moe={"experts": 128, "top_k": 6, "ffn_hidden": 1856, "shared_experts": 2},
            hybrid={"pattern": NANO_PATTERN, "mamba": {"state_dim": 128, "groups": 8, "head_dim": 64, "heads": 64}})


def test_hybrid_step_obeys_the_flops_bound_and_mamba_costs_time():
    r = scalemodel.predict("dgx-b200", NANO, 16, global_batch=256, ep=8, micro_batch=2)
    peak = 2250e12  # B200 dense BF16 (hardware/b200.yaml)
    assert r.step_time_s >= r.flops["model_flops_per_step"] / (16 * peak)
    # the Mamba layers are not free: the same model with its M layers made MLP layers of no width is faster
    no_mamba = dict(NANO, hybrid={"pattern": NANO_PATTERN.replace("M", "")}, layers=29)
    assert scalemodel.predict("dgx-b200", no_mamba, 16, global_batch=256, ep=8, micro_batch=2).step_time_s \
        < r.step_time_s
    # 31.6 B parameters on the job (published total, see above): weights 2 B each over the ranks that hold them
    assert r.memory["parts_bytes"]["weights"] > 0


def test_planner_keeps_tp_that_divides_the_mamba_groups():
    small = dict(NANO, hybrid={"pattern": NANO_PATTERN, "mamba": {"state_dim": 128, "groups": 2, "heads": 64}})
    ranked = scalemodel.plan("dgx-b200", small, 8, global_batch=64, top=200).ranked
    tps = {int(c.strategy["tp"]) for c in ranked}
    assert tps and all(2 % t == 0 for t in tps)


@pytest.mark.parametrize("hybrid, layers, needle", [
    ({"pattern": "M*X-"}, 4, "unknown layer character"),
    ({"pattern": "M*-"}, 4, "has 3 layers"),
    ({"pattern": "M*--", "mamba": {"heads": 64, "groups": 3}}, 4, "not a multiple of groups"),
    ({"pattern": "M*-E"}, 4, "E layers but no moe"),
])
def test_bad_hybrid_specs_fail_in_one_line(tmp_path, hybrid, layers, needle, cli):
    import json
    spec = dict(BASE, layers=layers, hybrid=hybrid)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(spec))
    run = cli("predict", "--cluster", "dgx-h100", "--model", str(path), "--gpus", "8")
    assert run.code == 2
    err = run.err.strip()
    assert "\n" not in err and "Traceback" not in err and needle in err, err


# --- HuggingFace config.json (NemotronH) ---------------------------------------------------------------------------

#: A NemotronH config.json with the keys of transformers' NemotronHConfig (huggingface/transformers 13923c63d
#: configuration_nemotron_h.py) and Nemotron 3 Nano's widths (the Megatron-Bridge recipe above); written here, not the
#: published file (not reachable from this machine).
NANO_HF = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": 131072,
           "hidden_size": 2688, "num_hidden_layers": 52, "hybrid_override_pattern": NANO_PATTERN,
           "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 1856,
           "mlp_hidden_act": "relu2", "tie_word_embeddings": False, "ssm_state_size": 128, "mamba_num_heads": 64,
           "mamba_head_dim": 64, "n_groups": 8, "conv_kernel": 4, "expand": 2, "chunk_size": 128,
           "n_routed_experts": 128, "n_shared_experts": 1, "moe_intermediate_size": 1856,
           "moe_shared_expert_intermediate_size": 3712, "num_experts_per_tok": 6, "moe_latent_size": None,
           "hidden_dropout": 0.0, "attention_dropout": 0.0, "max_position_embeddings": 262144,
           "num_nextn_predict_layers": 0, "use_mamba_kernels": True, "mamba_hidden_act": "silu", "n_group": 1,
           "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5, "rescale_prenorm_residual": True,
           "residual_in_fp32": False, "use_conv_bias": True, "mamba_proj_bias": False, "use_bias": False,
           "attention_bias": False, "mlp_bias": False, "layer_norm_epsilon": 1e-05, "time_step_min": 0.001,
           "time_step_max": 0.1, "time_step_floor": 0.0001, "num_logits_to_keep": 1}


def _hf(tmp_path, cfg):
    import json

    from scalemodel.engine.job import transformer_shape
    from scalemodel.specs import load_workload, notices
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    notices.clear()
    w = load_workload(tmp_path / "config.json")
    return w, transformer_shape(w), list(notices.current())


def test_nemotron_h_config_reads_as_the_hybrid(tmp_path):
    w, sh, warnings = _hf(tmp_path, NANO_HF)
    assert w.hybrid.pattern == NANO_PATTERN and w.layers == 52 and not w.gated_mlp
    assert not [x for x in warnings if "not understood" in x or "not a known family" in x], warnings
    assert float(tr.param_count(sh)) == pytest.approx(31.6e9, rel=0.003)  # the report's total, as above
    # the newer list form of the same pattern (layers_block_type), no num_hidden_layers
    kinds = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    listed = {k: v for k, v in NANO_HF.items() if k not in ("hybrid_override_pattern", "num_hidden_layers")}
    listed["layers_block_type"] = [kinds[c] for c in NANO_PATTERN]
    assert float(tr.param_count(_hf(tmp_path, listed)[1])) == float(tr.param_count(sh))


@pytest.mark.parametrize("change, where", [({"moe_latent_size": 2688}, "moe_latent_size"),
                                           ({"layers_block_type": ["linear_attention", "gdn"],
                                             "hybrid_override_pattern": None}, "layers_block_type")])
def test_nemotron_h_config_refusals(tmp_path, change, where):
    with pytest.raises(InputError) as e:
        _hf(tmp_path, {**NANO_HF, **change})
    assert e.value.where.endswith("config.json: " + where)


def test_hybrid_feasibility_follows_megatron():
    """TP must divide the Mamba heads and groups (MambaMixer asserts), and a pattern without '|' cannot interleave
    (Megatron-Core hybrid_layer_allocation.py select_pipeline_segment refuses virtual stages without pipes)."""
    groups2 = dict(NANO, hybrid={"pattern": NANO_PATTERN, "mamba": {"groups": 2, "heads": 64}})
    r = scalemodel.predict("dgx-b200", groups2, 16, global_batch=256, ep=4, tp=4, micro_batch=1,
                           sequence_parallel=True)
    assert not r.feasible and "Mamba heads and groups" in r.infeasible_reason
    pairs = dict(BASE, layers=16, hybrid={"pattern": "*-" * 8})
    r = scalemodel.predict("dgx-h100", pairs, 16, global_batch=64, pp=2, schedule="interleaved:2", micro_batch=1)
    assert not r.feasible and "'|' stage" in r.infeasible_reason
    piped = dict(pairs, hybrid={"pattern": "*-*-|*-*-|*-*-|*-*-"})
    assert scalemodel.predict("dgx-h100", piped, 16, global_batch=64, pp=2, schedule="interleaved:2",
                              micro_batch=1).feasible
