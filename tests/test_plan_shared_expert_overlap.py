"""plan pins strategy.moe_shared_expert_overlap (--set, or a strategy file), as predict takes it: every ranked plan
carries it and prices it; Megatron-Core's own refusals beside it (moe_a2a_overlap: TransformerConfig.__post_init__,
NVIDIA/Megatron-LM@d98e8a64dd transformer_config.py lines 3039-3041) hold the search, as predict refuses them."""
from __future__ import annotations

import json

import pytest
import yaml

ARGS = ["plan", "-m", "nemotron-3-nano", "-n", "64", "--top", "3", "--json", "--constraint", "ep=8"]


def test_set_pins_it(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli(*ARGS, "--set", "strategy.moe_shared_expert_overlap=true")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(p["strategy"]["moe_shared_expert_overlap"] for p in ranked)
    off = json.loads(cli(*ARGS).out)["ranked"]
    assert not any(p["strategy"]["moe_shared_expert_overlap"] for p in off)


def test_strategy_file_pins_it_and_predict_agrees(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("moe_shared_expert_overlap: true\n")
    r = cli(*ARGS, "--strategy", str(f))
    assert r.code == 0, r.err
    best = json.loads(r.out)["ranked"][0]
    assert best["strategy"]["moe_shared_expert_overlap"] is True
    back = tmp_path / "best.yaml"
    back.write_text(yaml.safe_dump(best["strategy"]))
    p = cli("predict", "-m", "nemotron-3-nano", "-n", "64", "--strategy", str(back), "--json")
    assert p.code == 0, p.err
    assert json.loads(p.out)["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_with_a2a_overlap_pinned_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli(*ARGS, "--set", "strategy.moe_shared_expert_overlap=true", "--constraint", "moe_a2a_overlap=true")
    assert r.code == 2 and "moe_a2a_overlap" in r.err and "Traceback" not in r.err


def test_the_dispatch_search_leaves_out_the_a2a_overlap(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli(*ARGS, "--set", "strategy.moe_shared_expert_overlap=true", "--allow", "moe-dispatch")
    assert r.code == 0, r.err
    assert not any(p["strategy"]["moe_a2a_overlap"] for p in json.loads(r.out)["ranked"])


def test_on_a_dense_model_it_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "-m", "llama3-8b", "-n", "8", "--top", "1", "--json", "--set",
            "strategy.moe_shared_expert_overlap=true")
    assert r.code == 0, r.err
    assert "strategy.moe_shared_expert_overlap is not priced: the model has no MoE layers" in r.err
