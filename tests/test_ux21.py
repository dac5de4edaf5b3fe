"""Follow-ups of review ux21: scale's batch-efficiency key, batch efficiency within (0, 1], the bytes floor of
`calibrate runs`."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

WEAK = ("scale", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "512,1536", "--global-batch", "768", "--tp", "4", "--pp",
        "4", "--zero", "2", "--sequence-parallel", "--micro-batch", "2", "--mode", "weak", "--set",
        "training.critical_batch=4096")


def test_scale_names_its_critical_batch_efficiency_batch_efficiency(cli: Any) -> None:
    """scale's point key `statistical_efficiency` held the critical-batch efficiency, plan's (and the point's own
    `sync` block's) the sync mode's staleness multiplier: one name, two quantities. scale's is now
    `batch_efficiency`, as plan's batch-searched rows name the same quantity; the point's sync block keeps the sync
    mode's. The CSV column follows the JSON."""
    doc = json.loads(cli(*WEAK, "--json").out)
    first, last = doc["points"]
    assert "statistical_efficiency" not in first and "statistical_efficiency" in first["sync"]
    assert (first["global_batch"], last["global_batch"]) == (768, 2304)
    # McCandlish et al. 2018 per-sequence efficiency against the first point's batch: (B_noise + B0) / (B_noise + B)
    assert last["batch_efficiency"] == pytest.approx((4096 + 768) / (4096 + 2304), rel=1e-12)
    rows = list(csv.DictReader(io.StringIO(cli(*WEAK, "--csv").out)))
    assert "batch_efficiency" in rows[0] and "statistical_efficiency" not in rows[0]
    assert float(rows[1]["batch_efficiency"]) == last["batch_efficiency"]
