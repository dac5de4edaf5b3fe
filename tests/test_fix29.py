"""fix29: four defects, each at its mechanism.

(1) ``hardware show`` at a narrow terminal re-wrapped the spec's YAML into text that did not parse (a key wider
than the width lost its indent) and raised the scanner's error; (2) an FP8 attention core's casts were computed
twice per layer (the layer's forward and its selective recompute); (3) the "give zero too" hint named ``--zero``
inside scenario and runs files and in plan, which have no such option; (4) an nccl-tests log's 30-digit size was
fitted (exit 1) instead of refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from scalemodel.commands.common import build_specs
from scalemodel.engine import layer_compute
from scalemodel.engine.hardware import show_spec
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.report.hardware import _sources_last, yaml_within
from scalemodel.specs.loader import builtin_names
from scalemodel.specs.nccl_tests import parse_nccl_tests
from scalemodel.specs.yamlread import FastLoader

ROOT = Path(__file__).resolve().parents[1]
NCCL_LOG = ROOT / "tests" / "data" / "nccl" / "synthetic_current.log"


def _run(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


# --- (1) hardware show at any width ----------------------------------------------------------------------------

BUILTINS = [n for kind in ("accelerator", "cluster", "workload", "scenario") for n in builtin_names(kind)]


def test_a_key_wider_than_the_width_keeps_its_indent() -> None:
    """textwrap, given the line with its indent, put the indent alone on a first line and dropped it: the key
    landed at column 0 and the text no longer parsed (the scanner's error escaped)."""
    data = {"top": {"a_key_longer_than_the_width": "several words that wrap onto further lines"}}
    text = yaml_within(data, 12)
    assert yaml.load(text, Loader=FastLoader) == data
    assert text.splitlines()[1] == "  a_key_longer_than_the_width:"
    # folded here, not by PyYAML's fallback (which breaks a word late): a line past 12 columns is one word
    assert all(len(line) <= 12 or " " not in line.strip() for line in text.splitlines()), text


@pytest.mark.parametrize("width", [1, 20, 25, 200])
def test_every_builtin_renders_as_yaml_equal_to_the_spec(width: int) -> None:
    assert len(BUILTINS) > 80
    for name in BUILTINS:
        data = _sources_last(show_spec(name).spec.model_dump(mode="json"))
        for unicode in (True, False):
            assert yaml.load(yaml_within(data, width, allow_unicode=unicode), Loader=FastLoader) == data, (name, width)


def test_hardware_show_at_columns_25_is_the_spec() -> None:
    r = _run("hardware", "show", "dgx-h100", columns=25)
    assert r.returncode == 0 and r.stderr == ""
    body = r.stdout.split("\n", 1)[1]  # past the "cluster dgx-h100" title
    spec = json.loads(_run("hardware", "show", "dgx-h100", "--json").stdout)["spec"]
    assert yaml.load(body, Loader=FastLoader) == spec


# --- (2) the FP8 attention core's casts computed once ----------------------------------------------------------

def _fp8_job(strategy: dict[str, Any]) -> tuple[Any, Any]:
    tr = {"precision": "fp4", "global_batch": 8, "micro_batch": 1, "seq_len": 8192, "fp8_attention": True}
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72", model="llama3-8b", sets=[], training=tr,
                                   strategy={"dp": 8, **strategy})
    j = build_job(cl, wl, trs, straggler_cv=0.0)
    return j, grid_from_strategy(stg, trs, 8, j)


def test_the_recompute_takes_the_forward_casts_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Selective core_attn recompute repeats the forward core casts it is passed, and computes none itself."""
    j, g = _fp8_job({"recompute": "selective"})
    forward = np.array([1.25e-4])

    def refuse(*_: Any) -> Any:
        raise AssertionError("fp8_attention_casts computed again")

    monkeypatch.setattr(layer_compute, "fp8_attention_casts", refuse)
    assert float(np.ravel(layer_compute.fp8_attention_recompute_casts(j, g, forward))[0]) == 1.25e-4


def test_one_step_computes_the_core_casts_once_per_layer_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dense FP8-attention step with selective recompute: one fp8_attention_casts per fp8_cast_per_layer (the
    layer's forward and its recompute share it); before, two."""
    calls = {"core": 0, "layer": 0}
    core, per_layer = layer_compute.fp8_attention_casts, layer_compute.fp8_cast_per_layer

    def counted_core(*a: Any, **k: Any) -> Any:
        calls["core"] += 1
        return core(*a, **k)

    def counted_layer(*a: Any, **k: Any) -> Any:
        calls["layer"] += 1
        return per_layer(*a, **k)

    j, g = _fp8_job({"recompute": "selective"})
    before = evaluate(j, g)
    monkeypatch.setattr(layer_compute, "fp8_attention_casts", counted_core)
    monkeypatch.setattr(layer_compute, "fp8_cast_per_layer", counted_layer)
    after = evaluate(j, g)
    assert calls["layer"] >= 1 and calls["core"] == calls["layer"]
    assert np.array_equal(before.step_time, after.step_time)


