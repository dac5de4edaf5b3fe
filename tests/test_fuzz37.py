"""Hostile input, round 37 (fuzz37): what this round's fuzzing and its three named reader defects found. The CLI
contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong
and what is allowed, nothing on stdout, no input changed.

The corpus is scripts/fuzz37.py (fuzz36's in-process harness, plus a subprocess section for output paths). At
d9cde03c: 6,162 cases, 0 contract breaks: --json 638 (megatron 140, deepspeed 128, zero_hint 348, paths 22) + 1,454
(session 36's fields 955 in predict / memory / plan / scale / sensitivity / check / sweep / calibrate runs,
host_out_of_memory 350, option bounds 149) + 2,000 random combinations (seeds 37, 38); the tables (no --json)
966 + 1,104. Findings 1-3 below are the brief's named reader defects; 4 came from reading what the corpus accepted,
5 from fuzzing --install-completion by hand.

1. Megatron-LM's ``--use-torch-fsdp2`` was named as not read and the launch priced at zero 0 (replicated
   parameters) unless the command line gave --zero: it is PyTorch FSDP2 (get_model: DP = TorchFullyShardedDataParallel,
   fully_shard on every TransformerLayer; NVIDIA/Megatron-LM@d98e8a64dd megatron/training/training.py L2484-2486,
   megatron/core/distributed/torch_fully_sharded_data_parallel.py), now read as zero fsdp with fsdp_per_param, and
   ``--torch-fsdp2-no-reshard-after-forward`` as fsdp_reshard_after_forward false; the flags Megatron's validate_args
   refuses beside it (arguments.py L1031-1047) are refused.
2. A key DeepSpeed's offload sections have not (``offload_optimizer.pin_memmory``, ``offload_param.ratio``) passed
   without a word; DeepSpeedConfigModel forbids extras (deepspeedai/DeepSpeed@edaa7221 deepspeed/runtime/
   config_utils.py L110 ``extra="forbid"``; the fields: deepspeed/runtime/zero/offload_config.py L21-105): refused
   naming the section, the key and the keys allowed.
3. ``plan --strategy s.yaml`` (fp8_param_gather: true, no zero) is refused "give zero too": the rule is Megatron's
   (arguments.py L1095-1097 at d98e8a64dd: --fp8-param-gather "only supported with distributed optimizer, torch
   fsdp2, megatron fsdp"; the model's zero 1 / 2 is the distributed optimizer, fsdp / hsdp the FSDPs) and the message
   names the field and the values, but what it advised was refused: a file that does not write zero was validated
   alone, so --zero 1 or --set strategy.zero=1 beside it was refused with the same words (predict, memory, plan), and
   plan's --constraint zero=1 too. A scalemodel file that does not write zero is now judged with the command line's
   zero (as ux36 did for Megatron's unread FSDP flags), a one-stage --constraint zero gives plan its zero, and plan's
   hint names the constraint. A Megatron-LM launch gives its stage by its flags: --fp8-param-gather without
   --use-distributed-optimizer or an FSDP flag is refused in Megatron's words, naming the flags to add.
4. (corpus) Megatron-LM's --defer-embedding-wgrad-compute and --wgrad-deferral-limit were a "harmless prefix",
   dropped without a word since session 36 priced strategy.defer_embedding_wgrad: read, and refused where
   Megatron-Core raises (model_parallel_config.py L545-553 at d98e8a64dd: pp 1, --no-gradient-accumulation-fusion).
   --use-torch-fsdp2 with --overlap-param-gather is refused as Megatron refuses it (arguments.py L1024-1027).
5. (by hand) ``--install-completion`` appended to the shell's rc in place: a full disk left part of the script at
   its end, a syntax error in every new shell; and a HOME that does not exist was created, folders and all. The rc
   is now written atomically (report.output.write_file) and a missing HOME refused.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from test_hostile_inputs import accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

MEG = ("-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64")


# --- 1. Megatron-LM --use-torch-fsdp2 --------------------------------------------------------------------------------

def test_torch_fsdp2_prices_as_the_same_job_written_as_zero_fsdp(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The launch (tp 2, micro-batch 1, bf16, --use-torch-fsdp2) and the same job written on the command line as
    PyTorch FSDP2 (zero fsdp, fsdp_per_param; the gradients reduced in bf16, the parameters' dtype) price the same
    step and memory: two routes, one through the reader, one through the options."""
    f = megatron_launch(tmp_path, "--use-torch-fsdp2")
    read = accepted(cli, "predict", *MEG, "--strategy", str(f))
    written = accepted(cli, "predict", *MEG, "--tp", "2", "--zero", "fsdp", "--precision", "bf16", "--set",
                       "training.micro_batch=1", "--set", "strategy.fsdp_per_param=true")
    assert read["strategy"]["zero"] == "fsdp" and read["strategy"]["fsdp_per_param"] is True
    assert read["step_time_s"] == pytest.approx(written["step_time_s"], rel=1e-12)
    assert read["memory"] == written["memory"]
    # and it is not the zero-0 job it was priced as before: the states are sharded over the 64 / tp 2 = 32 DP ranks
    plain = accepted(cli, "predict", *MEG, "--strategy", str(megatron_launch(tmp_path, "")))
    assert plain["strategy"]["zero"] == "0" and plain["strategy"]["megatron_ddp"] is True
    assert read["memory"]["parts_bytes"]["optimizer"] == pytest.approx(
        plain["memory"]["parts_bytes"]["optimizer"] / 32, rel=1e-6)


