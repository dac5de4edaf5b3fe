"""offload35: optimizer-state and parameter offload to host memory (strategy offload_states; docs/model.md).

Section: docs/model.md#state-offload.

Checked independently of the code under test: the bytes and seconds of one small ZeRO-2 / ZeRO-3 job from the table
of cost/state_offload.py's docstring (DeepSpeed's copies read at deepspeedai/DeepSpeed@edaa7221) and the CPU-Adam
rate of DeepSpeed PR #735 (11.6e9 parameters in 8.2 s); the GPU memory by hand (the optimizer states, and the
parameter and gradient shards under optimizer+params, leave the GPU); DeepSpeed JSON configs read into the field;
the refusals; and, over the wide random generator, that offload never makes a step faster and that a step is never
shorter than the bytes it sends either way over the host link.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.api import predict, strategy_spec
from scalemodel.choices import Recompute, StateOffload, Zero
from scalemodel.cost import state_offload
from scalemodel.engine import dp_comm, planner
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.engine.stage_memory import memory_parts
from scalemodel.engine.step import Infeasible, evaluate
from scalemodel.errors import InputError
from scalemodel.report.explain import describe_settings
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import TrainingSpec
from tests.test_physics_wide import wide_cases

#: DeepSpeed PR #735 (2021-02-08): DeepSpeedCPUAdam stepped an 11.6B-parameter GPT-2 in 8.2 s
RATE = 11.6e9 / 8.2
L, HID, NH, FFN, SEQ, VOCAB = 4, 1024, 8, 4096, 2048, 32000


def _job(tmp_path: Path, host_bandwidth: float | None = None, hidden: int = HID,  # type: ignore[no-untyped-def]
         ffn: int = FFN, heads: int = NH):
    path = tmp_path / "small.yaml"
    path.write_text(f"kind: transformer\nname: small\nlayers: {L}\nhidden: {hidden}\nheads: {heads}\n"
                    f"ffn_hidden: {ffn}\nvocab: {VOCAB}\nseq_len: {SEQ}\ndropout: false\n")
    job = build_job(load_cluster("dgx-h100"), load_workload(str(path)),
                    TrainingSpec(precision="bf16", global_batch=32, micro_batch=1))
    if host_bandwidth is not None:
        job = msgspec.structs.replace(job, host_bandwidth=host_bandwidth)
    return job, str(path)


def _grid(zero: int, offload: int, **kw: object):  # type: ignore[no-untyped-def]
    base = dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=32, recompute=Recompute.NONE,
                flash_attention=True, zero=zero, offload_states=offload)
    return grid_from_arrays(**{k: np.asarray([v]) for k, v in {**base, **kw}.items()})


def test_catalog_rate_is_the_published_measurement() -> None:
    assert state_offload.CPU_ADAM_PARAMS_PER_S == pytest.approx(1.4146e9, rel=1e-4)
    text = Path(__file__).resolve().parents[1].joinpath("hardware/measurements/cpu_adam.yaml").read_text()
    assert "735" in text and "8.2" in text and "11.6" in text


@pytest.mark.parametrize(("zero", "offload", "d2h_per", "h2d_per", "after_per", "fetch_per", "linked"), [
    # m = 4 micro-batches, 16-bit gradients and weights (2 bytes), by the docstring's table; fetch: the H2D bytes of
    # the parameter shards before their gathers (beside the gradient path's copies, not behind them; review36);
    # linked: the bytes a parameter the link's time binds: ZeRO 1/2 max(D2H + H2D - F, F, H2D); ZeRO-3 / FSDP
    # (offz340, the per-unit chain) each forward's fetch (F / 8, the 8 gathers' passes half in the forwards) and each
    # backward's max(its gradient copies, its fetch + its copies back): stage 3 +params 4 x 2 + 3 x max(4, 2 + 2) +
    # max(4 + 4, 2 + 2) = 28 (the fluid form's max(20, 16, 24) = 24 let the forwards' fetches overlap the backwards'
    # copies), FSDP 4 x 4 + 4 x max(4, 4 + 0) = 32
    (Zero.OPTIMIZER, StateOffload.OPTIMIZER, 4 + 2, 2, 2, 0, 8),  # stage 1: one reduction at the boundary
    (Zero.GRADIENTS, StateOffload.OPTIMIZER, 4 + 4 * 2, 3 * 2, 2, 0, 18),  # stage 2: out every micro-batch, back 3x
    (Zero.PARAMETERS, StateOffload.OPTIMIZER, 4 + 4 * 2, 4 * 2, 2, 0, 20),  # stage 3: host buffer round trip each time
    (Zero.PARAMETERS, StateOffload.PARAMS, 4 + 4 * 2, 4 * 2 + 8 * 2, 0, 8 * 2, 28),  # + 8 gathers of the 16-bit shard
    (Zero.FSDP, StateOffload.PARAMS, 4 * 4, 8 * 4, 0, 8 * 4, 32),  # fp32 grad shard per reduce-scatter, fp32 per gather
])
def test_bytes_and_seconds_by_hand(tmp_path: Path, zero: int, offload: int, d2h_per: float, h2d_per: float,
                                   after_per: float, fetch_per: float, linked: float) -> None:
    """One 8-GPU job of the small model on a slow host link (copies longer than the compute): the optimizer part is
    the copies during the step past the compute they run under, the CPU-Adam step of the rank's 1/8 of the
    parameters at an eighth of the host's rate (8 ranks per node), and the copy back after it. The gradient path's
    copies, out and back, run one after another on one stream (review36: DeepSpeed stage_1_and_2.py L1719-1754 and
    stage3.py partition_grads at edaa7221), X = D2H + H2D - F; the parameter fetches F beside them, through the same
    host-to-device direction as the copies back (all H2D bytes cross it). Between a 1 GB/s and a 0.1 GB/s link the
    windows and the CPU step cancel: the part grows by (linked + after) (1/0.1 - 1/1) ns a byte, ``linked`` max(X, F,
    H2D) at ZeRO 1/2 and, at ZeRO-3 / FSDP, the sum over the passes of each one's binding copies (offz340: the
    fetches ride the forwards' gathers, the gradient copies the backwards' reduce-scatters). ZeRO-1 without
    overlap_comm has no window at all: the whole sum is exposed."""
    job, _ = _job(tmp_path, host_bandwidth=1e9)
    slow = msgspec.structs.replace(job, host_bandwidth=1e8)
    # ZeRO-1 without overlap_comm: reduced and copied after the last backward, on the compute's stream (review35c)
    g = _grid(zero, offload, **({"overlap": False} if zero == Zero.OPTIMIZER else {}))
    res, res_slow = evaluate(job, g), evaluate(slow, g)
    n = job.params / 8  # pp 1, tp 1: each rank's state shard is an eighth of the model
    m = 4
    assert float(dp_comm.microbatches(g)[0]) == m
    d2h, h2d, after, fetch = n * d2h_per, n * h2d_per, n * after_per, n * fetch_per
    got_bytes = state_offload.host_copy_bytes(n, mode=offload, zero=zero, microbatches=m, gathers=2 * m)
    assert [float(x) for x in got_bytes] == pytest.approx([d2h, h2d, after], rel=1e-12)
    got_fetch = state_offload.param_fetch_bytes(n, mode=offload, zero=zero, gathers=2 * m)
    assert float(got_fetch) == pytest.approx(fetch, rel=1e-12)
    cpu = n * 8 / RATE
    serial = d2h + h2d - fetch
    if zero < Zero.PARAMETERS:
        assert linked == max(d2h_per + h2d_per - fetch_per, fetch_per, h2d_per)
    assert max(serial, fetch, h2d) / 1e9 > float(res.breakdown["compute"][0])  # exposed at both rates
    grown = float(res_slow.breakdown["optimizer"][0] - res.breakdown["optimizer"][0])
    assert grown == pytest.approx((n * linked + after) * (1 / 1e8 - 1 / 1e9), rel=1e-9)
    if zero == Zero.OPTIMIZER:  # no compute under them: out and back in series, whole
        assert float(res.breakdown["optimizer"][0]) == pytest.approx((d2h + h2d) / 1e9 + cpu + after / 1e9,
                                                                     rel=1e-9)
    # the GPU's own Adam step is gone: the same job without offload prices the HBM-bound step instead
    none = evaluate(job, _grid(zero, 0, **({"overlap": False} if zero == Zero.OPTIMIZER else {})))
    assert float(none.breakdown["optimizer"][0]) < cpu
    assert float(res.step_time[0]) > float(none.step_time[0])


def test_zero1_copies_run_beside_the_last_backward(tmp_path: Path) -> None:
    """ZeRO-1 with overlap_comm (review35c): DeepSpeed's gradient hooks, created under cpu_offload (which forces
    contiguous_gradients), reduce and copy bucket by bucket in the accumulation boundary's backward, on the
    reduction_stream (stage_1_and_2.py@edaa7221 L638-641, L1758-1769, L1719-1727), so the last micro-batch's backward
    runs under the copies, less the reduce-scatters queued ahead of them on that stream (review36); without
    overlap_comm reduce_gradients reduces after it on the compute's stream (L874-879). On a 1 GB/s link (copies longer
    than a backward) overlap takes off one micro-batch's backward less the reductions: for layers of hidden 8192
    (GEMM-bound) about 2/3 of its forward + backward (GEMM backward 2 x the forward FLOPs, flash attention's 2.5 x;
    0.6 to 0.75 of it), less the reduce-scatter of the 16-bit gradients over NVLink (micro-batch 8: 8 x 2048 tokens
    a GPU against 2 bytes a parameter, under 10 % of the backward)."""
    job, _ = _job(tmp_path, host_bandwidth=1e9, hidden=8192, ffn=28672, heads=64)
    kw = {"micro_batch": 8, "global_batch": 256}
    serial = evaluate(job, _grid(Zero.OPTIMIZER, StateOffload.OPTIMIZER, overlap=False, **kw))
    beside = evaluate(job, _grid(Zero.OPTIMIZER, StateOffload.OPTIMIZER, overlap=True, **kw))
    m = float(dp_comm.microbatches(_grid(Zero.OPTIMIZER, StateOffload.OPTIMIZER, **kw))[0])
    assert m == 4
    n = job.params / 8
    copies = (4 + 2 + 2) * n / 1e9  # the table's ZeRO-1 row at m = 4, out and back in series
    per_mb = float(beside.breakdown["compute"][0]) / m  # one micro-batch's forward + backward
    saved = float(serial.breakdown["optimizer"][0] - beside.breakdown["optimizer"][0])
    assert copies > per_mb  # exposed either way: the saving is the backward less the reductions
    assert 0.55 * per_mb < saved < 0.75 * per_mb
    assert saved < copies


@pytest.mark.parametrize(("opt_bytes", "elem"), [(12.0, 4.0), (4.0, 2.0), (8.0, 2.0)])
def test_fsdp_copies_move_the_shards_built_dtype(tmp_path: Path, opt_bytes: float, elem: float) -> None:
    """review35c: FSDP's CPU offload moves the sharded parameter (before each gather) and its reduced gradient (after
    each reduce-scatter) at the dtype the model was built in: fp32 under a bf16 MixedPrecisionPolicy with an fp32
    master (optimizer bytes 12, the table's 4), bf16 for a model built in bf16 with no master (Automodel's rows:
    optimizer bytes 4 or 8), 2 bytes (FSDP2 _fsdp_param.py: sharded_param keeps orig_dtype). With the copies exposed,
    m = 4 micro-batches, G = 2 m gathers (reshard after forward): D2H 4 e n on the reduce-scatter stream, H2D 8 e n
    on the gather path beside it (review36), the larger exposed: between a 1 GB/s and a 0.1 GB/s link the part grows
    by 8 e n (1/0.1 - 1/1) ns."""
    job, _ = _job(tmp_path, host_bandwidth=1e9)
    job = msgspec.structs.replace(job, optimizer_bytes_per_param=opt_bytes)
    slow = msgspec.structs.replace(job, host_bandwidth=1e8)
    g = _grid(Zero.FSDP, StateOffload.PARAMS, fsdp_per_param=True, fsdp_reshard_after_forward=True)
    res, res_slow = evaluate(job, g), evaluate(slow, g)
    n, m = job.params / 8, 4
    h2d = 2 * m * elem * n
    assert h2d / 1e9 > float(res.breakdown["compute"][0])
    grown = float(res_slow.breakdown["optimizer"][0] - res.breakdown["optimizer"][0])
    assert grown == pytest.approx(h2d * (1 / 1e8 - 1 / 1e9), rel=1e-9)


def test_copies_hide_under_the_compute(tmp_path: Path) -> None:
    """On a fast host link (1 TB/s) the small ZeRO-2 job's copies (12 bytes a shard parameter out, 6 in) fit under its
    backward with overlap_comm: only the CPU step and the copy back after it remain. Without overlap_comm DeepSpeed
    issues them on the compute's own stream (stage_1_and_2.py reduce_ipg_grads), so they all add, out and back in
    series (review36)."""
    job, _ = _job(tmp_path, host_bandwidth=1e12)
    res = evaluate(job, _grid(Zero.GRADIENTS, StateOffload.OPTIMIZER))
    n = job.params / 8
    assert (4 + 8 + 6) * n / job.host_bandwidth < 0.5 * float(res.breakdown["compute"][0])
    tail = n * 8 / RATE + 2 * n / job.host_bandwidth
    assert float(res.breakdown["optimizer"][0]) == pytest.approx(tail, rel=1e-9)
    serial = evaluate(job, _grid(Zero.GRADIENTS, StateOffload.OPTIMIZER, overlap=False))
    assert float(serial.breakdown["optimizer"][0]) == pytest.approx(tail + (4 + 8 + 6) * n / job.host_bandwidth,
                                                                    rel=1e-9)


@pytest.mark.parametrize(("zero", "offload"), [(Zero.OPTIMIZER, 1), (Zero.GRADIENTS, 1), (Zero.PARAMETERS, 1),
                                               (Zero.PARAMETERS, 2), (Zero.FSDP, 2)])
def test_memory_by_hand(tmp_path: Path, zero: int, offload: int) -> None:
    """The optimizer states (12 bytes a parameter over the 8 shards) leave the GPU; so does the gradient shard from
    ZeRO 2 on (DeepSpeed keeps the reduced partition on the host), while ZeRO 1's unsharded gradients stay; under
    optimizer+params the 16-bit parameter shard (2 P / 8) leaves too and the gathered layers stay. Fragmentation
    follows the states (cost.memory's 5 % of them): the total drops by 1.05 x what left."""
    job, _ = _job(tmp_path)
    m = np.asarray([4])
    base, off = memory_parts(job, _grid(zero, 0), m), memory_parts(job, _grid(zero, offload), m)
    p = job.params
    assert float(off["optimizer"][0]) == 0.0 and float(base["optimizer"][0]) == pytest.approx(12 * p / 8, rel=1e-9)
    grads_left = 0.0 if zero == Zero.OPTIMIZER else 2 * p / 8
    assert float(base["gradients"][0] - off["gradients"][0]) == pytest.approx(grads_left, rel=1e-9)
    weights_left = 2 * p / 8 if offload == 2 else 0.0
    assert float(base["weights"][0] - off["weights"][0]) == pytest.approx(weights_left, rel=1e-9, abs=1e-3)
    left = 12 * p / 8 + grads_left + weights_left
    assert float(base["total"][0] - off["total"][0]) == pytest.approx(left * 1.05, rel=1e-9)


def test_seventy_b_fits_on_eight_gpus_only_offloaded() -> None:
    """The capacity planner's question: Llama 3 70B on one 8 x H100 node, ZeRO-3, full recompute, micro-batch 1."""
    kw = dict(zero="3", recompute="full", micro_batch=1, global_batch=64)
    plain = predict("dgx-h100", "llama3-70b", 8, **kw)
    offloaded = predict("dgx-h100", "llama3-70b", 8, offload_states="optimizer", **kw)
    assert not plain.feasible and offloaded.feasible
    # the CPU step of the rank's eighth of the parameters at an eighth of the host's rate (about 50 s), then the
    # 16-bit eighth back over the catalog's 63 GB/s PCIe Gen5 x16 link (0.28 s); during the step (offz340) each
    # backward's last unit's copies, which follow its reduce-scatter after the backward's compute (its 1/80 of the
    # shard out and back, 2 + 2 bytes, and in the last backward the fp32 copy, 4 bytes, too): 8 x 4 + 4 = 36 bytes a
    # parameter over 80 (the copies of the other units fit their units' windows: 7 ms beside about 70 ms)
    job = build_job(load_cluster("dgx-h100"), load_workload("llama3-70b"), TrainingSpec(global_batch=64))
    n = job.params / 8
    assert job.host_bandwidth == 63e9 and int(job.shape.layers) == 80
    tails = (8 * 4 + 4) * n / 80 / 63e9
    assert offloaded.breakdown_s["optimizer"] == pytest.approx(n * 8 / RATE + 2 * n / 63e9 + tails, rel=1e-9)


def _ds(tmp_path: Path, zero: dict[str, object]):  # type: ignore[no-untyped-def]
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
                                "bf16": {"enabled": True}, "zero_optimization": zero}))
    return read_strategy_file(str(path))


