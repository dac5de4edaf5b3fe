"""Hostile-input round 13: where a strategy field was written (an option, a ``--strategy`` file's own field, a
``--set`` item, a scenario or capacity file), and the inputs new since round 12.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import MEG_BASE, ROOT, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = MEG_BASE  # gpt-1.7b (dense: no experts) on 64 GPUs of dgx-h100
_EP = "ep 4 x etp 1 needs an MoE model; "  # round 19: a dense model is said so (was "whose 0 experts ep divides")


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


# --- the hybrid (Mamba-2) workload block and the NemotronH config reader --------------------------------------------

_NANO = ROOT / "examples" / "workloads" / "nemotron-3-nano.yaml"


def _nano(tmp_path, old: str, new: str):  # type: ignore[no-untyped-def]
    text = _NANO.read_text()
    assert old in text
    f = tmp_path / "m.yaml"
    f.write_text(text.replace(old, new))
    return f


@pytest.mark.parametrize("old, new, where, what", [
    ("groups: 8", "groups: 1000", "hybrid.mamba.groups", "heads 64 is not a multiple of groups 1000"),
    ("    head_dim: 64\n    heads: 64\n", "    head_dim: 77\n", "hybrid.mamba.head_dim",
     "expand x hidden = 5376 is not a multiple of head_dim 77"),
    ("layers: 52", "layers: 53", "hybrid.pattern", "has 52 layers, but layers is 53"),
    ("  shared_experts: 2\n", "  shared_experts: 2\n  every: 2\n", "moe.every", "set with a hybrid pattern"),
    ("pattern: M", "pattern: x", "hybrid.pattern", "unknown layer character(s) 'x'"),
])
def test_a_hybrid_refusal_names_its_field_and_line(cli, tmp_path, old: str, new: str, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """A Mamba-2 groups count that does not divide the heads was refused as "m.yaml:2: (top level): hybrid.mamba:
    heads 64 is not a multiple of groups 1000", at the file's first key; the layer-count mismatch and moe.every
    alike."""
    f = _nano(tmp_path, old, new)
    line = refused(cli, "predict", "-m", str(f), "-n", "64", "--json", inputs=(f,), match=f": {where}: {what}")
    assert "(top level)" not in line and not line.startswith(f"error: {f}:2:"), line


def test_a_hybrid_groups_refusal_points_at_the_groups_line(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _nano(tmp_path, "groups: 8", "groups: 1000")
    n = f.read_text().splitlines().index("    groups: 1000") + 1
    refused(cli, "predict", "-m", str(f), "-n", "64", match=f"error: {f}:{n}: hybrid.mamba.groups: ")


def _nemotron_h(tmp_path, **change):  # type: ignore[no-untyped-def]
    from test_mamba import NANO_HF
    cfg = {k: v for k, v in {**NANO_HF, **change}.items() if v is not _DROP}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    return f


_DROP = object()


@pytest.mark.parametrize("change, where, what", [
    ({"hybrid_override_pattern": _DROP, "layers_block_type": [["mamba"], "moe"]}, "layers_block_type",
     "layer kind(s) ['mamba'] not modelled"),
    ({"hybrid_override_pattern": _DROP, "layers_block_type": ["mamba", {"k": 1}]}, "layers_block_type",
     "layer kind(s) {'k': 1} not modelled"),
    ({"hybrid_override_pattern": _DROP, "layer_types": ["mamba", [1]]}, "layer_types",
     "layer kind(s) [1] not modelled"),
])
def test_a_layer_kind_that_is_a_list_is_refused(cli, tmp_path, change, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """A NemotronH layers_block_type holding a list or a mapping ended in a traceback (TypeError: unhashable type:
    'list'): the reader asked ``kind in HYBRID_KINDS``."""
    f = _nemotron_h(tmp_path, **change)
    refused(cli, "predict", "-m", str(f), "-n", "64", "--json", inputs=(f,), match=f"{f}: {where}: {what}")


@pytest.mark.parametrize("pattern, what", [("", "no layer"), ("|||", "no layer"), ("M" * 100_001, "100,001 entries"),
                                           ("MEx", "unknown layer character(s) 'x'")])
def test_a_bad_nemotron_h_pattern_names_the_config_key(cli, tmp_path, pattern: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """An empty or all-'|' hybrid_override_pattern was refused as "num_hidden_layers: 0 is out of range" (the file's
    num_hidden_layers said 52); a bad or over-long one at the workload's hybrid.pattern, a key the file has not."""
    f = _nemotron_h(tmp_path, hybrid_override_pattern=pattern)
    refused(cli, "predict", "-m", str(f), "-n", "64", inputs=(f,),
            match=f"error: {f}: hybrid_override_pattern: {what}")


