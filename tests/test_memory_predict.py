"""`memory` and `predict` agree: the same per-GPU bytes and the same verdict for the same flags.

Both commands go through one engine path (build_job, the strategy grid, stage_memory.memory_parts); these
tests hold them to it over dense, GQA, MoE and generic models, the memory-relevant strategy choices
and several clusters. The largest micro-batch `memory` reports is checked against `predict` run at
that micro-batch and the next one (the closed form and the divisor search against direct evaluation).
"""

from __future__ import annotations

import json

import pytest

GRID = [
    # dense GPT-3 at the README's layout, default one micro-batch per step (m = B / (dp b) = 1)
    ("gpt3-175b", "dgx-a100", "1024", ["--tp", "8", "--pp", "8"]),
    ("gpt3-175b", "dgx-a100", "1024", ["--tp", "8", "--pp", "8", "--global-batch", "1536", "--zero", "1",
                                       "--recompute", "selective", "--sequence-parallel"]),
    ("gpt3-175b", "dgx-h100", "512", ["--tp", "8", "--pp", "16", "--global-batch", "512", "--schedule",
                                      "interleaved:2", "--recompute", "full"]),
    ("gpt3-175b", "dgx-a100-40g", "256", ["--tp", "4", "--pp", "8", "--global-batch", "64", "--schedule", "gpipe",
                                          "--zero", "3", "--no-flash-attention"]),
    ("gpt-1.7b", "pcie-25gbe", "64", ["--zero", "2", "--micro-batch", "4", "--global-batch", "512",
                                      "--precision", "fp32"]),
    ("gpt-18b", "dgx-a100", "64", ["--tp", "8", "--schedule", "zb", "--pp", "2", "--global-batch", "64",
                                   "--cp", "2", "--zero", "fsdp"]),
    # GQA (8 KV heads), and a head size other than hidden / heads
    ("llama3-70b", "dgx-h100", "256", ["--tp", "8", "--pp", "4", "--global-batch", "256", "--sequence-parallel"]),
    ("llama3-8b", "hgx-h200", "16", ["--tp", "2", "--recompute", "selective", "--precision", "fp8"]),
    ("llama3-8b", "dgx-h100", "16", ["--tp", "2", "--set", "model.head_dim=192"]),
    ("llama2-13b", "dgx-a100-40g", "32", ["--tp", "4", "--pp", "2", "--global-batch", "128", "--micro-batch", "2"]),
    # MoE with expert parallelism
    ("mixtral-8x7b", "dgx-h100", "64", ["--tp", "2", "--pp", "4", "--ep", "8", "--global-batch", "256"]),
    ("deepseek-v3", "dgx-h100", "2048", ["--tp", "8", "--ep", "64", "--zero", "1",
                                         "--global-batch", "4096", "--recompute", "full"]),
    # generic (data-parallel only) models
    ("resnet50", "pcie-25gbe", "64", ["--micro-batch", "64"]),
    ("vgg16", "dgx-a100", "8", ["--micro-batch", "32", "--zero", "1", "--recompute", "full", "--precision", "fp32"]),
    ("bert-large", "mi300x-8", "8", ["--micro-batch", "8", "--global-batch", "256"]),
]


