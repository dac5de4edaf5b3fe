#!/usr/bin/env python
"""Fit the compute-efficiency curve of scalemodel.cost.compute to published microbenchmarks.

Inputs: hardware/measurements/gemm.yaml (achieved TFLOP/s by GEMM shape) and
hardware/measurements/memory_bandwidth.yaml (BabelStream), plus the catalog peaks and bandwidths
(hardware/accelerators/*.yaml, read through scalemodel.specs so the units are the engine's).

Model (exactly the engine's, via :func:`scalemodel.cost.compute.gemm_time`): a b x [m x k] . [k x n]
GEMM takes max(2bmnk / (peak * eff), bytes / (bandwidth * memory)) with
eff = gemm_max * m/(m+d0) * n/(n+d0) * k/(k+d0).

* ``memory`` per accelerator = least-squares constant through the copy/mul/add/triad (and transform) fractions of
  the nominal bandwidth, i.e. their mean (dot, a read-only reduction, is left out).
* ``gemm_max`` and ``gemm_half_dim`` (d0) per accelerator and precision group (16-bit: bf16/fp16;
  fp8) by ``scipy.optimize.least_squares`` on r_i = ln(t_model / t_measured). With fewer than
  three distinct shapes only gemm_max is fitted and d0 is taken from the donor named in DONORS.
* Only GEMMs of at least MIN_GFLOP are fitted, the range the step model applies the curve to: the
  smallest common per-GPU training GEMM is a 2048-token micro-batch against a 512-wide TP shard of
  a 4096 hidden (2 x 2048 x 512 x 4096 = 8.6 GFLOP; a batched attention core of 8 local heads at
  s = 2048, d = 128 is the same). Smaller calls last a few microseconds and carry a fixed launch
  and tail cost that this curve (no fixed-overhead term) cannot express: fitting every point
  drives H100's gemm_max to its bound 1.0 and d0 to 475, a curve that no longer describes large
  GEMMs (see ``--all``).
  ``--all`` fits every point, to show how much that choice matters.
* A point marked ``fit: false`` is recorded, not fitted. Rule (one accelerator, H200, so far): where scalemodel
  has its own sweep of an accelerator and precision (gemm.yaml source SM-H200: one card at its power limit, the
  session of its layer timing), that sweep alone is fitted; the published points of that accelerator and
  precision (Azure's cuBLASLt sweep, MAMF) stay in the file as records, ``fit: false``, because they come from
  other software at an unstated (Azure, 10,000 warm-up calls) or near-boost (MAMF, 50 + 100 calls) thermal
  state, and mixing them would fit neither state. A MAMF point still bounds gemm_max (below), fitted or not.
  A second reason (OpenXLA's re-measured sm_90 table, source XLA-SM90-2): a table whose values are not the GEMM's
  kernel time. Its FP8 entries are the median over a transpose kernel and the GEMM kernel (29 of 375 exceed H100's
  dense FP8 peak; the source's ``fit_false`` says why); its BF16 entries agree with the older sm_90 table XLA-SM90
  (fitted) within 3 % and stay a record beside it.
  A third reason, tuned and default builds (one group so far, MI300X 16-bit): where a group holds points of a
  per-shape tuned build (PyTorch TunableOp, a hipBLASLt offline-tuning file, or an unreleased library branch) and of
  a released library's default heuristic pick, the default-heuristic points are fitted and the tuned ones recorded,
  because the training stacks the catalog prices run the default: Primus (AMD-AGI/Primus examples/run_pretrain.sh
  @0121ab7d, PRIMUS_HIPBLASLT_TUNING_STAGE default 0, 'no tuning'; its Transformer Engine GEMMs then pick hipBLASLt's
  heuristic solution), Megatron-LM and Transformer Engine on ROCm without PYTORCH_TUNABLEOP_ENABLED (off by default
  in PyTorch). MI300X: MAMF's point (torch 2.5.1+rocm6.3 with TunableOp on) and AMD's MAF (ROCm/hipBLASLt@db8e93b4,
  a development branch) are records; the public torch 2.8.0+rocm6.4 torch.mm timing (gemm.yaml LC-MI300X) is fitted.
  The rule is the build a training run uses, not which level matches a run: with all three fitted the level would
  be 0.521, capped at MAMF's 0.511; MAMF alone gave 0.511 (bound), the default build gives 0.461. An older
  default build is a record too (gemm.yaml TE73-MI300X: two torch.matmul rows of October 2024, before the ROCm 6.4
  hipBLASLt that LC-MI300X and the priced runs use); fitted beside LC-MI300X they would give 0.457.
  MI325X: MAMF (TunableOp on) and AMD's MAF (development branch) are records, HipKittens' torch.matmul baseline
  (no TunableOp set) is fitted; its FP8 has no default-build timing and takes a level transfer (below). MI355X: MAMF
  ran with TunableOp off, learn-cuda's torch.mm on the public ROCm 7.14 wheel and HipKittens' torch.matmul and
  hipblaslt-bench (no --algo_method) use the default pick: all fitted.
* A level transfer (``LEVEL_TRANSFER``: MI325X FP8 by AMD's MAF; gb200 and b300 16-bit and fp8, a100-pcie-80g by
  MAMF, the level rule above) prices a group that has no default-build GEMM timing of
  its own on a measured group's curve (its gemm_max and d0) with gemm_max moved by a published ratio of two chips timed
  by one protocol (same tool, library build and shape; src MAMF is the exception, below: each chip's best shape of
  its own search, on its own torch / CUDA build, B200 2.7.1+cu128, GB200 2.10 nightly+cu130, B300 2.9.1+cu130, A100
  PCIe 2.5.1+cu124 / SXM 2.6.0+cu126, so the ratio carries the builds' spread): AMD's MAF blog times MI325X and
  MI300X on one hipBLASLt build,
  so its tuned level cancels and the ratio is the chips' own, 1519 / 1273 FP8 = 1.193 (BF16 843 / 708 = 1.191: the same
  CDNA3 die sustains a higher clock at 1000 W than at 750 W). Bounded by the group's MAMF fraction like a fit. The YAML
  says BORROWED for what is taken over (d0, and the level's basis).
* Level rule (every group; docs/model.md#blackwell-level-rule): a curve's level is fitted to GEMM timings at
  training-layer shapes through the default library path (XLA's GEMM table, a cuBLASLt or torch.matmul sweep), the
  MAMF point fitted with them and bounding gemm_max (below). A group whose level would rest on its MAMF point alone
  (no other timing, or only ``level: shape-only`` sources), where a chip of the same tensor-core generation has such
  timings in the same precision, is a level transfer (below) from that chip with src MAMF: the ratio of the two MAMF
  fractions, each the best of its own shape search, so the ratio needs no common shape; d0 comes with it unless the
  group's own shape-only sources fix one (fitted under the transferred level). MAMF alone sets a level only
  where no such sibling exists (Gaudi 3). Why: on Hopper the two kinds agree (OpenXLA's sm_90 BF16 table at b 1
  4096^3 runs 0.99 x H100's MAMF, Azure's FP8 sweep 0.98 x), on Blackwell they do not (OpenXLA's sm_100 table at b 1
  4096^3 runs 0.81 x B200's MAMF in BF16 and in FP8), so a MAMF-level Blackwell curve was a best-case kind beside
  B200's and Hopper's realistic-shape ones.
* Sustained-basis rule (sustain19, every group; docs/model.md#sustained-level-rule): the drop of a GEMM's rate under
  continuous load at the power limit (clock throttle) is priced once, in the in-layer factor, which is fitted to
  layer times run for seconds at the power limit against the curve it multiplies. So a level stays on the basis of
  the curve its in-layer factor was fitted against: a group with a factor of its own takes the level of the sweep
  that factor divides (h100-sxm: XLA-SM90 + MAMF BF16, AZ-H100 + MAMF FP8; h200-sxm: its power-limited sweep
  SM-H200, its own sustained-basis factors; mi300x and the A100 factor: Azure's cuBLASLt / hipBLASLt sweeps); a
  group that borrows a factor takes the lender's kind of level (the level rule above; on Hopper, the FP8 lender,
  burst and Azure readings coincide: AZ-H100 alone fits to the MAMF bound 0.709), and a sustained sweep of its own
  (Azure's protocol: 10,000 warm-up + 1,000 timed calls) is a check of the borrowed throttle, not its level. It
  becomes the level only where its ratio to the group's burst level (MAMF) is a clock effect, i.e. both were timed
  through one library build, and that ratio falls outside what the same protocol reads on the lender (Hopper FP8:
  0.985 H100, 0.940 H200): then the borrowed factor misprices the chip's throttle and the sustained sweep sets the
  level with a sustained-basis factor (h200-sxm's). Checked for every group with such a sweep (a100-sxm-80g,
  h100-sxm, h200-sxm, mi300x, gb200, gb300 fp8): none moves. GB200's 0.804 x MAMF is CUDA 12.8 against MAMF's CUDA
  13.0 (and the same run's FP4 reaches 0.76 of its peak where FP8 reaches 0.58); GB300's sweep on CUDA 13.0 reads
  0.937 of GB200's MAMF x the B300 / B200 MAMF ratio, just under Hopper's band (H200 0.940), across builds too.
* FP8 / BF16 bound (every Blackwell and CDNA3 part; docs/model.md#fp8-bf16-ratio, ``FP8_OVER_16BIT``,
  ``fp8_ratio_bound``): after the fits and transfers, a part's fp8 gemm_max is lowered, where needed, until its curve
  prices Transformer Engine's B300 layer GEMMs (gemm.yaml TE-GEMMPROF-B300) no faster than the part's own 16-bit
  curve's time / 1.923, the BF16 / per-tensor FP8 time ratio the guide measured on one card, same shapes and process.
  Level only; d0 stays the group's. Why: the two precisions' levels rest on different evidence (b200 BF16 on the
  sm_100 table, FP8 on the MAMF bound its table fit overshoots; gb200 FP8 on that level with its own smaller d0),
  which put FP8 at 2.06-2.28 x BF16 at training shapes where every published same-source Blackwell pair gives
  1.90-1.98. CDNA3 (amd29): the same bound at AMD's MAF pair (the MI300X, one hipBLASLt build), FP8 1273 / BF16
  708 TFLOP/s = 1.798 (MI325X 1.802); mi300x's BF16 level is LC-MI300X's torch.mm, its FP8 level Azure's
  hipblaslt-bench sweep, which together put FP8 at 1.898 x BF16; mi325x's transferred curves give 1.72, under the
  bound. CDNA4 (mi355x, mi350x) has no entry: no same-build FP8 / BF16 pair found (review29a), so its ratio (0.99 x at
  2048^3 to 2.88 x for the largest GEMMs, isolated: two d0) is unbounded.
* Chip-ratio rule (gb300_29, ``CHIP_RATIO``, ``chip_ratio``; docs/model.md#blackwell-shape-audit): a part with no
  MAMF and no sweep of its own that fixes a curve, priced on a sibling's curves whole, takes them with gemm_max x r
  (both groups, d0 kept) where it has GEMM timings from >= 2 sources of different protocols whose medians (time on the
  sibling's curve over measured time, GEMMs with every side >= 4096) all lie outside, on one side, the band spanned by
  1 and the medians the same protocols read on the other parts of its tensor-core generation against their own
  curves (``CHIP_RATIO_SIBLINGS``); r = the geometric mean of those medians. Microbenchmarks only: it reads no
  training row. gb300 on gb200: tritonbench's torch.matmul (TLX740-GB300) 1.177 against AO-B200 1.018 / TE-GEMMPROF-B300
  1.023; Azure's cuBLASLt FP8 sweep (AZ-GB300) 1.115 against AZ-GB200 0.983: r = 1.146. After it the two sources
  read 1.03 / 0.97 on gb300's own curve, where the siblings read theirs. Limits: TLX740's dtype and build are
  unstated, and AZ-GB300 ran CUDA 13.0 against AZ-GB200's 12.8 (the level rule's MAMF ratios cross builds too).
  The other parts priced on a sibling's curves whole (h100-pcie and h800 on h100-sxm, mi350x on mi355x) hold no GEMM
  timing in gemm.yaml, so the rule has no source there and leaves them as they are (review29b); gb200 and b300 are
  level transfers from b200 (``LEVEL_TRANSFER``), not borrowings, and their sources read inside the band.
* ``gemm_max`` is bounded above by the group's MAMF fraction (MAMF TFLOP/s / catalog peak) where gemm.yaml
  holds a MAMF point for it. MAMF is the best of a brute-force shape search (stas00/ml-engineering's
  mamf-finder), an upper envelope: no GEMM of any shape runs faster. ``gemm_max`` is the curve's supremum
  (every factor d/(d+d0) < 1), so a fit above the MAMF fraction predicts large GEMMs faster than any
  measured shape ran. Unbounded, the H100 BF16 fit reached 0.857 against MAMF's 794.5/989.4 = 0.803
  (its sweep, the OpenXLA table, stops at 4096 and the curve extrapolated 2 % over MAMF at 8192^3 and
  7 % in the limit), and the one-point fits through MAMF's best shape (whose smallest side, 768-2048,
  sits low on a borrowed d0) put the supremum 9-19 % over MAMF (B200, GB200 16-bit, Gaudi 3). The bound
  binds there; the other fits are already under it.
* A source marked ``level: shape-only`` in gemm.yaml's ``sources`` gives the curve's size dependence but not
  its level: its points run the curve at gemm_max x s_src, one free factor per source, so only their ratios to
  each other constrain d0, and the level comes from the group's other points (MAMF). Marked only where a published
  measurement shows the source's level is not the chip's (the reason is stated beside the mark): Azure's
  ND GB200 v6 cuBLASLt FP8 sweep plateaus at 2.91 of 5.0 PFLOP/s (0.58), while the same table's FP4
  GEMMs reach 7.63 of 10.0 (0.76) and MAMF's FP8 search on GB200 reaches 3.62 (0.72; B200, 1000 W, 3.43
  of 4.5 = 0.76). Fitting that level put GB200's fp8 curve under B200's at every shape (2.7 vs 3.1
  PFLOP/s in the catalog at 8192 x 4096 x 14336), for the same die at a higher power limit.
  Since the level rule (above) gb200 fp8's level is a transfer from b200 (its level rested on MAMF alone); this
  sweep still fixes its d0, fitted under the transferred level (review19c: the rule moves a level, and a group's own
  shape measurement is not replaced by a donor's; see DONORS).

The catalog holds ``gemm_max`` = fit x the in-layer factor of the accelerator's family and precision,
``scalemodel.cost.compute.in_layer_gemm_factor`` (the fraction of isolated-GEMM throughput reached inside a
layer, from a per-layer timing: IN_LAYER_GEMM_FACTOR 0.901 from Korthikanti et al. 2022 Table 4 on A100 for
every family without one of its own; Hopper 0.847 BF16 / 0.900 FP8 from Transformer Engine's Getting Started
guide on one H100, the BF16 one borrowed by Blackwell, whose FP8 one (0.813) carries over Hopper's relation to the
FP8 / BF16 kernel ratio Transformer Engine measured; h200-sxm its own; scripts/fit_in_layer_factor.py), so every
curve is on an in-layer basis (the ``in-layer`` value printed beside each fit is that product); ``gemm_half_dim``
and ``memory`` are the fits as they are.

Prints the fitted parameters, the residual summary (rms of ln ratio, worst relative time error) and,
with ``-v``, every point. ``--check`` compares the fits (gemm_max times the in-layer factor) with the
``compute_efficiency`` blocks of the accelerator YAMLs and exits 1 when they disagree beyond the
rounding used there.
Usage: python scripts/fit_compute_curves.py [--all] [-v] [--check]
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from scalemodel.cost.compute import default_efficiency, gemm_time, in_layer_gemm_factor
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: repo_yaml beside this file
from repo_yaml import read_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "hardware" / "measurements" / "gemm.yaml"
MEMBW = ROOT / "hardware" / "measurements" / "memory_bandwidth.yaml"
MIN_GFLOP = 10.0
STREAM_KERNELS = ("copy", "mul", "add", "triad", "transform")  # transform: one read + one write (CCCL-7391)
GROUP = {"bf16": "16bit", "fp16": "16bit", "fp8": "fp8"}
#: accelerator -> accelerator whose `memory` fit it borrows (no published BabelStream run of its own).
MEMORY_DONORS = {"v100-sxm2-32g": "a100-sxm-80g", "a100-pcie-80g": "a100-sxm-80g",
                 "gb200": "b200", "b300": "b200", "gaudi3": "h200-sxm", "mi325x": "mi300x", "mi355x": "mi300x",
                 "gaudi2": "h200-sxm"}
#: (accelerator, group) -> (accelerator, group) whose d0 it borrows when its own points cannot fix d0.
DONORS = {("mi300x", "16bit"): ("mi300x", "fp8"),
          ("gaudi3", "16bit"): ("h100-sxm", "16bit"), ("gaudi3", "fp8"): ("h100-sxm", "16bit"),
          ("gaudi2", "16bit"): ("h100-sxm", "16bit"), ("gaudi2", "fp8"): ("h100-sxm", "16bit"),
          # mi325x / mi355x 16-bit: every fitted default-build point has all sides >= 4096 (HipKittens' 2048^3 / 4096^3
          # torch.matmul calls carry a per-call launch floor and are records); free, d0 runs to its lower bound 0, so
          # these sizes cannot fix it: from mi300x's FP8 sweep, as mi300x's own 16-bit curve (the one default-build AMD
          # sweep with a well-timed GEMM under 4096 per side over 10 GFLOP). mi355x's own FP8 sweep (d0 1041) is not
          # taken: with it no level fits the BF16 points (8192^3 would run 0.70 x the curve's gemm_max)
          ("mi325x", "16bit"): ("mi300x", "fp8"), ("mi355x", "16bit"): ("mi300x", "fp8"),
          # tpu-v5e: two fitted shapes (XLA's jnp.matmul at 4096^3 and 8192^3, gemm.yaml JAX-PALLAS-MATMUL-V5E) cannot
          # fix d0 and a level together (free, gemm_max runs to its bound 1.0 at d0 236, the 4096^3 time carrying a
          # per-call host round trip); d0 from h100-sxm's 16-bit fit as gaudi3's, the one d0 of a default-path sweep of
          # many training shapes (no TPU matmul sweep of more sizes found)
          ("tpu-v5e", "16bit"): ("h100-sxm", "16bit"),
          # tpu-v6e: one device-timed shape (8192^3, gemm.yaml TPUPEDIA-V6E); its host-timed sweep is a record
          ("tpu-v6e", "16bit"): ("h100-sxm", "16bit"),
          # tpu7x: 12 device-timed shapes (gemm.yaml TPUPEDIA-V7), every side 8192-18432: sizes that cannot fix d0 (the
          # shape factor moves under 2 % across them); d0 from h100-sxm's 16-bit fit as tpu-v6e's, from the same script
          ("tpu7x", "16bit"): ("h100-sxm", "16bit")}
#: accelerators with no stream-bandwidth measurement of their own or of a sibling part: ``memory`` stays the family
#: default's (scalemodel.cost.compute.default_efficiency; tpu: 0.85, the A100 curve's), not the A100 BabelStream fit
MEMORY_FAMILY_DEFAULT = {"tpu-v5e", "tpu-v6e", "tpu7x"}
#: (accelerator, group) -> (donor group, (src, prec)) for a group priced on the donor's curve with gemm_max x the
#: ratio of the group's accelerator to the donor's at the same shape in gemm.yaml source src, precision prec
#: (fractions of each one's peak; see the module docstring, "level transfer").
#: src "MAMF": the ratio of the two chips' MAMF fractions, each the best of its own shape search (shape-free by
#: construction); used where a group's only GEMM timing is its MAMF point and a chip of the same die and tensor-core
#: generation has a default-path sweep at training shapes in the same precision (the level rule, module docstring).
LEVEL_TRANSFER: dict[tuple[str, str], tuple[tuple[str, str], tuple[str, str]]] = {
    ("mi325x", "fp8"): (("mi300x", "fp8"), ("AMD-MAF", "fp8")),
    ("a100-pcie-80g", "16bit"): (("a100-sxm-80g", "16bit"), ("MAMF", "bf16")),
    # gb200 (sm_100, the B200 die) and b300 (sm_103, the same fifth-generation tensor cores) have one MAMF point per
    # precision (stas00/ml-engineering@744d01e1); b200's curves are fitted to OpenXLA's sm_100 table (XLA-SM100)
    ("gb200", "16bit"): (("b200", "16bit"), ("MAMF", "bf16")),
    ("b300", "16bit"): (("b200", "16bit"), ("MAMF", "bf16")),
    ("b300", "fp8"): (("b200", "fp8"), ("MAMF", "fp8")),
    # gb200 fp8: its own sweep (AZ-GB200) is level: shape-only, so its level rested on MAMF alone
    ("gb200", "fp8"): (("b200", "fp8"), ("MAMF", "fp8")),
}
#: Per-tensor FP8 against 16-bit GEMMs (the FP8 / BF16 bound, module docstring; docs/model.md#fp8-bf16-ratio):
#: family -> (ratio BF16 / FP8 time at one FLOP count, the (m, n, k) shapes it was timed at, what they are).
#: Blackwell: Transformer Engine's GEMM profiling guide on
#: one B300 SXM6 AC (gemm.yaml TE-GEMMPROF-B300, NVIDIA/TransformerEngine@d0067d0da6 docs/examples/gemm_profiling/
#: gemm_profiling.rst, the pre-quantized run): one layer's 12 GEMMs (h 4096, f 16384, M 15872: QKV, attn out, MLP up,
#: MLP down, each as fprop, dgrad and wgrad, the same (m, n, k) set per pass), BF16 4.250 + 4.434 + 4.418 = 13.102 ms,
#: FP8 current scaling (per-tensor E4M3, cuBLASLt SCALAR_32F) 2.158 + 2.329 + 2.325 = 6.812 ms, back to back per shape
#: in one process: 1.923.
#: CDNA3 (amd29): AMD's Max-Achievable FLOPs blog, Table 1 (gemm.yaml AMD-MAF), MI300X, one hipBLASLt build
#: (ROCm/hipBLASLt@db8e93b4), one protocol (hipblaslt-bench, --rotating 512, about 1 s of load at the power limit):
#: FP8 (f8_fnuz) 1273 TFLOP/s at 4096 x 3648 x 32896 over BF16 708 at 4096 x 4864 x 32896 = 1.798 (the MI325X on the
#: same build: 1519 / 843 = 1.802), each precision at its own tile-fitting shape; the bound compares the two curves at
#: both shapes, where their shape factors are equal (one d0): the ratio of the levels, 0.8 % stricter than each curve at
#: its own shape (which would allow 1.798 x (4864 / 4983.3) / (3648 / 3767.3) = 1.812), as both shapes are one equal
#: tile per CU (304 tiles, K 32896). Table 1 is taken, not its footnote 4 (MI300X FP8 1223.6 TFLOP/s;
#: docs/model.md#cdna3-fp8-bf16-ratio). No cdna4 entry: no same-build CDNA4 pair (docs/model.md#cdna4-fp8-bf16-ratio).
FP8_OVER_16BIT: dict[str, tuple[float, tuple[tuple[int, int, int], ...], str]] = {
    "blackwell": (13.102 / 6.812, ((15872, 4096, 12288), (15872, 4096, 4096), (15872, 4096, 16384),
                                   (15872, 16384, 4096)), "TE-GEMMPROF-B300's 4 layer shapes (one pass)"),
    "cdna3": (1273.0 / 708.0, ((4096, 4864, 32896), (4096, 3648, 32896)), "AMD-MAF's BF16 and FP8 shapes"),
}
#: accelerator -> (the sibling whose curves it borrows whole, its own GEMM sources): the part is priced on the sibling's
#: curves (both groups, d0 kept) with gemm_max x r, the chip-ratio rule (gb300_29, module docstring). r is the geometric
#: mean over the part's sources of each source's median ratio (time on the sibling's curve / measured time) at the
#: compute-bound shapes (every side >= CHIP_RATIO_MIN_SIDE).
CHIP_RATIO: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    # gb300 (sm_103, 1400 W) borrows gb200 (sm_100, 1200 W): same dense peaks, 152 SMs and 2070 / 2062 MHz maximum
    # clock; its two default-path GEMM sources: tritonbench's torch.matmul (facebookexperimental/triton #740, a
    # do_bench burst, clocks and power limit unstated) and Azure's cuBLASLt FP8 sweep (10,000 warm-up calls, CUDA 13.0)
    "gb300": ("gb200", (("TLX740-GB300", "16bit"), ("AZ-GB300", "fp8"))),
}
#: a part source -> the sources of the same protocol (library path and timing) on the other parts of its tensor-core
#: generation, read against their own curves: the band the part's source must lie outside (chip-ratio rule)
CHIP_RATIO_SIBLINGS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "TLX740-GB300": (("AO-B200", "b200", "16bit"), ("TE-GEMMPROF-B300", "b300", "16bit")),  # torch.matmul, burst
    "AZ-GB300": (("AZ-GB200", "gb200", "fp8"),),  # Azure's cuBLASLt protocol
}
CHIP_RATIO_MIN_SIDE = 4096
#: fitted but deliberately not written to the catalog: the A100s keep the ampere family default, which is
#: fitted to layer times (Korthikanti et al. 2022 Table 4) rather than to isolated GEMMs.
NOT_APPLIED = {"a100-sxm-80g", "a100-pcie-80g"}
# The catalog rounds gemm_max and memory to 0.01 and gemm_half_dim to 1; --check allows that much.
TOL = {"gemm_max": 0.006, "gemm_half_dim": 1.0, "memory": 0.006}


def _peak(acc: Any, group: str) -> float:
    return float(acc.peak("fp8" if group == "fp8" else "bf16"))


def fit_memory(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """memory efficiency per accelerator: mean of the streaming kernels' fractions of nominal bandwidth.

    A point marked ``fit: false`` (a superseded version of a table, kept as a record) is left out."""
    by_acc: dict[str, list[float]] = defaultdict(list)
    for p in points:
        if p["kernel"] in STREAM_KERNELS and p.get("fit", True):
            acc = load_accelerator(p["acc"], overrides=[])
            by_acc[p["acc"]].append(p["tbps"] * 1e12 / acc.memory_bandwidth)
    out = {}
    for name, fr in by_acc.items():
        f = np.array(fr)
        m = float(f.mean())  # argmin sum (f_i - m)^2
        out[name] = {"memory": m, "n": len(f), "resid_max": float(np.max(np.abs(f - m)))}
    return out


def _model_time(x: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, b: np.ndarray, peak: float, bw: float,
                mem: float) -> np.ndarray:
    return np.asarray(gemm_time(m, n, k, b, peak_flops=peak, memory_bandwidth=bw, gemm_max=x[0], gemm_half_dim=x[1],
                                memory_efficiency=mem, elem_bytes=2.0))


def mamf_fraction(pts: list[dict[str, Any]], acc: Any, group: str) -> float | None:
    """MAMF / catalog peak for one accelerator and precision group (None without a MAMF point)."""
    best = [float(p["tflops"]) for p in pts if p["src"] == "MAMF"]
    return max(best) * 1e12 / _peak(acc, group) if best else None


def fit_gemm(pts: list[dict[str, Any]], acc: Any, group: str, mem: float, d0_fixed: float | None,
             shape_only: frozenset[str] = frozenset(),
             mamf_points: list[dict[str, Any]] | None = None, level_cap: float | None = None) -> dict[str, Any]:
    """Least squares on ln(t_model / t_measured) for one accelerator and precision group, gemm_max bounded
    by the group's MAMF fraction (of ``mamf_points`` where given, which may be points left out of the fit:
    an upper envelope bounds whether or not it is fitted; else of ``pts``) and by ``level_cap`` where given (a
    level transfer's level, under which a group's own shape-only sweep fixes d0); points of a ``shape_only`` source
    carry one free time factor per source (see the module docstring)."""
    from scipy.optimize import least_squares  # optional heavy dependency, only this script needs it

    m, n, k, b = (np.array([float(p[c]) for p in pts]) for c in ("m", "n", "k", "b"))
    flops = 2.0 * b * m * n * k
    t_meas = flops / (np.array([float(p["tflops"]) for p in pts]) * 1e12)
    peak, bw = _peak(acc, group), float(acc.memory_bandwidth)
    free = sorted({p["src"] for p in pts} & shape_only)
    which = np.array([free.index(p["src"]) if p["src"] in free else -1 for p in pts])
    n_core = 2 if d0_fixed is None else 1

    def resid(x: np.ndarray) -> np.ndarray:
        level = np.where(which >= 0, np.append(x[n_core:], 1.0)[which], 1.0)
        d0 = x[1] if d0_fixed is None else d0_fixed
        t = gemm_time(m, n, k, b, peak_flops=peak, memory_bandwidth=bw, gemm_max=x[0] * level, gemm_half_dim=d0,
                      memory_efficiency=mem, elem_bytes=2.0)
        return np.log(np.asarray(t) / t_meas)

    cap = min(1.0, mamf_fraction(pts if mamf_points is None else mamf_points, acc, group) or 1.0)
    if level_cap is not None:
        cap = min(cap, level_cap)
    start = min(0.8, 0.99 * cap)
    lo, hi = [1e-3] * len(free), [1e3] * len(free)
    if d0_fixed is None:
        sol = least_squares(resid, x0=[start, 100.0] + [1.0] * len(free), bounds=([1e-3, 1e-3] + lo, [cap, 1e4] + hi))
        x = np.concatenate([sol.x[:2], sol.x[2:]])
    else:
        sol = least_squares(resid, x0=[start] + [1.0] * len(free), bounds=([1e-3] + lo, [cap] + hi))
        x = np.concatenate([[sol.x[0], d0_fixed], sol.x[1:]])
    r = resid(np.concatenate([x[:n_core], x[2:]]))
    rel = np.exp(r) - 1.0
    return {"gemm_max": float(x[0]), "gemm_half_dim": float(x[1]), "n": len(pts), "mamf_cap": cap,
            "levels": {src: float(v) for src, v in zip(free, x[2:], strict=True)},
            "rms_log": float(np.sqrt(np.mean(r**2))),
            "worst_rel": float(rel[np.argmax(np.abs(rel))]), "d0_borrowed": d0_fixed is not None,
            "points": list(zip(pts, rel, strict=True))}


def run(all_points: bool = False, verbose: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
    gemm_doc = read_yaml(GEMM)
    gemm = gemm_doc["points"]
    shape_only = frozenset(name for name, src in gemm_doc["sources"].items() if src.get("level") == "shape-only")
    membw = read_yaml(MEMBW)["points"]
    memfit = fit_memory(membw)
    print("memory efficiency (mean of BabelStream copy/mul/add/triad and CCCL transform over nominal bandwidth)")
    for name, f in sorted(memfit.items()):
        print(f"  {name:16s} memory {f['memory']:.3f}  ({f['n']} kernels, max |kernel - fit| {f['resid_max']:.3f})")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    caps: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)  # MAMF points, fitted or not
    for p in gemm:
        if p["src"] == "MAMF":
            caps[(p["acc"], GROUP[p["prec"]])].append(p)
        if p.get("fit", True) and (all_points or 2.0 * p["b"] * p["m"] * p["n"] * p["k"] >= MIN_GFLOP * 1e9):
            groups[(p["acc"], GROUP[p["prec"]])].append(p)
    fits: dict[tuple[str, str], dict[str, Any]] = {}
    # fit the groups that fix d0 themselves first, then the ones that borrow it
    order = sorted((key for key in groups if key not in LEVEL_TRANSFER), key=lambda key: (key in DONORS, key))
    print(f"\nGEMM curve fits ({'all points' if all_points else f'GEMMs >= {MIN_GFLOP:g} GFLOP'}; residual r = "
          "ln(t_model/t_measured))")
    for key in order:
        name, group = key
        acc = load_accelerator(name, overrides=[])
        mem_src = name if name in memfit else MEMORY_DONORS.get(name, "a100-sxm-80g")
        mem = memfit[mem_src]["memory"] if mem_src in memfit else 0.85
        if name in MEMORY_FAMILY_DEFAULT:
            mem_src, mem = f"the {acc.family} family default", default_efficiency(acc.family).memory
        donor = DONORS.get(key)
        d0 = None
        if donor is not None:
            if donor not in fits:
                print(f"  {name} {group}: donor {donor} not fitted, skipped")
                continue
            d0 = fits[donor]["gemm_half_dim"]
        f = fit_gemm(groups[key], acc, group, mem, d0, shape_only, mamf_points=caps.get(key))
        f["memory_from"] = mem_src
        f["memory"] = mem
        f["donor"] = donor
        fits[key] = f
        tag = f" (d0 from {donor[0]} {donor[1]})" if donor else ""
        f["in_layer_factor"] = in_layer_gemm_factor(acc.family, "fp8" if group == "fp8" else "bf16", acc.name)
        in_layer = f["gemm_max"] * f["in_layer_factor"]
        capped = " (= MAMF bound)" if f["gemm_max"] >= f["mamf_cap"] - 5e-4 else ""
        print(f"  {name:16s} {group:6s} gemm_max {f['gemm_max']:.3f}{capped} (in-layer {in_layer:.3f})  "
              f"gemm_half_dim {f['gemm_half_dim']:7.1f}{tag}  "
              f"n {f['n']:3d}  rms ln {f['rms_log']:.3f}  worst {100 * f['worst_rel']:+.1f} %  "
              f"(memory {mem:.3f} from {mem_src})")
        for src, level in f["levels"].items():
            print(f"      {src} shape-only: it reaches {level:.3f} x the curve's gemm_max")
        if verbose:
            for p, e in f["points"]:
                print(f"      b{p['b']} {p['m']}x{p['n']}x{p['k']:<6d} {p['tflops']:8.1f} TFLOP/s  model time "
                      f"{100 * e:+6.1f} %  [{p['src']}]")
    for key, (donor, how) in LEVEL_TRANSFER.items():
        if donor not in fits:
            print(f"  {key[0]} {key[1]}: donor {donor} not fitted, skipped")
            continue
        fits[key] = transfer_level(key, donor, how, fits, gemm, memfit, caps.get(key))
        own = [p for p in groups.get(key, []) if p["src"] in shape_only]
        if own:  # the rule moves the level; the group's own shape-only sweep still fixes its d0 (review19c)
            f = fits[key]
            acc = load_accelerator(key[0], overrides=[])
            own_fit = fit_gemm(groups[key], acc, key[1], f["memory"], None, shape_only, mamf_points=caps.get(key),
                               level_cap=f["gemm_max"])
            if abs(own_fit["gemm_max"] - f["gemm_max"]) > 5e-4:
                raise SystemExit(f"LEVEL_TRANSFER {key}: its own sweep's fit ({own_fit['gemm_max']:.4f}) does not "
                                 f"reach the transferred level {f['gemm_max']:.4f}, so its d0 is not that level's")
            f.update(gemm_half_dim=own_fit["gemm_half_dim"], d0_borrowed=False, n=own_fit["n"],
                     rms_log=own_fit["rms_log"], worst_rel=own_fit["worst_rel"], levels=own_fit["levels"],
                     points=own_fit["points"])
            print(f"      {key[0]} {key[1]}: d0 {own_fit['gemm_half_dim']:.1f} from its own shape-only sweep "
                  f"({', '.join(sorted({p['src'] for p in own}))}) under the transferred level, not {donor[0]}'s "
                  f"{fits[donor]['gemm_half_dim']:.1f}; rms ln {own_fit['rms_log']:.3f}")
    for key in sorted(fits):
        if key[1] == "fp8" and (key[0], "16bit") in fits:
            fp8_ratio_bound(key, fits)
    for name, (sibling, sources) in CHIP_RATIO.items():
        chip_ratio(name, sibling, sources, fits, gemm)
    return fits


def curve_ratios(src: str, name: str, f: dict[str, Any], group: str, gemm: list[dict[str, Any]]) -> list[float]:
    """Time on curve ``f`` over measured time for ``src``'s points of accelerator ``name`` at the compute-bound shapes
    (every side >= CHIP_RATIO_MIN_SIDE), ``name``'s own peak and bandwidth."""
    acc = load_accelerator(name, overrides=[])
    pts = [p for p in gemm if p["src"] == src and p["acc"] == name
           and min(p["m"], p["n"], p["k"]) >= CHIP_RATIO_MIN_SIDE]
    m, n, k, b = (np.array([float(p[c]) for p in pts]) for c in ("m", "n", "k", "b"))
    t_meas = 2.0 * b * m * n * k / (np.array([float(p["tflops"]) for p in pts]) * 1e12)
    t = gemm_time(m, n, k, b, peak_flops=_peak(acc, group), memory_bandwidth=float(acc.memory_bandwidth),
                  gemm_max=f["gemm_max"], gemm_half_dim=f["gemm_half_dim"], memory_efficiency=f["memory"],
                  elem_bytes=2.0)
    return [float(x) for x in np.asarray(t) / t_meas]


