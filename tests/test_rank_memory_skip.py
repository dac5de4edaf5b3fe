"""The premise on which engine.stage_memory._segment_memory prices only the first of a split's middle ranks of the same
layers (and chunks): a later rank holds no more micro-batches in flight (memory.inflight_microbatches), so its bytes,
(per_stage + emb) x inflight + what it holds once, never pass the earlier one's. Checked here against the schedules'
own counts written out by hand (1F1B min(m, p - r), interleaved min(p + (p - 1 - 2 r) / v, m), GPipe m), and the
DeepSeek-V3 peak at pp 8 against every rank priced on its own layers."""

import numpy as np
import pytest

from scalemodel.cost import memory
from scalemodel.engine import layer_compute, pipeline_ranks, stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved", "gpipe", "zb"])
@pytest.mark.parametrize("p", [2, 3, 8, 32])
@pytest.mark.parametrize("m", [1, 3, 8, 64])
def test_inflight_never_grows_with_rank(schedule: str, p: int, m: int) -> None:
    for v in (1, 2, 4) if schedule == "interleaved" else (1,):
        got = [float(memory.inflight_microbatches(p, m, schedule, v, r)) for r in range(p)]
        if schedule == "gpipe":
            want = [float(m)] * p
        elif schedule == "interleaved":
            want = [max(min(p + (p - 1 - 2 * r) / v, m), 1.0) for r in range(p)]
        else:
            want = [float(max(min(m, p - r), 1)) for r in range(p)]
        assert got == pytest.approx(want)
        assert all(a >= b for a, b in zip(got[:-1], got[1:], strict=True))  # never grows with the rank


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_dsv3_pp8_peak_is_the_largest_rank(schedule: str) -> None:
    """DeepSeek-V3 at pp 8 (ranks of 8, 8, 8, 8, 8, 7, 7, 7 layers, 61 = 5 x 8 + 3 x 7; rank 0 with the 3 dense
    ones): the peak memory_parts prices is the largest of every rank priced on its own layers
    (memory.memory_per_gpu at stage_rank r, the embedding on rank 0, the output layer and MTP module on the last),
    though only the first middle rank of each run of equal ranks is priced."""
    job = build_job(load_cluster("dgx-h100"), load_workload("deepseek-v3"), TrainingSpec(precision="bf16"))
    st = StrategySpec(tp=1, pp=8, dp=64, ep=8, schedule=schedule)
    g = grid_from_strategy(st, TrainingSpec(global_batch=1024, precision="bf16"), 512, job)
    m = pipeline_ranks.microbatches(g)
    splits = pipeline_ranks._rank_layers(job, g)
    assert splits is not None and len(splits) == 1
    ranks = splits[0].ranks
    assert [len(s) for s in ranks] == [8] * 5 + [7] * 3 and ranks[0] == "ddd" + "e" * 5
    d_mtp = float(job.shape.mtp_layers)
    totals = []
    for r, s in enumerate(ranks):
        part = pipeline_ranks._part_job(job, s)
        kw = stage_memory._memory_kwargs(part, g, m, "bsp", memory.DEFAULT_FRAGMENTATION, memory.DEFAULT_WORKSPACE)
        where = (dict(embedding=d_mtp > 0, head=True, mtp_modules=d_mtp) if r == 7
                 else dict(mtp_modules=0.0) if r == 0 else dict(embedding=False))
        n = np.full(1, float(len(s)))
        totals.append(float(np.max(memory.memory_per_gpu(part.shape, stage_layers=n, stage_rank=r,
                                                         recomputed_layers=layer_compute.recomputed_layers(g, n),
                                                         **where, **kw).total)))
    # equal middle ranks: the earlier holds as much or more
    assert totals[1] >= totals[2] >= totals[3] >= totals[4] and totals[5] >= totals[6]
    assert float(np.max(stage_memory.memory_parts(job, g, m)["total"])) == max(totals)
