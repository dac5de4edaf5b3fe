"""review17f: hostile Megatron-LM launch scripts against the bash-style parser (mend17b).

Each expectation is what bash passes to pretrain_gpt.py, worked by hand from the shell's rules (bash(1) QUOTING,
Comments: a '#' starts a comment only at a word's start; Word Splitting: an unquoted $NAME is split on blanks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.specs.frameworks import read_strategy_file


def _read(tmp_path: Path, text: str):
    p = tmp_path / "launch.sh"
    p.write_text(text)
    return read_strategy_file(str(p))


def test_hash_inside_a_word_is_not_a_comment(tmp_path: Path) -> None:
    # bash passes "run#3" whole; shlex(comments=True) cut the line at '#': tp 2 and the micro-batch were lost silently
    s = _read(tmp_path, "torchrun pretrain_gpt.py --wandb-exp-name run#3 --tensor-model-parallel-size 2 "
                        "--micro-batch-size 4\n")
    assert s.strategy["tp"] == 2
    assert s.training["micro_batch"] == 4


def test_hash_inside_a_word_in_a_bare_flag_list(tmp_path: Path) -> None:
    s = _read(tmp_path, "--tensorboard-dir /logs/exp#1 --pipeline-model-parallel-size 4\n")
    assert s.strategy["pp"] == 4


def test_comment_at_word_start_still_dropped(tmp_path: Path) -> None:
    s = _read(tmp_path, "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 # --pipeline-model-parallel-size 4\n")
    assert s.strategy["tp"] == 2 and "pp" not in s.strategy


def test_megatron_example_string_variable_of_flags(tmp_path: Path) -> None:
    # the style of Megatron-LM's examples/pretrain_gpt_distributed.sh: GPT_ARGS="..." then $GPT_ARGS (unquoted, so
    # bash word-splits it). Before: one word with blanks, every flag in it "not used", tp 1.
    text = ('GPT_ARGS="\n    --tensor-model-parallel-size 2 \\\n    --pipeline-model-parallel-size 4 \\\n'
            '    --micro-batch-size 4\n"\n\ntorchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\\n    $GPT_ARGS \\\n'
            '    --save $CKPT\n')
    s = _read(tmp_path, text)
    assert s.strategy["tp"] == 2 and s.strategy["pp"] == 4
    assert s.training["micro_batch"] == 4
    assert not any("GPT_ARGS" in u for u in s.unused)


def test_string_variable_braced_and_nested(tmp_path: Path) -> None:
    s = _read(tmp_path, 'A="--tensor-model-parallel-size 2"\nB="--pipeline-model-parallel-size 4"\nALL="$A ${B}"\n'
                        'torchrun pretrain_gpt.py $ALL\n')
    assert s.strategy["tp"] == 2 and s.strategy["pp"] == 4


def test_string_variable_no_word_expands_is_not_read(tmp_path: Path) -> None:
    # bash passes none of GPT_ARGS: tp stays unset, and the file says why
    s = _read(tmp_path, 'GPT_ARGS="--tensor-model-parallel-size 2"\ntorchrun pretrain_gpt.py --micro-batch-size 1\n')
    assert "tp" not in s.strategy
    assert any(u.startswith("GPT_ARGS=") and "expands" in u for u in s.unused)


def test_string_variable_order_is_where_it_is_expanded(tmp_path: Path) -> None:
    # argparse keeps the last: $OVR comes after the literal flag, so 4 wins although OVR is assigned first
    s = _read(tmp_path, 'OVR="--tensor-model-parallel-size 4"\n'
                        'torchrun pretrain_gpt.py --tensor-model-parallel-size 2 $OVR\n')
    assert s.strategy["tp"] == 4


def test_semicolon_after_the_count_is_not_part_of_it(tmp_path: Path) -> None:
    # bash: ';' ends the command, the count is "1". Before: refused as "expected a count, got '1;'"
    s = _read(tmp_path, "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1; echo done\n")
    assert s.training["micro_batch"] == 1 and s.strategy["tp"] == 2


def test_flags_of_a_command_after_and_and_are_not_the_launchs(tmp_path: Path) -> None:
    # bash passes "--pipeline-model-parallel-size 4" to echo, not to pretrain_gpt.py. Before: pp 4 priced silently
    s = _read(tmp_path, "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 "
                        "&& echo --pipeline-model-parallel-size 4\n")
    assert s.strategy["tp"] == 2 and "pp" not in s.strategy
    assert any("'&&'" in u and "--pipeline-model-parallel-size 4" in u for u in s.unused)


def test_operators_inside_a_substitution_or_a_redirect_do_not_end_the_launch(tmp_path: Path) -> None:
    s = _read(tmp_path, "cd /m && torchrun pretrain_gpt.py --data-path $(ls /d | head -1) "
                        "--tensor-model-parallel-size 2 --micro-batch-size 2 2>&1 | tee log.txt\n")
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 2
    assert s.unused == []


def test_blank_after_backslash_is_named_in_the_refusal(tmp_path: Path) -> None:
    import pytest

    from scalemodel.errors import InputError
    with pytest.raises(InputError, match="ends in a backslash and a blank"):
        _read(tmp_path, "torchrun pretrain_gpt.py \\ \n  --tensor-model-parallel-size 2 \\\n  --micro-batch-size 1\n")


# --- DeepSpeed PipelineEngine buckets: MEMORY_OPT_ALLREDUCE_SIZE, not reduce_bucket_size ---

def _ds_pipe(bucket_size: float | None, zero: int = 0, precision: str = "bf16", grad_bytes: float | None = None):
    from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
    from scalemodel.engine.job import build_job, grid_from_strategy
    kw = {} if grad_bytes is None else {"grad_bytes_per_param": grad_bytes}
    tr = training_spec(global_batch=64, micro_batch=1, precision=precision, **kw)
    job = build_job(cluster_spec("dgx-h100"), workload_spec("llama3-8b"), tr)
    st = strategy_spec(pp=2, deepspeed_pipeline=True, zero=zero, overlap=True,
                       **({} if bucket_size is None else {"bucket_size": bucket_size}))
    return job, grid_from_strategy(st, tr, 16, job)


def test_deepspeed_pipeline_zero0_buckets_are_5e8_elements_whatever_bucket_size() -> None:
    """deepspeed/runtime/pipe/engine.py _exec_reduce_grads: allreduce_gradients(bucket_size=MEMORY_OPT_ALLREDUCE_SIZE)
    / buffered_allreduce_fallback(elements_per_buffer=MEMORY_OPT_ALLREDUCE_SIZE), 500000000 elements, no config read.
    A 25 MB bucket_size priced 25 MB buckets; the step is the default's, and predict's strategy names no bucket."""
    import numpy as np

    from scalemodel.engine import dp_comm, step
    from scalemodel.engine.predict import result_at
    job, g = _ds_pipe(None)
    job_b, g_b = _ds_pipe(25e6)
    assert not bool(np.ravel(dp_comm.bucket_size_priced(job_b, g_b))[0])
    res, res_b = step.evaluate(job, g), step.evaluate(job_b, g_b)
    for k in res.breakdown:
        assert float(np.ravel(res_b.breakdown[k])[0]) == float(np.ravel(res.breakdown[k])[0]), k
    assert result_at(job_b, g_b, res_b, 0, sync="bsp").strategy["bucket_bytes"] is None


def test_deepspeed_pipeline_fp16_zero1_reads_reduce_bucket_size() -> None:
    """fp16 at ZeRO 1: allreduce_gradients goes to the ZeRO optimizer's reduce_gradients, which buckets by
    reduce_bucket_size: still priced."""
    import numpy as np

    from scalemodel.engine import dp_comm
    job_b, g_b = _ds_pipe(25e6, zero=1, precision="fp16")
    assert bool(np.ravel(dp_comm.bucket_size_priced(job_b, g_b))[0])


# --- --moe-permute-fusion absent from an MoE launch whose model comes from --model ---

@pytest.mark.parametrize("flags", ["--expert-model-parallel-size 8",
                                   "--expert-model-parallel-size 8 --moe-router-topk 2 --moe-ffn-hidden-size 1408"])
def test_moe_launch_without_permute_fusion_runs_unfused(tmp_path: Path, flags: str) -> None:
    """Megatron-Core's TransformerConfig.moe_permute_fusion defaults to False (transformer_config.py L941 at
    d98e8a64dd) and argparse sets it only with --moe-permute-fusion: these launches run the unfused permute. Before,
    neither an expert-parallel size nor a model --moe-* flag (read as a model flag, not an argument) marked the
    launch as MoE, and the strategy's default (fused) was priced."""
    s = _read(tmp_path, f"torchrun pretrain_gpt.py {flags}\n")
    assert s.strategy["moe_permute_fusion"] is False
    s = _read(tmp_path, f"torchrun pretrain_gpt.py {flags} --moe-permute-fusion\n")
    assert s.strategy["moe_permute_fusion"] is True


