"""Review of ux20's answer fixes: what they left wrong (each test says what was wrong)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from scalemodel.report.explain import TIE
from scalemodel.units import format_quantity, parse_quantity


def test_a_family_is_a_near_tie_at_the_runner_ups_bound(cli: Any) -> None:
    """A family's best plan 0.31 % behind the winner was called 'a near tie (0.31% slower)' (a bound of 10 x TIE)
    while a runner-up 0.3 % behind is 'beaten by 0.3%' (TIE, 0.05 %): the same gap read as a tie or a loss by which
    sentence held it. The gap is the ranked rows' step times here. Scenario: Llama 3 70B on 128 H200s at 256
    sequences, whose best DP+TP+PP plan ranks #4 at 0.32 % (until review36 priced DeepSpeed ZeRO-2's reduce-scatter
    after every micro-batch the pin was Llama 3 70B on 128 A100s, its DP+TP+CP ZeRO-2 plan #3 at 0.31 %)."""
    doc = json.loads(cli("plan", "-m", "llama3-70b", "-c", "hgx-h200", "-n", "128", "--global-batch", "256", "-k",
                         "4", "--json").out)
    row = doc["ranked"][3]
    s = row["strategy"]
    assert (s["tp"], s["pp"], s["cp"]) == (2, 2, 1)
    gap = row["step_time_s"] / doc["ranked"][0]["step_time_s"] - 1
    assert TIE < gap < 10 * TIE
    why = doc["why"]
    assert (f"(DP 32 x TP 2 x PP 2, mb {s['micro_batch']}, {s['schedule']}, ZeRO-2, SP) is {gap:.1%} slower: the winner"
            in why)
    assert "is a near tie (0.3" not in why


@pytest.mark.parametrize("pins", [("--set", "strategy.bucket_size=100MB"),
                                  ("--assignment", "dynamic", "--set", "strategy.dispatch_overhead=20ms"),
                                  ()])
def test_predict_json_strategy_round_trips(cli: Any, tmp_path: Any, pins: tuple[str, ...]) -> None:
    """predict's JSON strategy gives the bucket as bucket_bytes and the dispatch overhead as dispatch_overhead_s only
    (plan's adds bucket_size and dispatch_overhead beside them): written as a strategy YAML, predict --strategy warned
    'not used: bucket_bytes; dispatch_overhead_s' and priced the default bucket, 3.300 s for the 3.276 s of a 100 MB
    bucket on 25 GbE. Each key is now read as its field where the file does not give that field; under static
    assignment the JSON's dispatch_overhead_s (the unpriced default) is not, or it is warned 'not priced'."""
    base = ("-m", "gpt-1.7b", "-c", "pcie-25gbe", "-n", "16")
    doc = json.loads(cli("predict", *base, *pins, "--json").out)
    assert "bucket_size" not in doc["strategy"] and "dispatch_overhead" not in doc["strategy"]
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(doc["strategy"]))
    r = cli("predict", *base, "--strategy", str(f), "--json")
    assert r.code == 0 and json.loads(r.out)["step_time_s"] == pytest.approx(doc["step_time_s"], rel=1e-12)
    assert "bucket_bytes" not in r.err and "dispatch_overhead" not in r.err
    if pins:  # the pinned value moves the step (else the test would pass on a dropped key)
        assert doc["step_time_s"] != pytest.approx(json.loads(cli("predict", *base, "--json").out)["step_time_s"],
                                                   rel=1e-6)


def test_predict_json_gives_no_band_for_an_infeasible_step(cli: Any) -> None:
    """ux20 took the 'likely ... per step (published runs)' line off an infeasible predict (126 layers in 64 chunks),
    its step 'priced as if it ran'; the JSON still gave the band beside feasible: false. A feasible step keeps it."""
    args = ("predict", "-m", "llama3-405b", "-c", "dgx-h100", "-n", "16384", "--tp", "8", "--pp", "16",
            "--global-batch", "2048", "--micro-batch", "1", "--zero", "1", "--sequence-parallel", "--json")
    bad = json.loads(cli(*args, "--schedule", "interleaved:4").out)
    assert bad["feasible"] is False and bad["interval"] is None and bad["step_time_s"] > 0
    ok = json.loads(cli(*args, "--schedule", "interleaved:4", "--set", "model.layers=128", "--recompute", "full").out)
    # the band is the similar runs' error range, which need not hold the prediction (test_intervals: 90% of Hopper
    # TP/PP/DP dense 16-bit runs are predicted too fast, so the likely step lies wholly above the priced one)
    low, high = ok["interval"]["step_time_s"]
    assert ok["feasible"] is True and 0 < low <= high


ONE_NODE = """
- {name: a, cluster: dgx-a100, model: gpt-7.5b, gpus: 8, tp: 8, global_batch: 8, micro_batch: 1, step_time: 1.0 s}
- {name: b, cluster: dgx-a100, model: gpt-7.5b, gpus: 8, tp: 8, global_batch: 16, micro_batch: 1, step_time: 1.2 s}
- {name: c, cluster: dgx-a100, model: gpt-7.5b, gpus: 8, tp: 8, global_batch: 32, micro_batch: 1, step_time: 3.5 s}
"""


def test_calibrate_says_why_residuals_are_not_zero(cli: Any, tmp_path: Any) -> None:
    """Three runs on one node at batch 8, 16, 32 (1.0, 1.2, 3.5 s) for three fitted factors (compute, NVLink,
    overhead): every priced part of these runs grows in proportion to the batch, so the factors fit an affine line
    in the batch and cannot pass through three points off one (residuals of -10 %, +32 %, -16 %), with no factor on
    a bound. ux20's reason said 'they are not zero only because factors sit on their bounds'. ``--factors all``:
    the default fits only identified factors since calib27, so it no longer fits more factors than the runs vary."""
    f = tmp_path / "runs.yaml"
    f.write_text(ONE_NODE)
    doc = json.loads(cli("calibrate", "runs", str(f), "--factors", "all", "--json").out)
    assert max(abs(r["error_after"]) for r in doc["runs"]) > 0.05
    assert not any(x["at_bound"] for x in doc["factors"])
    cal = doc["calibration"]
    assert cal["method"] == "none" and cal["runs"] <= cal["factors"]
    assert "sit on their bounds" not in cal["reason"] and "zero by construction" not in cal["reason"]
    assert "the runs vary in fewer ways than the factors" in cal["reason"]


def test_negative_zero_prints_as_zero() -> None:
    """ux20 printed a zero in the base unit ('0 s'); a negative zero, what a difference of equal parts gives, read
    '-0 s'. Its round trip through parse_quantity is still exact (0.0 == -0.0)."""
    assert [format_quantity(-0.0, k) for k in ("time", "bytes", "flop_rate")] == ["0 s", "0 B", "0 FLOP/s"]
    assert parse_quantity(format_quantity(-0.0, "time", digits=17), "time") == 0.0
