"""`calibrate runs`' default fits only the factors the runs identify (calib27; docs/model.md#calibrate-runs).

The selection rules are checked on hand-built Jacobians and intervals whose outcome is computed here by hand (two
unit columns at angle theta have singular values sqrt(1 +- cos theta), so condition number sqrt((1 + c) / (1 - c))),
and the whole fit on synthetic runs made by the step model at known factors plus noise (tests/test_calibrate_runs.py
``synthetic``): the factors the runs identify are recovered inside their intervals, the others are held at 1 and named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_calibrate_runs import RUNS, TRUE, eight_runs_fit, synthetic

from scalemodel.engine import calibrate_runs
from scalemodel.engine.calibrate import fit_intervals
from scalemodel.engine.calibrate_runs import COND_MAX, WIDE, _identifiable, _Solution, _too_wide, fit_runs
from scalemodel.specs.runs import read_runs

#: `calibrate runs` fits through conftest's fit_runs_once: --json's default fit of the 8 runs reuses ``eight``'s
pytestmark = pytest.mark.usefixtures("fit_once")


def _pair(cos: float, m: int = 4) -> np.ndarray:
    """m x 2 Jacobian of two unit columns at angle acos(cos), padded with zero rows."""
    j = np.zeros((m, 2))
    j[0] = [1.0, cos]
    j[1] = [0.0, math.sqrt(1 - cos**2)]
    return j


@pytest.mark.parametrize(("cos", "kept"), [(0.997, True), (0.999, False)])
def test_a_nearly_collinear_factor_is_held_past_condition_index_30(cos: float, kept: bool) -> None:
    # by hand: sqrt(1.997 / 0.003) = 25.8 <= 30, sqrt(1.999 / 0.001) = 44.7 > 30
    assert (math.sqrt((1 + cos) / (1 - cos)) <= COND_MAX) is kept
    jac = _pair(cos) * np.array([2.0, 1.0])  # the first column is larger: pivoting takes it first
    mults, fit_o, held = _identifiable(["compute", "bandwidth:ib"], False, jac)
    assert mults == (["compute", "bandwidth:ib"] if kept else ["compute"]) and not fit_o
    if not kept:
        assert set(held) == {"bandwidth:ib"} and "condition index 44.7 > 30" in held["bandwidth:ib"]
        assert held["bandwidth:ib"].endswith("(condition index 44.7 > 30)")  # fit_runs adds what it fitted


def test_m_runs_fit_at_most_m_minus_1_factors_in_pivot_order_the_overhead_last() -> None:
    a = np.array([1.0, 1.0, 1.0, 1.0])      # compute: moves every run (norm 2)
    b = np.array([0.5, -0.5, 0.0, 0.0])     # a tier: orthogonal to a, norm 0.71
    c = 0.9 * a + np.array([0, 0, 1e-3, 0])  # overlap: norm 1.8 > b's, but almost all of it inside a's span
    o = np.array([1.0, 0.5, 0.25, 0.125])    # overhead, d ln T / d o = 1 / T
    jac = np.column_stack([c, b, a, o])       # listed out of order: the pivoting, not the list, orders them
    mults, fit_o, held = _identifiable(["overlap", "bandwidth:ib", "compute"], True, jac)
    # pivot order a (largest), then b (c has only 1e-3 outside a's span), then c, which is held as collinear; with
    # 4 runs up to 3 factors: the overhead (not in the span of a and b) is the third
    assert mults == ["compute", "bandwidth:ib"] and fit_o
    assert list(held) == ["overlap"] and "condition index" in held["overlap"]
    # with 3 runs only 2 fit: compute and the tier; the overhead is held for want of a residual
    mults, fit_o, held = _identifiable(["overlap", "bandwidth:ib", "compute"], True, jac[:3])
    assert mults == ["compute", "bandwidth:ib"] and not fit_o
    assert held["overhead_s"].startswith("3 runs identify at most 2 factors with a residual left to judge them")
    # one run: exactly one factor, the one that moves it most
    mults, fit_o, held = _identifiable(["overlap", "bandwidth:ib", "compute"], True, jac[:1])
    assert mults == ["compute"] and not fit_o
    assert all(w == "1 run identifies at most 1 factor" for w in held.values())
    assert set(held) == {"overlap", "bandwidth:ib", "overhead_s"}


def _solution(cis: list[Any], x: list[float], m: int = 6) -> _Solution:
    lo = np.array([math.log(0.1)] * 3 + [0.0])
    hi = np.array([math.log(1.25)] * 3 + [10.0])
    return _Solution(["compute", "bandwidth:ib", "overlap", "overhead_s"], lo, hi, np.ones(4), np.array(x),
                     np.zeros(m), cis, None)


def test_a_factor_with_an_interval_wider_than_a_factor_2_or_on_a_bound_is_held() -> None:
    x = [math.log(0.8), math.log(0.9), math.log(1.25), 0.05]  # overlap sits on its upper bound 1.25
    sol = _solution([[0.7, 0.9], [0.5, 1.1], [1.2, 1.3], [0.0, 0.2]], x)
    wide = _too_wide(sol, 3, t_min=0.2)
    # compute: 0.9 / 0.7 = 1.29 <= 2 kept; the tier: 1.1 / 0.5 = 2.2 > 2; the overhead: +-0.15 s is 2 x 0.15 / 0.2 =
    # 1.5 of the shortest step in ln T, > ln 2 = 0.69
    assert set(wide) == {"bandwidth:ib", "overlap", "overhead_s"}
    assert "spans more than a factor 2" in wide["bandwidth:ib"] and "on a bound (1.25)" in wide["overlap"]
    assert "wider than ln 2 of the shortest measured step" in wide["overhead_s"]
    # the overhead at +-0.05 s on a 0.2 s step: 0.5 < 0.69, kept; so is a ratio of exactly 2
    assert WIDE == 2.0
    sol = _solution([[0.7, 0.9], [0.55, 1.1], None, [0.0, 0.1]], x[:2] + [math.log(1.0), 0.05])
    assert set(_too_wide(sol, 3, t_min=0.2)) == {"overlap"}  # a residual is left and it has no interval
    # no residual left (m = p): no interval can be judged, only a bound
    sol = _solution([None] * 4, x, m=4)
    assert set(_too_wide(sol, 3, t_min=0.2)) == {"overlap"}


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The 8 synthetic runs (seed 1) and their default fit: test_calibrate_runs' ``fitted``, made once a session."""
    path, _, fit = eight_runs_fit(tmp_path_factory)
    return path, fit


