"""The p2p context-parallel ring's overlap, step by step (model_parallel_comm._cp_ring_overlap, docs/model.md#cp-comm).

Transformer Engine's AttnFuncWithCPAndKVP2P (NVIDIA/TransformerEngine@d0067d0
transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py): the forward's iteration i waits for
K, V block i, issues the exchange of block i + 1 and runs attention step i (L1698-1716), so the last step has no
exchange beside it; the backward's iteration i issues one exchange (K, V at i = 0, K, V with dK, dV in between, dK, dV
at the last) and waits for it after its own step (L2460-2495, L2718-2720). The expected seconds come from an event
simulation of those two loops (a compute stream and the chain of exchanges), never from the function's formula."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _forward_sim(n: int, xfer: float, att: float) -> float:
    """Layer forward time of TE's loop: block 0 is local; exchange i + 1 starts when block i has arrived (the wait
    at the top of iteration i) and takes ``xfer``; step i starts when block i is there and step i - 1 is done."""
    arrived, done = 0.0, 0.0
    for i in range(n):
        start = max(arrived, done)
        nxt = arrived + xfer if i < n - 1 else None  # issued after the wait for block i
        done = start + att
        if nxt is not None:
            arrived = nxt
    return done


def _backward_sim(n: int, xfer: list[float], att: float) -> float:
    """Layer backward time: iteration i issues exchange i when it starts, runs step i, and waits for exchange i."""
    t = 0.0
    for i in range(n):
        t = t + max(att, xfer[i])
    return t


@pytest.mark.parametrize("n, step1, step2, core", [
    (4, 13.6, 16.0, 40.0),   # the 1024-GPU GB200 row's order of size (us): a step 10, the exchange 13.6
    (4, 5.0, 7.0, 40.0),     # hidden throughout
    (2, 10.0, 12.0, 16.0),   # cp 2: one exchange beside one step of 8 (the old aggregate hid it under all 16)
    (8, 30.0, 45.0, 80.0),   # exposed both ways
])
def test_ring_overlap_matches_the_loop_simulation(n: int, step1: float, step2: float, core: float) -> None:
    a = core / n
    fwd_exposed = _forward_sim(n, step1, a) - core
    xfers = [step1] + [step2] * (n - 2) + [step1] if n > 1 else []
    bwd_exposed = _backward_sim(n, xfers, 2 * a) - 2 * core
    (f_exp, f_hid), (b_exp, b_hid) = model_parallel_comm._cp_ring_overlap(
        np.asarray(float(n)), np.asarray(step1), np.asarray(step2), np.asarray(core))
    assert float(f_exp) == pytest.approx(fwd_exposed, abs=1e-9)
    assert float(b_exp) == pytest.approx(bwd_exposed, abs=1e-9)
    # what is not exposed runs under compute: the exchanges' time less the exposed part
    assert float(f_hid) == pytest.approx((n - 1) * step1 - fwd_exposed, abs=1e-9)
    assert float(b_hid) == pytest.approx(sum(xfers) - bwd_exposed, abs=1e-9)


def test_hand_values_cp4() -> None:
    """cp 4, exchange 13.6, K V + dK dV 16, core 40 (a step 10): forward 3 x 3.6 = 10.8 exposed, 30 hidden;
    backward steps of 20 hide 13.6, 16, 16, 13.6: none exposed, 59.2 hidden. The aggregate rule it replaces,
    max(3 x 13.6 - 40, 0) = 0.8 forward, missed 10 of the 10.8."""
    (f_exp, f_hid), (b_exp, b_hid) = model_parallel_comm._cp_ring_overlap(
        np.asarray(4.0), np.asarray(13.6), np.asarray(16.0), np.asarray(40.0))
    assert (float(f_exp), float(f_hid), float(b_exp), float(b_hid)) == pytest.approx((10.8, 30.0, 0.0, 59.2))


def test_engine_prices_the_ring_per_step() -> None:
    """Llama 3 8B shapes, s 8192, cp 4, tp 1 on one DGX H100: the engine's CP exposed seconds per micro-batch are the
    layers x (forward + backward) of the simulation, on its own exchange and core seconds."""
    wl = TransformerWorkload(name="l8b", layers=4, hidden=4096, heads=32, kv_heads=8, vocab=128_000, ffn_hidden=14336,
                             gated_mlp=True, seq_len=8192)
    tr = TrainingSpec(global_batch=8, micro_batch=1, precision="bf16", seq_len=8192)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(tp=1, pp=1, cp=4, dp=2, zero="1", megatron_ddp=True)
    g = grid_from_strategy(st, tr, 8, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    coll = model_parallel_comm._mp_collectives(job, g, groups)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(2.0), logits_on_stage=True)
    comp = step._overlap_windows(raw, job.overlap_efficiency)
    out = model_parallel_comm._model_parallel_comm(job, g, comp, coll)
    s1, s2 = float(np.ravel(coll["cp"])[0]), float(np.ravel(coll["cp_kv_dkv"])[0])
    core = float(np.ravel(comp["core_per_layer"])[0])
    assert s1 < s2 < 2 * s1  # one exchange of twice the bytes pays its latency once
    fwd = _forward_sim(4, s1, core / 4) - core
    bwd = _backward_sim(4, [s1, s2, s2, s1], 2 * core / 4) - 2 * core
    assert float(np.ravel(out["cp"])[0]) == pytest.approx(4 * (fwd + bwd), rel=1e-9)
