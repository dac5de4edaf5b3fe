"""Hostile-input round 14: the newest strategy and workload fields (cp_comm_type / cp_a2a_size, hybrid.mtp_pattern),
the framework readers' detection and Megatron's hierarchical context parallelism, ``--set`` on the commands that read
only a cluster or a single spec, and output paths.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import LOG, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

B200 = ["-c", "dgx-b200", "-n", "64"]


# --- --set items a command does not read ----------------------------------------------------------------------------

@pytest.mark.parametrize("item", ["model.layers=4", "training.micro_batch=0", "strategy.tp=2", "workload.hidden=8"])
def test_collective_refuses_a_set_item_it_does_not_read(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    """``collective --set model.layers=4`` (even ``training.micro_batch=0``) ran and dropped the item without a word:
    the command reads only the cluster."""
    shown = item.split("=")[0]
    refused(cli, "collective", "-c", "dgx-h100", "-n", "8", "--set", item, "--json",
            match=f"error: --set {shown}: collective reads only the cluster; a ")


def test_calibrate_nccl_refuses_a_set_item_it_does_not_read(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "calibrate", str(LOG), "-c", "dgx-h100", "--set", "strategy.tp=2", "--json", inputs=(LOG,),
            match="error: --set strategy.tp: calibrate nccl-tests reads only the cluster; a strategy field is not used")


def test_collective_still_takes_cluster_and_accelerator_items(cli) -> None:  # type: ignore[no-untyped-def]
    base = accepted(cli, "collective", "-c", "dgx-h100", "-n", "16", "--size", "1GiB")
    slow = accepted(cli, "collective", "-c", "dgx-h100", "-n", "16", "--size", "1GiB", "--set",
                    "cluster.tiers.ib-leaf.bandwidth=25GB/s")
    assert slow != base
    text = " ".join(cli("collective", "--help").out.split())
    assert "roots: cluster, accelerator)" in text and "model.layers" not in text


@pytest.mark.parametrize("name, item, key, value", [
    ("dgx-h100", "cluster.max_gpus=8", "max_gpus", 8),
    ("h100-sxm", "accelerator.memory=40GB", "memory", 40e9),
    ("nemotron-3-super", "model.mtp_layers=1", "mtp_layers", 1),
    ("gpt-1.7b", "workload.layers=12", "layers", 12),
])
def test_hardware_show_takes_the_root_its_help_names(cli, name: str, item: str, key: str, value: object) -> None:  # type: ignore[no-untyped-def]
    """``hardware show dgx-h100 --set cluster.max_gpus=8`` was refused as "cluster: unknown key 'cluster'" though the
    option's help said "roots: cluster, accelerator, model, training, strategy"."""
    out = accepted(cli, "hardware", "show", name, "--set", item)
    assert out["spec"][key] == value


def test_hardware_set_errors_name_the_path_as_written(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "hardware", "show", "dgx-h100", "--set", "cluster.max_gpus=0",
            match="error: --set cluster.max_gpus: Input should be greater than 0")
    refused(cli, "hardware", "show", "dgx-h100", "--set", "max_gpus=0", match="error: --set max_gpus: ")


# --- a YAML strategy file is read as YAML ---------------------------------------------------------------------------

@pytest.mark.parametrize("text", ['{"strategy": {"tp": 2}}', "{strategy: {tp: 2}}", '{"tp": 2}'])
@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_yaml_strategy_in_flow_style_is_read_as_yaml(cli, tmp_path, text: str, suffix: str) -> None:  # type: ignore[no-untyped-def]
    """A strategy YAML that opens with "{" was read as a DeepSpeed config: YAML flow style was refused as malformed
    JSON, and JSON syntax had every key "not used" (tp stayed 1). DeepSpeed reads JSON only."""
    f = tmp_path / f"s{suffix}"
    f.write_text(text + "\n")
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["strategy"]["tp"] == 2 and out["inputs"]["strategy_file"]["format"] == "scalemodel"
    assert "not used" not in r.err


