"""Follow-ups of review ux21: scale's batch-efficiency key, batch efficiency within (0, 1], the bytes floor of
`calibrate runs`."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel import api
from scalemodel.cost import efficiency
from scalemodel.engine import planner
from scalemodel.errors import InputError
from scalemodel.report.plan import render_plan
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

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
    smallest = min(p.global_batch for p in r.points)
    for p in r.points:
        assert p.batch_efficiency is not None and 0.0 < p.batch_efficiency <= 1.0
        assert p.batch_efficiency == pytest.approx((b_noise + smallest) / (b_noise + p.global_batch), rel=1e-12)
