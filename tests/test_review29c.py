"""review29c: training.bf16_layers under Transformer Engine's delayed-scaling recipe, and plan with offload_tensors.

Megatron-Core refuses BF16 first / last layers under delayed scaling: ``TransformerConfig.__post_init__`` raises
"Delayed scaling does not support first / last layer in BF16." (megatron/core/transformer/transformer_config.py
L1527-1530 at NVIDIA/Megatron-LM@d98e8a64dd; the same assert in fp8_utils.py ``get_fp8_context`` L883-888), because
the block enters one outer ``fp8_autocast`` for every layer under that recipe (transformer_block.py L619-629). Delayed
is Megatron-Core's default ``fp8_recipe``, so an fp8 run that names no recipe is that run. The model priced those
layers in BF16 (compute) and without a weight workspace (memory, mem29) although no such run exists: refused now.
"""

from __future__ import annotations

import pytest

from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec
from tests.test_hostile_inputs import accepted, refused

BASE = ["predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--precision", "fp8",
        "--set", "training.bf16_layers=2"]


@pytest.mark.parametrize("recipe", [None, "delayed"])
def test_bf16_layers_under_delayed_scaling_refused(recipe: str | None) -> None:
    with pytest.raises((InputError, ValueError), match="bf16_layers"):
        TrainingSpec(precision="fp8", bf16_layers=2, **({"fp8_recipe": recipe} if recipe else {}))


def test_bf16_layers_under_delayed_scaling_refused_on_the_cli(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *BASE, match="bf16_layers")
    assert "delayed" in line and "fp8_recipe" in line, line  # names the recipe and what is allowed
    refused(cli, *BASE, "--set", "training.fp8_recipe=delayed", match="delayed scaling")


def test_bf16_layers_from_megatron_flags_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--fp8-format with --first-last-layers-bf16 and no --fp8-recipe: Megatron-LM's default recipe is delayed."""
    f = tmp_path / "run.args"
    f.write_text("--fp8-format e4m3 --first-last-layers-bf16\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--strategy", str(f), inputs=(f,),
            match="--first-last-layers-bf16: 2 with fp8_recipe delayed")


@pytest.mark.parametrize("recipe", ["tensorwise", "blockwise"])
def test_bf16_layers_under_current_or_block_scaling_accepted(cli, recipe: str) -> None:  # type: ignore[no-untyped-def]
    """Per-layer quantization contexts (the inner context of transformer_block.py) take BF16 layers."""
    assert accepted(cli, *BASE, "--set", f"training.fp8_recipe={recipe}")["step_time_s"] > 0


def test_bf16_layers_in_an_nvfp4_run_accepted() -> None:
    """fp4 always uses the inner per-layer context (transformer_block.py L631-634): no refusal."""
    assert TrainingSpec(precision="fp4", bf16_layers=2).bf16_layers == 2


def test_plan_refuses_offload_tensors(cli) -> None:  # type: ignore[no-untyped-def]
    """The planner does not search offload_tensors; a --set of it is one error line, exit 2, not a silent drop."""
    refused(cli, "plan", "-c", "tpu-v6e-pod", "-m", "llama3-8b", "-n", "256",
            "--set", "strategy.offload_tensors=[query_proj]", match="plan cannot honour strategy.offload_tensors")
