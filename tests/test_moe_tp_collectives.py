"""An MoE layer's tensor-parallel collectives (docs/model.md#tp-comm-moe), from Megatron-Core's code
(NVIDIA/Megatron-LM@d98e8a64dd; core_v0.15.0 0d7e02bd26 the same): with sequence parallelism the MoE block runs the
shared experts' all-gather + reduce-scatter of b s h / cp (if it has shared experts) and, with expert tensor
parallelism etp > 1, the dispatcher's all-gather after the dispatch and reduce-scatter before the combine of the
rank's received tokens over the etp group (gathered buffer etp x k b s w eb / (cp tp)); with etp 1 and no shared
experts none. The bytes are worked out by hand here; their time is the collectives model's for those bytes on the
placed group (the primitive, tested in tests/test_collectives*.py)."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec

H, S, B, K, LAYERS = 4096, 4096, 1, 2, 8
EB = 2.0  # bf16


def _job(shared: int):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="moe", layers=LAYERS, hidden=H, heads=32, kv_heads=8, ffn_hidden=14336,
                             gated_mlp=True, vocab=32000, seq_len=S, tied_embeddings=False,
                             moe=MoESpec(experts=8, top_k=K, ffn_hidden=2048, shared_experts=shared))
    tr = TrainingSpec(global_batch=16, micro_batch=B, precision="bf16", seq_len=S,
                      moe_rank_imbalance=1.0)  # the mean rank, as priced by hand (busiest: test_moe_routing_imbalance)
    return build_job(load_cluster("dgx-h100"), wl, tr), tr


def _grid(job, tr, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(**strategy)
    return grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)


def _parts(shared: int, **strategy):  # type: ignore[no-untyped-def]
    job, tr = _job(shared)
    g = _grid(job, tr, **strategy)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = model_parallel_comm._mp_collectives(job, g, groups)
    return job, g, c, model_parallel_comm._moe_tp_collectives(job, g, c)


def _t(op: str, nbytes: float, ranks: int) -> float:
    """One collective of ``nbytes`` over ``ranks`` GPUs at stride 1 of a DGX H100 (NVLink)."""
    network = _job(0)[0].network
    return float(coll.group_time(op, np.asarray(nbytes), place(float(ranks), 1.0, network)))


def test_sp_block_collective_by_hand() -> None:
    """The layers' block collective with SP: reduce-scatter + all-gather of b s h eb = 32 MiB over tp 4."""
    _, _, c, _ = _parts(0, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True)
    act = B * S * H * EB
    assert act == 32 * 2**20
    assert float(np.ravel(c["tp"])[0]) == pytest.approx(_t("reducescatter", act, 4) + _t("allgather", act, 4),
                                                        rel=1e-12)


def test_etp1_no_shared_experts_runs_no_moe_tp_collective() -> None:
    """etp 1, no shared experts: the MoE block's count leaves the layers' (-1), nothing exposed, nothing to repeat."""
    _, _, _, (adj, ext, block) = _parts(0, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True)
    assert float(np.ravel(adj)[0]) == -1.0 and float(np.ravel(ext)[0]) == 0.0 and float(np.ravel(block)[0]) == 0.0


def test_etp_equal_tp_dispatcher_gather_by_hand() -> None:
    """etp = tp = 4: the dispatcher gathers etp x (b s / tp) k tokens of h = b s k h eb = 64 MiB over the 4 expert-TP
    ranks and reduce-scatters the same buffer; k = 2 times the attention block's 32 MiB. Beside the tokens the
    dispatcher gathers their routing probabilities over the same group (dispatch_postprocess, token_dispatcher.py
    @d98e8a64dd lines 749-751: etp x (b s / tp) k of them in the router's dtype, here bf16, 16 KiB) in the forward
    and reduce-scatters their gradient in the backward: half the pair a pass (docs/model.md#ep-probs-counts)."""
    _, _, c, (adj, ext, block) = _parts(0, tp=4, dp=2, ep=2, sequence_parallel=True)
    disp_bytes = 4 * (B * S / 4) * K * H * EB
    assert disp_bytes == 64 * 2**20
    probs = 4 * (B * S / 4) * K * EB
    disp = (_t("allgather", disp_bytes, 4) + _t("reducescatter", disp_bytes, 4)
            + 0.5 * (_t("allgather", probs, 4) + _t("reducescatter", probs, 4)))
    assert float(np.ravel(c["moe_disp"])[0]) == pytest.approx(disp, rel=1e-12)
    assert float(np.ravel(adj)[0]) == -1.0
    assert float(np.ravel(ext)[0]) == pytest.approx(disp, rel=1e-12)
    assert float(np.ravel(block)[0]) == pytest.approx(disp, rel=1e-12)
    # etp 2 under tp 4: 2 x (b s / 4) k h eb = 32 MiB over 2 ranks
    _, _, c2, _ = _parts(0, tp=4, dp=2, ep=2, etp=2, sequence_parallel=True)
    d2, p2 = 2 * (B * S / 4) * K * H * EB, 2 * (B * S / 4) * K * EB
    assert float(np.ravel(c2["moe_disp"])[0]) == pytest.approx(
        _t("allgather", d2, 2) + _t("reducescatter", d2, 2)
        + 0.5 * (_t("allgather", p2, 2) + _t("reducescatter", p2, 2)),
        rel=1e-12)


