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
    o.positive_int(gpus, "--gpus")
    training, strategy = o.split_flags(**flags)
    sf = o.read_strategy(strategy_file)
    cl, wl, tr, st = o.build_specs(cluster=cluster, model=model, sets=sets, training=training,
                                   strategy=strategy, strategy_file=sf, gpus=gpus)
    cl.require_gpus(gpus)
    inputs = o.spec_inputs(cl, wl, tr, st, sets, gpus=gpus, strategy_file=sf.echo() if sf else None,
                           straggler_cv=straggler_cv)
    result = run(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, kappa=staleness_kappa, inputs=inputs)
    render_prediction(result, as_json=as_json)


COMMAND = Command("predict", predict, (
    o.CLUSTER.but(default="dgx-h100"), o.MODEL.but(default="gpt3-175b"),
    opt("--gpus", "-n", type=integer, default=1024, help="Number of GPUs."),
    *o.STEP_OPTIONS, o.KAPPA, o.WORK_CV, o.TRAIN_TOKENS, o.SET, o.JSON))
