"""linproj40: Megatron-Core's attention linear_proj keeps its 16-bit input (docs/model.md#proj-original-input).

Megatron-Core calls ``set_save_original_input(self.linear_proj)`` for ``config.fp8`` with a recipe other than delayed
and TE >= 2.6 (NVIDIA/Megatron-LM@0d8e0714cd megatron/core/transformer/attention.py lines 207-218). Transformer
Engine's Linear then writes no column-wise FP8 copy of the input in the forward (linear.py lines 221-226 at
70f536662a), keeps the 16-bit input (lines 362-363) and quantizes it again in the backward (lines 615-633): per-tensor
quantizers both copies, MXFP8 / blockwise the column-wise copy. The bytes below are written out by hand per element
of linear_proj's input, T a d_v / t elements; the seconds are bytes over H100's HBM rate (3.35 TB/s x 0.88).
"""

from __future__ import annotations

import numpy as np
import pytest
from grid_helpers import HBM, TINY_MOE, one

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape
from scalemodel.engine import dp_comm, layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.stage_memory import memory_peak_stage
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

# b 2 x s 2048 = 4096 tokens; 8 heads x d_v 128 = 1024 wide; TP 2: 4096 x 1024 / 2 = 2,097,152 elements a GPU
N_TP2 = 4096 * 1024 // 2


def _sh():  # type: ignore[no-untyped-def]
    return shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, gated_mlp=True)


@pytest.mark.parametrize(("recipe", "hopper", "fwd", "bwd"), [
    ("tensorwise", True, -1.0, 2 + 2 + 1 + 1),  # forward: no transposed copy; backward: amax read, cast read, both
    ("tensorwise", False, 0.0, 2 + 2 + 1),       # Blackwell: one copy serves both GEMMs (nothing saved forward)
    ("mxfp8", False, -(1 + 1 / 32), 2 + 1 + 1 / 32),  # the column-wise copy and its E8M0 scales move to the backward
    ("blockwise", True, -(1 + 4 / 128), 2 + 1 + 4 / 128),
    ("delayed", True, 0.0, 0.0),                 # Megatron-Core does not set the flag (TE asserts against it)
    # fp4 from core_v0.16.0 (e8b9df156d; attention.py lines 428-444 at d98e8a64dd): the column-wise FP4 copy and its
    # E4M3 scales per 16 move to the backward, which also reads the input for its amax (flags41)
    ("nvfp4", False, -(1 / 2 + 1 / 16), 2 + 2 + 1 / 2 + 1 / 16),
])
def test_proj_bytes_by_hand(recipe: str, hopper: bool, fwd: float, bwd: float) -> None:
    f, b = compute.proj_original_input_bytes(recipe, _sh(), micro_batch=2, seq_len=2048, transpose_copy=hopper, tp=2)
    assert float(f) == pytest.approx(fwd * N_TP2) and float(b) == pytest.approx(bwd * N_TP2)
    # context parallel 2 halves the local tokens
    f2, _ = compute.proj_original_input_bytes(recipe, _sh(), micro_batch=2, seq_len=2048, transpose_copy=hopper,
                                              tp=2, cp=2)
    assert float(f2) == pytest.approx(fwd * N_TP2 / 2)


def _job(flag: bool, recipe: str = "tensorwise", precision: str = "fp8"):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision=precision, fp8_recipe=recipe,
                      proj_original_input=flag)
    return build_job(load_cluster("dgx-h100"), TINY_MOE, tr), tr


def test_proj_in_the_layer_times() -> None:
    """TINY_MOE (attention in all 4 layers, 8 x 128 wide) on H100, FP8 current scaling, b 2, TP 2: per layer the
    forward saves the transposed copy, 1 B x N, the backward quantizes 6 B x N again; full recompute repeats the
    forward's saving; nothing without the flag, under delayed scaling, or off Megatron-Core's TE layers."""
    job, tr = _job(True)
    assert compute.cast_kernel_time_factor("hopper", "tensorwise", job.accelerator) == 1.0
    z = np.zeros(1)

    def delta(j, t, **st):  # type: ignore[no-untyped-def]
        g = grid_from_strategy(StrategySpec(tp=2, dp=4, **st), t, 8, j)
        return [one(v) for v in layer_compute._with_proj_original_input(j, g, z, z, z)]

    want_f, want_b = -1.0 * N_TP2 / HBM, 6.0 * N_TP2 / HBM
    assert delta(job, tr, recompute="selective") == [pytest.approx(want_f), pytest.approx(want_b), 0.0]
    assert delta(job, tr, recompute="full") == [pytest.approx(want_f), pytest.approx(want_b), pytest.approx(want_f)]
    assert delta(job, tr, layer_impl="megatron_legacy") == [0.0, 0.0, 0.0]
    assert delta(*_job(False)) == [0.0, 0.0, 0.0]
    assert delta(*_job(True, "delayed")) == [0.0, 0.0, 0.0]


def test_proj_layer_times_through_the_engine() -> None:
    """The stage's forward and backward for one micro-batch of its 4 layers move by exactly 4 x the term (the route
    the step model takes)."""
    on, tr = _job(True)
    off, _ = _job(False)
    st = StrategySpec(tp=2, dp=4, recompute="none")
    a, b = (layer_compute._compute_per_microbatch(j, grid_from_strategy(st, tr, 8, j), np.array([4.0]))
            for j in (on, off))
    assert one(a["forward"] - b["forward"]) == pytest.approx(-4.0 * N_TP2 / HBM, rel=1e-9)
    assert one(a["backward"] - b["backward"]) == pytest.approx(4.0 * 6.0 * N_TP2 / HBM, rel=1e-9)


def test_proj_memory_per_layer_by_hand() -> None:
    """With flash attention the O-projection input is held as the attention's 16-bit output (2 B) plus
    linear_proj's FP8 copy (1 B); with the flag the copy goes: 1 B x s b a d_v / t less. Unfused attention keeps no
    output of its own, so the proj's 16-bit input replaces the 1-byte copy: 1 B more."""
    kw = dict(micro_batch=2, seq_len=2048, tp=2, sequence_parallel=True, fp8_inputs=1.0)
    for flash, sign in ((True, -1.0), (False, 1.0)):
        base = memory.activation_bytes_per_layer(_sh(), flash_attention=flash, **kw)
        kept = memory.activation_bytes_per_layer(_sh(), flash_attention=flash, proj_inputs=0.0, **kw)
        assert float(kept - base) == pytest.approx(sign * N_TP2)


def test_proj_memory_through_the_stage() -> None:
    """pp 1, no recompute: the peak stage holds one micro-batch of the 4 layers; the flag takes 1 B x N off each."""
    on, tr = _job(True)
    off, _ = _job(False)
    st = StrategySpec(tp=2, dp=4, flash_attention=True, sequence_parallel=True, recompute="none")
    g_on, g_off = (grid_from_strategy(st, tr, 8, j) for j in (on, off))
    assert dp_comm.proj_input_bytes(off, g_off) == {}
    assert one(dp_comm.proj_input_bytes(on, g_on)["proj_inputs"]) == 0.0
    m = np.full(1, 8.0)
    got = float(memory_peak_stage(on, g_on, m).parts["activations"][0]
                - memory_peak_stage(off, g_off, m).parts["activations"][0])
    assert got == pytest.approx(-4 * N_TP2)
