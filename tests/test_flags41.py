"""flags41: the Megatron-Core release that sets linear_proj's and the shared experts' save_original_input, the
16-bit saved inputs of ``fp8_wgrad`` false, and the shared experts' linear_fc1 re-quantize.

Sources (each read at the named commit): Megatron-Core's attention sets ``set_save_original_input(self.linear_proj)``
for fp8 other than delayed from core_v0.14.0 (781e765818) and for fp4 from core_v0.16.0 (e8b9df156d;
NVIDIA/Megatron-LM@d98e8a64dd attention.py lines 428-444); SharedExpertMLP the same for its linear_fc1 unless
selective recompute names shared_experts (shared_experts.py lines 147-161). Transformer Engine 1.13 (e5edd6cc3d)
Linear / GroupedLinear keep ``inputmat_no_fp8`` when the delayed recipe overrides the wgrad precision (linear.py
L297-306, grouped_linear.py L211-223); LayerNormLinear keeps its FP8 ``ln_out`` (layernorm_linear.py L326-336).
Bytes below are written out per element by hand; seconds are bytes over the HBM rate the catalog gives.
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
from scalemodel.specs.base import SpecError, convert
from scalemodel.specs.training import proj_original_input_recipes
from scalemodel.specs.workload import MoESpec, TransformerWorkload

FP8 = ("tensorwise", "mxfp8", "blockwise")
# b 2 x s 2048 = 4096 tokens; 8 heads x d_v 128 = 1024 wide (= hidden); TP 2 with SP: 2,097,152 elements a GPU
N_TP2 = 4096 * 1024 // 2
TINY_SHARED = TransformerWorkload(name="tiny-shared", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                                  seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=False, dropout=False,
                                  moe=MoESpec(experts=64, top_k=4, ffn_hidden=512, first_dense=1, shared_experts=1))


@pytest.mark.parametrize(("flag", "release", "want"), [
    (None, None, ()),                  # nothing stated: no release assumed, off
    (None, "0.13", ()),                # before 781e765818
    (None, "0.14", FP8),               # core_v0.14.0: fp8 other than delayed
    (None, "0.15.1", FP8),             # core_v0.15.0 has no fp4 branch
    (None, "0.16", FP8 + ("nvfp4",)),  # e8b9df156d: fp4 too
    (True, None, FP8 + ("nvfp4",)),    # on without a release: the current Megatron-Core's
    (True, "0.14", FP8),               # the release decides which recipes
    (False, "0.20", ()),               # off whatever the release
])
def test_release_sets_the_recipes(flag: bool | None, release: str | None, want: tuple[str, ...]) -> None:
    tr = TrainingSpec(proj_original_input=flag, megatron_core_release=release)
    assert proj_original_input_recipes(tr) == want


def test_flag_on_with_a_release_before_it_is_refused() -> None:
    """proj_original_input true with release 0.13 (before 781e765818) contradicts itself: refused, naming both."""
    with pytest.raises(SpecError, match="megatron_core_release '0.13'"):
        convert(TrainingSpec, {"proj_original_input": True, "megatron_core_release": "0.13"})


@pytest.mark.parametrize("bad", ["0.16.0rc0", "v0.16", "0.16\n", "00.16"])
def test_release_text_refused(bad: str) -> None:
    with pytest.raises(SpecError, match="megatron_core_release"):
        convert(TrainingSpec, {"megatron_core_release": bad})


@pytest.mark.parametrize("number", [0.16, 0.2])
def test_release_as_bare_number_is_refused(number: float) -> None:
    """YAML and --set read 0.20 as the float 0.2, the same number as release 0.2: a bare number is refused with the
    advice to quote it, never read as a release."""
    with pytest.raises(SpecError, match="quote it"):
        convert(TrainingSpec, {"megatron_core_release": number})


def _b200_fp4(release: str):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp4", megatron_core_release=release)
    return build_job(load_cluster("dgx-b200"), TINY_MOE, tr), tr


def test_fp4_linear_proj_from_0_16() -> None:
    """TINY_MOE on B200 in NVFP4, b 2, TP 2: from 0.16 the forward writes no column-wise FP4 copy (1/2 B + an E4M3
    scale per 16 elements) and the backward reads the saved BF16 input twice (amax, cast) and writes that copy;
    0.15 has no fp4 branch: nothing."""
    on, tr = _b200_fp4("0.16")
    off, _ = _b200_fp4("0.15")
    assert on.fp8_recipe == "nvfp4"
    rate = on.memory_bandwidth * on.memory_efficiency / compute.cast_kernel_time_factor(
        on.accelerator_family, "nvfp4", on.accelerator)
    z = np.zeros(1)
    st = StrategySpec(tp=2, dp=4, recompute="none")
    got = [one(v) for v in layer_compute._with_proj_original_input(on, grid_from_strategy(st, tr, 8, on), z, z, z)]
    copy = 1 / 2 + 1 / 16
    assert got == [pytest.approx(-copy * N_TP2 / rate), pytest.approx((2 + 2 + copy) * N_TP2 / rate), 0.0]
    none = [one(v) for v in layer_compute._with_proj_original_input(off, grid_from_strategy(st, tr, 8, off), z, z, z)]
    assert none == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------------- shared experts' linear_fc1

def _sh_shared():  # type: ignore[no-untyped-def]
    return shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, gated_mlp=True, moe_experts=64,
                 moe_top_k=4, moe_ffn_hidden=512, moe_shared_experts=1, moe_first_dense=1)


def test_shared_fc1_bytes_by_hand() -> None:
    """Tensorwise on Hopper: forward -1 B (no transposed copy), backward 2 + 2 + 1 + 1 B per element of the input
    linear_fc1 holds: T h / t under SP, T h without SP or when moe_shared_expert_overlap gathered it first."""
    kw = dict(micro_batch=2, seq_len=2048, transpose_copy=True, tp=2)
    f, b = compute.shared_fc1_original_input_bytes("tensorwise", _sh_shared(), sequence_parallel=True, **kw)
    assert (float(f), float(b)) == (pytest.approx(-1.0 * N_TP2), pytest.approx(6.0 * N_TP2))
    f, b = compute.shared_fc1_original_input_bytes("tensorwise", _sh_shared(), sequence_parallel=False, **kw)
    assert float(f) == pytest.approx(-2.0 * N_TP2)
    f, b = compute.shared_fc1_original_input_bytes("tensorwise", _sh_shared(), sequence_parallel=True,
                                                   gathered=True, **kw)
    assert float(b) == pytest.approx(12.0 * N_TP2)
    f, b = compute.shared_fc1_original_input_bytes("mxfp8", _sh_shared(), sequence_parallel=True, **kw)
    assert (float(f), float(b)) == (pytest.approx(-(1 + 1 / 32) * N_TP2), pytest.approx((2 + 1 + 1 / 32) * N_TP2))
    no_shared = shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, moe_experts=64, moe_top_k=4,
                      moe_ffn_hidden=512, moe_first_dense=1)
    assert float(compute.shared_fc1_original_input_bytes("tensorwise", no_shared, **kw)[1]) == 0.0
    assert float(compute.shared_fc1_original_input_bytes("delayed", _sh_shared(), **kw)[1]) == 0.0


def _h100(workload, release: str | None, recipe: str = "tensorwise"):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8", fp8_recipe=recipe,
                      megatron_core_release=release)
    return build_job(load_cluster("dgx-h100"), workload, tr), tr


def test_shared_fc1_in_the_layer_times() -> None:
    """TINY_SHARED on H100, FP8 current scaling, b 2, TP 2 with SP: 3 of 4 layers are MoE layers, so per layer
    3/4 x (-1 B, 6 B) x N over HBM; selective recompute of moe repeats the forward's; selective shared_experts
    sets no flag; no release, or 0.13: nothing."""
    job, tr = _h100(TINY_SHARED, "0.14")
    z = np.zeros(1)

    def delta(j, t, **st):  # type: ignore[no-untyped-def]
        g = grid_from_strategy(StrategySpec(tp=2, dp=4, sequence_parallel=True, **st), t, 8, j)
        return [one(v) for v in layer_compute._with_shared_original_input(j, g, z, z, z)]

    f, b = 0.75 * -1.0 * N_TP2 / HBM, 0.75 * 6.0 * N_TP2 / HBM
    assert delta(job, tr, recompute="none") == [pytest.approx(f), pytest.approx(b), 0.0]
    assert delta(job, tr, recompute="selective", recompute_modules="moe") == [
        pytest.approx(f), pytest.approx(b), pytest.approx(f)]
    assert delta(job, tr, recompute="selective", recompute_modules="shared_experts") == [0.0, 0.0, 0.0]
    assert delta(*_h100(TINY_SHARED, None)) == [0.0, 0.0, 0.0]
    assert delta(*_h100(TINY_SHARED, "0.13")) == [0.0, 0.0, 0.0]
    assert delta(*_h100(TINY_SHARED, "0.16", "delayed")) == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------- fp8_wgrad false memory

def _sh_dense():  # type: ignore[no-untyped-def]
    return shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, gated_mlp=True)


def test_wgrad16_memory_per_layer_by_hand() -> None:
    """A dense layer, flash attention, b 2, s 2048, TP 2 with SP: linear_fc2's saved input (F = 4096 wide) goes from
    its 1-byte FP8 copy to the 16-bit tensor (+1 B x s b F / t) and linear_proj keeps the attention's output itself
    (-1 B x s b a d_v / t); the norm-fused QKV and FC1 keep their FP8 norm output (no change)."""
    kw = dict(micro_batch=2, seq_len=2048, tp=2, sequence_parallel=True, fp8_inputs=1.0, flash_attention=True)
    base = memory.activation_bytes_per_layer(_sh_dense(), **kw)
    kept = memory.activation_bytes_per_layer(_sh_dense(), proj_inputs=0.0, linear_inputs=0.0, **kw)
    assert float(kept - base) == pytest.approx(4096 * 4096 / 2 - N_TP2)


def test_wgrad16_memory_moe_layer_by_hand() -> None:
    """An MoE layer (64 experts, top 4, expert width 512, one shared expert, h 1024), b 2, s 2048, TP 2 = ETP: the
    routed experts' FC1 input (u k T h / t elements, each a token row h wide received on the rank) and FC2 input
    (k T f_e / t) and the shared linear_fc2's input (T f_e / t) go from 1 B to 2 B: +1 B an element."""
    kw = dict(micro_batch=2, seq_len=2048, tp=2, sequence_parallel=True, fp8_inputs=1.0, flash_attention=True,
              moe=True)
    base = memory.activation_bytes_per_layer(_sh_shared(), **kw)
    kept = memory.activation_bytes_per_layer(_sh_shared(), linear_inputs=0.0, **kw)
    T = 4096
    want = (2 * 4 * T * 1024 + 4 * T * 512 + 1 * T * 512) / 2
    assert float(kept - base) == pytest.approx(want)


