"""Hostile-input round 13b: the surface new in the last merges (LatentMoE moe.latent_size, hybrid.mtp_pattern,
mtp_shared, squared_relu, NemotronH configs with moe_latent_size / mtp_layers_block_type, precision fp4 and its
aliases, training.bf16_layers, recompute_modules moe, train_metric_passes, eager_bias_dropout_add, and the
Megatron reader's --fp4-format, --fp4-recipe, --first-last-layers-bf16, --num-layers-at-{start,end}-in-bf16).

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

NANO = ["-m", "nemotron-3-nano", "-n", "64"]
_BLACKWELL = "precision fp4 (NVFP4) needs Blackwell tensor cores; h100-sxm is hopper"
_LAYERS = "is more than the model's 52 layers; 0 to 52"


def _launch(tmp_path, flags: str):  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --bf16 --expert-model-parallel-size 8 " + flags + "\n")
    return f


# --- an fp4 / bf16_layers refusal names where the setting was written -------------------------------------------
# The engine refused them as "training.precision: ..." / "training.bf16_layers: ..." whatever the user wrote.

@pytest.mark.parametrize("command", ["predict", "plan", "memory", "scale", "sensitivity"])
def test_fp4_off_blackwell_names_the_option(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, command, "-c", "dgx-h100", *NANO, "--precision", "fp4", "--json", match=f"error: --precision: "
            f"{_BLACKWELL}")


def test_fp4_off_blackwell_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", "dgx-h100", *NANO, "--set", "training.precision=nvfp4",
            match=f"error: --set training.precision: {_BLACKWELL}")


@pytest.mark.parametrize("command", ["predict", "plan", "memory"])
def test_fp4_off_blackwell_names_the_launch_flag(cli, tmp_path, command: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, "--fp4-format e2m1")
    refused(cli, command, "-c", "dgx-h100", *NANO, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --fp4-format: {_BLACKWELL}")


def test_fp4_on_a_part_without_an_fp4_peak_names_the_option(cli) -> None:  # type: ignore[no-untyped-def]
    """An accelerator declared Blackwell without an fp4 peak: "precision: accelerator ... has no fp4 peak"."""
    refused(cli, "predict", "-c", "dgx-h100", *NANO, "--precision", "fp4", "--set", "accelerator.family=blackwell",
            match="error: --precision: accelerator 'h100-sxm' has no fp4 peak")


@pytest.mark.parametrize("flags, named", [
    ("--first-last-layers-bf16 --num-layers-at-start-in-bf16 300", "--num-layers-at-start-in-bf16"),
    ("--first-last-layers-bf16 --num-layers-at-end-in-bf16 60", "--num-layers-at-end-in-bf16"),
    ("--first-last-layers-bf16 --num-layers-at-start-in-bf16 30 --num-layers-at-end-in-bf16 30",
     "--num-layers-at-start-in-bf16 + --num-layers-at-end-in-bf16"),
])
@pytest.mark.parametrize("command", ["predict", "plan", "memory"])
def test_too_many_bf16_layers_names_the_launch_flags(cli, tmp_path, flags: str, named: str,  # type: ignore[no-untyped-def]
                                                     command: str) -> None:
    f = _launch(tmp_path, "--fp4-format e2m1 " + flags)
    refused(cli, command, "-c", "dgx-b200", *NANO, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: {named}: bf16_layers")


def test_too_many_bf16_layers_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "scale", "-c", "dgx-b200", *NANO, "--precision", "fp4", "--set", "training.bf16_layers=1000",
            match=f"error: --set training.bf16_layers: bf16_layers 1000 {_LAYERS}")


def test_bf16_layers_on_a_generic_workload_names_the_launch_flag(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, "--fp4-format e2m1 --first-last-layers-bf16")
    refused(cli, "predict", "-c", "dgx-b200", "-m", "resnet50", "-n", "64", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --first-last-layers-bf16: bf16_layers 2 keeps transformer layers")


def test_a_strategy_yaml_training_field_is_named_in_plan(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """plan merges the file's training values with the options: the refusal named --precision, never given."""
    f = tmp_path / "s.yaml"
    f.write_text("training: {precision: fp4}\n")
    line = refused(cli, "plan", "-c", "dgx-h100", *NANO, "--strategy", str(f), inputs=(f,),
                   match=f"error: --strategy: {f}: training.precision: {_BLACKWELL}")
    assert "--precision" not in line


