"""Hostile-input round 14b: the inputs new in this session's merges (training.module_precision, training.cudnn_release
and the accelerator's attention_releases, the sliding-window + p2p context-parallel refusal).

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from conftest import ROOT
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

SUPER = ["-m", str(ROOT / "examples" / "workloads" / "nemotron-3-super.yaml"), "-n", "64", "--ep", "8"]
GPT = ["-m", "gpt-1.7b", "-n", "8"]
_NO_LATENT = "the model has no LatentMoE (moe.latent_size not set)"
_NOT_HELD = "no attention curve for cuDNN 9.9 on b200"  # below every held release (9.10 ...)


# --- a module_precision value refused by its type names the module --------------------------------------------
# "--set training.module_precision.attention_proj=BF16" was refused as "--set training.module_precision: not one of
# the known values (got 'BF16')", without the module whose value it was.

@pytest.mark.parametrize("module", ["attention_proj", "moe_latent", "mamba_out_proj", "mtp"])
def test_a_bad_module_precision_value_names_the_module(cli, module: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-b200", *SUPER, "--precision", "fp4", "--set",
            f"training.module_precision.{module}=BF16",
            match=f"error: --set training.module_precision.{module}: not one of the known values (got 'BF16')")


# --- a module_precision / cudnn_release refusal names where the setting was written ------------------------------
# The engine's refusals (a module the model lacks, mxfp8 off Blackwell, a release the accelerator holds no curve
# for) were "training.module_precision.X: ..." / "training.cudnn_release: ..." whether the user wrote --set, a
# --strategy file or a scenario: the file was not named.

@pytest.mark.parametrize("command", ["predict", "plan", "memory", "scale", "sensitivity"])
def test_a_module_the_model_lacks_names_the_strategy_file(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: strategy\ntraining:\n  precision: fp8\n  module_precision: {moe_latent: bf16}\n")
    refused(cli, command, "-c", "dgx-b200", *GPT, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: training.module_precision.moe_latent: {_NO_LATENT}")


def test_a_module_the_model_lacks_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-b200", *GPT, "--precision", "fp8", "--set",
            "training.module_precision.moe_latent=bf16",
            match=f"error: --set training.module_precision.moe_latent: {_NO_LATENT}")


def test_mxfp8_module_off_blackwell_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", *GPT, "--precision", "fp8", "--set",
            "training.module_precision={attention_proj: mxfp8}",
            match="error: --set training.module_precision.attention_proj: mxfp8 needs Blackwell tensor cores; "
                  "h100-sxm is hopper")


@pytest.mark.parametrize("command", ["predict", "plan", "memory", "scale", "sensitivity"])
def test_a_release_not_held_names_the_strategy_file(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: strategy\ncudnn_release: '9.9'\n")
    refused(cli, command, "-c", "dgx-b200", *GPT, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: training.cudnn_release: {_NOT_HELD}")


def test_a_release_not_held_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-b200", *GPT, "--set", "training.cudnn_release='9.9'",
            match=f"error: --set training.cudnn_release: {_NOT_HELD}")


def test_a_release_not_held_names_the_scenario(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "scen.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-b200\nmodel: gpt-1.7b\ngpus: [8]\n"
                 "training: {global_batch: 8, cudnn_release: '9.9'}\n")
    refused(cli, "scale", "--scenario", str(f), inputs=(f,),
            match=f"error: --scenario: {f}: training.cudnn_release: {_NOT_HELD}")


# --- the "quote it" hint only where quoting would find a held release ---------------------------------------------
# Every one-digit minor got "(a bare 9.10 reads as 9.1: quote it)": '0.0' and '9.5' too, which no quoting fixes.

def test_the_quote_hint_is_given_only_for_a_held_release(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-b200", *GPT, "--set", "training.cudnn_release='9.5'")
    assert "quote it" not in line, line
    line = refused(cli, "predict", "-c", "dgx-b200", *GPT, "--set", "training.cudnn_release=9.10")
    assert "(a bare 9.10 reads as 9.1: quote it)" in line, line


# --- a kernel or release that nothing prices is warned about ------------------------------------------------------
# training.cudnn_release (and a named attention_kernel) on a run without flash_attention, or on a generic workload,
# changed nothing and said nothing: the core without a fused kernel runs as two GEMMs, and a generic workload has
# none.

_UNFUSED = "is not priced: flash_attention is off (the attention core runs as two GEMMs, not a fused kernel)"


@pytest.mark.parametrize("command", ["predict", "memory", "scale"])
def test_a_release_without_flash_attention_is_warned(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    base = (command, "-c", "dgx-b200", *GPT, "--no-flash-attention")
    got = accepted(cli, *base, "--set", "training.cudnn_release='9.10'")
    assert f"training.cudnn_release = 9.10 {_UNFUSED}" in got["warnings"], got["warnings"]
    if command == "predict":  # priced nothing: the same step as without it
        assert got["step_time_s"] == accepted(cli, *base)["step_time_s"]


def test_a_named_kernel_without_flash_attention_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "predict", "-c", "dgx-b200", *GPT, "--no-flash-attention", "--set",
                   "training.attention_kernel=fa2")
    assert f"training.attention_kernel = fa2 {_UNFUSED}" in got["warnings"], got["warnings"]
    got = accepted(cli, "predict", "-c", "dgx-b200", *GPT, "--no-flash-attention", "--set",
                   "training.attention_kernel=gemm")  # gemm is what an unfused core runs: nothing to warn
    assert not any("attention_kernel" in w for w in got["warnings"]), got["warnings"]


def test_a_release_on_a_plan_pinned_without_flash_attention_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "plan", "-c", "dgx-b200", *GPT, "--top", "1", "--set", "strategy.flash_attention=false",
                   "--set", "training.cudnn_release='9.10'")
    assert f"training.cudnn_release = 9.10 {_UNFUSED}" in got["warnings"], got["warnings"]


@pytest.mark.parametrize("setting, shown", [("training.cudnn_release='9.10'", "training.cudnn_release = 9.10"),
                                            ("training.attention_kernel=fa2", "training.attention_kernel = fa2")])
def test_an_attention_setting_on_a_generic_workload_is_warned(cli, setting: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-c", "dgx-b200", "-m", "resnet50", "-n", "8")
    got = accepted(cli, *base, "--set", setting)
    assert f"{shown} is not priced: resnet50 is a generic workload (no attention core)" in got["warnings"]
    assert got["step_time_s"] == accepted(cli, *base)["step_time_s"]


def test_a_release_not_held_is_refused_on_a_generic_workload_too(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-b200", "-m", "resnet50", "-n", "8", "--set", "training.cudnn_release='9.9'",
            match=f"error: --set training.cudnn_release: {_NOT_HELD}")


# --- the sliding-window refusal of an a2a+p2p group that cp_a2a_size does not divide --------------------------------
# cp 4 with cp_a2a_size 3 was refused as "a p2p ring of cp / cp_a2a_size = 1 ranks" (a one-rank ring is what TE
# runs a window on): no such hierarchy exists (Megatron-Core's a2a group divides cp); it is infeasible for that.

def test_a_cp_a2a_size_that_does_not_divide_cp_is_infeasible_not_a_window_refusal(cli) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "predict", "-c", "dgx-h100", "-m", "mistral-7b", "-n", "64", "--cp", "4", "--set",
                   "strategy.cp_comm_type=a2a+p2p", "--set", "strategy.cp_a2a_size=3")
    assert got["feasible"] is False and "cp_a2a_size, which must divide cp" in got["infeasible_reason"], got
    refused(cli, "predict", "-c", "dgx-h100", "-m", "mistral-7b", "-n", "64", "--cp", "4", "--set",
            "strategy.cp_comm_type=a2a+p2p", "--set", "strategy.cp_a2a_size=2",
            match="a p2p ring of cp / cp_a2a_size = 2 ranks")


# --- an attention_releases key is refused at that key ------------------------------------------------------------
# A bare 9.30 key (YAML's number 9.3), a word or a padded key was refused as "attention_releases: Input should be a
# valid string (got {'9.10': {'cudnn': {'fwd': ...": the whole merged mapping (the built-in part's releases too) as
# the value, no key named, and no word on quoting.

_CURVE = ("cudnn:\n      fwd: {attn_max: 0.9, seq_half: 700, head_half: 51}\n"
          "      bwd: {attn_max: 0.7, seq_half: 800, head_half: 29}\n")
_KEY_ALLOWED = "a cuDNN release as quoted major.minor text without leading zeros, e.g. '9.19'"


@pytest.mark.parametrize("key, named, what", [
    ("9.30", "attention_releases.9.30", "key 9.30 is a number, not text"),  # as written (ux34)
    ("9", "attention_releases.9", "key 9 is a number, not text"),
    ("nine", "attention_releases.nine", "key 'nine' is not of the allowed form"),
    ("'09.30'", "attention_releases.09.30", "key '09.30' is not of the allowed form"),
])
@pytest.mark.parametrize("route", ["validate", "predict"])
def test_a_bad_release_key_is_named(cli, tmp_path, key: str, named: str, what: str, route: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "acc.yaml"
    f.write_text(f"kind: accelerator\nname: x\nextends: b200\nattention_releases:\n  {key}:\n    {_CURVE}")
    if route == "predict" and key == "9.30":  # --set cluster.accelerator=FILE: no node tree, the key as read
        named, what = named.replace("9.30", "9.3"), what.replace("9.30", "9.3")
    args = (("hardware", "validate", str(f)) if route == "validate" else
            ("predict", "-c", "dgx-b200", *GPT, "--set", f"cluster.accelerator={f}"))
    line = refused(cli, *args, inputs=(f,), match=f"{named}: {what}; {_KEY_ALLOWED}")
    assert "9.10" not in line and "cudnn'" not in line, line  # not the merged mapping as the value


def test_a_release_with_a_leading_zero_is_refused_in_training(cli) -> None:  # type: ignore[no-untyped-def]
    """'09.19' passed the pattern and was then "not held" beside a held '9.19'; an accelerator key '09.19' was held
    and listed but no run's '9.19' matched it."""
    refused(cli, "predict", "-c", "dgx-b200", *GPT, "--set", "training.cudnn_release='09.19'",
            match="error: --set training.cudnn_release: String is not of the allowed form (got '09.19')")


