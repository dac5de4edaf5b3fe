"""speed35: recursive halving / doubling's folded step tiers, vectorised over numpy, equal to the loop they replaced.

``algorithms._folded_step_tiers`` walked every distinct folded (p, c_0 .. c_{T-2}) group in Python, one rank array
per group and step. The loop is kept here, verbatim but for its signature, as the reference: the vectorised
function must give the same boolean arrays on every placement drawn, and so ``rhd_time`` the same bits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalemodel.cost import algorithms
from scalemodel.cost.algorithms import _folded_step_tiers, log2_floor, rhd_time
from scalemodel.cost.placement import Placement, place
from scalemodel.engine import intervals
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster


def _loop_reference(pl: Placement, steps: int) -> list[np.ndarray]:
    """The row-by-row loop of main at f31c4ecd (scalemodel/cost/algorithms.py, ``_folded_step_tiers``)."""
    p = np.asarray(pl.p, dtype=float)
    levels = np.arange(pl.ntiers).reshape((-1,) + (1,) * p.ndim)
    out = [levels == pl.tier_for_block(2.0 ** (k + 1)) for k in range(steps)]
    folded = 2.0 ** log2_floor(p) < p
    if steps == 0 or not np.any(folded):
        return out
    cs = np.stack([np.broadcast_to(np.asarray(c, dtype=float), p.shape) for c in pl.c[:-1]] or
                  [np.zeros(p.shape)], axis=-1)
    rows, inverse = np.unique(np.concatenate([p[..., None], cs], axis=-1)[folded], axis=0, return_inverse=True)
    where = np.flatnonzero(folded.ravel())
    for n, row in enumerate(rows):
        n_ranks, bounds = int(row[0]), row[1:pl.ntiers]
        p2 = 1 << (n_ranks.bit_length() - 1)
        j = np.arange(p2)
        actual = np.where(j < n_ranks - p2, 2 * j + 1, j + (n_ranks - p2))
        at = where[np.ravel(inverse) == n]
        for k in range(min(steps, p2.bit_length() - 1)):
            lo = j[((j >> k) & 1 == 0) & (j + (1 << k) < p2)]
            x, y = actual[lo], actual[lo + (1 << k)]
            tier_of = np.zeros(len(lo), dtype=int)
            for c in bounds:
                tier_of += np.floor(x / c) != np.floor(y / c)
            crossed = np.zeros(pl.ntiers, dtype=bool)
            crossed[np.unique(tier_of)] = True
            flat = out[k].reshape(pl.ntiers, -1)
            flat[:, at] = crossed[:, None]
    return out


def _steps(pl: Placement) -> int:
    L = log2_floor(pl.p)
    return int(np.max(L)) if L.size else 0


# clusters of one to four tiers, a full mesh, a torus and a multislice DCN among them
CLUSTERS = ("dgx-a100", "dgx-h100", "gb200-nvl72", "tpu-v5p-multislice", "tpu-v5e-pod", "pcie-25gbe", "dgx-2")


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_vectorised_fold_equals_the_loop_on_random_grids(cluster: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random grids of group sizes (powers of two, one either side, and any size up to 5,000) and strides, in
    2-D shapes like the planner's: every step's crossed-tier array identical to the loop's, and rhd's times too."""
    net = build_network(load_cluster(cluster, []))
    rng = np.random.default_rng(35)
    for _ in range(6):
        e = rng.integers(0, 13, size=(7, 9))
        p = np.clip(2.0 ** e + rng.integers(-1, 2, size=e.shape), 1, None)
        p[0] = rng.integers(1, 5001, size=p.shape[1])  # any size, mostly not a power of two
        stride = 2.0 ** rng.integers(0, 5, size=(1, 9)) * rng.integers(1, 4, size=(1, 9))
        pl = place(p, stride, net)
        steps = _steps(pl)
        got, want = _folded_step_tiers(pl, steps), _loop_reference(pl, steps)
        assert len(got) == len(want) == steps
        for k in range(steps):
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
            assert np.array_equal(got[k], want[k]), (cluster, k)
        S = rng.uniform(1e3, 1e10, size=p.shape)
        for op in ("allreduce", "reducescatter", "allgather"):
            ours = rhd_time(op, S, pl, 1e-12)
            assert np.array_equal(ours, ours)  # no NaN
            with monkeypatch.context() as mp:
                mp.setattr(algorithms, "_folded_step_tiers", _loop_reference)
                ref = rhd_time(op, S, pl, 1e-12)
            assert np.array_equal(ours, ref), (cluster, op)


