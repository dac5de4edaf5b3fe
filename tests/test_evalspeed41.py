"""evalspeed41: the figures a small grid's evaluation derives from the job or the cluster alone are computed once and
shared (placements of equal groups on equal networks, NCCL's search graph, the Tree's hops, the one-shot algorithm's
peers, the shape's attention matrices, MoE layer count and model parameters). Each shared value must be the value a
fresh computation gives, bit for bit, and a value that differs in anything read must not be shared."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import memory, nccl, placement, transformer
from scalemodel.cost.network import Network, Tier
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def _net(leaf_eff: float = 0.9, nic_bw: float = 50e9) -> Network:
    return Network(tiers=(Tier("nvlink", 8, 450e9, 2e-6, 0.8, protocol="nvlink"),
                          Tier("leaf", 256, nic_bw, 5e-6, leaf_eff, protocol="ib", net_overhead=1e-6),
                          Tier("spine", 4096, nic_bw, 8e-6, 0.85, 2.0, protocol="ib", net_overhead=1e-6)),
                   gpus_per_node=8, generation="hopper", host_cpu="intel")


def _bits(x: object) -> bytes:
    a = np.asarray(x, dtype=float)
    return a.tobytes() + str(a.shape).encode()


def _fresh() -> None:
    placement._PLACED.clear()
    nccl._INTER_GRAPHS.clear()
    transformer._attention_matrices.cache_clear()
    transformer._moe_layers.cache_clear()
    memory._model_params.cache_clear()


def test_an_equal_group_on_an_equal_network_is_the_placement_made_before() -> None:
    """Interned by value: an equal network built again (another object) and equal ranks and stride give the same
    placement; one tier's efficiency changed, or another stride, gives another; a grid above PLACE_MEMO_ELEMENTS is
    placed anew each time."""
    _fresh()
    a = placement.place([16.0, 64.0], 8.0, _net())
    assert placement.place(np.array([16, 64]), 8, _net()) is a
    assert placement.place([16.0, 64.0], 8.0, _net(leaf_eff=0.9 * 1.01)) is not a
    assert placement.place([16.0, 64.0], 4.0, _net()) is not a
    big = np.arange(1.0, placement.PLACE_MEMO_ELEMENTS + 2.0)
    assert placement.place(big, 1.0, _net()) is not placement.place(big, 1.0, _net())


@pytest.mark.parametrize("op,algorithm", [("allreduce", "ring"), ("allreduce", "tree"), ("allgather", "ring"),
                                          ("alltoall", "direct"), ("allreduce", "direct"), ("sendrecv", "direct")])
def test_shared_figures_price_as_a_fresh_placement_does(op: str, algorithm: str) -> None:
    """Each algorithm's time on the interned placement, asked twice (its memo filled by the first), equals the time
    on a placement built directly (placement._place: nothing shared), element for element, to the bit."""
    _fresh()
    S = np.array([[1e3], [1e6], [3e8]])
    p, s = np.array([2.0, 8.0, 16.0, 48.0, 512.0]), np.array([1.0, 1.0, 8.0, 2.0, 4.0])
    shared = placement.place(p, s, _net())
    first = nccl.algorithm_time(op, algorithm, S, shared)
    again = nccl.algorithm_time(op, algorithm, S, placement.place(p, s, _net()))
    nccl._INTER_GRAPHS.clear()
    alone = nccl.algorithm_time(op, algorithm, S, placement._place(p, s, _net()))
    assert _bits(first) == _bits(alone) and _bits(again) == _bits(alone)


def test_the_search_graph_is_shared_only_between_equal_inputs() -> None:
    """NCCL's search graph across nodes (nccl._inter_graph) remembered by what it reads: the line rates and counts.
    A tier's efficiency (not read) keeps it, the NIC's line rate (read) gives the one a fresh search gives; the
    arrays are read-only."""
    _fresh()
    p, s = np.array([16.0, 128.0]), np.array([8.0, 1.0])
    n, bw = nccl._inter_graph(placement.place(p, s, _net()))
    assert not n.flags.writeable and not bw.flags.writeable
    n2, _ = nccl._inter_graph(placement.place(p, s, _net(leaf_eff=0.5)))
    assert n2 is n
    n3, bw3 = nccl._inter_graph(placement.place(p, s, _net(nic_bw=25e9)))
    f3, fbw3 = nccl._inter_graph_of(placement._place(p, s, _net(nic_bw=25e9)))
    assert _bits(n3) == _bits(f3) and _bits(bw3) == _bits(fbw3)
    assert float(n3[1]) == 8.0 and float(n[1]) == 8.0 and float(bw3[1]) == 24.0 and float(bw[1]) == 48.0


def test_shape_caches_hand_out_read_only_arrays_and_fresh_lists() -> None:
    """attention_matrices gives a new list each call (a caller may extend it) of arrays no caller can write; the
    MoE layer count is the formula's (every moe_every-th layer after the dense prefix), read-only."""
    _fresh()
    sh = transformer.shape(layers=12, hidden=1024, heads=16, vocab=32000, moe_experts=8, moe_top_k=2,
                           moe_every=2, moe_first_dense=2)
    a, b = transformer.attention_matrices(sh), transformer.attention_matrices(sh)
    assert a is not b and [x[0] for x in a] == [x[0] for x in b] == ["qkv", "q_down", "q_up", "kv_down", "kv_up", "o"]
    qkv = {name: (i, o) for name, i, o, _ in a}["qkv"]
    assert float(qkv[1]) == 3 * 1024  # a d + 2 g d with g = a: 3 h
    with pytest.raises(ValueError):
        qkv[1][...] = 0.0
    moe = sh.moe_layers
    assert float(moe) == 5.0  # floor((12 - 2) / 2)
    with pytest.raises(ValueError):
        moe[...] = 0.0
    assert float(sh.dense_layers) == 7.0


