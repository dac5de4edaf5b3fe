"""Accelerator spec: peak dense FLOP/s per precision, memory, memory bandwidth, power."""


from typing import Annotated, Literal

from msgspec import Meta

from scalemodel.errors import InputError
from scalemodel.specs.base import Sourced, Spec, field_error
from scalemodel.specs.quantities import Bandwidth, Bytes, FlopRate, Fraction, HalfPoint, Watts

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4"]
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
Family = Literal["pascal", "volta", "ampere", "hopper", "blackwell", "cdna2", "cdna3", "cdna4", "tpu", "gaudi", "other"]


class GemmCurve(Spec, kw_only=True):
    """A GEMM efficiency curve for one input precision: gemm_max x prod(d / (d + gemm_half_dim))."""

    gemm_max: Annotated[Fraction, Meta(description="asymptotic fraction of this precision's peak for large GEMMs")]
    gemm_half_dim: Annotated[float, Meta(gt=0, le=1e6, description="GEMM dimension at which its factor is one half")]
    source: str = ""


AttentionKernelName = Literal["fa1", "fa2", "fa3", "cudnn", "triton", "xformers", "aiter"]
#: a cuDNN release as the catalog names it: major.minor (9.19 for cuDNN 9.19.1, backend version 91901), at most three
#: digits each (cuDNN 9's CUDNN_VERSION packs the minor into two digits, major * 10000 + minor * 100 + patch:
#: NVIDIA/cudnn-frontend@3929da2 include/cudnn_frontend_shim.h convert_version_to_str), without leading zeros: '09.19'
#: is no name cuDNN prints, and a key '09.19' never matched a run's '9.19' (nor '9.01' a '9.1')
CUDNN_RELEASE_PATTERN = r"^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$"
#: a run's cuDNN version (training.cudnn_release): a release, major.minor, or a full version, major.minor.patch (the
#: container tables' 9.21.1), each part at most three digits without leading zeros; the build number of a package
#: version (9.21.1.3) is not part of it
CUDNN_VERSION_PATTERN = r"^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2}))?$"


class AttentionCurve(Spec, kw_only=True):
    """One direction of a fused attention kernel: attn_max x k / (k + seq_half) x d / (d + head_half) of the 16-bit
    peak, k keys per query, d the head dim (scalemodel.cost.compute.attention_kernel_efficiency)."""

    attn_max: Annotated[Fraction, Meta(description="fraction of the 16-bit peak for long sequences and wide heads")]
    seq_half: Annotated[HalfPoint, Meta(description="keys per query at which the length factor is one half")]
    head_half: Annotated[HalfPoint, Meta(description="head dim at which the head-dim factor is one half")]


class AttentionKernel(Spec, kw_only=True):
    """Fitted forward and backward curves of one attention kernel on this accelerator (scripts/fit_attention.py on
    hardware/measurements/attention.yaml); the backward does 2.5x the forward's FLOPs."""

    fwd: AttentionCurve
    bwd: AttentionCurve
    source: str = ""


def cudnn_release_key(release: str) -> tuple[int, int]:
    """(major, minor) of a cuDNN release or version text ('9.19', '9.21.1'): the order releases compare in (9.9 before
    9.10, which text order gets wrong), as the engine lists the held ones and picks the nearest at or below a run's
    (specs.training.cudnn_release_held)."""
    major, minor = release.split(".")[:2]
    return int(major), int(minor)


#: a cuDNN release's key in ``attention_releases`` (and ``training.cudnn_release``'s text)
CudnnRelease = Annotated[str, Meta(pattern=CUDNN_RELEASE_PATTERN, description=(
    "a cuDNN release as quoted major.minor text without leading zeros, e.g. '9.19' (a bare 9.30 key is the "
    "number 9.3: quote it)"))]
#: one release's curves: cuDNN's kernel only (a release names no other kernel), never empty (an empty block would
#: leave a run that names the release on the default curve without a word)
ReleaseCurves = Annotated[dict[Literal["cudnn"], AttentionKernel], Meta(min_length=1)]


