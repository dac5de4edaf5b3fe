"""Review of the hybridseg and planfile merges (round 15f): each test fails without the fix beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

PLAN = ["plan", "-m", "mixtral-8x7b", "-n", "64", "--top", "1", "--json"]


def test_plan_strategy_round_trip_keeps_a_pinned_dispatch_overhead(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A plan's JSON strategy, written as a strategy YAML, prices the same step in predict (README): the dispatch
    overhead was written only as ``dispatch_overhead_s``, a key a strategy file does not read ("scalemodel settings
    not used"), so predict priced dynamic assignment at the default overhead (Ray's, balance.py) instead of the
    pinned 10 ms: 7.598 s against the plan's 7.746 s."""
    doc = json.loads(cli(*PLAN, "--allow", "dynamic-assignment", "--set", "strategy.assignment=dynamic",
                         "--set", "strategy.dispatch_overhead=0.01").out)
    top = doc["ranked"][0]
    assert top["strategy"]["assignment"] == "dynamic" and top["strategy"]["dispatch_overhead"] == 0.01
    f = tmp_path / "top.yaml"
    f.write_text(yaml.safe_dump(top["strategy"]))
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert "dispatch_overhead" not in r.err.split("not used:", 1)[-1].replace("dispatch_overhead_s", "")
    assert json.loads(r.out)["step_time_s"] == pytest.approx(top["step_time_s"], rel=1e-9)


BASE = dict(kind="transformer", name="segs", hidden=2048, heads=16, kv_heads=4, ffn_hidden=8192, vocab=32000,
            seq_len=4096, gated_mlp=True, dropout=False, moe={"experts": 8, "top_k": 2, "ffn_hidden": 1024})


def _segmented(pattern: str, **kw):  # type: ignore[no-untyped-def]
    import scalemodel
    model = dict(BASE, layers=len(pattern.replace("|", "")), hybrid={"pattern": pattern})
    return scalemodel.predict("dgx-h100", model, 24, global_batch=48, micro_batch=1, **kw)


def test_a_light_middle_segment_shortens_the_1f1b_bubble() -> None:
    """pp 3, 1F1B: rank 1 (the one middle rank) holds the light segment '*-' behind a heavy rank 0 ('*E*E*E'). Every
    path of the 1F1B schedule through any rank includes rank 1's forward and backward (the round trip downstream of
    rank 0, the forwards and backwards before rank 2), so a lighter rank 1 shortens the pipeline; the pace (rank 0)
    and the last rank are the same in both. The middle class was the busiest rank but the last (rank 0), so the
    light rank 1 was priced as rank 0 and both bubbles were equal (0.013863 s)."""
    light, heavy = _segmented("*E*E*E|*-|*-*-", pp=3), _segmented("*E*E*E|*E*E*E|*-*-", pp=3)
    assert light.feasible and heavy.feasible
    assert light.breakdown_s["compute"] == pytest.approx(heavy.breakdown_s["compute"], rel=1e-12)  # the same pace
    assert light.breakdown_s["bubble"] < heavy.breakdown_s["bubble"] * (1 - 1e-3)
