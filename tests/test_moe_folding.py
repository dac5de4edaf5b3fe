"""MoE parallel folding (Liu et al. 2025, arXiv 2504.14960; Megatron-Core ``initialize_model_parallel``).

Attention ranks follow the order tp-cp-dp-pp; the expert grid covers the same GPUs in the order
etp-ep-edp-pp with edp = world / (pp etp ep). The groups are enumerated here rank by rank from those
orders (brute force) and compared with the placement the engine prices; parameter counts are
counted expert by expert.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scalemodel.cost import compute, memory
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.engine.pipeline_ranks import _params_per_gpu
from scalemodel.engine.step import Infeasible, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _groups(sizes: dict[str, int], order: list[str], axis: str) -> list[list[int]]:
    """Rank groups along ``axis`` for a grid whose dimensions vary fastest in ``order``'s order."""
    names = list(order)
    out: dict[tuple, list[int]] = {}
    for idx in itertools.product(*(range(sizes[n]) for n in reversed(names))):
        coord = dict(zip(reversed(names), idx, strict=True))
        rank, mult = 0, 1
        for n in names:
            rank += coord[n] * mult
            mult *= sizes[n]
        key = tuple(coord[n] for n in names if n != axis)
        out.setdefault(key, []).append(rank)
    return [sorted(g) for g in out.values()]


def _stride(group: list[int]) -> int:
    steps = {b - a for a, b in zip(group, group[1:], strict=False)}
    assert len(steps) <= 1, "not an evenly strided group"
    return steps.pop() if steps else 1


@pytest.mark.parametrize("tp,cp,dp,pp,ep,etp", [
    (2, 1, 16, 8, 32, 1),  # Megatron-Bridge 25.11 Qwen3-235B on H100: EP 32 over TP 2 x DP 16
    (4, 1, 8, 2, 8, 1),
    (2, 2, 4, 2, 4, 2),
    (8, 1, 4, 1, 4, 8),  # etp = tp: EP carved out of DP at stride tp
    (4, 2, 2, 1, 2, 2),
])
def test_expert_groups_match_megatron_rank_order(tp, cp, dp, pp, ep, etp):
    world = tp * cp * dp * pp
    edp = world // (pp * etp * ep)
    dense = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    expert = {"etp": etp, "ep": ep, "edp": edp, "pp": pp}
    ep_groups = _groups(expert, ["etp", "ep", "edp", "pp"], "ep")
    edp_groups = _groups(expert, ["etp", "ep", "edp", "pp"], "edp")
    # folding: each pipeline stage holds the same GPUs in both grids
    stages_dense = sorted(sorted(g) for g in _groups({"x": tp * cp * dp, "pp": pp}, ["x", "pp"], "x"))
    stages_expert = sorted(sorted(g) for g in _groups({"x": etp * ep * edp, "pp": pp}, ["x", "pp"], "x"))
    assert stages_dense == stages_expert
    assert all(len(g) == ep for g in ep_groups) and all(len(g) == edp for g in edp_groups)
    net = build_network(load_cluster("dgx-h100"))
    groups = parallel_groups(net, tp=tp, cp=cp, dp=dp, ep=ep, pp=pp, etp=etp)
    assert float(groups.expert.p) == ep and float(groups.expert.stride) == _stride(ep_groups[0])
    assert {_stride(g) for g in ep_groups} == {_stride(ep_groups[0])}
    replicas = groups.data.expert
    assert float(replicas.p) == edp
    if edp > 1:
        assert float(replicas.stride) == _stride(edp_groups[0])
    # the dense DP group is unchanged by folding: dp ranks, stride tp cp
    dp_groups = _groups(dense, ["tp", "cp", "dp", "pp"], "dp")
    assert float(groups.data.dense.p) == dp and float(groups.data.dense.stride) == _stride(dp_groups[0])


#: Qwen3-235B-A22B as Megatron-Bridge's Qwen3MoEModelProvider235B_A22B defines it (qwen_provider.py, v0.2.0)
QWEN3_235B = TransformerWorkload(name="qwen3-235b", layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128,
                                 ffn_hidden=12288, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                 moe={"experts": 128, "top_k": 8, "ffn_hidden": 1536})


def _qwen_job(batch: int = 2048):
    tr = TrainingSpec(global_batch=batch, micro_batch=1, precision="fp8", seq_len=4096)
    return build_job(load_cluster("dgx-h100"), QWEN3_235B, tr), tr


def test_qwen3_235b_on_h100_folds_ep_32_over_tp_2_dp_16():
    job, tr = _qwen_job()
    unfolded = StrategySpec(tp=2, pp=8, ep=32, schedule="interleaved:4", first_chunk_layers=2, last_chunk_layers=2,
                            sequence_parallel=True)
    with pytest.raises(InputError, match="etp x ep"):
        grid_from_strategy(unfolded, tr, 256, job)  # etp = tp = 2: 2 x 32 does not divide 2 x 16
    st = unfolded.model_copy(update={"etp": 1})
    g = grid_from_strategy(st, tr, 256, job)
    res = evaluate(job, g)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    # expert parameters per GPU: 128 experts over ep 32 = 4 experts, each whole (etp 1), on 1/8 of the layers
    sh = job.shape
    per_expert = float(memory.mlp_params(sh, sh.moe_ffn_hidden))
    _dense, expert = _params_per_gpu(job, g)
    assert float(expert) == pytest.approx(float(sh.moe_layers) / 8 * (128 / 32) * per_expert, rel=1e-12)


def test_expert_states_sharded_over_the_expert_dp_replicas():
    job, tr = _qwen_job()
    sh = job.shape
    kw = dict(micro_batch=1, seq_len=4096, dp=16, tp=2, pp=8, ep=32, zero_stage=1, sequence_parallel=True)
    folded = memory.memory_per_gpu(sh, etp=1, **kw)
    # edp = 2 x 16 / (1 x 32) = 1: optimizer states of the experts are not sharded at all
    pg = memory.params_per_gpu(sh, tp=2, pp=8, ep=32, etp=1)
    dense_opt = 12.0 * float(pg.dense) / 16
    assert float(folded.optimizer) == pytest.approx(dense_opt + 12.0 * float(pg.expert) / 1, rel=1e-12)


def test_expert_flops_per_gpu_do_not_depend_on_etp():
    job, _ = _qwen_job()
    kw = dict(micro_batch=1.0, seq_len=4096, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
              gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
              tp=2, cp=1, ep=32, sequence_parallel=True, moe=True, flash_attention=True)
    a = compute.layer_compute_time(job.shape, etp=1, **kw)
    b = compute.layer_compute_time(job.shape, etp=2, **kw)
    assert float(a.forward_flops) == pytest.approx(float(b.forward_flops), rel=1e-12)
    assert np.isfinite(float(a.forward)) and float(a.forward) > 0


def test_default_etp_keeps_the_previous_layout():
    # etp unset = tp: the EP group is ep ranks at stride tp (cp = 1), the expert replicas dp / ep at tp ep
    net = build_network(load_cluster("dgx-h100"))
    g = parallel_groups(net, tp=2, cp=1, dp=16, ep=4, pp=1)
    assert float(g.expert.stride) == 2 and float(g.data.expert.p) == 4 and float(g.data.expert.stride) == 8
