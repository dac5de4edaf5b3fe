"""What a multi-token prediction module adds to the step's traffic and casts, counted by hand.

Each of the D passes runs one transformer block of the last layer's kind (Megatron-Core multi_token_prediction.py,
core_v0.15.0: DeepSeek-V3's block is an MoE layer; a hybrid's ``*E`` block is an attention layer then an MoE layer),
so per micro-batch each pass adds exactly one such block's collectives: its TP reductions forward and backward (and
forward again under full recompute, which Megatron-Core applies to every module), one attention layer's CP ring
(at cp 2 three exchanges: K, V forward; K, V then dK, dV backward) and one MoE layer's four all-to-alls (dispatch +
combine, forward and backward). The collectives are priced at 1 s each here, so every term reads as a count.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
import yaml
from conftest import ROOT
from msgspec.structs import replace

from scalemodel.choices import CpCommType
from scalemodel.commands.common import build_specs
from scalemodel.cost import transformer
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

ONE = {k: np.ones(1) for k in ("tp", "tp_last", "cp", "ep_tokens")}
#: with sequence parallelism the pair ``tp`` (1 s) splits into its forward all-gather (1/4 s, ``tp_fwd_ag``) and
#: reduce-scatter (3/4 s); the backward's output-gradient gather (1/2 s, ``tp_grad_ag``, docs/model.md#tp-comm) and
#: input re-gather (1/8 s, ``tp_regather``, docs/model.md#sp-regather) get their own values, so each reads off a sum
SP_PARTS = {"tp_fwd_ag": np.full(1, 0.25), "tp_grad_ag": np.full(1, 0.5), "tp_regather": np.full(1, 0.125)}
#: the p2p CP ring's backward sends K, V with the accumulated dK, dV as one buffer of twice a K, V block's bytes
#: (``cp_kv_dkv``, docs/model.md#cp-comm): 2 s at 1 s a block, so it reads as two K, V exchanges
CP_PARTS = {"cp_kv_dkv": np.full(1, 2.0)}
UNIT = {**ONE, **SP_PARTS, **CP_PARTS, "pp": np.zeros(1), "pp_gather": np.zeros(1)}


def _small_moe_job(mtp: int, strategy: dict[str, Any]) -> tuple[Any, Any]:
    # 3 layers, the first dense, layers 2 and 3 MoE (the last one MoE: the MTP block is an MoE layer)
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="deepseek-v3", sets=[],
                                 training={"precision": "bf16", "global_batch": 64, "micro_batch": 1},
                                 strategy=strategy)
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    sh = transformer.shape(layers=3, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True,
                           moe_experts=8, moe_top_k=2, moe_ffn_hidden=32, moe_first_dense=1,
                           tied_embeddings=False, mtp_layers=mtp)
    job = replace(job, shape=sh)
    return job, grid_from_strategy(st, tr, 8, job)


def _counts(job: Any, g: Any, layers: float = 3.0) -> dict[str, float]:
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * layers, logits_on_stage=True)
    # nothing hides the collectives: no weight-gradient window, no data-gradient GEMMs under the re-gathers (the
    # gathering linears' share of the forward GEMMs, sp_regather), no attention core under the ring
    comp = dict(comp, wgrad=np.zeros(1), core_per_layer=np.zeros(1), gemm_per_layer=np.zeros(1),
                mtp_gemm=np.zeros(1))
    mp = model_parallel_comm._model_parallel_comm(job, g, comp, UNIT)
    return {k: float(np.ravel(mp[k])[0]) for k in ("tp", "cp", "ep")}


@pytest.mark.parametrize("mtp", [0, 1, 2])
def test_ep_all_to_alls_per_micro_batch_by_hand(mtp: int) -> None:
    """2 MoE layers + D MoE blocks, 4 all-to-alls each: 8 + 4 D (before the fix the blocks were also counted among
    the stage's layers at its MoE share 2/3: 8 + 4 D + 8 D / 3)."""
    job, g = _small_moe_job(mtp, {"ep": 2})
    assert _counts(job, g)["ep"] == pytest.approx(2 * 4 + mtp * 4, rel=1e-12)


@pytest.mark.parametrize("mtp", [0, 1, 2])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_tp_reductions_per_micro_batch_by_hand(mtp: int, recompute: str) -> None:
    """2 reductions per layer and pass (after attention, after the MLP), 3 layers + D blocks, forward and backward;
    full recompute repeats the forward of every layer and every block: (3 + D) x 2 x (2 or 3). Without sequence
    parallelism, so on Megatron-DeepSpeed's layer (layer_impl megatron_legacy, whose era the blocking
    tp_async_allreduce false is): Megatron-Core refuses MoE at tp > 1 without SP (docs/model.md#moe-sp-required)."""
    job, g = _small_moe_job(mtp, {"tp": 2, "recompute": recompute, "tp_async_allreduce": False,
                                  "layer_impl": "megatron_legacy"})
    passes = 3 if recompute == "full" else 2
    assert _counts(job, g)["tp"] == pytest.approx((3 + mtp) * 2 * passes, rel=1e-12)


@pytest.mark.parametrize("mtp", [0, 1, 2])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_tp_reductions_under_megatron_core_sp_by_hand(mtp: int, recompute: str) -> None:
    """The same count on Megatron-Core's layer, with the SP it needs for MoE at tp > 1, etp 1 and no shared experts:
    the dense layer runs its 2 block collectives (RS + AG) per pass, each MoE layer and each MoE block only its
    attention block's 1 (no expert-TP pair at etp 1, docs/model.md#tp-comm-moe): N = 2 + 2 + D a pass. The forward
    (and a full recompute's) runs N pairs, 1 s each; the backward N output-gradient gathers (1/2 s, in place of the
    pair's 1/4 s forward gather), the pairs' N reduce-scatters' mirrors (3/4 s) and N input re-gathers (1/8 s):
        N (1 + 1/2 + 3/4 + 1/8) = 2.375 N,  + N under full recompute."""
    job, g = _small_moe_job(mtp, {"tp": 2, "sequence_parallel": True, "etp": 1, "recompute": recompute})
    n = 2 + 2 + mtp
    want = n * (1.0 + 0.5 + 0.75 + 0.125) + (n if recompute == "full" else 0.0)
    assert _counts(job, g)["tp"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mtp", [0, 1, 2])
@pytest.mark.parametrize("cp", [2, 4])
def test_cp_ring_per_micro_batch_by_hand(mtp: int, cp: int) -> None:
    """Transformer Engine's p2p ring over cp ranks (AttnFuncWithCPAndKVP2P, NVIDIA/TransformerEngine@d0067d0
    transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py, docs/model.md#cp-comm), per
    attention layer and MTP block, nothing hiding it: the forward's cp - 1 K, V exchanges (1 s each); the backward's
    K, V first (1 s), dK, dV last (1 s) and, between, cp - 2 buffers of K, V with dK, dV (``cp_kv_dkv``, 2 s each):
        cp 2: 1 + 1 + 1 = 3,   cp 4: 3 + 1 + 2 x 2 + 1 = 9,   x (3 + D)."""
    job, g = _small_moe_job(mtp, {"cp": cp})
    assert int(np.ravel(g.cp_comm_type)[0]) == CpCommType.P2P
    per_layer = {2: 3.0, 4: 9.0}[cp]
    assert _counts(job, g)["cp"] == pytest.approx(per_layer * (3 + mtp), rel=1e-12)


def _chunking(job: Any, g: Any, layers: float = 3.0) -> tuple[float, dict[str, Any]]:
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * layers, logits_on_stage=True)
    return float(np.ravel(model_parallel_comm._model_parallel_comm(job, g, comp, UNIT)["chunking"])[0]), comp


@pytest.mark.parametrize("mtp", [0, 1, 2])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_tp_overlap_chunking_counts_each_block_as_a_layer(mtp: int, recompute: str) -> None:
    """tp_comm_overlap splits every userbuffers GEMM beside a TP collective: the layers', not the MTP blocks' (since
    mtpub32: Megatron-Core builds each MTP block after eh_proj turned the shared config's tp_comm_overlap off,
    docs/model.md#ub-off; before, they were split at the block's shares below). tp 2, split n = tp = 2 for ring
    exchange and 4 for the pipeline; a / r, the AG- / RS-side
    userbuffers shares of the GEMM FLOPs (docs/model.md#ub-shares), by hand: QKV 64 x 192 = 12,288, O 64 x 64 = 4,096,
    the dense MLP 2 x 8,192 up and 8,192 down (128 x 64), an MoE layer's routed top-2 x 3 x 32 x 64 = 12,288 and router
    64 x 8 = 512 (no shared experts), on neither side (review21j; the router since mtp32). The 3 layers (1 dense,
    2 MoE): AG 3 x 12,288 + 16,384 = 53,248, RS 3 x 4,096 + 8,192 = 20,480, total 53,248 + 20,480 + 2 x 12,800 =
    99,328:
        a = 52/97,   r = 20/97,   forward a (2 - 1) + r (4 - 1) = 112/97,   data gradient r (2 - 1) = 20/97;
    the MTP block, one MoE layer (the last layer's kind: its own shares since mtp32, not the layers' mean): AG 12,288,
    RS 4,096 of 29,184: a = 8/19, r = 8/57, forward 16/19, data gradient 8/57. 3 layers + D blocks, full recompute
    repeating the forward of all of them, the layers at their mean forward GEMM time t_gemm, the blocks unsplit:
        d0 / (T + d0) x 3 t_gemm (112/97 (1 or 2) + 20/97)   (before mtpub32: + t_mtp (16/19 (1 or 2) + 8/57))."""
    job, g = _small_moe_job(mtp, {"tp": 2, "sequence_parallel": True, "tp_comm_overlap": True,
                                  "recompute": recompute})
    got, comp = _chunking(job, g)
    assert float(np.ravel(comp["recomputed_layers"])[0]) == 3.0
    d0 = job.gemm_half_dim
    T = 1.0 * job.seq_len  # micro-batch 1, cp 1
    passes = 2.0 if recompute == "full" else 1.0
    layers = float(np.ravel(comp["gemm_per_layer"])[0]) * 3
    want = d0 / (T + d0) * layers * (112 / 97 * passes + 20 / 97)
    assert got == pytest.approx(want, rel=1e-12)
    assert (float(np.ravel(comp["mtp_gemm"])[0]) > 0) == (mtp > 0)


def _super_job(mtp: int, strategy: dict[str, Any]) -> tuple[Any, Any]:
    w = msgspec.convert(yaml.safe_load((ROOT / "examples/workloads/nemotron-3-super.yaml").read_text()),
                        TransformerWorkload)
    w = w.model_copy(update={"mtp_layers": mtp})
    tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=8192)
    job = build_job(load_cluster("dgx-h100"), w, tr, straggler_cv=0.0)
    return job, grid_from_strategy(StrategySpec(**strategy), tr, 8, job)


