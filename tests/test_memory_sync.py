"""`scalemodel memory --sync`: hier:G shards ZeRO's states over the G replicas of a group, so memory reads sync."""

from __future__ import annotations

import json

import pytest

BASE = ("memory", "--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "1024", "--tp", "8", "--pp", "8",
        "--zero", "1", "--json")  # dp = 1024 / 64 = 16


def _doc(cli, *extra):
    r = cli(*BASE, *extra)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_memory_sync_shards_optimizer_over_the_hier_group(cli):
    # GPT-3's shape without its learned position table (2048 x 12288, whole on every TP rank of the first stage),
    # which makes the first stage the peak under hier:4 and the last under bsp: one stage's parameters for both here
    nopos = ("--set", "model.position_embeddings=0")
    bsp, hier = _doc(cli, *nopos), _doc(cli, "--sync", "hier:4", *nopos)
    assert bsp["inputs"]["sync"] == "bsp" and hier["inputs"]["sync"] == "hier:4"
    assert bsp["peak_stage"] == hier["peak_stage"]
    params = bsp["params_per_gpu"]
    # ZeRO-1: 12 B/param of Adam state (fp32 master, m, v) sharded over dp = 16 replicas, or over a group of 4
    assert bsp["per_gpu_bytes"]["optimizer"] == pytest.approx(params * 12 / 16, rel=1e-12)
    assert hier["per_gpu_bytes"]["optimizer"] == pytest.approx(params * 12 / 4, rel=1e-12)
    assert hier["per_gpu_bytes"]["weights"] == bsp["per_gpu_bytes"]["weights"]


def test_memory_sync_flag_equals_set(cli):
    assert _doc(cli, "--sync", "hier:4")["per_gpu_bytes"] == _doc(cli, "--set", "strategy.sync=hier:4")["per_gpu_bytes"]


@pytest.mark.parametrize("sync", ["hier:5", "sometimes"])
def test_memory_bad_sync_exits_2(cli, sync):
    r = cli(*BASE, "--sync", sync)
    assert r.code == 2 and r.err.startswith("error: ") and "Traceback" not in r.err
    assert r.err.count("\n") == 1
