"""Open questions of hostile-input round 17, resolved (mend17b).

C. A framework trainer (megatron_ddp, deepspeed_pipeline, nanotron_trainer) with a data-parallel what-if its framework
   has no code for (a parameter server, an asynchronous / local / grouped sync, int8 or top-k gradients, an all-reduce
   algorithm NCCL does not implement, a dynamic work queue) was priced without a word; refused in predict, and left
   out of (or refused by) plan's search. What NCCL_ALGO or the framework's own flags choose stays.
D. ``hardware validate`` of a scenario skipped the strategy refusals that ``check`` makes before pricing.
F. A Megatron-LM script's flag after the command had ended (a line without a trailing backslash) was read.
H. Plan's explanation of a nanotron ZeRO-1 winner named a gradient bucket that was not priced.
E. Plan with a pp constraint that no split of a hybrid pattern's '|' segments meets said so without the segments.

Each case is one finding; the contract is test_hostile_inputs.py's (one line, exit 2, the field named).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import accepted, refused  # noqa: F401

DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]
TRAINERS = {"megatron_ddp": "Megatron-Core's DDP", "deepspeed_pipeline": "DeepSpeed's PipelineEngine",
            "nanotron_trainer": "nanotron's trainer"}


# --- C: framework trainers with what-if modes ----------------------------------------------------------------------

@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize("flags, where, what", [
    (["--dp-comm", "ps:2"], "--dp-comm", "has no parameter server"),
    (["--sync", "local:4"], "--sync", "runs synchronous data parallelism"),
    (["--sync", "asp"], "--sync", "runs synchronous data parallelism"),
    (["--sync", "hier:2"], "--sync", "runs synchronous data parallelism"),
    (["--compression", "int8"], "--compression", "no int8 or top-k codec"),
    (["--compression", "topk:0.01"], "--compression", "no int8 or top-k codec"),
    (["--algo", "rhd"], "--algo", "which has no rhd algorithm"),
    (["--algo", "hierarchical"], "--algo", "which has no hierarchical algorithm"),
    (["--set", "strategy.assignment=dynamic"], "--set strategy.assignment", "no shared queue"),
])
def test_trainer_refuses_what_its_framework_cannot_run(cli, trainer: str, flags: list[str], where: str,  # type: ignore[no-untyped-def]
                                                       what: str) -> None:
    line = refused(cli, "predict", *DENSE, "--zero", "1", "--set", f"strategy.{trainer}=true", *flags)
    assert line.startswith(f"error: {where}: ") and what in line and trainer in line, line
    assert TRAINERS[trainer] in line, line


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize("flags", [["--algo", "ring"], ["--algo", "tree"], ["--compression", "bf16"]])
def test_trainer_keeps_what_nccl_or_its_flags_choose(cli, trainer: str, flags: list[str]) -> None:  # type: ignore[no-untyped-def]
    """NCCL_ALGO=Ring|Tree picks the algorithm under each; a 16-bit gradient wire is each one's own on 16-bit
    gradients."""
    accepted(cli, "predict", *DENSE, "--zero", "1", "--set", f"strategy.{trainer}=true", *flags)


def test_megatron_partial_distributed_optimizer_is_hier_g_1_at_zero_1(cli) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Core's --num-distributed-optimizer-instances: reduce-scatter inside each instance, all-reduce of the
    shard across them, every step (param_and_grad_buffer.py start_grad_sync): hier:G:1 at zero 1, not at zero 0."""
    out = accepted(cli, "predict", *DENSE, "--zero", "1", "--set", "strategy.megatron_ddp=true", "--sync", "hier:8:1")
    assert out["strategy"]["sync"] == "hier:8:1"
    refused(cli, "predict", *DENSE, "--zero", "0", "--set", "strategy.megatron_ddp=true", "--sync", "hier:8:1",
            match="needs the distributed optimizer: zero 1 (got zero 0)")
    refused(cli, "predict", *DENSE, "--zero", "1", "--set", "strategy.nanotron_trainer=true", "--sync", "hier:8:1",
            match="hier:8:1 with nanotron_trainer")


def test_plan_with_a_trainer_searches_only_what_it_runs(cli) -> None:  # type: ignore[no-untyped-def]
    """--allow all opens top-k, int8, parameter servers, rhd and dynamic assignment: none is searched under a pinned
    trainer (without it the top plans are top-k / int8 ones here)."""
    args = ["plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--allow", "all", "--top", "20"]
    opened = accepted(cli, *args)
    assert any(p["strategy"]["compression"] != "none" for p in opened["ranked"])  # the search space is open
    for trainer in sorted(TRAINERS):
        out = accepted(cli, *args, "--set", f"strategy.{trainer}=true")
        assert out["search"]["communication_choices"] == 3 * 2 * 2 * 6  # auto/ring/tree x none/fp16 x overlap x bucket
        for p in out["ranked"]:
            s = p["strategy"]
            assert s["compression"] in ("none", "fp16") and s["dp_comm"] == "allreduce", s
            assert s["algorithm"] in ("auto", "ring", "tree") and s["assignment"] == "static", s


@pytest.mark.parametrize("trainer, modes, what", [
    ("megatron_ddp", "bsp,local:4", "local:4 with megatron_ddp"),
    ("nanotron_trainer", "asp", "asp with nanotron_trainer"),
    ("deepspeed_pipeline", "hier:2:1", "hier:2:1 with deepspeed_pipeline"),
    ("megatron_ddp", "hier:2:1", "needs zero 1; plan searches zero"),
])
def test_plan_refuses_sync_modes_the_trainer_cannot_run(cli, trainer: str, modes: str, what: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", f"strategy.{trainer}=true",
                   "--sync-modes", modes)
    assert line.startswith("error: --sync-modes: ") and what in line and f"--set strategy.{trainer}" in line, line


def test_plan_megatron_partial_distributed_optimizer(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "strategy.megatron_ddp=true",
                   "--set", "strategy.zero=1", "--sync-modes", "hier:2:1")
    assert out["ranked"] and all(p["strategy"]["zero"] == "1" for p in out["ranked"])


# --- D: hardware validate runs check's strategy refusals ------------------------------------------------------------

SCENARIO = """kind: scenario
name: t
cluster: dgx-h100
model: mixtral-8x7b
gpus: [64]
mode: strong
training: {{global_batch: 64, micro_batch: 1, precision: bf16}}
strategy: {{tp: 2, pp: 1, ep: 8{extra}}}
assertions: {{max_step_time: 100s}}
"""


@pytest.mark.parametrize("extra, what", [
    (", moe_allgather_dispatcher: true, moe_a2a_overlap: true",
     "strategy.moe_allgather_dispatcher: moe_a2a_overlap does not run with the allgather dispatcher"),
    (", sequence_parallel: false", "strategy.sequence_parallel: Megatron-Core refuses to train an MoE model"),
])
def test_validate_makes_checks_strategy_refusals(cli, tmp_path: Path, extra: str, what: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(extra=extra))
    by_check = refused(cli, "check", str(f), inputs=(f,))
    by_validate = refused(cli, "hardware", "validate", str(f), inputs=(f,))
    assert by_validate == by_check and by_validate.startswith(f"error: {f}: {what}"), (by_check, by_validate)


def test_validate_names_a_set_item(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO.format(extra=""))
    refused(cli, "hardware", "validate", str(f), "--set", "strategy.sequence_parallel=false", inputs=(f,),
            match="error: --set strategy.sequence_parallel: Megatron-Core refuses")
    r = cli("hardware", "validate", str(f))
    assert r.code == 0 and "valid scenario spec" in r.out, r.err
