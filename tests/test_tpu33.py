"""tpu33: a collective over a segment of one torus dimension is fed over that dimension's 2 links.

A group of ``p`` ranks, one a chip, at the stride of a torus dimension ``d`` with ``1 < p < d`` and ``p | d`` (the
4-way tensor group of the MaxText Llama 3.1 405B tiering config on a 16 x 16 v6e slice) was priced as on a switch,
over all 4 of the chip's links (2.51 ms for a 1.07 GB all-gather over 4 v6e chips). Under SPMD every segment of the
dimension runs the same collective at once, and a byte between two members must cross a link of that dimension
inside some segment, so a chip is fed over 2 links at most: ``sweeps (p - 1)/p S / (2 B_link)``, the same floor a
group along a whole dimension has. MaxText's ``hybrid_ring_64x4`` mesh (max_utils.reshape_mesh_to_rings at
AI-Hypercomputer/maxtext@5e6a7caff) makes each 4-way tensor group a 2 x 2 square ring of neighbouring chips, which
reaches that floor; the step simulation below runs it on the 16 x 16 torus.

Hand values: tpu-v6e-pod, 400 GB/s per chip over 4 links x 0.80 -> B_link = 80 GB/s per link and direction.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import scalemodel.api as api

B_LINK = 400e9 * 0.80 / 4  # tpu-v6e-pod: 80 GB/s a link a direction
S = 1.07e9  # 32768 tokens x 16384 x 2 bytes: the 405B row's gathered activation a TP group


def _best(op: str, ranks: int, stride: int = 1, cluster: str = "tpu-v6e-pod") -> float:
    row = api.collective(cluster, op, S, ranks, stride=stride).rows[0]
    return float(next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == row["best"]))


def test_a_four_chip_segment_all_gathers_over_two_links() -> None:
    """3/4 x 1.07 GB / (2 x 80 GB/s) = 5.016 ms (was 2.51 ms, all 4 links); every algorithm held there."""
    assert _best("allgather", 4) == pytest.approx(0.75 * S / (2 * B_LINK), rel=1e-9)
    assert _best("allgather", 4) == pytest.approx(5.0156e-3, rel=1e-4)
    row = api.collective("tpu-v6e-pod", "allgather", S, 4).rows[0]
    assert all(a["time_s"] >= 0.75 * S / (2 * B_LINK) * (1 - 1e-12) for a in row["algorithms"])


def test_a_segment_of_the_second_dimension_and_an_all_reduce() -> None:
    """8 chips at stride 16 (dimension 2): all-reduce 2 x 7/8 x S / (2 B_link) = 11.70 ms; the multislice
    cluster's ICI tier gives the same."""
    want = 2 * 7 / 8 * S / (2 * B_LINK)
    assert _best("allreduce", 8, 16) == pytest.approx(want, rel=1e-9)
    assert _best("allreduce", 8, 16, "tpu-v6e-multislice") == pytest.approx(want, rel=1e-9)
    assert _best("reducescatter", 2) == pytest.approx(1 / 2 * S / (2 * B_LINK), rel=1e-9)


@pytest.mark.parametrize(("ranks", "stride"), [(3, 1), (4, 3), (5, 2)])
def test_groups_that_are_no_segment_keep_the_switch_price(ranks: int, stride: int) -> None:
    """No divisor of 16 (3), a stride whose block does not divide the dimension (4 at 3: 12 chips; 5 at 2: 10):
    no segment, so the switch price over all 4 links stays, under what the 2-link floor would give."""
    assert _best("allgather", ranks, stride) < (ranks - 1) / ranks * S / (2 * B_LINK) * 0.75


