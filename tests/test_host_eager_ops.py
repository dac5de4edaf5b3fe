"""The host floor's eager op calls (scalemodel/engine/host_floor.py EAGER_OP_CALLS, eager_ops_host_s;
scalemodel/engine/step.py moe_host_s; docs/model.md#host "Eager paths"): the op calls Megatron-Core's unfused
RoPE, bias-dropout-add, GLU clamp and per-expert bias issue beyond H's source layer, counted by hand from the code at
NVIDIA/Megatron-LM 2d1fa8d372 and priced at the bottom-up count's low per-call costs (hardware/measurements/
host_overhead.yaml costs_us): a forward op from Python 8.3 us ('op', PT-ISSUE161822), a backward kernel launched by
autograd's C++ engine 5 us ('launch', RAFT-PR1736); added to the floor unscaled."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

from scalemodel.engine import host_floor, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

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
    compiled kernel's one call: 1 + 0. clamp: two clamps, cat, the linear_offset tensor; backward the one-sided clamp's
    3 (its CUDA zero scalar's fill, le, where) + the two-sided's 5 (fill, ge, le, logical_and_, where) + chunk's cat:
    4 + 9 (review25b: PyTorch's clamp_backward builds ``at::scalar_tensor(0., grad.options())``, a fill kernel on CUDA).
    expert bias at 16 local experts: 2 x 16 + 1 forward, 4 x 16 + 2 backward: 33 + 66."""
    one = {name: host_floor.eager_ops_host_s(16, True, **{name: True}) * 1e6
           for name in ("rope", "bias_dropout_add", "glu_clamp", "expert_bias")}
    assert one == pytest.approx({"rope": _us(22, 12), "bias_dropout_add": _us(1, 0), "glu_clamp": _us(4, 9),
                                 "expert_bias": _us(33, 66)}, rel=1e-12)
    assert host_floor.eager_ops_host_s(8, True, expert_bias=True) * 1e6 == pytest.approx(_us(17, 34), rel=1e-12)


def test_attention_paths_drop_under_an_attention_graph() -> None:
    """A graph of attention issues RoPE and the attention block's bias-dropout-add: 60 forward calls and 87 backward
    launches eager (498 + 435 = 933 us), 37 and 75 with attention graphed (307.1 + 375 = 682.1 us); none, nothing."""
    every = dict(rope=True, bias_dropout_add=True, glu_clamp=True, expert_bias=True)
    assert host_floor.eager_ops_host_s(16, True, **every) * 1e6 == pytest.approx(933.0, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, False, **every) * 1e6 == pytest.approx(682.1, rel=1e-12)
    assert host_floor.eager_ops_host_s(16, True) == 0.0


@pytest.mark.parametrize(("case_id", "scale", "eager_us"), [
    ("mb2604_h100_gpt_oss_120b_bf16", 1.0, 933.0),  # no graphs: every path, 16 local experts (128 / EP 8)
    ("mb2604_b200_gpt_oss_120b_bf16", 1.0, 933.0),
    # attention graphed: clamp and expert bias only, HybridEP's fp32 probabilities: + 8.3 + 33 x 5 = 855.4 us
    ("mb2606_b300_gpt_oss_120b_fp8mx", 0.715141, 855.4),
    ("mb2608_gb200_gpt_oss_120b_fp8mx", 0.0, 0.0),  # full-iteration graph: no floor at all
    ("mb2604_h100_qwen3_235b_fp8cs", 1.0, 0.0),  # fused paths: the floor as before
])
def test_validator_floor_adds_the_rows_eager_calls(case_id: str, scale: float, eager_us: float) -> None:
    """The GPT-OSS floor rows: the validator gives H x the graph scope's share (moe_layer_host_s) with the rows'
    eager_* flags and moe_host_attention_graphed, and the step model adds the eager calls (H100 / B200 9.1766 +
    0.933 = 10.110 ms; B300 6.5626 + 0.8554 = 7.418 ms), the route a user's strategy takes."""
    case = next(c for c in vt.read_yaml(vt.NEW_CASES) if c["id"] == case_id)
    res = vt.predict_new_case(case)
    st = res.strategy
    assert st.moe_layer_host_s == pytest.approx(vt.MCORE_2511_MOE_LAYER_HOST_S * scale, rel=1e-5)
    assert st.moe_host_attention_graphed == (scale not in (0.0, 1.0))
    wl, _ = vt.case_workload(case)
    tr = TrainingSpec(global_batch=st.dp * 8, micro_batch=1, precision=res.settings["precision"],
                      fp8_recipe=res.settings["fp8_recipe"], seq_len=wl.seq_len)
    job = build_job(load_cluster(res.settings["cluster"]), wl, tr)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * st.dp, job)
    want = vt.MCORE_2511_MOE_LAYER_HOST_S * scale + eager_us * 1e-6
    assert float(np.asarray(step.moe_host_s(job, g)).reshape(-1)[0]) == pytest.approx(want, rel=1e-5)
    if eager_us:
        assert any(n.startswith(f"host floor {want * 1e3:.2f} ms per MoE layer") and "of eager op calls" in n
                   for n in res.notes)


# --- the same price through the API / CLI (review25b): the strategy's eager_* flags, not a validator-only sum -------

GPT_OSS_LIKE = TransformerWorkload(name="gpt-oss-like", layers=12, hidden=2880, heads=64, kv_heads=8, head_dim=64,
                                   ffn_hidden=2880, gated_mlp=True, biases=True, dropout=False, vocab=201088,
                                   seq_len=4096, tied_embeddings=False,
                                   moe={"experts": 128, "top_k": 4, "ffn_hidden": 2880})
