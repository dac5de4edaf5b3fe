"""tp2bw37: what a 2-rank tensor-parallel collective costs on NVLink 5 (validation/README.md 'TP 2 on Blackwell').

Worked by hand from NCCL's own tuning tables (NVIDIA/nccl 5067397, v2.30.7, src/graph/tuning.cc), not read back
from the model:

* a sequence-parallel all-gather / reduce-scatter over 2 ranks of one NVLink domain is NCCL's Ring (the only
  AllGather / ReduceScatter algorithm inside one node with NVLS off; NVLS is not faster here), and at the TP sizes of
  the rows (16-256 MiB gathered) its Simple protocol: baseLatencies Ring Simple 8.4 us, (n - 1) = 1 step of the
  tier's Ring LL hop plus NCCL's Simple-over-LL increment on NVLink (hwLatencies NVLink Ring 3.4 - 0.6 us), and
  (n - 1)/n of the buffer at the tier's bus bandwidth. gb200-nvl72 and dgx-b200: hop 1.2 us, 900 GB/s x 0.80
  (NCCL's 18 x 40.1 GB/s SM100 NVLink search bandwidth over 900);
* no 2-rank all-reduce is NVLS: NCCL 2.18.1-2.28.6 turns NVLS off for a communicator whose topology holds 2 GPUs or
  fewer (src/transport/nvls.cc ncclNvlsInit ``gpuCount <= 2``, ``< 2`` from 2.28.7), and from 2.28.7 on its own
  tuning puts the 2-rank ring ahead; the model's auto choice must take the ring there too.
"""

from __future__ import annotations

import pytest

from scalemodel.cost import collectives as C
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

RING_SIMPLE_BASE_US = 8.4          # tuning.cc baseLatencies[Ring][Simple]
NVLINK_SIMPLE_OVER_LL_US = 3.4 - 0.6  # tuning.cc hwLatencies[NVLink][Ring][Simple] - [LL]
HOP_US = 1.2                        # gb200-nvl72 / dgx-b200 tier 0 latency (Azure GB200 4-rank sweep, nvl72lat21)
BUS_BW = 0.80 * 900e9               # tier 0: 900 GB/s per direction x 0.80
MIB = 1024 * 1024


def _net(cluster: str, nvls: bool):  # type: ignore[no-untyped-def]
    return build_network(load_cluster(cluster, [f"tiers.0.in_network_reduction={str(nvls).lower()}"]))


@pytest.mark.parametrize("cluster", ["gb200-nvl72", "dgx-b200"])
@pytest.mark.parametrize("op", ["allgather", "reducescatter"])
@pytest.mark.parametrize("mib", [16, 64, 256])
def test_two_rank_sp_collective_is_a_simple_ring_step(cluster: str, op: str, mib: int) -> None:
    size = mib * MIB
    hand = (RING_SIMPLE_BASE_US + (HOP_US + NVLINK_SIMPLE_OVER_LL_US)) * 1e-6 + size / 2 / BUS_BW
    # 256 MiB: 8.4 + 4.0 us + 134217728 B / 720 GB/s = 12.4 + 186.4 = 198.8 us
    for nvls in (True, False):
        t = float(C.collective_time(op, size, 2, _net(cluster, nvls)))
        assert t == pytest.approx(hand, rel=1e-6)
    if mib == 256:
        assert hand == pytest.approx(198.81e-6, abs=0.01e-6)


@pytest.mark.parametrize("cluster", ["gb200-nvl72", "dgx-b200", "dgx-h100"])
@pytest.mark.parametrize("mib", [1, 16, 64, 256])
def test_two_rank_allreduce_is_never_nvls(cluster: str, mib: int) -> None:
    net = _net(cluster, True)
    size = mib * MIB
    auto = float(C.collective_time("allreduce", size, 2, net))
    ring = float(C.algorithm_time("allreduce", "ring", size, 2, net))
    nvls = float(C.algorithm_time("allreduce", "hierarchical", size, 2, net))
    assert auto == pytest.approx(ring, rel=1e-9)
    assert nvls > ring  # the ring is the faster line, so NCCL's choice and the model's agree


def test_two_rank_bus_bandwidth_at_tp_sizes_by_hand() -> None:
    # busbw of a 2-rank all-gather = (S/2) / t: 64 MiB -> 33554432 / (12.4 us + 46.60 us) = 568.7 GB/s,
    # 256 MiB -> 134217728 / 198.81 us = 675.1 GB/s; the 720 GB/s ceiling only as S -> infinity
    net = _net("gb200-nvl72", False)
    for mib, gbs in ((64, 568.7), (256, 675.1)):
        size = mib * MIB
        t = float(C.collective_time("allgather", size, 2, net))
        assert float(C.busbw("allgather", size, 2, t)) / 1e9 == pytest.approx(gbs, abs=0.1)
