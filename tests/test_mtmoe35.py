"""MaxText's dropping MoE (docs/model.md#maxtext-dropping-moe): on the XLA layer, drop-and-pad dispatches through
einsums against one-hot capacity masks (AI-Hypercomputer/maxtext@14b5876ea MaxText/layers/moe.py ``dense_matmul``,
``generate_masks``) and runs the experts on capacity buffers. Checked by hand on a small shape (E 4, k 2, cf 1.25,
T = s = 1024, h 256, f_e 512): the capacity C = 1.25 x 1024 x 2 / 4 = 640 rows an expert, the buffers E C = 2560
rows; the FLOPs of the dispatch, the combine, the experts and the router counted from the einsum strings; the
backward's three einsum GEMMs (the bool dispatch mask has no gradient); the mask bytes; and the capacity factor
priced at ep 1."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import Job, StrategyGrid, build_job, check_moe_rank_imbalance, grid_from_strategy
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.stage_memory import memory_parts
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, TransformerWorkload, load_cluster, notices
from scalemodel.specs.workload import MoESpec

E, K, CF, S, H, FE = 4, 2, 1.25, 1024, 256, 512
SH = shape(layers=2, hidden=H, heads=4, kv_heads=4, head_dim=64, vocab=1000, gated_mlp=True, moe_experts=E,
           moe_top_k=K, moe_ffn_hidden=FE)
PEAK = 1e15
#: every GEMM at the peak (gemm_max 1, no half-dimension) and memory free: a time is FLOPs / peak
FLOPS_ONLY = dict(peak_flops=PEAK, gemm_max=1.0, gemm_half_dim=0.0, memory_bandwidth=1e30, memory_efficiency=1.0)

# by hand, one sequence of 1024 tokens
CAP = 640  # C = cf k s / E = 1.25 x 2 x 1024 / 4 (MaxText: int(ceil(2048 / 4) x 1.25) = 640)
DISPATCH = 2 * S * (E * CAP) * H  # BSM,BSEC -> EBCM: contraction over S for every (E, C, M)
COMBINE = 2 * (E * CAP) * S * H  # EBCM,BSEC -> BSM: contraction over (E, C) for every (S, M)
EXPERTS = E * (2 * CAP * (2 * FE) * H + 2 * CAP * H * FE)  # EBCM,EMH -> EBCH for wi_0, wi_1 and wo on C rows each
ROUTER = 2 * S * E * H


def test_einsum_flops_and_mask_bytes_by_hand() -> None:
    """The dispatch and the combine are 2 s E C h = 1,342,177,280 FLOPs each (= 2 cf k s h a token, 1,310,720),
    the same (E C, h, s) GEMM, so the backward's three (the inputs' gradient of the dispatch, the buffers' and the
    combine mask's gradients of the combine) take 1.5 x the forward; the masks are s E C = 2,621,440 elements: the
    combine mask (2 bytes) and the bool dispatch mask (1) written forward, the combine mask's gradient written and
    read backward (2 + 2)."""
    assert DISPATCH == COMBINE == 1_342_177_280 and DISPATCH / S == 2 * CF * K * S * H
    ed = compute.moe_einsum_dispatch(SH, micro_batch=1, seq_len=S, capacity_factor=CF, elem_bytes=2.0, **FLOPS_ONLY)
    assert float(ed.forward_flops) == pytest.approx(DISPATCH + COMBINE, rel=1e-12)
    assert float(ed.forward) == pytest.approx((DISPATCH + COMBINE) / PEAK, rel=1e-12)
    assert float(ed.backward) == pytest.approx(1.5 * (DISPATCH + COMBINE) / PEAK, rel=1e-12)
    assert float(ed.mask_forward_bytes) == pytest.approx(3 * 2_621_440, rel=1e-12)
    assert float(ed.mask_backward_bytes) == pytest.approx(4 * 2_621_440, rel=1e-12)
    # a micro-batch of 3 sequences: 3 x everything; tensor parallelism 2 splits h
    ed3 = compute.moe_einsum_dispatch(SH, micro_batch=3, seq_len=S, capacity_factor=CF, tp=2, elem_bytes=2.0,
                                      **FLOPS_ONLY)
    assert float(ed3.forward_flops) == pytest.approx(3 * (DISPATCH + COMBINE) / 2, rel=1e-12)
    assert float(ed3.mask_forward_bytes) == pytest.approx(3 * 3 * 2_621_440, rel=1e-12)


def test_one_moe_block_forward_and_backward_gemms_by_hand() -> None:
    """One MoE block (no attention) at every GEMM on the peak: the forward is the router (2 s E h), the experts on
    640 capacity rows each (a tile multiple, no spread under drop-and-pad) and the two einsums; the backward 2 x the
    router's and experts' + 3 einsum GEMMs. With the permutation dispatcher instead the einsums are gone and the
    experts keep the same 640 rows."""
    kw = dict(moe=True, attention=False, micro_batch=1, seq_len=S, moe_load=CF, moe_pad_to_capacity=True,
              **FLOPS_ONLY)
    ein = compute.layer_compute_time(SH, moe_dispatch=compute.MOE_DISPATCH_EINSUM, **kw)
    a2a = compute.layer_compute_time(SH, moe_dispatch=compute.MOE_DISPATCH_ALLTOALL, **kw)
    assert float(ein.forward_gemm) * PEAK == pytest.approx(ROUTER + EXPERTS + DISPATCH + COMBINE, rel=1e-9)
    assert float(a2a.forward_gemm) * PEAK == pytest.approx(ROUTER + EXPERTS, rel=1e-9)
    assert float(ein.backward) * PEAK == pytest.approx(2 * (ROUTER + EXPERTS) + 1.5 * (DISPATCH + COMBINE), rel=1e-9)
    assert float(ein.forward_flops) == pytest.approx(ROUTER + K * S * (3 * 2 * H * FE) + DISPATCH + COMBINE,
                                                     rel=1e-9)  # the experts' FLOP count stays the tokens'


def test_mask_bytes_replace_the_permutations() -> None:
    """Memory-bound bytes at 1 B/s and free GEMMs: the einsum dispatch moves the masks (3 x 2,621,440 bytes forward,
    4 x backward) and no permutation, where the all-to-all dispatcher's permutations move, at ep 1 (4 local experts),
    eb h (2 n (k + 1) + 4 R) = 2 x 256 x (2 x 1024 x 3 + 4 x 2560) = 8,388,608 bytes each way (R = 1.25 x 2 x 1024
    the capacity rows)."""
    mem = dict(peak_flops=1e30, gemm_max=1.0, gemm_half_dim=0.0, memory_bandwidth=1.0, memory_efficiency=1.0)
    kw = dict(moe=True, attention=False, micro_batch=1, seq_len=S, moe_load=CF, moe_pad_to_capacity=True, **mem)
    ein = compute.layer_compute_time(SH, moe_dispatch=compute.MOE_DISPATCH_EINSUM, **kw)
    a2a = compute.layer_compute_time(SH, moe_dispatch=compute.MOE_DISPATCH_ALLTOALL, **kw)
    perm = 2 * H * (2 * S * (K + 1) + 4 * CF * K * S)
    assert perm == 8_388_608
    assert float(ein.forward_memory - a2a.forward_memory) == pytest.approx(3 * 2_621_440 - perm, rel=1e-9)
    # at 1 B/s the GEMMs are memory-bound too: the einsums' backward is 3 GEMMs, not the 2 x 2 the rest of the
    # backward takes, one (E C, h, s) GEMM's operands less: (2560 x 1024 + 1024 x 256 + 2560 x 256) x 2 bytes
    one_gemm = (E * CAP * S + S * H + E * CAP * H) * 2
    assert one_gemm == 7_077_888
    mem_bwd = (float(ein.backward - 2 * (ein.forward - ein.forward_memory))
               - float(a2a.backward - 2 * (a2a.forward - a2a.forward_memory)))
    assert mem_bwd == pytest.approx(4 * 2_621_440 - perm - one_gemm, rel=1e-6)


TINY = TransformerWorkload(name="tiny-e4", layers=2, hidden=H, heads=4, ffn_hidden=FE, vocab=1000, seq_len=S,
                           gated_mlp=True, biases=False, tied_embeddings=False, dropout=False,
                           moe=MoESpec(experts=E, top_k=K, ffn_hidden=FE))


@pytest.mark.parametrize("ep", [1, 4])
def test_the_capacity_factor_is_priced_at_every_ep(ep: int) -> None:
    """Under drop-and-pad every expert holds c x its mean rows whatever ep (MaxText's C = ceil(s k / E) c a sequence;
    Megatron's capacity ceil(T k / E c)): the load is c at ep 1 too, and dropless routing at ep 1 stays at 1."""
    cl = load_cluster("tpu-v6e-pod")
    pad = TrainingSpec(global_batch=8, micro_batch=1, moe_rank_imbalance=CF, moe_pad_to_capacity=True)
    job = build_job(cl, TINY, pad)
    g = grid_from_strategy(StrategySpec(dp=8, ep=ep, zero="fsdp", layer_impl="xla"), pad, 8, job)
    assert float(np.asarray(layer_compute.moe_rank_load(job, g, 1.0)).ravel()[0]) == CF
    if ep == 1:
        free = TrainingSpec(global_batch=8, micro_batch=1)
        job1 = build_job(cl, TINY, free)
        g1 = grid_from_strategy(StrategySpec(dp=8, ep=1, zero="fsdp", layer_impl="xla"), free, 8, job1)
        assert float(np.asarray(layer_compute.moe_rank_load(job1, g1, 1.0)).ravel()[0]) == 1.0


def test_the_xla_layer_selects_the_einsum_dispatch() -> None:
    """The step's MoE layers at ep 1, micro-batch 1, one sequence: xla with drop-and-pad runs the einsums, the
    forward of each MoE layer longer by exactly their two GEMMs (gemm_time at (E C, h, s)) plus their mask bytes
    less the permutations' at the accelerator's HBM rate, against the same job priced without drop-and-pad but at
    the same rows (a stated imbalance at ep 1 prices nothing, so the experts' rows differ: compared through the
    routed experts' GEMM difference by hand)."""
    cl = load_cluster("tpu-v6e-pod")
    pad = TrainingSpec(global_batch=8, micro_batch=1, moe_rank_imbalance=CF, moe_pad_to_capacity=True)
    job = build_job(cl, TINY, pad)
    layers = np.asarray([2.0])
    fwd = {}
    for impl in ("xla", "torchtitan"):
        g = grid_from_strategy(StrategySpec(dp=8, ep=1, zero="fsdp", layer_impl=impl), pad, 8, job)
        fwd[impl] = float(layer_compute._compute_per_microbatch(job, g, layers)["forward"][0])
    kw = dict(peak_flops=job.peak_flops, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
              memory_bandwidth=job.memory_bandwidth, memory_efficiency=job.memory_efficiency)
    einsums = 2 * float(compute.gemm_time(E * CAP, H, S, **kw))
    masks = 3 * S * E * CAP
    perm = 2 * H * (2 * S * (K + 1) + 4 * CF * K * S)
    eltwise = S * float(compute.layer_eltwise_bytes(SH, "xla", mlp=False, micro_batch=1)[0]
                        - compute.layer_eltwise_bytes(SH, "torchtitan", mlp=False, micro_batch=1)[0]) / (
        job.memory_bandwidth * job.memory_efficiency)
    hbm = job.memory_bandwidth * job.memory_efficiency
    want = 2 * (einsums + (masks - perm) / hbm + eltwise)
    assert fwd["xla"] - fwd["torchtitan"] == pytest.approx(want, rel=1e-6)


def test_the_capacity_factor_bound_under_drop_and_pad() -> None:
    """A capacity factor is bounded by a capacity of every token, E / k (2 here), at every ep; 1.25 at ep 1 passes
    (it prices there); 2.5 is refused."""
    check_moe_rank_imbalance(CF, E, K, None)
    with pytest.raises(InputError, match="moe_rank_imbalance"):
        check_moe_rank_imbalance(2.5, E, K, None)


@pytest.mark.parametrize("tp", [1, 2])
def test_capacity_buffers_and_masks_in_memory(tp: int) -> None:
    """One MoE block's saved activations at recompute none (b 1, s 1024, 16-bit, expert TP 1): the capacity factor
    1.25 takes the routed rows' bytes, k (s b h e + (2 e + e) s b f_e) = 2 (524,288 + 3,145,728) = 7,340,032, a
    quarter up (1,835,008); the einsum dispatch adds its two masks, (1 + 2) s b c k s = 7,864,320 bytes, whole on
    every tensor rank, and the experts' output buffer 2 c k s b h = 1,310,720 (h split by t)."""
    kw = dict(micro_batch=1, seq_len=S, tp=tp, etp=1, recompute="none", moe=True, attention=False, mlp=True)
    base = float(memory.activation_bytes_per_layer(SH, **kw))
    pad = float(memory.activation_bytes_per_layer(SH, moe_capacity=CF, **kw))
    ein = float(memory.activation_bytes_per_layer(SH, moe_capacity=CF, moe_einsum=True, **kw))
    routed = K * (2 * S * H + 3 * 2 * S * FE)
    assert routed == 7_340_032
    assert pad - base == pytest.approx((CF - 1) * routed / tp, rel=1e-12)
    assert ein - pad == pytest.approx(3 * S * CF * K * S + 2 * CF * K * S * H / tp, rel=1e-12)


def test_the_row_shape_memory_grows_by_the_buffers() -> None:
    """The step's memory for a drop-and-pad job on the XLA layer holds the capacity rows and the masks: tiny-e4 at
    recompute none, ep 1, micro-batch 1: the activations of its 2 MoE layers grow by 2 x (the routed quarter + the
    masks + the output buffer) against the same job dropless (no moe_pad_to_capacity)."""
    cl = load_cluster("tpu-v6e-pod")
    acts = []
    for pad in (False, True):
        tr = TrainingSpec(global_batch=8, micro_batch=1, **({"moe_rank_imbalance": CF, "moe_pad_to_capacity": True}
                                                            if pad else {}))
        job = build_job(cl, TINY, tr)
        g = grid_from_strategy(StrategySpec(dp=8, ep=1, zero="fsdp", layer_impl="xla"), tr, 8, job)
        acts.append(float(np.asarray(layer_compute_memory(job, g)).ravel()[0]))
    routed = K * (2 * S * H + 3 * 2 * S * FE)
    per_layer = (CF - 1) * routed + 3 * S * CF * K * S + 2 * CF * K * S * H
    assert acts[1] - acts[0] == pytest.approx(2 * per_layer, rel=1e-9)


def layer_compute_memory(job: Job, g: StrategyGrid) -> np.ndarray:
    """The activations of the step's memory model (engine.stage_memory, the peak stage)."""
    return memory_parts(job, g, microbatches(g))["activations"]


def test_the_einsum_dispatch_at_cp_says_what_it_leaves_out() -> None:
    """At cp 2 the einsum dispatch runs the experts on the whole sequence's capacity rows on every context rank and
    sums over the context shards, which the model does not price: the grid is built, with a warning naming the field;
    at tp 1 / cp 1 nothing is said, nor at tp 2, whose combine-mask gradient all-reduce is priced (gaps36,
    tests/test_gaps36.py)."""
    cl = load_cluster("tpu-v6e-pod")
    tr = TrainingSpec(global_batch=8, micro_batch=1, moe_rank_imbalance=CF, moe_pad_to_capacity=True)
    job = build_job(cl, TINY, tr)
    for st in (StrategySpec(dp=8, ep=1, zero="fsdp", layer_impl="xla"),
               StrategySpec(dp=4, tp=2, ep=1, zero="fsdp", layer_impl="xla")):
        with notices.collecting() as said:
            grid_from_strategy(st, tr, 8, job)
        assert not any("einsum dispatch" in w for w in said)
    with notices.collecting() as said:
        grid_from_strategy(StrategySpec(dp=4, cp=2, ep=1, zero="fsdp", layer_impl="xla"), tr, 8, job)
    assert any("moe_pad_to_capacity = true on layer_impl xla (the einsum dispatch) at cp 2" in w for w in said)
