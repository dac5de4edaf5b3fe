"""Cluster spec: an accelerator, GPUs per node, and network tiers ordered innermost first."""


from typing import Annotated, Any, Literal

import msgspec
import numpy as np
from msgspec import Meta

from scalemodel.choices import KNOWN_PROTOCOLS, PROTOCOL_LABELS, RDMA_TRANSPORTS, check_mtu
from scalemodel.errors import InputError
from scalemodel.specs.accelerator import AcceleratorSpec, Precision
from scalemodel.specs.base import MAX_GPUS, Before, Sourced, Spec, builtin_ref, field_error
from scalemodel.specs.quantities import (
    Bandwidth,
    Bytes,
    FlopRate,
    Fraction,
    PricePerHour,
    Seconds,
    SecondsOrZero,
    Watts,
)

Topology = Literal["switch", "mesh", "torus", "ring", "rail"]
Transport = Literal["tcp", "roce", "ib"]
Distribution = Literal["normal", "lognormal", "gamma", "weibull", "exp", "shifted-exp"]
#: The nodes' host CPU as NCCL classifies it (scalemodel.cost.nccl.HOST_CPUS; docs/model.md#nccl-ll-cap)
HostCpu = Literal["intel", "amd", "arm", "power", "other"]


#: What a tier's protocol takes, for the type check's refusal of a value that is not text (``protocol: []`` was
#: "Input should be a valid string (got []); a string", fuzz29); a label it does not know: ClusterSpec's tier check
_PROTOCOL = Before(allowed=f"one of {PROTOCOL_LABELS} (any case), or leave it out")


class TierSpec(Sourced, kw_only=True):
    name: str
    span: Annotated[int, Meta(gt=0, le=MAX_GPUS, description="GPUs reachable inside this tier (cumulative)")]
    bandwidth: Annotated[Bandwidth, Meta(description="line rate per GPU, per direction")]
    latency: Annotated[Seconds, Meta(description="per-message latency (alpha)")]
    efficiency: Annotated[Fraction, Meta(description="achievable fraction of line rate, 1e-6 <= e <= 1")]
    oversubscription: Annotated[float, Meta(ge=1.0, le=1e6,
        description="taper of traffic leaving the tier below")] = 1.0
    in_network_reduction: Annotated[bool, Meta(description="SHARP / NVLS style reduction in switches")] = False
    topology: Topology = "switch"
    protocol: Annotated[str, _PROTOCOL, Meta(description=(
        f"link label, any case: {PROTOCOL_LABELS}; omitted: the innermost tier is NVLink-class, the others "
        "network"))] = ""
    transport: Annotated[Transport | None, Meta(description=(
        "transport profile (docs/model.md#transport): tcp (kernel TCP/IP over Ethernet), roce (RoCE v2) or ib "
        "(InfiniBand). When given, latency is read as the network hop with a kernel-bypass transport and "
        "efficiency as the share left besides headers; the profile adds its per-message software cost and "
        "divides by its header efficiency. Omitted: latency and efficiency are end-to-end measurements"))] = None
    mtu: Annotated[Bytes | None, Meta(description=(
        "link MTU for the transport's header overhead: the Ethernet MTU for tcp and roce (default 1500), the IB "
        "MTU for ib (256-4096, default 4096); needs transport"))] = None
    registration_reuse: Annotated[Annotated[float, Meta(ge=1.0, le=1e12)] | None, Meta(description=(
        "collectives per RDMA memory registration of the buffer (1: registered on every call); omitted: "
        "registered once, as NCCL's internal buffers are; needs transport roce or ib"))] = None
    net_overhead: Annotated[SecondsOrZero | None, Meta(description=(
        "NCCL's per-step network post overhead (NCCL_NET_OVERHEAD, the LL/LL128 figure; x3 with Simple): every "
        "step of a flat all-reduce / reduce-scatter / all-gather ring that crosses this tier costs at least this "
        "(docs/model.md#ring-net-overhead). Omitted: NCCL's default for the cluster's host_cpu, 1 us (2 us on amd "
        "hosts), on a network tier (0 on the innermost tier, on NVLink/PCIe-class tiers and on clusters with an "
        "ici tier, which do not run NCCL)"))] = None
    full_mesh: Annotated[bool, Meta(description=(
        "the innermost tier is a full mesh of direct GPU-to-GPU links (topology: mesh, no switch; AMD Instinct "
        "xGMI: 7 links to the 7 peers of an 8-GPU node): bandwidth is read as span - 1 links busy at once, a "
        "collective over g GPUs of a domain reaches (g - 1) / (span - 1) of it and a send to one peer one link "
        "(docs/model.md#full-mesh). Omitted: false (a hybrid cube mesh such as DGX-1's is priced as a switch)"))
    ] = False
    nics_per_node: Annotated[Annotated[int, Meta(gt=0, le=MAX_GPUS)] | None, Meta(description=(
        "network devices a node has on this (network) tier as NCCL's topology search sees them: one per NIC port "
        "(aws-ofi-nccl's grouped EFA rails of one GPU count once). NCCL's search graph carries whole channels a NIC, "
        "so NICs shared by several GPUs hold fewer channels across nodes than one NIC a GPU, and cap the Tree "
        "all-reduce lower (docs/model.md#nccl-tree-caps); must divide gpus_per_node or be a multiple of it. "
        "Omitted: one NIC a GPU"))] = None
    torus_dims: Annotated[Annotated[list[Annotated[int, Meta(ge=1, le=MAX_GPUS)]], Meta(min_length=1, max_length=6)]
                          | None, Meta(
        description="extents of a torus tier's dimensions (topology: torus), e.g. [32, 32]; their product is the "
                    "number of torus nodes, span / the inner tier's span (docs/model.md#torus)")] = None

    def _check(self) -> None:
        if self.transport is None:
            if self.mtu is not None or self.registration_reuse is not None:
                raise ValueError("mtu and registration_reuse need a transport; add transport: tcp, roce or ib, or "
                                 "leave them out")
            return
        if self.mtu is not None:
            try:
                check_mtu(self.transport, self.mtu)
            except InputError as exc:
                raise ValueError(f"mtu: {exc.what}; allowed: {exc.allowed}") from None
        if self.registration_reuse is not None and self.transport not in RDMA_TRANSPORTS:
            raise ValueError(f"registration_reuse applies to RDMA transports (roce, ib), not {self.transport!r}; "
                             "leave it out for tcp")


