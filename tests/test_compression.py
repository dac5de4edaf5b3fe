"""Compressed communication: all-reducible quantisation vs all-gathered top-k, break-even rule."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import compression as cp
from scalemodel.errors import InputError

M, B = 400e6, 25e9  # 100M fp32 parameters, 200 Gbit/s


def test_quantised_allreduce():
    dense = 2 * 63 / 64 * M / B
    assert cp.allreduce_compressed_time(64, M, B) == pytest.approx(dense)
    assert cp.compressed_comm_time("fp16", 64, M, B) == pytest.approx(dense / 2)
    assert cp.compressed_comm_time("int8", 64, M, B, t_enc_s=1e-3, t_dec_s=2e-3) == pytest.approx(
        dense / 4 + 3e-3)
    # latency: 2(n-1) alpha
    assert cp.allreduce_compressed_time(4, M, B, latency_s=1e-5) == pytest.approx(1.5 * M / B + 6e-5)
    assert cp.allreduce_compressed_time(1, M, B, t_enc_s=1.0) == 0.0


def test_topk_allgather_and_break_even():
    # n = 64, rho = 1 %, c = 2: (63)(0.02) M/B = 1.26 M/B vs dense 1.96875 M/B
    t = cp.compressed_comm_time("topk", 64, M, B, density=0.01)
    assert t == pytest.approx(63 * 0.02 * M / B)
    # break-even rho < 2/(n c): 1.5625 %, 0.390625 %, 0.09765625 % for n = 64, 256, 1024 (c = 2)
    np.testing.assert_allclose(cp.sparse_break_even_density([64, 256, 1024]), [0.015625, 0.00390625,
                                                                               0.0009765625])
    n = 256
    rho = cp.sparse_break_even_density(n)
    dense = cp.allreduce_compressed_time(n, M, B)
    assert cp.allgather_sparse_time(n, M, B, rho * 0.99) < dense < cp.allgather_sparse_time(n, M, B, rho * 1.01)
    # per-peer decode grows with n
    assert cp.allgather_sparse_time(8, M, B, 0.01, t_dec_per_peer_s=1e-3) == pytest.approx(
        7 * 0.02 * M / B + 7e-3)


def test_agarwal_margin():
    assert bool(cp.compression_worthwhile(1.0, 0.85))
    assert not bool(cp.compression_worthwhile(1.0, 0.95))
    assert bool(cp.compression_worthwhile(1.0, 0.95, margin=0.0))


def test_bad_input():
    with pytest.raises(InputError):
        cp.compressed_comm_time("int4", 8, M, B)
    with pytest.raises(InputError):
        cp.allgather_sparse_time(8, M, B, 0.0)
    with pytest.raises(InputError):
        cp.allreduce_compressed_time(8, M, B, ratio=0.5)
    with pytest.raises(InputError):
        cp.allreduce_compressed_time(8, -1.0, B)
