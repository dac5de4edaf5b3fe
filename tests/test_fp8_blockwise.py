"""Transformer Engine's Float8BlockScaling ('blockwise', DeepSeek-V3's 1x128 / 128x128 tiles) priced by hand
(docs/model.md#fp8-blockwise): one quantize kernel per tensor that reads it once and writes the row-wise and, on
Hopper, the transposed copy with one fp32 scale per tile; no amax history, no amax reduction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import script_module, training_cases

from scalemodel.cost import compute, memory
from scalemodel.engine import step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec

DENSE: dict[str, Any] = dict(name="d", layers=4, hidden=64, heads=4, ffn_hidden=128, gated_mlp=True, vocab=128,
                             seq_len=256, tied_embeddings=False, biases=False)


def _job(recipe: str | None, cluster: str = "dgx-h100", **strategy: Any) -> tuple[Any, Any]:
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="fp8", seq_len=256, fp8_recipe=recipe)
    job = build_job(load_cluster(cluster), TransformerWorkload(**DENSE), tr, straggler_cv=0.0)
    return job, grid_from_strategy(StrategySpec(**strategy), tr, 8, job)


def test_dense_layer_cast_bytes_by_hand() -> None:
    """h 64, f 128 gated, 4 heads (MHA), T = 256 tokens, tp 1, Hopper (transposed copy), eb 2. An activation or
    gradient element costs 2 + 2 (1 + 4/128) = 4.0625 bytes, a weight element 2 + 2 (1 + 4/16384) bytes.
    X: QKV 256 x 64, proj 256 x 64, FC1 256 x 64, FC2 256 x 128 = 81920; dY: QKV 256 x 192, proj 256 x 64,
    FC1 256 x 256, FC2 256 x 64 = 147456; W: 64 x 192 + 64 x 64 + 64 x 256 + 128 x 64 = 40960."""
    job, _ = _job("blockwise")
    f, b, w = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=256, recipe="blockwise")
    act = 2.0 + 2.0 * (1.0 + 4.0 / 128.0)
    wt = 2.0 + 2.0 * (1.0 + 4.0 / 128.0 ** 2)
    assert float(np.ravel(f)[0]) == pytest.approx(81920 * act, rel=1e-12)
    assert float(np.ravel(b)[0]) == pytest.approx(147456 * act, rel=1e-12)
    assert float(np.ravel(w)[0]) == pytest.approx(40960 * wt, rel=1e-12)
    # without the transposed copy: one copy each
    f1, _, w1 = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=256, recipe="blockwise",
                                           transpose_copy=False)
    assert float(np.ravel(f1)[0]) == pytest.approx(81920 * (3.0 + 4.0 / 128.0), rel=1e-12)
    assert float(np.ravel(w1)[0]) == pytest.approx(40960 * (3.0 + 4.0 / 128.0 ** 2), rel=1e-12)


def test_sequence_parallel_gather_by_hand() -> None:
    """tp 2 with SP: a gathered tensor (QKV / FC1 input X, proj / FC2 dY) is quantized on its local half, both copies,
    and its column-wise data de-interleaved after the gather (read 1 + write 1 a gathered element). X local: QKV and
    FC1 inputs 128 x 64 each, proj 256 x 32, FC2 256 x 64; gathered 2 x 256 x 64 = 32768 elements."""
    job, _ = _job("blockwise")
    f, _, _ = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=256, recipe="blockwise", tp=2,
                                         sequence_parallel=True)
    act = 2.0 + 2.0 * (1.0 + 4.0 / 128.0)
    local = 128 * 64 * 2 + 256 * 32 + 256 * 64
    assert float(np.ravel(f)[0]) == pytest.approx(local * act + 2.0 * 32768, rel=1e-12)


def test_gemm_factor_from_the_guide() -> None:
    """TE's GEMM profiling guide, H200 NVL (docs/examples/gemm_profiling/gemm_profiling.rst at
    NVIDIA/TransformerEngine@d0067d0da6): FP8Block autocast 22.882 ms a layer less its casts, x (M x K, both copies,
    4.0625 bytes) and the weight (K x N, row-wise, 3 + 4/128^2) over the 12 shapes at 4.8 TB/s x 0.849, against the
    current-scaling pre-quantized 16.785 ms. The factor scales the fp8 curve of a blockwise job on Hopper only."""
    m, h, ff, nq = 15872, 4096, 16384, 12288
    fprop = [(m, h, nq), (m, h, h), (m, h, ff), (m, ff, h)]
    shapes = fprop + [(a, n, k) for a, k, n in fprop] + [(k, a, n) for a, k, n in fprop]
    x = sum(a * k for a, k, _ in shapes)
    w = sum(k * n for _, k, n in shapes)
    cast_ms = (x * (2 + 2 * (1 + 4 / 128)) + w * (3 + 4 / 128 ** 2)) / (4.8e12 * 0.849) * 1e3
    assert cast_ms == pytest.approx(2.218, abs=5e-4)
    assert 16.785 / (22.882 - cast_ms) == pytest.approx(0.812, abs=5e-4)
    assert compute.fp8_recipe_gemm_factor("hopper", "blockwise") == 0.812
    assert compute.fp8_recipe_gemm_factor("hopper", "delayed") == 1.0
    blk, _ = _job("blockwise")
    dly, _ = _job("delayed")
    assert blk.gemm_max == pytest.approx(dly.gemm_max * 0.812, rel=1e-12)
    assert blk.fp8_recipe_gemm_factor == 0.812


def test_param_quantize_saved_input_and_expert_kernels() -> None:
    """fp8_param_gather: master cast 4 + eb, tile amax read eb, cast read eb write 1 = 11 bytes; the saved
    column-wise copy 1 + 4/128; one quantize kernel per local expert beyond the first (E 8 / ep 2: 2 x 3 each way)."""
    assert compute.fp8_param_quantize_bytes("blockwise") == 11.0
    assert memory.quantized_input_bytes("blockwise") == 1.03125
    job, _ = _job("blockwise")
    wl = TransformerWorkload(**DENSE, moe={"experts": 8, "top_k": 2, "ffn_hidden": 32})
    mjob = build_job(load_cluster("dgx-h100"), wl, TrainingSpec(global_batch=32, precision="fp8", seq_len=256,
                                                                fp8_recipe="blockwise"), straggler_cv=0.0)
    kf, kb = compute.fp8_expert_quantize_kernels("blockwise", mjob.shape, ep=2)
    assert float(np.ravel(kf)[0]) == 6.0 and float(np.ravel(kb)[0]) == 6.0


def test_no_amax_reduction() -> None:
    """tp 1, dp 8: the delayed recipe's only tp_comm is its amax reductions; blockwise has none."""
    job, g = _job("delayed", tp=1, dp=8)
    assert float(np.ravel(step.evaluate(job, g).breakdown["tp_comm"])[0]) > 0.0
    job, g = _job("blockwise", tp=1, dp=8)
    assert float(np.ravel(step.evaluate(job, g).breakdown["tp_comm"])[0]) == 0.0


