"""NCCL's in-network-reduction all-reduce (NVLS, NVLSTree, CollNetChain): expected values computed by hand
from tuning.cc v2.30.7's formulas (docs/model.md#in-network-reduction), not from the implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

GB = 1e9
#: NCCL's hwLatencies read on a tier's measured hop (coll34, docs/model.md#in-network-reduction): tier latency +
#: NCCL's entry - NCCL's Ring LL entry of that link row. h100_like: NVLink 2 us (Ring LL 0.6): NVLS 2 + 25 - 0.6 =
#: 26.4 us, CollNetChain NVLink 2 + 2.8 - 0.6 = 4.2 us a hop; IB 3.5 us (NET Ring LL 2.7): NVLS 3.5 + 18 - 2.7 =
#: 18.8 us, NVLSTree 3.5 + 20.9 - 2.7 = 21.7 us a level, CollNetChain 3.5 + 30 - 2.7 = 30.8 us. dgx-b200: NVLink
#: 1.2 us: NVLS 25.6 us; IB leaf 3.5 us: NVLSTree 21.7 us a level.
NVLS_H100, NVLS_B200 = 26.4e-6, 25.6e-6
NVLSTREE_IB = 21.7e-6


def h100_like(sharp: bool = False, nvl_bw: float = 450e9, span: int = 8, transport: str = "",
              reuse: float = math.inf) -> Network:
    """8 GPUs a node on a 450 GB/s x 0.82 NVLink tier that reduces in its switches (NVLS), 50 GB/s IB across."""
    return Network(tiers=(
        Tier("nvlink", span, nvl_bw, 2e-6, efficiency=0.82, in_network_reduction=True, protocol="nvlink"),
        Tier("ib", 4096, 50e9, 3.5e-6, efficiency=0.94, in_network_reduction=sharp, protocol="rdma",
             transport=transport, registration_reuse=reuse),
    ), gpus_per_node=8)


def test_nvls_one_node_large_message_by_hand() -> None:
    # 8 GPUs, Hopper: k = 8 heads, NVLS graph 8 bw with 9 bw <= B0 = 450 x 0.82 = 369 GB/s;
    # busBw = 2 x 0.85 x 369 x 8/9 x 7/8 = 487.9 GB/s; 8 GiB: C = 128 KiB, ops = 16 x 8 = 128,
    # fill = 2 x 128 x 128 KiB = 32 MiB; T = 26.4 us + (8 GiB + 32 MiB) x 2 x 7/8 / busBw
    S = 8 * 2.0**30
    bus = 2 * 0.85 * 369e9 * (8 / 9) * (7 / 8)
    expect = NVLS_H100 + (S + 2 * 128 * 128 * 1024) * 1.75 / bus
    pl = place(8, 1, h100_like())
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl))
    assert got == pytest.approx(expect, rel=1e-9)
    # nccl-tests busbw of that run: 487.9 x 8 GiB / (8 GiB + 32 MiB) + latency = 485.6 GB/s, within 2 % of
    # the published 8x H100 NVLS peak (478.87 GB/s, hardware/measurements/nccl.yaml)
    assert S * 1.75 / got / GB == pytest.approx(478.87, rel=0.02)


def test_nvls_small_message_pays_25us_and_three_chunk_stages() -> None:
    # 1 KiB: fill = 2 x min(S, ops C) = 2 KiB -> T = 26.4 us (25 us read on the 2 us hop) + 3 KiB x 1.75 / busBw
    S = 1024.0
    bus = 2 * 0.85 * 369e9 * (8 / 9) * (7 / 8)
    pl = place(8, 1, h100_like())
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl))
    assert got == pytest.approx(NVLS_H100 + 3 * S * 1.75 / bus, rel=1e-9)


def test_nvls_chunk_size_rules() -> None:
    ops = 128.0  # 16 CTAs x 8 heads
    # >= 64 ops 128K = 1 GiB: 128K; 64 MiB .. 1 GiB: 64K; 8 MiB .. 64 MiB: 32K; below 8 MiB: 16K
    sizes = np.array([2.0**30, 2.0**30 - 1, 64 * 2.0**20, 64 * 2.0**20 - 1, 8 * 2.0**20, 8 * 2.0**20 - 1, 1e3])
    got = nccl.nvls_chunk_size(sizes, np.array(ops))
    assert list(got) == [131072, 65536, 65536, 32768, 32768, 16384, 16384]


def test_nvlstree_two_nodes_capped_by_per_channel_max() -> None:
    # 16 GPUs on 2 nodes, no SHARP: NVLSTree. intra 487.9, inter 8 x 47 x 2 = 752, cap 8 x 57.7 = 461.6 GB/s
    # -> busBw 461.6; latency 26.4 + 2 x log2i(2) x 21.7 = 69.8 us; Hopper runs 16 CTAs on any node count,
    # ops = 16 x 8 = 128, and 1 GiB >= 64 x 128 x 128 KiB keeps C = 128 KiB.
    S = 2.0**30
    pl = place(16, 1, h100_like())
    bus = 8 * 57.7e9
    expect = NVLS_H100 + 2 * NVLSTREE_IB + (S + 2 * 128 * 131072) * 2 * 15 / 16 / bus
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl))
    assert got == pytest.approx(expect, rel=1e-9)


def test_nvlstree_two_nodes_two_gpus_each_bound_by_their_own_two_nics() -> None:
    # dgx-b200, 4 GPUs at stride 4: 2 per node on 2 nodes, each GPU with one 400 Gb/s NIC (50 x 0.94 =
    # 47 GB/s). NVLSTree with k = 2 heads, one NIC each (search.cc: a head never takes a second NIC; the
    # other 6 GPUs' NICs are not the group's). The two trees mirror each other on two nodes, so each head
    # sends and receives S / k = 0.5 GB once: >= 0.5 GB / 47 GB/s = 10.64 ms, i.e. busBw_inter =
    # 2 x 3/4 x 2 x 47 = 141 GB/s (NCCL's own estimate rounds 2(p-1)/p = 1.5 up to 2: 188 GB/s).
    # intra (Blackwell): B0 = 900 x 0.80 = 720, graph 720 x 2/3 = 480, 2 x 0.74 x 480 x 1/2 x 0.854 =
    # 303.3 GB/s; cap 2 x 96 = 192 GB/s -> busBw 141. 32 CTAs across domains, ops = 64, C = 128 KiB
    # (1 GB >= 64 x 64 x 128 KiB); latency 25.6 + 2 x 21.7 = 69.0 us (NCCL's own estimate: 25 + 2 x 20.9 = 66.8).
    S = 1e9
    net = build_network(load_cluster("dgx-b200", []))
    pl = place(4, 4, net)
    bus = 2 * 0.75 * 2 * 47e9
    expect = NVLS_B200 + 2 * NVLSTREE_IB + (S + 2 * 64 * 131072) * 1.5 / bus
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl))
    assert got == pytest.approx(expect, rel=1e-9)
    assert got >= 0.5e9 / 47e9  # the NIC bound of the cross-node half alone (10.64 ms)
    # NCCL's own estimate (its tuner's choice): no fill, the factor 2 of tuning.cc's two-node NVLSTree case
    est = float(nccl.nccl_inr_allreduce_time(np.array(S), pl, estimate=True))
    assert est == pytest.approx(66.8e-6 + S * 1.5 / (2 * 2 * 47e9), rel=1e-9)
    # the same on two full nodes (16 GPUs, 8 NICs each): inter 2 x 15/16 x 8 x 47 = 705 GB/s sits below
    # intra 2 x 0.74 x 720 x 8/9 x 7/8 x 0.854 = 708.3 and the cap 8 x 96 = 768: each head moves S/8
    pl16 = place(16, 1, net)
    got16 = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl16))
    ops = 32 * 8  # 32 CTAs x 8 heads; 1 GB < 64 ops 128 KiB -> C = 64 KiB
    lat = NVLS_B200 + 2 * NVLSTREE_IB
    assert got16 == pytest.approx(lat + (S + 2 * ops * 65536) * 2 * 15 / 16 / (2 * 15 / 16 * 8 * 47e9), rel=1e-9)
    assert got16 >= S / 8 / 47e9


def test_nvlstree_three_and_four_domains_by_the_busiest_heads_nic() -> None:
    # dgx-b200, 2 GPUs per node (stride 4), k = 2 heads; each tree carries S/2, S/(2k) = S/4 per head per edge.
    # 3 nodes: both trees are chains (ncclGetBtree(3): 0-2-1; the shifted one 1-0-2), node 0 is the root of
    # one (S/4 down) and the middle of the other (S/4 up + S/4 down): 0.75 S = 1.5 S/k through one NIC.
    # 4 nodes: node 2 has children 1 and 3 in tree 0 (S/4 up + 2 x S/4 down) and is a leaf of the mirror
    # (S/4 up): S = 2 S/k. Time = that / 47 GB/s; cap 2 x 80 = 160 and intra 303.3 GB/s do not bind.
    # Latency 25.6 + 2 log2i(N) 21.7 us (NCCL's estimate 25 + 2 log2i(N) 20.9); ops = 32 x 2 = 64, C = 128 KiB at 1 GB.
    S = 1e9
    net = build_network(load_cluster("dgx-b200", []))
    fill = 2 * 64 * 131072
    for p, lat, busiest in ((6, NVLS_B200 + 2 * NVLSTREE_IB, 0.75 * S), (8, NVLS_B200 + 4 * NVLSTREE_IB, 1.0 * S)):
        bus = 2 * (p - 1) / p * S / (busiest / 47e9)
        expect = lat + (S + fill) * 2 * (p - 1) / p / bus
        got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), place(p, 4, net)))
        assert got == pytest.approx(expect, rel=1e-9), p
        assert got >= busiest / 47e9
    # NCCL's own estimate keeps k B_net on 3+ nodes: 8 GPUs, 4 nodes: 2 x 47 GB/s busBw
    est = float(nccl.nccl_inr_allreduce_time(np.array(S), place(8, 4, net), estimate=True))
    assert est == pytest.approx(108.6e-6 + S * 1.75 / (2 * 47e9), rel=1e-9)


def test_collnet_chain_with_sharp() -> None:
    # 64 GPUs, 8 nodes, SHARP on the IB tier: CollNetChain lat = 2 x 7 x 4.2 + 30.8 = 89.6 us (NCCL's hwLatencies
    # 2.8 and 30 read on the 2 us / 3.5 us hops, see NVLS_H100),
    # algBw = min(0.5 x 369, 8 x 47) = 184.5 GB/s; NVLS multi-node (CollNet+NVLS): lat 26.4 + 18.8 = 45.2 us,
    # busBw = min(487.9, 8 x 47 = 376) = 376 -> algBw = 376 x 64 / 126 = 191.0 GB/s plus the fill: faster.
    S = 4 * 2.0**30
    pl = place(64, 1, h100_like(sharp=True))
    chain = 89.6e-6 + S / 184.5e9
    nvls = 45.2e-6 + (S + 2 * 128 * 131072) * 2 * 63 / 64 / 376e9
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), pl))
    assert got == pytest.approx(min(chain, nvls), rel=1e-9)


def test_blackwell_generation_and_72_gpu_heads() -> None:
    # NVLink 5 (900 GB/s x 0.80 = 720): Blackwell eff 0.74, k = min(32, 72) = 32, 24 CTAs in one domain;
    # busBw = 2 x 0.74 x 720 x 32/33 x 31/32 = 1001.9 GB/s by NCCL's formula; 8 GiB: ops = 768,
    # C = 128 KiB (8 GiB >= 64 x 768 x 128K = 6.4 GB); latency 2 + 25 - 0.6 = 26.4 us
    net = Network(tiers=(Tier("nvlink", 72, 900e9, 2e-6, efficiency=0.80, in_network_reduction=True,
                              protocol="nvlink"),), gpus_per_node=4)
    assert nccl.nvls_generation(net.tiers[0]) == "blackwell"
    assert nccl.nvls_generation(h100_like().tiers[0]) == "hopper"
    S = 8 * 2.0**30
    # x 0.854, the one Blackwell factor fitted on the CoreWeave one-rack 8 GiB point (834.57 GB/s busbw)
    bus = 2 * 0.74 * 720e9 * (32 / 33) * (31 / 32) * 0.854
    expect = NVLS_H100 + (S + 2 * 768 * 131072) * 2 * 71 / 72 / bus
    got = float(nccl.algorithm_time("allreduce", "hierarchical", np.array(S), place(72, 1, net)))
    assert got == pytest.approx(expect, rel=1e-9)


def test_auto_prefers_ring_or_tree_for_small_and_nvls_for_large() -> None:
    pl = place(8, 1, h100_like())
    sizes = np.array([2.0**20, 2.0**30])
    _, names, idx, _ = nccl.best_algorithm("allreduce", sizes, pl)
    assert names[int(idx[1])] == "hierarchical"
    # no in-network reduction anywhere: hierarchical is not eligible under auto
    plain = Network(tiers=(Tier("nvlink", 8, 450e9, 2e-6, efficiency=0.82, protocol="nvlink"),), gpus_per_node=8)
    assert not nccl.inr_applies(place(8, 1, plain))
    # one rank per node (stride 8) and no SHARP: no NVLS, no CollNet
    assert not nccl.inr_applies(place(4, 8, h100_like()))
    assert nccl.inr_applies(place(4, 8, h100_like(sharp=True)))


def test_tuner_choice_uses_nccls_own_latencies() -> None:
    # NCCL decides by its own estimates: 8 GPUs, 1 KiB: Ring LL 6.6 + 14 x 0.6 = 15.0 us (absolute NVLink hop,
    # not the measured 2 us that makes our ring 34.6 us) < NVLS 25 us -> Ring/Tree, even though our NVLS time
    # (25 us) is below our ring's; 1 GiB: NVLS (busBw 487.9 vs ring 369 GB/s) -> NVLS.
    pl = place(8, 1, h100_like())
    small, large = np.array(1024.0), np.array(2.0**30)
    assert not bool(nccl.nccl_tuner_picks_inr(small, pl))
    assert bool(nccl.nccl_tuner_picks_inr(large, pl))
    assert float(nccl.algorithm_time("allreduce", "hierarchical", small, pl)) < float(
        nccl.algorithm_time("allreduce", "ring", small, pl))
    # auto takes the fastest modelled NCCL algorithm where in-network reduction applies (a gate on NCCL's
    # own estimate would let a faster link flip the choice to a slower algorithm and slow the step down)
    _, names, idx, best = nccl.best_algorithm("allreduce", small, pl)
    assert names[int(idx)] == "hierarchical"
    assert float(best) == pytest.approx(float(nccl.algorithm_time("allreduce", "hierarchical", small, pl)))
    # 72 GPUs in one NVLink domain: NCCL's Ring LL is 6.6 + 142 x 0.6 = 91.8 us > 25 us -> NVLS even at 1 KiB
    net = Network(tiers=(Tier("nvlink", 72, 900e9, 2e-6, efficiency=0.80, in_network_reduction=True,
                              protocol="nvlink"),), gpus_per_node=4)
    assert bool(nccl.nccl_tuner_picks_inr(small, place(72, 1, net)))


def test_blackwell_fit_reproduces_its_point_and_predicts_two_racks() -> None:
    # the fitted point: 72 GPUs, 8 GiB, measured 834.57 GB/s busbw -> within 0.1 % by construction of 0.854;
    # held out: 144 GPUs (2 racks, NVLSTree), 16 GiB measured 810.41 GB/s busbw -> within 5 %
    net = build_network(load_cluster("gb200-nvl72", []))
    for p, S, busbw, tol in ((72, 8 * 2.0**30, 834.57e9, 1e-3), (144, 16 * 2.0**30, 810.41e9, 0.05)):
        t_meas = S * 2 * (p - 1) / p / busbw
        got = float(nccl.collective_time("allreduce", np.array(S), place(p, 1, net)))
        assert got == pytest.approx(t_meas, rel=tol)
