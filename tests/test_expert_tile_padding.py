"""Routed experts' GEMMs in whole M tiles (docs/model.md#expert-tile-padding): each expert's random dropless token
count is padded to 128-row tiles, rows = 128 E[ceil(X / 128)], checked by hand from the Fourier form, against a
Monte Carlo of uniformly routed counts, and in one MoE layer's priced forward."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape


def test_a_tile_multiple_mean_pays_exactly_half_a_tile() -> None:
    """Qwen3-30B at EP 8, b 1, s 4096: m = 8 x 4096 x 8 / 128 = 2048 = 16 tiles, sd = sqrt(2048 x 15/16); every
    sin(2 pi k m / 128) is 0, so rows = 2048 + 64 exactly."""
    sd = math.sqrt(2048 * 15 / 16)
    assert float(compute.expert_padded_rows(2048.0, sd)) == pytest.approx(2112.0, abs=1e-9)


def test_the_first_harmonic_by_hand() -> None:
    """m = 2080 = 16.25 tiles: sin(2 pi 16.25) = 1, sin(2 pi 32.5) = 0, sin(2 pi 48.75) = -1 (its exponential e^-20.8
    negligible): rows = 2080 + 64 + (128/pi) exp(-2 pi^2 x 1920/16384) = 2148.031."""
    sd = math.sqrt(1920.0)
    first = 128 / math.pi * math.exp(-2 * math.pi ** 2 * 1920 / 128 ** 2)
    assert first == pytest.approx(4.0314, abs=1e-4)
    assert float(compute.expert_padded_rows(2080.0, sd)) == pytest.approx(2080 + 64 + first, abs=1e-6)


@pytest.mark.parametrize(("tokens", "k", "experts"), [(32768, 8, 128), (33120, 4, 128), (8192, 8, 128),
                                                      (40000, 2, 8), (800, 2, 16), (1024, 2, 16)])
def test_matches_a_monte_carlo_of_uniformly_routed_counts(tokens: int, k: int, experts: int) -> None:
    """An expert's count under uniform top-k routing is Binomial(tokens, k / E); the mean of 128 ceil(X / 128) over
    200,000 draws, less the first tile the GEMM curve already prices (max(m, 128) - m), agrees within 4 standard
    errors plus half a row plus the lattice term (the binomial is on the integers, the form's normal is not: half the
    mass of the integer at a tile edge, at most 128 / (2 sqrt(2 pi) sd) rows: 0.6 at sd 44, 2.4 at sd 10.6). The last
    two: 100 and 128 tokens an expert, below and at one tile."""
    rng = np.random.default_rng(20251216)
    p = k / experts
    x = rng.binomial(tokens, p, size=200_000)
    padded = 128.0 * np.ceil(x / 128.0)
    m, sd = tokens * p, math.sqrt(tokens * p * (1 - p))
    se = padded.std(ddof=1) / math.sqrt(x.size)
    want = m + padded.mean() - max(m, 128.0)
    lattice = 128.0 / (2 * math.sqrt(2 * math.pi) * sd)
    assert abs(float(compute.expert_padded_rows(m, sd)) - want) <= 4 * se + 0.5 + lattice


def test_bounds_and_limits() -> None:
    """Never fewer rows than tokens, never a whole tile more; a wide spread gives m + 64 whatever the mean (from one
    tile up); below one tile only the spill into a second is added (none at a narrow spread), and it joins the
    half tile continuously at m = 128; no spread (k = E) gives the ceiling 128 ceil(m / 128), nothing below a tile."""
    m = np.array([1.0, 50.0, 127.0, 128.0, 1000.0, 1035.0, 2050.0, 16384.0, 1e6])
    for sd in (0.0, 3.0, 30.0, 300.0):
        rows = compute.expert_padded_rows(m, sd)
        assert np.all(rows >= m) and np.all(rows <= m + 128.0)
    assert compute.expert_padded_rows(m[3:], 300.0) == pytest.approx(m[3:] + 64.0, abs=1e-6)
    assert compute.expert_padded_rows(m[:2], 3.0) == pytest.approx(m[:2], abs=0.5)
    below, at = (float(compute.expert_padded_rows(x, 10.0)) for x in (127.99, 128.0))
    assert below == pytest.approx(at, abs=0.1) and at == pytest.approx(192.0, abs=1e-6)
    assert compute.expert_padded_rows(np.array([16384.0, 16385.0, 50.0]), 0.0) == pytest.approx([16384.0, 16512.0,
                                                                                              50.0])
    # a narrow spread about a tile edge: half the mass spills into the next tile, + 64 within the series' reach
    assert float(compute.expert_padded_rows(4096.0, 8.0)) == pytest.approx(4160.0, abs=0.5)
    assert float(compute.expert_padded_rows(4096.0 + 40, 8.0)) == pytest.approx(4096.0 + 128, abs=0.5)
    assert compute.expert_padded_rows(np.zeros((2, 3)), 1.0).shape == (2, 3)


def test_a_moe_layer_prices_its_experts_at_the_padded_rows() -> None:
    """One Qwen3-30B MoE layer on H100 at EP 8, b 1, s 4096 (16 local experts of 2048 tokens, a tile multiple): the
    forward GEMM time is the router's, FC1's and FC2's GEMMs, the experts' at 2112 rows each, computed here from
    gemm_time at those shapes; the FLOP count stays the tokens'."""
    sh = shape(layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, vocab=151936, gated_mlp=True,
               moe_experts=128, moe_top_k=8, moe_ffn_hidden=768)
    g = dict(peak_flops=989e12, gemm_max=0.68, gemm_half_dim=87.0, memory_bandwidth=3.35e12, memory_efficiency=0.85)
    lt = compute.layer_compute_time(sh, moe=True, attention=False, ep=8, etp=1, micro_batch=1, seq_len=4096, **g)
    T, E, h, fe = 4096.0, 128.0, 2048.0, 768.0
    router = compute.gemm_time(T, E, h, **g)
    experts = compute.gemm_time(2112.0, 2 * fe, h, 16, **g) + compute.gemm_time(2112.0, h, fe, 16, **g)
    assert float(lt.forward_gemm) == pytest.approx(float(router + experts), rel=1e-9)
    assert float(lt.forward_flops) == pytest.approx(2 * T * h * E + 2 * T * 8 * fe * h * 3, rel=1e-12)


