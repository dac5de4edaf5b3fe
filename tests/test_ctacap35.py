"""ctacap35: a run's own NCCL CTA caps, read and left unpriced (docs/model.md#contention, "A run's own caps").

NCCL's rule, by hand (NVIDIA/nccl v2.21.5-1 src/graph/connect.cc:468-469, v2.27.7-1 :483-484): the executed count is
``max(min(c0, maxCTAs), minCTAs)``, NCCL_MIN_CTAS / NCCL_MAX_CTAS replacing a communicator's config for every
communicator (init.cc ``envConfigOverride``). The channel list a cap truncates holds the search graph's channels
first (connect.cc:431-443 at v2.21.5-1), so a cap at or above the graph's count keeps every search ring.

These tests hold the counts docs/model.md states for the capped rows' data-parallel groups on 400 Gb/s H100 nodes
(the per-communicator file's dp / dp_cp ``max_ctas`` 8): where the cap binds in NCCL (Cisco's DP 64, 8 and 4 GPUs a
node: 16 -> 8) and where NCCL's own count is already at or under it (2 and 1 GPUs a node: 8 and 4), the graph
bandwidth a cap of 8 keeps under NCCL's rating against chan32's per-CTA reading, and the share the model charges now.
"""

from __future__ import annotations

import pytest

from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine.job import collective_share
from scalemodel.specs import load_accelerator

CAP = 8  # conf/nccl/custom_communicator_cta.yaml dp / dp_cp max_ctas (mlcommons training_results v4.0 - v5.1)


def _h100_nodes() -> Network:
    # 8 H100 a node on NVLink (450 GB/s a GPU), one 400 Gb/s NIC a GPU (as tests/test_chan27.py)
    return Network((Tier("nvlink", 8, 450e9, 2e-6, efficiency=0.82, protocol="nvlink"),
                    Tier("ib", 4096, 50e9, 5e-6, efficiency=0.88, protocol="rdma")), 8, generation="hopper")


@pytest.mark.parametrize(("ranks", "stride", "graph", "speed", "executed"), [
    # Cisco v5.1 DP 64 at TP 1: 8 GPUs a node, 8 NICs x 1 channel at 48 GB/s (sm90 list), not duplicated (48 < 50
    # with 8 > 4), x2 = 16 executed; 16 is not < 16, no SM90 doubling
    (64, 1, 8.0, 48.0, 16.0),
    # Cisco v5.1 DP 64 at TP 2: 4 a node, 4 at 48, duplicated (4 <= 4) to 8 at 24, x2 = 16; bwIntra 24 <= 45
    (64, 2, 8.0, 24.0, 16.0),
    # GPT-3 v4.x DP under TP 4 (stride 4) and Nebius' dp_cp group (TP 4 x CP 2): 2 a node, 2 at 48 -> 4 at 24 -> 8
    (448, 4, 4.0, 24.0, 8.0),
    # MLPerf v5.0 405B dp_cp under TP 8: 1 a node, 1 at 48 -> 2 at 24 -> 4
    (8, 8, 2.0, 24.0, 4.0),
])
def test_capped_rows_dp_groups(ranks: int, stride: int, graph: float, speed: float, executed: float) -> None:
    pl = place(ranks, stride, _h100_nodes())
    n, bw = nccl._inter_graph(pl)
    assert (float(n), float(bw)) == (graph, speed)
    assert float(nccl.nccl_execution_channels(pl)) == executed
    capped = min(executed, CAP)
    # the cap binds in NCCL only where NCCL's own count is above it: the two Cisco layouts
    assert (capped < executed) == (stride <= 2)
    # NCCL's rating of the channels the cap keeps: the graph's channels come first, so with the cap at or above the
    # graph's count every search ring survives and the graph bandwidth is unchanged (384, 192, 96, 48 GB/s)
    assert CAP >= graph
    kept = min(capped, graph) * speed
    assert kept == graph * speed
    # chan32's per-CTA reading, (c / k) x bw with k = executed / graph CTAs a search channel: half of it on Cisco's
    # layouts (192 of 384 GB/s at TP 1, 96 of 192 at TP 2), unchanged where the cap does not bind
    k = executed / graph
    per_cta = capped / k * speed
    assert per_cta == {1: 192.0, 2: 96.0}.get(stride, graph * speed)


def test_h100_share_the_model_charges() -> None:
    # the model charges DP traffic the single-node ring count, 24 of 132 SMs, whatever the group's NCCL count or a
    # recipe's cap (the cap's 8 / 132 is not priced: docs/model.md#contention)
    acc = load_accelerator("h100-sxm")
    assert collective_share(acc, nvls=False) == pytest.approx(24 / 132, rel=1e-12)
    assert 8 / 132 < 16 / 132 < collective_share(acc, nvls=False)
