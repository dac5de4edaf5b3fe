"""Prediction intervals from the validation residuals (docs/model.md#intervals): the band is the error
range of the most similar validated runs, recomputed here from the shipped residual file; a job with
nothing similar validated says so; check --pessimistic asserts on the slow end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, script_module, validation_cases_path
from hypothesis import given
from hypothesis import strategies as st

from scalemodel.engine.intervals import MIN_CASES, RESIDUALS, interval_for, quantile


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(Path(RESIDUALS).read_text())["cases"])


def test_the_shipped_residuals_are_the_validation_scripts(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """scripts/build_residuals.py --check, in this process: its validator is the session's validate_training module,
    whose validate_all() (every row of both case files) tests/test_validation.py and tests/test_memory_fidelity.py
    already ran, instead of a fresh process that parsed and priced all of them again (the suite's slowest test)."""
    if not validation_cases_path().exists():
        pytest.skip("shared/validation not present next to the repository")
    br = script_module("build_residuals")
    monkeypatch.setattr(br, "_validator", lambda: script_module("validate_training"))
    code = br.main(["--check"])
    out = capsys.readouterr().out
    assert code == 0 and out.strip().endswith("is current"), out


def test_band_is_the_error_range_of_the_most_similar_runs() -> None:
    same = [c for c in _cases() if (c["generation"], c["parallelism"], c["model"], c["precision"])
            == ("ampere", "TP/PP/DP", "dense", "16-bit")]
    errors = np.array([c["speed_error"] for c in same])
    assert len(errors) >= 10  # quantile band
    band = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 1024)
    assert band is not None and not band.out_of_distribution and band.cases == len(errors)
    assert band.low == pytest.approx(np.quantile(errors, 0.1)) and band.high == pytest.approx(np.quantile(errors, 0.9))
    lo, hi = band.step_time(10.0)
    assert lo == pytest.approx(10.0 * (1 + band.low)) and hi == pytest.approx(10.0 * (1 + band.high))
    x_lo, x_hi = band.throughput(100.0)
    assert x_lo == pytest.approx(100.0 / (1 + band.high)) and x_hi == pytest.approx(100.0 / (1 + band.low))


@given(st.lists(st.floats(min_value=-0.9, max_value=10.0), min_size=1, max_size=60),
       st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0]) | st.floats(min_value=0.0, max_value=1.0))
def test_quantile_is_numpys_default_quantile_to_the_last_bit(errors: list[float], q: float) -> None:
    # numpy.quantile (method "linear") is the reference; the band's own copy must not differ in any bit
    assert quantile(errors, q) == float(np.quantile(np.asarray(errors), q))


def test_fewer_cases_fall_back_to_a_wider_family_and_say_which_keys_matched() -> None:
    # TPU ZeRO-3 MoE has fewer validated runs than a band needs (moedata41's Megatron-FSDP Qwen3-235B row made hopper's
    # 3, a band's minimum, so the fallback is shown on TPU): the family drops model and precision until >= 3 remain
    assert 0 < len([c for c in _cases() if (c["generation"], c["parallelism"], c["model"])
                    == ("tpu", "FSDP/ZeRO-3", "MoE")]) < MIN_CASES
    band = interval_for("tpu", "FSDP/ZeRO-3", "MoE", "fp8", 512)
    assert band is not None and not band.out_of_distribution
    matched = [c for c in _cases() if c["generation"] == "tpu" and c["parallelism"] == "FSDP/ZeRO-3"]
    assert band.family == {"generation": "tpu", "parallelism": "FSDP/ZeRO-3"}
    assert band.cases == len(matched) and "not matched on model, precision" in band.reason
    errors = np.asarray([c["speed_error"] for c in matched])
    # a band is the 10-90 % quantiles from 10 runs on, else the whole range
    low, high = (np.quantile(errors, 0.1), np.quantile(errors, 0.9)) if len(errors) >= 10 else (errors.min(),
                                                                                              errors.max())
    assert band.low == pytest.approx(low) and band.high == pytest.approx(high)


