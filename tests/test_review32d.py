"""review32d: sp32 / mla32 / mtpub32 checked at their sources (docs/model.md#sp-grad-gather, review32d).

The backward mirror of an MLA block's further sequence-parallel gathers. sp32 moved the forward's column-parallel
input gathers to the quantized dtype ``q`` (Transformer Engine quantizes before it gathers), MLA's latent gathers
(``coll['tp_att']``) with them. In the backward each of those gathers is mirrored by the reduce-scatter of the same
linear's input gradient, the data-gradient GEMM's 16-bit output (NVIDIA/TransformerEngine@c55e425ac5, v2.2,
pytorch/module/linear.py L547 ``grad_input_quantizer.set_usage`` only under ``ub_overlap_rs_dgrad``; the plain path
reduce-scatters the bf16 ``dgrad``), so it moves the activations' bytes, as the dense count's ``RS(2 E)`` does. Until
review32d the pool under the weight-gradient GEMMs kept MLA's share at the forward's ``q``: 1 byte an element in a
per-tensor FP8 run, half its traffic.

By hand on a 4-layer MLA model (h 1024, r_q 256, r_kv 128, d_rope 32, s 2048, micro-batch 1) at tensor 2 with SP
on one DGX H100, no userbuffers, 10 s GEMMs a layer (everything in the pool hides, and the re-gathers of the saved
shards, at q, under the column-parallel linears' data-gradient GEMMs): the hidden backward is the pool, at 2 bytes
whatever the recipe, and the re-gathers,

    8 RS(2 E) + 4 (AG(2 s r_q) + AG(2 s r_kv) - AG(2 E)) + 4 (AG(q E) + AG(q s r_q) + AG(q s r_kv)),  E = s h

(tp33: the RoPE key's mirror, the reduce-scatter of ``_GatherFromSequenceParallelRegion.backward``, runs blocking
outside any linear's backward, exposed, and its gather is not re-gathered; until tp33 the window was the layer's
whole weight-gradient time)

each collective one NCCL collective of its buffer over the 2 ranks (tests/test_collectives.py); MLA's mirrors are
priced as the forward's gathers at 2 bytes, as docs/model.md#mla-tp prices that backward. The down-
projections run duplicated (review32a: they gather nothing), so an MLA block's gathers are the two latents' and the
RoPE key's, in place of the h-wide one the dense count holds (``- RS(2 E)``).

The RoPE key's forward gather is Megatron's plain ``gather_from_sequence_parallel_region`` of the bf16 down-
projection output, not a TE linear's quantized gather: 2 bytes an element in an FP8 run (sp32 priced it at q).

mtpub32's MTP blocks (plain NCCL under tp_comm_overlap) block on their output-gradient gathers as the layers do
without userbuffers (sp32): exposed, not under the blocks' weight-gradient GEMMs."""

from __future__ import annotations

import numpy as np
import pytest
from test_mtpub32 import LONG, UNIT, _job

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec

H, RQ, RKV, ROPE, S, LAYERS, TP = 1024, 256, 128, 32, 2048, 4, 2


def _setup(precision: str, recipe: str | None):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4096, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False,
                             mla=MLASpec(kv_lora_rank=RKV, q_lora_rank=RQ, qk_nope_head_dim=64, qk_rope_head_dim=ROPE,
                                         v_head_dim=64))
    extra = {"fp8_recipe": recipe} if recipe else {}
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision=precision, seq_len=S, **extra)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(tp=TP, sequence_parallel=True)
    g = grid_from_strategy(st, tr, TP, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = mpc._mp_collectives(job, g, groups)
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    comp = dict(comp, wgrad=np.full(1, 10.0), gemm_per_layer=np.full(1, 10.0), embedding_uses=np.zeros(1),
                head_uses=np.zeros(1))
    return job, c, mpc._model_parallel_comm(job, g, comp, c)


def _t(op: str, nbytes: float, job) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time(op, np.asarray(nbytes), place(float(TP), 1.0, job.network)))


