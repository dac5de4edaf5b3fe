"""Hostile input and numbers, round 32 (fuzz32): the closing items of round 31 and what this round's fuzzing found.
The CLI contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was
wrong and what is allowed, nothing on stdout, no input changed.

Items: (1) refuse_non_finite reads every part, not only the step total; (2) a tier's link rate a ``b < bmin``
comparison would skip (NaN from a protocol's relinked links, an infinite efficiency / oversubscription) is refused;
(3) the Weibull cv range taken from where the shape solve and the order statistics are accurate ([1.3e-5, 1e14],
was [0.001, 20]), and a valid cv whose tau-step sum falls below it named as such; (4) the sweep's limits state their
measured CPU budget.

The fresh pass (~2,900 cases in-process, each checked for exit 0/1/2, one ``error:`` line on exit 2, nothing on
stdout then, no traceback, strict JSON under ``json.loads(parse_constant=raise)``, no input changed): 260 ``check``
runs of the example capacity plan with hostile ``--set`` values on every assertion, gpus and train_tokens (0, -0,
nan, inf, 1e308, 1e-320, 1e400, 2**63, '', hex, 1_0, units, lists, mappings); 31 ``sensitivity`` option values
(--factor 0 .. 1e308 / nan / inf, --straggler-cv, --work-cv, --dispatch-overhead, --sync extremes); 600 HF
config.json imports (every shape key of Llama 3 8B and Qwen3-30B-A3B, the MLA / MoE keys of DeepSeek-V3, Gemma 3's
window keys, Mixtral's experts, set to 0, -1, 1.5, '12', true, null, 10**400, 2**63, 1e308, NaN, Infinity, [], {}
or removed); 255 torchtitan TOML strategies (every parallelism / training / activation-checkpoint key, nan, inf,
2**63, strings, arrays, tables, duplicate keys, NUL); 62 nccl-tests logs and options for calibrate (size / time /
bandwidth columns nan, inf, negative, 1e308, 1e-320, 400-digit, N/A; one row, duplicated, reversed, all zero;
--tolerance, --ranks, --tier, --op, --algo); 195 ``calibrate runs`` files and options (step_time, gpus, batches,
tokens_per_s, model, cluster, tp hostile; --predict-at, --factors, --mode); 17 ``--out`` / ``-o`` paths (a workload
or cluster file a runs file names, through a symlink and a hard link, a folder, /dev/full, a missing folder, a
sweep's own inputs); 756 ``stragglers --json`` (six distributions x cv 0 .. 9.999999 x N 1 .. 1e8 x local / ssp
1e8, comm 1e300 s, mean 1e-300 s); 845 ``collective --json`` (sizes 0 .. 1e300 and 5e-324, every op and
algorithm, --sizes ranges); 12 memory / predict at global batch 1e9 and micro-batch 1e6. Findings: the Weibull sums
of (3) (predict with a valid cv 0.002 under --sync local:100000, ssp:99999999 or --work-cv with 65,536 micro-batches
a rank: "error: cv: a Weibull cv is outside [0.001, 20]"); nothing else broke the contract. Accepted on purpose
(not findings): HF keys the importer lists as not priced (n_group, topk_group, query_pre_attn_scalar) take any
value; a torch_dtype that is no dtype is ignored with a warning."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalemodel.cost import algorithms
from scalemodel.cost import stragglers as st
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine import step
from scalemodel.engine.step import refuse_non_finite
from scalemodel.errors import InputError
from scalemodel.specs.cluster import WEIBULL_CV_MAX, WEIBULL_CV_MIN

RUN = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "64"]


# --- (1) every part of a step is checked, not only their sum --------------------------------------------------------
# fix31's refuse_non_finite read the step total: a negative part that a larger positive part cancelled passed.

def test_a_negative_part_under_a_positive_total_is_refused() -> None:
    parts = {"compute": np.array([2.0, 3.0]), "imbalance": np.array([0.0, -0.5]), "dp_comm": np.zeros(2)}
    with pytest.raises(InputError, match=r"^result: the step model's imbalance is -0\.5 \(not a finite number >= 0\)"
                                         r" for 1 of 2 candidates"):
        refuse_non_finite(parts, sum(parts.values()))  # the total, [2.0, 2.5], is finite and >= 0
    refuse_non_finite({"a": np.array([0.0, 1.0]), "b": np.array([5e-324, 0.0])}, np.array([0.0, 1.0]))  # all fine


def test_predict_refuses_a_negative_part_its_total_hides(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load-imbalance wait of -1 ms (a defect upstream, simulated) on a step of seconds: predict printed a step
    with a negative part and exit 0; now the part is named."""
    monkeypatch.setattr(step, "_imbalance", lambda *a, **k: np.asarray(-1e-3))
    r = cli("predict", *RUN)
    assert r.code == 2 and r.out == "", (r.code, r.out[-300:])
    assert r.err.startswith("error: result: the step model's imbalance time is -0.001 (not a finite number >= 0)")
    assert len(r.err.strip().splitlines()) == 1


