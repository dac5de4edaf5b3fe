"""Closed-form collective models: hand computations and the properties the issue requires."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scalemodel.cost import algorithms as A
from scalemodel.cost import collectives as C
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.errors import InputError

GiB = 2.0**30
NVL = Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8, protocol="nvlink")
IB = Tier("ib", 256, 50e9, 5e-6, efficiency=0.9, protocol="rdma")
SPINE = Tier("spine", 1 << 24, 50e9, 8e-6, efficiency=0.9, oversubscription=2.0, protocol="rdma")
NET = Network((NVL, IB, SPINE), 8)
ONE_TIER = Network((Tier("switch", 1 << 24, 100e9, 4e-6, efficiency=0.9, protocol="rdma"),), 1)


def test_busbw_factors_are_nccl_tests() -> None:
    assert float(C.busbw_factor("allreduce", 8)) == pytest.approx(2 * 7 / 8)
    assert float(C.busbw_factor("allgather", 8)) == pytest.approx(7 / 8)
    assert float(C.busbw_factor("alltoall", 4)) == pytest.approx(3 / 4)
    assert float(C.busbw_factor("broadcast", 64)) == 1.0
    assert float(C.busbw_factor("allreduce", 1)) == 1.0


def test_ring_textbook_hand_values() -> None:
    # p=8, S=1 GB, alpha=5us, B=100 GB/s: 14*5us + 1.75 * 1e9/1e11 = 70us + 17.5 ms
    assert float(A.ring_allreduce(1e9, 8, 5e-6, 1e-11)) == pytest.approx(70e-6 + 0.0175)
    assert float(A.ring_allgather(1e9, 8, 5e-6, 1e-11)) == pytest.approx(35e-6 + 0.00875)
    # Rabenseifner p=8: 2*3 alpha + 1.75 S beta ; p=6 -> p'=4: 2*2 alpha + 1.5 S beta + 2(alpha + S beta)
    assert float(A.rhd_allreduce(1e9, 8, 5e-6, 1e-11)) == pytest.approx(30e-6 + 0.0175)
    assert float(A.rhd_allreduce(1e9, 6, 5e-6, 1e-11)) == pytest.approx(20e-6 + 0.015 + 10e-6 + 0.02)
    # recursive doubling p=16: 4 (alpha + S beta)
    assert float(A.rd_allreduce(1e9, 16, 5e-6, 1e-11)) == pytest.approx(4 * (5e-6 + 0.01))


def test_ring_two_tier_hand_value() -> None:
    """16 GPUs = 2 nodes. Ring AR hops: 2(16-2)=28 NVLink, 2(2-1)=2 IB; bottleneck min(360, 8*45) GB/s."""
    S = 1e9
    t = float(C.raw_algorithm_time("allreduce", "ring", S, 16, NET))
    expected = 28 * 3e-6 + 2 * 5e-6 + 2 * 15 / 16 * S / 360e9
    assert t == pytest.approx(expected)


def test_ring_crossing_oversubscribed_spine() -> None:
    """512 GPUs span two leaf domains. The rack-contiguous ring leaves each leaf domain on 8 channels of 45 GB/s,
    far below the 256 x 45 / 2 GB/s of uplink of the 2:1 spine: no taper, bottleneck 8 x 45 = 360 GB/s
    (docs/model.md#flow-taper; this used to charge the taper on every byte, 180 GB/s: the physics changed)."""
    S, p = 1e9, 512
    t = float(C.raw_algorithm_time("allreduce", "ring", S, p, NET))
    hops_nvl = 2 * (512 - 64)
    hops_ib = 2 * (64 - 2)
    hops_sp = 2 * (2 - 1)
    expected = hops_nvl * 3e-6 + hops_ib * 5e-6 + hops_sp * 8e-6 + 2 * 511 / 512 * S / 360e9
    assert t == pytest.approx(expected)


def test_hierarchical_two_tier_hand_value() -> None:
    """BlueConnect / Horovod: RS in node (8), AR of S/8 across 4 nodes at per-GPU 45 GB/s, AG in node."""
    S = 1e9
    t = float(C.raw_algorithm_time("allreduce", "hierarchical", S, 32, NET))
    intra = 2 * 7 * 3e-6 + 2 * 7 / 8 * S / 360e9
    inter = 2 * 3 * 5e-6 + 2 * 3 / 4 * (S / 8) / 45e9
    assert t == pytest.approx(intra + inter)


def test_hierarchical_equals_flat_ring_inside_one_tier() -> None:
    S = np.logspace(0, 12, 25)
    for p in (2, 3, 8):
        assert np.allclose(C.raw_algorithm_time("allreduce", "hierarchical", S, p, NET),
                           C.raw_algorithm_time("allreduce", "ring", S, p, NET), rtol=1e-12)
        for op in ("allreduce", "allgather", "reducescatter"):
            assert np.allclose(C.collective_time(op, S, p, NET, algorithm="hierarchical"),
                               C.collective_time(op, S, p, NET, algorithm="ring"), rtol=1e-12)
    p = np.array([2, 100, 4096, 10**6])
    assert np.allclose(C.collective_time("allreduce", GiB, p, ONE_TIER, algorithm="hierarchical"),
                       C.collective_time("allreduce", GiB, p, ONE_TIER, algorithm="ring"), rtol=1e-12)


def test_in_network_reduction_level() -> None:
    """An NVLS tier: all-reduce inside it costs 2 alpha + S / (0.85 B) (cheaper than 2(p-1)/p S/B for p=8)."""
    nvls = Network((Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8, in_network_reduction=True),), 8)
    S = 1e9
    t = float(C.raw_algorithm_time("allreduce", "hierarchical", S, 8, nvls))
    assert t == pytest.approx(2 * 3e-6 + S / (0.85 * 360e9))
    assert t < float(C.raw_algorithm_time("allreduce", "ring", S, 8, nvls))


