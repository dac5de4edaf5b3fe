"""Hostile-input round 17: what was merged lately (Megatron-LM's recompute flags, DeepSpeed AutoTP's
tensor_parallel section, torchtitan's [activation_checkpoint], nanotron's trainer, moe_rank_imbalance, the allgather
dispatcher, the router dtype, hybrid '|' segments) fed values the frameworks refuse, ignore or read otherwise.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import MEG_LAUNCH, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]
MOE = ["-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64"]


# --- Megatron-LM's recompute flags: what Megatron refuses, and what it never reads -----------------------------------
# "--recompute-method bogus" was warned "not used" and priced as full recompute of every layer; Megatron-LM's argparse
# takes choices ('uniform', 'block') (generated from TransformerConfig.recompute_method's Literal, argument_utils.py
# L151-154 at d98e8a64dd). "--recompute-method uniform --recompute-num-layers 0" was priced as full recompute of every
# layer; Megatron-Core's uniform loop advances by the chunk size (recompute.py L158-166), so no step ends. An unknown
# --recompute-modules word was warned and the run priced without it; TransformerConfig asserts against it.

@pytest.mark.parametrize("flags, where, what", [
    ("--recompute-granularity full --recompute-method bogus --recompute-num-layers 2", "--recompute-method",
     "unknown recompute method: 'bogus'; block or uniform"),
    ("--recompute-method bogus", "--recompute-method", "unknown recompute method: 'bogus'"),
    ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 0", "--recompute-num-layers",
     "--recompute-method uniform with --recompute-num-layers 0"),
    ("--recompute-granularity selective --recompute-modules core_attn bogus", "--recompute-modules",
     "unknown module 'bogus'"),
])
def test_megatron_recompute_flags_megatron_refuses(cli, tmp_path: Path, flags: str, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    line = refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,))
    assert line.startswith(f"error: --strategy: {f}: {where}: ") and what in line, line


def test_uniform_chunks_of_zero_layers_are_refused_in_a_spec(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *DENSE, "--recompute", "full", "--set", "strategy.recompute_layers=0", "--set",
            "strategy.recompute_method=uniform", match="strategy.recompute_layers: 0 with recompute_method uniform")


def test_block_recompute_of_zero_layers_still_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--recompute-granularity full --recompute-method block --recompute-num-layers 0")
    assert accepted(cli, "predict", *DENSE, "--strategy", str(f))["strategy"]["recompute_layers"] == 0


def test_recompute_method_without_a_granularity_is_said(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without --recompute-granularity Megatron-Core reads neither flag (TransformerConfig checks them under
    ``recompute_granularity is not None``): nothing is recomputed, as priced; it was dropped without a word."""
    f = megatron_launch(tmp_path, "--recompute-method uniform --recompute-num-layers 2")
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert out["strategy"]["recompute"] == "none"
    assert any("--recompute-method uniform --recompute-num-layers 2 (no --recompute-granularity" in w
               for w in out["warnings"]), out["warnings"]


# --- DeepSpeed's tensor_parallel section --------------------------------------------------------------------------
# autotp_size 0 is DeepSpeed's default, AutoTP off (TPTrainingConfig.autotp_size: int = 0, "When set to 0, indicates
# that it is disabled", deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/tensor_parallel/config.py L45-49): it was
# refused as "expected at least 1". At 1 the engine does not shard (runtime/engine.py L332: autotp_size() > 1), but the
# run was priced as AutoTP's eager layer, not as the same config without the key. The section's other keys
# (tp_overlap_comm: AutoTP's all-reduce overlapped, not priced) were dropped without a word.

DS = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}


def _ds(tmp_path: Path, name: str, tp: dict | None) -> Path:  # type: ignore[type-arg]
    f = tmp_path / name
    f.write_text(json.dumps({**DS, **({"tensor_parallel": tp} if tp is not None else {})}))
    return f


@pytest.mark.parametrize("size", [0, 1])
def test_deepspeed_autotp_off_prices_the_config_without_it(cli, tmp_path: Path, size: int) -> None:  # type: ignore[no-untyped-def]
    bare = accepted(cli, "predict", *MOE, "--strategy", str(_ds(tmp_path, "bare.json", None)))
    off = accepted(cli, "predict", *MOE, "--strategy", str(_ds(tmp_path, "off.json", {"autotp_size": size})))
    assert off["strategy"]["layer_impl"] == bare["strategy"]["layer_impl"] == "megatron_te"
    assert off["strategy"]["tp"] == 1 and off["step_time_s"] == bare["step_time_s"]


def test_deepspeed_autotp_two_is_still_the_eager_layer(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *MOE, "--strategy", str(_ds(tmp_path, "tp2.json", {"autotp_size": 2})))
    assert out["strategy"]["tp"] == 2 and out["strategy"]["layer_impl"] == "eager"


