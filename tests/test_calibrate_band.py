"""The prediction band of a cluster calibrated by `calibrate runs` (docs/model.md#intervals): the overlay records
each fitted run's residual, in sample and leave-one-out, and a prediction with the overlay takes its band from them.

The runs are synthetic: the step model with known factors (compute x0.8, ib-leaf x0.7, 0.05 s a step) and 1 %
multiplicative noise from a fixed seed (test_calibrate_runs.synthetic). The leave-one-out residuals are computed
here independently, by a direct loop: each run dropped from the runs file, the rest fitted by ``fit_runs`` from its
own cold start, the dropped run predicted by ``predict`` through an overlay written from that fit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from test_calibrate_runs import RUNS, synthetic

from scalemodel.engine import calibrate_runs
from scalemodel.engine.calibrate_runs import fit_runs, overlay_yaml
from scalemodel.engine.intervals import MIN_CASES, Calibration, interval_for
from scalemodel.engine.predict import predict
from scalemodel.specs import load_cluster
from scalemodel.specs.runs import read_runs

#: five runs, two factors fitted: every refit without one run keeps 4 runs for 2 factors
ROWS = [r for r in RUNS if r["name"] in ("1.7b-8", "1.7b-32", "3.6b-16", "3.6b-64", "7.5b-32")]
FACTORS = ["compute", "overhead_s"]


def _overlay(tmp: Path, fit: Any, runs: list[Any], name: str) -> Path:
    out = tmp / name
    out.write_text(overlay_yaml(fit, runs[0].cluster, extends="dgx-a100", source="runs.yaml"))
    return out


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("band")
    path = synthetic(tmp, ROWS)
    runs = read_runs(path)
    fit = fit_runs(runs, source=str(path), only=FACTORS)
    overlay = _overlay(tmp, fit, runs, "overlay.yaml")
    measured = [r.step_time_s for r in runs]
    # the direct loop: refit without run i (its own fit from the default start), predict run i with that fit's overlay.
    # The loop's fits are in-sample (LOO_MAX_RUNS 0): their own leave-one-out refits (4 a fit, 20 in all, two thirds
    # of the fixture's fits) change no fitted factor, hence no overlay's prediction, and nothing here reads them
    rows = yaml.safe_load(path.read_text())
    loo = []
    for i in range(len(rows)):
        sub = tmp / f"without-{i}.yaml"
        sub.write_text(yaml.safe_dump([r for j, r in enumerate(rows) if j != i], sort_keys=False))
        sub_runs = read_runs(sub)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(calibrate_runs, "LOO_MAX_RUNS", 0)
            sub_fit = fit_runs(sub_runs, source=str(sub), only=FACTORS)
        cl = load_cluster(_overlay(tmp, sub_fit, sub_runs, f"overlay-without-{i}.yaml"))
        r = runs[i]
        loo.append(measured[i] / predict(cl, r.workload, r.gpus, r.training, r.strategy).step_time_s - 1)
    return {"tmp": tmp, "path": path, "runs": runs, "fit": fit, "overlay": overlay, "loo": loo,
            "measured": measured}


def test_the_overlay_records_leave_one_out_residuals_a_direct_loop_reproduces(calibrated: dict[str, Any]) -> None:
    doc = yaml.safe_load(calibrated["overlay"].read_text())["calibration"]
    assert (doc["version"], doc["runs"], doc["factors"], doc["method"]) == (2, 5, 2, "leave-one-out")
    assert doc["hardware"] == {"accelerator": "a100-sxm-80g", "gpus_per_node": 8,  # the runs' hardware (calib20)
                               "tiers": {"nvlink": 300e9, "ib-leaf": 25e9, "ib-spine": 25e9, "ib-core": 25e9},
                               # the datasheet's (hardware/accelerators/a100-sxm-80g.yaml): a --set keeps the name
                               "peak_flops": pytest.approx({"fp64": 19.5e12, "fp32": 19.5e12, "tf32": 156e12,
                                                            "bf16": 312e12, "fp16": 312e12}, rel=1e-12),
                               "memory_bandwidth": pytest.approx(2.039e12, rel=1e-12),
                               # hardware/clusters/dgx-a100.yaml's fabric: each tier's taper, span and latency (ux20c)
                               "oversubscription": {"nvlink": 1.0, "ib-leaf": 1.0, "ib-spine": 1.0, "ib-core": 1.0},
                               "span": {"nvlink": 8, "ib-leaf": 160, "ib-spine": 800, "ib-core": 16000},
                               "latency": pytest.approx({"nvlink": 2e-6, "ib-leaf": 3.5e-6, "ib-spine": 4.16e-6,
                                                         "ib-core": 4.82e-6}, rel=1e-12)}
    got = [r["leave_one_out"] for r in doc["residuals"]]
    # the refits start from the full fit's solution, the loop's from the default start: the same optimum, to the
    # solver's tolerance (the errors themselves are ~1 %)
    assert got == pytest.approx(calibrated["loo"], abs=2e-4)
    # out of sample the errors are larger on the whole than in sample (the fit saw each run it is judged on)
    ins = np.array([r["in_sample"] for r in doc["residuals"]])
    assert np.sqrt(np.mean(np.square(got))) > np.sqrt(np.mean(np.square(ins)))
    assert [(r["run"], r["gpus"], r["parallelism"], r["model"], r["precision"]) for r in doc["residuals"]] == \
        [(x["name"], x["gpus"], "TP/PP/DP", "dense", "16-bit") for x in ROWS]


def test_in_sample_residuals_are_the_overlays_own_errors(calibrated: dict[str, Any]) -> None:
    doc = yaml.safe_load(calibrated["overlay"].read_text())["calibration"]
    cl = load_cluster(calibrated["overlay"])
    for r, t, row in zip(calibrated["runs"], calibrated["measured"], doc["residuals"], strict=True):
        pred = predict(cl, r.workload, r.gpus, r.training, r.strategy).step_time_s
        assert row["in_sample"] == pytest.approx(t / pred - 1, abs=1e-6)  # speed error: measured = pred (1 + e)


def test_a_prediction_with_the_overlay_takes_the_leave_one_out_band(calibrated: dict[str, Any]) -> None:
    cl = load_cluster(calibrated["overlay"])
    r = calibrated["runs"][4]  # 7.5b-32
    p = predict(cl, r.workload, r.gpus, r.training, r.strategy)
    band = p.interval
    assert band is not None and band["source"] == "calibrated-leave-one-out" and not band["out_of_distribution"]
    lo, hi = min(calibrated["loo"]), max(calibrated["loo"])  # 5 runs: min-max (a quantile band needs 10)
    assert band["speed_error_range"] == pytest.approx([lo, hi], abs=2e-4)
    assert band["step_time_s"] == pytest.approx([p.step_time_s * (1 + lo), p.step_time_s * (1 + hi)], rel=1e-3)
    assert band["cases"] == 5 and band["family"]["cluster"] == "dgx-a100-calibrated"
    assert band["calibration"] == {"cluster": "dgx-a100-calibrated", "version": 2, "runs": 5, "factors": 2,
                                   "method": "leave-one-out"}
    assert "leave-one-out" in band["basis"] and "refit without it" in band["basis"]


def test_the_text_and_json_say_where_the_band_comes_from(calibrated: dict[str, Any], cli: Any) -> None:
    args = ("predict", "-c", str(calibrated["overlay"]), "-m", "gpt-7.5b", "-n", "32", "--tp", "4", "--pp", "2",
            "--global-batch", "128", "--micro-batch", "2")
    r = cli(*args)
    assert r.code == 0, r.err
    line = " ".join(r.out.split())
    assert "5 of your calibration runs (leave-one-out)" in line and "refit without it" in line
    j = json.loads(cli(*args, "--json").out)["interval"]
    assert j["source"] == "calibrated-leave-one-out" and j["calibration"]["method"] == "leave-one-out"


def test_far_beyond_the_runs_gpu_counts_the_published_band_is_kept_and_said(calibrated: dict[str, Any]) -> None:
    cl = load_cluster(calibrated["overlay"])
    r = calibrated["runs"][4]
    p = predict(cl, r.workload, 1024, r.training.model_copy(update={"global_batch": 1024}), r.strategy)
    pub = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 1024)
    assert pub is not None and p.interval is not None
    assert p.interval["source"] == "published" and p.interval["speed_error_range"] == [pub.low, pub.high]
    assert "1024 GPUs is more than 4x beyond the 8-64 GPUs of the calibration runs" in p.interval["basis"]


def test_an_old_overlay_without_residuals_keeps_the_published_band_and_says_why(calibrated: dict[str, Any],
                                                                               cli: Any) -> None:
    raw = yaml.safe_load(calibrated["overlay"].read_text())
    del raw["calibration"]  # as `calibrate runs` wrote overlays before the block (version 1)
    old = calibrated["tmp"] / "old-overlay.yaml"
    old.write_text(yaml.safe_dump(raw, sort_keys=False))
    r = calibrated["runs"][4]
    p = predict(load_cluster(old), r.workload, r.gpus, r.training, r.strategy)
    pub = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 32)
    assert pub is not None and p.interval is not None
    assert p.interval["source"] == "published" and p.interval["speed_error_range"] == [pub.low, pub.high]
    assert p.interval["calibration"]["version"] == 1
    assert "before overlays recorded the fit's residuals" in p.interval["basis"]
    # a cluster no one calibrated carries no calibration at all
    plain = predict(load_cluster("dgx-a100"), r.workload, r.gpus, r.training, r.strategy).interval
    assert plain is not None and plain["calibration"] is None and plain["source"] == "published"


def test_an_unknown_calibration_version_is_a_one_line_error(calibrated: dict[str, Any], cli: Any) -> None:
    raw = yaml.safe_load(calibrated["overlay"].read_text())
    raw["calibration"]["version"] = 3
    bad = calibrated["tmp"] / "v3.yaml"
    bad.write_text(yaml.safe_dump(raw, sort_keys=False))
    r = cli("predict", "-c", str(bad), "-m", "gpt-1.7b", "-n", "8", "--global-batch", "64")
    assert r.code == 2 and "Traceback" not in r.err
    assert "calibration.version" in r.err and len(r.err.strip().splitlines()) == 1


def _cal(rows: list[tuple[str, str, str, int, float]], method: str = "leave-one-out") -> Calibration:
    return Calibration("mine", 2, len(rows), 2, method, "", tuple(rows))


def test_calibration_runs_are_matched_on_family_keys_dropping_from_the_end() -> None:
    # hand-made residuals: 3 fp8 runs, 4 bf16 runs, 2 ZeRO-3 runs (all dense, 16-256 GPUs)
    fp8 = [("TP/PP/DP", "dense", "fp8", 64, e) for e in (-0.02, 0.01, 0.03)]
    bf16 = [("TP/PP/DP", "dense", "16-bit", 32, e) for e in (-0.05, 0.0, 0.02, 0.04)]
    z3 = [("FSDP/ZeRO-3", "dense", "16-bit", g, e) for g, e in ((16, 0.1), (256, -0.1))]
    cal = _cal(fp8 + bf16 + z3)
    band = interval_for("hopper", "TP/PP/DP", "dense", "fp8", 64, cal)
    assert band is not None and (band.low, band.high, band.cases) == (-0.02, 0.03, 3)
    assert band.family == {"cluster": "mine", "parallelism": "TP/PP/DP", "model": "dense", "precision": "fp8"}
    # ZeRO-3 has 2 runs: precision, then model dropped, still 2; parallelism dropped: all 9 runs, said
    band = interval_for("hopper", "FSDP/ZeRO-3", "dense", "16-bit", 64, cal)
    assert band is not None and band.cases == 9 and (band.low, band.high) == (-0.1, 0.1)
    assert "not matched on parallelism, model, precision" in band.reason and band.family == {"cluster": "mine"}


def test_ten_or_more_calibration_runs_give_the_10th_to_90th_percentile() -> None:
    errors = [0.001 * k * (-1) ** k for k in range(12)]
    band = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 8,
                        _cal([("TP/PP/DP", "dense", "16-bit", 8, e) for e in errors]))
    assert band is not None
    assert (band.low, band.high) == (float(np.quantile(errors, 0.1)), float(np.quantile(errors, 0.9)))


def test_too_few_runs_or_residuals_zero_by_construction_keep_the_published_band() -> None:
    pub = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 64)
    assert pub is not None
    two = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 64,
                       _cal([("TP/PP/DP", "dense", "16-bit", 64, e) for e in (0.01, -0.01)], "in-sample"))
    assert two is not None and two.source == "published" and (two.low, two.high) == (pub.low, pub.high)
    assert f"2 calibration runs (a band needs {MIN_CASES})" in two.reason
    none = Calibration("mine", 2, 2, 2, "none", "2 runs for 2 fitted factors: zero by construction", ())
    band = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 64, none)
    assert band is not None and band.source == "published" and "zero by construction" in band.reason


def test_few_runs_record_in_sample_or_none_with_the_reason(tmp_path: Path, cli: Any) -> None:
    path = synthetic(tmp_path, ROWS[:2])
    fit = fit_runs(read_runs(path), source=str(path), only=["compute"])
    cal = fit.calibration
    assert (cal["method"], cal["runs"], cal["factors"]) == ("in-sample", 2, 1)
    assert "leave-one-out needs 3" in cal["reason"]
    assert all(r["leave_one_out"] is None for r in cal["residuals"])
    fit2 = fit_runs(read_runs(path), source=str(path), only=FACTORS)
    assert fit2.calibration["method"] == "none" and "zero by construction" in fit2.calibration["reason"]
    # the overlay with the in-sample block loads, and predictions keep the published band (2 runs < 3), said
    out = tmp_path / "o.yaml"
    out.write_text(overlay_yaml(fit, read_runs(path)[0].cluster, extends="dgx-a100", source="x"))
    r = cli("predict", "-c", str(out), "-m", "gpt-1.7b", "-n", "8", "--global-batch", "64", "--json")
    band = json.loads(r.out)["interval"]
    assert band["source"] == "published" and "2 calibration runs (a band needs 3)" in band["basis"]
    # and calibrate runs says so when it writes the overlay: it said "the fitted model's in-sample errors on these
    # 2 runs", a band no prediction with the overlay takes
    from scalemodel.report.calibrate import band_text
    said = band_text(cal)
    assert "the published runs'" in said and "2 calibration runs, a band needs 3" in said and "in-sample" not in said


def _hand_block(n: int, **over: Any) -> dict[str, Any]:
    rows = [{"run": f"r{i}", "gpus": 8, "parallelism": "TP/PP/DP", "model": "dense", "precision": "16-bit",
             "in_sample": 0.001 * i, "leave_one_out": 0.002 * i} for i in range(n)]
    return {"version": 2, "runs": n, "factors": 2, "method": "leave-one-out", "reason": "", "residuals": rows, **over}


@pytest.mark.parametrize(("block", "field", "said"), [
    # the basis read "8 of 100 runs": a count the rows do not have
    (_hand_block(4, runs=100), "calibration.runs", "100 runs but 4 residuals"),
    # leave-one-out with every row's leave_one_out null: the band fell back to the published one without a word
    (_hand_block(4, residuals=[{**r, "leave_one_out": None} for r in _hand_block(4)["residuals"]]),
     "leave_one_out", "null under method 'leave-one-out'"),
    # 4 runs for 4 factors: the fit interpolates (residuals zero by construction), so no method but 'none'
    (_hand_block(4, factors=4), "calibration.method", "zero by construction"),
    # 3 runs for 3 factors is 'none'; 4 runs for 3 factors leaves 3 runs a refit: leave-one-out allowed; 2 for 1 not
    (_hand_block(2, factors=1), "calibration.method", "'leave-one-out' with 2 runs for 1 factors"),
    (_hand_block(4, method="none"), "calibration.method", "'none' with 4 runs for 2 factors"),
    # bounded: at most as many rows as a runs file holds (specs.runs.MAX_RUNS)
    (_hand_block(1001), "calibration.runs", "less than or equal to 1000"),
])
def test_an_inconsistent_hand_edited_block_is_a_one_line_error(tmp_path: Path, cli: Any, block: dict[str, Any],
                                                               field: str, said: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"kind": "cluster", "extends": "dgx-a100", "name": "mine", "calibration": block},
                                  sort_keys=False))
    r = cli("predict", "-c", str(bad), "-m", "gpt-1.7b", "-n", "8", "--global-batch", "64")
    assert r.code == 2 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert field in r.err and said in r.err, r.err
    good = tmp_path / "good.yaml"  # the same block as calibrate runs writes it loads, and gives its band
    good.write_text(yaml.safe_dump({"kind": "cluster", "extends": "dgx-a100", "name": "mine",
                                    "calibration": _hand_block(4)}, sort_keys=False))
    band = json.loads(cli("predict", "-c", str(good), "-m", "gpt-1.7b", "-n", "8", "--global-batch", "64",
                          "--json").out)["interval"]
    assert band["source"] == "calibrated-leave-one-out" and band["speed_error_range"] == [0.0, 0.006]


def test_the_block_bounds_match_the_runs_file_and_the_fit() -> None:
    from scalemodel.specs import cluster, runs
    assert cluster.MAX_CALIBRATION_RUNS == runs.MAX_RUNS and calibrate_runs.MIN_LOO_RUNS == cluster.MIN_LOO_RUNS


def test_an_overhead_fitted_onto_its_zero_bound_writes_an_overlay_that_loads(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # seen on 4 synthetic runs (compute, ib-leaf, overhead_s fitted): the solver left the overhead at 9.057e-13 s, its
    # lower bound 0 to within trf's interior step, and the overlay's step_overhead was refused on reading it back
    # (a time below the physical range's 1 ps floor)
    import dataclasses

    path = synthetic(tmp_path, ROWS[:3])
    runs = read_runs(path)
    monkeypatch.setattr(calibrate_runs, "LOO_MAX_RUNS", 0)  # in-sample: its 3 refits move no factor, read nowhere
    fit = fit_runs(runs, source=str(path), only=["compute", "overhead_s"])
    fit.factors = [dataclasses.replace(f, value=9.057493578266443e-13) if f.name == "overhead_s" else f
                   for f in fit.factors]
    cl = load_cluster(_overlay(tmp_path, fit, runs, "zero-overhead.yaml"))
    assert cl.step_overhead == 0.0


def test_check_pessimistic_says_why_a_calibrated_cluster_uses_the_published_band(calibrated: dict[str, Any],
                                                                                cli: Any) -> None:
    # the runs are 8-64 GPUs: at 1024 (16x beyond) the band is the published runs', and the note said only
    # "18 published runs" on the user's own calibrated cluster
    scen = calibrated["tmp"] / "scen.yaml"
    scen.write_text(yaml.safe_dump({
        "kind": "scenario", "name": "s", "cluster": calibrated["overlay"].name, "model": "gpt-7.5b",
        "gpus": [32, 1024], "mode": "weak", "training": {"global_batch": 128, "micro_batch": 2},
        "strategy": {"tp": 4, "pp": 2}, "assertions": {"max_step_time": "100s"}}, sort_keys=False))
    r = cli("check", str(scen), "--pessimistic", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    big = d["points"][-1]["interval"]
    assert big["source"] == "published" and big["calibration"]["method"] == "leave-one-out"
    note = next(n for n in d["notes"] if n.startswith("--pessimistic"))
    assert f"x {1 + big['speed_error_range'][1]:.3f}" in note
    assert "not from the calibration: 1024 GPUs is more than 4x beyond the 8-64 GPUs" in note


def test_the_left_out_columns_are_the_direct_loops_predictions_in_the_tables_sign(calibrated: dict[str, Any]) -> None:
    # the direct loop's error is the block's convention, measured = predicted (1 + e): its prediction is
    # measured / (1 + e); the table's 'left out' column is that prediction, its error predicted / measured - 1
    # (the table's sign, the opposite of the block's)
    for row, t, e in zip(calibrated["fit"].runs, calibrated["measured"], calibrated["loo"], strict=True):
        assert row["loo_s"] == pytest.approx(t / (1 + e), rel=2e-4)
        assert row["error_loo"] == pytest.approx(1 / (1 + e) - 1, abs=2e-4)
        assert row["error_loo"] * e <= 0  # opposite signs


def test_a_spec_that_extends_the_overlay_and_drops_the_block_is_said_so(calibrated: dict[str, Any]) -> None:
    # `calibration: null` is how a derived spec that changes the hardware drops the block; it was told only
    # "calibrated ... before overlays recorded the fit's residuals; rerun it", which it was not
    derived = calibrated["tmp"] / "derived.yaml"
    derived.write_text(yaml.safe_dump({"kind": "cluster", "extends": calibrated["overlay"].name, "name": "derived",
                                       "calibration": None}, sort_keys=False))
    r = calibrated["runs"][4]
    band = predict(load_cluster(derived), r.workload, r.gpus, r.training, r.strategy).interval
    pub = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 32)
    assert band is not None and pub is not None
    assert band["source"] == "published" and band["speed_error_range"] == [pub.low, pub.high]
    assert "or a spec that extends one and drops the block" in band["basis"]
