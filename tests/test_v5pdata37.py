"""v5pdata37: the rows of MaxText's v5p table that no case recorded before (validation/README.md#v5pdata37).

AI-Hypercomputer/maxtext at 76bd53b0f (2023-12-15). The numbers below are hand-copied from that commit, not from the
rows: the table ``MaxText/configs/v5p/README.md`` lines 20-58 (hardware cell, TFLOP/sec/chip, MFU) and the run
scripts ``MaxText/configs/v5p/{32b,64b,128b,256b,512b,1024b}.sh`` (line 3: the slice type the script is for; line 32:
per_device_batch_size; line 33: remat_policy, global_parameter_scale; line 34: ici_tensor_parallelism with
ici_fsdp_parallelism=-1; line 35: max_target_length 2048). Model widths are recomputed here from base.yml (emb 2560,
heads 8, mlp 8192, layers 16, head_dim 256, vocab 32768, tied logits) and pyconfig.py's get_individual_scales
(lines 133-152), written out again below from the source, not imported from the rows or scalemodel.
"""

from __future__ import annotations

import math
import re

import pytest
from conftest import load_yaml
from test_validation import NEW_CASES, needs_new_cases

#: README.md @76bd53b0f: id -> (line, slices, v5p-M of one slice, TFLOP/sec/chip, MFU %)
TABLE = {
    "maxtext_v5p_32b_2x128": (24, 2, 128, 319, 69.43),
    "maxtext_v5p_64b_1x128": (29, 1, 128, 323, 70.31),
    "maxtext_v5p_64b_2x128": (30, 2, 128, 309, 67.26),
    "maxtext_v5p_128b_1x256": (35, 1, 256, 315, 68.68),
    "maxtext_v5p_128b_2x256": (36, 2, 256, 305, 66.34),
    "maxtext_v5p_256b_2x1024": (44, 2, 1024, 289, 62.99),
    "maxtext_v5p_512b_2x1024": (50, 2, 1024, 282, 61.45),
    "maxtext_v5p_1024b_1x2048": (55, 1, 2048, 254, 55.35),
    "maxtext_v5p_1024b_2x2048": (56, 2, 2048, 237, 51.55),
}
#: The rows recorded before this round (same table, lines 23, 37, 38, 43, 49, 57, 58).
EARLIER = ("maxtext_v5p_32b_1x128", "maxtext_v5p_128b_1x512", "maxtext_v5p_128b_2x512", "maxtext_v5p_256b_1x1024",
           "maxtext_v5p_512b_1x1024", "maxtext_v5p_1024b_1x4096", "maxtext_v5p_1024b_2x4096")
#: v5p/<size>.sh @76bd53b0f: size -> (slice types named on line 3, per_device_batch_size, remat_policy,
#: global_parameter_scale, ici_tensor_parallelism)
SCRIPTS = {
    "32b": ((128,), 8, "minimal", 32, 4),
    "64b": ((128,), 4, "minimal", 64, 4),
    "128b": ((256, 512), 2, "minimal", 128, 8),
    "256b": ((1024,), 2, "minimal", 256, 8),
    "512b": ((1024,), 2, "full", 512, 16),
    "1024b": ((2048, 4096), 2, "full", 1024, 16),
}
PEAK = 459.0  # Google's v5p page, BF16 TFLOP/s a chip (as the recorded rows)


def _scales(scale: int) -> tuple[int, int, int, int]:
    """pyconfig.get_individual_scales @76bd53b0f: log2 of the scale split 3 ways, heads/mlp first, then emb."""
    log2 = int(math.log2(scale))
    assert 2**log2 == scale
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return base + int(rem > 1), heads, heads, base  # emb, heads, mlp, layers


def _rows() -> dict[str, dict]:
    return {c["id"]: c for c in load_yaml(NEW_CASES) if str(c["id"]).startswith("maxtext_v5p_")}


def _size(cid: str) -> str:
    m = re.match(r"maxtext_v5p_(\d+b)_", cid)
    assert m
    return m.group(1)


