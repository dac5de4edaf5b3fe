"""Hostile pins to ``plan``, round 38 (fuzzpin38). consist38 made a value pinned with ``=`` (``--constraint X=v``,
``--set strategy.X=v``, a ``--strategy`` file's layout) a plan candidate whatever it is; scripts/fuzzpin38.py fuzzes
that door (micro_batch, tp, pp, cp, dp, ep and interleaved:v at 0, 1, primes, beyond the GPUs and past int64; stage
lists; chunk layer counts; contradicting pins; 1 and 1e8 GPUs). The CLI contract is test_hostile_inputs.py's: exit 2,
one ``error:`` line naming the option, what was wrong and what is allowed, nothing on stdout.

Findings:

1. ``--constraint micro_batch=9223372036854775808`` (or ``cp_a2a_size=`` past int64): the pinned value went into the
   search's int64 columns and stopped plan with "input out of range: Python int too large to convert to C long",
   naming neither the option nor the key. An equality pin past the counts a spec holds (MAX_SPEC_INT = 1e9, the
   bound a --strategy file's micro_batch meets) is now refused at the constraint.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]


# --- 1. an equality pin past the counts a spec holds --------------------------------------------------------------

@pytest.mark.parametrize("pin", [f"micro_batch={2**63}", f"micro_batch={2**70}", f"cp_a2a_size={10**20}",
                                 f"micro_batch={-(10**20)}", f"micro_batch=={2**40}", f"tp={2**64}"])
def test_equality_pin_past_spec_counts_refused(cli, pin: str) -> None:
    key = pin.split("=")[0]
    line = refused(cli, "plan", *DENSE, "--constraint", pin, "--top", "1", "--json",
                   match=f"--constraint: constraint '{pin}' pins {key} beyond the counts a spec holds (1 to 1e+09)")
    assert f"{key}=N with N an integer from 1 to 1e+09" in line
    assert "C long" not in line


def test_pin_at_the_bound_still_a_candidate(cli) -> None:
    # 1e9 itself is a count a spec holds: searched (no per-replica batch of 16 takes it), not refused
    r = cli("plan", *DENSE, "--constraint", "micro_batch=1000000000", "--top", "1")
    assert r.code == 0 and "error" not in r.err, r.err
    assert "micro_batch=1000000000" in r.out


def test_inequality_past_spec_counts_is_no_bound(cli) -> None:
    # tp<=10**20 bounds nothing: the whole grid, as before (only an equality pin enters the int64 columns)
    r = cli("plan", *DENSE, "--constraint", f"tp<={10**20}", "--top", "1")
    assert r.code == 0 and "error" not in r.err, r.err
