"""data39b: BigScience's 176B topology benchmarks (source bloomprq22).

bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md (read at 9e64ede), section "Rebalancing
layers" (written 2022-02-28): per shape (NHIDDEN / NLAYERS), rows of DP, TP, PP, MBS, NHEADS, GBS 2048, Sec/it and
TFLOPs on 48 Jean Zay nodes of 8 A100 80GB. These tests check every recorded row against the printed row, the layout
arithmetic (DP x TP x PP = 384, GA = GBS / (DP x MBS)), the stage split the section's partition method gives, and that
the printed TFLOPs follow from the printed Sec/it by Megatron-DeepSpeed's hardware count (recompute factor 4), which
fixes the GPU count, batch, vocabulary and recompute independently of the model (validation/README.md "BLOOM's
topology benchmarks (data39b)"). No prediction is run here: test_validation.py prices every row.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import load_yaml

NEW_CASES = Path(__file__).resolve().parents[1] / "validation" / "training_cases.yaml"

# The section's rows with a Sec/it, as printed: (NHIDDEN, NLAYERS, DP, TP, PP, MBS, NHEADS, Sec/it, TFLOPs)
PRINTED = [
    (12288, 106, 8, 4, 12, 2, 64, 116.54, 149.75),
    (12288, 106, 8, 4, 12, 2, 96, 118.79, 146.90),
    (12288, 106, 8, 4, 12, 2, 128, 121.42, 143.73),
    (12288, 106, 8, 4, 12, 4, 96, 120.34, 145.01),
    (12288, 100, 8, 8, 6, 2, 64, 139.72, 117.91),
    (12288, 100, 8, 8, 6, 4, 64, 120.96, 136.20),
    (13312, 82, 4, 8, 12, 4, 64, 111.79, 141.76),
    (13312, 82, 8, 4, 12, 2, 64, 104.45, 151.71),
    (13312, 82, 8, 4, 12, 2, 104, 123.71, 128.10),
    (13312, 82, 8, 4, 12, 2, 128, 108.78, 145.68),
    (13312, 82, 8, 4, 12, 4, 64, 104.82, 151.18),
    (13312, 94, 8, 4, 12, 2, 128, 124.10, 146.12),
    (14336, 70, 4, 8, 12, 2, 64, 121.63, 128.92),
    (14336, 70, 8, 4, 12, 2, 64, 102.03, 153.68),
    (14336, 70, 8, 4, 12, 2, 112, 104.50, 150.05),
    (14336, 70, 8, 4, 12, 2, 128, 105.89, 148.08),
    (14336, 70, 8, 4, 12, 4, 64, 102.27, 153.33),
]
GPUS, GBS, SEQ, VOCAB = 48 * 8, 2048, 2048, 250680


def _rows() -> list[dict]:
    return [c for c in load_yaml(NEW_CASES) if c["id"].startswith("bloomprq22_")]


def _key(c: dict) -> tuple:
    m, p = c["model"], c["parallelism"]
    return (m["hidden"], m["layers"], p["dp"], p["tp"], p["pp"], p["microbatch"], m["heads"])


def test_every_printed_row_is_one_case() -> None:
    assert sorted(_key(c) for c in _rows()) == sorted(r[:7] for r in PRINTED)


def test_rows_against_the_printed_table() -> None:
    printed = {r[:7]: r[7:] for r in PRINTED}
    rows = _rows()
    assert len(rows) == 17  # the printed cells; an empty loop would check nothing
    for c in rows:
        sec, tflops = printed[_key(c)]
        m, p, meas = c["model"], c["parallelism"], c["measured"]
        assert meas["iteration_time_s"] == sec and meas["tflops_per_gpu"] == tflops
        assert str(meas["tflops_convention"]).startswith("hardware")
        assert p["gpus"] == GPUS == p["dp"] * p["tp"] * p["pp"]
        assert p["global_batch_seqs"] == GBS == p["dp"] * p["microbatch"] * p["grad_accum"]
        assert m["ffn_hidden"] == 4 * m["hidden"] and m["seq_len"] == SEQ and m["vocab"] == VOCAB
        assert m["type"] == "bloom" and m["tied_embeddings"] is True and c["precision"] == "bf16"
        assert str(p["recompute"]).startswith("full") and str(p["grad_reduce"]).startswith("fp32")


def test_printed_tflops_follow_from_the_printed_time() -> None:
    """Megatron-DeepSpeed's count (bigscience math/README.md, 4*2 coefficient: recompute counted):
    96 B s l h^2 (1 + s/6h + V/16lh) / (Sec/it x GPUs), at B = 2048, s = 2048, V = 250,680, 384 GPUs."""
    for h, lay, _dp, _tp, _pp, _mbs, _nh, sec, tflops in PRINTED:
        flops = 96 * GBS * SEQ * lay * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * lay * h))
        assert abs(flops / (sec * GPUS) / 1e12 - tflops) < 0.015
    # a 3-pass count (no recompute) or 8-GPU-fewer cluster would not reproduce them
    h, lay, sec, tflops = 14336, 70, 102.03, 153.68
    three_pass = 72 * GBS * SEQ * lay * h * h * (1 + SEQ / (6 * h) + VOCAB / (16 * lay * h)) / (sec * GPUS) / 1e12
    assert abs(three_pass - tflops) > 30


def test_stage_split_follows_the_partition_method() -> None:
    """--pp-partition-method 'type:transformer|embedding': each embedding counts as one layer, (layers + 2) / PP per
    stage, so the first and last stages hold one block fewer."""
    rows = _rows()
    assert len(rows) == 17  # the printed cells; an empty loop would check nothing
    for c in rows:
        lay, pp = c["model"]["layers"], c["parallelism"]["pp"]
        per = (lay + 2) // pp
        assert per * pp == lay + 2
        groups = re.findall(r"\[([^\]]*)\]", c["parallelism"]["pipeline_layout"])
        assert groups[0] == f"embed | {per - 1} blocks" and groups[-1] == f"{per - 1} blocks | embed"


def test_bloom_ramp_row_against_its_log_line() -> None:
    """tr11-176B-ml/README.md (2699e8c): 'iteration 3707 | consumed samples 59312 | elapsed time per iteration (s)
    15.23 | global batch size 16 | TFLOPs 8.04', the run's TP 4, PP 12, MBS 2 on 48 nodes: one micro-batch a
    pipeline."""
    (c,) = [c for c in load_yaml(NEW_CASES) if c["id"] == "bloom_176b_384_gbs16"]
    p, m, meas = c["parallelism"], c["model"], c["measured"]
    assert (p["tp"], p["pp"], p["dp"], p["microbatch"], p["global_batch_seqs"]) == (4, 12, 8, 2, 16)
    assert p["dp"] * p["microbatch"] * p["grad_accum"] == 16 and p["grad_accum"] == 1 and 16 * 3707 == 59312
    assert meas["iteration_time_s"] == 15.23 and meas["tflops_per_gpu"] == 8.04
    h, lay = m["hidden"], m["layers"]
    flops = 96 * 16 * SEQ * lay * h * h * (1 + SEQ / (6 * h) + m["vocab"] / (16 * lay * h))
    assert abs(flops / (15.23 * GPUS) / 1e12 - 8.04) < 0.005