def test_stride_moves_traffic_to_outer_tier() -> None:
    """A DP group of 8 with stride 8 (one rank per node) runs entirely on IB at per-GPU bandwidth."""
    S = 1e9
    t = float(C.raw_algorithm_time("allreduce", "ring", S, 8, NET, stride=8))
    assert t == pytest.approx(2 * 7 * 5e-6 + 2 * 7 / 8 * S / 45e9)
    t_inner = float(C.raw_algorithm_time("allreduce", "ring", S, 8, NET, stride=1))
    assert t > t_inner


def test_protocol_lines_small_message() -> None:
    """A 0-byte 8-GPU ring all-reduce takes the LL line: base 6.6 us + 14 hops x 3 us (the tier's latency is
    the LL hop). LL128 would be 14 + 14 x (3 + 1.3) us, Simple 8.4 + 14 x (3 + 2.8) us (NCCL NVLink row)."""
    t = float(C.collective_time("allreduce", 0, 8, NET, algorithm="ring"))
    assert t == pytest.approx(6.6e-6 + 14 * 3e-6)
    ll128 = float(C.algorithm_time("allreduce", "ring", np.array(0.0), np.array(8.0), NET, protocols=("ll128",)))
    assert ll128 == pytest.approx(14e-6 + 14 * 4.3e-6)
    # large messages take the Simple line: bandwidth term dominates, 1.75 x 64 GiB / 360 GB/s
    big = float(C.collective_time("allreduce", 64 * GiB, 8, NET, algorithm="ring"))
    assert big == pytest.approx(8.4e-6 + 14 * 5.8e-6 + 1.75 * 64 * GiB / 360e9)


def test_hop_latency_adds_nccl_protocol_increments() -> None:
    """hwLatencies (tuning.cc): NVLink Ring 0.6/1.9/3.4, Tree 0.6/1.25/4.0; NET Ring 2.7/4.0/14, Tree 5/8.5/14."""
    assert nccl.hop_latency(NVL, 0, "ring", "ll") == pytest.approx(3e-6)
    assert nccl.hop_latency(NVL, 0, "ring", "simple") == pytest.approx(3e-6 + 2.8e-6)
    assert nccl.hop_latency(NVL, 0, "tree", "ll128") == pytest.approx(3e-6 + 0.65e-6)
    assert nccl.hop_latency(IB, 1, "ring", "simple") == pytest.approx(5e-6 + 11.3e-6)
    assert nccl.hop_latency(IB, 1, "tree", "ll") == pytest.approx(5e-6 + 2.3e-6)
    pcie = Tier("pcie", 8, 25e9, 5e-6, protocol="pcie")
    assert nccl.hop_latency(pcie, 0, "ring", "simple") == pytest.approx(5e-6 + 4.7e-6)


