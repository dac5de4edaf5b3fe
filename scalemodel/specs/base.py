"""Common base for every spec model: unknown keys are errors, values are validated on assignment.

Numbers are checked alike in every spec: a boolean is not a number (pydantic would read ``true``
as 1), NaN and infinities are refused, and no integer field exceeds :data:`MAX_SPEC_INT` (no count
of layers, widths, heads, vocabulary, sequence length, batch or GPUs in a spec comes near a
billion; beyond it the value is a typo, and products of such values overflow int64 in the cost
models). GPU counts have the tighter :data:`MAX_GPUS`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

MAX_SPEC_INT = 10**9
#: The most GPUs any spec or command accepts (the CLI's limit as well): beyond any machine.
MAX_GPUS = 10**8


def _takes_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_takes_bool(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _takes_bool(typing.get_args(annotation)[0])
    return False


def _numeric(annotation: Any) -> bool:
    """Whether a field holds numbers (int or float, possibly optional, in a list or as dict values)."""
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _numeric(args[0])
    if origin in (typing.Union, types.UnionType, list, tuple, dict):
        return any(_numeric(a) for a in args)
    return False


def _walk(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _walk(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _walk(x)
    else:
        yield v


class Spec(BaseModel):
    # defer_build: a model's validator is built when it first validates, not at import, so a query pays only
    # for the specs it reads (collective reads a cluster, never a workload or a scenario)
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True, allow_inf_nan=False,
                              defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _numeric(field.annotation) and not _takes_bool(field.annotation):
            if any(isinstance(x, bool) for x in _walk(v)):
                raise ValueError(f"{v!r} is a boolean, not a number")
        return v

    @field_validator("*", mode="after")
    @classmethod
    def _bounded_ints(cls, v: Any) -> Any:
        for x in _walk(v):
            if isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_SPEC_INT:
                raise ValueError(f"{x} is beyond the largest integer a spec accepts ({MAX_SPEC_INT:.0e})")
        return v


class Sourced(Spec):
    """A spec whose values carry their provenance: field name (or dotted path) -> citation."""

    sources: dict[str, str] = Field(default_factory=dict, description="field -> citation for its value")


#: Loads a named spec (a built-in name or a file) as raw fields: ``(kind, ref) -> dict``. The loader
#: registers itself here when it is imported (scalemodel.specs imports it), so the spec classes below it
#: need not import the loader above them.
_reference_loader: Callable[[str, str], Any] | None = None


def set_reference_loader(load: Callable[[str, str], Any]) -> None:
    """Register the function that loads a spec named inside another spec (see :func:`builtin_ref`)."""
    global _reference_loader
    _reference_loader = load


def builtin_ref(kind: str) -> Any:
    """A before-validator: a string names a built-in spec (or a file) of ``kind``, loaded as raw fields."""

    def resolve(v: Any) -> Any:
        if isinstance(v, str) and _reference_loader is not None:
            return _reference_loader(kind, v)
        return v

    return resolve


__all__ = ["MAX_GPUS", "MAX_SPEC_INT", "Sourced", "Spec", "builtin_ref"]