def _rs(nbytes: float, job) -> float:  # type: ignore[no-untyped-def]
    return _t("reducescatter", nbytes, job)


def _ag(nbytes: float, job) -> float:  # type: ignore[no-untyped-def]
    return _t("allgather", nbytes, job)


@pytest.mark.parametrize(("precision", "recipe"), [("bf16", None), ("fp8", "delayed"), ("fp8", "tensorwise")])
def test_mla_gathers_mirror_at_the_gradient_bytes(precision: str, recipe: str | None) -> None:
    """The hidden backward pool: the input-gradient reduce-scatters at 2 bytes whatever the recipe (before review32d
    the fp8 rows' MLA share was priced at 1 byte)."""
    job, _, out = _setup(precision, recipe)
    e = float(S * H)
    q = 2.0 if precision == "bf16" else 1.0
    block = _ag(2.0 * S * RQ, job) + _ag(2.0 * S * RKV, job) - _ag(2 * e, job)
    regathers = LAYERS * (_ag(q * e, job) + _ag(q * S * RQ, job) + _ag(q * S * RKV, job))
    want = 2 * LAYERS * _rs(2 * e, job) + LAYERS * block + regathers
    assert float(np.ravel(out["hidden_bwd"])[0]) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0),
                                                         ("fp8", "tensorwise", 1.0)])
def test_rope_key_gather_moves_the_activations_bytes(precision: str, recipe: str | None, q: float) -> None:
    """The forward's MLA gathers a block: the up-projections' inputs (TE column linears) at q, the RoPE key at 2 bytes
    (``gather_from_sequence_parallel_region(k_pos_emb)``, NVIDIA/Megatron-LM@d98e8a64dd multi_latent_attention.py
    L763: Megatron's plain autograd gather of the bf16 down-projection output, not a TE linear's), in place of the
    dense count's h-wide gather at q. Before review32d the RoPE key gathered at q (1 byte in an FP8 run)."""
    job, c, _ = _setup(precision, recipe)
    want = (_t("allgather", q * S * RQ, job) + _t("allgather", q * S * RKV, job) + _t("allgather", 2.0 * S * ROPE, job)
            - _t("allgather", q * S * H, job))
    assert float(np.ravel(c["tp_att"])[0]) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mtp", [1, 2])
def test_mtp_blocks_plain_nccl_expose_their_gradient_gathers(mtp: int) -> None:
    """mtpub32's MTP blocks run plain NCCL under tp_comm_overlap, so their row-parallel linears' output-gradient
    gathers block as the layers' do without userbuffers (sp32, _sp_backward_pool). tests/test_mtpub32.py's count with
    each block collective's pair split RS 0.5 s + AG 0.5 s (the forward's, and the gradient's, gather 0.5 s): the
    layers' userbuffers floor 4/8, the D MoE blocks' forward D whole, and their D gradient gathers 0.5 s each exposed:
    TP = 1/2 + D + D/2; the backward's hidden the layers' 4 and the blocks' D reduce-scatters, 4 + D/2. Before
    review32d the blocks' gathers hid under their weight-gradient GEMMs (TP 1/2 + D, hidden 4 + D)."""
    job, g = _job(mtp, mla=False)
    c = dict(UNIT, tp_fwd_ag=np.full(1, 0.5), tp_grad_ag=np.full(1, 0.5))
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * 3.0, logits_on_stage=True)
    blocks = float(np.ravel(comp["mtp_blocks"])[0])
    assert blocks == mtp
    comp = dict(comp, wgrad=np.ones(1) * LONG * (3.0 + blocks), gemm_per_layer=np.ones(1) * LONG,
                mtp_gemm=np.ones(1) * LONG * blocks)
    mp = mpc._model_parallel_comm(job, g, comp, c)
    assert float(np.ravel(mp["tp"])[0]) == pytest.approx(0.5 + mtp + 0.5 * mtp, rel=1e-12)
    assert float(np.ravel(mp["hidden_bwd"])[0]) == pytest.approx(4.0 + 0.5 * mtp, rel=1e-12)
