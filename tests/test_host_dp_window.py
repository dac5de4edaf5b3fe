"""The GPU's wait on the host as a window of the data-parallel traffic (docs/model.md#host-dp-window,
dp_comm._sync_comm): the idle ``w`` per micro-batch stretches the forward and backward free windows (f, b) alike,

    f' = f + w f / (f + b),    b' = b + w b / (f + b)

and the traffic is exposed against (f', b') as against the compute's windows. Checked by hand here: the units'
traffic (one unit's all-gather AG and reduce-scatter RS) is read off the engine's exposure at windows of 0 and of
10^6 s, and the exposure at the stretched windows is then put together from the ZeRO-3 formula
(dp_comm._sharded_parameter_traffic, Rajbhandari et al. 2020 / FSDP reshard_after_forward=False):

    exposed = m (AG + (L-1) max(0, AG - f'/L) + (L-1) max(0, RS - b'/L) + RS)

and the gradient buckets' (dp_comm._expose: max(G - b', G x last bucket)) likewise."""

from __future__ import annotations

import msgspec
import numpy as np

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.dp_comm import _sync_comm
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.step import _stage, evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec

BIG = 1e6


def _setup(**arrays):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("dgx-h100"), load_workload("mixtral-8x7b"), TrainingSpec(precision="bf16",
                                                                                         seq_len=2048))
    base = dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=16, overlap=True, moe_layer_host_s=0.0)
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in {**base, **arrays}.items()})
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    layers = np.asarray([float(job.shape.layers)])
    comp = dict(_stage(job, g, groups, layers, True).busy, pipeline_rank=np.zeros(1))
    return job, g, groups, comp


def _exposed(job, g, groups, comp, f, b, idle=0.0):  # type: ignore[no-untyped-def]
    c = dict(comp, forward_free=np.asarray([f]), backward_free=np.asarray([b]))
    cross, in_group, total, _, hidden = _sync_comm(job, g, c, np.asarray([2.0]), "bsp", groups, idle=idle)
    assert in_group is None
    return float(cross[0]), float(total[0]), float(hidden[0])


def test_zero3_units_hide_under_the_stretched_windows() -> None:
    """ZeRO-3 with the gathered parameters kept for the backward (reshard_after_forward false): L AG + L RS a
    micro-batch, m = 2. AG and RS from two engine exposures (forward free 0 / backward free 10^6 s: L AG + RS;
    forward 10^6 / backward 0: AG + L RS), then the stretched windows by hand."""
    job, g, groups, comp = _setup(zero=3, fsdp_reshard_after_forward=False)
    L, m = float(job.shape.layers), 2.0
    a = _exposed(job, g, groups, comp, 0.0, BIG)[0] / m  # L AG + RS
    c = _exposed(job, g, groups, comp, BIG, 0.0)[0] / m  # AG + L RS
    AG, RS = (L * a - c) / (L * L - 1.0), (L * c - a) / (L * L - 1.0)
    assert AG > 0 and RS > 0
    f, b = 0.5 * L * AG, 0.25 * L * RS  # half of each unit's gather and a quarter of its reduce-scatter hide
    e0, total, hidden0 = _exposed(job, g, groups, comp, f, b)
    assert hidden0 == 0.0
    assert np.isclose(e0, m * (AG + (L - 1) * 0.5 * AG + (L - 1) * 0.75 * RS + RS), rtol=1e-9)
    w = 0.5 * (f + b)  # the idle: both windows 1.5x as long
    e, _, hidden = _exposed(job, g, groups, comp, f, b, idle=w)
    fs, bs = 1.5 * f, 1.5 * b
    want = m * (AG + (L - 1) * max(AG - fs / L, 0.0) + (L - 1) * max(RS - bs / L, 0.0) + RS)
    assert np.isclose(e, want, rtol=1e-9)
    assert np.isclose(hidden, e0 - want, rtol=1e-9)
    assert hidden <= m * w  # the idle hides no more than its own length
    # an idle longer than the traffic: every unit but the first gather and the last reduce-scatter hidden
    e_long, _, _ = _exposed(job, g, groups, comp, f, b, idle=BIG)
    assert np.isclose(e_long, m * (AG + RS), rtol=1e-9)
    assert total > e0


