"""`scalemodel stragglers`: the expected slowest of N workers and what sync strategies do about it."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from scalemodel.commands.common import JsonOption
from scalemodel.errors import InputError

DIST_CHOICES = ("normal", "lognormal", "gamma", "weibull", "exp", "shifted-exp")
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def summarise(workers: int, dist: str, mean_s: float, cv: float, backup: int, ssp: int, local: int,
              comm_s: float, kappa: float, samples: list[float] | None = None) -> dict[str, Any]:
    """Pure composition of the cost models into the command's result (plain JSON-ready values)."""
    import numpy as np

    from scalemodel.cost import stragglers as st
    from scalemodel.cost.sync import sync_step

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
        from scipy.special import ndtr

        notes.append(f"a normal with cv {cv:g} puts {100 * float(ndtr(-1 / cv)):.2g} % of step times below zero; "
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
            "mean_staleness": float(r.mean_staleness), "efficiency": float(r.efficiency),
            "effective_step_s": step / float(r.efficiency), "workers_total": int(r.workers_total),
        })
    return {
        "inputs": {"workers": workers, "dist": "empirical" if samples is not None else dist, "mean_s": mean_s,
                   "cv": eff_cv if samples is None else cv, "backup": backup, "ssp": ssp, "local": local,
                   "comm_s": comm_s, "staleness_kappa": kappa, "samples": len(samples) if samples else None},
        "workers": workers,
        "expected_mean_s": mean_s,
        "expected_max_s": e_max,
        "slowdown": e_max / mean_s,
        "straggler_delay_s": max(e_max - mean_s, 0.0),
        "quantiles_s": quant,
        "strategies": strategies,
        "notes": notes + [
            "step_time_s is seconds per worker iteration (one gradient per worker); mean_staleness is in "
            "global steps; efficiency = 1/(1 + kappa * staleness) with kappa set by --staleness-kappa "
            "(a heuristic, not a universal constant)"],
    }


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("stragglers")
    def stragglers(
        workers: Annotated[int, typer.Option("--workers", "-n", help="Synchronous workers N.")],
        dist: Annotated[str, typer.Option("--dist", help="Per-worker step-time distribution: "
                                          + "|".join(DIST_CHOICES) + ".")] = "normal",
        mean: Annotated[str, typer.Option("--mean", help="Mean per-worker step time, e.g. 1s or 850ms.")] = "1s",
        cv: Annotated[float, typer.Option("--cv", help="Coefficient of variation sd/mean (exp: ignored, 1).")] = 0.05,
        backup: Annotated[int | None, typer.Option("--backup", help="Backup workers B (wait for N of N+B); "
                                                   "default ceil(4% of N), as Chen et al.'s 96+4.")] = None,
        ssp: Annotated[int, typer.Option("--ssp", help="Staleness bound S shown for SSP.")] = 3,
        local: Annotated[int, typer.Option("--local", help="Averaging period H shown for local SGD.")] = 4,
        comm: Annotated[str, typer.Option("--comm", help="Synchronisation (communication) time per step.")] = "0s",
        kappa: Annotated[float, typer.Option("--staleness-kappa", help="Convergence penalty per global step "
                                             "of staleness: efficiency = 1/(1 + kappa*staleness).")] = 0.5,
        samples: Annotated[str | None, typer.Option("--samples", help="File of measured step times: one per "
                                                    "line, or a YAML/JSON list.")] = None,
        as_json: JsonOption = False,
    ) -> None:
        """Expected slowest of N workers, slowdown vs the mean, and the effect of backup workers, SSP and local SGD."""
        from scalemodel.commands.common import quantity

        if workers < 1:
            raise InputError(f"--workers must be >= 1, got {workers}", where="--workers", allowed="an integer >= 1")
        if workers > 10**8:
            raise InputError(f"--workers {workers} is beyond the supported 1e8", where="--workers")
        if dist not in DIST_CHOICES:
            raise InputError(f"unknown distribution {dist!r}", where="--dist", allowed=", ".join(DIST_CHOICES))
        if not (math.isfinite(cv) and cv >= 0):
            raise InputError(f"--cv must be a finite number >= 0, got {cv}", where="--cv")
        if dist == "shifted-exp" and cv > 1:
            raise InputError(f"shifted-exp needs --cv <= 1, got {cv}", where="--cv",
                             allowed="0..1, or another --dist")
        b = math.ceil(0.04 * workers) if backup is None else backup
        if b < 0:
            raise InputError(f"--backup must be >= 0, got {b}", where="--backup")
        if ssp < 0:
            raise InputError(f"--ssp must be >= 0, got {ssp}", where="--ssp")
        if local < 1:
            raise InputError(f"--local must be >= 1, got {local}", where="--local")
        if not (math.isfinite(kappa) and kappa >= 0):
            raise InputError(f"--staleness-kappa must be >= 0, got {kappa}", where="--staleness-kappa")
        mean_s = quantity(mean, "time", "--mean")
        if not mean_s > 0:
            raise InputError(f"--mean must be > 0, got {mean!r}", where="--mean")
        comm_s = quantity(comm, "time", "--comm")
        if comm_s < 0:
            raise InputError(f"--comm must be >= 0, got {comm!r}", where="--comm")
        data = None
        if samples is not None:
            from scalemodel.specs.samples import read_samples

            data = read_samples(samples)
        try:
            result = summarise(workers, dist, mean_s, cv, b, ssp, local, comm_s, kappa, data)
        except InputError as exc:
            raise exc.at("stragglers") from None
        if as_json:
            from scalemodel.report.output import emit_json

            emit_json(result, "stragglers")
            return
        from scalemodel.report.stragglers import render

        render(result)
