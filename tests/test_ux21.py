"""Follow-ups of review ux21: scale's batch-efficiency key, batch efficiency within (0, 1], the bytes floor of
`calibrate runs`."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_calibrate_runs import RUNS, synthetic

import scalemodel.engine.calibrate_runs as calibrate_runs
from scalemodel import api
from scalemodel.cost import efficiency
from scalemodel.engine import planner
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.report.plan import render_plan
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.runs import read_runs

WEAK = ("scale", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "512,1536", "--global-batch", "768", "--tp", "4", "--pp",
        "4", "--zero", "2", "--sequence-parallel", "--micro-batch", "2", "--mode", "weak", "--set",
        "training.critical_batch=4096")


def test_scale_names_its_critical_batch_efficiency_batch_efficiency(cli: Any) -> None:
    """scale's point key `statistical_efficiency` held the critical-batch efficiency, plan's (and the point's own
    `sync` block's) the sync mode's staleness multiplier: one name, two quantities. scale's is now
    `batch_efficiency`, as plan's batch-searched rows name the same quantity; the point's sync block keeps the sync
    mode's. The CSV column follows the JSON."""
    doc = json.loads(cli(*WEAK, "--json").out)
    first, last = doc["points"]
    assert "statistical_efficiency" not in first and "statistical_efficiency" in first["sync"]
    assert (first["global_batch"], last["global_batch"]) == (768, 2304)
    # McCandlish et al. 2018 per-sequence efficiency against the first point's batch: (B_noise + B0) / (B_noise + B)
    assert last["batch_efficiency"] == pytest.approx((4096 + 768) / (4096 + 2304), rel=1e-12)
    rows = list(csv.DictReader(io.StringIO(cli(*WEAK, "--csv").out)))
    assert "batch_efficiency" in rows[0] and "statistical_efficiency" not in rows[0]
    assert float(rows[1]["batch_efficiency"]) == last["batch_efficiency"]


@given(batch=st.floats(1.0, 1e9), ratio=st.floats(1e-9, 1.0), b_noise=st.floats(1e-3, 1e12))
def test_batch_efficiency_is_in_zero_one_against_a_smaller_reference(batch: float, ratio: float,
                                                                     b_noise: float) -> None:
    """McCandlish et al. 2018 count a batch's examples against E_min, the B -> 0 limit, and Pollux's (B_noise + M0) /
    (B_noise + B) is taken at M >= M0 (adaptdl's GoodputFunction.evaluate asserts init_batch_size <= batch_size):
    relative to a batch no larger than B, so in (0, 1]. A reference above B (plan searched 1/8 of its default batch
    and gave such rows 'batch eff.' 250 %) is refused rather than returned above 1."""
    ref = batch * ratio
    e = float(efficiency.statistical_efficiency(batch, b_noise, ref_batch=ref))
    assert 0.0 < e <= 1.0
    assert e == pytest.approx((b_noise + ref) / (b_noise + batch), rel=1e-12)
    assert float(efficiency.statistical_efficiency(batch, b_noise, ref_batch=batch)) == 1.0
    assert float(efficiency.statistical_efficiency(batch, b_noise)) < 1.0
    with pytest.raises(InputError, match="ref_batch"):
        efficiency.statistical_efficiency(batch, b_noise, ref_batch=batch * 1.5)


def test_batch_searched_plan_rows_keep_batch_efficiency_within_one(capsys: pytest.CaptureFixture[str]) -> None:
    """plan's batch-searched time to train priced each row's batch against the default (one sequence per GPU) while
    it searched 1/8 of it up: GPT 1.7B at TP 8 on 64 A100s with B_noise 16 ranked batch 16 first at 'batch eff.'
    250 %. The reference is now the smallest batch searched, named in the JSON's search block with the budget
    restated at it (train_tokens at the default batch x (B_ref + B_noise) / (B_default + B_noise)), so each row's
    time to train still reads from its columns: reference tokens / (tokens/s x sync eff. x batch eff.)."""
    cl = load_cluster("dgx-a100", [])
    wl = load_workload("gpt-1.7b", [])
    bn, budget, default = 16.0, 1e9, 64
    res = planner.plan(cl, wl, default, TrainingSpec(train_tokens=budget, critical_batch=bn), top=6,
                       objective="time-to-train", constraints={"tp": 8, "pp": 1})
    doc = res.payload()
    assert doc["search"]["global_batches"] == [8, 16, 32, 64, 128, 256, 512]
    assert doc["search"]["reference_batch"] == 8
    ref_tokens = budget * (8 + bn) / (default + bn)  # 3e8: the same target, fewer tokens at the smaller batch
    assert doc["search"]["reference_tokens"] == pytest.approx(ref_tokens, rel=1e-12)
    assert any(r["strategy"]["global_batch"] < default for r in doc["ranked"])
    for row in doc["ranked"]:
        b = row["strategy"]["global_batch"]
        assert 0 < row["batch_efficiency"] <= 1.0
        assert row["batch_efficiency"] == pytest.approx((8 + bn) / (b + bn), rel=1e-12)
        hand = ref_tokens / (row["tokens_per_s"] * row["statistical_efficiency"] * row["batch_efficiency"])
        assert row["time_to_train_s"] == pytest.approx(hand, rel=1e-9)
        # the ranking's time to train is unchanged: train_tokens (B + B_noise) / (B_default + B_noise) tokens
        assert row["time_to_train_s"] == pytest.approx(
            budget * (b + bn) / (default + bn) / (row["tokens_per_s"] * row["statistical_efficiency"]), rel=1e-9)
    render_plan(res, as_json=False)
    out = " ".join(capsys.readouterr().out.split())
    assert "against the smallest batch searched, 8; time to train = 3e+08 tokens" in out
    assert all(f"{r['batch_efficiency']:.1%}" in out for r in doc["ranked"])  # 75.0 % at batch 16, not 250 %


@settings(max_examples=12)
@given(counts=st.lists(st.sampled_from([8, 16, 32, 64, 128]), min_size=1, max_size=4, unique=True),
       mode=st.sampled_from(["weak", "strong"]), b_noise=st.floats(1.0, 1e5))
def test_scale_batch_efficiency_never_exceeds_one(counts: list[int], mode: str, b_noise: float) -> None:
    """scale's batch efficiency is against the sweep's smallest batch: in (0, 1] at every point, 1 where the batch
    is that smallest one, and by hand (B_noise + B_min) / (B_noise + B) elsewhere."""
    gpus = sorted(counts)
    r = api.scale("dgx-a100", "gpt-1.7b", gpus=gpus, mode=mode, tp=8, micro_batch=1, global_batch=gpus[-1] // 8 * 2,
                  critical_batch=b_noise)
    assert [p.gpus for p in r.points] == gpus  # one point a count: an empty sweep passed the loop
    smallest = min(p.global_batch for p in r.points)
    for p in r.points:
        assert p.batch_efficiency is not None and 0.0 < p.batch_efficiency <= 1.0
        assert p.batch_efficiency == pytest.approx((b_noise + smallest) / (b_noise + p.global_batch), rel=1e-12)


def _runs(tmp_path: Path, rows: list[dict[str, Any]], cluster: str) -> Path:
    """A runs file of ``rows`` measured at the model's own step on ``cluster`` (no factor, no noise)."""
    return synthetic(tmp_path, rows, noise=0.0, cluster=cluster, scale=lambda job: job, overhead_s=0.0)


PCIE_RUNS = [
    {"name": "dp16", "model": "gpt-1.7b", "gpus": 16, "global_batch": 16, "micro_batch": 1},
    {"name": "dp8", "model": "gpt-1.7b", "gpus": 8, "global_batch": 16, "micro_batch": 2},
    {"name": "tp2", "model": "gpt-1.7b", "gpus": 16, "tp": 2, "global_batch": 16, "micro_batch": 1},
    {"name": "dp32", "model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 2},
]


def test_a_step_faster_than_its_gradients_over_the_slowest_tier_is_refused(tmp_path: Path, cli: Any) -> None:
    """GPT 1.7B on 16 GPUs of pcie-25gbe (8 per node, 25 Gbit/s a node: 3.90625e8 B/s per GPU) at DP 16 reduces
    P = 12 L h^2 + 13 L h + V h + 2048 h + 2 h = 12 x 24 x 2304^2 + 13 x 24 x 2304 + 51200 x 2304 + 2048 x 2304 (its
    learned positions) + 2 x 2304 = 1,652,230,656
    bf16 gradients a step; each node holds 8 of the 16 ranks and must send out at least half of its 2P bytes
    through its 8 uplinks: (1 - 8/16) x 2P / (8 x 3.90625e8) = 0.5287 s. Its FLOPs at peak take 0.074 s, so a
    0.3 s step passed `calibrate runs` (and was fitted as a faster network); now it is one error line naming the
    file, the run, the field and the floor, as the FLOPs floor's. The runs at the model's own steps pass."""
    params = 12 * 24 * 2304**2 + 13 * 24 * 2304 + 51200 * 2304 + 2048 * 2304 + 2 * 2304
    assert params == 1_652_230_656
    floor = (1 - 8 / 16) * 2 * params / (8 * 25e9 / 8 / 8)
    assert floor == pytest.approx(0.5287, abs=1e-4)
    path = _runs(tmp_path, PCIE_RUNS, "pcie-25gbe")
    rows = yaml.safe_load(path.read_text())
    assert rows[0]["step_time"] > floor  # the model's own step (3.3 s) is above it
    assert cli("calibrate", "runs", str(path), "--json").code == 0
    for field, value in (("step_time", 0.3), ("tokens_per_s", 16 * 2048 / 0.3)):
        bad = [dict(rows[0]), *rows[1:]]
        bad[0].pop("step_time")
        bad[0][field] = value
        path.write_text(yaml.safe_dump(bad, sort_keys=False))
        r = cli("calibrate", "runs", str(path), "--json")
        assert r.code == 2, r.err
        line = r.err.strip()
        assert line.startswith(f"error: {path}: run 1 (line 1): {field}: ") and "\n" not in line, line
        assert "faster than the physical floor" in line and "tcp tier" in line and f"{floor:.4g} s" in line, line
        assert "2 x" not in line and "Traceback" not in r.err


@pytest.mark.parametrize("cluster", ["dgx-a100", "pcie-25gbe", "dgx-h100"])
def test_the_models_own_steps_are_above_the_bytes_floor(cluster: str) -> None:
    """The floor is physics, not the model: every run the step model prices (overlap on or off, ZeRO, TP, PP, CP)
    is at or above it, so `calibrate runs` refuses no run the model itself would predict."""
    cl = load_cluster(cluster)
    rows = [*RUNS, {"name": "z3", "model": "gpt-1.7b", "gpus": 32, "global_batch": 64, "micro_batch": 2, "zero": 3},
            {"name": "cp2", "model": "gpt-1.7b", "gpus": 32, "cp": 2, "global_batch": 32, "micro_batch": 1}]
    path = Path(tempfile.mkdtemp()) / "runs.yaml"
    path.write_text(yaml.safe_dump([{"cluster": cluster, **r, "step_time": 1.0} for r in rows]))
    checked = 0
    for run in read_runs(path):
        job = build_job(cl, run.workload, run.training)
        grid = grid_from_strategy(run.strategy, run.training, run.gpus, job)
        floor = calibrate_runs._bytes_floor(job, grid, run.strategy.sync)
        if floor is not None:
            checked += 1
            assert calibrate_runs._step(job, grid, run.strategy.sync)[0] >= floor.seconds, (run.label, floor)
    assert checked >= 5