# --- (3) the zero hint names what the input at hand has --------------------------------------------------------

def test_the_zero_hint_names_options_on_the_command_line_and_the_field_in_files(tmp_path: Path) -> None:
    switch = ["--set", "strategy.fsdp_reshard_after_forward=false"]
    base = ["-c", "dgx-h100", "-m", "llama3-8b", "--gpus", "8"]
    predict = _run("predict", *base, *switch)
    plan = _run("plan", *base, *switch, "--constraint", "zero<=2")  # ux37: stages that cannot run it (plan searches)
    assert predict.returncode == plan.returncode == 2
    assert predict.stderr.strip().endswith("give zero too (--zero or --set strategy.zero)")
    # plan has no --zero; a one-stage --constraint zero gives it there (fuzz37)
    assert plan.stderr.strip().endswith("give zero too (--set strategy.zero, or --constraint zero=VALUE)")
    scen = tmp_path / "s.yaml"
    scen.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: llama3-8b\ngpus: [8]\ntraining:\n"
                    "  global_batch: 8\n  micro_batch: 1\n  precision: bf16\nstrategy:\n  tp: 1\n"
                    "  fsdp_reshard_after_forward: false\n")
    runs = tmp_path / "runs.yaml"
    runs.write_text("- cluster: dgx-h100\n  model: llama3-8b\n  gpus: 8\n  global_batch: 8\n  micro_batch: 1\n"
                    "  precision: bf16\n  fsdp_reshard_after_forward: false\n  step_time: 1.0\n")
    for r, at in ((_run("scale", "--scenario", str(scen)), f"{scen}:12: strategy.fsdp_reshard_after_forward: "),
                  (_run("calibrate", "runs", str(runs)), f"{runs}: run 1 (line 1): fsdp_reshard_after_forward: ")):
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {at}")
        assert lines[0].endswith("zero is 0 unless given: give zero too") and "--zero" not in lines[0]


# --- (4) nccl-tests sizes and times within what a test can print ------------------------------------------------

def _log_with(tmp_path: Path, old: str, new: str) -> Path:
    text = NCCL_LOG.read_text()
    assert text.count(old) == 1
    out = tmp_path / "bad.log"
    out.write_text(text.replace(old, new))
    return out


def _line_of(path: Path, token: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if token in line)


@pytest.mark.parametrize("old, new, field", [
    ("        1024           256", "123456789012345678901234567890           256", "size"),
    ("        1024           256", f"{2**50 + 1}           256", "size"),
    ("        1024           256", f"        1024  {2**50 + 1}", "count"),
    ("-1    51.45", "-1    3600000001.0", "out-of-place time"),
])
def test_an_unphysical_row_is_one_error_naming_file_line_and_field(tmp_path: Path, old: str, new: str,
                                                                     field: str) -> None:
    path = _log_with(tmp_path, old, new)
    r = _run("calibrate", str(path), "-c", "dgx-h100")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {path}: line {_line_of(path, new.split()[-1])}: {field}: ")
    assert "more than nccl-tests can have measured" in lines[0]


def test_the_bounds_themselves_are_accepted() -> None:
    """1 PiB and an hour are what a test could print: read (the fit's verdict on them is its own)."""
    text = NCCL_LOG.read_text().replace("        1024           256", f"{2**50}           256").replace(
        "-1    51.45", "-1    3600000000.0")
    row = parse_nccl_tests(text).rows[0]
    assert row.size_bytes == 2.0**50 and row.time_oop_s == 3600.0


def test_a_json_entry_past_the_bound_is_named(tmp_path: Path) -> None:
    doc = json.loads((ROOT / "tests" / "data" / "nccl" / "synthetic_json.json").read_text())
    doc["results"][2]["size"] = 10**20
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    r = _run("calibrate", str(path), "-c", "dgx-h100")
    assert r.returncode == 2 and r.stderr.strip().startswith(f"error: {path}: result 3: size: 1e+20 bytes: ")
