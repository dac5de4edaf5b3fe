"""XLA's GPU latency-hiding scheduler windows on HSDP's cross-group all-reduce (strategy xla_gpu_lhs,
docs/model.md#xla-gpu-lhs): the combined groups, each window of about 5 kernels, and the MaxText A3 rows that state
it, against values worked out by hand from the formula

    n = floor(S / T), r = S - n T, N = n (r > 0) or n - 1, W = min(5 b / K, L b / N), K = 2 (4 + 3) + 1 = 15
    total = n t(T) + t(r),  exposed = N max(t(T) - W, 0) + t(last)   (the last group: r if r > 0, else a full one)

with every collective priced at a fixed number of seconds a byte (t(x) = c x), so each value reads off the bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module
from test_hostile_inputs import refused

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 Llama-style layers, h = 1024, 8 heads x 128, gated MLP f = 4096, RMSNorm, no biases, tied 32,000-token embedding:
# per layer qkv 1024 x 3072 + o 1024 x 1024 + MLP 3 x 1024 x 4096 + 2 norms x 1024 = 16,779,264; model 4 layers +
# embedding 32,000 x 1024 + final norm 1024 = 99,886,080 (tests/test_fsdp_reshard.py works the same model out)
P, L = 99_886_080, 4
TINY = TransformerWorkload(name="tiny-llama", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False)
MIB = 1024 * 1024
#: AI-Hypercomputer/maxtext@efb6d9e4a MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh
#: --xla_gpu_all_reduce_combine_threshold_bytes
SCRIPT_THRESHOLD = {1: 128 * MIB, 2: 64 * MIB, 4: 512 * MIB, 8: 1024 * MIB, 16: 1024 * MIB}


@pytest.fixture(scope="module")
def a3():  # type: ignore[no-untyped-def]
    return load_cluster("gcp-a3-high")


def _priced(monkeypatch: pytest.MonkeyPatch, per_byte: float) -> None:
    def priced(op, size, group, algorithm=None):  # type: ignore[no-untyped-def]
        return np.asarray(size, dtype=float) * per_byte

    monkeypatch.setattr(dp_comm, "_collective", priced)


def _hsdp(a3, **strategy: Any):  # type: ignore[no-untyped-def]
    """16 GPUs on two 8-GPU VMs, HSDP with a shard group of 8 (one VM), bf16 gradients."""
    job = build_job(a3, TINY, TrainingSpec(grad_bytes_per_param=2))
    st = StrategySpec(dp=16, zero="hsdp", shard_group=8, **strategy)
    return job, grid_from_strategy(st, TrainingSpec(global_batch=16, precision=job.precision), 16, job)


def test_layer_kernels_are_maxtexts_unfused_gemms(a3) -> None:  # type: ignore[no-untyped-def]
    """q, k, v, o + wi_0, wi_1, wo: 7 weight GEMMs, a dgrad and a wgrad each, + the attention backward = 15."""
    job, _ = _hsdp(a3)
    assert float(dp_comm.xla_layer_kernels(job)) == 15.0


@pytest.mark.parametrize(("threshold", "backward", "want_total", "want_exposed"), [
    # S = 24,971,520 B (2 P / 8). T = 8 MiB: n = 2, r = 24,971,520 - 16,777,216 = 8,194,304; at 1 ns a byte
    # t(T) = 8.388608 ms, t(r) = 8.194304 ms; b = 15 ms -> W = 5 ms (L b / N = 4 x 15 / 2 = 30 ms), the remainder
    # last, whole: exposed = 2 x 3.388608 + 8.194304 = 14.97152 ms
    (8 * MIB, 0.015, 24.971520e-3, 14.971520e-3),
    # T = 64 MiB > S: one group, r = S, complete only when the backward ends: all of it exposed
    (64 * MIB, 0.015, 24.971520e-3, 24.971520e-3),
    # b = 90 ms -> W = 30 ms, more than either full group: the remainder alone exposed
    (8 * MIB, 0.090, 24.971520e-3, 8.194304e-3),
])
def test_groups_and_windows_by_hand(a3, monkeypatch, threshold, backward, want_total,  # type: ignore[no-untyped-def]
                                    want_exposed) -> None:
    _priced(monkeypatch, 1e-9)
    job, g = _hsdp(a3, xla_gpu_lhs=True, bucket_size=float(threshold))
    total, exposed, _ = dp_comm.xla_lhs_allreduce(job, g, 2.0 * P / 8, 2.0, None, backward, L, 15.0)
    assert float(total) == pytest.approx(want_total, rel=1e-12)
    assert float(exposed) == pytest.approx(want_exposed, rel=1e-12, abs=1e-15)


def test_unset_threshold_is_xlas_default(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No bucket_size: XLA's 30 MiB + 7 B. S = 80 MiB: n = 2, r = 80 MiB - 60 MiB - 14 B; b = 0 (W = 0)."""
    _priced(monkeypatch, 1.0)
    job, g = _hsdp(a3, xla_gpu_lhs=True)
    total, exposed, _ = dp_comm.xla_lhs_allreduce(job, g, 80.0 * MIB, 2.0, None, 0.0, L, 15.0)
    assert float(total) == float(exposed) == pytest.approx(80.0 * MIB)
    _, e_one, _ = dp_comm.xla_lhs_allreduce(job, g, 80.0 * MIB, 2.0, None, 15.0 * (30 * MIB + 7) / 5, L,
                                        15.0)
    # W = t(T): both full groups hidden; the remainder (20 MiB - 14 B) comes last, after the backward: exposed
    assert float(e_one) == pytest.approx(20.0 * MIB - 14.0, rel=1e-12)


