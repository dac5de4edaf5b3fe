"""torchtitan's op-level selective activation checkpointing (recompute_modules titan_op).

torchtitan (e7c0cae torchtitan/models/llama3/parallelize_llama.py; 9dec370 torchtitan/parallelisms/
parallelize_llama.py) saves the outputs of ``_save_list`` ops (aten.mm, SDPA, reduce_scatter, max) "except every
second mm" and recomputes the rest. A Llama block runs its mms in the order wq, wk, wv, wo, w1, w3, w2: wq, wv, w1,
w2 (counts 1, 3, 5, 7) are saved, the backward repeats wk, wo, w3 (2, 4, 6), every memory-bound forward op, and not
the attention core (SDPA is saved). The values below are worked out by hand from the roofline of cost/compute.py's
module docstring and the byte counts of cost/memory.py's, not read back from the implementation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute, memory
from scalemodel.cost.transformer import shape, training_flops
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs.frameworks import read_strategy_file

GM, D0, MEM, HBM = 0.75, 96.0, 0.85, 3e12

# a small Llama block: h 1024, 8 heads of d 128, 2 kv heads (g d = 256), SwiGLU f 2816; b 2, s 512 -> T = 1024
LLAMA = shape(layers=2, hidden=1024, heads=8, kv_heads=2, vocab=1000, gated_mlp=True, ffn_hidden=2816)
T, H, F = 1024, 1024, 2816
TITAN = memory.recompute_modules_code("titan_op")


def _gemm(m: float, n: float, k: float, peak: float, eb: float) -> float:
    eff = GM * m / (m + D0) * n / (n + D0) * k / (k + D0)
    return max(2 * m * n * k / (peak * eff), (m * k + k * n + m * n) * eb / (HBM * MEM))


def _layer(mods: int, peak: float, eb: float, sh: Any = LLAMA, rec: str = "selective") -> compute.LayerTime:
    return compute.layer_compute_time(sh, micro_batch=2, seq_len=512, recompute=rec, flash_attention=True,
                                      recompute_modules=mods, peak_flops=peak, memory_bandwidth=HBM, gemm_max=GM,
                                      gemm_half_dim=D0, memory_efficiency=MEM, elem_bytes=eb, layer_impl="torchtitan")


def _titan_fwd_bytes_per_token(eb: float, f: float, gated: bool) -> float:
    """torchtitan's compiled block forward (compute.layer_eltwise_bytes, layer_impl torchtitan), h 1024,
    Q = O = 8 x 128,
    K = V = 2 x 128, repeated to 1024: norms and residuals 9 eb h, RoPE fused with repeat_kv eb (2Q + K + K_rep),
    repeat_kv of V eb (V + V_rep), no output copy (SDPA wrote [b, s, a, d]), SwiGLU 3 eb f (GELU 2 eb f)."""
    return eb * (9 * 1024 + (2 * 1024 + 256 + 1024) + (256 + 1024)) + (3 if gated else 2) * eb * f


@pytest.mark.parametrize(("peak", "eb"), [(1000e12, 2.0), (2000e12, 1.0)], ids=["bf16", "fp8"])
def test_layer_recompute_time_by_hand(peak: float, eb: float) -> None:
    """Recompute = the forward's memory-bound bytes (torchtitan's block, :func:`_titan_fwd_bytes_per_token` x T) at
    HBM x efficiency + the GEMMs wk T x 256 x 1024, wo T x 1024 x 1024, w3 T x 2816 x 1024; the attention core is
    not repeated (titan_op alone), and is when core_attn is named with it."""
    mem = T * _titan_fwd_bytes_per_token(eb, F, gated=True) / (HBM * MEM)
    gemms = _gemm(T, 256, H, peak, eb) + _gemm(T, H, 1024, peak, eb) + _gemm(T, F, H, peak, eb)
    lt = _layer(TITAN, peak, eb)
    assert float(lt.recompute) == pytest.approx(mem + gemms, rel=1e-12)
    assert float(lt.forward_memory) == pytest.approx(mem, rel=1e-12)  # the memory term is the forward's own
    both = _layer(TITAN | memory.recompute_modules_code("core_attn"), peak, eb)
    assert float(both.recompute) == pytest.approx(mem + gemms + float(lt.attention_core), rel=1e-12)
    # a strict share of full recompute: the saved wq, wv, w1, w2 and the core are not repeated
    full = _layer(TITAN, peak, eb, rec="full")
    assert float(full.recompute) > float(lt.recompute) > float(_layer(0, peak, eb).recompute)


def test_ungated_mlp_repeats_no_mlp_gemm() -> None:
    """Ungated: the MLP's mms are up (count 5, saved) and down (6), whose output only the residual sum reads."""
    sh = shape(layers=2, hidden=1024, heads=8, kv_heads=2, vocab=1000, gated_mlp=False, ffn_hidden=4096)
    mem = T * _titan_fwd_bytes_per_token(2.0, 4096, gated=False) / (HBM * MEM)
    gemms = _gemm(T, 256, H, 1000e12, 2) + _gemm(T, H, 1024, 1000e12, 2)
    assert float(_layer(TITAN, 1000e12, 2.0, sh).recompute) == pytest.approx(mem + gemms, rel=1e-12)


