"""NeMo 1's Apex DistributedFusedAdam under the interleaved schedule (docs/model.md#apex-interleaved), and the MLPerf
v3.1 GPT-3 rows' BF16 parameter gathers (validate_training.py framework.fp8_param_gather false).

The expected gather exposure comes from a step-by-step simulation of the first pipeline stage written here from the
code, not from the formula: Megatron-Core's schedule (core_v0.7.0.beta schedules.py
``forward_backward_pipelining_with_interleaving``: ``param_sync_func`` for chunks 0 and 1 when it starts, for chunk
j + 1 before chunk j's first forward) calling NeMo 1's ``sync_overlap_parameters`` -> Apex's
``_try_start_bucket_param_sync`` -> ``_start_bucket_param_sync``, whose first act, ``_finish_bucket_param_sync``, makes
the compute stream wait for the one communication stream (apex b496d85f distributed_fused_adam.py L1936-1946,
L1991-1995), then enqueues the chunk's gather on that stream behind whatever is there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import script_module

from scalemodel.choices import ScheduleKind, Zero
from scalemodel.engine import dp_comm
from scalemodel.engine.job import grid_from_arrays


@pytest.fixture(scope="module")
def vt() -> Any:
    return script_module("validate_training")


def chunk_of(k: int, pp: int, v: int) -> int:
    """The chunk of forward iteration k (schedules.py ``get_model_chunk_id``, forward)."""
    return (k % (pp * v)) // pp


def is_first_for_chunk(k: int, pp: int, v: int) -> bool:
    """``is_first_microbatch_for_model_chunk``: the first micro-batch group, first of its pp."""
    return k // (pp * v) == 0 and (k % (pp * v)) % pp == 0


def simulate_apex_gather(pp: int, v: int, a: float, phi: float) -> float:
    """Seconds the first stage's forwards wait on parameter gathers (each chunk's a seconds of traffic, one
    chunk-forward phi seconds, compute back to back as in the warmup, which holds every chunk's first forward)."""
    state = {"t": 0.0, "stream": 0.0}
    done: dict[int, float] = {}

    def launch(chunk: int) -> None:
        # _start_bucket_param_sync: _finish_bucket_param_sync (compute waits for the stream), then enqueue
        state["t"] = max(state["t"], state["stream"])
        state["stream"] = max(state["stream"], state["t"]) + a
        done[chunk] = state["stream"]

    launch(0)
    launch(1)
    for k in range(v * pp):
        c = chunk_of(k, pp, v)
        if is_first_for_chunk(k, pp, v):
            if 1 < c + 1 < v:
                launch(c + 1)  # forward_step_helper, rank 0: param_sync_microbatch_id = microbatch_id
            state["t"] = max(state["t"], done[c])  # the pre-forward hook's _param_copy
        state["t"] += phi
    return state["t"] - v * pp * phi


@pytest.mark.parametrize(("pp", "v"), [(2, 2), (2, 4), (4, 2), (4, 6), (6, 8), (8, 12), (8, 6), (3, 5)])
@pytest.mark.parametrize("scale", [0.05, 0.5, 1.0, 2.5, 9.0, 40.0])
def test_apex_gather_equals_the_simulation(pp: int, v: int, scale: float) -> None:
    phi = 0.01
    a = scale * pp * phi  # a chunk's gather against its window of pp chunk-forwards
    want = simulate_apex_gather(pp, v, a, phi)
    got = float(dp_comm.apex_interleaved_param_gather_exposed(v * a, v * phi, pp, v))
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_apex_gather_bounds() -> None:
    """Chunk 0's gather waits whole (no compute before it), nothing exposes more than the traffic."""
    a_all = np.linspace(0.0, 5.0, 41)
    for pp, v, f in ((2, 2, 0.1), (6, 8, 0.0245), (8, 12, 1.0)):
        got = dp_comm.apex_interleaved_param_gather_exposed(a_all, f, pp, v)
        assert np.all(got >= a_all / v - 1e-15)
        assert np.all(got <= a_all + 1e-15)
        # a longer forward hides no less
        assert np.all(dp_comm.apex_interleaved_param_gather_exposed(a_all, 2 * f, pp, v) <= got + 1e-15)


def _grid(**kw: Any) -> Any:
    base: dict[str, Any] = dict(gpus=48, dp=4, tp=1, pp=np.asarray([4]), micro_batch=1, global_batch=32,
                                zero=np.asarray([Zero.OPTIMIZER]), overlap=np.asarray([True]),
                                schedule=np.asarray([ScheduleKind.INTERLEAVED]), virtual_stages=np.asarray([3]),
                                bucket_fragments=np.asarray([True]), overlap_param_gather=np.asarray([True]))
    base.update(kw)
    return grid_from_arrays(**base)


