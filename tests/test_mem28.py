"""Transformer Engine's cached quantized weight copies (the weight workspace, docs/model.md#weight-workspace): an FP8
run whose weights are 16-bit parameters also holds, between micro-batches and steps, the FP8 copies TE's modules keep
in ``_fp8_workspaces`` (row-wise and column-wise), counted by hand from the recipe's bytes per element."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.cost import memory
from scalemodel.engine import stage_memory
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from tests.test_distopt import _grid

# Llama 3 8B's linear weights per layer by hand: QKV 4096 x (4096 + 2 x 8 x 128) + O 4096 x 4096
# + gate/up/down 3 x 4096 x 14336
LLAMA3_8B_LINEAR = 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336  # 218,103,808
LAYERS = 32


def _weights(cluster: str, precision: str = "fp8", **strategy: Any) -> float:
    job = build_job(load_cluster(cluster, []), load_workload("llama3-8b", []),
                    TrainingSpec(precision=precision, grad_bytes_per_param=4.0))
    return float(np.ravel(stage_memory.memory_parts(job, _grid(job, **strategy), np.asarray([1.0]))["weights"])[0])


def test_bytes_per_element_by_recipe() -> None:
    """Row-wise + column-wise copies: delayed / tensorwise 1 + 1 (the transpose) off Blackwell, 1 on it (the GEMM
    reads the data itself); blockwise 2 (1 + 4 / 128^2); mxfp8 2 (1 + 1/32); nvfp4 2 (1/2 + 1/16); none for 16-bit
    and torchao's row-wise recipes (no cache)."""
    assert memory.weight_workspace_bytes("delayed", True) == 2.0
    assert memory.weight_workspace_bytes("tensorwise", False) == 1.0
    assert memory.weight_workspace_bytes("blockwise", True) == 2.0 + 8.0 / 16384.0
    assert memory.weight_workspace_bytes("mxfp8", False) == 2.0625
    assert memory.weight_workspace_bytes("nvfp4", False) == 1.125
    assert memory.weight_workspace_bytes("rowwise", True) == 0.0
    assert memory.weight_workspace_bytes("", True) == 0.0


def test_llama3_8b_h100_fp8_delayed_holds_two_bytes_per_linear_weight() -> None:
    """Llama 3 8B, TP 1, ZeRO 1, H100, FP8 delayed: each layer's 218,103,808 linear weights hold a 2-byte workspace
    (436,207,616 bytes a layer), 32 layers 13,958,643,712 bytes on top of the BF16 run's weights."""
    fp8, bf16 = _weights("dgx-h100", zero="1"), _weights("dgx-h100", "bf16", zero="1")
    assert LLAMA3_8B_LINEAR * 2 == 436_207_616
    assert fp8 - bf16 == pytest.approx(LAYERS * LLAMA3_8B_LINEAR * 2.0, rel=1e-12)
    # on Blackwell the column-wise usage reads the row-wise data: 1 byte an element
    assert _weights("dgx-b200", zero="1") - _weights("dgx-b200", "bf16", zero="1") == pytest.approx(
        LAYERS * LLAMA3_8B_LINEAR * 1.0, rel=1e-12)


@pytest.mark.parametrize(("cluster", "saved"), [("dgx-h100", 3.0), ("dgx-b200", 2.0)])
def test_fp8_parameters_save_the_16_bit_weight(cluster: str, saved: float) -> None:
    """FP8 parameters (fp8_param_gather) replace the BF16 weight and its workspace (Hopper 2 + 2, Blackwell 2 + 1)
    by the FP8 parameter, 1 byte (its TE 2.x transpose on Hopper not held, docs/model.md#fp8-param-gather): 3 / 2
    bytes an element saved."""
    off = _weights(cluster, zero="1")
    on = _weights(cluster, zero="1", fp8_param_gather=True)
    assert off - on == pytest.approx(saved * LAYERS * LLAMA3_8B_LINEAR, rel=1e-12)


def test_no_workspace_outside_te_layers() -> None:
    """torchtitan's Float8Linear keeps no cached copy (layer_impl not megatron_te); ZeRO 3 / FSDP: test_mem29."""
    job = build_job(load_cluster("dgx-h100", []), load_workload("llama3-8b", []), TrainingSpec(precision="fp8"))
    ws = stage_memory.weight_workspace(job, _grid(job, zero="1", layer_impl="torchtitan"))
    assert float(np.max(ws["weight_workspace"])) == float(np.max(ws["expert_workspace"])) == 0.0
