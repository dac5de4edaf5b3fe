"""Mends of this session's own reading (round 16 follow-ups), each with the case that was wrong before."""

from __future__ import annotations

import pytest
from test_hostile_inputs import accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE70 = ["-c", "dgx-h100", "-m", "llama3-70b", "-n", "256"]


# A launch script with --recompute-granularity full and no --recompute-method / --recompute-num-layers was priced as
# full recompute of every layer; Megatron-Core's TransformerConfig raises for it (transformer_config.py L1908-1925 at
# d98e8a64dd: "recompute_method must be block or uniform", "recompute_num_layers must be between 1 and ...").
@pytest.mark.parametrize("flags, missing", [
    ("--recompute-granularity full", "--recompute-method and --recompute-num-layers"),
    ("--recompute-granularity full --recompute-method block", "--recompute-num-layers"),
    ("--recompute-granularity full --recompute-num-layers 4", "--recompute-method"),
])
def test_full_recompute_without_method_and_count_is_refused(cli, tmp_path, flags: str, missing: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *DENSE70, "--strategy", str(f), inputs=(f,),
            match=f"{f}: --recompute-granularity: --recompute-granularity full without {missing}")


def test_full_recompute_with_method_and_count_still_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
    assert accepted(cli, "predict", *DENSE70, "--strategy", str(f))["inputs"]["strategy"]["recompute"] == "full"


# A DeepSpeed config with tensor_parallel.autotp_size on an MoE model was priced under Megatron-Core's layer with its
# sequence parallelism resolved on (review16a): AutoTP shards a Hugging Face model's linear layers and runs the rest
# as eager PyTorch modules, all-reducing each row-parallel output; the reader now names the eager layer.
def test_deepspeed_autotp_prices_the_eager_layer_without_sp(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 2}}')
    r = cli("predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    strategy = json.loads(r.out)["strategy"]
    assert (strategy["tp"], strategy["layer_impl"], strategy["sequence_parallel"]) == (2, "eager", False)
    assert "sequence parallelism" not in r.err.lower(), r.err


# torchtitan's TP plan is sequence-parallel (pytorch/torchtitan@e7c0cae models/llama3/parallelize_llama.py apply_tp:
# SequenceParallel() norms, row-parallel outputs Shard(1); parallelism.enable_sequence_parallel, default true, in
# later releases); the TOML reader priced tp > 1 with SP off (fuzz16b's finding).
@pytest.mark.parametrize("extra, sp", [("", True), ("enable_sequence_parallel = true\n", True),
                                       ("enable_sequence_parallel = false\n", False)])
def test_torchtitan_tp_is_sequence_parallel(tmp_path, extra: str, sp: bool) -> None:
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "job.toml"
    f.write_text("[parallelism]\ntensor_parallel_degree = 4\n" + extra)
    assert read_strategy_file(f).strategy["sequence_parallel"] is sp


def test_torchtitan_sp_switch_at_tp_1_is_said(tmp_path) -> None:
    from scalemodel.specs.frameworks import read_strategy_file

    f = tmp_path / "job.toml"
    f.write_text("[parallelism]\nenable_sequence_parallel = true\n")
    sf = read_strategy_file(f)
    assert "sequence_parallel" not in sf.strategy
    assert any(u.startswith("parallelism.enable_sequence_parallel true (no effect") for u in sf.unused), sf.unused