def chip_ratio(name: str, sibling: str, sources: tuple[tuple[str, str], ...],
               fits: dict[tuple[str, str], dict[str, Any]], gemm: list[dict[str, Any]]) -> float:
    """The chip-ratio rule (module docstring): ``name`` takes ``sibling``'s curves (both groups, d0 kept) with gemm_max
    x r when it has >= 2 GEMM sources of different protocols whose medians (time on the sibling's curve / measured)
    all lie outside the band the same protocols read on the other parts of the generation against their own curves,
    on one side; r = their geometric mean. Stops (SystemExit) where the conditions do not hold. Sets ``fits``."""
    medians = {}
    for src, group in sources:
        own = curve_ratios(src, name, fits[(sibling, group)], group, gemm)
        band = [float(np.median(curve_ratios(s, acc, fits[(acc, g)], g, gemm)))
                for s, acc, g in CHIP_RATIO_SIBLINGS[src]]
        if not own or not band:
            raise SystemExit(f"CHIP_RATIO {name}: {src} has no compute-bound point or no sibling reading")
        med = float(np.median(own))
        print(f"  {name:16s} {group:6s} {src}: median {med:.4f} x {sibling}'s curve over {len(own)} GEMM(s) "
              f"(every side >= {CHIP_RATIO_MIN_SIDE}); same protocol on the siblings: "
              + ", ".join(f"{s} {v:.4f}" for (s, _, _), v in zip(CHIP_RATIO_SIBLINGS[src], band, strict=True)))
        if min(band + [1.0]) <= med <= max(band + [1.0]):  # the band spans 1 (a source on its curve) and the siblings
            raise SystemExit(f"CHIP_RATIO {name}: {src}'s median {med:.4f} lies inside its siblings' band")
        medians[src] = (med, min(band + [1.0]), max(band + [1.0]))
    above = {med > hi for med, _, hi in medians.values()}
    if len(medians) < 2 or len(above) != 1:
        raise SystemExit(f"CHIP_RATIO {name}: needs >= 2 sources outside their bands on one side, has {medians}")
    r = float(np.exp(np.mean(np.log([med for med, _, _ in medians.values()]))))
    acc = load_accelerator(name, overrides=[])
    for group in ("16bit", "fp8"):
        d = fits[(sibling, group)]
        f = dict(d, gemm_max=d["gemm_max"] * r, ratio=r, donor=(sibling, group), n=0, points=[], levels={},
                 rms_log=0.0, worst_rel=0.0, d0_borrowed=True,
                 in_layer_factor=in_layer_gemm_factor(acc.family, "fp8" if group == "fp8" else "bf16", acc.name))
        fits[(name, group)] = f
        in_layer = f["gemm_max"] * f["in_layer_factor"]
        print(f"  {name:16s} {group:6s} gemm_max {f['gemm_max']:.4f} (in-layer {in_layer:.3f})"
              f"  gemm_half_dim {f['gemm_half_dim']:7.1f}  CHIP RATIO: {sibling} {group} ({d['gemm_max']:.4f}) x "
              f"{r:.4f}, the geometric mean of {', '.join(f'{s} {m[0]:.4f}' for s, m in medians.items())}")
    return r