def _line_floor(p: int, j: int, d: int = 16) -> float:
    """Seconds a link of one 16-chip torus line must carry at least, by enumeration (no formula of the model's):
    the mesh axis's groups tile the line, ``{r + b p j + m j}`` for m < p (r < j, b < d / (p j)); each member's
    S / p block reaches the p - 1 others only across links of the line (every other line is busy with its own
    groups: SPMD), at least over the shortest arc of the ring holding them all (d less the widest gap between
    neighbouring members), and the line has 2 d directed links of B_LINK."""
    crossed = 0.0
    for r in range(j):
        for b in range(d // (p * j)):
            members = sorted(r + b * p * j + m * j for m in range(p))
            gaps = [(members[(k + 1) % p] - members[k]) % d for k in range(p)]
            crossed += p * (d - max(gaps)) * S / p  # every member's block, over the arc
    return crossed / (2 * d * B_LINK)


@pytest.mark.parametrize(("ranks", "stride", "hops"), [(4, 1, 1), (2, 1, 1), (8, 1, 1), (4, 2, 2), (2, 4, 4),
                                                       (8, 2, 2), (4, 4, 4), (8, 32, 2), (2, 128, 8)])
def test_a_strided_segment_is_held_at_its_lines_floor(ranks: int, stride: int, hops: int) -> None:
    """review33a: p chips j apart along one dimension (stride j or 16 j) with p j dividing 16 (4 at 2: the axis
    under a 2-way inner one) was switch-priced over all 4 links, 2 j x under what the line's links can carry: each
    byte crosses j links of the dimension at least. The enumerated floor of the line is j (p - 1)/p S / (2 B_link),
    and the price is held there (every algorithm)."""
    floor = _line_floor(ranks, hops)
    assert floor == pytest.approx(hops * (ranks - 1) / ranks * S / (2 * B_LINK), rel=1e-12)
    row = api.collective("tpu-v6e-pod", "allgather", S, ranks, stride=stride).rows[0]
    assert min(a["time_s"] for a in row["algorithms"]) >= floor * (1 - 1e-12)
    assert _best("allgather", ranks, stride) == pytest.approx(floor, rel=1e-9)


def test_a_whole_dimension_keeps_its_ring() -> None:
    """16 chips at stride 1 (one whole dimension): the bidirectional ring, 15 alpha + 15/16 S / (2 B_link)."""
    assert _best("allgather", 16) == pytest.approx(15 * 0.75e-6 + 15 / 16 * S / (2 * B_LINK), rel=1e-9)


def _hybrid_ring_blocks() -> list[list[tuple[int, int]]]:
    """MaxText reshape_mesh_to_rings(HYBRID_RING_64X4) on a 16 x 16 mesh: block (i, j) is the ring
    (2i, 2j) -> (2i, 2j+1) -> (2i+1, 2j+1) -> (2i+1, 2j)."""
    return [[(2 * i, 2 * j), (2 * i, 2 * j + 1), (2 * i + 1, 2 * j + 1), (2 * i + 1, 2 * j)]
            for i in range(8) for j in range(8)]


def test_maxtexts_two_by_two_rings_reach_the_floor() -> None:
    """Step simulation: all 64 tensor groups run a bidirectional ring all-gather at once (each chip's S/4 shard cut
    in halves, one each way round the block, 3 steps). Every hop is one torus link; the busiest directed link
    carries S/8 a step, so the time is 3 x S/8 / B_link = 3/4 S / (2 B_link), the floor priced above."""
    steps, half = 3, S / 4 / 2
    worst = 0.0
    for _ in range(steps):
        load: dict[tuple[tuple[int, int], tuple[int, int]], float] = defaultdict(float)
        for ring in _hybrid_ring_blocks():
            for k, a in enumerate(ring):
                for b in (ring[(k + 1) % 4], ring[(k - 1) % 4]):
                    dx, dy = (b[0] - a[0]) % 16, (b[1] - a[1]) % 16
                    assert {dx, dy} <= {0, 1, 15} and (dx == 0) != (dy == 0)  # a neighbour: one link
                    load[(a, b)] += half
        worst += max(load.values()) / B_LINK
    assert worst == pytest.approx(0.75 * S / (2 * B_LINK), rel=1e-12)
    assert worst == pytest.approx(_best("allgather", 4), rel=1e-9)