class ComputeEfficiency(Spec, kw_only=True):
    """Achieved fraction of peak as a function of GEMM shape, and of memory bandwidth.

    Per GEMM dimension d the efficiency factor is d / (d + gemm_half_dim); a GEMM reaches
    ``gemm_max`` x the product of its three factors (see scalemodel.cost.compute). ``gemm_max`` and
    ``gemm_half_dim`` describe 16-bit GEMMs (bf16/fp16; also used for tf32/fp32); ``fp8``, when
    given, is the curve of fp8 GEMMs as a fraction of the fp8 peak (fp8 tensor cores reach a lower
    fraction of their doubled peak, e.g. H100 MAMF 71 % fp8 vs 80 % bf16).
    """

    gemm_max: Annotated[Fraction, Meta(description="asymptotic fraction of peak for large 16-bit GEMMs")]
    gemm_half_dim: Annotated[float, Meta(gt=0, le=1e6, description="GEMM dimension at which its factor is one half")]
    memory: Annotated[Fraction, Meta(description="achievable fraction of memory bandwidth")]
    fp8: Annotated[GemmCurve | None, Meta(description="fp8 GEMM curve; None uses the 16-bit curve")] = None
    source: str = ""

    def gemm(self, precision: str) -> tuple[float, float]:
        """(gemm_max, gemm_half_dim) for GEMMs at ``precision``: the fp8 curve when given, else the 16-bit one."""
        if precision == "fp8" and self.fp8 is not None:
            return float(self.fp8.gemm_max), float(self.fp8.gemm_half_dim)
        return float(self.gemm_max), float(self.gemm_half_dim)


