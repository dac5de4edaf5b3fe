"""scripts/compare_gemm_forms.py (docs/model.md#gemm-form-study): its baseline is the engine's curve, its wave term
is NVIDIA's wave quantisation counted by hand."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost.compute import gemm_time
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import compare_gemm_forms as study  # noqa: E402
import fit_compute_curves as fcc  # noqa: E402


@pytest.fixture(scope="module")
def groups() -> dict[tuple[str, str], study.Group]:
    return study.load_groups()


def test_current_form_is_the_engine_curve(groups: dict[tuple[str, str], study.Group]) -> None:
    """The study's 'current' form prices a GEMM as scalemodel.cost.compute.gemm_time does, so its held-out numbers
    are the catalog curve's."""
    g = groups[("b200", "fp8")]
    x = np.array([0.7, 150.0])
    idx = np.arange(len(g))
    want = gemm_time(g.m, g.n, g.k, g.b, peak_flops=g.peak, memory_bandwidth=g.bw, gemm_max=0.7, gemm_half_dim=150.0,
                     memory_efficiency=g.mem, elem_bytes=2.0)
    np.testing.assert_allclose(g.model("current", x, idx), want, rtol=1e-12)


@pytest.mark.parametrize("key", [("h100-sxm", "16bit"), ("b200", "16bit"), ("v100-sxm2-32g", "16bit")])
def test_current_form_refits_the_catalog_fit(groups: dict[tuple[str, str], study.Group], key: tuple[str, str]) -> None:
    """Fitted on every point, 'current' lands on scripts/fit_compute_curves.py's (gemm_max, d0): same data and rule."""
    acc = load_accelerator(key[0], overrides=[])
    doc_pts = [p for p in load_yaml(fcc.GEMM)["points"]
               if (p["acc"], fcc.GROUP[p["prec"]]) == key and p.get("fit", True)
               and 2.0 * p["b"] * p["m"] * p["n"] * p["k"] >= fcc.MIN_GFLOP * 1e9]
    ref = fcc.fit_gemm(doc_pts, acc, key[1], groups[key].mem, None)
    x = groups[key].fit("current", np.arange(len(groups[key])))
    assert x[0] == pytest.approx(ref["gemm_max"], rel=2e-3)
    assert x[1] == pytest.approx(ref["gemm_half_dim"], rel=1e-2)


def test_wave_quantisation_by_hand() -> None:
    """128 x 128 output tiles on 132 SMs: 1024^2 -> 64 CTAs in one wave (64/132 busy); 2048^2 -> 256 CTAs in two
    waves of 132 (256/264); b 4 x 1024^2 -> 256 as well."""
    m = np.array([1024.0, 2048.0, 1024.0])
    b = np.array([1.0, 1.0, 4.0])
    np.testing.assert_allclose(study._wave(m, m, b, 132), [64 / 132, 256 / 264, 256 / 264])
