"""Training settings and parallelism/synchronisation strategy specs."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from scalemodel.choices import (
    Algorithm,
    Assignment,
    Choice,
    Layout,
    Optimizer,
    Precision,
    Recompute,
    RecomputeMethod,
    Schedule,
    Zero,
    parse_compression,
    parse_dp_comm,
    parse_schedule,
    parse_sequence_lengths,
    parse_sync,
)
from scalemodel.specs.base import Spec
from scalemodel.specs.quantities import Bytes, Count, SecondsOrZero


def _labels(cls: type[Choice]) -> WithJsonSchema:
    return WithJsonSchema({"enum": cls.labels(), "type": "string"})


# Text fields holding one of a choice's labels, validated and normalised by choices.py.
TrainPrecision = Annotated[str, BeforeValidator(Precision.normalize), _labels(Precision)]
ZeroText = Annotated[str, BeforeValidator(Zero.normalize), _labels(Zero)]
RecomputeText = Annotated[str, BeforeValidator(Recompute.normalize), _labels(Recompute)]
AssignmentText = Annotated[str, BeforeValidator(Assignment.normalize), _labels(Assignment)]
OptimizerText = Annotated[str, BeforeValidator(Optimizer.normalize), _labels(Optimizer)]
LayoutText = Annotated[str, BeforeValidator(Layout.normalize), _labels(Layout)]
RecomputeMethodText = Annotated[str, BeforeValidator(RecomputeMethod.normalize), _labels(RecomputeMethod)]


class TrainingSpec(Spec):
    global_batch: int | None = Field(default=None, gt=0, description="sequences (or samples) per step")
    micro_batch: int = Field(default=1, gt=0)
    seq_len: int | None = Field(default=None, gt=0, description="default: the workload's seq_len")
    precision: TrainPrecision = "bf16"
    optimizer_bytes_per_param: float = Field(
        default=12.0, ge=0,
        description="optimizer-state bytes per parameter: 12 = fp32 master + Adam m, v (ZeRO paper's K=12)")
    optimizer: OptimizerText | None = Field(default=None, description=(
        "sgd | momentum | adam | rmsprop | adagrad: picks the staleness penalty's fitted kappa for async / stale "
        "sync modes (scalemodel/data/staleness_kappa.json); not given: the documented fallback"))
    grad_bytes_per_param: float | None = Field(
        default=None, gt=0, description="gradient element size; default from precision (2 for 16-bit)")
    train_tokens: Count | None = None
    train_samples: Count | None = None
    critical_batch: Count | None = Field(default=None, description="gradient noise scale B_noise, in samples")
    work_cv: float = Field(default=0.0, ge=0.0, lt=10.0, description=(
        "coefficient of variation of one micro-batch's compute time (variable sequence lengths, "
        "data-dependent work); drives the load-imbalance term; derived from sequence_lengths when that is given"))
    sequence_lengths: str | None = Field(default=None, description=(
        "sample length distribution in tokens: fixed (packed) | uniform:LO:HI; gives work_cv from the "
        "model's own cost of a sequence (GEMMs ~ L, attention ~ L^2)"))

    @field_validator("sequence_lengths")
    @classmethod
    def _lengths(cls, v: str | None) -> str | None:
        return None if v is None else parse_sequence_lengths(v).label


class StrategySpec(Spec):
    dp: int | None = Field(default=None, gt=0, description="data-parallel degree; default N / (tp pp cp)")
    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    etp: int | None = Field(default=None, gt=0, description=(
        "expert tensor-parallel degree (Megatron-Core --expert-tensor-parallel-size); default tp. The expert grid "
        "folds etp x ep over each stage's tp x cp x dp ranks (MoE parallel folding, arXiv 2504.14960), so ep need "
        "only divide tp cp dp / etp, not dp"))
    moe_a2a_overlap: bool = Field(default=False, description=(
        "overlap each micro-batch's expert-parallel all-to-alls with another micro-batch's computation in the "
        "1F1B steady state (Megatron-Core --overlap-moe-expert-parallel-comm with --delay-wgrad-compute; "
        "Megatron-Bridge moe_a2a_overlap); needs ep > 1, no full recompute, and the interleaved schedule when pp > 1"))
    zero: ZeroText = "0"
    recompute: RecomputeText = "none"
    sequence_parallel: bool = False
    schedule: str = Field(default="1f1b", description="1f1b | interleaved:V | gpipe | zb")
    sync: str = Field(default="bsp", description="bsp | backup:B | asp | ssp:S | local:H | hier:G | hier:G:H")
    algorithm: str = Field(default="auto", description="collective algorithm for DP: auto|ring|tree|rhd|hierarchical")
    overlap: bool = True
    compression: str = Field(default="none", description="none | fp16 | int8 | topk:FRACTION")
    dp_comm: str = Field(default="allreduce", description="allreduce | ps:K[:colocated|:dedicated]")
    flash_attention: bool = Field(
        default=True, description="fused attention (Dao et al. 2022): no s x s scores in memory or HBM traffic")
    bucket_size: Bytes | None = Field(default=None, description=(
        "gradient bucket per DP collective; default per framework: PyTorch DDP 25 MB (ZeRO 0), DeepSpeed "
        "reduce_bucket_size 5e8 elements (ZeRO 1-3), one layer (FSDP)"))
    shard_group: int | None = Field(default=None, gt=0, description=(
        "zero: hsdp: data-parallel replicas per sharding group (PyTorch HYBRID_SHARD); default: the "
        "replicas in one node"))
    first_stage_layers: int | None = Field(default=None, ge=0, description=(
        "layers on the first pipeline stage (Megatron-LM --decoder-first-pipeline-num-layers); the "
        "other stages share the rest evenly; default: the balanced split"))
    last_stage_layers: int | None = Field(default=None, ge=0, description=(
        "layers on the last pipeline stage (Megatron-LM --decoder-last-pipeline-num-layers)"))
    first_chunk_layers: int | None = Field(default=None, ge=0, description=(
        "interleaved:V only: decoder layers in the first of the pp x V model chunks (the one holding the "
        "embedding); the other chunks but the last share the rest evenly. Megatron-LM "
        "--account-for-embedding-in-pipeline-split gives (L + 1 [+ 1]) / (pp V) - 1; default: the balanced split"))
    last_chunk_layers: int | None = Field(default=None, ge=0, description=(
        "interleaved:V only: decoder layers in the last model chunk (the one holding the output layer and "
        "loss); Megatron-LM --account-for-loss-in-pipeline-split gives (L [+ 1] + 1) / (pp V) - 1"))
    recompute_layers: int | None = Field(default=None, ge=0, description=(
        "recompute: full only: layers of each pipeline chunk whose activations are recomputed (Megatron-LM "
        "--recompute-method block --recompute-num-layers N); the chunk's other layers keep their activations; "
        "default: every layer"))
    recompute_method: RecomputeMethodText = Field(default="block", description=(
        "with recompute_layers N: block recomputes the first N layers of each pipeline chunk; uniform recomputes "
        "every layer in checkpointed chunks of N layers (Megatron-LM --recompute-method)"))
    offload_layers: int = Field(default=0, ge=0, description=(
        "layers per pipeline stage whose activations are offloaded to host memory in the forward pass and "
        "loaded back for the backward (Megatron-Core cpu_offloading_num_layers); needs the cluster's host_bandwidth"))
    tp_comm_overlap: bool = Field(default=False, description=(
        "tensor-parallel all-gathers/reduce-scatters overlapped with the GEMMs that consume/produce them "
        "(Megatron-LM --tp-comm-overlap, Transformer Engine userbuffers); default: only the backward ones, under "
        "the weight-gradient GEMMs"))
    overlap_param_gather: bool = Field(default=False, description=(
        "zero 1/2 (distributed optimizer): the parameter all-gather runs under the next step's first forward pass "
        "(Megatron-LM --overlap-param-gather); default: the whole gradient sync shares the last backward"))
    assignment: AssignmentText = Field(
        default="static", description="micro-batches split equally up front, or pulled from a shared queue")
    dispatch_overhead: SecondsOrZero | None = Field(default=None, description=(
        "scheduling cost per dynamically assigned task; default 1.02 ms, one synchronous Ray task round trip "
        "(Ray release microbenchmark single_client_tasks_sync, 980.7 tasks/s)"))
    layout: LayoutText = Field(default="tp-cp-dp-pp", description=(
        "rank order of the parallel dimensions, innermost first: tp-cp-dp-pp (Megatron-LM's default, torchtitan) "
        "or tp-cp-pp-dp (PP inside DP, Megatron-LM --use-tp-pp-dp-mapping); docs/model.md#layout"))

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        return parse_schedule(v).label

    @field_validator("sync")
    @classmethod
    def _sync(cls, v: str) -> str:
        return parse_sync(v, where="").label()

    @field_validator("compression")
    @classmethod
    def _compression(cls, v: str) -> str:
        return parse_compression(v).label

    @field_validator("dp_comm")
    @classmethod
    def _dp_comm(cls, v: str) -> str:
        return parse_dp_comm(v).label

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v: str) -> str:
        return Algorithm.normalize(v)

    @model_validator(mode="after")
    def _recompute_layers(self) -> StrategySpec:
        if self.recompute_layers is not None and Recompute.parse(self.recompute) != Recompute.FULL:
            raise ValueError(f"recompute_layers={self.recompute_layers} needs recompute: full (got "
                             f"{self.recompute!r}); leave it out for selective or none")
        return self

    @property
    def parsed_schedule(self) -> Schedule:
        return parse_schedule(self.schedule)

    @property
    def virtual_stages(self) -> int:
        return self.parsed_schedule.virtual_stages

    @property
    def schedule_kind(self) -> str:
        return self.parsed_schedule.kind.label
