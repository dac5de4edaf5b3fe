"""`scalemodel predict`: the step-time breakdown, throughput, MFU and memory of one strategy."""

from __future__ import annotations

from typing import Annotated

import typer

from scalemodel.commands import common as o
from scalemodel.engine.predict import predict as run
from scalemodel.report.predict import render_prediction


def register(app: typer.Typer) -> None:
    @app.command("predict")
    def predict(
        cluster: o.ClusterOption = "dgx-h100",
        model: o.ModelOption = "gpt3-175b",
        gpus: Annotated[int, typer.Option("--gpus", "-n", help="Number of GPUs.")] = 1024,
        tp: o.TpOption = None, pp: o.PpOption = None, cp: o.CpOption = None, ep: o.EpOption = None,
        dp: o.DpOption = None, strategy_file: o.StrategyFileOption = None,
        micro_batch: o.MicroBatchOption = None, global_batch: o.GlobalBatchOption = None,
        seq_len: o.SeqLenOption = None, zero: o.ZeroOption = None, recompute: o.RecomputeOption = None,
        sequence_parallel: o.SeqParOption = False, schedule: o.ScheduleOption = None,
        precision: o.PrecisionOption = None, overlap: o.OverlapOption = None,
        compression: o.CompressionOption = None, dp_comm: o.DpCommOption = None, sync: o.SyncOption = None,
        algo: o.AlgoOption = None, straggler_cv: o.StragglerCvOption = None,
        assignment: o.AssignmentOption = None, dispatch_overhead: o.DispatchOverheadOption = None,
        flash_attention: o.FlashOption = None, layout: o.LayoutOption = None, staleness_kappa: o.KappaOption = None,
        work_cv: o.WorkCvOption = None,
        train_tokens: o.TrainTokensOption = None, set_: o.SetOption = None, as_json: o.JsonOption = False,
    ) -> None:
        """Predict one training step: breakdown that adds up, tokens/s, MFU/HFU, memory, time and cost."""
        o.positive_int(gpus, "--gpus")
        training, strategy = o.split_flags(
            micro_batch=micro_batch, global_batch=global_batch, seq_len=seq_len, precision=precision,
            train_tokens=train_tokens, work_cv=work_cv, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero,
            recompute=recompute, sequence_parallel=sequence_parallel, schedule=schedule, overlap=overlap,
            compression=compression, dp_comm=dp_comm, sync=sync, algo=algo, assignment=assignment,
            dispatch_overhead=dispatch_overhead, flash_attention=flash_attention, layout=layout)
        sf = o.read_strategy(strategy_file)
        cl, wl, tr, st = o.build_specs(cluster=cluster, model=model, sets=set_, training=training,
                                       strategy=strategy, strategy_file=sf, gpus=gpus)
        cl.require_gpus(gpus)
        inputs = o.spec_inputs(cl, wl, tr, st, set_, gpus=gpus, strategy_file=sf.echo() if sf else None,
                               straggler_cv=straggler_cv)
        result = run(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, kappa=staleness_kappa, inputs=inputs)
        render_prediction(result, as_json=as_json)
