"""Straggler statistics: order statistics of per-worker step times.

In a synchronous (BSP) step every worker has to finish, so the step time is the maximum of the N
per-worker times X_1..X_N; waiting for the first K of P workers (backup workers) takes the K-th
order statistic X_(K:P). Reference: docs/model.md#stragglers.

Distributions (``dist``), each given by its mean and coefficient of variation ``cv`` = sd/mean
(use :func:`mean_cv_from_params` to start from a distribution's own parameters):

- ``normal``      N(mean, (cv*mean)^2). Can go negative for large cv: results that would be negative
                  raise InputError instead of being clipped.
- ``lognormal``   exp(m + s Z) with s^2 = ln(1 + cv^2), m = ln(mean) - s^2/2.
- ``gamma``       shape a = 1/cv^2, scale = mean*cv^2.
- ``weibull``     shape k solving Gamma(1+2/k)/Gamma(1+1/k)^2 - 1 = cv^2, scale mean/Gamma(1+1/k).
- ``exp``         exponential with the given mean (cv is forced to 1 and ignored).
- ``shifted-exp`` Delta + Exp, Delta = mean*(1 - cv), exponential mean = mean*cv (needs cv <= 1);
                  the straggler model of Dutta et al. (AISTATS 2018) and Lee et al. (2018).
- empirical       measured step times: see :func:`empirical_expected_kth`.

All six are scale families: at fixed cv, every order statistic is ``mean`` times a number that
depends only on (k, N, cv, dist). Every function here broadcasts over numpy arrays.

Exact backend (David & Nagaraja 2003): X_(k:N) = F^{-1}(U_(k)) with U_(k) ~ Beta(k, N-k+1), so
E[X_(k:N)] = E_p[F^{-1}(Beta^{-1}(k, N-k+1; p))] with p uniform. Writing p = Phi(z) turns this into
a Gaussian expectation over z, evaluated by Gauss-Hermite quadrature. The upper tail 1 - U_(k)
is computed directly from the mirrored Beta(N-k+1, k) so nothing cancels near u = 1; this keeps
the integral accurate for N up to 1e7 and beyond (tested).
"""

from __future__ import annotations

import math
from math import erfc, exp, gamma, pi, sqrt
from typing import Any

import numpy as np

from scalemodel.errors import InputError
from scalemodel.specs.cluster import GAMMA_CV_FINITE, WEIBULL_CV_MIN, WEIBULL_SHAPE_RANGE, cv_refusal

DISTS = ("normal", "lognormal", "gamma", "weibull", "exp", "shifted-exp")
# the parameters mean_cv_from_params reads for each distribution
DIST_PARAMETERS = {"normal": "mu and sigma", "lognormal": "mu and s (of the log)", "gamma": "shape and scale",
                   "weibull": "shape and scale", "exp": "rate or scale",
                   "shifted-exp": "rate or scale (and an optional shift)"}
EULER_GAMMA = 0.5772156649015329

# Gauss-Hermite (probabilists') nodes for the exact backend. 96 nodes give ~1e-7 relative
# agreement with adaptive quadrature for every family here (see tests/test_stragglers.py).
_QUAD_NODES = 96

Array = Any  # float or numpy array


def _arr(x: Array, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name} is not finite: {x!r}", where=name, allowed="finite numbers")
    return a


def _check_dist(dist: str) -> str:
    if dist not in DISTS:
        raise InputError(f"unknown step-time distribution {dist!r}", where="dist", allowed=", ".join(DISTS))
    return dist


def _check_mean_cv(mean: Array, cv: Array, dist: str) -> tuple[np.ndarray, np.ndarray]:
    m = _arr(mean, "mean")
    c = _arr(cv, "cv")
    if np.any(m <= 0):
        raise InputError("a mean step time is <= 0", where="mean", allowed="mean step times > 0 seconds")
    if dist == "exp":
        c = np.ones_like(c)
    if np.any(c < 0):
        raise InputError("a coefficient of variation is negative", where="cv", allowed="cv >= 0")
    if (why := cv_refusal(dist, c, GAMMA_CV_FINITE)) is not None:
        raise InputError(why[0], where="cv", allowed=why[1])
    return m, c


