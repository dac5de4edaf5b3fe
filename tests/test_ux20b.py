"""What ux20b fixed from the expert-user pass's leftovers (each test says what was wrong)."""

from __future__ import annotations

import json
from typing import Any

#: One strategy, given to memory and to predict alike.
STRATEGY = ("-m", "gpt3-175b", "-c", "dgx-h100", "-n", "1024", "--tp", "4", "--pp", "8", "--global-batch", "1024",
            "--schedule", "interleaved:2", "--zero", "1")


def _header(out: str) -> str:
    """The words above the table (the header may wrap at the terminal's width)."""
    return " ".join(out.split("┏")[0].split())


def test_memory_header_is_predicts(cli: Any) -> None:
    """memory wrote "dp 32 tp 4 pp 8 cp 1 ep 1" where predict writes "DP 32 x TP 4 x PP 8 x CP 1 (EP 1)", and left out
    the schedule and the global batch it was given: the same strategy read as two in two commands' headers."""
    mem = _header(cli("memory", *STRATEGY).out)
    pred = _header(cli("predict", *STRATEGY).out)
    # 1024 GPUs / (tp 4 x pp 8) = dp 32
    layout = ("DP 32 x TP 4 x PP 8 x CP 1 (EP 1), micro-batch 1, global batch 1024, interleaved:2, ZeRO 1, "
              "recompute none")
    assert layout in mem and layout in pred
    assert "dp 32 tp 4" not in mem
    # the same words up to the rank order, which memory does not price (predict: "..., sync bsp, rank order ...")
    assert pred.split(": ", 1)[1].startswith(mem.split(": ", 1)[1].split(", seq")[0])


SMALL = ("-m", "gpt-1.7b", "-c", "pcie-25gbe", "-n", "16")


def _predict(cli: Any, *args: str) -> dict[str, Any]:
    r = cli("predict", *SMALL, *args, "--json")
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def test_fp16_cast_of_16_bit_gradients_says_it_changes_nothing(cli: Any) -> None:
    """fp16 compression on bf16 gradients sends min(2, 2) = 2 bytes per element, as none does: the same step time,
    and no word of why. With 32-bit gradients it halves the wire, and no such note is given."""
    none, fp16 = _predict(cli), _predict(cli, "--compression", "fp16")
    assert fp16["step_time_s"] == none["step_time_s"]
    assert any("compression fp16 changes nothing here" in n and "already 16-bit" in n for n in fp16["notes"])
    assert not any("changes nothing" in n for n in none["notes"])
    wide = _predict(cli, "--compression", "fp16", "--set", "training.grad_bytes_per_param=4")
    assert not any("changes nothing" in n for n in wide["notes"])
    # plan, with the cast pinned, warns the same words (every plan was priced as compression none)
    r = cli("plan", *SMALL, "--set", "strategy.compression=fp16", "-k", "1")
    assert r.code == 0 and "compression fp16 changes nothing here" in " ".join(r.err.split())
