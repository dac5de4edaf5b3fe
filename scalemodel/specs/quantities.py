"""Pydantic field types that accept a number (SI base unit) or a string with a unit."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from scalemodel.units import accepted_units, parse_quantity


def _quantity(kind: str, description: str, **constraints: Any) -> Any:
    schema = {
        "anyOf": [
            {"type": "number"},
            {"type": "string", "description": f"a number with one of: {accepted_units(kind)}"},
        ],
        "description": f"{description} (bare number = SI base unit)",
    }
    return Annotated[
        float,
        BeforeValidator(lambda v: parse_quantity(v, kind)),
        Field(**constraints),
        WithJsonSchema(schema),
    ]


Bytes = _quantity("bytes", "bytes", gt=0)
Bandwidth = _quantity("bandwidth", "bytes/s", gt=0)
Seconds = _quantity("time", "seconds", gt=0)
SecondsOrZero = _quantity("time", "seconds", ge=0)
FlopRate = _quantity("flop_rate", "FLOP/s", gt=0)
Flops = _quantity("flops", "FLOP", gt=0)
Watts = _quantity("power", "watts", gt=0)
PricePerHour = _quantity("price_rate", "USD per GPU-hour (stored as USD/s)", ge=0)
Count = _quantity("count", "a count, e.g. 175B, 300e9", gt=0)
Fraction = Annotated[float, Field(gt=0, le=1)]
