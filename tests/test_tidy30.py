"""tidy30: behaviour-preserving cuts pinned where the existing tests matched only part of a message.

The two host-link refusals (strategy offload_layers, offload_tensors; docs/model.md#offload) are one check since
tidy30; their words, read from the refusals before the cut (f0d57956), stay byte-identical, and offload_layers is
still named first when both are given. nccl-tests' bound on a column (size, count, time) is chosen by an explicit
kind, not by its unit's spelling; the refusals of each column of a text log and of a -J entry are pinned as read
before the cut."""

from __future__ import annotations

import json

import pytest
from msgspec.structs import replace

from scalemodel.engine.job import (
    _FRAMEWORK_SWITCHES,
    _KERNEL_SWITCHES,
    GRID_DEFAULTS,
    build_job,
    grid_from_arrays,
    grid_from_strategy,
)
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.nccl_tests import parse_nccl_tests
from scalemodel.specs.training import StrategySpec, TrainingSpec

LAYERS = ("strategy.offload_layers",
          "offload_layers=2 needs the GPU-host link rate, which cluster tpu-v6e-pod does not give",
          "offload_layers: 0, or --set cluster.host_bandwidth=64GB/s (per GPU, per direction)")
TENSORS = ("strategy.offload_tensors",
           "offload_tensors [query_proj, key_proj] needs the accelerator-host link rate, which cluster tpu-v6e-pod "
           "does not give",
           "offload_tensors: [], or --set cluster.host_bandwidth=32GB/s (per chip and direction)")


@pytest.mark.parametrize(("fields", "want"), [
    (dict(offload_layers=2), LAYERS),
    (dict(offload_tensors=["query_proj", "key_proj"], recompute="selective", recompute_modules="jax_qkvo"), TENSORS),
    (dict(offload_layers=2, offload_tensors=["query_proj", "key_proj"]), LAYERS),
])
def test_host_link_refusals_keep_their_words(fields: dict[str, object], want: tuple[str, str, str]) -> None:
    job = build_job(load_cluster("tpu-v6e-pod"), load_workload("llama3-8b"),
                    TrainingSpec(precision="bf16", seq_len=8192))
    with pytest.raises(InputError) as err:
        grid_from_strategy(StrategySpec(**fields), TrainingSpec(global_batch=256), 256,  # type: ignore[arg-type]
                           replace(job, host_bandwidth=0.0))
    assert (err.value.where, err.value.what, err.value.allowed) == want


BIG, LONG = 2**50 + 1, 3600000001.0  # one byte past 2^50; one hour and a microsecond, in us
SIZE = ("1.126e+15 {0}: more than nccl-tests can have measured",
        "at most 2^50 = 1.126e+15 {0} (1 PiB, past any GPU's memory)")
TIME = "3.6e+09 us: more than nccl-tests can have measured", "at most one hour (3.6e9 us)"


def _row(size: int = 1024, count: int = 256, t: float = 51.45, tip: float = 50.0) -> str:
    return f"   {size}   {count}   float   sum   -1   {t}   0.10   0.19   0   {tip}   0.10   0.19   0\n"


def _entry(size: int = 1024, count: int = 256, t: float = 51.0, tip: float = 50.0) -> str:
    return json.dumps({"results": [{"size": size, "count": count, "type": "float", "out_of_place": {"time": t,
                       "bus_bw": 1.0}, "in_place": {"time": tip, "bus_bw": 1.0}}]})


@pytest.mark.parametrize(("text", "where", "want"), [
    (_row(size=BIG), "LOG: line 1: size", [w.format("bytes") for w in SIZE]),
    (_row(count=BIG), "LOG: line 1: count", [w.format("elements") for w in SIZE]),
    (_row(t=LONG), "LOG: line 1: out-of-place time", list(TIME)),
    (_row(tip=LONG), "LOG: line 1: in-place time", list(TIME)),
    (_entry(size=BIG), "LOG: result 1: size", [w.format("bytes") for w in SIZE]),
    (_entry(count=BIG), "LOG: result 1: count", [w.format("elements") for w in SIZE]),
    (_entry(t=LONG), "LOG: result 1: time", list(TIME)),
    (_entry(tip=LONG), "LOG: result 1: in_place.time", list(TIME)),
])
def test_nccl_tests_bounds_keep_their_words(text: str, where: str, want: list[str]) -> None:
    with pytest.raises(InputError) as err:
        parse_nccl_tests(text)
    assert [err.value.where, err.value.what, err.value.allowed] == [where, *want]


def test_strategy_switches_pass_through_grid_and_back() -> None:
    """The switches grid_from_strategy reads and StrategyGrid.describe writes from one list (tidy30): each is a bool
    StrategySpec field whose default is the grid's, a flipped value comes back out of describe, and the JSON
    strategy keeps its key order (the switches where describe wrote them one by one before the cut)."""
    names = (*_FRAMEWORK_SWITCHES, *_KERNEL_SWITCHES)
    spec = StrategySpec()
    for name in names:
        assert getattr(spec, name) is GRID_DEFAULTS[name] and isinstance(GRID_DEFAULTS[name], bool), name
    base = dict(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=8)
    for name in names:
        flipped = not GRID_DEFAULTS[name]
        assert grid_from_arrays(**base, **{name: flipped}).describe(0)[name] is flipped, name
    keys = list(grid_from_arrays(**base).describe(0))
    i = keys.index("moe_flex_backend")
    assert keys[i + 1:i + 1 + len(_FRAMEWORK_SWITCHES)] == list(_FRAMEWORK_SWITCHES)
    j = keys.index("cp_a2a_size")
    assert keys[j + 1:] == [*_KERNEL_SWITCHES, "train_metric_passes", "train_metric_states", "wgrad_deferral_limit"]