def test_shared_experts_and_their_overlap() -> None:
    """Shared experts keep their pair in the layers' count (userbuffers, weight-gradient window); under
    moe_shared_expert_overlap Megatron switches userbuffers and the linears' comm off (shared_experts.py
    lines 163-175): the pair leaves the count and runs exposed, forward and backward."""
    _, _, c, (adj, ext, block) = _parts(1, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True)
    per = _t("reducescatter", B * S * H * EB, 4) + _t("allgather", B * S * H * EB, 4)
    assert float(np.ravel(adj)[0]) == 0.0 and float(np.ravel(ext)[0]) == 0.0
    assert float(np.ravel(block)[0]) == pytest.approx(per, rel=1e-12)
    _, _, _, (adj, ext, block) = _parts(1, tp=4, dp=2, ep=2, etp=1, sequence_parallel=True,
                                        moe_shared_expert_overlap=True)
    assert float(np.ravel(adj)[0]) == -1.0
    assert float(np.ravel(ext)[0]) == pytest.approx(per, rel=1e-12)
    assert float(np.ravel(block)[0]) == pytest.approx(per, rel=1e-12)


def test_without_sp_the_block_all_reduce_stays() -> None:
    """No SP (Megatron-Core refuses MoE with tp > 1 in training, moe_layer.py lines 636-640, and so does predict for
    layer_impl megatron_te: tests/test_moe_sp_required.py; an eager PyTorch layer runs it): one all-reduce of
    b s h eb per MoE block, as before."""
    _, _, c, (adj, ext, block) = _parts(0, tp=4, dp=2, ep=2, sequence_parallel=False, layer_impl="eager")
    assert float(np.ravel(adj)[0]) == 0.0 and float(np.ravel(ext)[0]) == 0.0
    assert float(np.ravel(block)[0]) == pytest.approx(_t("allreduce", B * S * H * EB, 4), rel=1e-12)


def _tp_comm(shared: int, **strategy) -> float:  # type: ignore[no-untyped-def]
    job, tr = _job(shared)
    return float(step.evaluate(job, _grid(job, tr, **strategy)).breakdown["tp_comm"][0])


def test_recompute_moe_repeats_the_blocks_own_collectives_by_hand() -> None:
    """Selective recompute of moe re-runs the block's forward in the backward, exposed: etp 1 and no shared experts
    adds nothing (the review's finding: before, one block collective per MoE layer); etp = tp adds the dispatcher's
    all-gather + reduce-scatter once per layer and micro-batch (8 layers, pp 1; 16 / (1 x dp 2) = 8 micro-batches
    a step)."""
    kw = dict(tp=4, dp=2, ep=2, sequence_parallel=True, recompute="selective")
    base = _tp_comm(0, etp=1, recompute_modules="core_attn", **kw)
    assert _tp_comm(0, etp=1, recompute_modules="core_attn,moe", **kw) == pytest.approx(base, rel=1e-12)
    base4 = _tp_comm(0, recompute_modules="core_attn", **kw)
    moe4 = _tp_comm(0, recompute_modules="core_attn,moe", **kw)
    disp_bytes, probs = B * S * K * H * EB, B * S * K * EB  # the probabilities' pair: half of it a pass
    assert moe4 - base4 == pytest.approx(
        8 * LAYERS * (_t("allgather", disp_bytes, 4) + _t("reducescatter", disp_bytes, 4)
                      + 0.5 * (_t("allgather", probs, 4) + _t("reducescatter", probs, 4))), rel=1e-9)


