"""The host floor of a synchronising MoE layer scaled by what the run graphs and by its local experts
(scalemodel/engine/host_floor.py; docs/model.md#host "CUDA graphs of part of the layer"):

    H_row = H x min_p count_p(n, attention) / count_p(16, True)

The functions take both; the validator applies the graph scope only, n held at the source's 16 (the per-expert
slope is refuted by held-out runs, tests/test_host_floor.py), so its rows get H or 0.7151 H.

Expected values are computed here by hand from host_overhead.yaml ``moe_layer_bottom_up``'s per-call costs and
counts: per MoE layer (forward + backward) attention 6 modules and 10 ops; the expert path 4 modules, 22 ops,
(8 + 10 n) C++ launches, 78 event calls and 24 n Python steps (n local experts)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.engine import host_floor
from scalemodel.engine.step import LAYER_FORWARD_HOST_SHARE, MOE_FORWARD_HOST_SHARE

H = 512 * 4096 / 8 / 9299 / (64 * 48)  # docs/model.md#host, 9.1766 ms

# the source: low 6 x 115 + 10 x 8.3 = 773 attention, 460 + 182.6 + 168 x 5 + 74.022 + 384 = 1940.622 expert path
SOURCE_LOW, SOURCE_HIGH = 773.0 + 1940.622, 975.0 + 3006.332  # 2713.622, 3981.332


def test_the_count_is_the_yaml_record() -> None:
    """The module's costs and counts are host_overhead.yaml's, at the source's 16 local experts."""
    doc = load_yaml(ROOT / "hardware" / "measurements" / "host_overhead.yaml")["moe_layer_bottom_up"]
    for k, c in doc["costs_us"].items():
        assert tuple(c["value"]) == pytest.approx(host_floor.CALL_COST_US[k], rel=1e-12)
    for p in doc["parts"]:
        calls = host_floor.CALLS[(p["part"], p["pass"])]
        for k, c in p["counts"].items():
            fixed, per = calls.get(k, (0, 0))
            assert fixed + per * 16 == c, (p["part"], p["pass"], k)
    assert float(host_floor.layer_host_count_us(16, True, 0)) == pytest.approx(SOURCE_LOW, rel=1e-12)
    assert float(host_floor.layer_host_count_us(16, True, 1)) == pytest.approx(SOURCE_HIGH, rel=1e-12)


def test_recompute_shares_agree_with_the_count() -> None:
    """step.py's r (docs/model.md#host-recompute) is the same count's forward share at the lower pricing."""
    low = {k: v[0] for k, v in host_floor.CALL_COST_US.items()}
    moe_fwd = sum((f + 16 * e) * low[k] for k, (f, e) in host_floor.CALLS[("moe", "fwd")].items())
    assert moe_fwd / SOURCE_LOW == pytest.approx(MOE_FORWARD_HOST_SHARE, abs=5e-5)
    high = {k: v[1] for k, v in host_floor.CALL_COST_US.items()}
    layer_fwd = sum((f + 16 * e) * high[k] for part in ("attention", "moe")
                    for k, (f, e) in host_floor.CALLS[(part, "fwd")].items())
    assert layer_fwd / SOURCE_HIGH == pytest.approx(LAYER_FORWARD_HOST_SHARE, abs=5e-5)


@pytest.mark.parametrize("n,attention,low,high", [
    # the source itself
    (16, True, SOURCE_LOW, SOURCE_HIGH),
    # 16 local experts, attention graphed (attn + moe_router + moe_preprocess): the expert path alone
    (16, False, 460 + 182.6 + 168 * 5 + 74.022 + 384, 560 + 297 + 168 * 10 + 85.332 + 384),
    # 4 local experts, eager (H100 Qwen3-235B, EP 32): 48 launches, 96 Python steps
    (4, True, 773 + 460 + 182.6 + 48 * 5 + 74.022 + 96, 975 + 560 + 297 + 48 * 10 + 85.332 + 96),
    # 8 local experts, eager (Qwen3-30B at EP 16)
    (8, True, 773 + 460 + 182.6 + 88 * 5 + 74.022 + 192, 975 + 560 + 297 + 88 * 10 + 85.332 + 192),
    # 64 local experts, no attention in the MoE layer (a hybrid E layer: Nemotron 3 Super, 512 experts over EP 8)
    (64, False, 460 + 182.6 + 648 * 5 + 74.022 + 1536, 560 + 297 + 648 * 10 + 85.332 + 1536),
])
def test_count_by_hand(n: int, attention: bool, low: float, high: float) -> None:
    assert float(host_floor.layer_host_count_us(n, attention, 0)) == pytest.approx(low, rel=1e-12)
    assert float(host_floor.layer_host_count_us(n, attention, 1)) == pytest.approx(high, rel=1e-12)
    want = min(low / SOURCE_LOW, high / SOURCE_HIGH)
    assert float(host_floor.host_floor_scale(n, attention)) == pytest.approx(want, rel=1e-12)
    assert float(host_floor.moe_layer_host_floor(H, n, attention)) == pytest.approx(H * want, rel=1e-12)


