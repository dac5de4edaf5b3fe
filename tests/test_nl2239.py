"""nl2239: NeMo 1's megatron_amp_O2 main-gradient hook (strategy main_grad_hook).

Both NeMo 1 optimizers the NeMo Megatron launcher's GPT-3 tables ran add every micro-batch's 16-bit weight gradient
into an fp32 main-gradient buffer from a per-parameter backward hook and free the 16-bit gradient:

* 22.05 / 22.06 (NeMo v1.9.0 / v1.10.0, ``fused_adam`` under MainParamsOptimizerWrapper, bf16 -> fp32_grad_accum and
  contiguous_grad_bucket): ``param_hook``, ``main_param.grad.add_(param.grad.data); param.grad = None``
  (nemo/core/optim/optimizer_with_main_params.py v1.10.0 L300-308, v1.9.0 L232-240). No gradient-accumulation fusion
  in these NeMo releases (the key reaches the model first in v1.11.0).
* 22.08 (NeMo v1.11.0, Apex DistributedFusedAdam at 98661600): the grad-accumulator hook (distributed_fused_adam.py
  L349-368) calls ``_grad_copy``, ``grad_out.add_(grad_in)`` into the float32 contiguous buffer, then
  ``param.grad = None`` (L525-564). NeMo v1.11.0 _validate_config turns gradient_accumulation_fusion off at
  pipeline_model_parallel_size 1 (the 5B rows); the 175B rows (pp 8) keep it, so their weight-gradient GEMMs write
  main_grad themselves (``param.main_grad = grad_buffer_view(param)``, nemo/core/optim/optimizers.py v1.11.0).

Per parameter per micro-batch, with the fusion off: read the 2-byte gradient, read and write the 4-byte buffer,
2 + 4 + 4 = 10 bytes, at the accelerator's datasheet HBM bandwidth x its BabelStream fraction. Unlike Megatron-Core's
DDP at pp 1 (whose embedding add is embedding_grad_time's), NeMo's hook adds the word embedding with the rest.
Values below are worked out by hand from the shapes.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import load_yaml, script_module
from grid_helpers import HBM, grid8, one

from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster
from scalemodel.specs.workload import TransformerWorkload

# 4 layers, h = 1024, 8 heads of 128 (MHA), ungated f = 4096, untied 32,000-token embedding, no biases
TINY = TransformerWorkload(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000,
                           seq_len=2048, gated_mlp=False, biases=False, tied_embeddings=False, dropout=False)
NORMS = 4 * 2 * 1024 + 1024  # two norms a layer and the final norm: held whole by every TP rank
P = 4 * (1024 * 3072 + 1024 * 1024 + 2 * 1024 * 4096) + NORMS + 2 * 32_000 * 1024  # 116,655,104
EMB = 32_000 * 1024

HOOK_BYTES = 2 + 4 + 4  # read the bf16 gradient, read + write the fp32 main-gradient element


@pytest.fixture(scope="module")
def h100():  # type: ignore[no-untyped-def]
    return load_cluster("dgx-h100")


def grid(job: Any, **strategy: Any) -> Any:
    return grid_from_strategy(StrategySpec(**strategy), TrainingSpec(global_batch=16, micro_batch=2), 8, job)


def test_hook_adds_every_parameter_every_micro_batch(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    assert job.params == P
    for zero in ("0", "1"):  # MainParamsOptimizerWrapper (zero 0), DistributedFusedAdam (zero 1)
        off = dict(zero=zero, main_grad_hook=True, grad_accumulation_fusion=False)
        # pp 1: all of P, the embedding included (its 16-bit gradient goes through the same hook)
        assert one(layer_compute.grad_accumulation_time(job, grid8(job, **off))) == pytest.approx(
            P * HOOK_BYTES / HBM)
        # pp 2: the stages' mean
        assert one(layer_compute.grad_accumulation_time(job, grid(job, pp=2, **off))) == pytest.approx(
            P / 2 * HOOK_BYTES / HBM)
        # tp 2: sharded weights and vocabulary rows halve, the norms stay whole
        assert one(layer_compute.grad_accumulation_time(job, grid(job, tp=2, **off))) == pytest.approx(
            ((P - NORMS) / 2 + NORMS) * HOOK_BYTES / HBM)


def test_hook_differs_from_megatron_ddp_only_by_the_embedding(h100) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Core DDP at pp 1 leaves the embedding's add to embedding_grad_time; NeMo 1's hook does not."""
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    nemo = one(layer_compute.grad_accumulation_time(
        job, grid8(job, zero="1", main_grad_hook=True, grad_accumulation_fusion=False)))
    meg = one(layer_compute.grad_accumulation_time(
        job, grid8(job, zero="1", megatron_ddp=True, grad_accumulation_fusion=False)))
    assert nemo - meg == pytest.approx(EMB * HOOK_BYTES / HBM)


