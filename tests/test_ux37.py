"""Input accepted without a word although it meant nothing or could not run (ux37, from fuzz37's corpus): each
item's refusal or warning, and that the neighbouring valid input is still taken. The CLI contract is
test_hostile_inputs.py's: exit 2, one ``error:`` line naming where the field was written, what was wrong and what is
allowed, nothing on stdout, no input changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

_8B = ("-m", "llama3-8b", "-c", "dgx-h100")


# --- 1. defer_embedding_wgrad where Megatron-Core raises -------------------------------------------------------------

def test_defer_embedding_wgrad_at_pp_1_is_refused_from_set_and_from_a_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """NVIDIA/Megatron-LM@d98e8a64dd megatron/core/model_parallel_config.py L545-548 raises at pp 1; the field was
    accepted and priced nothing."""
    line = refused(cli, "predict", *_8B, "-n", "8", "--set", "strategy.defer_embedding_wgrad=true",
                   match="error: --set strategy.defer_embedding_wgrad: true at pp 1: ")
    assert "Cannot defer embedding wgrad compute when pipeline model parallel is not used" in line, line
    assert line.endswith("defer_embedding_wgrad: true with pp 2 or more; false (the default) at pp 1"), line
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 2\n  defer_embedding_wgrad: true\n")
    refused(cli, "predict", *_8B, "-n", "8", "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: strategy.defer_embedding_wgrad: true at pp 1")


def test_defer_embedding_wgrad_without_gradient_accumulation_fusion_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", *_8B, "-n", "16", "--pp", "2", "--set", "strategy.defer_embedding_wgrad=true",
                   "--set", "strategy.grad_accumulation_fusion=false", match="--set strategy.defer_embedding_wgrad: ")
    assert "when gradient accumulation fusion is not used" in line and "L550-553" in line, line


def test_defer_embedding_wgrad_at_pp_2_is_still_priced(cli) -> None:  # type: ignore[no-untyped-def]
    """The valid neighbour: pp 2 takes the switch, and it moves the step (the deferred GEMMs leave the last stage's
    backward: test_deferwgrad36 prices the drop by hand)."""
    on = accepted(cli, "predict", *_8B, "-n", "16", "--pp", "2", "--set", "strategy.defer_embedding_wgrad=true")
    off = accepted(cli, "predict", *_8B, "-n", "16", "--pp", "2")
    assert on["strategy"]["defer_embedding_wgrad"] is True and on["strategy"]["pp"] == 2
    assert on["step_time_s"] != off["step_time_s"]


# --- 2. wgrad_deferral_limit without defer_embedding_wgrad ------------------------------------------------------------

def test_a_wgrad_deferral_limit_without_the_switch_is_warned_and_prices_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    """A warning, not a refusal: Megatron-Core raises nothing for it (model_parallel_config.py checks the limit only
    with defer_embedding_wgrad_compute on) and reads it only under the switch, as the codebase warns for every field
    that qualifies one that is off (job._warn_unpriced_fields). The step is that of the job without the field."""
    r = cli("predict", *_8B, "-n", "16", "--pp", "2", "--set", "strategy.wgrad_deferral_limit=3", "--json")
    assert r.code == 0, r.err
    assert r.err.strip() == ("warning: strategy.wgrad_deferral_limit = 3 is not priced: it caps the micro-batches "
                             "whose output-layer weight-gradient GEMMs defer_embedding_wgrad defers, and "
                             "defer_embedding_wgrad is off"), r.err
    plain = accepted(cli, "predict", *_8B, "-n", "16", "--pp", "2")
    assert json.loads(r.out)["step_time_s"] == plain["step_time_s"]
    # with the switch on, no warning: the limit is priced
    on = cli("predict", *_8B, "-n", "16", "--pp", "2", "--set", "strategy.defer_embedding_wgrad=true", "--set",
             "strategy.wgrad_deferral_limit=3", "--json")
    assert on.code == 0 and "wgrad_deferral_limit" not in on.err, on.err


# --- 3. training.jax_release on a run no XLA compiles -----------------------------------------------------------------

_JAX_WARNING = ("warning: training.jax_release = 0.4.23 is not priced: it picks the XLA SPMD partitioner of an XLA "
                "program (layer_impl xla, or a TPU), and this run is megatron_te on hopper")


@pytest.mark.parametrize("command", ["predict", "plan"])
def test_jax_release_on_a_megatron_gpu_run_is_warned_and_prices_nothing(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    """The same treatment as item 2: no framework refuses a stated release; it priced nothing without a word. The
    step is that of the run without the field (predict), the ranking the same (plan)."""
    args = (command, *_8B, "-n", "16", "--tp", "2") if command == "predict" else (command, *_8B, "-n", "16", "--top",
                                                                                  "2")
    r = cli(*args, "--set", "training.jax_release=0.4.23", "--json")
    assert r.code == 0, r.err
    assert _JAX_WARNING in r.err.splitlines(), r.err
    plain = accepted(cli, *args)
    if command == "predict":
        assert json.loads(r.out)["step_time_s"] == plain["step_time_s"]
    else:
        assert [p["step_time_s"] for p in json.loads(r.out)["ranked"]] == [p["step_time_s"] for p in plain["ranked"]]


def test_jax_release_on_an_xla_layer_is_not_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """layer_impl xla on a GPU (MaxText) is an XLA program, whose partitioner the release picks: no warning."""
    r = cli("predict", *_8B, "-n", "16", "--tp", "2", "--set", "strategy.layer_impl=xla", "--set",
            "training.jax_release=0.4.23", "--json")
    assert r.code == 0 and "jax_release" not in r.err, r.err
    assert json.loads(r.out)["strategy"]["layer_impl"] == "xla"


# --- 4. plan with a pinned switch that needs a ZeRO stage, zero left to the search ------------------------------------

_FP8 = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--precision", "fp8")


def test_plan_searches_only_the_stages_that_run_the_pinned_switch(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """fp8_param_gather (Megatron: the distributed optimizer or an FSDP; arguments.py L1095-1097 at d98e8a64dd) in a
    file, zero not given: was refused "give zero too" though plan searches zero. Now the search keeps to zero 1, 2,
    fsdp and hsdp, says so, and its winner is the best of the four plans each pinned to one of those stages (the
    fuzz37 route, validated at that stage): a second route to the same answer."""
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  fp8_param_gather: true\n")
    r = cli("plan", *_FP8, "--top", "3", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == ["plan searches zero 1, 2, fsdp, hsdp only: the pinned fp8_param_gather true cannot "
                               "run at zero 0 or 3 (predict refuses it there)"], doc["warnings"]
    assert len(doc["ranked"]) == 3
    assert all(p["strategy"]["fp8_param_gather"] is True and p["strategy"]["zero"] in ("1", "2", "fsdp", "hsdp")
               for p in doc["ranked"])
    best = {}
    for zero in ("1", "2", "fsdp", "hsdp"):
        one = accepted(cli, "plan", *_FP8, "--top", "1", "--strategy", str(f), "--constraint", f"zero={zero}")
        best[zero] = one["ranked"][0]["step_time_s"]
    assert doc["ranked"][0]["step_time_s"] == min(best.values())
    assert doc["ranked"][0]["strategy"]["zero"] == min(best, key=lambda z: best[z])


def test_plan_names_the_stages_left_where_a_constraint_narrows_them(cli) -> None:  # type: ignore[no-untyped-def]
    """--constraint zero>=3 leaves 3, fsdp and hsdp; fsdp_reshard_after_forward false runs at all three and
    fsdp_per_param (FSDP2) at fsdp and hsdp only."""
    r = cli("plan", *_FP8, "--top", "2", "--constraint", "zero>=3", "--set", "strategy.fsdp_per_param=true", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == ["plan searches zero fsdp, hsdp only: the pinned fsdp_per_param true cannot run at "
                               "zero 3 (predict refuses it there)"]
    assert {p["strategy"]["zero"] for p in doc["ranked"]} <= {"fsdp", "hsdp"}
    r = cli("plan", *_FP8, "--top", "1", "--constraint", "zero>=3", "--set",
            "strategy.fsdp_reshard_after_forward=false", "--json")
    assert r.code == 0 and "plan searches" not in r.err, r.err  # nothing left out: nothing said


def test_plan_with_no_stage_left_that_runs_the_switch_is_still_refused(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "plan", *_FP8, "--set", "strategy.fsdp_per_param=true", "--constraint", "zero<=3",
                   match="error: --set strategy.fsdp_per_param: true needs PyTorch FSDP2: zero fsdp or hsdp")
    assert line.endswith("give zero too (--set strategy.zero, or --constraint zero=VALUE)"), line


# --- 5. plan's refusal names plan's own option ------------------------------------------------------------------------

def test_a_zero_constraint_over_a_megatron_ddp_launch_names_plans_option(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The launch runs Megatron-Core's DDP (no FSDP flag): --constraint zero=fsdp beside a switch that needs it is
    refused; the advice named "--zero fsdp", which plan does not have (plan --zero is refused as unknown)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --bf16\n")
    line = refused(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--constraint",
                   "zero=fsdp", "--set", "strategy.fsdp_per_param=true", inputs=(f,),
                   match=f"error: --constraint zero=fsdp: FSDP over the Megatron-LM launch {f}: ")
    assert "--use-megatron-fsdp in it with --constraint zero=fsdp, or --set strategy.megatron_ddp=false" in line, line
    assert "--zero" not in line, line
    # predict has --zero, and keeps it
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--zero",
                   "fsdp", inputs=(f,), match="error: --zero: FSDP over the Megatron-LM launch")
    assert "--use-megatron-fsdp in it with --zero fsdp" in line, line
