"""strategy.stage_layers: a given decoder-layer count per pipeline stage (per virtual stage when interleaved), each rank
priced on its own layers (docs/model.md#stage-layers), read from Megatron-LM's --pipeline-model-parallel-layout
and computed for nanotron by its own cost-balance rule.

The expected values are independent of the split's code path: per-layer and logits times from cost.compute by hand,
the first/last_stage_layers path where it can express the same split (a different route through the step: three
classes of stages), the layout strings unrolled by hand, and nanotron's split as the reviewer derived it and the
Playbook's table confirms it per job (docs/model.md#nanotron)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalemodel.cost import compute
from scalemodel.engine import planner
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy, stage_split_code
from scalemodel.engine.predict import predict
from scalemodel.engine.step import Infeasible, compute_floor, dp_exposed_floor, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload, notices
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.stage_layers import megatron_layout_stages, nanotron_stage_layers


def _job(model: str = "llama2-7b", overrides: tuple[str, ...] = (), batch: int = 16):
    cl = load_cluster("dgx-h100")
    wl = load_workload(model, list(overrides))
    tr = TrainingSpec(global_batch=batch, micro_batch=1)
    return build_job(cl, wl, tr), tr


def _run(job, tr, gpus: int, **strategy):
    return evaluate(job, grid_from_strategy(StrategySpec(**strategy), tr, gpus, job))


def _layer_and_logits(job, tp: int = 1) -> tuple[float, float]:
    kw = dict(micro_batch=1.0, seq_len=job.seq_len, peak_flops=job.peak_flops,
              memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
              memory_efficiency=job.memory_efficiency, tp=tp, cp=1, elem_bytes=job.elem_bytes)
    layer = compute.layer_compute_time(job.shape, ep=1, sequence_parallel=False, recompute="none",
                                       flash_attention=True, attention_fwd=job.attention_fwd,
                                       attention_bwd=job.attention_bwd, **kw)
    logits = compute.logits_compute_time(job.shape, **kw)
    return float(layer.total[()]), float(logits.total[()])


# --- each rank its own layers: the step at the busiest rank --------------------------------------------------------

@pytest.mark.parametrize("split", [[3, 1], [1, 3], [2, 2], [0, 4], [4, 0]])
def test_compute_runs_at_the_busiest_rank(split):
    """4 layers on 2 stages: m micro-batches of the slower of rank 0 (its n_0 layers) and rank 1 (n_1 layers and the
    logits), each layer and the logits priced by cost.compute by hand."""
    job, tr = _job(overrides=("layers=4",), batch=8)
    res = _run(job, tr, 2, pp=2, stage_layers=split)
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    t_layer, t_logits = _layer_and_logits(job)
    want = 8 * max(split[0] * t_layer, split[1] * t_layer + t_logits)
    assert float(res.breakdown["compute"][0]) == pytest.approx(want, rel=1e-12)


def test_four_ranks_of_four_sizes():
    """[1, 3, 0, 4] of 8 layers: the busiest rank is the last (4 layers and the logits), whatever the middle ranks;
    [1, 5, 0, 2]: rank 1's 5 layers, unless 2 layers and the logits outweigh them."""
    job, tr = _job(overrides=("layers=8",), batch=8)
    t_layer, t_logits = _layer_and_logits(job)
    for split in ([1, 3, 0, 4], [1, 5, 0, 2]):
        res = _run(job, tr, 4, pp=4, stage_layers=split)
        want = 8 * max(max(split[:-1]) * t_layer, split[-1] * t_layer + t_logits)
        assert float(res.breakdown["compute"][0]) == pytest.approx(want, rel=1e-12), split


@pytest.mark.parametrize("zero", ["0", "1"])
@pytest.mark.parametrize("first, last, split", [(5, 9, [5, 9, 9, 9]), (None, 2, [10, 10, 10, 2]),
                                                (20, None, [20, 12]), (3, 1, None)])
