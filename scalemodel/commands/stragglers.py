"""`scalemodel stragglers`: the expected slowest of N workers and what sync strategies do about it."""

from __future__ import annotations

import math

from scalemodel.choices import Optimizer
from scalemodel.commands.args import Command, integer, number, opt
from scalemodel.commands.options import JSON, MAX_COUNT, check_kappa, ranged_quantity
from scalemodel.engine.stragglers import DIST_CHOICES, MODEL_FAMILIES
from scalemodel.engine.stragglers import stragglers as run
from scalemodel.errors import InputError
from scalemodel.report.stragglers import render_stragglers
from scalemodel.specs.cluster import STRAGGLER_CV_MAX, WEIBULL_CV_MIN, cv_refusal
from scalemodel.specs.samples import read_samples


def stragglers(*, workers: int, dist: str, mean: str, cv: float, backup: int | None, ssp: int, local: int, comm: str,
               kappa: float | None, optimizer: str | None, family: str, samples: str | None, as_json: bool) -> None:
    """Expected slowest of N workers, slowdown vs the mean, and the effect of backup workers, SSP and local SGD."""
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}", where="--workers", allowed="an integer >= 1")
    if workers > 10**8:
        raise InputError(f"--workers {workers} is beyond the supported 1e8", where="--workers",
                         allowed="an integer from 1 to 1e8")
    if dist not in DIST_CHOICES:
        raise InputError(f"unknown distribution {dist!r}", where="--dist", allowed=", ".join(DIST_CHOICES))
    if not (math.isfinite(cv) and 0 <= cv < STRAGGLER_CV_MAX):
        raise InputError(f"--cv must be a finite number >= 0 and below {STRAGGLER_CV_MAX:g}, got {cv:g}", where="--cv",
                         allowed=f"0 <= cv < {STRAGGLER_CV_MAX:g} (as cluster.straggler.cv; weibull: 0 or "
                                 f">= {WEIBULL_CV_MIN:g}; shifted-exp: <= 1)")
    if dist == "shifted-exp" and cv > 1:
        raise InputError(f"shifted-exp needs --cv <= 1, got {cv}", where="--cv",
                         allowed="0..1, or another --dist")
    if (why := cv_refusal(dist, cv)) is not None:
        raise InputError(f"{why[0]} (--dist {dist}, --cv {cv:g})", where="--cv", allowed=why[1])
    b = math.ceil(0.04 * workers) if backup is None else backup
    for option, value, low in (("--backup", b, 0), ("--ssp", ssp, 0), ("--local", local, 1)):
        if not low <= value <= MAX_COUNT:
            raise InputError(f"{option} must be an integer from {low} to {MAX_COUNT:.0e}, got {value}", where=option,
                             allowed=f"an integer from {low} to {MAX_COUNT:.0e}")
    check_kappa(kappa)
    if optimizer is not None:
        optimizer = Optimizer.parse(optimizer, where="--optimizer").label
    if family not in MODEL_FAMILIES:
        raise InputError(f"unknown model family {family!r}", where="--family", allowed=", ".join(MODEL_FAMILIES))
    mean_s = ranged_quantity(mean, "time", "--mean")
    if not mean_s > 0:
        raise InputError(f"--mean must be > 0, got {mean!r}", where="--mean", allowed="a time > 0, e.g. 1.5s")
    comm_s = ranged_quantity(comm, "time", "--comm")
    if comm_s < 0:
        raise InputError(f"--comm must be >= 0, got {comm!r}", where="--comm", allowed="a time >= 0, e.g. 20ms")
    try:  # the file's errors name the option (was "error: 1e300: samples file not found": no option)
        data = read_samples(samples) if samples is not None else None
    except InputError as exc:
        raise exc.at("--samples") from None
    result = run(workers, dist, mean_s, cv, b, ssp, local, comm_s, kappa, data, optimizer=optimizer, family=family)
    render_stragglers(result, as_json=as_json)


COMMAND = Command("stragglers", stragglers, (
    opt("--workers", "-n", type=integer, required=True, help="Synchronous workers N."),
    opt("--dist", default="normal", help="Per-worker step-time distribution: " + "|".join(DIST_CHOICES) + "."),
    opt("--mean", default="1s", help="Mean per-worker step time, e.g. 1s or 850ms."),
    opt("--cv", type=number, default=0.05, help="Coefficient of variation sd/mean (exp: ignored, 1)."),
    opt("--backup", type=integer, help="Backup workers B (wait for N of N+B); default ceil(4% of N), as Chen et "
                                       "al.'s 96+4."),
    opt("--ssp", type=integer, default=3, help="Staleness bound S shown for SSP."),
    opt("--local", type=integer, default=4, help="Averaging period H shown for local SGD."),
    opt("--comm", default="0s", help="Synchronisation (communication) time per step, e.g. 50ms."),
    opt("--staleness-kappa", type=number, dest="kappa",
        help="Convergence penalty per global step of staleness: efficiency = 1/(1 + kappa*staleness); default: "
             "fitted for --optimizer and --family (scalemodel/data/staleness_kappa.json), else borrowed from the "
             "fitted group the file names (a note says which)."),
    opt("--optimizer", help="Optimizer, for the default kappa: " + "|".join(Optimizer.labels()) + " (adamw is "
                            "adam, nesterov momentum); default: not stated (the file's fallback)."),
    opt("--family", default="generic", help="Model family, for the default kappa: " + "|".join(MODEL_FAMILIES)
                                            + "."),
    opt("--samples", help="File of measured step times (a bare number is seconds, 950ms is taken): one per line, "
                           "or a YAML/JSON list."),
    JSON))
