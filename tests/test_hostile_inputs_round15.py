"""Hostile-input round 15: the newest fields (cp exchanges, MoE dispatch, module precision, cuDNN releases, hybrid
and MTP models) in combination, framework readers, output paths and numeric edges.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

from scalemodel.specs import load_accelerator

MOE = ["-c", "dgx-h100", "-m", "deepseek-v3", "-n", "256"]
SMALL = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8"]


# --- an integer field written as a float past the bound keeps its reason --------------------------------------
# "--set strategy.tp=1e308" (or "tp: 1e308" in a file) was "error: --set strategy.tp: 1000000000000000010979...
# 715...; an integer from 1 to 1e+09": int(1e308)'s 309 digits, cut before the words saying what was wrong.

@pytest.mark.parametrize("item, shown", [("strategy.tp=1e308", "1e+308"), ("strategy.cp_a2a_size=1e100", "1e+100"),
                                         ("strategy.ep_dispatch_sms=1e40", "1e+40"), ("model.layers=1e20", "1e+20"),
                                         ("training.micro_batch=-1e300", "-1e+300")])
def test_a_float_past_the_integer_bound_is_named_short(cli, item: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    # a negative one is below the field's own bound (micro_batch >= 1: ux38b, the bound that applies)
    end = ("is below the smallest integer this field accepts (1)" if shown.startswith("-")
           else "is beyond the largest integer a spec accepts (1e+09)")
    line = refused(cli, "predict", *SMALL, "--set", item, match=f"{shown} {end}")
    assert len(line) < 300, line


def test_a_float_past_the_integer_bound_in_a_file_is_named_short(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: strategy\nstrategy:\n  tp: 1e308\n")
    refused(cli, "predict", *SMALL, "--strategy", str(f), inputs=(f,),
            match=f"{f}: strategy.tp: 1e+308 is beyond the largest integer a spec accepts (1e+09)")


# --- the constraint keys with a digit are read -------------------------------------------------------------------
# "--constraint cp_a2a_size=2" and "--constraint moe_a2a_overlap=false" were "cannot read constraint": the key's
# pattern took letters, '_' and '-' only, though both keys are in the allowed list (and its examples).

@pytest.mark.parametrize("text", ["cp_a2a_size=2", "cp_a2a_size<=4", "moe_a2a_overlap=false", "moe_a2a_overlap=true"])
def test_constraint_keys_with_a_digit_are_read(cli, text: str) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "plan", *MOE, "--top", "3", "--constraint", f"{text},cp=2,pp=8,tp=1,micro_batch=1")
    assert got["ranked"] or got["infeasible_by_reason"], got["why"]
    key, value = text.replace("<=", "=").split("=")
    for row in got["ranked"]:
        if key == "cp_a2a_size":
            assert row["strategy"][key] <= int(value), row["strategy"]
        else:
            assert row["strategy"][key] is (value == "true"), row["strategy"]


@pytest.mark.parametrize("text, match", [
    ("cp_a2a_size=0", "no cp_a2a_size meets cp_a2a_size=0"),
    ("moe_a2a_overlap=maybe", "bad value in 'moe_a2a_overlap=maybe'"),
    ("tp2=1", "unknown constraint key 'tp2'"),
])
def test_constraint_keys_with_a_digit_are_checked_as_keys(cli, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *MOE, "--constraint", text, match=match)


# --- GPU counts with a blank inside are not run together ---------------------------------------------------------
# "scale -n '8 16'" (and a scenario's gpus: "8 16") swept one point of 816 GPUs: the blanks were removed before the
# split on commas; "8,,16" dropped the empty count without a word.

@pytest.mark.parametrize("gpus, match", [
    ("8 16", "cannot read GPU counts '8 16': '8 16' has a blank inside (counts are separated by commas)"),
    ("8,1 6", "'1 6' has a blank inside"),
    ("8,,16", "an empty GPU count in '8,,16'"),
    (",8", "an empty GPU count in ',8'"),
    ("", "no GPU count given"),
])
def test_scale_gpu_counts_with_a_blank_or_an_empty_count_are_refused(cli, gpus: str, match: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", gpus, match=match)
    assert line.startswith("error: --gpus: "), line


@pytest.mark.parametrize("gpus", ["8,16", "8, 16", " 8 , 16 ", "8,16,"])
def test_scale_gpu_counts_around_commas_still_read(cli, gpus: str) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", gpus)
    assert [p["gpus"] for p in got["points"]] == [8, 16]


def test_a_scenario_gpu_count_with_a_blank_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "scen.yaml"
    f.write_text('kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: "8 16"\n')
    refused(cli, "scale", "--scenario", str(f), inputs=(f,),
            match="gpus: cannot read GPU counts '8 16' (counts are separated by commas, not blanks)")
    f.write_text('kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: "8, 16"\n')
    assert [p["gpus"] for p in accepted(cli, "scale", "--scenario", str(f))["points"]] == [8, 16]


# --- an empty mapping is called a mapping ------------------------------------------------------------------------
# An accelerator's attention_releases entry '9.30': {} was "List should have at least 1 item (got {})".

def test_an_empty_release_mapping_is_called_a_mapping(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    acc, clu = tmp_path / "acc.yaml", tmp_path / "c.yaml"
    acc.write_text("kind: accelerator\nextends: b200\nname: myb\nattention_releases:\n  '9.30': {}\n")
    clu.write_text("kind: cluster\nextends: dgx-b200\nname: myc\naccelerator: acc.yaml\n")
    # fuzz38: named in acc.yaml at the release's line, as `-c` names a file's own field
    refused(cli, "predict", "-c", str(clu), "-m", "llama3-8b", "-n", "8", inputs=(acc, clu),
            match=f"{acc}:5: attention_releases.9.30: Mapping should have at least 1 entry (got {{}})")


def test_an_empty_list_is_still_called_a_list(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *SMALL, "--set", "cluster.tiers=[]",
            match="--set cluster.tiers: List should have at least 1 item (got [])")


# --- a cluster file's accelerator path is relative to the cluster file ---------------------------------------------
# "accelerator: acc.yaml" in sub/c.yaml was read relative to the working folder (extends: and a scenario's references
# are read relative to their file): from another folder it was "file not found: acc.yaml", and an acc.yaml in the
# working folder was taken instead without a word (80 GB -> the other file's 200 GB of memory).

def test_a_cluster_accelerator_path_is_read_beside_the_cluster_file(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "acc.yaml").write_text("kind: accelerator\nextends: h100-sxm\nname: sub-acc\nmemory: 40GB\n")
    (tmp_path / "acc.yaml").write_text("kind: accelerator\nextends: h100-sxm\nname: cwd-acc\nmemory: 200GB\n")
    (sub / "c.yaml").write_text("kind: cluster\nextends: dgx-h100\nname: subc\naccelerator: acc.yaml\n")
    for where, cluster in ((tmp_path, "sub/c.yaml"), (sub, "c.yaml"), (tmp_path.parent, str(sub / "c.yaml"))):
        monkeypatch.chdir(where)
        got = accepted(cli, "predict", "-c", cluster, "-m", "gpt-1.7b", "-n", "8")
        # 40 GB less the slice the driver keeps from CUDA, which the file inherits from h100-sxm (memory_reserved)
        want = 40e9 - float(load_accelerator("h100-sxm").memory_reserved or 0.0)
        assert got["memory"]["capacity_bytes"] == want, (where, got["memory"]["capacity_bytes"])


def test_a_missing_cluster_accelerator_file_is_named_beside_the_cluster_file(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c.yaml").write_text("kind: cluster\nextends: dgx-h100\nname: c\naccelerator: missing.yaml\n")
    monkeypatch.chdir(tmp_path.parent)
    refused(cli, "hardware", "validate", str(tmp_path / "c.yaml"),
            match=f"accelerator: {tmp_path / 'missing.yaml'}: file not found")


def test_a_scenario_naming_a_cluster_file_elsewhere_reads_its_accelerator_beside_it(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The accelerator beside the cluster file has 30 GB, which gpt-1.7b on 8 GPUs (33 GB each) overflows: check's
    must_fit_memory fails (exit 1) on it, from the scenario's folder and from another one."""
    sub, other = tmp_path / "sub", tmp_path / "other"
    sub.mkdir()
    other.mkdir()
    (sub / "acc.yaml").write_text("kind: accelerator\nextends: h100-sxm\nname: sub-acc\nmemory: 30GB\n")
    (sub / "c.yaml").write_text("kind: cluster\nextends: dgx-h100\nname: subc\naccelerator: acc.yaml\n")
    for folder, cluster in ((sub, "c.yaml"), (other, "../sub/c.yaml")):
        scen = folder / "scen.yaml"
        scen.write_text(f"kind: scenario\nname: s\ncluster: {cluster}\nmodel: gpt-1.7b\ngpus: [8]\n"
                        "assertions: {must_fit_memory: true}\n")
        monkeypatch.chdir(tmp_path)
        r = cli("check", str(scen.relative_to(tmp_path)), "--json")
        assert r.code == 1 and "Traceback" not in r.err, (folder, r.code, r.err[-400:])