def test_an_evaluation_with_every_cache_warm_equals_one_with_every_cache_cold() -> None:
    """A step evaluated with every cache emptied first equals, to the bit and part by part, the same step evaluated
    again on a job built anew (another network object of equal value, another shape object: the placements shared by
    value) and on the first job (the shape's caches warm too)."""
    def job():  # type: ignore[no-untyped-def]
        return build_job(load_cluster("dgx-h100", []), load_workload("mixtral-8x7b", []), TrainingSpec(global_batch=64))

    first = job()
    g = grid_from_strategy(StrategySpec(tp=2, pp=2, ep=2, zero=1), TrainingSpec(global_batch=64), 64, first)
    _fresh()
    cold = evaluate(first, g)
    for warm in (evaluate(job(), g), evaluate(first, g)):
        assert _bits(cold.step_time) == _bits(warm.step_time)
        for k, v in cold.breakdown.items():
            assert _bits(v) == _bits(warm.breakdown[k]), k


def test_collectives_remembered_in_a_calibration_equal_fresh_ones() -> None:
    """Under nccl.remembering (a calibration's trials) a collective priced again on the interned placement is the
    remembered result, equal to the bit to the one priced with nothing remembered, and a copy: a caller writing into
    it changes neither the memo nor another caller's result. Outside the context nothing is kept."""
    _fresh()
    S = np.array([4e6, 2e8])
    p, s = np.array([16.0, 64.0]), np.array([8.0, 2.0])
    fresh = nccl.priced_collective("allreduce", S, placement._place(p, s, _net()))
    pl = placement.place(p, s, _net())
    assert not any(k[0] == "priced" for k in pl.memo if isinstance(k, tuple))
    with nccl.remembering():
        first = nccl.priced_collective("allreduce", S, pl)
        again = nccl.priced_collective("allreduce", S, placement.place(p, s, _net()))
        assert any(k[0] == "priced" for k in pl.memo if isinstance(k, tuple))
        again.time[...] = -1.0
        third = nccl.priced_collective("allreduce", S, pl)
    assert _bits(first.time) == _bits(fresh.time) == _bits(third.time)
    assert _bits(first.hierarchical) == _bits(fresh.hierarchical)
    assert not nccl._REMEMBERING[0]
