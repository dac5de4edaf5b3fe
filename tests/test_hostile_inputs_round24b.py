"""Hostile-input round 24b: the input-handling defects that round 24's pass (tests/test_hostile_inputs_round24.py) and
review24b left open. Each case runs in-process through the shared helpers of test_hostile_inputs.py (the CLI
contract: one ``error: <where>: <what>; <allowed>`` line, exit 2, the input file untouched).
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)
from test_hostile_inputs_round21 import TITAN, _titan_unused

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