def _json(cli, *args: str) -> dict:
    r = cli(*args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.parametrize(("model", "cluster", "gpus", "flags"), GRID)
def test_memory_and_predict_report_the_same_bytes_and_verdict(cli, model, cluster, gpus, flags):
    base = ["--model", model, "--cluster", cluster, "--gpus", gpus, *flags]
    mem = _json(cli, "memory", *base)
    pred = _json(cli, "predict", *base)
    assert mem["per_gpu_bytes"]["total"] == pytest.approx(pred["memory"]["per_gpu_bytes"], rel=1e-12)
    for part, value in pred["memory"]["parts_bytes"].items():
        assert mem["per_gpu_bytes"][part] == pytest.approx(value, rel=1e-12, abs=1e-6)
    assert mem["fits"] is pred["memory"]["fits"]
    assert mem["capacity_bytes"] == pred["memory"]["capacity_bytes"]


def test_the_grid_has_both_verdicts(cli):
    """The agreement above is tested on strategies that fit and on strategies that do not."""
    verdicts = {_json(cli, "memory", "--model", m, "--cluster", c, "--gpus", g, *f)["fits"] for m, c, g, f in GRID}
    assert verdicts == {True, False}


def test_predict_honours_head_dim(cli):
    """A head size other than hidden / heads changes the attention weights: 4096 hidden, 32 heads of
    192 (not 128), 8 KV heads: q and o grow by 2 x 4096 x 32 x 64, k and v by 2 x 4096 x 8 x 64 per layer."""
    base = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8"]
    plain = _json(cli, "predict", *base)["memory"]["parts_bytes"]["weights"]
    wide = _json(cli, "predict", *base, "--set", "model.head_dim=192")["memory"]["parts_bytes"]["weights"]
    extra_params = 32 * (2 * 4096 * 32 * 64 + 2 * 4096 * 8 * 64)  # 32 layers
    assert wide - plain == pytest.approx(2.0 * extra_params, rel=1e-9)  # bf16 weights, 2 bytes each


def test_default_microbatches_follow_the_global_batch(cli):
    """Without --global-batch, B = dp x b: one micro-batch per step, so one in flight on the first stage."""
    # GPT-3's shape without its learned position table: with the table (2048 x 12288, whole on every TP rank) the
    # first stage holds the peak at m = 1 too (tests/test_position_encoding.py)
    nopos = ("--set", "model.position_embeddings=0")
    doc = _json(cli, "memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8",
                "--pp", "8", *nopos)
    assert doc["num_microbatches"] == 1
    # 1F1B keeps min(m, pp) micro-batches in flight on the first stage (Narayanan et al. 2021 §2.2):
    # m = 1536 / 16 = 96 holds 8, m = 1 holds 1; no recompute working set. With m = 1 every stage holds one and the
    # last stage (the same 12 layers, its own output weight as the first stage's table, and the fp32 logits
    # 4 s V / t = 4 x 2048 x 51200 / 8 and the final norm's and output layer's inputs 4 s h = 4 x 2048 x 12288, no
    # sequence parallelism, instead of the embedding dropout mask s h = 2048 x 12288) has the peak.
    assert doc["peak_stage"] == {"rank": 7, "role": "last"}
    first_one = doc["per_gpu_bytes"]["activations"] - 4 * 2048 * 51200 / 8 - 4 * 2048 * 12288 + 2048 * 12288
    big = _json(cli, "memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8",
                "--pp", "8", "--global-batch", "1536", *nopos)
    assert big["num_microbatches"] == 96 and big["peak_stage"] == {"rank": 0, "role": "first"}
    assert big["per_gpu_bytes"]["activations"] == pytest.approx(8 * first_one, rel=1e-12)


@pytest.mark.parametrize("extra", [[], ["--global-batch", "1536", "--recompute", "selective", "--sequence-parallel"],
                                   ["--global-batch", "256", "--zero", "1"]])
def test_largest_micro_batch_is_where_predict_stops_fitting(cli, extra):
    base = ["--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8", *extra]
    bmax = _json(cli, "memory", *base)["max_micro_batch"]
    assert bmax >= 1
    assert _json(cli, "predict", *base, "--micro-batch", str(bmax))["memory"]["fits"]
    if extra:  # the next micro-batch that divides the per-replica batch B / dp
        per_replica = int(extra[1]) // 16
        bigger = [b for b in range(bmax + 1, per_replica + 1) if per_replica % b == 0]
        if bigger:
            assert not _json(cli, "predict", *base, "--micro-batch", str(bigger[0]))["memory"]["fits"]
    else:
        assert not _json(cli, "predict", *base, "--micro-batch", str(bmax + 1))["memory"]["fits"]


@pytest.mark.parametrize("sync", ["asp", "ssp:4", "local:8"])
@pytest.mark.parametrize("zero", ["1", "2", "3", "fsdp", "hsdp"])
def test_memory_refuses_a_replica_sync_mode_with_sharded_states_as_predict_does(cli, sync, zero):
    """asp, ssp:S and local:H step each rank on its own full replica, which ZeRO 1-3/FSDP/HSDP do not keep:
    predict flags the strategy infeasible (code 15, sync_needs_replicas); memory must not call it a fit."""
    base = ["--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "64", "--sync", sync, "--zero", zero]
    pred = _json(cli, "predict", *base)
    mem = _json(cli, "memory", *base)
    assert pred["feasible"] is False and "zero 0" in pred["infeasible_reason"]
    assert mem["feasible"] is False
    assert mem["infeasible_reason"] == pred["infeasible_reason"]
    text = cli("memory", *base)
    assert text.code == 0
    assert "infeasible: asp, ssp:S and local:H" in " ".join(text.out.split())
    assert "fits;" not in text.out


@pytest.mark.parametrize(("model", "cluster", "gpus", "flags"), GRID)
def test_memory_and_predict_give_the_same_feasibility(cli, model, cluster, gpus, flags):
    base = ["--model", model, "--cluster", cluster, "--gpus", gpus, *flags]
    mem = _json(cli, "memory", *base)
    pred = _json(cli, "predict", *base)
    assert (mem["feasible"], mem["infeasible_reason"]) == (pred["feasible"], pred["infeasible_reason"])


def test_memory_with_a_replica_sync_mode_at_zero_0_stays_feasible(cli):
    base = ["--model", "gpt-1.7b", "--cluster", "dgx-a100", "--gpus", "64", "--sync", "asp"]
    mem = _json(cli, "memory", *base)
    assert mem["feasible"] is True and mem["infeasible_reason"] is None and mem["fits"] is True
