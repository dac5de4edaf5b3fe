"""ux25b: the user-facing fixes the ux25 expert-user pass left (plan's breakdown names, sensitivity's small
elasticities and CVs, why jitter is 0, embed_comm's description, the critical-batch unit): each test failed
before its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scalemodel.engine.parts import BREAKDOWN_KEYS

PLAN = ("plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "512", "--global-batch", "512", "-k", "2")


def test_plan_breakdown_names_the_parts_by_their_json_keys(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`plan`'s breakdown column read 'compute 87%, TP 5%, DP 3%' (short labels of its own) where `predict`,
    `scale` and --json say tp_comm and dp_comm; each of the three largest parts is now on its own line under its
    JSON key, whole at 80 columns (never 'tp_comm' on one line and '5%' on the next)."""
    doc = json.loads(cli(*PLAN, "--json").out)
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(*PLAN).out
    for p in doc["ranked"]:
        step, parts = p["step_time_s"], p["breakdown_s"]
        top = sorted(((v, k) for k, v in parts.items() if v > 0), reverse=True)[:3]
        for v, k in top:
            assert k in BREAKDOWN_KEYS
            assert f"{k} {v / step:.0%}" in out, (k, out)
    assert ", TP " not in out and "DP 3%" not in out
