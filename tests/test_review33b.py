"""review33b: a second reading of tp33's userbuffers overlaps (docs/model.md#tp33, #tp-comm-overlap).

The chunked overlaps' edge, from Transformer Engine's own timelines (NVIDIA/TransformerEngine@c55e425ac5,
transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp):

- ``CommOverlapBase::split_overlap_rs`` (L405-530; ``pipeline_rs_overlap_first_gemm`` False, pytorch/module/base.py
  L258): GEMM chunk i of n = 4 (``num_splits``, base.py L255), then its reduce-scatter on the one comm stream, which
  waits on that chunk (L489-520): the first GEMM chunk has no reduce-scatter beside it, the last reduce-scatter chunk
  no GEMM.
- ``CommOverlapP2PBase::split_overlap_ag`` (L735-882, ``aggregate`` False): tp steps, GEMM chunk i beside the
  send / receive of chunk i + 1, each GEMM chunk waiting on its receive (L853-862): the last GEMM chunk has no
  traffic beside it.

The tests below simulate those timelines chunk by chunk (no closed form) and compare the model's exposed seconds, and
check the bounds every part must keep: exposed and hidden in [0, C], hidden <= the GEMM time beside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalemodel.engine import model_parallel_comm as mpc
from tests.test_tp33 import LAYERS, TP, E, N, _setup, _t, _tp


def _pipeline_rs_tail(c: float, w: float, n: int) -> float:
    """Seconds the reduce-scatter pipeline runs past its last GEMM chunk: n GEMM chunks of w / n back to back, the
    reduce-scatter chunk i (c / n) after GEMM chunk i and after reduce-scatter chunk i - 1."""
    gemm_end, comm_end = 0.0, 0.0
    for _ in range(n):
        gemm_end += w / n
        comm_end = max(comm_end, gemm_end) + c / n
    return max(comm_end - gemm_end, 0.0)


def _ring_ag_tail(c: float, w: float, n: int) -> float:
    """Seconds the ring-exchange all-gather adds to its GEMM: n GEMM chunks of w / n, chunk 0 local, chunk i after
    receive i (the receives back to back, c / (n - 1) each)."""
    recv_end, gemm_end = 0.0, w / n
    for _ in range(1, n):
        recv_end += c / (n - 1)
        gemm_end = max(gemm_end, recv_end) + w / n
    return gemm_end - w


@pytest.mark.parametrize("scale", [0.2, 0.6, 0.9, 1.2, 3.0])
@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_userbuffers_exposed_is_the_simulated_chunk_timelines(scale: float, precision: str, recipe: str | None,
                                                              q: float) -> None:
    """tp 4, 8 pairs on one DGX H100 (tests/test_tp33.py's layer). The forward: the gathers' ring beside a G, the
    reduce-scatters' pipeline beside r G; the backward: the output-gradient gathers' ring beside r G, the bulk
    reduce-scatters and re-gathers beside a G each (bulk: one kernel beside one GEMM, exposed C - W past it). The
    GEMM scaled around the traffic (``scale`` x the 8 reduce-scatters a layer's share) so both edges' regimes
    (traffic shorter, and up to 4/3 longer, than its window) are reached. Before review33b the model hid each ring
    and pipeline under all of its window: every scale where a part's traffic passes 3/4 of its window fails there.
    Since tp34 each linear runs its own ring or pipeline beside its own GEMM (before, one a side: QKV with FC1,
    O-proj with FC2), as the simulation here does."""
    job, g, c = _setup(precision, recipe, tp_comm_overlap=True)
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", q * E, job)
    gemm = scale * N * rs / LAYERS
    # tp34: each linear's collective beside its own GEMM, a layer's QKV 3/12, FC1 4/12 (column), O-proj 1/12, FC2
    # 4/12 (row) of its GEMM time; each simulated on its own, LAYERS times
    cols, rows = (3 / 12 * gemm, 4 / 12 * gemm), (1 / 12 * gemm, 4 / 12 * gemm)
    fwd = LAYERS * sum(_ring_ag_tail(ag, w, TP) for w in cols) + LAYERS * sum(_pipeline_rs_tail(rs, w, 4) for w in rows)
    bwd = LAYERS * (sum(_ring_ag_tail(ag, w, TP) for w in rows) + sum(max(rs - w, 0.0) + max(ag - w, 0.0)
                                                                      for w in cols))
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(fwd + bwd, rel=1e-9)
    assert got["hidden_fwd"] == pytest.approx(N * (ag + rs) - fwd, rel=1e-9)
    assert got["hidden_bwd"] == pytest.approx(N * (ag + rs + ag) - bwd, rel=1e-9)


def test_the_simulations_reach_both_regimes() -> None:
    """The simulations' own check: traffic well under its window shows only the pipeline's last chunk (c / 4) and
    nothing of the ring; traffic of 4/3 the window shows C - 3/4 W in both (tp 4)."""
    assert _pipeline_rs_tail(1.0, 10.0, 4) == pytest.approx(0.25)
    assert _ring_ag_tail(1.0, 10.0, 4) == pytest.approx(0.0)
    assert _pipeline_rs_tail(4.0, 3.0, 4) == pytest.approx(4.0 - 0.75 * 3.0)
    assert _ring_ag_tail(4.0, 3.0, 4) == pytest.approx(4.0 - 0.75 * 3.0)


_sec = st.floats(min_value=0.0, max_value=10.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=200)
@given(st.tuples(_sec, _sec), st.tuples(_sec, _sec), st.tuples(_sec, _sec, _sec), st.tuples(_sec, _sec),
       st.tuples(_sec, _sec), st.tuples(_sec, _sec, _sec))
def test_tp_comm_overlap_parts_stay_within_traffic_and_window(  # type: ignore[no-untyped-def]
        fwd, rec, bwd, wf, wr, wb) -> None:
    """Every part: 0 <= hidden <= min(C, W), exposed = C - hidden >= the floor (the forward's and the recompute's
    reduce-scatters a quarter); the totals the sums of the parts."""
    ov = mpc._tp_comm_overlap(fwd, rec, bwd, wf, wr, wb)
    total = 0.0
    for name, cs, ws, floors in (("fwd", fwd, wf, (0.0, 0.25)), ("rec", rec, wr, (0.0, 0.25)),
                                 ("bwd", bwd, wb, (0.0, 0.0, 0.0))):
        for h, x, w, f in zip(ov[f"hidden_{name}_parts"], cs, ws, floors, strict=True):
            hv = float(np.ravel(h)[0])
            assert -1e-12 <= hv <= min(x, w) + 1e-12
            assert x - hv >= f * x - 1e-12
            total += x - hv
    assert float(np.ravel(ov["exposed"])[0]) == pytest.approx(total, abs=1e-9)


@settings(max_examples=40)
@given(st.floats(min_value=1e-6, max_value=1.0), st.sampled_from([("bf16", None), ("fp8", "delayed")]),
       st.booleans(), st.booleans())
def test_layers_hidden_never_exceeds_their_gemms(gemm, prec, overlap, sp) -> None:  # type: ignore[no-untyped-def]
    """The whole layers' path, any GEMM time: TP seconds >= 0; the forward hides at most its GEMMs (L G), the
    backward at most its data- and weight-gradient GEMMs (2 L G); what hides plus what shows is never more than the
    raw traffic (forward pairs, their backward mirrors and output-gradient gathers, the re-gathers)."""
    if overlap and not sp:
        return
    job, g, c = _setup(prec[0], prec[1], tp_comm_overlap=overlap, sequence_parallel=sp)
    got = _tp(job, g, c, gemm, wgrad=2 * LAYERS * gemm)
    assert got["tp"] >= 0.0 and got["hidden_fwd"] >= 0.0 and got["hidden_bwd"] >= 0.0
    assert got["hidden_fwd"] <= LAYERS * gemm * (1 + 1e-12)
    assert got["hidden_bwd"] <= 2 * LAYERS * gemm * (1 + 1e-12)
    pair, fwd_ag, grad_ag, regather = (float(np.ravel(c[k])[0]) for k in ("tp", "tp_fwd_ag", "tp_grad_ag",
                                                                          "tp_regather"))
    raw = N * pair + N * (pair - fwd_ag) + N * max(fwd_ag, grad_ag) + N * regather if sp else 2 * N * pair
    assert got["tp"] + got["hidden_fwd"] + got["hidden_bwd"] <= raw * (1 + 1e-9)
