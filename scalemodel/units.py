"""Parse quantities with units into SI floats, and format SI floats back into readable text.

Inside scalemodel every number is in SI base units: bytes, seconds, FLOP, FLOP/s, bytes/s,
watts, US dollars. Decimal prefixes are powers of 1000 (``GB`` = 1e9) and binary prefixes powers
of 1024 (``GiB`` = 2**30); ``Gbit/s`` and ``Gbps`` are 1e9 bit/s = 1.25e8 B/s. A bare number
means the SI base unit of the quantity. Sizes and byte rates take every prefix from kilo to exa in
both forms: ``kB``/``KB`` .. ``EB`` (10**3 .. 10**18) and ``KiB`` .. ``EiB`` (2**10 .. 2**60), each
also per second; bit rates take ``k``/``K`` .. ``E`` with ``bit/s``, ``b/s`` or ``bps``.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from scalemodel.errors import InputError

Kind = Literal["bytes", "bandwidth", "time", "flops", "flop_rate", "power", "money", "price_rate", "count"]

_DEC = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def _table() -> dict[str, dict[str, float]]:
    bytes_u: dict[str, float] = {"B": 1.0, "bytes": 1.0, "byte": 1.0}
    bw: dict[str, float] = {"B/s": 1.0}
    for p, f in _DEC.items():
        if p in ("", "k"):
            continue
        bytes_u[f"{p}B"] = f
        bw[f"{p}B/s"] = f
        bw[f"{p}bit/s"] = f / 8
        bw[f"{p}b/s"] = f / 8
        bw[f"{p}bps"] = f / 8
    bytes_u["kB"] = 1e3  # the SI spelling; "KB" is the JEDEC one (both 1000 here, as every decimal prefix)
    bw["kB/s"] = 1e3
    bw["kbit/s"] = bw["kb/s"] = bw["kbps"] = 1e3 / 8
    bw["bit/s"] = 1 / 8
    bw["bps"] = 1 / 8
    for p, f in _BIN.items():
        bytes_u[f"{p}B"] = f
        bw[f"{p}B/s"] = f
    time_u = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
              "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0}
    flops: dict[str, float] = {}
    flop_rate: dict[str, float] = {}
    for p, f in _DEC.items():
        if p == "k":
            continue
        flops[f"{p}FLOP"] = f
        flops[f"{p}FLOPs"] = f
        flop_rate[f"{p}FLOP/s"] = f
        flop_rate[f"{p}FLOPS"] = f
    power = {"W": 1.0, "kW": 1e3, "MW": 1e6}
    money = {"USD": 1.0, "$": 1.0}
    price = {"USD/h": 1 / 3600, "$/h": 1 / 3600, "USD/hour": 1 / 3600, "USD/s": 1.0}
    count = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
    return {"bytes": bytes_u, "bandwidth": bw, "time": time_u, "flops": flops, "flop_rate": flop_rate,
            "power": power, "money": money, "price_rate": price, "count": count}


UNITS: dict[str, dict[str, float]] = _table()

# The unit each kind is formatted in when no prefix applies, and the prefixes used for display.
_BASE = {"bytes": "B", "bandwidth": "B/s", "flops": "FLOP", "flop_rate": "FLOP/s", "power": "W",
         "money": "USD", "price_rate": "USD/h", "count": "", "time": "s"}
# [0-9], not \d: float() would read the digits of other scripts ("\u0668\u0660 GB" as 80 GB). Matched against the
# stripped text after an optional "$": the blanks around them are not in the pattern, where "\s*\$?\s*" and
# "(.*?)\s*$" made a long run of blanks quadratic (a 60 KB --size did not finish).
_NUMBER = re.compile(r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(.*)", re.S)


def accepted_units(kind: str) -> str:
    names = [u for u in UNITS[kind] if u]
    return ", ".join(names)


def _shown(value: object) -> str:
    """``repr(value)``, cut to 60 characters: a 500,000-digit sample echoed whole left its error without the
    rule (InputError cuts what it prints at 300 characters)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_quantity(value: object, kind: str, *, where: str = "") -> float:
    """Return ``value`` in SI base units. Numbers pass through; strings carry a unit of ``kind``.

    Raises :class:`InputError` naming the value and the accepted units when the unit is wrong,
    missing where a number alone would be ambiguous, or the value is not finite.
    """
    if kind not in UNITS:
        raise KeyError(kind)
    if isinstance(value, bool):
        raise InputError(f"expected a {kind} quantity, got {_shown(value)}", where=where,
                         allowed=f"a number or a string with one of: {accepted_units(kind)}")
    if isinstance(value, (int, float)):
        number = float(value)
        unit = ""
        factor = 1.0
    elif isinstance(value, str):
        text = value.strip()
        m = _NUMBER.fullmatch(text[1:].lstrip() if text.startswith("$") else text)
        if not m:
            raise InputError(f"cannot read {_shown(value)} as a {kind} quantity", where=where,
                             allowed=f"a number followed by one of: {accepted_units(kind)}")
        number = float(m.group(1))
        unit = m.group(2).strip()
        if value.strip().startswith("$") and kind in ("money", "price_rate"):
            unit = unit or "$"
            if kind == "price_rate" and unit in ("/h", "/hour"):
                unit = "$/h"
        table = UNITS[kind]
        if unit not in table:
            if unit == "" and kind != "count":
                # A bare number inside a string means the SI base unit, as a bare number does.
                factor = 1.0
            else:
                raise InputError(f"unknown unit {_shown(unit)} in {_shown(value)} for a {kind} quantity", where=where,
                                 allowed=f"one of: {accepted_units(kind)}")
        else:
            factor = table[unit]
    else:
        raise InputError(f"expected a {kind} quantity, got {type(value).__name__} {_shown(value)}", where=where,
                         allowed=f"a number or a string with one of: {accepted_units(kind)}")
    inverse = round(1.0 / factor) if factor < 1.0 else 0
    # Dividing by an exact integer keeps "5 us" == 5e-6 bit for bit (5 * 1e-6 is not).
    result = number / inverse if inverse and abs(1.0 / factor - inverse) < 1e-9 * inverse else number * factor
    if not math.isfinite(result):
        # '1e300GB/s' is a finite number whose unit carries it past the float range: not "not a finite number"
        what = "is not a finite number" if not math.isfinite(number) else "is too large (beyond the float range)"
        raise InputError(f"{_shown(value)} {what}", where=where, allowed="a finite quantity")
    if result == 0 and (number != 0 or (isinstance(value, str) and re.search(r"[1-9]", re.split("[eE]", text)[0]))):
        # fuzz34: '1e-400 s' (or 1e-320 ns) underflowed to 0 and was refused as "should be greater than 0"
        raise InputError(f"{_shown(value)} is too small (below the float range, it rounds to 0)", where=where,
                         allowed=f"0, or a {kind} quantity of at least 5e-324 {_BASE[kind]}".rstrip())
    return result + 0.0  # -0 is 0: `collective --size -0` echoed a size of -0.0 B and an algbw of -0.0 B/s


