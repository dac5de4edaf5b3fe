"""The causal / unmasked backward relation of the Hopper sweeps with both masks (scripts/fit_attention.py
``causal_check``, report only; docs/model.md#causal-backward). Values by hand from attention.yaml's SM-H200 points
(scalemodel's own H200 sweep, fa-benchmark FLOPs: forward 4 b h s^2 d, halved when causal, forward + backward 3.5x)."""

from __future__ import annotations

import pytest
from conftest import script_module

#: SM-H200 cuDNN, head dim 128: causal s 4096 (b 4, h 16; fwd 511.5, fwd+bwd 438.5 TFLOP/s) and unmasked s 2048
#: (b 8, h 16; fwd 581.2, fwd+bwd 467.6): both forwards F = 2.74877906944e11 FLOP, 2048.5 and 2048 keys per query.
F = 4.0 * 4 * 16 * 4096**2 * 128 / 2
T_BWD_CAUSAL = 3.5 * F / 438.5e12 - F / 511.5e12  # 2.194008 - 0.537396 = 1.656612 ms
T_BWD_FULL = 3.5 * F / 467.6e12 - F / 581.2e12  # 2.057468 - 0.472949 = 1.584519 ms


def test_forward_flops_of_the_two_shapes_agree() -> None:
    assert 4.0 * 8 * 16 * 2048**2 * 128 == F == pytest.approx(2.74877906944e11, rel=1e-12)


def test_derived_backward_time_by_hand() -> None:
    fa = script_module("fit_attention")
    pts = fa.backward_points(fa.load_points())
    got = [p for p in pts if p["src"] == "SM-H200" and p["kernel"] == "cudnn" and p["d"] == 128 and p["causal"]
           and p["s"] == 4096]
    assert len(got) == 1 and got[0]["dir"] == "bwd"
    assert got[0]["t_meas"] == pytest.approx(T_BWD_CAUSAL, rel=1e-9)
    assert T_BWD_CAUSAL == pytest.approx(1.656612e-3, rel=1e-5)


def test_causal_backward_runs_slower_than_unmasked_at_equal_keys() -> None:
    """By hand: 2.5 F / t_bwd = 414.8 TFLOP/s causal against 433.7 unmasked, 0.9565 (4.35 % slower). The report's
    error of the causal s 4096 call on the unmasked fit (rms 0.2 % on its own calls) is that ratio - 1 within 0.5 %;
    every SM-H200 group (cuDNN and FA2, d 64 and 128) needs a longer seq_half for its causal calls."""
    ratio = T_BWD_FULL / T_BWD_CAUSAL  # same FLOPs
    assert ratio == pytest.approx(0.9565, abs=5e-4)
    rows = [r for r in script_module("fit_attention").causal_check() if r["src"] == "SM-H200"]
    assert {(r["kernel"], r["d"]) for r in rows} == {("cudnn", 64), ("cudnn", 128), ("fa2", 64), ("fa2", 128)}
    err = next(e for r in rows if (r["kernel"], r["d"]) == ("cudnn", 128) for s, e, _ in r["calls"] if s == 4096)
    assert err == pytest.approx(ratio - 1.0, abs=0.005)
    for r in rows:
        assert r["extra"] > 0
        assert all(e < 0 for s, e, _ in r["calls"] if s <= 8192)
        assert max(abs(c) for _, _, c in r["calls"]) < 0.05  # the shifted seq_half holds every causal call
