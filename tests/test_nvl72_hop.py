"""The NVLink hop of one NVL72 rack (docs/model.md#nvl72-hop, nvl72lat21).

NCCL prices a small all-reduce over p ranks of one NCCL node (an MNNVL rack is one) as
baseLat + 2(p-1) x hop on Ring and Tree (NVIDIA/nccl v2.26.2-1 src/graph/tuning.cc, ncclTopoTuneModel).
The hop of gb200-nvl72 / gb300-nvl72 is the one Azure's 4-rank all-reduce sweep (NCCL 2.25.1,
hardware/measurements/nccl.yaml) measures at 1-8 KiB. Values here are worked by hand from those formulas
and from the published busbw, not read back from the model.
"""

from __future__ import annotations

import pytest

from scalemodel.cost import collectives as C
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

HOP_US = 1.2           # the cluster files' tier-0 latency
RING_LL_BASE_US = 6.6  # NCCL baseLatencies Ring LL
TREE_LL_BASE_US = 6.8  # NCCL baseLatencies Tree LL


def _net(cluster: str, *sets: str):  # type: ignore[no-untyped-def]
    return build_network(load_cluster(cluster, ["tiers.0.in_network_reduction=false", *sets]))


@pytest.mark.parametrize("cluster", ["gb200-nvl72", "gb300-nvl72"])
@pytest.mark.parametrize(("algo", "base"), [("ring", RING_LL_BASE_US), ("tree", TREE_LL_BASE_US)])
def test_8_byte_allreduce_over_one_rack_is_a_chain_of_142_hops(cluster: str, algo: str, base: float) -> None:
    # 72 ranks, NVLS off (NCCL_NVLS_ENABLE=0 recipes): base + 2 x 71 hops = 6.6 + 170.4 = 177.0 us (Ring),
    # 177.2 us (Tree); 8 bytes add well under 0.1 us of bandwidth time.
    t = float(C.collective_time("allreduce", 8, 72, _net(cluster), algorithm=algo, family="nccl"))
    assert t * 1e6 == pytest.approx(base + 142 * HOP_US, abs=0.1)


def test_hop_count_at_4_ranks_is_six() -> None:
    # The slope of the 4-rank Ring time in the tier latency is NCCL's 2(p-1) = 6 steps: +0.5 us per hop -> +3.0 us.
    lo = float(C.collective_time("allreduce", 1024, 4, _net("gb200-nvl72", "tiers.0.latency=1.2 us"),
                                 algorithm="ring", family="nccl"))
    hi = float(C.collective_time("allreduce", 1024, 4, _net("gb200-nvl72", "tiers.0.latency=1.7 us"),
                                 algorithm="ring", family="nccl"))
    assert (hi - lo) * 1e6 == pytest.approx(3.0, abs=1e-6)


@pytest.mark.parametrize(("size", "busbw_gbps"), [(1024, 0.10), (2048, 0.19), (4096, 0.38), (8192, 0.76)])
def test_4_rank_ring_matches_azure_gb200_sweep(size: int, busbw_gbps: float) -> None:
    # az_ndgb200v6_allreduce_ring_4gpu: time = S x 2(n-1)/n / busbw = S x 1.5 / busbw; 1 KiB -> 15.36 us,
    # 2 KiB -> 16.17 us, 4 KiB -> 16.17 us, 8 KiB -> 16.17 us. The hop was read off these four points
    # (median), so this is the in-sample check that the cluster file carries it: each within 3 %.
    t_meas = size * 1.5 / (busbw_gbps * 1e9)
    t = float(C.collective_time("allreduce", size, 4, _net("gb200-nvl72"), algorithm="ring", family="nccl"))
    assert t == pytest.approx(t_meas, rel=0.03)


def test_gb300_rack_has_gb200_hop() -> None:
    a = load_cluster("gb200-nvl72", []).tiers[0].latency
    b = load_cluster("gb300-nvl72", []).tiers[0].latency
    assert a == b == pytest.approx(HOP_US * 1e-6)
