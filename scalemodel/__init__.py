"""scalemodel: closed-form models of distributed training performance.

The public API is the engine the CLI uses (docs/api.md); it takes names, files, plain dicts or
specs, and keyword arguments for any training or strategy field::

    import scalemodel
    result = scalemodel.predict("dgx-h100", "llama3-70b", 1024, global_batch=1024, tp=8, pp=4)
    print(result.step_time_s, result.breakdown_s)

Every command has one entry point here (``predict``, ``memory``, ``plan``, ``scale``, ``study``
(a sweep file), ``sensitivity``, ``check_file``, ``collective``, ``stragglers``, ``calibrate_log``,
``calibrate_runs``)
returning a dataclass whose ``payload()`` is the command's JSON document. Names are imported
lazily so that ``import scalemodel`` stays light; ``dir(scalemodel)`` lists them all.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load_cluster": "scalemodel.specs",
    "load_accelerator": "scalemodel.specs",
    "load_workload": "scalemodel.specs",
    "load_scenario": "scalemodel.specs",
    "TrainingSpec": "scalemodel.specs",
    "StrategySpec": "scalemodel.specs",
    "ClusterSpec": "scalemodel.specs",
    # one entry point per question, the same the commands call (each returns a dataclass with .payload());
    # these take names, files, dicts or specs and keyword arguments (scalemodel/api.py)
    "predict": "scalemodel.api",
    "memory": "scalemodel.api",
    "plan": "scalemodel.api",
    "scale": "scalemodel.api",
    "sensitivity": "scalemodel.api",
    "collective": "scalemodel.api",
    "calibrate_log": "scalemodel.api",
    "calibrate_runs": "scalemodel.api",
    "study": "scalemodel.api",
    "training_spec": "scalemodel.api",
    "strategy_spec": "scalemodel.api",
    "cluster_spec": "scalemodel.api",
    "workload_spec": "scalemodel.api",
    # the engine functions behind them, taking validated specs
    "sweep": "scalemodel.engine.scaling",
    "sensitivity_for": "scalemodel.engine.sensitivity",
    "check_file": "scalemodel.engine.check",
    "stragglers": "scalemodel.engine.stragglers",
    "calibrate": "scalemodel.engine.calibrate",
    "explained": "scalemodel.report.explain",  # a PlanResult with its `why` written
    # lower-level engine pieces
    "build_job": "scalemodel.engine.job",
    "evaluate": "scalemodel.engine.step",
    "search": "scalemodel.engine.planner",
    "InputError": "scalemodel.errors",
    "parse_quantity": "scalemodel.units",
    "format_quantity": "scalemodel.units",
}

__all__ = sorted([*_LAZY, "__version__"])


#: Names this module's own imports leave in its namespace: not part of the API, so not listed.
_NOT_API = frozenset({"annotations", "importlib", "Any"})


def __dir__() -> list[str]:
    """Tab completion (IPython, Jupyter, the REPL) shows the public API, though it loads lazily."""
    return sorted({*(n for n in globals() if n not in _NOT_API), *__all__})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scalemodel' has no attribute {name!r}")