# --- (2) a tier's link rate that a comparison ``b < bmin`` would skip ----------------------------------------------
# The ring's hops, the trees and Placement.bottleneck take the slowest crossed tier by ``b < bmin``: a NaN rate is
# never smaller, an infinite one never is either, so the group was priced as if it did not cross that tier.

NVL = Tier("nvlink", 8, 450e9, 3e-6, efficiency=0.8)
IB = Tier("ib", 256, 12.5e9, 5e-6, efficiency=0.9)


def test_a_nan_link_rate_from_a_protocol_is_refused_not_skipped() -> None:
    pl = place(64, 1, Network((NVL, IB), 8))
    S = np.array(1e9)
    ring = float(algorithms.ring_time("allreduce", S, pl))
    # by hand: 64 ranks, 8 a node: the ring leaves each node on 8 channels, 8 x 12.5e9 x 0.9 = 90e9 B/s, below
    # NVLink's 360e9; 2 (p-1)/p S / 90e9 plus two passes over 56 NVLink hops (3 us) and 7 IB hops (5 us)
    assert ring == pytest.approx(2 * 63 / 64 * 1e9 / 90e9 + 2 * (56 * 3e-6 + 7 * 5e-6), rel=1e-6)
    with pytest.raises(InputError, match=r"^result: tier 'ib'.s link as a collective protocol sees it has latency "
                                         r"5e-06 s and rate nan B/s"):
        pl.relinked(pl.alpha, np.array([450e9, np.nan]))


@pytest.mark.parametrize("field", ["efficiency", "oversubscription"])
def test_an_infinite_tier_figure_is_refused(field: str) -> None:
    """efficiency inf made the rate inf (never below bmin: the tier vanished); oversubscription inf made it 0."""
    bad = Network((NVL, Tier("ib", 256, 12.5e9, 5e-6, **{field: float("inf")})), 8)
    with pytest.raises(InputError, match=rf"^tiers\.ib\.{field}: tier 'ib' needs bandwidth > 0, efficiency > 0, "
                                         rf"oversubscription >= 1: its {field} is inf; positive finite numbers"):
        place(64, 1, bad)


# --- (3) the Weibull cv range, taken from where the shape solve and the order statistics are accurate ----------------
# The range was [0.001, 20]: 20 the first stragglers code's cap, 0.001 inside the solve's bracket k <= 2000. fuzz32
# widened the bracket to k <= 1e5 (below the cancellation of its two ln Gamma: specs.cluster.WEIBULL_SHAPE_RANGE) and
# took [1.3e-5, 1e14] inside the cv it spans. Checked here at both edges against values computed without the module's
# quadrature: the cv of the solved shape by the zeta series of ln Gamma(1 + x), E[max of N] of a mean-1 Weibull by
# its closed form sum_j (-1)^(j+1) C(N, j) j^(-1/k) (small N) and by adaptive quadrature of the exponential order
# statistic, E[Y_(N:N)^(1/shape)] scaled, for N = 1e8.

