"""Pipeline bubble: closed forms against a step-by-step simulation of the schedule."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.pipeline import bubble_fraction, bubble_microbatches, inflight_microbatches


def simulate_1f1b(p: int, m: int, tf: float, tb: float) -> float:
    """Event simulation of GPipe-style dependencies: F(i,j) after F(i-1,j) and F(i,j-1);
    B(i,j) after B(i+1,j), F(i,j) and B(i,j-1); each stage runs one op at a time in 1F1B order."""
    # 1F1B order per stage: warm-up forwards, then alternate B/F, then cool-down backwards.
    orders = []
    for i in range(p):
        warm = min(p - i - 1, m)
        seq = [("F", j) for j in range(warm)]
        f_next, b_next = warm, 0
        while b_next < m:
            if f_next < m:
                seq.append(("F", f_next))
                f_next += 1
            seq.append(("B", b_next))
            b_next += 1
        orders.append(seq)
    done: dict[tuple[str, int, int], float] = {}
    clock = [0.0] * p
    pos = [0] * p
    progress = True
    while progress:
        progress = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                kind, j = orders[i][pos[i]]
                deps = [("F", i - 1, j)] if kind == "F" and i > 0 else []
                if kind == "B":
                    deps = [("F", i, j)] + ([("B", i + 1, j)] if i < p - 1 else [])
                if not all(d in done for d in deps):
                    break
                start = max([clock[i]] + [done[d] for d in deps])
                clock[i] = start + (tf if kind == "F" else tb)
                done[(kind, i, j)] = clock[i]
                pos[i] += 1
                progress = True
    return max(clock)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 16), (4, 4), (3, 7)])
def test_1f1b_step_time_matches_simulation(p: int, m: int) -> None:
    tf, tb = 1.0, 2.0
    sim = simulate_1f1b(p, m, tf, tb)
    closed = (m + bubble_microbatches(p, "1f1b")) * (tf + tb)
    assert closed == pytest.approx(sim)


def test_reference_examples() -> None:
    # by hand, (p-1)/m and (p-1)/(v m): p 8, m 96 -> 7.3 %; v 2 -> 3.6 %; p 12, m 64 -> 17.2 %
    assert bubble_fraction(8, 96, "1f1b") == pytest.approx(7 / 96)
    assert float(bubble_fraction(8, 96, "interleaved", 2)) == pytest.approx(0.0365, abs=5e-4)
    assert float(bubble_fraction(12, 64, "1f1b")) == pytest.approx(0.172, abs=5e-4)


def test_more_microbatches_never_larger_bubble_fraction() -> None:
    m = np.arange(1, 200)
    for code in (0, 1, 2, 3):
        f = bubble_fraction(8, m, code, 4)
        assert np.all(np.diff(f) <= 0)


def test_inflight() -> None:
    assert inflight_microbatches(8, 32, "1f1b") == 8
    assert inflight_microbatches(8, 4, "1f1b") == 4
    assert inflight_microbatches(8, 32, "gpipe") == 32
    assert inflight_microbatches(8, 32, "interleaved", 2) == pytest.approx(8 * (1 + 7 / 16))
    assert bubble_microbatches(1, "1f1b") == 0