@pytest.mark.parametrize(("zero", "expect", "unused"), [
    ({"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}, "optimizer", ""),
    ({"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}, "optimizer+params", ""),
    ({"stage": 2, "cpu_offload": True}, "optimizer", ""),  # the deprecated boolean, DeepSpeed's device cpu
    ({"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/x"}}, None, "NVMe"),
    ({"stage": 3, "offload_param": {"device": "cpu"}}, None, "without the optimizer"),
    ({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.4}}, None, "partial"),
    # review35c: SuperOffloadOptimizer_Stage3 steps on the CPU during the backward (superoffload_stage3.py@edaa7221)
    ({"stage": 3, "offload_optimizer": {"device": "cpu", "super_offload": True}}, None, "SuperOffload"),
    ({"stage": 3, "offload_optimizer": {"device": "cpu", "super_offload": False}}, "optimizer", ""),
    ({"stage": 3, "offload_optimizer": {"device": "none"}}, None, ""),
])
def test_deepspeed_offload_is_read(tmp_path: Path, zero: dict[str, object], expect: str | None, unused: str) -> None:
    out = _ds(tmp_path, zero)
    assert out.strategy.get("offload_states") == expect
    if unused:
        assert any(unused in u for u in out.unused), out.unused
    else:
        assert not any("offload" in u for u in out.unused), out.unused


@pytest.mark.parametrize(("kind", "kept"), [("Lion", False), ("Adagrad", False), ("AdamW", True), ("Adam", True)])
def test_deepspeed_offload_with_another_optimizer_is_not_priced(tmp_path: Path, kind: str, kept: bool) -> None:
    """review35c: DeepSpeed steps an offloaded Lion / Adagrad with DeepSpeedCPULion / DeepSpeedCPUAdagrad
    (deepspeed/runtime/engine.py _configure_basic_optimizer at edaa7221), which no measurement here prices; the reader
    leaves offload_states unset and names the field, as predict refuses offload_states beside optimizer sgd."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": kind},
                                "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}))
    out = read_strategy_file(str(path))
    assert (out.strategy.get("offload_states") == "optimizer") is kept
    assert any("offload_optimizer.device cpu" in u and kind in u for u in out.unused) is not kept, out.unused


def test_deepspeed_offload_predicts(tmp_path: Path) -> None:
    """End to end: a DeepSpeed ZeRO-3 JSON with both offloads predicts the 70B job on one node (it fits) and echoes
    offload_states; a bad combination exits 2 with one line naming the file's field."""
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
                                "bf16": {"enabled": True}, "zero_optimization": {
                                    "stage": 3, "offload_optimizer": {"device": "cpu"},
                                    "offload_param": {"device": "cpu"}}}))
    cmd = [sys.executable, "-m", "scalemodel", "predict", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "8",
           "--strategy", str(path), "--recompute", "full", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["strategy"]["offload_states"] == "optimizer+params" and doc["feasible"]
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {
        "stage": 2, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}))
    bad = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "offload_param.device" in bad.stderr and "stage 3" in bad.stderr, bad.stderr


