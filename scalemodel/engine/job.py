"""A job (cluster + workload + training settings) resolved to the plain numbers the step model needs,
and a grid of candidate strategies as numpy arrays (one element per candidate).

The split keeps the hot path free of pydantic: specs are read once into a :class:`Job`, and the
planner builds a :class:`StrategyGrid` of millions of candidates without touching spec objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from scalemodel.cost.network import Network
from scalemodel.errors import InputError

ZERO_CODES = {"0": 0, "1": 1, "2": 2, "3": 3, "fsdp": 4}
RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
ALGORITHMS = ("auto", "ring", "tree", "rhd", "rd", "direct", "hierarchical")
ELEM_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
# Compression codes: 0 none, 1 fp16/bf16 cast, 2 int8, 5 top-k sparsification.
#: PyTorch DDP's default gradient bucket (bucket_cap_mb = 25, torch.nn.parallel.DistributedDataParallel).
DDP_BUCKET_BYTES = 25e6
#: DeepSpeed ZeRO's reduce_bucket_size default, 5e8 elements (hardware_and_formats.md §5.3).
DEEPSPEED_BUCKET_ELEMENTS = 5e8
COMPRESSION_CODES = {"none": 0, "fp16": 1, "bf16": 1, "int8": 2, "topk": 5}


@dataclass(frozen=True)
class Job:
    """Everything about the job that does not vary across candidate strategies (SI units)."""

    name: str
    cluster_name: str
    network: Network
    gpus_per_node: int
    max_gpus: int
    accelerator: str
    peak_flops: float  # at the training precision
    memory_bandwidth: float
    memory_capacity: float
    gemm_max: float
    gemm_half_dim: float
    memory_efficiency: float
    precision: str
    elem_bytes: float  # activations and weights in compute
    grad_bytes: float  # gradient element as communicated
    optimizer_bytes_per_param: float
    seq_len: int
    is_transformer: bool
    shape: Any  # scalemodel.cost.transformer.Shape or None
    params: float
    expert_params: float  # routed-expert parameters (sharded by EP)
    generic_flops_per_sample: float  # forward, generic workloads
    generic_backward_factor: float
    generic_activation_bytes: float
    generic_time_per_sample: float  # measured seconds per sample (fwd+bwd), 0 = use the roofline
    price_per_gpu_s: float  # USD per GPU-second, 0 when unknown
    straggler_cv: float
    straggler_dist: str
    train_tokens: float  # 0 = not given
    critical_batch: float  # B_noise in samples, 0 = not given
    work_cv: float  # CV of one micro-batch's compute time (load imbalance)
    inputs: dict[str, Any] = field(default_factory=dict)


def build_job(cluster: Any, workload: Any, training: Any, *, straggler_cv: float | None = None,
              straggler_dist: str | None = None) -> Job:
    """Resolve validated specs (ClusterSpec, workload, TrainingSpec) into a :class:`Job`."""
    from scalemodel.cost import compute, transformer

    acc = cluster.accelerator
    precision = training.precision
    peak = acc.peak(precision)
    curve = acc.compute_efficiency or compute.default_efficiency(acc.family if acc.family != "other" else acc.name)
    # the spec's curve may carry a separate fp8 GEMM curve (ComputeEfficiency.gemm); family defaults do not
    gemm_max, gemm_half_dim = (acc.compute_efficiency.gemm(precision) if acc.compute_efficiency is not None
                               else (curve.gemm_max, curve.gemm_half_dim))
    elem = ELEM_BYTES[precision] if precision != "fp8" else 2.0  # fp8 GEMMs keep 16-bit activations
    grad_bytes = training.grad_bytes_per_param or (4.0 if precision in ("fp32", "tf32") else 2.0)
    seq = training.seq_len or getattr(workload, "seq_len", 1) or 1
    if workload.kind == "transformer":
        moe = workload.moe
        sh = transformer.shape(
            layers=workload.layers, hidden=workload.hidden, heads=workload.heads, vocab=workload.vocab,
            kv_heads=workload.kv_heads, ffn_hidden=workload.ffn_hidden, gated_mlp=workload.gated_mlp,
            tied_embeddings=workload.tied_embeddings,
            moe_experts=moe.experts if moe else 0, moe_top_k=moe.top_k if moe else 0,
            moe_ffn_hidden=moe.ffn_hidden if moe else None, moe_shared_experts=moe.shared_experts if moe else 0,
            moe_every=moe.every if moe else 1, moe_first_dense=moe.first_dense if moe else 0)
        params = float(transformer.param_count(sh))
        expert = float(transformer.expert_params_per_layer(sh) * sh.moe_layers)
        gen_flops = gen_bwd = gen_act = gen_time = 0.0
    else:
        sh = None
        params = float(workload.params)
        expert = 0.0
        gen_flops = float(workload.flops_per_sample)
        gen_bwd = float(workload.backward_factor)
        gen_act = float(workload.activation_bytes_per_sample or 0.0)
        gen_time = float(getattr(workload, "time_per_sample", None) or 0.0)
    var = cluster.variability
    cv = var.cv if straggler_cv is None else straggler_cv
    if not (0.0 <= cv < 10.0):
        raise InputError(f"straggler CV {cv} out of range", where="--straggler-cv", allowed="0 <= cv < 10")
    return Job(
        name=workload.name, cluster_name=cluster.name, network=cluster.network(),
        gpus_per_node=cluster.gpus_per_node, max_gpus=cluster.largest_gpus, accelerator=acc.name,
        peak_flops=peak, memory_bandwidth=acc.memory_bandwidth, memory_capacity=acc.memory,
        gemm_max=gemm_max, gemm_half_dim=gemm_half_dim, memory_efficiency=curve.memory,
        precision=precision, elem_bytes=elem, grad_bytes=grad_bytes,
        optimizer_bytes_per_param=training.optimizer_bytes_per_param, seq_len=int(seq),
        is_transformer=sh is not None, shape=sh, params=params, expert_params=expert,
        generic_flops_per_sample=gen_flops, generic_backward_factor=gen_bwd, generic_activation_bytes=gen_act,
        generic_time_per_sample=gen_time,
        price_per_gpu_s=float(cluster.price_per_gpu_hour or 0.0),
        straggler_cv=float(cv), straggler_dist=straggler_dist or var.dist,
        train_tokens=float(training.train_tokens or (training.train_samples or 0) * seq),
        critical_batch=float(training.critical_batch or 0.0),
        work_cv=float(training.work_cv),
    )


@dataclass(frozen=True)
class StrategyGrid:
    """Candidate strategies as mutually broadcastable numpy arrays (the planner's unit of work).

    Fields may have different but broadcast-compatible shapes: a planner puts each choice on its
    own axis (tp of shape (4,1,1), pp (1,5,1), ...), so a cost that depends on few choices is
    computed on a small sub-grid and broadcast, not recomputed for every candidate.
    """

    gpus: np.ndarray
    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    micro_batch: np.ndarray
    global_batch: np.ndarray  # sequences (samples) per step
    schedule: np.ndarray  # scalemodel.cost.pipeline.SCHEDULE_CODES
    virtual_stages: np.ndarray
    zero: np.ndarray  # ZERO_CODES
    recompute: np.ndarray  # RECOMPUTE_CODES
    sequence_parallel: np.ndarray  # bool
    overlap: np.ndarray  # bool: DP communication overlapped with backward
    compression: np.ndarray  # COMPRESSION_CODES
    topk_ratio: np.ndarray  # kept fraction for top-k
    ps_servers: np.ndarray  # 0 = all-reduce, K > 0 = parameter server with K servers
    ps_colocated: np.ndarray  # bool
    algorithm: np.ndarray  # index into ALGORITHMS
    dynamic_assignment: np.ndarray  # bool: micro-batches pulled from a shared queue
    bucket_bytes: np.ndarray  # gradient bucket of the DP synchronisation; 0 = the framework's default
    flash_attention: np.ndarray  # bool: fused attention, no s x s score matrix
    dispatch_overhead: np.ndarray  # seconds of scheduling per dynamically assigned micro-batch

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.broadcast_shapes(*(getattr(self, f.name).shape for f in fields(self))))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def flat(self) -> StrategyGrid:
        """The same candidates as 1-D arrays of length ``size`` (materialised)."""
        shape = self.shape
        return replace(self, **{f.name: np.broadcast_to(getattr(self, f.name), shape).ravel()
                                for f in fields(self)})

    def take(self, index: Any) -> StrategyGrid:
        """Candidates at flat positions ``index``."""
        shape = self.shape
        return replace(self, **{f.name: np.broadcast_to(getattr(self, f.name), shape).ravel()[index]
                                for f in fields(self)})

    def describe(self, i: int) -> dict[str, Any]:
        """Candidate i (flat position) as the strategy dict of the JSON output."""
        from scalemodel.cost.pipeline import SCHEDULE_CODES

        if self.gpus.ndim != 1 or self.gpus.size != self.size:
            return self.take(np.asarray([i])).describe(0)

        sched = {v: k for k, v in SCHEDULE_CODES.items()}[int(self.schedule[i])]
        v = int(self.virtual_stages[i])
        comp = {v2: k for k, v2 in COMPRESSION_CODES.items() if k != "bf16"}[int(self.compression[i])]
        ps = int(self.ps_servers[i])
        return {
            "gpus": int(self.gpus[i]), "dp": int(self.dp[i]), "tp": int(self.tp[i]), "pp": int(self.pp[i]),
            "cp": int(self.cp[i]), "ep": int(self.ep[i]), "micro_batch": int(self.micro_batch[i]),
            "global_batch": int(self.global_batch[i]),
            "schedule": f"{sched}:{v}" if sched == "interleaved" else sched,
            "zero": {v2: k for k, v2 in ZERO_CODES.items()}[int(self.zero[i])],
            "recompute": {v2: k for k, v2 in RECOMPUTE_CODES.items()}[int(self.recompute[i])],
            "sequence_parallel": bool(self.sequence_parallel[i]), "overlap": bool(self.overlap[i]),
            "compression": f"topk:{float(self.topk_ratio[i]):g}" if comp == "topk" else comp,
            "dp_comm": (f"ps:{ps}" + (":colocated" if bool(self.ps_colocated[i]) else "")) if ps else "allreduce",
            "algorithm": ALGORITHMS[int(self.algorithm[i])],
            "assignment": "dynamic" if bool(self.dynamic_assignment[i]) else "static",
            "dispatch_overhead_s": float(self.dispatch_overhead[i]),
            "bucket_bytes": float(self.bucket_bytes[i]) or None,  # None: the framework's default
            "flash_attention": bool(self.flash_attention[i]),
        }


def grid_from_arrays(**arrays: Any) -> StrategyGrid:
    """A StrategyGrid from broadcast-compatible keyword arrays (missing fields take their defaults).

    Shapes are kept (not materialised): pass axis-shaped arrays for a cartesian product.
    """
    defaults: dict[str, Any] = dict(cp=1, ep=1, schedule=0, virtual_stages=1, zero=0, recompute=0,
                                    sequence_parallel=False, overlap=True, compression=0, topk_ratio=1.0,
                                    ps_servers=0, ps_colocated=False, algorithm=0, dynamic_assignment=False,
                                    dispatch_overhead=0.0, bucket_bytes=0.0, flash_attention=True)
    values = {**defaults, **arrays}
    names = [f.name for f in fields(StrategyGrid)]
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"missing strategy arrays: {missing}")
    out: dict[str, np.ndarray] = {}
    for n in names:
        kind = bool if n in ("sequence_parallel", "overlap", "ps_colocated", "dynamic_assignment",
                             "flash_attention") else (
            float if n in ("topk_ratio", "dispatch_overhead", "bucket_bytes") else np.int64)
        out[n] = np.asarray(values[n], dtype=kind)
    try:
        np.broadcast_shapes(*(a.shape for a in out.values()))
    except ValueError as exc:
        raise TypeError(f"strategy arrays do not broadcast: {exc}") from None
    return StrategyGrid(**out)


def grid_from_strategy(strategy: Any, training: Any, gpus: int, job: Job) -> StrategyGrid:
    """One candidate from a StrategySpec + TrainingSpec at ``gpus`` GPUs (DP derived when not given)."""
    from scalemodel.cost.pipeline import SCHEDULE_CODES

    tp, pp, cp, ep = strategy.tp, strategy.pp, strategy.cp, strategy.ep
    model_parallel = tp * pp * cp
    if strategy.dp is None:
        if gpus % model_parallel:
            raise InputError(f"{gpus} GPUs is not a multiple of tp x pp x cp = {tp} x {pp} x {cp} = {model_parallel}",
                             where="--gpus", allowed=f"a multiple of {model_parallel}, or change --tp/--pp/--cp")
        dp = gpus // model_parallel
    else:
        dp = strategy.dp
        if dp * model_parallel != gpus:
            raise InputError(f"dp x tp x pp x cp = {dp * model_parallel} but --gpus is {gpus}", where="--dp",
                             allowed="dp = gpus / (tp pp cp), or leave --dp out to derive it")
    if strategy.sync.startswith("hier:"):
        group = int(strategy.sync.split(":")[1])
        if group < 1 or dp % group:
            raise InputError(f"hier group size {group} does not divide dp = {dp}", where="--sync",
                             allowed=f"hier:G with G a divisor of {dp} (G counts data-parallel replicas)")
    if ep > 1:
        experts = int(job.shape.moe_experts) if job.is_transformer else 0
        if experts == 0 or dp % ep or experts % ep:
            raise InputError(f"--ep {ep} needs an MoE model whose {experts} experts and dp = {dp} it divides",
                             where="--ep", allowed="an EP degree dividing both dp and the number of experts")
    micro = training.micro_batch
    global_batch = training.global_batch or dp * micro
    comp = strategy.compression
    comp_code = COMPRESSION_CODES["topk" if comp.startswith("topk") else comp]
    ratio = float(comp.split(":", 1)[1]) if comp.startswith("topk") else 1.0
    ps = strategy.dp_comm
    ps_k = int(ps.split(":")[1]) if ps.startswith("ps:") else 0
    return grid_from_arrays(
        gpus=gpus, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch=micro, global_batch=global_batch,
        schedule=SCHEDULE_CODES[strategy.schedule_kind], virtual_stages=strategy.virtual_stages,
        zero=ZERO_CODES[strategy.zero], recompute=RECOMPUTE_CODES[strategy.recompute],
        sequence_parallel=strategy.sequence_parallel, overlap=strategy.overlap, compression=comp_code,
        topk_ratio=ratio, ps_servers=ps_k, ps_colocated=ps.endswith(":colocated"),
        algorithm=ALGORITHMS.index(strategy.algorithm), dynamic_assignment=strategy.assignment == "dynamic",
        dispatch_overhead=strategy.dispatch_overhead, bucket_bytes=strategy.bucket_size or 0.0,
        flash_attention=strategy.flash_attention)
