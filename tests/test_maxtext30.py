"""maxtext30: recompute_modules jax_qkv, MaxText's remat policies that keep (or offload) Q, K and V and rematerialize
the attention output projection (``save_qkv_proj``; ``qkv_proj_offloaded`` and ``custom`` with out_proj 'remat',
AI-Hypercomputer/maxtext@92e59fdf5 src/MaxText/layers/decoders.py ``get_remat_policy`` L319-332, base.yml
``out_proj: 'remat'``). Priced as jax_qkvo (docs/model.md#memory-per-gpu, #offload) plus the output projection GEMM
repeated in the backward and without its output kept. Values worked by hand for a small dense model: 4 layers,
h 256, 8 query / 2 kv heads of 32, FFN 512 gated, sequence 128, micro-batch 2.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.choices import Recompute
from scalemodel.cost import compute, memory, transformer
from scalemodel.cost.transformer import RECOMPUTE_MODULES
from scalemodel.engine import dp_comm
from scalemodel.engine.job import build_job, grid_from_arrays
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import OFFLOAD_TENSORS, TrainingSpec
from tests.test_hostile_inputs import refused

L, H, A, G, D, F, V, S, B = 4, 256, 8, 2, 32, 512, 1000, 128, 2
SH = transformer.shape(layers=L, hidden=H, heads=A, kv_heads=G, head_dim=D, ffn_hidden=F, gated_mlp=True, vocab=V,
                       dropout=False)
QKVO, QKV = RECOMPUTE_MODULES["jax_qkvo"], RECOMPUTE_MODULES["jax_qkv"]


def test_hardware_flops_add_the_output_projection() -> None:
    """Hardware FLOPs of n sequences: jax_qkv repeats per attention layer what jax_qkvo does (the core and the
    up-projections) and the output projection GEMM, 2 s (a d) h = 2 x 128 x 256 x 256 = 16,777,216 a layer and
    sequence; the model FLOPs do not move."""
    n = 3
    qkvo = transformer.training_flops(SH, S, n, "selective", QKVO)
    qkv = transformer.training_flops(SH, S, n, "selective", QKV)
    assert 2 * S * A * D * H == 16_777_216
    assert float(qkv.hardware - qkvo.hardware) == pytest.approx(L * n * 16_777_216, rel=1e-12)
    assert float(qkv.model) == float(qkvo.model)
    # jax_qkvo's own repeat, by hand: the causal core 2 s k a (d + d_v) ... is what both share; the up-projections
    # 2 s (2 h f) per layer
    up = 2 * S * 2 * H * F
    core = float(transformer.attention_core_flops(SH, S))
    assert float(qkvo.recompute) == pytest.approx(L * n * (up + core), rel=1e-12)
    assert float(qkv.recompute) == pytest.approx(L * n * (up + core + 2 * S * A * D * H), rel=1e-12)


def test_kept_bytes_lose_the_output_projection() -> None:
    """Activation bytes a layer keeps for one micro-batch, 16-bit: jax_qkvo 2 s b (2 h + a d + 2 g d) = 2 x 128 x 2
    x (512 + 256 + 128) = 458,752; jax_qkv keeps the layer input and Q, K, V only: 2 s b (h + a d + 2 g d) =
    327,680. Under tp 2 with sequence parallelism every tensor halves."""
    kw = dict(micro_batch=B, seq_len=S, recompute="selective", flash_attention=True)
    qkvo = float(memory.activation_bytes_per_layer(SH, recompute_modules=QKVO, **kw))
    qkv = float(memory.activation_bytes_per_layer(SH, recompute_modules=QKV, **kw))
    assert qkvo == 2 * S * B * (2 * H + A * D + 2 * G * D) == 458_752
    assert qkv == 2 * S * B * (H + A * D + 2 * G * D) == 327_680
    sp = float(memory.activation_bytes_per_layer(SH, recompute_modules=QKV, tp=2, sequence_parallel=True, **kw))
    assert sp == pytest.approx(327_680 / 2, rel=1e-12)


def test_recompute_time_adds_one_gemm() -> None:
    """The selective recompute seconds of one layer grow by exactly the output projection's GEMM, T x h x a d (T =
    b s tokens), on the same roofline the forward prices it with; the forward and backward do not move."""
    kw = dict(micro_batch=B, seq_len=S, peak_flops=918e12, memory_bandwidth=1.64e12, recompute="selective",
              flash_attention=True)
    qkvo = compute.layer_compute_time(SH, recompute_modules=QKVO, **kw)
    qkv = compute.layer_compute_time(SH, recompute_modules=QKV, **kw)
    o_gemm = compute.gemm_time(B * S, H, A * D, peak_flops=918e12, memory_bandwidth=1.64e12)
    assert float(qkv.recompute - qkvo.recompute) == pytest.approx(float(o_gemm), rel=1e-12)
    assert float(qkv.forward) == float(qkvo.forward) and float(qkv.backward) == float(qkvo.backward)


def _job_grid(modules: int, names: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    job = build_job(load_cluster("tpu-v6e-pod"), load_workload("llama3-8b"), TrainingSpec(precision="bf16",
                                                                                          seq_len=8192))
    bits = sum(1 << OFFLOAD_TENSORS.index(n) for n in names)
    base = dict(gpus=256, dp=256, tp=1, pp=1, micro_batch=1, global_batch=256, zero=4, overlap=True,
                recompute=Recompute.SELECTIVE, recompute_modules=modules, offload_tensors=bits)
    return job, grid_from_arrays(**{k: np.asarray([v]) for k, v in base.items()})


def test_xla_kernel_count_adds_one() -> None:
    """The kernels a recomputed Llama layer repeats under XLA: jax_qkvo the attention kernel and wi_0, wi_1 (3),
    jax_qkv also the output projection (4)."""
    job, g = _job_grid(QKVO)
    _, g2 = _job_grid(QKV)
    assert float(dp_comm.xla_recomputed_kernels(job, g)[0]) == 3.0
    assert float(dp_comm.xla_recomputed_kernels(job, g2)[0]) == 4.0


def test_offloaded_qkv_leave_hbm_under_jax_qkv() -> None:
    """The mttier25 Llama 2 70B row's policy (qkv_proj_offloaded): q, k, v to the host, out_proj recomputed. The
    copies' bytes are those names' (offload29's rule), and memory drops by them."""
    job, g = _job_grid(QKV, ("query_proj", "key_proj", "value_proj"))
    by_hand = 2 * 8192 * (32 * 128 + 2 * 8 * 128)  # llama3-8b: 32 / 8 heads of 128, one sequence of 8192
    assert float(dp_comm.offloaded_tensor_bytes(job, g)[0]) == pytest.approx(by_hand, rel=1e-12)


BASE = ["predict", "-c", "tpu-v6e-pod", "-m", "llama3-8b", "-n", "256", "--set", "training.seq_len=8192",
        "--set", "strategy.zero=fsdp", "--set", "strategy.recompute=selective"]


@pytest.mark.parametrize(("extra", "match"), [
    (["--set", "strategy.recompute_modules=jax_qkv", "--set", "strategy.offload_tensors=[query_proj,out_proj]"],
     "out_proj, which recompute_modules jax_qkv recomputes"),
    (["--set", "strategy.recompute_modules=jax_qkvo,jax_qkv"], "jax_qkvo and jax_qkv"),
])
def test_refused(cli, extra: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """One error line, exit 2: offloading the tensor jax_qkv recomputes, or naming both policies."""
    refused(cli, *BASE, *extra, match=match)


def test_moe_refused(cli) -> None:  # type: ignore[no-untyped-def]
    """jax_qkv prices a dense block (as jax_qkvo): an MoE model is refused."""
    refused(cli, "predict", "-c", "tpu-v6e-pod", "-m", "mixtral-8x7b", "-n", "256", "--set",
            "strategy.zero=fsdp", "--set", "strategy.recompute=selective", "--set",
            "strategy.recompute_modules=jax_qkv", match="jax_qkv prices")


def test_validation_rows_read_as_jax_qkv() -> None:
    """The two 70B v6e rows state their policy as the tensors save_qkv_proj keeps: jax_qkv, with their offloaded
    names."""
    mod = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}
    for i, names in (("mttier25_v6e_llama2_70b_256", ["query_proj", "key_proj", "value_proj"]),
                     ("mttier25_v6e_llama31_70b_256", ["decoder_layer_input", "query_proj", "key_proj",
                                                       "value_proj"])):
        par = cases[i]["parallelism"]
        assert mod.parse_recompute(par["recompute"]) == "selective"
        assert mod.parse_recompute_modules(par["recompute"]) == "jax_qkv"
        assert mod.parse_offload_tensors(par["offload"]) == names


MOE = transformer.shape(layers=L, hidden=H, heads=A, kv_heads=G, head_dim=D, ffn_hidden=F, gated_mlp=True, vocab=V,
                        dropout=False, moe_experts=4, moe_top_k=2, moe_ffn_hidden=F)


def test_moe_counterpart_recomputes_the_block_whole() -> None:
    """MaxText's policy on an MoE layer that names nothing in the block (mlpwi_0, mlpwi_1, mlpwo 'remat'): jax_qkvo
    with moe. Per layer and sequence the backward repeats the causal core and the whole block's GEMMs: the router 2 s
    h E = 262,144 and the k = 2 routed experts' three matrices 2 s k 3 h f = 201,326,592; the layer keeps jax_qkvo's
    set, the block's input and buffers not."""
    n = 1
    got = transformer.training_flops(MOE, S, n, "selective", QKVO | RECOMPUTE_MODULES["moe"])
    core = float(transformer.attention_core_flops(MOE, S))
    block = 2 * S * H * 4 + 2 * S * 2 * 3 * H * F
    assert block == 262_144 + 201_326_592
    assert float(got.recompute) == pytest.approx(L * n * (core + block), rel=1e-12)
    kept = memory.activation_bytes_per_layer(MOE, micro_batch=B, seq_len=S, recompute="selective", moe=True,
                                             flash_attention=True, recompute_modules=QKVO | RECOMPUTE_MODULES["moe"])
    assert float(kept) == 2 * S * B * (2 * H + A * D + 2 * G * D)


def test_moe_needs_moe_named(cli) -> None:  # type: ignore[no-untyped-def]
    """jax_qkvo alone on an MoE model is refused (which of the block's tensors the policy keeps is not priced); with
    moe it is priced."""
    refused(cli, "predict", "-c", "tpu-v6e-pod", "-m", "mixtral-8x7b", "-n", "256", "--set", "strategy.zero=fsdp",
            "--set", "strategy.recompute=selective", "--set", "strategy.recompute_modules=jax_qkvo",
            match="name moe too")
    r = cli("predict", "-c", "tpu-v6e-pod", "-m", "mixtral-8x7b", "-n", "256", "--set", "strategy.zero=fsdp",
            "--set", "strategy.recompute=selective", "--set", "strategy.recompute_modules=jax_qkvo,moe", "--json")
    assert r.code == 0, r.err


def test_v6e_multislice_dcn_from_googles_table() -> None:
    """[GCP-v6e]: 'Per-host NIC configuration 4 x 200 Gbps NIC', 'Chips per host 8' -> 100 Gb/s per chip; the pod
    figure agrees ('Data center network bandwidth per Pod 25.6 Tbps' / 256 chips). The slice is tpu-v6e-pod's, host
    link included."""
    multi, pod = load_cluster("tpu-v6e-multislice"), load_cluster("tpu-v6e-pod")
    dcn = next(t for t in multi.tiers if t.name == "dcn")
    assert dcn.bandwidth == pytest.approx(4 * 200e9 / 8 / 8)
    assert dcn.bandwidth * 8 * 256 == pytest.approx(25.6e12)
    ici, one = multi.tiers[0], pod.tiers[0]
    assert (ici.span, ici.bandwidth, ici.latency, ici.efficiency) == (one.span, one.bandwidth, one.latency,
                                                                      one.efficiency)
    assert multi.host_bandwidth == pod.host_bandwidth == pytest.approx(32e9)
    assert multi.max_gpus == 40 * 256  # tpu-recipes' 40 x v6e-256 Mixtral 8x22B recipe