def test_dense_launch_sets_no_permute_fusion(tmp_path: Path) -> None:
    s = _read(tmp_path, "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --expert-model-parallel-size 1\n")
    assert "moe_permute_fusion" not in s.strategy


# --- bash arrays written on one line, and appends ---

@pytest.mark.parametrize("text", [
    'ARGS=(--tensor-model-parallel-size 2 --micro-batch-size 1)\ntorchrun pretrain_gpt.py "${ARGS[@]}"\n',
    'ARGS=("--tensor-model-parallel-size" "2" --save $(pwd) --micro-batch-size 1)\n'
    'torchrun pretrain_gpt.py "${ARGS[@]}"\n',
    'ARGS=(\n  --tensor-model-parallel-size 2\n)\nARGS+=(--micro-batch-size 1)\n'
    'torchrun pretrain_gpt.py "${ARGS[@]}"\n',
    'A="--tensor-model-parallel-size 2"\nA+=" --micro-batch-size 1"\ntorchrun pretrain_gpt.py $A\n',
])
def test_arrays_and_appends(tmp_path: Path, text: str) -> None:
    """bash passes tp 2 and micro-batch 1 in each (the array's parentheses are syntax; += appends). Before: the one-line
    array was refused as the count '1)', ARGS+=(...) and A+="..." lost their flags."""
    s = _read(tmp_path, text)
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 1