def test_channel_ramp_hand_values() -> None:
    """8 GPUs at 360 GB/s -> 18 channels of 20 GB/s. Simple: 512 threads x 64 B per channel, so below
    S_full = 18 x 512 x 64 = 589824 B the bandwidth term costs as much as S_full; with one channel of 64
    threads (r_min = 64 / (18 x 512)) below 4096 B it scales as S / r_min."""
    lat = 8.4e-6 + 14 * 5.8e-6

    def simple(S: float) -> float:
        return float(C.algorithm_time("allreduce", "ring", np.array(S), np.array(8.0), NET, protocols=("simple",)))

    assert simple(65536) == pytest.approx(lat + 1.75 * 589824 / 360e9)
    assert simple(131072) == pytest.approx(simple(65536))
    assert simple(1024) == pytest.approx(lat + 1.75 * 1024 * 18 * 512 / 64 / 360e9)
    assert simple(2**21) == pytest.approx(lat + 1.75 * 2**21 / 360e9)
    # Ring LL: threshold 8 B x nRanks per thread, bandwidth x0.5
    ll = float(C.algorithm_time("allreduce", "ring", np.array(65536.0), np.array(8.0), NET, protocols=("ll",)))
    assert ll == pytest.approx(6.6e-6 + 14 * 3e-6 + 1.75 * (18 * 512 * 64) / (0.5 * 360e9))


def test_tree_correction_interpolates_nccl_table() -> None:
    assert float(nccl.tree_correction("simple", 2.0**20)) == pytest.approx(0.5)  # index log2(2^20/64) = 14
    assert float(nccl.tree_correction("simple", 2.0**20 * 2**0.5)) == pytest.approx(0.55)  # halfway to .6
    assert float(nccl.tree_correction("ll", 64.0)) == 1.0 and float(nccl.tree_correction("ll", 2.0**40)) == 1.0


def test_nccl_tree_hand_value() -> None:
    """8 GPUs, Simple, 1 MiB: chain of 7 hops each way at 3 + (4.0 - 0.6) us, base 8.4 us;
    algbw = 0.5 x 0.92 x 360 GB/s x 0.5 (treeCorrectionFactor at 1 MiB)."""
    S = 2.0**20
    t = float(C.algorithm_time("allreduce", "tree", np.array(S), np.array(8.0), NET, protocols=("simple",)))
    assert t == pytest.approx(8.4e-6 + 2 * 7 * 6.4e-6 + S / (0.5 * 0.92 * 360e9 * 0.5))
    # 64 nodes x 8: + 2 x floor(lg 32) IB hops at 5 + (14 - 2.7) us, and 2 spine hops (2 leaf domains)
    t = float(C.algorithm_time("allreduce", "tree", np.array(S), np.array(512.0), NET, protocols=("simple",)))
    lat = 8.4e-6 + 2 * (7 * 6.4e-6 + 5 * (5e-6 + 11.3e-6) + 1 * (8e-6 + 11.3e-6))
    # the tree leaves each leaf domain on 2 x 8 streams of 45 GB/s, below the 2:1 spine's 256 x 45 / 2 GB/s
    # of uplink: busbw 360 GB/s, not the fully tapered 180 (docs/model.md#flow-taper; physics changed)
    assert t == pytest.approx(lat + S / (0.5 * 0.92 * 360e9 * 0.5))


def test_ring_simple_plateau_across_nodes() -> None:
    """16 GPUs on 2 nodes, Simple, 1 GiB: latency x1.4 (S / (18 channels x 16) >= 64 B)."""
    S = GiB
    t = float(C.algorithm_time("allreduce", "ring", np.array(S), np.array(16.0), NET, protocols=("simple",)))
    lat = 8.4e-6 + 28 * 5.8e-6 + 2 * 16.3e-6
    assert t == pytest.approx(1.4 * lat + 2 * 15 / 16 * S / 360e9)
    one_node = float(C.algorithm_time("allreduce", "ring", np.array(S), np.array(8.0), NET, protocols=("simple",)))
    assert one_node == pytest.approx(8.4e-6 + 14 * 5.8e-6 + 1.75 * S / 360e9)  # no plateau inside a node


