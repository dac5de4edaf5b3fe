"""The staleness penalty kappa: its fit to published steps-to-target measurements, and its defaults.

Reference: docs/model.md#sync. The step model's penalty (:func:`scalemodel.cost.sync.staleness_efficiency`)

    efficiency = 1 / (1 + kappa * s),     s = mean staleness in global steps,

is a first-order heuristic **[assumption]**: time to target = synchronous steps x step time / efficiency,
so a run whose gradients are s global steps stale needs

    r = S(s) / S(0) = 1 + kappa * s

times the synchronous run's steps. r is the quantity the staleness studies report as "batches (or
iterations) to reach the target, normalised by the s = 0 run" (Dai et al., ICLR 2019, arXiv:1810.03264,
Section 3). Theory gives only bounds of the same first order in the delay (the asynchronous-SGD rate of
Lian et al., NIPS 2015, arXiv:1506.08272, carries a term linear in the maximum staleness), not a constant.

Fit (least squares through r = 1 at s = 0; :func:`fit_kappa`), over n published points (s_i, r_i):

    kappa = sum_i s_i (r_i - 1) / sum_i s_i^2
    se    = sqrt( sum_i (r_i - 1 - kappa s_i)^2 / (n - 1) ) / sqrt( sum_i s_i^2 )       (n >= 2)
    95 %  = kappa -+ t_{0.975, n-1} se  (Student t), the lower end clipped at 0 (kappa >= 0)

Defaults: ``scalemodel/data/staleness_kappa.json``, written by ``scripts/fit_convergence.py --write`` from
``validation/convergence.yaml``: one fitted kappa per (optimizer, model family) with its interval and
sources (a group without published points is fitted to our own simulation's, ``hardware/measurements/
staleness.yaml``, source ``scalemodel-dai-protocol``, when it has any); a family without points borrows the
fit the file names for it, and what has neither gets the file's ``fallback``: the fit it names as lender (today
adam/transformer), reported as borrowed, with the lender's sources and interval and what the sources say of the
job's optimizer against it (:func:`default_kappa`). ``--staleness-kappa`` overrides all.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import Optimizer
from scalemodel.errors import InputError

Array = Any

#: The committed fit output (scripts/fit_convergence.py --write); a test re-runs the fit and compares.
DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data",
                             "staleness_kappa.json")
#: Model families a point or a default is keyed on ("generic" is any non-transformer workload).
MODEL_FAMILIES = ("transformer", "cnn", "mlp", "generic")


class KappaFit(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """A least-squares kappa over ``n`` points, with a 95 % interval (None when n < 2: no spread to estimate)."""

    kappa: float
    low: float | None
    high: float | None
    n: int
    rms_residual: float  # of r - 1 - kappa s, in units of the synchronous step count


class KappaDefault(msgspec.Struct, frozen=True):
    """The kappa a job gets without ``--staleness-kappa``, and where it comes from (one line)."""

    kappa: float
    source: str


def _t975(dof: int) -> float:
    """Two-sided 95 % Student-t quantile."""
    from scipy import stats  # optional heavy dependency: only fits need it

    return float(stats.t.ppf(0.975, dof))


def fit_kappa(staleness: Array, steps_ratio: Array) -> KappaFit:
    """Least-squares kappa of r - 1 = kappa s (module docstring) with its 95 % Student-t interval."""
    s = np.asarray(staleness, dtype=float).ravel()
    r = np.asarray(steps_ratio, dtype=float).ravel()
    if s.size == 0 or s.shape != r.shape:
        raise InputError(f"{s.size} staleness values and {r.size} steps ratios", where="points",
                         allowed="as many steps ratios as staleness values, at least one")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(r))) or np.any(s < 0) or np.any(r <= 0):
        raise InputError("a staleness is negative or a steps ratio <= 0, or one is not finite", where="points",
                         allowed="finite staleness >= 0 and finite steps ratios > 0")
    ss = float(np.sum(s * s))
    if ss <= 0:
        raise InputError("every point has staleness 0: kappa is not determined", where="points",
                         allowed="at least one point with staleness > 0")
    kappa = float(np.sum(s * (r - 1.0)) / ss)
    resid = r - 1.0 - kappa * s
    rms = float(math.sqrt(float(np.mean(resid * resid))))
    n = int(s.size)
    if n < 2:
        return KappaFit(max(kappa, 0.0), None, None, n, rms)
    se = math.sqrt(float(np.sum(resid * resid)) / (n - 1)) / math.sqrt(ss)
    half = _t975(n - 1) * se
    return KappaFit(max(kappa, 0.0), max(kappa - half, 0.0), kappa + half, n, rms)


def group_key(optimizer: str, family: str) -> str:
    """'OPTIMIZER/FAMILY' with the optimizer's canonical label (choices.Optimizer)."""
    if family not in MODEL_FAMILIES:
        raise InputError(f"unknown model family {family!r}", where="family", allowed=", ".join(MODEL_FAMILIES))
    return f"{Optimizer.normalize(optimizer)}/{family}"


