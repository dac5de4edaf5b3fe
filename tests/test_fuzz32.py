"""Hostile input and numbers, round 32 (fuzz32): the closing items of round 31 and what this round's fuzzing found.
The CLI contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was
wrong and what is allowed, nothing on stdout, no input changed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.cost import algorithms
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine import step
from scalemodel.engine.step import refuse_non_finite
from scalemodel.errors import InputError

RUN = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "64"]


# --- (1) every part of a step is checked, not only their sum --------------------------------------------------------
# fix31's refuse_non_finite read the step total: a negative part that a larger positive part cancelled passed.

def test_a_negative_part_under_a_positive_total_is_refused() -> None:
    parts = {"compute": np.array([2.0, 3.0]), "imbalance": np.array([0.0, -0.5]), "dp_comm": np.zeros(2)}
    with pytest.raises(InputError, match=r"^result: the step model's imbalance is -0\.5 \(not a finite number >= 0\)"
                                         r" for 1 of 2 candidates"):
        refuse_non_finite(parts, sum(parts.values()))  # the total, [2.0, 2.5], is finite and >= 0
    refuse_non_finite({"a": np.array([0.0, 1.0]), "b": np.array([5e-324, 0.0])}, np.array([0.0, 1.0]))  # all fine


def test_predict_refuses_a_negative_part_its_total_hides(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load-imbalance wait of -1 ms (a defect upstream, simulated) on a step of seconds: predict printed a step
    with a negative part and exit 0; now the part is named."""
    monkeypatch.setattr(step, "_imbalance", lambda *a, **k: np.asarray(-1e-3))
    r = cli("predict", *RUN)
    assert r.code == 2 and r.out == "", (r.code, r.out[-300:])
    assert r.err.startswith("error: result: the step model's imbalance time is -0.001 (not a finite number >= 0)")
    assert len(r.err.strip().splitlines()) == 1


# --- (2) a tier's link rate that a comparison ``b < bmin`` would skip ----------------------------------------------
# The ring's hops, the trees and Placement.bottleneck take the slowest crossed tier by ``b < bmin``: a NaN rate is
# never smaller, an infinite one never is either, so the group was priced as if it did not cross that tier.

NVL = Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8)
IB = Tier("ib", 256, 12.5e9, 5e-6, efficiency=0.9)


def test_a_nan_link_rate_from_a_protocol_is_refused_not_skipped() -> None:
    pl = place(64, 1, Network((NVL, IB), 8))
    S = np.array(1e9)
    ring = float(algorithms.ring_time("allreduce", S, pl))
    # by hand: 64 ranks, 8 a node: the ring leaves each node on 8 channels, 8 x 12.5e9 x 0.9 = 90e9 B/s, below
    # NVLink's 360e9; 2 (p-1)/p S / 90e9 plus two passes over 56 NVLink hops (3 us) and 7 IB hops (5 us)
    assert ring == pytest.approx(2 * 63 / 64 * 1e9 / 90e9 + 2 * (56 * 3e-6 + 7 * 5e-6), rel=1e-6)
    with pytest.raises(InputError, match=r"^result: tier 'ib'.s link as a collective protocol sees it has latency "
                                         r"5e-06 s and rate nan B/s"):
        pl.relinked(pl.alpha, np.array([450e9, np.nan]))


@pytest.mark.parametrize("field", ["efficiency", "oversubscription"])
def test_an_infinite_tier_figure_is_refused(field: str) -> None:
    """efficiency inf made the rate inf (never below bmin: the tier vanished); oversubscription inf made it 0."""
    bad = Network((NVL, Tier("ib", 256, 12.5e9, 5e-6, **{field: float("inf")})), 8)
    with pytest.raises(InputError, match=r"^tiers\.ib: tier 'ib' needs bandwidth > 0, efficiency > 0"):
        place(64, 1, bad)
