"""Megatron-Core's alltoall token dispatcher: the routing probabilities' all-to-all and the per-expert counts'
all-gather beside the tokens' all-to-all (docs/model.md#ep-probs-counts; NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher.preprocess`` lines 570-575 and
``token_dispatch`` lines 705-724). Values are priced by hand from the collectives, and the dispatch / combine pair is
set against the published timings of hardware/measurements/ep_alltoall.yaml."""
from __future__ import annotations

from math import comb

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost import collectives as coll
from scalemodel.cost import ep_dispatch
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

DOC = load_yaml(ROOT / "hardware" / "measurements" / "ep_alltoall.yaml")


def _point(dispatcher: str) -> dict:  # type: ignore[type-arg]
    (p,) = [q for q in DOC["points"] if q["dispatcher"] == dispatcher]
    return p  # type: ignore[no-any-return]


def test_file_names_its_sources() -> None:
    assert DOC["kind"] == "measurements" and DOC["what"] == "ep_alltoall"
    for p in DOC["points"]:
        assert p["src"] in DOC["sources"]
        unit = "us" if p["src"] == "MCORE26" else "GBps"
        assert p[f"dispatch_{unit}"] > 0 and p[f"combine_{unit}"] > 0


def test_report_dispatch_carries_the_probabilities() -> None:
    """The report's all-to-all dispatcher on GB200 at EP 64: the dispatch (tokens' all-to-all, then the
    probabilities', 4 bytes a routed row: the report's recipes route in fp32) takes 103 us more than the combine of
    the same token bytes. The model's dispatch and combine each lie within 6 % of the measured, and the dispatch's
    excess, the probabilities' all-to-all, within 25 % of the measured 103 us; without it the model's dispatch
    would equal its combine."""
    p = _point("alltoall")
    net = build_network(load_cluster(p["cluster"]))
    pl = place(p["ep"], 1, net)
    rows = p["tokens"] * p["top_k"]
    tokens = float(coll.group_time("alltoall", np.asarray(rows * p["hidden"] * 2.0), pl)) * 1e6
    probs = float(coll.group_time("alltoall", np.asarray(rows * 4.0), pl)) * 1e6
    dispatch, combine = tokens + probs, tokens
    assert abs(dispatch / p["dispatch_us"] - 1) <= 0.06, dispatch
    assert abs(combine / p["combine_us"] - 1) <= 0.06, combine
    excess = p["dispatch_us"] - p["combine_us"]
    assert abs((dispatch - combine) / excess - 1) <= 0.25, (dispatch - combine, excess)


# a small Qwen3-30B-like MoE: 4 layers, 128 experts top-8, hidden 2048
SMALL = TransformerWorkload(name="q4", layers=4, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144,
                            gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                            moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def _ep_comm(router_dtype: str | None = None, **strategy: object) -> float:
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="bf16", seq_len=4096, moe_rank_imbalance=1.0,
                      moe_router_dtype=router_dtype)
    job = build_job(load_cluster("dgx-h100"), SMALL, tr)
    st = StrategySpec(**{"tp": 1, "pp": 1, "ep": 16, "dp": 16, **strategy})  # type: ignore[arg-type]
    return float(evaluate(job, grid_from_strategy(st, tr, 16, job)).breakdown["ep_comm"][0])


@pytest.mark.parametrize("router_dtype, pb", [(None, 2.0), ("fp32", 4.0)])
def test_step_prices_the_probabilities_and_counts(router_dtype: str | None, pb: float) -> None:
    """Per MoE layer pass, by hand: 4 all-to-alls of the T k h token rows, 2 of the T k probabilities (forward
    dispatch and its backward, in the router's dtype) and 1 all-gather of the 16 ranks' 128 int64 counts; 2
    micro-batches (32 / dp 16) x 4 layers."""
    pl = place(16, 1, build_network(load_cluster("dgx-h100")))
    rows = 4096 * 8
    a = float(coll.group_time("alltoall", np.asarray(rows * 2048 * 2.0), pl))
    p = float(coll.group_time("alltoall", np.asarray(rows * pb), pl))
    c = float(coll.group_time("allgather", np.asarray(16 * 128 * 8.0), pl))
    assert _ep_comm(router_dtype) == pytest.approx(2 * 4 * (4 * a + 2 * p + c), rel=1e-9)


def test_flex_dispatcher_adds_neither() -> None:
    """DeepEP and HybridEP carry the probabilities inside their own kernels' token slots and do not run the
    alltoall dispatcher's preprocess: the flex path's price holds no NCCL all-to-all of the probabilities (its ep_comm
    is the hierarchical one, tests/test_ep_hierarchical.py), so it is below the alltoall dispatcher's here and
    unchanged by the router's dtype beyond what its own probability bytes carry."""
    flex = _ep_comm(moe_flex_dispatcher=True, moe_flex_backend="deepep")
    assert flex < _ep_comm()
    assert _ep_comm("fp32", moe_flex_dispatcher=True, moe_flex_backend="deepep") == pytest.approx(flex, rel=1e-12)


