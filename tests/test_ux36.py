"""Small user-facing defects fuzz36 and ubmoe36 left (ux36), each against the contract of test_hostile_inputs.py
(a refusal: exit 2, one ``error:`` line naming the field, what was wrong and what is allowed; nothing on stdout).

1. ``plan --set strategy.offload_states=X`` without zero was refused ("give zero too") though plan searches zero:
   now the search keeps the ZeRO stages that run X (DeepSpeed offload_optimizer "Valid for ZeRO stage 1, 2, 3",
   offload_param "Valid only with stage 3", FSDP's CPUOffload: deepspeed/runtime/zero/config.py at edaa7221).
2. A Megatron-LM launch with --use-torch-fsdp2 and --fp8-param-gather was refused "got zero '0', the default", the
   FSDP flag (not read: zero comes from the command line) unsaid, and --zero fsdp, what its warning advises, was
   refused too (the file was validated alone): the refusal names the flag, and --zero fsdp runs.
3. DeepSpeed offload keys not priced (buffer_count, buffer_size, max_in_cpu, pin_memory, cpuadam_cores_perc, ...)
   passed silently whatever their value: one DeepSpeed's config refuses is refused naming the key and its range, a
   valid one is named as not modelled (pin_memory true, the priced default, aside).
4. A choice error printed a YAML null as ``None`` (and a boolean as ``True``): now ``null`` / ``true``, as written
   (errors.written; every Choice, schedule, compression, dp_comm, transport and the loader's type errors).
5. An MoE model at tp > 1 on a TPU with sequence_parallel unset was said priced on as "the only choice Megatron-Core
   trains ... with": a TPU program is XLA's, whatever layer_impl names. The pricing (SP on, MaxText's activation_embed
   sharding over 'tensor') is unchanged; the note says that instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

PLAN = ("plan", "-m", "gpt-1.7b", "-n", "16", "-k", "40")


# --- 1. plan with offload_states pinned and zero searched -----------------------------------------------------------

@pytest.mark.parametrize(("mode", "stages"), [("optimizer", {"1", "2", "3"}),
                                              ("optimizer+params", {"3", "fsdp", "hsdp"})])
def test_plan_searches_the_zero_stages_that_run_a_pinned_offload(cli, mode: str, stages: set[str]) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, *PLAN, "--set", f"strategy.offload_states={mode}")
    zeros = {r["strategy"]["zero"] for r in out["ranked"]}
    assert out["ranked"] and zeros <= stages, zeros
    assert {r["strategy"]["offload_states"] for r in out["ranked"]} == {mode}
    # the stages that cannot run it were searched and counted, not left out unsaid
    assert out["infeasible_by_reason"].get("state_offload_invalid", 0) > 0


def test_plan_offload_with_a_pinned_zero_that_cannot_run_it_is_still_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *PLAN, "--set", "strategy.offload_states=optimizer+params", "--set", "strategy.zero=1",
            match="optimizer+params needs the parameters sharded")


# --- 2. Megatron-LM's FSDP flag beside a switch that needs a sharded stage ------------------------------------------

def _fsdp_launch(tmp_path: Path) -> Path:
    """--use-megatron-fsdp, the FSDP flag still not read (--use-torch-fsdp2 is read as zero fsdp since fuzz37)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --use-megatron-fsdp --fp8-param-gather "
                 "--fp8-format hybrid --bf16\n")
    return f


def test_a_megatron_fsdp_launch_refused_at_zero_0_names_the_unread_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _fsdp_launch(tmp_path)
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f),
                   inputs=(f,), match="--fp8-param-gather: true needs a parameter all-gather")
    assert f"--use-megatron-fsdp in {f} not used (FSDP is not read from the flags)" in line, line
    assert line.endswith("give zero too (--zero or --set strategy.zero)"), line


@pytest.mark.parametrize("zero", ["fsdp", "1"])
def test_a_megatron_fsdp_launch_runs_with_the_zero_given_on_the_command_line(cli, tmp_path: Path, zero: str) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy",
                   str(_fsdp_launch(tmp_path)), "--zero", zero)
    assert out["strategy"]["zero"] == zero and out["strategy"]["fp8_param_gather"] is True


def test_a_launch_without_an_fsdp_flag_is_still_refused_alone(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without an unread ZeRO setting the file's own refusal stands (before --zero is merged), as before ux36; since
    fuzz37 in Megatron-LM's words (validate_args refuses --fp8-param-gather without the distributed optimizer or an
    FSDP flag)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --fp8-param-gather --fp8-format hybrid "
                 "--bf16\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f),
                   match="--fp8-param-gather: given without --use-distributed-optimizer")
    assert "not used" not in line and line.endswith("--fp8-param-gather with --use-distributed-optimizer (zero 1) or "
                                                    "--use-torch-fsdp2 (zero fsdp), or leave it out"), line


# --- 3. DeepSpeed offload keys outside DeepSpeed's own range ---------------------------------------------------------
# deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/zero/offload_config.py: buffer_count / buffer_size / max_in_cpu
# Field(ge=0) ints, pin_memory (and pipeline_read / _write, fast_init) bool, cpuadam_cores_perc Field(ge=0.0, le=1.0)

def _ds_file(tmp_path: Path, optimizer: dict[str, object], param: dict[str, object] | None = None) -> Path:
    zero: dict[str, object] = {"stage": 3, "offload_optimizer": {"device": "cpu", **optimizer}}
    if param is not None:
        zero["offload_param"] = {"device": "cpu", **param}
    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                             "zero_optimization": zero}))
    return f


DS_PREDICT = ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8")


