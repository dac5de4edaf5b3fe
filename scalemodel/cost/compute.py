"""Compute time of transformer layers on one accelerator: a roofline per operation class.

Pure functions on floats / numpy arrays (broadcasting), SI units: FLOP, bytes, seconds, FLOP/s, B/s.

**GEMMs** (projections, MLP, attention core, logits), for a GEMM of M x K times K x N, batched
``count`` times::

    flops = 2 * M * N * K * count
    bytes = (M*K + K*N + M*N) * elem_bytes * count
    eff   = gemm_max * M/(M + d0) * N/(N + d0) * K/(K + d0)          (d0 = gemm_half_dim)
    time  = max(flops / (peak * eff), bytes / (memory_bandwidth * memory))

Each factor d/(d + d0) is 1/2 when the dimension equals d0 and tends to 1 for large ones, so small
or skinny GEMMs (tensor parallelism divides N or K by t; the attention core has K = head_dim) run
at a lower fraction of peak, the behaviour of cuBLAS tiles and wave quantisation (the same idea
as Calculon's size-keyed efficiency tables, calculon@caa4b11:systems/a100_80g.json). The
product is symmetric in (M, N, K), so the two backward GEMMs (data gradient M x N . N x K and
weight gradient K x M . M x N) take exactly twice the forward GEMM time.

**Memory-bound work** (norms, dropout + residual add, activation function, softmax and attention
dropout, MoE token permutation): ``time = bytes / (memory_bandwidth * memory)``. Bytes counted
per forward op at ``elem_bytes`` per element (1 byte per dropout mask element); backward moves
twice the forward bytes (reads the saved input and the incoming gradient, writes the gradient).

**Recompute**: full recompute repeats the whole forward in the backward pass; selective
recompute repeats the attention core (Q K^T, softmax, attention dropout, softmax . V)
[Korthikanti et al. 2022, arXiv:2205.05198 §5].

**Fused (flash) attention core**: on the running kernel's own fitted curve, ``attn_max * k/(k + seq_half) *
d/(d + head_half)`` of the 16-bit peak per direction (:func:`flash_kernel_time`; accelerator spec
``attention_efficiency``, fitted by scripts/fit_attention.py to published attention-kernel benchmarks), where the
job names a kernel with a curve; else its two GEMMs on the GEMM curve (:func:`flash_core_time`). See
docs/model.md#attention-kernel.

Calibration (once per accelerator family; the values live in the accelerator spec's
``compute_efficiency`` and in :data:`DEFAULT_EFFICIENCY`):

    family   gemm_max  gemm_half_dim  memory  how
    ampere   0.757     96             0.85    fitted on A100 (see below)
    others   0.757     96             0.85    NOT calibrated: A100 values as the default
             (volta, hopper, blackwell, cdna2, cdna3, cdna4, tpu, gaudi, other); no
             per-layer measurement for them in ../shared/validation; override per accelerator.

Per-accelerator curves (V100, H100/H200/H800/H100 PCIe, B200, GB200, MI300X/MI325X/MI355X, Gaudi 3, with a
separate fp8 curve where measured) are fitted to published GEMM microbenchmarks and BabelStream
runs (hardware/measurements/, scripts/fit_compute_curves.py) and live in each accelerator YAML's
``compute_efficiency``; they override these family defaults. Their ``gemm_max`` is the
microbenchmark fit times the in-layer factor of their family and precision (:func:`in_layer_gemm_factor`:
:data:`IN_LAYER_GEMM_FACTOR` from A100, Hopper's own from an H100 layer timing, borrowed by Blackwell, whose FP8
one carries over Hopper's relation to the measured FP8 / BF16 kernel ratio), so that
every curve is on an in-layer basis (GEMMs inside a transformer layer, not isolated ones); see those constants.
The fit bounds ``gemm_max`` (the curve's supremum) by the accelerator's MAMF / peak, the best of a brute-force shape
search (stas00/ml-engineering), so no curve predicts an isolated GEMM faster than any measured shape
ran (docs/model.md#roofline, MAMF bound).

A100 fit: grid search (gemm_max 0.60-0.95 step 0.05; d0 in {0, 32, 64, 96, 128, 192, 256};
memory 0.6-0.9) for the smallest worst-case error against Korthikanti et al. Table 4 (one layer
of the 22B model, b 4, s 2048, h 6144, a 64, t 8; measured fwd 7.7 / 7.2 ms baseline / seq-par,
bwd 11.9 / 11.8, selective bwd 13.2 / 13.1, full-recompute bwd 19.5 ms). The two forward TP
all-reduces (2*(7/8)*b*s*h*2 bytes each at 230 GB/s busbw, nccl-tests on DGX A100) are added to
fwd and to the full-recompute bwd; Megatron overlaps the backward all-reduces with the
weight-gradient GEMMs, so bwd adds none. Round values near the optimum kept: worst error 6.1 %
(seq-par bwd, which also repeats an all-gather in backward), mean 3 %.

Check against Narayanan Table 1 (A100, full recompute): the model's compute-only per-GPU
throughput must exceed the measured end-to-end TFLOP/s (which also pays communication and the
pipeline bubble); see tests/test_compute.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from scalemodel.choices import (
    ROWWISE_FP8_RECIPES,
    TE_FP8_RECIPES_TEXT,
    CpCommType,
    LayerImpl,
    LossImpl,
    Recompute,
    codes,
)
from scalemodel.cost import mamba
from scalemodel.cost.checks import all_finite_nonnegative as _finite_nonneg
from scalemodel.cost.checks import fraction as _fraction
from scalemodel.cost.checks import positive as _pos
from scalemodel.cost.transformer import (
    Shape,
    attention_matrices,
    kv_elements_per_token,
    recompute_code,
    recomputed_modules,
    recomputed_norms,
    titan_op_gemms,
)
from scalemodel.errors import InputError

ArrayLike = Any


class EfficiencyCurve(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """Achievable fractions of an accelerator's peaks (plain floats)."""

    gemm_max: float = 0.75
    gemm_half_dim: float = 96.0
    memory: float = 0.85


_A100 = EfficiencyCurve(gemm_max=0.757, gemm_half_dim=96.0, memory=0.85)

#: Fraction of an isolated-GEMM microbenchmark's throughput that the same GEMMs reach inside a
#: transformer layer. Isolated benchmarks (cuBLASLt sweeps, MAMF) time one GEMM repeated back to
#: back; in a layer, GEMMs alternate with norms, activations, attention and communication kernels.
#: The factor is measured, its causes are not separated. The only published per-layer
#: timing with its configuration is Korthikanti et al. 2022 Table 4 (A100, one 22B layer: fwd 7.7 /
#: 7.2 ms baseline / seq-par, bwd 11.9 / 11.8, selective bwd 13.2, full-recompute bwd 19.5 ms). With
#: the curve shape of the A100 GEMM microbenchmarks (hardware/measurements/gemm.yaml: Azure ND A100
#: v4 cuBLASLt sweep + MAMF, fit gemm_max 0.840, d0 89.9; BabelStream memory 0.812), least squares on
#: ln(time) over those six layer times, each priced with Megatron-LM's own memory-bound ops (layer_impl
#: megatron_legacy, :func:`layer_eltwise_bytes`; 0.7495 / 0.893 when every layer was priced with one fused count and
#: a 2x backward), gives gemm_max 0.7565, i.e. 0.7565 / 0.840 = 0.901 of the microbenchmark (the ampere default
#: above, 0.757). Table 4 ran unfused attention without a mask in the cost, so the causal fused core (issue 13)
#: does not move it (tests/test_compute_curves.py re-derives it). Applied to every microbenchmark-fitted curve of a
#: family without a layer timing of its own (:data:`IN_LAYER_GEMM_FACTORS`): assumption, stated, that the
#: in-layer shortfall measured on A100 carries over.
#:
#: Hopper has one (:data:`HOPPER_IN_LAYER_GEMM_FACTOR`). Decision: a per-layer timing of the same kind (a layer
#: microbenchmark, not a training run) measured on the family itself replaces the carried-over A100 assumption.
#: Until the causal core, the Transformer Engine guide's rows were read with the unmasked core and a 2x
#: backward (0.85, not applied); priced as the step model now prices a Hopper layer (causal fused core over (s+1)/2
#: keys on cuDNN's fitted attention curve, the kernel the guide's te.DotProductAttention ran; an fp8 run's casts as
#: the guide's modules run them and BF16 core; each row's memory-bound ops as its own modules move them:
#: :data:`scripts.fit_in_layer_factor.LAYER_IMPL`), they imply 0.847 (BF16) and 0.900 (FP8) on one H100, no
#: communication: the cleanest source found (0.852 / 0.921 with the core on the GEMM curve:
#: :data:`HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR`, what Blackwell borrows). A100 rows alone scatter
#: 0.83-0.93 around 0.893 (before the per-implementation memory-bound bytes); Hopper's BF16 rows 0.824-0.866.
#: FP8 above BF16 is no contradiction: the factor
#: stands for what the step model's pricing of the rest of a layer leaves out, measured against each
#: precision's own isolated curve (the FP8 one is MAMF-bounded at 0.709), not for slower GEMM kernels:
#: NVIDIA/Fuser's nsys profile of an H100 layer shows its forward GEMM kernels at 1.05x the isolated BF16 curve's
#: speed. Blackwell borrows Hopper's BF16 factor and carries over Hopper's FP8 relation (no Blackwell layer timing
#: published; :data:`BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR`). NEVER chosen from the training runs
#: (scripts/validate_training.py).
IN_LAYER_GEMM_FACTOR = 0.901

#: In-layer factors of the families that have a layer timing of their own (or borrow one), per precision group
#: ("16bit": bf16/fp16; "fp8"), by the same method as :data:`IN_LAYER_GEMM_FACTOR` (a layer microbenchmark,
#: never a training run): least squares on ln(time) over a source's per-layer times with the step model's layer
#: pricing (scripts/fit_in_layer_factor.py), divided by the microbenchmark fit's gemm_max.
#: Hopper (h100-sxm, h100-pcie, h200-sxm, h800): Transformer Engine's Getting Started guide, one H100 (SXM class:
#: an H100 PCIe cannot reach its BF16 times even at gemm_max 1), GPT layer h 4096, b 8, s 2048, no communication
#: (hardware/measurements/layer_timing.yaml TE-GS-PT). The attention core of each row is priced as the step model
#: prices it (``layer_compute_time`` with the kernel's ``attention_fwd`` / ``attention_bwd``, the route of
#: engine/job.py ``_attention_kernel``): the unfused rows on the GEMM curve, the 'TE Attention' rows on h100-sxm's
#: fitted cuDNN curve (layer_timing.yaml ``kernel``: the guide's TE 2.12.0.dev0 DotProductAttention prefers
#: FusedAttention, cuDNN, on Hopper). BF16, its three rows (PyTorch and TE modules with unfused attention, TE
#: modules with causal TE attention; 48.280 / 49.342 / 35.709 ms fwd+bwd; priced as eager PyTorch layers,
#: layer_impl eager): in-layer gemm_max 0.6800 / the H100 SXM BF16 microbenchmark fit 0.803 = 0.847 (rows alone
#: 0.852 / 0.824 / 0.857; 0.835 with one fused count and a 2x backward for every row). FP8, its three rows (23.406 /
#: 22.964 / 21.670 ms; delayed scaling, its casts priced by :func:`fp8_quantize_bytes` corrected for the rows'
#: modules: te.LayerNormMLP's GELU and dGELU kernels write the FP8 copies themselves, te.LayerNorm + te.Linear
#: casts the 16-bit norm output; scripts/fit_in_layer_factor.py te_module_cast_bytes; the core in BF16 on the
#: cuDNN curve at the BF16 peak; 'TE Unfused' eager, the 'TE Fused' and TransformerLayer rows megatron_te, the
#: latter without dropout): 0.6380 / the FP8 fit 0.709 = 0.900 (rows alone 0.934 / 0.860 / 0.914). Before h100-sxm's
#: cuDNN backward was fitted to the FlashAttention-3 paper's H100 backward figure (hardware/measurements/attention.yaml
#: FA3-BWD: 12 unmasked points at d 64 / 128, s 512-16k; attn_max 0.663, seq_half 357 in place of h200-sxm's
#: backward / forward ratio, 0.578 / 609), the guide's causal s 2048 backward core was priced 1.37x slower and the
#: factors were 0.855 / 0.936
#: (BF16 rows 0.852 / 0.824 / 0.875; FP8 0.972 / 0.892 / 0.950); 0.938 FP8 before the per-implementation bytes.
#: With the core on the GEMM curve (the pricing before the attention-kernel curves) the same rows give 0.852 and
#: 0.921 (0.833 / 0.926 before; FP8 core on the BF16 in-layer curve 0.6845): kept as
#: :data:`HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR`. FP8 above BF16 is not the isolated FP8 curve underrating
#: the guide's GEMMs: it lies within -3.0 / +1.3 % of every H100 FP8 GEMM of 4096^3 and up in gemm.yaml (Azure ND
#: H100 v5 cuBLASLt, fast accumulation, per-tensor scales; H200's sweep -2.4 / +0.2 %), and Transformer Engine runs
#: its dgrad / wgrad GEMMs with the slower split accumulator (_2X_ACC_DGRAD / _2X_ACC_WGRAD).
#: Not used: NVIDIA/Fuser's 8 x H100 GPT-3 layer (0.639), whose 50 MB tensor-parallel all-reduces ran NCCL
#: RING_LL and whose times may include host gaps: its communication, not its GEMMs, is uncertain (its profiled
#: GEMM kernels run at the isolated curve's speed).
#: Blackwell (b200, b300, gb200, gb300): no published layer timing; Hopper's BF16 factor, BORROWED (the nearest
#: generation), in the variant fitted with the core priced the way Blackwell prices it: on its kernel's curve (b200
#: and gb200 have fitted cuDNN curves from NVIDIA/cudnn-frontend's Blackwell SDPA sweeps,
#: hardware/measurements/attention.yaml, which engine/job.py AUTO_ATTENTION_KERNEL resolves to), so
#: :data:`HOPPER_IN_LAYER_GEMM_FACTOR`; before those curves its core stayed on the GEMM curve and it borrowed
#: :data:`HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR`. Not refitted: no Blackwell layer timing exists to refit from. Its
#: FP8 factor is not Hopper's 0.900 but :data:`BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR` (0.813; bw22): Blackwell's
#: isolated fp8 curves are bounded by the FP8 / BF16 kernel ratio Transformer Engine measured on a B300, which
#: already holds what Hopper's FP8 premium stands for. A run with ``attention_kernel: gemm`` still gets the
#: kernel-core factor: the factor is per accelerator, not per kernel choice.
#: Every other family (A100 and those without a layer timing): :data:`IN_LAYER_GEMM_FACTOR`.
HOPPER_IN_LAYER_GEMM_FACTOR: dict[str, float] = {"16bit": 0.847, "fp8": 0.900}
#: Hopper's factors with the attention core on the GEMM curve (same TE-GS-PT rows): the basis for families whose
#: core is priced on the GEMM curve (no attention-kernel curve); Blackwell's until its cuDNN curves were fitted.
HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR: dict[str, float] = {"16bit": 0.852, "fp8": 0.921}
#: Blackwell's FP8 in-layer factor (bw22). Hopper's FP8 factor stands above its BF16 one (0.900 / 0.847) because
#: Hopper's isolated curves price FP8 against BF16 slower than its kernels run: at the 12 GEMMs of one layer of
#: Transformer Engine's GEMM profiling guide (h 4096, f 16384, M 15872; hardware/measurements/gemm.yaml
#: TE-GEMMPROF-B300, ``fp8_in_layer``) h100-sxm's isolated curves give an FP8 / BF16 time ratio of 1.720 and its
#: in-layer curves 1.829, while TE's pre-quantized kernels ran 1.905 on an H200 NVL (31.968 / 16.785 ms, BF16 over
#: FP8 current scaling, same shapes, page 'Worked Example: 5B Model on H200'): the premium brings Hopper's in-layer
#: ratio to 0.960 x the measured kernel ratio. Blackwell's isolated fp8 curves are already bounded to the B300's
#: measured kernel ratio, 1.923 (13.102 / 6.812 ms; scripts/fit_compute_curves.py FP8_OVER_16BIT); Hopper's FP8
#: factor on top of that bound would price Blackwell's in-layer FP8 GEMMs 2.04 x its BF16 ones (2.106 with the 0.936 /
#: 0.855 of before h100cmp22), past every FP8 / BF16 ratio measured on either generation (TE 1.905 / 1.923,
#: OpenXLA's sm_100 table 1.95, MAMF 1.90-1.98). What is carried over instead is Hopper's measured relation:
#: Blackwell's in-layer ratio at those GEMMs = Hopper's in-layer ratio x the two generations' kernel ratios, 1.829 x
#: 1.923 / 1.905 = 1.847, i.e. the fp8 factor = the BF16 factor 0.847 x 1.847 / the bounded isolated ratio 1.923 =
#: 0.813 (scripts/fit_in_layer_factor.py blackwell_fp8_factor; tests/test_layer_timing.py re-derives it by hand).
#: Since the BF16 factors are the same, it reduces to Hopper's FP8 factor x its isolated over its kernel ratio, 0.900
#: x 1.720 / 1.905. Recomputed when h100cmp22 refit Hopper's factors on FA3-BWD's H100 backward: 0.846 before (from
#: 0.855 / 0.936: in-layer ratio 1.884, 0.989 x the kernel ratio, target 1.902). From microbenchmarks and datasheets
#: only, never the training rows.
BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR = 0.813
BLACKWELL_IN_LAYER_GEMM_FACTOR: dict[str, float] = {"16bit": HOPPER_IN_LAYER_GEMM_FACTOR["16bit"],
                                                    "fp8": BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR}
IN_LAYER_GEMM_FACTORS: dict[str, dict[str, float]] = {
    "hopper": HOPPER_IN_LAYER_GEMM_FACTOR,  # measured: TE Getting Started guide on one H100, core on cuDNN's curve
    # BF16 borrowed from Hopper, core on its kernel's curve as Blackwell prices it (cuDNN curves fitted for b200 and
    # gb200); no Blackwell layer timing to refit from. FP8: Hopper's in-layer / kernel ratio relation carried over
    "blackwell": BLACKWELL_IN_LAYER_GEMM_FACTOR,
}


#: In-layer factors of single accelerators whose curves sit on another basis than their family's. An in-layer factor
#: is a ratio of a layer timing to an isolated-GEMM curve, so it carries over only to curves of the same thermal
#: state. Hopper's (:data:`HOPPER_IN_LAYER_GEMM_FACTOR`) divides Transformer Engine's H100 layer times, which ran
#: for seconds at the 700 W limit, by the H100 curve, whose level is MAMF's near-boost best shape (50 + 100 calls):
#: it holds the power throttle. h200-sxm's curves are fitted to scalemodel's own sweep of a card at its power limit
#: (hardware/measurements/gemm.yaml SM-H200), the sustained basis, so Hopper's factor on them would count the
#: throttle twice. Its factors are the same Transformer Engine H100 rows re-read on the H200 curves (same GH100
#: die, same 700 W; the H100's own memory bandwidth kept; scripts/fit_in_layer_factor.py SUSTAINED_BASIS), the
#: 'TE Attention' cores on h200-sxm's cuDNN curve (fitted to our own H200 attention sweep, the same session type):
#: BF16 0.960 (0.938 before the per-implementation memory-bound bytes), FP8 0.992 (0.993). (Core on the GEMM curve,
#: as before the attention-kernel curves: 0.950 / 0.950.) Checked against our own eager PyTorch layers on the same
#: H200 (layer_impl eager, no dropout), each core on the curve of the kernel it ran: SM-H200 (SDPA flash =
#: FlashAttention-2, fwd+bwd at h 2048-12288, its backward also accumulating the weight gradients, unpriced) 0.954
#: (rows 0.93-0.98; 0.949 before); SM-H200-LAYER (gradients reset per step; flash rows on the fa2 curve, cuDNN rows
#: on the cudnn curve) 0.979 (rows 0.93-1.00; 0.973 before), 2.0 % above the Transformer Engine route (3.7 %
#: before). With the core on the GEMM curve, before the per-implementation bytes, these two gave 0.890 and 0.930,
#: the latter within 0.1 % of the TE route's 0.929: that agreement rested on the GEMM curve pricing
#: FlashAttention-2's core (218 TFLOP/s fwd+bwd measured at s 2048, d 128; the fa2 curve gives 225) as fast as
#: cuDNN's (368; the cudnn curve 380). hardware/README.md, "Sustained and burst", has the numbers.
IN_LAYER_GEMM_FACTORS_BY_ACCELERATOR: dict[str, dict[str, float]] = {
    "h200-sxm": {"16bit": 0.960, "fp8": 0.992},  # TE-GS-PT on the H200 sustained-basis curves, cuDNN core
}


def _tokens(micro_batch: ArrayLike, seq_len: ArrayLike, cp: ArrayLike) -> np.ndarray:
    """T = b s / cp: the tokens of one micro-batch a context-parallel rank holds (each checked positive)."""
    return _pos("micro_batch", micro_batch) * _pos("seq_len", seq_len) / _pos("cp", cp)


def in_layer_gemm_factor(family: str, precision: str = "bf16", accelerator: str | None = None) -> float:
    """The in-layer GEMM factor a catalog curve of this accelerator family and precision is built with
    (:data:`IN_LAYER_GEMM_FACTORS_BY_ACCELERATOR` for the named accelerator, else :data:`IN_LAYER_GEMM_FACTORS`,
    else :data:`IN_LAYER_GEMM_FACTOR`): catalog gemm_max = microbenchmark fit x it."""
    group = "fp8" if str(precision).lower() == "fp8" else "16bit"
    own = IN_LAYER_GEMM_FACTORS_BY_ACCELERATOR.get(str(accelerator).lower(), {}) if accelerator else {}
    if group in own:
        return own[group]
    return IN_LAYER_GEMM_FACTORS.get(str(family).lower(), {}).get(group, IN_LAYER_GEMM_FACTOR)


#: Rate of an fp8 recipe's GEMMs relative to the accelerator's fp8 (per-tensor e4m3) curve, by family and recipe:
#: the recipe's GEMMs run at ``gemm_max`` x this factor (engine/job.py ``build_job``), every other recipe and family
#: at 1. The fp8 curves are fitted to per-tensor-scaled FP8 GEMMs (cuBLASLt ``CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F``)
#: and in-layer factors of per-tensor runs; MXFP8 runs a different cuBLASLt kernel, block-scaled MMA with one E8M0
#: scale per 32 elements of each operand (``CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0``; TransformerEngine@d0067d0da6
#: transformer_engine/common/gemm/cublaslt_gemm.cu), and no curve of its own is published.
#:
#: Blackwell ``mxfp8`` 0.951 = 6.812 / 7.161: Transformer Engine's GEMM profiling guide (hardware/measurements/
#: gemm.yaml TE-GEMMPROF-B300; NVIDIA/TransformerEngine@d0067d0da6 docs/examples/gemm_profiling/gemm_profiling.rst,
#: 'Autocast vs Pre-quantized'), one B300 SXM6 AC, the 12 GEMMs of one layer of a 5B config (h 4096, f 16384,
#: M = 31 x 512 = 15872 tokens), ``--pre-quantize`` (operands quantized once before the timed loop: GEMM kernels
#: only), per-layer sums FP8 current scaling 6.812 ms against MXFP8 7.161 ms; per pass fprop / dgrad / wgrad
#: 2.158 / 2.329 / 2.325 against 2.365 / 2.397 / 2.400 (ratios 0.912 / 0.972 / 0.969). Both columns are the same
#: call (benchmarks/gemm/benchmark_gemm.py at that commit: ``tex.generic_gemm`` of randn operands quantized by
#: ``Float8CurrentScalingQuantizer`` or ``MXFP8Quantizer``, same shapes and layout, BF16 output, 10 warm-up and 100
#: timed calls under CUDA events after a 4096^3 lead GEMM, the two recipes back to back per shape in one process).
#: Rule (fixed before any validation run, never from a training row): admit published pre-quantized timings of
#: both kernels on the same card, shapes, process and library (cuBLASLt, what Transformer Engine's general_gemm and
#: torch._scaled_mm run); per source the ratio of summed times; several sources: their median. One source
#: qualifies (hardware/README.md, "Blackwell basis": flashinfer's CUTLASS mm_mxfp8 vs bmm_fp8 on a B200, pull
#: request #2464, is another library and its FP8 half is not in the stored text; torchao's Llama3-8B tokens/s
#: table is a training run with its casts). One factor, not one per direction: the per-pass gap is per-tensor FP8's
#: (its fprop shapes run 7-8 % faster than its dgrad / wgrad ones, MXFP8's three passes within 1.5 %), and the fp8
#: curve is symmetric in (m, n, k), pricing every pass at the same rate; on it per-direction factors (0.912 forward,
#: 0.970 backward) would price MXFP8's own fprop 5 % slow and its backward 2.4 % fast, the one factor both within
#: 1 %. Measured on a B300 (sm_103) only: B200, GB200 and GB300 (the same fifth-generation tensor cores and the same
#: cuBLASLt kernel family) BORROW it, as they borrow Hopper's in-layer factors. Applied to every fp8 GEMM of an
#: mxfp8 run priced on the fp8 curve (layer projections, MLP, routed and shared experts' grouped GEMMs, Mamba and MTP
#: projections); the BF16 attention core, router and logits GEMMs keep their 16-bit curve. Assumption, stated: the
#: ratio measured at one config's shapes (every side >= 4096) holds at others, and for grouped GEMMs.
#:
#: Blackwell ``nvfp4`` 1.810 = 6.812 / 3.764, by the same rule from the same source: the guide's NVFP4 column, the
#: same call on operands quantized once by ``NVFP4Quantizer`` (E2M1, 16-element E4M3 block scales, cuBLASLt
#: ``VEC16_UE4M3`` block-scaled MMA), same 12 shapes, process and card, per-layer sum 3.764 ms (fprop / dgrad /
#: wgrad 1.254 / 1.305 / 1.205). Above 1: NVFP4's GEMMs run 1.810x the per-tensor fp8 curve's rate. For an fp4
#: run the step prices them on the fp4 peak with gemm_max = fp8 gemm_max x 1.810 x fp8 peak / fp4 peak
#: (engine/job.py ``_nvfp4_gemms``), the same rate, so the priced time does not depend on which of the disputed
#: dense FP4 peaks a part carries. BORROWED by B200, GB200 and GB300 as the time ratio, not as a fraction of the
#: FP4:FP8 peak ratio (3 on B300 / GB300, 2 on B200 / GB200; the fraction, 1.810 / 3 = 0.603, would give B200
#: 1.21x): the Azure ND GB200 v6 cuBLASLt sweep (gemm.yaml AZ-GB200, CUDA 12.8) reaches 7627.6 TFLOP/s in FP4 at
#: 16384^3, 0.76 of GB200's dense FP4 peak and 2.11x gb200's MAMF-level FP8 (3615.6), so a 2:1 part's FP4 kernels
#: do run near twice its FP8 ones, above 1.21x. Measured on one config's shapes (every side >= 4096), its size
#: dependence borrowed from the fp8 curve.
#:
#: Hopper ``blockwise`` 0.812 = 16.785 / (22.882 - 2.218): the same guide's H200 NVL worked example (the same 12
#: shapes, "Worked Example: 5B Model on H200"). Its pre-quantized run leaves Float8BlockScaling out (the
#: pre-quantized path makes 2D x 2D operands, which Hopper's cuBLASLt refuses), so the block GEMMs are the autocast
#: run's per-layer time, 22.882 ms (fprop / dgrad / wgrad 7.425 / 7.636 / 7.821), less its casts priced by
#: :func:`fp8_quantize_bytes`' blockwise rule: benchmark_gemm.py ``benchmark_fp8_block`` runs ``te.Linear(K, N)(x)``
#: under ``Float8BlockScaling`` with x not requiring grad, so x is quantized row- and column-wise, 1 x 128 tiles (2 +
#: 2 (1 + 4/128) = 4.0625 bytes an element, X = 1495.3 M) and the weight row-wise, 128 x 128 tiles (2 + 1 + 4/128^2,
#: W = 987.8 M): 9.038 GB at 4.8 TB/s x 0.849 (h200-sxm's memory efficiency) = 2.218 ms (Hopper's casts keep factor
#: 1: the page's current-scaling pair is the control, autocast - pre-quantized 0.926 / 1.134 / 1.440 ms against 0.917
#: / 1.108 / 1.388 priced per pass). Per-tensor: the current-scaling pre-quantized GEMMs, 16.785 ms (5.577 / 5.661 /
#: 5.547). Per pass 0.817 / 0.820 / 0.800, one factor as for mxfp8. TE's guide: "On Hopper, block-scaled GEMMs are
#: software-emulated" (docs/features/low_precision_training/fp8_blockwise_scaling, release_v2.14: cuBLASLt's
#: VEC128_32F / BLK128x128_32F scale modes, the scales applied as the accumulator is promoted). Every timed call is
#: a 1D x 2D GEMM (activation x weight); a training run's wgrad GEMMs are 1D x 1D (dY and X, both 1 x 128), which the
#: guide says carry more overhead than mixed 1D / 2D: unmeasured, priced at the same factor (optimistic there).
#: The per-tensor reference ran with fast accumulation (generic_gemm use_split_accumulator False); Float8BlockScaling
#: requires the split accumulator in all three GEMMs, so 0.812 holds its cost, which training's per-tensor dgrad /
#: wgrad already pay (TE's _2X_ACC_DGRAD / _2X_ACC_WGRAD) inside the fp8 in-layer factor: counted twice there
#: (pessimistic, unmeasured; docs/model.md#fp8-blockwise).
#: Measured on an H200 NVL only: every Hopper part of the catalog (h100-sxm, h100-pcie, h200-sxm, h800; the same
#: sm_90 kernels) BORROWS it. The H200 runs' drift is
#: small (BF16 31.968 / 32.014 ms per layer between the two runs).
FP8_RECIPE_GEMM_FACTORS: dict[str, dict[str, float]] = {
    # TE-GEMMPROF-B300, pre-quantized: 6.812 / 7.161 ms (mxfp8), 6.812 / 3.764 ms (nvfp4); B200 / GB200 / GB300 borrow
    "blackwell": {"mxfp8": 0.951, "nvfp4": 1.810},
    # TE-GEMMPROF-B300's H200 NVL example: current pre-quantized 16.785 / (block autocast 22.882 - casts 2.218) ms
    "hopper": {"blockwise": 0.812},
}


#: Time of cuDNN's FP8 / MXFP8 fused attention over its BF16 kernel's on the same GPU, shape and release
#: (:func:`fp8_attention_time_ratios`; docs/model.md#fp8-attention-rate): accelerator -> scaling ("mxfp8": the
#: block-scaled MXFP8 SDPA of an fp8_recipe mxfp8 run; "fp8": the per-tensor FP8 SDPA of the delayed and current
#: scaling recipes) -> head-dim class (the largest of 64, 128, 192 at or above the Q K head dim; 192 = the MLA
#: shape, qk 192 / v 128) -> (forward, backward), each the ratio at s = :data:`FP8_ATTENTION_SEQS` (the ratio trends
#: with s: the d-128 MXFP8 backward runs 1.19x BF16's time at 2k and 0.94x at 32k on GB300; a run's core takes the
#: ratio at its kernel's query rows, :func:`fp8_attention_ratio_at`, review26a). Source: NVIDIA/cudnn-frontend@3929da2
#: benchmark/sdpa_benchmark_training/results/{gpt_oss,llama3.1,dsv3}/{gb200,gb300}/*_20260424_*.csv (cuDNN 9.22.0, one
#: GB200 and one GB300 GPU, each sweep running bfloat16, fp8 and mxfp8 on the same shapes minutes apart): the FP8 time
#: over the BF16 time of the causal (top_left), non-deterministic rows at each s, 3 decimals. Shapes: dsv3 b 2,
#: 128 heads, d 192 / 128; llama3.1 b 2, GQA 64 / 8, d 128; gpt_oss b 2, 128 heads, d 64, window 128 (its forward
#: only: the backward of a window layer is the window-blind rule's, which layer_compute_time prices against the
#: measured MXFP8 time, and no d-64 sweep without a window exists, so 1; its 32k forward ratio is low because the
#: BF16 forward jumps 3.2x from 16k to 32k where FP8's doubles, as measured).
#: b200 and b300 BORROW gb200's and gb300's (the same sm_100 / sm_103 dies and cuDNN kernels; no B200 / B300 sweep
#: with FP8 rows published). Hopper (review26a): the twin sweep results/h200_919_only_cudnn/llama3.1_20260227_034703.csv
#: at 3929da2 (one H200, cuDNN 9.19.1, b 1, GQA 64 / 8, d 128, top_left, deterministic_bwd False, bfloat16 and
#: per-tensor fp8, fwd_time_ms and bwd_time_ms timed apart): its FP8 / BF16 times, the d-128 class, the only one
#: (the same sweep's dsv3 d-192 and gpt_oss d-64 fp8 rows failed: cuDNN 9.19's Hopper FP8 graph takes head dim 128
#: only), so every head dim takes it; h100-sxm, h100-pcie and h800 borrow it (the same GH100 die and kernels).
#: Every other accelerator has none (1: the core on the 16-bit curve, as before).
FP8_ATTENTION_SEQS: tuple[float, ...] = (2048.0, 4096.0, 8192.0, 16384.0, 32768.0)
_ONE = (1.0, 1.0, 1.0, 1.0, 1.0)
FP8_ATTENTION_TIME_RATIOS: dict[str, dict[str, dict[int, tuple[tuple[float, ...], tuple[float, ...]]]]] = {
    "gb200": {
        "mxfp8": {64: ((1.000, 1.000, 1.007, 1.005, 0.621), _ONE),
                  128: ((0.824, 0.834, 0.827, 0.854, 0.793), (1.185, 1.089, 1.035, 0.925, 0.860)),
                  192: ((0.698, 0.731, 0.714, 0.713, 0.749), (0.809, 0.774, 0.798, 0.731, 0.702))},
        "fp8": {64: ((0.927, 0.929, 0.930, 0.932, 0.580), _ONE),
                128: ((0.776, 0.780, 0.769, 0.793, 0.738), (1.064, 0.974, 0.916, 0.814, 0.727)),
                192: ((0.645, 0.671, 0.661, 0.675, 0.712), (0.645, 0.624, 0.609, 0.576, 0.580))},
    },
    "gb300": {
        "mxfp8": {64: ((0.885, 0.866, 0.861, 0.856, 0.532), _ONE),
                  128: ((0.790, 0.749, 0.722, 0.702, 0.701), (1.191, 1.093, 1.022, 0.964, 0.938)),
                  192: ((0.619, 0.632, 0.645, 0.656, 0.673), (0.790, 0.751, 0.725, 0.706, 0.692))},
        "fp8": {64: ((0.827, 0.827, 0.824, 0.823, 0.512), _ONE),
                128: ((0.700, 0.672, 0.641, 0.627, 0.628), (1.022, 0.895, 0.806, 0.740, 0.700)),
                192: ((0.560, 0.571, 0.583, 0.595, 0.592), (0.605, 0.577, 0.559, 0.530, 0.536))},
    },
    "h200-sxm": {"fp8": {128: ((0.690, 0.692, 0.668, 0.667, 0.660), (0.942, 1.006, 1.258, 1.548, 1.569))}},
}
#: Accelerators that borrow another's FP8 attention ratios (the same die and kernels).
FP8_ATTENTION_BORROWED: dict[str, str] = {"b200": "gb200", "b300": "gb300", "h100-sxm": "h200-sxm",
                                          "h100-pcie": "h200-sxm", "h800": "h200-sxm"}
