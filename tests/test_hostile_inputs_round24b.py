"""Hostile-input round 24b: the input-handling defects that round 24's pass (tests/test_hostile_inputs_round24.py) and
review24b left open. Each case runs in-process through the shared helpers of test_hostile_inputs.py (the CLI
contract: one ``error: <where>: <what>; <allowed>`` line, exit 2, the input file untouched).
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)
from test_hostile_inputs_round21 import TITAN, _titan_unused

import scalemodel
from scalemodel.errors import InputError

# --- the memory-reserve refusal says the memory as given ------------------------------------------------------------
# --set accelerator.memory=1.5B was said as "not less than memory 2 B" (the value printed with .0f); 1.5 B is what
# was given and what the check compared.

@pytest.mark.parametrize("item, said", [("accelerator.memory=1.5B", "memory 1.5 B; "),
                                        ("accelerator.memory=0.25KB", "memory 250 B; "),
                                        ("accelerator.memory=100MB", "memory 100000000 B; ")])
def test_memory_below_the_reserve_is_said_as_given(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--set", item)
    assert "accelerator.memory_reserved: 475332608 B is not less than " + said in line, line


# --- Megatron-LM choice flags the reader passed over ------------------------------------------------------------------
# --transformer-impl and --data-parallel-sharding-strategy were read as harmless whatever they said; Megatron-LM's
# argparse refuses a value outside their choices (NVIDIA/Megatron-LM@d98e8a64dd: TransformerConfig.transformer_impl
# Literal['local', 'transformer_engine', 'inference_optimized'], transformer_config.py L1314; arguments.py L3190-3192
# choices=['no_shard', 'optim', 'optim_grads', 'optim_grads_params']) and a flag without its value.

@pytest.mark.parametrize("flags, said", [
    ("--transformer-impl x", "--transformer-impl: unknown transformer implementation: 'x'; local, transformer_engine "
                             "or inference_optimized (Megatron-LM's choices)"),
    ("--transformer-impl", "--transformer-impl: unknown transformer implementation: no value; local, "),
    ("--transformer-impl --sequence-parallel", "--transformer-impl: unknown transformer implementation: no value; "),
    ("--transformer-impl=te", "--transformer-impl: unknown transformer implementation: 'te'; "),
    ("--data-parallel-sharding-strategy x", "--data-parallel-sharding-strategy: unknown sharding strategy: 'x'; "
                                            "no_shard, optim, optim_grads or optim_grads_params (Megatron-LM's "
                                            "choices)"),
    ("--data-parallel-sharding-strategy", "--data-parallel-sharding-strategy: unknown sharding strategy: no value; "),
], ids=["impl", "impl-none", "impl-flag", "impl-eq", "sharding", "sharding-none"])
def test_megatron_choice_flag_outside_its_choices_is_refused(cli, tmp_path, flags: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *MEG_BASE, "--strategy", str(f), inputs=(f,), match=said)


@pytest.mark.parametrize("flags", ["--transformer-impl local", "--transformer-impl transformer_engine",
                                   "--transformer-impl=inference_optimized",
                                   "--data-parallel-sharding-strategy no_shard",
                                   "--data-parallel-sharding-strategy optim_grads_params"])
def test_megatron_choice_flag_within_its_choices_still_reads(cli, tmp_path, flags: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    doc = accepted(cli, "predict", *MEG_BASE, "--strategy", str(f))
    assert doc["inputs"]["strategy_file"]["unused"] == [], doc["inputs"]["strategy_file"]["unused"]


# --- a torchtitan TOML's keys outside torchtitan's JobConfig sections -----------------------------------------------
# "include = 'base.toml'" and an unknown [section] were passed over without a word, where an unknown key in
# [parallelism] or [activation_checkpoint] is said not used. torchtitan's ConfigManager raises "Invalid field names"
# on a top-level key its JobConfig does not have (pytorch/torchtitan@9810191bb^ torchtitan/config/manager.py
# L160-171) unless a custom_args_module adds the section.

CUSTOM = "(not a torchtitan JobConfig section: torchtitan refuses it unless experimental.custom_args_module adds it)"


@pytest.mark.parametrize("extra, said", [
    ("include = 'base.toml'\n", [f"include = base.toml {CUSTOM}"]),
    ("[bogus]\nx = 1\n", [f"[bogus] {CUSTOM}"]),
    ("[training.extra]\nx = 1\n[bogus]\n", [f"[bogus] {CUSTOM}"]),
    ("[job]\ndump_folder = 'out'\n[metrics]\nlog_freq = 10\n[optimizer]\nname = 'AdamW'\n[checkpoint]\n"
     "enable_checkpoint = false\n[comm]\ntrace_buf_size = 0\n", []),
], ids=["include", "section", "empty-section", "known-sections"])
def test_titan_keys_outside_its_sections_are_said_not_used(cli, tmp_path, extra: str, said: list[str]) -> None:  # type: ignore[no-untyped-def]
    # a top-level key must come before the first table in TOML; a table after the others
    text = extra + TITAN if not extra.startswith("[") else TITAN + extra
    assert _titan_unused(cli, tmp_path, text) == said


# --- uniform full recompute of N != 1 layers on a model with multi-token prediction --------------------------------
# Megatron-Core checkpoints an MTP module under recompute_method 'uniform' only after asserting recompute_num_layers
# == 1 ("recompute_num_layers must be 1 for MTP recompute": MultiTokenPredictionLayer._checkpointed_forward,
# NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/multi_token_prediction.py L1621-1627); such a launch stops
# at its first step, and was priced. deepseek-v3 has one MTP module (num_nextn_predict_layers 1).

MTP = ["-c", "dgx-h100", "-m", "deepseek-v3", "-n", "1024", "--tp", "8", "--pp", "8", "--ep", "16"]
UNIFORM = ["--set", "strategy.recompute=full", "--set", "strategy.recompute_method=uniform"]
MTP_SAID = ("recompute_layers 2 with recompute_method uniform on a model with 1 multi-token prediction layer(s): "
            "Megatron-Core asserts recompute_num_layers == 1 for MTP recompute (NVIDIA/Megatron-LM@d98e8a64dd "
            "megatron/core/transformer/multi_token_prediction.py L1621-1627); recompute_layers 1 with recompute_method "
            "uniform, or recompute_method block")


@pytest.mark.parametrize("command", [["predict", *MTP], ["memory", *MTP], ["plan", *MTP[:6]],
                                     ["scale", *MTP[:4], "-n", "1024,2048", *MTP[6:]],
                                     ["scale", *MTP[:4], "-n", "512,1024", "--best"]],
                         ids=["predict", "memory", "plan", "scale", "scale-best"])
def test_mtp_with_uniform_recompute_of_more_than_one_layer_is_refused(cli, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *command, *UNIFORM, "--set", "strategy.recompute_layers=2",
            match="error: --set strategy.recompute_layers: " + MTP_SAID)


def test_mtp_uniform_recompute_from_a_megatron_launch_names_the_flag(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 "
                 "--expert-model-parallel-size 16 --micro-batch-size 1 --bf16 --recompute-granularity full "
                 "--recompute-method uniform --recompute-num-layers 2\n")
    refused(cli, "predict", *MTP[:6], "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --recompute-num-layers: " + MTP_SAID)


def test_api_mtp_with_uniform_recompute_of_more_than_one_layer_is_refused() -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.predict("dgx-h100", "deepseek-v3", 1024, strategy={
            "tp": 8, "pp": 8, "ep": 16, "recompute": "full", "recompute_method": "uniform", "recompute_layers": 4})
    assert "Megatron-Core asserts recompute_num_layers == 1 for MTP recompute" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("model, settings", [
    ("deepseek-v3", ["--set", "strategy.recompute_layers=1"]),  # the one count Megatron-Core takes
    ("deepseek-v3", ["--set", "strategy.recompute_method=block", "--set", "strategy.recompute_layers=2"]),
    ("deepseek-v3", []),  # uniform without a count: every layer
], ids=["uniform-1", "block-2", "uniform-all"])
def test_mtp_recompute_megatron_runs_still_prices(cli, model: str, settings: list[str]) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "memory", *MTP, *UNIFORM, *settings)
    assert doc["inputs"]["model"] == model


def test_uniform_recompute_of_more_than_one_layer_without_mtp_still_runs(cli) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--tp", "8", *UNIFORM,
                   "--set", "strategy.recompute_layers=2")
    assert doc["step_time_s"] > 0


# --- an fp8 recipe given by an alias ----------------------------------------------------------------------------------
# --set training.fp8_recipe=current was echoed as 'tensorwise' without a word of why. The echo stays the recipe's name
# (one spelling per recipe in --json, as precision nvfp4 is echoed fp4), and the aliases are now said where the
# recipes are listed: the refusal of an unknown recipe, the field's schema description and README.

FP8 = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--precision", "fp8"]


def test_unknown_fp8_recipe_lists_the_aliases_and_the_echo(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *FP8, "--set", "training.fp8_recipe=foo",
            match="error: --set training.fp8_recipe: unknown fp8 recipe 'foo'; use delayed, tensorwise (aliases "
                  "current, fp8-cs, fp8_cs), mxfp8 (aliases fp8-mx, fp8_mx), rowwise, rowwise_with_gw_hp or blockwise; "
                  "an alias is echoed as its recipe's name")


@pytest.mark.parametrize("alias, cluster, recipe", [("current", "dgx-h100", "tensorwise"),
                                                    ("FP8-CS", "dgx-h100", "tensorwise"),
                                                    ("fp8_cs", "dgx-h100", "tensorwise"),
                                                    ("fp8-mx", "dgx-b200", "mxfp8")])
def test_an_fp8_recipe_alias_is_echoed_and_priced_as_its_recipe(cli, alias: str, cluster: str, recipe: str) -> None:  # type: ignore[no-untyped-def]
    run = ["predict", "-c", cluster, *FP8[2:]]
    by_alias = accepted(cli, *run, "--set", f"training.fp8_recipe={alias}")
    by_name = accepted(cli, *run, "--set", f"training.fp8_recipe={recipe}")
    assert by_alias["inputs"]["training"]["fp8_recipe"] == recipe
    assert by_alias["step_time_s"] == by_name["step_time_s"]
    assert f"training.fp8_recipe={alias}" in str(by_alias["inputs"])  # the --set as given stays in the echo


def test_the_schema_says_the_fp8_recipe_aliases(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("schema", "scenario")
    assert r.code == 0, r.err
    assert "aliases current, fp8-cs, fp8_cs, echoed as tensorwise" in r.out and "aliases fp8-mx, fp8_mx" in r.out