def test_a_deepspeed_json_is_still_deepspeed(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ds"
    f.write_text('{"tensor_parallel": {"autotp_size": 2}}')
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy",
                    str(f))["inputs"]["strategy_file"]["format"] == "deepspeed"


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_deepspeed_json_named_yaml_is_still_deepspeed(cli, tmp_path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    """DeepSpeedConfig hjson-loads any path whatever its suffix (deepspeed/runtime/config.py), so a ds_config.yaml in
    JSON is a config DeepSpeed runs: it was read as a scalemodel strategy, ZeRO and the micro-batch 'not used'
    (zero 0, micro-batch 1). A JSON-syntax file with a scalemodel key stays a strategy (the test above)."""
    f = tmp_path / f"ds_config{suffix}"
    f.write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}}')
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["inputs"]["strategy_file"]["format"] == "deepspeed" and "not used" not in r.err
    assert str(out["strategy"]["zero"]) == "1" and out["strategy"]["micro_batch"] == 2
    # a scalemodel key beside a DeepSpeed one: read as the scalemodel strategy it claims to be
    f.write_text('{"tp": 2, "zero_optimization": {"stage": 1}}')
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0 and json.loads(r.out)["inputs"]["strategy_file"]["format"] == "scalemodel"


# --- Megatron's hierarchical context parallelism ----------------------------------------------------------------------

