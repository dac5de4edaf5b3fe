"""coll34: every algorithm's time carries the measured latency of every tier its group spans, ``auto`` included.

fuzz33 found ``predict -m llama2-7b -n 64 --set cluster.tiers.1.latency=1s`` at ~399 ms a step while ``--algo ring``
gave 30.6 minutes: ``auto`` took NCCL's in-network-reduction all-reduce (NVLSTree on 8 dgx-h100 nodes), whose latency
was NCCL's hwLatencies alone (25 us + 2 log2i(N) 20.9 us), never the tier's. Now it reads them on the measured hop as
every other hwLatency is read (nccl._measured; docs/model.md#in-network-reduction). Expected values are hop counts
derived from NCCL's algorithms (tuning.cc v2.30.7), not from the implementation."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.algorithms import APPLICABLE
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

SECOND = 1.0


def _with_latency(net: Network, i: int, latency: float) -> Network:
    tiers = list(net.tiers)
    tiers[i] = replace(tiers[i], latency=latency)
    return replace(net, tiers=tuple(tiers))


def test_fuzz33_a_one_second_leaf_hop_costs_every_nccl_allreduce_its_hops() -> None:
    """64 GPUs = 8 dgx-h100 nodes of 8, ib-leaf hop 1 s. Crossings of the leaf tier on the critical path (NCCL's
    algorithms): Ring 2 (nNodes - 1) = 14 (tuning.cc nInterSteps); Tree 2 floor(log2 8) = 6 (up and down the
    double binary tree across nodes); NVLSTree 2 log2i(8) = 6 (tuning.cc: 2 log2i(nNodes) interLat). So auto, the
    fastest, costs at least 6 s and at most 6 s plus what the same all-reduce costs at the datasheet hop."""
    base = build_network(load_cluster("dgx-h100", []))
    slow = _with_latency(base, 1, SECOND)
    S = 256 * 2.0**20
    hops = {"ring": 14, "tree": 6, "hierarchical": 6}
    for algo, n in hops.items():
        assert float(coll.collective_time("allreduce", S, 64, slow, algorithm=algo, dtype_bytes=1)) >= n * SECOND
    auto = float(coll.collective_time("allreduce", S, 64, slow, dtype_bytes=1))
    fast = float(coll.collective_time("allreduce", S, 64, base, dtype_bytes=1))
    assert 6 * SECOND <= auto <= 6 * SECOND + fast
    # NCCL's own estimate (what its tuner ranks by) keeps its absolute hwLatencies: 25 + 6 x 20.9 us + bytes
    est = float(nccl.nccl_inr_allreduce_time(np.array(0.0), place(64, 1, slow), estimate=True))
    assert est == pytest.approx(25e-6 + 6 * 20.9e-6, rel=1e-12)


def test_fuzz33_predict_step_carries_the_one_second_hop(cli) -> None:  # type: ignore[no-untyped-def]
    """The fuzz33 command: its DP all-reduce (auto) is at least 6 s (above), so the step is too; it was 399 ms."""
    r = cli("predict", "-m", "llama2-7b", "-n", "64", "--set", "cluster.tiers.1.latency=1s", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["breakdown_s"]["dp_comm"] >= 6 * SECOND
    assert doc["step_time_s"] >= 6 * SECOND


def test_rhd_charges_the_folded_pairs_outer_hop_by_hand() -> None:
    """25 GPUs, 2 a node, domains of 16 and 32 group ranks: MPICH folds rank 0 into 1, ..., 16 into 17 (r = 9) and
    renumbers the 16 left, j -> 2j + 1 for j < 9, j + 9 after; the all-gather's last step (distance 8) pairs j = 7
    (group rank 15) with j = 15 (group rank 24), across the 16-rank domain: +1 s on the outer tier costs that step's
    hop at least. Before, each step was priced on an aligned block (8 + 8 ranks inside one domain of 16): 92 us."""
    net = Network(tiers=(Tier("nvlink", 2, 200e9, 1e-6, efficiency=0.8, protocol="nvlink"),
                         Tier("net0", 16, 25e9, 1e-6, efficiency=0.9, protocol="rdma"),
                         Tier("net1", 32, 25e9, 1e-6, efficiency=0.9, protocol="rdma")), gpus_per_node=2)
    slow = _with_latency(net, 2, SECOND)
    t = float(coll.group_time("allgather", 1e6, place(25, 1, slow), algorithm="rhd", dtype_bytes=1))
    assert SECOND <= t < 2 * SECOND  # only the distance-8 step's pairs straddle the outer domain
    t16 = float(coll.group_time("allgather", 1e6, place(16, 1, slow), algorithm="rhd", dtype_bytes=1))
    assert t16 < 1e-3  # a power of two inside one 16-rank domain never crosses it


def test_nvls_reads_the_nvlink_hop_and_nccls_own_at_its_own_hop() -> None:
    """8 GPUs in one dgx-h100 node: NVLS latency = 25 us (NCCL's NVLink NVLS hwLatency) read on the measured 2 us
    hop: 2 + 25 - 0.6 (NCCL's NVLink Ring LL) = 26.4 us; at NCCL's own 0.6 us hop exactly NCCL's 25 us; the NVLS
    all-gather the same 25 us read the same way."""
    base = build_network(load_cluster("dgx-h100", []))
    assert float(coll.collective_time("allreduce", 0.0, 8, base, algorithm="hierarchical")) == pytest.approx(26.4e-6)
    own = _with_latency(base, 0, 0.6e-6)
    assert float(coll.collective_time("allreduce", 0.0, 8, own, algorithm="hierarchical")) == pytest.approx(25e-6)
    assert float(coll.collective_time("allgather", 0.0, 8, own, algorithm="hierarchical")) == pytest.approx(25e-6)
    slow = _with_latency(base, 0, SECOND)
    for op in ("allreduce", "allgather", "reducescatter"):
        assert float(coll.collective_time(op, 2.0**20, 8, slow)) >= SECOND, op


@st.composite
def _networks(draw: st.DrawFn) -> Network:
    gpn = draw(st.sampled_from([2, 4, 8]))
    nvl = Tier("nvlink", draw(st.sampled_from([gpn, 72])) if gpn == 4 else gpn,
               draw(st.sampled_from([200e9, 450e9, 900e9])), draw(st.floats(0.1e-6, 10e-6)),
               efficiency=0.8, in_network_reduction=draw(st.booleans()), protocol="nvlink")
    tiers = [nvl]
    span = nvl.span
    for k in range(draw(st.integers(1, 3))):
        span *= draw(st.sampled_from([2, 4, 8, 32]))
        tiers.append(Tier(f"net{k}", span, draw(st.sampled_from([25e9, 50e9, 100e9])), draw(st.floats(1e-6, 30e-6)),
                          efficiency=0.9, oversubscription=draw(st.sampled_from([1.0, 2.0])),
                          in_network_reduction=draw(st.booleans()), protocol=draw(st.sampled_from(["rdma", "tcp"]))))
    return Network(tuple(tiers), gpus_per_node=gpn, generation=draw(st.sampled_from(["", "hopper", "blackwell"])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net=_networks(), data=st.data())
def test_raising_any_tier_latency_never_lowers_any_collective(net: Network, data: st.DataObject) -> None:
    """For every op x algorithm x auto on a random placement: a tier's latency raised never lowers the time, and
    raised by 1 s on a tier the group crosses, the time is at least that one hop (every algorithm has a hop of that
    tier on its critical path), except NCCL's PAT (``rd`` reduce-scatter / all-gather at one GPU a node), whose log
    steps NCCL charges interLat / 3.5 each (tuning.cc): at least log2i(p) / 3.5 hops there."""
    cap = net.tiers[-1].span
    p = data.draw(st.integers(2, min(cap, 512)), label="p")
    stride = data.draw(st.sampled_from([s for s in (1, 2, 4, 8) if p * s <= cap] or [1]), label="stride")
    op = data.draw(st.sampled_from(sorted(APPLICABLE)), label="op")
    algo = data.draw(st.sampled_from([*APPLICABLE[op], "auto"]), label="algo")
    S = data.draw(st.sampled_from([0.0, 1e3, 1e6, 64e6, 4e9]), label="S")
    i = data.draw(st.integers(0, len(net.tiers) - 1), label="tier")
    up = data.draw(st.floats(1.0, 1e3), label="factor")
    pl = place(p, stride, net)
    t0 = float(coll.group_time(op, S, pl, algorithm=algo, dtype_bytes=1))
    raised = _with_latency(net, i, net.tiers[i].latency * up)
    t1 = float(coll.group_time(op, S, place(p, stride, raised), algorithm=algo, dtype_bytes=1))
    assert t1 >= t0 * (1 - 1e-12), (op, algo, i, t0, t1)
    crossed = float(pl.level(i)) > 1.5 if i > 0 else float(pl.c[0]) > 1.5
    if crossed:
        second = _with_latency(net, i, net.tiers[i].latency + SECOND)
        t2 = float(coll.group_time(op, S, place(p, stride, second), algorithm=algo, dtype_bytes=1))
        pat = (op in ("reducescatter", "allgather") and float(pl.c[0]) < 1.5
               and (algo == "rd" or (algo == "auto" and t2 < SECOND)))
        least = np.floor(np.log2(p)) / nccl.PAT_LOG_LATENCY_DIV if pat else 1.0
        # (CI found p 25 on domains of 16 / 32 with rhd: the renumbered pairs after MPICH's fold crossed the outer
        # tier uncharged; algorithms._folded_step_tiers, docs/model.md#rhd-fold)
        assert t2 >= least * (net.tiers[i].latency + SECOND) * (1 - 1e-9), (op, algo, i, t0, t2)


def test_hierarchical_uneven_outer_level_costs_whole_hops() -> None:
    """CI's draw (session 35): p 49 on domains of 2 / 4 / 32 / 64 ranks, all-gather of 0 bytes, hierarchical. The
    group's levels hold 2, 2, 8 and ceil(49 / 32) = 2 sub-groups: one ring each, 1 + 1 + 7 + 1 hops (a ring over k
    sub-groups takes k - 1 steps). The fractional 49 / 32 = 1.53 used to give the outer ring 0.53 of a hop, so a
    1 s outer hop cost 0.53 s."""
    lat = (8e-6, 1e-6, 20e-6, 10e-6)
    spans = (2, 4, 32, 64)
    net = Network(tiers=tuple(Tier(name=f"t{i}", span=s, bandwidth=25e9, latency=a, efficiency=0.9)
                              for i, (s, a) in enumerate(zip(spans, lat, strict=True))), gpus_per_node=2)
    t = float(coll.raw_algorithm_time("allgather", "hierarchical", 0.0, 49, net))  # the bare alpha-beta model
    assert t == pytest.approx(1 * lat[0] + 1 * lat[1] + 7 * lat[2] + 1 * lat[3], rel=1e-9)
    slow = _with_latency(net, 3, SECOND)
    t_slow = float(coll.group_time("allgather", 0.0, place(49, 1, slow), algorithm="hierarchical", dtype_bytes=1))
    assert t_slow >= SECOND


def test_nvlstree_on_a_part_filled_second_domain_climbs_one_tree_level() -> None:
    """CI's draw (session 35): 13 ranks on NVLS domains of 8 under one outer tier: 2 domains, so NVLSTree's double
    binary tree has one level, up and down: 2 crossings of the outer hop (tuning.cc: 2 log2i(nNodes) interLat with
    nNodes 2). The mean fill 13 / 8 = 1.6 domains gave log2i 0: a 1 s outer hop cost nothing."""
    def net(lat1: float) -> Network:
        return Network(tiers=(Tier(name="nvlink", span=8, bandwidth=200e9, latency=1e-6, efficiency=0.8,
                                   in_network_reduction=True),
                              Tier(name="net0", span=16, bandwidth=25e9, latency=lat1, efficiency=0.9)),
                       gpus_per_node=8)
    t = float(nccl.nccl_inr_allreduce_time(np.array(0.0), place(13, 1, net(SECOND))))
    assert 2 * SECOND <= t <= 2 * SECOND + 1e-3