def test_windows_never_hold_more_than_the_backward(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """S = 24,971,520 B in T = 1 MiB groups: n = 23, r = 24,971,520 - 24,117,248 = 854,272, N = 23 windows (the
    remainder comes last, after the backward). At 1 ns a byte, b = 3 ms: 5 b / 15 = 1 ms, but L b / N = 12 / 23 ms,
    so W = 12 / 23 ms: exposed = 23 x 1.048576 - 12 + 0.854272 = 12.971520 ms. One more ms of b hides L ms more."""
    _priced(monkeypatch, 1e-9)
    job, g = _hsdp(a3, xla_gpu_lhs=True, bucket_size=float(MIB))
    _, exposed, windows = dp_comm.xla_lhs_allreduce(job, g, 2.0 * P / 8, 2.0, None, 3e-3, L, 15.0)
    assert float(exposed) == pytest.approx(12.971520e-3, rel=1e-12)
    assert float(windows) == pytest.approx(12e-3, rel=1e-12)  # = N W = L b: the whole backward
    _, slower, _ = dp_comm.xla_lhs_allreduce(job, g, 2.0 * P / 8, 2.0, None, 4e-3, L, 15.0)
    assert float(exposed) - float(slower) == pytest.approx(L * 1e-3, rel=1e-9)


def test_the_hsdp_sync_moves_the_same_bytes_and_exposes_them(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One micro-batch, one unit's free compute f = b = 1000 s (every unit collective hidden), 1 ns a byte.
    Per unit: gather 2 P / L, reduce-scatter 2 P / L inside the VM, all-reduce 2 P / (8 L) across the VMs.
    Without xla_gpu_lhs the first gather, the last reduce-scatter and the last all-reduce are exposed; with it
    the all-reduces leave the units' windows (total unchanged) and, S = 2 P / 8 being under XLA's 30 MiB, form one
    combined group, which starts only when the backward ends: all L of them exposed, whatever the windows."""
    _priced(monkeypatch, 1e-9)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * 1000.0]),
            "backward_free": np.asarray([L * 1000.0])}
    out = {}
    for on in (False, True):
        job, g = _hsdp(a3, xla_gpu_lhs=on)
        groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                                 layout=g.layout)
        out[on] = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data,
                                   hsdp=groups.data_split(np.asarray(8)))
    unit_ag = unit_rs = 2.0 * P / L * 1e-9
    unit_ar = 2.0 * P / (8 * L) * 1e-9
    traffic = (2 * L - 1) * unit_ag + L * (unit_rs + unit_ar)
    assert out[False]["gathers"].item() == pytest.approx(traffic, rel=1e-12)
    assert out[True]["gathers"].item() == pytest.approx(traffic, rel=1e-12)
    assert out[False]["gathers_exposed"].item() == pytest.approx(unit_ag + unit_rs + unit_ar, rel=1e-12)
    assert out[True]["gathers_exposed"].item() == pytest.approx(unit_ag + unit_rs + L * unit_ar, rel=1e-12)


def test_spec_needs_fsdp_or_hsdp() -> None:
    with pytest.raises(InputError, match="xla_gpu_lhs"):
        StrategySpec(zero=3, xla_gpu_lhs=True)
    with pytest.raises(InputError, match="xla_gpu_lhs"):
        StrategySpec(xla_gpu_lhs=True)
    StrategySpec(zero="hsdp", xla_gpu_lhs=True)
    StrategySpec(zero="fsdp", xla_gpu_lhs=True)


def test_forward_kernels() -> None:
    """q, k, v, o + wi_0, wi_1, wo forward GEMMs + the attention kernel = 8 (7 without the gate)."""
    job = build_job(load_cluster("gcp-a3-high"), TINY, TrainingSpec(grad_bytes_per_param=2))
    assert float(dp_comm.xla_layer_forward_kernels(job)) == 8.0
    plain = build_job(load_cluster("gcp-a3-high"), TransformerWorkload(
        name="tiny-gpt", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, seq_len=2048,
        gated_mlp=False, biases=False, tied_embeddings=True, dropout=False), TrainingSpec(grad_bytes_per_param=2))
    assert float(dp_comm.xla_layer_forward_kernels(plain)) == 7.0
    assert float(dp_comm.xla_layer_kernels(plain)) == 13.0


@pytest.mark.parametrize(("gathers", "want_fwd", "want_bwd"), [
    # AG 10 ms, RS 6 ms, f 8 ms, b 15 ms: W_f = 5 x 8 / 8 = 5 ms, W_b = min(5 x 15 / 15, 15 / 2) = 5 ms
    # forward max(10 - 5, 0) = 5; backward max(10 - 5, 0) + max(6 - 5, 0) = 6 ms
    (True, 5e-3, 6e-3),
    # no backward gather (fsdp_reshard_after_forward false): W_b = min(5, 15 / 1) = 5 ms, backward max(6 - 5, 0)
    (False, 5e-3, 1e-3),
])
def test_unit_windows_by_hand(a3, gathers, want_fwd, want_bwd) -> None:  # type: ignore[no-untyped-def]
    job, _ = _hsdp(a3)
    fwd, bwd = dp_comm.xla_lhs_unit_exposure(job, 10e-3, 6e-3, 8e-3, 15e-3, gathers, 15.0)
    assert float(fwd) == pytest.approx(want_fwd, rel=1e-12)
    assert float(bwd) == pytest.approx(want_bwd, rel=1e-12)
    # each at least the shared window's exposure: max(10 - 8, 0) = 2 ms, max(10 + 6 - 15, 0) = 1 ms
    assert float(fwd) >= 2e-3 and float(bwd) >= 1e-3


def test_fsdp_units_exposed_beyond_their_windows(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """FSDP over one 8-GPU VM, one micro-batch, 1 ns a byte: a unit's gather and reduce-scatter are both
    2 P / L bytes = 49.94304 ms. f = 64 ms, b = 120 ms a unit: W_f = 5 x 64 / 8 = 40 ms, W_b = 5 x 120 / 15 = 40 ms.

        with xla_gpu_lhs:  AG + 3 max(AG - 40, 0) + 3 (max(AG - 40, 0) + max(RS - 40, 0)) + RS
                         = 2 x 49.94304 + 9 x 9.94304 = 189.37344 ms
        without:           AG + 3 max(AG - 64, 0) + 3 max(AG + RS - 120, 0) + RS = 99.88608 ms

    and the traffic, 7 AG + 4 RS = 549.37344 ms, either way."""
    _priced(monkeypatch, 1e-9)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * 64e-3]),
            "backward_free": np.asarray([L * 120e-3])}
    out = {}
    for on in (False, True):
        job = build_job(a3, TINY, TrainingSpec(grad_bytes_per_param=2))
        st = StrategySpec(dp=8, zero="fsdp", xla_gpu_lhs=on)
        g = grid_from_strategy(st, TrainingSpec(global_batch=8, precision=job.precision), 8, job)
        groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                                 layout=g.layout)
        out[on] = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data)
    unit = 2.0 * P / L * 1e-9
    assert unit == pytest.approx(49.94304e-3, rel=1e-12)
    for on in (False, True):
        assert out[on]["gathers"].item() == pytest.approx(11 * unit, rel=1e-12)
    assert out[False]["gathers_exposed"].item() == pytest.approx(2 * unit, rel=1e-12)
    assert out[True]["gathers_exposed"].item() == pytest.approx(2 * unit + 9 * (unit - 40e-3), rel=1e-12)


def _fsdp(a3, workload: Any = TINY, **strategy: Any):  # type: ignore[no-untyped-def]
    """FSDP over one 8-GPU VM (one micro-batch of 8 sequences), MaxText's layer (layer_impl xla) unless told."""
    job = build_job(a3, workload, TrainingSpec(grad_bytes_per_param=2))
    st = StrategySpec(dp=8, zero="fsdp", **{"layer_impl": "xla", **strategy})
    return job, grid_from_strategy(st, TrainingSpec(global_batch=8, precision=job.precision), 8, job)


UNGATED = TransformerWorkload(name="tiny-gpt", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                              seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=True, dropout=False)


@pytest.mark.parametrize(("workload", "strategy", "want"), [
    # no recompute: 2 (4 + 3) + 1 = 15 gated, 2 (4 + 2) + 1 = 13 ungated
    (TINY, {}, 15.0),
    (UNGATED, {}, 13.0),
    # full recompute under XLA's remat repeats the forward but the down-projection wo, whose output no backward
    # reads: q, k, v, o, wi_0, wi_1 + the attention kernel = 7 more (6 ungated: q, k, v, o, wi + the kernel)
    (TINY, {"recompute": "full"}, 22.0),
    (UNGATED, {"recompute": "full"}, 19.0),
    # jax_dots (checkpoint_dots_with_no_batch_dims, MaxText minimal / minimal_flash): the attention core only
    (TINY, {"recompute": "selective", "recompute_modules": "jax_dots"}, 16.0),
    # jax_qkvo (save_dot_except_mlp): the core and the MLP's up-projections wi_0, wi_1 (wi ungated)
    (TINY, {"recompute": "selective", "recompute_modules": "jax_qkvo"}, 18.0),
    (UNGATED, {"recompute": "selective", "recompute_modules": "jax_qkvo"}, 15.0),
    # Megatron's default core_attn: the core; mlp: the dense MLP's three GEMMs (two ungated)
    (TINY, {"recompute": "selective"}, 16.0),
    (TINY, {"recompute": "selective", "recompute_modules": "mlp"}, 18.0),
    (UNGATED, {"recompute": "selective", "recompute_modules": "mlp"}, 15.0),
    # jax_qkvo with mlp: the MLP's three GEMMs once, not its up-projections twice, and the core: 15 + 3 + 1
    (TINY, {"recompute": "selective", "recompute_modules": "jax_qkvo,mlp"}, 19.0),
    # torchtitan's op policy: wk, wo and w3 (gated; an ungated block's second mm is the unrepeated w2)
    (TINY, {"recompute": "selective", "recompute_modules": "titan_op"}, 18.0),
    (UNGATED, {"recompute": "selective", "recompute_modules": "titan_op"}, 15.0),
])
def test_layer_kernels_count_the_recomputed_forward(a3, workload, strategy,  # type: ignore[no-untyped-def]
                                                    want) -> None:
    """The backward seconds b hold the recomputed forward (docs/model.md#recompute), so K counts its kernels."""
    job, g = _fsdp(a3, workload, **strategy)
    assert dp_comm.xla_layer_kernels(job, g).item() == want


def test_partial_full_recompute_counts_its_share_of_layers(a3) -> None:  # type: ignore[no-untyped-def]
    """Full recompute of 1 of the stage's 4 layers (recompute_layers 1, block): b is the stage's backward over its
    layers, one of which repeats 7 of its 8 forward kernels (XLA's remat drops wo): K = 15 + 7 / 4 = 16.75."""
    job, g = _fsdp(a3, recompute="full", recompute_layers=1)
    assert dp_comm.xla_layer_kernels(job, g, 1.0 / 4.0).item() == 16.75


@pytest.mark.parametrize(("strategy", "want"), [
    # an XLA layer on GPUs (MaxText on A3): XLA's remat, 7 of the forward's 8 kernels again: K = 15 + 7 = 22
    ({"layer_impl": "xla"}, 22.0),
    # a program under XLA's GPU scheduler is compiled by XLA whatever layer_impl says: the same 22
    ({"layer_impl": "megatron_te", "xla_gpu_lhs": True}, 22.0),
    # a PyTorch layer (Megatron-Core, TE) on the same GPUs: torch.utils.checkpoint reruns all 8: K = 15 + 8 = 23
    ({"layer_impl": "megatron_te"}, 23.0),
    # a parallel block under XLA drops the O-projection too (xlapar35): 6 again, K = 15 + 6 = 21 (below)
])
def test_xla_remat_leaves_the_down_projection_out(a3, strategy, want) -> None:  # type: ignore[no-untyped-def]
    """XLA's remat is the compiler's, not the TPU's (layer_compute.xla_remat, docs/model.md#xlagpu35): on GPUs
    too the recomputed forward leaves the down-projection out, so b holds 7 of its 8 forward kernels."""
    job, g = _fsdp(a3, recompute="full", **strategy)
    assert dp_comm.xla_layer_kernels(job, g).item() == want


def test_xla_remat_of_a_parallel_block_on_gpus(a3) -> None:  # type: ignore[no-untyped-def]
    """A parallel block (one norm, attention and MLP summed) under XLA on GPUs: its recomputed forward drops wo and
    the O-projection, both feeding only the sum (docs/model.md#xlapar35): q, k, v, wi_0, wi_1 + the kernel = 6 again,
    K = 15 + 6 = 21; the same block under a PyTorch layer reruns all 8 (23)."""
    par = TransformerWorkload(name="tiny-par", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                              seq_len=2048, gated_mlp=True, biases=False, tied_embeddings=True, dropout=False,
                              parallel_block=True, norms_per_layer=1)
    job, g = _fsdp(a3, par, recompute="full")
    assert dp_comm.xla_layer_kernels(job, g).item() == 21.0
    job, g = _fsdp(a3, par, recompute="full", layer_impl="megatron_te")
    assert dp_comm.xla_layer_kernels(job, g).item() == 23.0


def test_fsdp_windows_under_full_recompute(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """test_fsdp_units_exposed_beyond_their_windows' run under full recompute (XLA's: K = 15 + 7 = 22), the backward
    176 ms a unit (the same free backward per kernel, 120 / 15 = 176 / 22 = 8 ms): W_b = 5 x 176 / 22 = 40 ms as
    before, not 5 x 176 / 15 = 58.7 ms, which would hide every backward collective (49.94304 ms).

        AG + 3 max(AG - 40, 0) + 3 (max(AG - 40, 0) + max(RS - 40, 0)) + RS = 2 x 49.94304 + 9 x 9.94304 ms"""
    _priced(monkeypatch, 1e-9)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * 64e-3]),
            "backward_free": np.asarray([L * 176e-3]), "recomputed_layers": np.asarray([float(L)])}
    job, g = _fsdp(a3, recompute="full", xla_gpu_lhs=True)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    out = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data)
    unit = 2.0 * P / L * 1e-9
    assert out["gathers_exposed"].item() == pytest.approx(2 * unit + 9 * (unit - 40e-3), rel=1e-12)