def test_gradient_buckets_take_the_backward_share_of_the_idle() -> None:
    """Plain data parallelism (all-reduce buckets under the last backward): exposed = max(G - b', G x last bucket),
    b' = b + w b / (f + b); the forward's share of the idle hides nothing of them."""
    job, g, groups, comp = _setup(zero=0)
    G = _exposed(job, g, groups, comp, 0.0, 0.0)[0]
    G_last = _exposed(job, g, groups, comp, 0.0, BIG)[0]
    assert 0 < G_last < G
    f, b = 0.3 * G, 0.2 * G
    w = 0.5 * G  # b' = 0.2 G + 0.5 G x 0.4 = 0.4 G
    e, _, hidden = _exposed(job, g, groups, comp, f, b, idle=w)
    want = max(0.6 * G, G_last)
    assert np.isclose(e, want, rtol=1e-9)
    assert np.isclose(hidden, max(0.8 * G, G_last) - want, rtol=1e-9)


def test_host_wait_step_hides_under_the_idle_and_no_contention() -> None:
    """End to end (the shrunk case of tests/test_physics_wide.py::test_host_wait_hides_dp_traffic): with the host
    binding, what the DP traffic hides beyond the host-free step is at most the step's host wait, and the compute
    is slowed only by what hid under compute (the contention part equals the same step without the host wait)."""
    job = build_job(load_cluster("dgx-h100"), load_workload("mixtral-8x7b"), TrainingSpec(precision="bf16",
                                                                                         seq_len=2048))
    job = msgspec.structs.replace(job, peak_flops=job.peak_flops * 1.25, memory_bandwidth=job.memory_bandwidth * 1.25)
    arrays = dict(gpus=8, dp=1, tp=4, cp=2, pp=1, micro_batch=1, global_batch=4, zero=3, overlap=True,
                  sequence_parallel=True, fsdp_reshard_after_forward=False, moe_permute_fusion=False,
                  tp_async_allreduce=True)

    def run(H: float):  # type: ignore[no-untyped-def]
        r = evaluate(job, grid_from_arrays(**{k: np.asarray([v]) for k, v in {**arrays,
                                                                                "moe_layer_host_s": H}.items()}))
        return {k: float(v[0]) for k, v in r.breakdown.items()}

    with_host, without = run(0.002), run(0.0)
    assert with_host["host"] > 0 and without["host"] == 0
    assert with_host["dp_comm"] < without["dp_comm"]
    assert without["dp_comm"] - with_host["dp_comm"] <= with_host["host"]
    assert np.isclose(with_host["contention"], without["contention"], rtol=1e-12)


def test_the_idle_is_a_window_where_no_compute_is_free() -> None:
    """review27a: the idle is the GPU's wait on the host whatever the model-parallel traffic leaves of the compute's
    windows. Where it leaves none (f = b = 0: the hidden TP/CP/EP/PP traffic fills the compute), the split
    w f / (f + b) is 0 / 0; it gave the idle no window at all, so windows of a nanosecond hid a whole idle's worth
    and windows of 0 none (a step that jumps slower as its free compute reaches 0). There the idle splits as the
    compute does, (F, B) the forward and backward compute: the exposure equals that of windows (w F / (F + B),
    w B / (F + B)) without idle, and tends to it from windows e (F, B) as e -> 0."""
    job, g, groups, comp = _setup(zero=3, fsdp_reshard_after_forward=False)
    F, B = float(comp["forward"][0]), float(comp["backward"][0])
    w = 0.05
    e_idle = _exposed(job, g, groups, comp, 0.0, 0.0, idle=w)[0]
    e_none = _exposed(job, g, groups, comp, 0.0, 0.0)[0]
    want = _exposed(job, g, groups, comp, w * F / (F + B), w * B / (F + B))[0]
    assert e_idle < e_none
    assert np.isclose(e_idle, want, rtol=1e-12)
    eps = 1e-9
    assert np.isclose(_exposed(job, g, groups, comp, eps * F, eps * B, idle=w)[0], want, rtol=1e-6)
