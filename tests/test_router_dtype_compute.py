"""The router's fp32 / fp64 compute (training.moe_router_dtype; docs/model.md#router-dtype-compute,
cost.compute.router_dtype_times). Megatron-Core's RouterGatingLinearFunction (moe_utils.py,
NVIDIA/Megatron-LM@9c5258f109) runs the fp32 router's forward as a 16-bit GEMM with an fp32 output and its two
backward GEMMs as fp32 x fp32 GEMMs, which Transformer Engine computes as TF32 (cublaslt_gemm.cu,
CUBLAS_COMPUTE_32F_FAST_TF32), around a cast of the input to fp32 and of the input gradient back; fp64 runs
torch.mm in fp64 both ways. Every expected value below is
written out from the roofline (FLOPs at peak x gemm_max x prod d/(d + d0), or bytes at HBM x efficiency, the larger)
by hand, not by calling the function under test's helpers."""
from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy, transformer_shape
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec

H, E, S = 2048, 128, 4096
P16, P32, P64 = 1000e12, 500e12, 60e12
BW, EFF, GM, D0 = 3.0e12, 0.8, 0.7, 100.0


def _wl(experts: int = E) -> TransformerWorkload:
    return TransformerWorkload(name="moe", layers=4, hidden=H, heads=16, kv_heads=4, ffn_hidden=6144, gated_mlp=True,
                               vocab=32000, seq_len=S, tied_embeddings=False,
                               moe=MoESpec(experts=experts, top_k=8, ffn_hidden=768) if experts else None)


def _gemm(T: float, peak: float, eb: float) -> float:
    """Roofline of one T x E x h GEMM, by hand."""
    f = lambda d: d / (d + D0)  # noqa: E731
    t_c = 2 * T * E * H / (peak * GM * f(T) * f(E) * f(H))
    t_m = (T * H + H * E + T * E) * eb / (BW * EFF)
    return max(t_c, t_m)


def _times(rb: float, peak_r: float, **kw):  # type: ignore[no-untyped-def]
    sh = transformer_shape(_wl())
    args = dict(micro_batch=2, seq_len=S, router_bytes=rb, router_peak_flops=peak_r, peak_flops=P16,
                memory_bandwidth=BW, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=EFF, elem_bytes=2.0)
    args.update(kw)
    f, b = compute.router_dtype_times(sh, **args)
    return float(np.ravel(f)[0]), float(np.ravel(b)[0])


def test_fp32_router_backward_tf32_gemms_and_two_casts() -> None:
    T = 2 * S
    gemm = _gemm(T, P32, 4.0) - _gemm(T, P16, 2.0)
    cast = (4 + 2) * T * H / (BW * EFF)
    f, b = _times(4.0, P32)
    assert f == 0.0  # the forward is the 16-bit GEMM with an fp32 output
    assert b == pytest.approx(2 * gemm + 2 * cast, rel=1e-12)
    # magnitude: 8192 tokens, 2 x (8.6 GFLOP at half the rate) + 2 x 100.7 MB at 2.4 TB/s
    assert 0.09e-3 < b < 0.12e-3


def test_fp64_router_forward_and_backward() -> None:
    T = 2 * S
    gemm = _gemm(T, P64, 8.0) - _gemm(T, P16, 2.0)
    cast = (8 + 2) * T * H / (BW * EFF)
    f, b = _times(8.0, P64)
    assert f == pytest.approx(gemm + cast, rel=1e-12)
    assert b == pytest.approx(2 * (gemm + cast), rel=1e-12)


def test_sequence_parallel_routes_the_local_slice_and_unset_is_zero() -> None:
    T = 2 * S / 4  # tp 4 with sequence parallelism: each TP rank routes its own s / tp tokens
    gemm = _gemm(T, P32, 4.0) - _gemm(T, P16, 2.0)
    cast = (4 + 2) * T * H / (BW * EFF)
    _, b = _times(4.0, P32, tp=4, sequence_parallel=True)
    assert b == pytest.approx(2 * gemm + 2 * cast, rel=1e-12)
    assert _times(0.0, 0.0) == (0.0, 0.0)
    dense = compute.router_dtype_times(transformer_shape(_wl(0)), micro_batch=2, seq_len=S, router_bytes=4.0,
                                       router_peak_flops=P32, peak_flops=P16, memory_bandwidth=BW)
    assert float(np.ravel(dense[1])[0]) == 0.0


