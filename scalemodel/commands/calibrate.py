"""`scalemodel calibrate nccl-tests LOG --cluster C`: fit a tier's latency and bandwidth to nccl-tests output."""

from __future__ import annotations

from pathlib import Path

from scalemodel.commands.args import Command, arg, integer, number, opt, switch
from scalemodel.commands.options import CLUSTER, JSON, SET, comma_list, load_cluster_with, positive_int
from scalemodel.cost.algorithms import APPLICABLE
from scalemodel.engine.calibrate import DEFAULT_TOLERANCE, check_ranks, collective_op, overlay_yaml
from scalemodel.engine.calibrate import calibrate as run
from scalemodel.engine.calibrate_runs import fit_runs, scale_change, scale_target
from scalemodel.engine.calibrate_runs import overlay_yaml as runs_overlay_yaml
from scalemodel.errors import InputError
from scalemodel.report.calibrate import render_calibration, render_runs_fit
from scalemodel.report.output import check_output_path, write_file
from scalemodel.specs.loader import builtin_path, reference_from
from scalemodel.specs.nccl_tests import read_nccl_tests
from scalemodel.specs.runs import read_runs

#: The overlay is a cluster spec (YAML with ``extends:``): an --out of another kind (o.csv, o.json) got YAML anyway.
OVERLAY_SUFFIXES = (".yaml", ".yml")


def calibrate(*, args: list[str], cluster: str | None, tier: str | None, out: str | None, ranks: int | None,
              op: str | None, algo: str, tolerance: float, force: bool, factors: str | None, predict_at: int | None,
              mode: str, sets: list[str] | None, as_json: bool) -> None:
    """Fit one network tier to nccl-tests measurements, or the step model's factors to measured runs.

    `calibrate nccl-tests LOG --cluster C` exits 1 (and writes no overlay) when a fitted parameter
    sits on a solver bound, a residual exceeds --tolerance, or the log's hosts x GPUs per host
    differ from the cluster's layout. `calibrate runs FILE` fits a compute factor, one bandwidth factor
    per tier, an overlap efficiency and a per-step overhead to measured step times, tokens/s or training
    logs (docs/model.md#calibrate-runs): by default only those the runs identify, the others held at 1 and named
    (`--factors all` fits every one); it warns, and exits 0. `--predict-at N` shows what changes
    between the largest run and N GPUs.
    """
    if len(args) == 2 and args[0] == "runs":
        if cluster is not None or sets or tier is not None or ranks is not None or op is not None:
            raise InputError("--cluster, --set, --tier, --ranks and --op belong to the nccl-tests form",
                             where="calibrate runs", allowed="each run names its cluster in FILE")
        if algo != "ring" or tolerance != DEFAULT_TOLERANCE or force:  # not read by the runs fit: not ignored silently
            raise InputError("--algo, --tolerance and --force belong to the nccl-tests form", where="calibrate runs",
                             allowed="--factors, --predict-at, --mode and --out")
        calibrate_runs(args[1], out, as_json, factors, predict_at, mode)
        return
    if factors is not None or predict_at is not None or mode != "strong":
        raise InputError("--factors, --predict-at and --mode belong to the runs form", where="calibrate nccl-tests",
                         allowed="scalemodel calibrate runs FILE --factors compute,overhead_s --predict-at N")
    # the path as given (a str): a Path drops a trailing '/', and "nccl.log/" was read as the file
    if len(args) == 2 and args[0] == "nccl-tests":
        log_path = args[1]
    elif len(args) == 1 and args[0] not in ("runs", "nccl-tests"):  # the form's word without its file
        log_path = args[0]
    else:  # before --cluster: `calibrate runs` or three words is not a missing --cluster
        raise InputError(f"expected `nccl-tests LOG` or `runs FILE`, got {' '.join(args)[:200]!r}", where="calibrate",
                         allowed="scalemodel calibrate nccl-tests LOG --cluster C, or calibrate runs FILE")
    if cluster is None:
        raise InputError("missing --cluster", where="calibrate nccl-tests",
                         allowed="--cluster NAME or a cluster YAML")
    positive_int(ranks, "--ranks")
    check_ranks(ranks)
    if out is not None:
        check_output_path(out, "--out", OVERLAY_SUFFIXES)  # before the work; write_file checks again, inputs included
    log = read_nccl_tests(log_path, op=collective_op(op))
    check_ranks(ranks, log)
    spec = load_cluster_with(cluster, sets, "calibrate nccl-tests")
    result = run(log, spec, source=str(Path(log_path)), ranks=ranks, tier=tier, algorithm=algo,
                 out=str(out) if out else None, sets=sets, tolerance=tolerance)
    wrote = out is not None and (result.accepted or force)
    if wrote and out is not None:
        base = reference_from("cluster", cluster, Path(out).absolute().parent)
        write_file(out, overlay_yaml(result.fit, str(Path(log_path)), extends=base, sets=tuple(sets or ())), "--out")
    render_calibration(result, as_json=as_json, wrote=wrote)
    if not result.accepted and not force:
        raise SystemExit(1)