def _cv_by_series(k: float) -> float:
    """cv of a Weibull of shape k from ln(1 + cv^2) = ln Gamma(1 + 2x) - 2 ln Gamma(1 + x) = sum_{n>=2} (-1)^n
    zeta(n) (2^n - 2) x^n / n, x = 1/k (x <= 0.5 converges; used for large k only)."""
    from scipy.special import zeta
    x = 1.0 / k
    return math.sqrt(math.expm1(math.fsum((-1) ** n * zeta(n) * (2**n - 2) * x**n / n for n in range(2, 60))))


def _max_closed_form(n: int, shape: float) -> float:
    """E[max of n] of the Weibull of mean 1 (lambda Gamma(1 + 1/k) = 1): the alternating sum
    sum_j (-1)^(j+1) C(n, j) j^(-1/k), from E[max] = integral of 1 - (1 - e^-(x/lambda)^k)^n dx expanded (exact)."""
    return math.fsum((-1) ** (j + 1) * math.comb(n, j) * math.exp(-math.log(j) / shape) for j in range(1, n + 1))


def _max_by_quadrature(n: float, shape: float) -> float:
    """E[max of n] of the Weibull of mean 1 by adaptive quadrature over s = ln y, y the standard exponential:
    E = Gamma(1 + 1/k)^-1 E[Y_(n:n)^(1/k)], the density of Y_(n:n) n (1 - e^-y)^(n-1) e^-y, normalised numerically."""
    from scipy.integrate import quad
    from scipy.special import gammaln

    def logf(s: float, power: float) -> float:
        y = math.exp(s)
        return (n - 1) * math.log(-math.expm1(-y)) - y + s + power * s
    grid = np.linspace(-40.0, 6.0, 4601)
    out = []
    for power in (1.0 / shape, 0.0):
        v = np.array([logf(s, power) for s in grid])
        peak = float(v.max())
        keep = grid[v > peak - 700]
        val, _ = quad(lambda s: math.exp(logf(s, power) - peak), keep[0], keep[-1],  # noqa: B023
                      points=[float(grid[np.argmax(v)])], epsabs=0, epsrel=1e-10, limit=500)
        out.append((peak, val))
    (p1, v1), (p0, v0) = out
    return math.exp(p1 - p0 - float(gammaln(1 + 1 / shape))) * v1 / v0


@pytest.mark.parametrize("cv", [WEIBULL_CV_MIN, 1e-3, 20.0, WEIBULL_CV_MAX])
def test_weibull_order_statistics_are_accurate_at_both_edges(cv: float) -> None:
    k = float(st.weibull_shape_from_cv(cv))
    if k > 10:
        assert _cv_by_series(k) == pytest.approx(cv, rel=1e-6)  # the solve inverts its formula to 1e-6 at the edge
    for n in (2, 10):
        got = float(st.expected_max(n, 1.0, cv, "weibull"))
        want = _max_closed_form(n, k)
        assert got - 1 == pytest.approx(want - 1, rel=1e-7)  # the excess over the mean, not only the total
    got = float(st.expected_max(1e8, 1.0, cv, "weibull"))
    assert got - 1 == pytest.approx(_max_by_quadrature(1e8, k) - 1, rel=1e-6)
    assert np.isfinite(got)


@pytest.mark.parametrize("cv", [0.99 * WEIBULL_CV_MIN, 1.01 * WEIBULL_CV_MAX])
def test_a_weibull_cv_past_either_edge_is_refused(cv: float) -> None:
    with pytest.raises(InputError, match=r"^cv: a Weibull cv is outside \[1\.3e-05, 1e\+14\]; cv in \[1\.3e-05, "
                                         r"1e\+14\] or exactly 0"):
        st.expected_max(8, 1.0, cv, "weibull")


def test_the_old_bracket_could_not_take_the_new_floor() -> None:
    """Below the old bracket's end (k 2000, cv 6.41e-4) the bisection returned k 2000 for every cv, silently: the
    widened bracket is what makes [1.3e-5, 6.4e-4] priceable, not the refusal range alone."""
    assert _cv_by_series(2000.0) == pytest.approx(6.4104e-4, rel=1e-4)
    assert float(st.weibull_shape_from_cv(1e-4)) == pytest.approx(math.pi / math.sqrt(6) / 1e-4, rel=1e-3)