def test_nemotron_h_mamba_groups_that_do_not_divide_the_heads_are_named_at_the_config_key(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _nemotron_h(tmp_path, mamba_num_heads=63)
    refused(cli, "predict", "-m", str(f), "-n", "64", inputs=(f,),
            match=f"error: {f}: n_groups: mamba_num_heads 63 is not a multiple of n_groups 8")


def test_the_nemotron_h_config_still_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _nemotron_h(tmp_path)
    assert accepted(cli, "predict", "-m", str(f), "-n", "64", "--seq-len", "8192")["inputs"]["model"]


# --- a JSON value refused without its key -------------------------------------------------------------------------

@pytest.mark.parametrize("value, what", [("9" * 40, "integer with 40 digits"), ("NaN", "NaN is not a number"),
                                         ("-Infinity", "-Infinity is not a number")])
def test_a_json_value_out_of_reach_is_named_at_its_key_and_line(cli, tmp_path, value: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """``"chunk_size": NaN`` (or a 40-digit integer) in a config.json was refused as "config.json: NaN is not a
    number": neither the key nor the line."""
    from test_mamba import NANO_HF
    f = tmp_path / "config.json"
    f.write_text(json.dumps(NANO_HF, indent=1).replace('"chunk_size": 128', f'"chunk_size": {value}'))
    n = f.read_text().splitlines().index(f' "chunk_size": {value},') + 1
    refused(cli, "predict", "-m", str(f), "-n", "64", inputs=(f,), match=f"error: {f}:{n}: chunk_size: {what}")


# --- strategy switches and words ----------------------------------------------------------------------------------

def test_the_flex_dispatcher_at_ep_1_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """moe_flex_dispatcher replaces the expert-parallel all-to-all; at ep 1 there is none, and the step time was the
    same without a word."""
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--tp", "8", "--sequence-parallel", "--ep", "1", "--set",
            "strategy.moe_flex_dispatcher=true", "--json")
    assert r.code == 0 and "strategy.moe_flex_dispatcher is not priced: ep is 1" in r.err, r.err
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--tp", "8", "--sequence-parallel", "--ep", "8", "--set",
            "strategy.moe_flex_dispatcher=true", "--json")
    assert r.code == 0 and "moe_flex_dispatcher" not in r.err, r.err


@pytest.mark.parametrize("value, what", [("[core_attn, moe_act]", "Input should be a valid string"),
                                         ("'Core Attn'", "String is not of the allowed form")])
def test_recompute_modules_out_of_form_names_the_modules(cli, tmp_path, value: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """recompute_modules as a YAML list was answered "a string matching ^([a-z_]+(,[a-z_]+)*)?$"."""
    f = tmp_path / "s.yaml"
    f.write_text(f"recompute: selective\nrecompute_modules: {value}\n")
    line = refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,),
                   match=f"strategy.recompute_modules: {what}")
    assert "regex" not in line and "^(" not in line
    assert line.endswith("module names, comma-separated in one string: core_attn, mla_up_proj, moe_act, moe, "
                         "layernorm, mlp, shared_experts, jax_dots, jax_qkvo, jax_qkv, jax_context or titan_op (e.g. "
                         "'core_attn,moe_act')")


# --- calibrate runs: a measurement's refusal says what was wrong -------------------------------------------------

