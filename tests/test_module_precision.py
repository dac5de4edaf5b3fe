"""training.module_precision: a module's GEMMs, casts and weight casts at its own precision
(docs/model.md#module-precision). Values by hand: with gemm_half_dim 0 a GEMM runs at gemm_max x peak whatever its shape
(:func:`scalemodel.cost.compute.gemm_efficiency`), so a layer's GEMM time is the sum of each module's FLOPs over its
own rate; the cast bytes per element are Transformer Engine's (cost.compute.fp8_quantize_bytes' table: nvfp4
2 eb + 2 (1/2 + 1/16) = 5.125, mxfp8 eb + 2 (1 + 1/32) = 4.0625 at eb 2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute, mamba
from scalemodel.cost import transformer as tr
from scalemodel.engine import dp_comm, layer_compute, model_parallel_comm, pipeline_ranks
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError

P0, P1, P2 = 4e15, 1e15, 2e15  # the run's rate, BF16's, MXFP8's (FLOP/s at gemm_max 1)
FAST = dict(memory_bandwidth=1e30, gemm_max=1.0, gemm_half_dim=0.0)  # compute-bound, no size dependence
# one dense layer: h 256, 4 heads of 64 (MHA), f 1024 ungated
DENSE = dict(layers=2, hidden=256, heads=4, vocab=100, ffn_hidden=1024, gated_mlp=False, biases=False)
# one MoE layer with LatentMoE: h 64, E 8 experts of f_e 16 at l 16, k 2, one shared expert
MOE = dict(layers=2, hidden=64, heads=4, vocab=100, ffn_hidden=32, gated_mlp=False, moe_experts=8, moe_top_k=2,
           moe_ffn_hidden=16, moe_shared_experts=1, biases=False, tied_embeddings=True, moe_latent=16)
NVFP4_C, MXFP8_C = 2 * 2 + 2 * (0.5 + 1 / 16), 2 + 2 * (1 + 1 / 32)


def test_attention_proj_bf16_gemm_time_by_hand() -> None:
    """T = 32 tokens, tp 1: QKV 2 T h 3h and O 2 T h h at the BF16 rate, the MLP's 2 x 2 T h f at the run's:
    forward GEMMs = 8 T h^2 / P1 + 4 T h f / P0; the backward's GEMMs twice that, so backward(bf16 proj) -
    backward(all at P0) = 2 x 8 T h^2 (1/P1 - 1/P0)."""
    sh = tr.shape(**DENSE)
    T, h, f = 32, 256, 1024
    kw = dict(micro_batch=1, seq_len=T, peak_flops=P0, **FAST)
    mixed = compute.layer_compute_time(sh, **kw, proj_peak_flops=P1, proj_gemm_max=1.0, proj_gemm_half_dim=0.0)
    same = compute.layer_compute_time(sh, **kw)
    assert float(mixed.forward_gemm) == pytest.approx(8 * T * h * h / P1 + 4 * T * h * f / P0, rel=1e-12)
    assert float(same.forward_gemm) == pytest.approx((8 * T * h * h + 4 * T * h * f) / P0, rel=1e-12)
    assert float(mixed.backward - same.backward) == pytest.approx(2 * 8 * T * h * h * (1 / P1 - 1 / P0), rel=1e-9)
    # the FLOPs counted are the same: precision moves time, not work
    assert float(mixed.forward_flops) == float(same.forward_flops)


def test_moe_latent_bf16_gemm_time_by_hand() -> None:
    """The MoE block alone (T = 10, tp 1, ep 1): the two latent projections 2 x 2 T h l at the BF16 rate, the router
    2 T h E, the routed experts 2 x 2 (T k) l f_e and the shared expert 2 x 2 T h f_s at the run's."""
    sh = tr.shape(**MOE)
    T, h, l, E, k, fe = 10, 64, 16, 8, 2, 16
    kw = dict(micro_batch=1, seq_len=T, peak_flops=P0, moe=True, attention=False, **FAST)
    got = compute.layer_compute_time(sh, **kw, latent_peak_flops=P1, latent_gemm_max=1.0, latent_gemm_half_dim=0.0)
    # the routed experts: E experts of T k / E tokens each
    run = 2 * T * h * E + 2 * 2 * (T * k) * l * fe + 2 * 2 * T * h * fe
    assert float(got.forward_gemm) == pytest.approx(4 * T * h * l / P1 + run / P0, rel=1e-12)


