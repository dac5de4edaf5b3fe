"""Lead's mends of round 30 (each fails before its change)."""

from __future__ import annotations

from typing import Any

ARGS = ("memory", "--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "8")


def test_largest_micro_batch_says_it_is_bounded_by_memory_alone_when_the_batch_gives_none(cli: Any) -> None:
    """Global batch 12 on dp 8: no micro-batch b has dp b dividing 12 (12 / 8 = 1.5 a rank), so the engine bounds b
    by memory alone (engine.memory._largest_micro_batch); the line said 'largest micro-batch that fits: N' with N
    above the 1.5 samples a rank gets. Global batch 16 (2 a rank) keeps the plain line, b among 16 / 8's divisors."""
    odd = cli(*ARGS, "--global-batch", "12")
    assert "by memory alone: global batch 12 gives dp 8 no whole micro-batch" in " ".join(odd.out.split())
    even = cli(*ARGS, "--global-batch", "16")
    assert "largest micro-batch that fits: 2" in even.out
    assert "by memory alone" not in even.out
