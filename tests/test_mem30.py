"""mem30: the memory model's leftovers from mem29 / offload29, each value worked by hand.

(1) MaxText's offloaded named tensors are priced at the job's activation element (``elem_bytes``) (a 32-bit run with
    ``offload_tensors``, refused here while the memory model counted 16 bits, is accepted since mem31b:
    tests/test_mem31b.py);
(2) the MTP modules' linears hold Transformer Engine's weight workspace at the block's recipe (module_precision mtp,
    else the run's), their routed experts too;
(3) PyTorch FSDP1 holds the workspace whole, as ZeRO-3 / Megatron-FSDP (TE's FSDP1 scatter needs a TE module that is
    itself an FSDP unit);
(4) training.bf16_layers with torchao's row-wise float8 was refused here; mtp30 lifted it (torchtitan's filter_fqns
    keeps a layer's linears in BF16 under every recipe: tests/test_mtp30.py);
(6) the validator routes a case on EFA with A100 40GB (fsdpaws22, p4d.24xlarge) to the catalog's aws-p4d.
docs/model.md#weight-workspace and #offload.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module
from msgspec.structs import replace

from scalemodel.engine import dp_comm, stage_memory
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.training import OFFLOAD_TENSORS, ModulePrecisionSpec
from tests.test_distopt import _grid
from tests.test_offload29 import ALL, _job_grid

# Llama 3 8B / Mixtral 8x7B: h 4096, 32 query and 8 KV heads of 128: QKV 4096 x 6144 + O 4096 x 4096; the MLP (gate,
# up, down) 3 x 4096 x 14336 (Mixtral: each expert); an MTP module's eh_proj 2h x h
ATTENTION = 4096 * 6144 + 4096 * 4096  # 41,943,040
MLP = 3 * 4096 * 14336  # 176,160,768
EH_PROJ = 2 * 4096 * 4096  # 33,554,432
LAYERS = 32


def _weights(cluster: str, precision: str, workload: str = "llama3-8b", mtp: int = 1, recipe: str | None = None,
             module_precision: Any = None, **strategy: Any) -> float:
    job = build_job(load_cluster(cluster, []), load_workload(workload, [f"mtp_layers={mtp}"]),
                    TrainingSpec(precision=precision, fp8_recipe=recipe, grad_bytes_per_param=4.0,
                                 module_precision=module_precision))
    return float(np.ravel(stage_memory.memory_parts(job, _grid(job, **strategy), np.asarray([1.0]))["weights"])[0])


def _workspace(cluster: str, precision: str, workload: str = "llama3-8b", **kw: Any) -> float:
    """The weights an fp8 / fp4 run holds beyond the same BF16 run's: its cached quantized copies."""
    strategy = {k: v for k, v in kw.items() if k not in ("recipe", "module_precision")}
    return _weights(cluster, precision, workload, **kw) - _weights(cluster, "bf16", workload, **strategy)


def test_offloaded_tensors_follow_the_activation_element() -> None:
    """The five named tensors of the mttier25 8B row are 939,524,096 bytes a layer at 2 B an element; at a 4-byte
    element the link carries twice that (before: 2 B whatever the job)."""
    job, g = _job_grid(OFFLOAD_TENSORS)
    assert float(dp_comm.offloaded_tensor_bytes(replace(job, elem_bytes=4.0), g)[0]) == pytest.approx(2 * ALL,
                                                                                                     rel=1e-12)
    assert float(dp_comm.offloaded_tensor_bytes(job, g)[0]) == pytest.approx(ALL, rel=1e-12)


def test_mtp_module_caches_the_runs_copy() -> None:
    """Llama 3 8B with one MTP module, FP8 delayed on H100 (2 B an element), tp 1, one stage: 32 layers' linears plus
    the module's layer and eh_proj, 32 x 218,103,808 x 2 + 251,658,240 x 2 = 14,461,960,192 B (before: the module
    none, 13,958,643,712 B)."""
    by_hand = (LAYERS * (ATTENTION + MLP) + ATTENTION + MLP + EH_PROJ) * 2.0
    assert by_hand == 14_461_960_192
    assert _workspace("dgx-h100", "fp8", zero="1") == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("mtp", "per"), [("bf16", 0.0), ("mxfp8", 2.0625)])
def test_mtp_block_at_its_module_precision(mtp: str, per: float) -> None:
    """B200, fp8 tensorwise (1 B an element on Blackwell): the decoder's 32 layers at 1 B, the MTP block at its own
    recipe: bf16 none, mxfp8 2 (1 + 1/32) B an element of its 251,658,240 linear weights."""
    got = _workspace("dgx-b200", "fp8", recipe="tensorwise", module_precision=ModulePrecisionSpec(mtp=mtp), zero="1")
    assert got == pytest.approx(LAYERS * (ATTENTION + MLP) * 1.0 + (ATTENTION + MLP + EH_PROJ) * per, rel=1e-12)


@pytest.mark.parametrize(("mtp", "per"), [(None, 2.0), ("bf16", 0.0)])
def test_mtp_routed_experts_at_the_blocks_recipe(mtp: str | None, per: float) -> None:
    """Mixtral 8x7B with one MTP module (an MoE layer: no shared expert), FP8 delayed on H100, ep 8: one local expert
    a layer. The decoder holds 32 x (attention + one expert) x 2 B; the MTP module its attention, eh_proj and local
    expert at the block's recipe: the run's 2 B, or none at mtp bf16 (before: its expert at the run's 2 B anyway)."""
    mp = None if mtp is None else ModulePrecisionSpec(mtp=mtp)
    got = _workspace("dgx-h100", "fp8", "mixtral-8x7b", module_precision=mp, zero="1", ep=8)
    assert got == pytest.approx(LAYERS * (ATTENTION + MLP) * 2.0 + (ATTENTION + EH_PROJ + MLP) * per, rel=1e-12)


def test_fsdp1_holds_the_whole_copy() -> None:
    """FSDP1 wraps per layer (a TransformerLayer unit): TE's prepare_te_modules_for_fsdp gives an fsdp_group only to a
    TE module that is an FSDP unit itself, so the linears inside cache the gathered weight's copy whole and keep it,
    as under ZeRO-3: 32 x 218,103,808 x 2 B (+ the MTP module's 251,658,240 x 2) on H100, FP8 delayed, dp 8 (before:
    0)."""
    got = _workspace("dgx-h100", "fp8", zero="fsdp", fsdp_flat_param=True)
    assert got == pytest.approx((LAYERS * (ATTENTION + MLP) + ATTENTION + MLP + EH_PROJ) * 2.0, rel=1e-12)


def test_efa_a100_40gb_routes_to_aws_p4d() -> None:
    """fsdpaws22 names 64 p4d.24xlarge and their EFA adapters: aws-p4d (4 x 100 Gb/s EFA, A100 40GB), not the
    accelerator rule's dgx-a100-40g (before: None, no A100 fabric route); the nanotron25 rows stay on aws-p5, the one
    compared A100 40GB row (RoCE) on the accelerator rule (None here)."""
    vt = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}
    assert vt.fabric_cluster(cases["fsdpaws22_a100_40g_gpt1t_fsdp512"]) == "aws-p4d"
    assert vt.fabric_cluster(cases["nanotron25_h100_8b_n8"]) == "aws-p5"
    assert vt.fabric_cluster(cases["mpt_a100_40g_70b_128"]) is None
