"""Compute slowed by the communication hidden under it (docs/model.md#contention): the SM share of the
collective library from the catalog's datasheet and NCCL counts, and the term against a hand
composition of the overlap rules."""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.cost import collectives as coll
from scalemodel.cost import compute
from scalemodel.engine.job import build_job, collective_share, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import StrategySpec, TrainingSpec, load_accelerator, load_cluster, load_workload


def val(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


def run(job, training, gpus, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, TrainingSpec(**training), gpus, job)
    return evaluate(job, g, sync=st.sync)


@pytest.mark.parametrize(("name", "expected"), [
    ("a100-sxm-80g", 24 / 108),  # 24 NCCL channels on HGX A100, 108 SMs
    ("h100-sxm", 16 / 132),  # 16 NVLS channels, 132 SMs
    ("h200-sxm", 16 / 132),
    ("h100-pcie", 0.0),  # SM count known, channel count not set
    ("mi300x", 56 / 304),  # 56 RCCL ring channels on an 8-GPU xGMI mesh (test below), 304 CUs
    ("mi325x", 56 / 304),  # the same gfx942 die and RCCL code path
    ("tpu-v5p", 0.0),  # ICI collectives do not run on the TensorCores
])
def test_collective_share_from_the_catalog(name: str, expected: float) -> None:
    assert collective_share(load_accelerator(name)) == pytest.approx(expected, rel=1e-12)


def rccl_gfx942_channels(rings: int, nic_rings: bool, cus: int = 304, ranks: int = 8) -> int:
    """RCCL's collective channels on one gfx942 node, walked by hand from ncclTopoPostset (src/graph/connect.cc,
    ROCm/rccl@0cbce2a7 and @08814b0a): maxChannels = MAXCHANNELS 128 unless the part has 80 / 20 / 38 CUs (then its
    CU count), at most 64 when the rings run through NICs (nIntraChannels > 0) or across nodes; the model's rings are
    doubled when they fit in half of it; nc = min(maxChannels / rings, nc0) x rings with nc0 = 2 at 8 ranks (init.cc;
    16 at 2 ranks, 4 at 4), and copyChannels extends the channels to max(doubled, nc)."""
    max_channels = cus if cus in (80, 20, 38) else 128
    if nic_rings:
        max_channels = min(64, max_channels)
    doubled = min(max_channels, 2 * rings if rings <= max_channels // 2 else rings)
    nc0 = {2: 16, 4: 4}.get(ranks, 2)
    nc = min(max_channels // rings, nc0) * rings
    return max(doubled, nc)


def test_rccl_channel_count_on_an_mi300x_node() -> None:
    """mi300x / mi325x collective_units: RCCL's topology model of an 8-GPU MI300X mesh without NICs
    (src/graph/rome_models.cc rome_model_79) lists 28 rings -> 56 channels; the 8-NIC model (rome_model_81) lists 64
    NIC rings -> 64 (the catalog keeps the lower 56)."""
    assert rccl_gfx942_channels(28, nic_rings=False) == 56
    assert rccl_gfx942_channels(64, nic_rings=True) == 64
    for name in ("mi300x", "mi325x"):
        acc = load_accelerator(name)
        assert acc.collective_units == rccl_gfx942_channels(28, nic_rings=False) and acc.compute_units == 304


def test_tensor_parallel_backward_overlap_slows_the_weight_gradient_gemms() -> None:
    """TP 8, dp 1: the backward all-reduces hidden under the weight-gradient GEMMs (2 per layer) occupy 24 of the
    A100's 108 SMs: m x 24/108 x min(2 L t_ar, a wgrad), and the output layer's input-gradient all-reduce under its
    own weight-gradient GEMM G (docs/model.md#output-tp-comm): + m x 24/108 x min(t_ar, G).

    Since tp33 (docs/model.md#tp33) each all-reduce hides only under its own column-parallel linear's weight-gradient
    GEMM (NVIDIA/TransformerEngine@c55e425ac5 pytorch/module/linear.py L582-588 / L676-679, layernorm_linear.py
    L662-668 / L753-756: issued async after the data-gradient GEMM, waited on before the linear's backward returns),
    not the whole layer's: the window is the column-parallel linears' share a of the layer's forward GEMM time. For
    gpt-7.5b (not gated, ffn 4h, no GQA) the weight GEMMs are QKV 3h^2, O-proj h^2, FC1 4h^2, FC2 4h^2 a layer, the
    column-parallel ones QKV + FC1: a = 7/12."""
    a100, gpt = load_cluster("dgx-a100"), load_workload("gpt-7.5b")
    b, s, h, L = 2, gpt.seq_len, gpt.hidden, gpt.layers
    training = dict(global_batch=8, micro_batch=b)
    job = build_job(a100, gpt, TrainingSpec(**training))
    res = run(job, training, 8, tp=8)
    t_ar = val(coll.collective_time("allreduce", b * s * h * 2.0, 8, job.network, stride=1))
    layer = compute.layer_compute_time(job.shape, micro_batch=b, seq_len=s, peak_flops=job.peak_flops,
                                       memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                       gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                       tp=8, flash_attention=True)
    wgrad = (3 + 4) / (3 + 1 + 4 + 4) * L * val(layer.forward_gemm)  # a = (QKV + FC1) / layer = 7/12 (tp33)
    m = 8 // b
    head = val(compute.logits_compute_time(job.shape, micro_batch=b, seq_len=s, peak_flops=job.peak_flops,
                                           memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                           gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                           tp=8).forward_gemm)
    expected = m * (24 / 108) * (min(L * 2 * t_ar, wgrad) + min(t_ar, head))
    assert val(res.breakdown["contention"]) == pytest.approx(expected, rel=1e-9)
    # the slowed micro-batch is what the step repeats: without the share, exactly that much less
    off = run(replace(job, collective_share=0.0), training, 8, tp=8)
    assert val(off.breakdown["contention"]) == 0.0
    assert val(res.step_time) - val(off.step_time) == pytest.approx(expected, rel=1e-9)


def test_data_parallel_overlap_slows_the_last_backward() -> None:
    """Pure DP 64 on A100s: the gradient buckets hidden under the last backward (all of the traffic
    but its exposed part) slow it by 24/108 of their length; without overlap nothing is hidden."""
    a100, gpt = load_cluster("dgx-a100"), load_workload("gpt-7.5b")
    training = dict(global_batch=64, micro_batch=1)
    job = build_job(a100, gpt, TrainingSpec(**training))
    grads = job.params * 2.0
    # DDP buckets of 25 MiB (bucket_cap_mb * 1024 * 1024 = 26,214,400 B) = 13,107,200 fp16 elements:
    # ceil(grads / 26,214,400) = ceil(569.1) = 570, but DDP never splits a tensor (dp_comm.bucket_count): gpt-7.5b's
    # 36 x 4 weight matrices (QKV 4096 x 12288, proj 4096 x 4096, fc1, fc2: >= 16.8M elements each) and the
    # 51200 x 4096 embedding each close a bucket, and its biases and LayerNorms (53,248 elements a layer + the final
    # norm's 8,192) are counted as one more: 146 buckets
    n = 36 * 4 + 1 + 1
    assert int(np.ceil(grads / (25 * 1024 * 1024))) == 570
    total = n * val(coll.collective_time("allreduce", grads / n, 64, job.network, algorithm="ring", stride=1))
    on = run(job, training, 64, algorithm="ring", overlap=True)
    exposed = val(on.breakdown["dp_comm"])
    assert 0.0 < exposed < total
    assert val(on.breakdown["contention"]) == pytest.approx((24 / 108) * (total - exposed), rel=1e-9)
    off = run(job, training, 64, algorithm="ring", overlap=False)
    assert val(off.breakdown["contention"]) == 0.0
    # hiding is still worth it: 1 - 24/108 of each hidden second is saved
    assert val(on.step_time) < val(off.step_time)


def test_contention_never_exceeds_the_share_of_compute() -> None:
    """Hidden traffic never exceeds the compute under it, so the term is at most share x compute."""
    a100, gpt = load_cluster("dgx-a100"), load_workload("gpt-7.5b")
    training = dict(global_batch=64, micro_batch=1)
    job = build_job(a100, gpt, TrainingSpec(**training))
    for strategy in ({"zero": 3}, {"tp": 8, "zero": 1}, {"tp": 2, "pp": 2}):
        res = run(job, training, 64, **strategy)
        assert 0.0 <= val(res.breakdown["contention"]) <= (24 / 108) * val(res.breakdown["compute"]) * (1 + 1e-12)
