"""`calibrate runs`: a warning raised while pricing one run names its strategy and training fields as the runs file
writes them, flat under the run (specs/runs.py: any TrainingSpec or StrategySpec field by its own name), not as
``strategy.X`` / ``training.X`` (where predict's spec files nest them)."""
from __future__ import annotations

from pathlib import Path

import yaml

from scalemodel.engine.calibrate_runs import as_written_in_run

RUNS = [
    {"cluster": "dgx-h100", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4, "step_time": 1.0,
     "moe_flex_dispatcher": True},
    {"cluster": "dgx-h100", "model": "gpt-1.7b", "gpus": 16, "global_batch": 64, "micro_batch": 4, "step_time": 1.5,
     "precision": "fp8", "fp8_attention": True},
    {"cluster": "dgx-h100", "model": "gpt-1.7b", "gpus": 32, "global_batch": 128, "micro_batch": 4, "step_time": 2.0},
]


def test_run_warnings_name_the_flat_fields(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(yaml.safe_dump(RUNS))
    r = cli("calibrate", "runs", str(f))
    assert r.code == 0, r.err
    assert f"{f}: run 1 (line 1): moe_flex_dispatcher is not priced: the model has no MoE layers" in r.err
    assert "): fp8_attention = true is not priced" in r.err and f"{f}: run 2 (line " in r.err
    assert "strategy.moe_flex_dispatcher" not in r.err and "training.fp8_attention" not in r.err


def test_only_fields_of_the_specs_and_not_a_set_option() -> None:
    assert as_written_in_run("strategy.ep_dispatch_sms = 8 is not priced") == "ep_dispatch_sms = 8 is not priced"
    assert as_written_in_run("training.moe_router_dtype fp32") == "moe_router_dtype fp32"
    # the model's own fields, an unknown name, a --set option and a longer dotted name stay as they are
    for kept in ("model.mtp_shared is not priced", "strategy.nope x", "pass --set strategy.tp=2",
                 "x.strategy.tp y", "cluster.tiers"):
        assert as_written_in_run(kept) == kept
