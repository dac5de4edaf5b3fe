"""review32a: the userbuffers / re-gather shares (model_parallel_comm._ub_shares, docs/model.md#ub-shares) of an MLA
block and of shared experts run beside the dispatcher, worked by hand from the weight matrices of docs/model.md
(attention_matrices; the MLP (2|1) h f up and h f down).

MLA's down-projections (linear_q_down_proj h x r_q, linear_kv_down_proj h x (r_kv + d_rope)) are TELinear
``parallel_mode='duplicated'`` in Megatron-Core's Transformer Engine spec (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/transformer/multi_latent_attention.py L526-527 / L573-574, models/gpt/gpt_layer_specs.py L302 / L304):
they run on the rank's s/t tokens with the whole weight, gather nothing and re-gather nothing, and TELinear gives
them no userbuffers (extensions/transformer_engine.py L1189 ``parallel_mode != "duplicated"``). Their data-gradient
GEMMs hide no re-gather: they count in the layer's GEMM FLOPs, on neither side. Column-parallel down-projections
(strategy mla_column_down_proj) gather their h-wide input and re-gather it under their own data-gradient GEMM: on the
AG side of the re-gather window. Under moe_shared_expert_overlap the shared experts' linears run with their own comm
and userbuffers off (moe/shared_experts.py L163-175) and their pair outside the weight-gradient window: on neither
side.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import mamba
from scalemodel.cost import transformer as tr
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec


def _mla_shape():  # type: ignore[no-untyped-def]
    # h 8, 2 heads, q/k head dim 3 (nope 2 + rope 1), v 2, r_q 4, r_kv 2; gated MLP f 16; one layer, no MoE
    return tr.shape(layers=1, hidden=8, heads=2, head_dim=3, v_head_dim=2, q_lora_rank=4, kv_lora_rank=2,
                    qk_rope_head_dim=1, vocab=8, ffn_hidden=16, gated_mlp=True, biases=False)


def test_mla_down_projections_are_on_neither_side_when_duplicated() -> None:
    """q_down 8 x 4 = 32 and kv_down 8 x (2 + 1) = 24, whole on each rank: D = 56. q_up 4 x (2 x 3) = 24, kv_up
    2 x 2 (2 + 2) = 16, O 2 x 2 x 8 = 32; FC1 2 x 8 x 16 = 256, FC2 16 x 8 = 128. Of 512: AG 24 + 16 + 256 = 296
    (37/64), RS 32 + 128 = 160 (5/16). Before review32a D sat on the AG side: 352/512 = 11/16."""
    assert mpc._ub_shares(_mla_shape()) == pytest.approx((296 / 512, 160 / 512), rel=1e-12)


def test_mla_column_down_projections_gather_on_the_ag_side() -> None:
    """mla_column_down_proj: the down-projections are column-parallel linears that gather their h-wide input and
    re-gather it under their own data-gradient GEMM: AG 296 + 56 = 352 of 512 (11/16), RS unchanged 5/16; per
    strategy-grid point (an array of the column flag gives an array of shares)."""
    a, r = mpc._ub_shares(_mla_shape(), np.array([False, True]))
    assert np.asarray(a) == pytest.approx([296 / 512, 352 / 512], rel=1e-12)
    assert float(r) == pytest.approx(160 / 512, rel=1e-12)


def test_shared_experts_beside_the_dispatcher_are_on_neither_side() -> None:
    """An attention + MoE pair (h 4, 2 heads of 2, 1 KV head; 4 experts top-2 of f_e 2, 1 shared, gated): QKV 32,
    O 16, the shared FC1 16 and FC2 8, the routed 2 x 3 x 2 x 4 = 48, the router h x E = 4 x 4 = 16 (in the total
    since mtp32): 136 in all. With the shared experts on userbuffers AG 48, RS 24 (tests/test_hybrid32.py); under
    moe_shared_expert_overlap AG 32, RS 16 of the same 136."""
    md = mamba.mamba_dims(hidden=4, heads=2, head_dim=4, state_dim=2, groups=1, conv_kernel=4, chunk_size=4)
    counts = mamba.layer_counts("*E")
    sh = tr.shape(layers=counts.layers, hidden=4, heads=2, kv_heads=1, head_dim=2, vocab=8, ffn_hidden=8,
                  moe_experts=4, moe_top_k=2, moe_ffn_hidden=2, moe_shared_experts=1, gated_mlp=True, biases=False,
                  hybrid=counts, mamba=md)
    assert mpc._ub_shares(sh) == pytest.approx((48 / 136, 24 / 136), rel=1e-12)
    assert mpc._ub_shares(sh, shared_off=True) == pytest.approx((32 / 136, 16 / 136), rel=1e-12)


H, S, LAYERS, TP = 1024, 2048, 4, 4


def _mla_job(column: bool):  # type: ignore[no-untyped-def]
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=mla)
    trn = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S)
    job = build_job(load_cluster("dgx-h100"), wl, trn)
    st = StrategySpec(tp=TP, sequence_parallel=True, mla_column_down_proj=column)
    return job, grid_from_strategy(st, trn, TP, job)


@pytest.mark.parametrize("column", [False, True])
def test_regather_window_of_an_mla_model_follows_the_down_projections_build(column: bool) -> None:
    """sp_regather's window W = a G on the MLA block of tests/test_sp31.py (h 1024, 8 heads, nope 64, rope 32, v 64,
    r_q 256, r_kv 128, gated f 4096). A layer's weight elements: q_down 1024 x 256 = 262,144, q_up 256 x 8 x 96 =
    196,608, kv_down 1024 x 160 = 163,840, kv_up 128 x 8 x 128 = 131,072, O 8 x 64 x 1024 = 524,288, FC1 8,388,608,
    FC2 4,194,304: 13,860,864. AG duplicated 196,608 + 131,072 + 8,388,608 = 8,716,288; column-parallel + 262,144 +
    163,840 = 9,142,272. With a 1 s forward GEMM a layer the window hides every re-gather: hidden = the total; with
    1 ns (shorter than any gather) hidden = W = L a G exactly."""
    job, g = _mla_job(column)
    a = (9_142_272 if column else 8_716_288) / 13_860_864
    gemm = 1e-9
    comp = {"layers_per_stage": np.asarray([float(LAYERS)]), "gemm_per_layer": np.asarray([gemm])}
    coll = {"tp_regather": np.asarray([1e-3]), "tp_att_regather": np.asarray([1e-3])}
    got = mpc.sp_regather(job, g, comp, coll)
    assert float(np.asarray(got["hidden"]).reshape(-1)[0]) == pytest.approx(LAYERS * a * gemm, rel=1e-12)