def test_mamba_out_proj_mxfp8_gemm_time_by_hand() -> None:
    """A Mamba-2 layer's projections (h 256, P 64, H 8, N 16, G 2: d_in 512, in_proj 2 d_in + 2 G N + H = 1096):
    in_proj 2 T h 1096 at the run's rate, out_proj 2 T d_in h at MXFP8's; the backward's projection GEMMs twice."""
    md = mamba.mamba_dims(hidden=256, head_dim=64, state_dim=16, groups=2, heads=8)
    T, h, d_in = 128, 256, 512
    kw = dict(micro_batch=1, seq_len=T, peak_flops=P0, **FAST)
    mixed = compute.mamba_layer_time(md, **kw, out_proj_peak_flops=P2, out_proj_gemm_max=1.0,
                                     out_proj_gemm_half_dim=0.0)
    same = compute.mamba_layer_time(md, **kw)
    assert float(mixed.forward_gemm) == pytest.approx(2 * T * h * 1096 / P0 + 2 * T * d_in * h / P2, rel=1e-12)
    assert float(mixed.backward - same.backward) == pytest.approx(2 * 2 * T * d_in * h * (1 / P2 - 1 / P0), rel=1e-9)


def test_attention_bf16_casts_by_hand() -> None:
    """NVFP4 run, dense MHA layer, tp 1, no SP, T = 32: a BF16 attention block casts nothing, so the layer casts
    5.125 bytes an element less of X_qkv (T h), X_o (T h), dY_qkv (T 3h) and dY_o (T h), and of its 4 h^2 weights."""
    sh = tr.shape(**DENSE)
    T, h = 32, 256
    kw = dict(micro_batch=1, seq_len=T, recipe="nvfp4", transpose_copy=False)
    f0, b0, w0 = compute.fp8_quantize_bytes(sh, **kw)
    f1, b1, w1 = compute.fp8_quantize_bytes(sh, **kw, attention_recipe="")
    assert float(f0 - f1) == pytest.approx(NVFP4_C * 2 * T * h)
    assert float(b0 - b1) == pytest.approx(NVFP4_C * 4 * T * h)
    assert float(w0 - w1) == pytest.approx(NVFP4_C * 4 * h * h)
    # in MXFP8 instead: the same elements at 4.0625 bytes
    f2, b2, w2 = compute.fp8_quantize_bytes(sh, **kw, attention_recipe="mxfp8")
    assert float(f2 - f1) == pytest.approx(MXFP8_C * 2 * T * h)
    assert float(w2 - w1) == pytest.approx(MXFP8_C * 4 * h * h)


def test_latent_bf16_casts_by_hand() -> None:
    """The latent projections' X (T h, T l), dY (T l, T h) and weights 2 h l leave the casts when BF16."""
    sh = tr.shape(**MOE)
    T, h, l = 10, 64, 16
    kw = dict(micro_batch=1, seq_len=T, recipe="nvfp4", transpose_copy=False, moe=True)
    f0, b0, w0 = compute.fp8_quantize_bytes(sh, **kw)
    f1, b1, w1 = compute.fp8_quantize_bytes(sh, **kw, latent_recipe="")
    assert float(f0 - f1) == pytest.approx(NVFP4_C * T * (h + l))
    assert float(b0 - b1) == pytest.approx(NVFP4_C * T * (h + l))
    assert float(w0 - w1) == pytest.approx(NVFP4_C * 2 * h * l)


