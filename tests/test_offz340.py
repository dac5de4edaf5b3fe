"""Offloaded ZeRO-3 / FSDP: the host copies as the units' streams run them (offz340; docs/model.md#state-offload).

DeepSpeed's ZeRO-3 reduce-scatters a bucket and then copies its reduced partition to and from the host, both on
``reduce_and_partition_stream`` (``__reduce_and_partition_ipg_grads``: ``__avg_scatter_grads`` then ``partition_grads``
inside one ``with stream(...)`` block, deepspeedai/DeepSpeed@edaa7221 stage3.py L1591-1608, L1886-1925), and every
backward ends waiting for that stream (L1363-1364); under offload_param each unit's 16-bit shard is fetched before its
all-gather. The closed form (dp_comm._sharded_units' ``exposed`` with a :class:`dp_comm.HostChain`) prices these as
one chain a unit; here a small event simulation of the same streams (the gathers' stream: fetch then all-gather, one
unit ahead of the compute; the reduce-scatters' stream: reduce-scatter then copies, FIFO, after each unit's backward)
gives the exposed seconds step by step, from the collectives' seconds and the bytes of the table (by hand).
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scalemodel.cost import state_offload
from scalemodel.engine import dp_comm, step
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec
from tests.test_physics_wide import _eval, wide_cases

BASE = {"gpus": 8, "dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 16, "zero": 3,
        "fsdp_reshard_after_forward": False, "fsdp_flat_param": False, "fsdp_per_param": False, "overlap": True}


def _priced(arrays: dict, monkeypatch: pytest.MonkeyPatch, cluster: str = "dgx-h100",  # type: ignore[no-untyped-def]
            sync: str = "bsp"):
    """(the job, the evaluation under ``sync``, what step hands dp_comm.offloaded_optimizer: the DP rank's windows,
    its priced traffic and t_mb)."""
    job = build_job(load_cluster(cluster, []), load_workload("llama3-8b", []),
                    TrainingSpec(global_batch=arrays["global_batch"], seq_len=4096))
    seen: dict = {}
    real = step.offloaded_optimizer

    def spy(job, g, m, comp, gpu_opt, *args, **kw):  # type: ignore[no-untyped-def]
        seen.update(comp=comp, traffic=kw["traffic"], t_mb=kw["t_mb"], m=m)
        return real(job, g, m, comp, gpu_opt, *args, **kw)

    monkeypatch.setattr(step, "offloaded_optimizer", spy)
    res = step.evaluate(job, grid_from_arrays(**{k: np.asarray([v]) for k, v in arrays.items()}), sync=sync)
    return job, res, seen


def _simulate(layers: int, f: float, b: float, ag: float, rs: float, fetch: float, copies: float) -> float:
    """Seconds one micro-batch runs past its compute, event by event: forward, the gathers' stream runs each unit's
    ``fetch`` then its all-gather ``ag``, the next unit's issued as the compute starts a unit (one ahead), the compute
    of a unit (``f``) waiting for its gather; backward (no gathers: the units stay gathered), each unit's gradient
    ready after its ``b``, the reduce-scatters' stream running its ``rs`` then its ``copies``, first in first out, and
    the backward ending when the compute and that stream have."""
    gather_end = fetch + ag  # the first unit's gather: nothing to hide it
    t, start = 0.0, gather_end
    for _ in range(layers):
        nxt = max(start, gather_end) + fetch + ag  # the next unit's gather, issued as this unit starts
        t = start + f
        start, gather_end = max(t, nxt), nxt
    stream, ready = t, t
    for _ in range(layers):
        ready += b
        stream = max(stream, ready) + rs + copies
    return max(stream, ready) - layers * (f + b)


@pytest.mark.parametrize(("mode", "dp"), [(1, 8), (2, 8), (1, 2), (2, 2)])
def test_the_chain_matches_an_event_simulation(mode: int, dp: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama3-8b, ZeRO-3 over dp 8 or 2 GPUs of one dgx-h100, two micro-batches, the optimizer's states (1) and the
    parameters too (2) on the host: dp_comm + optimizer = the simulated exposure of both micro-batches + the CPU step
    + the copy back after it, the copies by hand: n the rank's shard, 2 gb n each backward (out and back) and 4 n
    more in the last (the fp32 boundary copy), wb n fetched before each forward's gathers under optimizer+params.
    At dp 8 a unit's copies fit its backward (the last unit's are exposed); at dp 2 they do not (the chain binds),
    nor, under optimizer+params, do the fetches fit the forward."""
    arrays = dict(BASE, gpus=dp, dp=dp, global_batch=2 * dp, offload_states=mode)
    job, res, seen = _priced(arrays, monkeypatch)
    comp, (parts, _), m = seen["comp"], seen["traffic"][0], int(seen["m"][0])
    layers = int(comp["layers_per_stage"][0])
    fwd, bwd = float(comp["forward"][0]), float(comp["backward"][0])
    # one window a pass: no model-parallel traffic, so the free windows and the wall time are the compute's
    assert m == 2 and float(comp["forward_free"][0]) == fwd and float(comp["backward_free"][0]) == bwd
    assert float(seen["t_mb"][0]) == pytest.approx(fwd + bwd, rel=1e-12)
    ag = float(parts["unit_gathers"][0]) / (m * layers)  # the units' collectives, priced by cost.collectives
    rs = float(parts["reduces"][0]) / (m * layers)
    n = float(dp_comm._state_shard(job, grid_from_arrays(**{k: np.asarray([v]) for k, v in arrays.items()}))[0])
    link, gb, wb = job.host_bandwidth, job.grad_bytes, job.elem_bytes
    fetch = wb * n / link / layers if mode == 2 else 0.0
    each = 2.0 * gb * n / link / layers
    last = each + 4.0 * n / link / layers
    exposed = (m - 1) * _simulate(layers, fwd / layers, bwd / layers, ag, rs, fetch, each) + _simulate(
        layers, fwd / layers, bwd / layers, ag, rs, fetch, last)
    cpu = n * dp / state_offload.CPU_ADAM_PARAMS_PER_S  # the node's dp ranks share the host's rate
    after = wb * n / link if mode == 1 else 0.0
    priced = float(res.breakdown["dp_comm"][0]) + float(res.breakdown["optimizer"][0])
    assert priced == pytest.approx(exposed + cpu + after, rel=1e-9)
    assert (rs + each > bwd / layers) == (dp == 2)  # the regime the docstring names
    assert (fetch + ag > fwd / layers) == (dp == 2 and mode == 2)