def test_nothing_similar_validated_is_out_of_distribution_with_a_wide_band() -> None:
    # cdna2 (MI250X): no validated run (cdna4 served here until data24's two MLPerf v5.1 MI355X rows; the "few" case
    # was cdna4's 2 runs until hw28's MI350X row made 3, a band's minimum: now pascal's one run, goyal17's P100)
    assert not [c for c in _cases() if c["generation"] == "cdna2"]
    band = interval_for("cdna2", "TP/PP/DP", "dense", "16-bit", 8)
    assert band is not None and band.out_of_distribution and "no validated run on cdna2" in band.reason
    assert len([c for c in _cases() if c["generation"] == "pascal"]) == 1
    few = interval_for("pascal", "TP/PP/DP", "dense", "16-bit", 8)  # 1 run, fewer than a band needs
    assert few is not None and few.out_of_distribution and "only 1 validated run on pascal" in few.reason
    # MI355X x 4 (data24's two, data31's Dell and Supermicro), MI350X: at least a band's minimum of 3
    assert len([c for c in _cases() if c["generation"] == "cdna4"]) == 5
    enough = interval_for("cdna4", "TP/PP/DP", "dense", "16-bit", 8)
    assert enough is not None and not enough.out_of_distribution
    errors = [c["speed_error"] for c in _cases()]
    assert band.high - band.low > max(errors) - min(errors)
    far = interval_for("ampere", "TP/PP/DP", "dense", "16-bit", 1_000_000)
    assert far is not None and far.out_of_distribution and "outside" in far.reason


def test_predict_json_carries_the_interval(cli: Any) -> None:
    res = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8",
              "--global-batch", "1536", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    band = doc["interval"]
    lo, hi = band["speed_error_range"]
    assert band["step_time_s"] == pytest.approx([doc["step_time_s"] * (1 + lo), doc["step_time_s"] * (1 + hi)])
    assert band["family"]["generation"] == "ampere" and band["cases"] >= 3 and not band["out_of_distribution"]


def test_check_pessimistic_asserts_on_the_slow_end(cli: Any) -> None:
    capacity = str(ROOT / "examples" / "capacity" / "gpt3-175b-dgx-h100.yaml")
    res = cli("check", capacity, "--json")
    doc = json.loads(res.out)
    step = next(v for v in doc["assertions"] if v["name"] == "max_step_time")["value"]
    pred = cli("predict", "-m", "gpt3-175b", "-c", "dgx-h100", "-n", "1024", "--tp", "8", "--pp", "16",
               "--zero", "1", "--recompute", "selective", "--sequence-parallel", "--schedule", "interleaved:2",
               "--global-batch", "2048", "--json")
    high = json.loads(pred.out)["interval"]["speed_error_range"][1]
    assert high > 0.02
    limit = f"assertions.max_step_time={step * (1 + high / 2):.6g}s"  # between the point and the slow end
    assert cli("check", capacity, "--set", limit, "--json").code in (0, 1)
    point = json.loads(cli("check", capacity, "--set", limit, "--json").out)
    slow = json.loads(cli("check", capacity, "--set", limit, "--pessimistic", "--json").out)
    verdict = {v["name"]: v for v in point["assertions"]}["max_step_time"]
    verdict_slow = {v["name"]: v for v in slow["assertions"]}["max_step_time"]
    assert verdict["passed"] and not verdict_slow["passed"]
    assert verdict_slow["value"] == pytest.approx(verdict["value"] * (1 + high), rel=1e-9)


def test_plan_and_scale_json_carry_the_interval(cli: Any) -> None:
    res = cli("plan", "-m", "llama2-7b", "-c", "dgx-a100", "-n", "64", "--top", "1", "--json")
    assert res.code == 0, res.err
    band = json.loads(res.out)["ranked"][0]["interval"]
    assert band["family"]["generation"] == "ampere" and band["step_time_s"][0] <= band["step_time_s"][1]
    res = cli("scale", "--json")
    assert res.code == 0, res.err
    for point in json.loads(res.out)["points"]:
        assert point["interval"]["cases"] >= 3
        lo, hi = point["interval"]["speed_error_range"]
        assert point["interval"]["step_time_s"] == pytest.approx([point["step_time_s"] * (1 + lo),
                                                                  point["step_time_s"] * (1 + hi)])


