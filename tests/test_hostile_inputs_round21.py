"""Hostile-input round 21: the workload and strategy fields added lately (MLA, Mamba-2 hybrids, LatentMoE, MTP,
module precision, uneven pipeline stages, the MoE dispatcher and router settings, CP exchange types), cluster tier
fields, accelerator YAML, calibrated overlays, launch scripts with the newer switches, and fields valid one by one
but contradictory together.

Each case is one finding of a corpus run one process per case (timeout and memory cap); the contract is
test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

DSV3 = ["-c", "dgx-h100", "-m", "deepseek-v3", "-n", "1024", "--pp", "16", "--ep", "64"]


# --- MLA with the GQA / head-width fields ----------------------------------------------------------------------------
# Under mla the shape takes its widths from the mla block (engine.job.transformer_shape): kv_heads 8 of 128 heads and
# head_dim 64 were read, dropped and priced as if absent, exit 0 without a word.

@pytest.mark.parametrize("item, said", [
    ("model.kv_heads=8", "--set model.kv_heads: 8 with mla: multi-head latent attention up-projects keys and values "
                         "for each of the 128 heads from one latent (no KV groups); leave kv_heads out with mla"),
    ("model.head_dim=64", "--set model.head_dim: 64 with mla, whose query/key head width is mla.qk_nope_head_dim + "
                          "mla.qk_rope_head_dim = 192 (values: mla.v_head_dim); leave head_dim out with mla (or 192)"),
])
def test_mla_with_gqa_or_head_dim_is_refused(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    assert said in refused(cli, "predict", *DSV3, "--set", item)


def test_mla_with_the_widths_it_implies_still_runs(cli) -> None:  # type: ignore[no-untyped-def]
    # kv_heads = heads and head_dim = qk_nope + qk_rope (128 + 64) say what MLA does: the same step as without them
    plain = accepted(cli, "predict", *DSV3)
    same = accepted(cli, "predict", *DSV3, "--set", "model.kv_heads=128", "--set", "model.head_dim=192")
    assert same["step_time_s"] == plain["step_time_s"]


def test_mla_from_a_hf_config_still_loads(cli) -> None:  # type: ignore[no-untyped-def]
    # the HF reader sets kv_heads and head_dim to None for MLA (num_key_value_heads 128 in DeepSeek-V3's config)
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", str(ROOT / "tests/data/hf/DeepSeek-V3/config.json"),
                   "-n", "1024", "--pp", "16", "--ep", "64", "--seq-len", "4096")
    assert doc["step_time_s"] > 0


# --- Megatron-LM uneven edge stages of 0 layers --------------------------------------------------------------------
# --decoder-first/last-pipeline-num-layers 0 was priced as an empty edge stage; Megatron-Core raises
# (NVIDIA/Megatron-LM@d98e8a64dd transformer_config.py L2304 / L2323).

@pytest.mark.parametrize("flag", ["--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"])
def test_megatron_edge_stage_of_zero_layers_is_refused(cli, tmp_path: Path, flag: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 32 --bf16 "
                 f"--pipeline-model-parallel-size 4 {flag} 0\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--strategy", str(f), inputs=(f,))
    assert f"{flag}: 0 layers (Megatron-Core raises" in line and "; 1 or more layers, or leave the flag out" in line


def test_megatron_edge_stage_of_two_layers_still_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 32 --bf16 "
                 "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2\n")
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--strategy", str(f))
    assert doc["strategy"]["first_stage_layers"] == 2


# --- a Mamba-2 block without Mamba-2 layers --------------------------------------------------------------------------
# hybrid.mamba beside a pattern of no M was dropped without a word, its widths never checked (heads 3 of groups 8 ran),
# where a moe block without E layers is refused.

def test_mamba_block_without_m_layers_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text("kind: transformer\nname: w\nlayers: 8\nhidden: 1024\nheads: 16\nvocab: 32000\nseq_len: 2048\n"
                 "hybrid: {pattern: '*-*-*-*-', mamba: {state_dim: 16, heads: 3}}\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8", inputs=(f,),
            match=f"error: {f}:8: hybrid.mamba: set but hybrid.pattern has no M layer; M for each Mamba-2 layer, or "
                  "no mamba block")


def test_set_pattern_without_m_on_a_model_with_mamba_widths_says_so(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "16", "--ep", "8",
            "--set", "model.hybrid.pattern=" + "*E" * 26, match="hybrid.mamba: set but hybrid.pattern has no M layer")


# --- a published parameter count the shape does not give ------------------------------------------------------------
# params ("published parameter count, for checking") of 1 or 1e15 beside a 166 M shape was kept without a word.

WL = "kind: transformer\nname: w\nlayers: 8\nhidden: 1024\nheads: 16\nvocab: 32000\nseq_len: 2048\n"


def _shape_params() -> float:
    # by hand: 8 layers of 12 h^2 + 13 h (QKV and output 4 h^2 + 4 h, MLP 8 h^2 + 5 h, two norms 4 h), untied input
    # and output embeddings 2 V h, the final norm 2 h: 166,307,840
    h = 1024
    return 8 * (12 * h * h + 13 * h) + 2 * 32000 * h + 2 * h


@pytest.mark.parametrize("params", ["1", "1e15", "150e6"])
def test_params_the_shape_does_not_give_is_warned(cli, tmp_path: Path, params: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text(WL + f"params: {params}\n")
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8")
    said = [w for w in doc["warnings"] if w.startswith("model.params ")]
    assert len(said) == 1 and f"is not the {_shape_params():.4g} parameters the model's shape gives" in said[0], said


@pytest.mark.parametrize("params", [f"{_shape_params():.0f}", "166e6", "0.17e9"])  # exact, or within the rounding
def test_params_the_shape_gives_says_nothing(cli, tmp_path: Path, params: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text(WL + f"params: {params}\n")
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8")
    assert not [w for w in doc["warnings"] if w.startswith("model.params ")], doc["warnings"]


# --- an FP8 recipe the accelerator cannot run, named where it was written ------------------------------------------
# The refusal of training.fp8_recipe (mxfp8 off Blackwell) was located where the precision was written: "--precision:
# fp8 recipe mxfp8 needs Blackwell tensor cores" to a user who wrote --set training.fp8_recipe=mxfp8, "training.
# precision" in a scenario, and "training.precision" for a Megatron-LM launch's --fp8-recipe.

def test_fp8_recipe_refusal_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--precision", "fp8",
            "--set", "training.fp8_recipe=mxfp8",
            match="error: --set training.fp8_recipe: fp8 recipe mxfp8 needs Blackwell tensor cores; h100-sxm is hopper")


def test_fp8_recipe_refusal_names_the_scenario_field(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: llama3-8b\ngpus: [16]\n"
                 "training: {precision: fp8, fp8_recipe: mxfp8}\nassertions: {max_step_time: 100 s}\n")
    refused(cli, "check", str(f), inputs=(f,),
            match=f"error: {f}: training.fp8_recipe: fp8 recipe mxfp8 needs Blackwell")


@pytest.mark.parametrize("flags, said", [
    ("--fp8-format hybrid --fp8-recipe mxfp8", "--fp8-recipe: fp8 recipe mxfp8 needs Blackwell tensor cores"),
    ("--fp8-format hybrid", "--fp8-format: accelerator 'a100-sxm-80g' has no fp8 peak"),
])
def test_megatron_fp8_refusal_names_the_flag(cli, tmp_path: Path, flags: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 32 --bf16 {flags}\n")
    refused(cli, "predict", "-c", "dgx-a100", "-m", "llama3-8b", "-n", "16", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: {said}")


def test_fp4_off_blackwell_still_names_the_precision(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--precision", "fp4",
            match="error: --precision: precision fp4 (NVFP4) needs Blackwell tensor cores")


# --- `hardware validate` of a built-in name ---------------------------------------------------------------------------
# "error: deepseek-v3: file not found: deepseek-v3; an existing YAML file": validate reads files only, and said nothing
# of the built-in the name is, nor of `hardware show`, which loads it.

@pytest.mark.parametrize("name, kind", [("deepseek-v3", "workload"), ("dgx-h100", "cluster"),
                                        ("h100-sxm", "accelerator"), ("default", "scenario")])
def test_validate_of_a_builtin_name_points_to_show(cli, name: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "hardware", "validate", name)
    assert line.startswith(f"error: {name}: no such file; {name!r} is the name of a built-in {kind}, "), line
    assert f"`scalemodel hardware show {name}` loads and shows the built-in" in line, line


def test_validate_of_a_missing_file_still_says_not_found(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "hardware", "validate", str(tmp_path / "nope.yaml"), match="file not found: ")


# --- a torchtitan [float8] recipe that converts nothing -------------------------------------------------------------
# torchtitan converts layers to Float8Linear only when [model] converters names float8 (or the old
# enable_float8_linear); a [float8] recipe_name without it trains in bf16, and was dropped without a word.

TITAN = "[training]\nlocal_batch_size = 1\nseq_len = 2048\n[activation_checkpoint]\nmode = 'none'\n"


def _titan_unused(cli, tmp_path: Path, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    f = tmp_path / "t.toml"
    f.write_text(text)
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--strategy", str(f))
    assert doc["inputs"]["training"]["precision"] == "bf16"
    return doc["inputs"]["strategy_file"]["unused"]  # type: ignore[no-any-return]


def test_titan_float8_recipe_without_the_converter_is_named(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    unused = _titan_unused(cli, tmp_path, TITAN + "[float8]\nrecipe_name = 'rowwise'\n")
    # review21i: not "as it trains": torchtitan's docs/float8.md gives --model.converters on the command line
    assert unused == ["[float8] without [model] converters naming float8 (torchtitan converts no layer to "
                      "Float8Linear unless its command line gives --model.converters float8: priced without FP8; "
                      "if it did, give --precision fp8 --set training.fp8_recipe=rowwise)"], unused


def test_titan_default_float8_table_says_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # torchtitan's shipped configs carry the table with its switches off (tests/data/frameworks/torchtitan_llama3_8b)
    assert _titan_unused(cli, tmp_path, TITAN + "[float8]\nenable_fsdp_float8_all_gather = false\n"
                                                "filter_fqns = ['output']\n") == []


def test_params_of_a_reshaped_builtin_says_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    # a --set of the shape is a what-if: the built-in's published count no longer applies, by design
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt3-175b", "-n", "64", "--tp", "8", "--pp", "8",
                   "--set", "model.layers=48")
    assert not [w for w in doc["warnings"] if w.startswith("model.params ")], doc["warnings"]


def test_validate_warns_of_params_the_shape_does_not_give(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text(WL + "params: 7e9\n")
    doc = accepted(cli, "hardware", "validate", str(f))
    assert [w for w in doc["warnings"] if w.startswith("model.params 7e+09 is not the 1.663e+08 parameters")]
