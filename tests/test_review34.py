"""review34: checks of round 34's model changes, each against a value computed here from its primary source.

(a) 892d2091, the Automodel DeepSeek-V3 row's split (NVIDIA-NeMo/Automodel@89e3a9fdd
nemo_automodel/components/distributed/pipelining/functional.py): ``calculate_virtual_stages`` L158-161 gives
ceil(61 / 2) + 1 = 32 virtual stages; ``generate_hf_model_fqn_per_model_part`` L113-134 (its docstring calls it
``generate_hf_model_split``) gives stage i 61 // 32 layers and one more where i < 61 % 32, in model order, the
embedding on stage 0 (L128-129) and norm / lm_head on the last (L137-140); ``stage_ids_this_rank`` L65-70 with
style "loop" (L353: every schedule but ZBV) runs stages r, r + pp, ... on rank r. So virtual stage c of rank r is
stage c pp + r: strategy.stage_layers' own order. DeepSeek-V3's first 3 layers are dense (first_k_dense_replace 3):
layers 0, 1 in stage 0 (rank 0) and layer 2 in stage 1 (rank 1); the model must put them there.

(b) tp34 (docs/model.md#tp34): each column-parallel linear's input-gradient collective is counted once per linear
instance, so the per-linear traffic equals the count's pool wherever the count prices one collective per column
linear (not a parallel block: GPT-NeoX's two a layer, tests/test_tp34.py), and what a linear hides is at most its own
weight-gradient GEMM (no overlap hides more traffic than the compute under it): sum_k n_k min(c_k, w_k) <= a G.

(c) coll34 (docs/model.md#in-network-reduction), NCCL v2.30.7 src/graph/tuning.cc L385-435: PAT at p = 2 (one GPU a
node) costs baseLat 8 + log2i(2) interLat / 3.5 + 2 x 2.8 us, interLat the NET Tree Simple 14 us read on the measured
leaf hop (3.5 + 14 - 2.7).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import nccl
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, pipeline_ranks
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, build_network, grid_from_strategy
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec

US = 1e-6


def _automodel_split(layers: int, layers_per_stage: int, pp: int) -> tuple[list[int], list[list[int]]]:
    """Automodel@89e3a9fdd's virtual stages (layer counts in model order) and each rank's stage ids (loop style)."""
    stages = math.ceil(layers / layers_per_stage) + 1
    assert stages % pp == 0  # round_virtual_stages_to_pp_multiple leaves a multiple of pp as it is
    sizes = [layers // stages + (1 if i < layers % stages else 0) for i in range(stages)]
    ranks = [[r + s * pp for s in range(stages // pp)] for r in range(pp)]
    return sizes, ranks


def test_automodel_dsv3_dense_layers_embedding_and_head_sit_where_automodel_puts_them() -> None:
    sizes, ranks = _automodel_split(61, 2, 4)
    # each layer's kind in model order (3 dense, then MoE), cut into Automodel's stages, joined per rank in run order
    kinds = "d" * 3 + "e" * 58
    edges = np.concatenate([[0], np.cumsum(sizes)])
    stage_kinds = [kinds[edges[i]:edges[i + 1]] for i in range(len(sizes))]
    expected = ["".join(stage_kinds[s] for s in ids) for ids in ranks]
    assert [e.count("d") for e in expected] == [2, 1, 0, 0]
    assert [len(e) for e in expected] == [16, 15, 15, 15]
    assert 0 in ranks[0] and len(sizes) - 1 in ranks[-1]  # the embedding's stage on rank 0, the head's on the last

    wl = load_workload("deepseek-v3").model_copy(update={"mtp_layers": 0, "seq_len": 4096})
    tr = TrainingSpec(global_batch=512, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(dp=64, tp=1, pp=4, ep=64, zero="fsdp", recompute="full", schedule="interleaved:8",
                      stage_layers=sizes)
    g = grid_from_strategy(st, tr, 256, job)
    splits = pipeline_ranks._rank_layers(job, g)
    assert splits is not None and len(splits) == 1
    assert splits[0].p == 4 and splits[0].v == 8
    assert splits[0].ranks == expected
    # (the last rank, the most a middle rank holds, rank 0) as the terms priced by class read them (uneven38: the
    # middle class its own count, no longer the busiest rank but the last, which was rank 0's 16)
    last, other, first = pipeline_ranks._stage_layers(job, g)
    assert (float(np.ravel(last)[0]), float(np.ravel(other)[0]), float(np.ravel(first)[0])) == (15.0, 15.0, 16.0)


def _tp_setup(workload: str, tp: int, sp: bool, **strategy: object) -> tuple:  # type: ignore[type-arg]
    wl = load_workload(workload)
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(tp=tp, sequence_parallel=sp, **strategy)  # type: ignore[arg-type]
    g = grid_from_strategy(st, tr, 8 * tp, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * 4, logits_on_stage=False)
    return job, g, comp, mpc._mp_collectives(job, g, groups)


# MoE models with sequence parallelism only (Megatron-Core refuses an MoE layer at tp > 1 without it)
CASES = [("llama3-70b", False, {}), ("llama3-70b", True, {}), ("mixtral-8x7b", True, {"ep": 8}),
         ("deepseek-v3", True, {"ep": 8}), ("deepseek-v3", True, {"ep": 8, "mla_column_down_proj": True}),
         ("nemotron-3-nano", True, {"ep": 8}), ("nemotron-3-super", True, {"ep": 8})]


@pytest.mark.parametrize(("workload", "sp", "extra"), CASES)
def test_per_linear_traffic_is_the_counts_pool_and_hides_under_its_own_gemms(workload: str, extra: dict,
                                                                             sp: bool) -> None:
    """The column linears' input-gradient collectives summed per linear (tp34) against the count's pool
    (_sp_backward_pool, the count's block collectives less the blocking gathers); hidden <= a G + the MTP blocks'."""
    job, g, comp, coll = _tp_setup(workload, 4, sp, **extra)
    n = comp["layers_per_stage"]
    sh = job.shape
    att = float(sh.attention_layers / sh.layers)
    adj = mpc._moe_tp_collectives(job, g, coll)[0]
    mtp = comp.get("mtp_blocks", 0.0)
    per_pass = 1.0 if sh.hybrid is not None else 2.0
    moe = n * float(sh.moe_layers / sh.layers) + comp.get("mtp_moe_blocks", 0.0)
    count = (n + mtp) * per_pass + adj * moe
    traffic = count * coll["tp"] + (n * att + comp.get("mtp_attention_blocks", 0.0)) * coll.get("tp_att", 0.0)
    under = mpc._sp_backward_pool(job, g, coll, traffic, count, n * att + comp.get("mtp_attention_blocks", 0.0))[1]
    own_c, own_e, own_h = mpc._input_grad_windows(job, g, comp, coll)
    assert float(np.ravel(own_c)[0]) == pytest.approx(float(np.ravel(under)[0]), rel=1e-9)
    assert float(np.ravel(own_e + own_h)[0]) == pytest.approx(float(np.ravel(own_c)[0]), rel=1e-12)
    window = mpc._ub_gemm(sh, comp, 0, n, 1.0, g.mla_column_down_proj, g.moe_shared_expert_overlap)
    assert float(np.ravel(own_h)[0]) <= float(np.ravel(window)[0]) * (1 + 1e-12)
    assert float(np.ravel(own_h)[0]) > 0.0


def test_pat_two_nodes_by_hand() -> None:
    net = build_network(load_cluster("dgx-h100", []))
    pl = place(2, 8, net)  # one GPU on each of two nodes under one ib-leaf
    hop = 3.5 + 14.0 - 2.7
    expect = (8.0 + 1 * hop / 3.5 + 2.8 * 2) * US
    assert float(nccl.nccl_pat_time("allgather", np.array(0.0), pl)) == pytest.approx(expect, rel=1e-12)



def test_collnet_chain_at_one_gpu_a_node_pays_nccls_ppn1_tree_latency() -> None:
    """8 nodes, one GPU each, SHARP on the IB tier: NCCL's CollNetChain latency 2 (ppn - 1) intraLat + interLat has no
    chain hop at ppn 1, and its interLat there is the NET Tree Simple 14 us ("With ppn=1 latencies are fully exposed,
    use the Tree network latency", tuning.cc L386-388), not CollNetChain's 30: 14 us in NCCL's own estimate, 3.5 +
    14 - 2.7 = 14.8 us read on the 3.5 us leaf hop. Before review34: 30 / 30.8 us."""
    nvl = Tier("nvlink", 8, 450e9, 2e-6, efficiency=0.82, in_network_reduction=False, protocol="nvlink")
    ib = Tier("ib", 64, 50e9, 3.5e-6, efficiency=0.94, in_network_reduction=True, protocol="rdma")
    net = Network((nvl, ib), gpus_per_node=8, generation="hopper")
    pl = place(8, 8, net)
    assert float(pl.c[0]) == 1.0
    assert float(nccl.nccl_inr_allreduce_time(np.array(0.0), pl, estimate=True)) == pytest.approx(14.0 * US, rel=1e-12)
    assert float(nccl.nccl_inr_allreduce_time(np.array(0.0), pl)) == pytest.approx((3.5 + 14.0 - 2.7) * US, rel=1e-12)
    # two GPUs a node keep CollNetChain's own 30 us, one chain hop each way (NVLink 2.8 read on the 2 us hop)
    pl2 = place(16, 4, net)
    assert float(pl2.c[0]) == 2.0
    chain2 = 2 * (2.8 + 2.0 - 0.6) + (3.5 + 30.0 - 2.7)
    got2 = float(nccl.nccl_inr_allreduce_time(np.array(0.0), pl2))
    assert got2 == pytest.approx(chain2 * US, rel=1e-12)
