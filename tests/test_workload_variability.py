"""Work variability from the sample-length distribution and the dispatch-latency default
(docs/model.md#imbalance). Expected values are computed here by hand from the cost formula, not
read back from the implementation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalemodel.choices import SequenceLengths, parse_sequence_lengths
from scalemodel.cost import balance
from scalemodel.errors import InputError

SCEN = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "assignment.yaml"


def run(cli: Any, *flags: str) -> Any:
    return cli("scale", "--scenario", str(SCEN), "--gpus", "128", *flags)


def breakdown(res: Any) -> dict[str, float]:
    assert res.code == 0, res.err
    return dict(json.loads(res.out)["points"][0]["breakdown_s"])


def test_sequence_lengths_vocabulary() -> None:
    assert parse_sequence_lengths("fixed") == parse_sequence_lengths("packed") == SequenceLengths()
    assert parse_sequence_lengths(" Uniform:16:512 ") == SequenceLengths(16, 512)
    assert parse_sequence_lengths("uniform:16:512").label == "uniform:16:512"
    for bad in ("uniform:0:5", "uniform:9:3", "uniform:1", "normal:1:2", "uniform:-1:4", "", "uniform:1:2:3"):
        with pytest.raises(InputError):
            parse_sequence_lengths(bad)


def test_linear_cost_of_uniform_lengths_has_cv_one_over_sqrt3() -> None:
    """c(L) = L on 1..H: CV -> 1/sqrt(3) (continuous uniform), and a micro-batch of b samples divides it by sqrt(b)."""
    lengths = np.arange(1, 4097, dtype=float)
    assert balance.length_cost_cv(lengths) == pytest.approx(1 / math.sqrt(3), rel=1e-3)
    assert balance.length_cost_cv(lengths, 4) == pytest.approx(1 / math.sqrt(3) / 2, rel=1e-3)
    assert balance.length_cost_cv(np.full(7, 3.0)) == 0.0


def _gpt_1_7b_cv_by_hand(high: int) -> float:
    """GPT 1.7B (h = 2304, 24 layers, V = 51200, FFN 4h): forward FLOPs of a sample of L tokens,
    c(L) = L (24 x 24 h^2 + 2 h V) + 24 x 4 h L^2 (QKV/proj 8h^2 + MLP 16h^2 per token and layer, attention
    4 h L^2 per layer, logits). Continuous uniform L on (0, H]: E[L^k] = H^k / (k + 1)."""
    h, layers, vocab = 2304.0, 24, 51200.0
    a = layers * 24 * h * h + 2 * h * vocab
    b = layers * 4 * h

    def m(k: int) -> float:
        return high ** k / (k + 1)

    mean = a * m(1) + b * m(2)
    second = a * a * m(2) + 2 * a * b * m(3) + b * b * m(4)
    return math.sqrt(second - mean * mean) / mean


def test_assignment_scenario_derives_its_cv_from_the_model(cli: Any) -> None:
    b = breakdown(run(cli, "--json"))
    expected = _gpt_1_7b_cv_by_hand(2048)
    assert 0.59 < expected < 0.62  # above the GEMM-only 1/sqrt(3): attention grows as L^2
    # static imbalance at dp = 128 with 16 one-sample micro-batches: each replica's sum has CV / sqrt(16) and is
    # taken as lognormal (dgx-a100's variability law, moment-matched); E[max of 128] by quadrature in z
    cv = expected / 4
    s2 = math.log(1 + cv * cv)
    z = np.linspace(-12.0, 12.0, 48001)
    phi = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    f = np.exp(-s2 / 2 + math.sqrt(s2) * z) * 128 * phi * cdf ** 127
    e_max = float(np.sum((f[1:] + f[:-1]) / 2) * (z[1] - z[0]))
    assert b["imbalance"] / b["compute"] == pytest.approx(e_max - 1, rel=0.01)


def test_dynamic_default_dispatch_is_rays_task_round_trip(cli: Any) -> None:
    assert balance.DEFAULT_DISPATCH_OVERHEAD_S == pytest.approx(1 / 980.7121217208985)
    free = breakdown(run(cli, "--assignment", "dynamic", "--dispatch-overhead", "0s", "--json"))
    paid = breakdown(run(cli, "--assignment", "dynamic", "--json"))
    extra = paid["imbalance"] - free["imbalance"]
    # 16 hand-outs per GPU, each 1.02 ms, plus half a task's share of it at the tail (t = t_c + o)
    assert extra == pytest.approx(16.5 * 1 / 980.7121217208985, rel=0.02)


def test_work_cv_and_sequence_lengths_are_exclusive(cli: Any) -> None:
    res = run(cli, "--set", "training.work_cv=0.3")
    assert res.code == 2 and res.err.count("\n") == 1 and "not both" in res.err
    res = run(cli, "--set", "training.sequence_lengths=uniform:1:4096")
    assert res.code == 2 and "seq_len" in res.err
    assert breakdown(run(cli, "--set", "training.sequence_lengths=fixed", "--json"))["imbalance"] == 0.0


def test_kaplan_default_critical_batch_by_hand() -> None:
    """B_crit = 2e8 / L^(1/0.21) tokens at L = (8.8e13 / N)^0.076 (Kaplan et al. 2020 eq. 1.1 and §5.1)."""
    from scalemodel.cost import efficiency

    n = 12 * 24 * 2304.0 ** 2  # GPT 1.7B's non-embedding weights (12 L h^2)
    loss = (8.8e13 / n) ** 0.076
    assert float(efficiency.kaplan_loss(n)) == pytest.approx(loss)
    assert 2.29 < loss < 2.31
    assert float(efficiency.default_critical_batch_tokens(n)) == pytest.approx(2e8 / loss ** (1 / 0.21))


def test_scenarios_without_critical_batch_get_the_kaplan_default(cli: Any) -> None:
    """strong-scaling.yaml gives no critical_batch: GPT 1.7B's default B_noise ~ 1850 sequences of 2048, so its
    4096-sequence batch has statistical efficiency (relative to the first point's batch, the same) 1."""
    res = cli("scale", "--scenario", str(SCEN.parent / "strong-scaling.yaml"), "--gpus", "128", "--json")
    assert res.code == 0, res.err
    pt = json.loads(res.out)["points"][0]
    assert pt["batch_efficiency"] == pytest.approx(1.0)
    no = cli("scale", "--scenario", str(SCEN.parent / "strong-scaling.yaml"), "--gpus", "128")
    assert "train_tokens" not in no.out + no.err  # no complaint about a critical batch nobody gave


def test_topk_below_the_published_density_is_flagged(cli: Any) -> None:
    from scalemodel.cost import compression

    assert compression.accuracy_note("topk", 0.001) is None and compression.accuracy_note("int8") is None
    res = cli("scale", "--scenario", str(SCEN.parent / "comm-reduction.yaml"), "--gpus", "2048",
              "--compression", "topk:0.0001", "--json")
    assert res.code == 0, res.err
    assert any("published accuracy" in n for n in json.loads(res.out)["notes"])


def test_fit_script_reads_the_published_points() -> None:
    import subprocess
    import sys

    root = SCEN.parents[2]
    out = subprocess.run([sys.executable, str(root / "scripts" / "fit_convergence.py")], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(root)}).stdout
    assert "resnet50" in out and "mean +0.27" in out and "no step-count cost" in out
    assert "default kappa 0.1665 (borrowed from adam/transformer)" in out


def test_accumulation_past_the_critical_batch_loses_progress(cli: Any) -> None:
    """README section 6: 8x accumulation at 2048 GPUs (8192 -> 65536 sequences) quadruples throughput, but with
    GPT 1.7B's default B_noise each example is worth (B_n + 8192)/(B_n + 65536) as much: progress/s falls."""
    from scalemodel.cost import efficiency

    comm = SCEN.parent / "comm-reduction.yaml"
    runs = [json.loads(cli("scale", "--scenario", str(comm), "--gpus", "2048", "--global-batch", b, "--json").out)
            for b in ("8192", "65536")]
    gain = runs[1]["points"][0]["tokens_per_s"] / runs[0]["points"][0]["tokens_per_s"]
    b_noise = float(efficiency.default_critical_batch_tokens(12 * 24 * 2304.0 ** 2)) / 2048
    worth = (b_noise + 8192) / (b_noise + 65536)
    assert 3.8 < gain < 4.4 and 0.14 < worth < 0.16
    assert gain * worth < 0.7
