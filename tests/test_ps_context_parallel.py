"""A parameter server's exchange with context parallelism spans the dp x cp ranks, as the all-reduce does.

The cp ranks of a replica hold the same weights and partial gradients of their own sequence chunks, so they
reduce together with the replicas (Megatron-Core's dp-cp group; dp_comm._dp_comm's ``data.sharding``). Hand count
on DGX A100 (8 GPUs a node), 16 GPUs, tp = pp = 1:

- cp = 2, dp = 8: the dp-cp group is 16 ranks 1 GPU apart, so a node holds c0 = 8 of them; it reduces its
  8 GPUs' P bytes each over NVLink and pushes 8 P / 8 = P bytes (with the dp-only group, c0 = 8 / 2 = 4 and
  the node pushed 8 P / 4 = 2 P: each cp rank's partial gradient separately).
- cp = 1, dp = 16: the same 16 ranks, the same P per GPU (no ZeRO: every GPU holds the stage's gradient):
  the same push, so the same exchange.
"""

from __future__ import annotations

from typing import Any

import pytest

from scalemodel.cost import ps
from scalemodel.engine import dp_comm
from scalemodel.engine.predict import predict
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def _exchange(monkeypatch: pytest.MonkeyPatch, cp: int) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    real_ps, real_step = ps.ps_exchange, dp_comm._ps_exchange

    def spy_step(job, g, data, gpu_bytes):  # type: ignore[no-untyped-def]
        seen["gpu_bytes"] = float(gpu_bytes.reshape(-1)[0])
        return real_step(job, g, data, gpu_bytes)

    def spy_ps(machines, servers, machine_bytes, *args, **kw):  # type: ignore[no-untyped-def]
        out = real_ps(machines, servers, machine_bytes, *args, **kw)
        seen.update(machines=float(machines.reshape(-1)[0]), machine_bytes=float(machine_bytes.reshape(-1)[0]),
                    time=float(out["time"].reshape(-1)[0]), intra=float(kw["intra_s"].reshape(-1)[0]))
        return out

    monkeypatch.setattr(dp_comm, "_ps_exchange", spy_step)
    monkeypatch.setattr(dp_comm.ps, "ps_exchange", spy_ps)
    pred = predict(load_cluster("dgx-a100", []), load_workload("gpt-1.7b", []), 16,
                   TrainingSpec(global_batch=32, micro_batch=1),
                   StrategySpec(tp=1, pp=1, cp=cp, dp=16 // cp, dp_comm="ps:2", overlap=False))
    assert pred.feasible
    return seen


def test_node_pushes_its_reduced_gradient_once_with_cp(monkeypatch: pytest.MonkeyPatch) -> None:
    with_cp = _exchange(monkeypatch, cp=2)
    assert with_cp["machines"] == 2.0
    assert with_cp["machine_bytes"] == pytest.approx(8 * with_cp["gpu_bytes"] / 8, rel=1e-12)
    assert with_cp["intra"] > 0  # the node's 8 ranks reduce-scatter before the push, all-gather after


def test_cp_and_dp_over_the_same_ranks_exchange_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    with_cp = _exchange(monkeypatch, cp=2)
    dp_only = _exchange(monkeypatch, cp=1)
    assert with_cp["gpu_bytes"] == pytest.approx(dp_only["gpu_bytes"], rel=1e-12)
    for key in ("machine_bytes", "intra", "time"):
        assert with_cp[key] == pytest.approx(dp_only[key], rel=1e-12), key
