"""Each pipeline rank's own parameters (docs/model.md#rank-params): its decoder layers, the word embedding on rank 0,
the final norm and the output layer on the last rank (tied: Megatron-Core's own copy there, its gradient all-reduced
over the embedding group, model_parallel_comm.tied_embedding_allreduce), counted here by hand from the model's shape;
the data-parallel sync and the optimizer step are those of the rank holding the most.

nanotron's 1.34B Llama (validation/training_cases.yaml nanotron25_h100_1b_*: 16 layers, h 2048, 32 heads = kv heads,
f 8192, V 131072, tied) ran 10/6 at pp 2 (tests/test_review17d.py: its logged rank-0 Local Params 940M). A layer is
4 h^2 (q, k, v, o) + 3 h f (gated MLP) + 2 h (two RMSNorms) = 67,112,960; the embedding V h = 268,435,456; so rank 0
holds 10 x 67.11M + 268.4M = 939.6M, the last 6 x 67.11M + 268.4M + h = 671.1M, where the old layer share of the
whole model (n / L x P) put 839M on rank 0."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.engine import pipeline_ranks, step
from scalemodel.engine.job import build_job, grid_from_strategy

H, F, V, HEADS, L = 2048, 8192, 131072, 32, 16
LAYER = 4 * H * H + 3 * H * F + 2 * H
EMB = V * H
MODEL = dict(kind="transformer", name="nanotron-1.34b", layers=L, hidden=H, heads=HEADS, kv_heads=HEADS,
             ffn_hidden=F, vocab=V, seq_len=4096, gated_mlp=True, tied_embeddings=True)


def _job_grid(gpus: int = 4, model: dict | None = None, **strategy):
    tr = training_spec(global_batch=64, micro_batch=1, precision="bf16")
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model or MODEL), tr)
    return job, grid_from_strategy(strategy_spec(**strategy), tr, gpus, job)


def _rank(job, g, n: float, r: int) -> float:
    dense, expert = pipeline_ranks._rank_params_per_gpu(job, g, np.full(1, float(n)), np.full(1, float(r)))
    return float(np.ravel(dense + expert)[0])


def test_layer_and_embedding_are_the_shapes():
    assert LAYER == 67_112_960 and EMB == 268_435_456
    job, _g = _job_grid(pp=1)
    assert job.params == L * LAYER + EMB + H  # tied: one V h; the final norm h


@pytest.mark.parametrize("tp", [1, 2])
def test_nanotron_10_6_ranks_by_hand(tp):
    job, g = _job_grid(gpus=2 * tp, pp=2, tp=tp, stage_layers=[10, 6])
    norms = 2 * H  # the RMSNorms are whole on every TP rank
    assert _rank(job, g, 10, 0) == pytest.approx((10 * (LAYER - norms) + EMB) / tp + 10 * norms, rel=1e-12)
    assert _rank(job, g, 6, 1) == pytest.approx((6 * (LAYER - norms) + EMB) / tp + 6 * norms + H, rel=1e-12)
    if tp == 1:
        assert _rank(job, g, 10, 0) == pytest.approx(939.56e6, rel=1e-5)  # the job's logged 940M
    # the old share of the whole model: 10 / 16 x 2 ranks x P / 2 = 839M at tp 1, a tenth less
    assert _rank(job, g, 10, 0) > 1.11 * (10 / L) * job.params / tp


def test_the_dp_rank_of_10_6_is_rank_0_and_the_optimizer_its_own():
    """ZeRO 0, one data-parallel replica per stage: the optimizer reads and writes 2 K + g + 6 bytes per parameter of
    rank 0 (it holds the most), here against the same model on one stage (every parameter), as the ratio of the
    hand counts."""
    job, g = _job_grid(gpus=2, pp=2, stage_layers=[10, 6])
    picks = pipeline_ranks._dp_ranks(job, g, pipeline_ranks._rank_layers(job, g))
    assert [r for _on, _sp, r in picks] == [0]
    res = step.evaluate(job, g)
    job1, g1 = _job_grid(gpus=1, pp=1)
    one = step.evaluate(job1, g1)
    ratio = float(res.breakdown["optimizer"][0]) / float(one.breakdown["optimizer"][0])
    assert ratio == pytest.approx((10 * LAYER + EMB) / (L * LAYER + EMB + H), rel=1e-9)
    # first/last_stage_layers say the same split: the same optimizer (and every other term)
    job_f, g_f = _job_grid(gpus=2, pp=2, first_stage_layers=10)
    res_f = step.evaluate(job_f, g_f)
    for k in res.breakdown:
        assert float(res_f.breakdown[k][0]) == pytest.approx(float(res.breakdown[k][0]), rel=1e-12, abs=1e-15), k


def test_balanced_split_prices_the_rank_with_the_embedding():
    """8/8 at pp 2: rank 0 holds 8 layers + V h, the last 8 layers + its V h copy + the final norm h: the last holds
    the most (by h), and its data-parallel all-reduce (ZeRO 0) moves its own gradients, not half the model's."""
    job, g = _job_grid(gpus=2, pp=2)
    d = step._dp_rank(job, g, *pipeline_ranks._stage_layers(job, g))
    assert d is not None
    assert float(np.ravel(d[0])[0]) == 8.0 and float(np.ravel(d[1])[0]) == 1.0
    assert _rank(job, g, 8, 1) == 8 * LAYER + EMB + H
    # against the old n / L x P (half the model): the copy's V h and the final norm, each halved
    assert _rank(job, g, 8, 1) - job.params / 2 == pytest.approx((EMB + H) / 2, rel=1e-12)


