"""Four loose ends of round 37 (ux38; closing37 "Final reading" and "Left out"), each against the contract of
test_hostile_inputs.py: a refusal exits 2 with one ``error:`` line naming where the field was written, what was wrong
and what is allowed; a plan ranks only strategies predict accepts.

1. plan with defer_embedding_wgrad (or first/last_chunk_layers) pinned searched pp 1 (flat schedules), where predict
   refuses the field: every ranked plan was one predict refuses.
2. The pp-1 / no-gradient-accumulation-fusion refusal of the deferred wgrad was written twice (the Megatron-LM reader
   and the strategy's check): one rule now, job.defer_embedding_wgrad_refusal, naming a launch's flags.
3. plan's fallback for a switch that needs a ZeRO stage matched the refusal's text: InputError.needs_zero now.
4. plan's warning for a launch's --use-megatron-fsdp advised --zero fsdp, an option plan does not have.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_hostile_inputs import accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import ZERO_UNSET_HINT

_8B = ("-m", "llama3-8b", "-c", "dgx-h100")
_70B = ("-m", "llama3-70b", "-c", "dgx-h100", "-n", "64")
_PP1 = "Megatron-Core raises \"Cannot defer embedding wgrad compute when pipeline model parallel is not used\""
_FUSION = "Megatron-Core raises \"Cannot defer embedding wgrad compute when gradient accumulation fusion is not used\""


# --- 2. one rule for the deferred wgrad: the reader maps flags to fields, the strategy's check refuses --------------

def test_the_reader_maps_the_flags_to_fields_and_refuses_nothing(tmp_path: Path) -> None:
    """The launch Megatron-Core refuses is read as the fields (the refusal is the strategy's, below): the reader's own
    copy of the rule is gone."""
    sf = read_strategy_file(str(megatron_launch(tmp_path, "--pipeline-model-parallel-size 1 "
                                                "--defer-embedding-wgrad-compute --no-gradient-accumulation-fusion")))
    assert (sf.strategy["defer_embedding_wgrad"], sf.strategy["pp"], sf.strategy["grad_accumulation_fusion"]) == (
        True, 1, False)
    assert sf.field_name("defer_embedding_wgrad") == "--defer-embedding-wgrad-compute"


@pytest.mark.parametrize(("flags", "said"), [
    ("", f"true at pp 1: {_PP1}"),  # no --pipeline-model-parallel-size: Megatron's default 1, the spec's
    ("--pipeline-model-parallel-size 1 ", f"true at pp 1 (--pipeline-model-parallel-size): {_PP1}"),
    ("--pipeline-model-parallel-size 2 --no-gradient-accumulation-fusion ",
     f"true with grad_accumulation_fusion false (--no-gradient-accumulation-fusion): {_FUSION}")])
def test_a_launch_is_refused_by_the_strategys_rule_at_its_flags(cli, tmp_path: Path, flags: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags + "--defer-embedding-wgrad-compute")
    line = refused(cli, "predict", *_70B, "--strategy", str(f), inputs=(f,),
                   match=f"error: --strategy: {f}: --defer-embedding-wgrad-compute: {said} (model_parallel_config.py")
    assert "..." not in line, line  # not cut: the whole rule and Megatron-Core's words


def test_the_set_route_gives_the_same_rule(cli) -> None:  # type: ignore[no-untyped-def]
    """The same refusal as the launch's, the other field named as written (--set here)."""
    line = refused(cli, "predict", *_70B, "--pp", "2", "--set", "strategy.defer_embedding_wgrad=true", "--set",
                   "strategy.grad_accumulation_fusion=false", match="error: --set strategy.defer_embedding_wgrad: ")
    assert (f"true with grad_accumulation_fusion false (--set strategy.grad_accumulation_fusion): {_FUSION} "
            "(model_parallel_config.py L550-553 at d98e8a64dd); defer_embedding_wgrad: true with "
            "grad_accumulation_fusion true (the default), or false") in line, line
    line = refused(cli, "predict", *_8B, "-n", "8", "--pp", "1", "--set", "strategy.defer_embedding_wgrad=true",
                   match="error: --set strategy.defer_embedding_wgrad: true at pp 1 (--pp): ")


def test_pp_on_the_command_line_over_the_launch_is_a_what_if(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--pp 2 over a launch at pp 1 prices the launch at pp 2, as --pp over any launch does (the reader refused it,
    judging the file alone): the step is the launch's at --pipeline-model-parallel-size 2."""
    at1 = megatron_launch(tmp_path, "--pipeline-model-parallel-size 1 --defer-embedding-wgrad-compute")
    over = accepted(cli, "predict", *_70B, "--strategy", str(at1), "--pp", "2")
    at2 = tmp_path / "at2.sh"
    at2.write_text(at1.read_text().replace("--pipeline-model-parallel-size 1", "--pipeline-model-parallel-size 2"))
    assert (over["strategy"]["pp"], over["strategy"]["defer_embedding_wgrad"]) == (2, True)
    assert over["step_time_s"] == accepted(cli, "predict", *_70B, "--strategy", str(at2))["step_time_s"]


# --- 1. plan with a pinned field that runs on some pipelines only ----------------------------------------------------
# Checked against plan with each field pinned (every ranked plan written as a strategy YAML and run through predict):
# job.py's _check_* refusals and validate_strategy's own. Ranked only strategies predict accepts, as before:
# stage_layers, first/last_stage_layers, offload_layers, shard_group, deepspeed_pipeline, nanotron_trainer, xla_gpu_lhs,
# compression topk (top-k sharded), layer_impl torchtitan, megatron_ddp, tp_comm_overlap, overlap_p2p_comm,
# pp_scatter_gather, and on mixtral sequence_parallel false (moe_sp), moe_flex_backend hybridep, moe_a2a_overlap,
# moe_shared_expert_overlap, moe_allgather_dispatcher. Ranked only refused strategies (now mended):
# defer_embedding_wgrad and first/last_chunk_layers; ranked none: etp on a dense model (mended below). Refused at
# the pin with the spec's words, as before: recompute_layers / recompute_method / recompute_modules without recompute
# pinned (StrategySpec's rules).

_PLAN = ("plan", *_8B, "-n", "16", "--global-batch", "32", "--top", "6")
_DEFER_NOTE = ("plan searches pp 2 or more only: the pinned defer_embedding_wgrad true cannot run at pp 1 (predict "
               "refuses it there)")


def _each_runs_in_predict(cli, tmp_path: Path, doc: dict) -> None:  # type: ignore[no-untyped-def]
    """Every ranked plan, its strategy written as a strategy YAML, is accepted by predict at the plan's step."""
    assert doc["ranked"]
    for i, p in enumerate(doc["ranked"]):
        f = tmp_path / f"plan{i}.yaml"
        f.write_text(yaml.safe_dump(p["strategy"]))
        r = cli("predict", *_8B, "-n", "16", "--global-batch", "32", "--strategy", str(f), "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["step_time_s"] == pytest.approx(p["step_time_s"], rel=1e-9)


def test_plan_with_defer_embedding_wgrad_pinned_searches_pp_2_or_more(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every plan ranked was at pp 1, each one predict refuses. Now the search keeps to pp >= 2 and says so; its
    ranking is that of the same search given --constraint pp>=2 by hand (a second route), which says nothing."""
    r = cli(*_PLAN, "--set", "strategy.defer_embedding_wgrad=true", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == [_DEFER_NOTE], doc["warnings"]
    assert all(p["strategy"]["pp"] >= 2 and p["strategy"]["defer_embedding_wgrad"] for p in doc["ranked"])
    _each_runs_in_predict(cli, tmp_path, doc)
    by_hand = cli(*_PLAN, "--set", "strategy.defer_embedding_wgrad=true", "--constraint", "pp>=2", "--json")
    assert by_hand.code == 0 and "plan searches" not in by_hand.err, by_hand.err  # nothing left out: nothing said
    assert [p["strategy"] for p in json.loads(by_hand.out)["ranked"]] == [p["strategy"] for p in doc["ranked"]]


def test_a_launchs_flag_pins_it_too(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Megatron-LM launch without --pipeline-model-parallel-size: plan searches pp, the flag pinned, so pp >= 2."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --micro-batch-size 1 --bf16 "
                 "--use-distributed-optimizer --overlap-grad-reduce --defer-embedding-wgrad-compute\n")
    r = cli(*_PLAN, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert _DEFER_NOTE in doc["warnings"], doc["warnings"]
    assert doc["ranked"] and all(p["strategy"]["pp"] >= 2 for p in doc["ranked"])


@pytest.mark.parametrize(("args", "match"), [
    (("--constraint", "pp=1"), "error: --constraint: no pp meets pp=1, pp>=2 together: pp is also constrained by the "
                               "pinned defer_embedding_wgrad (--set strategy.defer_embedding_wgrad)"),
    (("--set", "strategy.pp=1"), f"error: --set strategy.defer_embedding_wgrad: true at pp 1 (--set strategy.pp): "
                                 f"{_PP1}"),
    (("--set", "strategy.grad_accumulation_fusion=false"),
     "error: --set strategy.defer_embedding_wgrad: true with grad_accumulation_fusion false (--set "
     f"strategy.grad_accumulation_fusion): {_FUSION}")])
def test_plan_with_no_pipeline_left_for_the_pin_is_refused_naming_it(cli, args: tuple[str, ...], match: str) -> None:  # type: ignore[no-untyped-def]
    """pp 1 pinned (a constraint or --set) or the fusion off: no candidate predict would take. The --set pp=1 was
    refused as "--set: no pp meets pp=1, pp>=2 together", a constraint nobody wrote."""
    refused(cli, *_PLAN, "--set", "strategy.defer_embedding_wgrad=true", *args, match=match)


def test_plan_on_one_gpu_says_the_pin_left_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    """One GPU has no pipeline: plan's empty search (exit 0, as for --constraint pp=2 there) names the pin."""
    r = cli("plan", *_8B, "-n", "1", "--set", "strategy.defer_embedding_wgrad=true", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["ranked"] == [] and doc["warnings"] == [_DEFER_NOTE]
    assert "meets what was asked (--set strategy.defer_embedding_wgrad=true)" in doc["why"], doc["why"]


@pytest.mark.parametrize("name", ["first_chunk_layers", "last_chunk_layers"])
def test_plan_with_a_chunk_layer_count_pinned_searches_interleaved_schedules(cli, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    """They split an interleaved pipeline's model chunks (job._check_chunk_layers); plan ranked 1f1b plans, each one
    predict refuses ("is set but the schedule is 1f1b")."""
    r = cli(*_PLAN, "--set", f"strategy.{name}=2", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == [f"plan searches interleaved schedules only: the pinned {name} 2 cannot run under 1f1b, "
                               "gpipe or zb (a flat schedule) (predict refuses it there)"], doc["warnings"]
    assert all(p["strategy"]["schedule"].startswith("interleaved:") for p in doc["ranked"])
    _each_runs_in_predict(cli, tmp_path, doc)
    line = refused(cli, *_PLAN, "--set", f"strategy.{name}=2", "--set", "strategy.schedule=1f1b",
                   match=f"error: --set strategy.{name}: {name} is set but the schedule is 1f1b (pinned by --set "
                         "strategy.schedule)")
    assert line.endswith("an interleaved:V schedule (V >= 2), or first/last_stage_layers for 1f1b"), line



def test_plan_with_etp_pinned_on_a_dense_model_ranks_what_predict_prices(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Found by the same check: predict prices a dense model's etp as unset, with a warning; plan with it pinned
    ranked nothing (exit 0, every candidate expert_parallel_invalid). Now plan says predict's warning and ranks the
    plans of the same search without the pin, each one predict accepts at its step."""
    r = cli(*_PLAN, "--set", "strategy.etp=2", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == ["strategy.etp = 2 is not priced: the model has no MoE layers (expert tensor "
                               "parallelism applies to experts only)"], doc["warnings"]
    _each_runs_in_predict(cli, tmp_path, doc)
    plain = accepted(cli, *_PLAN)
    assert [p["step_time_s"] for p in doc["ranked"]] == [p["step_time_s"] for p in plain["ranked"]]
    said = cli("predict", *_8B, "-n", "16", "--set", "strategy.etp=2")
    assert said.code == 0 and doc["warnings"][0] in said.err, said.err  # predict's own words



@pytest.mark.parametrize(("args", "match"), [
    (("-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "32", "--set", "strategy.recompute=selective", "--set",
      "strategy.recompute_modules=titan_op"),
     "error: --set strategy.recompute_modules: titan_op prices torchtitan's op policy on a dense block"),
    (("-m", "llama3-8b", "-c", "aws-p5", "-n", "16", "--set", "strategy.offload_layers=2"),
     "error: --set strategy.offload_layers: offload_layers=2 needs the GPU-host link rate, which cluster aws-p5 "
     "does not give")])
def test_plan_refuses_a_pin_no_degree_lifts_as_predict_does(cli, args: tuple[str, ...], match: str) -> None:  # type: ignore[no-untyped-def]
    """job.PIN_CHECKS, the rules of the model or the cluster on a field: titan_op on an MoE model was ranked (each
    plan one predict refuses); offload_layers on a cluster without host_bandwidth left every candidate
    offload_invalid (exit 0). Both are predict's refusal now, at the pin; predict's own line is the same."""
    line = refused(cli, "plan", *args, "--top", "2", match=match)
    assert refused(cli, "predict", *args, match=match.split(": ", 2)[0] + ": ").endswith(line.split("; ", 1)[1])


# --- 3. the refusal that some ZeRO stage lifts carries a marker, not only its words ----------------------------------

_REWORDED = "zero stays 0 where nothing sets it: set zero as well"


@pytest.mark.parametrize(("fields", "marked"), [
    ({"fp8_param_gather": True}, True), ({"fsdp_per_param": True}, True), ({"offload_states": "optimizer"}, True),
    ({"fsdp_reshard_after_forward": False}, True), ({"bucket_fragments": True}, True),
    ({"fp8_param_gather": True, "zero": "3"}, False),  # zero given: nothing to give
    ({"megatron_ddp": True, "zero": "2"}, False), ({"bucket_fragments": True, "nanotron_trainer": True}, False)])
def test_the_spec_marks_the_refusals_that_ask_for_zero(fields: dict, marked: bool) -> None:
    """InputError.needs_zero is set exactly where the hint is written: a switch some stage runs, refused at zero 0."""
    with pytest.raises(InputError) as caught:
        StrategySpec(**fields)
    assert caught.value.needs_zero is marked
    assert caught.value.allowed.endswith(ZERO_UNSET_HINT) is marked, caught.value.allowed


def test_a_reworded_hint_keeps_every_fallback(cli, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The callers read the marker: with the hint reworded, plan still searches the stages that run a pinned switch
    (ux37's route; it matched the old words and refused "give zero too"), predict still names its options after the
    hint, and a strategy file without zero still takes --zero beside it (fuzz37)."""
    monkeypatch.setattr("scalemodel.specs.training.ZERO_UNSET_HINT", _REWORDED)
    fp8 = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--precision", "fp8")
    r = cli("plan", *fp8, "--top", "2", "--set", "strategy.fp8_param_gather=true", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["warnings"] == ["plan searches zero 1, 2, fsdp, hsdp only: the pinned fp8_param_gather "
                                             "true cannot run at zero 0 or 3 (predict refuses it there)"]
    line = refused(cli, "predict", *fp8, "--set", "strategy.fp8_param_gather=true",
                   match="error: --set strategy.fp8_param_gather: ")
    assert line.endswith(f"; {_REWORDED} (--zero or --set strategy.zero)"), line
    line = refused(cli, "plan", *fp8, "--set", "strategy.fsdp_per_param=true", "--constraint", "zero<=3",
                   match="error: --set strategy.fsdp_per_param: ")
    assert line.endswith(f"; {_REWORDED} (--set strategy.zero, or --constraint zero=VALUE)"), line
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  fp8_param_gather: true\n")
    assert accepted(cli, "predict", *fp8, "--strategy", str(f), "--zero", "1")["strategy"]["zero"] == "1"


# --- 4. plan's warning for a launch's --use-megatron-fsdp names plan's option ---------------------------------------

def test_plans_megatron_fsdp_warning_names_its_constraint(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The flag is not read (StrategyFile.zero_not_read): the warning advised "give --zero fsdp", which plan refuses
    as an unknown option. plan names --constraint zero=VALUE, and the advice runs: every plan at zero fsdp."""
    f = megatron_launch(tmp_path, "--use-megatron-fsdp")
    plan = ("plan", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "16", "--top", "2", "--strategy", str(f))
    r = cli(*plan, "--json")
    assert r.code == 0, r.err
    said = [w for w in json.loads(r.out)["warnings"] if "--use-megatron-fsdp" in w]
    assert said == [f"{f}: megatron settings not used: --use-megatron-fsdp (FSDP is not read from the flags: give "
                    "--constraint zero=fsdp, or --constraint zero=hsdp with strategy.shard_group, to price sharded "
                    "parameters)"], said
    assert "--zero" not in r.err, r.err
    advised = accepted(cli, *plan, "--constraint", "zero=fsdp")
    assert advised["ranked"] and {p["strategy"]["zero"] for p in advised["ranked"]} == {"fsdp"}
    # predict has --zero, and keeps it
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "16", "--strategy", str(f), "--json")
    assert r.code == 0 and "give --zero fsdp, or --zero hsdp with strategy.shard_group" in r.err, r.err