def test_fused_or_sharded_prices_nothing(h100) -> None:  # type: ignore[no-untyped-def]
    job = build_job(h100, TINY, TrainingSpec(grad_bytes_per_param=4))
    # fusion on (the 22.08 175B rows): the weight-gradient GEMMs write main_grad, no extra pass
    assert one(layer_compute.grad_accumulation_time(job, grid8(job, zero="1", main_grad_hook=True))) == 0.0
    # a plan may pin the hook and still search zero 3: its sharded wrapper runs no such hook
    arrays = grid8(job, zero="1", main_grad_hook=True, grad_accumulation_fusion=False)
    arrays3 = grid8(job, zero="3", grad_accumulation_fusion=False)
    arrays3.main_grad_hook[...] = True
    assert one(layer_compute.grad_accumulation_time(job, arrays)) > 0.0
    assert one(layer_compute.grad_accumulation_time(job, arrays3)) == 0.0


@pytest.mark.parametrize("strategy", [dict(zero="1", megatron_ddp=True), dict(zero="1", nanotron_trainer=True),
                                      dict(zero="3"), dict(zero="fsdp")])
def test_refused_beside_another_trainer_or_sharded_parameters(strategy) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="main_grad_hook"):
        StrategySpec(main_grad_hook=True, **strategy)


def test_gpt3_5b_row_by_hand() -> None:
    """nemolaunch22_a100_gpt3_5b_128: GPT-3 5B (24 layers, h 4096, 4h MLP, biases, LayerNorm, learned positions
    2048, tied 50,257-token embedding) at TP 1, PP 1: P = 24 (12 h^2 + 13 h) + (V + s) h + 2 h parameters, each
    10 bytes a micro-batch, at the A100 80GB's HBM rate (2.039 TB/s datasheet x its BabelStream fraction)."""
    h, L, V, s = 4096, 24, 50_257, 2048
    params = L * (12 * h * h + 13 * h) + (V + s) * h + 2 * h
    assert params == 5_047_365_632
    a100 = load_cluster("dgx-a100")
    gpt = TransformerWorkload(name="gpt3-5b", layers=L, hidden=h, heads=32, ffn_hidden=4 * h, vocab=V, seq_len=s,
                              position_embeddings=s, tied_embeddings=True)
    job = build_job(a100, gpt, TrainingSpec(grad_bytes_per_param=4, global_batch=2048, micro_batch=2))
    assert job.params == params
    assert job.memory_bandwidth == pytest.approx(2.039e12)
    rate = job.memory_bandwidth * job.memory_efficiency
    g = grid_from_strategy(StrategySpec(dp=128, zero="1", main_grad_hook=True, grad_accumulation_fusion=False),
                           TrainingSpec(global_batch=2048, micro_batch=2), 128, job)
    t = one(layer_compute.grad_accumulation_time(job, g))
    assert t == pytest.approx(params * 10 / rate)
    assert 0.025 < t < 0.03  # 50.5 GB a micro-batch: some 28 ms, about 5 % of a 0.8 s micro-batch


# ------------------------------------------------------------------ the rows and the validator's reading of them
@pytest.fixture(scope="module")
def vt():  # type: ignore[no-untyped-def]
    return script_module("validate_training")


@pytest.fixture(scope="module")
def rows() -> dict[str, Any]:
    cases = load_yaml(script_module("validate_training").NEW_CASES)
    return {c["id"]: c for c in cases if c["id"].startswith("nemolaunch")}


def test_every_nemolaunch_row_runs_the_hook_with_fp32_main_grads(rows, vt) -> None:  # type: ignore[no-untyped-def]
    assert len(rows) == 21
    for rid, case in rows.items():
        zero = "0" if rid.startswith("nemolaunch2206") else "1"
        opts = vt.megatron_options(case, zero, "bf16", 4.0)
        assert opts.get("main_grad_hook") is True, rid
        assert vt.grad_reduce_bytes(case, zero) == 4.0, rid  # fp32 main gradients on the wire
        # fusion: none in NeMo v1.9 / v1.10; v1.11 turns it off at pp 1 and keeps it at pp 8
        fused = rid.startswith("nemolaunch22_") and case["parallelism"]["pp"] > 1
        assert opts.get("grad_accumulation_fusion", True) is fused, rid


def test_no_other_source_records_an_unfused_apex_o2_path(vt) -> None:  # type: ignore[no-untyped-def]
    """The other rows on Apex DistributedFusedAdam (dgxc25, MLPerf v3.1-v4.1 GPT-3) run gradient-accumulation fusion
    (their configs' gradient_accumulation_fusion True on Megatron-Core / TE linears): the hook adds nothing there,
    so main_grad_hook is recorded on the nemolaunch rows only."""
    cases = load_yaml(vt.NEW_CASES)
    hooked = {c["id"] for c in cases if (c.get("framework") or {}).get("main_grad_hook")}
    assert hooked and all(i.startswith("nemolaunch") for i in hooked)
