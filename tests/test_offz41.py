"""HSDP's cross-group all-reduce on the units' reduce path, and the deferred sync's host bytes (offz41).

1. hier:G with ZeRO-3 / FSDP / HSDP: each unit's reduced 1/G shard is all-reduced with its counterparts in the other
   groups right after the unit's in-group reduce-scatter, on the reduce path (PyTorch FSDP1 HYBRID_SHARD
   ``_post_backward_hook``: the reduce-scatter then ``allreduce_hook`` on ``state._inter_node_state``, both on the
   post-backward stream, then the CPU-offload copy; FSDP2 ``foreach_reduce``: ``all_reduce_stream.wait_stream
   (reduce_scatter_stream)`` then ``dist.all_reduce(..., group=all_reduce_group)`` a unit, skipped until the last
   micro-batch under ``set_requires_all_reduce(False)``; DeepSpeed MiCS ``partition_grads`` ->
   ``allreduce_mics_shard_grads`` a reduce bucket, on ``reduce_and_partition_stream``, at the accumulation boundary
   only). hier:G's cross-group exchange is once a step, so the last backward's units carry RS + AR. Checked against an
   event simulation of the streams, unit by unit, with each collective's seconds from its bytes over the tiers its
   group spans (the in-group ranks inside a node, the cross-group ranks one a node).
2. fsdp_defer_grad_sync with the states on the host: the first forward gathers (and fetches) the units, the later
   ones find them gathered; the reduced shards are copied out once, after the one reduce-scatter: the bytes' table and
   the chain count the same passes (overlap off: every byte over the link, by hand).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import state_offload
from scalemodel.cost.placement import place
from scalemodel.engine import dp_comm
from scalemodel.engine.job import grid_from_arrays
from tests.test_offz340 import BASE, _priced


def _simulate(layers: int, f: float, b: float, ag: float, reduce: float, fetch: float, copies: float) -> float:
    """Seconds one micro-batch runs past its compute, event by event (units not resharded after the forward, so the
    backward gathers nothing): the gathers' stream runs each unit's ``fetch`` then its all-gather ``ag``, one unit
    ahead of the compute, the compute of a unit (``f``) waiting for its gather; in the backward each unit's gradient
    is ready after its ``b`` and the reduce path runs its ``reduce`` (the reduce-scatter, then in the last backward
    the cross-group all-reduce) then its ``copies``, first in first out; the backward ends when the compute and that
    path have."""
    gather_end = fetch + ag
    t, start = 0.0, gather_end
    for _ in range(layers):
        nxt = max(start, gather_end) + fetch + ag
        t = start + f
        start, gather_end = max(t, nxt), nxt
    path, ready = t, t
    for _ in range(layers):
        ready += b
        path = max(path, ready) + reduce + copies
    return max(path, ready) - layers * (f + b)


@pytest.mark.parametrize(("cluster", "offload"), [("dgx-h100", 0), ("dgx-h100", 2), ("pcie-25gbe", 0)])
def test_hier_cross_group_allreduce_rides_the_last_backwards_units(cluster: str, offload: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """llama3-8b, FSDP over 32 GPUs (4 nodes of 8), hier:8, two micro-batches: the in-group gathers and reduce-scatters
    over the 8 GPUs of a node (stride 1), the cross-group all-reduce of each unit's reduced 1/8 shard over 4 GPUs 8
    apart (one a node). dp_comm (+ the optimizer part under offload) = the simulated exposure of both micro-batches,
    the second's units reducing RS + AR, + the CPU step. On dgx-h100 a unit's RS + AR fits its backward (only the last
    unit's is exposed); on pcie-25gbe it does not (the path binds). Before offz41 the all-reduce was one collective of
    the whole shard exposed under the last backward's window, beside the units rather than behind each of them."""
    gpus, g_size, m = 32, 8, 2
    arrays = dict(BASE, gpus=gpus, dp=gpus, global_batch=m * gpus, zero=4, offload_states=offload)
    job, res, seen = _priced(arrays, monkeypatch, cluster, f"hier:{g_size}")
    comp = seen["comp"]
    layers = int(comp["layers_per_stage"][0])
    fwd, bwd = float(comp["forward"][0]), float(comp["backward"][0])
    assert float(comp["forward_free"][0]) == fwd and float(comp["backward_free"][0]) == bwd
    # the bytes of one unit (no root unit: neither fsdp_per_param nor fsdp_flat_param), the collectives over the
    # tiers their groups span
    unit = job.params / layers
    net = job.network
    inside, across = place(g_size, 1, net), place(gpus // g_size, g_size, net)
    assert inside.c[0][()] == g_size  # the group inside one node (the first tier's domain)
    assert across.c[0][()] == 1 and across.c[-1][()] == gpus // g_size  # one rank a node
    wire = job.grad_bytes
    ag = float(coll.collective_time("allgather", 2.0 * unit, g_size, net, stride=1))
    rs = float(coll.collective_time("reducescatter", wire * unit, g_size, net, stride=1))
    ar = float(coll.collective_time("allreduce", wire * unit / g_size, gpus // g_size, net, stride=g_size))
    n = job.params / g_size  # the rank's state shard: the model over the group
    link = job.host_bandwidth
    s = 4.0  # FSDP's fp32 shard element (llama3-8b's states: 12 bytes of Adam a parameter)
    fetch = s * n / link / layers if offload else 0.0
    copies = s * n / link / layers if offload else 0.0
    exposed = (_simulate(layers, fwd / layers, bwd / layers, ag, rs, fetch, copies)
               + _simulate(layers, fwd / layers, bwd / layers, ag, rs + ar, fetch, copies))
    cpu = n * 8 / state_offload.CPU_ADAM_PARAMS_PER_S if offload else 0.0
    priced = float(res.breakdown["dp_comm"][0]) + (float(res.breakdown["optimizer"][0]) if offload else 0.0)
    assert priced == pytest.approx(exposed + cpu, rel=1e-9)
    assert (rs + ar + copies > bwd / layers) == (cluster == "pcie-25gbe")  # the regimes the docstring names
    # the traffic: m (L AG + L RS) + L AR (the units keep their forward's gather)
    assert float(res.breakdown["dp_comm"][0]) <= m * layers * (ag + rs) + layers * ar + 1e-12


@pytest.mark.parametrize("root", [False, True])
@pytest.mark.parametrize("reshard", [False, True])
@pytest.mark.parametrize("defer", [False, True])
def test_deferred_sync_host_bytes_agree_with_the_chain(root: bool, reshard: bool, defer: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """llama3-8b, FSDP over 16 GPUs (2 dgx-h100 nodes), both offloads, four micro-batches, overlap off (every
    collective and copy in series): dp_comm + optimizer = the units' traffic + every byte over the host link + the
    CPU step, the bytes by hand for the rank's shard n = P / 16 at FSDP's 4-byte element: fetched before each gather
    pass (m forward passes, m backward ones where resharded after the forward; deferred: the first forward's and the
    backwards' where resharded), copied out after each reduce-scatter (m; deferred: 1). With FSDP2's wrapping
    (``fsdp_per_param``) the root unit (the embedding, the untied output layer and the final norm: 2 x 128,256 x 4,096
    + 4,096 parameters) stays gathered from its forward to its backward, so a backward pass fetches the blocks' part
    only (the table counted the root's too, the chain did not)."""
    m, dp = 4, 16
    arrays = dict(BASE, gpus=dp, dp=dp, global_batch=dp * m, zero=4, fsdp_defer_grad_sync=defer, offload_states=2,
                  fsdp_reshard_after_forward=reshard, overlap=False, fsdp_per_param=root)
    job, res, seen = _priced(arrays, monkeypatch)
    parts = seen["traffic"][0][0]
    n = job.params / dp
    n_root = (2 * 128_256 * 4_096 + 4_096) / dp if root else 0.0
    grid = grid_from_arrays(**{k: np.asarray([v]) for k, v in arrays.items()})
    assert float(dp_comm._state_shard(job, grid)[0]) == pytest.approx(n, rel=1e-12)
    forwards, backwards = (1 if defer else m), m * reshard
    reductions = 1 if defer else m
    fetched, copied = 4.0 * (n * forwards + (n - n_root) * backwards), 4.0 * n * reductions
    c = dp_comm._host_copies(job, grid, np.asarray([float(m)]))
    d2h, h2d, after, fetch = (float(x[0]) if np.ndim(x) else float(x) for x in (c.d2h, c.h2d, c.after, c.fetch))
    assert (d2h, h2d, after, fetch) == pytest.approx((copied, fetched, 0.0, fetched), rel=1e-12)
    cpu = n * 8 / state_offload.CPU_ADAM_PARAMS_PER_S
    traffic = float(parts["unit_gathers"][0] + parts["reduces"][0])
    priced = float(res.breakdown["dp_comm"][0]) + float(res.breakdown["optimizer"][0])
    assert priced == pytest.approx(traffic + (fetched + copied) / job.host_bandwidth + cpu, rel=1e-9)
