"""Selective recompute of the norms (recompute_modules layernorm; Megatron-Core --recompute-modules layernorm,
transformer_layer.py ``recompute_input_layernorm`` / ``recompute_pre_mlp_layernorm`` under
``CheckpointWithoutOutput``, NVIDIA/Megatron-LM@d98e8a64dd). Only a norm that is a module of its own is recomputed:
with the Transformer Engine spec an MoE layer's pre-MLP norm (TENorm) and an MLA layer's input norm (TENorm); a
standard attention's and a dense MLP's norms are fused into TELayerNormColumnParallelLinear (IdentityOp in the
layer), so nothing is recomputed there. The values are worked out by hand: a norm's forward reads its input and
writes its output, 2 eb x bytes per token (x = h, / t with sequence parallelism), at memory_bandwidth x
memory_efficiency; the memory freed is the norm output its readers kept, gemm bytes x s b h per norm."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.mamba import LayerCounts
from scalemodel.cost.transformer import shape
from scalemodel.errors import InputError

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)
B, S, H = 2, 512, 1024
T = B * S
SBH = S * B * H

GQA_MOE = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2048,
                moe_experts=16, moe_top_k=2, moe_ffn_hidden=256)
GQA = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2048)
MLA = shape(layers=2, hidden=H, heads=8, vocab=1000, head_dim=96, v_head_dim=64, q_lora_rank=256, kv_lora_rank=128,
            qk_rope_head_dim=32, gated_mlp=True, ffn_hidden=2048, moe_experts=16, moe_top_k=2, moe_ffn_hidden=256)


def _mods(*names: str) -> int:
    return memory.recompute_modules_code(",".join(names))


def _recompute(sh, mods: int, moe: bool, **kw) -> float:
    return float(compute.layer_compute_time(sh, micro_batch=B, seq_len=S, recompute="selective", moe=moe,
                                            flash_attention=True, recompute_modules=mods, **KW, **kw).recompute)


NORM = 2 * 2 * T * H / (HBM * MEM)  # one norm forward: read x, write its output, bf16, per token h elements


def test_one_moe_layer_repeats_its_pre_mlp_norm() -> None:
    # 2 x 2 B x 1024 tokens x 1024 = 4,194,304 B at 3e12 x 0.85 B/s = 1.6448 us
    assert NORM == pytest.approx(4_194_304 / 2.55e12, rel=1e-15)
    assert _recompute(GQA_MOE, _mods("layernorm"), moe=True) == pytest.approx(NORM, rel=1e-12)
    # added to the other modules, not replacing them: moe_act's experts' SwiGLU 3 eb T k f_e
    act = 3 * 2 * T * 2 * 256 / (HBM * MEM)
    assert _recompute(GQA_MOE, _mods("layernorm", "moe_act"), moe=True) == pytest.approx(NORM + act, rel=1e-12)


def test_fused_norms_recompute_nothing() -> None:
    # a dense GQA layer: both norms live in TELayerNormColumnParallelLinear (IdentityOp in the layer)
    assert _recompute(GQA, _mods("layernorm"), moe=False) == 0.0
    # a dense layer of the MoE model (moe_first_dense): its MLP norm is fused too
    assert _recompute(GQA_MOE, _mods("layernorm"), moe=False) == 0.0


def test_mla_layers_repeat_the_input_norm_too() -> None:
    assert _recompute(MLA, _mods("layernorm"), moe=True) == pytest.approx(2 * NORM, rel=1e-12)
    assert _recompute(MLA, _mods("layernorm"), moe=False) == pytest.approx(NORM, rel=1e-12)  # dense MLA layer


def test_sequence_parallel_divides_the_norm() -> None:
    got = _recompute(GQA_MOE, _mods("layernorm"), moe=True, tp=4, sequence_parallel=True)
    assert got == pytest.approx(NORM / 4, rel=1e-12)
    assert _recompute(GQA_MOE, _mods("layernorm"), moe=True, tp=4) == pytest.approx(NORM, rel=1e-12)


def test_hybrid_blocks() -> None:
    hyb = shape(layers=4, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=False, ffn_hidden=2048,
                moe_experts=16, moe_top_k=2, moe_ffn_hidden=256, squared_relu=True,
                hybrid=LayerCounts(attention=2, mlp=1, moe=1, mamba=0))
    assert _recompute(hyb, _mods("layernorm"), moe=True, attention=False) == pytest.approx(NORM, rel=1e-12)
    assert _recompute(hyb, _mods("layernorm"), moe=False, attention=False) == 0.0  # MLPLayer: fused norm
    assert _recompute(hyb, _mods("layernorm"), moe=False, mlp=False) == 0.0  # attention layer: fused norm


def _act(sh, mods: int, moe: bool, **kw) -> float:
    kw = dict(dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True), **kw)
    return float(memory.activation_bytes_per_layer(sh, moe=moe, recompute_modules=mods, **kw))


@pytest.mark.parametrize("fp8, gemm_in", [(False, 2.0), (True, 1.0)])
def test_memory_frees_the_norm_output(fp8: bool, gemm_in: float) -> None:
    base, ln = _mods("moe_act"), _mods("moe_act", "layernorm")
    # MoE layer: the block's input as the router / shared experts kept it, gemm_in s b h
    assert _act(GQA_MOE, base, True, fp8_inputs=fp8) - _act(GQA_MOE, ln, True, fp8_inputs=fp8) \
        == pytest.approx(gemm_in * SBH, rel=1e-12)
    # MLA + MoE layer: that and the down-projections' input, 2 gemm_in s b h
    assert _act(MLA, base, True, fp8_inputs=fp8) - _act(MLA, ln, True, fp8_inputs=fp8) \
        == pytest.approx(2 * gemm_in * SBH, rel=1e-12)
    # fused norms: nothing
    assert _act(GQA, base, False, fp8_inputs=fp8) == _act(GQA, ln, False, fp8_inputs=fp8)
    # with moe the checkpoint keeps the 16-bit block input, which the norm's checkpoint frees: 2 s b h
    moe_only = _act(GQA_MOE, _mods("moe"), True, fp8_inputs=fp8)
    moe_ln = _act(GQA_MOE, _mods("moe", "layernorm"), True, fp8_inputs=fp8)
    assert moe_only - moe_ln == pytest.approx(2 * SBH, rel=1e-12)


@pytest.mark.parametrize("attention_inputs, held", [(0.0, 2.0), (1.0, 1.0)])
def test_memory_frees_the_qkv_input_at_the_attention_precision(attention_inputs: float, held: float) -> None:
    """An fp8 run whose attention runs at its own precision (training.module_precision: 0 = 16-bit) keeps MLA's
    down-projection input at that precision (2 s b h in bf16); the input norm's checkpoint frees that storage
    whole, beside the MoE block's fp8 copy of the pre-MLP norm's output (1 s b h). It freed 1 s b h of the
    16-bit QKV input and left the other byte held."""
    base, ln = _mods("moe_act"), _mods("moe_act", "layernorm")
    kw = dict(fp8_inputs=True, attention_inputs=attention_inputs)
    assert _act(MLA, base, True, **kw) - _act(MLA, ln, True, **kw) == pytest.approx((held + 1.0) * SBH, rel=1e-12)


def test_memory_with_sequence_parallel() -> None:
    base, ln = _mods("moe_act"), _mods("moe_act", "layernorm")
    kw = dict(tp=4, sequence_parallel=True)
    assert _act(GQA_MOE, base, True, **kw) - _act(GQA_MOE, ln, True, **kw) == pytest.approx(2 * SBH / 4, rel=1e-12)


def test_unknown_module_is_refused_with_the_names() -> None:
    with pytest.raises(InputError, match="layernorm"):
        memory.recompute_modules_code("gdn_norm_out")
    assert _mods("layernorm") == 64


def test_megatron_reader_and_validation_parse_layernorm() -> None:
    from scalemodel.specs.megatron_args import _recompute_modules
    from scalemodel.specs.strategy_file import StrategyFile
    out = StrategyFile(path="launch.sh", format="megatron", strategy={"recompute": "selective"})
    _recompute_modules({"--recompute-modules": "layernorm moe_act gdn_norm_out mlp"}, out)
    assert out.strategy["recompute_modules"] == "layernorm,moe_act,mlp"
    assert len(out.unused) == 1 and out.unused[0].startswith("--recompute-modules gdn_norm_out (")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import validate_training as v
    assert v.parse_recompute_modules("selective: layernorm and moe_act (...)") == "moe_act,layernorm"


def test_cli_warns_where_it_recomputes_nothing_and_refuses_unknown_names(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["predict", "-c", "dgx-h100", "-n", "64", "--set", "strategy.recompute=selective"]
    dense = cli(*base, "-m", "llama3-8b", "--set", "strategy.recompute_modules=layernorm")
    assert dense.code == 0 and "layernorm recomputes nothing" in dense.err
    moe = cli(*base, "-m", "mixtral-8x7b", "--set", "strategy.recompute_modules=layernorm")
    assert moe.code == 0 and "recomputes nothing" not in moe.err
    bad = cli(*base, "-m", "llama3-8b", "--set", "strategy.recompute_modules=gdn_norm_out")
    assert bad.code == 2 and "unknown recompute module 'gdn_norm_out'" in bad.err and "layernorm" in bad.err
    assert "Traceback" not in bad.err


def _stage(sh, names: str, **kw) -> float:
    kw = dict(dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, embedding=False), **kw)
    return float(memory.activation_bytes(sh, recompute_modules=_mods(*names.split(",")), **kw))


def test_stage_keeps_one_refilled_norm_output_as_working_set() -> None:
    # 2 MoE layers, p = 1, one micro-batch: each frees its 2 s b h block input (16-bit under moe; bf16 run: 2 bytes
    # either way), the backward holds one refilled norm output 2 s b h
    assert _stage(GQA_MOE, "moe_act") - _stage(GQA_MOE, "moe_act,layernorm") == pytest.approx(2 * 2 * SBH - 2 * SBH,
                                                                                              rel=1e-12)
    # under moe the refilled norm output is the block's checkpointed input, inside the block's working set
    assert _stage(GQA_MOE, "moe") - _stage(GQA_MOE, "moe,layernorm") == pytest.approx(2 * 2 * SBH - 2 * SBH, rel=1e-12)
    # fused norms: nothing freed, no working set
    assert _stage(GQA, "core_attn") == _stage(GQA, "core_attn,layernorm")
    # sequence parallelism: everything / t
    kw = dict(tp=4, sequence_parallel=True)
    assert _stage(GQA_MOE, "moe_act", **kw) - _stage(GQA_MOE, "moe_act,layernorm", **kw) == pytest.approx(
        (2 * 2 * SBH - 2 * SBH) / 4, rel=1e-12)


def test_cli_warns_on_a_parallel_block_moe(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """recomputed_norms recomputes nothing in a parallel (GPT-J) block, which Megatron-Core does not have; an MoE model
    of such blocks had layernorm priced as nothing without a word."""
    f = tmp_path / "pmoe.yaml"
    f.write_text("kind: transformer\nname: pmoe\nlayers: 4\nhidden: 1024\nheads: 8\nffn_hidden: 4096\nvocab: 1000\n"
                 "seq_len: 2048\ngated_mlp: false\nparallel_block: true\nnorms_per_layer: 1\n"
                 "moe: {experts: 8, top_k: 2, ffn_hidden: 1024}\n")
    r = cli("predict", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--set", "strategy.recompute=selective",
            "--set", "strategy.recompute_modules=layernorm")
    assert r.code == 0 and "layernorm recomputes nothing" in r.err, r.err
