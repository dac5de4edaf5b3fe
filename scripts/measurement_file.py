"""What the measurement scripts (validate_attention.py, validate_collectives.py) share about a user's file: the
error a file the script cannot use raises, and how a run reports it (one ``error:`` line, exit status 2)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml

from scalemodel.errors import InputError

T = TypeVar("T")


class DataError(ValueError):
    """A point, case or source the script cannot use: reported as one ``error:`` line, exit 2."""


def read_or_report(path: Path, work: Callable[[], T]) -> T | None:
    """``work()`` (which reads ``path``), or None after printing the one error line an unreadable or unusable
    file deserves (the caller then exits 2)."""
    try:
        return work()
    except (OSError, yaml.YAMLError) as e:
        print(f"error: {path}: cannot read ({' '.join(str(e).split())}); a YAML measurement file", file=sys.stderr)
    except (DataError, InputError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    return None
