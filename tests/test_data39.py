"""data39: the NeMo Megatron launcher README's GPT-3 scaling tables (sources nemolaunch22, nemolaunch2206).

NVIDIA/NeMo-Megatron-Launcher README.md section 7.1.2 printed aggregate "Tokens per Second" per node count on DGX A100
80GB: the 22.08 tables (5B set at a2b2f83a, 175B at 1f1e6be5) and, before them, the 22.05 5B table (b20f85d4) and the
22.06 175B table (d4317ddd). These tests check every recorded row against the printed figure (aggregate / GPUs), the
layout against the config of the cell's commit (DP x TP x PP = GPUs, DP x MBS x GA = the config's global batch), and
that each row carries the data-parallel overlap NeMo's training_step of its release gives (validation/README.md
"NeMo Megatron launcher GPT-3 tables (data39)"). No prediction is run here: test_validation.py prices every row.
"""

from __future__ import annotations

from pathlib import Path

from conftest import load_yaml

NEW_CASES = Path(__file__).resolve().parents[1] / "validation" / "training_cases.yaml"

# README 7.1.2, "Tokens per Second": nodes -> aggregate tokens/s
PRINTED = {
    "nemolaunch22_a100_gpt3_5b": {1: 40345, 2: 79815, 4: 161754, 8: 312774, 16: 659481, 32: 1159288},
    "nemolaunch22_a100_gpt3_175b": {8: 7500, 16: 14950, 32: 29537, 64: 58211, 128: 109684},
    "nemolaunch2206_a100_gpt3_5b": {1: 39543, 2: 79128, 5: 195047, 9: 344523, 10: 383500, 18: 670254, 20: 731791},
    "nemolaunch2206_a100_gpt3_175b": {16: 20642, 32: 38025, 128: 141306},
}
# conf/training/gpt3/{5b,175b}.yaml at the cell's commit: (tp, pp, micro-batch, global batch, optimizer)
CONFIG = {
    "nemolaunch22_a100_gpt3_5b": (1, 1, 2, 2048, "distributed_fused_adam"),
    "nemolaunch22_a100_gpt3_175b": (8, 8, 2, 2048, "distributed_fused_adam"),
    "nemolaunch2206_a100_gpt3_5b": (2, 1, 2, 1440, "fused_adam"),
    "nemolaunch2206_a100_gpt3_175b": (8, 8, 2, 1536, "fused_adam"),
}
SHAPE = {"5b": (24, 4096, 32), "175b": (96, 12288, 96)}  # layers, hidden, heads


def _rows() -> list[dict]:
    return [c for c in load_yaml(NEW_CASES) if c["id"].startswith("nemolaunch")]


def test_every_printed_cell_is_one_row() -> None:
    ids = sorted(c["id"] for c in _rows())
    want = sorted(f"{k}_{8 * n}" for k, cells in PRINTED.items() for n in cells)
    assert ids == want and len(ids) == 21


def test_rows_against_the_printed_figures_and_configs() -> None:
    rows = _rows()
    assert len(rows) == 21  # the printed cells; an empty loop would check nothing
    for c in rows:
        key, gpus = c["id"].rsplit("_", 1)
        nodes = int(gpus) // 8
        par, model = c["parallelism"], c["model"]
        tp, pp, mbs, gbs, optim = CONFIG[key]
        assert par["gpus"] == int(gpus) == nodes * 8
        # tokens/s/GPU is the printed aggregate over the GPUs, to the two decimals recorded
        assert abs(c["measured"]["tokens_per_s_per_gpu"] - PRINTED[key][nodes] / int(gpus)) < 0.006
        assert (par["tp"], par["pp"], par["microbatch"], par["global_batch_seqs"]) == (tp, pp, mbs, gbs)
        assert par["dp"] * tp * pp == int(gpus)
        assert par["dp"] * mbs * par["grad_accum"] == gbs
        assert abs(c["derived_step_time_s"] - gbs * 2048 / PRINTED[key][nodes]) < 0.001
        size = key.rsplit("_", 1)[1]
        assert (model["layers"], model["hidden"], model["heads"]) == SHAPE[size]
        assert model["ffn_hidden"] == 4 * model["hidden"] and model["seq_len"] == 2048 and model["vocab"] == 50257
        assert par["sequence_parallel"] is (size == "175b")
        fw = c.get("framework", {})
        if optim == "distributed_fused_adam":
            assert str(par["zero_stage"]).startswith("1") and fw["optim_name"] == optim and fw["bucket_cap_mb"] == 100
        else:
            assert str(par["zero_stage"]).startswith("0") and "optim_name" not in fw


def test_data_parallel_overlap_follows_each_release_training_step() -> None:
    """NeMo v1.11.0 (22.08): overlap_grad_sync off with pp > 1 or sequence parallelism, on otherwise; v1.9.0 (22.05):
    the O2 all-reduce after the backward at any pp; v1.10.0 (22.06): after the pipeline with pp > 1."""
    rows = _rows()
    assert len(rows) == 21  # the printed cells; an empty loop would check nothing
    for c in rows:
        fw, par = c.get("framework", {}), c["parallelism"]
        overlapped = fw.get("dp_overlap", True)
        if c["id"].startswith("nemolaunch22_"):
            assert overlapped is not (par["pp"] > 1 or par["sequence_parallel"])
        else:
            assert overlapped is False