def test_apex_route_syncs_chunk_by_chunk() -> None:
    """bucket_fragments (NeMo 1's Apex) at ZeRO 1/2 with overlap, interleaved, pp > 1, v >= 2 takes the chunked rule;
    not at ZeRO 0, not without overlap, not under 1F1B; plain ZeRO 1 without Megatron-Core DDP or Apex neither."""
    assert bool(dp_comm.interleaved_dp_sync(_grid())[0])
    assert bool(dp_comm.interleaved_dp_sync(_grid(zero=np.asarray([Zero.GRADIENTS])))[0])
    assert not bool(dp_comm.interleaved_dp_sync(_grid(zero=np.asarray([Zero.NONE])))[0])
    assert not bool(dp_comm.interleaved_dp_sync(_grid(overlap=np.asarray([False])))[0])
    assert not bool(dp_comm.interleaved_dp_sync(_grid(schedule=np.asarray([ScheduleKind.ONE_F_ONE_B])))[0])
    assert not bool(dp_comm.interleaved_dp_sync(_grid(bucket_fragments=np.asarray([False])))[0])


@pytest.mark.parametrize("align", [True, False])
def test_apex_exposure_by_hand(align: bool) -> None:
    """_expose_param_gather on the Apex route: the reduce-scatter of chunk k launched after its last backward (NeMo 1
    always passes grad_sync_func, whatever align_grad_reduce says), the gather by the Apex rule; by hand:
    C = 0.9 s of reduce-scatter, A = 0.6 s of gather, pp 4, v 3, f = 0.2, b = 0.4 s free a micro-batch."""
    g = _grid(align_grad_reduce=np.asarray([align]), align_param_gather=np.asarray([align]))
    comp = {"forward_free": np.asarray([0.2]), "backward_free": np.asarray([0.4])}
    got = float(dp_comm._expose_param_gather(g, comp, np.asarray([1.5]), np.asarray([0.05]), np.asarray([0.6]))[0])
    r, w_b = 0.9 / 3, 4 * 0.4 / 3  # chunk's reduce-scatter 0.3, window 0.5333
    rs = max(r, 0.9 - 2 * w_b)  # 0.3
    a, w_f = 0.6 / 3, 4 * 0.2 / 3  # chunk's gather 0.2, window 0.2667
    ag = a + 2 * max(0.0, a - w_f)  # 0.2
    assert got == pytest.approx(rs + ag, rel=1e-12)
    assert got == pytest.approx(0.5, rel=1e-12)


def test_fp8_param_gather_false_is_read(vt: Any) -> None:
    """framework.fp8_param_gather false on NeMo 1's Apex route keeps the BF16 gathers; absent, the route's FP8
    gathers (configure.sh +model.fp8_params); only booleans pass the row check."""
    case = {"id": "mlpt31_x", "framework": {"optim_name": "distributed_fused_adam", "bucket_cap_mb": 100}}
    assert vt.megatron_options(case, "1", "fp8", 2.0)["fp8_param_gather"] is True
    case["framework"]["fp8_param_gather"] = False
    out = vt.megatron_options(case, "1", "fp8", 2.0)
    assert out["fp8_param_gather"] is False and out["bucket_fragments"] is True
    assert vt.refused_value(False, *vt.FRAMEWORK_FIELDS["fp8_param_gather"]) is None
    assert vt.refused_value("no", *vt.FRAMEWORK_FIELDS["fp8_param_gather"]) is not None


def test_mlperf_gpt3_rows_compared(vt: Any) -> None:
    """Every MLPerf v3.1 / v4.0 / v4.1 GPT-3 row is compared, with the optimizer's overlapped parameter sync
    (distributed_fused_adam.yaml overlap_param_sync ${OVERLAP_PARAM_SYNC,True}, no config sets it) and, in v3.1 only,
    BF16 parameter gathers."""
    rows = [c for c in vt.read_yaml(vt.NEW_CASES) if c["id"].startswith(("mlpt31_", "mlpt40_", "mlpt41_"))]
    assert len(rows) == 13  # data40 added v3.1's Azure+NVIDIA 10,752-GPU run (mlpt31_h100_gpt3_175b_10752_azure)
    for c in rows:
        assert "held_out" not in c
        assert vt.overlap_flags(c["parallelism"]["overlap"])["overlap_param_gather"]
        opts = vt.megatron_options(c, "1", "fp8", 2.0)
        assert opts["fp8_param_gather"] is (not c["id"].startswith("mlpt31_")), c["id"]
