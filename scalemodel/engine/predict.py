"""`predict`: one strategy on one cluster at one size, as a readable, JSON-ready result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import CompressionKind, Zero, parse_compression
from scalemodel.cost import compression
from scalemodel.engine.divisors import divisors
from scalemodel.engine.dp_comm import (
    bucket_size_priced,
    hier_group,
    host_state_bytes_per_node,
    hsdp_shard_group,
    ps_server_line,
)
from scalemodel.engine.intervals import family_of, generation_of, interval_for
from scalemodel.engine.job import Job, StrategyGrid, build_job, grid_from_strategy, held_gpus
from scalemodel.engine.parts import BREAKDOWN_KEYS, PARTS
from scalemodel.engine.step import INFEASIBLE_REASONS, Infeasible, StepArrays, evaluate
from scalemodel.errors import InputError, Origin
from scalemodel.units import format_quantity


@dataclass
class Prediction:
    """One strategy's predicted step: its time and breakdown, throughput, memory and what limits it."""

    inputs: dict[str, Any]
    strategy: dict[str, Any]
    feasible: bool
    infeasible_reason: str | None
    step_time_s: float
    breakdown_s: dict[str, float]
    throughput: dict[str, float]
    flops: dict[str, Any]  # FLOPs, TFLOP/s, MFU, HFU and the peak they are shares of (its format a str)
    memory: dict[str, Any]
    sync: dict[str, Any]
    time_to_train_s: float | None
    cost_usd: float | None
    dominant: str
    notes: list[str] = field(default_factory=list)
    interval: dict[str, Any] | None = None  # engine/intervals.py: band from the validation residuals
    infeasible_detail: str | None = None  # what in this strategy makes infeasible_reason (where it can be named)
    # why a part is 0 where the reason is an input rather than the strategy (the table's zero-parts line; not in the
    # JSON, whose inputs say it): jitter on an accelerator with no measured clock_jitter_cv
    zero_because: dict[str, str] = field(default_factory=dict)

    @property
    def reported_interval(self) -> dict[str, Any] | None:
        """The band the outputs give: the validated runs' band is for a step that runs, so none for an infeasible
        step (ux20, "priced as if it ran"); check --pessimistic reads :attr:`interval` itself."""
        return self.interval if self.feasible else None

    def payload(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "strategy": self.strategy, "feasible": self.feasible,
            "infeasible_reason": self.infeasible_reason, "infeasible_detail": self.infeasible_detail,
            "step_time_s": self.step_time_s,
            "breakdown_s": self.breakdown_s, "throughput": self.throughput, "flops": self.flops,
            "memory": self.memory, "sync": self.sync, "time_to_train_s": self.time_to_train_s,
            "cost_usd": self.cost_usd, "dominant": self.dominant, "notes": self.notes,
            "interval": self.reported_interval,
        }


def _pick(a: Any, i: int) -> Any:
    """Element at flat position i of a (broadcast) result array, without materialising it."""
    arr = np.asarray(a)
    return arr[np.unravel_index(i, arr.shape)] if arr.ndim else arr


def _f(x: Any) -> float:
    v = float(x)
    if not np.isfinite(v):  # was zeroed: a NaN straggler time printed as a finite step at 0 tokens/s (fuzz31)
        raise InputError(f"a predicted quantity is {v!r}", where="result",
                         allowed="an internal invariant: every number a prediction reports is finite (a defect to "
                         "report, with the command that gave it)")
    return v