def test_more_recompute_never_lengthens_a_window(a3) -> None:  # type: ignore[no-untyped-def]
    """For one backward b, recomputing more (none < core < jax_qkvo < full) only adds kernels, so 5 b / K only
    shrinks: the exposure priced for a given b never drops when the policy recomputes more."""
    counts = [dp_comm.xla_layer_kernels(*_fsdp(a3, **st)).item() for st in (
        {}, {"recompute": "selective", "recompute_modules": "jax_dots"},
        {"recompute": "selective", "recompute_modules": "jax_qkvo"}, {"recompute": "full"})]
    assert counts == sorted(counts) and len(set(counts)) == 4


def _vt() -> Any:
    return script_module("validate_training")


def test_a3_rows_take_the_scripts_scheduler_and_thresholds() -> None:
    """The rows record each script's --xla_gpu_all_reduce_combine_threshold_bytes; the multi-VM ones (HSDP) price
    XLA's windows with it as the bucket, the 1-VM one (FSDP inside the VM, nothing across) neither."""
    vt = _vt()
    cases = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}
    for vms, threshold in SCRIPT_THRESHOLD.items():
        case = cases[f"mtgpu24_a3_llama2_7b_{vms}vm"]
        par = case["parallelism"]
        assert par["xla_latency_hiding_scheduler"] is True
        assert par["xla_all_reduce_combine_threshold_bytes"] == threshold
        r = vt.predict_new_case(case)
        assert isinstance(r, vt.CaseResult), getattr(r, "reason", r)
        assert (r.settings["zero"] == "hsdp") == (vms > 1)
        assert par["xla_all_gather_combine_threshold_bytes"] == 128 * MIB
        assert par["xla_reduce_scatter_combine_threshold_bytes"] == (128 if vms == 16 else 64) * MIB
        assert vt.xla_options(case, r.settings["zero"]) == (
            {"xla_gpu_lhs": True, "bucket_size": float(threshold)} if vms > 1 else {"xla_gpu_lhs": True})


