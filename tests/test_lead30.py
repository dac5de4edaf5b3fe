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


def test_a_query_that_reads_no_spec_file_does_not_compile_the_printable_pattern(cli: Any) -> None:
    """specs.files' pattern of characters a spec's string may not hold spans U+10000-U+10FFFF, which re's compiler
    expands into a 64 Ki charmap (about 50 M instructions, 6% of `predict --json`): fuzz30 compiled it at import,
    so every query paid it; it is compiled on first use, by a JSON or YAML spec read."""
    from scalemodel.specs import files

    files.non_printable.cache_clear()
    run = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8", "--json")
    assert run.code == 0
    assert files.non_printable.cache_info().misses == 0