def fp8_ratio_bound(key: tuple[str, str], fits: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Bound a Blackwell or CDNA3 fp8 curve's gemm_max by the published FP8 / BF16 ratio (``FP8_OVER_16BIT``): at the
    ratio's shapes the fp8 curve prices the GEMMs no faster than the same part's 16-bit curve's time / ratio. Moves
    the level only (d0 stays the group's own); updates ``fits[key]`` in place and prints the bound."""
    name = key[0]
    acc = load_accelerator(name, overrides=[])
    rule = FP8_OVER_16BIT.get(str(acc.family).lower())
    if rule is None:
        return
    ratio, shapes, where = rule
    f8, f16 = fits[key], fits[(name, "16bit")]
    m, n, k = (np.array([float(s[i]) for s in shapes]) for i in range(3))

    def total(f: dict[str, Any], group: str, gemm_max: float) -> float:
        return float(np.sum(gemm_time(m, n, k, 1.0, peak_flops=_peak(acc, group),
                                      memory_bandwidth=float(acc.memory_bandwidth), gemm_max=gemm_max,
                                      gemm_half_dim=f["gemm_half_dim"], memory_efficiency=f["memory"],
                                      elem_bytes=2.0)))

    t16, t8 = total(f16, "16bit", f16["gemm_max"]), total(f8, "fp8", f8["gemm_max"])
    # compute-bound at these shapes (every side >= 4096), so time is 1 / gemm_max and the bound is one division
    bound = f8["gemm_max"] * t8 / (t16 / ratio)
    if not math.isclose(total(f8, "fp8", bound), t16 / ratio, rel_tol=1e-9):
        raise SystemExit(f"FP8_OVER_16BIT {key}: the ratio's shapes are not compute-bound on the fp8 curve")
    f8["ratio_bound"] = bound
    if bound < f8["gemm_max"]:
        print(f"  {name:16s} fp8    gemm_max {f8['gemm_max']:.4f} -> {bound:.4f} (in-layer "
              f"{bound * f8['in_layer_factor']:.3f}), d0 {f8['gemm_half_dim']:.1f} kept: FP8 / BF16 bound, the "
              f"16-bit curve's {1e3 * t16:.3f} ms / {ratio:.3f} at {where} (the fp8 curve priced them at "
              f"{1e3 * t8:.3f} ms, {t16 / t8:.3f} x)")
        f8["gemm_max"] = bound


def transfer_level(key: tuple[str, str], donor: tuple[str, str], how: tuple[str, str],
                   fits: dict[tuple[str, str], dict[str, Any]], gemm: list[dict[str, Any]],
                   memfit: dict[str, dict[str, Any]], mamf_points: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The donor group's curve with gemm_max x a published ratio (``LEVEL_TRANSFER``), bounded by the group's MAMF
    fraction; printed like a fit."""
    name, group = key
    acc = load_accelerator(name, overrides=[])
    src, prec = how  # two chips timed by one protocol at one shape: the ratio of their fractions of peak
    dacc = load_accelerator(donor[0], overrides=[])

    def frac(p: dict[str, Any], a: Any) -> float:
        return float(p["tflops"]) * 1e12 / float(a.peak(prec))

    def key(p: dict[str, Any]) -> tuple[int, ...]:  # MAMF: each chip's best shape of its own search, one per chip
        return (0,) if src == "MAMF" else (p["b"], p["m"], p["n"], p["k"])

    mine = {key(p): frac(p, acc) for p in gemm if p["src"] == src and p["acc"] == name and p["prec"] == prec}
    theirs = {key(p): frac(p, dacc) for p in gemm if p["src"] == src and p["acc"] == donor[0] and p["prec"] == prec}
    shapes = sorted(set(mine) & set(theirs))
    if not shapes:
        raise SystemExit(f"LEVEL_TRANSFER {key}: no {src} {prec} shape timed on both {name} and {donor[0]}")
    ratio = float(np.mean([mine[s] / theirs[s] for s in shapes]))
    basis = f"{src} {prec} {name} / {donor[0]} at {len(shapes)} shape(s)"
    cap = min(1.0, mamf_fraction(mamf_points or [], acc, group) or 1.0)
    d = fits[donor]
    mem_src = name if name in memfit else MEMORY_DONORS.get(name, "a100-sxm-80g")
    f = {"gemm_max": min(cap, d["gemm_max"] * ratio), "gemm_half_dim": d["gemm_half_dim"], "n": 0, "mamf_cap": cap,
         "levels": {}, "rms_log": 0.0, "worst_rel": 0.0, "d0_borrowed": True, "points": [], "donor": donor,
         "memory_from": mem_src, "memory": memfit[mem_src]["memory"] if mem_src in memfit else 0.85,
         "ratio": ratio,
         "in_layer_factor": in_layer_gemm_factor(acc.family, "fp8" if group == "fp8" else "bf16", acc.name)}
    capped = " (= MAMF bound)" if f["gemm_max"] >= cap - 5e-4 else ""
    print(f"  {name:16s} {group:6s} gemm_max {f['gemm_max']:.3f}{capped} (in-layer "
          f"{f['gemm_max'] * f['in_layer_factor']:.3f})  gemm_half_dim {f['gemm_half_dim']:7.1f}  TRANSFERRED from "
          f"{donor[0]} {donor[1]} ({d['gemm_max']:.3f}) x {ratio:.3f} ({basis})  (memory {f['memory']:.3f} from "
          f"{mem_src})")
    return f


def check(fits: dict[tuple[str, str], dict[str, Any]]) -> int:
    """Compare the catalog's compute_efficiency blocks with the fits; 1 when any differs beyond rounding."""
    bad = 0
    for (name, group), f in sorted(fits.items()):
        if name in NOT_APPLIED:
            print(f"check: {name} {group} kept on its family default "
                  f"(fit {f['gemm_max']:.3f} / {f['gemm_half_dim']:.1f})")
            continue
        ce = load_accelerator(name, overrides=[]).compute_efficiency
        if ce is None:
            print(f"check: {name} has no compute_efficiency block")
            bad += 1
            continue
        gm, d0 = ce.gemm("fp8" if group == "fp8" else "bf16")
        if group == "fp8" and ce.fp8 is None:
            print(f"check: {name} has no fp8 curve")
            bad += 1
            continue
        for what, have, want in (("gemm_max", gm, f["gemm_max"] * f["in_layer_factor"]),
                                 ("gemm_half_dim", d0, f["gemm_half_dim"]),
                                 ("memory", ce.memory, f["memory"])):
            if not math.isclose(have, want, abs_tol=TOL[what]):
                print(f"check: {name} {group} {what} {have} in the catalog, fit {want:.3f}")
                bad += 1
    print(f"check: {'all catalog curves match the fits' if not bad else f'{bad} mismatches'}")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    fits = run(all_points="--all" in argv, verbose="-v" in argv)
    return check(fits) if "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
