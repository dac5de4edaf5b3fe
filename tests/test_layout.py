"""Rank orders (choices.Layout) against the ranks written out one by one.

For small jobs on a made-up 3-tier network (nodes of 4 GPUs, leaves of 16), every rank gets its
(tp, cp, dp, pp) indices from the order's mixed-radix numbering written out rank by rank; each
group's members are listed and the nodes and leaves they touch are counted directly. The engine's
placement (group strides from :func:`rank_strides`, then :func:`place`) must agree. Then, on a
real cluster with a slow spine: PP inside DP keeps a stage boundary on the leaf tier (priced as a
pipeline that fits in one leaf) and moves the DP all-reduce onto the spine.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scalemodel.choices import Layout
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import distinct_layout, parallel_groups, place
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.step import Infeasible, _stage, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

NODE, LEAF = 4, 16
NET = Network(tiers=(Tier("node", NODE, 100e9, 1e-6), Tier("leaf", LEAF, 25e9, 3e-6),
                     Tier("spine", 4096, 10e9, 5e-6)), gpus_per_node=NODE)
DIMS = ("tp", "cp", "dp", "pp")


def _numbering(sizes: dict[str, int], order: tuple[str, ...]) -> dict[tuple[int, ...], int]:
    """(tp, cp, dp, pp) indices -> rank, counting ranks up with the order's first dimension fastest."""
    outer_first = list(reversed(order))
    out = {}
    for rank, idx in enumerate(itertools.product(*(range(sizes[d]) for d in outer_first))):
        at = dict(zip(outer_first, idx, strict=True))
        out[tuple(at[d] for d in DIMS)] = rank
    return out


