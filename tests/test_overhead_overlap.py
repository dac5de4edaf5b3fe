"""The cluster's step_overhead and overlap_efficiency (docs/model.md#overhead, #overlap-efficiency),
checked against values worked out by hand from the model's formulas."""

from __future__ import annotations

import math

import pytest

from scalemodel.engine.predict import predict
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

# ResNet-50 with a measured compute time: 4 ms per sample, backward = 2 x forward (backward_factor 2),
# so one micro-batch of 64 computes 0.256 s of which the backward is 2/3 (0.17067 s). 32 GPUs, one
# micro-batch each; PCIe + 25 GbE cluster without jitter (no straggler term, no SM contention).
TPS, MB, GPUS = 0.004, 64, 32


def _resnet(*overrides: str, overlap: bool = True):  # type: ignore[no-untyped-def]
    cl = load_cluster("pcie-25gbe", ["variability.cv=0", *overrides])
    wl = load_workload("resnet50", [f"time_per_sample={TPS}"])
    tr = TrainingSpec(global_batch=MB * GPUS, micro_batch=MB, precision="fp32")
    return predict(cl, wl, GPUS, tr, StrategySpec(overlap=overlap))


def test_overhead_adds_its_seconds_as_its_own_part() -> None:
    base = _resnet()
    o = 0.25
    p = _resnet(f"step_overhead={o}")
    assert base.breakdown_s["overhead"] == 0.0
    assert p.breakdown_s["overhead"] == o
    assert p.step_time_s == pytest.approx(base.step_time_s + o, rel=1e-12)
    assert sum(p.breakdown_s.values()) == pytest.approx(p.step_time_s, rel=1e-12)
    # every other part is untouched; rates use the longer step
    assert {k: v for k, v in p.breakdown_s.items() if k != "overhead"} == {
        k: v for k, v in base.breakdown_s.items() if k != "overhead"}
    assert p.throughput["samples_per_s"] == pytest.approx(MB * GPUS / (base.step_time_s + o), rel=1e-12)


def test_overhead_accepts_units_and_refuses_negative() -> None:
    assert _resnet("step_overhead=150ms").breakdown_s["overhead"] == pytest.approx(0.15)
    with pytest.raises(InputError):
        _resnet("step_overhead=-1")
    with pytest.raises(InputError):
        _resnet("overlap_efficiency=0")
    with pytest.raises(InputError):
        _resnet("overlap_efficiency=1.2")


def test_overlap_efficiency_shrinks_the_backward_window_by_hand() -> None:
    """Exposed DP = max(G - eta x backward, G / n_buckets) (docs/model.md#dp-comm), G the whole
    gradient all-reduce (what overlap: false exposes), backward = 2/3 x 0.256 s, n = ceil(25.56M x 4 B / 25 MiB)."""
    g = _resnet(overlap=False).breakdown_s["dp_comm"]
    backward = 2.0 / 3.0 * TPS * MB
    n = math.ceil(25_557_032 * 4 / (25 * 1024 * 1024))  # 102,228,128 / 26,214,400 = 3.90 (5.11 with 25e6 B)
    assert n == 4
    for eta in (1.0, 0.5, 0.3, 0.1, 0.01):
        got = _resnet(f"overlap_efficiency={eta}").breakdown_s["dp_comm"]
        assert got == pytest.approx(max(g - eta * backward, g / n), rel=1e-9), eta
    # the worked values: at 0.1 the window hides 17.07 ms of the 106.36 ms sync (ring bandwidth term
    # 2 x 31/32 x 102.23 MB / (8 x 390.625 MB/s x 0.62) = 102.228 ms, plus 4 buckets' latency, 1.0318 ms each (the
    # same size-independent latency of one 32-rank ring all-reduce that made 5.159 ms of the 107.387 ms sync when
    # the buckets were 25e6 B and 5): 102.228 + 4 x 1.0318 = 106.355 ms)
    assert _resnet("overlap_efficiency=0.1").breakdown_s["dp_comm"] == pytest.approx(0.1063554 - 0.0170667, rel=1e-5)


@pytest.mark.parametrize(("model", "gpus", "strategy"), [
    ("gpt3-175b", 1024, dict(tp=8, pp=8, schedule="interleaved:4", recompute="selective", sequence_parallel=True)),
    ("llama2-13b", 64, dict(tp=4, cp=2, zero="fsdp")),
    ("llama3-8b", 64, dict(zero="fsdp")),
])
def test_less_overlap_is_never_faster_and_one_is_the_default(model: str, gpus: int, strategy: dict) -> None:
    tr = TrainingSpec(global_batch=512, micro_batch=1, precision="bf16")
    st = StrategySpec(**strategy)
    wl = load_workload(model)
    default = predict(load_cluster("dgx-a100"), wl, gpus, tr, st).step_time_s
    steps = [predict(load_cluster("dgx-a100", [f"overlap_efficiency={e}"]), wl, gpus, tr, st).step_time_s
             for e in (1.0, 0.8, 0.5, 0.2, 0.05)]
    assert steps[0] == default
    assert all(b >= a * (1 - 1e-12) for a, b in zip(steps, steps[1:], strict=False)), steps
    assert steps[-1] > steps[0]  # these layouts do hide traffic, so the factor shows


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_planner_stays_exact_with_overhead_and_partial_overlap(seed: int) -> None:
    """The decomposed search's bounds still hold when windows shrink and every step carries an overhead:
    it finds the brute force's best (the planner tests' own brute force, on the modified job)."""
    import numpy as np
    from msgspec.structs import replace
    from test_planner import _brute_force_best, _job  # the planner tests' independent enumeration

    from scalemodel.engine import planner

    rng = np.random.default_rng(seed)
    gpus = int(rng.choice([8, 16]))
    batch = gpus * 2
    job, _cl, _wl = _job(cluster="dgx-a100", model="llama2-13b", sets=["layers=8"], global_batch=batch)
    job = replace(job, overlap_efficiency=float(rng.choice([0.3, 0.6])), step_overhead=0.1)
    cons = {"cp": [("<=", 2)]}
    expect, n = _brute_force_best(job, gpus, batch, cons, ("bsp",), (), "throughput")
    res = planner.search(job, gpus, batch, top=3, constraints=cons, sync_modes=("bsp",), objective="throughput")
    assert res.candidates_evaluated == n
    assert np.isfinite(expect) and res.objective_values[0] == pytest.approx(expect, rel=1e-12)