def test_the_launch_is_the_command_with_the_megatron_flags(tmp_path: Path) -> None:
    """A preprocessing step chained before the launch: bash passes tp 2 and micro-batch 1 to pretrain_gpt.py; the
    preprocessing script's flags are its own (said, not read)."""
    s = _read(tmp_path, "python tools/preprocess_data.py --input x.json --workers 8 && "
                        "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1\n")
    assert s.strategy["tp"] == 2 and s.training["micro_batch"] == 1
    assert any(u.startswith("python tools/preprocess_data.py") for u in s.unused)
    assert not any(u.startswith("--workers") for u in s.unused)


def test_trainer_refusal_names_the_compression_as_written() -> None:
    """bf16 parses to the fp16 kind (same 2-byte wire); the refusal named it "fp16" to a user who wrote bf16."""
    from scalemodel.specs.training import trainer_what_if_refusal
    got = trainer_what_if_refusal("megatron_ddp", 0, "allreduce", "bsp", "bf16", "auto")
    assert got is not None and got[0] == "compression" and got[1].startswith("bf16 with megatron_ddp")
    got = trainer_what_if_refusal("nanotron_trainer", 0, "allreduce", "bsp", "fp16", "auto")
    assert got is not None and got[1].startswith("fp16 with nanotron_trainer")


def test_plan_warns_of_a_pinned_bucket_the_pipeline_engine_does_not_read(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--top", "1", "--set",
            "strategy.deepspeed_pipeline=true", "--set", "strategy.zero=0", "--set", "strategy.bucket_size=25e6")
    assert r.code == 0, r.err
    assert "DeepSpeed's PipelineEngine all-reduces the gradients in buckets of MEMORY_OPT_ALLREDUCE_SIZE" in r.err
