"""The host time of a recomputed forward (docs/model.md#host, step.recomputed_host_share): selective recompute of
moe re-runs MoELayer.forward's checkpointed ``custom_forward`` in the backward, and with it the dropless dispatcher's
device-to-host synchronisation (Megatron-LM core_v0.15.0 = 0d7e02bd26 moe_layer.py lines 272-292,
tensor_parallel/random.py ``CheckpointFunction.backward`` line 463, token_dispatcher.py lines 471, 583, 859; HybridEP
at d98e8a64dd token_dispatcher.py lines 1202-1207, fused_a2a.py lines 415-417); full recompute re-runs every
recomputed layer's forward the same way. Each MoE layer's interval then carries the recomputed forward's host work
too: H (1 + r), against the interval's device time, which holds the recomputed forward's device time.

r is worked out here from the bottom-up count's own numbers (hardware/measurements/host_overhead.yaml), and the
model's share is read back from its step only through the slope of the micro-batch time in H where every interval
binds (t_mb = t_0 + L_s (1 + r) H, so dt_mb / dH = L_s (1 + r)), not from the implementation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_yaml

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import LAYER_FORWARD_HOST_SHARE, MOE_FORWARD_HOST_SHARE, evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

HOST = Path(__file__).resolve().parents[1] / "hardware" / "measurements" / "host_overhead.yaml"

# 8 Qwen3-30B-A3B-type layers (every layer an MoE layer: one interval per layer)
QWEN = TransformerWorkload(name="qwen3-8l", layers=8, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                           ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                           moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def _t_mb(host_s: float, **strategy) -> float:  # type: ignore[no-untyped-def]
    """One micro-batch on the single rank (pp 1, 8 GPUs, EP 8, MBS 1, 8 micro-batches)."""
    t = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), QWEN, t)
    st = StrategySpec(moe_layer_host_s=host_s, dp=8, ep=8, **strategy)
    res = evaluate(job, grid_from_strategy(st, t, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


def test_shares_from_the_bottom_up_count_by_hand() -> None:
    """The count's MoE-block forward and whole-layer forward over its total, at the low and the high per-call costs;
    the model takes the lower of the two pricings for each (docs/model.md#host: the floor prices the lower end)."""
    doc = load_yaml(HOST)["moe_layer_bottom_up"]
    costs = doc["costs_us"]
    parts = {(p["part"], p["pass"]): p["counts"] for p in doc["parts"]}

    def us(part: str, pas: str, i: int) -> float:
        return sum(c * costs[k]["value"][i] for k, c in parts[(part, pas)].items())

    total = [sum(us(pt, ps, i) for pt, ps in parts) for i in (0, 1)]
    # by hand: low 2 x 115 + 11 x 8.3 + 66 x 5 + 26 x 0.949 + 192 = 867.974 of 2713.622 us (attention 773,
    # the MoE backward 1072.648); high 1308.944 of 3981.332 us
    assert us("moe", "fwd", 0) == pytest.approx(230 + 91.3 + 330 + 24.674 + 192, abs=1e-9)
    assert total[0] == pytest.approx(2713.622, abs=1e-3) and total[1] == pytest.approx(3981.332, abs=1e-3)
    moe_fwd = [us("moe", "fwd", i) / total[i] for i in (0, 1)]
    layer_fwd = [(us("moe", "fwd", i) + us("attention", "fwd", i)) / total[i] for i in (0, 1)]
    assert moe_fwd == pytest.approx([0.31986, 0.32877], abs=1e-5)
    assert layer_fwd == pytest.approx([0.46229, 0.45122], abs=1e-5)
    assert MOE_FORWARD_HOST_SHARE == pytest.approx(min(moe_fwd), abs=5e-5)
    assert LAYER_FORWARD_HOST_SHARE == pytest.approx(min(layer_fwd), abs=5e-5)


def test_moe_recompute_adds_its_forward_share_where_the_host_binds() -> None:
    """H = 1 s and 2 s bind in every interval: dt_mb / dH = L (1 + 0.3199) with moe recomputed, L without."""
    base = dict(recompute="selective", recompute_modules="moe_act")
    moe = dict(recompute="selective", recompute_modules="moe_act,moe")
    assert (_t_mb(2.0, **base) - _t_mb(1.0, **base)) / 8 == pytest.approx(1.0, rel=1e-9)
    assert (_t_mb(2.0, **moe) - _t_mb(1.0, **moe)) / 8 == pytest.approx(1.3199, rel=1e-9)


def test_recomputed_host_hides_under_the_interval_with_its_recompute() -> None:
    """The recomputed forward's host work hides under the interval's device time, the recomputed forward's device
    time included: with d_rec the MoE layer's device time with moe recomputed (read off the step with H = 0 and the
    rank without layers t_0 = t_mb(1 s) - 8 x 1 s, both without moe recomputed, where nothing else differs), an H
    with H < d_rec < 1.3199 H waits 8 (1.3199 H - d_rec) per micro-batch; without the recompute the same H waits
    8 max(H - d, 0), d the layer's device time without it (below d_rec)."""
    base = dict(recompute="selective", recompute_modules="moe_act")
    moe = dict(recompute="selective", recompute_modules="moe_act,moe")
    t_0 = _t_mb(1.0, **base) - 8 * 1.0
    d = (_t_mb(0.0, **base) - t_0) / 8
    d_rec = (_t_mb(0.0, **moe) - t_0) / 8
    assert d < d_rec
    h = d_rec / 1.15  # 1.3199 h > d_rec > h
    assert h < d_rec < 1.3199 * h
    assert _t_mb(h, **moe) - _t_mb(0.0, **moe) == pytest.approx(8 * (1.3199 * h - d_rec), rel=1e-6)
    assert _t_mb(h, **base) - _t_mb(0.0, **base) == pytest.approx(8 * max(h - d, 0.0), abs=1e-9)


@pytest.mark.parametrize("n_rec", [2, 8])
def test_full_recompute_adds_the_layer_forward_share_pro_rata(n_rec: int) -> None:
    """Full recompute of the first N of the 8 layers (Megatron-LM --recompute-method block): N of the rank's MoE
    layers run their whole forward again, 0.4512 H each, spread over the 8 intervals as a rank's per-layer terms
    are: dt_mb / dH = 8 + 0.4512 N."""
    full = dict(recompute="full", recompute_method="block", recompute_layers=n_rec)
    assert (_t_mb(2.0, **full) - _t_mb(1.0, **full)) == pytest.approx(8 + 0.4512 * n_rec, rel=1e-9)


def test_no_recompute_and_core_attn_add_nothing() -> None:
    """The attention core's recompute (the default selective module) re-runs no MoE block: no host time added."""
    for st in (dict(recompute="none"), dict(recompute="selective")):
        assert (_t_mb(2.0, **st) - _t_mb(1.0, **st)) / 8 == pytest.approx(1.0, rel=1e-9)


def _hybrid_t_mb(host_s: float, **strategy) -> float:  # type: ignore[no-untyped-def]
    """Nemotron 3 Nano (52 layers, 23 of them MoE layers `E`: 23 intervals), one rank (pp 1, EP 8, MBS 1)."""
    from scalemodel.commands.common import build_specs
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="nemotron-3-nano", sets=[],
                                 training={"precision": "bf16", "global_batch": 64, "micro_batch": 1},
                                 strategy={"moe_layer_host_s": host_s, "dp": 8, "ep": 8, **strategy})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    assert job.shape.hybrid is not None and int(job.shape.hybrid.moe) == 23
    res = evaluate(job, grid_from_strategy(st, tr, 8, job))
    return float(np.asarray(res.extras["microbatch_time"]).reshape(-1)[0])


@pytest.mark.parametrize("strategy, share", [
    (dict(recompute="none"), 0.0),
    # full recompute of every layer: each E layer's recomputed forward is its MoE block's (the pattern's MoE layer
    # holds no attention; hybrid_layer_specs.py MoETransformerLayer), 0.3199 H, not the attention + MoE layer's 0.4512
    (dict(recompute="full"), 0.3199),
])
def test_hybrid_full_recompute_adds_the_moe_block_forward_share(strategy: dict, share: float) -> None:  # type: ignore[type-arg]
    """H = 1 s and 2 s bind in all 23 intervals: dt_mb / dH = 23 (1 + r)."""
    assert _hybrid_t_mb(2.0, **strategy) - _hybrid_t_mb(1.0, **strategy) == pytest.approx(23 * (1 + share),
                                                                                        rel=1e-9)
