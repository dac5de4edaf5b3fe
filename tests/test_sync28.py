"""The data-parallel collectives are priced once per candidate, whatever the windows they are exposed against
(sync28; dp_comm._sync_comm, docs/model.md#host-dp-window).

With a host wait (``idle`` > 0) the traffic is exposed against the compute's windows (f, b) and against the
stretched ones (f', b'). The collectives' seconds do not depend on the windows, only their exposure does, so the
host-wait path prices exactly the collectives the path without it prices: before sync28 it priced every one of them
twice (``_sync_comm_windows`` called once per window set). Checked here by counting the cost layer's calls, and the
premise by pricing at two window sets: every priced part is the same. Three collectives priced per candidate and
dropped are no longer priced: an HSDP candidate's units over the whole group, a ZeRO-3 candidate's gradient
all-reduce and reduce-scatter beside its per-unit traffic, and the unit reduce-scatter of the framework it does not
run (FSDP's or DeepSpeed's). With layers offloaded (sync28b) the offload reads the exposure of the gathers the sync
prices; before, it priced the whole data-parallel group again for them."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.pipeline_ranks import microbatches
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
    """The premise of pricing once: the traffic priced at windows 0 and at windows 10^6 times longer is the same
    (its parts, and its ZeRO-3 gathers' exposure under any one window set), while the exposure differs."""
    job, g, groups, comp = _setup(zero, sync, extra)
    m = np.asarray([2.0])
    wide = dict(comp, forward_free=comp["forward_free"] * 1e6 + 1.0, backward_free=comp["backward_free"] * 1e6 + 1.0)
    shut = dict(comp, forward_free=np.zeros(1), backward_free=np.zeros(1))
    for a, b in zip(dp_comm._sync_traffic(job, g, wide, m, sync, groups),
                    dp_comm._sync_traffic(job, g, shut, m, sync, groups), strict=True):
        if a is None or b is None:
            assert a is None and b is None
            continue
        assert a[0].keys() == b[0].keys()
        for k in a[0]:
            assert np.array_equal(a[0][k], b[0][k]), k
        for c in (comp, wide, shut):  # the gathers' exposure, priced at either windows, under the same windows
            assert np.array_equal(a[1](c), b[1](c))
    traffic = dp_comm._sync_traffic(job, g, comp, m, sync, groups)
    e_wide = dp_comm._sync_exposed(job, g, traffic, wide, sync)
    e_shut = dp_comm._sync_exposed(job, g, traffic, shut, sync)
    assert float(e_wide[0][0] + (0.0 if e_wide[1] is None else e_wide[1][0])) < \
        float(e_shut[0][0] + (0.0 if e_shut[1] is None else e_shut[1][0]))


def _count_dp_traffic(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of dp_comm._dp_traffic, the pricing of one data-parallel group's collectives."""
    real = dp_comm._dp_traffic
    n = [0]

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        n[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(dp_comm, "_dp_traffic", spy)
    return n


def test_step_with_host_wait_prices_the_dp_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: an MoE step whose host floor binds (moe_layer_host_s 10 ms on one H100 node, ZeRO-3) prices its
    data-parallel traffic once (one _dp_traffic), and its host wait is there."""
    job, g, _, _ = _setup(3, "bsp", {"moe_layer_host_s": 0.01})
    n = _count_dp_traffic(monkeypatch)
    r = evaluate(job, g)
    assert float(r.breakdown["host"][0]) > 0.0
    assert n[0] == 1


def _groups_priced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Record every collective dp_comm prices as (operation, ranks of its group)."""
    calls: list[tuple[str, float]] = []
    for name in ("_collective", "_priced"):
        real = getattr(dp_comm, name)

        def spy(op, nbytes, group, *a, _real=real, **k):  # type: ignore[no-untyped-def]
            calls.append((op, float(np.max(group.p))))
            return _real(op, nbytes, group, *a, **k)

        monkeypatch.setattr(dp_comm, name, spy)
    return calls


def test_hsdp_prices_no_unit_over_the_whole_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """HSDP, Llama-3 8B on 8 H100, shard group 2: its units gather and reduce-scatter over the 2 replicas of a shard
    group, and all-reduce their shard over the 4 groups (PyTorch HYBRID_SHARD); nothing spans the 8 replicas. Before
    sync28 the units were priced over all 8 too and dropped (np.where on the HSDP rows)."""
    job = build_job(load_cluster("dgx-h100"), load_workload("llama3-8b"), TrainingSpec(precision="bf16",
                                                                                     seq_len=2048))
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1,
                                                                 global_batch=16, zero=5, shard_group=2).items()})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = dict(_stage(job, g, groups, np.asarray([float(job.shape.layers)]), True).busy, pipeline_rank=np.zeros(1))
    calls = _groups_priced(monkeypatch)
    dp_comm._sync_comm(job, g, comp, np.asarray([2.0]), "bsp", groups)
    assert {r for _, r in calls} == {2.0, 4.0}
    assert {op for op, r in calls if r == 2.0} == {"allgather", "reducescatter"}
    assert {op for op, r in calls if r == 4.0} == {"allreduce"}


