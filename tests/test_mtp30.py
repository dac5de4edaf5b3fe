"""mtp30: three precision leftovers of mem30 / mem30b, each value worked by hand or against the documented path.

(1) Megatron-Core runs an fp4 run's MTP block outside any fp4 context ("TODO: currently ignoring FP4 in MTP layers",
    multi_token_prediction.py L1394 at NVIDIA/Megatron-LM@d98e8a64dd): eh_proj in BF16 always, a GPT-path layer in
    BF16, a hybrid's MTP HybridStack at the run's NVFP4 (its own per-layer fp4 context). One decision
    (layer_compute.mtp_recipe) for compute and memory;
(2) torchao's row-wise float8 keeps layers in BF16 through convert_to_float8_training's module_filter_fn (torchtitan
    filter_fqns): training.bf16_layers is accepted and priced as with tensorwise;
(3) the FP8 FSDP gather (engine _gathered_bytes, memory's fp8_gather) counts the linears every TP rank holds whole
    (MLA's down-projections) whole.
docs/model.md#module-precision, #weight-workspace, #fp8-rowwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.commands.common import build_specs
from scalemodel.cost import memory
from scalemodel.cost import transformer as tr
from scalemodel.cost.compute import gemm_efficiency
from scalemodel.engine import layer_compute, stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TrainingSpec
from tests.test_hostile_inputs import accepted
from tests.test_mem30 import ATTENTION, LAYERS, MLP, _workspace


def _job(cluster: str, precision: str, model: str, sets: tuple[str, ...] = (), strategy: dict[str, Any] | None = None,
         gpus: int = 1, **training: Any) -> tuple[Any, Any]:
    tr_in: dict[str, Any] = {"precision": precision, "global_batch": gpus, "micro_batch": 1, **training}
    cl, wl, trs, stg = build_specs(cluster=cluster, model=model, sets=list(sets), training=tr_in,
                                   strategy=strategy or {})
    job = build_job(cl, wl, trs, straggler_cv=0.0)
    return job, grid_from_strategy(stg, trs, gpus, job)


def _compute(job: Any, g: Any, logits: bool = True) -> dict[str, float]:
    out = layer_compute._compute_per_microbatch(job, g, np.array([4.0]), logits)
    return {k: float(np.ravel(v)[0]) for k, v in out.items()}


# --- (1) the MTP block of an fp4 run ---------------------------------------------------------------------------------

def test_gpt_path_mtp_block_of_an_fp4_run_is_bf16_by_default() -> None:
    """gpt-7.5b with one MTP module on a B200, NVFP4, mtp not named: every piece of the stage holding the block equals
    the same run with module_precision mtp: bf16 (the path test_module_precision checks by hand), and costs more than
    the block at NVFP4 did (before: priced at the run's NVFP4, the stage faster)."""
    sets = ("model.mtp_layers=1",)
    j4, g4 = _job("dgx-b200", "fp4", "gpt-7.5b", sets)
    jb, gb = _job("dgx-b200", "fp4", "gpt-7.5b", sets, module_precision={"mtp": "bf16"})
    assert _compute(j4, g4) == _compute(jb, gb)
    assert (layer_compute.mtp_recipe(j4, "block"), layer_compute.mtp_recipe(j4, "eh_proj")) == ("", "")
    # an fp8 run's block stays at its recipe (Megatron-Core enters get_fp8_context when config.fp8)
    j8, _ = _job("dgx-b200", "fp8", "gpt-7.5b", sets, fp8_recipe="mxfp8")
    assert (layer_compute.mtp_recipe(j8, "block"), layer_compute.mtp_recipe(j8, "eh_proj")) == (None, None)


def test_hybrid_mtp_keeps_its_layer_at_nvfp4_and_eh_proj_in_bf16_by_hand() -> None:
    """nemotron-3-super (h 4096, MTP pattern *E, 2 passes of one shared module), NVFP4 on GB200, tp 1, b 1, s 8192:
    the MTP HybridStack takes its own per-layer fp4 context, eh_proj none. The MTP modules' weight-GEMM seconds
    beyond the layers' (wgrad - the blocks' GEMMs) are D x eh_proj's forward GEMM, T x h x 2h on BF16's peak and
    curve: 2 x 2 T h 2h / (peak_bf16 x eff_bf16(T, h, 2h)) (before: at NVFP4's, 2-4 x less)."""
    j, g = _job("gb200-nvl72", "fp4", "nemotron-3-super")
    last, mid = _compute(j, g), _compute(j, g, False)
    T, h = 8192.0, 4096.0
    assert j.seq_len == 8192
    eff = float(gemm_efficiency(T, h, 2 * h, j.attention_gemm_max, j.attention_gemm_half_dim))
    by_hand = 2 * (2 * T * h * 2 * h) / (j.attention_peak_flops * eff)
    assert by_hand > (T * h + 2 * h * h + T * 2 * h) * 2.0 / (j.memory_bandwidth * 0.85)  # compute-bound
    assert last["wgrad"] - mid["wgrad"] - last["mtp_gemm"] == pytest.approx(by_hand, rel=1e-9)
    # the block's own GEMMs are the run's: on the fp4 curve's d0
    assert last["mtp_gemm_half_dim"] == j.gemm_half_dim
    assert (layer_compute.mtp_recipe(j, "block"), layer_compute.mtp_recipe(j, "eh_proj")) == (None, "")


def _ws(cluster: str, precision: str, model: str, **training: Any) -> dict[str, float]:
    job, g = _job(cluster, precision, model, strategy={"zero": "1"}, **training)
    return {k: float(np.ravel(v)[0]) for k, v in stage_memory.weight_workspace(job, g).items()}


def test_gpt_path_fp4_mtp_module_caches_nothing() -> None:
    """Llama 3 8B with one MTP module, NVFP4 on B200, tp 1: the decoder's 32 layers cache their NVFP4 copies,
    1.125 B an element (2 (1/2 + 1/16)), the BF16 MTP module nothing: 32 x 218,103,808 x 1.125 = 7,851,737,088 B
    (before: + 251,658,240 x 1.125 = 283,115,520 B for the module)."""
    by_hand = LAYERS * (ATTENTION + MLP) * 1.125
    assert by_hand == 7_851_737_088
    assert _workspace("dgx-b200", "fp4", zero="1") == pytest.approx(by_hand, rel=1e-12)


def test_hybrid_fp4_mtp_module_caches_its_layer_not_eh_proj() -> None:
    """nemotron-3-super's MTP module, NVFP4 on GB200, tp 1: its attention (QKV 4096 x (32 + 2 x 2) x 128, O 4096 x
    4096) and MoE linears (2 ungated shared experts 2 x 2 x 4096 x 2688, LatentMoE 2 x 4096 x 1024) at 1.125 B, its
    eh_proj (2 x 4096 x 4096) in BF16, none: (18,874,368 + 16,777,216 + 44,040,192 + 8,388,608) x 1.125 =
    99,090,432 B (before: + 33,554,432 x 1.125 for eh_proj); with mtp: bf16 named, none at all."""
    block = 4096 * 4608 + 4096 * 4096 + 2 * 2 * 4096 * 2688 + 2 * 4096 * 1024
    assert block * 1.125 == 99_090_432
    assert _ws("gb200-nvl72", "fp4", "nemotron-3-super")["mtp_workspace"] == pytest.approx(block * 1.125, rel=1e-12)
    assert _ws("gb200-nvl72", "fp4", "nemotron-3-super", module_precision={"mtp": "bf16"})["mtp_workspace"] == 0.0


# --- (2) bf16_layers under torchao's row-wise recipes ---------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["rowwise", "rowwise_with_gw_hp"])
def test_bf16_layers_accepted_with_torchao_rowwise(cli, recipe: str) -> None:  # type: ignore[no-untyped-def]
    """torchtitan's filter_fqns reaches convert_to_float8_training's module_filter_fn under every recipe: a layer's
    linears named there stay nn.Linear (BF16). Accepted on the CLI (before: exit 2, "no layers kept in BF16")."""
    TrainingSpec(precision="fp8", fp8_recipe=recipe, bf16_layers=2)
    accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--set", "training.precision=fp8",
             "--set", f"training.fp8_recipe={recipe}", "--set", "training.bf16_layers=2", "--set",
             "strategy.layer_impl=torchtitan")


