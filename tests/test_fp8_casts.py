"""FP8 quantization casts (cost.compute.fp8_quantize_bytes): bytes counted by hand from Transformer Engine's code
path (NVIDIA/TransformerEngine@d0067d0), and bf16 runs untouched.

Per element of a 16-bit tensor X quantized for an FP8 GEMM (2 bytes read, 1 byte per FP8 copy written):

- delayed (Float8Quantizer): one cast_transpose kernel (common/cast/dispatch/quantize.cuh, tensor scaling with
  column-wise data) reads X once and writes the row-wise copy and, on Hopper, the transposed copy: 2 + 1 + 1.
  A LayerNormLinear's norm writes the FP8 copy itself (normalization.cpp FULLY_FUSED): 1 byte instead of 2, then
  rmsnorm_api.cpp transposes it (nvte_transpose: read 1, write 1).
- tensorwise (Float8CurrentScalingQuantizer::quantize_impl): nvte_compute_amax reads X, nvte_quantize_v2 reads it
  again: 2 + 2 + 1 (+1). After a norm the amax comes from the norm kernel (FUSED_NORM_AMAX_FP8): 2 + 1 (+1).
- With sequence parallelism a per-tensor copy is all-gathered row-wise only (linear.py: "All-gather is not
  supported with FP8 column-wise data") and _all_gather_fp8 transposes the gathered tensor: 2 per gathered element.
- mxfp8 (Blackwell): quantize_mxfp8 writes row- and column-wise copies, each with one E8M0 scale per 32 elements:
  2 + 2 (1 + 1/32) = 4.0625, norm not fused (NVTE_NORM_FWD_USE_CUDNN unset).
- Blackwell runs per-tensor FP8 GEMMs in any layout (nvte_is_non_tn_fp8_gemm_supported): no transposed copy.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute, transformer
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError

# a toy layer: h 8, 2 heads of 4 (MHA), FFN 32; one micro-batch of 16 tokens
T = 16


def _shape(**kw: Any) -> Any:
    base: dict[str, Any] = dict(layers=2, hidden=8, heads=2, vocab=64, kv_heads=2, ffn_hidden=32, gated_mlp=False)
    base.update(kw)
    return transformer.shape(**base)


def test_hopper_delayed_dense_layer_by_hand() -> None:
    """t 1, no SP, Hopper (transposed copies), delayed scaling. Elements: X_qkv = X_fc1 = T h = 128 (norm outputs),
    X_proj = T a d = 128, X_fc2 = T f = 512; dY_qkv = T 3 a d = 384, dY_proj = dY_fc2 = 128, dY_fc1 = 512.

        forward  = 128 (-1 + 2) + 128 (2+1+1) + 128 (-1 + 2) + 512 (2+1+1)      = 128 + 512 + 128 + 2048 = 2816
        backward = (384 + 128 + 512 + 128) x 4                                    = 4608
        weights  = (8 x 24 + 8 x 8 + 8 x 32 + 32 x 8) x 4 = 768 x 4               = 3072
    """
    f, b, w = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="delayed", transpose_copy=True)
    assert (float(f), float(b), float(w)) == pytest.approx((2816.0, 4608.0, 3072.0))


def test_hopper_tensorwise_tp2_sequence_parallel_by_hand() -> None:
    """t 2 with SP, gated MLP, Hopper, current scaling (tensorwise).

    QKV / FC1 input: norm output (amax from the norm), local T h / t = 64 quantized row-wise (2 + 1), all-gathered,
    transposed at T h = 128 (2 each): 192 + 256 = 448 each.  proj input T a d / t = 64 at 2 + 2 + 1 + 1 = 6: 384.
    FC2 input T f / t = 256 at 6: 1536.  forward = 448 + 384 + 448 + 1536 = 2816.
    dY_qkv = T 24 / 2 = 192 at 6: 1152; dY_fc1 = T 2 f / t = 512 at 6: 3072; dY_proj = dY_fc2: local 64 at
    2 + 2 + 1 = 5 (320) + transpose of the gathered 128 (256) = 576.  backward = 1152 + 3072 + 2 x 576 = 5376.
    Weights on this GPU: qkv 96 + o 32 + fc1 256 + fc2 128 = 512 at 6 = 3072.
    """
    f, b, w = compute.fp8_quantize_bytes(_shape(gated_mlp=True), micro_batch=1, seq_len=T, recipe="tensorwise",
                                         transpose_copy=True, tp=2, sequence_parallel=True)
    assert (float(f), float(b), float(w)) == pytest.approx((2816.0, 5376.0, 3072.0))


def test_blackwell_tensorwise_has_no_transposed_copy() -> None:
    """Blackwell, t 1: QKV / FC1 inputs 128 at 2 + 1 = 3, proj 128 and FC2 512 at 2 + 2 + 1 = 5:
    forward = 384 + 640 + 384 + 2560 = 3968; backward (384 + 128 + 512 + 128) x 5 = 5760; weights 768 x 5 = 3840."""
    f, b, w = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="tensorwise",
                                         transpose_copy=False)
    assert (float(f), float(b), float(w)) == pytest.approx((3968.0, 5760.0, 3840.0))


def test_blackwell_mxfp8_moe_layer_by_hand() -> None:
    """MoE layer, 4 experts of width 8, top-2, ep 2, t 1, no shared experts, MXFP8 (4.0625 B per element).
    Attention: X_qkv 128, X_proj 128, dY_qkv 384, dY_proj 128. Routed: N = ep T k / E = 16 tokens per expert, 2
    experts here: 32 rows; X_fc1 32 x 8 = 256, X_fc2 32 x 8 = 256, dY_fc1 256, dY_fc2 256.
        forward = (128 + 128 + 256 + 256) 4.0625 = 3120;  backward = (384 + 128 + 256 + 256) 4.0625 = 4160
        weights = (192 + 64 + 2 experts x 2 x 8 x 8) 4.0625 = 512 x 4.0625 = 2080   (the router stays BF16)"""
    sh = _shape(moe_experts=4, moe_top_k=2, moe_ffn_hidden=8)
    f, b, w = compute.fp8_quantize_bytes(sh, micro_batch=1, seq_len=T, recipe="mxfp8", transpose_copy=False,
                                         ep=2, moe=True)
    assert (float(f), float(b), float(w)) == pytest.approx((3120.0, 4160.0, 2080.0))


def test_unknown_recipe_is_an_input_error() -> None:
    with pytest.raises(InputError, match="fp8 recipe"):
        compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="custom")


def _job(cluster: str, precision: str, recipe: str | None = None, gb: int = 1, model: str = "gpt-7.5b"
         ) -> tuple[Any, Any]:
    training: dict[str, Any] = {"precision": precision, "global_batch": gb, "micro_batch": 1}
    if recipe is not None:
        training["fp8_recipe"] = recipe
    cl, wl, tr, stg = build_specs(cluster=cluster, model=model, sets=[], training=training, strategy={})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(stg, tr, 1, job)


def test_step_adds_the_casts_at_hbm_speed() -> None:
    """One GPU, one layer, one micro-batch (m = 1): the fp8 run's forward minus the same job without the casts is
    (forward bytes + weight bytes) / (HBM x memory efficiency), its backward the backward bytes, with the byte
    counts of the hand-checked function above (H100: Hopper, delayed by default)."""
    job, g = _job("dgx-h100", "fp8")
    assert job.fp8_recipe == "delayed"
    layers = np.ones(1)
    with_casts = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    without = layer_compute._compute_per_microbatch(replace(job, fp8_recipe=""), g, layers, logits_on_stage=False)
    f, b, w = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=job.seq_len, recipe="delayed")
    bw = job.memory_bandwidth * job.memory_efficiency
    assert float((with_casts["forward"] - without["forward"]).ravel()[0]) == pytest.approx(float(f + w) / bw)
    assert float((with_casts["backward"] - without["backward"]).ravel()[0]) == pytest.approx(float(b) / bw)


def test_recipe_checks() -> None:
    with pytest.raises(InputError, match="Blackwell"):
        _job("dgx-h100", "fp8", "mxfp8")
    assert _job("dgx-b200", "fp8", "mxfp8")[0].fp8_recipe == "mxfp8"
    assert _job("dgx-h100", "fp8", "fp8-cs")[0].fp8_recipe == "tensorwise"
    with pytest.raises(InputError, match="fp8_recipe"):
        _job("dgx-h100", "bf16", "tensorwise")


@settings(max_examples=12, deadline=None)
@given(cluster=st.sampled_from(["dgx-h100", "dgx-b200", "dgx-a100"]), precision=st.sampled_from(["bf16", "fp16"]),
       model=st.sampled_from(["gpt-7.5b", "llama3-8b"]), gb=st.sampled_from([1, 4]))
def test_16bit_runs_never_price_casts(cluster: str, precision: str, model: str, gb: int) -> None:
    """A 16-bit job carries no recipe and its per-micro-batch compute is the same with the cast function
    replaced by one that fails: the term is never consulted outside fp8 runs."""
    job, g = _job(cluster, precision, gb=gb, model=model)
    assert job.fp8_recipe == ""
    layers = np.ones(1)
    before = layer_compute._compute_per_microbatch(job, g, layers)["total"]
    orig = compute.fp8_quantize_bytes

    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("fp8 casts priced in a 16-bit run")

    compute.fp8_quantize_bytes = boom  # type: ignore[assignment]
    try:
        after = layer_compute._compute_per_microbatch(job, g, layers)["total"]
    finally:
        compute.fp8_quantize_bytes = orig  # type: ignore[assignment]
    assert np.array_equal(before, after)


@pytest.mark.parametrize("cluster", ["dgx-h100", "dgx-b200"])
def test_casts_only_slow_an_fp8_run(cluster: str) -> None:
    job, g = _job(cluster, "fp8", "tensorwise", gb=8)
    t = layer_compute._compute_per_microbatch(job, g, np.ones(1))["total"]
    t0 = layer_compute._compute_per_microbatch(replace(job, fp8_recipe=""), g, np.ones(1))["total"]
    assert np.all(t > t0)


def test_megatron_fp8_recipe_flag(tmp_path: Any) -> None:
    """--fp8-recipe is read with --fp8-format (Megatron-Core trains in FP8 only with a format); an unpriced
    recipe or a recipe without a format is listed as unused."""
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "a.args"
    f.write_text("--fp8-format hybrid --fp8-recipe tensorwise\n")
    assert read_strategy_file(f).training == {"precision": "fp8", "fp8_recipe": "tensorwise"}
    f.write_text("--fp8-format e4m3 --fp8-recipe blockwise\n")
    assert read_strategy_file(f).training == {"precision": "fp8", "fp8_recipe": "blockwise"}
    f.write_text("--fp8-format e4m3 --fp8-recipe custom\n")  # Megatron's user-supplied recipe: not priced
    sf = read_strategy_file(f)
    assert sf.training == {"precision": "fp8"} and any("--fp8-recipe custom" in u for u in sf.unused)
    f.write_text("--fp8-recipe mxfp8\n")
    sf = read_strategy_file(f)
    assert "fp8_recipe" not in sf.training and any("without --fp8-format" in u for u in sf.unused)


def test_fused_norm_cast_saves_bytes_on_blackwell() -> None:
    """Delayed scaling, Blackwell (no transposed copy): the LayerNormLinear's norm writes its output in FP8, 1 byte
    per element instead of BF16's 2, and nothing else is cast, so the tensor moves 1 byte less than in BF16."""
    n = 1000.0
    got = compute._fp8_tensor_bytes("delayed", n, n, from_norm=True, transpose_copy=False, eb=2.0)
    assert float(got) == pytest.approx(-n)