def test_wgrad16_memory_through_the_stage() -> None:
    """Delayed scaling with strategy fp8_wgrad false, a dense 4-layer model on H100 (pp 1, no recompute, one micro-batch
    held): each layer's activations change by the per-layer difference above; fp8_wgrad true or another recipe:
    nothing (the memory kwargs stay empty)."""
    dense = TransformerWorkload(name="tiny-dense", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                                seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=False, dropout=False)
    job, tr = _h100(dense, None, "delayed")
    st = dict(tp=2, dp=4, flash_attention=True, sequence_parallel=True, recompute="none")
    g_off, g_on = (grid_from_strategy(StrategySpec(fp8_wgrad=w, **st), tr, 8, job) for w in (False, True))
    assert dp_comm.proj_input_bytes(job, g_on) == {}
    kw = dp_comm.proj_input_bytes(job, g_off)
    assert (one(kw["proj_inputs"]), one(kw["linear_inputs"])) == (0.0, 0.0)
    m = np.full(1, 8.0)
    got = float(memory_peak_stage(job, g_off, m).parts["activations"][0]
                - memory_peak_stage(job, g_on, m).parts["activations"][0])
    assert got == pytest.approx(4 * (4096 * 4096 / 2 - N_TP2))
    cs, tr_cs = _h100(dense, None, "tensorwise")
    assert dp_comm.proj_input_bytes(cs, grid_from_strategy(StrategySpec(fp8_wgrad=False, **st), tr_cs, 8, cs)) == {}
