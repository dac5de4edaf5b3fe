"""The expert path issued after the dispatcher's host synchronisation (docs/model.md#host-issue-order,
step.expert_issue_shortfall): the synchronisation drains the device's queue, so the kernels after the expert path
wait for the host to issue it; an interval takes at least s_A H + (D_i - d_A), and the wait is
max(H (1 + r) - D_i, s_A H - d_A, 0), d_A = d_moe - (backward + recompute + the attention block's forward GEMMs and
core + half the exposed EP / TP traffic) per MoE layer. Checked by hand: the shares from the count's published
per-call costs, the wait on one rank from the model's own layer pieces, the slope in H, the EP overlap (none) and a
hybrid pattern's E layer (its own share, no attention block)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine.host_floor import expert_forward_host_share
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.layer_compute import _compute_per_microbatch
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

BASE = dict(hidden=2048, heads=32, kv_heads=4, head_dim=128, gated_mlp=True, vocab=151936, seq_len=4096,
            tied_embeddings=False)
MOE = {"experts": 128, "top_k": 8, "ffn_hidden": 768}  # Qwen3-30B-A3B's experts
TRAIN = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)

# host_overhead.yaml moe_layer_bottom_up: per-call costs (low, high) in us and the calls of the ("moe", "fwd") part
# at 16 local experts: 2 modules, 11 ops, 66 launches, 26 events, 192 Python steps
FWD_LOW = 2 * 115 + 11 * 8.3 + 66 * 5 + 26 * 0.949 + 192 * 1  # 867.974
FWD_HIGH = 2 * 140 + 11 * 13.5 + 66 * 10 + 26 * 1.094 + 192 * 1  # 1308.944
ATT_LOW, ATT_HIGH = 2 * (3 * 115 + 5 * 8.3), 2 * (3 * 140 + 5 * 13.5)  # attention's 3 modules + 5 ops each way


def test_expert_forward_shares_by_hand() -> None:
    """The expert path's forward over the count: with attention (the source's layer, 2713.62 / 3981.33 us) 0.3199 /
    0.3288, the lower 0.3199; without (a hybrid's E layer: 1940.62 / 3006.33 us) 0.4473 / 0.4354, the lower 0.4354."""
    assert FWD_LOW == pytest.approx(867.974) and FWD_HIGH == pytest.approx(1308.944)
    with_att = min(FWD_LOW / 2713.622, FWD_HIGH / 3981.332)
    without = min(FWD_LOW / (2713.622 - ATT_LOW), FWD_HIGH / (3981.332 - ATT_HIGH))
    assert with_att == pytest.approx(0.31986, abs=1e-5) and without == pytest.approx(0.43540, abs=1e-5)
    assert float(expert_forward_host_share(True)) == pytest.approx(with_att, rel=1e-4)
    assert float(expert_forward_host_share(False)) == pytest.approx(without, rel=1e-4)


def _job(wl: TransformerWorkload):  # type: ignore[no-untyped-def]
    return build_job(load_cluster("dgx-h100"), wl, TRAIN)


def _t_mb(wl: TransformerWorkload, host_s: float, **strategy: object) -> float:
    """One micro-batch on the single rank (pp 1, 8 GPUs, MBS 1, 8 micro-batches)."""
    job = _job(wl)
    st = StrategySpec(moe_layer_host_s=host_s, dp=8, **strategy)  # type: ignore[arg-type]
    res = evaluate(job, grid_from_strategy(st, TRAIN, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


def _pieces(wl: TransformerWorkload, n: float) -> tuple[float, float]:
    """(backward, attention block forward) per layer: the model's layer prices of a rank of n layers less none."""
    job = _job(wl)
    g = grid_from_strategy(StrategySpec(dp=8), TRAIN, 8, job)
    full, none = _compute_per_microbatch(job, g, np.array([n])), _compute_per_microbatch(job, g, np.array([0.0]))
    return (float((full["backward"] - none["backward"])[0]) / n,
            float((full["attention_forward"] - none["attention_forward"])[0]) / n)


def test_wait_by_hand_on_one_rank() -> None:
    """8 Qwen3-30B-type layers, EP 1 (no EP traffic), TP 1: d_A = D - t_bwd - t_attn; below H* = d_A / s_A no
    wait; between H* and the floor's own onset the wait is 8 (s_A H - d_A), slope 8 s_A; above, 8 (H - D)."""
    wl = TransformerWorkload(name="moe", layers=8, ffn_hidden=6144, moe=MOE, **BASE)
    s_a = min(FWD_LOW / 2713.622, FWD_HIGH / 3981.332)
    t_0 = _t_mb(wl, 1.0) - 8 * 1.0  # every layer binds at 1 s: the rank without layers
    d = (_t_mb(wl, 0.0) - t_0) / 8
    bwd, attn = _pieces(wl, 8.0)
    assert 0.0 < attn < d - bwd  # the attention block is part of the forward
    d_a = d - bwd - attn
    h_star, h_top = d_a / s_a, (d - d_a) / (1.0 - s_a)  # where the shortfall starts, where H - D takes over
    assert h_star < h_top < d + 0.01
    base = _t_mb(wl, 0.0)
    assert _t_mb(wl, 0.95 * h_star) == pytest.approx(base, rel=1e-12)
    for h in (h_star + 0.3 * (h_top - h_star), h_star + 0.7 * (h_top - h_star)):
        assert _t_mb(wl, h) - base == pytest.approx(8 * (s_a * h - d_a), rel=1e-3)
    h = 1.2 * h_top
    assert _t_mb(wl, h) - base == pytest.approx(8 * (h - d), rel=1e-6)  # the floor as before


def test_a2a_overlap_prices_no_shortfall() -> None:
    """EP 8: without the all-to-all overlap an H below the layer's device time waits (the expert path's issue);
    with it (the combined 1F1B queues the other micro-batch's expert backward before the synchronisation) the wait
    is the floor's alone, 8 max(H - D, 0), on each side of D."""
    wl = TransformerWorkload(name="moe", layers=8, ffn_hidden=6144, moe=MOE, **BASE)

    def layer(overlap: bool) -> tuple[float, float]:  # (D, t_mb at H = 0)
        base = _t_mb(wl, 0.0, ep=8, moe_a2a_overlap=overlap)
        return (base - (_t_mb(wl, 1.0, ep=8, moe_a2a_overlap=overlap) - 8 * 1.0)) / 8, base

    d, base = layer(False)
    assert _t_mb(wl, 0.97 * d, ep=8) - base > 1e-4
    d, base = layer(True)
    for h in (0.99 * d, 1.1 * d):
        assert _t_mb(wl, h, ep=8, moe_a2a_overlap=True) - base == pytest.approx(8 * max(h - d, 0.0), abs=1e-12)


HYBRID = dict(hidden=2688, heads=32, kv_heads=2, head_dim=128, ffn_hidden=1856, vocab=131072, seq_len=4096,
              gated_mlp=False, tied_embeddings=False, biases=False, dropout=False)
NANO_MOE = {"experts": 128, "top_k": 6, "ffn_hidden": 1856, "shared_experts": 2}


def test_hybrid_e_layer_share_and_no_attention() -> None:
    """A pattern of E layers only (the MoE block alone): no attention block (t_attn 0), and the slope of the wait in
    H is 6 x 0.4354, the expert path's forward over the count without attention."""
    wl = TransformerWorkload(name="e", layers=6, moe=NANO_MOE, **dict(HYBRID, hybrid={"pattern": "EEEEEE"}))
    s_a = min(FWD_LOW / (2713.622 - ATT_LOW), FWD_HIGH / (3981.332 - ATT_HIGH))
    bwd, attn = _pieces(wl, 6.0)
    assert attn == 0.0
    t_0 = _t_mb(wl, 1.0) - 6 * 1.0
    d = (_t_mb(wl, 0.0) - t_0) / 6
    d_a = d - bwd
    h_star, h_top = d_a / s_a, (d - d_a) / (1.0 - s_a)
    assert h_star < h_top
    h1, h2 = h_star + 0.3 * (h_top - h_star), h_star + 0.6 * (h_top - h_star)
    assert _t_mb(wl, h2) - _t_mb(wl, h1) == pytest.approx(6 * s_a * (h2 - h1), rel=1e-3)
    assert _t_mb(wl, h1) - _t_mb(wl, 0.0) == pytest.approx(6 * (s_a * h1 - d_a), rel=1e-3)
