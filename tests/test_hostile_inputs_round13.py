"""Hostile-input round 13: where a strategy field was written (an option, a ``--strategy`` file's own field, a
``--set`` item, a scenario or capacity file), and the inputs new since round 12.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import MEG_BASE, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = MEG_BASE  # gpt-1.7b (dense: no experts) on 64 GPUs of dgx-h100
_EP = "ep 4 x etp 1 needs an MoE model whose 0 experts ep divides"


# --- a strategy field is named where it was written ----------------------------------------------------------------

@pytest.mark.parametrize("name, text, field", [
    ("s.yaml", "ep: 4\n", "ep"),
    ("s.yaml", "strategy: {ep: 4}\n", "strategy.ep"),
    ("run.sh", "torchrun pretrain_gpt.py --expert-model-parallel-size 4\n", "--expert-model-parallel-size"),
    ("job.toml", "[parallelism]\nexpert_parallel_degree = 4\n", "parallelism.expert_parallel_degree"),
])
def test_an_ep_from_a_strategy_file_names_the_file_field(cli, tmp_path, name: str, text: str, field: str) -> None:  # type: ignore[no-untyped-def]
    """An expert-parallel degree that a --strategy file set was refused as "--ep: --ep 4 x etp 1 needs ...": an
    option the user never gave, the file unnamed."""
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
                   match=f"error: --strategy: {f}: {field}: {_EP}")
    assert "--ep" not in line


@pytest.mark.parametrize("command", [["predict", *BASE], ["sensitivity", *BASE],
                                     ["memory", "-m", "gpt-1.7b", "-n", "64"], ["scale", "-m", "gpt-1.7b", "-n", "64"]])
def test_every_command_names_the_strategy_file_field(cli, tmp_path, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 4\n")
    refused(cli, *command, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --expert-model-parallel-size: {_EP}")


def test_the_option_over_a_strategy_file_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("ep: 2\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), "--ep", "4", match=f"error: --ep: {_EP}")


def test_a_set_item_over_a_strategy_file_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("ep: 2\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), "--set", "strategy.ep=4",
            match=f"error: --set strategy.ep: {_EP}")
    refused(cli, "predict", *BASE, "--set", "strategy.ep=4", match=f"error: --set strategy.ep: {_EP}")
    refused(cli, "predict", *BASE, "--tp", "2", "--set", "strategy.dp=3",
            match="error: --set strategy.dp: dp x tp x pp x cp = 6 but --gpus is 64; dp = gpus / (tp pp cp), or leave "
                  "--set strategy.dp out to derive it")


@pytest.mark.parametrize("name, text, field", [
    ("run.sh", "torchrun pretrain_gpt.py --tensor-model-parallel-size 3\n", "--tensor-model-parallel-size"),
    ("ds.json", '{"tensor_parallel": {"autotp_size": 3}}', "tensor_parallel.autotp_size"),
    ("job.toml", "[parallelism]\ntensor_parallel_degree = 3\n", "parallelism.tensor_parallel_degree"),
    ("s.yaml", "tp: 3\n", "tp"),
])
def test_a_degree_that_does_not_divide_the_gpus_names_the_file_field(cli, tmp_path, name: str, text: str,  # type: ignore[no-untyped-def]
                                                                      field: str) -> None:
    """"64 GPUs is not a multiple of ... 3; a multiple of 3, or change --tp/--pp/--cp" when the file set tp."""
    f = tmp_path / name
    f.write_text(text)
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,),
            match=f"error: --gpus: 64 GPUs is not a multiple of tp x pp x cp = 3 x 1 x 1 = 3; a multiple of 3, or "
                  f"change --strategy: {f}: {field}")


@pytest.mark.parametrize("text, field, what", [
    ("sync: 'hier:3'\n", "sync", "hier group size 3 does not divide dp = 64"),
    ("zero: hsdp\nshard_group: 3\n", "shard_group", "zero hsdp shard_group = 3 does not divide dp = 64"),
    ("first_chunk_layers: 2\n", "first_chunk_layers", "first_chunk_layers is set but the schedule is 1f1b"),
])
def test_other_strategy_file_fields_are_named(cli, tmp_path, text: str, field: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """hier:3 from a file was refused as "--sync: ...", a shard group as "strategy.shard_group: ..." (no file)."""
    f = tmp_path / "s.yaml"
    f.write_text(text)
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,), match=f"error: --strategy: {f}: {field}: {what}")


def test_a_torchtitan_shard_degree_is_named_as_the_shard_group(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"  # replicate 2 x shard 3 on 6 GPUs under hier:3 (3 replicas a group, not 3)
    f.write_text("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 3\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "6", "--strategy", str(f), "--sync", "hier:2",
            inputs=(f,),
            match=f"error: --strategy: {f}: parallelism.data_parallel_shard_degree: zero hsdp under hier:2")


def test_a_scenario_strategy_field_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sc.yaml"
    f.write_text("kind: scenario\nname: sc\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16, 32]\n"
                 "training: {micro_batch: 1}\nstrategy: {ep: 4}\n")
    refused(cli, "scale", "--scenario", str(f), inputs=(f,), match=f"error: --scenario: {f}: strategy.ep: ep 4 x etp 1")
    refused(cli, "scale", "--scenario", str(f), "--ep", "2", match="error: --ep: ep 2 x etp 1")


def test_a_capacity_file_strategy_field_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``scalemodel check`` said "--ep: --ep 4 ..." for the capacity file's strategy.ep."""
    f = tmp_path / "cap.yaml"
    f.write_text("kind: scenario\nname: sc\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16, 32]\n"
                 "training: {micro_batch: 1}\nstrategy: {ep: 4}\nassertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(f), "--json", inputs=(f,), match=f"error: {f}: strategy.ep: ep 4 x etp 1")
    refused(cli, "check", str(f), "--set", "strategy.ep=2", match="error: --set strategy.ep: ep 2 x etp 1")


def test_options_alone_still_name_the_options(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *BASE, "--ep", "4", match=f"error: --ep: --{_EP}")
    refused(cli, "predict", *BASE, "--tp", "3", match="or change --tp/--pp/--cp")


def test_a_strategy_file_that_fits_still_prices(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --expert-model-parallel-size 1\n")
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["tp"] == 2
