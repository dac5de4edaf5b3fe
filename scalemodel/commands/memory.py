"""The `memory` command: per-GPU memory breakdown and the largest micro-batch that fits."""

from __future__ import annotations

from typing import Annotated

import typer

from scalemodel.commands import common as o
from scalemodel.engine.memory import memory as run
from scalemodel.errors import InputError
from scalemodel.report.memory import render_memory


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("memory")
    def memory(
        model: o.ModelOption = "gpt3-175b",
        cluster: o.ClusterOption = "dgx-h100",  # the same defaults as predict
        gpus: Annotated[int, typer.Option("--gpus", "-n", help="Total GPUs (dp = gpus / (tp pp cp)).")] = 1024,
        tp: o.TpOption = None, pp: o.PpOption = None, cp: o.CpOption = None,
        ep: Annotated[int | None, typer.Option("--ep", help="Expert-parallel degree (divides dp).")] = None,
        strategy_file: o.StrategyFileOption = None,
        micro_batch: Annotated[int | None, typer.Option("--micro-batch", "-b", help="Sequences per micro-batch.")]
        = None,
        seq_len: Annotated[int | None, typer.Option("--seq-len", help="Default: the workload's.")] = None,
        global_batch: Annotated[int | None, typer.Option(
            "--global-batch", help="Sequences per step; sets the micro-batches per step m = B / (dp b) "
                                   "(default B = dp b, one micro-batch, as predict).")] = None,
        zero: o.ZeroOption = None, recompute: o.RecomputeOption = None, sequence_parallel: o.SeqParOption = False,
        schedule: o.ScheduleOption = None, precision: o.PrecisionOption = None,
        optimizer_bytes: Annotated[float | None, typer.Option(
            "--optimizer-bytes", help="Optimizer bytes/param (default 12 = Adam fp32 master + m + v).")] = None,
        grad_bytes: Annotated[float | None, typer.Option(
            "--grad-bytes", help="Gradient bytes/param (default = weight bytes, ZeRO's 16 B; 4 = Megatron's 18 B).")]
        = None,
        flash_attention: o.FlashOption = None,
        fragmentation: Annotated[float, typer.Option("--fragmentation", help="Allowance as a fraction.")] = 0.05,
        workspace: Annotated[str, typer.Option("--workspace", help="Fixed allowance (context, buffers).")] = "1GB",
        sets: o.SetOption = None,
        as_json: o.JsonOption = False,
    ) -> None:
        """Per-GPU memory: weights, gradients, optimizer, activations (Korthikanti), ZeRO; largest micro-batch."""
        o.positive_int(gpus, "--gpus")
        if not 0 <= fragmentation < 10:
            raise InputError("fragmentation must be in [0, 10)", where="--fragmentation", allowed="e.g. 0.05")
        if (optimizer_bytes is not None and optimizer_bytes < 0) or (grad_bytes is not None and grad_bytes < 0):
            raise InputError("bytes per parameter must be >= 0", where="--optimizer-bytes/--grad-bytes")
        ws = o.quantity(workspace, "bytes", "--workspace")
        training = {"micro_batch": micro_batch, "global_batch": global_batch, "seq_len": seq_len,
                    "precision": precision, "optimizer_bytes_per_param": optimizer_bytes,
                    "grad_bytes_per_param": grad_bytes}
        _, strategy = o.split_flags(tp=tp, pp=pp, cp=cp, ep=ep, zero=zero, recompute=recompute,
                                    sequence_parallel=sequence_parallel, schedule=schedule,
                                    flash_attention=flash_attention)
        sf = o.read_strategy(strategy_file)
        cl, wl, tr, st = o.build_specs(cluster=cluster, model=model, sets=sets, training=training, strategy=strategy,
                                       strategy_file=sf, gpus=gpus)
        result = run(cl, wl, gpus, tr, st, fragmentation=fragmentation, workspace=ws, sets=sets)
        if sf is not None:
            result.inputs["strategy_file"] = sf.echo()
        render_memory(result, as_json=as_json)
