"""The data-parallel collectives are priced once per candidate, whatever the windows they are exposed against
(sync28; dp_comm._sync_comm, docs/model.md#host-dp-window).

With a host wait (``idle`` > 0) the traffic is exposed against the compute's windows (f, b) and against the
stretched ones (f', b'). The collectives' seconds do not depend on the windows, only their exposure does, so the
host-wait path prices exactly the collectives the path without it prices: before sync28 it priced every one of them
twice (``_sync_comm_windows`` called once per window set). Checked here by counting the cost layer's calls, and the
premise by pricing at two window sets: every priced part is the same."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.step import _stage, evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec

#: (zero, sync, extra strategy arrays): plain DP, the distributed optimizer, ZeRO-3 units, HSDP, hier:G with ZeRO-3
CASES = [(0, "bsp", {}), (1, "bsp", {}), (3, "bsp", {"fsdp_reshard_after_forward": False}),
         (5, "bsp", {"shard_group": 2}), (3, "hier:2", {})]


def _setup(zero: int, sync: str, extra: dict[str, object]):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("dgx-h100"), load_workload("mixtral-8x7b"), TrainingSpec(precision="bf16",
                                                                                         seq_len=2048))
    base = dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=16, overlap=True, zero=zero, **extra)
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in base.items()})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = dict(_stage(job, g, groups, np.asarray([float(job.shape.layers)]), True).busy, pipeline_rank=np.zeros(1))
    return job, g, groups, comp


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every collective dp_comm prices (its ``_collective`` and ``_priced``), by operation."""
    calls: list[str] = []
    for name in ("_collective", "_priced"):
        real = getattr(dp_comm, name)

        def spy(op, *a, _real=real, **k):  # type: ignore[no-untyped-def]
            calls.append(op)
            return _real(op, *a, **k)

        monkeypatch.setattr(dp_comm, name, spy)
    return calls


@pytest.mark.parametrize(("zero", "sync", "extra"), CASES)
def test_host_wait_prices_the_collectives_once(monkeypatch: pytest.MonkeyPatch, zero: int, sync: str,
                                               extra: dict[str, object]) -> None:
    """The same collectives with an idle as without: the stretched windows expose the priced traffic again, they do
    not price it again. And the idle hides something (the path with the second window set is taken)."""
    job, g, groups, comp = _setup(zero, sync, extra)
    comp = dict(comp, forward_free=np.zeros(1), backward_free=np.zeros(1))  # no compute free: the idle hides some
    calls = _counted(monkeypatch)
    m = np.asarray([2.0])
    plain = dp_comm._sync_comm(job, g, comp, m, sync, groups)
    without = list(calls)
    calls.clear()
    idle = float(plain[2][0])  # as long as the whole traffic
    waited = dp_comm._sync_comm(job, g, comp, m, sync, groups, idle=idle)
    assert without and sorted(calls) == sorted(without)
    assert float(waited[4][0]) > 0.0  # the stretched windows hid more
    assert np.array_equal(waited[2], plain[2]) and np.array_equal(waited[3], plain[3])  # the totals: the same


@pytest.mark.parametrize(("zero", "sync", "extra"), CASES)
def test_priced_traffic_does_not_read_the_windows(zero: int, sync: str, extra: dict[str, object]) -> None:
    """The premise of pricing once: the priced parts (and the ZeRO-3 units) are equal at windows 0 and at windows
    10^6 times longer, while the exposure differs."""
    job, g, groups, comp = _setup(zero, sync, extra)
    m = np.asarray([2.0])
    wide = dict(comp, forward_free=comp["forward_free"] * 1e6 + 1.0, backward_free=comp["backward_free"] * 1e6 + 1.0)
    shut = dict(comp, forward_free=np.zeros(1), backward_free=np.zeros(1))
    for a, b in zip(dp_comm._sync_traffic(job, g, wide, m, sync, groups),
                    dp_comm._sync_traffic(job, g, shut, m, sync, groups), strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        assert a.parts.keys() == b.parts.keys()
        for k in a.parts:
            assert np.array_equal(a.parts[k], b.parts[k]), k
        assert (a.units is None) == (b.units is None)
        if a.units is not None and b.units is not None:
            for k in ("ag", "rs", "ag_r", "rs_r", "per_mb", "total"):
                assert np.array_equal(getattr(a.units, k), getattr(b.units, k)), k
    traffic = dp_comm._sync_traffic(job, g, comp, m, sync, groups)
    e_wide = dp_comm._sync_exposed(job, g, traffic, wide, sync)
    e_shut = dp_comm._sync_exposed(job, g, traffic, shut, sync)
    assert float(e_wide[0][0] + (0.0 if e_wide[1] is None else e_wide[1][0])) < \
        float(e_shut[0][0] + (0.0 if e_shut[1] is None else e_shut[1][0]))


def test_step_with_host_wait_prices_the_dp_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: an MoE step whose host floor binds (moe_layer_host_s 10 ms on one H100 node, ZeRO-3) prices its
    data-parallel traffic once (one _dp_traffic), and its host wait is there."""
    job, g, _, _ = _setup(3, "bsp", {"moe_layer_host_s": 0.01})
    real = dp_comm._dp_traffic
    n = [0]

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        n[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(dp_comm, "_dp_traffic", spy)
    r = evaluate(job, g)
    assert float(r.breakdown["host"][0]) > 0.0
    assert n[0] == 1
