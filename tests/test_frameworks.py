"""``--strategy FILE``: DeepSpeed JSON, Megatron-LM flags, torchtitan TOML and scalemodel YAML.

The files in tests/data/frameworks/ follow the published formats: DeepSpeed's config-json
(https://www.deepspeed.ai/docs/config-json/), a Megatron-LM launch script laid out as
examples/gpt3/train_gpt3_175b_distributed.sh, and torchtitan's train_configs/*.toml. Each test
states the values by hand from the file, and the round trips check that a file gives exactly the
prediction of the same settings typed as flags.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalemodel.errors import InputError
from scalemodel.specs import notices
from scalemodel.specs.frameworks import read_strategy_file

DATA = Path(__file__).parent / "data" / "frameworks"


def read(name: str):  # type: ignore[no-untyped-def]
    notices.clear()
    return read_strategy_file(DATA / name)


def test_deepspeed_zero3_offload() -> None:
    sf = read("ds_zero3_offload.json")
    assert sf.format == "deepspeed"
    assert sf.training == {"micro_batch": 4, "precision": "bf16"}
    # reduce_bucket_size 5e8 elements of bf16 gradients = 1e9 bytes
    # offload_optimizer device cpu is read as offload_states (offload35, docs/model.md#state-offload), not warned
    assert sf.strategy == {"zero": "3", "bucket_size": 1e9, "overlap": True, "offload_states": "optimizer"}
    assert sf.gradient_accumulation == 8 and sf.global_batch_at(16) == 4 * 8 * 16
    text = " ".join(notices.current())
    assert "offload_optimizer.device cpu" not in text and "stage3_prefetch_bucket_size" in text


def test_deepspeed_zero2_fp16() -> None:
    sf = read("ds_zero2_fp16.json")
    assert sf.training == {"global_batch": 512, "micro_batch": 2, "precision": "fp16"}
    assert sf.strategy == {"zero": "2", "bucket_size": 4e8, "overlap": False}  # 2e8 fp16 elements
    assert any("allgather_bucket_size" in u for u in sf.unused)
    assert any("activation_checkpointing" in u for u in sf.unused)


def test_deepspeed_auto_values_are_named() -> None:
    sf = read("ds_hf_trainer_auto.json")
    assert sf.training == {} and sf.strategy == {"zero": "3", "overlap": True}
    assert sum("auto" in u for u in sf.unused) == 4


def test_megatron_launch_script() -> None:
    sf = read("megatron_gpt3_175b.sh")
    assert sf.format == "megatron"
    # --bf16 reduces the data-parallel gradients in fp32 (Megatron-LM sets accumulate_allreduce_grads_in_fp32 unless
    # --grad-reduce-in-bf16): 4 bytes per gradient element
    assert sf.training == {"micro_batch": 1, "global_batch": 1536, "seq_len": 2048, "precision": "bf16",
                           "grad_bytes_per_param": 4.0}
    # 96 layers / (PP 8 x 3 layers per virtual stage) = 4 virtual stages
    assert sf.strategy == {"tp": 8, "pp": 8, "sequence_parallel": True, "zero": "1", "overlap": True,
                           "recompute": "selective", "schedule": "interleaved:4", "megatron_ddp": True,
                           "overlap_p2p_comm": True,  # Megatron-LM's default with virtual stages (4eeff55d1f)
                           "check_for_nan_in_grad": True,  # Megatron-LM's default (nancheck37)
                           "check_for_nan_in_loss": True}  # the same argument's loss check (nanchunk38)
    assert any("--num-layers" in u for u in sf.unused)  # model flags are named, not used


def test_megatron_uneven_stages_and_partial_recompute() -> None:
    sf = read("megatron_uneven.args")
    assert sf.strategy["first_stage_layers"] == 7 and sf.strategy["last_stage_layers"] == 7
    assert (sf.strategy["tp"], sf.strategy["pp"], sf.strategy["recompute"]) == (8, 16, "full")
    assert any("--recompute-num-layers" in u for u in sf.unused)
    # expert TP is modelled since MoE parallel folding (strategy.etp): read, no longer listed as unused
    assert sf.strategy["etp"] == 1 and not any("--expert-tensor-parallel-size" in u for u in sf.unused)


def test_megatron_shell_variables_are_named(tmp_path: Path) -> None:
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size 2\n")
    notices.clear()
    sf = read_strategy_file(f)
    # issue 13: Megatron DDP, no overlap flag; nancheck37: its gradient NaN check, Megatron-LM's default
    assert sf.strategy == {"pp": 2, "megatron_ddp": True, "overlap": False, "check_for_nan_in_grad": True,
                           "check_for_nan_in_loss": True}
    assert any("$TP" in u for u in sf.unused)


def test_torchtitan_tomls() -> None:
    sf = read("torchtitan_llama3_8b.toml")
    assert sf.format == "torchtitan"
    # FSDP reduces in float32, torchtitan's only mixed_precision_reduce (4 bytes a gradient element on the wire)
    assert sf.training == {"micro_batch": 1, "seq_len": 8192, "grad_bytes_per_param": 4.0}
    # selective_ac_option "op": torchtitan's op-level policy (was the Megatron core_attn default before titan_op);
    # compile = false at tp 1: the eager F.cross_entropy(pred.float())
    # FSDP is FSDP2's fully_shard: its copy-out / copy-in around the collectives (fsdp_per_param)
    # torchtitan's TransformerBlock with compile = false: its eager ATen ops (layer_impl torchtitan_eager)
    assert sf.strategy == {"tp": 1, "pp": 1, "cp": 1, "zero": "fsdp", "fsdp_per_param": True, "recompute": "selective",
                           "recompute_modules": "titan_op", "loss_impl": "torch", "layer_impl": "torchtitan_eager"}
    sf = read("torchtitan_llama3_70b.toml")
    assert sf.training == {"micro_batch": 2, "global_batch": 256, "seq_len": 8192, "precision": "bf16",
                           "grad_bytes_per_param": 4.0}
    # fsdp_reshard_after_forward "default" (not set) with pipeline parallelism: torchtitan does not reshard
    # tp 8: torchtitan's TP plan is sequence-parallel (parallelize_llama.py apply_tp @e7c0cae: SequenceParallel norms,
    # row-parallel outputs Shard(1)), so SP is on
    assert sf.strategy == {"tp": 8, "pp": 4, "cp": 1, "zero": "fsdp", "schedule": "interleaved:2", "recompute": "full",
                           "fsdp_reshard_after_forward": False, "fsdp_per_param": True,
                           "layer_impl": "torchtitan_eager", "sequence_parallel": True}  # no compile key: eager
    assert any("Interleaved1F1B" in u for u in sf.unused)


def test_scalemodel_yaml() -> None:
    sf = read("strategy.yaml")
    assert sf.format == "scalemodel" and sf.unused == []
    assert sf.strategy["schedule"] == "interleaved:2" and sf.training["global_batch"] == 512


def test_bad_files_are_one_clear_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "ds.json"
    bad.write_text('{"zero_optimization": {"stage": "three"}}')
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(bad))
    assert r.code == 2 and r.err.count("\n") == 1 and "zero_optimization.stage" in r.err
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(tmp_path / "none.json"))
    assert r.code == 2 and "--strategy" in r.err and "not found" in r.err
    toml = tmp_path / "t.toml"
    toml.write_text("[training\nseq_len = 1")
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(toml))
    assert r.code == 2 and "malformed TOML" in r.err


def _predict(cli, *args: str) -> dict:  # type: ignore[no-untyped-def, type-arg]
    r = cli("predict", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("model", "gpus", "name", "flags"), [
    ("gpt3-175b", "1024", "megatron_gpt3_175b.sh",
     ["--tp", "8", "--pp", "8", "--schedule", "interleaved:4", "--sequence-parallel", "--zero", "1", "--recompute",
      "selective", "--overlap", "--micro-batch", "1", "--global-batch", "1536", "--seq-len", "2048", "--precision",
      "bf16", "--set", "training.grad_bytes_per_param=4", "--set", "strategy.megatron_ddp=true",
      "--set", "strategy.overlap_p2p_comm=true",  # Megatron-LM's default with virtual stages
      "--set", "strategy.check_for_nan_in_grad=true",  # Megatron-LM's default (nancheck37)
      "--set", "strategy.check_for_nan_in_loss=true"]),  # the same argument's loss check (nanchunk38)
    ("llama3-8b", "64", "ds_zero3_offload.json",
     ["--zero", "3", "--overlap", "--micro-batch", "4", "--global-batch", str(4 * 8 * 64), "--precision", "bf16",
      "--set", "strategy.bucket_size=1e9", "--set", "strategy.offload_states=optimizer"]),
    ("llama3-70b", "128", "torchtitan_llama3_70b.toml",
     ["--tp", "8", "--pp", "4", "--cp", "1", "--zero", "fsdp", "--schedule", "interleaved:2", "--recompute", "full",
      "--micro-batch", "2", "--global-batch", "256", "--seq-len", "8192", "--precision", "bf16",
      "--set", "strategy.fsdp_reshard_after_forward=false",  # torchtitan's default with PP
      "--set", "training.grad_bytes_per_param=4",  # its only FSDP reduce dtype, float32
      "--set", "strategy.fsdp_per_param=true",  # FSDP2's fully_shard
      "--set", "strategy.layer_impl=torchtitan_eager",  # torchtitan's TransformerBlock, not compiled
      "--sequence-parallel"]),  # torchtitan's TP plan is sequence-parallel
    ("llama3-70b", "256", "strategy.yaml",
     ["--tp", "8", "--pp", "4", "--zero", "1", "--recompute", "selective", "--sequence-parallel", "--schedule",
      "interleaved:2", "--micro-batch", "2", "--global-batch", "512", "--seq-len", "4096", "--precision", "bf16"]),
])
def test_file_round_trips_to_the_same_prediction_as_flags(cli, model: str, gpus: str, name: str,  # type: ignore[no-untyped-def]
                                                         flags: list[str]) -> None:
    common = ["-m", model, "-c", "dgx-h100", "-n", gpus]
    from_file = _predict(cli, *common, "--strategy", str(DATA / name))
    from_flags = _predict(cli, *common, *flags)
    assert from_file["strategy"] == from_flags["strategy"]
    assert from_file["step_time_s"] == from_flags["step_time_s"]
    assert from_file["inputs"]["training"] == from_flags["inputs"]["training"]
    echo = from_file["inputs"]["strategy_file"]
    assert echo["path"].endswith(name) and echo["strategy"]  # the JSON says what came from the file


def test_explicit_flags_override_the_file(cli) -> None:  # type: ignore[no-untyped-def]
    doc = _predict(cli, "-m", "gpt3-175b", "-c", "dgx-h100", "-n", "1024", "--strategy",
                   str(DATA / "megatron_gpt3_175b.sh"), "--pp", "4", "--schedule", "1f1b", "--micro-batch", "2")
    s = doc["strategy"]
    assert (s["tp"], s["pp"], s["schedule"], s["micro_batch"], s["zero"]) == (8, 4, "1f1b", 2, "1")
    assert doc["inputs"]["strategy_file"]["strategy"]["pp"] == 8  # the echo keeps what the file said


def test_every_strategy_command_takes_the_file(cli) -> None:  # type: ignore[no-untyped-def]
    f = str(DATA / "torchtitan_llama3_70b.toml")
    for args in (["memory", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "128"],
                 ["sensitivity", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "128"],
                 ["scale", "-m", "llama3-70b", "-c", "dgx-h100", "--gpus", "128,256"],
                 ["plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "128", "--top", "1"]):
        r = cli(*args, "--strategy", f, "--json")
        assert r.code == 0, (args, r.err)
        doc = json.loads(r.out)
        assert any("[model] llama3 70B" in w for w in doc["warnings"]), args
        assert all(line.startswith("warning: ") for line in r.err.splitlines()), args
    plan = json.loads(cli("plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "128", "--top", "1", "--strategy", f,
                          "--json").out)
    best = plan["ranked"][0]["strategy"]
    assert (best["tp"], best["pp"], best["micro_batch"], best["recompute"]) == (8, 4, 2, "full")


def test_unknown_strategy_text_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("- just\n- a list\n")
    with pytest.raises(InputError):
        read_strategy_file(f)


def test_a_bad_value_in_a_strategy_yaml_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 8\n  zeroo: 1\n")
    with pytest.raises(InputError) as info:
        read_strategy_file(f)
    msg = info.value.message()
    assert str(f) in msg and "zeroo" in msg and "zero" in msg


@pytest.mark.parametrize(("args", "match"), [
    (["predict", "-m", "gpt-1.7b", "-n", "8", "--tensor-model-parallel-size", "8"], "--strategy FILE"),
    (["predict", "-m", str(DATA / "ds_zero2_fp16.json"), "-n", "8"], "a DeepSpeed config"),
    (["predict", "-m", str(DATA / "torchtitan_llama3_8b.toml"), "-n", "8"], "--strategy FILE"),
    (["predict", "-c", str(DATA / "ds_zero3_offload.json"), "-n", "8"], "a DeepSpeed config"),
])
def test_framework_configs_in_the_wrong_place_point_to_strategy(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1 and match in r.err


def test_megatron_virtual_stage_spellings(tmp_path: Path) -> None:
    f = tmp_path / "a.args"
    f.write_text("--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 3\n")
    # issue 13: Megatron DDP, no --overlap-grad-reduce; overlap_p2p_comm: Megatron-LM's default when interleaved
    assert read_strategy_file(f).strategy == {"pp": 4, "schedule": "interleaved:3", "megatron_ddp": True,
                                              "overlap": False, "overlap_p2p_comm": True, "check_for_nan_in_grad": True,
                                              "check_for_nan_in_loss": True}
    f.write_text("--pipeline-model-parallel-size=4 --virtual-pipeline-model-parallel-size=2\n")
    assert read_strategy_file(f).strategy == {"pp": 4, "schedule": "interleaved:2", "megatron_ddp": True,
                                              "overlap": False, "overlap_p2p_comm": True, "check_for_nan_in_grad": True,
                                              "check_for_nan_in_loss": True}


def test_megatron_tp_pp_dp_mapping_is_the_rank_order(tmp_path: Path) -> None:
    """--use-tp-pp-dp-mapping: Megatron-LM's order "tp-cp-ep-pp-dp" (megatron/training/initialize.py)."""
    from scalemodel.commands.common import strategy_constraints

    f = tmp_path / "a.args"
    f.write_text("--pipeline-model-parallel-size 4 --use-tp-pp-dp-mapping\n")
    sf = read_strategy_file(f)
    # issue 13: Megatron DDP, no overlap flag
    assert sf.strategy == {"pp": 4, "layout": "tp-cp-pp-dp", "megatron_ddp": True, "overlap": False,
                           "check_for_nan_in_grad": True,  # nancheck37: Megatron-LM's default
                           "check_for_nan_in_loss": True}  # nanchunk38: the same argument's loss check
    assert "layout=tp-cp-pp-dp" in strategy_constraints(sf, None)  # plan pins the file's order


