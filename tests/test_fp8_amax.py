"""Transformer Engine delayed scaling's amax reductions, counted by hand (docs/model.md#fp8-amax).

Per model chunk and micro-batch one forward and one backward reduction: ``torch.cat`` of the modules' amax rows, a
MAX all-reduce of 4 bytes an amax over the stage's tp cp dp GPUs, the bulk history/scale update kernel
(NVIDIA/TransformerEngine v1.13 transformer_engine/pytorch/fp8.py ``reduce_and_update_fp8_tensors``,
common/recipe/delayed_scaling.cu ``kernel_bulk``; Megatron-Core transformer_block.py's one ``fp8_autocast`` per
chunk with ``get_amax_reduction_group(with_context_parallel=True)``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.choices import Layout
from scalemodel.cost import collectives as coll
from scalemodel.cost import compute
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

DENSE: dict[str, Any] = dict(name="d", layers=4, hidden=64, heads=4, ffn_hidden=128, gated_mlp=True, vocab=128,
                             seq_len=256, tied_embeddings=False, biases=False)


def _job(precision: str = "fp8", recipe: str | None = "delayed", moe: dict[str, Any] | None = None,
         **strategy: Any) -> tuple[Any, Any]:
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision=precision, seq_len=256, fp8_recipe=recipe)
    wl = TransformerWorkload(**DENSE, moe=moe) if moe else TransformerWorkload(**DENSE)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(StrategySpec(**strategy), tr, 8, job)


def test_dense_buffer_by_hand() -> None:
    """A dense layer: linear_qkv, linear_proj, DotProductAttention (3 GEMM slots), linear_fc1, linear_fc2 = 5
    modules, 7 GEMMs; 20 layers: forward 20 x 7 x 3 = 420 amaxes = 1680 bytes, backward 280 = 1120 bytes; 100 modules:
    one torch.cat launch (128 inputs each) and one bulk update (1023 modules each); HBM 420 x (8 x 1024 + 24) =
    3,450,720 and 280 x 8216 = 2,300,480 bytes. 26 layers: 130 modules, two cat launches."""
    job, _ = _job()
    f = compute.delayed_amax_reduction(job.shape, layers=20.0, forward=True)
    b = compute.delayed_amax_reduction(job.shape, layers=20.0, forward=False)
    assert [float(np.ravel(x)[0]) for x in f] == pytest.approx([1680.0, 2.0, 3_450_720.0], rel=1e-12)
    assert [float(np.ravel(x)[0]) for x in b] == pytest.approx([1120.0, 2.0, 2_300_480.0], rel=1e-12)
    assert float(np.ravel(compute.delayed_amax_reduction(job.shape, layers=26.0)[1])[0]) == 3.0
    # Megatron-LM's default history of 1: 420 x (8 + 24) bytes
    assert float(np.ravel(compute.delayed_amax_reduction(job.shape, layers=20.0, history=1.0)[2])[0]) == 420.0 * 32


def test_moe_buffer_by_hand() -> None:
    """Every layer MoE, 8 experts over ep 2: the MLP is two GroupedLinear modules of 4 GEMMs each: 2 + 3 + 8 = 13
    GEMMs and 5 modules a layer; 2 layers forward 2 x 13 x 3 x 4 = 312 bytes, backward 208."""
    job, _ = _job(moe={"experts": 8, "top_k": 2, "ffn_hidden": 32})
    f = compute.delayed_amax_reduction(job.shape, layers=2.0, ep=2.0, forward=True)
    b = compute.delayed_amax_reduction(job.shape, layers=2.0, ep=2.0, forward=False)
    assert float(np.ravel(f[0])[0]) == pytest.approx(312.0, rel=1e-12)
    assert float(np.ravel(b[0])[0]) == pytest.approx(208.0, rel=1e-12)
    assert float(np.ravel(f[1])[0]) == 2.0  # 10 modules: one cat, one update


def test_hybrid_layers_by_kind() -> None:
    """A hybrid pattern counts each layer by its kind: 'M-' x 4 (8 layers) is 4 Mamba mixers (in_proj, out_proj) and
    4 dense MLPs (linear_fc1, linear_fc2): 16 modules, 16 GEMMs, forward 48 amaxes (192 bytes), backward 32 (128);
    '*-' x 4 is the standard 4-layer model's 20 modules and 28 GEMMs (84 amaxes, 336 bytes)."""
    for pattern, want_f, want_b in (("M-" * 4, 192.0, 128.0), ("*-" * 4, 336.0, 224.0)):
        # the Mamba widths only beside M layers (round 21 refuses a mamba block without them)
        mamba = {"state_dim": 16, "groups": 1, "head_dim": 16, "heads": 8} if "M" in pattern else None
        hy = dict(DENSE, layers=8, hybrid={"pattern": pattern, "mamba": mamba})
        tr = TrainingSpec(global_batch=32, micro_batch=1, precision="fp8", seq_len=256)
        job = build_job(load_cluster("dgx-h100"), TransformerWorkload(**hy), tr, straggler_cv=0.0)
        f = compute.delayed_amax_reduction(job.shape, layers=8.0, forward=True)
        b = compute.delayed_amax_reduction(job.shape, layers=8.0, forward=False)
        assert float(np.ravel(f[0])[0]) == pytest.approx(want_f, rel=1e-12)
        assert float(np.ravel(b[0])[0]) == pytest.approx(want_b, rel=1e-12)


