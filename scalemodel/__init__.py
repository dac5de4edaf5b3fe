"""scalemodel: closed-form models of distributed training performance.

The public API is the engine the CLI uses::

    import scalemodel
    cluster = scalemodel.load_cluster("dgx-h100")
    model = scalemodel.load_workload("llama3-70b")
    result = scalemodel.predict(cluster, model, 1024, scalemodel.TrainingSpec(global_batch=1024),
                                scalemodel.StrategySpec(tp=8, pp=4))
    print(result.step_time_s, result.breakdown_s)

Every command has one entry point here (``predict``, ``memory``, ``plan``, ``sweep``,
``sensitivity_for``, ``check_file``, ``collective``, ``stragglers``, ``calibrate``) returning a
dataclass whose ``payload()`` is the command's JSON document. Names are imported lazily so that
``import scalemodel`` stays light.
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
    # one entry point per question, the same the commands call (each returns a dataclass with .payload())
    "predict": "scalemodel.engine.predict",
    "memory": "scalemodel.engine.memory",
    "plan": "scalemodel.engine.planner",
    "sweep": "scalemodel.engine.scaling",
    "sensitivity_for": "scalemodel.engine.sensitivity",
    "check_file": "scalemodel.engine.check",
    "collective": "scalemodel.engine.collective",
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

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scalemodel' has no attribute {name!r}")
