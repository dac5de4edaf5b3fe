"""fix30: user-facing leftovers from the ux30 walkthrough and fuzz30, each checked at its mechanism.

(1) predict's ``batch_not_divisible`` gives the values and what would divide; (2) ``memory`` names a non-memory
infeasibility when the model does not fit either; (3) plan's "why" lists a net gain of the unnamed parts among the
gains; (4) collective's marker column has a header; (5) one throughput label per scope ('tokens/s' for the job,
'tokens/s/GPU' for one GPU); (6) ``hardware validate`` escapes the path; (7) ``--set LIST.N`` on a list not given
says how to write a list; (8) ``stragglers --json`` names the sync efficiency ``statistical_efficiency``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalemodel.engine.predict import batch_detail

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


# --- (1) the batch error's values ------------------------------------------------------------------------------

def test_batch_detail_names_the_values_and_the_nearest_batches() -> None:
    """B 100 on dp 64, b 1: 64 and 128 are the multiples of 64 either side; 100 / 1 = 100 has divisors 20, 25,
    50, 100 nearest 64 (|d - 64| = 44, 39, 14, 36)."""
    text = batch_detail(100, 64, 1)
    assert text.startswith("global batch 100 is not a multiple of dp 64 x micro-batch 1 = 64: global batch 64 or "
                           "128 would divide"), text
    assert "dp 20, 25, 50, 100 would" in text
    assert "at dp 64, micro-batch" not in text  # 100 is no multiple of 64: no micro-batch divides


def test_batch_detail_below_one_step_and_micro_batches() -> None:
    """B 192 on dp 64, b 2: 128 | 192 fails; 192 / 64 = 3, divided by micro-batch 1 and 3. B 32 < dp b = 64: only
    64 is a valid global batch (0 is not)."""
    assert "micro-batch 1, 3 would" in batch_detail(192, 64, 2)
    assert "global batch 64 would divide" in batch_detail(32, 64, 1)


def test_predict_prints_the_batch_detail() -> None:
    out = _run("predict", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "512", "--tp", "8",
               "--global-batch", "100")
    assert out.returncode == 0, out.stderr
    assert "here: global batch 100 is not a multiple of dp 64 x micro-batch 1 = 64" in out.stdout


# --- (2) memory: both verdicts -----------------------------------------------------------------------------------

def test_memory_names_the_batch_reason_when_the_model_does_not_fit() -> None:
    """GPT-3 175B at dp 64, no ZeRO, does not fit an A100 80 GB (2.9 TB of states); B 100 is no multiple of 64.
    Before, the 'infeasible:' line was printed only when the model fit."""
    out = _run("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "64", "--global-batch", "100")
    assert out.returncode == 0, out.stderr
    assert "infeasible: global batch not divisible by dp x micro-batch" in out.stdout
    assert "does NOT fit, and the strategy is infeasible" in out.stdout
    assert "here: global batch 100 is not a multiple of dp 64 x micro-batch 1 = 64" in out.stdout  # as predict
    ok = _run("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "64")
    assert "infeasible:" not in ok.stdout and "does NOT fit;" in ok.stdout  # out of memory alone: no second line


# --- (3) plan's "why": a net gain in the unnamed parts is a gain -------------------------------------------------

def test_a_net_gain_in_the_other_parts_is_not_listed_among_the_costs() -> None:
    """Winner 1.0 s compute + 0.1 s TP; runner-up 1.3 s compute, 0.05 s dp, 0.03 s bubble, 0.01 s optimizer: the
    two largest gains (300 ms compute, 50 ms dp) are named, the loss (100 ms TP) follows "for", and the 40 ms the
    bubble and optimizer net for the winner is a gain: before, "(for 100 ms more ..., 40 ms less in the other
    parts)" put it among what the winner pays."""
    from types import SimpleNamespace

    from scalemodel.engine.parts import BREAKDOWN_KEYS
    from scalemodel.report.explain import _advantages

    def pred(**parts: float) -> SimpleNamespace:
        br = {k: parts.get(k, 0.0) for k in BREAKDOWN_KEYS}
        return SimpleNamespace(breakdown_s=br, step_time_s=sum(br.values()))

    text = _advantages(pred(compute=1.0, tp_comm=0.1),  # type: ignore[arg-type]
                       pred(compute=1.3, dp_comm=0.05, bubble=0.03, optimizer=0.01))  # type: ignore[arg-type]
    assert text == ("300 ms less compute, 50 ms less exposed gradient sync, 40 ms less in the other parts "
                    "(for 100 ms more exposed TP communication)"), text


# --- (4) collective: the best marker's column has a header ---------------------------------------------------------

