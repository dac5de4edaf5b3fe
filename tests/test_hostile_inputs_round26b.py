"""Hostile-input round 26b: what merged on the morning of round 26: the strategy field bucket_fragments (scale26),
the accelerator field collective_units_nvls (mlpt26, review26b), tidy26's refusal of a field given by a flag and by
--set, the capped known-keys list in unknown-key errors (tiers and accelerator inside clusters, training inside
scenarios), fp8_attention on every recipe and accelerator family (fp4_26 / review26a: zero, negative, NaN and inf
sequence lengths, cp above the sequence, head dims 1 and 4096) and calibrate / check / sensitivity files using them.

A corpus of 450 cases run one process per case (timeout and memory cap, sequentially on one core, under /tmp): no
traceback, hang or invalid JSON; the finding kept here is a cluster file's accelerator mapping. The CLI contract is
test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

# --- a cluster file's accelerator: some fields of the one it extends ---
# A cluster extending dgx-h100 with `accelerator: {collective_units_nvls: 8}` replaced h100-sxm by that one field, was
# refused as "accelerator.name: missing required field; add it" (adding it then asks for every field of an
# accelerator); `accelerator: {extends: h100-sxm, ...}`, which a scenario's cluster takes, was "unknown key 'extends'".

def _cluster(tmp_path: Path, accelerator: str) -> Path:
    f = tmp_path / "cl.yaml"
    f.write_text(f"kind: cluster\nextends: dgx-h100\nname: x\naccelerator:\n{accelerator}")
    return f


def test_a_partial_accelerator_in_a_cluster_file_says_how_to_extend(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _cluster(tmp_path, "  collective_units_nvls: 8\n")
    refused(cli, "predict", "-c", str(f), "-m", "llama3-8b", "-n", "16",
            match=f"error: {f}: accelerator: a mapping without name or extends replaces the accelerator 'h100-sxm' of "
                  "'dgx-h100' whole, not some of its fields; accelerator: {extends: h100-sxm, ...}")


def test_an_accelerator_extending_another_in_a_cluster_file_is_the_set_one(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _cluster(tmp_path, "  extends: h100-sxm\n  collective_units_nvls: 8\n")
    tiers = ["--set", "cluster.tiers.0.in_network_reduction=true"]  # NVLS on: the NVLS count is what runs
    from_file = accepted(cli, "predict", "-c", str(f), "-m", "llama3-8b", "-n", "16", *tiers)
    by_set = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", *tiers,
                      "--set", "cluster.accelerator.collective_units_nvls=8")
    builtin = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", *tiers)
    assert from_file["step_time_s"] == by_set["step_time_s"] != builtin["step_time_s"]


def test_an_accelerator_extension_in_a_cluster_file_is_checked(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _cluster(tmp_path, "  extends: h100-sxm\n  collective_units: 0\n")
    refused(cli, "predict", "-c", str(f), "-m", "llama3-8b", "-n", "16",
            match="collective_units_nvls: 16 without collective_units")


# --- a training field under strategy, a strategy field under training ---
# With the known keys capped at 12 (tidy26), `--set training.recompute=none` said "unknown key 'recompute'; known keys:
# global_batch, ..." and nothing of strategy.recompute; `--set strategy.fp8_attention` offered 'flash_attention'.

@pytest.mark.parametrize("item, said", [
    ("training.recompute=none", "recompute is a strategy field (strategy.recompute); known keys: global_batch"),
    ("training.tp=2", "unknown key 'tp'; tp is a strategy field (strategy.tp)"),
    ("strategy.micro_batch=2", "unknown key 'micro_batch'; micro_batch is a training field (training.micro_batch)"),
    ("strategy.fp8_attention=true", "fp8_attention is a training field (training.fp8_attention)"),
])
def test_a_field_of_the_other_section_names_it(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--set", item, match=said)


def test_a_scenario_training_field_of_the_strategy_names_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: x\ncluster: dgx-h100\nmodel: llama3-8b\ngpus: [16]\ntraining:\n  tp: 2\n"
                 "assertions:\n  max_step_time: 100s\n")
    refused(cli, "check", str(f), match=f"{f}:7: training.tp: unknown key 'tp'; tp is a strategy field (strategy.tp)")


def test_an_unknown_key_of_neither_section_still_lists_the_keys(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--set", "training.nonsense=1",
            match="unknown key 'nonsense'; known keys: global_batch, micro_batch")
