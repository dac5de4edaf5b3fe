"""LatentMoE (``moe.latent_size``; Nemotron 3 Super): values computed by hand from the layer's GEMMs as Megatron-Core
builds them (megatron/core/transformer/moe/moe_layer.py ``fc1_latent_proj`` / ``fc2_latent_proj``, experts.py at
NVIDIA/Megatron-LM d98e8a64dd) and Megatron-LM's own FLOP count (megatron/training/training.py ``moe_layer_flops``)."""

from __future__ import annotations

import json

import msgspec
import pytest
from conftest import ROOT

from scalemodel.cost import collectives as coll
from scalemodel.cost import compute, memory
from scalemodel.cost import transformer as tr
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_job, grid_from_strategy, transformer_shape
from scalemodel.engine.network import build_network
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

# a small MoE layer: h 64, 4 heads of 16, E 8 experts of f_e 16, k 2, one shared expert, ungated, no biases
SMALL = dict(layers=2, hidden=64, heads=4, vocab=100, ffn_hidden=32, gated_mlp=False, moe_experts=8, moe_top_k=2,
             moe_ffn_hidden=16, moe_shared_experts=1, biases=False, tied_embeddings=True)


def test_small_layer_params_by_hand() -> None:
    """Attention 4 h^2 = 16384, 2 RMSNorms 128, routed 8 x 2 x l f_e = 8 x 2 x 16 x 16 = 4096 (at l = 16, not h),
    shared 2 h f_e = 2048, router h E = 512, projections 2 h l = 2048: 25216 (21760 + 8 x 2 x 48 x 16 = 37888
    without the latent width: experts 2 x 64 x 16 each and no projections)."""
    lat = tr.shape(**SMALL, moe_latent=16)
    full = tr.shape(**SMALL)
    assert float(tr.layer_params(lat, moe=True)) == 16384 + 128 + 4096 + 2048 + 512 + 2048
    assert float(tr.layer_params(full, moe=True)) == 16384 + 128 + 8 * 2 * 64 * 16 + 2048 + 512
    # active: k = 2 routed experts of 2 x 16 x 16
    assert float(tr.layer_params(lat, moe=True, active=True)) == 16384 + 128 + 2 * 512 + 2048 + 512 + 2048
    assert float(tr.expert_params_per_layer(lat)) == 4096
    # every MoE layer (first_dense 0, every 1: both) + tied embedding 6400 + final norm 64
    assert float(tr.param_count(lat)) == 2 * 25216 + 6400 + 64


def test_small_layer_flops_by_hand_and_megatron_formula() -> None:
    """2 s (k 2 l f_e + S 2 h f_e + h E + 2 h l) = 20 (1024 + 2048 + 512 + 2048) = 112640 at s = 10; Megatron-LM's
    moe_layer_flops terms (4 T l f_e k routed, 4 T h l for the two projections, 4 T h f_s shared, each 2 FLOPs per
    multiply-accumulate of an ungated MLP's two GEMMs) + the router 2 T h E give the same."""
    lat = tr.shape(**SMALL, moe_latent=16)
    s = 10
    assert float(tr.mlp_gemm_flops(lat, s, moe=True)) == 2 * s * (2 * 2 * 16 * 16 + 2 * 64 * 16 + 64 * 8 + 2 * 64 * 16)
    megatron = 4 * s * 16 * 16 * 2 + 4 * s * 64 * 16 + 4 * s * 64 * 16 + 2 * s * 64 * 8
    assert float(tr.mlp_gemm_flops(lat, s, moe=True)) == megatron


def test_layer_compute_flops_count_the_latent_gemms() -> None:
    """layer_compute_time's forward FLOPs on one GPU (tp 1, ep 1, T = b s = 10) for the MoE block alone: router
    2 T h E + routed experts 2 T k f_e l (up + down) + shared 2 T f_s h x 2 + projections 2 x 2 T h l."""
    lat = tr.shape(**SMALL, moe_latent=16)
    T = 10
    kw = dict(micro_batch=1, seq_len=T, peak_flops=1e15, memory_bandwidth=1e12, moe=True, attention=False)
    got = float(compute.layer_compute_time(lat, **kw).forward_flops)
    hand = 2 * T * 64 * 8 + 2 * T * 2 * 16 * 16 * 2 + 2 * T * 16 * 64 * 2 + 4 * T * 64 * 16
    assert got == hand