# --- a module named at the run's own precision is warned about -----------------------------------------------------
# module_precision attention_proj: mxfp8 in an fp8_recipe mxfp8 run priced the same step and memory as without it,
# without a word.

def test_a_module_at_the_runs_own_recipe_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    nano = ["-m", str(ROOT / "examples" / "workloads" / "nemotron-3-nano.yaml"), "-n", "64", "--ep", "8"]
    base = ("predict", "-c", "dgx-b200", *nano, "--precision", "fp8", "--set", "training.fp8_recipe=mxfp8")
    got = accepted(cli, *base, "--set", "training.module_precision.attention_proj=mxfp8")
    assert ("training.module_precision.attention_proj = mxfp8 is not priced: the run's own recipe is mxfp8 (the "
            "module runs as every other one does)") in got["warnings"], got["warnings"]
    plain = accepted(cli, *base)
    assert got["step_time_s"] == plain["step_time_s"] and got["memory"] == plain["memory"]
    got = accepted(cli, "predict", "-c", "dgx-b200", *nano, "--precision", "fp8", "--set",
                   "training.module_precision.attention_proj=mxfp8")  # delayed run: the module differs, no warning
    assert not any("module_precision" in w for w in got["warnings"]), got["warnings"]


# --- a kernel the accelerator has no curve for names where it was written ----------------------------------------
# A launch's --attention-backend fused on an A100 (no cuDNN curve) was refused as "training.attention_kernel: ...",
# an option the user never gave; the check ran in the engine only.

