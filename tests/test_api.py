"""The Python API: docs/api.md's worked example runs; dicts, specs and keyword arguments give the same
answer; dir() shows the API; --version and shell completion work."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

import scalemodel


def test_docs_api_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    cells = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(cells) >= 6
    namespace: dict[str, object] = {}
    for cell in cells:
        exec(compile(cell, "docs/api.md", "exec"), namespace)  # noqa: S102 - the documented example
    out = capsys.readouterr().out
    assert "tokens/s" in out and "unknown field 'tensor_parallel'" in out


def test_dicts_specs_and_keywords_agree() -> None:
    from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

    a = scalemodel.predict("dgx-a100", "gpt-1.7b", 16, global_batch=32, tp=2)
    b = scalemodel.predict("dgx-a100", "gpt-1.7b", 16, {"global_batch": 32}, {"tp": 2})
    c = scalemodel.predict(load_cluster("dgx-a100"), load_workload("gpt-1.7b"), 16, TrainingSpec(global_batch=32),
                           StrategySpec(tp=2))
    d = scalemodel.predict(cluster="dgx-a100", model="gpt-1.7b", gpus=16, training=TrainingSpec(global_batch=8),
                           global_batch=32, strategy={"tp": 4}, tp=2)  # keywords override the specs
    assert a.step_time_s == b.step_time_s == c.step_time_s == d.step_time_s
    assert a.strategy["tp"] == 2 and a.strategy["global_batch"] == 32


def test_api_errors_name_the_field() -> None:
    with pytest.raises(scalemodel.InputError) as exc:
        scalemodel.predict("dgx-a100", "gpt-1.7b", 16, training={"global_batch": -1})
    assert "global_batch" in str(exc.value)
    with pytest.raises(scalemodel.InputError, match="cannot make a training spec"):
        scalemodel.predict("dgx-a100", "gpt-1.7b", 16, training=[1, 2])
    with pytest.raises(scalemodel.InputError, match="plan searches the strategy"):
        scalemodel.plan("dgx-a100", "gpt-1.7b", 16, tp=2)


def test_dir_lists_the_api() -> None:
    names = dir(scalemodel)
    for name in ("predict", "plan", "memory", "scale", "study", "calibrate_log", "load_cluster", "__version__"):
        assert name in names and name in scalemodel.__all__
    assert all(callable(getattr(scalemodel, n)) for n in ("predict", "plan", "study"))
    # the module's own imports are not offered as API (tab completion showed Any, annotations, importlib)
    assert not {"Any", "annotations", "importlib"} & set(names)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT)


def test_version() -> None:
    r = _run("--version")
    assert r.returncode == 0 and r.stdout == f"scalemodel {scalemodel.__version__}\n"


def test_shell_completion() -> None:
    r = _run(env={"_SCALEMODEL_COMPLETE": "complete_bash", "COMP_WORDS": "scalemodel sw", "COMP_CWORD": "1"})
    assert r.stdout.split() == ["sweep"]
    r = _run(env={"_SCALEMODEL_COMPLETE": "complete_bash", "COMP_WORDS": "scalemodel predict --clu",
                  "COMP_CWORD": "2"})
    assert "--cluster" in r.stdout.split()
    r = _run(env={"_SCALEMODEL_COMPLETE": "complete_bash", "COMP_WORDS": "scalemodel plan -m llama3",
                  "COMP_CWORD": "3"})
    assert r.stdout.split() == ["llama3-405b", "llama3-70b", "llama3-8b"]  # built-in names of examples/workloads
    r = _run(env={"_SCALEMODEL_COMPLETE": "complete_bash", "COMP_WORDS": "scalemodel predict --cluster dgx-h",
                  "COMP_CWORD": "3"})
    assert r.stdout.split() == ["dgx-h100"]
    r = _run("--show-completion", "bash")
    assert r.returncode == 0 and "_SCALEMODEL_COMPLETE" in r.stdout
