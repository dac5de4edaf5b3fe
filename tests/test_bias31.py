"""bias31: parameter-count defects review31a found (validation/README.md#review31a), each checked against a count made
by hand from the module layout of its source.

* A gated MLP's fc1 bias is 2f wide: Megatron-Core fuses gate and up in ``linear_fc1``, output (and bias) size
  ``ffn_hidden_size *= 2`` under ``gated_linear_unit`` (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/mlp.py
  lines 205-225; moe/experts.py TEGroupedMLP lines 214-223). It was counted f in expert_params, expert_param_tensors
  and layer_param_tensors (and mlp_params).
* The MoE router's bias, E elements where ``add_bias_linear`` (moe/router.py lines 64-72; GPT-OSS: add_bias_linear
  True, mlp.router.bias mapped, NVIDIA-NeMo/Megatron-Bridge@4ab94dfad gpt_oss_bridge.py lines 62, 171), was not
  counted.
* A 32-bit run with flash_attention on (FlashAttention-2/3 and cuDNN fused attention take fp16 / bf16 (fp8) only).

The shape: GPT-OSS 120B's MoE block (h 2880, 128 experts of width 2880, gated, linear biases), small elsewhere."""

from __future__ import annotations

import pytest

from scalemodel.cost import transformer
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, F, E = 2880, 2880, 128


def _oss(**kw: object) -> transformer.Shape:
    base: dict[str, object] = dict(layers=2, hidden=H, heads=64, kv_heads=8, head_dim=64, vocab=1000, gated_mlp=True,
                                   biases=True, tied_embeddings=False, moe_experts=E, moe_top_k=4, moe_ffn_hidden=F)
    base.update(kw)
    return transformer.shape(**base)  # type: ignore[arg-type]


def _elements(tensors: list[transformer.ParamTensor]) -> float:
    return float(sum(float(t.n) * float(t.elements) for t in tensors))


def test_gated_expert_fc1_bias_is_2f() -> None:
    """One GPT-OSS expert: fc1 2880 x 5760 + bias 5760, fc2 2880 x 2880 + bias 2880 = 24,891,840 (was 24,888,960)."""
    sh = _oss()
    by_hand = H * 2 * F + 2 * F + F * H + H
    assert by_hand == 24_891_840
    assert float(transformer.expert_params(sh)) == by_hand
    tensors = transformer.expert_param_tensors(sh)
    assert _elements(tensors) == by_hand
    biases = sorted((float(t.elements), t.split) for t in tensors if float(t.elements) < H * H)
    assert biases == [(float(H), False), (float(2 * F), True)]  # fc2's whole, fc1's split over etp


def test_ungated_expert_bias_unchanged() -> None:
    """Without a gate fc1 is f wide and so is its bias: 2 h f + f + h."""
    sh = _oss(gated_mlp=False)
    assert float(transformer.expert_params(sh)) == 2 * H * F + F + H


def test_gated_dense_mlp_fc1_bias_is_2f() -> None:
    """A dense gated MLP with biases (mlp.py, the same fused linear_fc1): 3 h f + 2 f + h; its layer tensors hold a
    2f fc1 bias."""
    sh = transformer.shape(layers=2, hidden=256, heads=4, vocab=100, ffn_hidden=512, gated_mlp=True, biases=True)
    assert float(transformer.mlp_params(sh)) == 3 * 256 * 512 + 2 * 512 + 256
    layer = transformer.layer_param_tensors(sh, moe=False)
    assert any(float(t.n) == 1.0 and float(t.elements) == 1024.0 and t.split for t in layer)
    assert _elements(layer) == float(transformer.layer_params(sh))


def test_router_bias_counted() -> None:
    """One GPT-OSS-like MoE layer: router 128 x 2880 + bias 128; the layer's tensors outside the routed experts plus
    E experts add up to layer_params(moe), each counted by hand: QKV 2880 x (64 + 2 x 8) 64 + bias 5120, proj
    4096 x 2880 + bias 2880, 2 norms of a weight only (RMSNorm: mem32's norm_biases defaults to false for a gated
    MLP; bias31 counted a LayerNorm bias with ``biases``), 128 experts of 3 h f + 2 f + h, the router."""
    sh = _oss()
    assert float(transformer.router_params(sh)) == E * H + E
    qkv = H * (64 + 2 * 8) * 64 + (64 + 2 * 8) * 64
    proj = 64 * 64 * H + H
    norms = 2 * H
    experts = E * (3 * H * F + 2 * F + H)
    router = E * H + E
    by_hand = qkv + proj + norms + experts + router
    assert float(transformer.layer_params(sh, moe=True)) == by_hand
    layer = transformer.layer_param_tensors(sh, moe=True)
    assert _elements(layer) + E * float(transformer.expert_params(sh)) == by_hand
    whole = [float(t.elements) for t in layer if not t.split and float(t.n) > 0]
    assert float(E) in whole  # the router bias, whole on every TP rank
    # the model: 2 MoE layers, untied 1000 x 2880 embedding and output, final norm (RMSNorm: its weight only)
    assert float(transformer.param_count(sh)) == 2 * by_hand + 2 * 1000 * H + H


def test_no_router_bias_without_biases() -> None:
    sh = _oss(biases=False)
    assert float(transformer.router_params(sh)) == E * H
    assert float(transformer.expert_params(sh)) == 3 * H * F


@pytest.mark.parametrize("precision, kernel", [("tf32", "cudnn"), ("fp32", "fa2"), ("fp32", "fa3")])
def test_named_fused_kernel_in_a_32_bit_run_refused(cli, precision: str, kernel: str) -> None:  # type: ignore[no-untyped-def]
    """FlashAttention-2/3 and cuDNN's fused attention take fp16 / bf16 (fp8) only: a named kernel in a 32-bit run
    was priced on its 16-bit curve; now one error line naming the kernel and the precision, exit 2."""
    r = cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--precision", precision,
            "--set", f"training.attention_kernel={kernel}")
    assert r.code == 2
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.err
    assert "training.attention_kernel" in lines[0] and kernel in lines[0] and precision in lines[0]
    assert "Traceback" not in r.err


def _step(precision: str, kernel: str) -> tuple[str, float]:
    cl, wl = load_cluster("dgx-h100"), load_workload("llama3-8b", [])
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision=precision, attention_kernel=kernel)
    job = build_job(cl, wl, tr)
    return job.attention_kernel, float(evaluate(job, grid_from_strategy(StrategySpec(tp=8), tr, 8, job)).step_time[0])


def test_auto_kernel_in_a_32_bit_run_is_the_gemm_pricing() -> None:
    """attention_kernel auto on an H100 prices cuDNN's fused curve in a 16-bit run (Transformer Engine's choice),
    the GEMM pricing in a tf32 one (TE disables FlashAttention and FusedAttention for a 32-bit QKV dtype): the
    same step as attention_kernel gemm; before bias31 the tf32 run got the 16-bit cuDNN curve (a faster step)."""
    assert _step("bf16", "auto")[0] == "cudnn"
    kernel, auto = _step("tf32", "auto")
    assert kernel == "gemm"
    assert auto == _step("tf32", "gemm")[1]