@pytest.mark.parametrize("tp, said", [
    ({"autotp_size": 2, "tp_overlap_comm": True}, "tensor_parallel.tp_overlap_comm (AutoTP's all-reduce overlapped"),
    ({"tp_size": 4}, "tensor_parallel.tp_size"),
    ({"autotp_size": 2, "tp": {"tp_size": 2}}, "tensor_parallel.tp"),
])
def test_deepspeed_tensor_parallel_keys_not_priced_are_said(cli, tmp_path: Path, tp: dict, said: str) -> None:  # type: ignore[no-untyped-def, type-arg]
    f = _ds(tmp_path, "ds.json", tp)
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert any(said in u for u in out["inputs"]["strategy_file"]["unused"]), out["inputs"]["strategy_file"]["unused"]


def test_deepspeed_tp_overlap_comm_not_a_boolean_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _ds(tmp_path, "ds.json", {"autotp_size": 2, "tp_overlap_comm": "yes"})
    refused(cli, "predict", *DENSE, "--strategy", str(f), inputs=(f,),
            match=f"{f}: tensor_parallel.tp_overlap_comm: expected true or false, got 'yes'")


# --- moe_rank_imbalance's refusal shows the numbers it compares -------------------------------------------------------
# At :g, 4.0000001 was refused as "moe_rank_imbalance 4 exceeds ... <= min(ep, E / k) = 4", and a bound of 8 / 3 (top-3
# of 8 experts) was shown as 2.66667, which was then refused in turn ("2.66667 exceeds ... = 2.66667").