def test_dgx_cloud_rows_ran_a_pgle_profile() -> None:
    """NVIDIA/dgxc-benchmarking@35a9aec maxtext/configure.sh: BASE_THRESHOLD 8 GiB over AR / AG / RS multiples
    (BF16 4 / 4 / 256, 512 from 64 nodes; FP8 8 / 16 / 1024, 2048 from 64 nodes), and the measured run compiles
    with --xla_gpu_pgle_profile_file_or_directory_path: XLA's profile-guided estimator, not the 5-kernel windows,
    so xla_options prices none of it."""
    vt = _vt()
    gib = 8 * 1024 * MIB
    checked = 0
    for case in load_yaml(ROOT / "validation" / "training_cases.yaml"):
        if not case["id"].startswith("mtdgxc24_"):
            continue
        par = case["parallelism"]
        fp8, nodes = "_fp8_" in case["id"], par["gpus"] // 8
        want = (gib // 8, gib // 16, gib // (2048 if nodes >= 64 else 1024)) if fp8 else \
            (gib // 4, gib // 4, gib // (512 if nodes >= 64 else 256))
        got = (par["xla_all_reduce_combine_threshold_bytes"], par["xla_all_gather_combine_threshold_bytes"],
               par["xla_reduce_scatter_combine_threshold_bytes"])
        assert got == want, case["id"]
        assert par["xla_latency_hiding_scheduler"] is True and par["xla_pgle_profile"] is True
        for zero in ("fsdp", "hsdp"):
            assert vt.xla_options(case, zero) == {}
        checked += 1
    assert checked, "no mtdgxc24_ row: the thresholds were checked on nothing"  # 12 rows at 3d87a634



def test_xla_gpu_lhs_refused_for_a_model_without_transformer_layers(cli) -> None:  # type: ignore[no-untyped-def]
    """The scheduler's window is counted in a transformer layer's kernels: a generic (FLOPs and parameters) model
    with the field set is refused with one line naming the field (before: an AttributeError in
    dp_comm.xla_layer_kernels on a job without a transformer shape, found by test_physics after the merge)."""
    line = refused(cli, "predict", "-m", "resnet50", "-n", "32", "--zero", "hsdp",
                   "--set", "strategy.xla_gpu_lhs=true", match="xla_gpu_lhs")
    assert "transformer" in line


def test_hsdp_unit_windows_are_five_of_the_layers_kernels(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """HSDP over two 8-GPU VMs with XLA's windows, one micro-batch, 1 ns a byte; f = 64 ms, b = 120 ms a unit.
    The cross-group all-reduce of S = 2 P / 8 = 24,971,520 B in T = 8 MiB groups: n = 2, r = 8,194,304 B, N = 2
    windows of W = min(5 x 120 / 15, 4 x 120 / 2) = 40 ms (each group's 8.388608 ms hidden), the remainder exposed
    whole: 8.194304 ms. They take N W / L = 20 ms of each unit's backward: b' = 100 ms. A unit window is 5 of the
    layer's 15 kernels of 8 ms each, W_b = min(5 x 120 / 15, 100 / 2) = 40 ms (not 5 x 100 / 15 = 33.3 ms: the
    all-reduces take whole windows, the kernels keep their length), W_f = 5 x 64 / 8 = 40 ms; the unit's in-VM
    gather and reduce-scatter are 2 P / L bytes = 49.94304 ms each:

        exposed = AG + 3 max(AG - 40, 0) + 3 (max(AG - 40, 0) + max(RS - 40, 0)) + RS + 8.194304 ms
                = 2 x 49.94304 + 9 x 9.94304 + 8.194304 = 197.567744 ms"""
    _priced(monkeypatch, 1e-9)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * 64e-3]),
            "backward_free": np.asarray([L * 120e-3])}
    job, g = _hsdp(a3, xla_gpu_lhs=True, bucket_size=float(8 * MIB))
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    out = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data, hsdp=groups.data_split(np.asarray(8)))
    unit = 2.0 * P / L * 1e-9
    assert out["gathers_exposed"].item() == pytest.approx(2 * unit + 9 * (unit - 40e-3) + 8.194304e-3, rel=1e-12)


