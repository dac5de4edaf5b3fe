"""HybridEP's metadata preprocessing (docs/model.md#hybridep-preprocess): Megatron-Core calls hybrid_ep_dispatch
without a cached handle on every forward dispatch (NVIDIA/Megatron-LM@d98e8a64dd token_dispatcher.py lines
1150-1165; the handle is dropped after each combine, lines 1202-1207), so DeepEP hybrid-ep (@94a9f8f
csrc/hybrid_ep/executor/executor.cu Executor::allgather_routing_map, lines 23-55) all-gathers the routing map,
[tokens, etp E] bool a rank, over the flex group with NCCL before its scan kernel. Bytes by hand; time from the
collectives model on the placed group. DeepEP (the other backend) runs no such gather."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import ep_dispatch
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

E, K, H, S = 64, 4, 2048, 4096
WL = TransformerWorkload(name="moe", layers=4, hidden=H, heads=16, kv_heads=4, ffn_hidden=8192, gated_mlp=True,
                         vocab=32000, seq_len=S, tied_embeddings=False, moe={"experts": E, "top_k": K,
                                                                            "ffn_hidden": 1024})


def _ep(backend: str, **strategy) -> float:  # type: ignore[no-untyped-def]
    # the mean EP rank (moe_rank_imbalance 1): the dispatch bytes below are the mean rank's
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=S, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), WL, tr)
    st = StrategySpec(moe_flex_dispatcher=True, moe_flex_backend=backend, **strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return float(np.ravel(model_parallel_comm.ep_op_mean(model_parallel_comm._mp_collectives(job, g, groups)))[0])


def test_routing_map_gather_by_hand_ep8() -> None:
    """ep 8 in one DGX-H100 node, tp 1: 4096 rows x 64 experts = 256 KiB a rank, 2 MiB gathered; a quarter of the
    all-gather on each of the 4 per-layer calls beside the hierarchical dispatch's mean."""
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))
    hier = 0.5 * float(ep_dispatch.hierarchical_alltoall_time(S * H * 2.0, E, K, pl)
                       + ep_dispatch.hierarchical_alltoall_time(S * H * 2.0, E, K, pl, prob_tokens=S))
    gather = float(coll.group_time("allgather", np.asarray(8 * S * E * 1.0), pl))
    assert 8 * S * E == 2 * 2**20
    assert _ep("hybridep", tp=1, ep=8, dp=8) == pytest.approx(hier + 0.25 * gather, rel=1e-12)


def test_deepep_runs_no_routing_map_gather() -> None:
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))
    from scalemodel.cost.ep_dispatch import deepep_mean_slot_bytes
    want = float(ep_dispatch.hierarchical_alltoall_time(S * deepep_mean_slot_bytes(H * 2.0, K), E, K, pl))
    assert _ep("deepep", tp=1, ep=8, dp=8) == pytest.approx(want, rel=1e-12)


def test_recomputed_moe_forward_gathers_the_map_again_whole() -> None:
    """Selective recompute of moe re-runs MoELayer's forward, whose dispatch again has no cached handle
    (token_dispatcher.py 1202-1207 @d98e8a64dd drops it after each combine): two routing-map gathers per MoE layer and
    micro-batch (the forward's and the recompute's), beside six of the hierarchical dispatch's per-op mean (4 + the
    recomputed forward's 2). It was priced as 1.5 gathers (a quarter on each of the 6 ops). The mean EP rank
    (moe_rank_imbalance 1), as in _ep."""
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=S, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), WL, tr)
    st = StrategySpec(moe_flex_dispatcher=True, moe_flex_backend="hybridep", tp=1, ep=8, dp=8,
                      recompute="selective", recompute_modules="moe")
    g = grid_from_strategy(st, tr, 8, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = model_parallel_comm._mp_collectives(job, g, groups)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(4.0), logits_on_stage=True)
    mp = model_parallel_comm._model_parallel_comm(job, g, step._overlap_windows(raw, job.overlap_efficiency), c)
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))
    hier = 0.5 * float(ep_dispatch.hierarchical_alltoall_time(S * H * 2.0, E, K, pl)
                       + ep_dispatch.hierarchical_alltoall_time(S * H * 2.0, E, K, pl, prob_tokens=S))
    gather = float(coll.group_time("allgather", np.asarray(8 * S * E * 1.0), pl))
    assert float(np.ravel(mp["ep"])[0]) == pytest.approx(4 * (6 * hier + 2 * gather), rel=1e-9)
