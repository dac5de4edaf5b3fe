"""Training settings and parallelism/synchronisation strategy specs."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from scalemodel.specs.base import Spec
from scalemodel.specs.quantities import Bytes, Count, SecondsOrZero

TrainPrecision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]


class TrainingSpec(Spec):
    global_batch: int | None = Field(default=None, gt=0, description="sequences (or samples) per step")
    micro_batch: int = Field(default=1, gt=0)
    seq_len: int | None = Field(default=None, gt=0, description="default: the workload's seq_len")
    precision: TrainPrecision = "bf16"
    optimizer_bytes_per_param: float = Field(
        default=12.0, ge=0,
        description="optimizer-state bytes per parameter: 12 = fp32 master + Adam m, v (ZeRO paper's K=12)")
    grad_bytes_per_param: float | None = Field(
        default=None, gt=0, description="gradient element size; default from precision (2 for 16-bit)")
    train_tokens: Count | None = None
    train_samples: Count | None = None
    critical_batch: Count | None = Field(default=None, description="gradient noise scale B_noise, in samples")
    work_cv: float = Field(default=0.0, ge=0.0, lt=10.0, description=(
        "coefficient of variation of one micro-batch's compute time (variable sequence lengths, "
        "data-dependent work); drives the load-imbalance term"))


_SCHEDULE = re.compile(r"^(1f1b|gpipe|zb|interleaved)(?::([0-9]{1,9}))?$")  # counts: ASCII, at most 9 digits
_SYNC = re.compile(r"^(bsp|asp|backup:[0-9]{1,9}|ssp:[0-9]{1,9}|local:[0-9]{1,9}|hier:[0-9]{1,9}(?::[0-9]{1,9})?)$")
_COMPRESSION = re.compile(r"^(none|fp16|bf16|int8|topk:(?:0?\.\d+|1(?:\.0+)?|\d+(?:\.\d+)?e-\d+))$")
_DP_COMM = re.compile(r"^(allreduce|ps:[1-9][0-9]{0,8}(?::colocated|:dedicated)?)$")


class StrategySpec(Spec):
    dp: int | None = Field(default=None, gt=0, description="data-parallel degree; default N / (tp pp cp)")
    tp: int = Field(default=1, gt=0)
    pp: int = Field(default=1, gt=0)
    cp: int = Field(default=1, gt=0)
    ep: int = Field(default=1, gt=0)
    zero: Literal["0", "1", "2", "3", "fsdp"] = "0"
    recompute: Literal["none", "selective", "full"] = "none"
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
    assignment: Literal["static", "dynamic"] = Field(
        default="static", description="micro-batches split equally up front, or pulled from a shared queue")
    dispatch_overhead: SecondsOrZero = Field(default=0.0, description="scheduling cost per dynamically assigned task")

    @field_validator("zero", mode="before")
    @classmethod
    def _zero(cls, v: object) -> object:
        return str(v).lower() if isinstance(v, (int, str)) and not isinstance(v, bool) else v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        m = _SCHEDULE.match(v)
        if m and m.group(1) == "interleaved" and int(m.group(2) or 0) < 2:
            raise ValueError(f"schedule {v!r} needs V >= 2 virtual stages, e.g. interleaved:2")
        if not m:
            raise ValueError(f"unknown schedule {v!r}; use 1f1b, interleaved:V (V >= 2), gpipe or zb")
        return v

    @field_validator("sync")
    @classmethod
    def _sync(cls, v: str) -> str:
        if not _SYNC.match(v):
            raise ValueError(f"unknown sync mode {v!r}; use bsp, backup:B, asp, ssp:S, local:H, hier:G or hier:G:H")
        return v

    @field_validator("compression")
    @classmethod
    def _compression(cls, v: str) -> str:
        if not _COMPRESSION.match(v) or (v.startswith("topk:") and float(v[5:]) <= 0):
            raise ValueError(f"unknown compression {v!r}; use none, fp16, int8 or topk:FRACTION (e.g. topk:0.01)")
        return v

    @field_validator("dp_comm")
    @classmethod
    def _dp_comm(cls, v: str) -> str:
        if not _DP_COMM.match(v):
            raise ValueError(f"unknown DP communication {v!r}; use allreduce or ps:K (K servers)")
        return v

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v: str) -> str:
        allowed = ("auto", "ring", "tree", "rhd", "rd", "direct", "hierarchical")
        if v not in allowed:
            raise ValueError(f"unknown collective algorithm {v!r}; use one of {', '.join(allowed)}")
        return v

    @property
    def virtual_stages(self) -> int:
        m = _SCHEDULE.match(self.schedule)
        return int(m.group(2)) if m and m.group(2) else 1

    @property
    def schedule_kind(self) -> str:
        m = _SCHEDULE.match(self.schedule)
        return m.group(1) if m else self.schedule