@lru_cache(maxsize=4)
def load_defaults(path: str | None = None) -> dict[str, Any]:
    """The committed defaults file (parsed once)."""
    with open(path or DEFAULTS_FILE) as f:
        data: dict[str, Any] = json.loads(f.read())
    return data


def _fit_summary(fit: dict[str, Any]) -> str:
    """'95 % interval [lo, hi], n points: sources' (no interval for one point)."""
    ci = "" if fit.get("low") is None else f"95 % interval [{fit['low']:g}, {fit['high']:g}], "
    return f"{ci}{fit['n']} point{'s' if fit['n'] != 1 else ''}: {', '.join(fit['sources'])}"


def _fallback(table: dict[str, Any], key: str | None = None, optimizer: str | None = None) -> KappaDefault:
    """The file's fallback for ``key`` (None: no optimizer stated): a borrowed fit, named with its source, its
    interval and the direction the sources give for ``optimizer``; or a plain number with its status."""
    fb = table["fallback"]
    lender = fb.get("borrow")
    if lender is None:
        tail = f" (no fit for {key})" if key is not None else ""
        return KappaDefault(float(fb["kappa"]), f"kappa {fb['kappa']:g}: {fb['status']}{tail}")
    fit = table["fits"][lender]
    why = f"no fit for {key}: " if key is not None else ""
    text = f"kappa {fit['kappa']:g} borrowed from the {lender} fit ({_fit_summary(fit)}); {why}{fb['status']}"
    direction = (fb.get("direction") or {}).get(Optimizer.normalize(optimizer)) if optimizer is not None else None
    if direction:
        text += f"; {direction}"
    return KappaDefault(float(fit["kappa"]), text)


def fallback_kappa(table: dict[str, Any] | None = None) -> float:
    """The kappa of a job whose optimizer or model family has no fit and borrows none."""
    return _fallback(table or load_defaults()).kappa


def default_kappa(optimizer: str | None, family: str, table: dict[str, Any] | None = None, *,
                  unstated: str = "training.optimizer not given") -> KappaDefault:
    """kappa for (optimizer, family): its own fit, else the fit its ``borrow`` entry names, else the fallback.

    ``optimizer`` None (not stated: ``unstated`` says where it would be) gets the fallback. The source line says
    which it was, with the fit's sources, and for a borrowed value where it is borrowed from."""
    table = table or load_defaults()
    if optimizer is None:
        if family not in MODEL_FAMILIES:
            raise InputError(f"unknown model family {family!r}", where="family", allowed=", ".join(MODEL_FAMILIES))
        fb = _fallback(table)
        return KappaDefault(fb.kappa, f"{fb.source} ({unstated})")
    key = group_key(optimizer, family)
    fits = table.get("fits", {})
    if key in fits:
        f = fits[key]
        return KappaDefault(float(f["kappa"]), f"kappa {f['kappa']:g} fitted for {key} ({f['n']} points: "
                                               f"{', '.join(f['sources'])})")
    lender = table.get("borrow", {}).get(key)
    if lender in fits:
        f = fits[lender]
        return KappaDefault(float(f["kappa"]), f"kappa {f['kappa']:g} borrowed from the {lender} fit "
                                               f"(no published point for {key})")
    return _fallback(table, key, optimizer)