def test_identified_factors_are_recovered_and_the_rest_held(eight: tuple[Path, Any]) -> None:
    """8 runs made with compute x0.8, ib-leaf x0.7 and 0.05 s (1 % noise): the default fits those three, each
    interval holding the truth, and holds NVLink (true factor 1), which the runs leave wider than a factor 2."""
    _, fit = eight
    assert fit.inputs["selection"] == "identified"
    for name, true in (("compute", TRUE["compute"]), ("bandwidth:ib-leaf", TRUE["ib-leaf"]),
                       ("overhead_s", TRUE["overhead_s"])):
        f = fit.factor(name)
        assert f.determined and f.held is None and f.ci is not None and f.ci[0] <= true <= f.ci[1], (name, f)
    nv = fit.factor("bandwidth:nvlink")
    assert not nv.determined and nv.value == 1.0 and "spans more than a factor 2" in (nv.held or "")
    assert any(w.startswith("bandwidth:nvlink: not identified by the runs, left at 1") for w in fit.warnings)
    assert fit.calibration["factors"] == 3  # what the band's method counts: the fitted ones
    # the candidates stay listed; `fitted` names the three the runs identify, nvlink (held) not among them
    assert "bandwidth:nvlink" in fit.inputs["factors"]
    assert sorted(fit.inputs["fitted"]) == ["bandwidth:ib-leaf", "compute", "overhead_s"]


def test_two_runs_fit_one_factor_and_hold_the_rest(tmp_path: Path) -> None:
    """Two runs, truth compute x0.8, ib-leaf x0.7, 0.05 s: the default fits the single factor that moves the runs
    most (compute), within 10 % of its truth, and holds every other; the explicit `all` fits everything."""
    path = synthetic(tmp_path, [r for r in RUNS if r["name"] in ("1.7b-8", "3.6b-64")], seed=4)
    fit = fit_runs(read_runs(path), source=str(path))
    fitted = [f.name for f in fit.factors if f.determined]
    assert fitted == ["compute"] and abs(fit.factor("compute").value / TRUE["compute"] - 1) < 0.1
    held = [f.name for f in fit.factors if f.held]
    assert "overhead_s" in held and "bandwidth:ib-leaf" in held
    assert fit.factor("overhead_s").value == 0.0  # the cluster's own
    every = fit_runs(read_runs(path), source=str(path), only=["all"])
    assert every.inputs["selection"] == "as asked" and not any(f.held for f in every.factors)
    assert sum(f.determined for f in every.factors) > 2


