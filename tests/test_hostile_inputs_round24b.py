"""Hostile-input round 24b: the input-handling defects that round 24's pass (tests/test_hostile_inputs_round24.py) and
review24b left open. Each case runs in-process through the shared helpers of test_hostile_inputs.py (the CLI
contract: one ``error: <where>: <what>; <allowed>`` line, exit 2, the input file untouched).
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

# --- the memory-reserve refusal says the memory as given ------------------------------------------------------------
# --set accelerator.memory=1.5B was said as "not less than memory 2 B" (the value printed with .0f); 1.5 B is what
# was given and what the check compared.

@pytest.mark.parametrize("item, said", [("accelerator.memory=1.5B", "memory 1.5 B; "),
                                        ("accelerator.memory=0.25KB", "memory 250 B; "),
                                        ("accelerator.memory=100MB", "memory 100000000 B; ")])
def test_memory_below_the_reserve_is_said_as_given(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--set", item)
    assert "accelerator.memory_reserved: 475332608 B is not less than " + said in line, line
