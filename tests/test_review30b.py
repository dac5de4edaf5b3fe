"""review30b: the per-TP-rank counts of mem30b / mtp30 / mem30c, one story at tp 1, 2, 4 on the shipped models with
MLA (deepseek-v3: MTP too), LatentMoE (nemotron-3-super: a hybrid, MTP too) and neither (llama3-8b).

Every path is checked against one hand-derived count per TP rank, n(t) = (n(1) - W) / t + W, with W the elements
every TP rank holds whole, written here from the shape's fields (Megatron-Core builds MLA's linear_q_down_proj h x r_q
and linear_kv_down_proj h x (r_kv + d_rope), and LatentMoE's fc1_latent_proj / fc2_latent_proj, 2 h l, as TELinear
``parallel_mode='duplicated'``: multi_latent_attention.py L524-527, L572-574, moe/moe_layer.py L279-295 at
NVIDIA/Megatron-LM@d98e8a64dd), and n(1) the tp 1 count, the one before mem30b (tp 1 reproduces it).

The bug this file guards (test_zero3_gathered_unit_holds_its_own_whole_linears): mem30c's ZeRO-3 / FSDP gathered
copies Psi_g = 2 (layer / t + w_l (1 - 1/t)) took w_l averaged over all the layers while ``layer`` is the largest
unit's own count (attention + norms + max(mlp, E/ep expert + latent)); in a hybrid LatentMoE model (nemotron-3-super:
40 of 88 layers MoE) the gathered MoE unit's 2 h l was held at 2 h l (1/t + 40/88 (1 - 1/t)), not whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import memory, transformer
from scalemodel.engine import layer_compute, stage_memory
from scalemodel.engine.dp_comm import fp8_param_linear_per_layer
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from tests.test_mtp30 import _job

MODELS = ("deepseek-v3", "nemotron-3-super", "llama3-8b")
TPS = (1, 2, 4)
ROOT = Path(__file__).resolve().parents[1]


def _shape(name: str):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("dgx-h100", []), load_workload(ROOT / "examples" / "workloads" / f"{name}.yaml", []),
                    TrainingSpec())
    return job, job.shape


def _f(x: object) -> float:
    return float(np.ravel(np.asarray(x, dtype=float))[0])


def _mla_down(sh) -> float:  # type: ignore[no-untyped-def]
    """q_down h r_q (with a q LoRA rank) + kv_down h (r_kv + d_rope), per attention layer; 0 without MLA."""
    h = _f(sh.hidden)
    if not bool(np.ravel(sh.mla)[0]):
        return 0.0
    return h * _f(sh.q_lora_rank) + h * (_f(sh.kv_lora_rank) + _f(sh.qk_rope_head_dim))


def _latent(sh) -> float:  # type: ignore[no-untyped-def]
    return 2.0 * _f(sh.hidden) * _f(sh.moe_latent)


def _per_rank(n1: float, whole: float, t: int) -> float:
    return (n1 - whole) / t + whole


def test_hand_whole_counts_of_the_shipped_models() -> None:
    """The hand counts themselves: DeepSeek-V3 7168 x 1536 + 7168 x (512 + 64) = 15,138,816 per attention layer;
    Nemotron 3 Super 2 x 4096 x 1024 = 8,388,608 per MoE layer; Llama 3 8B none."""
    assert _mla_down(_shape("deepseek-v3")[1]) == 15_138_816
    assert _latent(_shape("nemotron-3-super")[1]) == 8_388_608
    sh = _shape("llama3-8b")[1]
    assert _mla_down(sh) == 0 and _latent(sh) == 0


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp", TPS)
def test_linear_weights_per_rank(name: str, tp: int) -> None:
    """linear_weights_per_layer (the workspace's, FP8 parameters', FP8 gather's count) and mtp_linear_weights."""
    _job, sh = _shape(name)
    L = _f(sh.layers)
    w = (_f(sh.attention_layers) * _mla_down(sh) + _f(sh.moe_layers) * _latent(sh)) / L  # the layers' mean
    n1 = _f(transformer.linear_weights_per_layer(sh))
    assert _f(transformer.linear_weights_per_layer(sh, tp)) == pytest.approx(_per_rank(n1, w, tp), rel=1e-12)
    w_mtp = _mla_down(sh) + (_latent(sh) if bool(np.ravel(sh.last_layer_moe)[0]) else 0.0)
    m1 = _f(sum(transformer.mtp_linear_weights(sh)))  # (block, eh_proj)
    assert _f(sum(transformer.mtp_linear_weights(sh, tp))) == pytest.approx(_per_rank(m1, w_mtp, tp), rel=1e-12)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp", TPS)
def test_fp8_parameter_count_per_rank(name: str, tp: int) -> None:
    """fp8_param_linear_per_layer (FP8 parameter bytes, their quantize, the workspace's n_run) with no module at its
    own precision is linear_weights_per_layer's per-rank count; with attention_proj and moe_latent BF16 it drops the
    split attention / tp and the whole ones whole."""
    job, sh = _shape(name)
    L = _f(sh.layers)
    w = (_f(sh.attention_layers) * _mla_down(sh) + _f(sh.moe_layers) * _latent(sh)) / L
    n1 = _f(transformer.linear_weights_per_layer(sh))
    assert _f(fp8_param_linear_per_layer(job, tp)) == pytest.approx(_per_rank(n1, w, tp), rel=1e-12)


def _gathered(sh, tp: int) -> float:  # type: ignore[no-untyped-def]
    """Elements of the ZeRO-3 gathered copies: w(dp 2) - shard / 2 with shard / 2 = w(1) - w(2) (test_mem30c's)."""
    w = [_f(memory.memory_per_gpu(sh, micro_batch=1, seq_len=1024, dp=d, tp=tp, zero_stage=3,
                                  weight_bytes=2.0).weights) for d in (1, 2)]
    return (2.0 * w[1] - w[0]) / 2.0


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp", TPS)
def test_zero3_gathered_unit_holds_its_own_whole_linears(name: str, tp: int) -> None:
    """Psi_g, two units on one TP rank: 2 ((unit - W_u) / t + W_u), W_u the largest unit's own whole linears: MLA's
    down-projections of its attention, whole (the attention is in every unit's count), and LatentMoE's 2 h l where
    the MoE branch is the larger (it is in all three models with experts: E/ep expert >> mlp). Before the fix the
    hybrid nemotron-3-super held 2 h l (1/t + 40/88 (1 - 1/t)) of it (t 2: 7,000,000-odd elements short)."""
    _job, sh = _shape(name)
    moe_wins = _f(sh.moe_layers) > 0 and _f(sh.moe_experts * transformer.expert_params(sh)) > _f(
        transformer.mlp_params(sh))
    # mem31: the unit's norms (norms_per_layer x h gains, none of these models has biases), MLA's latent norms
    # (r_q + r_kv) and an MoE unit's router (E x h) are whole on every TP rank too
    mla = bool(np.ravel(sh.mla)[0])
    norms = _f(sh.norms_per_layer) * _f(sh.hidden) + (_f(sh.q_lora_rank) + _f(sh.kv_lora_rank) if mla else 0.0)
    assert not bool(np.ravel(sh.biases)[0])
    whole = _mla_down(sh) + norms + (_latent(sh) + _f(sh.moe_experts) * _f(sh.hidden) if moe_wins else 0.0)
    g1 = _gathered(sh, 1)
    assert _gathered(sh, tp) == pytest.approx(2.0 * _per_rank(g1 / 2.0, whole, tp), rel=1e-12)


def _ws(name: str, tp: int) -> dict[str, float]:
    job, g = _job("dgx-h100", "fp8", name, gpus=tp, fp8_recipe="tensorwise", strategy={"tp": tp, "zero": "1"})
    return {k: _f(v) for k, v in stage_memory.weight_workspace(job, g).items()}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp", (2, 4))
def test_weight_workspace_per_rank(name: str, tp: int) -> None:
    """TE's cached FP8 copies (tensorwise on H100, 16-bit parameters: w bytes an element, the same for the layers and
    the MTP block's layer and eh_proj), per layer and per MTP module: ws(t) = (ws(1) - w W) / t + w W, w = ws(1) /
    n(1), W the hand whole count (the layers' mean; the MTP module's own)."""
    _job1, sh = _shape(name)
    one, at_t = _ws(name, 1), _ws(name, tp)
    L = _f(sh.layers)
    w = one["weight_workspace"] / _f(transformer.linear_weights_per_layer(sh))
    assert w > 0
    whole = w * (_f(sh.attention_layers) * _mla_down(sh) + _f(sh.moe_layers) * _latent(sh)) / L
    assert at_t["weight_workspace"] == pytest.approx((one["weight_workspace"] - whole) / tp + whole, rel=1e-12)
    if _f(sh.mtp_layers) > 0:
        whole_m = w * (_mla_down(sh) + (_latent(sh) if bool(np.ravel(sh.last_layer_moe)[0]) else 0.0))
        assert at_t["mtp_workspace"] == pytest.approx((one["mtp_workspace"] - whole_m) / tp + whole_m, rel=1e-12)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("tp", TPS)
def test_fp8_gather_wire_per_rank(name: str, tp: int) -> None:
    """The FP8 FSDP gather's wire (Megatron-FSDP fp8_param_gather): 2 B a dense parameter less 1 B a linear element
    on this TP rank, layers x ((n(1) - W) / t + W), W the hand whole count (the layers' mean)."""
    job, g = _job("dgx-h100", "fp8", name, gpus=8 * tp, fp8_recipe="tensorwise",
                  strategy={"tp": tp, "zero": "fsdp", "fp8_param_gather": True})
    sh = job.shape
    L = _f(sh.layers)
    whole = (_f(sh.attention_layers) * _mla_down(sh) + _f(sh.moe_layers) * _latent(sh)) / L
    n1 = _f(transformer.linear_weights_per_layer(sh))
    dense, layers = np.asarray([4.0e11]), np.asarray([L])
    got = _f(layer_compute._gathered_bytes(job, g, dense, layers))
    assert got == pytest.approx(2 * 4.0e11 - L * _per_rank(n1, whole, tp), rel=1e-12)
