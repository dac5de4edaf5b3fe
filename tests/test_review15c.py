"""Review of the merged flexbackend (strategy.moe_flex_backend) and dpinterleave (the interleaved schedule's
per-chunk data-parallel sync, strategy.align_grad_reduce / align_param_gather) branches: one test per defect found,
each failing before its fix, and the physics of the per-chunk sync over random interleaved strategies.

Expected values are independent of the engine: warnings from the conditions docs/model.md#interleaved-dp-sync
states, Megatron-LM's flag names read at NVIDIA/Megatron-LM@d98e8a64dd, plan's pick against predict run by hand on
every dispatch, and the step's floors (FLOPs at peak, the data-parallel traffic at the network's bandwidth)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, notices
from scalemodel.specs.constraints import normalize_constraints
from scalemodel.specs.frameworks import read_strategy_file
from tests.grid_helpers import TINY_MOE

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


# ---------------------------------------------------------------------------------------------------------------
# 3. plan with the backend pinned (--set strategy.moe_flex_backend=hybridep, --constraint moe_flex_backend=...)
#    searched no flex row, so every plan ran NCCL's all-to-all under the pinned backend's name

COMM = {"algorithm": "auto", "compression": "none", "overlap": True, "bucket": 0.0, "dp_comm": "allreduce",
        "assignment": "static"}


def test_a_backend_pin_opens_the_flex_dispatcher() -> None:
    """64 experts on 16 H100s (two NVLink domains), ep 16, every other axis pinned and the backend pinned to
    hybridep: plan searches NCCL's all-to-all and the flex dispatcher (HybridEP) x recompute, 6 candidates, and its
    pick is predict's argmin over them by hand."""
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=64, micro_batch=1, seq_len=4096, precision="bf16")
    job = build_job(cl, TINY_MOE, tr)
    cons = {"dp": 16, "tp": 1, "pp": 1, "cp": 1, "ep": 16, "micro_batch": 1, "zero": ("=", 1),
            "sequence_parallel": False, "moe_flex_backend": "hybridep", **COMM}
    res = planner.search(job, 16, 64, top=20, constraints=cons)
    assert res.candidates_evaluated == 6
    base = dict(dp=16, tp=1, pp=1, cp=1, ep=16, zero="1", sequence_parallel=False, moe_flex_backend="hybridep")
    times = {}
    for flex, rec in itertools.product((False, True), ("none", "selective", "full")):
        p = predict(cl, TINY_MOE, 16, tr, StrategySpec(**base, moe_flex_dispatcher=flex, recompute=rec))
        times[flex, rec] = p.step_time_s
    assert res.ranked[0].step_time_s == pytest.approx(min(times.values()), rel=1e-9)
    seen = {f for p, same in zip(res.ranked, res.equivalents, strict=True)
            for f in same.get("moe_flex_dispatcher", [p.strategy["moe_flex_dispatcher"]])}
    assert seen == {False, True}
    assert all(p.strategy["moe_flex_backend"] == "hybridep" for p in res.ranked)
    # the configurations themselves: flex rows carry the pinned backend
    cfg = planner.configurations(job, 16, 64, normalize_constraints({"micro_batch": 1, "cp": 1,
                                                                     "moe_flex_backend": "hybridep"}))
    flex_rows = cfg["moe_flex_dispatcher"] & (cfg["ep"] > 1)
    assert np.any(flex_rows) and np.all(cfg["moe_flex_backend"][flex_rows] == 1)


def test_a_backend_pinned_with_the_flex_dispatcher_held_off_is_warned() -> None:
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=64, micro_batch=1, seq_len=4096, precision="bf16")
    job = build_job(cl, TINY_MOE, tr)
    cons = {"dp": 16, "tp": 1, "pp": 1, "cp": 1, "ep": 16, "micro_batch": 1, "zero": ("=", 1),
            "sequence_parallel": False, "recompute": "none", **COMM}
    for extra, warned in (({"moe_flex_backend": "hybridep", "moe_flex_dispatcher": False}, True),
                          ({"moe_flex_backend": "hybridep", "moe_flex_dispatcher": True}, False),
                          ({"moe_flex_backend": "deepep", "moe_flex_dispatcher": False}, False)):
        notices.clear()
        planner.search(job, 16, 64, top=3, constraints={**cons, **extra})
        assert any("moe_flex_backend" in w and "not priced" in w for w in notices.current()) == warned, extra
    notices.clear()
