"""gaps36: three mechanism gaps closed with a basis in framework code (docs/model.md#nccl-tree-uneven, ...).

1. NCCL's Tree and CollNetChain on unevenly filled nodes (docs/model.md#nccl-tree-uneven): the time charges the
   fullest node's chain, c_0 - 1 hops each way (NVIDIA/nccl v2.30.7-1 connect.cc ``ncclTopoPreset``: each node's chain
   over its own localRanks); NCCL's tuner estimate charges ``nRanks / nNodes - 1`` in C integer division (tuning.cc
   L416 Tree ``2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat)``, L423 CollNetChain ``2 *
   (nRanks / nNodes - 1) * intraLat + interLat``). Expected values are hop counts by hand: a 1 s NVLink hop makes the
   intra-node chain the whole latency to within a millisecond.
2. MaxText's einsum dispatch (drop-and-pad on the XLA layer) at tp > 1 (docs/model.md#maxtext-dropping-moe): the
   combine mask's gradient contracts over the tensor-sharded M and is constrained whole on every tensor rank
   (AI-Hypercomputer/maxtext@14b5876ea MaxText/layers/moe.py L769, L797-798, L848-851; JAX constrains a cotangent as
   its primal): one all-reduce over the tensor group of b (s / cp) x c k s x eb bytes per MoE block's backward.
   Bytes by hand; the seconds are the collectives model's for those bytes on the tensor group.
3. fsdp_defer_grad_sync under pipeline parallelism (docs/model.md#fsdp-deferred-sync): torch.distributed.pipelining
   runs every backward of an FSDPModule stage with gradient sync and reshard after backward off and reduce-scatters
   every unit after the stage's last backward (REDUCE_GRAD -> perform_reduce_grad -> post_backward, then
   _root_post_backward_final_callback's stream wait): per stage and step L gathers (the first forward) and L
   reduce-scatters, all of them after the backward. Exposed seconds by hand at 1 ns a byte.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import dp_comm, layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, TransformerWorkload, load_cluster, notices
from scalemodel.specs.workload import MoESpec

SECOND = 1.0
NET_HOP = 1e-6


def _net(nvlink_latency: float = SECOND, sharp: bool = False) -> Network:
    """Nodes of 8 GPUs whose NVLink hop takes ``nvlink_latency``, under a 64-GPU network tier of 1 us hops (SHARP
    there when ``sharp``; the NVLink tier does not reduce, so NVLS / NVLSTree never apply)."""
    return Network(tiers=(Tier(name="nvlink", span=8, bandwidth=200e9, latency=nvlink_latency, efficiency=0.8),
                          Tier(name="net0", span=64, bandwidth=25e9, latency=NET_HOP, efficiency=0.9,
                               in_network_reduction=sharp)),
                   gpus_per_node=8)


@pytest.mark.parametrize("ranks,critical,tuner", [
    (20, 7, 5),   # 3 nodes of 8, 8, 4: the fullest chain 7; NCCL floor(20 / 3) - 1 = 5
    (17, 7, 4),   # 3 nodes of 8, 8, 1: floor(17 / 3) - 1 = 4
    (12, 7, 5),   # 2 nodes of 8, 4: floor(12 / 2) - 1 = 5
    (24, 7, 7),   # 3 whole nodes: c_0 - 1 either way
    (8, 7, 7),    # one node
    (3, 2, 2),    # one node of 3
])
def test_chain_hops_critical_path_and_nccl_estimate(ranks: int, critical: int, tuner: int) -> None:
    pl = place(ranks, 1, _net())
    assert float(nccl.nccl_chain_hops(pl)) == critical
    assert float(nccl.nccl_chain_hops(pl, estimate=True)) == tuner


def test_nccl_tree_estimate_on_three_uneven_nodes_by_hand() -> None:
    """20 ranks on nodes of 8 (3 nodes: 8, 8, 4), 0 bytes, NCCL's Tree: NCCL's estimate 2 (5 x 1 s + log2i(3) x ~1 us)
    = 10 s plus the base latency and the per-hop Tree rows (microseconds); the time 2 x 7 = 14 s (the fullest node's
    chain, which the last rank's result waits on)."""
    pl = place(20, 1, _net())
    est = float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl, estimate=True))
    t = float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl))
    assert 10 * SECOND <= est <= 10 * SECOND + 1e-3
    assert 14 * SECOND <= t <= 14 * SECOND + 1e-3
    via_api = float(coll.collective_time("allreduce", 0.0, 20, _net(), algorithm="tree", dtype_bytes=1))
    assert via_api == pytest.approx(t, rel=1e-12)


