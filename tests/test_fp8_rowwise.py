"""torchao's float8 row-wise recipes (training.fp8_recipe rowwise / rowwise_with_gw_hp; docs/model.md#fp8-rowwise).

Sources, read at pytorch/ao@4fc4068d6 (and @890e0ac8, the same code): torchao/float8/float8_linear.py
``matmul_with_hp_or_float8_args`` (the six casts of one linear, input and weight saved in BF16), config.py
``from_recipe_name`` (rowwise: every cast axiswise; rowwise_with_gw_hp: the weight for dgrad tensorwise, wgrad in
BF16; ``gemm_config_output`` fast-accum, the backward's not), float8_ops.py ``addmm_float8_unwrapped`` (a row-wise
GEMM without fast-accum runs the per-tensor kernel with unit scales, then rescales its output). The forward GEMM's
rate on H100: pytorch/FBGEMM#2764's cuBLAS per-tensor vs CUTLASS row-wise medians (us), recomputed below.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import script_module, training_cases
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute, memory, transformer
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError

# a toy layer: h 8, 2 heads of 4 (MHA), FFN 32, not gated; one micro-batch of 16 tokens
T = 16

#: pytorch/FBGEMM#2764 (H100, fast accumulation), median us: (cuBLAS per-tensor, CUTLASS row-wise "now"); the whole
#: table, as the commit that landed it holds it (pytorch/FBGEMM@d4dfa64c92)
FBGEMM_2764 = {(4176, 12288, 4096): (310.302, 317.47), (4176, 4096, 12288): (330.399, 363.486),
               (3456, 6144, 4096): (131.935, 132.063), (3456, 4096, 6144): (138.687, 140.447),
               (3456, 4096, 4096): (89.279, 91.583), (3456, 12288, 4096): (255.646, 264.734),
               (3456, 4096, 12288): (285.151, 282.91), (4176, 6144, 4096): (156.543, 158.719),
               (4176, 4096, 6144): (167.487, 180.542)}


def _shape(**kw: Any) -> Any:
    base: dict[str, Any] = dict(layers=2, hidden=8, heads=2, vocab=64, kv_heads=2, ffn_hidden=32, gated_mlp=False)
    base.update(kw)
    return transformer.shape(**base)


def test_rowwise_bytes_by_hand() -> None:
    """t 1, eb 2. Elements: X = qkv 128 + o 128 + fc1 128 + fc2 512 = 896; dY = qkv 384 + o 128 + fc1 512 +
    fc2 128 = 1152; W = 192 + 64 + 256 + 256 = 768. Row cast 3 B, column / tensorwise amax cast 5 B, rescale 4 B:

        rowwise             forward 3 (896 + 768) = 4992
                            backward 5 x 896 + (3 + 5) 1152 + 5 x 768 + 4 (896 + 768) = 4480 + 9216 + 3840 + 6656
                                     = 24192
        rowwise_with_gw_hp  forward 4992; backward 3 x 1152 + 5 x 768 + 4 x 896 = 3456 + 3840 + 3584 = 10880
    and no per-step weight bytes (torchao casts the weight on every call)."""
    rw = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="rowwise")
    gw = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="rowwise_with_gw_hp")
    assert tuple(float(x) for x in rw) == pytest.approx((4992.0, 24192.0, 0.0))
    assert tuple(float(x) for x in gw) == pytest.approx((4992.0, 10880.0, 0.0))


def test_rowwise_bytes_tp2_by_hand() -> None:
    """t 2: X = qkv 128 + o 64 + fc1 128 + fc2 256 = 576; dY = 192 + 128 + 256 + 128 = 704; W = 96 + 32 + 128 + 128
    = 384. rowwise forward 3 (576 + 384) = 2880, backward 5 x 576 + 8 x 704 + 5 x 384 + 4 (576 + 384) = 2880 +
    5632 + 1920 + 3840 = 14272. The MLP alone (mlp_only): X 384, dY 384, W 256: forward 3 x 640 = 1920."""
    f, b, w = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="rowwise", tp=2)
    assert (float(f), float(b), float(w)) == pytest.approx((2880.0, 14272.0, 0.0))
    mf, _, _ = compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="rowwise", tp=2, mlp_only=True)
    assert float(mf) == pytest.approx(1920.0)


def test_rowwise_roofline_agreement_per_activation() -> None:
    """torchao's own roofline (torchao/testing/training/roofline_utils.py ``get_tensor_memory_traffic_ovhd_s`` at
    4fc4068d6, rowwise, not fused with a previous op) counts an input or grad_output at (2 + 1 + 2) + (2 + 1) = 8
    bytes an element and a weight at (2 + 1) + 2 x 2 + (2 + 1) = 10, casts only. Read off the implementation: a
    second micro-batch adds the activation casts alone (the weights are cast per call, not per token), so over the
    toy layer's X 896 and dY 1152 elements a micro-batch costs 8 (896 + 1152) + the dgrad rescale 4 x 896; what is
    left of one micro-batch is the weights' 768 elements at 8 (roofline 10: it transposes in BF16 first) + the wgrad
    rescale 4."""
    one = sum(float(x) for x in compute.fp8_quantize_bytes(_shape(), micro_batch=1, seq_len=T, recipe="rowwise"))
    two = sum(float(x) for x in compute.fp8_quantize_bytes(_shape(), micro_batch=2, seq_len=T, recipe="rowwise"))
    x, dy, w = 896.0, 1152.0, 768.0
    roofline_activation, roofline_weight = (2 + 1 + 2) + (2 + 1), (2 + 1) + 2 * 2 + (2 + 1)
    assert two - one == pytest.approx(roofline_activation * (x + dy) + 4.0 * x)
    assert one - (two - one) == pytest.approx((roofline_weight - 2) * w + 4.0 * w)


def test_forward_gemm_factor_from_fbgemm_by_hand() -> None:
    """Geometric mean of the nine time ratios 1.0231, 1.1001, 1.0010, 1.0127, 1.0258, 1.0355, 0.9921, 1.0139, 1.0779
    = 1.0308; the rate 0.970. Families without a published row-wise timing keep the fp8 curve (1)."""
    ratios = [rw / cublas for cublas, rw in FBGEMM_2764.values()]
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    assert gm == pytest.approx(1.0308, abs=5e-5)
    assert compute.rowwise_forward_gemm_factor("hopper") == pytest.approx(1.0 / gm, rel=1e-4)
    assert compute.rowwise_forward_gemm_factor("hopper") == pytest.approx(0.9701, abs=1e-4)
    for family in ("cdna3", "blackwell", "cdna4"):
        assert compute.rowwise_forward_gemm_factor(family) == 1.0


def _job(cluster: str, precision: str, recipe: str | None = None, model: str = "gpt-7.5b",
         strategy: dict[str, Any] | None = None, **training: Any) -> tuple[Any, Any]:
    tr: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1, **training}
    if recipe is not None:
        tr["fp8_recipe"] = recipe
    cl, wl, t, stg = build_specs(cluster=cluster, model=model, sets=[], training=tr, strategy=strategy or {})
    job = build_job(cl, wl, t, straggler_cv=0.0)
    return job, grid_from_strategy(stg, t, 1, job)


@pytest.mark.parametrize("recipe", ["rowwise", "rowwise_with_gw_hp"])
def test_step_prices_the_recipe_by_hand(recipe: str) -> None:
    """One H100, one layer, one micro-batch, no recompute: forward - (the same job without a recipe) = the forward
    cast bytes / (HBM x efficiency) + (1.0308 - 1) x the layer's forward weight GEMMs; backward - ... = the
    backward bytes / (HBM x efficiency), and for rowwise_with_gw_hp + the forward weight GEMMs of a BF16 job of the
    same model (its own build: BF16 peak and curve) - the fp8 ones (the wgrad GEMMs in BF16)."""
    job, g = _job("dgx-h100", "fp8", recipe)
    assert job.fp8_recipe == recipe and job.fp8_recipe_gemm_factor == 1.0
    layers = np.ones(1)
    on = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    off = layer_compute._compute_per_microbatch(replace(job, fp8_recipe=""), g, layers, logits_on_stage=False)
    f, b, w = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=job.seq_len, recipe=recipe)
    assert float(w) == 0.0
    bw = job.memory_bandwidth * job.memory_efficiency
    gemm_fp8 = float(off["gemm_per_layer"].ravel()[0])
    want_f = float(f) / bw + (1.0308 - 1.0) * gemm_fp8  # 1 / rate = the geometric-mean time ratio
    assert float((on["forward"] - off["forward"]).ravel()[0]) == pytest.approx(want_f, rel=1e-9)
    want_b = float(b) / bw
    if recipe == "rowwise_with_gw_hp":
        bjob, bg = _job("dgx-h100", "bf16")
        gemm_bf16 = float(layer_compute._compute_per_microbatch(bjob, bg, layers, logits_on_stage=False)[
            "gemm_per_layer"].ravel()[0])
        assert gemm_bf16 > 1.5 * gemm_fp8  # the BF16 peak is half the FP8 one
        want_b += gemm_bf16 - gemm_fp8
    assert float((on["backward"] - off["backward"]).ravel()[0]) == pytest.approx(want_b, rel=1e-9)


def test_op_policy_recompute_repeats_the_forward_gemm_rate() -> None:
    """torchtitan's op policy (titan_op) repeats wk, wo and w3's forward GEMMs in the backward: the recompute carries
    (1.0308 - 1) x their time on the fp8 curve beyond the same job at a family without a published factor (1; the
    casts are priced alike there: no cast-kernel factor on either family)."""
    strategy = {"recompute": "selective", "recompute_modules": "titan_op", "layer_impl": "torchtitan"}
    job, g = _job("dgx-h100", "fp8", "rowwise", strategy=strategy)
    layers = np.ones(1)
    on = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    flat = layer_compute._compute_per_microbatch(replace(job, accelerator_family="ampere"), g, layers,
                                                 logits_on_stage=False)
    titan = compute.titan_op_gemm_time(job.shape, float(job.seq_len), 1.0, peak_flops=job.peak_flops,
                                       memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max,
                                       gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
                                       elem_bytes=job.elem_bytes)
    assert float(titan) > 0.0
    got = float((on["backward"] - flat["backward"]).ravel()[0])
    assert got == pytest.approx((1.0308 - 1.0) * float(titan), rel=1e-9)


def test_mi300x_forward_gemms_keep_the_fp8_curve() -> None:
    """No published row-wise timing on MI300X: the forward adds the casts only."""
    job, g = _job("mi300x-8", "fp8", "rowwise")
    layers = np.ones(1)
    on = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    off = layer_compute._compute_per_microbatch(replace(job, fp8_recipe=""), g, layers, logits_on_stage=False)
    f, _, _ = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=job.seq_len, recipe="rowwise")
    want = float(f) / (job.memory_bandwidth * job.memory_efficiency)
    assert float((on["forward"] - off["forward"]).ravel()[0]) == pytest.approx(want, rel=1e-9)


def test_saved_inputs_stay_16_bit() -> None:
    """float8_linear.py line 45 saves input_hp and weight_hp_t: no FP8 copy replaces the saved 16-bit input."""
    assert memory.quantized_input_bytes("rowwise") == memory.quantized_input_bytes("rowwise_with_gw_hp") == 0.0
    assert memory.quantized_input_bytes("tensorwise") == 1.0


def test_invalid_combinations_are_input_errors() -> None:
    with pytest.raises(InputError, match="row-wise kernel"):
        _job("tpu-v5p-pod", "fp8", "rowwise")
    with pytest.raises(InputError, match="rowwise"):  # mxfp8 off Blackwell names what Hopper can run
        _job("dgx-h100", "fp8", "mxfp8")
    with pytest.raises(InputError, match="MoE model"):
        _job("dgx-h100", "fp8", "rowwise", model="mixtral-8x7b")
    with pytest.raises(InputError, match="fp8_recipe"):
        _job("dgx-h100", "bf16", "rowwise")
    with pytest.raises(InputError, match="per-tensor FP8 weights"):
        _job("dgx-h100", "fp8", "rowwise", strategy={"zero": "fsdp", "fsdp_fp8_all_gather": True})
    with pytest.raises(InputError, match="module_precision"):
        _job("dgx-h100", "fp8", "rowwise", module_precision={"attention_proj": "bf16"})
    with pytest.raises(InputError, match="not MoE experts"):
        compute.fp8_quantize_bytes(_shape(moe_experts=4, moe_top_k=2, moe_ffn_hidden=8), micro_batch=1, seq_len=T,
                                   recipe="rowwise", moe=True)


def test_validation_reads_the_tao25_recipes() -> None:
    """The three tao25 row-wise rows get their recipe from the precision text; the tensorwise rows keep theirs. The
    H100 rows ran on Meta's H100 96GB (tao22), which the catalog lacks: listed, their recipe still read."""
    cases = training_cases()
    vt = script_module("validate_training")
    want = {"tao25_h100_llama3_8b_fsdp8_fp8rw": "rowwise", "tao25_mi300x_llama3_8b_fsdp8_fp8rw": "rowwise",
            "tao25_mi300x_llama3_8b_fsdp8_fp8rwgw": "rowwise_with_gw_hp",
            "tao25_h100_llama3_8b_fsdp8_fp8tw": "tensorwise", "tao25_mi300x_llama3_8b_fsdp8_bf16": None}
    for cid, recipe in want.items():
        assert vt.parse_fp8_recipe(str(cases[cid]["precision"])) == recipe, cid
        res = vt.predict_new_case(cases[cid])
        if cid.startswith("tao25_h100_"):
            assert "hardware missing" in res.reason, cid
        else:
            assert res.settings["fp8_recipe"] == recipe, cid


