"""Small user-facing defects fuzz36 and ubmoe36 left (ux36), each against the contract of test_hostile_inputs.py
(a refusal: exit 2, one ``error:`` line naming the field, what was wrong and what is allowed; nothing on stdout).

1. ``plan --set strategy.offload_states=X`` without zero was refused ("give zero too") though plan searches zero:
   now the search keeps the ZeRO stages that run X (DeepSpeed offload_optimizer "Valid for ZeRO stage 1, 2, 3",
   offload_param "Valid only with stage 3", FSDP's CPUOffload: deepspeed/runtime/zero/config.py at edaa7221).
"""

from __future__ import annotations

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
