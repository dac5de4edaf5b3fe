"""The slowest EP group under force-balanced routing (docs/model.md#moe-rank-imbalance, "Several EP groups", moe27):
what the per-layer busiest-rank factor leaves out when a step waits for the slowest of G EP groups.

Megatron-Core's RandomSTE draws i.i.d. normal logits per token on every rank (moe_utils.py at 0d8e0714cd, a
per-rank torch.Generator, the last eager draw replayed under graph capture; at d98e8a64dd the EP RNG tracker), so a
layer's busiest rank carries ``M = max_r X_r`` copies; the model prices ``E[M] = mu f`` per layer and group. The
worst case for the step is G EP groups whose routing is independent AND frozen (the same draw every layer, micro-batch
and step), where the slowest group's excess over the priced mean is ``E[max_g M_g] - E[M] ~ e_G sd(M)``, and

    sd(M) = s_d sqrt(Var Z_(p) - 1/p),   s_d = sqrt(mu (E - k)/(E - 1))

because the loads sum to N k exactly: ``X_r - mu = s_d (Z_r - Zbar)`` (an exchangeable Gaussian with
``Var(X_r - X_s)/2 = s_d^2``), ``Cov(Z_(p), Zbar) = 1/p`` (every row of the order statistics' covariance matrix
sums to 1). Checked here against a Monte Carlo of the routing, with ``Var Z_(p)`` by quadrature of the order
statistic's density (cross-checked by its closed form at p = 2 and a sampled maximum of 8 normals). At the
validation rows' shapes the frozen bound is at most 0.30 % of the routed experts' time, so nothing is priced for it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from scalemodel.cost import moe_routing


def _order_stat_moments(p: int) -> tuple[float, float]:
    """E and Var of the largest of p i.i.d. N(0, 1): quadrature of ``z^j p phi(z) Phi(z)^(p-1)``."""
    z = np.linspace(-12.0, 12.0, 240001)
    dens = p * norm.pdf(z) * norm.cdf(z) ** (p - 1)
    m1 = float(np.trapezoid(z * dens, z))
    return m1, float(np.trapezoid(z * z * dens, z)) - m1 * m1


def _busiest(rng: np.random.Generator, trials: int, tokens: int, experts: int, top_k: int, ranks: int) -> np.ndarray:
    """``trials`` layers of RandomSTE routing (normal logits, top-k) over ``tokens`` tokens of one EP group, experts
    in contiguous blocks of E/p a rank: each layer's busiest rank's copies."""
    per_rank = experts // ranks
    out = np.empty(trials)
    for i in range(trials):
        logits = rng.standard_normal((tokens, experts), dtype=np.float32)
        chosen = np.argpartition(logits, -top_k, axis=1)[:, -top_k:]
        out[i] = np.bincount((chosen // per_rank).ravel(), minlength=ranks).max()
    return out


def test_order_statistic_variance_matches_the_table() -> None:
    """The quadrature against E[Z_(8)] = 1.42360 (Harter 1961, Biometrika 48, Table 1), the sample variance of
    400,000 maxima of 8 normals (within 4 standard errors: sd of a sample variance ~ v sqrt(2 / n), the maximum's
    light tail), and the max of 2 in closed form: mean 1/sqrt(pi), variance 1 - 1/pi."""
    e8, v8 = _order_stat_moments(8)
    assert e8 == pytest.approx(1.42360, abs=2e-5)
    draws = np.random.default_rng(8).standard_normal((400_000, 8)).max(axis=1)
    assert v8 == pytest.approx(draws.var(ddof=1), abs=4 * v8 * np.sqrt(2.0 / draws.size))
    e2, v2 = _order_stat_moments(2)
    assert e2 == pytest.approx(1.0 / np.sqrt(np.pi), rel=1e-6)
    assert v2 == pytest.approx(1.0 - 1.0 / np.pi, rel=1e-6)


def test_busiest_rank_spread_and_the_slowest_frozen_group_match_monte_carlo() -> None:
    """Qwen3-like routing (128 experts, top-8) at EP 8, 512 tokens a group (mu = 512 copies a rank): the Monte Carlo
    mean of M is the priced factor (moe_routing.copy_load_factor, within 4 standard errors plus its stated
    0.5 / sqrt(mu) of the excess), its sd is ``s_d sqrt(Var Z_(p) - 1/p)`` (within 10 %: the sample sd of 3000 draws
    has a 1.3 % standard error, the load's skew ~ 1/sqrt(mu) moves it a few %), and the slowest of G = 4 frozen,
    independent groups exceeds the mean of M by ``e_G sd(M)`` within 15 % (M itself is right-skewed, which the
    Gaussian e_G leaves out)."""
    tokens, experts, top_k, ranks, trials = 512, 128, 8, 8, 3000
    rng = np.random.default_rng(20261206)
    m = _busiest(rng, trials, tokens, experts, top_k, ranks)
    mu = tokens * top_k / ranks
    s_d = np.sqrt(mu * (experts - top_k) / (experts - 1))
    f = float(moe_routing.copy_load_factor(mu, experts, top_k, ranks))
    se = m.std(ddof=1) / np.sqrt(trials)
    assert m.mean() == pytest.approx(mu * f, abs=4 * se + 0.5 / np.sqrt(mu) * mu * (f - 1))
    _, var_p = _order_stat_moments(ranks)
    sd_m = s_d * np.sqrt(var_p - 1.0 / ranks)
    assert m.std(ddof=1) == pytest.approx(sd_m, rel=0.10)
    groups = m[: (trials // 4) * 4].reshape(-1, 4)  # each row: four independent groups' frozen draws
    excess = groups.max(axis=1).mean() - m.mean()
    e_g, _ = _order_stat_moments(4)
    assert excess == pytest.approx(e_g * sd_m, rel=0.15)
    # and the excess is a small share of the priced excess over the mean: e_G sd(M) / (mu (f - 1)) = 0.36 here
    assert excess / (mu * (f - 1)) < 0.45


@pytest.mark.parametrize("experts,top_k,ranks,mu,groups,bound", [
    (128, 8, 16, 49152, 8, 0.0031),   # mcrec26_b300_qwen3_235b_fp8mx (EP 16, 8 groups): the validation rows' largest
    (128, 8, 8, 32768, 4, 0.0028),    # mcrec26_h100_qwen3_30b (EP 8, 4 groups)
    (128, 8, 64, 32768, 2, 0.0014),   # mcrec26_gb200_qwen3_235b_fp8mx (EP 64, 2 groups)
    (256, 8, 8, 32768, 2, 0.0016),    # mb2511_b200_dsv3_mtp_fp8mx (EP 8, 2 groups: the one 25.11 row with G > 1)
])
def test_frozen_group_bound_at_the_validation_shapes(experts: int, top_k: int, ranks: int, mu: float, groups: int,
                                                     bound: float) -> None:
    """The documented worst case (independent, frozen groups) as a share of the routed experts' mean load,
    ``e_G s_d sqrt(Var Z_(p) - 1/p) / mu``, by the formula checked above: under 0.31 % on every row with G > 1
    (docs/model.md's table of them); the per-layer factor the model prices is 3-9x that excess."""
    e_g, _ = _order_stat_moments(groups)
    _, var_p = _order_stat_moments(ranks)
    s_d = np.sqrt(mu * (experts - top_k) / (experts - 1))
    share = e_g * s_d * np.sqrt(var_p - 1.0 / ranks) / mu
    assert share < bound
    f = float(moe_routing.copy_load_factor(mu, experts, top_k, ranks))
    assert (f - 1.0) > 2.5 * share
