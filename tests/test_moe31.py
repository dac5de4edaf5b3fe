"""moe31: the queue refill after a dropless dispatcher's host synchronisation (docs/model.md#host-refill).

Checked independently: the closed form of :func:`scalemodel.engine.host_floor.refill_exposed` against a
kernel-by-kernel simulation of a host issuing into an empty GPU queue; its bound at the published per-call costs by
hand from host_overhead.yaml's figures; and the synchronisations a row's MoE layer pass makes, read by hand from the
Megatron-LM commits the rows cite.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

from scalemodel.choices import FlexBackend
from scalemodel.engine.host_floor import (
    SYNC_ROUND_TRIP_US,
    part_host_us,
    refill_bound_us,
    refill_exposed,
    sync_refill_us,
)


def simulate_idle(host: list[float], device: list[float], start: float = 0.0) -> float:
    """Step by step: the host returns from the synchronisation at 0 with the GPU queue empty, spends ``start``
    (the round trip), then issues kernel i after host[i] more; the GPU starts kernel i when it is issued and kernel
    i-1 has finished, and runs it for device[i]. Returns the GPU's idle time up to its last kernel's end."""
    issued, gpu_free, idle = start, 0.0, 0.0
    for h, d in zip(host, device, strict=True):
        issued += h
        begin = max(issued, gpu_free)
        idle += begin - gpu_free
        gpu_free = begin + d
    return idle


def test_refill_closed_form_matches_a_step_simulation() -> None:
    rng = np.random.default_rng(31)
    for _ in range(300):
        k = int(rng.integers(1, 40))
        # kernels from strongly host-bound to strongly device-bound, as an expert path mixes them
        host = rng.exponential(10.0, k) * rng.choice([0.1, 1.0, 10.0], k)
        device = rng.exponential(10.0, k) * rng.choice([0.1, 1.0, 10.0], k)
        start = float(rng.uniform(0.0, 10.0))
        assert float(refill_exposed(host, device, start)) == pytest.approx(simulate_idle(list(host), list(device),
                                                                                         start), rel=1e-12)


def test_refill_by_hand() -> None:
    # every kernel host-bound: kernel 3 issued at 30, the device has run 2 by then: 28
    assert float(refill_exposed([10, 10, 10], [1, 1, 1])) == 28.0
    # every kernel device-bound: only the first issue is exposed (plus the round trip)
    assert float(refill_exposed([1, 1, 1], [10, 10, 10], 6.0)) == 7.0
    # a long device kernel early hides the slow issue after it: max(5, 5 + 20 - 100, ...) = 5
    assert float(refill_exposed([5, 20, 20], [100, 1, 1])) == 5.0
    # a short kernel first, then slow issue: max(5, 25 - 1, 45 - 2) = 43
    assert float(refill_exposed([5, 20, 20], [1, 1, 1])) == 43.0
    # rows broadcast on the leading axis
    assert refill_exposed([[10, 10], [1, 1]], [[1, 1], [10, 10]]).tolist() == [19.0, 1.0]


def test_refill_bound_at_the_published_costs_by_hand() -> None:
    """The expert path's forward at the count's high per-call costs (host_overhead.yaml ``moe_layer_bottom_up``):
    2 TE modules at 140 us, 11 eager ops at 13.5 us, 2 + 4n C++ launches at 10 us, 26 event calls at 1.094 us and 12n
    Python steps at 1 us; plus the D2H round trip, 6 us (NVIDIA/gdrcopy README: 'a cudaMemcpy can incur in a 6-7us
    overhead')."""
    assert SYNC_ROUND_TRIP_US == 6.0
    for n in (2, 4, 8, 16, 64):
        fwd = 2 * 140 + 11 * 13.5 + (2 + 4 * n) * 10 + 26 * 1.094 + 12 * n
        assert float(part_host_us(("moe", "fwd"), n, 1)) == pytest.approx(fwd)
        assert float(refill_bound_us(n)) == pytest.approx(6 + fwd)
        # no device time under the refill: the bound is the closed form with every d_i = 0
        assert float(refill_bound_us(n)) == pytest.approx(float(refill_exposed([fwd], [0.0], 6.0)))
    assert float(refill_bound_us(16)) == pytest.approx(1314.944)
    assert float(refill_bound_us(8)) == pytest.approx(898.944)
    # two waits inside one expert path (GPT-OSS's eager activation) and a recomputed MoE block
    assert float(refill_bound_us(16, 3, 1)) == pytest.approx(18 + 1308.944)
    assert float(refill_bound_us(16, 2, 2)) == pytest.approx(12 + 2 * 1308.944)


def test_round_trip_and_first_issue_by_dispatcher() -> None:
    """(t_rt, h_1) in us: all-to-all 0, 0 (its first permutation is queued between the copy and the wait); HybridEP
    6, 5 (a synchronous pinned copy, then one C++ launch); DeepEP 0, 5 (a mapped-memory spin, no figure; one launch);
    allgather 6, 8.3 (a blocking .cpu(), then an eager op)."""
    flex = [False, True, True, False]
    backend = [FlexBackend.DEEPEP, FlexBackend.HYBRIDEP, FlexBackend.DEEPEP, FlexBackend.DEEPEP]
    allgather = [False, False, False, True]
    trip, first = sync_refill_us(flex, backend, allgather)
    assert trip.tolist() == [0.0, 6.0, 0.0, 6.0]
    assert first.tolist() == [0.0, 5.0, 5.0, 8.3]
    # HybridEP with nothing queued: the refill's k = 1 term, t_rt + h_1 = 11 us, when the device outruns the host
    assert float(refill_exposed([5.0, 1.0, 1.0], [500.0, 500.0, 500.0], 6.0)) == 11.0


def test_sync_counts_read_from_the_code() -> None:
    """Synchronisations of one MoE layer pass, read by hand:

    * dropless all-to-all (Megatron-LM d98e8a64dd / 0d7e02bd26 token_dispatcher.py ``_maybe_dtoh_and_synchronize``,
      ``self.d2h_event.synchronize()`` at ``cuda_sync_point``): one a forward; the backward's all-to-alls reuse the
      saved splits; a recomputed MoE block runs the preprocess and the wait again;
    * GPT-OSS's eager clamped activation (fused_bias_geglu.py ``torch.tensor(linear_offset, device=...)``: a
      pageable H2D copy and a stream synchronise): once more a forward, and again where ``moe_act`` is recomputed;
    * drop-and-pad (Megatron-LM 7094270c6f token_dispatcher.py L675 ``if not self.drop_and_pad:`` around every copy
      and wait; L358-362 the tokens per local expert a ``torch.full`` with no device, so TEGroupedMLP's
      ``tokens_per_expert.tolist()``, experts.py L738, reads a host tensor): none."""
    audit = script_module("moe_audit")
    assert audit.host_syncs(True, "none", "", False) == (1, 1)             # mb2511_h100_qwen3_30b_fp8cs
    assert audit.host_syncs(True, "selective", "moe_act", True) == (3, 1)  # mb2604_h100_gpt_oss_120b_bf16
    assert audit.host_syncs(True, "selective", "moe,layernorm", False) == (2, 2)
    assert audit.host_syncs(True, "full", "", False) == (2, 2)
    assert audit.host_syncs(False, "selective", "core_attn", False) == (0, 0)  # dgxc2505 GB200 DeepSeek-V3 BF16


@needs_new_cases
def test_the_validator_gives_the_wait_to_the_synchronising_rows_only() -> None:
    """The DGX Cloud GB200 DeepSeek-V3 BF16 rows (Megatron-LM 7094270c6f, USE_TOKEN_DROP: capacity 1.0 padded) make no
    host synchronisation, so no refill or floor is theirs to price: the +86-88 % of these rows is not this mechanism.
    The dropless all-to-all DGX-H100 Qwen3-30B row synchronises once a forward and gets the floor."""
    vt = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    for cid in ("dgxc2505_gb200_dsv3_bf16_128", "dgxc2505_gb200_dsv3_bf16_256", "dgxc2505_gb200_dsv3_bf16_512"):
        case = cases[cid]
        assert "capacity factor 1.0, pad to capacity" in case["parallelism"]["note"]
        assert vt.host_floor_s(case, vt.case_workload(case)[0], int(case["parallelism"]["ep"])) == 0.0
    case = cases["mb2511_h100_qwen3_30b_fp8cs"]
    assert vt.host_floor_s(case, vt.case_workload(case)[0], 8) > 0.0
