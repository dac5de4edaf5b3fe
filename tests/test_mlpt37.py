"""The optimizer step's small all-reduces under Megatron-Core's distributed optimizer
(dp_comm.optimizer_stats_allreduce_time, docs/model.md#optimizer-stats-allreduce).

Megatron-Core (NVIDIA/Megatron-LM@d98e8a64dd) all-reduces the gradient norm once a step over every rank of the
job (``grad_stats_parallel_group`` = the intra-distributed-optimizer-instance group, optimizer/__init__.py
L671-674, parallel_state.py L1561-1576), and with FP8 parameters under current scaling Transformer Engine
all-reduces one fp32 amax per parameter over the optimizer's dp x cp group before casting the master shard
(NVIDIA/TransformerEngine@d0067d0 pytorch/tensor/utils.py L466-532). Both run in series on the compute stream.
The tests check which runs pay them, on which group, and that the step's dp_comm part carries them whole."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import dp_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.model_parallel_comm import _collective
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

WL = TransformerWorkload(name="l8b", layers=4, hidden=4096, heads=32, kv_heads=8, vocab=128_256, ffn_hidden=14336,
                         gated_mlp=True, seq_len=8192)


def _setup(gpus: int, *, precision: str = "bf16", recipe: str | None = None, megatron_ddp: bool = True,
           zero: str = "1", cp: int = 1, fp8_param_gather: bool = False):
    tr = TrainingSpec(global_batch=gpus // cp, micro_batch=1, precision=precision, seq_len=8192, fp8_recipe=recipe)
    job = build_job(load_cluster("dgx-h100"), WL, tr)
    st = StrategySpec(tp=1, pp=1, cp=cp, dp=gpus // cp, zero=zero, megatron_ddp=megatron_ddp,
                      fp8_param_gather=fp8_param_gather)
    g = grid_from_strategy(st, tr, gpus, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, groups


def _t(job, g, groups) -> float:  # type: ignore[no-untyped-def]
    return float(np.ravel(dp_comm.optimizer_stats_allreduce_time(job, g, groups))[0])


def test_gradient_norm_is_one_scalar_all_reduce_over_every_gpu() -> None:
    """bf16, ZeRO 1 under Megatron-Core DDP on 4 DGX H100 nodes: one 4-byte all-reduce over all 32 GPUs (not the
    DP group alone: with cp 2 the DP group holds 16, the norm still spans 32)."""
    job, g, groups = _setup(32, cp=2)
    world = _collective("allreduce", np.full(1, 4.0), place(np.asarray([32.0]), 1.0, job.network))
    dp_only = _collective("allreduce", np.full(1, 4.0), place(np.asarray([16.0]), 2.0, job.network))
    assert _t(job, g, groups) == pytest.approx(float(world[0]), rel=1e-12)
    # the two groups price apart (a 4-byte all-reduce is latency-bound: 32 ranks take more steps than 16), so a
    # pricing over the DP group alone fails the line above; "> 0" of each (testaudit38) could not tell them apart
    assert float(world[0]) > float(dp_only[0]) > 0.0


@pytest.mark.parametrize("kw", [dict(megatron_ddp=False), dict(zero="0")])
def test_off_outside_the_distributed_optimizer(kw: dict) -> None:  # type: ignore[type-arg]
    job, g, groups = _setup(32, **kw)
    assert _t(job, g, groups) == 0.0


def test_one_gpu_pays_nothing() -> None:
    job, g, groups = _setup(1)
    assert _t(job, g, groups) == 0.0


def test_latency_grows_with_the_job() -> None:
    """A scalar all-reduce is latency: more ranks and more nodes, more time (8 -> 64 -> 512 GPUs)."""
    ts = [_t(*_setup(n)) for n in (8, 64, 512)]
    assert 0.0 < ts[0] < ts[1] < ts[2]


def test_tensorwise_fp8_parameters_add_the_amax_all_reduce_over_dp_cp() -> None:
    """Delayed scaling casts with its previous scale (the norm only); tensorwise adds one all-reduce over the
    dp x cp group (32 GPUs here: dp 16 x cp 2) of one fp32 a parameter tensor."""
    delayed = _t(*_setup(32, cp=2, precision="fp8", recipe="delayed", fp8_param_gather=True))
    bf16 = _t(*_setup(32, cp=2))
    job, g, groups = _setup(32, cp=2, precision="fp8", recipe="tensorwise", fp8_param_gather=True)
    tw = _t(job, g, groups)
    assert delayed == pytest.approx(bf16, rel=1e-12)
    shard = groups.data.sharding
    assert float(np.ravel(shard.ranks)[0]) == 32.0
    amax = tw - bf16
    # the 4-layer model's tensors on one rank: 4 x (2 norms + qkv + proj + fc1 + fc2) + embedding, final norm, output
    n_t = 4 * 6 + 3
    hand = _collective("allreduce", np.full(1, 4.0 * n_t), shard.dense)
    assert amax == pytest.approx(float(hand[0]), rel=1e-9)
    # without fp8_param_gather no FP8 parameters: the norm only
    assert _t(*_setup(32, cp=2, precision="fp8", recipe="tensorwise")) == pytest.approx(bf16, rel=1e-12)


def test_step_carries_it_whole_in_dp_comm() -> None:
    """The engine's dp_comm part with Megatron-Core DDP at ZeRO 1 holds the term: the same strategy priced with the
    term patched to zero reads exactly that much less."""
    job, g, groups = _setup(64)
    t = _t(job, g, groups)
    with_term = step.evaluate(job, g)
    orig = step.optimizer_stats_allreduce_time
    try:
        step.optimizer_stats_allreduce_time = lambda *a, **k: np.zeros(1)  # type: ignore[assignment]
        without = step.evaluate(job, g)
    finally:
        step.optimizer_stats_allreduce_time = orig  # type: ignore[assignment]
    d_dp = float(np.ravel(with_term.breakdown["dp_comm"])[0] - np.ravel(without.breakdown["dp_comm"])[0])
    d_step = float(np.ravel(with_term.step_time)[0] - np.ravel(without.step_time)[0])
    assert d_dp == pytest.approx(t, rel=1e-6)
    assert d_step == pytest.approx(t, rel=1e-6)
