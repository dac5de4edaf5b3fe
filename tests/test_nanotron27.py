"""nanotron's pipeline metadata exchange synchronises the hosts (docs/model.md#nanotron, nano27).

Per tensor crossing a stage boundary, read in huggingface/nanotron p2p.py (c2528430 and 67c5ebb6 alike for the
sender): ``_send_meta`` copies each of its two headers from a pageable CPU tensor into a CUDA buffer (``copy_``,
which waits for the stream) and asserts twice on a CUDA element of the first header (a bool read on the host), 4
waits before the second header leaves; the receiver reads the second header's shape and stride on the host before it
can size and post the data's receive (67c5ebb6: two ``.tolist()``; c2528430 more). Three tensors cross a boundary a
micro-batch (hidden states and sequence mask forward, the hidden states' gradient backward): 3 x (4 + 2) = 18, each
at least one eager op's host time, 8.3 us (pytorch/pytorch issue 161822, hardware/measurements/host_overhead.yaml).
"""

from __future__ import annotations

import pytest
from grid_helpers import evaluated, first

from scalemodel.cost import collectives as coll
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

SYNCS = 3 * (4 + 2)  # tensors x (sender's copy_, assert, assert, copy_ + receiver's two header reads)
SYNC_S = 8.3e-6


def test_host_syncs_per_boundary_on_the_efa_fabric() -> None:
    """gpt-7.5b at tp 1 x dp 8 x pp 2 on two aws-p5 nodes (the nanotron25 rows' cluster), micro-batch 1, 16
    micro-batches: the two stages are 8 ranks apart, one on each node, so every send crosses EFA. nanotron's pp_comm is
    16 x (2 T(act) + the metadata messages and the mask + 18 x 8.3 us): the host term is a fixed time per boundary,
    added to the messages whatever the fabric prices them at."""
    cluster = load_cluster("aws-p5")
    wl = load_workload("gpt-7.5b")
    s = float(wl.seq_len)
    act = s * float(wl.hidden) * 2.0
    tr = TrainingSpec(global_batch=16 * 8, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, _, nano = evaluated(cluster, wl, tr, 16, tp=1, pp=2, zero="1", nanotron_trainer=True)

    def t(nbytes: float) -> float:
        return first(coll.collective_time("sendrecv", nbytes, 2, job.network, stride=8))

    messages = 3 * t(56.0) + 2 * t(48.0) + t(32.0) + t(s)
    assert first(nano.breakdown["pp_comm"]) == pytest.approx(16 * (2 * t(act) + messages + SYNCS * SYNC_S),
                                                             rel=1e-6)