def test_torch_fsdp2_without_reshard_reads_reshard_after_forward_false(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward --ddp-bucket-size 5")
    r = cli("predict", *MEG, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    assert '"fsdp_reshard_after_forward": false' in r.out
    assert "--ddp-bucket-size (Megatron-Core DDP's buckets" in r.err, r.err  # named as not read, not priced


@pytest.mark.parametrize(("flags", "said"), [
    ("--use-distributed-optimizer", "not supported with MCore's distributed optimizer"),
    ("--use-megatron-fsdp", "Cannot be used together with use_torch_fsdp2"),
    ("--pipeline-model-parallel-size 2", "not supported with pipeline parallelism"),
    ("--expert-model-parallel-size 4", "not supported with expert parallelism"),
    ("--overlap-grad-reduce --overlap-param-gather", "only supported with distributed optimizer, megatron fsdp"),
])
def test_torch_fsdp2_beside_a_flag_megatron_refuses_is_refused(cli, tmp_path: Path, flags: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, f"--use-torch-fsdp2 {flags}")
    line = refused(cli, "predict", *MEG, "--strategy", str(f), inputs=(f,), match="--use-torch-fsdp2: ")
    assert said in line and "arguments.py validate_args" in line and "..." not in line, line


def test_torch_fsdp2_with_fp16_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --use-torch-fsdp2 --fp16\n")
    refused(cli, "predict", *MEG, "--strategy", str(f), inputs=(f,), match="not supported with fp16 yet")


def test_the_no_reshard_switch_is_store_false_and_alone_is_named_as_not_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--use-torch-fsdp2 --torch-fsdp2-no-reshard-after-forward=true")
    line = refused(cli, "predict", *MEG, "--strategy", str(f), inputs=(f,),
                   match="--torch-fsdp2-no-reshard-after-forward: a switch takes no value")
    assert "(argparse store_false)" in line, line
    r = cli("predict", *MEG, "--strategy", str(megatron_launch(tmp_path, "--torch-fsdp2-no-reshard-after-forward")),
            "--json")
    assert r.code == 0 and "--torch-fsdp2-no-reshard-after-forward without --use-torch-fsdp2" in r.err, r.err


# --- 2. DeepSpeed offload sections forbid extra keys ----------------------------------------------------------------

#: every field of DeepSpeed's two offload models, typed out from offload_config.py at edaa7221 (not the reader's)
_DS_PARAM = ("device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory")
_DS_OPT = ("device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write", "fast_init", "ratio",
           "super_offload", "cpuadam_cores_perc")


def _ds(tmp_path: Path, **sections: dict) -> Path:  # type: ignore[type-arg]
    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                             "zero_optimization": {"stage": 3, **sections}}))
    return f


@pytest.mark.parametrize(("dev", "key", "fields"), [
    ("offload_optimizer", "pin_memmory", _DS_OPT), ("offload_optimizer", "pipeline", _DS_OPT),
    ("offload_optimizer", "max_in_cpu", _DS_OPT), ("offload_param", "ratio", _DS_PARAM),
    ("offload_param", "Device", _DS_PARAM), ("offload_param", "", _DS_PARAM)])
def test_an_offload_key_deepspeed_has_not_is_refused(cli, tmp_path: Path, dev: str, key: str,  # type: ignore[no-untyped-def]
                                                     fields: tuple[str, ...]) -> None:
    """``pipeline`` is set by the optimizer model's validator (``self.__dict__["pipeline"]``), not a field: extra;
    ``max_in_cpu`` belongs to offload_param only."""
    f = _ds(tmp_path, **{dev: {"device": "cpu", key: True}})
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--strategy", str(f),
                   inputs=(f,), match=f"zero_optimization.{dev}: unknown key {key!r}")
    assert 'extra="forbid"' in line and line.endswith(", ".join(fields)), line


