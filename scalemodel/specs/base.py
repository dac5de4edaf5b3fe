"""Common base for every spec model: unknown keys are errors, values are validated on assignment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


class Sourced(Spec):
    """A spec whose values carry their provenance: field name (or dotted path) -> citation."""

    sources: dict[str, str] = Field(default_factory=dict, description="field -> citation for its value")