def result_at(job: Job, grid: StrategyGrid, res: StepArrays, i: int, *, sync: str,
              inputs: dict[str, Any] | None = None) -> Prediction:
    """Candidate ``i`` of an evaluation as a :class:`Prediction`."""
    breakdown = {k: _f(_pick(res.breakdown[k], i)) for k in BREAKDOWN_KEYS}
    step = sum(breakdown.values())
    feasible = bool(_pick(res.feasible, i))
    reason_code = int(_pick(res.reason, i))
    strategy = grid.describe(i)
    if strategy["bucket_bytes"] and not bool(np.broadcast_to(bucket_size_priced(job, grid), grid.shape)[
            np.unravel_index(i, grid.shape)]):
        # no bucket of that size was priced (dp_comm.bucket_size_priced): the strategy names what was, the framework's
        # own (predict says so in a warning; plan's explanation named the searched size)
        strategy["bucket_bytes"] = None
    gpus = int(strategy["gpus"])
    tokens = _f(_pick(res.tokens_per_s, i))
    stat = _f(_pick(res.statistical_efficiency, i)) or 1.0
    time_to_train = job.train_tokens / (tokens * stat) if job.train_tokens > 0 and tokens > 0 else None
    held = held_gpus(sync, gpus, int(strategy["tp"]) * int(strategy["pp"]) * int(strategy["cp"]))
    cost = time_to_train * held * job.price_per_gpu_s if time_to_train and job.price_per_gpu_s > 0 else None
    mem = {k: _f(_pick(v, i)) for k, v in res.memory.items()}
    top = max(breakdown, key=lambda k: breakdown[k])
    share = breakdown[top] / step if step > 0 else 0.0
    dominant = f"{top} is {share:.0%} of the step: {PARTS[top].description}"
    notes = []
    detail = None
    if not feasible:
        notes.append(INFEASIBLE_REASONS[reason_code])
        if reason_code == int(Infeasible.LAYERS_NOT_DIVISIBLE):
            detail = _layers_detail(job, strategy)
        elif reason_code == int(Infeasible.BATCH_NOT_DIVISIBLE):
            detail = batch_detail(int(strategy["global_batch"]), int(strategy["dp"]), int(strategy["micro_batch"]))
        elif reason_code == int(Infeasible.HOST_OUT_OF_MEMORY):
            host = _f(_pick(np.broadcast_to(host_state_bytes_per_node(job, grid, res.microbatches, sync),
                                            np.shape(res.reason)), i))
            detail = (f"{format_quantity(host, 'bytes', binary=False)} of model states per node against the "
                      f"cluster's host_memory {format_quantity(job.host_memory, 'bytes', binary=False)} "
                      "(`scalemodel memory` with the same options shows them)")
    mfu = _f(_pick(res.mfu, i))
    band = interval_for(generation_of(job.accelerator_family), *family_of(job, strategy["zero"]), gpus,
                        job.calibration)
    return Prediction(
        inputs=inputs or {},
        strategy={**strategy, "sync": sync},
        feasible=feasible,
        infeasible_reason=None if feasible else INFEASIBLE_REASONS[reason_code],
        step_time_s=step,
        breakdown_s=breakdown,
        throughput={"tokens_per_s": tokens, "samples_per_s": _f(_pick(res.samples_per_s, i)),
                    "tokens_per_s_per_gpu": tokens / gpus},
        flops={"model_flops_per_step": _f(_pick(res.model_flops, i)),
               "hardware_flops_per_step": _f(_pick(res.hardware_flops, i)),
               "tflops_per_gpu": _f(_pick(res.tflops_per_gpu, i)), "mfu": mfu,
               "hfu": _f(_pick(res.hfu, i)),
               # MFU's and HFU's denominator: the dense peak at the training precision (docs/model.md), which an
               # fp8 run's 36 % against a bf16 run's 52 % left unsaid (fp8's peak is twice bf16's)
               "peak_flops_per_gpu": float(job.peak_flops), "peak_format": job.peak_format or job.precision},
        memory={"per_gpu_bytes": mem.pop("total"), "capacity_bytes": job.memory_capacity,
                "fits": bool(_pick(res.fits, i)), "parts_bytes": mem},
        sync={"mode": sync, "updates_per_s": _f(_pick(res.updates_per_s, i)),
              "mean_staleness": _f(_pick(res.mean_staleness, i)),
              "statistical_efficiency": stat},
        time_to_train_s=time_to_train,
        cost_usd=cost,
        dominant=dominant,
        notes=notes,
        interval=band.payload(step, tokens, mfu) if band is not None and step > 0 else None,
        infeasible_detail=detail,
        zero_because={"jitter": "no measured clock_jitter_cv for this accelerator"}
        if job.clock_jitter_cv <= 0.0 and breakdown["jitter"] <= 0.0 else {},
    )