def test_torchtitan_reduce_dtype_sets_the_gradient_width(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text('[training]\nmixed_precision_param = "bfloat16"\nmixed_precision_reduce = "float32"\n')
    assert read_strategy_file(f).training == {"precision": "bf16", "grad_bytes_per_param": 4.0}
    # without FSDP sharding (dp_shard 1) there is no reduce-scatter and the default is not set
    f.write_text("[parallelism]\ndata_parallel_shard_degree = 1\n")
    assert "grad_bytes_per_param" not in read_strategy_file(f).training


@pytest.mark.parametrize(("text", "impl", "layer"), [
    ("[training]\ncompile = true\n", "inductor", "torchtitan"),  # e7c0cae: build_cross_entropy_loss compiles it
    ("[training]\ncompile = false\n", "torch", "torchtitan_eager"),
    ("", "torch", "torchtitan_eager"),  # compile's default is false
    ("[compile]\nenable = true\n", "inductor", "torchtitan"),  # HEAD: CompileConfig.components ["model", "loss"]
    ('[compile]\nenable = true\ncomponents = ["model"]\n', "torch", "torchtitan"),
    ("[training]\ncompile = true\n[parallelism]\ntensor_parallel_degree = 2\n", None, "torchtitan"),  # loss_parallel
    ("[training]\ncompile = true\n[parallelism]\ntensor_parallel_degree = 2\ndisable_loss_parallel = true\n",
     "inductor", "torchtitan"),
])
def test_torchtitan_loss_follows_compile(tmp_path: Path, text: str, impl: str | None, layer: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(text)
    sf = read_strategy_file(f)
    assert sf.strategy.get("loss_impl") == impl
    assert sf.strategy["layer_impl"] == layer  # the block compiled with the model, else its eager ops


@pytest.mark.parametrize(("text", "impl"), [
    ("[model]\nnorm_type = \"fused_rmsnorm\"\n", "torchtitan_eager_fused_rmsnorm"),  # 1ea476e9f's Triton norm
    ("[model]\nnorm_type = \"rmsnorm\"\n", "torchtitan_eager"),
    ("[model]\nnorm_type = \"fused_rmsnorm\"\n[training]\ncompile = true\n", "torchtitan"),
    ('[compile]\nenable = true\ncomponents = ["loss"]\n', "torchtitan_eager"),  # only the loss compiled
])
def test_torchtitan_layer_follows_compile_and_norm_type(tmp_path: Path, text: str, impl: str) -> None:
    f = tmp_path / "t.toml"
    f.write_text(text)
    assert read_strategy_file(f).strategy["layer_impl"] == impl


@pytest.mark.parametrize("norm", ["layernorm", "np_layernorm", "rmsnrom"])
def test_torchtitan_eager_norm_type_not_priced_is_refused(tmp_path: Path, norm: str) -> None:
    # torchtitan@1ea476e9f models/norms.py build_norm: layernorm / np_layernorm are nn.LayerNorm (one ATen
    # layer_norm kernel, not the 36 + 92 B a element of the Python RMSNorm torchtitan_eager prices); any other name
    # raises NotImplementedError there. Uncompiled, the reader must not price them as the Python RMSNorm.
    f = tmp_path / "t.toml"
    f.write_text(f'[model]\nnorm_type = "{norm}"\n')
    with pytest.raises(InputError, match="model.norm_type"):
        read_strategy_file(f)


def test_torchtitan_bad_compile_switch(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text('[training]\ncompile = "yes"\n')
    with pytest.raises(InputError, match="training.compile"):
        read_strategy_file(f)


def test_megatron_moe_a2a_overlap_switch(tmp_path: Path) -> None:
    # --overlap-moe-expert-parallel-comm is read into strategy.moe_a2a_overlap, not listed as unused
    f = tmp_path / "moe.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --expert-model-parallel-size 8 "
                 "--overlap-moe-expert-parallel-comm --delay-wgrad-compute\n")
    sf = read_strategy_file(f)
    assert sf.strategy["moe_a2a_overlap"] is True
    assert not any("--overlap-moe-expert-parallel-comm" in u for u in sf.unused)



def test_expert_tp_on_a_dense_model_is_ignored_with_a_warning(cli) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM applies --expert-tensor-parallel-size to expert layers only, so a dense model's launch line that
    carries it (megatron_uneven.args: etp 1, llama3-405b) is priced as without it and says so, not refused."""
    doc = _predict(cli, "-m", "llama3-405b", "-c", "dgx-h100", "-n", "1024", "--strategy",
                   str(DATA / "megatron_uneven.args"))
    assert any("strategy.etp = 1 is not priced" in w for w in doc["warnings"])
    assert doc["strategy"]["etp"] is None and doc["step_time_s"] > 0
