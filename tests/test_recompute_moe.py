"""Selective recompute of the whole MoE block (recompute_modules moe; Megatron-Core --recompute-modules moe,
moe_layer.py ``moe_layer_recompute``: MoELayer.forward's route -> dispatch -> experts -> combine under
``tensor_parallel.checkpoint`` / ``te_checkpoint``, NVIDIA/Megatron-LM@002255075c). The backward repeats exactly one
forward of the MoE block: its GEMMs and memory-bound bytes, its dispatch and combine all-to-alls, its FLOPs in the
hardware count; its activations drop to the block's input. Values are worked out by hand from the formulas of
cost/compute.py, cost/memory.py and cost/transformer.py, not read back from the implementation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import compute, memory
from scalemodel.cost.placement import place
from scalemodel.cost.transformer import shape, training_flops
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

PEAK, HBM, GM, D0, MEM = 1000e12, 3e12, 0.75, 96.0, 0.85
KW = dict(peak_flops=PEAK, memory_bandwidth=HBM, gemm_max=GM, gemm_half_dim=D0, memory_efficiency=MEM)


def _gemm(m: float, n: float, k: float, count: float = 1.0) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return count * max(2 * m * n * k / (PEAK * eff), (m * k + k * n + m * n) * 2 / (HBM * MEM))


def _mods(*names: str) -> int:
    return memory.recompute_modules_code(",".join(names))


# a small MoE layer: h 1024, 8 heads, 16 experts top-2 of f_e 256, SwiGLU, no shared expert
SH = shape(layers=2, hidden=1024, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16, moe_top_k=2,
           moe_ffn_hidden=256)
B, S = 2, 512
T = B * S


def _layer(mods: int, moe: bool = True, sh=SH) -> compute.LayerTime:
    return compute.layer_compute_time(sh, micro_batch=B, seq_len=S, recompute="selective", moe=moe,
                                      flash_attention=True, recompute_modules=mods, **KW)


def _moe_block_forward() -> float:
    """Router T x E x h, then per expert (16 local, T k / E = 128 tokens each, one 128-row tile: a random count
    spills into a second tile half the time, 192 rows computed, docs/model.md#expert-tile-padding) up T_e x 2 f_e x h
    and down T_e x h x f_e; memory-bound: the experts' SwiGLU 3 eb T k f_e and the all-to-all dispatcher's
    permutations, eb h (T + T k) to permute, (T k + T) to unpermute and, 16 local experts, 2 T k to sort and 2 T k to
    unsort."""
    gemms = _gemm(T, 16, 1024) + _gemm(192, 512, 1024, 16) + _gemm(192, 1024, 256, 16)
    mem = (3 * 2 * T * 2 * 256 + 2 * 1024 * (2 * (T + T * 2) + 4 * T * 2)) / (HBM * MEM)
    return gemms + mem


def test_moe_repeats_one_forward_of_the_moe_block() -> None:
    assert float(_layer(_mods("moe")).recompute) == pytest.approx(_moe_block_forward(), rel=1e-12)
    # not the attention core: Megatron-Core's list replaces the default ["core_attn"]
    both = _layer(_mods("moe", "core_attn"))
    assert float(both.recompute) == pytest.approx(_moe_block_forward() + float(both.attention_core), rel=1e-12)
    # moe_act as well: the activation's CheckpointWithoutOutput runs again inside the recomputed forward
    act = 3 * 2 * T * 2 * 256 / (HBM * MEM)
    assert float(_layer(_mods("moe", "moe_act")).recompute) == pytest.approx(_moe_block_forward() + act, rel=1e-12)
    # a dense layer has no MoE block; full recompute ignores the modules
    assert float(_layer(_mods("moe"), moe=False).recompute) == 0.0
    full = compute.layer_compute_time(SH, micro_batch=B, seq_len=S, recompute="full", moe=True, flash_attention=True,
                                      recompute_modules=_mods("moe"), **KW)
    assert float(full.recompute) == pytest.approx(float(full.forward), rel=1e-12)


def test_moe_recompute_with_shared_experts() -> None:
    sh = shape(layers=2, hidden=1024, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
               moe_top_k=2, moe_ffn_hidden=256, moe_shared_experts=1)
    shared = _gemm(T, 512, 1024) + _gemm(T, 1024, 256) + 3 * 2 * T * 256 / (HBM * MEM)  # + its SwiGLU bytes
    assert float(_layer(_mods("moe"), sh=sh).recompute) == pytest.approx(_moe_block_forward() + shared, rel=1e-12)


def test_hardware_flops_add_the_moe_block_forward() -> None:
    n = 8
    base = training_flops(SH, S, n, recompute="selective", recompute_modules=_mods("moe_act"))
    with_moe = training_flops(SH, S, n, recompute="selective", recompute_modules=_mods("moe_act", "moe"))
    # per MoE layer and sequence 2 s (k 3 h f_e + h E); both layers are MoE layers
    per = 2 * S * (2 * 3 * 1024 * 256 + 1024 * 16)
    assert float(with_moe.hardware - base.hardware) == pytest.approx(2 * n * per, rel=1e-12)
    assert float(with_moe.model) == float(base.model)  # model FLOPs never count recompute


def test_activations_drop_to_the_block_input() -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True)
    sbh = S * B * 1024
    for fp8, gemm_in in ((False, 2.0), (True, 1.0)):
        none = memory.activation_bytes_per_layer(SH, moe=True, fp8_inputs=fp8, recompute_modules=_mods("core_attn"),
                                                 **kw)
        moe = memory.activation_bytes_per_layer(SH, moe=True, fp8_inputs=fp8,
                                                recompute_modules=_mods("core_attn", "moe"), **kw)
        # dropped: per routed copy the dispatched token (gemm_in h) and the experts' SwiGLU input (4 f_e) and
        # GEMM input (gemm_in f_e); kept instead of the 1-byte fp8 MLP input: the checkpoint's 16-bit input
        dropped = 2 * (gemm_in * sbh + (4 + gemm_in) * S * B * 256) - (2 - gemm_in) * sbh
        assert float(none - moe) == pytest.approx(dropped, rel=1e-12)
    # a hybrid pattern's MoE layer (no attention block) keeps its norm's 16-bit input, the block input and the
    # residual's 1-byte dropout mask (both outside the checkpoint; the shape's default has dropout), nothing else
    hyb = memory.activation_bytes_per_layer(SH, moe=True, attention=False, recompute_modules=_mods("moe"), **kw)
    assert float(hyb) == pytest.approx(2 * sbh + 2 * sbh + 1 * sbh, rel=1e-12)


def test_stage_activations_add_one_block_as_working_set() -> None:
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True)
    per_none = memory.activation_bytes_per_layer(SH, moe=True, recompute_modules=_mods("core_attn"), **kw)
    per_moe = memory.activation_bytes_per_layer(SH, moe=True, recompute_modules=_mods("core_attn", "moe"), **kw)
    a_none = memory.activation_bytes(SH, recompute_modules=_mods("core_attn"), **kw)
    a_moe = memory.activation_bytes(SH, recompute_modules=_mods("core_attn", "moe"), **kw)
    # 2 layers keep per_moe instead of per_none; one block's dropped bytes come back while it is recomputed
    assert float(a_none - a_moe) == pytest.approx(2 * float(per_none - per_moe) - float(per_none - per_moe),
                                                  rel=1e-12)


def _working(sh, q: float, **extra) -> float:  # type: ignore[no-untyped-def]
    """The working set of the recomputed block, isolated from the stage total: a_moe - a_none - 2 (per_moe -
    per_none) (2 layers, one micro-batch in flight; selective core_attn has no working set)."""
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, fp8_inputs=q)
    per = {m: float(memory.activation_bytes_per_layer(sh, moe=True, recompute_modules=_mods(*m), **kw))
           for m in (("core_attn",), ("core_attn", "moe"))}
    a = {m: float(memory.activation_bytes(sh, recompute_modules=_mods(*m), **kw, **extra)) for m in per}
    return a[("core_attn", "moe")] - a[("core_attn",)] - 2 * (per[("core_attn", "moe")] - per[("core_attn",)])


@pytest.mark.parametrize("recipe,q", [("bf16", 0.0), ("delayed", 1.0), ("tensorwise", 1.0), ("mxfp8", 1.03125),
                                      ("nvfp4", 0.5625)])
def test_working_set_per_precision_by_hand(recipe: str, q: float) -> None:
    """One MoE block re-materialised in the backward: per routed copy (k = 2) its dispatched token at the saved
    GEMM-input bytes g (2 in 16-bit, else q) and the experts' SwiGLU input (4 bytes a f_e element) and
    down-projection input (g); the router and the routed experts keep nothing more of the block input than the
    checkpoint's 16-bit copy (router: that tensor itself; the experts read the dispatched tokens). A shared expert
    (f_e 256) adds its own SwiGLU bytes and, in a quantized run under the delayed recipe only, a quantized copy of the
    block input q s b h (Megatron-Core sets save_original_input on its linear_fc1 for the other fp8 recipes and fp4).
    Before, the working set was the block's no-recompute row less its recomputed one: (2 - g) s b h less than its
    split bytes, whatever the precision, so a quantized run with a shared expert under delayed scaling was 2 s b h
    short (1 + 1 with q = 1)."""
    assert memory.quantized_input_bytes("" if recipe == "bf16" else recipe) == q
    sbh, sbf = S * B * 1024, S * B * 256
    g = q if q > 0 else 2.0
    routed = 2 * (g * sbh + (4 + g) * sbf)
    assert _working(SH, q) == pytest.approx(routed, rel=1e-12)
    shared_sh = shape(layers=2, hidden=1024, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
                      moe_top_k=2, moe_ffn_hidden=256, moe_shared_experts=1)
    copy = recipe == "delayed"
    want = routed + (4 + g) * sbf + (q * sbh if copy else 0.0)
    assert _working(shared_sh, q, shared_input_copy=copy) == pytest.approx(want, rel=1e-12)
    if recipe == "delayed":  # the old pricing, for the record: 2 s b h below
        assert want - (routed + (4 + g) * sbf - (2 - g) * sbh) == pytest.approx(2 * sbh, rel=1e-12)


def test_working_set_with_sequence_parallel_and_latent() -> None:
    """TP 2 with sequence parallelism, fp8 (q = 1), LatentMoE l = 512 with a shared expert, tensorwise (no shared
    copy): split bytes / t: 2 x (etp x 1 x s b l + 5 s b f_e) routed (etp defaults to tp = 2: the experts' input is
    the etp T k / t rows the expert-TP all-gather brings), 5 s b f_e shared, fc2_latent_proj's input 1 x s b l;
    the input copy of fc1_latent_proj 1 x s b h / t (the sequence-parallel shard)."""
    sh = shape(layers=2, hidden=1024, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=16,
               moe_top_k=2, moe_ffn_hidden=256, moe_shared_experts=1, moe_latent=512)
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True, fp8_inputs=1.0, tp=2,
              sequence_parallel=True)
    per = {m: float(memory.activation_bytes_per_layer(sh, moe=True, recompute_modules=_mods(*m), **kw))
           for m in (("core_attn",), ("core_attn", "moe"))}
    a = {m: float(memory.activation_bytes(sh, recompute_modules=_mods(*m), shared_input_copy=False, **kw))
         for m in per}
    working = a[("core_attn", "moe")] - a[("core_attn",)] - 2 * (per[("core_attn", "moe")] - per[("core_attn",)])
    sb = S * B
    want = (2 * (2 * sb * 512 + 5 * sb * 256) + 5 * sb * 256 + sb * 512) / 2 + sb * 1024 / 2
    assert working == pytest.approx(want, rel=1e-12)


def test_engine_passes_the_shared_copy_for_delayed_only() -> None:
    """predict's memory: a shared-expert MoE model with moe recomputed, fp8 on one H100 stage (p 1, TP 1): the
    delayed recipe's activations exceed tensorwise's by exactly the shared expert's quantized input copy, 1 x s b h,
    once (the working set; every per-layer term is the same for both recipes)."""
    wl = TransformerWorkload(name="moe-shared", layers=4, hidden=2048, heads=16, kv_heads=4, head_dim=128,
                             ffn_hidden=6144, gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                             moe={"experts": 16, "top_k": 2, "ffn_hidden": 768, "shared_experts": 1})
    acts = {}
    for recipe in ("delayed", "tensorwise"):
        tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", seq_len=4096, fp8_recipe=recipe)
        job = build_job(load_cluster("dgx-h100"), wl, tr)
        st = StrategySpec(ep=8, dp=8, recompute="selective", recompute_modules="core_attn,moe")
        res = evaluate(job, grid_from_strategy(st, tr, 8, job))
        acts[recipe] = float(np.ravel(res.memory["activations"])[0])
    assert acts["delayed"] - acts["tensorwise"] == pytest.approx(4096 * 1 * 2048 * 1.0, rel=1e-12)


QWEN = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                           ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                           moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


def _run(**strategy):
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), QWEN, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    return evaluate(job, g)


def _counts_gather() -> float:
    """The alltoall dispatcher's all-gather of the per-expert token counts before each forward dispatch: 128 int64 a
    rank over the 8 EP ranks (docs/model.md#ep-probs-counts)."""
    return float(coll.group_time("allgather", 8 * 128 * 8.0, place(8, 1, build_network(load_cluster("dgx-h100")))))


#: MoE layer passes a rank runs per step in _run at dp 8: global batch 16 / dp 8 = 2 micro-batches x 48 layers
PASSES = 2 * 48


def test_dispatch_and_combine_run_again_exposed() -> None:
    """Forward 2 + backward 2 all-to-alls per MoE layer, + 2 with the block recomputed: exactly 6/4 of the traffic,
    exposed (Megatron-Core refuses the EP overlap with moe recompute, so nothing hides it); the recomputed forward's
    counts all-gather is the one part of the forward the backward has no twin of: + half of it beyond the 6/4."""
    base = _run(ep=8, dp=8, recompute="selective", recompute_modules="moe_act")
    moe = _run(ep=8, dp=8, recompute="selective", recompute_modules="moe_act,moe")
    ep0, ep1 = float(base.breakdown["ep_comm"][0]), float(moe.breakdown["ep_comm"][0])
    assert ep0 > 0 and ep1 == pytest.approx(1.5 * ep0 + PASSES * 0.5 * _counts_gather(), rel=1e-12)
    assert float(moe.step_time[0]) > float(base.step_time[0])
    assert float(moe.hardware_flops[0]) > float(base.hardware_flops[0])
    assert float(moe.model_flops[0]) == float(base.model_flops[0])


def test_moe_a2a_overlap_is_refused_with_moe_recompute() -> None:
    with pytest.raises(InputError, match="selective recompute of moe"):
        _run(ep=8, dp=8, recompute="selective", recompute_modules="moe", moe_a2a_overlap=True)


def test_megatron_launch_reader_reads_moe() -> None:
    from scalemodel.specs.megatron_args import _recompute_modules
    from scalemodel.specs.strategy_file import StrategyFile
    out = StrategyFile(path="launch.sh", format="megatron", strategy={"recompute": "selective"})
    _recompute_modules({"--recompute-modules": "moe layernorm core_attn moe_act"}, out)
    assert out.strategy["recompute_modules"] == "moe,layernorm,core_attn,moe_act"  # in the order given
    assert not out.unused  # layernorm is priced too (tests/test_recompute_layernorm.py)


def test_validation_parses_moe_as_a_whole_word() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import validate_training as v
    assert v.parse_recompute_modules("selective (recompute_modules moe, layernorm, core_attn, moe_act)") \
        == "core_attn,moe_act,moe,layernorm"
    assert v.parse_recompute_modules("selective: moe_act, layernorm") == "moe_act,layernorm"
    assert np.all(np.asarray(v.unmodelled_recompute_modules("selective (recompute_modules moe)")) == [])


@pytest.mark.parametrize("strategy", [
    dict(ep=8, dp=8),
    dict(tp=2, ep=4, etp=1, dp=8, sequence_parallel=True),
    dict(ep=8, dp=8, pp=2, schedule="1f1b"),
])
def test_invariants_more_work_less_memory(strategy) -> None:
    """Repeating the MoE block is never faster, never fewer hardware FLOPs, never more activation memory (n >= 1 MoE
    layers drop their split bytes, one block's come back as the working set), and model FLOPs do not change."""
    base = _run(recompute="selective", recompute_modules="core_attn", **strategy)
    moe = _run(recompute="selective", recompute_modules="core_attn,moe", **strategy)
    assert float(moe.step_time[0]) >= float(base.step_time[0])
    assert float(moe.breakdown["compute"][0]) > float(base.breakdown["compute"][0])
    assert float(moe.hardware_flops[0]) > float(base.hardware_flops[0])
    assert float(moe.model_flops[0]) == float(base.model_flops[0])
    assert float(np.ravel(moe.memory["activations"])[0]) < float(np.ravel(base.memory["activations"])[0])
    assert float(np.ravel(moe.memory["total"])[0]) < float(np.ravel(base.memory["total"])[0])


def test_full_recompute_repeats_the_all_to_alls_too() -> None:
    """Full recompute re-runs every layer's forward, MoELayer's dispatch and combine included: 6/4 of the traffic
    and half the counts all-gather again (every layer of this model is an MoE layer and every layer is
    recomputed)."""
    none = _run(ep=8, dp=8, recompute="none")
    full = _run(ep=8, dp=8, recompute="full")
    c = _counts_gather()
    assert float(full.breakdown["ep_comm"][0]) == pytest.approx(1.5 * float(none.breakdown["ep_comm"][0])
                                                                + PASSES * 0.5 * c, rel=1e-12)
    # partial full recompute, 12 of 48 layers: 4 + 2 x 12 / 48
    part = _run(ep=8, dp=8, recompute="full", recompute_layers=12)
    assert float(part.breakdown["ep_comm"][0]) == pytest.approx((4 + 2 * 12 / 48) / 4
                                                                * float(none.breakdown["ep_comm"][0])
                                                                + 2 * 12 * 0.5 * c, rel=1e-12)


def test_plan_pins_keep_moe_a2a_overlap_to_what_predict_runs() -> None:
    """A pinned moe_a2a_overlap: plan drops full recompute from its search and refuses a pinned recompute_modules moe
    or recompute full, as predict refuses those pairs (plan ranked selective-moe candidates with the overlap on)."""
    from scalemodel.choices import Recompute
    from scalemodel.engine import planner
    cons, _fixed, _ = planner.pins(StrategySpec(moe_a2a_overlap=True), ["moe_a2a_overlap"])
    assert cons["recompute"] == [("!=", int(Recompute.FULL))]
    with pytest.raises(InputError, match="selective recompute of moe"):
        planner.pins(StrategySpec(moe_a2a_overlap=True, recompute="selective", recompute_modules="core_attn,moe"),
                     ["moe_a2a_overlap", "recompute", "recompute_modules"])
    with pytest.raises(InputError, match="full recompute"):
        planner.pins(StrategySpec(moe_a2a_overlap=True, recompute="full"), ["recompute", "moe_a2a_overlap"])
    cons, _, _ = planner.pins(StrategySpec(moe_a2a_overlap=False), ["moe_a2a_overlap"])
    assert "recompute" not in cons