def test_hsdp_unit_windows_under_full_recompute(a3, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Both rules of the xlafix21 / review21d merge at once: test_hsdp_unit_windows_are_five_of_the_layers_kernels'
    run under full recompute, the backward 184 ms a unit (8 ms a kernel, as there: 184 / 23 = 120 / 15). K = 23
    counts the recomputed forward; the all-reduce windows are min(5 x 184 / 23, 4 x 184 / 2) = 40 ms (each 8 MiB
    group's 8.388608 ms hidden, the 8.194304 ms remainder exposed whole) and take 2 x 40 / 4 = 20 ms of each unit's
    backward: b' = 164 ms. A unit window is W_b = min(5 x 184 / 23, 164 / 2) = 40 ms: not 5 x 184 / 15 = 61.3 ms
    (K without the recomputed forward, which would hide the 49.94304 ms collectives) nor 5 x 164 / 23 = 35.7 ms (the
    kernels shortened by the all-reduces' share):

        exposed = 2 x 49.94304 + 9 x (49.94304 - 40) + 8.194304 ms = 197.567744 ms"""
    _priced(monkeypatch, 1e-9)
    comp = {"layers_per_stage": np.asarray([float(L)]), "forward_free": np.asarray([L * 64e-3]),
            "backward_free": np.asarray([L * 176e-3]), "recomputed_layers": np.asarray([float(L)])}
    job, g = _hsdp(a3, xla_gpu_lhs=True, bucket_size=float(8 * MIB), recompute="full")
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    out = dp_comm._dp_comm(job, g, comp, np.asarray([1.0]), groups.data, hsdp=groups.data_split(np.asarray(8)))
    unit = 2.0 * P / L * 1e-9
    assert out["gathers_exposed"].item() == pytest.approx(2 * unit + 9 * (unit - 40e-3) + 8.194304e-3, rel=1e-12)