def test_none_is_the_model_of_today() -> None:
    """latent_size None builds the shape of a model without the field (moe_latent 0, experts at h): the published
    Nemotron 3 Nano count, 31.58 B (examples/workloads/nemotron-3-nano.yaml: 31.6 B in arXiv 2512.20848)."""
    import yaml

    nano = msgspec.convert(yaml.safe_load((ROOT / "examples/workloads/nemotron-3-nano.yaml").read_text()),
                           TransformerWorkload)
    assert nano.moe is not None and nano.moe.latent_size is None
    sh = transformer_shape(nano)
    assert float(sh.moe_latent) == 0.0
    assert float(sh.moe_width) == 2688
    assert float(tr.param_count(sh)) == pytest.approx(31.58e9, rel=5e-4)


def test_activation_bytes_by_hand() -> None:
    """An MoE block's split activations, bf16, s b = 10 tokens, tp 1, no recompute: routed k (2 s b l [input] +
    (2 + 2) s b f_e [GeLU input, fc2 input]) + shared (2 + 2) s b f_s + fc2_latent_proj's input 2 s b l; the
    latent width replaces h in the routed inputs."""
    kw = dict(micro_batch=1, seq_len=10, moe=True, attention=False)
    lat = float(memory.activation_bytes_per_layer(tr.shape(**SMALL, moe_latent=16), **kw))
    full = float(memory.activation_bytes_per_layer(tr.shape(**SMALL), **kw))
    sb = 10
    assert full - lat == pytest.approx(2 * 2 * sb * (64 - 16) - 2 * sb * 16)


def test_duplicated_projections_are_not_split_by_tp() -> None:
    """params_per_gpu: the 2 h l projections stay whole on every TP rank (parallel_mode "duplicated"), as do the
    other weights Megatron-Core builds whole there (each layer's two RMSNorm gains 2 h and router h E, the final
    norm h); the rest of the non-expert weights / t."""
    lat = tr.shape(**SMALL, moe_latent=16)
    full_tp1 = memory.params_per_gpu(lat, tp=1)
    tp2 = memory.params_per_gpu(lat, tp=2)
    proj = 2 * 2 * 64 * 16  # 2 MoE layers x 2 h l
    whole = proj + 2 * (2 * 64 + 64 * 8) + 64
    assert float(tp2.dense) == pytest.approx((float(full_tp1.dense) - whole) / 2 + whole)


QWEN_LIKE = dict(name="q", layers=8, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144, gated_mlp=True,
                 vocab=151936, seq_len=4096, tied_embeddings=False)


def _ep_comm(latent: int | None) -> float:
    cl = load_cluster("dgx-h100")
    tr_ = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096,
                      moe_rank_imbalance=1.0)  # the mean rank, as priced by hand (busiest: test_moe_routing_imbalance)
    moe = {"experts": 128, "top_k": 8, "ffn_hidden": 768}
    if latent:
        moe["latent_size"] = latent
    job = build_job(cl, TransformerWorkload(**QWEN_LIKE, moe=moe), tr_)
    res = evaluate(job, grid_from_strategy(StrategySpec(tp=1, pp=1, ep=16, dp=16), tr_, 16, job))
    return float(res.breakdown["ep_comm"][0])


def test_dispatch_bytes_scale_by_latent_over_hidden() -> None:
    """The NCCL all-to-all carries T k l bytes instead of T k h: ep_comm's ratio is the all-to-all time's at
    x l / h, the dispatcher's width-free probabilities and counts added to both (the same micro-batches and MoE
    layers multiply both)."""
    net = build_network(load_cluster("dgx-h100"))
    pl = place(16, 1, net)
    x = 4096 * 8 * 2048 * 2.0
    # the alltoall dispatcher's probabilities (4096 x 8 rows of 2 bytes) and counts (16 ranks x 128 int64) do not
    # scale with the width: half and a quarter of their collectives on each of the 4 calls
    # (docs/model.md#ep-probs-counts)
    extra = (0.5 * float(coll.group_time("alltoall", 4096 * 8 * 2.0, pl))
             + 0.25 * float(coll.group_time("allgather", 16 * 128 * 8.0, pl)))
    want = (float(coll.group_time("alltoall", x * 512 / 2048, pl)) + extra) \
        / (float(coll.group_time("alltoall", x, pl)) + extra)
    assert _ep_comm(512) / _ep_comm(None) == pytest.approx(want, rel=1e-9)