#: Upper bound (exclusive) of a per-worker step-time coefficient of variation: far beyond measured jitter (a few
#: percent to ~1), and where the order-statistic integrals still give finite values for every distribution.
STRAGGLER_CV_MAX = 10.0


#: The smallest positive gamma cv a spec or an option takes. The shape 1/cv^2 is a finite double only for cv^2 >=
#: ~5.6e-309, and the order-statistic quadrature of cost/stragglers.py is finite from cv ~1.5e-154 up (fuzz31: a cv of
#: 1e-200 gave a NaN straggler time, which predict printed as 0 tokens/s); local SGD's sum of H <= 1e8 steps has cv /
#: sqrt(H), so an input of at least 1e-140 stays above :data:`GAMMA_CV_FINITE` there. Below it the jitter is 1e-140 of
#: the step, nothing a double resolves.
GAMMA_CV_MIN = 1e-140
#: The smallest positive gamma cv the order statistics are computed for (a derived cv included; above ~1.5e-154).
GAMMA_CV_FINITE = 1e-152


#: The Weibull shape solve's bracket, k in [0.02, 1e5] (cost/stragglers.weibull_shape_from_cv): the cv it spans,
#: cv(k)^2 = Gamma(1 + 2/k) / Gamma(1 + 1/k)^2 - 1, is [1.2825e-5, 3.18e14]; outside it the bisection returns the
#: bracket's end (a wrong shape, silently). Inside it (fuzz32, docs/model.md#weibull-range): the solved k gives back
#: its cv to 4.5e-7 at k 1e5 (the zeta series of ln Gamma(1 + x); the solve's difference of two ln Gamma cancels to
#: 3e-6 at k 3e5 and 3.4e-3 at 1e7, hence the bracket's end), and E[X_(k:N)] from the 96-node quadrature agrees with
#: adaptive quadrature of the exponential order statistic to 3e-10 (its excess over the mean to 3e-11) for N up to
#: 1e8 at every cv in between. The range taken, a cv of 0 or in [WEIBULL_CV_MIN, WEIBULL_CV_MAX], lies inside.
WEIBULL_SHAPE_RANGE = (0.02, 1e5)
WEIBULL_CV_MIN = 1.3e-5
WEIBULL_CV_MAX = 1e14