def _job(router: str | None, precision: str = "bf16", cluster: str = "dgx-h100"):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision=precision, seq_len=S, moe_router_dtype=router,
                      moe_rank_imbalance=1.0)
    return build_job(load_cluster(cluster), _wl(), tr), tr


def test_job_reads_the_tf32_peak_and_the_step_adds_the_term() -> None:
    job, tr = _job("fp32")
    assert job.router_peak_flops == pytest.approx(494.7e12)  # H100 SXM dense TF32 (hardware/accelerators)
    base, _ = _job(None)
    assert base.router_peak_flops == 0.0
    st = StrategySpec(tp=1, dp=8, ep=8)
    g = grid_from_strategy(st, tr, 8, job)
    one = np.zeros(1)
    f, b, r = layer_compute._with_router_dtype(job, g, one, one, one)
    sh = job.shape
    T = 2 * S
    kw = dict(memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
              memory_efficiency=job.memory_efficiency)
    fl = lambda d: d / (d + job.gemm_half_dim)  # noqa: E731
    g32 = max(2 * T * E * H / (494.7e12 * job.gemm_max * fl(T) * fl(E) * fl(H)),
              (T * H + H * E + T * E) * 4 / (kw["memory_bandwidth"] * kw["memory_efficiency"]))
    g16 = max(2 * T * E * H / (job.peak_flops * job.gemm_max * fl(T) * fl(E) * fl(H)),
              (T * H + H * E + T * E) * 2 / (kw["memory_bandwidth"] * kw["memory_efficiency"]))
    want = 2 * (g32 - g16) + 2 * 6 * T * H / (job.memory_bandwidth * job.memory_efficiency)
    assert float(np.ravel(b)[0]) == pytest.approx(float(sh.moe_layers / sh.layers) * want, rel=1e-9)
    assert float(np.ravel(f)[0]) == 0.0 and float(np.ravel(r)[0]) == 0.0  # no recompute: nothing repeated
    # a step with the fp32 router is slower than the same step with the BF16 one, by the backward term per layer
    t32 = layer_compute._compute_per_microbatch(job, g, np.asarray([4.0]))["total"]
    t16 = layer_compute._compute_per_microbatch(replace(job, router_bytes=0.0, router_peak_flops=0.0), g,
                                       np.asarray([4.0]))["total"]
    assert float(np.ravel(t32 - t16)[0]) == pytest.approx(4 * float(sh.moe_layers / sh.layers) * want, rel=1e-9)


def test_fp8_run_prices_the_router_delta_against_the_bf16_curve() -> None:
    job, tr = _job("fp32", precision="fp8")
    assert job.logits_peak_flops == pytest.approx(989.4e12)  # the router's 16-bit GEMM stays BF16 in an fp8 run
    g = grid_from_strategy(StrategySpec(tp=1, dp=8, ep=8), tr, 8, job)
    one = np.zeros(1)
    _, b, _ = layer_compute._with_router_dtype(job, g, one, one, one)
    T = 2 * S
    gm, d0 = job.logits_gemm_max, job.logits_gemm_half_dim
    fl = lambda d: d / (d + d0)  # noqa: E731
    den = gm * fl(T) * fl(E) * fl(H)
    g32 = max(2 * T * E * H / (494.7e12 * den), (T * H + H * E + T * E) * 4 / (job.memory_bandwidth
                                                                                * job.memory_efficiency))
    # an fp8 run keeps 16-bit activations (Precision.element_bytes 2): the router reads the BF16 norm output
    g16 = max(2 * T * E * H / (989.4e12 * den), (T * H + H * E + T * E) * 2 / (job.memory_bandwidth
                                                                                * job.memory_efficiency))
    want = 2 * (g32 - g16) + 2 * (4 + 2) * T * H / (job.memory_bandwidth * job.memory_efficiency)
    assert float(np.ravel(b)[0]) == pytest.approx(want, rel=1e-9)


def test_fp64_router_without_an_fp64_peak_is_refused() -> None:
    wl = _wl()
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="bf16", seq_len=S, moe_router_dtype="fp64")
    cluster = load_cluster("dgx-h100")
    acc = cluster.accelerator.model_copy(update={"peak_flops": {k: v for k, v in cluster.accelerator.peak_flops.items()
                                                                  if k != "fp64"}})
    with pytest.raises(InputError, match="training.moe_router_dtype"):
        build_job(cluster.model_copy(update={"accelerator": acc}), wl, tr)
