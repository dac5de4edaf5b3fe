"""`scalemodel plan --strategy FILE`: the file's settings that are no search axis are pinned as ``--set strategy.X``
pins them (engine.planner.pins), ``--set`` replaces a file's value, the file's searched axes are said, a field plan
cannot pin is said; and a plan's JSON strategy, written back as a strategy file, prices the same step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import MIXTRAL_MEGATRON_LAUNCH, assert_mixtral_launch_pinned

#: The same launch as plan options: the file's axes as constraints (as README "plan pins the file's axes"), its
#: other settings as --set strategy.X, --overlap-grad-reduce left searched (overlap is a search axis). zero is given
#: as --set, which pins it as the constraint does: fp8_param_gather is validated with it, as in the file.
EQUIVALENT = ["--precision", "fp8",
              "--constraint", "tp=2,pp=2,micro_batch=1,moe_flex_dispatcher=true,moe_flex_backend=deepep",
              "--set", "strategy.zero=1", "--set", "strategy.megatron_ddp=true",
              "--set", "strategy.check_for_nan_in_grad=true",  # Megatron-LM's default (nancheck37)
              "--set", "strategy.check_for_nan_in_loss=true",  # the same argument's loss check (nanchunk38)
              "--set", "strategy.overlap_param_gather=true",
              "--set", "strategy.ep_dispatch_sms=24", "--set", "strategy.first_stage_layers=6",
              "--set", "strategy.fp8_param_gather=true", "--set", "strategy.tp_comm_overlap=true",
              # the launch has --num-experts and no --moe-permute-fusion: Megatron-Core's unfused permute
              "--set", "strategy.moe_permute_fusion=false"]
PLAN = ["plan", "-m", "mixtral-8x7b", "-n", "64", "--top", "3", "--json"]


def _ranked(cli, *args: str) -> tuple[list[dict], str]:  # type: ignore[no-untyped-def]
    r = cli(*PLAN, *args)
    assert r.code == 0, r.err
    return json.loads(r.out)["ranked"], r.err


def test_a_launch_scripts_settings_are_pinned_as_set_pins_them(cli, mixtral_launch: Path) -> None:  # type: ignore[no-untyped-def]
    """The file gives the same ranked plans (the whole JSON of each) as the --set pins it stands for; those fields
    were dropped with "not pinned as given" and the plans ranked at the defaults (ep_dispatch_sms None,
    megatron_ddp false, ...)."""
    from_file, err = _ranked(cli, "--strategy", str(mixtral_launch))
    from_set, _ = _ranked(cli, *EQUIVALENT)
    assert from_file == from_set
    assert from_file
    for p in from_file:  # the file's values, as written in MIXTRAL_MEGATRON_LAUNCH
        assert_mixtral_launch_pinned(p["strategy"])
    assert "not pinned as given" not in err
    # the one searched axis the file sets is said, by the file's own flag
    assert "plan searches overlap true (--overlap-grad-reduce): the file's value is not pinned" in err


def test_set_replaces_the_files_value(cli, mixtral_launch: Path) -> None:  # type: ignore[no-untyped-def]
    """--set on a field the file sets wins: a fixed setting (ep_dispatch_sms 24 -> 32) and an axis (tp 2 -> 4; the
    file's tp = 2 constraint was kept beside the --set pin and no candidate was left)."""
    ranked, _ = _ranked(cli, "--strategy", str(mixtral_launch), "--set", "strategy.ep_dispatch_sms=32",
                        "--set", "strategy.tp=4")
    assert ranked
    assert all(p["strategy"]["ep_dispatch_sms"] == 32 and p["strategy"]["tp"] == 4 for p in ranked)
    assert all(p["strategy"]["first_stage_layers"] == 6 for p in ranked)  # the file's other pins stay


def test_a_searched_axis_in_the_file_stays_searched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A DeepSpeed config's overlap_comm and reduce_bucket_size are search axes of plan (overlap, bucket_size): they
    are searched, as before, and the notice says so; the plans are those of the same config without them."""
    base = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}
    with_axes = json.loads(json.dumps(base))
    with_axes["zero_optimization"].update(overlap_comm=False, reduce_bucket_size=1e8)
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(with_axes))
    plain, _ = _ranked(cli, "--strategy", str(tmp_path / "a.json"))
    searched, err = _ranked(cli, "--strategy", str(tmp_path / "b.json"))
    assert searched == plain
    assert any(p["strategy"]["overlap"] for p in searched)  # overlap_comm false was not pinned
    # reduce_bucket_size 1e8 elements x 2 B (bf16 gradients) = 2e8 B
    assert ("plan searches bucket_size 200 MB (zero_optimization.reduce_bucket_size), overlap false "
            "(zero_optimization.overlap_comm): the file's values are not pinned") in err


def test_a_field_plan_refuses_on_set_is_said_from_a_file(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A field plan cannot pin is refused on --set ("plan cannot honour"); from a file it is said and the plans
    ranked at its default (false), as before the file's other fields were pinned. Every StrategySpec field is
    pinnable now (moe_shared_expert_overlap was the last, tests/test_plan_shared_expert_overlap.py), so the test
    takes that one out of the pinnable fields to keep the path checked."""
    from scalemodel.commands import plan as plan_cmd
    from scalemodel.engine import planner
    unpinned = tuple(k for k in planner.PIN_FIXED if k != "moe_shared_expert_overlap")
    monkeypatch.setattr(planner, "PIN_FIXED", unpinned)
    monkeypatch.setattr(plan_cmd, "PIN_FIXED", unpinned)
    f = tmp_path / "s.yaml"
    f.write_text("strategy: {moe_shared_expert_overlap: true, tp: 2}\n")
    r = cli(*PLAN, "--set", "strategy.moe_shared_expert_overlap=true")
    assert r.code == 2 and "plan cannot honour strategy.moe_shared_expert_overlap" in r.err
    ranked, err = _ranked(cli, "--strategy", str(f))
    assert f"{f}: plan cannot pin moe_shared_expert_overlap true (as --set strategy.K is refused)" in err
    assert ranked and all(not p["strategy"]["moe_shared_expert_overlap"] and p["strategy"]["tp"] == 2
                          for p in ranked)


def test_a_file_setting_plan_refuses_names_the_files_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The refusals of a --set pin apply to the file's: --fp8-param-gather on a bf16 run (Megatron-Core: fp8_param
    must be used together with fp8 mode), named by the flag the launch script wrote, exit 2."""
    f = tmp_path / "run.sh"
    f.write_text(MIXTRAL_MEGATRON_LAUNCH.replace(" --fp8-format hybrid", ""))
    r = cli(*PLAN, "--strategy", str(f))
    assert r.code == 2
    assert r.err.startswith(f"error: --strategy: {f}: --fp8-param-gather: fp8_param_gather casts the weights of "
                            "float8 linear layers, but precision is bf16")
    by_set = cli(*PLAN, "--set", "strategy.zero=1", "--set", "strategy.fp8_param_gather=true")
    assert by_set.code == 2 and "error: --set strategy.fp8_param_gather: fp8_param_gather casts" in by_set.err


def test_plans_strategy_round_trips_through_predict(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each ranked plan's JSON strategy written as a strategy YAML prices the same step in predict; a chosen bucket
    (5e8 B here) is in bucket_size, the field a strategy file reads; it was only in bucket_bytes, which a file does
    not read, and predict priced the framework's default bucket (7.240 s against the plan's 7.235 s). Every ranked
    plan is checked (the top one holds no bucket since the busiest EP rank is priced, docs/model.md#moe-rank-imbalance,
    which ranks ep 2 at ZeRO-2 first), and one at least carries a chosen bucket."""
    doc = json.loads(cli(*PLAN).out)
    assert any(p["strategy"]["bucket_size"] is not None for p in doc["ranked"])
    for i, top in enumerate(doc["ranked"]):
        assert top["strategy"]["bucket_size"] == top["strategy"]["bucket_bytes"]  # a chosen bucket, or none
        f = tmp_path / f"plan{i}.yaml"
        f.write_text(yaml.safe_dump(top["strategy"]))
        r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--strategy", str(f), "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["step_time_s"] == pytest.approx(top["step_time_s"], rel=1e-9)
