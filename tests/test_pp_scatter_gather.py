"""What each TP rank sends across a pipeline boundary (docs/model.md#pp-comm): Megatron-Core sends the tensor shape
get_tensor_shapes gives, (s, b, h), and (s / t, b, h) only under sequence parallelism (megatron/core/pipeline_parallel/
schedules.py at NVIDIA/Megatron-LM d98e8a64dd lines 2115-2144); legacy Megatron-LM's scatter/gather (strategy
pp_scatter_gather; megatron/p2p_communication.py 72e4230bb5..3c92fa93b5) sends b s h / t and all-gathers it over TP
after the receive, and skips both under sequence parallelism.

Hand values: gpt-7.5b (h 4096, s 2048), micro-batch 1, bf16, on one DGX A100 node at tp 4 x pp 2 (dp 1): the
activation is 1 x 2048 x 4096 x 2 = 16,777,216 B, one TP rank's quarter 4,194,304 B. Per micro-batch and stage the
boundary carries the activation forward and its gradient backward (2 sends), each a 2-rank send/recv at the
pipeline's stride tp x dp = 4; legacy scatter/gather adds an all-gather of the whole 16 MiB over the 4 TP ranks
(stride 1) after each receive. pp_comm scales with the per-micro-batch time, so its ratios are the ratios below."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

ACT = 1 * 2048 * 4096 * 2  # bytes of one micro-batch's activation
QUARTER = ACT // 4


def _pp(a100: Any, **strategy: Any) -> tuple[Any, float]:
    from grid_helpers import evaluated, first

    from scalemodel.specs import TrainingSpec, load_workload

    wl = load_workload("gpt-7.5b")
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", grad_bytes_per_param=4.0)
    job, _, res = evaluated(a100, wl, tr, 8, tp=4, pp=2, **strategy)
    return job, first(res.breakdown["pp_comm"])


def test_activation_bytes_are_the_hand_values(a100) -> None:  # type: ignore[no-untyped-def]
    job, _ = _pp(a100)
    assert float(job.seq_len) * float(job.shape.hidden) * job.elem_bytes == ACT == 16_777_216
    assert QUARTER == 4_194_304


def test_send_divisor_by_framework() -> None:
    """model_parallel_comm.pp_send_divisor on a grid of the four cases (and DeepSpeed's PipelineEngine, which partitions
    too)."""
    from scalemodel.engine.job import GRID_DEFAULTS, StrategyGrid
    from scalemodel.engine.model_parallel_comm import pp_send_divisor, pp_split

    sp = np.array([False, True, False, True, False])
    sg = np.array([False, False, True, True, False])
    ds = np.array([False, False, False, False, True])
    base = {k: np.asarray(v) for k, v in GRID_DEFAULTS.items()}
    g = StrategyGrid(gpus=np.full(5, 8), dp=np.ones(5, int), tp=np.full(5, 4), pp=np.full(5, 2),
                     micro_batch=np.ones(5, int), global_batch=np.full(5, 16),
                     **{**base, "sequence_parallel": sp, "pp_scatter_gather": sg, "deepspeed_pipeline": ds})
    assert list(ACT / pp_send_divisor(g)) == [ACT, QUARTER, QUARTER, QUARTER, QUARTER]
    assert list(pp_split(g)) == [False, False, True, False, False]  # the receiver's all-gather: legacy without SP


def test_pp_comm_core_vs_legacy_with_and_without_sp(a100) -> None:  # type: ignore[no-untyped-def]
    from grid_helpers import first

    from scalemodel.cost import collectives as coll

    job, core = _pp(a100)
    _, core_sp = _pp(a100, sequence_parallel=True)
    _, legacy = _pp(a100, pp_scatter_gather=True)
    _, legacy_sp = _pp(a100, sequence_parallel=True, pp_scatter_gather=True)

    def send(nbytes: float) -> float:
        return first(coll.collective_time("sendrecv", nbytes, 2, job.network, stride=4))

    gather = first(coll.collective_time("allgather", float(ACT), 4, job.network, stride=1))
    assert core > 0.0
    # Megatron-Core without SP: the whole activation, against SP's quarter
    assert core / core_sp == pytest.approx(send(ACT) / send(QUARTER), rel=1e-6)
    # legacy scatter/gather: the quarter on the wire + the receiver's all-gather of the whole activation
    assert legacy / core_sp == pytest.approx((send(QUARTER) + gather) / send(QUARTER), rel=1e-6)
    # under SP legacy Megatron-LM skips scatter/gather: the SP shard, as Megatron-Core
    assert legacy_sp == pytest.approx(core_sp, rel=1e-12)


@pytest.mark.parametrize(("extra", "words"), [
    (("--cp", "2"), "with cp 2 describes no Megatron release"),
    (("--set", "strategy.nanotron_trainer=true"), "which nanotron_trainer does not do"),
])
def test_scatter_gather_beside_a_framework_without_it_is_named(cli: Any, extra: tuple[str, ...], words: str) -> None:
    """Only legacy Megatron-LM split its pipeline sends (megatron/p2p_communication.py, until 3c92fa93b5 of
    2023-03-23 moved the pipeline into Megatron-Core); context parallelism came to Megatron-Core after it
    (parallel_state.py, 80590f9894 of 2023-08-09) and nanotron's PipelineBlock sends each rank's tensor as it is. The
    field beside either is priced as asked, with a warning; alone it warns nothing."""
    base = ("predict", "-m", "gpt3-175b", "-n", "1024", "--tp", "8", "--pp", "8", "--global-batch", "512",
            "--set", "strategy.pp_scatter_gather=true", "--json")
    res = cli(*base, *extra)
    assert res.code == 0, res.err
    assert words in " ".join(res.err.split())
    plain = cli(*base)
    assert plain.code == 0 and "strategy.pp_scatter_gather" not in plain.err


def test_legacy_interleaved_gathers_at_every_chunk_boundary(a100) -> None:  # type: ignore[no-untyped-def]
    """Legacy Megatron-LM's interleaved schedule sent through the same p2p_communication._communicate, so each of the
    2 v sends a micro-batch makes on a stage is the 1/t piece plus the receiver's all-gather (review19a): at v 2 the
    legacy pipeline term is m x 2 v x (send(b s h / 4) + allgather(b s h)) by hand, the same 16 micro-batches (dp 1,
    global batch 16) and the same boundary; 1F1B at pp 2 makes one batched exchange a micro-batch on a rank, its one
    boundary (pp24: model_parallel_comm.pp_exchanges, tests/test_pipeline_exchanges.py), so m x (send + allgather)."""
    from grid_helpers import first

    from scalemodel.cost import collectives as coll

    job, legacy = _pp(a100, pp_scatter_gather=True)
    _, legacy_v2 = _pp(a100, pp_scatter_gather=True, schedule="interleaved:2")
    send = first(coll.collective_time("sendrecv", float(QUARTER), 2, job.network, stride=4))
    gather = first(coll.collective_time("allgather", float(ACT), 4, job.network, stride=1))
    assert legacy == pytest.approx(16 * 1 * (send + gather), rel=1e-9)
    assert legacy_v2 == pytest.approx(16 * 2 * 2 * (send + gather), rel=1e-9)
