"""Prediction intervals from the model's own validation residuals (docs/model.md#intervals).

Every published run `scripts/validate_training.py` compares leaves a signed speed error
``e = predicted speed / measured speed - 1`` (``scalemodel/data/validation_residuals.json``, written by
``scripts/build_residuals.py``). A prediction is matched to the most specific family of validated runs
with at least :data:`MIN_CASES` cases, in this order of keys: accelerator generation, parallelism family
(TP/PP/DP vs ZeRO-3/FSDP), dense vs MoE, precision; dropping keys from the end until enough cases
remain. The band is that family's error range (its 10th-90th percentile from :data:`QUANTILE_FROM`
cases on, its min-max below) applied to the prediction: the measured step time would be
``t (1 + e)``, the measured throughput ``x / (1 + e)``.

Nothing similar validated (fewer than :data:`MIN_CASES` cases of the accelerator generation, none or a few, and
the result says which) is out of distribution: the result says so, and the band is the whole validation set's
error range (min to max), doubled, not a narrow one. A job far outside the GPU counts of its family (more than
:data:`SCALE_MARGIN` x beyond them) is flagged the same way.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

RESIDUALS = Path(__file__).resolve().parents[1] / "data" / "validation_residuals.json"
MIN_CASES = 3
QUANTILE_FROM = 10
SCALE_MARGIN = 4.0
KEYS = ("generation", "parallelism", "model", "precision")


class Interval(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """A band on the step time (and the throughputs), with where it comes from."""

    low: float  # smallest error of the family (a negative e: the run was faster than predicted)
    high: float  # largest error (the model predicted a faster run than measured)
    family: dict[str, str]
    cases: int
    out_of_distribution: bool
    reason: str

    def step_time(self, t: float) -> tuple[float, float]:
        return t * (1.0 + self.low), t * (1.0 + self.high)

    def throughput(self, x: float) -> tuple[float, float]:
        return x / (1.0 + self.high), x / (1.0 + self.low)

    def label(self) -> str:
        fam = " ".join(self.family.values()) or "all validated runs"
        return f"{fam}, {self.cases} published run{'s' if self.cases != 1 else ''}"

    def payload(self, step_time_s: float, tokens_per_s: float, mfu: float) -> dict[str, Any]:
        t_lo, t_hi = self.step_time(step_time_s)
        x_lo, x_hi = self.throughput(tokens_per_s)
        m_lo, m_hi = self.throughput(mfu)
        return {"step_time_s": [t_lo, t_hi], "tokens_per_s": [x_lo, x_hi], "mfu": [m_lo, m_hi],
                "speed_error_range": [self.low, self.high], "family": self.family, "cases": self.cases,
                "out_of_distribution": self.out_of_distribution, "basis": self.reason}


@cache
def _residuals() -> tuple[dict[str, Any], ...]:
    if not RESIDUALS.is_file():
        return ()
    return tuple(json.loads(RESIDUALS.read_text())["cases"])


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` by numpy.quantile's default method ("linear", Hyndman and Fan's type 7)
    with its arithmetic: the order statistics around index (n - 1) q, interpolated as numpy's ``_lerp``
    does. Written out because numpy.quantile imports numpy.ma (10 ms a query) from numpy 2.3 on."""
    x = sorted(float(v) for v in values)
    h = (len(x) - 1) * q
    lo = math.floor(h)
    if lo >= len(x) - 1:
        return x[-1]
    a, b, t = x[lo], x[lo + 1], h - lo
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def _band(errors: list[float]) -> tuple[float, float]:
    if len(errors) >= QUANTILE_FROM:
        return quantile(errors, 0.1), quantile(errors, 0.9)
    return float(min(errors)), float(max(errors))


def interval_for(generation: str, parallelism: str, model: str, precision: str, gpus: int) -> Interval | None:
    """The band for a job of these family keys at ``gpus`` GPUs (None when no residuals are shipped)."""
    cases = _residuals()
    if not cases:
        return None
    want = {"generation": generation, "parallelism": parallelism, "model": model, "precision": precision}
    for n_keys in range(len(KEYS), 0, -1):
        keys = KEYS[:n_keys]
        match = [c for c in cases if all(c[k] == want[k] for k in keys)]
        if len(match) >= MIN_CASES:
            lo, hi = _band([c["speed_error"] for c in match])
            sizes = [c["gpus"] for c in match if c.get("gpus")]
            family = {k: want[k] for k in keys}
            if sizes and not (min(sizes) / SCALE_MARGIN <= gpus <= max(sizes) * SCALE_MARGIN):
                return Interval(max(2 * lo, -0.9), 2 * hi, family, len(match), True,
                                f"{gpus} GPUs is outside the {min(sizes)}-{max(sizes)} GPUs of the similar "
                                "validated runs: their error range, doubled")
            dropped = [k for k in KEYS if k not in keys]
            basis = "error range of the most similar validated runs" + (
                f" (not matched on {', '.join(dropped)})" if dropped else "")
            return Interval(lo, hi, family, len(match), False, basis)
    errors = [c["speed_error"] for c in cases]
    own = sum(c["generation"] == generation for c in cases)  # fewer than MIN_CASES, perhaps not none
    what = (f"no validated run on {generation} accelerators" if not own else
            f"only {own} validated run{'s' if own != 1 else ''} on {generation} accelerators (a band needs "
            f"{MIN_CASES})")
    return Interval(max(2 * min(min(errors), 0.0), -0.9), 2 * max(max(errors), 0.0), {}, len(cases), True,
                    f"{what}: the whole validation set's error range, doubled")


def generation_of(accelerator_family: str) -> str:
    """The validation's accelerator generation for a catalog family (ampere, hopper, blackwell, ...)."""
    return accelerator_family.lower()


def precision_family(precision: str) -> str:
    if precision in ("fp8", "fp4"):  # fp4 (NVFP4) its own family: no validated run matches it yet
        return precision
    return "fp32" if precision in ("fp32", "tf32") else "16-bit"
