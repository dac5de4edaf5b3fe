"""Pydantic field types that accept a number (SI base unit) or a string with a unit.

Each kind of quantity has a physical range (:data:`RANGES`, SI base units) far wider than any real
hardware or workload but narrow enough to catch a wrong unit or a typo: ``memory: 5e-324 GB`` or a
latency of 1e-30 s is an error naming the range, not a subnormal number that turns into inf later.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from scalemodel.units import accepted_units, parse_quantity

#: kind -> (smallest, largest) non-zero value in SI base units
RANGES: dict[str, tuple[float, float]] = {
    "bytes": (1.0, 1e21),            # one byte .. a zettabyte
    "bandwidth": (1.0, 1e16),        # 1 B/s .. 10 PB/s per GPU
    "time": (1e-12, 1e12),           # a picosecond .. 30,000 years
    "flop_rate": (1.0, 1e21),        # per accelerator: far beyond any chip
    "flops": (1.0, 1e40),
    "power": (1e-3, 1e10),           # a milliwatt .. 10 GW
    "price_rate": (1e-12, 1e6 / 3600),  # USD/s: up to a million USD per GPU-hour
    "count": (1.0, 1e30),
}


_SI_UNIT = {"bytes": "B", "bandwidth": "B/s", "time": "s", "flop_rate": "FLOP/s", "flops": "FLOP", "power": "W",
            "price_rate": "USD/s", "count": ""}


def _in_range(kind: str) -> Any:
    lo, hi = RANGES[kind]
    unit = _SI_UNIT[kind]

    def check(v: float) -> float:
        if v != 0 and not lo <= v <= hi:
            raise ValueError(f"{v:.4g} {unit} is outside the physical range {lo:g} .. {hi:g} {unit}".replace(" ,", ","))
        return v

    return check


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
        AfterValidator(_in_range(kind)),
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