def test_every_field_deepspeed_has_is_still_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    values = {"device": "cpu", "nvme_path": "/local_nvme", "buffer_count": 5, "buffer_size": 100000000,
              "max_in_cpu": 1000000000, "pin_memory": True, "pipeline_read": False, "pipeline_write": False,
              "fast_init": False, "ratio": 1.0, "super_offload": False, "cpuadam_cores_perc": 0.8}
    f = _ds(tmp_path, offload_param={k: values[k] for k in _DS_PARAM},
            offload_optimizer={k: values[k] for k in _DS_OPT})
    out = accepted(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--strategy", str(f))
    assert out["strategy"]["offload_states"] == "optimizer+params"


# --- 3. a file's switch that needs a ZeRO stage, the stage given on the command line --------------------------------

_FP8 = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--precision", "fp8")


def _needs_zero(tmp_path: Path) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  fp8_param_gather: true\n")
    return f


@pytest.mark.parametrize(("command", "how"), [("predict", "(--zero or --set strategy.zero)"),
                                              ("memory", "(--zero or --set strategy.zero)"),
                                              ("plan", "(--set strategy.zero, or --constraint zero=VALUE)")])
def test_a_file_switch_without_zero_is_refused_naming_the_field_values_and_how(cli, tmp_path: Path, command: str,  # type: ignore[no-untyped-def]
                                                                              how: str) -> None:
    """plan: where its constraints leave only stages that cannot run the switch (0 and 3 here); leaving some that
    can, it searches those (ux37, tests/test_ux37.py)."""
    f = _needs_zero(tmp_path)
    cannot = ("--constraint", "zero<=3", "--constraint", "zero!=1", "--constraint", "zero!=2")
    line = refused(cli, command, *_FP8, "--strategy", str(f), "--json", *(cannot if command == "plan" else ()),
                   inputs=(f,),
                   match=f"--strategy: {f}: strategy.fp8_param_gather: true needs a parameter all-gather")
    assert "true with zero 1, 2, fsdp or hsdp" in line and line.endswith(f"give zero too {how}"), line


@pytest.mark.parametrize("zero", [("--zero", "1"), ("--set", "strategy.zero=2"), ("--zero", "fsdp")])
def test_the_zero_the_hint_asks_for_is_taken_beside_the_file(cli, tmp_path: Path, zero: tuple[str, str]) -> None:  # type: ignore[no-untyped-def]
    """The same job through the file and through --set alone: one step time."""
    by_file = accepted(cli, "predict", *_FP8, "--strategy", str(_needs_zero(tmp_path)), *zero)
    by_set = accepted(cli, "predict", *_FP8, "--set", "strategy.fp8_param_gather=true", *zero)
    assert by_file["strategy"]["fp8_param_gather"] is True
    assert by_file["step_time_s"] == by_set["step_time_s"]


def test_a_stage_that_cannot_run_the_file_switch_is_still_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = _needs_zero(tmp_path)
    line = refused(cli, "predict", *_FP8, "--strategy", str(f), "--zero", "3", inputs=(f,),
                   match="error: --zero: --strategy: ")
    assert "(got zero '3')" in line, line
    line = refused(cli, "plan", *_FP8, "--strategy", str(f), "--constraint", "zero=3", inputs=(f,),
                   match="error: --constraint zero=3: --strategy: ")
    assert "(got zero '3')" in line, line


def test_plan_takes_a_one_stage_zero_constraint_beside_the_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    by_file = accepted(cli, "plan", *_FP8, "--top", "2", "--strategy", str(_needs_zero(tmp_path)), "--constraint",
                       "zero=1")
    by_set = accepted(cli, "plan", *_FP8, "--top", "2", "--set", "strategy.fp8_param_gather=true", "--set",
                      "strategy.zero=1")
    assert [(r["strategy"]["zero"], r["strategy"]["fp8_param_gather"]) for r in by_file["ranked"]] == [("1", True)] * 2
    assert [r["step_time_s"] for r in by_file["ranked"]] == [r["step_time_s"] for r in by_set["ranked"]]
    # a constraint that leaves several stages that run it: plan searches them (ux37; was refused "give zero too")
    both = accepted(cli, "plan", *_FP8, "--top", "2", "--strategy", str(_needs_zero(tmp_path)), "--constraint",
                    "zero<=2")
    assert {r["strategy"]["zero"] for r in both["ranked"]} <= {"1", "2"}


@pytest.mark.parametrize("command", ["predict", "plan"])
def test_a_megatron_launch_with_fp8_param_gather_alone_is_refused_as_megatron_does(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                                   command: str) -> None:
    f = megatron_launch(tmp_path, "--fp8-format hybrid --fp8-param-gather")
    line = refused(cli, command, *MEG, "--strategy", str(f), "--json", inputs=(f,),
                   match="--fp8-param-gather: given without --use-distributed-optimizer, --use-torch-fsdp2 or "
                         "--use-megatron-fsdp: Megatron-LM refuses the launch")
    assert "arguments.py validate_args L1095-1097 at d98e8a64dd)" in line and line.endswith(
        "--fp8-param-gather with --use-distributed-optimizer (zero 1) or --use-torch-fsdp2 (zero fsdp), or leave it "
        "out"), line
    for flag, zero in (("--use-distributed-optimizer", "1"), ("--use-torch-fsdp2", "fsdp")):
        out = accepted(cli, "predict", *MEG, "--strategy",
                       str(megatron_launch(tmp_path, f"--fp8-format hybrid --fp8-param-gather {flag}")))
        assert (out["strategy"]["zero"], out["strategy"]["fp8_param_gather"]) == (zero, True)


# --- 4. Megatron-LM --defer-embedding-wgrad-compute ------------------------------------------------------------------

_BIG = ("-m", "llama3-70b", "-c", "dgx-h100", "-n", "64")


def test_defer_embedding_wgrad_compute_is_read_as_the_set_field(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The flag in the launch and the field set on the command line over the launch without it: one step."""
    flagged = accepted(cli, "predict", *_BIG, "--strategy", str(megatron_launch(
        tmp_path, "--pipeline-model-parallel-size 2 --defer-embedding-wgrad-compute --wgrad-deferral-limit 1")))
    plain = megatron_launch(tmp_path, "--pipeline-model-parallel-size 2")
    by_set = accepted(cli, "predict", *_BIG, "--strategy", str(plain), "--set", "strategy.defer_embedding_wgrad=true",
                      "--set", "strategy.wgrad_deferral_limit=1")
    without = accepted(cli, "predict", *_BIG, "--strategy", str(plain))
    assert (flagged["strategy"]["defer_embedding_wgrad"], flagged["strategy"]["wgrad_deferral_limit"]) == (True, 1)
    assert flagged["step_time_s"] == by_set["step_time_s"] != without["step_time_s"]


@pytest.mark.parametrize(("flags", "said"), [
    ("--defer-embedding-wgrad-compute", "when pipeline model parallel is not used"),
    ("--pipeline-model-parallel-size 1 --defer-embedding-wgrad-compute", "when pipeline model parallel is not used"),
    ("--pipeline-model-parallel-size 2 --defer-embedding-wgrad-compute --no-gradient-accumulation-fusion",
     "when gradient accumulation fusion is not used")])
def test_defer_embedding_wgrad_compute_where_megatron_core_raises_is_refused(cli, tmp_path: Path, flags: str,  # type: ignore[no-untyped-def]
                                                                             said: str) -> None:
    f = megatron_launch(tmp_path, flags)
    line = refused(cli, "predict", *_BIG, "--strategy", str(f), inputs=(f,),
                   match="--defer-embedding-wgrad-compute: true ")
    assert said in line and "model_parallel_config.py" in line and "..." not in line, line


def test_a_wgrad_deferral_limit_alone_is_named_as_not_used(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--pipeline-model-parallel-size 2 --wgrad-deferral-limit 3")
    r = cli("predict", *_BIG, "--strategy", str(f), "--json")
    assert r.code == 0 and "--wgrad-deferral-limit without --defer-embedding-wgrad-compute" in r.err, r.err
    assert '"wgrad_deferral_limit": 0' in r.out


# --- 5. --install-completion ----------------------------------------------------------------------------------------

def test_install_completion_leaves_the_rc_whole_when_the_disk_is_full(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    rc = tmp_path / ".bashrc"
    rc.write_text("export KEEP=1\n")

    def full(fd: int) -> None:  # the data does not reach the disk: ENOSPC, as on a full file system
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(os, "fsync", full)
    line = refused(cli, "--install-completion", "bash", inputs=(rc,), match="error: --install-completion: ")
    assert "No space left on device" in line, line
    assert rc.read_text() == "export KEEP=1\n" and sorted(p.name for p in tmp_path.iterdir()) == [".bashrc"]
    monkeypatch.undo()
    monkeypatch.setenv("HOME", str(tmp_path))
    r = cli("--install-completion", "bash")
    assert r.code == 0, r.err
    text = rc.read_text()
    assert text.startswith("export KEEP=1\n") and text.count("_SCALEMODEL_COMPLETE") == 1


def test_install_completion_does_not_create_a_missing_home(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "no" / "such"
    monkeypatch.setenv("HOME", str(home))
    refused(cli, "--install-completion", "fish", match=f"cannot add the completion script to {home}/.config/fish/"
                                                       "completions/scalemodel.fish: HOME does not exist")
    assert not (tmp_path / "no").exists()
