"""A scenario: cluster + workload + training + strategy (+ the assertions `scalemodel check` verifies)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator

from scalemodel.specs.base import MAX_GPUS, Spec, builtin_ref
from scalemodel.specs.cluster import ClusterSpec
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import Workload


class Assertions(Spec):
    """Capacity-plan guards checked by ``scalemodel check``. Each is optional.

    Time limits accept units ("2s", "30 days"), cost "5e6" or "$5e6"; a bare number is seconds / USD.
    """

    min_scaling_efficiency: float | None = Field(
        default=None, gt=0, le=1.5,
        description="per-GPU throughput at `at` GPUs relative to the first count in gpus")
    at: int | None = Field(default=None, gt=0, description="GPU count min_scaling_efficiency refers to "
                                                           "(default: the largest)")
    max_step_time: Annotated[float | None, WithJsonSchema(
        {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}, {"type": "null"}],
         "description": "seconds, or a time with a unit (2s, 500 ms)"})] = Field(default=None, gt=0)
    min_mfu: float | None = Field(default=None, gt=0, le=1)
    min_tokens_per_s: float | None = Field(default=None, gt=0)
    must_fit_memory: bool | None = None
    max_cost_usd: Annotated[float | None, WithJsonSchema(
        {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}, {"type": "null"}],
         "description": "USD (needs training.train_tokens and cluster.price_per_gpu_hour)"})] = Field(
        default=None, gt=0)
    max_time_to_train: Annotated[float | None, WithJsonSchema(
        {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}, {"type": "null"}],
         "description": "seconds, or a time with a unit (30 days); needs training.train_tokens"})] = Field(
        default=None, gt=0)

    @field_validator("max_step_time", "max_time_to_train", mode="before")
    @classmethod
    def _time(cls, v: Any) -> Any:
        from scalemodel.units import parse_quantity

        return None if v is None else parse_quantity(v, "time")

    @field_validator("max_cost_usd", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Any:
        from scalemodel.units import parse_quantity

        return None if v is None else parse_quantity(v, "money")


class ScenarioSpec(Spec):
    kind: Literal["scenario"] = "scenario"
    name: str = "scenario"
    description: str = ""
    cluster: ClusterSpec
    model: Workload
    gpus: list[int] = Field(min_length=1, description="GPU count, or a list of counts for a sweep")
    mode: Literal["weak", "strong"] = "weak"
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    strategy: StrategySpec = Field(default_factory=StrategySpec)
    best: bool = Field(default=False, description="search the best strategy at each point (planner)")
    assertions: Assertions | None = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return [v]
        if isinstance(v, str):
            parts = [x for x in v.replace(" ", "").split(",") if x]
            if not all(x.isascii() and x.isdigit() and len(x) <= 9 for x in parts):
                raise ValueError(f"cannot read GPU counts {v[:60]!r}; comma-separated integers, e.g. 128,256")
            return [int(x) for x in parts]
        return v

    @field_validator("gpus")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(not 0 < g <= MAX_GPUS for g in v):
            raise ValueError(f"GPU counts must be positive integers up to {MAX_GPUS:.0e}")
        return v

    _cluster = field_validator("cluster", mode="before")(builtin_ref("cluster"))
    _model = field_validator("model", mode="before")(builtin_ref("workload"))
