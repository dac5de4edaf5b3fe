"""Parameter-server traffic against the BytePS closed forms worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import ps
from scalemodel.errors import InputError

M, B = 1e9, 12.5e9  # 1 GB gradients, 100 Gbit/s


def test_allreduce_and_dedicated_ps():
    # n = 8: ring moves 2*7/8 M = 1.75 M/B
    assert ps.allreduce_ring_time(8, M, B) == pytest.approx(1.75 * M / B)
    # k = 8 servers: max(M/B, 8M/(8B)) = M/B, half the all-reduce in the n -> inf limit
    assert ps.ps_time(8, 8, M, B) == pytest.approx(M / B)
    # k = 2: server bound 8M/(2B) = 4 M/B
    assert ps.ps_time(8, 2, M, B) == pytest.approx(4 * M / B)
    # break-even k > n^2/(2(n-1)): 64/14 = 4.571 for n = 8, 4096/126 = 32.51 for n = 64
    assert ps.ps_beats_allreduce_servers([8, 64]) == pytest.approx([64 / 14, 4096 / 126])
    assert ps.ps_time(8, 5, M, B) < ps.allreduce_ring_time(8, M, B) < ps.ps_time(8, 4, M, B)


def test_colocated_equals_allreduce_and_imbalance():
    n = np.array([2, 8, 64])
    np.testing.assert_allclose(ps.ps_time(n, n, M, B, colocated=True), ps.allreduce_ring_time(n, M, B))
    # n = 8, largest shard 1/4 instead of 1/8: M(1 + 6/4)/B = 2.5 M/B
    assert ps.ps_time(8, 8, M, B, colocated=True, f_max=0.25) == pytest.approx(2.5 * M / B)
    # dedicated, k = 4, f_max = 0.4: 8 * 0.4 M/B = 3.2 M/B (max f governs, not the mean)
    assert ps.ps_time(8, 4, M, B, f_max=0.4) == pytest.approx(3.2 * M / B)
    with pytest.raises(InputError):
        ps.ps_time(8, 4, M, B, f_max=0.1)


def test_byteps_table():
    # BytePS Theorem 1 by hand, t_opt in units of M/B
    for n, row in ((8, [1.750, 1.474, 1.273, 1.000]), (64, [1.969, 1.585, 1.326, 1.000])):
        ks = np.array([0, n / 4, n / 2, n])
        np.testing.assert_allclose(ps.byteps_time(n, ks, M, B) / (M / B), row, atol=1e-3)
    # n = 8, k = 4: 1.75 / 1.2727 = 1.375x over all-reduce
    assert ps.allreduce_ring_time(8, M, B) / ps.byteps_time(8, 4, M, B) == pytest.approx(1.375)
    cpu, gpu = ps.byteps_split(8, 4, M)
    assert 4 * cpu + 8 * gpu == pytest.approx(M)
    # the split equalises CPU-server time n M_cpu/B and GPU time (M + (n-2) M_gpu)/B
    assert 8 * cpu == pytest.approx(M + 6 * gpu)


def test_shard_balance():
    assert ps.shard_fmax_heuristic(1, 0.5) == 1.0
    assert ps.shard_fmax_heuristic(16, 0.0) == pytest.approx(1 / 16)
    # greedy LPT on [4,3,3,2] into 2 servers: {4,2} {3,3} -> 6/12
    assert ps.shard_fmax_from_sizes([4, 3, 3, 2], 2) == pytest.approx(0.5)
    # one 100 MB tensor + small ones on 4 servers is lumpy; 4 MB partitions fix it
    sizes = [100e6] + [1e6] * 20
    assert ps.shard_fmax_from_sizes(sizes, 4) == pytest.approx(100 / 120)
    assert ps.shard_fmax_from_sizes(sizes, 4, partition_bytes=4e6) <= 0.27


def test_async_rate_caps():
    # workers: 8/(1 + 2*0.08) = 6.897/s; servers: 2 * 12.5e9/(2e9) = 12.5/s
    assert ps.async_ps_rate(8, 1.0, 2, M, B) == pytest.approx(8 / 1.16)
    assert ps.async_ps_rate(64, 1.0, 2, M, B) == pytest.approx(12.5)
    with pytest.raises(InputError):
        ps.ps_time(0, 1, M, B)
    with pytest.raises(InputError):
        ps.allreduce_ring_time(8, M, 0.0)
