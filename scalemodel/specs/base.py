"""Common base for every spec model: unknown keys are errors, values are validated on assignment."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


class Sourced(Spec):
    """A spec whose values carry their provenance: field name (or dotted path) -> citation."""

    sources: dict[str, str] = Field(default_factory=dict, description="field -> citation for its value")


def builtin_ref(kind: str) -> Any:
    """A before-validator: a string names a built-in spec (or a file) of ``kind``, loaded as raw fields."""

    def resolve(v: Any) -> Any:
        if isinstance(v, str):
            from scalemodel.specs.loader import load_raw

            return load_raw(kind, v)
        return v

    return resolve
