"""Transformer Engine's weight workspace (docs/model.md#weight-workspace), the two cases mem28 left out, counted by
hand: (a) a module at its own precision (training.module_precision) caches its own recipe's copy (bf16: none, mxfp8:
2.0625 B an element) whatever the run's recipe; (b) ZeRO 3 / FSDP: Megatron-FSDP and DeepSpeed ZeRO-3 cache the
gathered weight's copy and keep it (whole, not sharded), PyTorch FSDP2 caches no dense copy (TE's ``is_fsdp2``) but
GroupedLinear's experts still do."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.engine import stage_memory
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.training import ModulePrecisionSpec
from tests.test_distopt import _grid

# Llama 3 8B / Mixtral 8x7B, h 4096, 32 query heads and 8 KV heads of 128: the attention block's QKV 4096 x 6144 and
# O 4096 x 4096; Llama's MLP (gate, up, down) 3 x 4096 x 14336; Mixtral's 8 experts the same MLP each
ATTENTION = 4096 * 6144 + 4096 * 4096  # 41,943,040
MLP = 3 * 4096 * 14336  # 176,160,768
LAYERS = 32


def _weights(cluster: str, precision: str, workload: str = "llama3-8b", module_precision: Any = None,
             **strategy: Any) -> float:
    job = build_job(load_cluster(cluster, []), load_workload(workload, []),
                    TrainingSpec(precision=precision, grad_bytes_per_param=4.0, module_precision=module_precision))
    return float(np.ravel(stage_memory.memory_parts(job, _grid(job, **strategy), np.asarray([1.0]))["weights"])[0])


def _workspace(cluster: str, precision: str, workload: str = "llama3-8b", module_precision: Any = None,
               **strategy: Any) -> float:
    """The weights an fp8 / fp4 run holds beyond the same BF16 run's: its cached quantized copies."""
    return (_weights(cluster, precision, workload, module_precision, **strategy)
            - _weights(cluster, "bf16", workload, **strategy))


def test_mxfp8_attention_in_an_nvfp4_run_caches_mxfp8_copies() -> None:
    """NVFP4 run on B200, attention_proj at mxfp8: the MLP's weights cache NVFP4 copies, 2 (1/2 + 1/16) = 1.125 B,
    the attention projections MXFP8 ones, 2 (1 + 1/32) = 2.0625 B (mem28 left them out: 0)."""
    got = _workspace("dgx-b200", "fp4", module_precision=ModulePrecisionSpec(attention_proj="mxfp8"), zero="1")
    assert got == pytest.approx(LAYERS * (MLP * 1.125 + ATTENTION * 2.0625), rel=1e-12)
    assert LAYERS * (MLP * 1.125 + ATTENTION * 2.0625) == 9_110_028_288


def test_bf16_attention_caches_nothing() -> None:
    """attention_proj at bf16 runs under fp8_autocast(enabled=False): no copy; the MLP keeps the run's (FP8 delayed
    on H100: data + transpose, 2 B)."""
    got = _workspace("dgx-h100", "fp8", module_precision=ModulePrecisionSpec(attention_proj="bf16"), zero="1")
    assert got == pytest.approx(LAYERS * MLP * 2.0, rel=1e-12)


@pytest.mark.parametrize("zero", ["3", "fsdp"])
def test_zero3_and_megatron_fsdp_hold_the_whole_gathered_copy(zero: str) -> None:
    """DeepSpeed ZeRO-3 and Megatron-FSDP (zero fsdp without the FSDP1 / FSDP2 flags) hand TE the gathered weight:
    its FP8 copy (delayed, H100: 2 B) is cached and kept across steps, all 32 layers' whole (not / dp = 8)."""
    assert _workspace("dgx-h100", "fp8", zero=zero) == pytest.approx(LAYERS * (ATTENTION + MLP) * 2.0, rel=1e-12)


def test_fsdp2_caches_experts_only() -> None:
    """PyTorch FSDP2: TE's Linear / LayerNormLinear / LayerNormMLP name no cache (is_fsdp2), GroupedLinear does: Mixtral
    at ep 8 holds its one local expert per layer at 2 B an element (32 x 176,160,768 x 2 = 11,274,289,152 B) and no
    attention copy; Megatron-FSDP adds the attention's 32 x 41,943,040 x 2; FSDP1 (mem30) holds both whole too."""
    fsdp2 = _workspace("dgx-h100", "fp8", "mixtral-8x7b", zero="fsdp", fsdp_per_param=True, ep=8)
    assert fsdp2 == pytest.approx(LAYERS * MLP * 2.0, rel=1e-12) and LAYERS * MLP * 2 == 11_274_289_152
    assert _workspace("dgx-h100", "fp8", "mixtral-8x7b", zero="fsdp", ep=8) == pytest.approx(
        LAYERS * (MLP + ATTENTION) * 2.0, rel=1e-12)
    assert _workspace("dgx-h100", "fp8", zero="fsdp", fsdp_flat_param=True) == pytest.approx(
        LAYERS * (MLP + ATTENTION) * 2.0, rel=1e-12)


@pytest.mark.parametrize(("recipe", "per"), [("mxfp8", 2.0625), ("tensorwise", 1.0)])
def test_grouped_experts_cache_the_runs_recipe(recipe: str, per: float) -> None:
    """Mixtral on B200, ZeRO 1, ep 8: the experts' GroupedLinear caches the run's recipe's copy like the attention's
    Linear (mxfp8 2.0625 B; tensorwise 1 B, Blackwell's GEMMs reading the data for the column-wise usage)."""
    job_kw = dict(zero="1", ep=8)
    job = build_job(load_cluster("dgx-b200", []), load_workload("mixtral-8x7b", []),
                    TrainingSpec(precision="fp8", fp8_recipe=recipe, grad_bytes_per_param=4.0))
    fp8 = float(np.ravel(stage_memory.memory_parts(job, _grid(job, **job_kw), np.asarray([1.0]))["weights"])[0])
    assert fp8 - _weights("dgx-b200", "bf16", "mixtral-8x7b", **job_kw) == pytest.approx(
        LAYERS * (MLP + ATTENTION) * per, rel=1e-12)


def test_bf16_layers_cache_nothing() -> None:
    """training.bf16_layers 8 of Llama 3 8B's 32 in an NVFP4 run (Megatron-Core builds and runs them outside the fp4
    context): the other 24 layers hold the 1.125-byte NVFP4 copies, 24 x 218,103,808 x 1.125 B."""
    job = build_job(load_cluster("dgx-b200", []), load_workload("llama3-8b", []),
                    TrainingSpec(precision="fp4", bf16_layers=8, grad_bytes_per_param=4.0))
    fp4 = float(np.ravel(stage_memory.memory_parts(job, _grid(job, zero="1"), np.asarray([1.0]))["weights"])[0])
    assert fp4 - _weights("dgx-b200", "bf16", zero="1") == pytest.approx(24 * (ATTENTION + MLP) * 1.125, rel=1e-12)
