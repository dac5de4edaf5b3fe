"""Hostile-input round 10: the newest strategy surfaces (megatron_ddp, fp8_param_gather, deepspeed_pipeline,
grad_bytes, HSDP, the Megatron launch-script reader) under hostile values and combinations.

Each case is one finding (a value read as its opposite, a combination no framework runs priced anyway, a plan
that ranked what predict refuses, an error naming an internal function, a negative zero in the output); the
contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = MEG_BASE


# --- a Megatron-LM switch given a value was read as on ---------------------------------------------------------

@pytest.mark.parametrize("flags, flag, got", [
    ("--sequence-parallel false", "--sequence-parallel", "'false'"),
    ("--sequence-parallel False", "--sequence-parallel", "'False'"),
    ("--fp8-param-gather=false --use-distributed-optimizer", "--fp8-param-gather", "'=false'"),
    ("--fp8-param-gather=true --use-distributed-optimizer --fp8-format hybrid", "--fp8-param-gather", "'=true'"),
    ("--overlap-grad-reduce 0", "--overlap-grad-reduce", "'0'"),
    ("--use_distributed_optimizer=no", "--use-distributed-optimizer", "'=no'"),
    ("--fp8-format e4m3 --moe-grouped-gemm off --num-experts 8", "--moe-grouped-gemm", "'off'"),
])
def test_a_megatron_switch_with_a_value_is_refused(cli, tmp_path, flags: str, flag: str, got: str) -> None:  # type: ignore[no-untyped-def]
    """``--sequence-parallel false`` was read as sequence parallelism on (the reader took the next word as the
    switch's value and then only asked whether the switch was present), ``--fp8-param-gather=false`` as FP8
    parameters on. Megatron-LM's switches are argparse store_true: ``--flag=value`` is refused there ("ignored
    explicit argument") and a following word is an unrecognized argument; no launch reads them as off."""
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"{flag}: a switch takes no value, got {got}; {flag} alone to turn it on, or leave it out")


