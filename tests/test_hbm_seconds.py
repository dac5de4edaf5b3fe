"""Every memory-bound term of the step model prices its HBM traffic through one helper, layer_compute._hbm_seconds
(bytes / (HBM bandwidth x memory efficiency), compute.memory_time): a different HBM rule, here a spy that doubles
it, must reach each of them. The values themselves are unchanged by routing (scripts/build_residuals.py --check)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.engine import dp_comm, layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def _job(model: str) -> Any:
    return build_job(load_cluster("dgx-a100", []), load_workload(model, []), TrainingSpec(global_batch=64,
                                                                                           micro_batch=1))


def _grid(job: Any, **strategy: Any) -> Any:
    return grid_from_strategy(StrategySpec(**strategy), TrainingSpec(global_batch=64, micro_batch=1), 16, job)


def _doubled(monkeypatch: pytest.MonkeyPatch, term: Any) -> float:
    """``term()`` with the real helper over ``term()`` with one that doubles every HBM time."""
    plain = float(np.sum(term()))
    real = layer_compute._hbm_seconds
    for module in (layer_compute, dp_comm):  # every module whose functions look it up
        monkeypatch.setattr(module, "_hbm_seconds", lambda job, nbytes: 2.0 * real(job, nbytes))
    doubled = float(np.sum(term()))
    for module in (layer_compute, dp_comm):
        monkeypatch.setattr(module, "_hbm_seconds", real)
    assert plain > 0
    return doubled / plain


def test_optimizer_step(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job("gpt-1.7b")
    g = _grid(job, zero="1")
    assert _doubled(monkeypatch, lambda: dp_comm._optimizer_time(job, g)) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("compression", ["int8", "topk:0.01"])
def test_compression_codec(monkeypatch: pytest.MonkeyPatch, compression: str) -> None:
    job = _job("gpt-1.7b")
    g = _grid(job, compression=compression)
    codec = lambda: dp_comm._wire_and_codec(job, g, np.asarray(1e9))[1]  # noqa: E731
    assert _doubled(monkeypatch, codec) == pytest.approx(2.0, rel=1e-12)


def test_deepspeed_pipeline_gradient_accumulation(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job("gpt-1.7b")
    g = _grid(job, pp=2, deepspeed_pipeline=True)
    assert _doubled(monkeypatch, lambda: layer_compute.grad_accumulation_time(job, g)) == pytest.approx(2.0, rel=1e-12)


def test_generic_workload_memory_roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    # activations large enough that the traffic side of the roofline is the longer one
    job = replace(_job("resnet50"), generic_activation_bytes=1e12, generic_time_per_sample=0.0)
    g = _grid(job)

    def total() -> np.ndarray:
        return layer_compute._compute_per_microbatch(job, g, np.asarray(1.0))["total"]

    assert _doubled(monkeypatch, total) == pytest.approx(2.0, rel=1e-12)
