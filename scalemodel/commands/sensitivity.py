"""`scalemodel sensitivity`: elasticity of throughput to each hardware parameter, and what a better one buys."""

from __future__ import annotations

from typing import Any

from scalemodel.commands import common as o
from scalemodel.commands.args import Command, integer, number, opt
from scalemodel.engine.sensitivity import sensitivity_for
from scalemodel.report.sensitivity import render_sensitivity


def sensitivity(*, cluster: str, model: str, gpus: int, strategy_file: str | None, straggler_cv: float | None,
                factor: float, sets: list[str] | None, as_json: bool, **flags: Any) -> None:
    """Elasticity of throughput to every hardware parameter (d ln tokens/s / d ln p), ranked by impact."""
    cl, wl, tr, st, inputs, origin = o.one_job(cluster=cluster, model=model, gpus=gpus,
                                               strategy_file=strategy_file, sets=sets, flags=flags,
                                               straggler_cv=straggler_cv, factor=factor)
    result = sensitivity_for(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, factor=factor, inputs=inputs,
                             origin=origin)
    render_sensitivity(result, as_json=as_json)


COMMAND = Command("sensitivity", sensitivity, (
    o.CLUSTER.but(default="dgx-h100"), o.MODEL.but(default="gpt3-175b"),
    opt("--gpus", "-n", type=integer, default=1024, help="Number of GPUs."),
    *o.STEP_OPTIONS, o.WORK_CV,
    opt("--factor", type=number, default=2.0,
        help="Improvement to evaluate: bandwidths and FLOP/s x F, latencies and CV / F."),
    o.SET, o.JSON))
