"""Placement of groups on the tiers (cost.placement), the NCCL layer on a placement (cost.nccl), and the
step model placing each parallel group once per evaluation. Expected values are worked by hand from
the formulas in the module docstrings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from scalemodel.cost import algorithms, nccl, placement
from scalemodel.cost.collectives import collective_time, group_time
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

NVL = Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8, protocol="nvlink")
IB = Tier("ib", 256, 50e9, 5e-6, efficiency=0.9, protocol="rdma")
SPINE = Tier("spine", 1 << 24, 50e9, 8e-6, efficiency=0.9, oversubscription=2.0, protocol="rdma")
NET = Network((NVL, IB, SPINE), 8)


def f(a: Any) -> float:
    return float(np.asarray(a))


@pytest.mark.parametrize(("p", "s", "c", "tier"), [
    (16, 1, (8, 16, 16), 1),    # two nodes under one leaf
    (16, 8, (1, 16, 16), 1),    # one rank per node, 128 GPUs: inside a leaf
    (64, 8, (1, 32, 64), 2),    # 512 GPUs: two leaves, across the spine
    (8, 1, (8, 8, 8), 0),       # one node
    (1, 16, (1, 1, 1), 1),      # a lone rank 16 GPUs out: its 16-GPU block needs the leaf
])
def test_ranks_per_domain_and_holding_tier(p: int, s: int, c: tuple[int, ...], tier: int) -> None:
    # c_i = clip(floor(span_i / s), c_(i-1), p); the holding tier is the innermost with p s <= span_i
    pl = place(p, s, NET)
    assert [f(x) for x in pl.c] == list(c)
    assert int(pl.tier) == tier and f(pl.extent) == p * s


def test_levels_domains_and_ring_crossings() -> None:
    pl = place(64, 8, NET)  # c = (1, 32, 64)
    assert [f(pl.level(i)) for i in range(3)] == [1.0, 32.0, 2.0]  # p_i = c_i / c_(i-1)
    assert [f(pl.domains(i)) for i in (-1, 0, 1, 2)] == [64.0, 64.0, 2.0, 1.0]  # n_i = p / c_i
    # a flat ring in rank order: n_(i-1) - n_i of its 63 edges cross tier i at most
    assert [f(pl.domains(i - 1) - pl.domains(i)) for i in range(3)] == [0.0, 62.0, 1.0]
    pl16 = place(16, 1, NET)  # c = (8, 16, 16): blocks of up to 8 ranks stay in a node
    assert [int(pl16.tier_for_block(k)) for k in (2, 8, 9, 16)] == [0, 0, 1, 1]
    assert [bool(pl16.inside(i)) for i in range(3)] == [False, True, True]


def test_link_figures_taper_and_bottleneck() -> None:
    pl = place(512, 1, NET)  # c = (8, 256, 512): crosses node, leaf and spine
    # effective bandwidth = line rate x efficiency / oversubscription
    assert pl.bw.tolist() == pytest.approx([360e9, 45e9, 22.5e9])
    assert pl.untapered().bw.tolist() == pytest.approx([360e9, 45e9, 45e9])
    # flat ring/tree bus bandwidth: min over crossed tiers of a_i B_i(flows), a_0 = 1, a_i = c_0 = 8 outside the
    # node. The 2:1 spine: a leaf domain of 256 GPUs has 256 x 45 / 2 GB/s of uplink; the rack-contiguous ring
    # leaves it on 8 channels (8 x 45 GB/s): no taper (docs/model.md#flow-taper, the physics changed here:
    # the spine used to be charged 2:1 on every ring byte, 8 x 22.5 GB/s)
    assert f(pl.bottleneck()) == pytest.approx(min(360e9, 8 * 45e9, 8 * 45e9))
    # flow taper o_eff = clip(o x flows / c_(i-1), 1, o): 2 x 8 / 256 -> 1; a 64:1 spine -> 64 x 8 / 256 = 2
    assert f(pl.flow_bw(2, 8.0)) == pytest.approx(45e9)
    assert f(pl.flow_bw(2, 256.0)) == pytest.approx(22.5e9)  # every rank's traffic leaves: full taper
    steep = Network((NET.tiers[0], NET.tiers[1], replace(NET.tiers[2], oversubscription=64.0)), 8)
    assert f(place(512, 1, steep).bottleneck()) == pytest.approx(8 * 45e9 / 2)
    assert f(place(512, 1, steep).bottleneck(2.0)) == pytest.approx(8 * 45e9 / 4)  # tree: 2 streams per channel
    # stride 8: one rank per node, 32 per leaf domain, 32 interleaved groups: 1 flow each -> 64 x 1/32 = 2
    assert f(place(64, 8, steep).bottleneck()) == pytest.approx(45e9 / 2)
    assert f(pl.untapered().bottleneck()) == pytest.approx(360e9)
    # one rank per node: every outer stream is a single NIC; the ring only crosses the leaf
    assert f(place(16, 8, NET).bottleneck()) == pytest.approx(45e9)
    # a group that stays inside the node
    assert f(place(8, 1, NET).bottleneck()) == pytest.approx(360e9)


def test_relinking_keeps_the_placement() -> None:
    pl = place(16, 1, NET)
    simple = nccl.protocol_links(pl, "simple", "ring")
    ll = nccl.protocol_links(pl, "ll", "ring")
    assert simple.c is pl.c and ll.c is pl.c  # the same placement, other links
    # hop latency: Tier.latency + hwLat[link][ring][proto] - hwLat[link][ring][LL] (tuning.cc)
    assert simple.alpha.tolist() == pytest.approx([3e-6 + 3.4e-6 - 0.6e-6, 5e-6 + 14e-6 - 2.7e-6, 8e-6 + 11.3e-6])
    assert ll.alpha.tolist() == pytest.approx([3e-6, 5e-6, 8e-6])
    # Ring bandwidth factor: LL x0.5 of the line rate, then efficiency and taper as before
    assert ll.bw.tolist() == pytest.approx([180e9, 22.5e9, 11.25e9])
    tree = nccl.protocol_links(pl, "ll128", "tree", bw_factor=1.0)
    assert tree.alpha.tolist() == pytest.approx([3e-6 + 1.25e-6 - 0.6e-6, 5e-6 + 8.5e-6 - 2.7e-6, 8e-6 + 5.8e-6])
    assert tree.bw.tolist() == pytest.approx(pl.bw.tolist())


def test_place_refuses_bad_groups_and_networks() -> None:
    with pytest.raises(InputError, match="whole numbers"):
        place(2.5, 1, NET)
    with pytest.raises(InputError, match="stride must be >= 1"):
        place(8, 0, NET)
    with pytest.raises(InputError, match="no tiers"):
        place(8, 1, Network((), 8))
    with pytest.raises(InputError, match="needs bandwidth"):
        place(8, 1, Network((Tier("x", 8, 0.0, 1e-6),), 8))


def test_bare_algorithm_on_a_placement() -> None:
    # ring all-reduce of 1 GB over two nodes of 8: of the p - 1 = 15 steps of each sweep,
    # n_(-1) - n_0 = 14 stay in a node and n_0 - n_1 = 1 crosses the leaf;
    # T = 2 (14 a_0 + 1 a_1) + 2 (15/16) S / min(360e9, 8 x 45e9)
    S = 1e9
    t = algorithms.algorithm_time("allreduce", "ring", np.asarray(S), place(16, 1, NET))
    assert f(t) == pytest.approx(2 * (14 * 3e-6 + 5e-6) + 2 * 15 / 16 * S / 360e9)
    with pytest.raises(InputError, match="does not apply"):
        algorithms.algorithm_time("alltoall", "ring", np.asarray(S), place(16, 1, NET))


def test_auto_eligibility_on_a_placement() -> None:
    nvls = Network((Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8, in_network_reduction=True, protocol="nvlink"),
                    IB, SPINE), 8)
    # NVLS (hierarchical) only where the group has more than one member inside the INR tier
    assert bool(nccl.auto_eligible("allreduce", "hierarchical", place(8, 1, nvls), "nccl"))
    assert not bool(nccl.auto_eligible("allreduce", "hierarchical", place(16, 8, nvls), "nccl"))
    assert not bool(nccl.auto_eligible("allreduce", "hierarchical", place(8, 1, NET), "nccl"))
    assert not bool(nccl.auto_eligible("allreduce", "rhd", place(8, 1, NET), "nccl"))
    # family "all": one-shot direct only while the group's block fits the innermost tier
    assert bool(nccl.auto_eligible("allreduce", "direct", place(8, 1, NET), "all"))
    assert not bool(nccl.auto_eligible("allreduce", "direct", place(4, 4, NET), "all"))
    assert bool(nccl.auto_eligible("alltoall", "direct", place(64, 8, NET), "all"))


def test_group_time_of_a_tapered_and_untapered_boundary() -> None:
    # send/recv of 1 GB between GPUs 0 and 256 (2 ranks, stride 256): crosses only the spine.
    # auto -> direct; Simple wins: base 8.4 us + spine hop (8 + 14 - 2.7) us + S / B_spine, S_eff = S
    # (busbw 22.5 GB/s -> 1.125 channels, S_full = 1.125 x 512 x 64 B << S). LL128 (x0.92) and LL (x0.5) are slower.
    S = 1e9
    pair = place(2, 256, NET)
    t = group_time("sendrecv", S, pair)
    assert f(t) == pytest.approx(8.4e-6 + 19.3e-6 + S / 22.5e9)
    assert f(group_time("sendrecv", S, pair.untapered())) == pytest.approx(8.4e-6 + 19.3e-6 + S / 45e9)
    # the network-level entry point is the same computation on a fresh placement
    assert f(collective_time("sendrecv", S, 2, NET, stride=256)) == f(t)


def test_parallel_groups_follow_the_rank_order() -> None:
    # TP innermost, then CP, DP, PP: tp 8, cp 2, dp 4 (ep 2), pp 4 -> stage of 64 GPUs, 256 in the pipeline.
    # Experts use Megatron-Core's own grid over the stage (etp-ep-edp, cp folded in; MoE parallel folding):
    # EP stride etp = tp = 8, expert-DP 8 x 2 x 4 / (8 x 2) = 4 replicas at stride etp ep = 16 (before folding
    # was modelled: EP inside DP at stride tp cp = 16, 2 expert replicas at stride 32)
    g = parallel_groups(NET, tp=np.asarray(8), cp=np.asarray(2), dp=np.asarray(4), ep=np.asarray(2),
                        pp=np.asarray(4))
    rows = {"tensor": g.tensor, "context": g.context, "expert": g.expert, "dp dense": g.data.dense,
            "dp expert": g.data.expert, "pipeline": g.pipeline}
    got = {k: (f(v.p), f(v.stride), int(v.tier)) for k, v in rows.items()}
    assert got == {"tensor": (8, 1, 0), "context": (2, 8, 1), "expert": (2, 8, 1), "dp dense": (4, 16, 1),
                   "dp expert": (4, 16, 1), "pipeline": (2, 128, 1)}
    assert f(g.stage) == 64
    inner, outer = g.data_split(np.asarray(2.0))  # hier:2: pairs of adjacent replicas, then across the pairs
    assert (f(inner.dense.p), f(inner.dense.stride)) == (2, 16)
    assert (f(outer.dense.p), f(outer.dense.stride)) == (2, 32)
    assert g.tensor is g.tensor  # placed once, then reused
    # eight stages of 64 GPUs span two leaves: the boundary pair crosses the spine
    assert int(parallel_groups(NET, tp=8, cp=2, dp=4, ep=2, pp=8).pipeline.tier) == 2


@pytest.mark.parametrize(("sync", "expected"), [("bsp", 6), ("hier:2", 8)])
def test_step_places_each_group_once_and_copies_no_network(monkeypatch: pytest.MonkeyPatch, sync: str,
                                                           expected: int) -> None:
    """One evaluation places each parallel group once (bsp: TP, CP pair, EP, PP pair, DP dense and expert;
    hier:2 puts the DP pair in and across groups instead of the whole DP group) however many collectives
    are priced on them, and builds no Network."""
    job = build_job(load_cluster("dgx-h100"), load_workload("mixtral-8x7b"), TrainingSpec(global_batch=64))
    g = grid_from_arrays(gpus=64, dp=4, tp=2, pp=4, cp=2, ep=2, micro_batch=1, global_batch=64, zero=3,
                         algorithm=np.array([0, 1]))
    calls = {"place": 0, "network": 0, "collectives": 0}
    real_place, real_init = placement.place, Network.__init__
    real_group_time = model_parallel_comm.coll.priced_group_time

    def counting_place(*a: Any, **k: Any) -> Any:
        calls["place"] += 1
        return real_place(*a, **k)

    def counting_init(self: Any, *a: Any, **k: Any) -> None:
        calls["network"] += 1
        real_init(self, *a, **k)

    def counting_group_time(*a: Any, **k: Any) -> Any:
        calls["collectives"] += 1
        return real_group_time(*a, **k)

    monkeypatch.setattr(placement, "place", counting_place)
    monkeypatch.setattr(Network, "__init__", counting_init)
    # every collective is priced through priced_group_time (group_time wraps it; nvls27)
    monkeypatch.setattr(model_parallel_comm.coll, "priced_group_time", counting_group_time)
    res = step.evaluate(job, g, sync=sync)
    assert np.all(np.isfinite(res.step_time))
    assert calls["place"] == expected
    assert calls["network"] == 0
    assert calls["collectives"] > 2 * expected  # many collectives share each placement