def test_spec_and_hf_checks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="latent_size"):
        msgspec.convert({**QWEN_LIKE, "moe": {"experts": 8, "top_k": 2, "latent_size": 2048}}, TransformerWorkload)
    with pytest.raises(InputError):
        tr.shape(**SMALL, moe_latent=64)
    from scalemodel.specs import load_workload

    cfg = {"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 2,
           "head_dim": 128, "vocab_size": 131072, "hybrid_override_pattern": "M*E", "intermediate_size": 2688,
           "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
           "moe_latent_size": 1024, "mlp_hidden_act": "relu2", "max_position_embeddings": 8192}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    w = load_workload(p)
    assert w.moe is not None and w.moe.latent_size == 1024


def _super() -> TransformerWorkload:
    import yaml

    return msgspec.convert(yaml.safe_load((ROOT / "examples/workloads/nemotron-3-super.yaml").read_text()),
                           TransformerWorkload)


def test_nemotron_3_super_trains_the_checkpoints_weights() -> None:
    """Megatron-Bridge 4ab94dfad's verification card counts 123,611,033,088 checkpoint elements "including the 41 FP32
    router correction-bias tensors" (41 x 512 = 20,992 buffers, not trained): 123,611,012,096 trained weights, the
    main model's and its one MTP module's (run twice: mtp_shared). The module: a *E block (attention + MoE, two
    pre-norms) + eh_proj 2 h^2 + 3 norms = layer_params(MoE) + 2 h^2 + 4 h."""
    sh = transformer_shape(_super())
    h = 4096
    assert float(tr.training_param_count(sh)) == 123_611_033_088 - 41 * 512
    assert float(tr.mtp_module_params(sh)) == float(tr.layer_params(sh, moe=True)) + 2 * h * h + 4 * h
    assert float(tr.training_param_count(sh) - tr.param_count(sh)) == float(tr.mtp_module_params(sh))


def test_shared_mtp_module_counts_weights_once_and_compute_per_pass() -> None:
    """mtp_shared (Megatron-Core mtp_use_repeated_layer): D = 2 passes of one module: parameters (and the routed
    experts the job shards) of one module, forward FLOPs of two (each pass: block + eh_proj + the shared head)."""
    w = _super()
    one = transformer_shape(w.model_copy(update={"mtp_layers": 1}))
    two = transformer_shape(w)
    none = transformer_shape(w.model_copy(update={"mtp_layers": 0}))
    s = 8192
    assert float(tr.training_param_count(two)) == float(tr.training_param_count(one))
    per_pass = float(tr.forward_flops(one, s) - tr.forward_flops(none, s))
    assert per_pass == float(tr.mtp_block_flops(one, s) + tr.mtp_projection_flops(one, s) + tr.logits_flops(one, s))
    assert float(tr.forward_flops(two, s) - tr.forward_flops(none, s)) == pytest.approx(2 * per_pass, rel=1e-12)
    d1 = memory.params_per_gpu(one, mtp_modules=1.0)
    d2 = memory.params_per_gpu(two, mtp_modules=2.0)
    assert float(d2.dense) == float(d1.dense) and float(d2.expert) == float(d1.expert)


def test_hybrid_mtp_needs_its_block_pattern() -> None:
    w = _super()
    assert w.hybrid is not None
    with pytest.raises(Exception, match="mtp_layers"):
        msgspec.convert({**msgspec.to_builtins(w), "hybrid": {**msgspec.to_builtins(w.hybrid), "mtp_pattern": None}},
                        TransformerWorkload)
    with pytest.raises(Exception, match="mtp_pattern"):
        msgspec.convert({**msgspec.to_builtins(w), "hybrid": {**msgspec.to_builtins(w.hybrid), "mtp_pattern": "*-"}},
                        TransformerWorkload)


