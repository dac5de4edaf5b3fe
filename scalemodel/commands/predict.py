"""`scalemodel predict`: the step-time breakdown, throughput, MFU and memory of one strategy."""

from __future__ import annotations

from typing import Any

from scalemodel.commands import common as o
from scalemodel.commands.args import Command, integer, opt
from scalemodel.engine.predict import predict as run
from scalemodel.report.predict import render_prediction


def predict(*, cluster: str, model: str, gpus: int, strategy_file: str | None, straggler_cv: float | None,
            staleness_kappa: float | None, sets: list[str] | None, as_json: bool, **flags: Any) -> None:
    """Predict one training step: breakdown that adds up, tokens/s, MFU/HFU, memory, time and cost."""
    o.check_kappa(staleness_kappa)
    cl, wl, tr, st, inputs, origin = o.one_job(cluster=cluster, model=model, gpus=gpus,
                                               strategy_file=strategy_file, sets=sets, flags=flags,
                                               straggler_cv=straggler_cv)
    result = run(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, kappa=staleness_kappa, inputs=inputs,
                 origin=origin)
    render_prediction(result, as_json=as_json)


COMMAND = Command("predict", predict, (
    o.CLUSTER.but(default="dgx-h100"), o.MODEL.but(default="gpt3-175b"),
    opt("--gpus", "-n", type=integer, default=1024, help="Number of GPUs."),
    *o.STEP_OPTIONS, o.KAPPA, o.WORK_CV, o.TRAIN_TOKENS, o.SET, o.JSON))