#: The ratios of an accelerator without a measurement: the core as a BF16 one.
NO_FP8_ATTENTION_RATIOS: tuple[tuple[float, ...], tuple[float, ...]] = (_ONE, _ONE)
_LOG_SEQS = np.log2(FP8_ATTENTION_SEQS)


def has_fp8_attention_ratios(accelerator: str) -> bool:
    """Whether ``accelerator`` has (or borrows) a measured FP8 / BF16 attention time
    (:data:`FP8_ATTENTION_TIME_RATIOS`)."""
    name = str(accelerator).lower()
    return FP8_ATTENTION_BORROWED.get(name, name) in FP8_ATTENTION_TIME_RATIOS


def fp8_attention_time_ratios(accelerator: str, recipe: str, head_dim: float
                              ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(forward, backward) time of an FP8 attention core over the BF16 core's on ``accelerator`` for an fp8 run of
    ``recipe`` (mxfp8: block-scaled; any other: per-tensor) at Q K head dim ``head_dim``, each at s =
    :data:`FP8_ATTENTION_SEQS` (:data:`FP8_ATTENTION_TIME_RATIOS`: the smallest measured head-dim class at or above
    it, the largest beyond); :data:`NO_FP8_ATTENTION_RATIOS` for an accelerator without a measurement."""
    name = str(accelerator).lower()
    table = FP8_ATTENTION_TIME_RATIOS.get(FP8_ATTENTION_BORROWED.get(name, name))
    if table is None:
        return NO_FP8_ATTENTION_RATIOS
    by_dim = table.get("mxfp8" if str(recipe) == "mxfp8" else "fp8", table["fp8"])  # Hopper: per-tensor only
    dims = sorted(by_dim)
    cls = next((x for x in dims if float(head_dim) <= x), dims[-1])
    return by_dim[cls]


def fp8_attention_ratio_at(ratio: float | Sequence[float], seq: ArrayLike) -> np.ndarray:
    """One direction's FP8 / BF16 attention time (:func:`fp8_attention_time_ratios`) at a kernel call of ``seq``
    query rows: linear in log2 s between the swept :data:`FP8_ATTENTION_SEQS`, the end value beyond them (no
    extrapolation); a scalar ``ratio`` is that ratio at every s."""
    r = np.asarray(ratio, dtype=float)
    if r.ndim == 0:
        return np.broadcast_to(r, np.shape(seq)).astype(float)
    return np.interp(np.log2(np.asarray(seq, dtype=float)), _LOG_SEQS, r)


#: Run recipes whose FP8 attention (training.fp8_attention) quantizes Q, K, V and dO with Transformer Engine's
#: current scaling (:func:`fp8_attention_cast_bytes`): tensorwise (the autocast's own Float8CurrentScaling) and
#: nvfp4 (NVFP4BlockScaling has no FP8 attention of its own; Megatron-Core passes fp8_dpa into it and TE's
#: DotProductAttention builds a Float8CurrentScaling recipe for QKV, O, dO, dQKV under NVTE_DPA_FP8_RECIPE
#: "Float8CurrentScaling", the setting MLPerf v5.1's NVFP4 runs export). docs/model.md#fp8-attention-casts.
FP8_ATTENTION_CS_RECIPES = ("tensorwise", "nvfp4")


def fp8_attention_cast_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                             cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HBM bytes (forward copy, forward casts, backward casts) per layer and micro-batch on one GPU that an FP8
    attention core (training.fp8_attention) under a current-scaling attention recipe
    (:data:`FP8_ATTENTION_CS_RECIPES`) adds around the fused kernel. Price the casts at the tensorwise cast-kernel
    factor (the same Float8CurrentScalingQuantizer), the copy at the HBM roofline.

    Source: NVIDIA/TransformerEngine release_v2.8 (40c69e751, the MLPerf v5.1 NeMo containers' TE_REVISION),
    transformer_engine/pytorch/attention/dot_product_attention/: backends.py ``FusedAttnFunc.forward`` (L1114)
    quantizes the 16-bit Q, K, V with ``combine_and_quantize(qkv_layout, q, k, v, QKV_quantizer)``, whose separate
    layouts (Megatron-Core's: q, k, v leave RoPE as three tensors) ``torch.cat`` them first (utils.py L2002-2047:
    a copy, read eb + write eb an element), then the quantizer's amax pass and cast (read eb, read eb, write 1); the
    kernel returns O in 16 bits (Float8CurrentScaling, ``NVTE_DPA_FP8CS_O_in_F16`` default 1, L139 / L1197: no O
    cast, O saved in 16 bits); ``FusedAttnFunc.backward`` (L1387) quantizes dO (``dO_quantizer``: eb + eb + 1) and
    the kernel returns dQ, dK, dV in 16 bits (no dequantize). S and dP are cuDNN-internal (a delayed-scaling recipe,
    no HBM cast). Elements (T = b s / cp tokens, heads / t local):

        forward copy   2 eb    x T (a d + g_k d + g_v d_v) / t       g_k = g_v = g (GQA); a for MLA (K, V per head)
        forward casts  (2 eb + 1) x the same elements
        backward casts (2 eb + 1) x T a d_v / t                       dO

    Not counted: the delayed-scaling S / dP amax history update (a few scalars a layer, no amax reduction under
    MLPerf's NVTE_DPA_FP8DS_REDUCE_AMAX 0), and the other recipes' FP8 attention casts (delayed: O and dQKV in FP8,
    mxfp8: MXFP8 attention quantizers; not read), priced as none."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    eb = _pos("elem_bytes", elem_bytes)
    T = b * s / _pos("cp", cp)
    a, g, d, dv = sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim
    kv = np.where(sh.mla, a, g)
    qkv = T * (a * d + kv * d + kv * dv) / t
    d_o = T * a * dv / t
    cast = 2.0 * eb + 1.0
    return 2.0 * eb * qkv, cast * qkv, cast * d_o


#: Speed of an MXFP8 grouped (routed-expert) GEMM over the same BF16 grouped GEMM at MoE expert shapes, per
#: accelerator family (:func:`mxfp8_grouped_gemm_speedup`; docs/model.md#mxfp8-expert-gemms). An mxfp8 run's routed
#: experts' GEMMs (:func:`layer_compute_time`'s ``expert_*``, engine/layer_compute.py ``expert_gemm_kwargs``) take
#:
#:     t_expert(m, n, k) = max(t_BF16,isolated(m, n, k) / (R x f_fp8),  t_MXFP8(m, n, k))
#:
#: t_BF16,isolated the accelerator's isolated 16-bit curve (catalog 16-bit gemm_max / the 16-bit in-layer factor
#: f_16, its d0, the BF16 peak), f_fp8 the fp8 in-layer factor every fp8 GEMM's price carries (so in a layer the
#: expert GEMM is priced at R x the isolated BF16 rate on the in-layer basis of an fp8 GEMM: the catalog 16-bit
#: curve x f_fp8 / f_16 on R x the BF16 peak), and t_MXFP8 the cap, the price every other MXFP8 GEMM of the run
#: gets (the catalog fp8 curve x :data:`FP8_RECIPE_GEMM_FACTORS`' mxfp8 0.951): never faster than the dense MXFP8
#: price. Dense layers, shared experts, the router and every non-mxfp8 recipe keep their curves.
#:
#: Blackwell 1.531 = sqrt(1.5919 x 1.4733), the geometric mean of the two measured per-shape speed-ups: hardware/
#: measurements/grouped_gemm.yaml MARIN-7282 (marin-community/marin@97cf4ac0b8 experiments/grug/moe/standalone/
#: bench_te_grouped_gb200.json; one GB200, Transformer Engine 2.16's JAX grouped_dense, one cuBLASLt grouped GEMM
#: call over 64 groups of 4096 rows, operands quantized once before the timed call, wall-time median of 50
#: synchronised calls): k 2560 n 1280 BF16 1.3120 / MXFP8 0.8242 ms = 1.5919, k 1280 n 2560 1.2984 / 0.8813 ms =
#: 1.4733. One constant, not one per shape: the two shapes are the same GEMM transposed (equal m, equal FLOPs,
#: k and n swapped) and the curve is symmetric in (m, n, k), so no per-shape rule the curve can carry separates
#: them; each lies within 4 % of the mean. At these shapes the dense curves make MXFP8 1.94x BF16 (gb200 fp8
#: 0.6101 x 0.951, d0 113, against 16-bit 0.6491, d0 175; 2.30x at 0.7233 before the FP8 / BF16 bound of
#: docs/model.md#fp8-bf16-ratio), the BF16 calls run on the 16-bit curve (measured / priced 0.979, 0.969), so the
#: shortfall is the block-scaled grouped kernel's. The cap does not bind at the measured shapes (1340.6 us / 1.531 =
#: 875.6 us against 691.6 us). Both arms are host-inclusive wall times with
#: the same dispatch (tens of us in 0.82-1.31 ms calls), which pulls the ratio slightly toward 1. Measured on a
#: GB200 only: B200, B300 and GB300 (the same fifth-generation tensor cores and cuBLASLt block-scaled kernels)
#: BORROW it. NVFP4 experts: no BF16-twin timing of an NVFP4 grouped GEMM at expert shapes (TE-PR3134's per-call
#: times are host-bound), so none. Never taken from a training row.
MXFP8_GROUPED_GEMM_SPEEDUPS: dict[str, float] = {
    # MARIN-7282 (one GB200): sqrt(1.3120 / 0.8242 x 1.2984 / 0.8813); B200 / B300 / GB300 borrow it
    "blackwell": 1.531,
}


def mxfp8_grouped_gemm_speedup(family: str, recipe: str) -> float | None:
    """The measured MXFP8 / BF16 grouped-GEMM speed-up of this accelerator family (:data:`MXFP8_GROUPED_GEMM_SPEEDUPS`)
    for an mxfp8 recipe's routed-expert GEMMs; None for another recipe or a family without a measurement (the
    experts keep the run's fp8 curve)."""
    if str(recipe) != "mxfp8":
        return None
    r = MXFP8_GROUPED_GEMM_SPEEDUPS.get(str(family).lower())
    return None if r is None else float(r)


#: Time factor of Transformer Engine's quantization (cast) kernels over their HBM-roofline price, per accelerator family
#: and recipe (:func:`cast_kernel_time_factor`): the casts' bytes (:func:`fp8_quantize_bytes`) take
#:
#:     t_cast = factor x bytes / (memory_bandwidth x memory efficiency)
#:
#: Source: Transformer Engine's GEMM profiling guide (NVIDIA/TransformerEngine@d0067d0da6
#: docs/examples/gemm_profiling/gemm_profiling.rst, "Autocast vs Pre-quantized"; benchmarks/gemm/benchmark_gemm.py;
#: hardware/measurements/gemm.yaml TE-GEMMPROF-B300), one B300 SXM6 AC, the 12 GEMM shapes (M, K, N) of one layer of
#: its 5B config (h 4096, f 16384, QKV 12288, 15872 tokens; fprop (M,h,N), dgrad (M,N,h), wgrad (h,M,N)), each timed
#: twice by CUDA events over 100 back-to-back calls: "autocast", ``te.Linear(K, N)(x)`` under ``te.autocast`` with
#: x (M x K) not requiring grad, which per call quantizes x row- and column-wise (the weight needs its input for wgrad:
#: linear.py ``backward_needs_input``) and the weight (K x N) row-wise only (``columnwise_usage = inp.requires_grad``,
#: False) and runs the GEMM; and "pre-quantized", ``tex.generic_gemm`` on operands quantized once before the loop.
#: The per-layer difference is the quantization's device time (the host's te.Linear call, tens of us, hides under
#: calls of 0.23-1.4 ms). Priced with :func:`fp8_quantize_bytes`' per-element bytes (Blackwell: no transposed copy)
#: over X = sum M K = 1495.3 M and W = sum K N = 987.8 M elements of the 12 shapes, on the bus the card has: the SXM6 AC
#: part enables 15 of its 16 HBM controllers (hardware/accelerators/b300.yaml: 7.5 TB/s), x 0.85:
#:
#:     mxfp8       X (2 + 2 x 1.03125) + W (2 + 1.03125) = 9.069 GB: 1.423 ms priced, 8.984 - 7.161 = 1.823 ms measured
#:     tensorwise  (X + W) x 5 (amax read, read, write 1) = 12.417 GB: 1.948 ms priced, 9.147 - 6.812 = 2.335 ms
#:     nvfp4       X (2 x 2 + 2 x 0.5625) + W (2 x 2 + 0.5625) = 12.170 GB: 1.909 ms priced, 6.453 - 3.764 = 2.689 ms
#:
#: factors 1.282, 1.199 and 1.409 (NVFP4's includes the random Hadamard transform of the column-wise copy): the
#: kernels' rate against a full bus, as B200, GB200 and GB300 have. b300 itself is priced on the catalog's 8 TB/s
#: (the 16-controller figure, for all its memory-bound work), so its own casts take the same differences over that
#: price, 1.367 / 1.279 / 1.502 (:data:`CAST_KERNEL_BUS_FRACTION`): the part the guide timed reproduces the guide.
#: Conservative: the guide's two runs drift (torch.matmul BF16 12.758 -> 13.102 ms, delayed-scaling autocast 7.802 ->
#: 8.123 ms, the pre-quantized run slower), and read against the autocast run's state the pre-quantized GEMMs are
#: 2.7-4.1 % faster, which raises the factors to 1.41-1.48 / 1.29-1.34 / 1.46-1.49; the direct differences are kept.
#: Not a Hopper effect: the guide's H200 NVL current-scaling pair (20.285 - 16.785 = 3.500 ms) against the same count
#: priced with Hopper's transposed copy (X 6, W 5 bytes an element, 13.91 GB at 4.8 TB/s x 0.849 = 3.413 ms) is
#: 1.025, so Hopper keeps 1. Delayed scaling has no pre-quantized timing (the guide: it "always runs in autocast
#: mode"); against current scaling's pre-quantized GEMMs (the same per-tensor cuBLASLt call) it reads 0.990 / 1.168
#: ms = 0.85 (1.00-1.08 with the drift): no factor is set for it (1). Corroborated on B200: ROCm/TransformerEngine pull
#: request #598 (2026-05-27) times NVIDIA's MXFP8 cast kernel on a B200 beside its own ("CAST_ONLY", BF16 8192 x 8192:
#: row-wise 34.84, column-wise 39.61, both 52.34 us), 1.12 / 1.27 / 1.26 x the price at b200's 7.7 TB/s x 0.85.
#: Measured on the B300 only: B200, GB200 and GB300 BORROW it (the same TE kernels on sm_100 / sm_103). Not applied to
#: the optimizer's FP8 parameter quantization (another TE path, unmeasured) nor to the per-kernel fixed times of the
#: experts' split quantization (:func:`fp8_expert_quantize_kernels`), which the bytes do not carry.
CAST_KERNEL_TIME_FACTORS: dict[str, dict[str, float]] = {
    # TE-GEMMPROF-B300 autocast - pre-quantized over the priced cast bytes at 7.5 TB/s; B200 / GB200 / GB300 borrow
    "blackwell": {"mxfp8": 1.282, "tensorwise": 1.199, "nvfp4": 1.409},
}

#: Accelerators whose catalog ``memory_bandwidth`` is the full-bus figure while the part enables only this fraction of
#: its HBM bus (:func:`cast_kernel_time_factor` divides the family's full-bus factor by it). b300: the catalog prices
#: its memory-bound work on the 16-controller 8 TB/s ([HGX-B300]), the SXM6 AC part enables 15 of 16 ([B300-DEV]
#: memoryBusWidth 7680 of 8192: 7.5 TB/s) and is the part the guide timed, so against its own catalog price its
#: casts run 1.282 x 8 / 7.5 = 1.367 (mxfp8), 1.279 (tensorwise), 1.503 (nvfp4): the guide's differences over the
#: bytes priced at 8 TB/s x 0.85 directly (1.823 / 1.334, 2.335 / 1.826, 2.689 / 1.790 ms; nvfp4 1.502 unrounded).
CAST_KERNEL_BUS_FRACTION: dict[str, float] = {"b300": 7.5 / 8.0}


#: Time factor of stochastic rounding on NVFP4's output-gradient casts over the same casts rounded to nearest, per
#: accelerator family (:func:`stochastic_rounding_cast_factor`): NVFP4BlockScaling quantizes dY with
#: ``stochastic_rounding`` (``fp4_quant_bwd_grad``; off only under NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING=1;
#: transformer_engine/common/recipe/__init__.py at v2.16), inputs and weights round to nearest. Every dY element then
#: needs 8 random bits for each of its two copies, drawn by Philox4x32 in the cast kernel and fed to
#: ``cvt.rs.satfinite.e2m1x4.f32`` (common/hadamard_transform/row_cast_col_hadamard_transform_cast_fusion.cu at v2.16,
#: the fused RHT cast the rows' dY go through: one ``random_uint4`` per 16 values and copy), so the memory-bound cast
#: becomes issue-bound ("The SR kernel is issue-bound", TE pull request #3357). Source: TE pull request #2412
#: ("Tuned NVFP4 cast kernel", commit fbb16f4a7; switched off by TE pull request #2615, a0a89a8eb, before any release
#: ran it: no row's TE runs that kernel, docs/model.md#nvfp4-recipe-options), measured on a B300, BF16 in, row- and
#: column-wise (transposed) NVFP4 out: round to nearest 6.4 TB/s, stochastic rounding 4.5 TB/s, so
#:
#:     f_SR = 6.4 / 4.5 = 1.422      (row-wise only: 7.2 / 7.0 = 1.03, the second copy's random bits make the cost)
#:
#: multiplying the measured cast-kernel factor (:data:`CAST_KERNEL_TIME_FACTORS`' nvfp4 1.409, whose guide run
#: quantizes only round-to-nearest inputs and weights). BORROWED: measured on the tuned non-RHT kernel, applied to the
#: fused RHT kernel that draws the same random bits per element with the same Philox / cvt.rs code (its SR cost is
#: not published) and to the routed experts' grouped RHT casts (group_row_cast_col_hadamard_transform_cast_fusion.cu,
#: SR on both copies, csrc/extensions/cast.cpp ``setup_stochastic_rounding_rng_states_helper``; unpublished too), and
#: by B200, GB200 and GB300 (the same sm_100 / sm_103 kernels). Not applied to MXFP8 (no SR).
STOCHASTIC_ROUNDING_CAST_FACTORS: dict[str, float] = {
    # TE-PR2412 (one B300): RN 6.4 TB/s / SR 4.5 TB/s, row- and column-wise NVFP4 cast of BF16
    "blackwell": 6.4 / 4.5,
}


def stochastic_rounding_cast_factor(family: str, recipe: str) -> float:
    """Time factor of a recipe's output-gradient casts for stochastic rounding on this accelerator family
    (:data:`STOCHASTIC_ROUNDING_CAST_FACTORS`): NVFP4 only (1 for every other recipe and family)."""
    if str(recipe) != "nvfp4":
        return 1.0
    return float(STOCHASTIC_ROUNDING_CAST_FACTORS.get(str(family).lower(), 1.0))


def cast_kernel_time_factor(family: str, recipe: str, accelerator: str = "") -> float:
    """The time of a recipe's Transformer Engine quantization kernels on this accelerator family over their price at
    the HBM roofline (:data:`CAST_KERNEL_TIME_FACTORS`; 1 for a recipe or family without a measurement, and for
    16-bit runs, recipe ""), over :data:`CAST_KERNEL_BUS_FRACTION` of ``accelerator`` (a part priced on a wider bus
    than it has: b300) where the family has a factor."""
    f = CAST_KERNEL_TIME_FACTORS.get(str(family).lower(), {}).get(str(recipe))
    if f is None:
        return 1.0
    return float(f) / CAST_KERNEL_BUS_FRACTION.get(str(accelerator).lower(), 1.0)


def fp8_recipe_gemm_factor(family: str, recipe: str) -> float:
    """The fraction of the fp8 curve's rate an fp8 recipe's GEMMs (nvfp4: an fp4 run's NVFP4 GEMMs) run at on this
    accelerator family (:data:`FP8_RECIPE_GEMM_FACTORS`; 1 for a recipe or family without one, and for 16-bit
    runs, recipe "")."""
    return float(FP8_RECIPE_GEMM_FACTORS.get(str(family).lower(), {}).get(str(recipe), 1.0))


#: Default curve per accelerator family (AcceleratorSpec.family); see the module docstring.
DEFAULT_EFFICIENCY: dict[str, EfficiencyCurve] = {
    "ampere": _A100,  # calibrated (Korthikanti Table 4)
    "pascal": _A100, "volta": _A100, "hopper": _A100, "blackwell": _A100, "cdna2": _A100, "cdna3": _A100,
    "cdna4": _A100,
    "tpu": _A100, "gaudi": _A100, "other": _A100,  # not calibrated: A100 values
}


def default_efficiency(family: str) -> EfficiencyCurve:
    """The documented default curve for an accelerator family (unknown families get the A100 curve)."""
    return DEFAULT_EFFICIENCY.get(family.lower(), _A100)


def gemm_efficiency(m: ArrayLike, n: ArrayLike, k: ArrayLike, gemm_max: ArrayLike = 0.75,
                    gemm_half_dim: ArrayLike = 96.0) -> np.ndarray:
    """Fraction of peak for an M x N x K GEMM: gemm_max * prod(d / (d + d0))."""
    m, n, k = (_pos(nm, v) for nm, v in (("gemm M", m), ("gemm N", n), ("gemm K", k)))
    d0 = np.asarray(gemm_half_dim, dtype=float)
    if not _finite_nonneg(d0):
        raise InputError("gemm_half_dim is negative or not finite", where="compute_efficiency.gemm_half_dim",
                         allowed="a finite dimension >= 0")
    return _fraction("compute_efficiency.gemm_max", gemm_max) * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0))