# A valid Weibull cv whose tau-step sum (local SGD's period, an SSP window, a rank's micro-batches under --work-cv) has
# a cv below the floor: was "error: cv: a Weibull cv is outside [0.001, 20]" naming neither the period nor the sum.

SUM = (r"^error: cv: a Weibull step time's cv 0\.002 over a sum of {steps} steps \(local SGD's period, an SSP window "
       r"or a rank's micro-batches: cv / sqrt\({steps}\) = {cv_sum}\) is below 1\.3e-05, the smallest the Weibull "
       r"shape solve resolves; at most 23,668 steps a sum at cv 0\.002")


@pytest.mark.parametrize("args, steps, cv_sum", [(["--straggler-cv", "0.002", "--sync", "local:100000"],
                                                  "100,000", r"6\.32e-06"),
                                                 (["--straggler-cv", "0.002", "--sync", "ssp:99999999"],
                                                  "100,000,000", r"2e-07"),
                                                 (["--work-cv", "0.002", "--global-batch", "4194304"],
                                                  "65,536", r"7\.81e-06")])
def test_a_weibull_sum_below_the_floor_names_the_sum(cli: Any, args: list[str], steps: str, cv_sum: str) -> None:
    r = cli("predict", *RUN, "--set", "cluster.variability.dist=weibull", *args)
    assert r.code == 2 and r.out == "", (r.code, r.out[-300:])
    assert re.match(SUM.format(steps=steps, cv_sum=cv_sum), r.err), r.err
    assert len(r.err.strip().splitlines()) == 1


def test_a_weibull_sum_above_the_floor_is_priced(cli: Any) -> None:
    """local:1000 at cv 0.002 (the sum's cv 6.3e-5: refused before, below 0.001) prices the 8 workers' wait by the
    closed form of the sum's moment-matched Weibull (cost/stragglers.expected_max_of_sum)."""
    r = cli("stragglers", "-n", "8", "--dist", "weibull", "--cv", "0.002", "--local", "1000", "--comm", "0s", "--json")
    assert r.code == 0, r.err
    (row,) = [s for s in json.loads(r.out)["strategies"] if s["sync"] == "local:1000"]
    cv_sum = 0.002 / math.sqrt(1000)
    want = _max_closed_form(8, float(st.weibull_shape_from_cv(cv_sum)))
    assert row["step_time_s"] - 1 == pytest.approx(want - 1, rel=1e-6)


# --- (4) the sweep's point budget says what it costs ------------------------------------------------------------------
# fuzz31's 2,048 GPU counts ran for minutes: strategies default to `best`, so that was 2,048 plans of 0.55-11.5 CPU-s
# each (cProfile: a plan's cost follows its outer candidates and, for deepseek-v3, its uneven pipeline stages priced
# one by one), within the 10,000-best-point limit whose message said "0.25-1 s of CPU". The limit stays; its message
# gives the measured range and the grid's CPU budget at it (specs.sweep.POINT_CPU_S).

def test_the_best_point_limit_states_its_cpu_budget(cli: Any, tmp_path: Path) -> None:
    gpus = ", ".join(str(8 * (i + 1)) for i in range(11_001))
    f = tmp_path / "s.yaml"
    f.write_text(f"kind: sweep\nmodels: [llama3-8b]\nclusters: [dgx-h100]\ngpus: [{gpus}]\n")
    # by hand: 11,001 x 0.55 s = 1.68 h, 11,001 x 11.5 s = 35.1 h
    r = cli("sweep", str(f), "--json")
    assert r.code == 2 and r.out == ""
    assert r.err == (f"error: {f}: strategies: the grid has 11,001 best points, each a whole plan (1.7-35 CPU-hours "
                     "at 0.55-11.5 s a point, by the model and GPU count); at most 10,000 best points (split the study "
                     "into several sweeps, or fix some strategies)\n")
