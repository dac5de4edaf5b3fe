"""`calibrate runs`: a warning raised while pricing one run names its strategy and training fields as the runs file
writes them, flat under the run (specs/runs.py: any TrainingSpec or StrategySpec field by its own name), not as
``strategy.X`` / ``training.X`` (where predict's spec files nest them)."""
from __future__ import annotations

from pathlib import Path

import yaml

from scalemodel.specs import notices

#: on MI300X (review26a): an H100's FP8 core now has a measured rate, so fp8_attention is priced there
RUNS = [
    {"cluster": "mi300x-8", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4, "step_time": 1.0,
     "moe_flex_dispatcher": True},
    {"cluster": "mi300x-8", "model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 4, "step_time": 1.5,
     "precision": "fp8", "fp8_attention": True},
    {"cluster": "mi300x-8", "model": "gpt-1.7b", "gpus": 32, "global_batch": 128, "micro_batch": 4, "step_time": 2.0},
]


def test_run_warnings_name_the_flat_fields(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(yaml.safe_dump(RUNS))
    r = cli("calibrate", "runs", str(f))
    assert r.code == 0, r.err
    assert f"{f}: run 1 (line 1): moe_flex_dispatcher is not priced: the model has no MoE layers" in r.err
    assert "): fp8_attention = true is not priced" in r.err and f"{f}: run 2 (line " in r.err
    assert "strategy.moe_flex_dispatcher" not in r.err and "training.fp8_attention" not in r.err


def test_only_the_sections_made_flat() -> None:
    """notices.field_name writes a strategy or training field flat inside flat_fields (calibrate runs' block) and
    nested everywhere else; a model field, and a section not named, stay as they are."""
    assert notices.field_name("strategy.ep_dispatch_sms") == "strategy.ep_dispatch_sms"
    with notices.flat_fields("strategy", "training"):
        assert notices.field_name("strategy.ep_dispatch_sms") == "ep_dispatch_sms"
        assert notices.field_name("training.module_precision.mtp") == "module_precision.mtp"
        assert notices.field_name("model.mtp_shared") == "model.mtp_shared"
        assert notices.field_name("strategy") == "strategy"
    assert notices.field_name("training.moe_router_dtype") == "training.moe_router_dtype"
