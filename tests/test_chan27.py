"""chan27: the channels (CTAs, one SM each) NCCL runs a ring / tree collective on follow the group it runs on.

By hand from NCCL's rule (NVIDIA/nccl 73cf112 v2.30.7-1 src/graph/connect.cc:460 ``nChannels = min(MAXCHANNELS,
2 nChannels)`` after ncclTopoDupChannels, search.cc:1036-1048; connect.cc:481 doubles again on compute capability
>= 90 across nodes while the ring graph's bwIntra > 45 GB/s and nChannels < 16): within one node the accelerator's
``collective_units`` (H100: 24), across nodes 2 x the inter-node search channels. A multi-node H100 log prints
"16 coll channels" (deepseek-ai/DeepEP#106). docs/model.md#contention (derived; not yet charged by the contention).
"""

from __future__ import annotations

import math

from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place


def _net(nic: float, nvlink: float = 450e9, generation: str = "hopper", node: int = 8) -> Network:
    return Network((Tier("nvlink", node, nvlink, 2e-6, efficiency=0.82, protocol="nvlink"),
                    Tier("ib", 4096, nic, 5e-6, efficiency=0.88, protocol="rdma")), node, generation=generation)


def test_one_node_has_no_inter_node_count() -> None:
    # 8 H100 in one node: no inter-node search; the accelerator's collective_units (24) is NCCL's count there
    assert math.isnan(float(nccl.nccl_execution_channels(place(8, 1, _net(50e9)))))


def test_two_h100_nodes_run_16_channels() -> None:
    # 8 GPUs a node, 400 Gb/s NIC each: the search's 8 channels at 48 GB/s, not duplicated (48 < 50 with 8 > 4),
    # x2 at connect.cc:460 = 16; 16 is not < 16: no SM90 doubling. 16 of 132 SMs, not the single-node 24
    assert float(nccl.nccl_execution_channels(place(16, 1, _net(50e9)))) == 16.0
    # 800 Gb/s NICs: the NVLink holds the graph at 8 (tests/test_inv27.py), 16 again
    assert float(nccl.nccl_execution_channels(place(128, 1, _net(100e9)))) == 16.0


def test_one_gpu_a_node_and_the_sm90_rule() -> None:
    # a DP group under TP 8 (1 H100 a node), 400 Gb/s: 1 channel at 48 GB/s, duplicated (1 <= 4) to 2 at bwIntra 24,
    # x2 = 4; bwIntra 24 <= 45: no SM90 doubling -> 4
    assert float(nccl.nccl_execution_channels(place(16, 8, _net(50e9)))) == 4.0
    # 4 H100 a node (stride 2): 4 NICs x 1 at 48 (NVLink floor(4 x 7 / 3) = 9 does not bind), duplicated (4 <= 4)
    # to 8 at 24, x2 = 16
    assert float(nccl.nccl_execution_channels(place(32, 2, _net(50e9)))) == 16.0


def test_nvls_raises_the_ring_count_where_it_runs() -> None:
    # v2.21-v2.27 copyChannels up to nvlsChannels (16 on sm90) where NVLS runs: 8 GPUs a node keeps 16; 1 GPU a node
    # builds no NVLS (ncclNvlsInit: gpuCount <= 2), so it stays at 4
    assert float(nccl.nccl_execution_channels(place(16, 1, _net(50e9)), 16.0)) == 16.0
    assert float(nccl.nccl_execution_channels(place(16, 8, _net(50e9)), 16.0)) == 4.0


def test_ampere_and_blackwell() -> None:
    # A100 at 2 x 25 GB/s: 5 channels at 48 GB/s (the NVLink's 12 x 20 = 240 GB/s holds 5: 240 >= 240 ends the walk),
    # duplicated (cc 80 is not > 80) to 10, x2 = 20: faster NICs, more CTAs (docs/model.md#contention, chan27)
    assert float(nccl.nccl_execution_channels(place(16, 1, _net(50e9, 300e9, "ampere")))) == 20.0
    # A100, 8 HDR NICs of 25 GB/s: 24 GB/s (legacy list), 8 channels, not duplicated (24 < 25), x2 = 16; the SM90
    # rule does not apply (compute capability 80): 16, against 24 in one node
    assert float(nccl.nccl_execution_channels(place(16, 1, _net(25e9, 300e9, "ampere")))) == 16.0
    # B200, 400 Gb/s NIC each: 8 at 48 (walk: 45.1 and below give less than 384), not duplicated, x2 = 16
    assert float(nccl.nccl_execution_channels(place(16, 1, _net(50e9, 900e9, "blackwell")))) == 16.0
    # GB200 NVL72, two racks, 400 Gb/s a GPU: 48 -> NVLink floor(72 floor(721.8 / 48) / 71) = 15 (720 < 721.8);
    # 45.1 -> floor(72 x 16 / 71) = 16 (721.6, kept); 42..24 give <= 720; 22 / 45.1 < 0.49 ends the walk.
    # 16 at 45.1 < 50 with 16 > 4: not duplicated; x2 = 32, the single-rack count
    assert float(nccl.nccl_execution_channels(place(144, 1, _net(50e9, 900e9, "blackwell", 72)))) == 32.0
    # one GPU a rack: 1 at 48, duplicated to 2 (bwIntra 24), x2 = 4
    assert float(nccl.nccl_execution_channels(place(2, 72, _net(50e9, 900e9, "blackwell", 72)))) == 4.0


def test_not_nccl_families_keep_their_count() -> None:
    # RCCL (MI300X) is not priced by NCCL's rule: nan, the accelerator's collective_units stands
    assert math.isnan(float(nccl.nccl_execution_channels(place(16, 1, _net(50e9, 448e9, "cdna3")))))
