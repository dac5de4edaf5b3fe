"""The repository's own YAML data files (hardware/measurements/*.yaml, validation/*.yaml) as the scripts read them:
what ``yaml.safe_load`` gives, parsed by libyaml's parser where PyYAML has it (``CSafeLoader``: the same safe
constructor and resolver, the same documents; checked equal, values, types and key order, on every file under
hardware/measurements and validation) and once per process. The pure-Python parser costs 1-10 s of CPU per parse of
the big files (gemm.yaml, attention.yaml, training_cases.yaml), and the fit scripts parsed some of them again on each
call (fit_kernel_gap.py's kernel series, fit_in_layer_factor.py's nccl.yaml), which dominated the test suite's slowest
tests. A user's file (a command-line argument) keeps ``yaml.safe_load`` and its error messages."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed(path: str, mtime_ns: int) -> Any:
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 - a safe loader


def read_yaml(path: Path | str) -> Any:
    """``yaml.safe_load`` of ``path`` (parsed again only when the file changes); a deep copy, so a caller may change
    what it gets."""
    p = Path(path).resolve()
    return copy.deepcopy(_parsed(str(p), p.stat().st_mtime_ns))