def test_mamba_out_proj_cast_bytes_by_hand() -> None:
    """out_proj in MXFP8, tp 1: X T d_in, dY T h, W h d_in at 4.0625 bytes; BF16: none."""
    md = mamba.mamba_dims(hidden=256, head_dim=64, state_dim=16, groups=2, heads=8)
    T, h, d_in = 128, 256, 512
    f, b, w = compute.mamba_out_proj_quantize_bytes(md, micro_batch=1, seq_len=T, recipe="mxfp8",
                                                    transpose_copy=False)
    assert (float(f), float(b), float(w)) == pytest.approx((MXFP8_C * T * d_in, MXFP8_C * T * h,
                                                           MXFP8_C * h * d_in))
    assert all(float(x) == 0.0 for x in compute.mamba_out_proj_quantize_bytes(md, micro_batch=1, seq_len=T,
                                                                                recipe=""))


def _job(cluster: str, precision: str, model: str = "gpt-7.5b", **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1, **training}
    cl, wl, trs, stg = build_specs(cluster=cluster, model=model, sets=[], training=tr_in, strategy={})
    job = build_job(cl, wl, trs, straggler_cv=0.0)
    return job, grid_from_strategy(stg, trs, 1, job)


def test_engine_prices_attention_proj_bf16_between_the_runs() -> None:
    """gpt-7.5b on one B200, NVFP4: attention projections in BF16 cost more than all-NVFP4 and less than an all-BF16
    run; the job carries BF16's peak for them and no module override reaches a BF16 run."""
    j4, g4 = _job("dgx-b200", "fp4")
    jm, gm = _job("dgx-b200", "fp4", module_precision={"attention_proj": "bf16"})
    jb, gb = _job("dgx-b200", "bf16")
    assert jm.module_precision == (("attention_proj", "bf16"),)
    one = np.array([float(j4.shape.layers)])
    t = [float(np.ravel(layer_compute._compute_per_microbatch(j, g, one)["total"])[0]) for j, g in ((j4, g4), (jm, gm),
                                                                                           (jb, gb))]
    assert t[0] < t[1] < t[2]
    assert layer_compute.module_gemm_kwargs(jm, "attention_proj", "proj") == {
        "proj_peak_flops": jm.attention_peak_flops, "proj_gemm_max": jm.attention_gemm_max,
        "proj_gemm_half_dim": jm.attention_gemm_half_dim}
    from msgspec.structs import replace
    # a BF16 layer is BF16 whole
    assert layer_compute.module_recipe(replace(jm, fp8_recipe=""), "attention_proj") is None


def test_engine_mxfp8_rate_is_the_fp8_curve_times_the_mxfp8_factor() -> None:
    """An mxfp8 module of an fp4 run: the fp8 peak at the fp8 curve's gemm_max x 0.951 (FP8_RECIPE_GEMM_FACTORS),
    the same rate an fp8 mxfp8 run's GEMMs get."""
    jm, _ = _job("gb200-nvl72", "fp4", model="nemotron-3-super", module_precision={"mamba_out_proj": "mxfp8"})
    jx, _ = _job("gb200-nvl72", "fp8", model="nemotron-3-super", fp8_recipe="mxfp8")
    assert jm.mxfp8_peak_flops == jx.peak_flops
    assert jm.mxfp8_gemm_max == pytest.approx(jx.gemm_max, rel=1e-12)
    assert jm.mxfp8_gemm_half_dim == jx.gemm_half_dim