def test_super_hf_config_reads_latent_and_mtp(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The Super config.json's keys (as the HF model card publishes them) give the example workload's shape, with one
    MTP module (num_nextn_predict_layers 1; the recipes' two passes are a training choice, mtp_shared)."""
    from scalemodel.specs import load_workload

    cfg = {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hidden_size": 4096,
           "num_hidden_layers": 88, "hybrid_override_pattern": _super().hybrid.pattern,  # type: ignore[union-attr]
           "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
           "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
           "chunk_size": 128, "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
           "moe_latent_size": 1024, "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 5376,
           "mlp_hidden_act": "relu2", "intermediate_size": 2688, "tie_word_embeddings": False,
           "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E", "max_position_embeddings": 8192,
           "use_bias": False, "attention_bias": False, "mlp_bias": False, "hidden_dropout": 0.0,
           "attention_dropout": 0.0}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    w = load_workload(p)
    assert w.moe is not None and w.moe.latent_size == 1024 and w.moe.shared_experts == 2
    assert w.hybrid is not None and w.hybrid.mtp_pattern == "*E" and w.mtp_layers == 1
    assert float(tr.training_param_count(transformer_shape(w))) == 123_611_033_088 - 41 * 512


@pytest.mark.parametrize("change, block", [({"mtp_hybrid_override_pattern": None}, "*E"),
                                           ({"mtp_layers_block_type": ["full_attention", "moe"],
                                             "mtp_hybrid_override_pattern": None}, "*E")])
def test_hf_mtp_block_forms(tmp_path, change, block) -> None:  # type: ignore[no-untyped-def]
    """transformers' NemotronHConfig (13923c63d): mtp_layers_block_type, the legacy mtp_hybrid_override_pattern, and
    the default ["full_attention", "moe"] all give the *E block; another block is refused at its key."""
    from scalemodel.specs import load_workload

    base = {"model_type": "nemotron_h", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 1024, "hybrid_override_pattern": "M*E", "mamba_num_heads": 8,
            "mamba_head_dim": 64, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
            "moe_latent_size": 64, "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "*E",
            "max_position_embeddings": 1024}
    cfg = {k: v for k, v in {**base, **change}.items() if v is not None}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    w = load_workload(tmp_path / "config.json")
    assert w.hybrid is not None and w.hybrid.mtp_pattern == block and w.moe is not None and w.moe.latent_size == 64
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "mtp_layers_block_type": ["linear_attention", "moe"]}))
    with pytest.raises(InputError) as e:
        load_workload(tmp_path / "config.json")
    assert e.value.where.endswith("mtp_layers_block_type")


def test_step_holds_the_duplicated_projections_whole_per_tp_rank() -> None:
    """The step's per-GPU parameters (DP gradient bytes, optimizer passes, grad-buffer zeroing) keep LatentMoE's
    projections whole on every TP rank, as cost.memory.params_per_gpu does: Nemotron 3 Super, 2 h l = 2 x 4096 x
    1024 in each E layer of its pattern and in its one (shared) *E MTP module, with the other weights every TP rank
    holds whole: each of the 88 layers' pre-norm h, each E layer's router h E (E = 512), the final norm h, and the
    module's five norms (the *E block's two pre-norms, enorm, hnorm, its final norm) and router; the rest of the
    dense weights / tp."""
    from scalemodel.engine import pipeline_ranks

    w = _super()
    assert w.hybrid is not None
    n_e = w.hybrid.pattern.count("E")
    h, e = 4096, 512
    dup = 2 * h * 1024 * (n_e + 1) + 88 * h + h * e * (n_e + 1) + h + 5 * h
    tr_ = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-b200"), w, tr_)
    d1, e1 = pipeline_ranks._params_per_gpu(job, grid_from_strategy(StrategySpec(tp=1, ep=8, dp=8), tr_, 8, job))
    d2, e2 = pipeline_ranks._params_per_gpu(job, grid_from_strategy(StrategySpec(tp=2, ep=8, etp=1, dp=4,
                                                                       sequence_parallel=True), tr_, 8, job))
    assert float(d2) == pytest.approx((float(d1) - dup) / 2 + dup, rel=1e-12)
    assert float(d1) == pytest.approx(float(job.params - job.expert_params), rel=1e-12)
    assert float(e2) == pytest.approx(float(e1), rel=1e-12)  # experts split etp x ep = 1 x 8 both times
