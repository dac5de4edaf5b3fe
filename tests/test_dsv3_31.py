"""Drop-and-pad MoE dispatch (training.moe_pad_to_capacity; docs/model.md#expert-tile-padding, dsv3_31): every expert
runs exactly its capacity rows (Megatron-LM 7094270c6f moe_utils.py ``topk_softmax_with_capacity`` L585-587, the
routing map the capacity mask; token_dispatcher.py ``preprocess`` L348-367, each expert's count ``capacity x tp x
ep``), so its GEMMs are priced at the capacity in whole 128-row tiles, with none of a dropless count's random
remainder. Checked by hand on a small MoE layer, through the CLI, and on the validator's drop-and-pad rows."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import load_yaml, script_module
from scipy import stats
from test_validation import NEW_CASES, needs_new_cases

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape

#: one small MoE layer (no attention): hidden 1024, 8 experts top-2 of width 512, gated, at EP 2 (4 local experts)
SH = shape(layers=4, hidden=1024, heads=8, kv_heads=8, head_dim=128, vocab=32000, gated_mlp=True, moe_experts=8,
           moe_top_k=2, moe_ffn_hidden=512)
G = dict(peak_flops=989e12, gemm_max=0.68, gemm_half_dim=87.0, memory_bandwidth=3.35e12, memory_efficiency=0.85)


def _layer(pad: bool) -> compute.LayerTime:
    return compute.layer_compute_time(SH, moe=True, attention=False, ep=2, etp=1, micro_batch=1, seq_len=1000,
                                      moe_pad_to_capacity=pad, **G)


def _experts(rows: float) -> float:
    """The 4 local experts' forward GEMMs at ``rows`` rows each: FC1 (gated: 2 x 512 wide) and FC2."""
    return float(compute.gemm_time(rows, 2 * 512.0, 1024.0, 4, **G) + compute.gemm_time(rows, 1024.0, 512.0, 4, **G))


def test_a_drop_and_pad_layer_prices_each_expert_at_its_capacity_in_whole_tiles() -> None:
    """T = 1000 tokens a rank, top-2 of 8: capacity ceil(1000 x 2 / 8 x 1.0) = 250 from each of the 2 EP ranks, 500
    rows an expert, 3.9 tiles: the kernel runs 4 whole tiles, 512 rows, with no spread (every expert is filled to its
    capacity). The router's GEMM and the FLOP count are the tokens'."""
    capacity = math.ceil(1000 * 2 / 8 * 1.0)
    rows = 128.0 * math.ceil(2 * capacity / 128.0)
    assert rows == 512.0
    router = float(compute.gemm_time(1000.0, 8.0, 1024.0, **G))
    lt = _layer(True)
    assert float(lt.forward_gemm) == pytest.approx(router + _experts(rows), rel=1e-12)
    assert float(lt.forward_flops) == pytest.approx(2 * 1000 * 1024 * 8 + 2 * 1000 * 2 * 512 * 1024 * 3, rel=1e-12)


def test_the_dropless_layer_keeps_the_random_remainder() -> None:
    """The same layer dropless: an expert's count is Binomial(2000, 2 / 8), mean 500, sd sqrt(500 x 3/4) = 19.36;
    the kernel runs 128 E[ceil(X / 128)] rows, here summed tile by tile from the normal CDF (not the Fourier form the
    code uses): 512 + 128 P(X > 512) = 512 + 128 x 0.268 = 546.3 rows (the fourth tile always, a fifth when the count
    passes 512, z = 0.62), so the drop-and-pad layer (512 rows) is the faster one, by exactly the experts' GEMMs at
    those row counts."""
    m, sd = 500.0, math.sqrt(500.0 * 0.75)
    j = np.arange(1, 8, dtype=float)
    rows = 128.0 * float(np.sum(j * (stats.norm.cdf(j * 128.0, m, sd) - stats.norm.cdf((j - 1) * 128.0, m, sd))))
    assert rows == pytest.approx(512 + 128 * stats.norm.sf(12 / sd), abs=1e-6)
    assert rows == pytest.approx(546.3, abs=0.1)
    drop, free = _layer(True), _layer(False)
    assert float(drop.forward_gemm - free.forward_gemm) == pytest.approx(_experts(512.0) - _experts(rows), rel=1e-3)
    assert float(drop.forward_flops) == float(free.forward_flops)


def test_a_tile_multiple_capacity_pays_no_half_tile() -> None:
    """At 2048 tokens a rank (capacity 512 from each of 2 ranks: 1024 rows, 8 whole tiles) the drop-and-pad layer's
    experts run 1024 rows; dropless, a tile-multiple mean pays half a tile more, 1088 (docs/model.md's rule)."""
    lt = {pad: compute.layer_compute_time(SH, moe=True, attention=False, ep=2, etp=1, micro_batch=1, seq_len=2048,
                                          moe_pad_to_capacity=pad, **G) for pad in (True, False)}
    router = float(compute.gemm_time(2048.0, 8.0, 1024.0, **G))
    assert float(lt[True].forward_gemm) == pytest.approx(router + _experts(1024.0), rel=1e-12)
    assert float(lt[False].forward_gemm) == pytest.approx(router + _experts(1088.0), rel=1e-6)


def test_the_cli_prices_it_and_says_so_without_moe_layers(cli) -> None:  # type: ignore[no-untyped-def]
    """Through --set: a Mixtral step with drop-and-pad at capacity 1.0 is shorter than the dropless one at the same
    load (the tile remainder gone), and a dense model is warned, not priced."""
    moe = ["predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--ep", "8", "--json",
           "--set", "training.moe_rank_imbalance=1.0"]
    free = json.loads(cli(*moe).out)
    drop = json.loads(cli(*moe, "--set", "training.moe_pad_to_capacity=true").out)
    assert drop["step_time_s"] < free["step_time_s"]
    dense = json.loads(cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--json", "--set",
                           "training.moe_pad_to_capacity=true").out)
    assert "training.moe_pad_to_capacity = true is not priced: the model has no MoE layers" in dense["warnings"]


@needs_new_cases
def test_the_validator_sets_it_for_the_drop_and_pad_rows_only() -> None:
    """The moe_capacity_factor rows (NeMo MegatronTokenDropCallback: capacity 1.0, pad to capacity) carry it; a
    dropless row (Megatron-Bridge 25.11's GB200 DeepSeek-V3, HybridEP) does not."""
    v = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)
             if c["id"] in ("dgxc2505_gb200_dsv3_bf16_128", "mb2511_gb200_dsv3_bf16")}
    drop, free = (v.predict_new_case(cases[i]) for i in ("dgxc2505_gb200_dsv3_bf16_128", "mb2511_gb200_dsv3_bf16"))
    assert drop.training.moe_pad_to_capacity and drop.settings["moe_pad_to_capacity"] is True
    assert not free.training.moe_pad_to_capacity and "moe_pad_to_capacity" not in free.settings
    assert v.rows_with("moe_capacity_factor")["dgxc2505_gb200_dsv3_bf16_128"] == 1.0