def test_hardware_flops_by_hand() -> None:
    """Per layer and sequence (s 512): 2 s (h g d + a d_v h + h f) = 2 x 512 x 1024 x (256 + 1024 + 2816) =
    4,294,967,296 FLOP; B = 3 sequences, L = 2 layers: hardware - model = 6 x that."""
    per = 2 * 512 * 1024 * (256 + 1024 + 2816)
    assert per == 4_294_967_296
    f = training_flops(LLAMA, 512, 3, "selective", TITAN)
    assert float(f.hardware - f.model) == pytest.approx(6 * per, rel=1e-12)
    assert float(f.recompute) == pytest.approx(6 * per, rel=1e-12)
    assert float(training_flops(LLAMA, 512, 3, "full", TITAN).recompute) == float(training_flops(LLAMA, 512, 3,
                                                                                                 "full").recompute)


@pytest.mark.parametrize("fp8", [False, True])
def test_activation_memory_by_hand(fp8: bool) -> None:
    """The layer keeps its input 2 s b h and the saved outputs the backward reads: Q 2 s b a d, V 2 s b g d, the SDPA
    output 2 s b a d_v, its fp32 log-sum-exp 4 a s b, w1's output 2 s b f; b 2, s 512:
    2 x 1024 x 1024 + 2 x 1024 x (1024 + 256 + 1024 + 2816) + 4 x 8 x 1024 = 12,615,680 B, in fp8 too (the saved
    mm outputs are 16-bit). TP 2 with sequence parallelism halves all of it."""
    by_hand = 2 * 1024 * 1024 + 2 * 1024 * (1024 + 256 + 1024 + 2816) + 4 * 8 * 1024
    assert by_hand == 12_615_680
    kw: dict[str, Any] = dict(micro_batch=2, seq_len=512, recompute="selective", flash_attention=True,
                              fp8_inputs=fp8, recompute_modules=TITAN)
    assert float(memory.activation_bytes_per_layer(LLAMA, **kw)) == by_hand
    assert float(memory.activation_bytes_per_layer(LLAMA, tp=2, sequence_parallel=True, **kw)) == by_hand / 2
    # between full recompute (the input alone) and Megatron's selective (everything but the scores)
    core = memory.activation_bytes_per_layer(LLAMA, **dict(kw, recompute_modules=0))
    assert 2 * 1024 * 1024 < by_hand < float(core)


def _job(precision: str, mods: str, model: str = "llama3-8b") -> tuple[Any, Any]:
    training: dict[str, Any] = {"precision": precision, "global_batch": 1, "micro_batch": 1, "seq_len": 2048}
    strategy: dict[str, Any] = {"recompute": "selective", "recompute_modules": mods, "flash_attention": True}
    cl, wl, tr, stg = build_specs(cluster="hgx-h200", model=model, sets=[], training=training, strategy=strategy)
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    return job, grid_from_strategy(stg, tr, 1, job)


