"""mem32: memory and parameter-count defects left open after bias31 (docs/model.md#param-biases, #offload).

* ``biases`` also gave every norm a LayerNorm bias. GPT-OSS norms with RMSNorm (a gain only) and has linear biases
  (huggingface/transformers@0261a467 src/transformers/models/gpt_oss/modular_gpt_oss.py: GptOssRMSNorm;
  GptOssAttention q/k/v/o ``bias=config.attention_bias``; GptOssExperts ``gate_up_proj_bias`` (E, 2f) and
  ``down_proj_bias`` (E, h); GptOssTopKRouter ``bias`` (E,); ``sinks`` (a,) a layer). The norms' bias is now
  ``norm_biases`` (default: biases and not gated_mlp), and a Hugging Face ``gpt_oss`` config imports as a gated MLP
  with linear biases. The counts are checked against OpenAI's model card (gpt-oss-120b & gpt-oss-20b Model Card,
  arXiv:2508.10925, Table 1: 116.83B / 20.91B total; MLP 114.71B / 19.12B, attention 0.96B / 0.64B, embedding and
  unembedding together 1.16B), each component counted here by hand from the module layout above."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalemodel.api import predict
from scalemodel.choices import Recompute
from scalemodel.cost import transformer
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy, transformer_shape
from scalemodel.engine.step import evaluate
from scalemodel.specs import load_cluster, load_workload, notices
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, HEADS, KV, D, V = 2880, 64, 8, 64, 201088


def _oss_config(layers: int, experts: int) -> dict[str, object]:
    """openai/gpt-oss-{120b,20b} config.json's keys (the two differ in layers and experts only)."""
    return {"architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
            "eos_token_id": 200002, "experts_per_token": 4, "head_dim": D, "hidden_act": "silu", "hidden_size": H,
            "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
            "layer_types": ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)],
            "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": HEADS,
            "num_experts_per_tok": 4, "num_hidden_layers": layers, "num_key_value_heads": KV,
            "num_local_experts": experts, "output_router_logits": False, "pad_token_id": 199999, "rms_norm_eps": 1e-05,
            "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                             "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
            "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
            "tie_word_embeddings": False, "use_cache": True, "vocab_size": V}


def _by_hand(layers: int, experts: int) -> dict[str, int]:
    """The model card's components, counted from the module layout (sinks apart: not modelled, 64 a layer)."""
    f = 2880
    attention = H * HEADS * D + 2 * H * KV * D + HEADS * D * H + (HEADS + 2 * KV) * D + H  # q, k, v, o + biases
    expert = H * 2 * f + 2 * f + f * H + H  # gate_up (h x 2f) + bias 2f, down (f x h) + bias h
    router = experts * H + experts
    return {"attention": layers * attention, "mlp": layers * (experts * expert + router),
            "norms": (2 * layers + 1) * H, "embedding": 2 * V * H, "sinks": layers * HEADS}


@pytest.mark.parametrize(("size", "layers", "experts", "card"), [
    ("120b", 36, 128, {"total": 116.83, "mlp": 114.71, "attention": 0.96, "embedding": 1.16}),
    ("20b", 24, 32, {"total": 20.91, "mlp": 19.12, "attention": 0.64, "embedding": 1.16})])
def test_gpt_oss_params_from_hf_config(tmp_path: Path, size: str, layers: int, experts: int,
                                       card: dict[str, float]) -> None:
    """The config.json imports with linear biases and RMSNorm gains only, every other layer global, no warning; its
    count equals the hand count (sinks apart) and rounds to the card's 116.83B / 20.91B (the components too). Before
    mem32: the norms counted 2h each (+ 73 x 2880 = 210,240 for 120b) and the importer warned that attention_bias's
    biases were not counted and that gpt_oss was an unknown family."""
    path = tmp_path / size / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_oss_config(layers, experts)))
    with notices.collecting() as warnings:
        w = load_workload(str(path))
    assert [x for x in warnings if "seq_len" not in x and "context" not in x] == []
    assert (w.biases, w.norm_biases, w.gated_mlp, w.sliding_window_pattern) == (True, None, True, 2)
    sh = transformer_shape(w)
    part = _by_hand(layers, experts)
    total = part["attention"] + part["mlp"] + part["norms"] + part["embedding"]
    assert float(transformer.param_count(sh)) == total
    assert round((total + part["sinks"]) / 1e9, 2) == card["total"]
    for key in ("mlp", "attention", "embedding"):
        assert round(part[key] / 1e9, 2) == card[key]


