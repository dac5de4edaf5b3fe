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
@pytest.mark.parametrize("flags", [["--algo", "ring"], ["--algo", "tree"]])
def test_trainer_keeps_what_nccl_chooses(cli, trainer: str, flags: list[str]) -> None:  # type: ignore[no-untyped-def]
    """NCCL_ALGO=Ring|Tree picks the algorithm under each."""
    accepted(cli, "predict", *DENSE, "--zero", "1", "--set", f"strategy.{trainer}=true", *flags)


def test_16_bit_gradient_wire_only_where_the_framework_casts(cli) -> None:  # type: ignore[no-untyped-def]
    """DeepSpeed casts the gradients to communication_data_type before its sync; Megatron-Core's DDP and nanotron
    reduce their buffer in its own dtype (an fp32 buffer was priced as cast to 16 bits)."""
    accepted(cli, "predict", *DENSE, "--zero", "1", "--set", "strategy.deepspeed_pipeline=true", "--compression",
             "bf16")
    for trainer in ("megatron_ddp", "nanotron_trainer"):
        refused(cli, "predict", *DENSE, "--zero", "1", "--set", f"strategy.{trainer}=true", "--compression", "fp16",
                match=f"error: --compression: fp16 with {trainer}: {TRAINERS[trainer]} reduces the gradients in "
                      "their own dtype")


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
        wires = 2 if trainer == "deepspeed_pipeline" else 1  # none, and fp16 where DeepSpeed casts
        assert out["search"]["communication_choices"] == 3 * wires * 2 * 6  # algorithm x wire x overlap x bucket
        for p in out["ranked"]:
            s = p["strategy"]
            assert s["compression"] in ("none", "fp16")[:wires] and s["dp_comm"] == "allreduce", s
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


# --- F: a Megatron-LM script's flag after the command ended ---------------------------------------------------------

def _strategy(cli, f: Path) -> dict:  # type: ignore[type-arg, no-untyped-def]
    return accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f))


def test_flag_after_the_command_ended_is_not_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Line 2 has no trailing backslash: bash ends the torchrun command there and runs line 3 as a command of its
    own ("--pipeline-model-parallel-size: command not found"); pp 4 was read and priced."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 \\\n  --micro-batch-size 1 --bf16\n"
                 "  --pipeline-model-parallel-size 4\n")
    out = _strategy(cli, f)
    assert out["strategy"]["tp"] == 2 and out["strategy"]["pp"] == 1, out["strategy"]
    assert any("--pipeline-model-parallel-size 4 (line 3: the launch command of line 1 ended before it, on a line "
               "without a trailing backslash: bash does not pass it)" in w for w in out["warnings"]), out["warnings"]


