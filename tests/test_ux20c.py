"""Follow-ups of review ux20: efficiency column names, bands of infeasible points, the band's recorded fabric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalemodel import api
from scalemodel.engine import planner
from scalemodel.report.plan import render_plan
from scalemodel.specs import TrainingSpec, load_cluster, load_workload


def test_batch_searched_plan_reports_the_efficiency_its_time_to_train_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """A batch-searched time-to-train plan gave its bsp rows statistical_efficiency 1.0 and no column while their
    time to train included the critical-batch loss. Each row now gives batch_efficiency (B_ref + B_noise) /
    (B + B_noise) (McCandlish et al. 2018; B_ref the smallest batch searched since ux21), computed here by hand, and
    the time to train is train_tokens restated at B_ref over tokens/s x sync eff. x batch eff.; the table names the
    two columns apart."""
    cl = load_cluster("dgx-a100", [])
    wl = load_workload("gpt-1.7b", [])
    bn, budget, default = 4096.0, 1e9, 64
    res = planner.plan(cl, wl, default, TrainingSpec(train_tokens=budget, critical_batch=bn), top=12,
                       objective="time-to-train", constraints={"tp": 1, "pp": 1})
    doc = res.payload()
    assert {r["strategy"]["global_batch"] for r in doc["ranked"]} - {default}
    for row, p in zip(doc["ranked"], res.ranked, strict=True):
        b = p.strategy["global_batch"]
        # against the smallest batch searched, 8 (test_ux21: against the default, rows below it read above 100 %)
        assert row["batch_efficiency"] == pytest.approx((8 + bn) / (b + bn), rel=1e-12)
        hand = budget * (8 + bn) / (default + bn) / (row["tokens_per_s"] * row["statistical_efficiency"]
                                                     * row["batch_efficiency"])
        assert row["time_to_train_s"] == pytest.approx(hand, rel=1e-9)
    render_plan(res, as_json=False)
    out = capsys.readouterr().out
    assert "batch eff." in out and "stat. eff." not in out
    other = next(r for r in doc["ranked"] if r["strategy"]["global_batch"] != default)
    assert f"{other['batch_efficiency']:.1%}" in out
    fixed = planner.plan(cl, wl, default, TrainingSpec(train_tokens=budget, critical_batch=bn, global_batch=default),
                         top=2, objective="time-to-train", constraints={"tp": 1, "pp": 1})
    assert all("batch_efficiency" not in r for r in fixed.payload()["ranked"])


def test_efficiency_columns_say_which(cli: Any) -> None:
    """plan's column is the sync mode's efficiency, scale's the critical-batch one: both were 'stat. eff.'."""
    out = cli("plan", "-m", "gpt-1.7b", "-c", "pcie-25gbe", "-n", "128", "--sync-modes", "bsp,local:8", "-k", "2",
              "--constraint", "tp=1,pp=1,cp=1").out
    assert "sync eff." in out and "stat. eff." not in out
    out = cli("scale", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "512,1536", "--global-batch", "768", "--tp", "4",
              "--pp", "4", "--zero", "2", "--sequence-parallel", "--micro-batch", "2", "--mode", "weak").out
    assert "batch" in out and "stat." not in out
    doc = json.loads(cli("scale", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "512,1536", "--global-batch", "768",
                         "--tp", "4", "--pp", "4", "--zero", "2", "--sequence-parallel", "--micro-batch", "2",
                         "--mode", "weak", "--json").out)
    assert doc["points"][-1]["batch_efficiency"] < 1.0


CAPACITY = str(Path(__file__).resolve().parents[1] / "examples" / "capacity" / "gpt3-175b-dgx-h100.yaml")


def test_infeasible_points_carry_no_band(cli: Any, tmp_path: Path) -> None:
    """predict's JSON gives interval: null for an infeasible step (priced as if it ran); scale's and check's
    points and sweep's rows gave the band anyway. GPT 39B ZeRO-3 does not fit on 8 A100s and runs on 256."""
    doc = json.loads(cli("scale", "-m", "gpt-39b", "-c", "dgx-a100", "-n", "8,256", "--zero", "3", "--micro-batch",
                         "1", "--global-batch", "512", "--mode", "strong", "--json").out)
    bands = {p["gpus"]: (p["feasible"], p["interval"]) for p in doc["points"]}
    assert bands[8] == (False, None) and bands[256][0] and bands[256][1]["step_time_s"][0] > 0
    pred = json.loads(cli("predict", "-m", "gpt-39b", "-c", "dgx-a100", "-n", "8", "--zero", "3", "--micro-batch",
                          "1", "--global-batch", "512", "--json").out)
    assert not pred["feasible"] and pred["interval"] is None
    sweep = tmp_path / "s.yaml"
    sweep.write_text("models: [gpt-39b]\nclusters: [dgx-a100]\ngpus: [8, 256]\n"
                     "strategies: [{label: z3, zero: 3}]\ntraining: {global_batch: 512, micro_batch: 1}\n")
    rows = {r["gpus"]: r for r in json.loads(cli("sweep", str(sweep), "--json", "--workers", "1").out)["rows"]}
    assert rows[8]["status"] == "infeasible" and rows[8].get("step_time_s_low") is None
    assert rows[8].get("interval_family") is None
    assert rows[256]["status"] == "ok" and 0 < rows[256]["step_time_s_low"] <= rows[256]["step_time_s_high"]