def _check_nk(n: Array, k: Array | None = None) -> tuple[np.ndarray, np.ndarray]:
    nn = _arr(n, "workers")
    if np.any(nn < 1):
        raise InputError("fewer than 1 worker", where="workers", allowed="N >= 1 workers")
    kk = nn if k is None else _arr(k, "k")
    if np.any(kk < 1) or np.any(kk > nn):
        raise InputError("an order k is < 1 or > N", where="k", allowed="1 <= k <= N (the k-th fastest of N workers)")
    return nn, kk


# --------------------------------------------------------------------------- parameters

def weibull_shape_from_cv(cv: Array) -> np.ndarray:
    """Weibull shape k with coefficient of variation ``cv``: solves
    Gamma(1+2/k)/Gamma(1+1/k)^2 - 1 = cv^2 by vectorised bisection on ln k (monotone decreasing), k in
    :data:`~scalemodel.specs.cluster.WEIBULL_SHAPE_RANGE` (its accuracy there: the constant's comment)."""
    from scipy.special import gammaln  # heavy (~150 ms): loaded on first use, not on import

    c = np.asarray(cv, dtype=float)
    target = np.log1p(c * c)
    lo = np.full(c.shape, np.log(WEIBULL_SHAPE_RANGE[0]))
    hi = np.full(c.shape, np.log(WEIBULL_SHAPE_RANGE[1]))
    for _ in range(70):
        mid = 0.5 * (lo + hi)
        k = np.exp(mid)
        val = gammaln(1 + 2 / k) - 2 * gammaln(1 + 1 / k)  # ln(1 + cv^2) at this k
        too_var = val > target  # k too small
        lo = np.where(too_var, mid, lo)
        hi = np.where(too_var, hi, mid)
    return np.exp(0.5 * (lo + hi))


def params_from_mean_cv(mean: Array, cv: Array, dist: str) -> dict[str, np.ndarray]:
    """The distribution's own parameters from (mean, cv); formulas in the module docstring."""
    from scipy.special import gamma as gamma_fn  # heavy (~150 ms): loaded on first use, not on import

    _check_dist(dist)
    m, c = _check_mean_cv(mean, cv, dist)
    if dist == "normal":
        return {"mu": m, "sigma": c * m}
    if dist == "lognormal":
        s2 = np.log1p(c * c)
        return {"mu": np.log(m) - s2 / 2, "s": np.sqrt(s2)}
    if dist == "gamma":
        c = np.where(c > 0, c, 1.0)  # cv = 0 is handled as a constant by the callers
        return {"shape": 1 / (c * c), "scale": m * c * c}
    if dist == "weibull":
        k = weibull_shape_from_cv(np.where(c > 0, c, 1.0))
        return {"shape": k, "scale": m / gamma_fn(1 + 1 / k)}
    if dist == "exp":
        return {"scale": m}
    return {"shift": m * (1 - c), "scale": m * c}  # shifted-exp


def mean_cv_from_params(dist: str, **p: float) -> tuple[float, float]:
    """(mean, cv) of a distribution given by its own parameters.

    normal(mu, sigma); lognormal(mu, s) of the log; gamma(shape, scale); weibull(shape, scale);
    exp(rate) or exp(scale); shifted-exp(shift, rate) or shifted-exp(shift, scale).
    """
    _check_dist(dist)
    try:
        if dist == "normal":
            mean, sd = p["mu"], p["sigma"]
        elif dist == "lognormal":
            mean = exp(p["mu"] + p["s"] ** 2 / 2)
            sd = mean * sqrt(exp(p["s"] ** 2) - 1)
        elif dist == "gamma":
            mean, sd = p["shape"] * p["scale"], sqrt(p["shape"]) * p["scale"]
        elif dist == "weibull":
            k, lam = p["shape"], p["scale"]
            mean = lam * gamma(1 + 1 / k)
            sd = lam * sqrt(max(gamma(1 + 2 / k) - gamma(1 + 1 / k) ** 2, 0.0))
        else:
            scale = p["scale"] if "scale" in p else 1 / p["rate"]
            shift = p.get("shift", 0.0) if dist == "shifted-exp" else 0.0
            mean, sd = shift + scale, scale
    except KeyError as exc:
        raise InputError(f"missing parameter {exc.args[0]!r} for the {dist} distribution", where="dist",
                         allowed=DIST_PARAMETERS[dist]) from None
    if not mean > 0 or sd < 0:
        raise InputError(f"{dist} parameters {p} give mean {mean}, sd {sd}", where="dist",
                         allowed="parameters giving a positive mean")
    return mean, sd / mean


