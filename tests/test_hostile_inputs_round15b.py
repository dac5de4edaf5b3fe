"""Hostile-input round 15b: the surfaces added after round 15 (the flex dispatcher's backend, shared-expert
overlap, the align switches, their Megatron-LM flags, cuDNN releases, piped hybrid patterns, plan --strategy).

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

SMALL = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8"]


# --- a --set value with a byte that is not UTF-8 -----------------------------------------------------------------
# "--set strategy.moe_flex_backend=$'\xff'" (any --set value) was a UnicodeEncodeError traceback: the shell's byte
# reaches Python as a lone surrogate (os.fsdecode's surrogateescape) and PyYAML's reader encodes the value as UTF-8.

@pytest.mark.parametrize("item, byte", [("strategy.moe_flex_backend=\udcff", "\\xff"),
                                        ("training.micro_batch=1\udcfe", "\\xfe"),
                                        ("model.name=a\udc80b", "\\x80")])
def test_a_set_value_with_a_byte_not_utf8_is_refused(cli, item: str, byte: str) -> None:  # type: ignore[no-untyped-def]
    path = item.split("=")[0]
    line = refused(cli, "predict", *SMALL, "--set", item,
                   match=f"error: --set {path}: the value has a byte that is not UTF-8 ({byte}); a value in UTF-8 text")
    line.encode("utf-8")  # the line itself is UTF-8 (no lone surrogate)
