"""The framework readers mark the defaults they fill (specs.strategy_file.StrategyFile.default), and the engine reads
the mark (errors.Origin.is_default), not the text of a field's recorded origin.

Each expected value below is the framework's own default, read by hand from its source at the commit named beside
it (the same commit the reader cites in StrategyFile.defaults):

* Megatron-LM @d98e8a64dd, megatron/core/transformer/transformer_config.py: L891 ``moe_token_dispatcher_type:
  Literal['allgather', 'alltoall', 'flex'] = "allgather"``; L941 ``moe_permute_fusion: bool = False``; L771
  ``moe_router_padding_for_quantization: Optional[bool] = False`` (so TEGroupedMLP pads fp8 tokens itself);
  megatron/training/arguments.py L3121 ``--overlap-grad-reduce`` ``action='store_true'`` (False unless given);
  validate_args L1204-1217: ``--bf16`` without ``--grad-reduce-in-bf16`` sets accumulate_allreduce_grads_in_fp32
  (4-byte gradients on the wire); megatron/training/training.py get_model L2484-2490: ``DP = DDP`` unless an FSDP
  switch.
* DeepSpeed @edaa7221, deepspeed/runtime/engine.py L1405-1416 ``communication_data_type``: ``torch.float32``
  without fp16 or bf16.
* torchtitan @e7c0cae, torchtitan/config_manager.py: L227 ``mixed_precision_reduce = "float32"``; L233
  ``compile: bool = False``; L270 ``data_parallel_shard_degree: int = -1``; L282 ``fsdp_reshard_after_forward =
  "default"`` (parallelize_llama.py L349-367: no reshard under PP); L437 ``mode = "selective"``, L440
  ``selective_ac_option = "2"`` (every 2nd block fully recomputed: priced as full); @c4b409af^
  torchtitan/config/configs.py L230 ``expert_tensor_parallel_degree: int = 1``; @b5bcd76c66
  torchtitan/config/configs.py L169 ``enable_sequence_parallel: bool = True``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.commands.common import strategy_origin
from scalemodel.errors import Origin
from scalemodel.specs import notices
from scalemodel.specs.frameworks import read_strategy_file

_MEG_BASE = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
             "--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 --micro-batch-size 1 "
             "--global-batch-size 64 --num-experts 8 --moe-router-topk 2 --bf16")


def _read(tmp_path: Path, name: str, text: str):  # type: ignore[no-untyped-def]
    f = tmp_path / name
    f.write_text(text)
    notices.clear()
    return read_strategy_file(f)


def _marked(sf) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The marked fields with the values the file took for them."""
    return {k: getattr(sf, k.split(".")[0])[k.split(".")[1]] for k in sf.defaults}


# --- Megatron-LM --------------------------------------------------------------------------------------------------

def test_megatron_marks_the_defaults_it_fills(tmp_path: Path) -> None:
    sf = _read(tmp_path, "run.sh", _MEG_BASE + " --fp8-format hybrid --moe-grouped-gemm\n")
    assert _marked(sf) == {
        "strategy.moe_allgather_dispatcher": True,  # L891 "allgather"
        "strategy.moe_permute_fusion": False,  # L941
        "strategy.moe_fp8_padding": True,  # L771 no router padding: the experts pad
        "strategy.overlap": False,  # --overlap-grad-reduce store_true
        "strategy.megatron_ddp": True,  # get_model's DDP
        "strategy.check_for_nan_in_grad": True,  # --no-check-for-nan-in-loss-and-grad store_false (nancheck37)
        "strategy.check_for_nan_in_loss": True,  # the same argument, pretrain_gpt.py's loss_func (nanchunk38)
        "training.grad_bytes_per_param": 4.0,  # --bf16: fp32 reduction
    }
    assert "d98e8a64dd" in sf.defaults["strategy.moe_allgather_dispatcher"]
    assert "L891" in sf.defaults["strategy.moe_allgather_dispatcher"]
    # the name a refusal gives is unchanged: the flag that built the MoE model
    assert sf.field_name("moe_allgather_dispatcher") == "--num-experts"


