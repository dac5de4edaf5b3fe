"""mtp32: the userbuffers / SP re-gather shares (model_parallel_comm._ub_shares, docs/model.md#ub-shares) of an MTP
block, and the router and LatentMoE projections in the shares' total.

(1) An MTP pass's block is one attention layer and one MoE layer (the last layer's kind, or a hybrid's ``*E``) or one
dense MLP layer (``*-``), no Mamba: its forward GEMM time ``mtp_gemm`` is priced at its own block's shares, not at the
model's (which, for Nemotron 3 Super, are mostly Mamba in_proj / out_proj). eh_proj is in neither ``mtp_gemm`` nor
the TP collective count (Megatron-LM@d98e8a64dd multi_token_prediction.py L1174-1186: a column-parallel linear with
``tp_comm_buffer_name="mtp_eh_proj"``, which Megatron's TELinear does not put on userbuffers).

(2) The layer's priced forward GEMM time (``compute.layer_compute_time``'s ``forward_gemm``) sums the attention
block's weight GEMMs, the dense MLP, the shared experts, the routed experts, the router (h x E on the T / tp sequence
shard) and LatentMoE's two h x l projections (on the same shard): the shares' total counts all of them, the router
and the latent projections on neither side.

Every expected value is worked out by hand below from the weight matrices (units: weight elements per token on one
TP rank x tp, so a split matrix counts its whole size and a whole one on the T / tp shard its size too).
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
import yaml
from conftest import ROOT
from msgspec.structs import replace

from scalemodel.cost import transformer as tr
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

# Nemotron 3 Super (examples/workloads/nemotron-3-super.yaml), in units of 4096 elements a token:
#   QKV 32 x 128 + 2 x 2 x 128 = 4,608; O 4,096; the shared experts (2 x 2688, ungated) FC1 5,376 and FC2 5,376;
#   Mamba in_proj 2 x 8,192 + 2 x 8 x 128 + 128 = 18,560, out_proj 8,192;
#   per MoE layer on neither side: routed 22 x 2 x 2688 x 1024 / 4096 = 29,568, router 512, latent 2 x 1024 = 2,048.
SUPER_LAYERS = (8 * 4608 + 40 * 5376 + 40 * 18560,  # AG: 994,304
                8 * 4096 + 40 * 5376 + 40 * 8192,  # RS: 575,488
                40 * (29568 + 512 + 2048))  # 1,285,120
SUPER_BLOCK = (4608 + 5376, 4096 + 5376, 29568 + 512 + 2048)  # the *E block: 9,984 / 9,472 / 32,128


def _shares(ag: float, rs: float, other: float) -> tuple[float, float]:
    return ag / (ag + rs + other), rs / (ag + rs + other)


def _super_job(strategy: dict) -> tuple:  # type: ignore[type-arg]
    w = msgspec.convert(yaml.safe_load((ROOT / "examples/workloads/nemotron-3-super.yaml").read_text()),
                        TransformerWorkload)
    tr_spec = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=8192)
    job = build_job(load_cluster("dgx-h100"), w, tr_spec, straggler_cv=0.0)
    return job, grid_from_strategy(StrategySpec(**strategy), tr_spec, 8, job)


def test_super_mtp_block_has_its_own_shares():
    """The *E block: a = 9,984 / 51,584 = 0.194, r = 9,472 / 51,584 = 0.184; the model's 88 layers: a = 994,304 /
    2,854,912 = 0.348, r = 575,488 / 2,854,912 = 0.202 (before mtp32 the block was priced at the model's)."""
    job, _ = _super_job({})
    sh = job.shape
    assert mpc._mtp_ub_shares(sh) == pytest.approx(_shares(*SUPER_BLOCK), rel=1e-12)
    assert mpc._ub_shares(sh) == pytest.approx(_shares(*SUPER_LAYERS), rel=1e-12)
    assert mpc._mtp_ub_shares(sh)[0] < 0.6 * mpc._ub_shares(sh)[0]  # no Mamba in_proj in the block


def test_dense_mlp_block_and_gpt_paths():
    """A '*-' block (one attention layer, one ungated dense MLP of 2688): AG 4,608 + 2,688, RS 4,096 + 2,688, nothing
    else. A GPT-path model (no hybrid) whose last layer is dense: the block is one attention + MLP layer, as the
    model's own dense layers; whose last layer is MoE (3 layers, the first dense, h 64, 4 heads, gated f 128, 8
    experts top-2 of 32, no shared): the block AG 64 x 192 = 12,288, RS 64 x 64 = 4,096, routed 2 x 3 x 32 x 64 =
    12,288 and router 64 x 8 = 512: 8/19 and 8/57; the model (1 dense, 2 MoE layers): AG 3 x 12,288 + 2 x 8,192, RS
    3 x 4,096 + 8,192, routed and router 2 x 12,800, of 99,328: 52/97 and 20/97."""
    job, _ = _super_job({})
    dash = replace(job.shape, mtp_block="*-")
    assert mpc._mtp_ub_shares(dash) == pytest.approx(_shares(4608 + 2688, 4096 + 2688, 0.0), rel=1e-12)
    gpt = tr.shape(layers=2, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True, mtp_layers=1)
    # QKV 64 x 192, O 64 x 64, FC1 2 x 64 x 128, FC2 128 x 64
    assert mpc._mtp_ub_shares(gpt) == pytest.approx(_shares(12288 + 16384, 4096 + 8192, 0.0), rel=1e-12)
    assert mpc._mtp_ub_shares(gpt) == pytest.approx(mpc._ub_shares(gpt), rel=1e-12)
    moe = tr.shape(layers=3, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True, moe_experts=8,
                   moe_top_k=2, moe_ffn_hidden=32, moe_first_dense=1, mtp_layers=1)
    assert mpc._mtp_ub_shares(moe) == pytest.approx((8 / 19, 8 / 57), rel=1e-12)
    assert mpc._ub_shares(moe) == pytest.approx((52 / 97, 20 / 97), rel=1e-12)


def test_router_and_latent_projections_in_the_total():
    """One standard MoE layer, h 64, 4 heads of 16, ungated, 1 shared expert of 32, 8 experts top-2 of 32, LatentMoE
    l 16: AG QKV 64 x 192 = 12,288 + the shared FC1 64 x 32 = 2,048 (14,336); RS O 4,096 + the shared FC2 2,048
    (6,144); the routed 2 x 2 x 32 x 16 = 2,048 (at the latent width), the router 64 x 8 = 512 and fc1 / fc2_latent_proj
    2 x 64 x 16 = 2,048 on neither side: of 20,480 + 2,048 + 512 + 2,048 = 25,088 (before mtp32 the total stopped at
    22,528, without the router and the latent projections, and the shares were 14,336 / 22,528 and 6,144 / 22,528,
    too large for the GEMM time they scale)."""
    sh = tr.shape(layers=1, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=False, moe_experts=8,
                  moe_top_k=2, moe_ffn_hidden=32, moe_shared_experts=1, moe_latent=16)
    assert mpc._ub_shares(sh) == pytest.approx((14336 / 25088, 6144 / 25088), rel=1e-12)


def _comp(layers: float, gemm: float, mtp_gemm: float) -> dict:  # type: ignore[type-arg]
    return {"layers_per_stage": np.asarray(layers), "gemm_per_layer": np.asarray(gemm),
            "mtp_gemm": np.asarray(mtp_gemm), "mtp_attention_blocks": np.asarray(2.0)}


def test_regather_window_prices_the_block_at_its_own_share():
    """Nemotron 3 Super at tp 2 with sequence parallelism: the re-gathers hide under the gathering linears'
    data-gradient GEMMs, W = a_L L_s t_layer + a_M t_mtp. With 88 layers of 1 ms and 2 passes' blocks of 5 ms, and
    re-gathers (10 s) far longer than W, exposed = 10 - W:
        W = 88 x 994,304 / 2,854,912 + 5 x 9,984 / 51,584 ms."""
    job, g = _super_job({"tp": 2, "sequence_parallel": True})
    comp = _comp(88.0, 1e-3, 5e-3)
    got = mpc.sp_regather(job, g, comp, {"tp_regather": np.asarray(10.0)})
    want = 88 * 1e-3 * _shares(*SUPER_LAYERS)[0] + 5e-3 * _shares(*SUPER_BLOCK)[0]
    assert float(np.ravel(got["total"])[0] - np.ravel(got["exposed"])[0]) == pytest.approx(want, rel=1e-9)


def test_rs_gemm_of_layers_and_blocks():
    """contention's G_rs: the forward (and recomputed) GEMM seconds beside a pipeline reduce-scatter, the layers at
    r_L, the blocks at r_M: 90 layer passes of 1 ms and 2 block passes of 5 ms,
        G_rs = 90 x 575,488 / 2,854,912 + 2 x 5 x 9,472 / 51,584 ms."""
    job, _ = _super_job({})
    got = mpc._ub_gemm(job.shape, _comp(88.0, 1e-3, 5e-3), 1, 90.0, 2.0)
    want = 90 * 1e-3 * _shares(*SUPER_LAYERS)[1] + 2 * 5e-3 * _shares(*SUPER_BLOCK)[1]
    assert float(np.ravel(got)[0]) == pytest.approx(want, rel=1e-12)
