"""The SM share each overlapped collective holds with NVLS on (docs/model.md#contention, "Per collective"). NCCL's
ncclTopoPostset raises the ring's channel count to at least the NVLS count and never lowers it (NVIDIA/nccl
v2.21.5-1 src/graph/connect.cc: ``comm->nChannels = std::max(comm->nChannels, comm->nvlsChannels)``), and enqueue.cc
runs an NVLS / NVLSTree collective on ``comm->nvlsChannels`` and every other on the ring's: on an 8-GPU H100 node
with NVLS on, the NVLS all-reduce holds 16 of 132 SMs and the reduce-scatters, all-gathers, all-to-alls and ring
all-reduces 24. Each window is charged its own collective's share, worked out here by hand."""
from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

RING, NVLS = 24 / 132, 16 / 132
OFF = ["tiers.nvlink.in_network_reduction=false"]


def _job(over: list[str] | None = None):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16")
    return build_job(load_cluster("dgx-h100", over or []), load_workload("llama3-8b"), tr), tr


@pytest.mark.parametrize(("cluster", "over", "ring", "nvls"), [
    ("dgx-h100", [], RING, NVLS),          # NVLS on: rings keep 24 channels, the NVLS all-reduce 16
    ("dgx-h100", OFF, RING, RING),         # NVLS off: no NVLS channels
    ("dgx-b200", [], 32 / 148, 32 / 148),  # no NVLS count stated: collective_units both ways
])
def test_job_carries_the_ring_and_the_nvls_share(cluster: str, over: list[str], ring: float, nvls: float) -> None:
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16")
    job = build_job(load_cluster(cluster, over), load_workload("llama3-8b"), tr)
    assert job.collective_share == pytest.approx(ring, rel=1e-12)
    assert job.collective_share_nvls == pytest.approx(nvls, rel=1e-12)


def test_free_windows_charge_each_kind_its_share() -> None:
    # 3 s of hidden model-parallel traffic: 0.5 s an NVLS all-reduce, 0.4 s EP all-to-all at the dispatcher's 0.1,
    # 0.6 s on userbuffers' SMs (priced in ub_sms, 0.05 s), the 1.5 s left (reduce-scatters, CP) at the ring's share
    comp = {"forward": np.array([4.0]), "backward": np.array([8.0])}
    mp = {"hidden_fwd": np.array([1.0]), "hidden_bwd": np.array([2.0]), "hidden_nvls": np.array([0.5]),
          "hidden_ep": np.array([0.4]), "hidden_ub": np.array([0.6]), "ub_sms": np.array([0.05])}
    out = step._with_free_windows(comp, mp, RING, 0.1, NVLS)
    assert float(out["contention"][0]) == pytest.approx(1.5 * 24 / 132 + 0.5 * 16 / 132 + 0.4 * 0.1 + 0.05, rel=1e-12)
    # without an NVLS share the NVLS part falls back to the ring's (a job whose accelerator states one count)
    flat = step._with_free_windows(comp, mp, RING, 0.1)
    assert float(flat["contention"][0]) == pytest.approx(2.0 * 24 / 132 + 0.4 * 0.1 + 0.05, rel=1e-12)


def test_dp_share_is_time_weighted() -> None:
    job, _ = _job()
    # T = 3 s of DP traffic, A = 1 s of it an NVLS all-reduce: (16 x 1 + 24 x 2) / (3 x 132)
    share = step._dp_share(job, np.array([3.0, 3.0, 0.0]), np.array([1.0, 0.0, 0.0]))
    assert share == pytest.approx([64 / 396, 24 / 132, 24 / 132], rel=1e-12)
    off, _ = _job(OFF)
    assert step._dp_share(off, np.array([3.0]), np.array([1.0])) == pytest.approx(24 / 132, rel=1e-12)


