"""nanotron37: each nanotron25 row's entry against the run it names, and the in-job intra-node test's two bands.

The Ultra-Scale Playbook's benchmark table (hf.co/datasets/nanotron/ultrascale-playbook-data, read as the copy in
eyao600/Rapid-LLM@24ef24c6 ``validation_scripts/huggingface_data/bench_final2_mfu2.csv``) names every run by the
scaling script's layout fields (huggingface/nanotron@e24d2483 scripts/scaling_benchmarks.py ``create_config``:
``{N}_dp{dp}_tp{tp}_pp{pp}_acc{batch_accum}_mbs{micro_batch_size}_seq{seq_len}_zero{zero_stage}_tpmode{tp_mode[:3]}
_vocab{vocab_size//1000}k`` and ``_gqa{kv}`` when the KV heads are set). Each row quotes its run's name in its model
note; the tests read the layout back from that name, as the script wrote it, and compare it with the fields the model
prices (validation/README.md, nanotron rows, "nanotron37").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

CASES = Path(__file__).resolve().parents[1] / "validation" / "training_cases.yaml"
RUN_NAME = re.compile(
    r"(?P<n>\d+(?:\.\d+)?)G_dp(?P<dp>\d+)_tp(?P<tp>\d+)_pp(?P<pp>\d+)_acc(?P<acc>\d+)_mbs(?P<mbs>\d+)"
    r"_seq(?P<seq>\d+)_zero(?P<zero>\d)_tpmode(?P<mode>[A-Z]{3})_vocab(?P<vocab>\d+)k(?:_gqa(?P<gqa>\d+))?")


def nanotron_rows() -> list[dict]:
    if not CASES.exists():
        pytest.skip("validation/training_cases.yaml not present")
    return [c for c in yaml.safe_load(CASES.read_text()) if c["id"].startswith("nanotron25_")]


def test_every_row_prices_the_layout_its_run_name_states() -> None:
    """dp, tp, pp, gradient accumulation, micro-batch, sequence, ZeRO stage, vocabulary (thousands, floored) and KV
    heads of each row equal its run name's; tp_mode REDUCE_SCATTER (``RED``) everywhere, the sequence-parallel mode
    the validator prices at tp > 1. 80B at 4 nodes is job 14097158, dp 1 x tp 8 x pp 4, 256 micro-batches of 1, ZeRO
    0: the entry is the run, so its +192 % is not a transcription error."""
    rows = nanotron_rows()
    assert len(rows) == 26
    for c in rows:
        names = set(RUN_NAME.findall(yaml.safe_dump(c["model"], width=10_000)))
        assert len(names) == 1, c["id"]
        m = RUN_NAME.search(yaml.safe_dump(c["model"], width=10_000))
        assert m is not None
        par, mod = c["parallelism"], c["model"]
        assert (par["dp"], par["tp"], par["pp"]) == (int(m["dp"]), int(m["tp"]), int(m["pp"])), c["id"]
        assert (par["grad_accum"], par["microbatch"]) == (int(m["acc"]), int(m["mbs"])), c["id"]
        assert par["zero_stage"] == int(m["zero"]) and mod["seq_len"] == int(m["seq"]) == 4096, c["id"]
        assert mod["vocab"] // 1000 == int(m["vocab"]) and m["mode"] == "RED", c["id"]
        assert mod["kv_heads"] == (int(m["gqa"]) if m["gqa"] else mod["heads"]), c["id"]
    n4 = next(c for c in rows if c["id"] == "nanotron25_h100_80b_n4")
    p = n4["parallelism"]
    assert (p["dp"], p["tp"], p["pp"], p["grad_accum"], p["microbatch"], p["zero_stage"]) == (1, 8, 4, 256, 1, 0)
    assert "14097158" in yaml.safe_dump(n4)


def test_80b_n4_time_per_layer_and_micro_batch_by_hand() -> None:
    """The figure validation/README.md compares across the table: step = 256 x 4096 tokens / (285.01 tokens/s/GPU x
    32 GPUs) = 114.97 s; 1F1B on 4 stages runs 256 + 4 - 1 = 259 micro-batch slots, each of 80 / 4 = 20 layers:
    114.97 / 259 / 20 = 22.2 ms a layer and micro-batch."""
    n4 = next(c for c in nanotron_rows() if c["id"] == "nanotron25_h100_80b_n4")
    tok = n4["measured"]["tokens_per_s_per_gpu"]
    assert tok == pytest.approx(285.01)
    step = 256 * 4096 / (tok * 32)
    assert step == pytest.approx(114.97, abs=0.01)
    assert step / 259 / 20 == pytest.approx(0.0222, abs=1e-4)


def test_in_job_intra_node_test_has_two_bands() -> None:
    """Each row's job ran nanotron's ``measure_bandwidth`` (nouamane/bench2 67c5ebb6 trainer.py), whose intra-node
    figure is 10 all-reduces of 1 GiB fp32 over the node's 8 GPUs (``local_pg``). The 26 rows read either 414-428 or
    456-460 GB/s, nothing between; the compared rows at tp > 1 in the low band are exactly 80B at 4 nodes (tp 8) and
    the GQA-8 80B at 8 nodes (tp 4), the two rows validation/README.md ties to the table's slow-band per-layer floor
    (nanotron37). Two rows are listed for their world test (test_validation's degraded-fabric rule) and left out."""
    rows = nanotron_rows()
    listed = {"nanotron25_h100_1b_n64", "nanotron25_h100_80b_n32"}
    intra = {}
    for c in rows:
        m = re.search(r"intra-node all-reduce ([\d.]+)", c["hardware"]["in_job_test"])
        assert m is not None, c["id"]
        intra[c["id"]] = float(m.group(1))
    low = {i for i, v in intra.items() if v < 440}
    assert all(414 <= v <= 428 for i, v in intra.items() if i in low)
    assert all(456 <= v <= 460 for i, v in intra.items() if i not in low)
    tp_gt1_low = {c["id"] for c in rows if c["id"] in low and c["parallelism"]["tp"] > 1 and c["id"] not in listed}
    assert tp_gt1_low == {"nanotron25_h100_80b_n4", "nanotron25_h100_80b_gqa8_n8"}