@pytest.mark.parametrize("recipe", ["rowwise", "rowwise_with_gw_hp"])
def test_rowwise_bf16_layers_mix_like_tensorwise(recipe: str) -> None:
    """Llama 3 8B on one H100, 2 of 32 layers in BF16: every compute piece of the stage is 30/32 x the all-row-wise
    one + 2/32 x the same stage with BF16 layers (the all-BF16 run's layers: no recipe, no casts), as tensorwise's."""
    lo, g = _job("dgx-h100", "fp8", "llama3-8b", fp8_recipe=recipe)
    mix, gm = _job("dgx-h100", "fp8", "llama3-8b", fp8_recipe=recipe, bf16_layers=2)
    hi, gh = _job("dgx-h100", "bf16", "llama3-8b")
    assert mix.bf16_layer_share == 2 / 32
    a, b, c = _compute(lo, g), _compute(mix, gm), _compute(hi, gh)
    for k in ("forward", "backward", "wgrad", "attention_core"):
        assert b[k] == pytest.approx(30 / 32 * a[k] + 2 / 32 * c[k], rel=1e-9), k
    assert a["total"] < b["total"] < c["total"]


# --- (3) the FP8 FSDP gather of whole-on-every-rank linears ---------------------------------------------------------

# DeepSeek-V3's MLA down-projections, whole on every TP rank: q_down 7168 x 1536, kv_down 7168 x (512 + 64)
MLA_WHOLE = 7168 * 1536 + 7168 * (512 + 64)  # 15,138,816 a layer