# --------------------------------------------------------------------------- quantiles

def _quantile_ut(u: np.ndarray, t: np.ndarray, mean: np.ndarray, cv: np.ndarray, dist: str) -> np.ndarray:
    """F^{-1} evaluated from u and its accurate complement t = 1 - u (both in [0, 1])."""
    from scipy.special import gammainccinv, gammaincinv, ndtri  # heavy (~150 ms): loaded on first use, not on import

    degenerate = cv == 0  # every family collapses to the constant ``mean``
    if np.any(degenerate) and dist not in ("exp",):
        safe = _quantile_ut(u, t, mean, np.where(degenerate, 0.5, cv), dist)
        return np.where(degenerate, mean, safe)
    p = params_from_mean_cv(mean, cv, dist)
    upper = u > 0.5  # use the complement there: no cancellation near u = 1
    with np.errstate(divide="ignore", invalid="ignore"):
        if dist == "normal":
            z = np.where(upper, -ndtri(t), ndtri(u))
            return p["mu"] + p["sigma"] * z
        if dist == "lognormal":
            z = np.where(upper, -ndtri(t), ndtri(u))
            return np.exp(p["mu"] + p["s"] * z)
        if dist == "gamma":
            a = p["shape"]
            g = np.where(upper, gammainccinv(a, t), gammaincinv(a, u))
            return g * p["scale"]
        e = np.where(upper, -np.log(t), -np.log1p(-u))  # standard exponential quantile
        if dist == "weibull":
            return p["scale"] * e ** (1 / p["shape"])
        if dist == "exp":
            return p["scale"] * e
        return p["shift"] + p["scale"] * e


def quantile(q: Array, mean: Array, cv: Array, dist: str = "normal") -> np.ndarray:
    """q-quantile of one worker's step time, F^{-1}(q), for 0 < q < 1."""
    _check_dist(dist)
    qq = _arr(q, "quantile")
    if np.any((qq <= 0) | (qq >= 1)):
        raise InputError("a quantile is <= 0 or >= 1", where="quantile", allowed="quantiles strictly between 0 and 1")
    m, c = _check_mean_cv(mean, cv, dist)
    return _nonneg(_quantile_ut(qq, 1 - qq, m, c, dist), dist)


def quantile_max(q: Array, n: Array, mean: Array, cv: Array, dist: str = "normal") -> np.ndarray:
    """q-quantile of the slowest of N workers (the BSP step time): P(max <= x) = F(x)^N, so
    x_q = F^{-1}(q^{1/N}); the complement 1 - q^{1/N} = -expm1(ln q / N) is computed directly."""
    _check_dist(dist)
    qq = _arr(q, "quantile")
    if np.any((qq <= 0) | (qq >= 1)):
        raise InputError("a quantile is <= 0 or >= 1", where="quantile", allowed="quantiles strictly between 0 and 1")
    nn, _ = _check_nk(n)
    m, c = _check_mean_cv(mean, cv, dist)
    lq = np.log(qq) / nn
    return _nonneg(_quantile_ut(np.exp(lq), -np.expm1(lq), m, c, dist), dist)


def _nonneg(x: np.ndarray, dist: str) -> np.ndarray:
    if np.any(x < 0):
        raise InputError(f"the {dist} model gives a negative step time here (cv too large)", where="cv",
                         allowed="a smaller cv, or a positive distribution (lognormal, gamma, weibull)")
    return x


# --------------------------------------------------------------------------- exact order statistics

