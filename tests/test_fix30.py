"""fix30: user-facing leftovers from the ux30 walkthrough and fuzz30, each checked at its mechanism.

(1) predict's ``batch_not_divisible`` gives the values and what would divide; (2) ``memory`` names a non-memory
infeasibility when the model does not fit either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    ok = _run("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "64")
    assert "infeasible:" not in ok.stdout and "does NOT fit;" in ok.stdout  # out of memory alone: no second line