class AcceleratorSpec(Sourced, kw_only=True):
    kind: Literal["accelerator"] = "accelerator"
    name: str
    description: str = ""
    vendor: str = ""
    family: Family = "other"
    peak_flops: Annotated[dict[Precision, FlopRate], Meta(description="dense peak FLOP/s per precision")]
    memory: Annotated[Bytes, Meta(description="device memory capacity")]
    memory_reserved: Annotated[Bytes | None, Meta(description=(
        "the slice of memory the driver keeps and the runtime cannot allocate (nvidia-smi -q 'FB Memory Usage' "
        "Reserved = Total - cudaMemGetInfo's total); the model's capacity is memory - memory_reserved "
        "(docs/model.md#memory-allowance). None: none known, the whole of memory is allocatable"))] = None
    memory_bandwidth: Bandwidth
    tdp: Annotated[Watts | None, Meta(description="board power; None where the vendor publishes none")] = None
    compute_efficiency: Annotated[ComputeEfficiency | None, Meta(
        description="GEMM efficiency curve; None uses the family default")] = None
    attention_efficiency: Annotated[dict[AttentionKernelName, AttentionKernel] | None, Meta(description=(
        "fused attention kernels' efficiency curves per kernel (fa1, fa2, fa3, cudnn, triton, xformers, aiter), "
        "fitted to attention-kernel benchmarks; None or a kernel not listed: the core is priced on the GEMM "
        "curve"))] = None
    attention_releases: Annotated[dict[CudnnRelease, ReleaseCurves] | None, Meta(description=(
        "cuDNN's fused attention curve per cuDNN release (major.minor, e.g. '9.19'; key cudnn, the only kernel a "
        "cuDNN release names), each fitted to that release's own published kernel sweep (scripts/fit_attention.py "
        "RELEASE_FITS); a run that names its release (training.cudnn_release) is priced on the cudnn curve of the "
        "nearest release held at or below it instead of attention_efficiency's (docs/model.md#cudnn-release). None: "
        "one curve for every release"))] = None
    compute_units: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="streaming multiprocessors (NVIDIA) or compute units (AMD) on the chip")] = None
    collective_units: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "compute units the collective library's kernels occupy while a large collective runs (NCCL: one "
        "CTA per channel); with compute_units, compute overlapped with communication runs on the rest "
        "(docs/model.md#contention). None or 0: collectives take no compute units (DMA/ICI engines, or "
        "not known)"))] = None
    collective_units_nvls: Annotated[Annotated[int, Meta(ge=0)] | None, Meta(description=(
        "compute units an all-reduce occupies where NCCL runs it as NVLink SHARP (NVLS): the cluster's innermost "
        "NVLink tier has in_network_reduction and NVLS is the priced choice (docs/model.md#contention); every "
        "other collective keeps collective_units (ring / tree channels, which NVLS does not lower), so it needs "
        "collective_units. None: collective_units for every collective"))] = None
    clock_jitter_cv: Annotated[float, Meta(ge=0.0, lt=0.1, description=(
        "coefficient of variation of the chip's compute rate over time at its power limit (the clock's power-"
        "management swing, measured in windows of tens of milliseconds under back-to-back GEMMs): GPUs that "
        "synchronise many times a second run at the pace of the slowest of them, priced as the step's jitter part "
        "(docs/model.md#jitter). 0: not measured, not priced. Below 0.1 (8x the measured 1.18 %): there the "
        "slowest of 1e6 normal rates is still half the mean; from about 0.21 on it would be negative"))] = 0.0

    def _check(self) -> None:
        if not self.peak_flops:
            raise field_error("peak_flops", "needs at least one precision",
                              "a mapping of precision to peak FLOP/s, e.g. bf16: 312 TFLOP/s")
        if self.memory_reserved is not None and self.memory_reserved >= self.memory:
            # review24b: as given (.15g, not .0f: memory 1.5 B was said as "2 B")
            raise field_error("memory_reserved", f"{self.memory_reserved:.15g} B is not less than memory "
                              f"{self.memory:.15g} B", "a slice of memory, less than memory (e.g. 454 MiB)",
                              also="memory")  # --set accelerator.memory=1GB was refused at the built-in file's line
        for name in ("collective_units", "collective_units_nvls"):
            units = getattr(self, name)
            if units and not self.compute_units:
                # fuzz23: collective_units 8 on a TPU (no compute_units) priced nothing and said nothing: the share a
                # collective occupies is collective_units / compute_units
                raise field_error(name, f"{units} without compute_units: the share of the chip a collective "
                                  f"occupies is {name} / compute_units",
                                  f"compute_units (the chip's SMs / CUs) too, or {name} 0 or null",
                                  also="compute_units")
            if self.compute_units and units and units > self.compute_units:
                # 500 of 132 SMs was priced as every SM busy (the share is clamped at 1) without a word
                # also: `--set cluster.accelerator.compute_units=1` was refused at the built-in file's
                # collective_units
                raise field_error(name, f"{units} is more than the chip's compute_units {self.compute_units}",
                                  f"0 to {self.compute_units} (a collective's CTAs run on the chip's own compute "
                                  f"units), or compute_units of at least {units}", also="compute_units")

        if self.collective_units_nvls and not self.collective_units:
            # review26b: collective_units null / 0 ("collectives take no compute units") kept the NVLS count's SMs
            # charged where NVLS runs and none elsewhere, without a word
            raise field_error("collective_units_nvls", f"{self.collective_units_nvls} without collective_units: "
                              "the NVLS count replaces collective_units only where the NVLink tier runs NVLS",
                              "collective_units (the channels NCCL runs with NVLS off) too, or "
                              "collective_units_nvls 0 or null", also="collective_units")

    def peak(self, precision: str) -> float:
        """Peak FLOP/s for a training precision; bf16 falls back to fp16 (and vice versa) when absent."""
        return float(self.peak_flops[self.peak_format(precision)])  # type: ignore[index]

    def peak_format(self, precision: str) -> str:
        """The format whose peak :meth:`peak` gives for a training precision (a V100's bf16 run: fp16), which MFU
        is a share of (predict names it)."""
        fallbacks = {"bf16": ["bf16", "fp16"], "fp16": ["fp16", "bf16"], "tf32": ["tf32", "fp32"],
                     "fp8": ["fp8"], "fp4": ["fp4"], "fp32": ["fp32"], "fp64": ["fp64"]}
        for p in fallbacks.get(precision, [precision]):
            if p in self.peak_flops:
                return p
        raise InputError(f"accelerator {self.name!r} has no {precision} peak",
                         where="precision", allowed=f"one of: {', '.join(self.peak_flops)}")
