"""ZeRO-1/2's reduce-scatter + all-gather on ``rhd`` is Rabenseifner's all-reduce cut in two (hypothesis).

Rabenseifner's all-reduce is a recursive-halving reduce-scatter (partners 1, 2, .., p'/2 apart, blocks S/2,
S/4, ..) followed by a recursive-doubling all-gather in the reverse partner order (Thakur, Rabenseifner & Gropp,
IJHPCA 19(1) 2005 §4.4; MPICH allreduce_intra_reduce_scatter_allgather.c). Run as two separate collectives on
the same bytes, the two phases move the same bytes between the same partners at every step, so on any fabric,
group size, placement and message size their costs add up to the all-reduce's, non-power-of-two pre/post steps
and reduction arithmetic included; the engine's ZeRO-1/2 pair with ``--algo rhd`` is exactly that sum
(tests/test_fabric_sim.py counts the bytes per link and step on small tapered fabrics).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.cost import algorithms as A
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fabrics(draw):  # type: ignore[no-untyped-def]
    """1-3 tiers of growing span (node, leaf, spine), any bandwidths, latencies, efficiencies and tapers."""
    n = draw(st.integers(1, 3))
    spans = [draw(st.sampled_from((2, 4, 8, 16)))]
    for _ in range(n - 1):
        spans.append(spans[-1] * draw(st.sampled_from((2, 3, 4, 8, 32))))
    tiers = tuple(
        Tier(f"t{i}", span, draw(st.floats(1e9, 1e12)), draw(st.floats(0.0, 2e-5)),
             efficiency=draw(st.floats(0.3, 1.0)), oversubscription=draw(st.sampled_from((1.0, 1.5, 2.0, 3.0, 7.0))))
        for i, span in enumerate(spans))
    return Network(tiers, spans[0])


@FAST
@given(fabrics(), st.integers(2, 600), st.sampled_from((1, 2, 3, 4, 8)), st.floats(1.0, 1e10),
       st.sampled_from((0.0, 1e-12, 3e-11)))
def test_rhd_reducescatter_plus_allgather_is_the_rhd_allreduce(net, ranks, stride, size, gamma) -> None:  # type: ignore[no-untyped-def]
    ranks = min(ranks, max(2, net.tiers[-1].span // stride))
    pl = place(ranks, stride, net)
    S = np.asarray(size)
    rs = float(A.algorithm_time("reducescatter", "rhd", S, pl, gamma))
    ag = float(A.algorithm_time("allgather", "rhd", S, pl, gamma))
    ar = float(A.algorithm_time("allreduce", "rhd", S, pl, gamma))
    assert rs + ag == pytest.approx(ar, rel=1e-12)
    # the reduce-scatter carries all the arithmetic: the all-gather is its mirror without gamma
    assert ag == float(A.algorithm_time("allgather", "rhd", S, pl, 0.0))
    assert rs - float(A.algorithm_time("reducescatter", "rhd", S, pl, 0.0)) == pytest.approx(
        ar - float(A.algorithm_time("allreduce", "rhd", S, pl, 0.0)), rel=1e-9, abs=1e-15)
    # the stand-alone recursive-doubling all-gather sends its largest blocks to the farthest partners: never
    # cheaper than the mirror of Rabenseifner's reduce-scatter where no outer tier is faster than an inner one
    rate = [t.bandwidth * t.efficiency / t.oversubscription for t in net.tiers]
    if all(a >= b for a, b in zip(rate[:-1], rate[1:], strict=False)) and ranks & (ranks - 1) == 0:
        assert float(A.algorithm_time("allgather", "rd", S, pl)) >= ag * (1 - 1e-12)