def test_auto_chooses_only_nccl_algorithms_on_gpu_clusters() -> None:
    S = np.logspace(1, 11, 30)
    for op in A.OPS:
        for p in (8, 16, 1024):
            _, names, idx, best = C.best_algorithm(op, S, p, NET)
            assert {names[int(i)] for i in idx} <= set(nccl.NCCL_FAMILY[op]) - {"hierarchical"}, (op, p)
            _, _, _, best_all = C.best_algorithm(op, S, p, NET, family="all")
            assert np.all(best_all <= best * (1 + 1e-12))
    # in-network reduction declared on the NVLink tier: NVLS (as hierarchical) becomes a candidate
    nvls = Network((replace(NVL, in_network_reduction=True), IB, SPINE), 8)
    _, names, idx, _ = C.best_algorithm("allreduce", 8 * GiB, 8, nvls)
    assert names[int(idx)] == "hierarchical"
    for net, fam in ((nvls, "auto"), (NET, "all"), (NET, "nccl")):
        for p in (8, 64):  # collective_time's shortcut gives best_algorithm's minimum
            assert np.array_equal(C.collective_time("allreduce", S, p, net, family=fam),
                                  C.best_algorithm("allreduce", S, p, net, family=fam)[3])
    # a TPU (ICI) network is not NCCL: auto considers every algorithm
    ici = Network((Tier("ici", 4096, 45e9, 1e-6, protocol="ici"),), 4)
    assert nccl.resolve_family(ici) == "all" and nccl.resolve_family(NET) == "nccl"
    with pytest.raises(InputError):
        C.collective_time("allreduce", 1e6, 8, NET, family="mpi")


def test_ll128_disabled_on_pcie() -> None:
    pcie = Network((Tier("pcie", 8, 25e9, 5e-6, protocol="pcie"),), 8)
    assert nccl.protocols_for(pcie) == ("ll", "simple")
    assert nccl.protocols_for(NET) == ("ll", "ll128", "simple")


@pytest.mark.parametrize("op", A.OPS)
def test_one_rank_costs_zero(op: str) -> None:
    for algo in (*A.APPLICABLE[op], "auto"):
        assert np.all(C.collective_time(op, [0, 1e3, 1e12], 1, NET, algorithm=algo) == 0.0)


@pytest.mark.parametrize("op", A.OPS)
def test_monotone_in_size_and_bandwidth(op: str) -> None:
    S = np.logspace(0, 12, 60)
    slower = Network(tuple(Tier(t.name, t.span, t.bandwidth / 2, t.latency, t.efficiency, t.oversubscription,
                                t.in_network_reduction, t.topology, t.protocol) for t in NET.tiers), 8)
    for p in (2, 8, 24, 512, 4096):
        for algo in (*A.APPLICABLE[op], "auto"):
            t = C.collective_time(op, S, p, NET, algorithm=algo)
            assert np.all(np.diff(t) >= -1e-15 * t[1:]), (op, algo, p)
            assert np.all(C.collective_time(op, S, p, slower, algorithm=algo) >= t * (1 - 1e-12)), (op, algo, p)


def test_no_nan_at_extremes() -> None:
    S = np.array([0.0, 1.0, 1e6, 2.0**40])[:, None]
    p = np.array([1, 2, 3, 1000, 65536, 10**7])[None, :]
    for op in A.OPS:
        for algo in (*A.APPLICABLE[op], "auto"):
            t = C.collective_time(op, S, p, NET, algorithm=algo, stride=3)
            assert t.shape == (4, 6)
            assert np.all(np.isfinite(t)) and np.all(t >= 0), (op, algo)


def test_auto_is_the_minimum_and_names_it() -> None:
    S = np.array([1e3, 1e6, 1e9])
    times, names, idx, best = C.best_algorithm("allreduce", S, 1024, NET)
    assert times.shape == (len(names), 3)
    assert np.allclose(best, times[idx, np.arange(3)])
    elig = ["ring", "tree"]  # NCCL's own algorithms; no tier of NET declares in-network reduction
    assert np.allclose(best, np.min(times[[names.index(n) for n in elig]], axis=0))
    assert np.allclose(C.collective_time("allreduce", S, 1024, NET), best)


