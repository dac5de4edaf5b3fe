"""`memory`: the per-GPU memory of one strategy and the largest micro-batch that fits.

The same engine path as `predict` (:func:`scalemodel.engine.job.build_job`, the strategy grid and
:func:`scalemodel.engine.stage_memory.memory_parts`), so both report the same bytes and the same verdict.
The number of micro-batches in flight follows the step model: m = B / (dp b) with B the global
batch (default dp x micro-batch, i.e. m = 1), and the first pipeline stage holds min(m, pp) of
them under 1F1B (:func:`scalemodel.cost.memory.inflight_microbatches`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from scalemodel.cost import memory as M
from scalemodel.engine.divisors import divisors
from scalemodel.engine.dp_comm import host_state_bytes_per_node
from scalemodel.engine.job import Job, StrategyGrid, build_job, grid_from_strategy
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.stage_memory import memory_peak_stage, memory_total
from scalemodel.engine.step import INFEASIBLE_REASONS, Infeasible, feasibility
from scalemodel.errors import InputError, Origin

#: The parts of the per-GPU memory, in the order of the JSON object (then ``total``).
MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "fragmentation", "workspace")


@dataclass(frozen=True)
class MemoryResult:
    """Per-GPU memory of one strategy (bytes), and the largest micro-batch that fits."""

    inputs: dict[str, Any]
    accelerator: str
    seq_len: int | None
    num_microbatches: int
    params_per_gpu: float  # on a GPU of peak_stage, before ZeRO sharding
    per_gpu_bytes: dict[str, float]  # MEMORY_PARTS and "total"
    activation_bytes_per_micro_batch_sample: float
    capacity_bytes: float
    fits: bool
    max_micro_batch: int | None  # None: no activation size known
    # predict's verdict on the strategy (step.feasibility, then memory) and its sentence (None when feasible)
    feasible: bool = True
    infeasible_reason: str | None = None
    # the pipeline stage whose memory per_gpu_bytes and params_per_gpu are (the peak, the one the verdict uses):
    # rank 0 = first, pp - 1 = last; its role: "only" (pp 1), "first", "middle" or "last"
    peak_stage: int = 0
    peak_stage_role: str = "only"
    # offload_states' host bytes per node and the cluster's host_memory (None: unknown, not checked); both None
    # without offload_states (docs/model.md#host-memory)
    host_bytes_per_node: float | None = None
    host_capacity_bytes: float | None = None

    def payload(self) -> dict[str, Any]:
        host = {} if self.host_bytes_per_node is None else {"host_memory": {
            "bytes_per_node": self.host_bytes_per_node, "capacity_bytes": self.host_capacity_bytes,
            "fits": None if self.host_capacity_bytes is None else self.host_bytes_per_node <= self.host_capacity_bytes}}
        return {**host, "inputs": self.inputs, "seq_len": self.seq_len, "num_microbatches": self.num_microbatches,
                "params_per_gpu": self.params_per_gpu, "per_gpu_bytes": self.per_gpu_bytes,
                "activation_bytes_per_micro_batch_sample": self.activation_bytes_per_micro_batch_sample,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "max_micro_batch": self.max_micro_batch,
                "feasible": self.feasible, "infeasible_reason": self.infeasible_reason,
                "accelerator": self.accelerator,
                "peak_stage": {"rank": self.peak_stage, "role": self.peak_stage_role}}


def _largest_micro_batch(job: Job, grid: StrategyGrid, global_batch: int | None, states: float, act1: float,
                         fragmentation: float, workspace: float, sync: str = "bsp") -> int | None:
    """The largest micro-batch b whose memory fits, under the step model's rule for m.

    Without a global batch, B = dp b, so m = 1 whatever b: every stage's activations are linear in b and
    :func:`scalemodel.cost.memory.max_micro_batch` solves for b in closed form on the stage priced at the asked
    micro-batch (``states``, ``act1``). Another stage can overtake it at a larger b (fewer states but more
    activations per sample: the last stage's logits, 4 s V / t a sample, against the first stage's extra layers),
    so that b is checked with the whole memory model (the peak over stages, :func:`memory_parts`) and, where
    it does not fit, the largest fitting b below it is found by bisection (every stage's total grows with b).
    With a global batch B, b runs over the divisors of the per-replica batch B / dp (m = B / (dp b) changes with
    b, and with it the micro-batches in flight): each is evaluated by the same memory model. A B that dp does not
    divide has no such b (predict calls the strategy infeasible); b is then found as without a global batch.
    """
    if act1 <= 0:
        return None
    dp = int(np.asarray(grid.dp).ravel()[0])
    if global_batch is not None and global_batch % dp:
        global_batch = None  # no b divides B / dp (predict: infeasible); priced as predict does, m = 1 for B < dp b
    if global_batch is None:
        b = int(M.max_micro_batch(states, act1, job.memory_capacity, fragmentation=fragmentation,
                                  workspace=workspace))

        def fits(n: int) -> bool:
            trial = msgspec.structs.replace(grid, micro_batch=np.asarray([n], dtype=np.int64))
            total = memory_total(job, trial, microbatches(trial), fragmentation=fragmentation, workspace=workspace,
                                 sync=sync)
            return bool(np.asarray(total <= job.memory_capacity).ravel()[0])

        if b < 1 or fits(b):
            return b
        lo, hi = 0, b  # fits(lo) (0 by convention), not fits(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo
    candidates = divisors(global_batch // dp)
    trial = msgspec.structs.replace(grid, micro_batch=candidates.astype(np.int64))
    total = memory_total(job, trial, microbatches(trial), fragmentation=fragmentation, workspace=workspace,
                         sync=sync)
    fitting = candidates[np.asarray(total <= job.memory_capacity)]
    return int(fitting.max()) if fitting.size else 0


def memory(cluster: Any, workload: Any, gpus: int, training: Any, strategy: Any, *,
           fragmentation: float = M.DEFAULT_FRAGMENTATION, workspace: float = M.DEFAULT_WORKSPACE,
           sets: list[str] | None = None, origin: Origin | None = None) -> MemoryResult:
    """Per-GPU memory of validated specs at ``gpus`` GPUs (the engine behind `scalemodel memory`); ``origin`` names
    where the strategy's fields were written, for errors (job.grid_from_strategy)."""
    cluster.require_gpus(gpus)
    job = build_job(cluster, workload, training)
    grid = grid_from_strategy(strategy, training, gpus, job, origin=origin)
    tp, pp, cp, ep = strategy.tp, strategy.pp, strategy.cp, strategy.ep
    dp = int(np.asarray(grid.dp).ravel()[0])
    micro = int(training.micro_batch)
    m = microbatches(grid)
    peak = memory_peak_stage(job, grid, m, fragmentation=fragmentation, workspace=workspace,
                             sync=strategy.sync)  # hier:G shards ZeRO inside its groups
    parts = peak.parts
    breakdown = {k: float(np.asarray(parts[k]).ravel()[0]) for k in (*MEMORY_PARTS, "total")}
    if not all(np.isfinite(list(breakdown.values()))):
        raise InputError("the memory model overflows for these inputs", where="memory",
                         allowed="values within physical ranges")
    fits = bool(breakdown["total"] <= job.memory_capacity)
    # the verdict predict gives (step.evaluate: the codes before memory, then out of memory), in its words
    code = int(np.asarray(feasibility(job, grid, strategy.sync)).ravel()[0]) or (
        0 if fits else int(Infeasible.OUT_OF_MEMORY))
    states = breakdown["weights"] + breakdown["gradients"] + breakdown["optimizer"]
    act1 = breakdown["activations"] / micro
    # the parameters and rank of the stage priced above (the peak: with MTP modules or uneven stages it need not
    # be the first)
    params = float(np.asarray(peak.params).ravel()[0])
    rank = int(np.asarray(peak.rank).ravel()[0])
    role = "only" if pp == 1 else "first" if rank == 0 else "last" if rank == pp - 1 else "middle"
    inputs = {"model": job.name, "cluster": job.cluster_name, "gpus": gpus, "dp": dp, "tp": tp, "pp": pp, "cp": cp,
              "ep": ep, "micro_batch": micro, "global_batch": training.global_batch, "zero": strategy.zero,
              "recompute": strategy.recompute, "sequence_parallel": bool(np.asarray(grid.sequence_parallel).ravel()[0]),
              "schedule": strategy.schedule, "sync": strategy.sync, "precision": job.precision,
              "weight_bytes_per_param": job.elem_bytes,
              "grad_bytes_per_param": job.grad_bytes, "optimizer_bytes_per_param": job.optimizer_bytes_per_param,
              "flash_attention": strategy.flash_attention, "fragmentation": fragmentation,
              "workspace_bytes": workspace, "set": list(sets or [])}
    if strategy.offload_states != "none":  # where the states went (report.predict.strategy_header; review35c)
        inputs["offload_states"] = strategy.offload_states
    host_bytes = host_cap = None
    if strategy.offload_states != "none":  # the host side of the offload (the same function feasibility checks)
        host_bytes = float(np.asarray(host_state_bytes_per_node(job, grid, m, strategy.sync)).ravel()[0])
        host_cap = job.host_memory if job.host_memory > 0 else None
    return MemoryResult(
        inputs=inputs, accelerator=job.accelerator, seq_len=job.seq_len if job.is_transformer else None,
        num_microbatches=int(np.asarray(m).ravel()[0]), params_per_gpu=params, per_gpu_bytes=breakdown,
        activation_bytes_per_micro_batch_sample=act1, capacity_bytes=float(job.memory_capacity),
        fits=fits,
        max_micro_batch=_largest_micro_batch(job, grid, training.global_batch, states, act1, fragmentation,
                                             workspace, strategy.sync),
        feasible=code == 0, infeasible_reason=INFEASIBLE_REASONS[code] if code else None,
        peak_stage=rank, peak_stage_role=role, host_bytes_per_node=host_bytes, host_capacity_bytes=host_cap)