@pytest.mark.parametrize(("optimizer", "param", "key", "said"), [
    ({"cpuadam_cores_perc": 1.5}, None, "offload_optimizer.cpuadam_cores_perc", "a number from 0 to 1"),
    ({"cpuadam_cores_perc": -0.1}, None, "offload_optimizer.cpuadam_cores_perc", "a number from 0 to 1"),
    ({"buffer_count": -1}, None, "offload_optimizer.buffer_count", "a whole number >= 0"),
    ({"buffer_count": 2.5}, None, "offload_optimizer.buffer_count", "a whole number >= 0"),
    ({"pin_memory": "maybe"}, None, "offload_optimizer.pin_memory", "true or false"),
    ({"pin_memory": 2}, None, "offload_optimizer.pin_memory", "true or false"),
    ({}, {"buffer_count": -5}, "offload_param.buffer_count", "a whole number >= 0"),
    ({}, {"buffer_size": -1}, "offload_param.buffer_size", "a whole number >= 0"),
    ({}, {"max_in_cpu": "lots"}, "offload_param.max_in_cpu", "a whole number >= 0"),
    ({}, {"pin_memory": [True]}, "offload_param.pin_memory", "true or false"),
])
def test_offload_keys_outside_deepspeeds_range_are_refused(cli, tmp_path: Path, optimizer: dict[str, object],  # type: ignore[no-untyped-def]
                                                           param: dict[str, object] | None, key: str,
                                                           said: str) -> None:
    f = _ds_file(tmp_path, optimizer, param)
    line = refused(cli, *DS_PREDICT, "--strategy", str(f), inputs=(f,), match=f"zero_optimization.{key}: ")
    assert f"is not {said}" in line and "DeepSpeed's DeepSpeedZeroOffload" in line, line


@pytest.mark.parametrize(("optimizer", "param", "warned"), [
    ({"cpuadam_cores_perc": 0.5, "buffer_count": 4}, None,
     ["offload_optimizer.cpuadam_cores_perc 0.5 (not modelled)", "offload_optimizer.buffer_count 4 (not modelled)"]),
    ({"pin_memory": False}, None, ["offload_optimizer.pin_memory false (pageable host memory is not modelled"]),
    ({}, {"buffer_size": 1.5e8, "max_in_cpu": "1000"}, ["offload_param.buffer_size 150000000.0 (not modelled)",
                                                        "offload_param.max_in_cpu 1000 (not modelled)"]),
    ({"pin_memory": True, "fast_init": "auto"}, None, []),  # priced (pinned, the default); "auto" dropped as DeepSpeed
])
def test_valid_offload_keys_are_read_and_named_as_not_priced(cli, tmp_path: Path, optimizer: dict[str, object],  # type: ignore[no-untyped-def]
                                                             param: dict[str, object] | None,
                                                             warned: list[str]) -> None:
    out = accepted(cli, *DS_PREDICT, "--strategy", str(_ds_file(tmp_path, optimizer, param)),
                   "--set", "cluster.host_bandwidth=50GB/s")
    text = " ".join(out["warnings"])
    assert out["strategy"]["offload_states"] == ("optimizer+params" if param is not None else "optimizer")
    for w in warned:
        assert f"zero_optimization.{w}" in text, text
    if not warned:
        assert "offload_optimizer." not in text, text


# --- 4. a YAML null (or boolean) in a choice error is spelled as the file wrote it ----------------------------------

@pytest.mark.parametrize(("field", "said"), [
    ("strategy.recompute", "unknown recompute null"), ("strategy.zero", "unknown ZeRO stage null"),
    ("training.precision", "unknown precision null"), ("strategy.offload_states", "unknown offload_states null"),
    ("strategy.layout", "unknown layout null"), ("strategy.loss_impl", "unknown loss implementation null"),
    ("strategy.schedule", "Input should be a valid string (got null)"),
])
def test_a_null_choice_is_said_null(cli, field: str, said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-m", "gpt-1.7b", "-n", "8", "--set", f"{field}=null", match=said)
    assert "None" not in line, line


def test_a_null_choice_in_a_strategy_file_is_said_null(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  recompute: true\n  cp_comm_type: null\n")
    line = refused(cli, "predict", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), inputs=(f,))
    assert "strategy.cp_comm_type: unknown cp_comm_type null; use p2p" in line and "None" not in line, line


# --- 5. the unset-SP note on a TPU ---------------------------------------------------------------------------------

TPU_MOE = ("predict", "-c", "tpu-v5e-multislice", "-m", "mixtral-8x7b", "-n", "8", "--tp", "8")


def test_the_unset_sp_note_on_a_tpu_names_no_megatron_rule(cli) -> None:  # type: ignore[no-untyped-def]
    unset = accepted(cli, *TPU_MOE)
    notes = [w for w in unset["warnings"] if "sequence_parallel" in w]
    assert len(notes) == 1 and "Megatron" not in notes[0] and "MaxText" in notes[0], notes
    assert "priced on at tp 8" in notes[0], notes
    # what the note says is what is priced: the same step as sequence_parallel given true (no note then)
    given = accepted(cli, *TPU_MOE, "--set", "strategy.sequence_parallel=true")
    assert unset["step_time_s"] == given["step_time_s"] and unset["strategy"]["sequence_parallel"] is True
    assert not [w for w in given["warnings"] if "sequence_parallel" in w]


def test_the_unset_sp_note_on_a_gpu_still_names_megatron_core(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "8", "--tp", "8")
    assert any("the only choice Megatron-Core trains an MoE model at tp 8" in w for w in out["warnings"])
