"""strategy.loss_impl: the output head's cross-entropy priced per implementation.

The bytes per logit are summed here by hand, pass by pass, from the implementations' code (cited in
scalemodel.cost.compute.loss_logit_bytes), not taken from the function: a pass reading or writing the whole
logits tensor counts its element size, bf16 logits 2 B and the fp32 softmax 4 B."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import script_module

from scalemodel.choices import LossImpl
from scalemodel.cost.compute import gemm_time, logits_compute_time, loss_saved_bytes
from scalemodel.cost.transformer import shape
from scalemodel.engine import planner
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec
from scalemodel.specs.frameworks import read_strategy_file

BF16, FP32 = 2, 4

# (forward passes, backward passes) as (read bytes, write bytes) per logit, bf16 logits.
PASSES = {
    # megatron/core/tensor_parallel/cross_entropy.py (core_r0.8.0)
    "megatron": ([(BF16, FP32),   # calculate_logits_max: vocab_parallel_logits.float()
                  (FP32, 0),      # torch.max(dim=-1)
                  (FP32, FP32),   # vocab_parallel_logits -= logits_max
                  (FP32, FP32),   # torch.exp(out=exp_logits)
                  (FP32, 0),      # exp_logits.sum(dim=-1)
                  (FP32, FP32)],  # exp_logits.div_(sum_exp_logits)
                 [(FP32, FP32),   # grad_input.mul_(grad_output)
                  (FP32, BF16)]),  # autograd casts the fp32 gradient to the bf16 input's dtype
    # megatron/core/fusions/fused_cross_entropy.py: one pass per jit-fused function
    "megatron_fused": ([(BF16, FP32),   # calculate_logits_max (cast + max)
                        (FP32, FP32),   # calculate_predicted_logits (subtract, exp, sum)
                        (FP32, FP32)],  # calculate_cross_entropy_loss (div_)
                       [(FP32, FP32 + BF16)]),  # calculate_gradients: mul_ written back, .to(torch.bfloat16)
    # transformer_engine/pytorch/triton/cross_entropy.py (v2.9)
    "te": ([(BF16, 0),       # online_softmax_kernel
            (BF16, BF16)],   # cross_entropy_kernel: the gradient over the logits
           [(BF16, BF16)]),  # element_mul_kernel
    # flash_attn/ops/triton/cross_entropy.py (v2.4.2)
    "flash_attn": ([(BF16, 0)],        # cross_entropy_fwd_kernel
                   [(BF16, BF16)]),    # cross_entropy_bwd_kernel (dlogits a new tensor)
    # ATen SoftMax.cu (cunn_SoftMaxForward / cunn_SoftMaxBackward) and LossNLL.cu on logits.float()
    "torch": ([(BF16, FP32),                  # .float()
               (FP32, 0), (FP32, 0),          # log_softmax: the max, the sum of exp
               (FP32, FP32)],                 # log_softmax: the output epilogue
              [(0, FP32),                     # nll_loss_backward: grad_input.zero_()
               (FP32, 0),                     # log_softmax backward: sum of the gradient
               (2 * FP32, FP32),              # log_softmax backward: gradient and output in, input gradient out
               (FP32, BF16)]),                # the cast's backward to bf16
    # the same F.cross_entropy(logits.float()) under torch.compile (torchtitan@e7c0cae components/loss.py): one
    # reduction kernel (row max and sum of exp of the up-cast logits, nothing per logit stored), then the
    # partitioner's pointwise backward (exp(x - lse) - onehot) * g cast back to bf16
    "inductor": ([(BF16, 0)],        # the row reduction
                 [(BF16, BF16)]),    # the pointwise backward
}

SH = shape(layers=24, hidden=2048, heads=16, vocab=131072)
H100 = dict(peak_flops=989e12, memory_bandwidth=3.35e12, gemm_max=0.75, gemm_half_dim=96.0, memory_efficiency=0.85)


def _sum(passes: list[tuple[int, int]]) -> int:
    return sum(r + w for r, w in passes)


def test_hand_counted_passes_total() -> None:
    totals = {k: _sum(f) + _sum(b) for k, (f, b) in PASSES.items()}
    assert totals == {"megatron": 52, "megatron_fused": 32, "te": 10, "flash_attn": 6, "torch": 48, "inductor": 6}


@pytest.mark.parametrize("impl", list(PASSES))
def test_logits_memory_time_is_the_hand_counted_bytes(impl: str) -> None:
    b, s, t = 1, 4096, 2
    lg = logits_compute_time(SH, micro_batch=b, seq_len=s, tp=t, loss_impl=impl, **H100)
    logits = b * s * SH.vocab / t
    hbm = H100["memory_bandwidth"] * H100["memory_efficiency"]
    fwd_passes, bwd_passes = PASSES[impl]
    assert float(lg.forward_memory) == pytest.approx(_sum(fwd_passes) * logits / hbm, rel=1e-12)
    gemm = gemm_time(b * s, SH.vocab / t, SH.hidden, elem_bytes=2.0, **H100)
    assert float(lg.forward) == pytest.approx(float(gemm) + _sum(fwd_passes) * logits / hbm, rel=1e-12)
    # backward: the data- and weight-gradient GEMMs (2 x the forward GEMM) and the loss's backward passes
    assert float(lg.backward) == pytest.approx(2 * float(gemm) + _sum(bwd_passes) * logits / hbm, rel=1e-12)


def test_default_is_megatron_and_arrays_broadcast() -> None:
    kw = dict(micro_batch=1, seq_len=4096, **H100)
    default = logits_compute_time(SH, **kw)
    assert float(default.backward) == pytest.approx(float(logits_compute_time(SH, loss_impl="megatron", **kw).backward))
    codes = np.array([int(m) for m in LossImpl])
    lg = logits_compute_time(SH, loss_impl=codes, **kw)
    assert lg.forward.shape == (6,)
    order = np.argsort(-(lg.forward + lg.backward), kind="stable")
    assert [LossImpl.of(c).label for c in codes[order]] == ["megatron", "torch", "megatron_fused", "te",
                                                            "flash_attn", "inductor"]  # 52 > 48 > 32 > 10 > 6 = 6 B


def test_fp32_logits_need_no_cast() -> None:
    """Under fp32 training .float() returns the tensor itself: the unfused loss makes 32 + 8 B (no cast either
    way), Transformer Engine's three passes 3 x 4 + 2 x 4 B."""
    kw = dict(micro_batch=1, seq_len=1024, elem_bytes=4.0, **H100)
    hbm = H100["memory_bandwidth"] * H100["memory_efficiency"]
    n = 1024 * SH.vocab
    for impl, fwd in (("megatron", 4 + 8 + 8 + 4 + 8), ("te", 4 + 8)):
        assert float(logits_compute_time(SH, loss_impl=impl, **kw).forward_memory) == pytest.approx(fwd * n / hbm)