def test_untied_middle_ranks_hold_no_embedding():
    model = dict(MODEL, tied_embeddings=False)
    job, g = _job_grid(gpus=4, model=model, pp=4)
    assert _rank(job, g, 4, 0) == 4 * LAYER + EMB
    assert _rank(job, g, 4, 1) == _rank(job, g, 4, 2) == 4 * LAYER
    assert _rank(job, g, 4, 3) == 4 * LAYER + EMB + H
    assert job.params == 16 * LAYER + 2 * EMB + H  # the four ranks add up to the model, the tied copy aside


def test_one_stage_is_the_whole_model():
    for tied in (True, False):
        job, g = _job_grid(gpus=2, model=dict(MODEL, tied_embeddings=tied), pp=1, tp=2)
        dense, expert = pipeline_ranks._params_per_gpu(job, g)
        got = pipeline_ranks._rank_params_per_gpu(job, g, np.full(1, float(L)), np.zeros(1))
        assert float(np.ravel(got[0])[0]) == float(np.ravel(dense)[0])
        assert float(np.ravel(got[1])[0]) == float(np.ravel(expert)[0])


@pytest.mark.parametrize("tied", [True, False])
def test_mtp_last_rank_holds_the_embedding_copy_and_its_own_output_weight(tied):
    """The 1.34B with one MTP module at pp 2, ranks 10/6, tp 1 (review18a). Megatron-Core's last stage builds the word
    embedding for MTP ("if self.pre_process or self.mtp_process") and its output_layer with a weight of its own
    (skip_weight_param_allocation = pre_process and tied: false on the last stage), tied or not
    (NVIDIA/Megatron-LM@d98e8a64dd gpt_model.py lines 173-174, 277-291): 6 layers + 2 V h + the final norm h + the
    module. One dense MTP module: its layer (a LAYER) + eh_proj 2h x h + enorm, hnorm and its final norm 3 h
    (tests/test_mtp.py's count). Tied, the copy was taken for the output weight: V h short."""
    module = LAYER + 2 * H * H + 3 * H
    job, g = _job_grid(pp=2, stage_layers=[10, 6], model=dict(MODEL, tied_embeddings=tied, mtp_layers=1))
    assert _rank(job, g, 6, 1) == 6 * LAYER + 2 * EMB + H + module
    assert _rank(job, g, 10, 0) == 10 * LAYER + EMB