def _order_stat_nodes(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quadrature nodes (u, 1-u) of U_(k:N) ~ Beta(k, N-k+1) on a new trailing axis, and weights."""
    from numpy.polynomial.hermite_e import hermegauss  # loads all of numpy.polynomial (~4 ms): only this path needs it
    from scipy.special import betainccinv, betaincinv, ndtr  # heavy (~150 ms): loaded on first use, not on import

    z, w = hermegauss(_QUAD_NODES)
    w = w / w.sum()
    p, pc = ndtr(z), ndtr(-z)  # p and 1 - p, both accurate
    a = k[..., None]
    b = (n - k + 1)[..., None]
    lower = p < 0.5  # always invert from the small one of (p, 1 - p): nothing rounds to 1
    # U_(k) ~ Beta(k, N-k+1) at level p, and 1 - U_(k) ~ Beta(N-k+1, k) at level 1 - p.
    u = np.where(lower, betaincinv(a, b, p), betainccinv(a, b, pc))
    t = np.where(lower, betainccinv(b, a, p), betaincinv(b, a, pc))
    return u, t, w


def _order_stat_nodes_x(k: Array, n: Array, mean: Array, cv: Array, dist: str) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature nodes of X_(k:N) as step times, and their weights (last axis), after validation."""
    _check_dist(dist)
    nn, kk = _check_nk(n, k)
    m, c = _check_mean_cv(mean, cv, dist)
    nn, kk, m, c = np.broadcast_arrays(nn, kk, m, c)
    u, t, w = _order_stat_nodes(kk, nn)
    return _quantile_ut(u, t, m[..., None], c[..., None], dist), w


def expected_kth(k: Array, n: Array, mean: Array, cv: Array, dist: str = "normal") -> np.ndarray:
    """E[X_(k:N)], the k-th smallest of N i.i.d. step times, exact (David & Nagaraja 2003):

        E[X_(k:N)] = integral_0^1 F^{-1}(u) Beta(k, N-k+1).pdf(u) du,

    evaluated by Gauss-Hermite quadrature after u = Beta^{-1}(Phi(z)). k = N is the BSP step
    (the slowest worker); k = N with N+b workers is "wait for N of N+b" (Chen et al. 2016).
    N and k may be non-integer (the Beta form interpolates smoothly)."""
    x, w = _order_stat_nodes_x(k, n, mean, cv, dist)
    return _nonneg(np.sum(x * w, axis=-1), dist)


def expected_max(n: Array, mean: Array, cv: Array, dist: str = "normal") -> np.ndarray:
    """E[max of N step times], exact (the k = N case of :func:`expected_kth`)."""
    return expected_kth(n, n, mean, cv, dist)


def order_stat_moments(k: Array, n: Array, mean: Array, cv: Array,
                       dist: str = "normal") -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard deviation) of X_(k:N) from the same exact quadrature (E[X^2] alongside E[X])."""
    x, w = _order_stat_nodes_x(k, n, mean, cv, dist)
    e1 = np.sum(x * w, axis=-1)
    e2 = np.sum(x * x * w, axis=-1)
    return _nonneg(e1, dist), np.sqrt(np.maximum(e2 - e1 * e1, 0.0))


# --------------------------------------------------------------------------- closed forms

def harmonic(n: Array) -> np.ndarray:
    """H_N = sum_{i=1..N} 1/i = digamma(N+1) + gamma (exact, vectorised, any N >= 0)."""
    from scipy.special import digamma  # heavy (~150 ms): loaded on first use, not on import

    nn = _arr(n, "workers")
    if np.any(nn < 0):
        raise InputError("a negative N", where="workers", allowed="N >= 0 for the harmonic number H_N")
    return digamma(nn + 1) + EULER_GAMMA


def expected_kth_shifted_exp(k: Array, n: Array, shift: Array, scale: Array) -> np.ndarray:
    """Shifted exponential Delta + Exp(mean=scale): E[X_(k:N)] = Delta + scale*(H_N - H_{N-k})
    (Dutta et al. 2018). shift = 0 is the plain exponential, E[max] = scale*H_N."""
    nn, kk = _check_nk(n, k)
    d, s = _arr(shift, "shift"), _arr(scale, "scale")
    if np.any(d < 0) or np.any(s < 0):
        raise InputError("a negative shift or scale", where="dist", allowed="shift >= 0 and scale >= 0")
    return d + s * (harmonic(nn) - harmonic(nn - kk))


def blom_normal(k: Array, n: Array) -> np.ndarray:
    """Blom (1958): E[Z_(k:N)] ~= Phi^{-1}((k - 0.375)/(N + 0.25)) for standard normals.
    For the max (k = N) the error is <= 0.016 for N in [8, 1e5] (tested)."""
    from scipy.special import ndtri  # heavy (~150 ms): loaded on first use, not on import

    nn, kk = _check_nk(n, k)
    return ndtri((kk - 0.375) / (nn + 0.25))


def hartley_david_bound(n: Array, mean: Array, sd: Array) -> np.ndarray:
    """Distribution-free cap E[max] <= mean + sd (N-1)/sqrt(2N-1) (Gumbel 1954; Hartley & David
    1954). Very loose (7.02 sd at N = 100 vs 2.51 sd for the normal): a sanity cap only."""
    nn, _ = _check_nk(n)
    return _arr(mean, "mean") + _arr(sd, "sd") * (nn - 1) / np.sqrt(2 * nn - 1)


# --------------------------------------------------------------------------- fast path for the planner

#: The grid of :func:`normal_expected_max`: x from -10 to 12 in steps of 0.005, with the standard normal's density
#: and the log of its CDF there (filled on first use: 4401 math.erfc calls, about a millisecond).
_NORMAL_GRID: dict[str, np.ndarray] = {}
#: :func:`normal_expected_max` by n, memoised (group sizes are few: products of the parallel degrees); cleared when
#: full, as :data:`_CACHE` is, so a long-running process asking for ever new n keeps it bounded
_NORMAL_MAX: dict[float, float] = {}
_NORMAL_MAX_SIZE = 4096
#: distinct n integrated at once: a block's n x grid temporaries stay a few MB
_NORMAL_BLOCK = 64


def normal_expected_max(n: Array) -> np.ndarray:
    """E[max of n independent standard normals] for n >= 1 (0 at n = 1), without scipy:

        e_n = integral of x n phi(x) Phi(x)^(n-1) dx          (David & Nagaraja 2003, eq. 2.1.6 with k = n)

    by the trapezoid rule on x in [-10, 12] at steps of 0.005 (:data:`_NORMAL_GRID`), once per distinct n. A normal
    of mean mu and CV c has E[max of n] = mu (1 + c e_n). Agrees with the exact quadrature of
    :func:`expected_max_step` and the closed forms 1/sqrt(pi), 3/(2 sqrt(pi)) at n = 2, 3 to 1e-6 (tested); what
    a query on every candidate can afford where :func:`expected_max_step` would load scipy (~150 ms)."""
    nn, _ = _check_nk(n)
    if not _NORMAL_GRID:
        x = np.linspace(-10.0, 12.0, 4401)
        cdf = np.asarray([0.5 * erfc(-v / sqrt(2.0)) for v in x])  # erfc: no cancellation in the lower tail
        _NORMAL_GRID.update(x=x, pdf=np.exp(-0.5 * x * x) / sqrt(2.0 * pi), log_cdf=np.log(cdf))
    x, pdf, log_cdf = _NORMAL_GRID["x"], _NORMAL_GRID["pdf"], _NORMAL_GRID["log_cdf"]
    flat = np.sort(nn.ravel())  # the distinct n without np.unique, which imports numpy.ma (10 ms) from numpy 2.3 on
    uniq = flat[np.concatenate(([True], flat[1:] != flat[:-1]))]
    e_uniq = np.asarray([_NORMAL_MAX.get(n, np.nan) for n in uniq.tolist()], dtype=float)
    todo = np.flatnonzero(np.isnan(e_uniq))  # each distinct n once per process (a planner repeats its group sizes)
    for lo in range(0, todo.size, _NORMAL_BLOCK):
        at = todo[lo:lo + _NORMAL_BLOCK]
        block = uniq[at][:, None]
        f = x * block * pdf * np.exp((block - 1.0) * log_cdf)
        e = np.sum(f[:, 1:] + f[:, :-1], axis=-1) * 0.5 * (x[1] - x[0])  # the trapezoid rule
        e_uniq[at] = np.where(uniq[at] <= 1.0, 0.0, e)
    if todo.size:
        if len(_NORMAL_MAX) + todo.size > _NORMAL_MAX_SIZE:
            _NORMAL_MAX.clear()
        _NORMAL_MAX.update(zip(uniq[todo[:_NORMAL_MAX_SIZE]].tolist(), e_uniq[todo[:_NORMAL_MAX_SIZE]].tolist(),
                               strict=True))
    return np.asarray(e_uniq[np.searchsorted(uniq, nn)], dtype=float)


_CACHE: dict[tuple[str, float, float, float], float] = {}
_CACHE_MAX = 200_000


def expected_max_step(mean: Array, cv: Array, n: Array, dist: str = "normal", k: Array | None = None) -> np.ndarray:
    """E[slowest of N workers] (or E[X_(k:N)] when ``k`` is given) for arrays of candidates.

    Exact, not approximate: every family here is a scale family, so E[X_(k:N)] = mean * z(k, N, cv).
    z is computed once per *distinct* (k, N, cv) by the exact quadrature and memoised across calls,
    then broadcast back; a planner sweep over thousands of candidates with a few dozen distinct
    worker counts costs a few dozen quadratures (~1 ms). Accuracy is the quadrature's: better than
    1e-6 relative against adaptive integration (tested). For a pure closed form see
    :func:`blom_normal` (normal, |error| <= 0.016 sd) and :func:`expected_kth_shifted_exp`.
    """
    _check_dist(dist)
    m, c = _check_mean_cv(mean, cv, dist)
    nn, kk = _check_nk(n, k)
    if not np.any(c):  # cv = 0: every worker takes exactly the mean, so does every order statistic
        return np.asarray(m * np.ones(np.broadcast_shapes(np.shape(c), np.shape(nn), np.shape(kk))))
    # z depends on (k, N, cv) only: find the distinct triples on their own (small) broadcast shape,
    # not on the candidates' full shape, then scale by the mean.
    c, nn, kk = np.broadcast_arrays(c, nn, kk)
    keys = np.stack([kk.ravel(), nn.ravel(), c.ravel()], axis=-1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    z = np.empty(len(uniq))
    todo = []
    for i, (ki, ni, ci) in enumerate(uniq):
        hit = _CACHE.get((dist, float(ki), float(ni), float(ci)))
        if hit is None:
            todo.append(i)
        else:
            z[i] = hit
    if todo:
        idx = np.asarray(todo)
        z[idx] = expected_kth(uniq[idx, 0], uniq[idx, 1], 1.0, uniq[idx, 2], dist)
        if len(_CACHE) + len(idx) > _CACHE_MAX:
            _CACHE.clear()
        for i in idx:
            _CACHE[(dist, float(uniq[i, 0]), float(uniq[i, 1]), float(uniq[i, 2]))] = float(z[i])
    return m * z[np.ravel(inverse)].reshape(c.shape)


def expected_straggler_delay(mean: Array, cv: Array, n: Array, dist: str = "normal") -> np.ndarray:
    """E[max of N] - mean: the seconds a BSP step waits for its slowest worker (>= 0)."""
    m = _arr(mean, "mean")
    return np.maximum(expected_max_step(m, cv, n, dist) - m, 0.0)


def expected_max_of_sum(tau: Array, n: Array, mean: Array, cv: Array, dist: str = "normal") -> np.ndarray:
    """E[max_i sum_{j=1..tau} X_ij] / tau: per-step barrier cost when workers sync every tau steps
    (local SGD, gradient accumulation, SSP window; docs/model.md#stragglers). The tau-step sum is modelled as
    the same family with mean tau*mean and cv/sqrt(tau): exact for normal and gamma (and the exp
    sum, which is gamma, when dist='gamma'), moment-matched otherwise. For normal this is
    mean + sd e_N / sqrt(tau)."""
    tt = _arr(tau, "tau")
    if np.any(tt < 1):
        raise InputError("an averaging period is < 1 step", where="tau", allowed="tau >= 1 step")
    c = _arr(cv, "cv")
    if dist == "exp":  # a sum of exponentials is gamma; exp is its tau = 1 case
        dist, c = "gamma", np.ones_like(c)
    cv_sum = c / np.sqrt(tt)
    if dist == "weibull" and np.any(short := (cv_sum > 0) & (cv_sum < WEIBULL_CV_MIN)):
        # named here: the input cv was in range, its tau-step sum's is not (was "error: cv: a Weibull cv is outside
        # [0.001, 20]" for a valid cv under local:H, ssp:S or many micro-batches a rank; fuzz32)
        ci, ti = (float(np.broadcast_to(x, short.shape)[short].flat[0]) for x in (c, tt))
        raise InputError(f"a Weibull step time's cv {ci:g} over a sum of {ti:,.0f} steps (local SGD's period, an SSP "
                         f"window or a rank's micro-batches: cv / sqrt({ti:,.0f}) = {ci / math.sqrt(ti):.3g}) is below "
                         f"{WEIBULL_CV_MIN:g}, the smallest the Weibull shape solve resolves", where="cv",
                         allowed=f"at most {math.floor((ci / WEIBULL_CV_MIN) ** 2):,} steps a sum at cv {ci:g}, or a "
                                 "distribution whose sums are resolved at any length (normal, lognormal, gamma)")
    return expected_max_step(mean, cv_sum, n, dist)


# --------------------------------------------------------------------------- fail-slow mixture

def failslow_step(t0: Array, n: Array, p_slow: Array, slowdown: Array) -> np.ndarray:
    """Expected BSP step time when each of N workers is independently slowed by a factor s with
    probability p per step ("The Tail at Scale", Dean & Barroso 2013):

        E[T] = T0 [1 + (s - 1)(1 - (1 - p)^N)],   (1 - p)^N = exp(N log1p(-p)).

    Calibration points (not universal constants): Falcon (arXiv 2410.12588) saw fail-slows inflate
    average job completion time by 1.34x on a >10 000-GPU cluster."""
    nn, _ = _check_nk(n)
    t = _arr(t0, "t0")
    p = _arr(p_slow, "p_slow")
    s = _arr(slowdown, "slowdown")
    if np.any(t < 0):
        raise InputError("a step time is negative", where="t0", allowed="step times >= 0 seconds")
    if np.any((p < 0) | (p > 1)):
        raise InputError("a slow-host probability is outside [0, 1]", where="p_slow", allowed="probabilities in [0, 1]")
    if np.any(s < 1):
        raise InputError("a slowdown factor is < 1", where="slowdown", allowed="factors >= 1 (1: not slower)")
    with np.errstate(divide="ignore"):
        p_any = -np.expm1(nn * np.log1p(-p))
    return t * (1 + (s - 1) * p_any)


def persistent_step(t0: Array, slowdowns: Array, axis: int = -1) -> np.ndarray:
    """Persistent heterogeneity is deterministic: T = T0 * max_i s_i (docs/model.md#stragglers)."""
    s = _arr(slowdowns, "slowdowns")
    if np.any(s <= 0):
        raise InputError("a slowdown factor is <= 0", where="slowdowns", allowed="factors > 0")
    return _arr(t0, "t0") * np.max(s, axis=axis)


# --------------------------------------------------------------------------- empirical samples

def empirical_expected_kth(samples: Array, k: Array, n: Array) -> np.ndarray:
    """E[X_(k:N)] for N workers whose step times are drawn (with replacement) from measured
    ``samples`` x_(1) <= ... <= x_(m). Exact for that resampling model:

        P(X_(k:N) <= x_(j)) = P(Binomial(N, j/m) >= k),
        E[X_(k:N)] = sum_j x_(j) [P(Bin(N, j/m) >= k) - P(Bin(N, (j-1)/m) >= k)].

    For the max (k = N) this is sum_j x_(j) [(j/m)^N - ((j-1)/m)^N]. Broadcasts over k and n."""
    from scipy.special import betainc  # heavy (~150 ms): loaded on first use, not on import

    x = np.sort(_arr(samples, "samples").ravel())
    if x.size < 1:
        raise InputError("no measured step times", where="samples", allowed="at least one measured step time")
    if np.any(x <= 0):
        raise InputError("a measured step time is <= 0", where="samples", allowed="step times > 0 seconds")
    nn, kk = _check_nk(n, k)
    nn, kk = np.broadcast_arrays(nn, kk)
    m = x.size
    q = np.arange(m + 1) / m
    # P(Bin(N, q) >= k) = I_q(k, N - k + 1), the regularised incomplete beta.
    cdf = betainc(kk[..., None], (nn - kk + 1)[..., None], q)
    return np.sum(x * np.diff(cdf, axis=-1), axis=-1)


def empirical_quantile_max(samples: Array, q: Array, n: Array) -> np.ndarray:
    """q-quantile of the slowest of N resampled workers: the empirical quantile at level q^{1/N}."""
    x = np.sort(_arr(samples, "samples").ravel())
    qq = _arr(q, "quantile")
    if np.any((qq <= 0) | (qq >= 1)):
        raise InputError("a quantile is <= 0 or >= 1", where="quantile", allowed="quantiles strictly between 0 and 1")
    nn, _ = _check_nk(n)
    level = np.exp(np.log(qq) / nn)
    return np.quantile(x, level, method="inverted_cdf")


def empirical_mean_cv(samples: Array) -> tuple[float, float]:
    """Sample mean and coefficient of variation (ddof = 1; 0 for a single sample)."""
    x = _arr(samples, "samples").ravel()
    if x.size < 1 or np.any(x <= 0):
        raise InputError("no measured step times, or one is <= 0", where="samples",
                         allowed="at least one step time, each > 0 seconds")
    sd = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    return float(np.mean(x)), sd / float(np.mean(x))
