"""fsdpsync34: strategy fsdp_defer_grad_sync (FSDP2's gradient sync and reshard after backward off until the last
micro-batch, NeMo Automodel's components/moe/fsdp_mixin.py; docs/model.md#fsdp-deferred-sync): the per-step bytes, the
exposed seconds and the memory of a small FSDP job at m = 4 by hand, with and without it; its refusals.

And: FSDP with its parameters kept gathered (reshard_after_forward false) and the routed experts left out
of FSDP (expert_dp 1, EP = dp, as NeMo Automodel's apply_fsdp ignored_params does) holds each expert weight once.

Before the fix the kept-gathered count added the GPU's routed experts to the dense gathered copy while the expert
states held them whole too: their 16-bit weights were counted twice (7.4 GB of automodel26's Nano row's 103.7 GB).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_fsdp_reshard import LAYER, TINY, P
from test_fsdp_reshard import SHAPE as TINY_SHAPE

from scalemodel.cost.memory import memory_per_gpu
from scalemodel.cost.placement import parallel_groups
from scalemodel.cost.transformer import shape
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import dp_exposed_floor, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

# A 4-layer MoE model, every layer MoE: h = 1024, 8 heads (d = 128, no GQA), 8 experts of f_e = 512 (gated), top-2,
# no shared expert, RMSNorm, no biases, untied 32,000-token embedding. By hand, per layer:
#   attention  qkv 1024 x 3072 + o 1024 x 1024       = 4,194,304
#   router     8 x 1024                              = 8,192
#   norms      2 x 1024                              = 2,048
#   experts    8 x 3 x 1024 x 512                    = 12,582,912
# dense (non-expert) on one GPU: 4 x (attention + router + norms) + 2 x 32,000 x 1024 + final norm 1024
ATTN, ROUTER, NORMS, EXPERT = 1024 * 3072 + 1024 * 1024, 8 * 1024, 2 * 1024, 3 * 1024 * 512
DENSE = 4 * (ATTN + ROUTER + NORMS) + 2 * 32_000 * 1024 + 1024  # 82,636,800
EXPERTS = 4 * 8 * EXPERT  # 50,331,648 in the model
SHAPE = shape(layers=4, hidden=1024, heads=8, ffn_hidden=512, vocab=32_000, gated_mlp=True, biases=False,
              tied_embeddings=False, dropout=False, moe_experts=8, moe_top_k=2, moe_ffn_hidden=512)


@pytest.mark.parametrize("ep, expert_dp", [(8, 1), (2, 4)])
def test_kept_experts_are_held_once_by_hand(ep: int, expert_dp: int) -> None:
    """dp 8, zero fsdp, reshard_after_forward false. Weights (2 bytes each):
    dense   2 D / 8 (the shard) + 2 D (every unit's gathered copy)
    experts 2 X / ep / expert_dp (the shard) + 2 X / ep (the gathered copy) where expert_dp > 1; at expert_dp 1
            (EP = dp: nothing to gather, FSDP leaves them out) 2 X / ep, once."""
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage="fsdp", reshard_after_forward=False)
    br = memory_per_gpu(SHAPE, ep=ep, expert_dp=expert_dp, **kw)
    x = EXPERTS / ep
    gathered_experts = 2 * x if expert_dp > 1 else 0.0
    assert float(br.weights) == pytest.approx(2 * DENSE / 8 + 2 * DENSE + 2 * x / expert_dp + gathered_experts,
                                              rel=1e-12)
    # the gradients and optimizer states are the shards: dense over dp, experts over expert_dp
    assert float(br.optimizer) == pytest.approx(12 * (DENSE / 8 + x / expert_dp), rel=1e-12)


# tests/test_fsdp_reshard.py's 4-layer dense Llama-style model (h 1024, 8 heads, gated MLP f 4096, tied 32,000-token
# embedding): P = 99,886,080 parameters, LAYER = 16,779,264 a layer, worked out there by hand.
L, M = 4, 4
UNIT = 2 * P / L  # 49,943,040 bytes: one unit's 16-bit gather, and its 16-bit gradients' reduce-scatter


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def _grid(job, **strategy):  # type: ignore[no-untyped-def]
    """dp 8, zero fsdp (no root unit: neither fsdp_per_param nor fsdp_flat_param), micro-batch 1, global batch 32:
    m = 4 micro-batches."""
    st = StrategySpec(dp=8, zero="fsdp", **strategy)
    return grid_from_strategy(st, TrainingSpec(global_batch=8 * M, precision=job.precision), 8, job)


def _traffic(job, g, monkeypatch, *, per_byte, f=0.0, b=0.0, m=M):  # type: ignore[no-untyped-def]
    """dp_comm._dp_comm at m micro-batches with every collective at ``per_byte`` seconds a byte, one unit's free
    forward / backward compute f and b."""
    def priced(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        return np.asarray(size, dtype=float) * per_byte

    monkeypatch.setattr(dp_comm, "_collective", priced)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * f]),
            "backward_free": np.asarray([L * b])}
    return dp_comm._dp_comm(job, g, comp, np.asarray([float(m)]), groups.data)


@pytest.mark.parametrize(("reshard", "defer", "units"), [
    (True, False, M * (2 * L - 1 + L)),   # 4 x (7 AG + 4 RS) = 44 units
    (False, False, M * (L + L)),          # 4 x (4 AG + 4 RS) = 32
    (True, True, L + M * (L - 1) + L),    # first forward 4 AG + 4 backwards x 3 AG + 4 RS once = 20
    (False, True, L + L)])                # 4 AG + 4 RS a step = 8
def test_bytes_per_step_by_hand(cluster, monkeypatch, reshard, defer, units) -> None:  # type: ignore[no-untyped-def]
    """Bytes a step at m = 4 (1 s a byte): units x 49,943,040."""
    job = build_job(cluster, TINY, TrainingSpec(grad_bytes_per_param=2))
    out = _traffic(job, _grid(job, fsdp_reshard_after_forward=reshard, fsdp_defer_grad_sync=defer), monkeypatch,
                   per_byte=1.0)
    assert float(out["gathers"][0]) == pytest.approx(units * UNIT, rel=1e-12)
    assert float(out["grads"][0]) == 0.0  # ZeRO-3 / FSDP gradients move in the units' traffic only


@pytest.mark.parametrize(("reshard", "defer", "expected"), [
    (True, False, 1.35749376), (False, False, 0.6388608), (True, True, 0.4288608), (False, True, 0.1597152)])
def test_exposed_seconds_by_hand(cluster, monkeypatch, reshard, defer, expected) -> None:  # type: ignore[no-untyped-def]
    """At 1 GB/s AG = RS = 49.94304 ms; a unit's free forward f = 30 ms, backward b = 40 ms; m = 4.
    Every micro-batch (x 4):
      resharded AG + 3 max(0, AG - f) + 3 max(0, AG + RS - b) + RS = 49.94304 + 59.82912 + 179.65824 + 49.94304
      kept      AG + 3 max(0, AG - f) + 3 max(0, RS - b) + RS      = 49.94304 + 59.82912 + 29.82912 + 49.94304
    Deferred: the first forward once (AG + 3 max(0, AG - f) = 109.77216), the 3 other backwards' gathers
    (resharded: 3 x 3 max(0, AG - b) = 89.48736; kept: none), the last backward once (resharded 3 max(0, AG + RS - b)
    + RS = 229.60128; kept 3 max(0, RS - b) + RS = 79.77216)."""
    job = build_job(cluster, TINY, TrainingSpec(grad_bytes_per_param=2))
    g = _grid(job, fsdp_reshard_after_forward=reshard, fsdp_defer_grad_sync=defer)
    out = _traffic(job, g, monkeypatch, per_byte=1e-9, f=0.030, b=0.040)
    if (reshard, defer) == (False, False):
        expected = 4 * (0.04994304 + 0.05982912 + 3 * (0.04994304 - 0.040) + 0.04994304)
    if (reshard, defer) == (False, True):
        expected = 0.10977216 + 3 * (0.04994304 - 0.040) + 0.04994304
    assert float(out["gathers_exposed"][0]) == pytest.approx(expected, rel=1e-9)
    assert float(out["gathers_exposed"][0]) <= float(out["gathers"][0])
    off = _traffic(job, _grid(job, fsdp_reshard_after_forward=reshard, fsdp_defer_grad_sync=defer, overlap=False),
                   monkeypatch, per_byte=1e-9, f=0.030, b=0.040)
    assert float(off["gathers_exposed"][0]) == pytest.approx(float(off["gathers"][0]), rel=1e-12)  # all exposed


def test_one_micro_batch_defers_nothing(cluster, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """m = 1: the last micro-batch is the only one; the field changes no byte and no second."""
    job = build_job(cluster, TINY, TrainingSpec(grad_bytes_per_param=2))
    a = _traffic(job, _grid(job), monkeypatch, per_byte=1e-9, f=0.030, b=0.040, m=1)
    b = _traffic(job, _grid(job, fsdp_defer_grad_sync=True), monkeypatch, per_byte=1e-9, f=0.030, b=0.040, m=1)
    assert float(a["gathers"][0]) == float(b["gathers"][0])
    assert float(a["gathers_exposed"][0]) == float(b["gathers_exposed"][0])


def test_memory_by_hand() -> None:
    """dp 8, zero fsdp, m = 4, fp32 gradients on the wire (4 bytes). Deferred: every unit stays gathered (weights
    2 P / 8 + 2 P, as without reshard) and the unsharded fp32 gradients accumulate (4 P beside the 4 P / 8 shard);
    at m = 1 nothing is deferred."""
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage="fsdp", grad_bytes=4.0, num_microbatches=M)
    base = memory_per_gpu(TINY_SHAPE, **kw)
    defer = memory_per_gpu(TINY_SHAPE, **kw, deferred_sync=True)
    assert float(base.weights) == pytest.approx(2 * P / 8 + 2 * 2 * LAYER, rel=1e-12)
    assert float(defer.weights) == pytest.approx(2 * P / 8 + 2 * P, rel=1e-12)
    assert float(base.gradients) == pytest.approx(4 * P / 8, rel=1e-12)
    assert float(defer.gradients) == pytest.approx(4 * P / 8 + 4 * P, rel=1e-12)
    assert float(defer.optimizer) == float(base.optimizer)
    one = memory_per_gpu(TINY_SHAPE, **dict(kw, num_microbatches=1), deferred_sync=True)
    assert float(one.total) == float(memory_per_gpu(TINY_SHAPE, **dict(kw, num_microbatches=1)).total)


def test_step_prices_it_and_stays_above_its_floor(cluster) -> None:  # type: ignore[no-untyped-def]
    """evaluate: the deferred step is no slower and holds more memory; its exposed dp traffic stays above the
    planner's floor (dp_exposed_floor), which counts the first forward's gathers once."""
    job = build_job(cluster, TINY, TrainingSpec(global_batch=8 * M))
    for reshard in (True, False):
        a, b = (evaluate(job, _grid(job, fsdp_reshard_after_forward=reshard, fsdp_defer_grad_sync=d))
                for d in (False, True))
        assert float(b.step_time[0]) <= float(a.step_time[0])
        assert float(b.memory["total"][0]) > float(a.memory["total"][0])
        g = _grid(job, fsdp_reshard_after_forward=reshard, fsdp_defer_grad_sync=True)
        floor = float(dp_exposed_floor(job, g)[0])
        assert 0 < floor <= float(np.asarray(b.breakdown["dp_comm"]).ravel()[0]) * (1 + 1e-12)


def test_refused_where_it_makes_no_sense() -> None:
    for zero in ("0", "1", "2", "3"):  # DeepSpeed ZeRO 2/3 reduce in every backward; ZeRO 0-1 shard no parameters
        with pytest.raises(InputError, match="fsdp_defer_grad_sync"):
            StrategySpec(zero=zero, fsdp_defer_grad_sync=True)
    for other in (dict(fsdp_flat_param=True), dict(xla_gpu_lhs=True), dict(pp=2)):
        with pytest.raises(InputError, match="fsdp_defer_grad_sync"):
            StrategySpec(zero="fsdp", fsdp_defer_grad_sync=True, **other)
    StrategySpec(zero="hsdp", fsdp_defer_grad_sync=True)


def test_plan_pins_the_deferred_sync_and_ranks_only_layouts_that_take_it(cli) -> None:  # type: ignore[no-untyped-def]
    """`plan --set strategy.fsdp_defer_grad_sync=true` was refused ("plan cannot honour": the field was not in
    planner.PIN_FIXED); pinned, every ranked plan carries it, on FSDP / HSDP and one pipeline stage, the only layouts
    the field is allowed on (FSDP2's deferral is refused with ZeRO 0-3 and with pp > 1)."""
    r = cli("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--json",
            "--set", "strategy.zero=fsdp", "--set", "strategy.fsdp_defer_grad_sync=true")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked
    for p in ranked:
        s = p["strategy"]
        assert s["fsdp_defer_grad_sync"] is True and s["zero"] in ("fsdp", "hsdp") and s["pp"] == 1
