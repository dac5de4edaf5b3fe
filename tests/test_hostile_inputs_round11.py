"""Hostile-input round 11: the newest options (loss_impl, attention_kernel and its fitted curves, Megatron's
cross-entropy switches), sweeps whose grid would not finish, measured runs given as a rate, and errors whose long
echoed value pushed out what is allowed.

Each case is one finding (a switch read as on when given "false", a field located at the mapping around it, a
message cut before its rule, a value that made a time infinite, a grid that ran for days); the contract is
test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]
LAUNCH = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16 "


def _launch(tmp_path: Path, flags: str) -> Path:
    f = tmp_path / "run.sh"
    f.write_text(LAUNCH + flags + "\n")
    return f


# --- Megatron-LM's --cross-entropy-loss-fusion is a switch ---------------------------------------------------------

@pytest.mark.parametrize("flags, got", [
    ("--cross-entropy-loss-fusion=false", "'=false'"),
    ("--cross-entropy-loss-fusion false", "'false'"),
    ("--cross-entropy-loss-fusion 0", "'0'"),
    ("--cross-entropy-loss-fusion=true --cross-entropy-fusion-impl te", "'=true'"),
])
def test_cross_entropy_loss_fusion_with_a_value_is_refused(cli, tmp_path, flags: str, got: str) -> None:  # type: ignore[no-untyped-def]
    """``--cross-entropy-loss-fusion=false`` was priced as the fused cross-entropy (loss_impl megatron_fused): the
    reader listed the switch among the flags that take a value, so it took ``false`` as one and only asked whether
    the flag was there. Megatron-LM declares it ``action='store_true'`` (megatron/training/arguments.py), like the
    switches round 10 refuses with a value."""
    f = _launch(tmp_path, flags)
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"--cross-entropy-loss-fusion: a switch takes no value, got {got}; --cross-entropy-loss-fusion "
                  "alone to turn it on")


@pytest.mark.parametrize("flags, impl", [
    ("--cross-entropy-loss-fusion", "megatron_fused"),
    ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "te"),
    ("--cross-entropy-fusion-impl te --cross-entropy-loss-fusion", "te"),
    ("", "megatron"),
])
def test_cross_entropy_loss_fusion_alone_still_turns_it_on(cli, tmp_path, flags: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    f = _launch(tmp_path, flags)
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["loss_impl"] == impl


def test_cross_entropy_loss_fusion_before_the_script_is_on(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A switch consumes no word: the script after it stays a positional (and the switch is on)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun --cross-entropy-loss-fusion pretrain_gpt.py --micro-batch-size 1\n")
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["loss_impl"] == "megatron_fused"


def test_megatron_switches_are_not_also_value_flags() -> None:
    """The reader's two lists overlapped (five switches were in both): one flag, one arity."""
    from scalemodel.specs.frameworks import _MEG_KNOWN_VALUE, _MEG_STORE_TRUE

    assert not set(_MEG_STORE_TRUE) & _MEG_KNOWN_VALUE
