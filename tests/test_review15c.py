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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.predict import predict
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, notices
from scalemodel.specs.constraints import normalize_constraints
from scalemodel.specs.frameworks import read_strategy_file
from tests.grid_helpers import TINY_MOE
from tests.test_physics import _eval, _job, _scaled_network

# ---------------------------------------------------------------------------------------------------------------
# 1. align_grad_reduce / align_param_gather false where they price nothing: predict said nothing

GPT = ("predict", "--model", "gpt-1.7b", "--cluster", "dgx-h100", "--global-batch", "64")


@pytest.mark.parametrize("args,grad,gather", [
    # no Megatron-Core DDP, 1F1B, pp 1: neither acts (dp_comm.interleaved_dp_sync)
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


# ---------------------------------------------------------------------------------------------------------------
# 4. physics over random interleaved Megatron-Core DDP strategies (tests/test_physics.py draws no interleaved
#    schedule, so the per-chunk windows were never checked against the step's floors there)

CLUSTERS = ("dgx-a100", "dgx-h100", "pcie-25gbe", "gb200-nvl72", "mi300x-8")
MODELS = ("gpt-1.7b", "llama2-7b", "llama3-8b", "mixtral-8x7b", "mistral-7b", "gpt-j-6b")


@st.composite
def interleaved_cases(draw):  # type: ignore[no-untyped-def]
    job = _job(draw(st.sampled_from(CLUSTERS)), draw(st.sampled_from(MODELS)),
               draw(st.sampled_from(("bf16", "fp8"))), draw(st.sampled_from((2048, 4096))))
    tp = draw(st.sampled_from((1, 2, 8)))
    pp = draw(st.sampled_from((2, 4)))
    dp = draw(st.sampled_from((2, 8, 64)))
    mb = draw(st.sampled_from((1, 2)))
    # m < pp as well: predict refuses it (interleave_invalid), but the step prices every candidate it is given
    accumulation = draw(st.sampled_from((1, 2, pp, 2 * pp, 4 * pp)))
    arrays = dict(
        gpus=dp * tp * pp, dp=dp, tp=tp, pp=pp, cp=1, micro_batch=mb, global_batch=dp * mb * accumulation,
        zero=draw(st.sampled_from((0, 1))), recompute=draw(st.sampled_from((0, 1, 2))), schedule=1,
        virtual_stages=draw(st.sampled_from((2, 4))), sequence_parallel=tp > 1, overlap=True,
        algorithm=0, compression=0, flash_attention=True, recompute_layers=-1, offload_layers=0,
        tp_comm_overlap=draw(st.booleans()) and tp > 1, overlap_param_gather=draw(st.booleans()),
        recompute_uniform=False, megatron_ddp=True, fp8_param_gather=False,
        align_grad_reduce=draw(st.booleans()), align_param_gather=draw(st.booleans()),
        bucket_bytes=draw(st.sampled_from((0.0, 2.5e7, 4e8))))
    return job, arrays


PHYS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PHYS
@given(interleaved_cases())
def test_interleaved_sync_keeps_the_step_floors(case) -> None:  # type: ignore[no-untyped-def]
    """Step >= FLOPs at peak and >= the step's whole data-parallel traffic at the network's bandwidth; the breakdown
    is non-negative and adds up to the step."""
    job, arrays = case
    res = _eval(job, arrays)
    step = float(res.step_time[0])
    assert step >= float(res.model_flops[0]) / (arrays["gpus"] * job.peak_flops) * (1 - 1e-12)
    assert step >= float(res.extras["dp_comm_total"][0]) * (1 - 1e-12), arrays
    parts = [float(v[0]) for v in res.breakdown.values()]
    assert all(p >= 0 and np.isfinite(p) for p in parts)
    assert abs(sum(parts) - step) <= 1e-12 * step


#: found by the test below: m = 1 < pp = 2 with v = 6 took (v - 1) pp / v = 1.67 backwards of window from the one
#: micro-batch's backward, so a 1.25x faster GPU exposed 5.1 ms more sync than its 4.6 ms less compute
M_BELOW_PP = (_job("mi300x-8", "llama2-7b", "bf16", 2048),
              dict(gpus=32, dp=2, tp=8, pp=2, cp=1, micro_batch=2, global_batch=4, zero=0, recompute=0, schedule=1,
                   virtual_stages=6, sequence_parallel=True, overlap=True, algorithm=0, compression=0,
                   flash_attention=True, recompute_layers=-1, offload_layers=0, tp_comm_overlap=True,
                   overlap_param_gather=False, recompute_uniform=False, megatron_ddp=True, fp8_param_gather=False,
                   align_grad_reduce=False, align_param_gather=False, bucket_bytes=0.0))


@PHYS
@given(interleaved_cases(), st.sampled_from((None, 0, 1)), st.sampled_from((1.5, 4.0)), st.sampled_from((1.25, 2.0)))
@example(M_BELOW_PP, None, 1.5, 1.25)
def test_interleaved_sync_is_monotone(case, tier, net, gpu) -> None:  # type: ignore[no-untyped-def]
    """More bandwidth or a faster accelerator never makes an interleaved step slower (the per-chunk windows shrink
    with the compute by at most what the compute saves: with m < pp the chunks are m chunk-passes apart, not pp)."""
    from msgspec.structs import replace

    job, arrays = case
    if tier is not None and tier >= len(job.network.tiers):
        tier = None
    base = float(_eval(job, arrays).step_time[0])
    assert float(_eval(_scaled_network(job, net, tier), arrays).step_time[0]) <= base * (1 + 1e-9)
    quick = replace(job, peak_flops=job.peak_flops * gpu, memory_bandwidth=job.memory_bandwidth * gpu)
    assert float(_eval(quick, arrays).step_time[0]) <= base * (1 + 1e-9)


# ---------------------------------------------------------------------------------------------------------------
# 5. the deprecated --moe-enable-deepep (TransformerConfig.__post_init__ at NVIDIA/Megatron-LM@d98e8a64dd
#    L1743-1752): it sets the backend to deepep and raises without flex or beside hybridep; the reader listed it as not
#    used, so "--moe-enable-deepep --moe-flex-dispatcher-backend hybridep", which Megatron refuses, priced HybridEP

FLEX = "torchrun pretrain_gpt.py --expert-model-parallel-size 8 --moe-token-dispatcher-type flex "


@pytest.mark.parametrize("flags,words", [
    ("--moe-enable-deepep --moe-flex-dispatcher-backend hybridep", "Only one backend"),
    ("--moe-enable-deepep=false", "takes no value"),
])
def test_moe_enable_deepep_contradictions_are_refused(tmp_path, flags: str, words: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(FLEX + flags + "\n")
    with pytest.raises(InputError, match=words):
        read_strategy_file(str(f))
    f.write_text(FLEX.replace("flex", "alltoall") + "--moe-enable-deepep\n")
    with pytest.raises(InputError, match="only supported with flex"):
        read_strategy_file(str(f))


@pytest.mark.parametrize("flags", ["--moe-enable-deepep", "--moe-enable-deepep --moe-flex-dispatcher-backend ncclep"])
def test_moe_enable_deepep_is_the_deepep_backend(tmp_path, flags: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(FLEX + flags + " --moe-flex-dispatcher-num-sms 24\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy["moe_flex_backend"] == "deepep" and sf.strategy["ep_dispatch_sms"] == 24
    assert not any("deepep" in u or "ncclep" in u for u in sf.unused), sf.unused


# ---------------------------------------------------------------------------------------------------------------
# 6. plan with align_grad_reduce / align_param_gather pinned false (fixed fields) and no candidate that runs the
#    per-chunk sync (megatron_ddp, and for the gathers overlap_param_gather, not pinned): nothing said, as predict was

@pytest.mark.parametrize("sets,warned", [
    (["strategy.align_grad_reduce=false"], "strategy.align_grad_reduce = false is not priced"),
    (["strategy.align_param_gather=false", "strategy.megatron_ddp=true"],
     "strategy.align_param_gather = false is not priced"),
    (["strategy.align_grad_reduce=false", "strategy.megatron_ddp=true"], None),
    (["strategy.align_param_gather=false", "strategy.megatron_ddp=true", "strategy.overlap_param_gather=true"], None),
])
def test_plan_warns_align_pins_that_price_nothing(cli, sets, warned) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "--model", "gpt-1.7b", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
            "--constraint", "tp=1,cp=1,pp=2", "--top", "1", *[x for s in sets for x in ("--set", s)], "--json")
    assert r.code == 0, r.err
    if warned is None:
        assert "align_" not in r.err, r.err
    else:
        line = next(x for x in r.err.splitlines() if warned in x)
        # it names what is missing, not what was pinned
        assert ("megatron_ddp" in line) == ("strategy.megatron_ddp=true" not in sets), line