def test_fp8_param_gather_refusal_names_the_te_recipes() -> None:
    """Megatron's fp8_param_gather runs with any Transformer Engine recipe (delayed, Megatron-Core's default,
    tensorwise, mxfp8 on Blackwell, blockwise on Hopper: layer_compute.fp8_params_held / fsdp_fp8_gather take them;
    the mcrec26 H100 fp8blk rows run blockwise with fp8_param_gather), torchao's float8 all-gather with tensorwise
    only: each refusal under a row-wise recipe names what its own flag accepts there."""
    with pytest.raises(InputError) as exc:
        _job("dgx-h100", "fp8", "rowwise", strategy={"zero": 1, "fp8_param_gather": True})
    assert exc.value.allowed.endswith("fp8_recipe delayed, tensorwise or blockwise")  # mxfp8: Blackwell only
    _job("dgx-h100", "fp8", "blockwise", strategy={"zero": 1, "fp8_param_gather": True})  # what it offers runs
    with pytest.raises(InputError) as exc:
        _job("mi300x-8", "fp8", "rowwise", strategy={"zero": 1, "fp8_param_gather": True})
    assert exc.value.allowed.endswith("fp8_recipe delayed or tensorwise")
    with pytest.raises(InputError) as exc:
        _job("dgx-b200", "fp8", "rowwise", strategy={"zero": 1, "fp8_param_gather": True})
    assert exc.value.allowed.endswith("fp8_recipe delayed, tensorwise or mxfp8")
    with pytest.raises(InputError) as exc:
        _job("dgx-h100", "fp8", "rowwise", strategy={"zero": "fsdp", "fsdp_fp8_all_gather": True})
    assert exc.value.allowed.endswith("fp8_recipe tensorwise")