def test_check_points_and_sweep_rows_carry_the_interval(cli: Any) -> None:
    """check's points and sweep's rows carry the same band as predict gives the same job, computed here from
    the band's error range: step time x (1 + e) over the family's range."""
    capacity = str(ROOT / "examples" / "capacity" / "gpt3-175b-dgx-h100.yaml")
    doc = json.loads(cli("check", capacity, "--json").out)
    for point in doc["points"]:
        band = point["interval"]
        lo, hi = band["speed_error_range"]
        assert band["cases"] >= 3 and band["family"]["generation"] == "hopper"
        step = point["step_time_s"]
        assert band["step_time_s"] == pytest.approx([step * (1 + lo), step * (1 + hi)])
    sweep = str(ROOT / "examples" / "sweeps" / "capacity.yaml")
    res = cli("sweep", sweep, "--json", "-j", "1")
    assert res.code == 0, res.err
    rows = [r for r in json.loads(res.out)["rows"] if r["status"] == "ok"]
    assert rows
    for r in rows:
        # the same error range on both: a step (1 + e) longer is a throughput (1 + e) lower
        assert r["tokens_per_s_low"] * r["step_time_s_high"] == pytest.approx(r["tokens_per_s"] * r["step_time_s"])
        assert r["tokens_per_s_high"] * r["step_time_s_low"] == pytest.approx(r["tokens_per_s"] * r["step_time_s"])
        # the band is the family's 10th-90th percentile of signed errors applied to the step (module docstring), which
        # need not straddle zero: since data20's DGX H100 rows (dgxc25), 90 % of the Hopper TP/PP/DP dense 16-bit runs
        # are predicted too fast (10th percentile +0.3 %), so a point can sit just below its band; it was asserted
        # inside before (true only while the family's errors had both signs)
        assert r["step_time_s_low"] <= r["step_time_s_high"]
        assert r["interval_cases"] >= 3 and isinstance(r["interval_family"], str)
        assert r["out_of_distribution"] in (True, False)


def test_a_generation_with_too_few_runs_says_how_many_not_none() -> None:
    """A generation with one or two compared runs is short of a band: the reason said "no validated run on cdna3
    accelerators" when MI300X had two (tprimat26), which the README's accuracy table contradicts. MI300X has four
    since data19; P100 (pascal) has one (goyal17)."""
    own = [c for c in _cases() if c["generation"] == "pascal"]
    assert 0 < len(own) < 3
    band = interval_for("pascal", "TP/PP/DP", "dense", "16-bit", 8)
    assert band is not None and band.out_of_distribution
    assert "no validated run" not in band.reason
    assert f"only {len(own)} validated run{'s' if len(own) != 1 else ''} on pascal accelerators" in band.reason


def test_every_residual_generation_is_a_catalog_family() -> None:
    """A prediction's band is matched on its accelerator's catalog family (generation_of(AcceleratorSpec.family)), so
    every shipped residual must carry one of those families; the B300 and GB300 rows (Blackwell Ultra, family
    blackwell in hardware/accelerators/b300.yaml and gb300.yaml) were 'b300' / 'gb300' and never matched (review19b)."""
    import typing

    from scalemodel.specs import load_accelerator
    from scalemodel.specs.accelerator import Family

    cases = json.loads(Path(RESIDUALS).read_text(encoding="utf-8"))["cases"]
    assert {c["generation"] for c in cases} <= set(typing.get_args(Family))
    ultra = [c for c in cases if "b300" in c["id"].lower()]  # b300 and gb300 rows
    assert ultra and all(c["generation"] == "blackwell" for c in ultra)
    families = {load_accelerator(n, overrides=[]).family for n in ("b300", "gb300")}
    assert families == {"blackwell"}
