"""review22g: fuzz22's API argument checks and .json strategy-file reading, reviewed. Each test failed before its fix.

The API's contract is docs/api.md's: bad values raise InputError whose str() is the CLI's one-line message naming the
argument; a call the command line refuses is refused here too.
"""

from __future__ import annotations

import time

import pytest

import scalemodel
from scalemodel.errors import InputError

# --- plan's top beyond the command line's --top cap ----------------------------------------------------------------
# The API took top up to 1e8 where --top is capped at 500 (each ranked row priced and explained in full):
# plan(top=10**6) on 64 GPUs ran for 520 s. Refused here as --top is, naming top.

@pytest.mark.parametrize("top", [501, 10**6, 10**8])
def test_api_plan_top_beyond_the_command_lines_cap_is_refused(top: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(InputError) as exc:
        scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=top)
    assert str(exc.value) == f"top: {top:,} plans is outside 1 to 500; an integer from 1 to 500", str(exc.value)
    assert time.monotonic() - t0 < 5  # refused before the search


def test_api_plan_top_at_the_cap_still_runs() -> None:
    assert len(scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=500).ranked) >= 1
