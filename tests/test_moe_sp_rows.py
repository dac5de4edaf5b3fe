"""Per-GPU rows of the MoE block under tensor and sequence parallelism (docs/model.md#moe-rows).

Megatron-Core (NVIDIA/Megatron-LM@d98e8a64dd) hands each TP rank's MoELayer its sequence shard [s/(cp t), b, h]
under SP: the router (moe_layer.py ``route``) and the all-to-all dispatcher's permutation (token_dispatcher.py
``dispatch_preprocess``, L624-680) work on the rank's own T/t tokens; the EP all-to-all and the expert-TP
all-gather (L728-751) bring load u T k / t rows to the GPU's experts, which ``sort_chunks_by_idxs`` orders by local
expert and back (L752-795, L796-823); ``unpermute`` sums the T/t k copies back (L876-908). Without SP every TP rank
holds, routes and permutes all T tokens. The flex dispatcher permutes only the tokens its fused dispatch delivers
(L1424-1469), the allgather dispatcher the gathered tokens' local copies (L305-353). The expected values below are
worked out by hand from those row counts on T = 4096 tokens, tp 2, ep 2, E 8, k 2 (and tiny-moe through the step),
not read back from the implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from grid_helpers import HBM as H100_HBM
from grid_helpers import TINY_MOE

from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)
H, E, K, FE = 1024, 8, 2, 256
SH = shape(layers=2, hidden=H, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=E, moe_top_k=K,
           moe_ffn_hidden=FE)
B, S, TP, EP = 2, 2048, 2, 2
T = B * S  # 4096 tokens of the micro-batch, before any TP split


def _gemm(m: float, n: float, k: float, count: float = 1.0) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return count * max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def _layer(sp: bool, etp: int, **over) -> compute.LayerTime:
    kw = dict(micro_batch=B, seq_len=S, tp=TP, ep=EP, etp=etp, sequence_parallel=sp, moe=True,
              flash_attention=True, recompute="selective", recompute_modules=memory.recompute_modules_code("moe"))
    kw.update(over)
    return compute.layer_compute_time(SH, **kw, **KW)


def _block(own: float, etp: int) -> float:
    """The MoE block's forward on one GPU (what selective recompute of moe repeats): router own x E x h; E/ep = 4
    experts of ep etp T k / (E tp) = 1024 etp rows each, up 2 f_e / etp x h, down h x f_e / etp; bytes: SwiGLU
    3 eb T k f_e / tp, permute eb h (own + own k), unpermute eb h (own k + own), sort + unsort 4 eb h R with
    R = etp T k / tp the rows the exchange brings. The experts' GEMMs compute half a 128-row tile more than a
    tile-multiple mean count (docs/model.md#expert-tile-padding)."""
    rows = 1024 * etp + 64
    gemms = _gemm(own, E, H) + _gemm(rows, 2 * FE / etp, H, 4) + _gemm(rows, H, FE / etp, 4)
    R = etp * T * K / TP
    disp = 2 * H * (2 * own * (K + 1) + 4 * R)
    act = 3 * 2 * T * K * FE / TP
    return gemms + (act + disp) / (HBM * MEM)


@pytest.mark.parametrize("etp", [1, 2])
def test_sp_routes_and_permutes_the_ranks_own_tokens(etp: int) -> None:
    # SP: 2048 tokens a rank; etp 1: R = 4096 rows, etp 2: R = 8192 (the expert-TP all-gather doubles them)
    assert float(_layer(True, etp).recompute) == pytest.approx(_block(T / TP, etp), rel=1e-12)


@pytest.mark.parametrize("etp", [1, 2])
def test_without_sp_every_tp_rank_routes_and_permutes_all_tokens(etp: int) -> None:
    assert float(_layer(False, etp).recompute) == pytest.approx(_block(T, etp), rel=1e-12)


def test_router_flops_count_the_ranks_own_tokens() -> None:
    """forward_flops is this GPU's: the router 2 own h E (own = T/tp with SP, T without) + the experts 2 T k (3) h
    f_e / tp (SwiGLU: up, gate, down) on an MLP-only layer; the model's FLOP count is untouched (one router per
    token, transformer.mlp_gemm_flops)."""
    experts = 2 * T * K * FE * H / TP * 3
    for sp, own in ((True, T / TP), (False, T)):
        got = float(_layer(sp, 1, attention=False, recompute="none").forward_flops)
        assert got == pytest.approx(2 * own * H * E + experts, rel=1e-12)


def test_permutation_backward_moves_the_forward_bytes_once() -> None:
    """etp 2 vs 1 (SP) changes only the sort rows (R 8192 vs 4096) among the memory-bound bytes: the forward's
    memory time grows by 4 eb h (8192 - 4096) at the roofline and the backward's by as much, not twice (a gather's
    gradient is the scatter of the same rows); the experts' activation bytes (T k f_e / tp) do not depend on etp."""
    one, two = _layer(True, 1, recompute="none"), _layer(True, 2, recompute="none")
    extra = 4 * 2 * H * (8192 - 4096) / (HBM * MEM)
    assert float(two.forward_memory - one.forward_memory) == pytest.approx(extra, rel=1e-9)
    bwd_mem = [float(x.backward - 2 * (x.forward - x.forward_memory)) for x in (one, two)]
    assert bwd_mem[1] - bwd_mem[0] == pytest.approx(extra, rel=1e-9)


def test_one_local_expert_has_no_sort() -> None:
    """ep = E: one expert a rank, ``num_local_experts > 1`` false, no sort_chunks_by_idxs: the bytes are the
    permute and unpermute of the rank's own 2048 tokens only; 1 expert of 8 T k / (8 tp) = 4096 rows (+ 64, half
    a 128-row tile, in its GEMMs)."""
    got = float(_layer(True, 1, ep=E).recompute)
    own = T / TP
    gemms = _gemm(own, E, H) + _gemm(4160, 2 * FE, H) + _gemm(4160, H, FE)
    mem = (3 * 2 * T * K * FE / TP + 2 * H * 2 * own * (K + 1)) / (HBM * MEM)
    assert got == pytest.approx(gemms + mem, rel=1e-12)


def test_permutation_bytes_per_dispatcher_by_hand() -> None:
    """T 4096, tp 2 with SP (own n = 2048), ep 2 (L = 4 of E 8 local), k 2, h 1024, eb 2:
    a token misses this rank's 4 experts with probability C(4, 2) / C(8, 2) = 6 / 28;
    etp 1: R = 4096 rows, the tp_ep group's G = 1 x 2 x 2048 = 4096 tokens, N = 4096 x 22/28;
    alltoall 2 n (k + 1) + 4 R = 12288 + 16384, flex 2 (N + R), allgather N + 2 R + G."""
    N = 4096 * 22 / 28
    want = {compute.MOE_DISPATCH_ALLTOALL: 2 * 2048 * 3 + 4 * 4096,
            compute.MOE_DISPATCH_FLEX: 2 * (N + 4096),
            compute.MOE_DISPATCH_ALLGATHER: N + 2 * 4096 + 4096}
    for code, rows in want.items():
        got = compute.moe_permutation_bytes(SH, tokens=T, own=T / TP, tp=TP, ep=EP, etp=1, dispatch=code)
        assert float(got) == pytest.approx(2 * H * rows, rel=1e-12)
    # etp 2 (tp_ep = 4 ranks): R = 2 x 4096 x 2 / 2 = 8192, G = 2 x 2 x 2048 = 8192, N = 8192 x 22/28
    N2 = 8192 * 22 / 28
    flex = compute.moe_permutation_bytes(SH, tokens=T, own=T / TP, tp=TP, ep=EP, etp=2,
                                         dispatch=compute.MOE_DISPATCH_FLEX)
    assert float(flex) == pytest.approx(2 * H * 2 * (N2 + 8192), rel=1e-12)
    # the layer prices the dispatcher it is given: flex vs alltoall moves the forward's memory time by the difference
    a2a, fx = (_layer(True, 1, recompute="none", moe_dispatch=c) for c in (compute.MOE_DISPATCH_ALLTOALL,
                                                                             compute.MOE_DISPATCH_FLEX))
    diff = 2 * H * (want[compute.MOE_DISPATCH_ALLTOALL] - want[compute.MOE_DISPATCH_FLEX]) / (HBM * MEM)
    assert float(a2a.forward_memory - fx.forward_memory) == pytest.approx(diff, rel=1e-9)


def test_saved_expert_input_counts_the_gathered_rows() -> None:
    """The routed experts' FC1 input a GPU saves is the u T k / t rows (w = h wide, 2 bytes) the exchange and the
    expert-TP all-gather bring: 2 x 4096 x 2 / 2 = 4096 rows at etp 1, 8192 at etp 2; their activation (f_e / u wide
    on those rows) does not change with etp, so the layer's bytes differ by 2 h (8192 - 4096)."""
    kw = dict(micro_batch=B, seq_len=S, tp=TP, sequence_parallel=True, moe=True, flash_attention=True)
    one = memory.activation_bytes_per_layer(SH, etp=1, **kw)
    two = memory.activation_bytes_per_layer(SH, etp=2, **kw)
    assert float(two - one) == pytest.approx(2 * H * (8192 - 4096), rel=1e-12)


def test_step_prices_the_strategys_dispatcher() -> None:
    """The step hands layer_compute_time the strategy's dispatcher: tiny-moe (3 MoE layers of 4; E 64, k 4,
    h 1024) at micro-batch 2 x 2048 = 4096 tokens, tp 1, ep 8 (L = 8), every rank at the mean load: the all-to-all
    dispatcher's 2 x 4096 x 5 + 4 x 16384 rows against the flex dispatcher's 2 (N + 16384), N = 8 x 4096 (1 -
    C(56, 4) / C(64, 4)); the forward differs by 3 MoE layers x 2 h (the difference) bytes at the H100's HBM rate."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, tr)
    layers = np.asarray([4.0])
    grids = [grid_from_strategy(StrategySpec(dp=8, ep=8, moe_flex_dispatcher=flex), tr, 8, job)
             for flex in (False, True)]
    fwd = [float(layer_compute._compute_per_microbatch(job, g, layers)["forward"][0]) for g in grids]
    N = 8 * 4096 * (1 - math.comb(56, 4) / math.comb(64, 4))
    rows = (2 * 4096 * 5 + 4 * 16384) - 2 * (N + 16384)
    assert fwd[0] - fwd[1] == pytest.approx(3 * 2 * 1024 * rows / H100_HBM, rel=1e-6)
