"""chan32: NCCL's execution channels and the collective bandwidth NCCL models at them (docs/model.md#contention).

By hand from NCCL's rules (NVIDIA/nccl 73cf112 v2.30.7-1): the inter-node search (src/graph/search.cc: the fastest
speed of the architecture's list not above the NIC, channels a NIC, the NVLink's hold, ncclTopoDupChannels
:1036-1048), ncclTopoPostset's duplication (src/graph/connect.cc:460 ``nChannels = min(MAXCHANNELS, 2 nChannels)``)
and its second doubling on compute capability >= 90 (:480-483, "Use 4 compute channels per search channel to reach
peak BW on <8 PPN"). NCCL's bandwidth model reads the search graph, not the execution count: ncclTopoTuneModel
``busBw = graphs[a]->nChannels * bw`` (src/graph/tuning.cc:324 at v2.30.7-1; :175 v2.18.3-1, :177 v2.21.5-1, :276
v2.27.7-1), run after ncclTopoPostset (src/init.cc:1480 before :1644). So the executed count c is k x the graph's
channels (k = 2, or 4 after the SM90 doubling) and adds no modelled bandwidth.

Why the count stays uncharged (docs/model.md#contention, chan32): priced from the same count, the SM-seconds of a
collective per byte are ``c / min(B, nCh bw)`` with B the model's bottleneck; where B sits under NCCL's view of the
same links (dgx-a100's NVLink, 0.77 x 300 = 231 GB/s, against NCCL's 12 x 20 = 240) a faster NIC raises c more than the
bandwidth (+25 % against +20 %), so the contention per byte rises (16 / 192 -> 20 / 231), and ncclTopoDupChannels' 25
GB/s threshold doubles the CTAs for 25 % more bandwidth (dgx-a100 at 31.25 GB/s NICs: 16 -> 32). The property tests
below hold the model as it is (count uncharged) to that invariant; the pure-DP ones fail with the count charged.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec
import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_job, build_network, grid_from_arrays
from scalemodel.engine.step import evaluate
from scalemodel.specs import TrainingSpec, load_cluster, load_workload


def _net(nic: float, nvlink: float, generation: str, node: int = 8) -> Network:
    return Network((Tier("nvlink", node, nvlink, 2e-6, efficiency=0.82, protocol="nvlink"),
                    Tier("ib", 4096, nic, 5e-6, efficiency=0.94, protocol="rdma")), node, generation=generation)


def _faster_nics(net: Network, f: float) -> Network:
    """``net`` with every tier but the innermost (the NICs' tiers) ``f`` times faster."""
    return replace(net, tiers=(net.tiers[0], *(replace(t, bandwidth=f * t.bandwidth) for t in net.tiers[1:])))


def _never_slower(job, g, factors: tuple[float, ...]) -> None:  # type: ignore[no-untyped-def]
    base = evaluate(job, g).step_time
    for f in factors:
        fast = msgspec.structs.replace(job, network=_faster_nics(job.network, f))
        assert np.all(evaluate(fast, g).step_time <= base * (1 + 1e-12)), f


def _graph(pl) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    n, bw = nccl._inter_graph(pl)
    return float(n), float(bw), float(nccl.nccl_execution_channels(pl))


def test_h100_on_200g_nics_keeps_its_8_search_channels() -> None:
    # 8 H100 a node, 200 Gb/s (25 GB/s) NIC each: sm90SpeedArrayInter's fastest speed <= 25 is 24, one channel a NIC
    # -> 8 (the NVLink, 18 x 20.6 = 370.8 GB/s, holds floor(8 floor(370.8 / 24) / 7) = 17); the walk down to 12 GB/s
    # (16 x 12 = 192) ties and keeps the faster; ncclTopoDupChannels keeps 8 (24 < 25); postset 2 x 8 = 16; no SM90
    # doubling (bwIntra 24 <= 45). NCCL's modelled busBw: 8 x 24 = 192 GB/s on 16 CTAs (12 GB/s a CTA).
    n, bw, c = _graph(place(32, 1, _net(25e9, 450e9, "hopper")))
    assert (n, bw, c) == (8.0, 24.0, 16.0)
    assert n * bw == 192.0


def test_b200_on_800g_nics_duplicates_to_32() -> None:
    # 8 B200 a node, 800 Gb/s (100 GB/s) NIC each: sm100SpeedArrayInter's 96 <= 100, one channel a NIC -> 8; the NVLink
    # (18 x 40.1 = 721.8 GB/s) holds floor(8 floor(721.8 / 96) / 7) = 8, and 8 x 96 = 768 >= 721.8 ends the walk;
    # ncclTopoDupChannels doubles (96 >= 50): 16 at 48; postset 32; no SM90 doubling (32 >= 16). busBw 16 x 48 = 768.
    n, bw, c = _graph(place(32, 1, _net(100e9, 900e9, "blackwell")))
    assert (n, bw, c) == (16.0, 48.0, 32.0)
    assert n * bw == 768.0


def test_six_hopper_gpus_a_node_run_4_ctas_a_search_channel() -> None:
    # 6 H100 a node, 400 Gb/s NIC each: 6 channels at 48 (the NVLink holds floor(6 floor(370.8 / 48) / 5) = 8; the
    # walk to 24 GB/s, 12 x 24 = 288, ties); not duplicated (48 < 50 with 6 > 4); postset 12; then the SM90 doubling
    # (bwIntra 48 > 45, 12 < 16): 24 CTAs for 6 x 48 = 288 GB/s, 12 GB/s a CTA, where 8 GPUs a node run 16 CTAs for
    # 8 x 48 = 384 GB/s, 24 GB/s a CTA: the execution count is not the bandwidth.
    n, bw, c = _graph(place(12, 1, _net(50e9, 450e9, "hopper", node=6)))
    assert (n, bw, c) == (6.0, 48.0, 24.0)
    n8, bw8, c8 = _graph(place(16, 1, _net(50e9, 450e9, "hopper")))
    assert (n8, bw8, c8) == (8.0, 48.0, 16.0)
    assert n * bw / c == 12.0 and n8 * bw8 / c8 == 24.0


def test_nccl_graph_bandwidth_is_not_under_the_model_bottleneck_on_the_catalog() -> None:
    # NCCL's modelled ring busBw across nodes (graph channels x bw) is at or above the model's bottleneck on the
    # built-in NVIDIA clusters, 8 GPUs a node over 4 nodes: a cap at NCCL's busBw would not move their collectives.
    # By hand: dgx-h100 8 x 48 = 384 >= min(450 x 0.82, 8 x 50 x 0.94) = 369; dgx-a100 8 x 24 = 192 >= min(231,
    # 8 x 25 x 0.96 = 192); dgx-b200 8 x 48 = 384 >= 8 x 50 x 0.94 = 376.
    for name, graph, model in (("dgx-h100", 384.0, 369.0), ("dgx-a100", 192.0, 192.0), ("dgx-b200", 384.0, 376.0)):
        pl = place(32, 1, build_network(load_cluster(name)))
        n, bw, _ = _graph(pl)
        assert n * bw == graph
        assert float(pl.bottleneck()) / 1e9 == pytest.approx(model, rel=1e-3)
        assert float(pl.bottleneck()) / 1e9 <= graph


def test_one_count_for_both_halves_breaks_monotonicity_on_dgx_a100() -> None:
    # The blocker, by hand: dgx-a100 DP over 4 nodes. 25 GB/s NICs: 8 channels at 24 (24 < 25, not duplicated) -> 16
    # CTAs, bandwidth min(192, 8 x 24) = 192 GB/s. 50 GB/s NICs: 8 at 48 wants 384 GB/s, but NCCL's NVLink (12 x 20 =
    # 240) holds floor(8 floor(240 / 48) / 7) = 5 channels (5 x 48 = 240 ends the walk) -> doubled to 10 at 24 -> 20
    # CTAs, bandwidth min(0.77 x 300 = 231, 10 x 24 = 240) = 231. CTA-seconds per byte 16 / 192 = 0.0833 -> 20 / 231
    # = 0.0866: a hidden gradient all-reduce would slow the compute under it 4 % more on the faster NIC.
    net = build_network(load_cluster("dgx-a100"))
    fast = _faster_nics(net, 2.0)
    per_byte = []
    for nw, (n_want, bw_want, c_want) in ((net, (8.0, 24.0, 16.0)), (fast, (10.0, 24.0, 20.0))):
        pl = place(32, 1, nw)
        n, bw, c = _graph(pl)
        assert (n, bw, c) == (n_want, bw_want, c_want)
        per_byte.append(c / min(float(pl.bottleneck()) / 1e9, n * bw))
    assert per_byte[0] == pytest.approx(16 / 192)
    assert per_byte[1] == pytest.approx(20 / 231, rel=1e-3)
    assert per_byte[1] > per_byte[0]


@pytest.mark.parametrize("cluster", ["dgx-a100", "dgx-h100", "dgx-b200"])
def test_a_faster_nic_never_makes_a_collective_slower(cluster: str) -> None:
    # every size from 1 KiB to 1 GiB, 2 to 32 nodes, each NCCL collective: the NIC tiers x2 and x4 never slower
    # (the ramp's channels follow the bandwidth, nccl.nccl_channels, so more channels come only with more bandwidth)
    net = build_network(load_cluster(cluster))
    sizes = (2.0 ** np.arange(10, 31, 2)).reshape(-1, 1)
    ranks = np.array([16.0, 64.0, 256.0]).reshape(1, -1)
    for op in ("allreduce", "allgather", "reducescatter", "alltoall"):
        base = coll.collective_time(op, sizes, ranks, net)
        for f in (2.0, 4.0):
            faster = coll.collective_time(op, sizes, ranks, _faster_nics(net, f))
            assert np.all(faster <= base * (1 + 1e-12)), (op, f)


@pytest.mark.parametrize("cluster", ["dgx-a100", "dgx-h100", "dgx-b200"])
@pytest.mark.parametrize("gpus", [16, 32, 64])
def test_a_faster_nic_never_raises_a_pure_dp_step(cluster: str, gpus: int) -> None:
    # GPT 1.7B, pure DP on 2 to 8 nodes, one sequence a GPU: the gradient all-reduce hidden under the backward, the
    # case a charged execution count breaks on dgx-a100 (16 -> 20 CTAs at 2x NIC, docs/model.md#contention)
    job = build_job(load_cluster(cluster), load_workload("gpt-1.7b"), TrainingSpec(global_batch=gpus, micro_batch=1))
    g = grid_from_arrays(gpus=gpus, dp=gpus, tp=1, pp=1, micro_batch=1, global_batch=gpus)
    _never_slower(job, g, (1.25, 2.0, 4.0))


@pytest.mark.parametrize("cluster", ["dgx-a100", "dgx-h100", "dgx-b200"])
def test_a_faster_nic_never_raises_step_time(cluster: str) -> None:
    # the step (DP across nodes under TP 1 / 8 and PP 1 / 4, 256 GPUs) with the NIC tiers x2 and x4: never slower
    job = build_job(load_cluster(cluster), load_workload("gpt-7.5b"), TrainingSpec(global_batch=256, micro_batch=1))
    tp = np.array([1, 2, 8]).reshape(3, 1)
    pp = np.array([1, 4]).reshape(1, 2)
    g = grid_from_arrays(gpus=256, dp=256 // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=256)
    _never_slower(job, g, (2.0, 4.0))


@pytest.mark.parametrize("cluster", ["dgx-a100", "dgx-h100", "dgx-b200"])
def test_a_faster_nic_never_raises_a_moe_step(cluster: str) -> None:
    # Mixtral 8x7B, EP 8 under TP 1 / 2 / 4 on 128 GPUs (the EP group leaves the node from TP 2 on): NIC tiers x2, x4
    job = build_job(load_cluster(cluster), load_workload("mixtral-8x7b"), TrainingSpec(global_batch=256, micro_batch=1))
    tp = np.array([1, 2, 4])
    g = grid_from_arrays(gpus=128, dp=128 // tp, tp=tp, pp=1, ep=8, micro_batch=1, global_batch=256)
    _never_slower(job, g, (2.0, 4.0))


def test_nccl_ctas_per_byte_jump_at_the_duplication_threshold() -> None:
    # NCCL's own count is not monotone per byte: dgx-a100 with its NICs at 1.25 x 25 = 31.25 GB/s searches at 30 GB/s
    # (speedArrayInter), one channel a NIC, 8 channels (the NVLink holds floor(8 floor(240 / 30) / 7) = 9; 8 x 30 =
    # 240 ends the walk), and ncclTopoDupChannels now doubles them (30 >= 25): 16 at 15 -> 32 CTAs, against 16 CTAs at
    # 25 GB/s (24 < 25, not doubled). NCCL's busBw 192 -> 240 GB/s (+25 %), CTAs 16 -> 32 (+100 %).
    net = build_network(load_cluster("dgx-a100"))
    quick = _faster_nics(net, 1.25)
    assert _graph(place(16, 1, net)) == (8.0, 24.0, 16.0)
    n, bw, c = _graph(place(16, 1, quick))
    assert (n, bw, c) == (16.0, 15.0, 32.0)
    assert n * bw == 240.0
