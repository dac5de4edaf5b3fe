"""`stragglers`: the expected slowest of N workers and what the sync strategies do about it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalemodel.cost import staleness
from scalemodel.cost import stragglers as st
from scalemodel.cost.sync import sync_step
from scalemodel.errors import InputError

#: Per-worker step-time distributions the command accepts (those of :mod:`scalemodel.cost.stragglers`).
DIST_CHOICES: tuple[str, ...] = tuple(st.DISTS)
#: Model families the staleness penalty's kappa is keyed on (:mod:`scalemodel.cost.staleness`).
MODEL_FAMILIES: tuple[str, ...] = staleness.MODEL_FAMILIES
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True)
class StragglersResult:
    """The slowest of N workers (mean, quantiles) and one row per sync strategy (plain numbers)."""

    inputs: dict[str, Any]
    workers: int
    expected_mean_s: float
    expected_max_s: float
    quantiles_s: dict[str, float]
    strategies: list[dict[str, Any]]
    notes: list[str]

    @property
    def slowdown(self) -> float:
        return self.expected_max_s / self.expected_mean_s

    @property
    def straggler_delay_s(self) -> float:
        return max(self.expected_max_s - self.expected_mean_s, 0.0)

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "workers": self.workers, "expected_mean_s": self.expected_mean_s,
                "expected_max_s": self.expected_max_s, "slowdown": self.slowdown,
                "straggler_delay_s": self.straggler_delay_s, "quantiles_s": self.quantiles_s,
                "strategies": self.strategies, "notes": self.notes}


def stragglers(workers: int, dist: str, mean_s: float, cv: float, backup: int, ssp: int, local: int,
               comm_s: float, kappa: float | None, samples: list[float] | None = None, *,
               optimizer: str | None = None, family: str = "generic") -> StragglersResult:
    """Compose the straggler and sync cost models for N workers (the engine behind `scalemodel stragglers`).

    ``samples``: measured step times already read (seconds); they replace (dist, mean, cv) for BSP
    and backup workers (exact resampling), and a gamma with their mean and cv stands in for the
    windowed strategies. ``kappa`` None: the staleness penalty's default for (``optimizer``, ``family``),
    selected as for ``predict`` (:func:`scalemodel.cost.staleness.default_kappa`); a number overrides it.
    Errors from the cost models are reported at ``stragglers``.
    """
    _scalars(mean_s=mean_s, cv=cv, comm_s=comm_s, kappa=kappa)
    if samples is not None:
        try:
            arr = np.asarray(samples)
        except (TypeError, ValueError):  # a ragged list: "setting an array element with a sequence"
            arr = np.zeros((0, 0))
        # review22g: asarray(dtype=float) parsed text and cast booleans (["1.0", "1.1"] and [True, 1.1] ran as step
        # times) while ["1 s"] was refused; a list's booleans are cast before the dtype shows them, so each is looked at
        if arr.ndim != 1 or arr.dtype.kind not in "iuf" or (isinstance(samples, (list, tuple)) and any(
                isinstance(x, (bool, np.bool_)) for x in samples)):
            raise InputError(f"samples: {str(samples)[:60]} is not a list of numbers", where="stragglers",
                             allowed="a list or 1-d array of step times in seconds")
        samples = [float(x) for x in arr]
    if kappa is None:
        d = staleness.default_kappa(optimizer, family, unstated="--optimizer not given")
        kappa, source = d.kappa, d.source
    else:
        source = f"kappa {kappa:g} from --staleness-kappa"
    try:
        return _stragglers(workers, dist, mean_s, cv, backup, ssp, local, comm_s, kappa, samples, source)
    except InputError as exc:
        raise exc.at("stragglers") from None


def _scalars(**values: Any) -> None:
    """Refuse an array where a number is taken (the Python API's callers): np.array([0.1]) as cv raised NumPy's
    TypeError "only 0-dimensional arrays can be converted to Python scalars"."""
    for name, v in values.items():
        if v is not None and np.ndim(v) != 0:
            raise InputError(f"{name}: an array of shape {np.shape(v)} is not a number", where="stragglers",
                             allowed="a real number")


def _stragglers(workers: int, dist: str, mean_s: float, cv: float, backup: int, ssp: int, local: int,
                comm_s: float, kappa: float, samples: list[float] | None, kappa_source: str) -> StragglersResult:
    notes = []
    if samples is not None:
        x = np.asarray(samples)
        mean_s, cv = st.empirical_mean_cv(x)
        e_max = float(st.empirical_expected_kth(x, workers, workers))
        quant = {k: float(st.empirical_quantile_max(x, q, workers)) for k, q in QUANTILES}
        backup_compute = float(st.empirical_expected_kth(x, workers, workers + backup))
        model_dist = "gamma"  # moment-matched stand-in for the windowed strategies
        notes.append(f"{len(samples)} measured step times resampled exactly for BSP/backup; SSP/local use a "
                     "gamma with the samples' mean and cv")
    else:
        model_dist = dist
        e_max = float(st.expected_max_step(mean_s, cv, workers, dist))
        quant = {k: float(st.quantile_max(q, workers, mean_s, cv, dist)) for k, q in QUANTILES}
        backup_compute = float(st.expected_max_step(mean_s, cv, workers + backup, dist, k=workers))
    eff_cv = cv if model_dist != "exp" else 1.0
    if samples is None and dist == "normal" and cv > 0.25:
        below_zero = 0.5 * math.erfc(1.0 / (cv * math.sqrt(2.0)))  # Phi(-1/cv), the normal's mass below 0
        notes.append(f"a normal with cv {cv:g} puts {100 * below_zero:.2g} % of step times below zero; "
                     "lognormal or gamma is the better model for such jitter")
    strategies = []
    for label in ("bsp", f"backup:{backup}", "asp", f"ssp:{ssp}", f"local:{local}"):
        r = sync_step(label, workers, mean_s, eff_cv, model_dist, comm_s=comm_s, kappa=kappa)
        step = float(r.step_time_s)
        if label == "bsp":
            step = e_max + comm_s
        elif label.startswith("backup"):
            step = backup_compute + comm_s
        upd = float(r.updates_per_s) if label not in ("bsp",) and not label.startswith("backup") else 1 / step
        strategies.append({
            "sync": label, "step_time_s": step, "updates_per_s": upd,
            # predict's and scale's name for the sync mode's staleness multiplier (one vocabulary; 'efficiency' until
            # fix30, renamed without an alias as scale's batch_efficiency was in ux21)
            "mean_staleness": float(r.mean_staleness), "statistical_efficiency": float(r.efficiency),
            "effective_step_s": step / float(r.efficiency), "workers_total": int(r.workers_total),
        })
    return StragglersResult(
        inputs={"workers": workers, "dist": "empirical" if samples is not None else dist, "mean_s": mean_s,
                "cv": eff_cv if samples is None else cv, "backup": backup, "ssp": ssp, "local": local,
                "comm_s": comm_s, "staleness_kappa": kappa, "staleness_kappa_source": kappa_source,
                "samples": len(samples) if samples else None},
        workers=workers, expected_mean_s=mean_s, expected_max_s=e_max, quantiles_s=quant, strategies=strategies,
        notes=notes + [
            "step_time_s is seconds per worker iteration (one gradient per worker); mean_staleness is in "
            "global steps; efficiency = 1/(1 + kappa * staleness) (a heuristic, not a universal constant); "
            "updates_per_s counts what each mode applies (cost/sync.py): one update of N gradients per BSP or backup "
            "step, one per gradient under ASP and SSP (N per worker iteration), one local step of a worker under "
            "local SGD, so compare modes by effective_step_s, not by updates/s",
            f"staleness penalty: {kappa_source}"])