@pytest.mark.parametrize("flags, what", [
    ("--context-parallel-size 8 --hierarchical-context-parallel-sizes 2 2",
     "2 x 2 = 4 is not --context-parallel-size 8"),
    ("--context-parallel-size 2 --hierarchical-context-parallel-sizes 2 2",
     "2 x 2 = 4 is not --context-parallel-size 2"),
    ("--hierarchical-context-parallel-sizes 2 4",
     "2 x 4 = 8 is not the context-parallel size 1 (no --context-parallel-size: Megatron-LM's default)"),
])
def test_hierarchical_cp_sizes_must_multiply_to_cp(cli, tmp_path, flags: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM asserts context_parallel_size == prod(--hierarchical-context-parallel-sizes); "2 2" under cp 8 was
    priced as all-to-all groups of 2 and a ring of 4, the file's ring size of 2 dropped."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --micro-batch-size 1 --cp-comm-type a2a+p2p {flags}\n")
    refused(cli, "predict", "-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --hierarchical-context-parallel-sizes: {what}")


def test_hierarchical_cp_sizes_that_multiply_to_cp_are_read(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --context-parallel-size 8 --cp-comm-type a2a+p2p "
                 "--hierarchical-context-parallel-sizes 2 4\n")
    st = accepted(cli, "predict", "-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f))["strategy"]
    assert (st["cp"], st["cp_comm_type"], st["cp_a2a_size"]) == (8, "a2a+p2p", 2)


# --- settings that price nothing are warned, not dropped ----------------------------------------------------------

@pytest.mark.parametrize("sets, warning", [
    (["strategy.cp_comm_type=a2a"], "strategy.cp_comm_type = a2a is not priced: cp is 1"),
    (["strategy.cp_comm_type=all_gather"], "strategy.cp_comm_type = all_gather is not priced: cp is 1"),
    (["strategy.cp_a2a_size=4"], "strategy.cp_a2a_size = 4 is not used: it sizes the all-to-all groups of "
                                 "cp_comm_type a2a+p2p, and cp_comm_type is p2p"),
    (["model.mtp_layers=0", "model.mtp_shared=false"], "model.hybrid.mtp_pattern '*E' is not priced: mtp_layers is 0"),
])
@pytest.mark.parametrize("command", ["predict", "memory"])
def test_an_unpriced_new_field_is_warned(cli, sets: list[str], warning: str, command: str) -> None:  # type: ignore[no-untyped-def]
    """cp_comm_type a2a at cp 1, cp_a2a_size under p2p and an MTP block pattern without MTP layers changed nothing
    and said nothing."""
    args = [a for s in sets for a in ("--set", s)]
    r = cli(command, *B200, "-m", "nemotron-3-super", "--ep", "8", *args, "--json")
    assert r.code == 0, r.err
    assert warning in r.err
    json.loads(r.out)


def test_the_cp_fields_in_use_are_not_warned(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *B200, "-m", "nemotron-3-super", "--ep", "8", "--cp", "4", "--set",
            "strategy.cp_comm_type=a2a+p2p", "--set", "strategy.cp_a2a_size=2", "--json")
    assert r.code == 0 and "cp_" not in r.err and "mtp" not in r.err, r.err


# --- an expert-parallel refusal names where etp was written ----------------------------------------------------------

@pytest.mark.parametrize("args, where", [
    (["--ep", "8", "--set", "strategy.etp=16"], "error: --ep / --set strategy.etp: ep 8 x etp 16 needs"),
    (["--set", "strategy.etp=128"], "error: --set strategy.etp: ep 1 x etp 128 needs"),
])
def test_an_etp_refusal_names_the_etp_item(cli, args: list[str], where: str) -> None:  # type: ignore[no-untyped-def]
    """``--set strategy.etp=16`` (etp x ep does not divide the ranks of a stage) was refused as "--ep: ...", an
    option that was not the cause or not given at all."""
    refused(cli, "predict", *B200, "-m", "nemotron-3-super", *args, "--json", match=where)


def test_an_etp_refusal_names_the_launch_flag(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 8 --expert-tensor-parallel-size 16\n")
    refused(cli, "predict", *B200, "-m", "nemotron-3-super", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --expert-model-parallel-size / --expert-tensor-parallel-size: ep 8 x etp "
                  "16 needs")


# --- a scalar the YAML reader refuses is named at its key ----------------------------------------------------------

@pytest.mark.parametrize("text, where", [
    ("strategy: {tp: " + "9" * 31 + ", pp: 2}\n", ": strategy.tp: integer with 31 digits"),
    ("strategy:\n  ep: 8\n  cp_a2a_size: " + "9" * 40 + "\n", ":3: strategy.cp_a2a_size: integer with 40 digits"),
    ('training: {precision: "fp\\x1b4"}\n', ": training.precision: character U+001B (written as an escape)"),
])
def test_a_refused_yaml_scalar_names_its_key(cli, tmp_path, text: str, where: str) -> None:  # type: ignore[no-untyped-def]
    """"s.yaml:1: integer with 31 digits": in a one-line flow mapping the line does not say which field."""
    f = tmp_path / "s.yaml"
    f.write_text(text)
    refused(cli, "predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), "--json", inputs=(f,),
            match=f"error: --strategy: {f}{where}")


def test_a_refused_scalar_in_a_list_names_its_index(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sweep.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8, " + "9" * 31 + "]\n")
    refused(cli, "sweep", str(f), "-j", "1", inputs=(f,), match=f"{f}:5: gpus[1]: integer with 31 digits")


# --- a Megatron launch's refusals name its flags ----------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--pipeline-model-parallel-size", "--expert-tensor-parallel-size",
                                  "--expert-model-parallel-size", "--micro-batch-size", "--seq-length"])
def test_a_zero_megatron_count_names_the_flag(cli, tmp_path, flag: str) -> None:  # type: ignore[no-untyped-def]
    """``--pipeline-model-parallel-size 0`` was refused as "strategy.pp: Input should be greater than 0", a field the
    launch script does not have (``--micro-batch-size 0`` as "training.micro_batch")."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py {flag} 0\n")
    line = refused(cli, "predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), inputs=(f,),
                   match=f"error: --strategy: {f}: {flag}: Input should be greater than 0 (got 0)")
    assert "strategy." not in line and "training." not in line


def test_a_scalemodel_file_field_keeps_the_spec_name(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    for text in ("pp: 0\n", "strategy: {pp: 0}\n"):
        f.write_text(text)
        refused(cli, "predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), inputs=(f,),
                match=f"error: --strategy: {f}: strategy.pp: Input should be greater than 0")


@pytest.mark.parametrize("flags, shown", [("--recompute-modules=moe,core_attn", "'moe,core_attn'"),
                                          ("--recompute-modules moe, core_attn", "'moe,'")])
def test_comma_separated_recompute_modules_are_refused(cli, tmp_path, flags: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Core refuses "moe,core_attn" as an invalid module; it was warned as not used "(the activation memory
    prices core_attn, mla_up_proj, moe_act, moe)", naming the very modules given."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --recompute-granularity selective {flags}\n")
    refused(cli, "predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --recompute-modules: {shown} is one module name to Megatron-LM")


# --- a YAML key that is not text ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["predict", "plan"])
def test_a_null_key_in_a_strategy_is_refused(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    """``strategy: {null: 2}`` compared equal to a spec's absent tag field (None) and was dropped without a word;
    plan then ended in a traceback joining the None into its "not pinned as given" warning."""
    f = tmp_path / "s.yaml"
    f.write_text("strategy: {null: 2, tp: 2}\n")
    refused(cli, command, *B200, "-m", "nemotron-3-nano", "--strategy", str(f), "--json", inputs=(f,),
            match=f"error: --strategy: {f}: strategy.null: key null is the null value, not text; keys are text; "
                  "known keys: dp, tp, ")  # ux34: was "strategy.None: unknown key None"


def test_a_null_key_in_a_cluster_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same in any spec without a kind tag: a cluster file's ``~: 1`` was dropped without a word."""
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nname: c\nextends: dgx-h100\n~: 1\n")
    refused(cli, "predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "64", "--json", inputs=(f,),
            match=f"error: {f}:4: ~: key ~ is the null value, not text; keys are text; known keys: sources, kind, "
                  "name, ")  # ux34: was "None: unknown key None" at the mapping's line


@pytest.mark.parametrize("key", ["~", "1", "true", "1.5"])
def test_a_top_level_key_that_is_not_text_is_warned(cli, tmp_path, key: str) -> None:  # type: ignore[no-untyped-def]
    """A strategy file's top-level ``~: 2`` (or ``1: 2``) ended in a traceback: the key joined the warning's list of
    settings not used."""
    f = tmp_path / "s.yaml"
    f.write_text(f"{key}: 2\ntp: 2\n")
    r = cli("predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["strategy"]["tp"] == 2
    assert "scalemodel settings not used: " in r.err


# --- DeepSpeed and torchtitan configs ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["predict", "memory"])
def test_a_huge_deepspeed_accumulation_names_its_key(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    """micro x gradient_accumulation_steps x dp past the largest global batch was refused as "training.global_batch:
    6400000000 is beyond ...", a field neither the file nor the options set (and without naming the file)."""
    f = tmp_path / "ds.json"
    f.write_text('{"gradient_accumulation_steps": 100000000}')
    refused(cli, command, *B200, "-m", "nemotron-3-nano", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: gradient_accumulation_steps: 1 x 100000000 x dp 64 = 6400000000 sequences")


def test_a_titan_op_policy_on_an_moe_model_names_the_toml_key(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Was refused as "strategy.recompute_modules: titan_op prices ...": the job TOML has no such key."""
    f = tmp_path / "job.toml"
    f.write_text('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n')
    refused(cli, "predict", *B200, "-m", "nemotron-3-nano", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: activation_checkpoint.selective_ac_option: titan_op prices")


@pytest.mark.parametrize("value", ["5", '"model"', '["model", 1]', "{model = true}"])
def test_titan_compile_components_not_a_list_of_names_is_refused(cli, tmp_path, value: str) -> None:  # type: ignore[no-untyped-def]
    """``[compile] components = 5`` compiled nothing without a word (the loss priced as eager)."""
    f = tmp_path / "job.toml"
    f.write_text(f"[compile]\nenable = true\ncomponents = {value}\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: compile.components: expected a list of component names")


# --- a scalemodel strategy YAML: what it sets twice, and what it is not -----------------------------------------------

@pytest.mark.parametrize("text, key, section", [("strategy: {tp: 2}\ntp: 4\n", "tp", "strategy"),
                                                ("tp: 2\nstrategy: {tp: 4}\n", "tp", "strategy"),
                                                ("micro_batch: 2\ntraining: {micro_batch: 1}\n", "micro_batch",
                                                 "training")])
def test_a_field_at_the_top_and_in_its_section_is_refused(cli, tmp_path, text: str, key: str, section: str) -> None:  # type: ignore[no-untyped-def]
    """The later of the two in the file won without a word."""
    f = tmp_path / "s.yaml"
    f.write_text(text)
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: {key}: given at the top level and under {section}:")


@pytest.mark.parametrize("kind", ["cluster", "scenario", "transformer"])
def test_another_spec_kind_is_not_a_strategy_file(cli, tmp_path, kind: str) -> None:  # type: ignore[no-untyped-def]
    """``--strategy cluster.yaml`` (kind: cluster, a name) read nothing and said nothing."""
    f = tmp_path / "s.yaml"
    f.write_text(f"kind: {kind}\nname: x\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: kind: kind '{kind}' is not a strategy file")
    f.write_text("kind: strategy\nname: x\ntp: 2\n")
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy",
                    str(f))["strategy"]["tp"] == 2


# --- an nccl-tests log's refusal names the log ------------------------------------------------------------------------

_ONE_ROW = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            "        8    2 float sum -1 10.0 0.00 0.00 0 10.0 0.00 0.00 0\n")


@pytest.mark.parametrize("text, args, what", [
    ("", [], "no nccl-tests data rows found"),
    ('{"results": [{"size": 8, "out_of_place": {"time": -1}}]}', [], "result 1: time: expected a number >= 0"),
    (_ONE_ROW, ["--ranks", "8"], "need at least two rows with size > 0"),
    (_ONE_ROW, [], "cannot tell how many ranks the log used"),
])
def test_an_nccl_log_refusal_names_the_file(cli, tmp_path, text: str, args: list[str], what: str) -> None:  # type: ignore[no-untyped-def]
    """"error: LOG: no nccl-tests data rows found": LOG was the parser's placeholder, not the file given."""
    f = tmp_path / "nccl.log"
    f.write_text(text)
    line = refused(cli, "calibrate", str(f), "-c", "dgx-h100", *args, "--json", inputs=(f,),
                   match=f"error: {f}: {what}")
    assert "LOG" not in line


# --- a huge name is shown short -------------------------------------------------------------------------------------

def test_a_huge_set_path_is_shown_short(cli) -> None:  # type: ignore[no-untyped-def]
    """``--set strategy.<100,000 x>=1`` was refused in a 101 KB line: the item's path echoed whole."""
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set",
                   "strategy." + "x" * 100_000 + "=1", match="... (100,015 characters): unknown key 'xxx")
    assert len(line) < 2000, len(line)


@pytest.mark.parametrize("name, text", [("run.sh", "torchrun pretrain_gpt.py --" + "x" * 100_000 + " 2\n"),
                                        ("ds.json", '{"train_batch_size": 8, "' + "k" * 200_000 + '": 1}')])
def test_a_huge_unused_setting_is_shown_short(cli, tmp_path, name: str, text: str) -> None:  # type: ignore[no-untyped-def]
    """A 100,000-character Megatron flag (or DeepSpeed key) was echoed whole in the "not used" warning and twice in the
    JSON. (A config of that one key is no strategy file at all since fuzz29: the DeepSpeed one holds a key read.)"""
    f = tmp_path / name
    f.write_text(text)
    r = cli("memory", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json")
    assert r.code == 0, r.err[:500]
    assert len(r.err) < 1000 and "characters)" in r.err
    assert len(r.out) < 20_000
    assert all(len(u) <= 300 for u in json.loads(r.out)["inputs"]["strategy_file"]["unused"])


# --- plan: a bounded search ---------------------------------------------------------------------------------------

def test_thousands_of_sync_modes_are_refused_not_searched(cli) -> None:  # type: ignore[no-untyped-def]
    """``--sync-modes hier:1,...,hier:2999`` priced every hier:G apart and ran past the 20 s guard (a hang)."""
    modes = ",".join(f"hier:{g}" for g in range(1, 3000))
    refused(cli, "plan", *B200, "-m", "nemotron-3-nano", "--sync-modes", modes, "--json",
            match="error: --sync-modes: 2999 distinct sync modes; at most 64 distinct modes")


def test_repeated_sync_modes_count_once(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "plan", *B200, "-m", "nemotron-3-nano", "--top", "1", "--sync-modes", ",".join(["bsp"] * 5000))
    assert out["ranked"]


@pytest.mark.parametrize("item, shown", [("memory<=-5GB", "-5e+09 B"), ("memory<=0", "0 B"),
                                         ("memory>=-1GB", "-1e+09 B"), ("bucket=-5MB", "-5e+06 B")])
def test_a_size_constraint_below_zero_is_refused(cli, item: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    """``--constraint memory<=-5GB`` was searched: every plan "exceeds the --constraint memory limit", exit 0."""
    refused(cli, "plan", *B200, "-m", "nemotron-3-nano", "--constraint", item, "--json",
            match=f"error: --constraint: bad {'memory' if item.startswith('memory') else 'bucket size'} in "
                  f"{item!r}: {shown} is not a size")


# --- check: a strategy that cannot run does not pass -------------------------------------------------------------

def test_check_refuses_an_invalid_strategy_that_also_overflows_memory(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """cp_a2a_size 3 under cp 2 (heads the all-to-all group does not divide) on an H100, where the plan also needs
    118 GB: ``check`` printed PASS for max_step_time and exited 0 (only a plan that fits in memory was refused)."""
    f = tmp_path / "cap.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: nemotron-3-nano\ngpus: [16, 64]\n"
                 "training: {micro_batch: 1, global_batch: 64}\n"
                 "strategy: {ep: 8, cp: 2, cp_comm_type: a2a+p2p, cp_a2a_size: 3}\n"
                 "assertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(f), "--json", inputs=(f,),
            match=f"error: {f}: gpus: the strategy is invalid at 16 GPUs: heads not divisible")


def test_check_help_says_an_invalid_strategy_exits_2(cli) -> None:  # type: ignore[no-untyped-def]
    """The refusal above exits 2; --help said only "exit 0 when all hold, 1 when any fails", so a CI job reading the
    help could not tell an invalid strategy from a failed assertion, nor that memory alone is not a refusal."""
    r = cli("check", "--help")
    text = " ".join(r.out.split())
    assert "Exit 2 on bad input" in text and "a strategy that cannot run" in text and "must_fit_memory" in text
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "exits 0 when all hold, 1 when one fails, 2 on bad input (the file, or a strategy that cannot run" in readme


def test_check_still_reports_memory_as_a_note(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "cap.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: nemotron-3-nano\ngpus: [16, 64]\n"
                 "training: {micro_batch: 1, global_batch: 64}\nstrategy: {ep: 8}\n"
                 "assertions: {max_step_time: 100s}\n")
    r = cli("check", str(f), "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["passed"] and any("does not fit in memory" in n for n in out["notes"])


# --- collective: a size sweep is priced whole or refused ----------------------------------------------------------

@pytest.mark.parametrize("sizes, count", [("1:1e15:1.0000001", "345,387,782"), ("1B:2B:1.0000001", "6,931,473")])
def test_a_size_sweep_past_the_cap_is_refused(cli, sizes: str, count: str) -> None:  # type: ignore[no-untyped-def]
    """``--sizes 1:1e15:1.0000001`` printed 200 sizes from 1 B to 1.00002 B and exit 0: MAX never reached."""
    refused(cli, "collective", "-c", "dgx-b200", "-n", "8", "--sizes", sizes, "--json",
            match=f"error: --sizes: sweep {sizes!r} has {count} sizes; at most 200")


@pytest.mark.parametrize("sizes, count", [("1KiB:8GiB", 24), ("1:1e15:1.2", 190), ("1KiB:1KiB", 1)])
def test_a_size_sweep_within_the_cap_reaches_max(cli, sizes: str, count: int) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "collective", "-c", "dgx-b200", "-n", "8", "--sizes", sizes)["inputs"]["sizes_bytes"]
    assert len(got) == count
