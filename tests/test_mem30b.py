"""mem30b: the linear weights every tensor-parallel rank holds whole (MLA's down-projections, LatentMoE's projections)
are counted whole on each rank, not / t, in Transformer Engine's weight workspace and in the bytes FP8 parameters hold.

Megatron-Core builds MLA's linear_q_down_proj / linear_kv_down_proj as TELinear with ``parallel_mode='duplicated'``
(multi_latent_attention.py L524-527, L572-574) and LatentMoE's fc1_latent_proj / fc2_latent_proj alike (moe/moe_layer.py
L279-295), at NVIDIA/Megatron-LM@d98e8a64dd. docs/model.md#weight-workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalemodel.cost import transformer
from scalemodel.engine import stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

# A small MLA model: h 1024, 8 heads, q/k head 64 nope + 32 rope = 96, v head 64, r_q 256, r_kv 128, gated MLP f 2048
H, A, D, DV, RQ, RKV, ROPE, F, LAYERS = 1024, 8, 96, 64, 256, 128, 32, 2048, 4
WHOLE = H * RQ + H * (RKV + ROPE)  # q_down 262,144 + kv_down 163,840 = 425,984 on every TP rank
SPLIT = RQ * A * D + RKV * A * (D - ROPE + DV) + A * DV * H + 3 * H * F  # q_up, kv_up, o, MLP: 7,143,424 / t
EH_PROJ = 2 * H * H  # the MTP module's eh_proj, column-parallel: / t

MLA_YAML = f"""kind: transformer
name: mla-small
layers: {LAYERS}
hidden: {H}
heads: {A}
kv_heads: null
ffn_hidden: {F}
vocab: 32000
seq_len: 1024
gated_mlp: true
tied_embeddings: false
mla:
  kv_lora_rank: {RKV}
  q_lora_rank: {RQ}
  qk_nope_head_dim: {D - ROPE}
  qk_rope_head_dim: {ROPE}
  v_head_dim: {DV}
"""


def _weights(path: Path, precision: str, mtp: int, tp: int, **strategy: Any) -> float:
    job = build_job(load_cluster("dgx-h100", []), load_workload(path, [f"mtp_layers={mtp}"]),
                    TrainingSpec(precision=precision, grad_bytes_per_param=4.0))
    g = grid_from_strategy(StrategySpec(dp=8 // tp, tp=tp, zero="1", **strategy), TrainingSpec(global_batch=8 // tp,
                                                                                  precision=precision), 8, job)
    parts = stage_memory.memory_parts(job, g, np.asarray([1.0]))
    return float(np.ravel(parts["weights"])[0])


@pytest.fixture
def mla(tmp_path: Path) -> Path:
    path = tmp_path / "mla-small.yaml"
    path.write_text(MLA_YAML)
    return path


def test_counts_by_hand() -> None:
    assert (WHOLE, SPLIT) == (425_984, 7_143_424)


@pytest.mark.parametrize(("tp", "by_hand"), [(2, 31_981_568), (4, 17_694_720)])
def test_workspace_holds_the_down_projections_whole(mla: Path, tp: int, by_hand: int) -> None:
    """FP8 delayed on H100 (2 B an element: E4M3 data and its transpose), 4 layers: 4 x 2 x (7,143,424 / t +
    425,984) B: t 2 31,981,568, t 4 17,694,720 (before: 4 x 2 x 7,569,408 / t, 30,277,632 and 15,138,816)."""
    assert LAYERS * 2 * (SPLIT / tp + WHOLE) == by_hand
    got = _weights(mla, "fp8", 0, tp) - _weights(mla, "bf16", 0, tp)
    assert got == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4])
def test_mtp_module_workspace_holds_them_whole(mla: Path, tp: int) -> None:
    """One MTP module (an MLA + dense MLP layer and eh_proj 2h x h): its copy is (7,143,424 + 2,097,152) / t +
    425,984 elements at 2 B, on top of the 4 layers'."""
    got = _weights(mla, "fp8", 1, tp) - _weights(mla, "bf16", 1, tp)
    by_hand = 2.0 * (LAYERS * (SPLIT / tp + WHOLE) + (SPLIT + EH_PROJ) / tp + WHOLE)
    assert got == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4])
def test_fp8_parameters_hold_the_down_projections_whole(mla: Path, tp: int) -> None:
    """fp8_param_gather (ZeRO 1, delayed, H100): each linear weight on a rank is 1 B instead of 2 (no workspace), so
    the weights are the BF16 run's less 1 B x 4 x (7,143,424 / t + 425,984) (before: 4 x 7,569,408 / t)."""
    got = _weights(mla, "bf16", 0, tp) - _weights(mla, "fp8", 0, tp, fp8_param_gather=True)
    assert got == pytest.approx(LAYERS * (SPLIT / tp + WHOLE), rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_latent_moe_projections_whole(tp: int) -> None:
    """Nemotron 3 Super (LatentMoE): a MoE layer's fc1 / fc2_latent_proj, 2 h l, whole on each rank; the rest / t."""
    sh = build_job(load_cluster("dgx-b200", []), load_workload("nemotron-3-super", []), TrainingSpec()).shape
    whole = float(np.ravel(transformer.linear_weights_whole_per_layer(sh))[0])
    lat = 2.0 * float(sh.hidden) * float(sh.moe_latent) * float(sh.moe_layers) / float(sh.layers)
    assert lat > 0 and whole == pytest.approx(lat, rel=1e-12)  # no MLA in Super: the latent projections only
    full = float(np.ravel(transformer.linear_weights_per_layer(sh))[0])
    on_rank = float(np.ravel(transformer.linear_weights_per_layer(sh, tp))[0])
    assert on_rank == pytest.approx((full - lat) / tp + lat, rel=1e-12)