def test_te_recipe_offers_name_their_tensor_cores() -> None:
    """The refusals of a row-wise recipe where the accelerator is not at hand (an MoE model, a Transformer Engine
    option) offer Transformer Engine's recipes with the tensor cores each needs: mxfp8 is refused off Blackwell and
    blockwise off Hopper (specs.training.low_precision_recipe), so neither is offered bare, and blockwise, which
    Hopper runs, is offered."""
    want = "delayed, tensorwise, mxfp8 (Blackwell) or blockwise (Hopper)"
    with pytest.raises(InputError) as exc:
        _job("dgx-h100", "fp8", "rowwise", model="mixtral-8x7b")
    assert exc.value.allowed == f"a dense transformer, or fp8_recipe {want}"
    with pytest.raises(InputError) as exc:
        compute.fp8_quantize_bytes(_shape(moe_experts=4, moe_top_k=2, moe_ffn_hidden=8), micro_batch=1, seq_len=T,
                                   recipe="rowwise", moe=True)
    assert exc.value.allowed == f"a dense workload, or {want}"
    with pytest.raises(InputError) as exc:
        _job("dgx-h100", "fp8", "rowwise", module_precision={"attention_proj": "bf16"})
    assert str(exc.value.allowed).endswith(f"or fp8_recipe {want}")


@pytest.mark.parametrize("recipe", ["rowwise", "rowwise_with_gw_hp", "mxfp8"])
def test_refusal_off_fp8_hardware_offers_no_fp8_recipe(recipe: str) -> None:
    """An accelerator without an fp8 peak (A100) runs no FP8 recipe: the refusal's allowed text names BF16, not
    'delayed or tensorwise', which the next run would have refused for the missing peak. Hopper (an fp8 peak, no
    mxfp8) still gets the recipes it runs."""
    with pytest.raises(InputError) as exc:
        _job("dgx-a100", "fp8", recipe)
    assert "tensorwise" not in exc.value.allowed and "bf16" in exc.value.allowed
    if recipe == "mxfp8":
        with pytest.raises(InputError) as exc:
            _job("dgx-h100", "fp8", recipe)
        assert exc.value.allowed == ("delayed, tensorwise, blockwise, rowwise or rowwise_with_gw_hp on this "
                                        "accelerator")