def cv_refusal(dist: str, cv: Any, gamma_min: float = GAMMA_CV_MIN) -> tuple[str, str] | None:
    """Why the coefficient of variation ``cv`` (a number or a numpy array, each >= 0) cannot describe the step-time
    distribution ``dist``, as (what, allowed); None when it can. The one statement of the per-distribution ranges:
    a cluster's ``variability`` (:class:`Variability`), ``--cv`` and ``--straggler-cv``, and the order statistics
    (cost/stragglers.py, with ``gamma_min`` :data:`GAMMA_CV_FINITE`, for the cv they derive) read it."""
    c = np.asarray(cv, dtype=float)
    if dist == "shifted-exp" and np.any(c > 1):
        return ("shifted exponential needs cv <= 1 (the shift mean*(1-cv) must be >= 0)",
                "0 <= cv <= 1, or use dist=exp/gamma/lognormal")
    if dist == "weibull" and np.any((c > 0) & ((c < WEIBULL_CV_MIN) | (c > WEIBULL_CV_MAX))):
        return (f"a Weibull cv is outside [{WEIBULL_CV_MIN:g}, {WEIBULL_CV_MAX:g}]",
                f"cv in [{WEIBULL_CV_MIN:g}, {WEIBULL_CV_MAX:g}] or exactly 0 (where the shape solve and the order "
                "statistics are accurate)")
    if dist == "gamma" and np.any((c > 0) & (c < gamma_min)):
        return (f"a gamma cv below {gamma_min:g} has a shape 1/cv^2 beyond what the order statistics resolve",
                f"cv >= {gamma_min:g}, or exactly 0 (no jitter)")
    return None


class Variability(Spec, kw_only=True):
    """Per-worker step-time variability (stragglers): distribution and coefficient of variation."""

    dist: Distribution = "lognormal"
    cv: Annotated[float, Meta(ge=0.0, lt=STRAGGLER_CV_MAX)] = 0.0
    source: str = ""

    def _check(self) -> None:
        if (why := cv_refusal(self.dist, self.cv)) is not None:
            raise field_error("cv", f"{why[0]} (dist {self.dist}, cv {self.cv:g})", why[1], also="dist")


class ParameterServerSpec(Spec, kw_only=True):
    """Dedicated parameter-server (CPU) machines and how tensors are sharded over them
    (docs/model.md#parameter-server). Used only with ``dp_comm: ps:K``."""

    nic_bandwidth: Annotated[Bandwidth | None, Meta(description=(
        "line rate of one dedicated server's NIC(s), per direction; default: a GPU node's NIC bandwidth "
        "(gpus_per_node x the per-GPU line rate of the first tier outside the node), as in BytePS's "
        "equal-NIC analysis"))] = None
    memory_bandwidth: Annotated[Bandwidth, Meta(description=(
        "server DRAM bandwidth for summation; default 204.8 GB/s = one socket of 8 DDR4-3200 channels "
        "(8 x 25.6 GB/s; Intel Xeon Platinum 8380 / AMD EPYC 7763 datasheets)"))] = 204.8e9
    partition_bytes: Annotated[Bytes, Meta(description=(
        "tensors are cut into pieces of at most this size, dealt to servers and pipelined "
        "(BytePS BYTEPS_PARTITION_BYTES default 4096000)"))] = 4096000.0
    shard_imbalance: Annotated[Annotated[float, Meta(ge=1.0, le=1e6)] | None, Meta(description=(
        "largest server load / mean server load; default: equal partitions dealt round-robin, "
        "k ceil(c/k)/c for c partitions"))] = None
    source: str = ""


#: The version of the ``calibration`` block `scalemodel calibrate runs` writes into its overlay. 1 is implicit: overlays
#: written before the block existed (no residuals; engine/intervals.py keeps the published-runs band for them and says
#: why). 2: the fit's per-run residuals, leave-one-out where the run count allows (docs/model.md#intervals).
CALIBRATION_VERSION = 2
#: At most this many residual rows: the runs one `calibrate runs` reads (specs.runs.MAX_RUNS, which imports this module)
MAX_CALIBRATION_RUNS = 1000
#: A leave-one-out refit needs this many runs (engine.calibrate_runs.MIN_LOO_RUNS, which imports this module)
MIN_LOO_RUNS = 3