def test_same_as_first_and_last_stage_layers(zero, first, last, split):
    """Where first/last_stage_layers express the same split (the other stages equal), every term of the step and
    the memory peak are those of that route (three classes of stages), the optimizer step too: both price the rank
    holding the most parameters on its own parameters (docs/model.md#stage-layers), counted here by hand."""
    model = ("layers=4",) if split is None else ()
    job, tr = _job(overrides=model, batch=16)
    pp = 2 if split is None else len(split)
    split = split or [3, 1]
    a = _run(job, tr, 2 * pp, pp=pp, zero=zero, first_stage_layers=first, last_stage_layers=last)
    b = _run(job, tr, 2 * pp, pp=pp, zero=zero, stage_layers=split)
    assert int(a.reason[0]) == int(b.reason[0])
    for k in a.breakdown:
        assert float(b.breakdown[k][0]) == pytest.approx(float(a.breakdown[k][0]), rel=1e-12, abs=1e-15), k
    for k in a.memory:
        assert float(b.memory[k][0]) == pytest.approx(float(a.memory[k][0]), rel=1e-12, abs=1e-6), k
    # the optimizer is memory-bound on the parameters it steps, those of the rank holding the most: Llama-2-7B's
    # layer 4 h^2 (32 kv heads) + 3 h f + 2 h (RMSNorms), the untied V h embedding on rank 0, the V h output layer
    # and the final norm h on the last; against the whole model's on one stage at the same dp (2)
    h, f, vocab = 4096, 11008, 32000
    layer = 4 * h * h + 3 * h * f + 2 * h
    ranks = [split[0] * layer + vocab * h] + [n * layer for n in split[1:-1]] + [split[-1] * layer + vocab * h + h]
    whole = sum(split) * layer + 2 * vocab * h + h
    c = _run(job, tr, 2, pp=1, zero=zero)
    assert float(b.breakdown["optimizer"][0]) == pytest.approx(
        float(c.breakdown["optimizer"][0]) * max(ranks) / whole, rel=1e-9)


@pytest.mark.parametrize("schedule, split", [("1f1b", [8, 8, 8, 8]), ("interleaved:2", [8, 8, 8, 8]),
                                             ("interleaved:2", [4] * 8)])
def test_the_even_split_given_is_the_balanced_split(schedule, split):
    """An even split given is priced as the balanced split to the bit (pp = len / V)."""
    job, tr = _job(batch=16)
    v = int(schedule.split(":")[1]) if ":" in schedule else 1
    pp = len(split) // v
    a = _run(job, tr, 2 * pp, pp=pp, zero="1", schedule=schedule)
    b = _run(job, tr, 2 * pp, pp=pp, zero="1", schedule=schedule, stage_layers=split)
    assert float(b.step_time[0]) == float(a.step_time[0])
    assert float(b.memory["total"][0]) == float(a.memory["total"][0])


def test_interleaved_chunks_of_their_own():
    """interleaved:2 at pp 2, [10, 6, 6, 10]: both ranks hold 16 layers, rank 0 as 10 then 6 (chunks 0 and 2), rank 1
    as 6 then 10: the compute is the even split's, the chunks differ (the pipeline fills with rank 0's 10-layer first
    chunk): a larger bubble, and rank 0 holds more of its larger first chunk in flight (a higher peak)."""
    job, tr = _job(batch=16)
    even = _run(job, tr, 4, pp=2, zero="1", schedule="interleaved:2")
    own = _run(job, tr, 4, pp=2, zero="1", schedule="interleaved:2", stage_layers=[10, 6, 6, 10])
    assert float(own.breakdown["compute"][0]) == pytest.approx(float(even.breakdown["compute"][0]), rel=1e-12)
    assert float(own.breakdown["bubble"][0]) > float(even.breakdown["bubble"][0])
    assert float(own.memory["total"][0]) > float(even.memory["total"][0])


def test_moe_model_each_rank_its_own_layers():
    """An MoE model (every layer the mean layer): [20, 12] of Mixtral's 32 layers at pp 2 prices rank 0's 20 layers
    (its EP traffic and compute) as first_stage_layers 20 does (the same route but the optimizer)."""
    job, tr = _job("mixtral-8x7b", batch=16)
    a = _run(job, tr, 16, pp=2, ep=8, zero="1", first_stage_layers=20)
    b = _run(job, tr, 16, pp=2, ep=8, zero="1", stage_layers=[20, 12])
    for k in ("compute", "ep_comm", "tp_comm", "bubble", "pp_comm"):
        assert float(b.breakdown[k][0]) == pytest.approx(float(a.breakdown[k][0]), rel=1e-12), k