@pytest.mark.parametrize("mtp", [1, 2])
def test_hybrid_star_e_block_counts_once_per_pass(mtp: int) -> None:
    """Nemotron 3 Super: 88 one-block layers (40 M, 8 *, 40 E, read off the pattern), a shared *E module run D times.
    Per pass the block adds two one-block layers' TP reductions (1 each), one attention layer's CP ring and one MoE
    layer's all-to-alls. At tp 2 the MoE layers need (and the grid turns on) sequence parallelism, so each of the
    88 + 2 D block collectives is a forward pair (1 s) and, in the backward, an output-gradient gather (1/2 s), the
    pair's reduce-scatter mirror (3/4 s) and an input re-gather (1/8 s), nothing hiding them (the test_tp_reductions
    _under_megatron_core_sp_by_hand count):
        EP 4 (40 + D),  TP 2.375 (88 + 2 D),  CP 3 (8 + D)
    (cp 2: the p2p ring's forward K, V exchange and backward K, V then dK, dV, no K, V + dK, dV buffer between)."""
    pattern = yaml.safe_load((ROOT / "examples/workloads/nemotron-3-super.yaml").read_text())["hybrid"]["pattern"]
    n_att, n_moe, n_all = pattern.count("*"), pattern.count("E"), len(pattern)
    assert (n_att, n_moe, n_all) == (8, 40, 88)
    job, g = _super_job(mtp, {"ep": 2})
    assert _counts(job, g, n_all)["ep"] == pytest.approx(4 * (n_moe + mtp), rel=1e-12)
    job, g = _super_job(mtp, {"tp": 2, "tp_async_allreduce": False})
    assert bool(np.ravel(g.sequence_parallel)[0])
    assert _counts(job, g, n_all)["tp"] == pytest.approx(2.375 * (n_all + 2 * mtp), rel=1e-12)
    job, g = _super_job(mtp, {"cp": 2})
    assert _counts(job, g, n_all)["cp"] == pytest.approx(3 * (n_att + mtp), rel=1e-12)


