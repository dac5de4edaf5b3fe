"""`scalemodel sensitivity`: elasticity of throughput to each hardware parameter, and what a better one buys."""

from __future__ import annotations

from typing import Annotated

import typer

from scalemodel.commands import common as o
from scalemodel.engine.sensitivity import sensitivity_for
from scalemodel.report.sensitivity import render_sensitivity


def register(app: typer.Typer) -> None:
    @app.command("sensitivity")
    def sensitivity(
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
        flash_attention: o.FlashOption = None, layout: o.LayoutOption = None,
        work_cv: o.WorkCvOption = None,
        factor: Annotated[float, typer.Option(
            "--factor", help="Improvement to evaluate: bandwidths and FLOP/s x F, latencies and CV / F.")] = 2.0,
        set_: o.SetOption = None, as_json: o.JsonOption = False,
    ) -> None:
        """Elasticity of throughput to every hardware parameter (d ln tokens/s / d ln p), ranked by impact."""
        o.positive_int(gpus, "--gpus")
        training, strategy = o.split_flags(
            micro_batch=micro_batch, global_batch=global_batch, seq_len=seq_len, precision=precision,
            work_cv=work_cv, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero, recompute=recompute,
            sequence_parallel=sequence_parallel, schedule=schedule, overlap=overlap, compression=compression,
            dp_comm=dp_comm, sync=sync, algo=algo, assignment=assignment, dispatch_overhead=dispatch_overhead,
            flash_attention=flash_attention, layout=layout)
        sf = o.read_strategy(strategy_file)
        cl, wl, tr, st = o.build_specs(cluster=cluster, model=model, sets=set_, training=training,
                                       strategy=strategy, strategy_file=sf, gpus=gpus)
        cl.require_gpus(gpus)
        inputs = o.spec_inputs(cl, wl, tr, st, set_, gpus=gpus, strategy_file=sf.echo() if sf else None,
                               straggler_cv=straggler_cv, factor=factor)
        result = sensitivity_for(cl, wl, gpus, tr, st, straggler_cv=straggler_cv, factor=factor, inputs=inputs)
        render_sensitivity(result, as_json=as_json)
