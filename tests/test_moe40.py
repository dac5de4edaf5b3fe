"""moe40: the MoE cross-row audit's new features and its within-source fit (scripts/moe_audit.py).

Nothing here prices anything (moe40 changed no prediction). The checks are computed by hand: which part of the MoE
block a recompute setting repeats (Megatron-Core transformer_config.py ``recompute_modules``: ``moe`` the whole
block, ``moe_act`` the experts' activation only), and the within-source least squares against the textbook
fixed-effects formula (the slope is the pooled within-source covariance over the within-source variance; its
standard error from the residual sum of squares on n - S - 1 degrees of freedom), written out in plain Python.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import script_module
from grid_helpers import HBM, TINY_MOE, one

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster


def test_moe_recompute_by_hand() -> None:
    audit = script_module("moe_audit")
    assert audit.moe_recompute("full", "") == "full"
    assert audit.moe_recompute("selective", "core_attn,moe_act,moe,layernorm") == "block"  # mb2606 H100 Nano
    assert audit.moe_recompute("selective", "moe_act,layernorm") == "act"  # the GPT-OSS / Super presets
    assert audit.moe_recompute("selective", "mla_up_proj") == "none"
    assert audit.moe_recompute("none", "") == "none"


def _row(src: str, err: float, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "source": src, "speed_error": err, "host_sync": "none", "local_experts": 8, "tok_per_expert": 4096.0,
        "a2a_overlap": "no a2a overlap", "router_dtype": "bf16/params", "permute_fusion": "fused",
        "shared": "no shared", "shared_overlap": "no shared", "moe_recompute": "none", "precision": "fp8",
        "dispatcher": "hybridep", "domains": 1, "shares": {"ep_comm": 0.1}, "drop_pad": "dropless"}
    base.update(kw)
    return base


def test_regressors_read_the_row() -> None:
    audit = script_module("moe_audit")
    r = _row("a", 0.1, host_sync="host floor", local_experts=16, a2a_overlap="a2a overlap", router_dtype="fp32",
             permute_fusion="unfused", moe_recompute="act", precision="16-bit", dispatcher="alltoall", domains=4)
    got = {k: f(r) for k, f in audit.REGRESSORS.items()}
    assert got["host floor"] == 1.0 and got["log2 local experts"] == 4.0 and got["log2 tokens per expert"] == 12.0
    assert got["a2a overlap"] == 1.0 and got["fp32 router"] == 1.0 and got["unfused permute"] == 1.0
    assert got["MoE recompute"] == 1.0 and got["fp8 / fp4"] == 0.0 and got["flex dispatcher"] == 0.0
    assert got["EP over > 1 domain"] == 1.0 and got["exposed ep_comm share"] == 0.1 and got["drop-and-pad"] == 0.0


def test_within_source_slope_is_the_fixed_effects_formula() -> None:
    """One regressor, three sources of different levels: the fit's slope and t equal the hand formula."""
    audit = script_module("moe_audit")
    data = {"a": [(2, 0.31), (4, 0.40), (8, 0.38), (16, 0.55)],
            "b": [(1, -0.20), (2, -0.08), (8, 0.05)],
            "c": [(4, 0.02), (16, 0.20), (32, 0.13), (64, 0.30), (2, -0.01)]}
    rows = [_row(s, e, local_experts=le) for s, pts in data.items() for le, e in pts]
    sxx = sxy = 0.0
    groups = []
    for pts in data.values():
        xs = [math.log2(le) for le, _ in pts]
        ys = [e for _, e in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx += sum((x - mx) ** 2 for x in xs)
        sxy += sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
        groups.append((xs, ys, mx, my))
    slope = sxy / sxx
    ssr = sum((y - my - slope * (x - mx)) ** 2 for xs, ys, mx, my in groups for x, y in zip(xs, ys, strict=True))
    n, sources = 12, 3
    t = slope / math.sqrt(ssr / (n - sources - 1) / sxx)
    beta, tstat, count = audit.within_source(rows, ("log2 local experts",))
    assert count == n
    assert beta[0] == pytest.approx(slope, rel=1e-9)
    assert tstat[0] == pytest.approx(t, rel=1e-9)


def test_within_source_removes_the_source_level() -> None:
    """Errors built as 0.10 x host floor + 0.05 x log2 local experts + a level per source (no noise but a tiny
    one, so the t statistics stay finite): the two coefficients come back whatever the levels are, and a feature
    that only tells the sources apart (collinear with their intercepts) does not move them."""
    audit = script_module("moe_audit")
    levels = {"mb2511": 0.30, "mb2608": -0.10, "mcrec26": 0.12}
    rows = []
    wiggle = (1e-6, -1e-6, 2e-6, 0.0, -2e-6, 1e-6)
    for i, (src, lev) in enumerate((s, lv) for s, lv in levels.items() for _ in range(6)):
        hf = i % 2
        le = 2 ** (i % 3 + 1)
        err = 0.10 * hf + 0.05 * math.log2(le) + lev + wiggle[i % 6]
        rows.append(_row(src, err, host_sync="host floor" if hf else "none", local_experts=le,
                         router_dtype="fp32" if src == "mcrec26" else "bf16/params"))
    beta, _, _ = audit.within_source(rows, ("host floor", "log2 local experts"))
    assert beta == [pytest.approx(0.10, abs=1e-5), pytest.approx(0.05, abs=1e-5)]
    # the fp32 router is a property of one source here, collinear with its intercept
    beta3, _, _ = audit.within_source(rows, ("host floor", "log2 local experts", "fp32 router"))
    assert beta3[:2] == [pytest.approx(0.10, abs=1e-5), pytest.approx(0.05, abs=1e-5)]


# --- the routed experts' FC2 keeping its 16-bit input under moe_act recompute (docs/model.md#expert-fc2-original-input)

def _tiny_moe_shape():  # type: ignore[no-untyped-def]
    return shape(layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, gated_mlp=True, moe_experts=64,
                 moe_top_k=4, moe_ffn_hidden=512)


@pytest.mark.parametrize(("recipe", "hopper", "fwd", "bwd"), [
    # per element of FC2's input: Megatron-LM 0d8e0714cd experts.py L832-835 sets save_original_input; TE v2.9
    # grouped_linear.py L96-102 writes no column-wise copy in the forward, L392-410 quantizes again in the backward
    ("tensorwise", True, -1.0, 2 + 2 + 1 + 1),       # per-tensor: both copies again, amax pass first; Hopper transposes
    ("tensorwise", False, 0.0, 2 + 2 + 1),            # Blackwell: one copy serves both GEMMs
    ("mxfp8", False, -(1 + 1 / 32), 2 + 1 + 1 / 32),  # column-wise copy (1 B + an E8M0 scale per 32) moves to backward
    ("blockwise", True, -(1 + 4 / 128), 2 + 1 + 4 / 128),
    ("nvfp4", False, -(0.5 + 1 / 16), 2 + 2 + 0.5 + 1 / 16),  # amax pass + cast, the column-wise E2M1 copy
    ("delayed", True, 0.0, 0.0),                      # TE refuses save_original_input under delayed scaling
])
def test_fc2_original_input_bytes_by_hand(recipe: str, hopper: bool, fwd: float, bwd: float) -> None:
    sh = _tiny_moe_shape()
    # b 2 x s 2048 = 4096 tokens, top-4: 16,384 routed rows on the GPU's experts (EP 8: 8 x 4096 x 4 / 64 = 2048 on
    # each of 8), FC2's input 512 wide: 8,388,608 elements
    n = 2 * 2048 * 4 * 512
    f, b = compute.expert_fc2_original_input_bytes(recipe, sh, micro_batch=2, seq_len=2048, transpose_copy=hopper,
                                                   ep=8)
    assert float(f) == pytest.approx(fwd * n) and float(b) == pytest.approx(bwd * n)
    # TP 2 with expert TP 1, EP 16: each rank's experts see the TP pair's gathered tokens, ep etp T k / (E t) = 2048
    # rows an expert on 4 experts, the same 8,192 rows x 512
    f2, _ = compute.expert_fc2_original_input_bytes(recipe, sh, micro_batch=2, seq_len=2048, transpose_copy=hopper,
                                                    tp=2, ep=16, etp=1)
    assert float(f2) == pytest.approx(fwd * n / 2)


def test_fc2_original_input_in_the_layer_times() -> None:
    """TINY_MOE on H100 in FP8 current scaling, b 2, EP 8, selective recompute of moe_act: per MoE layer the forward
    saves the transposed copy (1 B an element), the backward quantizes 6 B an element again and launches (8 - 1) x 3
    per-expert quantize kernels beyond one; 3 MoE layers of 4 in the per-layer mean. Nothing without moe_act, nothing
    under full recompute (the flag is selective recompute's); with moe named too, the recomputed block's forward
    saves the copy again."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, precision="fp8", fp8_recipe="tensorwise")
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, tr)
    n = 2 * 2048 * 4 * 512
    factor = compute.cast_kernel_time_factor("hopper", "tensorwise", job.accelerator)
    assert factor == 1.0  # Hopper's per-tensor casts run at the BabelStream rate (no measured cast factor)
    want_f = 0.75 * (-1.0 * n / HBM)
    want_b = 0.75 * (6.0 * n / HBM + 7 * 3 * 1.78e-6)
    z = np.zeros(1)

    def delta(**st):  # type: ignore[no-untyped-def]
        g = grid_from_strategy(StrategySpec(dp=8, ep=8, **st), tr, 8, job)
        return [one(v) for v in layer_compute._with_expert_original_input(job, g, z, z, z)]

    assert delta(recompute="selective", recompute_modules="moe_act") == [
        pytest.approx(want_f), pytest.approx(want_b), 0.0]
    assert delta(recompute="selective", recompute_modules="core_attn") == [0.0, 0.0, 0.0]
    assert delta(recompute="full") == [0.0, 0.0, 0.0]
    assert delta(recompute="selective", recompute_modules="moe_act,moe") == [
        pytest.approx(want_f), pytest.approx(want_b), pytest.approx(want_f)]
    job_d = build_job(load_cluster("dgx-h100"), TINY_MOE, TrainingSpec(precision="fp8"))  # delayed: refused by TE
    g = grid_from_strategy(StrategySpec(dp=8, ep=8, recompute="selective", recompute_modules="moe_act"),
                           TrainingSpec(global_batch=16, micro_batch=2, precision="fp8"), 8, job_d)
    assert [one(v) for v in layer_compute._with_expert_original_input(job_d, g, z, z, z)] == [0.0, 0.0, 0.0]