def _dp_window_units(over: list[str], **strategy) -> float:  # type: ignore[no-untyped-def]
    """SMs the hidden DP traffic of one step holds: contention / (DP seconds - their exposed part) x 132 (tp = 1:
    no model-parallel window, so the step's contention is the DP window's)."""
    job, tr = _job(over)
    g = grid_from_strategy(StrategySpec(dp=8, **strategy), tr, 8, job)
    r = step.evaluate(job, g)
    hidden = float(np.ravel(r.extras["dp_comm_total"])[0]) - float(np.ravel(r.breakdown["dp_comm"])[0])
    assert hidden > 0
    return float(np.ravel(r.breakdown["contention"])[0]) / hidden * 132


@pytest.mark.parametrize(("over", "strategy", "units"), [
    ([], {"zero": "0"}, 16),                        # DDP all-reduce inside one NVLS node: NVLS channels
    ([], {"zero": "1"}, 24),                        # distributed optimizer: reduce-scatter + all-gather on the rings
    ([], {"zero": "0", "algorithm": "ring"}, 24),   # a ring all-reduce named by the strategy
    (OFF, {"zero": "0"}, 24),                       # NVLS off
])
def test_dp_window_holds_its_collectives_channels(over: list[str], strategy: dict[str, str], units: int) -> None:
    assert _dp_window_units(over, **strategy) == pytest.approx(units, rel=1e-9)


@pytest.mark.parametrize(("over", "tp", "sp", "nvls"), [
    ([], 8, False, True),    # the async backward all-reduce, NVLS on an 8-GPU node
    ([], 8, True, False),    # reduce-scatters and all-gathers: rings (the model's auto picks ring over NVLS for them)
    (OFF, 8, False, False),  # NVLS off
    ([], 2, False, False),   # NVLS applies to 2 ranks, but the priced choice (auto) is the ring: 1 pair, 24 channels
])
def test_tp_window_is_nvls_only_for_the_nvls_all_reduce(over: list[str], tp: int, sp: bool, nvls: bool) -> None:
    job, tr = _job(over)
    g = grid_from_strategy(StrategySpec(tp=tp, sequence_parallel=sp, tp_async_allreduce=True), tr, tp, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(32.0), logits_on_stage=True)
    comp = step._overlap_windows(raw, job.overlap_efficiency)
    mp = model_parallel_comm._model_parallel_comm(job, g, comp, model_parallel_comm._mp_collectives(job, g, groups))
    hidden = float(np.ravel(mp["hidden_fwd"] + mp["hidden_bwd"])[0])
    assert hidden > 0
    assert float(np.ravel(mp["hidden_nvls"])[0]) == pytest.approx(hidden if nvls else 0.0, rel=1e-12)
    out = step._with_free_windows(comp, mp, job.collective_share, None, job.collective_share_nvls)
    assert float(np.ravel(out["contention"])[0]) == pytest.approx(hidden * (NVLS if nvls else RING), rel=1e-12)


def test_a_job_without_the_nvls_share_charges_the_ring() -> None:
    # the planner's hot path: a job whose two shares agree takes the scalar path of _dp_share
    job, _ = _job(OFF)
    assert replace(job, collective_share_nvls=job.collective_share).collective_share_nvls == job.collective_share
    assert np.ndim(step._dp_share(job, np.ones((3, 4)), np.ones((3, 4)))) == 0


def test_the_nvls_comparison_price_is_the_hierarchical_all_reduce() -> None:
    # the comparison price auto's choice reports (it weighs no alpha-beta hierarchical form for the rest of a mixed
    # grid) is the all-reduce group_time prices as hierarchical wherever NVLS applies: 2 ranks, 8 in a node, 16 over 2
    net = build_network(load_cluster("dgx-h100"))
    S = np.array([1e6, 64e6, 256e6])
    for p in (2.0, 8.0, 16.0):
        pl = place(p, 1.0, net)
        assert coll.priced_group_time("allreduce", S, pl).hierarchical == pytest.approx(
            coll.group_time("allreduce", S, pl, algorithm="hierarchical"), rel=1e-12)