def _layers_detail(job: Job, strategy: dict[str, Any]) -> str | None:
    """The layer count and chunk count behind ``layers_not_divisible`` for the common case, an interleaved
    schedule on a plain (not hybrid) stack with no given stage or chunk sizes, where Megatron-Core needs
    L divisible by pp x v (pipeline_ranks._layers_split): which v would divide, or that none does and the first/last
    chunk sizes (Megatron's account-for-embedding/loss split) are the way. None for the other cases (the reason's
    sentence names them)."""
    sched = str(strategy.get("schedule", ""))
    if not job.is_transformer or job.shape.hybrid is not None or not sched.startswith("interleaved:"):
        return None
    given = ("first_stage_layers", "last_stage_layers", "first_chunk_layers", "last_chunk_layers", "stage_layers")
    if any(strategy.get(k) is not None for k in given):
        return None
    layers, pp, v = int(job.shape.layers), int(strategy["pp"]), int(sched.split(":")[1])
    if layers % (pp * v) == 0:
        return None
    fits = [w for w in divisors(layers // pp).tolist() if w >= 2 and layers % (pp * w) == 0]
    other = (f"v = {', '.join(map(str, fits[:6]))} would divide" if fits else
             f"no v >= 2 divides at pp {pp}")
    return (f"{layers} layers are not a multiple of pp {pp} x v {v} = {pp * v} model chunks ({other}); "
            "--set strategy.first_chunk_layers=N / last_chunk_layers=N gives the first/last chunk its own size "
            "(Megatron-Core's account-for-embedding/loss split)")


def batch_detail(global_batch: int, dp: int, micro_batch: int) -> str:
    """The values behind ``batch_not_divisible`` (step.py: B must be a positive multiple of dp x b, each of the m =
    B / (dp b) micro-batches a whole one) and what would divide: the nearest global batches, the micro-batches
    that divide B / dp, the data-parallel degrees near dp that divide B / b."""
    per_step = dp * micro_batch
    lower, upper = global_batch // per_step * per_step, -(-global_batch // per_step) * per_step
    batches = " or ".join(str(v) for v in (lower, upper) if v > 0)
    out = [f"global batch {global_batch} is not a multiple of dp {dp} x micro-batch {micro_batch} = {per_step}: "
           f"global batch {batches} would divide"]
    if global_batch % dp == 0:
        fits = divisors(global_batch // dp).tolist()
        out.append(f"at dp {dp}, micro-batch {', '.join(map(str, fits[:6]))} would")
    if global_batch % micro_batch == 0:
        per_rank = global_batch // micro_batch
        near = sorted(divisors(per_rank).tolist(), key=lambda d: (abs(d - dp), d))[:4]
        out.append(f"at micro-batch {micro_batch}, dp {', '.join(map(str, sorted(near)))} would "
                   "(dp = gpus / (tp x pp x cp))")
    return "; ".join(out)


def predict(cluster: Any, workload: Any, gpus: int, training: Any, strategy: Any, *,
            straggler_cv: float | None = None, kappa: float | None = None,
            inputs: dict[str, Any] | None = None, origin: Origin | None = None) -> Prediction:
    """Predict one training step for validated specs (the engine behind `scalemodel predict`).

    ``origin``: the file fields the strategy came from (a sweep row), for errors (None: the command line's)."""
    job = build_job(cluster, workload, training, straggler_cv=straggler_cv)
    grid = grid_from_strategy(strategy, training, gpus, job, origin=origin)
    res = evaluate(job, grid, sync=strategy.sync, kappa=kappa)
    pred = result_at(job, grid, res, 0, sync=strategy.sync, inputs=inputs)
    if (pred.sync.get("mean_staleness") or 0.0) > 0:
        pred.notes.append(staleness_note(job, kappa))
    if pred.strategy["zero"] == "hsdp" and pred.strategy.get("shard_group") is None \
            and hier_group(grid, strategy.sync) is None:
        # the default shard group is priced but was said nowhere (the strategy echoes shard_group: null)
        group = int(np.asarray(hsdp_shard_group(job, grid)).ravel()[0])
        pred.notes.append(f"zero hsdp: the model states are sharded over {group} data-parallel replicas and "
                          f"replicated over {int(pred.strategy['dp']) // max(group, 1)} (the default shard group: "
                          "the replicas in one node; strategy.shard_group sets it)")
    if str(pred.strategy.get("dp_comm", "allreduce")).startswith("ps:"):
        pred.notes.append(_ps_note(job, str(pred.strategy["dp_comm"])))
    # the gradients are reduced over the replicas with their cp ranks (dp_comm: DataParallelGroups.sharding); a group
    # of one synchronises none, and no compression is priced at all
    if int(pred.strategy["dp"]) * int(pred.strategy["cp"]) > 1:
        cast = compression.cast_noop_note(parse_compression(strategy.compression).kind.label, job.grad_bytes)
        if cast:
            pred.notes.append(cast)
        # a parameter server with top-k is refused (infeasible) and priced dense, with no all-gather to explain
        if int(grid.compression.ravel()[0]) == int(CompressionKind.TOPK) and int(grid.ps_servers.ravel()[0]) == 0:
            slower = _topk_slower_note(job, grid, pred, strategy.sync, kappa)
            if slower:
                pred.notes.append(slower)
    return pred


def _topk_slower_note(job: Job, grid: StrategyGrid, pred: Prediction, sync: str, kappa: float | None) -> str | None:
    """Why top-k made the step slower than the same strategy without compression (priced alike, compression none),
    else None. Top-k's pairs are all-gathered (docs/model.md#compression): each rank receives (dp-1) rho c of the
    gradient's bytes, c = (g + 4)/g for g-byte values and int32 indices, where the ring all-reduce moves 2(dp-1)/dp
    (ZeRO 1: the reduce-scatter it replaces, (dp-1)/dp; the parameter all-gather stays);
    above the break-even density 2/(dp c) (ZeRO 1: 1/(dp c)) the bytes alone exceed the dense exchange's
    (compression.sparse_break_even_density). Below it, what is left is what top-k adds: its encode/decode (the
    selection reads the gradient 3 times, decoding scatter-adds dp - 1 payloads: dp_comm._wire_and_codec); not its
    latency, since the all-gather's dp - 1 terms per bucket are fewer than the ring all-reduce's 2(dp - 1). dp is
    the group that reduces the gradients, the replicas with their cp ranks (dp x cp, as dp_comm prices both
    exchanges over DataParallelGroups.sharding)."""
    dense = msgspec.structs.replace(grid, compression=np.full_like(grid.compression, int(CompressionKind.NONE)),
                    topk_ratio=np.ones_like(grid.topk_ratio))
    base = sum(_f(_pick(v, 0)) for v in evaluate(job, dense, sync=sync, kappa=kappa).breakdown.values())
    if not pred.step_time_s > base:
        return None
    # the ranks that reduce the gradients: the replicas with their cp ranks (dp_comm's red = data.sharding)
    cp, rho = int(pred.strategy["cp"]), float(grid.topk_ratio.ravel()[0])
    dp = int(pred.strategy["dp"]) * cp
    c = (job.grad_bytes + 4.0) / job.grad_bytes
    # ZeRO 1: top-k stands in for the gradients' reduce-scatter only, (dp-1)/dp; at ZeRO 0 for the all-reduce's 2x
    passes = 1 if int(grid.zero.ravel()[0]) == int(Zero.OPTIMIZER) else 2
    dense_op = "reduce-scatter" if passes == 1 else "all-reduce"
    even = float(compression.sparse_break_even_density(dp, c, passes))
    group = f"dp {dp}" if cp == 1 else f"dp x cp = {dp} (the cp ranks reduce the gradients with the replicas)"
    head = (f"compression topk:{rho:g} is slower than none here ({format_quantity(pred.step_time_s, 'time')} against "
            f"{format_quantity(base, 'time')}): ")
    if rho > even:
        return head + (f"its all-gather sends more bytes than the dense {dense_op}: each rank receives (dp-1) x "
                       f"density x (value + index bytes)/value bytes = {(dp - 1) * rho * c:.3g} x the gradient, "
                       f"against {'' if passes == 1 else '2'}(dp-1)/dp = {passes * (dp - 1) / dp:.3g} x for the ring "
                       f"{dense_op} (at {group} top-k sends fewer bytes only below density {even:.3g})")
    return head + (f"its bytes are below the dense {dense_op}'s (density {rho:g} < the break-even {even:.3g} at "
                   f"{group}), but its own cost exceeds the saving: the selection reads the gradient 3 times and the "
                   f"decode scatter-adds dp - 1 = {dp - 1} payloads, both memory-bound")


def _ps_note(job: Job, dp_comm: str) -> str:
    """What ``ps:K`` was priced on, the defaults the user did not give: dedicated servers' NIC (the cluster's
    parameter_server.nic_bandwidth, else a node's NIC) and summing DRAM (docs/model.md#parameter-server); colocated
    servers share the worker machines' NICs."""
    k = dp_comm.split(":")[1]
    if dp_comm.endswith(":colocated"):
        return (f"dp_comm {dp_comm}: {k} servers on the worker machines, sharing their NICs "
                "(docs/model.md#parameter-server)")
    line, nic = ps_server_line(job)
    rate = format_quantity(line * 8, "bandwidth").replace("B/s", "bit/s")
    whence = ("cluster.parameter_server.nic_bandwidth" if job.ps_server_nic_bandwidth > 0 else
              f"the default: a node's {job.network.gpus_per_node} x {nic.name} line rate; "
              "cluster.parameter_server.nic_bandwidth sets it")
    return (f"dp_comm {dp_comm}: {k} dedicated server machines, each with a {rate} NIC at {nic.name}'s efficiency "
            f"{nic.efficiency:g} ({whence}), summing in "
            f"{format_quantity(job.ps_server_memory_bandwidth, 'bandwidth')} of DRAM "
            "(cluster.parameter_server.memory_bandwidth; docs/model.md#parameter-server)")


def staleness_note(job: Job, kappa: float | None) -> str:
    """Where the staleness penalty's kappa came from (a sync mode with stale gradients)."""
    if kappa is not None:
        return f"staleness penalty: kappa {kappa:g} from --staleness-kappa"
    return f"staleness penalty: {job.staleness_kappa_source}"
