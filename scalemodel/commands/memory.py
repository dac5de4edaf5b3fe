"""The `memory` command: per-GPU memory breakdown and the largest micro-batch that fits."""

from __future__ import annotations

import math

from scalemodel.commands import common as o
from scalemodel.commands.args import Command, integer, number, opt
from scalemodel.commands.options import ranged_quantity
from scalemodel.engine.memory import memory as run
from scalemodel.errors import InputError
from scalemodel.report.memory import render_memory
from scalemodel.specs.training import MAX_GRAD_BYTES, MAX_OPTIMIZER_BYTES, MIN_GRAD_BYTES


def memory(*, model: str, cluster: str, gpus: int, tp: int | None, pp: int | None, cp: int | None, ep: int | None,
           strategy_file: str | None, micro_batch: int | None, seq_len: int | None, global_batch: int | None,
           zero: str | None, recompute: str | None, sequence_parallel: bool, schedule: str | None,
           sync: str | None, precision: str | None, optimizer_bytes: float | None, grad_bytes: float | None,
           flash_attention: bool | None, fragmentation: float, workspace: str, sets: list[str] | None,
           as_json: bool) -> None:
    """Per-GPU memory: weights, gradients, optimizer, activations (Korthikanti), ZeRO; largest micro-batch."""
    o.positive_int(gpus, "--gpus")
    if not 0 <= fragmentation < 10:
        raise InputError("fragmentation must be in [0, 10)", where="--fragmentation", allowed="e.g. 0.05")
    # the spec's bounds, said at the option: nan or 1e308 was refused as "training.optimizer_bytes_per_param: ...",
    # a field the user never wrote; a negative value too (it was "must be >= 0, a number >= 0" of --grad-bytes,
    # whose 0 is refused: its range starts at 0.125, one bit)
    for value, option, low, high, example in (
            (optimizer_bytes, "--optimizer-bytes", 0.0, MAX_OPTIMIZER_BYTES, "12 (fp32 master + Adam m, v)"),
            (grad_bytes, "--grad-bytes", MIN_GRAD_BYTES, MAX_GRAD_BYTES, "2 (16-bit gradients)")):
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            raise InputError(f"{option} {value:g} bytes per parameter is outside {low:g} .. {high:g}", where=option,
                             allowed=f"a number from {low:g} to {high:g}, e.g. {example}")
    ws = ranged_quantity(workspace, "bytes", "--workspace")  # 1e30B was priced; the bytes range stops at 1e21
    if ws < 0:  # "-1GB" was refused as "workspace: workspace has a negative ..." (the engine's name, not the option)
        raise InputError(f"{workspace[:40]!r} is negative", where="--workspace", allowed="a size >= 0, e.g. 1GB")
    training = {"micro_batch": micro_batch, "global_batch": global_batch, "seq_len": seq_len,
                "precision": precision, "optimizer_bytes_per_param": optimizer_bytes,
                "grad_bytes_per_param": grad_bytes}
    _, strategy = o.split_flags(tp=tp, pp=pp, cp=cp, ep=ep, zero=zero, recompute=recompute,
                                sequence_parallel=sequence_parallel, schedule=schedule, sync=sync,
                                flash_attention=flash_attention)
    sf = o.read_strategy(strategy_file)
    cl, wl, tr, st = o.build_specs(cluster=cluster, model=model, sets=sets, training=training, strategy=strategy,
                                   strategy_file=sf, gpus=gpus)
    result = run(cl, wl, gpus, tr, st, fragmentation=fragmentation, workspace=ws, sets=sets,
                 origin=o.strategy_origin(sf, strategy, sets))
    if sf is not None:
        result.inputs["strategy_file"] = sf.echo()
    render_memory(result, as_json=as_json)


COMMAND = Command("memory", memory, (
    o.MODEL.but(default="gpt3-175b"), o.CLUSTER.but(default="dgx-h100"),  # the same defaults as predict
    opt("--gpus", "-n", type=integer, default=1024, help="Total GPUs (dp = gpus / (tp pp cp))."),
    o.TP, o.PP, o.CP, o.EP.but(help="Expert-parallel degree, divides dp (default: 1)."), o.STRATEGY_FILE,
    o.MICRO_BATCH.but(flags=("--micro-batch", "-b")), o.SEQ_LEN.but(help="Default: the workload's."),
    o.GLOBAL_BATCH.but(help="Sequences per step; sets the micro-batches per step m = B / (dp b) "
                            "(default B = dp b, one micro-batch, as predict)."),
    o.ZERO, o.RECOMPUTE, o.SEQ_PAR, o.SCHEDULE,
    o.SYNC.but(help="bsp | backup:B | asp | ssp:S | local:H | hier:G (hier:G shards ZeRO states over G replicas); "
                    "default: bsp."),
    o.PRECISION,
    opt("--optimizer-bytes", type=number, help="Optimizer bytes/param (default 12 = Adam fp32 master + m + v)."),
    opt("--grad-bytes", type=number,
        help="Gradient bytes/param (default = weight bytes, ZeRO's 16 B; 4 = Megatron's 18 B)."),
    o.FLASH,
    opt("--fragmentation", type=number, default=0.05, help="Allowance as a fraction of model states plus activations."),
    opt("--workspace", default="1GB", help="Fixed allowance in bytes (CUDA context, buffers), e.g. 1GB or 2GiB."),
    o.SET, o.JSON))
