"""Follow-ups of review ux20: efficiency column names, bands of infeasible points, the band's recorded fabric."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scalemodel.engine import planner
from scalemodel.report.plan import render_plan
from scalemodel.specs import TrainingSpec, load_cluster, load_workload


def test_batch_searched_plan_reports_the_efficiency_its_time_to_train_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """A batch-searched time-to-train plan gave its bsp rows statistical_efficiency 1.0 and no column while their
    time to train included the critical-batch loss. Each row now gives batch_efficiency (B_default + B_noise) /
    (B + B_noise) (McCandlish et al. 2018), computed here by hand, and the time to train is train_tokens over
    tokens/s x sync eff. x batch eff.; the table names the two columns apart."""
    cl = load_cluster("dgx-a100", [])
    wl = load_workload("gpt-1.7b", [])
    bn, budget, default = 4096.0, 1e9, 64
    res = planner.plan(cl, wl, default, TrainingSpec(train_tokens=budget, critical_batch=bn), top=12,
                       objective="time-to-train", constraints={"tp": 1, "pp": 1})
    doc = res.payload()
    assert {r["strategy"]["global_batch"] for r in doc["ranked"]} - {default}
    for row, p in zip(doc["ranked"], res.ranked, strict=True):
        b = p.strategy["global_batch"]
        assert row["batch_efficiency"] == pytest.approx((default + bn) / (b + bn), rel=1e-12)
        hand = budget / (row["tokens_per_s"] * row["statistical_efficiency"] * row["batch_efficiency"])
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
    assert doc["points"][-1]["statistical_efficiency"] < 1.0