def test_hand_floors() -> None:
    """The figures docs/model.md#host quotes: 16 local experts with attention graphed 0.7151 H = 6.56 ms (low
    pricing: 1940.622 / 2713.622; the high gives 0.7551); 4 local experts eager 0.6263 H = 5.75 ms (high pricing:
    2493.332 / 3981.332; the low gives 0.6728); 64 local experts, no attention, 2.0241 H = 18.57 ms."""
    assert float(host_floor.host_floor_scale(16, False)) == pytest.approx(1940.622 / 2713.622, rel=1e-9)  # 0.715141
    assert float(host_floor.moe_layer_host_floor(H, 16, False)) * 1e3 == pytest.approx(6.5626, abs=1e-4)
    assert float(host_floor.host_floor_scale(4, True)) == pytest.approx(2493.332 / 3981.332, rel=1e-9)  # 0.626256
    assert float(host_floor.moe_layer_host_floor(H, 4, True)) * 1e3 == pytest.approx(5.7469, abs=1e-4)
    assert float(host_floor.host_floor_scale(64, False)) == pytest.approx(2.024093, abs=1e-6)
    assert float(host_floor.host_floor_scale(16, True)) == 1.0


def test_broadcasts_and_is_monotone() -> None:
    n = np.array([[1.0], [4.0], [16.0], [64.0]])
    s = host_floor.host_floor_scale(n, np.array([True, False]))
    assert s.shape == (4, 2)
    assert np.all(np.diff(s, axis=0) > 0)  # more local experts, more host work
    assert np.all(s[:, 1] < s[:, 0])  # attention graphed, less
    assert np.all(host_floor.moe_layer_host_floor(0.0, n, True) == 0.0)


def _validation():  # type: ignore[no-untyped-def]
    mod = script_module("validate_training")
    if not mod.NEW_CASES.is_file():
        pytest.skip("validation/training_cases.yaml not present")
    return mod, {c["id"]: c for c in load_yaml(mod.NEW_CASES)}


def test_h100_fp8_partial_graph_recipe_gets_the_expert_path_floor(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """mcrec26_h100_qwen3_30b_fp8blk (Megatron-LM 9c5258f109 examples/moe_recipes qwen3_30b/h100: HybridEP, dropless,
    EP 8 of 128 experts = 16 local, CUDA graphs of attn, moe_router and moe_preprocess) issues the expert path
    eagerly after the dispatcher's synchronisation: its floor is 0.7151 H = 6.56 ms, above the model's device time
    per layer pass, so it binds and slows the prediction (+45.0 % fast with no floor -> +18.5 %; +45.3 % floorless
    before linproj40 priced the attention projection's FP8 re-quantize, docs/model.md#proj-original-input, more device
    time under the floor; +45.7 / +18.7 % before
    nancheck37 priced the recipe's gradient NaN check (Megatron-LM's default, docs/model.md#nan-check: a norm over
    the gradient buffer and two host reads a bucket, outside the floor); +46.5 / +19.2 % before
    mlpt26 / nvlsshare26 charged NCCL's ring collectives 24 of Hopper's 132 SMs, not 16 (docs/model.md#contention);
    +48.4 / +20.6 % before round 24's jitter part (lock-stepped clocks, docs/model.md#jitter) and the word
    embedding's TP collective
    (docs/model.md#embedding-tp-comm); the floorless figure was +49.4 % before moeh100_23 priced each expert's GEMM
    rows in whole 128-row tiles
    (docs/model.md#expert-tile-padding), +45.9 % before h100cmp22 fitted h100-sxm's cuDNN backward to the
    FlashAttention-3 paper (a faster core under the floor, docs/model.md#h100-attention-backward), +57.6 % before
    blkfp8_21 priced the recipe as blockwise FP8 (its GEMMs at 0.812 of per-tensor, its
    casts, no amax reductions: more device time under the floor, docs/model.md#fp8-blockwise), +57.8 % before NCCL's
    LL caps (llhost18's host row, review18e's one-node GPU row: the LL line no longer wins collectives NCCL runs on
    LL128 or Simple, docs/model.md#nccl-ll-cap), +51.0 % before moesp17's MoE
    rows per GPU (permutes on the sequence-parallel shard, each dispatcher's own passes, docs/model.md#moe-rows:
    less device time under the floor), +53.8 % before HybridEP's routing-map all-gather was priced,
    docs/model.md#hybridep-preprocess, +52.7 % before the busiest EP rank's routing load,
    docs/model.md#moe-rank-imbalance, and +52.3 % before the recipe's fp32 router's TF32 backward GEMMs and casts,
    docs/model.md#router-dtype-compute; each adds device time under the floor)."""
    mod, cases = _validation()
    cid = "mcrec26_h100_qwen3_30b_fp8blk"
    floored = mod.predict_new_case(cases[cid])
    assert floored.strategy.moe_layer_host_s * 1e3 == pytest.approx(6.5626, abs=1e-4)
    assert any(n.startswith("host floor 6.56 ms per MoE layer") for n in floored.notes)
    del cases[cid]["framework"]["moe_host_sync"]  # the row's field (validation/README.md): no floor
    plain = mod.predict_new_case(cases[cid])
    assert plain.strategy.moe_layer_host_s == 0.0
    assert floored.predicted < plain.predicted  # throughput
    assert plain.speed_error == pytest.approx(0.450, abs=0.002)
    assert floored.speed_error == pytest.approx(0.185, abs=0.002)


def test_full_iteration_graphs_get_no_floor() -> None:
    """A whole-step graph sizes the experts by a fixed capacity, so no count is read back: no floor."""
    mod, cases = _validation()
    for cid in ("mcrec26_gb200_qwen3_30b_fp8mx_fullcg", "mb2608_gb200_qwen3_30b_fp8mx"):
        assert mod.predict_new_case(cases[cid]).strategy.moe_layer_host_s == 0.0