@pytest.mark.parametrize("command", ["predict", "plan", "memory", "scale"])
def test_a_kernel_without_a_curve_names_the_launch_flag(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --bf16 --attention-backend fused\n")
    refused(cli, command, "-c", "dgx-a100", *GPT, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --attention-backend: no fitted cudnn attention curve for a100-sxm-80g")


def test_a_kernel_without_a_curve_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-a100", *GPT, "--set", "training.attention_kernel=cudnn",
            match="error: --set training.attention_kernel: no fitted cudnn attention curve for a100-sxm-80g")


# --- a runs file's refusal names the run's own field ----------------------------------------------------------------
# A run writes training fields by their own names (module_precision, cudnn_release at the top of the run); the
# engine's refusals named "run 1 (line 1): training.module_precision.mtp", a section a runs file does not have.

@pytest.mark.parametrize("field, value, named", [
    ("module_precision", "{mtp: bf16}", "module_precision.mtp: the model has no multi-token prediction layers"),
    ("cudnn_release", "'9.9'", f"cudnn_release: {_NOT_HELD}"),
])
def test_a_runs_file_refusal_names_the_runs_field(cli, tmp_path, field: str, value: str, named: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text("".join(f"- cluster: dgx-b200\n  model: gpt-1.7b\n  gpus: {g}\n  global_batch: 64\n"
                         f"  step_time: 0.{g}\n  precision: fp8\n  {field}: {value}\n" for g in (8, 16)))
    refused(cli, "calibrate", "runs", str(f), inputs=(f,), match=f"error: {f}: run 1 (line 1): {named}")


# --- the sliding-window CP refusal names the field the user wrote -------------------------------------------------
# It was "strategy.cp_comm_type: ..." whatever was written: a scenario's `strategy: {cp: 2}` under `scale --scenario`
# and a launch's --context-parallel-size 2 were refused at a field neither holds, the file not named.

_WINDOW = "Transformer Engine refuses sliding-window attention (workload sliding_window 4096)"
MISTRAL = ["-m", "mistral-7b", "-c", "dgx-h100", "-n", "16"]


def test_the_window_refusal_names_the_scenarios_cp(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "scen.yaml"
    f.write_text("kind: scenario\nname: w\ncluster: dgx-h100\nmodel: mistral-7b\ngpus: [16]\n"
                 "training: {global_batch: 16}\nstrategy: {cp: 2}\n")
    refused(cli, "scale", "--scenario", str(f), inputs=(f,), match=f"error: --scenario: {f}: strategy.cp: {_WINDOW}")


@pytest.mark.parametrize("flags, named", [("--context-parallel-size 2", "--context-parallel-size"),
                                          ("--context-parallel-size 2 --cp-comm-type p2p", "--cp-comm-type")])
@pytest.mark.parametrize("command", ["predict", "memory"])
def test_the_window_refusal_names_the_launch_flag(cli, tmp_path, flags: str, named: str, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --micro-batch-size 1 --bf16 {flags}\n")
    refused(cli, command, *MISTRAL, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: {named}: {_WINDOW}")


def test_the_window_refusal_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *MISTRAL, "--set", "strategy.cp=2", match=f"error: --set strategy.cp: {_WINDOW}")


def test_a_module_of_a_run_with_every_layer_in_bf16_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """bf16_layers = every layer keeps each layer BF16 whole (Megatron-Core applies a module's override only inside
    a quantized layer): module_precision priced nothing and said nothing."""
    nano = ["-m", str(ROOT / "examples" / "workloads" / "nemotron-3-nano.yaml"), "-n", "64", "--ep", "8"]
    # tensorwise: Megatron-Core refuses BF16 layers under the default delayed recipe (review29c)
    fp8 = ("--precision", "fp8", "--set", "training.fp8_recipe=tensorwise")
    base = ("predict", "-c", "dgx-b200", *nano, *fp8, "--set", "training.bf16_layers=52")
    got = accepted(cli, *base, "--set", "training.module_precision.attention_proj=mxfp8")
    assert ("training.module_precision.attention_proj = mxfp8 is not priced: training.bf16_layers keeps every layer in "
            "BF16 (a module's precision applies only inside a quantized layer)") in got["warnings"], got["warnings"]
    assert got["step_time_s"] == accepted(cli, *base)["step_time_s"]
    got = accepted(cli, "predict", "-c", "dgx-b200", *nano, *fp8, "--set", "training.bf16_layers=26",
                   "--set", "training.module_precision.attention_proj=mxfp8")  # half the layers quantized: priced
    assert not any("module_precision" in w for w in got["warnings"]), got["warnings"]