def test_arrays_comments_and_continuations_are_read_as_bash_reads_them(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Flags in a bash array (Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh form), a comment with a
    quote in it, and continuation lines after the command's first line are all passed."""
    f = tmp_path / "run.sh"
    f.write_text("#!/bin/bash\n# don't read this: --pipeline-model-parallel-size 8\nMODEL_ARGS=(\n"
                 "    --tensor-model-parallel-size 2   # tp\n    --micro-batch-size 1\n)\n"
                 "torchrun ${DIST[@]} pretrain_gpt.py \\\n    ${MODEL_ARGS[@]} \\\n"
                 "    --pipeline-model-parallel-size 2 \\\n"
                 "    --sequence-parallel\necho done\n")
    out = _strategy(cli, f)
    s = out["strategy"]
    assert (s["tp"], s["pp"], s["sequence_parallel"]) == (2, 2, True), s
    assert not any("bash does not pass it" in w for w in out["warnings"]), out["warnings"]


def test_a_bare_flag_list_has_no_command_to_end(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A .args file of flags, one a line, is no script: every line is read (argparse reads the whole list)."""
    f = tmp_path / "run.args"
    f.write_text("--tensor-model-parallel-size 2\n--pipeline-model-parallel-size 2\n--micro-batch-size 1\n")
    s = _strategy(cli, f)["strategy"]
    assert (s["tp"], s["pp"]) == (2, 2), s


# --- H: plan's explanation names the bucket that was priced ---------------------------------------------------------

NANO_PLAN = ["plan", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--set", "strategy.nanotron_trainer=true",
             "--set", "strategy.zero=1", "--set", "training.grad_bytes_per_param=4"]


def test_nanotron_zero1_fp32_plan_names_no_bucket(cli) -> None:  # type: ignore[no-untyped-def]
    """nanotron's ZeRO-1 with fp32 accumulation all-reduces its whole fp32 buffer in one call
    (dp_comm.nanotron_zero1_sync): the bucket sizes all price the same; a pinned 500 MB was explained as "bucket 500 MB"
    on every plan, without the warning predict gives."""
    out = accepted(cli, *NANO_PLAN)
    assert out["ranked"] and all(p["strategy"]["bucket_bytes"] is None and p["strategy"]["bucket_size"] is None
                                 for p in out["ranked"]), [p["strategy"]["bucket_bytes"] for p in out["ranked"]]
    assert "bucket" not in out["why"], out["why"]
    pinned = accepted(cli, *NANO_PLAN, "--set", "strategy.bucket_size=500MB")  # explained as "bucket 500 MB", unsaid
    assert all(p["strategy"]["bucket_bytes"] is None for p in pinned["ranked"]) and "bucket" not in pinned["why"]
    assert any(w.startswith("strategy.bucket_size = 5e+08 B is not priced: nanotron_trainer at zero 1")
               for w in pinned["warnings"]), pinned["warnings"]


def test_a_bucket_size_not_priced_is_not_named_priced(cli) -> None:  # type: ignore[no-untyped-def]
    """predict's strategy names what was priced, beside the warning: Megatron-Core's DDP without overlap runs one
    bucket per buffer whatever --ddp-bucket-size says; with overlap the size is priced and named."""
    base = [*DENSE, "--zero", "1", "--set", "strategy.megatron_ddp=true", "--set", "strategy.bucket_size=100MB"]
    assert accepted(cli, "predict", *base, "--set", "strategy.overlap=false")["strategy"]["bucket_bytes"] is None
    assert accepted(cli, "predict", *base)["strategy"]["bucket_bytes"] == 1e8
    nano = [*DENSE, "--zero", "1", "--set", "strategy.nanotron_trainer=true", "--set",
            "training.grad_bytes_per_param=4", "--set", "strategy.bucket_size=100MB"]
    assert accepted(cli, "predict", *nano)["strategy"]["bucket_bytes"] is None


# --- E: plan names the hybrid pattern's segments when they leave no split -------------------------------------------

def test_plan_names_the_segments_a_pp_constraint_misses(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two segments are two stages (or one, pp 1): pp 4 leaves no candidate, and the explanation said only that
    no split of 16 GPUs met --constraint pp=4."""
    f = tmp_path / "hy.yaml"
    f.write_text("kind: transformer\nname: hy\nlayers: 8\nhidden: 2048\nheads: 16\nvocab: 32000\nseq_len: 2048\n"
                 "hybrid: {pattern: '*-*-|*-*-'}\n")
    out = accepted(cli, "plan", "-c", "dgx-h100", "-m", str(f), "-n", "16", "--constraint", "pp=4")
    assert out["why"] == ("No strategy to evaluate: no split of 16 GPUs at global batch 16 meets what was asked "
                          "(--constraint pp=4): the model's hybrid pattern has 2 segments (split at '|'), which are "
                          "the pipeline stages (Megatron-LM runs pp x v = segments): pp is 1, 2 on 16 GPUs, and the "
                          "pp constraint allows 4."), out["why"]
    # a constraint the segments do not explain is said as before
    other = accepted(cli, "plan", "-c", "dgx-h100", "-m", str(f), "-n", "16", "--constraint", "tp=32")
    assert "segments" not in other["why"], other["why"]