def test_megatron_does_not_mark_what_the_launch_writes(tmp_path: Path) -> None:
    sf = _read(tmp_path, "run.sh", _MEG_BASE + " --moe-token-dispatcher-type allgather --moe-permute-fusion "
               "--overlap-grad-reduce --grad-reduce-in-bf16\n")
    assert sf.strategy["moe_allgather_dispatcher"] is True and sf.strategy["moe_permute_fusion"] is True
    assert sf.strategy["overlap"] is True and sf.training["grad_bytes_per_param"] == 2.0
    for key in ("moe_allgather_dispatcher", "moe_permute_fusion", "overlap"):
        assert not sf.is_default("strategy", key), key
    # no flag writes Megatron's DDP wrapper, nor its NaN check (only --no-check-for-nan-in-loss-and-grad, off)
    assert set(sf.defaults) == {"strategy.megatron_ddp", "strategy.check_for_nan_in_grad",
                                "strategy.check_for_nan_in_loss"}
    assert "strategy.tp" not in sf.defaults and "training.micro_batch" not in sf.defaults


def test_megatron_written_fp32_reduction_is_not_a_default(tmp_path: Path) -> None:
    """--accumulate-allreduce-grads-in-fp32 writes the fp32 reduction the --bf16 default would give: the file's."""
    sf = _read(tmp_path, "run.sh", _MEG_BASE + " --accumulate-allreduce-grads-in-fp32\n")
    assert sf.training["grad_bytes_per_param"] == 4.0 and not sf.is_default("training", "grad_bytes_per_param")


def test_megatron_alltoall_dispatcher_is_no_allgather_default(tmp_path: Path) -> None:
    sf = _read(tmp_path, "run.sh", _MEG_BASE + " --moe-token-dispatcher-type alltoall\n")
    assert "moe_allgather_dispatcher" not in sf.strategy
    assert not sf.is_default("strategy", "moe_allgather_dispatcher")


# --- DeepSpeed ----------------------------------------------------------------------------------------------------

def test_deepspeed_marks_fp32_reduction_without_mixed_precision(tmp_path: Path) -> None:
    sf = _read(tmp_path, "ds.json", '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}')
    assert _marked(sf) == {"training.grad_bytes_per_param": 4.0}  # engine.py L1416 torch.float32
    assert "edaa7221" in sf.defaults["training.grad_bytes_per_param"]


@pytest.mark.parametrize("text", [
    '{"train_micro_batch_size_per_gpu": 2, "communication_data_type": "fp32"}',  # written: not a default
    '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}}',  # bf16: no fp32 default filled
])
def test_deepspeed_does_not_mark_what_the_config_writes(tmp_path: Path, text: str) -> None:
    sf = _read(tmp_path, "ds.json", text)
    assert sf.defaults == {}


# --- torchtitan ---------------------------------------------------------------------------------------------------

def test_torchtitan_marks_the_defaults_it_fills(tmp_path: Path) -> None:
    sf = _read(tmp_path, "t.toml", "[training]\nlocal_batch_size = 2\nseq_len = 4096\n[parallelism]\n"
               "tensor_parallel_degree = 2\npipeline_parallel_degree = 2\nexpert_parallel_degree = 4\n")
    assert _marked(sf) == {
        "strategy.etp": 1,  # c4b409af^ L230
        "strategy.zero": "fsdp",  # data_parallel_shard_degree -1
        "training.grad_bytes_per_param": 4.0,  # mixed_precision_reduce float32
        "strategy.fsdp_per_param": True,  # fully_shard
        "strategy.layer_impl": "torchtitan_eager",  # compile false (default): the block's eager ops
        "strategy.recompute": "full",  # mode selective with option "2": every 2nd block, priced as full
        "strategy.sequence_parallel": True,  # enable_sequence_parallel True
        "strategy.fsdp_reshard_after_forward": False,  # "default" under PP: no reshard
    }
    for key in ("tp", "pp", "ep"):
        assert not sf.is_default("strategy", key)


def test_torchtitan_loss_default_at_tp_1(tmp_path: Path) -> None:
    sf = _read(tmp_path, "t.toml", "[training]\nlocal_batch_size = 2\n[parallelism]\ntensor_parallel_degree = 1\n")
    assert sf.strategy["loss_impl"] == "torch" and sf.is_default("strategy", "loss_impl")  # compile False
    sf = _read(tmp_path, "t.toml", "[training]\nlocal_batch_size = 2\ncompile = false\n")
    assert sf.strategy["loss_impl"] == "torch" and not sf.is_default("strategy", "loss_impl")