# --- refusals ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy, words", [
    (dict(pp=2, stage_layers=[20, 13]), "the stages hold 33 layers"),
    (dict(pp=2, stage_layers=[16, 16, 0]), "3 counts for pp 2"),
    (dict(pp=2, schedule="interleaved:2", stage_layers=[16, 16]), "2 counts for pp 2 x 2 virtual stages"),
    (dict(pp=1, stage_layers=[32]), "no pipeline to split"),
    (dict(pp=2, stage_layers=[20, 12], first_stage_layers=20), "stage_layers and first_stage_layers are both set"),
])
def test_refused_with_what_is_allowed(strategy, words):
    job, tr = _job(batch=16)
    with pytest.raises(InputError) as e:
        grid_from_strategy(StrategySpec(**strategy), tr, 2 * strategy["pp"], job)
    assert words in str(e.value)
    assert e.value.allowed


def test_hybrid_pattern_refused():
    """A hybrid pattern's split is its '|' segments (Megatron-LM's validate_args refuses a layout beside them)."""
    job, tr = _job("nemotron-3-nano", batch=16)
    n = int(job.shape.layers)
    with pytest.raises(InputError, match="hybrid layer pattern"):
        grid_from_strategy(StrategySpec(pp=2, stage_layers=[n - 1, 1]), tr, 2, job)


def test_infeasible_where_the_planner_pp_does_not_fit():
    """A pinned split of 2 stages on a candidate of pp 4 is layers_not_divisible (the planner's rows of other pp)."""
    job, _tr = _job(batch=16)
    g = grid_from_arrays(gpus=8, dp=2, tp=1, pp=np.asarray([2, 4]), micro_batch=1, global_batch=16,
                         stage_split=stage_split_code([20, 12]))
    res = evaluate(job, g)
    assert int(res.reason[1]) == Infeasible.LAYERS_NOT_DIVISIBLE
    assert int(res.reason[0]) != Infeasible.LAYERS_NOT_DIVISIBLE


# --- plan and predict agree ---------------------------------------------------------------------------------------

def test_plan_keeps_the_split_and_agrees_with_predict():
    cl, wl = load_cluster("dgx-h100"), load_workload("llama2-7b")
    tr = TrainingSpec(global_batch=64)
    pinned = ("pp", "tp", "zero", "stage_layers")
    res = planner.plan(cl, wl, 16, tr, top=3, strategy=StrategySpec(pp=2, tp=1, zero="1", stage_layers=[20, 12]),
                       pinned=pinned)
    assert res.ranked
    keys = ("dp", "tp", "pp", "cp", "ep", "zero", "recompute", "sequence_parallel", "schedule", "layout",
            "stage_layers", "overlap", "algorithm")
    for p in res.ranked:
        s = p.strategy
        assert s["stage_layers"] == [20, 12]
        q = predict(cl, wl, 16, TrainingSpec(global_batch=64, micro_batch=s["micro_batch"]),
                    StrategySpec(**{k: s[k] for k in keys}, bucket_size=s["bucket_bytes"]))
        assert q.step_time_s == pytest.approx(p.step_time_s, rel=1e-9)


# --- physics ------------------------------------------------------------------------------------------------------

