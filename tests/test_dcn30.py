"""The cross-slice (DCN) all-reduce on the TPU multislice clusters, checked against a step simulation by hand.

XLA's multislice data parallelism (jax-ml/scaling-book@0819a7d8 training.md L555-559: "pure data parallelism over
the DCN axis and FSDP within a pod", the pod's DCN bandwidth counted as every host's 2.5e10 B/s summed): each chip
reduce-scatters over the slice's ICI, all-reduces its 1/p0 shard with the same chip position of the other slices
over the DCN (p0 parallel rings, one per chip position, each on that chip's share of its host's NICs), and
all-gathers over the ICI. Rates and latencies below are typed from the datasheets the cluster YAMLs cite
([GCP-v5e], [GCP-v6e], [GCP-v5p]) and the tiers' stated efficiencies, not read from the model.
docs/model.md#dcn-allreduce has the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import algorithms, collectives
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster

S = 16e9  # bytes, the all-reduce prop30 flagged
ALPHA_ICI, ALPHA_DCN = 0.75e-6, 35e-6
# (cluster, overrides, ICI B/s a chip a direction, DCN B/s a chip = host NICs / chips a host, tier efficiencies)
CLUSTERS = [
    ("tpu-v5e-multislice", (), 200e9, 2 * 100e9 / 8 / 8, 0.80, 0.62),  # 2 x 100 Gb/s a host, 8 chips
    ("tpu-v6e-multislice", (), 400e9, 4 * 200e9 / 8 / 8, 0.80, 0.62),  # 4 x 200 Gb/s a host, 8 chips
    ("tpu-v5p-multislice", ("tiers.ici.span=256",), 600e9, 50e9 / 8, 0.80, 0.62),  # 50 Gb/s a chip
]
P0 = 256  # chips a slice


def _ring_reduce_scatter(bufs: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Ring reduce-scatter over len(bufs) ranks, step by step: at step s rank r sends its partial chunk (r - s) mod p
    to rank r + 1, which adds it. Returns each rank's buffer and the elements one rank sent."""
    p = len(bufs)
    chunks = [np.array_split(b.copy(), p) for b in bufs]
    sent = 0
    for s in range(p - 1):
        msgs = [chunks[r][(r - s) % p].copy() for r in range(p)]
        for r in range(p):
            chunks[(r + 1) % p][(r - s) % p] += msgs[r]
        sent += len(msgs[0])
    return [np.concatenate(c) for c in chunks], sent


