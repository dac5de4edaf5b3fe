"""Spec field types that accept a number (SI base unit) or a string with a unit.

Each kind of quantity has a physical range (:data:`RANGES`, SI base units) far wider than any real
hardware or workload but narrow enough to catch a wrong unit or a typo: ``memory: 5e-324 GB`` or a
latency of 1e-30 s is an error naming the range, not a subnormal number that turns into inf later.

A quantity is a ``float`` to the type checker and to msgspec; its :class:`~scalemodel.specs.base.Before`
hook reads the unit, then checks the bound (``gt``/``ge``) and the physical range, so the error names the
exact key (``peak_flops.bf16``) and the value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from msgspec import Meta

from scalemodel.specs.base import Before, SpecError
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


def outside_range(x: float, kind: str) -> str | None:
    """Why a non-zero value ``x`` (SI base units) lies outside the physical range of ``kind`` (:data:`RANGES`),
    or None when it lies inside or is zero."""
    lo, hi = RANGES[kind]
    if x == 0 or lo <= abs(x) <= hi:
        return None
    # a count has no unit: "1e-21  is outside the physical range 1 .. 1e+30 " had a blank where it stood (fuzz24)
    unit = f" {_SI_UNIT[kind]}" if _SI_UNIT[kind] else ""
    return f"{x:.4g}{unit} is outside the physical range {lo:g} .. {hi:g}{unit}"


def range_text(kind: str) -> str:
    """The physical range of ``kind`` in words, for an error's <what is allowed>."""
    lo, hi = RANGES[kind]
    unit = f" {_SI_UNIT[kind]}" if _SI_UNIT[kind] else ""
    return f"{lo:g}{unit} .. {hi:g}{unit}"


def _reader(kind: str, gt: float | None, ge: float | None) -> Before:
    def read(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError(f"{v!r} is a boolean, not a number")
        x = parse_quantity(v, kind)
        if gt is not None and not x > gt:
            raise SpecError(f"Input should be greater than {gt:g}", kind="type", value=v)
        if ge is not None and not x >= ge:
            raise SpecError(f"Input should be greater than or equal to {ge:g}", kind="type", value=v)
        why = outside_range(x, kind)
        if why is not None:
            raise ValueError(why)
        return x + 0.0  # -0.0 (which passes ge=0) becomes 0.0: no negative zero reaches a result or its JSON

    bound = f" > {gt:g}" if gt is not None else (f" >= {ge:g}" if ge is not None else "")
    noun, unit = ("a count", "a suffix") if kind == "count" else (f"a number of {_SI_UNIT[kind]}", "a unit")
    return Before(read, f"{noun}{bound}, bare or with {unit} ({accepted_units(kind)}), within {range_text(kind)}")


def _quantity(kind: str, description: str, *, gt: float | None = None, ge: float | None = None) -> Any:
    schema = {
        "anyOf": [
            {"type": "number"},
            {"type": "string", "description": f"a number with one of: {accepted_units(kind)}"},
        ],
        "description": f"{description} (bare number = SI base unit)",
    }
    extra = {"x-schema": schema}
    bound = Meta(gt=gt, extra_json_schema=extra) if gt is not None else Meta(ge=ge, extra_json_schema=extra)
    return Annotated[float, _reader(kind, gt, ge), bound]


if TYPE_CHECKING:
    Bytes = float
    Bandwidth = float
    Seconds = float
    SecondsOrZero = float
    FlopRate = float
    Flops = float
    Watts = float
    PricePerHour = float
    Count = float
else:
    Bytes = _quantity("bytes", "bytes", gt=0)
    Bandwidth = _quantity("bandwidth", "bytes/s", gt=0)
    Seconds = _quantity("time", "seconds", gt=0)
    SecondsOrZero = _quantity("time", "seconds", ge=0)
    FlopRate = _quantity("flop_rate", "FLOP/s", gt=0)
    Flops = _quantity("flops", "FLOP", gt=0)
    Watts = _quantity("power", "watts", gt=0)
    PricePerHour = _quantity("price_rate", "USD per GPU-hour (stored as USD/s)", ge=0)
    Count = _quantity("count", "a count, e.g. 175B, 300e9", gt=0)
#: An efficiency (a fraction of a peak or a line rate). At least one millionth: 1e-320 (a subnormal, > 0) made every
#: time it divides infinite, refused later by a cost function that named itself, not the field; no hardware runs
#: at a millionth of its peak, and every time stays finite (1e6 x the ideal at most per factor).
Fraction = Annotated[float, Meta(ge=1e-6, le=1)]
#: A curve's half-efficiency point (GEMM dimension, attention keys or head dim): at most 1e6, 1000x past any fitted
#: one (up to 609, hardware/accelerators); 1e308 made an efficiency of 1e-306 and a step of 1e302 s.
HalfPoint = Annotated[float, Meta(ge=0, le=1e6)]
