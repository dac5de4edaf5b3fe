"""fourclass38: the class-wise 1F1B closed forms (cost.pipeline.one_f_one_b_four_class_time, uneven38, and
one_f_one_b_three_class_time) are the rank-by-rank formula (one_f_one_b_time), exactly.

They evaluated the four paths (A, C, D, E of one_f_one_b_time) at the two ends of each run of equal middle ranks only
(onefb39 made both the schedule's makespan, docs/model.md#onefb-exact; the chains below are still checked as chains).
uneven38 said every path is linear along a run; it is not (w = min(p-1-k, m-1) has a kink, and E exists only where
m - w - 1 >= 1), but every path is non-decreasing along a run (docs/model.md#uneven-classes): from k to k+1 between
equal ranks F_<k + B_<k grows by W = f + b, D_k falls by W and rest = m - w - 1 grows by d in {0, 1}, so A grows by
W, C by d f, D by d b, and E, where it exists (rest >= 1, then d = 1), by W - 2 W + d W = 0; it only switches on
going up. So each path's maximum over a run is at the run's last rank.

Checked independently of the formula code: (1) each path written out as a chain of the schedule's operations
(validated against Megatron's 1F1B rank order and its data dependencies, summed op by op), non-decreasing along
every run, its largest value the closed forms' and never above the step-by-step simulations
(tests/test_pipeline_uneven.py ``simulate``, tests/test_pipeline_exchanges.py ``megatron_simulate``); (2) the closed
forms against one_f_one_b_time on the exhaustive integer grid (pp 2..9, m 1..12, every run split, 3^8 class values,
two exchanges: 5.7 M cases, exact ``==``); (3) the case where the critical path is E on a run whose first rank has
no path E, by hand. scripts/fourclass_grid.py also runs the grid against the simulations (long)."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
from test_pipeline_exchanges import megatron_simulate
from test_pipeline_uneven import simulate

from scalemodel.cost import pipeline

_SPEC = importlib.util.spec_from_file_location("fourclass_grid",
                                               Path(__file__).resolve().parents[1] / "scripts" / "fourclass_grid.py")
assert _SPEC is not None and _SPEC.loader is not None
grid = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(grid)

Op = tuple[str, int, int]  # (F or B, micro-batch, rank)


def _order(p: int, m: int, r: int) -> list[Op]:
    """Rank r's operations in Megatron-Core's 1F1B order (schedules.py forward_backward_pipelining_without_interleaving:
    min(p - r - 1, m) warm-up forwards, one forward and one backward in turn, the remaining backwards)."""
    w = min(p - r - 1, m)
    seq = [("F", j, r) for j in range(w)]
    for i in range(m - w):
        seq += [("F", w + i, r), ("B", i, r)]
    return seq + [("B", j, r) for j in range(m - w, m)]


def _chain(p: int, m: int, k: int, path: str) -> list[Op] | None:
    """Path A, C, D or E through rank k as the operations it runs through (None: E where rank k runs no backward
    between micro-batch 0's and its last forward)."""
    w = min(p - 1 - k, m - 1)
    rest = m - w - 1
    own = _order(p, m, k)

    def down(j: int) -> list[Op]:  # micro-batch j's round trip below rank k
        return [("F", j, r) for r in range(k + 1, p)] + [("B", j, r) for r in range(p - 1, k, -1)]

    head = [("F", 0, r) for r in range(k)]
    tail = [("B", m - 1, r) for r in range(k - 1, -1, -1)]
    b0 = own.index(("B", 0, k))
    f_last = own.index(("F", m - 1, k))
    if path == "A":
        return head + own + tail
    if path == "C":  # micro-batch 0's round trip, then the rest of rank k
        return head + [("F", 0, k)] + down(0) + own[b0:] + tail
    if path == "D":  # rank k up to its last forward, then that micro-batch's round trip
        return head + own[:f_last + 1] + down(m - 1) + [("B", m - 1, k)] + tail
    if rest < 1:
        return None
    return head + [("F", 0, k)] + down(0) + own[b0:f_last + 1] + down(m - 1) + [("B", m - 1, k)] + tail


def _length(p: int, m: int, chain: list[Op], f: list[int], b: list[int]) -> int:
    """Seconds of a chain, after checking each step is a dependency of the schedule: later on the same rank, a
    forward to the next rank, a backward to the previous rank."""
    pos = {op: i for r in range(p) for i, op in enumerate(_order(p, m, r))}
    for x, y in zip(chain, chain[1:], strict=False):
        same = x[2] == y[2] and pos[y] > pos[x]
        fwd = x[0] == y[0] == "F" and x[1] == y[1] and y[2] == x[2] + 1
        bwd = x[0] == y[0] == "B" and x[1] == y[1] and y[2] == x[2] - 1
        assert same or fwd or bwd, (x, y)
    return sum(f[r] if kind == "F" else b[r] for kind, _, r in chain)


def _ranks(p: int, n_up: int, cls: list[int]) -> tuple[list[int], list[int]]:
    ff, bf, fu, bu, fo, bo, fl, bl = cls
    n_low = max(p - 2, 0) - n_up
    return [ff] + [fu] * n_up + [fo] * n_low + [fl], [bf] + [bu] * n_up + [bo] * n_low + [bl]


def test_every_path_is_non_decreasing_along_a_run_and_the_closed_forms_take_its_last_rank() -> None:
    """Random four-class pipelines (pp 3..9, every run split, m 1..12, integer stage times 0..4): each path, summed op
    by op along its chain, never falls from a middle rank to the next equal one (so each run's last rank holds its
    maximum); the largest chain never above either simulation of the schedule (a chain of dependent operations is a
    lower bound of the makespan), and one_f_one_b_time and the class-wise forms are the simulation (onefb39: the four
    chains were short where the longest chain enters or leaves through another rank, tests/test_onefb39.py)."""
    rng = random.Random(3801)
    for _ in range(120):
        p, m = rng.randint(3, 9), rng.randint(1, 12)
        n_up = rng.randint(0, p - 2)
        cls = [rng.randint(0, 4) for _ in range(8)]
        f, b = _ranks(p, n_up, cls)
        value = {(k, name): _length(p, m, ch, f, b) for k in range(p) for name in "ACDE"
                 if (ch := _chain(p, m, k, name)) is not None}
        for lo, hi in ((1, n_up), (n_up + 1, p - 2)):  # the two runs of equal middle ranks
            for k in range(lo, hi):
                for name in "ACDE":
                    if (k, name) in value:
                        assert (k + 1, name) in value and value[(k + 1, name)] >= value[(k, name)], (p, m, n_up, k)
        best = max(value.values())
        # onefb39: the formulas are the schedule's makespan, at least every chain (the four were a lower bound)
        sim = simulate(p, m, f, b)
        assert best <= sim == megatron_simulate(p, m, f, b, 0.0)
        assert float(pipeline.one_f_one_b_time(m, np.asarray(f, float), np.asarray(b, float))) == sim
        assert float(pipeline.one_f_one_b_four_class_time(m, p, n_up, *(float(x) for x in cls))) == sim
        if n_up == p - 2:
            three = cls[:4] + cls[6:]
            assert float(pipeline.one_f_one_b_three_class_time(m, p, *(float(x) for x in three))) == sim


def test_closed_forms_are_the_rank_by_rank_formula_on_the_whole_integer_grid() -> None:
    """pp 2..9, m 1..12, every n_u = 0..p-2, each class's forward and backward in {0, 3} (2^8), the exchange 0 or 1
    folded where Megatron's program blocks (rank 0 f + c, middle f + c and b + c, last b + c): 221,184 cases, the
    four-class time equal to one_f_one_b_time on the ranks written out, and the three-class time to the four-class at
    n_u = p - 2, with ``==`` (sums of small integers: exact in floats). fourclass38 ran {0, 1, 3} (5,668,704 cases)
    here; since onefb39 both sides are the exact O(p^2) makespan (tests/test_onefb39.py checks them against the
    simulations) and that grid takes minutes: scripts/fourclass_grid.py runs it."""
    cases, bad = grid.closed_grid([0, 3], [0, 1], 9, 12)
    assert cases == 2 * 12 * 2**8 * sum(max(p - 1, 1) for p in range(2, 10))
    assert bad == 0


def test_closed_form_never_above_the_simulations_with_exchanges() -> None:
    """Random draws of the simulation grid (scripts/fourclass_grid.py runs it whole): stage times 0..3, an exchange
    0..2 as Megatron's blocking batches in megatron_simulate, the class-wise closed form over the folded times never
    above it nor above the dependency-graph simulation of the folded times; equal stages give the textbook
    (m + p - 1) W of both (Huang et al. 2019; Narayanan et al. 2021 section 2.2.1)."""
    rng = random.Random(3802)
    for _ in range(150):
        p, m, c = rng.randint(2, 8), rng.randint(1, 12), rng.randint(0, 2)
        n_up = rng.randint(0, max(p - 2, 0))
        cls = [rng.randint(0, 3) for _ in range(8)]
        f, b = _ranks(p, n_up, cls) if p > 2 else ([cls[0], cls[6]], [cls[1], cls[7]])
        ff, bb = grid.fold(p, f, b, c)
        folded = [cls[0] + c, cls[1], cls[2] + c, cls[3] + c, cls[4] + c, cls[5] + c, cls[6], cls[7] + c]
        cf = float(pipeline.one_f_one_b_four_class_time(m, p, n_up, *(float(x) for x in folded)))
        assert cf == float(pipeline.one_f_one_b_time(m, np.asarray(ff, float), np.asarray(bb, float)))
        assert cf <= megatron_simulate(p, m, f, b, float(c))
        assert cf <= simulate(p, m, ff, bb)
    for p in range(2, 8):
        for m in (1, 3, 12):
            assert float(pipeline.one_f_one_b_four_class_time(m, p, 0, *[1.0, 2.0] * 4)) == simulate(
                p, m, [1] * p, [2] * p) == (m + p - 1) * 3


def test_path_e_on_a_run_that_straddles_its_kink() -> None:
    """p 4, m 3, ranks f [1, 2, 2, 1], b [1, 2, 2, 2]: the middle run is ranks 1-2 (n_u 2). Rank 1 runs 2 warm-up
    forwards and no backward between micro-batch 0's and its last forward (no path E); rank 2 one warm-up forward, so
    E exists there, and it is the only path of length 20 (every other chain <= 19): by hand F0 on ranks 0-3
    (1 + 2 + 2 + 1), B0 on ranks 3-2 (2 + 2), F2 on rank 2 (2), F2 on rank 3 and B2 there (1 + 2), B2 on ranks 2-0
    (2 + 2 + 1) = 20, what both simulations give. The closed forms must evaluate the run's last rank, not its first."""
    f, b = [1, 2, 2, 1], [1, 2, 2, 2]
    by_hand = (1 + 2 + 2 + 1) + (2 + 2) + 2 + (1 + 2) + (2 + 2 + 1)
    assert by_hand == 20 == simulate(4, 3, f, b) == megatron_simulate(4, 3, f, b, 0.0)
    assert _chain(4, 3, 1, "E") is None
    assert _length(4, 3, _chain(4, 3, 2, "E") or [], f, b) == 20
    others = [_length(4, 3, ch, f, b) for k in range(4) for name in "ACDE"
              if (k, name) != (2, "E") and (ch := _chain(4, 3, k, name)) is not None]
    assert max(others) == 19
    assert float(pipeline.one_f_one_b_four_class_time(3, 4, 2, 1.0, 1.0, 2.0, 2.0, 9.0, 9.0, 1.0, 2.0)) == 20.0
    assert float(pipeline.one_f_one_b_three_class_time(3, 4, 1.0, 1.0, 2.0, 2.0, 1.0, 2.0)) == 20.0
    # the same run as the lower one (n_u 0): ranks 1-2 of the lower class
    assert float(pipeline.one_f_one_b_four_class_time(3, 4, 0, 1.0, 1.0, 9.0, 9.0, 2.0, 2.0, 1.0, 2.0)) == 20.0