def test_saved_bytes() -> None:
    """fp32 softmax kept by Megatron's two and torch's log_softmax; the 16-bit logits tensor by TE (overwritten
    by its gradient), flash-attn and the compiled loss (its input; the per-row max and sum are per token)."""
    got = [float(loss_saved_bytes(m.label, 2.0)) for m in LossImpl]
    assert got == [4.0, 4.0, 2.0, 2.0, 4.0, 2.0]


def test_bad_value_is_an_input_error(cli) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="loss implementation"):
        logits_compute_time(SH, micro_batch=1, seq_len=8, loss_impl="liger", **H100)
    with pytest.raises(Exception, match="loss implementation"):
        StrategySpec(loss_impl="liger")
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--set", "strategy.loss_impl=liger")
    assert r.code == 2 and r.err.count("\n") == 1 and "loss_impl" in r.err and "megatron_fused" in r.err


def test_predict_prices_the_choice(cli) -> None:  # type: ignore[no-untyped-def]
    steps = {}
    for impl in ("megatron", "te"):
        r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--set", f"strategy.loss_impl={impl}",
                "--json")
        assert r.code == 0, r.err
        out = json.loads(r.out)
        assert out["strategy"]["loss_impl"] == impl
        steps[impl] = out["step_time_s"]
    assert steps["te"] < steps["megatron"]


def test_plan_takes_it_as_a_fixed_field() -> None:
    _, fixed, _ = planner.pins(StrategySpec(loss_impl="native"), ["loss_impl"])
    assert fixed == {"loss_impl": int(LossImpl.MEGATRON_FUSED)}


