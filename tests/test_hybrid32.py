"""The userbuffers GEMM shares (model_parallel_comm._ub_shares, docs/model.md#ub-shares) of a hybrid pattern, summed
over its layers by kind, worked out by hand from the weight matrices of docs/model.md (attention_matrices: fused QKV
h x (a d + 2 g d), O a d_v x h; the MLP (2|1) h f up and h f down; an MoE layer's shared and routed experts; the
Mamba-2 mixer's in_proj h x (2 d_in + 2 G N + H) and out_proj d_in x h, docs/model.md#mamba-2-layers)."""

import pytest

from scalemodel.cost import mamba
from scalemodel.cost import transformer as tr
from scalemodel.engine.model_parallel_comm import _ub_shares


def hybrid(pattern: str):
    # h 4, 2 heads of 2, 1 KV head; gated MLP f 8; 4 experts top-2 of f_e 2, 1 shared; Mamba 2 heads of 4 (d_in 8),
    # N 2, G 1
    md = mamba.mamba_dims(hidden=4, heads=2, head_dim=4, state_dim=2, groups=1, conv_kernel=4, chunk_size=4)
    counts = mamba.layer_counts(pattern)
    return tr.shape(layers=counts.layers, hidden=4, heads=2, kv_heads=1, head_dim=2, vocab=8, ffn_hidden=8,
                    moe_experts=4 if counts.moe else 0, moe_top_k=2, moe_ffn_hidden=2, moe_shared_experts=1,
                    gated_mlp=True, biases=False, hybrid=counts, mamba=md)


def test_shares_of_a_hybrid_pattern_by_hand():
    """'M*-E': one layer of each kind. All-gather side (column-parallel): QKV 4 x (4 + 2 + 2) = 32, the MLP's FC1
    2 x 4 x 8 = 64, the shared expert's FC1 2 x 4 x 2 = 16, the Mamba in_proj 4 x (16 + 2 + 2) = 88 (200);
    reduce-scatter side (row-parallel): O 4 x 4 = 16, FC2 8 x 4 = 32, the shared FC2 2 x 4 = 8, out_proj 8 x 4 = 32
    (88); on neither, the routed experts' grouped GEMMs 2 x 3 x 2 x 4 = 48 and the router h x E = 4 x 4 = 16 (in the
    layer's priced forward GEMM time since mtp32). Of 352: 200 / 352 = 25/44 and 88 / 352 = 1/4 (hybrid32, without
    the router: 25/42 and 11/42). The old rule (one attention + MLP layer, MoE share 1/4, no Mamba) gave 84/138 and
    42/138."""
    assert _ub_shares(hybrid("M*-E")) == pytest.approx((25 / 44, 1 / 4), rel=1e-12)


def test_shares_of_each_kind_alone():
    """A layer kind's own shares (pipeline ranks of a hybrid pattern price their own kinds): Mamba in_proj 88 and
    out_proj 32 of 120; attention QKV 32 and O 16 of 48; the dense MLP 64 and 32 of 96. An '*E' pair (attention +
    MoE, the layer of a standard MoE model) is 48 and 24 of 136 (with the routed 48 and the router 16: mtp32), as the
    standard model's layer."""
    assert _ub_shares(hybrid("MM")) == pytest.approx((88 / 120, 32 / 120), rel=1e-12)
    assert _ub_shares(hybrid("*-*-")) == pytest.approx(((32 + 64) / 144, (16 + 32) / 144), rel=1e-12)
    assert _ub_shares(hybrid("*E")) == pytest.approx((48 / 136, 24 / 136), rel=1e-12)
    std = tr.shape(layers=3, hidden=4, heads=2, kv_heads=1, head_dim=2, vocab=8, ffn_hidden=8, moe_experts=4,
                   moe_top_k=2, moe_ffn_hidden=2, moe_shared_experts=1, gated_mlp=True, biases=False)
    assert _ub_shares(std) == pytest.approx((48 / 136, 24 / 136), rel=1e-12)