def test_mtp_bf16_prices_the_block_at_bf16() -> None:
    """nemotron-3-super's MTP block in BF16: the stage holding it is slower than with the block in NVFP4, and the
    difference is in the MTP modules alone (a stage without the logits, and so without MTP, is unchanged)."""
    j4, g4 = _job("gb200-nvl72", "fp4", model="nemotron-3-super")
    jm, gm = _job("gb200-nvl72", "fp4", model="nemotron-3-super", module_precision={"mtp": "bf16"})
    one = np.array([4.0])
    last = [float(np.ravel(layer_compute._compute_per_microbatch(j, g, one)["total"])[0])
            for j, g in ((j4, g4), (jm, gm))]
    mid = [float(np.ravel(layer_compute._compute_per_microbatch(j, g, one, False)["total"])[0]) for j, g in ((j4, g4),
                                                                                                  (jm, gm))]
    assert last[1] > last[0] and mid[1] == mid[0]


@pytest.mark.parametrize("training,match", [
    ({"precision": "fp4", "module_precision": {"mamba_out_proj": "mxfp8"}}, "no Mamba layers"),
    ({"precision": "fp4", "module_precision": {"moe_latent": "bf16"}}, "no LatentMoE"),
    ({"precision": "fp4", "module_precision": {"mtp": "bf16"}}, "no multi-token"),
])
def test_modules_the_model_lacks_are_refused(training: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        _job("dgx-b200", **training)


def test_mxfp8_off_blackwell_refused() -> None:
    with pytest.raises(InputError, match="mxfp8 needs Blackwell"):
        _job("dgx-h100", "fp8", module_precision={"attention_proj": "mxfp8"})


@pytest.mark.parametrize("setting,match", [
    ("training.module_precision.attn=bf16", "unknown key 'attn'"),
    ("training.module_precision.attention_proj=fp16", "'bf16' or 'mxfp8'"),
])
def test_cli_bad_module_precision_exits_2(setting: str, match: str, cli: Any) -> None:
    r = cli("predict", "--cluster", "dgx-b200", "--model", "gpt-7.5b", "--gpus", "8", "--precision", "fp4", "--set",
            setting)
    assert r.code == 2 and match in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_cli_module_precision_on_bf16_run_exits_2(cli: Any) -> None:
    r = cli("predict", "--cluster", "dgx-b200", "--model", "gpt-7.5b", "--gpus", "8", "--precision", "bf16", "--set",
            "training.module_precision.attention_proj=bf16")
    assert r.code == 2 and "needs precision fp8 or fp4" in r.err


def test_fp8_param_weights_leave_out_the_bf16_modules() -> None:
    """fp8_param_gather: Megatron-Core builds a module its quant_recipe matches under that config's own
    fp8_model_init (BF16 for a bf16 config), so gpt-7.5b's FP8 parameters per layer are the MLP's (2|3) h f alone
    with attention_proj bf16, and the MLP's + QKV h (a + 2 g) d + O a d h without."""
    j0, _ = _job("dgx-h100", "fp8")
    jm, _ = _job("dgx-h100", "fp8", module_precision={"attention_proj": "bf16"})
    sh = j0.shape
    h, f, a, g, d = (float(x) for x in (sh.hidden, sh.ffn_hidden, sh.heads, sh.kv_heads, sh.head_dim))
    mlp = (3.0 if bool(sh.gated_mlp) else 2.0) * h * f
    assert float(dp_comm.fp8_param_linear_per_layer(jm)) == pytest.approx(mlp, rel=1e-12)
    assert float(dp_comm.fp8_param_linear_per_layer(j0)) == pytest.approx(mlp + h * (a + 2 * g) * d + a * d * h,
                                                                       rel=1e-12)


def test_saved_inputs_of_a_bf16_attention_block_by_hand() -> None:
    """NVFP4 layer (0.5625 bytes a saved GEMM input), tp 1, s b = 32 x 1, h = a d_v = 256: the BF16 attention block
    keeps its QKV input at 2 bytes (+1.4375 s b h) and its O-projection input at 2 bytes: with the fused core
    (whose 16-bit output the O-projection then keeps, no NVFP4 copy) -0.5625 s b a d_v, without it +1.4375."""
    from scalemodel.cost import memory
    sh = tr.shape(**DENSE)
    sbh = 32 * 256
    kw = dict(micro_batch=1, seq_len=32, fp8_inputs=0.5625)
    for flash, diff in ((True, 1.4375 - 0.5625), (False, 2 * 1.4375)):
        base = memory.activation_bytes_per_layer(sh, flash_attention=flash, **kw)
        bf16 = memory.activation_bytes_per_layer(sh, flash_attention=flash, attention_inputs=0.0, **kw)
        assert float(bf16 - base) == pytest.approx(diff * sbh)


def test_saved_inputs_of_own_precision_latent_and_out_proj_by_hand() -> None:
    """LatentMoE projections in BF16 (NVFP4 layer, tp 1, T = 10): fc2_latent_proj's input T l at 2 bytes (+1.4375
    T l) and fc1_latent_proj's own 16-bit copy of the norm output (+2 T h); a Mamba out_proj in MXFP8: its input
    T d_in at 1 + 1/32 bytes (E8M0 scale per 32) instead of 0.5625."""
    from scalemodel.cost import memory
    sh = tr.shape(**MOE)
    kw = dict(micro_batch=1, seq_len=10, fp8_inputs=0.5625, moe=True)
    diff = memory.activation_bytes_per_layer(sh, latent_inputs=0.0, **kw) - memory.activation_bytes_per_layer(sh, **kw)
    assert float(diff) == pytest.approx(1.4375 * 10 * 16 + 2 * 10 * 64)
    md = mamba.mamba_dims(hidden=256, head_dim=64, state_dim=16, groups=2, heads=8)
    mk = dict(micro_batch=1, seq_len=128, fp8_inputs=0.5625)
    assert memory.quantized_input_bytes("mxfp8") == 1.0 + 1.0 / 32.0
    d = memory.mamba_activation_bytes(md, out_proj_inputs=memory.quantized_input_bytes("mxfp8"), **mk) \
        - memory.mamba_activation_bytes(md, **mk)
    assert float(d) == pytest.approx((1.0 + 1.0 / 32.0 - 0.5625) * 128 * 512)


def test_validation_reads_the_mix_for_exactly_the_super_nvfp4_rows() -> None:
    """scripts/validate_training.py gives te_quant.cfg's mix to the Megatron-Bridge Nemotron 3 Super NVFP4 rows, read
    from their model and precision, and to no other row (the Super / Lightning MXFP8 presets' keep_mtp_spec_in_bf16 is
    read by nothing at their commits, so their MTP blocks stay MXFP8); the mix is the file's five matchers."""
    from pathlib import Path

    from conftest import load_yaml, script_module
    mod = script_module("validate_training")
    root = Path(__file__).resolve().parents[1]
    cases = load_yaml(root / "validation" / "training_cases.yaml")
    got = sorted(c["id"] for c in cases if mod.recipe_module_precision(c))
    assert got == ["mb2604_b200_nemotron3_super_nvfp4", "mb2606_b300_nemotron3_super_nvfp4",
                   "mb2608_gb200_nemotron3_super_nvfp4", "mb2608_gb300_nemotron3_super_nvfp4"]
    assert mod.TE_QUANT_CFG_NEMOTRON_3_SUPER == {"attention_proj": "bf16", "moe_latent": "bf16", "mtp": "bf16",
                                                 "mamba_out_proj": "mxfp8"}


def test_selective_moe_recompute_with_own_precision_latent_by_hand() -> None:
    """Selective recompute of moe (NVFP4 layer, q = 0.5625, tp 1, s b = 10, h 64, l 16): the checkpointed MoE block
    keeps only its 16-bit input, so the kept bytes of a layer do not depend on LatentMoE's precision (fc1_latent_proj's
    own copy of the norm output is inside the checkpoint); the one block re-materialised in the backward holds
    fc1_latent_proj's copy at its own bytes (BF16: the checkpoint's input itself, 0; MXFP8 1.03125 instead of q) and
    fc2_latent_proj's input T l at its own bytes (BF16 2, MXFP8 1.03125 instead of q)."""
    from scalemodel.cost import memory
    sh = tr.shape(**MOE)
    moe = memory.recompute_modules_code("moe")
    kw = dict(micro_batch=1, seq_len=10, fp8_inputs=0.5625, recompute="selective", recompute_modules=moe)
    sbh, sbl = 10 * 64, 10 * 16
    base = float(memory.activation_bytes_per_layer(sh, moe=True, **kw))
    for lat in (0.0, 1.03125):
        assert float(memory.activation_bytes_per_layer(sh, moe=True, latent_inputs=lat, **kw)) == base
    # one stage, pp 1: the per-layer rows are equal, so the stage's difference is the working set's alone
    stage = float(memory.activation_bytes(sh, shared_input_copy=False, **kw))
    bf16 = float(memory.activation_bytes(sh, shared_input_copy=False, latent_inputs=0.0, **kw))
    mx = float(memory.activation_bytes(sh, shared_input_copy=False, latent_inputs=1.03125, **kw))
    assert bf16 - stage == pytest.approx(-0.5625 * sbh + (2.0 - 0.5625) * sbl, rel=1e-12)
    assert mx - stage == pytest.approx((1.03125 - 0.5625) * (sbh + sbl), rel=1e-12)


def test_recomputed_moe_block_casts_do_not_depend_on_the_attention_precision() -> None:
    """Selective recompute of moe reruns the MoE block's forward casts (layer_compute.fp8_moe_recompute_casts); the
    block holds no attention, so mixtral-8x7b's recomputed casts on B200 NVFP4 are the same with the attention
    projections in BF16 as without (the override moves the attention block's casts only)."""
    def casts(**training: Any) -> float:
        tr_in: dict[str, Any] = {"precision": "fp4", "global_batch": 1, "micro_batch": 1, **training}
        cl, wl, trs, stg = build_specs(cluster="dgx-b200", model="mixtral-8x7b", sets=[], training=tr_in,
                                       strategy={"recompute": "selective", "recompute_modules": "moe"})
        job = build_job(cl, wl, trs, straggler_cv=0.0)
        return float(np.ravel(layer_compute.fp8_moe_recompute_casts(job, grid_from_strategy(stg, trs, 8, job)))[0])

    base = casts()
    assert base > 0.0
    assert casts(module_precision={"attention_proj": "bf16"}) == pytest.approx(base, rel=1e-12)


def test_mamba_out_proj_weight_cast_under_fp8_param_gather_by_hand() -> None:
    """A delayed-scaling run with fp8_param_gather (ZeRO 1) holds the out_proj weight W = h d_in / t in FP8: per step
    only its transposed copy, 2 W bytes (Hopper), 0 without the copy (Blackwell); block-scaled recipes cast it whole."""
    md = mamba.mamba_dims(hidden=256, head_dim=64, state_dim=16, groups=2, heads=8)
    h, d_in, t = 256, 512, 2
    kw = dict(micro_batch=1, seq_len=128, tp=t)
    w = compute.mamba_out_proj_quantize_bytes(md, recipe="delayed", fp8_params=True, **kw)[2]
    assert float(w) == pytest.approx(2 * h * d_in / t)
    w = compute.mamba_out_proj_quantize_bytes(md, recipe="delayed", fp8_params=True, transpose_copy=False, **kw)[2]
    assert float(w) == 0.0
    w = compute.mamba_out_proj_quantize_bytes(md, recipe="mxfp8", fp8_params=True, transpose_copy=False, **kw)[2]
    assert float(w) == pytest.approx(MXFP8_C * h * d_in / t)


def test_bf16_out_proj_under_fp8_param_gather_removes_what_the_run_casts() -> None:
    """nemotron-3-super on H100, fp8 delayed, ZeRO 1 + fp8_param_gather, tp 8, 4 micro-batches: out_proj in BF16 takes
    from each Mamba layer's forward casts its input's cast, (eb + 1) + 1 (transposed copy) = 4 bytes x T d_in / t, and
    its FP8 weight's transposed copy, 2 h d_in / t per step over m micro-batches (not a whole cast of the weight)."""
    def job(**training: Any) -> tuple[Any, Any]:
        tr_in: dict[str, Any] = {"precision": "fp8", "fp8_recipe": "delayed", "global_batch": 32, "micro_batch": 1,
                                 **training}
        cl, wl, trs, stg = build_specs(cluster="dgx-h100", model="nemotron-3-super", sets=[], training=tr_in,
                                       strategy={"zero": 1, "fp8_param_gather": True, "tp": 8, "ep": 8,
                                                 "sequence_parallel": True})
        j = build_job(cl, wl, trs, straggler_cv=0.0)
        return j, grid_from_strategy(stg, trs, 64, j)

    j0, g0 = job()
    j1, g1 = job(module_precision={"mamba_out_proj": "bf16"})
    assert bool(np.ravel(layer_compute.fp8_params_held(j0, g0))[0])
    md, hy, L = j0.shape.mamba, j0.shape.hybrid, float(j0.shape.layers)
    T, t, m = float(j0.seq_len), 8.0, 4.0
    assert float(np.ravel(pipeline_ranks.microbatches(g0))[0]) == m
    nbytes = 4.0 * T * md.d_inner / t + 2.0 * md.hidden * md.d_inner / t / m
    want = -(hy.mamba / L) * nbytes / (j0.memory_bandwidth * j0.memory_efficiency)
    got = layer_compute.fp8_cast_per_layer(j1, g1, 0.0)[0] - layer_compute.fp8_cast_per_layer(j0, g0, 0.0)[0]
    assert float(np.ravel(got)[0]) == pytest.approx(want, rel=1e-9)


def test_bf16_out_proj_never_makes_a_mamba_layer_cast_negative() -> None:
    """nemotron-3-super on H100, fp8 delayed, tp 1: a Mamba layer's casts are estimated as half an attention + MLP
    layer's, f / 2, and its out_proj's run-recipe casts rf (X T d_in at (eb + 1) + 1 = 4 bytes, the weight) exceed
    that here, so a BF16 out_proj (own casts 0) takes f / 2 away, not rf: the forward changes by -(mamba / L) f / 2,
    f from the cost function (compute.fp8_quantize_bytes of a whole attention + MLP layer at the run's recipe)."""
    def job(**training: Any) -> tuple[Any, Any]:
        tr_in: dict[str, Any] = {"precision": "fp8", "fp8_recipe": "delayed", "global_batch": 8, "micro_batch": 1,
                                 **training}
        cl, wl, trs, stg = build_specs(cluster="dgx-h100", model="nemotron-3-super", sets=[], training=tr_in,
                                       strategy={"ep": 8})
        j = build_job(cl, wl, trs, straggler_cv=0.0)
        return j, grid_from_strategy(stg, trs, 8, j)

    j0, g0 = job()
    j1, g1 = job(module_precision={"mamba_out_proj": "bf16"})
    md, hy, L = j0.shape.mamba, j0.shape.hybrid, float(j0.shape.layers)
    T = float(j0.seq_len)
    f, _, w = compute.fp8_quantize_bytes(j0.shape, micro_batch=1.0, seq_len=T, recipe="delayed", transpose_copy=True)
    m = float(np.ravel(pipeline_ranks.microbatches(g0))[0])
    bw = j0.memory_bandwidth * j0.memory_efficiency
    half = float(np.ravel(f + w / m)[0]) / 2
    assert half < 4.0 * T * md.d_inner  # the run's out_proj input cast alone exceeds the half-layer estimate
    got = layer_compute.fp8_cast_per_layer(j1, g1, 0.0)[0] - layer_compute.fp8_cast_per_layer(j0, g0, 0.0)[0]
    assert float(np.ravel(got)[0]) == pytest.approx(-(hy.mamba / L) * half / bw, rel=1e-9)


def _tp2(precision: str, model: str, **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": 2, "micro_batch": 1, **training}
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72" if model != "gpt-7.5b" else "dgx-b200", model=model,
                                   sets=[], training=tr_in,
                                   strategy={"tp": 2, "sequence_parallel": True, "tp_comm_overlap": True})
    job = build_job(cl, wl, trs, straggler_cv=0.0)
    return job, grid_from_strategy(stg, trs, 2, job)


@pytest.mark.parametrize("full", [False, True])
def test_tp_chunking_prices_the_mtp_block_at_its_own_gemm_time_by_hand(full: bool) -> None:
    """_tp_chunking (docs/model.md#tp-comm): dt = gemm d0 / (T + d0) x ((n + rec) fwd + n dgrad) for the layers at
    the accelerator's d0; the MTP blocks' GEMMs are not split (mtpub32, docs/model.md#ub-off: Megatron-Core builds
    them without userbuffers; until then + mtp_gemm d0_mtp / (T + d0_mtp) ((1 + rec) fwd + dgrad)). gpt-7.5b (h 4096,
    MHA, f 4h ungated): the RS-side share r = (h^2 + f h) / (4 h^2 + 2 f h) = 5/12; tp 2: fwd = (1 - r) (2 - 1) +
    r (splits - 1), dgrad = r (2 - 1); T = 2048 tokens, d0 366 (B200 fp4 curve), the MTP block's 175 (BF16's)."""
    job, g = _tp2("fp4", "gpt-7.5b")
    if full:
        from msgspec.structs import replace
        g = replace(g, recompute=np.asarray([int(tr.Recompute.FULL)]))
    assert (job.gemm_half_dim, job.attention_gemm_half_dim, job.seq_len) == (366.0, 175.0, 2048)
    r = 5.0 / 12.0
    fwd = (1 - r) * 1 + r * (model_parallel_comm.UB_PIPELINE_SPLITS - 1)
    dgrad = r * 1
    comp = {"layers_per_stage": np.asarray([4.0]), "recomputed_layers": np.asarray([4.0 if full else 0.0]),
            "gemm_per_layer": np.asarray([1e-3]), "mtp_gemm": np.asarray([3e-3]), "mtp_gemm_half_dim": 175.0}
    rec = 4.0 if full else 0.0
    want = 1e-3 * 366 / (2048 + 366) * ((4 + rec) * fwd + 4 * dgrad)
    assert float(np.ravel(model_parallel_comm._tp_chunking(job, g, comp, 2048.0))[0]) == pytest.approx(want, rel=1e-12)


def test_mtp_block_carries_its_own_gemm_time_and_curve() -> None:
    """nemotron-3-super, NVFP4 run, MTP block in BF16: the block's GEMMs beside its TP collectives are priced on
    BF16's curve (its d0) and are slower than the same block's in NVFP4."""
    j4, g4 = _tp2("fp4", "nemotron-3-super")
    jm, gm = _tp2("fp4", "nemotron-3-super", module_precision={"mtp": "bf16"})
    one = np.array([4.0])
    c4, cm = layer_compute._compute_per_microbatch(j4, g4, one), layer_compute._compute_per_microbatch(jm, gm, one)
    assert float(np.ravel(c4["mtp_gemm_half_dim"])[0]) == j4.gemm_half_dim
    assert float(np.ravel(cm["mtp_gemm_half_dim"])[0]) == jm.attention_gemm_half_dim
    assert float(np.ravel(cm["mtp_gemm"])[0]) > float(np.ravel(c4["mtp_gemm"])[0]) > 0
    # the layers' own GEMMs are the same in both
    assert float(np.ravel(cm["gemm_per_layer"])[0]) == float(np.ravel(c4["gemm_per_layer"])[0])
