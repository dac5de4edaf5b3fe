"""fix31: the two defects fuzz31 (tests/test_hostile31.py) left.

(1) A NaN straggler time became a finite step at 0 tokens/s with exit 0: step.evaluate's rates divided by
``np.where(step > 0, step, inf)`` (False for NaN: a rate of 0), predict's display zeroed every non-finite number
(the straggler part dropped from an 857 ms step) and the planner read a NaN bound as "sync mode not applicable"
(np.isfinite pruned every candidate: "No feasible strategy", exit 0). A non-finite part is now one ``error: result:``
line naming it, exit 2.

(2) ``sensitivity`` divides the straggler CV by --factor (and steps it by e^+-0.01 for the elasticity); where that
leaves the range of cvs the job's distribution is priced for (specs.cluster.cv_refusal: a Weibull cv in [0.001, 20]
then, [1.3e-5, 1e14] since fuzz32, a shifted exponential's <= 1) it was refused as "error: cv: a Weibull cv is outside
[0.001, 20]", naming neither --factor nor the parameter. The cv is now held at the edge of the range, the row and a note
say so, and the elasticity at an edge is the one-sided difference over the step that stays inside. Expected values come
from ``predict`` at the cvs priced (an independent route through the CLI), not from sensitivity's own output.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import numpy as np
import pytest

import scalemodel
from scalemodel.cost import stragglers as st
from scalemodel.engine import predict as predict_module
from scalemodel.engine.step import refuse_non_finite
from scalemodel.specs.cluster import WEIBULL_CV_MIN

RUN = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "64"]


# --- (1) a NaN straggler order statistic ------------------------------------------------------------------------

@pytest.fixture
def nan_order_statistic(monkeypatch: pytest.MonkeyPatch) -> None:
    """E[max of N] (cost.stragglers.expected_max_step, the order statistic every sync mode's wait is built on) as
    NaN: what a gamma cv of 1e-200 gave before fuzz31 refused such a cv at input."""
    real = st.expected_max_step
    monkeypatch.setattr(st, "expected_max_step", lambda *a, **k: np.asarray(real(*a, **k)) * np.nan)


@pytest.mark.parametrize("command, part", [("predict", "straggler time"), ("scale", "straggler time"),
                                           ("plan", "sync step per second of one worker's step")])
def test_a_nan_straggler_time_is_an_error_not_zero_tokens(cli: Any, nan_order_statistic: None, command: str,
                                                         part: str) -> None:
    r = cli(command, *RUN)
    assert r.code == 2, (r.code, r.out[-400:])
    assert r.out == "" and "tokens/s" not in r.err
    (line,) = r.err.splitlines()
    assert line.startswith(f"error: result: the step model's {part} is nan (not a finite number >= 0)"), line


def test_refusal_names_the_part_else_the_total() -> None:
    """dp_comm (the step less the others) is named only when it alone is wrong; finite parts whose sum overflows
    name the total; a negative part is refused as a NaN is."""
    ok = {"a": np.array([1.0, 2.0]), "dp_comm": np.array([0.0, 0.0])}
    refuse_non_finite(ok, ok["a"] + ok["dp_comm"])  # nothing wrong: no error
    nan = {"dp_comm": np.array([np.nan, 0.0]), "straggler": np.array([np.nan, 1.0])}
    with pytest.raises(ValueError, match=r"^result: the step model's straggler is nan .* for 1 of 2 candidates"):
        refuse_non_finite(nan, nan["dp_comm"] + nan["straggler"])
    with pytest.raises(ValueError, match=r"^result: the step model's dp_comm is -1\.0 .* for 1 of 1 candidates"):
        refuse_non_finite({"dp_comm": np.array([-1.0]), "b": np.array([0.5])}, np.array([-0.5]))
    big = {"a": np.array([1e308]), "b": np.array([1e308])}
    with pytest.raises(ValueError, match=r"^result: the step model's total is inf "):
        refuse_non_finite(big, big["a"] + big["b"])


def test_predict_refuses_a_non_finite_number_it_would_have_zeroed(monkeypatch: pytest.MonkeyPatch) -> None:
    """predict's display turned any non-finite number into 0 (a NaN staleness read 0): now an error."""
    real = predict_module.evaluate

    def nan_staleness(*a: Any, **k: Any) -> Any:
        res = real(*a, **k)
        return msgspec.structs.replace(res, mean_staleness=np.full(np.shape(res.mean_staleness), np.nan))

    monkeypatch.setattr(predict_module, "evaluate", nan_staleness)
    with pytest.raises(ValueError, match=r"^result: a predicted quantity is nan; an internal invariant"):
        scalemodel.predict("dgx-h100", "llama3-8b", 64)


# --- (2) sensitivity's straggler CV at the edge of its distribution's range -------------------------------------

def _tokens(cli: Any, dist: str, cv: float) -> float:
    r = cli("predict", *RUN, "--set", f"cluster.variability.dist={dist}", "--straggler-cv", repr(cv), "--json")
    assert r.code == 0, r.err
    return float(json.loads(r.out)["throughput"]["tokens_per_s"])


def _sensitivity(cli: Any, dist: str, cv: float, *extra: str) -> tuple[dict[str, Any], list[str]]:
    r = cli("sensitivity", *RUN, "--set", f"cluster.variability.dist={dist}", "--straggler-cv", repr(cv), "--json",
            *extra)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    (row,) = [p for p in doc["parameters"] if p["name"] == "straggler CV"]
    return row, doc["notes"]


def test_factor_past_the_weibull_range_holds_the_cv_at_its_edge(cli: Any) -> None:
    """Weibull cv 9.9 / 1e6 = 9.9e-6 < 1.3e-5 (fuzz32's floor; 0.001 before): priced at 1.3e-5, which the row and a note
    naming --factor say; the ratio is predict's at cv 1.3e-5 over predict's at 9.9 (a lower bound on what 9.9e-6 buys:
    less variance, less wait); the stragglers group's ratio is the same (the clock jitter CV, its other member, prices 0
    on dgx-h100's H100 only through the jitter part, which does not move the straggler's cv)."""
    row, notes = _sensitivity(cli, "weibull", 9.9, "--factor", "1e6")
    assert row["improved_by"] == "/1e+06 (held at 0.0013%)"
    assert row["throughput_ratio"] == pytest.approx(_tokens(cli, "weibull", WEIBULL_CV_MIN)
                                                    / _tokens(cli, "weibull", 9.9), rel=1e-9)
    (note,) = [n for n in notes if n.startswith("--factor")]
    assert "straggler CV 9.9 to 9.9e-06 (a Weibull cv is outside [1.3e-05, 1e+14])" in note
    assert "priced at 1.3e-05" in note


def test_a_weibull_cv_at_its_lower_edge_takes_a_one_sided_elasticity(cli: Any) -> None:
    """cv at the floor (1.3e-5 since fuzz32, 0.001 before): the step down (x e^-0.01) is outside the range, so the
    elasticity is (ln X(cv e^0.01) - ln X(cv)) / 0.01, not a kink (it was refused before); /2 is held at cv (ratio
    1)."""
    cv = WEIBULL_CV_MIN
    row, notes = _sensitivity(cli, "weibull", cv)
    want = (math.log(_tokens(cli, "weibull", cv * math.exp(0.01))) - math.log(_tokens(cli, "weibull", cv))) / 0.01
    assert want < 0 and row["elasticity"] == pytest.approx(want, rel=1e-6)
    assert row["improved_by"] == "/2 (held at 0.0013%)" and row["throughput_ratio"] == 1.0
    assert any(n.startswith("straggler CV: at the edge of the weibull range") for n in notes)
    assert not any("kink" in n for n in notes)


def test_a_shifted_exponential_at_cv_1_takes_a_one_sided_elasticity(cli: Any) -> None:
    """cv 1 (the most a shifted exponential has): the step up is outside, the elasticity is over the step down;
    /2 is inside the range and priced as asked."""
    row, _ = _sensitivity(cli, "shifted-exp", 1.0)
    x1, x_dn = _tokens(cli, "shifted-exp", 1.0), _tokens(cli, "shifted-exp", math.exp(-0.01))
    assert row["elasticity"] == pytest.approx((math.log(x1) - math.log(x_dn)) / 0.01, rel=1e-6)
    assert row["improved_by"] == "/2"
    assert row["throughput_ratio"] == pytest.approx(_tokens(cli, "shifted-exp", 0.5) / x1, rel=1e-9)
