"""Multi-token prediction modules (workload.mtp_layers): parameters, FLOPs, last-stage time and memory.

DeepSeek-AI 2024 (arXiv:2412.19437) §2.2: each of D modules RMSNorms the previous depth's hidden state and the
shared embedding, projects their concatenation 2h -> h, runs one transformer block and the shared output head.
Megatron-Core (multi_token_prediction.py, core_v0.15.0) builds the block from the decoder's last layer spec, adds
a final norm, and places every module on the last pipeline stage. The values below are computed by hand from
those formulas, not read back from the implementation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute, memory, transformer
from scalemodel.engine import layer_compute, pipeline_ranks, stage_memory, step
from scalemodel.engine.job import build_job, grid_from_strategy, transformer_shape
from scalemodel.specs import load_workload, notices

HF = Path(__file__).parent / "data" / "hf"
H100_BF16 = 989.4e12  # H100 SXM dense BF16, datasheet
H100_HBM = 3.35e12  # H100 SXM HBM3, datasheet


def _small(mtp: int, **kw: Any) -> transformer.Shape:
    # h 8, a = g = 2 (d 4), f 16 SwiGLU (no biases), V 10, untied
    args: dict[str, Any] = dict(layers=2, hidden=8, heads=2, vocab=10, ffn_hidden=16, gated_mlp=True,
                                tied_embeddings=False, mtp_layers=mtp)
    args.update(kw)
    return transformer.shape(**args)


def test_one_dense_module_parameters_by_hand() -> None:
    """Layer: QKV 8 x (8 + 2*8) = 192, O 8 x 8 = 64, norms 2 x 8 = 16, SwiGLU 3 x 8 x 16 = 384 -> 656;
    + eh_proj 2h x h = 16 x 8 = 128 + enorm, hnorm, final norm 3 x 8 = 24 -> 808 per module."""
    sh = _small(1)
    assert float(transformer.mtp_module_params(sh)) == 808.0
    assert float(transformer.mtp_params(_small(3))) == 3 * 808.0
    # the published (main-model) count does not move; the trained count grows by the modules
    assert float(transformer.param_count(sh)) == float(transformer.param_count(_small(0)))
    assert float(transformer.training_param_count(sh) - transformer.param_count(sh)) == 808.0
    assert float(transformer.mtp_params(_small(0))) == 0.0


def test_moe_module_takes_the_last_layers_kind() -> None:
    """MoE: experts 4 of width 8, top-2, 1 shared. Last layer MoE (layers 3, first dense 1, every 1):
    attention 256 + norms 16 + (4 + 1) x 3 x 8 x 8 = 960 + router 8 x 4 = 32 -> 1264, + 128 + 24 = 1416.
    With every 2 and 4 layers the MoE layers sit at positions 3 (1 + 2), the last (4) is dense: 808."""
    moe = dict(moe_experts=4, moe_top_k=2, moe_ffn_hidden=8, moe_shared_experts=1)
    last_moe = _small(1, layers=3, moe_first_dense=1, **moe)
    assert bool(last_moe.last_layer_moe) and float(last_moe.mtp_moe_layers) == 1.0
    assert float(transformer.mtp_module_params(last_moe)) == 1416.0
    last_dense = _small(1, layers=4, moe_first_dense=1, moe_every=2, **moe)
    assert not bool(last_dense.last_layer_moe) and float(last_dense.mtp_moe_layers) == 0.0
    assert float(transformer.mtp_module_params(last_dense)) == 808.0


def test_one_module_forward_flops_by_hand() -> None:
    """s = 4: block GEMMs 2 s (256 + 384) = 5120, core 2 s s a (d + d_v) = 2*4*4*2*8 = 512,
    eh_proj 2 s (2h) h = 2*4*16*8 = 1024, shared head 2 s h V = 2*4*8*10 = 640 -> 7296."""
    s = 4
    base = float(transformer.forward_flops(_small(0), s))
    assert base == 2 * (5120 + 512) + 640  # mtp 0: the layers and the logits only
    assert float(transformer.forward_flops(_small(1), s)) - base == 7296.0
    assert float(transformer.forward_flops(_small(2), s)) - base == 2 * 7296.0
    # training: model 3 x forward; full recompute repeats the block and eh_proj (not the head): 6656 more
    with_mtp = transformer.training_flops(_small(1), s, 1, "full")
    without = transformer.training_flops(_small(0), s, 1, "full")
    assert float(with_mtp.model - without.model) == 3 * 7296.0
    assert float(with_mtp.recompute - without.recompute) == 5120 + 512 + 1024
    sel = transformer.training_flops(_small(1), s, 1, "selective").recompute
    assert float(sel) == 3 * 512.0  # the attention core of 2 layers + 1 MTP block


def test_deepseek_v3_module_matches_the_published_size() -> None:
    """DeepSeek-V3 README_WEIGHTS.md: the one MTP module has "11.5B unique parameters" (the shared embedding and
    head excluded); ours 11.61 B (a 61st MoE layer 11.51 B + eh_proj 0.10 B): within 1.5 % of that rounded
    figure. The main model stays at the published 671 B."""
    sh = transformer_shape(load_workload("deepseek-v3"))
    assert float(sh.mtp_layers) == 1.0
    assert float(transformer.mtp_params(sh)) == pytest.approx(11.5e9, rel=0.015)
    assert float(transformer.param_count(sh)) == pytest.approx(671e9, rel=0.002)


def test_hf_config_reads_num_nextn_predict_layers_without_a_warning(tmp_path: Path) -> None:
    notices.clear()
    w = load_workload(HF / "DeepSeek-V3")
    assert w.mtp_layers == 1
    assert not [n for n in notices.current() if "nextn" in n]
    cfg = json.loads((HF / "DeepSeek-V3" / "config.json").read_text())
    cfg["num_nextn_predict_layers"] = 0
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    assert load_workload(d).mtp_layers == 0


def _job_and_grid(model: str, mtp: int, gpus: int = 1, strategy: dict[str, Any] | None = None) -> tuple[Any, Any]:
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model=model, sets=[],
                                 training={"precision": "bf16", "global_batch": 64, "micro_batch": 1},
                                 strategy=strategy or {})
    wl = wl.model_copy(update={"mtp_layers": mtp})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(st, tr, gpus, job)


def test_last_stage_grows_by_one_block_projection_and_head() -> None:
    """The stage with the logits gains, per module, exactly: the engine's MoE layer (DeepSeek-V3's last layer is
    MoE) priced by compute.layer_compute_time, eh_proj and the norms by hand, and the shared head by hand:

        eh_proj  T x h x 2h: max(2 T h 2h / (P eff), (T 2h + 2h h + T h) 2 B / (HBM mem)),
                 eff = gm T/(T+d0) h/(h+d0) 2h/(2h+d0)
        norms    3 norms x 2 x 2 B x T h + concatenation 4 x 2 B x T h, / (HBM mem)
        head     GEMM max(2 T V h / (P eff), (T h + h V + T V) 2 B / (HBM mem)), 3 x forward + backward, and the
                 default (megatron) cross-entropy's 38 + 14 B a logit, 52 T V / (HBM mem) (tests/test_loss_impl.py)
        forward + backward = 3 x each of the others (no recompute)
    A stage without the logits does not change."""
    job1, g = _job_and_grid("deepseek-v3", 1)
    job0, _ = _job_and_grid("deepseek-v3", 0)
    gm, d0, mem = job1.gemm_max, job1.gemm_half_dim, job1.memory_efficiency  # the catalog's H100 curve
    sh = job1.shape
    T, h, V = float(job1.seq_len), float(sh.hidden), float(sh.vocab)
    eff = gm * T / (T + d0) * h / (h + d0) * 2 * h / (2 * h + d0)
    proj = max(2 * T * h * 2 * h / (H100_BF16 * eff), (T * 2 * h + 2 * h * h + T * h) * 2 / (H100_HBM * mem))
    norms = (3 * 2 * 2 + 4 * 2) * T * h / (H100_HBM * mem)
    eff_v = gm * T / (T + d0) * V / (V + d0) * h / (h + d0)
    head = 3 * max(2 * T * V * h / (H100_BF16 * eff_v), (T * h + h * V + T * V) * 2 / (H100_HBM * mem)) + (
        38 + 14) * T * V / (H100_HBM * mem)
    block = compute.layer_compute_time(sh, micro_batch=1, seq_len=T, peak_flops=H100_BF16,
                                       memory_bandwidth=H100_HBM, gemm_max=gm, gemm_half_dim=d0,
                                       memory_efficiency=mem, moe=True, flash_attention=True, recompute="none",
                                       attention_fwd=job1.attention_fwd, attention_bwd=job1.attention_bwd)
    layers = np.ones(1) * 4
    with_mtp = layer_compute._compute_per_microbatch(job1, g, layers, logits_on_stage=True)["total"]
    without = layer_compute._compute_per_microbatch(job0, g, layers, logits_on_stage=True)["total"]
    # the MoE block's per-expert GEMM calls beyond one per GEMM (all 256 experts on the one GPU: 255 extra calls for
    # FC1 and FC2 forward, their dgrad and wgrad backward), 1.78 us each (docs/model.md#expert-quantize-kernels)
    calls = 255 * (2 + 4) * 1.78e-6
    want = float(np.ravel(block.total)[0]) + 3 * (proj + norms) + head + calls
    assert float((with_mtp - without).ravel()[0]) == pytest.approx(want, rel=1e-9)
    other1 = layer_compute._compute_per_microbatch(job1, g, layers, logits_on_stage=False)["total"]
    other0 = layer_compute._compute_per_microbatch(job0, g, layers, logits_on_stage=False)["total"]
    assert float(other1.ravel()[0]) == float(other0.ravel()[0])


def test_mtp_makes_the_last_stage_the_busiest_and_slows_the_step() -> None:
    """pp 2 of a 2-layer model: each stage 1 layer, the last also the head and the module; its micro-batch is
    the busiest and sets the step, which grows; the untied model now all-reduces the embedding copy's gradient
    (Megatron-Core finalize_model_grads: 'share_embeddings_and_output_weights or mtp_num_layers')."""
    st = {"pp": 2}
    out = {}
    for mtp in (0, 1):
        job, g = _job_and_grid("llama3-8b", mtp, gpus=2, strategy=st)
        job = replace(job, shape=transformer.shape(**{**{f: getattr(job.shape, f) for f in (
            "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "gated_mlp", "tied_embeddings", "biases")},
            "layers": 2, "mtp_layers": mtp}))
        out[mtp] = step.evaluate(job, g)
    t0, t1 = (float(out[m].extras["microbatch_time"].ravel()[0]) for m in (0, 1))
    assert t1 > t0
    assert float(out[1].step_time.ravel()[0]) > float(out[0].step_time.ravel()[0])
    assert float(out[0].breakdown["embed_comm"].ravel()[0]) == 0.0
    assert float(out[1].breakdown["embed_comm"].ravel()[0]) > 0.0


def test_params_on_the_mtp_stage_by_hand() -> None:
    """Dense small model, t = 2, p = 2, last stage of 1 layer with the module, its head and the embedding copy:
    (656 [layer] + 80 [embedding copy V h] + 80 [output head] + 808 [module]) / 2 = 812 if everything split; the
    RMSNorm gains are whole on each TP rank (Megatron-Core's TENorm): the layer's 2 x 8 = 16, the module's block 16
    and enorm, hnorm, final norm 24, and the model's final norm 8 with the head: (1624 + 8 - 64) / 2 + 64 = 848; no MTP
    on a first stage of 1 layer: (656 - 16 + 80) / 2 + 16 = 376."""
    sh = _small(1)
    last = memory.params_per_gpu(sh, tp=2, pp=2, stage_layers=1, embedding=True, head=True, mtp_modules=1)
    assert float(last.dense) == (656 + 80 + 80 + 808 + 8 - 64) / 2 + 64 and float(last.expert) == 0.0
    first = memory.params_per_gpu(sh, tp=2, pp=2, stage_layers=1)
    assert float(first.dense) == 376.0


def _case(cid: str) -> dict[str, Any]:
    from conftest import load_yaml

    cases = load_yaml(Path(__file__).parents[1] / "validation" / "training_cases.yaml")
    return next(c for c in cases if c["id"] == cid)


def test_validator_gives_the_dsv3_rows_their_mtp_modules() -> None:
    """The 'w/ MTP' B200 row gets deepseek-v3 with one module and its recipe's [4 ... 1] stage layout and is
    compared (no longer held out); the GB200 row labelled 'w/o MTP' none; the DeepSeek report's own run stays
    listed for DualPipe, routing and its batch ramp, no longer for MTP."""
    from conftest import script_module

    vt = script_module("validate_training")
    b200 = _case("mb2511_b200_dsv3_mtp_fp8mx")
    wl, how = vt.case_workload(b200)
    assert (how, wl.mtp_layers) == ("deepseek-v3", 1)
    res = vt.predict_new_case(b200)
    assert isinstance(res, vt.CaseResult) and res.settings["first_last_stage_layers"] == [4, 1]
    assert "held_out" not in b200
    gb200, _ = vt.case_workload(_case("mb2511_gb200_dsv3_bf16"))
    assert gb200.mtp_layers == 0
    h800 = vt.predict_new_case(_case("dsv3_h800_2048"))
    assert isinstance(h800, vt.NotExpressed)
    assert "DualPipe" in h800.reason and "multi-token" not in h800.reason


def test_activations_of_the_mtp_stage_by_hand() -> None:
    """One module on a stage without a pipeline (p = 1, b = 1, s = 4, t = 1, no recompute): the stage keeps one
    more layer of the last kind (the engine's per-layer activation, priced on its own), the inputs of enorm,
    hnorm, eh_proj (2h) and the final norm, 5 x 2 s b h = 5 x 2 x 4 x 8 = 320 bytes, one more head's fp32
    logits 4 s b V = 4 x 4 x 10 = 160 bytes, and the shared output layer's input once more, 2 s b h = 64 bytes
    (outside the checkpointed layers: kept under full recompute too)."""
    kw: dict[str, Any] = dict(micro_batch=1, seq_len=4, tp=1, pp=1)
    sh = _small(1)
    layer = float(memory.activation_bytes_per_layer(sh, micro_batch=1, seq_len=4))
    delta = float(memory.activation_bytes(sh, mtp_modules=1, **kw) - memory.activation_bytes(sh, **kw))
    assert delta == pytest.approx(layer + 320.0 + 160.0 + 64.0, rel=1e-12)
    # full recompute: the module keeps its input only, 2 s b h = 64 bytes, and its block's recompute row
    full = float(memory.activation_bytes(sh, mtp_modules=1, recompute="full", **kw)
                 - memory.activation_bytes(sh, recompute="full", **kw))
    row = float(memory.activation_bytes_per_layer(sh, micro_batch=1, seq_len=4, recompute="full"))
    assert full == pytest.approx(row + 64.0 + 160.0 + 64.0, rel=1e-12)


def test_memory_takes_the_last_stage_when_it_is_heavier() -> None:
    """pp 2 of a 2-layer model with a large vocabulary: the last stage (its layer, the module, the output layer,
    the embedding copy and two heads' logits) holds more than the first; memory_parts reports it, as
    memory_per_gpu prices that stage."""
    job, g = _job_and_grid("llama3-8b", 1, gpus=2, strategy={"pp": 2})
    job = replace(job, shape=transformer.shape(**{**{f: getattr(job.shape, f) for f in (
        "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "gated_mlp", "tied_embeddings", "biases")},
        "layers": 2, "mtp_layers": 1, "dropout": False}))
    m = pipeline_ranks.microbatches(g)
    parts = stage_memory.memory_parts(job, g, m)
    common = dict(micro_batch=1, seq_len=job.seq_len, dp=1, tp=1, pp=2, num_microbatches=m, weight_bytes=job.elem_bytes,
                  grad_bytes=job.grad_bytes, optimizer_bytes=job.optimizer_bytes_per_param, flash_attention=True,
                  stage_layers=1.0)
    first = memory.memory_per_gpu(job.shape, **common)
    last = memory.memory_per_gpu(job.shape, embedding=True, head=True, stage_rank=1, mtp_modules=1, **common)
    assert float(np.ravel(last.total)[0]) > float(np.ravel(first.total)[0])
    assert float(np.ravel(parts["total"])[0]) == pytest.approx(float(np.ravel(last.total)[0]), rel=1e-12)
