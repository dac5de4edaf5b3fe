"""The host floor per interval between MoE layers (docs/model.md#host, step._host_wait): each interval from one MoE
layer's host synchronisation to the next takes max(D_i, H), D_i the device time of the MoE layer and of the layers
between it and the next, the other layers' host time priced 0.

The intervals are counted here by eye from the pattern or the dense prefix. The device times per layer of each kind
are read off the model's own step (the microbatch time of a model whose layers are all of that kind, less the rank
without layers, which a binding H gives: t_0 = t_mb(H = 1 s) - n_moe x 1 s), and the wait is put together by hand
from them; the homogeneous case is tests/test_host_floor.py (L_s max(H - d, 0), as before intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import mamba
from scalemodel.cost import transformer as tr
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate, moe_intervals
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # Megatron-Bridge 17a381f95 nemotron_3_nano.py


def test_nano_intervals_by_eye() -> None:
    """23 E layers; each is followed by one M, and 6 of those M by a '*' before the next E; the last E wraps round
    to the pattern's first M: 17 intervals E M, 6 intervals E M *."""
    assert mamba.layer_counts(NANO_PATTERN).moe_intervals == (((1, 0, 0), 17), ((1, 1, 0), 6))
    assert mamba.moe_intervals("MEM*E-") == (((1, 0, 1), 1), ((1, 1, 0), 1))  # E M * | E - (wrap) M
    assert mamba.moe_intervals("EEE") == (((0, 0, 0), 3),)
    assert mamba.moe_intervals("M*-") == ()


@pytest.mark.parametrize("L,first,every,expected", [
    (61, 3, 1, [({}, 57), ({"dense": 3}, 1)]),  # DeepSeek-V3: MoE at 4..61; 61 wraps round to 1, 2, 3 dense
    (48, 0, 1, [({}, 48)]),  # Qwen3-30B: every layer MoE
    (48, 0, 2, [({"dense": 1}, 24)]),  # MoE at 2, 4, .., 48: one dense between each (48 -> 1 by the wrap)
    (10, 1, 3, [({"dense": 2}, 2), ({"dense": 3}, 1)]),  # MoE at 4, 7, 10: 5 6 | 8 9 | 1 2 3
])
def test_dense_prefix_and_every_intervals_by_eye(L, first, every, expected) -> None:  # type: ignore[no-untyped-def]
    sh = tr.shape(layers=L, hidden=1024, heads=8, vocab=1000, moe_experts=8, moe_top_k=2, moe_every=every,
                  moe_first_dense=first)
    assert moe_intervals(sh) == expected
    assert sum(c * (1 + sum(b.values())) for b, c in expected) == L  # every layer in one interval


BASE = dict(hidden=2048, heads=32, kv_heads=4, head_dim=128, gated_mlp=True, vocab=151936, seq_len=4096,
            tied_embeddings=False)
MOE = {"experts": 128, "top_k": 8, "ffn_hidden": 768}  # Qwen3-30B-A3B's experts


