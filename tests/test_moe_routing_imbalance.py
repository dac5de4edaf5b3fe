"""The busiest EP rank under random top-k routing (docs/model.md#moe-rank-imbalance, scalemodel/cost/moe_routing.py):
the expected maximum load against a Monte Carlo of the routing Megatron-Core's moe_router_force_load_balancing runs
(i.i.d. normal logits per token, top-k: RandomSTE), the published order-statistic constants, the DeepEP receivers,
and the step model's use of it (expert GEMMs and EP bytes scale, the stated imbalance wins, ep 1 is untouched)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import compute, ep_dispatch, moe_routing
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

QWEN3_30B = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                                ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def route(rng: np.random.Generator, tokens: int, experts: int, top_k: int) -> np.ndarray:
    """RandomSTE + top-k: each token's logits are i.i.d. normal (``logits.clone().normal_()``), its experts the k
    largest, so k DISTINCT experts per token. Returns (tokens, k) expert indices."""
    logits = rng.standard_normal((tokens, experts), dtype=np.float32)
    return np.argpartition(logits, -top_k, axis=1)[:, -top_k:]


def test_expected_max_of_normals_matches_the_published_table() -> None:
    """E[max of n standard normals]: Harter (1961, Biometrika 48, Table 1) / Teichroew (1956): n = 2 is 1/sqrt(pi)
    exactly; n = 4, 8, 16, 32, 64: 1.02938, 1.42360, 1.76599, 2.06967, 2.34373 (5 decimals)."""
    e = moe_routing.expected_max_standard_normal(np.array([1, 2, 4, 8, 16, 32, 64]))
    assert e[0] == pytest.approx(0.0, abs=1e-9)
    assert e[1] == pytest.approx(1.0 / math.sqrt(math.pi), rel=1e-6)
    assert e[2:] == pytest.approx([1.02938, 1.42360, 1.76599, 2.06967, 2.34373], abs=2e-5)


@pytest.mark.parametrize("tokens,experts,top_k,ranks,trials", [
    (512, 128, 4, 8, 300),   # GPT-OSS routing (128 experts, top-4) at EP 8: mu = 256 copies a rank
    (256, 128, 8, 16, 300),  # Qwen3-30B routing (128, top-8) at EP 16: mu = 128
    (256, 256, 8, 64, 300),  # DeepSeek-V3-like 256 experts, top-8, EP 64: mu = 32 (skewed: the hard case)
    (128, 32, 2, 8, 600),    # Mixtral-like few experts
])
def test_busiest_rank_copies_match_monte_carlo(tokens: int, experts: int, top_k: int, ranks: int,
                                               trials: int) -> None:
    """The expected busiest rank's routed copies (expert rows, all-to-all receive bytes) against a Monte Carlo of
    the actual routing: ``trials`` layers of ``tokens`` tokens in the EP group's dispatch, experts in contiguous
    blocks of E/p per rank. Tolerance: 4 standard errors of the Monte Carlo mean (its own sample sd over
    sqrt(trials)) plus the normal approximation's stated error, 0.5 / sqrt(mu) of the excess over the mean
    (Cornish-Fisher: gamma (E[Z_(p)^2] - 1) / (6 e_p) <= 0.35 gamma for p <= 64 with gamma ~ 1/sqrt(mu))."""
    rng = np.random.default_rng(20261205 + ranks)
    per_rank = experts // ranks
    loads = np.array([np.bincount((route(rng, tokens, experts, top_k) // per_rank).ravel(), minlength=ranks)
                      for _ in range(trials)], dtype=float)
    mu = tokens * top_k / ranks
    assert loads.sum(axis=1) == pytest.approx(tokens * top_k)  # every token puts exactly k copies somewhere
    busiest = loads.max(axis=1)
    se = busiest.std(ddof=1) / math.sqrt(trials)
    f = float(moe_routing.copy_load_factor(mu, experts, top_k, ranks))
    excess = (f - 1.0) * mu
    assert abs(busiest.mean() - mu * f) <= 4.0 * se + 0.5 / math.sqrt(mu) * excess
    # the covariance the formula rests on: Var(X_r - X_s) / 2 = mu (E - k) / (E - 1) (distinct experts per token)
    diff = loads[:, 0] - loads[:, 1]
    half_var = diff.var(ddof=1) / 2.0
    want = mu * (experts - top_k) / (experts - 1)
    assert half_var == pytest.approx(want, rel=4.0 * math.sqrt(2.0 / (trials - 1)))  # chi-square sd of a variance


def test_factor_by_hand_and_its_limits() -> None:
    """GPT-OSS on a DGX-B200 (T = 16,384 tokens a rank, k 4, E 128, EP 8): mu = 65,536 copies, f = 1 + 1.42360
    sqrt(124 / (127 x 65,536)) = 1.005491. No spread at ep 1, with every expert chosen (k = E) or one expert; the
    cap p min(k, E/p) / k, the most one rank can take (two experts a rank: 2 of each token's 4 copies), where the
    normal form would pass it (a load far below one token)."""
    assert float(moe_routing.copy_load_factor(65536, 128, 4, 8)) == pytest.approx(
        1.0 + 1.42360 * math.sqrt(124.0 / (127.0 * 65536.0)), rel=1e-6)
    assert float(moe_routing.copy_load_factor(65536, 128, 4, 1)) == 1.0
    assert float(moe_routing.copy_load_factor(65536, 8, 8, 8)) == 1.0
    assert float(moe_routing.copy_load_factor(1e-3, 128, 4, 64)) == pytest.approx(64 * 2 / 4)
    # broadcasting over candidates, and more tokens always closer to balanced
    f = moe_routing.copy_load_factor(np.array([[1e3], [1e4], [1e5]]), 128, 8, np.array([2, 8, 64]))
    assert f.shape == (3, 3)
    assert np.all(np.diff(f, axis=0) < 0) and np.all(np.diff(f, axis=1) > 0)


@pytest.mark.parametrize("tokens,experts,top_k,ranks,per_domain,trials", [
    (256, 128, 4, 32, 8, 100),
    (128, 64, 8, 16, 4, 200),
])
def test_deepep_receivers_match_monte_carlo(tokens: int, experts: int, top_k: int, ranks: int, per_domain: int,
                                            trials: int) -> None:
    """The busiest DeepEP receiver per stage against a Monte Carlo of the kernels' rule: the RDMA receiver (domain d,
    local rank i) gets each token of the same local rank in the other domains that hits domain d, once; the NVLink
    receiver gets each token hitting it from the sources of the other local ranks, once. NVLink: within 4 standard
    errors plus 0.5 / sqrt(mean) of the excess (the rank-level form is exact up to the Gaussian step). RDMA: the form
    is an upper estimate (receivers share only part of their tokens: module docstring), at most 8 % of the excess
    high and never low beyond 4 standard errors."""
    rng = np.random.default_rng(7 + ranks)
    D, G, N = ranks // per_domain, per_domain, tokens * ranks
    src = np.repeat(np.arange(ranks), tokens)
    s_dom, s_idx = src // G, src % G
    r_dom, r_idx = np.arange(ranks) // G, np.arange(ranks) % G
    nvl, rdma = [], []
    for _ in range(trials):
        top = route(rng, N, experts, top_k)
        hit_rank = np.zeros((N, ranks), dtype=bool)
        hit_rank[np.arange(N)[:, None], top // (experts // ranks)] = True
        hit_dom = np.zeros((N, D), dtype=bool)
        hit_dom[np.arange(N)[:, None], top // (experts // D)] = True
        nvl.append((hit_rank & (s_idx[:, None] != r_idx[None, :])).sum(axis=0).max())
        rdma.append(max(int(hit_dom[(s_idx == r_idx[r]) & (s_dom != r_dom[r]), r_dom[r]].sum()) for r in range(ranks)))
    f_inter, f_intra = ep_dispatch.hierarchical_load_factors(tokens, experts, top_k, ranks, per_domain)
    q_p = 1.0 - float(moe_routing.miss_probability(experts, top_k, experts / ranks))
    q_d = 1.0 - float(moe_routing.miss_probability(experts, top_k, experts / D))
    mean_nvl, mean_rdma = tokens * (ranks - D) * q_p, tokens * (D - 1) * q_d
    # the means are the bytes hierarchical_bytes prices (per token byte)
    inter, intra = ep_dispatch.hierarchical_bytes(1.0, experts, top_k, ranks, per_domain)
    assert (float(inter) * tokens, float(intra) * tokens) == pytest.approx((mean_rdma, mean_nvl))
    nvl_a, rdma_a = np.asarray(nvl, dtype=float), np.asarray(rdma, dtype=float)
    se_n, se_r = nvl_a.std(ddof=1) / math.sqrt(trials), rdma_a.std(ddof=1) / math.sqrt(trials)
    ex_n, ex_r = (float(f_intra) - 1) * mean_nvl, (float(f_inter) - 1) * mean_rdma
    assert abs(nvl_a.mean() - mean_nvl * float(f_intra)) <= 4 * se_n + 0.5 / math.sqrt(mean_nvl) * ex_n
    assert rdma_a.mean() - mean_rdma <= ex_r + 4 * se_r
    assert rdma_a.mean() - mean_rdma >= 0.92 * ex_r - 4 * se_r


def _step(ep: int, imbalance: float | None, flex: bool = False) -> dict[str, float]:
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096, moe_rank_imbalance=imbalance)
    job = build_job(cl, QWEN3_30B, tr)
    st = StrategySpec(tp=1, pp=1, ep=ep, dp=16, moe_flex_dispatcher=flex)
    res = evaluate(job, grid_from_strategy(st, tr, 16, job))
    return {k: float(v[0]) for k, v in res.breakdown.items()} | {"step": float(res.step_time[0])}


def test_layer_compute_scales_the_routed_rows_by_hand() -> None:
    """``moe_load`` f adds the busiest rank's extra routed rows and nothing else: the forward grows by the expert
    GEMMs at f M rows less those at M rows (each padded to whole tiles; E/ep experts, up T x 2 f_e x h, down
    T x h x f_e) plus (f - 1) of the experts' activation bytes 3 eb T k f_e and of the dispatcher's sort and unsort
    of the received rows, 4 eb T k h (16 local experts), at the HBM roofline; router, shared path and FLOPs
    unchanged."""
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=256, micro_batch=2, precision="bf16", seq_len=4096)
    job = build_job(cl, QWEN3_30B, tr)
    sh = job.shape
    kw = dict(micro_batch=2.0, seq_len=4096.0, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
              gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency)
    f, ep = 1.3, 8.0
    base = compute.layer_compute_time(sh, ep=ep, moe=True, etp=1, **kw)
    busy = compute.layer_compute_time(sh, ep=ep, moe=True, etp=1, moe_load=f, **kw)
    T, k, E, fe, h = 8192.0, 8.0, 128.0, 768.0, 2048.0
    M = ep * T * k / E
    g = dict(peak_flops=job.peak_flops, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
             memory_bandwidth=job.memory_bandwidth, memory_efficiency=job.memory_efficiency)

    def experts(rows: float) -> float:  # each expert's rows padded to whole M tiles (test_expert_tile_padding)
        rows = float(compute.expert_padded_rows(rows, math.sqrt(M * (1 - k / E))))
        return float(compute.gemm_time(rows, 2 * fe, h, E / ep, **g) + compute.gemm_time(rows, h, fe, E / ep, **g))

    act = float(compute.memory_time((3 * 2.0 * T * k * fe + 4 * 2.0 * T * k * h) * (f - 1),
                                    memory_bandwidth=job.memory_bandwidth,
                                    memory_efficiency=job.memory_efficiency))
    assert float(busy.forward - base.forward) == pytest.approx(experts(f * M) - experts(M) + act, rel=1e-9)
    assert float(busy.forward_flops) == float(base.forward_flops)


def test_step_uses_the_stated_imbalance_and_defaults_to_random_routing() -> None:
    """A stated max / mean of 1 is the balanced (mean) model; the default lies between it and any larger stated
    figure with the random-routing factor of the EP dispatch's copies (T k = 32,768 a rank at EP 16: f = 1.00869),
    applied to compute and ep_comm alike; ep 1 ignores the field."""
    flat, dflt, worse = _step(16, 1.0), _step(16, None), _step(16, 1.25)
    f = float(moe_routing.copy_load_factor(4096 * 8, 128, 8, 16))
    # 1.76599: the expected maximum of 16 standard normals (Tippett 1925's table; the integral of
    # 16 x phi(x) Phi(x)^15 dx = 1.7659914), e_p of the module docstring at p = 16 ranks
    assert f == pytest.approx(1.0 + 1.76599 * math.sqrt(120 / (127 * 32768)), rel=1e-5)
    for key in ("compute", "ep_comm", "step"):
        assert flat[key] < dflt[key] < worse[key]
    # the all-to-all: its bandwidth term carries f x the bytes, its latency does not: (f - 1) / 0.25 of the stated
    # 1.25's growth (to 5e-4: NCCL's per-size protocol and chunking are not exactly linear in the bytes, nor is the
    # dispatcher's latency-bound all-to-all of the routing probabilities, 2 bytes a row, docs/model.md#ep-probs-counts)
    grow = (dflt["ep_comm"] - flat["ep_comm"]) / (worse["ep_comm"] - flat["ep_comm"])
    assert grow == pytest.approx((f - 1) / 0.25, rel=5e-4)
    assert _step(1, 1.0)["step"] == _step(1, 2.0)["step"] == _step(1, None)["step"]


def test_flex_dispatcher_bytes_grow_with_the_imbalance() -> None:
    """DeepEP / HybridEP: the stated figure scales both stages' bytes; the default (random routing's distinct tokens
    per receiver) lies between balanced and 1.25."""
    flat, dflt, worse = _step(16, 1.0, True), _step(16, None, True), _step(16, 1.25, True)
    assert flat["ep_comm"] < dflt["ep_comm"] < worse["ep_comm"]


def test_field_is_checked() -> None:
    """Below 1 (a busiest rank under the mean) is refused, naming the field."""
    with pytest.raises((InputError, ValueError)) as err:
        TrainingSpec.model_validate({"moe_rank_imbalance": 0.9})
    assert "moe_rank_imbalance" in str(err.value)


def test_a_grid_of_ep_candidates_prices_each_as_alone() -> None:
    """The planner's unit: one grid holding ep 2, 4, 8, 16 (the factor varies per candidate) prices each candidate
    as a grid of that one strategy does, with the random-routing default and with a stated figure."""
    from msgspec.structs import replace

    cl = load_cluster("dgx-h100")
    for imbalance in (None, 1.1):
        tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096,
                          moe_rank_imbalance=imbalance)
        job = build_job(cl, QWEN3_30B, tr)
        grids = [grid_from_strategy(StrategySpec(tp=1, pp=1, ep=e, dp=16), tr, 16, job) for e in (2, 4, 8, 16)]
        arrays = {f: np.concatenate([np.ravel(getattr(gr, f)) for gr in grids]) for f in grids[0].__struct_fields__
                  if isinstance(getattr(grids[0], f), np.ndarray) and np.size(getattr(grids[0], f)) == 1}
        assert "ep" in arrays
        together = evaluate(job, replace(grids[0], **arrays)).step_time
        assert np.shape(together) == (4,)
        alone = [float(evaluate(job, gr).step_time[0]) for gr in grids]
        assert np.asarray(together) == pytest.approx(alone, rel=1e-12)
        assert len(set(alone)) == 4