def test_hopper_only() -> None:
    with pytest.raises(InputError, match="Hopper"):
        _job("blockwise", cluster="dgx-b200")
    with pytest.raises(InputError, match="Hopper"):
        _job("blockwise", cluster="dgx-a100")


def test_megatron_reader_takes_blockwise(tmp_path: Any) -> None:
    f = tmp_path / "a.args"
    f.write_text("--fp8-format e4m3 --fp8-recipe blockwise\n")
    out = read_strategy_file(f)
    assert out.training == {"precision": "fp8", "fp8_recipe": "blockwise"}
    assert not any("fp8-recipe" in u for u in out.unused)


def test_validator_reads_the_blockwise_rows() -> None:
    """The three H100 fp8blk rows name Megatron-LM's --fp8-recipe blockwise (or the report's 'FP8-Blockwise') in
    their precision text; the compared one is priced with the recipe, not Megatron-Core's default delayed."""
    cases = training_cases()
    vt = script_module("validate_training")
    for cid in ("mcrec26_h100_qwen3_30b_fp8blk", "mcrec26_h100_dsv3_mtp_fp8blk", "mcore26_h100_dsv3_mtp_fp8blk"):
        assert vt.parse_fp8_recipe(str(cases[cid]["precision"])) == "blockwise", cid
    assert vt.predict_new_case(cases["mcrec26_h100_qwen3_30b_fp8blk"]).settings["fp8_recipe"] == "blockwise"


def test_cli_refuses_blockwise_off_hopper(cli: Any) -> None:
    """Off Hopper the recipe is one line on stderr and exit 2, naming what the accelerator runs."""
    r = cli("predict", "-c", "dgx-b200", "-m", "llama3-8b", "--gpus", "8", "--precision", "fp8",
            "--set", "training.fp8_recipe=blockwise")
    assert r.code == 2 and r.out == ""
    line, = r.err.strip().splitlines()
    assert line.startswith("error: ") and "blockwise" in line and "b200 is blackwell" in line
    assert line.endswith("delayed, tensorwise, rowwise or rowwise_with_gw_hp on this accelerator (mxfp8 on Blackwell)")