def test_overlap_off_exposes_every_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without overlap_comm DeepSpeed's ZeRO-3 stream is the compute's (stage3.py L335-336 ``Stream() if overlap_comm
    else default_stream()``): every unit collective and every copy in series with the compute."""
    job, res, seen = _priced(dict(BASE, offload_states=1, overlap=False), monkeypatch)
    parts, m = seen["traffic"][0][0], float(seen["m"][0])
    n = float(dp_comm._state_shard(job, grid_from_arrays(**{k: np.asarray([v]) for k, v in BASE.items()}))[0])
    copies = (4.0 + 2.0 * m * job.grad_bytes) * n / job.host_bandwidth
    cpu, after = n * 8 / state_offload.CPU_ADAM_PARAMS_PER_S, job.elem_bytes * n / job.host_bandwidth
    priced = float(res.breakdown["dp_comm"][0]) + float(res.breakdown["optimizer"][0])
    traffic = float(parts["unit_gathers"][0] + parts["reduces"][0])
    assert priced == pytest.approx(traffic + copies + cpu + after, rel=1e-9)


@pytest.mark.parametrize("m", [1, 2, 4])
def test_deferred_forwards_fetch_with_no_gather_to_hide_behind(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """FSDP with fsdp_defer_grad_sync: only the first forward gathers, and so only it fetches (offz41: the other
    m - 1 forwards find their units gathered, FSDPParamGroup.unshard returns at once; they were priced a fetch pass
    each, the bytes' table's old count). Given a chain of fetches alone (F seconds a pass) and no copy-engine window
    (forward wall 0), the fetch is exposed whatever the network does: the chain adds F, at every m (units not
    resharded after the forward: the backwards gather, and fetch, nothing). On pcie-25gbe the first forward's
    all-gathers are exposed (about 24 times a unit's forward window); review40: gather-free forwards' fetches were
    set against that exposure and added about F / 32 each."""
    arrays = dict(BASE, gpus=16, dp=16, global_batch=16 * m, zero=4, fsdp_defer_grad_sync=True, offload_states=2)
    _, _, seen = _priced(arrays, monkeypatch, "pcie-25gbe")
    comp, (parts, units) = seen["comp"], seen["traffic"][0]
    layers = float(comp["layers_per_stage"][0])
    assert float(parts["unit_gathers"][0]) / layers > float(comp["forward_free"][0]) / layers  # gathers exposed
    fetch = 0.01
    chain = dp_comm.HostChain(0.0, 0.0, 0.0, fetch, 0.0, 0.0)
    assert float((units(comp, chain) - units(comp))[0]) == pytest.approx(fetch, rel=1e-9)


@st.composite
def _offloaded_sharded(draw):  # type: ignore[no-untyped-def]
    """tests/test_physics_wide.py's cases with the states on the host at ZeRO-3, FSDP or HSDP: on a cluster with a
    GPU-host link only (review41: the draws without one were priced with offload_states 0, about two in three of
    them, so most examples never reached the offload)."""
    job, arrays, sync = draw(wide_cases())
    assume(job.host_bandwidth > 0)
    zero = draw(st.sampled_from((3, 4, 5)))
    arrays.update(zero=zero, offload_states=draw(st.sampled_from((1, 2))),
                  fsdp_defer_grad_sync=arrays["fsdp_defer_grad_sync"] and zero >= 4)
    return job, arrays, sync


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_offloaded_sharded(), st.sampled_from((1.25, 2.0)))
def test_offloaded_sharded_faster_accelerator_never_slower(case, factor) -> None:  # type: ignore[no-untyped-def]
    """The property tests/test_physics_wide.py skipped before offz340, drawn where it applied."""
    job, arrays, sync = case
    base = float(_eval(job, arrays, sync).step_time[0])
    quick = msgspec.structs.replace(job, peak_flops=job.peak_flops * factor,
                                    memory_bandwidth=job.memory_bandwidth * factor)
    assert float(_eval(quick, arrays, sync).step_time[0]) <= base * (1 + 1e-9), (arrays, sync, factor)
