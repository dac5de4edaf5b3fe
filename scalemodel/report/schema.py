"""Render `scalemodel schema`: the JSON Schema as it is (no envelope: editors read it directly)."""

from __future__ import annotations

import json
import sys
from typing import Any


def render_schema(schema: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
