"""Statistical efficiency: McCandlish S/E relations and Kaplan's critical batch, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import efficiency as ef
from scalemodel.errors import InputError


def test_tradeoff_table():
    # McCandlish 2018, by hand: B/B_crit = 1/4 .. 8 -> S/S_min = 5, 3, 2, 1.5, 1.25, 1.125; E/E_min = 1 + B/B_noise
    ratio = np.array([0.25, 0.5, 1, 2, 4, 8])
    s = ef.steps_to_target(1.0, ratio * 1000, 1000)
    e = ef.examples_to_target(1.0, ratio * 1000, 1000)
    np.testing.assert_allclose(s, [5, 3, 2, 1.5, 1.25, 1.125])
    np.testing.assert_allclose(e, [1.25, 1.5, 2, 3, 5, 9])
    np.testing.assert_allclose((s - 1) * (e - 1), 1.0)


def test_kaplan_critical_batch():
    # Kaplan B_crit(L) by hand: L = 4.0, 3.5, 3.0, 2.5, 2.0 -> 0.27M, 0.51M, 1.07M, 2.55M, 7.4M tokens
    got = ef.critical_batch_kaplan([4.0, 3.5, 3.0, 2.5, 2.0])
    np.testing.assert_allclose(got / 1e6, [0.27, 0.51, 1.07, 2.55, 7.4], rtol=0.02)
    # by hand: 2e8 / 3^(1/0.21)
    assert ef.critical_batch_kaplan(3.0) == pytest.approx(2e8 / 3 ** (1 / 0.21))
    assert ef.critical_batch_kaplan(3.0, b_star=1e8, alpha_b=0.5) == pytest.approx(1e8 / 9)


def test_time_to_target_and_goodput():
    # S_min = 1000 steps, B_noise = 4096, B = 1024 -> S = 5000; 0.5 s/step -> 2500 s
    assert ef.time_to_target(1000, 1024, 4096, 0.5) == pytest.approx(2500)
    assert ef.time_to_target(1000, 1024, 4096, 0.5, sync_efficiency=0.5) == pytest.approx(5000)
    # weak scaling: doubling B past B_noise doubles throughput but goodput gains less
    g1 = ef.goodput(1000.0, 4096, 4096)
    g2 = ef.goodput(2000.0, 8192, 4096)
    assert g1 == pytest.approx(500.0) and g2 == pytest.approx(2000 / 3)
    # Pollux form relative to M0: (phi + M0)/(phi + M)
    assert ef.statistical_efficiency(1024, 100, ref_batch=128) == pytest.approx(228 / 1124)


def test_noise_scale_estimator():
    # synthetic: |G|^2 = 2, tr(Sigma) = 1000 -> E|G_B|^2 = 2 + 1000/B; B_simple = 500
    b_s, b_b = 32.0, 1024.0
    est = ef.noise_scale_from_norms(b_s, b_b, 2 + 1000 / b_s, 2 + 1000 / b_b)
    assert est == pytest.approx(500.0)


def test_bad_input():
    for call in (lambda: ef.steps_to_target(1, 0, 10), lambda: ef.critical_batch_kaplan(-1),
                 lambda: ef.time_to_target(1, 1, 1, 1, sync_efficiency=0),
                 lambda: ef.noise_scale_from_norms(64, 32, 1, 1)):
        with pytest.raises(InputError):
            call()