class CalibrationRun(Spec, kw_only=True):
    """One measured run's residual under the fitted factors, as a signed speed error e = measured step / predicted
    step - 1 (the validation residuals' convention: the measured step is t (1 + e)), with the family keys the band
    is matched on. The key is ``run``, not ``name``: ``extends:`` merges lists of named entries by name, and a
    recalibration's residuals must replace, not extend, the ones of the overlay it extends."""

    run: Annotated[str, Meta(max_length=80)] = ""  # a run's label (specs.runs cuts it to 80 characters)
    gpus: Annotated[int, Meta(gt=0, le=MAX_GPUS)]
    parallelism: Literal["TP/PP/DP", "FSDP/ZeRO-3"]
    model: Literal["dense", "MoE"]
    precision: Literal["fp32", "16-bit", "fp8", "fp4"]
    in_sample: Annotated[float, Meta(gt=-1.0, lt=100.0, description=(
        "speed error of the full fit on this run (the run was one of those fitted)"))]
    leave_one_out: Annotated[Annotated[float, Meta(gt=-1.0, lt=100.0)] | None, Meta(description=(
        "speed error of a refit without this run, predicting it (out of sample); null when the fit had too few "
        "runs for it"))] = None


#: A value per tier, by the tier's name (CalibrationHardware's tier fields).
_TierName = Annotated[str, Meta(max_length=200)]
_Tapers = Annotated[dict[_TierName, Annotated[float, Meta(ge=1.0, le=1e6)]], Meta(max_length=64)]
_Spans = Annotated[dict[_TierName, Annotated[int, Meta(gt=0, le=MAX_GPUS)]], Meta(max_length=64)]
_Latencies = Annotated[dict[_TierName, Seconds], Meta(max_length=64)]


class CalibrationHardware(Spec, kw_only=True):
    """The hardware the runs ran on (:meth:`ClusterSpec.hardware`), which the fitted factors and their errors describe:
    a cluster that extends the overlay and changes it (another accelerator, its peak or memory bandwidth, a tier's line
    rate, oversubscription, span or latency) takes the published runs' band, and says why (engine/intervals.py)."""

    accelerator: Annotated[str, Meta(max_length=200)]
    gpus_per_node: Annotated[int, Meta(gt=0, le=MAX_GPUS)]
    tiers: Annotated[dict[Annotated[str, Meta(max_length=200)], Bandwidth], Meta(max_length=64, description=(
        "each network tier's line rate per GPU (bandwidth), by name"))]
    peak_flops: Annotated[dict[Precision, FlopRate] | None, Meta(description=(
        "the accelerator's dense peak FLOP/s per precision, of which the fitted compute factor scales a fraction (a "
        "--set or a derived spec changes it under the same name); absent: an overlay written before it was recorded, "
        "not checked"))] = None
    memory_bandwidth: Annotated[Bandwidth | None, Meta(description=(
        "the accelerator's memory bandwidth, likewise; absent: not checked"))] = None
    # the fabric's shape and alpha, which the fit does not set (it scales a tier's efficiency, not its taper, how many
    # GPUs it spans or its latency): a derived overlay with a 2:1 taper kept the calibrated band
    oversubscription: Annotated[_Tapers | None, Meta(description=(
        "each tier's oversubscription (taper of traffic leaving the tier below), by name; absent: an overlay written "
        "before it was recorded, not checked"))] = None
    span: Annotated[_Spans | None, Meta(description=(
        "each tier's span (GPUs reachable inside it, cumulative), by name; absent: not checked"))] = None
    latency: Annotated[_Latencies | None, Meta(description=(
        "each tier's per-message latency (alpha), by name; absent: not checked"))] = None