def test_two_ranks_on_a_node_and_one_on_the_next_pay_the_nvlink_hop() -> None:
    """3 ranks on nodes of 2 (2, 1): NCCL's formula floor(3 / 2) - 1 = 0 charges no NVLink hop, but the first node's
    two ranks exchange over it: the time charges 2 x 1 s (the physics property of tests/test_coll34.py), the estimate
    none (under 1 ms: the base latency and one network level each way)."""
    net = Network(tiers=(Tier(name="nvlink", span=2, bandwidth=200e9, latency=SECOND, efficiency=0.8),
                         Tier(name="net0", span=64, bandwidth=25e9, latency=NET_HOP, efficiency=0.9)),
                  gpus_per_node=2)
    pl = place(3, 1, net)
    assert 2 * SECOND <= float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl)) <= 2 * SECOND + 1e-3
    assert float(nccl.algorithm_time("allreduce", "tree", np.asarray(0.0), pl, estimate=True)) < 1e-3


def test_collnet_chain_on_three_uneven_nodes_by_hand() -> None:
    """CollNetChain (SHARP on the network tier, NVLS off): 2 h intraLat + interLat, each NVLink hop 1 s + 2.8 us -
    0.6 us (NCCL's CollNetChain NVLink entry read on the measured hop less the Ring LL entry,
    docs/model.md#in-network-reduction; NCCL's own 2.8 us in the estimate): 20 ranks on 3 nodes, the time's 7 hops
    14 s, NCCL's estimate 5 hops at 2.8 us each (the estimate charges NCCL's hwLatencies, not the tier's)."""
    pl = place(20, 1, _net(sharp=True))
    t = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), pl))
    assert 14 * SECOND <= t <= 14 * SECOND + 1e-3
    est = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), pl, estimate=True))
    # 2 x 5 x 2.8 us + NET CollNetChain 30 us (n_0 > 1): 58 us
    assert est == pytest.approx(2 * 5 * 2.8e-6 + 30e-6, rel=1e-9)
    est24 = float(nccl.nccl_inr_allreduce_time(np.asarray(0.0), place(24, 1, _net(sharp=True)), estimate=True))
    assert est24 == pytest.approx(2 * 7 * 2.8e-6 + 30e-6, rel=1e-9)


TINY_DENSE = TransformerWorkload(name="tiny-dense", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32000,
                                 seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False)

# ---- 2. MaxText's einsum dispatch at tp > 1 ----
E, K, CF, S, H, FE = 4, 2, 1.25, 1024, 256, 512
TINY = TransformerWorkload(name="tiny-e4", layers=2, hidden=H, heads=4, ffn_hidden=FE, vocab=1000, seq_len=S,
                           gated_mlp=True, biases=False, tied_embeddings=False, dropout=False,
                           moe=MoESpec(experts=E, top_k=K, ffn_hidden=FE))


def _maxtext(tp: int, pad: bool = True, cp: int = 1):  # type: ignore[no-untyped-def]
    cl = load_cluster("tpu-v6e-pod")
    tr = TrainingSpec(global_batch=8, micro_batch=1, **({"moe_rank_imbalance": CF, "moe_pad_to_capacity": True}
                                                        if pad else {}))
    job = build_job(cl, TINY, tr)
    with notices.collecting() as said:
        g = grid_from_strategy(StrategySpec(dp=8 // (tp * cp), tp=tp, cp=cp, ep=1, zero="fsdp", layer_impl="xla"),
                               tr, 8, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, groups, said


def test_mask_gradient_bytes_by_hand() -> None:
    """b 1, s 1024, cp 1: the mask's rows 1024 tokens, its columns E C = 4 x 640 = 2560 (C = 1.25 x 2 x 1024 / 4),
    2 bytes: 1024 x 2560 x 2 = 5,242,880 bytes; at cp 2 the rank's 512 rows, half."""
    assert float(mpc.einsum_mask_allreduce_bytes(1024, S, K, CF, 2.0)) == 1024 * 2560 * 2 == 5_242_880
    assert float(mpc.einsum_mask_allreduce_bytes(512, S, K, CF, 2.0)) == 2_621_440


@pytest.mark.parametrize("tp", [2, 4])
def test_the_tensor_group_all_reduces_the_mask_gradient(tp: int) -> None:
    """_mp_collectives' moe_mask_ar is the all-reduce of 5,242,880 bytes (bf16) on the tensor group; 0 at tp 1,
    0 for the dropless layer (no moe_pad_to_capacity: MaxText's sparse_matmul path has no masks)."""
    job, g, groups, _ = _maxtext(tp)
    c = mpc._mp_collectives(job, g, groups)
    assert job.elem_bytes == 2.0
    want = float(coll.group_time("allreduce", np.asarray(5_242_880.0), groups.tensor))
    assert want > 0
    assert float(np.asarray(c["moe_mask_ar"]).ravel()[0]) == pytest.approx(want, rel=1e-12)
    job1, g1, groups1, _ = _maxtext(1)
    assert float(np.asarray(mpc._mp_collectives(job1, g1, groups1)["moe_mask_ar"]).ravel()[0]) == 0.0
    jobd, gd, groupsd, _ = _maxtext(tp, pad=False)
    assert float(np.asarray(mpc._mp_collectives(jobd, gd, groupsd)["moe_mask_ar"]).ravel()[0]) == 0.0


def test_each_moe_block_backward_pays_it_once() -> None:
    """The stage's TP time (exposed + hidden under the weight-gradient GEMMs) with the mask all-reduce less without
    it: the 2 MoE layers' backward, 2 x moe_mask_ar; with no GEMM to hide it (wgrad 0) all of it exposed."""
    job, g, groups, _ = _maxtext(2)
    c = mpc._mp_collectives(job, g, groups)
    m = float(np.asarray(c["moe_mask_ar"]).ravel()[0])
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * 2, logits_on_stage=False)
    comp = dict(comp, wgrad=np.zeros(1), embedding_uses=np.zeros(1), head_uses=np.zeros(1))
    off = dict(c, moe_mask_ar=np.zeros(1))
    on_tp = float(np.asarray(mpc._model_parallel_comm(job, g, comp, c)["tp"]).ravel()[0])
    off_tp = float(np.asarray(mpc._model_parallel_comm(job, g, comp, off)["tp"]).ravel()[0])
    assert on_tp - off_tp == pytest.approx(2 * m, rel=1e-9)


def test_warning_only_at_cp() -> None:
    """tp 2 is priced and says nothing; cp 2 still says what it leaves out (the experts on the whole sequence's
    capacity rows on every context rank, the context sums)."""
    *_, said = _maxtext(2)
    assert not any("einsum dispatch" in w for w in said)
    *_, said = _maxtext(1, cp=2)
    assert any("einsum dispatch) at cp 2" in w for w in said)


# ---- 3. FSDP2's deferred gradient sync per pipeline stage ----
L3, M3 = 2, 4  # units (layers) a stage, micro-batches a step


def _fsdp_grid(job, pp: int, **strategy):  # type: ignore[no-untyped-def]
    """dp 8 x pp, zero fsdp (no root unit), parameters kept gathered, global batch 32: m = 4."""
    st = StrategySpec(dp=8, pp=pp, zero="fsdp", fsdp_reshard_after_forward=False, **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=8 * M3, precision=job.precision), 8 * pp, job)