def gemm_time(m: ArrayLike, n: ArrayLike, k: ArrayLike, count: ArrayLike = 1.0, *,
              peak_flops: ArrayLike, memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75,
              gemm_half_dim: ArrayLike = 96.0, memory_efficiency: ArrayLike = 0.85,
              elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Roofline time of ``count`` M x N x K GEMMs (see module docstring). Zero when count is 0."""
    count = np.asarray(count, dtype=float)
    m, n, k = (np.maximum(np.asarray(v, dtype=float), 1.0) for v in (m, n, k))
    flops = 2.0 * m * n * k * count
    nbytes = (m * k + k * n + m * n) * np.asarray(elem_bytes, dtype=float) * count
    eff = gemm_efficiency(m, n, k, gemm_max, gemm_half_dim)
    t_compute = flops / (_pos("peak_flops", peak_flops) * eff)
    t_memory = nbytes / (_pos("memory_bandwidth", memory_bandwidth)
                         * _fraction("compute_efficiency.memory", memory_efficiency))
    return np.maximum(t_compute, t_memory)


def memory_time(nbytes: ArrayLike, *, memory_bandwidth: ArrayLike,
                memory_efficiency: ArrayLike = 0.85) -> np.ndarray:
    """Time of memory-bound work: bytes / (memory_bandwidth * memory_efficiency)."""
    b = np.asarray(nbytes, dtype=float)
    if not _finite_nonneg(b):
        raise InputError("a byte count is negative or not finite", where="memory_time", allowed="finite bytes >= 0")
    return b / (_pos("memory_bandwidth", memory_bandwidth)
                * _fraction("compute_efficiency.memory", memory_efficiency))


def flash_core_time(q_len: ArrayLike, keys: ArrayLike, d: ArrayLike, dv: ArrayLike, count: ArrayLike = 1.0, *,
                    peak_flops: ArrayLike, memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75,
                    gemm_half_dim: ArrayLike = 96.0, memory_efficiency: ArrayLike = 0.85,
                    elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Fused (flash) attention core of ``count`` heads: the compute of its two GEMMs on the GEMM curve
    (Q K^T: q x keys x d; P V: q x d_v x keys) against the HBM traffic of Q, K, V and O only,
    ``(q d + keys d + keys d_v + q d_v) eb`` per head::

        time = max(sum 2 M N K / (peak * eff(M, N, K)),  bytes / (memory_bandwidth * memory))

    A fused kernel keeps the q x keys score and probability tiles in on-chip SRAM; they never reach HBM
    (Dao et al. 2022, FlashAttention, arXiv 2205.14135 §3.1). Priced as two unfused GEMMs instead, the score
    matrix (q x keys x eb bytes per head) caps the core at 2 d / eb FLOP per byte: 128 FLOP/B at d = 128,
    BF16, i.e. 128 x 3.35 TB/s x 0.88 = 377 TFLOP/s on H100 SXM, while FlashAttention-3 measures 625-648
    and cuDNN 600-617 TFLOP/s forward (H100 SXM5, head dim 128, no causal mask, sequence 2k-16k; Shah et al.
    2024, arXiv 2407.08608, Fig. 5c)."""
    q, n_k, dk, dvv = (np.maximum(np.asarray(v, dtype=float), 1.0) for v in (q_len, keys, d, dv))
    count = np.asarray(count, dtype=float)
    gm = dict(gemm_max=gemm_max, gemm_half_dim=gemm_half_dim)
    flops_time = 2.0 * q * n_k * count * (dk / gemm_efficiency(q, n_k, dk, **gm)
                                          + dvv / gemm_efficiency(q, dvv, n_k, **gm)) / _pos("peak_flops", peak_flops)
    nbytes = (q * dk + n_k * dk + n_k * dvv + q * dvv) * np.asarray(elem_bytes, dtype=float) * count
    return np.maximum(flops_time, memory_time(nbytes, memory_bandwidth=memory_bandwidth,
                                              memory_efficiency=memory_efficiency))


#: Attention kernels with a fitted efficiency curve (hardware/measurements/attention.yaml kernel names):
#: fa1 FlashAttention, fa2 FlashAttention-2, fa3 FlashAttention-3, cudnn cuDNN fused attention (Transformer
#: Engine's FusedAttention, PyTorch SDPA's CUDNN_ATTENTION), triton a Triton flash kernel, xformers xformers'
#: memory-efficient kernel, aiter AMD AITER's hand-written asm v3 FMHA kernels (fmha_v3_fwd / fmha_v3_bwd; what
#: Primus-Turbo's flash attention calls on Instinct GPUs).
ATTENTION_KERNELS = ("fa1", "fa2", "fa3", "cudnn", "triton", "xformers", "aiter")


def attention_kernel_efficiency(keys: ArrayLike, head_dim: ArrayLike, attn_max: ArrayLike, seq_half: ArrayLike,
                                head_half: ArrayLike) -> np.ndarray:
    """Fraction of the 16-bit peak a fused attention kernel reaches on one call (one direction)::

        eff = attn_max * k / (k + k0) * d / (d + d0)

    k = keys one query attends ((s + 1) / 2 under a causal mask over s keys, the window in a sliding-window
    layer: the work per query row, Shape.causal_keys), d = head dim, k0 = ``seq_half``, d0 = ``head_half``.
    Each factor is below 1, so eff < attn_max <= 1. Fitted per accelerator, kernel and direction to published
    kernel benchmarks (scripts/fit_attention.py on hardware/measurements/attention.yaml)."""
    k, d = (_pos(nm, v) for nm, v in (("attention keys", keys), ("head dim", head_dim)))
    k0, d0 = np.asarray(seq_half, dtype=float), np.asarray(head_half, dtype=float)
    if not (_finite_nonneg(k0) and _finite_nonneg(d0)):
        raise InputError("an attention curve's seq_half or head_half is negative or not finite",
                         where="attention_efficiency", allowed="finite lengths >= 0")
    return _fraction("attention_efficiency.attn_max", attn_max) * (k / (k + k0)) * (d / (d + d0))


def flash_kernel_time(q_len: ArrayLike, keys: ArrayLike, d: ArrayLike, dv: ArrayLike, count: ArrayLike = 1.0, *,
                      peak_flops: ArrayLike, memory_bandwidth: ArrayLike, attn_max: ArrayLike, seq_half: ArrayLike,
                      head_half: ArrayLike, memory_efficiency: ArrayLike = 0.85, elem_bytes: ArrayLike = 2.0,
                      flop_ratio: ArrayLike = 1.0, call_keys: ArrayLike | None = None) -> np.ndarray:
    """One direction of a fused attention core of ``count`` heads priced on the kernel's own fitted curve
    (:func:`attention_kernel_efficiency`) instead of the GEMM curve::

        flops = flop_ratio * 2 q k (d + d_v) count          (forward: Q K^T and P V; backward flop_ratio 2.5)
        time  = max(flops / (peak * eff(k, (d + d_v) / 2)),  flop_ratio * bytes / (memory_bandwidth * memory))

    with bytes the Q, K, V, O traffic of :func:`flash_core_time` (the backward, ``flop_ratio`` 2.5, moves about
    twice that: it reads Q, K, V, O, dO and writes dQ, dK, dV; the floor never binds at training shapes).
    The FLOPs are the ones the kernel computes: with the causal mask k = (s + 1) / 2 (fused kernels skip the
    masked blocks), the FlashAttention benchmark's convention (4 b h s^2 d forward, halved when causal, backward
    2.5x: flash-attention@60499abc benchmarks/benchmark_flash_attention.py ``flops``) up to the (s + 1) / s of
    the diagonal, so a fitted curve reads directly as the benchmark's TFLOP/s over the peak.

    ``call_keys`` (default ``keys``): the keys per query of ONE kernel call, which set the efficiency, where the
    core runs as several calls over blocks of the keys while ``keys`` counts the FLOPs of all of them (context
    parallelism's ring: :func:`layer_compute_time`)."""
    q, n_k, dk, dvv = (np.maximum(np.asarray(v, dtype=float), 1.0) for v in (q_len, keys, d, dv))
    r = np.asarray(flop_ratio, dtype=float)
    count = np.asarray(count, dtype=float)
    k_call = n_k if call_keys is None else np.maximum(np.asarray(call_keys, dtype=float), 1.0)
    eff = attention_kernel_efficiency(k_call, 0.5 * (dk + dvv), attn_max, seq_half, head_half)
    flops = r * 2.0 * q * n_k * (dk + dvv) * count
    nbytes = r * (q * dk + n_k * dk + n_k * dvv + q * dvv) * np.asarray(elem_bytes, dtype=float) * count
    return np.maximum(flops / (_pos("peak_flops", peak_flops) * eff),
                      memory_time(nbytes, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency))


class PassTimes(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """A layer's compute time (seconds, arrays) for one micro-batch on one GPU by pass: ``forward`` and ``backward``
    without recomputation, ``recompute`` the forward work the backward does again; ``total`` their sum. The fields
    :class:`LayerTime` (a transformer layer) and :class:`MambaTime` (a Mamba-2 layer) share."""

    forward: np.ndarray
    backward: np.ndarray
    recompute: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.forward + self.backward + self.recompute


class LayerTime(PassTimes, frozen=True, eq=False):
    """Compute time (seconds, arrays) of one transformer layer for one micro-batch on one GPU.

    ``forward`` and ``backward`` exclude recomputation; ``recompute`` is the extra forward work done
    in the backward pass for the chosen mode; ``total = forward + backward + recompute``. The
    ``*_gemm`` / ``*_memory`` / ``attention_core`` parts break the forward down; ``forward_flops``
    is the forward FLOPs on this GPU (for HFU accounting).
    """

    forward_gemm: np.ndarray
    forward_memory: np.ndarray
    attention_core: np.ndarray
    forward_flops: np.ndarray
    #: the attention block's weight GEMMs and core in the forward (0 without an attention block): device work an MoE
    #: layer runs before its dispatcher's host synchronisation (docs/model.md#host-issue-order)
    attention_forward: np.ndarray = msgspec.field(default_factory=lambda: np.zeros(1))


#: Backward / forward FLOPs of a fused (flash) attention core. The forward runs two GEMMs (S = Q K^T, O = P V); the
#: backward keeps no P in HBM, so it recomputes S and runs four more (dV = P^T dO, dP = dO V^T, dQ = dS K,
#: dK = dS^T Q): five against two, 2.5x (Dao 2023, FlashAttention-2, arXiv 2307.08691 §3.1.2, Algorithm 2; the
#: FlashAttention benchmark counts ``2.5 * f`` for the backward, flash-attention@c082294 benchmarks/
#: benchmark_flash_attention.py ``flops``). The rest of a layer's backward is 2x its forward.
FLASH_BACKWARD_FLOP_RATIO = 2.5


def _gemm_kwargs(kw: dict[str, Any], peak_flops: ArrayLike | None, gemm_max: ArrayLike | None,
                 gemm_half_dim: ArrayLike | None) -> dict[str, Any]:
    """The GEMM keyword arguments ``kw`` with the peak and the efficiency curve (gemm_max, gemm_half_dim) of
    another precision where given (None keeps ``kw``'s own): the attention core's and the router's prices."""
    return dict(kw, peak_flops=kw["peak_flops"] if peak_flops is None else peak_flops,
                gemm_max=kw["gemm_max"] if gemm_max is None else gemm_max,
                gemm_half_dim=kw["gemm_half_dim"] if gemm_half_dim is None else gemm_half_dim)


#: Megatron-Core's token dispatchers (``moe_token_dispatcher_type``), as :func:`layer_compute_time` codes them, and
#: the einsum dispatch of XLA's drop-and-pad MoE (MaxText ``MoeBlock.dense_matmul``: :func:`moe_einsum_dispatch`)
MOE_DISPATCH_ALLTOALL, MOE_DISPATCH_FLEX, MOE_DISPATCH_ALLGATHER, MOE_DISPATCH_EINSUM = 0, 1, 2, 3


class EinsumDispatch(msgspec.Struct, frozen=True, eq=False):
    """One MoE layer's einsum dispatch and combine on one device for one micro-batch (:func:`moe_einsum_dispatch`):
    GEMM seconds forward and backward, memory-bound mask bytes forward and backward, forward FLOPs."""

    forward: np.ndarray
    backward: np.ndarray
    mask_forward_bytes: np.ndarray
    mask_backward_bytes: np.ndarray
    forward_flops: np.ndarray


def moe_einsum_dispatch(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, capacity_factor: ArrayLike,
                        cp: ArrayLike = 1, tp: ArrayLike = 1, **kw: Any) -> EinsumDispatch:
    """XLA's drop-and-pad MoE dispatch (docs/model.md#maxtext-dropping-moe): tokens reach per-expert capacity buffers
    and come back through einsums against one-hot capacity masks, GShard's form (Lepikhin et al. 2020,
    arXiv:2006.16668, Algorithm 2) as MaxText runs it with ``capacity_factor`` > 0 and ``sparse_matmul`` False
    (AI-Hypercomputer/maxtext@14b5876ea MaxText/layers/moe.py ``dense_matmul`` L760-897, ``generate_masks``
    L630-689; the same at e591f30cb src/maxtext/layers/moe.py, where capacity_factor is read only there).

    Per sequence of s tokens each of the E experts holds C = cf k s / E rows (``expert_capacity_per_batch``,
    ``int(ceil(s k / E) cf)``: the rounding, under one row, is not priced), so the buffers hold E C = cf k s rows of
    width h. ``dispatch`` ``BSM,BSEC -> EBCM`` and ``combine`` ``EBCM,BSEC -> BSM`` are each, per sequence, one
    (E C) x h x s GEMM (the mask cast to the activations' dtype; the MXU runs it whole, zeros included), with h / t
    columns a device under tensor parallelism (``activation_embed`` on the tensor axis) and s / cp rows::

        forward   dispatch + combine                          2 x 2 b (s/cp) (cf k s) (h/t) FLOPs
        backward  dispatch: the inputs' gradient only (``dispatch_mask = combine_mask.astype(bool)``: a bool
                  has no gradient); combine: the buffers' gradient and the combine mask's (the routing weights
                  are in it: ``combine_mask = softmax_probs[..., None] * one_hot(position)``)   3 GEMMs, not 4

    Mask bytes (memory-bound): ``generate_masks`` writes the combine mask (eb a element) and the bool dispatch mask
    (1 byte) of b (s/cp) E C elements in the forward; the backward writes the combine mask's gradient and reads it
    into the routing weights' (2 eb). ``kw``: :func:`gemm_time`'s keywords (peak_flops, memory_bandwidth, the
    curve, elem_bytes). The tensor-parallel all-reduce the combine mask's gradient needs at t > 1 (its contraction
    runs over the sharded h) is tp_comm's (``model_parallel_comm.einsum_mask_allreduce_bytes``); not priced: the
    context-parallel sums and the experts' whole-sequence rows at cp > 1 (said by a warning; no compared row)."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t, c = _pos("tp", tp), _pos("cp", cp)
    cf = _pos("capacity_factor", capacity_factor)
    eb = _pos("elem_bytes", kw.get("elem_bytes", 2.0))
    k, E = float(sh.moe_top_k), float(sh.moe_experts)
    rows = cf * k * s * (1.0 if E > 0 else 0.0)  # E C: every expert's capacity buffer for one sequence
    one = gemm_time(rows, sh.hidden / t, s / c, b, **kw)  # dispatch; combine is the same (E C, h, s) GEMM
    elements = b * (s / c) * rows
    return EinsumDispatch(forward=2.0 * one, backward=3.0 * one, mask_forward_bytes=(eb + 1.0) * elements,
                          mask_backward_bytes=2.0 * eb * elements,
                          forward_flops=2.0 * 2.0 * b * (s / c) * rows * sh.hidden / t)


def moe_permutation_bytes(sh: Shape, *, tokens: ArrayLike, own: ArrayLike, tp: ArrayLike = 1, ep: ArrayLike = 1,
                          etp: ArrayLike = 1, load: ArrayLike = 1.0, dispatch: ArrayLike = MOE_DISPATCH_ALLTOALL,
                          elem_bytes: ArrayLike = 2.0, fused: ArrayLike = True) -> np.ndarray:
    """HBM bytes of one MoE layer's token permutations on one GPU in the forward of a micro-batch (its backward moves
    as many: the gradient of a gather is the scatter of the same rows, and the reverse), each row w wide (h, or
    LatentMoE's l) of eb bytes. Source: NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/
    token_dispatcher.py and moe_utils.py (``permute`` L344: an index_select of the copies, or TE's fused kernel that
    reads each source row once; ``unpermute`` L497: a scatter-add of the copies into their tokens;
    ``sort_chunks_by_idxs`` L628: a copy of every row). With T = ``tokens`` (b s / cp), n = ``own`` the tokens the
    rank holds and routes (T / tp under sequence parallelism: MoELayer.forward hands router and dispatcher the
    [s/(cp tp), b, h] shard; T without), u = ``etp``, L = E / ep local experts, R = load u T k / tp the rows the
    exchange brings to this GPU's experts (the busiest rank's, ``load`` = max / mean; the experts' GEMM rows),
    G = u ep n the tokens of the tp_ep group and N = G (1 - C(E - L, k) / C(E, k)) those with at least one of their
    k experts here::

        alltoall   eb w (2 n (k + 1) + [L > 1] 4 R)   ``permute`` of the own n tokens into n k copies before the EP
                   all-to-all (read n, write n k; ``dispatch_preprocess`` L624-680) and ``unpermute`` after the combine
                   (read n k, write n; ``combine_postprocess`` L876-908); with several local experts the received and
                   expert-TP-gathered rows sorted by local expert and back (``dispatch_postprocess`` L752-795,
                   ``combine_preprocess`` L796-823: read R, write R each)
        flex       eb w 2 (N + R)                     the fused dispatch over tp_ep (etp E experts, etp k copies a
                   token, L1836-1849) delivers each token once per destination rank; ``permute`` of those N into R rows
                   and ``unpermute`` back (DeepEP ``get_permuted_hidden_states_by_experts`` /
                   ``get_restored_hidden_states_by_experts`` L1424-1469; HybridEP's own permute kernel on the dispatched
                   tokens, deepseek-ai/DeepEP hybrid-ep csrc/hybrid_ep/extension/permute.cu, unless
                   ``moe_permute_fusion_into_hybridep``, default False, transformer_config.py L904)
        allgather  eb w (N + 2 R + G)                 ``permute`` of the gathered G tokens' local copies (read N,
                   write R; ``dispatch_postprocess`` L305-335) and ``unpermute`` into the whole gathered shape
                   before the reduce-scatter (read R, write G; ``combine_preprocess`` L337-353)

    Those are Transformer Engine's fused kernels (``fused``, Megatron-Core ``moe_permute_fusion`` True). Without them
    (``fused`` False; Megatron-Core's default, ``moe_permute_fusion: bool = False``, transformer_config.py L941) a
    permutation of S source rows (those with a copy) into C copies, restored into D rows, moves::

        permute    forward  ``tokens.index_select(0, sorted_indices)`` (moe_utils.py ``permute``): read C, write C
                   backward index_select's gradient, ``zeros(D).index_add_(0, idx, grad)``: write D, read C, and
                   the S touched rows read and written once
        unpermute  forward  ``torch.zeros(restore_shape)`` then ``scatter_add_`` of the C copies (``unpermute``, no
                   probs in any dispatcher: the experts apply them): write D, read C, S rows read + written
                   backward scatter_add_'s gradient of its source, ``grad.gather``: read C, write C

    3 C + D + 2 S a pass (forward, and the same backward) against the fused S + 2 C + D: C + S rows more, i.e.
    alltoall n (k + 1) more (S = D = n, C = n k: 3 n (k + 1) + [L > 1] 4 R), flex N + R (S = D = N, C = R: 3 (N + R)),
    allgather N + R (S = N, C = R, D = G: 2 N + 3 R + G). The accumulated rows are counted once each (the least a
    scatter-add moves; a row whose k adds miss in L2 moves more). ``sort_chunks_by_idxs`` unfused is ``torch.split``
    and ``torch.cat``: read R, write R each, as the fused kernel. HybridEP permutes in its own kernel whatever
    ``moe_permute_fusion`` says (``_HybridEPManager.get_permuted_hidden_states_by_experts`` L1212 passes its output
    through): the caller passes ``fused`` True for it (engine.layer_compute).

    0 without experts."""
    T = np.asarray(tokens, dtype=float)
    n = np.asarray(own, dtype=float)
    t, e, u = _pos("tp", tp), _pos("ep", ep), _pos("etp", etp)
    eb = _pos("elem_bytes", elem_bytes)
    k, E = float(sh.moe_top_k), max(float(sh.moe_experts), 1.0)
    local = E / e
    miss = np.ones_like(local)  # C(E - L, k) / C(E, k): none of a token's k experts among the L here
    for i in range(int(k)):
        miss = miss * np.clip((E - local - i) / (E - i), 0.0, 1.0)
    rows = np.asarray(load, dtype=float) * u * T * k / t
    group = u * e * n
    received = group * (1.0 - miss)
    code = np.asarray(dispatch)
    a2a = 2.0 * n * (k + 1.0) + 4.0 * np.where(local > 1.0, rows, 0.0)
    rows_moved = np.where(code == MOE_DISPATCH_FLEX, 2.0 * (received + rows),
                          np.where(code == MOE_DISPATCH_ALLGATHER, received + 2.0 * rows + group, a2a))
    # unfused (index_select, zero-fill + scatter_add_): C + S rows more a pass, C the copies, S their source rows
    extra = np.where(code == MOE_DISPATCH_ALLTOALL, n * (k + 1.0), received + rows)
    rows_moved = rows_moved + np.where(np.asarray(fused, dtype=bool), 0.0, extra)
    return eb * sh.moe_width * rows_moved * (1.0 if sh.moe_experts > 0 else 0.0)


def layer_compute_time(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, peak_flops: ArrayLike,
                       memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75,
                       gemm_half_dim: ArrayLike = 96.0, memory_efficiency: ArrayLike = 0.85,
                       tp: ArrayLike = 1, cp: ArrayLike = 1, ep: ArrayLike = 1,
                       sequence_parallel: ArrayLike = False, recompute: ArrayLike = "none",
                       moe: bool = False, flash_attention: ArrayLike = False,
                       elem_bytes: ArrayLike = 2.0, etp: ArrayLike | None = None,
                       core_peak_flops: ArrayLike | None = None, core_gemm_max: ArrayLike | None = None,
                       core_gemm_half_dim: ArrayLike | None = None, xla_remat: ArrayLike = False,
                       router_peak_flops: ArrayLike | None = None, router_gemm_max: ArrayLike | None = None,
                       router_gemm_half_dim: ArrayLike | None = None, recompute_modules: ArrayLike = 0,
                       attention_fwd: dict[str, float] | None = None,
                       attention_bwd: dict[str, float] | None = None,
                       layer_impl: ArrayLike = "megatron_te", fp8_attention: ArrayLike = False,
                       fp8_attention_ratios: tuple[float | Sequence[float], float | Sequence[float]] = (1.0, 1.0),
                       attention: bool = True,
                       mlp: bool = True, cp_comm_type: ArrayLike = 0,
                       cp_a2a_size: ArrayLike = 1, proj_peak_flops: ArrayLike | None = None,
                       proj_gemm_max: ArrayLike | None = None, proj_gemm_half_dim: ArrayLike | None = None,
                       latent_peak_flops: ArrayLike | None = None, latent_gemm_max: ArrayLike | None = None,
                       latent_gemm_half_dim: ArrayLike | None = None, moe_load: ArrayLike = 1.0,
                       moe_dispatch: ArrayLike = MOE_DISPATCH_ALLTOALL,
                       moe_permute_fusion: ArrayLike = True, expert_peak_flops: ArrayLike | None = None,
                       expert_gemm_max: ArrayLike | None = None,
                       expert_gemm_half_dim: ArrayLike | None = None,
                       moe_pad_to_capacity: ArrayLike = False,
                       moe_exact_counts: ArrayLike = False,
                       mla_column_down_proj: ArrayLike = False) -> LayerTime:
    """Compute time of one layer (dense, or MoE when ``moe``) for micro-batch b on one GPU.

    MLA's down-projections (q_down h x r_q, kv_down h x (r_kv + d_rope)) on the rows and columns each build runs on a
    rank (docs/model.md#mla-tp, "Their GEMMs per rank"; NVIDIA/Megatron-LM@d98e8a64dd
    megatron/core/transformer/multi_latent_attention.py L641-644 / L660-663): the default duplicated TELinear on the
    rank's T/t tokens under sequence parallelism ("q_compressed: [s / TP, b, q_lora_rank]") and on all T without
    (each rank holds every token: the GEMM replicated), the whole r wide either way; ``mla_column_down_proj``
    (TEColumnParallelLinear, priced with sequence parallelism only, as its gathers are) on the gathered T tokens at
    r/t columns. The backward (dgrad + wgrad) is 2 x that forward, as every weight GEMM's.

    ``moe_pad_to_capacity`` (default False: dropless) drop-and-pad dispatch: every expert runs exactly its capacity
    rows (``moe_load`` x the mean), so :func:`expert_padded_rows` takes them with no spread, ``tau ceil(m / tau)``
    (docs/model.md#expert-tile-padding). ``moe_exact_counts`` (default False): the same zero spread for a router that
    gives every expert the mean count (training.moe_routing cyclic, Automodel's FakeBalancedGate;
    docs/model.md#moe-cyclic-routing).

    ``moe_dispatch`` (:data:`MOE_DISPATCH_ALLTOALL` 0, the default; :data:`MOE_DISPATCH_FLEX` 1; DeepEP or HybridEP;
    :data:`MOE_DISPATCH_ALLGATHER` 2) names Megatron-Core's token dispatcher, whose token permutations
    :func:`moe_permutation_bytes` prices (:data:`MOE_DISPATCH_EINSUM` 3: XLA's drop-and-pad, no permutation but
    :func:`moe_einsum_dispatch`'s einsums and masks, the capacity factor ``moe_load``);
    ``moe_permute_fusion`` (default True) whether its permute kernels are
    Transformer Engine's fused ones (False: Megatron-Core's unfused index_select / scatter_add_ path).

    ``moe_load`` (default 1: every EP rank at the mean) scales the routed rows of the busiest EP rank that the MoE
    layer waits for, max / mean (:mod:`scalemodel.cost.moe_routing`, docs/model.md#moe-rank-imbalance): the routed
    experts' GEMMs (forward, and so backward and recompute) and their activation bytes; the router, the shared
    experts, the permutation on the sending side and the FLOP count stay at the mean.

    ``attention`` / ``mlp`` False leave that block out: a hybrid pattern's layer holds one block with one norm and
    one residual (docs/model.md#mamba-2-layers); its memory-bound bytes are :func:`layer_eltwise_bytes`'s ``part``.

    Full recompute repeats the forward, except with ``xla_remat`` (a program compiled by XLA, every TPU
    program and a MaxText run on GPUs: JAX ``jax.checkpoint``/``nn.remat`` with no saving policy): it recomputes
    only the forward values the backward reads, "these linearization points are recomputed from the function's saved
    inputs" (docs.jax.dev, jax.checkpoint; the autodiff_remat notebook: residuals "re-computed from those
    inputs as needed"). The backward of the MLP's down-projection Y = Z W reads Z and W, never Y, and Y
    only feeds the residual sum, so its recomputation is dead code:
    recompute = forward - t(down-projection GEMMs) (dense: T x h x f/t; MoE: the experts' and shared
    experts' down GEMMs), instead of PyTorch checkpointing's whole forward (Megatron-LM). In a parallel
    block (``parallel_block``: MaxText's DecoderLayer sums ``mlp_lnx + attention_lnx``) the attention's
    output projection feeds only that sum too and is dropped as well, - t(O-proj GEMM) (xlapar35: JAX's
    rematerialized HLO of such a block holds Q / K / V, the core and the up-projection, neither O-proj nor
    the down-projection; docs/model.md#xlapar35).

    Selective recompute repeats what ``recompute_modules`` names (bits of
    :data:`scalemodel.cost.transformer.RECOMPUTE_MODULES`; 0 = core_attn, Megatron-Core's default): core_attn the
    attention core; mla_up_proj MLA's Q and KV up-projection GEMMs (multi_latent_attention.py ``qkv_up_checkpoint``
    re-runs them before the core's backward; Megatron-Core recomputes the core only when core_attn is also named,
    attention.py ``checkpoint_core_attention``); moe_act the routed experts' activation function (experts.py
    ``activation_recompute``: its memory-bound bytes); layernorm the forward of the norms that are modules of their
    own (an MoE layer's pre-MLP norm, an MLA layer's input norm: :func:`_norm_recompute_time`); mlp a dense (not
    MoE) layer's MLP block: its up- and down-projection GEMMs and :func:`_dense_mlp_forward_bytes` (fused norm and
    activation); shared_experts an MoE layer's shared experts' GEMMs and activation bytes (moe_layer.py
    ``shared_experts_recompute``; with moe once more); moe the MoE block's whole forward (moe_layer.py
    ``moe_layer_recompute``, :func:`scalemodel.cost.transformer.recomputed_modules`): the router, routed and shared
    experts' (and LatentMoE's projection) GEMMs and the block's memory-bound bytes (the token permutations, the
    experts' activations), its pre-norm outside the checkpoint not; the dispatch and combine all-to-alls it runs
    again are communication (engine.model_parallel_comm). jax_dots keeps the core's price (the remat policy's own
    recompute is not priced apart). jax_qkvo (MaxText's save_dot_except_mlp / _mlpwi,
    :func:`scalemodel.cost.transformer.mlp_up_flops`) repeats the core, a dense layer's MLP up-projection GEMMs
    (T x (2|1) f/t x h) and the forward bytes of its two norms and activation, :func:`_dense_mlp_forward_bytes`
    + 2 e x for the input norm (x = h, / t with SP); the residual sum the pre-MLP norm reads is one more add,
    taken as fused into that norm's XLA fusion (not counted). jax_qkv (MaxText's save_qkv_proj, or custom /
    qkv_proj_offloaded with out_proj 'remat': :func:`scalemodel.cost.transformer.out_proj_flops`) repeats all that
    jax_qkvo does and the attention output projection GEMM (T x h x a d_v / t), whose output it does not keep. In an
    MoE layer (named with moe, which prices the block's forward) both repeat the core and the forward bytes of the
    layer's two norms, 2 x 2 e x (MaxText keeps neither norm's output nor the MoE block's input). jax_context beside
    either (MaxText's 'context', the attention kernel's output and log-sum-exp, kept) takes the core out of what they
    repeat (Recomputed.attention_core false); the rest stays.
    titan_op (torchtitan's op policy) repeats the
    forward's memory-bound work and the GEMMs of :func:`titan_op_gemm_time`, not the attention core (SDPA is on its
    save list).

    ``core_*`` (default: the GEMMs' own) price the attention core at another precision: an fp8 run's
    core runs in BF16 (Transformer Engine's recipes leave dot-product attention out of FP8 unless
    ``fp8_dpa`` is set, default False: transformer_engine.common.recipe, TE 2.x Common API).
    ``router_*`` (default: the GEMMs' own) price the MoE router GEMM at another precision: Megatron-Core's
    ``TopKRouter.gating`` computes its logits with ``router_gating_linear`` (megatron/core/transformer/moe/
    router.py, moe_utils.py): ``te_general_gemm`` or ``torch.mm`` on the unquantized input in ``router_dtype``
    (the input's BF16 unless ``moe_router_dtype`` is 'fp32'/'fp64'), not an FP8 Transformer Engine module, so an
    fp8 run's router runs in BF16 (here always at the 16-bit rate: with 'fp32' / 'fp64' the backward's TF32 / FP64
    GEMMs and the casts around them are :func:`router_dtype_times`, added by the step).
    ``proj_*`` and ``latent_*`` (default: the GEMMs' own) price the attention block's weight GEMMs (QKV / O; MLA's
    projections) and LatentMoE's two latent projections at another precision, forward and backward (the backward
    is 2 x the forward GEMMs): a module that Transformer Engine's per-module quantization config leaves in BF16 or
    runs in MXFP8 (training.module_precision; docs/model.md#module-precision).
    ``expert_*`` (default: none) the routed experts' GEMMs' own curve where a measured grouped-GEMM rate replaces
    the run's (an mxfp8 run on Blackwell: :data:`MXFP8_GROUPED_GEMM_SPEEDUPS`, docs/model.md#mxfp8-expert-gemms):
    each routed GEMM takes the slower of that curve and the run's own (:func:`routed_expert_gemm_time`), forward,
    backward and recompute alike; shared experts, router and latent projections keep theirs.
    ``attention_fwd`` / ``attention_bwd`` (both or neither; keyword arguments of :func:`flash_kernel_time`:
    attn_max, seq_half, head_half): with ``flash_attention`` the fused core runs the named kernel's fitted curves
    (forward, and backward at 2.5x the forward FLOPs) on the core's peak instead of :func:`flash_core_time`'s
    GEMM curve: backward = 2 x (forward - core) + the kernel's backward. With context parallelism (cp > 1) the
    kernel's efficiency is read at the keys of one call, Shape.causal_keys(s/cp) (FLOPs still over
    Shape.causal_keys(s)): Transformer Engine's ring (AttnFuncWithCPAndKVP2P, transformer_engine/pytorch/
    attention.py at v2.1 450146ae6; Megatron-Core's default cp_comm_type p2p) calls the kernel once per step of
    the cp + 1 loop: step 0 causal over the rank's own s/cp tokens, then the s/cp queries against half a KV block
    (``max_seqlen_kv // 2``) or half the queries against a whole block, so the slowest rank (cp - 1, all its
    steps with half blocks) runs every call at about s/(2 cp) keys per query under the causal mask (s/cp
    bidirectional). ``cp_comm_type`` (:class:`~scalemodel.choices.CpCommType`, default p2p) changes the calls:
    all_gather (AttnFuncWithCPAndKVAllGather, TE transformer_engine/pytorch/attention/dot_product_attention/
    context_parallel.py at d0067d0) runs two calls per rank, its load-balanced query chunks r and 2 cp - 1 - r of
    C = s / (2 cp) queries each against the gathered keys up to the chunk's end (get_kv_seq_info_after_all_gather,
    causal bottom-right), each priced at its own FLOPs and keys (:func:`cp_allgather_core_time`; the slower of
    ranks 0 and cp - 1); a2a (AttnFuncWithCPAndQKVOA2A) one call over the whole sequence with a / (t cp) heads:
    the curve read at s, not s / cp (same FLOPs); a2a+p2p (``cp_a2a_size`` A) the ring over P = cp / A ranks on
    s / P queries with a / (t A) heads (:func:`cp_levels`). The ring's bookkeeping bytes (:func:`cp_ring_bytes`)
    are those of the p2p level (none for a2a and all_gather).

    ``fp8_attention`` (Transformer Engine's fp8_dpa, Megatron-Core ``fp8_dot_product_attention``: the core runs
    cuDNN's FP8 / MXFP8 SDPA): the backward of a sliding-window layer works through the causal keys of the whole
    sequence, Shape.window_blind_keys ((s + 1) / 2), not the window's; the forward skips the blocks outside the
    window as the 16-bit kernel does. Both are priced on the core's 16-bit curve and peak, the fused core's forward
    and backward then x ``fp8_attention_ratios`` (forward, backward: the measured FP8 / BF16 time of the same shape
    on the same GPU, :func:`fp8_attention_time_ratios`, each a ratio or one per :data:`FP8_ATTENTION_SEQS` read at
    the call's query rows, :func:`fp8_attention_ratio_at`; (1, 1) where none is measured). Source of the window rule:
    NVIDIA/cudnn-frontend's GB200 SDPA sweeps of the GPT-OSS shape (head dim 64, causal with a sliding window, b 2,
    s 2048-32768): benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/gpt_oss_20260424_100011.csv at 3929da2
    (cuDNN 9.22, window 128, 128 heads): BF16 backward 0.237 / 0.465 /
    0.911 / 1.818 / 3.692 ms, linear in s, MXFP8 0.642 / 2.080 / 7.427 / 27.94 / 108.4 ms and FP8 0.536 / 1.731 /
    6.176 / 23.23 / 90.35 ms, quadratic in s (the forward 0.109-1.637 ms, linear, in every dtype); and
    results/gb200_919_only_cudnn/gpt_oss_20260226_175022.csv at df73764 (cuDNN 9.19, window 1024, 64 / 8 heads): FP8
    backward 0.271-43.92 ms, quadratic, BF16 0.230-4.099 ms, linear. The FP8 backward's time over the causal FLOPs
    is 630-1000 TFLOP/s, a causal kernel's rate. Transformer Engine (v2.17.1, common/fused_attn/fused_attn_fp8.cu)
    builds the same ``sdpa_fp8_backward`` graph with ``set_diagonal_band_left_bound`` that the sweep times, and its
    get_attention_backend keeps FusedAttention for MXFP8 with a sliding window and learnable softmax on sm100 with
    cuDNN >= 9.21 (attention/dot_product_attention/utils.py).

    Tokens on the GPU T = b*s/cp. GEMM shapes per GPU (t = tp; d = h/a; g = kv heads):
      QKV   T x (a+2g)d/t x h        O-proj  T x h x a*d/t
            (MLA: the matrices of transformer.attention_matrices; the down-projections T/t (SP) or T x r x h
            duplicated, T x r/t x h column-parallel: above)
      MLP   T x (2|1)f/t x h (up, gate fused) and T x h x f/t (down)
      core  b*a/t batches of (s/cp) x k x d (Q K^T) and (s/cp) x d_v x k (softmax . V), with k = s
            keys per query, or the window in sliding-window layers (Shape.attended_keys); with
            ``flash_attention`` the fused kernel of :func:`flash_core_time` (no score matrix in HBM) over the
            keys the causal mask leaves, k = Shape.causal_keys ((s + 1)/2 in a global layer of a causal model;
            fused kernels skip fully masked blocks), whose backward is FLASH_BACKWARD_FLOP_RATIO = 2.5 x its
            forward (it recomputes Q K^T) instead of the other operations' 2 x
      MoE   router T_r x E x h, T_r = T/t under sequence parallelism (each TP rank routes its own sequence shard:
            MoELayer.forward gives the router the [s/(cp t), b, h] hidden states), T without; per GPU E/ep experts,
            each with ep*u*T*k/(E*t) tokens (its GEMMs' M: :func:`expert_padded_rows`, the random dropless count in
            whole tiles, about half a tile more; docs/model.md#expert-tile-padding), widths f_e/u, where
            u = ``etp`` (expert TP, default t): the ep x u ranks of an expert group gather the sequence-parallel
            tokens of their attention-TP ranks (Megatron-Core MoE parallel folding, arXiv 2504.14960); with
            u = t this is ep*T*k/E tokens of width f_e/t; shared experts as a dense MLP of width shared*f_e.
    Memory-bound bytes: T x :func:`layer_eltwise_bytes` (``layer_impl``: norms, residual adds, dropout, RoPE, the core's
    layout copies and, dense, the activation function), forward and backward each as that implementation's code moves
    them; unless ``flash_attention`` (fused into the core GEMM), the softmax 2*eb*b*(a/t)*(s/cp)*s (it reads the scores
    and writes the probabilities) and, with ``sh.dropout``, the attention dropout (2*eb+1) per score more (read, write,
    the 1-byte mask): a model trained without dropout runs none (its ``attention_dropout`` is torch.nn.Dropout(0.0), and
    ATen's dropout returns its input when p = 0: aten/src/ATen/native/Dropout.cpp ``_dropout_impl``, in Transformer
    Engine's UnfusedDotProductAttention and Megatron's CoreAttention alike; docs/model.md#unfused-softmax); the MoE
    dispatcher's token permutations (:func:`moe_permutation_bytes`; the all-to-all dispatcher's eb*w*(2*T_r*(k+1) +
    [E/ep > 1]*4*R), R = load*u*T*k/t the rows the exchange brings to this GPU's experts: ``permute`` of the rank's own
    T_r tokens into T_r k copies before the EP all-to-all and ``unpermute`` after it, ``sort_chunks_by_idxs`` of the
    received rows by local expert and back, token_dispatcher.py NVIDIA/Megatron-LM@d98e8a64dd; ``moe_dispatch`` flex and
    allgather permute the received rows only) and the experts' activation (2|3)*eb*T*k*f_e/t, w the routed experts'
    width (h, or LatentMoE's l: the experts' GEMMs T_e x f_e x l, + the replicated h x l projections on the layer's
    local tokens T_r; docs/model.md#latent-moe).
    Backward = 2 x (forward - memory-bound) + the implementation's backward bytes + 2 x the experts' activation
    bytes + 1 x the permutations' (a gather's gradient is the scatter of the same rows) (+ 0.5 x the flash core).
    Communication is not included. ``forward_flops`` (this GPU's: the router on T_r) keeps the full (unmasked) s^2
    count of the FLOP convention.
    """
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    c = _pos("cp", cp)
    e = _pos("ep", ep)
    eb = _pos("elem_bytes", elem_bytes)
    sp = np.asarray(sequence_parallel, dtype=bool)
    flash = np.asarray(flash_attention, dtype=bool)
    code = recompute_code(recompute)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=eb)

    h, a, d, dv = sh.hidden, sh.heads, sh.head_dim, sh.v_head_dim
    T = b * s / c
    s_local = s / c
    mats_up = np.where(sh.gated_mlp, 2.0, 1.0)

    # weight GEMMs of the attention block (T x out x in; TP splits the output or input width)
    gemm = np.zeros_like(T)
    flops = np.zeros_like(T)
    up_proj = np.zeros_like(T)  # MLA's q_up and kv_up GEMMs (selective recompute of mla_up_proj)
    o_proj = np.zeros_like(T)  # the attention output projection GEMM (selective recompute of jax_qkv repeats it)
    att = 1.0 if attention else 0.0  # a hybrid's MLP-only layer has no attention block
    pkw = _gemm_kwargs(kw, proj_peak_flops, proj_gemm_max, proj_gemm_half_dim)
    # MLA's down-projections (split False): duplicated on the rank's T/t tokens under SP (all T without), whole;
    # column-parallel (with SP) on the gathered T at r/t columns (docs/model.md#mla-tp)
    col_down = np.asarray(mla_column_down_proj, dtype=bool) & sp
    down_rows, down_div = np.where(col_down, T, T / np.where(sp, t, 1.0)), np.where(col_down, t, 1.0)
    for name, n_in, n_out, split in attention_matrices(sh):
        div = t if split else down_div
        rows = T if split else down_rows
        out_w, in_w = (h + 0 * n_out, n_in / div) if name == "o" else (n_out / div, n_in)
        t_m = gemm_time(rows, out_w, in_w, att * np.where(n_in * n_out > 0, 1.0, 0.0), **pkw)
        gemm = gemm + t_m
        if name in ("q_up", "kv_up"):
            up_proj = up_proj + t_m
        if name == "o":
            o_proj = t_m
        flops = flops + att * 2 * rows * n_in * n_out / div
    # attention core: Q K^T (s_local x k x d) and softmax . V (s_local x d_v x k), k keys per query
    keys = sh.attended_keys(s)
    heads_local = b * a / t
    # context parallelism's exchange: an all-to-all level of n_a ranks (a2a: cp; a2a+p2p: cp_a2a_size) hands the
    # core s / n_p queries with heads / n_a heads, n_p = cp / n_a the ring's ranks (p2p: cp, s / cp queries)
    cpt = codes(CpCommType, cp_comm_type, "strategy.cp_comm_type")
    ag = (cpt == CpCommType.ALL_GATHER) & (c > 1)
    n_a, n_p = cp_levels(c, cpt, cp_a2a_size)
    q_rows = np.where(ag, s_local, s / n_p)
    heads_core = np.where(ag, heads_local, heads_local / n_a)
    ckw = _gemm_kwargs(kw, core_peak_flops, core_gemm_max, core_gemm_half_dim)
    unfused = gemm_time(q_rows, keys, d, heads_core, **ckw) + gemm_time(q_rows, dv, keys, heads_core, **ckw)
    # the backward's keys: an FP8 core's backward works through the causal keys of the whole sequence in
    # sliding-window layers too (Shape.window_blind_keys; docs/model.md#fp8-attention)
    fp8_attn = np.asarray(fp8_attention, dtype=bool)
    bwd_keys = np.where(fp8_attn, sh.window_blind_keys(s), sh.causal_keys(s))
    # fused kernels skip the score blocks the causal mask hides (Shape.causal_keys); unfused ones compute all
    if attention_fwd is not None and attention_bwd is not None:  # the kernel's own fitted curves
        akw = dict(peak_flops=ckw["peak_flops"], memory_bandwidth=memory_bandwidth,
                   memory_efficiency=memory_efficiency, elem_bytes=eb)
        # context parallelism (ring): one kernel call per ring step over the local s/cp queries and one KV block,
        # so a call's keys per query are those of the local sequence (docs/model.md#attention-kernel)
        # (p2p: s / cp; a2a: all s; a2a+p2p: s / n_p); all_gather: two calls per rank (cp_allgather_core_time)
        call = np.minimum(sh.causal_keys(q_rows), sh.causal_keys(s))
        call_bwd = np.where(fp8_attn, np.minimum(sh.window_blind_keys(q_rows), sh.window_blind_keys(s)), call)
        fused = flash_kernel_time(q_rows, sh.causal_keys(s), d, dv, heads_core, **akw, **attention_fwd,
                                  call_keys=call)
        fused_bwd = flash_kernel_time(q_rows, bwd_keys, d, dv, heads_core, **akw, **attention_bwd,
                                      flop_ratio=FLASH_BACKWARD_FLOP_RATIO, call_keys=call_bwd)
        if np.any(ag):
            fused = np.where(ag, cp_allgather_core_time(sh, s, c, d, dv, heads_local, sh.causal_keys,
                                                        **akw, **attention_fwd), fused)
            bkw = dict(akw, **attention_bwd, flop_ratio=FLASH_BACKWARD_FLOP_RATIO)
            ag_bwd = cp_allgather_core_time(sh, s, c, d, dv, heads_local, sh.causal_keys, **bkw)
            if np.any(fp8_attn):  # an FP8 core's backward: the window-blind keys
                ag_bwd = np.where(fp8_attn, cp_allgather_core_time(sh, s, c, d, dv, heads_local,
                                                                   sh.window_blind_keys, **bkw), ag_bwd)
            fused_bwd = np.where(ag, ag_bwd, fused_bwd)
    else:
        fused = flash_core_time(q_rows, sh.causal_keys(s), d, dv, heads_core, **ckw)
        fused_bwd = FLASH_BACKWARD_FLOP_RATIO * np.where(
            fp8_attn, flash_core_time(q_rows, bwd_keys, d, dv, heads_core, **ckw), fused)
    # an FP8 core: the measured FP8 / BF16 kernel time of its shape class at the call's query rows
    # (docs/model.md#fp8-attention-rate)
    if np.any(fp8_attn):
        fused = fused * np.where(fp8_attn, fp8_attention_ratio_at(fp8_attention_ratios[0], q_rows), 1.0)
        fused_bwd = fused_bwd * np.where(fp8_attn, fp8_attention_ratio_at(fp8_attention_ratios[1], q_rows), 1.0)
    core_gemm = att * np.where(flash, fused, unfused)
    fused_bwd = att * fused_bwd
    core_flops = att * 2 * heads_local * s_local * keys * (d + dv)
    scores = heads_local * s_local * keys
    # softmax (read the scores, write the probabilities) + attention dropout where the model has it (read, write, mask)
    drop = np.where(np.asarray(sh.dropout, dtype=bool), 2 * eb + 1, 0.0)
    core_mem = att * np.where(flash, 0.0, (2 * eb + drop) * scores)

    attention_forward = gemm + core_gemm  # the attention block's weight GEMMs and core (0 without one)
    part = "layer" if attention and mlp else ("attention" if attention else "mlp")
    own_f, own_b = layer_eltwise_bytes(sh, layer_impl, tp=t, sequence_parallel=sp, elem_bytes=eb, mlp=not moe,
                                       part=part, micro_batch=b)
    mem = T * own_f  # norms, residuals, dropout, RoPE, layout copies (and the dense activation), counted per impl
    disp = np.zeros_like(T)  # the MoE dispatcher's token permutations (their backward moves as many bytes)
    # XLA's einsum dispatch (moe_einsum_dispatch): its capacity masks' bytes, forward and backward, and its GEMMs'
    # backward over the 2 x forward every other GEMM takes (3 GEMMs against the forward's 2)
    mask_f = mask_b = einsum_bwd = np.zeros_like(T)
    moe_block = np.zeros_like(T)  # the MoE block's forward (selective recompute of moe repeats it)
    mlp_gemm = np.zeros_like(T)  # the dense MLP's GEMMs (selective recompute of mlp repeats them)
    mlp_up = np.zeros_like(T)  # the dense MLP's up-projection GEMMs (selective recompute of jax_qkvo repeats them)
    shared_block = np.zeros_like(T)  # the shared experts' forward (selective recompute of shared_experts)
    if not mlp:  # a hybrid's attention-only layer
        expert_act = down = np.zeros_like(T)
    elif moe:
        gemm_before, mem_before = gemm, mem
        k, E, fe = sh.moe_top_k, np.maximum(sh.moe_experts, 1.0), sh.moe_ffn_hidden
        w, lat = sh.moe_width, sh.moe_latent  # the routed experts' token width (h, or LatentMoE's l)
        u = t if etp is None else _pos("etp", etp)
        load = np.asarray(moe_load, dtype=float)  # the busiest EP rank's routed rows over the mean
        tokens_per_expert = np.maximum(load * e * u * T * k / (E * t), 1.0)
        # the rows the experts' GEMMs compute: each expert's count padded to whole M tiles; a dropless count's spread
        # that of a uniformly routed count, Binomial(ep u T / t, k / E): var = mean (1 - k / E); none under
        # drop-and-pad, whose router fills every expert to its capacity (moe_pad_to_capacity)
        expert_rows = expert_padded_rows(tokens_per_expert, np.where(
            np.asarray(moe_pad_to_capacity, dtype=bool) | np.asarray(moe_exact_counts, dtype=bool), 0.0,
            np.sqrt(e * u * T * k / (E * t) * np.maximum(1.0 - k / E, 0.0))))
        experts_here = E / e
        # the tokens this rank routes: its sequence shard under sequence parallelism (MoELayer.forward hands the
        # router and the dispatcher the [s/(cp t), b, h] hidden states), all T when TP replicates them
        t_own = T / np.where(sp, t, 1.0)
        rkw = _gemm_kwargs(kw, router_peak_flops, router_gemm_max, router_gemm_half_dim)
        gemm = gemm + gemm_time(t_own, E, h, **rkw)  # router (reads the hidden-width input, also with LatentMoE)
        ekw = (None if expert_peak_flops is None and expert_gemm_max is None and expert_gemm_half_dim is None
               else _gemm_kwargs(kw, expert_peak_flops, expert_gemm_max, expert_gemm_half_dim))
        routed_down = routed_expert_gemm_time(expert_rows, w, fe / u, experts_here, kw, ekw)
        gemm = gemm + routed_expert_gemm_time(expert_rows, mats_up * fe / u, w, experts_here, kw, ekw)
        gemm = gemm + routed_down
        # LatentMoE's fc1_latent_proj (h -> l) before dispatch and fc2_latent_proj (l -> h) after combine: whole
        # on every TP rank (parallel_mode "duplicated"), on the layer's local tokens (T / t under sequence parallel)
        has_lat = lat > 0
        t_lat = t_own
        lkw = _gemm_kwargs(kw, latent_peak_flops, latent_gemm_max, latent_gemm_half_dim)
        gemm = gemm + np.where(has_lat, gemm_time(t_lat, np.maximum(lat, 1.0), h, **lkw)
                               + gemm_time(t_lat, h, np.maximum(lat, 1.0), **lkw), 0.0)
        shared = sh.moe_shared_experts * fe
        has_shared = shared > 0
        shared_gemm = np.where(has_shared, gemm_time(T, mats_up * np.maximum(shared, 1) / t, h, **kw)
                               + gemm_time(T, h, np.maximum(shared, 1) / t, **kw), 0.0)
        gemm = gemm + shared_gemm
        # the shared experts' forward (selective recompute of shared_experts repeats it): GEMMs and activation
        shared_block = shared_gemm + memory_time(np.where(sh.gated_mlp, 3.0, 2.0) * eb * T * shared / t,
                                                 memory_bandwidth=memory_bandwidth,
                                                 memory_efficiency=memory_efficiency)
        width = T * (load * k * fe + shared) / t
        down = routed_down + np.where(
            has_shared, gemm_time(T, h, np.maximum(shared, 1) / t, **kw), 0.0)
        flops = (flops + 2 * t_own * h * E + 2 * T * (k * fe * w + shared * h) / t * (mats_up + 1)
                 + 4 * t_lat * h * lat)
        # the dispatcher's token permutations (w wide) on the rank's own tokens and on the rows the exchange brings
        disp = moe_permutation_bytes(sh, tokens=T, own=t_own, tp=t, ep=e, etp=u, load=load,
                                     dispatch=moe_dispatch, elem_bytes=eb, fused=moe_permute_fusion)
        # XLA's drop-and-pad: no permutation; the dispatch and combine einsums against the capacity masks, each
        # expert's capacity load x k s / E rows a sequence (moe_einsum_dispatch, docs/model.md#maxtext-dropping-moe)
        einsum = np.asarray(moe_dispatch) == MOE_DISPATCH_EINSUM
        if np.any(einsum):
            ed = moe_einsum_dispatch(sh, micro_batch=b, seq_len=s, capacity_factor=load, cp=c, tp=t, **kw)
            gemm = gemm + np.where(einsum, ed.forward, 0.0)
            einsum_bwd = np.where(einsum, ed.backward - 2.0 * ed.forward, 0.0)
            flops = flops + np.where(einsum, ed.forward_flops, 0.0)
            disp = np.where(einsum, 0.0, disp)
            mask_f = np.where(einsum, ed.mask_forward_bytes, 0.0)
            mask_b = np.where(einsum, ed.mask_backward_bytes, 0.0)
        mem = mem + np.where(sh.gated_mlp, 3.0, 2.0) * eb * width + disp + mask_f
        expert_act = np.where(sh.gated_mlp, 3.0, 2.0) * eb * load * T * k * fe / t  # routed experts' activation
        moe_block = gemm - gemm_before + memory_time(mem - mem_before, memory_bandwidth=memory_bandwidth,
                                                     memory_efficiency=memory_efficiency)
    else:
        expert_act = np.zeros_like(T)
        f = sh.ffn_hidden
        down = gemm_time(T, h, f / t, **kw)
        up = gemm_time(T, mats_up * f / t, h, **kw)
        gemm = gemm + up + down
        flops = flops + 2 * T * h * f / t * (mats_up + 1)
        mlp_gemm, mlp_up = up + down, up

    # Transformer Engine's context-parallel ring bookkeeping (Megatron-Core, fused core): part of the core's
    # forward (selective core_attn recompute repeats it) with its own backward bytes (cp_ring_bytes)
    te_ring = att * (flash & (codes(LayerImpl, layer_impl, "strategy.layer_impl") == LayerImpl.MEGATRON_TE)
                     & ~np.asarray(fp8_attention, dtype=bool) & ~ag)
    # the ring level: n_p ranks, s / n_p tokens of a / (t n_a) heads (0 when n_p = 1: a2a)
    ring_f, ring_b = cp_ring_bytes(sh, micro_batch=b, seq_len=s, tp=t * n_a, cp=n_p, elem_bytes=eb)
    t_ring_f = te_ring * memory_time(ring_f, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    t_ring_b = te_ring * memory_time(ring_b, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    t_core = core_gemm + memory_time(core_mem, memory_bandwidth=memory_bandwidth,
                                     memory_efficiency=memory_efficiency) + t_ring_f
    t_mem = memory_time(mem, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    # backward: the implementation's own passes; the experts' activation 2 x forward; the token permutations
    # 1 x (the gradient of a gather is a scatter of the same rows and the reverse)
    t_mem_bwd = memory_time(T * own_b + 2.0 * (mem - T * own_f - disp - mask_f) + disp + mask_b,
                            memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    forward = gemm + t_mem + t_core
    # XLA's remat drops the down-projections, and in a parallel block the attention's output projection too: both
    # outputs feed only the layer's output sum, which no backward reads (xlapar35; docs/model.md#xlapar35)
    dead = down + np.where(np.asarray(sh.parallel_block, dtype=bool), o_proj, 0.0)
    full = forward - np.where(np.asarray(xla_remat, dtype=bool), dead, 0.0)
    again = recomputed_modules(sh, code, recompute_modules)  # the rule training_flops' hardware FLOPs use too
    selective = (np.where(again.attention_core, t_core, 0.0)
                 + np.where(again.mla_up_proj, up_proj, 0.0)
                 + np.where(again.out_proj, o_proj, 0.0)
                 + (np.where(again.titan_op, t_mem + titan_op_gemm_time(sh, T, t, **kw), 0.0)
                    if np.any(again.titan_op) else 0.0)  # its GEMMs only when a candidate runs the policy
                 + np.where(again.moe_act, memory_time(
                     expert_act, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency), 0.0)
                 + np.where(again.moe, moe_block, 0.0)
                 + _norm_recompute_time(sh, again.layernorm, T, t, sp, eb, attention=attention, mlp=mlp, moe=moe,
                                        memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
                 + (np.where(again.mlp, mlp_gemm + memory_time(T * _dense_mlp_forward_bytes(
                     sh, layer_impl, tp=t, sequence_parallel=sp, elem_bytes=eb), memory_bandwidth=memory_bandwidth,
                     memory_efficiency=memory_efficiency), 0.0) if (mlp and not moe and np.any(again.mlp)) else 0.0)
                 + np.where(again.shared_experts, shared_block, 0.0)
                 + (np.where(again.jax_qkvo & ~again.mlp, mlp_up + memory_time(T * (_dense_mlp_forward_bytes(
                     sh, layer_impl, tp=t, sequence_parallel=sp, elem_bytes=eb) + 2.0 * eb * np.where(
                     sp, h / t, h)), memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency), 0.0)
                    if (mlp and not moe and np.any(again.jax_qkvo)) else 0.0)
                 # an MoE layer under jax_qkvo / jax_qkv (with moe, which prices the block): its two norms again
                 + (np.where(again.jax_qkvo, memory_time(T * 4.0 * eb * np.where(sp, h / t, h),
                                                         memory_bandwidth=memory_bandwidth,
                                                         memory_efficiency=memory_efficiency), 0.0)
                    if (mlp and moe and np.any(again.jax_qkvo)) else 0.0))
    recomp = np.where(code == Recompute.FULL, full, np.where(code == Recompute.SELECTIVE, selective, 0.0))
    backward = 2.0 * (forward - t_mem) + t_mem_bwd + np.where(flash, fused_bwd - 2.0 * core_gemm, 0.0) \
        + t_ring_b - 2.0 * t_ring_f + einsum_bwd
    return LayerTime(forward=forward, backward=backward, recompute=recomp, forward_gemm=gemm,
                     forward_memory=t_mem, attention_core=t_core, forward_flops=flops + core_flops,
                     attention_forward=attention_forward)


#: Rows of the M tile a routed expert's GEMM pads each expert's token count to (:func:`expert_padded_rows`):
#: DeepGEMM's grouped contiguous layout aligns every expert's rows to its GEMM block, "which is always 128"
#: (deepseek-ai/DeepGEMM@b34733898a deep_gemm/jit_kernels/utils.py ``get_m_alignment_for_contiguous_layout``), the
#: tile Guo et al. 2025 (SonicMoE, arXiv 2512.14080, token rounding) name for Hopper grouped GEMMs. One value for
#: every accelerator (docs/model.md#expert-tile-padding): no per-kernel tile is known for cuBLAS's per-expert calls.
EXPERT_TILE_ROWS = 128.0
#: Terms of the Fourier series in :func:`expert_padded_rows` (the k-th decays as exp(-2 pi^2 k^2 (sd/tile)^2): the
#: 33rd under 3e-4 of the first once sd >= tile/50).
_PAD_TERMS = 32
#: Below sd = tile / _PAD_NARROW the series is not converged in :data:`_PAD_TERMS` terms; :func:`expert_padded_rows`
#: takes the nearest tile edge's crossing probability there (8 sd < tile/6: no second edge is within reach).
_PAD_NARROW = 50.0
#: The complementary error function on arrays (for the normal's tail, :func:`expert_padded_rows`).
_erfc = np.vectorize(math.erfc, otypes=[float])


def expert_padded_rows(m: ArrayLike, sd: ArrayLike, tile: ArrayLike = EXPERT_TILE_ROWS) -> np.ndarray:
    """Rows to price a routed expert's GEMM at: the expected rows a kernel computes for an expert whose token count X
    is random, mean ``m``, standard deviation ``sd`` (a dropless router's per-expert count), when the kernel covers M
    in whole tiles of ``tile`` rows (the tile quantisation of NVIDIA's "Matrix Multiplication Background" guide; a
    partial tile costs a whole one)::

        rows = tile E[ceil(X / tile)]
             = m + tile/2 + (tile/pi) sum_k>=1 sin(2 pi k m/tile) exp(-2 pi^2 k^2 sd^2/tile^2) / k

    the exact expectation for X ~ N(m, sd^2) (ceil(y) = y + 1/2 + sum_k sin(2 pi k y)/(pi k), and
    E[sin(2 pi k Y)] = sin(2 pi k mu) exp(-2 pi^2 k^2 s^2) for Y ~ N(mu, s^2)), :data:`_PAD_TERMS` terms; below
    sd = tile/50, where those terms have not converged (25 rows off at sd 0.3), the same expectation from the one tile
    edge e within reach, rows = e + tile P(X > e), e = tile round(m / tile); held within
    [max(m, tile), m + tile] (one whole tile at least; never less than the tokens, never a whole tile more); a count
    without spread (sd 0: every token to every expert, k = E) is its ceiling, tile ceil(m / tile). Once sd >= tile/4
    the series adds at most 0.093 tile (12 rows at 128): about half a tile per expert whatever the mean. The first
    tile is the GEMM curve's: its small-M factor m/(m + d0) is fitted to dense kernels that run whole tiles at small M,
    so below one tile only the chance of spilling into a second is added::

        returned = m + rows - max(m, tile)      (= rows once m >= tile; m + tile P(X > tile) below, continuous)

    Source: Guo et al. 2025 (SonicMoE, arXiv 2512.14080: grouped GEMMs pad each expert's rows to the tile, the waste
    its token rounding removes); the tile :data:`EXPERT_TILE_ROWS`; docs/model.md#expert-tile-padding."""
    m = np.maximum(np.asarray(m, dtype=float), 0.0)
    s = np.maximum(np.asarray(sd, dtype=float), 0.0)
    tau = _pos("expert tile rows", tile)
    k = np.arange(1, _PAD_TERMS + 1, dtype=float)
    y, z = (m / tau)[..., None], (s / tau)[..., None]
    series = np.sum(np.sin(2.0 * np.pi * k * y) * np.exp(-2.0 * np.pi ** 2 * k ** 2 * z ** 2) / k, axis=-1)
    # a narrow spread (sd < tile/50, where the series has not converged): X lies within 8 sd < tile/6 of m, so it
    # crosses at most the tile edge e nearest m: E[ceil(X/tile)] = e/tile + P(X > e)
    mb, sb, tb = np.broadcast_arrays(m, s, tau)
    edge = np.round(mb / tb) * tb
    few = (sb > 0.0) & (sb < tb / _PAD_NARROW)
    tail = np.zeros(edge.shape)  # P(X > e), the erfc only where it is needed (a Python call an element)
    tail[few] = 0.5 * _erfc((edge[few] - mb[few]) / (sb[few] * np.sqrt(2.0)))
    first = np.maximum(m, tau)
    spread = np.where(few, edge + tb * tail, m + tau / 2.0 + tau / np.pi * series)
    rows = np.where(s > 0.0, np.clip(spread, first, m + tau), np.maximum(np.ceil(m / tau), 1.0) * tau)
    return m + rows - first


def routed_expert_gemm_time(m: ArrayLike, n: ArrayLike, k: ArrayLike, count: ArrayLike, kw: dict[str, Any],
                            expert_kw: dict[str, Any] | None = None) -> np.ndarray:
    """Time of ``count`` routed-expert GEMMs of M x N x K: :func:`gemm_time` on the run's curve (``kw``), or, with
    ``expert_kw`` (the experts' own measured curve, :data:`MXFP8_GROUPED_GEMM_SPEEDUPS`), the slower of the two::

        t = max(gemm_time(m, n, k; expert_kw), gemm_time(m, n, k; kw))

    so an expert GEMM is never priced faster than the run's dense curve (nor under its memory floor)."""
    t = gemm_time(m, n, k, count, **kw)
    return t if expert_kw is None else np.maximum(t, gemm_time(m, n, k, count, **expert_kw))


def shared_expert_times(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                        cp: ArrayLike = 1, peak_flops: ArrayLike, memory_bandwidth: ArrayLike,
                        gemm_max: ArrayLike = 0.75, gemm_half_dim: ArrayLike = 96.0,
                        memory_efficiency: ArrayLike = 0.85, elem_bytes: ArrayLike = 2.0
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Seconds per micro-batch (fc1 forward, fc2 forward, fc1 backward, fc2 backward) of one MoE layer's shared
    experts on one GPU, priced as :func:`layer_compute_time` prices them inside the MoE block: c shared experts of
    width f_e are one MLP of width W = c f_e on T = b s / cp tokens, split over t = tp:

        fc1 forward  = GEMM T x (2|1) W / t x h + (3|2) eb T W / t bytes (the activation, gated | not)
        fc2 forward  = GEMM T x h x W / t
        backward     = 2 x the forward's GEMMs (data and weight gradients) + 2 x the activation's bytes

    The pieces :mod:`scalemodel.engine.model_parallel_comm` sets beside the dispatch and combine all-to-alls under
    ``moe_shared_expert_overlap`` (docs/model.md#shared-expert-overlap). Zero without shared experts."""
    T = _tokens(micro_batch, seq_len, cp)
    t = _pos("tp", tp)
    h = sh.hidden
    W = sh.moe_shared_experts * sh.moe_ffn_hidden
    on = np.where((sh.moe_experts > 0) & (W > 0), 1.0, 0.0)
    W = np.maximum(W, 1.0)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=elem_bytes)
    up = gemm_time(T, np.where(sh.gated_mlp, 2.0, 1.0) * W / t, h, **kw)
    down = gemm_time(T, h, W / t, **kw)
    act = memory_time(np.where(sh.gated_mlp, 3.0, 2.0) * _pos("elem_bytes", elem_bytes) * T * W / t,
                      memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    return (np.asarray(on * (up + act)), np.asarray(on * down), np.asarray(on * 2.0 * (up + act)),
            np.asarray(on * 2.0 * down))


def _norm_recompute_time(sh: Shape, layernorm: ArrayLike, tokens: ArrayLike, tp: ArrayLike,
                         sequence_parallel: ArrayLike, elem_bytes: ArrayLike, *, attention: bool, mlp: bool, moe: bool,
                         memory_bandwidth: ArrayLike, memory_efficiency: ArrayLike) -> np.ndarray:
    """Time of the norm forwards selective recompute of ``layernorm`` repeats in one layer's backward
    (:func:`scalemodel.cost.transformer.recomputed_norms`: an MoE layer's pre-MLP norm, an MLA layer's input norm;
    Megatron-Core's ``CheckpointWithoutOutput`` re-runs the norm module's forward, transformer_layer.py at
    NVIDIA/Megatron-LM@d98e8a64dd). Each is the norm's forward as :func:`layer_eltwise_bytes` prices it for
    Megatron-Core + TE (reads x, writes its output, 2 e x per token; per-token statistics not counted):

        time = n_norms x T x 2 e x / (memory_bandwidth x memory_efficiency)     x = h (/ t with SP)
    """
    inp, pre = recomputed_norms(sh, layernorm, attention=attention, mlp=mlp, moe=moe)
    n = np.where(inp, 1.0, 0.0) + np.where(pre, 1.0, 0.0)
    x = sh.hidden * np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / np.asarray(tp, dtype=float), 1.0)
    return memory_time(n * tokens * 2.0 * elem_bytes * x, memory_bandwidth=memory_bandwidth,
                       memory_efficiency=memory_efficiency)


def _dense_mlp_forward_bytes(sh: Shape, layer_impl: ArrayLike, *, tp: ArrayLike, sequence_parallel: ArrayLike,
                             elem_bytes: ArrayLike) -> np.ndarray:
    """HBM bytes per token of the dense MLP block's memory-bound forward that selective recompute of ``mlp`` repeats
    (Megatron-Core ``tensor_parallel.checkpoint(self.mlp, ...)``, transformer_layer.py at NVIDIA/Megatron-LM
    @d98e8a64dd lines 992-1010): the pre-MLP norm fused into linear_fc1 (TELayerNormColumnParallelLinear: reads x,
    writes its output, 2 e x, x = h / t with SP) and the activation, as :func:`layer_eltwise_bytes` prices them for
    ``layer_impl`` (the activation: its forward bytes with the MLP less those without). The residual add and dropout
    (the layer's mlp_bda) run outside the checkpoint and are not repeated."""
    kw = dict(tp=tp, sequence_parallel=sequence_parallel, elem_bytes=elem_bytes)
    with_mlp, _ = layer_eltwise_bytes(sh, layer_impl, mlp=True, **kw)
    without, _ = layer_eltwise_bytes(sh, layer_impl, mlp=False, **kw)
    x = sh.hidden * np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / np.asarray(tp, dtype=float), 1.0)
    return with_mlp - without + 2.0 * np.asarray(elem_bytes, dtype=float) * x


def loss_logit_bytes(loss_impl: ArrayLike = "megatron", elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes per logit (per element of the local T x V/t logits shard) that the softmax cross-entropy moves,
    (forward, backward), by implementation (:class:`~scalemodel.choices.LossImpl`), for logits of ``elem_bytes``
    e (2 under bf16/fp16, the output GEMM's dtype) and a fp32 softmax. One pass that reads or writes the whole
    tensor counts its element size; per-token work (the target gather, the loss, the all-reduced maxima and
    sums) is not counted. With c = e + 4 the ``.float()`` cast (read e, write 4; none when e = 4):

    megatron (unfused ``_VocabParallelCrossEntropy``, megatron/core/tensor_parallel/cross_entropy.py,
    NVIDIA/Megatron-LM@baf94af3c6 = core_r0.8.0; Megatron-DeepSpeed's mpu/cross_entropy.py on ``output.float()``,
    bigscience-workshop/Megatron-DeepSpeed@8387ae17c4 and microsoft/Megatron-DeepSpeed@54884b5f, makes the same
    passes)::

        forward   c (calculate_logits_max .float()) + 4 (max) + 8 (in-place subtract of the max)
                  + 8 (exp, out= in place) + 4 (sum) + 8 (div_ by the sum)                      = c + 32
        backward  8 (grad_input.mul_(grad_output)) + c (autograd casts the fp32 gradient back to the
                  logits' dtype, torch/csrc/autograd/engine.cpp validate_outputs)               = c + 8

      e = 2: 38 + 14 = 52 B a logit.

    megatron_fused (--cross-entropy-loss-fusion, native: megatron/core/fusions/fused_cross_entropy.py at
    core_r0.8.0; ``jit_fuser`` is torch.compile for torch >= 2.2, megatron/core/jit.py): each jit-fused function
    is one pass that stores its outputs and its in-place-updated inputs once, its reduction fused in::

        forward   c (calculate_logits_max: cast + max; e when e = 4, the max's read) + 8
                  (calculate_predicted_logits: subtract, exp, sum, the exp written over its input)
                  + 8 (calculate_cross_entropy_loss: div_)                                       = c + 16
        backward  4 + 4 (calculate_gradients: read the saved softmax, write back its in-place mul_)
                  + 2 (its ``.to(torch.bfloat16)``) [+ 2 + e, autograd's cast, when e != 2]     = 10 at e = 2

      e = 2: 22 + 10 = 32 B a logit.

    te (--cross-entropy-fusion-impl te: transformer_engine/pytorch/triton/cross_entropy.py,
    NVIDIA/TransformerEngine@70f536662a = v2.9)::

        forward   e (online_softmax_kernel: row max and sum) + 2 e (cross_entropy_kernel: reads the logits,
                  writes the gradient over them in their dtype)                                  = 3 e
        backward  2 e (element_mul_kernel: the gradient x grad_output in place; Megatron-Core passes
                  reduce_loss=False, so grad_output is per token and the skip for a scalar 1.0 never applies)

      e = 2: 6 + 4 = 10 B a logit.

    flash_attn (flash_attn/ops/triton/cross_entropy.py, Dao-AILab/flash-attention@1a2c3e8c25 = v2.4.2, with
    inplace_backward False as llm-foundry builds its CrossEntropyLoss)::

        forward   e (cross_entropy_fwd_kernel: the row's lse and loss)
        backward  2 e (cross_entropy_bwd_kernel: reads the logits, writes dlogits, a new tensor)

      e = 2: 2 + 4 = 6 B a logit.

    torch (eager ``F.cross_entropy(logits.float(), labels)``: ATen's log_softmax and nll_loss, pytorch/pytorch
    aten/src/ATen/native/cuda/SoftMax.cu and LossNLL.cu; torchtitan@9dec370 train.py ``loss_fn``). For rows of
    V/t >= 12,288 fp32 logits, over the 48 KiB a block may use (``sharedMemPerBlock``), log_softmax runs
    ``cunn_SoftMaxForward``, which reads the row three times (max, sum of exp, the output's epilogue)::

        forward   c (.float()) + 3 x 4 + 4 (log_softmax: three reads, the fp32 output)          = c + 16
        backward  4 (nll_loss_backward: grad_input.zero_(), then one scatter per token)
                  + 4 + 8 + 4 (cunn_SoftMaxBackward: sums the gradient, reads it and the output,
                  writes the input gradient) + c (the cast's backward)                         = c + 20

      e = 2: 22 + 26 = 48 B a logit.

    inductor (the same ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` under ``torch.compile``:
    pytorch/torchtitan@e7c0cae torchtitan/components/loss.py ``build_cross_entropy_loss`` compiles it when
    ``training.compile``). Inductor decomposes log_softmax + nll_loss into a row reduction (max and sum of exp
    of the up-cast logits; the fp32 copy and the log_softmax output are never stored, only the gathered target
    logit and the per-row max and sum) and AOTAutograd's min-cut partitioner saves the per-row reductions and the
    16-bit input rather than the fp32 log-probabilities, so the backward is one pointwise kernel
    ``(exp(x - lse) - onehot) * g`` written back in the logits' dtype::

        forward   e (the row's max and sum of exp, one read; with two reduction loops in one kernel the
                  second re-reads a V/t x e row the program has just read, from L2 (50 MB on Hopper))
        backward  2 e (read the logits, write their gradient)

      e = 2: 2 + 4 = 6 B a logit, flash_attn's passes.
    """
    code = codes(LossImpl, loss_impl, "strategy.loss_impl")
    e = _pos("elem_bytes", elem_bytes)
    cast = np.where(e < 4.0, e + 4.0, 0.0)
    fused_back = 10.0 + np.where(e != 2.0, 2.0 + e, 0.0)
    which = [code == LossImpl.MEGATRON, code == LossImpl.MEGATRON_FUSED, code == LossImpl.TE, code == LossImpl.TORCH]
    fwd = np.select(which, [cast + 32.0, np.maximum(cast, e) + 16.0, 3.0 * e, cast + 16.0], default=e)
    bwd = np.select(which, [cast + 8.0, fused_back, 2.0 * e, cast + 20.0], default=2.0 * e)
    return fwd, bwd


def train_metric_bytes(passes: ArrayLike, elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """HBM bytes per logit (per element of the local T x V/t logits) of ``passes`` eager cross-entropy evaluations
    outside autograd after each micro-batch's backward (a trainer's training metrics), with logits of ``elem_bytes``
    e (16-bit under autocast)::

        per pass   3 e + 4   log_softmax under autocast: log_softmax is on autocast's ``fp32_set_opt_dtype`` list,
                             so the 16-bit logits are read with dtype float32 (no separate cast) and, for rows of
                             V/t >= 12,288 fp32 elements, ``cunn_SoftMaxForward`` reads the row three times (max,
                             sum of exp, the epilogue) and writes the fp32 log-probabilities (as the ``torch`` row
                             of :func:`loss_logit_bytes` counts it, without its ``.float()``); nll_loss gathers one
                             value per token (not counted)

    e = 2: 10 B a logit a pass. Composer (mosaicml/composer v0.17.2, the release llm-foundry@5e85bd62d pins):
    ``Trainer._train_microbatch`` calls ``_eval_train_metrics`` after every micro-batch's backward, which runs
    ``update_metric`` for each train metric under the precision context (autocast for amp_bf16) on the forward's
    logits (composer/trainer/trainer.py); llm-foundry's ComposerMPTCausalLM sets LanguageCrossEntropy and
    LanguagePerplexity (``use_train_metrics`` default true; llmfoundry/models/mpt/modeling_mpt.py @5e85bd62d),
    each ``torch.nn.CrossEntropyLoss(reduction='sum')`` over the logits (LanguagePerplexity subclasses
    LanguageCrossEntropy; composer/metrics/nlp.py at v0.17.2): 2 passes, 20 B a logit."""
    n = np.asarray(passes, dtype=float)
    if not _finite_nonneg(n):
        raise InputError("a train-metric pass count is negative or not finite", where="train_metric_bytes",
                         allowed="passes >= 0")
    return n * (3.0 * _pos("elem_bytes", elem_bytes) + 4.0)


def loss_saved_bytes(loss_impl: ArrayLike = "megatron", elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Bytes per logit the cross-entropy keeps from its forward to its backward (:func:`loss_logit_bytes`'s
    sources): megatron and megatron_fused save the fp32 softmax ``exp_logits`` (4; Korthikanti et al. 2022's
    4sbv/t), torch log_softmax's fp32 output (4), te the logits tensor it has overwritten with their gradient,
    flash_attn and inductor the logits themselves (e each, the logits' own size; their per-row lse, or max and
    sum, are per token)."""
    code = codes(LossImpl, loss_impl, "strategy.loss_impl")
    e = _pos("elem_bytes", elem_bytes)
    fp32 = (code == LossImpl.MEGATRON) | (code == LossImpl.MEGATRON_FUSED) | (code == LossImpl.TORCH)
    return np.where(fp32, 4.0, e) * np.ones_like(e)


def layer_eltwise_bytes(sh: Shape, layer_impl: ArrayLike = "megatron_te", *, tp: ArrayLike = 1,
                        sequence_parallel: ArrayLike = False, elem_bytes: ArrayLike = 2.0,
                        mlp: bool = True, part: str = "layer", micro_batch: ArrayLike | None = None,
                        _attn: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes per token (of the micro-batch's T = b s / cp on one GPU) that one layer's memory-bound ops move,
    (forward, backward), by implementation (:class:`~scalemodel.choices.LayerImpl`): every op that is neither a weight
    GEMM nor the attention core (norms, residual adds, dropout, the MLP activation, RoPE, the core's layout copies,
    bias gradients), counted from each implementation's code as :func:`loss_logit_bytes` counts the loss. A kernel
    counts each tensor it reads or writes once (e = ``elem_bytes`` per element, 1 B per dropout-mask element);
    per-token vectors (norm statistics) and per-column reductions' outputs are not counted. Per token and GPU, with
    t = ``tp``: x = h (h / t with ``sequence_parallel``) of the residual stream, Q = a d / t, K = g d / t,
    V = g d_v / t, O = a d_v / t, F = f / t (the dense MLP's width; 0 when ``mlp`` is False: an MoE layer prices its
    experts' activation in :func:`layer_compute_time`), U = 2F gated, F otherwise (the up-projection's output);
    n = the norms per layer, 2 residual adds; flags from the shape: dropout (``sh.dropout``), biases, RoPE
    (``sh.rope``: no learned table and ``rotary`` not false), GQA (g < a), gated. ``micro_batch`` (b; None: b > 1)
    matters to nanotron only.

    megatron_te (NVIDIA/Megatron-LM@baf94af3c6 = core_r0.8.0, megatron/core/transformer/transformer_layer.py with the
    TE spec, megatron/training/arguments.py: bias-dropout, bias-gelu/swiglu and RoPE fusions on by default;
    NVIDIA/TransformerEngine v1.8, transformer_engine/pytorch/attention.py)::

        norm      fwd 2e x   TE LayerNormLinear's norm kernel: reads x, writes ln_out (the QKV / FC1 GEMM's input)
                  bwd 3e x   layernorm_bwd / rmsnorm_bwd: reads dgrad and the saved input, writes dx (dgamma in-kernel)
        residual  fwd 3e x   bias_dropout_add_fused_train (jit_fuser = torch.compile at torch >= 2.2): reads the
                             branch and the residual, writes the sum (+ 1 B x the mask with dropout)
                  bwd 3e x   autograd adds the branch input's gradient to the residual's (read 2, write 1)
                      (2e + 1) x with dropout: grad x mask (read dy and the mask, write); dbias in the same kernel
        RoPE      fwd 2e (Q + K)  fused_apply_rotary_pos_emb (transpose_output_memory): reads, writes
                  bwd 2e (Q + K)
                  multi-head latent attention: 2e (a/t + 1) r each way, r = qk_rope_head_dim: only the decoupled
                             RoPE part rotates, q_pos_emb [s, b, a/t, r] and k_pos_emb [s, b, 1, r]
                             (:func:`rope_rotated_elements`); the query / key cats and value.contiguous() are the
                             layout's 2e (Q + K + V) (multi_latent_attention.py L475-499 at Megatron-LM 7094270c6f)
        layout    fwd 2e (Q + K + V) with RoPE: k (RoPE's output) and v (a view of the QKV output) differ in stride,
                             get_qkv_layout finds 'not_supported' and makes q, k, v contiguous;
                      2e Q  with GQA: get_query_key_value_tensors' query.reshape of the split view copies
                  bwd 2e (Q + K + V) with RoPE or GQA: the split's backward concatenates dq, dk, dv (TE's
                             SplitAlongDim skips the copy only when they are views of one buffer, MHA without RoPE)
        act       fwd 3e F gated (bias_swiglu_impl: reads 2F, writes F) | 2e F (bias_gelu_impl / ATen gelu)
                  bwd 5e F gated (swiglu_back: reads dy and 2F, writes 2F) | 4e F (bias_gelu_back 3, + the bias
                             gradient's sum_to over tokens 1) | 3e F without biases (ATen gelu_backward)
                  squared ReLU (``sh.squared_relu``, ungated; also megatron_legacy and eager): fwd 4e F, bwd 10e F.
                             Megatron-LM's ``squared_relu`` (megatron/training/activations.py at core_v0.8.0
                             baf94af3c6) and NeMo 2.2's (nemo/collections/llm/fn/activation.py at v2.2.0 7192a2c944,
                             NemotronConfig's activation_func) are both ``torch.pow(F.relu(x), 2)``, not scripted, and
                             Megatron-Core's MLP fuses only GeLU and SwiGLU (mlp.py: "Only support fusion of gelu and
                             swiglu"), so it runs the unfused branch ``self.activation_func(intermediate_parallel)``:
                             forward relu (read, write) and pow (read, write); backward PowBackward0 =
                             pow_backward, ``grad * (exponent * self.pow(exponent - 1))`` (self.pow(1) is a copy 2e,
                             the scalar product 2e, the product with grad 3e: 7e), then ReluBackward0 =
                             threshold_backward(grad, result) 3e; with biases + the separate bias add 2e forward and
                             its gradient's sum 1e backward. The compiled and XLA implementations fuse it (2e, 3e)

    megatron_legacy (microsoft/Megatron-DeepSpeed@54884b5f megatron/model/transformer.py, mpu/layers.py,
    fused_bias_gelu.py; Megatron-LM's own megatron/model before Megatron-Core is the same): as megatron_te but
    Apex MixedFusedLayerNorm's backward is two kernels (cuComputePartGradGammaBeta reads dy and x,
    cuComputeGradInput reads them again and writes dx: 5e x); the core's ``context_layer.permute(2, 0, 1, 3)
    .contiguous()`` (fwd 2e O); split_tensor_along_last_dim's backward cat (bwd 2e (Q + K + V)); with biases the
    QKV bias gradient (F.linear: sum over tokens, bwd e (Q + K + V)) and the O / FC2 biases' (bias_dropout_add's
    bias broadcast: bwd e x each); no RoPE (ParallelAttention has none at that commit); a gated MLP (later forks'
    eager SwiGLU) at eager's act 5e F / 9e F::

        fwd  (2n + 6) e x + dropout 2 x + 2e O + act
        bwd  (5n + 6) e x + dropout 2 (2e + 1) x + 2e (Q + K + V) + biases e (Q + K + V + 2x) + act

    eager (torch.nn.LayerNorm, nn.Linear with bias, F.scaled_dot_product_attention, nn.GELU: ATen kernels; the
    bias rides in cuBLASLt's epilogue forward, its gradient is a sum over tokens backward)::

        norm      fwd 2e x, bwd 5e x  (layer_norm_backward_cuda: the dX kernel reads dy and x, writes dx; the
                                       GammaBetaBackward kernel reads dy and x again)
        residual  fwd 3e x, bwd 3e x (the accumulation); dropout (fused_dropout) fwd (2e + 1) x, bwd (2e + 1) x
        layout    fwd 2e O (output.transpose(1, 2).contiguous()), bwd 2e (Q + K + V) (the QKV split's cat)
        biases    bwd e (Q + K + V + x + U + x): sum over tokens of the four linears' output gradients
        act       fwd 2e F (gelu) | 5e F gated (silu 2, mul 3); bwd 3e F | 9e F gated (mul's two 3, silu 3)

    llmfoundry (mosaicml/llm-foundry@5e85bd62d llmfoundry/models/layers/blocks.py MPTBlock, norm.py LPLayerNorm =
    F.layer_norm in bf16, attention.py flash_attn_fn): eager without the output copy (pad_input writes it back;
    the unpad/pad copies are :func:`attention_unpad_bytes`, strategy.attention_unpad); resid_pdrop 0.0 (the default:
    F.dropout returns its input), no RoPE (learned positions / ALiBi).

    torchtitan (pytorch/torchtitan@e7c0cae torchtitan/models/llama3/model.py TransformerBlock, each block
    torch.compile'd; inductor: one kernel per fusion, SDPA and the GEMMs outside), per layer of 2 RMSNorms::

        fwd  attention_norm 2e x; h = x + attn fused with ffn_norm (reads x and attn, writes h and its norm) 4e x;
             out = h + ffn 3e x; RoPE (complex multiply) fused with repeat_kv: e (2Q + K + K_r), K_r = a d / t with
             GQA, else K (without RoPE only the repeat: GQA e (K + K_r)); repeat_kv of V with GQA e (V + V_r);
             SwiGLU 3e F (gelu 2e F); no output copy: SDPA's output is [b, s, a, d] in memory (flash and cuDNN
             allocate it in the query's layout, torch/_meta_registrations.py meta__scaled_dot_product_flash_attention
             ``empty_like(query)``, cudnn ``alloc_with_matching_layout``), so ``.transpose(1, 2).contiguous()`` is
             a no-op clone inductor's remove_noop_ops drops (checked in inductor's output code, torch 2.13 CPU)
        bwd  ffn_norm: dx kernel reads the w1 and w3 gradients, h and the residual gradient, writes dh (5e x),
             dweight reduction reads the two gradients and h (3e x); attention_norm likewise with wq, wk, wv
             (6e x + 4e x): 18e x; RoPE / repeat backward as forward; SwiGLU 5e F (gelu 3e F)

    torchtitan_eager (the same block without torch.compile, pytorch/torchtitan@1ea476e9f = 9dec370 for these ops:
    models/llama/model.py, models/norms.py RMSNorm; autograd's formulas of PyTorch's derivatives.yaml), per token::

        norm      fwd 2 c + 20 + 2e B x each: x.float() (c = e + 4; 0 in fp32), pow 8, mean 4, x * rsqrt 8,
                  type_as c, * weight 2e; bwd 2 c + 68 + 6e B x each: weight product grad * w 2e, grad * y 3e and
                  its sum e; casts c; rsqrt product 8, its grad * x 12 and row sum 4; mean's expanded division 4;
                  pow_backward 28 (x.pow(1) copy 8, x 2 8, x grad 12); the two fp32 gradients' sum 12
        residual  fwd 3e x each, bwd 3e x each (accumulation)
        inputs    bwd 3 x 3e h: autograd sums the input gradients of wq, wk, wv (two sums) and of w1, w3 (one) on the
                  projections' input (the gathered h under TP)
        RoPE      fwd and bwd (2 c + 8)(Q + K): xq.float(), complex multiply by freqs_cis (read 4, write 4), type_as
                  (freqs_cis is per position, read from cache; its conj in the backward not counted)
        repeat    GQA e (K + K_r) + e (V + V_r) each way (expand().reshape() copies; ExpandBackward's sums)
        output    none: flash's output is [b, s, a, d] in memory, so output.transpose(1, 2).contiguous() is a no-op
        act       fwd 5e F gated (silu, mul), bwd 9e F (mul's two products, silu_backward); eager's ungated counts

    torchtitan_eager_fused_rmsnorm: the same with torchtitan's Triton RMSNorm (models/norms.py TritonFusedRMSNorm:
    fwd read x, write y 2e x; bwd read x and dy, write dx 3e x, dw as per-SM partial sums). fms (foundation-model-
    stack@f29e546d LLaMABlock: LayerNormParameterized(use_high_precision_pow) = the same ATen norm, separate query /
    key / value and w1 / wg linears, silu(wg x) * w1 x): as torchtitan_eager but RotaryEmbedding.adjusted_qk's RoPE
    (2 c + 24)(Q + K) each way: q.float(), the [.., D/2, 2, 2] rotation times q_.unsqueeze(-2) (read 4, write 8), sum(5)
    (read 8, write 4), type_as (its per-layer freqs[position_ids] gather, 8 d B a token, not counted).

    xla (MaxText on TPU): the torchtitan fusions without the output copy and the repeats (XLA's layout assignment
    gives the dots their transposed operands and broadcasts the KV heads): fwd 9e x + RoPE 2e (Q + K) + act,
    bwd 18e x + RoPE 2e (Q + K) + act. The fusion decisions are the compiler's and were not read from an HLO dump.

    nanotron (huggingface/nanotron@c2528430, the same at the benchmark branch's 67c5ebb6: src/nanotron/models/llama.py
    ``LlamaDecoderLayer._core_forward``, ``CausalSelfAttention.forward`` training branch, ``GLUActivation``, ``MLP``;
    nn/layer_norm.py ``TritonRMSNorm``; parallel/tensor_parallel/functional.py ``_RowLinearAsyncCommunication``;
    flash-attn v2.6.3 flash_attn/layers/rotary.py ``RotaryEmbedding.forward`` with ``kv``; PyTorch eager)::

        norm      fwd 2e x, bwd 3e x  flash-attn's Triton layer_norm_fn (is_rms_norm): reads x, writes y; backward
                                       reads x and dy, writes dx (dw as per-block partial sums)
        residual  fwd 3e x, bwd 3e x  ``hidden_states + residual``; autograd's accumulation of the two paths
        QKV       fwd 2e (Q + K + V)  MHA ``qkv.view(s, b, 3, a, d).permute(2, 1, 0, 3, 4).contiguous()``; GQA
                                       ``torch.split`` then three ``transpose(0, 1).contiguous()``
                  bwd 4e (Q + K + V) MHA: the unpacking's UnbindBackward stacks dq, dk, dv (2e), then the view's
                                       backward reshapes the permuted gradient (a copy, 2e);
                      2e (Q + K + V) GQA: the split's backward concatenates the transposed gradients
        KV pack   fwd 4e (K + V)      ``torch.cat([k.unsqueeze(0), v.unsqueeze(0)])`` (read, write) then
                                       ``.permute(1, 2, 0, 3, 4).contiguous()`` (read, write)
                  bwd 2e (K + V)      ``torch.split(kv, 1, dim=2)``'s backward concatenates dk and dv
        RoPE      fwd 2e (Q + K), bwd 2e (Q + K)  flash-attn's apply_rotary in place on q and on kv's k half
        output    fwd 2e O            ``attention_output.view(b, s, O).transpose(0, 1)`` reaches o_proj's F.linear
                                       non-contiguous: matmul folds it by a reshape (a copy)
                  bwd 4e O            the view's backward reshapes the transposed gradient (2e); the async row
                                       linear saved the non-contiguous input and makes it contiguous for the
                                       weight gradient (``tensor = tensor.contiguous()``, 2e); 2e O where the row
                                       linear is not async (tp_mode ALL_REDUCE: no SP at t > 1; the grid pairs
                                       REDUCE_SCATTER with async, so t = 1 counts as async): matmul's fold copy
                                       is what autograd saved, only the view's reshape is left
                  none at b = 1       ``micro_batch`` 1: the transpose of [1, s, O] is contiguous (PyTorch's
                                       contiguity skips size-1 dimensions), so neither the fold, the gradient's
                                       reshape nor ``tensor.contiguous()`` copies (``micro_batch`` None: b > 1)
        act       fwd 5e F gated      ``torch.split`` views, eager silu (read F, write F) x up (read 2F, write F);
                                       2e F ungated (eager activation)
                  bwd 13e F gated     MulBackward's two products (3e F each), silu_backward 3e F, the split's
                                       backward concatenating the two halves into the fused gate_up gradient 4e F;
                                       3e F ungated

    so against megatron_te (MHA, RoPE, gated, no dropout) per token: fwd + 4e (K + V) + 2e O + 2e F, bwd + 2e (K + V)
    + 2e (Q + K + V) + 4e O + 8e F (b > 1; b = 1 without the O terms). No dropout, no biases (nanotron's Llama has
    neither). The op sequence, b = 1 and 2, MHA and GQA, async row linear or F.linear, was checked against an aten
    trace (TorchDispatchMode) of the layer's code under torch 2.1.2.

    Megatron-Core with MHA, RoPE, dropout, SwiGLU, n = 2, no SP, t = 1 (x = Q = K = V = h):
    fwd 10e h + 2 h + 4e h + 6e h + 3e f, bwd 12e h + 2 (2e + 1) h + 4e h + 6e h + 5e f.

    ``part`` "attention" / "mlp": one block of a hybrid pattern's layer (one norm, one residual, one dropout): the
    terms of the residual stream x (those left when Q, K, V, O and F are 0) of an attention + MLP pair (n = 2)
    halved, plus that block's own terms (RoPE and layout for attention; the activation, at ``mlp``, for the MLP).
    """
    if part != "layer":
        kw = dict(tp=tp, sequence_parallel=sequence_parallel, elem_bytes=elem_bytes, micro_batch=micro_batch)
        x_f, x_b = layer_eltwise_bytes(sh, layer_impl, mlp=False, _attn=0.0, **kw)
        a_f, a_b = layer_eltwise_bytes(sh, layer_impl, mlp=False, **kw)
        if part == "attention":
            return a_f - x_f / 2, a_b - x_b / 2
        m_f, m_b = layer_eltwise_bytes(sh, layer_impl, mlp=mlp, **kw)
        return m_f - a_f + x_f / 2, m_b - a_b + x_b / 2
    code = codes(LayerImpl, layer_impl, "strategy.layer_impl")
    e = _pos("elem_bytes", elem_bytes)
    t = _pos("tp", tp)
    sp = np.asarray(sequence_parallel, dtype=bool)
    h, a, g, d, dv = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim
    x = h * np.where(sp, 1.0 / t, 1.0)
    q, k, v, o = _attn * a * d / t, _attn * g * d / t, _attn * g * dv / t, _attn * a * dv / t
    k_rep, v_rep = np.maximum(k, _attn * a * d / t), np.maximum(v, _attn * a * dv / t)
    f = sh.ffn_hidden / t if mlp else 0.0 * h
    gated = np.asarray(sh.gated_mlp, dtype=bool)
    up = np.where(gated, 2.0, 1.0) * f
    n = sh.norms_per_layer if sh.hybrid is None else 2.0  # a hybrid's block: half an attention + MLP pair (part)
    drop = np.asarray(sh.dropout, dtype=bool)
    bias = np.asarray(sh.biases, dtype=bool)
    rope = np.asarray(sh.rope, dtype=bool)
    gqa = g < a
    one = lambda c: np.where(c, 1.0, 0.0)  # noqa: E731
    mask_f, mask_b = one(drop) * 2.0 * x, one(drop) * 2.0 * (2.0 * e + 1.0) * x  # two dropouts: fwd mask, bwd pass

    ff = np.where(gated, 3.0, 2.0) * e * f  # the fused activation's forward (TE, compiled, XLA)
    # squared ReLU (ungated), two eager ATen ops where the implementation runs the activation outside a compiler:
    # fwd relu 2e + pow 2e; bwd pow_backward 7e (self.pow(1) copies 2e, x 2 writes 2e, grad x that 3e) + relu's
    # threshold_backward 3e; with biases the unfused bias add (2e) forward, its sum over tokens (1e) backward
    sq = np.asarray(sh.squared_relu, dtype=bool) & ~gated
    sq_f, sq_b = (4.0 + 2.0 * one(bias)) * e * f, (10.0 + one(bias)) * e * f

    rotated = _attn * rope_rotated_elements(sh, t)  # what the fused RoPE reads and writes (MLA: its RoPE part)

    def te() -> tuple[Any, Any]:  # Megatron-Core + Transformer Engine
        return ((2 * n + 6) * e * x + mask_f + one(rope) * 2 * e * (rotated + q + k) + one(rope) * 2 * e * v
                + one(gqa) * 2 * e * q + np.where(sq, sq_f, ff),
                (3 * n + 6) * e * x + mask_b + one(rope) * 2 * e * rotated + one(rope | gqa) * 2 * e * (q + k + v)
                + np.where(sq, sq_b, np.where(gated, 5.0, np.where(bias, 4.0, 3.0)) * e * f))

    def legacy() -> tuple[Any, Any]:  # legacy Megatron-LM / Megatron-DeepSpeed
        return ((2 * n + 6) * e * x + mask_f + 2 * e * o + np.where(sq, sq_f, np.where(gated, 5.0, 2.0) * e * f),
                (5 * n + 6) * e * x + mask_b + 2 * e * (q + k + v) + one(bias) * e * (q + k + v + 2 * x)
                + np.where(sq, sq_b, np.where(gated, 9.0, np.where(bias, 4.0, 3.0)) * e * f))

    def eager(out_copy: bool) -> tuple[Any, Any]:  # PyTorch eager (llm-foundry: no output copy)
        # nn.Linear's bias rides in the GEMM epilogue and its gradient is counted with the biases: relu and pow only
        return ((2 * n + 6) * e * x + one(drop) * 2 * (2 * e + 1) * x
                + np.where(sq, 4.0, np.where(gated, 5.0, 2.0)) * e * f + (2 * e * o if out_copy else 0.0),
                (5 * n + 6) * e * x + mask_b + 2 * e * (q + k + v) + one(bias) * e * (q + k + v + 2 * x + up)
                + np.where(sq, 10.0, np.where(gated, 9.0, 3.0)) * e * f)

    def compiled() -> tuple[Any, Any]:  # torch.compile'd block (torchtitan)
        rot = one(rope) * e * (2 * q + k + k_rep) + one(~rope & gqa) * e * (k + k_rep) + one(gqa) * e * (v + v_rep)
        return 9 * e * x + rot + ff, 18 * e * x + rot + np.where(gated, 5.0, 3.0) * e * f

    # torchtitan's RMSNorm / fms's LayerNormParameterized(use_high_precision_pow) as ATen ops: x.float() and
    # .type_as(x) move e + 4 B an element (no-ops in fp32), pow / mul 8, mean 4, the weight product 2e; backward the
    # weight product's two products and sum 6e, the casts, rsqrt-mul's product 8 and its grad x product 12 + row sum 4,
    # mean's expanded division 4, pow_backward 28 (pow(1) copy, x 2, x grad), the two fp32 gradients' sum 12
    up32 = np.where(e == 4.0, 0.0, e + 4.0)
    rms_f, rms_b = 2 * up32 + 20 + 2 * e, 2 * up32 + 68 + 6 * e

    def eager_llama(norm_f: Any, norm_b: Any, rope_b: Any) -> tuple[Any, Any]:  # torchtitan / fms without compile
        # norms, residual adds 3e x each; RoPE rope_b B per rotated element each way; repeat_kv's copies with GQA;
        # silu x up 5e F (mul's two products 6e + silu_backward 3e back); autograd sums the input gradients of
        # the separate wq / wk / wv (two sums) and w1 / w3 (one) on the gathered input h: 3e h each
        rot = one(rope) * rope_b * (q + k) + one(gqa) * e * (k + k_rep + v + v_rep)
        acc = 3 * e * h * (2.0 * _attn + (one(gated) if mlp else 0.0))
        return (n * norm_f * x + 3 * n * e * x + rot + np.where(sq, 4.0, np.where(gated, 5.0, 2.0)) * e * f,
                n * norm_b * x + 3 * n * e * x + acc + rot + np.where(sq, 10.0, np.where(gated, 9.0, 3.0)) * e * f)

    def xla() -> tuple[Any, Any]:  # XLA (MaxText)
        rot = one(rope) * 2 * e * (q + k)
        return 9 * e * x + rot + ff, 18 * e * x + rot + np.where(gated, 5.0, 3.0) * e * f

    def nanotron() -> tuple[Any, Any]:  # nanotron's LlamaDecoderLayer, eager (docstring)
        rot = one(rope) * 2 * e * (q + k)
        # the o_proj input's copies: only where b > 1 (at b = 1 the [s, 1, O] transpose is contiguous); the row
        # linear's tensor.contiguous() only in the async row linear (tp_mode REDUCE_SCATTER: SP, or t = 1)
        b = 2.0 if micro_batch is None else np.asarray(micro_batch, dtype=float)
        out = one(b > 1) * e * o
        row_async = sp | (t <= 1)
        return ((2 * n + 6) * e * x + rot + 2 * e * (q + k + v) + 4 * e * (k + v) + 2 * out
                + np.where(gated, 5.0, 2.0) * e * f,
                (3 * n + 6) * e * x + rot + np.where(gqa, 2.0, 4.0) * e * (q + k + v) + 2 * e * (k + v)
                + np.where(row_async, 4.0, 2.0) * out + np.where(gated, 13.0, 3.0) * e * f)

    # only the implementations some candidate runs are priced (the planner's grids hold one or two)
    fwd, bwd = np.zeros(()), np.zeros(())
    for impl, price in ((LayerImpl.MEGATRON_TE, te), (LayerImpl.MEGATRON_LEGACY, legacy),
                        (LayerImpl.EAGER, lambda: eager(True)), (LayerImpl.LLMFOUNDRY, lambda: eager(False)),
                        (LayerImpl.TORCHTITAN, compiled), (LayerImpl.XLA, xla), (LayerImpl.NANOTRON, nanotron),
                        (LayerImpl.TORCHTITAN_EAGER, lambda: eager_llama(rms_f, rms_b, 2 * up32 + 8)),
                        (LayerImpl.TORCHTITAN_EAGER_FUSED_RMSNORM, lambda: eager_llama(2 * e, 3 * e, 2 * up32 + 8)),
                        (LayerImpl.FMS, lambda: eager_llama(rms_f, rms_b, 2 * up32 + 24))):
        here = code == impl
        if here.any():
            f_i, b_i = price()
            fwd, bwd = fwd + np.where(here, f_i, 0.0), bwd + np.where(here, b_i, 0.0)
    return fwd, bwd


def cp_levels(cp: ArrayLike, cp_comm_type: ArrayLike = 0, cp_a2a_size: ArrayLike = 1) -> tuple[np.ndarray, np.ndarray]:
    """(n_a, n_p): the ranks of context parallelism's all-to-all level and of its p2p ring, n_a n_p = cp
    (Transformer Engine's AttnFuncWithCPAndKVP2P with cp_group = [a2a group, p2p group] for a2a+p2p,
    AttnFuncWithCPAndQKVOA2A for a2a; context_parallel.py at NVIDIA/TransformerEngine@d0067d0):
    p2p (1, cp); a2a (cp, 1); a2a+p2p (A, cp / A) with A = ``cp_a2a_size`` (Megatron-Core
    --hierarchical-context-parallel-sizes A P); all_gather (1, cp) (no ring: its own pricing)."""
    c = np.asarray(cp, dtype=float)
    cpt = codes(CpCommType, cp_comm_type, "strategy.cp_comm_type")
    size = np.clip(np.asarray(cp_a2a_size, dtype=float), 1.0, np.maximum(c, 1.0))
    n_a = np.where(cpt == CpCommType.A2A, c, np.where(cpt == CpCommType.A2A_P2P, size, 1.0))
    return n_a, c / n_a


def cp_allgather_core_time(sh: Shape, seq_len: ArrayLike, cp: ArrayLike, d: ArrayLike, dv: ArrayLike,
                           count: ArrayLike, keys_of: Any = None, **kernel: Any) -> np.ndarray:
    """One direction of the attention core of a rank under context parallelism by all-gather (Transformer Engine's
    AttnFuncWithCPAndKVAllGather, transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py at
    NVIDIA/TransformerEngine@d0067d0; Megatron-Core ``--cp-comm-type all_gather``): the rank holds the
    load-balanced query chunks j = r and 2 cp - 1 - r of C = s / (2 cp) queries (``local_seq_chunk_ids``) and runs
    one kernel call per chunk against the gathered keys [0, (j + 1) C) (``get_kv_seq_info_after_all_gather``,
    the causal mask aligned bottom-right), so a query at position p attends its p + 1 keys as without CP. The call's
    keys per query are the mean over its queries of the causal keys:

        k_j = ((j + 1) C K((j + 1) C) - j C K(j C)) / C          K = ``keys_of`` (Shape.causal_keys by default)

    (j C K(j C) is the sum of the keys of the first j C queries; a sliding window enters through K). Each call is
    priced by :func:`flash_kernel_time` at its own FLOPs and its own keys (``kernel``: its keywords, the fitted
    curve, ``flop_ratio``); the rank's time is the two calls' sum (TE runs them on two streams to fill the waves,
    not priced), the slower of rank 0 (chunks 0 and 2 cp - 1) and rank cp - 1 (chunks cp - 1 and cp). A model
    without the causal mask attends all s (Shape.attended_keys) in both calls. The FLOPs of a rank are those of
    s / cp queries at the sequence's mean keys (the two chunks' keys sum to s + 1 without a window)."""
    s = np.asarray(seq_len, dtype=float)
    c = np.asarray(cp, dtype=float)
    K = sh.causal_keys if keys_of is None else keys_of
    C = s / (2.0 * c)

    def chunk_keys(j: np.ndarray) -> np.ndarray:
        lo, hi = j * C, (j + 1.0) * C
        below = np.where(lo > 0, lo * K(np.maximum(lo, 1.0)), 0.0)
        return np.where(sh.causal, (hi * K(hi) - below) / C, sh.attended_keys(s))

    def call(j: np.ndarray) -> np.ndarray:
        k_j = chunk_keys(j)
        return flash_kernel_time(C, k_j, d, dv, count, call_keys=k_j, **kernel)

    first = call(0.0 * c) + call(2.0 * c - 1.0)
    last = call(c - 1.0) + call(c)
    return np.asarray(np.maximum(first, last))


def cp_gathered_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                      cp: ArrayLike = 1, cp_comm_type: ArrayLike = 0, elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Transient HBM bytes per GPU of context parallelism by all-gather (0 for p2p, a2a and cp = 1), held by one
    attention layer at a time: the backward of AttnFuncWithCPAndKVAllGather (TE context_parallel.py at d0067d0)
    holds the re-gathered K and V of the whole sequence (``gather_along_first_dim``) and their full-length
    gradients dk, dv (``torch.zeros((k_shape[0] * cp_size, ...), dtype=fwd_nominal_dtype)``) until the
    reduce-scatter, 2 e b s KV / t with KV the key and value elements per token
    (:func:`~scalemodel.cost.transformer.kv_elements_per_token`). The reordered copies (``index_select``) that live
    briefly beside the gathered ones are not counted."""
    c = _pos("cp", cp)
    on = (codes(CpCommType, cp_comm_type, "strategy.cp_comm_type") == CpCommType.ALL_GATHER) & (c > 1)
    full = (_pos("micro_batch", micro_batch) * _pos("seq_len", seq_len) * kv_elements_per_token(sh)
            * _pos("elem_bytes", elem_bytes) / _pos("tp", tp))
    return np.asarray(np.where(on, 2.0 * full, 0.0))


def cp_ring_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1, cp: ArrayLike = 1,
                  elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes (forward, backward) of one attention layer's context-parallel ring bookkeeping outside the attention
    kernels on the slowest rank (cp - 1), Transformer Engine's P2P ring (AttnFuncWithCPAndKVP2P, Megatron-Core's
    default cp_comm_type p2p) with the 16-bit core; 0 at cp = 1. Per GPU, T = b s / cp tokens, e = ``elem_bytes``,
    O = T a d_v / t elements of the output (and of dq), KV = T g (d + d_v) / t of the K and V block::

        causal      fwd  e O (1 + 3 cp)                   bwd  e O (3 cp - 1) + e KV (1.5 cp + 3)
        not causal  fwd  e O (1 + 3 cp)                   bwd  e O (3 cp - 1) + e KV (3 cp + 1)

    Counted from transformer_engine/pytorch/attention.py at v2.1 (450146ae6), qkv_format sbhd (Megatron-Core's),
    no FP8, for rank r = cp - 1, the rank the step model prices the ring's kernel calls for
    (:func:`layer_compute_time`); k = cp - r - 1 = 0:

    * forward: ``out = torch.zeros_like(q)`` (write e O); after the ring, one merge per step,
      ``flash_attn_fwd_out_correction`` (jit_fuser: torch.compile) reads the step's output and the running output and
      writes it back, 3e O, over the whole output at the steps i <= r (all cp of them for r = cp - 1; the others
      merge the second half only). The KV first-half and Q second-half ``.contiguous()`` calls are no-ops in sbhd
      (a slice of the leading dimension); the per-(token, head) softmax statistics are per-token work, left out.
    * backward: ``p2p_comm_buffers[0][0].copy_(kv)`` 2e KV; dq: the first step ``dq.copy_(dq_)`` 2e O (i = k = 0,
      rank cp - 1), every later step ``dq.add_(dq_)`` 3e O; dkv (the buffer received from the neighbour): step 0
      the half-block copy ``dkv[0].copy_(dkv_)`` e KV, steps 1 .. cp - 2 the half-block add ``dkv[0].add_(dkv_)``
      1.5e KV, the last step (the local block, full) ``dkv.add_(dkv_)`` 3e KV. Without a causal mask every step is
      whole: copies 2e, adds 3e.

    Transformer Engine 1.x (v1.8, AttnFuncWithCP) makes the same passes and also concatenates dk and dv every step
    (``torch.cat((dk_.unsqueeze(0), dv_.unsqueeze(0)))``), not counted here; v2.1 builds that view without a copy
    (``_combine_tensors``)."""
    b = _pos("micro_batch", micro_batch)
    c = _pos("cp", cp)
    e = _pos("elem_bytes", elem_bytes)
    T = b * _pos("seq_len", seq_len) / c
    t = _pos("tp", tp)
    o = T * sh.heads * sh.v_head_dim / t
    kv = T * sh.kv_heads * (sh.head_dim + sh.v_head_dim) / t
    causal = np.asarray(sh.causal, dtype=bool)
    ring = c > 1
    fwd = np.where(ring, e * o * (1.0 + 3.0 * c), 0.0)
    bwd = np.where(ring, e * o * (3.0 * c - 1.0) + e * kv * np.where(causal, 1.5 * c + 3.0, 3.0 * c + 1.0), 0.0)
    return fwd, bwd


def titan_op_gemm_time(sh: Shape, tokens: ArrayLike, tp: ArrayLike, **kw: Any) -> np.ndarray:
    """Seconds of the weight GEMMs torchtitan's op-level selective AC repeats in one layer's backward
    (:func:`scalemodel.cost.transformer.titan_op_gemms`: wk, wo and, gated, w3), each its own GEMM of T tokens
    (torchtitan runs wq, wk, wv, w1, w3 as separate nn.Linear modules): T x g d/t x h, T x h x a d_v/t, T x f/t x h;
    ``kw`` the :func:`gemm_time` keywords."""
    total = np.zeros_like(np.asarray(tokens, dtype=float))
    for name, n_in, n_out in titan_op_gemms(sh):
        out_w, in_w = (n_out, n_in / tp) if name == "o" else (n_out / tp, n_in)
        total = total + gemm_time(tokens, out_w, in_w, np.where(n_in * n_out > 0, 1.0, 0.0), **kw)
    return total


def logits_compute_time(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, peak_flops: ArrayLike,
                        memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75,
                        gemm_half_dim: ArrayLike = 96.0, memory_efficiency: ArrayLike = 0.85,
                        tp: ArrayLike = 1, cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0,
                        loss_impl: ArrayLike = "megatron") -> LayerTime:
    """Output layer + cross-entropy for one micro-batch on one GPU (last pipeline stage).

    GEMM T x V/t x h (T = b s / cp tokens); its backward, the data- and weight-gradient GEMMs, 2 x the forward
    GEMM. The softmax cross-entropy over the T V / t logits of ``elem_bytes`` each moves
    :func:`loss_logit_bytes` (``loss_impl``) per logit, forward and backward, at the HBM roofline
    (megatron, the default: 38 + 14 B; megatron_fused 22 + 10; te 6 + 4; flash_attn 2 + 4; torch 22 + 26,
    at 16-bit logits).
    Never recomputed.
    """
    T = _tokens(micro_batch, seq_len, cp)
    t = _pos("tp", tp)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=elem_bytes)
    gemm = gemm_time(T, sh.vocab / t, sh.hidden, **kw)
    per_fwd, per_bwd = loss_logit_bytes(loss_impl, elem_bytes)
    logits = T * sh.vocab / t
    mem = memory_time(per_fwd * logits, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    mem_bwd = memory_time(per_bwd * logits, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    fwd = gemm + mem
    zero = np.zeros_like(fwd)
    return LayerTime(forward=fwd, backward=2.0 * gemm + mem_bwd, recompute=zero, forward_gemm=gemm,
                     forward_memory=mem, attention_core=zero, forward_flops=2.0 * T * sh.hidden * sh.vocab / t)


def mtp_projection_time(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, peak_flops: ArrayLike,
                        memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75,
                        gemm_half_dim: ArrayLike = 96.0, memory_efficiency: ArrayLike = 0.85,
                        tp: ArrayLike = 1, cp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                        recompute: ArrayLike = "none", elem_bytes: ArrayLike = 2.0) -> LayerTime:
    """What one multi-token prediction module adds around its transformer block, for one micro-batch on one GPU
    (the block itself is a :func:`layer_compute_time` of the last layer's kind, the shared head a
    :func:`logits_compute_time`): DeepSeek-V3's h'_i^k = M_k [RMSNorm(h_i^(k-1)); RMSNorm(Emb(t_(i+k)))]
    (arXiv:2412.19437 §2.2), Megatron-Core's ``MultiTokenPredictionLayer._concat_embeddings``
    (multi_token_prediction.py, core_v0.15.0): enorm and hnorm
    RMSNorms, the concatenation to 2h, ``eh_proj`` (a ColumnParallelLinear of 2h -> h), and the module's
    ``final_layernorm`` before the shared head.

        GEMM    T x h/t x 2h                                        (eh_proj, T = b s / cp tokens)
        memory  3 norms 2 eb X + concatenation 4 eb X               (X = T h elements, / t with SP)

    Backward = 2 x forward; full recompute repeats the forward (Megatron-Core checkpoints the module's
    ``_proj_and_transformer_layer``, which runs the two input norms and eh_proj), selective nothing.
    """
    T = _tokens(micro_batch, seq_len, cp)
    t = _pos("tp", tp)
    eb = _pos("elem_bytes", elem_bytes)
    sp = np.asarray(sequence_parallel, dtype=bool)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=eb)
    h = sh.hidden
    gemm = gemm_time(T, h / t, 2.0 * h, **kw)
    X = T * h * np.where(sp, 1.0 / t, 1.0)
    mem = memory_time((3.0 * 2.0 + 4.0) * eb * X, memory_bandwidth=memory_bandwidth,
                      memory_efficiency=memory_efficiency)
    fwd = gemm + mem
    code = recompute_code(recompute)
    zero = np.zeros_like(fwd)
    return LayerTime(forward=fwd, backward=2.0 * fwd, recompute=np.where(code == Recompute.FULL, fwd, zero),
                     forward_gemm=gemm, forward_memory=mem, attention_core=zero,
                     forward_flops=2.0 * T * 2.0 * h * h / t)


#: Elements per MXFP8 scale: one E8M0 byte per 32 consecutive elements, along rows for the row-wise copy and
#: along columns for the column-wise one (OCP Microscaling Formats MX v1.0, block size 32; Transformer Engine
#: common/cast/mxfp8/quantize_mxfp8.cuh writes ``scale_inv`` and ``columnwise_scale_inv`` as e8m0_t).
MXFP8_BLOCK = 32.0

#: Elements per NVFP4 scale: one E4M3 byte per 16 consecutive elements of each copy (row-wise and column-wise), on
#: top of one FP32 per-tensor scale (Transformer Engine ``NVFP4BlockScaling``, transformer_engine/common/recipe/
#: __init__.py at NVIDIA/TransformerEngine@d0067d0da6; E2M1 data, 2 elements a byte). The 2D 16x16 weight blocks
#: share one value per block but TE stores it per 1x16 row block, so the stored scale bytes are the same.
NVFP4_BLOCK = 16.0
#: Bytes of one NVFP4 copy per element: a 4-bit E2M1 value and its share of an E4M3 block scale.
NVFP4_COPY_BYTES = 0.5 + 1.0 / NVFP4_BLOCK

#: Elements per FP32 scale of Transformer Engine's ``Float8BlockScaling`` (the 'blockwise' recipe, DeepSeek-V3's
#: tiles): activations and gradients in 1 x 128 tiles along each copy's rows (1D, ``x_block_scaling_dim = 1``,
#: ``grad_block_scaling_dim = 1``), weights in 128 x 128 tiles (2D, ``w_block_scaling_dim = 2``); one fp32
#: ``scale_inv`` per tile (transformer_engine/common/recipe/__init__.py ``Float8BlockScaling``,
#: pytorch/tensor/float8_blockwise_tensor.py ``Float8BlockQuantizer(block_len=128)``, NVIDIA/TransformerEngine
#: release_v2.14; docs/model.md#fp8-blockwise).
FP8_BLOCK_LEN = 128.0
#: Bytes of one blockwise FP8 copy per element: the E4M3 byte and its share of a 4-byte scale, 1 x 128 tile
BLOCKWISE_COPY_BYTES = 1.0 + 4.0 / FP8_BLOCK_LEN
#: ... and of a weight's, 128 x 128 tile
BLOCKWISE_WEIGHT_COPY_BYTES = 1.0 + 4.0 / (FP8_BLOCK_LEN * FP8_BLOCK_LEN)

#: FP8 scaling recipes priced by :func:`fp8_quantize_bytes`: Transformer Engine's, by Megatron-Core's
#: ``--fp8-recipe`` names, delayed (DelayedScaling), tensorwise (Float8CurrentScaling), mxfp8 (MXFP8BlockScaling),
#: blockwise (Float8BlockScaling, Hopper), and nvfp4 (NVFP4BlockScaling, Megatron-Core ``--fp4-recipe nvfp4``), the
#: recipe of every precision fp4 run;
#: torchao's row-wise recipes (:data:`scalemodel.choices.ROWWISE_FP8_RECIPES`: torchao.float8
#: Float8LinearRecipeName ROWWISE, ROWWISE_WITH_GW_HP; docs/model.md#fp8-rowwise).
FP8_RECIPES = ("delayed", "tensorwise", "mxfp8", "nvfp4", "blockwise") + ROWWISE_FP8_RECIPES


def _check_recipe(recipe: str) -> None:
    """Refuse an fp8 recipe outside :data:`FP8_RECIPES` (one message for every function that prices one)."""
    if recipe not in FP8_RECIPES:
        raise InputError(f"unknown fp8 recipe {recipe!r}", where="training.fp8_recipe",
                         allowed="delayed, tensorwise, mxfp8, blockwise, rowwise or rowwise_with_gw_hp (nvfp4: "
                                 "precision fp4)")


#: Rate of the forward GEMM of a torchao row-wise recipe over the fp8 curve (per-tensor FP8), per accelerator family
#: (:func:`rowwise_forward_gemm_factor`). torchao (pytorch/ao@890e0ac8 and @4fc4068d6, the builds of the tao25 rows:
#: torchao/float8/config.py ``gemm_config_output = Float8GemmConfig(use_fast_accum=True)``, the two backward GEMMs'
#: configs default ``use_fast_accum=False``; float8_ops.py ``addmm_float8_unwrapped``, lines 43-52, 73-74 / 46-56,
#: 83-84: "The rowwise CUTLASS-based kernel is so slow without fast-accum that we'd rather use the tensorwise
#: cuBLAS-based kernel and do the scaling manually afterwards") runs only the forward GEMM on ``torch._scaled_mm``'s
#: row-wise kernel; dgrad and wgrad run the per-tensor kernel with unit scales, the fp8 curve's, plus an output rescale
#: (:func:`rowwise_quantize_bytes`). On H100 the row-wise kernel is PyTorch's CUTLASS RowwiseScaledMM.cu
#: (pytorch/pytorch#125204), which carries FBGEMM's ``f8f8bf16_rowwise_impl`` with its ``Transposed`` column-major
#: output; FBGEMM's published timings of that kernel against cuBLAS's per-tensor FP8 GEMM, fast accumulation, one
#: 700 W H100 80GB (pytorch/FBGEMM#2764, lw, 2024-06-21, the PR adding the column-major output; its whole table read
#: in the commit that landed it, pytorch/FBGEMM@d4dfa64c92 "Make CUTLASS rowwise fp8 faster", medians in us, row-wise
#: after the PR / cuBLAS: m,n,k = 4176,12288,4096: 317.47 / 310.302; 4176,4096,12288: 363.486 / 330.399;
#: 3456,6144,4096: 132.063 / 131.935; 3456,4096,6144: 140.447 / 138.687; 3456,4096,4096: 91.583 / 89.279;
#: 3456,12288,4096: 264.734 / 255.646; 3456,4096,12288: 282.91 / 285.151; 4176,6144,4096: 158.719 / 156.543;
#: 4176,4096,6144: 180.542 / 167.487) are 0.992-1.100x the time, geometric mean over the 9 shapes 1.0308:
#: hopper 1 / 1.0308 = 0.970 (before, 1 / 1.0335 from the first 4 shapes, all a truncated copy of the PR held).
#: Consistent with the same author's sweep on PyTorch main, February 2025 (pytorch/pytorch#147971: with fast-accum
#: "most shapes are within 90-100% of tensor-wise efficiency, but there's a long tail going down to 50%", a figure
#: without a table). Other
#: families 1: no published row-wise vs per-tensor timing found for MI300X's hipBLASLt row-wise path
#: (pytorch/pytorch#144432) nor for Blackwell's CUTLASS one. Assumption, stated: the nine shapes' ratio holds at other
#: shapes (pytorch/pytorch#153809 reports a drop-off at K >= 16384, not quantified).
ROWWISE_FORWARD_GEMM_FACTORS: dict[str, float] = {"hopper": 1.0 / 1.0308}


def rowwise_forward_gemm_factor(family: str) -> float:
    """The fraction of the fp8 curve's rate a torchao row-wise recipe's forward GEMMs run at on this accelerator
    family (:data:`ROWWISE_FORWARD_GEMM_FACTORS`; 1 for a family without a published timing)."""
    return float(ROWWISE_FORWARD_GEMM_FACTORS.get(str(family).lower(), 1.0))


def rowwise_quantize_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, recipe: str,
                           tp: ArrayLike = 1, cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0,
                           mlp_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HBM bytes (forward, backward, weights) that torchao's float8 row-wise recipes add to one dense transformer
    layer on one GPU per micro-batch (weights 0: torchao casts each weight on every call, so its casts are in the
    forward and backward). Price with :func:`memory_time`.

    Source: torchao at pytorch/ao@4fc4068d6 (and @890e0ac8, the same code): torchao/float8/float8_linear.py
    ``matmul_with_hp_or_float8_args`` (lines 45-204: saves input and weight in BF16; forward casts input along
    dim -1 and the weight along dim 0 of W^T, one scale per output row; backward casts grad_output along dim -1 for
    dgrad, the weight along dim -1 of W^T, grad_output and the input along dim 0 for wgrad), config.py
    ``Float8LinearConfig.from_recipe_name`` (rowwise: every cast axiswise; rowwise_with_gw_hp: the weight for
    dgrad tensorwise, wgrad's two operands not cast, its GEMM in BF16), float8_ops.py ``addmm_float8_unwrapped``
    (backward GEMMs on the per-tensor kernel, then ``output *= post_inverse_scale``: one extra Inductor kernel per
    GEMM, pytorch/ao#2184). Bytes per element, eb = 2 read, 1 per FP8 copy written (scales: a few bytes a row):

        cast whose amax runs along the rows it writes (dim -1)        eb + 1     one pass (row reduction + cast)
        cast with a column or whole-tensor amax (dim 0, tensorwise)   2 eb + 1   an amax pass, then the cast
        rescale of a backward GEMM's 16-bit output                    2 eb       read, write

    per tensor of each linear (X its input, dY its output gradient, W its weight; a dgrad output has X's shape,
    a wgrad output W's):

        rowwise             forward (eb + 1)(X + W)
                            backward X (2 eb + 1) + dY (eb + 1 + 2 eb + 1) + W (2 eb + 1) + 2 eb (X + W)
        rowwise_with_gw_hp  forward (eb + 1)(X + W)
                            backward dY (eb + 1) + W (2 eb + 1) + 2 eb X      (wgrad reads X and dY in BF16)

    At eb = 2: rowwise X 3 + 5 + 4, dY 8, W 3 + 5 + 4; torchao's own roofline model (torchao/testing/training/
    roofline_utils.py ``get_tensor_memory_traffic_ovhd_s`` at @4fc4068d6, casts only) counts the same 8 for an
    input or grad_output and 10 for a weight (a BF16 transpose, then a row cast, where this counts a column amax
    pass). Each cast writes the layout its GEMM reads (no transposed copy). Tensors per layer (T = b s / cp
    tokens, t = tp), as :func:`fp8_quantize_bytes` counts them: each attention matrix's input (the O projection's
    T a d_v / t) and output gradient, the MLP's FC1 (T h in, T (1|2) f / t out) and FC2 (T f / t in, T h out),
    their weights / t (MLA down-projections whole); torchtitan's separate wq / wk / wv and w1 / w3 linears cast
    one input, counted once (the casts of one tensor are one computation in the compiled graph). ``mlp_only``:
    the MLP's tensors alone."""
    _check_recipe(recipe)
    if recipe not in ROWWISE_FP8_RECIPES:
        raise InputError(f"fp8 recipe {recipe!r} is not a row-wise recipe", where="training.fp8_recipe",
                         allowed="rowwise or rowwise_with_gw_hp")
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    eb = _pos("elem_bytes", elem_bytes)
    T = b * s / _pos("cp", cp)
    h, f = sh.hidden, sh.ffn_hidden
    mats_up = np.where(sh.gated_mlp, 2.0, 1.0)
    # (X, dY, W) elements of the layer's linears on this GPU
    x = T * h + T * f / t
    dy = T * mats_up * f / t + T * h
    w = (mats_up + 1.0) * h * f / t
    for name, n_in, n_out, split in ([] if mlp_only else attention_matrices(sh)):
        on = np.where(n_in * n_out > 0, 1.0, 0.0)
        div = t if split else 1.0
        x = x + on * T * (n_in / t if name == "o" else n_in)
        dy = dy + on * T * (n_out if name == "o" else n_out / div)
        w = w + on * n_in * n_out / div
    row, col, rescale = eb + 1.0, 2.0 * eb + 1.0, 2.0 * eb
    fwd = row * (x + w)
    if recipe == "rowwise":
        bwd = col * x + (row + col) * dy + col * w + rescale * (x + w)
    else:
        bwd = row * dy + col * w + rescale * x
    return fwd, bwd, np.zeros_like(fwd)


def _fp8_tensor_bytes(recipe: str, n_local: ArrayLike, n_gathered: ArrayLike, *, from_norm: bool,
                      transpose_copy: ArrayLike, eb: ArrayLike, weight: bool = False) -> np.ndarray:
    """HBM bytes to quantize one 16-bit tensor of ``n_local`` elements on this GPU into what an FP8 GEMM's forward
    and backward read, beyond what the BF16 run moves (see :func:`fp8_quantize_bytes`). ``n_gathered`` > ``n_local``
    when the FP8 copy is all-gathered over sequence-parallel ranks before its GEMMs; ``from_norm``: the tensor is
    a LayerNormLinear's norm output; ``transpose_copy``: the GEMMs need a transposed column-wise copy (Hopper);
    ``weight``: a weight (blockwise: 128 x 128 tiles, not 1 x 128)."""
    n, n_all = np.asarray(n_local, dtype=float), np.asarray(n_gathered, dtype=float)
    x = np.asarray(transpose_copy, dtype=bool)
    gathered = n_all > n
    if recipe == "mxfp8":  # one kernel: read eb, write both copies with their scales (gathered as MXFP8 both ways)
        return (eb + 2.0 * (1.0 + 1.0 / MXFP8_BLOCK)) * n
    if recipe == "nvfp4":  # an amax kernel (read eb), then one cast kernel: read eb, write both NVFP4 copies
        return (2.0 * eb + 2.0 * NVFP4_COPY_BYTES) * n
    if recipe == "blockwise":
        # one kernel, tile amax in-kernel: read eb, write the row-wise (+ transposed) copy with its tile scales;
        # gathered (SP): both copies quantized on the local shard and gathered in FP8 (X: the row-wise copy in the
        # forward, the saved column-wise one in the backward, linear.py backward_input_needs_gather; dY: both in
        # the backward), the gathered column-wise data de-interleaved (swap_first_dims: read 1 + write 1 a
        # gathered element, counted here with the forward casts)
        copy = BLOCKWISE_WEIGHT_COPY_BYTES if weight else BLOCKWISE_COPY_BYTES
        return (eb + np.where(x, 2.0, 1.0) * copy) * n + np.where(x & gathered, 2.0 * n_all, 0.0)
    fused_norm = recipe == "delayed" and from_norm  # norm kernel writes FP8 (1 B) instead of BF16 (eb)
    amax = eb if (recipe == "tensorwise" and not from_norm) else 0.0  # separate amax pass reads the input once
    row = (1.0 - eb) if fused_norm else (eb + 1.0)
    # column-wise (Hopper only): fused into the cast (+1 write), or a transpose kernel (read 1 + write 1) after a
    # delayed-scaling norm, or over the gathered tensor after the all-gather of the row-wise copy
    col = np.where(gathered, 2.0 * n_all, (2.0 if fused_norm else 1.0) * n)
    return (amax + row) * n + np.where(x, col, 0.0)


def fp8_quantize_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, recipe: str = "delayed",
                       transpose_copy: ArrayLike = True, tp: ArrayLike = 1, cp: ArrayLike = 1, ep: ArrayLike = 1,
                       etp: ArrayLike | None = None, sequence_parallel: ArrayLike = False, moe: bool = False,
                       elem_bytes: ArrayLike = 2.0, fp8_params: ArrayLike = False,
                       attention_recipe: str | None = None, latent_recipe: str | None = None,
                       mlp_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HBM bytes (forward, backward, weights) that Transformer Engine's FP8 quantization adds to one layer on one
    GPU: forward and backward per micro-batch, weights per optimizer step. Price with :func:`memory_time`.

    Source: Transformer Engine at NVIDIA/TransformerEngine@d0067d0 (2.20.0.dev0), pytorch/module/linear.py,
    layernorm_linear.py, grouped_linear.py, base.py grad_output_preprocess, distributed.py _all_gather_fp8,
    csrc/extensions/normalization.cpp, csrc/quantizer.cpp, common/cast/dispatch/quantize.cuh. Every TE linear
    (Megatron-Core's TE layer spec: QKV and FC1 are TELayerNormColumnParallelLinear, proj and FC2 TERowParallel-
    Linear, routed experts TEGroupedLinear, shared experts and MoE layers' FC1 without a fused norm) quantizes
    its 16-bit input X in the forward (row-wise copy for the forward GEMM, column-wise for the wgrad GEMM) and its
    output gradient dY in the backward (row-wise for dgrad, column-wise for wgrad), in one kernel each
    (cast_transpose / quantize_mxfp8). Bytes per element of X or dY (eb = 2 read, 1 per FP8 copy written):

        delayed     eb + 1 (+1 transposed copy)              amax fused in the cast kernel (delayed scale)
        tensorwise  eb (amax pass) + eb + 1 (+1 transposed)  Float8CurrentScalingQuantizer: nvte_compute_amax,
                                                             then nvte_quantize_v2 read the input twice
        mxfp8       eb + 2 (1 + 1/32)                        row- and column-wise copies, 1 E8M0 scale per 32
        blockwise   eb + (1 + 4/128) (+(1 + 4/128))          Float8BlockQuantizer: one kernel, an fp32 scale per
                                                             1 x 128 tile (W: 128 x 128, 1 + 4/128^2 a copy);
                                                             docs/model.md#fp8-blockwise
        nvfp4       eb (amax) + eb + 2 (1/2 + 1/16)          NVFP4Quantizer::quantize_impl: an amax kernel, then
                                                             one kernel writes both E2M1 copies, 1 E4M3 scale
                                                             per 16 (docs/model.md#nvfp4; RHT on the column-wise
                                                             copy of X and dY, 2D 16x16 scales for W)
    Fusions: a LayerNormLinear's norm emits FP8 itself under delayed scaling (writes 1 byte instead of eb: 1 - eb,
    plus a transpose kernel, 2, on Hopper: rmsnorm_api.cpp) and computes the amax under tensorwise (no amax
    pass: FUSED_NORM_AMAX_FP8); MXFP8 runs the norm unfused (NVTE_NORM_FWD_USE_CUDNN unset) and quantizes after.
    The transposed copy exists only where FP8 GEMMs need the TN layout (``transpose_copy``: Hopper; Blackwell
    sm_100 runs non-TN FP8 GEMMs on the one copy, nvte_is_non_tn_fp8_gemm_supported). With sequence parallelism
    a column-parallel input and a row-parallel dY are quantized on the local shard (row-wise only, per-tensor
    recipes) and all-gathered in FP8; the transposed copy is then made from the gathered tensor (2 bytes per
    gathered element, _all_gather_fp8 ``_create_transpose``); MXFP8 gathers both copies.

    Tensors per layer (T = b s / cp tokens; t = tp; X local = T n_in / t with SP for a column-parallel input):
        attention  X: each matrix's input (proj: T a d_v / t, bf16); dY: T n_out / t (proj: T h, gathered w/ SP)
        dense MLP  X: FC1 T h (norm), FC2 T f / t; dY: FC1 T (1|2) f / t, FC2 T h (gathered with SP)
        MoE        routed experts (E/ep of them, N = ep u T k / (E t) tokens each, u = etp): X N h and N f_e / u,
                   dY N (1|2) f_e / u and N h; shared experts as a dense MLP of width shared f_e whose FC1 input
                   is not a norm output (separate pre-MLP norm); the router stays BF16 (no FP8 cast)
        LatentMoE  the routed experts' X and dY at the latent width l instead of h (X N l, dY N l); the duplicated
                   TELinear projections on the layer's local tokens T' (T/t with SP, T without): X T' h and T' l,
                   dY T' l and T' h, weights 2 h l whole on each rank (docs/model.md#latent-moe)
    Weights: each linear weight W on this GPU is quantized once per step (Megatron-Core forward_step sets
    is_first_microbatch, TE caches the FP8 weight for the step's later micro-batches): W (eb + 1 (+1)) bytes,
    + W eb for the tensorwise amax pass, W (eb + 2 (1 + 1/32)) for mxfp8, W (2 eb + 2 (1/2 + 1/16)) for nvfp4.
    ``fp8_params`` (Megatron's fp8_param_gather, per-tensor recipes): the weights are FP8 parameters already, so
    the forward casts none; the optimizer quantizes its master shard (:func:`fp8_param_quantize_bytes`, priced
    with the optimizer step), and on an accelerator that needs the transposed copy TE makes it from the gathered
    FP8 weight once per step (Megatron-Core ``_ParamAndGradBuffer.finish_param_sync`` -> TE
    ``post_all_gather_processing`` -> ``Float8Tensor._create_transpose``; NVIDIA/Megatron-LM@d98e8a64dd
    param_and_grad_buffer.py, NVIDIA/TransformerEngine@d0067d0 pytorch/tensor/utils.py): weights = W (1 + 1)
    bytes with the transposed copy, 0 without; nvfp4 (Megatron's fp4_param_gather: NVFP4 parameters) W 2 (1/2 +
    1/16), the column-wise copy made from the gathered row-wise one (:func:`held_param_step_bytes`). mxfp8
    ignores it (MXFP8 parameters are gathered in BF16 and quantized after the gather: the cast above stays).
    Per module (training.module_precision, docs/model.md#module-precision): ``attention_recipe`` (the attention
    block's linears) and ``latent_recipe`` (LatentMoE's two projections) quantize their X, dY and W by their own
    recipe; "" = BF16, no cast (the module is outside the FP8 / FP4 autocast); None = ``recipe``.
    ``mlp_only``: the MLP block's tensors alone (the dense MLP, or with ``moe`` the MoE block), no attention
    matrix: what a recomputed MLP block quantizes again (docs/model.md#recompute-mlp).
    Not counted here: the amax all-reduces (delayed scaling's: :func:`delayed_amax_reduction`, priced by the step;
    current scaling's over TP: not priced) and scale swizzles for the GEMM.
    torchao's row-wise recipes (:data:`ROWWISE_FP8_RECIPES`, dense layers only): :func:`rowwise_quantize_bytes`."""
    _check_recipe(recipe)
    if recipe in ROWWISE_FP8_RECIPES:
        if moe:
            raise InputError(f"fp8 recipe {recipe} prices torchao's Float8Linear on a dense layer's nn.Linear "
                             "modules, not MoE experts", where="training.fp8_recipe",
                             allowed=f"a dense workload, or {TE_FP8_RECIPES_TEXT}")
        return rowwise_quantize_bytes(sh, micro_batch=micro_batch, seq_len=seq_len, recipe=recipe, tp=tp, cp=cp,
                                      elem_bytes=elem_bytes, mlp_only=mlp_only)
    att_r = recipe if attention_recipe is None else attention_recipe
    lat_r = recipe if latent_recipe is None else latent_recipe
    for r in (att_r, lat_r):
        if r:
            _check_recipe(r)
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    e = _pos("ep", ep)
    eb = _pos("elem_bytes", elem_bytes)
    sp = np.asarray(sequence_parallel, dtype=bool)
    T = b * s / _pos("cp", cp)
    h = sh.hidden
    mats_up = np.where(sh.gated_mlp, 2.0, 1.0)

    def q(n_local: ArrayLike, n_gathered: ArrayLike | None = None, from_norm: bool = False,
          r: str | None = None, weight: bool = False) -> np.ndarray:
        r = recipe if r is None else r
        if not r:  # a BF16 module: no cast
            return np.zeros_like(np.asarray(n_local, dtype=float) * T)
        return _fp8_tensor_bytes(r, n_local, n_local if n_gathered is None else n_gathered,
                                 from_norm=from_norm, transpose_copy=transpose_copy, eb=eb, weight=weight)

    def col_input(n_in: ArrayLike, from_norm: bool, r: str | None = None) -> np.ndarray:
        """A column-parallel linear's input: the local shard with SP (gathered to T n_in), else all T n_in."""
        return q(np.where(sp, T * n_in / t, T * n_in), T * n_in, from_norm, r)

    def row_grad(r: str | None = None) -> np.ndarray:
        """A row-parallel linear's dY (T x h): the local shard with SP (gathered), else all of it."""
        return q(np.where(sp, T * h / t, T * h), T * h, r=r)

    def mlp(width: ArrayLike, in_from_norm: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fwd = col_input(h, in_from_norm) + q(T * width / t)
        bwd = q(T * mats_up * width / t) + row_grad()
        return fwd, bwd, (mats_up + 1.0) * h * width / t

    fwd = np.zeros_like(T)
    bwd = np.zeros_like(T)
    weights = np.zeros_like(T)  # elements of the run's-recipe weights
    other_w = np.zeros_like(T)  # cast bytes of the weights of modules at their own recipe
    att_w = np.zeros_like(T)
    for name, n_in, n_out, split in ([] if mlp_only else attention_matrices(sh)):
        on = np.where(n_in * n_out > 0, 1.0, 0.0)
        if name == "o":
            fwd = fwd + on * q(T * n_in / t, r=att_r)
            bwd = bwd + on * row_grad(att_r)
        elif split:
            fwd = fwd + on * col_input(n_in, True, att_r)
            bwd = bwd + on * q(T * n_out / t, r=att_r)
        else:  # MLA down-projections: replicated over TP, every rank quantizes all T tokens
            fwd = fwd + on * q(T * n_in, from_norm=True, r=att_r)
            bwd = bwd + on * q(T * n_out, r=att_r)
        att_w = att_w + on * n_in * n_out / (t if split else 1.0)
    if att_r == recipe:
        weights = weights + att_w
    else:
        other_w = other_w + q(att_w, r=att_r, weight=True)
    if moe:
        k, E, fe = sh.moe_top_k, np.maximum(sh.moe_experts, 1.0), sh.moe_ffn_hidden
        u = t if etp is None else _pos("etp", etp)
        rows = np.maximum(e * u * T * k / (E * t), 1.0) * E / e  # routed tokens on this GPU's experts
        w, lat = sh.moe_width, sh.moe_latent  # the experts' token width: h, or LatentMoE's l
        fwd = fwd + q(rows * w) + q(rows * fe / u)
        bwd = bwd + q(rows * mats_up * fe / u) + q(rows * w)
        weights = weights + (E / e) * (mats_up + 1.0) * w * fe / u
        # LatentMoE's duplicated TELinear projections on the local tokens: inputs X (h, then l), output gradients
        # dY (l, then h), weights 2 h l whole on every TP rank
        on = np.where(lat > 0, 1.0, 0.0)
        t_lat = np.where(sp, T / t, T)
        fwd = fwd + on * (q(t_lat * h, r=lat_r) + q(t_lat * lat, r=lat_r))
        bwd = bwd + on * (q(t_lat * lat, r=lat_r) + q(t_lat * h, r=lat_r))
        if lat_r == recipe:
            weights = weights + 2.0 * h * lat
        else:
            other_w = other_w + q(2.0 * h * lat + 0 * T, r=lat_r, weight=True)
        shared = sh.moe_shared_experts * fe
        on = np.where(shared > 0, 1.0, 0.0)
        sf, sb, sw = mlp(np.maximum(shared, 1.0), False)
        fwd, bwd, weights = fwd + on * sf, bwd + on * sb, weights + on * sw
    else:
        df, db, dw = mlp(sh.ffn_hidden, True)
        fwd, bwd, weights = fwd + df, bwd + db, weights + dw
    # weights already quantized parameters: their per-step copy only (held_param_step_bytes; mxfp8 casts after
    # the gather)
    held = np.asarray(fp8_params, dtype=bool) & (recipe != "mxfp8")
    return fwd, bwd, np.where(held, weights * held_param_step_bytes(recipe, transpose_copy),
                              q(weights, weight=True)) + other_w


def held_param_step_bytes(recipe: str, transpose_copy: ArrayLike) -> np.ndarray:
    """HBM bytes per local weight element that Transformer Engine moves once per step after the parameter
    all-gather, for weights held as quantized parameters (Megatron-Core ``_ParamAndGradBuffer._post_param_sync``
    -> TE ``post_all_gather_processing``; NVIDIA/Megatron-LM@d1410e15e1 param_and_grad_buffer.py L279-309,
    NVIDIA/TransformerEngine@71bbefb pytorch/tensor/utils.py L981-1088, the same at v2.16 4220403e8):

        per-tensor FP8 (fp8_param_gather)  Float8Tensor ``_create_transpose``: read 1 + write 1 where the GEMMs
                                           need the transposed copy (Hopper), else 0
        nvfp4 (fp4_param_gather)           ``_nvfp4_2d_multi_tensor_transpose``: the column-wise copy (K x M/2
                                           bytes and its E4M3 scales) from the gathered row-wise one, a plain
                                           transpose under 2D 16 x 16 weight scales: read 1/2 + 1/16, write the same,
                                           on every accelerator (NVFP4 GEMMs take TN only)"""
    if recipe == "nvfp4":
        return np.full(np.shape(transpose_copy), 2.0 * NVFP4_COPY_BYTES)
    return np.where(np.asarray(transpose_copy, dtype=bool), 2.0, 0.0)


def mamba_out_proj_quantize_bytes(md: mamba.MambaDims, *, micro_batch: ArrayLike, seq_len: ArrayLike,
                                  recipe: str, tp: ArrayLike = 1, cp: ArrayLike = 1,
                                  sequence_parallel: ArrayLike = False, transpose_copy: ArrayLike = True,
                                  elem_bytes: ArrayLike = 2.0, fp8_params: ArrayLike = False
                                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HBM bytes (forward, backward, weights) of quantizing one Mamba-2 mixer's out_proj (TERowParallelLinear,
    d_inner -> h) by ``recipe`` ("" = BF16: 0), per :func:`fp8_quantize_bytes`'s per-tensor rule
    (:func:`_fp8_tensor_bytes`; T = b s / cp, t = tp):

        X  = T d_in / t (the SSD's gated output, local)     dY = T h (the local shard T h / t with SP, gathered)
        W  = h d_in / t

    Used for a run whose out_proj runs at another recipe than its other linears (training.module_precision
    mamba_out_proj): the step adds (this at the module's recipe) - (this at the run's) to its cast estimate
    (docs/model.md#module-precision). ``fp8_params`` (fp8_param_gather, as :func:`fp8_quantize_bytes`'): a
    per-tensor recipe's weight is FP8 already, W = 2 h d_in / t with the transposed copy, 0 without; nvfp4
    (fp4_param_gather) W = 2 (1/2 + 1/16) h d_in / t (:func:`held_param_step_bytes`); mxfp8 ignores it."""
    if not recipe:
        z = np.zeros_like(_pos("micro_batch", micro_batch) * _pos("seq_len", seq_len))
        return z, z, z
    _check_recipe(recipe)
    t = _pos("tp", tp)
    T = _tokens(micro_batch, seq_len, cp)
    eb = _pos("elem_bytes", elem_bytes)
    sp = np.asarray(sequence_parallel, dtype=bool)
    h, d_in = md.hidden, md.d_inner

    def q(n: ArrayLike, n_all: ArrayLike | None = None, weight: bool = False) -> np.ndarray:
        return _fp8_tensor_bytes(recipe, n, n if n_all is None else n_all, from_norm=False,
                                 transpose_copy=transpose_copy, eb=eb, weight=weight)

    fwd = q(T * d_in / t)
    bwd = q(np.where(sp, T * h / t, T * h), T * h)
    w = h * d_in / t + 0 * T
    held = np.asarray(fp8_params, dtype=bool) & (recipe != "mxfp8")
    return fwd, bwd, np.where(held, w * held_param_step_bytes(recipe, transpose_copy), q(w, weight=True))


#: Fixed device time of one small memory-bound kernel beyond its bytes (seconds): the intercept t0 of
#: time = t0 + bytes / bw fitted to scalemodel's own H200 sweep of ``torch`` FP8 casts (hardware/measurements/
#: memory_kernels.yaml SM-H200, kernel cast_fp8, 7 sizes 1 MiB-2 GiB, replayed from a CUDA graph so that no host
#: launch gap is included: the kernel's own ramp and tail), scripts/fit_kernel_overhead.py: 1.78 us (the median
#: over the sweep's kernels 1.83 us). Borrowed by every GPU (no graph-replayed series elsewhere; the Liger
#: do_bench series, which include the launch, give 7.0 us on H100 and 9.7 us on A100: an upper bound).
KERNEL_FIXED_S = 1.78e-6

#: Kernels Transformer Engine launches per local expert to quantize one routed-expert tensor (the input X of FC1 or
#: FC2 in the forward, the output gradient dY of FC2 or FC1 in the backward), by recipe. ``GroupedLinear`` quantizes
#: the tensor split by expert (``tex.split_quantize(inp_view, m_splits, quantizers)``,
#: transformer_engine/pytorch/module/grouped_linear.py, and for dY in its backward), and ``split_quantize``
#: (pytorch/csrc/extensions/cast.cpp ``multi_tensor_quantize_impl``, NVIDIA/TransformerEngine@70f536662a = v2.9,
#: the TE of Megatron-Bridge 25.11) has a fused multi-tensor kernel only for delayed scaling
#: (``nvte_multi_cast_transpose``, one launch for all experts); every other recipe quantizes expert by expert:
#: tensorwise ``Float8CurrentScalingQuantizer::quantize_impl`` (pytorch/csrc/quantizer.cpp) runs
#: ``nvte_compute_amax``, ``nvte_compute_scale_from_amax`` and ``nvte_quantize_v2``: 3 kernels per expert (no amax
#: reduction: GroupedLinear's quantizers get none, grouped_linear.py ``_customize_quantizers_float8_current_scaling``);
#: mxfp8 one ``quantize`` (row- and column-wise copies and scales in one kernel) per expert. nvfp4: 0, grouped like
#: delayed: ``split_quantize_nvfp4_impl_with_rht_helper`` (cast.cpp at NVIDIA/TransformerEngine@d0067d0da6) runs one
#: ``nvte_group_hadamard_transform_amax`` and one ``nvte_group_hadamard_transform_cast_fusion`` over all experts.
#: blockwise: 1, as mxfp8 (``Float8BlockQuantizer::quantize`` is one ``nvte_quantize_v2``, which writes both
#: copies and their tile scales, common/transpose/quantize_transpose_vector_blockwise.cu; split_quantize has no
#: multi-tensor path for it).
EXPERT_QUANTIZE_KERNELS = {"delayed": 0.0, "tensorwise": 3.0, "mxfp8": 1.0, "nvfp4": 0.0, "blockwise": 1.0}


def fp8_expert_quantize_kernels(recipe: str, sh: Shape, *, ep: ArrayLike = 1) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) kernels one MoE layer of an fp8 run launches on one GPU per micro-batch to quantize its
    routed experts' tensors expert by expert, beyond the one whole-tensor quantization a dense linear launches (whose
    fixed time the step model does not price: its casts are bytes only). Each carries the fixed time
    :data:`KERNEL_FIXED_S` beyond the bytes :func:`fp8_quantize_bytes` already prices (price: kernels x
    KERNEL_FIXED_S)::

        forward   2 tensors (X of FC1, X of FC2)   x  (E/ep - 1)  x  n_recipe
        backward  2 tensors (dY of FC2, dY of FC1) x  (E/ep - 1)  x  n_recipe

    with E/ep local experts (at least 1) and n_recipe = :data:`EXPERT_QUANTIZE_KERNELS` (tensorwise 3, mxfp8 1;
    delayed 0: one fused multi-tensor launch per tensor, as in a dense layer). With E = 128 experts over ep 8
    (Qwen3-30B-A3B), tensorwise: 2 x 15 x 3 = 90 kernels each way, 0.16 ms at 1.78 us.

    Counted apart: the experts' extra GEMM calls (one cuBLAS call per expert on TE's 4 compute streams,
    :func:`expert_gemm_calls`). Not counted: the weights' per-step casts (spread over the step's micro-batches), and
    the host time to issue the kernels (docs/model.md#host)."""
    _check_recipe(recipe)
    per_way = 2.0 * _extra_local_experts(sh, ep) * EXPERT_QUANTIZE_KERNELS[recipe]
    return per_way, per_way.copy()


def expert_fc2_original_input_bytes(recipe: str, sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike,
                                    transpose_copy: ArrayLike = True, tp: ArrayLike = 1, cp: ArrayLike = 1,
                                    ep: ArrayLike = 1, etp: ArrayLike | None = None,
                                    elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one MoE layer's routed experts move on one GPU per micro-batch, beyond
    :func:`fp8_quantize_bytes`, when their FC2 keeps its 16-bit input for the weight gradient (signed: the forward's
    is a saving). Priced where an fp8 / fp4 run recomputes the experts' activation (selective ``moe_act``).

    Source: Megatron-Core ``TEGroupedMLP.__init__`` calls ``set_save_original_input(self.linear_fc2)`` when
    ``activation_recompute`` (selective, ``"moe_act" in recompute_modules``) ``and (config.fp8 or config.fp4)``
    (NVIDIA/Megatron-LM@0d8e0714cd megatron/core/transformer/moe/experts.py lines 832-835, the Megatron-LM of
    Megatron-Bridge 25.11; lines 273-276 at d98e8a64dd), so that the activation's ``CheckpointWithoutOutput`` can free
    the tensor FC2 saved. Transformer Engine's ``GroupedLinear`` then quantizes FC2's input in the forward for the
    forward GEMM only (``columnwise = ... and not save_original_input``) and in the backward quantizes the saved
    16-bit input again, expert by expert (``tex.split_quantize``) before the wgrad GEMMs: per-tensor quantizers
    (``Float8Quantizer``, ``Float8CurrentScalingQuantizer``) both copies, every other one (MXFP8, blockwise, NVFP4)
    the column-wise copy alone (NVIDIA/TransformerEngine@70f536662a = release_v2.9
    transformer_engine/pytorch/module/grouped_linear.py lines 94-102 and 392-410; the same at d0067d0da6,
    ``_GroupedLinear.forward`` lines 704-713 and ``backward`` lines 1417-1429). Delayed scaling refuses the flag
    (``ValueError("DelayedScaling recipe is not supported with save_original_input")``, lines 94-95): 0 here.

    Per element of FC2's input (``n = R f_e / u``, the routed rows ``R`` of :func:`fp8_quantize_bytes`; eb the 16-bit
    width read, ``x`` the transposed copy on Hopper, the per-copy bytes of :func:`_fp8_tensor_bytes`)::

        recipe       forward (column-wise copy not written)   backward (quantized again)
        tensorwise   -x                                       eb (amax) + eb + 1 + x
        mxfp8        -(1 + 1/32)                              eb + (1 + 1/32)
        blockwise    -x (1 + 4/128)                           eb + (1 + 4/128)
        nvfp4        -(1/2 + 1/16)                            eb (amax) + eb + (1/2 + 1/16)

    The backward's per-expert quantize kernels (``(E/ep - 1) n_recipe`` beyond one) are counted apart
    (:func:`fp8_expert_quantize_kernels`' one-tensor share)."""
    _check_recipe(recipe)
    T = _tokens(micro_batch, seq_len, cp)
    u = _pos("tp", tp) if etp is None else _pos("etp", etp)
    eb = _pos("elem_bytes", elem_bytes)
    n = _routed_rows(sh, T, tp, ep, etp) * sh.moe_ffn_hidden / u  # the routed rows fp8_quantize_bytes quantizes
    fwd, bwd = original_input_bytes_per_element(recipe, transpose_copy, eb)
    return fwd * n, bwd * n


def original_input_bytes_per_element(recipe: str, transpose_copy: ArrayLike = True,
                                     elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes per input element, beyond :func:`fp8_quantize_bytes`, of a Transformer Engine
    linear whose ``save_original_input`` is set (the one table of :func:`expert_fc2_original_input_bytes` and
    :func:`proj_original_input_bytes`; signed: the forward's is a saving). TE then quantizes the input in the forward
    for the forward GEMM only (the column-wise copy not written) and, in the backward, quantizes the saved 16-bit
    input again before the wgrad GEMM: per-tensor quantizers (``supports_only_rowwise_all_gather``) both copies, the
    others (MXFP8, blockwise, NVFP4) the column-wise copy alone (NVIDIA/TransformerEngine@70f536662a = release_v2.9
    transformer_engine/pytorch/module/linear.py lines 221-226 and 362-363 forward, 615-633 backward;
    grouped_linear.py lines 94-102 and 392-410). ``x`` = 1 where the GEMMs need the transposed copy (Hopper), eb the
    16-bit width read::

        recipe       forward            backward (quantized again)
        tensorwise   -x                 eb (amax) + eb + 1 + x
        mxfp8        -(1 + 1/32)        eb + (1 + 1/32)
        blockwise    -x (1 + 4/128)     eb + (1 + 4/128)
        nvfp4        -(1/2 + 1/16)      eb (amax) + eb + (1/2 + 1/16)

    Delayed scaling refuses the flag (linear.py lines 170-173, ``assert not isinstance(input_quantizer,
    Float8Quantizer)``; grouped_linear.py lines 94-95): 0, as for a recipe outside TE."""
    _check_recipe(recipe)
    eb = _pos("elem_bytes", elem_bytes)
    x = np.where(np.asarray(transpose_copy, dtype=bool), 1.0, 0.0)
    if recipe == "tensorwise":
        fwd, bwd = -x, 2.0 * eb + 1.0 + x
    elif recipe == "mxfp8":
        copy = 1.0 + 1.0 / MXFP8_BLOCK
        fwd, bwd = -copy + 0.0 * x, eb + copy + 0.0 * x
    elif recipe == "blockwise":
        fwd, bwd = -x * BLOCKWISE_COPY_BYTES, eb + BLOCKWISE_COPY_BYTES + 0.0 * x
    elif recipe == "nvfp4":
        fwd, bwd = -NVFP4_COPY_BYTES + 0.0 * x, 2.0 * eb + NVFP4_COPY_BYTES + 0.0 * x
    else:  # delayed (refused by TE with the flag), or a recipe without TE's linears
        fwd, bwd = 0.0 * x, 0.0 * x
    return fwd + 0.0 * eb, bwd + 0.0 * eb


#: The recipes under which Megatron-Core sets ``save_original_input`` on the attention's linear_proj:
#: ``config.fp8`` with ``config.fp8_recipe != 'delayed'`` (attention.py lines 207-218 at NVIDIA/Megatron-LM@0d8e0714cd)
#: and, from core_v0.16.0 (e8b9df156d), ``config.fp4`` (lines 428-444 at d98e8a64dd; which release has which:
#: specs.training.PROJ_ORIGINAL_INPUT_SINCE).
PROJ_ORIGINAL_INPUT_RECIPES = ("tensorwise", "mxfp8", "blockwise", "nvfp4")


def proj_original_input_bytes(recipe: str, sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike,
                              transpose_copy: ArrayLike = True, tp: ArrayLike = 1, cp: ArrayLike = 1,
                              elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one attention block's output projection (linear_proj) moves on one GPU per
    micro-batch, beyond :func:`fp8_quantize_bytes`, when it keeps its 16-bit input for the weight gradient (signed:
    the forward's is a saving); ``recipe`` the attention block's.

    Source: Megatron-Core ``Attention.__init__`` (and ``MultiLatentAttention.__init__``) calls
    ``set_save_original_input(self.linear_proj)`` when ``config.fp8 and config.fp8_recipe != 'delayed' and
    is_te_min_version("2.6.0dev0")`` and linear_proj is a TELinear ("the output of the fused core_attn is saved by
    itself, and linear_proj also saves the quantized tensor of this output", NVIDIA/Megatron-LM@0d8e0714cd
    megatron/core/transformer/attention.py lines 207-218, multi_latent_attention.py lines 179-189; introduced by
    781e765818, 2025-08-19, "Support recomputation for FP8 layernorm/moe_act/shared_experts", first in core_v0.14.0
    by its cherry-pick 08814e8f3b). linear_proj is row-parallel, its input the local ``T a d_v / t`` elements
    (T = b s / cp; no gather: ``backward_input_needs_gather`` is for column-parallel linears), priced per element by
    :func:`original_input_bytes_per_element`. From core_v0.16.0 the call is made for ``config.fp4`` too (``or
    (self.config.fp4 and is_te_min_version("2.7.0.dev0"))``, e8b9df156d, 2025-11-18; attention.py lines 428-444 at
    d98e8a64dd), priced by the same table's nvfp4 row. A BF16 attention block (training.module_precision) or a
    recipe outside :data:`PROJ_ORIGINAL_INPUT_RECIPES`: 0."""
    _check_recipe(recipe)
    T = _tokens(micro_batch, seq_len, cp)
    n = T * sh.heads * sh.v_head_dim / _pos("tp", tp)
    if recipe not in PROJ_ORIGINAL_INPUT_RECIPES:
        return 0.0 * n, 0.0 * n
    fwd, bwd = original_input_bytes_per_element(recipe, transpose_copy, elem_bytes)
    return fwd * n, bwd * n


def shared_fc1_original_input_bytes(recipe: str, sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike,
                                    transpose_copy: ArrayLike = True, tp: ArrayLike = 1, cp: ArrayLike = 1,
                                    sequence_parallel: ArrayLike = False, gathered: ArrayLike = False,
                                    elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one MoE layer's shared experts' linear_fc1 moves on one GPU per micro-batch,
    beyond :func:`fp8_quantize_bytes`, when it keeps its 16-bit input for the weight gradient (signed: the forward's
    is a saving).

    Source: Megatron-Core ``SharedExpertMLP.__init__`` calls ``set_save_original_input(self.linear_fc1)`` when
    ``(config.fp8 and config.fp8_recipe != 'delayed' and is_te_min_version("2.6.0dev0")) or (config.fp4 and
    is_te_min_version("2.7.0.dev0"))``, linear_fc1 is a TELinear and selective recompute does not name
    ``shared_experts`` ("the output of pre_mlp_layernorm is saved by router, and the shared expert linear_fc1 also
    saves the quantized tensor of this output", NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/
    shared_experts.py lines 147-161; the fp8 part from 781e765818, core_v0.14.0 lines 65-86 with ``config.fp8``
    alone, which TE refuses for delayed scaling (0 here, :func:`original_input_bytes_per_element`); the fp4 part and
    ``fp8_recipe != 'delayed'`` from e8b9df156d, core_v0.16.0 lines 65-90). Transformer Engine's Linear then
    quantizes its input in the forward for the forward GEMM only and quantizes the saved 16-bit input again in the
    backward before gathering it for the wgrad GEMM (linear.py at 70f536662a lines 221-226, 362-363, 615-633), priced
    per element by
    :func:`original_input_bytes_per_element` on the input the linear holds: the local ``T h / t`` shard under
    sequence parallelism (T = b s / cp; column-parallel, gathered after the cast), the whole ``T h`` without it or
    where Megatron gathered it first (``gathered``: ``moe_shared_expert_overlap`` sets ``parallel_mode = None``,
    lines 163-172). 0 for a model without shared experts or a recipe outside :data:`PROJ_ORIGINAL_INPUT_RECIPES`
    (the same condition as the attention's linear_proj)."""
    _check_recipe(recipe)
    T = _tokens(micro_batch, seq_len, cp)
    split = np.asarray(sequence_parallel, dtype=bool) & ~np.asarray(gathered, dtype=bool)
    n = T * sh.hidden / np.where(split, _pos("tp", tp), 1.0)
    if recipe not in PROJ_ORIGINAL_INPUT_RECIPES or sh.moe_shared_experts <= 0 or sh.moe_layers <= 0:
        return 0.0 * n, 0.0 * n
    fwd, bwd = original_input_bytes_per_element(recipe, transpose_copy, elem_bytes)
    return fwd * n, bwd * n


def expert_gemm_calls(sh: Shape, *, ep: ArrayLike = 1) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) GEMM calls one MoE layer's routed experts launch on one GPU per micro-batch beyond the one
    call a dense linear makes per GEMM, each carrying the fixed time :data:`KERNEL_FIXED_S` beyond its price on the
    GEMM curve at the expert's own shape (:func:`gemm_time`, whose curve is fitted to one isolated GEMM per call)::

        forward   2 linears (FC1, FC2)                      x  (E/ep - 1)
        backward  2 linears x 2 GEMMs (dgrad and wgrad)     x  (E/ep - 1)

    Source: Transformer Engine's ``GroupedLinear`` runs ``general_grouped_gemm`` -> ``nvte_multi_tensor_gemm`` ->
    ``multi_stream_cublas_gemm``: one cuBLAS GEMM per local expert, round-robin over ``nvte_get_num_compute_streams()``
    (4) streams, for the forward and for each backward GEMM (transformer_engine/common/gemm/cublaslt_gemm.cu,
    NVIDIA/TransformerEngine@70f536662a = v2.9; the CUTLASS grouped kernel is opt-in, ``NVTE_USE_CUTLASS_GROUPED_GEMM``,
    Hopper BF16/FP16 only). The same loop runs NeMo Automodel's experts on Hopper (the automodel26 MoE rows):
    ``grouped_gemm.ops.gmm`` (fanshiqing/grouped_gemm v1.1.4 and its 1.1.4.post8, csrc/grouped_gemm.cu L400-411)
    takes its CUTLASS kernel only in an SM80 build and otherwise ``CublasGroupedGemm``, one cublasGemmEx per expert
    round-robin over 4 streams (L191-286; the weight gradient ``CublasGroupedGemmVariableK`` likewise; amhost35).
    Check (tests/test_expert_quantize_kernels.py, hardware/measurements/grouped_gemm.yaml):
    TE's own ``general_grouped_gemm`` benchmark on H100, BF16, TE 2.7 (NVIDIA/TransformerEngine pull request #2045),
    8 x (4096 x 768 x 2048) at 627.9 TFLOP/s and 16 x (2048 x 768 x 2048) at 553.9: the isolated H100 BF16 curve
    prices each expert GEMM 6 % and 16 % faster than measured, and with 1.78 us more per call within 3 %."""
    extra = _extra_local_experts(sh, ep)
    return 2.0 * extra, 4.0 * extra


def router_dtype_times(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, router_bytes: ArrayLike,
                       router_peak_flops: ArrayLike, peak_flops: ArrayLike, memory_bandwidth: ArrayLike,
                       gemm_max: ArrayLike = 0.75, gemm_half_dim: ArrayLike = 96.0,
                       memory_efficiency: ArrayLike = 0.85, tp: ArrayLike = 1, cp: ArrayLike = 1,
                       sequence_parallel: ArrayLike = False, elem_bytes: ArrayLike = 2.0
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds one MoE layer's router adds on one GPU per micro-batch when Megatron-Core computes
    its logits in fp32 or fp64 (``moe_router_dtype``; ``router_bytes`` rb 4 or 8, 0 = the activations' dtype: no
    extra), beyond the router GEMM :func:`layer_compute_time` prices at the 16-bit rate (``peak_flops``, the
    16-bit curve ``gemm_max`` / ``gemm_half_dim``; its backward 2 x that forward).

    Source: ``RouterGatingLinearFunction`` (megatron/core/transformer/moe/moe_utils.py, NVIDIA/Megatron-LM@9c5258f109,
    called by ``TopKRouter.gating``, router.py lines 119-124). fp32 with Transformer Engine: the forward is
    ``te_general_gemm(weight, inp, float32)``, the 16-bit operands with an fp32 output (the same 16-bit GEMM); the
    backward casts ``weight.to(fp32)`` and ``inp.to(fp32)`` and runs both gradients as fp32 x fp32 GEMMs
    (``te_general_gemm(..., grad=True)``), which Transformer Engine computes with ``CUBLAS_COMPUTE_32F_FAST_TF32``
    ("Use TF32 only for pure FP32 GEMM", transformer_engine/common/gemm/cublaslt_gemm.cu, NVIDIA/TransformerEngine
    v2.14; the same since v2.9 and TE's first release), then casts the input gradient back ``.to(input dtype)``.
    fp64 (or fp32 without Transformer Engine): ``torch.mm`` on ``inp.to(router_dtype)`` both ways, the input
    gradient cast back. With T tokens on the router (b s / cp, / tp under sequence parallelism, where each TP
    rank routes its own slice), h the hidden size, E the experts, G_x(T, E, h) :func:`gemm_time` at peak x and
    element bytes x, ``router_peak_flops`` P_r (the accelerator's TF32 peak for fp32, its FP64 peak for fp64)::

        fp32:  forward  0
               backward 2 (G_{P_r, 4} - G_{P_16, eb}) + 2 (4 + eb) T h / (HBM x memory efficiency)
        fp64:  forward  (G_{P_r, 8} - G_{P_16, eb}) + (8 + eb) T h / (HBM x eff)
               backward 2 (G_{P_r, 8} - G_{P_16, eb}) + 2 (8 + eb) T h / (HBM x eff)

    (the casts: ``inp.to(router_dtype)`` reads T h eb bytes and writes T h rb, the input gradient's cast back reads
    T h rb and writes T h eb). The TF32 / FP64 GEMMs are read on the 16-bit curve (AcceleratorSpec: ``gemm_max`` /
    ``gemm_half_dim`` describe 16-bit GEMMs, also used for tf32/fp32), at their own peak. Not counted (each under
    E / h of the casts' bytes): the weight's E h casts, the fp32 logits' extra T E bytes, the gradient of the weight
    cast back. Zero without experts, with rb 0, or where the router dtype is no wider than the activations
    (rb <= eb: an fp32 / tf32 run's fp32 router is the layer's own GEMM, its casts no-ops). Validation rows that set
    it: the Megatron-LM MoE recipes (examples/moe_recipes/*.yaml ``moe_router_dtype: fp32`` at 9c5258f109) and the
    Nemotron 3 Nano recipes of Megatron-Bridge; docs/model.md#router-dtype-compute."""
    rb = np.asarray(router_bytes, dtype=float)
    eb = _pos("elem_bytes", elem_bytes)
    t = _pos("tp", tp)
    T = _tokens(micro_batch, seq_len, cp) / np.where(
        np.asarray(sequence_parallel, dtype=bool), t, 1.0)
    # rb <= eb (an fp32 / tf32 run with an fp32 router): inp.to(fp32) and the gradient's .to(input dtype) are no-ops
    # and the GEMMs are the layer's own, so nothing is added (the delta would price the same GEMM at another peak)
    on = np.where((sh.moe_experts > 0) & (rb > eb), 1.0, 0.0)
    E, h = np.maximum(sh.moe_experts, 1.0), sh.hidden
    curve = dict(memory_bandwidth=memory_bandwidth, gemm_max=gemm_max, gemm_half_dim=gemm_half_dim,
                 memory_efficiency=memory_efficiency)
    wide = gemm_time(T, E, h, peak_flops=np.where(rb > 0, router_peak_flops, peak_flops),
                     elem_bytes=np.maximum(rb, eb), **curve)
    gemm_delta = wide - gemm_time(T, E, h, peak_flops=peak_flops, elem_bytes=eb, **curve)
    cast = memory_time((rb + eb) * T * h, memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    fp64 = np.where(rb > 4.0, 1.0, 0.0)
    fwd = on * fp64 * (gemm_delta + cast)
    bwd = on * 2.0 * (gemm_delta + cast)
    return np.asarray(fwd), np.asarray(bwd)


def _extra_local_experts(sh: Shape, ep: ArrayLike) -> np.ndarray:
    """Routed experts on one GPU beyond the first, max(E/ep, 1) - 1 (0 without experts): the calls a per-expert
    kernel launches beyond a dense layer's one."""
    local = np.maximum(np.maximum(sh.moe_experts, 0.0) / _pos("ep", ep), 1.0)
    return (local - 1.0) * np.where(sh.moe_experts > 0, 1.0, 0.0)


#: Amaxes of history Transformer Engine's delayed scaling keeps per FP8 tensor (DelayedScaling.amax_history_len):
#: NeMo's 1024 (the NeMo 1 launcher configs' ``fp8_amax_history_len: 1024`` and NeMo 2's ``bf16_with_fp8_mixed``
#: recipe, the settings of the delayed-scaling rows); Megatron-LM's default is 1 (TransformerConfig
#: ``fp8_amax_history_len``), which makes the update kernel's history traffic (:func:`delayed_amax_reduction`) about
#: 1000 x smaller, under a microsecond either way against the all-reduce's tens.
FP8_AMAX_HISTORY = 1024

#: Inputs ``torch.cat`` copies per kernel launch (pytorch/pytorch aten/src/ATen/native/cuda/Shape.cu
#: ``CAT_ARRAY_BATCH_SIZE = 128``) and modules Transformer Engine's bulk amax update takes per launch (32 KiB of kernel
#: parameters over a 32-byte ``AmaxParam``: ``AMAX_PARAMS_LIMIT`` = (32768 - 32) / 32 = 1023 with CUDA >= 12.1,
#: transformer_engine/common/recipe/delayed_scaling.cu at NVIDIA/TransformerEngine v1.13).
CAT_BATCH_INPUTS = 128.0
AMAX_UPDATE_MODULES = 1023.0


def delayed_amax_reduction(sh: Shape, *, layers: ArrayLike, ep: ArrayLike = 1, forward: bool = True,
                           history: float = FP8_AMAX_HISTORY) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(all-reduce bytes, kernels, HBM bytes) of one amax reduction of Transformer Engine's delayed scaling on a GPU
    holding ``layers`` transformer layers (all of its pipeline chunks), forward or backward.

    Source (NVIDIA/TransformerEngine v1.8-v2.1, the releases of the NeMo 24.07-25.02 containers; read at v1.13
    transformer_engine/pytorch/fp8.py): every FP8 module, on its first forward, appends its ``amax_history[0]`` row
    (one float per FP8 tensor: 3 per GEMM forward (input, weight, output), 2 backward (output and input gradients);
    module/base.py ``init_fp8_meta_tensors``) to one global buffer per (pass, recipe, group)
    (``add_fp8_tensors_to_global_buffer``), so one buffer holds every chunk's modules.
    ``reduce_and_update_fp8_tensors`` then ``torch.cat``s the rows, all-reduces them with MAX over the autocast's
    ``fp8_group`` (``async_op=False``: the compute stream waits for it) and runs
    ``tex.fused_amax_and_scale_update_after_reduction`` (common/recipe/delayed_scaling.cu ``kernel_bulk``: one block
    per module, each rolling its history (read and write ``history`` floats per tensor), taking its max and writing
    scale and scale_inv). Per reduction, with M modules and A amaxes on the GPU::

        all-reduce bytes   4 A
        kernels            ceil(M / 128) (torch.cat) + ceil(M / 1023) (the bulk update)
        HBM bytes          A (8 + 4 + 8 history + 12)      cat read + write, the reduced amax, the history roll,
                                                           scale read, scale and scale_inv written

    Modules by layer kind, Megatron-Core's Transformer Engine specs, counted over the model and taken at the GPU's
    share ``layers / L``: an attention layer linear_qkv, linear_proj (MLA: the q down / up (or q) and kv down / up
    projections and linear_proj) and the core attention (DotProductAttention, ``num_gemms=3`` in its
    ``prepare_forward``, registered in an FP8 autocast whether or not fp8_dpa is set); a dense MLP linear_fc1 and
    linear_fc2; an MoE block two GroupedLinear modules of E/ep GEMMs each and the shared experts' two linears (the
    router is not a TE module); a Mamba mixer in_proj and out_proj (models/mamba/mamba_layer_specs.py at
    core_v0.15.0). A standard layer is an attention layer and an MLP (dense or MoE): 5 modules and 7 GEMMs dense. Not
    counted: LatentMoE's projections and MTP blocks (a few modules: bytes of a latency-bound message)."""
    n = np.maximum(np.asarray(layers, dtype=float), 0.0)
    mla = sh.kv_lora_rank > 0
    attn_linears = np.where(mla, np.where(sh.q_lora_rank > 0, 5.0, 4.0), 2.0)
    local = np.maximum(np.maximum(sh.moe_experts, 0.0) / _pos("ep", ep), 1.0)
    shared = np.where(sh.moe_shared_experts > 0, 2.0, 0.0)
    att, mlp, moe, mam = sh.attention_layers, sh.mlp_layers, sh.moe_layers, sh.mamba_layers
    modules = att * (attn_linears + 1.0) + mlp * 2.0 + moe * (2.0 + shared) + mam * 2.0
    gemms = att * (attn_linears + 3.0) + mlp * 2.0 + moe * (2.0 * local + shared) + mam * 2.0
    share = n / np.maximum(sh.layers, 1.0)
    m = share * modules
    amaxes = share * gemms * (3.0 if forward else 2.0)
    kernels = np.ceil(m / CAT_BATCH_INPUTS - 1e-9) + np.ceil(m / AMAX_UPDATE_MODULES - 1e-9)
    return 4.0 * amaxes, kernels, amaxes * (24.0 + 8.0 * float(history))


#: Recipes whose quantizers all-reduce their amax over the tensor-parallel group under sequence parallelism
#: (:func:`tp_amax_reductions`): current scaling and NVFP4, both computing a per-tensor amax at quantization time.
TP_AMAX_RECIPES = ("tensorwise", "nvfp4")

#: Bytes of one TP amax all-reduce (:func:`tp_amax_reductions`): the fp32 amaxes of the row- and column-wise usages,
#: coalesced into one call (NVFP4: both, ``allreduce_coalesced``); current scaling's one amax (4).
TP_AMAX_BYTES = {"tensorwise": 4.0, "nvfp4": 8.0}


def tp_amax_reductions(sh: Shape, *, recipe: str, attention_recipe: str | None = None,
                       mamba_out_recipe: str | None = None, shared_expert_overlap: ArrayLike = False,
                       recompute: ArrayLike = 0, recompute_modules: ArrayLike = 0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) count of the blocking amax all-reduces over the tensor-parallel group that Transformer
    Engine's current-scaling and NVFP4 quantizers run per transformer layer (the mean over the model's layer kinds)
    under sequence parallelism, at tp > 1 (the caller checks both).

    Source: NVIDIA/TransformerEngine v2.14 (71bbefb, the 26.04 container's), v2.16 and v2.17.1 (current scaling's
    reduction since v2.2), pytorch/module/linear.py, layernorm_linear.py, layernorm_mlp.py
    ``_customize_quantizers_float8_current_scaling`` and ``_customize_quantizers_nvfp4`` (v2.16 linear.py lines
    2040-2105): with ``sequence_parallel`` a column-parallel linear's input quantizer and a row-parallel linear's
    grad-output quantizer get ``with_amax_reduction = True`` over ``tp_group``; the quantizer then all-reduces its
    amax with MAX before the cast and waits on it (pytorch/csrc/quantizer.cpp ``NVFP4Quantizer::quantize_impl``:
    ``amax_reduction_group->allreduce_coalesced(amax_tensors, MAX)->wait()``, the row- and column-wise amaxes;
    ``Float8CurrentScalingQuantizer`` one amax), so the cast, and the GEMM after it, wait for the all-reduce on the
    compute stream. GroupedLinear (routed experts) sets no amax reduction; delayed scaling reduces once per chunk
    instead (:func:`delayed_amax_reduction`); MXFP8 and blockwise compute their block scales in the cast kernel (no
    per-tensor amax).

    Per layer, Megatron-Core's Transformer Engine specs (column-parallel inputs forward, row-parallel output
    gradients backward), counted only for modules at ``recipe`` (``attention_recipe`` / ``mamba_out_recipe``: a
    module at its own precision, ``""`` BF16; None = ``recipe``):
        attention  forward: each TP-split input projection of :func:`transformer.attention_matrices` (QKV; MLA's
                   q (up) and kv up); backward: linear_proj
        dense MLP  forward linear_fc1, backward linear_fc2
        MoE        the shared experts' (if any) linear_fc1 forward, and backward linear_fc2 and linear_fc1 again:
                   Megatron-Core sets ``save_original_input`` on the shared linear_fc1 for fp8 other than delayed and
                   fp4, so the backward quantizes the saved BF16 shard again with the same quantizer before gathering
                   it for the wgrad GEMM (NVIDIA/Megatron-LM 2d1fa8d372 moe/shared_experts.py lines 131-145;
                   TransformerEngine v2.16 linear.py lines 862-910; under selective recompute of shared_experts the
                   recomputed forward takes that reduction instead); none with ``shared_expert_overlap``
                   (strategy moe_shared_expert_overlap: both shared linears get ``parallel_mode = None``,
                   shared_experts.py lines 147-152, Megatron gathers in BF16 itself); routed experts and LatentMoE's
                   duplicated projections none
        Mamba      forward in_proj (column-parallel), backward out_proj (row-parallel)
    Selective recompute (``recompute`` / ``recompute_modules``, :func:`transformer.recomputed_modules`) re-runs a
    module's forward in the backward, its reductions with it, counted in the backward (NVIDIA/Megatron-LM
    d98e8a64dd): mla_up_proj MLA's q and kv up-projections (multi_latent_attention.py lines 855-875 under
    ``qkv_up_checkpoint``, lines 983-988), mlp a dense layer's linear_fc1 (transformer_layer.py lines 992-1010), moe
    the shared linear_fc1 with the block; shared_experts re-runs the shared linear_fc1 but sets no
    ``save_original_input``, one for one (net 0); core_attn, moe_act and layernorm re-run no TP-split linear (a norm
    fused into a LayerNormLinear is not recomputed on its own). Full recompute is the caller's (each layer's forward
    again). 0 for another recipe."""
    zero = np.zeros_like(np.asarray(sh.layers, dtype=float))
    if recipe not in TP_AMAX_RECIPES:
        return zero, zero
    att_r = recipe if attention_recipe is None else attention_recipe
    out_r = recipe if mamba_out_recipe is None else mamba_out_recipe
    att_on = 1.0 if att_r in TP_AMAX_RECIPES else 0.0
    out_on = 1.0 if out_r in TP_AMAX_RECIPES else 0.0
    cols = sum(np.where(n_in * n_out > 0, 1.0, 0.0) for name, n_in, n_out, split
               in attention_matrices(sh) if split and name != "o")
    shared = np.where((sh.moe_shared_experts > 0) & ~np.asarray(shared_expert_overlap, dtype=bool), 1.0, 0.0)
    per_model_f = (sh.attention_layers * att_on * cols + sh.mlp_layers + sh.moe_layers * shared
                   + sh.mamba_layers)
    again = recomputed_modules(sh, recompute, recompute_modules)
    per_model_b = (sh.attention_layers * att_on * (1.0 + np.where(again.mla_up_proj, cols, 0.0))
                   + sh.mlp_layers * (1.0 + np.where(again.mlp, 1.0, 0.0))
                   + sh.moe_layers * shared * (2.0 + np.where(again.moe, 1.0, 0.0)) + sh.mamba_layers * out_on)
    n = np.maximum(np.asarray(sh.layers, dtype=float), 1.0)
    return zero + per_model_f / n, zero + per_model_b / n


def fp8_param_quantize_bytes(recipe: str, master_bytes: float = 4.0, elem_bytes: float = 2.0) -> float:
    """HBM bytes per element of the optimizer's master-weight shard to quantize it into the FP8 parameters once per
    step, under Megatron's fp8_param_gather (per-tensor recipes; 0 for mxfp8, whose parameters are gathered in
    BF16 and quantized after the gather, :func:`fp8_quantize_bytes`).

    Source: Megatron-Core's distributed optimizer ``_copy_main_params_to_model_params`` calls ``quantize_param_shard``
    on the FP8 parameters' fp32 main shards and skips their 16-bit copy ("FP8 params are quantized in the above
    quantize_param_shard function", megatron/core/optimizer/distrib_optimizer.py; fp8_utils.py
    ``_quantize_param_shard_impl`` -> TE ``cast_master_weights_to_fp8``; NVIDIA/Megatron-LM@d98e8a64dd). TE's
    ``quantize_master_weights`` (transformer_engine/pytorch/tensor/utils.py, NVIDIA/TransformerEngine@d0067d0) first
    casts the shard to the parameter's nominal dtype ("we still keep this logic to keep numerical consistency":
    ``master_weight.to(model_weight.dtype)``, read 4 write eb), then
        delayed     ``update_quantized`` with the delayed scale, amax fused in the cast: read eb, write 1
        tensorwise  ``tex.compute_amax`` on the shard first (read eb), the DP amax all-reduce (a few floats:
                    latency, not bytes), then the cast: read eb, write 1
        blockwise   ``_cast_master_weights_to_fp8_blockwise_scaling``: ``fp8_block_scaling_compute_partial_amax``
                    over the shard's 128 x 128 tiles (read eb), the DP all-reduce of the tile amaxes (latency),
                    then ``fp8_block_scaling_partial_cast`` (read eb, write 1; tile scales 4 / 128^2, not counted)
    so delayed 4 + 2 eb + 1 = 9 and tensorwise / blockwise 4 + 3 eb + 1 = 11 bytes an element at eb = 2.

    nvfp4 (Megatron's fp4_param_gather, NVFP4 parameters): ``_copy_main_params_to_model_params`` calls
    ``quantize_nvfp4_param_shard`` (distrib_optimizer.py L2760-2763, fp4_utils.py L88-129 at
    NVIDIA/Megatron-LM@d1410e15e1) -> TE ``quantize_master_weights`` (pytorch/tensor/utils.py at
    NVIDIA/TransformerEngine@4220403e8 = v2.16): ``master_weight.to(model_weight.dtype)`` (read 4, write eb), then
    ``_cast_master_weights_to_nvfp4_2d``: ``nvfp4_multi_tensor_compute_partial_amax`` over the shard's 16 x 16
    tiles (read eb), the DP all-reduces of the tile and tensor amaxes (fp32, one per 256 elements of the whole
    weight: not counted here, docs/model.md#fp4-param-gather), ``nvfp4_multi_tensor_fused_scale`` (scales only)
    and ``nvfp4_multi_tensor_2d_partial_cast`` (read eb, write 1/2: the packed row-wise data of the shard), so
    4 + 3 eb + 1/2 = 10.5 bytes an element at eb = 2. (The 26.04 container's TE build, 71bbefb, first
    concatenates the fp32 shards, ``torch.cat``: 8 more, not counted; docs/model.md#fp4-param-gather.)"""
    _check_recipe(recipe)
    if recipe == "mxfp8":
        return 0.0
    if recipe == "nvfp4":
        return master_bytes + 3.0 * elem_bytes + 0.5
    reads = 3.0 if recipe in ("tensorwise", "blockwise") else 2.0
    return master_bytes + reads * elem_bytes + 1.0


def param_gather_bytes(recipe: str) -> tuple[float, float]:
    """Bytes per element that the distributed optimizer's parameter all-gather moves, and a replica holds, for a
    linear weight held as a quantized parameter: (gathered, held).

        per-tensor FP8 (fp8_param_gather)  (1, 1): uint8 data in the DDP buffer (scales per tensor, not counted);
                                           held, the data. Where GEMMs take TN only (Hopper) TE v2.x keeps a
                                           transposed copy beside it after each gather (``post_all_gather_processing``
                                           -> ``_create_transpose`` into the persistent ``_transpose`` buffer,
                                           pytorch/tensor/utils.py L951-956, storage/float8_tensor_storage.py
                                           L221-227, NVIDIA/TransformerEngine@4220403e8 = v2.16), while TE 1.x
                                           transposed an FP8 parameter in the backward without a cache unless one
                                           existed; a published run of a TE 1.x container fits only without it
                                           (dgxc25_h100_nemotron4_340b_fp8_128: 85.4 GB > 85.0 GB with it), and the
                                           model has no TE release, so it is not held (docs/model.md#fp8-param-gather)
        nvfp4 (fp4_param_gather)           (1/2, 2 (1/2 + 1/16) = 1.125): the buffer holds the packed row-wise
                                           E2M1 data only ("NVFP4 tensors use half the numel in the packed param
                                           buffer", param_and_grad_buffer.py ``_compute_nvfp4_packed_layout``
                                           L1289-1374, and the row-wise storage remapped into it, L1176-1188, at
                                           NVIDIA/Megatron-LM@d1410e15e1; the same at 2d1fa8d372), its scales are
                                           computed on every rank from all-reduced block amaxes (not gathered);
                                           the NVFP4Tensor holds its row-wise and column-wise data and E4M3 scales
                                           (TE ``post_all_gather_processing``, :func:`held_param_step_bytes`)
    (MXFP8 parameters are gathered in BF16 through the gradient buffer: no quantized parameter elements,
    ``engine.dp_comm.fp8_param_elements``; any recipe but nvfp4, or none, gives the FP8 pair.)"""
    return (0.5, 2.0 * NVFP4_COPY_BYTES) if recipe == "nvfp4" else (1.0, 1.0)


def fp8_expert_padding_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                             cp: ArrayLike = 1, ep: ArrayLike = 1, etp: ArrayLike | None = None,
                             elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one MoE layer adds on one GPU per micro-batch when the routed tokens of an fp8
    run are padded for the FP8 grouped GEMM by the experts themselves, not by the token dispatcher.

    Source: Megatron-Core ``TEGroupedMLP.forward`` (megatron/core/transformer/moe/experts.py, core_dev_r0.15.0
    @0d8e0714, the Megatron-LM of Megatron-Bridge 25.11): with fp8 it runs Transformer Engine's ``Fp8Padding`` on the
    permuted tokens before FC1 and ``Fp8Unpadding`` on FC2's output, so that every local expert's row count is a
    multiple of the FP8 GEMM alignment (16; 32 for MXFP8). TE (release_v2.9, pytorch/module/fp8_padding.py,
    fp8_unpadding.py) copies the whole tensor with ``tex.fused_multi_row_padding`` / ``fused_multi_row_unpadding``
    (read it, write the padded or unpadded copy) unless every count is already aligned, and its autograd backward is
    the opposite copy of the gradient. A dropless router's counts are aligned only by chance (the Megatron-Bridge
    benchmarks draw normal logits per token, ``RandomSTE``), so the copies run. The all-to-all and all-gather
    dispatchers, and the flex dispatcher's DeepEP backend, leave the padding to the experts unless
    ``moe_router_padding_for_quantization`` pads the routing map (DeepEP ``_pad_routing_map`` runs only under it,
    Megatron-LM 32f2c9cfdd token_dispatcher.py); HybridEP pads in its dispatch (``pad_multiple``), so no copy runs.

    With R = u T k / t routed rows on this GPU's E/ep experts (ep u T k / (E t) each; T = b s / cp, u = etp,
    default t; the rows :func:`fp8_quantize_bytes` quantizes) and h the experts' token width (the hidden width, or
    LatentMoE's l)::

        forward   4 eb R h     Fp8Padding of the experts' input (read R h, write R h)
                               + Fp8Unpadding of FC2's output (read R h, write R h)
        backward  4 eb R h     the unpadding of the input gradient and the padding of FC2's output gradient

    Not counted: the padding rows themselves (at most alignment - 1 per local expert) and the padded copy of the
    router probabilities (one element per row, 1/h of the tokens' bytes)."""
    T = _tokens(micro_batch, seq_len, cp)
    per_pass = 4.0 * _pos("elem_bytes", elem_bytes) * _routed_rows(sh, T, tp, ep, etp) * sh.moe_width
    return per_pass, per_pass.copy()


#: Kernels Megatron-Core's ``TEGroupedMLP._apply_bias`` launches per local expert when FC2's bias is added outside the
#: GEMM (strategy eager_expert_bias): forward ``b * p`` and ``t + b p`` (the final ``torch.cat`` is one launch for
#: all experts), backward the two products of ``MulBackward0`` and their two reductions (``sum_to_size``).
EXPERT_BIAS_KERNELS = (2.0, 4.0)


def rope_rotated_elements(sh: Shape, tp: ArrayLike = 1) -> np.ndarray:
    """Elements per token that RoPE rotates on one GPU (fused or eager): Q and K, (a + g) d / t; with multi-head
    latent attention only the decoupled RoPE part, q_pos_emb's a / t heads and k_pos_emb's one head of
    r = qk_rope_head_dim over the whole sequence on every TP rank (NVIDIA/Megatron-LM@7094270c6f
    megatron/core/transformer/multi_latent_attention.py L475-487; k_pos_emb gathered from the sequence-parallel
    region, L419): (a / t + 1) r."""
    t = _pos("tp", tp)
    return np.asarray(np.where(np.asarray(sh.mla, dtype=bool), (sh.heads / t + 1.0) * sh.qk_rope_head_dim,
                               (sh.heads + sh.kv_heads) * sh.head_dim / t), dtype=float)


def eager_rope_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                     cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one layer adds on one GPU per micro-batch when RoPE runs as Megatron-Core's eager
    ATen kernels instead of the fused kernel :func:`layer_eltwise_bytes` prices (megatron_te: fwd 2e (Q + K), bwd
    2e (Q + K)); multi-head latent attention rotates only its decoupled RoPE part (below); 0 without RoPE.

    Source: Megatron-Core ``apply_rotary_pos_emb`` (megatron/core/models/common/embeddings/rope_utils.py at
    NVIDIA/Megatron-LM 2d1fa8d372 and 24bad8e677, the Megatron-LM of Megatron-Bridge 26.04 and 26.08) takes the
    unfused ``_apply_rotary_pos_emb_bshd`` when ``apply_rope_fusion`` is off or when ``mscale != 1.0`` ("mscale ... is
    not supported by TE's fused RoPE. Using unfused implementation."); attention.py passes the YaRN concentration
    factor ``_yarn_get_concentration_factor_from_config`` = 0.1 ln(factor) + 1 (yarn_rotary_pos_embedding.py
    ``_yarn_get_mscale``; GPT-OSS: factor 32, mscale None -> 1.347). Megatron-Bridge also switches the fusion off for
    any position_embedding_type other than 'rope' (src/megatron/bridge/utils/fusions.py
    ``validate_rope_fusion_compatibility`` at 17a381f95 and 4ab94dfad; GPTOSSBridge sets 'yarn'). Per element of the
    rotated tensor t (Q, then K: E = (a + g) d / t elements per token), e = ``elem_bytes``, each kernel counting what
    it reads and writes once::

        forward   t * cos 2e, -x2 (half) 1e, torch.cat((-x2, x1)) 2e, (.) * sin 2e, the sum 3e,
                  torch.cat((t, t_pass)) with t_pass empty 2e                                         = 12e
        backward  grad * cos 2e, grad * sin 2e, neg of the half 1e, chunk's backward (cat of the halves' gradients)
                  2e; t's three gradients summed (two adds) 6e: the product's, rotate_half's and the empty
                  t_pass = t[..., rot_dim:] slice's, whose SliceBackward0 (ATen slice_backward: zeros of t's size,
                  then the copy of the empty gradient) writes 1e; t[..., :rot_dim] over the whole head is t itself
                  (ATen TensorIndexing.h applySlice returns self for a full slice: no node)             = 14e

    minus the fused kernel's 2e each way: forward 10e E, backward 12e E per token (T = b s / cp tokens). Not counted:
    cos and sin of the [s, 1, 1, d] frequencies (1/(b (a + g)) of the tensors' bytes).

    Multi-head latent attention (NVIDIA/Megatron-LM@7094270c6f, the Megatron-LM of NeMo 25.04's DeepSeek-V3
    recipe): multi_latent_attention.py L475-487 rotates q_pos_emb [s, b, a / t, r] and k_pos_emb [s, b, 1, r]
    (one head, the whole sequence on every TP rank: gather_from_sequence_parallel_region), r = qk_rope_head_dim, so
    E = (a / t + 1) r per token; rope_utils.py L112-115 ``multi_latent_attention`` first de-interleaves t
    (``torch.cat((t[..., 0::2], t[..., 1::2]))``: 2e forward; backward two strided SliceBackward0, zeros of t's size
    then the half's copy, 2e each, and their sum 3e: 7e), and t's gradients are then two (product, rotate_half: one
    add, 3e) before the three at the input (6e), as above: forward 14e, backward 21e, minus the fused 2e each way:
    12e E and 19e E."""
    T = _tokens(micro_batch, seq_len, cp)
    e = _pos("elem_bytes", elem_bytes)
    mla = np.asarray(sh.mla, dtype=bool)
    rotated = rope_rotated_elements(sh, _pos("tp", tp))
    on = np.where(np.asarray(sh.rope, dtype=bool), 1.0, 0.0)
    return on * np.where(mla, 12.0, 10.0) * e * rotated * T, on * np.where(mla, 19.0, 12.0) * e * rotated * T


def _routed_rows(sh: Shape, T: ArrayLike, tp: ArrayLike, ep: ArrayLike, etp: ArrayLike | None) -> np.ndarray:
    """Routed rows on one GPU's E/ep experts, ep u T k / t per expert x E/ep (u = etp, default t), as
    :func:`fp8_expert_padding_bytes` counts them; 0 without experts."""
    t = _pos("tp", tp)
    e = _pos("ep", ep)
    u = t if etp is None else _pos("etp", etp)
    E = np.maximum(sh.moe_experts, 1.0)
    rows = np.maximum(e * u * T * sh.moe_top_k / (E * t), 1.0) * E / e
    return rows * np.where(sh.moe_experts > 0, 1.0, 0.0)


def eager_glu_clamp_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                          cp: ArrayLike = 1, ep: ArrayLike = 1, etp: ArrayLike | None = None,
                          elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one MoE layer adds on one GPU per micro-batch when the routed experts' gated
    activation is clamped (GPT-OSS: ``activation_func_clamp_value`` 7.0) by ATen kernels outside the fused activation;
    0 without a gated MLP or experts.

    Source: Megatron-Core ``weighted_bias_quick_geglu_impl`` (megatron/core/fusions/fused_bias_geglu.py at
    NVIDIA/Megatron-LM 2d1fa8d372, the Megatron-LM of Megatron-Bridge 26.04), which ``TEGroupedMLP.bias_act_func``
    calls with ``bias_activation_fusion`` (GPTOSSBridge sets it): before the fused (torch.compile'd)
    ``WeightedQuickGeGLUFunction`` it runs ``x_glu.clamp(max=7)``, ``x_linear.clamp(-7, 7)`` and ``torch.cat`` of the
    two in eager PyTorch. The backward is autograd's: ``clamp_backward`` (pytorch/pytorch
    torch/csrc/autograd/FunctionsManual.cpp) is ``where(self <= max, grad, 0)`` for the gate half (a compare writing a
    1-byte mask, then ``where``) and ``where((self >= min).logical_and_(self <= max), grad, 0)`` for the linear half,
    and ``chunk``'s backward concatenates the halves' gradients. Per row and element of the expert width F = f_e / u
    (u = etp), e = ``elem_bytes``::

        forward   two clamps 2e each, the cat 4e                                                       = 8e
        backward  gate: compare e + 1, where 1 + 2e; linear: two compares 2 (e + 1), logical_and_ 3,
                  where 1 + 2e; chunk's backward cat 4e                                               = 11e + 8

    over R = ep u T k / t routed rows (T = b s / cp). Megatron-Bridge 26.08's TE op fuser path
    (``use_transformer_engine_op_fuser``: Transformer Engine ``ScaledClampedQGeGLU`` inside the fused grouped MLP,
    transformer_engine/pytorch/ops/fused/grouped_mlp.py v2.17.1) clamps inside its kernel: no such bytes."""
    T = _tokens(micro_batch, seq_len, cp)
    e = _pos("elem_bytes", elem_bytes)
    u = _pos("tp", tp) if etp is None else _pos("etp", etp)
    width = _routed_rows(sh, T, tp, ep, etp) * sh.moe_ffn_hidden / u
    gated = np.where(np.asarray(sh.gated_mlp, dtype=bool), 1.0, 0.0)
    return gated * 8.0 * e * width, gated * (11.0 * e + 8.0) * width


def eager_expert_bias_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                            cp: ArrayLike = 1, ep: ArrayLike = 1, etp: ArrayLike | None = None,
                            elem_bytes: ArrayLike = 2.0, prob_bytes: ArrayLike | None = None
                            ) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one MoE layer adds on one GPU per micro-batch when the routed experts' FC2 bias is
    added, weighted by the router probability, outside the GEMM; 0 without experts.

    Source: Megatron-Core ``TEGroupedMLP`` (megatron/core/transformer/moe/experts.py at NVIDIA/Megatron-LM 2d1fa8d372)
    builds ``linear_fc2`` with ``skip_bias_add=True`` and adds its biases in ``_apply_bias``:
    ``torch.cat([t + b * p for t, b, p in zip(split(out, tokens_per_expert), biases, split(probs, ...))])``, eager, one
    expert at a time (FC1's bias rides in the GEMM, skip_bias_add False; its gradient in the wgrad GEMM's epilogue,
    transformer_engine/pytorch/module/grouped_linear.py). Probabilities in the activations' dtype (Megatron-Core's
    router keeps the input's dtype unless ``moe_router_dtype`` is set; GPT-OSS's recipes set none). Per row and element
    of the hidden width h, e = ``elem_bytes``::

        forward   b * p writes e; t + (b p) reads 2e, writes e; the cat 2e                              = 6e
        backward  MulBackward0: grad * p (2e) summed to b's shape (e), grad * b (2e) summed to p's (e)  = 6e

    over R = ep u T k / t routed rows (T = b s / cp); the add's and the cat's backward are views. With the
    probabilities wider than the activations (``prob_bytes`` q > e: training.moe_router_dtype fp32 / fp64,
    docs/model.md#router-dtype) PyTorch's type promotion makes ``b * p``, ``t + b p`` and the cat c = max(e, q) wide,
    and the path ends in ``.to(intermediate_parallel.dtype)`` (experts.py at d98e8a64dd lines 363-379): a cast that
    reads c and writes e; its backward casts the incoming gradient up (e + c) and autograd casts ``t``'s gradient
    back down (c + e)::

        forward   c + (e + 2c) + 2c + [c > e] (c + e)                = 5c + e + [c > e](c + e)
        backward  6c + [c > e] 2 (c + e)

    (c = e: the 6e and 6e above). The kernels are
    launched per local expert (:data:`EXPERT_BIAS_KERNELS`, priced at :data:`KERNEL_FIXED_S` by the step model).
    Megatron-Bridge 26.08's TE op fuser path scales and adds the bias inside the fused grouped MLP
    (GroupedLinear ``scale_bias``): no such bytes."""
    T = _tokens(micro_batch, seq_len, cp)
    e = _pos("elem_bytes", elem_bytes)
    c = np.maximum(e, e if prob_bytes is None else _pos("prob_bytes", prob_bytes))
    wider = np.where(c > e, c + e, 0.0)
    per = _routed_rows(sh, T, tp, ep, etp) * sh.hidden
    return per * (5.0 * c + e + wider), per * (6.0 * c + 2.0 * wider)


def eager_bias_dropout_add_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                                 cp: ArrayLike = 1, sequence_parallel: ArrayLike = False, elem_bytes: ArrayLike = 2.0,
                                 biased_adds: ArrayLike = 2.0, adds: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one layer adds on one GPU per micro-batch when a model with linear biases runs
    Megatron-Core's unfused bias-dropout-add (TransformerConfig ``bias_dropout_fusion`` False), beyond the one
    compiled kernel per residual add that :func:`layer_eltwise_bytes` prices (megatron_te: fwd 3e x + the mask,
    bwd 3e x, with dropout (2e + 1) x and the bias gradient in the same kernel).

    Source: Megatron-Core ``_bias_dropout_add_func`` (megatron/core/fusions/fused_bias_dropout.py, identical at
    NVIDIA/Megatron-LM 2d1fa8d372 and 24bad8e677, the Megatron-LM of Megatron-Bridge 26.04 and 26.08), which
    ``bias_dropout_add_unfused`` calls in eager PyTorch: ``x = x + bias``, ``out = dropout(x, p)``,
    ``out = residual + out``. The attention block's output projection is built with ``skip_bias_add=True``
    (megatron/core/transformer/attention.py), so its bias reaches this add (transformer_layer.py ``self_attn_bda``);
    a dense MLP's FC2 likewise; an MoE layer's experts add their own bias (TEGroupedMLP ``_apply_bias``, or the TE op
    fuser's kernel) and hand the add none. ``F.dropout`` with p = 0 returns its input (ATen Dropout.cpp: ``p == 0``
    returns ``input``), so a model without dropout runs no dropout kernel. GPTOSSBridge sets ``add_bias_linear``
    True and ``bias_dropout_fusion`` False (experts.py refuses the fused one for TEGroupedMLP with linear biases). Per
    element of the residual stream x (h, or h / t with ``sequence_parallel``), e = ``elem_bytes``, n =
    ``biased_adds`` of the layer's ``adds`` residual adds carrying a bias (a layer of attention + MLP: 2 adds, n 2
    dense, 1 MoE; one block of a hybrid pattern: 1 add)::

        forward   x + bias: reads x, writes the sum  2e;  with dropout the separate dropout kernel reads its input
                  and writes its output (the mask is priced already) 2e, in every add
        backward  with dropout: the bias gradient's own reduction (sum_to_size) reads the gradient  e  (the compiled
                  kernel reduces it beside the mask multiply); without dropout both paths run the same reduction

    over T = b s / cp tokens: forward ``2e x (n + adds drop)``, backward ``e x n drop``. Full recompute repeats the
    forward."""
    T = _tokens(micro_batch, seq_len, cp)
    e = _pos("elem_bytes", elem_bytes)
    t = _pos("tp", tp)
    x = sh.hidden * np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / t, 1.0)
    n, adds = np.asarray(biased_adds, dtype=float), np.asarray(adds, dtype=float)
    drop = np.where(np.asarray(sh.dropout, dtype=bool), 1.0, 0.0)
    return 2.0 * e * x * T * (n + adds * drop), e * x * T * n * drop


def eager_activation_priced(sh: Shape) -> np.ndarray:
    """Where strategy eager_activation changes what an MLP block's activation costs (bool, per element of ``sh``): a
    gated MLP, or an ungated one with linear biases that is not squared ReLU. Elsewhere the activation runs the same
    kernels either way (:func:`eager_activation_bytes`' "otherwise": 0), which the job's warning names."""
    return np.asarray(sh.gated_mlp, dtype=bool) | (
        np.asarray(sh.biases, dtype=bool) & ~np.asarray(sh.squared_relu, dtype=bool))


def eager_activation_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                           cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one dense MLP block adds on one GPU per micro-batch when its activation runs
    Megatron-Core's eager branch (TransformerConfig ``bias_activation_fusion`` False: Megatron-LM
    ``--no-bias-swiglu-fusion`` / ``--no-bias-gelu-fusion``) instead of the fused kernel :func:`layer_eltwise_bytes`
    prices (megatron_te: gated fwd 3e F, bwd 5e F; GeLU with biases fwd 2e F, bwd 4e F).

    Source: NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/mlp.py ``MLP.forward`` L320-340 (the fused
    branch L275-319 calls ``bias_swiglu_impl`` / ``bias_geglu_impl`` / ``bias_gelu_impl``, megatron/core/fusions/
    fused_bias_swiglu.py, fused_bias_gelu.py, each one compiled kernel: ``jit_fuser``): ``intermediate + bias`` where
    the linear has a bias, then for a gated MLP ``glu(x)``: ``torch.chunk`` (views), ``activation_func(x_glu) *
    (x_linear + glu_linear_offset)`` (``glu_linear_offset`` 0.0 by default: the add still runs, an ATen kernel), for an
    ungated one ``activation_func(x)``. Per token and element of the rank's width F = f / t (the up-projection's output
    is 2F gated), e = ``elem_bytes``::

        gated      forward  silu 2e F, the offset add 2e F, the multiply 3e F               = 7e F (fused 3e F)
                   backward MulBackward0's two products 3e F each, the add's gradient passes through,
                            silu_backward 3e F, chunk's backward (split_backward: cat) reads and
                            writes 2F                                                  = 13e F (fused swiglu_back 5e F)
                   biases   + the separate bias add over 2F: 4e F forward (its gradient's sum over tokens
                            runs on either path)
        GeLU + biases forward the bias add 2e F, gelu 2e F = 4e F (fused 2e F); backward gelu_backward 3e F and the
                            bias gradient's sum e F on either path
        otherwise  0: GeLU without biases (validate_args turns bias_gelu_fusion off, arguments.py L1605-1606: ATen's
                   gelu is priced already) and squared ReLU (Megatron-Core fuses only GeLU and SwiGLU: eager either way)

    so the extra is gated ``4e F (+ 4e F biases)`` forward and ``8e F`` backward, GeLU with biases ``2e F`` forward,
    over T = b s / cp tokens. The routed experts' activation (TEGroupedMLP's eager branch with its fp32 probability
    multiply, experts.py L1003-1016) is not in it."""
    T = _tokens(micro_batch, seq_len, cp)
    e = _pos("elem_bytes", elem_bytes)
    F = sh.ffn_hidden / _pos("tp", tp)
    gated = np.asarray(sh.gated_mlp, dtype=bool)
    biases = np.asarray(sh.biases, dtype=bool)
    fwd = np.where(gated, 4.0 + np.where(biases, 4.0, 0.0), np.where(eager_activation_priced(sh), 2.0, 0.0))
    bwd = np.where(gated, 8.0, 0.0)
    return fwd * e * F * T, bwd * e * F * T


def attention_unpad_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                          cp: ArrayLike = 1, elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) HBM bytes one layer adds on one GPU when its fused attention core runs flash-attn's
    variable-length kernel on tokens gathered by a padding mask: llm-foundry's ``flash_attn_fn`` (attn_impl flash,
    llmfoundry/models/layers/attention.py @5e85bd62d) calls ``bert_padding.unpad_input`` on Q, K and V and
    ``pad_input`` on the output around ``flash_attn_varlen_func`` (flash_attn/bert_padding.py: ``IndexFirstAxis``,
    ``IndexPutFirstAxis``). With T = b s / cp tokens, t = tp and e = ``elem_bytes``, the elements per GPU are
    Q = T a d / t, K = T g d / t, V = T g d_v / t and O = T a d_v / t::

        forward   2 e (Q + K + V)   IndexFirstAxis.forward: torch.gather of each into a packed copy (read + write)
                + 3 e O             IndexPutFirstAxis.forward: torch.zeros (write), output[indices] = values
                                    (read + write)
        backward  2 e O             IndexPutFirstAxis.backward: grad_output[indices] (read + write)
                + 3 e (Q + K + V)   IndexFirstAxis.backward: torch.zeros (write) + scatter_ (read + write) per tensor

    With multi-head attention (Q = K = V = O = X): 9 e X forward, 11 e X backward. The gather and scatter index is
    ``einops.repeat(indices, 'z -> z d')``, a broadcast view (one index per token, not counted). The mask
    reductions and ``nonzero`` are per-token vectors (not counted); their host synchronisations are not priced."""
    T = _tokens(micro_batch, seq_len, cp)
    t = _pos("tp", tp)
    e = _pos("elem_bytes", elem_bytes)
    q, k = T * sh.heads * sh.head_dim / t, T * sh.kv_heads * sh.head_dim / t
    v, o = T * sh.kv_heads * sh.v_head_dim / t, T * sh.heads * sh.v_head_dim / t
    return e * (2.0 * (q + k + v) + 3.0 * o), e * (3.0 * (q + k + v) + 2.0 * o)


def fsdp_flat_grad_bytes(params: ArrayLike, *, param_bytes: ArrayLike = 2.0, reduce_bytes: ArrayLike = 4.0,
                         divide: ArrayLike = True) -> np.ndarray:
    """HBM bytes PyTorch FSDP1 (FullyShardedDataParallel with FlatParameter, torch 2.1) moves over ``params``
    unsharded gradient elements of a unit in every micro-batch's backward, before the reduce-scatter, with p =
    ``param_bytes`` (the compute dtype, MixedPrecision param_dtype) and r = ``reduce_bytes`` (reduce_dtype)::

        cat     2 p                the unit's parameters are views (split + view) of its flat parameter in forward
                                   (FlatParamHandle._use_unsharded_views), so autograd's SplitWithSizesBackward
                                   concatenates their gradients into the flat gradient (read + write)
        cast    p + r, if r != p   _post_backward_hook: flat_param.grad.to(handle._reduce_dtype)
        divide  2 r, if ``divide`` _reduce_grad: _div_if_needed(padded_unsharded_grad, _gradient_predivide_factor)
                                   in place; the factor exceeds 1 for any group of 2 or more ranks

    (torch/distributed/fsdp/_runtime_utils.py). Composer's mixed precision DEFAULT (param bf16, reduce fp32) gives
    4 + 6 + 8 = 18 bytes per parameter, PURE (reduce bf16) 4 + 0 + 4 = 8. The reduce-scatter itself is traffic
    (the step's FSDP term); the post-divide and the accumulation act on the 1/N shard (not counted)."""
    n = np.asarray(params, dtype=float)
    p = _pos("param_bytes", param_bytes)
    r = _pos("reduce_bytes", reduce_bytes)
    cast = np.where(r != p, p + r, 0.0)
    return n * (2.0 * p + cast + np.where(np.asarray(divide, dtype=bool), 2.0 * r, 0.0))


def fsdp2_copy_bytes(gathered_bytes: ArrayLike, grads: ArrayLike, *, grad_bytes: ArrayLike = 2.0,
                     reduce_bytes: ArrayLike = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes of PyTorch FSDP2's (``fully_shard``, per-parameter DTensor sharding, torchtitan's FSDP) copies
    around its collectives, (per all-gather of ``gathered_bytes``, per reduce-scatter of ``grads`` unsharded
    gradient elements), with g = ``grad_bytes`` (the gradients' dtype, FSDP's param_dtype) and r = ``reduce_bytes``
    (its reduce_dtype)::

        copy-out   2 x gathered   the all-gather output is one flat buffer of every rank's padded shards;
                                  foreach_all_gather_copy_out splits it into each parameter's unsharded storage
                                  (torch.ops.fsdp.split_with_sizes_copy: read + write), in float8 for the weights
                                  torchao gathers in float8
        copy-in    (g + r) x grads  foreach_reduce_scatter_copy_in: torch._chunk_cat(unsharded_grads, dim=0,
                                  num_chunks=world_size, out=reduce_scatter_input), the input a new buffer of the
                                  reduce dtype, so every gradient is read (g) and written interleaved by rank, cast
                                  (r); a copy even when r = g

    (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py ``foreach_all_gather_copy_out``, ``foreach_reduce``;
    read in public copies of the 2.7-2.9 file, not at the 2.8.0a0+5228986c39 of torchtitan e7c0cae's runs: the
    pytorch snapshot is over the fetch limit). fp32 and bf16 reductions divide inside NCCL (ReduceOp.AVG:
    ``_get_gradient_divide_factors``, "For fp32/bf16 ... use NCCL's built-in division to avoid separate div
    kernels"), so no divide pass; the all-gather's copy-in and the post-reduce work act on the 1/N shards (not
    counted). The collectives' own reads and writes are the FSDP traffic term, not counted here."""
    gathered = np.asarray(gathered_bytes, dtype=float)
    n = np.asarray(grads, dtype=float)
    g = _pos("grad_bytes", grad_bytes)
    r = _pos("reduce_bytes", reduce_bytes)
    return 2.0 * gathered, (g + r) * n


class MambaTime(PassTimes, frozen=True, eq=False):
    """Compute time (seconds) of one Mamba layer for one micro-batch on one GPU: ``forward``, ``backward``,
    ``recompute`` (the forward again under full recompute, else 0), the forward's parts (projection GEMMs, SSD
    matmuls, memory-bound bytes) and ``forward_flops`` on this GPU."""

    forward_gemm: np.ndarray
    forward_ssd: np.ndarray
    forward_memory: np.ndarray
    forward_flops: np.ndarray
    #: 0: a Mamba layer has no attention block (the field :class:`LayerTime` carries, for the mix of a pattern's kinds)
    attention_forward: np.ndarray = msgspec.field(default_factory=lambda: np.zeros(1))


#: fp32 passes over the chunk states (T/Q chunks x H P N) per forward: _chunk_state_fwd writes them, _state_passing_fwd
#: reads and writes them, _chunk_scan_fwd reads them; per backward: the recomputed chunk_state (1) and state passing
#: (2), _chunk_scan_bwd_dstates writes dstates (1), _state_passing_bwd reads dstates and states and writes dstates (3),
#: dx, dB and dC read one each (3) (ssd_combined.py at e9594ce, ``_mamba_chunk_scan_combined_bwd``).
STATE_PASSES_FWD = 4.0
STATE_PASSES_BWD = 10.0
STATE_BYTES = 4.0  # ``states_in_fp32=True``


def mamba_eltwise_bytes(md: mamba.MambaDims, *, tp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                        elem_bytes: ArrayLike = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Memory-bound bytes per token of one Mamba layer outside the matmuls, (forward, backward), with w = d_in + 2GN
    the conv channels, eb the element size, widths of split tensors / t:

        forward   pre-norm 2 eb h (/t with sequence parallelism) + conv1d + SiLU read, write 2 eb w + z gate read
                  eb d_in + layout copy (``rearrange(...).contiguous()``) 2 eb d_in + gated RMSNorm 2 eb d_in
                  + residual add 3 eb h (/t with SP)
        backward  2 x forward + the recomputed conv1d 2 eb w

    (mamba_mixer.py ``_ssm_training``, ssd_combined.py ``MambaSplitConv1dScanCombinedFn``: the gate is fused in
    ``_chunk_scan_fwd``, the conv recomputed in the backward.)"""
    t = _pos("tp", tp)
    eb = _pos("elem_bytes", elem_bytes)
    rep = np.where(np.asarray(sequence_parallel, dtype=bool), t, 1.0)
    w = md.conv_width / t
    d_in = md.d_inner / t
    fwd = 5.0 * eb * md.hidden / rep + 2.0 * eb * w + 5.0 * eb * d_in
    return fwd, 2.0 * fwd + 2.0 * eb * w


def mamba_layer_time(md: mamba.MambaDims, *, micro_batch: ArrayLike, seq_len: ArrayLike, peak_flops: ArrayLike,
                     memory_bandwidth: ArrayLike, gemm_max: ArrayLike = 0.75, gemm_half_dim: ArrayLike = 96.0,
                     memory_efficiency: ArrayLike = 0.85, tp: ArrayLike = 1, cp: ArrayLike = 1,
                     sequence_parallel: ArrayLike = False, recompute: ArrayLike = "none",
                     elem_bytes: ArrayLike = 2.0, ssd_peak_flops: ArrayLike | None = None,
                     ssd_gemm_max: ArrayLike | None = None, ssd_gemm_half_dim: ArrayLike | None = None,
                     out_proj_peak_flops: ArrayLike | None = None, out_proj_gemm_max: ArrayLike | None = None,
                     out_proj_gemm_half_dim: ArrayLike | None = None) -> MambaTime:
    """Compute time of one Mamba layer for micro-batch b on one GPU; T = b s / cp tokens, t = tp.

    GEMMs on the accelerator's GEMM curve (:func:`scalemodel.cost.compute.gemm_time`), as the other linear layers:
        in_proj  T x (2 d_in + 2GN + H)/t x h          out_proj  T x h x d_in/t
    SSD matmuls (module docstring) as batched GEMMs on the same curve, T/Q chunks, H/t heads, G/t groups,
    forward: (G/t) Q x Q x N [C B^T], (H/t) P x N x Q [chunk state], Q x P x Q and Q x P x N [chunk scan];
    backward: the recomputed C B^T and chunk state, and per head P x N x Q [dstates], Q x P x Q + Q x P x N [dx],
    Q x N x P [dB], Q x N x P [dC], Q x Q x P [dCB], per group 2 x Q x N x Q [bmm backward]; with ``ssd_*`` (peak,
    gemm_max, gemm_half_dim; default the GEMMs' own) at another precision: the Triton kernels run in the inputs'
    16-bit type in an fp8 run; with ``out_proj_*`` (default the GEMMs' own) the out_proj GEMM (forward, and its
    2 x in the backward) at another precision (training.module_precision mamba_out_proj;
    docs/model.md#module-precision).
    (The SSD and its chunk shapes: :mod:`scalemodel.cost.mamba`; docs/model.md#mamba-2-layers.)
    Memory-bound: T x :func:`mamba_eltwise_bytes` + the fp32 chunk-state passes STATE_PASSES x 4 (T/Q) (H/t) P N.
    Backward = 2 x projection GEMMs + the SSD backward matmuls + the backward bytes. Full recompute repeats the
    forward; selective recompute names no Mamba module (Megatron-Core's recompute_modules have none) and adds 0.
    Communication (TP all-reduce / SP gathers of the layer, CP all-to-alls) is not included."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    c = _pos("cp", cp)
    eb = _pos("elem_bytes", elem_bytes)
    kw = dict(peak_flops=peak_flops, memory_bandwidth=memory_bandwidth, gemm_max=gemm_max,
              gemm_half_dim=gemm_half_dim, memory_efficiency=memory_efficiency, elem_bytes=eb)
    skw = _gemm_kwargs(kw, ssd_peak_flops, ssd_gemm_max, ssd_gemm_half_dim)
    T = b * s / c
    h, H, P, N, G, Q = md.hidden, md.heads / t, md.head_dim, md.state_dim, md.groups / t, md.chunk_size
    chunks = T / Q
    okw = _gemm_kwargs(kw, out_proj_peak_flops, out_proj_gemm_max, out_proj_gemm_half_dim)
    proj = gemm_time(T, md.in_proj_width / t, h, **kw) + gemm_time(T, h, md.d_inner / t, **okw)
    cb = gemm_time(Q, Q, N, chunks * G, **skw)
    state = gemm_time(P, N, Q, chunks * H, **skw)
    qpq = gemm_time(Q, P, Q, chunks * H, **skw)
    qpn = gemm_time(Q, P, N, chunks * H, **skw)
    qnp = gemm_time(Q, N, P, chunks * H, **skw)
    qqp = gemm_time(Q, Q, P, chunks * H, **skw)
    ssd_fwd = cb + state + qpq + qpn
    ssd_bwd = cb + state + state + (qpq + qpn) + 2.0 * qnp + qqp + 2.0 * cb
    own_f, own_b = mamba_eltwise_bytes(md, tp=t, sequence_parallel=sequence_parallel, elem_bytes=eb)
    states = STATE_BYTES * chunks * H * P * N
    mkw = dict(memory_bandwidth=memory_bandwidth, memory_efficiency=memory_efficiency)
    mem_f = memory_time(T * own_f + STATE_PASSES_FWD * states, **mkw)
    mem_b = memory_time(T * own_b + STATE_PASSES_BWD * states, **mkw)
    forward = proj + ssd_fwd + mem_f
    backward = 2.0 * proj + ssd_bwd + mem_b
    code = recompute_code(recompute)
    recomp = np.where(code == Recompute.FULL, forward, 0.0)
    flops = mamba.mamba_forward_flops(mamba.mamba_dims_local(md, t), T)
    return MambaTime(forward=forward, backward=backward, recompute=recomp, forward_gemm=proj, forward_ssd=ssd_fwd,
                     forward_memory=mem_f, forward_flops=flops)
