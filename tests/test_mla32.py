"""MLA's down-projections on the rows and columns one tensor-parallel rank runs (docs/model.md#mla-tp, "Their GEMMs
per rank"), worked by hand from NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/multi_latent_attention.py
L641-644 / L660-663: a duplicated TELinear (the default) gives "q_compressed: [s / TP, b, q_lora_rank]" under
sequence parallelism, and every rank holds all s tokens without it (the GEMM replicated on each rank); the
column-parallel build (strategy mla_column_down_proj) gives "[s, b, q_lora_rank / TP]". Until mla32 both builds were
priced T x r x h on every rank: at tp 2 with SP twice the FLOPs either build runs.

A small MLA layer, dense gated MLP: h 1024, 8 heads, d_nope 64 + d_rope 32 = d 96, d_v 64, r_q 256, r_kv 128, f 4096,
b 1, s 2048, tp 2. Per rank forward FLOPs, T = b s = 2048 tokens:

    q_down     duplicated + SP: 2 (T/2) h r_q         no SP: 2 T h r_q        column + SP: 2 T h r_q / 2
    kv_down    the same with r_kv + d_rope = 160
    q_up       2 T r_q a d / 2,   kv_up 2 T r_kv a (d_nope + d_v) / 2,   o 2 T a d_v h / 2
    core       2 (b a / 2) s s (d + d_v)   (the full s^2 count of the FLOP convention)
    MLP        2 T h f / 2 x 3   (gate and up fused, then down)

The backward runs each weight GEMM twice (dgrad + wgrad), at the same rows and columns as the forward."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import compute
from scalemodel.cost.memory import activation_bytes_per_layer
from scalemodel.cost.transformer import shape
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.layer_compute import _compute_per_microbatch
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec

H, A, NOPE, ROPE, DV, RQ, RKV, F, S, TP = 1024, 8, 64, 32, 64, 256, 128, 4096, 2048, 2
D = NOPE + ROPE


def _mla(kv_lora_rank: int = RKV):  # type: ignore[no-untyped-def]
    return shape(layers=4, hidden=H, heads=A, ffn_hidden=F, gated_mlp=True, vocab=32_000, kv_lora_rank=kv_lora_rank,
                 q_lora_rank=RQ, qk_rope_head_dim=ROPE, head_dim=D, v_head_dim=DV)


def _layer(sp: bool, column: bool):  # type: ignore[no-untyped-def]
    return compute.layer_compute_time(_mla(), micro_batch=1, seq_len=S, peak_flops=989e12, memory_bandwidth=3.35e12,
                                      tp=TP, sequence_parallel=sp, flash_attention=True, mla_column_down_proj=column)


@pytest.mark.parametrize("sp, column, down_rows, down_cols", [
    (True, False, S / TP, 1.0),    # duplicated, SP: the rank's s/TP shard, whole width
    (False, False, S, 1.0),        # duplicated, no SP: every token on every rank (replicated)
    (True, True, S, 1.0 / TP),     # column-parallel, SP: the gathered s tokens, r/TP columns
])
def test_forward_flops_per_rank_by_hand(sp: bool, column: bool, down_rows: float, down_cols: float) -> None:
    T = float(S)
    down = 2 * down_rows * H * (RQ + RKV + ROPE) * down_cols
    # 2 x 1024 x 2048 x (256 + 160) = 1.745 GFLOP at T (the old price at tp 2 whatever the build); half of it here
    # with SP in either build, all of it without
    up = 2 * T * (RQ * A * D + RKV * A * (NOPE + DV)) / TP
    o = 2 * T * A * DV * H / TP
    core = 2 * (A / TP) * S * S * (D + DV)
    mlp = 2 * T * H * F / TP * 3
    got = float(np.ravel(_layer(sp, column).forward_flops)[0])
    assert got == pytest.approx(down + up + o + core + mlp, rel=1e-12)
    old = 2 * T * H * (RQ + RKV + ROPE)  # the down-projections' price before mla32 (T x r x h whole on every rank)
    assert down == pytest.approx(old / TP if sp else old)


def _gemm(m: float, n: float, k: float) -> float:
    return float(np.ravel(compute.gemm_time(m, n, k, peak_flops=989e12, memory_bandwidth=3.35e12))[0])


def test_down_projection_gemm_times_by_hand() -> None:
    """The layer's forward GEMM time moves between the builds by exactly the two down-projections' GEMMs at their own
    shapes (the primitive gemm_time at the job's default curve), and the backward by twice that (dgrad + wgrad)."""
    dup_sp, dup, col = _layer(True, False), _layer(False, False), _layer(True, True)

    def downs(rows: float, cols: float) -> float:
        return _gemm(rows, RQ * cols, H) + _gemm(rows, (RKV + ROPE) * cols, H)

    f = lambda lt: float(np.ravel(lt.forward_gemm)[0])  # noqa: E731
    b = lambda lt: float(np.ravel(lt.backward)[0])  # noqa: E731
    assert f(dup) - f(dup_sp) == pytest.approx(downs(S, 1) - downs(S / TP, 1), rel=1e-9)
    assert f(col) - f(dup_sp) == pytest.approx(downs(S, 1 / TP) - downs(S / TP, 1), rel=1e-9)
    assert downs(S, 1) - downs(S / TP, 1) > 0  # the replicated GEMM costs more than its shard
    # the SP flag moves the memory-bound bytes too; the column build under SP moves only the GEMMs
    assert b(col) - b(dup_sp) == pytest.approx(2 * (f(col) - f(dup_sp)), rel=1e-9)


def test_latents_held_as_the_residual_stream_by_hand() -> None:
    """The latents the up-projections read (r_q + r_kv + d_rope a token, 2 bytes each) are the down-projections'
    outputs: s/t tokens a rank under SP, all s without. Widening r_kv by 32 adds 2 x 2048 x 32 = 131,072 bytes a
    layer without SP, 65,536 at tp 2 with SP (before mla32: 65,536 in both)."""
    def mem(kv: int, sp: bool) -> float:
        return float(np.ravel(activation_bytes_per_layer(_mla(kv), micro_batch=1, seq_len=S, tp=TP,
                                                         sequence_parallel=sp, flash_attention=True))[0])

    assert mem(RKV + 32, False) - mem(RKV, False) == pytest.approx(2 * S * 32, rel=1e-12)
    assert mem(RKV + 32, True) - mem(RKV, True) == pytest.approx(2 * S * 32 / TP, rel=1e-12)


def _gemm_per_layer(column: bool, sp: bool = True):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="mla", layers=4, hidden=H, heads=A, ffn_hidden=F, gated_mlp=True, vocab=32_000,
                             seq_len=S, tied_embeddings=False,
                             mla=MLASpec(kv_lora_rank=RKV, q_lora_rank=RQ, qk_nope_head_dim=NOPE,
                                         qk_rope_head_dim=ROPE, v_head_dim=DV))
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(tp=TP, sequence_parallel=sp, mla_column_down_proj=column)
    g = grid_from_strategy(st, tr, TP, job)
    out = _compute_per_microbatch(job, g, np.asarray([4.0]))
    return float(np.ravel(out["gemm_per_layer"])[0]), job


def test_the_strategy_flag_reaches_the_layer() -> None:
    """strategy.mla_column_down_proj prices the column build's GEMMs in a predicted job (with SP); without SP it is
    not priced (its gathers and all-reduces are not, docs/model.md#mla-tp), so the layer stays duplicated's."""
    dup, job = _gemm_per_layer(False)
    col, _ = _gemm_per_layer(True)
    kw = dict(peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
              gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency, elem_bytes=job.elem_bytes)

    def downs(rows: float, cols: float) -> float:
        return sum(float(np.ravel(compute.gemm_time(rows, r * cols, H, **kw))[0]) for r in (RQ, RKV + ROPE))

    assert col - dup == pytest.approx(downs(S, 1 / TP) - downs(S / TP, 1), rel=1e-9)
    assert _gemm_per_layer(True, sp=False)[0] == _gemm_per_layer(False, sp=False)[0]