def _dp(job, g, monkeypatch, *, f: float, b: float):  # type: ignore[no-untyped-def]
    """dp_comm._dp_comm at 4 micro-batches, every collective 1 ns a byte, a unit's free forward f and backward b."""
    monkeypatch.setattr(dp_comm, "_collective",
                        lambda op, size, group, algorithm=None: np.asarray(size, dtype=float) * 1e-9)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = {"layers_per_stage": np.asarray([float(L3)]), "forward_free": np.asarray([L3 * f]),
            "backward_free": np.asarray([L3 * b])}
    return dp_comm._dp_comm(job, g, comp, np.asarray([float(M3)]), groups.data)


@pytest.mark.parametrize("pp", [1, 2])
def test_deferred_sync_per_stage_by_hand(monkeypatch, pp: int) -> None:  # type: ignore[no-untyped-def]
    """A stage of 2 units, unit bytes U (AG = RS = U ns): without deferral 4 x (2 AG + 2 RS) a step; deferred
    2 AG + 2 RS, a quarter. Exposed, f = 0.2 AG, b = 10 AG (a backward long enough to hide any one collective):
    pp 1 (the reduce-scatters under the last backward): AG + max(0, AG - f) + max(0, RS - b) + RS = 2.8 AG;
    pp 2 (all after the stage's last backward, REDUCE_GRAD): AG + max(0, AG - f) + 2 RS = 3.8 AG."""
    job = build_job(load_cluster("dgx-h100"), TINY_DENSE, TrainingSpec(grad_bytes_per_param=2))
    plain = _dp(job, _fsdp_grid(job, pp), monkeypatch, f=0.0, b=0.0)
    unit_s = float(plain["gathers"][0]) / (M3 * 2 * L3)  # one unit's AG (= RS) seconds
    assert unit_s > 0
    d = _dp(job, _fsdp_grid(job, pp, fsdp_defer_grad_sync=True), monkeypatch, f=0.2 * unit_s, b=10 * unit_s)
    assert float(d["gathers"][0]) == pytest.approx(2 * L3 * unit_s, rel=1e-12)
    want = (2.8 if pp == 1 else 3.8) * unit_s
    assert float(d["gathers_exposed"][0]) == pytest.approx(want, rel=1e-9)


def test_pipeline_deferral_needs_the_parameters_kept_gathered() -> None:
    """pp > 1 with reshard after forward: refused, naming the field (a stage's gathers then depend on the schedule's
    order: 1F1B's warm-up forwards each gather again); kept gathered: accepted; pp 1 either way."""
    with pytest.raises(InputError, match="fsdp_defer_grad_sync"):
        StrategySpec(dp=8, pp=2, zero="fsdp", fsdp_defer_grad_sync=True)
    StrategySpec(dp=8, pp=2, zero="fsdp", fsdp_defer_grad_sync=True, fsdp_reshard_after_forward=False)
    StrategySpec(dp=8, pp=1, zero="fsdp", fsdp_defer_grad_sync=True)
