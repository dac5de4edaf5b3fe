"""XLA's full remat (a TPU program): the recomputed forward leaves out the MLP down-projection and the TP
collective after it (cost.compute.layer_compute_time ``xla_remat``; engine.layer_compute.xla_remat)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.compute import layer_compute_time
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.predict import predict
from scalemodel.specs import StrategySpec, TrainingSpec, TransformerWorkload, load_cluster

# ideal roofline: every GEMM at peak (gemm_max 1, no size penalty), memory free -> time = FLOPs / peak
IDEAL = dict(peak_flops=1e15, memory_bandwidth=1e30, gemm_max=1.0, gemm_half_dim=0.0)


def test_xla_remat_saves_exactly_the_down_projection_flops():
    # b=2, s=1024, h=4096, f=16384, tp=4: down GEMM = 2 T h f / t = 2*2048*4096*16384/4 = 6.872e10 FLOP
    sh = shape(layers=1, hidden=4096, heads=32, ffn_hidden=16384, vocab=32000)
    kw = dict(micro_batch=2, seq_len=1024, tp=4, recompute="full", flash_attention=True, **IDEAL)
    torch_like = layer_compute_time(sh, **kw)
    xla = layer_compute_time(sh, xla_remat=True, **kw)
    down_s = 2 * 2048 * 4096 * 16384 / 4 / 1e15
    assert float(torch_like.recompute) == pytest.approx(float(torch_like.forward))
    assert float(torch_like.recompute - xla.recompute) == pytest.approx(down_s, rel=1e-9)
    assert float(xla.forward) == pytest.approx(float(torch_like.forward))  # forward itself unchanged
    # selective and none are untouched
    for rec in ("selective", "none"):
        a = layer_compute_time(sh, **dict(kw, recompute=rec))
        b = layer_compute_time(sh, xla_remat=True, **dict(kw, recompute=rec))
        assert float(a.recompute) == float(b.recompute)


def test_xla_remat_share_of_forward_for_an_ungated_mlp():
    # hand count per token (h=8192, attention width a*d = 8192, f=4h, s=2048 causal ignored: full k=s):
    # QKV 3h^2, O h^2, up 4h^2, down 4h^2 -> 12 h^2 GEMM + core 2 s h (QK^T + AV) per MAC;
    # recompute share = 1 - 4h^2 / (12h^2 + 2 s h)
    h, s = 8192, 2048
    sh = shape(layers=1, hidden=h, heads=64, vocab=32000)
    kw = dict(micro_batch=1, seq_len=s, recompute="full", flash_attention=False, **IDEAL)
    xla = layer_compute_time(sh, xla_remat=True, **kw)
    share = 1 - 4 * h * h / (12 * h * h + 2 * s * h)
    assert float(xla.recompute / xla.forward) == pytest.approx(share, rel=1e-6)


def test_tpu_recompute_drops_one_of_four_sp_collectives(monkeypatch):
    cl = load_cluster("tpu-v5p-pod")
    tp, layers, mb, s, h = 16, 8, 16, 2048, 8192
    wl = TransformerWorkload(name="t", layers=layers, hidden=h, heads=64, seq_len=s, vocab=32768)
    tr = TrainingSpec(global_batch=mb * 16, micro_batch=mb, precision="bf16", seq_len=s)
    st = StrategySpec(tp=tp, pp=1, dp=16, recompute="full", sequence_parallel=True, flash_attention=True)
    xla = predict(cl, wl, tp * 16, tr, st).breakdown_s["tp_comm"]
    for module in (layer_compute, model_parallel_comm, step):  # every module whose functions look it up
        monkeypatch.setattr(module, "xla_remat", lambda job, g: np.asarray(False))
    torch_like = predict(cl, wl, tp * 16, tr, st).breakdown_s["tp_comm"]
    # one reduce-scatter of the activation (mb*s*h*2 bytes) per recomputed layer on the ici tier, `auto` (every
    # algorithm on ICI) taking the one-shot direct one: (p-1)/p * S / (600 GB/s * 0.80) + one 0.75 us hop (no NCCL
    # base latency on TPUs since tpucoll30; the ring, (p-1) hops, is 10.5 us slower)
    S = mb * s * h * 2.0
    rs = (tp - 1) / tp * S / (600e9 * 0.80) + 0.75e-6
    assert torch_like - xla == pytest.approx(layers * rs, rel=0.002)
    assert np.isfinite(xla)


def test_tpu_hardware_flops_leave_out_the_down_projection():
    # hardware = model + recompute; XLA's recompute = layers' forward - down GEMMs (2 s h f per layer per seq)
    cl = load_cluster("tpu-v5p-pod")
    L, h, s, f, B = 4, 4096, 2048, 16384, 64
    wl = TransformerWorkload(name="t", layers=L, hidden=h, heads=32, ffn_hidden=f, seq_len=s, vocab=32768)
    tr = TrainingSpec(global_batch=B, micro_batch=4, precision="bf16", seq_len=s)
    st = StrategySpec(tp=4, pp=1, dp=16, recompute="full", sequence_parallel=True, flash_attention=True)
    fl = predict(cl, wl, 64, tr, st).flops
    layer_fwd = 2 * s * (4 * h * h + 2 * h * f) + 2 * s * s * 32 * (128 + 128)  # QKV+O, up+down, full-k core
    dead = 2 * s * h * f
    assert fl["hardware_flops_per_step"] - fl["model_flops_per_step"] == pytest.approx(B * L * (layer_fwd - dead),
                                                                                     rel=1e-9)


@pytest.mark.parametrize(("layer_impl", "dead"), [("xla", True), ("megatron_te", False)])
def test_gpu_xla_layer_hardware_flops_leave_out_the_down_projection(layer_impl, dead):
    """The rule is the compiler's, not the TPU's (docs/model.md#xlagpu35): a MaxText layer on H100s (layer_impl xla)
    recomputes the layers' forward less the down GEMMs, 2 s h f a layer and sequence, as on a TPU; a PyTorch layer on
    the same GPUs (Megatron-Core with TE, torch.utils.checkpoint) recomputes the whole forward."""
    L, h, s, f, B = 4, 4096, 2048, 16384, 64
    wl = TransformerWorkload(name="t", layers=L, hidden=h, heads=32, ffn_hidden=f, seq_len=s, vocab=32768)
    tr = TrainingSpec(global_batch=B, micro_batch=4, precision="bf16", seq_len=s)
    st = StrategySpec(tp=4, pp=1, dp=16, recompute="full", sequence_parallel=True, flash_attention=True,
                      layer_impl=layer_impl)
    fl = predict(load_cluster("dgx-h100"), wl, 64, tr, st).flops
    layer_fwd = 2 * s * (4 * h * h + 2 * h * f) + 2 * s * s * 32 * (128 + 128)  # QKV+O, up+down, full-k core
    want = B * L * (layer_fwd - (2 * s * h * f if dead else 0))
    assert fl["hardware_flops_per_step"] - fl["model_flops_per_step"] == pytest.approx(want, rel=1e-9)
