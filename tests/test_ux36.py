"""Small user-facing defects fuzz36 and ubmoe36 left (ux36), each against the contract of test_hostile_inputs.py
(a refusal: exit 2, one ``error:`` line naming the field, what was wrong and what is allowed; nothing on stdout).

1. ``plan --set strategy.offload_states=X`` without zero was refused ("give zero too") though plan searches zero:
   now the search keeps the ZeRO stages that run X (DeepSpeed offload_optimizer "Valid for ZeRO stage 1, 2, 3",
   offload_param "Valid only with stage 3", FSDP's CPUOffload: deepspeed/runtime/zero/config.py at edaa7221).
2. A Megatron-LM launch with --use-torch-fsdp2 and --fp8-param-gather was refused "got zero '0', the default", the
   FSDP flag (not read: zero comes from the command line) unsaid, and --zero fsdp, what its warning advises, was
   refused too (the file was validated alone): the refusal names the flag, and --zero fsdp runs.
"""

from __future__ import annotations

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
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --use-torch-fsdp2 --fp8-param-gather "
                 "--fp8-format hybrid --bf16\n")
    return f


def test_a_megatron_fsdp_launch_refused_at_zero_0_names_the_unread_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _fsdp_launch(tmp_path)
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f),
                   inputs=(f,), match="--fp8-param-gather: true needs a parameter all-gather")
    assert f"--use-torch-fsdp2 in {f} not used (FSDP is not read from the flags)" in line, line
    assert line.endswith("give zero too (--zero or --set strategy.zero)"), line


@pytest.mark.parametrize("zero", ["fsdp", "1"])
def test_a_megatron_fsdp_launch_runs_with_the_zero_given_on_the_command_line(cli, tmp_path: Path, zero: str) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy",
                   str(_fsdp_launch(tmp_path)), "--zero", zero)
    assert out["strategy"]["zero"] == zero and out["strategy"]["fp8_param_gather"] is True


def test_a_launch_without_an_fsdp_flag_is_still_refused_alone(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without an unread ZeRO setting the file's own refusal stands (before --zero is merged), as before ux36."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --fp8-param-gather --fp8-format hybrid "
                 "--bf16\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f),
                   match="--fp8-param-gather: true needs a parameter all-gather")
    assert "not used" not in line and line.endswith("give zero too"), line
