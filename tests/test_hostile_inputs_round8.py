"""Hostile-input round 8: combinations of valid-looking options that together are nonsense, extreme but legal
magnitudes, and the --json of every command under them.

Each case is one finding (a verdict that differed between commands, a value or option accepted silently, a message
that named the wrong thing); the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]


# --- one bad combination, one verdict in every single-strategy command ------------------------------------

@pytest.mark.parametrize("flags, reason", [
    (["--pp", "64"], "layers do not split"),  # 24 layers over 64 stages
    (["--pp", "4", "--schedule", "interleaved:100"], "layers do not split"),
    (["--global-batch", "100"], "global batch not divisible"),  # dp 64
    (["--global-batch", "64", "--micro-batch", "4"], "global batch not divisible"),
    (["--tp", "64"], "heads not divisible"),  # the verdict memory already gave
])
def test_memory_gives_predicts_verdict(cli, flags: list[str], reason: str) -> None:  # type: ignore[no-untyped-def]
    """``memory --pp 64`` (24 layers) and ``memory --global-batch 100`` (dp 64) were refused with exit 2 while
    ``predict`` and ``sensitivity`` answered with the strategy marked infeasible, and memory itself answered
    ``--tp 64`` (heads not divisible) that way: one verdict per combination, the one predict gives."""
    pred = accepted(cli, "predict", *BASE, *flags)
    mem = accepted(cli, "memory", *BASE, *flags)
    sens = accepted(cli, "sensitivity", *BASE, *flags)
    assert pred["feasible"] is mem["feasible"] is sens["baseline"]["feasible"] is False
    assert reason in pred["infeasible_reason"] and mem["infeasible_reason"] == pred["infeasible_reason"]
    assert mem["per_gpu_bytes"]["total"] == pytest.approx(pred["memory"]["per_gpu_bytes"], rel=1e-9)


def test_memory_largest_micro_batch_when_dp_does_not_divide_the_batch(cli) -> None:  # type: ignore[no-untyped-def]
    """No micro-batch divides 16 sequences over dp 64: the largest micro-batch is the memory bound (predict prices
    m = 1 there), not 0 with "model states alone exceed the memory" (they are 41% of it)."""
    mem = accepted(cli, "memory", *BASE, "--global-batch", "16")
    free = accepted(cli, "memory", *BASE)
    assert mem["max_micro_batch"] == free["max_micro_batch"] >= 1


# --- one option, one range in every command ------------------------------------------------------------

@pytest.mark.parametrize("kappa", ["1e300", "inf", "1.7e308"])
@pytest.mark.parametrize("command", [["predict", *BASE, "--sync", "asp"], ["scale", "-c", "dgx-h100", "-m", "gpt-1.7b",
                                                                           "-n", "64,128", "--sync", "asp"],
                                     ["stragglers", "-n", "64"]])
def test_staleness_kappa_has_one_range(cli, command: list[str], kappa: str) -> None:  # type: ignore[no-untyped-def]
    """``stragglers --staleness-kappa`` took 0 .. 1e6, ``predict`` and ``scale`` any finite number: kappa 1e300 gave a
    statistical efficiency of 1e-300 and a time to train of 1.6e305 s, printed as a 300-digit count of days; inf
    was refused as "kappa: staleness sensitivity kappa must be finite and >= 0" (no option named, nothing allowed)."""
    refused(cli, *command, "--staleness-kappa", kappa, "--json",
            match="error: --staleness-kappa: --staleness-kappa must be a finite number from 0 to 1e+06, got ")


def test_staleness_kappa_in_range_still_reads(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, "--sync", "asp", "--staleness-kappa", "1e6")
    assert 0 < out["sync"]["statistical_efficiency"] < 1e-5


# --- parameters of sync, schedule and dp_comm: why they were refused -------------------------------------

@pytest.mark.parametrize("flags, match", [
    (["--sync", "ssp:1000000000"], "parameter '1000000000' in 'ssp:1000000000' has more than 9 digits; "),
    (["--sync", "hier:2:99999999999"], "parameter '99999999999' in 'hier:2:99999999999' has more than 9 digits"),
    (["--sync", "backup:-1"], "parameter '-1' in 'backup:-1' is negative"),
    (["--schedule", "interleaved:1000000000"], "virtual stages '1000000000' in schedule 'interleaved:1000000000' has "
                                               "more than 9 digits; use 1f1b, interleaved:V (V from 2 to 999999999)"),
    (["--dp-comm", "ps:1000000000"], "server count '1000000000' in 'ps:1000000000' has more than 9 digits; use "
                                     "allreduce or ps:K[:colocated|:dedicated] (K from 1 to 999999999 servers)"),
])
def test_long_or_negative_parameters_are_named_as_such(cli, flags: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """``--sync ssp:1000000000`` said "parameter '1000000000' ... is not an integer"; ``--schedule
    interleaved:1000000000`` said it "needs V >= 2"; ``--dp-comm ps:1000000000`` was an "unknown DP communication":
    none said that the count has one digit too many, nor what the largest is."""
    for command in ("predict", "sensitivity") + (("memory",) if flags[0] != "--dp-comm" else ()):
        refused(cli, command, *BASE, *flags, "--json", match=match)
    if flags[0] == "--sync":
        refused(cli, "plan", *BASE, "--sync-modes", flags[1], "--json", match=match.split(";")[0])


def test_nine_digit_parameters_still_read(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, "--sync", "ssp:999999999")
    assert out["strategy"]["sync"] == "ssp:999999999"


# --- the planner: what the command line pins is pinned, and an empty search says why ---------------------

@pytest.mark.parametrize("flags, key, value", [
    (["--tp", "8"], "tp", 8),
    (["--pp", "2"], "pp", 2),
    (["--zero", "0", "--recompute", "full"], "recompute", "full"),
    (["--micro-batch", "2"], "micro_batch", 2),
    (["--set", "strategy.tp=2"], "tp", 2),
    (["--set", "training.micro_batch=2"], "micro_batch", 2),
])
def test_scale_best_pins_the_strategy_flags(cli, flags: list[str], key: str, value: object) -> None:  # type: ignore[no-untyped-def]
    """``scale --best --tp 8`` (or --pp 2, --zero 0 --recompute full, --set strategy.tp=2) searched every strategy
    at every point and reported tp 2 and tp 4: the flags were dropped without a word (--tp only changed the first
    point's global batch). They are pinned as plan pins --set strategy.X."""
    out = accepted(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8,16", "--best", *flags)
    assert [p["strategy"][key] for p in out["points"]] == [value, value], [p["strategy"] for p in out["points"]]


def test_plan_pins_a_set_micro_batch(cli) -> None:  # type: ignore[no-untyped-def]
    """``plan --set training.micro_batch=4`` ranked micro-batch 1 first: the value was searched over, unsaid, while
    a --strategy file's micro-batch and every --set strategy.X are pinned."""
    out = accepted(cli, "plan", *BASE, "--set", "training.micro_batch=4")
    assert out["ranked"] and {p["strategy"]["micro_batch"] for p in out["ranked"]} == {4}


@pytest.mark.parametrize("texts, match", [
    (["tp=8", "tp=4"], "no tp meets tp=8, tp=4 together; "),
    (["tp<=2,tp>=4"], "no tp meets tp<=2, tp>=4 together; "),
    (["pp<1"], "no pp meets pp<1; "),
    (["micro_batch>2,micro_batch<3"], "no micro_batch meets micro_batch>2, micro_batch<3 together"),
])
def test_plan_constraints_no_value_meets_are_refused(cli, texts: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """``--constraint tp<=2,tp>=4`` ran and answered "No feasible strategy among 0 candidates (none enumerated)":
    a contradiction in what was typed, refused where it is read."""
    args = [a for t in texts for a in ("--constraint", t)]
    refused(cli, "plan", *BASE, *args, "--json", match="error: --constraint: " + match)


@pytest.mark.parametrize("args, said", [
    (["--constraint", "tp=3"], "--constraint tp=3"),  # no tp 3 split of 64 GPUs
    (["--set", "training.micro_batch=1000"], "--set training.micro_batch=1000"),  # global batch 64
    (["--set", "strategy.tp=128"], "--set strategy.tp=128"),
])
def test_plan_empty_search_names_what_was_asked(cli, args: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "plan", *BASE, *args)
    assert out["ranked"] == [] and out["why"] == (
        f"No strategy to evaluate: no split of 64 GPUs at global batch 64 meets what was asked ({said}).")


# --- strategy switches that the strategy around them leaves without effect --------------------------------

@pytest.mark.parametrize("flags, said", [
    (["--set", "strategy.overlap_param_gather=true", "--zero", "0"], "strategy.overlap_param_gather = true is not "
                                                                     "priced"),
    (["--set", "strategy.overlap_param_gather=true", "--zero", "1", "--no-overlap"], "zero is 1, overlap off"),
    (["--set", "strategy.tp_comm_overlap=true"], "strategy.tp_comm_overlap = true is not priced"),
    (["--set", "strategy.tp_comm_overlap=true", "--tp", "8"], "tp is 8 without sequence_parallel"),
])
def test_switches_without_effect_are_warned(cli, flags: list[str], said: str) -> None:  # type: ignore[no-untyped-def]
    """``overlap_param_gather`` with zero 0 and ``tp_comm_overlap`` with tp 1 or without sequence parallelism were
    accepted and priced as nothing (the step model prices them only with ZeRO-1/2 and overlap, and with tp > 1 and
    SP): Megatron-LM itself refuses both (arguments.py asserts --use-distributed-optimizer and
    --sequence-parallel)."""
    on = accepted(cli, "predict", *BASE, *flags)
    off = accepted(cli, "predict", *BASE, *flags[2:])
    assert on["step_time_s"] == off["step_time_s"]
    assert any(said in w for w in on["warnings"]), on["warnings"]


@pytest.mark.parametrize("flags", [
    ["--set", "strategy.overlap_param_gather=true", "--zero", "1"],
    ["--set", "strategy.tp_comm_overlap=true", "--tp", "8", "--sequence-parallel"],
])
def test_switches_with_effect_are_not_warned(cli, flags: list[str]) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "predict", *BASE, *flags)
    assert not any("not priced" in w for w in out["warnings"]), out["warnings"]


# --- generic (per-sample) workloads ------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--tp", "--pp", "--cp"])
def test_memory_gives_predicts_verdict_on_a_generic_workload_with_model_parallelism(cli, flag: str) -> None:  # type: ignore[no-untyped-def]
    """``memory -m resnet50 --tp 2`` was refused ("a generic workload supports data parallelism only", exit 2) while
    predict, sensitivity and scale answered with the strategy infeasible for the same reason."""
    args = ["-c", "dgx-h100", "-m", "resnet50", "-n", "64", flag, "2"]
    pred, mem = accepted(cli, "predict", *args), accepted(cli, "memory", *args)
    assert pred["feasible"] is mem["feasible"] is False
    assert mem["infeasible_reason"] == pred["infeasible_reason"] and "transformer" in mem["infeasible_reason"]
    assert mem["per_gpu_bytes"]["total"] == pred["memory"]["per_gpu_bytes"]


@pytest.mark.parametrize("command", ["predict", "memory", "sensitivity"])
def test_sequence_length_of_a_generic_workload_is_warned(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    """``-m resnet50 --seq-len 4096`` was accepted without a word and changed nothing: a generic workload is priced
    per sample."""
    args = [command, "-c", "dgx-h100", "-m", "resnet50", "-n", "64"]
    out = accepted(cli, *args, "--seq-len", "4096")
    assert any("sequence length 4,096 is not used: resnet50 is a generic workload" in w for w in out["warnings"])
    assert not accepted(cli, *args)["warnings"]


# --- plan: constraints that leave an axis empty were tracebacks ---------------------------------------------

@pytest.mark.parametrize("args, match", [
    (["--constraint", "zero<0"], "error: --constraint: no zero meets zero<0; "),
    (["--constraint", "zero=3,zero=1"], "error: --constraint: no zero meets zero=3, zero=1 together; "),
    (["--set", "strategy.zero=fsdp", "--constraint", "zero<=1"], "no zero meets zero<=1, zero=fsdp together"),
    (["--constraint", "sp=true,sp=false"], "no sequence_parallel meets sequence_parallel=true, "
                                           "sequence_parallel=false together"),
    (["--constraint", "sync=asp"], "error: --constraint sync: the sync constraint leaves none of the searched sync "
                                   "modes (bsp); "),
])
def test_plan_constraints_that_empty_an_axis_are_refused(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """``plan --constraint zero<0`` (or zero=3,zero=1, or a pinned zero fsdp under zero<=1) ended in "ValueError:
    cannot reshape array of size 0" and ``--constraint sync=asp`` without asp in --sync-modes in "zero-size array to
    reduction operation minimum": tracebacks from the search, for constraints no candidate can meet."""
    refused(cli, "plan", *BASE, *args, "--json", match=match)


def test_plan_selective_recompute_on_a_generic_workload_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", "-c", "dgx-h100", "-m", "resnet50", "-n", "64", "--constraint", "recompute=selective",
            "--json", match="the constraints on recompute leave no value this model can take")


def test_plan_with_asp_searched_meets_the_sync_constraint(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "plan", *BASE, "--constraint", "sync=asp", "--sync-modes", "bsp,asp")
    assert out["ranked"] and {p["strategy"]["sync"] for p in out["ranked"]} == {"asp"}


# --- DeepSpeed batch sizes that DeepSpeed refuses at every GPU count -------------------------------------

def test_deepspeed_batch_that_micro_x_steps_does_not_divide_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """train_batch_size 100 with micro 4 x 3 steps: DeepSpeed asserts train_batch_size = micro x steps x dp, which
    no data-parallel size meets; the steps were dropped without a word and predict priced a global batch of 100."""
    import json as _json

    f = tmp_path / "ds.json"
    f.write_text(_json.dumps({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 4,
                              "gradient_accumulation_steps": 3, "bf16": {"enabled": True}}))
    for command in ("predict", "memory", "plan"):
        refused(cli, command, *BASE, "--strategy", str(f), "--json", inputs=(f,),
                match=f"error: --strategy: {f}: train_batch_size: 100 is not train_micro_batch_size_per_gpu 4 x "
                      "gradient_accumulation_steps 3 x a data-parallel size; ")
    f.write_text(_json.dumps({"train_batch_size": 768, "train_micro_batch_size_per_gpu": 4,
                              "gradient_accumulation_steps": 3}))
    out = accepted(cli, "predict", *BASE, "--strategy", str(f))
    assert out["strategy"]["global_batch"] == 768 and out["feasible"]


# --- check names the scenario's fields, not scale's options ------------------------------------------------

@pytest.mark.parametrize("extra, gpus, match", [
    ("training: {global_batch: 100}\n", "[64, 128]", "training.global_batch: weak scaling: global batch 100 cannot be "
                                                     "split over dp 64"),
    ("strategy: {tp: 8, pp: 8}\n", "[64, 96]", "gpus: weak scaling grows the global batch 1 by 96/64"),
])
def test_check_errors_name_the_scenario_field(cli, tmp_path, extra: str, gpus: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``check`` of a scenario whose global batch does not split said "error: --global-batch: ..." (or "--gpus"):
    options check does not have; the value is the scenario file's."""
    f = tmp_path / "s.yaml"
    f.write_text(f"kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: {gpus}\n{extra}"
                 "assertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(f), "--json", inputs=(f,), match=f"error: {f}: {match}")


# --- a cluster larger than its network ---------------------------------------------------------------------

_TIERS = ("tiers:\n  - {name: nv, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8}\n"
          "  - {name: ib, span: 64, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9}\n")


@pytest.mark.parametrize("max_gpus, match", [
    ("96", "max_gpus: 96 GPUs is more than the outermost tier 'ib' spans (64): no tier connects them; max_gpus <= 64"),
    ("60", "max_gpus: 60 GPUs is not whole nodes of 8; a multiple of gpus_per_node (8)"),
])
def test_cluster_max_gpus_beyond_its_tiers_is_refused(cli, tmp_path, max_gpus: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``max_gpus: 96`` over an outermost tier of 64 GPUs was accepted, and ``predict -n 96`` or ``collective -n 96``
    priced the traffic between the two 64-GPU islands on that tier as if it spanned them (no tier joins them);
    the built-in catalog keeps max_gpus <= the outermost span and whole nodes (test_catalog), user files did not."""
    f = tmp_path / "c.yaml"
    f.write_text(f"kind: cluster\nname: c\naccelerator: h100-sxm\ngpus_per_node: 8\nmax_gpus: {max_gpus}\n{_TIERS}")
    for args in (["hardware", "validate", str(f)], ["predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "8", "--json"],
                 ["collective", "-c", str(f), "-n", "8", "--size", "1GiB", "--json"]):
        refused(cli, *args, inputs=(f,), match=f"{f}:5: {match}")
    refused(cli, "predict", *BASE, "--set", "cluster.max_gpus=20000", "--json",
            match="error: --set cluster.max_gpus: 20000 GPUs is more than the outermost tier 'ib-core' spans (16384)")


@pytest.mark.parametrize("factor", ["1e300", "1e7", "inf"])
def test_sensitivity_factor_has_a_finite_range(cli, factor: str) -> None:  # type: ignore[no-untyped-def]
    """``sensitivity --factor 1e300`` ended in "error: peak_flops: peak_flops must be finite and > 0" (an internal
    field, nothing allowed): the improved peak was infinite. ``--factor inf`` was said not to be "> 1"."""
    refused(cli, "sensitivity", *BASE, "--factor", factor, "--json",
            match=f"error: --factor: improvement factor {float(factor):g} is not a finite number > 1 and <= 1e+06; ")


def test_sensitivity_factor_of_a_million_still_answers(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "sensitivity", *BASE, "--factor", "1e6")
    assert out["factor"] == 1e6 and out["parameters"]