def test_norm_biases_default_and_switch() -> None:
    """GPT-2 style (ungated, biases): each norm weight + bias, 4h a layer and 2h final (unchanged); with
    norm_biases false 2h and h; a gated MLP with linear biases defaults to gain-only norms."""
    base = dict(layers=3, hidden=256, heads=4, vocab=1000, ffn_hidden=1024)
    gpt2 = transformer.shape(**base, biases=True)  # type: ignore[arg-type]
    rms = transformer.shape(**base, biases=True, norm_biases=False)  # type: ignore[arg-type]
    assert float(transformer.norm_params(gpt2)) == 2 * 2 * 256
    assert float(transformer.norm_params(rms)) == 2 * 256
    assert float(transformer.param_count(gpt2) - transformer.param_count(rms)) == (3 * 2 + 1) * 256
    gated = transformer.shape(**base, gated_mlp=True, biases=True)  # type: ignore[arg-type]
    assert not bool(gated.norm_biases) and bool(gated.biases)
    layer = transformer.layer_param_tensors(rms, moe=False)
    assert sum(float(t.n) * float(t.elements) for t in layer) == float(transformer.layer_params(rms))
    tensors = transformer.non_layer_param_tensors(rms)
    assert sum(float(t.n) * float(t.elements) for t in tensors) == float(transformer.embedding_params(rms))


# --- activation offload copies the memory model's bytes (docs/model.md#offload) ---------------------------------

#: a small dense layer: h 1024, 8 heads of 128 (no GQA), GeLU MLP of 4096, no dropout; one micro-batch of 2048 tokens,
#: tp 1, flash attention (the fp32 log-sum-exp, 4 a s b)
L, HID, NH, FFN, SEQ = 4, 1024, 8, 4096, 2048
#: per token, no recompute (cost.memory's Korthikanti row): 16-bit: norm inputs 2 x 2h, QKV and FC1 inputs 2h + 2h,
#: Q 2h, K + V 4h, O (flash's output, the O-projection input) 2h, GeLU input + FC2 input 4f
A_BF16 = SEQ * (16 * HID + 4 * FFN) + 4 * NH * SEQ  # 67,174,400
#: fp8 (delayed scaling, 1-byte column-wise copies): the QKV and FC1 inputs 1 + 1, O kept 16-bit for flash's backward
#: and as a 1-byte copy for the O-projection (3h), the FC2 input 1 + GeLU input 2 (3f)
A_FP8 = SEQ * (15 * HID + 3 * FFN) + 4 * NH * SEQ  # 56,688,640


def _offload_job(tmp_path: Path, precision: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "small.yaml"
    path.write_text(f"kind: transformer\nname: small\nlayers: {L}\nhidden: {HID}\nheads: {NH}\nffn_hidden: {FFN}\n"
                    f"vocab: 32000\nseq_len: {SEQ}\ndropout: false\n")
    job = build_job(load_cluster("dgx-h100"), load_workload(str(path)),
                    TrainingSpec(precision=precision, global_batch=8, micro_batch=1))
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in dict(
        gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=8, recompute=Recompute.NONE, flash_attention=True,
        offload_layers=2).items()})
    return job, g, str(path)


