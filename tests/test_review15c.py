"""Review of the merged flexbackend (strategy.moe_flex_backend) and dpinterleave (the interleaved schedule's
per-chunk data-parallel sync, strategy.align_grad_reduce / align_param_gather) branches: one test per defect found,
each failing before its fix, and the physics of the per-chunk sync over random interleaved strategies.

Expected values are independent of the engine: warnings from the conditions docs/model.md#interleaved-dp-sync
states, Megatron-LM's flag names read at NVIDIA/Megatron-LM@d98e8a64dd, plan's pick against predict run by hand on
every dispatch, and the step's floors (FLOPs at peak, the data-parallel traffic at the network's bandwidth)."""

from __future__ import annotations

import pytest

from scalemodel.errors import InputError
from scalemodel.specs.frameworks import read_strategy_file

# ---------------------------------------------------------------------------------------------------------------
# 1. align_grad_reduce / align_param_gather false where they price nothing: predict said nothing

GPT = ("predict", "--model", "gpt-1.7b", "--cluster", "dgx-h100", "--global-batch", "64")


@pytest.mark.parametrize("args,grad,gather", [
    # no Megatron-Core DDP, 1F1B, pp 1: neither acts (step.interleaved_dp_sync)
    (("--gpus", "8", "--set", "strategy.align_grad_reduce=false", "--set", "strategy.align_param_gather=false"),
     ["megatron_ddp is off", "the schedule is 1f1b", "pp is 1"],
     ["megatron_ddp is off", "overlap_param_gather is off", "zero is 0"]),
    # Megatron-Core DDP, ZeRO-1 with overlap_param_gather, pp 2 under 1F1B: the whole-stage rule, both unpriced
    (("--gpus", "16", "--pp", "2", "--zero", "1", "--set", "strategy.megatron_ddp=true", "--set",
      "strategy.overlap_param_gather=true", "--set", "strategy.align_grad_reduce=false", "--set",
      "strategy.align_param_gather=false"), ["the schedule is 1f1b"], ["the schedule is 1f1b"]),
    # interleaved Megatron-Core DDP at ZeRO 0: the gradient switch acts, the gather one has no gathers to time
    (("--gpus", "16", "--pp", "2", "--schedule", "interleaved:2", "--set", "strategy.megatron_ddp=true", "--set",
      "strategy.align_grad_reduce=false", "--set", "strategy.align_param_gather=false"), None, ["zero is 0"]),
    # interleaved Megatron-Core DDP, ZeRO-1 with overlap_param_gather: both priced, no warning
    (("--gpus", "16", "--pp", "2", "--schedule", "interleaved:2", "--zero", "1", "--set", "strategy.megatron_ddp=true",
      "--set", "strategy.overlap_param_gather=true", "--set", "strategy.align_grad_reduce=false", "--set",
      "strategy.align_param_gather=false"), None, None),
])
def test_align_switches_off_where_they_price_nothing_are_warned(cli, args, grad, gather) -> None:  # type: ignore[no-untyped-def]
    r = cli(*GPT, *args, "--json")
    assert r.code == 0, r.err
    for name, reasons in (("align_grad_reduce", grad), ("align_param_gather", gather)):
        line = next((x for x in r.err.splitlines() if f"strategy.{name} = false is not priced" in x), None)
        if reasons is None:
            assert line is None, r.err
        else:
            assert line is not None, r.err
            assert all(w in line for w in reasons), line


# ---------------------------------------------------------------------------------------------------------------
# 2. Megatron-LM d98e8a64dd names the switch --disable-align-grad-reduce too (ArgumentGroupFactory gives a
#    store_false bool both --no-X and --disable-X, megatron/training/argument_utils.py L189-196): it was "not used"

def test_disable_align_grad_reduce_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --use-distributed-optimizer --overlap-grad-reduce "
                 "--disable-align-grad-reduce\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy["align_grad_reduce"] is False
    assert not any("align-grad-reduce" in u for u in sf.unused)
    f.write_text("torchrun pretrain_gpt.py --use-distributed-optimizer --disable-align-grad-reduce=false\n")
    with pytest.raises(InputError, match="takes no value"):
        read_strategy_file(str(f))