def test_check_keeps_the_band_pessimistic_reads(cli: Any) -> None:
    """check's points: null for a point that does not fit, but the largest point's band under --pessimistic, the
    band its verdicts read (times x 1 + its speed error's high end), which is unchanged."""
    args = ("check", CAPACITY, "--set", "training.micro_batch=8", "--json")
    plain = json.loads(cli(*args).out)
    assert all(not p["fits"] and p["interval"] is None for p in plain["points"])
    slow = json.loads(cli(*args, "--pessimistic").out)
    last = slow["points"][-1]
    assert last["gpus"] == 1024  # the largest count, where the single-size assertions are checked
    assert last["interval"] is not None and all(p["interval"] is None for p in slow["points"][:-1])
    factor = max(1.0 + last["interval"]["speed_error_range"][1], 1.0)
    point = {v["name"]: v for v in plain["assertions"]}["max_step_time"]["value"]
    assert {v["name"]: v for v in slow["assertions"]}["max_step_time"]["value"] == pytest.approx(point * factor)


def _overlay_recording(tmp_path: Path, drop: tuple[str, ...] = ()) -> Path:
    """An overlay of dgx-a100 with a calibration block as `calibrate runs` writes it (4 runs, leave-one-out), the
    hardware the runs ran on recorded (less the fields in ``drop``: an overlay written before they were)."""
    rows = [{"run": f"r{i}", "gpus": 8 * 2**i, "parallelism": "TP/PP/DP", "model": "dense", "precision": "16-bit",
             "in_sample": 0.001 * i, "leave_one_out": 0.002 * i} for i in range(4)]
    hardware = {k: v for k, v in load_cluster("dgx-a100").hardware().items() if k not in drop}
    block = {"version": 2, "runs": 4, "factors": 2, "method": "leave-one-out", "reason": "", "residuals": rows,
             "hardware": hardware}
    out = tmp_path / "overlay.yaml"
    out.write_text(yaml.safe_dump({"kind": "cluster", "extends": "dgx-a100", "name": "mine-calibrated",
                                   "calibration": block}, sort_keys=False))
    return out


RUN = {"model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 1}
SHAPES = [
    ({"name": "ib-spine", "oversubscription": 2}, "tier ib-spine oversubscription 1:1 -> 2:1"),
    ({"name": "ib-leaf", "span": 400}, "tier ib-leaf span 160 GPUs -> 400 GPUs"),
    ({"name": "ib-leaf", "latency": "7us"}, "tier ib-leaf latency 3.5 us -> 7 us"),
]


@pytest.mark.parametrize(("tier", "said"), SHAPES)
def test_a_derived_overlay_with_another_fabric_shape_takes_the_published_band(
        tmp_path: Path, tier: dict[str, Any], said: str) -> None:
    """The recorded hardware held each tier's line rate only: a derived overlay with a 2:1 taper on the spine (or
    another span or latency; none of them a factor `calibrate runs` fits) kept the band of runs on a 1:1 fabric."""
    overlay = _overlay_recording(tmp_path)
    assert api.predict(str(overlay), **RUN).interval["source"] == "calibrated-leave-one-out"  # the control
    derived = tmp_path / "derived.yaml"
    derived.write_text(yaml.safe_dump({"extends": "overlay.yaml", "name": "tapered", "tiers": [tier]}))
    assert load_cluster(derived).calibration is not None  # inherited
    band = api.predict(str(derived), **RUN).interval
    assert band["source"] == "published" and f"({said})" in band["basis"], band["basis"]


def test_an_overlay_without_the_fabric_shape_loads_and_is_checked_on_what_it_records(tmp_path: Path) -> None:
    """An overlay written before the tiers' oversubscription, span and latency were recorded still loads, keeps its
    band under a taper it cannot check, and is still checked on a tier's line rate, which it records."""
    overlay = _overlay_recording(tmp_path, drop=("oversubscription", "span", "latency"))
    cal = load_cluster(overlay).calibration
    assert cal is not None and cal.hardware is not None and cal.hardware.oversubscription is None
    derived = tmp_path / "derived.yaml"
    derived.write_text(yaml.safe_dump({"extends": "overlay.yaml", "name": "tapered",
                                       "tiers": [{"name": "ib-spine", "oversubscription": 2}]}))
    assert api.predict(str(derived), **RUN).interval["source"] == "calibrated-leave-one-out"
    derived.write_text(yaml.safe_dump({"extends": "overlay.yaml", "name": "slow",
                                       "tiers": [{"name": "ib-leaf", "bandwidth": "100 Gbit/s"}]}))
    band = api.predict(str(derived), **RUN).interval
    assert band["source"] == "published" and "tier ib-leaf 25 GB/s -> 12.5 GB/s per GPU" in band["basis"]


def test_a_bad_recorded_taper_is_a_one_line_error(tmp_path: Path, cli: Any) -> None:
    overlay = _overlay_recording(tmp_path)
    doc = yaml.safe_load(overlay.read_text())
    doc["calibration"]["hardware"]["oversubscription"]["ib-spine"] = 0.5
    overlay.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = cli("predict", "-c", str(overlay), "-m", "gpt-1.7b", "-n", "32")
    assert res.code == 2 and res.err.startswith("error: ") and "oversubscription" in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
