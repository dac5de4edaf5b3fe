"""review26f: fuzz26's backup-worker bound and NumPy spec values, checked against what they claim.

backup:B runs B data-parallel replicas of tp x pp x cp GPUs beside the N replicas whose gradients an update takes
(Chen et al. 2016, "Revisiting distributed synchronous SGD", §3: N + b workers; cost/sync.py prices N = dp). predict
refuses N GPUs + B x tp pp cp beyond the cluster (engine.job.check_backup_workers); plan searched every candidate
of the space whenever N + B GPUs fitted, so it ranked layouts predict then refuses."""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import accepted, no_hang  # noqa: F401 (no_hang: autouse)

# 9 nodes of dgx-h100 (8 GPUs each): 72 GPUs, 8 beyond the 64 a plan runs on
SMALL = ("-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--set", "cluster.max_gpus=72", "--json")


def test_plan_counts_only_the_layouts_whose_backup_replicas_fit(cli) -> None:  # type: ignore[no-untyped-def]
    """backup:8 with 8 GPUs to spare: only tp = pp = cp = 1 leaves room for 8 replicas (8 x 1 GPU), so the space is
    the one bsp has with tp, pp and cp pinned to 1 (counted by the constraint path, not the sync mask)."""
    backup = accepted(cli, "plan", *SMALL, "--sync-modes", "backup:8", "--top", "20")
    pinned = accepted(cli, "plan", *SMALL, "--constraint", "tp=1,pp=1,cp=1", "--top", "1")
    assert backup["candidates_evaluated"] == pinned["candidates_evaluated"] == 1296
    assert backup["feasible"] == pinned["feasible"]
    for row in backup["ranked"]:
        st = row["strategy"]
        assert (st["tp"], st["pp"], st["cp"]) == (1, 1, 1), st


@pytest.mark.parametrize("backup", [2, 4])
def test_plan_ranks_only_layouts_predict_runs(cli, backup: int) -> None:  # type: ignore[no-untyped-def]
    """Every ranked candidate's B replicas fit the 8 spare GPUs (B x tp pp cp <= 8), and predict runs it."""
    doc = accepted(cli, "plan", *SMALL, "--sync-modes", f"bsp,backup:{backup}", "--top", "30")
    ranked = [r["strategy"] for r in doc["ranked"] if r["strategy"]["sync"] != "bsp"]
    assert ranked
    for st in ranked:
        assert 64 + backup * st["tp"] * st["pp"] * st["cp"] <= 72, st
    st = ranked[0]
    one = accepted(cli, "predict", *SMALL, "--tp", str(st["tp"]), "--pp", str(st["pp"]), "--cp", str(st["cp"]),
                   "--sync", f"backup:{backup}")
    assert one["feasible"]


PRICED = ("--set", "cluster.price_per_gpu_hour=3.6USD/h", "--set", "training.train_tokens=1e9")  # 0.001 USD/GPU-s


def test_predict_charges_the_backup_replicas(cli) -> None:  # type: ignore[no-untyped-def]
    """backup:4 at tp 2 holds 64 + 4 x 2 = 72 GPUs (Chen et al. 2016: N + b machines run; cost/sync.py
    workers_total): the cost is the time to train x 72 x 0.001 USD/s, not x 64 (the 8 backup GPUs were free)."""
    doc = accepted(cli, "predict", *SMALL, *PRICED, "--tp", "2", "--sync", "backup:4")
    assert doc["cost_usd"] == pytest.approx(doc["time_to_train_s"] * 72 * 0.001, rel=1e-12)
    bsp = accepted(cli, "predict", *SMALL, *PRICED, "--tp", "2")
    assert bsp["cost_usd"] == pytest.approx(bsp["time_to_train_s"] * 64 * 0.001, rel=1e-12)


def test_plan_by_cost_charges_the_backup_replicas(cli) -> None:  # type: ignore[no-untyped-def]
    """Under --objective cost every ranked backup:B candidate costs its time to train x (N + B x tp pp cp) GPUs,
    and the ranking follows those costs."""
    doc = accepted(cli, "plan", *SMALL, *PRICED, "--sync-modes", "bsp,backup:2", "--objective", "cost",
                   "--top", "10")
    costs = []
    for row in doc["ranked"]:
        st = row["strategy"]
        held = 64 + (2 * st["tp"] * st["pp"] * st["cp"] if st["sync"] == "backup:2" else 0)
        assert row["cost_usd"] == pytest.approx(row["time_to_train_s"] * held * 0.001, rel=1e-12), st
        costs.append(row["cost_usd"])
    assert costs == sorted(costs)


def test_check_max_cost_charges_the_backup_replicas(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """check's max_cost_usd at the largest count: its time to train x (16 + 2 x tp 2) GPUs x 2 USD/h, as
    predict's cost_usd (time to train from predict at the same point, the cost by hand)."""
    f = tmp_path / "s.yaml"
    f.write_text("kind: scenario\nname: t\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16]\nmode: weak\n"
                 "training: {micro_batch: 1, train_tokens: 1B}\nstrategy: {tp: 2, sync: 'backup:2'}\n"
                 "assertions:\n  max_cost_usd: 1e9\n")
    res = cli("check", str(f), "--set", "cluster.price_per_gpu_hour=2 USD/h", "--json")
    assert res.code == 0, res.err
    (a,) = [a for a in json.loads(res.out)["assertions"] if a["name"] == "max_cost_usd"]
    one = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--tp", "2", "--sync",
                   "backup:2", "--micro-batch", "1", "--global-batch", "8", "--set", "training.train_tokens=1B",
                   "--json")
    assert a["value"] == pytest.approx(one["time_to_train_s"] * 20 * 2.0 / 3600, rel=1e-9)


def test_plan_says_why_no_layout_takes_the_backup_replicas(cli) -> None:  # type: ignore[no-untyped-def]
    """tp 8 pinned, backup:2: 2 x 8 GPUs beside the 64, 8 spare: no candidate, and the refusal says it is the backup
    replicas, not the constraint alone (tp 8 splits 64 GPUs: bsp has candidates)."""
    assert accepted(cli, "plan", *SMALL, "--constraint", "tp=8", "--top", "1")["candidates_evaluated"] > 0
    doc = accepted(cli, "plan", *SMALL, "--constraint", "tp=8", "--sync-modes", "backup:2")
    assert doc["candidates_evaluated"] == 0
    assert doc["why"].endswith("meets what was asked (--constraint tp=8): backup:2 runs 2 replicas of tp x pp x cp "
                               "GPUs beside the 64 GPUs, 8 to spare: no split has tp x pp x cp <= 4."), doc["why"]
