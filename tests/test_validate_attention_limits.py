"""scripts/validate_attention.py reads attention.yaml bounded: its byte bound leaves the room its node bound does."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, script_module

from scalemodel.errors import InputError

ATTENTION = ROOT / "hardware" / "measurements" / "attention.yaml"


def test_measurement_file_byte_bound_leaves_the_room_its_node_bound_does(tmp_path: Path) -> None:
    """amdattn19 raised validate_attention's node bound to 4x the spec readers' for attention.yaml's AITER points
    ('room for the file to grow') but kept their 256 KiB byte bound, which the 209 KB file meets after about 300 more
    points, long before 4x the nodes: a copy of attention.yaml padded past 256 KiB with comments (no nodes added)
    reads as the file itself does, and a file past 4x the bytes is still refused."""
    va = script_module("validate_attention")
    text = ATTENTION.read_text(encoding="utf-8")
    padded = tmp_path / "attention.yaml"
    padded.write_text(text + "# padding\n" * (60 * 1024 // 10), encoding="utf-8")
    assert padded.stat().st_size > 256 * 1024
    assert va.load(padded) == va.load(ATTENTION)
    huge = tmp_path / "huge.yaml"
    huge.write_text(text + "#" * (4 * 256 * 1024), encoding="utf-8")
    with pytest.raises(InputError, match="larger than the 1 MiB limit"):
        va.load(huge)