def test_fp8_layer_that_saves_bytes_is_priced_not_refused(cli: Any) -> None:
    """Regression (hypothesis, tests/test_physics.py): GPT 1.7B, tp 8 without sequence parallelism, delayed FP8 on
    GB200. The two norm outputs (T h each, not split by TP) save 2 T h bytes, more than the casts of the TP-split
    inputs add, so the layer's FP8 bytes sum below 0; memory_time refused that and predict failed. The saving is
    now priced as a negative time, and the step stays positive and faster than the same run without the saving
    can be (the BF16 norm bytes it saves from are in the layer)."""
    kw = dict(micro_batch=4, seq_len=4096, recipe="delayed", transpose_copy=False, tp=8, elem_bytes=2.0)
    sh = _shape(hidden=2304, heads=24, kv_heads=24, ffn_hidden=9216)
    fwd, _bwd, _w = compute.fp8_quantize_bytes(sh, **kw)
    T, h, f, t = 4 * 4096, 2304, 9216, 8
    # by hand: QKV and FC1 inputs from fused norms (-1 B each over T h), proj input (3 B over T h / t), FC2 input
    # (3 B over T f / t)
    assert float(fwd) == pytest.approx(-2 * T * h + 3 * T * h / t + 3 * T * f / t)
    assert float(fwd) < 0
    out = cli("predict", "-m", "gpt-1.7b", "-c", "gb200-nvl72", "-n", "8", "--tp", "8", "--micro-batch", "4",
              "--global-batch", "32", "--no-flash-attention", "--set", "training.precision=fp8",
              "--set", "training.fp8_recipe=delayed", "--set", "training.seq_len=4096",
              "--set", "model.position_embeddings=4096",  # 2048 rows
              "--json")
    assert out.code == 0, out.err
    assert 0 < json.loads(out.out)["step_time_s"] < float("inf")