def test_torchtitan_does_not_mark_what_the_toml_writes(tmp_path: Path) -> None:
    sf = _read(tmp_path, "t.toml", "[training]\nlocal_batch_size = 2\nmixed_precision_reduce = \"float32\"\n"
               "[parallelism]\ntensor_parallel_degree = 2\npipeline_parallel_degree = 2\nexpert_parallel_degree = 2\n"
               "expert_tensor_parallel_degree = 1\ndata_parallel_shard_degree = 2\nenable_sequence_parallel = true\n"
               "fsdp_reshard_after_forward = \"never\"\n[activation_checkpoint]\nmode = \"full\"\n")
    assert sf.strategy["etp"] == 1 and sf.strategy["zero"] == "fsdp" and sf.strategy["recompute"] == "full"
    assert sf.strategy["sequence_parallel"] is True and sf.strategy["fsdp_reshard_after_forward"] is False
    assert sf.training["grad_bytes_per_param"] == 4.0
    # what no key writes: torchtitan's FSDP2 and its block
    assert set(sf.defaults) == {"strategy.fsdp_per_param", "strategy.layer_impl"}


# --- scalemodel YAML ----------------------------------------------------------------------------------------------

def test_scalemodel_yaml_marks_nothing(tmp_path: Path) -> None:
    sf = _read(tmp_path, "s.yaml", "strategy:\n  tp: 2\n  moe_allgather_dispatcher: true\n  overlap: false\n")
    assert sf.defaults == {}


# --- the Origin the engine reads ----------------------------------------------------------------------------------

def test_origin_carries_the_mark_only_where_the_file_value_is_taken(tmp_path: Path) -> None:
    sf = _read(tmp_path, "run.sh", _MEG_BASE + "\n")
    origin = strategy_origin(sf, {}, None)
    assert origin is not None and origin.is_default("moe_allgather_dispatcher") and origin.is_default("overlap")
    assert not origin.is_default("tp")
    # --set replaces the file's value: a choice on the command line
    origin = strategy_origin(sf, {}, ["strategy.moe_allgather_dispatcher=true"])
    assert origin is not None and not origin.is_default("moe_allgather_dispatcher")
    # an option (--overlap) over the file's default
    origin = strategy_origin(sf, {"overlap": True}, None)
    assert origin is not None and not origin.is_default("overlap")


def test_origin_text_alone_is_not_a_default() -> None:
    """A field named exactly as the Megatron reader names its default dispatcher is not read as one: only the
    reader's mark makes a default (the text match took any location ending in ": --num-experts")."""
    o = Origin("strategy.", "--gpus", (("moe_allgather_dispatcher", "--strategy: run.sh: --num-experts"),))
    assert not o.is_default("moe_allgather_dispatcher")
    o = Origin("strategy.", "--gpus", (("moe_allgather_dispatcher", "x"),), frozenset({"moe_allgather_dispatcher"}))
    assert o.is_default("moe_allgather_dispatcher")


# --- review19a: the fp8 padding a Megatron-LM reader fills is not warned about -------------------------------------

_MEG_FP8_MOE = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
                "--micro-batch-size 1 --global-batch-size 64 --num-experts 8 --expert-model-parallel-size 8 --bf16 "
                "--fp8-format hybrid --moe-grouped-gemm\n")


def test_reader_default_fp8_padding_under_bf16_is_not_warned_about(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """An fp8 MoE launch (--fp8-format, --num-experts, --moe-grouped-gemm: Megatron-Core's TEGroupedMLP pads the fp8
    tokens, moe_router_padding_for_quantization False at d98e8a64dd transformer_config.py L771) run with --precision
    bf16: the reader filled moe_fp8_padding True as Megatron's default; without fp8 Megatron pads nothing and the
    launch never wrote the field, so 'strategy.moe_fp8_padding is not priced' named a field the user did not set.
    The same field set by the user (--set) is still warned about."""
    script = tmp_path / "run.sh"
    script.write_text(_MEG_FP8_MOE)
    base = ("predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(script))
    notices.clear()
    r = cli(*base, "--precision", "bf16")
    assert r.code == 0, r.err
    assert "moe_fp8_padding" not in r.err, r.err
    notices.clear()
    r = cli("predict", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "8", "--ep", "8", "--precision", "bf16",
            "--set", "strategy.moe_fp8_padding=true")
    assert r.code == 0, r.err
    assert "strategy.moe_fp8_padding is not priced" in r.err, r.err
