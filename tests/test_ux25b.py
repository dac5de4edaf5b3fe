"""ux25b: the user-facing fixes the ux25 expert-user pass left (plan's breakdown names, sensitivity's small
elasticities and CVs, why jitter is 0, embed_comm's description, the critical-batch unit): each test failed
before its fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scalemodel.engine.job import build_job
from scalemodel.engine.parts import BREAKDOWN_KEYS
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

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


SENS = ("sensitivity", "--cluster", "pcie-25gbe", "--model", "gpt-39b", "--gpus", "2048", "--tp", "4", "--pp", "8",
        "--zero", "1", "--sequence-parallel", "--global-batch", "3072")


def _row(out: str, name: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.strip("│ ").startswith(name))
    return [c.strip() for c in line.strip().strip("│").split("│")]


def test_sensitivity_shows_small_elasticities_and_cvs(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpt-39b on 2048 PCIe / 25 GbE GPUs printed the NIC latency's elasticity as '-0.000' and its gain as '+0.0%'
    (their size hidden by rounding); H100's clock-jitter CV printed 0.0118 where the docs say 1.18 %. Expected
    strings made from the JSON's numbers by hand: two significant figures with the sign, the CV x 100."""
    monkeypatch.setenv("COLUMNS", "160")
    doc = json.loads(cli(*SENS, "--json").out)
    p = next(p for p in doc["parameters"] if p["name"] == "tcp latency")
    e, gain = p["elasticity"], 100 * (p["throughput_ratio"] - 1)
    assert -0.001 < e < -0.0001 and 0 < gain < 0.05  # the case: both round to zero at 3 / 1 decimals
    row = _row(cli(*SENS).out, "tcp latency")
    assert row[2].startswith("-0.000") and row[2] != "-0.000" and float(row[2]) == pytest.approx(e, rel=0.06)
    assert row[4].startswith("+0.0") and float(row[4].rstrip("%")) == pytest.approx(gain, rel=0.06)
    assert _row(cli(*SENS).out, "straggler CV")[2] == "0"  # exactly none: no sign, no decimals
    h100 = ("sensitivity", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "64", "--tp", "8", "--pp", "2")
    cv = next(p for p in json.loads(cli(*h100, "--json").out)["parameters"] if p["name"] == "clock jitter CV")
    assert cv["value"] == 0.0118 and cv["unit"] == "fraction"
    assert _row(cli(*h100).out, "clock jitter CV")[1] == "1.18%"


def test_predict_says_why_jitter_is_zero(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zero-parts line listed `jitter` on an A100 (no measured clock_jitter_cv: hardware/accelerators/
    a100-sxm-80g.yaml has none) without saying why, while on an H100 (1.18 %) the part is priced; the line now says
    so for an accelerator without one, and says nothing where the part is 0 for another reason."""
    monkeypatch.setenv("COLUMNS", "250")
    a100 = ("predict", "-m", "llama3-8b", "-c", "dgx-a100", "-n", "8")
    assert json.loads(cli(*a100, "--json").out)["breakdown_s"]["jitter"] == 0
    zero = next(ln for ln in cli(*a100).out.splitlines() if ln.startswith("0 s (not listed): "))
    assert ", jitter (no measured clock_jitter_cv for this accelerator), " in zero
    h100 = ("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "1")  # one GPU: nothing to wait for, CV 1.18 %
    assert json.loads(cli(*h100, "--json").out)["breakdown_s"]["jitter"] == 0
    zero = next(ln for ln in cli(*h100).out.splitlines() if ln.startswith("0 s (not listed): "))
    assert "jitter" in zero and "clock_jitter_cv" not in zero


def test_embed_comm_description_covers_mtp(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek-V3 (tied_embeddings: false, mtp_layers: 1) at PP 8 prices embed_comm, whose description said 'the
    tied word-embedding gradient': with MTP the last stage's embedding copy is shared, not tied
    (model_parallel_comm.tied_embedding_allreduce's docstring: Megatron-Core finalize_model_grads)."""
    monkeypatch.setenv("COLUMNS", "250")
    args = ("predict", "-m", "deepseek-v3", "-c", "gb200-nvl72", "-n", "256", "--pp", "8", "--ep", "32",
            "--global-batch", "2048", "--zero", "1", "--recompute", "full", "--precision", "fp8")
    assert json.loads(cli(*args, "--json").out)["breakdown_s"]["embed_comm"] > 0
    row = next(ln for ln in cli(*args).out.splitlines() if ln.startswith("│ embed_comm "))
    text = row.split("│")[4].strip()
    assert "tied" in text and "multi-token prediction" in text and "shared" in text


def test_critical_batch_note_has_one_unit() -> None:
    """The critical-batch note said '... sequences: the documented default' for Kaplan's default and '... samples
    from training.critical_batch' for the user's value of the same quantity on the same language model (B_noise
    counts the global batch's units, its sequences); a generic workload, which has no sequences, keeps samples."""
    cluster, gpt = load_cluster("dgx-a100"), load_workload("llama3-8b")
    default = build_job(cluster, gpt, TrainingSpec()).critical_batch_source
    given = build_job(cluster, gpt, TrainingSpec(critical_batch=512)).critical_batch_source
    assert default.startswith("critical batch ") and default.split(":")[0].endswith(" sequences")
    assert given == "critical batch 512 sequences from training.critical_batch"
    assert build_job(cluster, load_workload("resnet50"), TrainingSpec(critical_batch=512)).critical_batch_source \
        == "critical batch 512 samples from training.critical_batch"
