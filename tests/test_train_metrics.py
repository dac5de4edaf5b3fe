"""strategy.train_metric_passes: a trainer's training metrics, eager cross-entropies over the logits after every
micro-batch's backward (Composer's ``_eval_train_metrics``; llm-foundry's MPT has LanguageCrossEntropy and
LanguagePerplexity, each a ``torch.nn.CrossEntropyLoss``).

Bytes per logit summed here pass by pass from ATen's kernels under autocast (log_softmax is on autocast's
fp32_set_opt_dtype list: the bf16 logits are read with dtype float32, no cast kernel; ``cunn_SoftMaxForward`` reads
a row of V >= 12,288 fp32 elements three times and writes the fp32 output; nll_loss gathers one value per token),
not taken from the function; the step's change is worked out from the HBM roofline by hand."""

from __future__ import annotations

import json

import pytest
from conftest import script_module

from scalemodel.cost.compute import train_metric_bytes
from scalemodel.engine import planner
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec

BF16, FP32 = 2, 4
ONE_PASS = [(BF16, 0),      # log_softmax: the row max (dtype float32: the bf16 logits read as they are)
            (BF16, 0),      # log_softmax: the sum of exp
            (BF16, FP32)]   # log_softmax: the epilogue, fp32 log-probabilities written


def test_hand_counted_bytes() -> None:
    one = sum(r + w for r, w in ONE_PASS)
    assert one == 10
    assert float(train_metric_bytes(2, 2.0)) == pytest.approx(2 * one)  # llm-foundry: 20 B a logit
    assert float(train_metric_bytes(0, 2.0)) == 0.0
    assert float(train_metric_bytes(1, 4.0)) == pytest.approx(3 * 4 + 4)  # fp32 logits: three reads, one write


def test_bad_counts() -> None:
    with pytest.raises(InputError, match="train-metric"):
        train_metric_bytes(-1)
    with pytest.raises(Exception, match="train_metric_passes"):
        StrategySpec(train_metric_passes=-1)


def test_predict_adds_the_passes_at_the_hbm_roofline(cli) -> None:  # type: ignore[no-untyped-def]
    """gpt-1.7b (vocab 51200) on one dgx-h100 node, tp 1, pp 1, micro-batch 2 at seq 2048, dp 8, global batch 16
    (one micro-batch): two passes add 2 x 10 x (2 x 2048) x 51200 B = 4.194 GB of HBM traffic, at the H100's
    3.35 TB/s (datasheet) x 0.88 (the catalog's memory efficiency for h100-sxm): 1.4228 ms of compute."""
    steps = {}
    for n in (0, 2):
        r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--set", "strategy.tp=1",
                "--set", "strategy.pp=1", "--set", "strategy.dp=8", "--set", "training.micro_batch=2",
                "--set", "training.global_batch=16", "--set", "training.seq_len=2048",
                "--set", f"strategy.train_metric_passes={n}", "--json")
        assert r.code == 0, r.err
        out = json.loads(r.out)
        assert out["strategy"]["train_metric_passes"] == n
        steps[n] = out["breakdown_s"]["compute"]
    nbytes = 2 * 10 * 2 * 2048 * 51200
    assert nbytes == 4_194_304_000
    assert steps[2] - steps[0] == pytest.approx(nbytes / (3.35e12 * 0.88), rel=1e-6)  # 1.4228 ms


def test_plan_takes_it_as_a_fixed_field() -> None:
    _, fixed, _ = planner.pins(StrategySpec(train_metric_passes=2), ["train_metric_passes"])
    assert fixed == {"train_metric_passes": 2}


def test_validation_rule_follows_the_sources() -> None:
    """llm-foundry (Composer) rows evaluate two train metrics per micro-batch; no other source's trainer does."""
    mod = script_module("validate_training")
    assert mod.TRAIN_METRIC_PASSES == {"mpt": 2}