def _chunk_seconds(job: Any, layers: float, ranks: int) -> float:
    """One chunk's forward + backward reduction, from the formula: the all-reduce over ``ranks`` GPUs at stride 1,
    2 kernels at KERNEL_FIXED_S (few modules), the HBM bytes at the job's rate."""
    net = job.network
    t = 0.0
    for a in (21.0 * layers, 14.0 * layers):  # dense: 7 GEMMs x 3 forward, x 2 backward
        t += float(np.ravel(coll.group_time("allreduce", 4.0 * a, place(ranks, 1.0, net)))[0])
        t += 2 * 1.78e-6 + a * (8 * 1024 + 24) / (job.memory_bandwidth * job.memory_efficiency)
    return t


def test_step_carries_two_reductions_per_chunk_in_tp_comm() -> None:
    """tp 1, dp 8 (one DGX H100): no TP collective, so the exposed TP part is the m = 32 / 8 = 4 micro-batches' amax
    reductions alone, each micro-batch one chunk's forward and backward ones over the 8 GPUs on 4 layers."""
    job, g = _job(tp=1, dp=8)
    res = step.evaluate(job, g)
    m = 4.0
    assert float(np.ravel(res.breakdown["tp_comm"])[0]) == pytest.approx(m * _chunk_seconds(job, 4.0, 8), rel=1e-9)


def test_interleaved_chunks_each_reduce() -> None:
    """pp 2 with 2 chunks a GPU (tp 1, dp 4): 2 layers a stage, the stage's tp cp dp = 4 GPUs in the amax group,
    and each of the 2 chunks of every micro-batch reduces its forward and backward buffers (each holding both
    chunks' modules): m = 32 / 4 = 8 micro-batches x 2 chunks."""
    job, g = _job(tp=1, dp=4, pp=2, schedule="interleaved:2")
    res = step.evaluate(job, g)
    assert float(np.ravel(res.breakdown["tp_comm"])[0]) == pytest.approx(8 * 2 * _chunk_seconds(job, 2.0, 4),
                                                                          rel=1e-9)


@pytest.mark.parametrize("case", [dict(recipe="tensorwise"), dict(precision="bf16", recipe=None),
                                  dict(layer_impl="torchtitan"), dict(layer_impl="eager")])
def test_only_delayed_scaling_on_transformer_engine_reduces(case: dict[str, Any]) -> None:
    """Current scaling keeps no amax history (Megatron-Core gives it per-layer contexts), BF16 has no FP8 meta,
    and torchao's Float8Linear (torchtitan) or an eager layer is not Transformer Engine: no term."""
    kw = {k: case[k] for k in ("precision", "recipe") if k in case}
    job, g = _job(tp=1, dp=8, **{k: v for k, v in case.items() if k not in kw}, **kw)
    assert float(np.ravel(step.evaluate(job, g).breakdown["tp_comm"])[0]) == 0.0


@pytest.mark.parametrize(("layout", "stride"), [("tp-cp-dp-pp", 1.0), ("tp-cp-pp-dp", 2.0)])
def test_amax_group_is_the_stage(layout: str, stride: float) -> None:
    """tp 2, cp 2, dp 4, pp 2 (32 GPUs): the amax group is a stage's 2 x 2 x 4 = 16 GPUs; in the default order the
    16 consecutive ranks, with PP inside DP blocks of tp cp = 4 GPUs every tp cp pp = 8, placed 16 ranks 2 apart (the
    same 32-GPU extent: 4 DGX nodes, 8 of the group's ranks in each 16-GPU pair of nodes)."""
    job, _ = _job()
    groups = parallel_groups(job.network, tp=np.asarray(2), cp=np.asarray(2), dp=np.asarray(4), ep=np.asarray(1),
                             pp=np.asarray(2), layout=np.asarray(int(Layout.parse(layout, "layout"))))
    sg = groups.stage_group
    assert float(np.ravel(sg.p)[0]) == 16.0 and float(np.ravel(sg.stride)[0]) == stride
