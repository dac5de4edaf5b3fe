"""review29d: the gaudi25 row runs DeepSpeed's PipelineEngine (one stage), so its per-micro-batch gradient
accumulation pass is priced.

Independent evidence: HabanaAI/Megatron-DeepSpeed@891d6db95279 scripts/run_llama.sh never passes
``--no-pipeline-parallel``, and pretrain_gpt.py builds GPTModelPipe (megatron/training.py train_step calls the
PipelineEngine's train_batch) whenever it is absent, pp 1 included; HabanaAI/DeepSpeed@9c2d0431 (branch 1.19.0,
version 0.14.4): PipelineEngine sets ``enable_backward_allreduce = False``; with a BF16 model, ZeRO 1 and
grad_accum_dtype bf16 the engine picks DeepSpeedZeroOptimizer, whose stage 1 registers no gradient hooks without
overlap_comm (default ``stage == 3``) and keeps no separate accumulation buffer, so autograd adds each micro-batch's
BF16 gradient into param.grad in place: read both, write one, 3 x 2 B a parameter for each of the 127 micro-batches
after the first of 128, over HBM at 2.46 TB/s x 0.85 (the catalog's gaudi2 memory efficiency).
"""

from __future__ import annotations

import msgspec
import pytest
from test_gaudi29 import _row, _validator


def test_gaudi25_runs_the_pipeline_engine_with_one_stage() -> None:
    v = _validator()
    got = v.predict_new_case(_row())
    assert got.settings["pp"] == 1
    assert got.settings["deepspeed_pipeline"] is True  # GPTModelPipe on the PipelineEngine at pp 1
    assert got.settings["dp_overlap"] is False  # enable_backward_allreduce False: ReduceGrads after the last backward
    assert not hasattr(v, "DEEPSPEED_ZERO_NO_OVERLAP")  # one rule (the PipelineEngine's), not two


def test_unfused_accumulation_pass_by_hand() -> None:
    """The step with the PipelineEngine's accumulation pass less the same strategy without it is the autograd add:
    128 micro-batches x 6.74e9 parameters x 3 x 2 B x 127/128 / (2.46e12 B/s x 0.85) = 2.456 s."""
    v = _validator()
    got = v.predict_new_case(_row())
    cluster, wl = v._load_cluster("gaudi2-8"), v._load_workload("llama2-7b")
    with_pass = v.predict(cluster, wl, 8, got.training, got.strategy).step_time_s
    without = v.predict(cluster, wl, 8, got.training,
                        msgspec.structs.replace(got.strategy, deepspeed_pipeline=False)).step_time_s
    m = 1024 // 8
    hand = m * 6.74e9 * 3 * 2 * (m - 1) / m / (2.46e12 * 0.85)
    assert with_pass - without == pytest.approx(hand, rel=0.005)
    assert 1024 * 4096 / 8 / got.predicted == pytest.approx(with_pass, rel=1e-9)
