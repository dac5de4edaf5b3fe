"""Given first/last pipeline stage (and interleaved model-chunk) layer counts follow Megatron-Core's own rule or are
refused as bad input (job._check_edge_split).

Megatron-Core's TransformerConfig (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_config.py
L2294-2367, "Uneven PP"): the given edge stages take their layers, and "either ... middle pp stages and layers or none
of them" (L2340-2345), the middle stages an equal share (L2347-2353). Before round 24 an inconsistent split (1 + 1 of
12 layers at pp 2) was priced as an infeasible candidate whose step fell below its own compute floor by up to 19.6 %;
it is now an error on every path that takes the counts (--set, strategy file, scenario, Megatron launch flags, the
Python API). The rule is written out here independently of the code (:func:`_megatron_accepts`, from the lines
above), and every split it accepts is priced with a step at or above the compute floor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import compute_floor, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

MODEL = ("-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--tp", "1", "--set", "model.layers=12")


def _megatron_accepts(layers: int, stages: int, first: int | None, last: int | None, v: int = 1) -> bool:
    """Megatron-Core's uneven-PP check (transformer_config.py L2294-2353 at d98e8a64dd) for ``stages`` pipeline stages
    (or, for the interleaved chunks, pp x V chunks), restated: subtract each given edge and one stage for it; middle
    layers and middle stages both present or both absent; the middle stages an equal share; with ``v`` virtual
    stages per rank each given edge and each middle stage's layers divisible by v (L2305-2316, L2324-2335,
    L2355-2367). A negative rest with middle stages passes Megatron's modulo by 1, yet no stage holds negative layers:
    refused (rest > 0)."""
    rest, middle = layers, stages
    for edge in (first, last):
        if edge is not None:
            rest, middle = rest - edge, middle - 1
            if edge % v:
                return False
    if middle == 0:
        return rest == 0
    return rest > 0 and rest % middle == 0 and (rest // middle) % v == 0


def _job(layers: int = 12, micro_batch: int = 1):
    wl = load_workload("gpt-1.7b", [f"layers={layers}"])
    tr = TrainingSpec(global_batch=16 * micro_batch, micro_batch=micro_batch, seq_len=1024)
    return build_job(load_cluster("dgx-h100"), wl, tr), tr


# --- the refusals, on the command line ----------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "said"), [
    (("--pp", "2", "--set", "strategy.first_stage_layers=1", "--set", "strategy.last_stage_layers=1"),
     "first 1 + last 1 = 2 layers but the model has 12 and pp 2 has no stages between; first + last stage layers "
     "summing to the model's 12 layers"),
    (("--pp", "2", "--set", "strategy.first_stage_layers=5", "--set", "strategy.last_stage_layers=1"),
     "first 5 + last 1 = 6 layers but the model has 12"),
    (("--pp", "4", "--set", "strategy.first_stage_layers=5"),
     "first 5 of 12 layers leaves the 3 stages between 7 / 3 = 2.33333 each; first/last stage layers leaving the 3 "
     "stages between an equal share of at least 1 layer each"),
    (("--pp", "4", "--set", "strategy.first_stage_layers=6", "--set", "strategy.last_stage_layers=6"),
     "leaves the 2 stages between none"),
    (("--pp", "2", "--set", "strategy.first_stage_layers=13"), "leaves the 1 stage between none"),
    (("--pp", "1", "--set", "strategy.last_stage_layers=6"),
     "strategy.last_stage_layers: last_stage_layers with pp 1: no pipeline to split"),
    (("--pp", "2", "--set", "strategy.schedule=interleaved:2", "--set", "strategy.first_stage_layers=5"),
     "first 5 of 12 layers gives a stage of 5 layers, not a multiple of interleaved:2's 2 virtual stages"),
    (("--pp", "4", "--set", "strategy.schedule=interleaved:2", "--set", "strategy.first_stage_layers=2",
      "--set", "strategy.last_stage_layers=4"), "first 2 + last 4 of 12 layers gives a stage of 3 layers"),
    (("--pp", "2", "--set", "strategy.schedule=interleaved:2", "--set", "strategy.first_chunk_layers=2"),
     "first 2 of 12 layers leaves the 3 model chunks between 10 / 3 = 3.33333 each"),
    (("--pp", "2", "--set", "strategy.schedule=interleaved:3", "--set", "strategy.first_chunk_layers=1",
      "--set", "strategy.last_chunk_layers=1"), "leaves the 4 model chunks between 10 / 4 = 2.5 each"),
])
def test_inconsistent_split_is_refused(cli, args, said) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", *MODEL, *args)
    assert said in line, line


@pytest.mark.parametrize("args", [
    ("--pp", "2", "--set", "strategy.first_stage_layers=5", "--set", "strategy.last_stage_layers=7"),
    ("--pp", "2", "--set", "strategy.first_stage_layers=5"),
    ("--pp", "4", "--set", "strategy.first_stage_layers=4", "--set", "strategy.last_stage_layers=2"),
    # Megatron-Core accepts first_stage_layers with virtual stages (6 and the last stage's 6 divisible by 2): read,
    # and priced as before (infeasible: first/last_chunk_layers give an interleaved pipeline's edges)
    ("--pp", "2", "--set", "strategy.schedule=interleaved:2", "--set", "strategy.first_stage_layers=6"),
    ("--pp", "2", "--set", "strategy.schedule=interleaved:2", "--set", "strategy.first_chunk_layers=3",
     "--set", "strategy.last_chunk_layers=3", "--set", "training.global_batch=32"),
])
def test_consistent_split_still_runs(cli, args) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", *MODEL, *args)
    assert doc["step_time_s"] > 0


def test_strategy_file_refusal_names_its_field(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  pp: 2\n  first_stage_layers: 1\n  last_stage_layers: 1\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "model.layers=12",
                   "--strategy", str(f), inputs=(f,))
    assert "first_stage_layers" in line and "but the model has 12" in line, line


def test_megatron_launch_refusal_names_the_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--decoder-first/last-pipeline-num-layers 1 + 1 of llama3-8b's 32 layers at pp 2: Megatron-Core raises
    "Mismatch: 30 middle layers remaining but 0 middle PP stages available" (L2341-2345)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 32 --bf16 "
                 "--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 1 "
                 "--decoder-last-pipeline-num-layers 1\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "16", "--strategy", str(f), inputs=(f,))
    assert f"{f}: --decoder-first-pipeline-num-layers: first 1 + last 1 = 2 layers but the model has 32" in line, line


def test_python_api_refuses_too() -> None:
    job, tr = _job()
    with pytest.raises(InputError, match="no stages between"):
        grid_from_strategy(StrategySpec(pp=2, first_stage_layers=1, last_stage_layers=1), tr, 16, job)


# --- the rule, against Megatron-Core's restated ----------------------------------------------------------------------

@given(st.sampled_from((2, 3, 4, 6)), st.sampled_from((1, 1, 2, 3)), st.one_of(st.none(), st.integers(0, 14)),
       st.one_of(st.none(), st.integers(0, 14)))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_acceptance_is_megatrons_rule(pp: int, v: int, first: int | None, last: int | None) -> None:
    """The edge stages of 12 layers (the 1f1b schedule, or interleaved:V: Megatron's --decoder-first/last-pipeline-
    num-layers with virtual stages)."""
    assume(first is not None or last is not None)  # the balanced split: pipeline_ranks._layers_split's
    job, tr = _job()
    ok = _megatron_accepts(12, pp, first, last, v)
    spec = StrategySpec(pp=pp, first_stage_layers=first, last_stage_layers=last,
                        schedule="1f1b" if v == 1 else f"interleaved:{v}")
    try:
        grid_from_strategy(spec, tr, 16 * pp, job)
        taken = True
    except InputError:
        taken = False
    assert taken == ok, (pp, first, last)


@given(st.sampled_from((2, 3, 4)), st.sampled_from((2, 3)), st.one_of(st.none(), st.integers(0, 8)),
       st.one_of(st.none(), st.integers(0, 8)))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunk_acceptance_is_the_same_rule_over_the_chunks(pp: int, v: int, first: int | None,
                                                          last: int | None) -> None:
    assume(first is not None or last is not None)
    job, tr = _job(24)
    ok = _megatron_accepts(24, pp * v, first, last)
    spec = StrategySpec(pp=pp, schedule=f"interleaved:{v}", first_chunk_layers=first, last_chunk_layers=last)
    try:
        grid_from_strategy(spec, tr, 16 * pp, job)
        taken = True
    except InputError:
        taken = False
    assert taken == ok, (pp, v, first, last)


# --- physics: every accepted split's step is at or above its compute floor -------------------------------------------

@given(st.sampled_from((2, 3, 4)), st.integers(1, 12), st.one_of(st.none(), st.integers(1, 12)),
       st.sampled_from(("1f1b", "gpipe")), st.sampled_from((1, 2, 4)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_accepted_split_never_beats_its_compute_floor(pp: int, first: int, last: int | None, schedule: str,
                                                      mb: int) -> None:
    job, tr = _job(micro_batch=mb)
    spec = StrategySpec(pp=pp, first_stage_layers=first, last_stage_layers=last, schedule=schedule)
    try:
        grid = grid_from_strategy(spec, tr, 8 * pp, job)
    except InputError:
        assert not _megatron_accepts(12, pp, first, last)
        return
    res = evaluate(job, grid)
    floor = compute_floor(job, grid)
    assert np.all(np.isfinite(res.step_time)) and np.all(floor > 0)
    assert np.all(floor <= res.step_time * (1 + 1e-9)), (float(floor[0]), float(res.step_time[0]))