class CalibrationSpec(Spec, kw_only=True):
    """What `scalemodel calibrate runs` fitted this overlay to, for prediction intervals (docs/model.md#intervals)."""

    version: Annotated[Literal[2], Meta(description=(
        "version of this block: 2 (residuals per run); an overlay without the block is version 1"))]
    runs: Annotated[int, Meta(gt=0, le=MAX_CALIBRATION_RUNS, description="measured runs fitted")]
    factors: Annotated[int, Meta(ge=0, le=MAX_CALIBRATION_RUNS, description=(
        "factors fitted (the multipliers determined, and the overhead)"))]
    method: Annotated[Literal["leave-one-out", "in-sample", "none"], Meta(description=(
        "residuals the band is built from: leave-one-out (each run predicted by a refit without it), in-sample "
        "(the full fit's own, optimistic), none (as many factors as runs: zero by construction, no band)"))]
    reason: Annotated[str, Meta(max_length=1000)] = ""
    residuals: Annotated[list[CalibrationRun], Meta(min_length=1, max_length=MAX_CALIBRATION_RUNS)]
    hardware: Annotated[CalibrationHardware | None, Meta(description=(
        "the hardware the runs ran on; a cluster that extends this overlay with another accelerator, node size or "
        "tier line rate takes the published runs' band (absent: an overlay written before it was recorded, not "
        "checked)"))] = None

    def _check(self) -> None:
        """The block as `calibrate runs` writes it (engine.calibrate_runs._calibration_block): one residual per run,
        and a method the run and factor counts allow (docs/model.md#calibrated-intervals). A hand-edited block that
        breaks them gave a band from rows the fit never had ("8 of 100 runs"), or none without a word."""
        m, p = self.runs, self.factors
        if len(self.residuals) != m:
            raise field_error("runs", f"{m} runs but {len(self.residuals)} residuals",
                              "the number of rows under residuals (one per fitted run)")
        if self.method == "none" and m > p:
            raise field_error("method", f"'none' with {m} runs for {p} factors (none: no more runs than factors)",
                              f"'in-sample' or 'leave-one-out' for {m} runs and {p} factors")
        if self.method != "none" and m <= p:
            raise field_error("method", f"{self.method!r} with {m} runs for {p} factors: the residuals are zero by "
                              "construction", "'none' when there are no more runs than factors")
        if self.method == "leave-one-out":
            if m < MIN_LOO_RUNS or m - 1 < p:
                raise field_error("method", f"'leave-one-out' with {m} runs for {p} factors (a refit without one run "
                                  f"needs at least as many runs as factors, and {MIN_LOO_RUNS} runs in all)",
                                  "'in-sample'")
            missing = [i for i, r in enumerate(self.residuals) if r.leave_one_out is None]
            if missing:
                raise field_error(f"residuals[{missing[0]}].leave_one_out", "null under method 'leave-one-out'",
                                  "the refit's speed error of this run, a number > -1 and < 100")


#: A node's host DRAM, bytes: at least 1 GB (a bare 2048 is 2 KB, a wrong unit: no training node has less), at most
#: 100 TB (past the largest single-system servers' memory; a typo of PB or EB is refused, not priced).
HOST_MEMORY_RANGE = (1e9, 1e14)


