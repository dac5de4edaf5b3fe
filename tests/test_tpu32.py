"""tpu32: broadcast, reduce and Bruck's all-to-all priced on a (sub-)torus group from the links their rank-order
mapping loads (torus31 left them at the switch price), each against an independent step simulation.

The simulation is torus31's (tests/test_torus31.py: ranks in mixed radix, the first dimension fastest, messages
routed dimension by dimension the shorter way round, a step = its longest path's hops x alpha + its busiest directed
link's bytes / B_link); here only the schedules are written, from the algorithms' definitions.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_torus31 import ALPHA, B_LINK, GAMMA, SIZES, TORI, _path, _simulate, _tree_links, _xor_steps

import scalemodel.api as api
from scalemodel.cost import topology as T


def _bruck_steps(S: float, p: int) -> list[list[tuple[int, int, float]]]:
    """Bruck et al. 1997: the block from rank s for rank s + i (mod p) moves 2^k ranks ahead in round k if bit k of
    i is set; a rank sends all the blocks it holds for that round in one message to the rank 2^k ahead."""
    where = {(s, i): s for s in range(p) for i in range(p)}
    steps = []
    k = 0
    while (1 << k) < p:
        held: dict[int, int] = {}
        for (s, i), at in where.items():
            if i >> k & 1:
                held[at] = held.get(at, 0) + 1
                where[(s, i)] = (at + (1 << k)) % p
        steps.append([(r, (r + (1 << k)) % p, n * S / p) for r, n in held.items()])
        k += 1
    assert all(at == (s + i) % p for (s, i), at in where.items())  # every block reached its rank
    return steps


@pytest.mark.parametrize("dims", [*TORI, (4, 3)])
@pytest.mark.parametrize("S", SIZES)
def test_bruck_matches_the_step_simulation(dims: tuple[int, ...], S: float) -> None:
    p = int(np.prod(dims))
    got = float(T.torus_bruck(S, dims, ALPHA, B_LINK))
    assert got == pytest.approx(_simulate(_bruck_steps(S, p), dims), rel=1e-12)


def test_bruck_on_the_v5e_slice_by_hand() -> None:
    """16 x 16: round k's partner is 2^k ranks ahead, delta = 1, 2, 4, 8 hops along x (one more hop into y where x
    wraps), then 1, 2, 4, 8 along y; delta messages of S/2 share the busiest link: 34 hops, 15 S / B_link."""
    S = float(1 << 30)
    assert float(T.torus_bruck(S, (16, 16), ALPHA, B_LINK)) == pytest.approx(34 * ALPHA + 15 * S / B_LINK)


def _scatter_gather_sim(op: str, S: float, dims: tuple[int, ...]) -> float:
    """MPICH's schedules: broadcast = binomial scatter (mask p/2 .. 1, ranks r = 0 mod 2 mask send S mask / p to
    r + mask) + recursive-doubling all-gather (S 2^k / p with r ^ 2^k); reduce = recursive-halving reduce-scatter
    (S / 2^(k+1) with r ^ 2^k, nearest first) + binomial gather (mask p/2 .. 1, ranks [mask, 2 mask) send
    S / (2 mask) to r - mask) (reduce_intra_reduce_scatter_gather.c)."""
    p = int(np.prod(dims))
    L = p.bit_length() - 1
    masks = [p >> (j + 1) for j in range(L)]
    if op == "broadcast":
        scatter = [[(r, r + m, S * m / p) for r in range(0, p, 2 * m)] for m in masks]
        return _simulate(scatter + _xor_steps(p, [S * 2 ** k / p for k in range(L)]), dims)
    gather = [[(r, r - m, S / (2 * m)) for r in range(m, 2 * m)] for m in masks]
    return _simulate(_xor_steps(p, [S / 2 ** (k + 1) for k in range(L)]) + gather, dims) + (p - 1) / p * S * GAMMA


@pytest.mark.parametrize("dims", TORI)
@pytest.mark.parametrize("S", SIZES)
@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_rhd_broadcast_and_reduce_match_the_step_simulation(dims: tuple[int, ...], S: float, op: str) -> None:
    got = T.torus_scatter_gather(S, dims, ALPHA, B_LINK, GAMMA, op=op)
    assert got is not None
    assert float(got) == pytest.approx(_scatter_gather_sim(op, S, dims), rel=1e-12)


def test_rhd_broadcast_and_reduce_have_no_form_off_powers_of_two() -> None:
    assert T.torus_scatter_gather(1e6, (4, 3), ALPHA, B_LINK, op="broadcast") is None


def _chain_links(dims: tuple[int, ...], reverse: bool) -> list[tuple[tuple[int, ...], int, int]]:
    """NCCL's ring broadcast 0 -> 1 -> .. -> p-1, its reduce (``reverse``) 1 -> .. -> p-1 -> 0, both along
    ring->next (NVIDIA/nccl@5067397c src/device/broadcast.h L44-53, reduce.h L34-50; review32c: p-1 -> .. -> 0
    before)."""
    p = int(np.prod(dims))
    edges = [(r, r + 1) for r in range(p - 1)] if not reverse else [(r, r + 1) for r in range(1, p - 1)] + [(p - 1, 0)]
    return [link for a, b in edges for link in _path(a, b, dims)]


@pytest.mark.parametrize("dims", TORI)
@pytest.mark.parametrize("reverse", [False, True])
def test_chain_loads_are_the_routed_chain(dims: tuple[int, ...], reverse: bool) -> None:
    links = _chain_links(dims, reverse)
    assert T.chain_loads(dims, reverse) == (len(links), max(links.count(x) for x in set(links)))


@pytest.mark.parametrize("dims", TORI)
@pytest.mark.parametrize("sweep", ["down", "up"])
def test_tree_sweep_loads_match_an_edge_by_edge_count(dims: tuple[int, ...], sweep: str) -> None:
    load, depth = _tree_links(dims, sweep)
    assert T.tree_loads(dims, sweep) == (max(load.values()), depth)


def _pipelined(path: int, busiest: int, V: float) -> float:
    """Best integer chunk count k of V bytes down a store-and-forward path of ``path`` hops whose busiest link passes
    ``busiest`` chunks a step: ``path (alpha + V/(k B)) + (k - 1)(alpha + busiest V/(k B))``."""
    ks = np.arange(1, 200001, dtype=float)
    t = path * (ALPHA + V / (ks * B_LINK)) + (ks - 1) * (ALPHA + busiest * V / (ks * B_LINK))
    return float(t.min())


def _table(op: str, S: float, ranks: int = 256) -> dict[str, float]:
    row = api.collective("tpu-v5e-pod", op, S, ranks).rows[0]
    return {a["algorithm"]: a["time_s"] for a in row["algorithms"]}


@pytest.mark.parametrize("S", SIZES)
@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_ring_and_tree_times_are_the_pipelined_schedules(S: float, op: str) -> None:
    """16 x 16 v5e: the chain (270 hops, the reduce's 271, every link one chain edge) and the two trees (31 hops;
    down sweep 4, up sweep 3 traversals on the busiest link), each against an integer search of the chunk count (the
    model's continuous optimum is at most 0.2 % below it; ``scalemodel collective`` prices no reduction, gamma = 0)."""
    got = _table(op, S)
    links = _chain_links((16, 16), op == "reduce")
    tree, depth = _tree_links((16, 16), "down" if op == "broadcast" else "up")
    want = {"ring": _pipelined(len(links), max(links.count(x) for x in set(links)), S),
            "tree": _pipelined(depth, max(tree.values()), S / 2)}
    for algo, t in want.items():
        assert got[algo] == pytest.approx(t, rel=2e-3)
        assert got[algo] <= t * (1 + 1e-9)


def test_small_broadcast_on_the_v5e_slice_takes_the_tree() -> None:
    """1 KiB over 256 chips: the tree's 31 hops (the switch price assumed 8 one-hop levels, 6.1 us) against rhd's
    2 x 30 and the chain's 270."""
    row = api.collective("tpu-v5e-pod", "broadcast", 1024, 256).rows[0]
    assert row["best"] == "tree"
    assert _table("broadcast", 0.0)["tree"] == pytest.approx(31 * ALPHA, rel=1e-9)


@pytest.mark.parametrize("S", SIZES)
def test_the_collective_table_prices_rhd_and_bruck_on_the_torus(S: float) -> None:
    """``scalemodel collective`` on 256 v5e chips (16 x 16) lists rhd's broadcast / reduce and rd's all-to-all at
    the simulated schedules (before tpu32: their switch prices, 12.0 us and 6.0 us at 1 KiB)."""
    for op in ("broadcast", "reduce"):
        assert _table(op, S)["rhd"] == pytest.approx(_scatter_gather_sim(op, S, (16, 16)) - (
            0.0 if op == "broadcast" else 255 / 256 * S * GAMMA), rel=1e-9)
    assert _table("alltoall", S)["rd"] == pytest.approx(_simulate(_bruck_steps(S, 256), (16, 16)), rel=1e-9)
