"""speed33's rewrite gives what the code before it gave.

``engine.layer_compute._layer_pieces``: one layer's times, the logits and the per-micro-batch terms that
``_compute_per_microbatch`` reads the job and the grid for, not the stage, are priced once per (job, grid) and shared by
every stage evaluate() prices (ranks, interleaved chunks, the host's probes), instead of once per stage. The reference
here is evaluate() with that memo off (every stage prices its own pieces, as before): every result equal as bytes (so
-0.0 and NaN compare exactly), on dense and MoE jobs, interleaved and plain pipelines, with fp8, recompute and ZeRO
on other axes; and the count of layer pricings per evaluate() falls to one per (job, grid) on a dense interleaved grid.

The range checks of compute.memory_time, gemm_efficiency, attention_efficiency, train_metric_bytes and
transformer._arr / _default read the least and greatest element (checks.all_finite_above / all_finite_nonnegative)
instead of elementwise masks: which inputs they refuse is checked against the elementwise definition.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import numpy as np
import pytest
from grid_helpers import TINY_MOE

from scalemodel.cost import compute, transformer
from scalemodel.cost.checks import all_finite_above, all_finite_nonnegative
from scalemodel.engine import layer_compute, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import StepArrays, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from tests.test_speed32 import random_arrays


def _unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    """evaluate() without the shared block: every stage prices its own pieces (the code before speed33)."""
    monkeypatch.setattr(step, "shared_layer_pieces", contextlib.nullcontext)


def _bytes(res: StepArrays) -> dict[str, bytes]:
    out = {}
    for f in res.__struct_fields__:
        v = getattr(res, f)
        for k, a in (v.items() if isinstance(v, dict) else [("", v)]):
            out[f"{f}.{k}"] = np.ascontiguousarray(np.asarray(a)).tobytes() + str(np.shape(a)).encode()
    return out


def dense_grids(zeros: list[int]) -> list[tuple[Any, Any]]:
    """llama3-8b on 32 dgx-h100 GPUs, global batch 64: an interleaved (tp 2, pp 4, V 2) and a 1F1B (tp 4, pp 2)
    grid, each over the three recompute modes and ``zeros``."""
    out = []
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job = build_job(load_cluster("dgx-h100", []), load_workload("llama3-8b", []), tr)
    for strategy in (StrategySpec(tp=2, pp=4, schedule="interleaved:2"), StrategySpec(tp=4, pp=2)):
        g = grid_from_strategy(strategy, tr, 32, job)
        out.append((job, msgspec.structs.replace(g, recompute=np.arange(3).reshape(1, 3, 1),
                                                 zero=np.array(zeros).reshape(1, 1, len(zeros)))))
    return out


def _grids() -> list[tuple[Any, Any]]:
    out = dense_grids([0, 1])
    tr8 = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8")
    moe = build_job(load_cluster("dgx-h100", []), TINY_MOE, tr8)
    g = grid_from_strategy(StrategySpec(pp=2, ep=2, dp=4), tr8, 8, moe)
    out.append((moe, msgspec.structs.replace(g, recompute=np.arange(3).reshape(1, 3))))
    return out


@pytest.mark.parametrize("case", range(3))
def test_shared_layer_pieces_change_nothing(case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    job, g = _grids()[case]
    shared = _bytes(evaluate(job, g))
    again = _bytes(evaluate(job, g))  # the memo warm from the call before
    _unshared(monkeypatch)
    alone = _bytes(evaluate(job, g))
    assert shared == alone
    assert again == alone


def test_a_layer_is_priced_once_per_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    job, g = _grids()[0]  # dense, interleaved: rank 0, the middle and last ranks, the chunks, the host's probes
    calls = []
    real = compute.layer_compute_time

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(compute, "layer_compute_time", counted)
    evaluate(job, g)
    assert len(calls) == 1  # the one dense layer of this grid
    evaluate(job, g)
    assert len(calls) == 2  # nothing kept from one call to the next
    calls.clear()
    _unshared(monkeypatch)
    evaluate(job, g)
    assert len(calls) > 1  # every stage its own before


def test_another_grid_or_job_gets_its_own_pieces() -> None:
    (job, g), (_, g2) = _grids()[:2]
    b, b2 = g.micro_batch.astype(float), g2.micro_batch.astype(float)
    with layer_compute.shared_layer_pieces():
        a = layer_compute._layer_pieces(job, g, b)
        assert layer_compute._layer_pieces(job, g, b) is a
        with layer_compute.shared_layer_pieces():  # a nested block joins the outer one
            assert layer_compute._layer_pieces(job, g, b) is a
        assert layer_compute._layer_pieces(job, g2, b2) is not a
        other = msgspec.structs.replace(job)  # equal, but another object: never taken for this one
        assert layer_compute._layer_pieces(other, g, b) is not a
    assert layer_compute._layer_pieces(job, g, b) is not a  # outside the block: priced anew
    assert not layer_compute._LAYER_MEMO


def test_range_checks_refuse_as_the_elementwise_definition() -> None:
    """checks.all_finite_above and all_finite_nonnegative (min / max reductions), which compute.memory_time,
    gemm_efficiency, attention_efficiency, train_metric_bytes and transformer._arr / _default now call, against the
    elementwise tests they replace, on 0-d, empty, 1-d and 2-d arrays drawn from NaN, +-inf, -0.0 and finite values on
    both sides of the bound."""
    for a, low in random_arrays(33):
        for strict in (True, False):
            bad = ~np.isfinite(a) | ((a <= low) if strict else (a < low))
            assert all_finite_above(a, low, strict) == (not np.any(bad)), (a, low, strict)
        assert all_finite_nonnegative(a) == (not np.any(~np.isfinite(a) | (a < 0))), a
        refused = bool(np.any(~np.isfinite(a) | (a < 0)))
        with pytest.raises(InputError) if refused else contextlib.nullcontext():
            compute.memory_time(a, memory_bandwidth=1e12)
        with pytest.raises(InputError) if refused else contextlib.nullcontext():
            transformer._default(a, np.zeros(1))
        with pytest.raises(InputError) if np.any(~np.isfinite(a) | (a <= 0)) else contextlib.nullcontext():
            transformer._arr("x", a)
