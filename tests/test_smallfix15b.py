"""Small fixes left by the review-15 rounds (one section per fix)."""

from __future__ import annotations

import pytest

from scalemodel.errors import InputError
from scalemodel.specs.frameworks import read_strategy_file

# ---------------------------------------------------------------------------------------------------------------
# 1. a value given to a Megatron-LM switch: the message named argparse store_true and "turn it on" also for the
#    store_false switches (--no-*, --disable-*), which turn their feature off


@pytest.mark.parametrize("flag", ["--no-rope-fusion", "--disable-align-grad-reduce", "--no-bias-dropout-fusion"])
def test_a_store_false_switch_with_a_value_is_worded_as_one(tmp_path, flag: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --tensor-model-parallel-size 2 {flag}=false\n")
    with pytest.raises(InputError) as e:
        read_strategy_file(str(f))
    msg = str(e.value)
    assert "takes no value" in msg and "store_false" in msg and "turn off" in msg, msg
    assert "store_true" not in msg and "turn it on" not in msg, msg


def test_a_store_true_switch_with_a_value_keeps_its_wording(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --sequence-parallel=false\n")
    with pytest.raises(InputError, match="alone to turn it on, or leave it out to keep it off \\(argparse store_true\\)"):
        read_strategy_file(str(f))
