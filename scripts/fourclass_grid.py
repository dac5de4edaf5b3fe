"""Exhaustive check of the class-wise 1F1B closed forms (fourclass38): cost.pipeline.one_f_one_b_four_class_time and
one_f_one_b_three_class_time against cost.pipeline.one_f_one_b_time on the ranks written out (the rank-by-rank
formula) and against two step-by-step simulations of the schedule that share no code with the formulas (tests/
test_pipeline_uneven.py ``simulate``, the 1F1B dependency graph; tests/test_pipeline_exchanges.py
``megatron_simulate``, Megatron-Core's program with its batched blocking exchanges of ``c`` seconds).

Usage: python scripts/fourclass_grid.py [--values 0,1,3] [--sim-values 1,3] [--exchanges 0,1] [--max-pp 9] [--max-m 12]

Grid: pp 2 .. max-pp, m 1 .. max-m, every run split n_u = 0 .. p-2 (rank 0, n_u upper middle ranks, p-2-n_u lower
ones, the last), each of the 4 classes' forward and backward seconds from ``--values`` (8 independent integers) and
the exchange ``c`` from ``--exchanges``. The exchange is folded where Megatron-Core's 1F1B program runs its blocking
batch (tests/test_pipeline_exchanges.py megatron_program): after each forward on every rank but the last (activation
out, gradient in), after each backward on every rank but the first (gradient out, activation in); so rank 0 carries
f + c, b; a middle rank f + c, b + c; the last f, b + c. All sums are of small integers, so float arithmetic is
exact and every comparison here is ``==`` or ``<=`` with no tolerance.

Checks: (1) four-class == rank-by-rank on the full ``--values`` grid (numpy, vectorised); three-class == four-class
at n_u = p - 2, bit for bit; (2) on the ``--sim-values`` grid the closed form is never above either simulation (a
chain of the schedule's dependent operations is a lower bound of its makespan), with the count of exact hits and the
worst shortfall. Exit 1 on any failure."""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_pipeline_exchanges import megatron_simulate  # noqa: E402
from test_pipeline_uneven import simulate  # noqa: E402

from scalemodel.cost import pipeline  # noqa: E402


def ranks(p: int, n_up: int, cls: tuple[float, ...]) -> tuple[list[float], list[float]]:
    """(forwards, backwards) of the p ranks: rank 0, n_up upper, p-2-n_up lower middle ranks, the last."""
    ff, bf, fu, bu, fo, bo, fl, bl = cls
    if p == 2:
        return [ff, fl], [bf, bl]
    n_low = p - 2 - n_up
    return [ff] + [fu] * n_up + [fo] * n_low + [fl], [bf] + [bu] * n_up + [bo] * n_low + [bl]


def fold(p: int, f: list[float], b: list[float], c: float) -> tuple[list[float], list[float]]:
    """Each rank's forward and backward with its blocking exchange batches (module docstring)."""
    return ([x + (c if r < p - 1 else 0) for r, x in enumerate(f)],
            [x + (c if r > 0 else 0) for r, x in enumerate(b)])


def closed_grid(values: list[int], exchanges: list[int], max_pp: int, max_m: int) -> tuple[int, int]:
    """(cases, mismatches) of four-class against rank-by-rank (and three-class at n_u = p - 2)."""
    combos = np.asarray(list(itertools.product(values, repeat=8)), dtype=float)  # (K, 8)
    ms = np.arange(1, max_m + 1, dtype=float)[:, None]  # (M, 1)
    cases = bad = 0
    for p in range(2, max_pp + 1):
        for n_up in range(max(p - 2, 0) + 1):
            for c in exchanges:
                ff, bf, fu, bu, fo, bo, fl, bl = (combos[:, i] for i in range(8))
                # the class-level fold: rank 0 f + c; middle f + c, b + c; last b + c
                cls = (ff + c, bf, fu + c, bu + c, fo + c, bo + c, fl, bl + c)
                f_cols, b_cols = ranks(p, n_up, cls)  # type: ignore[arg-type]
                want = pipeline.one_f_one_b_time(ms, np.stack(f_cols, axis=-1)[None], np.stack(b_cols, axis=-1)[None])
                got = pipeline.one_f_one_b_four_class_time(ms, p, n_up, *cls)
                miss = ~(got == want)
                if n_up == max(p - 2, 0):
                    three = pipeline.one_f_one_b_three_class_time(ms, p, cls[0], cls[1], cls[2], cls[3], cls[6],
                                                                  cls[7])
                    miss |= ~(three == got)
                cases += miss.size
                bad += int(miss.sum())
                for i, j in zip(*np.nonzero(miss), strict=True):
                    if bad <= 10:
                        print(f"MISMATCH p {p} n_u {n_up} m {int(ms[i, 0])} c {c} classes "
                              f"{[float(x[j]) for x in cls]}: four-class {got[i, j]} rank-by-rank {want[i, j]}")
    return cases, bad


def sim_grid(values: list[int], exchanges: list[int], max_pp: int, max_m: int) -> tuple[int, int, int, float]:
    """(cases, above a simulation, exact against megatron_simulate, worst shortfall against it)."""
    cases = above = exact = 0
    worst = 0.0
    for p in range(2, max_pp + 1):
        for n_up in range(max(p - 2, 0) + 1):
            for cls in itertools.product(values, repeat=8):
                f, b = ranks(p, n_up, tuple(float(x) for x in cls))
                if p > 2 and n_up == 0 and cls[2:4] != (values[0],) * 2:
                    continue  # no upper rank: its values do not matter (one representative)
                if p > 2 and n_up == p - 2 and cls[4:6] != (values[0],) * 2:
                    continue
                for c in exchanges:
                    ff, bb = fold(p, f, b, float(c))
                    for m in range(1, max_m + 1):
                        cls_f = (ff[0], bb[0], ff[1] if n_up else 0.0, bb[1] if n_up else 0.0,
                                 ff[-2] if p > 2 else 0.0, bb[-2] if p > 2 else 0.0, ff[-1], bb[-1])
                        cf = float(pipeline.one_f_one_b_four_class_time(m, p, n_up, *cls_f))
                        sim = megatron_simulate(p, m, f, b, float(c))
                        plain = simulate(p, m, ff, bb) if c == 0 else sim
                        cases += 1
                        if cf > sim or cf > plain:
                            above += 1
                            print(f"ABOVE p {p} n_u {n_up} m {m} c {c} f {f} b {b}: closed {cf} sim {sim} {plain}")
                        exact += cf == sim
                        worst = max(worst, 1.0 - cf / sim if sim > 0 else 0.0)
    return cases, above, exact, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--values", default="0,1,3")
    ap.add_argument("--sim-values", default="1,3")
    ap.add_argument("--exchanges", default="0,1")
    ap.add_argument("--max-pp", type=int, default=9)
    ap.add_argument("--max-m", type=int, default=12)
    a = ap.parse_args()

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",")]

    t0 = time.time()
    cases, bad = closed_grid(ints(a.values), ints(a.exchanges), a.max_pp, a.max_m)
    print(f"closed forms: {cases} cases, {bad} differ from one_f_one_b_time ({time.time() - t0:.0f} s)")
    t0 = time.time()
    n, above, exact, worst = sim_grid(ints(a.sim_values), ints(a.exchanges), a.max_pp, a.max_m)
    print(f"simulations: {n} cases, {above} above a simulation, {exact} equal to megatron_simulate "
          f"({exact / max(n, 1):.1%}), worst {worst:.1%} short ({time.time() - t0:.0f} s)")
    return 1 if bad or above else 0


if __name__ == "__main__":
    sys.exit(main())
