"""The collective pricing reports the NVLS all-reduce time its auto choice weighed (nccl.Priced.hierarchical), which the
contention model's NVLS test (model_parallel_comm.nvls_allreduce, docs/model.md#contention) reads instead of pricing
NVLS a second time; and auto on NCCL's family prices NCCL's in-network all-reduce for "hierarchical", never the
alpha-beta namesake it could not pick. Expected values by hand (tuning.cc v2.30.7's NVLS formula, as
tests/test_inr.py) or from best_algorithm, which prices every algorithm on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_inr import h100_like

from scalemodel.choices import Algorithm
from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.algorithms import ALGO_FUNCS
from scalemodel.cost.placement import place
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster


def test_auto_reports_the_nvls_time_it_weighed_by_hand() -> None:
    # 8 ranks in one node, 8 GiB: NVLS busBw = 2 x 0.85 x 369 GB/s x 8/9 x 7/8, chunk fill 2 x 128 x 128 KiB,
    # T = 26.4 us + (S + fill) x 2 x 7/8 / busBw (tests/test_inr.py: NCCL's 25 us read on the 2 us NVLink hop, 2 + 25
    # - 0.6, coll34); NVLS beats the ring there, so auto's time is it
    S = 8 * 2.0**30
    bus = 2 * 0.85 * 369e9 * (8 / 9) * (7 / 8)
    expect = 26.4e-6 + (S + 2 * 128 * 128 * 1024) * 1.75 / bus
    pl = place(8, 1, h100_like())
    priced = coll.priced_group_time("allreduce", S, pl)
    assert float(priced.hierarchical) == pytest.approx(expect, rel=1e-9)
    assert float(priced.time) == pytest.approx(expect, rel=1e-9)
    assert float(coll.group_time("allreduce", S, pl)) == float(priced.time)


def test_the_report_matches_every_algorithm_priced_on_its_own() -> None:
    # a mixed grid on dgx-h100 (SHARP off): 8 ranks in a node (NVLS), 2 ranks in a node (NVLS applies, the ring is
    # faster at 1 MB), 8 ranks one a node (no in-network reduction: nothing weighed)
    net = build_network(load_cluster("dgx-h100"))
    pl = place(np.array([8.0, 2.0, 8.0]), np.array([1.0, 1.0, 8.0]), net)
    for S in (1e6, 256e6):
        times, names, idx, best = nccl.best_algorithm("allreduce", np.asarray(S), pl)
        priced = coll.priced_group_time("allreduce", S, pl)
        assert np.array_equal(priced.time, best)
        hier = times[names.index("hierarchical")]
        assert np.array_equal(priced.hierarchical[:2], hier[:2])
        assert math.isinf(float(priced.hierarchical[2]))
        # NVLS is what auto took exactly where the reported time is the chosen one
        took = np.asarray(names)[idx] == "hierarchical"
        assert np.array_equal(priced.hierarchical <= priced.time, took)


def test_auto_never_prices_the_alpha_beta_hierarchical_form(monkeypatch: pytest.MonkeyPatch) -> None:
    # before: auto priced algorithm_time("hierarchical") over the whole mixed grid, i.e. the alpha-beta level form on
    # every protocol line too, and kept it only where in-network reduction applies (where that form is not used)
    def refuse(*_: object) -> np.ndarray:
        raise AssertionError("the alpha-beta hierarchical form was priced")
    monkeypatch.setitem(ALGO_FUNCS, "hierarchical", refuse)
    net = build_network(load_cluster("dgx-h100"))
    pl = place(np.array([8.0, 8.0]), np.array([1.0, 8.0]), net)
    t = coll.group_time("allreduce", 64e6, pl)
    assert np.all(np.isfinite(t)) and np.all(t > 0)


def test_nothing_weighed_is_inf() -> None:
    pl = place(8, 1, h100_like())
    assert math.isinf(float(coll.priced_group_time("allreduce", 64e6, pl, algorithm="ring").hierarchical))
    assert math.isinf(float(coll.priced_group_time("allreduce", 64e6, pl, algorithm="hierarchical").hierarchical))
    assert math.isinf(float(coll.priced_group_time("allgather", 64e6, pl).hierarchical))


def test_the_report_carries_the_registration() -> None:
    # 16 ranks over 2 nodes joined by SHARP (NVLS across nodes), registering every call on the IB tier:
    # the NVLS time the choice weighed includes S x 20 s / 256 GB (ofiwg/libfabric#4738), as the chosen time does
    S = 256e6
    once, every = h100_like(sharp=True, transport="ib"), h100_like(sharp=True, transport="ib", reuse=1.0)
    a = coll.priced_group_time("allreduce", S, place(16, 1, once))
    b = coll.priced_group_time("allreduce", S, place(16, 1, every))
    assert float(b.hierarchical - a.hierarchical) == pytest.approx(S * 20.0 / 256e9, rel=1e-9)
    assert float(b.time - a.time) == pytest.approx(S * 20.0 / 256e9, rel=1e-9)


def test_mixed_codes_take_the_nvls_time_from_the_auto_candidates() -> None:
    # one group of 8 in an H100 node, 256 MB: candidates on auto, ring and hierarchical (named)
    net = build_network(load_cluster("dgx-h100"))
    pl = place(8, 1, net)
    codes = np.array([int(Algorithm.AUTO), int(Algorithm.RING), int(Algorithm.HIERARCHICAL)])
    S = np.full(3, 256e6)
    t, hier = mpc._priced("allreduce", S, pl, codes)
    for i, label in enumerate(("auto", "ring", "hierarchical")):
        assert t[i] == float(coll.group_time("allreduce", 256e6, pl, algorithm=label))
    nvls = float(coll.group_time("allreduce", 256e6, pl, algorithm="hierarchical"))
    assert np.all(hier == nvls)
    # auto took NVLS (its time is NVLS's), the named ring runs on the ring's channels, named hierarchical is NVLS
    assert t[0] == nvls
    assert mpc.nvls_allreduce(pl, codes, t, hier).tolist() == [True, False, True]


def test_a_tuner_pick_other_than_nvls_runs_on_the_ring_channels() -> None:
    # aws-p5 with aws-ofi-nccl's p5 region tuner (v1.16.3): 64 ranks at 8 a node, 64 MB: the tuner picks Tree LL128,
    # which NCCL runs on its ring channels, although the model's NVLSTree is faster there (the old test, NVLS time <=
    # the chosen time, called it NVLS); 1024 ranks at 8 a node, 1.5 GB: the tuner picks NVLSTree, which is NVLS.
    # (64 MB, was 1 MB: since coll34 NVLSTree's 6 levels charge the 21.1 us EFA hop, 39.3 us each, and at 1 MB it is
    # no longer the faster)
    net = build_network(load_cluster("aws-p5"))
    for p, S, nvls in ((64, 64e6, False), (1024, 1.5e9, True)):
        pl = place(p, 1, net)
        pick, choices = nccl.tuner_plugin_choice("allreduce", np.asarray(S), pl)
        assert choices[int(pick)][0] == ("hierarchical" if nvls else "tree")
        priced = coll.priced_group_time("allreduce", S, pl)
        if not nvls:  # the in-network all-reduce is the faster, and not what runs
            assert float(nccl.nccl_inr_allreduce_time(np.asarray(S), pl)) < float(priced.time)
        assert bool(mpc.nvls_allreduce(pl, None, priced.time, priced.hierarchical)) is nvls
