"""strategy.train_metric_states: the host's per-step gather of the training metrics' states over every rank
(Composer computes each train metric after every batch; torchmetrics' compute() runs, per state, a barrier, W
``zeros_like`` calls from Python and an all-gather into that list, which ProcessGroupNCCL copies out with one
``copy_`` per rank; docs/model.md#train-metric-sync).

The expected seconds are summed here call by call from those counts and the per-call costs of
hardware/measurements/host_overhead.yaml (a Python-issued torch op 8.3 us, PT-ISSUE161822; a C++-issued launch 5 us,
RAFT-PR1736), with the two collectives' times read from the collective engine (`scalemodel collective`, its own
tests), not from the function under test."""

from __future__ import annotations

import pytest
from conftest import script_module

import scalemodel
from scalemodel.engine import planner
from scalemodel.specs import StrategySpec

OP_S, LAUNCH_S = 8.3e-6, 5.0e-6  # host_overhead.yaml: "op" and "launch" classes, low ends
STATE_BYTES = 8  # a 0-d int64 state (total_items); the fp32 one (sum_loss) is smaller
REDUCE_OPS = 2  # torch.stack of the gathered list and the state's sum


def _best(result: object) -> float:
    row = result.rows[0]  # type: ignore[attr-defined]
    return float(next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == row["best"]))


def _host(gpus: int, states: int) -> tuple[float, float]:
    """(host part, step) of gpt-1.7b data-parallel on dgx-h100, one micro-batch of 2 x 2048 per GPU."""
    p = scalemodel.predict("dgx-h100", "gpt-1.7b", gpus, tp=1, pp=1, dp=gpus, micro_batch=2, global_batch=2 * gpus,
                           seq_len=2048, train_metric_states=states)
    return float(p.breakdown_s["host"]), float(p.step_time_s)


@pytest.mark.parametrize("gpus", [16, 512])
def test_per_state_calls_by_hand(gpus: int) -> None:
    barrier = _best(scalemodel.collective("dgx-h100", "allreduce", 1, gpus))  # ProcessGroupNCCL barrier: 1 byte
    gather = _best(scalemodel.collective("dgx-h100", "allgather", STATE_BYTES * gpus, gpus))
    # W zeros_like + stack + sum from Python; the W copy_ launches are issued while the gather runs
    one = barrier + (gpus + REDUCE_OPS) * OP_S + max(gather, gpus * LAUNCH_S)
    host0, step0 = _host(gpus, 0)
    host4, step4 = _host(gpus, 4)
    assert host4 - host0 == pytest.approx(4 * one, rel=1e-9)
    assert step4 - step0 == pytest.approx(4 * one, rel=1e-9)  # in series with everything else
    if gpus == 512:  # 4 x (0.106 + 514 x 0.0083 + max(1.127, 2.56)) ms: the copies' launches outlast the gather
        assert gpus * LAUNCH_S > gather
        assert 4 * one == pytest.approx(27.73e-3, rel=2e-3)


def test_none_without_states_or_peers() -> None:
    assert _host(1, 4)[0] == _host(1, 0)[0] == 0.0  # one GPU: no gather
    assert _host(16, 0)[0] == 0.0


def test_grows_with_the_ranks() -> None:
    assert _host(16, 4)[0] < _host(128, 4)[0] < _host(512, 4)[0]


def test_bad_counts() -> None:
    with pytest.raises(Exception, match="train_metric_states"):
        StrategySpec(train_metric_states=-1)
    with pytest.raises(Exception, match="train_metric_states"):
        StrategySpec(train_metric_states=10**6)


def test_plan_takes_it_as_a_fixed_field() -> None:
    _, fixed, _ = planner.pins(StrategySpec(train_metric_states=4), ["train_metric_states"])
    assert fixed == {"train_metric_states": 4}


def test_validation_rule_follows_the_sources() -> None:
    """llm-foundry (Composer) rows: two language metrics of two scalar states each; no other source's trainer."""
    mod = script_module("validate_training")
    assert mod.TRAIN_METRIC_STATES == {"mpt": 4}
    assert mod.TRAIN_METRIC_STATES["mpt"] == 2 * mod.TRAIN_METRIC_PASSES["mpt"]
