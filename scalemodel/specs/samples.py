"""Read measured step times (``stragglers --samples FILE``).

The file is one value per line (blank lines and ``#`` comments skipped, a trailing comma allowed) or
a YAML/JSON list. Values are seconds, or carry a time unit ("950ms"). It is read through
:mod:`scalemodel.specs.files`: a regular file of at most
:data:`~scalemodel.specs.files.MAX_SAMPLES_BYTES`; a list is parsed by
:mod:`scalemodel.specs.yamlread` with at most :data:`MAX_LIST_ITEMS` items (one value per line has
no item limit beyond the size). Errors name the file and the line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from scalemodel.errors import InputError
from scalemodel.specs import files, yamlread
from scalemodel.specs.quantities import outside_range, range_text
from scalemodel.units import parse_quantity

MAX_LIST_ITEMS = 100_000  # as a YAML list (a JSON list of numbers has no item limit beyond the size)


def _items_of_list(text: str, path: str) -> list[tuple[str, Any]]:
    """(location, value) for each element of a YAML/JSON list."""
    if text.lstrip().startswith("["):
        try:  # the fast path for a JSON list: C parser, no item limit beyond the size
            doc = json.loads(text, parse_int=float, parse_constant=lambda c: c)
        except (json.JSONDecodeError, RecursionError):
            doc = None
        if isinstance(doc, list) and all(isinstance(v, float) for v in doc):
            return [(f"{path}: item {i + 1}", v) for i, v in enumerate(doc)]
        # anything else is read again as YAML below, whose errors carry line numbers
    try:
        node = yamlread.compose(text, path, max_nodes=MAX_LIST_ITEMS + 1)
    except yamlread.MalformedYAML as exc:
        raise InputError("not a valid YAML/JSON list", where=exc.where,
                         allowed="a list of step times, e.g. [1.02, 0.98] or one value per line") from None
    if not isinstance(node, yaml.SequenceNode):
        raise InputError("expected a list of step times", where=path, allowed="a YAML/JSON list")
    values = yamlread.construct(node, path)
    return [(f"{path}: line {item.start_mark.line + 1}", v) for item, v in zip(node.value, values, strict=True)]


def read_samples(path: str | Path) -> list[float]:
    """Measured step times in seconds from a file (see the module docstring)."""
    name = str(path)
    text = files.read_text(path, limit=files.MAX_SAMPLES_BYTES, what="samples file")
    stripped = text.lstrip()
    items: list[tuple[str, Any]] = []
    # a YAML block list: "- " (a dash and a blank); "-0" or "-1" on the first line is a value, refused below as
    # not positive (it was read as a list and refused as "expected a list of step times")
    if stripped.startswith("[") or stripped[:2] in ("-", "- ", "-\t", "-\n", "-\r"):
        items = _items_of_list(text, name)
    else:
        for i, raw in enumerate(text.splitlines(), start=1):
            s = raw.split("#", 1)[0].strip().rstrip(",")
            if s:
                items.append((f"{name}: line {i}", s))
    values = []
    for where, v in items:
        if isinstance(v, (bool, list, dict)) or v is None:
            raise InputError(f"{str(v)[:40]!r} is not a step time", where=where,
                             allowed="a number of seconds or e.g. 950ms")
        x = parse_quantity(v, "time", where=where)
        if not (math.isfinite(x) and x > 0):
            raise InputError(f"step time {str(v)[:40]!r} must be a positive finite time", where=where,
                             allowed="a number of seconds > 0 or e.g. 950ms")
        why = outside_range(x, "time")  # 1e308 s made the mean infinite ("error: stragglers: mean: ...")
        if why is not None:
            raise InputError(f"step time {why}", where=where, allowed=f"a step time within {range_text('time')}")
        values.append(x)
    if not values:
        raise InputError("no step times found", where=name, allowed="at least one measured step time")
    return values
