"""Activation offload on a hybrid Mamba model is infeasible, and the host-link bound reads the memory model (off33).

Megatron-Core opens the offload context in TransformerBlock (transformer_block.py L304-312 at
NVIDIA/Megatron-LM@d98e8a64dd); a hybrid model's MambaStack (HybridStack, models/hybrid/hybrid_block.py, same
commit) opens none, so ``cpu_offloading_num_layers`` moves nothing there (docs/model.md#offload). Hypothesis found
the case in tests/test_physics30.py's host-link bound: Nemotron 3 Nano on one H100, one layer offloaded, no flash
attention, the link 100x slower, priced 1.2328 s a step against a bound of 1.3370 s that charged every non-MoE layer
attention's s^2 scores (22 of its 29 are Mamba layers).
"""

from __future__ import annotations

import msgspec
import pytest

from scalemodel.engine.step import Infeasible
from tests.test_physics_wide import _eval, _wide_job

#: hypothesis's falsifying example (tests/test_physics30.py, CI of 7c2ec941), its other fields at the grid's defaults
NANO = dict(gpus=1, dp=1, tp=1, pp=1, cp=1, micro_batch=1, global_batch=1, offload_layers=1, offload_tensors=0,
            recompute=0, flash_attention=False, sequence_parallel=False)


def test_layer_offload_on_a_hybrid_model_is_infeasible() -> None:
    job = _wide_job("dgx-h100", "nemotron-3-nano", "bf16", None, 2048)
    res = _eval(job, NANO)
    assert not bool(res.feasible[0])
    assert int(res.reason[0]) == int(Infeasible.OFFLOAD_INVALID), res.reason
    # the same run without offload is refused for its memory only (31.6B parameters on one GPU), not its offload
    assert int(_eval(job, dict(NANO, offload_layers=0)).reason[0]) == int(Infeasible.OUT_OF_MEMORY)


def test_predict_names_the_reason(cli) -> None:  # type: ignore[no-untyped-def]
    got = cli("predict", "-m", "nemotron-3-nano", "-n", "8", "--set", "strategy.offload_layers=2", "--json")
    assert got.code == 0, got.err
    out = msgspec.json.decode(got.out)
    assert not out["feasible"] and "MambaStack" in str(out["infeasible_detail"]) + str(out["infeasible_reason"]), out


@pytest.mark.parametrize("precision, recipe", [("bf16", None), ("fp8", "tensorwise"), ("fp8", "mxfp8")])
def test_a_transformer_copies_what_its_memory_drops(precision: str, recipe: str | None) -> None:
    """llama3-8b on one GB200 whose NVLink-C2C runs 10,000x slower: the copies bind, and the two layers' bytes the
    activation peak drops by (2 A: 2 x 2 A / B_host of copy both ways) bound the step from below; the copy's A and the
    memory's are one count (docs/model.md#offload, mem32), so the step stays above 2 x (2 A) / B_host too."""
    job = _wide_job("gb200-nvl72", "llama3-8b", precision, recipe, 4096)
    assert job is not None
    job = msgspec.structs.replace(job, host_bandwidth=job.host_bandwidth * 1e-4)
    run = dict(NANO, offload_layers=2, flash_attention=True)
    res, kept = _eval(job, run), _eval(job, dict(run, offload_layers=0))
    assert int(res.reason[0]) in (0, int(Infeasible.OUT_OF_MEMORY)), res.reason
    dropped = float(kept.memory["activations"][0] - res.memory["activations"][0])
    assert dropped > 0
    step = float(res.step_time[0])
    assert step >= 2.0 * dropped / job.host_bandwidth
    # the rest of the step (the same run without offload) hides none of a copy this slow: step ~ rest + 2 x (2 A) / B
    assert step == pytest.approx(float(kept.step_time[0]) + 2.0 * dropped / job.host_bandwidth, rel=0.02)