@pytest.mark.parametrize(("fields", "match"), [
    (dict(zero="0", offload_states="optimizer"), "ZeRO"),
    (dict(zero="fsdp", offload_states="optimizer"), "optimizer-only"),
    (dict(zero="2", offload_states="optimizer+params"), "parameters sharded"),
    (dict(zero="1", offload_states="optimizer", megatron_ddp=True), "megatron_ddp"),
])
def test_spec_refusals(fields: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        strategy_spec(**fields)


@pytest.mark.parametrize(("kw", "match"), [
    (dict(optimizer="sgd"), "CPU-Adam"),
    (dict(offload_layers=1), "activation offload"),
])
def test_engine_refusals(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        predict("dgx-h100", "gpt-1.7b", 8, zero="2", offload_states="optimizer", micro_batch=1, global_batch=8, **kw)


def test_no_host_link_is_refused() -> None:
    cluster = msgspec.structs.replace(load_cluster("dgx-h100"), host_bandwidth=None)
    with pytest.raises(InputError, match="GPU-host link"):
        predict(cluster, "gpt-1.7b", 8, zero="2", offload_states="optimizer", micro_batch=1, global_batch=8)


def test_plan_marks_stages_that_cannot_run_it_infeasible(tmp_path: Path) -> None:
    job, _ = _job(tmp_path)
    res = evaluate(job, _grid(Zero.NONE, StateOffload.OPTIMIZER))
    assert int(res.reason[0]) == int(Infeasible.STATE_OFFLOAD_INVALID)
    res = evaluate(job, _grid(Zero.GRADIENTS, StateOffload.PARAMS))
    assert int(res.reason[0]) == int(Infeasible.STATE_OFFLOAD_INVALID)


def _with_offload(arrays: dict[str, object]) -> dict[str, object] | None:
    zero = int(np.asarray(arrays["zero"]).ravel()[0])
    mode = StateOffload.PARAMS if zero >= Zero.PARAMETERS else StateOffload.OPTIMIZER if zero >= 1 else None
    if mode is None:
        return None
    return {**arrays, "offload_states": int(mode), "offload_layers": 0, "offload_tensors": 0, "megatron_ddp": False,
            "nanotron_trainer": False, "bucket_fragments": False}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=wide_cases().filter(lambda c: c[0].host_bandwidth > 0), slower=st.sampled_from((1.0, 1e-3)))
def test_offload_never_faster_and_never_beats_its_host_bytes(case, slower) -> None:  # type: ignore[no-untyped-def]
    """Offloading the states never makes a step faster (a CPU-Adam step is slower than any catalog GPU's HBM-bound
    one, and the copies only add), and the step is never shorter than the bytes it sends each way over the host link
    at its rate (the link counted as a tier; ``slower`` shrinks the link so that the bound binds)."""
    job, arrays, sync = case
    arrays = _with_offload({**arrays, "offload_states": 0})
    if arrays is None:
        return
    job = msgspec.structs.replace(job, host_bandwidth=job.host_bandwidth * slower)
    on = grid_from_arrays(**arrays)
    off = grid_from_arrays(**{**arrays, "offload_states": 0})
    r_on, r_off = evaluate(job, on, sync=sync), evaluate(job, off, sync=sync)
    assert np.all(r_on.step_time >= r_off.step_time * (1 - 1e-9))
    # the bytes each way, from the rank's state shard (the shard the memory model and the GPU Adam step count)
    dense, expert = dp_comm._stage_params_per_gpu(job, on, None, None)
    n = dense / dp_comm._state_shards(job, on, sync) + expert / dp_comm._expert_state_shards(job, on, sync)
    m = dp_comm.microbatches(on)
    # FSDP2's deferred sync (offz41): one forward gather pass (and fetch), the backwards' where resharded after the
    # forward, one reduce-scatter (and copy out) a step
    reshard = np.asarray(on.fsdp_reshard_after_forward, dtype=float)
    defer = np.asarray(on.fsdp_defer_grad_sync, dtype=bool) & (m > 1) & (np.asarray(on.zero) >= Zero.FSDP)
    d2h, h2d, after = state_offload.host_copy_bytes(
        n, mode=on.offload_states, zero=on.zero, microbatches=np.where(defer, 1.0, m),
        gathers=np.where(defer, 1.0 + m * reshard, m * (1.0 + reshard)),
        weight_bytes=job.elem_bytes, grad_bytes=job.grad_bytes,
        shard_bytes=4.0 if job.optimizer_bytes_per_param >= 12 else job.elem_bytes)  # FSDP's shard: the built dtype
    bound = np.maximum(d2h, h2d + after) / job.host_bandwidth
    assert np.all(r_on.step_time >= bound * (1 - 1e-9))


def test_plan_searches_offload_when_allowed() -> None:
    """70B on 8 H100s: nothing fits without host offload (the states alone need 14 GPUs), so plan finds no strategy
    by default; ``--allow offload`` opens offload_states on every configuration (3 x the candidates) and finds plans,
    the winner's states on the host, priced as predict prices the same strategy. Candidates whose ZeRO stage cannot
    run a value are counted state_offload_invalid, at every ZeRO stage (not at the first searched)."""
    job = build_job(load_cluster("dgx-h100"), load_workload("llama3-70b"), TrainingSpec(global_batch=64))
    plain = planner.search(job, 8, 64, top=3)
    opened = planner.search(job, 8, 64, top=3, allow=("offload",))
    assert not plain.ranked and opened.ranked
    assert opened.candidates_evaluated == 3 * plain.candidates_evaluated
    assert opened.infeasible_by_reason.get("state_offload_invalid", 0) > 0
    best = opened.ranked[0]
    assert best.strategy["offload_states"] != "none"
    # the table's settings name it (review35c: the winner's row read "mb 1, FSDP, SP")
    assert f"offload {best.strategy['offload_states']}" in describe_settings(best.strategy)
    keys = ("tp", "pp", "cp", "ep", "micro_batch", "schedule", "zero", "recompute", "sequence_parallel",
            "offload_states", "layout", "overlap", "algorithm", "cp_comm_type")
    again = predict("dgx-h100", "llama3-70b", 8, global_batch=64, bucket_size=best.strategy["bucket_bytes"],
                    **{k: best.strategy[k] for k in keys})
    assert again.feasible and again.step_time_s == pytest.approx(best.step_time_s, rel=1e-9)


def test_plan_without_a_fit_names_host_offload() -> None:
    """The memory-floor sentence of a plan with no feasible strategy names the host offload where the cluster could
    price it and the search did not open it; with --allow offload the plan fits and the sentence is not needed."""
    cmd = [sys.executable, "-m", "scalemodel", "plan", "-m", "llama3-70b", "-c", "dgx-h100", "-n", "8",
           "--global-batch", "64", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    doc = json.loads(done.stdout)
    assert not doc["ranked"] and "--allow offload" in doc["why"], doc["why"]
    assert doc["search"]["memory_floor"]["offload_unsearched"] is True


@pytest.mark.parametrize("command", ["memory", "predict"])
def test_header_says_where_the_states_went(command: str) -> None:
    """review35c: memory's table of an offloaded run reads optimizer states 0 B; its header (and predict's) names the
    offload, and a run without it is not marked."""
    base = [sys.executable, "-m", "scalemodel", command, "-m", "llama3-70b", "-c", "dgx-h100", "-n", "8", "--zero",
            "3", "--recompute", "full", "--global-batch", "64"]
    on = subprocess.run(base + ["--set", "strategy.offload_states=optimizer+params"], capture_output=True, text=True,
                        check=False, env={**os.environ, "COLUMNS": "200"})
    off = subprocess.run(base, capture_output=True, text=True, check=False, env={**os.environ,
                                                                                 "COLUMNS": "200"})
    assert on.returncode == 0, on.stderr
    assert "model states in host memory (offload_states optimizer+params)" in " ".join(on.stdout.split())
    assert "host memory" not in off.stdout
