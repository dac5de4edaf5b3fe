"""Units: parsing to SI, formatting back, and clear errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalemodel.errors import InputError
from scalemodel.units import UNITS, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("80 GiB", "bytes", 80 * 2**30),
        ("80 GB", "bytes", 80e9),
        ("1.5 KiB", "bytes", 1536.0),
        ("2 TiB", "bytes", 2 * 2**40),
        ("400 Gbit/s", "bandwidth", 400e9 / 8),
        ("400 Gbps", "bandwidth", 50e9),
        ("25Gbps", "bandwidth", 3.125e9),
        ("450 GB/s", "bandwidth", 450e9),
        ("1 GiB/s", "bandwidth", 2.0**30),
        ("1.6 Tbit/s", "bandwidth", 200e9),
        ("1.5 us", "time", 1.5e-6),
        ("1.5 µs", "time", 1.5e-6),
        ("3 ns", "time", 3e-9),
        ("2 ms", "time", 2e-3),
        ("2 min", "time", 120.0),
        ("1.5 h", "time", 5400.0),
        ("312 TFLOP/s", "flop_rate", 312e12),
        ("989.4 TFLOPS", "flop_rate", 989.4e12),
        ("1.2 PFLOP/s", "flop_rate", 1.2e15),
        ("700 W", "power", 700.0),
        ("10.2 kW", "power", 10200.0),
        ("3.5 USD", "money", 3.5),
        ("2.5 USD/h", "price_rate", 2.5 / 3600),
        ("175B", "count", 175e9),
        ("8.2 GFLOP", "flops", 8.2e9),
        (42, "bytes", 42.0),
        (1e-6, "time", 1e-6),
    ],
)
def test_parse(text: object, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("text", "kind"), [("80 GiBs", "bytes"), ("80 GB", "time"), ("fast", "bandwidth"),
                                            ("1 parsec", "time"), ("inf", "bytes"), ("3 USD/s", "bytes")])
def test_bad_units_name_value_and_accepted(text: str, kind: str) -> None:
    with pytest.raises(InputError) as info:
        parse_quantity(text, kind)
    msg = info.value.message()
    assert repr(text) in msg or text in msg
    if kind == "bytes" and "GiBs" in text:
        assert "GiB" in info.value.allowed


def test_bool_and_none_rejected() -> None:
    with pytest.raises(InputError):
        parse_quantity(True, "bytes")
    with pytest.raises(InputError):
        parse_quantity(None, "time")


@given(st.floats(min_value=1e-12, max_value=1e18, allow_nan=False), st.sampled_from(sorted(UNITS)))
def test_round_trip_exact_with_full_precision(x: float, kind: str) -> None:
    assert parse_quantity(format_quantity(x, kind, digits=17), kind) == pytest.approx(x, rel=1e-15)


@given(st.floats(min_value=1e-9, max_value=1e15, allow_nan=False), st.sampled_from(["bytes", "time", "bandwidth"]))
def test_round_trip_display_precision(x: float, kind: str) -> None:
    back = parse_quantity(format_quantity(x, kind), kind)
    assert math.isclose(back, x, rel_tol=1e-3)


def test_format_picks_readable_unit() -> None:
    assert format_quantity(80e9, "bytes") == "80 GB"
    assert format_quantity(2**30, "bytes") == "1 GiB"  # exact powers of two read in binary units
    # whole multiples of a binary unit read in it too (DDP's bucket_cap_mb 25 is 25 MiB = 26,214,400 B, which
    # decimal units printed as "26.21 MB"); sizes decimal units print exactly stay decimal (1e12 B = 2**12 x 5**12)
    assert format_quantity(3 * 2**30, "bytes") == "3 GiB"
    assert format_quantity(25 * 1024 * 1024, "bytes") == "25 MiB"
    assert format_quantity(5 * 1024 * 1024, "bytes") == "5 MiB"
    assert format_quantity(1000 * 2**20, "bytes") == "1000 MiB"
    assert format_quantity(1e12, "bytes") == "1 TB"
    assert format_quantity(100e6, "bytes") == "100 MB"
    assert format_quantity(1536, "bytes") == "1.536 KB"  # 1.5 KiB: not a whole KiB count
    assert format_quantity(12345 * 2**20, "bytes") == "12.94 GB"  # 12.06 GiB: not whole either
    assert parse_quantity(format_quantity(25 * 2**20, "bytes", digits=17), "bytes") == 25 * 2**20
    assert format_quantity(1.5e-6, "time") == "1.5 us"
    assert format_quantity(312e12, "flop_rate") == "312 TFLOP/s"
