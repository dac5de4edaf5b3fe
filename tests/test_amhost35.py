"""The host synchronisations of NeMo Automodel's MoE layer (amhost35, validation/README.md#automodel35): what the
model's existing host mechanism (docs/model.md#host, #host-issue-order, #host-refill) would charge the two automodel26
MoE rows if their layers were given the floor. Their DeepEP dispatch synchronises the host once a forward (the CPU
spins on the notify kernel's counters, deepseek-ai/DeepEP deep_ep.cpp internode_dispatch / intranode_dispatch,
"Synchronize total received tokens and tokens per expert") and once more in the recomputed forward; the measured H
(Megatron-Core 25.11) is not given to them (it is not Automodel's). Checked here by hand: even with H, and with twice
H on DeepSeek-V3, neither the interval floor H (1 + r) - D_i nor the expert path's issue s_A H - d_A binds on either
row, so the only charge is the refill's first term, t_rt + h_1 = 0 + 5 us (DeepEP: no copy, a mapped-memory read;
then one C++-issued launch at the count's low per-call cost, NVIDIA/raft pull request 1736) per MoE layer forward."""

from __future__ import annotations

import msgspec
import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

from scalemodel.engine.predict import predict

#: H of the validator's floor rows: the DGX-B200 Qwen3-30B-A3B run's step over its layer passes
#: (512 x 4096 / 8 / 9299 s over 64 micro-batches x 48 layers), written out, not imported
H_MEGATRON = 512 * 4096 / 8 / 9299 / (64 * 48)
#: t_rt + h_1 of a DeepEP synchronisation: no copy to wait for (0), one launch after the spin (5 us)
DEEPEP_REFILL_S = 0.0 + 5e-6

DSV3 = "automodel26_h100_dsv3_fsdp64_ep64_256"
NANO = "automodel26_h100_nemotron3_nano"


def _row(rid: str):  # type: ignore[no-untyped-def]
    v = script_module("validate_training")
    case = next(c for c in load_yaml(NEW_CASES) if c["id"] == rid)
    r = v.predict_new_case(case)
    cname = r.settings["cluster"]
    cluster = v.load_cluster(cname, v.cluster_overrides(case, cname))
    return case, r, cluster, v.case_workload(case)[0]


def _host_s(rid: str, H: float) -> float:
    case, r, cluster, wl = _row(rid)
    st = msgspec.structs.replace(r.strategy, moe_layer_host_s=H)
    return float(predict(cluster, wl, int(case["parallelism"]["gpus"]), r.training, st).breakdown_s["host"])


def _dsv3_moe_layers_busiest_rank(case: dict) -> int:  # type: ignore[type-arg]
    """functional.py @89e3a9fdd's split as the row records it: virtual stage i holds stage_layers[i] consecutive
    decoder layers and sits on pipeline rank i mod pp; the first 3 layers are dense (first_k_dense_replace 3)."""
    pp = int(case["parallelism"]["pp"])
    first_dense = int(case["model"]["moe"]["first_dense"])
    per_rank = [0] * pp
    layer = 0
    for i, n in enumerate(case["framework"]["stage_layers"]):
        for _ in range(int(n)):
            per_rank[i % pp] += int(layer >= first_dense)
            layer += 1
    assert layer == int(case["model"]["layers"]) and per_rank == [14, 14, 15, 15]
    return max(per_rank)


@needs_new_cases
def test_the_rows_carry_no_host_floor() -> None:
    """The validator gives neither Automodel MoE row the measured H (no framework.moe_host_sync): nothing is charged."""
    for rid in (DSV3, NANO):
        _, r, _, _ = _row(rid)
        assert r.strategy.moe_layer_host_s == 0.0
        assert _host_s(rid, 0.0) == 0.0


@needs_new_cases
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_dsv3_with_h_charges_only_the_refill(scale: float) -> None:
    """DeepSeek-V3 on 256 H100: 8 micro-batches (grad_accum) x 15 MoE layers on the busiest pipeline rank x 5 us =
    0.6 ms a step, with H (9.18 ms) and with 2 H: the layer's device time per interval and its expert path's device
    work exceed both of the host terms (docs/model.md#host-issue-order), so only the refill's first launch shows."""
    case, _, _, _ = _row(DSV3)
    micro = int(case["parallelism"]["grad_accum"])
    want = micro * _dsv3_moe_layers_busiest_rank(case) * DEEPEP_REFILL_S
    assert want == pytest.approx(0.6e-3, rel=1e-12)
    assert _host_s(DSV3, scale * H_MEGATRON) == pytest.approx(want, rel=1e-9)


@needs_new_cases
@pytest.mark.parametrize("share", [0.7151, 1.0])
def test_nano_with_h_charges_only_the_refill(share: float) -> None:
    """Nemotron 3 Nano on 8 H100 (pp 1): 16 micro-batches x 23 MoE (E) layers of the hybrid pattern x 5 us = 1.84 ms a
    step, with the floor rule's 0.7151 H (an E layer holds no attention) and with H itself."""
    case, _, _, _ = _row(NANO)
    e_layers = case["model"]["hybrid_pattern"].count("E")
    micro = int(case["parallelism"]["grad_accum"])
    assert (e_layers, micro) == (23, 16)
    want = micro * e_layers * DEEPEP_REFILL_S
    assert want == pytest.approx(1.84e-3, rel=1e-12)
    assert _host_s(NANO, share * H_MEGATRON) == pytest.approx(want, rel=1e-9)