class ClusterSpec(Sourced, kw_only=True):
    kind: Literal["cluster"] = "cluster"
    name: str
    description: str = ""
    accelerator: Annotated[AcceleratorSpec, builtin_ref("accelerator")]
    gpus_per_node: Annotated[int, Meta(gt=0, le=MAX_GPUS)]
    max_gpus: Annotated[Annotated[int, Meta(gt=0, le=MAX_GPUS)] | None, Meta(
        description="largest deployment the spec describes")] = None
    tiers: Annotated[list[TierSpec], Meta(min_length=1, description="network tiers, innermost first")]
    host_bandwidth: Annotated[Bandwidth | None, Meta(description=(
        "GPU <-> host-memory link per GPU, per direction (PCIe, NVLink-C2C): the rate activation offload "
        "(strategy offload_layers) moves bytes at; none: offload cannot be priced"))] = None
    host_memory: Annotated[Bytes | None, Meta(description=(
        "host (CPU) DRAM per node, the capacity the model states of strategy offload_states must fit in "
        f"(docs/model.md#host-memory), {HOST_MEMORY_RANGE[0] / 1e9:g} GB .. {HOST_MEMORY_RANGE[1] / 1e12:g} TB; "
        "none: unknown, the host-memory check is not made and memory says so"))] = None
    price_per_gpu_hour: PricePerHour | None = None
    node_power: Watts | None = None
    variability: Variability = msgspec.field(default_factory=Variability)
    parameter_server: ParameterServerSpec = msgspec.field(default_factory=ParameterServerSpec)
    step_overhead: Annotated[SecondsOrZero, Meta(description=(
        "fixed seconds every training step spends outside the modelled parts (kernel launches, data loading, "
        "logging, ...), added to each step as the breakdown part 'overhead'; 0 unless measured, e.g. fitted by "
        "`scalemodel calibrate runs` (docs/model.md#overhead)"))] = 0.0
    overlap_efficiency: Annotated[Fraction, Meta(description=(
        "fraction of each compute window that may hide communication (TP backward under the weight-gradient "
        "GEMMs, CP under the attention core, DP and FSDP/ZeRO-3 under the backward and forward); 1 = the whole "
        "window; fitted by `scalemodel calibrate runs` (docs/model.md#overlap-efficiency)"))] = 1.0
    nccl_tuner: Annotated[Literal["", "aws-ofi-p5"], Meta(description=(
        "NCCL tuner plugin that picks the all-reduce algorithm and protocol: '' (NCCL's own choice; the model "
        "takes the fastest NCCL algorithm) or 'aws-ofi-p5' (aws-ofi-nccl's region tuner for p5/p5e, v1.16.3: "
        "at 8, 2 or 1 ranks a node on 3 or more nodes its size x ranks regions name Tree/Ring LL128, Tree/Ring "
        "Simple or NVLSTree for all-reduce, and Ring Simple for all-gather / reduce-scatter at 1 rank a node; "
        "docs/model.md#tuner-plugin)"))] = ""
    host_cpu: Annotated[HostCpu | None, Meta(description=(
        "the nodes' host CPU as NCCL's topology classifies it: intel or amd (x86 vendors), arm or power (non-x86), "
        "other (another x86 vendor, e.g. Zhaoxin). Across nodes NCCL caps the LL protocol's bus bandwidth by the "
        "host: AMD hosts 22.5 GB/s on 2 nodes and 19.0 GB/s on 3 or more, every other host 39.0 and 20.4 GB/s "
        "(NVIDIA/nccl src/graph/tuning.cc llMaxBws; docs/model.md#nccl-ll-cap), and its default network post overhead "
        "a ring step is 2 us on amd hosts, 1 us on the others (getNetOverhead; tiers[].net_overhead). Omitted: "
        "unknown, priced as an Intel host"))] = None
    calibration: Annotated[CalibrationSpec | None, Meta(description=(
        "written by `scalemodel calibrate runs` into its overlay: the fitted runs' residuals, from which predictions "
        "on this cluster take their band (docs/model.md#intervals)"))] = None

    def hardware(self) -> dict[str, Any]:
        """What the hardware is, as a calibration block records it (:class:`CalibrationHardware`): the accelerator's
        name, peak FLOP/s per precision and memory bandwidth (a --set of either keeps the name), the GPUs per node
        and each tier's line rate, oversubscription, span and latency; not the efficiencies, which `calibrate runs`
        fits."""
        return {"accelerator": self.accelerator.name, "gpus_per_node": int(self.gpus_per_node),
                "tiers": {t.name: float(t.bandwidth) for t in self.tiers},
                "peak_flops": {str(p): float(f) for p, f in self.accelerator.peak_flops.items()},
                "memory_bandwidth": float(self.accelerator.memory_bandwidth),
                "oversubscription": {t.name: float(t.oversubscription) for t in self.tiers},
                "span": {t.name: int(t.span) for t in self.tiers},
                "latency": {t.name: float(t.latency) for t in self.tiers}}

    def _check(self) -> None:
        if self.host_memory is not None and not HOST_MEMORY_RANGE[0] <= self.host_memory <= HOST_MEMORY_RANGE[1]:
            raise field_error("host_memory", f"{self.host_memory:.4g} B per node is not a node's DRAM",
                              f"{HOST_MEMORY_RANGE[0] / 1e9:g} GB .. {HOST_MEMORY_RANGE[1] / 1e12:g} TB per node "
                              "(e.g. 2TB), or leave it out where unknown")
        try:
            self._tiers_nest(self.tiers)
        except ValueError as exc:
            raise field_error("tiers", " ".join(str(exc).split())) from None
        outer = self.tiers[-1]
        if self.max_gpus is not None and self.max_gpus > outer.span:  # no tier would connect the GPUs beyond it
            raise field_error("max_gpus", f"{self.max_gpus} GPUs is more than the outermost tier {outer.name!r} "
                              f"spans ({outer.span}): no tier connects them", f"max_gpus <= {outer.span}, or an outer "
                                                                               "tier that spans them all",
                              also="tiers")  # fuzz27: --set cluster.tiers.3.span was refused at the file's max_gpus
        if self.max_gpus is not None and self.max_gpus % self.gpus_per_node:
            raise field_error("max_gpus", f"{self.max_gpus} GPUs is not whole nodes of {self.gpus_per_node}",
                              f"a multiple of gpus_per_node ({self.gpus_per_node})", also="gpus_per_node")
        if self.tiers[0].net_overhead is not None:
            # round 18: accepted and never read. NCCL adds its net overhead to a ring's steps only where the ring
            # leaves its node (tuning.cc, nNodes > 1); cost.algorithms._ring_hops reads it on the crossed outer tiers
            inner = self.tiers[0]
            raise field_error("tiers", f"tiers[0] ({inner.name!r}) net_overhead {inner.net_overhead:g} s: the innermost"
                              " tier's ring steps never leave a node, and NCCL pays its net overhead only on rings"
                              " that cross a network tier", "leave it out there, or give it on an outer (network) tier")
        self._check_nics()
        acc = self.accelerator
        off_p5 = {"accelerator": str(getattr(acc, "family", "")) != "hopper", "gpus_per_node": self.gpus_per_node != 8,
                  "tiers": any(str(t.protocol).lower() == "ici" for t in self.tiers)}
        if self.nccl_tuner == "aws-ofi-p5" and any(off_p5.values()):
            # round 18: priced on an A100 or an MI300X cluster (and dropped without a word on a TPU pod). aws-ofi-nccl
            # v1.16.3 src/tuner/nccl_ofi_tuner.cpp lines 100-107 picks the p5/p5e regions only where the instance is
            # p5.48xlarge or p5e.48xlarge (8 H100 / H200 GPUs); elsewhere NCCL's own tuner decides
            # fuzz28: a tier of protocol ici was refused by the GPUs a node alone (8 Hopper GPUs, as the rule allows):
            # the cluster and the ici tier are named, and the allowed cluster says it has none
            ici = next((f", whose tier {t.name[:40]!r} (tiers[{i}]) is an ICI torus link (protocol ici), not EFA"
                        for i, t in enumerate(self.tiers) if str(t.protocol).lower() == "ici"), "")
            raise field_error("nccl_tuner", f"'aws-ofi-p5' on {self.gpus_per_node} {getattr(acc, 'name', '?')} "
                              f"accelerators a node ({getattr(acc, 'family', '?')}) of cluster {self.name[:40]!r}"
                              f"{ici}: aws-ofi-nccl loads its p5/p5e regions only on p5.48xlarge / p5e.48xlarge "
                              "instances (8 H100 or H200 GPUs a node, EFA between nodes)",
                              "'' (NCCL's own choice) on this cluster, or a cluster of 8 Hopper GPUs a node and no "
                              "tier of protocol ici", also=next(k for k, off in off_p5.items() if off))  # fuzz27
        ici_tier = next(((i, t) for i, t in enumerate(self.tiers) if str(t.protocol).lower() == "ici"), None)
        if ici_tier is not None and str(getattr(acc, "family", "")) != "tpu":
            # tpu31: an ICI tier turned NCCL's protocol layer off on every tier of the cluster (nccl.runs_nccl), so a
            # GPU cluster that labelled a link 'ici' was priced as XLA on a TPU. ICI is the TPU's inter-chip link
            # (docs/model.md#torus); on GPUs the collectives are NCCL's / RCCL's whatever the link: refused
            i, t = ici_tier
            raise field_error("tiers", f"tiers[{i}] ({t.name[:40]!r}) protocol 'ici' on {getattr(acc, 'name', '?')} "
                              f"accelerators ({getattr(acc, 'family', '?')}): ICI is a TPU's inter-chip interconnect, "
                              "whose collectives XLA runs without NCCL's protocol layer; a GPU cluster runs NCCL / "
                              "RCCL on every tier",
                              "another link label (e.g. nvlink, nvswitch, xgmi, pcie, rdma, roce, efa, tcp), or a TPU "
                              "accelerator (family tpu)", also="accelerator")

    def _check_nics(self) -> None:
        """``nics_per_node`` only on a network tier (the innermost tier's GPUs reach each other without a NIC), and a
        whole number of GPUs a NIC or of NICs a GPU (docs/model.md#nccl-tree-caps)."""
        g = self.gpus_per_node
        for i, t in enumerate(self.tiers):
            n = t.nics_per_node
            if n is None:
                continue
            if i == 0:
                raise field_error("tiers", f"tiers[0] ({t.name!r}) nics_per_node {n}: the innermost tier's GPUs "
                                  "reach each other without a NIC", "leave it out there, or give it on a network tier")
            if g % n and n % g:
                raise field_error("tiers", f"tiers[{i}] ({t.name!r}) nics_per_node {n} for {g} GPUs a node: neither "
                                  "a whole number of GPUs a NIC nor of NICs a GPU", f"a divisor or a multiple of "
                                  f"gpus_per_node ({g})")

    @staticmethod
    def _tiers_nest(tiers: list[TierSpec]) -> None:
        for i in range(1, len(tiers)):
            inner, outer = tiers[i - 1], tiers[i]
            if outer.span <= inner.span:
                raise ValueError(
                    f"tiers[{i}] ({outer.name!r}) spans {outer.span} GPUs, not more than tiers[{i - 1}] "
                    f"({inner.name!r}) with {inner.span}; spans must grow from the innermost tier outwards")
            if outer.span % inner.span:
                raise ValueError(
                    f"tiers[{i}] ({outer.name!r}) span {outer.span} is not a multiple of tiers[{i - 1}] "
                    f"({inner.name!r}) span {inner.span}; each tier must hold whole copies of the one inside it")
        for i, t in enumerate(tiers):
            if t.full_mesh and (i > 0 or t.topology != "mesh" or t.span < 2 or t.in_network_reduction):
                raise ValueError(f"tiers[{i}] ({t.name!r}) full_mesh needs the innermost tier (tiers[0]), topology "
                                 f"mesh, span >= 2 and no in_network_reduction (here: topology {t.topology!r}, span "
                                 f"{t.span}, in_network_reduction {t.in_network_reduction}); a full mesh of direct "
                                 f"links between the GPUs of one node")
        for i, t in enumerate(tiers):
            if t.torus_dims is None:
                continue
            if t.topology != "torus":
                raise ValueError(f"tiers[{i}] ({t.name!r}) has torus_dims but topology {t.topology!r}; "
                                 "torus_dims needs topology: torus")
            nodes = t.span // (tiers[i - 1].span if i > 0 else 1)
            prod = 1
            for d in t.torus_dims:
                prod *= d
            if prod != nodes:
                raise ValueError(f"tiers[{i}] ({t.name!r}) torus_dims {t.torus_dims} make {prod} nodes, but the tier "
                                 f"holds {nodes} (span / the inner tier's span); their product must match")
        names = [t.name for t in tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, got {names}; a distinct name for each tier")
        for i, t in enumerate(tiers):
            # the label picks NCCL's link class (cost/nccl.py _link_class) and the LL128/net-overhead rules: a typo
            # ('nvlnik', 'carrier-pigeon') was priced as a network link without a word
            if str(t.protocol).lower() not in KNOWN_PROTOCOLS:
                raise ValueError(f"tiers[{i}] ({t.name!r}) protocol {t.protocol[:60]!r} is not a link the model "
                                 f"knows; one of {PROTOCOL_LABELS} (any case), or leave it out")

    @property
    def largest_gpus(self) -> int:
        return self.max_gpus or self.tiers[-1].span

    def require_gpus(self, gpus: int, where: str = "--gpus") -> None:
        """Refuse a GPU count beyond the cluster (the one message every command uses)."""
        if gpus > self.largest_gpus:
            raise InputError(f"{gpus} GPUs: more GPUs than the cluster has ({self.name} has at most "
                             f"{self.largest_gpus})", where=where,
                             allowed=f"at most {self.largest_gpus} GPUs, or a cluster spec with a larger max_gpus")