def _dsv3_fsdp_fp8(tp: int) -> tuple[Any, Any]:
    return _job("dgx-h100", "fp8", "deepseek-v3", gpus=8 * tp, fp8_recipe="tensorwise",
                strategy={"tp": tp, "zero": "fsdp", "fp8_param_gather": True, "ep": 8})


def test_fp8_fsdp_gather_counts_mla_down_projections_whole() -> None:
    """Megatron-FSDP with fp8_param_gather, DeepSeek-V3, tp 2: the wire carries 2 B a dense parameter less 1 B a
    linear weight element on this TP rank: the TP-split ones / 2, MLA's q_down and kv_down (15,138,816 a layer) whole.
    So 2 x dense - layers x (linear_1 / 2 + 15,138,816 / 2) (before: - layers x linear_1 / 2, the down-projections
    halved: 7,569,408 B a layer more on the wire)."""
    job, g = _dsv3_fsdp_fp8(2)
    assert MLA_WHOLE == 15_138_816
    assert float(tr.linear_weights_whole_per_layer(job.shape)) == MLA_WHOLE
    lin1 = float(tr.linear_weights_per_layer(job.shape))
    dense, layers = np.asarray([4.0e10]), np.asarray([61.0])
    got = float(np.ravel(layer_compute._gathered_bytes(job, g, dense, layers))[0])
    assert got == pytest.approx(2 * 4.0e10 - 61 * (lin1 / 2 + MLA_WHOLE / 2), rel=1e-12)


def test_fp8_fsdp_gather_held_copy_counts_mla_down_projections_whole() -> None:
    """The held gathered copies (memory_per_gpu fp8_gather, ZeRO-3, 2 B weights, two units gathered at once): 1 B of
    each linear element on this TP rank is saved, 2 x linear_2 B in all, linear_2 = linear_1 / 2 + 15,138,816 / 2 at
    tp 2 (before: 2 x linear_1 / 2, the down-projections halved: 15,138,816 B less saved)."""
    job, _ = _dsv3_fsdp_fp8(2)
    kw: dict[str, Any] = dict(micro_batch=1, seq_len=4096, dp=8, tp=2, ep=8, zero_stage=3, weight_bytes=2.0)
    held = [float(np.ravel(memory.memory_per_gpu(job.shape, fp8_gather=on, **kw).weights)[0]) for on in (True, False)]
    lin2 = float(tr.linear_weights_per_layer(job.shape)) / 2 + MLA_WHOLE / 2
    assert held[1] - held[0] == pytest.approx(2 * lin2 * 1.0, rel=1e-9)
