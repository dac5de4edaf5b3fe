"""The shared experts beside the token dispatcher (StrategySpec.moe_shared_expert_overlap; Megatron-Core
--moe-shared-expert-overlap, NVIDIA/Megatron-LM@d98e8a64dd shared_experts.py / token_dispatcher.py): fc1 runs on
its own stream under the dispatch all-to-all, fc2 under the combine, their backwards under the backward ones. The
shared experts' times are worked out by hand from the GEMM roofline of cost/compute.py's docstring; the hidden
traffic by hand from the min(all-to-all, compute beside it) rule (docs/model.md#shared-expert-overlap)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
B, S, H, FE = 2, 512, 1024, 256
T = B * S


def _gemm(m: float, n: float, k: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


SH = shape(layers=2, hidden=H, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
           moe_top_k=2, moe_ffn_hidden=FE, moe_shared_experts=2)


@pytest.mark.parametrize("tp", [1, 2])
def test_shared_expert_times_by_hand(tp: int) -> None:
    """2 shared experts of 256 = one SwiGLU MLP of width 512 on T = 1024 tokens: fc1 T x 2(512)/t x h + the SwiGLU's
    3 eb T 512 / t bytes, fc2 T x h x 512/t; backward twice each (data- and weight-gradient GEMMs, activation 2x)."""
    f1, f2, b1, b2 = compute.shared_expert_times(SH, micro_batch=B, seq_len=S, tp=tp, peak_flops=PEAK,
                                                 memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0,
                                                 memory_efficiency=MEM)
    up = _gemm(T, 2 * 512 / tp, H) + 3 * 2 * T * 512 / tp / (HBM * MEM)
    down = _gemm(T, H, 512 / tp)
    assert (float(f1), float(f2)) == (pytest.approx(up, rel=1e-12), pytest.approx(down, rel=1e-12))
    assert (float(b1), float(b2)) == (pytest.approx(2 * up, rel=1e-12), pytest.approx(2 * down, rel=1e-12))
    none = shape(layers=2, hidden=H, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
                 moe_top_k=2, moe_ffn_hidden=FE)
    assert all(float(x) == 0.0 for x in compute.shared_expert_times(
        none, micro_batch=B, seq_len=S, peak_flops=PEAK, memory_bandwidth=HBM))


DSV3_LIKE = TransformerWorkload(name="moe", layers=8, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                                gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                                moe={"experts": 64, "top_k": 4, "ffn_hidden": 1024, "shared_experts": 2})


def _job(**strategy):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), DSV3_LIKE, tr)
    st = StrategySpec(**strategy)
    return job, grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)


def _sides(job, g):  # type: ignore[no-untyped-def]
    return [float(np.ravel(x)[0]) for x in compute.shared_expert_times(
        job.shape, micro_batch=1.0, seq_len=job.seq_len, tp=g.tp, cp=g.cp, peak_flops=job.peak_flops,
        memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
        memory_efficiency=job.memory_efficiency, elem_bytes=job.elem_bytes)]


@pytest.mark.parametrize("a2a", [1e-6, 1.0])
def test_hidden_is_the_smaller_of_each_all_to_all_and_the_compute_beside_it(a2a: float) -> None:
    """8 MoE blocks on the stage, one all-to-all of a seconds: forward min(a, fc1_f) + min(a, fc2_f) per block,
    backward min(a, fc2_b) + min(a, fc1_b); a tiny all-to-all hides whole (4 a per block), a huge one hides the
    compute beside it only (never more: docs/model.md physics)."""
    job, g = _job(ep=8, dp=8, moe_shared_expert_overlap=True)
    f1, f2, b1, b2 = _sides(job, g)
    ep = 8 * 4 * a2a
    mp = {"ep": np.asarray([ep]), "hidden_fwd": np.zeros(1), "hidden_bwd": np.zeros(1), "hidden_ep": np.zeros(1)}
    out = model_parallel_comm._with_shared_expert_overlap(job, g, mp, a2a, 8.0, 0.0)
    want_f = 8 * (min(a2a, f1) + min(a2a, f2))
    want_b = 8 * (min(a2a, b2) + min(a2a, b1))
    assert float(np.ravel(out["hidden_fwd"])[0]) == pytest.approx(want_f, rel=1e-12)
    assert float(np.ravel(out["hidden_bwd"])[0]) == pytest.approx(want_b, rel=1e-12)
    assert float(np.ravel(out["ep"])[0]) == pytest.approx(ep - want_f - want_b, rel=1e-9, abs=1e-18)
    assert float(np.ravel(out["ep"])[0]) == pytest.approx(ep - want_f - want_b, rel=1e-9, abs=1e-18)
    assert float(np.ravel(out["hidden_ep"])[0]) == pytest.approx(want_f + want_b, rel=1e-12)
    if a2a < 1e-3:
        assert float(np.ravel(out["ep"])[0]) == pytest.approx(0.0, abs=1e-15)
    else:
        assert want_f + want_b == pytest.approx(8 * (f1 + f2 + b1 + b2), rel=1e-12)
    # a recomputed forward pass per block hides its forward pair again, in the backward
    rec = model_parallel_comm._with_shared_expert_overlap(job, g, dict(mp, ep=np.asarray([ep + 8 * 2 * a2a])), a2a,
                                                          8.0, 8.0)
    assert float(np.ravel(rec["hidden_bwd"])[0]) == pytest.approx(want_b + want_f, rel=1e-12)


def test_engine_exposes_less_ep_traffic() -> None:
    job, g0 = _job(ep=8, dp=8)
    _, g1 = _job(ep=8, dp=8, moe_shared_expert_overlap=True)
    off, on = step.evaluate(job, g0), step.evaluate(job, g1)
    assert float(on.breakdown["ep_comm"][0]) < float(off.breakdown["ep_comm"][0])
    assert float(on.step_time[0]) < float(off.step_time[0])
    # ep 1: no all-to-all to run beside
    _, h0 = _job(ep=1, dp=8)
    _, h1 = _job(ep=1, dp=8, moe_shared_expert_overlap=True)
    assert float(step.evaluate(job, h1).step_time[0]) == float(step.evaluate(job, h0).step_time[0])


@pytest.mark.parametrize("extra, match", [
    ({"moe_a2a_overlap": True}, "moe_a2a_overlap"),
    ({"recompute": "selective", "recompute_modules": "core_attn,shared_experts"}, "shared_experts"),
])
def test_megatron_refusals(extra: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=match):
        _job(ep=8, dp=8, moe_shared_expert_overlap=True, **extra)


def test_cli_set_and_warning(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["predict", "-c", "dgx-h100", "-n", "64", "--set", "strategy.ep=8",
            "--set", "strategy.moe_shared_expert_overlap=true"]
    r = cli(*base, "-m", "deepseek-v3", "-n", "256", "--set", "strategy.pp=8")
    assert r.code == 0, r.err
    m = cli(*base, "-m", "mixtral-8x7b")
    assert m.code == 0 and "moe_shared_expert_overlap is not priced: the model has no shared experts" in m.err
    bad = cli(*base, "-m", "deepseek-v3", "-n", "256", "--set", "strategy.pp=8",
              "--set", "strategy.moe_a2a_overlap=true", "--set", "strategy.schedule=interleaved:2")
    assert bad.code == 2 and "Traceback" not in bad.err and "moe_shared_expert_overlap" in bad.err


def test_megatron_args_reader(tmp_path: Path) -> None:
    f = tmp_path / "moe.sh"
    # beside the alltoall dispatcher (Megatron-LM's default, allgather, refuses the overlap: test_review15b)
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall "
                 "--moe-shared-expert-overlap\n")
    sf = read_strategy_file(f)
    assert sf.strategy["moe_shared_expert_overlap"] is True
    assert not any("--moe-shared-expert-overlap" in u for u in sf.unused)


def test_never_hides_under_compute_already_hiding_other_traffic() -> None:
    """The shared experts' compute may already hide TP traffic (``hidden_fwd`` / ``hidden_bwd``): only the forward
    and backward compute left free hides the all-to-alls (here 1 us forward, nothing backward)."""
    job, g = _job(ep=8, dp=8, moe_shared_expert_overlap=True)
    mp = {"ep": np.asarray([10.0]), "hidden_fwd": np.asarray([1.0]), "hidden_bwd": np.asarray([2.0]),
          "hidden_ep": np.zeros(1)}
    comp = {"forward": np.asarray([1.0 + 1e-6]), "backward": np.asarray([1.5])}
    out = model_parallel_comm._with_shared_expert_overlap(job, g, mp, 1.0, 8.0, 0.0, comp)
    assert float(np.ravel(out["hidden_fwd"])[0]) - 1.0 == pytest.approx(1e-6, rel=1e-6)
    assert float(np.ravel(out["hidden_bwd"])[0]) == 2.0
    assert float(np.ravel(out["ep"])[0]) == pytest.approx(10.0 - 1e-6, rel=1e-12)


@pytest.mark.parametrize("a2a, probs", [(1e-6, 1.0), (1e-6, 1e-6), (1.0, 1e-6)])
def test_probabilities_all_to_all_hides_beside_fc1_only(a2a: float, probs: float) -> None:
    """The alltoall dispatcher's probabilities' all-to-all follows the dispatch's tokens' all-to-all
    (token_dispatcher.py @d98e8a64dd lines 705-724) and precedes its backward: it runs beside fc1 (forward and
    backward), never beside fc2, which sits at the combine (tokens only). By hand: forward min(a + p, fc1_f)
    + min(a, fc2_f), backward min(a, fc2_b) + min(a + p, fc1_b) per block; a recomputed forward repeats the forward
    pair."""
    job, g = _job(ep=8, dp=8, moe_shared_expert_overlap=True)
    f1, f2, b1, b2 = _sides(job, g)
    ep = 8 * (4 * a2a + 2 * probs) + 2 * (2 * a2a + probs)  # 8 blocks' 4 ops, 2 recomputed forwards' 2
    mp = {"ep": np.asarray([ep]), "hidden_fwd": np.zeros(1), "hidden_bwd": np.zeros(1), "hidden_ep": np.zeros(1)}
    out = model_parallel_comm._with_shared_expert_overlap(job, g, mp, a2a, 8.0, 2.0, None, probs)
    want_f = 8 * (min(a2a + probs, f1) + min(a2a, f2))
    want_b = 8 * (min(a2a, b2) + min(a2a + probs, b1)) + 2 * (min(a2a + probs, f1) + min(a2a, f2))
    assert float(np.ravel(out["hidden_fwd"])[0]) == pytest.approx(want_f, rel=1e-12)
    assert float(np.ravel(out["hidden_bwd"])[0]) == pytest.approx(want_b, rel=1e-12)
    assert float(np.ravel(out["ep"])[0]) == pytest.approx(ep - want_f - want_b, rel=1e-9, abs=1e-18)
