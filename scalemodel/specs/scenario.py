"""A scenario: cluster + workload + training + strategy (+ the assertions `scalemodel check` verifies)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from scalemodel.specs.base import Spec
from scalemodel.specs.cluster import ClusterSpec
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import Workload


class Assertions(Spec):
    """Capacity-plan guards checked by ``scalemodel check``. Each is optional."""

    min_scaling_efficiency: float | None = Field(default=None, gt=0, le=1.5)
    at: int | None = Field(default=None, gt=0, description="GPU count min_scaling_efficiency refers to")
    max_step_time: float | None = Field(default=None, gt=0, description="seconds")
    min_mfu: float | None = Field(default=None, gt=0, le=1)
    min_tokens_per_s: float | None = Field(default=None, gt=0)
    must_fit_memory: bool | None = None
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_time_to_train: float | None = Field(default=None, gt=0, description="seconds")

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
            return [int(x) for x in v.replace(" ", "").split(",") if x]
        return v

    @field_validator("gpus")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(g <= 0 for g in v):
            raise ValueError("GPU counts must be positive")
        return v

    @field_validator("cluster", mode="before")
    @classmethod
    def _cluster(cls, v: Any) -> Any:
        if isinstance(v, str):
            from scalemodel.specs.loader import load_raw

            return load_raw("cluster", v)
        return v

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: Any) -> Any:
        if isinstance(v, str):
            from scalemodel.specs.loader import load_raw

            return load_raw("workload", v)
        return v