def _t_mb(wl: TransformerWorkload, host_s: float) -> float:
    """One micro-batch on the single rank (pp 1, 8 GPUs, EP 8 with the all-to-all overlap, MBS 1, 8 micro-batches).
    The overlap leaves the intervals' max(D_i, H) alone: the expert path's issue after the synchronisation
    (step.expert_issue_shortfall, tests/test_host_issue_order.py) is 0 there, as Megatron-Core's combined 1F1B
    queues the other micro-batch's expert backward before it."""
    t = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), wl, t)
    st = StrategySpec(moe_layer_host_s=host_s, dp=8, ep=8 if wl.moe is not None else 1,
                      moe_a2a_overlap=wl.moe is not None)
    res = evaluate(job, grid_from_strategy(st, t, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


def _dense_prefix(ffn: int) -> tuple[float, float, float, float, TransformerWorkload]:
    """(t_0, d_moe, d_dense, d_mean) for 8 layers, the first 4 dense: MoE at 5, 6, 7, 8, so 3 intervals with
    nothing between and one (8 -> 1 2 3 4) with the 4 dense layers."""
    mixed = TransformerWorkload(name="mixed", layers=8, ffn_hidden=ffn, moe=dict(MOE, first_dense=4), **BASE)
    all_moe = TransformerWorkload(name="all-moe", layers=8, ffn_hidden=ffn, moe=MOE, **BASE)
    dense = TransformerWorkload(name="dense", layers=8, ffn_hidden=ffn, **BASE)
    t_0 = _t_mb(all_moe, 1.0) - 8 * 1.0  # every layer binds at 1 s
    # the mixed model binds in every interval at 1 s too: its 4 MoE layers x 1 s over the same rank without layers
    assert _t_mb(mixed, 1.0) - 4 * 1.0 == pytest.approx(t_0, rel=1e-9)
    return (t_0, (_t_mb(all_moe, 0.0) - t_0) / 8, (_t_mb(dense, 0.0) - t_0) / 8, (_t_mb(mixed, 0.0) - t_0) / 8,
            mixed)


def _dense_prefix_wait(h: float, d_moe: float, d_dense: float, d_mean: float) -> float:
    s = d_mean / (0.5 * d_moe + 0.5 * d_dense)  # the kinds scaled to the rank's own device time
    m, dd = s * d_moe, s * d_dense
    return 8 / 8 * (3 * max(h - m, 0.0) + max(h - m - 4 * dd, 0.0))


def test_mean_hides_a_wait_the_intervals_have() -> None:
    """Dense layers 4x wider than the experts' total (ffn 24576): each dense layer is slower than an MoE layer, so
    the mean layer exceeds an H between the two and the mean rule (8 x 4/8 x max(H - d_mean, 0)) prices nothing;
    the three intervals with nothing between their MoE layers wait H - d_moe each."""
    t_0, d_moe, d_dense, d_mean, mixed = _dense_prefix(24576)
    assert d_moe < d_mean < d_dense
    h = 0.5 * (d_moe + d_mean)
    want = _dense_prefix_wait(h, d_moe, d_dense, d_mean)
    assert 8 * 4 / 8 * max(h - d_mean, 0.0) == 0.0  # the mean rule
    assert want == pytest.approx(3 * (h - d_moe), rel=0.01) and want > 0
    assert _t_mb(mixed, h) - (t_0 + 8 * d_mean) == pytest.approx(want, rel=1e-6)


def test_mean_invents_a_wait_no_interval_has() -> None:
    """Dense layers as wide as the experts' total (ffn 6144): an MoE layer (router, permutation, 128 grouped
    experts) is slower than a dense one, so an H between the mean and the MoE layer binds under the mean rule
    (8 x 4/8 x (H - d_mean) > 0) and in no interval (each holds at least its MoE layer, above H)."""
    t_0, d_moe, d_dense, d_mean, mixed = _dense_prefix(6144)
    assert d_dense < d_mean < d_moe
    h = 0.5 * (d_mean + d_moe)
    assert 8 * 4 / 8 * (h - d_mean) > 1e-3  # the mean rule: milliseconds per micro-batch
    assert _dense_prefix_wait(h, d_moe, d_dense, d_mean) == 0.0
    assert _t_mb(mixed, h) == pytest.approx(t_0 + 8 * d_mean, rel=1e-12)


HYBRID = dict(hidden=2688, heads=32, kv_heads=2, head_dim=128, ffn_hidden=1856, vocab=131072, seq_len=4096,
              gated_mlp=False, tied_embeddings=False, biases=False, dropout=False)
MAMBA = {"state_dim": 128, "groups": 8, "head_dim": 64, "heads": 64}  # Nemotron 3 Nano's mixer
NANO_MOE = {"experts": 128, "top_k": 6, "ffn_hidden": 1856, "shared_experts": 2}


def _hybrid(pattern: str) -> TransformerWorkload:
    kw: dict = dict(HYBRID, hybrid={"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})})  # type: ignore[type-arg]
    if "E" in pattern:
        kw["moe"] = NANO_MOE
    return TransformerWorkload(name="hybrid", layers=len(pattern), **kw)


def test_hybrid_pattern_by_hand() -> None:
    """Nemotron 3 Nano's layers in the pattern E M E M * M: E at 1 and 3, intervals E M and E M * M (the last M
    wraps round to the first E). Per micro-batch wait = (6/6) [max(H - d_E - d_M, 0) + max(H - d_E - 2 d_M - d_A, 0)],
    against the mean rule's 6 x 2/6 x max(H - d_mean, 0)."""
    t_0 = _t_mb(_hybrid("EEEEEE"), 1.0) - 6 * 1.0
    assert _t_mb(_hybrid("EMEM*M"), 1.0) - 2 * 1.0 == pytest.approx(t_0, rel=1e-9)  # binds in both intervals
    d_e, d_m, d_a = ((_t_mb(_hybrid(p), 0.0) - t_0) / 6 for p in ("EEEEEE", "MMMMMM", "******"))
    t_dev = _t_mb(_hybrid("EMEM*M"), 0.0)
    d_mean = (t_dev - t_0) / 6
    s = d_mean / ((2 * d_e + 3 * d_m + d_a) / 6)
    assert s == pytest.approx(1.0, abs=0.01)  # the one-kind ranks add up to the mixed one
    e, m, a = s * d_e, s * d_m, s * d_a
    short, long_ = e + m, e + 2 * m + a
    assert d_mean < e < short < long_
    # H between the mean layer and the shorter interval: the mean rule waits, no interval does
    h = 0.5 * (d_mean + short)
    assert 2 * (h - d_mean) > 1e-3
    assert _t_mb(_hybrid("EMEM*M"), h) == pytest.approx(t_dev, rel=1e-12)
    # H between the two intervals: only E M waits
    h = 0.5 * (short + long_)
    assert _t_mb(_hybrid("EMEM*M"), h) - t_dev == pytest.approx(h - short, rel=1e-6)
    assert 2 * (h - d_mean) > 2 * (h - short)  # the mean rule's wait is larger
    # H above both: 2 H - (the intervals' device time = the rank's, 6 d_mean)
    h = 2 * long_
    assert _t_mb(_hybrid("EMEM*M"), h) - t_dev == pytest.approx(2 * h - 6 * d_mean, rel=1e-6)