@pytest.mark.parametrize(("precision", "by_hand"), [("bf16", A_BF16), ("fp8", A_FP8)])
def test_offload_copies_the_saved_tensor_bytes(tmp_path: Path, precision: str, by_hand: int) -> None:
    """_offload_time's whole-layer copy is the memory model's saved bytes of a layer: in an fp8 run the 1-byte GEMM
    input copies (before mem32 it priced the 16-bit layer, A_BF16, in every precision). W_f = 0: each of the k = 2
    layers exposes its copy out and back, 2 x 2 x A / host_bandwidth; and the memory model's activations with the two
    layers offloaded are 2 A lower (one micro-batch in flight: pp 1)."""
    assert (A_BF16, A_FP8) == (67_174_400, 56_688_640)
    job, g, path = _offload_job(tmp_path, precision)
    comp = {"forward_per_layer": np.asarray([0.0]), "layers_per_stage": np.asarray([float(L)])}
    got = float(dp_comm._offload_time(job, g, comp)[0])
    assert got == pytest.approx(2 * 2 * by_hand / job.host_bandwidth, rel=1e-12)
    kw = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, recompute="none", precision=precision)
    kept = predict("dgx-h100", path, 8, **kw)
    off = predict("dgx-h100", path, 8, offload_layers=2, **kw)
    drop = kept.memory["parts_bytes"]["activations"] - off.memory["parts_bytes"]["activations"]
    assert drop == pytest.approx(2 * by_hand, rel=1e-9)


# --- the CLI's --precision and the library agree on the attention kernel (bias31's report) -----------------------


@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_cli_precision_prices_the_library_step(cli, precision: str) -> None:  # type: ignore[no-untyped-def]
    """bias31 reported `predict --precision tf32` printing one compute time for attention_kernel auto and gemm where
    build_job + evaluate differed. At 85fbf7c6 the two routes agree (traced: --precision is TRAINING_FLAGS'
    training.precision, the same TrainingSpec field the library reads; auto resolves to gemm in a 32-bit run in
    engine.job.attention_kernel_runs, TE filtering FlashAttention and FusedAttention for a 32-bit QKV dtype): the
    CLI's step is the library's for each kernel, auto differs from gemm in bf16 (cuDNN's fused curve on an H100) and
    equals it in tf32."""
    steps = {}
    for kernel in ("auto", "gemm"):
        r = cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--precision", precision, "--tp", "8",
                "--global-batch", "8", "--micro-batch", "1", "--set", f"training.attention_kernel={kernel}", "--json")
        assert r.code == 0, r.err
        tr = TrainingSpec(global_batch=8, micro_batch=1, precision=precision, attention_kernel=kernel)
        job = build_job(load_cluster("dgx-h100"), load_workload("llama3-8b", []), tr)
        lib = float(evaluate(job, grid_from_strategy(StrategySpec(tp=8), tr, 8, job)).step_time[0])
        assert json.loads(r.out)["step_time_s"] == pytest.approx(lib, rel=1e-12)
        steps[kernel] = lib
    assert (steps["auto"] == steps["gemm"]) == (precision == "tf32")


# --- torchtitan float8: the output layer converted unless filter_fqns names it -----------------------------------


@pytest.mark.parametrize(("float8", "named"), [
    ('filter_fqns = ["output"]\n', False),  # llama3_8b.toml at e7c0cae: the output layer stays BF16
    ('filter_fqns = ["out"]\n', False),  # a substring of the FQN "output" (module_filter_fn: entry in fqn)
    ('filter_fqns = ["layers.0."]\n', True),
    ("recipe_name = \"rowwise\"\n", True),  # no list: default [] since a6524d8a0, the output layer converted
])
def test_titan_output_layer_converted_is_said(tmp_path: Path, float8: str, named: bool) -> None:
    """pytorch/torchtitan@e7c0cae components/quantization/utils.py module_filter_fn converts every nn.Linear with
    both dims multiples of 16 whose FQN contains no filter_fqns entry (config_manager.py Float8.filter_fqns default
    []; since a6524d8a0, before which float8.py skipped fqn == "output" itself), so the output layer runs in FP8
    unless the list names it. The model prices it in BF16 (its FP8 GEMM and casts are not modelled): the importer
    says so in one line where the list does not name it, and says nothing where it does."""
    path = tmp_path / "f8.toml"
    path.write_text(f'[model]\nconverters = ["float8"]\n[float8]\n{float8}[parallelism]\n'
                    "data_parallel_shard_degree = -1\n")
    lines = [u for u in read_strategy_file(path).unused if "output" in u and u.startswith("float8.filter_fqns")]
    assert lines == (['float8.filter_fqns does not name "output" (torchtitan since a6524d8a0 converts the output '
                      "layer to Float8Linear, V and h multiples of 16: priced in BF16, its FP8 GEMM and casts not "
                      "modelled)"] if named else [])
