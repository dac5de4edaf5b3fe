"""Every command's --json: one strictly valid document, schema_version and command first, inputs echoed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

LOG = str(ROOT / "tests" / "data" / "nccl" / "synthetic_current.log")

COMMANDS = [  # the first element is the `command` the document must name
    ("hardware list", "hardware", "list"),
    ("hardware show", "hardware", "show", "dgx-a100"),
    ("hardware validate", "hardware", "validate", str(ROOT / "hardware" / "clusters" / "dgx-h100.yaml")),
    # every kind `hardware list` shows can be shown by name (a scenario was refused), and a sweep file validated
    ("hardware show", "hardware", "show", "default"),
    ("hardware validate", "hardware", "validate", str(ROOT / "examples" / "sweeps" / "capacity.yaml")),
    ("collective", "collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--cluster", "dgx-h100"),
    ("calibrate", "calibrate", "nccl-tests", LOG, "--cluster", "dgx-a100"),
    ("memory", "memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8"),
    ("predict", "predict", "--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "64"),
    ("scale", "scale", "--gpus", "128,256", "--cluster", "dgx-a100", "--model", "gpt-1.7b"),
    ("plan", "plan", "--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "16", "--top", "2"),
    ("check", "check", str(ROOT / "examples" / "capacity" / "gpt3-175b-dgx-h100.yaml")),
    ("sensitivity", "sensitivity", "--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "16"),
    ("stragglers", "stragglers", "--workers", "256", "--cv", "0.05"),
]


def _reject(token: str) -> None:
    raise ValueError(f"non-finite number {token} in JSON output")


@pytest.mark.parametrize("case", COMMANDS, ids=lambda c: c[0])
def test_json_is_strict_and_echoes_inputs(cli, case) -> None:  # type: ignore[no-untyped-def]
    command, *args = case
    res = cli(*args, "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out, parse_constant=_reject)
    keys = list(doc)
    assert keys[:2] == ["schema_version", "command"]
    assert doc["command"] == command
    assert "inputs" in doc and isinstance(doc["inputs"], dict)


@pytest.mark.parametrize("kind", ["sweep", "calibrate runs"])
def test_json_of_the_file_driven_forms(cli, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    """The two forms that read a file of their own (a sweep, measured runs) keep the same contract."""
    if kind == "sweep":
        f = tmp_path / "s.yaml"
        f.write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-a100]\ngpus: [8, 3]\n"
                     "strategies: [{label: tp2, tp: 2}]\n")  # 3 GPUs: an error row, null values
        args: tuple[str, ...] = ("sweep", str(f), "--workers", "1")
    else:
        f = tmp_path / "runs.yaml"
        f.write_text("- {name: a, cluster: dgx-a100, model: gpt-1.7b, gpus: 8, global_batch: 64, step_time: 1.2 s}\n"
                     "- {name: b, cluster: dgx-a100, model: gpt-1.7b, gpus: 16, global_batch: 64, step_time: 0.7 s}\n")
        args = ("calibrate", "runs", str(f), "--factors", "compute", "--predict-at", "64")
    res = cli(*args, "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out, parse_constant=_reject)
    assert list(doc)[:2] == ["schema_version", "command"] and doc["command"] == kind.split()[0]
    assert isinstance(doc["inputs"], dict)