@st.composite
def _splits(draw):  # type: ignore[no-untyped-def]
    model = draw(st.sampled_from(("gpt-1.7b", "llama2-7b", "mixtral-8x7b")))
    job, _tr = _job(model, batch=16)
    pp = draw(st.sampled_from((2, 3, 4)))
    v = draw(st.sampled_from((1, 1, 2)))
    layers = int(job.shape.layers)
    cuts = sorted(draw(st.lists(st.integers(0, layers), min_size=pp * v - 1, max_size=pp * v - 1)))
    split = [b - a for a, b in zip([0, *cuts], [*cuts, layers], strict=True)]
    dp = draw(st.sampled_from((1, 2, 8)))
    ep = 8 if model == "mixtral-8x7b" and dp == 8 else 1
    arrays = dict(gpus=dp * pp, dp=dp, tp=1, pp=pp, ep=ep, micro_batch=1, global_batch=dp * draw(
        st.sampled_from((1, 4, 16))), zero=draw(st.sampled_from((0, 1, 3, 4))),
        recompute=draw(st.sampled_from((0, 1, 2))), schedule=2 if v > 1 else 0, virtual_stages=v,
        overlap=draw(st.booleans()), stage_split=stage_split_code(split))
    return job, arrays


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_splits())
def test_physics_floors_hold_for_any_split(case):  # type: ignore[no-untyped-def]
    """Any split: the step is no faster than its FLOPs at peak on every GPU, nor than its data-parallel traffic, nor
    than the compute floor of its busiest rank (step.compute_floor, the planner's bound); the planner's data-parallel
    floor (step.dp_exposed_floor) stays below the traffic the step exposes; the breakdown adds up."""
    job, arrays = case
    g = grid_from_arrays(**{k: np.asarray([v]) for k, v in arrays.items()})
    res = evaluate(job, g)
    step = float(res.step_time[0])
    assert step >= float(res.model_flops[0]) / (arrays["gpus"] * job.peak_flops) * (1 - 1e-12)
    assert step >= float(res.extras["dp_comm_total"][0]) * (1 - 1e-12)
    assert step >= float(compute_floor(job, g)[0]) * (1 - 1e-12)
    # the planner's floor under the exposed data-parallel traffic: the same rank's, below what the step exposes
    assert float(np.ravel(dp_exposed_floor(job, g))[0]) <= float(res.breakdown["dp_comm"][0]) * (1 + 1e-12)
    parts = sum(float(x[0]) for x in res.breakdown.values())
    assert abs(parts - step) <= 1e-12 * step
    assert all(float(x[0]) >= 0 and np.isfinite(float(x[0])) for x in res.breakdown.values())


# --- Megatron-LM's --pipeline-model-parallel-layout ---------------------------------------------------------------

@pytest.mark.parametrize("layout, pp, counts, v", [
    ("Ettt|tt|tt|ttL", 4, [3, 2, 2, 2], 1),
    ("Et*3|(tt|)*2,tL", 4, [3, 2, 2, 1], 1),                        # (tt|)*2 -> tt|tt|, then tL
    ("E|t*4|t*4|L", 4, [0, 4, 4, 0], 1),                            # empty first and last stages
    ("Et|(tt|)*6,tL", 4, [1, 2, 2, 2, 2, 2, 2, 1], 2),              # 8 virtual stages: interleaved:2
    ("Ett|tt|ttmL", 3, [2, 2, 2], 1),                               # MTP in the last stage
])
def test_layout_strings(layout, pp, counts, v):
    assert megatron_layout_stages(layout, pp) == (counts, v)


@pytest.mark.parametrize("layout, pp, words", [
    ("Et*3|(tt|)*29,m|L", 16, "outside the last"),                  # DeepSeek-V3's standalone MTP stage
    ("|Ett|ttL", 3, "outside the first"),
    ("Ettt|ttx|ttL", 3, "unknown layer letter 'x'"),
    ("Ettt|tt|ttL", 2, "3 stages for pipeline size 2"),
    ("Ettt|tt|tt", 3, "1 E and 0 L"),
    ("Ett|tm|tL", 3, "outside the last"),
    ("(t)*99999999|L", 2, "unrolls to more than"),
])
def test_layout_strings_refused(layout, pp, words):
    with pytest.raises(InputError) as e:
        megatron_layout_stages(layout, pp)
    assert words in str(e.value)


def test_megatron_launch_reads_the_layout(tmp_path: Path):
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --pipeline-model-parallel-size 4 "
                 "--pipeline-model-parallel-layout 'Et|(tt|)*6,tL'\n")
    notices.clear()
    sf = read_strategy_file(f)
    assert sf.strategy["stage_layers"] == [1, 2, 2, 2, 2, 2, 2, 1]
    assert sf.strategy["schedule"] == "interleaved:2"
    assert sf.field_name("stage_layers") == "--pipeline-model-parallel-layout"
    assert not any("layout" in u for u in sf.unused)


