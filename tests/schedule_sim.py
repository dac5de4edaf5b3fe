"""A step-by-step pipeline-schedule simulator for the tests (no model code): each rank runs its operations
in the given order, and an operation starts when its rank is free and every operation it depends on has
ended. Returns the makespan; the schedules themselves (which operations, in which order, depending on
what) are written in the tests from the frameworks' descriptions."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence


def makespan(seqs: Sequence[Sequence[Hashable]], deps: Callable[[Hashable], list[Hashable]],
             duration: Callable[[Hashable], float]) -> float:
    end: dict[Hashable, float] = {}
    pos, free = [0] * len(seqs), [0.0] * len(seqs)
    moved = True
    while moved:
        moved = False
        for r, seq in enumerate(seqs):
            while pos[r] < len(seq):
                op = seq[pos[r]]
                need = deps(op)
                if any(d not in end for d in need):
                    break
                start = max([free[r]] + [end[d] for d in need])
                free[r] = end[op] = start + duration(op)
                pos[r] += 1
                moved = True
    assert all(pos[r] == len(seq) for r, seq in enumerate(seqs)), "the schedule deadlocked"
    return max(free)
