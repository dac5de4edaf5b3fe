"""A ring all-reduce on a TPU torus uses every dimension's links at once, and NCCL's protocol layer stays off TPUs.

(1) jax-ml/scaling-book@0819a7d8 sharding.md L337-345: a collective over several mesh axes "increases the available
bandwidth by a factor of n_axes", ``T = V / (W_ICI n_axes)`` with ``W_ICI`` one axis's bidirectional bandwidth. The
schedule that reaches it: the data in ``n`` shares, share ``j`` running bidirectional dimension-ordered rings in the
order ``j, j+1, ...`` (mod n), so every phase has every dimension busy (docs/model.md#torus). The simulation below
moves real numbers chunk by chunk on each directed link and counts the bytes per link per step; the model's
:func:`scalemodel.cost.topology.torus_allreduce` must equal its time. Before tpucoll30 the whole-torus ring ran one
dimension at a time (2 of a node's 4 links busy), twice the simulated time on a square 2D torus.

(2) TPUs run XLA's collectives, not NCCL: no LL / LL128 / Simple lines, base latencies or channel ramp on a network
with an ICI tier (nccl.runs_nccl), so a named algorithm there costs its bare alpha-beta form.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scalemodel.cost import algorithms, collectives, nccl
from scalemodel.cost import topology as T
from scalemodel.cost.placement import place
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster

Link = tuple[tuple[int, ...], int, int]  # (source node, dimension, direction)


def _simulate(dims: tuple[int, ...], S: float, alpha: float, b_link: float
              ) -> tuple[float, float, list[dict[Link, float]]]:
    """Rotated-share torus all-reduce, step by step: ``(reduce-scatter time, all-reduce time, bytes per directed
    link for every step)``. A share's ring on one dimension uses that dimension's links only; shares in one phase
    are on distinct dimensions (checked: no link carries two shares in a step), so a phase lasts as long as its
    slowest share, each share step ``alpha + (its busiest link's bytes) / b_link``."""
    rng = np.random.default_rng(0)
    n = len(dims)
    nodes = list(itertools.product(*[range(d) for d in dims]))
    n_el = 2 * n * int(np.prod(dims)) * 6
    elem = S / n_el
    data = {v: rng.integers(-50, 50, n_el).astype(float) for v in nodes}
    total = sum(data.values())
    shares = np.array_split(np.arange(n_el), n)
    own = [{v: shares[j] for v in nodes} for j in range(n)]
    order = [[(j + t) % n for t in range(n)] for j in range(n)]
    steps: list[dict[Link, float]] = []
    hist: list[list[dict]] = [[{} for _ in range(n)] for _ in range(n)]  # hist[j][t][node] = (parts)

    def neighbour(v: tuple[int, ...], k: int, direction: int) -> tuple[int, ...]:
        return tuple((x + direction) % dims[k] if i == k else x for i, x in enumerate(v))

    def run_phase(t: int, gather: bool) -> float:
        nonlocal data
        times = []
        phase_steps = [dict() for _ in range(max(dims[order[j][t]] for j in range(n)) - 1)]
        for j in range(n):
            k = order[j][t]
            d = dims[k]
            if not gather:
                for v in nodes:
                    half = len(own[j][v]) // 2
                    hist[j][t][v] = {+1: np.array_split(own[j][v][:half], d), -1: np.array_split(own[j][v][half:], d)}
            parts = hist[j][t]
            share_t = 0.0
            for s in range(d - 1):
                new = {v: x.copy() for v, x in data.items()}
                busy: dict[Link, float] = {}
                for v in nodes:
                    for direction in (+1, -1):
                        c = (v[k] - direction * s) if not gather else (v[k] + direction - direction * s)
                        pos = parts[v][direction][c % d]
                        dst = neighbour(v, k, direction)
                        if gather:
                            new[dst][pos] = data[v][pos]
                        else:
                            new[dst][pos] += data[v][pos]
                        busy[(v, k, direction)] = busy.get((v, k, direction), 0.0) + len(pos) * elem
                data = new
                share_t += alpha + max(busy.values()) / b_link
                assert not set(busy) & set(phase_steps[s])  # shares of one phase never share a link
                phase_steps[s].update(busy)
            if not gather:
                own[j] = {v: np.concatenate([parts[v][+1][(v[k] + 1) % d], parts[v][-1][(v[k] - 1) % d]])
                          for v in nodes}
            times.append(share_t)
        steps.extend(phase_steps)
        return max(times)

    t_rs = sum(run_phase(t, gather=False) for t in range(n))
    for j in range(n):  # after the reduce-scatter: disjoint, fully reduced shards covering the vector
        assert np.array_equal(np.sort(np.concatenate([own[j][v] for v in nodes])), shares[j])
        for v in nodes:
            assert np.array_equal(data[v][own[j][v]], total[own[j][v]])
    t_ar = t_rs + sum(run_phase(t, gather=True) for t in reversed(range(n)))
    for v in nodes:
        assert np.array_equal(data[v], total)
    return t_rs, t_ar, steps


def test_a_4x4_torus_all_reduce_keeps_all_four_links_busy_in_both_directions() -> None:
    """By hand on 4 x 4, S bytes: two shares of S/2, each cut into two direction halves of S/4 and 4 chunks of S/16;
    phase 1 (share 0 along X, share 1 along Y) sends S/16 on every one of the 16 x 4 directed links in each of its
    3 steps, phase 2 S/64 (the shard S/8 in 8 chunks), and the all-gather the same mirrored: 12 steps, 64 links
    each, T = 12 alpha + 2 x 3 x (S/16 + S/64) / B_link = 12 alpha + 2 (15/16) S / (4 B_link)."""
    S, a, b = 2.0**26, 1e-6, 40e9
    t_rs, t_ar, steps = _simulate((4, 4), S, a, b)
    assert len(steps) == 12
    expect = [S / 16] * 3 + [S / 64] * 3 + [S / 64] * 3 + [S / 16] * 3
    for busy, want in zip(steps, expect, strict=True):
        assert len(busy) == 64
        assert set(busy.values()) == {want}
    hand = 12 * a + 2 * (15 / 16) * S / (4 * b)
    assert t_ar == pytest.approx(hand, rel=1e-12)
    assert float(T.torus_allreduce(S, (4, 4), a, b)) == pytest.approx(hand, rel=1e-12)
    assert float(T.torus_allreduce(S, (4, 4), a, b, op="reducescatter")) == pytest.approx(t_rs, rel=1e-12)
    # the injection floor (a node's 2 (p-1)/p S over its 4 links) is met: no ring form on this torus does better
    assert hand - 12 * a == pytest.approx(2 * 15 / 16 * S / (4 * b))


@pytest.mark.parametrize("dims", [(4, 3), (3, 3, 3), (5,)])
def test_the_torus_form_is_the_simulated_rotated_schedule(dims: tuple[int, ...]) -> None:
    S, a, b = 3.0e8, 0.75e-6, 40e9
    t_rs, t_ar, _ = _simulate(dims, S, a, b)
    assert float(T.torus_allreduce(S, dims, a, b)) == pytest.approx(t_ar, rel=1e-9)
    assert float(T.torus_allreduce(S, dims, a, b, op="reducescatter")) == pytest.approx(t_rs, rel=1e-9)
    assert float(T.torus_allreduce(S, dims, a, b, op="allgather")) == pytest.approx(t_ar - t_rs, rel=1e-9)


def _named(cluster: str, gpus: int, algorithm: str, S: float = 16e9) -> float:
    net = build_network(load_cluster(cluster))
    return float(collectives.collective_time("allreduce", S, gpus, net, algorithm=algorithm))


def test_ring_on_a_v5e_slice_and_over_two_slices_agree() -> None:
    """16 GB all-reduce, tpu-v5e-multislice (ICI 200 GB/s a chip over 4 links, efficiency 0.80 -> B_link = 40e9;
    hop 0.75 us): one slice 2 x 2 x 15 alpha + 2 (255/256) S / (4 B_link) = 0.199264 s (0.398 s before, one
    dimension at a time); two slices add the DCN hop, so they cost at least that; neither gets NCCL's protocol
    layer (0.2048 s before on two slices, 0.2004 s bare)."""
    one = _named("tpu-v5e-multislice", 256, "ring")
    assert one == pytest.approx(60 * 0.75e-6 + 2 * 255 / 256 * 16e9 / (4 * 40e9), rel=1e-12)
    two = _named("tpu-v5e-multislice", 512, "ring")
    assert one <= two < 1.01 * one


@pytest.mark.parametrize("cluster,gpus", [("tpu-v5e-multislice", 512), ("tpu-v5e-multislice", 256),
                                          ("tpu-v6e-pod", 16), ("tpu-v5p-multislice", 64)])
@pytest.mark.parametrize("algorithm", ["ring", "tree", "rhd", "hierarchical"])
def test_no_nccl_protocol_layer_on_tpu_networks(cluster: str, gpus: int, algorithm: str) -> None:
    net = build_network(load_cluster(cluster))
    assert not nccl.runs_nccl(net)
    S = np.array([1e3, 1e6, 16e9])
    got = collectives.collective_time("allreduce", S, gpus, net, algorithm=algorithm)
    bare = algorithms.algorithm_time("allreduce", algorithm, S, place(gpus, 1, net))
    assert np.array_equal(got, bare)


def test_gpu_networks_keep_the_protocol_layer() -> None:
    """On an NVLink cluster the named ring still carries NCCL's base latency (its 1 KB all-reduce is no cheaper
    than the LL line's base), unlike the bare form."""
    net = build_network(load_cluster("dgx-h100"))
    assert nccl.runs_nccl(net)
    got = float(collectives.collective_time("allreduce", 1e3, 16, net, algorithm="ring"))
    bare = float(algorithms.algorithm_time("allreduce", "ring", np.array(1e3), place(16, 1, net)))
    assert got >= bare + min(nccl.BASE_LATENCY.values())
