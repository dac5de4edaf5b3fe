"""speed34's rewrite gives what the code before it gave.

``cost.memory.memory_per_gpu`` computes the terms of a stage's model states that read no stage argument (the checked
degrees, the expert-DP ranks, the gathered ZeRO-3 unit and linear weights, the cached-copy bytes) and
``params_per_gpu``'s shape terms once per ``shared`` dict, which ``engine.stage_memory`` keeps for the stages of one
strategy grid (``_memory_kwargs``), instead of once per stage. The reference here is the same code with the memo off
(``memory._once`` computing every time, as before): every part of every stage equal as bytes (so -0.0 and NaN compare
exactly), on dense, MoE, MTP and FSDP grids with ZeRO, recompute and pipelines on other axes; the memo's rule (same
argument objects, by identity) is counted by hand, and the gathered unit is priced once per peak-stage call.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from grid_helpers import TINY_MOE
from test_speed33 import dense_grids

from scalemodel.cost import memory
from scalemodel.engine import stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def _grids() -> list[tuple[Any, Any]]:
    """(job, grid) pairs: a dense model on 1F1B and interleaved pipelines with ZeRO 0-3 and recompute axes, FSDP
    without resharding (every unit kept gathered), an fp8 MoE grid with expert parallelism, and a model with MTP."""
    out = dense_grids([0, 1, 2, 3])
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job = out[0][0]
    g = grid_from_strategy(StrategySpec(tp=2, zero="fsdp", fsdp_reshard_after_forward=False), tr, 32, job)
    out.append((job, g))
    tr8 = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8")
    moe = build_job(load_cluster("dgx-h100", []), TINY_MOE, tr8)
    g = grid_from_strategy(StrategySpec(pp=2, ep=2, dp=4), tr8, 8, moe)
    out.append((moe, msgspec.structs.replace(g, recompute=np.arange(3).reshape(1, 3),
                                             zero=np.array([0, 1, 3]).reshape(1, 1, 3))))
    trd = TrainingSpec(global_batch=1024, micro_batch=1)
    ds = build_job(load_cluster("dgx-h100", []), load_workload("examples/workloads/deepseek-v3.yaml", []), trd)
    out.append((ds, grid_from_strategy(StrategySpec(pp=16, ep=64, zero=1), trd, 1024, ds)))
    return out


def _bytes(parts: dict[str, np.ndarray]) -> dict[str, bytes]:
    return {k: np.ascontiguousarray(np.asarray(v)).tobytes() + str(np.shape(v)).encode() for k, v in parts.items()}


@pytest.mark.parametrize("case", range(5))
def test_peak_stage_memory_equals_the_unshared_code_bitwise(case: int, monkeypatch: pytest.MonkeyPatch) -> None:
    job, g = _grids()[case]
    m = microbatches(g)
    shared = [_bytes(stage_memory.memory_parts(job, g, m, sync=s)) for s in ("bsp", "hier:2")]
    shared_total = stage_memory.memory_total(job, g, m)
    # the code before speed34: every stage computes its own terms
    monkeypatch.setattr(memory, "_once", lambda _shared, _key, _args, make: make())
    assert [_bytes(stage_memory.memory_parts(job, g, m, sync=s)) for s in ("bsp", "hier:2")] == shared
    assert _bytes({"t": stage_memory.memory_total(job, g, m)}) == _bytes({"t": shared_total})


def test_once_computes_once_per_dict_for_the_same_argument_objects() -> None:
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        return len(calls)

    a, b = np.ones(3), np.ones(3)  # equal values, distinct objects
    memo: dict[str, Any] = {}
    assert memory._once(memo, "k", (a,), make) == 1
    assert memory._once(memo, "k", (a,), make) == 1  # the same object: kept
    assert memory._once(memo, "k", (b,), make) == 2  # another object, even of equal values: computed again
    assert memory._once(memo, "j", (b,), make) == 3  # another key: its own entry
    assert memory._once(None, "k", (b,), make) == 4  # no dict: every call computes
    assert memory._once(None, "k", (b,), make) == 5
    assert len(calls) == 5


def test_gathered_unit_priced_once_per_peak_stage_call(monkeypatch: pytest.MonkeyPatch) -> None:
    job, g = _grids()[1]  # pp 2: the first and the last stage priced (the middle stage holds no more layers)
    m = microbatches(g)
    n: list[int] = []
    real = memory.gathered_unit
    monkeypatch.setattr(memory, "gathered_unit", lambda *a, **k: n.append(1) or real(*a, **k))
    stage_memory.memory_parts(job, g, m)
    assert len(n) == 1  # two stages, one pricing (two before)
    stage_memory.memory_parts(job, g, m)
    assert len(n) == 2  # nothing kept between calls