def test_collective_best_column_has_a_header() -> None:
    out = _run("collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "16", "--cluster", "dgx-h100")
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if "algorithm" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")][-1] == "best", header
    marked = [line for line in out.stdout.splitlines() if line.rstrip().rstrip("│").rstrip().endswith("yes")]
    assert len(marked) == 1, out.stdout  # one algorithm is the best


# --- (6) hardware validate writes the path through errors.one_line -----------------------------------------------

def test_hardware_validate_escapes_the_path(tmp_path: Path) -> None:
    """An ESC in a folder's name was written raw (it coloured the terminal), a byte that is not UTF-8 raised
    UnicodeEncodeError under PYTHONIOENCODING=utf-8 (a traceback): both are written as their escapes."""
    spec = (ROOT / "hardware" / "clusters" / "dgx-h100.yaml").read_text()
    for name, shown in (("a\x1b[31mb", "a\\x1b[31mb"), (os.fsdecode(b"c\xffd"), "c\\xffd")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "dgx-h100.yaml").write_text(spec)
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
        cmd = [sys.executable, "-m", "scalemodel", "hardware", "validate", str(folder / "dgx-h100.yaml")]
        out = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, timeout=120)
        assert out.returncode == 0, out.stderr
        assert b"\x1b" not in out.stdout and f"{shown}/dgx-h100.yaml is a valid cluster spec".encode() in out.stdout


# --- (7) --set LIST.N on a list not given -----------------------------------------------------------------------

@pytest.mark.parametrize("item", ["strategy.offload_tensors.0=X", "training.nvfp4_disable.0=rht"])
def test_an_index_into_a_list_not_given_says_how_to_write_a_list(item: str) -> None:
    """The index made a mapping {'0': 'X'}, refused as "Input should be a valid list (got {'0': 'X'})"."""
    out = _run("predict", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "512", "--tp", "8", "--set", item)
    field = item.split(".0=")[0]
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: --set {field}.0: {field} is not set, so it has no item 0 to set; "
                                 f"the whole list, --set {field}=[a,b]"), out.stderr


def test_an_index_into_an_empty_list_and_the_whole_list_form() -> None:
    base = ("predict", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "512", "--tp", "8")
    out = _run(*base, "--set", "training.nvfp4_disable=[]", "--set", "training.nvfp4_disable.0=rht")
    assert out.returncode == 2 and "training.nvfp4_disable is empty, so it has no item 0" in out.stderr, out.stderr
    # the form the message gives is read as a list (refused here for its own reason: nvfp4_disable needs fp4)
    out = _run(*base, "--set", "training.nvfp4_disable=[rht]")
    assert out.returncode == 2 and "['rht'] needs precision fp4" in out.stderr, out.stderr
    # an unknown key stays "unknown key" (the index form is refused only where the spec declares a list)
    out = _run(*base, "--set", "strategy.no_such_field.0=X")
    assert "unknown key 'no_such_field'" in out.stderr, out.stderr
    # an index into a list the spec has still sets its item
    assert _run(*base, "--set", "cluster.tiers.0.span=8").returncode == 0


# --- (8) one key for the sync mode's staleness efficiency --------------------------------------------------------

def test_stragglers_json_names_the_sync_efficiency_as_predict_does() -> None:
    """stragglers called it ``efficiency``, predict and scale ``statistical_efficiency``. BSP's is 1 (no staleness);
    ASP's over 16 workers is 1 / (1 + kappa (N - 1) / N) with N = 16 (docs/model.md, staleness)."""
    import json

    out = _run("stragglers", "--workers", "16", "--cv", "0.1", "--staleness-kappa", "0.3", "--json")
    doc = json.loads(out.stdout)
    rows = {r["sync"]: r for r in doc["strategies"]}
    assert all("efficiency" not in r and "statistical_efficiency" in r for r in rows.values())
    assert rows["bsp"]["statistical_efficiency"] == 1.0
    assert abs(rows["asp"]["statistical_efficiency"] - 1 / (1 + 0.3 * 15 / 16)) < 1e-12


# --- (5) one throughput label per scope across tables ------------------------------------------------------------

def _header_cells(text: str, first: str) -> list[str]:
    """The header cells of the table whose header line holds ``first`` (rich's boxed or simple heads)."""
    line = next(line for line in text.splitlines() if first in line)
    return [c.strip() for c in line.replace("┃", "│").split("│") if c.strip()] if "┃" in line else line.split()


def test_throughput_labels_per_gpu_and_whole_job(tmp_path: Path) -> None:
    """plan wrote the whole job's rate 'tokens/s', scale 'tokens per s' (two lines, 'tokens' over 'per s'); sweep
    wrote the per-GPU rate 'tok/s/GPU', check 'tokens/s per GPU'. Now 'tokens/s' and 'tokens/s/GPU'."""
    scale = _run("scale", "--scenario", "examples/scenarios/strong-scaling.yaml")
    assert scale.returncode == 0, scale.stderr
    lines = scale.stdout.splitlines()
    second = next(i for i, line in enumerate(lines) if "(points)" in line)  # the two-line head's second line
    assert "tokens/s" in _header_cells(scale.stdout, "(points)") and "tokens" not in lines[second - 1]
    check = _run("check", "examples/capacity/gpt3-175b-dgx-h100.yaml")
    assert "tokens/s/GPU" in _header_cells(check.stdout, "global batch"), check.stdout
    sweep = tmp_path / "s.yaml"
    sweep.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-a100]\ngpus: [8]\n"
                     "strategies: [{label: tp2, tp: 2}]\ntraining: {global_batch: 64}\n")
    out = _run("sweep", str(sweep), "--workers", "1")
    assert out.returncode == 0, out.stderr
    assert "tokens/s/GPU" in _header_cells(out.stdout, "cluster"), out.stdout