@needs_new_cases
def test_every_table_row_is_recorded_once() -> None:
    """The table has 16 rows (2 + 2 + 4 + 2 + 2 + 4); each script's line 3 names its rows' slice type, so the
    selection rule takes all of them and lists none."""
    rows = _rows()
    assert sorted(rows) == sorted((*TABLE, *EARLIER))
    for cid, (_, _, m, _, _) in TABLE.items():
        assert m in SCRIPTS[_size(cid)][0], cid


@needs_new_cases
@pytest.mark.parametrize("cid", sorted(TABLE))
def test_measured_cells_are_the_table_s(cid: str) -> None:
    """TFLOP/sec/chip and MFU as printed; the printed MFU is the printed TFLOP/s over the 459 peak to the TFLOP/s
    cell's rounding (half a TFLOP/s)."""
    _, _, _, tflops, mfu = TABLE[cid]
    meas = _rows()[cid]["measured"]
    assert meas["tflops_per_gpu"] == tflops and meas["mfu_pct"] == mfu
    assert abs(mfu / 100 * PEAK - tflops) <= 0.5
    assert meas["tflops_convention"].startswith("model")


@needs_new_cases
@pytest.mark.parametrize("cid", sorted(TABLE))
def test_layout_is_the_script_s_on_the_row_s_slices(cid: str) -> None:
    """v5p-M is M/2 chips; ici_fsdp -1 takes the slice's chips left after tensor; dcn_data_parallelism -1 is the slice
    count; the global batch is per_device_batch_size x chips (pyconfig.calculate_global_batch_sizes)."""
    line, slices, m, _, _ = TABLE[cid]
    _, pdb, remat, _, tp = SCRIPTS[_size(cid)]
    case = _rows()[cid]
    chips = slices * m // 2
    par, hw = case["parallelism"], case["hardware"]
    assert (hw["chips"], hw["slices"]) == (chips, slices)
    assert (par["gpus"], par["tp"], par["pp"], par["dcn_dp"]) == (chips, tp, 1, slices)
    assert par["fsdp"] == m // 2 // tp and par["dp"] == par["fsdp"] * slices
    assert par["per_device_batch"] == pdb and par["global_batch_seqs"] == pdb * chips
    assert par["recompute"] == f"remat_policy={remat}" and par["attention"] == "flash"
    cluster = "tpu-v5p-multislice" if slices > 1 else "tpu-v5p-pod"
    assert hw["catalog_cluster"].split()[0] == cluster
    assert f"README.md line {line} at 76bd53b0f" in " ".join(case["note"].split())


@needs_new_cases
@pytest.mark.parametrize("cid", sorted(TABLE))
def test_model_is_base_yml_scaled(cid: str) -> None:
    """Widths from base.yml x 2^scales; parameters = L (4 h n d + 2 h f) + V h (tied logits; norms left out),
    e.g. 64B: 64 x (4 x 10240 x 8192 + 2 x 10240 x 32768) + 32768 x 10240 = 64.76e9; 1024B 1031.46e9, written 1031.0
    like the recorded 1024B rows (four significant figures)."""
    emb, heads, mlp, layers = _scales(SCRIPTS[_size(cid)][3])
    h, n, f, n_layers = 2560 * 2**emb, 8 * 2**heads, 8192 * 2**mlp, 16 * 2**layers
    model = _rows()[cid]["model"]
    assert (model["hidden"], model["heads"], model["kv_heads"], model["ffn_hidden"], model["layers"]) == (
        h, n, n, f, n_layers)
    assert (model["head_dim"], model["vocab"], model["seq_len"], model["tied_embeddings"]) == (256, 32768, 2048, True)
    assert (model["activation"], model["gated_mlp"]) == ("relu", False)
    params = n_layers * (4 * h * n * 256 + 2 * h * f) + 32768 * h
    assert model["derived_params_B"] == pytest.approx(params / 1e9, rel=5e-4)  # 4 significant figures, as the 7 earlier
    assert model["block"].startswith("parallel")


def test_scales_match_the_recorded_rows_widths() -> None:
    """The re-written get_individual_scales gives the recorded 32B and 1024B widths (emb 2^2 / 2^3, heads and mlp
    2^2 / 2^4, layers 2^1 / 2^3), so it is the rule the earlier rows were derived with."""
    assert _scales(32) == (2, 2, 2, 1)
    assert _scales(64) == (2, 2, 2, 2)
    assert _scales(1024) == (3, 4, 4, 3)