_RUN = "- {cluster: dgx-h100, model: gpt-1.7b, gpus: 64, "


@pytest.mark.parametrize("measure, what", [
    ("tokens_per_s: '1e5'", "tokens_per_s: '1e5' is not a number; a number > 0 of tokens per second (the whole job), "
                            "not quoted"),
    ("tokens_per_s: 1e300", "tokens_per_s: 1e+300 tokens per second is beyond any training job; at most 1e12"),
    ("step_time: 1e300 s", "step_time: a step time of 1e+300 s is longer than any training step; a step time of at "
                           "most 1e+12 s"),
])
def test_a_run_measurement_out_of_reach_says_why(cli, tmp_path, measure: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """A quoted '1e5', or 1e300 s, was refused as "must be a positive finite number": each is positive and finite."""
    f = tmp_path / "runs.yaml"
    f.write_text(_RUN + measure + "}\n")
    refused(cli, "calibrate", "runs", str(f), "--json", inputs=(f,), match=f"{f}: run 1 (line 1): {what}")


def test_a_huge_logged_speed_is_shown_short(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A 5,000-digit iteration time in a Megatron log was echoed whole: a 5 KB error line."""
    log = tmp_path / "train.log"
    log.write_text("".join(f" iteration {i}/ 100 | elapsed time per iteration (ms): {'9' * 5000} |\n"
                           for i in range(1, 20)))
    f = tmp_path / "runs.yaml"
    f.write_text(_RUN + "log: train.log}\n")
    line = refused(cli, "calibrate", "runs", str(f), inputs=(f, log),
                   match="line 1: '" + "9" * 40 + "... (5000 characters)' is not a positive finite step_time_s")
    assert len(line) < 400


# --- the command line: long words, the option a file came from, a unit past the float range ----------------------

@pytest.mark.parametrize("argv, match", [
    (["schema", "x" * 5000], "invalid choice: '" + "x" * 60 + "...' (5000 characters)"),
    (["predict", "--tp", "9" * 5000], "argument --tp: '" + "9" * 60 + "...' (5000 characters) is not an integer"),
    (["predict", "y" * 5000], "Got unexpected extra argument(s) (" + "y" * 60 + "... (5000 characters))"),
    (["predict", "--" + "z" * 5000], "No such option: --" + "z" * 58 + "... (5002 characters)"),
])
def test_a_long_word_in_a_usage_error_is_shown_short(cli, argv: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """A 5,000-character argument was echoed whole in the usage error (5 KB on one line)."""
    line = refused(cli, *argv, match=match)
    assert len(line) < 400, len(line)


def test_a_samples_file_error_names_the_option(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--samples 1e300`` (a number where a file goes) said "error: 1e300: samples file not found"."""
    refused(cli, "stragglers", "-n", "8", "--samples", "1e300", "--json",
            match="error: --samples: 1e300: samples file not found; an existing samples file")
    f = tmp_path / "steps.txt"
    f.write_text("1.0\n-2\n")
    refused(cli, "stragglers", "-n", "8", "--samples", str(f), match=f"error: --samples: {f}: line 2: ")


def test_a_quantity_past_the_float_range_is_not_called_infinite(cli) -> None:  # type: ignore[no-untyped-def]
    """'1e300GB/s' was refused as "is not a finite number": 1e300 is finite; its unit takes it past the float range."""
    refused(cli, "predict", *BASE, "--set", "cluster.tiers.nvlink.bandwidth=1e300GB/s",
            match="--set cluster.tiers.nvlink.bandwidth: '1e300GB/s' is too large (beyond the float range)")


# --- sweep rows a reader cannot tell apart -----------------------------------------------------------------------

def _sweep_file(tmp_path, strategies: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [64]\n"
                 f"strategies: {strategies}\n")
    return f


@pytest.mark.parametrize("strategies, match", [
    ("[{label: best, tp: 2}, best]", "strategies[1]: best repeats strategies[0] (label 'best')"),
    ("[best, {label: best, tp: 2}]", "strategies[1]: label 'best' repeats strategies[0] (best)"),
    ("[{tp: 2}, {tp: 2, overlap: false}]", "strategies[1]: default name 'tp2' repeats strategies[0]"),
    ("[{tp: 2}, {label: tp2, pp: 2}]", "strategies[1]: label 'tp2' repeats strategies[0] (default name 'tp2')"),
    ("[]", "strategies: List should have at least 1 item"),
])
def test_sweep_strategies_that_print_as_one_are_refused(cli, tmp_path, strategies: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """A fixed strategy labelled best beside the planner's `best`, or two fixed strategies whose default names agree,
    ran and printed rows with the same strategy name; ``strategies: []`` ran no point and printed an empty table."""
    f = _sweep_file(tmp_path, strategies)
    refused(cli, "sweep", str(f), "-j", "1", "--json", inputs=(f,), match=match)


def test_sweep_strategies_with_distinct_names_still_run(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _sweep_file(tmp_path, "[best, {tp: 2}, {tp: 2, overlap: false, label: tp2-serial}]")
    rows = accepted(cli, "sweep", str(f), "-j", "1")["rows"]
    assert sorted(r["strategy"] for r in rows) == ["best", "tp2", "tp2-serial"]


# --- framework files: what a reader dropped or misnamed --------------------------------------------------------------

def test_a_flex_dispatcher_without_the_model_flags_is_read(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--moe-token-dispatcher-type flex`` in a launch that leaves the model to --model (no --num-experts in the file)
    was dropped without a word: the MoE model's all-to-alls were priced as NCCL's."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 8 --moe-token-dispatcher-type flex\n")
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["strategy"]["moe_flex_dispatcher"] is True


@pytest.mark.parametrize("value, shown", [("FLEX", "'FLEX'"), ("deepep", "'deepep'"), ("", "no value")])
def test_an_unknown_token_dispatcher_is_refused(cli, tmp_path, value: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    """Megatron's argparse refuses any dispatcher but its choices; 'FLEX' here was dropped without a word."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --num-experts 8 --moe-token-dispatcher-type {value} "
                 "--expert-model-parallel-size 8\n")
    refused(cli, "predict", "-m", "mixtral-8x7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"{f}: --moe-token-dispatcher-type: unknown token dispatcher: {shown}; allgather, alltoall, "
                  "alltoall_seq, flex")


@pytest.mark.parametrize("text, where", [('{"tensor_parallel": [2]}', "tensor_parallel"),
                                         ('{"optimizer": [1]}', "optimizer"),
                                         ('{"activation_checkpointing": [1, 2]}', "activation_checkpointing"),
                                         ('{"zero_optimization": {"stage": 3, "offload_param": [1]}}',
                                          "zero_optimization.offload_param")])
def test_a_deepspeed_section_that_is_not_a_mapping_is_refused(cli, tmp_path, text: str, where: str) -> None:  # type: ignore[no-untyped-def]
    """``"tensor_parallel": [2]`` (DeepSpeed reads a mapping) was dropped without a word: tp stayed 1."""
    f = tmp_path / "ds.json"
    f.write_text(text)
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,), match=f"{f}: {where}: expected a mapping")


def test_a_json_strategy_file_is_read_as_json(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A .json strategy file that opens with '[' was read as YAML: "malformed YAML: exceeded maximum nesting depth"."""
    f = tmp_path / "ds.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,), match=f"{f}: JSON nesting is too deep")
    f.write_text("[1, 2]")
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,), match=f"{f}: expected a JSON object")


# --- a spec named inside another: where its own reading failed ----------------------------------------------------

def test_a_referenced_accelerator_that_extends_a_folder_names_the_chain(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An accelerator file named by ``--set cluster.accelerator=`` (or a cluster's ``accelerator:``) whose
    ``extends:`` is a folder was refused as "--set cluster.accelerator: is a directory, not a regular file": which
    file extends what was lost."""
    acc = tmp_path / "acc.yaml"
    acc.write_text(f"kind: accelerator\nname: x\nextends: {tmp_path}\n")
    refused(cli, "predict", "-c", "dgx-b300", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={acc}",
            inputs=(acc,), match=f"error: --set cluster.accelerator: {acc}: extends: {tmp_path}: is a directory, not a "
                                 "regular file")
    cl = tmp_path / "cl.yaml"
    cl.write_text(f"kind: cluster\nname: c\nextends: dgx-b300\naccelerator: {acc}\n")
    refused(cli, "predict", "-c", str(cl), "-m", "gpt-1.7b", "-n", "8", inputs=(acc, cl),
            match=f"accelerator: {acc}: extends: {tmp_path}: is a directory")


def test_an_unknown_accelerator_name_is_still_one_clause(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-b300", "-m", "gpt-1.7b", "-n", "8", "--set", "cluster.accelerator=bogus",
            match="error: --set cluster.accelerator: unknown built-in accelerator 'bogus'; ")


# --- plan: the --strategy file's pins named as the file's -------------------------------------------------------------

def test_a_strategy_file_sync_outside_the_searched_modes_names_the_file(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``plan --strategy s.yaml`` with ``sync: hier:2`` said "--constraint sync: the sync constraint leaves none of
    the searched sync modes (bsp)": no --constraint was given; the pin was the file's."""
    f = tmp_path / "s.yaml"
    f.write_text("sync: 'hier:2'\n")
    refused(cli, "plan", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"error: --strategy: {f}: sync: sync hier:2 is not among the searched sync modes (bsp); "
                  "--sync-modes bsp,hier:2")
    r = cli("plan", *BASE, "--strategy", str(f), "--sync-modes", "bsp,hier:2", "--top", "1", "--json")
    assert r.code == 0, r.err
    assert {e["strategy"]["sync"] for e in json.loads(r.out)["ranked"]} == {"hier:2"}


def test_a_constraint_on_sync_still_names_the_constraint(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *BASE, "--constraint", "sync=hier:2", "--json",
            match="error: --constraint sync: the sync constraint leaves none of the searched sync modes (bsp)")


# --- a spec refusal of a strategy or training field names its option ------------------------------------------------

@pytest.mark.parametrize("argv, where", [
    (["--zero", "bogus"], "--zero: unknown ZeRO stage 'bogus'"),
    (["--schedule", "interleaved:1"], "--schedule: schedule 'interleaved:1' needs V >= 2"),
    (["--algo", "x"], "--algo: unknown collective algorithm 'x'"),
    (["--precision", "x"], "--precision: unknown precision 'x'"),
    (["--set", "strategy.tp=0"], "--set strategy.tp: Input should be greater than 0"),
    (["--set", "training.seq_len=0"], "--set training.seq_len: Input should be greater than 0"),
    (["--set", "strategy.recompute_modules=core_attn"],
     "--set strategy.recompute_modules: 'core_attn' needs recompute"),
])
@pytest.mark.parametrize("command", ["predict", "memory", "scale"])
def test_a_refused_option_is_named_as_the_option(cli, command: str, argv: list[str], where: str) -> None:  # type: ignore[no-untyped-def]
    """``--zero bogus`` was refused as "strategy.zero: unknown ZeRO stage", a name the command line does not have
    (and ``--set strategy.tp=0`` as "strategy.tp", where a --set cluster item is "--set cluster....")."""
    if command == "memory" and argv[0] == "--algo":
        pytest.skip("memory has no --algo")
    refused(cli, command, "-m", "gpt-1.7b", "-n", "64", *argv, "--json", match=f"error: {where}")


def test_a_file_field_refused_with_an_option_names_the_field(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """recompute_layers from a file with the default recompute: "strategy: recompute_layers=2 needs recompute: full"
    named the whole strategy. interidle39: refused by the command's validation (plan searches recompute for it), which
    names a top-level field as the file writes it, as a zero-needing switch's (the file's read said strategy.X)."""
    f = tmp_path / "s.yaml"
    f.write_text("recompute_layers: 2\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: recompute_layers: recompute_layers=2 needs recompute: full")
