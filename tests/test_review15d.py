"""review15d: the host floor by graph scope (scalemodel/engine/host_floor.py, scripts/validate_training.py
host_floor_s), what a row's note and the strategy field tell a reader about it.

Expected figures by hand from hardware/measurements/host_overhead.yaml moe_layer_bottom_up: the expert path alone at
16 local experts, low pricing, 4 x 115 + 22 x 8.3 + 168 x 5 + 78 x 0.949 + 384 x 1 = 1940.622 us of the source's
2713.622 us (attention 6 x 115 + 10 x 8.3 = 773 us more): 0.7151; times H = 512 x 4096 / 8 / 9299 / (64 x 48) s."""

from __future__ import annotations

import re

import pytest
from conftest import load_yaml, script_module

from scalemodel.specs.training import StrategySpec

H_S = 512 * 4096 / 8 / 9299 / (64 * 48)
SHARE = 1940.622 / (1940.622 + 773.0)


def test_field_tells_the_partial_graph_figure() -> None:
    """The moe_layer_host_s description gives a user the partial-graph floor: 0.7151 of H, 6.56 ms."""
    doc = StrategySpec.__annotations__["moe_layer_host_s"].__metadata__[-1].description
    assert f"{SHARE:.4f}" in doc and f"{SHARE * H_S * 1e3:.2f} ms" in doc
    assert f"{H_S * 1e3:.2f} ms" in doc


def _case(cid: str):  # type: ignore[no-untyped-def]
    mod = script_module("validate_training")
    if not mod.NEW_CASES.is_file():
        pytest.skip("validation/training_cases.yaml not present")
    cases = {c["id"]: c for c in load_yaml(mod.NEW_CASES)}
    return mod, mod.predict_new_case(cases[cid])


def test_note_says_the_local_experts_are_not_priced() -> None:
    """mcrec26_gb200_qwen3_235b_fp8mx: 128 experts over EP 64 = 2 local, attention graphed. Its floor is H x 0.7151
    (the local experts held at 16), and its note must not read as if the factor came from its 2 local experts."""
    _, r = _case("mcrec26_gb200_qwen3_235b_fp8mx")
    assert r.strategy.moe_layer_host_s == pytest.approx(H_S * SHARE, rel=1e-6)
    note = next(n for n in r.notes if n.startswith("host floor"))
    assert re.search(r"x 0\.7151: attention graphed, local experts held at the source's 16, the row's 2\)", note), note


def test_note_at_the_source_local_experts() -> None:
    """mcrec26_h100_qwen3_30b_fp8blk: 128 experts over EP 8 = 16 local, as H's source."""
    _, r = _case("mcrec26_h100_qwen3_30b_fp8blk")
    note = next(n for n in r.notes if n.startswith("host floor"))
    assert "x 0.7151: attention graphed, 16 local experts, as the source)" in note, note
