"""Straggler order statistics against published values, closed forms and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import stragglers as st
from scalemodel.errors import InputError


def test_normal_expected_max_known_values():
    # Reference 1.2: e_2 = 1/sqrt(pi), e_100 = 2.5076, e_1000 = 3.2414 (tables of normal order stats).
    e = st.expected_max([2, 100, 1000], 0.0 + 1.0, 1.0, "normal") - 1.0
    assert e[0] == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert e[1] == pytest.approx(2.5076, abs=1e-4)
    assert e[2] == pytest.approx(3.2414, abs=1e-4)


def test_normal_table_of_reference():
    n = [8, 64, 1024, 16384, 100000]
    exact = [1.4236, 2.3437, 3.2482, 3.9714, 4.3843]
    got = st.expected_max(n, 10.0, 0.01, "normal")  # mean 10, sd 0.1
    np.testing.assert_allclose((got - 10.0) / 0.1, exact, atol=2e-4)


def test_exponential_harmonic():
    # H_1024 = 7.50918 (summed numerically); H_8 = 761/280 by hand.
    assert st.harmonic(1024) == pytest.approx(7.50918, abs=1e-5)
    assert st.harmonic(8) == pytest.approx(761 / 280, rel=1e-12)
    assert st.expected_max(1024, 2.0, 1.0, "exp") == pytest.approx(2 * 7.50918, abs=1e-4)
    # exact quadrature against the harmonic closed form up to N = 1e7
    n = np.array([3, 64, 1e5, 1e7])
    np.testing.assert_allclose(st.expected_max(n, 1.0, 1.0, "exp"), st.harmonic(n), rtol=1e-7)


def test_large_n_stable_and_monotone():
    n = np.array([1e3, 1e4, 1e5, 1e6, 1e7])
    for dist in st.DISTS:
        e = st.expected_max(n, 1.0, 0.1 if dist != "exp" else 1.0, dist)
        assert np.all(np.isfinite(e)) and np.all(np.diff(e) > 0), dist
    # normal e_N at 1e7 against sqrt(2 ln N) asymptotics: a_N + gamma b_N within 0.5 %
    n7 = 1e7
    r = math.sqrt(2 * math.log(n7))
    gumbel = r - (math.log(math.log(n7)) + math.log(4 * math.pi)) / (2 * r) + st.EULER_GAMMA / r
    assert st.expected_max(n7, 1.0, 1.0, "normal") - 1 == pytest.approx(gumbel, rel=5e-3)


def test_backup_table_reference_1_5():
    k = [100, 99, 98, 96, 94, 90]
    normal = [1.251, 1.215, 1.195, 1.169, 1.151, 1.125]
    sexp = [1.419, 1.319, 1.269, 1.210, 1.174, 1.126]
    np.testing.assert_allclose(st.expected_kth(k, 100, 1.0, 0.1, "normal"), normal, atol=1.5e-3)
    # shifted-exp with Delta = 0.9, exponential mean 0.1: mean 1.0, cv 0.1
    np.testing.assert_allclose(st.expected_kth(k, 100, 1.0, 0.1, "shifted-exp"), sexp, atol=1.5e-3)
    # and the harmonic closed form: Delta + (H_P - H_{P-K})/lambda
    hand = 0.9 + 0.1 * (st.harmonic(100) - st.harmonic(100 - np.array(k)))
    np.testing.assert_allclose(st.expected_kth_shifted_exp(k, 100, 0.9, 0.1), hand)
    np.testing.assert_allclose(st.expected_kth(k, 100, 1.0, 0.1, "shifted-exp"), hand, rtol=1e-7)


def test_lognormal_reference_values():
    # numerical integration: mu = 0, s = 0.25 -> E[max] = 1.808 (64), 2.261 (1024), 2.707 (16384)
    mean, cv = st.mean_cv_from_params("lognormal", mu=0.0, s=0.25)
    assert mean == pytest.approx(math.exp(0.03125))
    got = st.expected_max([64, 1024, 16384], mean, cv, "lognormal")
    np.testing.assert_allclose(got, [1.808, 2.261, 2.707], atol=1.5e-3)


@pytest.mark.parametrize("dist,cv", [("normal", 0.1), ("lognormal", 0.3), ("gamma", 0.5),
                                     ("weibull", 0.4), ("exp", 1.0), ("shifted-exp", 0.2)])
def test_monte_carlo(dist, cv):
    rng = np.random.default_rng(12345)
    mean, n, reps = 2.0, 64, 20000
    p = st.params_from_mean_cv(mean, cv, dist)
    size = (reps, n)
    if dist == "normal":
        x = rng.normal(p["mu"], p["sigma"], size)
    elif dist == "lognormal":
        x = np.exp(rng.normal(p["mu"], p["s"], size))
    elif dist == "gamma":
        x = rng.gamma(p["shape"], p["scale"], size)
    elif dist == "weibull":
        x = p["scale"] * rng.weibull(p["shape"], size)
    elif dist == "exp":
        x = rng.exponential(p["scale"], size)
    else:
        x = p["shift"] + rng.exponential(p["scale"], size)
    assert x.mean() == pytest.approx(mean, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(cv, rel=0.03)
    xs = np.sort(x, axis=1)
    mx = xs[:, -1]
    se = mx.std() / math.sqrt(reps)
    assert st.expected_max(n, mean, cv, dist) == pytest.approx(mx.mean(), abs=4 * se)
    k = 60
    se_k = xs[:, k - 1].std() / math.sqrt(reps)
    assert st.expected_kth(k, n, mean, cv, dist) == pytest.approx(xs[:, k - 1].mean(), abs=4 * se_k)
    m, sd = st.order_stat_moments(n, n, mean, cv, dist)
    assert sd == pytest.approx(mx.std(), rel=0.05)
    assert st.quantile_max(0.9, n, mean, cv, dist) == pytest.approx(np.quantile(mx, 0.9), rel=0.01)
    assert st.quantile(0.5, mean, cv, dist) == pytest.approx(np.median(x), rel=0.01)


def test_blom_accuracy():
    n = np.array([8, 64, 1024, 16384, 100000])
    exact = st.expected_max(n, 1.0, 1.0, "normal") - 1
    assert np.max(np.abs(st.blom_normal(n, n) - exact)) <= 0.016


def test_fast_path_matches_exact_and_broadcasts():
    n = np.array([[1, 8, 100], [1000, 4096, 100000]])
    mean = np.array([[1.0], [2.0]])
    for dist in ("normal", "lognormal", "gamma", "weibull"):
        fast = st.expected_max_step(mean, 0.07, n, dist)
        assert fast.shape == (2, 3)
        np.testing.assert_allclose(fast, st.expected_max(n, mean, 0.07, dist), rtol=1e-12)
    # independent check by adaptive quadrature of E[max] = int_0^inf (1 - F^N) dx (gamma, N = 500)
    from scipy import integrate, stats

    a, scale = 1 / 0.2**2, 0.2**2
    val, _ = integrate.quad(lambda x: -np.expm1(500 * stats.gamma.logcdf(x, a, scale=scale)), 0, 5, limit=200)
    assert st.expected_max_step(1.0, 0.2, 500, "gamma") == pytest.approx(val, rel=1e-6)
    assert np.all(st.expected_straggler_delay(1.0, 0.05, n, "normal") >= 0)


def test_max_of_sum_matches_reference_monte_carlo():
    # Monte Carlo: N = 256, mu = 1, sigma = 0.1, tau = 1, 4, 16 -> 1.2829, 1.1410, 1.0707 (MC)
    got = st.expected_max_of_sum(np.array([1, 4, 16]), 256, 1.0, 0.1, "normal")
    np.testing.assert_allclose(got, [1.2829, 1.1410, 1.0707], atol=1e-3)


def test_failslow_and_persistent():
    # Dean & Barroso: 1 % slow, fan-out 100 -> 63.4 % of steps slow; slowdown 2 -> 1.634 T0
    assert st.failslow_step(1.0, 100, 0.01, 2.0) == pytest.approx(1 + (1 - 0.99**100))
    assert st.failslow_step(1.0, 2000, 1e-4, 3.0) == pytest.approx(1 + 2 * (1 - (1 - 1e-4) ** 2000))
    assert st.persistent_step(2.0, [1.0, 1.1, 1.05]) == pytest.approx(2.2)
    with pytest.raises(InputError):
        st.failslow_step(1.0, 10, 1.5, 2.0)


def test_empirical_matches_resampling_simulation():
    rng = np.random.default_rng(7)
    samples = rng.gamma(20.0, 0.05, size=37)
    n = 16
    draws = rng.choice(samples, size=(40000, n))
    xs = np.sort(draws, axis=1)
    se = xs[:, -1].std() / math.sqrt(40000)
    assert st.empirical_expected_kth(samples, n, n) == pytest.approx(xs[:, -1].mean(), abs=4 * se)
    assert st.empirical_expected_kth(samples, 12, n) == pytest.approx(xs[:, 11].mean(), abs=0.01)
    # N = 1 is the sample mean; a constant sample gives that constant
    assert st.empirical_expected_kth(samples, 1, 1) == pytest.approx(samples.mean())
    assert st.empirical_expected_kth([0.5, 0.5], 100, 100) == pytest.approx(0.5)


def test_params_roundtrip_and_zero_cv():
    for dist in ("normal", "lognormal", "gamma", "weibull", "shifted-exp"):
        p = {k: float(v) for k, v in st.params_from_mean_cv(1.5, 0.3, dist).items()}
        mean, cv = st.mean_cv_from_params(dist, **p)
        assert (mean, cv) == pytest.approx((1.5, 0.3), rel=1e-6), dist
    for dist in ("normal", "lognormal", "gamma", "weibull", "shifted-exp"):
        assert st.expected_max(1000, 1.5, 0.0, dist) == pytest.approx(1.5)


def test_bad_input():
    with pytest.raises(InputError):
        st.expected_max(0, 1.0, 0.1)
    with pytest.raises(InputError):
        st.expected_max(10, -1.0, 0.1)
    with pytest.raises(InputError):
        st.expected_max(10, 1.0, 0.1, "pareto")
    with pytest.raises(InputError):
        st.expected_max(10, 1.0, 1.5, "shifted-exp")
    with pytest.raises(InputError):
        st.expected_kth(11, 10, 1.0, 0.1)
    with pytest.raises(InputError):  # normal with a huge cv gives a negative fastest worker
        st.expected_kth(1, 1000, 1.0, 1.0, "normal")
    with pytest.raises(InputError):
        st.empirical_expected_kth([], 4, 4)


def test_hartley_david_cap():
    # (N-1)/sqrt(2N-1) at N = 100: 99/sqrt(199) = 7.018 sd, far above the normal's 2.51
    assert st.hartley_david_bound(100, 0.0, 1.0) == pytest.approx(99 / math.sqrt(199))
    for dist in ("lognormal", "gamma", "exp"):
        assert st.expected_max(100, 1.0, 0.5 if dist != "exp" else 1.0, dist) <= st.hartley_david_bound(
            100, 1.0, 0.5 if dist != "exp" else 1.0)


# --------------------------------------------------------------------------- CLI


def test_cli_json_normal(cli):
    import json

    r = cli("stragglers", "--workers", "100", "--dist", "normal", "--mean", "1s", "--cv", "0.1",
            "--backup", "4", "--comm", "0s", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["schema_version"] and doc["command"] == "stragglers" and doc["inputs"]["workers"] == 100
    for key in ("workers", "expected_mean_s", "expected_max_s", "slowdown", "quantiles_s", "strategies"):
        assert key in doc
    assert doc["expected_max_s"] == pytest.approx(1 + 0.1 * 2.5076, abs=1e-4)
    assert doc["slowdown"] == pytest.approx(doc["expected_max_s"])
    syncs = {s["sync"]: s for s in doc["strategies"]}
    assert set(syncs) == {"bsp", "backup:4", "asp", "ssp:3", "local:4"}
    for s in doc["strategies"]:
        assert set(s) >= {"sync", "step_time_s", "updates_per_s", "mean_staleness"}
    # 100 of 104 normal workers: mu + sigma E[Z_(100:104)], below BSP
    assert syncs["backup:4"]["step_time_s"] == pytest.approx(float(st.expected_kth(100, 104, 1.0, 0.1)))
    assert syncs["backup:4"]["step_time_s"] < syncs["bsp"]["step_time_s"]
    assert syncs["asp"]["updates_per_s"] == pytest.approx(100.0)
    assert doc["quantiles_s"]["p50"] < doc["quantiles_s"]["p90"] < doc["quantiles_s"]["p99"]


def test_cli_human_and_defaults(cli):
    r = cli("stragglers", "--workers", "2048", "--dist", "lognormal", "--cv", "0.05")
    assert r.code == 0, r.err
    assert "2048" in r.out and "backup:82" in r.out and "slowdown" in r.out
    # a normal with a large cv puts mass below zero: the output says so
    r = cli("stragglers", "--workers", "100", "--dist", "normal", "--cv", "0.9")
    assert r.code == 0 and "below zero" in r.out


def test_cli_samples_files(cli, tmp_path):
    import json

    lines = tmp_path / "steps.txt"
    lines.write_text("# measured\n1.0\n1.2s\n\n900ms\n1.1\n")
    r = cli("stragglers", "--workers", "8", "--samples", str(lines), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    x = np.array([1.0, 1.2, 0.9, 1.1])
    assert doc["expected_mean_s"] == pytest.approx(x.mean())
    # E[max of 8 resampled] = sum_j x_(j) ((j/4)^8 - ((j-1)/4)^8), by hand
    xs = np.sort(x)
    hand = sum(xs[j - 1] * ((j / 4) ** 8 - ((j - 1) / 4) ** 8) for j in range(1, 5))
    assert doc["expected_max_s"] == pytest.approx(hand)
    yml = tmp_path / "steps.yaml"
    yml.write_text("- 1.0\n- 1.2\n- 0.9\n- 1.1\n")
    assert json.loads(cli("stragglers", "--workers", "8", "--samples", str(yml), "--json").out)[
        "expected_max_s"] == pytest.approx(hand)
    js = tmp_path / "steps.json"
    js.write_text("[1.0, 1.2, 0.9, 1.1]")
    assert json.loads(cli("stragglers", "--workers", "8", "--samples", str(js), "--json").out)[
        "expected_max_s"] == pytest.approx(hand)


@pytest.mark.parametrize("content,where", [("1.0\nabc\n", "line 2"), ("1.0\n-3\n", "line 2"),
                                           ("- 1.0\n- fast\n", "line 2"), ("[1.0, [2]]", "line 1"),
                                           ("", "steps"), ("- 1.0\n  - : [\n", "line")])
def test_cli_bad_samples(cli, tmp_path, content, where):
    f = tmp_path / "steps"
    f.write_text(content)
    r = cli("stragglers", "--workers", "8", "--samples", str(f))
    assert r.code == 2
    assert r.err.startswith("error: ") and r.err.count("\n") == 1
    assert str(f) in r.err and where in r.err


@pytest.mark.parametrize("args", [("--workers", "0"), ("--workers", "8", "--dist", "pareto"),
                                  ("--workers", "8", "--mean", "fast"), ("--workers", "8", "--cv", "-1"),
                                  ("--workers", "8", "--dist", "shifted-exp", "--cv", "2"),
                                  ("--workers", "8", "--backup", "-1"), ("--workers", "8", "--local", "0"),
                                  ("--workers", "8", "--samples", "/nonexistent/steps.txt")])
def test_cli_bad_input(cli, args):
    r = cli("stragglers", *args)
    assert r.code == 2, r.out
    assert r.err.startswith("error: ") and r.err.count("\n") == 1 and "Traceback" not in r.err