def test_zero3_rows_of_a_mixed_grid_price_no_gradient_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid of ZeRO-1 and ZeRO-3 candidates (Llama-3 8B, dp 8): the distributed optimizer's reduce-scatter and
    all-gather, ZeRO-3's per-unit gathers and reduce-scatters; no all-reduce, which neither runs. Before sync28 every
    candidate's gradients were priced as an all-reduce and ZeRO-3's as a reduce-scatter too, then dropped."""
    job = build_job(load_cluster("dgx-h100"), load_workload("llama3-8b"), TrainingSpec(precision="bf16",
                                                                                     seq_len=2048))
    g = grid_from_arrays(**{k: np.asarray(v) for k, v in dict(gpus=[8, 8], dp=[8, 8], tp=[1, 1], pp=[1, 1],
                                                               micro_batch=[1, 1], global_batch=[16, 16],
                                                               zero=[1, 3]).items()})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = dict(_stage(job, g, groups, np.full(2, float(job.shape.layers)), True).busy, pipeline_rank=np.zeros(2))
    calls = _groups_priced(monkeypatch)
    dp_comm._sync_comm(job, g, comp, np.asarray([2.0, 2.0]), "bsp", groups)
    assert sorted(op for op, _ in calls) == ["allgather", "allgather", "reducescatter", "reducescatter"]



@pytest.mark.parametrize(("sync", "priced"), [("bsp", 1), ("hier:2", 2)])
def test_offload_and_sync_price_the_dp_group_once(monkeypatch: pytest.MonkeyPatch, sync: str, priced: int) -> None:
    """sync28b: FSDP with 40 of Llama-3 70B's 80 layers' activations offloaded (the mb2511 GB200 row's layout, 64 GPUs,
    dp 64): the offload reads the exposure of the gathers the sync prices, it does not price the group again. One
    _dp_traffic for the whole group, two under hier:2 (in the groups, across them); before, the offload priced the
    group (hier:2: the in-group one) a second time. The offload path is taken: its copies exceed what the exposed
    gathers stall and are charged less that stall (m t_offload > offload > 0)."""
    job = build_job(load_cluster("gb200-nvl72"), load_workload("llama3-70b"), TrainingSpec(precision="fp8",
                                                                                          seq_len=8192))
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in dict(gpus=64, dp=64, tp=1, pp=1, micro_batch=2,
                                                                 global_batch=256, zero=4, offload_layers=40,
                                                                 overlap=True).items()})
    n = _count_dp_traffic(monkeypatch)
    r = evaluate(job, g, sync=sync)
    assert n[0] == priced
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = dict(_stage(job, g, groups, np.asarray([float(job.shape.layers)]), True).busy, pipeline_rank=np.zeros(1))
    copies = float(microbatches(g)[0] * dp_comm._offload_time(job, g, comp)[0])
    assert 0.0 < float(r.breakdown["offload"][0]) < copies


def test_offload_takes_the_gathers_the_sync_exposes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offload's gather stall is the exposure of the sync's own priced traffic under the same windows: with the
    offload's copies free (_offload_time 0 per byte) the charge is max(m t - exposed gathers, 0) exactly, here read
    back against the exposure computed from dp_comm._sync_traffic directly (the ZeRO-3 mixtral case of CASES)."""
    job, g, groups, comp = _setup(3, "bsp", {"fsdp_reshard_after_forward": False})
    m = np.asarray([2.0])
    traffic = dp_comm._sync_traffic(job, g, comp, m, "bsp", groups)
    gathers = float(traffic[0][1](comp)[0])
    assert gathers > 0.0
    monkeypatch.setattr(dp_comm, "_offload_time", lambda *a, **k: np.asarray([3.0 * gathers]))
    n = _count_dp_traffic(monkeypatch)
    off = dp_comm._offload_exposed(job, g, comp, m, traffic[0][1])
    assert n[0] == 0  # read, not priced
    assert float(off[0]) == pytest.approx(2.0 * 3.0 * gathers - gathers, rel=1e-12)
