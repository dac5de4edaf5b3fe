"""Uneven pipeline stages: Megatron-LM's first/last stage layer counts and the balanced split of a
layer count the pipeline degree does not divide. The step runs at the pace of its slowest stage;
the expected times are assembled by hand from the per-layer and logits costs of cost.compute."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import Infeasible, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _job(model: str, batch: int, **training):
    cl = load_cluster("dgx-h100")
    wl = load_workload(model)
    tr = TrainingSpec(global_batch=batch, micro_batch=1, **training)
    return build_job(cl, wl, tr), tr


def _per_layer_and_logits(job, tp: int):
    kw = dict(micro_batch=1.0, seq_len=job.seq_len, peak_flops=job.peak_flops,
              memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
              memory_efficiency=job.memory_efficiency, tp=tp, cp=1, elem_bytes=job.elem_bytes)
    layer = compute.layer_compute_time(job.shape, ep=1, sequence_parallel=False, recompute="none",
                                       flash_attention=True, attention_fwd=job.attention_fwd,
                                       attention_bwd=job.attention_bwd, **kw)  # the job's attention kernel
    logits = compute.logits_compute_time(job.shape, **kw)
    return float(layer.total[()]), float(logits.total[()])


def _run(job, tr, gpus: int, **strategy):
    st = StrategySpec(**strategy)
    return evaluate(job, grid_from_strategy(st, tr, gpus, job))


def test_llama3_405b_on_16_stages_balanced_split():
    # 126 layers on 16 stages: 14 stages of 8 and 2 of 7, the short ones last (the last stage also
    # runs the logits): the step runs at max(8 t_layer, 7 t_layer + t_logits) per micro-batch.
    job, tr = _job("llama3-405b", 64)
    res = _run(job, tr, 16, pp=16)
    assert bool(res.feasible[0]) or int(res.reason[0]) == Infeasible.OUT_OF_MEMORY
    t_layer, t_logits = _per_layer_and_logits(job, tp=1)
    m = 64
    assert float(res.breakdown["compute"][0]) == pytest.approx(m * max(8 * t_layer, 7 * t_layer + t_logits),
                                                               rel=1e-12)


def test_megatron_first_and_last_stage_layers():
    # Llama 3 405B (Dubey et al. 2024 §3.3.2): one layer fewer on the first and on the last stage,
    # 7 + 14 x 8 + 7 = 126; the middle stages of 8 layers set the pace unless the logits outweigh a layer.
    job, tr = _job("llama3-405b", 64)
    res = _run(job, tr, 16, pp=16, first_stage_layers=7, last_stage_layers=7)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    t_layer, t_logits = _per_layer_and_logits(job, tp=1)
    assert float(res.breakdown["compute"][0]) == pytest.approx(64 * max(8 * t_layer, 7 * t_layer + t_logits),
                                                               rel=1e-12)


def test_last_stage_without_layers_runs_only_the_logits():
    # llama2-7b's 32 layers on 5 stages with an empty last stage (a loss-only stage): 8 on each of
    # the other four, so the pace is max(8 t_layer, t_logits)
    job, tr = _job("llama2-7b", 16)
    t_layer, t_logits = _per_layer_and_logits(job, tp=1)
    res = _run(job, tr, 5, pp=5, last_stage_layers=0)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    assert float(res.breakdown["compute"][0]) == pytest.approx(16 * max(8 * t_layer, t_logits), rel=1e-12)


@pytest.mark.parametrize("first, last, pp", [(5, 6, 4), (40, None, 2), (None, 3, 1)])
def test_splits_that_do_not_work_are_refused(first, last, pp):
    # priced infeasible until round 24; refused as bad input since (Megatron-Core's rule:
    # tests/test_pipeline_split_rules.py)
    job, tr = _job("llama2-7b", 16)
    with pytest.raises(InputError, match="first|last"):
        _run(job, tr, pp, pp=pp, first_stage_layers=first, last_stage_layers=last)


def test_interleaving_still_needs_an_even_split():
    job, tr = _job("llama2-7b", 16)
    res = _run(job, tr, 4, pp=4, schedule="interleaved:3")  # 32 % 12 != 0
    assert int(res.reason[0]) == Infeasible.LAYERS_NOT_DIVISIBLE
    res = _run(job, tr, 4, pp=4, schedule="interleaved:2")
    assert int(res.reason[0]) != Infeasible.LAYERS_NOT_DIVISIBLE


def test_first_stage_memory_follows_its_layer_count():
    # A first stage with more layers than the balanced share holds more weights and activations.
    job, tr = _job("llama2-7b", 16)
    even = _run(job, tr, 4, pp=4)
    heavy = _run(job, tr, 4, pp=4, first_stage_layers=11, last_stage_layers=5)  # 11 + 8 + 8 + 5
    assert float(heavy.memory["weights"][0]) > float(even.memory["weights"][0])
    assert float(heavy.memory["activations"][0]) == pytest.approx(
        float(even.memory["activations"][0]) * 11 / 8, rel=0.02)
    assert np.all(heavy.step_time >= even.step_time)


def test_interleaving_that_does_not_divide_names_the_layers_and_the_v_that_would(cli) -> None:  # type: ignore[no-untyped-def]
    """`predict --pp 4 --schedule interleaved:3` on Llama 3 70B (80 layers) said only the generic reason, which lists
    every way a split can fail. The detail names this one: 80 is not a multiple of 4 x 3 = 12, and the v >= 2 with
    80 / (4 v) whole are 2, 4, 5, 10, 20 (the divisors of 20). Qwen3-235B's 94 layers at pp 4 have none (94 / 4 is
    not whole). A feasible strategy has no detail."""
    import json

    base = ("predict", "-c", "dgx-h100", "-m", "llama3-70b", "-n", "64", "--tp", "8", "--pp", "4", "--global-batch",
            "64", "--json")
    doc = json.loads(cli(*base, "--schedule", "interleaved:3").out)
    assert not doc["feasible"] and doc["infeasible_detail"].startswith(
        "80 layers are not a multiple of pp 4 x v 3 = 12 model chunks (v = 2, 4, 5, 10, 20 would divide)")
    assert json.loads(cli(*base, "--schedule", "interleaved:2").out)["infeasible_detail"] is None
    doc = json.loads(cli(*base, "--schedule", "interleaved:3", "--set", "model.layers=94").out)
    assert "94 layers are not a multiple of pp 4 x v 3 = 12 model chunks (no v >= 2 divides at pp 4)" in doc[
        "infeasible_detail"]
    out = " ".join(cli(*base[:-1], "--schedule", "interleaved:3").out.split())
    assert "here: 80 layers are not a multiple of pp 4 x v 3" in out