def test_blocks_split_a_large_group_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of runs are priced in blocks of ``_FOLD_BLOCK`` (rhdbig35; speed35's blocks held ranks): a block of
    one piece, and blocks cutting a set of rows unevenly, give the loop's answer (p 1,000,001 on dgx-a100)."""
    net = build_network(load_cluster("dgx-a100", []))
    p = np.array([[25.0, 27.0, 29.0, 31.0, 1000001.0], [24.0, 100.0, 1000.0, 3.0, 7.0]])
    pl = place(p, np.array([[1.0], [8.0]]), net)
    want = _loop_reference(pl, _steps(pl))
    for block in (1, 40, 64, 100):
        monkeypatch.setattr(algorithms, "_FOLD_BLOCK", block)
        got = _folded_step_tiers(pl, _steps(pl))
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), block


def test_p25_on_nodes_of_8_by_hand() -> None:
    """docs/model.md#rhd-fold's case by hand, on dgx-a100's 8-GPU nodes (4 tiers: nvlink 8, ib-leaf 160, ...): p 25,
    stride 1. p' 16, r 9: rank j is group rank 2j+1 for j < 9, j + 9 after: 1 3 5 7 9 11 13 15 17 | 18 .. 24,
    nodes (floor / 8) 0 0 0 0 1 1 1 1 2 | 2 2 2 2 2 2 3. Step 0 pairs (14, 15) = ranks 23, 24: nodes 2 and 3, the
    others one node each; step 1's (13, 15) = 22, 24 likewise; step 2 pairs (8, 12) = 17, 21 in node 2 and (0, 4) =
    1, 9 across; step 3 pairs j with j + 8, every one across nodes. So steps 0-2 cross tiers 0 and 1 where the
    aligned rule (a block of 2, 4, 8 ranks) says tier 0, and step 3 tier 1 alone, as the rule does."""
    net = build_network(load_cluster("dgx-a100", []))
    pl = place(np.array([25.0]), np.array([1.0]), net)
    got = _folded_step_tiers(pl, 4)
    assert [g[:, 0].tolist() for g in got] == [[True, True, False, False]] * 3 + [[False, True, False, False]]
    aligned = _folded_step_tiers(place(np.array([16.0]), np.array([1.0]), net), 4)
    assert [g[:, 0].tolist() for g in aligned] == [[True, False, False, False]] * 3 + [[False, True, False, False]]


def test_published_band_read_once_per_family_equals_the_search_over_the_runs() -> None:
    """``intervals._published_match`` keeps each family's most similar published runs for the process: for every
    family key tuple the shipped residuals hold (and one they do not), the cached answer is the one
    ``_most_similar`` gives on the runs read afresh, and asking twice gives the same runs."""
    with open(intervals.RESIDUALS) as f:
        runs = tuple(json.load(f)["cases"])
    families = {tuple(r[k] for k in intervals.KEYS) for r in runs} | {("nosuch", "DP", "dense", "bf16")}
    for fam in sorted(families):
        want = dict(zip(intervals.KEYS, fam, strict=True))
        keys, match = intervals._most_similar(runs, want, intervals.KEYS, fewest=1, value=lambda c, k: c[k])
        got = intervals._published_match(*fam)
        assert got == (tuple(keys), tuple(match)), fam
        assert intervals._published_match(*fam) is got