@pytest.mark.parametrize("mtp", [1, 2])
def test_hybrid_star_e_block_chunks_as_two_layers(mtp: int) -> None:
    """Nemotron 3 Super, tp_comm_overlap: the *E block's GEMMs (an attention block's and an MoE block's, its own
    forward GEMM time t_mtp per pass) are not split (mtpub32: Megatron-Core builds the MTP block without userbuffers,
    docs/model.md#ub-off), so the chunking cost is the 88 layers' whatever D; until mtpub32 it grew by
    (88 t_gemm c_L + D t_mtp c_M) / (88 t_gemm c_L) (the per-layer cost does not depend on D), c = a + 4 r the
    forward a (2 - 1) + r (4 - 1) and data-gradient r (2 - 1) per unit of forward GEMM time at tp 2, a / r the AG- /
    RS-side shares (docs/model.md#ub-shares), by hand in units of 4096 x (weight elements per token) / tp: QKV
    32 x 128 + 2 x 2 x 128 = 4,608, O 4,096, the ungated shared experts' FC1 and FC2 2 x 2688 = 5,376 each, a Mamba
    in_proj 2 x 8,192 + 2 x 8 x 128 + 128 = 18,560 and out_proj 8,192; on neither side an MoE layer's routed
    22 x 2 x 2688 x 1024 / 4096 = 29,568, router 512 and LatentMoE projections 2 x 1024 (32,128). The layers (8 *,
    40 E, 40 M): AG 994,304, RS 575,488 of 2,854,912, c_L = 3,296,256 / 2,854,912; the MTP block (its own since
    mtp32: one * and one E, not the pattern's Mamba-heavy mean): AG 9,984, RS 9,472 of 51,584, c_M = 47,872 / 51,584.
    """
    strategy = {"tp": 2, "sequence_parallel": True, "tp_comm_overlap": True}
    job0, g0 = _super_job(0, strategy)
    job, g = _super_job(mtp, strategy)
    base, _ = _chunking(job0, g0, 88.0)
    got, comp = _chunking(job, g, 88.0)
    assert base > 0
    t_mtp = float(np.ravel(comp["mtp_gemm"])[0]) / mtp
    _, comp1 = _chunking(*_super_job(1, strategy), 88.0)
    assert t_mtp == pytest.approx(float(np.ravel(comp1["mtp_gemm"])[0]), rel=1e-12)  # per pass, whatever D
    c_block = 47872 / 51584
    assert got / base == pytest.approx(1.0, rel=1e-12)
    assert mtp * t_mtp * c_block > 0.0  # the blocks' userbuffers GEMM seconds the chunking no longer splits


