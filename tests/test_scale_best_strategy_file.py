"""`scalemodel scale --best --strategy FILE`: the file's settings that are no search axis are pinned at every point
as ``--set strategy.X`` pins them (commands.plan.pin_file_settings, as ``plan --strategy`` does), its axes as the
constraints they stand for; they were dropped and every point was searched at the defaults."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import assert_mixtral_launch_pinned

#: The same launch as scale options: the file's axes (tp 2, pp 2, the distributed optimizer's ZeRO-1, micro-batch 1,
#: flex / DeepEP) and its other settings, each as --set strategy.X; --overlap-grad-reduce is a search axis (not
#: pinned from the file either), and --fp8-format hybrid is --precision fp8.
EQUIVALENT = ["--precision", "fp8", "--tp", "2", "--pp", "2", "--micro-batch", "1",
              "--set", "strategy.zero=1", "--set", "strategy.moe_flex_dispatcher=true",
              "--set", "strategy.check_for_nan_in_grad=true",  # Megatron-LM's default (nancheck37)
              "--set", "strategy.check_for_nan_in_loss=true",  # the same argument's loss check (nanchunk38)
              "--set", "strategy.moe_flex_backend=deepep", "--set", "strategy.megatron_ddp=true",
              "--set", "strategy.overlap_param_gather=true",
              "--set", "strategy.ep_dispatch_sms=24", "--set", "strategy.first_stage_layers=6",
              "--set", "strategy.fp8_param_gather=true", "--set", "strategy.tp_comm_overlap=true",
              # the launch has --moe-* flags and no --moe-permute-fusion: Megatron-Core's unfused permute (permute17
              # set this in test_plan_strategy_file's twin only; review17f: this test failed on main)
              "--set", "strategy.moe_permute_fusion=false"]
SCALE = ["scale", "--best", "--json", "-c", "dgx-h100", "-m", "mixtral-8x7b", "--gpus", "32,64",
         "--global-batch", "256"]


def _points(cli, *args: str) -> tuple[list[dict], str]:  # type: ignore[no-untyped-def]
    r = cli(*SCALE, *args)
    assert r.code == 0, r.err
    return json.loads(r.out)["points"], r.err


def test_scale_best_pins_a_launch_files_settings_as_set_pins_them(cli, mixtral_launch: Path) -> None:  # type: ignore[no-untyped-def]
    """Each point's chosen strategy and its step (the whole JSON point) are those of the --set pins the file stands
    for, and carry the file's values as written in conftest.MIXTRAL_MEGATRON_LAUNCH (before, ep_dispatch_sms None,
    megatron_ddp false, ...)."""
    from_file, err = _points(cli, "--strategy", str(mixtral_launch))
    from_set, _ = _points(cli, *EQUIVALENT)
    assert len(from_file) == 2
    assert from_file == from_set
    for p in from_file:
        assert_mixtral_launch_pinned(p["strategy"])
    assert "not pinned as given" not in err
    assert "scale --best searches overlap true (--overlap-grad-reduce)" in err


def test_a_flag_replaces_the_files_value(cli, mixtral_launch: Path) -> None:  # type: ignore[no-untyped-def]
    """A flag or --set on a field the file sets wins, as --set does in plan: tp 2 -> 4 (the file's tp = 2 constraint
    beside the flag's pin left no candidate) and ep_dispatch_sms 24 -> 32; the file's other pins stay."""
    pts, _ = _points(cli, "--strategy", str(mixtral_launch), "--tp", "4", "--set", "strategy.ep_dispatch_sms=32")
    assert pts
    for p in pts:
        s = p["strategy"]
        assert (s["tp"], s["ep_dispatch_sms"], s["first_stage_layers"]) == (4, 32, 6)
