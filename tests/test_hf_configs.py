"""HuggingFace config.json reading: published parameter counts, key aliases, warnings, folders, hub ids.

The configs in tests/data/hf/<model>/config.json are the published config.json files of each model
(huggingface.co/<org>/<model>/blob/main/config.json), kept whole except for bulky keys that do not
describe the architecture. The published counts are the models' own: the safetensors totals shown on
their model cards, or the paper's number where that is what the authors publish (DeepSeek-V3: 671 B
without the multi-token-prediction module, arXiv:2412.19437 abstract).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalemodel.cost import transformer
from scalemodel.engine.job import transformer_shape
from scalemodel.errors import InputError
from scalemodel.specs import load_workload, notices

HF = Path(__file__).parent / "data" / "hf"

# folder -> (family, published parameter count, where it is published)
PUBLISHED = {
    "llama-7b": ("Llama 1", 6_738_415_616, "huggyllama/llama-7b safetensors total; Touvron et al. 2023 '6.7B'"),
    "Llama-2-7b-hf": ("Llama 2", 6_738_415_616, "meta-llama/Llama-2-7b-hf safetensors total"),
    "Meta-Llama-3-8B": ("Llama 3", 8_030_261_248, "meta-llama/Meta-Llama-3-8B safetensors total"),
    "Llama-3.1-70B": ("Llama 3.1", 70_553_706_496, "meta-llama/Llama-3.1-70B safetensors total"),
    "Mistral-7B-v0.1": ("Mistral", 7_241_732_096, "mistralai/Mistral-7B-v0.1 safetensors total"),
    "Mixtral-8x7B-v0.1": ("Mixtral (MoE)", 46_702_792_704, "mistralai/Mixtral-8x7B-v0.1 safetensors total"),
    "Qwen2.5-7B": ("Qwen 2.5", 7_615_616_512, "Qwen/Qwen2.5-7B safetensors total (7.61 B, Qwen2.5 report)"),
    "Qwen3-8B": ("Qwen 3", 8_190_735_360, "Qwen/Qwen3-8B safetensors total (8.2 B on the card)"),
    "Qwen3-30B-A3B": ("Qwen 3 MoE", 30_532_122_624, "Qwen/Qwen3-30B-A3B safetensors total (30.5 B)"),
    "Qwen1.5-MoE-A2.7B": ("Qwen 2 MoE", 14_315_784_192, "Qwen/Qwen1.5-MoE-A2.7B safetensors total (14.3 B)"),
    "gemma-7b": ("Gemma 1", 8_537_680_896, "google/gemma-7b safetensors total"),
    "gemma-2-9b": ("Gemma 2", 9_241_705_984, "google/gemma-2-9b safetensors total"),
    "gemma-3-1b-pt": ("Gemma 3", 999_885_952, "google/gemma-3-1b-pt safetensors total"),
    "Phi-3-mini-4k-instruct": ("Phi-3", 3_821_079_552, "microsoft/Phi-3-mini-4k-instruct safetensors total"),
    "falcon-7b": ("Falcon", 6_921_720_704, "tiiuae/falcon-7b safetensors total"),
    "gpt2": ("GPT-2", 124_439_808, "openai-community/gpt2 safetensors total (124 M)"),
    "gpt-j-6b": ("GPT-J", 6_053_381_344, "EleutherAI/gpt-j-6b model card, 'Number of parameters'"),
    "gpt-neox-20b": ("GPT-NeoX", 20_554_567_680, "EleutherAI/gpt-neox-20b safetensors total"),
    "opt-1.3b": ("OPT", 1_315_758_080, "facebook/opt-1.3b safetensors total"),
    "bloom-560m": ("BLOOM", 559_214_592, "bigscience/bloom-560m safetensors total"),
    "DeepSeek-V2-Lite": ("DeepSeek V2 (MLA, MoE)", 15_706_484_224, "deepseek-ai/DeepSeek-V2-Lite safetensors total"),
    "DeepSeek-V3": ("DeepSeek V3 (MLA, MoE)", 671_000_000_000, "DeepSeek-AI 2024, arXiv:2412.19437 abstract"),
}


def params_of(ref: Path) -> float:
    return float(transformer.param_count(transformer_shape(load_workload(ref))))


@pytest.mark.parametrize("folder", list(PUBLISHED))
def test_published_parameter_counts_within_one_percent(folder: str) -> None:
    family, published, _ = PUBLISHED[folder]
    ours = params_of(HF / folder)
    assert ours == pytest.approx(published, rel=0.01), f"{family}: {ours:,.0f} vs published {published:,}"


def test_every_family_config_reads_without_an_unknown_key_warning() -> None:
    for folder in sorted(p.name for p in HF.iterdir() if p.is_dir()):
        notices.clear()
        load_workload(HF / folder)
        assert not [w for w in notices.current() if "not understood" in w or "not a known family" in w], folder


def test_falcon_structure() -> None:
    w7 = load_workload(HF / "falcon-7b")
    assert (w7.kv_heads, w7.parallel_block, w7.norms_per_layer, w7.tied_embeddings, w7.biases) == (1, True, 1, True,
                                                                                                    False)
    w40 = load_workload(HF / "falcon-40b")  # new_decoder_architecture: num_kv_heads groups, ln_attn + ln_mlp
    assert (w40.kv_heads, w40.parallel_block, w40.norms_per_layer) == (8, True, 2)


def test_learned_positions_and_parallel_blocks() -> None:
    assert load_workload(HF / "gpt2").position_embeddings == 1024
    assert load_workload(HF / "opt-1.3b").position_embeddings == 2050  # OPT's 2 offset rows
    assert load_workload(HF / "bloom-560m").position_embeddings == 0  # ALiBi
    gptj, neox = load_workload(HF / "gpt-j-6b"), load_workload(HF / "gpt-neox-20b")
    assert (gptj.parallel_block, gptj.norms_per_layer) == (True, 1)
    assert (neox.parallel_block, neox.norms_per_layer) == (True, 2)


def test_sliding_windows() -> None:
    assert load_workload(HF / "Mistral-7B-v0.1").sliding_window == 4096
    g2 = load_workload(HF / "gemma-2-9b")
    assert (g2.sliding_window, g2.sliding_window_pattern) == (4096, 2)
    g3 = load_workload(HF / "gemma-3-1b-pt")
    assert (g3.sliding_window, g3.sliding_window_pattern) == (512, 6)
    assert load_workload(HF / "Qwen2.5-7B").sliding_window is None  # use_sliding_window false


def _write(tmp: Path, cfg: dict, name: str = "m") -> Path:  # type: ignore[type-arg]
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_expert_key_aliases(tmp_path: Path) -> None:
    cfg = json.loads((HF / "DeepSeek-V3" / "config.json").read_text())
    cfg["num_routed_experts"] = cfg.pop("n_routed_experts")
    assert params_of(_write(tmp_path, cfg)) == pytest.approx(671e9, rel=0.01)


def test_layer_types_give_the_sliding_pattern(tmp_path: Path) -> None:
    cfg = json.loads((HF / "gemma-3-1b-pt" / "config.json").read_text())
    del cfg["sliding_window_pattern"]
    cfg["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(26)]
    w = load_workload(_write(tmp_path, cfg))
    assert (w.sliding_window, w.sliding_window_pattern) == (512, 6)


def test_unknown_shape_key_is_a_warning_naming_it(tmp_path: Path) -> None:
    notices.clear()
    cfg = json.loads((HF / "Meta-Llama-3-8B" / "config.json").read_text())
    cfg["num_dense_experts_per_block"] = 3
    load_workload(_write(tmp_path, cfg))
    assert any("num_dense_experts_per_block" in w for w in notices.current())


@pytest.mark.parametrize(("key", "value", "warned"), [
    ("torch_dtype", "bfloat16", False), ("torch_dtype", "float8_e4m3fn", False), ("dtype", "torch.float16", False),
    ("torch_dtype", "auto", False), ("torch_dtype", "bfloat61", True), ("dtype", "fp8", True),
])
def test_unknown_torch_dtype_is_a_warning_naming_it(tmp_path: Path, key: str, value: str, warned: bool) -> None:
    """torch_dtype was ignored whatever it said: one that is not a torch dtype name is now said, known ones are not
    (Meta-Llama-3-8B's config states bfloat16; the bf16 vs fp16 question is training.precision's)."""
    notices.clear()
    cfg = json.loads((HF / "Meta-Llama-3-8B" / "config.json").read_text())
    cfg.pop("torch_dtype", None)
    cfg[key] = value
    load_workload(_write(tmp_path, cfg))
    said = [w for w in notices.current() if "not a torch dtype" in w]
    assert bool(said) == warned, notices.current()
    if warned:
        assert f"{key} {value!r}" in said[0] and "training.precision" in said[0]


def test_unknown_model_type_warns_about_its_guesses(tmp_path: Path) -> None:
    notices.clear()
    load_workload(_write(tmp_path, {"model_type": "brandnew", "num_hidden_layers": 2, "hidden_size": 64,
                                    "num_attention_heads": 4, "vocab_size": 100, "hidden_act": "silu"}))
    text = " ".join(notices.current())
    assert "brandnew" in text and "tie_word_embeddings" in text


def test_multimodal_text_config(tmp_path: Path) -> None:
    notices.clear()
    text = json.loads((HF / "gemma-3-1b-pt" / "config.json").read_text())
    w = load_workload(_write(tmp_path, {"model_type": "gemma3", "text_config": text, "vision_config": {"x": 1}}))
    assert w.layers == 26 and any("vision" in n for n in notices.current())


def test_snapshot_folders(tmp_path: Path) -> None:
    cfg = json.loads((HF / "Qwen3-8B" / "config.json").read_text())
    cache = tmp_path / "models--Qwen--Qwen3-8B"
    _write(cache / "snapshots", cfg, "9c925d64d72725edaf899c6cb9c377fd0709d9c5")
    for ref in (cache, cache / "snapshots" / "9c925d64d72725edaf899c6cb9c377fd0709d9c5"):
        w = load_workload(str(ref))
        assert w.name == "Qwen/Qwen3-8B" and w.layers == 36


def test_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as info:
        load_workload(str(tmp_path / "empty"))
    assert "no config.json" in info.value.message() and "huggingface-cli download" in info.value.message()


def test_hub_id_says_how_to_download(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    r = cli("memory", "-m", "Qwen/Qwen3-8B", "-c", "dgx-h100", "-n", "8")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "huggingface-cli download Qwen/Qwen3-8B config.json --local-dir Qwen3-8B" in r.err


def test_seq_len_from_the_config_is_printed_and_warned(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-m", str(HF / "Qwen3-8B"), "-c", "dgx-h100", "-n", "8", "--zero", "3")
    assert r.code == 0 and "seq 40,960" in r.out
    lines = [x for x in r.err.splitlines() if x.startswith("warning:")]
    assert len(lines) == 1 and "max_position_embeddings" in lines[0] and "--seq-len" in lines[0]
    r = cli("predict", "-m", str(HF / "Qwen3-8B"), "-c", "dgx-h100", "-n", "8", "--zero", "3", "--seq-len", "4096",
            "--json")
    doc = json.loads(r.out)
    assert r.err == "" and doc["warnings"] == [] and doc["inputs"]["seq_len"] == 4096
    r = cli("predict", "-m", str(HF / "Qwen3-8B"), "-c", "dgx-h100", "-n", "8", "--json")
    assert "max_position_embeddings" in json.loads(r.out)["warnings"][0]


def test_warnings_carry_no_terminal_escapes(tmp_path: Path) -> None:
    notices.clear()
    cfg = json.loads((HF / "gpt2" / "config.json").read_text())
    cfg["\x1b[31mred"] = 1
    load_workload(_write(tmp_path, cfg))
    assert notices.current() and all("\x1b" not in w for w in notices.current())


def test_family_keys_outside_their_family_are_named(tmp_path: Path) -> None:
    notices.clear()
    cfg = json.loads((HF / "Meta-Llama-3-8B" / "config.json").read_text())
    cfg["parallel_attn"] = True  # a Falcon key on a Llama config: not applied, so it must be named
    cfg["vision_config"] = {"hidden_size": 1024}
    load_workload(_write(tmp_path, cfg))
    text = " ".join(notices.current())
    assert "parallel_attn" in text and "vision tower" in text


@pytest.mark.parametrize(("folder", "builtin"), [("falcon-7b", "falcon-7b"), ("DeepSeek-V3", "deepseek-v3"),
                                                 ("Mixtral-8x7B-v0.1", "mixtral-8x7b"), ("gpt-j-6b", "gpt-j-6b")])
def test_config_and_builtin_yaml_describe_the_same_model(folder: str, builtin: str) -> None:
    """The built-in YAMLs were written by hand from the same configs: the two readings must agree."""
    ours = transformer_shape(load_workload(HF / folder))
    ref = transformer_shape(load_workload(builtin))
    assert float(transformer.param_count(ours)) == pytest.approx(float(transformer.param_count(ref)), rel=1e-3)
    assert float(transformer.forward_flops(ours, 2048)) == pytest.approx(float(transformer.forward_flops(ref, 2048)),
                                                                         rel=1e-3)


@pytest.mark.parametrize(("folder", "dropout"), [("Meta-Llama-3-8B", False), ("DeepSeek-V3", False),
                                                 ("falcon-7b", False), ("gpt2", True), ("opt-1.3b", True),
                                                 ("gpt-neox-20b", True)])
def test_dropout_from_the_config(folder: str, dropout: bool) -> None:
    """Configs whose stated dropout rates are all 0 (Llama 3: attention_dropout 0.0) train without dropout
    masks; any rate > 0 (GPT-2 resid_pdrop 0.1, OPT dropout 0.1), or none stated (GPT-NeoX), keeps them."""
    assert load_workload(HF / folder).dropout is dropout