def test_fp8_step_repeats_the_forward_casts() -> None:
    """An fp8 step under titan_op repeats the layer's quantization casts with its forward (torchtitan replays the
    block's forward; the casts of the repeated GEMMs' inputs are PREFER_RECOMPUTE): the backward of one layer is
    the bf16-priced layer backward + the recompute + the forward (with the weights', m = 1) and backward cast bytes
    / (HBM x efficiency); Megatron's selective recompute (core_attn) repeats no cast."""
    job, g = _job("fp8", "titan_op")
    layers = np.ones(1)
    with_casts = layer_compute._compute_per_microbatch(job, g, layers, logits_on_stage=False)
    without = layer_compute._compute_per_microbatch(replace(job, fp8_recipe=""), g, layers, logits_on_stage=False)
    f, b, w = compute.fp8_quantize_bytes(job.shape, micro_batch=1, seq_len=job.seq_len, recipe=job.fp8_recipe)
    bw = job.memory_bandwidth * job.memory_efficiency
    assert float((with_casts["backward"] - without["backward"]).ravel()[0]) == pytest.approx(float(f + w + b) / bw)
    core, gc = _job("fp8", "core_attn")
    c1 = layer_compute._compute_per_microbatch(core, gc, layers, logits_on_stage=False)
    c0 = layer_compute._compute_per_microbatch(replace(core, fp8_recipe=""), gc, layers, logits_on_stage=False)
    assert float((c1["backward"] - c0["backward"]).ravel()[0]) == pytest.approx(float(b) / bw)  # no forward casts


def test_engine_hfu_of_llama3_8b() -> None:
    """Through predict, Llama 3 8B (h 4096, g d 1024, f 14336, 32 layers), 8 sequences of 2048 on 8 GPUs:
    hardware - model = 8 x 32 x 2 x 2048 x 4096 x (1024 + 4096 + 14336) = 8 x 32 x 326,417,514,496."""
    from scalemodel.engine.predict import predict

    cl, wl, tr, st = build_specs(cluster="hgx-h200", model="llama3-8b", sets=[], training={
        "precision": "bf16", "global_batch": 8, "micro_batch": 1, "seq_len": 2048}, strategy={
        "dp": 8, "recompute": "selective", "recompute_modules": "titan_op", "flash_attention": True})
    per = 2 * 2048 * 4096 * (1024 + 4096 + 14336)
    assert per == 326_417_514_496
    fl = predict(cl, wl, 8, tr, st).flops
    assert fl["hardware_flops_per_step"] - fl["model_flops_per_step"] == pytest.approx(8 * 32 * per, rel=1e-9)


def test_models_without_the_llama_block_are_refused(cli: Any) -> None:
    r = cli("predict", "-m", "deepseek-v3", "-c", "dgx-h100", "-n", "256", "--recompute", "selective",
            "--set", "strategy.recompute_modules=titan_op")
    assert r.code == 2 and r.err.count("\n") == 1 and "titan_op" in r.err and "strategy.recompute_modules" in r.err


def _toml(tmp_path: Path, option: str) -> Path:
    p = tmp_path / "job.toml"
    p.write_text(f'[activation_checkpoint]\nmode = "selective"\nselective_ac_option = {option}\n')
    return p


def test_torchtitan_toml_mapping(tmp_path: Path) -> None:
    """selective_ac_option as torchtitan's _apply_ac_to_transformer_block reads it: "op" -> the op policy; a
    digit string N -> whole blocks (every block for 0 and 1, every N-th for N > 1: priced as full, said so)."""
    def recompute(sf: Any) -> dict[str, Any]:
        return {k: v for k, v in sf.strategy.items() if k.startswith("recompute")}

    sf = read_strategy_file(_toml(tmp_path, '"op"'))
    assert recompute(sf) == {"recompute": "selective", "recompute_modules": "titan_op"}
    for n in ('"1"', '"0"', "1"):
        sf = read_strategy_file(_toml(tmp_path, n))
        assert recompute(sf) == {"recompute": "full"} and sf.unused == []
    sf = read_strategy_file(_toml(tmp_path, '"2"'))
    assert recompute(sf) == {"recompute": "full"}
    assert any("1 block in 2" in u and "recompute_layers" in u for u in sf.unused)
    default = tmp_path / "default.toml"
    default.write_text('[activation_checkpoint]\nmode = "selective"\n')  # torchtitan's default option is "2"
    assert recompute(read_strategy_file(default)) == {"recompute": "full"}


@pytest.mark.parametrize("option", ['"layer"', '"-1"', '"op "', "true", "1.5"])
def test_bad_selective_ac_option_is_one_clear_error(tmp_path: Path, cli: Any, option: str) -> None:
    path = _toml(tmp_path, option)
    with pytest.raises(InputError, match="selective_ac_option"):
        read_strategy_file(path)
    r = cli("predict", "-m", "llama3-8b", "-c", "hgx-h200", "-n", "8", "--strategy", str(path))
    assert r.code == 2 and r.err.count("\n") == 1 and "activation_checkpoint.selective_ac_option" in r.err