def _fp8_job(mtp: int, shared: bool) -> tuple[Any, Any]:
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="gpt-7.5b", sets=[],
                                 training={"precision": "fp8", "fp8_recipe": "delayed", "global_batch": 4,
                                           "micro_batch": 1}, strategy={})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    sh = transformer.shape(layers=2, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True,
                           tied_embeddings=False, mtp_layers=mtp, mtp_shared=shared)
    job = replace(job, shape=sh)
    return job, grid_from_strategy(st, tr, 1, job)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_shared_module_casts_its_weights_once_per_step(recompute: str) -> None:
    """A delayed-scaling fp8 run on H100 casts each weight once per step, W (eb + 1 + 1) = 4 bytes an element (16-bit
    read, FP8 copy and its transpose written), spread over the step's m = 4 micro-batches. The MTP block (a dense
    layer: QKV 64 x 192 + O 64 x 64 + SwiGLU 3 x 64 x 128 = 40,960 weights) run D = 2 times over two modules' weights
    casts twice, over one shared module's once: the forward differs by one cast,
        4 x 40960 / 4 / (HBM x memory efficiency)  per micro-batch,
    and full recompute, which repeats the forward casts, repeats that difference in the backward."""
    job2, g = _fp8_job(2, False)
    job1, _ = _fp8_job(2, True)
    assert job2.fp8_recipe == "delayed"
    assert float(job2.shape.mtp_weight_modules) == 2 and float(job1.shape.mtp_weight_modules) == 1
    if recompute == "full":
        g = replace(g, recompute=np.full_like(g.recompute, step.Recompute.FULL))
    one_cast = 4 * 40960 / 4 / (job2.memory_bandwidth * job2.memory_efficiency)
    c2 = layer_compute._compute_per_microbatch(job2, g, np.ones(1) * 2)
    c1 = layer_compute._compute_per_microbatch(job1, g, np.ones(1) * 2)
    assert float(np.ravel(c2["forward"] - c1["forward"])[0]) == pytest.approx(one_cast, rel=1e-9)
    rec = one_cast if recompute == "full" else 0.0
    assert float(np.ravel(c2["backward"] - c1["backward"])[0]) == pytest.approx(rec, rel=1e-9, abs=1e-18)