def test_rank_imbalance_refusal_shows_the_factor_given(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", *MOE, "--ep", "8", "--set", "training.moe_rank_imbalance=4.0000001")
    assert "moe_rank_imbalance 4.0000001 exceeds" in line, line


def test_rank_imbalance_bound_shown_is_one_that_is_taken(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", *MOE, "--ep", "8", "--set", "model.moe.top_k=3", "--set",
                   "training.moe_rank_imbalance=3")
    shown = line.rsplit("between 1 and ", 1)[1].split(",")[0].split()[0]
    assert abs(float(shown) - 8 / 3) < 1e-8, line  # E / k = 8 / 3 by hand
    out = accepted(cli, "predict", *MOE, "--ep", "8", "--set", "model.moe.top_k=3", "--set",
                   f"training.moe_rank_imbalance={shown}")
    assert out["feasible"] in (True, False)  # priced, not refused


# --- sweep --scheduler '' ran on local processes ------------------------------------------------------------------

def test_sweep_scheduler_without_an_address_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [{tp: 2}]\n")
    refused(cli, "sweep", str(f), "--scheduler", "", "--json", inputs=(f,),
            match="error: --scheduler: no address given; the address of a running Dask scheduler")


# --- torchtitan's [activation_checkpoint]: its default mode and its other keys are said -------------------------------
# A TOML without activation_checkpoint.mode was priced without recompute and without a word, where torchtitan's own
# default is mode "selective" with selective_ac_option "2" (pytorch/torchtitan@e7c0cae torchtitan/config_manager.py
# L436-444); keys other than mode and selective_ac_option (early_stop, memory_budget, ... of later releases) were
# dropped without a word.

TITAN = "[training]\nlocal_batch_size = 1\nseq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = -1\n"


@pytest.mark.parametrize("body, said", [
    ("", "activation_checkpoint.mode not given (torchtitan's default is selective"),
    ("[activation_checkpoint]\nselective_ac_option = 'op'\n", "activation_checkpoint.mode not given"),
    ("[activation_checkpoint]\nmode = 'full'\nearly_stop = true\n", "activation_checkpoint.early_stop"),
])
def test_torchtitan_activation_checkpoint_defaults_and_keys_are_said(cli, tmp_path: Path, body: str,  # type: ignore[no-untyped-def]
                                                                    said: str) -> None:
    f = tmp_path / "job.toml"
    f.write_text(TITAN + body)
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert any(said in u for u in out["inputs"]["strategy_file"]["unused"]), out["inputs"]["strategy_file"]["unused"]


def test_torchtitan_activation_checkpoint_mode_given_says_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text(TITAN + "[activation_checkpoint]\nmode = 'full'\n")
    out = accepted(cli, "predict", *DENSE, "--strategy", str(f))
    assert out["inputs"]["strategy_file"]["unused"] == [] and out["strategy"]["recompute"] == "full"


# --- nanotron's ZeRO-1 with fp32 accumulation has no buckets: a bucket_size there is said, not priced -----------------
# nanotron builds no DDP wrapper at zero_stage > 0 with accumulate_grad_in_fp32 (huggingface/nanotron@c2528430
# trainer.py init_model L786-788) and all-reduces the whole fp32 buffer in one call after the last backward; a given
# bucket_size priced a bucketed sync under the backward instead (llama3-8b, 64 H100s: 1.058 -> 0.922 s at 100 MB).

NANO = [*DENSE, "--zero", "1", "--set", "strategy.nanotron_trainer=true", "--set", "training.grad_bytes_per_param=4"]


def test_nanotron_zero1_fp32_bucket_size_is_not_priced(cli) -> None:  # type: ignore[no-untyped-def]
    bare = accepted(cli, "predict", *NANO)
    given = accepted(cli, "predict", *NANO, "--set", "strategy.bucket_size=100MB")
    assert given["step_time_s"] == bare["step_time_s"], (given["step_time_s"], bare["step_time_s"])
    assert any(w.startswith("strategy.bucket_size = 1e+08 B is not priced: nanotron_trainer at zero 1")
               for w in given["warnings"]), given["warnings"]


def test_nanotron_zero0_bucket_size_is_still_priced(cli) -> None:  # type: ignore[no-untyped-def]
    """At ZeRO 0 nanotron's DDP buckets are ddp_bucket_cap_mb (config.py L222 at c2528430): a given size prices."""
    zero0 = [*DENSE, "--zero", "0", "--set", "strategy.nanotron_trainer=true"]
    bare = accepted(cli, "predict", *zero0)
    given = accepted(cli, "predict", *zero0, "--set", "strategy.bucket_size=500MB")
    assert given["step_time_s"] != bare["step_time_s"] and not any("bucket_size" in w for w in given["warnings"])


# --- training.moe_router_dtype on a model without MoE layers is said -------------------------------------------------
# moe_rank_imbalance there is warned "not priced"; the router's dtype was dropped without a word.

def test_router_dtype_without_moe_layers_is_said(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *DENSE, "--set", "training.moe_router_dtype=fp64")
    assert "training.moe_router_dtype = fp64 is not priced: the model has no MoE layers" in out["warnings"]
    assert not any("moe_router_dtype" in w for w in accepted(cli, "predict", *MOE, "--ep", "8", "--set",
                                                              "training.moe_router_dtype=fp64")["warnings"])


# --- another framework's trainer over a framework file --------------------------------------------------------------
# A Megatron-LM launch with --set strategy.nanotron_trainer=true is refused (round 16b: the reader sets megatron_ddp);
# a DeepSpeed config or a torchtitan TOML sets no trainer flag, so --set strategy.nanotron_trainer=true (or
# megatron_ddp) over one was priced as that trainer under the file's ZeRO / FSDP settings, a job no framework runs.

@pytest.mark.parametrize("name, text, flag, kind", [
    ("ds.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}', "nanotron_trainer",
     "DeepSpeed config"),
    ("ds.json", '{"train_micro_batch_size_per_gpu": 1}', "megatron_ddp", "DeepSpeed config"),
    ("job.toml", "[parallelism]\ndata_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 64\n"
                 "[activation_checkpoint]\nmode = 'none'\n", "nanotron_trainer", "torchtitan TOML"),
    ("job.toml", "[parallelism]\ndata_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 64\n"
                 "[activation_checkpoint]\nmode = 'none'\n", "megatron_ddp", "torchtitan TOML"),
])
@pytest.mark.parametrize("command", ["predict", "plan"])
def test_another_frameworks_trainer_over_a_framework_file_is_refused(cli, tmp_path: Path, name: str, text: str,  # type: ignore[no-untyped-def]
                                                                     flag: str, kind: str, command: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    refused(cli, command, *DENSE, "--strategy", str(f), "--set", f"strategy.{flag}=true", inputs=(f,),
            match=f"error: --set strategy.{flag}: true with a {kind} (--strategy {f})")


def test_deepspeed_pipeline_over_a_deepspeed_config_still_runs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}')
    out = accepted(cli, "predict", *DENSE, "--pp", "2", "--strategy", str(f), "--set",
                   "strategy.deepspeed_pipeline=true")
    assert out["strategy"]["deepspeed_pipeline"] is True


# --- sequence_parallel at tp 1 is said --------------------------------------------------------------------------------
# Echoed as on and priced as off, without a word; Megatron-LM turns it off with a warning at tp 1
# (megatron/training/arguments.py L1430-1439 at d98e8a64dd).

def test_sequence_parallel_at_tp1_is_said(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    on = accepted(cli, "predict", *DENSE, "--sequence-parallel")
    assert "strategy.sequence_parallel = true is not priced: tp is 1" in on["warnings"][0], on["warnings"]
    assert on["step_time_s"] == accepted(cli, "predict", *DENSE)["step_time_s"]
    assert not any("sequence_parallel" in w for w in accepted(cli, "predict", *DENSE, "--tp", "2",
                                                              "--sequence-parallel")["warnings"])


# --- recompute_method uniform without full recompute ---------------------------------------------------------------
# recompute_layers without recompute full is refused; recompute_method uniform with recompute none or selective was
# dropped without a word (the method orders full recompute's checkpoints only).

@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_recompute_method_uniform_needs_full_recompute(cli, recompute: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *DENSE, "--recompute", recompute, "--set", "strategy.recompute_method=uniform",
            match=f"error: --set strategy.recompute_method: uniform needs recompute: full (got '{recompute}')")


def test_plan_over_a_deepspeed_autotp_config_ranks_no_sequence_parallel_plan(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """AutoTP all-reduces each row-parallel output and runs no sequence parallelism (deepspeed/module_inject/
    auto_tp.py): plan ranked tp 2 with SP second over a config with autotp_size 2."""
    f = _ds(tmp_path, "tp2.json", {"autotp_size": 2})
    ranked = accepted(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f),
                      "-k", "3")["ranked"]
    assert ranked and all(not r["strategy"]["sequence_parallel"] and r["strategy"]["tp"] == 2 for r in ranked)