@pytest.mark.parametrize(("m", "sd"), [(384.3, 0.3), (896.5, 0.5), (897.0, 1.0), (131.0, 1.01), (127.0, 1.5),
                                       (1.5, 0.43), (2.5, 0.56), (200.0, 2.0), (2080.0, 3.0)])
def test_a_narrow_spread_against_direct_integration(m: float, sd: float) -> None:
    """sd under tile/50 (k close to E, or a handful of tokens): tile E[max(ceil(X / tile), 1)] for X ~ N(m, sd^2)
    summed tile by tile from the normal CDF, sum_j j tile (Phi((j tile - m)/sd) - Phi(((j - 1) tile - m)/sd)), less the
    first tile the curve prices. (review23c: the 32-term series had not converged there: 896.5 rows at sd 0.5 were
    priced 988.4 against 1003.7, 1.5 rows at sd 0.43 as 3.0.) E.g. 131 tokens at sd 1.01 (top-127 of 128 experts,
    132 tokens): P(X > 128) = Phi(3 / 1.01) = 0.9985, rows 128 + 128 x 0.9985."""
    tile = 128.0
    j = np.arange(-2, int(m // tile) + 4, dtype=float)
    mass = stats.norm.cdf(j * tile, m, sd) - stats.norm.cdf((j - 1) * tile, m, sd)
    rows = tile * float(np.sum(np.maximum(j, 1.0) * mass))
    want = m + rows - max(m, tile)
    assert float(compute.expert_padded_rows(m, sd)) == pytest.approx(want, abs=0.01)