def _groups(sizes: dict[str, int], order: tuple[str, ...], dim: str, ep: int = 1) -> list[list[int]]:
    """Every group of dimension ``dim`` as its ranks in group order (``ep``: the EP groups, the
    innermost ep replicas of each DP group)."""
    ranks = _numbering(sizes, order)
    k = DIMS.index(dim)
    groups: dict[tuple[int, ...], list[int]] = {}
    for idx, r in sorted(ranks.items(), key=lambda kv: kv[0][k]):
        key = idx[:k] + idx[k + 1:]
        if ep > 1:
            key = (*key, idx[k] // ep)
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def _tier(a: int, b: int) -> int:
    """The outermost tier a message between GPUs a and b crosses."""
    if a // NODE == b // NODE:
        return 0
    return 1 if a // LEAF == b // LEAF else 2


CASES = [dict(tp=2, cp=1, dp=4, pp=2), dict(tp=1, cp=2, dp=2, pp=4), dict(tp=2, cp=2, dp=2, pp=2),
         dict(tp=4, cp=1, dp=2, pp=4), dict(tp=1, cp=1, dp=8, pp=4), dict(tp=2, cp=1, dp=2, pp=8)]


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("sizes", CASES)
def test_groups_touch_the_domains_the_ranks_say(layout, sizes):
    groups = parallel_groups(NET, layout=int(layout), ep=1, **sizes)
    placed = {"tp": groups.tensor, "dp": groups.data.dense,
              "cp": place(sizes["cp"], groups.strides["cp"], NET),
              "pp": place(sizes["pp"], groups.strides["pp"], NET)}
    for dim, pl in placed.items():
        members = _groups(sizes, layout.dims, dim)
        assert len(members) * sizes[dim] == np.prod(list(sizes.values()))
        nodes = {len({r // NODE for r in g}) for g in members}
        leaves = {len({r // LEAF for r in g}) for g in members}
        per_node = {max(sum(1 for r in g if r // NODE == n) for n in {r // NODE for r in g}) for g in members}
        assert nodes == {int(pl.domains(0))}, (dim, layout)
        assert leaves == {int(pl.domains(1))}, (dim, layout)
        assert per_node == {int(pl.c[0])}, (dim, layout)
        # the outermost tier any two members of a group cross
        worst = max(_tier(a, b) for g in members for a in g for b in g)
        if sizes[dim] > 1:
            assert worst == int(pl.tier), (dim, layout)
    # the pipeline's slowest boundary: the outermost tier any two neighbouring stages cross
    stages = _groups(sizes, layout.dims, "pp")
    worst = max(_tier(a, b) for g in stages for a, b in itertools.pairwise(g))
    assert int(groups.pipeline.tier) == worst
    # the CP ring's neighbours
    rings = _groups(sizes, layout.dims, "cp")
    if sizes["cp"] > 1:
        assert int(groups.context.tier) == max(_tier(a, b) for g in rings for a, b in itertools.pairwise(g))


@pytest.mark.parametrize("layout", list(Layout))
def test_expert_groups_are_the_innermost_replicas(layout):
    sizes = dict(tp=2, cp=1, dp=8, pp=1)
    ep = 4
    groups = parallel_groups(NET, layout=int(layout), ep=ep, **sizes)
    members = _groups(sizes, layout.dims, "dp", ep=ep)
    assert all(len(g) == ep for g in members)
    assert {len({r // NODE for r in g}) for g in members} == {int(groups.expert.domains(0))}
    assert {len({r // LEAF for r in g}) for g in members} == {int(groups.expert.domains(1))}
    assert int(groups.expert.tier) == max(_tier(a, b) for g in members for a in g for b in g)


def test_orders_that_number_alike_are_one_candidate():
    for sizes in [*CASES, dict(tp=2, cp=2, dp=1, pp=4), dict(tp=2, cp=1, dp=4, pp=1)]:
        written = {m: _numbering(sizes, m.dims) for m in Layout}
        for m in Layout:
            expect = all(written[m] != written[e] for e in Layout if e < m)
            assert bool(distinct_layout(int(m), **sizes)) == expect, (sizes, m)


def test_labels_and_aliases():
    assert Layout.parse("tp-cp-ep-dp-pp") is Layout.TP_CP_DP_PP  # Megatron-LM's default order string
    assert Layout.parse("TP-CP-EP-PP-DP") is Layout.TP_CP_PP_DP  # --use-tp-pp-dp-mapping
    assert StrategySpec(layout="tp-pp-dp").layout == "tp-cp-pp-dp"
    with pytest.raises(InputError):
        Layout.parse("pp-dp-tp")


# --------------------------------------------------------------------------------------------
# priced: PP inside DP on a cluster whose spine is slow

SETS = ["tiers.ib-leaf.span=32", "tiers.ib-spine.bandwidth=50Gbps"]  # leaves of 32 GPUs, a spine at 1/4 rate


def _evaluate(gpus: int, layout: Layout, *, tp: int = 8, pp: int = 4):
    cl = load_cluster("dgx-a100", SETS)
    wl = load_workload("gpt3-175b", ["layers=16"])
    job = build_job(cl, wl, TrainingSpec(global_batch=64))
    dp = gpus // (tp * pp)
    g = grid_from_arrays(gpus=gpus, dp=dp, tp=tp, pp=pp, micro_batch=1, global_batch=64, layout=int(layout))
    groups = parallel_groups(job.network, tp=tp, cp=1, dp=dp, ep=1, pp=pp, layout=int(layout))
    return evaluate(job, g), groups, [t.name for t in cl.tiers]


def test_pp_inside_dp_keeps_the_pipeline_in_the_leaf_and_puts_dp_on_the_spine():
    outer, g_outer, names = _evaluate(128, Layout.TP_CP_DP_PP)
    inner, g_inner, _ = _evaluate(128, Layout.TP_CP_PP_DP)
    leaf, spine = names.index("ib-leaf"), names.index("ib-spine")
    # 128 GPUs = 4 leaves of 32: a pipeline of 4 stages of 8 GPUs is one leaf with PP inside DP
    assert int(g_outer.pipeline.tier) == spine and int(g_inner.pipeline.tier) == leaf
    assert int(g_outer.data.dense.tier) == leaf and int(g_inner.data.dense.tier) == spine
    # a boundary send with PP inside DP costs what it costs in a job that is one pipeline in one leaf
    alone, g_alone, _ = _evaluate(32, Layout.TP_CP_DP_PP)
    assert int(g_alone.pipeline.tier) == leaf

    def per_mb(res):
        return float(res.breakdown["pp_comm"].ravel()[0] / res.microbatches.ravel()[0])

    assert per_mb(inner) == pytest.approx(per_mb(alone), rel=1e-12)
    assert per_mb(inner) < per_mb(outer)  # off the slow spine
    assert float(inner.breakdown["dp_comm"].ravel()[0]) > float(outer.breakdown["dp_comm"].ravel()[0])
    # the layout moves no rank's compute; it moves which rank paces (the step's compute is that rank's): with the
    # pipeline in the leaf the last (its logits), over the spine a middle rank, whose second boundary's exchange
    # there outweighs the logits that the last rank, on one boundary, runs instead (step._end_rank, bubble37)
    cl, wl = load_cluster("dgx-a100", SETS), load_workload("gpt3-175b", ["layers=16"])
    job = build_job(cl, wl, TrainingSpec(global_batch=64))
    m = float(inner.microbatches.ravel()[0])
    own = {}
    for layout in (Layout.TP_CP_DP_PP, Layout.TP_CP_PP_DP):
        g = grid_from_arrays(gpus=128, dp=4, tp=8, pp=4, micro_batch=1, global_batch=64, layout=int(layout))
        groups = parallel_groups(job.network, tp=8, cp=1, dp=4, ep=1, pp=4, layout=int(layout))
        own[layout] = [float(np.asarray(_stage(job, g, groups, np.asarray([4.0]), logits).busy["total"]).ravel()[0])
                       for logits in (False, True)]
    assert own[Layout.TP_CP_DP_PP] == own[Layout.TP_CP_PP_DP]
    middle, last = own[Layout.TP_CP_PP_DP]
    assert float(inner.breakdown["compute"].ravel()[0]) == pytest.approx(m * last, rel=1e-12)
    assert float(outer.breakdown["compute"].ravel()[0]) == pytest.approx(m * middle, rel=1e-12)


def test_pp_inside_dp_with_expert_parallelism_is_infeasible():
    cl = load_cluster("dgx-a100", [])
    wl = load_workload("mixtral-8x7b", [])
    job = build_job(cl, wl, TrainingSpec(global_batch=64))
    for layout, expect in ((Layout.TP_CP_DP_PP, 0), (Layout.TP_CP_PP_DP, int(Infeasible.LAYOUT_INVALID))):
        # sequence_parallel: Megatron-Core trains MoE at tp 2 only with it (docs/model.md#moe-sp-required)
        g = grid_from_arrays(gpus=64, dp=8, tp=2, pp=4, ep=8, micro_batch=1, global_batch=64, layout=int(layout),
                             sequence_parallel=True)
        reason = int(evaluate(job, g).reason.ravel()[0])
        assert (reason == int(Infeasible.LAYOUT_INVALID)) == (expect != 0)