def test_megatron_reader(tmp_path: Path) -> None:
    f = tmp_path / "a.args"
    f.write_text("--tensor-model-parallel-size 2\n")
    assert "loss_impl" not in read_strategy_file(f).strategy  # the default, megatron: the unfused loss
    f.write_text("--tensor-model-parallel-size 2 --cross-entropy-loss-fusion\n")
    assert read_strategy_file(f).strategy["loss_impl"] == "megatron_fused"  # native, Megatron's default impl
    f.write_text("--cross-entropy-loss-fusion --cross-entropy-fusion-impl native --tensor-model-parallel-size 2\n")
    assert read_strategy_file(f).strategy["loss_impl"] == "megatron_fused"
    f.write_text("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te --tensor-model-parallel-size 2\n")
    assert read_strategy_file(f).strategy["loss_impl"] == "te"
    f.write_text("--cross-entropy-fusion-impl te --tensor-model-parallel-size 2\n")
    sf = read_strategy_file(f)
    assert "loss_impl" not in sf.strategy and any("--cross-entropy-fusion-impl te" in u for u in sf.unused)


def test_megatron_reader_bad_impl(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "a.args"
    f.write_text("--cross-entropy-loss-fusion --cross-entropy-fusion-impl liger\n")
    with pytest.raises(InputError, match="native or te"):
        read_strategy_file(f)
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(f))
    assert r.code == 2 and r.err.count("\n") == 1 and "--cross-entropy-fusion-impl" in r.err


def test_memory_keeps_what_the_loss_saves() -> None:
    """The single-stage peak holds one micro-batch's logits term: 4 s b V / t fp32 softmax for Megatron's losses,
    2 s b V / t (the bf16 logits, overwritten by their gradient) for TE's: the difference is 2 s b V / t."""
    from scalemodel.cost import memory

    kw = dict(micro_batch=2, seq_len=4096, tp=2)
    unfused = memory.activation_bytes(SH, logits_bytes=loss_saved_bytes("megatron", 2.0), **kw)
    te = memory.activation_bytes(SH, logits_bytes=loss_saved_bytes("te", 2.0), **kw)
    assert float(unfused - te) == pytest.approx((4 - 2) * 4096 * 2 * SH.vocab / 2)


def test_predict_memory_follows_loss_impl(cli) -> None:  # type: ignore[no-untyped-def]
    """Through the engine: TE's loss keeps 2 B a logit less than the default on the one stage (p = 1, 1F1B):
    gpt-1.7b at seq 2048, vocab 51200, micro-batch 1, tp 1 -> 2 x 2048 x 51200 B fewer activation bytes."""
    got = {}
    for impl in ("megatron", "te"):
        r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--set", f"strategy.loss_impl={impl}",
                "--set", "strategy.tp=1", "--set", "strategy.pp=1", "--set", "training.micro_batch=1",
                "--set", "training.seq_len=2048", "--json")
        assert r.code == 0, r.err
        got[impl] = json.loads(r.out)["memory"]["parts_bytes"]["activations"]
    assert got["megatron"] - got["te"] == pytest.approx(2 * 2048 * 51200)


def test_validation_rule_follows_the_sources() -> None:
    """scripts/validate_training.py: Megatron-Bridge's recipes run TE's loss, llm-foundry flash-attn's, torchtitan
    its eager F.cross_entropy without TP; the rest (Megatron-LM, Megatron-DeepSpeed, and what is not derived)
    the default."""
    mod = script_module("validate_training")
    case = lambda cid, tp=1: {"id": cid, "parallelism": {"tp": tp}, "hardware": {}, "model": {}}  # noqa: E731
    got = {cid: mod.loss_impl(case(cid, tp)) for cid, tp in (("mb2511_x", 1), ("mpt_x", 1), ("titan24_x", 1),
                                                             ("titan24_y", 8), ("titan25_x", 1), ("titan25_y", 8),
                                                             ("mlm24_x", 1), ("bloom_x", 4))}
    assert got == {"mb2511_x": "te", "mpt_x": "flash_attn", "titan24_x": "torch", "titan24_y": "megatron",
                   "titan25_x": "inductor", "titan25_y": "megatron", "mlm24_x": "megatron", "bloom_x": "megatron"}