@pytest.mark.parametrize("ep", [8, 16, 32])
def test_deepep_readme_against_the_flex_price(ep: int) -> None:
    """DeepEP's own normal-kernel table (H800, 24 SMs) against the flex path's DeepEP price on h800-8, in DeepEP's
    byte count: the kernel efficiencies derived on HybridEP hold at 4 nodes (RDMA-bound) within 4 % and inside one
    node (NVLink) within 10 %; at 2 nodes the model is the faster, as for HybridEP (docs/model.md#ep-hierarchical)."""
    (p,) = [q for q in DOC["points"] if q["dispatcher"] == "deepep" and q["ep"] == ep]
    pl = place(ep, 1, build_network(load_cluster(p["cluster"])))
    T, h, E, k = p["tokens"], p["hidden"], p["experts"], p["top_k"]
    parts = ep if p["count"] == "nvl_recv" else ep // 8  # receivers counted: ranks, or nodes (RDMA)
    hit = parts * (1 - comb(E - E // parts, k) / comb(E, k))  # distinct receivers a token, its own included
    for row, measured in ((h * 2.0 * (1 + 4 / 128) / 2, p["dispatch_GBps"]), (h * 2.0, p["combine_GBps"])):
        slot = float(ep_dispatch.deepep_mean_slot_bytes(row, k))
        t = float(ep_dispatch.hierarchical_alltoall_time(T * slot, E, k, pl))
        ratio = measured / (T * hit * row / t / 1e9)
        if ep == 16:
            assert 0.75 < ratio < 0.95, ratio
        else:
            assert abs(ratio - 1) <= (0.04 if ep == 32 else 0.10), ratio


# a big shared expert beside a small routed exchange: top-1 of 64, h 4096, 16 shared experts of 1024 (one SwiGLU MLP
# of width 16384): fc1 alone is 2 x 4096 x 32768 x 4096 = 1.1 TFLOP a micro-batch, far more than any of its
# all-to-alls (4096 x 4096 x 2 bytes over 8 NVLink ranks)
BIG_SHARED = TransformerWorkload(name="bs", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                                 gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                                 moe={"experts": 64, "top_k": 1, "ffn_hidden": 1024, "shared_experts": 16})


def _shared_ep_comm(**strategy: object) -> float:
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), BIG_SHARED, tr)
    st = StrategySpec(**{"tp": 1, "pp": 1, "ep": 8, "dp": 8, "moe_shared_expert_overlap": True,
                         **strategy})  # type: ignore[arg-type]
    return float(evaluate(job, grid_from_strategy(st, tr, 8, job)).breakdown["ep_comm"][0])


@pytest.mark.parametrize("strategy, forwards", [({}, 1), ({"recompute": "selective", "recompute_modules": "moe"}, 2)])
def test_shared_expert_overlap_leaves_the_counts_gather_exposed(strategy: dict, forwards: int) -> None:  # type: ignore[type-arg]
    """The counts' all-gather runs in ``preprocess`` (token_dispatcher.py @d98e8a64dd lines 570-575), before the host
    waits for the split sizes and before the shared experts' stream is even forked (``pre_forward_comm`` /
    ``wait_current_stream``, lines 658-659, 700-701): the shared experts' fc1 runs beside the tokens' and the
    probabilities' all-to-alls only, fc2 beside the combine's. With shared experts far longer than every
    all-to-all, the tokens' and probabilities' exchanges hide whole and the counts' gathers stay: one a forward,
    2 micro-batches (16 / dp 8) x 4 MoE layers, and again in each recomputed forward (selective moe)."""
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))
    c = float(coll.group_time("allgather", np.asarray(8 * 64 * 8.0), pl))
    assert _shared_ep_comm(**strategy) == pytest.approx(2 * 4 * forwards * c, rel=1e-9)


# top-1 of 64 experts of 8192 at h 4096: each layer's expert GEMMs (1.2 TFLOP a micro-batch forward) far outlast its
# all-to-alls (4096 x 4096 x 2 bytes over 8 NVLink ranks)
WIDE_EXPERTS = TransformerWorkload(name="we", layers=4, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                                   gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                                   moe={"experts": 64, "top_k": 1, "ffn_hidden": 8192})


def test_a2a_overlap_leaves_the_counts_gather_exposed() -> None:
    """Under the 1F1B EP overlap (moe_a2a_overlap) Megatron-Core runs ``layer.mlp.preprocess`` (the dispatcher's
    ``dispatch_preprocess``, whose ``preprocess`` all-gathers the counts) inside the attention node on the compute
    stream (models/gpt/fine_grained_callables.py @d98e8a64dd ``submodule_pre_dispatch_forward``, lines 67-146):
    only the dispatch node's tokens' and probabilities' all-to-alls and the combine's run on the communication
    stream beside the other micro-batch. By hand, 2 micro-batches (16 / dp 8), pp 1: the steady share s = 1/2 of
    each pass's hideable traffic hides, per layer and micro-batch 4 A + 2 P of it, the counts' C never:

        ep_comm = 2 x 4 x (4 A + 2 P + C - s (4 A + 2 P)) = 8 (2 A + P + C)"""
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), WIDE_EXPERTS, tr)
    st = StrategySpec(tp=1, pp=1, ep=8, dp=8, moe_a2a_overlap=True)
    got = float(evaluate(job, grid_from_strategy(st, tr, 8, job)).breakdown["ep_comm"][0])
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))
    a = float(coll.group_time("alltoall", np.asarray(4096 * 4096 * 2.0), pl))
    p = float(coll.group_time("alltoall", np.asarray(4096 * 2.0), pl))
    c = float(coll.group_time("allgather", np.asarray(8 * 64 * 8.0), pl))
    assert got == pytest.approx(8 * (2 * a + p + c), rel=1e-9)