def test_json_names_the_held_factors_and_the_text_says_why(eight: tuple[Path, Any], cli: Any) -> None:
    path, _ = eight
    r = cli("calibrate", "runs", str(path), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["inputs"]["selection"] == "identified"
    got = {f["name"]: f for f in doc["factors"]}
    assert got["bandwidth:nvlink"]["held"].startswith("its 95 % interval")
    assert got["compute"]["held"] is None and got["bandwidth:ib-spine"]["held"] is None  # not exercised: not 'held'
    assert "bandwidth:nvlink: not identified by the runs" in r.err
    text = cli("calibrate", "runs", str(path), "--factors", "compute,overhead_s")
    assert text.code == 0 and "not identified" not in text.err and "(held)" not in text.out


@pytest.mark.parametrize(("factors", "what"), [
    ("all,compute", "'all' names every factor and comes alone"),
    ("computer", "unknown factor 'computer'"),
])
def test_bad_factor_lists_are_one_line_errors(eight: tuple[Path, Any], cli: Any, factors: str, what: str) -> None:
    path, _ = eight
    r = cli("calibrate", "runs", str(path), "--factors", factors)
    assert r.code == 2 and what in r.err and "--factors" in r.err and "Traceback" not in r.err


def test_a_held_factor_names_what_was_finally_fitted(tmp_path: Path) -> None:
    """review27c: two runs (seed 1) put compute first and hold the rest for want of a residual, then the width rule
    holds compute too (interval 0.485 to 1.13). Each reason used to say '(fitted: compute)', the pivot step's
    choice, while the table showed compute held and nothing fitted: every reason names the final fit."""
    path = synthetic(tmp_path, RUNS[:2])
    fit = fit_runs(read_runs(path), source=str(path))
    assert not any(f.determined for f in fit.factors)
    held = {f.name: f.held or "" for f in fit.factors if f.held}
    assert set(held) == {"compute", "bandwidth:nvlink", "bandwidth:ib-leaf", "overhead_s"}
    assert "spans more than a factor 2" in held["compute"]
    assert all(w.endswith("(fitted: none)") for w in held.values()), held
    assert not any("(fitted: compute)" in w for w in fit.warnings)


def test_leave_one_out_refits_keep_the_full_fits_selection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """review27c (docs/model.md#calibrate-runs-identified): each leave-one-out refit of the default fit refits the
    factors the full fit kept, no others: its predictions equal those of the same factors asked for by name."""
    monkeypatch.setattr(calibrate_runs, "LOO_MAX_RUNS", 40)  # conftest turns the refits off outside their own file
    path = synthetic(tmp_path, RUNS)
    fit = fit_runs(read_runs(path), source=str(path))
    kept = [f.name for f in fit.factors if f.determined]
    named = fit_runs(read_runs(path), source=str(path), only=kept)
    assert kept == ["compute", "bandwidth:ib-leaf", "overhead_s"] and fit.calibration["method"] == "leave-one-out"
    for a, b in zip(fit.runs, named.runs, strict=True):
        assert a["loo_s"] == pytest.approx(b["loo_s"], rel=1e-3), (a["name"], a["loo_s"], b["loo_s"])


def test_a_log_interval_whose_upper_end_would_overflow_is_none() -> None:
    """review27b: the guard bounded the half-width d (<= 300), not x + d, so a log-parameter near exp's limit (709.78)
    gave an upper end of inf. By hand: 3 points, 1 parameter, J = (1, 1, 1), residuals (0.1, -0.1, 0): s^2 = 0.02 / 2,
    var = s^2 / 3, d = t(0.975, 2) sqrt(var) = 4.3027 x 0.0577 = 0.248; x = 600: finite; x = 709.9: None, not inf."""
    jac = np.ones((3, 1))
    fun = np.array([0.1, -0.1, 0.0])
    lo, hi = fit_intervals(np.array([600.0]), jac, fun, log_params=1)[0]  # type: ignore[misc]
    assert math.isfinite(hi) and hi == pytest.approx(math.exp(600.0 + 4.302652729911275 * math.sqrt(0.01 / 3)))
    assert fit_intervals(np.array([709.9]), jac, fun, log_params=1) == [None]
