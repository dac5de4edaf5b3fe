"""Review 15a: findings in the session's merged work (97f869d..aff7ee0) — training.cudnn_release on the nearest held
release, the flex dispatcher's default SMs, torchtitan's default etp, the one training-checks loop.

Each block is one finding; the contract is test_hostile_inputs.py's (bad input: one line, exit 2, no traceback).
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

GPT_B200 = ["-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "8"]


# --- a release priced on another held curve is not said to be priced where nothing prices it ---------------------
# training.cudnn_release = 9.21.1 with flash_attention off got two warnings that contradict each other: "the cudnn
# attention core is priced on the 9.19 curve" (raised where the job was built) and "is not priced: flash_attention is
# off" (raised where the strategy was read). Without a fused kernel the core runs as two GEMMs (cost.compute), so
# only the second is true.

_PRICED_ON = ("training.cudnn_release = 9.21.1: b200 holds no curve of that release; the cudnn attention core is "
              "priced on the 9.19 curve (the nearest release held at or below it)")
_UNFUSED = ("training.cudnn_release = 9.21.1 is not priced: flash_attention is off (the attention core runs as two "
            "GEMMs, not a fused kernel)")


@pytest.mark.parametrize("command, off", [
    ("predict", ["--no-flash-attention"]),
    ("memory", ["--no-flash-attention"]),
    ("plan", ["--top", "1", "--set", "strategy.flash_attention=false"]),
])
def test_release_curve_is_not_named_where_flash_attention_is_off(cli, command: str, off: list[str]) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, command, *GPT_B200, *off, "--set", "training.cudnn_release='9.21.1'")
    assert _UNFUSED in got["warnings"], got["warnings"]
    assert not any("is priced on the 9.19 curve" in w for w in got["warnings"]), got["warnings"]


@pytest.mark.parametrize("command, extra", [("predict", []), ("memory", []), ("plan", ["--top", "1"]),
                                            ("scale", [])])
def test_release_curve_is_named_once_where_the_fused_kernel_runs(cli, command: str, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    """With flash_attention on (the default, and plan's unpinned candidates) the warning stays: once in the --json
    document's warnings and once on stderr."""
    r = cli(command, *GPT_B200, *extra, "--set", "training.cudnn_release='9.21.1'", "--json")
    assert r.code == 0, r.err
    import json
    assert json.loads(r.out)["warnings"].count(_PRICED_ON) == 1
    assert r.err.count(_PRICED_ON) == 1, r.err
    assert "is not priced" not in r.err, r.err
