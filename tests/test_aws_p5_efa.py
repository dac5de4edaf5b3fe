"""aws-p5's efa tier against the published p5 nccl-tests sweeps it is fitted to (hardware/measurements/nccl.yaml
``p5efa_*``, scripts/fit_efa_tier.py, docs/model.md#nanotron).

Checks: the transcribed points are the published figures (values read off the source CSV, times by hand with the
nccl-tests factors); the catalog's latency, efficiency and net_overhead are the stated fit, rounded as the YAML states
them; and what the fitted tier means, computed by hand: the ring all-gather's busbw ceiling 0.88 x 8 x 50 GB/s and its
zero-size latency from NCCL's ring composition with the per-step net overhead (docs/model.md#ring-net-overhead).
"""

from __future__ import annotations

import importlib.util

import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost import collectives as C
from scalemodel.engine.job import build_network
from scalemodel.specs import load_cluster

CASES = {c["id"]: c for c in load_yaml(ROOT / "hardware" / "measurements" / "nccl.yaml")}


def _point(cid: str, size: int) -> float:
    m = CASES[cid]["measured"]
    return m["busbw_GBps"][m["msg_bytes"].index(size)]


def test_the_transcribed_points_are_the_published_figures() -> None:
    # crazyguitar/aws-gpu-communication-benchmark@fd167f97 data/*.csv, out-of-place busbw, size(MB) 1024 = 2^30 B
    assert _point("p5efa_allgather_32node", 2**30) == 222.40
    assert _point("p5efa_allgather_2node", 2**31) == 328.58
    assert _point("p5efa_allreduce_2node", 2**30) == 435.14
    assert _point("p5efa_allreduce_16node", 8 * 2**30) == 356.27
    assert CASES["p5efa_allgather_32node"]["ranks"] == 256 and CASES["p5efa_allreduce_4node"]["ranks"] == 32
    # the CSV's algbw gives the same time as busbw with nccl-tests' factor: 2 nodes, 1 GiB all-reduce, algbw 232.08
    t_bus = 2**30 * 2 * 15 / 16 / 435.14e9
    assert t_bus == pytest.approx(2**30 / 232.08e9, rel=1e-4)  # 4.6267 ms either way


def test_catalog_efa_tier_is_the_stated_fit() -> None:
    spec = importlib.util.spec_from_file_location("fit_efa_tier", ROOT / "scripts" / "fit_efa_tier.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.fit()
    assert r["points"] == 35  # 5 node counts x 7 sizes
    tier = load_cluster("aws-p5", []).tiers[1]
    assert tier.name == "efa"
    assert tier.latency == pytest.approx(round(r["latency_s"] * 1e6, 1) * 1e-6, rel=1e-12)
    assert tier.efficiency == pytest.approx(round(r["efficiency"], 2), abs=1e-12)
    assert tier.net_overhead == pytest.approx(round(r["net_overhead_s"] * 1e6, 1) * 1e-6, rel=1e-12)
    assert r["median_abs_error"] < 0.10


def test_fitted_tier_by_hand() -> None:
    net = build_network(load_cluster("aws-p5", []))
    # bandwidth: a multi-node ring crosses each node boundary once a channel, 8 channels on 8 GPUs' NICs, so busbw
    # tends to 8 x 50 GB/s x 0.88 = 352 GB/s (NVLink's 450 x 0.82 = 369 GB/s is not the bottleneck)
    S = 2.0**38
    t = float(C.algorithm_time("allgather", "ring", S, 32, net))
    assert S * 31 / 32 / t == pytest.approx(352e9, rel=2e-3)
    # latency: 256 ranks on 32 nodes, LL protocol at 1 KiB: base 6.6 us + 224 NVLink steps x max(2, 7.1) us + 31
    # crossing steps x max(21.1, 7.1) us = 2251.1 us (NCCL's ring composition with its net overhead,
    # docs/model.md#ring-net-overhead; the bytes add < 1 us)
    t0 = float(C.algorithm_time("allgather", "ring", 1024.0, 256, net))
    assert t0 == pytest.approx((6.6 + 224 * 7.1 + 31 * 21.1) * 1e-6, rel=1e-3)