def test_shared_overlap_takes_the_pair_off_userbuffers_by_hand() -> None:
    """tp_comm_overlap, every layer an MoE layer with a shared expert, etp 1. Off: C = 2 per a layer (attention +
    shared pair); each part beside its own linears' GEMMs (tp33, G the layer's forward GEMMs): the forward's 2 ring
    gathers under a G, its 2 pipelined reduce-scatters under r G with the last chunk's quarter exposed at least
    (docs/model.md#tp-comm-overlap); the backward's three parts: the 2 output-gradient ring gathers under r G, the
    2 input-gradient reduce-scatters and the 2 re-gathers under a G each. A ring exchange's last GEMM chunk (1/tp =
    1/4) and the pipeline's first (1/4) have nothing beside them: 3/4 of those windows (review33b). With
    moe_shared_expert_overlap Megatron switches the shared pair's userbuffers off (shared_experts.py lines 163-175):
    C = per and 1 of each backward part, at the shares without the shared expert, and the pair runs exposed
    forward and backward, 2 per. Since tp34 each linear's collective hides under its own GEMM only (off: QKV and
    the shared FC1 on the column side, O and the shared FC2 on the row side, each its own window). Shares in units
    of h a token (h 4096): QKV 6144, O 4096, the shared expert's FC1 2 x 2048 and FC2 2048, the routed experts
    2 x 3 x 2048, the router 8: T = 28,680; on, a = 6144 / T, r = 4096 / T; off, the column linears' a 6144 / T and
    4096 / T, the row linears' r 4096 / T and 2048 / T. 8 layers, 8 micro-batches."""
    kw = dict(tp=4, dp=2, ep=2, etp=1, sequence_parallel=True, tp_comm_overlap=True)
    off = _tp_comm(1, **kw)
    on = _tp_comm(1, moe_shared_expert_overlap=True, **kw)
    act = B * S * H * EB
    rs, ag = _t("reducescatter", act, 4), _t("allgather", act, 4)
    per = rs + ag
    job, tr = _job(1)
    comp = layer_compute._compute_per_microbatch(job, _grid(job, tr, **kw), np.ones(1) * LAYERS,
                                                 logits_on_stage=False)
    g = float(np.ravel(comp["gemm_per_layer"])[0])
    total = 28_680.0

    def layer(n: float, a: float, r: float) -> float:  # one layer's exposed userbuffers TP seconds, n pairs
        # the ring exchanges' last GEMM chunk (1/tp = 1/4) and the pipeline's first (1/4) have no traffic beside
        # them (review33b): 3/4 of each window
        return (max(n * ag - 0.75 * a * g, 0.0) + max(n * rs - 0.75 * r * g, n * rs / 4)
                + max(n * ag - 0.75 * r * g, 0.0) + max(n * rs - a * g, 0.0) + max(n * ag - a * g, 0.0))

    # tp34: each linear's collective under its own GEMM only: off, the column side is QKV (6144) and the shared FC1
    # (4096), the row side O (4096) and the shared FC2 (2048), one collective each; a layer() per linear pair
    # counts each column term under its own a and each row term under its own r
    def column(a: float) -> float:
        return max(ag - 0.75 * a * g, 0.0) + max(rs - a * g, 0.0) + max(ag - a * g, 0.0)

    def row(r: float) -> float:
        return max(rs - 0.75 * r * g, rs / 4) + max(ag - 0.75 * r * g, 0.0)

    assert layer(1, 6144 / total, 4096 / total) == pytest.approx(column(6144 / total) + row(4096 / total), rel=1e-12)
    off_layer = column(6144 / total) + column(4096 / total) + row(4096 / total) + row(2048 / total)
    want = layer(1, 6144 / total, 4096 / total) + 2 * per - off_layer
    assert on - off == pytest.approx(8 * LAYERS * want, rel=1e-9)


def test_tp1_etp2_dispatcher_pair_by_hand() -> None:
    """tp 1, etp 2 (expert grid folded over DP): the dispatcher's condition is the expert-TP size, so the all-gather
    and reduce-scatter of 2 x b s k h eb = 128 MiB over the 2 expert-TP ranks run although the attention runs no TP
    collective: forward + backward each, 8 layers, 16 / (1 x dp 8) = 2 micro-batches a step."""
    base = _tp_comm(0, tp=1, dp=8, ep=4, etp=1)
    assert base == 0.0
    got = _tp_comm(0, tp=1, dp=8, ep=4, etp=2)
    d, p = 2 * B * S * K * H * EB, 2 * B * S * K * EB  # the tokens, and their probabilities (half the pair a pass)
    assert d == 128 * 2**20
    assert got == pytest.approx(2 * LAYERS * 2 * (_t("allgather", d, 2) + _t("reducescatter", d, 2)
                                                  + 0.5 * (_t("allgather", p, 2) + _t("reducescatter", p, 2))),
                                rel=1e-9)
