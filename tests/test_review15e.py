"""Review of moetp (MoE layers' TP collectives) and smallfix15b (flex dispatch over tp_ep, HybridEP groups,
torchtitan etp default, non-UTF-8 names in JSON): each finding's test fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from scalemodel.choices import LayerImpl
from scalemodel.engine.job import grid_from_arrays

# ---------------------------------------------------------------------------------------------------------------
# 1. torchtitan's etp default (1 where ep > 1, specs.torchtitan_config._titan_etp) reached predict's grid only: plan
#    priced a torchtitan candidate at Megatron's etp = tp, and predict of that plan's own strategy (written etp: null,
#    read as torchtitan's etp 1) priced another step (nemotron-3-nano, 64 H100, tp 2 ep 8: 0.758 s planned, 0.575 s
#    predicted for the plan's top strategy)

_TITAN = ["-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "64", "--set", "strategy.layer_impl=torchtitan",
          "--set", "strategy.tp=2", "--set", "strategy.ep=8"]


def test_grid_from_arrays_gives_torchtitan_etp_1_where_ep_is_above_1() -> None:
    titan, te = int(LayerImpl.TORCHTITAN), int(LayerImpl.MEGATRON_TE)
    g = grid_from_arrays(gpus=64, dp=np.array([32, 32, 32, 32, 4]), tp=2, pp=1, micro_batch=1, global_batch=64,
                         ep=np.array([8, 1, 8, 8, 8]), etp=np.array([0, 0, 0, 2, 0]),
                         layer_impl=np.array([titan, titan, te, titan, te]))
    # torchtitan ep 8: 1; ep 1: the default kept (0 = tp); Megatron-Core: 0 (= tp); an etp given: kept
    assert list(np.broadcast_to(g.etp, (5,))) == [1, 0, 0, 2, 0]


def test_plan_prices_a_torchtitan_candidate_at_the_etp_predict_reads(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *_TITAN, "--json")
    assert r.code == 0, r.err
    top = json.loads(r.out)["ranked"][0]
    assert top["strategy"]["etp"] == 1, top["strategy"]
    f = tmp_path / "top.yaml"
    f.write_text(yaml.safe_dump(top["strategy"]))
    p = cli("predict", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "64", "--strategy", str(f), "--json")
    assert p.code == 0, p.err
    got = json.loads(p.out)
    assert got["strategy"]["etp"] == 1
    assert got["step_time_s"] == top["step_time_s"]


def test_a_megatron_plan_keeps_etp_tp(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *_TITAN[:6], "--set", "strategy.tp=2", "--set", "strategy.ep=8", "--json")
    assert r.code == 0, r.err
    assert all(p["strategy"]["etp"] is None for p in json.loads(r.out)["ranked"])


# ---------------------------------------------------------------------------------------------------------------
# 2. errors.shown reached --json, errors and warnings, but not the files scalemodel writes: calibrate nccl-tests
#    --out from a log whose name is not UTF-8 wrote "# Calibrated ... from <name>" and died in write_file's
#    encode("utf-8") with a UnicodeEncodeError traceback (a lone surrogate U+DCFF)


def test_an_overlay_from_a_non_utf8_log_name_is_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import os

    root = tmp_path / "logs"  # the test's own folder: a fixed /tmp path was shared by concurrent runs (xdist, CI)
    root.mkdir()
    log = os.fsdecode(os.fsencode(str(root)) + b"/bad\xff.log")
    Path(log).write_bytes((Path(__file__).parent / "data" / "nccl" / "synthetic_current.log").read_bytes())
    out = tmp_path / "overlay.yaml"
    r = cli("calibrate", "nccl-tests", log, "-c", "dgx-h100", "--out", str(out))
    assert r.code == 0, r.err
    text = out.read_text(encoding="utf-8")  # strict UTF-8
    assert f"{root}/bad\\xff.log" in text  # the byte, as --json and errors write it
    assert yaml.safe_load(text)  # still a YAML document
    # an ordinary name is written as it is (no escaping of what needs none)
    ok = root / "plain é.log"
    ok.write_bytes(Path(log).read_bytes())
    r = cli("calibrate", "nccl-tests", str(ok), "-c", "dgx-h100", "--out", str(out))
    assert r.code == 0, r.err
    assert f"{root}/plain é.log" in out.read_text(encoding="utf-8")
