"""moe40: the MoE cross-row audit's new features and its within-source fit (scripts/moe_audit.py).

Nothing here prices anything (moe40 changed no prediction). The checks are computed by hand: which part of the MoE
block a recompute setting repeats (Megatron-Core transformer_config.py ``recompute_modules``: ``moe`` the whole
block, ``moe_act`` the experts' activation only), and the within-source least squares against the textbook
fixed-effects formula (the slope is the pooled within-source covariance over the within-source variance; its
standard error from the residual sum of squares on n - S - 1 degrees of freedom), written out in plain Python.
"""

from __future__ import annotations

import math

import pytest
from conftest import script_module


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