def test_megatron_layout_beside_virtual_stage_flags_refused(tmp_path: Path):
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                 "--pipeline-model-parallel-layout 'Ett|tt|tt|ttL'\n")
    with pytest.raises(InputError, match="num-virtual-stages-per-pipeline-rank"):
        read_strategy_file(f)


# --- nanotron's cost-balanced split ---------------------------------------------------------------------------------

#: the Playbook models (scripts/scaling_benchmarks.py @e24d2483 model_configs: layers, hidden, heads, intermediate;
#: vocab 131072) and the splits the reviewer derived and the benchmark table's Local Params confirm (docs/model.md)
NANOTRON = [
    ((16, 2048, 32, 8192), 2, [11, 5]),
    ((28, 3072, 24, 8192), 2, [16, 12]),
    ((32, 4096, 32, 14336), 2, [18, 14]),
    ((32, 4096, 32, 14336), 4, [9, 9, 8, 6]),
    ((80, 8192, 64, 28672), 4, [21, 20, 20, 19]),
    ((80, 8192, 64, 28672), 16, [6] + [5] * 13 + [6, 3]),
]


@pytest.mark.parametrize("dims, pp, want", NANOTRON)
def test_nanotron_rule(dims, pp, want):
    assert nanotron_stage_layers(*dims, 131072, pp) == want


def test_nanotron_rule_at_pp_32():
    """80B at pp 32: 3 and 2 layers by turns (the cumulative cost crossing each 1/32 of the total), 1 on the last rank
    (the lm_head, 1.1 layers' cost, fills it)."""
    got = nanotron_stage_layers(80, 8192, 64, 28672, 131072, 32)
    assert sum(got) == 80 and got[-1] == 1 and set(got[:-1]) == {2, 3}


def test_nanotron_threshold_is_strict():
    """1.34B at pp 2: 10 layers reach half the total cost exactly (10 x 67,108,864 = (16 x 67,108,864 + 131072 x
    2048) / 2), and build_model moves on only past it (``>``): rank 0 takes the 11th layer too."""
    layer = 4 * 2048 * 2048 + 3 * 8192 * 2048
    assert 10 * layer * 2 == 16 * layer + 131072 * 2048
    assert nanotron_stage_layers(16, 2048, 32, 8192, 131072, 2) == [11, 5]


# --- the pipeline over every rank's own time: against a step-by-step simulation of 1F1B ---------------------------

def test_pipelined_time_against_the_simulation():
    """[1, 5, 0, 2] of 8 layers at pp 4 (four stages of four sizes, an empty one among them): the step's pipelined
    part (m + bubble) t_mb is Megatron-Core's 1F1B program simulated step by step (tests/test_pipeline_exchanges.py
    ``megatron_simulate``, blocking batched exchanges) on each rank's own forward and backward compute (the engine's
    stage of that rank's layers less its pipeline traffic, the embedding on rank 0, the logits on the last) and one
    boundary's exchange, exactly since rdv40 (before, the exchanges folded into each rank's time as its compute,
    within 3.5 % of the graph without them); t_mb is the busiest rank's."""
    from scalemodel.cost.placement import parallel_groups
    from scalemodel.engine.step import _end_rank, _stage
    from tests.test_pipeline_exchanges import megatron_simulate

    job, tr = _job(overrides=("layers=8",), batch=16)
    split = [1, 5, 0, 2]
    g = grid_from_strategy(StrategySpec(pp=4, stage_layers=split), tr, 4, job)
    res = evaluate(job, g)
    m, p = int(res.microbatches[0]), 4
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp)
    stages = [_stage(job, g, groups, np.asarray([float(n)]), r == p - 1, embedding=r == 0)
              for r, n in enumerate(split)]
    f, b = [], []
    for s in stages:
        work = float(np.ravel(s.time - s.mp["pp"])[0])
        total = float(np.ravel(s.compute["total"])[0])
        share = float(np.ravel(s.compute["forward"])[0]) / total if total > 0 else 1 / 3
        f.append(work * share)
        b.append(work * (1.0 - share))
    c = float(np.ravel(_end_rank(stages[0], first=True).mp["pp"])[0])
    assert c == pytest.approx(float(np.ravel(stages[1].mp["pp"])[0]) / 2.0, rel=1e-12) and c > 0.0
    t_mb = float(res.extras["microbatch_time"][0])
    ranks = [_end_rank(stages[0], first=True), *stages[1:-1], _end_rank(stages[-1])]
    assert t_mb == pytest.approx(max(float(np.ravel(s.time)[0]) for s in ranks), rel=1e-12)
    sim = megatron_simulate(p, m, f, b, c)
    pipelined = (m + float(res.extras["bubble_microbatches"][0])) * t_mb
    assert pipelined == pytest.approx(sim, rel=1e-9)