COMMAND = Command("calibrate", calibrate, (
    arg("args", "nccl-tests LOG (the word `nccl-tests` may come first), or `runs FILE` (measured training runs)",
        metavar="[nccl-tests] LOG | runs FILE", many=True),
    CLUSTER.but(help="Cluster (nccl-tests form; the runs form reads each run's cluster)."),
    opt("--tier", help="Tier to fit (default: outermost crossed)."),
    opt("--out", help="Write a YAML overlay (extends: CLUSTER)."),
    opt("--ranks", type=integer, help="Ranks in the log when it does not say."),
    opt("--op", help=f"Collective, when the log does not say: {'|'.join(APPLICABLE)}."),
    opt("--algo", default="ring", help="Algorithm the model uses for the fit: auto or one the collective runs "
                                       "(allreduce: " + "|".join(APPLICABLE["allreduce"]) + ")."),
    opt("--tolerance", type=number, default=DEFAULT_TOLERANCE,
        help="Largest accepted |model / measured - 1| at any size, a fraction (0.25 = 25%)."),
    switch("--force", help="Write the overlay and exit 0 even when the fit is questioned (warnings stay)."),
    opt("--factors", help="runs form: factors to fit, comma-separated, from compute, compute:fp8 (fp8 runs), "
                          "bandwidth:TIER (each tier), overlap and overhead_s, or all (default: those the runs "
                          "identify; the others are held and named)."),
    opt("--predict-at", type=integer, help="runs form: also show the fitted breakdown at N GPUs beside the largest "
                                           "measured run's, and which parts grew"),
    opt("--mode", default="strong", help="runs form with --predict-at: strong keeps the global batch, weak grows "
                                         "it with N"),
    SET, JSON))


def calibrate_runs(file: str, out: str | None, as_json: bool, factors: str | None = None,
                   predict_at: int | None = None, mode: str = "strong") -> None:
    """`calibrate runs FILE [--out overlay.yaml] [--predict-at N]`: fit, report, and write the overlay (never
    over an input)."""
    positive_int(predict_at, "--predict-at")
    if mode not in ("weak", "strong"):
        raise InputError(f"unknown scaling mode {mode!r}", where="--mode", allowed="weak or strong")
    if mode != "strong" and predict_at is None:  # was ignored without a word: --mode shapes only --predict-at's change
        raise InputError(f"--mode {mode} scales the fitted runs to --predict-at N GPUs, and no --predict-at is given",
                         where="--mode", allowed="--predict-at N beside --mode, or drop --mode")
    runs = read_runs(file)
    if out is not None:
        check_output_path(out, "--out", OVERLAY_SUFFIXES)  # after reading: the runs file (and its specs) are inputs
    at = None if predict_at is None else scale_target(runs, predict_at, mode=mode)  # before the fit's seconds
    only = None if factors is None else comma_list(factors)
    result = fit_runs(runs, source=file, out=out, only=only)
    change = None if at is None else scale_change(result, at)
    if out is not None:
        ref, path = runs[0].cluster_ref, runs[0].cluster_path
        # a built-in name stays a name; a file becomes a relative path
        builtin = builtin_path("cluster", ref) == str(path)
        base = reference_from("cluster", ref if builtin else path, Path(out).absolute().parent)
        write_file(out, runs_overlay_yaml(result, runs[0].cluster, extends=base, source=file), "--out")
    render_runs_fit(result, as_json=as_json, wrote=out is not None, change=change)