def test_a_megatron_switch_before_a_positional_is_still_on(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun --sequence-parallel pretrain_gpt.py --tensor-model-parallel-size 2 --bf16\n")
    out = accepted(cli, "predict", *BASE, "--strategy", str(f))
    assert out["strategy"]["sequence_parallel"] is True and out["strategy"]["tp"] == 2


# --- Megatron's FSDP flags were dropped without a word ----------------------------------------------------------

@pytest.mark.parametrize("flag", ["--use-megatron-fsdp"])
def test_megatron_fsdp_flags_are_named_as_not_used(cli, tmp_path, flag: str) -> None:  # type: ignore[no-untyped-def]
    """``--use-torch-fsdp2 --ddp-bucket-size 5`` was priced as replicated-parameter DDP with no warning: the FSDP
    flag sat among the harmless prefixes and the bucket flag was skipped with it. --use-torch-fsdp2 is read as zero
    fsdp since fuzz37 (test_fuzz37.py); --use-megatron-fsdp is still named as not read."""
    f = megatron_launch(tmp_path, f"{flag} --ddp-bucket-size 5")
    r = cli("predict", *BASE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert f"settings not used: {flag} (FSDP is not read from the flags: give --zero fsdp" in r.err, r.err
    assert "--ddp-bucket-size not used with it" in r.err


# --- deepspeed_pipeline with a ZeRO stage DeepSpeed's PipelineEngine refuses -----------------------------------

_DS_ZERO = ("error: --set strategy.deepspeed_pipeline: true runs DeepSpeed's PipelineEngine, which asserts ZeRO stage "
            "< 2")


@pytest.mark.parametrize("zero", ["2", "3", "fsdp", "hsdp"])
@pytest.mark.parametrize("command", ["predict", "memory", "plan"])
def test_deepspeed_pipeline_with_zero_2_or_3_is_refused(cli, command: str, zero: str) -> None:  # type: ignore[no-untyped-def]
    """``--set strategy.deepspeed_pipeline=true --zero 3`` was priced (and planned): DeepSpeed's PipelineEngine
    asserts ``zero_optimization_stage() < 2`` ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
    deepspeed/runtime/pipe/engine.py PipelineEngine.__init__), so no run has that combination."""
    refused(cli, command, *BASE, "--set", "strategy.pp=2", "--set", "strategy.deepspeed_pipeline=true", "--set",
            f"strategy.zero={zero}", "--json", match=_DS_ZERO)


def test_deepspeed_pipeline_zero_in_a_sweep_names_the_row(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [64]\nstrategies:\n"
                 "  - {label: a, pp: 2, zero: 3, deepspeed_pipeline: true}\n")
    refused(cli, "sweep", str(f), "--json", inputs=(f,), match="strategies[0].deepspeed_pipeline: true runs DeepSpeed")


def test_plan_with_deepspeed_pipeline_searches_zero_0_and_1_only(cli) -> None:  # type: ignore[no-untyped-def]
    """plan ranked zero fsdp first under a pinned deepspeed_pipeline (predict now refuses that plan)."""
    out = accepted(cli, "plan", *BASE, "--set", "strategy.deepspeed_pipeline=true", "--top", "20")
    assert out["ranked"] and {r["strategy"]["zero"] for r in out["ranked"]} <= {"0", "1"}
    assert {r["strategy"]["schedule"] for r in out["ranked"]} == {"1f1b"}
    best = out["ranked"][0]
    pred = accepted(cli, "predict", *BASE, "--tp", str(best["strategy"]["tp"]), "--pp", str(best["strategy"]["pp"]),
                    "--zero", best["strategy"]["zero"], "--micro-batch", str(best["strategy"]["micro_batch"]),
                    "--set", "strategy.deepspeed_pipeline=true")
    assert pred["feasible"]


@pytest.mark.parametrize("order", ["pipeline first", "schedule first"])
def test_plan_refuses_deepspeed_pipeline_with_another_schedule_in_either_order(cli, order: str) -> None:  # type: ignore[no-untyped-def]
    """``plan --set strategy.deepspeed_pipeline=true --set strategy.schedule=interleaved:2`` ranked interleaved
    plans: the schedule pin, set after it, replaced deepspeed_pipeline's 1F1B pin (the other order was refused
    by no one either). predict refuses the pair; plan now gives predict's line."""
    sets = ["--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.schedule=interleaved:2"]
    if order == "schedule first":
        sets = sets[2:] + sets[:2]
    refused(cli, "plan", *BASE, *sets, "--json",
            match="error: --set strategy.deepspeed_pipeline: deepspeed_pipeline runs DeepSpeed's TrainSchedule, not "
                  "interleaved:2; schedule: 1f1b with deepspeed_pipeline")


def test_deepspeed_pipeline_with_zero_1_is_still_priced(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, "--pp", "2", "--zero", "1", "--set", "strategy.deepspeed_pipeline=true")
    assert out["feasible"] and out["strategy"]["deepspeed_pipeline"] is True


# --- gradient and optimizer bytes per parameter outside any element ---------------------------------------------

@pytest.mark.parametrize("field, value, match", [
    ("grad_bytes_per_param", "1e300", "Input should be less than or equal to 8"),
    ("grad_bytes_per_param", "16", "Input should be less than or equal to 8"),
    ("grad_bytes_per_param", "1e-300", "Input should be greater than or equal to 0.125"),
    ("optimizer_bytes_per_param", "1e300", "Input should be less than or equal to 64"),
])
@pytest.mark.parametrize("command", ["predict", "plan", "memory"])
def test_bytes_per_param_out_of_range_names_the_field(cli, command: str, field: str, value: str,  # type: ignore[no-untyped-def]
                                                      match: str) -> None:
    """``--set training.grad_bytes_per_param=1e300`` ended in "error: memory_time: a byte count is negative or not
    finite" (an internal function, no field), plan answered it with no feasible plan, and 1e-300 priced the
    gradient traffic as free: an element is one bit (1-bit Adam) to eight bytes (fp64)."""
    refused(cli, command, *BASE, "--set", f"training.{field}={value}", "--json",
            match=f"error: --set training.{field}: {match}")


def test_bytes_per_param_in_a_measured_run_names_the_run(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-h100, model: gpt-1.7b, gpus: 64, grad_bytes_per_param: 1e300, step_time: 1 s}\n")
    line = refused(cli, "calibrate", "runs", str(f), inputs=(f,), match=f"error: {f}: run 1 (line 1): ")
    assert "grad_bytes_per_param" in line and "memory_time" not in line


@pytest.mark.parametrize("field, value", [("grad_bytes_per_param", "0.125"), ("grad_bytes_per_param", "8"),
                                          ("optimizer_bytes_per_param", "64"), ("optimizer_bytes_per_param", "0")])
def test_bytes_per_param_at_the_bounds_are_priced(cli, field: str, value: str) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, "--set", f"training.{field}={value}")
    assert out["step_time_s"] > 0


# --- negative zero ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", ["-0", "-0B", "-0.0KiB"])
def test_a_negative_zero_size_prints_as_zero(cli, size: str) -> None:  # type: ignore[no-untyped-def]
    """``collective --size -0`` echoed ``"sizes_bytes": [-0.0]`` and an algbw of -0.0 B/s: a negative number in the
    output for a size the user can only mean as 0 (which nccl-tests runs as a latency-only size)."""
    r = cli("collective", "-c", "dgx-h100", "--op", "allreduce", "-n", "8", f"--size={size}", "--json")
    assert r.code == 0, r.err
    assert "-0.0" not in r.out
    assert json.loads(r.out)["rows"][0]["size_bytes"] == 0.0


def test_parse_quantity_returns_positive_zero() -> None:
    import math

    from scalemodel.units import parse_quantity

    for text in ("-0", "-0 B", "-0.0 GiB", -0.0):
        assert math.copysign(1.0, parse_quantity(text, "bytes")) == 1.0


# --- a framework's bucket in elements, converted at one gradient width and read back at another -----------------

def test_deepspeed_bucket_without_precision_round_trips_its_elements(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A DeepSpeed JSON with no bf16/fp16 section and reduce_bucket_size 5e8 (DeepSpeed's own default) was converted
    at 4 B a gradient (2e9 B, DeepSpeed's fp32 run) but read back by the engine at bf16's 2 B: 1e9 elements a
    bucket, twice DeepSpeed's. The file's fp32 gradients are now the engine's too (grad_bytes_per_param 4), so the
    bucket is the 5e8 elements the default prices for the same gradient width."""
    f = tmp_path / "ds.json"
    f.write_text('{"zero_optimization": {"stage": 1, "reduce_bucket_size": 500000000}}')
    got = accepted(cli, "predict", *BASE, "--strategy", str(f))
    default = accepted(cli, "predict", *BASE, "--zero", "1", "--set", "training.grad_bytes_per_param=4")
    assert got["strategy"]["bucket_bytes"] == 5e8 * 4  # by hand: 5e8 elements x 4 B (fp32 gradients)
    assert got["inputs"]["training"]["grad_bytes_per_param"] == 4.0
    assert got["breakdown_s"]["dp_comm"] == default["breakdown_s"]["dp_comm"]
    assert got["step_time_s"] == default["step_time_s"]


def test_megatron_bucket_after_fp8_format_is_counted_in_its_gradients(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--ddp-bucket-size was converted before --fp8-format was read: at 4 B a gradient, though the run is priced
    with fp8's 2-byte gradients (the engine divides the bucket by them), so 300 elements (600 B) passed the 1 KiB
    floor and 4e7 were priced as 8e7."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --fp8-format hybrid --ddp-bucket-size 300\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), inputs=(f,),
            match="--ddp-bucket-size: 300 elements of 2 B is 600 B, below the smallest bucket priced, 1 KiB")
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --fp8-format hybrid --overlap-grad-reduce "
                 "--ddp-bucket-size 40000000\n")
    got = accepted(cli, "predict", *BASE, "--strategy", str(f))
    assert got["strategy"]["bucket_bytes"] == 4e7 * 2  # by hand: 4e7 elements x 2 B (fp8 runs reduce 16-bit)
    same = accepted(cli, "predict", *BASE, "--precision", "fp8", "--set", "strategy.megatron_ddp=true", "--set",
                    "strategy.bucket_size=80MB")
    assert got["breakdown_s"]["dp_comm"] == same["breakdown_s"]["dp_comm"]


# --- a data-parallel degree from the --strategy file that does not fit --gpus --------------------------------------

@pytest.mark.parametrize("name, text, field, product", [
    ("titan.toml", "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n",
     "parallelism.data_parallel_replicate_degree x data_parallel_shard_degree", "dp 8 x tp 1 x pp 1 x cp 1 = 8"),
    ("titan.toml", "[parallelism]\ndata_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n",
     "parallelism.data_parallel_shard_degree", "dp 4 x tp 2 x pp 1 x cp 1 = 8"),
    ("s.yaml", "strategy: {dp: 3}\n", "strategy.dp", "dp 3 x tp 1 x pp 1 x cp 1 = 3"),
    ("s.yaml", "dp: 3\n", "dp", "dp 3 x tp 1 x pp 1 x cp 1 = 3"),
])
@pytest.mark.parametrize("command", ["predict", "memory", "sensitivity"])
def test_a_file_dp_that_does_not_fit_names_the_file_field(cli, tmp_path, command: str, name: str, text: str,  # type: ignore[no-untyped-def]
                                                          field: str, product: str) -> None:
    """A torchtitan replicate 2 x shard 4 at 64 GPUs said "error: --dp: dp x tp x pp x cp = 8 but --gpus is 64; ...
    or leave --dp out to derive it": no --dp was given, the degree was the file's."""
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, command, *BASE, "--strategy", str(f), "--json", inputs=(f,),
                   match=f"error: --strategy: {f}: {field}: {product} but --gpus is 64; ")
    assert "--dp" not in line


def test_a_file_dp_overridden_on_the_command_line_keeps_the_option_message(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy: {dp: 3}\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), "--dp", "32", match="error: --dp: dp x tp x pp x cp = 32")
    assert accepted(cli, "predict", *BASE, "--strategy", str(f), "--set", "strategy.dp=64")["strategy"]["dp"] == 64


# --- Megatron's --recompute-modules takes several words ----------------------------------------------------------

_MIXTRAL = ["-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64"]


@pytest.mark.parametrize("flags, modules, unused", [
    ("--recompute-modules core_attn moe_act", "core_attn,moe_act", None),
    ("--recompute-modules=moe_act", "moe_act", None),
    ("--recompute-modules moe_act layernorm mlp", "moe_act,layernorm,mlp", None),
    ("--recompute-modules moe_act gdn_norm_out", "moe_act", "--recompute-modules gdn_norm_out (the activation"),
    # "core_attn,moe_act" (one word, an invalid module to Megatron-Core) is refused: test_hostile_inputs_round14
])
def test_megatron_recompute_modules_reads_every_word(cli, tmp_path, flags: str, modules: str | None,  # type: ignore[no-untyped-def]
                                                    unused: str | None) -> None:
    """``--recompute-modules core_attn moe_act`` (argparse nargs='*') warned "not used: --recompute-modules
    core_attn" and skipped moe_act as a positional word, while strategy.recompute_modules prices both."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --bf16 --recompute-granularity selective {flags}\n")
    r = cli("predict", *_MIXTRAL, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["strategy"]["recompute_modules"] == (modules or "")
    assert (unused is None) == ("recompute-modules" not in r.err), r.err
    if unused:
        assert unused in r.err
    if modules:  # the same activation memory as the modules given with --set
        plain = tmp_path / "plain.sh"
        plain.write_text("torchrun pretrain_gpt.py --bf16 --recompute-granularity selective\n")
        same = accepted(cli, "predict", *_MIXTRAL, "--strategy", str(plain), "--set",
                        f"strategy.recompute_modules={modules}")
        assert got["memory"]["per_gpu_bytes"] == same["memory"]["per_gpu_bytes"]


def test_megatron_recompute_modules_without_selective_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --bf16 --recompute-modules moe_act mlp\n")
    r = cli("predict", *_MIXTRAL, "--strategy", str(f), "--json")
    assert r.code == 0 and "--recompute-modules moe_act mlp (read with --recompute-granularity selective" in r.err


@pytest.mark.parametrize("flag", ["\u2014tensor-model-parallel-size", "\u2013tensor-model-parallel-size",
                                  "-\u2014tensor-model-parallel-size", "\u2212tensor-model-parallel-size"])
def test_a_flag_with_a_typographic_dash_is_named(cli, tmp_path, flag: str) -> None:  # type: ignore[no-untyped-def]
    """``\u2014tensor-model-parallel-size 8`` (an em dash, as a rendered document shows ``--``) was skipped as a
    positional word without a warning: tp stayed 1 and nothing said why."""
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --micro-batch-size 1 {flag} 8\n")
    r = cli("predict", *BASE, "--strategy", str(f), "--json")
    assert r.code == 0 and f"{flag} (a typographic dash, not '--': not a flag)" in r.err, r.err
    assert json.loads(r.out)["strategy"]["tp"] == 1
