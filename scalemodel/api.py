"""The Python API: the engine entry points the commands use, taking names, files, plain dicts or specs.

Each function accepts what the command line accepts and more:

- ``cluster``: a built-in name (``"dgx-h100"``), a YAML path, a dict of cluster fields, or a ClusterSpec;
- ``model``: a built-in workload name, a YAML or HuggingFace ``config.json`` path, a dict, or a Workload;
- ``training`` / ``strategy``: a dict, a TrainingSpec / StrategySpec, or None (the defaults);
- keyword arguments name any TrainingSpec or StrategySpec field (``global_batch=1024, tp=8, pp=4``),
  routed to the spec that has it and applied on top of ``training`` / ``strategy``.

Bad values raise :class:`scalemodel.errors.InputError` with the field named (``str(exc)`` is the
CLI's one-line message). Results are the engine's dataclasses; ``result.payload()`` is the
command's JSON document. See docs/api.md for a worked example.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from scalemodel.commands.options import MAX_COUNT, check_kappa, comma_list, in_range
from scalemodel.commands.plan import MAX_TOP
from scalemodel.commands.sweep import MAX_WORKERS, check_runner
from scalemodel.engine.calibrate import DEFAULT_TOLERANCE, check_ranks, collective_op
from scalemodel.engine.calibrate import calibrate as run_calibrate
from scalemodel.engine.calibrate_runs import RunsFit, fit_runs
from scalemodel.engine.collective import collective as run_collective
from scalemodel.engine.grid import GridResult, run_grid
from scalemodel.engine.memory import memory as run_memory
from scalemodel.engine.planner import plan as run_plan
from scalemodel.engine.predict import predict as run_predict
from scalemodel.engine.scaling import sweep as run_scale
from scalemodel.engine.sensitivity import sensitivity_for as run_sensitivity
from scalemodel.errors import InputError
from scalemodel.report.explain import explained
from scalemodel.report.output import to_json
from scalemodel.specs import ClusterSpec, StrategySpec, TrainingSpec, Workload, load_cluster, load_workload
from scalemodel.specs.constraints import constraint_pairs, normalize_constraints
from scalemodel.specs.loader import derived, validate
from scalemodel.specs.nccl_tests import read_nccl_tests
from scalemodel.specs.plain import plain as _plain
from scalemodel.specs.plain import scalar as _scalar
from scalemodel.specs.runs import read_runs
from scalemodel.specs.sweep import load_sweep
from scalemodel.units import parse_quantity

__all__ = ["calibrate_log", "calibrate_runs", "cluster_spec", "collective", "memory", "plan", "predict", "scale",
           "sensitivity", "strategy_spec", "study", "training_spec", "workload_spec"]

_TRAINING_FIELDS = frozenset(TrainingSpec.model_fields)
_STRATEGY_FIELDS = frozenset(StrategySpec.model_fields)


def _shown(value: Any) -> str:
    """A refused argument as an error message shows it: an array by its shape, anything else by its repr, cut."""
    array = isinstance(value, np.ndarray) or (hasattr(value, "ndim") and not isinstance(value, np.generic))
    return f"an array of shape {np.shape(value)}" if array else repr(value)[:60]  # a DataFrame's repr is lines


def _count(value: Any, name: str, what: str = "GPUs", cap: int = MAX_COUNT) -> int:
    """A count argument (``gpus``, ``top``, ``stride``) as an int from 1 to ``cap`` (the command line's bound:
    MAX_COUNT, plan's --top MAX_TOP): a Python or NumPy integer, a whole float, or a 0-d array of one. NaN / inf, a
    fraction, a bool, a string, None or an array of several values raised TypeError / ValueError / IndexError deep
    in the engine, or ran (True as 1 GPU, 64.0 kept as a float in the payload), or were refused in words naming
    another thing (0 GPUs as "stride must be >= 1")."""
    v = _scalar(value)
    top = f"{cap:.0e}" if cap >= 10**6 else f"{cap:,}"
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v):
        raise InputError(f"{_shown(v)} is not a whole number of {what}", where=name,
                         allowed=f"an integer from 1 to {top}")
    if not 1 <= v <= cap:
        shown = (f"{v:.4g}" if abs(v) >= 10**15 else f"{int(v):,}" if cap < 10**6 else f"{int(v)}")  # 1e300: 301 digits
        raise InputError(f"{shown} {what} is outside 1 to {top}", where=name, allowed=f"an integer from 1 to {top}")
    return int(v)


def _real(value: Any, name: str, optional: bool = True) -> Any:
    """A real-number argument (``straggler_cv``, ``kappa``, ``factor``, ``size``) as a float, None kept where
    ``optional``; its range is the engine's to check. A string, None, a bool or an array raised TypeError there."""
    v = _scalar(value)
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{_shown(v)} is not a number", where=name, allowed="a real number")
    return float(v)


def _name(value: Any, name: str, allowed: str) -> str:
    """A name argument (collective's ``op`` and ``algo``) as a str: a NumPy string or 0-d array of one as the str it
    holds. None, a number or a list raised AttributeError ("'NoneType' object has no attribute 'lower'")."""
    v = _scalar(value)
    if not isinstance(v, str):
        raise InputError(f"{_shown(v)} is not a name", where=name, allowed=allowed)
    return v


def _path(value: Any, name: str, what: str) -> Path:
    """A file argument (``runs_file``, ``log``, ``sweep_file``) as a Path: a str, bytes, os.PathLike or NumPy string.
    None or a number raised TypeError in pathlib ("expected str, bytes or os.PathLike object, not int"), and bytes
    ("argument should be a str object or an os.PathLike object returning str")."""
    v = _scalar(value)
    if isinstance(v, bytes):
        v = os.fsdecode(v)
    if not isinstance(v, (str, os.PathLike)):
        raise InputError(f"{_shown(v)} is not a path", where=name, allowed=f"the path of {what}, a str or a Path")
    return Path(v)


def _flag(value: Any, name: str) -> bool:
    """A yes/no argument (scale's ``best``) as a bool: True / False, NumPy's or a 0-d array of one. 'false' ran the
    planner (a non-empty string is true) and np.array([True, False]) raised "truth value of an array is ambiguous"."""
    v = _scalar(value)
    if not isinstance(v, bool):
        raise InputError(f"{_shown(v)} is not True or False", where=name, allowed="True or False")
    return v


def _check_echo(inputs: Any) -> None:
    """predict's ``inputs`` (what the payload echoes): None or a dict strict JSON can write. inputs=5 was echoed as
    the payload's "inputs": 5, and {'x': nan} as NaN, which json.dumps(allow_nan=False) refuses."""
    allowed = "a dict of JSON values (str, finite numbers, bools, None, lists, dicts), or None"
    if inputs is not None and not isinstance(inputs, dict):
        raise InputError(f"{_shown(inputs)} is not a dict", where="inputs", allowed=allowed)
    try:
        to_json(inputs or {}, "predict")
    except (InputError, TypeError, ValueError) as exc:
        raise InputError(f"{_shown(inputs)} holds a value strict JSON cannot write ({type(exc).__name__})",
                         where="inputs", allowed=allowed) from None


def _counts(values: Any, name: str = "gpus") -> list[int]:
    """scale's GPU counts: a list, tuple or 1-d array of counts (:func:`_count` each), at least one."""
    if (isinstance(values, (str, bytes, dict, set, frozenset)) or not isinstance(values, Iterable)
            or getattr(values, "ndim", 1) != 1):  # a set has no order; a DataFrame's (ndim 2) are its column names
        raise InputError(f"{_shown(values)} is not a list of GPU counts", where=name,
                         allowed="a list, tuple or 1-d array of GPU counts, e.g. [128, 256, 512]")
    out = [_count(v, name) for v in values]
    if not out:
        raise InputError("no GPU counts", where=name, allowed="at least one GPU count, e.g. [128, 256, 512]")
    return out


#: The command line's option -> the argument that is its value here: the engine's range checks name the option
#: (``--straggler-cv``, ``--factor``, ``--size``, ``--algo``, the cluster's ``--gpus`` bound), which a Python caller
#: never wrote (review22g: fuzz22 named the argument for a value of the wrong type, not for one out of range).
#: ``--sync`` is the strategy field ``sync`` here, plan's ``sync_modes`` there.
_ARGUMENTS = {"--gpus": "gpus", "--straggler-cv": "straggler_cv", "--factor": "factor", "--size": "size",
              "--algo": "algo", "--stride": "stride", "--dtype-bytes": "dtype_bytes", "--top": "top",
              "--staleness-kappa": "kappa", "--op": "op", "--mode": "mode", "--objective": "objective",
              "--constraint": "constraints", "--sync": "sync",
              # round 25: the strategy / training options that are keyword arguments of the same name here ("--ep:
              # --ep 3 x etp 1 needs ...", "or change --tp/--pp/--cp", "leave --dp out" reached predict(ep=3), tp=3)
              "--tp": "tp", "--pp": "pp", "--cp": "cp", "--ep": "ep", "--dp": "dp", "--micro-batch": "micro_batch",
              "--global-batch": "global_batch", "--seq-len": "seq_len"}


def _argument_words(text: str, names: dict[str, str]) -> str:
    """``text`` with each command-line option of ``names`` that it mentions named as the API's argument (the
    engine's "pass --ranks N" read at calibrate_log, where there is no --ranks)."""
    if "--" not in text:
        return text
    return re.sub(r"(?<![\w-])--[a-z][\w-]*", lambda m: names.get(m.group(0), m.group(0)), text)


def _located(names: dict[str, str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: an InputError located at a command-line option of ``names`` re-located at its argument."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except InputError as exc:
                where = names.get(exc.where) or _argument_words(exc.where, names)  # "--ep / strategy.etp" too
                what, allowed = _argument_words(exc.what, names), _argument_words(exc.allowed, names)
                if (where, what, allowed) == (exc.where, exc.what, exc.allowed):
                    raise
                raise InputError(what, where=where, allowed=allowed) from None
        return call
    return wrap


_named_as_arguments = _located(_ARGUMENTS)


def cluster_spec(cluster: Any) -> ClusterSpec:
    """A ClusterSpec from a built-in name, a path, a dict of fields or a ClusterSpec."""
    if isinstance(cluster, ClusterSpec):
        return cluster
    if isinstance(cluster, (str, os.PathLike)):
        return load_cluster(cluster if isinstance(cluster, str) else Path(cluster))
    if isinstance(cluster, dict):
        return validate(ClusterSpec, _extended("cluster", _plain(cluster, "cluster"), "cluster"), prefix=["cluster"])  # type: ignore[no-any-return]
    raise InputError(f"cannot make a cluster from a {type(cluster).__name__}", where="cluster",
                     allowed="a built-in name, a YAML path, a dict of cluster fields or a ClusterSpec")


def workload_spec(model: Any) -> Any:
    """A workload from a built-in name, a YAML or config.json path, a dict of fields or a workload spec."""
    if isinstance(model, (str, os.PathLike)):
        return load_workload(model if isinstance(model, str) else Path(model))
    if isinstance(model, dict):
        return validate(Workload, _extended("workload", _plain(model, "model"), "model"), prefix=["model"])
    if hasattr(model, "kind") and hasattr(model, "model_dump"):
        return model
    raise InputError(f"cannot make a workload from a {type(model).__name__}", where="model",
                     allowed="a built-in name, a YAML or config.json path, a dict of workload fields or a spec")


def _extended(kind: str, data: dict[str, Any], name: str) -> dict[str, Any]:
    """A dict with ``extends: NAME`` (the ``name`` argument) -> the named spec with the dict's fields on top, by the
    route a YAML file's and a scenario's ``extends:`` take (loader.derived): the citations of the values it sets
    name the dict."""
    return derived(kind, data, by=f"the Python API's {name} argument")


def _split(fields: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    unknown = sorted(set(fields) - _TRAINING_FIELDS - _STRATEGY_FIELDS)
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}", where="keyword arguments",
                         allowed="a TrainingSpec field (" + ", ".join(sorted(_TRAINING_FIELDS)) + ") or a "
                                 "StrategySpec field (" + ", ".join(sorted(_STRATEGY_FIELDS)) + ")")
    return ({k: v for k, v in fields.items() if k in _TRAINING_FIELDS},
            {k: v for k, v in fields.items() if k in _STRATEGY_FIELDS})


def _spec(model: Any, value: Any, extra: dict[str, Any], name: str) -> Any:
    if value is None:
        base: dict[str, Any] = {}
    elif isinstance(value, model):
        if not extra:
            return value
        base = value.model_dump(exclude_unset=True)
    elif isinstance(value, dict):
        base = dict(value)
    else:
        raise InputError(f"cannot make a {name} spec from a {type(value).__name__}", where=name,
                         allowed=f"a dict of {name} fields or a {model.__name__}")
    return validate(model, _plain({**base, **extra}, name), prefix=[name])


def training_spec(training: Any = None, **fields: Any) -> TrainingSpec:
    """A TrainingSpec from a dict or spec (None: the defaults) with ``fields`` on top."""
    return _spec(TrainingSpec, training, fields, "training")  # type: ignore[no-any-return]


def strategy_spec(strategy: Any = None, **fields: Any) -> StrategySpec:
    """A StrategySpec from a dict or spec (None: the defaults) with ``fields`` on top."""
    return _spec(StrategySpec, strategy, fields, "strategy")  # type: ignore[no-any-return]


def _specs(cluster: Any, model: Any, training: Any, strategy: Any, fields: dict[str, Any]
           ) -> tuple[ClusterSpec, Any, TrainingSpec, StrategySpec]:
    tr_fields, st_fields = _split(fields)
    return (cluster_spec(cluster), workload_spec(model), training_spec(training, **tr_fields),
            strategy_spec(strategy, **st_fields))


@_named_as_arguments
def predict(cluster: Any = "dgx-h100", model: Any = "gpt3-175b", gpus: int = 1024, training: Any = None,
            strategy: Any = None, *, straggler_cv: float | None = None, kappa: float | None = None,
            inputs: dict[str, Any] | None = None, **fields: Any) -> Any:
    """One training step (as `scalemodel predict`): a Prediction with ``step_time_s``, ``breakdown_s``,
    ``throughput``, ``flops``, ``memory``; e.g. ``predict("dgx-h100", "llama3-70b", 1024, tp=8, pp=4)``."""

    gpus = _count(gpus, "gpus")
    straggler_cv, kappa = _real(straggler_cv, "straggler_cv"), _real(kappa, "kappa")
    _check_echo(inputs)
    check_kappa(kappa, "kappa")  # --staleness-kappa's range: 2**80 ran here
    cl, wl, tr, st = _specs(cluster, model, training, strategy, fields)
    cl.require_gpus(gpus, "gpus")
    return run_predict(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, kappa=kappa, inputs=inputs or {
        "cluster": cl.name, "model": wl.name, "model_kind": wl.kind, "gpus": gpus})


@_named_as_arguments
def memory(cluster: Any = "dgx-h100", model: Any = "gpt3-175b", gpus: int = 1024, training: Any = None,
           strategy: Any = None, **fields: Any) -> Any:
    """Per-GPU memory by part and the largest micro-batch that fits (as `scalemodel memory`)."""

    gpus = _count(gpus, "gpus")
    cl, wl, tr, st = _specs(cluster, model, training, strategy, fields)
    return run_memory(cl, wl, gpus, tr, st)


@_located({**_ARGUMENTS, "--sync": "sync_modes", "--sync-modes": "sync_modes"})
def plan(cluster: Any = "dgx-h100", model: Any = "gpt3-175b", gpus: int = 1024, training: Any = None, *,
         objective: str = "throughput", top: int = 5, constraints: dict[str, Any] | None = None,
         sync_modes: tuple[str, ...] = ("bsp",), straggler_cv: float | None = None, **fields: Any) -> Any:
    """Rank every valid strategy (as `scalemodel plan`): a PlanResult whose ``ranked`` holds Predictions, best
    first, and ``why`` the explanation in words. ``fields`` are TrainingSpec fields (e.g. ``global_batch``)."""

    gpus, straggler_cv = _count(gpus, "gpus"), _real(straggler_cv, "straggler_cv")
    top = _count(top, "top", "plans", MAX_TOP)  # --top's cap: top=10**6 ranked and explained for 520 s
    tr_fields, st_fields = _split(fields)
    if st_fields:
        raise InputError(f"plan searches the strategy; {sorted(st_fields)[0]!r} cannot be fixed here",
                         where="keyword arguments", allowed="TrainingSpec fields, or constraints={'tp': 8}")
    modes = tuple(_names(sync_modes, "sync_modes", "('bsp', 'ssp:3')"))
    if not modes:  # () was refused as "--constraint sync: the sync constraint leaves none of the searched modes ()"
        raise InputError("no sync modes", where="sync_modes", allowed="at least one sync mode, e.g. ('bsp',)")
    cons = normalize_constraints(constraints, where="constraints")
    return explained(run_plan(cluster_spec(cluster), workload_spec(model), gpus, training_spec(training, **tr_fields),
                         objective=objective, top=top, constraints=cons, sync_modes=modes, straggler_cv=straggler_cv,
                         echo={"constraints": _constraints_said(constraints)}))


def _names(values: Any, name: str, example: str) -> list[Any]:
    """A list-of-names argument (plan's ``sync_modes``, calibrate_runs' ``factors``): a string as the command line's
    comma-separated list ('bsp' was searched as the modes 'b', 's', 'p': "unknown sync strategy 'b'"; factors
    'compute' as "unknown factor 'c'"), NumPy strings as str; a number raised TypeError ("'int' object is not
    iterable")."""
    if isinstance(values, str):
        return comma_list(values)  # as --sync-modes: "bsp, ssp:2" echoed ' ssp:2'
    if isinstance(values, (bytes, dict, set, frozenset)) or not isinstance(values, Iterable):
        raise InputError(f"{_shown(values)} is not a list of names", where=name,
                         allowed=f"a list or tuple of names, e.g. {example}, or one comma-separated string")
    return [_scalar(v) for v in values]


def _constraints_said(constraints: Any) -> list[str]:
    """A constraint dict as the KEY OP VALUE strings the payload echoes (``inputs.constraints`` was [] for every
    dict, so a plan that no split met was explained as asked under "no constraints")."""
    said = []
    for key, spec in (constraints or {}).items():
        said += [f"{key}{p[0]}{_plain(p[1])}" for p in constraint_pairs(spec)]
    return said


@_named_as_arguments
def scale(cluster: Any = "dgx-h100", model: Any = "gpt3-175b", gpus: list[int] | tuple[int, ...] = (128, 256, 512),
          training: Any = None, strategy: Any = None, *, mode: str = "weak", best: bool = False,
          straggler_cv: float | None = None, **fields: Any) -> Any:
    """A weak or strong scaling sweep with the lost efficiency attributed to its causes (as `scalemodel scale`)."""

    gpus, straggler_cv, best = _counts(gpus), _real(straggler_cv, "straggler_cv"), _flag(best, "best")
    cl, wl, tr, st = _specs(cluster, model, training, strategy, fields)
    cl.require_gpus(max(gpus), "gpus")
    return run_scale(cl, wl, tr, st, list(gpus), mode, best=best, straggler_cv=straggler_cv,
               inputs={"cluster": cl.name, "model": wl.name, "gpus": list(gpus), "mode": mode})


@_named_as_arguments
def sensitivity(cluster: Any = "dgx-h100", model: Any = "gpt3-175b", gpus: int = 1024, training: Any = None,
                strategy: Any = None, *, factor: float = 2.0, **fields: Any) -> Any:
    """Elasticity of throughput to each hardware parameter (as `scalemodel sensitivity`)."""

    gpus, factor = _count(gpus, "gpus"), _real(factor, "factor", False)
    cl, wl, tr, st = _specs(cluster, model, training, strategy, fields)
    cl.require_gpus(gpus, "gpus")
    return run_sensitivity(cl, wl, gpus, tr, st, factor=factor,
                           inputs={"cluster": cl.name, "model": wl.name, "gpus": gpus})


@_named_as_arguments
def collective(cluster: Any = "dgx-h100", op: str = "allreduce", size: float | str = "1GiB", gpus: int = 8, *,
               algo: str = "auto", stride: int = 1, dtype_bytes: int = 2) -> Any:
    """One collective's time, algbw and busbw per algorithm (as `scalemodel collective`); ``size`` in bytes
    or with a unit ("1GiB")."""

    nbytes = in_range(parse_quantity(size, "bytes", where="size") if isinstance(size, str)
                      else _real(size, "size", False), "bytes", "size")  # 2**80 bytes ran, --size refuses it
    op = _name(op, "op", "a collective: allreduce, reducescatter, allgather, alltoall, broadcast, reduce, sendrecv")
    algo = _name(algo, "algo", "ring, tree, rhd, rd, direct, hierarchical or auto")
    return run_collective(cluster_spec(cluster), op, [nbytes], _count(gpus, "gpus", "ranks"), algo=algo,
                          stride=_count(stride, "stride"), dtype_bytes=_count(dtype_bytes, "dtype_bytes", "bytes"))


@_located({**_ARGUMENTS, "--ranks": "ranks", "--tier": "tier", "--algo": "algorithm", "--tolerance": "tolerance"})
def calibrate_log(log: str | os.PathLike[str], cluster: Any = "dgx-h100", *, ranks: int | None = None,
                  tier: str | None = None, algorithm: str = "ring", op: str | None = None,
                  tolerance: float | None = None) -> Any:
    """Fit a tier to an nccl-tests log (as `scalemodel calibrate`): ``result.fit`` has the values and 95 %
    intervals, ``result.problems`` why the fit should not be trusted (empty when accepted)."""

    # ranks=0 / -1 / True were "not given" ("cannot tell how many ranks the log used"), '8', tolerance='0.1' and
    # op=5 raised TypeError / AttributeError, np.array([8]) "only 0-dimensional arrays can be converted"
    ranks = None if ranks is None else _count(ranks, "ranks", "ranks")
    tolerance = _real(tolerance, "tolerance")
    op = None if op is None else _name(op, "op", "a collective: allreduce, reducescatter, allgather, alltoall, "
                                                 "broadcast, reduce, sendrecv")
    tier = None if tier is None else _name(tier, "tier", "the name of one of the cluster's network tiers")
    algorithm = _name(algorithm, "algorithm", "ring, tree, rhd, rd, direct, hierarchical or auto")
    path = _path(log, "log", "an nccl-tests log")
    parsed = read_nccl_tests(path, op=collective_op(op))
    check_ranks(ranks, parsed, "ranks")  # the API's name in the text too: it said "--ranks 3, ... leave --ranks out"
    return run_calibrate(parsed, cluster_spec(cluster), source=os.fspath(path), ranks=ranks, tier=tier,
                         algorithm=algorithm, tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance)


@_located({"--factors": "factors"})
def calibrate_runs(runs_file: str | os.PathLike[str], *, factors: list[str] | None = None) -> RunsFit:
    """Fit compute, per-tier bandwidth, overlap efficiency and per-step overhead to measured runs (as
    `scalemodel calibrate runs`): ``result.factors`` (values, 95 % intervals, ``determined``), ``result.runs``
    (residuals), ``result.warnings``."""
    only = None if factors is None else _names(factors, "factors", "['compute', 'overhead_s']")
    path = _path(runs_file, "runs_file", "a runs file (YAML or CSV)")
    return fit_runs(read_runs(path), source=os.fspath(path), only=only)


@_located({"--workers": "workers", "--scheduler": "scheduler"})
def study(sweep_file: str | os.PathLike[str], *, workers: int | None = None, scheduler: str | None = None
          ) -> GridResult:
    """Run a sweep file (as `scalemodel sweep`): ``result.rows`` is the tidy table, one dict per point;
    ``result.warnings`` what pricing the points raised, once each, after the first point that raised it."""
    path = _path(sweep_file, "sweep_file", "a sweep file")
    # workers=1.5 / nan / True ran (as 1 process), '2' raised TypeError ("'<' not supported between 'str' and 'int'")
    workers = None if workers is None else _count(workers, "workers", "processes", cap=MAX_WORKERS)
    check_runner(workers, scheduler, "workers", "scheduler")  # as sweep's: 5000 processes, blank address, both given
    spec, models, clusters = load_sweep(path)
    return run_grid(spec, models, clusters, workers=workers, scheduler=scheduler,
                    inputs={"file": os.fspath(path), "name": spec.name})