@pytest.mark.parametrize("model, strategy, pinned, words", [
    ("nemotron-3-nano", dict(stage_layers=[1, 1]), ("stage_layers",), "hybrid layer pattern"),
    ("llama2-7b", dict(stage_layers=[20, 13]), ("stage_layers",), "the stages hold 33 layers"),
    ("llama2-7b", dict(stage_layers=[20, 12], first_stage_layers=20), ("stage_layers", "first_stage_layers"),
     "stage_layers and first_stage_layers are both set"),
])
def test_plan_refuses_what_predict_refuses(model, strategy, pinned, words):
    cl, wl = load_cluster("dgx-h100"), load_workload(model)
    with pytest.raises(InputError) as e:
        planner.plan(cl, wl, 16, TrainingSpec(global_batch=64), top=1, strategy=StrategySpec(**strategy),
                     pinned=pinned)
    assert words in str(e.value) and "stage_layers" in e.value.where


# --- review18a: the reader against validate_layer_layout (NVIDIA/Megatron-LM@d98e8a64dd
# megatron/core/transformer/pipeline_parallel_layer_layout.py lines 86-149) -----------------------------------------

@pytest.mark.parametrize("layout, pp", [
    ("tEt|ttL", 2),          # flatten_layout[0] is a decoder layer: "The first layer must be embedding"
    ("Ett|tLt", 2),          # flatten_layout[-1] is a decoder layer: "The last layer must be loss"
    ("Et|tt|tmLt", 3),       # the loss before the last decoder layer (and after the MTP layer)
])
def test_layout_embedding_first_and_loss_last(layout, pp):
    """Megatron asserts the first layer of the layout (in layer-id order: the string's) the embedding and the last
    the loss; these layouts put E in the first stage and L in the last, which the reader took as enough."""
    with pytest.raises(InputError) as e:
        megatron_layout_stages(layout, pp)
    assert "embedding first and the loss last" in str(e.value)


def _launch(tmp_path: Path, flags: str) -> Path:
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 {flags}\n")
    return f


def test_layout_of_one_stage_at_pp_1(tmp_path: Path):
    """A layout of one stage at pipeline size 1 (Megatron: 1 stage % 1 == 0, no virtual stages) is every layer on the
    one rank: no split to give (strategy.stage_layers needs pp >= 2, so the reader's [4] was refused with 'no
    pipeline to split'), the launch predicted as without the flag."""
    sf = read_strategy_file(_launch(tmp_path, "--pipeline-model-parallel-layout 'Et*4L'"))
    assert "stage_layers" not in sf.strategy and "schedule" not in sf.strategy
    job, tr = _job(overrides=("layers=4",), batch=8)
    g = grid_from_strategy(StrategySpec(**sf.strategy), tr, 1, job)
    assert int(np.asarray(g.stage_split).ravel()[0]) == -1


