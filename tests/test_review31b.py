"""review31b: this round's tpu31 / fuzz31 changes checked against their sources (validation/README.md#review31b).

1. tpu31's ``_jax_remat_tp_recompute`` on the row it moved most, mttier25 v6e Llama 3.1 405B (remat_policy custom:
   q / k / v / out_proj / decoder_layer_input offloaded, the norms, context and MLP remat: jax_qkvo), by hand: 126
   layers, pp 1, ici_tensor 4; MaxText shards the batch over data / fsdp only, so a tensor group of 4 chips at
   per_device_batch 1 holds 4 sequences of 8192 tokens; the residual stream h = 16384 in bf16. Each re-gathered norm
   output is the 4 x 8192 x 16384 x 2 = 1,073,741,824-byte buffer; a sequential layer gathers two (input norm ->
   Q / K / V, post-attention norm -> wi_0 / wi_1), so 252 all-gathers of it a micro-batch, nothing more (jax_qkvo
   keeps out_proj: no reduce-scatter repeats).
2. The cv ranges of specs.cluster.cv_refusal against each distribution's own formula: a shifted exponential of mean
   m and cv c is m (1 - c) + Exp(c m) (shift >= 0 iff c <= 1; at c = 1 the plain exponential, whose max of N is
   m H_N); the Weibull cv^2 = Gamma(1 + 2/k) / Gamma(1 + 1/k)^2 - 1 spans [6.4e-4, 3.2e14] over the shape solve's
   k in [0.02, 2000], so [0.001, 20] lay inside it (the lower end the solve's, the upper a cap; fuzz32 since took
   [1.3e-5, 1e14] from the solve's bracket widened to k 1e5, specs.cluster.WEIBULL_SHAPE_RANGE); a gamma shape
   1 / cv^2 overflows a double below cv = 1 / sqrt(DBL_MAX) = 7.46e-155, under GAMMA_CV_FINITE (1e-152) and
   GAMMA_CV_MIN (1e-140).
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module
from scipy.special import gammaln
from test_validation import NEW_CASES, needs_new_cases

import scalemodel.engine.model_parallel_comm as mpc
from scalemodel.cost import stragglers
from scalemodel.specs.cluster import (
    GAMMA_CV_FINITE,
    GAMMA_CV_MIN,
    WEIBULL_CV_MAX,
    WEIBULL_CV_MIN,
    WEIBULL_SHAPE_RANGE,
    cv_refusal,
)


@needs_new_cases
def test_405b_row_repeats_two_gathers_of_its_residual_stream_a_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}
    gathers: list[tuple[float, float]] = []
    collective, jax_rec = mpc._collective, mpc._jax_remat_tp_recompute

    def spy_collective(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        out = collective(op, size, group, algorithm)
        if op == "allgather":
            gathers.append((float(np.ravel(size)[0]), float(np.ravel(out)[0])))
        return out

    def spy_jax(job, g, comp, coll):  # type: ignore[no-untyped-def]
        seen["t"] = float(np.ravel(jax_rec(job, g, comp, coll))[0])
        return jax_rec(job, g, comp, coll)

    monkeypatch.setattr(mpc, "_collective", spy_collective)
    monkeypatch.setattr(mpc, "_jax_remat_tp_recompute", spy_jax)
    vt = script_module("validate_training")
    case = next(c for c in load_yaml(NEW_CASES) if c["id"] == "mttier25_v6e_llama31_405b_256")
    vt.predict_new_case(case)
    buffer = 4 * 8192 * 16384 * 2  # 4 sequences a tensor group x 8192 tokens x h x bf16
    assert buffer == 1_073_741_824
    one = {t for size, t in gathers if size == buffer}
    assert len(one) == 1, gathers  # the activation's all-gather over the tensor group, priced once
    assert seen["t"] == pytest.approx(126 * 2 * one.pop(), rel=1e-12)


def test_shifted_exponential_cv_ends_at_the_plain_exponential() -> None:
    n = 1000
    harmonic = math.fsum(1.0 / i for i in range(1, n + 1))
    for c in (0.25, 1.0):  # max of N: shift + scale H_N = m (1 - c) + c m H_N
        assert float(stragglers.expected_max_step(1.0, c, n, "shifted-exp")) == pytest.approx(
            1.0 - c + c * harmonic, rel=1e-9)
    assert cv_refusal("shifted-exp", 1.0) is None and cv_refusal("shifted-exp", 1.0 + 1e-9) is not None


def _weibull_cv(k: float) -> float:
    return math.sqrt(math.expm1(float(gammaln(1 + 2 / k) - 2 * gammaln(1 + 1 / k))))


def test_weibull_cv_range_lies_inside_the_shape_solve() -> None:
    """fuzz32 widened the solve's bracket from k <= 2000 to 1e5 (WEIBULL_SHAPE_RANGE) and took the range from it."""
    k_lo, k_hi = WEIBULL_SHAPE_RANGE
    lo_cv, hi_cv = _weibull_cv(k_hi), _weibull_cv(k_lo)  # the bisection's k bounds, ends swapped (cv falls in k)
    assert lo_cv == pytest.approx(math.pi / math.sqrt(6) / k_hi, rel=1e-3)  # large k: cv ~ pi / (sqrt 6 k)
    assert lo_cv < WEIBULL_CV_MIN and hi_cv > WEIBULL_CV_MAX
    for c in (WEIBULL_CV_MIN, 1e-3, 1.0, 20.0):  # the solved shape gives back its cv by the formula
        assert _weibull_cv(float(stragglers.weibull_shape_from_cv(c))) == pytest.approx(c, rel=1e-6)
    assert cv_refusal("weibull", WEIBULL_CV_MIN) is None and cv_refusal("weibull", WEIBULL_CV_MAX) is None
    assert cv_refusal("weibull", 0.99 * WEIBULL_CV_MIN) is not None and cv_refusal("weibull", 1.01e14) is not None


def test_gamma_floor_sits_above_the_shape_overflow() -> None:
    overflow = 1.0 / math.sqrt(sys.float_info.max)  # 1 / cv^2 > DBL_MAX below this cv
    assert overflow == pytest.approx(7.458e-155, rel=1e-3)
    assert GAMMA_CV_MIN > GAMMA_CV_FINITE > 10 * overflow
    assert np.isfinite(1.0 / GAMMA_CV_FINITE**2)
    for c in (GAMMA_CV_FINITE, GAMMA_CV_MIN):  # no jitter a double resolves: the max of N is the mean
        assert float(stragglers.expected_max_step(1.0, c, 1000, "gamma")) == 1.0
    assert cv_refusal("gamma", GAMMA_CV_MIN) is None and cv_refusal("gamma", 0.9 * GAMMA_CV_MIN) is not None


@pytest.mark.parametrize("scenario", ["sync-stragglers", "hierarchical-sync"])
def test_published_example_variability_passes(scenario: str, cli) -> None:  # type: ignore[no-untyped-def]
    """The two example scenarios with a variability block (normal, cv 0.05) still validate."""
    path = f"examples/scenarios/{scenario}.yaml"
    r = cli("hardware", "validate", path, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    # the file read as the scenario it names (its name read here with PyYAML, conftest.load_yaml, not the product's
    # reader; ux37)
    assert (doc["kind"], doc["name"], doc["valid"]) == ("scenario", load_yaml(ROOT / path)["name"], True)