def _ring_all_gather(bufs: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Ring all-gather after :func:`_ring_reduce_scatter` (rank r holds chunk (r + 1) mod p complete): at step s rank r
    forwards chunk (r + 1 - s) mod p to rank r + 1."""
    p = len(bufs)
    chunks = [np.array_split(b.copy(), p) for b in bufs]
    sent = 0
    for s in range(p - 1):
        msgs = [chunks[r][(r + 1 - s) % p].copy() for r in range(p)]
        for r in range(p):
            chunks[(r + 1) % p][(r + 1 - s) % p] = msgs[r]
        sent += len(msgs[0])
    return [np.concatenate(c) for c in chunks], sent


def test_the_multislice_schedule_reduces_and_sends_a_shard_over_the_dcn() -> None:
    """Data-level simulation on 3 slices of 4 chips: RS over ICI, AR of each chip position's shard across the slices,
    AG over ICI gives every chip the full sum; a chip sends 2(p0-1)/p0 S over ICI and only 2(N-1)/N S/p0 over DCN."""
    p0, n, length = 4, 3, 4 * 3 * 5
    rng = np.random.default_rng(30)
    data = [[rng.integers(0, 1000, length).astype(float) for _ in range(p0)] for _ in range(n)]
    total = sum(sum(row) for row in data)
    ici = dcn = 0
    after_rs = []
    for sl in range(n):
        bufs, sent = _ring_reduce_scatter(data[sl])
        ici += sent
        after_rs.append(bufs)
    shard = np.array_split(np.arange(length), p0)  # rank r's complete chunk is (r + 1) mod p0
    for r in range(p0):
        idx = shard[(r + 1) % p0]
        parts, sent_rs = _ring_reduce_scatter([after_rs[sl][r][idx] for sl in range(n)])
        parts, sent_ag = _ring_all_gather(parts)
        dcn += sent_rs + sent_ag
        for sl in range(n):
            after_rs[sl][r][idx] = parts[sl]
    for sl in range(n):
        bufs, sent = _ring_all_gather(after_rs[sl])
        ici += sent
        for b in bufs:
            np.testing.assert_array_equal(b, total)
    ici_per_chip = ici / n  # a counter adds one rank's sends per ring; the n slices ran an RS and an AG ring each
    dcn_per_chip = dcn / p0  # p0 parallel rings across the slices, one per chip position
    assert ici_per_chip == 2 * (p0 - 1) / p0 * length  # 90 of 60 elements
    assert dcn_per_chip == 2 * (n - 1) / n * length / p0  # 20: the shard (15), 2 x 2/3 of it


def _simulated(n: int, ici: float, dcn: float) -> tuple[float, float]:
    """Step simulation of the schedule at full size: (seconds, bytes one chip sends over the DCN)."""
    t, shard = 0.0, S / P0
    for _ in range(P0 - 1):  # reduce-scatter over ICI: one S/p0 chunk a step
        t += ALPHA_ICI + (S / P0) / ici
    dcn_bytes = 0.0
    for _ in range(2 * (n - 1)):  # the shard's ring all-reduce across the n slices: one shard/n chunk a step
        t += ALPHA_DCN + (shard / n) / dcn
        dcn_bytes += shard / n
    for _ in range(P0 - 1):  # all-gather over ICI
        t += ALPHA_ICI + (S / P0) / ici
    return t, dcn_bytes


@pytest.mark.parametrize(("name", "sets", "ici", "dcn", "e_ici", "e_dcn"), CLUSTERS)
@pytest.mark.parametrize("n", [2, 32])
def test_hierarchical_all_reduce_is_the_step_simulation(name, sets, ici, dcn, e_ici, e_dcn, n) -> None:  # type: ignore[no-untyped-def]
    """hierarchical_time over n slices of 256 chips = the simulated schedule, the DCN level on every chip's own NIC
    share (256 parallel rings), not one ring over the hosts. v5e, 2 slices: 0.1996 s of ICI + 0.0323 s of DCN =
    0.2319 s; the DCN bytes a chip (62.5 MB) at line rate alone would be 0.020 s."""
    net = build_network(load_cluster(name, sets))
    want, dcn_bytes = _simulated(n, ici * e_ici, dcn * e_dcn)
    got = float(algorithms.algorithm_time("allreduce", "hierarchical", np.array(S), place(P0 * n, 1, net)))
    assert got == pytest.approx(want, rel=1e-9)
    assert dcn_bytes == pytest.approx(2 * (n - 1) / n * S / P0)
    if name == "tpu-v5e-multislice" and n == 2:
        assert want == pytest.approx(0.23193, abs=1e-5)
        assert dcn_bytes / dcn == pytest.approx(0.020)
    # the cross-slice group alone (n ranks 256 apart: what zero hsdp's replica all-reduce is placed on) prices the
    # shard at one chip's share: the same DCN level
    dcn_level = want - 2 * (P0 - 1) * (ALPHA_ICI + (S / P0) / (ici * e_ici))
    ring = float(algorithms.algorithm_time("allreduce", "ring", np.array(S / P0), place(n, P0, net)))
    assert ring == pytest.approx(dcn_level, rel=1e-9)


@pytest.mark.parametrize(("name", "sets", "ici", "dcn", "e_ici", "e_dcn"), CLUSTERS)
@pytest.mark.parametrize("n", [2, 32])
def test_no_all_reduce_beats_a_chips_bytes_over_all_its_links(name, sets, ici, dcn, e_ici, e_dcn, n) -> None:  # type: ignore[no-untyped-def]
    """Every chip sends at least 2(P-1)/P S (Patarasuk & Yuan 2009) over its ICI and DCN links together, so no
    algorithm beats that over ici + dcn at line rate; the ICI dominates (v5e: 0.157 s of the bound, the DCN
    alone 0.020 s at 2 slices)."""
    net = build_network(load_cluster(name, sets))
    p = P0 * n
    floor = 2 * (p - 1) / p * S / (ici + dcn)
    for algo in ("auto", "ring", "hierarchical"):
        t = float(collectives.collective_time("allreduce", S, p, net, algorithm=algo, dtype_bytes=1))
        assert t >= floor