# --- a NemotronH config's layer lists ----------------------------------------------------------------------------
# An MTP block of a kind not modelled, mtp_layers_block_type ["gdn"], was "MTP block pattern '?' is not modelled"
# (the reader's placeholder, not the file's word); hybrid_override_pattern and layers_block_type giving different
# layers priced the pattern and dropped the list without a word.

def _nemotron_h_file(tmp_path, **change):  # type: ignore[no-untyped-def]
    import json

    from test_mamba import NANO_HF
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**NANO_HF, **change}))
    return f


def test_an_mtp_block_kind_not_modelled_is_named_as_written(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _nemotron_h_file(tmp_path, num_nextn_predict_layers=1, mtp_layers_block_type=["gdn"])
    refused(cli, "predict", "-m", str(f), "-n", "64", inputs=(f,),
            match=f"{f}: mtp_layers_block_type: MTP block layer kinds ['gdn'] are not modelled")


def test_a_layer_list_that_contradicts_the_pattern_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _nemotron_h_file(tmp_path, layers_block_type=["mamba"] * 52)
    refused(cli, "predict", "-m", str(f), "-n", "64", inputs=(f,),
            match=f"{f}: hybrid_override_pattern / layers_block_type: layers_block_type gives 52 layers (MMMM")


def test_a_layer_list_that_agrees_with_the_pattern_still_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from test_mamba import NANO_HF
    kinds = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    f = _nemotron_h_file(tmp_path, layers_block_type=[kinds[c] for c in NANO_HF["hybrid_override_pattern"]])
    assert accepted(cli, "predict", "-m", str(f), "-n", "64", "--seq-len", "8192")["inputs"]["model"]


# --- a GPU count list entry names the range of a GPU count -------------------------------------------------------
# A sweep's or scenario's gpus entry refused by type ('x', 1e300, an empty list) said "an integer from -1e+09 to
# 1e+09": the list's items were plain integers, ranged only afterwards.

@pytest.mark.parametrize("gpus, where, what", [
    ("['x']", "gpus[0]", "Input should be a valid integer"), ("[1e300]", "gpus[0]", "1e+300 is beyond"),
    ("[8, -8]", "gpus[1]", "Input should be greater than 0 (got -8)"), ("[]", "gpus", "List should have at least 1"),
])
@pytest.mark.parametrize("kind", ["sweep", "scenario"])
def test_a_gpu_count_entry_names_the_gpu_range(cli, tmp_path, gpus: str, where: str, what: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "f.yaml"
    if kind == "sweep":
        f.write_text(f"kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: {gpus}\n"
                     "strategies: [{label: a}]\n")
        line = refused(cli, "sweep", str(f), "-j", "1", inputs=(f,), match=f"{f}:5: {where}: {what}")
    else:
        f.write_text(f"kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: {gpus}\n")
        line = refused(cli, "scale", "--scenario", str(f), inputs=(f,), match=f"{f}:5: {where}: {what}")
    assert line.endswith("an integer from 1 to 1e+08"), line


# --- a hybrid pattern's '|' segments are the pipeline stages -----------------------------------------------------
# Megatron-LM (arguments.py validate_args at d98e8a64) asserts no first/last stage layers with a piped pattern and
# segments divisible by pp, deriving the virtual stages as segments / pp. A 2-segment pattern was priced at pp 4,
# with first_stage_layers 10, and under interleaved:2 at pp 2 (4 virtual stages the pattern does not have).

_SUPER = ("MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME")
_PIPED = _SUPER[:44] + "|" + _SUPER[44:]


@pytest.mark.parametrize("args", [["--pp", "4"], ["--pp", "2", "--set", "strategy.first_stage_layers=10"],
                                  ["--pp", "2", "--set", "strategy.last_stage_layers=40"],
                                  ["--pp", "2", "--schedule", "interleaved:2"]])
def test_a_piped_hybrid_pattern_fixes_the_stages(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "predict", "-c", "gb200-nvl72", "-m", "nemotron-3-super", "-n", "64",
                   "--set", f"model.hybrid.pattern={_PIPED}", *args)
    assert not got["feasible"] and "'|' segments are the stages" in got["infeasible_reason"], got["infeasible_reason"]


def test_a_piped_hybrid_pattern_at_its_own_stages_is_not_refused_for_them(cli) -> None:  # type: ignore[no-untyped-def]
    for pp in ("1", "2"):
        got = accepted(cli, "predict", "-c", "gb200-nvl72", "-m", "nemotron-3-super", "-n", "64", "--pp", pp,
                       "--set", f"model.hybrid.pattern={_PIPED}")
        assert "layers do not split" not in str(got["infeasible_reason"]), got["infeasible_reason"]
    plan = accepted(cli, "plan", "-c", "dgx-b200", "-m", "nemotron-3-super", "-n", "64", "--top", "3",
                    "--set", f"model.hybrid.pattern={_PIPED}")
    assert all(r["strategy"]["pp"] in (1, 2) and r["strategy"]["schedule"] != "interleaved:2" for r in plan["ranked"])


# --- a --set path reaches a cuDNN release key --------------------------------------------------------------------
# "--set accelerator.attention_releases.9.19.cudnn.fwd.attn_max=0.5" split the key 9.19 at its dot and was refused as
# "accelerator.attention_releases.9: key '9' is not of the allowed form" (9.19 was written; no path reached it).

def test_a_set_path_reaches_a_cudnn_release_key(cli) -> None:  # type: ignore[no-untyped-def]
    run = ["predict", "-c", "dgx-b200", "-m", "llama3-8b", "-n", "8", "--set", "training.cudnn_release='9.19'"]
    base = accepted(cli, *run)["step_time_s"]
    slower = accepted(cli, *run, "--set", "accelerator.attention_releases.9.19.cudnn.fwd.attn_max=0.5")["step_time_s"]
    assert slower > base, (base, slower)  # the 9.19 curve's forward at half its peak fraction: a slower step
    refused(cli, *run, "--set", "accelerator.attention_releases.9.19.cudnn.fwd.attn_max=2",
            match="error: --set accelerator.attention_releases.9.19.cudnn.fwd.attn_max: Input should be less than or "
                  "equal to 1 (got 2)")


def test_a_set_path_adds_a_cudnn_release(cli) -> None:  # type: ignore[no-untyped-def]
    curve = "{fwd: {attn_max: 0.9, seq_half: 900, head_half: 50}, bwd: {attn_max: 0.6, seq_half: 1000, head_half: 30}}"
    got = accepted(cli, "predict", "-c", "dgx-b200", "-m", "llama3-8b", "-n", "8", "--set",
                   f"accelerator.attention_releases.9.30.cudnn={curve}", "--set", "training.cudnn_release='9.30'")
    assert got["inputs"]["training"]["cudnn_release"] == "9.30"


# --- hardware validate of a strategy file says what it is ----------------------------------------------------------
# A torchtitan TOML was "malformed YAML: did not find expected <document start>", a Megatron launch "expected a mapping
# of fields", a DeepSpeed config or a kind: strategy file "cannot tell what kind of spec this is".

@pytest.mark.parametrize("name, text, what", [
    ("job.toml", "[parallelism]\ntensor_parallel_degree = 2\n", "a training framework's launch config"),
    ("run.sh", "torchrun pretrain_gpt.py --tensor-model-parallel-size 2\n", "a training framework's launch config"),
    ("flags.txt", "torchrun pretrain_gpt.py --tensor-model-parallel-size 2\n", "Megatron-LM flags (a launch script)"),
    ("ds.json", '{"train_micro_batch_size_per_gpu": 1}', "a DeepSpeed config"),
    ("s.yaml", "kind: strategy\nstrategy: {tp: 2}\n", "a scalemodel strategy file"),
])
def test_hardware_validate_names_a_strategy_file(cli, tmp_path, name: str, text: str, what: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, "hardware", "validate", str(f), inputs=(f,), match=f"error: {f}: {what}")
    assert "not a spec; " in line and "--strategy FILE" in line, line


# --- a no-break space in a Megatron flag is named ----------------------------------------------------------------
# "--tensor-model-parallel-size\u00a02" (pasted from a document) was warned as "--tensor-model-parallel-size 2" not
# used, the space printed as an ordinary one; "\u00a0--pipeline-model-parallel-size 2" was skipped without a word.

def test_a_no_break_space_in_a_megatron_flag_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --tensor-model-parallel-size\u00a02 "
                 "\u00a0--pipeline-model-parallel-size 2\n")
    r = cli("predict", *SMALL, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "--tensor-model-parallel-size\\u00a02 (a U+00A0 space inside" in r.err, r.err
    assert "\\u00a0--pipeline-model-parallel-size (a U+00A0 space inside" in r.err, r.err


# --- a torchtitan table given as a value is refused ----------------------------------------------------------------
# "compile = 5", "model = 'llama'" or "float8 = 3" at the top of a torchtitan TOML were passed over without a word
# (the compile switch, the float8 converter read as absent); [training], [parallelism] and [activation_checkpoint]
# were already refused so.

@pytest.mark.parametrize("text, section, got", [
    ("compile = 5\n[training]\nlocal_batch_size = 1\n", "compile", "int"),
    ("model = \"llama\"\n[training]\nlocal_batch_size = 1\n", "model", "str"),
    ("float8 = 3\n[model]\nconverters = [\"float8\"]\n", "float8", "int"),
    ("quantize = [1]\n[model]\nconverters = [\"quantize.linear.float8\"]\n", "quantize", "list"),
])
def test_a_torchtitan_table_given_as_a_value_is_refused(cli, tmp_path, text: str, section: str, got: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text(text)
    refused(cli, "predict", *SMALL, "--strategy", str(f), inputs=(f,),
            match=f"{f}: [{section}]: expected a table, got {got}; a [{section}] table of key = value lines")


# --- sequence lengths: why a distribution is refused, and where it was written -----------------------------------
# "uniform:10:1" and "uniform:1:1000000000" were "unknown sequence-length distribution" (it is known: LO is above HI,
# HI has 10 digits); the engine's refusals (work_cv given too, HI past seq_len) named "training.sequence_lengths", a
# field the user wrote as --set training.sequence_lengths.

@pytest.mark.parametrize("value, why", [("uniform:10:1", "LO 10 is above HI 1"),
                                        ("uniform:1:1000000000", "HI 1000000000 has more than 9 digits"),
                                        ("uniform:-1:5", "LO -1 is negative"), ("uniform:0:5", "LO is 0")])
def test_a_sequence_length_distribution_says_why_it_is_refused(cli, value: str, why: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *SMALL, "--set", f"training.sequence_lengths={value}",
            match=f"error: --set training.sequence_lengths: cannot read sequence-length distribution '{value}': "
                  f"{why}; ")


@pytest.mark.parametrize("args, what", [
    (["--work-cv", "0.5"], "give work_cv or sequence_lengths, not both"),
    (["--set", "training.work_cv=0.5"], "give work_cv or sequence_lengths, not both"),
    (["--seq-len", "1024"], "longest sample 2048 exceeds seq_len 1024"),
])
def test_a_sequence_length_refusal_names_the_set_item(cli, args: list[str], what: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *SMALL, "--set", "training.sequence_lengths=uniform:1:2048", *args,
            match=f"error: --set training.sequence_lengths: {what}")


# --- plan warns of an MoE dispatch setting on a model without MoE layers, as predict does --------------------------
# "plan -m llama3-8b --constraint moe_flex_dispatcher=true" ranked dense rows with the flag on, and --set
# strategy.moe_layer_host_s / ep_dispatch_sms / moe_flex_dispatcher were taken without a word; predict warns
# "... is not priced: the model has no MoE layers".

DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--top", "1", "--json"]


@pytest.mark.parametrize("args, said", [
    (["--set", "strategy.moe_layer_host_s=5ms"], "strategy.moe_layer_host_s = 0.005 s"),
    (["--set", "strategy.ep_dispatch_sms=20"], "strategy.ep_dispatch_sms = 20"),
    (["--set", "strategy.moe_flex_dispatcher=true"], "strategy.moe_flex_dispatcher"),
    (["--constraint", "moe_flex_dispatcher=true"], "constraint moe_flex_dispatcher=true"),
    (["--constraint", "moe_a2a_overlap=true"], "constraint moe_a2a_overlap=true"),
])
def test_plan_warns_of_moe_settings_on_a_dense_model(cli, args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *DENSE, *args)
    assert r.code == 0 and f"warning: {said} is not priced: the model has no MoE layers" in r.err, r.err
    if args[0] == "--set":  # predict says the same
        p = cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--json", *args)
        assert f"warning: {said} is not priced: the model has no MoE layers" in p.err, p.err


@pytest.mark.parametrize("args", [["--constraint", "moe_flex_dispatcher=false"],
                                  ["--constraint", "moe_flex_dispatcher=true", "-m", "deepseek-v3", "-n", "256"]])
def test_plan_does_not_warn_of_moe_settings_that_apply(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    base = DENSE if "-m" not in args else ["-c", "dgx-h100", "--top", "1", "--json"]
    r = cli("plan", *base, *args)
    assert r.code == 0 and "no MoE layers" not in r.err, r.err
