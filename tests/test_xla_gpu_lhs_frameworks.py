"""xla_gpu_lhs names a program compiled by XLA (JAX/MaxText): it is refused beside the switches that name PyTorch
FSDP's own gradient passes (fsdp_per_param: FSDP2's copy-out / copy-in; fsdp_flat_param: FSDP1's FlatParameter
passes and its root unit) and beside a gradient-compression hook, which XLA's all-reduces never pass through
(XLA's combine threshold counts the bytes of the all-reduce it builds, so a hook's wire dtype would also change
the groups docs/model.md#xla-gpu-lhs prices). Before review21b all three were priced at once, one framework's
terms added to the other's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scalemodel.errors import InputError  # a spec built in Python refuses as the API does (review25d)
from scalemodel.specs import StrategySpec


@pytest.mark.parametrize("other", [{"fsdp_per_param": True}, {"fsdp_flat_param": True},
                                   {"compression": "fp16"}, {"compression": "int8"}])
def test_xla_gpu_lhs_is_refused_beside_pytorch_fsdp_and_compression(other: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="xla_gpu_lhs"):
        StrategySpec(zero="hsdp", xla_gpu_lhs=True, **other)
    StrategySpec(zero="hsdp", **other)  # each alone stays accepted
    StrategySpec(zero="hsdp", xla_gpu_lhs=True, compression="none")


@pytest.mark.parametrize("args", [("--set", "strategy.fsdp_per_param=true"), ("--compression", "fp16")])
def test_cli_says_it_in_one_line(cli: Any, args: tuple[str, str]) -> None:
    out = cli("predict", "-c", "gcp-a3-high", "-m", "llama2-7b", "-n", "16", "--zero", "hsdp",
              "--set", "strategy.xla_gpu_lhs=true", *args)
    assert out.code == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "xla_gpu_lhs" in lines[0], out.err
    assert "Traceback" not in out.err


def test_plan_with_xla_gpu_lhs_pinned_searches_no_compression(cli: Any) -> None:
    """--allow compression opens fp16 / int8 / top-k, but a pinned xla_gpu_lhs leaves them out, as predict refuses
    them beside it (before review21b the winner here was HSDP with int8 gradients under XLA's windows)."""
    out = cli("plan", "-c", "gcp-a3-high", "-m", "llama2-7b", "-n", "16", "--set", "strategy.zero=hsdp",
              "--set", "strategy.xla_gpu_lhs=true", "--allow", "compression", "-k", "5", "--json")
    assert out.code == 0, out.err
    ranked = json.loads(out.out)["ranked"]
    assert ranked
    assert {r["strategy"]["compression"] for r in ranked} == {"none"}
    assert all(r["strategy"]["xla_gpu_lhs"] for r in ranked)
