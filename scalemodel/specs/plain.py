"""NumPy (and pandas, Fraction, Decimal) values as the plain Python numbers and lists a spec field takes: the Python
API's arguments (scalemodel.api) and a spec built, copied or assigned in Python (specs.base) go through it."""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from typing import Any

import numpy as np

from scalemodel.errors import InputError
from scalemodel.specs.files import MAX_SPEC_BYTES


def scalar(value: Any) -> Any:
    """A NumPy scalar or 0-d array as the Python number it holds, a Fraction or Decimal as a float (review22g:
    gpus=Fraction(8) was refused as "not a whole number"); anything else as it is."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (np.timedelta64, np.datetime64)):  # .item() of np.timedelta64(8) is 8: ran as 8 GPUs
        return value
    if isinstance(value, np.floating):  # .item() of np.longdouble is itself: refused as "not a whole number"
        return float(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (numbers.Rational, Decimal)) and not isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # Fraction(10**400): beyond every range, refused as such
            return math.inf
    return value


def plain(value: Any, where: str = "") -> Any:
    """A dict / list of spec fields with NumPy scalars and arrays as the Python numbers and lists they hold: the
    specs took np.float64(1024.0) and refused np.int64(8) as "Input should be a valid integer (got np.int64(8))",
    np.True_ as "a valid boolean", and stage_layers=np.array([8, 8]) as "a valid list". An array of more values
    than a spec file can hold is refused before its list is made: eager_rope=np.ones(10**8, dtype=bool) took 27 s
    and gigabytes to be refused as "not a valid boolean"."""
    if isinstance(value, dict):
        return {k: plain(v, f"{where}.{k}".lstrip(".")) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, where) for v in value]
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        # as an argument's (review23e): .item() / .tolist() turned np.timedelta64(64) into 64 (global_batch ran as 64
        # sequences) and kept np.longdouble(2), refused as "not a valid integer" where np.float64(2.0) runs
        return scalar(value)
    if isinstance(value, np.ndarray) or (hasattr(value, "ndim") and hasattr(value, "tolist")):
        size = int(getattr(value, "size", 0) or 0)
        if size > MAX_SPEC_BYTES:
            raise InputError(f"an array of shape {np.shape(value)} ({size:,} values) is larger than any spec field",
                             where=where or "fields", allowed=f"at most {MAX_SPEC_BYTES:,} values (what a spec file "
                                                              "of at most 256 KiB holds)")
        if getattr(getattr(value, "dtype", None), "kind", None) in ("m", "M"):  # times: .tolist() gives their ints
            return [plain(v, where) for v in value]
        # a pandas Series / Index as its list ("got 0    8\ndtype: int64" was two lines); a longdouble array's list
        # holds np.longdouble, made float here
        return plain(value.tolist(), where)
    return value
