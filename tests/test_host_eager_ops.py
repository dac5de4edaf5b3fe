"""The host floor's eager op calls (scalemodel/engine/host_floor.py EAGER_OP_CALLS, eager_ops_host_s;
scripts/validate_training.py host_eager_ops_s; docs/model.md#host "Eager paths"): the op calls Megatron-Core's unfused
RoPE, bias-dropout-add, GLU clamp and per-expert bias issue beyond H's source layer, counted by hand from the code at
NVIDIA/Megatron-LM 2d1fa8d372 and priced at the bottom-up count's low per-op cost, 8.3 us (hardware/measurements/
host_overhead.yaml costs_us op, PT-ISSUE161822), added to the floor unscaled."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scalemodel.engine import host_floor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import validate_training as vt  # noqa: E402

OP_US = 8.3


def test_op_cost_is_the_counts_low_eager_op() -> None:
    assert host_floor.CALL_COST_US["op"][0] == OP_US


def test_each_path_counted_by_hand() -> None:
    """rope: per rotated tensor 12 forward calls (cos, x mscale, cast, sin, x mscale, cast; t cos, neg, cat, x sin,
    add, cat) and 7 backward (two muls, neg, chunk's cat, two gradient adds, the empty slice's zeros), for q and k,
    less the source's fused RoPE (1 call each for q and k, each way): 22 + 12. bias-dropout-add: x + bias beside the
    compiled kernel's one call: 1 + 0. clamp: two clamps, cat, the linear_offset tensor; backward 2 + 4 + 1: 4 + 7.
    expert bias at 16 local experts: 2 x 16 + 1 forward, 4 x 16 + 2 backward: 33 + 66."""
    one = {name: host_floor.eager_ops_host_s(16, True, **{name: True}) / (OP_US * 1e-6)
           for name in ("rope", "bias_dropout_add", "glu_clamp", "expert_bias")}
    assert one == pytest.approx({"rope": 34.0, "bias_dropout_add": 1.0, "glu_clamp": 11.0, "expert_bias": 99.0},
                                abs=1e-9)
    assert host_floor.eager_ops_host_s(8, True, expert_bias=True) == pytest.approx((17 + 34) * OP_US * 1e-6)


def test_attention_paths_drop_under_an_attention_graph() -> None:
    """A graph of attention issues RoPE and the attention block's bias-dropout-add: 145 calls eager (1.2035 ms),
    110 with attention graphed (0.913 ms); none of the paths, nothing."""
    every = dict(rope=True, bias_dropout_add=True, glu_clamp=True, expert_bias=True)
    assert host_floor.eager_ops_host_s(16, True, **every) == pytest.approx(145 * OP_US * 1e-6, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, False, **every) == pytest.approx(110 * OP_US * 1e-6, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, True) == 0.0


def _row(case_id: str) -> tuple[dict, object, int]:  # type: ignore[type-arg]
    case = next(c for c in vt.read_yaml(vt.NEW_CASES) if c["id"] == case_id)
    wl, _ = vt.case_workload(case)
    return case, wl, int(case["parallelism"]["ep"])


@pytest.mark.parametrize(("case_id", "scale", "calls"), [
    ("mb2604_h100_gpt_oss_120b_bf16", 1.0, 145),  # no graphs: every path, 16 local experts (128 / EP 8)
    ("mb2604_b200_gpt_oss_120b_bf16", 1.0, 145),
    ("mb2606_b300_gpt_oss_120b_fp8mx", 0.715141, 110),  # attention graphed: clamp and expert bias only
    ("mb2608_gb200_gpt_oss_120b_fp8mx", 0.0, 0),  # full-iteration graph: no floor at all
    ("mb2604_h100_qwen3_235b_fp8cs", 1.0, 0),  # fused paths: the floor as before
])
def test_validator_floor_adds_the_rows_eager_calls(case_id: str, scale: float, calls: int) -> None:
    """The GPT-OSS floor rows: H x the graph scope's share + the calls x 8.3 us (H100 / B200 9.1766 + 1.2035 =
    10.380 ms; B300 6.5626 + 0.9130 = 7.476 ms)."""
    case, wl, ep = _row(case_id)
    want = vt.MCORE_2511_MOE_LAYER_HOST_S * scale + calls * OP_US * 1e-6
    assert vt.host_floor_s(case, wl, ep) == pytest.approx(want, rel=1e-5)
    assert vt.host_eager_ops_s(case, wl, ep) == pytest.approx(calls * OP_US * 1e-6, rel=1e-12)
