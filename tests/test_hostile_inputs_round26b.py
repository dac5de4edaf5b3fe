"""Hostile-input round 26b: what merged on the morning of round 26: the strategy field bucket_fragments (scale26),
the accelerator field collective_units_nvls (mlpt26, review26b), tidy26's refusal of a field given by a flag and by
--set, the capped known-keys list in unknown-key errors, fp8_attention on every recipe and accelerator family
(fp4_26 / review26a) and calibrate / check / sensitivity files using them.

Each case is one finding of a corpus of 450 cases run one process per case (timeout and memory cap, sequentially on
one core, under /tmp); the CLI contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

BASE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]


# --- bucket_fragments where nothing prices it ---
# engine/dp_comm.py cuts tensors in the DDP / ZeRO-1/2 buckets only (_whole_tensors); ZeRO-3's reduce-scatters count
# whole tensors (_sharded_parameter_traffic) and FSDP / HSDP reduce one unit at a time, so at zero 3 / fsdp the field
# moved no price and said nothing (llama3-8b on 64 H100, 1 MiB buckets: 0.8107 s either way at zero 3, while zero 1
# goes from 0.849 to 6.25 s).

@pytest.mark.parametrize("zero", ["3", "fsdp", "hsdp"])
def test_bucket_fragments_under_sharded_parameters_is_said_unpriced(cli, zero: str) -> None:  # type: ignore[no-untyped-def]
    args = [*BASE, "--zero", zero, "--set", "strategy.bucket_size=1MiB"]
    if zero == "hsdp":
        args += ["--set", "strategy.shard_group=8"]
    on = accepted(cli, "predict", *args, "--set", "strategy.bucket_fragments=true")
    off = accepted(cli, "predict", *args)
    assert on["step_time_s"] == off["step_time_s"]  # the premise: nothing prices it there
    said = [w for w in on["warnings"] if "bucket_fragments" in str(w)]
    assert len(said) == 1 and "is not priced" in str(said[0]), on["warnings"]
    assert not [w for w in off["warnings"] if "bucket_fragments" in str(w)]


@pytest.mark.parametrize("zero", ["0", "1", "2"])
def test_bucket_fragments_where_it_is_priced_draws_no_warning(cli, zero: str) -> None:  # type: ignore[no-untyped-def]
    args = [*BASE, "--zero", zero, "--set", "strategy.bucket_size=1MiB"]
    on = accepted(cli, "predict", *args, "--set", "strategy.bucket_fragments=true")
    off = accepted(cli, "predict", *args)
    assert on["step_time_s"] > off["step_time_s"]  # ceil(X / S) buckets, more than the whole tensors' count
    assert not [w for w in on["warnings"] if "bucket_fragments" in str(w)]


# --- one field written by two --set items ---
# tidy26 refuses `--tp 4 --set strategy.tp=8` (neither is documented to win), and a key given twice in a YAML file is
# refused, but `--set strategy.tp=8 --set strategy.tp=4` priced tp 4 without a word; tiers.0 and tiers.nvlink (one tier
# by index and by name) likewise.

@pytest.mark.parametrize("command", ["predict", "memory", "sensitivity", "plan"])
def test_a_field_set_twice_is_refused(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, command, *BASE, "--set", "training.micro_batch=1", "--set", "training.micro_batch=2",
            match="error: --set training.micro_batch: --set training.micro_batch=1 and --set training.micro_batch=2 "
                  "both set one field; one --set of a field")


def test_one_tier_set_by_index_and_by_name_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *BASE, "--set", "cluster.tiers.0.latency=1us", "--set", "cluster.tiers.nvlink.latency=2us",
            match="--set cluster.tiers.0.latency=1us and --set cluster.tiers.nvlink.latency=2us both set one field")


def test_a_scenario_field_set_twice_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: x\ncluster: dgx-h100\nmodel: llama3-8b\ngpus: [16]\n"
                 "assertions:\n  max_step_time: 100s\n")
    refused(cli, "check", str(f), "--set", "strategy.tp=4", "--set", "strategy.tp=2",
            match="--set strategy.tp=4 and --set strategy.tp=2 both set one field")


def test_different_fields_set_together_still_run(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, "--set", "strategy.tp=2", "--set", "strategy.pp=2")
    assert out["inputs"]["strategy"]["tp"] == 2 and out["inputs"]["strategy"]["pp"] == 2


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
