"""inv27: more network bandwidth slowed Llama-3 8B on 64 DGX H100s (docs/model.md#invariants), checked by hand.

At 2x ib-leaf bandwidth (100 GB/s a GPU) the model put two 48 GB/s channels on each NIC, 16 search channels, so
Tree's per-channel caps doubled (16 x 36 GB/s), the DP all-reduce turned from NVLS to Tree and Tree's 24 CTAs (against
NVLS's 16) took 1.5x the SMs from the backward it hides under: 864.944 -> 871.138 ms. NCCL's search does not build
that graph: it takes the channel's speed off every NVLink it follows (NVIDIA/nccl 5067397 src/graph/search.cc:81-122
followPath; ``bwIntra = bwInter`` = the speed across nodes, search.cc:1174), an H100's NVLink counts 18 x 20.6 =
370.8 GB/s (src/graph/topo.h:22, the ``totalBw 370.8`` of nccl#1189's Hopper log), each ring channel crosses 7 of a
node's 8 GPUs' NVLinks, so a GPU sends floor(370.8 / 48) = 7 channels and the node 8 x 7 / 7 = 8: the 8 channels it
already has at 400 Gb/s, and 8 x 48 = 384 >= totalBw 370.8 ends the search (search.cc:1198).
"""

from __future__ import annotations

import json

import pytest

from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place


def _net(nic: float, nvlink: float = 450e9, generation: str = "hopper") -> Network:
    return Network((Tier("nvlink", 8, nvlink, 2e-6, efficiency=0.82, protocol="nvlink"),
                    Tier("ib", 4096, nic, 5e-6, efficiency=0.88, protocol="rdma")), 8, generation=generation)


def test_nvlink_holds_eight_channels_on_an_h100_node() -> None:
    # 8 GPUs a node, 800 Gb/s NICs: the NICs take 2 x 48 GB/s each (16), the NVLink 8 (above); 48 < 50 with 8 > 4
    # channels: not doubled (ncclTopoDupChannels, search.cc:1036-1048)
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(100e9)))) == 8.0
    # 400 Gb/s: the NICs' 8 as before
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(50e9)))) == 8.0
    # 4 GPUs of a node (stride 2), 800 Gb/s: NICs 4 x 2 = 8; NVLink floor(4 x 7 / 3) = 9; 8 kept, not doubled
    assert float(nccl.nccl_graph_channels_inter(place(64, 2, _net(100e9)))) == 8.0
    # 1 GPU a node: no NVLink hop, the NICs' 2, doubled (2 <= 4): 4
    assert float(nccl.nccl_graph_channels_inter(place(16, 8, _net(100e9)))) == 4.0


def test_the_search_walks_down_its_speeds_where_the_nvlink_binds() -> None:
    """H800 (8 NVLinks: 8 x 20.6 = 164.8 GB/s) on 400 Gb/s NICs, by hand from sm90SpeedArrayInter (search.cc:1058):
    48 -> floor(164.8 / 48) = 3 a GPU -> floor(8 x 3 / 7) = 3 channels (144 GB/s); 45, 42: 3 (worse); 40: 4 -> 4
    (160, kept); 30: 5 -> 5 (150); 24: 6 -> 6 (144); 22 (22 / 40 > 0.49): 7 -> 8 (176, kept, >= 164.8: done).
    22 < 25: not doubled. 8 channels, as the NICs alone gave, at 22 GB/s."""
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(50e9, nvlink=200e9)))) == 8.0
    # Blackwell, 18 NVLink5 (900 GB/s: 18 x 40.1 = 721.8), 800 Gb/s NICs: 96 GB/s, 7 a GPU -> 8 channels (768 >=
    # 721.8), doubled (96 >= 50): 16; 1600 Gb/s NICs would take 16 at 96, the NVLink holds 8: 16 after doubling too
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(100e9, 900e9, "blackwell")))) == 16.0
    assert float(nccl.nccl_graph_channels_inter(place(128, 1, _net(200e9, 900e9, "blackwell")))) == 16.0


def _predict(cli, bandwidth: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--json",
            "--set", f"cluster.tiers.ib-leaf.bandwidth={bandwidth}")
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def test_twice_the_ib_bandwidth_does_not_slow_llama3_8b_on_64_h100s(cli) -> None:  # type: ignore[no-untyped-def]
    """The regression: with the graph held at 8 channels Tree's caps stay 8 x 36 GB/s and the DP all-reduce stays on
    NVLS, whose bandwidth perChMaxNVLSTreeBw and the NVLS efficiency bound, not the NICs: the step and its contention
    do not move (before: 864.944 -> 871.138 ms, contention 13.419 -> 19.756 ms)."""
    base, fast = _predict(cli, "400 Gbit/s"), _predict(cli, "800 Gbit/s")
    assert fast["step_time_s"] <= base["step_time_s"] * (1 + 1e-12)
    assert fast["breakdown_s"]["contention"] == pytest.approx(base["breakdown_s"]["contention"], rel=1e-12)
    # 864.944 ms until coll34, whose NVLSTree reads NCCL's hwLatencies on the measured hops (26.4 us in the node, 21.7
    # us a level across the 8 nodes, 6.2 us more a call): dp_comm 7.749 -> 7.802 ms, contention 13.419 -> 13.511 ms
    assert base["step_time_s"] == pytest.approx(0.865089, abs=2e-6)
