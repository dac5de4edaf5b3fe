"""The host floor's eager op calls (scalemodel/engine/host_floor.py EAGER_OP_CALLS, eager_ops_host_s;
scripts/validate_training.py host_eager_ops_s; docs/model.md#host "Eager paths"): the op calls Megatron-Core's unfused
RoPE, bias-dropout-add, GLU clamp and per-expert bias issue beyond H's source layer, counted by hand from the code at
NVIDIA/Megatron-LM 2d1fa8d372 and priced at the bottom-up count's low per-call costs (hardware/measurements/
host_overhead.yaml costs_us): a forward op from Python 8.3 us ('op', PT-ISSUE161822), a backward kernel launched by
autograd's C++ engine 5 us ('launch', RAFT-PR1736); added to the floor unscaled."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scalemodel.engine import host_floor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import validate_training as vt  # noqa: E402

OP_US, LAUNCH_US = 8.3, 5.0


def test_costs_are_the_counts_low_op_and_launch() -> None:
    assert (host_floor.CALL_COST_US["op"][0], host_floor.CALL_COST_US["launch"][0]) == (OP_US, LAUNCH_US)


def _us(fwd: float, bwd: float) -> float:
    return fwd * OP_US + bwd * LAUNCH_US


def test_each_path_counted_by_hand() -> None:
    """rope: per rotated tensor 12 forward calls (cos, x mscale, cast, sin, x mscale, cast; t cos, neg, cat, x sin,
    add, cat) and 7 backward (two muls, neg, chunk's cat, two gradient adds, the empty slice's zeros), for q and k,
    less the source's fused RoPE (1 call each for q and k, each way): 22 + 12. bias-dropout-add: x + bias beside the
    compiled kernel's one call: 1 + 0. clamp: two clamps, cat, the linear_offset tensor; backward 2 + 4 + 1: 4 + 7.
    expert bias at 16 local experts: 2 x 16 + 1 forward, 4 x 16 + 2 backward: 33 + 66."""
    one = {name: host_floor.eager_ops_host_s(16, True, **{name: True}) * 1e6
           for name in ("rope", "bias_dropout_add", "glu_clamp", "expert_bias")}
    assert one == pytest.approx({"rope": _us(22, 12), "bias_dropout_add": _us(1, 0), "glu_clamp": _us(4, 7),
                                 "expert_bias": _us(33, 66)}, rel=1e-12)
    assert host_floor.eager_ops_host_s(8, True, expert_bias=True) * 1e6 == pytest.approx(_us(17, 34), rel=1e-12)


def test_attention_paths_drop_under_an_attention_graph() -> None:
    """A graph of attention issues RoPE and the attention block's bias-dropout-add: 60 forward calls and 85 backward
    launches eager (498 + 425 = 923 us), 37 and 73 with attention graphed (307.1 + 365 = 672.1 us); none, nothing."""
    every = dict(rope=True, bias_dropout_add=True, glu_clamp=True, expert_bias=True)
    assert host_floor.eager_ops_host_s(16, True, **every) * 1e6 == pytest.approx(923.0, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, False, **every) * 1e6 == pytest.approx(672.1, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, True) == 0.0


def _row(case_id: str) -> tuple[dict, object, int]:  # type: ignore[type-arg]
    case = next(c for c in vt.read_yaml(vt.NEW_CASES) if c["id"] == case_id)
    wl, _ = vt.case_workload(case)
    return case, wl, int(case["parallelism"]["ep"])


@pytest.mark.parametrize(("case_id", "scale", "eager_us"), [
    ("mb2604_h100_gpt_oss_120b_bf16", 1.0, 923.0),  # no graphs: every path, 16 local experts (128 / EP 8)
    ("mb2604_b200_gpt_oss_120b_bf16", 1.0, 923.0),
    ("mb2606_b300_gpt_oss_120b_fp8mx", 0.715141, 672.1),  # attention graphed: clamp and expert bias only
    ("mb2608_gb200_gpt_oss_120b_fp8mx", 0.0, 0.0),  # full-iteration graph: no floor at all
    ("mb2604_h100_qwen3_235b_fp8cs", 1.0, 0.0),  # fused paths: the floor as before
])
def test_validator_floor_adds_the_rows_eager_calls(case_id: str, scale: float, eager_us: float) -> None:
    """The GPT-OSS floor rows: H x the graph scope's share + the eager calls (H100 / B200 9.1766 + 0.923 = 10.100 ms;
    B300 6.5626 + 0.6721 = 7.235 ms)."""
    case, wl, ep = _row(case_id)
    want = vt.MCORE_2511_MOE_LAYER_HOST_S * scale + eager_us * 1e-6
    assert vt.host_floor_s(case, wl, ep) == pytest.approx(want, rel=1e-5)
    assert vt.host_eager_ops_s(case, wl, ep) == pytest.approx(eager_us * 1e-6, rel=1e-12)
