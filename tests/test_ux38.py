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

from pathlib import Path

import pytest
from test_hostile_inputs import accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.specs.frameworks import read_strategy_file

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