# --- Megatron flags that price nothing are reported, not dropped ----------------------------------------------------

@pytest.mark.parametrize("flags, unused", [
    ("--fp4-recipe nvfp4", "--fp4-recipe without --fp4-format"),
    ("--fp4-format e2m1 --num-layers-at-start-in-bf16 3", "--num-layers-at-start-in-bf16 without "
                                                           "--first-last-layers-bf16"),
    ("--fp8-format hybrid --num-layers-at-start-in-bf16 3 --num-layers-at-end-in-bf16 4",
     "--num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16 without --first-last-layers-bf16"),
])
def test_megatron_fp4_flags_without_their_switch_are_reported(cli, tmp_path, flags: str, unused: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, flags)
    r = cli("predict", "-c", "dgx-b200", *NANO, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert unused in r.err
    assert unused.split(" without")[0] in " ".join(json.loads(r.out)["inputs"]["strategy_file"]["unused"])


def test_fp4_recipe_without_a_value_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """argparse refuses "--fp4-recipe" with no value; it was read as the default nvfp4."""
    f = _launch(tmp_path, "--fp4-format e2m1 --fp4-recipe")
    refused(cli, "predict", "-c", "dgx-b200", *NANO, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: --fp4-recipe: unknown fp4 recipe: no value; nvfp4")


# --- workload switches ----------------------------------------------------------------------------------------------

def _super(tmp_path, old: str, new: str):  # type: ignore[no-untyped-def]
    from test_hostile_inputs import ROOT
    text = (ROOT / "examples" / "workloads" / "nemotron-3-super.yaml").read_text()
    assert old in text
    f = tmp_path / "super.yaml"
    f.write_text(text.replace(old, new, 1))
    return f


def test_mtp_shared_without_mtp_layers_warns(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """mtp_shared true with mtp_layers 0 shares nothing and was silent."""
    f = _super(tmp_path, "mtp_layers: 2", "mtp_layers: 0")
    r = cli("predict", "-c", "dgx-b200", "-m", str(f), "-n", "64", "--ep", "8", "--json")
    assert r.code == 0, r.err
    assert "model.mtp_shared is not priced: mtp_layers is 0" in r.err
    json.loads(r.out)
    r = cli("predict", "-c", "dgx-b200", "-m", str(_super(tmp_path, "mtp_shared: true", "mtp_shared: true")), "-n",
            "64", "--ep", "8")
    assert r.code == 0 and "mtp_shared" not in r.err


def test_squared_relu_with_a_gated_mlp_names_the_field(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Was reported at "(top level)", the file's first line."""
    f = _super(tmp_path, "gated_mlp: false", "gated_mlp: true\nsquared_relu: true")
    line = refused(cli, "memory", "-m", str(f), "-n", "64", inputs=(f,), match=f"error: {f}:14: squared_relu: ")
    assert "(top level)" not in line


# --- NemotronH config.json MTP block --------------------------------------------------------------------------------

_HF = {"model_type": "nemotron_h", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
       "head_dim": 64, "vocab_size": 1024, "hybrid_override_pattern": "M*E", "mamba_num_heads": 8,
       "mamba_head_dim": 64, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
       "moe_latent_size": 64, "num_nextn_predict_layers": 1, "max_position_embeddings": 1024}


@pytest.mark.parametrize("kinds", ["full_attention,moe", {"a": 1}, 5])
def test_hf_mtp_layers_block_type_not_a_list_is_refused(cli, tmp_path, kinds) -> None:  # type: ignore[no-untyped-def]
    """A non-list mtp_layers_block_type was ignored, the default block priced."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**_HF, "mtp_layers_block_type": kinds}))
    refused(cli, "memory", "-m", str(f), "-n", "8", inputs=(f,),
            match=f"error: {f}: mtp_layers_block_type: expected a list of layer kinds")


@pytest.mark.parametrize("change, key", [
    ({"mtp_hybrid_override_pattern": "*-"}, "mtp_hybrid_override_pattern"),
    ({"mtp_layers_block_type": ["full_attention", "mlp"]}, "mtp_layers_block_type"),
    ({"hybrid_override_pattern": "M*-", "n_routed_experts": None, "num_experts_per_tok": None,
      "moe_intermediate_size": None, "moe_latent_size": None}, "mtp_layers_block_type (not given"),
])
def test_hf_mtp_block_of_the_wrong_mlp_kind_names_the_config_key(cli, tmp_path, change, key: str) -> None:  # type: ignore[no-untyped-def]
    """Was refused at hybrid.mtp_pattern, a key no config.json has."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps({k: v for k, v in {**_HF, **change}.items() if v is not None}))
    line = refused(cli, "memory", "-m", str(f), "-n", "8", inputs=(f,), match=f"error: {f}: {key}")
    assert "hybrid.mtp_pattern" not in line and "does not match the model's MLP kind" in line


def test_hf_dense_mtp_block_still_loads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "config.json"
    cfg = {k: v for k, v in {**_HF, "hybrid_override_pattern": "M*-", "n_routed_experts": None,
                             "num_experts_per_tok": None, "moe_intermediate_size": None, "moe_latent_size": None,
                             "intermediate_size": 512, "mtp_layers_block_type": ["full_attention", "mlp"]}.items()
           if v is not None}
    f.write_text(json.dumps(cfg))
    assert accepted(cli, "memory", "-m", str(f), "-n", "8")


# --- plan never ranks a moe_a2a_overlap strategy that predict refuses -----------------------------------------------

def test_plan_with_moe_a2a_overlap_ranks_only_what_predict_runs(cli) -> None:  # type: ignore[no-untyped-def]
    """A pinned moe_a2a_overlap was priced with its all-to-alls exposed where Megatron-Core refuses it (ep 1, full
    recompute, selective recompute of moe, pp > 1 without the interleaved schedule) and those plans were ranked,
    each one a strategy predict refuses (job._check_moe_a2a_overlap)."""
    out = accepted(cli, "plan", "-c", "dgx-b200", "-m", "nemotron-3-nano", "-n", "64", "--top", "40",
                   "--set", "strategy.moe_a2a_overlap=true")
    assert out["ranked"] and out["infeasible_by_reason"]["moe_a2a_overlap_invalid"] > 0
    for row in out["ranked"]:
        st = row["strategy"]
        assert st["moe_a2a_overlap"] and st["ep"] > 1 and st["recompute"] != "full"
        assert st["pp"] == 1 or st["schedule"].startswith("interleaved"), st
        assert "moe" not in st["recompute_modules"].split(",")


def test_plan_refuses_moe_a2a_overlap_with_recompute_of_moe(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", "-c", "dgx-b200", "-m", "nemotron-3-nano", "-n", "64", "--set",
            "strategy.moe_a2a_overlap=true", "--set", "strategy.recompute=selective", "--set",
            "strategy.recompute_modules=moe", "--json",
            match="error: --set strategy.moe_a2a_overlap: moe_a2a_overlap does not run with selective recompute of moe")


# --- check names the scenario file for a training refusal -----------------------------------------------------------

_SCENARIO = """kind: scenario
name: s
cluster: {cluster}
model: nemotron-3-nano
gpus: [16, 32]
training: {{micro_batch: 1, global_batch: 64, precision: fp4{extra}}}
strategy: {{ep: 8}}
assertions: {{max_step_time: 100s}}
"""


def test_check_names_the_scenario_for_fp4_off_blackwell(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Was "error: training.precision: ...", the scenario file unnamed (scale names it)."""
    f = tmp_path / "s.yaml"
    f.write_text(_SCENARIO.format(cluster="dgx-h100", extra=""))
    refused(cli, "check", str(f), inputs=(f,), match=f"error: {f}: training.precision: {_BLACKWELL}")


def test_check_names_the_scenario_or_the_set_item_for_bf16_layers(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(_SCENARIO.format(cluster="dgx-b200", extra=", bf16_layers: 99"))
    refused(cli, "check", str(f), inputs=(f,), match=f"error: {f}: training.bf16_layers: bf16_layers 99 {_LAYERS}")
    f.write_text(_SCENARIO.format(cluster="dgx-b200", extra=""))
    refused(cli, "check", str(f), "--set", "training.bf16_layers=70", inputs=(f,),
            match=f"error: --set training.bf16_layers: bf16_layers 70 {_LAYERS}")