_DISPLAY = {
    # decimal, as vendors quote memory ("80 GB" HBM) and as nccl-tests reports sizes' bandwidths
    "bytes": [("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)],
    "bandwidth": [("PB/s", 1e15), ("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3), ("B/s", 1.0)],
    "time": [("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)],
    "flops": [("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("FLOP", 1.0)],
    "flop_rate": [("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6), ("FLOP/s", 1.0)],
    "power": [("MW", 1e6), ("kW", 1e3), ("W", 1.0)],
    # binary prefixes, for buffer sizes that are powers of two (nccl-tests sweeps)
    "bytes_binary": [("EiB", 2.0**60), ("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20),
                     ("KiB", 2.0**10), ("B", 1.0)],
    "money": [("USD", 1.0)],
    "price_rate": [("USD/h", 1 / 3600)],
    "count": [("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3), ("", 1.0)],
}


def _mantissa(value: float, units: list[tuple[str, float]]) -> float:
    """``value`` in the largest of ``units`` not above it (the number format_quantity prints)."""
    return value / next((f for _, f in units if abs(value) >= f), units[-1][1])


def _binary_reads_exact(value: float, digits: int) -> bool:
    """Whether a byte count is a power of two from 1 KiB or a whole multiple of a binary unit (5 MiB, 3 x 2**30)
    that decimal units print only rounded: DDP's bucket_cap_mb 25 is 25 MiB (26,214,400 B), not "26.21 MB".
    A size decimal units print exactly (1 TB = 1e12 B, a multiple of 2**12 too) stays decimal."""
    if not (abs(value) >= 1024 and value % 1024 == 0):
        return False
    binary, decimal = _mantissa(value, _DISPLAY["bytes_binary"]), _mantissa(value, _DISPLAY["bytes"])
    if math.log2(abs(value)).is_integer():
        return True  # a power of two: 1 KiB, not 1.024 KB
    return binary.is_integer() and abs(binary) < 10**digits and decimal != float(f"{decimal:.{digits}g}")


def format_quantity(value: float, kind: str, digits: int = 4, *, binary: bool = True) -> str:
    """Format an SI value with the largest display unit not above it, to ``digits`` significant digits.

    ``binary=False`` keeps a byte count in decimal units even where a binary one reads exact: where it is compared
    with decimal figures beside it ('178.8 GB of 288 GiB per GPU' on a GB300; GB300's 288 GiB above B300's 288.4 GB
    in `hardware list`'s column, when it is the larger).

    ``parse_quantity(format_quantity(x, k, digits=17), k) == x`` for finite x; with the default
    precision the round trip is within a relative 10**-(digits-1).
    """
    if not math.isfinite(value):
        raise InputError(f"a result ({kind}) is not finite", where="result",
                         allowed="inputs within physical ranges (sizes, bandwidths, latencies, times)")
    if kind == "bytes" and binary and _binary_reads_exact(value, digits):
        kind = "bytes_binary"  # 1 GiB reads better than 1.074 GB, a 25 MiB bucket better than 26.21 MB
    units = _DISPLAY[kind]
    mag = abs(value)
    # zero in the unit of factor 1 ('0 s', not '0 ns': stragglers' "comm 0 ns per sync" for its default 0s)
    name, factor = next(((n, f) for n, f in units if f == 1.0), units[-1]) if mag == 0 else units[-1]
    for n, f in units:
        if mag >= f and mag > 0:
            name, factor = n, f
            break
    number = value / factor if mag > 0 else 0.0  # -0.0 (a difference of equal parts) printed '-0 s'
    text = f"{number:.{digits}g}"
    sep = " " if name else ""
    return f"{text}{sep}{name}"


def format_signed(x: float, places: int, suffix: str = "") -> str:
    """``x`` with its sign to ``places`` decimals; a nonzero ``x`` that would round to zero there to two significant
    figures (a latency's -4.1e-05, not -0.000, which hides its size; a gain of +0.21%, not +0%), and exactly 0 as
    '0'. Sensitivity's table and its conclusion line."""
    if x == 0:
        return f"0{suffix}"
    if round(abs(x), places) == 0:
        return f"{x:+.2g}{suffix}"
    return f"{x:+.{places}f}{suffix}"