@pytest.mark.parametrize("flags, words", [
    ("--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Ett|tL'", "3 decoder layers (t) but "
                                                                                   "--num-layers is 4"),
    ("--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Ett|ttmL'", "1 MTP layers (m) but "
                                                                                     "--mtp-num-layers is not given"),
    ("--pipeline-model-parallel-size 2 --mtp-num-layers 2 --pipeline-model-parallel-layout 'Ett|ttmL'",
     "1 MTP layers (m) but --mtp-num-layers is 2"),
    ("--pipeline-model-parallel-size 2 --mtp-num-layers=1 --pipeline-model-parallel-layout 'Ett|ttL'",
     "0 MTP layers (m) but --mtp-num-layers is 1"),
])
def test_layout_counts_against_the_launch(tmp_path: Path, flags, words):
    """validate_layer_layout asserts the t letters --num-layers and the m letters --mtp-num-layers (none without
    it: 'mtp_num_layers is None and count == 0'); the reader took any counts."""
    with pytest.raises(InputError) as e:
        read_strategy_file(_launch(tmp_path, flags))
    assert words in str(e.value)
    assert e.value.allowed


def test_layout_counts_that_agree_are_read(tmp_path: Path):
    sf = read_strategy_file(_launch(tmp_path, "--pipeline-model-parallel-size 2 --mtp-num-layers 1 "
                                              "--pipeline-model-parallel-layout 'Et|tttmL'"))
    assert sf.strategy["stage_layers"] == [1, 3]


# --- review18a: --recompute-num-layers N recomputes the first N layers of each model chunk --------------------------

def _full_recompute_layer(job) -> tuple[float, float, float, float]:
    """(forward, backward, recomputed forward, logits forward + backward) of one layer under full recompute, by
    cost.compute (the setting of _layer_and_logits)."""
    kw = dict(micro_batch=1.0, seq_len=job.seq_len, peak_flops=job.peak_flops,
              memory_bandwidth=job.memory_bandwidth, gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim,
              memory_efficiency=job.memory_efficiency, tp=1, cp=1, elem_bytes=job.elem_bytes)
    layer = compute.layer_compute_time(job.shape, ep=1, sequence_parallel=False, recompute="full",
                                       flash_attention=True, attention_fwd=job.attention_fwd,
                                       attention_bwd=job.attention_bwd, **kw)
    logits = compute.logits_compute_time(job.shape, **kw)
    return (float(layer.forward[()]), float(layer.backward[()]), float(layer.recompute[()]),
            float(logits.total[()]))


def test_unequal_chunks_recompute_n_layers_of_each():
    """[1, 1, 3, 3] of 8 layers at pp 2 x interleaved:2: each rank holds a chunk of 1 layer and one of 3 (virtual
    stages r and p + r). Megatron's block method recomputes the first N = 2 layers of each chunk's TransformerBlock
    (transformer_block.py _checkpointed_forward): min(2, 1) + min(2, 3) = 3 layers a micro-batch, where min(N V, n)
    = min(4, 4) priced 4. The busiest rank is the last (its 4 layers and the logits): m = 8 micro-batches of
    4 (f + b) + 3 r + logits."""
    job, tr = _job(overrides=("layers=8",), batch=8)
    f, b, r, logits = _full_recompute_layer(job)
    res = _run(job, tr, 2, pp=2, schedule="interleaved:2", recompute="full", recompute_layers=2,
               stage_layers=[1, 1, 3, 3])
    assert int(res.reason[0]) in (0, Infeasible.OUT_OF_MEMORY)
    assert float(res.breakdown["compute"][0]) == pytest.approx(8 * (4 * (f + b) + 3 * r + logits), rel=1e-12)


def test_one_chunk_in_the_bubble_recomputes_n_layers():
    """The balanced interleaved pipeline of 8 layers at pp 2 x 2: chunks of 2 layers. The last rank (the logits) sets
    the pace, T = m W_last + chunk 0's forward and backward (pipeline.interleaved_uneven_time at p 2), so the bubble
    is one chunk's time (its layers and 1 / V of its send/recvs). With N = 1 the chunk recomputes 1 layer, with N = 2
    both: the bubbles differ by one recomputed layer's forward r (they were equal: the chunk was priced with
    min(N V, 2) = 2 recomputed layers either way)."""
    job, tr = _job(overrides=("layers=8",), batch=8)
    _f, _b, r, _logits = _full_recompute_layer(job)
    bubble = {n: float(_run(job, tr, 2, pp=2, schedule="interleaved:2", recompute="full",
                            recompute_layers=n).breakdown["bubble"][0]) for n in (1, 2)}
    assert bubble[2] - bubble[1] == pytest.approx(r, rel=1e-9)
