"""Modern attention and block shapes: multi-head latent attention, multi-query attention, the parallel
attention + MLP block and sliding-window attention, checked against hand counts from the published
architectures and against the published parameter counts."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.collectives import collective_time
from scalemodel.cost.compute import layer_compute_time, logits_compute_time
from scalemodel.cost.transformer import (
    active_param_count,
    attention_core_flops,
    attention_params,
    param_count,
    tp_allreduces_per_layer,
)
from scalemodel.engine.job import build_job, grid_from_strategy, transformer_shape
from scalemodel.engine.step import evaluate
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _shape(name: str):
    return transformer_shape(load_workload(name))


def test_mla_attention_parameters_by_hand():
    # DeepSeek-V3 (arXiv:2412.19437 §2.1.1, HF config): h 7168, 128 heads, r_q 1536, r_kv 512,
    # d_nope 128, d_rope 64, d_v 128.
    by_hand = (7168 * 1536            # W_DQ
               + 1536 * 128 * 192     # W_UQ and W_QR (nope + rope per head)
               + 7168 * (512 + 64)    # W_DKV and the shared rotary key W_KR
               + 512 * 128 * (128 + 128)  # W_UK and W_UV
               + 128 * 128 * 7168     # W_O
               + 1536 + 512)          # RMSNorm gains of the two latents
    assert float(attention_params(_shape("deepseek-v3"))) == by_hand


def test_deepseek_v3_counts_match_published():
    sh = _shape("deepseek-v3")
    assert float(param_count(sh)) == pytest.approx(671e9, rel=0.002)  # 671 B total (report abstract)
    # 37 B activated; our active count includes both (untied) embedding matrices (1.85 B)
    assert float(active_param_count(sh)) == pytest.approx(37e9, rel=0.02)


def test_mla_core_flops_use_qk_and_v_widths():
    sh = _shape("deepseek-v3")
    s = 4096.0
    # Q K^T: 2 s^2 a (d_nope + d_rope); softmax . V: 2 s^2 a d_v
    assert float(attention_core_flops(sh, s)) == 2 * s * s * 128 * 192 + 2 * s * s * 128 * 128


def test_falcon_parallel_block_and_multi_query_by_hand():
    # Falcon-7B: fused QKV 4544 x (71 + 2) * 64, O 4544^2, MLP 2 x 4544 x 18176, one LayerNorm (weight and bias:
    # review32b, norm_biases), no linear biases, tied 65024 x 4544 embedding, final LayerNorm.
    per_layer = 4544 * (71 + 2) * 64 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    by_hand = 32 * per_layer + 65024 * 4544 + 2 * 4544
    sh = _shape("falcon-7b")
    assert float(param_count(sh)) == by_hand
    assert by_hand == 6_921_720_704  # tiiuae/falcon-7b safetensors total


@pytest.mark.parametrize("name, published", [("gpt-j-6b", 6_053_381_344), ("mistral-7b", 7_241_732_096)])
def test_published_parameter_counts(name, published):
    assert float(param_count(_shape(name))) == pytest.approx(published, rel=0.01)


def test_sliding_window_core_flops_by_hand():
    sh = _shape("mistral-7b")
    # every layer attends at most w = 4096 keys: below the window the full s^2 count, above it s w
    d = 128
    assert float(attention_core_flops(sh, 2048)) == 4 * 2048 * 2048 * 32 * d
    assert float(attention_core_flops(sh, 8192)) == 4 * 8192 * 4096 * 32 * d


def test_sliding_window_pattern_mixes_local_and_global_layers():
    from scalemodel.cost.transformer import shape

    # Gemma 2 style: 42 layers, 1 in 2 global; 21 local layers at w = 1024, 21 global at s = 8192
    sh = shape(layers=42, hidden=3584, heads=16, vocab=256000, head_dim=256, sliding_window=1024,
               sliding_window_pattern=2)
    s = 8192.0
    mean_keys = (21 * 1024 + 21 * 8192) / 42
    assert float(attention_core_flops(sh, s)) == pytest.approx(4 * s * mean_keys * 16 * 256, rel=1e-12)


def test_parallel_block_halves_tensor_parallel_reductions():
    assert float(tp_allreduces_per_layer(_shape("falcon-7b"))) == 1.0
    assert float(tp_allreduces_per_layer(_shape("llama2-7b"))) == 2.0


def _predict(model, *sets):
    cl = load_cluster("dgx-a100")
    wl = load_workload(model, sets)
    tr = TrainingSpec(global_batch=64, micro_batch=1)
    job = build_job(cl, wl, tr)
    st = StrategySpec(tp=8)
    return evaluate(job, grid_from_strategy(st, tr, 64, job))


def test_parallel_block_step_pays_half_the_exposed_tensor_parallel_forward():
    # Same model with and without the parallel formulation: compute differs only by the second norm's memory-bound
    # bytes (layer_impl megatron_te, docs/model.md#layer-eltwise: forward 2 eb h, backward 3 eb h per token; GPT-J
    # 6B h 4096, s 2048, 28 layers, tp 8 without SP so the norm acts on all of h; 8 micro-batches of 1 on a DP 8
    # replica; A100 2.039 TB/s x the ampere memory default 0.85), and the exposed forward TP time halves exactly (one
    # reduction of the summed outputs instead of two).
    par = _predict("gpt-j-6b")
    seq = _predict("gpt-j-6b", "parallel_block=false", "norms_per_layer=2")
    norm = (2 + 3) * 2 * 4096 * 2048 * 28 * 8 / (2.039e12 * 0.85)
    assert float(seq.breakdown["compute"][0]) - float(par.breakdown["compute"][0]) == pytest.approx(norm, rel=1e-9)
    # both also all-reduce the word embedding's output once a micro-batch (docs/model.md#embedding-tp-comm), and the
    # output layer's input gradient beyond the output GEMM that hides it, with the loss's 3 all-reduces of s fp32
    # values (docs/model.md#output-tp-comm)
    job = build_job(load_cluster("dgx-a100"), load_workload("gpt-j-6b"), TrainingSpec(global_batch=64))
    network = job.network
    ar = float(np.ravel(collective_time("allreduce", 2048 * 4096 * 2.0, 8, network, stride=1))[0])
    kw = dict(micro_batch=1, seq_len=2048, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
              gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency, tp=8)
    gemm = float(np.ravel(logits_compute_time(job.shape, **kw).forward_gemm)[0])
    loss = 3.0 * float(np.ravel(collective_time("allreduce", 2048 * 4.0, 8, network, stride=1))[0])
    emb = 8 * (ar + max(ar - gemm, 0.0) + loss)
    # The backward (tp34, docs/model.md#tp34-parallel): the sequential block's two column-parallel linears (QKV 3 h^2,
    # FC1 4 h^2 of the layer's 12 h^2 weight-GEMM FLOPs) each all-reduce their input gradient under their own
    # weight-gradient GEMM (NVIDIA/TransformerEngine@c55e425ac5 pytorch/module/linear.py L582-588 / L676-679): 3/12 G
    # and 4/12 G, an excess each. The parallel block runs GPT-NeoX's linears (EleutherAI/gpt-neox@ea7aefd8f8
    # megatron/model/transformer.py L951-959 / L1117-1118, mpu/layers.py L556-565, mpu/mappings.py L283-296): one
    # all-reduce of the summed outputs forward, and in the backward each column-parallel linear's
    # _CopyToModelParallelRegion all-reduces its input gradient, blocking: two a layer, none hidden.
    g_layer = float(np.ravel(layer_compute_time(job.shape, flash_attention=True, **kw).forward_gemm)[0])
    fwd = {1: 28 * ar, 2: 2 * 28 * ar}
    bwd = {1: 2 * 28 * ar, 2: 28 * (max(ar - 3 / 12 * g_layer, 0.0) + max(ar - 4 / 12 * g_layer, 0.0))}
    assert 0.0 < bwd[2] < bwd[1]
    assert float(par.breakdown["tp_comm"][0]) == pytest.approx(emb + 8 * (fwd[1] + bwd[1]), rel=1e-9)
    assert float(seq.breakdown["tp_comm"][0]) == pytest.approx(emb + 8 * (fwd[2] + bwd[2]), rel=1e-9)
    # the claim: the parallel block's exposed forward is half the sequential one's
    assert float(par.breakdown["tp_comm"][0]) - emb - 8 * bwd[1] == pytest.approx(
        0.5 * (float(seq.breakdown["tp_comm"][0]) - emb - 8 * bwd[2]), rel=1e-9)


def test_mla_is_not_priced_as_ordinary_attention():
    # Without MLA the same shape would have 128 heads of 7168 / 128 = 56: fewer attention weights and
    # a smaller QK width, so both the parameters and the attention-core FLOPs differ.
    mla = _shape("deepseek-v3")
    from scalemodel.cost.transformer import shape

    plain = shape(layers=61, hidden=7168, heads=128, vocab=129280, ffn_hidden=18432, gated_mlp=True,
                  tied_embeddings=False)
    assert float(attention_params(plain)) == 4 * 7168**2  # the old approximation: 18.4 M more per layer
    assert float(attention_params(plain)) - float(attention_params(mla)) == 4 * 7168**2 - 187_107_328
    assert np.all(attention_core_flops(mla, 4096) > attention_core_flops(plain, 4096))