EVERY = dict(eager_rope=True, eager_bias_dropout_add=True, eager_glu_clamp=True, eager_expert_bias=True)


def _mb(host_s: float, **strategy: Any) -> float:
    """Micro-batch seconds of the GPT-OSS-like model at dp 8, ep 8 (16 local experts), pp 1, as predict prices a
    strategy file's fields."""
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), GPT_OSS_LIKE, tr)
    st = StrategySpec(moe_layer_host_s=host_s, dp=8, ep=8, **strategy)
    return float(np.asarray(evaluate(job, grid_from_strategy(st, tr, 8, job)).extras["microbatch_time"]).reshape(-1)[0])


@pytest.mark.parametrize(("graphed", "eager_us"), [(False, 933.0), (True, 682.1)])
def test_strategy_flags_add_the_eager_calls_to_a_binding_floor(graphed: bool, eager_us: float) -> None:
    """With H far above a layer's device time (1 s) every layer takes H and the micro-batch is t_0 + L H (tests/
    test_host_floor.py); the eager paths' device bytes hide under it. So a strategy that sets the four eager flags
    (with moe_host_attention_graphed: the attention graph issues RoPE and its bias-dropout-add) must add exactly
    L x the eager calls at 16 local experts, by hand above: 12 x 933 us (12 x 682.1 us graphed), as the validator
    adds them to its rows' floor. Without moe_layer_host_s nothing is added (no host floor)."""
    extra = {"moe_host_attention_graphed": True} if graphed else {}
    on, off = _mb(1.0, **EVERY, **extra), _mb(1.0, **extra)
    assert on - off == pytest.approx(12 * eager_us * 1e-6, rel=1e-9)
    assert _mb(0.0, **EVERY, **extra) > _mb(0.0, **extra)  # device bytes only, no floor: priced as before


def test_cli_prices_the_flags_and_warns_without_a_floor(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through the CLI: a strategy file with the floor and the four flags reports the larger host wait than the
    floor alone (mixtral-8x7b has no biases nor a clamp here, so RoPE and the expert bias only); the attention flag
    without a floor is a warning, a bad value a one-line error."""
    plain, flags = tmp_path / "plain.yaml", tmp_path / "flags.yaml"
    plain.write_text("moe_layer_host_s: 1.0\nep: 8\n")
    flags.write_text("moe_layer_host_s: 1.0\nep: 8\neager_rope: true\neager_expert_bias: true\n")
    a = cli("predict", "--model", "mixtral-8x7b", "--gpus", "8", "--strategy", str(plain), "--json")
    b = cli("predict", "--model", "mixtral-8x7b", "--gpus", "8", "--strategy", str(flags), "--json")
    assert a.code == 0 and b.code == 0, (a.err, b.err)
    # one micro-batch (global batch 8 at dp 8), 32 layers, each at H: the step grows by 32 x the calls at 8 / 8 = 1
    # local expert, RoPE 22 x 8.3 + 12 x 5 = 242.6 us and the bias 3 x 8.3 + 6 x 5 = 54.9 us, beside the lockstep
    # jitter, which follows the flags' device time (docs/model.md#jitter)
    pa, pb = json.loads(a.out), json.loads(b.out)
    grow = (pb["step_time_s"] - pb["breakdown_s"]["jitter"]) - (pa["step_time_s"] - pa["breakdown_s"]["jitter"])
    assert grow == pytest.approx(32 * (242.6 + 54.9) * 1e-6, rel=1e-6)
    on = tmp_path / "on.yaml"
    on.write_text("moe_host_attention_graphed: true\n")
    r = cli("predict", "--model", "mixtral-8x7b", "--gpus", "8", "--strategy", str(on))
    assert r.code == 0 and "moe_host_attention_graphed is not priced" in r.err, r.err
    on.write_text("moe_host_attention_graphed: sometimes\n")
    r = cli("predict", "--model", "mixtral-8x7b", "--gpus", "8", "--strategy", str(on))
    assert r.code == 2 and r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1, r.err


def test_fp32_probabilities_add_the_casts_of_the_expert_bias() -> None:
    """With the probabilities in fp32 (the flex dispatcher: HybridEP and DeepEP upcast them, Megatron-LM 2d1fa8d372
    token_dispatcher.py L1058-1064 / L1207-1213; or moe_router_dtype fp32) and 16-bit activations, ``t + b * p`` is
    fp32, so _apply_bias ends in a real ``.to(bf16)`` (1 more forward call), whose backward casts up (1), and autograd
    casts t's and b's gradients back down per expert (2n): at 16 local experts 1 x 8.3 + 33 x 5 = 173.3 us more."""
    narrow = host_floor.eager_ops_host_s(16, True, expert_bias=True) * 1e6
    wide = host_floor.eager_ops_host_s(16, True, expert_bias=True, wide_probs=True) * 1e6
    assert wide - narrow == pytest.approx(_us(1, 33), rel=1e-12)
    assert host_floor.eager_ops_host_s(16, True, wide_probs=True) == 0.0  # no expert bias: nothing to cast
    # the step model: the flex dispatcher's probabilities are fp32 whatever the router's dtype
    flex = _mb(1.0, **EVERY, moe_flex_dispatcher=True) - _mb(1.0, moe_flex_dispatcher=True)
    assert flex == pytest.approx(12 * (933.0 + _us(1, 33)) * 1e-6, rel=1e-9)