def test_tree_latency_grows_logarithmically_ring_linearly() -> None:
    t_ring = [float(C.raw_algorithm_time("allreduce", "ring", 0.0, p, ONE_TIER)) for p in (64, 128)]
    t_tree = [float(C.raw_algorithm_time("allreduce", "tree", 0.0, p, ONE_TIER)) for p in (64, 128)]
    assert t_ring[1] - t_ring[0] == pytest.approx(2 * 64 * 4e-6)
    assert t_tree[1] - t_tree[0] == pytest.approx(2 * 4e-6)  # one more level, up and down


def test_alltoall_pairwise_hand_value() -> None:
    """16 GPUs: 7 NVLink peers, 8 IB peers, S/16 each; NIC port 8 S/16 / 45 GB/s; pairwise latency."""
    S = 1e9
    t = float(C.raw_algorithm_time("alltoall", "direct", S, 16, NET))
    bw = max(7 * S / 16 / 360e9, 8 * S / 16 / 45e9)
    assert t == pytest.approx(bw + 7 * 3e-6 + 8 * 5e-6)


def test_sendrecv_hand_value() -> None:
    assert float(C.raw_algorithm_time("sendrecv", "direct", 1e9, 2, NET, stride=8)) == pytest.approx(5e-6 + 1e9 / 45e9)


def test_bad_inputs_raise_input_error() -> None:
    with pytest.raises(InputError):
        C.collective_time("allsum", 1e6, 8, NET)
    with pytest.raises(InputError):
        C.collective_time("allreduce", -1, 8, NET)
    with pytest.raises(InputError):
        C.collective_time("allreduce", 1e6, 0, NET)
    with pytest.raises(InputError):
        C.collective_time("allreduce", float("nan"), 8, NET)
    with pytest.raises(InputError):
        C.collective_time("alltoall", 1e6, 8, NET, algorithm="ring")
    with pytest.raises(InputError):
        C.collective_time("allreduce", 1e6, 8, NET, algorithm="bogus")
    with pytest.raises(InputError):
        C.collective_time("allreduce", 1e6, 8, Network((Tier("x", 8, 0.0, 1e-6),), 8))


# ---- CLI -------------------------------------------------------------------------------------------

