"""tpu7x41: the TPU7x (Ironwood) part, its one chip = one accelerator rule, MaxText's context-saving remat policy
(recompute_modules jax_context) and the irwd26 rows it makes comparable (docs/model.md#tpu7x, validation/README.md
"Ironwood rows compared (tpu7x41)"). Hand values, each from its source:

* Google's TPU7x page ([GCP-TPU7X], hardware/SOURCES.md): BF16 2307 and FP8 4614 TFLOP/s a chip, 192 GiB HBM at
  7380 GBps, two TensorCores a chip, bidirectional ICI 1200 GBps a chip, 4 chips and 960 GiB a VM, 9216 chips a pod.
* yangwhale/gpu-tpu-pedia@48b7543d tpu/v7_perf/chay_gemm_benchmark_simple/results_v7_trace.csv: three of its rows
  (m, n, k, time_us, tflops) copied by hand; peak_tflops 1153.5 = one device's.
* AI-Hypercomputer/tpu-recipes training/ironwood/README.md at d25b533d04: the two 70B 8k BF16 cells.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import load_yaml, script_module, training_cases

from scalemodel import api
from scalemodel.cost import memory, transformer
from scalemodel.errors import InputError
from scalemodel.specs import load_accelerator, load_cluster


def test_part_carries_googles_per_chip_figures() -> None:
    acc = load_accelerator("tpu7x")
    assert acc.family == "tpu"
    assert acc.peak("bf16") == pytest.approx(2307e12, rel=1e-12)
    assert acc.peak("fp8") == pytest.approx(4614e12, rel=1e-12)
    assert float(acc.memory) == 192 * 2**30
    assert float(acc.memory_bandwidth) == pytest.approx(7380e9, rel=1e-12)


def test_pod_ici_is_half_the_bidirectional_chip_figure() -> None:
    """1200 GBps bidirectional a chip -> 600 GB/s a direction, the catalog's per-chip sum (as tpu-v5p-pod's 1200)."""
    cl = load_cluster("tpu7x-pod")
    assert cl.gpus_per_node == 4
    assert cl.max_gpus == 9216
    ici = cl.tiers[0]
    assert ici.span == 9216 and ici.topology == "torus" and not ici.torus_dims
    assert float(ici.bandwidth) == pytest.approx(1200e9 / 2, rel=1e-12)
    v5p = next(t for t in load_cluster("tpu-v5p-pod").tiers if t.name == "ici")
    assert float(ici.bandwidth) == float(v5p.bandwidth)


def _ring_allgather_link_bytes(devices: int, per_chip: int) -> float:
    """Bytes one direction of the busiest link between two chips carries in a ring all-gather of S = 1 over
    ``devices`` devices, ``per_chip`` consecutive ring members a chip: simulated step by step (each step every member
    forwards the chunk it received last, S / devices a chunk), counting only hops whose ends sit on different chips."""
    chunk = 1.0 / devices
    crossings = np.zeros(devices)
    for _step in range(devices - 1):
        for src in range(devices):
            dst = (src + 1) % devices
            if src // per_chip != dst // per_chip:
                crossings[src] += chunk
    return float(crossings.max())


@pytest.mark.parametrize("chips", [4, 64])
def test_two_devices_a_chip_move_what_one_chip_moves_on_ici(chips: int) -> None:
    """The pricing rule (docs/model.md#tpu7x): a ring over 2 x chips devices, each chip's two devices adjacent, puts on
    each inter-chip link (2N - 1) / 2N of the data against (N - 1) / N for a ring over the N chips the model prices;
    the difference is 1 / 2N of the data (0.8 % at 64 chips); the die-to-die hop inside the chip carries the rest."""
    two = _ring_allgather_link_bytes(2 * chips, 2)
    one = _ring_allgather_link_bytes(chips, 1)
    assert two == pytest.approx((2 * chips - 1) / (2 * chips), rel=1e-12)
    assert one == pytest.approx((chips - 1) / chips, rel=1e-12)
    assert two - one == pytest.approx(1.0 / (2 * chips), rel=1e-9)


GEMM = Path(__file__).resolve().parent.parent / "hardware" / "measurements" / "gemm.yaml"
#: (m, n, k, time_us, tflops) from results_v7_trace.csv, copied by hand
CSV = [(8192, 8192, 8192, 1016.8463385000001, 1081.295753494027),
       (16384, 12288, 12288, 4481.2953179999995, 1104.100929282251),
       (16384, 16384, 18432, 8966.2617045, 1103.6488757647546)]


@pytest.mark.parametrize(("m", "n", "k", "t_us", "tflops"), CSV)
def test_gemm_points_are_the_device_times_written_per_chip(m: int, n: int, k: int, t_us: float, tflops: float) -> None:
    pts = load_yaml(GEMM)["points"]
    p = next(p for p in pts if p["acc"] == "tpu7x" and (p["m"], p["n"], p["k"]) == (m, n, k))
    assert p["b"] == 2
    assert 2 * p["b"] * m * n * k / (p["tflops"] * 1e12) == pytest.approx(t_us * 1e-6, rel=1e-5)
    assert p["tflops"] / 2307.0 == pytest.approx(tflops / 1153.5, rel=1e-5)  # the chip's fraction = the device's


def test_curve_level_is_the_log_mean_of_the_twelve_points_at_the_borrowed_d0() -> None:
    """With d0 fixed (h100-sxm's 86.9), the least-squares level on r = ln(t_model / t_measured) is closed form:
    ln gemm_max = mean ln(2 m n k / (peak shape(m, n, k) t)); the catalog holds it x 0.901 (the in-layer factor)."""
    pts = [p for p in load_yaml(GEMM)["points"] if p["acc"] == "tpu7x"]
    assert len(pts) == 12
    d0 = 86.9

    def shape_factor(p: dict) -> float:  # type: ignore[type-arg]
        return float(np.prod([x / (x + d0) for x in (p["m"], p["n"], p["k"])]))

    level = math.exp(np.mean([math.log(p["tflops"] / 2307.0 / shape_factor(p)) for p in pts]))
    assert level == pytest.approx(0.972, abs=0.001)
    ce = load_accelerator("tpu7x").compute_efficiency
    assert ce is not None
    assert ce.gemm_max == pytest.approx(round(level * 0.901, 2), abs=1e-9)
    assert ce.gemm_half_dim == round(d0)


LLAMA70 = transformer.shape(layers=80, hidden=8192, heads=64, kv_heads=8, vocab=128256, ffn_hidden=28672,
                            gated_mlp=True, tied_embeddings=False, dropout=False)


def _codes(names: str) -> int:
    return sum(transformer.RECOMPUTE_MODULES[n] for n in names.split(","))


@pytest.mark.parametrize("policy", ["jax_qkv", "jax_qkvo"])
def test_context_keeps_the_kernel_output_and_lse(policy: str) -> None:
    """jax_context beside a policy adds the splash kernel's output (e s b a d_v) and fp32 log-sum-exp (4 a s b) to the
    kept bytes, by hand for Llama 3.1 70B at s 8192, b 4, tp 1: 2 x 8192 x 4 x 64 x 128 + 4 x 64 x 8192 x 4."""
    kw = dict(micro_batch=4, seq_len=8192, recompute="selective", flash_attention=True)
    base = memory.activation_bytes_per_layer(LLAMA70, recompute_modules=_codes(policy), **kw)
    ctx = memory.activation_bytes_per_layer(LLAMA70, recompute_modules=_codes(policy + ",jax_context"), **kw)
    assert float(ctx - base) == 2 * 8192 * 4 * 64 * 128 + 4 * 64 * 8192 * 4


def test_context_spares_exactly_one_attention_core_forward_a_layer() -> None:
    """Hardware FLOPs: jax_qkv less jax_qkv,jax_context = core_attn selective less no recompute (two routes to one
    attention core forward a layer); the recomputed projections (out_proj, MLP up) stay."""
    def hw(rec: str, mods: str) -> float:
        code = _codes(mods) if mods else 0
        return float(transformer.training_flops(LLAMA70, 8192, 256, rec, code).hardware)
    spared = hw("selective", "jax_qkv") - hw("selective", "jax_qkv,jax_context")
    core = hw("selective", "core_attn") - hw("none", "")
    assert spared == pytest.approx(core, rel=1e-12)
    assert hw("selective", "jax_qkv,jax_context") > hw("none", "")  # out_proj and the MLP up-projections again
    again = transformer.recomputed_modules(LLAMA70, "selective", _codes("jax_qkv,jax_context"))
    assert not bool(again.attention_core) and bool(again.out_proj) and bool(again.jax_qkvo) and bool(again.context)


def test_context_alone_is_refused() -> None:
    with pytest.raises(InputError, match="jax_context without jax_qkvo or jax_qkv"):
        api.predict(cluster="tpu7x-pod", model="llama3-70b", gpus=64,
                    training={"global_batch": 256, "micro_batch": 4, "seq_len": 8192, "precision": "bf16"},
                    strategy={"dp": 64, "zero": "fsdp", "recompute": "selective", "recompute_modules": "jax_context"})


def test_row_texts_parse_to_the_policy() -> None:
    v = script_module("validate_training")
    rows = training_cases()
    for cid in ("irwd26_tpu7x_llama31_70b_64_bf16", "irwd26_tpu7x_llama31_70b_256_128k_bf16"):
        text = rows[cid]["parallelism"]["recompute"]
        assert v.parse_recompute(text) == "selective"
        assert v.parse_recompute_modules(text) == "jax_qkv,jax_context"
    # the 405B rows keep k and v without q, or recompute all: no such marker
    assert "context=device" not in rows["irwd26_tpu7x_llama31_405b_256_bf16"]["parallelism"]["recompute"]


@pytest.mark.parametrize(("cid", "tokens", "chips"), [("irwd26_tpu7x_llama31_70b_64_bf16", 2686.98, 64),
                                                       ("irwd26_tpu7x_llama31_70b_256_bf16", 2670.55, 256)])
def test_bf16_rows_are_compared_on_the_part(cid: str, tokens: float, chips: int) -> None:
    """The two rows are predicted on tpu7x-pod with the policy, tokens/s a chip against the table's cell; the step is
    never faster than its FLOPs at the chip's peak (physics, whatever the error)."""
    v = script_module("validate_training")
    row = training_cases()[cid]
    r = v.predict_new_case(row)
    assert isinstance(r, v.CaseResult)
    assert r.settings["cluster"] == "tpu7x-pod" and r.settings["dp"] == chips and r.settings["micro_batch"] == 4
    assert r.strategy.recompute_modules == "jax_qkv,jax_context"
    assert r.measured == tokens
    flops = transformer.training_flops(LLAMA70, 8192, 1, "selective", _codes("jax_qkv,jax_context")).hardware
    assert r.predicted <= 8192 * 2307e12 / float(flops) * (1 + 1e-9)
