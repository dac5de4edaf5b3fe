"""rhdbig35: recursive halving / doubling's folded crossings in closed form, equal to the rank arrays they replaced.

``algorithms._folded_crossings`` (speed35, main at 8c520891) listed every renumbered rank of every step after
MPICH's fold: O(p log p) work, 15 s of CPU and 400 MB at 1e7 ranks, over 120 s at 1e8 (fuzz35). It now prices a
few runs of pairs per group (docs/model.md#rhd-fold). That rank-array version is kept here, verbatim but for its
name and block size, as the reference (tests/test_speed35.py keeps the row-by-row loop before it): the closed form
must give the same boolean arrays on random groups up to 1e5 ranks with domain sizes of any integer, nested or not,
on placements of the shipped clusters at strides that make them no power of two, and at hand-counted cases; and a
collective at 1e8 ranks must finish within the hostile-input suite's hang guard."""

from __future__ import annotations

import numpy as np
import pytest
from test_hostile_inputs import accepted, no_hang  # noqa: F401 (no_hang: autouse)

from scalemodel.cost import algorithms
from scalemodel.cost.algorithms import _folded_crossings, _folded_step_tiers, log2_floor, rhd_time
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster


def _rank_array_reference(n_ranks: np.ndarray, bounds: np.ndarray, ntiers: int, steps: int
                      ) -> tuple[list[np.ndarray], np.ndarray]:
    """Per folded group (``n_ranks`` p, not a power of two; ``bounds`` its c_0 .. c_{T-2}, shape (rows, T - 1)):
    the tiers step k's pairs cross (``crossed[k]``, shape (rows, T)) and the steps the group runs, lg p'
    (``reach``). Rows of one p' share their rank arrays: rank j of the p' left after the fold is group rank
    2j + 1 for j < r (r = p - p') and j + r after; step k pairs j with j + 2^k (bit k of j clear), and a pair
    crosses the tier that counts the domains of tiers 0 .. T-2 it straddles (nested domains)."""
    lg = (np.frexp(n_ranks.astype(float))[1] - 1).astype(np.int64)  # exactly floor(lg p): p = m 2^e, m in [1/2, 1)
    crossed = [np.zeros((len(n_ranks), ntiers), dtype=bool) for _ in range(steps)]
    for e in np.unique(lg):
        p2 = 1 << int(e)
        group = np.flatnonzero(lg == e)
        j = np.arange(p2)
        block = max(1, (1 << 20) // p2)
        for first in range(0, len(group), block):
            sel = group[first:first + block]
            r = (n_ranks[sel] - p2)[:, None]
            actual = np.where(j < r, 2 * j + 1, j + r)
            domain = [np.floor(actual / c[:, None]) for c in bounds[sel].T]  # each rank's tier-b domain
            base = (np.arange(len(sel)) * ntiers)[:, None]
            for k in range(min(steps, int(e))):
                # ranks j (bit k clear) and j + 2^k: the two halves of each block of 2^(k+1) ranks
                tier_of = base + np.zeros(p2 // 2, dtype=np.int64)  # row-major (row, tier) bins
                for d in domain:
                    blocks = d.reshape(len(sel), -1, 2, 1 << k)
                    tier_of += (blocks[:, :, 0] != blocks[:, :, 1]).reshape(len(sel), -1)
                crossed[k][sel] = np.bincount(tier_of.ravel(), minlength=len(sel) * ntiers).reshape(-1, ntiers) > 0
    return crossed, lg



def _same(n_ranks: np.ndarray, bounds: np.ndarray, ntiers: int) -> None:
    steps = int(np.max(np.frexp(n_ranks.astype(float))[1] - 1))
    got, reach = _folded_crossings(n_ranks, bounds, ntiers, steps)
    want, want_reach = _rank_array_reference(n_ranks, bounds.astype(float), ntiers, steps)
    assert np.array_equal(reach, want_reach)
    for k in range(steps):
        bad = np.flatnonzero(np.any(got[k] != want[k], axis=1))
        assert not bad.size, (k, n_ranks[bad[:3]], bounds[bad[:3]], got[k][bad[:3]], want[k][bad[:3]])


def _not_power_of_two(rng: np.random.Generator, top: int, size: int) -> np.ndarray:
    p = rng.integers(3, top + 1, size=size)
    return np.where(p & (p - 1) == 0, p + 1, p)


@pytest.mark.parametrize("ntiers", [1, 2, 3, 4, 5])
def test_closed_form_equals_the_rank_arrays_on_random_domains(ntiers: int) -> None:
    """Random folded groups (p from 3 to 1e5, not a power of two) with T - 1 domain sizes drawn as the placement
    makes them (integers, non-decreasing, 1 <= c <= p) but otherwise any: powers of two, multiples of 3, primes,
    near p, near a power of two, so domains neither nest nor divide p'."""
    rng = np.random.default_rng(350 + ntiers)
    for top in (40, 300, 5000, 100_000):
        n = _not_power_of_two(rng, top, 60)
        raw = []
        for _ in range(ntiers - 1):
            form = rng.integers(0, 4, size=n.size)
            any_c = rng.integers(1, n + 1)
            pow2 = 2 ** rng.integers(0, np.log2(n).astype(int) + 1)
            near = np.clip(2 ** rng.integers(1, np.log2(n).astype(int) + 1) + rng.integers(-2, 3, size=n.size), 1, n)
            raw.append(np.choose(form, [any_c, pow2, near, 3 * np.maximum(pow2 // 4, 1)]))
        c = np.sort(np.stack(raw, axis=1), axis=1) if raw else np.zeros((n.size, 0), dtype=np.int64)
        _same(n.astype(np.int64), np.minimum(c, n[:, None]).astype(np.int64), ntiers)


def test_closed_form_equals_the_rank_arrays_on_every_small_group() -> None:
    """Exhaustively: every p from 3 to 200 that is not a power of two, against every pair of domain sizes
    1 <= c_0 <= c_1 <= p in steps that reach all residues of small domains (4 tiers with c_2 = p)."""
    rows = [(p, c0, c1) for p in range(3, 201) if p & (p - 1) for c0 in range(1, min(p, 24) + 1)
            for c1 in (c0, c0 + 1, 2 * c0, 3 * c0 + 1, 16, 24, 40, 72, p - 1, p) if c0 <= c1 <= p]
    a = np.array(rows, dtype=np.int64)
    _same(a[:, 0], np.concatenate([a[:, 1:], a[:, :1]], axis=1), 4)


CLUSTERS = ("dgx-a100", "dgx-h100", "gb200-nvl72", "tpu-v5p-multislice", "tpu-v5e-pod", "pcie-25gbe", "dgx-2")


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_closed_form_equals_the_rank_arrays_on_cluster_placements(cluster: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """Placements as the planner makes them: group sizes up to 1e5 around powers of two and anywhere, strides
    1 to 48 (odd ones make domain sizes like 8 / 3 = 2, 256 / 3 = 85): every step's crossed-tier array and rhd's
    times (all-reduce, reduce-scatter, all-gather) equal to the rank-array version's."""
    net = build_network(load_cluster(cluster, []))
    rng = np.random.default_rng(35_35)
    e = rng.integers(1, 17, size=(5, 12))
    p = np.clip(2.0 ** e + rng.integers(-3, 4, size=e.shape), 1, 100_000)
    p[0] = rng.integers(1, 100_001, size=p.shape[1])
    stride = rng.integers(1, 49, size=(1, 12)).astype(float)
    pl = place(p, stride, net)
    L = log2_floor(pl.p)
    steps = int(np.max(L))

    def reference(pl_, steps_):  # type: ignore[no-untyped-def]
        with monkeypatch.context() as mp:
            mp.setattr(algorithms, "_folded_crossings", _rank_array_reference)
            return _folded_step_tiers(pl_, steps_)

    got, want = _folded_step_tiers(pl, steps), reference(pl, steps)
    for k in range(steps):
        assert np.array_equal(got[k], want[k]), (cluster, k)
    S = rng.uniform(1e3, 1e10, size=p.shape)
    for op in ("allreduce", "reducescatter", "allgather"):
        ours = rhd_time(op, S, pl, 1e-12)
        with monkeypatch.context() as mp:
            mp.setattr(algorithms, "_folded_step_tiers", reference)
            ref = rhd_time(op, S, pl, 1e-12)
        assert np.array_equal(ours, ref), (cluster, op)


def test_p25_on_domains_of_16_and_12_by_hand() -> None:
    """p 25: p' 16, r 9, rank j is group rank 2j + 1 for j < 9 (1, 3, .., 17) and j + 9 after (18 .. 24).
    Domains of 16 (ranks 0-15 | 16-24): steps 0-2 pair ranks within one half (17-18, 21-23, 20-24 ..), step 3
    pairs j, j + 8 = (1, 17), (3, 18), .., (15, 24), every one across: tier 0 for steps 0-2, tier 1 alone for
    step 3 (the aligned rule would say tier 0: a block of 16 inside a domain of 16).
    Domains of 12 (0-11 | 12-23 | 24): step 0 pairs (1, 3) .. (23, 24): 23-24 across, the rest within; step 1
    (9, 13) across, (1, 5) within; step 2 (5, 13) across, (1, 9) within; step 3 (1, 17) across, (13, 23) within:
    tiers 0 and 1 at every step."""
    got, _ = _folded_crossings(np.array([25, 25]), np.array([[16], [12]]), 2, 4)
    assert [g[0].tolist() for g in got] == [[True, False]] * 3 + [[False, True]]
    assert [g[1].tolist() for g in got] == [[True, True]] * 4


def test_ranks_15_to_24_cross_by_hand_on_three_tiers() -> None:
    """p 25 on domains of 16 inside domains of 20 (not nested: 16 does not divide 20): step 3 pairs
    (1, 17), (3, 18), (5, 19) cross the 16 boundary only (count 1), (7, 20) .. (15, 24) cross 16 and 20 (count 2): tiers
    1 and 2; step 2's (17, 21), (18, 22), (19, 23), (20, 24) cross 20 alone or nothing, (1, 9) .. (7, 15) nothing:
    tiers 0 and 1."""
    got, _ = _folded_crossings(np.array([25]), np.array([[16, 20]]), 3, 4)
    assert got[3][0].tolist() == [False, True, True]
    assert got[2][0].tolist() == [True, True, False]


def test_runs_priced_in_blocks_give_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces are priced ``_FOLD_BLOCK`` at a time: blocks of 1, 7 and 64 pieces give the one-block answer."""
    n = np.array([25, 27, 1000001, 99, 3001], dtype=np.int64)
    c = np.array([[8, 24], [3, 9], [8, 160], [5, 50], [7, 1000]], dtype=np.int64)
    want = _folded_crossings(n, c, 3, 19)[0]
    for block in (1, 7, 64):
        monkeypatch.setattr(algorithms, "_FOLD_BLOCK", block)
        got = _folded_crossings(n, c, 3, 19)[0]
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), block


def test_a_collective_of_1e8_ranks_finishes(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """fuzz35's case: all-gather with rhd on 99,999,743 ranks (not a power of two) of a dgx-h100 grown to
    99,999,744 GPUs, and an all-reduce sweep of sizes, at stride 1 and 3: exit 0 under the hang guard (no_hang,
    20 s of CPU), where the rank arrays took over 120 s."""
    big = ("-c", "dgx-h100", "--set", "cluster.max_gpus=99999744", "--set", "cluster.tiers.ib-core.span=99999744")
    out = accepted(cli, "collective", *big, "-n", "99999743", "--op", "allgather", "--algo", "rhd")
    assert out["rows"][0]["algorithms"]
    accepted(cli, "collective", *big, "-n", "99999743", "--sizes", "1KiB:8GiB")
    accepted(cli, "collective", *big, "-n", "33333247", "--stride", "3", "--algo", "rhd")


def test_domains_of_no_common_period_at_3e7_ranks_finish(cli) -> None:  # type: ignore[no-untyped-def]
    """Tiers of 8, 8,000, 8e6 and 9.6e7 GPUs at stride 3: domains of 2, 2,666 and 2,666,666 ranks, whose runs of
    pairs repeat only after lcm(1,333, 1,333,333) runs, more than the 1.6e7 a step holds; the first closed form
    priced them all (41 s of CPU at 31,999,999 ranks). The large bounds' few multiples are priced one by one
    (algorithms._whole_runs): exit 0 within the hang guard (equality with the rank arrays is checked above, on
    groups the rank arrays can hold)."""
    big = ("-c", "dgx-h100", "--set", "cluster.max_gpus=96000000", "--set", "cluster.tiers.ib-leaf.span=8000",
           "--set", "cluster.tiers.ib-spine.span=8000000", "--set", "cluster.tiers.ib-core.span=96000000")
    for op in ("allgather", "allreduce"):
        assert accepted(cli, "collective", *big, "-n", "31999999", "--stride", "3", "--op", op, "--algo", "rhd")