def test_cli_json_shape_and_busbw(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    r = cli("collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "16", "--cluster", "dgx-h100", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert list(doc)[:2] == ["schema_version", "command"] and doc["command"] == "collective"
    assert doc["op"] == "allreduce" and doc["ranks"] == 16
    row = doc["rows"][0]
    assert row["size_bytes"] == 2.0**30
    algs = {a["algorithm"]: a for a in row["algorithms"]}
    assert set(algs) == set(A.APPLICABLE["allreduce"])
    nccl = ("ring", "tree", "hierarchical")  # dgx-h100's NVLink tier declares NVLS: hierarchical = NVLS
    assert row["best"] == min(algs, key=lambda n: algs[n]["time_s"] if n in nccl else np.inf)
    a = algs["ring"]
    assert a["algbw_Bps"] == pytest.approx(2.0**30 / a["time_s"])
    assert a["busbw_Bps"] == pytest.approx(a["algbw_Bps"] * 2 * 15 / 16)
    assert 0 < a["latency_s"] < a["time_s"]


def test_cli_sweep_and_errors(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    r = cli("collective", "--op", "allgather", "--sizes", "1KiB:1MiB", "--gpus", "8", "--cluster", "dgx-a100",
            "--algo", "ring", "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert [x["size_bytes"] for x in rows] == [2.0**k for k in range(10, 21)]
    assert all(x["best"] == "ring" and len(x["algorithms"]) == 1 for x in rows)
    r = cli("collective", "--op", "allreduce", "--sizes", "1KiB:8MiB", "--gpus", "8", "--cluster", "dgx-a100")
    assert r.code == 0 and "busbw" in r.out
    for bad in (["--op", "allsum"], ["--algo", "magic"], ["--size", "1 parsec"], ["--gpus", "0"],
                ["--op", "alltoall", "--algo", "ring"], ["--gpus", "100000000"], ["--sizes", "8GiB:1KiB"]):
        args = ["collective", "--cluster", "dgx-h100", "--gpus", "16", *bad]
        r = cli(*args)
        assert r.code == 2 and r.err.startswith("error: ") and "Traceback" not in r.err, bad


def test_nvls_allgather_hand_value_from_tuning_cc() -> None:
    """NCCL's NVLS all-gather on one 8-GPU NVLink-SHARP domain (tuning.cc v2.30.7): k = 8 heads, NVLS graph
    k bw = B_0 k/(k+1), intraBw x eff x (k-1)/k x (ppn-1)/ppn, no algBw conversion for non-Ring AG/RS, latency
    the NVLink NVLS hwLatency 25 us read on the tier's measured 3 us hop as every hwLatency is (coll34): 3 + 25 -
    0.6 (NVLink Ring LL) = 27.4 us. B_0 = 450 x 0.8 = 360 GB/s, eff (Hopper) 0.85:
    busBw = 360 x 8/9 x 0.85 x 7/8 x 7/8 = 208.25 GB/s; 1 GiB: 27.4 us + 2^30 / 208.25e9."""
    nvls = Network((replace(NVL, in_network_reduction=True), IB, SPINE), 8)
    bus = 208.25e9
    assert 360e9 * 8 / 9 * 0.85 * 7 / 8 * 7 / 8 == pytest.approx(bus)
    t = float(C.algorithm_time("allgather", "hierarchical", GiB, 8, nvls))
    assert t == pytest.approx(27.4e-6 + GiB / bus)
    # reduce-scatter adds the reduction arithmetic (p-1)/p S gamma
    t_rs = float(C.algorithm_time("reducescatter", "hierarchical", GiB, 8, nvls, gamma=1e-13))
    assert t_rs == pytest.approx(27.4e-6 + GiB / bus + 7 / 8 * GiB * 1e-13)
    # two domains: NVLS AG/RS needs CollNet across nodes, so hierarchical keeps its alpha-beta form and auto
    # does not consider it
    assert not nccl.nvls_gather_applies(C.place(16, 1, nvls))
    _, names, idx, best = C.best_algorithm("allgather", np.logspace(3, 10, 15), 16, nvls)
    assert {names[int(i)] for i in idx} == {"ring"}
    # auto on one domain: the faster of ring and NVLS (ring here: NCCL's NVLS AG model is slower on Hopper)
    S = np.logspace(3, 10, 15)
    ring = C.algorithm_time("allgather", "ring", S, 8, nvls)
    nv = C.algorithm_time("allgather", "hierarchical", S, 8, nvls)
    assert np.allclose(C.collective_time("allgather", S, 8, nvls), np.minimum(ring, nv))


def test_pat_allgather_hand_value_from_tuning_cc() -> None:
    """NCCL's PAT all-gather at one GPU per node (tuning.cc v2.30.7): 16 ranks, one per 8-GPU node (stride 8).
    Latency 8 us + log2i(16) x interLat / 3.5 + 2.8 us x 16, interLat the Tree Simple NET hop = measured IB hop
    5 us + (14 - 2.7) us = 16.3 us; bandwidth 0.75 x the Tree graph's busBw (one GPU per node: its NIC,
    50 x 0.9 = 45 GB/s), charged the whole S (no algBw conversion for non-Ring AG/RS)."""
    lat = 8e-6 + 4 * 16.3e-6 / 3.5 + 2.8e-6 * 16
    S = 64e6
    t = float(C.algorithm_time("allgather", "rd", S, 16, NET, stride=8))
    assert t == pytest.approx(lat + S / (0.75 * 45e9))
    # auto picks PAT where it beats ring (small sizes: log latency) and ring at large sizes (PAT's x0.75 and no
    # (p-1)/p); with more than one rank per node PAT does not apply and rd is not a candidate
    sizes = np.array([1e3, 4e9])
    _, names, idx, best = C.best_algorithm("allgather", sizes, 16, NET, stride=8)
    assert [names[int(i)] for i in idx] == ["rd", "ring"]
    _, names, idx, _ = C.best_algorithm("allgather", sizes, 16, NET, stride=1)
    assert "rd" not in {names[int(i)] for i in idx}
    # a TPU (ICI) network keeps the alpha-beta recursive doubling
    ici = Network((Tier("chip", 1, 45e9, 1e-6, protocol="ici"), Tier("ici", 4096, 45e9, 1e-6, protocol="ici")), 1)
    assert not nccl.pat_applies(C.place(16, 1, ici))
